"""Live pages: an ask's page learns, over Server-Sent Events, that someone else submitted or that
the ask ended (answered, expired, cancelled).

State is in the store only, so every replica serves any page. One watcher per ask per process
(:class:`LiveAsks`), however many pages of it are open: it wakes when the ask ends (the store's
push, :meth:`Store.observe <bridge.store.base.Store.observe>`, no polling) and reads the record
every :data:`POLL` seconds meanwhile for submissions (the store pushes only endings), and hands
each change to every open page of the ask. Open streams are bounded per process
(:data:`MAX_STREAMS`): one more is refused (503) and the page still works, without live updates.
A stream sends a heartbeat comment every :data:`HEARTBEAT` seconds (proxies close idle ones), and
ends when the ask ends, the link expires or the page leaves. A page that left (its browser closed
the connection) is noticed by its watcher at its next read, within :data:`POLL` seconds, not at
the stream's next heartbeat: until then the stream held its handler, its watcher (a read every
:data:`POLL` seconds) and a place among the :data:`MAX_STREAMS`, so pages reloaded faster than
the heartbeat filled the process with streams nobody watched and the next ones were refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from bridge.aio import stop
from bridge.record import AskRecord, AskStatus
from bridge.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)
POLL = 2.0
"""Seconds between reads of a pending ask for others' submissions (endings are pushed)."""
HEARTBEAT = 15.0
"""Seconds between keep-alive comments on an idle stream."""
MAX_STREAMS = 2000
"""Open streams a process serves at once."""


@dataclass(frozen=True)
class Change:
    """What a page is told: ``progress`` (the submissions changed) or ``ended``, with the ask;
    or ``left``: its page is gone (the stream ends, telling nobody)."""

    kind: str
    record: AskRecord


def _mark(record: AskRecord) -> tuple[str, tuple[tuple[str, bool, float], ...]]:
    """What a page shows that can change: the status and the submissions."""
    return record.status.value, tuple((s.key, s.withdrawn, s.at) for s in record.submissions)


def version(record: AskRecord) -> str:
    """A short name for what a page of ``record`` shows that can change: the page sends it back
    when its stream connects, so a change that landed between the page and its stream (which
    watches from the moment it connects) is sent at once instead of never."""
    return hashlib.blake2s(repr(_mark(record)).encode(), digest_size=6).hexdigest()


class _Watch:
    """One ask watched for every page open on it."""

    def __init__(self) -> None:
        self.pages: dict[asyncio.Queue[Change], Callable[[], bool]] = {}
        """Each open page's queue, and whether the page is still there (connected)."""
        self.task: asyncio.Task[None] | None = None

    def let_go(self, record: AskRecord) -> None:
        """Tell each page that is gone that it left, and stop telling it anything."""
        for page, here in list(self.pages.items()):
            if not here():
                del self.pages[page]
                with contextlib.suppress(asyncio.QueueFull):  # behind: its next write fails
                    page.put_nowait(Change("left", record))


class LiveAsks:
    """Watches asks in ``store`` for the pages open on them (see the module)."""

    def __init__(self, store: Store, *, poll: float = POLL, max_streams: int = MAX_STREAMS) -> None:
        self.store = store
        self.poll = poll
        self.max_streams = max_streams
        self.open = 0
        self._watches: dict[str, _Watch] = {}

    def full(self) -> bool:
        return self.open >= self.max_streams

    @contextlib.asynccontextmanager
    async def changes(
        self, record: AskRecord, here: Callable[[], bool]
    ) -> AsyncIterator[asyncio.Queue[Change]]:
        """A queue of the changes to ``record`` (as the page showed it) until the context ends,
        or until ``here()`` (asked at each read of the ask) finds the page gone: ``left``."""
        queue: asyncio.Queue[Change] = asyncio.Queue(maxsize=8)
        watch = self._watches.get(record.id)
        if watch is None:
            watch = self._watches[record.id] = _Watch()
            watch.task = asyncio.create_task(self._watch(record, watch), name="web live ask")
        watch.pages[queue] = here
        self.open += 1
        try:
            yield queue
        finally:
            self.open -= 1
            watch.pages.pop(queue, None)
            if not watch.pages and self._watches.get(record.id) is watch:
                del self._watches[record.id]
                if watch.task is not None:
                    await stop(watch.task)

    async def _watch(self, seen: AskRecord, watch: _Watch) -> None:
        mark = _mark(seen)
        while True:
            try:
                ended = await self.store.observe(seen.id, self.poll)
                record = ended or await self.store.get(seen.id)
            except StoreUnavailable as exc:
                log.warning("web: live updates of ask %s wait for the store: %s", seen.id, exc)
                watch.let_go(seen)
                await asyncio.sleep(self.poll)
                continue
            watch.let_go(record or seen)
            if record is None:
                return
            if _mark(record) == mark:
                continue
            mark = _mark(record)
            kind = "progress" if record.status is AskStatus.PENDING else "ended"
            for page in watch.pages:
                with contextlib.suppress(asyncio.QueueFull):  # a page behind: it reloads anyway
                    page.put_nowait(Change(kind, record))
            if kind == "ended":
                return

    async def aclose(self) -> None:
        """Stop every watcher (shutdown)."""
        for watch in list(self._watches.values()):
            if watch.task is not None:
                await stop(watch.task)
        self._watches.clear()


def event(kind: str, data: str) -> bytes:
    """One Server-Sent Event: ``data`` a line per ``data:`` field, as the format requires."""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"event: {kind}\n{lines}\n".encode()


def until(deadline: float) -> float:
    """Seconds from now to ``deadline`` (seconds since the epoch), at least zero."""
    return max(0.0, deadline - time.time())
