"""How the core finds chat platforms without importing them.

``bridge`` never imports ``platforms``: each platform registers itself under the entry-point group
``ask_bridge.platforms`` (see ``pyproject.toml``), and the CLI, the MCP server and the tool's
terminal fallback look it up by name. A third-party package can add a platform the same way.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from bridge.aio import stop
from bridge.poster import Poster
from bridge.store.base import Store

ENTRY_POINT_GROUP = "ask_bridge.platforms"


class PlatformUnavailable(RuntimeError):
    """The platform is not installed (missing extra) or not configured (missing settings)."""


@runtime_checkable
class Platform(Protocol):
    """What a chat platform offers the engine: a poster, and a loop that handles people's clicks.

    A platform may also offer ``check_standalone()`` (see :class:`StandaloneCheck`); call it
    through :func:`check_standalone`.
    """

    name: str

    def poster(self) -> Poster:
        """A poster configured from the environment; raises ``PlatformUnavailable`` naming what
        is missing."""
        ...

    async def serve(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 3000,
        ready: asyncio.Event | None = None,
    ) -> None:
        """Handle interactions until cancelled; set ``ready`` once clicks can be received.

        Before setting ``ready`` it logs (``logging``, level INFO) where it receives them -- the
        bound address, or the connection it holds -- so an operator can check it."""
        ...


@runtime_checkable
class StandaloneCheck(Protocol):
    """Optional for a :class:`Platform`: whether its :meth:`~Platform.serve` can run inside a
    process that has no shared store (``ask`` or ``mcp`` without ``REDIS_URL``).

    Such a process must handle the clicks on its own asks itself, and only for as long as it
    lives, so a serve loop that needs something the process lacks (Slack's HTTP mode needs a
    public URL routed to it) would leave every click unanswered. A platform without this method
    is taken to serve anywhere.
    """

    def check_standalone(self) -> None:
        """Raise ``PlatformUnavailable`` saying what to configure instead."""
        ...


def check_standalone(platform: Platform) -> None:
    """Raise ``PlatformUnavailable`` unless ``platform`` can serve its own clicks in a process
    without a shared store (see :class:`StandaloneCheck`)."""
    if isinstance(platform, StandaloneCheck):
        platform.check_standalone()


async def start_serving(
    platform: Platform, store: Store, *, host: str = "127.0.0.1", port: int = 3000
) -> asyncio.Task[None]:
    """Run ``platform.serve`` in a task; return the task once clicks can be received.

    If serving ends before it is ready, raise why (its exception, else ``PlatformUnavailable``);
    if the caller is cancelled meanwhile, serving is stopped too.
    """
    ready = asyncio.Event()
    serving = asyncio.create_task(platform.serve(store, host=host, port=port, ready=ready))
    readiness = asyncio.create_task(ready.wait())
    try:
        await asyncio.wait({serving, readiness}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await stop(serving)
        raise
    finally:
        readiness.cancel()
    if serving.done():
        serving.result()  # raises why it could not start
        raise PlatformUnavailable(f"{platform.name} stopped before it was ready")
    return serving


def resolve_platform(name: str) -> Platform:
    """The chat platform registered as ``name``; ``PlatformUnavailable`` if it is not installed
    or cannot post and serve (the console asks at the terminal only)."""
    found = load_platform(name)
    if not isinstance(found, Platform):
        raise PlatformUnavailable(f"platform {name!r} cannot post and serve chat interactions")
    return found


def available_platforms() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def load_platform(name: str) -> object:
    """The object registered as ``name``; its shape depends on the platform kind."""
    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        known = ", ".join(available_platforms()) or "none"
        raise PlatformUnavailable(f"unknown platform {name!r} (installed: {known})")
    (ep,) = tuple(found)[:1]
    try:
        return ep.load()
    except ImportError as exc:
        raise PlatformUnavailable(
            f"platform {name!r} needs its extra: pip install 'ask-bridge[{name}]' ({exc})"
        ) from exc
