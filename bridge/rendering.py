"""Showing an ended ask's final state on its messages: one step, wherever an ask ends.

Whoever sees an ask end -- the click handler (:meth:`bridge.answering.Answering.rerender`), the
chat handler that closed it, the sweeper that expired it or found it never shown -- calls
:func:`show_final`. The store's claim (:meth:`~bridge.store.base.Store.claim_render`) makes that
safe to do from all of them at once: one replica renders each ending, late clicks cost at most one
message update per render interval, and a final state nobody managed to show (the renderer was
killed, the platform failed) is shown by a later sweep, because only :meth:`mark_rendered` takes
the ask off the sweeper's list.

An ask may have several messages (its escalation posted it again, perhaps on another platform):
each is updated, and the ask is marked shown only once every one was. A caller holding no poster
for one of them (a Slack click handler, an escalation to Discord) updates the rest and leaves it
to the sweeper, which holds a poster for every configured platform.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bridge import metrics
from bridge.metrics import poster_platform
from bridge.poster import Poster
from bridge.record import AskRecord
from bridge.store.base import Store

log = logging.getLogger(__name__)


async def show_final(
    store: Store,
    posters: Poster | Mapping[str, Poster],
    ask: AskRecord | str,
    *,
    unshown: bool = False,
) -> AskRecord | None:
    """Claim, update every message, mark it shown. The record shown when this call updated
    them all; ``None`` when someone else holds the claim, the ask has no message or has not
    ended, a message's platform has no poster here, or an update failed (logged, not raised: the
    outcome stands, and the sweeper tries again later). ``unshown``: only if not shown yet (a
    sweep's naming of it may be older than its showing; see :meth:`Store.claim_render`)."""
    ask_id, message = (ask, None) if isinstance(ask, str) else (ask.id, ask.message)
    by_platform = {posters.platform: posters} if isinstance(posters, Poster) else posters
    try:
        # the record's message is recorded if the store never learned it (ended while posting)
        record = await store.claim_render(ask_id, message=message, unshown=unshown)
        if record is None:
            return None
    except Exception:
        log.exception("ask %s ended but its message could not be re-rendered", ask_id)
        metrics.platform_error(poster_platform(ask), "update")
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
    if not shown:
        return None
    try:
        await store.mark_rendered(ask_id)
    except Exception:
        log.exception("ask %s was re-rendered but could not be marked so", ask_id)
        return None
    return record
