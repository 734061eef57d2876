"""Fixtures for the Slack suite: the fake Web API, a real Redis, the Bolt app over real HTTP."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fake_slack import BOT_TOKEN, FakeSlack
from payloads import SIGNING_SECRET, form_body, signed
from redis_server import RedisServer, redis_server

from bridge.http_server import HttpServer
from bridge.models import QuestionSet
from bridge.record import AskRecord, Destination
from bridge.store.redis import RedisStore
from platforms.slack.app import Interactions, build_app
from platforms.slack.client import make_client
from platforms.slack.http import EVENTS_PATH, events_route
from platforms.slack.poster import SlackPoster

CHANNEL = "C0GENERAL"


@pytest.fixture(scope="module")
def redis_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(Path(tmp_path_factory.mktemp("redis"))) as server:
        yield server


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    slack = await FakeSlack(usergroups={"S0REVIEW": ["U0GROUPIE"]}).start()
    yield slack
    await slack.stop()


@pytest.fixture
async def store(redis_srv: RedisServer) -> AsyncIterator[RedisStore]:
    s = RedisStore.from_url(redis_srv.url, prefix=f"t{uuid.uuid4().hex[:8]}")
    yield s
    await s.aclose()


@dataclass
class Bolt:
    """The Bolt app on 127.0.0.1, and a way to send it signed interaction payloads."""

    server: HttpServer
    session: aiohttp.ClientSession
    fake: FakeSlack
    store: RedisStore
    poster: SlackPoster
    interactions: Interactions | None = None

    @property
    def url(self) -> str:
        return self.server.url(EVENTS_PATH)

    async def send(
        self, payload: dict[str, Any], *, secret: str = SIGNING_SECRET, at: float | None = None
    ) -> tuple[int, str]:
        body = form_body(payload)
        headers = signed(body, secret=secret, at=at)
        async with self.session.post(self.url, data=body, headers=headers) as resp:
            return resp.status, await resp.text()

    async def ask(
        self,
        questions: list[dict[str, Any]],
        *,
        answerers: tuple[str, ...] = (),
        context: dict[str, Any] | None = None,
        expires_in: float = 300.0,
    ) -> AskRecord:
        """Create, post and remember an ask the way the chat handler does."""
        record = AskRecord(
            questions=QuestionSet.model_validate({"questions": questions}),
            destination=Destination(platform="slack", channel=CHANNEL),
            answerers=answerers,
            context=context or {"asker": "Build bot"},
            expires_at=time.time() + expires_in,
        )
        await self.store.create(record)
        ref = await self.poster.post(record)
        posted = await self.store.set_message(record.id, ref)
        assert posted is not None
        return posted


@pytest.fixture
async def bolt(fake: FakeSlack, store: RedisStore) -> AsyncIterator[Bolt]:
    client = make_client(BOT_TOKEN, fake.url)
    app, interactions = build_app(store, client, signing_secret=SIGNING_SECRET)
    server = HttpServer([events_route(app, SIGNING_SECRET)], "127.0.0.1", 0)
    await server.start()
    async with aiohttp.ClientSession() as session:
        yield Bolt(server, session, fake, store, SlackPoster(client), interactions)
    await server.stop()
    await interactions.drain()


def q(text: str, header: str, labels: list[str], *, multi: bool = False) -> dict[str, Any]:
    return {
        "question": text,
        "header": header,
        "multiSelect": multi,
        "options": [{"label": lab, "description": f"{lab} description"} for lab in labels],
    }


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
