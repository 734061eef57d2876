"""Pending-ask stores: the contract (:mod:`.base`) and its two backends.

``MemoryStore`` is the embedded default (one process); ``RedisStore`` is shared by any number of
processes. :func:`bridge.store.opening.open_store` builds the one a URL names;
:func:`bridge.settings.open_store`, the one ``REDIS_URL`` names. The store imports nothing above
it: what it knows that others log, it tells (:data:`bridge.store.base.FEED_OBSERVERS`).
``RedisStore`` is imported on first use, so code that only needs the contract or the memory store
never loads redis-py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.store.base import Store
from bridge.store.memory import MemoryStore
from bridge.store.terms import (
    Delivery,
    DuplicateAsk,
    HistoryEvent,
    PendingPage,
    StoreUnavailable,
    SubmitOutcome,
    SubmitResult,
)

if TYPE_CHECKING:
    from bridge.store.redis import RedisStore

__all__ = [
    "Delivery",
    "DuplicateAsk",
    "HistoryEvent",
    "MemoryStore",
    "PendingPage",
    "RedisStore",
    "Store",
    "StoreUnavailable",
    "SubmitOutcome",
    "SubmitResult",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from bridge.store.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
