"""``ask-bridge serve``: run a chat platform's interaction handler against the shared store.

Any number of ``serve`` replicas may run against one ``REDIS_URL``: every click is judged by the
store, so it does not matter which replica receives it. Each replica also sweeps: asks past their
expiry are closed (each by exactly one sweeper, see :meth:`Store.sweep`) and re-rendered. Without
``REDIS_URL`` the store is an empty in-memory one that no agent can reach: a warning at start.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from bridge.aio import stop
from bridge.platform import Platform, PlatformUnavailable, resolve_platform, start_serving
from bridge.poster import Poster
from bridge.sweeper import Sweeper

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGINT, signal.SIGTERM)
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NO_SHARED_STORE = (
    "REDIS_URL is not set; using an empty in-memory store: it holds no ask that another process "
    "posted, so every click will be told the question is no longer open. Set REDIS_URL to the "
    "store your agents use."
)


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="handle people's clicks (Slack: HTTP or Socket Mode)")
    p.add_argument("--platform", default="slack", help="chat platform (default: slack)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP mode: address to bind")
    p.add_argument("--port", type=int, default=3000, help="HTTP mode: port (default 3000)")
    p.add_argument(
        "--sweep-interval",
        type=float,
        default=5.0,
        help="seconds between expiry sweeps (default 5)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    try:
        platform = resolve_platform(args.platform)
        poster = platform.poster()
    except PlatformUnavailable as exc:
        print(f"ask-bridge serve: {exc}", file=sys.stderr)
        return 1
    try:
        asyncio.run(_serve(platform, poster, args))
    except PlatformUnavailable as exc:
        print(f"ask-bridge serve: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve(platform: Platform, poster: Poster, args: argparse.Namespace) -> None:
    from bridge.settings import EngineSettings, open_store

    settings = EngineSettings()
    if not settings.redis_url:
        log.warning(NO_SHARED_STORE)
    store = open_store(settings)
    sweeper = Sweeper(store, {poster.platform: poster}, interval=args.sweep_interval)
    sweeping = asyncio.create_task(sweeper.run())
    me = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        if me is not None:
            loop.add_signal_handler(sig, me.cancel)
    serving: asyncio.Task[None] | None = None
    try:
        serving = await start_serving(platform, store, host=args.host, port=args.port)
        # where it listens was logged by the platform, just before it was ready
        print(f"ask-bridge serve: {platform.name} ready", file=sys.stderr, flush=True)
        await serving
    except asyncio.CancelledError:
        pass  # SIGINT or SIGTERM: a normal stop
    finally:
        for sig in SIGNALS:  # a second signal must not cut the cleanup short
            loop.add_signal_handler(sig, lambda: None)
        if serving is not None:
            await stop(serving)
        failure = await stop(sweeping)
        if failure is not None:
            log.warning("the sweeper failed", exc_info=failure)
        await store.aclose()
