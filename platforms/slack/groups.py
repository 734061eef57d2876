"""Which of an ask's answerer groups a person belongs to, via ``usergroups.users.list``.

Membership is cached briefly (a minute by default), and clicks that arrive while a group is being
looked up wait for that one lookup, so a burst of clicks costs one API call per group, while a
change in the workspace is picked up soon after. A failed lookup is not cached: the next click
asks again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from slack_sdk.web.async_client import AsyncWebClient

from bridge.record import AskRecord

GROUP_PREFIX = "S"


class GroupResolver:
    def __init__(self, client: AsyncWebClient, *, ttl: float = 60.0) -> None:
        self.client = client
        self.ttl = ttl
        self._members: dict[str, tuple[float, asyncio.Task[frozenset[str]]]] = {}

    async def groups_of(
        self, user_id: str, candidates: Iterable[str], record: AskRecord | None = None
    ) -> tuple[str, ...]:
        """The user-group ids among ``candidates`` that ``user_id`` is a member of (a workspace
        has one set of groups, wherever the ask was posted)."""
        found = []
        for group in candidates:
            if group.startswith(GROUP_PREFIX) and user_id in await self.members(group):
                found.append(group)
        return tuple(found)

    async def members(self, group: str) -> frozenset[str]:
        cached = self._members.get(group)
        now = time.monotonic()
        if cached is None or now - cached[0] >= self.ttl:
            lookup = asyncio.create_task(self._lookup(group))
            lookup.add_done_callback(lambda done: self._forget_failed(group, done))
            cached = self._members[group] = (now, lookup)
        # shielded: a click given up on (cancelled) must not cancel the lookup others wait for
        return await asyncio.shield(cached[1])

    async def _lookup(self, group: str) -> frozenset[str]:
        resp = await self.client.usergroups_users_list(usergroup=group)
        return frozenset(str(u) for u in resp.get("users") or ())

    def _forget_failed(self, group: str, lookup: asyncio.Task[frozenset[str]]) -> None:
        if lookup.cancelled() or lookup.exception() is not None:
            cached = self._members.get(group)
            if cached is not None and cached[1] is lookup:
                del self._members[group]
