"""The Lua scripts, one per operation, and the typed arguments each one takes.

Every change to one ask is one script call over that ask's keys (:mod:`bridge.store.redis`). Each
operation has its own script, ``lua/<op>.lua``, built as ``lua/lib/header.lua`` (the KEYS and the
six ARGV every op takes, as named locals), ``lua/lib/core.lua``, the shared parts it needs
(``lua/lib/``: an op that indexes the ask for the sweeper takes ``indexed.lua``, which names the
three ARGV of :class:`Due` next, and the op that submits takes ``submission.lua``, which names
the ARGV of :class:`Submission` after those) and its own file, which starts by naming the rest of
its ARGV. Here each op is a :class:`Call` subclass whose fields are those names in that order, so
the Python side builds KEYS and ARGV as the script reads them;
``tests/bridge/store/test_scripts.py`` parses every header and checks that the two agree, name
for name and position for position.

A call travels as ``EVALSHA`` of its script's SHA (the scripts are small and loaded once per
server; one that lost them -- a restart, ``SCRIPT FLUSH`` -- is sent :data:`SOURCES` again,
:meth:`~bridge.store.redis.connected.Connected._send_scripts`). The op's name stays the first ARGV:
it names the call on the wire (``MONITOR``, the slow log, the fault tests' proxies).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib.resources import files
from typing import Any, ClassVar, NamedTuple, TypeVar

from bridge.record import MessageRef
from bridge.store.redis.connect import Outgoing

LUA = files("bridge.store.redis").joinpath("lua")
"""The scripts' directory: ``<op>.lua`` for each op, the shared parts in ``lib/``."""


class Head(NamedTuple):
    """The ARGV every script takes first (``lua/lib/header.lua``)."""

    op: str
    now: str
    """Seconds, as JSON number text (``repr`` of a float)."""
    channel: str
    """The shared events channel, heard only by a waiter from before per-process channels."""
    ask_id: str
    retention_ms: int
    noise_cap: int


class AskKeys(NamedTuple):
    """The ask's own keys, in one hash slot: KEYS 1-5 (:meth:`~bridge.store.keys.Keys.ask_keys`)."""

    rec: str
    log: str
    lease: str
    noise: str
    wakers: str


class SharedKeys(NamedTuple):
    """KEYS 6-8, global keys a script writes only where one script may (never on Cluster, where
    they live in other slots and the caller writes them: :mod:`bridge.store.redis.indexes`)."""

    pending_index: str
    ended_stream: str
    created_index: str


class Due(NamedTuple):
    """The ask's place in the due index, ARGV 7-9 of an :attr:`Call.INDEXED` op
    (``lua/lib/indexed.lua``), written by the script where the index is its KEYS[9] (never on
    Cluster): the score, how to set it (``nx``, ``xx`` or ``''``), the index's TTL (s)."""

    due_score: str
    due_mode: str
    due_ttl: int


UNINDEXED = Due("", "", 0)
"""The :class:`Due` of an indexed op's call that leaves the index alone (no KEYS[9]: on Cluster,
or a claim that brings no message): it holds the place of the ARGV the script does not read."""
DUE_KEY = "due_index"
"""The name ``lua/lib/indexed.lua`` gives KEYS[9]."""
INDEXED_LIB = "indexed"
"""The shared part every :attr:`Call.INDEXED` op's script takes, after ``lib/core.lua``."""


@dataclass(frozen=True)
class Call:
    """One operation's own arguments, after :class:`Head` (and an indexed op's :class:`Due`),
    named and ordered as its script's headers name them. A subclass per op; a field with ``rest``
    in its metadata takes every ARGV from its position on."""

    OP: ClassVar[str]
    LIBS: ClassVar[tuple[str, ...]] = ()
    """The shared parts its script needs besides those of every op (and ``lib/indexed.lua`` of
    an indexed one: :func:`libs`), in order."""
    INDEXED: ClassVar[bool] = False
    """Whether the op may write the due index itself (:class:`Due`, before its own ARGV)."""
    MORE_KEYS: ClassVar[str | None] = None
    """The script's name for KEYS past the shared ones, if it takes more asks' keys (five each,
    as :class:`AskKeys`)."""

    def args(self) -> list[Any]:
        out: list[Any] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("rest"):
                out.extend(value)
            else:
                out.append(value)
        return out


CALLS: dict[str, type[Call]] = {}
"""Every op's :class:`Call` subclass, by op name."""


_C = TypeVar("_C", bound=type[Call])


def _op(cls: _C) -> _C:
    """Register an op's call (a class decorator, after ``@dataclass``)."""
    CALLS[cls.OP] = cls
    return cls


@_op
@dataclass(frozen=True)
class Settle(Call):
    """A sweep's visit to asks (``settle.lua``): the first ask's keys and id as every op takes
    them; the others' five keys each after KEYS 8, and their ids in :attr:`other_ids`."""

    OP = "settle"
    MORE_KEYS = "other_keys"
    hold: float
    interval: float
    other_ids: tuple[str, ...] = field(default=(), metadata={"rest": True})


@_op
@dataclass(frozen=True)
class Create(Call):
    OP = "create"
    INDEXED = True
    body: str
    expires_at: str
    answerers: str
    deferred: str
    ttl_ms: int
    lease_ms: int
    detail: str
    waker: str
    required: int
    pending_member: str
    terms_channel: str
    """Where the processes that judge clicks hear of the new ask (``''``: nowhere, on
    Cluster, where a plain PUBLISH crosses every node)."""


@_op
@dataclass(frozen=True)
class Message(Call):
    OP = "message"
    INDEXED = True
    message: str
    detail: str
    brief: str


@_op
@dataclass(frozen=True)
class IndexCreated(Call):
    OP = "index_created"


@_op
@dataclass(frozen=True)
class Event(Call):
    OP = "event"
    kind: str
    user: str
    detail: str


@dataclass(frozen=True)
class Submission(Call):
    """What a submission takes first, named by ``lua/lib/submission.lua``: who submits (one
    submission per :attr:`~bridge.record.Responder.key`), under which attempt, and what the
    ask's terms said of them (:class:`~bridge.store.ask_terms.Judged`)."""

    LIBS: ClassVar[tuple[str, ...]] = ("submission",)
    INDEXED = True
    key: str
    may: str
    """``'1'``: the submitter may answer."""
    responder: str
    user: str
    attempt: str
    rechecked: str
    """:func:`rechecked_arg`."""


@_op
@dataclass(frozen=True)
class Submit(Submission):
    OP = "submit"
    LIBS = ("submission", "showing")
    answers: str
    detail: str
    typed: str
    invalid: str
    """``'1'``: a form with problems, refused while the ask is pending."""
    show: str
    """The render interval (s) when the caller shows what the submission finds ended, so the
    step claims that showing (:attr:`~bridge.store.terms.Submitting.claim`); ``''``: not."""


@_op
@dataclass(frozen=True)
class Close(Call):
    OP = "close"
    INDEXED = True
    closed_as: str
    by: str


@_op
@dataclass(frozen=True)
class Defer(Call):
    OP = "defer"
    lease_ms: int


@_op
@dataclass(frozen=True)
class Take(Call):
    OP = "take"
    lease_ms: int


@_op
@dataclass(frozen=True)
class Watch(Call):
    OP = "watch"
    lease_ms: int
    waker: str


@_op
@dataclass(frozen=True)
class Observe(Call):
    OP = "observe"
    waker: str


@_op
@dataclass(frozen=True)
class Confirm(Call):
    OP = "confirm"


@_op
@dataclass(frozen=True)
class Release(Call):
    OP = "release"
    INDEXED = True


@_op
@dataclass(frozen=True)
class Sent(Call):
    OP = "sent"


@_op
@dataclass(frozen=True)
class Told(Call):
    OP = "told"


@_op
@dataclass(frozen=True)
class Deliver(Call):
    OP = "deliver"
    entry: str
    marker: str


@_op
@dataclass(frozen=True)
class Acked(Call):
    OP = "acked"
    entry: str


@_op
@dataclass(frozen=True)
class Claim(Call):
    OP = "claim"
    LIBS = ("showing",)
    INDEXED = True
    interval: float
    token: str
    message: str
    detail: str
    unshown: str
    brief: str


@_op
@dataclass(frozen=True)
class Rendered(Call):
    OP = "rendered"
    INDEXED = True  # drops a settled ask from the index (never given a place in it)


@_op
@dataclass(frozen=True)
class Timer(Call):
    OP = "timer"
    LIBS = ("followups",)
    retry: float
    token: str
    tries: int


@_op
@dataclass(frozen=True)
class TimerDone(Call):
    OP = "timer_done"
    LIBS = ("followups",)
    step: str
    message: str
    detail: str


def libs(call: type[Call]) -> tuple[str, ...]:
    """The shared parts of ``call``'s script, in the order it is built from them."""
    return ("header", "core", *((INDEXED_LIB,) if call.INDEXED else ()), *call.LIBS)


def _build(op: str, call: type[Call]) -> str:
    parts = [LUA.joinpath("lib", f"{name}.lua").read_text() for name in libs(call)]
    return "\n".join([*parts, LUA.joinpath(f"{op}.lua").read_text()])


SOURCES: dict[str, str] = {op: _build(op, cls) for op, cls in CALLS.items()}
"""Each op's whole script, as the server runs it."""
SHAS: dict[str, str] = {op: hashlib.sha1(text.encode()).hexdigest() for op, text in SOURCES.items()}


def argv(head: Head, call: Call, due: Due | None = None) -> list[Any]:
    """A script call's ARGV: :class:`Head`, an indexed op's :class:`Due` (:data:`UNINDEXED`
    if none is given), then the op's own."""
    if not call.INDEXED:
        if due is not None:
            raise ValueError(f"op {call.OP!r} takes no due index")
        return [*head, *call.args()]
    return [*head, *(due or UNINDEXED), *call.args()]


def script_call(op: str, keys: list[str], args: list[Any]) -> Outgoing:
    """One call of ``op``'s script by its SHA, on its way (:class:`~.connect.Outgoing`)."""
    return Outgoing(("EVALSHA", SHAS[op], len(keys), *keys, *args))


def posted(message: MessageRef) -> tuple[str, str]:
    """Where an ask was posted as the record's JSON, and as the ``posted`` event's detail."""
    text = message.model_dump_json()
    return text, f'{{"message":{text}}}'


def rechecked_arg(others: Mapping[str, bool] | None) -> str:
    """The verdicts on re-checked people (:attr:`~bridge.store.ask_terms.Judged.others`) as
    ``lua/lib/submission.lua`` takes them: ``''`` when the caller cannot re-check anyone's
    authority, else a JSON object of each key's verdict (``{}``: nobody checked yet)."""
    if others is None:
        return ""
    return json.dumps(dict(others), ensure_ascii=False)
