"""The expected failures of every command, each told in one line with one exit status.

A bad setting, a platform that refuses its token or cannot be reached, Redis down, a busy port,
a missing extra: :func:`explain` turns each into the one line the command prints (naming what to
fix), and the command exits :data:`FAILED`. Anything else is a bug and keeps its traceback.
``ask`` keeps its own statuses for how an ask ended (2 rejected, 3 deferred, 4 expired/cancelled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.store.base import StoreUnavailable

FAILED = 1
"""Configuration or infrastructure failure (and any other failure), in every command."""
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
    from bridge.platform import PlatformUnavailable
    from bridge.settings import SettingsError
    from bridge.store.base import StoreUnavailable

    if isinstance(exc, ModuleNotFoundError):
        return missing_extra(exc)
    if isinstance(exc, StoreUnavailable):
        return _store_line(exc)
    if isinstance(exc, SettingsError | PlatformUnavailable | CannotListen):
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
