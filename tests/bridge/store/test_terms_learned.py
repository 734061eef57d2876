"""A process that judges clicks on asks other processes create (``serve``) learns each new ask's
terms from its creation (``Keys.terms``), so the first click on it needs no read of them: one
round trip fewer on every answer's path. What is not an ask's terms on that channel is dropped,
and terms learned once stand."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from redis.asyncio import Redis

from bridge.models import Answer
from bridge.record import AskRecord, Responder
from bridge.store.ask_terms import AskTerms
from bridge.store.redis import RedisStore
from bridge.store.terms import SubmitOutcome
from tests.support.engine_fixtures import new_record, url_for

WHO = Responder(user_id="U1")


Stores = tuple[RedisStore, RedisStore, str]


@pytest.fixture
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    """The process that creates asks, the one that judges their clicks, and the server's URL."""
    url = url_for("redis", request)
    assert url is not None
    prefix = f"terms{secrets.token_hex(3)}"
    creating = RedisStore.from_url(url, prefix=prefix)
    judging = RedisStore.from_url(url, prefix=prefix)
    try:
        yield creating, judging, url
    finally:
        await creating.aclose()
        await judging.aclose()


def reads_counted(store: RedisStore) -> list[str]:
    """The asks whose terms ``store`` reads from Redis from now on."""
    read: list[str] = []
    original: Callable[[str], Awaitable[AskTerms | None]] = store._terms

    async def counted(ask_id: str) -> AskTerms | None:
        read.append(ask_id)
        return await original(ask_id)

    store._terms = counted  # type: ignore[method-assign]
    return read


async def learned(store: RedisStore, ask_id: str) -> None:
    give_up = time.monotonic() + 5
    while not store._terms_cache.holds(ask_id):
        assert time.monotonic() < give_up, "the ask's terms never arrived"
        await asyncio.sleep(0.01)


def first_answer(rec: AskRecord) -> tuple[Answer]:
    question = rec.questions.questions[0]
    return (Answer(question=question.question, selected=(question.options[0].label,)),)


async def test_a_click_on_an_ask_created_elsewhere_needs_no_read_of_its_terms(
    stores: Stores,
) -> None:
    creating, judging, _ = stores
    read = reads_counted(judging)
    before = new_record()
    await creating.create(before)  # before it listened: read when clicked, as always
    await judging.learn_terms()
    await judging.listening()
    rec = new_record(answerers=("U1",))
    await creating.create(rec)
    await learned(judging, rec.id)
    assert (await judging.submit(rec.id, WHO, first_answer(rec))).outcome is SubmitOutcome.ACCEPTED
    refused = await judging.submit(rec.id, Responder(user_id="U2"), first_answer(rec))
    assert refused.outcome is SubmitOutcome.NOT_ALLOWED  # judged by the learned answerers
    assert read == []
    assert (await judging.submit(before.id, WHO, first_answer(before))).outcome is (
        SubmitOutcome.ACCEPTED
    )
    assert read == [before.id]


async def test_what_is_no_ask_on_the_channel_is_dropped_and_learned_terms_stand(
    stores: Stores,
) -> None:
    creating, judging, url = stores
    await judging.learn_terms()
    await judging.listening()
    rec = new_record(answerers=("U1",))
    await creating.create(rec)
    await learned(judging, rec.id)
    raw = Redis.from_url(url, decode_responses=True)
    forged = json.loads(rec.model_dump_json())
    forged["answerers"] = []  # anyone: a forged message must not widen who may answer
    for text in ("", "x", "x\n", "y\n{not json", "z\n{}", f"{rec.id}\n{json.dumps(forged)}"):
        await raw.publish(judging.keys.terms, text)
    await raw.aclose()
    later = new_record()
    await creating.create(later)
    await learned(judging, later.id)  # the subscription outlived what came before
    for dropped in ("x", "y", "z"):
        assert not judging._terms_cache.holds(dropped)
    outsider = await judging.submit(rec.id, Responder(user_id="U2"), first_answer(rec))
    assert outsider.outcome is SubmitOutcome.NOT_ALLOWED


def parses_counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts of terms parsed from now on (in any store of this process)."""
    parsed: list[str] = []
    original = AskTerms.parsed.__func__  # type: ignore[attr-defined]

    def counted(cls: type[AskTerms], text: str | bytes) -> AskTerms:
        parsed.append(str(text))
        terms: AskTerms = original(cls, text)
        return terms

    monkeypatch.setattr(AskTerms, "parsed", classmethod(counted))
    return parsed


async def test_the_first_click_on_an_ask_heard_created_parses_nothing_on_its_way(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hearing the creation parses the terms and keeps them parsed as a click judges them:
    the click neither reads nor parses them, and is judged the same (who may answer)."""
    creating, judging, _ = stores
    await judging.learn_terms()
    await judging.listening()
    parsed = parses_counted(monkeypatch)
    rec = new_record(answerers=("U1",))
    await creating.create(rec)
    await learned(judging, rec.id)
    heard = len(parsed)
    assert heard >= 1  # the creation's body, then what is kept of it
    read = reads_counted(judging)
    refused = await judging.submit(rec.id, Responder(user_id="U2"), first_answer(rec))
    assert refused.outcome is SubmitOutcome.NOT_ALLOWED
    taken = await judging.pick(rec.id, WHO, 0, 0)
    assert taken.outcome is SubmitOutcome.ACCEPTED
    assert (read, len(parsed)) == ([], heard)
