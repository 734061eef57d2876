"""The Claude Agent SDK adapter as its users run it: the SDK drives the real Claude Code CLI (the
one the ``claude-agent-sdk`` wheel bundles), which talks Anthropic Messages (streamed) to the
scripted model on loopback, and a teammate answers in Slack by a signed click through ``serve``.

The CLI is another process, outside the suite's loopback guard, so it is fenced: every proxy
variable points at a :class:`~model_server.RefusingProxy` (``NO_PROXY`` exempts loopback, where
the model server is), its telemetry, error reporting, auto-update and other nonessential traffic
are switched off, and each run ends by checking the proxy was asked for nothing.
"""

from __future__ import annotations

import asyncio
import platform
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    Message,
    ResultMessage,
    query,
)
from claude_agent_sdk.types import HookEvent

from bridge import Answer, AskUserDeferred, Question, QuestionSet
from bridge.asking import AskPolicy
from bridge.frameworks.claude_agent_sdk import (
    AskUserQuestionHook,
    answers_input,
    ask_ids,
    can_use_tool,
    defer_hooks,
    resume_options,
)
from bridge.record import AskRecord, AskStatus, Destination
from tests.support.model_server import Body, ModelServer, RefusingProxy, Reply, ToolCall, Turn, says
from tests.support.redis_server import RedisServer
from tests.support.slack.agent_rig import Rig

CLI = (
    Path(claude_agent_sdk.__file__).parent
    / "_bundled"
    / ("claude.exe" if platform.system() == "Windows" else "claude")
)
MUST_RUN = platform.system() == "Linux" and platform.machine() == "x86_64"
"""Where the wheel bundles the CLI (CI's platform): a missing CLI there is a failure."""

pytestmark = pytest.mark.skipif(
    not CLI.is_file() and not MUST_RUN,
    reason=f"this platform's claude-agent-sdk wheel bundles no Claude Code CLI ({CLI} is missing)",
)


@pytest.fixture(scope="module")
def rig(redis_srv: RedisServer) -> Iterator[Rig]:
    r = Rig(redis_srv.url)
    yield r
    r.close()


@dataclass
class ClaudeCode:
    """One scripted model, one fence and one home for the CLI: what a test's runs share (a
    resumed session is found in the same home, under the same working directory)."""

    server: ModelServer
    proxy: RefusingProxy
    home: Path

    def options(self, **settings: Any) -> ClaudeAgentOptions:
        env = {
            "ANTHROPIC_BASE_URL": self.server.anthropic_base_url,
            "ANTHROPIC_API_KEY": "offline",
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",  # a refused request fails the run now, not in minutes
            **self.proxy.env(),
        }
        return ClaudeAgentOptions(cli_path=CLI, cwd=self.home, env=env, **settings)

    def request(self, index: int) -> Body:
        return self.server.requests[index].body


@asynccontextmanager
async def claude_code(script: Sequence[Turn], home: Path) -> AsyncIterator[ClaudeCode]:
    """The scripted model and the fence; on leaving, the proxy must have been asked for nothing
    (and the model server must have answered every request from the script)."""
    assert CLI.is_file(), f"the claude-agent-sdk wheel bundles no Claude Code CLI: {CLI} is missing"
    async with RefusingProxy() as proxy:
        try:
            async with ModelServer(script) as server:
                yield ClaudeCode(server, proxy, home)
        except BaseException as failed:
            if proxy.destinations:
                failed.add_note(f"Claude Code tried to leave loopback: {proxy.destinations}")
            raise
    assert not proxy.destinations, f"Claude Code tried to leave loopback: {proxy.destinations}"


async def run(options: ClaudeAgentOptions) -> list[Message]:
    """One query() run to its end. A plain string prompt does with hooks and can_use_tool too:
    the SDK keeps the CLI's stdin open until the run's result."""
    return [m async for m in query(prompt="Plan the service.", options=options)]


def question(marker: str) -> dict[str, Any]:
    return {
        "questions": [
            {
                "question": f"Which database for {marker}?",
                "header": "Database",
                "options": [
                    {"label": "Postgres", "description": "Relational"},
                    {"label": "SQLite", "description": "One file"},
                ],
                "multiSelect": False,
            }
        ]
    }


def asks(marker: str, call_id: str = "toolu_ask") -> Reply:
    return Reply(tool_calls=[ToolCall(question(marker), name="AskUserQuestion", call_id=call_id)])


def tool_result_block(body: Body) -> dict[str, Any]:
    """The one ``tool_result`` block of the request's last message, as Claude Code sent it but
    for its ``cache_control`` (a prompt-caching mark on whichever block comes last)."""
    last = body["messages"][-1]
    assert last["role"] == "user"
    [block] = [b for b in last["content"] if b.get("type") == "tool_result"]
    return {k: v for k, v in block.items() if k != "cache_control"}


def tool_named(body: Body, name: str) -> dict[str, Any]:
    [tool] = [t for t in body["tools"] if t.get("name") == name]
    return dict(tool)


def answered_text(marker: str, label: str) -> str:
    """What Claude Code tells the model for an ``AskUserQuestion`` allowed with its answers."""
    return (
        f'Your questions have been answered: "Which database for {marker}?"="{label}". '
        "You can now continue with these answers in mind."
    )


def posts_of(rig: Rig, marker: str) -> int:
    return len([a for a in rig.fake.ok_calls("chat.postMessage") if marker in a["text"]])


async def test_the_fence_refuses_and_names_each_destination() -> None:
    """What makes each run's "asked for nothing" check mean something: a tunnel or a plain
    request through the proxy is refused, and the proxy names where it was going."""
    async with RefusingProxy() as proxy:
        port = int(proxy.url.rpartition(":")[2])
        for request_line in ("CONNECT api.example.com:443", "GET http://example.com/v1/x"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"{request_line} HTTP/1.1\r\nHost: example.com\r\n\r\n".encode())
            assert await reader.readline() == b"HTTP/1.1 403 Forbidden\r\n"
            writer.close()
            await writer.wait_closed()
    assert proxy.destinations == ["CONNECT api.example.com:443", "GET http://example.com/v1/x"]
    assert proxy.env()["HTTPS_PROXY"] == proxy.env()["https_proxy"] == proxy.url
    assert proxy.env()["NO_PROXY"] == "127.0.0.1,localhost"


async def test_ask_user_question_answered_in_slack(rig: Rig, tmp_path: Path) -> None:
    """can_use_tool(ChatHandler): Claude Code sends each AskUserQuestion call to the SDK's
    callback and the question goes to Slack. The teammate clicks "SQLite" on the first, and the
    model's next request carries Claude Code's answered tool result; they type their own words
    into the second, and Claude Code words that result as such."""
    clicked, typed = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    script = [asks(clicked), asks(typed, call_id="toolu_typed"), says("SQLite, on the NAS.")]
    async with claude_code(script, tmp_path) as claude:
        answers = [rig.answer(clicked, 1), rig.type_answer(typed, "whatever runs on the NAS")]
        messages = await run(claude.options(can_use_tool=can_use_tool(rig.handler())))
    for answer in answers:
        answer.result(10)
    done = messages[-1]
    assert isinstance(done, ResultMessage)
    assert (done.stop_reason, done.result, done.permission_denials) == (
        "end_turn",
        "SQLite, on the NAS.",
        [],
    )
    assert len(claude.server.requests) == 3
    assert tool_result_block(claude.request(1)) == {
        "type": "tool_result",
        "tool_use_id": "toolu_ask",
        "content": answered_text(clicked, "SQLite"),
    }
    assert tool_result_block(claude.request(2)) == {
        "type": "tool_result",
        "tool_use_id": "toolu_typed",
        "content": f'The user answered: "Which database for {typed}?"="whatever runs on the '
        'NAS". Read the answers carefully — they may request clarification, changes, or that '
        "you not proceed — and follow what they actually say.",
    }
    shown = rig.shown_answered(clicked)  # the message's blocks, as JSON text
    assert "Answered by <@U0MATE>" in shown and "*SQLite*" in shown and "*Postgres*" not in shown


async def test_ask_user_question_definition_and_calls_out_of_bounds(
    rig: Rig, tmp_path: Path
) -> None:
    """The AskUserQuestion definition Claude Code sends states the ask_user limits: 1-4
    questions and 2-4 options as schema bounds, but the 12-character header only in words. So
    a longer header reaches the bridge, which refuses it with the fix (the model reads it as an
    error result); five options never get past Claude Code's own validation. Nothing is posted."""
    marker = uuid.uuid4().hex[:8]
    long_header = question(marker)
    long_header["questions"][0]["header"] = "Database engine"
    five_options = question(marker)
    five_options["questions"][0]["options"] += [
        {"label": label, "description": "Another one"} for label in ("MySQL", "Redis", "DuckDB")
    ]
    script = [
        Reply(tool_calls=[ToolCall(long_header, name="AskUserQuestion", call_id="toolu_long")]),
        Reply(tool_calls=[ToolCall(five_options, name="AskUserQuestion", call_id="toolu_five")]),
        says("I will decide myself."),
    ]
    async with claude_code(script, tmp_path) as claude:
        await run(claude.options(can_use_tool=can_use_tool(rig.handler())))

    schema = tool_named(claude.request(0), "AskUserQuestion")["input_schema"]
    questions = schema["properties"]["questions"]
    item = questions["items"]
    options = item["properties"]["options"]
    header = item["properties"]["header"]
    assert (questions["minItems"], questions["maxItems"]) == (1, 4)
    assert (options["minItems"], options["maxItems"]) == (2, 4)
    assert "maxLength" not in header and "(max 12 chars)" in header["description"]
    assert item["required"] == ["question", "header", "options", "multiSelect"]
    assert options["items"]["required"] == ["label", "description"]

    assert tool_result_block(claude.request(1)) == {
        "type": "tool_result",
        "tool_use_id": "toolu_long",
        "is_error": True,
        "content": "The ask_user call was rejected: 1 problem to fix before calling it again.\n"
        "- questions[0].header 'Database engine' is 15 characters long: use at most 12 "
        "characters (a one or two word label such as 'Format')",
    }
    refused = tool_result_block(claude.request(2))
    assert (refused["tool_use_id"], refused["is_error"]) == ("toolu_five", True)
    assert refused["content"].startswith("<tool_use_error>InputValidationError: ")
    assert '"questions",\n      0,\n      "options"' in refused["content"]
    assert "Too big: expected array to have <=4 items" in refused["content"]
    assert posts_of(rig, marker) == 0


async def test_nobody_answered_is_a_denial_the_model_reads(rig: Rig, tmp_path: Path) -> None:
    """AskPolicy(wait=1, on_timeout="error"): nobody clicks, the ask closes as expired (shown so
    in Slack), and the model reads the handler's words as an error tool result."""
    marker = uuid.uuid4().hex[:8]
    handler = rig.handler(AskPolicy(wait=1, on_timeout="error"))
    async with claude_code([asks(marker), says("Carrying on.")], tmp_path) as claude:
        messages = await run(claude.options(can_use_tool=can_use_tool(handler)))
    done = messages[-1]
    assert isinstance(done, ResultMessage)
    assert done.permission_denials == [
        {"tool_name": "AskUserQuestion", "tool_use_id": "toolu_ask", "tool_input": question(marker)}
    ]
    assert tool_result_block(claude.request(1)) == {
        "type": "tool_result",
        "tool_use_id": "toolu_ask",
        "is_error": True,
        "content": "nobody answered within 1 second; the questions are closed. Continue without "
        "the answers, or ask again later if you must.",
    }
    assert "Expired without an answer" in rig.shown_answered(marker)


async def test_deferred_then_resumed_from_the_answers_feed(rig: Rig, tmp_path: Path) -> None:
    """defer_hooks(ChatHandler in defer mode): the hook answers "defer", so the run stops with
    the call in deferred_tool_use and the model sees nothing yet; the teammate answers later in
    Slack; the feed delivers; resume_options resumes the same session, Claude Code replays the
    call to the hook, which allows it with the answers -- asked once, posted once."""
    marker = uuid.uuid4().hex[:8]
    deferring_handler, waiting_handler = rig.handler(AskPolicy(mode="defer")), rig.handler()
    store = rig.store()
    async with claude_code([asks(marker), says("SQLite it is.")], tmp_path) as claude:
        options = claude.options(
            hooks=defer_hooks(deferring_handler), can_use_tool=can_use_tool(waiting_handler)
        )
        stopped = (await run(options))[-1]
        assert isinstance(stopped, ResultMessage)
        assert (stopped.stop_reason, stopped.result) == ("tool_deferred", "")
        assert stopped.deferred_tool_use is not None
        assert stopped.deferred_tool_use.id == "toolu_ask"
        assert stopped.deferred_tool_use.input == question(marker)
        assert len(claude.server.requests) == 1  # the model has not been told anything
        ask_id = rig.posted(marker).ask_id
        assert ask_ids(options, stopped) == {ask_id: "toolu_ask"}

        rig.answer(marker, 1).result(30)
        feed = store.feed("claude-agent-host")
        delivery = await asyncio.wait_for(anext(feed), 30)
        assert delivery.record.id == ask_id

        resumed = resume_options(options, stopped, delivery)
        async with ClaudeSDKClient(resumed) as client:
            messages = [m async for m in client.receive_response()]
        await store.ack(delivery)
        await feed.aclose()  # type: ignore[attr-defined]
    done = messages[-1]
    assert isinstance(done, ResultMessage)
    assert (done.session_id, done.stop_reason, done.result) == (
        stopped.session_id,
        "end_turn",
        "SQLite it is.",
    )
    assert claude.request(1)["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_ask",
                "content": answered_text(marker, "SQLite"),
            },
            {
                "type": "text",
                "text": "Continue from where you left off.",
                "cache_control": {"type": "ephemeral"},
            },
        ],
    }
    assert posts_of(rig, marker) == 1


def bash(marker: str) -> Reply:
    """A Bash call Claude Code asks permission for (it writes a file; a bare ``echo`` it runs
    unasked)."""
    command = {"command": f"echo {marker} | tee {marker}.txt", "description": "Note a word"}
    return Reply(tool_calls=[ToolCall(command, name="Bash", call_id=f"toolu_{marker}")])


async def test_permission_prompts_for_bash_answered_in_slack(rig: Rig, tmp_path: Path) -> None:
    """Claude Code's permission prompts for another tool go through the same handler as an
    Allow / Deny question in Slack: "Allow" runs the command (its output is the tool result),
    "Deny" refuses it and the model reads why."""
    allowed, denied = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    async with claude_code([bash(allowed), bash(denied), says("Done.")], tmp_path) as claude:
        clicks = [rig.answer(allowed, 0), rig.answer(denied, 1)]
        await run(claude.options(can_use_tool=can_use_tool(rig.handler())))
    for click in clicks:
        click.result(10)
    shown = rig.posted(allowed).text
    assert "Claude wants to use the tool Bash with this input:" in shown
    assert f'"command": "echo {allowed} | tee {allowed}.txt"' in shown
    assert tool_result_block(claude.request(1)) == {
        "type": "tool_result",
        "tool_use_id": f"toolu_{allowed}",
        "is_error": False,
        "content": allowed,
    }
    assert tool_result_block(claude.request(2)) == {
        "type": "tool_result",
        "tool_use_id": f"toolu_{denied}",
        "is_error": True,
        "content": "The person denied permission to use Bash.",
    }
    assert (tmp_path / f"{allowed}.txt").read_text() == f"{allowed}\n"
    assert not (tmp_path / f"{denied}.txt").exists()


def answered_record(marker: str, ask_id: str) -> AskRecord:
    """The ask ``ask_id`` of ``question(marker)``, answered "SQLite", as the feed delivers it."""
    return AskRecord(
        id=ask_id,
        questions=QuestionSet.model_validate(question(marker)),
        destination=Destination(platform="slack", channel="C0AGENTS"),
        expires_at=time.time() + 60,
        status=AskStatus.ANSWERED,
        deferred=True,
        answers=(Answer(question=f"Which database for {marker}?", selected=("SQLite",)),),
    )


def deferring(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
    return AskUserDeferred(extra={"ask_id": "ask-kept"})


async def test_hooks_alone_offer_no_ask_user_question(tmp_path: Path) -> None:
    """Claude Code offers the model AskUserQuestion only when its permission prompts go to the
    SDK (``can_use_tool`` set): with ``defer_hooks`` alone the model is never given the tool, so
    the deferral needs both."""
    async with claude_code([says("Nothing to ask."), says("Nothing to ask.")], tmp_path) as claude:
        await run(claude.options(hooks=defer_hooks(deferring)))
        await run(
            claude.options(hooks=defer_hooks(deferring), can_use_tool=can_use_tool(deferring))
        )
    without, with_callback = ({tool["name"] for tool in claude.request(n)["tools"]} for n in (0, 1))
    assert "AskUserQuestion" not in without
    assert "AskUserQuestion" in with_callback


async def test_resuming_with_query_and_no_prompt_loses_the_answers(tmp_path: Path) -> None:
    """Why the module says to resume with ClaudeSDKClient: query() with an empty prompt stream
    closes the CLI's stdin at once, so the hook cannot answer the replayed call and Claude Code
    refuses it -- as the user's "no" when it notices first; when its hook request wins the race,
    the SDK finds stdin closed and cannot send the hook's answer. Either way the model never
    reads the answers."""
    answered = answered_record("resume", "ask-kept")

    async def nothing() -> AsyncIterator[dict[str, Any]]:
        return
        yield

    async with claude_code([asks("resume"), says("Stopping.")], tmp_path) as claude:
        options = claude.options(hooks=defer_hooks(deferring), can_use_tool=can_use_tool(deferring))
        stopped = (await run(options))[-1]
        assert isinstance(stopped, ResultMessage) and stopped.stop_reason == "tool_deferred"
        resumed = resume_options(options, stopped, answered)
        done = [m async for m in query(prompt=nothing(), options=resumed)][-1]
    assert isinstance(done, ResultMessage) and done.session_id == stopped.session_id
    refused = tool_result_block(claude.request(1))
    assert refused["is_error"] is True, refused
    assert refused["content"] != answered_text("resume", "SQLite"), refused


def ask_call(marker: str) -> ToolCall:
    return ToolCall(question(marker), name="AskUserQuestion", call_id=f"toolu_{marker}")


def the_hook(options: ClaudeAgentOptions) -> AskUserQuestionHook:
    assert options.hooks is not None
    [matcher] = options.hooks["PreToolUse"]
    [hook] = matcher.hooks
    assert isinstance(hook, AskUserQuestionHook)
    return hook


def calls_made(body: Body) -> list[str]:
    """The ids of the tool calls the request's conversation holds, in order."""
    return [
        block["id"]
        for message in body["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


def tool_results(body: Body) -> list[dict[str, Any]]:
    """The request's last message's ``tool_result`` blocks, as :func:`tool_result_block` shows
    one."""
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [
        {k: v for k, v in block.items() if k != "cache_control"}
        for block in last["content"]
        if block.get("type") == "tool_result"
    ]


REFUSED_SECOND_CALL = (
    "PreToolUse:AskUserQuestion hook error: These questions were not asked: an earlier "
    "AskUserQuestion call in this turn is already waiting for the person's answers, and only one "
    "call a turn can wait. Nobody saw these questions. Put all your questions in one "
    "AskUserQuestion call (up to 4), with no other tool call in the same turn; if you still need "
    "these answers, ask them again that way."
)
"""What the model reads for a second ``AskUserQuestion`` call of a turn whose first deferred:
Claude Code's prefix for a hook's denial, then the hook's words."""


def refused(call_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "is_error": True,
        "content": REFUSED_SECOND_CALL,
    }


def answered(marker: str, label: str = "SQLite") -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": f"toolu_{marker}",
        "content": answered_text(marker, label),
    }


async def test_claude_code_keeps_only_the_last_deferred_call_of_a_turn(tmp_path: Path) -> None:
    """Why defer_hooks refuses a second AskUserQuestion call in a turn (this is a bare hook, not
    the adapter's): when a turn holds two and the hook defers both, Claude Code runs the hook for
    each but stops on the one deferred last alone (here the second: this hook answers at once),
    and the resumed session holds that call only -- the first, had it been asked, would have no
    call left for its answer to go to."""
    seen: list[tuple[str | None, str]] = []

    async def defer_then_answer(
        hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        assert hook_input["hook_event_name"] == "PreToolUse"
        seen.append((tool_use_id, hook_input["session_id"]))
        if len(seen) <= 2:  # the first run: both calls
            decision: dict[str, Any] = {"permissionDecision": "defer"}
        else:
            answer = Answer(question="Which database for second?", selected=("SQLite",))
            updated = answers_input(hook_input["tool_input"], [answer])
            decision = {"permissionDecision": "allow", "updatedInput": updated}
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **decision}}  # type: ignore[typeddict-item]

    script = [Reply(tool_calls=[ask_call("first"), ask_call("second")]), says("Done.")]
    async with claude_code(script, tmp_path) as claude:
        hooks: dict[HookEvent, list[HookMatcher]] = {
            "PreToolUse": [HookMatcher(matcher="AskUserQuestion", hooks=[defer_then_answer])]
        }
        options = claude.options(hooks=hooks, can_use_tool=can_use_tool(deferring))
        stopped = (await run(options))[-1]
        assert isinstance(stopped, ResultMessage) and stopped.stop_reason == "tool_deferred"
        assert stopped.deferred_tool_use is not None
        assert stopped.deferred_tool_use.id == "toolu_second"
        async with ClaudeSDKClient(replace(options, resume=stopped.session_id)) as client:
            done = [m async for m in client.receive_response()][-1]
    assert isinstance(done, ResultMessage) and done.result == "Done."
    session = stopped.session_id
    assert seen == [("toolu_first", session), ("toolu_second", session), ("toolu_second", session)]
    assert calls_made(claude.request(1)) == ["toolu_second"]
    assert tool_results(claude.request(1)) == [answered("second")]


async def test_a_second_question_call_in_one_turn_is_refused_unasked(
    rig: Rig, tmp_path: Path
) -> None:
    """defer_hooks(ChatHandler in defer mode), and a turn with two AskUserQuestion calls: the
    first is posted in Slack and deferred; the second is refused without asking anyone (nothing
    posted), so the run stops on the first. The teammate answers it, the feed resumes the
    session, and the model reads both: the answer, and the refusal telling it to put every
    question in one call. Only questions whose answers reach the model were asked."""
    first, second = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    deferring_handler, waiting_handler = rig.handler(AskPolicy(mode="defer")), rig.handler()
    store = rig.store()
    script = [Reply(tool_calls=[ask_call(first), ask_call(second)]), says("SQLite it is.")]
    async with claude_code(script, tmp_path) as claude:
        options = claude.options(
            hooks=defer_hooks(deferring_handler), can_use_tool=can_use_tool(waiting_handler)
        )
        stopped = (await run(options))[-1]
        assert isinstance(stopped, ResultMessage) and stopped.stop_reason == "tool_deferred"
        assert stopped.deferred_tool_use is not None
        assert stopped.deferred_tool_use.id == f"toolu_{first}"
        assert stopped.permission_denials == [
            {
                "tool_name": "AskUserQuestion",
                "tool_use_id": f"toolu_{second}",
                "tool_input": question(second),
            }
        ]
        ask_id = rig.posted(first).ask_id
        assert ask_ids(options, stopped) == {ask_id: f"toolu_{first}"}

        rig.answer(first, 1).result(30)
        feed = store.feed("claude-agent-host")
        delivery = await asyncio.wait_for(anext(feed), 30)
        assert delivery.record.id == ask_id
        async with ClaudeSDKClient(resume_options(options, stopped, delivery)) as client:
            done = [m async for m in client.receive_response()][-1]
        await store.ack(delivery)
        await feed.aclose()  # type: ignore[attr-defined]
    assert isinstance(done, ResultMessage) and done.result == "SQLite it is."
    assert len(claude.server.requests) == 2
    assert calls_made(claude.request(1)) == [f"toolu_{first}", f"toolu_{second}"]
    assert tool_results(claude.request(1)) == [refused(f"toolu_{second}"), answered(first)]
    assert (posts_of(rig, first), posts_of(rig, second)) == (1, 0)


async def test_a_turns_question_calls_are_decided_one_after_the_other(tmp_path: Path) -> None:
    """Three AskUserQuestion calls in one turn reach the hook at once, the first still being
    asked (its handler is slow) when the others come: they wait for its decision, and as it
    deferred, both are refused unasked. The run stops on the first; resumed with its answer, the
    model reads the answer and both refusals."""
    asked: list[str] = []

    async def slow_to_defer(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
        asked.append(questions[0].question)
        await asyncio.sleep(1)
        return AskUserDeferred(extra={"ask_id": f"ask-{len(asked)}"})

    turn = Reply(tool_calls=[ask_call("one"), ask_call("two"), ask_call("three")])
    async with claude_code([turn, says("Done.")], tmp_path) as claude:
        options = claude.options(
            hooks=defer_hooks(slow_to_defer), can_use_tool=can_use_tool(slow_to_defer)
        )
        stopped = (await run(options))[-1]
        assert isinstance(stopped, ResultMessage) and stopped.stop_reason == "tool_deferred"
        assert stopped.deferred_tool_use is not None
        assert stopped.deferred_tool_use.id == "toolu_one"
        assert ask_ids(options, stopped) == {"ask-1": "toolu_one"}

        resumed = resume_options(options, stopped, answered_record("one", "ask-1"))
        async with ClaudeSDKClient(resumed) as client:
            done = [m async for m in client.receive_response()][-1]
    assert isinstance(done, ResultMessage) and done.result == "Done."
    assert asked == ["Which database for one?"]
    assert calls_made(claude.request(1)) == ["toolu_one", "toolu_two", "toolu_three"]
    assert tool_results(claude.request(1)) == [
        refused("toolu_two"),
        refused("toolu_three"),
        answered("one"),
    ]


async def test_after_a_resume_a_deferral_beside_another_call_loses_its_answer(
    tmp_path: Path,
) -> None:
    """A Claude Code 2.1.332 limit the docs state (why the refusal asks for one call, alone in
    its turn): in a session resumed from disk, a deferred call beside another call of its turn --
    here a second AskUserQuestion the hook refused -- does not come back. The next resume
    replays it and the hook allows it with the answers, but Claude Code has already closed it as
    "[Tool result missing due to internal error]" and added a reply of its own, so the model
    never reads the answers. (A deferral alone in its turn comes back: the first one here.)"""
    asked: list[str] = []

    def deferring_each(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
        asked.append(questions[0].question)
        return AskUserDeferred(extra={"ask_id": f"ask-{len(asked)}"})

    script = [
        Reply(tool_calls=[ask_call("one")]),
        Reply(tool_calls=[ask_call("four"), ask_call("five")]),
        says("Done."),
    ]
    async with claude_code(script, tmp_path) as claude:
        options = claude.options(
            hooks=defer_hooks(deferring_each), can_use_tool=can_use_tool(deferring_each)
        )
        stopped = (await run(options))[-1]
        assert isinstance(stopped, ResultMessage) and stopped.stop_reason == "tool_deferred"
        resumed = resume_options(options, stopped, answered_record("one", "ask-1"))
        async with ClaudeSDKClient(resumed) as client:
            again = [m async for m in client.receive_response()][-1]
        assert isinstance(again, ResultMessage) and again.stop_reason == "tool_deferred"
        assert again.deferred_tool_use is not None
        assert again.deferred_tool_use.id == "toolu_four"
        assert ask_ids(options, again) == {"ask-2": "toolu_four"}

        hook = the_hook(options)
        resumed = resume_options(options, again, answered_record("four", "ask-2"))
        assert "toolu_four" in hook.resumed
        async with ClaudeSDKClient(resumed) as client:
            done = [m async for m in client.receive_response()][-1]
        assert "toolu_four" not in hook.resumed  # replayed to the hook, and allowed
    assert isinstance(done, ResultMessage) and done.result == "Done."
    assert asked == ["Which database for one?", "Which database for four?"]
    assert tool_results(claude.request(1)) == [answered("one")]
    last = claude.request(2)["messages"]
    assert tool_results({"messages": last[:-2]}) == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_four",
            "is_error": True,
            "content": "[Tool result missing due to internal error]",
        },
        refused("toolu_five"),
    ]
    assert last[-2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "No response requested."}],
    }


async def test_a_deferred_question_beside_a_permission_prompt_loses_nothing(
    rig: Rig, tmp_path: Path
) -> None:
    """AskUserQuestion and Bash in one turn: the question is posted and deferred, the Bash
    permission prompt is asked in Slack through can_use_tool and allowed, the command runs, and
    the run stops on the question. Resumed with its answer, the model reads both results: a
    deferred question beside other tools is no second question, so nothing is refused."""
    marker, command = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    deferring_handler, waiting_handler = rig.handler(AskPolicy(mode="defer")), rig.handler()
    store = rig.store()
    [run_bash] = bash(command).tool_calls
    script = [Reply(tool_calls=[ask_call(marker), run_bash]), says("SQLite it is.")]
    async with claude_code(script, tmp_path) as claude:
        allowed = rig.answer(command, 0)
        options = claude.options(
            hooks=defer_hooks(deferring_handler), can_use_tool=can_use_tool(waiting_handler)
        )
        stopped = (await run(options))[-1]
        allowed.result(10)
        assert isinstance(stopped, ResultMessage) and stopped.stop_reason == "tool_deferred"
        assert stopped.deferred_tool_use is not None
        assert stopped.deferred_tool_use.id == f"toolu_{marker}"
        assert stopped.permission_denials == []

        rig.answer(marker, 1).result(30)
        feed = store.feed("claude-agent-host")
        delivery = await asyncio.wait_for(anext(feed), 30)
        async with ClaudeSDKClient(resume_options(options, stopped, delivery)) as client:
            done = [m async for m in client.receive_response()][-1]
        await store.ack(delivery)
        await feed.aclose()  # type: ignore[attr-defined]
    assert isinstance(done, ResultMessage) and done.result == "SQLite it is."
    assert calls_made(claude.request(1)) == [f"toolu_{marker}", f"toolu_{command}"]
    ran = {"type": "tool_result", "tool_use_id": f"toolu_{command}", "is_error": False}
    assert tool_results(claude.request(1)) == [{**ran, "content": command}, answered(marker)]
    assert (tmp_path / f"{command}.txt").read_text() == f"{command}\n"
    assert (posts_of(rig, marker), posts_of(rig, command)) == (1, 1)
