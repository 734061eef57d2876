"""Which of an ask's answerer groups a person belongs to, via ``usergroups.users.list``.

Membership is cached briefly (a minute by default) so a burst of clicks costs one API call per
group, while a change in the workspace is picked up soon after.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from slack_sdk.web.async_client import AsyncWebClient

GROUP_PREFIX = "S"


class GroupResolver:
    def __init__(self, client: AsyncWebClient, *, ttl: float = 60.0) -> None:
        self.client = client
        self.ttl = ttl
        self._members: dict[str, tuple[float, frozenset[str]]] = {}

    async def groups_of(self, user_id: str, candidates: Iterable[str]) -> tuple[str, ...]:
        """The user-group ids among ``candidates`` that ``user_id`` is a member of."""
        found = []
        for group in candidates:
            if group.startswith(GROUP_PREFIX) and user_id in await self.members(group):
                found.append(group)
        return tuple(found)

    async def members(self, group: str) -> frozenset[str]:
        cached = self._members.get(group)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        resp = await self.client.usergroups_users_list(usergroup=group)
        members = frozenset(str(u) for u in resp.get("users") or ())
        self._members[group] = (now, members)
        return members
