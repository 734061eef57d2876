"""Where the examples ask their questions: in Slack when it is configured, else at stand-ins.

Slack, as docs/tool-contract.md sets it up, when ``SLACK_BOT_TOKEN`` is set (and
``SLACK_API_URL``, if not slack.com's): the questions are posted in the channel
``ASK_BRIDGE_CHANNEL`` names, and the ask is kept in the Redis ``REDIS_URL`` names, where
``ask-bridge serve`` -- run with the same ``SLACK_*`` settings, ``REDIS_URL`` and
``ASK_BRIDGE_KEY_PREFIX`` -- records the teammate's click. Without ``SLACK_BOT_TOKEN``, stand-ins
answer each question with its first option, so an example runs with nothing but a model endpoint.
"""

from __future__ import annotations

import os
from typing import Any

from bridge import Question
from bridge.asking import AskPolicy, ChatHandler
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.platform import Platform, load_platform
from bridge.record import AskRecord, Destination, MessageRef, Responder
from bridge.settings import open_store
from bridge.store.base import Store
from bridge.store.memory import MemoryStore
from bridge.tool import AskUserCallback


def ask_handler() -> AskUserCallback:
    """A handler whose call waits for the answer: Slack's, or :func:`pick_first`."""
    if not os.environ.get("SLACK_BOT_TOKEN"):
        return pick_first
    return slack_handler(open_store(), AskPolicy(wait=600))  # then the model is told to wait


def deferring_handler() -> tuple[ChatHandler, Store]:
    """A handler that posts the questions and defers at once, and the store whose answers feed
    brings the answer: Slack's with the Redis store, or :class:`StandInChat` in memory."""
    policy = AskPolicy(mode="defer")
    if os.environ.get("SLACK_BOT_TOKEN"):
        store = open_store()
        return slack_handler(store, policy), store
    memory = MemoryStore()
    destination = Destination(platform="memory", channel="C1")
    return ChatHandler(StandInChat(memory), memory, destination, policy), memory


def slack_handler(store: Store, policy: AskPolicy) -> ChatHandler:
    """The Quick start's Slack handler, asking in ``ASK_BRIDGE_CHANNEL``."""
    slack = load_platform("slack")  # reads SLACK_BOT_TOKEN etc.
    assert isinstance(slack, Platform)
    channel = Destination(platform="slack", channel=os.environ["ASK_BRIDGE_CHANNEL"])
    return ChatHandler(slack.poster(), store, channel, policy)


# -- the stand-ins, so an example runs without Slack ---------------------------------------------


def pick_first(questions: list[Question], context: dict[str, Any]) -> dict[str, str]:
    """A stand-in handler: answers each question with its first option."""
    return {q.question: q.options[0].label for q in questions}


class StandInChat(MemoryPoster):
    """A stand-in for Slack: shows nothing, and a stand-in teammate answers each ask with its
    first options the moment it is posted, through the store, as ``ask-bridge serve`` records a
    click."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    async def post(self, record: AskRecord) -> MessageRef:
        message = await super().post(record)
        questions = record.questions.questions
        firsts = [Answer(question=q.question, selected=(q.options[0].label,)) for q in questions]
        await self.store.submit(record.id, Responder(user_id="U0STANDIN"), firsts)
        return message
