"""A click's mark that its showing is done (``mark_rendered(..., together=True)``) goes with the
store's next script calls rather than costing a round trip of its own -- or alone once it has
waited :data:`~bridge.store.redis.sweeping.MARK_LINGER` -- and lands all the same: the ask leaves
the sweeper's list, its trail says ``rendered``. A mark made alone (a sweep's, a cancel's) is
sent at once, as before."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from bridge.record import AskRecord, AskStatus, MessageRef, Responder
from bridge.store.redis import RedisStore
from bridge.store.redis import connected as connected_module
from bridge.store.redis.connect import Outgoing
from bridge.store.redis.sweeping import MARK_LINGER
from tests.support.engine_fixtures import new_record

ALICE = Responder(user_id="U_ALICE", name="Alice")


@pytest.fixture
async def store(standalone: Any) -> AsyncIterator[RedisStore]:
    made = RedisStore.from_url(standalone.url, prefix=f"t{secrets.token_hex(4)}")
    yield made
    await made.aclose()


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Each round trip of script calls the store makes: the scripts' SHAs, in order."""
    sent: list[list[str]] = []
    real = connected_module.send_together

    async def counted(client: Any, commands: Sequence[Any]) -> list[Any]:
        sent.append([_sha(c) for c in commands])
        return await real(client, commands)

    monkeypatch.setattr(connected_module, "send_together", counted)
    return sent


def _sha(command: Any) -> str:
    words = command.command if isinstance(command, Outgoing) else command
    return str(words[1])


async def answered(store: RedisStore, n: int) -> AskRecord:
    """An ask posted as message ``n``, answered by a click that claimed its showing."""
    record = new_record()
    await store.create(record)
    await store.set_message(
        record.id, MessageRef(platform="memory", channel="C", message_id=str(n))
    )
    result = await store.pick(record.id, ALICE, 0, 0, claim=True)
    assert result.claimed and result.record is not None
    assert result.record.status is AskStatus.ANSWERED
    return result.record


async def shown(store: RedisStore, ask_id: str) -> bool:
    """The ask is marked shown: its trail says so (a sweep will not show it again)."""
    return "rendered" in [event.kind for event in await store.history(ask_id)]


async def test_a_mark_made_together_goes_with_the_next_click_in_one_round_trip(
    store: RedisStore, batches: list[list[str]]
) -> None:
    first = await answered(store, 1)
    pending = new_record()
    await store.create(pending)
    await store.set_message(pending.id, MessageRef(platform="memory", channel="C", message_id="2"))
    batches.clear()

    marking = asyncio.create_task(store.mark_rendered(first.id, together=True))
    await asyncio.sleep(MARK_LINGER / 5)
    assert batches == [] and not marking.done()  # waiting for company, not sent alone

    result = await store.pick(pending.id, ALICE, 0, 1, claim=True)
    await marking
    assert result.record is not None and result.record.status is AskStatus.ANSWERED
    assert len(batches[0]) == 2  # the click's submission and the mark: one round trip
    assert await shown(store, first.id)


async def test_a_mark_made_together_with_nothing_to_go_with_is_sent_alone_soon(
    store: RedisStore, batches: list[list[str]]
) -> None:
    record = await answered(store, 1)
    batches.clear()
    await asyncio.wait_for(store.mark_rendered(record.id, together=True), MARK_LINGER + 5)
    assert [len(batch) for batch in batches] == [1]
    assert await shown(store, record.id)


async def test_marks_made_together_go_in_one_round_trip(
    store: RedisStore, batches: list[list[str]]
) -> None:
    records = [await answered(store, n) for n in range(5)]
    batches.clear()
    await asyncio.gather(*(store.mark_rendered(r.id, together=True) for r in records))
    assert [len(batch) for batch in batches] == [5]
    assert all([await shown(store, r.id) for r in records])


async def test_a_mark_made_alone_is_sent_at_once(
    store: RedisStore, batches: list[list[str]]
) -> None:
    record = await answered(store, 1)
    batches.clear()
    marking = asyncio.create_task(store.mark_rendered(record.id))
    await asyncio.sleep(MARK_LINGER / 5)
    assert marking.done() and [len(batch) for batch in batches] == [1]
    assert await shown(store, record.id)


async def test_a_mark_still_waiting_when_the_store_closes_is_never_sent(standalone: Any) -> None:
    """Closing the store lets its waiting mark go (cancelled, never written): the ask stays on
    the sweeper's list, which shows it again -- what a process killed before its mark costs."""
    store = RedisStore.from_url(standalone.url, prefix=f"t{secrets.token_hex(4)}")
    record = await answered(store, 1)
    marking = asyncio.create_task(store.mark_rendered(record.id, together=True))
    await asyncio.sleep(0)
    await store.aclose()
    with pytest.raises(asyncio.CancelledError):
        await marking
    other = RedisStore.from_url(standalone.url, prefix=store.keys.prefix)
    try:
        await asyncio.sleep(MARK_LINGER * 2)
        assert not await shown(other, record.id)
        assert await other._r.zscore(other.keys.due, record.id) is not None  # swept later
    finally:
        await other.aclose()
