"""Where a webhook request may connect: every address its host resolves to, checked as the request
connects and before any connection is made.

An allow-listed host (``ASK_BRIDGE_WEBHOOK_DESTINATIONS``) is a name the operator trusted when
they wrote it; what it resolves to can change afterwards (a DNS record pointed at
``169.254.169.254``, a name that answers ``127.0.0.1``). So the webhook worker's session resolves
through :class:`AddressGuard`: a host's addresses must all be public (:func:`is_public`), unless
the configuration names them (the entry's ``networks``; the host of ``ASK_BRIDGE_WEBHOOK_URL``,
named in full by the operator, may resolve anywhere). One address that is not allowed refuses the
request (:class:`Refused`) before any socket connects, so a refused destination learns nothing
and tells nothing (no port-scanning through the bridge). The session must not cache lookups
(``use_dns_cache=False``): a cached answer would skip the guard. A URL whose host is an IP address
never reaches a resolver; the worker only sends to one an entry names exactly (an entry's host is
compared with the URL's), which is that address named explicitly.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from aiohttp.abc import AbstractResolver, ResolveResult

Networks = Sequence[IPv4Network | IPv6Network] | None
"""The non-public networks a host may resolve into (``None``: any address)."""


class Refused(Exception):
    """A webhook destination the bridge will not connect to; the message says why, in words fit
    for the audit trail and the log (no credentials: it names the host, never the URL)."""


def is_public(address: IPv4Address | IPv6Address) -> bool:
    """Whether ``address`` is one the internet routes to anybody: not loopback, private,
    link-local, multicast, unspecified, reserved or shared (100.64/10), nor site-local, nor an
    IPv4 address of those in IPv6 clothing (IPv4-mapped ``::ffff:a.b.c.d``, 6to4 ``2002::/16``)."""
    if isinstance(address, IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            return is_public(embedded)
        if address.is_site_local:
            return False
    return address.is_global and not (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_unspecified
        or address.is_reserved
    )


class AddressGuard(AbstractResolver):
    """An aiohttp resolver: ``inner`` looks the host up, then every address it found is checked
    against ``networks(host)`` (see the module); one that is not allowed raises :class:`Refused`
    instead of returning anything to connect to."""

    def __init__(self, inner: AbstractResolver, networks: Callable[[str], Networks]) -> None:
        self._inner = inner
        self._networks = networks

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        allowed = self._networks(host)
        if allowed is None:
            return found
        for result in found:
            address = ip_address(result["host"])
            if not is_public(address) and not any(address in net for net in allowed):
                raise Refused(
                    f"{host} resolves to {address}, which is not a public address and no "
                    "ASK_BRIDGE_WEBHOOK_DESTINATIONS entry names it (networks)"
                )
        return found

    async def close(self) -> None:
        await self._inner.close()
