"""Agents as their users run them, answered in Slack: a real Redis, the fake Slack, one
``ask-bridge serve`` replica, and a teammate who answers by signed clicks.

All of it runs on a loop of its own in a daemon thread, so a synchronous agent (no loop: a
sync OpenAI loop, chatlas's ``chat()``, LangChain's ``invoke()``) and an async one (its own loop)
drive it alike: the teammate's answers are scheduled with :meth:`Rig.answer`, which returns at
once and clicks in the background when the question shows up in the fake Slack. The agent side
is built with :meth:`Rig.handler`: a :class:`~bridge.asking.ChatHandler` over the Slack poster and
a Redis store of the agent's own, as docs/tool-contract.md (Asking in a chat) builds it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from bridge import loops
from bridge.asking import AskPolicy, ChatHandler
from bridge.record import Destination
from bridge.store.redis import RedisStore
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from tests.support.procs import Serve, cli_env
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import (
    SIGNING_SECRET,
    block_actions,
    form_body,
    signed,
    view_submission,
)

T = TypeVar("T")
CHANNEL = "C0AGENTS"
MATE = "U0MATE"


@dataclass(frozen=True)
class Posted:
    """A question message in the fake Slack."""

    channel: str
    ts: str
    ask_id: str
    text: str


class Rig:
    """Redis (given), the fake Slack and ``serve``, on the rig's own loop; see the module doc."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.prefix = f"ag{uuid.uuid4().hex[:6]}"
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="rig", daemon=True)
        self._thread.start()
        self._stores: list[RedisStore] = []
        self.fake, self.serve, self._session = self.run(self._start())

    async def _start(self) -> tuple[FakeSlack, Serve, aiohttp.ClientSession]:
        fake = await FakeSlack().start()
        env = cli_env(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=fake.url,
            REDIS_URL=self.redis_url,
            ASK_BRIDGE_KEY_PREFIX=self.prefix,
        )
        serve = await Serve(env).start()
        return fake, serve, aiohttp.ClientSession()

    def run(self, coro: Coroutine[Any, Any, T], within: float = 90) -> T:
        """Run ``coro`` on the rig's loop and wait for it (from sync code, or a test's loop
        blocked briefly)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(within)

    def close(self) -> None:
        async def stop() -> None:
            await self._session.close()
            await self.serve.stop()
            await self.fake.stop()

        self.run(stop())
        for store in self._stores:  # its links on loops still running; the rest closed with theirs
            loops.run(store.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    # -- the agent's side --------------------------------------------------------------------

    def store(self, **options: Any) -> RedisStore:
        """A store of the agent's own over the rig's Redis and prefix (what ``serve`` reads)."""
        store = RedisStore.from_url(self.redis_url, prefix=self.prefix, **options)
        self._stores.append(store)
        return store

    def handler(
        self, policy: AskPolicy | None = None, *, store: RedisStore | None = None
    ) -> ChatHandler:
        """The Quick start's Slack handler: the Slack poster (to the fake Slack), a Redis store,
        the rig's channel."""
        poster = SlackPoster(make_client(BOT_TOKEN, self.fake.url))
        destination = Destination(platform="slack", channel=CHANNEL)
        return ChatHandler(poster, store or self.store(), destination, policy or AskPolicy())

    # -- the teammate's side -------------------------------------------------------------------

    def answer(
        self, marker: str, option: int, *, after: float = 0.0, user: str = MATE
    ) -> concurrent.futures.Future[float]:
        """In the background: once a question whose text holds ``marker`` is posted, wait
        ``after`` seconds, then click its ``option`` (its first question, by button) as ``user``
        through ``serve``. The future holds when the click was sent (``time.monotonic()``)."""
        return asyncio.run_coroutine_threadsafe(self._click(marker, option, after, user), self.loop)

    def type_answer(
        self, marker: str, text: str, *, user: str = MATE
    ) -> concurrent.futures.Future[float]:
        """In the background: answer the first question of the message holding ``marker`` with
        typed words, through its ``Other…`` form."""
        return asyncio.run_coroutine_threadsafe(self._type(marker, text, user), self.loop)

    def posted(self, marker: str) -> Posted:
        """The question message holding ``marker`` (waiting for it)."""
        return self.run(self._posted(marker))

    async def _posted(self, marker: str) -> Posted:
        await self.fake.wait_for("chat.postMessage", lambda a: marker in a["text"], within=60)
        call = next(
            c
            for c in self.fake.calls
            if c.ok and c.method == "chat.postMessage" and marker in c.args["text"]
        )
        action = next(
            el["action_id"]
            for block in call.args["blocks"]
            for el in block.get("elements") or ()
            if str(el.get("action_id", "")).startswith("askb:")
        )
        channel, ts = call.response["channel"], call.response["ts"]
        return Posted(channel, ts, action.split(":")[2], call.args["text"])

    async def _send(self, payload: dict[str, Any]) -> None:
        body = form_body(payload)
        async with self._session.post(self.serve.url, data=body, headers=signed(body)) as resp:
            assert resp.status == 200, await resp.text()

    async def _click(self, marker: str, option: int, after: float, user: str) -> float:
        message = await self._posted(marker)
        await asyncio.sleep(after)
        clicked = time.monotonic()
        action = f"askb:pick:{message.ask_id}:0:{option}"
        await self._send(block_actions(self.fake, message.channel, message.ts, user, action))
        return clicked

    async def _type(self, marker: str, text: str, user: str) -> float:
        message = await self._posted(marker)
        action = f"askb:other:{message.ask_id}:0"
        await self._send(block_actions(self.fake, message.channel, message.ts, user, action))
        await self.fake.wait_for("views.open", lambda a: message.ask_id in json.dumps(a["view"]))
        view_id = next(
            v
            for v, view in self.fake.views.items()
            if message.ask_id in view.get("private_metadata", "")
        )
        values = {"q0.other": {"text": {"type": "plain_text_input", "value": text}}}
        clicked = time.monotonic()
        await self._send(view_submission(self.fake, view_id, user, values))
        return clicked

    def shown_answered(self, marker: str) -> str:
        """The final state of the message holding ``marker`` (waiting for its update): its
        blocks as JSON text."""

        async def final() -> str:
            message = await self._posted(marker)
            await self.fake.wait_for("chat.update", lambda a: a["ts"] == message.ts, within=60)
            return json.dumps(self.fake.messages[(message.channel, message.ts)]["blocks"])

        return self.run(final())
