"""The ``ask_user`` tool: its definition, the handler chain, callbacks of every kind, errors."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

import bridge
from bridge import (
    Answer,
    AskUserDeferred,
    AskUserTool,
    Question,
    QuestionSet,
    Tool,
    ToolOutcome,
    ToolRejected,
    set_ask_user_callback,
    tool_ask_user,
    tools_interactive,
)
from tests.support.samples import FORMAT, SECTIONS
from tests.support.samples import FORMAT_AND_SECTIONS as QUESTIONS


@pytest.fixture(autouse=True)
def no_global_handler_and_no_tty(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no global callback and a non-TTY stdin (so no terminal fallback)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO())
    previous = set_ask_user_callback(None)
    yield
    set_ask_user_callback(previous)


def answers_of(content: str | dict[str, Any]) -> list[dict[str, Any]]:
    assert isinstance(content, str)
    answers: list[dict[str, Any]] = json.loads(content)["answers"]
    return answers


def selected(content: str | dict[str, Any]) -> list[list[str]]:
    return [a["selected"] for a in answers_of(content)]


# -- the definition -------------------------------------------------------------------------------


def test_public_names() -> None:
    assert Tool is AskUserTool
    assert isinstance(tool_ask_user, AskUserTool)
    for name in bridge.__all__:
        assert hasattr(bridge, name)
    assert tool_ask_user.name == "ask_user"
    text = tool_ask_user.description
    for part in ("1 to 4", "at most 12 characters", "2 to 4", "multiSelect", "deferred"):
        assert part in text


def test_annotations_are_read_only_not_destructive_not_open_world() -> None:
    ann = tool_ask_user.annotations
    assert ann.as_dict() == {
        "title": "Ask the user",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    with pytest.raises(AttributeError):
        ann.readOnlyHint = False  # type: ignore[misc]


def test_parameters_schema_is_self_contained_and_a_fresh_copy() -> None:
    schema = tool_ask_user.parameters
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft7Validator.check_schema(schema)
    assert "$ref" not in json.dumps(schema) and "$defs" not in json.dumps(schema)
    assert schema["required"] == ["questions"]
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == ["questions"]
    questions = schema["properties"]["questions"]
    assert (questions["type"], questions["minItems"], questions["maxItems"]) == ("array", 1, 4)
    schema["properties"].clear()
    assert tool_ask_user.parameters["properties"]["questions"] == questions


def test_parameters_schema_accepts_good_arguments() -> None:
    validator = jsonschema.Draft202012Validator(tool_ask_user.parameters)
    validator.validate({"questions": QUESTIONS})
    validator.validate({"questions": QUESTIONS[:1]})


def _with(**change: Any) -> dict[str, Any]:
    return {"questions": [{**QUESTIONS[0], **change}]}


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"questions": []},
        {"questions": [QUESTIONS[0]] * 5},
        {"questions": json.dumps(QUESTIONS)},
        {"questions": QUESTIONS, "extra": 1},
        _with(header="Far too long a header"),
        _with(header=""),
        _with(multiSelect="true"),
        _with(options=[{"label": "Only", "description": "one"}]),
        _with(options=[{"label": f"L{i}", "description": "d"} for i in range(5)]),
        _with(options=[{"label": "A"}, {"label": "B", "description": "b"}]),
        _with(
            options=[{"label": "A", "description": "a", "x": 1}, {"label": "B", "description": "b"}]
        ),
        _with(id=3),
        {"questions": [{k: v for k, v in QUESTIONS[0].items() if k != "question"}]},
    ],
)
def test_parameters_schema_rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(tool_ask_user.parameters)
    assert not validator.is_valid(arguments)
    # ...and the tool itself rejects them too (the schema is a guide, the tool the judge).
    if "questions" in arguments and "extra" not in arguments:
        with pytest.raises(ToolRejected):
            tools_interactive(lambda qs, ctx: {})[0](arguments["questions"])


# -- the handler chain ----------------------------------------------------------------------------


def test_no_handler_and_no_tty_is_a_tool_rejected_saying_how_to_configure() -> None:
    with pytest.raises(ToolRejected) as info:
        tool_ask_user(QUESTIONS)
    message = info.value.message
    assert message.startswith("could not get the person's answer: ")
    assert "set_ask_user_callback(callback)" in message
    assert "tools_interactive(callback=...)" in message


def test_validation_comes_before_the_handler() -> None:
    with pytest.raises(ToolRejected) as info:
        tool_ask_user("[]")
    assert "not a string" in info.value.message


def test_a_huge_malformed_call_gets_a_bounded_message() -> None:
    (tool,) = tools_interactive(lambda qs, ctx: {})
    with pytest.raises(ToolRejected) as info:
        tool([1] * 100_000)
    assert len(info.value.message) < 2_000


def test_global_callback_is_used_and_set_returns_the_previous() -> None:
    def first(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        return {FORMAT: "Summary"}

    def second(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        return {FORMAT: "Detailed"}

    assert set_ask_user_callback(first) is None
    assert selected(tool_ask_user(QUESTIONS)) == [["Summary"], []]
    assert set_ask_user_callback(second) is first
    assert selected(tool_ask_user(QUESTIONS)) == [["Detailed"], []]
    assert bridge.get_ask_user_callback() is second
    assert set_ask_user_callback(None) is second
    with pytest.raises(ToolRejected):
        tool_ask_user(QUESTIONS)


@pytest.mark.parametrize("bad", ["callback", 3, object()])
def test_set_callback_rejects_non_callables(bad: object) -> None:
    with pytest.raises(TypeError):
        set_ask_user_callback(bad)  # type: ignore[arg-type]
    assert bridge.get_ask_user_callback() is None
    with pytest.raises(TypeError):
        tools_interactive(bad)  # type: ignore[arg-type]


def test_own_callback_beats_the_global_one() -> None:
    set_ask_user_callback(lambda qs, ctx: {FORMAT: "Summary"})
    (own,) = tools_interactive(lambda qs, ctx: {FORMAT: "Detailed"})
    assert selected(own(QUESTIONS)) == [["Detailed"], []]
    assert selected(tool_ask_user(QUESTIONS)) == [["Summary"], []]
    # A tools_interactive tool without a callback follows the global chain.
    (chained,) = tools_interactive()
    assert selected(chained(QUESTIONS)) == [["Summary"], []]


def test_tools_interactive_returns_a_fresh_list_each_time() -> None:
    a, b = tools_interactive(), tools_interactive()
    assert a is not b and a[0] is not b[0]
    assert [t.name for t in a] == ["ask_user"]


# -- callbacks of every kind -----------------------------------------------------------------------


def test_callback_receives_question_models_and_the_context() -> None:
    seen: list[Any] = []

    def callback(qs: list[Question], ctx: dict[str, Any]) -> list[Answer]:
        seen.append((qs, ctx))
        return [Answer(question=SECTIONS, selected=("Body", "Intro"))]

    (tool,) = tools_interactive(callback, context={"channel": "C1"})
    assert selected(tool(QUESTIONS)) == [[], ["Intro", "Body"]]
    ((qs, ctx),) = seen
    assert isinstance(qs, list) and all(isinstance(x, Question) for x in qs)
    assert [x.question for x in qs] == [FORMAT, SECTIONS]
    assert ctx == {"channel": "C1"}


def test_context_is_a_fresh_dict_per_ask_and_a_callable_is_called_per_ask() -> None:
    calls = iter(range(100))
    contexts: list[dict[str, Any]] = []

    def callback(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        contexts.append(ctx)
        ctx["mutated"] = True
        return {}

    (tool,) = tools_interactive(callback, context=lambda: {"n": next(calls)})
    tool(QUESTIONS)
    tool(QUESTIONS)
    assert [c["n"] for c in contexts] == [0, 1]
    shared = {"team": "x"}
    (tool,) = tools_interactive(callback, context=shared)
    tool(QUESTIONS)
    assert shared == {"team": "x"}
    (tool,) = tools_interactive(callback)
    tool(QUESTIONS)
    assert contexts[-1] == {"mutated": True}


def test_context_callable_failing_is_a_tool_rejected() -> None:
    def broken() -> dict[str, Any]:
        raise LookupError("no current channel")

    (tool,) = tools_interactive(lambda qs, ctx: {}, context=broken)
    with pytest.raises(ToolRejected, match="could not get the person's answer: no current channel"):
        tool(QUESTIONS)
    (tool,) = tools_interactive(lambda qs, ctx: {}, context=lambda: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolRejected, match="returned int"):
        tool(QUESTIONS)


async def _async_answer(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {FORMAT: "Detailed", SECTIONS: ["Body", "more examples"]}


class AsyncCallable:
    async def __call__(self, qs: list[Question], ctx: dict[str, Any]) -> list[Answer]:
        return [Answer(question=FORMAT, other_text="tables")]


def _returns_coroutine(qs: list[Question], ctx: dict[str, Any]) -> Any:
    return _async_answer(qs, ctx)


EXPECTED_ASYNC = [
    {"question": FORMAT, "selected": ["Detailed"], "other_text": None},
    {"question": SECTIONS, "selected": ["Body"], "other_text": "more examples"},
]


@pytest.mark.parametrize("callback", [_async_answer, _returns_coroutine])
def test_async_and_awaitable_callbacks_from_sync_code(callback: Any) -> None:
    (tool,) = tools_interactive(callback)
    assert answers_of(tool(QUESTIONS)) == EXPECTED_ASYNC


@pytest.mark.parametrize("callback", [_async_answer, _returns_coroutine])
async def test_async_and_awaitable_callbacks_from_async_code(callback: Any) -> None:
    (tool,) = tools_interactive(callback)
    assert answers_of(await tool.acall(QUESTIONS)) == EXPECTED_ASYNC
    outcome = await tool.ainvoke(QUESTIONS)
    assert isinstance(outcome, ToolOutcome) and outcome.deferred is None
    assert outcome.answers is not None and outcome.answers[1].other_text == "more examples"


async def test_async_callable_object() -> None:
    (tool,) = tools_interactive(AsyncCallable())
    assert answers_of(await tool.acall(QUESTIONS))[0]["other_text"] == "tables"
    assert answers_of(tool(QUESTIONS))[0]["other_text"] == "tables"


async def test_sync_callback_from_async_code_runs_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    ran_in: list[int] = []

    def callback(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        ran_in.append(threading.get_ident())
        return {FORMAT: "Summary"}

    (tool,) = tools_interactive(callback)
    assert selected(await tool.acall(QUESTIONS)) == [["Summary"], []]
    assert ran_in and ran_in[0] != loop_thread


def test_sync_callback_from_sync_code_runs_in_the_calling_thread() -> None:
    ran_in: list[int] = []

    def callback(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        ran_in.append(threading.get_ident())
        return {}

    (tool,) = tools_interactive(callback)
    tool(QUESTIONS)
    assert ran_in == [threading.get_ident()]


async def test_sync_call_inside_a_running_loop() -> None:
    (sync_tool,) = tools_interactive(lambda qs, ctx: {FORMAT: "Summary"})
    (async_tool,) = tools_interactive(_async_answer)
    assert selected(sync_tool(QUESTIONS)) == [["Summary"], []]
    assert answers_of(async_tool(QUESTIONS)) == EXPECTED_ASYNC
    assert sync_tool.invoke(QUESTIONS).answers is not None
    with pytest.raises(ToolRejected, match="not a string"):
        sync_tool("[]")


async def test_sync_call_inside_a_loop_keeps_context_variables() -> None:
    channel: contextvars.ContextVar[str] = contextvars.ContextVar("channel")
    channel.set("C42")
    seen: list[dict[str, Any]] = []

    def callback(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        seen.append(ctx)
        return {}

    (tool,) = tools_interactive(callback, context=lambda: {"channel": channel.get()})
    tool(QUESTIONS)
    assert seen == [{"channel": "C42"}]


# -- deferral --------------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_deferred_content_and_extra_for_the_host(asynchronous: bool) -> None:
    deferred = AskUserDeferred(extra={"ask_id": "ask-secret-7", "link": "https://x/y"})

    async def async_defer(qs: list[Question], ctx: dict[str, Any]) -> AskUserDeferred:
        return deferred

    (tool,) = tools_interactive(async_defer if asynchronous else (lambda qs, ctx: deferred))
    content = await tool.acall(QUESTIONS)
    assert isinstance(content, dict)
    assert set(content) == {"questions", "status", "instructions"}
    assert content["status"] == "deferred"
    assert content["instructions"] == deferred.instructions
    assert content["questions"][0]["multiSelect"] is False
    assert "ask-secret-7" not in json.dumps(content) and "extra" not in json.dumps(content)
    outcome = await tool.ainvoke(QUESTIONS)
    assert outcome.answers is None and outcome.deferred is deferred
    assert outcome.deferred.extra == {"ask_id": "ask-secret-7", "link": "https://x/y"}
    assert tool.invoke(QUESTIONS).deferred is deferred
    assert tool(QUESTIONS) == content


def test_custom_deferred_instructions() -> None:
    (tool,) = tools_interactive(lambda qs, ctx: AskUserDeferred(instructions="Say you'll wait."))
    content = tool(QUESTIONS)
    assert isinstance(content, dict) and content["instructions"] == "Say you'll wait."


# -- errors ----------------------------------------------------------------------------------------


class Boom(Exception):
    pass


def _raises(qs: list[Question], ctx: dict[str, Any]) -> Any:
    raise Boom("the Slack API is down")


async def _raises_async(qs: list[Question], ctx: dict[str, Any]) -> Any:
    raise Boom("the Slack API is down")


@pytest.mark.parametrize("callback", [_raises, _raises_async])
async def test_a_raising_handler_becomes_a_tool_rejected(callback: Any) -> None:
    (tool,) = tools_interactive(callback)
    expected = "could not get the person's answer: the Slack API is down"
    with pytest.raises(ToolRejected) as info:
        await tool.acall(QUESTIONS)
    assert info.value.message == expected
    assert isinstance(info.value.__cause__, Boom)
    with pytest.raises(ToolRejected) as info:
        await asyncio.to_thread(tool, QUESTIONS)
    assert info.value.message == expected


def test_a_handler_error_without_text_names_its_type() -> None:
    def callback(qs: list[Question], ctx: dict[str, Any]) -> Any:
        raise TimeoutError

    (tool,) = tools_interactive(callback)
    with pytest.raises(ToolRejected, match="could not get the person's answer: TimeoutError"):
        tool(QUESTIONS)


def test_a_tool_rejected_from_the_handler_passes_through_unchanged() -> None:
    def callback(qs: list[Question], ctx: dict[str, Any]) -> Any:
        raise ToolRejected("nobody answered within 10 minutes")

    (tool,) = tools_interactive(callback)
    with pytest.raises(ToolRejected) as info:
        tool(QUESTIONS)
    assert info.value.message == "nobody answered within 10 minutes"


@pytest.mark.parametrize(
    "returned", [42, None, "Summary", {FORMAT: ["Summary", "Detailed"]}, {"Unasked?": "x"}]
)
def test_a_wrong_return_is_a_tool_rejected(returned: Any) -> None:
    (tool,) = tools_interactive(lambda qs, ctx: returned)
    with pytest.raises(ToolRejected, match=r"^could not get the person's answer: "):
        tool(QUESTIONS)


def test_keyboard_interrupt_propagates() -> None:
    def callback(qs: list[Question], ctx: dict[str, Any]) -> Any:
        raise KeyboardInterrupt

    async def async_callback(qs: list[Question], ctx: dict[str, Any]) -> Any:
        raise KeyboardInterrupt

    for cb in (callback, async_callback):
        (tool,) = tools_interactive(cb)
        with pytest.raises(KeyboardInterrupt):
            tool(QUESTIONS)


async def test_keyboard_interrupt_propagates_from_a_sync_call_inside_a_loop() -> None:
    def callback(qs: list[Question], ctx: dict[str, Any]) -> Any:
        raise KeyboardInterrupt

    (tool,) = tools_interactive(callback)
    with pytest.raises(KeyboardInterrupt):
        tool(QUESTIONS)


async def test_cancellation_propagates_from_an_async_handler() -> None:
    started = asyncio.Event()

    async def callback(qs: list[Question], ctx: dict[str, Any]) -> Any:
        started.set()
        await asyncio.Event().wait()

    (tool,) = tools_interactive(callback)
    task = asyncio.create_task(tool.acall(QUESTIONS))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_cancellation_propagates_while_a_sync_handler_waits_in_its_thread() -> None:
    started, release = threading.Event(), threading.Event()
    loop = asyncio.get_running_loop()
    loop_errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, error: loop_errors.append(error))
    finished = asyncio.Event()

    def callback(qs: list[Question], ctx: dict[str, Any]) -> Any:
        started.set()
        release.wait(10)
        loop.call_soon_threadsafe(finished.set)
        return {}

    (tool,) = tools_interactive(callback)
    task = asyncio.create_task(tool.acall(QUESTIONS))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # at once, while the handler still waits
    release.set()
    await finished.wait()  # the abandoned outcome was queued before this wake-up: dropped quietly
    assert loop_errors == []
    loop.set_exception_handler(None)


async def test_a_sync_handler_from_async_code_sees_the_callers_context_variables() -> None:
    channel: contextvars.ContextVar[str] = contextvars.ContextVar("channel")
    channel.set("C7")

    def callback(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        return {FORMAT: channel.get()}

    (tool,) = tools_interactive(callback)
    assert answers_of(await tool.acall(QUESTIONS))[0]["other_text"] == "C7"


# -- concurrency -----------------------------------------------------------------------------------


async def test_concurrent_asks_through_separate_tools_keep_their_own_handlers_and_contexts() -> (
    None
):
    both_waiting = asyncio.Barrier(2)
    seen: dict[str, dict[str, Any]] = {}

    def make(label: str) -> Any:
        async def callback(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
            await both_waiting.wait()  # both asks are in flight at once
            seen[label] = ctx
            return {FORMAT: label}

        return callback

    (tool_a,) = tools_interactive(make("Summary"), context={"channel": "A"})
    (tool_b,) = tools_interactive(make("Detailed"), context=lambda: {"channel": "B"})
    a, b = await asyncio.wait_for(
        asyncio.gather(tool_a.acall(QUESTIONS), tool_b.acall(QUESTIONS)), 10
    )
    assert selected(a) == [["Summary"], []]
    assert selected(b) == [["Detailed"], []]
    assert seen == {"Summary": {"channel": "A"}, "Detailed": {"channel": "B"}}


async def test_a_context_callable_sees_each_tasks_context_variables() -> None:
    channel: contextvars.ContextVar[str] = contextvars.ContextVar("channel")
    both_waiting = asyncio.Barrier(2)

    async def callback(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        await both_waiting.wait()
        return {FORMAT: ctx["channel"]}

    (tool,) = tools_interactive(callback, context=lambda: {"channel": channel.get()})

    async def ask_from(name: str) -> str | dict[str, Any]:
        channel.set(name)
        return await tool.acall(QUESTIONS)

    results = await asyncio.wait_for(asyncio.gather(ask_from("C1"), ask_from("C2")), 10)
    assert [answers_of(r)[0]["other_text"] for r in results] == ["C1", "C2"]


async def test_concurrent_sync_handlers_run_in_parallel_threads() -> None:
    barrier = threading.Barrier(2, timeout=10)

    def callback(qs: list[Question], ctx: dict[str, Any]) -> dict[str, Any]:
        barrier.wait()  # deadlocks (and times out) unless both run at once
        return {FORMAT: ctx["pick"]}

    tools = [tools_interactive(callback, context={"pick": p})[0] for p in ("Summary", "Detailed")]
    results = await asyncio.gather(*(t.acall(QUESTIONS) for t in tools))
    assert [selected(r)[0] for r in results] == [["Summary"], ["Detailed"]]


class _ReadsBack:
    """A handler offering ``ask_outcome`` (the tool's ReadsBack protocol), answering as told."""

    def __init__(self, reply: object) -> None:
        self.reply = reply
        self.asked: list[Question] = []

    async def __call__(self, questions: list[Question], context: dict[str, Any]) -> object:
        raise AssertionError("the tool calls ask_outcome, not the handler")

    async def ask_outcome(self, questions: list[Question], context: dict[str, Any]) -> object:
        self.asked = questions
        reply = self.reply
        return reply(QuestionSet(questions=tuple(questions))) if callable(reply) else reply


def test_a_handler_that_reads_back_gets_its_answers_normalised_against_its_set() -> None:
    """The tool keeps no question set while such a handler waits: the outcome it hands back is
    checked like any answer (labels in option order, unknown labels refused)."""
    chosen = Answer(question=SECTIONS, selected=("Body", "Intro"))
    handler = _ReadsBack(lambda qs: ToolOutcome(questions=qs, answers=(chosen,)))
    outcome = AskUserTool(callback=handler).invoke(QUESTIONS)
    assert [q.question for q in handler.asked] == [FORMAT, SECTIONS]
    assert outcome.questions.questions == tuple(handler.asked)
    assert [a.question for a in outcome.answers or ()] == [FORMAT, SECTIONS]
    assert outcome.answers is not None and outcome.answers[1].selected == ("Intro", "Body")

    wrong = Answer(question=FORMAT, selected=("Not an option",))
    handler = _ReadsBack(lambda qs: ToolOutcome(questions=qs, answers=(wrong,)))
    with pytest.raises(ToolRejected, match="not an option"):
        asyncio.run(AskUserTool(callback=handler).ainvoke(QUESTIONS))


def test_a_read_back_outcome_that_is_no_outcome_is_refused_in_words() -> None:
    handler = _ReadsBack({"answers": []})
    with pytest.raises(ToolRejected, match="ask_outcome returned dict, not a ToolOutcome"):
        asyncio.run(AskUserTool(callback=handler).ainvoke(QUESTIONS))
