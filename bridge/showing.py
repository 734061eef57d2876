"""Showing an ask's current state on its messages again: the last step of
ask -> post -> click -> resolve -> show.

What a message looks like is the platforms' (:mod:`bridge.presentation` and each platform's
``markup.py``); this module decides *when* and *how safely* it is shown again: its final state
wherever the ask ends, its submissions so far while several people answer.

Whoever sees an ask end -- the click entry point (:meth:`bridge.clicks.Clicks.show`, through
:meth:`Showing.show`), the chat handler that closed it, the sweeper that expired it or found it
never shown (:mod:`bridge.show_queue`), ``ask-bridge cancel`` -- calls :func:`show_final`. The
store's claim (:meth:`~bridge.store.base.Store.claim_render`) makes that safe to do from all of
them at once: one replica shows each ending, late clicks cost at most one message update per
render interval, and a final state nobody managed to show (the process showing it was killed,
the platform failed) is shown by a later sweep, because only
:meth:`~bridge.store.base.Store.mark_rendered` takes the ask off the sweeper's list. A click's
submission claims the showing of what it finds ended in its own store step (the same claim, the
same rules: :meth:`~bridge.store.base.Store.submit`'s ``claim``), so its showing starts with the
update (``claimed``).

An ask may have several messages (its escalation posted it again, perhaps on another platform):
each is updated, and the ask is marked shown only once every one was. A caller holding no poster
for one of them (a Slack click handler, an escalation to Discord) updates the rest and leaves it
to the sweeper, which holds a poster for every configured platform.

A pending ask that several people answer lists their submissions so far: :class:`Showing`
updates its messages after each one, coalesced per ask (:meth:`Showing.show_progress`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager

from bridge import metrics
from bridge.metrics import poster_platform
from bridge.poster import Poster
from bridge.record import AskRecord, AskStatus
from bridge.store.base import Store

log = logging.getLogger("bridge.rendering")
"""Named as before the module was renamed: every log line carries its logger's name, and
operators' searches and alerts match it."""


async def show_final(
    store: Store,
    posters: Poster | Mapping[str, Poster],
    ask: AskRecord | str,
    *,
    unshown: bool = False,
    claimed: bool = False,
) -> AskRecord | None:
    """Claim, update every message, mark it shown. The record shown when this call updated
    them all; ``None`` when someone else holds the claim, the ask has no message or has not
    ended, a message's platform has no poster here, or an update failed (logged, not raised: the
    outcome stands, and the sweeper tries again later). ``unshown``: only if not shown yet (a
    sweep's naming of it may be older than its showing; see :meth:`Store.claim_render`).
    ``claimed``: ``ask`` is the record of the store's step that claimed its showing already (a
    click's submission, :attr:`SubmitResult.claimed <bridge.store.terms.SubmitResult.claimed>`):
    shown as it is, no claim made again."""
    record = await update_final(store, posters, ask, unshown=unshown, claimed=claimed)
    if record is None or not await mark_shown(store, record.id):
        return None
    return record


async def update_final(
    store: Store,
    posters: Poster | Mapping[str, Poster],
    ask: AskRecord | str,
    *,
    unshown: bool = False,
    claimed: bool = False,
) -> AskRecord | None:
    """:func:`show_final` up to its mark: the record whose every message now shows its final
    state, for :func:`mark_shown`; ``None`` as :func:`show_final` says."""
    ask_id, message = (ask, None) if isinstance(ask, str) else (ask.id, ask.message)
    by_platform = {posters.platform: posters} if isinstance(posters, Poster) else posters
    if claimed and not isinstance(ask, str):
        record: AskRecord | None = ask
    else:
        try:
            # the record's message is recorded if the store never learned it (ended while
            # posting); an ended record in hand (a click's verdict) is not built again
            known = None if isinstance(ask, str) else ask
            record = await store.claim_render(ask_id, message=message, unshown=unshown, known=known)
        except Exception:
            log.exception("ask %s ended but its message could not be re-rendered", ask_id)
            metrics.platform_error(poster_platform(ask), "update")
            return None
    if record is None:
        return None
    shown = True
    for each in record.messages:
        poster = by_platform.get(each.platform)
        if poster is None:
            shown = False  # the sweeper has a poster for every configured platform
            continue
        try:
            await poster.update(record.model_copy(update={"message": each}))
        except Exception:
            log.exception(
                "ask %s ended but its message %s in %s could not be re-rendered",
                ask_id,
                each.message_id,
                each.platform,
            )
            metrics.platform_error(each.platform, "update")
            shown = False
    return record if shown else None


async def mark_shown(store: Store, ask_id: str, *, together: bool = False) -> bool:
    """Mark the ask's final state shown (:meth:`Store.mark_rendered`, ``together`` as it
    says); ``False`` when that failed (logged: a later sweep shows it again)."""
    try:
        await store.mark_rendered(ask_id, together=together)
    except Exception:
        log.exception("ask %s was re-rendered but could not be marked so", ask_id)
        return False
    return True


class Showing:
    """What the clicks of one platform show on the asks' messages: ``store`` read afresh,
    ``poster`` updating this platform's messages."""

    def __init__(self, store: Store, poster: Poster) -> None:
        self.store = store
        self.poster = poster
        self._progress: dict[str, bool] = {}
        """Asks whose submissions this process is showing, and whether another update was
        asked for meanwhile (see :meth:`show_progress`)."""

    async def show(
        self,
        record: AskRecord,
        *,
        claimed: bool = False,
        turn: AbstractAsyncContextManager[object] | None = None,
    ) -> None:
        """Show ``record``'s current state on its messages, failures logged (the outcome stands):
        an ended ask's final state at most once per render interval across replicas
        (:func:`show_final`, ``claimed`` as it says; a later sweep shows what this could not), a
        pending one's submissions so far (:meth:`show_progress`).

        ``turn``: held while the messages are updated (the caller's bound on updates at once,
        :meth:`bridge.clicks.Clicks.show`), not while the final state is marked shown after
        them: that mark goes with the store's next calls (:meth:`Store.mark_rendered`'s
        ``together``), and a turn held meanwhile would slow the showings behind it."""
        async with turn or contextlib.nullcontext():
            if record.status is AskStatus.PENDING:
                await self.show_progress(record.id)
                return
            shown = await update_final(self.store, self.poster, record, claimed=claimed)
        if shown is not None:
            await mark_shown(self.store, shown.id, together=True)

    async def show_progress(self, ask_id: str) -> None:
        """Show a pending ask's current submissions on its messages (failures logged).

        Read fresh, so two replicas' updates show the latest state whichever lands last. An
        update of the pending state racing the ask's end could overwrite its final state; so
        once this update is done the record is read again, and if the ask has ended meanwhile
        its final state is put back (an end seen after this update was done is always shown
        after it).

        Coalesced per ask: while this process updates an ask's messages, further calls only
        ask for one more round after it (which reads fresh, so it shows them all). A person
        flipping their answer a thousand times costs at most two updates in flight, not a
        thousand platform calls that would spend the bot's rate limit for every other ask."""
        if ask_id in self._progress:
            self._progress[ask_id] = True
            return
        self._progress[ask_id] = False
        try:
            while True:
                await self._show_progress_once(ask_id)
                if not self._progress[ask_id]:
                    return
                self._progress[ask_id] = False
        finally:
            del self._progress[ask_id]

    async def _show_progress_once(self, ask_id: str) -> None:
        try:
            current = await self.store.get(ask_id)
            if current is None or current.message is None:
                return
            if current.status is not AskStatus.PENDING:
                await show_final(self.store, self.poster, current)
                return
            await self._update_each(current)
            after = await self.store.get(ask_id)
            if after is not None and after.message and after.status is not AskStatus.PENDING:
                await self._update_each(after)
        except Exception:
            log.warning("could not show the submissions of ask %s", ask_id, exc_info=True)

    async def _update_each(self, record: AskRecord) -> None:
        """Update every message of the ask on this platform (the first, and an escalation's
        posted here; one on another platform shows the submissions once the ask ends)."""
        for message in record.messages:
            if message.platform == self.poster.platform:
                await self.poster.update(record.model_copy(update={"message": message}))
