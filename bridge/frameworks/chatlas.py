"""ask_user as a chatlas tool (extra ``chatlas``).

``chat.register_tool(ask_user_tool())`` (or ``chat.set_tools([...])``). The outcomes in
chatlas's idiom (each adapter's are tabled in ``docs/outcomes.md``):

- answers: the tool returns the answers JSON, which the model reads;
- a call to fix (:class:`~bridge.errors.InvalidQuestions`): the tool raises
  ``chatlas.ToolRejectError`` with the model-facing message -- the call is refused, not run --
  which chatlas sends back as the tool's error result ("Tool call rejected. ...");
- no answer to be had (nobody answered, the ask expired or was cancelled, the platform refused
  the post, the store or the handler failed): the tool raises the bridge's own
  :class:`~bridge.errors.ToolRejected` (``NotAnswered``, ``PostFailed``, ...) as a failed call,
  which chatlas reports to the model as a failure with the model-facing message and keeps in
  ``ContentToolResult.error``, so the host can tell why (``.record``). ``ToolRejectError`` is
  chatlas's word for a call someone refused, and these calls ran and failed;
- deferral: the tool returns a ``ContentToolResult`` holding the deferred result (the model ends
  its turn) with ``AskUserDeferred.extra`` -- the ask id -- in ``.extra``, which chatlas keeps in
  the chat history but never sends to the model.

The schema is OpenAI's strict-mode variant (:func:`~bridge.frameworks.providers.strict_parameters`)
because ``ChatOpenAI`` marks every tool strict; other providers accept it as plain JSON Schema.
``register_tool`` rebuilds a ``Tool`` from its function's signature, so the function carries the
same schema on its ``questions`` parameter and both registration paths send identical schemas.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Annotated, Any, cast

import chatlas
from chatlas.types import ContentToolResult, ToolAnnotations
from pydantic import Field

from bridge.errors import InvalidQuestions
from bridge.frameworks.providers import strict_parameters
from bridge.result import ToolOutcome
from bridge.tool import AskUserTool, tool_ask_user
from bridge.validation import questions_from_arguments, validate_questions

__all__ = ["ask_user_tool"]

_MISSING: Any = object()


def ask_user_tool(tool: AskUserTool = tool_ask_user, *, asynchronous: bool = False) -> chatlas.Tool:
    """The ``ask_user`` tool for ``chat.register_tool(...)``.

    ``tool`` is the bridge tool to ask through (default: the process-wide handler chain; pass one
    from :func:`bridge.tools_interactive` to give this chat its own handler). The default sync
    tool works with ``chat.chat()`` and ``chat.chat_async()`` alike; chatlas runs a sync tool on
    the event loop, though, so with ``chat_async()`` pass ``asynchronous=True`` to ask without
    blocking the loop (chatlas refuses async tools in a sync chat).
    """
    parameters = strict_parameters(tool.parameters)

    def arguments(questions: Any, unknown: dict[str, Any]) -> object:
        given = dict(unknown) if questions is _MISSING else {"questions": questions, **unknown}
        return questions_from_arguments(given)

    if asynchronous:

        async def ask_user_async(questions: Any = _MISSING, **unknown: Any) -> object:
            try:
                asking = tool.ainvoke(arguments(questions, unknown))
                del questions, unknown  # the model's: not kept alive while the call waits
                return _result(await asking)
            except InvalidQuestions as rejected:
                raise chatlas.ToolRejectError(rejected.message) from None

        func: Callable[..., Any] = ask_user_async
    else:

        def ask_user(questions: Any = _MISSING, **unknown: Any) -> object:
            try:
                checked = validate_questions(arguments(questions, unknown))
                del questions, unknown  # the model's: not kept alive while the call waits
                return _result(tool.invoke(checked))
            except InvalidQuestions as rejected:
                raise chatlas.ToolRejectError(rejected.message) from None

        func = ask_user

    func.__name__ = tool.name
    func.__doc__ = tool.description
    # What chatlas reads when register_tool() rebuilds the tool from this function.
    questions_schema = parameters["properties"]["questions"]

    def questions_json_schema(schema: dict[str, Any]) -> None:
        schema.update(copy.deepcopy(questions_schema))

    questions_type = Annotated[Any, Field(json_schema_extra=questions_json_schema)]
    func.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                "questions", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=questions_type
            )
        ],
        return_annotation=object,
    )
    return chatlas.Tool(
        func=func,
        name=tool.name,
        description=tool.description,
        parameters=parameters,
        annotations=cast(ToolAnnotations, tool.annotations.as_dict()),
    )


def _result(outcome: ToolOutcome) -> object:
    if outcome.deferred is None:
        return outcome.content
    return ContentToolResult(
        value=outcome.content, model_format="json", extra=dict(outcome.deferred.extra or {})
    )
