"""Slack's credentials checked at start: ``auth.test`` for the bot token, ``apps.connections.open``
for the app-level token.

A refused token stops the process in one line naming the variable (instead of Socket Mode's
endless reconnect loop, or an HTTP-mode ``serve`` that says ``ready`` and then fails every post).
A Slack API that cannot be reached is retried (:func:`bridge.api_reach.reach`: waits doubling from
a quarter of a second to four, for :data:`REACH_SECONDS`), logged once, then reported naming
``SLACK_API_URL``.
``ask-bridge doctor`` reads the same answers for the token's scopes and the bot's channel
membership.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bridge.api_reach import REACH_SECONDS as REACH_SECONDS
from bridge.api_reach import reach
from bridge.platform import PlatformUnavailable
from platforms.slack.client import error_code, refusal_line

NEEDED_SCOPES = ("chat:write",)
"""Bot scopes every use needs (``usergroups:read`` only when an answerer is a user group)."""
OPTIONAL_SCOPES = ("usergroups:read",)
TRANSIENT = (aiohttp.ClientError, OSError, asyncio.TimeoutError)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot token is: ``scopes`` is ``None`` when Slack did not say (no header)."""

    user_id: str
    team: str
    scopes: frozenset[str] | None


async def check_bot_token(
    client: AsyncWebClient, api_url: str, *, seconds: float = REACH_SECONDS
) -> BotIdentity:
    """``auth.test`` with ``SLACK_BOT_TOKEN``; ``PlatformUnavailable`` (one line) if refused or
    unreachable for ``seconds``."""
    response = await _call(
        lambda: client.auth_test(), "auth.test", "SLACK_BOT_TOKEN", api_url, seconds=seconds
    )
    header = {k.lower(): v for k, v in (response.headers or {}).items()}.get("x-oauth-scopes")
    scopes = None if header is None else frozenset(s.strip() for s in header.split(",") if s)
    return BotIdentity(
        user_id=str(response.get("user_id", "")), team=str(response.get("team", "")), scopes=scopes
    )


async def check_app_token(app_token: str, api_url: str, *, seconds: float = REACH_SECONDS) -> None:
    """``apps.connections.open`` with ``SLACK_APP_TOKEN`` (what Socket Mode will do next);
    ``PlatformUnavailable`` (one line) if refused or unreachable for ``seconds``."""
    client = AsyncWebClient(token=app_token, base_url=api_url)
    await _call(
        lambda: client.apps_connections_open(app_token=app_token),
        "apps.connections.open",
        "SLACK_APP_TOKEN",
        api_url,
        seconds=seconds,
    )


async def _call(
    call: Callable[[], Awaitable[Any]],
    method: str,
    variable: str,
    api_url: str,
    *,
    seconds: float,
) -> Any:
    try:
        return await reach(
            call,
            api="Slack",
            setting=f"SLACK_API_URL={api_url}",
            transient=TRANSIENT,
            log=log,
            seconds=seconds,
        )
    except SlackApiError as exc:
        error = error_code(exc)
        if error is None:  # no Slack answer (a proxy's error page): no verdict on the token
            raise PlatformUnavailable(refusal_line(method, exc)) from None
        raise PlatformUnavailable(
            f"Slack refused {variable} ({error}): set a valid token"
        ) from None
