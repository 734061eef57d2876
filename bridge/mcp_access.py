"""Who may call the MCP server over HTTP: a bearer token off loopback, DNS-rebinding checks on it.

``ask_user`` posts in the team's chat under the bot's name, so an open HTTP endpoint would let
anyone who can reach it post there. The rule, decided by :func:`check_access` from the address the
server listens on:

- not a loopback address (``0.0.0.0``, a LAN address, a host name): ``ASK_BRIDGE_MCP_TOKEN`` is
  required, and the server refuses to start without it;
- loopback (``127.0.0.0/8``, ``::1``, ``localhost``): the token is optional, and the MCP SDK's
  DNS-rebinding protection is on (``Host`` must name this machine, ``Origin``, when sent, must
  be a local page), so a web page in the user's browser cannot reach the server;
- whenever the token is set, every request must carry it (``Authorization: Bearer <token>``), on
  loopback too; a missing or wrong token gets 401.

The token is checked by the SDK's bearer middleware through :class:`StaticToken`, in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl

MCP_TOKEN_ENV = "ASK_BRIDGE_MCP_TOKEN"
MIN_TOKEN_LENGTH = 16
_TOKEN = re.compile(rf"[!-~]{{{MIN_TOKEN_LENGTH},}}")
"""Printable ASCII without spaces: what an ``Authorization`` header carries unchanged."""

CLIENT_ID = "ask-bridge-token"
"""The principal every holder of the token is (the SDK ties sessions to a principal)."""

_LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether a server listening on ``host`` (an address, or ``localhost``) can only be reached
    from this machine. Any other name counts as reachable from elsewhere."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_access(host: str, token: str | None) -> None:
    """Raise ``ValueError`` (one line naming ``ASK_BRIDGE_MCP_TOKEN``) unless serving on ``host``
    with ``token`` is allowed: a token is required off loopback and must be sendable in a header."""
    if token is None:
        if not is_loopback(host):
            raise ValueError(
                f"{MCP_TOKEN_ENV} is not set: serving on {host}, which is not a loopback address, "
                "needs a bearer token for the clients to send (e.g. "
                f"{MCP_TOKEN_ENV}=$(openssl rand -hex 32)); or listen on 127.0.0.1"
            )
        return
    if not _TOKEN.fullmatch(token):
        raise ValueError(
            f"{MCP_TOKEN_ENV} must be at least {MIN_TOKEN_LENGTH} printable ASCII characters "
            "without spaces (e.g. the output of openssl rand -hex 32)"
        )


def token_from_env(host: str, environ: Mapping[str, str] | None = None) -> str | None:
    """``ASK_BRIDGE_MCP_TOKEN`` (unset or blank: ``None``), checked for serving on ``host`` by
    :func:`check_access`."""
    if environ is None:  # the environment, or .env, like every setting
        from bridge.settings import ChatRouteSettings

        token = ChatRouteSettings().mcp_token.strip() or None
    else:
        token = environ.get(MCP_TOKEN_ENV, "").strip() or None
    check_access(host, token)
    return token


class StaticToken:
    """The SDK's ``TokenVerifier`` for one shared secret, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._expected = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._expected):
            return AccessToken(token=token, client_id=CLIENT_ID, scopes=[])
        return None


def url_host(host: str) -> str:
    """``host`` as it appears in a URL or ``Host`` header (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def http_app_options(host: str, port: int, token: str | None) -> dict[str, Any]:
    """Keyword arguments for the SDK's ``streamable_http_app`` serving on ``host:port``: the
    transport security and, with a token, the bearer check. Raises like :func:`check_access`."""
    check_access(host, token)
    if is_loopback(host):
        names = dict.fromkeys([*_LOCAL_NAMES, url_host(host)])
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{name}:*" for name in names],
            allowed_origins=[f"http://{name}:*" for name in names],
        )
    else:
        # The names clients use to reach a public address (a proxy's, a DNS name) are not known
        # here; the required token is what keeps a browser page out.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    options: dict[str, Any] = {"transport_security": security}
    if token is not None:
        # The SDK mounts its bearer middleware only with AuthSettings, which need an issuer: the
        # operator who set the token, i.e. this server. No OAuth routes are mounted (no provider,
        # no resource_server_url), so the URL is never published.
        options["auth"] = AuthSettings(
            issuer_url=AnyHttpUrl(f"http://{url_host(host)}:{port}"),
            resource_server_url=None,
        )
        options["token_verifier"] = StaticToken(token)
    return options
