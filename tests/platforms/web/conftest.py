"""Fixtures for the web platform's suite: its routes on a real aiohttp server on loopback, over a
real store (the memory store, and a real Redis-protocol server), driven by aiohttp's client."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr

from bridge.http_server import HttpServer
from bridge.memory_poster import MemoryPoster
from bridge.models import Option, Question, QuestionSet
from bridge.record import AskRecord, Destination
from bridge.store.base import Store
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from bridge.web_links import Links, Person, WebSettings
from platforms.web import WebReceiver
from tests.support.redis_server import RedisServer

SECRET = "s" * 40
"""The test's ASK_BRIDGE_WEB_SECRET."""
_CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def question(
    text: str = "Ship it?", header: str = "Ship", *labels: str, multi: bool = False
) -> Question:
    labels = labels or ("Yes", "No", "Later")
    return Question(
        question=text,
        header=header,
        options=tuple(
            Option(label=label, description=f"{label} means {label}") for label in labels
        ),
        multiSelect=multi,
    )


@dataclass
class Web:
    """The web platform served on loopback over ``store``, with a client session."""

    store: Store
    receiver: WebReceiver
    server: HttpServer
    http: aiohttp.ClientSession
    links: Links = field(init=False)

    def __post_init__(self) -> None:
        self.links = Links([SECRET], self.server.url())

    async def ask(
        self,
        *questions: Question,
        answerers: tuple[str, ...] = (),
        required: int = 1,
        platform: str = "web",
        channel: str = "reviews",
        created_at: float | None = None,
        asker: str = "Deploy bot",
    ) -> AskRecord:
        now = time.time() if created_at is None else created_at
        record = AskRecord(
            questions=QuestionSet(questions=questions or (question(),)),
            destination=Destination(platform=platform, channel=channel),
            context={"asker": asker},
            answerers=answerers,
            required=required,
            created_at=now,
            expires_at=now + 3600,
        )
        await self.store.create(record)
        return record

    def url(self, ask_id: str, name: str = "alice", platform: str = "web", **kw: Any) -> str:
        return self.links.ask_url(ask_id, Person(platform, name, name.title()), **kw)

    async def page(self, url: str) -> tuple[int, str]:
        async with self.http.get(url, allow_redirects=False) as response:
            return response.status, await response.text()

    async def csrf(self, url: str) -> str:
        status, text = await self.page(url)
        found = _CSRF.search(text)
        assert status == 200 and found is not None, text
        return found.group(1)

    async def submit(
        self, url: str, fields: list[tuple[str, str]], *, csrf: str | None = "fetch", **kw: Any
    ) -> aiohttp.ClientResponse:
        """POST the form (its CSRF field fetched from the page, unless given)."""
        token = await self.csrf(url) if csrf == "fetch" else csrf
        data = [*fields, *([("csrf", token)] if token is not None else [])]
        async with self.http.post(url, data=data, allow_redirects=False, **kw) as response:
            await response.read()
            return response


@pytest.fixture(params=["memory", "redis"])
async def web(request: pytest.FixtureRequest) -> AsyncIterator[Web]:
    store: Store
    if request.param == "memory":
        store = MemoryStore()
    else:
        server: RedisServer = request.getfixturevalue("standalone")
        store = RedisStore.from_url(server.url, prefix=f"w{secrets.token_hex(4)}")
    settings = WebSettings(secret=(SecretStr(SECRET),))
    receiver = WebReceiver(settings, store, {"slack": MemoryPoster("slack")})
    receiver.live.poll = 0.2
    http_server = HttpServer(receiver.routes(), "127.0.0.1", 0)
    await http_server.start()
    async with aiohttp.ClientSession() as http:
        yield Web(store, receiver, http_server, http)
    await http_server.stop()
    await receiver.drain()
    await store.aclose()
