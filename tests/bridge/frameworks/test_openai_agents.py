"""OpenAI Agents SDK adapter: ``Runner.run`` end to end with a scripted ``Model`` -- answers, calls
to fix shown to the model as tool output (the run goes on), and a deferral that pauses the run
the SDK's way (a ``needs_approval`` interruption) and resumes the same run from its ``RunState``
when the answer arrives on the answers feed."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    RunConfig,
    Runner,
    RunState,
    Usage,
)
from agents.items import ToolApprovalItem, ToolCallOutputItem
from agents.tool_context import ToolContext
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from bridge import Answer, AskUserDeferred, Question, QuestionSet, tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.frameworks.openai_agents import approve_answers, ask_ids, ask_user_tool
from bridge.frameworks.providers import strict_parameters
from bridge.memory_poster import MemoryPoster
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.store.base import Delivery
from bridge.store.memory import MemoryStore
from tests.support.samples import DATABASE_QUESTION
from tests.support.samples import answer_postgres as answer

OFFLINE = RunConfig(tracing_disabled=True)

# As OpenAI strict mode sends it: every property present, null for "not given".
QUESTION = {**DATABASE_QUESTION, "multiSelect": None}
TEXT = QUESTION["question"]


def call(arguments: dict[str, Any] | str, call_id: str = "call_1") -> Any:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name="ask_user", arguments=text
    )


def say(text: str) -> Any:
    content = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=[content]
    )


class ScriptedModel(Model):
    """Plays one scripted output item per model call; keeps the inputs and tools it was given."""

    def __init__(self, *outputs: Any) -> None:
        self.outputs = list(outputs)
        self.inputs: list[list[Any]] = []
        self.tools: list[list[Any]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: list[Any],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self.inputs.append([input] if isinstance(input, str) else list(input))
        self.tools.append(list(tools))
        return ModelResponse(output=[self.outputs.pop(0)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError

    def tool_output(self, index: int) -> str:
        """The last tool output the model was shown in call ``index``."""
        outputs = [
            item["output"]
            for item in self.inputs[index]
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        return str(outputs[-1])


def agent_for(model: ScriptedModel, callback: Callable[..., Any]) -> Agent[Any]:
    return Agent(name="planner", model=model, tools=[ask_user_tool(tools_interactive(callback)[0])])


async def test_answers_reach_the_model_as_the_tools_json() -> None:
    model = ScriptedModel(call({"questions": [QUESTION]}), say("Postgres it is."))
    result = await Runner.run(agent_for(model, answer), "Plan.", run_config=OFFLINE)
    assert result.final_output == "Postgres it is."

    [tool] = model.tools[0]
    assert isinstance(tool, FunctionTool)
    assert tool.name == "ask_user" and tool.strict_json_schema
    assert tool.params_json_schema == strict_parameters(tools_interactive()[0].parameters)
    assert json.loads(model.tool_output(1))["answers"] == [
        {"question": TEXT, "selected": ["Postgres"], "other_text": None}
    ]


async def test_calls_to_fix_are_tool_output_and_the_run_goes_on() -> None:
    too_many = {**QUESTION, "options": QUESTION["options"] * 3}
    model = ScriptedModel(
        call({"questions": "Postgres or SQLite?"}, "call_1"),
        call({"questions": [too_many]}, "call_2"),
        call({"questions": [QUESTION]}, "call_3"),
        say("Fixed."),
    )
    result = await Runner.run(agent_for(model, answer), "Plan.", run_config=OFFLINE)
    assert result.final_output == "Fixed."
    assert "questions must be an array of 1 to 4" in model.tool_output(1)
    second = model.tool_output(2)
    assert "questions[0].options has 6 options: give 2 to 4 options" in second
    assert "questions[0].options[2].label 'Postgres' repeats" in second
    assert json.loads(model.tool_output(3))["answers"][0]["selected"] == ["Postgres"]


async def test_arguments_nested_too_deeply_are_a_call_to_fix() -> None:
    # Called directly: the SDK's own run loop (0.x) crashes on such arguments before any tool
    # sees them (agents._tool_invocation._normalize_arguments lets RecursionError out).
    tool = ask_user_tool(tools_interactive(answer)[0])
    arguments = "[" * 100_000
    context = ToolContext(
        context=None, tool_name="ask_user", tool_call_id="call_1", tool_arguments=arguments
    )
    output = await tool.on_invoke_tool(context, arguments)
    assert "the arguments are nested too deeply" in str(output)


async def test_a_failed_handler_is_tool_output_too() -> None:
    def broken(questions: list[Question], context: dict[str, Any]) -> Any:
        raise TimeoutError("nobody is around")

    model = ScriptedModel(call({"questions": [QUESTION]}), say("I'll assume Postgres."))
    result = await Runner.run(agent_for(model, broken), "Plan.", run_config=OFFLINE)
    assert result.final_output == "I'll assume Postgres."
    assert "could not get the person's answer: nobody is around" in model.tool_output(1)


async def test_defer_pauses_the_run_and_the_feed_resumes_the_same_run() -> None:
    """ChatHandler in defer mode posts the question; the run stops with the call as an SDK
    interruption (the model is not called again, sees no deferral); a teammate answers through
    the store; the feed's delivery approves the call and the same run goes on from the saved
    RunState, the model reading the answers JSON as the tool output."""
    store, poster = MemoryStore(), MemoryPoster()
    handler = ChatHandler(
        poster, store, Destination(platform="memory", channel="C1"), AskPolicy(mode="defer")
    )
    model = ScriptedModel(call({"questions": [QUESTION]}, "call_7"), say("SQLite then."))
    agent = agent_for(model, handler)

    paused = await Runner.run(agent, "Plan.", run_config=OFFLINE)
    assert paused.final_output is None
    [interruption] = paused.interruptions
    assert isinstance(interruption, ToolApprovalItem) and interruption.tool_name == "ask_user"
    posted = await poster.next_post()
    assert ask_ids(paused) == {posted.id: "call_7"}
    assert len(model.inputs) == 1  # the model was not called again while the question waits
    saved = paused.to_state().to_string()  # the host keeps this (and ask_ids) while it waits

    result = await store.submit(
        posted.id, Responder(user_id="U1"), [Answer(question=TEXT, selected=("SQLite",))]
    )
    assert result.ok
    feed = store.feed("agent")
    assert isinstance(feed, AsyncGenerator)
    delivery = await asyncio.wait_for(anext(feed), timeout=10)
    assert delivery.record.id == posted.id

    state = await RunState.from_string(agent, saved)
    resumed = await Runner.run(agent, approve_answers(state, delivery), run_config=OFFLINE)
    await store.ack(delivery)
    await feed.aclose()
    assert resumed.final_output == "SQLite then."
    assert not resumed.interruptions
    assert len(model.inputs) == 2  # one run: the tool call was not made again
    assert json.loads(model.tool_output(1))["answers"] == [
        {"question": TEXT, "selected": ["SQLite"], "other_text": None}
    ]
    [output_item] = [i for i in resumed.new_items if isinstance(i, ToolCallOutputItem)]
    assert dict(output_item.raw_item).get("call_id") == "call_7"
    assert len(poster.posts) == 1  # asked once, not again on resume


def _record(status: AskStatus, answers: tuple[Answer, ...] | None, ask_id: str) -> AskRecord:
    return AskRecord(
        id=ask_id,
        questions=QuestionSet.model_validate({"questions": [{**QUESTION, "multiSelect": False}]}),
        destination=Destination(platform="memory"),
        expires_at=time.time() + 60,
        status=status,
        deferred=True,
        answers=answers,
    )


def deferring(ask_id: str) -> Callable[..., AskUserDeferred]:
    def defer(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
        return AskUserDeferred(extra={"ask_id": ask_id, "expires_at": 1.5})

    return defer


async def test_resumed_in_another_process_with_the_kept_ask_ids() -> None:
    """A fresh agent and tool (as after a restart) resume from the serialized state, given the
    ask ids kept with it; an expired ask gives the model the reason no answer came."""
    first_model = ScriptedModel(call({"questions": [QUESTION]}))
    paused = await Runner.run(
        agent_for(first_model, deferring("ask-9")), "Plan.", run_config=OFFLINE
    )
    kept = (paused.to_state().to_string(), ask_ids(paused))
    assert kept[1] == {"ask-9": "call_1"}
    assert "ask-9" not in json.dumps(first_model.inputs, default=str)

    model = ScriptedModel(say("Carrying on without it."))
    agent = agent_for(model, deferring("never-asked-again"))
    state = await RunState.from_string(agent, kept[0])
    with pytest.raises(LookupError, match="no paused ask_user call has ask id 'ask-9'"):
        approve_answers(state, _record(AskStatus.EXPIRED, None, "ask-9"))  # ask ids not kept
    expired = Delivery(delivery_id="1", record=_record(AskStatus.EXPIRED, None, "ask-9"))
    resumed = await Runner.run(
        agent, approve_answers(state, expired, calls=kept[1]), run_config=OFFLINE
    )
    assert resumed.final_output == "Carrying on without it."
    shown = json.loads(model.tool_output(0))
    assert shown["status"] == "expired"
    assert shown["error"] == "nobody answered before the questions expired"


async def test_results_by_ask_id_unknown_ask_ids_and_a_plain_approval() -> None:
    model = ScriptedModel(call({"questions": [QUESTION]}), say("Mongo, noted."))
    agent = agent_for(model, deferring("ask-2"))
    paused = await Runner.run(agent, "Plan.", run_config=OFFLINE)
    answered = _record(AskStatus.ANSWERED, (Answer(question=TEXT, other_text="MySQL"),), "x")
    with pytest.raises(LookupError, match=r"no paused ask_user call has ask id 'x'.*ask-2"):
        approve_answers(paused.to_state(), answered)

    plain = paused.to_state()
    plain.approve(paused.interruptions[0])  # approved without the answer: a clear error
    with pytest.raises(Exception, match="approved without the person's answer"):
        await Runner.run(agent, plain, run_config=OFFLINE)
    # The same after a restart (a fresh tool knows nothing of the call): never asked again.
    fresh_model = ScriptedModel(say("unreachable"))
    fresh = agent_for(fresh_model, deferring("asked-again"))
    restored = await RunState.from_string(fresh, paused.to_state().to_string())
    restored.approve(restored.get_interruptions()[0])
    with pytest.raises(Exception, match="approved without the person's answer"):
        await Runner.run(fresh, restored, run_config=OFFLINE)

    rendered = json.dumps({"answers": [{"question": TEXT, "selected": [], "other_text": "Mongo"}]})
    state = approve_answers(paused.to_state(), results={"ask-2": rendered})
    resumed = await Runner.run(agent, state, run_config=OFFLINE)
    assert resumed.final_output == "Mongo, noted."
    assert model.tool_output(1) == rendered


async def test_arguments_that_are_not_json_pause_then_get_the_fix_message() -> None:
    """The SDK asks approval for unparseable arguments without consulting the tool's policy: the
    run pauses with no ask, and any resume through approve_answers lets the tool answer with the
    message to fix the call."""
    model = ScriptedModel(
        call('{"questions": [', "call_1"), call({"questions": [QUESTION]}, "call_2"), say("Done.")
    )
    agent = agent_for(model, answer)
    paused = await Runner.run(agent, "Plan.", run_config=OFFLINE)
    assert len(paused.interruptions) == 1 and ask_ids(paused) == {}
    resumed = await Runner.run(agent, approve_answers(paused.to_state()), run_config=OFFLINE)
    assert resumed.final_output == "Done."
    assert "the arguments are not valid JSON" in model.tool_output(1)
    assert json.loads(model.tool_output(2))["answers"][0]["selected"] == ["Postgres"]
