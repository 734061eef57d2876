"""``ask-bridge wait ASK_ID``: block until an existing ask ends; print and exit as ``ask`` does.

For a pipeline that asked with ``ask --mode defer`` (exit 3, the ask id printed), did other work,
and now needs the answer. It observes the ask (:meth:`~bridge.store.base.Store.observe`): it takes
nothing, so a process waiting for the same ask still gets it and a deferred answer still reaches
the answers feed; any number of ``wait`` calls can watch one ask.

Exit status, as ``ask``'s: 0 answered (the tool-result JSON on stdout); 3 still unanswered after
``--wait`` (the deferred result, with the ask id, on stdout: run ``wait`` again); 4 the ask expired
or was cancelled (the model's words on stderr); 1 anything else, in one line on stderr: an unknown
id (or one past its retention), ``REDIS_URL`` unset (asks live in Redis only then) or Redis down.
A signal (SIGINT, SIGTERM) stops the wait quietly with exit 3: the ask is left as it was.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from bridge.cli.args import seconds
from bridge.cli.failures import ANSWERED, DEFERRED, ENDED, FAILED

if TYPE_CHECKING:
    from bridge.record import AskRecord
    from bridge.settings import EngineSettings

T = TypeVar("T")

NO_REDIS = (
    "REDIS_URL is not set: an ask lives in Redis, shared by the process that asked it and "
    "`serve`; set REDIS_URL to that deployment's Redis"
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "wait",
        help="wait for an existing ask to end and print the answers as `ask` would",
        description="Block until the ask ASK_ID ends, without taking its answer from anyone "
        "else, then print and exit as `ask` does: 0 answered (the answers JSON on stdout); 3 "
        "still unanswered after --wait (the deferred result with the ask id on stdout); 4 "
        "expired or cancelled; 1 an unknown ask id, REDIS_URL unset or Redis down.",
    )
    p.add_argument("ask_id", metavar="ASK_ID", help="the ask id `ask --mode defer` printed")
    p.add_argument(
        "--wait",
        type=seconds,
        default=600.0,
        help="seconds to wait (default 600); then exit 3, the ask left open",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bridge.settings import EngineSettings

    settings = EngineSettings()
    if not settings.redis_url:
        print(f"ask-bridge wait: {NO_REDIS}", file=sys.stderr)
        return FAILED
    return asyncio.run(_wait(args, settings))


async def _wait(args: argparse.Namespace, settings: EngineSettings) -> int:
    from bridge.record import AskStatus
    from bridge.settings import open_store

    await reached(settings, "wait")
    store = open_store(settings)
    try:
        record = await store.get(args.ask_id)
        if record is None:
            return _unknown(args.ask_id)
        if record.status is AskStatus.PENDING:
            ended = await until_signal(store.observe(args.ask_id, args.wait))
            record = ended or await store.get(args.ask_id)
        if record is None:  # gone meanwhile: past its retention, or the store lost its data
            return _unknown(args.ask_id)
        return outcome(record)
    finally:
        await store.aclose()


async def reached(settings: EngineSettings, command: str) -> None:
    """Redis answers (down: one line after ``ASK_BRIDGE_REDIS_WAIT`` seconds of trying, not a
    pile of the store's retries; on a terminal, a line saying it waits after the first second)."""
    from bridge.cli.failures import on_terminal
    from bridge.redis_probe import reach

    assert settings.redis_url is not None
    await reach(settings.redis_url, seconds=settings.redis_wait, waiting=on_terminal(command))


async def until_signal(work: Coroutine[Any, Any, T]) -> T | None:
    """``work``'s result, or ``None`` once SIGINT or SIGTERM stopped it. It runs as a task of
    its own, stopped for certain (:func:`bridge.aio.stop`: on Python 3.11 a single cancel landing
    as a Redis reply arrives is swallowed, and the command would run on)."""
    from bridge.aio import stop
    from bridge.runtime import stop_on_signals

    task = asyncio.create_task(work)
    try:
        async with stop_on_signals():
            await asyncio.wait({task})
    finally:
        await stop(task)
    return None if task.cancelled() else task.result()


def _unknown(ask_id: str) -> int:
    print(f"ask-bridge wait: no ask {ask_id!r} (unknown, or past its retention)", file=sys.stderr)
    return FAILED


def outcome(record: AskRecord) -> int:
    """Print how ``record`` stands as ``ask`` prints it; its exit status."""
    from bridge.deferred import AskUserDeferred
    from bridge.feed import render_delivery
    from bridge.record import AskStatus
    from bridge.result import ToolOutcome, unanswered_text

    if record.status is AskStatus.ANSWERED and record.answers is not None:
        print(render_delivery(record), flush=True)  # who answered too, if the policy says so
        return ANSWERED
    if record.status is AskStatus.PENDING:
        extra = {"ask_id": record.id, "expires_at": record.expires_at}
        deferral = ToolOutcome(record.questions, deferred=AskUserDeferred(extra=extra))
        print(deferral.host_text, flush=True)
        return DEFERRED
    print(unanswered_text(record.status is AskStatus.EXPIRED), file=sys.stderr)
    return ENDED
