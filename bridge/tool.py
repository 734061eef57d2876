"""The ``ask_user`` tool: validate the model's questions, ask through a handler, return the result.

Which handler asks (first that exists wins):

1. the tool's own callback, from :func:`tools_interactive` -- one per agent, so agents sharing a
   process (a web app, a bot serving many channels) never share a handler;
2. the process-wide callback set with :func:`set_ask_user_callback`;
3. a prompt on the terminal, when stdin and stdout are both a TTY (the ``console`` platform, found
   through the ``ask_bridge.platforms`` entry points: ``bridge`` never imports ``platforms``);
4. otherwise the call fails with a :class:`ToolRejected` saying how to configure a handler.

A handler is ``callback(questions: list[Question], context: dict)``, sync or async. It returns a
mapping of question text to a label / list of labels / free text, a list of :class:`Answer`,
:class:`~bridge.result.AskUserAnswered` (answers with who gave them), an awaitable of any of them,
or :class:`AskUserDeferred`. A handler that keeps the questions itself may also offer
``ask_outcome`` (:class:`ReadsBack`), which the tool then calls instead, holding no copy of the
question set while it waits. Sync handlers called from async code run in a
daemon worker thread: a handler waiting for a person never blocks the event loop, and Ctrl-C or
cancellation never waits for it. Async handlers called from sync code (``tool(questions)``,
``invoke``) run on the one loop every synchronous call shares (:mod:`bridge.loops`), from any
thread, so what a handler's store keeps running between calls keeps running.

Everything the model should read as an error -- a malformed call, a handler that raised or
answered wrongly, no handler at all -- is :class:`ToolRejected`; ``KeyboardInterrupt`` and task
cancellation propagate untouched.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

from bridge import loops
from bridge.deferred import AskUserDeferred
from bridge.errors import ToolRejected
from bridge.models import (
    MAX_DESCRIPTION,
    MAX_HEADER,
    MAX_LABEL,
    MAX_OPTIONS,
    MAX_QUESTION_TEXT,
    MAX_QUESTIONS,
    MIN_OPTIONS,
    MIN_QUESTIONS,
    Question,
    QuestionSet,
)
from bridge.result import HANDLER_FAILED, AskUserAnswered, ToolOutcome, normalise_answers
from bridge.validation import validate_questions

AskUserCallback: TypeAlias = Callable[[list[Question], dict[str, Any]], Any]
"""``callback(questions, context)``; see the module docstring for what it may return."""

AskContext: TypeAlias = Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None
"""A dict passed to every ask, or a zero-argument callable called on every ask to build it."""


class ReadsBack(Protocol):
    """A handler that keeps the question set itself and hands it back with the outcome.

    A person may take hours to answer, and a process may hold 100,000 such calls: a handler that
    stores the asks anyway (:class:`~bridge.asking.ChatHandler` keeps them in its store, which
    returns the record with the answer) lets the tool keep no copy of the validated set while it
    waits. When the handler has an async ``ask_outcome``, the tool calls it instead of the handler
    itself and builds the result from the :class:`ToolOutcome` it returns (answers are normalised
    against the set handed back, which must be the set it was given)."""

    async def ask_outcome(
        self, questions: list[Question], context: dict[str, Any]
    ) -> ToolOutcome: ...


TOOL_NAME = "ask_user"

DESCRIPTION = f"""\
Ask the person you are working for {MIN_QUESTIONS} to {MAX_QUESTIONS} multiple-choice questions \
and wait for their answers.

Use it when you need a decision, a preference or a fact that only they can give and a wrong guess \
would waste work. Do not use it for what you can find out yourself, or to confirm routine steps. \
Put related questions in one call rather than asking one at a time.

Each question has:
- question: the full question text, ending with a question mark;
- header: a short label of at most {MAX_HEADER} characters shown above it, e.g. "Format";
- options: {MIN_OPTIONS} to {MAX_OPTIONS} choices, each with a short label and a description of \
what choosing it means. Do not add an "Other" option: the person can always type their own answer;
- multiSelect (optional, default false): true lets the person choose several options.
Every text must be non-empty; no two questions may have the same text and no two options of a \
question the same label.

The result is JSON with one answer per question, in order: selected (the chosen option labels, \
possibly empty) and other_text (what the person typed instead, or null). Act on the answers; do \
not ask the same questions again. If the result has "status": "deferred", follow its \
instructions: end your turn, and the answers arrive in the next message."""


def _parameters() -> dict[str, Any]:
    """The JSON Schema of the tool's arguments: self-contained (no ``$ref``), plain draft-07
    keywords, so OpenAI, Anthropic, Gemini and MCP clients all accept it."""
    text = {"type": "string", "minLength": 1}
    option = {
        "type": "object",
        "properties": {
            "label": {
                **text,
                "maxLength": MAX_LABEL,
                "description": "The option's short label, as shown to the person.",
            },
            "description": {
                **text,
                "maxLength": MAX_DESCRIPTION,
                "description": "What choosing this option means.",
            },
        },
        "required": ["label", "description"],
        "additionalProperties": False,
    }
    question = {
        "type": "object",
        "properties": {
            "question": {
                **text,
                "maxLength": MAX_QUESTION_TEXT,
                "description": "The full question text.",
            },
            "header": {
                **text,
                "maxLength": MAX_HEADER,
                "description": f"A short label of at most {MAX_HEADER} characters, e.g. 'Format'.",
            },
            "options": {
                "type": "array",
                "minItems": MIN_OPTIONS,
                "maxItems": MAX_OPTIONS,
                "items": option,
                "description": "The choices, with distinct labels. The person can always type "
                "their own answer instead, so do not add an 'Other' option.",
            },
            "multiSelect": {
                "type": "boolean",
                "default": False,
                "description": "True to let the person choose several options.",
            },
        },
        "required": ["question", "header", "options"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "minItems": MIN_QUESTIONS,
                "maxItems": MAX_QUESTIONS,
                "items": question,
                "description": f"{MIN_QUESTIONS} to {MAX_QUESTIONS} questions with distinct texts.",
            }
        },
        "required": ["questions"],
        "additionalProperties": False,
    }


PARAMETERS: Mapping[str, Any] = _parameters()


@dataclass(frozen=True)
class ToolAnnotations:
    """MCP-style hints about the tool's behaviour (names as in the MCP spec)."""

    title: str = "Ask the user"
    readOnlyHint: bool = True
    destructiveHint: bool = False
    idempotentHint: bool = False
    openWorldHint: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


NO_HANDLER = (
    HANDLER_FAILED + "nobody can be asked here: no answer handler is configured and there is no "
    "interactive terminal. Carry on without asking: make a reasonable assumption and say which. "
    "(For the developer: register a handler with bridge.set_ask_user_callback(callback), or give "
    "this agent its own tool with bridge.tools_interactive(callback=...).)"
)

_global_callback: AskUserCallback | None = None
_global_lock = threading.Lock()


def set_ask_user_callback(callback: AskUserCallback | None) -> AskUserCallback | None:
    """Set (or clear, with ``None``) the process-wide handler; return the previous one.

    Tools from :func:`tools_interactive` with their own callback ignore it.
    """
    global _global_callback
    if callback is not None and not callable(callback):
        raise TypeError(
            f"set_ask_user_callback() needs a callable or None, got {type(callback).__name__}"
        )
    with _global_lock:
        previous, _global_callback = _global_callback, callback
    return previous


def get_ask_user_callback() -> AskUserCallback | None:
    """The process-wide handler, or ``None``."""
    return _global_callback


def _is_tty() -> bool:
    try:
        return bool(sys.stdin and sys.stdin.isatty() and sys.stdout and sys.stdout.isatty())
    except (AttributeError, ValueError, OSError):  # replaced or closed streams
        return False


@functools.cache
def _console_callback() -> AskUserCallback | None:
    """The ``console`` platform's terminal prompt, loaded through its entry point (once)."""
    from bridge.platform import PlatformUnavailable, load_platform

    try:
        platform = load_platform("console")
    except PlatformUnavailable:
        return None
    callback = getattr(platform, "callback", None)
    return callback if callable(callback) else None


def _is_async_callable(func: object) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 -- instances with an async __call__
    )


T = TypeVar("T")


def _run_in_new_thread(func: Callable[[], T]) -> T:
    """Run ``func`` in a fresh thread (no event loop there, the caller's context variables) and
    return or raise its outcome."""
    box: dict[str, Any] = {}
    context = contextvars.copy_context()

    def target() -> None:
        try:
            box["result"] = context.run(func)
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=target, name="ask_user", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


async def _run_off_loop(func: Callable[..., T], *args: Any) -> T:
    """Run blocking ``func(*args)`` in a daemon thread (the caller's context variables) and await
    its outcome without ever joining the thread.

    Not ``asyncio.to_thread``: on Ctrl-C ``asyncio.run`` cancels its task and then joins the
    default executor, where a terminal prompt sits in ``input()`` for ever. Here cancellation
    propagates at once; the abandoned thread's late outcome is dropped, and being a daemon it
    does not keep the process alive.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(error: BaseException | None, value: Any) -> None:
        if future.done():  # cancelled while the handler ran
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        error: BaseException | None = None
        value: Any = None
        try:
            value = context.run(func, *args)
        except BaseException as exc:  # handed to the awaiting task below
            error = exc
        try:
            loop.call_soon_threadsafe(settle, error, value)
        except RuntimeError:  # the loop has closed: nobody awaits this outcome any more
            pass

    threading.Thread(target=target, name="ask_user", daemon=True).start()
    return await future


class AskUserTool:
    """The ``ask_user`` tool, bound to a handler (its own, or the process-wide chain).

    Call it as ``tool(questions)`` or ``await tool.acall(questions)`` to get the tool result (JSON
    text with the answers, or the deferred dict). Framework adapters use :meth:`ainvoke` /
    :meth:`invoke` for the full :class:`ToolOutcome`, which also holds a deferral's ``extra``.
    """

    name: str = TOOL_NAME
    description: str = DESCRIPTION
    annotations: ToolAnnotations = ToolAnnotations()

    def __init__(self, callback: AskUserCallback | None = None, context: AskContext = None) -> None:
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
        if context is not None and not (isinstance(context, Mapping) or callable(context)):
            raise TypeError(
                "context must be a mapping or a zero-argument callable returning one, got "
                f"{type(context).__name__}"
            )
        self._callback = callback
        self._context = context

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments object (a fresh copy: callers may modify it)."""
        return copy.deepcopy(dict(PARAMETERS))

    def __repr__(self) -> str:
        bound = "own callback" if self._callback is not None else "global handler chain"
        return f"<AskUserTool {self.name!r} ({bound})>"

    # -- the handler chain -------------------------------------------------------------------

    def _handler(self) -> AskUserCallback:
        callback = self._callback if self._callback is not None else _global_callback
        if callback is None and _is_tty():
            callback = _console_callback()
        if callback is None:
            raise ToolRejected(NO_HANDLER)
        return callback

    def _context_for_ask(self) -> dict[str, Any]:
        context = self._context
        try:
            if callable(context):
                context = context()
            if context is None:
                return {}
            if not isinstance(context, Mapping):
                raise TypeError(f"the context callable returned {type(context).__name__}")
            return dict(context)
        except ToolRejected:
            raise
        except Exception as exc:
            raise ToolRejected(f"{HANDLER_FAILED}{_reason(exc)}") from exc

    @staticmethod
    def _outcome(qs: QuestionSet, returned: object) -> ToolOutcome:
        if isinstance(returned, AskUserDeferred):
            return ToolOutcome(questions=qs, deferred=returned)
        if isinstance(returned, AskUserAnswered):
            answers = normalise_answers(qs, list(returned.answers))
            return ToolOutcome(questions=qs, answers=answers, answered=returned)
        return ToolOutcome(questions=qs, answers=normalise_answers(qs, returned))

    @staticmethod
    def _read_back(outcome: object) -> ToolOutcome:
        """A :class:`ReadsBack` handler's outcome, its answers normalised against the question
        set it handed back, like any handler's answers against the asked set."""
        if not isinstance(outcome, ToolOutcome):
            raise ToolRejected(
                f"{HANDLER_FAILED}the handler's ask_outcome returned "
                f"{type(outcome).__name__}, not a ToolOutcome"
            )
        if outcome.answers is None:
            return outcome
        answers = normalise_answers(outcome.questions, outcome.answers)
        return ToolOutcome(questions=outcome.questions, answers=answers, answered=outcome.answered)

    # -- async -------------------------------------------------------------------------------

    async def ainvoke(self, questions: object) -> ToolOutcome:
        """Validate, ask, and return the :class:`ToolOutcome`; raises only :class:`ToolRejected`
        (plus ``KeyboardInterrupt``/cancellation)."""
        qs = validate_questions(questions)
        del questions  # the caller's object: this call does not keep it alive
        callback = self._handler()
        context = self._context_for_ask()
        reads_back = getattr(callback, "ask_outcome", None)
        if reads_back is not None and _is_async_callable(reads_back):
            # the handler keeps the set and hands it back: no copy is held while people answer
            asking = reads_back(list(qs.questions), context)
            del qs, reads_back, context  # held for hours otherwise (the coroutine has them)
            try:
                outcome = await asking
            except ToolRejected:
                raise
            except Exception as exc:
                raise ToolRejected(f"{HANDLER_FAILED}{_reason(exc)}") from exc
            return self._read_back(outcome)
        asked = list(qs.questions)
        try:
            if _is_async_callable(callback):
                returned = callback(asked, context)
            else:  # a sync handler may block waiting for a person: keep it off the loop
                returned = await _run_off_loop(callback, asked, context)
            returned = await _settle(returned)
        except ToolRejected:
            raise
        except Exception as exc:
            raise ToolRejected(f"{HANDLER_FAILED}{_reason(exc)}") from exc
        return self._outcome(qs, returned)

    async def acall(self, questions: object) -> str | dict[str, Any]:
        """The tool result: answers JSON text, or the deferred dict."""
        asking = self.ainvoke(questions)
        del questions  # the call drops it once checked; this frame would keep it all the wait
        return (await asking).content

    # -- sync --------------------------------------------------------------------------------

    def invoke(self, questions: object) -> ToolOutcome:
        """Sync :meth:`ainvoke`. Works with or without an event loop running in this thread
        (with one, the ask runs in a worker thread with its own loop)."""
        qs = validate_questions(questions)
        del questions  # the caller's object: this call does not keep it alive while it waits
        return self._invoke_checked(qs)

    def _invoke_checked(self, qs: QuestionSet) -> ToolOutcome:
        """:meth:`invoke` of a checked set, here or, under a running loop, in a worker thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._invoke_here(qs)
        return _run_in_new_thread(lambda: self._invoke_here(qs))

    def _invoke_here(self, qs: QuestionSet) -> ToolOutcome:
        """The sync path, in a thread without a running loop: a sync handler runs right here (so
        a terminal prompt gets Ctrl-C directly); an async handler's work runs on the loop every
        synchronous call shares (:func:`bridge.loops.run`), where a store's subscription and
        leases outlive the call: the next synchronous call hears its answer too."""
        callback = self._handler()
        context = self._context_for_ask()
        reads_back = getattr(callback, "ask_outcome", None)
        if reads_back is not None and _is_async_callable(reads_back):
            try:
                outcome = loops.run(_settle(reads_back(list(qs.questions), context)))
            except ToolRejected:
                raise
            except Exception as exc:
                raise ToolRejected(f"{HANDLER_FAILED}{_reason(exc)}") from exc
            return self._read_back(outcome)
        try:
            returned = callback(list(qs.questions), context)
            if inspect.isawaitable(returned):
                returned = loops.run(_settle(returned))
        except ToolRejected:
            raise
        except Exception as exc:
            raise ToolRejected(f"{HANDLER_FAILED}{_reason(exc)}") from exc
        return self._outcome(qs, returned)

    def __call__(self, questions: object) -> str | dict[str, Any]:
        """The tool result: answers JSON text, or the deferred dict."""
        qs = validate_questions(questions)
        del questions  # as in invoke: not kept alive while the call waits
        return self._invoke_checked(qs).content


Tool = AskUserTool


async def _settle(returned: object) -> object:
    """``returned`` with every awaitable layer awaited (an async handler may return another
    awaitable)."""
    while inspect.isawaitable(returned):
        returned = await returned
    return returned


def _reason(exc: BaseException) -> str:
    """What the model reads after "could not get the person's answer: "."""
    return str(exc).strip() or type(exc).__name__


def tools_interactive(
    callback: AskUserCallback | None = None, context: AskContext = None
) -> list[AskUserTool]:
    """A fresh list holding one ``ask_user`` tool bound to its own handler and context.

    Give each agent its own list so agents in one process never share a handler. ``context`` is
    a dict, or a zero-argument callable called on every ask (e.g. to read the current channel from
    a context variable); either way the callback receives a fresh dict. Without ``callback`` the
    tool uses the process-wide chain (global callback, then the terminal).
    """
    return [AskUserTool(callback=callback, context=context)]


def as_tool(
    handler: AskUserTool | AskUserCallback | None, context: AskContext = None
) -> AskUserTool:
    """The tool an adapter asks through: ``handler`` itself when it is already a tool (it keeps
    its own context), else a tool of its own bound to the handler callback -- or, for ``None``, to
    the process-wide chain -- and ``context``. Returns the shared :data:`tool_ask_user` when there
    is neither handler nor context."""
    if isinstance(handler, AskUserTool):
        return handler
    if handler is None and context is None:
        return tool_ask_user
    return AskUserTool(callback=handler, context=context)


tool_ask_user = AskUserTool()
"""The ready ``ask_user`` tool, asking through the process-wide handler chain."""
