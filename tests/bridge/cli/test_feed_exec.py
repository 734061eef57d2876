"""``ask-bridge feed --exec CMD``: at least once, as real processes over a real server.

A delivery is acknowledged only when the command exits 0; a command that fails (or is killed) has
it again -- in the next run, or after ``--retry-delay`` within a ``--follow`` run -- until
``--attempts`` failed runs, after which it is dead-lettered (stderr, and the ask's audit trail).
Plain ``feed`` acknowledges what it wrote to a pipe whether or not anything read it; where a reader
takes one delivery and stops, ``--exec`` loses nothing."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from bridge.cli import main
from bridge.models import Answer
from bridge.record import Responder
from bridge.store.redis import RedisStore
from tests.support.engine_fixtures import new_record
from tests.support.procs import cli_env
from tests.support.redis_server import RedisServer

ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)
HANDLER = """
import json, os, sys
from pathlib import Path

log, mode, *rest = sys.argv[1:]
got = json.loads(sys.stdin.readline())
attempt = int(os.environ["ASK_BRIDGE_ATTEMPT"])
seen = {"ask_id": got["ask_id"], "attempt": attempt, "status": got["status"]}
if mode == "fail-first" and got["ask_id"] == rest[0] and attempt == 1:
    sys.exit(3)
if mode == "always":
    sys.exit(1)
if mode == "until-gone":  # a downstream that takes one delivery, then goes away
    reader = Path(rest[0])
    if not reader.exists():
        sys.exit(1)
    reader.unlink()
if mode == "started":  # says it began, then runs until stopped
    Path(rest[0]).write_text(str(os.getpid()))
    import time
    time.sleep(60)
with open(log, "a") as out:
    out.write(json.dumps(seen) + "\\n")
"""


@pytest.fixture
async def feed_store(standalone: RedisServer) -> AsyncIterator[RedisStore]:
    made = RedisStore.from_url(standalone.url, prefix=f"fx{os.urandom(3).hex()}")
    yield made
    await made.aclose()


async def answered(store: RedisStore, n: int) -> list[str]:
    """``n`` deferred asks, answered: ``n`` deliveries waiting on the feed."""
    ids = []
    for _ in range(n):
        rec = new_record(deferred=True)
        await store.create(rec)
        await store.submit(rec.id, ALICE, YES)
        ids.append(rec.id)
    return ids


def handler(tmp_path: Path, mode: str, *rest: str) -> tuple[str, Path]:
    """The ``--exec`` command running :data:`HANDLER` in ``mode``, and the log of what it took."""
    script = tmp_path / "handler.py"
    script.write_text(HANDLER)
    log = tmp_path / "took.jsonl"
    words = [sys.executable, str(script), str(log), mode, *rest]
    return " ".join(shlex.quote(w) for w in words), log


def took(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def feed(
    store: RedisStore, url: str, *args: str, follow: bool = False, consumer: str = "ci"
) -> asyncio.subprocess.Process:
    env = cli_env(REDIS_URL=url, ASK_BRIDGE_KEY_PREFIX=store.keys.prefix)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "feed", "--consumer", consumer, *args,
        *(["--follow"] if follow else []),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def finished(proc: asyncio.subprocess.Process, within: float = 60) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), within)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def until(check: Callable[[], Any], what: str, within: float = 60) -> None:
    """Until ``check()`` (or what it returns, if awaitable) is true."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie left for init to reap has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


async def acknowledged(store: RedisStore, url: str) -> bool:
    """Every delivery of the feed handed out was acknowledged (no pending stream entry)."""
    raw = Redis.from_url(url)
    try:
        return int((await raw.xpending(store.keys.feed, store.group))["pending"]) == 0
    finally:
        await raw.aclose()


async def events(store: RedisStore, ask_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.detail for e in await store.history(ask_id) if e.kind == kind]


async def test_a_failed_run_is_run_again_by_the_next_run_and_only_then_acknowledged(
    feed_store: RedisStore, standalone: RedisServer, tmp_path: Path
) -> None:
    failing, fine = await answered(feed_store, 2)
    command, log = handler(tmp_path, "fail-first", failing)
    code, out, err = await finished(await feed(feed_store, standalone.url, "--exec", command))
    assert code == 0 and out == ""
    assert [(t["ask_id"], t["attempt"]) for t in took(log)] == [(fine, 1)]
    assert err.splitlines() == [
        f"ask-bridge feed: --exec command exited 3 for ask {failing} (attempt 1 of 5); left for "
        "the next run"
    ]
    (noted,) = await events(feed_store, failing, "feed_exec_failed")
    assert noted["attempt"] == 1 and noted["outcome"] == "exited 3" and noted["consumer"] == "ci"

    code, _, err = await finished(await feed(feed_store, standalone.url, "--exec", command))
    assert code == 0 and err == ""
    assert [(t["ask_id"], t["attempt"]) for t in took(log)] == [(fine, 1), (failing, 2)]
    assert took(log)[-1]["status"] == "answered"

    code, _, _ = await finished(await feed(feed_store, standalone.url, "--exec", command))
    assert code == 0 and len(took(log)) == 2  # both acknowledged: nothing handed out again


async def test_follow_runs_a_failed_delivery_again_after_the_delay(
    feed_store: RedisStore, standalone: RedisServer, tmp_path: Path
) -> None:
    (failing,) = await answered(feed_store, 1)
    command, log = handler(tmp_path, "fail-first", failing)
    args = ("--exec", command, "--retry-delay", "0.3")
    proc = await feed(feed_store, standalone.url, *args, follow=True)
    try:
        await until(lambda: took(log), "the second run")
        # acknowledged: a SIGTERM any sooner stops it unacknowledged (run again, at least once)
        await until(lambda: acknowledged(feed_store, standalone.url), "its acknowledgement")
    finally:
        proc.send_signal(signal.SIGTERM)
    code, _, err = await finished(proc)
    assert code == 0
    assert [t["attempt"] for t in took(log)] == [2]
    assert "(attempt 1 of 5); running it again in 0.3 s" in err
    code, _, _ = await finished(await feed(feed_store, standalone.url, "--exec", command))
    assert code == 0 and len(took(log)) == 1  # acknowledged once the second run exited 0


async def test_a_command_that_always_fails_is_dead_lettered_after_the_limit(
    feed_store: RedisStore, standalone: RedisServer, tmp_path: Path
) -> None:
    failing, killed = await answered(feed_store, 2)
    command, log = handler(tmp_path, "always")
    # the first ask's delivery meets a command killed by a signal: not acknowledged either
    kill_first = (
        f'line=$(cat); if printf %s "$line" | grep -q {killed}; then kill -9 $$; '
        f'else printf "%s\\n" "$line" | {command}; fi'
    )
    args = ("--exec", kill_first, "--attempts", "3", "--retry-delay", "0.2")
    proc = await feed(feed_store, standalone.url, *args, follow=True)
    assert proc.stderr is not None
    said: list[str] = []
    try:
        while sum("gave up" in line for line in said) < 2:
            line = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert line, said
            said.append(line.decode())
    finally:
        proc.send_signal(signal.SIGTERM)
    code, _, rest = await finished(proc)
    assert code == 0 and rest == ""
    for ask_id, outcome in ((failing, "exited 1"), (killed, "was killed by SIGKILL")):
        runs = await events(feed_store, ask_id, "feed_exec_failed")
        assert [(r["attempt"], r["outcome"]) for r in runs] == [(n, outcome) for n in (1, 2, 3)]
        (dead,) = await events(feed_store, ask_id, "feed_dead_letter")
        assert dead["attempts"] == 3 and dead["outcome"] == outcome and dead["consumer"] == "ci"
        assert (
            f"ask-bridge feed: gave up on ask {ask_id} after 3 failed runs of the --exec command "
            f"(last: {outcome}); acknowledged it as dead-lettered: `ask-bridge show {ask_id}` has "
            "its outcome and the failed runs\n"
        ) in said
    # dead-lettered is acknowledged: no later run is handed either again
    fine, log = handler(tmp_path, "fail-first", "none")
    code, _, _ = await finished(await feed(feed_store, standalone.url, "--exec", fine))
    assert code == 0 and took(log) == []


async def test_a_reader_that_takes_one_and_stops_loses_the_rest_of_plain_feed_not_of_exec(
    feed_store: RedisStore, standalone: RedisServer, tmp_path: Path
) -> None:
    env = cli_env(REDIS_URL=standalone.url, ASK_BRIDGE_KEY_PREFIX=feed_store.keys.prefix)
    feed_cli = f"{shlex.quote(sys.executable)} -m bridge.cli feed"
    # plain: every line written into the pipe is acknowledged, read or not
    await answered(feed_store, 20)
    proc = await asyncio.create_subprocess_shell(
        f"{feed_cli} --consumer plain | (head -1; sleep 2)", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, out, _ = await finished(proc)
    assert len(out.splitlines()) == 1
    _, again, _ = await finished(await feed(feed_store, standalone.url, consumer="plain"))
    assert 1 + len(again.splitlines()) < 20  # what sat unread in the pipe is gone

    # --exec: the command says whether its reader took the delivery; one that did not stays
    asks = await answered(feed_store, 20)
    reader = tmp_path / "reader-present"
    reader.touch()
    command, log = handler(tmp_path, "until-gone", str(reader))
    code, _, err = await finished(await feed(feed_store, standalone.url, "--exec", command))
    assert code == 0 and len(took(log)) == 1 and err.count("left for the next run") == 19
    command, log = handler(tmp_path, "fail-first", "none")  # the reader is back
    code, _, _ = await finished(await feed(feed_store, standalone.url, "--exec", command))
    assert code == 0
    assert sorted(t["ask_id"] for t in took(log)) == sorted(asks)  # none lost, none twice


async def test_stopping_feed_stops_the_command_and_leaves_its_delivery(
    feed_store: RedisStore, standalone: RedisServer, tmp_path: Path
) -> None:
    (ask_id,) = await answered(feed_store, 1)
    started = tmp_path / "started"
    command, log = handler(tmp_path, "started", str(started))
    proc = await feed(feed_store, standalone.url, "--exec", command, follow=True)
    await until(started.exists, "the command started")
    await until(lambda: started.read_text(), "its pid")
    pid = int(started.read_text())
    proc.send_signal(signal.SIGTERM)
    code, _, err = await finished(proc, within=30)
    assert code == 0 and err == ""
    await until(lambda: not running(pid), "the command stopped with feed", within=10)
    assert await events(feed_store, ask_id, "feed_exec_failed") == []  # not its failure
    command, log = handler(tmp_path, "fail-first", "none")
    code, _, _ = await finished(await feed(feed_store, standalone.url, "--exec", command))
    assert code == 0 and [t["ask_id"] for t in took(log)] == [ask_id]  # still there


def test_feed_help_says_what_plain_stdout_guarantees(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["feed", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "a reader that stops before reading what sits in the pipe loses it" in text
    assert "For at least once, use --exec" in text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--attempts", "2"], "ask-bridge feed: --attempts and --retry-delay go with --exec\n"),
        (["--retry-delay", "1"], "ask-bridge feed: --attempts and --retry-delay go with --exec\n"),
        (["--exec", " "], "ask-bridge feed: --exec needs a command\n"),
    ],
)
def test_exec_options_without_a_command_are_refused_before_redis_is_reached(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    said: str,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # never reached
    assert main(["feed", "--consumer", "ci", *args]) == 1
    assert capsys.readouterr().err == said
