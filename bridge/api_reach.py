"""A chat platform's API reached as a command starts: tried again while it cannot be reached, then
one line that names the setting pointing at it.

Each platform's start check -- Slack's ``auth.test`` and ``apps.connections.open``
(``platforms/slack/credentials.py``), Discord's login (``platforms/discord/client.py``) -- makes its
first call through :func:`reach`: a network failure (the platform's ``transient`` kinds) is retried
with waits doubling from a quarter of a second to four (tenacity) for :data:`REACH_SECONDS`; the
outage is logged once, and its end once (:class:`~bridge.logs.StateLog`), never each attempt;
still unreachable, it is :class:`~bridge.platform.PlatformUnavailable` in one line. What the
platform answers -- a refused token above all -- is the platform's to judge: it is raised as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from bridge.logs import StateLog
from bridge.platform import PlatformUnavailable

T = TypeVar("T")

REACH_SECONDS = 10.0
"""Seconds an unreachable API is tried again for, and then at most one more wait (four seconds)
and try: tenacity's ``stop_after_delay`` lets the last wait run past it."""


async def reach(
    call: Callable[[], Awaitable[T]],
    *,
    api: str,
    setting: str,
    transient: tuple[type[BaseException], ...],
    log: logging.Logger,
    seconds: float = REACH_SECONDS,
) -> T:
    """``call()``, tried again while it fails with one of ``transient`` for ``seconds``; then
    ``PlatformUnavailable``: ``cannot reach <api>'s API at <setting>: <why>`` (``setting``: the
    variable and its value, ``SLACK_API_URL=https://…``). The outage and its end are logged to
    ``log``, once each, as ``<api> API at <setting>``."""
    state = StateLog(log, f"{api} API at {setting}")
    retrying = AsyncRetrying(
        retry=retry_if_exception_type(transient),
        wait=wait_exponential(multiplier=0.25, max=4.0),
        stop=stop_after_delay(seconds),
        after=state.attempt_failed,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                answer = await call()
    except transient as exc:
        raise PlatformUnavailable(
            f"cannot reach {api}'s API at {setting}: {exc or type(exc).__name__}"
        ) from None
    state.ok()
    return answer
