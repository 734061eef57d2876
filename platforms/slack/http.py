"""HTTP mode: the Bolt app behind ``POST /slack/events`` on the process's one HTTP server.

The server is the core's (:mod:`bridge.http_server`, started by :func:`bridge.runtime.serving`),
shared with every other platform the process serves; Slack contributes this one route.

Anyone who can reach the URL can send it anything, so a request is *verified before it is
parsed*: Bolt parses the body while building its request object, before the signature check it
would make, and a malformed body would end there as a 500 with a traceback. Here the signature
(``SLACK_SIGNING_SECRET``, HMAC-SHA256 over ``v0:{timestamp}:{body}``, at most five minutes old)
is checked first, by slack_sdk's :class:`~slack_sdk.signature.SignatureVerifier` -- 401 when it
is missing, stale or wrong -- then the body's shape -- 400 when a signed body is not an
interactive payload Bolt can take -- and only then is the request handed to Bolt, whose own
verification is off (:func:`platforms.slack.app.build_app`): each request is verified once. The
payload is parsed here: a click's form body is the whole message, URL-encoded, and decoding it is
the dearest step of a click in Python (:func:`form_value`). The server logs the refusals
(:class:`bridge.http_server.RefusalLog`: a few lines for a flood of them).
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote_plus

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier

from bridge.platform import HttpRoute

EVENTS_PATH = "/slack/events"

_OBJECTS = ("user", "channel", "message", "container", "view", "team", "enterprise")
"""Payload keys Bolt reads as objects when present: anything else there would crash it."""
_BOLT_TYPES = {
    "text/plain;charset=utf-8": "text/plain",
    "application/json;charset=utf-8": "application/json",
}
"""The content types Bolt gives its answers, and what its aiohttp adapter sends for them."""


def events_route(app: AsyncApp, signing_secret: str) -> HttpRoute:
    """``POST /slack/events``: verified with ``signing_secret``, checked, dispatched to ``app``
    (built without verification of its own)."""
    verifier = SignatureVerifier(signing_secret)

    async def events(request: web.Request) -> web.StreamResponse:
        text = _verified(verifier, await request.read(), request.headers)
        if text is None:
            return web.Response(status=401, text="invalid request signature")
        problem, payload = read_payload(text, request.headers.get("Content-Type", ""))
        if problem is not None:
            return web.Response(status=400, text=problem)
        if payload is None:  # JSON or ssl_check: Bolt reads it itself
            bolt_request = await to_bolt_request(request)
        else:
            bolt_request = parsed_request(payload, request)
        return await http_response(await app.async_dispatch(bolt_request))

    return HttpRoute("POST", EVENTS_PATH, events)


async def http_response(answer: BoltResponse) -> web.Response:
    """Bolt's answer as aiohttp's, the same on the wire as Bolt's own adapter makes it. An answer
    whose only header is one of Bolt's own content types -- every ack -- is built directly, its
    body encoded once (the adapter's regular expression and header copies cost more than the
    response itself); anything else (cookies, headers a middleware set) goes through the
    adapter."""
    types = answer.headers.get("content-type") if len(answer.headers) == 1 else None
    content_type = _BOLT_TYPES.get(types[0]) if types is not None and len(types) == 1 else None
    if content_type is None:
        return await to_aiohttp_response(answer)
    return web.Response(status=answer.status, body=answer.body.encode(), content_type=content_type)


def _verified(verifier: SignatureVerifier, body: bytes, headers: Mapping[str, str]) -> str | None:
    """``body`` as text if Slack signed it (``verifier``), else ``None``.

    The verifier takes well-formed headers and UTF-8 text only; anything else is a wrong
    signature here, not an exception there: a timestamp that is not a few ASCII digits
    (``int()`` raises on ``abc``, and reads ``٣٣٣٣`` or ``1_0``), a signature that is not ASCII
    (``hmac.compare_digest`` raises), a body that is not UTF-8 (the verifier decodes it, and
    raises; Slack sends UTF-8 only, so such a body cannot be one Slack signed)."""
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) < 16):
        return None
    if not signature.isascii():
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if verifier.is_valid(text, timestamp, signature) else None


def read_payload(text: str, content_type: str) -> tuple[str | None, dict[str, Any] | None]:
    """Why a signed body is not something Bolt can take safely (or ``None`` if it is), and the
    interactive payload it holds (``None`` for what Bolt reads itself).

    Interactive payloads arrive form-encoded as ``payload=<JSON object>``; Bolt also answers
    ``ssl_check`` and JSON event callbacks, which pass when they are JSON objects."""
    if content_type.startswith("application/json"):
        ok = isinstance(_json(text), dict)
        return (None if ok else "the body is not a JSON object"), None
    try:
        form = _form(text)
    except UnicodeDecodeError:
        return "the form is not UTF-8", None
    if "ssl_check" in form and "payload" not in form:
        return None, None
    raw = form.get("payload")
    if raw is None or len(raw) != 1:
        return "no payload", None
    payload = _json(raw[0])
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        return "the payload is not an interactive payload object", None
    return shape_problem(payload), payload


def _form(text: str) -> dict[str, list[str]]:
    """A form body's fields, as ``urllib.parse.parse_qs(text, keep_blank_values=True)`` gives
    them, but each value decoded by :func:`form_value` (strictly: bad UTF-8 raises)."""
    form: dict[str, list[str]] = {}
    for pair in text.split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        form.setdefault(form_value(name), []).append(form_value(value))
    return form


def form_value(text: str) -> str:
    """``urllib.parse.unquote_plus(text, errors="strict")``, 20 times faster on what Slack sends.

    Python's decoder handles each ``%XX`` in Python, and a click's payload (the whole message,
    as URL-encoded JSON) holds thousands: 0.4 ms a click. The quoted-printable decoder, in C,
    decodes ``=XX`` alike, so well-formed text with ``%`` read as ``=`` decodes to the same bytes.
    Where the two would differ -- a raw ``=``, line breaks (soft breaks there), a malformed
    escape (left as ``=``..., or cut at the end) -- Python's decoder is used."""
    if "=" not in text and "\r" not in text and "\n" not in text and "%" not in text[-2:]:
        if text.isascii():
            decoded = binascii.a2b_qp(text.replace("+", " ").replace("%", "=").encode())
            if b"=" not in decoded:
                return decoded.decode("utf-8")
    return unquote_plus(text, errors="strict")


def parsed_request(payload: dict[str, Any], request: web.Request) -> AsyncBoltRequest:
    """Bolt's request for a payload already parsed (and checked) here, so Bolt does not decode
    the body a second time. Bolt's public constructor takes a parsed body in its Socket Mode
    form, which differs from its HTTP form only in keeping no raw body: Bolt reads that only to
    verify the signature (done: :func:`events_route`) and to copy a request for a lazy listener
    (none)."""
    headers: dict[str, str | Sequence[str]] = dict(request.headers)
    return AsyncBoltRequest(
        body=payload, query=request.query_string, headers=headers, mode="socket_mode"
    )


def shape_problem(payload: dict[str, Any]) -> str | None:
    """What in an interactive payload has a shape Bolt or our listeners cannot take."""
    for key in _OBJECTS:
        if payload.get(key) is not None and not isinstance(payload[key], dict):
            return f"payload {key} is not an object"
    user = payload.get("user") or {}
    kind = payload["type"]
    if kind in ("block_actions", "view_submission", "view_closed"):
        if not isinstance(user.get("id"), str) or not user["id"]:
            return "payload user has no id"
    if kind == "block_actions":
        actions = payload.get("actions")
        if not isinstance(actions, list) or not actions:
            return "payload actions is not a non-empty list"
        if not all(isinstance(a, dict) and isinstance(a.get("action_id"), str) for a in actions):
            return "payload action has no string action_id"
    if kind == "view_submission":
        view = payload.get("view") or {}
        state = view.get("state")
        if not isinstance(state, dict) or not isinstance(state.get("values"), dict):
            return "payload view.state.values is not an object"
    return None


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None
