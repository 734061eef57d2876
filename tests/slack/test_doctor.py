"""``ask-bridge doctor`` against the fakes and real Redis: exit 0 only when all is fine, and a
row saying what to fix for an evicting Redis, a Redis without persistence, a refused token, a
missing scope, a channel the bot is not in."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_slack import BOT_TOKEN, FakeSlack
from payloads import SIGNING_SECRET
from procs import cli_env
from redis_server import RedisServer

CHANNEL = "C0GENERAL"


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "durable", extra=["--appendonly", "yes"])
    server.start()
    yield server
    server.stop()


async def doctor(cwd: Path, env: dict[str, str], *args: str) -> tuple[int, dict[str, str]]:
    """Status, and each row's status and detail by check name."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "doctor", *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert b"Traceback" not in err, err.decode()
    rows = {}
    for line in out.decode().splitlines():
        check, _, rest = line.partition("  ")
        rows[check.strip()] = rest.strip()
    return proc.returncode or 0, rows


def slack_env(fake: FakeSlack, redis_url: str, token: str = BOT_TOKEN) -> dict[str, str]:
    return cli_env(
        SLACK_BOT_TOKEN=token, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url,
        REDIS_URL=redis_url,
    )  # fmt: skip


async def test_all_fine_exits_0(fake: FakeSlack, durable: RedisServer, tmp_path: Path) -> None:
    status, rows = await doctor(tmp_path, slack_env(fake, durable.url), "--channel", CHANNEL)
    assert status == 0, rows
    assert rows["redis"].startswith("ok") and "version" in rows["redis"]
    assert rows["redis persistence"] == "ok    AOF on"
    assert rows["redis maxmemory-policy"] == "ok    noeviction"
    assert rows["slack token"].startswith("ok") and "UBOT0001" in rows["slack token"]
    assert rows["slack scopes"].startswith("ok")
    assert rows[f"slack channel {CHANNEL}"].startswith("ok")
    assert rows["engine settings"].startswith("ok")


async def test_an_evicting_redis_without_persistence_is_two_fixes(
    fake: FakeSlack, tmp_path: Path
) -> None:
    server = RedisServer(tmp_path / "lru", extra=["--maxmemory-policy", "allkeys-lru"])
    server.start()  # and --save "": nothing persisted
    try:
        status, rows = await doctor(tmp_path, slack_env(fake, server.url))
    finally:
        server.stop()
    assert status == 1
    assert rows["redis persistence"].startswith("FIX") and "appendonly" in rows["redis persistence"]
    assert rows["redis maxmemory-policy"].split()[:2] == ["FIX", "allkeys-lru:"]


async def test_a_refused_token_a_missing_scope_and_channel_and_redis_down(
    fake: FakeSlack, tmp_path: Path
) -> None:
    status, rows = await doctor(tmp_path, slack_env(fake, "redis://:pw@127.0.0.1:1", "xoxb-no"))
    assert status == 1
    assert rows["redis"].startswith("FIX") and "REDIS_URL=redis://:***@127.0.0.1:1" in rows["redis"]
    assert rows["slack token"].startswith("FIX") and "SLACK_BOT_TOKEN" in rows["slack token"]

    fake.scopes = "usergroups:read"
    fake.missing_channels.add("C0SECRET")
    env = slack_env(fake, "")
    status, rows = await doctor(tmp_path, env, "--channel", "C0SECRET")
    assert status == 1
    assert rows["store"].startswith("note")  # no REDIS_URL: fine for one process
    assert rows["slack scopes"] == "FIX   missing chat:write"
    assert rows["slack channel C0SECRET"].startswith("FIX")


async def test_a_bad_setting_is_a_row(fake: FakeSlack, tmp_path: Path) -> None:
    env = {**slack_env(fake, ""), "ASK_BRIDGE_RETENTION": "abc"}
    status, rows = await doctor(tmp_path, env)
    assert status == 1 and rows["engine settings"].startswith("FIX")
    assert "ASK_BRIDGE_RETENTION" in rows["engine settings"]
