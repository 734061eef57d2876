"""Is this ``serve`` replica fit to take clicks? ``/readyz`` asks :meth:`Health.problems`.

Ready means: started (every receiver became ready once), the store reachable (a fresh one-shot
probe of ``REDIS_URL``, :func:`bridge.redis_probe.probe`, so a Redis that went away shows at once
and one that came back is noticed without a restart) and its user permitted every command the
bridge sends (:mod:`bridge.redis_acl`: one without them answers, then fails every click), and
every receiver that holds a connection connected now (Slack's Socket Mode, Discord's gateway).
:meth:`Health.watch` runs the same check in the background so the log says once when the store
goes and once when it is back (and when a permission is missing), and keeps the pending-asks
gauge current.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from bridge import metrics
from bridge.logs import StateLog
from bridge.platform import ConnectionState, Receiver
from bridge.redis_acl import Access
from bridge.redis_probe import probe
from bridge.store.base import Store, StoreUnavailable
from bridge.store.keys import DEFAULT_PREFIX
from bridge.store.redis import RedisStore

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
        self.prefix = store.keys.prefix if isinstance(store, RedisStore) else DEFAULT_PREFIX
        self._store_state = StateLog(log, "store")
        self._refused: list[str] = []
        self._links = {name: StateLog(log, name) for name in receivers}

    async def problems(self) -> list[str]:
        """Why this replica is not ready; empty when it is."""
        found: list[str] = [] if self.started else ["starting: not every receiver is ready yet"]
        if self.redis_url:
            try:
                facts = await probe(self.redis_url, timeout=PROBE_TIMEOUT, prefix=self.prefix)
                self._store_state.ok()
            except StoreUnavailable as exc:
                metrics.store_error("probe")
                self._store_state.failed(exc)
                found.append(str(exc))
            else:
                found += self._refusals(facts.access)
        for name, receiver in self.receivers.items():
            if isinstance(receiver, ConnectionState) and self.started:
                if await receiver.connected():
                    self._links[name].ok()
                else:
                    self._links[name].failed("not connected")
                    found.append(f"{name}: not connected")
        return found

    def _refusals(self, access: Access | None) -> list[str]:
        """A line per command the Redis user may not run; the log says so once (and once when
        they are granted), not every round."""
        refused = [r.line(access.user) for r in access.refused] if access else []
        if refused and refused != self._refused:
            log.error("redis permissions: %s", "; ".join(refused))
        elif self._refused and not refused:
            log.info("redis permissions: every command the bridge sends is permitted now")
        self._refused = refused
        return refused

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
