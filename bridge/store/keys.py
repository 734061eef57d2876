"""THE Redis key scheme of ask-bridge, and the field names of the record hash, in one place.

Per ask ``<id>`` (every key carries the hash tag ``{<id>}``, so one ask lives in one Cluster hash
slot and one Lua script can change all of it atomically):

``<prefix>:{<id>}:rec``     hash: the record, fields in :class:`Fields`. TTL: until ``expires_at``
                            + retention while pending, then retention.
``<prefix>:{<id>}:log``     list: the audit trail, JSON events oldest first, capped. Same TTL.
``<prefix>:{<id>}:lease``   string with a short TTL: "a live process will take this answer". Set
                            when the ask is created (unless deferred) and refreshed while a call
                            waits on it.

Global keys (each one key, so each in one slot; never touched by a script together with an ask's
keys):

``<prefix>:due``     sorted set: every ask that still needs a sweeper's attention, scored by when.
                     Pending asks are scored by ``expires_at``; an answer whose hand-off is not
                     settled is scored by when to check it. TTL refreshed on every write.
``<prefix>:feed``    stream: answers (and ends) of deferred asks, one entry ``{"ask": <id>}`` each,
                     read through a consumer group; trimmed by age (retention). TTL refreshed.
``<prefix>:events``  pub/sub channel (plain PUBLISH, which Cluster broadcasts to every node): the
                     id of each ask that left ``pending``. Waiters subscribe once per process.

Hand-off of a finished ask (``handoff`` field), decided atomically when it leaves ``pending``:
``waiter`` (answered while a lease was live: the waiting call takes it -> ``taken``), ``feed``
(deferred, or nobody holds a lease: it must be put on the feed -> ``sent`` once XADDed), ``none``
(closed, never deferred: nobody to tell). A ``waiter`` hand-off whose lease lapses without being
taken is moved to ``feed`` by the sweeper, so an answer is never lost when the waiting process dies.
A cancelled waiting call releases its ask: ``waiter`` or ``taken`` (its take ran but the call was
cancelled before reading the reply, so it returned nothing) -> ``feed``. Only that call releases, so
an answer a call returned is never also fed.

``ask.lua`` spells the key order and field names literally (Lua cannot import them); a change here
is a change there.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "askbridge"


class Fields:
    """Field names of the record hash (``<prefix>:{<id>}:rec``)."""

    BODY = "body"
    """JSON of the fields fixed at creation (id, questions, destination, context, answerers,
    created_at, expires_at); see :func:`bridge.store.redis_codec.body`."""
    STATUS = "status"
    """``pending``, ``answered``, ``expired`` or ``cancelled``."""
    EXPIRES = "exp"
    """``expires_at`` as a number, read by Lua to expire an ask (sweep, or a late submit)."""
    ANSWERERS = "answerers"
    """JSON list of user and group ids allowed to answer (empty: anyone), read by Lua."""
    DEFERRED = "deferred"
    """``"1"`` when the outcome goes to the feed, not a waiting call; else ``"0"``."""
    MESSAGE = "message"
    """JSON of where the question set was posted (absent until posted)."""
    ANSWERS = "answers"
    """Canonical JSON of the accepted answers (equal answers, equal text; absent until answered)."""
    BY = "by"
    """JSON of the responder whose answer was accepted."""
    BY_USER = "by_user"
    """That responder's user id, for Lua to recognise a repeated submission."""
    AT = "at"
    """When the answer was accepted."""
    CLOSED_AT = "closed_at"
    """When the ask expired or was cancelled."""
    HANDOFF = "handoff"
    """Who gets the outcome: empty while pending, then ``waiter``/``taken``/``feed``/``sent``/
    ``none`` (see the module docstring)."""
    FED = "fed"
    """Id of the feed entry that delivers this ask; later duplicate entries are dropped."""


@dataclass(frozen=True)
class Keys:
    """Key names under one ``prefix`` (several deployments can share one Redis)."""

    prefix: str = DEFAULT_PREFIX

    def rec(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:rec"

    def log(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:log"

    def lease(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:lease"

    def ask_keys(self, ask_id: str) -> list[str]:
        """The KEYS of every per-ask script call, in the order ``ask.lua`` expects."""
        return [self.rec(ask_id), self.log(ask_id), self.lease(ask_id)]

    @property
    def due(self) -> str:
        return f"{self.prefix}:due"

    @property
    def feed(self) -> str:
        return f"{self.prefix}:feed"

    @property
    def events(self) -> str:
        return f"{self.prefix}:events"
