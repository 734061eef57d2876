"""Retrying what may come back (a platform API, Redis) without flooding the log or looping forever.

:func:`within` retries a transient failure with capped exponential backoff for a bounded time and
logs once when the thing becomes unreachable and once when it is back -- never once per attempt.
:class:`StateLog` is that "log once per change of state" on its own, for loops that already retry
at their own pace (a sweeper, a health check).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
FIRST_DELAY = 0.25
MAX_DELAY = 4.0


class StateLog:
    """Logs ``what`` going down (WARNING, with the reason) and coming back (INFO), each once."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.down: str | None = None

    def failed(self, reason: object) -> None:
        if self.down is None:
            self.down = str(reason)
            self.logger.warning("%s: %s", self.what, self.down)

    def ok(self) -> None:
        if self.down is not None:
            self.down = None
            self.logger.info("%s: reachable again", self.what)


async def within(
    attempt: Callable[[], Awaitable[T]],
    *,
    transient: tuple[type[BaseException], ...],
    seconds: float,
    state: StateLog,
    first_delay: float = FIRST_DELAY,
    max_delay: float = MAX_DELAY,
) -> T:
    """``await attempt()``, retrying ``transient`` failures with delays doubling from
    ``first_delay`` up to ``max_delay``, for at most ``seconds``; then the last failure is
    raised. Any other exception is raised at once."""
    deadline = time.monotonic() + seconds
    delay = first_delay
    while True:
        try:
            result = await attempt()
        except transient as exc:
            state.failed(exc or type(exc).__name__)
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, max_delay)
            continue
        state.ok()
        return result
