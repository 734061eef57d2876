"""One quick look at the Redis in ``REDIS_URL``: is it there, and will it keep pending asks?

The store's own client rides out a restart by retrying for several seconds, which is right for a
running replica but wrong for a command starting up: ``ask-bridge list`` with Redis down should
say so at once, in one line, not after a pile of retries or with a traceback. So this opens its
own short-lived connection (any URL form the store takes), without retries and under a deadline,
and reports failures as :class:`~bridge.store.base.StoreUnavailable` naming ``REDIS_URL`` with its
password redacted. :func:`probe` also reads what ``ask-bridge doctor`` judges: the version,
whether anything is persisted (AOF or RDB snapshots), and ``maxmemory-policy`` (anything but
``noeviction`` lets Redis drop a pending ask silently under memory pressure).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, RedisError, ResponseError
from redis.retry import Retry

from bridge.settings import redacted
from bridge.store.base import StoreUnavailable
from bridge.store.redis_connect import connect

DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True)
class RedisFacts:
    """What one Redis server says about itself (``None``: it would not tell, e.g. CONFIG
    disabled on a managed service)."""

    version: str
    aof: bool
    rdb: bool | None
    maxmemory_policy: str

    @property
    def persistent(self) -> bool | None:
        """Whether pending asks survive a restart of this server (AOF, or RDB snapshots)."""
        return True if self.aof or self.rdb else None if self.rdb is None else False


def unreachable(url: str, reason: object) -> str:
    """The one line that says Redis could not be reached."""
    return f"cannot reach Redis at REDIS_URL={redacted(url)}: {reason}"


async def probe(url: str, *, timeout: float = DEFAULT_TIMEOUT) -> RedisFacts:  # noqa: ASYNC109
    """Connect to ``url`` once (no retries, at most ``timeout`` seconds), read the facts, close.
    Raises :class:`StoreUnavailable` with one line naming ``REDIS_URL`` (redacted) and why."""
    try:
        client, subscriber = connect(url, max_connections=2)
    except (ValueError, RedisError) as exc:  # a URL redis-py cannot parse
        raise StoreUnavailable(unreachable(url, exc)) from None
    client.set_retry(Retry(NoBackoff(), 0))
    try:
        async with asyncio.timeout(timeout):
            return await _facts(client)
    except TimeoutError:
        raise StoreUnavailable(unreachable(url, f"no answer within {timeout:g} s")) from None
    except AuthenticationError as exc:
        raise StoreUnavailable(unreachable(url, f"the password was refused ({exc})")) from None
    except (RedisError, OSError) as exc:
        raise StoreUnavailable(unreachable(url, _reason(exc))) from None
    finally:
        await _close(client, subscriber)


async def _facts(client: Any) -> RedisFacts:
    info = _one_node(await client.info())
    try:
        save = _one_node(await client.config_get("save")).get("save")
    except ResponseError:  # CONFIG renamed or disabled (managed services)
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
