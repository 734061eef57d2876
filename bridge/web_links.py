"""Personal signed links to answer in the browser: who may open which page, until when.

A link names an ask (or the person's inbox, with no ask) and the person it was made for, and
expires; an HMAC-SHA256 over those, keyed by ``ASK_BRIDGE_WEB_SECRET``, makes it unforgeable
without a login. Whoever holds the link answers as that person, so a link made from a chat
message (the ``Open in browser`` button) carries the person's platform identity: approvals by K
people and "who may answer" count them exactly as a click in the chat would.

Three sides make or read links, so they live here, in ``bridge``: the chat platforms (a private
link for the person who asked for one), the CLI (``ask --platform web``, ``ask-bridge link``) and
the web platform that verifies them. Settings (:class:`WebSettings`):

* ``ASK_BRIDGE_WEB_SECRET``: one secret, or several separated by commas for rotation -- the
  first signs, every one verifies. Setting it is what turns the web platform on in ``serve``.
* ``ASK_BRIDGE_WEB_URL``: the public base URL links carry (default: the address it listens on,
  when that is loopback: :func:`browser_links`).
* ``ASK_BRIDGE_WEB_LINK_TTL``: seconds a link made on demand lives (default
  :data:`DEFAULT_LINK_TTL`). The links ``ask`` hands out when it creates an ask live as long as
  the ask (:meth:`Links.lasting`): the ask may wait a day, and nobody is there to make a fresh one.

A token is ``<payload>.<signature>``, both base64url without padding; the payload is compact
JSON. Verification checks the signature before reading the payload, in constant time, and tells
a forged or tampered link (:class:`LinkForged`, a 403) from a genuine one that expired
(:class:`LinkExpired`, a 410). Tokens are credentials: logs show them only as :func:`shown`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bridge.platform import Platform
from bridge.settings_error import SettingsError, one_line

SECRET_ENV = "ASK_BRIDGE_WEB_SECRET"
URL_ENV = "ASK_BRIDGE_WEB_URL"
LINK_TTL_ENV = "ASK_BRIDGE_WEB_LINK_TTL"
DEFAULT_LINK_TTL = 900.0
"""Seconds a link lives unless ``ASK_BRIDGE_WEB_LINK_TTL`` says otherwise (15 minutes)."""
MAX_LINK_TTL = 30 * 86400.0
"""The longest a link may live: a month, so a leaked link does not stay a key for ever."""
MIN_SECRET = 32
"""Least characters a secret has (e.g. ``openssl rand -hex 32`` gives 64)."""
ASK_PATH = "/a/"
"""An ask's page: ``ASK_PATH + token``."""
INBOX_PATH = "/inbox/"
"""A person's inbox: ``INBOX_PATH + token`` (a token naming no ask)."""
MAX_TOKEN = 1024
"""Longest token read at all: anything longer is refused before any decoding."""
_CONTEXT = b"ask-bridge web link v1\n"
"""Prefixed to every signed payload, so a signature made for anything else never verifies."""


class LinkError(ValueError):
    """A link that opens nothing; the message says why in words fit for the person."""


class LinkForged(LinkError):
    """Not signed by any configured secret: forged, tampered or cut short (HTTP 403)."""


class LinkExpired(LinkError):
    """Genuine, but past its expiry (HTTP 410): the person asks for a fresh one."""


@dataclass(frozen=True)
class Person:
    """Whom a link was made for: their id on ``platform`` (``web`` for someone on no chat
    platform, named by ``ask --answerer``) and the name pages show."""

    platform: str
    user_id: str
    name: str


@dataclass(frozen=True)
class Link:
    """A verified link: the ask it opens (``None``: the person's inbox), for whom, until when."""

    ask_id: str | None
    person: Person
    expires_at: float


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Links:
    """Makes and verifies links with ``secrets`` (the first signs, all verify), for pages under
    ``base_url``, living ``ttl`` seconds unless a call says otherwise."""

    def __init__(
        self, secrets: Sequence[str], base_url: str, ttl: float = DEFAULT_LINK_TTL
    ) -> None:
        if not secrets:
            raise ValueError("links need at least one secret")
        self._secrets = tuple(secrets)
        self._keys = tuple(s.encode("utf-8") for s in secrets)
        self.base_url = base_url.rstrip("/")
        self.ttl = ttl

    def token(
        self,
        ask_id: str | None,
        person: Person,
        *,
        ttl: float | None = None,
        now: float | None = None,
    ) -> str:
        """A token for ``person`` to open ``ask_id`` (``None``: their inbox)."""
        # rounded up: a link never dies before the moment it was made for (an ask's expiry)
        expires = math.ceil(
            (time.time() if now is None else now) + (self.ttl if ttl is None else ttl)
        )
        body = {"a": ask_id, "p": person.platform, "u": person.user_id, "n": person.name}
        payload = json.dumps({**body, "e": expires}, separators=(",", ":"), ensure_ascii=False)
        raw = payload.encode("utf-8")
        return f"{_b64(raw)}.{_b64(self._sign(self._keys[0], raw))}"

    def lasting(self, ttl: float) -> Links:
        """These links, living ``ttl`` seconds: ``ask`` gives the ask's own lifetime, so a
        link it prints at creation opens the page until the ask expires (at most a second
        more), however long the ask waits."""
        return Links(self._secrets, self.base_url, ttl)

    def ask_url(self, ask_id: str, person: Person, *, ttl: float | None = None) -> str:
        """The page where ``person`` answers ``ask_id``."""
        return f"{self.base_url}{ASK_PATH}{self.token(ask_id, person, ttl=ttl)}"

    def inbox_url(self, person: Person, *, ttl: float | None = None) -> str:
        """The page listing what waits for ``person``."""
        return f"{self.base_url}{INBOX_PATH}{self.token(None, person, ttl=ttl)}"

    def verify(self, token: str, *, now: float | None = None) -> Link:
        """The link ``token`` stands for; :class:`LinkForged` or :class:`LinkExpired` if none."""
        forged = LinkForged("This link is not valid: it was changed or cut short.")
        if len(token) > MAX_TOKEN or token.count(".") != 1:
            raise forged
        encoded, _, signature = token.partition(".")
        try:
            raw, given = _unb64(encoded), _unb64(signature)
        except (binascii.Error, ValueError):
            raise forged from None
        if not any(hmac.compare_digest(self._sign(key, raw), given) for key in self._keys):
            raise forged
        try:  # signed by us, so well formed; checked anyway rather than trusted to be
            fields: dict[str, Any] = json.loads(raw)
            ask_id = fields["a"]
            person = Person(str(fields["p"]), str(fields["u"]), str(fields["n"]))
            expires = float(fields["e"])
        except (ValueError, KeyError, TypeError):
            raise forged from None
        if ask_id is not None and not isinstance(ask_id, str):
            raise forged
        if expires <= (time.time() if now is None else now):
            raise LinkExpired("This link has expired: ask for a fresh one where you got it.")
        return Link(ask_id, person, expires)

    @staticmethod
    def _sign(key: bytes, raw: bytes) -> bytes:
        return hmac.new(key, _CONTEXT + raw, hashlib.sha256).digest()


def shown(token_or_url: str) -> str:
    """A link or token fit for a log line: enough to tell two apart, never enough to use."""
    token = token_or_url.rpartition("/")[2]
    prefix = token_or_url[: len(token_or_url) - len(token)]
    return f"{prefix}{token[:10]}…" if len(token) > 10 else token_or_url


class WebSettings(BaseSettings):
    """The web platform's settings, from the environment (see the module docstring)."""

    model_config = SettingsConfigDict(env_prefix="ASK_BRIDGE_WEB_", extra="ignore")

    secret: Annotated[tuple[SecretStr, ...], NoDecode] = ()
    url: str | None = None
    link_ttl: float = Field(default=DEFAULT_LINK_TTL, gt=0, le=MAX_LINK_TTL)

    @field_validator("secret", mode="before")
    @classmethod
    def _secrets(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        secrets = [s.strip() for s in value.split(",")]
        if not value.strip():
            return ()
        if any(len(s) < MIN_SECRET for s in secrets):
            raise ValueError(
                f"each secret (comma-separated) is at least {MIN_SECRET} characters; make one "
                "with: openssl rand -hex 32"
            )
        return tuple(SecretStr(s) for s in secrets)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "the public base URL links carry is http(s)://host[:port][/path], e.g. "
                "https://asks.example.com"
            )
        if parts.query or parts.fragment:
            raise ValueError("the public base URL has no query or fragment")
        return value.strip().rstrip("/")

    @property
    def configured(self) -> bool:
        """Whether the web platform is on (a secret is set)."""
        return bool(self.secret)

    def links(self, listening_url: str | None = None) -> Links:
        """Links signed with these settings, under ``ASK_BRIDGE_WEB_URL`` or else
        ``listening_url`` (the address the web platform listens on)."""
        base = self.url or listening_url
        if not self.secret or base is None:
            raise SettingsError(
                f"{SECRET_ENV} (and {URL_ENV}, or a listening address) are needed to make links"
            )
        return Links([s.get_secret_value() for s in self.secret], base, self.link_ttl)


def read_web_settings() -> WebSettings:
    """:class:`WebSettings` from the environment; :class:`SettingsError` in one line if bad."""
    try:
        return WebSettings()
    except ValidationError as exc:
        line = one_line(exc)
        for field, env in (("secret", SECRET_ENV), ("url", URL_ENV), ("link_ttl", LINK_TTL_ENV)):
            line = line.replace(f" {field}: ", f" {env}: ")
        raise SettingsError(line) from None


@runtime_checkable
class PagesPlatform(Platform, Protocol):
    """The platform serving the pages links open (the web platform), as the core reaches it
    without importing it: a process without a shared store serves them itself
    (:meth:`embedded`), and makes the links it prints with that platform's own secret."""

    def embedded(self) -> PagesPlatform:
        """The platform to serve in this process alone, on loopback: with
        ``ASK_BRIDGE_WEB_SECRET`` if set, else with a secret only this process knows."""
        ...

    def links(self, listening_url: str | None = None) -> Links:
        """Links signed with its secret, under ``ASK_BRIDGE_WEB_URL`` or ``listening_url``."""
        ...


_LISTENING: ContextVar[str | None] = ContextVar("ask_bridge_web_listening", default=None)
"""Where this process serves the web platform's pages on loopback (:func:`serving_pages_at`)."""


def loopback(host: str) -> bool:
    """Whether ``host`` (an address to bind, or a name) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listening_url(host: str, port: int) -> str | None:
    """The base URL of pages served on ``host:port`` when links may carry it (loopback: only
    this machine's browser follows it, as intended), else ``None``: off loopback the address
    bound (``0.0.0.0``, a private one) is not one a person's browser reaches, so only
    ``ASK_BRIDGE_WEB_URL`` can say where the pages are. ``port`` 0 is not known yet: ``None``."""
    if not loopback(host) or port == 0:
        return None
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}"


@contextmanager
def serving_pages_at(url: str | None) -> Iterator[None]:
    """Within, :func:`browser_links` (called with no URL by the chat platforms, as they build
    their receivers and posters) falls back to ``url``: where this process serves the pages."""
    token = _LISTENING.set(url)
    try:
        yield
    finally:
        _LISTENING.reset(token)


def browser_links(listening_url: str | None = None) -> Links | None:
    """Links for the chat platforms' ``Open in browser`` button, the CLI and the ``created``
    webhook: ``None`` unless the web platform is on and the base URL its pages are served at is
    known -- ``ASK_BRIDGE_WEB_URL``, else ``listening_url`` (or, with none given, the one
    ``serve`` set by :func:`serving_pages_at`) -- so no message offers a link that no address
    serves. A bad setting is :class:`SettingsError` in one line."""
    settings = read_web_settings()
    base = settings.url or listening_url or _LISTENING.get()
    if not settings.configured or base is None:
        return None
    return settings.links(base)
