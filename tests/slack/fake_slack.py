"""A fake Slack Web API on loopback that answers -- and refuses -- like Slack.

One aiohttp route ``POST /api/{method}`` takes JSON or form bodies, checks the bot token, records
every call, and rejects what Slack would: blocks failing slack_sdk's own validation or the limits
it leaves unchecked -- empty or over-3000-character text objects, a section without text or
fields, option descriptions over 75 characters -- (``invalid_blocks``), block JSON over about
13.2k characters (``msg_blocks_too_long``), over-long text (``msg_too_long``), channels listed in
``missing_channels`` (``channel_not_found``), unknown messages (``message_not_found``),
``trigger_id`` s unknown (``invalid_trigger_id``), used (``exchanged_trigger_id``) or stale
(``expired_trigger_id``), and stale view hashes (``hash_conflict``).
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
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

BLOCKS_JSON_LIMIT = 13_200
TEXT_LIMIT = 40_000
TRIGGER_TTL = 3.0
TEXT_OBJECT_LIMIT = 3000  # any plain_text / mrkdwn object: 1 to 3000 characters
SECTION_TEXT_LIMIT = 3000
FIELD_TEXT_LIMIT = 2000
OPTION_DESCRIPTION_LIMIT = 75
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
    _failing: dict[str, str] = field(default_factory=dict)
    _delays: dict[str, float] = field(default_factory=dict)
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Condition | None = None
    _runner: web.AppRunner | None = None

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

    def fail_next(self, method: str, error: str = "internal_error") -> None:
        """The next call of ``method`` fails with Slack's ``{"ok": false, "error": ...}``."""
        self._failing[method] = error

    def ok_calls(self, method: str) -> list[dict[str, Any]]:
        return [c.args for c in self.calls if c.method == method and c.ok]

    def errors(self) -> list[Call]:
        return [c for c in self.calls if not c.ok]

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
        if method in self._delays:
            await asyncio.sleep(self._delays[method])
        if method in self._limited:
            retry_after = self._limited.pop(method)
            await self._record(Call(method, args, ok=False, error="ratelimited"))
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(retry_after)},
            )
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        wanted = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token in self.revoked:
            return await self._answer(method, args, {"ok": False, "error": "token_revoked"})
        if token != wanted:
            return await self._answer(method, args, {"ok": False, "error": "invalid_auth"})
        if method in self._failing:
            return await self._answer(
                method, args, {"ok": False, "error": self._failing.pop(method)}
            )
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return await self._answer(method, args, {"ok": False, "error": "unknown_method"})
        body: dict[str, Any] = handler(args)
        return await self._answer(method, args, body)

    async def _answer(
        self, method: str, args: dict[str, Any], body: dict[str, Any]
    ) -> web.Response:
        ok, error = bool(body.get("ok")), body.get("error")
        await self._record(Call(method, args, ok=ok, error=error, response=body))
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
        problem = check_message(args)
        if problem:
            return {"ok": False, "error": problem}
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
        problem = check_message(args)
        if problem:
            return {"ok": False, "error": problem}
        self.messages[key] = {**self.messages[key], **args}
        return {"ok": True, "channel": key[0], "ts": key[1], "text": args.get("text", "")}

    def _m_chat_getPermalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = args.get("channel", ""), args.get("message_ts", "")
        if (channel, ts) not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        link = f"https://fake.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        return {"ok": True, "channel": channel, "permalink": link}

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel") or not args.get("user"):
            return {"ok": False, "error": "channel_not_found"}
        problem = check_message(args)
        if problem:
            return {"ok": False, "error": problem}
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
        view, problem = check_view(args.get("view"))
        if problem:
            return {"ok": False, "error": problem}
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
        view, problem = check_view(args.get("view"))
        if problem:
            return {"ok": False, "error": problem}
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


def blocks_size(blocks: list[Any]) -> int:
    raw = json.dumps(blocks, ensure_ascii=False, separators=(",", ":"))
    return len(raw.encode("utf-16-le")) // 2


def check_message(args: dict[str, Any]) -> str | None:
    text = args.get("text")
    blocks = args.get("blocks")
    if not text and not blocks:
        return "no_text"
    if text and len(text) > TEXT_LIMIT:
        return "msg_too_long"
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) > 50:
        return "invalid_blocks"
    if blocks_size(blocks) > BLOCKS_JSON_LIMIT:
        return "msg_blocks_too_long"
    return check_blocks(blocks)


def check_view(view: Any) -> tuple[dict[str, Any], str | None]:
    if not isinstance(view, dict) or view.get("type") != "modal":
        return {}, "invalid_arguments"
    title = (view.get("title") or {}).get("text", "")
    if not title or len(title) > 24:
        return view, "invalid_arguments"
    blocks = view.get("blocks") or []
    if len(blocks) > 100:
        return view, "invalid_arguments"
    if any(b.get("type") == "input" for b in blocks) and not view.get("submit"):
        return view, "invalid_arguments"
    if len(view.get("private_metadata") or "") > 3000:
        return view, "invalid_arguments"
    return view, check_blocks(blocks)


def check_blocks(blocks: list[Any]) -> str | None:
    """What slack_sdk validates, plus the limits it does not check."""
    block_ids: set[str] = set()
    action_ids: set[str] = set()
    for raw in blocks:
        if not isinstance(raw, dict):
            return "invalid_blocks"
        try:
            parsed = Block.parse(raw)
            if parsed is None or parsed.to_dict() is None:
                return "invalid_blocks"
        except (SlackObjectFormationError, KeyError, TypeError, ValueError):
            return "invalid_blocks"
        block_id = raw.get("block_id")
        if block_id is not None:
            if block_id in block_ids:
                return "invalid_blocks"
            block_ids.add(block_id)
        elements = list(raw.get("elements") or [])
        if raw.get("element"):
            elements.append(raw["element"])
        if raw.get("accessory"):
            elements.append(raw["accessory"])
        for el in elements:
            action_id = el.get("action_id") if isinstance(el, dict) else None
            if action_id is not None:
                if action_id in action_ids and raw.get("type") != "input":
                    return "invalid_blocks"
                action_ids.add(action_id)
            if isinstance(el, dict) and el.get("type") in ("checkboxes", "radio_buttons"):
                if not 1 <= len(el.get("options") or []) <= 10:
                    return "invalid_blocks"
            if isinstance(el, dict) and el.get("type") == "plain_text_input":
                if not 1 <= int(el.get("max_length", 3000)) <= 3000:
                    return "invalid_blocks"
        if raw.get("type") == "section" and not _section_ok(raw):
            return "invalid_blocks"
        if not all(_text_ok(t) for t in _text_objects(raw)):
            return "invalid_blocks"
        if any(len(_text(o.get("description"))) > OPTION_DESCRIPTION_LIMIT for o in _options(raw)):
            return "invalid_blocks"
    return None


def _section_ok(raw: dict[str, Any]) -> bool:
    """A section needs ``text`` (1-3000 chars) or ``fields`` (at most 10, each 1-2000)."""
    fields = raw.get("fields")
    if "text" not in raw and not fields:
        return False
    if "text" in raw and not 1 <= len(_text(raw["text"])) <= SECTION_TEXT_LIMIT:
        return False
    if fields is not None:
        if not isinstance(fields, list) or not 1 <= len(fields) <= 10:
            return False
        return all(1 <= len(_text(f)) <= FIELD_TEXT_LIMIT for f in fields)
    return True


def _text(obj: Any) -> str:
    return str(obj.get("text", "")) if isinstance(obj, dict) else ""


def _text_objects(node: Any) -> list[dict[str, Any]]:
    """Every ``plain_text`` / ``mrkdwn`` text object anywhere inside ``node``."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") in ("plain_text", "mrkdwn"):
            found.append(node)
        for value in node.values():
            found += _text_objects(value)
    elif isinstance(node, list):
        for item in node:
            found += _text_objects(item)
    return found


def _text_ok(obj: dict[str, Any]) -> bool:
    """Slack's rule for every text object: a string of 1 to 3000 characters."""
    text = obj.get("text")
    return isinstance(text, str) and 1 <= len(text) <= TEXT_OBJECT_LIMIT


def _options(node: Any) -> list[dict[str, Any]]:
    """Every option object (in checkboxes, radio buttons, selects, overflow menus) in ``node``."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("options", "initial_options") and isinstance(value, list):
                found += [o for o in value if isinstance(o, dict)]
            found += _options(value)
    elif isinstance(node, list):
        for item in node:
            found += _options(item)
    return found
