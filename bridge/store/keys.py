"""THE Redis key scheme of ask-bridge, in one place.

Per ask ``<id>`` (every key carries the hash tag ``{<id>}``, so one ask lives in one Cluster hash
slot and one Lua script can change all of it atomically):

``<prefix>:{<id>}:rec``     hash: the record. ``body`` (JSON of the fields fixed at creation),
                            ``status``, ``exp`` (expires_at), ``answerers`` (JSON list, read by
                            Lua), ``deferred`` ("0"/"1"), ``message``, ``answers``, ``by`` (JSON
                            responder), ``by_user``, ``at``, ``closed_at``, ``handoff`` and
                            ``fed`` (see below). TTL: until ``expires_at`` + retention while
                            pending, then retention.
``<prefix>:{<id>}:log``     list: the audit trail, JSON events oldest first, capped. Same TTL.
``<prefix>:{<id>}:drafts``  hash: user id -> that person's partial selections (JSON). Same TTL;
                            deleted when the ask closes.
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
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "askbridge"


@dataclass(frozen=True)
class Keys:
    """Key names under one ``prefix`` (several deployments can share one Redis)."""

    prefix: str = DEFAULT_PREFIX

    def rec(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:rec"

    def log(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:log"

    def drafts(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:drafts"

    def lease(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:lease"

    def ask_keys(self, ask_id: str) -> list[str]:
        """The KEYS of every per-ask script call, in the order ``ask.lua`` expects."""
        return [self.rec(ask_id), self.log(ask_id), self.drafts(ask_id), self.lease(ask_id)]

    @property
    def due(self) -> str:
        return f"{self.prefix}:due"

    @property
    def feed(self) -> str:
        return f"{self.prefix}:feed"

    @property
    def events(self) -> str:
        return f"{self.prefix}:events"
