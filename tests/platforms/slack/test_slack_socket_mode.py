"""Socket Mode: a standalone ``ask`` (no REDIS_URL) handles its own clicks over the websocket."""

from __future__ import annotations

import asyncio
import io
import json
import signal
import sys
import uuid
from collections.abc import AsyncIterator

import pytest
from mcp import Client, StdioServerParameters

from bridge import replies
from bridge.cli import main
from bridge.runtime import serving
from bridge.store.memory import MemoryStore
from platforms.slack import SlackPlatform
from platforms.slack.settings import SlackSettings
from tests.support.procs import Agent, Serve, cli_env
from tests.support.samples import q
from tests.support.slack.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.slack.fake_socket import FakeSocketMode
from tests.support.slack.payloads import (
    block_actions,
    find_action,
    form_values,
    radio,
    view_submission,
)


@pytest.fixture
async def socket(fake: FakeSlack) -> AsyncIterator[FakeSocketMode]:
    server = await FakeSocketMode().start()
    fake.socket_url = server.url
    yield server
    await server.stop()


async def test_standalone_ask_answered_over_socket_mode(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    marker = uuid.uuid4().hex[:8]
    env = cli_env(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=fake.url)
    questions = json.dumps({"questions": [q(f"Socket {marker}?", "Socket", ["on", "off"])]})
    agent = await Agent.start(env, questions, "--channel", "C0SOCK", "--wait", "30")
    try:
        await fake.wait_for("chat.postMessage", within=30)
        (channel, ts), message = next(iter(fake.messages.items()))
        _, button = find_action(message, "askb:pick:")
        ask_id = button["action_id"].split(":")[2]
        click = block_actions(fake, channel, ts, "U0ALICE", f"askb:pick:{ask_id}:0:1")
        ack = await socket.send(click)  # acked even though the agent ends right after
        assert ack["envelope_id"].startswith("env-") and not ack.get("payload")
        code, out, err = await agent.result()
    finally:
        await agent.kill()
    assert channel == "C0SOCK"
    assert code == 0, err
    assert json.loads(out)["answers"][0]["selected"] == ["off"]
    assert [c.method for c in fake.calls if c.method == "apps.connections.open"]


def standalone_env(fake: FakeSlack, bot_token: str = BOT_TOKEN) -> dict[str, str]:
    """``ask`` without REDIS_URL: it handles its own clicks over (fake) Socket Mode."""
    return cli_env(SLACK_BOT_TOKEN=bot_token, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=fake.url)


async def test_standalone_wait_running_out_closes_the_ask_and_exits_4(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    """Without a shared store the ask dies with the process: it must not defer (which would
    leave a live message whose ask id points at nothing) but close and re-render it."""
    questions = json.dumps([q("Nobody home?", "Home", ["yes", "no"])])
    agent = await Agent.start(
        standalone_env(fake), questions, "--channel", "C0SOCK", "--wait", "0.5"
    )
    code, out, err = await agent.result()
    assert code == 4, err
    assert out == "" and "nobody answered" in err
    ((channel, ts), message) = next(iter(fake.messages.items()))
    (update,) = fake.ok_calls("chat.update")
    assert (update["channel"], update["ts"]) == (channel, ts)
    assert "Expired" in json.dumps(message["blocks"])
    assert all(b["type"] != "actions" for b in message["blocks"])


async def test_standalone_defer_mode_is_refused_before_posting(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    questions = json.dumps([q("Later?", "Later", ["yes", "no"])])
    agent = await Agent.start(
        standalone_env(fake), questions, "--channel", "C0SOCK", "--mode", "defer"
    )
    code, out, err = await agent.result()
    assert code == 1, err
    assert out == "" and "mode defer needs REDIS_URL" in err
    assert fake.ok_calls("chat.postMessage") == []


async def test_standalone_post_refused_exits_1_with_the_slack_error(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    questions = json.dumps([q("Anyone?", "Anyone", ["yes", "no"])])
    env = standalone_env(fake, bot_token="xoxb-revoked")
    agent = await Agent.start(env, questions, "--channel", "C0SOCK", "--wait", "30")
    code, out, err = await agent.result()
    assert code == 1, err
    assert out == "" and "invalid_auth" in err
    assert fake.messages == {}


async def test_modal_errors_travel_back_in_the_socket_ack(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    from pydantic import SecretStr

    settings = SlackSettings(
        bot_token=SecretStr(BOT_TOKEN), app_token=SecretStr(APP_TOKEN), api_url=fake.url
    )
    platform = SlackPlatform(settings)
    store = MemoryStore()
    async with serving([platform], store):
        from bridge.models import QuestionSet
        from bridge.record import AskRecord, Destination

        record = AskRecord(
            questions=QuestionSet.model_validate(
                {"questions": [q("A?", "A", ["x", "y"]), q("B?", "B", ["x", "y"])]}
            ),
            destination=Destination(platform="slack", channel="C0SOCK"),
            expires_at=1e12,
        )
        await store.create(record)
        ref = await platform.poster().post(record)
        await store.set_message(record.id, ref)
        click = block_actions(fake, ref.channel, ref.message_id, "U0ALICE", "askb:answer:")
        await socket.send(click)
        (opened,) = await fake.wait_for("views.open")
        view_id = next(iter(fake.views))
        values = form_values((radio(0), None), (radio(None), None))
        ack = await socket.send(view_submission(fake, view_id, "U0ALICE", values))
        assert ack["payload"] == {
            "response_action": "errors",
            "errors": {"q1.pick": replies.NEED_ANSWER},
        }
        values = form_values((radio(0), None), (radio(1), None))
        ack = await socket.send(view_submission(fake, view_id, "U0ALICE", values))
        assert not ack.get("payload")
        await fake.wait_for("chat.update")
        done = await store.get(record.id)
        assert done is not None and done.answers is not None
        assert [a.selected for a in done.answers] == [("x",), ("y",)]
        assert opened["view"]["callback_id"] == "askb:form"
    await store.aclose()


def test_standalone_ask_without_app_token_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("SLACK_APP_TOKEN", "REDIS_URL", "SLACK_SIGNING_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps([q("Q?", "H", ["a", "b"])])))
    assert main(["ask", "--channel", "C1", "-"]) == 1
    assert "SLACK_APP_TOKEN" in capsys.readouterr().err


def test_rejected_question_set_exits_2_with_the_model_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [{"question": "Q?", "header": "far too long a header", "options": []}]
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(bad)))
    assert main(["ask", "--channel", "C1", "-"]) == 2
    err = capsys.readouterr().err
    assert "header" in err and "options" in err


def test_deeply_nested_question_set_exits_2_with_the_model_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("[" * 100_000 + "]" * 100_000))
    assert main(["ask", "--channel", "C1", "-"]) == 2
    assert "nested too deeply" in capsys.readouterr().err


def test_unknown_argument_exits_2_with_the_model_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = {"questions": [q("Q?", "H", ["a", "b"])], "urgent": True}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(arguments)))
    assert main(["ask", "--channel", "C1", "-"]) == 2
    assert "unknown argument 'urgent'" in capsys.readouterr().err


def test_null_multiselect_is_taken_as_left_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenAI strict mode says "left out" with null: accepted, as from a provider. The question
    set passes; the next check (no destination) is what stops this run."""
    bare = [{**q("Q?", "H", ["a", "b"]), "multiSelect": None}]
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(bare)))
    assert main(["ask", "-"]) == 1
    assert "give --channel or --user" in capsys.readouterr().err


def test_mcp_without_redis_refuses_http_mode_it_could_not_serve(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a shared store the MCP server handles its own clicks; over HTTP it would listen
    on a local port Slack cannot reach, so it says what to set instead of hanging."""
    for name in ("SLACK_APP_TOKEN", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "secret")
    monkeypatch.setenv("ASK_BRIDGE_PLATFORM", "slack")
    monkeypatch.setenv("ASK_BRIDGE_CHANNEL", "C1")
    assert main(["mcp"]) == 1
    err = capsys.readouterr().err
    assert "ask-bridge mcp:" in err and "SLACK_APP_TOKEN" in err and "REDIS_URL" in err


async def test_mcp_without_redis_serves_its_clicks_over_socket_mode(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    env = {
        **standalone_env(fake),
        "ASK_BRIDGE_PLATFORM": "slack",
        "ASK_BRIDGE_CHANNEL": "C0SOCK",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "mcp",
        env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await fake.wait_for("apps.connections.open", within=30)
        assert proc.stdin is not None
        proc.stdin.close()  # the MCP client leaves: the server and its click loop stop
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    assert out == b""


async def test_standalone_mcp_closes_an_unanswered_ask_instead_of_deferring(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    """A deferred ask would wait in this process's memory for a feed nobody reads: the call
    returns "nobody answered" and the message is re-rendered closed, like a standalone ``ask``."""
    env = {**standalone_env(fake), "ASK_BRIDGE_PLATFORM": "slack", "ASK_BRIDGE_CHANNEL": "C0SOCK"}
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "bridge.cli", "mcp", "--wait", "0.5"], env=env
    )
    async with Client(server) as client:
        result = await client.call_tool("ask_user", {"questions": [q("MCP?", "MCP", ["a", "b"])]})
    assert result.is_error
    (block,) = result.content
    assert "nobody answered within 0.5 seconds" in getattr(block, "text", "")
    ((channel, ts), message) = next(iter(fake.messages.items()))
    (update,) = fake.ok_calls("chat.update")
    assert (update["channel"], update["ts"]) == (channel, ts)
    assert "Expired" in json.dumps(message["blocks"])
    assert all(b["type"] != "actions" for b in message["blocks"])


async def test_standalone_ask_stopped_by_a_signal_closes_its_ask_and_exits_4(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    questions = json.dumps([q("Still there?", "There", ["yes", "no"])])
    agent = await Agent.start(standalone_env(fake), questions, "--channel", "C0SOCK")
    try:
        await fake.wait_for("chat.postMessage", within=30)
        agent.proc.send_signal(signal.SIGTERM)
        code, out, err = await agent.result()
    finally:
        await agent.kill()
    assert code == 4, err
    assert out == "" and "cancelled; the question set was closed" in err
    ((_, _), message) = next(iter(fake.messages.items()))
    assert fake.ok_calls("chat.update") and "Cancelled" in json.dumps(message["blocks"])
    assert all(b["type"] != "actions" for b in message["blocks"])


async def test_serve_in_socket_mode_holds_a_connection_and_no_events_route(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    serve = await Serve(standalone_env(fake)).start()
    await serve.stop()
    assert serve.returncode == 0
    assert [line for line in serve.log if "over Socket Mode" in line]
    assert not [line for line in serve.log if "/slack/events" in line]
    assert [line for line in serve.log if "health and metrics at http://" in line]
    assert [c.method for c in fake.calls if c.method == "apps.connections.open"]


async def test_an_app_token_revoked_while_receiving_stops_ask_in_one_line(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    questions = json.dumps([q("Still valid?", "Valid", ["yes", "no"])])
    agent = await Agent.start(standalone_env(fake), questions, "--channel", "C0SOCK")
    try:
        await fake.wait_for("chat.postMessage", within=30)
        fake.revoke(APP_TOKEN)
        await socket.drop()  # Slack closes the link; the reconnect is refused
        code, out, err = await agent.result(within=20)
    finally:
        await agent.kill()
    assert code == 1 and out == ""
    (line,) = [x for x in err.splitlines() if x.startswith("ask-bridge ask: ")]
    assert "Slack refused SLACK_APP_TOKEN (token_revoked) while running" in line, err
    assert "Traceback" not in err


async def test_serve_stops_when_its_app_token_is_revoked_while_receiving(
    fake: FakeSlack, socket: FakeSocketMode
) -> None:
    serve = await Serve(standalone_env(fake)).start()
    try:
        fake.revoke(APP_TOKEN)
        await socket.drop()
        assert serve.proc is not None
        await asyncio.wait_for(serve.proc.wait(), 20)
    finally:
        await serve.stop()
    assert serve.returncode == 1
    log = "".join(serve.log)
    assert "Slack refused SLACK_APP_TOKEN (token_revoked) while running" in log
    assert "Traceback" not in log
    assert [c for c in fake.calls if c.method == "apps.connections.open" and not c.ok]
