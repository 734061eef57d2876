"""One side of ``tool_path.py``, in a fresh process, for whichever ``bridge`` is first on
``sys.path`` (this checkout, or an earlier revision extracted beside it).

``python tool_child.py cycles URL SECONDS ENTRY``: full ask cycles, 64 in flight, each through
one entry point -- ``handler`` (the ``ChatHandler`` called with validated questions, as
``cycle_child.py`` does), ``ainvoke`` / ``acall`` (``AskUserTool`` given the model's decoded
JSON), or a framework adapter's entry point as its framework calls it (``providers``,
``chatlas``, ``pydantic-ai``, ``openai-agents``, ``langchain``, ``claude``). A second store
submits the answers once the message is recorded; the call returns. Prints one JSON line:
cycles, wall and client CPU seconds, and where ``bridge`` came from.

``python tool_child.py check FILE ROUNDS``: the CPU time of checking each question set in the
JSON file (``{name: questions}``) as a tool call's arguments, ``ROUNDS`` times each, after a
warm-up. Uses only what every revision since issue 11 has, so both sides run the same code.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from question_texts import four_question_dicts

Entry = Callable[[list[dict[str, Any]]], Awaitable[object]]


def entry_point(name: str, tool: Any, handler: Any) -> Entry:
    """What one cycle calls with the model's ``questions`` (decoded JSON)."""
    if name == "handler":
        from bridge.models import Question

        validated = [Question.model_validate(q) for q in four_question_dicts()]
        return lambda _: handler(validated, {"session": "bench"})
    if name == "ainvoke":
        return lambda questions: tool.ainvoke(questions)  # type: ignore[no-any-return]
    if name == "acall":
        return lambda questions: tool.acall(questions)  # type: ignore[no-any-return]
    if name == "providers":
        from bridge.frameworks.providers import arun_tool_call

        return lambda questions: arun_tool_call({"questions": questions}, tool)
    if name == "chatlas":
        from bridge.frameworks.chatlas import ask_user_tool as chatlas_tool

        func = chatlas_tool(tool, asynchronous=True).func
        return lambda questions: func(questions=questions)  # type: ignore[no-any-return]
    if name == "pydantic-ai":
        from bridge.frameworks.pydantic_ai import ask_user_tool as pydantic_tool

        function = pydantic_tool(tool).function
        return lambda questions: function(questions=questions)  # type: ignore[no-any-return]
    if name == "openai-agents":
        from agents import RunContextWrapper
        from agents.tool_context import ToolContext

        from bridge.frameworks.openai_agents import ask_user_tool as agents_tool

        function_tool = agents_tool(tool)
        policy, on_invoke = function_tool.needs_approval, function_tool.on_invoke_tool
        assert callable(policy)
        run = RunContextWrapper(context=None)
        calls = iter(range(10**9))
        # The model's JSON text, as its response carried it: nothing in the process encodes it
        text = json.dumps({"questions": four_question_dicts()})

        async def as_the_sdk(questions: list[dict[str, Any]]) -> object:
            """What the SDK does with a call of a tool that has a ``needs_approval`` policy:
            hands the policy the decoded arguments (it asks; a deferral pauses the run there),
            then invokes the tool with the text (it hands over what the policy's ask got). The
            SDK decodes the text for the policy; like every entry point here, this one is handed
            it decoded: decoding the model's JSON is every host's work, not an adapter's (9 us
            of CPU a call here, 1-2% of a cycle)."""
            call_id = f"call_{next(calls)}"
            if await policy(run, {"questions": questions}, call_id):
                raise AssertionError("the ask was deferred")
            context = ToolContext(
                context=None, tool_name="ask_user", tool_call_id=call_id, tool_arguments=text
            )
            return await on_invoke(context, text)

        return as_the_sdk
    if name == "langchain":
        from bridge.frameworks.langchain import ask_user_tool as langchain_tool

        arun = langchain_tool(tool)._arun
        return lambda questions: arun(questions=questions)  # type: ignore[no-any-return]
    if name == "claude":
        from claude_agent_sdk import ToolPermissionContext

        from bridge.frameworks.claude_agent_sdk import can_use_tool

        decide = can_use_tool(tool)
        return lambda questions: decide(
            "AskUserQuestion", {"questions": questions}, ToolPermissionContext()
        )
    sys.exit(f"unknown entry point {name!r}")


def answered(got: object) -> bool:
    """Whether an entry point returned the answer ("Option 2" to the first question), in its own
    shape, at a cost alike for all (no ``repr`` of a whole outcome: that cost more than the
    checking of the arguments)."""
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], str):
        got = got[0]  # LangChain: content and artifact
    if isinstance(got, tuple):  # the handler of 1a9ff19: its answers
        return bool(got[0].selected == ("Option 2",))
    if isinstance(got, str):  # the answers JSON
        return '"Option 2"' in got
    answers = getattr(got, "answers", None)  # ToolOutcome, AskUserAnswered
    if answers is not None:
        return bool(answers[0].selected == ("Option 2",))
    content = getattr(got, "content", None)  # providers' ToolCallResult
    if isinstance(content, str):
        return '"Option 2"' in content
    updated = getattr(got, "updated_input", None)  # Claude's PermissionResultAllow
    return isinstance(updated, dict) and "Option 2" in updated["answers"].values()


async def cycles(url: str, seconds: float, name: str) -> dict[str, Any]:
    from bridge.asking import AskPolicy, ChatHandler
    from bridge.models import Answer
    from bridge.poster import Poster
    from bridge.record import AskRecord, Destination, MessageRef, Responder
    from bridge.store.redis import RedisStore
    from bridge.tool import AskUserTool

    hook = "message_posted" if hasattr(RedisStore, "message_posted") else "set_message"

    class Shown(RedisStore):  # type: ignore[misc]
        shown: asyncio.Queue[str]

    async def recorded(self: Shown, ask_id: str, message: MessageRef) -> AskRecord | None:
        record: AskRecord | None = await getattr(RedisStore, hook)(self, ask_id, message)
        self.shown.put_nowait(ask_id)
        return record

    setattr(Shown, hook, recorded)

    class Quiet(Poster):  # type: ignore[misc]
        platform = "slack"

        def __init__(self) -> None:
            self.posted = 0

        async def post(self, record: AskRecord) -> MessageRef:
            self.posted += 1
            return MessageRef(platform="slack", channel="C0123456789", message_id=str(self.posted))

        async def update(self, record: AskRecord) -> None:
            return None

    questions = json.loads(json.dumps(four_question_dicts()))
    answers = tuple(Answer(question=q["question"], selected=("Option 2",)) for q in questions)
    who = Responder(user_id="U1", name="Una")
    agent = Shown.from_url(url, prefix="toolpath")
    agent.shown = asyncio.Queue()
    clicks = RedisStore.from_url(url, prefix="toolpath")
    handler = ChatHandler(
        Quiet(), agent, Destination(platform="slack", channel="C0123456789"), AskPolicy(wait=60)
    )
    call = entry_point(name, AskUserTool(callback=handler), handler)
    await agent.listening()
    # What the imports and the setup made is frozen out of the collector's sight: a full
    # collection then scans what the cycles keep, as in a long-running host. Unfrozen, the one or
    # two full collections a 3 s run happens to catch scan every object the process imported
    # (190,000 with the OpenAI Agents SDK, 51,000 without a framework): 67 us a cycle through
    # that SDK's entry point against 12 us through the handler, the size of the framework's
    # imports rather than the adapter's work.
    gc.collect()
    gc.freeze()

    async def answerer() -> None:
        while True:
            await clicks.submit(await agent.shown.get(), who, answers)

    done = 0
    stop_at = 0.0

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            got = await call(questions)
            assert answered(got), got
            done += 1

    answering = [asyncio.create_task(answerer()) for _ in range(64)]  # held: running to the end
    stop_at = time.perf_counter() + 1.0  # warm up
    await asyncio.gather(*(caller() for _ in range(64)))
    done = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    stop_at = t0 + seconds
    await asyncio.gather(*(caller() for _ in range(64)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert not any(task.done() for task in answering), "an answerer failed"
    import bridge

    return {"cycles": done, "wall": wall, "cpu": cpu, "bridge": bridge.__file__}


def check(path: str, rounds: int) -> dict[str, Any]:
    """Microseconds of CPU per check of each question set, as a host checks a tool call: the
    arguments object unwrapped, then the questions checked and built."""
    from bridge.frameworks.providers import questions_from_arguments
    from bridge.validation import validate_questions

    with open(path) as f:
        sets: dict[str, list[dict[str, Any]]] = json.load(f)
    out: dict[str, Any] = {}
    for name, questions in sets.items():
        arguments = {"questions": questions}
        for _ in range(max(10, rounds // 10)):  # warm-up
            validate_questions(questions_from_arguments(arguments))
        best = float("inf")
        for _ in range(5):  # the least disturbed of five batches
            cpu0 = time.process_time()
            for _ in range(rounds):
                validate_questions(questions_from_arguments(arguments))
            best = min(best, (time.process_time() - cpu0) / rounds)
        out[name] = best * 1e6
    import bridge

    out["bridge"] = bridge.__file__
    return out


def main() -> None:
    mode = sys.argv[1]
    if mode == "check":
        print(json.dumps(check(sys.argv[2], int(sys.argv[3]))), flush=True)
        return
    url, seconds, name = sys.argv[2], float(sys.argv[3]), sys.argv[4]
    # not asyncio.run: it would cancel and await the open stores' tasks on the way out
    result = asyncio.new_event_loop().run_until_complete(cycles(url, seconds, name))
    print(json.dumps(result), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
