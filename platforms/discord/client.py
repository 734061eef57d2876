"""discord.py clients from the settings: one for REST (posting, showing), one for the gateway.

``DISCORD_API_URL`` and ``DISCORD_GATEWAY_URL`` are applied to discord.py's process-wide bases
(``discord.http.Route.BASE``, ``DiscordWebSocket.DEFAULT_GATEWAY``): one process talks to one
Discord. Only non-privileged intents are asked for: ``GUILDS`` keeps the guild and role cache that
reads a clicker's roles; interactions need no intent at all.

discord.py waits out a 429 on its own (every REST call and interaction response goes through its
HTTP client's one aiohttp session); :func:`rate_limit_trace` counts each one as it arrives, in
``ask_bridge_platform_errors_total{platform="discord",kind="ratelimited"}`` as for Slack.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket

from bridge import metrics
from bridge.api_reach import REACH_SECONDS as REACH_SECONDS
from bridge.api_reach import reach
from bridge.loops import PerLoop
from bridge.platform import PlatformUnavailable
from platforms.discord.settings import DiscordSettings


def apply_urls(settings: DiscordSettings) -> None:
    discord.http.Route.BASE = settings.api_url
    if settings.gateway_url is not None:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.gateway_url)


def intents() -> discord.Intents:
    return discord.Intents(guilds=True)


def rate_limit_trace() -> aiohttp.TraceConfig:
    """An aiohttp trace for a client's session that counts every 429 Discord answers."""
    trace = aiohttp.TraceConfig()

    async def ended(
        session: aiohttp.ClientSession, context: Any, params: aiohttp.TraceRequestEndParams
    ) -> None:
        if params.response.status == 429:
            metrics.platform_error("discord", "ratelimited")

    trace.on_request_end.append(ended)
    return trace


def gateway_client(settings: DiscordSettings, *, guild_ready_timeout: float) -> discord.Client:
    """The client holding the gateway connection(s): an ``AutoShardedClient`` when
    ``DISCORD_SHARDS`` is set. No message cache, no member chunking: clicks carry what we need.
    ``guild_ready_timeout``: how long after the last ``GUILD_CREATE`` it counts as ready."""
    apply_urls(settings)
    options: dict[str, Any] = {
        "intents": intents(),
        "guild_ready_timeout": guild_ready_timeout,
        "max_messages": None,
        "chunk_guilds_at_startup": False,
        "member_cache_flags": discord.MemberCacheFlags.none(),
        "http_trace": rate_limit_trace(),
    }
    if settings.sharded:
        options.update(shard_count=settings.shard_count, shard_ids=settings.shard_id_list)
        return discord.AutoShardedClient(**options)
    return discord.Client(**options)


async def login(client: discord.Client, token: str) -> None:
    """Log in (``GET /users/@me``, then the application id from ``/oauth2/applications/@me``);
    a token Discord refuses becomes ``PlatformUnavailable``."""
    try:
        await client.login(token)
    except discord.LoginFailure as exc:
        await client.close()
        raise PlatformUnavailable(f"Discord refused DISCORD_TOKEN: {exc}") from exc
    except BaseException:  # unreachable, or cancelled: no session left open behind
        await client.close()
        raise


def _not_voice_notice(record: logging.LogRecord) -> bool:
    """discord.py warns at every client start that voice is unsupported (no PyNaCl): the
    bridge never uses voice, so the warning only hides real ones."""
    return "voice will NOT be supported" not in record.getMessage()


logging.getLogger("discord.client").addFilter(_not_voice_notice)
TRANSIENT = (aiohttp.ClientError, OSError, asyncio.TimeoutError, discord.DiscordServerError)
log = logging.getLogger(__name__)


async def check_login(rest: RestClient, api_url: str, *, seconds: float = REACH_SECONDS) -> None:
    """Log ``rest`` in, retrying an unreachable API for ``seconds``
    (:func:`bridge.api_reach.reach`: waits doubling from a quarter of a second to four; logged
    once); then ``PlatformUnavailable`` naming ``DISCORD_API_URL``. A refused token is already
    ``PlatformUnavailable`` (:func:`login`)."""
    await reach(
        rest.get,
        api="Discord",
        setting=f"DISCORD_API_URL={api_url}",
        transient=TRANSIENT,
        log=log,
        seconds=seconds,
    )


class RestClient:
    """A logged-in client used only over REST, one per event loop that uses it
    (:class:`~bridge.loops.PerLoop`): made on first use there, closed by :meth:`aclose` or when
    that loop shuts down, so a short-lived ``ask`` leaves no unclosed session behind, and a
    synchronous agent (on the bridge's loop) and ``serving()`` (on its own) never share one."""

    def __init__(self, settings: DiscordSettings) -> None:
        self.settings = settings
        self._per_loop: PerLoop[_Login] = PerLoop(_Login, _Login.aclose)

    async def get(self) -> discord.Client:
        login_here = self._per_loop.get()
        async with login_here.lock:
            if login_here.client is None:
                token = self.settings.bot_token()
                apply_urls(self.settings)
                client = discord.Client(
                    intents=intents(), max_messages=None, http_trace=rate_limit_trace()
                )
                await login(client, token)
                login_here.client = client
            return login_here.client

    async def aclose(self) -> None:
        await self._per_loop.aclose()


class _Login:
    """One loop's logged-in client (``None`` until the first call there logs in)."""

    def __init__(self) -> None:
        self.client: discord.Client | None = None
        self.lock = asyncio.Lock()

    async def aclose(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.close()
