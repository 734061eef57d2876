"""Which of an ask's answerer roles a Discord member holds now, read from Discord.

The person who clicks brings their roles with the interaction, fresh; the others whose
agreement an approval would count do not, and one may have lost the role that admitted them
since they submitted. Their roles are read with one REST call per member (``GET
/guilds/{guild}/members/{user}``: no privileged intent needed), in the guild the ask was posted
in, and kept for a minute, so a burst of approvals costs one call per member, while a removal is
seen within the minute (:class:`bridge.answering.Membership`). A failed read is not kept: the
next judgement asks again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import discord

from bridge.record import AskRecord
from platforms.discord.text import ROLE_PREFIX

KEPT = 10_000
"""Members whose roles are kept before stale ones are dropped."""
NO_MEMBER = 10007
"""Discord's code for a member who is not (or no longer) in the guild: they hold no role."""


class RoleResolver:
    """Members' roles from Discord, cached ``ttl`` seconds per guild and member."""

    def __init__(self, client: discord.Client, *, ttl: float = 60.0) -> None:
        self.client = client
        self.ttl = ttl
        self._roles: dict[tuple[int, int], tuple[float, asyncio.Task[frozenset[str]]]] = {}
        self._guilds: dict[int, int | None] = {}

    async def groups_of(
        self, user_id: str, candidates: Iterable[str], record: AskRecord | None = None
    ) -> tuple[str, ...]:
        """The role answerers among ``candidates`` (``role:ID``, or a bare role id) that
        ``user_id`` holds in the guild of ``record``'s Discord message (none in a DM)."""
        guild = await self._guild_of(record)
        if guild is None or not user_id.isdigit():
            return ()
        held = await self._held(guild, int(user_id))
        return tuple(c for c in candidates if c in held)

    async def _guild_of(self, record: AskRecord | None) -> int | None:
        here = [m for m in (record.messages if record else ()) if m.platform == "discord"]
        if not here or not here[0].channel.isdigit():
            return None
        channel_id = int(here[0].channel)
        if channel_id not in self._guilds:
            channel = self.client.get_channel(channel_id)
            if channel is None:
                channel = await self.client.fetch_channel(channel_id)
            guild = getattr(channel, "guild", None)
            self._guilds[channel_id] = None if guild is None else guild.id
        return self._guilds[channel_id]

    async def _held(self, guild: int, user: int) -> frozenset[str]:
        cached = self._roles.get((guild, user))
        now = time.monotonic()
        if cached is None or now - cached[0] >= self.ttl:
            if len(self._roles) >= KEPT:  # a busy guild's members come and go: keep the fresh
                self._roles = {k: v for k, v in self._roles.items() if now - v[0] < self.ttl}
            lookup = asyncio.create_task(self._lookup(guild, user))
            lookup.add_done_callback(lambda done: self._forget_failed((guild, user), done))
            cached = self._roles[(guild, user)] = (now, lookup)
        # shielded: a judgement given up on must not cancel the lookup others wait for
        return await asyncio.shield(cached[1])

    async def _lookup(self, guild: int, user: int) -> frozenset[str]:
        try:
            member = await self.client.http.get_member(guild, user)
        except discord.NotFound as exc:
            if exc.code == NO_MEMBER:
                return frozenset()  # left the guild: holds nothing there
            raise
        roles = [str(r) for r in member.get("roles") or ()]
        return frozenset((*roles, *(f"{ROLE_PREFIX}{r}" for r in roles)))

    def _forget_failed(self, key: tuple[int, int], lookup: asyncio.Task[frozenset[str]]) -> None:
        if lookup.cancelled() or lookup.exception() is not None:
            cached = self._roles.get(key)
            if cached is not None and cached[1] is lookup:
                del self._roles[key]
