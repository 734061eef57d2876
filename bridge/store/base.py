"""The store contract: what every pending-ask store guarantees, whichever backend holds the state.

Two implementations pass one contract test suite: ``MemoryStore`` (the embedded default, one
process) and ``RedisStore`` (any number of processes against one Redis, Sentinel or Cluster).
Every state change that must happen once -- the first complete answer, an expiry, a cancel -- is a
single atomic step in the backend, so replicas can race freely.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any

# The answer vocabulary and the form rules live in bridge.judging, the contract's terms in
# bridge.store.terms; re-exported here, where callers and other backends import them from.
from bridge.judging import MAX_TYPED as MAX_TYPED
from bridge.judging import FormProblem as FormProblem
from bridge.judging import Picks as Picks
from bridge.judging import form_answers, picked_answer
from bridge.judging import form_problems as form_problems
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, MessageRef, Responder
from bridge.store.ask_terms import AskTerms, Judged, TermsCache, judge
from bridge.store.terms import CREATION_FIELDS as CREATION_FIELDS
from bridge.store.terms import DEFAULT_CLAIM_IDLE as DEFAULT_CLAIM_IDLE
from bridge.store.terms import DEFAULT_ENDED_IDLE as DEFAULT_ENDED_IDLE
from bridge.store.terms import DEFAULT_LEASE_TTL as DEFAULT_LEASE_TTL
from bridge.store.terms import DEFAULT_NOISE_CAP as DEFAULT_NOISE_CAP
from bridge.store.terms import DEFAULT_RENDER_INTERVAL as DEFAULT_RENDER_INTERVAL
from bridge.store.terms import DEFAULT_RETENTION as DEFAULT_RETENTION
from bridge.store.terms import DEFAULT_TIMER_RETRY as DEFAULT_TIMER_RETRY
from bridge.store.terms import FEED_OBSERVERS as FEED_OBSERVERS
from bridge.store.terms import NOISE_DROPPED as NOISE_DROPPED
from bridge.store.terms import NOISE_KINDS as NOISE_KINDS
from bridge.store.terms import SWEEP_BATCH as SWEEP_BATCH
from bridge.store.terms import TIMER_TRIES as TIMER_TRIES
from bridge.store.terms import Delivery as Delivery
from bridge.store.terms import DuplicateAsk as DuplicateAsk
from bridge.store.terms import Ended as Ended
from bridge.store.terms import HistoryEvent as HistoryEvent
from bridge.store.terms import PageQuery as PageQuery
from bridge.store.terms import PendingPage as PendingPage
from bridge.store.terms import StoreSettings as StoreSettings
from bridge.store.terms import StoreUnavailable as StoreUnavailable
from bridge.store.terms import SubmitOutcome as SubmitOutcome
from bridge.store.terms import SubmitResult as SubmitResult
from bridge.store.terms import Submitting as Submitting
from bridge.store.terms import TimerClaim as TimerClaim
from bridge.store.terms import check_batch_size, page_cursor, page_key, parse_cursor
from bridge.store.terms import creation_text as creation_text
from bridge.store.terms import giving_up_after as giving_up_after


class Store(ABC):
    """Durable pending-ask state shared by every process of a deployment.

    Every operation of a networked store may raise :class:`StoreUnavailable`; bad arguments raise
    ``ValueError``. Unknown or retention-expired asks are not errors: reads give ``None`` or empty.

    The semantics every backend shares live here, as template methods (the pattern of saq's
    ``Queue``): the settings, filling in a submission's defaults (:class:`Submitting`), judging
    a click or form by :mod:`bridge.judging` before it is submitted, from the ask's terms
    (:mod:`bridge.store.ask_terms`: read once per ask and kept). A backend implements the steps
    that must be atomic, each one step of its own (under a lock, in one script), and
    :meth:`_terms`.
    """

    def __init__(
        self,
        *,
        retention: float = DEFAULT_RETENTION,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        claim_idle: float = DEFAULT_CLAIM_IDLE,
        noise_cap: int = DEFAULT_NOISE_CAP,
        render_interval: float = DEFAULT_RENDER_INTERVAL,
        timer_retry: float = DEFAULT_TIMER_RETRY,
        ended_idle: float = DEFAULT_ENDED_IDLE,
    ) -> None:
        """The settings every backend shares (each attribute says what it is for)."""
        self.retention = retention
        """Seconds a finished ask is kept."""
        self.lease_ttl = lease_ttl
        """Seconds a waiting call's lease outlives its last sign of life."""
        self.claim_idle = claim_idle
        """Seconds a delivery of the answers feed (:meth:`feed`) may sit unacknowledged at one
        consumer before another takes it over."""
        if noise_cap < 1:
            raise ValueError(f"noise_cap must be at least 1, not {noise_cap}")
        self._noise_cap = noise_cap
        """Noise events an audit trail keeps (:data:`NOISE_KINDS`)."""
        self.render_interval = render_interval
        """Seconds before a claim to show an ended ask (:meth:`claim_render`) may be made
        again."""
        self.timer_retry = timer_retry
        """Seconds before a claimed follow-up step (:meth:`claim_timers`) may be claimed again."""
        self.ended_idle = ended_idle
        """Seconds a delivery of the ended asks (:meth:`ended`) may sit unacknowledged (and
        unkept) at one consumer before another takes it over."""
        self._terms_cache = TermsCache()
        """The terms of the asks this process judged last (:meth:`_terms_of`)."""

    async def create(self, record: AskRecord) -> None:
        """Persist a new pending ask (and its ``created`` event), indexed for the sweeper.

        Safe to retry: a repeated create of the same record (equal :data:`CREATION_FIELDS`: the
        first attempt ran but its reply was lost) succeeds and changes nothing. Raises
        :class:`DuplicateAsk` only if the ask stored under that id differs (within its retention).
        """
        self._terms_cache.forget(record.id)  # an id past its retention, made anew: new terms
        await self._create(record)

    @abstractmethod
    async def _create(self, record: AskRecord) -> None:
        """:meth:`create`: the backend's one atomic step."""

    @abstractmethod
    async def _terms(self, ask_id: str) -> AskTerms | None:
        """The ask's terms as stored (one read); ``None`` if unknown or past retention."""

    async def _terms_of(self, ask_id: str) -> AskTerms | None:
        """The ask's terms, read from the backend only the first time this process judges the
        ask (while it stays among the :data:`~bridge.store.ask_terms.TERMS_CACHED` latest): they
        never change after :meth:`create`. An unknown ask is not kept."""
        terms = self._terms_cache.get(ask_id)
        if terms is None:
            terms = await self._terms(ask_id)
            if terms is not None:
                self._terms_cache.put(ask_id, terms)
        return terms

    async def _unsubmitted(
        self,
        ask_id: str,
        outcome: SubmitOutcome,
        problems: Mapping[int, FormProblem] | None = None,
    ) -> SubmitResult:
        """A verdict the terms decided before anything was submitted (``INVALID``, ``GROUPS``),
        with the record as it stands (read now: these are rare, and record nothing); a form's
        ``problems`` make it ``INVALID`` instead while the ask is pending."""
        record = await self.get(ask_id)
        if record is None:
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        if problems and record.status is AskStatus.PENDING:
            return SubmitResult(SubmitOutcome.INVALID, record, problems)
        return SubmitResult(outcome, record)

    @abstractmethod
    async def get(self, ask_id: str) -> AskRecord | None:
        """The record, or ``None`` if unknown or past retention."""

    @abstractmethod
    async def set_message(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        """Remember where the question set was posted (and log ``posted``, once per message).

        Also for an ask that already ended (a click beat this call): then its final state is due
        to be shown, and the sweeper shows it if the caller does not (see :meth:`sweep`)."""

    async def message_posted(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        """:meth:`set_message` for the call that posted the ask, which needs the record only if
        a click beat it: the ask already ended (the call shows the final state), or it is
        pending with submissions (an ask several people must agree on: the call shows them,
        since the click's handler found no message to show them on). ``None`` otherwise, and a
        networked store then builds no record (100,000 calls posting at once would each build
        one, only to drop it)."""
        record = await self.set_message(ask_id, message)
        if record is None or (record.status is AskStatus.PENDING and not record.submissions):
            return None
        return record

    @abstractmethod
    async def defer(self, ask_id: str) -> AskRecord | None:
        """Mark the ask deferred: its answer goes to the answers feed, not a waiting call.

        Atomic with :meth:`submit`: if the ask was already answered, the answered record comes
        back and the caller should use the answer instead of deferring.
        """

    async def submit(
        self,
        ask_id: str,
        who: Responder,
        answers: Sequence[Answer],
        *,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
        claim: bool = False,
    ) -> SubmitResult:
        """Record a complete answer exactly once; see :class:`SubmitOutcome` for the verdicts.

        An ask that needs ``required`` K >= 2 people (:class:`~bridge.record.AskRecord`) records
        the submission in ``submissions`` (replacing the person's earlier one) and is answered,
        in this same atomic step, by the submission that makes K equal untyped submissions:
        ``ACCEPTED``; fewer agree -> ``RECORDED``; the person's current submission sent again ->
        ``REPEATED`` (nothing changes). A person's first recorded submission logs ``submitted``,
        each change of it ``resubmitted`` (noise: capped, see :data:`NOISE_KINDS`); the one
        that makes K logs ``answered``, its detail naming the ``agreed`` user ids.

        ``attempt`` names this submission (default: a fresh random token per call). A retry of
        the very same attempt -- a networked store re-sends it when the reply was lost -- gets
        the verdict the attempt got, ``ACCEPTED`` (or ``RECORDED`` while the ask is pending), not
        ``REPEATED``; a separate submission of the same answer by the same person (another
        attempt) stays ``REPEATED``.

        Expiry is enforced here too, not only by a sweep: an ask still ``pending`` past its
        ``expires_at`` is expired by this very step, exactly as :meth:`sweep` would (status,
        ``closed_at``, ``expired`` event, hand-off, waiters woken, due index), and the verdict is
        ``CLOSED``. No sweep will return that ask, so *the caller* re-renders it as ended.
        ``now`` (default: the clock) is the time the step runs at, like :meth:`sweep`'s.

        Authority at the moment it counts: ``verified`` (a caller able to re-check who may
        answer, as :class:`~bridge.answering.Answering` is: group and role lookups cached a
        minute) maps submission keys to their people's authorising ids as they are now (user id,
        linked ids, current groups; :attr:`~bridge.record.Responder.authorising`); ``{}`` on a
        first try. When this submission would make K agree and one of the others it would count
        is not in ``verified``, nothing changes and the verdict is ``VERIFY``, naming them in
        :attr:`SubmitResult.verify`: re-check each, then submit again with them. A counted
        submission whose ids no longer authorise its person is withdrawn first (a ``withdrawn``
        event; shown, never counted: :attr:`~bridge.record.Submission.withdrawn`) -- someone
        removed from the answering group after submitting no longer approves. ``None``: the
        caller cannot re-check; submissions count as they were made.

        ``claim``: the caller shows the ask's final state when the verdict finds it ended (the
        show rule, :class:`~bridge.answering.Verdict`), so the step also claims that showing
        as :meth:`claim_render` would (the ask ended, has a message, nobody claimed it within
        the render interval), under the attempt's token: :attr:`SubmitResult.claimed`, and
        the caller shows :attr:`SubmitResult.record` as it is -- a click's showing costs a
        networked store no round trip of its own but :meth:`mark_rendered`, and that one
        rides the next click's while clicks keep coming (its ``together``).
        """
        by = Submitting.of(who, now, attempt, verified, claim=claim)
        terms = await self._terms_of(ask_id)
        if terms is None:
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        return await self._submit(ask_id, by, answers, judge(terms, by))

    @abstractmethod
    async def _submit(
        self, ask_id: str, by: Submitting, answers: Sequence[Answer], judged: Judged
    ) -> SubmitResult:
        """:meth:`submit` with its defaults filled in and its terms judged: the backend's one
        atomic step, which applies ``judged`` to the ask as it stands (expiry, status, a form's
        problems while pending, agreement and re-checks by :mod:`bridge.judging`, where the
        outcome goes), and claims the showing of an ended ask's final state when ``by.claim``
        (as :meth:`_claim_render` does, under ``by.attempt``). ``INVALID`` carries
        ``judged.problems``."""

    async def pick(
        self,
        ask_id: str,
        who: Responder,
        question: int,
        option: int,
        *,
        groups_unknown: bool = False,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
        claim: bool = False,
    ) -> SubmitResult:
        """A one-click answer: option ``option`` of question ``question`` (from 0), built from the
        stored question set and submitted as :meth:`submit` would, in one step -- a click costs
        one round trip to a networked store (and one read of the ask's terms the first time this
        process sees the ask: :meth:`_terms_of`).

        ``INVALID`` (with the record) when the ask is not a one-click ask (one single-select
        question) or has no such question or option. ``groups_unknown``: the caller can look up
        the person's groups; a person not named among the answerers then gets ``GROUPS`` (with
        the record, whose ``answerers`` to look up) and should pick again with their groups.
        Neither records anything (nor claims). ``claim`` as for :meth:`submit`."""
        by = Submitting.of(who, now, attempt, verified, groups_unknown, claim)
        terms = await self._terms_of(ask_id)
        if terms is None:
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        answer = picked_answer(terms.questions, question, option)
        if answer is None:
            return await self._unsubmitted(ask_id, SubmitOutcome.INVALID)
        judged = judge(terms, by)
        if by.groups_unknown and not judged.may:
            return await self._unsubmitted(ask_id, SubmitOutcome.GROUPS)
        return await self._submit(ask_id, by, [answer], judged)

    async def submit_form(
        self,
        ask_id: str,
        who: Responder,
        picks: Mapping[int, Picks],
        *,
        groups_unknown: bool = False,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
        claim: bool = False,
    ) -> SubmitResult:
        """A submitted form: ``picks`` by question index, judged against the stored question set
        (:func:`form_problems`), its answers built from it (:func:`form_answers`) and submitted
        as :meth:`submit` would, in one step -- a form costs one round trip to a networked
        store, like a click (:meth:`pick`). The typed text is judged as
        :func:`~bridge.judging.typed_text` says.

        ``INVALID`` (with the record and :attr:`SubmitResult.problems`) when a *pending* ask's
        form has problems; an ended ask is judged by :meth:`submit` whatever the form says (it
        knows a repeat). ``groups_unknown`` as for :meth:`pick`. Neither records anything (nor
        claims). ``claim`` as for :meth:`submit`."""
        by = Submitting.of(who, now, attempt, verified, groups_unknown, claim)
        terms = await self._terms_of(ask_id)
        if terms is None:
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        judged = judge(terms, by, form_problems(terms.questions, picks))
        if by.groups_unknown and not judged.may:
            return await self._unsubmitted(ask_id, SubmitOutcome.GROUPS, judged.problems)
        return await self._submit(ask_id, by, form_answers(terms.questions, picks), judged)

    @abstractmethod
    async def close(
        self, ask_id: str, status: AskStatus, *, by: str | None = None
    ) -> AskRecord | None:
        """Move a *pending* ask to ``expired`` or ``cancelled``.

        Returns the record when the ask is (now) in ``status`` -- closed by this call, or already
        in that status (a retry whose first reply was lost, or a sweep that expired it first) --
        so the caller can show that final state; ``None`` when it ended otherwise (answered, or
        the other status) or is unknown.
        """

    @abstractmethod
    async def wait(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Block until the ask is no longer pending (pushed, not polled); ``None`` on timeout.

        The waiting call takes the answer (hand-off ``taken``) and must :meth:`confirm` once it
        has returned it; until then this process keeps the ask's lease alive, and should it die
        first, the sweeper moves the answer to the feed when the lease lapses. If the answer went
        to the feed instead (nobody held the ask's lease when it arrived), the record comes back
        with ``deferred=True``. Also ``None`` for an unknown ask.
        """

    @abstractmethod
    async def observe(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Block until the ask is no longer pending (woken like :meth:`wait`, never polled) and
        return it as it ended; ``None`` on timeout or for an unknown ask.

        Unlike :meth:`wait` it takes nothing and holds no lease: the outcome still goes where it
        would have gone without this call (a waiting call, or the answers feed), so any number of
        observers (``ask-bridge wait``) can watch an ask that a pipeline deferred."""

    @abstractmethod
    async def confirm(self, ask_id: str) -> None:
        """The waiting call returned the answer it took (:meth:`wait` or :meth:`defer`): the
        hand-off is done (``taken`` -> ``confirmed``), the lease dropped, nothing goes to the
        feed, and the ask's option descriptions are dropped (the call's result echoed them).
        Safe to retry; a no-op for an answer that is not ``taken``. Should this fail, the
        lease is no longer kept alive, so the answer reaches the feed (at least once)."""

    @abstractmethod
    async def release(self, ask_id: str) -> None:
        """The waiting call is gone (cancelled) without returning an answer: it goes to the feed.

        That covers an answer the call was due to take and one it already took (the store's
        take ran, even its confirm) but never returned, because the cancellation landed before
        the reply was read.
        Only the cancelled call's own cleanup may call this: a call that returned the answers
        must not, or the answer would also reach the feed.
        """

    @abstractmethod
    async def record_event(
        self, ask_id: str, kind: str, *, user_id: str | None = None, **detail: Any
    ) -> None:
        """Append to the audit trail. Noise (:data:`NOISE_KINDS`) is capped apart from the
        lifecycle events, which are never dropped."""

    @abstractmethod
    async def history(self, ask_id: str) -> list[HistoryEvent]:
        """The audit trail, in the order things happened: every lifecycle event, the newest
        noise events, and one :data:`NOISE_DROPPED` event where older noise was dropped."""

    @abstractmethod
    async def list_pending(self) -> list[AskRecord]:
        """Every pending ask."""

    async def count_pending(self, platform: str | None = None) -> int:
        """How many asks are pending (those posted to ``platform`` only, if given): for a gauge,
        read once a minute by every ``serve`` replica, so it must not read the asks themselves.
        This default counts :meth:`list_pending`; both stores override it with a count they keep."""
        found = await self.list_pending()
        return sum(1 for r in found if platform is None or r.destination.platform == platform)

    async def pending_page(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        channel: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
    ) -> PendingPage:
        """Up to ``limit`` pending asks, newest first (by ``created_at``, then id), after
        ``cursor`` (from the previous page), only those posted to ``channel`` (a
        channel or DM user id) and created within the given bounds (seconds since the epoch).
        The page's cursor is ``None`` once nothing follows (it may also lead to an empty page,
        when what follows was filtered out or ended meanwhile).

        Reads only as far as the page needs, so an operator can look at 100,000 pending asks
        without reading them all."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        after = parse_cursor(cursor) if cursor is not None else None
        return await self._pending_page(
            PageQuery(limit, after, channel, created_after, created_before)
        )

    async def _pending_page(self, query: PageQuery) -> PendingPage:
        """:meth:`pending_page` as asked, checked. This default pages over :meth:`list_pending`,
        which a store in memory can afford; a networked store reads its index page by page."""
        ordered = sorted(await self.list_pending(), key=page_key, reverse=True)
        found: list[AskRecord] = []
        for record in ordered:
            if query.after is not None and page_key(record) >= query.after:
                continue
            if query.matches(record):
                found.append(record)
                if len(found) == query.limit:
                    more = record is not ordered[-1]
                    return PendingPage(found, page_cursor(*page_key(record)) if more else None)
        return PendingPage(found, None)

    async def sweep(self, now: float | None = None) -> list[AskRecord]:
        """Expire every pending ask past ``expires_at``, finish hand-offs a dead process left,
        and return the asks whose final state should be shown now:

        * each ask this sweep expired (exactly one sweeper expires it);
        * each ended ask with a message whose final state was never shown (:meth:`mark_rendered`)
          though it ended, and any claim to show it was made, at least the render interval before
          ``now`` -- its renderer died. Overlapping sweepers may both return it: show it through
          :meth:`claim_render` (``bridge.rendering.show_final``), so exactly one does.

        ``now`` (default: the clock) decides expiry and those intervals. All of
        :meth:`sweep_batches` in one list: fine for a test or a quiet deployment; a sweeper facing
        an expiry storm takes the batches as they come instead.
        """
        found: list[AskRecord] = []
        async for batch in self.sweep_batches(now):
            for ended in batch:
                record = await self.get(ended.ask_id)
                if record is not None:
                    found.append(record)
        return found

    async def sweep_batches(
        self, now: float | None = None, *, size: int = SWEEP_BATCH
    ) -> AsyncIterator[list[Ended]]:
        """:meth:`sweep`, one bounded batch (at most ``size`` asks visited) at a time, naming
        the asks to show rather than reading their records: each batch is expired (and its
        hand-offs finished) when it is yielded, and the rest is swept as the caller asks for more
        (a networked store sweeps a few batches at once) -- so a sweeper starts showing the first
        expiries while the store expires the rest, and a storm of 100,000 never builds 100,000
        records (showing one reads it anyway, through :meth:`claim_render`)."""
        check_batch_size(size)
        batches = self._sweep_batches(time.time() if now is None else now, size)
        async with contextlib.aclosing(batches):  # a caller that stops early stops the visits
            async for batch in batches:
                yield batch

    @abstractmethod
    def _sweep_batches(self, now: float, size: int) -> AsyncGenerator[list[Ended]]:
        """:meth:`sweep_batches` with ``now`` filled in and ``size`` checked: the backend's
        visits, each batch its own atomic steps."""

    async def claim_render(
        self,
        ask_id: str,
        *,
        now: float | None = None,
        message: MessageRef | None = None,
        unshown: bool = False,
        known: AskRecord | None = None,
    ) -> AskRecord | None:
        """Claim the right to show the ask's final state on its message, atomically across
        replicas: the ask has ended, has a message, and nobody claimed it within the render
        interval -> the claim is recorded and the current record returned; else ``None``.
        ``now`` defaults to the clock. ``message``: where the ask was posted, recorded (and
        logged ``posted``) if the store does not know yet -- it ended before :meth:`set_message`,
        and only the caller knows. ``unshown``: refuse an ask already marked shown
        (:meth:`mark_rendered`) -- a sweep's claim, since the sweep may have named the ask just
        before its renderer marked it; a late click's claim re-renders a shown ask on purpose.
        ``known``: the ask as the caller holds it ended (a click's verdict, from the very step
        that ended it or found it ended): what an ended ask shows never changes after, but for
        where it was posted, so a granted claim returns it with the messages the store holds
        now, and no second record is built from the store's data (ignored when it is not this
        ask ended).

        Throttles re-renders (late clicks on an answered ask cost at most one update per interval)
        and keeps two replicas from rendering the same ending at once."""
        if known is not None and (known.id != ask_id or known.status is AskStatus.PENDING):
            known = None
        return await self._claim_render(
            ask_id, time.time() if now is None else now, message, unshown, known
        )

    @abstractmethod
    async def _claim_render(
        self,
        ask_id: str,
        now: float,
        message: MessageRef | None,
        unshown: bool,
        known: AskRecord | None,
    ) -> AskRecord | None:
        """:meth:`claim_render` with ``now`` filled in, ``known`` checked to be this ask ended:
        the backend's one atomic step."""

    @abstractmethod
    async def mark_rendered(self, ask_id: str, *, together: bool = False) -> None:
        """The final state is shown on every message of the ask (logs ``rendered`` the first
        time): the sweeper stops trying to show it. Safe to retry. ``together``: nothing waits
        on this mark but its caller (a click's showing): a networked store may hold it back
        briefly to send it with its next calls, one round trip for many (until it lands, a
        sweep would show the ask again, which is what an unmarked showing costs anyway)."""

    @abstractmethod
    async def claim_timers(self, now: float | None = None) -> list[TimerClaim]:
        """Claim every reminder and escalation due at ``now`` (default: the clock) among pending
        asks with follow-ups (:class:`~bridge.followups.FollowUps`; :mod:`bridge.followups` says
        when each is due), at most one step per ask, atomically across replicas: a step is
        claimed only while its ask is pending and the step not done, and not again until the
        timer-retry interval has passed without :meth:`timer_done` (the claimant died, or its
        post failed) -- after :data:`TIMER_TRIES` claims the step is given up. Asks that ended,
        expired or have nothing left to do leave the index here."""

    @abstractmethod
    async def timer_done(
        self, claim: TimerClaim, message: MessageRef | None = None, *, now: float | None = None
    ) -> AskRecord | None:
        """The claimed step was posted at ``now`` (default: the clock; the next reminder is due
        ``remind_after`` seconds later): log ``reminded`` or ``escalated`` (once; safe to retry),
        record an escalation's ``message`` among the ask's :attr:`~AskRecord.escalations`, and
        schedule the next step. Also when the ask ended meanwhile: the escalation's message is
        then recorded and its final state is due to be shown again (through
        :meth:`claim_render`, by the caller or a sweep). The record after it; ``None`` if the
        ask is unknown."""

    @property
    def lost_data(self) -> bool:
        """Whether this store noticed that its backend lost its data (a networked store restarted
        without persistence) since this process began using it; it also logged one error line
        then. Always ``False`` for a store that lives in this process."""
        return False

    @abstractmethod
    def feed(self, consumer: str) -> AsyncIterator[Delivery]:
        """Answers of deferred asks, delivered at least once until acknowledged."""

    @abstractmethod
    async def ack(self, delivery: Delivery) -> None:
        """Acknowledge a delivery so it is not handed out again. Its reader has the outcome now,
        so the store drops the ask's option descriptions (``bridge.store.keys``, Retention); a
        delivery read before this still has them. Safe to retry."""

    @abstractmethod
    def ended(self, consumer: str) -> AsyncIterator[Delivery]:
        """Every ask that left ``pending`` (answered, expired or cancelled, deferred or not),
        delivered at least once until acknowledged (:meth:`ack_ended`), for the outcome
        notifications (``bridge.webhooks``). Consumers share one group: each ended ask goes to one
        of them; a consumer's unacknowledged deliveries go back to it when it comes back under the
        same name, and to another consumer once idle for the store's ``ended_idle`` seconds
        (unless kept with :meth:`keep_ended`). Written when the ask ends; should the writer die
        right then, a sweep writes it (so, rarely, twice: the second is dropped at delivery)."""

    @abstractmethod
    async def ack_ended(self, delivery: Delivery) -> None:
        """Acknowledge an ended-ask delivery: it is not handed out again."""

    @abstractmethod
    async def keep_ended(self, consumer: str, deliveries: Sequence[Delivery]) -> None:
        """These deliveries are still being worked on by ``consumer``, which got them (a receiver
        that keeps failing is retried for hours): reset their idle time, so no other consumer
        takes them over."""

    async def learn_terms(self) -> None:  # noqa: B027 (optional hook: most stores read free)
        """Keep the terms of every ask created from now on, as its creation makes them known,
        so that judging its first click here needs no read of them: for a process that judges
        clicks on asks other processes create (``serve``). A store whose reads cost nothing, or
        that cannot hear of creations (Redis Cluster), reads them at the first click as
        before; so does a click that comes before its ask's terms do. Returns at once: the
        creations made before the store hears them are read when clicked."""

    async def aclose(self) -> None:  # noqa: B027 (optional hook: most stores hold nothing)
        """Release connections. Leases this process kept alive (waits, taken answers not yet
        confirmed) are no longer refreshed: they lapse as if the process had died."""
