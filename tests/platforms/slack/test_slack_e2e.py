"""End to end across OS processes: an agent (``ask-bridge ask``: ask_user via tools_interactive and
ChatHandler) in one, ``ask-bridge serve`` replicas in others, one real Redis, the fake Slack, and
signed interaction payloads over real HTTP."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bridge.aio import next_within
from bridge.feed import render_delivery
from bridge.record import AskStatus
from bridge.store.base import Delivery
from bridge.store.redis import RedisStore
from tests.support.procs import Agent, Serve, cli_env
from tests.support.redis_server import RedisServer
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import (
    SIGNING_SECRET,
    block_actions,
    checks,
    form_body,
    form_values,
    radio,
    signed,
    view_submission,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
CHANNEL = "C0E2E"


class World:
    def __init__(self, fake: FakeSlack, env: dict[str, str], serve: Serve, store: RedisStore):
        self.fake = fake
        self.env = env
        self.serve = serve
        self.store = store
        self.session = aiohttp.ClientSession()

    async def send(self, payload: dict[str, Any], to: Serve | None = None) -> tuple[int, str]:
        body = form_body(payload)
        url = (to or self.serve).url
        async with self.session.post(url, data=body, headers=signed(body)) as resp:
            return resp.status, await resp.text()

    async def posted(self, marker: str) -> tuple[str, str, str]:
        """Channel, ts and ask id of the message whose question text holds ``marker``."""
        await self.fake.wait_for("chat.postMessage", lambda a: marker in a["text"], within=30)
        call = next(
            c
            for c in self.fake.calls
            if c.ok and c.method == "chat.postMessage" and marker in c.args["text"]
        )
        channel, ts = call.response["channel"], call.response["ts"]
        action = next(
            el["action_id"]
            for b in call.args["blocks"]
            for el in b.get("elements") or ()
            if "action_id" in el
        )
        return channel, ts, action.split(":")[2]

    async def modal(self, ask_id: str) -> str:
        await self.fake.wait_for("views.open", lambda a: ask_id in json.dumps(a["view"]))
        return next(
            v for v, view in self.fake.views.items() if ask_id in view.get("private_metadata", "")
        )


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(redis_srv: RedisServer) -> AsyncIterator[World]:
    fake = await FakeSlack().start()
    prefix = f"e2e{uuid.uuid4().hex[:6]}"
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.url,
        REDIS_URL=redis_srv.url,
        ASK_BRIDGE_KEY_PREFIX=prefix,
    )
    serve = await Serve(env).start()
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    w = World(fake, env, serve, store)
    yield w
    await w.session.close()
    await serve.stop()
    await store.aclose()
    await fake.stop()


def agent_args(*extra: str) -> list[str]:
    return ["--platform", "slack", "--channel", CHANNEL, "--wait", "60", "--asker", "e2e", *extra]


async def answer_by_click(w: World, ts: str, channel: str, ask_id: str, option: int) -> None:
    payload = block_actions(w.fake, channel, ts, "U0ALICE", f"askb:pick:{ask_id}:0:{option}")
    assert (await w.send(payload))[0] == 200


async def answer_by_form(
    w: World, ts: str, channel: str, ask_id: str, prefix: str, values: dict[str, Any]
) -> None:
    assert (await w.send(block_actions(w.fake, channel, ts, "U0ALICE", prefix)))[0] == 200
    view_id = await w.modal(ask_id)
    status, body = await w.send(view_submission(w.fake, view_id, "U0ALICE", values))
    assert (status, body) == (200, "")


SHAPES: dict[str, tuple[list[dict[str, Any]], str, Any, list[tuple[list[str], str | None]]]] = {
    "one click": (
        [q("Ship {m}?", "Ship", ["Yes", "No", "Later"])],
        "pick",
        1,
        [(["No"], None)],
    ),
    "multiSelect": (
        [q("Checks {m}?", "Checks", ["lint", "types", "tests"], multi=True)],
        "answer",
        form_values((checks(0, 2), None)),
        [(["lint", "tests"], None)],
    ),
    "four-question form": (
        [
            q("Region {m}?", "Region", ["eu", "us"]),
            q("Runs {m}?", "Runs", ["unit", "e2e", "bench"], multi=True),
            q("Reviewer {m}?", "Review", ["Ana", "Bo"]),
            q("Notify {m}?", "Notify", ["team", "owner"], multi=True),
        ],
        "answer",
        form_values((radio(1), None), (checks(0, 1, 2), None), (radio(0), None), (checks(1), None)),
        [(["us"], None), (["unit", "e2e", "bench"], None), (["Ana"], None), (["owner"], None)],
    ),
    "Other… alone": (
        [q("Deadline {m}?", "When", ["Today", "Friday"])],
        "other",
        {"q0.other": {"text": {"type": "plain_text_input", "value": "next Tuesday"}}},
        [([], "next Tuesday")],
    ),
    "Other… with selections": (
        [q("Targets {m}?", "Targets", ["linux", "mac", "win"], multi=True)],
        "answer",
        form_values((checks(0), "freebsd too")),
        [(["linux"], "freebsd too")],
    ),
    "single-select by typed text only": (
        [q("Owner {m}?", "Owner", ["Ana", "Bo"]), q("Ready {m}?", "Ready", ["yes", "no"])],
        "answer",
        form_values((radio(None), "Carla"), (radio(0), None)),
        [([], "Carla"), (["yes"], None)],
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_each_shape_resolves_the_waiting_agent(world: World, shape: str) -> None:
    questions, how, given, expected = SHAPES[shape]
    marker = uuid.uuid4().hex[:8]
    payload = json.dumps({"questions": json.loads(json.dumps(questions).replace("{m}", marker))})
    agent = await Agent.start(world.env, payload, *agent_args())
    try:
        channel, ts, ask_id = await world.posted(marker)
        if how == "pick":
            await answer_by_click(world, ts, channel, ask_id, given)
        else:
            prefix = f"askb:{how}:{ask_id}" + (":0" if how == "other" else "")
            await answer_by_form(world, ts, channel, ask_id, prefix, given)
        code, out, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err
    result = json.loads(out)
    got = [(a["selected"], a["other_text"]) for a in result["answers"]]
    assert got == expected
    await world.fake.wait_for("chat.update", lambda a: a["ts"] == ts)
    final = world.fake.messages[(channel, ts)]
    assert "Answered by <@U0ALICE>" in json.dumps(final["blocks"])
    assert all(b["type"] != "actions" for b in final["blocks"])


async def test_restart_between_post_and_click(world: World) -> None:
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Restart {marker}?", "Restart", ["ok", "no"])])
    agent = await Agent.start(world.env, questions, *agent_args())
    try:
        channel, ts, ask_id = await world.posted(marker)
        await world.serve.restart()
        await answer_by_click(world, ts, channel, ask_id, 0)
        code, out, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err
    assert json.loads(out)["answers"][0]["selected"] == ["ok"]


async def test_two_replicas_race_on_one_ask(world: World) -> None:
    other = await Serve(world.env).start()
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Race {marker}?", "Race", ["left", "right"])])
    agent = await Agent.start(world.env, questions, *agent_args())
    try:
        channel, ts, ask_id = await world.posted(marker)
        left = block_actions(world.fake, channel, ts, "U0LEFT", f"askb:pick:{ask_id}:0:0")
        right = block_actions(world.fake, channel, ts, "U0RIGHT", f"askb:pick:{ask_id}:0:1")
        sent = await asyncio.gather(world.send(left), world.send(right, to=other))
        assert [s for s, _ in sent] == [200, 200]
        code, out, err = await agent.result()
        (loser_note,) = await world.fake.wait_for(
            "chat.postEphemeral", lambda a: a["user"] in ("U0LEFT", "U0RIGHT")
        )
        # Both replicas want to re-render (the winner after its verdict, the loser because its
        # verdict found the ask answered); the store's render claim lets exactly one do it.
        await world.fake.wait_for("chat.update", lambda a: a["ts"] == ts, count=1)
    finally:
        await agent.kill()
        await other.stop()
    assert code == 0, err
    chosen = json.loads(out)["answers"][0]["selected"]
    winner = {("left",): "U0LEFT", ("right",): "U0RIGHT"}[tuple(chosen)]
    loser = "U0RIGHT" if winner == "U0LEFT" else "U0LEFT"
    assert loser_note["user"] == loser and loser_note["channel"] == channel
    assert loser_note["text"] == f"This was already answered by <@{winner}>."
    updates = [u for u in world.fake.ok_calls("chat.update") if u["ts"] == ts]
    assert len(updates) == 1  # one across replicas, not one per click
    for update in updates:  # it shows the one final state, with no controls
        assert all(b["type"] != "actions" for b in update["blocks"])
        assert f"Answered by <@{winner}>" in json.dumps(update["blocks"])
    record = await world.store.get(ask_id)
    assert record is not None and record.answered_by is not None
    assert record.answered_by.user_id == winner


async def test_not_answered_within_wait_defers_and_the_answer_reaches_the_feed(
    world: World,
) -> None:
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Later {marker}?", "Later", ["a", "b"])])
    agent = await Agent.start(world.env, questions, *agent_args("--wait", "0.3"))
    code, out, err = await agent.result()
    assert code == 3, err
    deferred = json.loads(out)
    assert deferred["status"] == "deferred" and deferred["ask_id"]
    channel, ts, ask_id = await world.posted(marker)
    assert ask_id == deferred["ask_id"]
    await answer_by_click(world, ts, channel, ask_id, 1)
    await world.fake.wait_for("chat.update", lambda a: a["ts"] == ts)
    record = await world.store.get(ask_id)
    assert record is not None and record.status is AskStatus.ANSWERED and record.deferred
    # the agent host's side: the answer arrives on the feed as the model's next message
    delivery = await next_delivery_for(world.store, ask_id)
    message = json.loads(render_delivery(delivery))
    assert [a["selected"] for a in message["answers"]] == [["b"]]
    assert message["answers"][0]["question"] == f"Later {marker}?"
    await world.store.ack(delivery)
    assert await next_delivery_for(world.store, ask_id, within=0.5) is None  # acked: gone


async def next_delivery_for(
    store: RedisStore, ask_id: str, *, within: float = 15.0
) -> Delivery | None:
    """The feed's delivery for ``ask_id`` as an agent host sees it (others are left unacked)."""
    feed = store.feed("e2e-host")
    deadline = asyncio.get_running_loop().time() + within
    try:
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            delivery = await next_within(feed, left)
            if delivery is None or delivery.record.id == ask_id:
                return delivery
    finally:
        await feed.aclose()  # type: ignore[attr-defined]
    return None


async def test_post_refused_exits_1_with_the_slack_error(world: World) -> None:
    world.fake.missing_channels.add("C0NOWHERE")
    questions = json.dumps([q("Lost?", "Lost", ["a", "b"])])
    args = ["--platform", "slack", "--channel", "C0NOWHERE", "--wait", "30"]
    code, out, err = await (await Agent.start(world.env, questions, *args)).result()
    assert code == 1, err
    assert out == "" and "channel_not_found" in err
    assert not any(channel == "C0NOWHERE" for channel, _ in world.fake.messages)


async def test_expiry_exits_4_and_shows_the_ask_expired(world: World) -> None:
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Expire {marker}?", "Expire", ["a", "b"])])
    agent = await Agent.start(world.env, questions, *agent_args("--expires", "0.5"))
    code, _, err = await agent.result()
    assert code == 4, err
    channel, ts, _ = await world.posted(marker)
    await world.fake.wait_for("chat.update", lambda a: a["ts"] == ts)
    assert "Expired" in json.dumps(world.fake.messages[(channel, ts)]["blocks"])


async def test_serve_sweeps_expired_deferred_asks_and_shows_them_expired(world: World) -> None:
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Sweep {marker}?", "Sweep", ["a", "b"])])
    agent = await Agent.start(
        world.env, questions, *agent_args("--mode", "defer", "--expires", "0.3")
    )
    code, _, err = await agent.result()
    assert code == 3, err
    channel, ts, ask_id = await world.posted(marker)
    await world.fake.wait_for("chat.update", lambda a: a["ts"] == ts, within=15)
    assert "Expired" in json.dumps(world.fake.messages[(channel, ts)]["blocks"])
    record = await world.store.get(ask_id)
    assert record is not None and record.status is AskStatus.EXPIRED


async def test_two_approvers_answer_an_ask_that_needs_two(world: World) -> None:
    """``ask --required 2``: each submission is recorded and shown on the message, the person is
    told privately how many more are needed, a repeat counts once, a disagreeing one is shown
    too, and the second agreeing person answers it."""
    marker = uuid.uuid4().hex[:8]
    questions = json.dumps([q(f"Deploy {marker}?", "Deploy", ["Ship it", "Hold"])])
    agent = await Agent.start(world.env, questions, *agent_args("--required", "2", "--answered-by"))
    try:
        channel, ts, ask_id = await world.posted(marker)
        posted = world.fake.messages[(channel, ts)]
        assert "Needs 2 approvals" in json.dumps(posted["blocks"])

        async def click(user_id: str, option: int) -> dict[str, Any]:
            payload = block_actions(
                world.fake, channel, ts, user_id, f"askb:pick:{ask_id}:0:{option}"
            )
            before = len(
                [a for a in world.fake.ok_calls("chat.postEphemeral") if a["user"] == user_id]
            )
            assert (await world.send(payload))[0] == 200
            notes = await world.fake.wait_for(
                "chat.postEphemeral", lambda a: a["user"] == user_id, count=before + 1
            )
            return notes[-1]

        async def shown(text: str) -> None:
            await world.fake.wait_for(
                "chat.update", lambda a: a["ts"] == ts and text in json.dumps(a["blocks"])
            )

        note = await click("U0ALICE", 0)
        assert (
            note["text"]
            == "Your answer is recorded: Ship it. So far 1 of 2 agree on it: 1 more needed."
        )
        await shown("1 of 2: <@U0ALICE> chose Ship it")
        assert any(b["type"] == "actions" for b in world.fake.messages[(channel, ts)]["blocks"])
        note = await click("U0ALICE", 0)  # again: counted once
        assert note["text"].startswith("Your answer is already recorded: Ship it. So far 1 of 2")
        note = await click("U0BOB", 1)  # disagrees: shown too
        assert note["text"].endswith("So far 1 of 2 agree on it: 1 more needed.")
        await shown("1 of 2: <@U0BOB> chose Hold")
        assert not agent.proc.returncode
        payload = block_actions(world.fake, channel, ts, "U0CAROL", f"askb:pick:{ask_id}:0:0")
        assert (await world.send(payload))[0] == 200
        code, out, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err
    result = json.loads(out)
    assert result["answers"][0]["selected"] == ["Ship it"]
    assert [w["user_id"] for w in result["answered_by"]] == ["U0ALICE", "U0CAROL"]
    await shown("Answered by <@U0ALICE> and <@U0CAROL>")
    final = world.fake.messages[(channel, ts)]
    assert all(b["type"] != "actions" for b in final["blocks"])
    record = await world.store.get(ask_id)
    assert record is not None and record.status is AskStatus.ANSWERED
    assert [s.user_id for s in record.submissions] == ["U0ALICE", "U0BOB", "U0CAROL"]
    kinds = [e.kind for e in await world.store.history(ask_id)]
    assert kinds.count("submitted") == 2 and kinds.count("answered") == 1
