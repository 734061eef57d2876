"""A command starting while Redis restarts waits for it (``ASK_BRIDGE_REDIS_WAIT``, 5 s), then
fails in one line as before; a person at a terminal is told it waits, after the first second.

Real processes and a real server on a port the test picks: the command's first try meets a
listener that hangs up (a Redis going down), then nothing listens for half a second, then the
server comes back on that port with its data (AOF) -- the command succeeds."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from bridge.models import Answer
from bridge.record import Responder
from bridge.store.redis import RedisStore
from tests.support.engine_fixtures import new_record
from tests.support.procs import cli_env
from tests.support.redis_server import RedisServer, free_port, hanging_up

PREFIX = "restart"
QUESTIONS = json.dumps([new_record().questions.questions[0].model_dump(mode="json")])
"""What ``ask ... -`` reads on stdin (the others read nothing)."""
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, list[str]]]:
    """A stopped server with AOF on a port of its own, holding a pending ask, an answered one
    and a deferred answered one (on the feed): their ids."""
    server = RedisServer(
        tmp_path_factory.mktemp("restart"),
        port=free_port(),
        extra=["--appendonly", "yes", "--appendfsync", "always"],
    )
    server.start()

    async def seed() -> list[str]:
        store = RedisStore.from_url(server.url, prefix=PREFIX)
        try:
            pending, answered, fed = new_record(), new_record(), new_record(deferred=True)
            for rec in (pending, answered, fed):
                await store.create(rec)
            for rec in (answered, fed):
                await store.submit(rec.id, Responder(user_id="U1", name="Una"), YES)
            return [pending.id, answered.id, fed.id]
        finally:
            await store.aclose()

    try:
        ids = asyncio.run(seed())
    finally:
        server.stop()
    yield server, ids
    server.stop()


async def cli(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", *args, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def finished(proc: asyncio.subprocess.Process, given: str = "") -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(given.encode()), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("command", ["list", "show", "wait", "feed"])
async def test_a_command_started_while_redis_restarts_waits_for_it(
    seeded: tuple[RedisServer, list[str]], command: str
) -> None:
    server, (pending, answered, fed) = seeded
    args = {
        "list": ["list"],
        "show": ["show", answered],
        "wait": ["wait", answered],
        "feed": ["feed", "--consumer", f"c{time.monotonic_ns()}"],
    }[command]
    env = cli_env(REDIS_URL=server.url, ASK_BRIDGE_KEY_PREFIX=PREFIX)
    async with hanging_up(server.port) as tried:
        proc = await cli(env, *args)
        await asyncio.wait_for(tried.wait(), 60)  # its first try met Redis going down
    await asyncio.sleep(0.5)  # nothing listens
    await asyncio.to_thread(server.start)
    try:
        code, out, err = await finished(proc)
    finally:
        server.stop()
    assert code == 0 and err == "", err  # no terminal: nothing said about the wait
    if command == "list":
        assert out.split()[0] == pending
    elif command == "show":
        assert json.loads(out)["record"]["id"] == answered
    elif command == "wait":
        assert json.loads(out)["answers"][0]["selected"] == ["Yes"]
    else:
        assert [json.loads(line)["ask_id"] for line in out.splitlines()] == [fed]


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["show", "abc"],
        ["cancel", "abc"],
        ["wait", "abc"],
        ["feed", "--consumer", "c"],
        ["ask", "--channel", "C1", "-"],
    ],
    ids=lambda a: a[0],
)
async def test_with_nothing_listening_it_fails_in_one_line_after_the_wait(
    args: list[str],
) -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    env = cli_env(
        REDIS_URL=url,
        ASK_BRIDGE_REDIS_WAIT="2",
        SLACK_BOT_TOKEN="xoxb-unused",
        SLACK_API_URL="http://127.0.0.1:1/api/",  # never reached: Redis is checked first
    )
    started = time.monotonic()
    code, out, err = await finished(await cli(env, *args), QUESTIONS)
    assert code == 1 and out == ""
    assert time.monotonic() - started >= 2  # it tried for the whole wait
    (line,) = err.splitlines()  # no terminal: the failure alone
    masked = url.replace("s3cret", "***")
    assert line.startswith(f"ask-bridge {args[0]}: cannot reach Redis at REDIS_URL={masked}: ")
    assert line.endswith("(tried for 2 s: ASK_BRIDGE_REDIS_WAIT)")


def test_on_a_terminal_it_says_it_waits_after_the_first_second(tmp_path: Path) -> None:
    port = free_port()
    user = ["--user", "bridge", "on", ">s3cret", "~*", "&*", "+@all"]  # default stays: start()
    server = RedisServer(tmp_path / "redis", port=port, extra=user)
    env = cli_env(
        REDIS_URL=f"redis://bridge:s3cret@127.0.0.1:{port}/0",
        ASK_BRIDGE_KEY_PREFIX=PREFIX,
        ASK_BRIDGE_REDIS_WAIT="30",
    )
    child = pexpect.spawn(
        sys.executable, ["-m", "bridge.cli", "list"], env=env, encoding="utf-8", timeout=60
    )
    try:
        started = time.monotonic()
        child.expect_exact(
            "ask-bridge list: waiting for Redis at "
            f"REDIS_URL=redis://bridge:***@127.0.0.1:{port}/0 (up to 30 s: ASK_BRIDGE_REDIS_WAIT)"
        )
        assert time.monotonic() - started >= 1
        server.start()
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
        assert "s3cret" not in str(child.before)
        # Redis there at once: nothing to say
        again = pexpect.spawn(
            sys.executable, ["-m", "bridge.cli", "list"], env=env, encoding="utf-8", timeout=60
        )
        again.expect(pexpect.EOF)
        again.close()
        assert again.exitstatus == 0 and "waiting" not in str(again.before)
    finally:
        child.close(force=True)
        server.stop()


async def test_a_cluster_none_of_whose_nodes_answers_is_waited_for_then_one_line() -> None:
    """redis-py says so with an exception of its own (not a RedisError): one line all the same."""
    url = f"redis+cluster://127.0.0.1:{free_port()}"
    code, out, err = await finished(
        await cli(cli_env(REDIS_URL=url, ASK_BRIDGE_REDIS_WAIT="1"), "list")
    )
    assert code == 1 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"ask-bridge list: cannot reach Redis at REDIS_URL={url}: Redis Cluster")
    assert line.endswith("(tried for 1 s: ASK_BRIDGE_REDIS_WAIT)")
