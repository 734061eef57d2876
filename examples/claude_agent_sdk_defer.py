"""Claude Agent SDK: Claude's own AskUserQuestion, deferred the SDK's way. A PreToolUse hook
answers "defer", so the run stops while the question waits in chat; the same session resumes
when the answer arrives on the answers feed, and Claude Code replays the call with the answers.

Run it: ``python examples/claude_agent_sdk_defer.py``. It runs offline: a scripted stand-in for
the Claude Code CLI (bottom of this file) plays Claude over the SDK's own control protocol, an
in-memory poster stands in for Slack/Discord, and a scripted teammate answers. With ``--live`` it
runs against the real Claude Code CLI instead (needs it and an API key). (The file is not named
``claude_agent_sdk.py``: run as a script, that name would shadow the package it imports.)
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, Transport, query

from bridge.asking import AskPolicy, ChatHandler
from bridge.frameworks.claude_agent_sdk import defer_hooks, resume_options
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import Destination, Responder
from bridge.store.memory import MemoryStore

PROMPT = "Ask me how detailed the release notes should be, then write them."


async def main(claude_code: Callable[[ClaudeAgentOptions], Transport | None]) -> None:
    store, poster = MemoryStore(), MemoryPoster()  # RedisStore and the Slack poster in production
    handler = ChatHandler(
        poster, store, Destination(platform="memory", channel="C1"), AskPolicy(mode="defer")
    )
    options = ClaudeAgentOptions(hooks=defer_hooks(handler))

    first_run = query(prompt=PROMPT, options=options, transport=claude_code(options))
    stopped = [m async for m in first_run]
    result = stopped[-1]
    assert isinstance(result, ResultMessage) and result.stop_reason == "tool_deferred"
    teammate = asyncio.create_task(teammate_answers(store, poster))  # the question waits in chat

    async for delivery in store.feed("release-notes-agent"):
        resumed = resume_options(options, result, delivery)  # the same session, answered
        async with ClaudeSDKClient(resumed, transport=claude_code(resumed)) as claude:
            async for message in claude.receive_response():
                if isinstance(message, ResultMessage):
                    print(message.result)
        await store.ack(delivery)
        break
    await teammate


# -- the scripted Claude Code and teammate, so the example runs offline -------------------------


QUESTION = {
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
            self.finish(None, stop_reason="tool_deferred", deferred_tool_use=tool_use)
        elif decision.get("permissionDecision") == "allow":
            [answer] = decision["updatedInput"]["answers"].values()
            self.finish(f"Writing them as: {answer}")
        else:
            self.finish(f"Not asked: {decision.get('permissionDecisionReason')}")

    def finish(self, text: str | None, **result: Any) -> None:
        if text is not None:
            self.emit("assistant", message=self.said({"type": "text", "text": text}))
        self.emit(
            "result", subtype="success", duration_ms=1, duration_api_ms=1, is_error=False,
            num_turns=1, result=text, **result,
        )  # fmt: skip


async def teammate_answers(store: MemoryStore, poster: MemoryPoster) -> None:
    """Clicks "Full" on the posted question, as the Slack or Discord app would submit it."""
    posted = await poster.next_post()
    question = posted.questions.questions[0].question
    await store.submit(
        posted.id, Responder(user_id="U1"), [Answer(question=question, selected=("Full",))]
    )


if __name__ == "__main__":
    live = "--live" in sys.argv[1:]
    asyncio.run(main((lambda options: None) if live else ScriptedClaudeCode()))
