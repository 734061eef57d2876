"""``ask-bridge serve`` as an OS process: what it tells the operator at start."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer, free_port
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, form_body, signed


async def test_serve_without_redis_url_warns_that_its_store_is_empty(fake: FakeSlack) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    serve = await Serve(env).start()
    await serve.stop()
    (warning,) = [line for line in serve.log if "REDIS_URL is not set" in line]
    assert "WARNING" in warning and "in-memory store" in warning and "no longer open" in warning
    ready = next(i for i, line in enumerate(serve.log) if "ready" in line)
    assert serve.log.index(warning) < ready  # said at start, before serving
    (where,) = [line for line in serve.log if serve.url in line]  # the bound address, logged
    assert "INFO" in where and serve.log.index(where) < ready


async def test_serve_with_redis_url_does_not_warn(fake: FakeSlack, redis_srv: RedisServer) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.url,
        REDIS_URL=redis_srv.url,
    )
    serve = await Serve(env).start()
    await serve.stop()
    assert not [line for line in serve.log if "REDIS_URL" in line]


def run_serve(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``serve`` run in ``cwd`` (so no stray ``.env`` configures it) to its end."""
    return subprocess.run(
        [sys.executable, "-m", "bridge.cli", "serve", "--port", "0", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            (),
            "no chat platform is configured (discord: Discord is not configured: set "
            "DISCORD_TOKEN, the bot token; slack: Slack is not configured: set SLACK_BOT_TOKEN",
        ),
        (("--platform", "slack"), "slack: Slack is not configured: set SLACK_BOT_TOKEN"),
        (("--platform", "nope"), "unknown platform 'nope' (installed: "),
        (("--platform", "console"), "platform 'console' cannot post and serve"),
    ],
)
def test_serve_with_nothing_to_serve_says_why_in_one_line(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    done = run_serve(tmp_path, cli_env(), *args)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("ask-bridge serve: ") and expected in line


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_serve_serves_every_configured_platform_and_stops_on_a_signal(
    fake: FakeSlack, sig: signal.Signals
) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    serve = await Serve(env).start()  # no --platform: every configured one
    try:
        (ready,) = [line for line in serve.log if "ready" in line]
        # a log record in LOG_FORMAT (JSON off a terminal), as every line around it is
        said = json.loads(ready)
        assert (said["level"], said["logger"], said["message"]) == (
            "INFO",
            "bridge.cli.serve",
            "ready (slack)",
        )
        async with aiohttp.ClientSession() as session:
            health = serve.url.replace("/slack/events", "/healthz")  # the same one server
            async with session.get(health) as resp:
                assert resp.status == 200 and await resp.text() == "ok"
            async with session.post(serve.url, data="unsigned") as resp:
                assert resp.status == 401  # Slack's route, verified by Bolt
    finally:
        await serve.stop(sig)
    assert serve.returncode == 0, "".join(serve.log)
    assert not [line for line in serve.log if "Traceback" in line]


async def test_serve_restricted_to_a_named_platform(fake: FakeSlack) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    serve = await Serve(env, ("--platform", "slack", "--platform", "slack")).start()
    await serve.stop()
    assert serve.returncode == 0
    assert [line for line in serve.log if '"message": "ready (slack)"' in line]


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is full already: the next write to it waits until someone reads --
    a log collector that stopped reading, from the first line on."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    for size in (4096, 1):
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(write_end, b"." * size)
    os.set_blocking(write_end, True)
    return read_end, write_end


def click_on_an_unknown_ask(n: int) -> str:
    """A signed click's form body, on an ask the store does not hold: ``serve`` answers it
    (and explains it to the person) and logs a line about it."""
    return form_body(
        {
            "type": "block_actions",
            "user": {"id": "U0ALICE"},
            "channel": {"id": "C0GENERAL"},
            "trigger_id": f"trigger-{n}",
            "actions": [{"type": "button", "action_id": "askb:pick:NoSuchAsk:0:0"}],
        }
    )


async def test_serve_with_a_stalled_log_reader_answers_every_click_and_stops(
    fake: FakeSlack,
) -> None:
    """``serve`` whose stderr nobody reads: its event loop never waits on the log, so it comes
    up, answers every click (each logged) and stops on SIGTERM within 10 s, exit 0. It used to
    block in the log call of the first line that did not fit in the pipe: no more clicks, and
    SIGTERM ignored."""
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    port = free_port()
    read_end, write_end = full_pipe()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "serve", "--port", str(port),
        env=env, stdout=subprocess.DEVNULL, stderr=write_end,
    )  # fmt: skip
    os.close(write_end)
    try:
        async with aiohttp.ClientSession() as session:
            async with asyncio.timeout(60):  # a loaded machine takes seconds to start Python
                while True:
                    with contextlib.suppress(aiohttp.ClientConnectionError):
                        async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                            if resp.status == 200:
                                break
                    await asyncio.sleep(0.2)
            for n in range(200):
                body = click_on_an_unknown_ask(n)
                url = f"http://127.0.0.1:{port}/slack/events"
                async with asyncio.timeout(10):
                    async with session.post(url, data=body, headers=signed(body)) as resp:
                        assert resp.status == 200, n
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 10)
        assert time.monotonic() - stopping < 10
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        written = b""
        while chunk := os.read(read_end, 65536):
            written += chunk
        os.close(read_end)
    assert b"Traceback" not in written
