"""The runtime ``ask``, ``serve`` and ``mcp`` share: the store, the standalone policy, receiving
clicks, sweeping, and stopping on a signal.

**Standalone** (no ``REDIS_URL``): the store is this process's own memory, so an ask lives only as
long as the process. Then

* nothing could ever take a deferred answer: ``mode="defer"`` is refused, and a wait that runs out
  closes the ask as expired (``on_timeout="error"``) instead of deferring (:func:`chat_policy`);
* nobody else receives the clicks: this process serves them itself through the platform's
  receiver, which must be able to work here (:func:`bridge.platform.check_standalone`), and
  sweeps its own asks so they expire (:meth:`Runtime.own_clicks`).

With ``REDIS_URL`` set, ``ask`` and ``mcp`` only post and wait; ``ask-bridge serve`` replicas
receive the clicks and sweep (:func:`serving`).

**Signals**: inside :func:`stop_on_signals`, SIGINT and SIGTERM cancel the main task once; every
cleanup then runs to its end (a second signal is ignored), and the context ends normally, saying
which signal stopped it. Tasks are stopped with :func:`bridge.aio.stop`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, NoReturn, Protocol, TypeVar, runtime_checkable

from bridge.aio import stop
from bridge.asking import AskPolicy
from bridge.health import Health
from bridge.http_server import HttpServer
from bridge.platform import (
    Platform,
    PlatformUnavailable,
    Receiver,
    check_credentials,
    check_standalone,
    held_connections,
)
from bridge.record import MAX_EXPIRES, MAX_REQUIRED
from bridge.settings import EngineSettings, open_store
from bridge.store.base import Store
from bridge.sweeper import Sweeper
from bridge.web_links import (
    URL_ENV,
    PagesPlatform,
    listening_url,
    loopback,
    read_web_settings,
    serving_pages_at,
)
from bridge.webhook_settings import WebhookSettings

T = TypeVar("T")
log = logging.getLogger(__name__)
SIGNALS = (signal.SIGINT, signal.SIGTERM)
DEFAULT_SWEEP_INTERVAL = 5.0
STANDALONE_DEFER = (
    "mode defer needs REDIS_URL: without a shared store the ask lives only as long as this "
    "process, so nothing could take the answer later. Set REDIS_URL and run `ask-bridge serve`, "
    "or wait for the answer (mode block)."
)


def chat_policy(
    standalone: bool,
    *,
    wait: float | None = None,
    expires: float | None = None,
    mode: Literal["block", "defer"] = "block",
    answerers: Sequence[str] = (),
    required: int = 1,
    tell_model_who: bool = False,
    follow_ups: Mapping[str, Any] | None = None,
    notify: Sequence[str] = (),
) -> AskPolicy:
    """The :class:`AskPolicy` for a process's chat handler (``None``: the policy's defaults).
    ``follow_ups``: its reminder and escalation fields (``remind_after``, ``remind_times``,
    ``escalate_after``, ``escalate_to``), checked as the policy checks them.

    A wait never outlasts the ask; a wait that runs out closes the ask as expired when nothing
    could take a deferred answer (standalone) or when the ask would have expired anyway. Raises
    ``ValueError`` with a clear message for a negative wait, a non-positive expiry, a
    ``required`` outside 1 to :data:`~bridge.record.MAX_REQUIRED`, or ``mode="defer"``
    standalone.
    """
    if not 1 <= required <= MAX_REQUIRED:
        raise ValueError(
            f"the people required to agree must be 1 to {MAX_REQUIRED}, not {required}"
        )
    defaults = AskPolicy()
    wait = defaults.wait if wait is None else wait
    expires = defaults.expires if expires is None else expires
    if wait < 0:
        raise ValueError("the wait must be zero or more seconds")
    if not 0 < expires <= MAX_EXPIRES:  # NaN and infinity too
        raise ValueError(
            f"the expiry must be more than zero seconds and at most {MAX_EXPIRES:.0f} "
            f"(ten years), not {expires:g}"
        )
    if mode == "defer":
        if standalone:
            raise ValueError(STANDALONE_DEFER)
        wait = 0.0
    close = standalone or (mode == "block" and wait >= expires)
    return AskPolicy(
        wait=min(wait, expires),
        expires=expires,
        on_timeout="error" if close else "defer",
        mode=mode,
        answerers=tuple(answerers),
        required=required,
        tell_model_who=tell_model_who,
        notify=tuple(notify),
        **(follow_ups or {}),
    )


@runtime_checkable
class BindCheck(Protocol):
    """Optional for a :class:`~bridge.platform.Platform`: whether its routes may be served on
    ``host`` (the web platform with a secret only its process knows serves loopback only)."""

    def check_bind(self, host: str) -> None:
        """Raise ``PlatformUnavailable``, in one line, when serving on ``host`` is not safe."""
        ...


class Serving:
    """The receivers :func:`serving` runs (a failure of one surfaces through :meth:`wait` or
    :meth:`guard`), and the HTTP server holding their routes, if any had routes."""

    def __init__(
        self, running: dict[asyncio.Task[None], str], server: HttpServer | None = None
    ) -> None:
        self._running = running
        self.server = server

    async def wait(self) -> NoReturn:
        """Until a receiver stops; raise why (its failure, else ``PlatformUnavailable``)."""
        if not self._running:
            await asyncio.Event().wait()
        await asyncio.wait(self._running, return_when=asyncio.FIRST_COMPLETED)
        _raise_stopped(self._running)

    async def guard(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` while receiving: if a receiver stops first, ``work`` is stopped (its own
        cleanup runs) and the receiver's failure raised; cancelling this stops ``work`` too."""
        if not self._running:
            return await work
        doing = asyncio.create_task(work)
        watching = asyncio.create_task(self.wait())
        try:
            await asyncio.wait({doing, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await stop(watching)
            await stop(doing)
        if doing.cancelled():
            return watching.result()  # raises the receiver's failure
        return doing.result()


def _raise_stopped(running: dict[asyncio.Task[None], str]) -> NoReturn:
    for task, name in running.items():
        if task.done():
            failure = None if task.cancelled() else task.exception()
            if failure is not None:
                raise failure
            raise PlatformUnavailable(f"{name} stopped receiving interactions")
    raise AssertionError("no receiver has stopped")


@asynccontextmanager
async def serving(
    platforms: Sequence[Platform],
    store: Store,
    *,
    host: str = "127.0.0.1",
    port: int = 3000,
    sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
    watch: str | Literal[False] | None = False,
    webhooks: WebhookSettings | None = None,
) -> AsyncIterator[Serving]:
    """Receive the clicks of every one of ``platforms`` and sweep ``store`` (showing ended asks
    through one poster per platform), until the context ends; it is entered once every receiver
    is ready.

    A platform that may not serve ``host`` (:class:`BindCheck`) stops it first. When one of
    them serves the web pages, links made meanwhile without ``ASK_BRIDGE_WEB_URL`` (the chat
    messages' ``Open in browser``) carry ``host:port`` if it is loopback; otherwise no message
    offers the button, said in one line at start. Each platform's
    receiver is made next, so a setting it lacks (Slack's HTTP mode without
    ``SLACK_SIGNING_SECRET``) stops it at once, then each platform's credentials are checked
    (:func:`~bridge.platform.check_credentials`: a network call, retried a while when
    unreachable).
    The routes of HTTP receivers go on one :class:`~bridge.http_server.HttpServer` at
    ``host:port`` (it logs each route's URL). ``watch`` (``serve``: the ``REDIS_URL``, ``None``
    for the memory store) also puts ``/readyz`` and ``/metrics`` there and watches the store
    (:class:`~bridge.health.Health`); without it the server starts only when there are routes.
    On exit: the server stops, the receivers stop and drain (clicks in flight finish), the
    sweeper stops. Raises ``PlatformUnavailable`` if a platform is not configured, refuses its
    credentials or a receiver stops before it was ready,
    :class:`~bridge.http_server.CannotListen` if the address cannot be bound.
    ``webhooks`` (when enabled): the outcome of every ask that ends is sent to its webhooks
    meanwhile (:class:`~bridge.webhooks.WebhookWorker`).
    """
    for platform in platforms:
        if isinstance(platform, BindCheck):
            platform.check_bind(host)
    pages = any(isinstance(p, PagesPlatform) for p in platforms)
    with serving_pages_at(pages_url(host, port) if pages else None):
        async with _serving(
            platforms,
            store,
            host=host,
            port=port,
            sweep_interval=sweep_interval,
            watch=watch,
            webhooks=webhooks,
        ) as receiving:
            yield receiving


def pages_url(host: str, port: int) -> str | None:
    """The base URL of the web pages served at ``host:port`` that links made here carry when
    ``ASK_BRIDGE_WEB_URL`` is unset (:func:`~bridge.web_links.browser_links`); ``None`` off
    loopback (said in one line: no browser can be sent there) or for a port not chosen yet."""
    settings = read_web_settings()
    if settings.configured and settings.url is None and not loopback(host):
        log.warning(
            "the web platform: messages offer no Open in browser button: %s is unset and %s "
            "is not loopback, so links could carry no address a browser reaches; set it to "
            "the public address of these pages",
            URL_ENV,
            host,
        )
    return listening_url(host, port)


@asynccontextmanager
async def _serving(
    platforms: Sequence[Platform],
    store: Store,
    *,
    host: str,
    port: int,
    sweep_interval: float,
    watch: str | Literal[False] | None,
    webhooks: WebhookSettings | None,
) -> AsyncIterator[Serving]:
    receivers: dict[str, Receiver] = {p.name: p.receiver(store) for p in platforms}
    for platform in platforms:
        await check_credentials(platform)
    await store.learn_terms()  # every ask created from now on is judged here without a read
    async with AsyncExitStack() as held:  # closed last: after the sweeper's last showing
        for platform in platforms:
            await held.enter_async_context(held_connections(platform))
        sweeper = Sweeper(store, {p.name: p.poster() for p in platforms}, interval=sweep_interval)
        routes = [route for receiver in receivers.values() for route in receiver.routes()]
        health = None if watch is False else Health(store, watch, receivers)
        server = HttpServer(routes, host, port, health=health) if routes or health else None
        sweeping = asyncio.create_task(sweeper.run())
        notifying = None
        if webhooks is not None and webhooks.enabled:
            from bridge.webhook_settings import shown_url
            from bridge.webhooks import WebhookWorker

            worker = WebhookWorker(
                store,
                url=webhooks.url,
                secret=webhooks.secret,
                destinations=webhooks.destinations,
            )
            notifying = asyncio.create_task(worker.run(), name="ask-bridge webhooks")
            where = shown_url(webhooks.url) if webhooks.url else "no URL for every ask"
            allowed = len(webhooks.destinations)
            log.info("webhooks: sending outcomes (%s; %d notify prefixes)", where, allowed)
        watching = asyncio.create_task(health.watch()) if health is not None else None
        running: dict[asyncio.Task[None], str] = {}
        try:
            if server is not None:
                await server.start()
            readies: list[asyncio.Event] = []
            for name, receiver in receivers.items():
                ready = asyncio.Event()
                running[asyncio.create_task(receiver.run(ready), name=f"receive {name}")] = name
                readies.append(ready)
            await _until_ready(running, readies)
            if health is not None:
                health.started = True
            yield Serving(running, server)
        finally:
            if watching is not None:
                await stop(watching)
            if server is not None:
                await server.stop()
            for task in running:
                await stop(task)  # a failure was raised through Serving already
            for name, receiver in receivers.items():
                try:
                    await receiver.drain()
                except Exception:
                    log.warning("%s: clicks in flight could not finish", name, exc_info=True)
            failure = await stop(sweeping)
            if failure is not None:
                log.warning("the sweeper failed", exc_info=failure)
            if notifying is not None:
                failure = await stop(notifying)
                if failure is not None:
                    log.warning("the webhook worker failed", exc_info=failure)


async def _until_ready(
    running: dict[asyncio.Task[None], str], readies: list[asyncio.Event]
) -> None:
    async def all_ready() -> None:
        for ready in readies:
            await ready.wait()

    waiting = asyncio.create_task(all_ready())
    try:
        await asyncio.wait({waiting, *running}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await stop(waiting)
    if not all(ready.is_set() for ready in readies):
        _raise_stopped(running)


class Runtime:
    """One process's engine: its settings, its store (opened on first use), and whether it is
    standalone (no ``REDIS_URL``: see the module docstring)."""

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self.settings = settings or EngineSettings()

    @property
    def standalone(self) -> bool:
        return not self.settings.redis_url

    @cached_property
    def store(self) -> Store:
        return open_store(self.settings)

    def policy(
        self,
        *,
        wait: float | None = None,
        expires: float | None = None,
        mode: Literal["block", "defer"] = "block",
        answerers: Sequence[str] = (),
        required: int = 1,
        tell_model_who: bool = False,
        follow_ups: Mapping[str, Any] | None = None,
        notify: Sequence[str] = (),
    ) -> AskPolicy:
        """:func:`chat_policy` for this process."""
        return chat_policy(
            self.standalone,
            wait=wait,
            expires=expires,
            mode=mode,
            answerers=answerers,
            required=required,
            tell_model_who=tell_model_who,
            follow_ups=follow_ups,
            notify=notify,
        )

    async def reachable(self, waiting: Callable[[str], object] | None = None) -> None:
        """Raise :class:`~bridge.store.base.StoreUnavailable`, in one line naming ``REDIS_URL``
        (redacted), when the shared store cannot be reached within ``ASK_BRIDGE_REDIS_WAIT``
        seconds (a Redis restarting as the process starts is waited for); ``waiting``: how to
        tell a person after the first second (:func:`bridge.redis_probe.reach`)."""
        if self.settings.redis_url:
            from bridge.redis_probe import reach

            await reach(self.settings.redis_url, seconds=self.settings.redis_wait, waiting=waiting)

    async def ready_to_ask(
        self, platform: Platform, waiting: Callable[[str], object] | None = None
    ) -> None:
        """Before posting: the store is reachable (:meth:`reachable`) and ``platform`` accepts
        its credentials (standalone, :meth:`own_clicks` checks them as it starts receiving)."""
        await self.reachable(waiting)
        if not self.standalone:
            await check_credentials(platform)

    def check(self, platform: Platform) -> None:
        """Raise ``PlatformUnavailable`` if this process would have to receive ``platform``'s
        clicks itself (standalone) but cannot (e.g. Slack's HTTP mode)."""
        if self.standalone:
            check_standalone(platform)

    @asynccontextmanager
    async def own_clicks(
        self,
        platform: Platform,
        *also: Platform,
        port: int = 0,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
    ) -> AsyncIterator[Serving]:
        """Standalone: receive ``platform``'s clicks (and those of ``also``: where an escalation
        posts the ask again) and sweep the store here, for the context's length (see
        :func:`serving`); a platform with HTTP routes (the web pages) is served on 127.0.0.1
        at ``port`` (0: a free one; the :class:`Serving`'s server says which). With a shared
        store that is ``serve``'s job: nothing runs, and the :class:`Serving` yielded guards
        nothing."""
        if not self.standalone:
            yield Serving({})
            return
        every = [platform, *(p for p in also if p.name != platform.name)]
        for each in every:
            self.check(each)
        async with serving(
            every, self.store, host="127.0.0.1", port=port, sweep_interval=sweep_interval
        ) as receiving:
            yield receiving

    async def aclose(self) -> None:
        """Close the store, if it was opened."""
        if "store" in self.__dict__:
            await self.store.aclose()


def settle_heap() -> None:
    """Keep what a long-running command built before its ready line (the imported modules, the
    platforms' clients, the settings: several hundred thousand objects that live as long as the
    process) out of the garbage collector's full passes, which otherwise walk all of it: measured
    in ``serve`` at 200 clicks per second, each full pass stalled every click in flight for
    20-140 ms, the whole of the ack's p99. What is created afterwards is collected as before."""
    gc.collect()
    gc.freeze()


@dataclass
class Stopped:
    """Which signal stopped the main task, if one did."""

    signal: signal.Signals | None = None


@asynccontextmanager
async def stop_on_signals() -> AsyncIterator[Stopped]:
    """SIGINT or SIGTERM cancels the current task once; the cancellation ends here (the context
    exits normally, ``Stopped.signal`` set), after every cleanup inside it has run. Further
    signals are ignored from the first one on, so they cannot cut a cleanup short."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("stop_on_signals() needs a running task")
    loop = asyncio.get_running_loop()
    stopped = Stopped()

    def on_signal(sig: signal.Signals) -> None:
        if stopped.signal is None:
            stopped.signal = sig
            task.cancel()

    for sig in SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield stopped
    except asyncio.CancelledError:
        if stopped.signal is None:
            raise
        task.uncancel()
    finally:
        for sig in SIGNALS:  # the process is ending: a late signal must not cut teardown short
            loop.add_signal_handler(sig, lambda: None)
