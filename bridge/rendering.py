"""Showing an ended ask's final state on its message: one step, wherever an ask ends.

Whoever sees an ask end -- the click handler (:meth:`bridge.answering.Answering.rerender`), the
chat handler that closed it, the sweeper that expired it or found it never shown -- calls
:func:`show_final`. The store's claim (:meth:`~bridge.store.base.Store.claim_render`) makes that
safe to do from all of them at once: one replica renders each ending, late clicks cost at most one
message update per render interval, and a final state nobody managed to show (the renderer was
killed, the platform failed) is shown by a later sweep, because only :meth:`mark_rendered` takes
the ask off the sweeper's list.
"""

from __future__ import annotations

import logging

from bridge import metrics
from bridge.metrics import poster_platform
from bridge.poster import Poster
from bridge.record import AskRecord
from bridge.store.base import Store

log = logging.getLogger(__name__)


async def show_final(store: Store, poster: Poster, ask: AskRecord | str) -> bool:
    """Claim, update the message, mark it shown. Whether this call updated it: ``False`` when
    someone else holds the claim, the ask has no message or has not ended, or it failed (logged,
    not raised: the outcome stands, and the sweeper tries again later)."""
    ask_id, message = (ask, None) if isinstance(ask, str) else (ask.id, ask.message)
    try:
        # the record's message is recorded if the store never learned it (ended while posting)
        record = await store.claim_render(ask_id, message=message)
        if record is None:
            return False
        await poster.update(record)
        await store.mark_rendered(ask_id)
    except Exception:
        log.exception("ask %s ended but its message could not be re-rendered", ask_id)
        metrics.platform_error(poster_platform(ask), "update")
        return False
    return True
