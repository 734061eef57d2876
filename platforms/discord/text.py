"""Making untrusted text safe and short enough for Discord.

Text from the model or a teammate is stripped of invisible and control characters
(:func:`bridge.text.visible`), and cut visibly with ``…`` to a limit counted in UTF-16 code units,
never fewer than the characters Discord counts, so a cut text always fits. Where it is shown as
Markdown inside our own formatting (labels in bold, headers, typed answers) it is escaped, so a
``**`` or a ``<@id>`` in it shows as typed; question texts keep their Markdown.

Mentions: model text never pings anyone, because every send and edit carries
:data:`NO_MENTIONS` (``{"parse": []}``) or :func:`answerer_mentions`, which allows exactly the
configured answerers' own ids. Answerer ids are Discord snowflakes: a bare ``123`` is a user,
``role:123`` a role (both are snowflakes, so the prefix is how a role is told apart).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import discord

from bridge.presentation import longest_beginning, shown_once
from bridge.text import ELLIPSIS, one_line

NO_MENTIONS = discord.AllowedMentions.none()
ROLE_PREFIX = "role:"

_SNOWFLAKE = re.compile(r"^[0-9]{1,20}$")
_MARKDOWN = set("\\*_~`|>#-[]()<:@")
_ESCAPED = str.maketrans({char: "\\" + char for char in _MARKDOWN})


def units(text: str) -> int:
    """Length in UTF-16 code units (an astral character counts 2): at least Discord's count.
    An ASCII text's is its length, known without encoding it (every rendering counts each of
    its texts)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def fit(text: str, limit: int, *, markdown: bool = False) -> str:
    """``text`` cleaned (and escaped when ``markdown``) within ``limit`` UTF-16 units, cut with
    ``…`` if it had to be."""
    cleaned = shown_once(text)  # cleaned once for the levels of a rendering that try it
    if len(cleaned) <= limit:  # else it cannot fit: each character takes a unit at least
        whole = cleaned.translate(_ESCAPED) if markdown else cleaned
        if units(whole) <= limit:
            return whole
    budget = limit - units(ELLIPSIS)

    def shown_of(count: int) -> str:  # the first ``count`` characters as shown
        return cleaned[:count].translate(_ESCAPED) if markdown else cleaned[:count]

    # the most characters whose showing fits (each takes a unit at least: ``limit`` at most)
    kept = longest_beginning(
        min(len(cleaned), limit), lambda count: units(shown_of(count)) <= budget
    )
    cut = shown_of(kept).rstrip()
    if cut.endswith("\\") and not cut.endswith("\\\\"):
        cut = cut[:-1]  # never leave an escape that would swallow the ellipsis
    return cut + ELLIPSIS


ANSWERER_RULE = "Discord answerers are user ids, numbers, and roles, role:ID"


def answerer_id(text: str) -> str | None:
    """``text`` as the Discord user id or ``role:ID`` it names -- trimmed, the prefix in lower
    case, the number as Discord writes it (no leading zeros, below 2**64) -- or ``None``."""
    found = text.strip()
    head, colon, rest = found.partition(":")
    role = bool(colon) and head.lower() == ROLE_PREFIX[:-1]
    number = rest if role else found
    if not _SNOWFLAKE.fullmatch(number) or int(number) >= 2**64:
        return None
    return f"{ROLE_PREFIX}{int(number)}" if role else str(int(number))


def is_user(answerer: str) -> bool:
    """Whether ``answerer`` is a user id (a snowflake), not a role (``role:ID``)."""
    return bool(_SNOWFLAKE.match(answerer))


def mention(answerer: str) -> str:
    """The bridge's own mention of a configured answerer (``<@id>`` for a user, ``<@&id>`` for
    ``role:id``); anything not shaped like one is shown as inert text."""
    if _SNOWFLAKE.match(answerer):
        return f"<@{answerer}>"
    role = answerer.removeprefix(ROLE_PREFIX)
    if answerer.startswith(ROLE_PREFIX) and _SNOWFLAKE.match(role):
        return f"<@&{role}>"
    return fit(one_line(answerer), 40, markdown=True)


def answerer_mentions(answerers: Sequence[str]) -> discord.AllowedMentions:
    """Allowed mentions that may notify exactly these answerers and nobody else."""
    users = [discord.Object(int(a)) for a in answerers if _SNOWFLAKE.match(a)]
    roles = [
        discord.Object(int(a.removeprefix(ROLE_PREFIX)))
        for a in answerers
        if a.startswith(ROLE_PREFIX) and _SNOWFLAKE.match(a.removeprefix(ROLE_PREFIX))
    ]
    return discord.AllowedMentions(everyone=False, users=users, roles=roles, replied_user=False)
