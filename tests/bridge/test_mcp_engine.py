"""The MCP server routed through the ask engine: a ChatHandler with the in-memory poster and store.

The test plays the teammate: it waits until the question set is "on screen" (the poster's event),
then answers through the store exactly as a platform's click handler would. Over streamable HTTP.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp import Client

from bridge import Answer
from bridge.asking import AskPolicy, ChatHandler
from bridge.cli.mcp import ChatRoute, chat_route_from_env
from bridge.feed import render_delivery
from bridge.memory_poster import MemoryPoster
from bridge.platform import Platform
from bridge.record import AskStatus, Destination, Responder
from bridge.store.memory import MemoryStore
from tests.support.mcp_fixtures import answers_of, http_server, text_of
from tests.support.samples import SHORT_FORMAT_AND_SECTIONS as QUESTIONS

TEAMMATE = Responder(user_id="U42", name="Ada")
ANSWERS = [
    Answer(question="Which format?", selected=("Detailed",)),
    Answer(question="Which sections?", selected=("Intro", "Appendix"), other_text="a glossary"),
]


def chat(policy: AskPolicy) -> tuple[ChatHandler, MemoryPoster, MemoryStore]:
    poster, store = MemoryPoster(), MemoryStore()
    handler = ChatHandler(poster, store, Destination(platform="memory", channel="C1"), policy)
    return handler, poster, store


async def test_answered_in_chat_while_the_call_waits() -> None:
    handler, poster, store = chat(AskPolicy(wait=60))
    progressed = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        progressed.set()

    async def teammate() -> None:
        record = await poster.next_post()
        await progressed.wait()  # the client hears progress while the teammate thinks
        assert record.destination.channel == "C1"
        assert record.context["via"] == "mcp"
        result = await store.submit(record.id, TEAMMATE, ANSWERS)
        assert result.ok

    async with http_server(handler, progress_interval=0.02) as url, Client(url) as client:
        answering = asyncio.create_task(teammate())
        result = await client.call_tool(
            "ask_user", {"questions": QUESTIONS}, progress_callback=on_progress
        )
        await answering
    assert answers_of(result) == [
        {"question": "Which format?", "selected": ["Detailed"], "other_text": None},
        {
            "question": "Which sections?",
            "selected": ["Intro", "Appendix"],
            "other_text": "a glossary",
        },
    ]
    (record,) = poster.posts
    done = await store.get(record.id)
    assert done is not None and done.status is AskStatus.ANSWERED


async def test_after_the_wait_the_deferred_result_names_the_ask_and_the_feed_delivers() -> None:
    handler, poster, store = chat(AskPolicy(wait=0.05))  # nobody answers in time
    async with http_server(handler) as url, Client(url) as client:
        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
    body = json.loads(text_of(result))
    assert not result.is_error
    assert body["status"] == "deferred"
    (record,) = poster.posts
    assert body["ask_id"] == record.id
    assert result.structured_content == body

    # Later a teammate answers; the host takes it from the feed and matches the ask id.
    assert (await store.submit(record.id, TEAMMATE, ANSWERS)).ok
    feed = store.feed("host")
    delivery = await anext(feed)
    assert delivery.record.id == body["ask_id"]
    assert json.loads(render_delivery(delivery))["answers"][1]["other_text"] == "a glossary"
    await store.ack(delivery)


async def test_client_cancelling_the_call_cancels_the_ask() -> None:
    handler, poster, store = chat(AskPolicy(wait=60))
    async with http_server(handler) as url, Client(url) as client:
        call = asyncio.create_task(client.call_tool("ask_user", {"questions": QUESTIONS}))
        record = await poster.next_post()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        current = await store.wait(record.id, 30)  # pushed when the server closes the ask
    assert current is not None and current.status is AskStatus.CANCELLED


class FakePlatform:
    """Stands in for an installed platform found through the entry point."""

    name = "memory"

    def __init__(self) -> None:
        self.the_poster = MemoryPoster()

    def configured(self) -> bool:
        return True

    def poster(self) -> MemoryPoster:
        return self.the_poster

    def receiver(self, store: Any) -> Any:
        raise AssertionError("building a route receives nothing yet")


def test_chat_route_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    platform = FakePlatform()
    assert isinstance(platform, Platform)
    monkeypatch.setattr("bridge.cli.mcp.resolve_platform", lambda name: platform)
    monkeypatch.delenv("REDIS_URL", raising=False)
    env = {"ASK_BRIDGE_PLATFORM": "memory", "ASK_BRIDGE_CHANNEL": " C7 "}
    route = chat_route_from_env(wait=30, environ=env)
    assert isinstance(route, ChatRoute)
    assert route.serve_clicks  # embedded store: clicks must be handled in this process
    assert isinstance(route.store, MemoryStore)
    assert isinstance(route.handler, ChatHandler)
    assert route.handler.destination == Destination(platform="memory", channel="C7")
    assert route.handler.policy.wait == 30
    assert route.handler.poster is platform.the_poster


def test_standalone_chat_route_never_defers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without REDIS_URL a deferred ask would wait in this process's memory for a feed reader
    that does not exist: like a standalone ``ask``, the call blocks and a wait that runs out
    closes the ask as expired."""
    monkeypatch.setattr("bridge.cli.mcp.resolve_platform", lambda name: FakePlatform())
    env = {"ASK_BRIDGE_PLATFORM": "memory", "ASK_BRIDGE_CHANNEL": "C7"}
    monkeypatch.delenv("REDIS_URL", raising=False)
    route = chat_route_from_env(wait=5, environ=env)
    assert route is not None and isinstance(route.handler, ChatHandler)
    policy = route.handler.policy
    assert (policy.mode, policy.on_timeout, policy.wait) == ("block", "error", 5)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    shared = chat_route_from_env(wait=5, environ=env)
    assert shared is not None and isinstance(shared.handler, ChatHandler)
    assert not shared.serve_clicks and shared.handler.policy.on_timeout == "defer"
