"""The Claude Agent SDK examples as their users run them: ``python examples/NAME.py``, whose SDK
drives the Claude Code CLI its wheel bundles, which talks Anthropic Messages (streamed) to a
scripted model on loopback -- with the stand-in handlers, and asking in Slack as
``examples/handler.py`` reads it, where a teammate answers by a signed click through the rig's
``ask-bridge serve``.

Each example gets the variables its docstring names (``ANTHROPIC_BASE_URL``,
``ANTHROPIC_API_KEY``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``) and the test's own, which keep
the CLI off the network and out of the developer's Claude Code: a throwaway home and config
directory (also the working directory, where an allowed tool writes and the resumed session is
found), telemetry, error reports and the auto-updater each switched off too, and no retries (a
refused request fails the run at once).

The CLI is another process, outside the suite's loopback guard, so it is fenced by a
:class:`~model_server.RefusingProxy`, through its config directory's ``settings.json`` (Claude Code
applies its ``env``) rather than the example's environment: asking in Slack, slack_sdk would take
the proxy variables too (it ignores ``NO_PROXY``) and send its calls to the fake Slack there. With
the stand-ins, the example's own process is fenced as well. Every run checks that the proxy was
asked for nothing, and one checks that the fence holds: pointed at a loopback address ``NO_PROXY``
does not exempt, the CLI's request goes to the proxy.

All runs go at once: most of each is a process starting, and the one deferring run has the rig
(its key prefix, so its answers feed) to itself.
"""

from __future__ import annotations

import asyncio
import json
import platform
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest

from tests.support.example_runs import DEADLINE, RELEASE_NOTES, clean_env, run_script
from tests.support.model_server import Body, ModelServer, RefusingProxy, Reply, ToolCall, Turn, says
from tests.support.redis_server import RedisServer
from tests.support.slack.agent_rig import CHANNEL, Rig
from tests.support.slack.fake_slack import BOT_TOKEN

QUESTION: dict[str, Any] = RELEASE_NOTES
"""The question each example's model asks, its text marked for the run (as the others')."""
BUNDLED = Path(claude_agent_sdk.__file__).parent / "_bundled"
CLI = BUNDLED / ("claude.exe" if platform.system() == "Windows" else "claude")
MUST_RUN = platform.system() == "Linux" and platform.machine() == "x86_64"
"""Where the wheel bundles the CLI (CI's platform): a missing CLI there is a failure."""

pytestmark = pytest.mark.skipif(
    not CLI.is_file() and not MUST_RUN,
    reason=f"this platform's claude-agent-sdk wheel bundles no Claude Code CLI ({CLI} is missing)",
)

SANDBOX = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
}
"""The test's own settings for the CLI beyond its home (see the module doc): what
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` stands for, each set again, and no retries."""
DONE = "The release notes are written."
"""The scripted model's last words, which each example prints."""
CONTINUE = {
    "type": "text",
    "text": "Continue from where you left off.",
    "cache_control": {"type": "ephemeral"},
}
"""What Claude Code adds after the replayed call's result when a deferred session resumes."""
BEYOND_FENCE = "http://127.0.0.2:9"
"""A model address on loopback (nothing leaves the machine, fenced or not) that ``NO_PROXY``
does not exempt: a fenced CLI asks the proxy for it."""


@pytest.fixture(scope="module")
def rig(redis_srv: RedisServer) -> Iterator[Rig]:
    r = Rig(redis_srv.url)
    yield r
    r.close()


def asked(marker: str) -> dict[str, Any]:
    return {**QUESTION, "question": QUESTION["question"].format(marker=marker)}


def asks(marker: str) -> Reply:
    """Claude asking the release-notes question through its AskUserQuestion."""
    call = ToolCall({"questions": [asked(marker)]}, name="AskUserQuestion", call_id="toolu_ask")
    return Reply(tool_calls=[call])


def notes(marker: str) -> Reply:
    """A Bash call Claude Code asks permission for (it writes a file; a bare ``echo`` it would
    run unasked)."""
    command = {"command": f"echo {marker} | tee {marker}.txt", "description": "Note the release"}
    return Reply(tool_calls=[ToolCall(command, name="Bash", call_id="toolu_bash")])


def answered(marker: str, label: str) -> dict[str, Any]:
    """The tool result the model reads for an AskUserQuestion answered with ``label``: Claude
    Code's own wording of the answers in ``updated_input``."""
    return {
        "type": "tool_result",
        "tool_use_id": "toolu_ask",
        "content": f'Your questions have been answered: "{asked(marker)["question"]}"="{label}". '
        "You can now continue with these answers in mind.",
    }


def tool_result_block(body: Body, call_id: str) -> dict[str, Any]:
    """The ``tool_result`` block answering ``call_id`` in the request's last message, as Claude
    Code sent it but for its ``cache_control`` (a prompt-caching mark on whichever block comes
    last)."""
    last = body["messages"][-1]
    assert last["role"] == "user", last
    [block] = [b for b in last["content"] if b.get("tool_use_id") == call_id]
    return {k: v for k, v in block.items() if k != "cache_control"}


@dataclass(frozen=True)
class ClaudeRun:
    """One run of an example: its exit status and output, what the CLI sent the model, where
    else the CLI (or the example) tried to go, and the home it ran in."""

    name: str
    status: int
    out: str
    err: str
    bodies: list[Body]
    refused: list[str]
    home: Path

    def check(self) -> None:
        """It exited cleanly, having reached nothing but its model (and chat)."""
        assert self.status == 0, f"{self.name} exited {self.status}:\n{self.err[-3000:]}"
        assert "Traceback" not in self.err, f"{self.name}:\n{self.err[-3000:]}"
        assert not self.refused, f"{self.name} tried to leave loopback: {self.refused}"


async def run_claude_example(
    name: str,
    script: Sequence[Turn],
    home: Path,
    handler_env: dict[str, str],
    *,
    fenced: bool,
    base_url: str | None = None,
) -> ClaudeRun:
    """Run ``examples/NAME`` from ``home`` against its own scripted model (or ``base_url``),
    with ``handler_env`` (empty: the stand-in handlers) and the CLI fenced through its settings;
    ``fenced``: the example's own process too, through its environment (not when asking in
    Slack)."""
    async with ModelServer(script) as server, RefusingProxy() as proxy:
        config = home / ".claude"
        config.mkdir(parents=True)
        (config / "settings.json").write_text(json.dumps({"env": proxy.env()}))
        env = {
            **clean_env(),
            "ANTHROPIC_BASE_URL": base_url or server.anthropic_base_url,
            "ANTHROPIC_API_KEY": "offline",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(config),
            **SANDBOX,
            **(proxy.env() if fenced else {}),
            **handler_env,
        }
        how = "asking in Slack" if handler_env else "with the stand-ins"
        status, out, err = await run_script(name, env, home, how)
    bodies = [request.body for request in server.requests]
    return ClaudeRun(name, status, out, err, bodies, proxy.destinations, home)


def check_permissions(ran: ClaudeRun, marker: str, note: str, option: int) -> None:
    """``claude_agent_permissions.py`` where the person picks ``option`` for both questions --
    the release notes' detail, then the permission for the command: the first options ("Summary",
    "Allow") run it, and the model reads its output; the second ("Full", "Deny") refuse it, and
    the model reads why."""
    assert ran.out == DONE, f"{ran.name} printed {ran.out!r}"
    assert len(ran.bodies) == 3, ran.bodies
    label = QUESTION["options"][option]["label"]
    assert tool_result_block(ran.bodies[1], "toolu_ask") == answered(marker, label)
    read = tool_result_block(ran.bodies[2], "toolu_bash")
    written = ran.home / f"{note}.txt"
    if option == 0:
        assert read == {
            "type": "tool_result",
            "tool_use_id": "toolu_bash",
            "is_error": False,
            "content": note,
        }
        assert written.read_text() == f"{note}\n"
    else:
        assert read == {
            "type": "tool_result",
            "tool_use_id": "toolu_bash",
            "is_error": True,
            "content": "The person denied permission to use Bash.",
        }
        assert not written.exists()


def check_deferred(ran: ClaudeRun, marker: str, option: int) -> None:
    """``claude_agent_sdk_defer.py``: the first run stopped on the deferred call without telling
    the model anything; resumed, the model reads the answers as Claude Code words them, then
    ``Continue from where you left off.``"""
    assert ran.out == DONE, f"{ran.name} printed {ran.out!r}"
    assert len(ran.bodies) == 2, ran.bodies
    label = QUESTION["options"][option]["label"]
    last = ran.bodies[1]["messages"][-1]
    assert last == {"role": "user", "content": [answered(marker, label), CONTINUE]}, last


def new_marker() -> str:
    return uuid.uuid4().hex[:10]


def posts(rig: Rig, marker: str) -> list[dict[str, Any]]:
    return [a for a in rig.fake.ok_calls("chat.postMessage") if marker in a["text"]]


@pytest.mark.timeout(DEADLINE + 60)
async def test_the_claude_examples_run_as_scripts(rig: Rig, tmp_path: Path) -> None:
    """With no chat configured, the stand-ins pick each first option ("Summary", "Allow"); in
    Slack the teammate picks each second ("Full", "Deny"), which no stand-in would."""
    assert CLI.is_file(), f"the claude-agent-sdk wheel bundles no Claude Code CLI: {CLI} is missing"
    slack = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_API_URL": rig.fake.url,
        "ASK_BRIDGE_CHANNEL": CHANNEL,
        "REDIS_URL": rig.redis_url,
        "ASK_BRIDGE_KEY_PREFIX": rig.prefix,
    }

    async def run(
        name: str, script: Sequence[Turn], markers: list[str], in_slack: bool
    ) -> ClaudeRun:
        """One run; asking in Slack, the teammate clicks the second option of each question
        holding one of ``markers``, in turn, as it is posted."""
        home = tmp_path / f"{name.removesuffix('.py')}-{'slack' if in_slack else 'stand-ins'}"
        clicks = [rig.answer(marker, 1) for marker in markers] if in_slack else []
        try:
            ran = await run_claude_example(
                name, script, home, slack if in_slack else {}, fenced=not in_slack
            )
            ran.check()
            for click in clicks:
                await asyncio.wait_for(asyncio.wrap_future(click), 10)
        finally:
            for click in clicks:
                click.cancel()  # when the example never posted its question
        return ran

    async def permissions(in_slack: bool) -> None:
        marker, note = new_marker(), new_marker()
        script = [asks(marker), notes(note), says(DONE)]
        ran = await run("claude_agent_permissions.py", script, [marker, note], in_slack)
        check_permissions(ran, marker, note, int(in_slack))
        if in_slack:
            [shown] = posts(rig, note)
            assert f'"command": "echo {note} | tee {note}.txt"' in shown["text"], shown

    async def deferred(in_slack: bool) -> None:
        marker = new_marker()
        script = [asks(marker), says(DONE)]
        ran = await run("claude_agent_sdk_defer.py", script, [marker], in_slack)
        check_deferred(ran, marker, int(in_slack))
        if in_slack:  # asked once: the replayed call was not posted again
            assert [a["channel"] for a in posts(rig, marker)] == [CHANNEL]

    async def fence_holds() -> None:
        """Asking in Slack, the fence is the CLI's settings alone: a model at 127.0.0.2 (which
        ``NO_PROXY`` does not name) is asked through the proxy, which refuses it."""
        name, home = "claude_agent_permissions.py", tmp_path / "fence"
        ran = await run_claude_example(name, [], home, {}, fenced=False, base_url=BEYOND_FENCE)
        assert ran.status != 0 and not ran.bodies, ran.err[-3000:]
        sent = [destination.partition("?")[0] for destination in ran.refused]
        assert sent == [f"POST {BEYOND_FENCE}/v1/messages"], ran.refused

    outcomes = await asyncio.gather(
        *(permissions(in_slack) for in_slack in (False, True)),
        *(deferred(in_slack) for in_slack in (False, True)),
        fence_holds(),
        return_exceptions=True,  # every run to its end, each failure reported
    )
    failed = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    if failed:
        raise ExceptionGroup(f"{len(failed)} of the runs failed", failed)
