"""What "Redis could not be reached" looks like in redis-py, turned into
:class:`~bridge.store.base.StoreUnavailable` for every operation of a
:class:`~bridge.store.redis.RedisStore` (after the client's own retries, which ride out a restart
or failover of a few seconds); any other error is raised as it is."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, NoReturn, ParamSpec, TypeVar

from redis.exceptions import (
    ClusterDownError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge.store.terms import StoreUnavailable

# What "Redis did not answer" looks like in redis-py (OSError covers socket errors and timeouts).
_DOWN: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
    ClusterDownError,
    TryAgainError,
    ReadOnlyError,
    SlotNotCoveredError,
)

_P = ParamSpec("_P")
_T = TypeVar("_T")


REDIS_ERRORS = (RedisError, RedisClusterException, OSError)


def reraise(op: str, exc: BaseException, *, maybe_saved: bool = True) -> NoReturn:
    """Raise :class:`StoreUnavailable` for redis-py's ``exc`` when it means "could not reach the
    server", else ``exc`` itself. ``maybe_saved``: unless the caller knows its command was never
    written, it may have run."""
    down = isinstance(exc, _DOWN) or (
        isinstance(exc, RedisClusterException) and isinstance(exc.__cause__, _DOWN)
    )
    if not down:
        raise exc
    raise StoreUnavailable(
        f"ask store: Redis did not answer during {op} ({type(exc).__name__}: {exc})",
        maybe_saved=maybe_saved,
    ) from exc


def gave_up(op: str, *, maybe_saved: bool) -> StoreUnavailable:
    """The caller's deadline (:func:`~bridge.store.base.giving_up_after`) passed during ``op``."""
    what = "it may have run" if maybe_saved else "it was never sent, and never will be"
    return StoreUnavailable(
        f"ask store: Redis did not answer {op} in time ({what})", maybe_saved=maybe_saved
    )


@contextlib.contextmanager
def reaching(op: str) -> Iterator[None]:
    """:func:`reraise` around a block (the feed, a generator)."""
    try:
        yield
    except REDIS_ERRORS as exc:
        reraise(op, exc)


def guarded(
    op: str,
) -> Callable[[Callable[_P, Awaitable[_T]]], Callable[_P, Coroutine[Any, Any, _T]]]:
    """Turn redis-py's "could not reach the server" errors into :class:`StoreUnavailable`
    (a plain ``try``, not a context manager: a waiting call keeps this frame for hours)."""

    def wrap(fn: Callable[_P, Awaitable[_T]]) -> Callable[_P, Coroutine[Any, Any, _T]]:
        @functools.wraps(fn)
        async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            try:
                return await fn(*args, **kwargs)
            except REDIS_ERRORS as exc:
                reraise(op, exc)

        return run

    return wrap
