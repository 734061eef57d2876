"""Discord: question sets as component messages, answered in the channel, resolved by the store.

Found by the core through the ``ask_bridge.platforms`` entry point as
``platforms.discord:platform``. See :mod:`platforms.discord.markup` for what the message and the
form look like, :mod:`platforms.discord.app` for how clicks are answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import discord

from bridge.aio import stop
from bridge.clicks import answer_clicks
from bridge.platform import Finding, HttpRoute, PlatformUnavailable, SettingsPlatform
from bridge.poster import Poster
from bridge.store.base import Store
from bridge.web_links import browser_links
from platforms.discord.app import Interactions
from platforms.discord.client import RestClient, check_login, gateway_client, login
from platforms.discord.markup import REPLIES
from platforms.discord.poster import DiscordPoster
from platforms.discord.roles import RoleResolver
from platforms.discord.settings import DiscordSettings, load_settings

log = logging.getLogger(__name__)


class DiscordPlatform(SettingsPlatform[DiscordSettings, DiscordSettings, RestClient]):
    """Posting over REST with ``DISCORD_TOKEN``; clicks over the gateway (a connection the
    receiver holds, so it works in any process, standalone ``ask`` included).

    The settings are read from the environment when used (so a changed environment is seen); one
    REST client per settings serves every poster of the process (see
    :class:`~bridge.platform.SettingsPlatform`)."""

    name = "discord"

    @property
    def rest(self) -> RestClient:
        """One REST client per settings, shared by every poster of the process."""
        return self._shared_client()

    def _read_settings(self) -> DiscordSettings:
        return load_settings()

    def _client_key(self, settings: DiscordSettings) -> DiscordSettings:
        """The settings whole (the REST client reads its token, URL and more from them), once
        ``DISCORD_TOKEN`` is known to be set: what is missing is said before anything is
        asked."""
        settings.bot_token()
        return settings

    def _build_client(self, key: DiscordSettings) -> RestClient:
        return RestClient(key)

    async def check_credentials(self) -> None:
        """Log in over REST (the client posting will use): a refused ``DISCORD_TOKEN`` is
        ``PlatformUnavailable``; an unreachable API is retried briefly, then named."""
        await check_login(self.rest, self.settings.api_url)

    async def diagnose(self, channels: Sequence[str]) -> list[Finding]:
        """``ask-bridge doctor``'s Discord rows (:mod:`.doctor`)."""
        from platforms.discord.doctor import diagnose

        return await diagnose(self, channels)

    def configured(self) -> bool:
        """``DISCORD_TOKEN`` is set now (read afresh, not from the settings cached for posting):
        ``ask-bridge serve`` serves Discord."""
        token = self.settings.token
        return token is not None and bool(token.get_secret_value().strip())

    def poster(self) -> DiscordPoster:
        return DiscordPoster(self.rest)

    def receiver(self, store: Store) -> DiscordReceiver:
        return DiscordReceiver(self.settings, self.poster(), store)


GATEWAY_CLOSES = {
    4004: "authentication failed: DISCORD_TOKEN was revoked or replaced; set a valid token",
    4010: "invalid shard: check DISCORD_SHARDS",
    4011: "sharding required: set DISCORD_SHARDS",
    4012: "invalid API version",
    4013: "invalid intents",
}
"""The gateway's close codes discord.py does not reconnect after, and what to fix."""


def gateway_closed(exc: discord.ConnectionClosed) -> str:
    """One line for a gateway connection Discord closed for good (after the start check)."""
    fix = GATEWAY_CLOSES.get(exc.code, exc.reason or "not reconnecting")
    return f"Discord closed the gateway connection ({exc.code}): {fix}"


class DiscordReceiver:
    """Clicks over the gateway, judged by one store. Any number of processes (and shards) may
    receive: every click is routed by its custom_id and judged by the store. Its click entry
    point is built here by :func:`bridge.clicks.answer_clicks`, as Slack's receiver builds its
    own: the role lookup reads the gateway client this receiver creates.

    A close discord.py does not reconnect after -- 4004 when the token is revoked while running --
    ends :meth:`run` with ``PlatformUnavailable`` naming what to fix, so the process stops in one
    line (:func:`gateway_closed`)."""

    def __init__(
        self,
        settings: DiscordSettings,
        poster: Poster,
        store: Store,
        *,
        store_timeout: float = 5.0,
        ack_budget: float = 1.5,
        guild_ready_timeout: float = 2.0,
    ) -> None:
        self.token = settings.bot_token()
        self.client = gateway_client(settings, guild_ready_timeout=guild_ready_timeout)
        clicks = answer_clicks(
            store,
            poster,
            REPLIES,
            membership=RoleResolver(self.client),
            store_timeout=store_timeout,
            ack_budget=ack_budget,
            links=browser_links(),
        )
        shows = poster if isinstance(poster, DiscordPoster) else None
        self.interactions = Interactions(clicks, shows)
        self.interactions.install(self.client)

    def routes(self) -> Sequence[HttpRoute]:
        return ()

    async def run(self, ready: asyncio.Event) -> None:
        """Log in, connect (resuming and reconnecting as discord.py does) and set ``ready`` once
        the gateway says READY; raise if the connection ends for good."""
        client = self.client
        await login(client, self.token)
        connecting = asyncio.create_task(client.connect(reconnect=True), name="discord gateway")
        waiting = asyncio.create_task(client.wait_until_ready())
        try:
            await asyncio.wait({connecting, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if waiting.done():
                user = client.user
                app_id = client.application_id
                shards = client.shard_count or 1
                log.info(
                    "Discord: connected to the gateway as %s (application %s, %s shard%s)",
                    user,
                    app_id,
                    shards,
                    "" if shards == 1 else "s",
                )
                ready.set()
                await connecting
            failure = connecting.exception() if connecting.done() else None
            if failure is not None:
                raise failure
            raise PlatformUnavailable("Discord: the gateway connection ended")
        except discord.PrivilegedIntentsRequired as exc:
            raise PlatformUnavailable(f"Discord: {exc}") from exc
        except discord.ConnectionClosed as exc:
            raise PlatformUnavailable(gateway_closed(exc)) from None
        finally:
            await stop(waiting)
            await stop(connecting)

    async def connected(self) -> bool:
        """The gateway session is up (READY seen, not closed): ``/readyz``."""
        client = self.client
        return client.is_ready() and not client.is_closed() and client.ws is not None

    async def drain(self) -> None:
        """Let clicks in flight finish (their responses need the connection's HTTP session),
        then close the gateway client."""
        try:
            await self.interactions.drain()
        finally:
            await self.client.close()


platform = DiscordPlatform()

__all__ = ["DiscordPlatform", "DiscordPoster", "DiscordReceiver", "platform"]
