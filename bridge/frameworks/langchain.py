"""LangChain and LangGraph: ``ask_user`` as a ``BaseTool``, with each framework's own idioms.

Two tools share one schema and description (the core tool's):

- :func:`ask_user_tool` wraps a core :class:`~bridge.tool.AskUserTool`: the handler (Slack,
  Discord, terminal, a callback) answers while the tool call waits. A call the model must fix,
  and one that got no answer (nobody answered, the ask expired or was cancelled, a refused post,
  an unreachable store), raises ``ToolException``, which ``handle_tool_error=True`` turns into the
  tool message the model reads (``status="error"``; LangChain has no retry to tell them apart).
  A handler that defers returns the deferred JSON; the host-only ``extra`` (the ask id) rides in
  the ``ToolMessage.artifact``, never in what the model reads.
- :func:`ask_user_interrupt_tool` is the LangGraph variant. Deferral there is the graph's own
  pause: the tool calls ``langgraph.types.interrupt()`` with the validated question set, the run
  ends with ``__interrupt__``, and ``Command(resume=...)`` re-enters the tool, which returns what
  happened (see :func:`resume_result`). The resume value takes every form a handler may return,
  and every form the answers feed hands out -- the :class:`~bridge.store.base.Delivery`, its
  :class:`~bridge.record.AskRecord`, or :func:`bridge.feed.render_delivery`'s JSON (text or
  dict) -- so a host that asked the interrupt's questions through a chat handler resumes with the
  feed's delivery as it comes: an answered ask gives the answers JSON; one that expired or was
  cancelled an error result with ``render_delivery``'s words, so the model carries on without the
  answers.

``docs/outcomes.md`` tables what the model reads and the host gets for every outcome.

``langchain-core`` (and ``langgraph`` for the interrupt variant) come with the ``langchain`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.tools import BaseTool, ToolException
from pydantic import PrivateAttr

from bridge.errors import NotAnswered, ToolRejected
from bridge.feed import render_delivery
from bridge.models import Answer, QuestionSet
from bridge.record import AskRecord, AskStatus
from bridge.result import (
    HANDLER_FAILED,
    ToolOutcome,
    answers_payload,
    normalise_answers,
    who_payload,
)
from bridge.store.base import Delivery
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
            checked = validate_questions(_arguments(questions, unknown))
            del questions, unknown  # the model's: not kept alive while the call waits
            outcome = self._core.invoke(checked)
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
            asking = self._core.ainvoke(_arguments(questions, unknown))
            del questions, unknown  # the model's: not kept alive while the call waits
            outcome = await asking
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


def _decoded(value: Any) -> Any:
    """A resume value unwrapped: a feed delivery's record; text decoded as JSON."""
    if isinstance(value, Delivery):
        return value.record
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError(
                "a resume value given as text must be JSON: the answers, or "
                "bridge.feed.render_delivery's output"
            ) from None
    return value


_UNANSWERED = frozenset(status.value for status in AskStatus if status is not AskStatus.ANSWERED)


def _answers(questions: QuestionSet, value: Any) -> tuple[Answer, ...]:
    """:func:`resume_answers` of a value already :func:`_decoded`."""
    if isinstance(value, AskRecord):
        if value.status is AskStatus.ANSWERED and value.answers is not None:
            return normalise_answers(questions, value.answers)
        raise NotAnswered(render_delivery(value), value)
    if isinstance(value, Mapping):
        status = value.get("status")
        if isinstance(value.get("answers"), list):
            value = value["answers"]
        elif isinstance(status, str) and status in _UNANSWERED and "error" in value:
            raise ToolRejected(json.dumps(dict(value), ensure_ascii=False))
    return normalise_answers(questions, value)


def resume_answers(questions: QuestionSet, value: Any) -> tuple[Answer, ...]:
    """The answers in a ``Command(resume=...)`` value, normalised against the question set.

    Accepts what a handler may return -- a mapping from question text to a label, a list of
    labels or free text; a list of :class:`~bridge.models.Answer` (or their dicts) -- the answers
    JSON itself (``{"questions": [...], "answers": [...]}``, as the tool result or the answers
    feed renders it), and what the answers feed hands out: a
    :class:`~bridge.store.base.Delivery` or its :class:`~bridge.record.AskRecord`.

    An ask that ended without an answer -- a delivered record, or
    :func:`bridge.feed.render_delivery`'s JSON (``{"questions", "status", "error"}``), of an
    expired or cancelled ask -- raises :class:`~bridge.errors.ToolRejected` (``NotAnswered`` for
    a record) whose message is ``render_delivery``'s JSON: what the model reads.
    """
    return _answers(questions, _decoded(value))


def resume_result(questions: QuestionSet, value: Any) -> str:
    """What the model reads after ``Command(resume=value)``: the answers JSON a waiting call
    returns -- with ``answered_by`` when the delivered ask's policy tells the model who answered
    (``tell_model_who``), or as the resumed answers JSON carries it -- or, for an ask that ended
    unanswered, :class:`~bridge.errors.ToolRejected` (see :func:`resume_answers`)."""
    value = _decoded(value)
    body = answers_payload(questions, _answers(questions, value))
    if isinstance(value, AskRecord) and value.tell_model_who:
        body["answered_by"] = who_payload(value.who_answered())
    elif isinstance(value, Mapping) and isinstance(value.get("answered_by"), list):
        body["answered_by"] = value["answered_by"]
    return json.dumps(body, ensure_ascii=False)


class AskUserInterruptTool(BaseTool):
    """``ask_user`` for LangGraph: the question set pauses the graph; the resume value answers.

    Needs a checkpointer (the interrupted run is resumed from it). The interrupt value is
    ``{"kind": "ask_user", "questions": [...]}``; resume with ``Command(resume=answers)`` -- or
    with the answers feed's delivery of the ask the host made of those questions (an expired or
    cancelled one becomes an error result saying so).
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
            return resume_result(question_set, resumed)
        except ToolRejected as exc:
            raise ToolException(exc.message) from exc
        except ValueError as exc:
            raise ToolException(f"{HANDLER_FAILED}{exc}") from exc

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
    "resume_result",
]
