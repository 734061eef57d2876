"""Pending-ask stores: the contract (:mod:`.base`) and its two backends.

``MemoryStore`` is the embedded default (one process); ``RedisStore`` is shared by any number of
processes. :func:`bridge.settings.open_store` picks one from the environment (``REDIS_URL``).
"""

from bridge.store.base import Delivery, HistoryEvent, Store, SubmitOutcome, SubmitResult
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore

__all__ = [
    "Delivery",
    "HistoryEvent",
    "MemoryStore",
    "RedisStore",
    "Store",
    "SubmitOutcome",
    "SubmitResult",
]
