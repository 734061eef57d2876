"""LangChain and LangGraph: ``ask_user`` as a ``BaseTool``, with each framework's own idioms.

Two tools share one schema and description (the core tool's):

- :func:`ask_user_tool` wraps a core :class:`~bridge.tool.AskUserTool`: the handler (Slack,
  Discord, terminal, a callback) answers while the tool call waits. A call the model must fix
  raises ``ToolException``, which ``handle_tool_error=True`` turns into the tool message the model
  reads. A handler that defers returns the deferred JSON; the host-only ``extra`` (the ask id)
  rides in the ``ToolMessage.artifact``, never in what the model reads.
- :func:`ask_user_interrupt_tool` is the LangGraph variant. Deferral there is the graph's own
  pause: the tool calls ``langgraph.types.interrupt()`` with the validated question set, the run
  ends with ``__interrupt__``, and ``Command(resume=answers)`` re-enters the tool, which returns
  the answers JSON. The resume value takes every form a handler may return (see
  :func:`resume_answers`), so a chat handler or the answers feed can feed it directly.

``langchain-core`` (and ``langgraph`` for the interrupt variant) come with the ``langchain`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.tools import BaseTool, ToolException
from pydantic import PrivateAttr

from bridge.errors import ToolRejected
from bridge.models import Answer, QuestionSet
from bridge.result import HANDLER_FAILED, ToolOutcome, answers_result, normalise_answers
from bridge.tool import AskContext, AskUserCallback, AskUserTool, as_tool, tool_ask_user
from bridge.validation import questions_from_arguments, validate_questions

INTERRUPT_KIND = "ask_user"
"""``interrupt_value["kind"]``: tells a host which of its interrupts are question sets."""

_MISSING: Any = object()
"""``questions`` left out of the call (``None`` is a value the model may send)."""


def _artifact(outcome: ToolOutcome) -> dict[str, Any] | None:
    """The host-only part of an outcome: the deferral's ``extra`` (ask id, message link)."""
    if outcome.deferred is None:
        return None
    return dict(outcome.deferred.extra or {})


class AskUserBaseTool(BaseTool):
    """``ask_user`` for LangChain agents, answered by a bridge handler while the call waits."""

    name: str = "ask_user"
    description: str = ""
    args_schema: Any = None
    handle_tool_error: Any = True
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    _core: AskUserTool = PrivateAttr()

    def __init__(self, core: AskUserTool, **kwargs: Any) -> None:
        kwargs.setdefault("name", core.name)
        kwargs.setdefault("description", core.description)
        kwargs.setdefault("args_schema", dict(core.parameters))
        super().__init__(**kwargs)
        self._core = core

    def _run(
        self,
        questions: Any = _MISSING,
        run_manager: CallbackManagerForToolRun | None = None,
        **unknown: Any,
    ) -> tuple[str, dict[str, Any] | None]:
        try:
            outcome = self._core.invoke(_arguments(questions, unknown))
        except ToolRejected as exc:
            raise ToolException(exc.message) from exc
        return outcome.text, _artifact(outcome)

    async def _arun(
        self,
        questions: Any = _MISSING,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **unknown: Any,
    ) -> tuple[str, dict[str, Any] | None]:
        try:
            outcome = await self._core.ainvoke(_arguments(questions, unknown))
        except ToolRejected as exc:
            raise ToolException(exc.message) from exc
        return outcome.text, _artifact(outcome)


def _arguments(questions: Any, unknown: dict[str, Any]) -> object:
    """The ``questions`` value, through the check every host shares: unknown arguments are
    refused, a left-out ``questions`` is "missing", ``multiSelect: null`` means left out."""
    given = dict(unknown) if questions is _MISSING else {"questions": questions, **unknown}
    return questions_from_arguments(given)


def ask_user_tool(
    handler: AskUserTool | AskUserCallback | None = None, *, context: AskContext = None
) -> AskUserBaseTool:
    """A LangChain ``ask_user`` tool.

    ``handler`` is a core tool (from :func:`bridge.tools_interactive`) or a handler callback (a
    ``ChatHandler``, a function), which gets a tool of its own with ``context``; ``None`` asks
    through the process-wide chain (global callback, else a terminal prompt), still passing
    ``context`` to the handler.
    """
    return AskUserBaseTool(as_tool(handler, context))


def resume_answers(questions: QuestionSet, value: Any) -> tuple[Answer, ...]:
    """The answers in a ``Command(resume=...)`` value, normalised against the question set.

    Accepts what a handler may return -- a mapping from question text to a label, a list of
    labels or free text; a list of :class:`~bridge.models.Answer` (or their dicts) -- and the
    answers JSON itself (``{"questions": [...], "answers": [...]}``, as the tool result or the
    answers feed renders it).
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError("a resume value given as text must be the answers JSON") from None
    if isinstance(value, Mapping) and isinstance(value.get("answers"), list):
        value = value["answers"]
    return normalise_answers(questions, value)


class AskUserInterruptTool(BaseTool):
    """``ask_user`` for LangGraph: the question set pauses the graph; the resume value answers.

    Needs a checkpointer (the interrupted run is resumed from it). The interrupt value is
    ``{"kind": "ask_user", "questions": [...]}``; resume with ``Command(resume=answers)``.
    """

    name: str = "ask_user"
    description: str = ""
    args_schema: Any = None
    handle_tool_error: Any = True

    def __init__(self, **kwargs: Any) -> None:
        core = tool_ask_user
        kwargs.setdefault("name", core.name)
        kwargs.setdefault("description", core.description)
        kwargs.setdefault("args_schema", dict(core.parameters))
        super().__init__(**kwargs)

    def _run(
        self,
        questions: Any = _MISSING,
        run_manager: CallbackManagerForToolRun | None = None,
        **unknown: Any,
    ) -> str:
        from langgraph.types import interrupt

        try:
            question_set = validate_questions(_arguments(questions, unknown))
        except ToolRejected as exc:
            raise ToolException(exc.message) from exc
        resumed = interrupt({"kind": INTERRUPT_KIND, "questions": question_set.wire()})
        try:
            answers = resume_answers(question_set, resumed)
        except ToolRejected as exc:
            raise ToolException(exc.message) from exc
        except ValueError as exc:
            raise ToolException(f"{HANDLER_FAILED}{exc}") from exc
        return answers_result(question_set, answers)

    async def _arun(
        self,
        questions: Any = _MISSING,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> str:
        # interrupt() reads the run's config from a context variable, which the async path
        # carries too; nothing here blocks, so the sync body serves both.
        return self._run(questions, **kwargs)


def ask_user_interrupt_tool() -> AskUserInterruptTool:
    """The LangGraph ``ask_user`` tool whose deferral is ``interrupt()``."""
    return AskUserInterruptTool()


__all__ = [
    "INTERRUPT_KIND",
    "AskUserBaseTool",
    "AskUserInterruptTool",
    "ask_user_interrupt_tool",
    "ask_user_tool",
    "resume_answers",
]
