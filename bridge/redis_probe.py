"""One quick look at the Redis in ``REDIS_URL``: is it there, and will it keep pending asks?

The store's own client rides out a restart by retrying for several seconds, which is right for a
running replica but wrong for a command starting up: ``ask-bridge list`` with Redis down should
say so in one line, not after a pile of retries or with a traceback. So this opens its own
short-lived connection (any URL form the store takes), without retries and under a deadline,
and reports failures as :class:`~bridge.store.base.StoreUnavailable` naming ``REDIS_URL`` with its
password redacted. :func:`probe` also reads what ``ask-bridge doctor`` judges: the version,
whether anything is persisted (AOF or RDB snapshots), ``maxmemory-policy`` (anything but
``noeviction`` lets Redis drop a pending ask silently under memory pressure), and, given the key
prefix, whether the user may run every command the bridge sends (:mod:`bridge.redis_acl`).

A command's first look is :func:`reach`: a Redis restarting as the command starts (in a chaos
run, Redis restarted for half a second and the two ``ask`` processes started meanwhile failed,
while every running ask rode it out) is tried again (tenacity) for ``ASK_BRIDGE_REDIS_WAIT``
seconds before the command fails in one line; a person at a terminal is told after the first
second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    NoPermissionError,
    RedisClusterException,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from tenacity import (
    AsyncRetrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from bridge.redis_acl import Access, check
from bridge.settings import REDIS_WAIT_ENV, redacted
from bridge.store.base import StoreUnavailable
from bridge.store.redis.connect import connect

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT = 5.0
NOTICE_AFTER = 1.0
"""Seconds :func:`reach` tries before it tells a person it is waiting: a restart shorter than
that passes unremarked."""
FIRST_RETRY = 0.1
MAX_RETRY = 0.5
"""Waits between :func:`reach`'s tries double from :data:`FIRST_RETRY` up to this: a Redis back
after a restart is found within half a second, and a wait that ends past ``seconds`` (tenacity's
``stop_after_delay`` lets the last one run) ends at most this late."""
MIN_ATTEMPT = 1.0
"""Seconds one try may take at least, however little of the wait is left."""


class Unreachable(StoreUnavailable):
    """Nothing answered at the URL (refused, reset, timed out, loading, no master or Cluster node
    yet): it may come back, unlike a refused password or a URL that cannot work."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(unreachable(url, reason))
        self.reason = reason


@dataclass(frozen=True)
class RedisFacts:
    """What one Redis server says about itself (``None``: it would not tell, e.g. CONFIG
    disabled on a managed service, or INFO not permitted to this user), and, when asked for,
    what the user may run (:class:`~bridge.redis_acl.Access`)."""

    version: str
    aof: bool | None
    rdb: bool | None
    maxmemory_policy: str | None
    access: Access | None = None

    @property
    def persistent(self) -> bool | None:
        """Whether pending asks survive a restart of this server (AOF, or RDB snapshots)."""
        if self.aof or self.rdb:
            return True
        return None if self.aof is None or self.rdb is None else False


def unreachable(url: str, reason: object) -> str:
    """The one line that says Redis could not be reached."""
    return f"cannot reach Redis at REDIS_URL={redacted(url)}: {reason}"


async def probe(
    url: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
    prefix: str | None = None,
) -> RedisFacts:
    """Connect to ``url`` once (no retries, at most ``timeout`` seconds), read the facts (and,
    given the key ``prefix``, check the user's permissions), close. Raises :class:`Unreachable`
    when nothing answers, else :class:`StoreUnavailable`, in one line naming ``REDIS_URL``
    (redacted) and why."""
    try:
        client, subscriber = connect(url, max_connections=2)
    except (ValueError, RedisError) as exc:  # a URL redis-py cannot parse
        raise StoreUnavailable(unreachable(url, exc)) from None
    client.set_retry(Retry(NoBackoff(), 0))
    try:
        async with asyncio.timeout(timeout):
            facts = await _facts(client)
            if prefix is None:
                return facts
            user = unquote(urlsplit(url).username or "") or None
            return replace(facts, access=await check(client, prefix, user=user))
    except TimeoutError:
        raise Unreachable(url, f"no answer within {timeout:g} s") from None
    except AuthenticationError as exc:  # a ConnectionError to redis-py, but it will not pass
        raise StoreUnavailable(unreachable(url, f"the password was refused ({exc})")) from None
    except (RedisConnectionError, RedisTimeoutError, RedisClusterException, OSError) as exc:
        raise Unreachable(url, _reason(exc)) from None  # a Cluster none of whose nodes answer too
    except RedisError as exc:
        raise StoreUnavailable(unreachable(url, _reason(exc))) from None
    finally:
        await _close(client, subscriber)


async def reach(
    url: str, *, seconds: float, waiting: Callable[[str], object] | None = None
) -> RedisFacts:
    """:func:`probe`, tried again while nothing answers (:class:`Unreachable`) for ``seconds``
    (``ASK_BRIDGE_REDIS_WAIT``; 0: once), each try within what is left of them (at least
    :data:`MIN_ATTEMPT`). If it is still trying after :data:`NOTICE_AFTER` seconds, ``waiting``
    (a command's line on a terminal) is called once with the line to show. Then the last failure
    is raised, saying how long it tried; a refused password or a bad URL at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    notice = None
    if waiting is not None and seconds > NOTICE_AFTER:
        line = f"waiting for Redis at REDIS_URL={redacted(url)}"
        notice = loop.call_later(
            NOTICE_AFTER, waiting, f"{line} (up to {seconds:g} s: {REDIS_WAIT_ENV})"
        )
    retrying = AsyncRetrying(
        retry=retry_if_exception_type(Unreachable),
        wait=wait_exponential(multiplier=FIRST_RETRY, max=MAX_RETRY),
        stop=stop_after_delay(seconds),
        before_sleep=before_sleep_log(log, logging.DEBUG),
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:  # once (a wait of 0): as long as ever; else within what is left
                left = deadline - loop.time()
                within = min(DEFAULT_TIMEOUT, max(left, MIN_ATTEMPT)) if seconds > 0 else None
                facts = await probe(url, timeout=within or DEFAULT_TIMEOUT)
    except Unreachable as exc:
        if seconds <= 0:
            raise
        tried = f"{exc.reason} (tried for {seconds:g} s: {REDIS_WAIT_ENV})"
        raise Unreachable(url, tried) from None
    finally:
        if notice is not None:
            notice.cancel()
    return facts


async def _facts(client: Any) -> RedisFacts:
    try:
        info = _one_node(await client.info())
    except NoPermissionError:  # INFO is @dangerous: a least-privilege user may not read it
        await client.ping()
        return RedisFacts(version="unknown", aof=None, rdb=None, maxmemory_policy=None)
    try:
        save = _one_node(await client.config_get("save")).get("save")
    except ResponseError:  # CONFIG renamed or disabled (managed services), or not permitted
        save = None
    return RedisFacts(
        version=str(info.get("valkey_version") or info.get("redis_version") or "unknown"),
        aof=str(info.get("aof_enabled", "0")) == "1",
        rdb=None if save is None else bool(str(save).strip()),
        maxmemory_policy=str(info.get("maxmemory_policy", "unknown")),
    )


def _one_node(reply: Any) -> dict[str, Any]:
    """A Cluster answers per node (``{node: reply}``): the first node's reply stands for all."""
    if isinstance(reply, dict) and reply and all(isinstance(v, dict) for v in reply.values()):
        first = next(iter(reply.values()))
        if "redis_version" not in reply and "save" not in reply:
            return dict(first)
    return dict(reply or {})


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


async def _close(client: Any, subscriber: Any) -> None:
    for closing in {id(client): client, id(subscriber): subscriber}.values():
        try:
            await closing.aclose()
        except (RedisError, OSError, AttributeError):
            pass
