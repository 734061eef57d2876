"""``ask-bridge feed --exec CMD``: each delivery handed to a command, acknowledged only once the
command says it handled it.

Plain ``feed`` acknowledges a delivery once its line is written and flushed to stdout -- into the
pipe's buffer, not into whatever reads it. A reader that stops before reading what sits in the pipe
loses it: ``feed | (head -1; sleep 2)`` lost 116 deliveries of 120. With ``--exec CMD`` each
delivery is one run of ``CMD`` with the delivery's JSON line (what plain ``feed`` prints) on its
stdin:

* exit status 0 acknowledges it;
* any other status, or death by a signal, leaves it unacknowledged, noted on stderr and as a
  ``feed_exec_failed`` event in the ask's audit trail (``consumer``, ``delivery_id``,
  ``attempt``, ``outcome``); it is run again after ``--retry-delay`` seconds (doubling each time,
  at most :data:`MAX_DELAY`) within a ``--follow`` run, or by the next run;
* after ``--attempts`` failed runs (counted from those events, so across runs and consumers) it
  is acknowledged as dead-lettered: one line on stderr and a ``feed_dead_letter`` event in the
  audit trail; the ask's record keeps the outcome for its retention (``ask-bridge show ID``).

``CMD`` runs through ``/bin/sh -c`` exactly as the operator wrote it; the delivery never becomes
part of a command line, only of the command's stdin (and ``ASK_BRIDGE_ATTEMPT``, 1 on the first
run, in its environment: ``feed``'s own, ``REDIS_URL`` among it, as for any child), so nothing a
person typed as an answer reaches the shell. One delivery
is handled at a time. Stopping ``feed`` (SIGINT, SIGTERM) stops a command still running
(SIGTERM to its process group, SIGKILL :data:`GRACE` seconds later); its delivery stays
unacknowledged. A command that never ends holds the feed: bound it (``timeout 60 ./handle``).
``feed`` exits 0 whatever the commands' statuses: each failure is told on stderr and recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from bridge.store.base import Delivery, Store

FAILED = "feed_exec_failed"
DEAD = "feed_dead_letter"
MAX_DELAY = 600.0
"""The longest wait between two runs for one delivery within a ``--follow`` run."""
GRACE = 5.0
"""Seconds a command stopped with ``feed`` gets between SIGTERM and SIGKILL."""


@dataclass
class Executor:
    """Hands each delivery of one consumer to ``command`` (see the module docstring)."""

    store: Store
    consumer: str
    command: str
    attempts: int
    retry_delay: float
    follow: bool
    quiet: float
    _due: list[tuple[float, int, Delivery]] = field(default_factory=list)
    """Failed deliveries to run again in this ``--follow`` run: (when, order, delivery)."""
    _order: Iterator[int] = field(default_factory=itertools.count)
    _held: set[str] = field(default_factory=set)
    """Delivery ids that failed in this run and are not acknowledged: the feed may hand one out
    again meanwhile (once idle long enough), and it is not run twice for that."""

    async def run(self, deliveries: AsyncIterator[Delivery]) -> None:
        """Until SIGINT/SIGTERM with ``follow``, else until nothing came for ``quiet`` seconds
        and no failed delivery waits for its next run here."""
        from bridge.aio import stop

        loop = asyncio.get_running_loop()
        upcoming: asyncio.Task[Delivery] | None = None  # one read at a time, kept across waits
        try:
            while True:
                if self._due and self._due[0][0] <= loop.time():
                    _, _, delivery = heapq.heappop(self._due)
                    self._held.discard(delivery.delivery_id)
                    await self.handle(delivery)
                    continue
                if upcoming is None:
                    upcoming = asyncio.create_task(_next(deliveries))
                if self._due:
                    wait: float | None = self._due[0][0] - loop.time()
                else:
                    wait = None if self.follow else self.quiet
                done, _ = await asyncio.wait({upcoming}, timeout=wait)
                if not done and self._due:
                    continue  # a retry is due
                if not done:
                    await stop(upcoming)  # quiet: the read ends, unless an item came just now
                    if upcoming.cancelled():
                        return
                delivery, upcoming = upcoming.result(), None
                if delivery.delivery_id not in self._held:
                    await self.handle(delivery)
        finally:
            if upcoming is not None:
                await stop(upcoming)

    async def handle(self, delivery: Delivery) -> None:
        """Run the command for ``delivery`` once; acknowledge, keep for a retry, or dead-letter."""
        ask_id = delivery.record.id
        failed = [
            e.detail
            for e in await self.store.history(ask_id)
            if e.kind == FAILED and e.detail.get("delivery_id") == delivery.delivery_id
        ]
        attempt = len(failed) + 1
        if attempt > self.attempts:  # spent before (a run stopped before dead-lettering it)
            await self.dead_letter(delivery, len(failed), str(failed[-1].get("outcome")))
            return
        outcome = await self.run_command(delivery, attempt)
        if outcome is None:
            await self.store.ack(delivery)
            return
        detail = {"consumer": self.consumer, "delivery_id": delivery.delivery_id}
        await self.store.record_event(ask_id, FAILED, attempt=attempt, outcome=outcome, **detail)
        if attempt >= self.attempts:
            await self.dead_letter(delivery, attempt, outcome)
            return
        self._held.add(delivery.delivery_id)
        delay = min(self.retry_delay * 2 ** (attempt - 1), MAX_DELAY)
        later = f"running it again in {delay:g} s" if self.follow else "left for the next run"
        say(
            f"--exec command {outcome} for ask {ask_id} (attempt {attempt} of {self.attempts}); "
            f"{later}"
        )
        if self.follow:
            when = asyncio.get_running_loop().time() + delay
            heapq.heappush(self._due, (when, next(self._order), delivery))

    async def dead_letter(self, delivery: Delivery, attempts: int, outcome: str) -> None:
        """Give up on ``delivery``: noted in its ask's audit trail and on stderr, then
        acknowledged, so the feed moves on."""
        ask_id = delivery.record.id
        await self.store.record_event(
            ask_id,
            DEAD,
            consumer=self.consumer,
            delivery_id=delivery.delivery_id,
            attempts=attempts,
            outcome=outcome,
        )
        await self.store.ack(delivery)
        say(
            f"gave up on ask {ask_id} after {attempts} failed runs of the --exec command (last: "
            f"{outcome}); acknowledged it as dead-lettered: `ask-bridge show {ask_id}` has its "
            "outcome and the failed runs"
        )

    async def run_command(self, delivery: Delivery, attempt: int) -> str | None:
        """One run for ``delivery``: ``None`` when it exited 0, else what happened to it."""
        from bridge.feed import feed_line

        proc = await asyncio.create_subprocess_shell(
            self.command,
            stdin=asyncio.subprocess.PIPE,
            env={**os.environ, "ASK_BRIDGE_ATTEMPT": str(attempt)},
            start_new_session=True,  # its own process group: stopping feed stops all of it
        )
        try:
            await proc.communicate(
                feed_line(delivery).encode()
            )  # a command that does not read its stdin is fine
        except BaseException:
            await _end(proc)
            raise
        code = proc.returncode
        if code == 0:
            return None
        assert code is not None
        return f"exited {code}" if code > 0 else f"was killed by {signal.Signals(-code).name}"


async def _next(deliveries: AsyncIterator[Delivery]) -> Delivery:
    return await anext(deliveries)


async def _end(proc: asyncio.subprocess.Process) -> None:
    """Stop the command's process group: SIGTERM, then SIGKILL after :data:`GRACE` seconds; not
    cut short by the cancellations stopping ``feed`` (:func:`bridge.aio.stop` repeats them), so
    no command outlives it."""
    loop = asyncio.get_running_loop()
    kill_at = loop.time() + GRACE
    pending = [signal.SIGTERM, signal.SIGKILL]
    while proc.returncode is None:
        if pending and (pending[0] is signal.SIGTERM or loop.time() >= kill_at):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, pending.pop(0))
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), 0.1)


def say(text: str) -> None:
    print(f"ask-bridge feed: {text}", file=sys.stderr, flush=True)
