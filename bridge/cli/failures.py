"""The expected failures of every command, each told in one line with one exit status.

A bad setting, a platform that refuses its token or cannot be reached, Redis down (after
``ASK_BRIDGE_REDIS_WAIT`` seconds of trying, :func:`bridge.redis_probe.reach`), a Redis user
refused a command it needs, a busy port, a missing extra: :func:`explain` turns each into the one
line the command prints (naming what to fix), and the command exits :data:`FAILED`. Anything
else is a bug and keeps its traceback. ``ask`` keeps its own statuses for how an ask ended (2
rejected, 3 deferred, 4 expired/cancelled).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.store.base import StoreUnavailable

ANSWERED = 0
"""``ask``/``wait``: the ask was answered (the answers on stdout)."""
FAILED = 1
"""Configuration or infrastructure failure (and any other failure), in every command."""
REJECTED = 2
"""``ask``: the question set was refused as it stands (fix it and ask again)."""
DEFERRED = 3
"""``ask``/``wait``: nobody answered within the wait; the ask stays open, its answers come later."""
ENDED = 4
"""``ask``/``wait``: the ask ended without an answer (expired or cancelled)."""
BROKEN_PIPE = 141
"""The reader of our output went away (``ask-bridge show ID | head``): 128 + SIGPIPE, as a shell
reports a command killed by it -- quietly, no traceback."""

EXTRA_OF_MODULE = {
    "mcp": "mcp",
    "anyio": "mcp",
    "starlette": "mcp",
    "uvicorn": "mcp",
    "slack_bolt": "slack",
    "slack_sdk": "slack",
    "aiohttp": "slack",
    "discord": "discord",
    "chatlas": "chatlas",
    "pydantic_ai": "pydantic-ai",
    "langchain_core": "langchain",
    "langgraph": "langchain",
    "agents": "openai-agents",
    "claude_agent_sdk": "claude-agent-sdk",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The install line for a module an extra provides, else ``None``."""
    root = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(root)
    if extra is None:
        return None
    install = f"pip install 'ask-bridge[{extra}]'"
    return f"this needs the {extra} extra (module {root!r} is missing): {install}"


def explain(exc: BaseException) -> str | None:
    """One line for an expected failure, or ``None`` for a bug."""
    from bridge.http_server import CannotListen
    from bridge.identities import IdentityError
    from bridge.platform import PlatformUnavailable
    from bridge.redis_acl import refusal
    from bridge.settings import SettingsError
    from bridge.store.base import StoreUnavailable

    if isinstance(exc, ModuleNotFoundError):
        return missing_extra(exc)
    if (refused := refusal(exc)) is not None:  # the Redis user lacks a permission
        return refused
    if isinstance(exc, StoreUnavailable):
        return _store_line(exc)
    if isinstance(exc, SettingsError | IdentityError | PlatformUnavailable | CannotListen):
        return " ".join(str(exc).split())
    return None


def _store_line(exc: StoreUnavailable) -> str:
    """The store's own words name the operation; the operator needs the URL (redacted)."""
    text = " ".join(str(exc).split())
    if text.startswith("cannot reach Redis"):
        return text
    from bridge.redis_probe import unreachable
    from bridge.settings import EngineSettings

    url = EngineSettings().redis_url or "(unset)"
    return unreachable(url, text.removeprefix("ask store: "))


def on_terminal(command: str) -> Callable[[str], None] | None:
    """How ``command`` tells a person it is still waiting (for Redis, as it starts): a line on
    stderr when that is a terminal; nothing otherwise, so a pipeline's log holds only the
    outcome (the one-line failure, if it comes to that)."""
    if not sys.stderr.isatty():
        return None

    def say(text: str) -> None:
        print(f"ask-bridge {command}: {text}", file=sys.stderr, flush=True)

    return say
