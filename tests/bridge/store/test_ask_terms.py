"""A store judges a click from the ask's terms, read from its backend once per ask and process
(:mod:`bridge.store.ask_terms`): a second click on the same ask reads nothing more, the terms
kept are bounded, an unknown ask is never kept, and an id made anew is judged by its new terms.
Then the audit trail a click leaves on Redis is byte for byte what the scripts that once built
the answers themselves wrote (``pick.lua``, ``form.lua``), so trails read alike across the
change."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from redis.asyncio import Redis

from bridge.judging import Picks
from bridge.models import Option, Question, QuestionSet
from bridge.record import AskRecord, Responder
from bridge.store.ask_terms import TERMS_CACHED, AskTerms, TermsCache
from bridge.store.base import Store
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from bridge.store.terms import SubmitOutcome
from tests.support.engine_fixtures import new_record
from tests.support.redis_server import RedisServer

ALICE = Responder(user_id="U_ALICE", name="Alice")
BOB = Responder(user_id="U_BOB", name="Bob")


def counting(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ask ids whose terms ``store`` reads from its backend, from now on."""
    read: list[str] = []
    backend = store._terms

    async def counted(ask_id: str) -> AskTerms | None:
        read.append(ask_id)
        return await backend(ask_id)

    monkeypatch.setattr(store, "_terms", counted)
    return read


async def test_a_second_click_on_an_ask_reads_its_terms_no_more(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = counting(store, monkeypatch)
    approval = new_record(required=2)  # two people must agree: each click is judged in full
    await store.create(approval)
    first = await store.pick(approval.id, ALICE, 0, 0)
    assert first.outcome is SubmitOutcome.RECORDED
    second = await store.pick(approval.id, BOB, 0, 0)
    assert second.outcome is SubmitOutcome.ACCEPTED
    assert (await store.pick(approval.id, BOB, 0, 0)).outcome is SubmitOutcome.REPEATED
    assert read == [approval.id]
    form = new_record(n=2)
    await store.create(form)
    refused = await store.submit_form(form.id, ALICE, {0: Picks((0,))})
    assert refused.outcome is SubmitOutcome.INVALID
    taken = await store.submit_form(form.id, ALICE, {0: Picks((0,)), 1: Picks((1, 2))})
    assert taken.outcome is SubmitOutcome.ACCEPTED
    assert read == [approval.id, form.id]
    # an unknown ask is not kept: asked again, it is read again (it may be created meanwhile)
    for _ in range(2):
        assert (await store.pick("NoSuchAsk", ALICE, 0, 0)).outcome is SubmitOutcome.NOT_FOUND
    assert read == [approval.id, form.id, "NoSuchAsk", "NoSuchAsk"]


async def test_the_terms_kept_are_bounded_the_least_recently_used_dropped(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert TermsCache().size == TERMS_CACHED
    monkeypatch.setattr(store, "_terms_cache", TermsCache(size=3))
    read = counting(store, monkeypatch)
    asks = [new_record(required=3) for _ in range(4)]  # three must agree: clicks keep coming
    for rec in asks:
        await store.create(rec)
    first, second, third, fourth = (rec.id for rec in asks)
    for ask_id in (first, second, third, first, fourth):  # the fourth drops the second
        assert (await store.pick(ask_id, ALICE, 0, 0)).ok
    assert read == [first, second, third, fourth]
    assert len(store._terms_cache) == 3
    for ask_id in (first, third, fourth, second):
        assert (await store.pick(ask_id, BOB, 0, 0)).outcome is SubmitOutcome.RECORDED
    assert read == [first, second, third, fourth, second]


async def test_an_ask_made_anew_under_its_id_is_judged_by_its_new_terms() -> None:
    """An id past its retention may be created again (here, in one process): the terms kept
    for the ask that was are dropped as it is."""
    store = MemoryStore(retention=0.01)
    old = new_record(expires_in=0)
    await store.create(old)
    picked = await store.pick(old.id, ALICE, 0, 0)
    assert picked.outcome is SubmitOutcome.CLOSED  # judged: its terms are kept
    await asyncio.sleep(0.05)
    assert await store.get(old.id) is None  # past its retention
    anew = new_record(n=2).model_copy(update={"id": old.id})  # two questions: no one-click
    await store.create(anew)
    assert (await store.pick(old.id, ALICE, 0, 0)).outcome is SubmitOutcome.INVALID


def test_the_terms_are_kept_without_what_judging_never_reads() -> None:
    """Packed (:meth:`AskTerms.packed`), an ask's terms keep no option descriptions, no
    destination or context; read back, they are the record's question set and answerers."""
    rec = new_record(n=4, answerers=("U_ALICE", "G_OPS"))
    cache = TermsCache()
    cache.put(rec.id, AskTerms.of(rec))
    kept = cache.get(rec.id)
    bare = rec.questions.undescribed()
    assert kept == AskTerms.of(rec.model_copy(update={"questions": bare}))
    packed = AskTerms.of(rec).packed()
    assert "Ask again tomorrow" not in packed and "session" not in packed
    assert len(packed) < len(rec.model_dump_json()) / 2


def test_the_cache_refuses_a_size_that_keeps_nothing() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        TermsCache(size=0)


# -- the audit trail's bytes --------------------------------------------------------------------

LABEL = 'Say "ship" \\ now?\n\x01\u2028/ \u20ac'
"""Every kind of character the JSON writers treat differently."""


def tricky(n: int) -> AskRecord:
    """An ask of ``n`` questions whose first option's label is :data:`LABEL`."""
    now = time.time()
    return new_record().model_copy(
        update={
            "questions": QuestionSet(
                questions=tuple(
                    Question(
                        question=f"Which {i}?",
                        header=f"Q{i}",
                        options=(
                            Option(label=LABEL, description="the tricky one"),
                            Option(label="Plain", description="the plain one"),
                        ),
                    )
                    for i in range(n)
                )
            ),
            "created_at": now,
        }
    )


async def last_line(client: Any, store: RedisStore, ask_id: str) -> str:
    lines: list[str] = await client.lrange(store.keys.log(ask_id), -1, -1)
    return lines[0]


async def test_a_click_leaves_the_trail_the_scripts_wrote(standalone: RedisServer) -> None:
    """``pick.lua`` and ``form.lua`` wrote each answer as ``{"other_text":...,"selected":[...]}``
    without its question, after the person's name, in compact JSON with UTF-8 as is; the
    literals below are those bytes, written out by hand."""
    store = RedisStore.from_url(standalone.url, prefix="trail")
    client = Redis.from_url(standalone.url, decode_responses=True)
    person = Responder(user_id="U_ALICE", name='Al "ice" \u00fc')
    name = r'"Al \"ice\" ' + '\u00fc"'
    label = r'"Say \"ship\" \\ now?\n\u0001' + '\u2028/ \u20ac"'
    try:
        one = tricky(1)
        await store.create(one)
        assert (await store.pick(one.id, person, 0, 0)).outcome is SubmitOutcome.ACCEPTED
        detail = f'{{"name":{name},"answers":[{{"other_text":null,"selected":[{label}]}}]}}'
        assert (await last_line(client, store, one.id)).endswith(f',"detail":{detail}}}')
        form = tricky(2)
        await store.create(form)
        picks = {0: Picks((0,)), 1: Picks(text=' typed "x" \u200b')}
        assert (await store.submit_form(form.id, person, picks)).outcome is SubmitOutcome.ACCEPTED
        answers = (
            f'{{"other_text":null,"selected":[{label}]}},'
            r'{"other_text":"typed \"x\"","selected":[]}'
        )
        detail = f'{{"name":{name},"answers":[{answers}]}}'
        assert (await last_line(client, store, form.id)).endswith(f',"detail":{detail}}}')
    finally:
        await client.aclose()
        await store.aclose()


def test_the_latest_terms_are_kept_parsed_as_get_would_give_them_and_bounded() -> None:
    """``ready`` keeps terms parsed from what is held (no descriptions), so ``get`` gives the
    same terms whether it parses or not; at most ``parsed`` are kept so, the least recently
    used dropped first, and terms dropped or forgotten are not kept parsed either."""
    records = [new_record(n=4, answerers=(f"U{i}",)) for i in range(5)]
    plain, ready = TermsCache(size=4, parsed=2), TermsCache(size=4, parsed=2)
    for rec in records[:3]:
        plain.put(rec.id, AskTerms.of(rec))
        ready.put(rec.id, AskTerms.of(rec), ready=True)
    for rec in records[:3]:
        assert ready.get(rec.id) == plain.get(rec.id)
        assert "Ask again tomorrow" in rec.model_dump_json()
        kept = ready.get(rec.id)
        assert kept is not None and all(
            not o.description for q in kept.questions.questions for o in q.options
        )
    assert list(ready._recent) == [records[1].id, records[2].id]  # the two used last
    again = ready.get(records[2].id)
    assert again is ready.get(records[2].id)  # kept: not parsed anew
    ready.forget(records[2].id)
    assert records[2].id not in ready._recent and ready.get(records[2].id) is None
    ready.put(records[3].id, AskTerms.of(records[3]))  # held packed only: parsed when asked
    assert records[3].id not in ready._recent
    for rec in records[3:]:
        ready.put(rec.id, AskTerms.of(rec), ready=True)
    ready.put(records[0].id, AskTerms.of(records[0]), ready=True)  # the fifth put: one dropped
    assert len(ready) == 4 and len(ready._recent) == 2
    assert set(ready._recent) <= set(ready._held)
    assert TermsCache(size=3).parsed == 3 and TermsCache(parsed=0).get("x") is None
    with pytest.raises(ValueError, match="at least 0"):
        TermsCache(parsed=-1)


def test_terms_made_anew_while_the_old_ones_were_parsed_are_the_ones_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``get`` parses outside the lock (a store is shared by threads): should the ask be made
    anew meanwhile -- forgotten, its new terms put -- the old terms it parsed are not kept."""
    cache = TermsCache()
    old, new = new_record(answerers=("U_OLD",)), new_record(answerers=("U_NEW",))
    cache.put(old.id, AskTerms.of(old))
    parse = AskTerms.parsed.__func__  # type: ignore[attr-defined]

    def parsed_while_made_anew(cls: type[AskTerms], text: str | bytes) -> AskTerms:
        monkeypatch.setattr(AskTerms, "parsed", classmethod(parse))  # once
        cache.forget(old.id)  # another thread creates the ask anew, between
        cache.put(old.id, AskTerms.of(new))
        terms: AskTerms = parse(cls, text)
        return terms

    monkeypatch.setattr(AskTerms, "parsed", classmethod(parsed_while_made_anew))
    raced = cache.get(old.id)
    assert raced is not None and raced.answerers == ("U_OLD",)  # what it read before
    kept = cache.get(old.id)
    assert kept is not None and kept.answerers == ("U_NEW",)
