"""``ask-bridge feed --consumer NAME [--follow]``: the answers feed as JSON lines, for pipelines.

Each delivery of the answers feed (the outcome of a deferred ask, or of one whose waiting call
went away) is printed as one JSON line (:func:`bridge.feed.outcome_payload` plus its
``delivery_id``) and acknowledged only once that line is written and flushed: a reader that goes
away (a broken pipe) leaves the unwritten delivery for the next run, and a consumer that dies
between the write and the acknowledgement gets it again (at least once: use ``ask_id`` to spot a
repeat). Consumers share the feed: run several under different names and each delivery goes to
one of them; run again under the same name to get what that consumer was handed but never
acknowledged. Without ``--follow`` it stops once nothing new came for :data:`QUIET` seconds; with
it, it runs until SIGINT or SIGTERM (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from bridge.cli.wait import NO_REDIS, until_signal

QUIET = 2.0
"""Seconds without a delivery after which ``feed`` without ``--follow`` stops: longer than one
blocking read of the feed, so entries that were waiting are all seen."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "feed",
        help="print the answers feed as JSON lines, acknowledging each once written",
        description="Print each delivery of the answers feed as one JSON line (ask_id, status, "
        "result: the tool-result JSON, answered_by, context, delivery_id) and acknowledge it "
        "once the line is written. Without --follow, stop when nothing more is waiting.",
    )
    p.add_argument(
        "--consumer",
        required=True,
        metavar="NAME",
        help="this reader's name: a later run under the same name gets what this one was handed "
        "but did not acknowledge",
    )
    p.add_argument(
        "--follow", action="store_true", help="keep printing deliveries until SIGINT/SIGTERM"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bridge.settings import EngineSettings

    settings = EngineSettings()
    if not settings.redis_url:
        print(f"ask-bridge feed: {NO_REDIS}", file=sys.stderr)
        return 1
    if not args.consumer.strip():
        print("ask-bridge feed: --consumer needs a name", file=sys.stderr)
        return 1
    return asyncio.run(_feed(args, settings.redis_url))


async def _feed(args: argparse.Namespace, url: str) -> int:
    from bridge.redis_probe import probe
    from bridge.settings import open_store

    await probe(url)  # down: one line at once, not a pile of retries
    store = open_store()
    deliveries = store.feed(args.consumer)
    try:
        await until_signal(_print_all(store, deliveries, follow=args.follow))
    finally:
        await deliveries.aclose()  # type: ignore[attr-defined]
        await store.aclose()
    return 0


async def _print_all(store: Any, deliveries: Any, *, follow: bool) -> None:
    from bridge.aio import next_within
    from bridge.feed import outcome_payload

    while True:
        delivery = await (anext(deliveries) if follow else next_within(deliveries, QUIET))
        if delivery is None:
            return
        line = {**outcome_payload(delivery.record), "delivery_id": delivery.delivery_id}
        sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
        sys.stdout.flush()  # a broken pipe raises here: the delivery stays unacknowledged
        await store.ack(delivery)
