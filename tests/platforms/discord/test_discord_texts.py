"""Untrusted texts on Discord: mentions in model or teammate text ping nobody, and texts at every
maximum length are cut visibly where Discord would refuse them (the fake refuses with 50035)."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.models import MAX_DESCRIPTION, MAX_LABEL, MAX_QUESTION_TEXT
from bridge.record import AskStatus
from tests.support.discord.discord_harness import ALICE, BOB, REVIEWERS, Bot
from tests.support.discord.fake_discord import FakeDiscord

INJECTION = f"@everyone @here <@{ALICE}> <@&{REVIEWERS}> <@!{ALICE}>"


def bodies(fake: FakeDiscord) -> list[dict[str, Any]]:
    """Everything the bot sent that Discord could parse mentions from."""
    sent = [c.body for c in fake.calls if c.method in ("POST", "PATCH") and "/channels/" in c.path]
    for i in fake.interactions.values():
        sent += [r["data"] for r in i.responses if r.get("type") in (4, 7)]
        sent += i.followups
    return sent


async def test_mentions_in_texts_ping_nobody(bot: Bot, fake: FakeDiscord) -> None:
    questions = [
        {
            "question": f"Deploy? {INJECTION}",
            "header": "@everyone",
            "multiSelect": False,
            "options": [
                {"label": f"Yes {INJECTION}", "description": INJECTION},
                {"label": "No @here", "description": f"<@{ALICE}>"},
            ],
        }
    ]
    record = await bot.ask(questions, answerers=(BOB,), context={"asker": f"bot {INJECTION}"})
    message = bot.message(record)
    label = message["components"][0]["components"][0]["label"]
    assert label.startswith("Yes @everyone")  # a button label never pings: shown as typed
    assert "\\<\\@" in message["embeds"][0]["description"]  # labels shown escaped, not as mentions
    opened = await fake.click(BOB, message, f"askb:other:{record.id}:0")
    await fake.responded(opened)
    refused = await fake.click(ALICE, message, f"askb:pick:{record.id}:0:0")
    await fake.told(refused)
    typed = await fake.submit(BOB, opened, {"t0": f"me {INJECTION}"})
    await fake.responded(typed)
    await fake.changed(lambda: not bot.message(record)["components"])
    done = await bot.store.get(record.id)
    assert done is not None and done.answers is not None
    assert done.answers[0].other_text == f"me {INJECTION}"  # the answer keeps what was typed
    sent = bodies(fake)
    assert len(sent) >= 3  # the post, the final edit, the refusal
    for body in sent:
        mentions = body["allowed_mentions"]
        assert mentions["parse"] == [], body
        assert not mentions.get("roles")
        assert {str(u) for u in mentions.get("users", [])} <= {BOB}
        assert "@everyone" not in (body.get("content") or "")
        assert "@here" not in (body.get("content") or "")
    # the only mention ever allowed to notify: the configured answerer, on the first post
    assert [b["content"] for b in sent if b.get("content") and f"<@{BOB}>" in b["content"]]


def long(prefix: str, n: int, unit: str = "x") -> str:
    return (prefix + unit * n)[:n] if len(unit) == 1 else prefix + unit * ((n - len(prefix)) // 2)


@pytest.mark.parametrize("unit", ["x", "😀"], ids=["ascii", "astral"])
async def test_maximum_length_texts_fit_everywhere(bot: Bot, fake: FakeDiscord, unit: str) -> None:
    questions = [
        {
            "question": long(f"Q{i} ", MAX_QUESTION_TEXT, unit),
            "header": f"H{i}" + "h" * 10,
            "multiSelect": i % 2 == 1,
            "options": [
                {
                    "label": long(f"L{i}{o} ", MAX_LABEL, unit),
                    "description": long(f"D{i}{o} ", MAX_DESCRIPTION, unit),
                }
                for o in range(4)
            ],
        }
        for i in range(4)
    ]
    record = await bot.ask(questions, context={"asker": long("A ", 500, unit)})
    message = bot.message(record)
    text = "".join(e["description"] for e in message["embeds"])
    assert "…" in text and "Q3 " in text and "L33 " in text
    opened = await fake.click(ALICE, message, f"askb:answer:{record.id}")
    assert (await fake.responded(opened))["type"] == 9
    values = {"q0": "3", "q1": ["0", "3"], "q2": "0", "q3": ["1"], "typed": ["1", "3"]}
    submitted = await fake.submit(ALICE, opened, values)
    step = fake.messages[(await fake.changed(lambda: submitted.payload.get("_original")))]
    nxt = await fake.click(ALICE, step, step["components"][0]["components"][0]["custom_id"])
    assert (await fake.responded(nxt))["type"] == 9
    typed = await fake.submit(ALICE, nxt, {"t1": long("T1 ", 2000, unit), "t3": "short"})
    await fake.responded(typed)
    await fake.changed(lambda: not bot.message(record)["components"])
    done = await bot.store.get(record.id)
    assert done is not None and done.status is AskStatus.ANSWERED and done.answers is not None
    assert done.answers[0].selected == (questions[0]["options"][3]["label"],)  # the full label
    assert not fake.errors(), [c.response for c in fake.errors()]


async def test_maximum_length_one_click_buttons(bot: Bot, fake: FakeDiscord) -> None:
    labels = [long(f"Option {o} ", MAX_LABEL) for o in range(4)]
    record = await bot.ask(
        [
            {
                "question": long("Q ", MAX_QUESTION_TEXT),
                "header": "h" * 12,
                "options": [{"label": lab, "description": long("D ", 1000)} for lab in labels],
            }
        ]
    )
    buttons = bot.message(record)["components"][0]["components"]
    assert all(len(b["label"]) == 80 and b["label"].endswith("…") for b in buttons[:4])
    click = await fake.click(ALICE, bot.message(record), buttons[2]["custom_id"])
    await fake.responded(click)
    await fake.changed(lambda: not bot.message(record)["components"])
    done = await bot.store.get(record.id)
    assert done is not None and done.answers is not None
    assert done.answers[0].selected == (labels[2],)
    assert not fake.errors()
