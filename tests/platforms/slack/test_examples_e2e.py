"""The examples that talk to a model, run as scripts against their scripted models
(``example_runs.py``): with the stand-in handlers, and asking in Slack as ``examples/handler.py``
reads it -- the fake Slack's URL, a channel, the rig's Redis and key prefix -- where a teammate
answers by a signed click through the rig's ``ask-bridge serve``. The answer reaches the model as
a waiting call's result, or, for the examples that defer, through the Redis answers feed they
resume from.

Every run goes at once, in one test, bar the deferring ones asking in Slack, which share the rig's
answers feed and so go one after the other: most of each run is its process importing its
framework, and 2 cores are best kept busy with all of them together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.support.example_runs import (
    DEADLINE,
    DEFERRING,
    EXAMPLES,
    HANDLER_ENV,
    Example,
    Ran,
    new_marker,
    run_example,
)
from tests.support.redis_server import RedisServer
from tests.support.slack.agent_rig import CHANNEL, Rig
from tests.support.slack.fake_slack import BOT_TOKEN


@pytest.fixture(scope="module")
def rig(redis_srv: RedisServer) -> Iterator[Rig]:
    r = Rig(redis_srv.url)
    yield r
    r.close()


@pytest.mark.timeout(2 * DEADLINE + 60)  # two of the runs go one after the other
async def test_the_model_examples_run_as_scripts(rig: Rig) -> None:
    """With no chat configured, each stand-in picks the first option. In Slack the teammate picks
    the second, which no stand-in would; each deferring example takes the first answer it finds
    on the feed as its own, so they must not run at once."""
    slack = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_API_URL": rig.fake.url,
        "ASK_BRIDGE_CHANNEL": CHANNEL,
        "REDIS_URL": rig.redis_url,
        "ASK_BRIDGE_KEY_PREFIX": rig.prefix,
    }
    assert sorted(slack) == sorted(HANDLER_ENV)  # what the examples' docstrings must name

    async def with_stand_ins(example: Example) -> tuple[Example, Ran, int]:
        return example, await run_example(example, new_marker(), {}), 0

    async def teammate(marker: str) -> None:
        """Clicks the second option once the question shows up, however long the example takes
        to get there: on a loaded machine, longer than the minute the rig's teammate waits."""
        while True:
            try:
                await asyncio.wrap_future(rig.answer(marker, 1))
                return
            except TimeoutError:
                continue

    async def in_slack(example: Example) -> tuple[Example, Ran, int]:
        marker = new_marker()
        clicking = asyncio.ensure_future(teammate(marker))
        try:
            ran = await run_example(example, marker, slack, fenced=False)
        finally:
            clicking.cancel()  # when the example never posted its question
        posted = [a for a in rig.fake.ok_calls("chat.postMessage") if marker in a["text"]]
        assert [a["channel"] for a in posted] == [CHANNEL], f"{example.name} posted {posted}"
        return example, ran, 1

    async def in_slack_one_by_one(examples: list[Example]) -> list[tuple[Example, Ran, int]]:
        return [await in_slack(example) for example in examples]

    deferring = [e for e in EXAMPLES if e.name in DEFERRING]
    deferred, others = await asyncio.gather(
        in_slack_one_by_one(deferring),  # the longest: started first
        asyncio.gather(
            *(in_slack(e) for e in EXAMPLES if e.name not in DEFERRING),
            *map(with_stand_ins, EXAMPLES),
        ),
    )
    for example, ran, option in [*deferred, *others]:
        ran.check(example, example.question["options"][option]["label"])
