"""Is this ``serve`` replica fit to take clicks? ``/readyz`` asks :meth:`Health.problems`.

Ready means: started (every receiver became ready once), the store reachable (a fresh one-shot
probe of ``REDIS_URL``, :func:`bridge.redis_probe.probe`, so a Redis that went away shows at once
and one that came back is noticed without a restart), and every receiver that holds a connection
connected now (Slack's Socket Mode, Discord's gateway). :meth:`Health.watch` runs the same check
in the background so the log says once when the store goes and once when it is back, and keeps
the pending-asks gauge current.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from bridge import metrics
from bridge.backoff import StateLog
from bridge.platform import ConnectionState, Receiver
from bridge.redis_probe import probe
from bridge.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)
PROBE_TIMEOUT = 2.0
WATCH_INTERVAL = 10.0
COUNT_EVERY = 6
"""Watch rounds between counts of the pending asks (once a minute; :meth:`Store.count_pending`
reads no ask, so 100,000 pending asks cost no more to count than ten)."""


class Health:
    def __init__(
        self,
        store: Store,
        redis_url: str | None,
        receivers: Mapping[str, Receiver],
        *,
        interval: float = WATCH_INTERVAL,
    ) -> None:
        self.store = store
        self.redis_url = redis_url
        self.receivers = dict(receivers)
        self.interval = interval
        self.started = False
        self._store_state = StateLog(log, "store")
        self._links = {name: StateLog(log, name) for name in receivers}

    async def problems(self) -> list[str]:
        """Why this replica is not ready; empty when it is."""
        found: list[str] = [] if self.started else ["starting: not every receiver is ready yet"]
        if self.redis_url:
            try:
                await probe(self.redis_url, timeout=PROBE_TIMEOUT)
                self._store_state.ok()
            except StoreUnavailable as exc:
                metrics.store_error("probe")
                self._store_state.failed(exc)
                found.append(str(exc))
        for name, receiver in self.receivers.items():
            if isinstance(receiver, ConnectionState) and self.started:
                if await receiver.connected():
                    self._links[name].ok()
                else:
                    self._links[name].failed("not connected")
                    found.append(f"{name}: not connected")
        return found

    async def watch(self) -> None:
        """Until cancelled: check every ``interval`` seconds (logging changes) and, every
        :data:`COUNT_EVERY` rounds, count the pending asks of each served platform for the
        gauge."""
        rounds = 0
        while True:
            problems = await self.problems()
            rounds += 1
            due = rounds % COUNT_EVERY == 1
            if due and not any(p.startswith("cannot reach Redis") for p in problems):
                try:
                    counts = {p: await self.store.count_pending(p) for p in self.receivers}
                except StoreUnavailable:
                    pass
                else:
                    metrics.set_pending(counts)
            await asyncio.sleep(self.interval)
