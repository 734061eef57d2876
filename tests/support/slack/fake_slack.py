"""A fake Slack Web API on loopback that answers -- and refuses -- like Slack.

One aiohttp route ``POST /api/{method}`` takes JSON or form bodies, checks the bot token, records
every call, and refuses what Slack would, by the one set of rules the conformance tests hold the
renderers to (:mod:`tests.support.slack.slack_rules`): parameters the method does not declare in
Slack's OpenAPI document, or lacks (``invalid_arguments``), blocks slack_sdk or Slack's documented
limits refuse (``invalid_blocks``, with Slack's ``errors`` and ``response_metadata``), block JSON
over the fake's bound (``msg_blocks_too_long``, which Slack documents without a number: see
:data:`tests.support.slack.slack_rules.BLOCKS_JSON`), over-long text (``msg_too_long``), a message
with neither (``no_text``), an invalid view (``invalid_arguments``) or one over 250 kB
(``view_too_large``). Each call records that judgement (:attr:`Call.refused`) whatever the fake
answered, so a test can fail on any request Slack would refuse
(``tests/platforms/slack/conftest.py``).

It also answers the state Slack keeps: channels listed in ``missing_channels``
(``channel_not_found``), unknown messages (``message_not_found``), ``trigger_id`` s unknown
(``invalid_trigger_id``), used (``exchanged_trigger_id``) or stale (``expired_trigger_id``), and
stale view hashes (``hash_conflict``).
``rate_limit(method)`` makes the next call answer 429 with ``Retry-After`` without doing
anything, which is what Slack guarantees for a 429. ``revoke(token)`` makes every later call
made with ``token`` answer ``token_revoked``, as Slack does once an app is uninstalled or its
token rotated.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from tests.support.slack.slack_rules import Refusal, refusal

TRIGGER_TTL = 3.0
BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    ok: bool
    error: str | None = None
    response: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.perf_counter)
    """When the call arrived (``time.perf_counter`` of the process hosting the fake)."""
    refused: Refusal | None = None
    """How Slack would refuse the request for its shape
    (:func:`tests.support.slack.slack_rules.refusal`), whatever the fake answered (a rate limit, a
    failure the test asked for)."""


CREATED: list[FakeSlack] = []
"""Every fake made since the suite's conftest last cleared the list (at the start of each test),
so the test can be failed for a request any of them judged invalid."""


@dataclass
class FakeSlack:
    """State of the fake workspace; ``url`` is the ``base_url`` for clients (trailing slash)."""

    usergroups: dict[str, list[str]] = field(default_factory=dict)
    socket_url: str | None = None
    missing_channels: set[str] = field(default_factory=set)
    scopes: str = "chat:write,usergroups:read"
    """What ``auth.test`` says the bot token holds (Slack's ``x-oauth-scopes`` header)."""
    calls: list[Call] = field(default_factory=list)
    revoked: set[str] = field(default_factory=set)
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    views: dict[str, dict[str, Any]] = field(default_factory=dict)
    url: str = ""
    peers: list[tuple[str, int]] = field(default_factory=list)
    """The client address of each request, in order: one per connection kept alive."""
    _triggers: dict[str, tuple[float, bool]] = field(default_factory=dict)
    _limited: dict[str, int] = field(default_factory=dict)
    _failing: dict[str, list[str]] = field(default_factory=dict)
    _delays: dict[str, float] = field(default_factory=dict)
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Condition | None = None
    _runner: web.AppRunner | None = None

    def __post_init__(self) -> None:
        CREATED.append(self)

    # -- test controls --------------------------------------------------------------------

    def new_trigger(self) -> str:
        trigger = f"{next(self._seq)}.trigger"
        self._triggers[trigger] = (time.monotonic(), False)
        return trigger

    def expire_triggers(self) -> None:
        self._triggers = {k: (0.0, used) for k, (_, used) in self._triggers.items()}

    def revoke(self, token: str) -> None:
        """Every later call made with ``token`` answers ``token_revoked``."""
        self.revoked.add(token)

    def rate_limit(self, method: str, retry_after: int = 0) -> None:
        self._limited[method] = retry_after

    def delay(self, method: str, seconds: float) -> None:
        """Every later call of ``method`` is answered ``seconds`` late (a slow API)."""
        self._delays[method] = seconds

    def fail_next(self, method: str, error: str = "internal_error", *, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` fail with Slack's ``{"ok": false, "error":
        ...}``."""
        self._failing[method] = [error] * times

    def ok_calls(self, method: str) -> list[dict[str, Any]]:
        return [c.args for c in self.calls if c.method == method and c.ok]

    def errors(self) -> list[Call]:
        return [c for c in self.calls if not c.ok]

    def invalid(self) -> list[Call]:
        """The calls Slack would refuse for their shape (:attr:`Call.refused`)."""
        return [c for c in self.calls if c.refused is not None]

    async def wait_for(
        self,
        method: str,
        match: Callable[[dict[str, Any]], bool] = lambda _: True,
        *,
        count: int = 1,
        within: float = 60.0,
    ) -> list[dict[str, Any]]:
        """Until ``count`` successful ``method`` calls match; returns them (raises on timeout)."""
        assert self._changed is not None

        def found() -> list[dict[str, Any]]:
            return [a for a in self.ok_calls(method) if match(a)]

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(found()) >= count), within)
        return found()

    # -- server ---------------------------------------------------------------------------

    async def start(self) -> FakeSlack:
        self._changed = asyncio.Condition()
        app = web.Application()
        app.router.add_post("/api/{method}", self._handle)
        app.router.add_get("/api/{method}", self._handle)  # slack_sdk GETs some read methods
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/api/"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if request.transport is not None:
            self.peers.append(request.transport.get_extra_info("peername"))
        args = await _read_args(request)
        authorization = request.headers.get("Authorization", "")
        judged = refusal(method, args, bearer=authorization.startswith("Bearer "))
        if method in self._delays:
            await asyncio.sleep(self._delays[method])
        if method in self._limited:
            retry_after = self._limited.pop(method)
            await self._record(Call(method, args, ok=False, error="ratelimited", refused=judged))
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(retry_after)},
            )
        token = authorization.removeprefix("Bearer ")
        wanted = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token in self.revoked:
            body = {"ok": False, "error": "token_revoked"}
        elif token != wanted:
            body = {"ok": False, "error": "invalid_auth"}
        elif self._failing.get(method):
            body = {"ok": False, "error": self._failing[method].pop()}
        elif judged is not None:
            body = judged.body()
        else:
            handler = getattr(self, "_m_" + method.replace(".", "_"), None)
            body = {"ok": False, "error": "unknown_method"} if handler is None else handler(args)
        return await self._answer(method, args, body, judged)

    async def _answer(
        self, method: str, args: dict[str, Any], body: dict[str, Any], judged: Refusal | None
    ) -> web.Response:
        ok, error = bool(body.get("ok")), body.get("error")
        await self._record(Call(method, args, ok=ok, error=error, response=body, refused=judged))
        headers = {"x-oauth-scopes": self.scopes} if method == "auth.test" and ok else None
        return web.json_response(body, headers=headers)

    async def _record(self, call: Call) -> None:
        assert self._changed is not None
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    # -- methods --------------------------------------------------------------------------

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake.slack.com/",
            "team": "Fake",
            "user": "askbot",
            "team_id": "T0FAKE",
            "user_id": "UBOT0001",
            "bot_id": "BBOT0001",
        }

    def _m_conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel", "")
        if not channel or channel in self.missing_channels:
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "channel": {"id": channel, "name": "general", "is_member": True}}

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel")
        if not channel or channel in self.missing_channels:
            return {"ok": False, "error": "channel_not_found"}
        if channel.startswith(("U", "W")):  # posting to a user id lands in the bot's DM
            channel = "D" + channel[1:]
        ts = f"{int(time.time())}.{next(self._seq):06d}"
        message = {"ts": ts, "channel": channel, **args}
        if args.get("thread_ts"):
            message["thread_ts"] = args["thread_ts"]
        self.messages[(channel, ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (args.get("channel", ""), args.get("ts", ""))
        if key not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        self.messages[key] = {**self.messages[key], **args}
        return {"ok": True, "channel": key[0], "ts": key[1], "text": args.get("text", "")}

    def _m_chat_getPermalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = args.get("channel", ""), args.get("message_ts", "")
        if (channel, ts) not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        link = f"https://fake.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        return {"ok": True, "channel": channel, "permalink": link}

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("channel") in self.missing_channels:
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "message_ts": f"{int(time.time())}.{next(self._seq):06d}"}

    def _m_views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        trigger = args.get("trigger_id", "")
        issued = self._triggers.get(trigger)
        if issued is None:
            return {"ok": False, "error": "invalid_trigger_id"}
        if issued[1]:
            return {"ok": False, "error": "exchanged_trigger_id"}
        if time.monotonic() - issued[0] > TRIGGER_TTL:
            return {"ok": False, "error": "expired_trigger_id"}
        self._triggers[trigger] = (issued[0], True)
        view = args["view"]
        view_id = f"V{next(self._seq):08d}"
        stored = {**view, "id": view_id, "hash": f"h{next(self._seq)}", "state": {"values": {}}}
        self.views[view_id] = stored
        return {"ok": True, "view": stored}

    def _m_views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        view_id = args.get("view_id", "")
        current = self.views.get(view_id)
        if current is None:
            return {"ok": False, "error": "not_found"}
        if args.get("hash") and args["hash"] != current["hash"]:
            return {"ok": False, "error": "hash_conflict"}
        view = args["view"]
        stored = {**view, "id": view_id, "hash": f"h{next(self._seq)}", "state": {"values": {}}}
        self.views[view_id] = stored
        return {"ok": True, "view": stored}

    def _m_usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = args.get("usergroup", "")
        if group not in self.usergroups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(self.usergroups[group])}

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.socket_url is None:
            return {"ok": False, "error": "not_allowed_token_type"}
        return {"ok": True, "url": self.socket_url}


async def _read_args(request: web.Request) -> dict[str, Any]:
    if request.method == "GET":
        return dict(request.query)
    raw = await request.text()
    if request.content_type == "application/json":
        data = json.loads(raw or "{}")
        return dict(data) if isinstance(data, dict) else {}
    args: dict[str, Any] = dict(parse_qsl(raw))
    for key in ("blocks", "view"):  # form-encoded clients send these as JSON strings
        if isinstance(args.get(key), str):
            args[key] = json.loads(args[key])
    return args
