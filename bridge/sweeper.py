"""The sweeper: expire asks past ``expires_at`` and finish hand-offs that a dead process left.

Run one in every replica (``ask-bridge serve`` does); they may overlap freely, because the store
expires each ask in one atomic step and hands it to exactly one sweeper, which then re-renders the
message through the poster registered for the ask's platform. (An ask that a click finds past
``expires_at`` before any sweep is expired by that submission instead, and re-rendered by whoever
handled the click: see :meth:`bridge.store.base.Store.submit`.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from bridge.ask import AskRecord
from bridge.poster import Poster
from bridge.store.base import Store

log = logging.getLogger(__name__)


class Sweeper:
    def __init__(
        self, store: Store, posters: Mapping[str, Poster] | None = None, interval: float = 5.0
    ) -> None:
        self.store = store
        self.posters = dict(posters or {})
        self.interval = interval

    async def sweep_once(self, now: float | None = None) -> list[AskRecord]:
        """Expire what is due at ``now`` (default: the clock); re-render each ask this sweeper
        expired. Returns those asks."""
        expired = await self.store.sweep(now)
        for record in expired:
            poster = self.posters.get(record.destination.platform)
            if poster is None or record.message is None:
                continue
            try:
                await poster.update(record)
            except Exception:  # the expiry stands; a stale message only shows live buttons
                log.warning("could not re-render expired ask %s", record.id, exc_info=True)
        return expired

    async def run(self) -> None:
        """Sweep every ``interval`` seconds until cancelled; a failed round is logged, not fatal."""
        while True:
            try:
                await self.sweep_once()
            except Exception:
                log.warning("sweep failed; retrying in %.1f s", self.interval, exc_info=True)
            await asyncio.sleep(self.interval)
