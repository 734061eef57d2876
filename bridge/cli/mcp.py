"""``ask-bridge mcp``: run the MCP server exposing ``ask_user`` (stdio, or streamable HTTP).

Questions go to the chat destination in ``ASK_BRIDGE_PLATFORM`` / ``ASK_BRIDGE_CHANNEL`` when set,
else to the MCP client's own user by elicitation (see :mod:`bridge.mcp_server`). Without
``REDIS_URL`` nobody else receives the people's clicks, so this process serves them itself (and
sweeps its asks), and is ready for calls only once it can (a platform that cannot serve here,
like Slack in HTTP mode, is refused); its asks then never defer (:mod:`bridge.runtime`). SIGINT
or SIGTERM stops it cleanly. Configuration errors are reported on stderr before the server
starts, never on stdout (the protocol's).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from bridge.cli.failures import FAILED


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "mcp",
        help="run an MCP server exposing ask_user",
        description=(
            "Run an MCP server exposing ask_user. Questions go to the chat destination set by "
            "ASK_BRIDGE_PLATFORM (slack or discord) and ASK_BRIDGE_CHANNEL; with none set they go "
            "to the MCP client's user through elicitation."
        ),
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; clients must send "
        "ASK_BRIDGE_MCP_TOKEN as a bearer token when it is set, and it must be set unless HOST is "
        "loopback",
    )
    parser.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="how long a call waits for a person before it returns the deferred result with the "
        "ask id (chat destinations; default: the chat handler's, 10 minutes)",
    )
    parser.add_argument(
        "--progress-interval",
        type=float,
        metavar="SECONDS",
        default=None,
        help="seconds between progress notifications while waiting (default: 10)",
    )
    parser.set_defaults(func=run)


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--http takes HOST:PORT, e.g. 127.0.0.1:8765 (got {text!r})")
    return host, int(port)


def run(args: argparse.Namespace) -> int:
    from bridge.logs import say
    from bridge.mcp_access import token_from_env
    from bridge.mcp_server import (
        DEFAULT_PROGRESS_INTERVAL,
        bind,
        chat_route_from_env,
        create_server,
        endpoint,
        serve_http,
        serve_stdio,
    )
    from bridge.platform import PlatformUnavailable
    from bridge.runtime import settle_heap, stop_on_signals

    def fail(message: str) -> int:
        print(f"ask-bridge mcp: {message}", file=sys.stderr)
        return FAILED

    if args.wait is not None and args.wait < 0:
        return fail("--wait must be zero or more seconds")
    interval = args.progress_interval or DEFAULT_PROGRESS_INTERVAL
    if interval <= 0:
        return fail("--progress-interval must be more than zero seconds")
    try:
        address = parse_address(args.http) if args.http else None
        token = token_from_env(address[0]) if address else None
        route = chat_route_from_env(args.wait)
    except (ValueError, PlatformUnavailable) as exc:
        return fail(str(exc))
    server = create_server(route.handler if route else None, progress_interval=interval)
    try:
        sock = bind(*address) if address else None
    except OSError as exc:
        return fail(f"cannot listen on {args.http}: {exc}")

    async def transport() -> None:
        settle_heap()  # waiting calls are woken without the full collector's pauses
        if sock is None:
            await serve_stdio(server)
            return
        say(f"ask-bridge mcp: serving {endpoint(sock)}")
        await serve_http(server, sock, token=token)

    async def main() -> None:
        async with stop_on_signals():  # SIGINT/SIGTERM: a clean stop, asks closed
            if route is None:
                await transport()
                return
            try:
                await route.runtime.ready_to_ask(route.platform)
                async with route.runtime.own_clicks(route.platform) as receiving:
                    await receiving.guard(transport())  # a receiver's failure stops the server
            finally:
                await route.runtime.aclose()

    try:
        asyncio.run(main())
    except PlatformUnavailable as exc:  # the click loop could not start, or stopped
        return fail(str(exc))
    return 0
