"""The sweeper: expire asks past ``expires_at``, finish hand-offs that a dead process left, and
show final states nobody showed.

Run one in every replica (``ask-bridge serve`` does); they may overlap freely, because the store
expires each ask in one atomic step, and each final state is shown through one claim
(:func:`bridge.rendering.show_final`) with the poster registered for the ask's platform. (An ask
that a click finds past ``expires_at`` before any sweep is expired by that submission instead, and
re-rendered by whoever handled the click: see :meth:`bridge.store.base.Store.submit`.) An ask whose
final state was stored but never shown -- the replica that ended it was killed before it rendered
-- comes back from a later sweep and is rendered then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from bridge import metrics
from bridge.backoff import StateLog
from bridge.poster import Poster
from bridge.record import AskRecord
from bridge.rendering import show_final
from bridge.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)


class Sweeper:
    def __init__(
        self,
        store: Store,
        posters: Mapping[str, Poster] | None = None,
        interval: float = 5.0,
        *,
        renders: int = 8,
    ) -> None:
        self.store = store
        self.posters = dict(posters or {})
        self.interval = interval
        self.renders = renders
        """Final states shown at once: an expiry storm re-renders concurrently, this many
        message updates in flight (each platform's client paces them to its rate limits)."""

    async def sweep_once(self, now: float | None = None) -> list[AskRecord]:
        """Sweep at ``now`` (default: the clock) and show the final state of each ask the sweep
        returned (:meth:`Store.sweep`: expired by it, or never shown). Returns the asks this
        sweeper showed: another sweeper's claim may have taken some."""
        records = await self.store.sweep(now)
        done = [False] * len(records)
        todo = iter(range(len(records)))

        async def renderer() -> None:
            for i in todo:  # shared: each record goes to one renderer
                poster = self.posters.get(records[i].destination.platform)
                done[i] = poster is not None and await show_final(self.store, poster, records[i])

        await asyncio.gather(*(renderer() for _ in range(min(self.renders, len(records)))))
        shown: list[AskRecord] = []
        for record, ok in zip(records, done, strict=True):
            if ok:
                shown.append(record)
                if record.status.value == "expired":
                    metrics.ended(record)
        return shown

    async def run(self) -> None:
        """Sweep every ``interval`` seconds until cancelled; a failed round is logged, not fatal
        (a store that is down once when it goes and once when it is back, not every round)."""
        store_state = StateLog(log, "sweep: store unavailable")
        while True:
            try:
                await self.sweep_once()
                store_state.ok()
            except StoreUnavailable as exc:
                metrics.store_error("sweep")
                store_state.failed(exc)
            except Exception:
                log.warning("sweep failed; retrying in %.1f s", self.interval, exc_info=True)
            await asyncio.sleep(self.interval)
