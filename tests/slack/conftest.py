"""Fixtures for the Slack suite: the fake Web API, a real Redis, the Bolt app over real HTTP."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
from fake_slack import BOT_TOKEN, FakeSlack
from payloads import SIGNING_SECRET
from redis_server import RedisServer
from slack_harness import Bolt

from bridge.http_server import HttpServer
from bridge.store.redis import RedisStore
from platforms.slack.app import build_app
from platforms.slack.client import make_client
from platforms.slack.http import events_route
from platforms.slack.poster import SlackPoster


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
