"""Fixtures for the Slack suite: the fake Web API, a real Redis, the Bolt app over real HTTP.

Every request a test's fakes receive is judged by Slack's rules
(:mod:`tests.support.slack.slack_rules`): one Slack would refuse fails the test, unless the test is
marked ``@pytest.mark.slack_refusals("error", ...)`` with each refusal it sends on purpose (and then
each must happen).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from bridge.http_server import HttpServer
from bridge.store.redis import RedisStore
from platforms.slack.poster import SlackPoster
from tests.support.redis_server import RedisServer
from tests.support.slack.fake_slack import CREATED, FakeSlack
from tests.support.slack.slack_harness import Bolt, http_receiver
from tests.support.slack.slack_rules import describe


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slack_refusals(*errors): the test sends requests the fake Slack refuses for their shape, "
        "with these errors, on purpose",
    )


@pytest.fixture(autouse=True)
def _slack_requests_conform(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if any fake Slack made during it received a request Slack would refuse
    for its shape (parameters, blocks, view), other than those its marker expects."""
    CREATED.clear()
    yield
    marker = request.node.get_closest_marker("slack_refusals")
    expected = set(marker.args) if marker is not None else set()
    invalid = [call for fake in CREATED for call in fake.invalid()]
    CREATED.clear()
    unexpected = [c for c in invalid if c.refused is not None and c.refused.error not in expected]
    assert not unexpected, "requests Slack would refuse:\n" + "\n".join(
        f"{c.method}: {describe(c.refused)}" for c in unexpected
    )
    seen = {c.refused.error for c in invalid if c.refused is not None}
    assert expected <= seen, f"refusals expected but not sent: {sorted(expected - seen)}"


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
    receiver = http_receiver(fake, store)
    server = HttpServer(receiver.routes(), "127.0.0.1", 0)
    await server.start()
    async with aiohttp.ClientSession() as session:
        poster = SlackPoster(receiver.client)
        yield Bolt(server, session, fake, store, poster, receiver.interactions)
    await server.stop()
    await receiver.drain()
