"""Engine settings from the environment (or a ``.env`` file), and the store they select.

``REDIS_URL`` unset means the embedded :class:`~bridge.store.memory.MemoryStore` (one process,
nothing survives a restart); set it to share asks between replicas. URL forms:
``redis://[user:pass@]host:6379/0``, ``rediss://...`` (TLS), ``redis+cluster://host:7000``,
``redis+sentinel://[user:pass@]host:26379[,host2:26379]/mymaster[/db]``.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from bridge.store.base import DEFAULT_LEASE_TTL, DEFAULT_RETENTION, Store
from bridge.store.keys import DEFAULT_PREFIX
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from bridge.store.redis_connect import DEFAULT_MAX_CONNECTIONS


class EngineSettings(BaseSettings):
    """``REDIS_URL``, ``REDIS_CLUSTER`` (treat the URL as a Cluster node), ``ASK_BRIDGE_*``."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    redis_url: str | None = Field(default=None, validation_alias="REDIS_URL")
    redis_cluster: bool = Field(default=False, validation_alias="REDIS_CLUSTER")
    key_prefix: str = Field(default=DEFAULT_PREFIX, validation_alias="ASK_BRIDGE_KEY_PREFIX")
    retention: float = Field(
        default=DEFAULT_RETENTION, gt=0, validation_alias="ASK_BRIDGE_RETENTION"
    )
    lease_ttl: float = Field(default=DEFAULT_LEASE_TTL, gt=0, validation_alias="ASK_BRIDGE_LEASE")
    max_connections: int = Field(
        default=DEFAULT_MAX_CONNECTIONS, ge=2, validation_alias="REDIS_MAX_CONNECTIONS"
    )


def open_store(settings: EngineSettings | None = None) -> Store:
    """``RedisStore`` when ``REDIS_URL`` is set, else a fresh ``MemoryStore``."""
    settings = settings or EngineSettings()
    if not settings.redis_url:
        return MemoryStore(retention=settings.retention, lease_ttl=settings.lease_ttl)
    url = settings.redis_url
    if settings.redis_cluster and "+cluster" not in url.split("://", 1)[0]:
        scheme, rest = url.split("://", 1)
        url = f"{scheme}+cluster://{rest}"
    return RedisStore.from_url(
        url,
        max_connections=settings.max_connections,
        prefix=settings.key_prefix,
        retention=settings.retention,
        lease_ttl=settings.lease_ttl,
    )
