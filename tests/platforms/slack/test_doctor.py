"""``ask-bridge doctor`` against the fakes and real Redis: exit 0 only when all is fine, and a
row saying what to fix for an evicting Redis, a Redis without persistence, a refused token, a
missing scope, a channel the bot is not in or an answer from something other than Slack, and a
bad setting (the logging ones too)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.support.procs import cli_env
from tests.support.redis_server import RedisServer
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET

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
    assert rows["slack channel C0SECRET"] == (
        "FIX   Slack refused conversations.info: channel_not_found (no such channel, or a private "
        "one the bot is not in: check the channel id, and invite the bot with /invite @your-bot)"
    )


@pytest.mark.parametrize(
    ("variable", "value", "row", "said"),
    [
        ("ASK_BRIDGE_RETENTION", "abc", "engine settings", "invalid setting ASK_BRIDGE_RETENTION"),
        ("LOG_LEVEL", "loud", "log settings", "invalid setting LOG_LEVEL: use one of DEBUG, INFO"),
    ],
)
async def test_a_bad_setting_is_a_row(
    fake: FakeSlack, tmp_path: Path, variable: str, value: str, row: str, said: str
) -> None:
    """Every bad setting, the logging ones too (which every other command stops at): a row of
    the table, the other checks still made."""
    env = {**slack_env(fake, ""), variable: value}
    status, rows = await doctor(tmp_path, env)
    assert status == 1 and rows[row].startswith(f"FIX   {said}"), rows
    assert rows["slack token"].startswith("ok")


async def test_an_answer_that_is_no_slack_answer_is_named_as_such(tmp_path: Path) -> None:
    """A proxy's error page where Slack's JSON should be: the row says what answered and where
    to look, not ``None``."""

    async def api(request: web.Request) -> web.Response:
        if request.match_info["method"] == "auth.test":
            body = {"ok": True, "user_id": "UBOT0001", "team": "Fake"}
            return web.json_response(body, headers={"x-oauth-scopes": "chat:write"})
        return web.Response(status=502, text="<html>Bad Gateway</html>", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/api/{method}", api)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/"
    try:
        env = cli_env(
            SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=url
        )
        status, rows = await doctor(tmp_path, env, "--channel", CHANNEL)
    finally:
        await runner.cleanup()
    assert status == 1
    assert rows[f"slack channel {CHANNEL}"] == (
        "FIX   Slack's API answered conversations.info with HTTP 502 and no Slack error: check "
        "SLACK_API_URL and any proxy on the way"
    )
