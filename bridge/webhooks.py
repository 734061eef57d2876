"""Outcome webhooks: when an ask ends, ``serve`` POSTs how it ended to the receivers configured.

**Where to**: ``ASK_BRIDGE_WEBHOOK_URL`` (every ask; signed with ``ASK_BRIDGE_WEBHOOK_SECRET``),
and each URL of the ask's own ``AskPolicy.notify`` (``ask --notify URL``), stored with the ask --
but only a URL that an entry of ``ASK_BRIDGE_WEBHOOK_DESTINATIONS`` covers (a URL prefix the
operator allowed, with a secret of its own: a receiver holds only its own secret, so it cannot
forge requests to another). The notify URLs are checked when the ask is made
(:func:`check_notify`: one line, nothing stored) and again when ``serve`` sends (its allow-list
may differ): an uncovered URL is ``refused``, with no request. A covered URL's host must resolve
to public addresses only, unless its entry names the networks it may resolve into
(:mod:`bridge.webhook_guard`, checked at connect time, before any connection). Redirects are
never followed. The model never chooses a URL: the ``ask_user`` tool has no such field.

**What**: ``POST`` of JSON, :func:`bridge.feed.outcome_payload` of the ended ask (``ask_id``,
``status``, ``result``: the tool-result JSON with the questions' options without their
descriptions, ``answered_by``, ``answered_at``, ``closed_at``, ``context``), signed per the
Standard Webhooks specification (https://www.standardwebhooks.com), so a receiver in any language
checks it with an existing library:

* ``webhook-id``: one value per (ask, URL), the same on every attempt (:func:`idempotency_key`);
  receivers deduplicate by it, and since the signature covers it, a replay under another id fails;
* ``webhook-timestamp``: Unix seconds when this attempt was signed;
* ``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256 of ``"{id}.{timestamp}.{body}"``
  keyed with the secret's bytes (:func:`sign`); secrets are ``whsec_`` and the base64 of 24 to
  64 random bytes (:func:`secret_key`).

**How**: from the store's ended-asks stream (:meth:`~bridge.store.base.Store.ended`), written when
the ask ends, so an ending is never missed across restarts; the stream's consumer group shares the
work between ``serve`` replicas, and a replica that dies leaves its deliveries to another after
the store's ``ended_idle``. A 2xx reply delivers; anything else (an error status, a redirect, a
refused connection, no reply within :data:`TIMEOUT`) is retried after a delay doubling from
:data:`FIRST_DELAY` up to :data:`MAX_DELAY` (jittered), until :data:`GIVE_UP_AFTER` after the ask
ended: then one error line in the log, and the destination is given up. Each (ask, URL) is
scheduled on its own, with at most :data:`PER_ORIGIN` requests in flight per origin (scheme, host,
port), so a receiver that keeps failing delays nothing sent elsewhere.

**Bounded cost**: the ask's audit trail gets ``webhook`` events (``url`` without credentials or
query, ``key``, ``attempt``, ``status`` ``delivered``/``failed``/``gave_up``/``refused``, and the
reply's ``code`` or the ``error``; never the secret) for the first attempt, the attempts numbered
by a power of two (so the count survives a restart), and the last one, which also lists in
``previous`` the :data:`KEEP_LAST` failed attempts before it that have no event of their own: a
day of retries costs about ten events per URL, not hundreds. The log says a destination is
failing once per :data:`LOG_EVERY` seconds, with how many attempts failed since. An (ask, URL)
recorded ``delivered``, ``gave_up`` or ``refused`` is never sent again, so from the bridge's point
of view each is delivered once; on the wire it is at least once (a reply lost after the receiver
acted, a replica dying between the reply and recording it): receivers deduplicate by
``webhook-id``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import hashlib
import hmac
import json
import logging
import os
import random
import re
import socket
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Network, ip_network
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential

from bridge.aio import stop
from bridge.feed import outcome_payload
from bridge.logs import StateLog
from bridge.record import AskRecord
from bridge.settings_error import SettingsError, one_line
from bridge.store.base import Delivery, Store, StoreUnavailable

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.abc import AbstractResolver

    from bridge.webhook_guard import Networks

log = logging.getLogger(__name__)
T = TypeVar("T")

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
SECRET_PREFIX = "whsec_"
KEY_BYTES = (24, 64)
"""Least and most bytes a secret's key has (the Standard Webhooks range)."""
DESTINATIONS_ENV = "ASK_BRIDGE_WEBHOOK_DESTINATIONS"
EVENT = "webhook"
"""Kind of the audit-trail events the attempts record."""
DONE = frozenset({"delivered", "gave_up", "refused"})
"""Statuses after which an (ask, URL) is never sent again."""
FIRST_DELAY = 1.0
MAX_DELAY = 600.0
GIVE_UP_AFTER = 24 * 3600.0
"""Seconds after the ask ended past which a failing destination is given up."""
TIMEOUT = 10.0
"""Seconds an attempt waits for the receiver's reply."""
PER_ORIGIN = 4
"""Requests in flight at once to one origin (scheme, host, port), whatever the paths and queries."""
MAX_IN_HAND = 10_000
"""Ended asks one worker holds at once (being sent or waiting for a retry); it reads no more until
one is done, so a receiver down for hours costs bounded memory."""
MAX_NOTIFY = 5
"""Webhook URLs one ask may name (``AskPolicy.notify``)."""
MAX_URL = 2000
KEEP_LAST = 3
"""Failed attempts without an event of their own that the last event of an (ask, URL) lists."""
LOG_EVERY = 300.0
"""Seconds between two warning lines about one failing destination."""
MAX_QUIET = 1024
"""Destinations whose last warning line the worker remembers (the longest quiet forgotten
first: at worst one more line)."""
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


def idempotency_key(ask_id: str, url: str) -> str:
    """The same for every attempt to send one ask's outcome to one URL, different otherwise."""
    return hashlib.sha256(f"{ask_id}\n{url}".encode()).hexdigest()[:32]


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


def sign(secret: str, webhook_id: str, timestamp: str, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,`` + base64 HMAC-SHA256 of ``id.timestamp.body``,
    keyed with the bytes of ``secret`` (:func:`secret_key`)."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    mac = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def _origin(url: str) -> tuple[str, str, int]:
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
        if _origin(self.prefix) != _origin(url):
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


class _Reply(NamedTuple):
    code: int | None
    error: str | None
    refused: bool = False


@dataclass
class _Slot:
    semaphore: asyncio.Semaphore
    users: int = 0


class _Origins:
    """At most ``per`` requests in flight to one origin. An origin's semaphore lives only while a
    request to it is in flight or waiting, so the map is bounded by the requests in hand (URLs
    differing in query or path share their origin's slot and leave nothing behind)."""

    def __init__(self, per: int) -> None:
        self.per = per
        self.slots: dict[tuple[str, str, int], _Slot] = {}

    @contextlib.asynccontextmanager
    async def slot(self, url: str) -> AsyncIterator[None]:
        origin = _origin(url)
        held = self.slots.get(origin)
        if held is None:
            held = self.slots[origin] = _Slot(asyncio.Semaphore(self.per))
        held.users += 1
        try:
            async with held.semaphore:
                yield
        finally:
            held.users -= 1
            if held.users == 0:
                del self.slots[origin]


@dataclass
class _Quiet:
    since: float
    more: int = 0


class _Warnings:
    """One warning line per destination per ``every`` seconds: the first failure at once, the
    next one after the interval, with how many failed meanwhile."""

    def __init__(self, every: float) -> None:
        self.every = every
        self._lines: OrderedDict[str, _Quiet] = OrderedDict()

    def warn(self, shown: str, what: str) -> None:
        now = time.monotonic()
        quiet = self._lines.pop(shown, None)
        if quiet is None or now - quiet.since >= self.every:
            meanwhile = f" ({quiet.more} more failed since the last line)" if quiet else ""
            log.warning("webhook %s: %s%s", shown, what, meanwhile)
            quiet = _Quiet(since=now)
        else:
            quiet.more += 1
        self._lines[shown] = quiet
        while len(self._lines) > MAX_QUIET:
            self._lines.popitem(last=False)


def _kept(attempt: int) -> bool:
    """Whether a failed attempt gets an audit event of its own: 1, 2, 4, 8, ..."""
    return attempt & (attempt - 1) == 0


class WebhookWorker:
    """Sends the outcome of every ended ask to its webhooks until cancelled (see the module).

    ``url``, ``secret``: ``ASK_BRIDGE_WEBHOOK_URL`` and its secret (``None``: only the asks' own
    ``notify`` URLs). ``destinations``: the allow-list for those. ``resolver``: looks hosts up
    (default aiohttp's; every answer passes :class:`~bridge.webhook_guard.AddressGuard`).
    ``consumer``: this worker's name in the ended-asks group (default: host and process id).
    The delays and limits default to the module's constants."""

    def __init__(
        self,
        store: Store,
        *,
        url: str | None = None,
        secret: str | None = None,
        destinations: Sequence[WebhookDestination] = (),
        resolver: AbstractResolver | None = None,
        consumer: str | None = None,
        first_delay: float = FIRST_DELAY,
        max_delay: float = MAX_DELAY,
        give_up_after: float = GIVE_UP_AFTER,
        timeout: float = TIMEOUT,
        keep_every: float = 60.0,
        log_every: float = LOG_EVERY,
    ) -> None:
        if url is not None and not secret:
            raise ValueError("ASK_BRIDGE_WEBHOOK_URL needs ASK_BRIDGE_WEBHOOK_SECRET to sign with")
        if url is not None and secret:
            secret_key(secret)
        self.store = store
        self.url = None if url is None else check_url(url)
        self.destinations = tuple(destinations)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}"
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.give_up_after = give_up_after
        self.timeout = timeout
        self.keep_every = keep_every
        self._secret = secret or ""
        self._resolver = resolver
        self._origins = _Origins(PER_ORIGIN)
        self._warnings = _Warnings(log_every)
        self._in_hand: dict[str, Delivery] = {}
        self._room = asyncio.Semaphore(MAX_IN_HAND)
        self._store_state = StateLog(log, "webhooks: the store")

    def destinations_of(self, record: AskRecord) -> list[str]:
        """Where ``record``'s outcome goes: the configured URL, then the ask's own, each once."""
        urls = ([self.url] if self.url else []) + list(record.notify)
        return list(dict.fromkeys(urls))

    def secret_for(self, url: str) -> str | None:
        """The secret signing requests to ``url``: the configured URL's, or the covering
        allow-list entry's; ``None``: ``url`` is not allowed (checked at every send: the
        allow-list of this process may differ from the one the ask was made under)."""
        if url == self.url:
            return self._secret
        allowed = route(self.destinations, url)
        return None if allowed is None else allowed.secret

    def networks(self, host: str) -> Networks:
        """What ``host`` may resolve into besides public addresses (the guard's rule): anything
        for the configured URL's host, which the operator wrote in full; the networks of the
        allow-list entries naming it otherwise."""
        if self.url is not None and urlsplit(self.url).hostname == host:
            return None
        return [
            net
            for allowed in self.destinations
            if urlsplit(allowed.prefix).hostname == host
            for net in allowed.ip_networks()
        ]

    async def run(self) -> None:
        import aiohttp

        from bridge.webhook_guard import AddressGuard

        guard = AddressGuard(self._resolver or aiohttp.DefaultResolver(), self.networks)
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        # no DNS cache: a cached answer would reach a connection without passing the guard
        connector = aiohttp.TCPConnector(resolver=guard, use_dns_cache=False)
        tasks: set[asyncio.Task[None]] = set()
        session = aiohttp.ClientSession(timeout=timeout, connector=connector, trust_env=False)
        async with session:
            keeper = asyncio.create_task(self._keep(), name="ask-bridge webhooks: keep")
            try:
                while True:
                    try:
                        await self._read(session, tasks)
                    except StoreUnavailable as exc:
                        self._store_state.failed(exc)
                        await asyncio.sleep(1.0)
            finally:
                await stop(keeper)
                for task in list(tasks):
                    await stop(task)
                await guard.close()

    async def _read(self, session: aiohttp.ClientSession, tasks: set[asyncio.Task[None]]) -> None:
        deliveries = self.store.ended(self.consumer)
        try:
            while True:
                await self._room.acquire()
                try:
                    delivery = await anext(deliveries)
                except BaseException:
                    self._room.release()
                    raise
                self._store_state.ok()
                if delivery.delivery_id in self._in_hand:  # handed out again: still at work on it
                    self._room.release()
                    continue
                self._in_hand[delivery.delivery_id] = delivery
                task = asyncio.create_task(self._deliver(session, delivery))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            await deliveries.aclose()  # type: ignore[attr-defined]

    async def _deliver(self, session: aiohttp.ClientSession, delivery: Delivery) -> None:
        """Every destination of one ended ask, each on its own; then the delivery is acked."""
        try:
            record = delivery.record
            urls = self.destinations_of(record)
            await asyncio.gather(*(self._send(session, record, url) for url in urls))
            await self._retrying(lambda: self.store.ack_ended(delivery))
        finally:
            self._in_hand.pop(delivery.delivery_id, None)
            self._room.release()

    async def _send(self, session: aiohttp.ClientSession, record: AskRecord, url: str) -> None:
        key = idempotency_key(record.id, url)
        shown = shown_url(url)
        history = await self._retrying(lambda: self.store.history(record.id))
        past = [e.detail for e in history if e.kind == EVENT and e.detail.get("key") == key]
        if any(d.get("status") in DONE for d in past):
            return  # another worker (or this one, before a restart) finished it
        attempt = max((int(d.get("attempt", 0)) for d in past), default=0)
        secret = self.secret_for(url)
        if secret is None:
            error = f"no {DESTINATIONS_ENV} entry of this serve covers this URL"
            detail = {"url": shown, "key": key, "attempt": attempt + 1, "status": "refused"}
            await self._retrying(functools.partial(self._record, record.id, detail, error=error))
            self._warnings.warn(shown, f"ask {record.id} refused: {error}")
            return
        body = json.dumps(outcome_payload(record, descriptions=False), ensure_ascii=False).encode()
        ended_at = record.answered_at or record.closed_at or time.time()
        unrecorded: deque[dict[str, Any]] = deque(maxlen=KEEP_LAST)
        while True:
            attempt += 1
            at = time.time()
            reply = await self._post(session, url, key, secret, body)
            outcome: dict[str, Any] = (
                {"code": reply.code} if reply.code is not None else {"error": reply.error}
            )
            delivered = reply.code is not None and 200 <= reply.code < 300
            gave_up = not delivered and time.time() - ended_at >= self.give_up_after
            status = (
                "delivered"
                if delivered
                else "refused"
                if reply.refused
                else "gave_up"
                if gave_up
                else "failed"
            )
            if status != "failed" or _kept(attempt):
                detail = {"url": shown, "key": key, "attempt": attempt, "status": status}
                if status != "failed" and unrecorded:
                    detail["previous"] = list(unrecorded)
                unrecorded.clear()
                await self._retrying(functools.partial(self._record, record.id, detail, **outcome))
            else:
                unrecorded.append({"attempt": attempt, "at": round(at, 3), **outcome})
            last = reply.code if reply.code is not None else reply.error
            if delivered:
                log.info("webhook %s: ask %s delivered (attempt %d)", shown, record.id, attempt)
                return
            if reply.refused:
                self._warnings.warn(shown, f"ask {record.id} refused: {last}")
                return
            if gave_up:
                log.error(
                    "webhook %s: gave up on ask %s after %d attempts over %.0f s (last: %s)",
                    shown,
                    record.id,
                    attempt,
                    self.give_up_after,
                    last,
                )
                return
            self._warnings.warn(
                shown, f"ask {record.id} attempt {attempt} failed ({last}); retrying with backoff"
            )
            await asyncio.sleep(self._delay(attempt))

    async def _post(
        self, session: aiohttp.ClientSession, url: str, key: str, secret: str, body: bytes
    ) -> _Reply:
        """One attempt: the reply's status, or why there was none (``refused``: the guard would
        not connect, see :mod:`bridge.webhook_guard`)."""
        import aiohttp

        from bridge.webhook_guard import Refused

        async with self._origins.slot(url):
            timestamp = str(int(time.time()))
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "ask-bridge",
                ID_HEADER: key,
                TIMESTAMP_HEADER: timestamp,
                SIGNATURE_HEADER: sign(secret, key, timestamp, body),
            }
            try:
                async with session.post(
                    url, data=body, headers=headers, allow_redirects=False
                ) as reply:
                    return _Reply(reply.status, None)
            except Refused as exc:
                return _Reply(None, str(exc), refused=True)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                text = f"{type(exc).__name__}: {exc}".replace(url, shown_url(url))
                return _Reply(None, text[:300])

    async def _record(self, ask_id: str, detail: dict[str, Any], **outcome: Any) -> None:
        await self.store.record_event(ask_id, EVENT, **detail, **outcome)

    def _delay(self, attempt: int) -> float:
        """Capped exponential backoff with jitter (between half and all of the step)."""
        step = min(self.max_delay, self.first_delay * 2.0 ** min(attempt - 1, 40))
        jitter: float = random.uniform(0.5, 1.0)
        return step * jitter

    async def _retrying(self, op: Callable[[], Awaitable[T]]) -> T:
        """A store call, retried while the store is unreachable (waits doubling from a quarter
        of a second to five): the work is late, not lost."""
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(StoreUnavailable),
            wait=wait_exponential(multiplier=0.25, max=5.0),
            after=self._store_state.attempt_failed,
        )
        async for attempt in retrying:
            with attempt:
                result = await op()
        self._store_state.ok()
        return result

    async def _keep(self) -> None:
        """Keep the deliveries in hand ours while they wait for a retry (no takeover)."""
        while True:
            await asyncio.sleep(self.keep_every)
            with contextlib.suppress(StoreUnavailable):
                await self.store.keep_ended(self.consumer, list(self._in_hand.values()))
