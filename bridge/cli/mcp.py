"""``ask-bridge mcp``: run the MCP server exposing ``ask_user`` (stdio, or streamable HTTP).

Questions go to the chat destination in ``ASK_BRIDGE_PLATFORM`` / ``ASK_BRIDGE_CHANNEL`` when set,
else to the MCP client's own user by elicitation (see :mod:`bridge.mcp_server`). Without
``REDIS_URL`` nobody else receives the people's clicks, so this process serves them itself (and
sweeps its asks), and is ready for calls only once it can (a platform that cannot serve here,
like Slack in HTTP mode, is refused); its asks then never defer (:mod:`bridge.runtime`). SIGINT
or SIGTERM stops it cleanly. Configuration errors are reported on stderr before the server
starts, never on stdout (the protocol's).

The command composes the server with the chat route (:func:`chat_route_from_env`: the platform,
the process's :class:`~bridge.runtime.Runtime` and the chat handler): the server takes any
handler and knows nothing of runtimes, the runtime nothing of MCP.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridge.cli.failures import FAILED
from bridge.followups import Destination
from bridge.platform import Platform, PlatformUnavailable, resolve_platform

if TYPE_CHECKING:
    from bridge.runtime import Runtime
    from bridge.store.base import Store
    from bridge.tool import AskUserCallback

PLATFORM_ENV = "ASK_BRIDGE_PLATFORM"
CHANNEL_ENV = "ASK_BRIDGE_CHANNEL"


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


@dataclass
class ChatRoute:
    """Where ``ask-bridge mcp`` posts questions: a platform, the process's runtime (its store and
    standalone policy) and the chat handler.

    ``serve_clicks`` is true when the store is this process's own (no ``REDIS_URL``): then no
    other process can receive the people's clicks, so the server receives them itself and sweeps
    (:meth:`bridge.runtime.Runtime.own_clicks`), and the handler never defers (a wait that runs
    out closes the ask as expired).
    """

    platform: Platform
    runtime: Runtime
    handler: AskUserCallback

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def serve_clicks(self) -> bool:
        return self.runtime.standalone


def chat_route_from_env(
    wait: float | None = None,
    environ: Mapping[str, str] | None = None,
    runtime: Runtime | None = None,
) -> ChatRoute | None:
    """The chat route configured by ``ASK_BRIDGE_PLATFORM`` and ``ASK_BRIDGE_CHANNEL``, or
    ``None`` when no platform is set. Raises ``PlatformUnavailable`` naming what is wrong,
    including a platform that cannot receive its own clicks in a standalone process."""
    if environ is None:  # the environment, or .env, like every setting
        from bridge.settings import ChatRouteSettings

        chosen = ChatRouteSettings()
        env: Mapping[str, str] = {PLATFORM_ENV: chosen.platform, CHANNEL_ENV: chosen.channel}
    else:
        env = environ
    name = env.get(PLATFORM_ENV, "").strip()
    if not name:
        return None
    if name == "console":
        raise PlatformUnavailable(
            f"{PLATFORM_ENV}=console cannot work in MCP mode: the terminal belongs to the "
            "protocol. Use a chat platform such as slack, or unset it to ask through the MCP "
            "client."
        )
    channel = env.get(CHANNEL_ENV, "").strip()
    if not channel:
        raise PlatformUnavailable(
            f"{PLATFORM_ENV}={name} needs {CHANNEL_ENV}: the id of the channel to post to"
        )
    platform = resolve_platform(name)
    from bridge.asking import ChatHandler
    from bridge.runtime import Runtime

    runtime = runtime or Runtime()
    runtime.check(platform)
    poster = platform.poster()
    destination = Destination(platform=name, channel=channel)
    handler = ChatHandler(poster, runtime.store, destination, runtime.policy(wait=wait))
    return ChatRoute(platform, runtime, handler)


def run(args: argparse.Namespace) -> int:
    from bridge.logs import say
    from bridge.mcp_access import token_from_env
    from bridge.mcp_server import (
        DEFAULT_PROGRESS_INTERVAL,
        bind,
        create_server,
        endpoint,
        serve_http,
        serve_stdio,
    )
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
