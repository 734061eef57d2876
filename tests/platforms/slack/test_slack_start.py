"""Slack at start: a refused token stops a command in one line (not a retry loop, not a `ready`
that fails later), and a token of the wrong kind or a missing secret before any call; an
unreachable API is retried briefly and logged once; a busy port or one out of range is one line,
a post Slack refuses too; and Bolt's warning about the unused token is gone."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from bridge.platform import PlatformUnavailable
from platforms.slack.client import make_client
from platforms.slack.credentials import check_bot_token
from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer
from tests.support.slack.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET


async def run_cli(cwd: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    """A command run to its end (at most 30 s): its status and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", *args, cwd=cwd, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode or 0, err.decode()


QUESTIONS = (
    '[{"question": "Which?", "header": "Which", "multiSelect": false, "options": '
    '[{"label": "a", "description": "a"}, {"label": "b", "description": "b"}]}]'
)


def the_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith(f"ask-bridge {command}: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


async def test_http_mode_serve_with_a_refused_token_exits_1_naming_it(
    fake: FakeSlack, tmp_path: Path
) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN="xoxb-revoked", SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    started = time.monotonic()
    status, err = await run_cli(tmp_path, env, "serve", "--port", "0")
    assert status == 1 and time.monotonic() - started < 15
    line = the_line(err, "serve")
    assert "Slack refused SLACK_BOT_TOKEN (invalid_auth)" in line
    assert "ready" not in err


async def test_socket_mode_ask_with_a_refused_app_token_exits_1_naming_it(
    fake: FakeSlack, tmp_path: Path
) -> None:
    (tmp_path / "q.json").write_text(QUESTIONS)
    env = cli_env(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN="xapp-wrong", SLACK_API_URL=fake.url)
    status, err = await run_cli(tmp_path, env, "ask", "--channel", "C0GENERAL", "q.json")
    assert status == 1
    assert "Slack refused SLACK_APP_TOKEN (invalid_auth)" in the_line(err, "ask")
    assert not fake.ok_calls("chat.postMessage")  # checked before anything was posted


async def test_an_unreachable_api_is_retried_briefly_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/api/"
    client = make_client(BOT_TOKEN, url)
    caplog.set_level(logging.INFO, logger="platforms.slack.credentials")
    with pytest.raises(
        PlatformUnavailable, match=f"cannot reach Slack's API at SLACK_API_URL={url}"
    ):
        await check_bot_token(client, url, seconds=1.2)
    said = [r for r in caplog.records if r.name == "platforms.slack.credentials"]
    assert len(said) == 1 and said[0].levelno == logging.WARNING  # several attempts, one line


async def test_serve_on_a_busy_port_is_one_line(fake: FakeSlack, tmp_path: Path) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, err = await run_cli(tmp_path, env, "serve", "--port", str(port))
    assert status == 1
    assert f"cannot listen on 127.0.0.1:{port}" in the_line(err, "serve")


async def test_serve_on_a_port_out_of_range_is_one_line(fake: FakeSlack, tmp_path: Path) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    status, err = await run_cli(tmp_path, env, "serve", "--port", "99999")
    assert status == 1
    assert err.splitlines() == [
        "ask-bridge serve: argument --port: expected a port number from 0 to 65535, not '99999' "
        "(see ask-bridge serve --help)"
    ]
    assert not fake.calls  # refused as the command line is read


WRONG_SETTINGS = {
    "a word": (
        {"SLACK_BOT_TOKEN": "hello"},
        "Slack settings are invalid: SLACK_BOT_TOKEN is not a Slack bot token: set the app's Bot "
        "User OAuth Token (xoxb-), under OAuth & Permissions",
    ),
    "a user token": (
        {"SLACK_BOT_TOKEN": "xoxp-1-2-3"},
        "Slack settings are invalid: SLACK_BOT_TOKEN is a user token (xoxp-), which posts as the "
        "person who installed the app: set the app's Bot User OAuth Token (xoxb-), under OAuth & "
        "Permissions",
    ),
    "a trailing space": (
        {"SLACK_BOT_TOKEN": BOT_TOKEN + " "},
        "Slack settings are invalid: SLACK_BOT_TOKEN has a space or line break in it: set it to "
        "the token alone",
    ),
    "the bot token as the app token": (
        {"SLACK_APP_TOKEN": BOT_TOKEN},
        "Slack settings are invalid: SLACK_APP_TOKEN is the bot token (xoxb-), which belongs in "
        "SLACK_BOT_TOKEN: Socket Mode needs an app-level token (xapp-) with the "
        "connections:write scope, under Basic Information > App-Level Tokens",
    ),
    "no signing secret in HTTP mode": (
        {"SLACK_SIGNING_SECRET": ""},
        "Slack is not configured: set SLACK_SIGNING_SECRET to verify HTTP interactions (or set "
        "SLACK_APP_TOKEN for Socket Mode)",
    ),
}


@pytest.mark.parametrize(("variables", "said"), WRONG_SETTINGS.values(), ids=list(WRONG_SETTINGS))
async def test_a_wrong_token_or_a_missing_secret_stops_serve_before_any_call(
    fake: FakeSlack, tmp_path: Path, variables: dict[str, str], said: str
) -> None:
    """What is wrong locally is said at once, naming the variable and what to set: not after
    ``auth.test`` was refused, or -- Slack out of reach -- after seconds of retries."""
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    env.update(variables)
    status, err = await run_cli(tmp_path, env, "serve", "--port", "0")
    assert status == 1
    assert the_line(err, "serve") == f"ask-bridge serve: {said}"
    assert not fake.calls


async def test_a_post_slack_refuses_is_one_line_naming_the_fix(
    fake: FakeSlack, standalone: RedisServer, tmp_path: Path
) -> None:
    """A channel the bot cannot post in: Slack's error and what to do about it, in ``ask``'s
    one line (not slack_sdk's URL and the response's dict repr), exit status 1."""
    fake.missing_channels.add("C0NOWHERE")
    (tmp_path / "q.json").write_text(QUESTIONS)
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_API_URL=fake.url, REDIS_URL=standalone.url,
        ASK_BRIDGE_KEY_PREFIX=f"refused{uuid.uuid4().hex[:6]}",
    )  # fmt: skip
    status, err = await run_cli(tmp_path, env, "ask", "--channel", "C0NOWHERE", "q.json")
    assert status == 1
    assert err.splitlines() == [
        "ask-bridge ask: could not show the questions in slack: Slack refused chat.postMessage: "
        "channel_not_found (no such channel, or a private one the bot is not in: check the "
        "channel id, and invite the bot with /invite @your-bot). Nobody saw them; continue "
        "without the answers or try again later."
    ]


async def test_a_good_start_has_no_bolt_token_warning(fake: FakeSlack) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.url,
    )  # fmt: skip
    env.pop("SLACK_APP_TOKEN")  # HTTP mode: no socket server needed
    serve = await Serve(env).start()
    await serve.stop()
    assert serve.returncode == 0
    assert not [line for line in serve.log if "will be unused" in line], serve.log
    assert fake.ok_calls("auth.test")


def test_socket_mode_reconnect_failures_are_one_line_per_streak() -> None:
    from platforms.slack.socket_mode import SDK_LOGGER, ReconnectsOnce

    seen: list[logging.LogRecord] = []
    quiet = ReconnectsOnce()

    def failure(at: float) -> logging.LogRecord:
        try:
            raise ConnectionRefusedError("connect call failed")
        except ConnectionRefusedError:
            record = logging.getLogger(SDK_LOGGER).makeRecord(
                SDK_LOGGER, logging.ERROR, __file__, 1,
                "Failed to connect (error: %s); Retrying...", ("refused",), sys.exc_info(),
            )  # fmt: skip
        record.created = at
        return record

    for at in (0.0, 10.0, 20.0, 30.0, 100.0, 110.0):  # two streaks of failures, 10 s apart
        record = failure(at)
        if quiet.filter(record):
            seen.append(record)
    assert [r.created for r in seen] == [0.0, 100.0]
    assert all(r.exc_info is None and "repeats are not logged" in r.getMessage() for r in seen)
