"""pydantic-ai adapter: real ``Agent`` runs with ``FunctionModel``/``TestModel`` -- answers, a call
to fix (``ModelRetry``: a "retried" tool return), a failed ask (``ToolFailed``), and a deferral
that ends the run with ``DeferredToolRequests`` and resumes from the engine's answers feed."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, capture_run_messages
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from bridge import Answer, AskUserDeferred, Question, QuestionSet, tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.frameworks.pydantic_ai import ask_ids, ask_user_tool, deferred_tool_results
from bridge.memory_poster import MemoryPoster
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.store.base import Delivery
from bridge.store.memory import MemoryStore
from tests.support.samples import DATABASE_QUESTION as QUESTION
from tests.support.samples import answer_postgres as answer

TEXT = QUESTION["question"]

Step = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def ask(arguments: dict[str, Any] | str, call_id: str = "call_1") -> Step:
    return lambda messages, info: ModelResponse(
        parts=[ToolCallPart("ask_user", arguments, tool_call_id=call_id)]
    )


def reply(text: str) -> Step:
    return lambda messages, info: ModelResponse(parts=[TextPart(text)])


class Script:
    """A ``FunctionModel`` that plays scripted steps and remembers what it was shown."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.shown: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.shown.append(list(messages))
        self.infos.append(info)
        return self.steps.pop(0)(messages, info)

    def model(self) -> FunctionModel:
        return FunctionModel(self)

    def last_parts(self, index: int) -> list[Any]:
        last = self.shown[index][-1]
        assert isinstance(last, ModelRequest)
        return list(last.parts)


async def test_answers_reach_the_model_as_the_tools_json() -> None:
    script = Script(ask({"questions": [QUESTION]}), reply("Postgres it is."))
    [tool] = tools_interactive(callback=answer)
    agent = Agent(script.model(), tools=[ask_user_tool(tool)])
    result = await agent.run("Plan the service.")
    assert result.output == "Postgres it is."

    [definition] = script.infos[0].function_tools
    assert definition.name == "ask_user"
    assert definition.description == tool.description
    assert definition.parameters_json_schema == tool.parameters
    [returned] = script.last_parts(1)
    assert isinstance(returned, ToolReturnPart)
    assert json.loads(returned.model_response_str())["answers"] == [
        {"question": TEXT, "selected": ["Postgres"], "other_text": None}
    ]


def test_sync_run_with_json_text_arguments() -> None:
    # As OpenAI-style models send them: JSON text, with strict mode's null for "not given".
    arguments = json.dumps({"questions": [{**QUESTION, "multiSelect": None}]})
    script = Script(ask(arguments), reply("ok"))
    agent = Agent(script.model(), tools=[ask_user_tool(tools_interactive(callback=answer)[0])])
    assert agent.run_sync("Plan.").output == "ok"
    [returned] = script.last_parts(1)
    assert json.loads(returned.model_response_str())["questions"][0]["multiSelect"] is False


async def test_a_call_to_fix_is_a_retry_prompt_and_the_model_fixes_it() -> None:
    bad = {**QUESTION, "options": QUESTION["options"][:1]}
    script = Script(
        ask({"questions": [bad]}, "call_1"),
        ask({"questions": [QUESTION]}, "call_2"),
        reply("Fixed."),
    )
    agent = Agent(script.model(), tools=[ask_user_tool(tools_interactive(callback=answer)[0])])
    assert (await agent.run("Plan.")).output == "Fixed."

    [retry] = script.last_parts(1)
    assert isinstance(retry, ToolReturnPart)
    assert retry.tool_call_id == "call_1"
    assert retry.outcome == "retried"
    assert retry.retry is not None and retry.retry.cause == "model_retry"
    assert "questions[0].options has 1 option: give 2 to 4 options" in retry.model_response_str()
    [returned] = script.last_parts(2)
    assert isinstance(returned, ToolReturnPart) and returned.tool_call_id == "call_2"


async def test_test_model_call_from_the_schema_is_checked_and_retried() -> None:
    """TestModel builds arguments from the schema alone; the bridge's rules still apply."""
    agent = Agent(TestModel(), tools=[ask_user_tool(tools_interactive(callback=answer)[0])])
    with capture_run_messages() as messages, pytest.raises(UnexpectedModelBehavior):
        await agent.run("Plan.")
    retries = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.outcome == "retried"
    ]
    assert retries
    assert "The ask_user call was rejected" in retries[0].model_response_str()


async def test_a_failed_ask_is_a_failed_result_not_a_retry() -> None:
    def broken(questions: list[Question], context: dict[str, Any]) -> Any:
        raise RuntimeError("Slack is down")

    script = Script(ask({"questions": [QUESTION]}), reply("I'll assume Postgres."))
    agent = Agent(script.model(), tools=[ask_user_tool(tools_interactive(callback=broken)[0])])
    assert (await agent.run("Plan.")).output == "I'll assume Postgres."
    [failed] = script.last_parts(1)
    assert isinstance(failed, ToolReturnPart)
    assert failed.outcome == "failed"
    assert "could not get the person's answer: Slack is down" in failed.model_response_str()


async def test_defer_then_resume_through_the_answers_feed() -> None:
    """ChatHandler in defer mode posts the question and defers; the run ends with
    DeferredToolRequests; a teammate answers through the store; the feed's delivery resumes the
    run and the model reads the answers JSON."""
    store, poster = MemoryStore(), MemoryPoster()
    handler = ChatHandler(
        poster, store, Destination(platform="memory", channel="C1"), AskPolicy(mode="defer")
    )
    script = Script(ask({"questions": [QUESTION]}, "call_7"), reply("Postgres it is."))
    agent = Agent(
        script.model(),
        tools=[ask_user_tool(tools_interactive(callback=handler)[0])],
        output_type=[str, DeferredToolRequests],
    )

    stopped = await agent.run("Plan the service.")
    requests = stopped.output
    assert isinstance(requests, DeferredToolRequests)
    [deferred_call] = requests.calls
    assert deferred_call.tool_call_id == "call_7"
    assert requests.kind("call_7") == "question"
    posted = await poster.next_post()
    assert requests.metadata["call_7"]["ask_id"] == posted.id
    assert ask_ids(requests) == {posted.id: "call_7"}
    assert len(script.shown) == 1  # the model was not called again while the question waits

    result = await store.submit(
        posted.id, Responder(user_id="U1"), [Answer(question=TEXT, selected=("SQLite",))]
    )
    assert result.ok
    feed = store.feed("agent")
    assert isinstance(feed, AsyncGenerator)
    delivery = await asyncio.wait_for(anext(feed), timeout=10)
    assert delivery.record.id == posted.id

    resumed = await agent.run(
        message_history=stopped.all_messages(),
        deferred_tool_results=deferred_tool_results(requests, delivery),
    )
    await store.ack(delivery)
    await feed.aclose()
    assert resumed.output == "Postgres it is."
    [returned] = script.last_parts(1)
    assert isinstance(returned, ToolReturnPart) and returned.tool_call_id == "call_7"
    assert json.loads(returned.model_response_str())["answers"] == [
        {"question": TEXT, "selected": ["SQLite"], "other_text": None}
    ]


def _record(status: AskStatus, answers: tuple[Answer, ...] | None, ask_id: str) -> AskRecord:
    return AskRecord(
        id=ask_id,
        questions=QuestionSet.model_validate({"questions": [QUESTION]}),
        destination=Destination(platform="memory"),
        expires_at=time.time() + 60,
        status=status,
        deferred=True,
        answers=answers,
    )


async def _deferred_run(ask_id: str) -> tuple[Agent[None, Any], Script, Any]:
    def defer(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
        return AskUserDeferred(extra={"ask_id": ask_id})

    script = Script(ask({"questions": [QUESTION]}, "call_1"), reply("Carrying on."))
    agent: Agent[None, Any] = Agent(
        script.model(),
        tools=[ask_user_tool(tools_interactive(callback=defer)[0])],
        output_type=[str, DeferredToolRequests],
    )
    return agent, script, await agent.run("Plan.")


async def test_expired_ask_resumes_with_a_failed_result() -> None:
    agent, script, stopped = await _deferred_run("ask-1")
    expired = _record(AskStatus.EXPIRED, None, "ask-1")
    results = deferred_tool_results(stopped.output, Delivery(delivery_id="1", record=expired))
    resumed = await agent.run(message_history=stopped.all_messages(), deferred_tool_results=results)
    assert resumed.output == "Carrying on."
    [failed] = script.last_parts(1)
    assert isinstance(failed, ToolReturnPart) and failed.outcome == "failed"
    assert "nobody answered before the questions expired" in failed.model_response_str()


async def test_results_by_ask_id_and_unknown_ask_ids() -> None:
    agent, script, stopped = await _deferred_run("ask-2")
    answered = _record(AskStatus.ANSWERED, (Answer(question=TEXT, other_text="MySQL"),), "x")
    with pytest.raises(LookupError, match="no deferred ask_user call has ask id 'x'"):
        deferred_tool_results(stopped.output, answered)
    rendered = json.dumps({"answers": [{"question": TEXT, "selected": [], "other_text": "Mongo"}]})
    results = deferred_tool_results(stopped.output, results={"ask-2": rendered})
    assert results.calls == {"call_1": rendered}
    await agent.run(message_history=stopped.all_messages(), deferred_tool_results=results)
    [returned] = script.last_parts(1)
    assert returned.model_response_str() == rendered
