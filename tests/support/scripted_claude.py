"""A scripted stand-in for the Claude Code CLI, for the in-process tests of the Claude Agent SDK
adapter's deferral (``tests/bridge/frameworks/test_claude_agent_sdk.py``,
``tests/bridge/frameworks/test_outcomes.py``).

It plays the CLI over the SDK's own control protocol, as an SDK ``Transport``: no CLI process and
no model, so those tests run in milliseconds and can look at each hook decision the adapter sent
(``ScriptedClaudeCode.decisions``), and Claude's last words say what it was told. What the real
CLI does with the same hooks -- it offers ``AskUserQuestion`` only with ``can_use_tool`` set, and
the resumed model reads Claude Code's own wording -- is tested against the bundled CLI in
``tests/platforms/slack/test_agents_claude.py`` and the examples' runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, Transport

QUESTION: dict[str, Any] = {
    "question": "How detailed should the release notes be?",
    "header": "Detail",
    "options": [
        {"label": "Summary", "description": "A few bullet points"},
        {"label": "Full", "description": "Every change, grouped by area"},
    ],
    "multiSelect": False,
}
ASKED: dict[str, Any] = {"questions": [QUESTION]}
"""The AskUserQuestion input the scripted Claude sends."""


class ScriptedClaudeCode:
    """Plays the Claude Code CLI over the SDK's control protocol: Claude calls AskUserQuestion,
    the PreToolUse hooks registered at initialize decide it -- "defer" stops the run with the call
    in ``deferred_tool_use``, and resuming that session replays the call to the hooks -- and once
    allowed, Claude writes with the answer. Keeps every hook decision it got in ``decisions``."""

    def __init__(self) -> None:
        self.deferred: dict[str, dict[str, Any]] = {}  # session id -> the deferred tool use
        self.decisions: list[dict[str, Any]] = []
        self.sessions = 0

    def __call__(self, options: ClaudeAgentOptions) -> Transport:
        return _Session(self, options.resume)


class _Session(Transport):
    def __init__(self, cli: ScriptedClaudeCode, resume: str | None) -> None:
        if resume is None:
            cli.sessions += 1
        self.cli, self.session_id = cli, resume or f"session-{cli.sessions}"
        self.replay = cli.deferred.pop(resume, None) if resume else None
        self.out: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.hook_ids: list[str] = []
        self.tasks: set[asyncio.Task[None]] = set()

    async def connect(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:  # stdin closed: Claude Code exits once it is done
        self.out.put_nowait(None)

    async def close(self) -> None:
        self.out.put_nowait(None)

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self.out.get()) is not None:
            yield message

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            if message["type"] == "control_response":
                reply = message["response"]
                self.replies.pop(reply["request_id"]).set_result(reply.get("response", {}))
            elif message["type"] == "control_request":  # initialize: note the PreToolUse hooks
                for matcher in (message["request"].get("hooks") or {}).get("PreToolUse", []):
                    if matcher["matcher"] in (None, "AskUserQuestion"):
                        self.hook_ids += matcher["hookCallbackIds"]
                self.reply(message["request_id"], {})
                if self.replay is not None:  # resuming a deferred call: replay it to the hooks
                    self.start(self.replay)
            elif message["type"] == "user":
                tool_use = {"id": "toolu_1", "name": "AskUserQuestion", "input": ASKED}
                self.emit("assistant", message=self.said({"type": "tool_use", **tool_use}))
                self.start(tool_use)

    def reply(self, request_id: str, response: dict[str, Any]) -> None:
        self.out.put_nowait(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": response},
            }
        )

    def emit(self, kind: str, **fields: Any) -> None:
        self.out.put_nowait({"type": kind, "session_id": self.session_id, **fields})

    @staticmethod
    def said(*content: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "model": "scripted", "content": list(content)}

    def start(self, tool_use: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self.decide(tool_use))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def decide(self, tool_use: dict[str, Any]) -> None:
        decision: dict[str, Any] = {}
        for n, hook_id in enumerate(self.hook_ids):
            request_id = f"hook-{tool_use['id']}-{n}"
            self.replies[request_id] = asyncio.get_running_loop().create_future()
            hook_input = {
                "hook_event_name": "PreToolUse", "session_id": self.session_id, "cwd": "",
                "transcript_path": "", "tool_name": tool_use["name"],
                "tool_input": tool_use["input"], "tool_use_id": tool_use["id"],
            }  # fmt: skip
            request = {"subtype": "hook_callback", "callback_id": hook_id, "input": hook_input}
            self.out.put_nowait(
                {"type": "control_request", "request_id": request_id, "request": request}
            )
            decision = (await self.replies[request_id]).get("hookSpecificOutput") or decision
        self.cli.decisions.append(decision)
        if decision.get("permissionDecision") == "defer":
            self.cli.deferred[self.session_id] = tool_use
            self.finish("", stop_reason="tool_deferred", deferred_tool_use=tool_use)
        elif decision.get("permissionDecision") == "allow":
            [answer] = decision["updatedInput"]["answers"].values()
            self.finish(f"Writing them as: {answer}")
        else:
            self.finish(f"Not asked: {decision.get('permissionDecisionReason')}")

    def finish(self, text: str, **result: Any) -> None:
        """The run's end: Claude's last words (none when it stopped on a deferred call, whose
        result is ``""`` as the CLI's is), then the result."""
        if text:
            self.emit("assistant", message=self.said({"type": "text", "text": text}))
        self.emit(
            "result", subtype="success", duration_ms=1, duration_api_ms=1, is_error=False,
            num_turns=1, result=text, **result,
        )  # fmt: skip
