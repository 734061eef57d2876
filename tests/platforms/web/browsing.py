"""Fixtures for the web platform's browser tests: one fenced headless Chromium per module, the web
platform served on loopback over a real store, and pages opened in their own browser contexts
with every request they make recorded, so each test can assert nothing left the page's origin.

Imported only where :func:`tests.support.browser.missing` found nothing missing (it imports
Playwright)."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, Request, async_playwright
from pydantic import SecretStr

from bridge.http_server import HttpServer
from bridge.models import Question, QuestionSet
from bridge.record import AskRecord, Destination
from bridge.store.base import Store
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from bridge.web_links import Links, Person, WebSettings
from platforms.web import WebReceiver
from tests.platforms.web.conftest import SECRET
from tests.support.browser import FENCE, chromium
from tests.support.redis_server import RedisServer

PHONE = 390
DESKTOP = 1280
HEIGHT = 900


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless and fenced to loopback, shared by the module's tests."""
    async with async_playwright() as p:
        launched = await p.chromium.launch(
            executable_path=chromium(), headless=True, args=list(FENCE)
        )
        yield launched
        await launched.close()


@dataclass
class Site:
    """The web platform on loopback over ``store``; pages opened by :meth:`open` in contexts of
    their own, each request recorded in :attr:`requests`."""

    store: Store
    receiver: WebReceiver
    server: HttpServer
    browser: Browser
    links: Links = field(init=False)
    requests: list[str] = field(default_factory=list)
    status: int | None = None
    """The HTTP status of the page :meth:`open` opened last."""
    contexts: list[BrowserContext] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.links = Links([SECRET], self.server.url())

    @property
    def origin(self) -> str:
        return self.server.url()

    async def ask(
        self, *questions: Question, answerers: tuple[str, ...] = (), required: int = 1
    ) -> AskRecord:
        now = time.time()
        record = AskRecord(
            questions=QuestionSet(questions=questions),
            destination=Destination(platform="web", channel="releases"),
            context={"asker": "Deploy bot"},
            answerers=answerers,
            required=required,
            created_at=now,
            expires_at=now + 3600,
        )
        await self.store.create(record)
        return record

    def url(self, ask_id: str, name: str = "alice", *, ttl: float | None = None) -> str:
        return self.links.ask_url(ask_id, Person("web", name, name.title()), ttl=ttl)

    async def open(
        self,
        url: str,
        *,
        width: int = DESKTOP,
        audit: bool = False,
        script: bool = True,
    ) -> Page:
        """``url`` in a new browser context ``width`` pixels wide. ``audit``: the page's
        Content-Security-Policy is bypassed so axe-core can be injected (only audits ask for it);
        ``script``: JavaScript on (off shows the page as a browser without scripts has it)."""
        context = await self.browser.new_context(
            viewport={"width": width, "height": HEIGHT},
            bypass_csp=audit,
            java_script_enabled=script,
        )
        self.contexts.append(context)
        page = await context.new_page()
        page.on("request", self._record)
        response = await page.goto(url)
        self.status = response.status if response is not None else None
        return page

    def _record(self, request: Request) -> None:
        self.requests.append(request.url)

    def strangers(self) -> list[str]:
        """The requests that left the page's origin (none may)."""
        origin = urlsplit(self.origin)
        return [
            url
            for url in self.requests
            if (urlsplit(url).scheme, urlsplit(url).netloc) != (origin.scheme, origin.netloc)
        ]


@pytest.fixture(params=["memory"])
def site_store(request: pytest.FixtureRequest) -> str:
    """The store under the site: memory unless a test asks for ``redis`` too (indirectly)."""
    return str(request.param)


@pytest_asyncio.fixture(loop_scope="module")
async def site(
    browser: Browser, site_store: str, request: pytest.FixtureRequest
) -> AsyncIterator[Site]:
    store: Store
    if site_store == "redis":
        redis: RedisServer = request.getfixturevalue("standalone")
        store = RedisStore.from_url(redis.url, prefix=f"wb{secrets.token_hex(4)}")
    else:
        store = MemoryStore()
    receiver = WebReceiver(WebSettings(secret=(SecretStr(SECRET),)), store)
    receiver.live.poll = 0.2
    server = HttpServer(receiver.routes(), "127.0.0.1", 0)
    await server.start()
    made = Site(store, receiver, server, browser)
    try:
        yield made
    finally:
        for context in made.contexts:
            await context.close()
        await server.stop()
        await receiver.drain()
        await store.aclose()
    assert made.requests, "no page was opened"
    assert made.strangers() == [], "requests left the page's origin"
