"""A fake Discord on loopback -- REST API and gateway websocket -- that answers and refuses like
Discord, for the real discord.py.

REST (``/api/v10``): login (``/users/@me``, ``/oauth2/applications/@me``), ``/gateway/bot``, DM
channels, channel messages (create, edit), interaction callbacks (``with_response``) and
follow-ups. Everything is recorded. Every request body is judged by
:func:`tests.support.discord.discord_rules.check_request` -- the route's request schema in
Discord's OpenAPI document and the documented limits it does not state, the very check the
conformance tests make -- and one Discord would reject is answered as Discord answers it: 400
``{"code": 50035, "message": "Invalid Form Body", "errors": {...}}`` with the nested path of each
problem, and kept in :attr:`FakeDiscord.invalid` (the suite fails a test that sent one without
saying it meant to: ``tests/platforms/discord/conftest.py``). Besides: an empty message 400
50006, unknown channels 404 10003, unknown messages 404 10008, a second response to an interaction
400 40060, a response after 3 s (:attr:`FakeDiscord.interaction_ttl`) 404 10062, a modal in answer
to a modal 400 50035, a follow-up to an interaction never responded to 404 10015.
``fail_next(route, ...)`` answers the next call on a route with any of Discord's errors, and
``click(..., answered_elsewhere=True)`` delivers a click that another process of the same bot
has already responded to (Discord then answers this one's response 40060).

Gateway (``/gateway``): HELLO, IDENTIFY -> READY (with ``resume_gateway_url``) and a GUILD_CREATE
per guild, heartbeats and their acks, RESUME -> RESUMED (replaying what was missed), and
``INTERACTION_CREATE`` for clicks (:meth:`FakeDiscord.click`) and modal submissions
(:meth:`FakeDiscord.submit`) sent to one chosen session. ``drop()`` closes sessions abruptly
(discord.py then resumes); ``revoke()`` refuses the token from then on (REST 401, gateway
sessions closed with 4004 "Authentication failed"); ``rate_limit(route)`` answers the next REST
call on that route 429, as Discord does; ``GET /gateway`` serves the websocket at any
path below it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.support.discord import discord_rules

TOKEN = "fake-bot-token"
APP_ID = "900000000000000001"
BOT_ID = "900000000000000002"
GUILD = "800000000000000001"
CHANNEL = "810000000000000001"
THREAD = "810000000000000002"
MISSING_CHANNEL = "810000000000000999"
EPOCH = "2024-01-01T00:00:00+00:00"
INTERACTION_TTL = 3.0


@dataclass
class Call:
    method: str
    path: str
    body: dict[str, Any]
    status: int
    response: Any = None
    at: float = field(default_factory=time.perf_counter)


@dataclass
class Interaction:
    """One interaction sent to the bot, and the responses it got."""

    id: str
    token: str
    type: int
    user: str
    payload: dict[str, Any]
    sent_at: float
    responses: list[dict[str, Any]] = field(default_factory=list)
    followups: list[dict[str, Any]] = field(default_factory=list)
    responded_at: float | None = None


@dataclass
class Session:
    ws: web.WebSocketResponse
    session_id: str
    seq: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)
    identified: asyncio.Event = field(default_factory=asyncio.Event)


STARTED: list[FakeDiscord] = []
"""Every fake started in this process, in order: the suite checks those of each test."""


class Rejected(Exception):
    """An error answer: Discord's status, code and message, and for an invalid body its
    ``errors`` tree (``invalid``: the request broke Discord's rules, not a scripted failure)."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        *,
        errors: dict[str, Any] | None = None,
        invalid: bool = False,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.errors, self.invalid = errors, invalid

    def body(self) -> dict[str, Any]:
        found: dict[str, Any] = {"code": self.code, "message": self.message}
        return found | ({"errors": self.errors} if self.errors is not None else {})


def _bad(message: str) -> Rejected:
    """An invalid request the schema cannot see (what it is depends on the interaction)."""
    errors = {"_errors": [{"code": "INTERACTION_RESPONSE_INVALID", "message": message}]}
    return Rejected(400, 50035, "Invalid Form Body", errors=errors, invalid=True)


def conforms(method: str, path: str, body: dict[str, Any]) -> None:
    """Refuse ``body`` as Discord would if it breaks Discord's rules (a route the document does
    not know is left to the router's 404)."""
    try:
        problems = discord_rules.check_request(method, path, body)
    except KeyError:
        return
    if problems:
        refusal = discord_rules.refusal(problems)
        raise Rejected(
            400, refusal["code"], refusal["message"], errors=refusal["errors"], invalid=True
        )


@dataclass
class FakeDiscord:
    users: dict[str, str] = field(default_factory=dict)
    """User id -> name; members of the guild."""
    roles: dict[str, list[str]] = field(default_factory=dict)
    """User id -> role ids held in the guild."""
    calls: list[Call] = field(default_factory=list)
    invalid: list[Call] = field(default_factory=list)
    """The calls refused because they broke Discord's rules (400 50035, or 50006 for an empty
    message), not because a test scripted a failure."""
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    interactions: dict[str, Interaction] = field(default_factory=dict)
    sessions: list[Session] = field(default_factory=list)
    """Live gateway sessions (identified or resumed, connection open)."""
    known: dict[str, Session] = field(default_factory=dict)
    """Every session ever identified, by id: what RESUME may name."""
    identifies: int = 0
    resumes: int = 0
    revoked: bool = False
    url: str = ""
    gateway_url: str = ""
    _history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: asyncio.Condition | None = None
    _runner: web.AppRunner | None = None
    interaction_ttl: float = INTERACTION_TTL
    """Seconds after it is sent within which an interaction may be responded to (Discord's 3;
    0 makes every click expire before the bot can answer it)."""
    _delays: dict[str, float] = field(default_factory=dict)
    _limited: dict[str, float] = field(default_factory=dict)
    _failing: dict[str, tuple[int, int, str]] = field(default_factory=dict)

    # -- test controls --------------------------------------------------------------------

    def snowflake(self) -> str:
        return str(700000000000000000 + next(self._ids))

    def delay(self, route: str, seconds: float) -> None:
        """Every later REST call whose path contains ``route`` answers ``seconds`` late."""
        self._delays[route] = seconds

    def rate_limit(self, route: str, retry_after: float = 0.05) -> None:
        """The next REST call whose path contains ``route`` answers 429 (doing nothing), with
        ``retry_after`` and the ``Via`` header (discord.py's sign that Discord sent it)."""
        self._limited[route] = retry_after

    def fail_next(self, route: str, status: int, code: int, message: str) -> None:
        """The next REST call whose path contains ``route`` answers ``status`` with Discord's
        error body ``{"code": code, "message": message}``, doing nothing."""
        self._failing[route] = (status, code, message)

    async def changed(self, check: Callable[[], Any], within: float = 60.0) -> Any:
        """Until ``check()`` is truthy (re-checked on every request and gateway event)."""
        assert self._changed is not None
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(check), within)
        return check()

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    def errors(self) -> list[Call]:
        return [c for c in self.calls if c.status >= 400]

    async def posted(self, marker: str, within: float = 60.0) -> dict[str, Any]:
        """The (latest state of the) non-ephemeral message whose embeds mention ``marker``."""

        def find() -> dict[str, Any] | None:
            for m in self.messages.values():
                if not _ephemeral(m) and marker in json.dumps(m["embeds"], ensure_ascii=False):
                    return m
            return None

        found = await self.changed(find, within)
        assert isinstance(found, dict)
        return found

    # -- server ---------------------------------------------------------------------------

    async def start(self) -> FakeDiscord:
        STARTED.append(self)
        self._changed = asyncio.Condition()
        self.users.setdefault(BOT_ID, "askbot")
        app = web.Application()
        app.router.add_get("/gateway{tail:.*}", self._gateway)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/api/v10"
        self.gateway_url = f"ws://127.0.0.1:{port}/gateway"
        return self

    async def stop(self) -> None:
        for s in list(self.sessions):
            await s.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- REST -----------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode(errors="replace")}
        for fragment, seconds in self._delays.items():
            if fragment in path:
                await asyncio.sleep(seconds)
        limited = next((f for f in self._limited if f in path), None)
        if limited is not None:
            retry_after = self._limited.pop(limited)
            limit = {"message": "You are being rate limited.", "retry_after": retry_after}
            self.calls.append(Call(request.method, path, body, 429, limit | {"global": False}))
            return web.Response(
                status=429,
                body=json.dumps(limit | {"global": False}).encode(),
                content_type="application/json",
                headers={"Via": "1.1 google", "Retry-After": str(retry_after)},
            )
        failing = next((f for f in self._failing if f in path), None)
        try:
            if failing is not None:
                raise Rejected(*self._failing.pop(failing))
            if (
                self.revoked or request.headers.get("Authorization") != f"Bot {TOKEN}"
            ) and not path.startswith(("/interactions/", "/webhooks/")):
                raise Rejected(401, 0, "401: Unauthorized")
            conforms(request.method, path, body)
            status, result = 200, self._route(request.method, path, body)
            if result is None:
                status = 204
        except Rejected as exc:
            status, result = exc.status, exc.body()
            invalid = exc.invalid
        else:
            invalid = False
        call = Call(request.method, path, body, status, result)
        self.calls.append(call)
        if invalid:
            self.invalid.append(call)
        await self._notify()
        if status == 204:
            return web.Response(status=204)
        # discord.py only decodes JSON whose Content-Type is exactly application/json
        return web.Response(
            status=status, body=json.dumps(result).encode(), content_type="application/json"
        )

    def _route(self, method: str, path: str, body: dict[str, Any]) -> Any:
        parts = path.strip("/").split("/")
        if (method, path) == ("GET", "/users/@me"):
            return self.user(BOT_ID) | {"bot": True}
        if (method, path) == ("GET", "/oauth2/applications/@me"):
            return self.application()
        if (method, path) == ("GET", "/gateway/bot"):
            limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
            return {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}
        if (method, path) == ("GET", "/gateway"):
            return {"url": self.gateway_url}
        if (method, path) == ("POST", "/users/@me/channels"):
            user = str(body.get("recipient_id"))
            if user not in self.users:
                raise Rejected(400, 50007, "Cannot send messages to this user")
            return {"id": dm_channel(user), "type": 1, "recipients": [self.user(user)]}
        if parts[0] == "guilds" and len(parts) == 4 and parts[2] == "members" and method == "GET":
            if parts[1] != GUILD or parts[3] not in self.users:
                raise Rejected(404, 10007, "Unknown Member")
            return {
                "user": self.user(parts[3]), "roles": self.roles.get(parts[3], []),
                "joined_at": EPOCH, "deaf": False, "mute": False, "flags": 0,
            }  # fmt: skip
        if parts[0] == "channels" and len(parts) == 2 and method == "GET":
            self._channel_ok(parts[1])
            return {
                "id": parts[1], "type": 0, "guild_id": GUILD, "name": "general", "position": 0,
                "permission_overwrites": [], "nsfw": False, "parent_id": None,
            }  # fmt: skip
        if parts[0] == "channels" and len(parts) == 3 and method == "POST":
            return self._create(parts[1], body, author=BOT_ID)
        if parts[0] == "channels" and len(parts) == 4 and method == "PATCH":
            message = self.messages.get(parts[3])
            if message is None or message["channel_id"] != parts[1]:
                raise Rejected(404, 10008, "Unknown Message")
            return self._edit(message, body)
        if parts[0] == "interactions" and parts[-1] == "callback" and method == "POST":
            return self._callback(parts[1], parts[2], body)
        if parts[0] == "webhooks" and len(parts) == 3 and method == "POST":
            return self._followup(parts[2], body)
        if parts[0] == "webhooks" and len(parts) == 5 and method == "PATCH":
            interaction = self._by_token(parts[2])
            original = interaction.payload.get("_original")
            if original is None:
                raise Rejected(404, 10008, "Unknown Message")
            return self._edit(self.messages[original], body)
        raise Rejected(404, 0, f"404: Not Found ({method} {path})")

    def user(self, user_id: str) -> dict[str, Any]:
        name = self.users.get(user_id, f"user{user_id[-4:]}")
        return {
            "id": user_id,
            "username": name,
            "global_name": name,
            "discriminator": "0",
            "avatar": None,
            "bot": user_id == BOT_ID,
        }

    def application(self) -> dict[str, Any]:
        return {
            "id": APP_ID,
            "name": "ask-bridge",
            "icon": None,
            "description": "",
            "bot_public": False,
            "bot_require_code_grant": False,
            "verify_key": "00",
            "owner": self.user(BOT_ID),
            "flags": 0,
            "team": None,
        }

    def _channel_ok(self, channel: str) -> None:
        known = {CHANNEL, THREAD} | {dm_channel(u) for u in self.users}
        if channel not in known:
            raise Rejected(404, 10003, "Unknown Channel")

    def _create(
        self, channel: str, body: dict[str, Any], *, author: str, flags: int = 0
    ) -> dict[str, Any]:
        self._channel_ok(channel)
        if not (body.get("content") or body.get("embeds") or body.get("components")):
            raise Rejected(400, 50006, "Cannot send an empty message", invalid=True)
        message = {
            "id": self.snowflake(),
            "channel_id": channel,
            "author": self.user(author),
            "content": body.get("content") or "",
            "timestamp": EPOCH,
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": body.get("embeds") or [],
            "components": body.get("components") or [],
            "pinned": False,
            "type": 0,
            "flags": flags | int(body.get("flags") or 0),
            "allowed_mentions": body.get("allowed_mentions"),
        }
        if channel in (CHANNEL, THREAD):
            message["guild_id"] = GUILD
        self.messages[message["id"]] = message
        self._history[message["id"]] = [body]
        return message

    def _edit(self, message: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        for key in ("content", "embeds", "components"):
            if key in body:
                empty: Any = "" if key == "content" else []
                message[key] = body[key] if body[key] is not None else empty
        message["allowed_mentions"] = body.get("allowed_mentions")
        message["edited_timestamp"] = EPOCH
        self._history[message["id"]].append(body)
        return message

    def history(self, message_id: str) -> list[dict[str, Any]]:
        """Every body sent for this message: its creation, then each edit."""
        return self._history[message_id]

    def _by_token(self, token: str) -> Interaction:
        for i in self.interactions.values():
            if i.token == token:
                return i
        raise Rejected(404, 10015, "Unknown Webhook")

    def _callback(self, interaction_id: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        interaction = self.interactions.get(interaction_id)
        if interaction is None or interaction.token != token:
            raise Rejected(404, 10062, "Unknown interaction")
        if time.perf_counter() - interaction.sent_at > self.interaction_ttl:
            raise Rejected(404, 10062, "Unknown interaction")
        if interaction.responses:
            raise Rejected(400, 40060, "Interaction has already been acknowledged.")
        kind, data = body.get("type"), body.get("data") or {}
        source = interaction.payload.get("message")
        if kind == 9:
            if interaction.type == 5:
                raise _bad("a modal cannot answer a modal submission")
        elif kind in (6, 7):
            if source is None:
                raise _bad("no message to update")
            if kind == 7:
                self._edit(self.messages[source["id"]], data)
        elif kind == 4:
            made = self._create(source["channel_id"] if source else CHANNEL, data, author=BOT_ID)
            interaction.payload["_original"] = made["id"]
            made["interaction_user"] = interaction.user
        elif kind == 5:
            made = self._create(
                source["channel_id"] if source else CHANNEL,
                {"content": "thinking…", "flags": int(data.get("flags") or 0)},
                author=BOT_ID,
            )
            interaction.payload["_original"] = made["id"]
            made["interaction_user"] = interaction.user
        else:
            raise _bad(f"unknown interaction response type {kind}")
        interaction.responses.append(body)
        interaction.responded_at = time.perf_counter()
        return {
            "interaction": {
                "id": interaction.id,
                "type": interaction.type,
                "response_message_id": interaction.payload.get("_original"),
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(int(data.get("flags") or 0) & 64),
            },
            "resource": {"type": kind},
        }

    def _followup(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        interaction = self._by_token(token)
        if not interaction.responses:
            raise Rejected(404, 10015, "Unknown Webhook")
        source = interaction.payload.get("message")
        made = self._create(source["channel_id"] if source else CHANNEL, body, author=BOT_ID)
        made["interaction_user"] = interaction.user
        interaction.followups.append(body)
        return made

    # -- gateway --------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None})
        session: Session | None = None
        async for msg in ws:
            if msg.type is not WSMsgType.TEXT:
                break
            data = json.loads(msg.data)
            op = data.get("op")
            if op == 1:
                await ws.send_json({"op": 11, "d": None, "s": None, "t": None})
            elif op in (2, 6) and self.revoked:
                await ws.close(code=4004, message=b"Authentication failed.")
                break
            elif op == 2:
                assert data["d"]["token"] == TOKEN
                assert not int(data["d"]["intents"]) & (1 << 1 | 1 << 8 | 1 << 15)  # privileged
                self.identifies += 1
                session = Session(ws, f"session{next(self._ids)}")
                self.known[session.session_id] = session
                self.sessions.append(session)
                await self._dispatch(session, "READY", self._ready(session))
                await self._dispatch(session, "GUILD_CREATE", self.guild())
                session.identified.set()
            elif op == 6:
                old = self.known.get(data["d"]["session_id"])
                if old is None:
                    await ws.send_json({"op": 9, "d": False, "s": None, "t": None})
                    continue
                self.resumes += 1
                old.ws = ws
                session = old
                missed = [e for e in old.sent if e["s"] > int(data["d"]["seq"] or 0)]
                for event in missed:
                    await ws.send_json(event)
                await self._dispatch(old, "RESUMED", {})
                if old not in self.sessions:
                    self.sessions.append(old)
            await self._notify()
        if session is not None and session.ws is ws and session in self.sessions:
            self.sessions.remove(session)
        await self._notify()
        return ws

    async def _dispatch(self, session: Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "s": session.seq, "t": event, "d": data}
        session.sent.append(frame)
        if not session.ws.closed:
            await session.ws.send_json(frame)

    def _ready(self, session: Session) -> dict[str, Any]:
        return {
            "v": 10,
            "user": self.user(BOT_ID) | {"bot": True},
            "guilds": [{"id": GUILD, "unavailable": True}],
            "session_id": session.session_id,
            "resume_gateway_url": self.gateway_url + "/resume",
            "application": {"id": APP_ID, "flags": 0},
            "private_channels": [],
        }

    def guild(self) -> dict[str, Any]:
        role_ids = sorted({r for rs in self.roles.values() for r in rs})
        roles = [_role(GUILD, "@everyone", 0)] + [
            _role(r, f"role{r[-4:]}", i + 1) for i, r in enumerate(role_ids)
        ]
        return {
            "id": GUILD,
            "name": "Fake guild",
            "icon": None,
            "owner_id": BOT_ID,
            "roles": roles,
            "emojis": [],
            "stickers": [],
            "features": [],
            "member_count": len(self.users),
            "members": [],
            "channels": [
                {"id": CHANNEL, "type": 0, "name": "general", "position": 0, "guild_id": GUILD}
            ],
            "threads": [
                {
                    "id": THREAD,
                    "type": 11,
                    "name": "a thread",
                    "parent_id": CHANNEL,
                    "guild_id": GUILD,
                    "owner_id": BOT_ID,
                    "thread_metadata": {
                        "archived": False,
                        "auto_archive_duration": 1440,
                        "archive_timestamp": EPOCH,
                        "locked": False,
                    },
                    "message_count": 0,
                    "member_count": 1,
                }
            ],
            "voice_states": [],
            "presences": [],
            "unavailable": False,
            "large": False,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "system_channel_id": None,
            "system_channel_flags": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "joined_at": EPOCH,
        }

    async def drop(self) -> None:
        """Close every gateway connection abruptly (a network blip): discord.py resumes."""
        for s in list(self.sessions):
            await s.ws.close(code=4000, message=b"blip")

    async def revoke(self) -> None:
        """The token is revoked: sessions close with 4004 and REST answers 401 from now on."""
        self.revoked = True
        for s in list(self.sessions):
            await s.ws.close(code=4004, message=b"Authentication failed.")

    async def wait_sessions(self, count: int = 1, within: float = 60.0) -> list[Session]:
        def ready() -> list[Session]:
            live = [s for s in self.sessions if s.identified.is_set() and not s.ws.closed]
            return live if len(live) >= count else []

        found = await self.changed(ready, within)
        assert isinstance(found, list)
        return found

    # -- interactions ---------------------------------------------------------------------

    async def _send(
        self,
        user: str,
        kind: int,
        data: dict[str, Any],
        channel: str,
        message: dict[str, Any] | None,
        session: Session | None,
        *,
        answered_elsewhere: bool = False,
    ) -> Interaction:
        live = session or (await self.wait_sessions())[0]
        interaction = self.interaction(user, kind, data, channel, message)
        if answered_elsewhere:  # a deferred update, the least another process could have sent
            interaction.responses.append({"type": 6})
            interaction.responded_at = interaction.sent_at
        await self._dispatch(live, "INTERACTION_CREATE", interaction.payload)
        return interaction

    def interaction(
        self,
        user: str,
        kind: int,
        data: dict[str, Any],
        channel: str,
        message: dict[str, Any] | None = None,
    ) -> Interaction:
        """An interaction from ``user`` (``kind`` 3 a click, 5 a modal submission) as Discord
        would send it, known to the fake (so it judges the responses) but not dispatched: the
        gateway events are built from it, and a test may hand its payload to discord.py."""
        interaction_id, token = self.snowflake(), f"tok{next(self._ids)}"
        payload: dict[str, Any] = {
            "id": interaction_id,
            "application_id": APP_ID,
            "type": kind,
            "token": token,
            "version": 1,
            "attachment_size_limit": 8388608,
            "data": data,
            "channel_id": channel,
            "app_permissions": "0",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": GUILD},
            "context": 0 if channel in (CHANNEL, THREAD) else 1,
        }
        if channel in (CHANNEL, THREAD):
            payload["guild_id"] = GUILD
            payload["guild_locale"] = "en-US"
            payload["channel"] = {"id": channel, "type": 0 if channel == CHANNEL else 11}
            payload["member"] = {
                "user": self.user(user),
                "roles": self.roles.get(user, []),
                "joined_at": EPOCH,
                "deaf": False,
                "mute": False,
                "flags": 0,
                "pending": False,
                "nick": None,
                "avatar": None,
                "permissions": "2147483647",
            }
        else:
            payload["channel"] = {"id": channel, "type": 1}
            payload["user"] = self.user(user)
        if message is not None:
            payload["message"] = {k: v for k, v in message.items() if not k.startswith("_")}
            payload["message"].pop("allowed_mentions", None)
            payload["message"].pop("interaction_user", None)
        interaction = Interaction(interaction_id, token, kind, user, payload, time.perf_counter())
        self.interactions[interaction_id] = interaction
        return interaction

    async def click(
        self,
        user: str,
        message: dict[str, Any],
        custom_id: str,
        *,
        session: Session | None = None,
        answered_elsewhere: bool = False,
    ) -> Interaction:
        """``user`` presses the button ``custom_id`` on ``message`` (as it is now).
        ``answered_elsewhere``: another process of the same bot (a second replica, a leftover
        one, run with the same token) responded to the click first."""
        current = self.messages[message["id"]]
        ids = [c["custom_id"] for row in current["components"] for c in row["components"]]
        if custom_id not in ids:
            raise AssertionError(f"no button {custom_id!r} on the message (has {ids})")
        if _ephemeral(current) and current.get("interaction_user") != user:
            raise AssertionError("an ephemeral message is seen only by its user")
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._send(
            user,
            3,
            data,
            current["channel_id"],
            current,
            session,
            answered_elsewhere=answered_elsewhere,
        )

    async def forge_click(self, user: str, message: dict[str, Any], custom_id: str) -> Interaction:
        """A click on a button the message may no longer show (a stale or forged client)."""
        current = dict(self.messages[message["id"]])
        button = {"type": 2, "style": 1, "label": "x", "custom_id": custom_id}
        current["components"] = [{"type": 1, "components": [button]}]
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._send(user, 3, data, current["channel_id"], current, None)

    async def submit(
        self,
        user: str,
        opened_by: Interaction,
        values: dict[str, Any],
        *,
        session: Session | None = None,
    ) -> Interaction:
        """``user`` fills in the modal ``opened_by`` got as its response (``values`` by field
        custom_id: ``str`` for text and radio, ``list`` for checkbox groups) and submits it.
        Required fields must be filled, as Discord's client insists."""
        modal = next(r["data"] for r in opened_by.responses if r.get("type") == 9)
        components = []
        for top in modal["components"]:
            inner = top["component"]
            cid, kind = inner["custom_id"], inner["type"]
            value = values.get(cid)
            if inner.get("required", True) and kind in (4, 21) and not value:
                raise AssertionError(f"required field {cid} left empty")
            if kind == 4:
                sent: dict[str, Any] = {"type": 4, "custom_id": cid, "value": value or ""}
            elif kind == 21:
                sent = {"type": 21, "custom_id": cid, "value": value}
            else:
                sent = {"type": kind, "custom_id": cid, "values": list(value or [])}
            components.append({"type": 18, "id": len(components) + 1, "component": sent})
        unknown = set(values) - {t["component"]["custom_id"] for t in modal["components"]}
        assert not unknown, f"no such fields in the modal: {unknown}"
        data = {"custom_id": modal["custom_id"], "components": components}
        source = opened_by.payload.get("message")
        current = self.messages[source["id"]] if source else None
        channel = current["channel_id"] if current else CHANNEL
        return await self._send(user, 5, data, channel, current, session)

    async def responded(self, interaction: Interaction, within: float = 60.0) -> dict[str, Any]:
        """The interaction's (first) response, once it came."""
        await self.changed(lambda: interaction.responses, within)
        return interaction.responses[0]

    async def told(self, interaction: Interaction, within: float = 60.0) -> str:
        """What the person was told privately: an ephemeral response or follow-up."""
        found = await self.changed(lambda: told_now(interaction), within)
        return str(found)


def told_now(interaction: Interaction) -> str | None:
    """What the person was told privately so far (an ephemeral response or follow-up), if any."""
    for body in interaction.responses:
        data = body.get("data") or {}
        if body.get("type") == 4 and int(data.get("flags") or 0) & 64:
            return str(data.get("content"))
        if body.get("type") == 7 and data.get("content"):
            return str(data["content"])
    for body in interaction.followups:
        if int(body.get("flags") or 0) & 64:
            return str(body.get("content"))
    return None


def assert_conforming(fakes: list[FakeDiscord]) -> None:
    """Fail if any of ``fakes`` refused a request as invalid (400 50035): the bot sent what
    Discord would refuse."""
    refused = [(c.method, c.path, c.response) for f in fakes for c in f.invalid]
    assert not refused, f"Discord would refuse what the bot sent: {refused}"


def dm_channel(user: str) -> str:
    return "6" + user[1:]


def _role(role_id: str, name: str, position: int) -> dict[str, Any]:
    return {
        "id": role_id,
        "name": name,
        "color": 0,
        "hoist": False,
        "position": position,
        "permissions": "0",
        "managed": False,
        "mentionable": True,
        "flags": 0,
    }


def _ephemeral(message: dict[str, Any]) -> bool:
    return bool(int(message.get("flags") or 0) & 64)
