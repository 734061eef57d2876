"""Fixtures for the engine tests: one real server and one real 3-node cluster per session.

Loaded as a pytest plugin by ``tests/conftest.py``; test modules import only its helpers by name.

Each test gets its own key prefix, so tests share the servers without seeing each other's asks.
``store_kind`` parametrises the store contract suite over every backend: the in-memory store, a
standalone server, the cluster, a master found through a Sentinel, and ``REDIS_URL`` when it is set.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from bridge.models import Option, Question, QuestionSet
from bridge.record import AskRecord, Destination
from bridge.store.base import Store
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from tests.support.redis_server import (
    RedisServer,
    SentinelSetup,
    env_redis_url,
    redis_cluster,
    redis_sentinel,
    redis_server,
)

KINDS = ["memory", "redis", "cluster", "sentinel", *(["env"] if env_redis_url() else [])]

StoreFactory = Callable[..., Awaitable[Store]]

LIVE_LEASE = 1.5
"""Seconds of lease for a test that needs a live process's lease to stay live: longer than the
stalls a loaded 2-core machine puts a process through (a 0.3 s lease lapsed there between a create
and the next round trip, or between two renewals a third of a lease apart). A test that needs it
to lapse waits for that condition, so the length costs time only there."""


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def redis_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A server of the module's own, for platform suites that restart or load it."""
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as servers:
        yield servers


@pytest.fixture(scope="session")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSetup]:
    with redis_sentinel(tmp_path_factory.mktemp("sentinel")) as setup:
        yield setup


def url_for(kind: str, request: pytest.FixtureRequest) -> str | None:
    if kind == "memory":
        return None
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("standalone")
        return server.url
    if kind == "cluster":
        nodes: list[RedisServer] = request.getfixturevalue("cluster")
        return f"redis+cluster://127.0.0.1:{nodes[0].port}"
    if kind == "sentinel":
        setup: SentinelSetup = request.getfixturevalue("sentinel")
        return setup.url
    url = env_redis_url()
    assert url is not None
    return url


@pytest.fixture(params=KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_store(
    store_kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[StoreFactory]:
    """``await make_store(**options)``: a store of this test's backend. Several Redis stores of one
    test share a prefix, like replicas of one deployment; the memory backend has one instance."""
    url = url_for(store_kind, request)
    prefix = f"t{secrets.token_hex(4)}"
    made: list[Store] = []
    memory: list[MemoryStore] = []

    async def factory(**options: Any) -> Store:
        if url is None:
            if not memory:
                memory.append(MemoryStore(**options))
            return memory[0]
        store = RedisStore.from_url(url, prefix=prefix, **options)
        made.append(store)
        return store

    yield factory
    for store in made:
        await store.aclose()


@pytest.fixture
async def store(make_store: StoreFactory) -> Store:
    return await make_store()


def questions(n: int = 1) -> QuestionSet:
    return QuestionSet(
        questions=tuple(
            Question(
                question=f"Question number {i}?",
                header=f"Q{i}",
                options=(
                    Option(label="Yes", description="Do it"),
                    Option(label="No", description="Do not"),
                    Option(label="Later", description="Ask again tomorrow"),
                ),
                multiSelect=i % 2 == 1,
            )
            for i in range(n)
        )
    )


def new_record(
    *,
    expires_in: float = 3600.0,
    answerers: tuple[str, ...] = (),
    deferred: bool = False,
    n: int = 1,
    required: int = 1,
) -> AskRecord:
    now = time.time()
    return AskRecord(
        questions=questions(n),
        destination=Destination(platform="memory", channel="C1"),
        context={"session": "s1"},
        answerers=answerers,
        required=required,
        created_at=now,
        expires_at=now + expires_in,
        deferred=deferred,
    )
