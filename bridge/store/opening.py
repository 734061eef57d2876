"""The store a URL names: :class:`~bridge.store.redis.RedisStore` for a Redis URL, else a fresh
:class:`~bridge.store.memory.MemoryStore`.

It lives with the stores it builds, so the settings layer (:func:`bridge.settings.open_store`,
which reads ``REDIS_URL`` and the rest from the environment) depends on the store and never the
reverse.
"""

from __future__ import annotations

from typing import Unpack

from bridge.store.base import Store
from bridge.store.keys import DEFAULT_PREFIX
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from bridge.store.redis.connect import DEFAULT_MAX_CONNECTIONS
from bridge.store.terms import StoreSettings


def open_store(
    url: str | None,
    *,
    cluster: bool = False,
    prefix: str = DEFAULT_PREFIX,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    **settings: Unpack[StoreSettings],
) -> Store:
    """``RedisStore`` when ``url`` is set (``cluster``: treat it as a Cluster node, as if its
    scheme said ``+cluster``), else a fresh ``MemoryStore``; either with the ``settings`` every
    store takes (``retention``, ``lease_ttl``, ...: :class:`~bridge.store.base.Store`), their
    defaults the store's own."""
    if not url:
        return MemoryStore(**settings)
    if cluster and "+cluster" not in url.split("://", 1)[0]:
        scheme, rest = url.split("://", 1)
        url = f"{scheme}+cluster://{rest}"
    return RedisStore.from_url(url, max_connections=max_connections, prefix=prefix, **settings)
