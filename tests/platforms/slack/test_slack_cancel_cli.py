"""``ask-bridge cancel`` shows the cancellation on the message, once, through the shared step."""

from __future__ import annotations

import asyncio
import json

import pytest

from bridge.cli import main
from bridge.record import AskStatus
from tests.support.redis_server import RedisServer
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.slack_harness import Bolt


async def test_cancel_shows_the_message_without_controls(
    bolt: Bolt, fake: FakeSlack, redis_srv: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = await bolt.ask([q("Ship it?", "Deploy", ["Yes", "No"])])
    prefix = bolt.store.keys.prefix
    for name, value in {
        "REDIS_URL": redis_srv.url,
        "ASK_BRIDGE_KEY_PREFIX": prefix,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_API_URL": fake.url,
    }.items():
        monkeypatch.setenv(name, value)
    assert await asyncio.to_thread(main, ["cancel", record.id]) == 0
    (update,) = await fake.wait_for("chat.update")
    assert not any(b["type"] == "actions" for b in update["blocks"])
    assert "Cancelled" in json.dumps(update["blocks"], ensure_ascii=False)
    done = await bolt.store.get(record.id)
    assert done is not None and done.status is AskStatus.CANCELLED
    # shown once: the store knows it, so no sweep (nor another replica) updates it again
    assert await bolt.store.claim_render(record.id) is None
