"""Webhook settings: where ``serve`` may send an ended ask's outcome, and with which secret.

``ASK_BRIDGE_WEBHOOK_URL`` and its secret, the allow-list ``ASK_BRIDGE_WEBHOOK_DESTINATIONS``
(:class:`WebhookSettings`), and the rules every URL passes: its form (:func:`check_url`), the
allow-list entry covering it (:func:`route`), its secret's form (:func:`secret_key`) and how it
is shown in logs and the audit trail (:func:`shown_url`, :func:`redacted_url`).

Two sides read them: the ask being made (:func:`check_notify`, so a bad ``notify`` URL is one
line then, nothing stored) and the worker that sends (:mod:`bridge.webhooks`, which checks
again: its allow-list may differ). Kept apart from that worker, the asking side does not depend
on the feed, the store's streams and the HTTP client that sending needs.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Network, ip_network
from typing import Annotated, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bridge.settings_error import SettingsError, one_line

SECRET_PREFIX = "whsec_"
KEY_BYTES = (24, 64)
"""Least and most bytes a secret's key has (the Standard Webhooks range)."""
DESTINATIONS_ENV = "ASK_BRIDGE_WEBHOOK_DESTINATIONS"
CREATED_ENV = "ASK_BRIDGE_WEBHOOK_CREATED"
MAX_NOTIFY = 5
"""Webhook URLs one ask may name (``AskPolicy.notify``)."""
MAX_URL = 2000
DEFAULT_PORTS = {"http": 80, "https": 443}
_NUMBER = re.compile(r"0x[0-9a-f]*|[0-9]+", re.IGNORECASE)


def check_url(url: str) -> str:
    """``url`` stripped, if it is an http(s) URL with a host; else ``ValueError`` naming only its
    scheme and host (a URL may carry a token). Refused too: an IPv4 address written otherwise than
    ``a.b.c.d`` (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``: each names an address in
    disguise), spaces and backslashes, and ``.``/``..`` path segments (which would step out of an
    allowed prefix once the path is normalised)."""
    text = url.strip() if isinstance(url, str) else ""
    try:
        parts = urlsplit(text)
        host, _ = parts.hostname, parts.port
    except ValueError:  # a bad port or IPv6 literal
        host = None
        parts = urlsplit("")
    if parts.scheme not in DEFAULT_PORTS or not host or len(text) > MAX_URL:
        raise ValueError(
            "a webhook URL is http:// or https:// with a host (and a port, if any, of 0-65535), "
            f"at most {MAX_URL} characters (got scheme {parts.scheme or 'none'!r}, "
            f"host {host or 'none'!r})"
        )
    if any(c.isspace() or c == "\\" for c in text):
        raise ValueError(f"a webhook URL has no spaces or backslashes (host {host!r})")
    label = host.rstrip(".").rpartition(".")[2]
    if ":" not in host and _NUMBER.fullmatch(label) and not _canonical_ipv4(host):
        raise ValueError(
            f"a webhook URL's host is a name or an IPv4 address written a.b.c.d, not {host!r}"
        )
    if any(segment in (".", "..") for segment in unquote(parts.path).split("/")):
        raise ValueError(f"a webhook URL's path has no . or .. segments (host {host!r})")
    return text


def _canonical_ipv4(host: str) -> bool:
    try:
        return str(IPv4Address(host)) == host
    except ValueError:
        return False


def shown_url(url: str) -> str:
    """``url`` fit for a log line or the audit trail: no credentials, no query, no fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redacted_url(url: str) -> str:
    """``url`` with what may be a credential masked: ``***@`` for any user part, ``***`` for every
    query value (the names stay), no fragment. For ``ask-bridge show``: the URL stays
    recognisable, its tokens do not leak."""
    parts = urlsplit(url)
    _, at, hostport = parts.netloc.rpartition("@")
    netloc = f"***@{hostport}" if at else parts.netloc
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = urlencode([(name, "***") for name, _ in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def secret_key(secret: str) -> bytes:
    """The key of a Standard Webhooks secret (``whsec_`` + base64 of 24 to 64 bytes); else
    ``ValueError`` saying so, quoting no part of it."""
    encoded = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else ""
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    least, most = KEY_BYTES
    if not least <= len(key) <= most:
        raise ValueError(
            f"a webhook secret is {SECRET_PREFIX} followed by the base64 of {least} to {most} "
            f'random bytes (Standard Webhooks); make one with: echo "{SECRET_PREFIX}'
            '$(openssl rand -base64 32)"'
        )
    return key


def origin(url: str) -> tuple[str, str, int]:
    """The origin of ``url``: scheme, host and port (the scheme's default when none is given)."""
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port or DEFAULT_PORTS.get(parts.scheme, 0)


class WebhookDestination(BaseModel):
    """One entry of ``ASK_BRIDGE_WEBHOOK_DESTINATIONS``: the URLs an ask may name in ``notify``
    (those under ``prefix``: same scheme, host and port, and a path equal to the prefix's or
    below it at a ``/``), the ``secret`` their requests are signed with, and the ``networks``
    (CIDR) besides public addresses that the prefix's host may resolve into (say
    ``["10.96.0.0/12"]`` for a cluster-internal name). A prefix whose host is an IP address names
    that address, whatever its kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prefix: str
    secret: str = Field(repr=False)
    networks: tuple[str, ...] = ()

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        url = check_url(value)
        parts = urlsplit(url)
        if "@" in parts.netloc or parts.query or parts.fragment or "?" in url or "#" in url:
            raise ValueError(
                f"a prefix has no credentials, query or fragment (host {parts.hostname!r})"
            )
        return url

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str) -> str:
        secret_key(value)
        return value

    @field_validator("networks")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(str(ip_network(net, strict=False)) for net in value)

    def ip_networks(self) -> list[IPv4Network | IPv6Network]:
        return [ip_network(net) for net in self.networks]

    def covers(self, url: str) -> bool:
        """Whether ``url`` (a checked URL) is under this entry's prefix."""
        want, got = urlsplit(self.prefix), urlsplit(url)
        if origin(self.prefix) != origin(url):
            return False
        base, path = want.path or "/", got.path or "/"
        return path == base or path.startswith(base if base.endswith("/") else base + "/")


def route(destinations: Sequence[WebhookDestination], url: str) -> WebhookDestination | None:
    """The entry covering ``url`` (the longest prefix, should several), or ``None``: also for a
    URL :func:`check_url` refuses (one stored by an older version, or written to the store)."""
    try:
        url = check_url(url)
    except ValueError:
        return None
    covering = [d for d in destinations if d.covers(url)]
    return max(covering, key=lambda d: len(d.prefix), default=None)


class WebhookSettings(BaseSettings):
    """Where ``serve`` POSTs the outcome of each ask that ends (:mod:`bridge.webhooks`), and with
    which secret:

    * ``ASK_BRIDGE_WEBHOOK_URL`` and ``ASK_BRIDGE_WEBHOOK_SECRET``: every ask's outcome goes to
      this URL, signed with this secret; each needs the other.
    * ``ASK_BRIDGE_WEBHOOK_DESTINATIONS``: the allow-list of the URLs an ask may name itself
      (``AskPolicy.notify``, ``ask --notify``): a JSON array of entries
      ``{"prefix": "https://ci.example.com/hooks/", "secret": "whsec_...", "networks": [...]}``
      (:class:`WebhookDestination`), each receiver with a secret of its own.
    * ``ASK_BRIDGE_WEBHOOK_CREATED``: opt in to the ``created`` event too (default off): when
      ``ask --platform web`` has made an ask, it POSTs the answerers' links to the same
      destinations, so a pipeline can hand each person theirs (:mod:`bridge.webhooks`).

    Secrets are Standard Webhooks ones: ``whsec_`` and the base64 of 24 to 64 random bytes. A bad
    value stops the command at start with one line naming the variable (never a secret)."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    url: str | None = Field(default=None, validation_alias="ASK_BRIDGE_WEBHOOK_URL")
    secret: str = Field(default="", validation_alias="ASK_BRIDGE_WEBHOOK_SECRET", repr=False)
    destinations: Annotated[tuple[WebhookDestination, ...], NoDecode] = Field(
        default=(), validation_alias=DESTINATIONS_ENV, repr=False
    )
    created: bool = Field(default=False, validation_alias=CREATED_ENV)

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


def check_notify(urls: Sequence[str]) -> tuple[str, ...]:
    """``AskPolicy.notify`` checked when the ask is made: at most :data:`MAX_NOTIFY` URLs, each a
    valid one (:func:`check_url`) that an entry of ``ASK_BRIDGE_WEBHOOK_DESTINATIONS`` (read from
    the environment now) covers; else ``ValueError`` in one line naming the URL without its query
    or credentials. Nothing is looked up or connected to."""
    if len(urls) > MAX_NOTIFY:
        raise ValueError(f"at most {MAX_NOTIFY} webhook URLs per ask, not {len(urls)}")
    checked = tuple(check_url(url) for url in urls)
    if not checked:
        return checked
    allowed = WebhookSettings().destinations
    for url in checked:
        if route(allowed, url) is None:
            raise ValueError(
                f"no {DESTINATIONS_ENV} entry covers {shown_url(url)}: an ask notifies only "
                "URLs under a prefix the operator allowed"
            )
    return checked
