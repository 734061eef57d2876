"""Redis bytes per ask, pending and ended, at realistic and at maximal texts.

Run: ``.venv/bin/python -m bench.engine_memory [N]`` (default 1,000 asks per row). Each row creates
N 4-question asks, records where they were posted and sums ``MEMORY USAGE`` over every key of each
ask plus its share of the ``due``, ``pending`` and ``created`` indexes (pending); then answers each
while a call waits for it, the call takes and confirms it (its result echoed the questions whole;
the confirm drops the descriptions), shows its final state, and measures again (ended, as kept for
the retention). Baseline in the same run: the same ended asks with their bodies put back whole
(option descriptions included), which is what the version before ended asks dropped their
descriptions kept (its settling step was otherwise the same), and what an ask fed to a host that
never acknowledges the delivery keeps.

Rows: realistic texts (a sentence per question, a short description per option); every text at the
contract's maximum length in ASCII; the same in a 3-byte UTF-8 character (``\u20ac``), at the
character bounds and at what the validator accepts (its bounds in bytes). Baseline in the same
run: the UTF-8 bytes of the record's JSON, what the texts themselves weigh.
"""

from __future__ import annotations

import asyncio
import sys

from redis.asyncio import Redis

from bench.engine_common import four_questions, maximal_questions, record, server_url
from bridge.models import Answer, QuestionSet
from bridge.record import MessageRef, Responder
from bridge.store.base import creation_text
from bridge.store.keys import Fields
from bridge.store.redis import RedisStore


async def usage(raw: Redis, store: RedisStore, ids: list[str]) -> float:
    total = 0
    for ask_id in ids:
        for key in store.keys.ask_keys(ask_id):
            total += await raw.memory_usage(key, samples=0) or 0
    for index in (store.keys.due, store.keys.pending, store.keys.created):
        total += await raw.memory_usage(index, samples=0) or 0
    return total / len(ids)


async def row(url: str, name: str, qs: QuestionSet, n: int) -> str:
    prefix = "mem" + name.replace(" ", "")
    store = RedisStore.from_url(url, prefix=prefix)
    raw = Redis.from_url(url, decode_responses=True)
    recs = [record(qs) for _ in range(n)]
    for r in recs:
        await store.create(r)
        message = MessageRef(platform="slack", channel="C0123456789", message_id="1700000000.0001")
        await store.set_message(r.id, message)
    ids = [r.id for r in recs]
    pending = await usage(raw, store, ids)
    who = Responder(user_id="U0123456789", name="Una")
    answers = [Answer(question=q.question, selected=(q.options[1].label,)) for q in qs.questions]
    for r in recs:
        waiting = asyncio.create_task(store.wait(r.id, 10))
        await asyncio.sleep(0)
        await store.submit(r.id, who, answers)
        assert await waiting is not None
        await store.confirm(r.id)
        assert await store.claim_render(r.id) is not None
        await store.mark_rendered(r.id)
    ended = await usage(raw, store, ids)
    for r in recs:  # as the version before kept them: the body whole
        await raw.hset(store.keys.rec(r.id), Fields.BODY, creation_text(r))
    before = await usage(raw, store, ids)
    body = len(recs[0].model_dump_json().encode())
    await raw.aclose()
    await store.aclose()
    return (
        f"{name:<22} pending {pending:8,.0f} B   ended {ended:8,.0f} B   "
        f"(ended with descriptions, as before: {before:8,.0f} B; record JSON {body:7,} B)"
    )


async def run(url: str, n: int) -> None:
    print(f"Redis bytes per 4-question ask (MEMORY USAGE of its keys + index share), {n:,} each")
    for name, qs in (
        ("realistic", four_questions()),
        ("maximal ASCII", maximal_questions("x")),
        ("maximal 3-byte UTF-8", maximal_questions("\u20ac")),
        ("maximal 3-byte, valid", maximal_questions("\u20ac", in_bytes=True)),
    ):
        print("  " + await row(url, name, qs, n))
    print("  (targets: pending realistic <= 4 KB; ended realistic about half of 4,641 B)")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with server_url() as url:
        asyncio.run(run(url, count))
