"""Posting ask messages and showing their new states with ``chat.postMessage`` and
``chat.update``; a posted message's link with ``chat.getPermalink`` (no scope needed)."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError, SlackObjectFormationError
from slack_sdk.web.async_client import AsyncWebClient

from bridge.poster import AnswererIds, Poster
from bridge.record import AskRecord, MessageRef
from bridge.web_links import browser_links
from platforms.slack.client import error_code
from platforms.slack.markup import reminder_text, render_message
from platforms.slack.text import ANSWERER_RULE, answerer_id, is_user

PLATFORM = "slack"
log = logging.getLogger(__name__)

REFUSALS = frozenset(
    {"invalid_blocks", "invalid_blocks_format", "msg_too_long", "msg_blocks_too_long"}
)
"""The errors of ``chat.postMessage`` and ``chat.update`` that refuse a message's shape or size
(https://api.slack.com/methods/chat.postMessage#errors): a tighter rendering may pass."""


class SlackPoster(Poster):
    """Shows an ask at its destination: a channel, a thread in it, or a DM (post to a user id).

    A DM needs no ``im:write``: posting to a user id lands in the app's DM with them.
    """

    platform = PLATFORM
    answerer_rule = ANSWERER_RULE
    answerer_ids = AnswererIds(own_form=answerer_id, individual=is_user)

    def __init__(self, client: AsyncWebClient, *, browser: bool | None = None) -> None:
        self.client = client
        self.browser = browser_links() is not None if browser is None else browser
        """Pending messages offer ``Open in browser`` (default: when the web platform is on and
        its public URL is set, :func:`bridge.web_links.browser_links`)."""

    def refusal(self, error: Exception) -> str | None:
        """Slack's error code for a refused message (:data:`REFUSALS`), or slack_sdk's words
        when it refused the blocks before sending them."""
        if isinstance(error, SlackObjectFormationError):
            return f"slack_sdk: {error}"
        if isinstance(error, SlackApiError):
            code = error_code(error)
            return code if code in REFUSALS else None
        return None

    async def post(self, record: AskRecord) -> MessageRef:
        dest = record.destination
        channel = dest.channel or dest.user
        if not channel:
            raise ValueError("a Slack destination needs a channel or a user")
        return await self.tightening(
            record, "message", lambda tightest: self._post(record, channel, tightest)
        )

    async def _post(self, record: AskRecord, channel: str, tightest: bool) -> MessageRef:
        dest = record.destination
        message = render_message(record, tightest=tightest, browser=self.browser)
        resp = await self.client.chat_postMessage(
            channel=channel,
            thread_ts=dest.thread,
            text=message.text,
            blocks=message.wire,
            unfurl_links=False,
            unfurl_media=False,
        )
        extra = {"thread": dest.thread} if dest.thread else {}
        return MessageRef(
            platform=PLATFORM, channel=str(resp["channel"]), message_id=str(resp["ts"]), extra=extra
        )

    async def permalink(self, message: MessageRef) -> str | None:
        """The message's link (``chat.getPermalink``), or ``None`` when Slack gives none.

        Asked for apart from :meth:`post` -- by ``ask``'s progress line, the one place that shows
        it -- so a post is one call: a second one inside it would widen the window in which a
        cancelled post leaves a message nobody knows the reference of."""
        try:
            resp = await self.client.chat_getPermalink(
                channel=message.channel, message_ts=message.message_id
            )
        except SlackApiError as exc:
            error = error_code(exc) or exc
            log.warning(
                "no link to message %s in %s: %s", message.message_id, message.channel, error
            )
            return None
        link = resp.get("permalink")
        return link if isinstance(link, str) and link.startswith("https://") else None

    async def update(self, record: AskRecord) -> None:
        """Re-render for the record's status (answers, who answered; no controls once ended;
        while pending, the submissions of an ask that needs several people)."""
        if record.message is None:
            return
        ref = record.message

        async def edit(tightest: bool) -> None:
            message = render_message(record, tightest=tightest, browser=self.browser)
            await self.client.chat_update(
                channel=ref.channel, ts=ref.message_id, text=message.text, blocks=message.wire
            )

        await self.tightening(record, "update", edit)

    async def remind(self, record: AskRecord, n: int) -> None:
        """A reply in the message's thread (the thread it was posted in, if it was)."""
        if record.message is None:
            return
        await self.client.chat_postMessage(
            channel=record.message.channel,
            thread_ts=record.message.extra.get("thread") or record.message.message_id,
            text=reminder_text(record, n),
            unfurl_links=False,
            unfurl_media=False,
        )
