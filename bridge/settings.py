"""Engine settings from the environment (or a ``.env`` file), and the store they select.

``REDIS_URL`` unset means the embedded :class:`~bridge.store.memory.MemoryStore` (one process,
nothing survives a restart); set it to share asks between replicas. URL forms:
``redis://[user:pass@]host:6379/0``, ``rediss://...`` (TLS), ``redis+cluster://host:7000``,
``redis+sentinel://[user:pass@]host:26379[,host2:26379]/mymaster[/db]``.

A bad setting is refused when the settings are read, as a :class:`SettingsError` whose message is
one line naming each bad variable (never its value, which may hold a password, except for the key
prefix), so a command can print it and stop before it touches Redis.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bridge.store.base import DEFAULT_LEASE_TTL, DEFAULT_RETENTION, Store
from bridge.store.keys import DEFAULT_PREFIX
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from bridge.store.redis_connect import DEFAULT_MAX_CONNECTIONS
from bridge.webhooks import DESTINATIONS_ENV, WebhookDestination, check_url, secret_key

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


class SettingsError(ValueError):
    """An invalid setting in the environment; the message is one line naming the variable(s)."""


def one_line(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        name = ".".join(str(part) for part in error["loc"]) or "settings"
        problems.append(f"{name}: {error['msg'].removeprefix('Value error, ')}")
    return "invalid setting " + "; ".join(problems)


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
        if value is None or not value.strip():
            return None
        scheme = urlsplit(value.strip()).scheme.lower()
        if scheme not in REDIS_SCHEMES:
            raise ValueError(
                "use a redis://, rediss://, unix://, redis+cluster:// or redis+sentinel:// URL "
                f"(got scheme {scheme or 'none'!r})"
            )
        return value.strip()

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


class WebhookSettings(BaseSettings):
    """Where ``serve`` POSTs the outcome of each ask that ends (:mod:`bridge.webhooks`), and with
    which secret:

    * ``ASK_BRIDGE_WEBHOOK_URL`` and ``ASK_BRIDGE_WEBHOOK_SECRET``: every ask's outcome goes to
      this URL, signed with this secret; each needs the other.
    * ``ASK_BRIDGE_WEBHOOK_DESTINATIONS``: the allow-list of the URLs an ask may name itself
      (``AskPolicy.notify``, ``ask --notify``): a JSON array of entries
      ``{"prefix": "https://ci.example.com/hooks/", "secret": "whsec_...", "networks": [...]}``
      (:class:`~bridge.webhooks.WebhookDestination`), each receiver with a secret of its own.

    Secrets are Standard Webhooks ones: ``whsec_`` and the base64 of 24 to 64 random bytes. A bad
    value stops the command at start with one line naming the variable (never a secret)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    url: str | None = Field(default=None, validation_alias="ASK_BRIDGE_WEBHOOK_URL")
    secret: str = Field(default="", validation_alias="ASK_BRIDGE_WEBHOOK_SECRET", repr=False)
    destinations: Annotated[tuple[WebhookDestination, ...], NoDecode] = Field(
        default=(), validation_alias=DESTINATIONS_ENV, repr=False
    )

    def __init__(self, **values: Any) -> None:
        """Read the settings; :class:`SettingsError` (one line) instead of pydantic's report."""
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(one_line(exc)) from None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return check_url(value)

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str) -> str:
        if value:
            secret_key(value)
        return value

    @field_validator("destinations", mode="before")
    @classmethod
    def _destinations(cls, value: Any) -> Any:
        """The variable's JSON text, decoded here (pydantic-settings would report a decoding
        error in words of its own, not naming the variable)."""
        if not isinstance(value, str):
            return value
        if not value.strip():
            return ()
        try:
            entries = json.loads(value)
        except ValueError:
            entries = None
        if not isinstance(entries, list):
            raise ValueError(
                'a JSON array of {"prefix": "https://...", "secret": "whsec_...", "networks": '
                '["10.0.0.0/8"]} entries (networks optional)'
            )
        return entries

    @model_validator(mode="after")
    def _consistent(self) -> WebhookSettings:
        if self.url and not self.secret:
            raise ValueError(
                "ASK_BRIDGE_WEBHOOK_URL is set but ASK_BRIDGE_WEBHOOK_SECRET is not: webhooks are "
                "always signed; set a secret and give it to that receiver"
            )
        if self.secret and not self.url:
            raise ValueError(
                "ASK_BRIDGE_WEBHOOK_SECRET is set but ASK_BRIDGE_WEBHOOK_URL is not: it signs "
                "only that URL's requests (each URL an ask may notify has its own, in "
                f"{DESTINATIONS_ENV})"
            )
        prefixes = [d.prefix for d in self.destinations]
        if len(set(prefixes)) != len(prefixes):
            raise ValueError(f"{DESTINATIONS_ENV} names a prefix twice")
        return self

    @property
    def enabled(self) -> bool:
        """Whether ``serve`` runs the webhook worker."""
        return bool(self.url or self.destinations)


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
