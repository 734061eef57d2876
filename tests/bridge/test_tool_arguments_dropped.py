"""A waiting ``ask_user`` call holds none of the model's arguments, through every entry point.

A person may take hours and a process may hold 100,000 waiting calls: once the questions are
checked and asked, the decoded JSON the model sent (a dozen dicts and lists for four questions)
must not stay alive in the call's frames. Each test decodes the arguments into dicts that can be
referenced weakly, hands them to one entry point without keeping them, waits until the call is
parked in the store's ``wait``, and checks that every one of those dicts is gone; then answers,
and the call returns its answer.

Sync entry points are called as methods from a worker thread: ``tool(questions)`` goes through
CPython's ``__call__`` slot, where the calling frame itself holds the argument until the call
returns, whatever the callee does (so does any framework's own frame that calls a tool). What is
checked is that no frame of the bridge holds it.

Claude's ``AskUserQuestion`` (``bridge.frameworks.claude_agent_sdk``) is not here: its answer
is the tool's input itself with the answers added (``updated_input``), so the input is kept, as
the SDK's own frame keeps it for the same call.
"""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agents import RunContextWrapper

from bridge.asking import AskPolicy, ChatHandler
from bridge.frameworks import chatlas as chatlas_adapter
from bridge.frameworks import langchain as langchain_adapter
from bridge.frameworks import openai_agents as openai_agents_adapter
from bridge.frameworks import pydantic_ai as pydantic_ai_adapter
from bridge.frameworks.providers import arun_tool_call, run_tool_call
from bridge.loops import Flag
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import AskRecord, Destination, Responder
from bridge.store.memory import MemoryStore
from bridge.tool import AskUserTool

ARGUMENTS = json.dumps(
    {
        "questions": [
            {
                "question": f"Which way for service {i}?",
                "header": f"Service {i}",
                "options": [
                    {"label": f"Way {j}", "description": f"Deploy service {i} the way {j}"}
                    for j in range(3)
                ],
                "multiSelect": i == 1,
            }
            for i in range(2)
        ]
    }
)


class Decoded(dict[str, Any]):
    """A dict of the model's arguments that a test can reference weakly."""


class Parked(MemoryStore):
    """A memory store that says when a call starts waiting for its answer."""

    def __init__(self) -> None:
        super().__init__()
        self.parked = Flag()

    async def wait(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        self.parked.set()
        return await super().wait(ask_id, timeout)


class Arguments:
    """Makes the arguments as a model's decoded JSON, remembering each dict weakly."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref[Decoded]] = []

    def _keep(self, obj: dict[str, Any]) -> Decoded:
        decoded = Decoded(obj)
        self.refs.append(weakref.ref(decoded))
        return decoded

    def whole(self) -> Decoded:
        """The arguments object, ``{"questions": [...]}``."""
        made: Decoded = json.loads(ARGUMENTS, object_hook=self._keep)
        return made

    def questions(self) -> list[Decoded]:
        """The ``questions`` value alone (what the tool's own methods take)."""
        questions: list[Decoded] = self.whole().pop("questions")
        return questions

    def alive(self) -> int:
        gc.collect()
        return sum(ref() is not None for ref in self.refs)


Start = Callable[[AskUserTool, Arguments], Awaitable[object]]


def in_thread(call: Callable[[], object]) -> Awaitable[object]:
    return asyncio.to_thread(call)


ENTRY_POINTS: dict[str, Start] = {
    "ainvoke": lambda tool, made: tool.ainvoke(made.questions()),
    "acall": lambda tool, made: tool.acall(made.questions()),
    "invoke (sync)": lambda tool, made: in_thread(lambda: tool.invoke(made.questions())),
    "__call__ (sync)": lambda tool, made: in_thread(lambda: tool.__call__(made.questions())),
    "providers.arun_tool_call": lambda tool, made: arun_tool_call(made.whole(), tool),
    "providers.run_tool_call (sync)": lambda tool, made: in_thread(
        lambda: run_tool_call(made.whole(), tool)
    ),
    "chatlas async": lambda tool, made: chatlas_adapter.ask_user_tool(tool, asynchronous=True).func(
        questions=made.questions()
    ),
    "chatlas (sync)": lambda tool, made: in_thread(
        lambda: chatlas_adapter.ask_user_tool(tool).func(questions=made.questions())
    ),
    "pydantic-ai": lambda tool, made: pydantic_ai_adapter.ask_user_tool(tool).function(
        **made.whole()
    ),
    "openai-agents needs_approval": lambda tool, made: _needs_approval(tool, made),
    "langchain _arun": lambda tool, made: langchain_adapter.ask_user_tool(tool)._arun(
        questions=made.questions()
    ),
    "langchain _run (sync)": lambda tool, made: in_thread(
        lambda: langchain_adapter.ask_user_tool(tool)._run(questions=made.questions())
    ),
}


def _needs_approval(tool: AskUserTool, made: Arguments) -> Awaitable[object]:
    function_tool = openai_agents_adapter.ask_user_tool(tool)
    decide = function_tool.needs_approval
    assert callable(decide)
    return decide(RunContextWrapper(context=None), made.whole(), "call_1")  # type: ignore[arg-type]


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
async def test_a_waiting_call_holds_none_of_the_models_arguments(entry: str) -> None:
    store = Parked()
    poster = MemoryPoster()
    handler = ChatHandler(
        poster, store, Destination(platform="memory", channel="C42"), AskPolicy(wait=10)
    )
    made = Arguments()
    call = asyncio.ensure_future(ENTRY_POINTS[entry](AskUserTool(callback=handler), made))
    await asyncio.wait_for(store.parked.wait(), 10)
    assert made.refs, "the arguments were made"
    assert made.alive() == 0, f"{made.alive()} of the model's dicts kept alive while waiting"

    posted = await poster.next_post()
    answers = [
        Answer(question=q.question, selected=(q.options[0].label,))
        for q in posted.questions.questions
    ]
    await store.submit(posted.id, Responder(user_id="U1"), answers)
    assert answered(await asyncio.wait_for(call, 10))
    await store.aclose()


def answered(returned: object) -> bool:
    """Whether an entry point's result is the answer (each in its framework's shape)."""
    if returned is False:  # openai-agents: no pause needed, the output kept for the run
        return True
    if isinstance(returned, tuple):  # LangChain: content and artifact
        returned = returned[0]
    text = getattr(returned, "text", None) or getattr(returned, "content", returned)
    return '"Way 0"' in str(text)
