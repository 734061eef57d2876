"""Engine settings from the environment (or a ``.env`` file), and the store they select.

``REDIS_URL`` unset means the embedded :class:`~bridge.store.memory.MemoryStore` (one process,
nothing survives a restart); set it to share asks between replicas. URL forms:
``redis://[user:pass@]host:6379/0``, ``rediss://...`` (TLS), ``redis+cluster://host:7000``,
``redis+sentinel://[user:pass@]host:26379[,host2:26379]/mymaster[/db]``.

A bad setting is refused when the settings are read, as a :class:`SettingsError` whose message is
one line naming each bad variable (never its value, which may hold a password, except for the key
prefix), so a command can print it and stop before it touches Redis. It and its ``one_line``
live in the leaf :mod:`bridge.settings_error` (so the logging and webhook settings raise it
without importing these, and with them the store) and are importable from here as ever.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bridge.settings_error import SettingsError as SettingsError
from bridge.settings_error import one_line as one_line
from bridge.settings_error import unset_if_blank
from bridge.store import opening
from bridge.store.base import DEFAULT_LEASE_TTL, DEFAULT_RETENTION, Store
from bridge.store.keys import DEFAULT_PREFIX
from bridge.store.redis.connect import DEFAULT_MAX_CONNECTIONS

KEY_PREFIX_ENV = "ASK_BRIDGE_KEY_PREFIX"
REDIS_WAIT_ENV = "ASK_BRIDGE_REDIS_WAIT"
DEFAULT_REDIS_WAIT = 5.0
"""Seconds a command starting up tries to reach Redis before it fails (``ASK_BRIDGE_REDIS_WAIT``,
:func:`bridge.redis_probe.reach`): longer than a restart, short enough to fail in time."""
KEY_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""Allowed key prefixes. Braces above all are refused: in Redis Cluster only the part of a key
inside its first ``{...}`` picks the slot, so a brace in the prefix would put every key of every
ask in one slot instead of each ask in its own (``<prefix>:{<id>}:rec``)."""


REDIS_SCHEMES = (
    "redis",
    "rediss",
    "unix",
    "redis+cluster",
    "rediss+cluster",
    "redis+sentinel",
    "rediss+sentinel",
)


def redacted(url: str) -> str:
    """``url`` with its password (if any, in the user part or as ``sentinel_password=``) replaced
    by ``***``, fit for a log line or an error. A lone ``secret@host`` is a password to redis-py."""
    parts = urlsplit(url)
    auth, at, hosts = parts.netloc.rpartition("@")
    netloc = parts.netloc
    if at:
        user, colon, _ = auth.partition(":")
        netloc = f"{user}:***@{hosts}" if colon else f"***@{hosts}"
    query = re.sub(r"(password=)[^&]*", r"\1***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class EngineSettings(BaseSettings):
    """``REDIS_URL``, ``REDIS_CLUSTER`` (treat the URL as a Cluster node), ``ASK_BRIDGE_*``
    (``ASK_BRIDGE_REDIS_WAIT``: seconds a command starting up waits for Redis, 0 or more)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    redis_url: str | None = Field(default=None, validation_alias="REDIS_URL")
    redis_cluster: bool = Field(default=False, validation_alias="REDIS_CLUSTER")
    key_prefix: str = Field(default=DEFAULT_PREFIX, validation_alias=KEY_PREFIX_ENV)
    retention: float = Field(
        default=DEFAULT_RETENTION, gt=0, validation_alias="ASK_BRIDGE_RETENTION"
    )
    lease_ttl: float = Field(default=DEFAULT_LEASE_TTL, gt=0, validation_alias="ASK_BRIDGE_LEASE")
    max_connections: int = Field(
        default=DEFAULT_MAX_CONNECTIONS, ge=2, validation_alias="REDIS_MAX_CONNECTIONS"
    )
    redis_wait: float = Field(
        default=DEFAULT_REDIS_WAIT, ge=0, allow_inf_nan=False, validation_alias=REDIS_WAIT_ENV
    )

    def __init__(self, **values: Any) -> None:
        """Read the settings; :class:`SettingsError` (one line) instead of pydantic's report."""
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(one_line(exc)) from None

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        url = unset_if_blank(value)
        if url is None:
            return None
        scheme = urlsplit(url).scheme.lower()
        if scheme not in REDIS_SCHEMES:
            raise ValueError(
                "use a redis://, rediss://, unix://, redis+cluster:// or redis+sentinel:// URL "
                f"(got scheme {scheme or 'none'!r})"
            )
        return url

    @field_validator("key_prefix")
    @classmethod
    def _key_prefix(cls, value: str) -> str:
        if not KEY_PREFIX.fullmatch(value):
            shown = value if len(value) <= 70 else value[:69] + "…"
            raise ValueError(
                f"{shown!r} is not a key prefix: use 1 to 64 of the characters A-Z a-z 0-9 _ . : - "
                "(a brace would put the keys of every ask in one Redis Cluster slot)"
            )
        return value


class ChatRouteSettings(BaseSettings):
    """``ASK_BRIDGE_PLATFORM`` and ``ASK_BRIDGE_CHANNEL``: where ``ask-bridge mcp`` posts (unset:
    it asks the MCP client's own user); ``ASK_BRIDGE_MCP_TOKEN``: the bearer token its HTTP
    transport requires. Read like every setting: the environment, or ``.env``."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    platform: str = Field(default="", validation_alias="ASK_BRIDGE_PLATFORM")
    channel: str = Field(default="", validation_alias="ASK_BRIDGE_CHANNEL")
    mcp_token: str = Field(default="", validation_alias="ASK_BRIDGE_MCP_TOKEN", repr=False)


def open_store(settings: EngineSettings | None = None) -> Store:
    """``RedisStore`` when ``REDIS_URL`` is set, else a fresh ``MemoryStore``: the settings read
    here, the store built where the stores live (:func:`bridge.store.opening.open_store`)."""
    settings = settings or EngineSettings()
    return opening.open_store(
        settings.redis_url,
        cluster=settings.redis_cluster,
        prefix=settings.key_prefix,
        retention=settings.retention,
        lease_ttl=settings.lease_ttl,
        max_connections=settings.max_connections,
    )
