"""The web platform: asks answered in a browser, through personal signed links, on the same
click path and judging as Slack and Discord.

Found by the core through the ``ask_bridge.platforms`` entry point as ``platforms.web:platform``.
``ASK_BRIDGE_WEB_SECRET`` turns it on (:class:`~bridge.web_links.WebSettings`); ``serve`` then
serves its pages on its one HTTP port (:mod:`.routes`):

* ``GET /a/<token>``: an ask's page -- its questions as a form while the link's person may
  answer, its state and approvals so far, its final state once ended; ``POST`` submits the form;
  ``GET /a/<token>/events``: live updates (:mod:`.live`);
* ``GET /inbox/<token>``: what waits for that person; ``GET /inbox`` with ``Authorization: Bearer
  <one of the secrets>``: every pending ask, read-only, for operators;
* ``GET /static/web/<file>``: the one stylesheet and the one script (same origin, cacheable).

An ask posted to ``web`` is posted nowhere (:mod:`.poster`): its page is its message.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Mapping, Sequence

from pydantic import SecretStr

from bridge.clicks import Clicks, answer_clicks
from bridge.identities import Identities
from bridge.platform import HttpRoute, PlatformUnavailable, resolve_platform
from bridge.poster import Poster
from bridge.store.base import Store
from bridge.web_links import SECRET_ENV, Links, WebSettings, loopback, read_web_settings
from platforms.web.live import LiveAsks
from platforms.web.pages import REPLIES
from platforms.web.poster import WEB, WebPoster
from platforms.web.routes import WebRoutes
from platforms.web.security import Csrf, RateLimit

NOT_CONFIGURED = f"{SECRET_ENV} is not set (make one with: openssl rand -hex 32)"


class WebPlatform:
    """The web platform with ``settings`` (default: the environment's, read at each use).

    ``chat_posters``: the poster judging people of each chat platform who open a link bound to
    their identity (default: that platform as registered, configured from the environment);
    tests and embedding programs give their own."""

    name = WEB

    def __init__(
        self,
        settings: WebSettings | None = None,
        *,
        chat_posters: Mapping[str, Poster] | None = None,
        loopback_only: bool = False,
    ) -> None:
        self._settings = settings
        self.chat_posters = dict(chat_posters or {})
        self.loopback_only = loopback_only

    @classmethod
    def own_secret(cls) -> WebPlatform:
        """The web platform with a secret made for this process, which only it knows: for a
        process that serves its own pages (``ask --platform web`` without ``REDIS_URL``), on
        loopback only (:meth:`check_bind`), its links dying with it."""
        made = WebSettings(secret=(SecretStr(secrets.token_hex(32)),))
        return cls(made, loopback_only=True)

    def embedded(self) -> WebPlatform:
        """This platform, or with ``ASK_BRIDGE_WEB_SECRET`` unset one with its own secret
        (:meth:`own_secret`): what ``ask --platform web`` and ``demo --web`` serve themselves
        without ``REDIS_URL``."""
        return self if self.configured() else self.own_secret()

    def links(self, listening_url: str | None = None) -> Links:
        """Links signed with this platform's secret, under ``ASK_BRIDGE_WEB_URL`` or else
        ``listening_url`` (where this process serves the pages)."""
        return self.settings.links(listening_url)

    @property
    def settings(self) -> WebSettings:
        return self._settings or read_web_settings()

    def configured(self) -> bool:
        """``ASK_BRIDGE_WEB_SECRET`` is set: ``serve`` serves the web platform."""
        return self.settings.configured

    def poster(self) -> Poster:
        if not self.configured():
            raise PlatformUnavailable(NOT_CONFIGURED)
        return WebPoster()

    def check_bind(self, host: str) -> None:
        """Raise ``PlatformUnavailable`` when serving on ``host`` would put pages signed with
        a secret nobody configured (:meth:`own_secret`) within reach of other machines."""
        if self.loopback_only and not loopback(host):
            raise PlatformUnavailable(
                f"the web platform serves {host} (off this machine) only with {SECRET_ENV} set: "
                "set it, or bind 127.0.0.1"
            )

    def receiver(self, store: Store) -> WebReceiver:
        settings = self.settings
        if not settings.configured:
            raise PlatformUnavailable(NOT_CONFIGURED)
        return WebReceiver(settings, store, self.chat_posters)


class WebReceiver:
    """The web platform's routes on the process's one HTTP server, judging by ``store``: one
    click entry point per platform whose people open links here (``web`` itself, and a chat
    platform for a link made from its message, judged with its poster: see
    :mod:`platforms.web.routes`)."""

    def __init__(
        self,
        settings: WebSettings,
        store: Store,
        chat_posters: Mapping[str, Poster] | None = None,
        *,
        store_timeout: float = 5.0,
    ) -> None:
        keys = [s.get_secret_value() for s in settings.secret]
        self.store = store
        self.store_timeout = store_timeout
        self.chat_posters = dict(chat_posters or {})
        self.identities = Identities.from_env()
        self._clicks: dict[str, Clicks] = {}
        self.live = LiveAsks(store)
        # links made here (the inbox's) are relative unless a public URL is set
        links = Links(keys, settings.url or "", settings.link_ttl)
        self.links = links
        self.web = WebRoutes(
            store,
            links,
            Csrf(keys),
            self.clicks_for,
            operator=lambda token: any(
                hmac.compare_digest(token.encode("utf-8"), k.encode("utf-8")) for k in keys
            ),
            public_url=settings.url,
            live=self.live,
            limit=RateLimit(),
            identities=self.identities,
        )

    def clicks_for(self, platform: str) -> Clicks:
        """The click entry point judging people of ``platform`` (made on first use);
        ``PlatformUnavailable`` for a platform this process cannot post to."""
        found = self._clicks.get(platform)
        if found is None:
            if platform == WEB:
                poster: Poster = WebPoster()
            elif platform in self.chat_posters:
                poster = self.chat_posters[platform]
            else:
                poster = resolve_platform(platform).poster()
            found = answer_clicks(
                self.store,
                poster,
                REPLIES,
                identities=self.identities,
                store_timeout=self.store_timeout,
                ack_budget=self.store_timeout,
            )
            self._clicks[platform] = found
        return found

    def routes(self) -> Sequence[HttpRoute]:
        return self.web.routes()

    async def run(self, ready: asyncio.Event) -> None:
        ready.set()  # the process's server delivers the requests
        await asyncio.Event().wait()

    async def drain(self) -> None:
        await self.live.aclose()
        for clicks in self._clicks.values():
            await clicks.drain()


platform = WebPlatform()

__all__ = ["WebPlatform", "WebPoster", "WebReceiver", "platform"]
