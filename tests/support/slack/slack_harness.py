"""The Slack suite's harness: the Bolt app served over real HTTP, and how a test asks through it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from bridge.http_server import HttpServer
from bridge.models import QuestionSet
from bridge.record import AskRecord, Destination
from bridge.store.redis import RedisStore
from platforms.slack import SlackReceiver
from platforms.slack.app import Interactions
from platforms.slack.client import make_client
from platforms.slack.http import EVENTS_PATH
from platforms.slack.poster import SlackPoster
from platforms.slack.settings import SlackSettings
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, form_body, signed
from tests.support.slack.slack_rules import describe, response_problems

CHANNEL = "C0GENERAL"


def http_receiver(fake: FakeSlack, store: RedisStore, **options: float) -> SlackReceiver:
    """The receiver ``serve`` makes for Slack over HTTP, calling ``fake`` and judging by ``store``
    (``options``: its timings); the caller serves its routes (:meth:`SlackReceiver.routes`)."""
    settings = SlackSettings(
        bot_token=BOT_TOKEN, signing_secret=SIGNING_SECRET, app_token=None, api_url=fake.url
    )
    return SlackReceiver(settings, make_client(BOT_TOKEN, fake.url), store, **options)


def assert_response_conforms(text: str) -> None:
    """An app's answer to an interaction (empty, or JSON with a ``response_action``) is one Slack
    takes."""
    if text.strip():
        problems = response_problems(json.loads(text))
        assert not problems, describe(problems)


@dataclass
class Bolt:
    """The Bolt app on 127.0.0.1, and a way to send it signed interaction payloads."""

    server: HttpServer
    session: aiohttp.ClientSession
    fake: FakeSlack
    store: RedisStore
    poster: SlackPoster
    interactions: Interactions | None = None

    @property
    def url(self) -> str:
        return self.server.url(EVENTS_PATH)

    async def send(
        self, payload: dict[str, Any], *, secret: str = SIGNING_SECRET, at: float | None = None
    ) -> tuple[int, str]:
        """Deliver ``payload`` as Slack would; the app's status and body. An answer that Slack
        would refuse (a modal ``response_action`` with an invalid view) fails the test."""
        body = form_body(payload)
        headers = signed(body, secret=secret, at=at)
        async with self.session.post(self.url, data=body, headers=headers) as resp:
            status, text = resp.status, await resp.text()
        if status == 200:
            assert_response_conforms(text)
        return status, text

    async def ask(
        self,
        questions: list[dict[str, Any]],
        *,
        answerers: tuple[str, ...] = (),
        context: dict[str, Any] | None = None,
        expires_in: float = 300.0,
    ) -> AskRecord:
        """Create, post and remember an ask the way the chat handler does."""
        record = AskRecord(
            questions=QuestionSet.model_validate({"questions": questions}),
            destination=Destination(platform="slack", channel=CHANNEL),
            answerers=answerers,
            context=context or {"asker": "Build bot"},
            expires_at=time.time() + expires_in,
        )
        await self.store.create(record)
        ref = await self.poster.post(record)
        posted = await self.store.set_message(record.id, ref)
        assert posted is not None
        return posted
