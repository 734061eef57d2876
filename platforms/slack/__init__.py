"""Slack: question sets as Block Kit messages, answered in the channel, resolved by the store.

Found by the core through the ``ask_bridge.platforms`` entry point as ``platforms.slack:platform``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from bridge.aio import stop
from bridge.platform import Finding, HttpRoute, PlatformUnavailable, SettingsPlatform
from bridge.poster import Poster
from bridge.record import MessageRef
from bridge.store.base import Store
from platforms.slack.client import WatchedClient, make_client
from platforms.slack.credentials import BotIdentity, check_app_token, check_bot_token
from platforms.slack.poster import SlackPoster
from platforms.slack.settings import SlackSettings, load_settings

if TYPE_CHECKING:
    from platforms.slack.manifest import AppSetup


class SlackPlatform(SettingsPlatform[SlackSettings, tuple[str, str], WatchedClient]):
    """Posting with the bot token; interactions over Socket Mode when ``SLACK_APP_TOKEN`` is set,
    else over HTTP verified with ``SLACK_SIGNING_SECRET`` (see :class:`SlackReceiver`).

    The settings are read from the environment when used (so a changed environment is seen), and
    one Web API client per token and base URL serves both the poster and the receiver (see
    :class:`~bridge.platform.SettingsPlatform`)."""

    name = "slack"

    @property
    def client(self) -> WatchedClient:
        """One Web API client per token and base URL, shared by posters and the receiver."""
        return self._shared_client()

    def _read_settings(self) -> SlackSettings:
        return load_settings()

    def _client_key(self, settings: SlackSettings) -> tuple[str, str]:
        """The bot token (``PlatformUnavailable`` when unset) and the API's base URL: the other
        settings (Socket Mode's, HTTP's) are the receiver's, not the client's."""
        return (settings.bot(), settings.api_url)

    def _build_client(self, key: tuple[str, str]) -> WatchedClient:
        return make_client(*key)

    def poster(self) -> Poster:
        return SlackPoster(self.client)

    def held_connections(self) -> AbstractAsyncContextManager[None]:
        """While serving, every Web API call shares one HTTP session (see :mod:`.client`)."""
        return self.client.kept_session()

    async def message_link(self, message: MessageRef) -> str | None:
        """A posted message's link (``chat.getPermalink``), for ``ask``'s progress line."""
        return await SlackPoster(self.client).permalink(message)

    def check_standalone(self) -> None:
        """Raise ``PlatformUnavailable`` unless the receiver can work inside a process without a
        shared store (``ask``, ``mcp``), which must handle its own clicks: only Socket Mode
        needs no public URL."""
        if not self.settings.socket_mode:
            raise PlatformUnavailable(
                "without REDIS_URL, `ask` and `mcp` handle the clicks themselves, over Socket "
                "Mode: set SLACK_APP_TOKEN (an xapp- token), or set REDIS_URL and run "
                "`ask-bridge serve`"
            )

    async def check_credentials(self) -> BotIdentity:
        """``auth.test`` with the bot token, and the app token when Socket Mode is on: a refused
        token is ``PlatformUnavailable`` naming its variable (see :mod:`.credentials`)."""
        identity = await check_bot_token(self.client, self.settings.api_url)
        if self.settings.socket_mode:
            await check_app_token(self.settings.app(), self.settings.api_url)
        return identity

    async def diagnose(self, channels: Sequence[str]) -> list[Finding]:
        """``ask-bridge doctor``'s Slack rows (:mod:`.doctor`)."""
        from platforms.slack.doctor import diagnose

        return await diagnose(self, channels)

    def app_setup(
        self, *, socket_mode: bool, request_url: str | None, user_groups: bool
    ) -> AppSetup:
        """``ask-bridge slack manifest``: the Slack app to create, and how (:mod:`.manifest`)."""
        from platforms.slack.manifest import app_setup

        return app_setup(socket_mode=socket_mode, request_url=request_url, user_groups=user_groups)

    def configured(self) -> bool:
        """``SLACK_BOT_TOKEN`` is set (environment or ``.env``): ``ask-bridge serve`` serves
        Slack. Read afresh, not from the settings cached for posting."""
        token = self.settings.bot_token
        return token is not None and bool(token.get_secret_value().strip())

    def receiver(self, store: Store) -> SlackReceiver:
        return SlackReceiver(self.settings, self.client, store)


class SlackReceiver:
    """Clicks judged by one store: over Socket Mode when ``SLACK_APP_TOKEN`` is set (a connection
    this receiver holds), else over HTTP at ``POST /slack/events`` on the process's one server,
    each request verified with ``SLACK_SIGNING_SECRET``. Its click entry point is built here by
    :func:`bridge.clicks.answer_clicks`, as Discord's receiver builds its own; the Bolt app
    (:func:`platforms.slack.app.build_app`) hands it the parsed clicks.

    A token refused while receiving (revoked after the start check: any call through ``client``,
    including Socket Mode's reconnect, answers ``invalid_auth``, ``token_revoked``...) ends
    :meth:`run` with ``PlatformUnavailable`` naming the variable: the process stops instead of
    failing every click, or reconnecting forever."""

    def __init__(
        self,
        settings: SlackSettings,
        client: WatchedClient,
        store: Store,
        *,
        store_timeout: float = 5.0,
        ack_budget: float = 1.5,
        fast_path: float = 1.0,
    ) -> None:
        # imported here: a process that only posts (``ask`` through a shared store) loads neither
        # Bolt nor the click path
        from bridge.clicks import answer_clicks
        from bridge.web_links import browser_links
        from platforms.slack.app import build_app
        from platforms.slack.groups import GroupResolver
        from platforms.slack.markup import REPLIES

        links = browser_links()
        self.client = client
        self.app_token = settings.app() if settings.socket_mode else None
        self.signing = None if self.app_token is not None else settings.signing()
        clicks = answer_clicks(
            store,
            SlackPoster(client, browser=links is not None),
            REPLIES,
            membership=GroupResolver(client),
            store_timeout=store_timeout,
            ack_budget=ack_budget,
            links=links,
        )
        self.app, self.interactions = build_app(clicks, client, fast_path=fast_path)
        self.link = None
        if self.app_token is not None:
            from platforms.slack.socket_mode import SocketModeLink

            self.link = SocketModeLink(self.app, self.app_token)

    def routes(self) -> Sequence[HttpRoute]:
        if self.signing is None:
            return ()
        from platforms.slack.http import events_route

        return (events_route(self.app, self.signing),)

    async def run(self, ready: asyncio.Event) -> None:
        holding = asyncio.create_task(self._hold(ready))
        refusal = asyncio.create_task(self.client.refused())
        try:
            await asyncio.wait({holding, refusal}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await stop(refusal)
            await stop(holding)
        if not refusal.cancelled() and refusal.exception() is None:
            raise refusal.result()
        holding.result()

    async def _hold(self, ready: asyncio.Event) -> None:
        if self.link is not None:
            await self.link.run(ready)
        else:  # HTTP: the process's server delivers the requests
            ready.set()
            await asyncio.Event().wait()

    async def connected(self) -> bool:
        """Socket Mode: the connection is up now; HTTP: always (the server is the process's)."""
        return self.link is None or await self.link.connected()

    async def drain(self) -> None:
        await self.interactions.drain()


platform = SlackPlatform()

__all__ = ["SlackPlatform", "SlackPoster", "SlackReceiver", "platform"]
