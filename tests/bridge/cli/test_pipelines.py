"""``ask-bridge wait`` and ``ask-bridge feed`` (and ``show`` and ``cancel``'s failures) against a
real server, as separate processes (the real entry point, signals and pipes included)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bridge.models import Answer
from bridge.record import AskStatus, Responder
from bridge.store.redis import RedisStore
from tests.support.engine_fixtures import new_record
from tests.support.procs import cli_env
from tests.support.redis_server import RedisServer, free_port

ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


@pytest.fixture
async def store(standalone: RedisServer) -> AsyncIterator[RedisStore]:
    made = RedisStore.from_url(standalone.url, prefix=f"pl{secrets.token_hex(3)}")
    yield made
    await made.aclose()


def env_of(store: RedisStore, url: str) -> dict[str, str]:
    return cli_env(REDIS_URL=url, ASK_BRIDGE_KEY_PREFIX=store.keys.prefix)


async def cli(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", *args,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


async def watching(store: RedisStore, url: str, ask_id: str, count: int) -> None:
    """Until ``count`` processes observe the pending ask: each put its wake-up channel in the
    ask's wake set (``Keys.wake``; with its signal handlers already installed), however long a
    loaded machine takes to start them."""
    raw = Redis.from_url(url)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if await raw.scard(store.keys.wake(ask_id)) >= count:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"fewer than {count} processes observe {ask_id}")
    finally:
        await raw.aclose()


async def finished(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_wait_on_an_answered_ask_prints_the_tool_result(
    store: RedisStore, standalone: RedisServer
) -> None:
    rec = new_record()
    await store.create(rec)
    await store.submit(rec.id, ALICE, YES)
    code, out, err = await finished(await cli(env_of(store, standalone.url), "wait", rec.id))
    assert code == 0, err
    assert json.loads(out)["answers"] == [
        {"question": "Question number 0?", "selected": ["Yes"], "other_text": None}
    ]
    # it took nothing: the waiting call of the ask still gets the answer
    got = await store.wait(rec.id, 5)
    assert got is not None and got.answers == YES and not got.deferred


async def test_wait_blocks_until_a_deferred_ask_is_answered_and_leaves_it_to_the_feed(
    store: RedisStore, standalone: RedisServer
) -> None:
    rec = new_record(deferred=True)
    await store.create(rec)
    env = env_of(store, standalone.url)
    waiting = [await cli(env, "wait", rec.id, "--wait", "30") for _ in range(2)]
    await watching(store, standalone.url, rec.id, 2)  # the processes are up and watching
    assert all(p.returncode is None for p in waiting)
    await store.submit(rec.id, ALICE, YES)
    for proc in waiting:
        code, out, err = await finished(proc)
        assert code == 0, err
        assert json.loads(out)["answers"][0]["selected"] == ["Yes"]
    feed = store.feed("pipeline")
    try:
        delivery = await asyncio.wait_for(anext(feed), 10)
    finally:
        await feed.aclose()  # type: ignore[attr-defined]
    assert delivery.record.id == rec.id  # the feed still has it


async def test_wait_runs_out_then_expired_then_unknown(
    store: RedisStore, standalone: RedisServer
) -> None:
    env = env_of(store, standalone.url)
    rec = new_record(deferred=True)
    await store.create(rec)
    t0 = time.monotonic()
    code, out, err = await finished(await cli(env, "wait", rec.id, "--wait", "0.5"))
    assert code == 3, err
    assert time.monotonic() - t0 >= 0.5
    assert json.loads(out)["status"] == "deferred" and json.loads(out)["ask_id"] == rec.id
    assert (await store.get(rec.id)).status is AskStatus.PENDING  # type: ignore[union-attr]

    await store.sweep(time.time() + 7200)  # expired
    code, out, err = await finished(await cli(env, "wait", rec.id))
    assert code == 4 and out == ""
    assert err.startswith("nobody answered: the questions expired") and err.count("\n") == 1

    cancelled = new_record()
    await store.create(cancelled)
    await store.close(cancelled.id, AskStatus.CANCELLED)
    code, _, err = await finished(await cli(env, "wait", cancelled.id))
    assert code == 4 and "cancelled" in err

    code, out, err = await finished(await cli(env, "wait", "no-such-ask"))
    assert code == 1 and out == ""
    assert err == "ask-bridge wait: no ask 'no-such-ask' (unknown, or past its retention)\n"


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("show", "no ask 'no-such-ask' (unknown, or past its retention)"),
        ("cancel", "ask 'no-such-ask' is not pending (unknown); nothing changed"),
    ],
)
async def test_show_and_cancel_of_an_unknown_ask_name_their_command(
    store: RedisStore, standalone: RedisServer, command: str, said: str
) -> None:
    """Every failure says which command failed, in a pipeline's log as on a terminal."""
    code, out, err = await finished(
        await cli(env_of(store, standalone.url), command, "no-such-ask")
    )
    assert (code, out, err) == (1, "", f"ask-bridge {command}: {said}\n")


async def test_wait_stops_quietly_on_sigterm(store: RedisStore, standalone: RedisServer) -> None:
    rec = new_record(deferred=True)
    await store.create(rec)
    proc = await cli(env_of(store, standalone.url), "wait", rec.id)
    await watching(store, standalone.url, rec.id, 1)  # not before it handles signals
    proc.send_signal(signal.SIGTERM)
    code, out, err = await finished(proc)
    assert code == 3 and err == ""
    assert json.loads(out)["ask_id"] == rec.id


async def test_wait_and_feed_fail_in_one_line() -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"
    for args in (("wait", "abc"), ("feed", "--consumer", "c")):
        env = cli_env(REDIS_URL=down, ASK_BRIDGE_REDIS_WAIT="0")  # at once: no wait for a restart
        code, out, err = await finished(await cli(env, *args))
        assert code == 1 and out == "" and err.count("\n") == 1, err
        assert "Redis" in err and "Traceback" not in err
        code, _, err = await finished(await cli(cli_env(), *args))
        assert code == 1 and "REDIS_URL is not set" in err and err.count("\n") == 1


async def test_feed_prints_each_delivery_once_then_acknowledges(
    store: RedisStore, standalone: RedisServer
) -> None:
    env = env_of(store, standalone.url)
    answered, cancelled = new_record(deferred=True), new_record(deferred=True)
    answered = answered.model_copy(update={"context": {"run": "build-7"}})
    for rec in (answered, cancelled):
        await store.create(rec)
    await store.submit(answered.id, ALICE, YES)
    await store.close(cancelled.id, AskStatus.CANCELLED)
    code, out, err = await finished(await cli(env, "feed", "--consumer", "ci"))
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    by_id = {line["ask_id"]: line for line in lines}
    assert set(by_id) == {answered.id, cancelled.id} and len(lines) == 2
    got = by_id[answered.id]
    assert got["status"] == "answered" and got["context"] == {"run": "build-7"}
    assert [(w["user_id"], w["name"]) for w in got["answered_by"]] == [("U_ALICE", "Alice")]
    assert got["result"]["answers"][0]["selected"] == ["Yes"] and got["delivery_id"]
    assert by_id[cancelled.id]["status"] == "cancelled"
    assert by_id[cancelled.id]["result"]["status"] == "cancelled"
    # acknowledged: a second run under the same name (or another) prints nothing
    for consumer in ("ci", "other"):
        code, out, _ = await finished(await cli(env, "feed", "--consumer", consumer))
        assert code == 0 and out == ""


async def test_feed_follow_until_sigint(store: RedisStore, standalone: RedisServer) -> None:
    env = env_of(store, standalone.url)
    proc = await cli(env, "feed", "--consumer", "ci", "--follow")
    await asyncio.sleep(1.5)
    rec = new_record(deferred=True)
    await store.create(rec)
    await store.submit(rec.id, ALICE, YES)
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 15)
    except TimeoutError:
        proc.kill()
        raise AssertionError(await finished(proc)) from None
    assert json.loads(line)["ask_id"] == rec.id
    proc.send_signal(signal.SIGINT)
    code, out, err = await finished(proc)
    assert code == 0 and out == "" and err == ""


async def test_feed_into_a_closed_pipe_acknowledges_nothing_unwritten(
    store: RedisStore, standalone: RedisServer
) -> None:
    env = env_of(store, standalone.url)
    recs = [new_record(deferred=True) for _ in range(3)]
    for rec in recs:
        await store.create(rec)
        await store.submit(rec.id, ALICE, YES)
    read, write = os.pipe()
    os.close(read)  # the reader went away before anything was written
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "feed", "--consumer", "ci",
        env=env, stdout=write, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(write)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 141 and err == b""
    code, out, _ = await finished(await cli(env, "feed", "--consumer", "ci"))
    assert code == 0
    assert sorted(json.loads(line)["ask_id"] for line in out.splitlines()) == sorted(
        r.id for r in recs
    )
