"""``ask-bridge serve`` as an OS process: what it tells the operator at start."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from fake_slack import BOT_TOKEN, FakeSlack
from payloads import SIGNING_SECRET
from procs import Serve, cli_env
from redis_server import RedisServer


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
        assert "ask-bridge serve: ready (slack)" in ready
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
    assert [line for line in serve.log if "ask-bridge serve: ready (slack)" in line]
