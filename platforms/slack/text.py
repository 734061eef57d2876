"""Making untrusted text safe and short enough for Slack.

Text from the model or a teammate is escaped (``&``, ``<``, ``>``) so ``<!channel>``, ``<@U…>`` and
``<https://…|links>`` in it ping and link nobody, and stripped of invisible and control characters
(:func:`bridge.text.visible`, the rule every platform shows text by). It is cut visibly with ``…``
to a *cost*: the UTF-16 length of its JSON encoding after escaping. That cost is
never below Slack's character count for a field, and the sum of costs bounds the block JSON size
Slack measures for ``msg_blocks_too_long``, so a rendering can be proved to fit.
"""

from __future__ import annotations

import json
import re

from bridge.presentation import longest_beginning, shown_once
from bridge.text import ELLIPSIS

_ZWJ = "\u200d"
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,30}$")
_GROUP_ID = re.compile(r"^S[A-Z0-9]{2,30}$")
_JSON_ESCAPED = re.compile(r'[\x00-\x1f"\\]')
"""The characters ``json.dumps(..., ensure_ascii=False)`` writes as escapes."""


def escape(text: str) -> str:
    """Slack's three control characters as entities; nothing else is interpreted."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cost(text: str) -> int:
    """What ``text`` (already escaped) adds to the block JSON, in UTF-16 code units: the text
    itself when JSON escapes none of its characters (``json`` escapes exactly
    :data:`_JSON_ESCAPED` when it keeps non-ASCII as it is), else its JSON encoding's."""
    if _JSON_ESCAPED.search(text) is None:
        return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2
    return len(json.dumps(text, ensure_ascii=False).encode("utf-16-le")) // 2 - 2


def fit(text: str, limit: int) -> str:
    """Escaped ``text`` whose :func:`cost` is at most ``limit``, cut with ``…`` if it had to be.

    The cut keeps the longest beginning that fits (:func:`bridge.presentation.longest_beginning`:
    the cost of a beginning grows with it, character by character, and an entity is never split).
    A cut inside an emoji sequence drops a joiner left dangling before the ``…`` (it would join
    nothing, and show nothing: :func:`bridge.text.visible` keeps one only between symbols)."""
    cleaned = shown_once(text)
    safe = escape(cleaned)
    if cost(safe) <= limit:
        return safe
    budget = limit - cost(ELLIPSIS)
    kept = longest_beginning(len(cleaned), lambda count: cost(escape(cleaned[:count])) <= budget)
    return escape(cleaned[:kept]).rstrip().removesuffix(_ZWJ) + ELLIPSIS


ANSWERER_RULE = "Slack answerers are user ids, U… or W…, and user group ids, S…"


def answerer_id(text: str) -> str | None:
    """``text`` as the Slack user or user group id it names, trimmed and in upper case (Slack's
    ids are: ``u0alice`` is ``U0ALICE``, whose clicks carry that); ``None`` when it is neither
    (a channel ``C…``, a bot ``B…``, a name)."""
    found = text.strip()
    if not found.isascii():  # upper() would make some non-ASCII letters ASCII ones
        return None
    found = found.upper()
    return found if _USER_ID.fullmatch(found) or _GROUP_ID.fullmatch(found) else None


def is_user(slack_id: str) -> bool:
    """Whether ``slack_id`` is shaped like a user id (not a user group's)."""
    return bool(_USER_ID.match(slack_id))


def mention(slack_id: str) -> str:
    """The bridge's own mention of a configured answerer; anything not shaped like an id is shown
    as inert text."""
    if _USER_ID.match(slack_id):
        return f"<@{slack_id}>"
    if _GROUP_ID.match(slack_id):
        return f"<!subteam^{slack_id}>"
    return fit(slack_id, 40)
