"""``ask`` started while Redis restarts waits for it (``ASK_BRIDGE_REDIS_WAIT``) and posts once it
is back, instead of failing at once: in a chaos run the two asks started during a half-second
restart were the only ones lost. A real process, the fake Slack, a real server on a port the test
picks: the first try meets a listener that hangs up, then nothing listens for half a second."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from bridge.record import AskStatus
from bridge.store.redis import RedisStore
from tests.support.procs import Agent, cli_env
from tests.support.redis_server import RedisServer, free_port, hanging_up
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET

CHANNEL = "C0GENERAL"


async def test_ask_started_while_redis_restarts_posts_once_it_is_back(
    fake: FakeSlack, tmp_path: Path
) -> None:
    server = RedisServer(tmp_path / "redis", port=free_port())
    prefix = f"rw{uuid.uuid4().hex[:6]}"
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url,
        REDIS_URL=server.url, ASK_BRIDGE_KEY_PREFIX=prefix,
    )  # fmt: skip
    questions = json.dumps([q("Deploy now?", "Deploy", ["Yes", "No"])])
    async with hanging_up(server.port) as tried:
        agent = await Agent.start(env, questions, "--channel", CHANNEL, "--mode", "defer")
        await asyncio.wait_for(tried.wait(), 60)  # its first try met Redis going down
    await asyncio.sleep(0.5)  # nothing listens
    await asyncio.to_thread(server.start)
    try:
        code, out, err = await agent.result()
        assert code == 3 and err == "", err  # deferred: posted, the answer goes to the feed
        ask_id = json.loads(out)["ask_id"]
        store = RedisStore.from_url(server.url, prefix=prefix)
        try:
            record = await store.get(ask_id)
        finally:
            await store.aclose()
    finally:
        server.stop()
    assert record is not None and record.status is AskStatus.PENDING
    assert record.message is not None
    (posted,) = fake.ok_calls("chat.postMessage")
    assert posted["channel"] == CHANNEL
