"""People's links from the command line, against a real server, through the CLI's ``main``:
``ask --platform web`` prints each answerer's link as the ask is made (lines, or one JSON line),
and ``ask-bridge link ASK_ID --as PERSON`` prints a fresh one -- or refuses in one line."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from pathlib import Path

import pytest

from bridge.cli import main
from bridge.record import AskStatus
from bridge.store.redis import RedisStore
from bridge.web_links import ASK_PATH, Link, Links, Person
from tests.support.engine_fixtures import new_record
from tests.support.redis_server import RedisServer

SECRET = "c" * 40
BASE = "https://asks.example.com/bridge"
QUESTIONS = {
    "questions": [
        {
            "question": "Approve the release?",
            "header": "Release",
            "options": [
                {"label": "Approve", "description": "Ship it"},
                {"label": "Reject", "description": "Hold it"},
            ],
            "multiSelect": False,
        }
    ]
}


@pytest.fixture
def prefix(standalone: RedisServer, monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"lnk{secrets.token_hex(3)}"
    monkeypatch.setenv("REDIS_URL", standalone.url)
    monkeypatch.setenv("ASK_BRIDGE_KEY_PREFIX", value)
    monkeypatch.setenv("ASK_BRIDGE_WEB_SECRET", SECRET)
    monkeypatch.setenv("ASK_BRIDGE_WEB_URL", BASE)
    return value


def opened(url: str) -> Link:
    """What a printed link opens, once it verified."""
    assert url.startswith(BASE + ASK_PATH), url
    return Links([SECRET], BASE).verify(url.removeprefix(BASE + ASK_PATH))


def ask_file(tmp_path: Path) -> str:
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(QUESTIONS))
    return str(path)


async def _record(url: str, prefix: str, ask_id: str) -> tuple[AskStatus, tuple[str, ...]]:
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        record = await store.get(ask_id)
        assert record is not None
        return record.status, record.answerers
    finally:
        await store.aclose()


def test_ask_on_the_web_prints_each_answerers_link_on_stderr(
    standalone: RedisServer, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ask", "--platform", "web", "--answerer", "Ana", "--answerer", "Bo Li"]
    assert main([*argv, "--mode", "defer", ask_file(tmp_path)]) == 3
    out, err = capsys.readouterr()
    ask_id = json.loads(out)["ask_id"]  # the result on stdout, as on every platform
    lines = dict(re.findall(r"^ask-bridge ask: link for (.+): (\S+)$", err, re.MULTILINE))
    assert list(lines) == ["Ana", "Bo Li"]
    for name, url in lines.items():
        link = opened(url)
        assert (link.ask_id, link.person) == (ask_id, Person("web", name, name))
    status, answerers = asyncio.run(_record(standalone.url, prefix, ask_id))
    assert (status, answerers) == (AskStatus.PENDING, ("Ana", "Bo Li"))


def test_ask_on_the_web_with_json_prints_one_json_line(
    prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ask", "--platform", "web", "--answerer", "Ana", "--json", "--mode", "defer"]
    assert main([*argv, ask_file(tmp_path)]) == 3
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    printed = json.loads(line)
    assert printed["ask_id"] == json.loads(out)["ask_id"]
    assert list(printed["links"]) == ["Ana"]
    assert opened(printed["links"]["Ana"]).person == Person("web", "Ana", "Ana")


def test_ask_on_the_web_refuses_in_one_line_what_cannot_give_links(
    prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["ask", "--platform", "web", "--mode", "defer", ask_file(tmp_path)]) == 1
    assert "give at least one" in capsys.readouterr().err
    monkeypatch.delenv("ASK_BRIDGE_WEB_URL")
    argv = ["ask", "--platform", "web", "--answerer", "Ana", "--mode", "defer"]
    assert main([*argv, ask_file(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ask-bridge ask: --platform web: links need ASK_BRIDGE_WEB_SECRET")


async def _seed(url: str, prefix: str) -> tuple[str, str]:
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        pending, ended = new_record(answerers=("Ana",)), new_record()
        await store.create(pending)
        await store.create(ended)
        await store.close(ended.id, AskStatus.EXPIRED)
        return pending.id, ended.id
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("given", "person"),
    [
        ("Ana", ("web", "Ana")),
        ("slack:U0ANA", ("slack", "U0ANA")),
        ("discord:100000000000000001", ("discord", "100000000000000001")),
    ],
)
def test_link_prints_a_fresh_link_for_the_person(
    standalone: RedisServer,
    prefix: str,
    capsys: pytest.CaptureFixture[str],
    given: str,
    person: tuple[str, str],
) -> None:
    pending, _ = asyncio.run(_seed(standalone.url, prefix))
    assert main(["link", pending, "--as", given]) == 0
    out, err = capsys.readouterr()
    (url,) = out.splitlines()
    assert err == ""
    link = opened(url)
    assert (link.ask_id, link.person.platform, link.person.user_id) == (pending, *person)


def test_link_refuses_in_one_line(
    standalone: RedisServer,
    prefix: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pending, ended = asyncio.run(_seed(standalone.url, prefix))
    refusals = {
        "nosuchask": "ask-bridge link: no ask 'nosuchask' (unknown, or past its retention)",
        ended: f"ask-bridge link: ask {ended!r} has ended (expired); no link can answer it",
    }
    for ask_id, said in refusals.items():
        assert main(["link", ask_id, "--as", "Ana"]) == 1
        out, err = capsys.readouterr()
        assert (out, err) == ("", said + "\n")
    assert main(["link", pending, "--as", "slack:"]) == 1
    assert (
        capsys.readouterr().err
        == "ask-bridge link: --as slack:: give the slack user id after the colon\n"
    )
    monkeypatch.delenv("ASK_BRIDGE_WEB_SECRET")
    assert main(["link", pending, "--as", "Ana"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ask-bridge link: links need ASK_BRIDGE_WEB_SECRET")
    assert len(err.splitlines()) == 1
    monkeypatch.setenv("ASK_BRIDGE_WEB_SECRET", "too short")
    assert main(["link", pending, "--as", "Ana"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "ASK_BRIDGE_WEB_SECRET" in line and "at least 32 characters" in line


def test_the_links_ask_prints_live_as_long_as_the_ask(
    prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ASK_BRIDGE_WEB_LINK_TTL`` is for links made on demand; one printed as the ask is made
    is all its person gets, so it opens the page until the ask expires (a second more at most)."""
    monkeypatch.setenv("ASK_BRIDGE_WEB_LINK_TTL", "60")
    before = time.time()
    argv = ["ask", "--platform", "web", "--answerer", "Ana", "--json", "--mode", "defer"]
    assert main([*argv, "--expires", "7200", ask_file(tmp_path)]) == 3
    printed = json.loads(capsys.readouterr().err)
    link = opened(printed["links"]["Ana"])
    assert before + 7200 <= link.expires_at <= time.time() + 7201


def test_port_is_refused_where_nothing_serves_pages(
    prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``REDIS_URL`` a ``serve`` serves the pages: a ``--port`` would be silently unused."""
    argv = ["ask", "--platform", "web", "--answerer", "Ana", "--port", "8080"]
    assert main([*argv, ask_file(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ask-bridge ask: --port is where --platform web without REDIS_URL")
