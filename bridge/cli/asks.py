"""``ask-bridge list | show ID | cancel ID``: inspect and end asks in the configured store.

The store comes from the environment (``REDIS_URL``; see :mod:`bridge.settings`). Without it the
store would be a fresh in-memory one, which holds nothing another process created: ``list`` says
so on stderr and lists nothing; ``show`` and ``cancel``, which could only fail, say so in their
one line (as ``wait`` does). Every line on stderr names its command.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import time
from typing import Any

from bridge.cli.args import positive, seconds
from bridge.cli.failures import FAILED


def register(sub: Any) -> None:
    p = sub.add_parser(
        "list",
        help="list pending asks, a page at a time",
        description="Pending asks, newest first, a page at a time; the command to get the next "
        "page is printed on stderr.",
    )
    p.add_argument("--json", action="store_true", help="one JSON record per line")
    p.add_argument(
        "--limit", type=positive, default=100, help="asks per page (default 100)", metavar="N"
    )
    p.add_argument("--cursor", help="continue after the page that printed it")
    p.add_argument("--channel", help="only asks posted to this channel (or DM user) id")
    p.add_argument(
        "--older-than",
        type=seconds,
        metavar="SECONDS",
        help="only asks created at least this many seconds ago",
    )
    p.add_argument(
        "--newer-than",
        type=seconds,
        metavar="SECONDS",
        help="only asks created at most this many seconds ago",
    )
    p.set_defaults(func=_list)
    p = sub.add_parser(
        "show",
        help="print an ask's record (with every submission), who answered, and its audit trail "
        "as JSON",
    )
    p.add_argument("ask_id")
    p.set_defaults(func=_show)
    p = sub.add_parser("cancel", help="cancel a pending ask and re-render its message")
    p.add_argument("ask_id")
    p.add_argument("--by", default="cli", help="who cancelled it, for the audit trail")
    p.set_defaults(func=_cancel)


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def run_on_store(coro_fn: Any, args: argparse.Namespace) -> int:
    """Run ``coro_fn(store, args)`` on the store ``REDIS_URL`` names, once it is reached; the
    commands reading asks (these, and ``link``) share it. A command naming an ask refuses an
    unset ``REDIS_URL`` in one line (an empty in-memory store holds no ask)."""
    from bridge.cli.wait import NO_REDIS
    from bridge.settings import EngineSettings, open_store

    settings = EngineSettings()
    if not settings.redis_url:
        if args.command != "list":  # an ask named by its id cannot be in an empty store
            print(f"ask-bridge {args.command}: {NO_REDIS}", file=sys.stderr)
            return FAILED
        print(
            "ask-bridge list: note: REDIS_URL is not set; using an empty in-memory store",
            file=sys.stderr,
        )

    async def go() -> int:
        if settings.redis_url:
            from bridge.cli.wait import reached

            await reached(settings, args.command)
        store = open_store(settings)
        try:
            status: int = await coro_fn(store, args)
            return status
        finally:
            await store.aclose()

    return asyncio.run(go())


def _list(args: argparse.Namespace) -> int:
    async def go(store: Any, args: argparse.Namespace) -> int:
        now = time.time()
        try:
            page = await store.pending_page(
                limit=args.limit,
                cursor=args.cursor,
                channel=args.channel,
                created_before=None if args.older_than is None else now - args.older_than,
                created_after=None if args.newer_than is None else now - args.newer_than,
            )
        except ValueError as exc:  # a cursor this store never gave out
            print(f"ask-bridge list: {exc}", file=sys.stderr)
            return FAILED
        for rec in page.asks:
            if args.json:
                print(json.dumps(_shown_record(rec), ensure_ascii=False, separators=(",", ":")))
                continue
            where = f"{rec.destination.platform}:{rec.destination.channel or rec.destination.user}"
            headers = ",".join(q.header for q in rec.questions.questions)
            print(
                f"{rec.id}  {where}  created {_when(rec.created_at)}  "
                f"expires {_when(rec.expires_at)}  [{headers}]"
            )
        if page.cursor is not None:
            print(f"ask-bridge list: more: repeat with --cursor {page.cursor}", file=sys.stderr)
        return 0

    return run_on_store(go, args)


def _shown_record(rec: Any) -> dict[str, Any]:
    """``rec`` as JSON-ready data for the terminal: its notify URLs with their credentials and
    query values masked (:func:`~bridge.webhook_settings.redacted_url`; the audit trail's webhook
    events never hold them)."""
    from bridge.webhook_settings import redacted_url

    data: dict[str, Any] = rec.model_dump(mode="json")
    data["notify"] = [redacted_url(url) for url in rec.notify]
    return data


def _show(args: argparse.Namespace) -> int:
    async def go(store: Any, args: argparse.Namespace) -> int:
        rec = await store.get(args.ask_id)
        if rec is None:
            print(
                f"ask-bridge show: no ask {args.ask_id!r} (unknown, or past its retention)",
                file=sys.stderr,
            )
            return FAILED
        history = [e.model_dump(mode="json") for e in await store.history(args.ask_id)]
        # who answered, at a glance: the one person, or everyone who agreed (required K >= 2);
        # every submission is in the record, each recorded one in the history
        who = [s.model_dump(mode="json", exclude={"answers"}) for s in rec.who_answered()]
        out = {"record": _shown_record(rec), "answered_by": who, "history": history}
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0

    return run_on_store(go, args)


def _cancel(args: argparse.Namespace) -> int:
    async def go(store: Any, args: argparse.Namespace) -> int:
        # a deferred ask cancelled is handed to the answers feed: logged as every hand-off is,
        # by the metrics the store tells (they subscribe as they are imported)
        import bridge.metrics  # noqa: F401
        from bridge.record import AskStatus

        # close() also returns an ask cancelled before (so a retry can re-render it): ask first
        rec = await store.get(args.ask_id)
        closed = None
        if rec is not None and rec.status is AskStatus.PENDING:
            closed = await store.close(args.ask_id, AskStatus.CANCELLED, by=args.by)
        if closed is None:
            rec = await store.get(args.ask_id)
            state = rec.status.value if rec else "unknown"
            print(
                f"ask-bridge cancel: ask {args.ask_id!r} is not pending ({state}); nothing changed",
                file=sys.stderr,
            )
            return FAILED
        print(f"cancelled {closed.id}")
        if closed.message is not None:
            await _show_final(store, closed)
        return 0

    return run_on_store(go, args)


async def _show_final(store: Any, record: Any) -> None:
    """Show the cancellation on the platform, if this machine can reach it, through the one step
    every ending takes (:func:`bridge.showing.show_final`: claimed, so no replica repeats it;
    marked shown, so no sweeper does; a failure is logged and left to a later sweep)."""
    from bridge.platform import PlatformUnavailable, resolve_platform
    from bridge.showing import show_final

    posters = {}
    for platform in sorted({m.platform for m in record.messages}):  # escalations' too
        try:
            posters[platform] = resolve_platform(platform).poster()
        except PlatformUnavailable as exc:
            print(
                f"ask-bridge cancel: note: message not re-rendered here ({exc}); a sweeper will",
                file=sys.stderr,
            )
            return
    if not await show_final(store, posters, record):
        print(
            "ask-bridge cancel: note: message not re-rendered here; a sweeper will", file=sys.stderr
        )
