"""Event loops: the one every synchronous caller shares, and state kept per loop.

Whatever asyncio makes is bound to the loop that made it: a socket's streams, a future, a task,
an ``Event`` with waiters, an aiohttp session. Used from another loop it fails ("attached to a
different loop", "Event loop is closed") or never fires, and when its loop closes it dies. A
synchronous caller, for its part, reaches async code by running a loop; ``asyncio.run`` makes a
new one per call and closes it after. Together these broke synchronous ``ask_user`` calls: the
store's wake-up listener, lease renewals and connection pool started on the first call's loop
and died with it, so the second call never heard its answer. Two rules, applied by everything
in the bridge that keeps work or connections between calls:

1. **Synchronous callers share one loop** (:func:`run`): a long-lived loop in a daemon thread,
   made on first use and stopped at exit. ``AskUserTool.invoke`` and ``__call__`` (so
   ``run_tool_call``, chatlas's ``chat()``, LangChain's ``invoke()``) run their async work there.
   Chosen over a loop per call because a store's subscription, lease renewals and pool then live
   as long as the process: the tenth synchronous ask hears its answer as the first did, an
   answer given after a lease period still reaches its waiting call (the renewals kept running),
   and calls from many threads at once -- LangChain runs tools in a thread pool -- share one
   subscription and one pool rather than each opening its own for the length of one ask.

2. **What is bound to a loop is kept per loop** (:class:`PerLoop`): made on first use in a loop,
   closed when that loop shuts down (``asyncio.run``, ``asyncio.Runner`` and pytest finalise a
   loop's async generators as it closes; a suspended one here closes what it guards) or by an
   explicit ``aclose``. So async callers on loops of their own -- ``asyncio.run`` per request,
   pydantic-ai's ``run_sync``, a notebook -- can share one store with the synchronous callers, at
   the same time, each through its own connections, and nothing outlives its loop.

Rule 2 alone would do for correctness, but every synchronous ask would then open and close a pool
and a subscription; rule 1 alone would leave async callers on other loops with a store bound to
the bridge's loop. Objects that live only inside one ``serving()`` context (its answering layer,
sweeper, show queues, webhook worker) are made on that context's loop and never leave it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

from bridge.aio import stop

T = TypeVar("T")

STOP_WITHIN = 10.0
"""Seconds a cancelled synchronous call (Ctrl-C) is given to finish cleaning up -- its ask closed
as cancelled and re-rendered -- and the bridge loop to close what it holds at exit."""


# -- rule 1: the bridge loop ---------------------------------------------------------------------


class _BridgeLoop:
    """The loop synchronous callers share, in its daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="ask-bridge loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def alive(self) -> bool:
        return self.thread.is_alive() and not self.loop.is_closed()

    def shut_down(self) -> None:
        """Cancel what still runs there, close what :class:`PerLoop` holds there (its async
        generators), then stop and close the loop: nothing pending is left at exit."""
        if not self.alive():
            return
        closing = asyncio.run_coroutine_threadsafe(_finish(self.loop), self.loop)
        try:
            closing.result(STOP_WITHIN)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(STOP_WITHIN)
        if not self.thread.is_alive():
            self.loop.close()


async def _finish(loop: asyncio.AbstractEventLoop) -> None:
    current = asyncio.current_task()
    for task in [t for t in asyncio.all_tasks(loop) if t is not current]:
        await stop(task)
    await loop.shutdown_asyncgens()


_bridge: _BridgeLoop | None = None
_bridge_lock = threading.Lock()


def bridge_loop() -> asyncio.AbstractEventLoop:
    """The loop synchronous callers share, started on first use (again if it ever died)."""
    global _bridge
    with _bridge_lock:
        if _bridge is None or not _bridge.alive():
            if _bridge is None:
                atexit.register(_shut_down)
            _bridge = _BridgeLoop()
        return _bridge.loop


def _shut_down() -> None:
    with _bridge_lock:
        bridge = _bridge
    if bridge is not None:
        bridge.shut_down()


def on_bridge_loop() -> bool:
    """Whether the caller runs on the bridge loop's own thread (where :func:`run` would wait
    for itself)."""
    bridge = _bridge
    return bridge is not None and threading.current_thread() is bridge.thread


async def _kept(awaitable: Awaitable[T]) -> tuple[T | None, BaseException | None]:
    """``awaitable``'s value, or the ``KeyboardInterrupt``/``SystemExit`` it raised: asyncio lets
    those out of the task into ``run_forever``, which would end the bridge loop for everyone
    instead of reaching the one caller they belong to."""
    try:
        return await awaitable, None
    except (KeyboardInterrupt, SystemExit) as exc:
        return None, exc


def run(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` on the bridge loop for a synchronous caller, with the caller's context
    variables, and return its value or raise its exception in the caller's thread.

    Ctrl-C (``KeyboardInterrupt`` in the waiting thread) cancels the work and gives it up to
    :data:`STOP_WITHIN` seconds to clean up -- an ask is closed as cancelled and re-rendered,
    as under ``asyncio.run`` -- before the interrupt propagates; a second Ctrl-C stops waiting.
    Works in any thread, also one running a loop of its own (which it blocks, as any synchronous
    call does), but not on the bridge loop's own thread: there it would wait for itself.
    """
    if on_bridge_loop():
        if asyncio.iscoroutine(awaitable):
            awaitable.close()  # never started: no "never awaited" warning on top
        raise RuntimeError(
            "a synchronous ask_user call was made from a coroutine running on the bridge's own "
            "event loop, where it would wait for itself: await tool.acall(...) (or ainvoke) there"
        )
    loop = bridge_loop()
    context = contextvars.copy_context()
    done: concurrent.futures.Future[tuple[T | None, BaseException | None]] = (
        concurrent.futures.Future()
    )
    started: list[asyncio.Task[tuple[T | None, BaseException | None]]] = []

    def start() -> None:
        if not done.set_running_or_notify_cancel():
            return
        task = loop.create_task(_kept(awaitable), context=context)
        started.append(task)
        task.add_done_callback(lambda t: _settle(done, t))

    loop.call_soon_threadsafe(start)
    try:
        value, escaped = done.result()
    except BaseException:
        if done.done():
            raise  # the work's own outcome
        # Ctrl-C (or another asynchronous exception) in this thread: stop the work, let it
        # clean up, then let the interrupt go on. start() was scheduled first, so it has run.
        asyncio.run_coroutine_threadsafe(_cancel(started), loop)
        try:
            done.result(STOP_WITHIN)
        except BaseException:  # its cancellation, its own error, a timeout or a second Ctrl-C
            pass
        raise
    if escaped is not None:
        raise escaped
    return value  # type: ignore[return-value]  # T when nothing escaped


async def _cancel(started: list[asyncio.Task[Any]]) -> None:
    for task in started:
        await stop(task)


def _settle(
    done: concurrent.futures.Future[tuple[T | None, BaseException | None]],
    task: asyncio.Task[tuple[T | None, BaseException | None]],
) -> None:
    if done.done():
        return
    if task.cancelled():
        # ``done.cancel()`` cannot: the future is running, and the caller would wait forever
        done.set_exception(concurrent.futures.CancelledError())
        return
    error = task.exception()
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(task.result())


# -- rule 2: state kept per loop -------------------------------------------------------------------


class PerLoop(Generic[T]):
    """One ``T`` per event loop that uses it: made by ``make`` on first use in a loop (on that
    loop), closed by ``close`` on that loop when the loop shuts down or at :meth:`aclose`.

    :meth:`get` costs one identity check when the same loop asks again, so it can sit on a hot
    path. Loops may use it from several threads at once; each gets only its own ``T``.
    """

    def __init__(self, make: Callable[[], T], close: Callable[[T], Awaitable[None]]) -> None:
        self._make = make
        self._close = close
        self._lock = threading.Lock()
        self._held: dict[asyncio.AbstractEventLoop, tuple[T, AsyncGenerator[None, None]]] = {}
        self._last: tuple[asyncio.AbstractEventLoop, T] | None = None

    def get(self) -> T:
        """This loop's ``T`` (made now if it has none). Needs a running loop."""
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last[0] is loop:
            return last[1]
        with self._lock:
            held = self._held.get(loop)
            if held is None:
                for old in [old for old in self._held if old.is_closed()]:
                    del self._held[old]  # closed without finalising: nothing left to close
                item = self._make()
                self._held[loop] = held = (item, self._closer(loop, item))
            self._last = (loop, held[0])
            return held[0]

    def latest(self) -> T | None:
        """The ``T`` last handed out, on whichever loop (for reading figures outside a loop)."""
        last = self._last
        return None if last is None else last[1]

    def _closer(self, loop: asyncio.AbstractEventLoop, item: T) -> AsyncGenerator[None, None]:
        """A suspended async generator, registered with ``loop`` (which is running: this is
        called from :meth:`get` on it), whose ``finally`` closes ``item``: the loop finalises it
        as it shuts down, :meth:`aclose` earlier."""

        async def closer() -> AsyncGenerator[None, None]:
            try:
                yield
            finally:
                self._forget(loop, item)
                await self._close(item)

        gen = closer()
        first: Any = gen.__anext__()  # the loop's first-iteration hook registers gen with it
        try:
            first.send(None)  # runs to the yield: no await before it, so no task is needed
        except StopIteration:
            pass
        return gen

    def _forget(self, loop: asyncio.AbstractEventLoop, item: T) -> None:
        with self._lock:
            held = self._held.get(loop)
            if held is not None and held[0] is item:
                del self._held[loop]
            last = self._last
            if last is not None and last[0] is loop:
                self._last = None

    async def aclose(self) -> None:
        """Close this loop's ``T`` now; every other loop's is closed on that loop, as soon as it
        runs (or as it shuts down)."""
        here = asyncio.get_running_loop()
        with self._lock:
            everywhere = list(self._held.items())
        for loop, (_, closer) in everywhere:
            if loop is here:
                await closer.aclose()
            elif not loop.is_closed():
                _close_there(loop, closer)


def _close_there(loop: asyncio.AbstractEventLoop, closer: AsyncGenerator[None, None]) -> None:
    def start() -> None:
        loop.create_task(closer.aclose())

    try:
        loop.call_soon_threadsafe(start)
    except RuntimeError:  # closed meanwhile: it finalised the generator as it closed
        pass


class Flag:
    """A one-way signal that any thread or loop may raise and any number of loops await.

    ``asyncio.Event`` serves the one loop its waiters are on: set from another thread it wakes
    them unsafely, if at all. A client shared by a synchronous agent (the bridge loop) and
    ``serving()`` (its own loop) raises this wherever it learns the news."""

    def __init__(self) -> None:
        self._raised = False
        self._lock = threading.Lock()
        self._waiters: list[asyncio.Future[None]] = []

    def is_set(self) -> bool:
        return self._raised

    def set(self) -> None:
        with self._lock:
            self._raised = True
            waiters, self._waiters = self._waiters, []
        for fut in waiters:
            try:
                fut.get_loop().call_soon_threadsafe(_resolve, fut)
            except RuntimeError:  # its loop closed: nobody waits there any more
                pass

    async def wait(self) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._raised:
                return
            self._waiters.append(fut)
        try:
            await fut
        finally:
            with self._lock:
                if fut in self._waiters:
                    self._waiters.remove(fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
