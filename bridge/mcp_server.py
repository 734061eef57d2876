"""The MCP server: ``ask_user`` for any MCP client, answered in chat or by the client's own user.

One tool, ``ask_user``, with the core tool's schema, description and annotations. A call the
model must fix comes back as an error result (``isError``) carrying the core's message. Where the
questions go:

1. a bridge handler given to :func:`create_server` -- ``ask-bridge mcp`` builds a
   :class:`~bridge.asking.ChatHandler` from ``ASK_BRIDGE_PLATFORM`` (a chat platform registered
   under the ``ask_bridge.platforms`` entry points: ``slack`` today) and
   ``ASK_BRIDGE_CHANNEL`` (see :func:`bridge.cli.mcp.chat_route_from_env`: the command composes
   the server with the process's runtime, so the server depends on neither);
2. otherwise, if the client supports form elicitation, its own user, through one form for the
   whole question set (a choice field per question, plus an optional free-text field). On
   handshake-era connections this is an ``elicitation/create`` request; on 2026-07-28
   connections, which forbid server-initiated requests, the same request rides an
   ``InputRequiredResult`` and the client's retry carries the answer;
3. otherwise the call fails with an error result saying how to configure a route. The terminal
   is never used: in stdio mode it belongs to the protocol.

While a person is being waited for, progress notifications go out every ``progress_interval``
seconds (when the client sent a progress token), so clients that reset their request timeout on
progress do not give up. The chat handler's ``wait`` bounds the wait; after it the call returns
the deferred result, whose JSON includes ``ask_id`` so the host can match the answer that later
arrives on the answers feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS, is_version_at_least
from pydantic import ValidationError

from bridge.errors import ToolRejected
from bridge.models import Answer, Question, QuestionSet
from bridge.result import HANDLER_FAILED, ToolOutcome
from bridge.text import typed
from bridge.tool import AskUserCallback, AskUserTool, tool_ask_user, tools_interactive
from bridge.validation import questions_from_arguments, validate_questions

SERVER_NAME = "ask-bridge"
DEFAULT_PROGRESS_INTERVAL = 10.0
"""Seconds between progress notifications while waiting for a person."""

ELICIT_KEY = "ask_user"
"""The key of the elicitation inside a 2026-07-28 ``InputRequiredResult``."""

OTHER_SUFFIX = "_other"
MULTI_SELECT_ELICITATION_SINCE = "2025-11-25"
"""The first protocol revision whose elicitation forms have multi-select (array) fields."""

NO_ROUTE_MESSAGE = (
    "No way to reach a person from this MCP server: it has no chat destination configured and "
    "this MCP client does not support elicitation. Tell the user that ask_user is unavailable "
    "and ask your questions in your reply instead. (Server operator: set ASK_BRIDGE_PLATFORM "
    "to an installed chat platform such as slack and ASK_BRIDGE_CHANNEL to a channel id, or use "
    "a client with elicitation support.)"
)
DECLINED_MESSAGE = (
    "the person declined to answer these questions. Do not assume any choice; continue without "
    "their answers or ask in your reply instead"
)


class _Declined(Exception):
    """The client's user declined or dismissed the elicitation form."""


def _text_result(
    text: str, *, is_error: bool = False, structured: dict[str, Any] | None = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=structured,
        is_error=is_error,
    )


def _outcome_result(outcome: ToolOutcome) -> types.CallToolResult:
    """The MCP result of an answered or deferred ask; a deferral carries its ask id."""
    body = outcome.host_payload
    return _text_result(json.dumps(body, ensure_ascii=False), structured=body)


# -- the elicitation form --------------------------------------------------------------------


def _field(index: int) -> str:
    return f"q{index + 1}"


def elicitation_schema(questions: Sequence[Question], protocol_version: str) -> dict[str, Any]:
    """One form for the whole question set: per question a choice field and an "other" field.

    Single-select questions are a titled enum; multi-select ones an array of titled enums where
    the protocol has them, else a text field for comma-separated labels. No field is required:
    the person may answer in their own words only, or leave a question out.
    """
    multi_arrays = is_version_at_least(protocol_version, MULTI_SELECT_ELICITATION_SINCE)
    properties: dict[str, Any] = {}
    for i, q in enumerate(questions):
        choices = [{"const": o.label, "title": f"{o.label} - {o.description}"} for o in q.options]
        title = f"{q.header}: {q.question}"
        if not q.multiSelect:
            if multi_arrays:
                properties[_field(i)] = {"type": "string", "title": title, "oneOf": choices}
            else:
                properties[_field(i)] = {
                    "type": "string",
                    "title": title,
                    "enum": [o.label for o in q.options],
                    "enumNames": [c["title"] for c in choices],
                }
        elif multi_arrays:
            properties[_field(i)] = {
                "type": "array",
                "title": title,
                "description": "Choose one or more.",
                "items": {"anyOf": choices},
            }
        else:
            labels = ", ".join(o.label for o in q.options)
            properties[_field(i)] = {
                "type": "string",
                "title": title,
                "description": f"One or more of: {labels} (separate with commas).",
            }
        properties[_field(i) + OTHER_SUFFIX] = {
            "type": "string",
            "title": f"{q.header}: other answer",
            "description": "Your own answer, instead of or as well as the choices above.",
        }
    return {"type": "object", "properties": properties}


def elicitation_message(questions: Sequence[Question]) -> str:
    count = len(questions)
    return (
        "The assistant has a question for you."
        if count == 1
        else (f"The assistant has {count} questions for you.")
    )


def answers_from_form(
    questions: Sequence[Question], content: Mapping[str, Any] | None
) -> list[Answer]:
    """The accepted form's content as answers: chosen labels in option order, typed text as
    ``other_text`` -- both kept, for single-select questions too, as the core keeps a label plus
    own text from any handler."""
    content = content or {}
    answers: list[Answer] = []
    for i, q in enumerate(questions):
        raw = content.get(_field(i))
        picked: list[str] = []
        if isinstance(raw, str):
            picked = [p.strip() for p in raw.split(",")] if q.multiSelect else [raw.strip()]
        elif isinstance(raw, list):
            picked = [str(p).strip() for p in raw]
        labels = q.option_labels()
        unknown = [p for p in picked if p and p not in labels]
        other_parts = [*unknown]
        own = content.get(_field(i) + OTHER_SUFFIX)
        kept = typed(own) if isinstance(own, str) else None  # judged as a chat judges it
        if kept is not None:
            other_parts.append(kept)
        other = ", ".join(other_parts) or None
        selected = tuple(label for label in labels if label in picked)
        if not q.multiSelect:
            selected = selected[:1]
        answers.append(Answer(question=q.question, selected=selected, other_text=other))
    return answers


def _answer_from_elicit(questions: Sequence[Question], result: types.ElicitResult) -> list[Answer]:
    if result.action != "accept":
        raise _Declined(DECLINED_MESSAGE)
    return answers_from_form(questions, result.content)


# -- the server --------------------------------------------------------------------------------


def ask_user_definition(tool: AskUserTool) -> types.Tool:
    """The MCP tool definition: the core tool's name, description, schema and annotations."""
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=dict(tool.parameters),
        annotations=types.ToolAnnotations.model_validate(tool.annotations.as_dict()),
    )


def _client_context(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return {"via": "mcp", "mcp_client": info.name if info is not None else None}


def _elicitation_supported(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    if caps is None or caps.elicitation is None:
        return False
    elicitation = caps.elicitation
    # An empty elicitation capability means form mode (the pre-2025-11-25 reading).
    return elicitation.form is not None or elicitation.url is None


async def _with_progress(
    ctx: ServerRequestContext[Any, Any], interval: float, work: Callable[[], Any]
) -> Any:
    """Run ``work`` while reporting progress every ``interval`` seconds (a no-op for the
    client unless it sent a progress token)."""
    started = time.monotonic()
    result: Any = None

    async def tick() -> None:
        ticks = 0
        while True:
            await anyio.sleep(interval)
            ticks += 1
            waited = int(time.monotonic() - started)
            await ctx.session.report_progress(
                ticks, None, f"waiting for a person to answer ({waited}s)"
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        result = await work()
        tg.cancel_scope.cancel()
    return result


@dataclass
class _AskUserService:
    """The ``tools/call`` logic; kept apart from :class:`Server` wiring for readability."""

    callback: AskUserCallback | None
    context: Mapping[str, Any]
    progress_interval: float

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name != "ask_user":
            return _text_result(
                f"Unknown tool {params.name!r}; this server has ask_user.", is_error=True
            )
        try:
            question_set = validate_questions(questions_from_arguments(params.arguments))
        except ToolRejected as exc:
            return _text_result(exc.message, is_error=True)
        context = {**self.context, **_client_context(ctx)}
        if self.callback is not None:
            tool = tools_interactive(self.callback, context)[0]
            return await self._ask(ctx, tool, question_set)
        if not _elicitation_supported(ctx):
            return _text_result(NO_ROUTE_MESSAGE, is_error=True)
        wanted = question_set.questions
        if ctx.session.can_send_request:
            # Handshake era: ask with an elicitation/create request while the call waits.
            async def elicit(_qs: Any, _context: Any) -> list[Answer]:
                result = await ctx.session.elicit_form(
                    elicitation_message(wanted),
                    elicitation_schema(wanted, ctx.session.protocol_version),
                    related_request_id=ctx.request_id,
                )
                return _answer_from_elicit(wanted, result)

            tool = tools_interactive(elicit, context)[0]
            return await self._ask(ctx, tool, question_set)
        if ctx.session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return _text_result(NO_ROUTE_MESSAGE, is_error=True)  # e.g. JSON-response HTTP
        # 2026-07-28: the form rides an InputRequiredResult; the retry carries the answer.
        response = (params.input_responses or {}).get(ELICIT_KEY)
        if response is None:
            request = types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message=elicitation_message(wanted),
                    requested_schema=elicitation_schema(wanted, ctx.protocol_version),
                )
            )
            return types.InputRequiredResult(input_requests={ELICIT_KEY: request})
        try:
            elicited = types.ElicitResult.model_validate(
                response.model_dump(by_alias=True, exclude_none=True)
            )
        except ValidationError:
            bad = f"{HANDLER_FAILED}the client's reply to the form was not a form result"
            return _text_result(bad, is_error=True)

        def answered(_qs: Any, _context: Any) -> list[Answer]:
            return _answer_from_elicit(wanted, elicited)

        return await self._ask(ctx, tools_interactive(answered, context)[0], question_set)

    async def _ask(
        self, ctx: ServerRequestContext[Any, Any], tool: AskUserTool, question_set: QuestionSet
    ) -> types.CallToolResult:
        async def work() -> types.CallToolResult:
            try:
                outcome = await tool.ainvoke(question_set)
            except ToolRejected as exc:
                return _text_result(exc.message, is_error=True)
            return _outcome_result(outcome)

        result: types.CallToolResult = await _with_progress(ctx, self.progress_interval, work)
        return result


def create_server(
    callback: AskUserCallback | None = None,
    *,
    context: Mapping[str, Any] | None = None,
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
    name: str = SERVER_NAME,
) -> Server[Any]:
    """A low-level MCP server exposing ``ask_user``.

    ``callback`` is a bridge handler (a ``ChatHandler`` or any ``ask_user`` callback); with none,
    questions go to the client's user by elicitation when it supports it. The handler's context
    is ``context`` plus ``via="mcp"`` and ``mcp_client`` (the client's name, when it gave one).
    """
    definition = ask_user_definition(tool_ask_user)
    service = _AskUserService(
        callback=callback, context=dict(context or {}), progress_interval=progress_interval
    )

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[definition])

    return Server(
        name,
        instructions=(
            "ask_user asks a person multiple-choice questions and returns their answers as JSON."
        ),
        on_list_tools=list_tools,
        on_call_tool=service.call,
    )


# -- transports ----------------------------------------------------------------------------------


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over this process's stdin/stdout until it disconnects."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def bind(host: str, port: int) -> socket.socket:
    """A listening socket for :func:`serve_http`; port 0 picks a free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def endpoint(sock: socket.socket, path: str = "/mcp") -> str:
    """The URL :func:`serve_http` answers at on ``sock`` (the real port when bound to port 0)."""
    from bridge.mcp_access import url_host

    host, port = sock.getsockname()[:2]
    return f"http://{url_host(host)}:{port}{path}"


def metrics_route(*, guarded: bool) -> Any:
    """``GET /metrics`` (Prometheus' text format) beside the MCP endpoint: an ``mcp --http``
    process is where its waiting calls resume, so its answer-to-resume histogram (and the asks
    it created) can be scraped from it as ``serve``'s metrics are. ``guarded``: a token protects
    the server, so the scrape must carry it too (Prometheus' ``authorization`` setting); the SDK's
    authentication middleware has already checked the bearer token by then."""
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from bridge.http_server import METRICS_PATH
    from bridge.metrics import exposition

    async def metrics(request: Request) -> Response:
        if guarded and not request.user.is_authenticated:
            return Response("a bearer token is required\n", status_code=401)
        body, content_type = exposition()
        return Response(body, headers={"Content-Type": content_type})

    return Route(METRICS_PATH, metrics, methods=["GET"])


async def serve_http(
    server: Server[Any], sock: socket.socket, *, path: str = "/mcp", token: str | None = None
) -> None:
    """Serve streamable HTTP on an already-bound socket until cancelled.

    Binding first means the address is reachable (connections wait in the backlog) before this
    coroutine even starts, so nobody has to poll for readiness. Who may call is decided by
    :mod:`bridge.mcp_access` from the bound address: with ``token``, every request must carry it
    as a bearer token; without one the address must be loopback (else ``ValueError``), and
    requests whose ``Host`` or ``Origin`` is not local are refused (DNS-rebinding protection).

    Cancelled, the server stops as uvicorn stops on a signal -- no new connections, requests in
    flight get :data:`~bridge.http_server.SHUTDOWN_GRACE` seconds, the application's shutdown
    runs -- and the cancellation goes on. Cut short instead, the application's lifespan task
    was left to ``asyncio.run`` to cancel, and uvicorn logged that as an error with a traceback.
    uvicorn logs through the process's logging (``log_config=None``: its own configuration
    would add a handler that writes to stderr directly, waiting on it) and leaves the signals
    to :func:`bridge.runtime.stop_on_signals`.
    """
    import uvicorn

    from bridge.http_server import SHUTDOWN_GRACE
    from bridge.mcp_access import http_app_options

    class Uvicorn(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    host, port = sock.getsockname()[:2]
    options = http_app_options(host, port, token)
    app = server.streamable_http_app(streamable_http_path=path, **options)
    app.router.routes.append(metrics_route(guarded=token is not None))
    config = uvicorn.Config(
        app,
        log_level="warning",
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE),
    )
    http = Uvicorn(config)
    serving = asyncio.ensure_future(http.serve(sockets=[sock]))
    try:
        await asyncio.shield(serving)
    finally:
        http.should_exit = True
        await serving


__all__ = [
    "DEFAULT_PROGRESS_INTERVAL",
    "answers_from_form",
    "ask_user_definition",
    "bind",
    "create_server",
    "elicitation_schema",
    "endpoint",
    "serve_http",
    "serve_stdio",
]
