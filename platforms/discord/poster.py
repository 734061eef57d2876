"""Posting ask messages and showing their new states over Discord's REST API."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

import discord

from bridge.poster import AnswererIds, Poster
from bridge.record import AskRecord, AskStatus, MessageRef
from bridge.web_links import browser_links
from platforms.discord.client import RestClient
from platforms.discord.markup import reminder_content, render_message
from platforms.discord.text import ANSWERER_RULE, answerer_id, is_user

PLATFORM = "discord"

INVALID_FORM_BODY = 50035
"""Discord's JSON error code for a request body it refuses (a too-long text, too many
components): https://discord.com/developers/docs/topics/opcodes-and-status-codes#json"""
SHOWN_BY_CLICKS = 1024
"""How many messages whose final state a click's response showed are remembered (the oldest
forgotten first): their showing comes within a second or two, so a few hundred clicks' worth."""


def snowflake(value: str, what: str) -> int:
    """A Discord id from the command line or the store, with a clear error if it is not one."""
    if not (value.isascii() and value.isdigit() and len(value) <= 20):
        raise ValueError(f"a Discord {what} id is a number (a snowflake), not {value[:40]!r}")
    return int(value)


class DiscordPoster(Poster):
    """Shows an ask in a guild channel, a thread (its id is a channel id) or a DM (a user id:
    the DM channel is opened first). Every send and edit carries the rendering's allowed
    mentions, which parse nothing from the text."""

    platform = PLATFORM
    answerer_rule = ANSWERER_RULE
    answerer_ids = AnswererIds(own_form=answerer_id, individual=is_user)

    def __init__(self, rest: RestClient, *, browser: bool | None = None) -> None:
        self.rest = rest
        self.browser = browser_links() is not None if browser is None else browser
        """Pending messages offer ``Open in browser`` (default: when the web platform is on and
        its public URL is set, :func:`bridge.web_links.browser_links`)."""
        self._shown_by_click: dict[str, str] = {}
        """Message id -> the ask whose final state a click's response put on it
        (:meth:`showing_by_click`)."""
        self._editing: Counter[str] = Counter()
        """Message id -> edits of it in flight (:meth:`update`)."""
        self._responding: dict[str, bool] = {}
        """Message id -> no edit of it was in flight while a click's response showed it."""

    async def showing_by_click(
        self, ask_id: str, message_id: str, respond: Callable[[], Awaitable[object]]
    ) -> None:
        """Run ``respond``: a click's response (Discord's UPDATE_MESSAGE) showing the final state
        of ask ``ask_id``, which has ended, on its message ``message_id``. Once it has, the next
        update to show that state (:func:`bridge.showing.show_final`, after its claim) has
        nothing left to send: what an ended ask shows never changes, so its id is all that is
        kept. Unless an edit of the message was in flight meanwhile (the submissions so far of
        an ask several people answer, :meth:`bridge.showing.Showing.show_progress`): it may
        have landed after the response, and the final state is then sent again."""
        self._responding[message_id] = not self._editing[message_id]
        try:
            await respond()
        finally:
            alone = self._responding.pop(message_id, False)
        if alone and not self._editing[message_id]:
            shown = self._shown_by_click
            shown[message_id] = ask_id
            if len(shown) > SHOWN_BY_CLICKS:
                del shown[next(iter(shown))]

    def refusal(self, error: Exception) -> str | None:
        """Discord's words for a 400 "Invalid Form Body" (which fields, and why)."""
        if isinstance(error, discord.HTTPException) and error.code == INVALID_FORM_BODY:
            return f"{error.status} {error.text}"
        return None

    async def post(self, record: AskRecord) -> MessageRef:
        dest = record.destination
        client = await self.rest.get()
        if dest.thread or dest.channel:
            channel_id = snowflake(dest.thread or dest.channel or "", "channel")
        elif dest.user:
            dm = await client.create_dm(discord.Object(snowflake(dest.user, "user")))
            channel_id = dm.id
        else:
            raise ValueError("a Discord destination needs a channel, a thread or a user")
        channel = client.get_partial_messageable(channel_id)

        async def send(tightest: bool) -> discord.Message:
            message = render_message(record, tightest=tightest, browser=self.browser)
            return await channel.send(
                content=message.content,
                embeds=message.embeds,
                view=message.view or discord.utils.MISSING,
                allowed_mentions=message.allowed_mentions,
            )

        sent = await self.tightening(record, "message", send)
        extra = {"thread": dest.thread} if dest.thread else {}
        extra["link"] = sent.jump_url  # where `ask` tells the person at the terminal to look
        return MessageRef(
            platform=PLATFORM, channel=str(channel_id), message_id=str(sent.id), extra=extra
        )

    async def update(self, record: AskRecord) -> None:
        """Re-render for the record's status (answers, who answered; no controls once ended;
        while pending, the submissions of an ask that needs several people)."""
        if record.message is None:
            return
        message_id = record.message.message_id
        shown_by_click = self._shown_by_click.pop(message_id, None)  # a pending state replaces it
        if shown_by_click == record.id and record.status is not AskStatus.PENDING:
            return  # the click's response showed this final state already
        self._editing[message_id] += 1
        if message_id in self._responding:
            self._responding[message_id] = False
        try:
            await self._edit(record, record.message)
        finally:
            self._editing[message_id] -= 1
            if not self._editing[message_id]:
                del self._editing[message_id]

    async def _edit(self, record: AskRecord, ref: MessageRef) -> None:
        client = await self.rest.get()
        channel = client.get_partial_messageable(snowflake(ref.channel, "channel"))
        target = channel.get_partial_message(snowflake(ref.message_id, "message"))

        async def edit(tightest: bool) -> None:
            message = render_message(record, tightest=tightest, browser=self.browser)
            await target.edit(
                content=message.content,
                embeds=message.embeds,
                view=message.view,
                allowed_mentions=message.allowed_mentions,
            )

        await self.tightening(record, "update", edit)

    async def remind(self, record: AskRecord, n: int) -> None:
        """A reply to the message (in its channel or thread), notifying exactly the answerers."""
        if record.message is None:
            return
        client = await self.rest.get()
        channel_id = snowflake(record.message.channel, "channel")
        content, allowed = reminder_content(record, n)
        reference = discord.MessageReference(
            message_id=snowflake(record.message.message_id, "message"),
            channel_id=channel_id,
            fail_if_not_exists=False,
        )
        await client.get_partial_messageable(channel_id).send(
            content=content, reference=reference, allowed_mentions=allowed
        )

    async def aclose(self) -> None:
        await self.rest.aclose()
