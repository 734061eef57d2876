"""How the core finds chat platforms without importing them.

``bridge`` never imports ``platforms``: each platform registers itself under the entry-point group
``ask_bridge.platforms`` (see ``pyproject.toml``), and the CLI, the MCP server and the tool's
terminal fallback look it up by name. A third-party package can add a platform the same way.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from bridge.poster import Poster
from bridge.store.base import Store

ENTRY_POINT_GROUP = "ask_bridge.platforms"


class PlatformUnavailable(RuntimeError):
    """The platform is not installed (missing extra) or not configured (missing settings)."""


@runtime_checkable
class Platform(Protocol):
    """What a chat platform offers the engine: a poster, and a loop that handles people's clicks."""

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
        """Handle interactions until cancelled; set ``ready`` once clicks can be received."""
        ...


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
