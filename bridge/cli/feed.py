"""``ask-bridge feed --consumer NAME [--follow] [--exec CMD]``: the answers feed, for pipelines.

Each delivery of the answers feed (the outcome of a deferred ask, or of one whose waiting call
went away) is one JSON line (:func:`bridge.feed.outcome_payload` plus its ``delivery_id``).

Printed to stdout (no ``--exec``), a delivery is acknowledged once its line is written and
flushed: a reader that goes away (a broken pipe) leaves the unwritten ones for the next run, and
a consumer that dies between the write and the acknowledgement prints it again; but what was
written is acknowledged whether or not anything read it -- a reader that stops before reading
what sits in the pipe loses it. That is at most once for the reader, not at least once. With
``--exec CMD`` each line goes to one run of ``CMD``, and only its exit status 0 acknowledges it
(:mod:`bridge.cli.feed_exec`): at least once (use ``ask_id`` to spot a repeat).

Consumers share the feed: run several under different names and each delivery goes to one of
them; run again under the same name to get what that consumer was handed but never acknowledged.
Without ``--follow`` it stops once nothing new came for :data:`QUIET` seconds; with it, it runs
until SIGINT or SIGTERM (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from bridge.cli.args import positive, seconds
from bridge.cli.wait import NO_REDIS, reached, until_signal

if TYPE_CHECKING:
    from bridge.settings import EngineSettings

QUIET = 2.0
"""Seconds without a delivery after which ``feed`` without ``--follow`` stops: longer than one
blocking read of the feed, so entries that were waiting are all seen."""
ATTEMPTS = 5
RETRY_DELAY = 10.0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "feed",
        help="print the answers feed as JSON lines, or run a command per delivery (--exec)",
        description="Print each delivery of the answers feed as one JSON line (ask_id, status, "
        "result: the tool-result JSON, answered_by, context, delivery_id) and acknowledge it "
        "once the line is written and flushed to stdout -- written into the pipe, not read: a "
        "reader that stops before reading what sits in the pipe loses it (`feed | (head -1; "
        "sleep 2)` loses all but the first). For at least once, use --exec: each line goes to "
        "one run of a command, acknowledged only when it exits 0. Without --follow, stop when "
        "nothing more is waiting.",
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
    p.add_argument(
        "--exec",
        metavar="CMD",
        help="run CMD (with /bin/sh -c, as written) once per delivery, its JSON line on stdin and "
        "ASK_BRIDGE_ATTEMPT (1, 2, ...) in its environment; exit status 0 acknowledges it, "
        "anything else leaves it to run again (after --retry-delay with --follow, else on the "
        "next run), noted in the ask's audit trail, until --attempts runs failed: then it is "
        "acknowledged as dead-lettered (a line on stderr, a feed_dead_letter event)",
    )
    p.add_argument(
        "--attempts",
        type=positive,
        metavar="N",
        help=f"with --exec: failed runs per delivery before it is dead-lettered (default "
        f"{ATTEMPTS})",
    )
    p.add_argument(
        "--retry-delay",
        type=seconds,
        metavar="SECONDS",
        help=f"with --exec --follow: seconds before a failed delivery runs again, doubling each "
        f"time up to 10 minutes (default {RETRY_DELAY:g})",
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
    if args.exec is None and (args.attempts is not None or args.retry_delay is not None):
        print("ask-bridge feed: --attempts and --retry-delay go with --exec", file=sys.stderr)
        return 1
    if args.exec is not None and not args.exec.strip():
        print("ask-bridge feed: --exec needs a command", file=sys.stderr)
        return 1
    return asyncio.run(_feed(args, settings))


async def _feed(args: argparse.Namespace, settings: EngineSettings) -> int:
    from bridge.settings import open_store

    await reached(settings, "feed")
    store = open_store(settings)
    deliveries = store.feed(args.consumer)
    try:
        if args.exec is None:
            await until_signal(_print_all(store, deliveries, follow=args.follow))
        else:
            from bridge.cli.feed_exec import Executor

            running = Executor(
                store,
                consumer=args.consumer,
                command=args.exec,
                attempts=args.attempts or ATTEMPTS,
                retry_delay=RETRY_DELAY if args.retry_delay is None else args.retry_delay,
                follow=args.follow,
                quiet=QUIET,
            )
            await until_signal(running.run(deliveries))
    finally:
        await deliveries.aclose()  # type: ignore[attr-defined]
        await store.aclose()
    return 0


async def _print_all(store: Any, deliveries: Any, *, follow: bool) -> None:
    from bridge.aio import next_within
    from bridge.feed import feed_line

    while True:
        delivery = await (anext(deliveries) if follow else next_within(deliveries, QUIET))
        if delivery is None:
            return
        sys.stdout.write(feed_line(delivery))
        sys.stdout.flush()  # a broken pipe raises here: the delivery stays unacknowledged
        await store.ack(delivery)  # written, maybe never read: at most once (--exec: at least)
