"""Outcome webhooks: when an ask ends, ``serve`` POSTs how it ended to the receivers configured.

**Where to**: ``ASK_BRIDGE_WEBHOOK_URL`` (every ask; signed with ``ASK_BRIDGE_WEBHOOK_SECRET``),
and each URL of the ask's own ``AskPolicy.notify`` (``ask --notify URL``), stored with the ask --
but only a URL that an entry of ``ASK_BRIDGE_WEBHOOK_DESTINATIONS`` covers (a URL prefix the
operator allowed, with a secret of its own: a receiver holds only its own secret, so it cannot
forge requests to another). The notify URLs are checked when the ask is made
(:func:`~bridge.webhook_settings.check_notify`: one line, nothing stored) and again when ``serve``
sends (its allow-list may differ): an uncovered URL is ``refused``, with no request. What may be
sent where, with which secret, is :mod:`bridge.webhook_settings`'s. A covered URL's host must
resolve to public addresses only, unless its entry names the networks it may resolve into
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
  64 random bytes (:func:`~bridge.webhook_settings.secret_key`).

**How**: from the store's ended-asks stream (:meth:`~bridge.store.base.Store.ended`), written when
the ask ends, so an ending is never missed across restarts; the stream's consumer group shares the
work between ``serve`` replicas, and a replica that dies leaves its deliveries to another after
the store's ``ended_idle``. A 2xx reply delivers; anything else (an error status, a redirect, a
refused connection, no reply within :data:`TIMEOUT`) is retried after a delay doubling from
:data:`FIRST_DELAY` up to :data:`MAX_DELAY` (jittered), until :data:`GIVE_UP_AFTER` after the ask
ended: then one error line in the log, and the destination is given up. Each (ask, URL) is
scheduled on its own, with at most :data:`PER_ORIGIN` requests in flight per origin (scheme, host,
port), so a receiver that keeps failing delays nothing sent elsewhere.

**Created** (opt-in, ``ASK_BRIDGE_WEBHOOK_CREATED``): an ask made by ``ask --platform web``
is announced to the same destinations as soon as it exists, with its answerers' own links
(:func:`created_payload`: ``event`` ``created``, ``ask_id``, ``expires_at``, ``links`` by name,
``context``), so a pipeline can hand each person theirs. The process that made the ask sends it
(:meth:`WebhookWorker.announce`): no store stream carries creations to ``serve``, so it is tried
:data:`CREATED_ATTEMPTS` times within the command's run and then given up (logged and in the audit
trail), not retried across restarts. Its ``webhook-id`` differs from the outcome's
(:func:`idempotency_key` with the event), and the links are credentials: the audit trail and
the log never hold them.

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
import contextlib
import functools
import hashlib
import hmac
import json
import logging
import os
import random
import socket
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential

from bridge.aio import stop
from bridge.feed import outcome_payload
from bridge.logs import StateLog
from bridge.record import AskRecord
from bridge.store.base import Delivery, Store, StoreUnavailable
from bridge.webhook_settings import (
    DESTINATIONS_ENV,
    WebhookDestination,
    check_url,
    origin,
    route,
    secret_key,
    shown_url,
)

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.abc import AbstractResolver

    from bridge.webhook_guard import Networks

log = logging.getLogger(__name__)
T = TypeVar("T")

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
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
KEEP_LAST = 3
"""Failed attempts without an event of their own that the last event of an (ask, URL) lists."""
LOG_EVERY = 300.0
"""Seconds between two warning lines about one failing destination."""
MAX_QUIET = 1024
"""Destinations whose last warning line the worker remembers (the longest quiet forgotten
first: at worst one more line)."""


CREATED = "created"
"""The opt-in event announcing a new ask with its answerers' links."""
CREATED_ATTEMPTS = 4
"""Attempts to announce a created ask (delays doubling from the worker's ``first_delay``)."""


def idempotency_key(ask_id: str, url: str, event: str | None = None) -> str:
    """The same for every attempt to send one ask's outcome (or ``event``) to one URL, different
    otherwise."""
    named = f"{ask_id}\n{url}" if event is None else f"{ask_id}\n{url}\n{event}"
    return hashlib.sha256(named.encode()).hexdigest()[:32]


def created_payload(record: AskRecord, links: Mapping[str, str]) -> dict[str, Any]:
    """The ``created`` event's JSON: the new ask and each answerer's link, by name."""
    return {
        "event": CREATED,
        "ask_id": record.id,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "links": dict(links),
        "context": record.context,
    }


def sign(secret: str, webhook_id: str, timestamp: str, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,`` + base64 HMAC-SHA256 of ``id.timestamp.body``,
    keyed with the bytes of ``secret`` (:func:`~bridge.webhook_settings.secret_key`)."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    mac = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


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
        key = origin(url)
        held = self.slots.get(key)
        if held is None:
            held = self.slots[key] = _Slot(asyncio.Semaphore(self.per))
        held.users += 1
        try:
            async with held.semaphore:
                yield
        finally:
            held.users -= 1
            if held.users == 0:
                del self.slots[key]


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

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[aiohttp.ClientSession]:
        """An HTTP session whose every connection passes the address guard."""
        import aiohttp

        from bridge.webhook_guard import AddressGuard

        guard = AddressGuard(self._resolver or aiohttp.DefaultResolver(), self.networks)
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        # no DNS cache: a cached answer would reach a connection without passing the guard
        connector = aiohttp.TCPConnector(resolver=guard, use_dns_cache=False)
        session = aiohttp.ClientSession(timeout=timeout, connector=connector, trust_env=False)
        try:
            async with session:
                yield session
        finally:
            await guard.close()

    async def run(self) -> None:
        tasks: set[asyncio.Task[None]] = set()
        async with self._session() as session:
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

    async def announce(self, record: AskRecord, links: Mapping[str, str]) -> None:
        """Send the ``created`` event of ``record`` with its answerers' ``links`` to each of its
        destinations, each on its own, at most :data:`CREATED_ATTEMPTS` times (see the module);
        every destination's end is one audit event (``event`` ``created``)."""
        body = json.dumps(created_payload(record, links), ensure_ascii=False).encode()
        async with self._session() as session:
            urls = self.destinations_of(record)
            await asyncio.gather(*(self._announce(session, record.id, url, body) for url in urls))

    async def _announce(
        self, session: aiohttp.ClientSession, ask_id: str, url: str, body: bytes
    ) -> None:
        key = idempotency_key(ask_id, url, CREATED)
        shown = shown_url(url)
        detail: dict[str, Any] = {"url": shown, "key": key, "event": CREATED}
        secret = self.secret_for(url)
        if secret is None:
            error = f"no {DESTINATIONS_ENV} entry covers this URL"
            await self._record(ask_id, {**detail, "attempt": 1, "status": "refused"}, error=error)
            log.warning("webhook %s: ask %s created event refused: %s", shown, ask_id, error)
            return
        for attempt in range(1, CREATED_ATTEMPTS + 1):
            reply = await self._post(session, url, key, secret, body)
            delivered = reply.code is not None and 200 <= reply.code < 300
            if delivered or reply.refused or attempt == CREATED_ATTEMPTS:
                status = "delivered" if delivered else "refused" if reply.refused else "gave_up"
                outcome = {"code": reply.code} if reply.code is not None else {"error": reply.error}
                await self._record(
                    ask_id, {**detail, "attempt": attempt, "status": status}, **outcome
                )
                if delivered:
                    log.info("webhook %s: ask %s created event delivered", shown, ask_id)
                else:
                    last = reply.code if reply.code is not None else reply.error
                    log.warning(
                        "webhook %s: ask %s created event not delivered after %d attempts (%s)",
                        shown,
                        ask_id,
                        attempt,
                        last,
                    )
                return
            await asyncio.sleep(self._delay(attempt))

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
