"""An ask's terms -- what :meth:`~bridge.store.base.Store.create` fixed and a click is judged by
-- and what the store's template methods judge from them before the backend's atomic step.

Judging needs only the question set, the answerers and ``required``, none of which ever changes
after the ask is created; the status, the submissions and the answer change, and only they need
the backend's atomic step. So every store judges a click in Python, by :mod:`bridge.judging`,
from terms a backend reads once per ask and this process keeps (:class:`TermsCache`), and hands
its backend the verdicts (:class:`Judged`) rather than the rules: no rule is written a second
time in a backend (the Redis store's scripts keep only the status transitions, agreement
counting, idempotency and indexes).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from bridge.judging import FormProblem, may_answer, verdicts
from bridge.models import STORED, QuestionSet
from bridge.record import AskRecord
from bridge.store.terms import Submitting

TERMS_CACHED = 4096
"""Asks whose terms a store keeps in this process: a click costs one extra read only the first
time the process sees its ask. Each is kept as its compact JSON (:meth:`AskTerms.packed`): 4.6 MB
for 4,096 asks of four realistic questions, where their parsed question sets would take 44 MB
(a process holding 10,000 waiting calls keeps about 6 KB for each)."""


KEPT_PARSED = 64
"""Of those, the asks judged or heard created most recently are also kept parsed: a click on
an ask created moments ago -- the common case, and a person's first click on it when this
process heard the creation (``serve``: :meth:`~bridge.store.base.Store.learn_terms`) -- or a
further click on an ask just judged then reaches Redis without parsing them first (26 us for
four realistic questions, more with cold caches). At most 64 question sets without their
descriptions: about 0.7 MB of four realistic questions each."""


_DESCRIPTIONS = {"questions": {"questions": {"__all__": {"options": {"__all__": {"description"}}}}}}
"""What :meth:`AskTerms.packed` leaves out: every option's description."""


class AskTerms(BaseModel):
    """The parts of an ask fixed when it was created that judging reads: the question set and
    who may answer (``required`` is counted in the atomic step, against the submissions). Parsed
    from a stored record's body (extra fields ignored), or taken from a record (:meth:`of`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    questions: QuestionSet
    answerers: tuple[str, ...] = ()

    @classmethod
    def of(cls, record: AskRecord) -> AskTerms:
        """The terms of ``record`` (shared, not copied: both are immutable)."""
        return cls.model_construct(questions=record.questions, answerers=record.answerers)

    @classmethod
    def parsed(cls, text: str | bytes) -> AskTerms:
        """The terms in a stored body or in :meth:`packed` text (descriptions may be absent)."""
        return cls.model_validate_json(text, context=STORED)

    def packed(self) -> str:
        """Compact JSON of what judging reads, without the options' descriptions (judging
        never reads them): what :class:`TermsCache` keeps, read back by :meth:`parsed`."""
        return self.model_dump_json(exclude=_DESCRIPTIONS)


@dataclass(frozen=True)
class Judged:
    """What the template methods judged of one submission from the ask's terms, for the
    backend's atomic step, which applies what depends on the ask's current state."""

    may: bool
    """The submitter may answer (:func:`~bridge.judging.may_answer`): else refused."""
    others: Mapping[str, bool] | None
    """Each re-checked person (``verified``'s keys) -> whether they still may answer;
    ``None``: the caller cannot re-check (:func:`~bridge.judging.recheck`)."""
    problems: Mapping[int, FormProblem] = field(default_factory=dict)
    """A form's problems (:func:`~bridge.judging.form_problems`): refused as ``INVALID`` while
    the ask is pending -- a status only the atomic step knows -- and judged as any submission
    once it ended."""


def judge(
    terms: AskTerms, by: Submitting, problems: Mapping[int, FormProblem] | None = None
) -> Judged:
    """The verdicts on ``by`` that the ask's terms decide."""
    who = by.who
    return Judged(
        may=may_answer(terms.answerers, who.key, who.authorising),
        others=verdicts(terms.answerers, by.verified),
        problems=problems or {},
    )


class TermsCache:
    """The terms of the asks this process saw last, at most ``size`` of them, least recently
    used dropped first, each kept packed (:meth:`AskTerms.packed`: parsing it back costs 7 us
    for a one-click ask and 26 us for four realistic questions, where the read it saves costs a
    round trip and about 180 us of CPU), the latest ``parsed`` of them (:data:`KEPT_PARSED`)
    also as they are. Never stale: terms do not change
    after an ask is created, and an ask created anew under an id (:meth:`forget`) is created in
    this process or, past another's retention, under an id nobody reuses (ids are random).
    Thread-safe: a store is shared by the event loops of synchronous callers."""

    def __init__(self, size: int = TERMS_CACHED, parsed: int = KEPT_PARSED) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size}")
        if parsed < 0:
            raise ValueError(f"parsed must be at least 0, not {parsed}")
        self.size = size
        self.parsed = min(parsed, size)
        self._held: OrderedDict[str, str] = OrderedDict()
        self._recent: OrderedDict[str, AskTerms] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def get(self, ask_id: str) -> AskTerms | None:
        """The ask's terms if held (then the most recently used), else ``None``."""
        with self._lock:
            found = self._held.get(ask_id)
            if found is None:
                return None
            self._held.move_to_end(ask_id)
            terms = self._recent.get(ask_id)
            if terms is not None:
                self._recent.move_to_end(ask_id)
                return terms
        terms = AskTerms.parsed(found)
        with self._lock:
            if self._held.get(ask_id) is found:  # not forgotten nor put anew meanwhile
                self._keep_parsed(ask_id, terms)
        return terms

    def holds(self, ask_id: str) -> bool:
        """Whether the ask's terms are held (not counted as a use)."""
        with self._lock:
            return ask_id in self._held

    def put(self, ask_id: str, terms: AskTerms, *, ready: bool = False) -> None:
        """Hold the ask's terms, dropping the least recently used past ``size``. ``ready``:
        also keep them parsed (read back from what is held, as :meth:`get` would give them):
        for a caller on no click's way -- a creation heard -- so the ask's first click does
        not parse them."""
        packed = terms.packed()
        kept = AskTerms.parsed(packed) if ready and self.parsed else None
        with self._lock:
            self._held[ask_id] = packed
            self._held.move_to_end(ask_id)
            self._recent.pop(ask_id, None)
            while len(self._held) > self.size:
                gone, _ = self._held.popitem(last=False)
                self._recent.pop(gone, None)
            if kept is not None:
                self._keep_parsed(ask_id, kept)

    def forget(self, ask_id: str) -> None:
        """Drop the ask's terms (it is being created)."""
        with self._lock:
            self._held.pop(ask_id, None)
            self._recent.pop(ask_id, None)

    def _keep_parsed(self, ask_id: str, terms: AskTerms) -> None:
        """Keep ``terms`` parsed as the latest, dropping the least recent past ``parsed``
        (under the lock)."""
        if not self.parsed:
            return
        self._recent[ask_id] = terms
        self._recent.move_to_end(ask_id)
        while len(self._recent) > self.parsed:
            self._recent.popitem(last=False)
