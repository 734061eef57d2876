"""Outcome webhooks: when an ask ends, ``serve`` POSTs how it ended to the receivers configured.

**Where to**: ``ASK_BRIDGE_WEBHOOK_URL`` (every ask) and each URL of the ask's own
``AskPolicy.notify`` (``ask --notify URL``), stored with the ask. ``serve`` sends them when
``ASK_BRIDGE_WEBHOOK_SECRET`` is set (required with the URL: nothing goes out unsigned).

**What**: ``POST`` of JSON, :func:`bridge.feed.outcome_payload` of the ended ask (``ask_id``,
``status``, ``result``: the tool-result JSON with the questions' options without their
descriptions, ``answered_by``, ``answered_at``, ``closed_at``, ``context``), with the headers

* ``X-AskBridge-Timestamp``: Unix seconds when this attempt was signed;
* ``X-AskBridge-Signature``: ``v1=`` and the hex HMAC-SHA256, keyed with the secret, of
  ``"{timestamp}.{body}"`` (:func:`sign`; check it with :func:`verify_signature`);
* ``Idempotency-Key``: one value per (ask, URL), the same on every attempt
  (:func:`idempotency_key`).

**How**: from the store's ended-asks stream (:meth:`~bridge.store.base.Store.ended`), written when
the ask ends, so an ending is never missed across restarts; the stream's consumer group shares the
work between ``serve`` replicas, and a replica that dies leaves its deliveries to another after
the store's ``ended_idle``. A 2xx reply delivers; anything else (an error status, a refused
connection, no reply within :data:`TIMEOUT`) is retried after a delay doubling from
:data:`FIRST_DELAY` up to :data:`MAX_DELAY` (jittered), until :data:`GIVE_UP_AFTER` after the ask
ended: then one error line in the log, and the destination is given up. Each (ask, URL) is
scheduled on its own, with at most :data:`PER_DESTINATION` requests in flight per URL, so a
receiver that keeps failing delays nothing sent elsewhere. Every attempt is in the ask's audit
trail (a ``webhook`` event: ``url`` without credentials or query, ``key``, ``attempt``, ``status``
``delivered``/``failed``/``gave_up``, and the reply's ``code`` or the ``error``; never the
secret). An (ask, URL) recorded ``delivered`` is never sent again, so from the bridge's point of
view each is delivered once; on the wire it is at least once (a reply lost after the receiver
acted, a replica dying between the reply and recording it): receivers deduplicate by
``Idempotency-Key``.
"""

from __future__ import annotations

import asyncio
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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from bridge.aio import stop
from bridge.backoff import StateLog
from bridge.feed import outcome_payload
from bridge.record import AskRecord
from bridge.store.base import Delivery, Store, StoreUnavailable

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)
T = TypeVar("T")

TIMESTAMP_HEADER = "X-AskBridge-Timestamp"
SIGNATURE_HEADER = "X-AskBridge-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
EVENT = "webhook"
"""Kind of the audit-trail event each attempt records."""
FIRST_DELAY = 1.0
MAX_DELAY = 600.0
GIVE_UP_AFTER = 24 * 3600.0
"""Seconds after the ask ended past which a failing destination is given up."""
TIMEOUT = 10.0
"""Seconds an attempt waits for the receiver's reply."""
PER_DESTINATION = 4
"""Requests in flight at once to one URL."""
MAX_IN_HAND = 10_000
"""Ended asks one worker holds at once (being sent or waiting for a retry); it reads no more until
one is done, so a receiver down for hours costs bounded memory."""
MAX_NOTIFY = 5
"""Webhook URLs one ask may name (``AskPolicy.notify``)."""
MAX_URL = 2000


def check_url(url: str) -> str:
    """``url`` stripped, if it is an http(s) URL with a host; else ``ValueError`` naming only its
    scheme and host (a URL may carry a token)."""
    text = url.strip() if isinstance(url, str) else ""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(text) > MAX_URL:
        raise ValueError(
            "a webhook URL is http:// or https:// with a host, at most "
            f"{MAX_URL} characters (got scheme {parts.scheme or 'none'!r}, "
            f"host {parts.hostname or 'none'!r})"
        )
    if any(c.isspace() for c in text):
        raise ValueError(f"a webhook URL has no spaces (host {parts.hostname!r})")
    return text


def shown_url(url: str) -> str:
    """``url`` fit for a log line or the audit trail: no credentials, no query, no fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def idempotency_key(ask_id: str, url: str) -> str:
    """The same for every attempt to send one ask's outcome to one URL, different otherwise."""
    return hashlib.sha256(f"{ask_id}\n{url}".encode()).hexdigest()[:32]


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-AskBridge-Signature`` value: ``v1=`` + hex HMAC-SHA256 of ``timestamp.body``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"v1={mac.hexdigest()}"


def verify_signature(
    secret: str,
    timestamp: str,
    body: bytes,
    signature: str,
    *,
    tolerance: float = 300,
    now: float | None = None,
) -> bool:
    """Whether a request came from the bridge: ``signature`` (the ``X-AskBridge-Signature``
    header) signs the raw ``body`` with ``timestamp`` (the ``X-AskBridge-Timestamp`` header), and
    that timestamp is within ``tolerance`` seconds of ``now`` (default: the clock), so a captured
    request cannot be replayed later. Compares in constant time."""
    try:
        age = abs((time.time() if now is None else now) - int(timestamp))
    except ValueError:
        return False
    if age > tolerance:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), signature.strip())


class WebhookWorker:
    """Sends the outcome of every ended ask to its webhooks until cancelled (see the module).

    ``url``: ``ASK_BRIDGE_WEBHOOK_URL`` (``None``: only the asks' own ``notify`` URLs).
    ``consumer``: this worker's name in the ended-asks group (default: host and process id).
    The delays and limits default to the module's constants."""

    def __init__(
        self,
        store: Store,
        secret: str,
        *,
        url: str | None = None,
        consumer: str | None = None,
        first_delay: float = FIRST_DELAY,
        max_delay: float = MAX_DELAY,
        give_up_after: float = GIVE_UP_AFTER,
        timeout: float = TIMEOUT,
        keep_every: float = 60.0,
    ) -> None:
        if not secret:
            raise ValueError("webhooks need a secret to sign with (ASK_BRIDGE_WEBHOOK_SECRET)")
        self.store = store
        self.url = None if url is None else check_url(url)
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}"
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.give_up_after = give_up_after
        self.timeout = timeout
        self.keep_every = keep_every
        self._secret = secret
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._in_hand: dict[str, Delivery] = {}
        self._room = asyncio.Semaphore(MAX_IN_HAND)
        self._store_state = StateLog(log, "webhooks: the store")

    def destinations(self, record: AskRecord) -> list[str]:
        """Where ``record``'s outcome goes: the configured URL, then the ask's own, each once."""
        urls = ([self.url] if self.url else []) + list(record.notify)
        return list(dict.fromkeys(urls))

    async def run(self) -> None:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.timeout)
        tasks: set[asyncio.Task[None]] = set()
        async with aiohttp.ClientSession(timeout=timeout) as session:
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
            urls = self.destinations(record)
            await asyncio.gather(*(self._send(session, record, url) for url in urls))
            await self._retrying(lambda: self.store.ack_ended(delivery))
        finally:
            self._in_hand.pop(delivery.delivery_id, None)
            self._room.release()

    async def _send(self, session: aiohttp.ClientSession, record: AskRecord, url: str) -> None:
        key = idempotency_key(record.id, url)
        history = await self._retrying(lambda: self.store.history(record.id))
        past = [e.detail for e in history if e.kind == EVENT and e.detail.get("key") == key]
        if any(d.get("status") in ("delivered", "gave_up") for d in past):
            return  # another worker (or this one, before a restart) finished it
        attempt = len(past)
        body = json.dumps(outcome_payload(record, descriptions=False), ensure_ascii=False).encode()
        ended_at = record.answered_at or record.closed_at or time.time()
        while True:
            attempt += 1
            code, error = await self._post(session, url, key, body)
            delivered = code is not None and 200 <= code < 300
            gave_up = not delivered and time.time() - ended_at >= self.give_up_after
            status = "delivered" if delivered else "gave_up" if gave_up else "failed"
            detail: dict[str, Any] = {
                "url": shown_url(url),
                "key": key,
                "attempt": attempt,
                "status": status,
            }
            detail.update({"code": code} if code is not None else {"error": error})
            await self._retrying(functools.partial(self._record, record.id, detail))
            if delivered:
                log.info(
                    "webhook %s: ask %s delivered (attempt %d)", shown_url(url), record.id, attempt
                )
                return
            if gave_up:
                log.error(
                    "webhook %s: gave up on ask %s after %d attempts over %.0f s (last: %s)",
                    shown_url(url),
                    record.id,
                    attempt,
                    self.give_up_after,
                    code if code is not None else error,
                )
                return
            log.warning(
                "webhook %s: ask %s attempt %d failed (%s); retrying",
                shown_url(url),
                record.id,
                attempt,
                code if code is not None else error,
            )
            await asyncio.sleep(self._delay(attempt))

    async def _post(
        self, session: aiohttp.ClientSession, url: str, key: str, body: bytes
    ) -> tuple[int | None, str | None]:
        """One attempt: the reply's status, or why there was none."""
        import aiohttp

        limit = self._limits.setdefault(url, asyncio.Semaphore(PER_DESTINATION))
        async with limit:
            timestamp = str(int(time.time()))
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "ask-bridge",
                TIMESTAMP_HEADER: timestamp,
                SIGNATURE_HEADER: sign(self._secret, timestamp, body),
                IDEMPOTENCY_HEADER: key,
            }
            try:
                async with session.post(
                    url, data=body, headers=headers, allow_redirects=False
                ) as reply:
                    return reply.status, None
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                text = f"{type(exc).__name__}: {exc}".replace(url, shown_url(url))
                return None, text[:300]

    async def _record(self, ask_id: str, detail: dict[str, Any]) -> None:
        await self.store.record_event(ask_id, EVENT, **detail)

    def _delay(self, attempt: int) -> float:
        """Capped exponential backoff with jitter (between half and all of the step)."""
        step = min(self.max_delay, self.first_delay * 2.0 ** min(attempt - 1, 40))
        jitter: float = random.uniform(0.5, 1.0)
        return step * jitter

    async def _retrying(self, op: Callable[[], Awaitable[T]]) -> T:
        """A store call, retried while the store is unreachable: the work is late, not lost."""
        delay = 0.25
        while True:
            try:
                result = await op()
            except StoreUnavailable as exc:
                self._store_state.failed(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            self._store_state.ok()
            return result

    async def _keep(self) -> None:
        """Keep the deliveries in hand ours while they wait for a retry (no takeover)."""
        while True:
            await asyncio.sleep(self.keep_every)
            with contextlib.suppress(StoreUnavailable):
                await self.store.keep_ended(self.consumer, list(self._in_hand.values()))
