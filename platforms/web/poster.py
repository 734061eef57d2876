"""The web platform's poster: an ask for the browser is posted nowhere -- its page is its message.

``post`` only names the ask (a :class:`~bridge.record.MessageRef` whose ``message_id`` is the
ask id), so the engine's flow stays the one for every platform: the ask is recorded as posted,
and :mod:`bridge.showing` may "update" it when it ends. There is nothing to push then: every open
page watches the store itself (:mod:`platforms.web.live`), and a page opened later reads it.
"""

from __future__ import annotations

from bridge.poster import AnswererIds, Poster
from bridge.record import AskRecord, MessageRef

WEB = "web"
"""The platform's name: in ``ask --platform web``, the entry point, links' ``Person.platform``."""


def _own_form(answerer: str) -> str | None:
    return answerer.strip() or None


class WebPoster(Poster):
    """Posts nothing; answerers on the web are people named by ``ask --answerer NAME`` (no
    groups: each name is one person, so an ask needing K approvals names at least K)."""

    platform = WEB
    answerer_rule = "a person's name, as `ask --answerer NAME` gives it"
    answerer_ids = AnswererIds(own_form=_own_form, individual=lambda answerer: True)

    async def post(self, record: AskRecord) -> MessageRef:
        channel = record.destination.channel or record.destination.user or WEB
        return MessageRef(platform=WEB, channel=channel, message_id=record.id)

    async def update(self, record: AskRecord) -> None:
        """Nothing to push: live pages watch the store, and a page loaded later reads it."""

    async def remind(self, record: AskRecord, n: int) -> None:
        """Nothing to post: the page and the inbox show how long the ask has waited. Done, not
        refused, so the sweeper counts the reminder as given instead of logging a failure."""
