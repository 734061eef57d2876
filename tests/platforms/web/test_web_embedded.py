"""The web platform's embedded default, through the CLI as OS processes: ``ask --platform web``
and ``demo --web`` without ``REDIS_URL`` serve their own page on 127.0.0.1, print its link and
take the answer from it (the test answers as a browser would: GET the page, read its CSRF field,
POST the form); ``serve`` on loopback without ``ASK_BRIDGE_WEB_URL`` hands out links to its own
port from Slack's ``Open in browser``."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bridge.record import AskRecord, Destination
from bridge.runtime import pages_url
from bridge.store.redis import RedisStore
from bridge.web_links import ASK_PATH, Links, Person, browser_links, serving_pages_at
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from tests.platforms.web.conftest import SECRET
from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer, free_port
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, block_actions, form_body, signed

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
LINE = re.compile(r"^ask-bridge ask: link for (.+): (http://127\.0\.0\.1:(\d+)/a/\S+)$")
CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def questions_file(tmp_path: Path) -> str:
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(QUESTIONS))
    return str(path)


async def start(cwd: Path, env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    """The CLI with ``args`` in ``cwd`` (so no stray ``.env`` configures it)."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", *args,
        cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def line_matching(proc: asyncio.subprocess.Process, pattern: re.Pattern[str]) -> str:
    """The first line on ``proc``'s stderr that ``pattern`` matches (the rest stays unread)."""
    assert proc.stderr is not None
    seen = []
    async with asyncio.timeout(60):
        while line := (await proc.stderr.readline()).decode():
            seen.append(line)
            if pattern.search(line):
                return line.rstrip("\n")
    raise AssertionError("no such line on stderr:\n" + "".join(seen))


async def answer(url: str, fields: list[tuple[str, str]]) -> None:
    """Answer at ``url`` as a browser does: the page, its CSRF field, the form posted."""
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as page:
            text = await page.text()
        found = CSRF.search(text)
        assert page.status == 200 and found is not None, text
        data = [*fields, ("csrf", found.group(1))]
        async with http.post(url, data=data, allow_redirects=False) as sent:
            assert sent.status == 303, await sent.text()


async def finished(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    """``proc``'s exit status, stdout, and the rest of its stderr."""
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    fake = await FakeSlack().start()
    yield fake
    await fake.stop()


async def test_ask_on_the_web_without_redis_serves_its_own_page_and_answers_itself(
    tmp_path: Path,
) -> None:
    proc = await start(
        tmp_path, cli_env(), "ask", "--platform", "web", "--answerer", "Ana",
        questions_file(tmp_path),
    )  # fmt: skip
    found = LINE.match(await line_matching(proc, LINE))
    assert found is not None and found.group(1) == "Ana"
    await answer(found.group(2), [("q0", "1")])
    status, out, _ = await finished(proc)
    assert status == 0
    (result,) = json.loads(out)["answers"]
    assert result["selected"] == ["Reject"]


async def test_json_links_are_signed_with_the_set_secret_and_live_as_long_as_the_ask(
    tmp_path: Path,
) -> None:
    """With ``ASK_BRIDGE_WEB_SECRET`` set (and still no ``REDIS_URL``) the links are signed with
    it, and live until the ask expires: not the minute ``ASK_BRIDGE_WEB_LINK_TTL`` says, which
    is for links made on demand."""
    port = free_port()
    env = cli_env(ASK_BRIDGE_WEB_SECRET=SECRET, ASK_BRIDGE_WEB_LINK_TTL="60")
    before = time.time()
    proc = await start(
        tmp_path, env, "ask", "--platform", "web", "--answerer", "Ana", "--answerer", "Bo",
        "--json", "--port", str(port), "--expires", "7200", questions_file(tmp_path),
    )  # fmt: skip
    printed = json.loads(await line_matching(proc, re.compile(r"^\{")))
    base = f"http://127.0.0.1:{port}"
    links = Links([SECRET], base)
    assert list(printed["links"]) == ["Ana", "Bo"]
    for name, url in printed["links"].items():
        link = links.verify(url.removeprefix(base + ASK_PATH))
        assert (link.ask_id, link.person) == (printed["ask_id"], Person("web", name, name))
        assert before + 7200 <= link.expires_at <= time.time() + 7201
    await answer(printed["links"]["Bo"], [("q0", "0")])
    status, out, _ = await finished(proc)
    assert status == 0 and json.loads(out)["answers"][0]["selected"] == ["Approve"]


def test_a_busy_port_is_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "bridge.cli", "ask", "--platform", "web", "--answerer", "Ana",
             "--port", str(port), questions_file(tmp_path)],
            cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"ask-bridge ask: cannot listen on 127.0.0.1:{port}: ")


async def test_demo_on_the_web_opens_the_browser_on_its_link(tmp_path: Path) -> None:
    """``webbrowser`` runs ``BROWSER`` when set: here a command that writes down the URL it was
    given, in place of a browser; the test then answers as the browser would."""
    opened = tmp_path / "opened"
    record = f"import sys, pathlib; pathlib.Path({str(opened)!r}).write_text(sys.argv[1])"
    browser = f"{shlex.quote(sys.executable)} -c {shlex.quote(record)} %s"
    proc = await start(tmp_path, cli_env(BROWSER=browser), "demo", "--web")
    said = await line_matching(proc, re.compile(r"^agent: answer in your browser: "))
    url = said.rpartition(" ")[2]
    assert url.startswith("http://127.0.0.1:")
    await answer(url, [("q0", "0"), ("q1", "0"), ("q1", "2"), ("q2", "0")])
    status, out, err = await finished(proc)
    assert status == 0, err
    assert opened.read_text() == url  # the demo waited for the opener before it ended
    result: dict[str, Any] = json.loads(out)
    chosen = [a["selected"] for a in result["answers"]]
    assert chosen == [["Users"], ["Highlights", "Fixes"], ["Short"]]
    assert "Going with Audience: Users; Sections: Highlights, Fixes; Length: Short" in err


async def test_serve_on_loopback_without_a_url_links_to_its_own_port(
    tmp_path: Path, slack: FakeSlack, standalone: RedisServer
) -> None:
    prefix = f"emb{free_port()}"
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.url,
        REDIS_URL=standalone.url,
        ASK_BRIDGE_KEY_PREFIX=prefix,
        ASK_BRIDGE_WEB_SECRET=SECRET,
    )
    serve = await Serve(env).start()
    store = RedisStore.from_url(standalone.url, prefix=prefix)
    try:
        record = AskRecord(
            questions={"questions": [q("Ship it?", "Deploy", ["Ship", "Hold"])]},
            destination=Destination(platform="slack", channel="C0GENERAL"),
            expires_at=time.time() + 300,
        )
        await store.create(record)
        ref = await SlackPoster(make_client(BOT_TOKEN, slack.url), browser=True).post(record)
        await store.set_message(record.id, ref)
        click = block_actions(slack, ref.channel, ref.message_id, "U0ALICE", "askb:web:")
        body = form_body(click)
        async with aiohttp.ClientSession() as http:
            async with http.post(serve.url, data=body, headers=signed(body)) as sent:
                assert sent.status == 200
            (note,) = await slack.wait_for("chat.postEphemeral", lambda c: c["user"] == "U0ALICE")
            found = re.search(rf"http://127\.0\.0\.1:{serve.port}/a/\S+?(?=[|>\s]|$)", note["text"])
            assert found is not None, note["text"]
            async with http.get(found.group(0)) as page:
                assert page.status == 200 and "Ship it?" in await page.text()
    finally:
        await store.aclose()
        await serve.stop()
    assert not [line for line in serve.log if "Open in browser" in line]


def test_off_loopback_without_a_url_no_link_carries_the_bound_address(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where ``serve`` binds decides what links made without ``ASK_BRIDGE_WEB_URL`` carry:
    loopback is an address this machine's browser opens; ``0.0.0.0`` is none, so the chat
    messages offer no button, said once at start."""
    monkeypatch.setenv("ASK_BRIDGE_WEB_SECRET", SECRET)
    monkeypatch.delenv("ASK_BRIDGE_WEB_URL", raising=False)
    assert pages_url("127.0.0.1", 3000) == "http://127.0.0.1:3000"
    assert pages_url("::1", 3000) == "http://[::1]:3000"
    assert not caplog.records
    assert pages_url("0.0.0.0", 3000) is None
    (said,) = caplog.records
    assert said.levelname == "WARNING" and "ASK_BRIDGE_WEB_URL is unset" in said.getMessage()
    with serving_pages_at(pages_url("0.0.0.0", 3000)):
        assert browser_links() is None
    with serving_pages_at(pages_url("127.0.0.1", 3000)):
        made = browser_links()
        assert made is not None and made.base_url == "http://127.0.0.1:3000"
    monkeypatch.setenv("ASK_BRIDGE_WEB_URL", "https://asks.example.com")
    caplog.clear()
    assert pages_url("0.0.0.0", 3000) is None and not caplog.records  # the URL says where
    made = browser_links()
    assert made is not None and made.base_url == "https://asks.example.com"
