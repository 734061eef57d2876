"""``ask-bridge doctor``: check the configuration and say what is fine and what to fix.

One row per check: every setting parsed; Redis reachable, its version, and the two settings that
decide whether pending asks survive -- persistence (AOF or RDB snapshots) and ``maxmemory-policy``
(anything but ``noeviction`` lets Redis evict a pending ask silently); whether the Redis user may
run every command the bridge sends (:mod:`bridge.redis_acl`: a row per command refused, or for
the bridge's keys or channels, naming what to grant -- such a user passes a connection check,
then fails every ask); each installed and
configured chat platform's own checks (:class:`~bridge.platform.Diagnosis`: for Slack the token,
its scopes against what the bridge calls, and the bot's membership of each ``--channel`` that is
a Slack id; for Discord the token and the bot's access to each numeric ``--channel``).
Exit 0 only when nothing needs fixing; 1 otherwise. Notes (a memory store, an optional scope)
do not fail it.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bridge.platform import Finding

if TYPE_CHECKING:
    from bridge.redis_acl import Access

Row = Finding


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="check settings, Redis and each platform's token; print what to fix",
        description="Check the configuration: settings, Redis (reachable, version, persistence, "
        "maxmemory-policy, and whether its user may run every command the bridge sends), each "
        "configured platform's token and scopes, and the bot's access to --channel. Exit status "
        "0 when everything needed is fine, 1 when something needs fixing.",
    )
    p.add_argument(
        "--channel",
        action="append",
        default=[],
        metavar="ID",
        help="also check the bot can post in this channel (Slack: C…, Discord: a number); repeat",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = asyncio.run(diagnose(args.channel))
    print(table(rows))
    return 1 if any(r.status == "FIX" for r in rows) else 0


def table(rows: list[Row]) -> str:
    width = max(len(r.check) for r in rows)
    return "\n".join(f"{r.check:<{width}}  {r.status:<4}  {r.detail}" for r in rows)


async def diagnose(channels: list[str]) -> list[Row]:
    rows = _settings_rows()
    rows += await _redis_rows()
    rows += await _platform_rows(channels)
    return rows


def _settings_rows() -> list[Row]:
    from bridge.logs import settings as log_settings
    from bridge.settings import ChatRouteSettings, EngineSettings

    rows = []
    readers: list[tuple[str, Callable[[], object]]] = [
        ("engine settings", EngineSettings),
        ("log settings", log_settings),  # in one line, as every command says a bad one
        ("mcp route settings", ChatRouteSettings),
    ]
    for name, read in readers:
        try:
            read()
        except Exception as exc:
            rows.append(Row(name, "FIX", " ".join(str(exc).split())[:300]))
        else:
            rows.append(Row(name, "ok", "parsed"))
    return rows


async def _redis_rows() -> list[Row]:
    from bridge.redis_probe import probe
    from bridge.settings import EngineSettings, redacted
    from bridge.store.base import StoreUnavailable

    try:
        settings = EngineSettings()
    except ValueError:
        return []  # already a row above
    url = settings.redis_url
    if not url:
        return [
            Row(
                "store",
                "note",
                "REDIS_URL unset: in-memory store, one process only, nothing survives a restart",
            )
        ]
    try:
        facts = await probe(url, prefix=settings.key_prefix)
    except StoreUnavailable as exc:
        return [Row("redis", "FIX", str(exc))]
    rows = [Row("redis", "ok", f"reachable at {redacted(url)}, version {facts.version}")]
    if facts.persistent is None:
        rows.append(
            Row("redis persistence", "note", "could not read INFO or CONFIG; check AOF or RDB")
        )
    elif facts.persistent:
        on = " and ".join(n for n, v in (("AOF", facts.aof), ("RDB", facts.rdb)) if v)
        rows.append(Row("redis persistence", "ok", f"{on} on"))
    else:
        rows.append(
            Row(
                "redis persistence",
                "FIX",
                "neither AOF nor RDB is on: a Redis restart loses every pending ask "
                "(set appendonly yes)",
            )
        )
    if facts.maxmemory_policy is None:
        rows.append(
            Row("redis maxmemory-policy", "note", "could not read INFO; check it is noeviction")
        )
    elif facts.maxmemory_policy == "noeviction":
        rows.append(Row("redis maxmemory-policy", "ok", "noeviction"))
    else:
        rows.append(
            Row(
                "redis maxmemory-policy",
                "FIX",
                f"{facts.maxmemory_policy}: Redis may evict pending asks silently when full "
                "(set maxmemory-policy noeviction)",
            )
        )
    return rows + _access_rows(facts.access)


def _access_rows(access: Access | None) -> list[Row]:
    """A row per command the Redis user may not run (one for all refused the bridge's keys, one
    for its channels), else one saying it may run them all."""
    if access is None:
        return []
    if access.method is None:
        return [Row("redis permissions", "note", f"not checked: {access.unchecked}")]
    if not access.refused:
        every = f"user {access.user!r} may run every command the bridge sends"
        return [Row("redis permissions", "ok", f"{every} (checked with {access.method})")]
    return [Row(f"redis permission {r.what}", "FIX", r.line(access.user)) for r in access.refused]


async def _platform_rows(channels: list[str]) -> list[Row]:
    from bridge.platform import (
        Platform,
        PlatformUnavailable,
        available_platforms,
        load_platform,
    )

    rows: list[Row] = []
    any_configured = False
    for name in available_platforms():
        try:
            found = load_platform(name)
        except PlatformUnavailable as exc:
            rows.append(Row(name, "note", f"not installed: {exc}"))
            continue
        if not isinstance(found, Platform):
            continue  # the console
        try:
            configured = found.configured()
        except PlatformUnavailable as exc:
            rows.append(Row(name, "FIX", str(exc)))
            continue
        if not configured:
            rows.append(Row(name, "note", "not configured (no token set)"))
            continue
        any_configured = True
        try:
            rows += await _check(found, channels)
        except PlatformUnavailable as exc:
            rows.append(Row(f"{name} token", "FIX", str(exc)))
    if not any_configured:
        rows.append(Row("platforms", "FIX", "no chat platform is configured"))
    return rows


async def _check(platform: Any, channels: list[str]) -> list[Row]:
    from bridge.platform import Diagnosis, check_credentials

    if isinstance(platform, Diagnosis):
        return list(await platform.diagnose(channels))
    await check_credentials(platform)
    return [Row(f"{platform.name} token", "ok", "accepted")]
