"""End to end across OS processes: agents (``ask-bridge ask --platform discord``) in some,
``ask-bridge serve`` bots in others, one real Redis, and the fake Discord delivering clicks and
modal submissions over its gateway."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.support.discord.discord_harness import ALICE, BOB, CAROL
from tests.support.discord.discord_procs import discord_bot, discord_env
from tests.support.discord.fake_discord import (
    CHANNEL,
    GUILD,
    MISSING_CHANNEL,
    FakeDiscord,
    Interaction,
    dm_channel,
)
from tests.support.procs import Agent, Serve
from tests.support.redis_server import RedisServer
from tests.support.samples import q

pytestmark = pytest.mark.asyncio(loop_scope="module")
APPROVERS = "555555555555555555"
"""A role of the fake guild that approvers are given."""


class World:
    def __init__(self, fake: FakeDiscord, env: dict[str, str], bot: Serve) -> None:
        self.fake, self.env, self.bot = fake, env, bot

    async def ask(self, questions: list[dict[str, Any]], *args: str) -> tuple[Agent, str]:
        """Start an agent asking ``questions`` (``{m}`` in their texts: a fresh marker); the
        agent and the marker, once the message is posted."""
        marker = uuid.uuid4().hex[:8]
        text = json.dumps({"questions": questions}).replace("{m}", marker)
        agent = await Agent.start(
            self.env,
            text,
            "--platform",
            "discord",
            "--channel",
            CHANNEL,
            "--wait",
            "60",
            "--asker",
            "e2e",
            *args,
        )
        return agent, marker


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(redis_srv: RedisServer) -> AsyncIterator[World]:
    # the approvers' role exists in the guild from the start (the bot's cache learns it there);
    # nobody holds it until a test gives it out
    fake = await FakeDiscord(users={ALICE: "alice", BOB: "bob"}, roles={"0": [APPROVERS]}).start()
    env = discord_env(
        fake, REDIS_URL=redis_srv.url, ASK_BRIDGE_KEY_PREFIX=f"e2e{uuid.uuid4().hex[:6]}"
    )
    bot = await discord_bot(env).start()
    yield World(fake, env, bot)
    await bot.stop()
    await fake.stop()


def button(message: dict[str, Any], label: str) -> str:
    return next(
        str(b["custom_id"])
        for row in message["components"]
        for b in row["components"]
        if b["label"] == label
    )


async def through_form(
    fake: FakeDiscord, message: dict[str, Any], values: dict[str, Any], typed: dict[str, str]
) -> None:
    """Answer, fill in the form, and the typed step if one follows."""
    opened = await fake.click(ALICE, message, button(message, "Answer"))
    assert (await fake.responded(opened))["type"] == 9
    submitted = await fake.submit(ALICE, opened, values)
    response = await fake.responded(submitted)
    if response["type"] == 4:  # the step message, only Alice sees it
        step = fake.messages[submitted.payload["_original"]]
        nxt = await fake.click(ALICE, step, button(step, "Next"))
        assert (await fake.responded(nxt))["type"] == 9
        await fake.responded(await fake.submit(ALICE, nxt, typed))


async def other_alone(fake: FakeDiscord, message: dict[str, Any]) -> None:
    opened = await fake.click(ALICE, message, button(message, "Other…"))
    assert (await fake.responded(opened))["type"] == 9
    await fake.responded(await fake.submit(ALICE, opened, {"t0": "Friday"}))


FOUR = [
    q("Region {m}?", "Region", ["eu", "us"]),
    q("Runs {m}?", "Runs", ["unit", "e2e", "bench"], multi=True),
    q("Reviewer {m}?", "Review", ["Ana", "Bo"]),
    q("Notify {m}?", "Notify", ["team", "owner"], multi=True),
]
SHAPES: dict[str, tuple[list[dict[str, Any]], Any, list[dict[str, Any]]]] = {
    "one click": (
        [q("Ship {m}?", "Ship", ["Yes", "No", "Later"])],
        lambda fake, m: fake.click(ALICE, m, button(m, "No")),
        [{"selected": ["No"]}],
    ),
    "other alone": (
        [q("Ship {m}?", "Ship", ["Yes", "No"])],
        other_alone,
        [{"selected": [], "other": "Friday"}],
    ),
    "multiSelect": (
        [q("Checks {m}?", "Checks", ["lint", "types", "tests"], multi=True)],
        lambda fake, m: through_form(fake, m, {"q0": ["0", "2"]}, {}),
        [{"selected": ["lint", "tests"]}],
    ),
    "other with selections": (
        [q("Checks {m}?", "Checks", ["lint", "types", "tests"], multi=True)],
        lambda fake, m: through_form(fake, m, {"q0": ["1"], "t0": "fuzz"}, {}),
        [{"selected": ["types"], "other": "fuzz"}],
    ),
    "four questions with typed answers": (
        FOUR,
        lambda fake, m: through_form(
            fake,
            m,
            {"q0": "1", "q1": ["0"], "q3": ["1"], "typed": ["1", "3"]},
            {"t1": "soak", "t2": "Cy", "t3": "pager"},
        ),
        [
            {"selected": ["us"]},
            {"selected": ["unit"], "other": "soak"},
            {"selected": [], "other": "Cy"},
            {"selected": ["owner"], "other": "pager"},
        ],
    ),
}


def answers(out: str) -> list[dict[str, Any]]:
    result = json.loads(out)
    return [
        {"selected": a["selected"], **({"other": a["other_text"]} if a.get("other_text") else {})}
        for a in result["answers"]
    ]


@pytest.mark.parametrize("shape", SHAPES)
async def test_every_shape_end_to_end(world: World, shape: str) -> None:
    questions, act, expected = SHAPES[shape]
    agent, marker = await world.ask(questions)
    try:
        message = await world.fake.posted(marker)
        await act(world.fake, message)
        code, out, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err
    assert answers(out) == expected
    final = await world.fake.changed(lambda: not message["components"] and message)
    assert final["content"] == f"Answered by <@{ALICE}>"


async def test_a_full_bot_restart_between_post_and_click(world: World) -> None:
    agent, marker = await world.ask([q("Restart {m}?", "Restart", ["Yes", "No"])])
    try:
        message = await world.fake.posted(marker)
        await world.bot.stop()
        assert world.bot.returncode == 0
        await world.bot.start()  # a new process: nothing of the old one's memory
        click = await world.fake.click(ALICE, message, button(message, "Yes"), session=None)
        await world.fake.responded(click)
        code, out, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err
    assert answers(out) == [{"selected": ["Yes"]}]


async def test_two_bots_sharing_one_redis_race_on_one_ask(world: World) -> None:
    other = await discord_bot(world.env).start()
    try:
        sessions = await world.fake.wait_sessions(2)
        agent, marker = await world.ask([q("Race {m}?", "Race", ["Yes", "No"])])
        message = await world.fake.posted(marker)
        clicks: list[Interaction] = await asyncio.gather(
            world.fake.click(ALICE, message, button(message, "Yes"), session=sessions[0]),
            world.fake.click(BOB, message, button(message, "No"), session=sessions[1]),
        )
        responses = [await world.fake.responded(c) for c in clicks]
        code, out, err = await agent.result()
    finally:
        await other.stop()
    assert code == 0, err
    (winner,) = [c for c, r in zip(clicks, responses, strict=True) if r["type"] == 7]
    (loser,) = [c for c in clicks if c is not winner]
    names = {ALICE: "Yes", BOB: "No"}
    assert answers(out) == [{"selected": [names[winner.user]]}]
    assert await world.fake.told(loser) == f"This was already answered by <@{winner.user}>."


async def test_a_post_discord_refuses_exits_1_with_its_error(world: World) -> None:
    lost = json.dumps([q("Lost?", "Lost", ["Yes", "No"])])
    agent = await Agent.start(
        world.env, lost, "--platform", "discord", "--channel", MISSING_CHANNEL
    )
    code, out, err = await agent.result()
    assert code == 1 and out == ""
    assert "10003" in err and "Unknown Channel" in err


async def test_standalone_ask_receives_its_own_clicks_in_a_dm(redis_srv: RedisServer) -> None:
    fake = await FakeDiscord(users={ALICE: "alice"}).start()
    try:
        text = json.dumps([q("Alone?", "Alone", ["Yes", "No"])])
        agent = await Agent.start(
            discord_env(fake), text, "--platform", "discord", "--user", ALICE, "--wait", "60"
        )
        message = await fake.posted("Alone?")
        assert message["channel_id"] == dm_channel(ALICE)
        click = await fake.click(ALICE, message, button(message, "No"))
        await fake.responded(click)
        code, out, err = await agent.result()
        assert code == 0, err
        assert answers(out) == [{"selected": ["No"]}]
        assert "Unclosed" not in err
    finally:
        await fake.stop()


async def test_two_approvers_answer_an_ask_that_needs_two(world: World) -> None:
    """``ask --required 2`` on Discord: each submission is shown on the message (an embed) and
    told privately, a repeat counts once, a disagreeing one is shown, and a person who changes
    their submission to agree makes two."""
    agent, marker = await world.ask(
        [q("Deploy {m}?", "Deploy", ["Ship it", "Hold"])], "--required", "2"
    )
    try:
        message = await world.fake.posted(marker)
        assert "Needs 2 approvals" in json.dumps(message["embeds"])

        async def click(user: str, label: str) -> str:
            pressed = await world.fake.click(user, message, button(message, label))
            return await world.fake.told(pressed)

        async def shown(text: str) -> None:
            await world.fake.changed(lambda: text in json.dumps(message["embeds"]))

        told = await click(ALICE, "Ship it")
        assert told == "Your answer is recorded: Ship it. So far 1 of 2 agree on it: 1 more needed."
        await shown(f"1 of 2: <@{ALICE}> chose Ship it")
        assert message["components"]  # still pending: the buttons stay
        told = await click(ALICE, "Ship it")
        assert told.startswith("Your answer is already recorded: Ship it. So far 1 of 2")
        told = await click(BOB, "Hold")
        assert told.endswith("So far 1 of 2 agree on it: 1 more needed.")
        await shown(f"1 of 2: <@{BOB}> chose Hold")
        assert agent.proc.returncode is None
        pressed = await world.fake.click(
            ALICE, message, button(message, "Hold")
        )  # changes her mind
        assert (await world.fake.responded(pressed))["type"] == 7
        code, out, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 0, err
    assert answers(out) == [{"selected": ["Hold"]}]
    final = await world.fake.changed(lambda: not message["components"] and message)
    assert final["content"] == f"Answered by <@{BOB}> and <@{ALICE}>"


async def test_an_approver_whose_role_was_removed_no_longer_counts(world: World) -> None:
    """``--answerer role:R --required 2`` through ``serve``: Alice approves, then loses the
    role; Bob's approval would make two, but the bot reads Alice's roles afresh when it would
    count (one member read, REST) and withdraws hers: Bob alone agrees, the message shows
    hers withdrawn, and Carol's approval makes two."""
    role = APPROVERS
    world.fake.users[CAROL] = "carol"
    for user in (ALICE, BOB, CAROL):
        world.fake.roles[user] = [role]
    agent, marker = await world.ask(
        [q("Release {m}?", "Release", ["Ship it", "Hold"])],
        *("--answerer", f"role:{role}", "--required", "2"),
    )
    try:
        message = await world.fake.posted(marker)

        async def click(user: str) -> str:
            pressed = await world.fake.click(user, message, button(message, "Ship it"))
            return await world.fake.told(pressed)

        assert (await click(ALICE)).startswith("Your answer is recorded: Ship it.")
        world.fake.roles[ALICE] = []  # removed from the approvers' role
        told = await click(BOB)
        assert told == "Your answer is recorded: Ship it. So far 1 of 2 agree on it: 1 more needed."
        await world.fake.changed(
            lambda: f"<@{ALICE}> chose Ship it (withdrawn" in json.dumps(message["embeds"])
        )
        assert agent.proc.returncode is None  # still waiting: one approval stands
        pressed = await world.fake.click(CAROL, message, button(message, "Ship it"))
        assert (await world.fake.responded(pressed))["type"] == 7
        code, out, err = await agent.result()
    finally:
        await agent.kill()
        for user in (ALICE, BOB, CAROL):
            world.fake.roles.pop(user, None)
    assert code == 0, err
    assert answers(out) == [{"selected": ["Ship it"]}]
    final = await world.fake.changed(lambda: not message["components"] and message)
    assert final["content"] == f"Answered by <@{BOB}> and <@{CAROL}>"
    reads = [c for c in world.fake.calls if c.path == f"/guilds/{GUILD}/members/{ALICE}"]
    assert reads and reads[-1].status == 200
