"""The Web API client: configurable base URL, rate-limit retries, no duplicate posts, and a
watch for a token revoked while running.

A 429 means Slack did nothing, so every call may be retried after ``Retry-After``. A dropped
connection is different: the request may have been applied. Re-sending ``chat.update`` or
``views.update`` is harmless, but re-sending ``chat.postMessage`` would post the question set twice
and ``chat.postEphemeral`` would repeat an explanation -- so connection errors are retried for
every method except those two (:data:`NOT_IDEMPOTENT`).

A token checked at start can be revoked later (the app uninstalled, the token rotated): every
call then fails with an authentication error, and Socket Mode would reconnect forever with a
refused ``apps.connections.open``. :class:`WatchedClient` notices the first such answer to any
call -- the poster's, the receiver's, or the Socket Mode reconnect's (which goes through this
client with the app token) -- and :meth:`WatchedClient.refused` hands it to the receiver, which
stops the process in one line naming the variable (:mod:`platforms.slack`).

A refused call is raised as slack_sdk raises it (a ``SlackApiError`` with Slack's response), but
saying in one line what Slack refused and what to fix (:func:`refusal_line`) instead of slack_sdk's
URL and the response's dict repr: the words reach the asker as they are (``ask``'s one-line
failure, the model's error result, ``doctor``'s row).

Left to itself, slack_sdk opens a new HTTP session -- a new TCP and TLS connection to Slack -- for
every call. While a process serves Slack it holds one session for all calls made meanwhile
(:meth:`WatchedClient.kept_session`, held by :func:`bridge.runtime.serving`), so a click's
``chat.update`` reuses a connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from bridge import metrics
from bridge.loops import Flag
from bridge.platform import PlatformUnavailable

NOT_IDEMPOTENT = ("chat.postMessage", "chat.postEphemeral")
AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
"""Slack's answers meaning the token itself is no good (not the call)."""
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})
"""Methods called with the app-level token (``SLACK_APP_TOKEN``); every other uses the bot's."""
FIXES = {
    "channel_not_found": "no such channel, or a private one the bot is not in: check the "
    "channel id, and invite the bot with /invite @your-bot",
    "not_in_channel": "the bot is not in the channel: invite it with /invite @your-bot",
    "is_archived": "the channel is archived: ask in another one",
    "restricted_action": "the workspace's settings do not let the bot post there",
}
"""What to fix for the refusals a person can fix, by Slack's error code (with ``missing_scope``
and :data:`AUTH_ERRORS`, told by :func:`refusal_line`)."""


def error_code(exc: SlackApiError) -> str | None:
    """Slack's error code in ``exc``; ``None`` when the answer was no Slack answer (a proxy's
    error page: slack_sdk then holds the HTTP response, or an empty one)."""
    data = getattr(exc.response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None


def refusal_line(method: str, exc: SlackApiError) -> str:
    """One line for Slack's refusal of ``method``: the error code and what to fix; for an answer
    that is no Slack answer, its HTTP status and where it came from."""
    code = error_code(exc)
    if code is None:
        response = exc.response
        status = getattr(response, "status_code", None) or getattr(response, "status", "?")
        return (
            f"Slack's API answered {method} with HTTP {status} and no Slack error: check "
            "SLACK_API_URL and any proxy on the way"
        )
    fix = FIXES.get(code)
    if code in AUTH_ERRORS:
        variable = "SLACK_APP_TOKEN" if method in APP_TOKEN_METHODS else "SLACK_BOT_TOKEN"
        fix = f"set a valid {variable}"
    elif code == "missing_scope":
        needed = exc.response.get("needed")  # a Slack answer, as it has a code
        scope = f"the {needed} scope" if needed else "a scope it needs"
        fix = f"the token lacks {scope}: add it under OAuth & Permissions, then reinstall the app"
    return f"Slack refused {method}: {code}" + (f" ({fix})" if fix else "")


class SlackRefused(SlackApiError):
    """slack_sdk's ``SlackApiError`` (caught the same way, the same ``response``) in one line:
    :func:`refusal_line`'s words, not slack_sdk's message followed by the response's repr."""

    def __init__(self, method: str, error: SlackApiError) -> None:
        self.line = refusal_line(method, error)
        super().__init__(self.line, error.response)  # type: ignore[no-untyped-call]

    def __str__(self) -> str:
        return self.line


class IdempotentConnectionRetry(AsyncConnectionErrorRetryHandler):
    """Retry connection errors only for calls that are safe to apply twice."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if request.url.rstrip("/").endswith(NOT_IDEMPOTENT):
            return False
        return await super()._can_retry_async(
            state=state, request=request, response=response, error=error
        )


class CountedRateLimitRetry(AsyncRateLimitErrorRetryHandler):
    """Slack's 429 retry, counted (``ask_bridge_platform_errors_total{kind="ratelimited"}``)."""

    async def prepare_for_next_attempt_async(self, **kwargs: Any) -> None:
        metrics.platform_error("slack", "ratelimited")
        await super().prepare_for_next_attempt_async(**kwargs)


class WatchedClient(AsyncWebClient):
    """An ``AsyncWebClient`` that remembers the first call refused for its token (see the module
    docstring); :meth:`refused` waits for it."""

    def __init__(self, **kwargs: Any) -> None:
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        super().__init__(**kwargs)
        self._refusal: PlatformUnavailable | None = None
        self._refused = Flag()  # raised by a call on any loop, awaited by serving()'s

    @property  # type: ignore[override]
    def session(self) -> aiohttp.ClientSession | None:
        """The HTTP session :meth:`kept_session` holds on the running loop, if any. A session
        belongs to the loop that opened it: a call from another loop -- a synchronous agent's,
        beside ``serving()`` -- makes its own, as slack_sdk does with no session."""
        try:
            return self._sessions.get(asyncio.get_running_loop())
        except RuntimeError:
            return None

    @session.setter
    def session(self, value: aiohttp.ClientSession | None) -> None:
        if value is not None:  # slack_sdk's constructor sets None; sessions come per loop
            raise ValueError("a WatchedClient keeps its sessions per event loop: kept_session()")

    async def api_call(self, api_method: str, **kwargs: Any) -> Any:  # type: ignore[override]
        try:
            return await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            error = error_code(exc)
            if error in AUTH_ERRORS and self._refusal is None:
                variable = (
                    "SLACK_APP_TOKEN" if api_method in APP_TOKEN_METHODS else "SLACK_BOT_TOKEN"
                )
                self._refusal = PlatformUnavailable(
                    f"Slack refused {variable} ({error}) while running: it was revoked or "
                    "replaced; set a valid token and restart"
                )
                self._refused.set()
            raise SlackRefused(api_method, exc) from None

    @asynccontextmanager
    async def kept_session(self) -> AsyncIterator[None]:
        """Every call made in this context, on this event loop, shares one HTTP session (its
        connections kept alive between calls), closed when the context ends. Where a session is
        open already on this loop, it is the one used, and left open."""
        loop = asyncio.get_running_loop()
        kept = self._sessions.get(loop)
        if kept is not None and not kept.closed:
            yield
            return
        session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            trust_env=self.trust_env_in_session,
        )
        self._sessions[loop] = session
        try:
            yield
        finally:
            if self._sessions.get(loop) is session:
                del self._sessions[loop]
            await session.close()

    async def refused(self) -> PlatformUnavailable:
        """Once a call was refused for its token: why, in one line naming the variable."""
        await self._refused.wait()
        assert self._refusal is not None
        return self._refusal


class EffectiveLevel(logging.LoggerAdapter[logging.Logger]):
    """slack_sdk's own logger, whose ``level`` reads as the level it logs at. slack_sdk builds
    each call's debug lines -- the request's whole JSON (a message's blocks), the response's
    headers and body -- whenever its logger's *own* level is at most ``DEBUG``, which a logger
    nobody set (``NOTSET``, 0) always is, and only then hands them to ``debug``, which drops them
    unless DEBUG is on: about 25 us of every call (a click's ``chat.update``). Read through the
    logging tree, the level is what ``LOG_LEVEL`` (or an operator's own configuration of
    ``slack_sdk``) says, whenever it is read."""

    @property
    def level(self) -> int:
        return self.logger.getEffectiveLevel()


SDK_LOGGER = EffectiveLevel(logging.getLogger("slack_sdk.web.async_base_client"))
"""The logger every client of ours logs through (slack_sdk's default one, as slack_sdk reads
it: :class:`EffectiveLevel`); Bolt's per-request clients take their app client's."""


def make_client(token: str, base_url: str, *, rate_limit_retries: int = 3) -> WatchedClient:
    handlers: list[AsyncRetryHandler] = [
        IdempotentConnectionRetry(max_retry_count=1),
        CountedRateLimitRetry(max_retry_count=rate_limit_retries),
    ]
    # slack_sdk reads only `level` and the logging calls of what it is given as a Logger
    logger = cast(logging.Logger, SDK_LOGGER)
    return WatchedClient(token=token, base_url=base_url, retry_handlers=handlers, logger=logger)
