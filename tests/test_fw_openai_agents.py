"""OpenAI Agents SDK adapter: ``Runner.run`` end to end with a scripted ``Model`` -- answers, calls
to fix shown to the model as tool output (the run goes on), and a deferral whose ask id rides in
the output item's SDK-only ``custom_data``, resumed with the feed's rendering of the answer."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    RunConfig,
    Runner,
    TResponseInputItem,
    Usage,
)
from agents.items import ToolCallOutputItem
from agents.tool_context import ToolContext
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from samples import DATABASE_QUESTION, run_example_offline
from samples import answer_postgres as answer

from bridge import Answer, AskUserDeferred, Question, QuestionSet, tools_interactive
from bridge.feed import render_delivery
from bridge.frameworks.openai_agents import DEFERRED_KEY, ask_user_tool
from bridge.frameworks.providers import strict_parameters
from bridge.record import AskRecord, AskStatus, Destination

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
        call('{"questions": [', "call_1"),
        call({"questions": [too_many]}, "call_2"),
        call({"questions": [QUESTION]}, "call_3"),
        say("Fixed."),
    )
    result = await Runner.run(agent_for(model, answer), "Plan.", run_config=OFFLINE)
    assert result.final_output == "Fixed."
    assert "the arguments are not valid JSON" in model.tool_output(1)
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


async def test_deferral_keeps_the_ask_id_in_custom_data_and_resumes_from_the_feed() -> None:
    def defer(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
        return AskUserDeferred(extra={"ask_id": "ask-9", "expires_at": 1.5})

    model = ScriptedModel(
        call({"questions": [QUESTION]}),
        say("Waiting for your answer."),
        say("SQLite then."),
    )
    agent = agent_for(model, defer)
    first = await Runner.run(agent, "Plan.", run_config=OFFLINE)
    assert first.final_output == "Waiting for your answer."
    shown = model.tool_output(1)
    assert json.loads(shown)["status"] == "deferred"
    assert "ask-9" not in json.dumps(model.inputs, default=str)
    [output_item] = [i for i in first.new_items if isinstance(i, ToolCallOutputItem)]
    assert output_item.custom_data == {DEFERRED_KEY: {"ask_id": "ask-9", "expires_at": 1.5}}

    record = AskRecord(
        id="ask-9",
        questions=QuestionSet.model_validate({"questions": [{**QUESTION, "multiSelect": False}]}),
        destination=Destination(platform="memory"),
        expires_at=time.time() + 60,
        status=AskStatus.ANSWERED,
        deferred=True,
        answers=(Answer(question=TEXT, selected=("SQLite",)),),
    )
    next_turn: list[TResponseInputItem] = [
        *first.to_input_list(),
        {"role": "user", "content": render_delivery(record)},
    ]
    second = await Runner.run(agent, next_turn, run_config=OFFLINE)
    assert second.final_output == "SQLite then."
    last = model.inputs[2][-1]
    assert last["role"] == "user"
    assert json.loads(last["content"])["answers"][0]["selected"] == ["SQLite"]


def test_example_runs_offline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_example_offline("openai_agents_sdk.py", monkeypatch, capsys)
    assert out == "Writing them as: ['Summary']"
