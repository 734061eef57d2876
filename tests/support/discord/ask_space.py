"""Hypothesis strategies for the whole contract space, as the Discord conformance tests need it:
every question set ``validate_questions`` accepts (1-4 questions, 2-4 options, each text up to
its maximum in characters and in UTF-8 bytes, multiSelect), typed answers up to ``MAX_TYPED``,
and records in every status -- pending (with the approvals of an ask several people must agree
on), answered, expired, cancelled, escalated, reminded.

Texts mix any Unicode (no surrogates or control characters: the contract refuses those) with
pieces chosen to be hard to show: emoji and their ZWJ sequences, skin tones, keycaps, CJK,
combining marks, characters NFC writes as two or three (U+0958, U+FB2C), Markdown and Discord
markup (``**``, ``||``, links, ``<@id>``, ``<@&id>``, ``<t:0:R>``, ``@everyone``), invisible and
direction characters, and runs of one of them as long as the contract allows. Each text starts
with a visible marker (``Q0``, ``L01`` ...) so texts that must differ do, and a test can find
the first words of each.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from hypothesis import strategies as st

from bridge.answering import MAX_TYPED
from bridge.models import (
    MAX_DESCRIPTION,
    MAX_HEADER,
    MAX_LABEL,
    MAX_QUESTION_TEXT,
    Answer,
    QuestionSet,
)
from bridge.record import (
    AskRecord,
    AskStatus,
    Destination,
    FollowUps,
    MessageRef,
    Responder,
    Submission,
)
from bridge.text import typed
from bridge.validation import MAX_BYTES, validate_questions

HARD = [
    "👨‍💻",
    "🏳️‍🌈",
    "👍🏽",
    "❤️",
    "1️⃣",
    "😀",
    "漢字かな한국어",
    "e\u0301",
    "é",
    "\u0958",
    "\ufb2c",
    "**",
    "__",
    "*",
    "_",
    "~~",
    "`",
    "```",
    "||",
    "> ",
    "# ",
    "- ",
    "[link](https://example.com)",
    "@everyone",
    "@here",
    "<@123456789012345678>",
    "<@&123456789012345678>",
    "<#123456789012345678>",
    "<t:0:R>",
    "\\",
    "\n",
    " ",
    "\t",
    "\u200b",
    "\u200d",
    "\u202e",
    "\ufe0f",
    ":",
    "x",
]
RUNS = ["x", "😀", "*", "\ufb2c", "漢", "e\u0301", "@everyone ", "👨‍💻", "\\_", "<@1> "]
"""What a text as long as the contract allows is made of."""

CHARACTERS = st.characters(
    codec="utf-8",
    exclude_categories=["Cs", "Cc"],
    exclude_characters="\u2028\u2029",
)
SNOWFLAKES = st.integers(min_value=10**16, max_value=2**63 - 1).map(str)
CHANNEL = "810000000000000001"


def clip(text: str, chars: int, max_bytes: int) -> str:
    """``text`` cut to the contract's bounds: ``chars`` characters and ``max_bytes`` UTF-8 bytes
    (counted as the validation counts them, after trimming)."""
    text = text.strip()[:chars]
    while len(text.encode("utf-8")) > max_bytes:
        text = text[:-1]
    return text.strip()


@cache
def texts(lead: str, chars: int, max_bytes: int) -> st.SearchStrategy[str]:
    """A text starting with ``lead``, within the bounds, of any of the three kinds above."""
    body = st.one_of(
        st.text(CHARACTERS, max_size=min(chars, 300)),
        st.lists(st.sampled_from(HARD), max_size=60).map("".join),
        st.sampled_from(RUNS).map(lambda run: run * chars),
    )
    return body.map(lambda b: clip(f"{lead} {b}", chars, max_bytes))


@st.composite
def question_sets(draw: st.DrawFn) -> QuestionSet:
    """Any question set the contract accepts (through the tool's own validation)."""
    raw: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 4))):
        options = [
            {
                "label": draw(texts(f"L{i}{o}", MAX_LABEL, MAX_BYTES["label"])),
                "description": draw(texts(f"D{i}{o}", MAX_DESCRIPTION, MAX_BYTES["description"])),
            }
            for o in range(draw(st.integers(2, 4)))
        ]
        raw.append(
            {
                "question": draw(texts(f"Q{i}", MAX_QUESTION_TEXT, MAX_BYTES["question"])),
                "header": draw(texts(f"H{i}", MAX_HEADER, MAX_BYTES["header"])),
                "options": options,
                "multiSelect": draw(st.booleans()),
            }
        )
    return validate_questions(raw)


@st.composite
def answers(draw: st.DrawFn, questions: QuestionSet) -> tuple[Answer, ...]:
    """Answers as the store keeps them: chosen labels (one at most for a single-select question)
    and typed text as :func:`bridge.text.typed` keeps it, up to ``MAX_TYPED`` characters."""
    found = []
    for q in questions.questions:
        labels = q.option_labels()
        most = len(labels) if q.multiSelect else 1
        chosen = draw(st.lists(st.sampled_from(labels), max_size=most, unique=True))
        other = typed(draw(st.just("") | texts("T", MAX_TYPED, 4 * MAX_TYPED)))
        found.append(
            Answer(
                question=q.question,
                selected=tuple(label for label in labels if label in chosen),
                other_text=other[:MAX_TYPED] if other is not None else None,
            )
        )
    return tuple(found)


@st.composite
def asks(draw: st.DrawFn) -> AskRecord:
    """A pending ask: any question set, answerers (users and roles, up to 30), an asker's name
    of any text, and follow-ups (reminders and an escalation already posted)."""
    questions = draw(question_sets())
    answerers = draw(
        st.lists(SNOWFLAKES | SNOWFLAKES.map(lambda s: f"role:{s}"), max_size=30, unique=True)
    )
    asker = draw(texts("A", 500, 2000))
    now = time.time()
    return AskRecord(
        questions=questions,
        destination=Destination(platform="discord", channel=CHANNEL),
        answerers=tuple(answerers),
        context={"asker": asker},
        created_at=now,
        expires_at=now + 3600,
        follow_ups=FollowUps(
            remind_after=60,
            remind_times=draw(st.integers(1, 100)),
            escalate_after=120,
            escalate_to=Destination(platform="discord", user="100000000000000001"),
        ),
        escalations=(
            MessageRef(platform="discord", channel="1", message_id="2"),
            MessageRef(platform="slack", channel="C1", message_id="1.2"),
        )[: draw(st.integers(0, 2))],
    )


@st.composite
def approvals(draw: st.DrawFn, record: AskRecord) -> AskRecord:
    """``record`` needing several people (2-50), with up to 12 submissions (a message lists
    the latest 10): agreeing, typed (never counted) and withdrawn ones. The largest case, 30
    submissions of the longest texts, is an explicit example of the tests."""
    subs = [
        Submission(
            user_id=draw(SNOWFLAKES | st.sampled_from(["U0SLACK", "<@everyone>"])),
            name=draw(texts("N", 100, 400)),
            at=float(n),
            answers=draw(answers(record.questions)),
            withdrawn=draw(st.booleans()),
        )
        for n in range(draw(st.integers(0, 12)))
    ]
    return record.model_copy(
        update={"required": draw(st.integers(2, 50)), "submissions": tuple(subs)}
    )


@st.composite
def ended(draw: st.DrawFn, record: AskRecord, status: AskStatus) -> AskRecord:
    """``record`` ended in ``status``; answered by one person or by several who agreed."""
    if status is not AskStatus.ANSWERED:
        return record.model_copy(update={"status": status, "closed_at": time.time()})
    chosen = draw(answers(record.questions))
    agreeing = draw(st.lists(SNOWFLAKES, max_size=30, unique=True))
    return record.model_copy(
        update={
            "status": status,
            "answers": chosen,
            "answered_by": Responder(user_id=draw(SNOWFLAKES), name=draw(texts("B", 100, 400))),
            "answered_at": time.time(),
            "required": max(1, len(agreeing)),
            "submissions": tuple(
                Submission(user_id=u, at=float(n), answers=chosen) for n, u in enumerate(agreeing)
            ),
        }
    )
