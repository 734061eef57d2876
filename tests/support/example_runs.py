"""The examples that talk to a model, run as their users run them, against a scripted model.

Each runs as its docstring says, ``python examples/NAME.py``, as a separate process configured only
the SDKs' own way -- ``OPENAI_BASE_URL`` pointing at a :class:`ModelServer` on loopback and
``OPENAI_API_KEY=offline`` -- and, unless it asks in Slack, with its proxy variables pointing at a
:class:`RefusingProxy`, so whatever else it tries to reach (the Agents SDK's traces, say) is refused
and named instead of leaving the machine. The scripted model asks one question whose text holds a
marker unique to the run (a teammate in a shared Slack clicks the message holding it), then answers
from the tool result it read. ``tests/platforms/slack/test_examples_e2e.py`` runs them, with the
stand-in handlers and asking in Slack; ``tests/test_examples.py`` checks that each docstring names
the variables it is run with. The Claude Agent SDK examples (:data:`CLAUDE_EXAMPLES`) reach their
model through the Claude Code CLI instead: ``tests/platforms/slack/test_examples_claude.py`` runs
them, with :func:`run_script` too.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge import tool_ask_user
from bridge.frameworks.providers import openai_chat_tool, openai_responses_tool
from tests.support.model_server import (
    ModelRequest,
    ModelServer,
    RefusingProxy,
    Reply,
    Turn,
    calls_ask_user,
    last_tool_result,
    says,
)
from tests.support.procs import cli_env

ROOT = Path(__file__).resolve().parents[2]

RELEASE_NOTES = {
    "question": "How detailed should the notes for release {marker} be?",
    "header": "Detail",
    "options": [
        {"label": "Summary", "description": "A few bullet points"},
        {"label": "Full", "description": "Every change, grouped by area"},
    ],
    "multiSelect": False,
}
REPORT_FORMAT = {
    "question": "Which format should report {marker} use?",
    "header": "Format",
    "options": [
        {"label": "Summary", "description": "One page of key points"},
        {"label": "Detailed", "description": "Every finding with evidence"},
    ],
    "multiSelect": False,
}
MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
"""What every example reads to reach its model (the SDKs' own variables)."""
HANDLER_ENV = (
    "SLACK_BOT_TOKEN",
    "SLACK_API_URL",
    "ASK_BRIDGE_CHANNEL",
    "REDIS_URL",
    "ASK_BRIDGE_KEY_PREFIX",
)
"""What ``examples/handler.py`` reads to ask in Slack."""
CLAUDE_EXAMPLES = ("claude_agent_permissions.py", "claude_agent_sdk_defer.py")
CLAUDE_MODEL_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
)
"""What the Claude Agent SDK examples are run with to reach their model: Claude Code's own
variables (the CLI reads them itself), the last keeping it from Anthropic's other services."""


@dataclass(frozen=True)
class Example:
    """An example that talks to a model: where its requests go, the ``ask_user`` definition it
    sends there, the question its model asks, and the variables it is run with."""

    name: str
    api: str
    tool: dict[str, Any]
    question: dict[str, Any] = field(default_factory=lambda: RELEASE_NOTES)
    env: tuple[tuple[str, str], ...] = ()
    """Variables of the example's own, beyond :data:`MODEL_ENV` and the handler's."""

    def asked(self, marker: str) -> dict[str, Any]:
        """The question the model asks in the run marked ``marker``."""
        return {**self.question, "question": self.question["question"].format(marker=marker)}

    def result(self, marker: str, label: str) -> str:
        """The tool result the model must read once ``label`` was picked: the answers JSON."""
        asked = self.asked(marker)
        answer = {"question": asked["question"], "selected": [label], "other_text": None}
        return json.dumps({"questions": [asked], "answers": [answer]}, ensure_ascii=False)

    def printed(self, marker: str, label: str) -> str:
        """What the example prints: the model's last words (the LangGraph one shows its steps)."""
        said = final_words([label])
        if self.name != "langgraph_agent.py":
            return said
        text = self.asked(marker)["question"]
        read = [{"question": text, "selected": [label], "other_text": None}]
        return f"asking: {[text]}\nmodel read: {read}\n{said}"


def final_words(selected: list[str]) -> str:
    return f"Writing them as: {selected}"


CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
NO_TRACES = (("OPENAI_AGENTS_DISABLE_TRACING", "1"),)
EXAMPLES = [
    Example("openai_raw.py", CHAT, openai_chat_tool(tool_ask_user, strict=True)),
    Example("chatlas_agent.py", RESPONSES, openai_responses_tool(tool_ask_user, strict=True)),
    Example("pydantic_ai_agent.py", RESPONSES, openai_responses_tool(tool_ask_user)),
    Example("langgraph_agent.py", CHAT, openai_chat_tool(tool_ask_user), REPORT_FORMAT),
    Example(
        "openai_agents_sdk.py",
        RESPONSES,
        openai_responses_tool(tool_ask_user, strict=True),
        env=NO_TRACES,
    ),
    Example(
        "openai_agents_defer.py",
        RESPONSES,
        openai_responses_tool(tool_ask_user, strict=True),
        env=NO_TRACES,
    ),
]
DEFERRING = ("pydantic_ai_agent.py", "openai_agents_defer.py")
"""The examples that resume from the answers feed (a shared store's feed: one at a time)."""


def answer_from_tool_result(body: dict[str, Any]) -> Reply:
    """The model's second turn: it writes with the options the tool result says were picked."""
    return says(final_words(json.loads(last_tool_result(body).content)["answers"][0]["selected"]))


@dataclass(frozen=True)
class Ran:
    """One run of an example: its exit status and output, what its model was sent, and where
    else it tried to go."""

    marker: str
    status: int
    out: str
    err: str
    requests: list[ModelRequest]
    refused: list[str]

    def check(self, example: Example, label: str) -> None:
        """The run went as ``example`` means it to when the person picks ``label``: it exited
        cleanly, having reached nothing but its model and chat; it printed the model's answer;
        the model got the example's ``ask_user`` definition with each request, and read the
        answers JSON after its call."""
        name = f"{example.name} (picking {label})"
        assert self.status == 0, f"{name} exited {self.status}:\n{self.err[-3000:]}"
        assert "Traceback" not in self.err, f"{name}:\n{self.err[-3000:]}"
        assert not self.refused, f"{name} tried to reach {self.refused}"
        assert self.out == example.printed(self.marker, label), f"{name} printed {self.out!r}"
        assert [r.path for r in self.requests] == [example.api] * 2, f"{name}: {self.requests}"
        for request in self.requests:
            assert request.body["tools"] == [example.tool], f"{name} sent {request.body['tools']}"
        read = last_tool_result(self.requests[-1].body).content
        assert read == example.result(self.marker, label), f"{name}: the model read {read!r}"


DEADLINE = 150
"""Seconds an example may run: generous, as a dozen of them may be importing their frameworks
at once on 2 cores."""


def new_marker() -> str:
    return uuid.uuid4().hex[:10]


async def run_example(
    example: Example, marker: str, handler_env: dict[str, str], *, fenced: bool = True
) -> Ran:
    """Run ``example`` as a script against its own scripted model, which asks the question
    marked ``marker``, with ``handler_env`` (empty: the stand-in handlers) and nothing inherited
    that names another model or chat. ``fenced``: behind the refusing proxy -- not when asking
    in Slack: slack_sdk takes the proxy variables but not ``NO_PROXY``, so it would send its
    calls to the fake Slack there too (the clients talking to the model are the same as in a
    fenced run with the stand-ins)."""
    script: list[Turn] = [
        calls_ask_user({"questions": [example.asked(marker)]}),
        answer_from_tool_result,
    ]
    async with ModelServer(script) as server, RefusingProxy() as proxy:
        env = clean_env()
        env.update(OPENAI_API_KEY="offline", OPENAI_BASE_URL=server.openai_base_url)
        env.update({**dict(example.env), **(proxy.env() if fenced else {}), **handler_env})
        how = "asking in Slack" if handler_env else "with the stand-ins"
        status, printed, stderr = await run_script(example.name, env, ROOT, how)
    return Ran(marker, status, printed, stderr, server.requests, proxy.destinations)


def clean_env() -> dict[str, str]:
    """This process's environment without what would name another model, chat or Claude Code
    setup: ``OPENAI_*``, ``ANTHROPIC_*``, ``CLAUDE_*``, and what :func:`procs.cli_env` drops."""
    return {
        k: v for k, v in cli_env().items() if not k.startswith(("OPENAI", "ANTHROPIC", "CLAUDE"))
    }


async def run_script(name: str, env: dict[str, str], cwd: Path, how: str) -> tuple[int, str, str]:
    """Run ``examples/NAME`` as a script, with ``env`` only, from ``cwd``: its exit status, what
    it printed (stripped) and what it logged. One still running after :data:`DEADLINE` is
    aborted and fails the test with where each thread was (``how`` names the run)."""
    env = {**env, "PYTHONFAULTHANDLER": "1"}  # SIGABRT prints where each thread is
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(ROOT / "examples" / name), cwd=cwd, env=env, stdout=out,
            stderr=err,
        )  # fmt: skip
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), DEADLINE)
        except TimeoutError:
            timed_out = True
            proc.send_signal(signal.SIGABRT)
        finally:
            if proc.returncode is None:  # aborting, or the test was cancelled: no orphan
                if not timed_out:
                    proc.kill()
                await proc.wait()
        out.seek(0)
        err.seek(0)
        printed, stderr = out.read().decode(), err.read().decode()
    if timed_out:
        where = stderr[-8000:]  # ends with where each thread was
        raise AssertionError(f"{name} ({how}) still ran after {DEADLINE} s:\n{where}")
    assert proc.returncode is not None
    return proc.returncode, printed.strip(), stderr
