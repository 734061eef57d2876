"""Slack: question sets as Block Kit messages, answered in the channel, resolved by the store.

Found by the core through the ``ask_bridge.platforms`` entry point as ``platforms.slack:platform``.
"""

from __future__ import annotations

import asyncio
from functools import cached_property

from slack_sdk.web.async_client import AsyncWebClient

from bridge.platform import PlatformUnavailable
from bridge.poster import Poster
from bridge.store.base import Store
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from platforms.slack.settings import SlackSettings, load_settings


class SlackPlatform:
    """Posting with the bot token; interactions over Socket Mode when ``SLACK_APP_TOKEN`` is set,
    else over HTTP verified with ``SLACK_SIGNING_SECRET``.

    The settings are read from the environment once, on first use, and one Web API client serves
    both the poster and the interaction loop."""

    name = "slack"

    def __init__(self, settings: SlackSettings | None = None) -> None:
        self._settings = settings

    @cached_property
    def settings(self) -> SlackSettings:
        return self._settings or load_settings()

    @cached_property
    def client(self) -> AsyncWebClient:
        return make_client(self.settings.bot(), self.settings.api_url)

    def poster(self) -> Poster:
        return SlackPoster(self.client)

    def check_standalone(self) -> None:
        """Raise ``PlatformUnavailable`` unless :meth:`serve` can run inside a process without a
        shared store (``ask``, ``mcp``), which must handle its own clicks: only Socket Mode
        needs no public URL."""
        if not self.settings.socket_mode:
            raise PlatformUnavailable(
                "without REDIS_URL, `ask` and `mcp` handle the clicks themselves, over Socket "
                "Mode: set SLACK_APP_TOKEN (an xapp- token), or set REDIS_URL and run "
                "`ask-bridge serve`"
            )

    async def serve(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 3000,
        ready: asyncio.Event | None = None,
    ) -> None:
        from platforms.slack.app import build_app

        settings = self.settings
        signing = None if settings.socket_mode else settings.signing()
        app, interactions = build_app(store, self.client, signing_secret=signing)
        try:
            if settings.socket_mode:
                from platforms.slack.socket_mode import serve_socket_mode

                await serve_socket_mode(app, settings.app(), ready)
            else:
                from platforms.slack.http import serve_http

                await serve_http(app, host, port, ready)
        finally:
            await interactions.drain()


platform = SlackPlatform()

__all__ = ["SlackPlatform", "SlackPoster", "platform"]
