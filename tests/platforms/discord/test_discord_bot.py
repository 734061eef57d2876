"""The bot over the fake Discord's gateway and REST API, with real discord.py and a real Redis:
every shape answered, refusals explained privately, the message re-rendered when the ask ends."""

from __future__ import annotations

import asyncio
from typing import Any

import discord
import pytest

from bridge.record import AskRecord, AskStatus, Destination
from bridge.replies import BAD_CONTROL, RECORDED, TRY_AGAIN
from bridge.store.redis import RedisStore
from tests.support.discord.discord_harness import (
    ALICE,
    BOB,
    CAROL,
    REVIEWERS,
    Bot,
    settings_for,
    start_bot,
)
from tests.support.discord.fake_discord import CHANNEL, THREAD, FakeDiscord, Interaction, dm_channel
from tests.support.redis_server import free_port
from tests.support.samples import q


def allowed(body: dict[str, Any]) -> dict[str, list[str]]:
    """A body's allowed mentions, ids as strings, empty lists left out."""
    found = body["allowed_mentions"]
    return {k: [str(v) for v in vs] for k, vs in found.items() if vs or k == "parse"}


def fields(modal: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {top["component"]["custom_id"]: top for top in modal["components"]}


async def modal_of(fake: FakeDiscord, click: Interaction) -> dict[str, Any]:
    response = await fake.responded(click)
    assert response["type"] == 9, response
    data: dict[str, Any] = response["data"]
    return data


async def answered(bot: Bot, record: AskRecord) -> AskRecord:
    """The record once answered, and its message once re-rendered without controls."""
    await bot.fake.changed(lambda: not bot.message(record)["components"])
    done = await bot.store.get(record.id)
    assert done is not None and done.status is AskStatus.ANSWERED
    return done


def picks(record: AskRecord) -> list[tuple[tuple[str, ...], str | None]]:
    assert record.answers is not None
    return [(a.selected, a.other_text) for a in record.answers]


async def test_one_click_answers_and_shows_the_answer(bot: Bot, fake: FakeDiscord) -> None:
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])])
    posted = bot.message(record)
    (row,) = posted["components"]
    assert [b["label"] for b in row["components"]] == ["Yes", "No", "Other…"]
    assert posted["embeds"][0]["author"]["name"] == "Build bot asks"
    assert "Ship it?" in posted["embeds"][0]["description"]
    assert "**No** — No description" in posted["embeds"][0]["description"]
    click = await fake.click(ALICE, posted, f"askb:pick:{record.id}:0:1")
    response = await fake.responded(click)
    # judged before the response (stored), which shows the outcome itself: UPDATE_MESSAGE
    assert response["type"] == 7
    assert response["data"]["content"] == f"Answered by <@{ALICE}>"
    assert response["data"]["components"] == []
    assert await bot.store.get(record.id) is not None
    done = await answered(bot, record)
    assert picks(done) == [(("No",), None)]
    final = bot.message(record)
    assert final["content"] == f"Answered by <@{ALICE}>"
    assert "✅ **No**" in final["embeds"][0]["description"]
    assert final["embeds"][0]["author"]["name"] == "Build bot asked"
    assert not fake.errors()


async def test_other_alone_opens_a_modal_first_and_answers_by_typing(
    bot: Bot, fake: FakeDiscord
) -> None:
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])])
    click = await fake.click(ALICE, bot.message(record), f"askb:other:{record.id}:0")
    modal = await modal_of(fake, click)
    assert modal["title"] == "Other answer" and list(fields(modal)) == ["t0"]
    text = fields(modal)["t0"]["component"]
    assert text["required"] is True and text["max_length"] == 2000
    submit = await fake.submit(ALICE, click, {"t0": "  Only on Fridays  "})
    assert (await fake.responded(submit))["type"] == 7
    done = await answered(bot, record)
    assert picks(done) == [((), "Only on Fridays")]
    assert "✏️ Only on Fridays" in bot.message(record)["embeds"][0]["description"]


async def test_multiselect_with_a_typed_answer_in_one_modal(bot: Bot, fake: FakeDiscord) -> None:
    record = await bot.ask([q("Which checks?", "Checks", ["lint", "types", "tests"], multi=True)])
    (row,) = bot.message(record)["components"]
    assert [b["label"] for b in row["components"]] == ["Answer"]
    click = await fake.click(ALICE, bot.message(record), f"askb:answer:{record.id}")
    modal = await modal_of(fake, click)
    assert list(fields(modal)) == ["q0", "t0"]
    assert fields(modal)["q0"]["component"]["type"] == 22  # a checkbox group
    submit = await fake.submit(ALICE, click, {"q0": ["0", "2"], "t0": "fuzzing"})
    assert (await fake.responded(submit))["type"] == 7
    assert picks(await answered(bot, record)) == [(("lint", "tests"), "fuzzing")]


async def test_two_questions_typed_answer_alone_answers_a_single_select(
    bot: Bot, fake: FakeDiscord
) -> None:
    record = await bot.ask(
        [q("Region?", "Region", ["eu", "us"]), q("Runs?", "Runs", ["unit", "e2e"], multi=True)]
    )
    click = await fake.click(ALICE, bot.message(record), f"askb:answer:{record.id}")
    modal = await modal_of(fake, click)
    assert list(fields(modal)) == ["q0", "t0", "q1", "t1"]
    assert fields(modal)["q0"]["component"]["type"] == 21  # a radio group
    submit = await fake.submit(ALICE, click, {"t0": "ap-south", "q1": ["1"]})
    await fake.responded(submit)
    assert picks(await answered(bot, record)) == [((), "ap-south"), (("e2e",), None)]


FOUR = [
    q("Region?", "Region", ["eu", "us"]),
    q("Runs?", "Runs", ["unit", "e2e", "bench"], multi=True),
    q("Reviewer?", "Review", ["Ana", "Bo"]),
    q("Notify?", "Notify", ["team", "owner"], multi=True),
]


async def test_four_questions_with_typed_answers_take_a_next_step(
    bot: Bot, fake: FakeDiscord
) -> None:
    record = await bot.ask(FOUR)
    click = await fake.click(ALICE, bot.message(record), f"askb:answer:{record.id}")
    modal = await modal_of(fake, click)
    assert list(fields(modal)) == ["q0", "q1", "q2", "q3", "typed"]
    ticks = fields(modal)["typed"]["component"]
    assert [o["value"] for o in ticks["options"]] == ["1", "3"]  # the multiSelect questions
    values = {"q0": "1", "q1": ["0", "2"], "q3": ["1"], "typed": ["1"]}
    submit = await fake.submit(ALICE, click, values)  # Review left empty: typed next
    step = await fake.responded(submit)
    assert step["type"] == 4 and step["data"]["flags"] == 64
    assert "questions 2 and 3" in step["data"]["content"]
    (row,) = step["data"]["components"]
    (button,) = row["components"]
    assert button["label"] == "Next"
    assert (await bot.store.get(record.id)).status is AskStatus.PENDING  # type: ignore[union-attr]
    ephemeral = fake.messages[submit.payload["_original"]]
    nxt = await fake.click(ALICE, ephemeral, button["custom_id"])
    typed = await modal_of(fake, nxt)
    assert list(fields(typed)) == ["t1", "t2"]
    assert fields(typed)["t1"]["component"]["required"] is False
    assert fields(typed)["t2"]["component"]["required"] is True
    final = await fake.submit(ALICE, nxt, {"t1": "soak", "t2": "Cy"})
    response = await fake.responded(final)
    assert response["type"] == 7 and "recorded" in response["data"]["content"]
    assert response["data"]["components"] == []
    done = await answered(bot, record)
    assert picks(done) == [
        (("us",), None),
        (("unit", "bench"), "soak"),
        ((), "Cy"),
        (("owner",), None),
    ]


async def test_four_questions_all_chosen_answer_in_one_modal(bot: Bot, fake: FakeDiscord) -> None:
    record = await bot.ask(FOUR)
    click = await fake.click(ALICE, bot.message(record), f"askb:answer:{record.id}")
    await modal_of(fake, click)
    values = {"q0": "0", "q1": ["1"], "q2": "0", "q3": ["0", "1"]}
    submit = await fake.submit(ALICE, click, values)
    assert (await fake.responded(submit))["type"] == 7
    assert picks(await answered(bot, record)) == [
        (("eu",), None),
        (("e2e",), None),
        (("Ana",), None),
        (("team", "owner"), None),
    ]


async def test_an_incomplete_typed_step_is_refused_privately_keeping_the_choices(
    bot: Bot, fake: FakeDiscord
) -> None:
    record = await bot.ask(FOUR)
    click = await fake.click(ALICE, bot.message(record), f"askb:answer:{record.id}")
    await modal_of(fake, click)
    submit = await fake.submit(ALICE, click, {"q0": "1", "q1": ["0"], "q3": ["1"]})
    step = await fake.responded(submit)
    ephemeral = fake.messages[submit.payload["_original"]]
    button = step["data"]["components"][0]["components"][0]
    nxt = await fake.click(ALICE, ephemeral, button["custom_id"])
    await modal_of(fake, nxt)
    blank = await fake.submit(ALICE, nxt, {"t2": "   "})  # only blanks: no answer
    refused = await fake.responded(blank)
    assert refused["type"] == 7 and "type your own answer" in refused["data"]["content"]
    again = refused["data"]["components"][0]["components"][0]
    assert again["custom_id"] == button["custom_id"]  # the choices are kept in the button
    assert (await bot.store.get(record.id)).status is AskStatus.PENDING  # type: ignore[union-attr]


async def test_unauthorised_user_is_told_privately_and_nothing_changes(
    bot: Bot, fake: FakeDiscord
) -> None:
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])], answerers=(BOB,))
    posted = bot.message(record)
    assert posted["content"] == f"For <@{BOB}>:"
    assert allowed(fake.history(posted["id"])[0]) == {"parse": [], "users": [BOB]}
    click = await fake.click(ALICE, posted, f"askb:pick:{record.id}:0:0")
    told = await fake.told(click)
    assert told == f"Sorry, you can't answer this one: it is for <@{BOB}>."
    assert allowed(click.responses[0]["data"]) == {"parse": []}
    form = await fake.click(ALICE, posted, f"askb:other:{record.id}:0")
    assert "it is for" in await fake.told(form)  # no modal for someone who may not answer
    assert (await bot.store.get(record.id)).status is AskStatus.PENDING  # type: ignore[union-attr]


async def test_roles_are_read_from_the_clicking_member(bot: Bot, fake: FakeDiscord) -> None:
    answerer = f"role:{REVIEWERS}"
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])], answerers=(answerer,))
    posted = bot.message(record)
    assert posted["content"] == f"For <@&{REVIEWERS}>:"
    assert allowed(fake.history(posted["id"])[0]) == {"parse": [], "roles": [REVIEWERS]}
    refused = await fake.click(ALICE, posted, f"askb:pick:{record.id}:0:0")
    assert await fake.told(refused) == (
        f"Sorry, you can't answer this one: it is for <@&{REVIEWERS}>."
    )
    accepted = await fake.click(CAROL, posted, f"askb:pick:{record.id}:0:0")
    assert (await fake.responded(accepted))["type"] == 7
    done = await answered(bot, record)
    assert done.answered_by is not None and done.answered_by.user_id == CAROL


def edits_of(fake: FakeDiscord, message: dict[str, Any]) -> list[int]:
    """The statuses of the edits of ``message`` sent over REST (PATCH), in order."""
    path = f"/channels/{message['channel_id']}/messages/{message['id']}"
    return [c.status for c in fake.calls if c.method == "PATCH" and c.path == path]


async def test_the_answering_click_shows_the_outcome_once_and_the_ask_is_marked_shown(
    bot: Bot, fake: FakeDiscord
) -> None:
    """The response to the click that ends the ask shows its final state; the showing that
    follows (claim, mark shown) sends no second edit of the message, and the ask leaves the
    sweeper's list of asks to show."""
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])])
    posted = bot.message(record)
    click = await fake.click(ALICE, posted, f"askb:pick:{record.id}:0:0")
    assert (await fake.responded(click))["type"] == 7
    await answered(bot, record)

    async def shown() -> bool:
        return any(e.kind == "rendered" for e in await bot.store.history(record.id))

    async with asyncio.timeout(10):
        while not await shown():  # noqa: ASYNC110 (polling the store's trail)
            await asyncio.sleep(0.02)
    assert edits_of(fake, posted) == []
    assert bot.message(record)["content"] == f"Answered by <@{ALICE}>"
    assert not fake.errors()


async def test_a_response_discord_refuses_is_deferred_and_the_message_edited(
    bot: Bot, fake: FakeDiscord
) -> None:
    """Discord refuses the response's rendering (400 Invalid Form Body): the click is answered
    with a deferred update instead, and the message shows the outcome by an edit."""
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])])
    posted = bot.message(record)
    fake.fail_next("/callback", 400, 50035, "Invalid Form Body")
    click = await fake.click(ALICE, posted, f"askb:pick:{record.id}:0:1")
    assert (await fake.responded(click))["type"] == 6
    assert picks(await answered(bot, record)) == [(("No",), None)]
    assert edits_of(fake, posted) == [200]
    assert bot.message(record)["content"] == f"Answered by <@{ALICE}>"


async def test_late_and_double_clicks_are_told(bot: Bot, fake: FakeDiscord) -> None:
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])])
    posted = bot.message(record)
    first = await fake.click(ALICE, posted, f"askb:pick:{record.id}:0:0")
    await fake.responded(first)
    # clients that still show the buttons (forge_click: the id need not be on the message now)
    again = await fake.forge_click(ALICE, posted, f"askb:pick:{record.id}:0:0")
    assert await fake.told(again) == RECORDED
    late = await fake.forge_click(BOB, posted, f"askb:pick:{record.id}:0:1")
    assert await fake.told(late) == f"This was already answered by <@{ALICE}>."
    done = await answered(bot, record)
    assert picks(done) == [(("Yes",), None)]


async def test_a_malformed_id_of_ours_is_explained(bot: Bot, fake: FakeDiscord) -> None:
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])])
    forged = await fake.forge_click(ALICE, bot.message(record), f"askb:pick:{record.id}:0:x")
    assert await fake.told(forged) == BAD_CONTROL


async def test_store_down_during_a_click_is_explained_and_changes_nothing(
    fake: FakeDiscord, store: RedisStore, tmp_path: Any
) -> None:
    owner = await start_bot(fake, store)
    record = await owner.ask([q("Ship it?", "Ship", ["Yes", "No"])])
    await owner.stop()
    dead = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0", prefix="gone")
    down = await start_bot(fake, dead, store_timeout=1.0)
    try:
        click = await fake.click(ALICE, down.message(record), f"askb:pick:{record.id}:0:0")
        assert await fake.told(click) == TRY_AGAIN
        form = await fake.click(ALICE, down.message(record), f"askb:other:{record.id}:0")
        assert await fake.told(form) == TRY_AGAIN
    finally:
        await down.stop()
        await dead.aclose()
    assert (await store.get(record.id)).status is AskStatus.PENDING  # type: ignore[union-attr]


async def test_a_slow_store_is_answered_at_once_and_the_outcome_followed_up(
    fake: FakeDiscord, store: RedisStore
) -> None:
    slow = await start_bot(fake, store, ack_budget=0.0)  # every judgement outlasts its budget
    try:
        record = await slow.ask([q("Ship it?", "Ship", ["Yes", "No"])], answerers=(BOB,))
        refused = await fake.click(ALICE, slow.message(record), f"askb:pick:{record.id}:0:0")
        assert (await fake.responded(refused))["type"] == 6
        assert "it is for" in await fake.told(refused)  # a follow-up, after the response
        form = await fake.click(BOB, slow.message(record), f"askb:other:{record.id}:0")
        assert (await fake.responded(form))["type"] == 5  # thinking, then a button to open it
        await fake.changed(lambda: form.followups)
        (row,) = form.followups[0]["components"]
        assert row["components"][0]["custom_id"] == f"askb:other:{record.id}:0"
        accepted = await fake.click(BOB, slow.message(record), f"askb:pick:{record.id}:0:1")
        assert (await fake.responded(accepted))["type"] == 6
        assert picks(await answered(slow, record)) == [(("No",), None)]
    finally:
        await slow.stop()


@pytest.mark.parametrize("where", ["dm", "thread"])
async def test_dms_and_threads(bot: Bot, fake: FakeDiscord, where: str) -> None:
    dest = (
        Destination(platform="discord", user=ALICE)
        if where == "dm"
        else Destination(platform="discord", channel=CHANNEL, thread=THREAD)
    )
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])], destination=dest)
    assert record.message is not None
    assert record.message.channel == (dm_channel(ALICE) if where == "dm" else THREAD)
    click = await fake.click(ALICE, bot.message(record), f"askb:pick:{record.id}:0:0")
    await fake.responded(click)
    assert picks(await answered(bot, record)) == [(("Yes",), None)]


@pytest.mark.parametrize("status", [AskStatus.EXPIRED, AskStatus.CANCELLED])
async def test_expired_and_cancelled_asks_are_shown_ended(
    bot: Bot, fake: FakeDiscord, status: AskStatus
) -> None:
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])], answerers=(BOB,))
    closed = await bot.store.close(record.id, status)
    assert closed is not None
    await bot.platform.poster().update(closed)
    final = bot.message(record)
    assert final["components"] == []
    assert final["content"] in ("⌛ Expired without an answer.", "🚫 Cancelled.")
    assert allowed(fake.history(final["id"])[-1]) == {"parse": []}
    late = await fake.forge_click(BOB, final, f"askb:pick:{record.id}:0:0")
    assert "expired" in await fake.told(late) or "cancelled" in await fake.told(late)


async def test_gateway_disconnect_and_resume_between_post_and_click(
    bot: Bot, fake: FakeDiscord
) -> None:
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])])
    await fake.drop()
    await fake.changed(lambda: fake.resumes == 1, within=20)
    (session,) = await fake.wait_sessions()
    pick = f"askb:pick:{record.id}:0:0"
    click = await fake.click(ALICE, bot.message(record), pick, session=session)
    await fake.responded(click)
    assert picks(await answered(bot, record)) == [(("Yes",), None)]
    assert fake.identifies == 1  # resumed, not identified again


async def test_a_post_discord_refuses_raises_its_error(bot: Bot) -> None:
    with pytest.raises(discord.NotFound, match="10003"):
        await bot.ask(
            [q("Ship it?", "Ship", ["Yes", "No"])],
            destination=Destination(platform="discord", channel="810000000000000999"),
        )


async def test_served_beside_slack_in_one_process(fake: FakeDiscord, store: RedisStore) -> None:
    import aiohttp
    from aiohttp import web

    from bridge.runtime import serving
    from platforms.discord import DiscordPlatform
    from platforms.slack import SlackPlatform
    from platforms.slack.settings import SlackSettings

    async def auth_test(request: web.Request) -> web.Response:  # Slack's start-up token check
        return web.json_response({"ok": True, "user_id": "UBOT", "team": "Fake"})

    app = web.Application()
    app.router.add_post("/api/auth.test", auth_test)
    slack_api = web.AppRunner(app)
    await slack_api.setup()
    site = web.TCPSite(slack_api, "127.0.0.1", 0)
    await site.start()
    api_url = f"http://127.0.0.1:{slack_api.addresses[0][1]}/api/"
    slack = SlackPlatform(SlackSettings(bot_token="xoxb-t", signing_secret="s", api_url=api_url))
    discord_ = DiscordPlatform(settings_for(fake))
    async with serving([slack, discord_], store, port=0) as receiving:
        assert receiving.server is not None
        async with aiohttp.ClientSession() as http:  # Slack's route on the one HTTP server
            async with http.post(receiving.server.url("/slack/events"), data=b"{}") as resp:
                assert resp.status == 401  # unsigned: refused, but served
        posting = Bot(fake, store, discord_)  # the runtime receives its clicks
        record = await posting.ask([q("Both?", "Both", ["Yes", "No"])])
        click = await fake.click(ALICE, posting.message(record), f"askb:pick:{record.id}:0:0")
        assert (await fake.responded(click))["type"] == 7
        assert picks(await answered(posting, record)) == [(("Yes",), None)]
    await posting.stop()
    await slack_api.cleanup()


async def test_choice_and_typed_text_for_a_single_select_is_refused_keeping_the_choice(
    bot: Bot, fake: FakeDiscord
) -> None:
    record = await bot.ask(
        [q("Region?", "Region", ["eu", "us"]), q("Runs?", "Runs", ["unit", "e2e"], multi=True)]
    )
    click = await fake.click(ALICE, bot.message(record), f"askb:answer:{record.id}")
    await modal_of(fake, click)
    submit = await fake.submit(ALICE, click, {"q0": "1", "t0": "ap", "q1": ["0"], "t1": "x"})
    refused = await fake.responded(submit)
    assert refused["type"] == 4 and "not both" in refused["data"]["content"]
    (row,) = refused["data"]["components"]
    assert row["components"][0]["label"] == "Next"  # Runs' typed text is to be typed again
    step = fake.messages[submit.payload["_original"]]
    nxt = await fake.click(ALICE, step, row["components"][0]["custom_id"])
    typed = await modal_of(fake, nxt)
    assert list(fields(typed)) == ["t1"]  # Region keeps its choice; no typed field for it
    await fake.responded(await fake.submit(ALICE, nxt, {"t1": "x"}))
    assert picks(await answered(bot, record)) == [(("us",), None), (("unit",), "x")]


def ratelimited() -> float:
    from bridge.metrics import exposition

    for line in exposition()[0].decode().splitlines():
        if line.startswith("ask_bridge_platform_errors_total{") and 'kind="ratelimited"' in line:
            if 'platform="discord"' in line:
                return float(line.split()[-1])
    return 0.0


async def test_rate_limits_discord_answers_are_counted(bot: Bot, fake: FakeDiscord) -> None:
    before = ratelimited()
    fake.rate_limit(f"/channels/{CHANNEL}/messages")
    record = await bot.ask([q("Ship it?", "Ship", ["Yes", "No"])])  # posted after the 429
    assert ratelimited() == before + 1
    fake.rate_limit("/callback")  # the click's response, which shows the answer
    click = await fake.click(ALICE, bot.message(record), f"askb:pick:{record.id}:0:0")
    assert (await fake.responded(click))["type"] == 7
    await answered(bot, record)
    assert ratelimited() == before + 2
    assert [c.status for c in fake.calls].count(429) == 2
