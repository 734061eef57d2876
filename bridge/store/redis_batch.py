"""Script calls from many waiting calls of one process, sent together: one round trip per batch.

When 100,000 waiting calls are answered at once, each wakes and takes its answer, and later
confirms it returned it. One script call each would queue 100,000 commands for the store's few
connections, and everything else this process sends -- the lease renewals that keep the other
waits' answers coming to them -- would wait behind them: leases lapsed, and answers went to the
feed. Batched, the calls made while a batch is in flight leave together in the next one (a
pipeline of scripts, each still atomic on its own ask), so at most one batch per op holds a
connection, and the client pays a pipeline's cost per call rather than a command's. A lone call
leaves on the event loop's next turn, alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bridge.aio import stop
from bridge.store.redis_connect import PIPELINE_CHUNK

RunMany = Callable[[str, Sequence[str], Sequence[Any]], Awaitable[list[list[Any]]]]
"""Runs one op over many asks in one round trip, each reply as a lone script call gives it."""


class Batches:
    """The batches of one store, an op (with the same extra arguments) per queue."""

    def __init__(self, run_many: RunMany) -> None:
        self._run_many = run_many
        self._queued: dict[tuple[str, tuple[Any, ...]], list[tuple[str, asyncio.Future[Any]]]] = {}
        self._senders: dict[tuple[str, tuple[Any, ...]], asyncio.Task[None]] = {}

    async def run(self, op: str, ask_id: str, *args: Any) -> list[Any]:
        """``op`` over ``ask_id`` in the next batch of ``op``; its reply, or the batch's error."""
        key = (op, args)
        fut: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(key, []).append((ask_id, fut))
        if key not in self._senders:
            self._senders[key] = asyncio.create_task(self._send(key), name=f"ask-bridge {op}")
        return await fut

    async def _send(self, key: tuple[str, tuple[Any, ...]]) -> None:
        op, args = key
        try:
            while queued := self._queued.pop(key, None):
                for start in range(0, len(queued), PIPELINE_CHUNK):
                    chunk = queued[start : start + PIPELINE_CHUNK]
                    try:
                        replies = await self._run_many(op, [a for a, _ in chunk], args)
                    except Exception as exc:  # each caller raises it: nothing known to have run
                        for _, fut in chunk:
                            if not fut.done():
                                fut.set_exception(exc)
                        continue
                    except BaseException:  # the store is closing: its callers are let go
                        for _, fut in chunk:
                            fut.cancel()
                        raise
                    for (_, fut), reply in zip(chunk, replies, strict=True):
                        if not fut.done():  # its caller was cancelled meanwhile
                            fut.set_result(reply)
        finally:
            del self._senders[key]

    async def aclose(self) -> None:
        for task in list(self._senders.values()):
            await stop(task)
        for queued in self._queued.values():
            for _, fut in queued:
                fut.cancel()
        self._queued.clear()
