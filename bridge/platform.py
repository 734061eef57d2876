"""How the core finds chat platforms without importing them, and what a platform provides.

``bridge`` never imports ``platforms``: each platform registers itself under the entry-point group
``ask_bridge.platforms`` (see ``pyproject.toml``), and the CLI, the MCP server and the tool's
terminal fallback look it up by name. A third-party package can add a platform the same way.

A chat platform is a thin adapter over the one flow ask -> post -> click -> resolve -> show; the
rules of every step are the bridge's. It provides four things:

* **a poster** (:class:`~bridge.poster.Poster`, from :meth:`Platform.poster`): posts an ask,
  updates its message (what :mod:`bridge.showing` calls to show the ask's new state) and posts
  reminders;
* **markup**: what a message and a form look like in the platform's own format, built from
  :class:`bridge.presentation.Shown` (what shows per status) and
  :func:`bridge.presentation.first_fit` (the levels of cuts) -- ``platforms/slack/markup.py``,
  ``platforms/discord/markup.py``;
* **a payload parser**: its click payloads read into a :class:`bridge.clicks.Click` (its control
  ids through :mod:`bridge.routing`, the clicker as a :class:`~bridge.answering.Caller`, a form's
  fields as :class:`~bridge.answering.Picks`);
* **a responder** (:class:`bridge.clicks.Responder`) per click: how the platform acknowledges,
  answers, tells later and opens a form.

Its :class:`Receiver` (from :meth:`Platform.receiver`, given the store) gets its entry point,
:class:`bridge.clicks.Clicks`, from :func:`bridge.clicks.answer_clicks` -- with its poster, its
words (:class:`~bridge.replies.Replies`) and its group lookup -- and hands it each parsed click
with its responder (:meth:`bridge.clicks.Clicks.handle`). The receiver builds it, not the runtime,
because what it needs is the receiver's own (Discord's role lookup reads the gateway client it
creates); ``Platform.receiver(store)`` keeps its signature for third-party platforms.

A platform configured from the environment may derive from :class:`SettingsPlatform`: its
settings read as they are now, and one API client kept per what it is built from.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar, runtime_checkable

from bridge.poster import Poster
from bridge.store.base import Store

if TYPE_CHECKING:  # aiohttp is the slack extra's, imported only by a process that serves HTTP
    from aiohttp import web

ENTRY_POINT_GROUP = "ask_bridge.platforms"

SettingsT = TypeVar("SettingsT")
KeyT = TypeVar("KeyT")
ClientT = TypeVar("ClientT")


class PlatformUnavailable(RuntimeError):
    """The platform is not installed (missing extra) or not configured (missing settings)."""


@dataclass(frozen=True)
class HttpRoute:
    """One HTTP endpoint a :class:`Receiver` needs on the process's one server
    (:mod:`bridge.http_server`): ``handler`` is an aiohttp request handler."""

    method: str
    path: str
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]


@runtime_checkable
class Receiver(Protocol):
    """How people's clicks reach this process, for one platform and one store.

    A platform either holds a connection (Socket Mode, a gateway: :meth:`run` does the work) or is
    called over HTTP (:meth:`routes`; :meth:`run` then only says it is ready); the runtime
    (:func:`bridge.runtime.serving`) serves every receiver's routes from one HTTP server.
    """

    def routes(self) -> Sequence[HttpRoute]:
        """The HTTP endpoints to add to the process's server; empty for connection holders."""
        ...

    async def run(self, ready: asyncio.Event) -> None:
        """Receive until cancelled; set ``ready`` once clicks can arrive, after logging
        (``logging``, INFO) the connection it holds, if any, so an operator can check it."""
        ...

    async def drain(self) -> None:
        """On shutdown, after :meth:`run` has stopped: let clicks in flight finish."""
        ...


@runtime_checkable
class Platform(Protocol):
    """What a chat platform offers the engine: a poster, and a receiver for people's clicks.

    A platform may also offer ``check_standalone()`` (see :class:`StandaloneCheck`); call it
    through :func:`check_standalone`.
    """

    name: str

    def configured(self) -> bool:
        """Whether its settings are present (environment or ``.env``): ``ask-bridge serve``
        serves every configured platform."""
        ...

    def poster(self) -> Poster:
        """A poster configured from the environment; raises ``PlatformUnavailable`` naming what
        is missing."""
        ...

    def receiver(self, store: Store) -> Receiver:
        """A receiver judging clicks by ``store``; raises ``PlatformUnavailable`` naming what is
        missing.

        A receiver parses its platform's payloads into :class:`bridge.clicks.Click` s and
        answers them through one entry point built by :func:`bridge.clicks.answer_clicks` (with
        its poster, its words and its group lookup), handing each click a
        :class:`bridge.clicks.Responder` that speaks the platform's responses: judging, timing
        and showing the new state are the bridge's, the same for every platform (see the
        module docstring)."""
        ...


class SettingsPlatform(ABC, Generic[SettingsT, KeyT, ClientT]):
    """A platform configured by a settings object read from the environment, with one API client
    kept for as long as what it is built from stays the same.

    The settings given are used as they are (a test, an embedding program); without them they are
    read afresh at every use, so a changed environment (or ``.env``) is seen at once, and the
    client built for the old one is replaced instead of posting with a stale token or URL. A
    subclass says how its settings are read (:meth:`_read_settings`), what its client is built
    from (:meth:`_client_key`, which first raises ``PlatformUnavailable`` for a missing setting,
    so nothing is built half-configured) and how it is built (:meth:`_build_client`).

    Not the definition of a platform: :class:`Platform` stays the protocol, and a third-party
    platform need not derive from this."""

    def __init__(self, settings: SettingsT | None = None) -> None:
        self._settings = settings
        self._client: tuple[KeyT, ClientT] | None = None

    @property
    def settings(self) -> SettingsT:
        """The settings given, else the environment's (and ``.env``'s) as they are now."""
        return self._settings or self._read_settings()

    def _shared_client(self) -> ClientT:
        """The client for the settings as they are now: the one kept while its key is unchanged,
        else a new one (kept in its place)."""
        key = self._client_key(self.settings)
        if self._client is None or self._client[0] != key:
            self._client = (key, self._build_client(key))
        return self._client[1]

    @abstractmethod
    def _read_settings(self) -> SettingsT:
        """The environment's settings; ``PlatformUnavailable`` for a malformed value."""

    @abstractmethod
    def _client_key(self, settings: SettingsT) -> KeyT:
        """What the client is built from (a changed key builds a new one); raises
        ``PlatformUnavailable`` naming what is missing to build it."""

    @abstractmethod
    def _build_client(self, key: KeyT) -> ClientT:
        """A new client for ``key``."""


@runtime_checkable
class StandaloneCheck(Protocol):
    """Optional for a :class:`Platform`: whether its receiver can work inside a process that has
    no shared store (``ask`` or ``mcp`` without ``REDIS_URL``).

    Such a process must handle the clicks on its own asks itself, and only for as long as it
    lives, so a receiver that needs something the process lacks (Slack's HTTP mode needs a
    public URL routed to it) would leave every click unanswered. A platform without this method
    is taken to serve anywhere.
    """

    def check_standalone(self) -> None:
        """Raise ``PlatformUnavailable`` saying what to configure instead."""
        ...


@runtime_checkable
class CredentialCheck(Protocol):
    """Optional for a :class:`Platform`: check at start that the platform accepts the configured
    credentials, so a bad or revoked token stops a process in one line instead of a retry loop."""

    async def check_credentials(self) -> None:
        """Raise ``PlatformUnavailable`` naming the variable to fix when a credential is refused,
        or the URL setting when the API stayed unreachable through a short bounded retry."""
        ...


async def check_credentials(platform: Platform) -> None:
    """Run ``platform``'s :class:`CredentialCheck`, if it has one."""
    if isinstance(platform, CredentialCheck):
        await platform.check_credentials()


@dataclass(frozen=True)
class Finding:
    """One row of ``ask-bridge doctor``: a check, ``ok`` / ``FIX`` / ``note``, and the detail."""

    check: str
    status: Literal["ok", "FIX", "note"]
    detail: str


@runtime_checkable
class Diagnosis(Protocol):
    """Optional for a :class:`Platform`: its own rows for ``ask-bridge doctor`` (the token, its
    scopes or permissions, the bot's access to each of ``channels``, the ids that are its own)."""

    async def diagnose(self, channels: Sequence[str]) -> list[Finding]: ...


@runtime_checkable
class ConnectionState(Protocol):
    """Optional for a :class:`Receiver` that holds a connection: whether it is up now (``serve``'s
    ``/readyz``). A receiver without it is taken to be connected once ready (HTTP routes)."""

    async def connected(self) -> bool: ...


@runtime_checkable
class HeldConnections(Protocol):
    """Optional for a :class:`Platform`: connections to keep open while a process serves it.

    A platform's API client may otherwise connect afresh for each call (slack_sdk does: a TCP and
    TLS handshake per call). :func:`bridge.runtime.serving` holds this context from before its
    receivers start until its sweeper has stopped, so every call made meanwhile -- a click's
    update, a sweep's showing -- reuses the connections, and none is closed under a call."""

    def held_connections(self) -> AbstractAsyncContextManager[None]: ...


def held_connections(platform: Platform) -> AbstractAsyncContextManager[None]:
    """The platform's :class:`HeldConnections` context, or one that holds nothing."""
    if isinstance(platform, HeldConnections):
        return platform.held_connections()
    return nullcontext()


def check_standalone(platform: Platform) -> None:
    """Raise ``PlatformUnavailable`` unless ``platform`` can serve its own clicks in a process
    without a shared store (see :class:`StandaloneCheck`)."""
    if isinstance(platform, StandaloneCheck):
        platform.check_standalone()


def resolve_platform(name: str) -> Platform:
    """The chat platform registered as ``name``; ``PlatformUnavailable`` if it is not installed
    or cannot post and receive clicks (the console asks at the terminal only)."""
    found = load_platform(name)
    if not isinstance(found, Platform):
        raise PlatformUnavailable(f"platform {name!r} cannot post and serve chat interactions")
    return found


def configured_platforms(names: Sequence[str] = ()) -> list[Platform]:
    """The platforms ``ask-bridge serve`` serves: those named (each must be installed and
    configured), or with no names every installed chat platform that is configured.

    Raises ``PlatformUnavailable`` with a one-line reason when a named platform is not installed
    or not configured, or when none is configured at all.
    """
    if names:
        chosen = [resolve_platform(name) for name in dict.fromkeys(names)]
        for platform in chosen:
            if not platform.configured():
                raise PlatformUnavailable(_unconfigured(platform))
        return chosen
    found: list[Platform] = []
    missing: list[str] = []
    absent: list[str] = []
    for name in available_platforms():
        try:
            loaded = load_platform(name)
        except PlatformUnavailable:
            absent.append(name)  # its extra is not installed: its settings cannot be read
            continue
        if not isinstance(loaded, Platform):
            continue  # the console: no chat to receive clicks from
        platform = loaded
        if platform.configured():
            found.append(platform)
        else:
            missing.append(_unconfigured(platform))
    if not found:
        # a base install with SLACK_BOT_TOKEN set: the extra is the fix, so it comes first
        reasons = ([needing_extras(absent)] if absent else []) + missing
        what = "installed and configured" if absent else "configured"
        raise PlatformUnavailable(
            f"no chat platform is {what}" + (f" ({'; '.join(reasons)})" if reasons else "")
        )
    return found


def needing_extras(names: Sequence[str]) -> str:
    """The install line for platforms whose extras are missing (each extra named as its
    platform), one per platform: a person installs the one they use."""
    verb = "needs its extra" if len(names) == 1 else "need their extras"
    lines = " or ".join(f"'ask-bridge[{name}]'" for name in names)
    return f"{', '.join(names)} {verb}: pip install {lines}"


def _unconfigured(platform: Platform) -> str:
    """Why ``platform`` is not configured, in its own words when its poster can say."""
    try:
        platform.poster()
    except PlatformUnavailable as exc:
        return f"{platform.name}: {exc}"
    return f"{platform.name}: not configured"


def available_platforms() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def load_platform(name: str) -> object:
    """The object registered as ``name``; its shape depends on the platform kind."""
    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        raise PlatformUnavailable(f"unknown platform {name!r} ({_known()})")
    (ep,) = tuple(found)[:1]
    try:
        return ep.load()
    except ImportError as exc:
        raise PlatformUnavailable(
            f"platform {name!r} needs its extra: pip install 'ask-bridge[{name}]' ({exc})"
        ) from exc


def _known() -> str:
    """The platforms that can be named: those installed, and those registered whose extra is
    not (loading each tells which)."""
    installed: list[str] = []
    absent: list[str] = []
    for name in available_platforms():
        try:
            load_platform(name)
        except PlatformUnavailable:
            absent.append(name)
        else:
            installed.append(name)
    return f"installed: {', '.join(installed) or 'none'}" + (
        f"; {needing_extras(absent)}" if absent else ""
    )
