"""Reminders and escalation on Slack across OS processes: an agent (``ask-bridge ask``), two
``ask-bridge serve`` replicas sweeping one real Redis, the fake Slack. Each reminder is one thread
reply however many replicas sweep; the escalation is posted once, and a click on it answers the
ask and shows both messages ended."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bridge.store.redis import RedisStore
from tests.support.procs import Agent, Serve, cli_env
from tests.support.redis_server import RedisServer
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, block_actions, form_body, signed

pytestmark = pytest.mark.asyncio(loop_scope="module")
CHANNEL = "C0TEAM"
MANAGERS = "C0MANAGERS"


class World:
    def __init__(self, fake: FakeSlack, env: dict[str, str], replicas: list[Serve]) -> None:
        self.fake = fake
        self.env = env
        self.replicas = replicas
        self.session = aiohttp.ClientSession()

    async def send(self, payload: dict[str, Any], to: Serve) -> int:
        body = form_body(payload)
        async with self.session.post(to.url, data=body, headers=signed(body)) as resp:
            return resp.status

    def posts(self, channel: str, marker: str) -> list[dict[str, Any]]:
        return [
            c.response
            for c in self.fake.calls
            if c.ok
            and c.method == "chat.postMessage"
            and c.args["channel"] == channel
            and marker in c.args["text"]
            and not c.args.get("thread_ts")
        ]

    async def posted(self, channel: str, marker: str) -> tuple[str, str]:
        """The ts and ask id of the question set holding ``marker`` posted in ``channel``."""
        await self.fake.wait_for(
            "chat.postMessage",
            lambda a: a["channel"] == channel and marker in a["text"],
            within=30,
        )
        (response,) = self.posts(channel, marker)
        blocks = self.fake.messages[(channel, response["ts"])]["blocks"]
        action = next(
            el["action_id"] for b in blocks for el in b.get("elements") or () if "action_id" in el
        )
        return response["ts"], action.split(":")[2]

    def replies(self, ts: str) -> list[dict[str, Any]]:
        return [
            c.args
            for c in self.fake.calls
            if c.ok and c.method == "chat.postMessage" and c.args.get("thread_ts") == ts
        ]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(redis_srv: RedisServer) -> AsyncIterator[World]:
    fake = await FakeSlack().start()
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.url,
        REDIS_URL=redis_srv.url,
        ASK_BRIDGE_KEY_PREFIX=f"fu{uuid.uuid4().hex[:6]}",
    )
    replicas = [await Serve(env).start(), await Serve(env).start()]
    w = World(fake, env, replicas)
    yield w
    await w.session.close()
    for serve in replicas:
        await serve.stop()
    await fake.stop()


def agent_args(*extra: str) -> list[str]:
    return ["--platform", "slack", "--channel", CHANNEL, "--wait", "60", *extra]


async def test_each_reminder_is_one_thread_reply_across_two_replicas(
    world: World, redis_srv: RedisServer
) -> None:
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Deploy {marker}?", "Deploy", ["Ship", "Hold"])])
    args = agent_args("--answerer", "U0ALICE", "--answerer", "S0ONCALL", "--remind-after", "1")
    agent = await Agent.start(world.env, questions, *args, "--remind-times", "1")
    try:
        ts, ask_id = await world.posted(CHANNEL, marker)
        await world.fake.wait_for("chat.postMessage", lambda a: a.get("thread_ts") == ts)
        await asyncio.sleep(2.5)  # five more sweeps by each replica
        (reply,) = world.replies(ts)
        click = block_actions(world.fake, CHANNEL, ts, "U0ALICE", f"askb:pick:{ask_id}:0:0")
        assert await world.send(click, world.replicas[1]) == 200
        code, _, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err
    assert reply["channel"] == CHANNEL
    text = reply["text"]
    assert text.startswith("⏰ <@U0ALICE>, <!subteam^S0ONCALL>: the question from ask-bridge ")
    assert "still waits for an answer, since <!date^" in text
    assert "<!here>" not in text and "reminder 1" not in text  # one reminder: not counted
    prefix = world.env["ASK_BRIDGE_KEY_PREFIX"]
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    try:
        trail = [e for e in await store.history(ask_id) if e.kind == "reminded"]
    finally:
        await store.aclose()
    assert [e.detail for e in trail] == [{"n": 1}]


async def test_reminders_when_anyone_may_answer_reach_the_channel_and_escape_the_asker(
    world: World,
) -> None:
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Lunch {marker}?", "Lunch", ["Pizza", "Soup"])])
    args = agent_args("--asker", "<!channel> *boss*", "--remind-after", "1", "--remind-times", "2")
    agent = await Agent.start(world.env, questions, *args)
    try:
        ts, ask_id = await world.posted(CHANNEL, marker)
        await world.fake.wait_for("chat.postMessage", lambda a: a.get("thread_ts") == ts, count=2)
        await asyncio.sleep(2)
        replies = world.replies(ts)
        click = block_actions(world.fake, CHANNEL, ts, "U0BOB", f"askb:pick:{ask_id}:0:1")
        assert await world.send(click, world.replicas[0]) == 200
        code, _, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err
    assert len(replies) == 2  # --remind-times 2
    for n, reply in enumerate(replies, 1):
        assert reply["text"].startswith("⏰ <!here>: the question from &lt;!channel&gt; *boss* ")
        assert reply["text"].endswith(f"(reminder {n} of 2)")


async def test_an_escalation_is_posted_once_and_a_click_on_it_shows_both_ended(
    world: World,
) -> None:
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Rollback {marker}?", "Rollback", ["Yes", "No"])])
    args = agent_args("--escalate-after", "1", "--escalate-to", MANAGERS)
    agent = await Agent.start(world.env, questions, *args)
    try:
        ts, ask_id = await world.posted(CHANNEL, marker)
        ts2, escalated_id = await world.posted(MANAGERS, marker)
        assert escalated_id == ask_id
        await asyncio.sleep(2)  # more sweeps by each replica: still one escalation
        assert len(world.posts(MANAGERS, marker)) == 1
        click = block_actions(world.fake, MANAGERS, ts2, "U0BOSS", f"askb:pick:{ask_id}:0:1")
        assert await world.send(click, world.replicas[1]) == 200
        code, out, err = await agent.result()
        for where in (ts, ts2):
            await world.fake.wait_for("chat.update", lambda a, w=where: a["ts"] == w)
    finally:
        await agent.kill()
    assert code == 0, err
    assert json.loads(out)["answers"][0]["selected"] == ["No"]
    updates = {u["ts"]: u for u in world.fake.ok_calls("chat.update") if u["ts"] in (ts, ts2)}
    assert set(updates) == {ts, ts2}
    for update in updates.values():
        assert all(b["type"] != "actions" for b in update["blocks"])
        assert "Answered by <@U0BOSS>" in json.dumps(update["blocks"])
    assert updates[ts]["channel"] == CHANNEL and updates[ts2]["channel"] == MANAGERS


async def test_a_reminder_due_while_every_replica_was_down_fires_once_after_restart(
    world: World,
) -> None:
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Restart {marker}?", "Restart", ["Yes", "No"])])
    args = agent_args("--remind-after", "2", "--remind-times", "1")
    agent = await Agent.start(world.env, questions, *args)
    try:
        ts, ask_id = await world.posted(CHANNEL, marker)
        for serve in world.replicas:
            await serve.stop()
        await asyncio.sleep(2.5)  # due now, and nobody sweeps
        assert world.replies(ts) == []
        for serve in world.replicas:
            await serve.start()  # the due-time index lives in Redis
        await world.fake.wait_for("chat.postMessage", lambda a: a.get("thread_ts") == ts)
        await asyncio.sleep(1.5)
        assert len(world.replies(ts)) == 1
        click = block_actions(world.fake, CHANNEL, ts, "U0BOB", f"askb:pick:{ask_id}:0:0")
        assert await world.send(click, world.replicas[0]) == 200
        code, _, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err


async def test_an_escalation_to_a_channel_the_bot_cannot_post_to_fails_in_words(
    world: World, redis_srv: RedisServer
) -> None:
    """Slack refuses the escalation's post (channel_not_found): the replica that claimed it logs
    one line naming the ask and the reason, no traceback, and the audit trail says so; the ask
    is still answered from its first message."""
    gone = "C0GONE" + uuid.uuid4().hex[:6].upper()
    world.fake.missing_channels.add(gone)
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Failover {marker}?", "Failover", ["Yes", "No"])])
    agent = await Agent.start(
        world.env, questions, *agent_args("--escalate-after", "1", "--escalate-to", gone)
    )
    prefix = world.env["ASK_BRIDGE_KEY_PREFIX"]
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    try:
        ts, ask_id = await world.posted(CHANNEL, marker)
        for _ in range(200):  # due 1 s after asking; a sweep every second
            failed = [e for e in await store.history(ask_id) if e.kind == "follow_up_failed"]
            if failed:
                break
            await asyncio.sleep(0.1)
        click = block_actions(world.fake, CHANNEL, ts, "U0BOB", f"askb:pick:{ask_id}:0:0")
        assert await world.send(click, world.replicas[0]) == 200
        code, out, err = await agent.result()
    finally:
        await agent.kill()
        await store.aclose()
    assert code == 0, err
    assert json.loads(out)["answers"][0]["selected"] == ["Yes"]
    (event,) = failed  # claimed once: the next claim comes after the 60 s retry interval
    assert event.detail["step"] == "escalate" and "channel_not_found" in event.detail["error"]
    logs = [line for serve in world.replicas for line in serve.log if ask_id in line]
    (line,) = [line for line in logs if "could not post" in line]
    assert f"could not post the escalation to slack:{gone}" in line
    assert "channel_not_found" in line
    assert not any("Traceback" in line for serve in world.replicas for line in serve.log)
