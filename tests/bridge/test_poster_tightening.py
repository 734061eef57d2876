"""A platform's refusal of a rendering is retried once at the tightest cuts, logged in one line;
anything else is not retried; a second refusal is the failure every caller already handles --
through a whole tool call, the asker is told nobody saw the questions."""

from __future__ import annotations

import logging

import pytest

from bridge.asking import AskPolicy, ChatHandler
from bridge.deferred import AskUserDeferred
from bridge.errors import PostFailed
from bridge.memory_poster import MemoryPoster
from bridge.record import AskRecord, Destination, MessageRef
from bridge.store.memory import MemoryStore
from tests.support.samples import q


class Refused(Exception):
    """What a platform client raises when it refuses a message's shape or size."""


class Picky(MemoryPoster):
    """Refuses the first ``refusals`` renderings it is asked to send, recording each attempt's
    level; ``error`` is what it raises."""

    def __init__(self, refusals: int, error: Exception | None = None) -> None:
        super().__init__("picky")
        self.refusals = refusals
        self.error = error or Refused("msg_blocks_too_long")
        self.levels: list[bool] = []

    def refusal(self, error: Exception) -> str | None:
        return f"{error}\nsecond line" if isinstance(error, Refused) else None

    async def post(self, record: AskRecord) -> MessageRef:
        async def send(tightest: bool) -> MessageRef:
            self.levels.append(tightest)
            if len(self.levels) <= self.refusals:
                raise self.error
            return await MemoryPoster.post(self, record)

        return await self.tightening(record, "message", send)


def handler(poster: Picky) -> ChatHandler:
    return ChatHandler(
        poster, MemoryStore(), Destination(platform="picky", channel="C1"), AskPolicy(wait=0.3)
    )


async def test_a_refused_message_is_posted_again_at_the_tightest_cuts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    poster = Picky(refusals=1)
    with caplog.at_level(logging.WARNING, logger="bridge.poster"):
        result = await handler(poster)([q("Ship it?", "Ship", ["yes", "no"])], {})
    assert poster.levels == [False, True]
    assert len(poster.posts) == 1
    assert isinstance(result, AskUserDeferred)  # posted, then deferred: nobody answered yet
    (line,) = [r.getMessage() for r in caplog.records if r.name == "bridge.poster"]
    ask_id = poster.posts[0].id
    assert line == (
        f"ask {ask_id}: picky refused its message (msg_blocks_too_long second line); "
        "trying once more at the tightest cuts"
    )


async def test_refused_twice_the_asker_hears_nobody_saw_the_questions() -> None:
    poster = Picky(refusals=2)
    with pytest.raises(PostFailed) as failed:
        await handler(poster)([q("Ship it?", "Ship", ["yes", "no"])], {})
    assert poster.levels == [False, True]
    assert poster.posts == []
    assert "Nobody saw them" in str(failed.value)
    assert "msg_blocks_too_long" in str(failed.value)


async def test_a_failure_that_is_no_refusal_is_not_retried() -> None:
    poster = Picky(refusals=1, error=ConnectionError("connection reset"))
    with pytest.raises(PostFailed, match=r"connection reset\. Nobody saw them"):
        await handler(poster)([q("Ship it?", "Ship", ["yes", "no"])], {})
    assert poster.levels == [False]
