"""``ask-bridge list / show / cancel`` against a real server, through the CLI's ``main``."""

from __future__ import annotations

import asyncio
import json
import re
import secrets

import pytest

from bridge.cli import main
from bridge.models import Answer
from bridge.record import AskStatus, Responder, new_ask_id
from bridge.store.redis import RedisStore
from tests.support.engine_fixtures import new_record
from tests.support.redis_server import RedisServer


@pytest.fixture
def prefix(standalone: RedisServer, monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"cli{secrets.token_hex(3)}"
    monkeypatch.setenv("REDIS_URL", standalone.url)
    monkeypatch.setenv("ASK_BRIDGE_KEY_PREFIX", value)
    return value


async def _seed(url: str, prefix: str) -> tuple[str, str]:
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        pending, answered = new_record(n=2), new_record()
        await store.create(pending)
        await store.create(answered)
        who = Responder(user_id="U1", name="Una")
        await store.submit(
            answered.id, who, (Answer(question="Question number 0?", selected=("No",)),)
        )
        return pending.id, answered.id
    finally:
        await store.aclose()


def test_list_show_cancel(
    standalone: RedisServer, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pending, answered = asyncio.run(_seed(standalone.url, prefix))
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert pending in out and answered not in out and "[Q0,Q1]" in out
    assert main(["list", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["id"] == pending

    assert main(["show", answered]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["record"]["status"] == "answered"
    assert [e["kind"] for e in shown["history"]] == ["created", "answered"]
    assert main(["show", "nope"]) == 1

    assert main(["cancel", pending, "--by", "U_ops"]) == 0
    assert f"cancelled {pending}" in capsys.readouterr().out
    assert main(["cancel", pending]) == 1
    assert "not pending (cancelled)" in capsys.readouterr().err
    assert main(["list"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["show", pending]) == 0
    history = json.loads(capsys.readouterr().out)["history"]
    assert history[-1]["kind"] == AskStatus.CANCELLED.value and history[-1]["user_id"] == "U_ops"


async def _seed_many(url: str, prefix: str, n: int) -> list[str]:
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        recs = [new_record(expires_in=3600 + i) for i in range(n)]
        for rec in recs:
            await store.create(rec)
        return [r.id for r in reversed(recs)]
    finally:
        await store.aclose()


def test_list_pages_newest_first_with_a_cursor(
    standalone: RedisServer, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    newest_first = asyncio.run(_seed_many(standalone.url, prefix, 5))
    assert main(["list", "--limit", "2"]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()] == newest_first[:2]
    cursor = err.split("--cursor ")[1].split()[0]
    assert main(["list", "--limit", "3", "--cursor", cursor]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()] == newest_first[2:]
    assert "--cursor" not in err
    assert main(["list", "--channel", "C9"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["list", "--older-than", "60"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["list", "--cursor", "nonsense"]) == 1
    assert "not a cursor" in capsys.readouterr().err
    # a bad command line is a configuration failure too: one line, status 1 (2 is ask's
    # "question set rejected")
    with pytest.raises(SystemExit) as stopped:
        main(["list", "--limit", "0"])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--limit" in err and "usage:" not in err


def test_ask_ids_are_unguessable_and_never_look_like_options() -> None:
    """An id starting with ``-`` would be read by ``ask-bridge show ID`` as an option."""
    ids = {new_ask_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert all(len(i) == 22 and re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
    assert not any(i.startswith("-") for i in ids)


async def _seed_approval(url: str, prefix: str) -> str:
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        rec = new_record(required=2)
        await store.create(rec)
        yes = (Answer(question="Question number 0?", selected=("Yes",)),)
        no = (Answer(question="Question number 0?", selected=("No",)),)
        await store.submit(rec.id, Responder(user_id="U1", name="Una"), yes, now=rec.created_at)
        await store.submit(rec.id, Responder(user_id="U2", name="Dos"), no, now=rec.created_at + 1)
        await store.submit(
            rec.id, Responder(user_id="U3", name="Tres"), yes, now=rec.created_at + 2
        )
        return rec.id
    finally:
        await store.aclose()


def test_show_lists_every_submission_and_who_agreed(
    standalone: RedisServer, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ask_id = asyncio.run(_seed_approval(standalone.url, prefix))
    assert main(["show", ask_id]) == 0
    shown = json.loads(capsys.readouterr().out)
    record = shown["record"]
    assert record["status"] == "answered" and record["required"] == 2
    assert [(s["user_id"], s["name"]) for s in record["submissions"]] == [
        ("U1", "Una"),
        ("U2", "Dos"),
        ("U3", "Tres"),
    ]
    assert record["submissions"][1]["answers"][0]["selected"] == ["No"]
    assert [(w["user_id"], w["name"]) for w in shown["answered_by"]] == [
        ("U1", "Una"),
        ("U3", "Tres"),
    ]
    assert shown["answered_by"][0]["at"] == record["created_at"]
    kinds = [(e["kind"], e["user_id"]) for e in shown["history"]]
    assert kinds == [
        ("created", None),
        ("submitted", "U1"),
        ("submitted", "U2"),
        ("answered", "U3"),
    ]
