"""``ask-bridge serve``: receive people's clicks for every configured platform, in one process.

Every installed chat platform whose settings are present is served (``--platform`` restricts to
the ones named), through one HTTP server for those called over HTTP (Slack's HTTP mode) and a
connection each for those that hold one (Slack's Socket Mode). Any number of ``serve`` replicas may
run against one ``REDIS_URL``: every click is judged by the store, so it does not matter which
replica receives it. Each replica also sweeps: asks past their expiry are closed (each by exactly
one sweeper, see :meth:`Store.sweep`) and re-rendered. Without ``REDIS_URL`` the store is an empty
in-memory one that no agent can reach: a warning at start. SIGINT or SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bridge.cli.args import port
from bridge.platform import Platform, configured_platforms

if TYPE_CHECKING:
    from bridge.webhook_settings import WebhookSettings

log = logging.getLogger(__name__)
NO_SHARED_STORE = (
    "REDIS_URL is not set; using an empty in-memory store: it holds no ask that another process "
    "posted, so every click will be told the question is no longer open. Set REDIS_URL to the "
    "store your agents use."
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="handle people's clicks for every configured platform (Slack: HTTP or Socket Mode)",
        description="Handle people's clicks for every configured platform. The HTTP server on "
        "--host/--port also answers GET /healthz (alive), GET /readyz (200 when the store is "
        "reachable and every platform connected, else 503 with the reasons) and GET /metrics "
        "(Prometheus). Each platform's token is checked at start. SIGTERM: stop taking clicks, "
        "finish those in flight, exit within 10 s.",
    )
    p.add_argument(
        "--platform",
        action="append",
        metavar="NAME",
        help="serve only this platform; repeat for several (default: every configured one)",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP server: address to bind")
    p.add_argument("--port", type=port, default=3000, help="HTTP server: port (default 3000)")
    p.add_argument(
        "--sweep-interval",
        type=float,
        default=5.0,
        help="seconds between expiry sweeps (default 5)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.sweep_interval <= 0:
        print("ask-bridge serve: --sweep-interval must be more than zero", file=sys.stderr)
        return 1
    from bridge.webhook_settings import WebhookSettings

    webhooks = WebhookSettings()  # a bad one: one line now, before anything starts
    platforms = configured_platforms(args.platform or ())
    from bridge.identities import Identities

    # ASK_BRIDGE_IDENTITIES likewise, each platform's ids by its own rule
    Identities.from_env().normalised({p.name: p.poster().answerer for p in platforms})
    asyncio.run(
        serve(
            platforms, host=args.host, port=args.port, sweep=args.sweep_interval, webhooks=webhooks
        )
    )
    return 0


async def serve(
    platforms: Sequence[Platform],
    *,
    host: str,
    port: int,
    sweep: float,
    webhooks: WebhookSettings | None = None,
) -> None:
    """Serve ``platforms`` until SIGINT or SIGTERM (and send outcome webhooks if configured)."""
    from bridge.logs import announce
    from bridge.runtime import Runtime, serving, settle_heap, stop_on_signals

    runtime = Runtime()
    if runtime.standalone:
        log.warning(NO_SHARED_STORE)
    async with stop_on_signals():
        try:
            async with serving(
                platforms,
                runtime.store,
                host=host,
                port=port,
                sweep_interval=sweep,
                watch=runtime.settings.redis_url,
                webhooks=webhooks,
            ) as receiving:
                # where each receives was logged (routes' URLs, connections) before this
                names = ", ".join(p.name for p in platforms)
                settle_heap()
                announce(log, f"ready ({names})")  # a log line like the others, at any level
                await receiving.wait()
        finally:
            await runtime.aclose()
