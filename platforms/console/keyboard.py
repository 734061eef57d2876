"""Lines typed at the terminal, read without blocking any event loop.

``input()`` blocks until the person presses Enter, so it runs in a daemon thread of its own and
its line is handed to the waiting prompt on that prompt's loop. Not ``asyncio.to_thread``: on
Ctrl-C ``asyncio.run`` cancels its task and then joins the default executor, where ``input()``
would sit for ever; a daemon thread is abandoned instead and does not keep the process alive.

One ask holds the keyboard at a time (:meth:`Keyboard.held`): concurrent calls in one process,
on any event loop, wait their turn, so questions of two asks never interleave.

A read whose prompt was abandoned (its ask ended, or was cancelled, while the person had not
answered) is still blocked in ``input()``, and a second thread reading beside it would get no
line before it does. So one read at a time: the next prompt takes the read in flight over,
printing its own prompt, and gets the next line.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import TextIO

CLOSED = "the terminal closed before the person answered"

TURN_POLL = 0.05
"""Seconds between looks at whether the keyboard is free: calls on different event loops (an
async caller's, the one synchronous calls share) wait for one another, so no loop's lock or
event will do, and a person does not notice 50 ms."""


class TerminalClosed(RuntimeError):
    """End of input (Ctrl-D, a closed terminal) before the line was typed."""

    def __init__(self) -> None:
        super().__init__(CLOSED)


class Keyboard:
    """The terminal's input (see the module): :data:`KEYBOARD`, one per process."""

    def __init__(self) -> None:
        self._turn = threading.Lock()
        self._lock = threading.Lock()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[str | None]] | None = None
        """Who gets the line being read: the latest prompt."""
        self._reading = False
        """A thread is in ``input()``."""

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold the keyboard for one ask."""
        while not self._turn.acquire(blocking=False):  # noqa: ASYNC110 -- an Event has one loop
            await asyncio.sleep(TURN_POLL)
        try:
            yield
        finally:
            self._turn.release()

    async def line(self, prompt: str, out: TextIO) -> str:
        """The next line typed after ``prompt``; :class:`TerminalClosed` at end of input."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()
        with self._lock:
            self._waiter = (loop, future)
            taken_over, self._reading = self._reading, True
        if taken_over:
            out.write(prompt)
            out.flush()
        else:
            threading.Thread(
                target=self._read, args=(prompt,), name="console keyboard", daemon=True
            ).start()
        typed = await future
        if typed is None:
            raise TerminalClosed
        return typed

    def _read(self, prompt: str) -> None:
        typed: str | None
        try:
            typed = input(prompt)
        except (EOFError, OSError):
            typed = None
        with self._lock:
            self._reading = False
            waiter, self._waiter = self._waiter, None
        assert waiter is not None  # set by the prompt that started this read or took it over
        loop, future = waiter
        try:
            loop.call_soon_threadsafe(_settle, future, typed)
        except RuntimeError:  # its loop has closed: nobody waits for this line any more
            pass


def _settle(future: asyncio.Future[str | None], typed: str | None) -> None:
    if not future.done():  # not abandoned meanwhile
        future.set_result(typed)


KEYBOARD = Keyboard()
"""The process's one terminal: every console platform object reads it."""
