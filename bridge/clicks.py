"""The one way a click is answered, on every platform: judged in time, acknowledged, told, shown.

::

    ask (bridge.asking) -> post (bridge.poster, a platform's poster) -> person clicks
        -> the platform parses its payload into a Click, and makes a Responder for it
        -> Clicks.handle(click, responder)   (this module: timing, acks, late telling, showing)
        -> Answering                          (bridge.answering: the rules, the verdict)
        -> store (atomic) -> the waiting call wakes
        -> Clicks.show(verdict)               (bridge.showing: the message shows the new state)

A platform adds only what is its own: a payload parser (its control ids through
:mod:`bridge.routing`, its clicker as a :class:`~bridge.answering.Caller`, a form's fields as
:class:`~bridge.answering.Picks`) and a :class:`Responder` that speaks its responses (an ack, an
ephemeral message, a modal). Everything both platforms need is here, once:

* **Verdict before acknowledgement**: a click is judged within a budget well under the
  platforms' 3 seconds (``ack_budget``), so the answer is stored before the platform's ack goes
  out and the ack carries the verdict where the platform allows; only a slow store falls back to
  acknowledge-then-judge, and then the person is told the outcome later (:meth:`Clicks.in_time`).
  A platform whose form opens after its ack (Slack's ``trigger_id`` outlives the ack) is
  acknowledged at once and judged in the background (:attr:`Timing.ACK_FIRST`); one whose
  answer must carry the verdict (a Slack modal's field errors) is judged within its budget, the
  store giving up by then, and out of time "may have been saved" (:attr:`Timing.VERDICT_ONLY`).
* **Open in browser**: a click asking for one's own link to answer in the browser is judged as
  opening the form, by the person's own ids (the browser looks no group up), and answered with
  the link in the verdict's words, told privately (:data:`LINK_WORDS`).
* **Malformed ids**: a control id of ours that does not parse (forged, truncated, from another
  version; a form step where the platform has none) is explained once here (``BAD_CONTROL``).
* **Show rule**: every verdict that finds the ask ended shows its final state on its message,
  and one that records one of several people's submissions lists them (:meth:`Clicks.show`).
* **Acks first**: showing verdicts (a final state, the submissions so far) runs at most
  ``show_at_once`` at a time, each starting once no click is being judged (or after ``show_wait``);
  the mark that a final state is shown follows outside that bound, with the store's next calls
  (:meth:`Showing.show <bridge.showing.Showing.show>`). A click must be answered within the
  platform's 3 s, a message update has no deadline, and one event loop runs both: on a busy or
  CPU-starved process (200 clicks a second on two shared cores) every click's own message update
  ran ahead of the next clicks' judgements, and their acks waited behind them -- 150 ms at the
  median and 0.9 s at p99 in ``bench/slack_clicks.py`` with a CPU hog beside it; with this rule 16
  ms and 39 ms. Without the bound, the updates held back all start together the moment the judging
  stops, and the next acks wait behind that wave (37-124 ms, 0.2-0.5 s). Against a real platform
  the bound is above what its rate limits let one bot update (Slack's ``chat.update``: about 50 a
  minute).
* **Background work** after the ack (showing, explanations, a form opened after the ack) is
  kept referenced until done (an unreferenced task may be collected mid-flight), its failures
  logged (nobody awaits it), and drained on shutdown, so a click answered just before a stop
  still gets its message updated (:class:`Background`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from bridge import metrics, routing
from bridge.answering import (
    BACKSTOP,
    Answering,
    Caller,
    Membership,
    Outcome,
    Picks,
    Verdict,
)
from bridge.identities import Identities
from bridge.poster import Poster
from bridge.record import AskRecord
from bridge.replies import BAD_CONTROL, MAYBE_SAVED, Replies
from bridge.showing import Showing
from bridge.store.base import Store, giving_up_after
from bridge.web_links import Links, Person, shown

log = logging.getLogger(__name__)
T = TypeVar("T")


class Kind(enum.StrEnum):
    """What a click asks for."""

    PICK = "pick"
    """One option of a single-select question (one button answers the ask)."""
    FORM = "form"
    """Open the form for the whole question set."""
    TYPED = "typed"
    """Open one question's typed answer (``Other…``)."""
    STEP = "step"
    """Open the next step of a form in several steps (its choices so far in :attr:`Click.step`)."""
    SUBMIT = "submit"
    """A form's picks, submitted."""
    LINK = "link"
    """Give the person their own link to answer in the browser (``Open in browser``)."""
    BAD = "bad"
    """A control id of ours that does not parse: explained, nothing changes."""


OPENING = frozenset({Kind.FORM, Kind.TYPED, Kind.STEP})
"""The kinds that open a form: judged as "may this person answer" (:meth:`Answering.open_form`)."""
_BAD = Verdict(Outcome.INVALID, None, BAD_CONTROL, show_final=False)
NO_BROWSER = "Answering in the browser is not set up here; answer in this message instead."
"""Told for ``Open in browser`` when this process cannot make links (its web settings differ
from the process that posted the message)."""
BROWSER_GROUPS = (
    "(The browser counts only the people named, not groups: if a group of yours may answer, "
    "answer in this message.)"
)
"""Added to a refused ``Open in browser``: the browser looks no group membership up."""
LINK_WORDS = (
    "Your own link to answer in the browser, valid {valid}; it answers as you, so "
    "keep it to yourself: {url}"
)
_LATE = Verdict(Outcome.UNAVAILABLE, None, MAYBE_SAVED, show_final=False)


@dataclass(frozen=True)
class Click:
    """A click as plain values, parsed from a platform's payload."""

    kind: Kind
    ask_id: str
    who: Caller
    question: int | None = None
    """``PICK``: the question; ``TYPED``: the question whose answer is typed."""
    option: int = 0
    """``PICK``: the option chosen."""
    picks: Mapping[int, Picks] = field(default_factory=dict)
    """``SUBMIT``: each question's picks by index, as sent (judging checks them)."""
    step: routing.Step | None = None
    """``STEP``: the form's choices so far, which the platform's next form is built from."""

    @classmethod
    def bad(cls, who: Caller) -> Click:
        return cls(Kind.BAD, "", who)

    @classmethod
    def of(cls, parsed: routing.Route | routing.Step, who: Caller) -> Click:
        """The click a control's route asks for. A form step whose choices are complete is its
        submission; one that still wants typed text opens that step."""
        if isinstance(parsed, routing.Step):
            if typing_left(parsed.choices):
                return cls(Kind.STEP, parsed.ask_id, who, step=parsed)
            picks = {i: Picks(tuple(sorted(c.selected))) for i, c in enumerate(parsed.choices)}
            return cls(Kind.SUBMIT, parsed.ask_id, who, picks=picks)
        if parsed.kind == "pick":
            return cls(Kind.PICK, parsed.ask_id, who, parsed.question, parsed.option)
        if parsed.kind == "other":
            return cls(Kind.TYPED, parsed.ask_id, who, parsed.question)
        if parsed.kind == "web":
            return cls(Kind.LINK, parsed.ask_id, who)
        return cls(Kind.FORM, parsed.ask_id, who)

    @classmethod
    def control(cls, control_id: str, who: Caller, *, steps: bool) -> Click | None:
        """The click on the control ``control_id`` (``None``: not one of ours). ``steps``: the
        platform has forms in several steps; where it has none, a step id is not from us."""
        try:
            parsed = routing.parse(control_id)
        except routing.BadRoute:
            return cls.bad(who)
        if parsed is None:
            return None
        if isinstance(parsed, routing.Step) and not steps:
            return cls.bad(who)
        return cls.of(parsed, who)


def typing_left(choices: tuple[routing.Choice, ...]) -> bool:
    """A form in progress still wants typed text: a question without a choice, or one whose
    person asked to type an answer as well."""
    return any(not c.selected or c.typed for c in choices)


class Timing(enum.Enum):
    """When a platform answers a click relative to its verdict."""

    JUDGE_FIRST = "judge first"
    """Judged within the budget, then answered with the verdict; out of time, acknowledged at
    once and the verdict told later."""
    ACK_FIRST = "ack first"
    """Answered already: the platform acked the click on arrival (Slack's ack of a button that
    opens a modal carries nothing; the modal opens by its ``trigger_id``, valid 3 s). Judged in
    the background within the budget; out of time, acknowledged with a placeholder (a loading
    modal) that the verdict replaces later."""
    VERDICT_ONLY = "verdict only"
    """The answer must carry the verdict: judged within the budget (the store gives up by then,
    withdrawing what it did not send); out of time, the answer is that it may have been saved."""


class Responder(Protocol):
    """How one click is answered on its platform: made by the platform for each click, used
    once by :meth:`Clicks.handle`."""

    @property
    def timing(self) -> Timing: ...

    @property
    def budget(self) -> float | None:
        """Seconds the judgement may take before the click is answered without it; ``None``:
        the entry point's ``ack_budget``."""
        ...

    async def acknowledge(self) -> None:
        """Answer the click now, without its verdict (an ack, a deferred response, a loading
        modal): the verdict is told later."""
        ...

    async def respond(self, verdict: Verdict) -> bool:
        """Answer the click with ``verdict`` (a refusal, an acceptance). ``True`` when its words
        went with the answer; ``False`` when they are still to be told (:meth:`tell`)."""
        ...

    async def tell(self, verdict: Verdict) -> None:
        """Tell the person ``verdict``'s words after the click was answered (an ephemeral
        message, a follow-up)."""
        ...

    async def open_form(self, record: AskRecord) -> None:
        """Show the form for ``record`` (in time: as the answer; late: where the platform still
        allows it), or explain why it cannot be shown."""
        ...


class Background:
    """The tasks that follow one receiver's clicks (see "background work" in the module)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after the click's answer; kept referenced until done, drained on
        shutdown, and any failure logged."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("work after a click failed", exc_info=task.exception())

    async def drain(self, within: float = 5.0) -> None:
        """Let work in progress finish (verdicts, showings, explanations) on shutdown."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while self._tasks and loop.time() < deadline:  # work may spawn more (a late showing)
            await asyncio.wait(set(self._tasks), timeout=deadline - loop.time())


class Clicks:
    """The entry point of one platform's clicks: ``answering`` judges them; the timing, the
    answers, what the messages show (``showing``) and the work that follows are this object's.

    ``ack_budget``: seconds a judgement may take before the click is answered without its
    verdict; ``show_at_once`` and ``show_wait``: see "acks first" in the module docstring.
    ``links``: what makes a person's link for ``Open in browser`` (``None``: the web platform is
    off here, and such a click is told so)."""

    def __init__(
        self,
        answering: Answering,
        *,
        ack_budget: float = 1.5,
        show_at_once: int = 4,
        show_wait: float = 1.0,
        links: Links | None = None,
    ) -> None:
        self.answering = answering
        self.links = links
        self.showing = Showing(answering.store, answering.poster)
        self.background = Background()
        self.ack_budget = ack_budget
        self.show_wait = show_wait
        self._judging = 0
        """Clicks being judged right now (in :meth:`in_time`); showing verdicts waits for none."""
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._show_slots = asyncio.Semaphore(show_at_once)

    async def handle(self, click: Click, responder: Responder) -> None:
        """Answer ``click`` through ``responder`` by its :class:`Timing`: judge it, answer it in
        time or acknowledge it and tell later, and show what the verdict changed."""
        if click.kind is Kind.BAD:
            log.warning("refused a malformed control id from %s", click.who.user_id)
            await self._answer(responder, _BAD)
            return
        if responder.timing is Timing.ACK_FIRST:
            self.background.spawn(self._answer_after_ack(click, responder))
            return
        if responder.timing is Timing.VERDICT_ONLY:
            verdict = await self._within(click, self._budget(responder.budget))
            await self._answer(responder, verdict)
            self.show(verdict)
            return

        async def late(verdict: Verdict) -> None:
            await self._tell(responder, verdict)

        judging = self.judge(click)
        budget = responder.budget
        found = await self.in_time(judging, ack=responder.acknowledge, late=late, budget=budget)
        if found is not None:
            await self._answer(responder, found)
            self.show(found)

    def _budget(self, budget: float | None) -> float:
        return self.ack_budget if budget is None else budget

    def judge(self, click: Click) -> Coroutine[Any, Any, Verdict]:
        """The judgement ``click`` asks for."""
        answering = self.answering
        if click.kind is Kind.PICK:
            return answering.pick(click.ask_id, click.question or 0, click.option, click.who)
        if click.kind is Kind.SUBMIT:
            return answering.submit_form(click.ask_id, click.who, click.picks)
        if click.kind is Kind.LINK:
            return self._link(click)
        question = click.question if click.kind is Kind.TYPED else None
        return answering.open_form(click.ask_id, click.who, question)

    async def _link(self, click: Click) -> Verdict:
        """``Open in browser``: judged as opening the form (pending, and this person may answer
        it); then their own link, bound to their identity on this platform, so the browser
        answers exactly as a click here would. Judged by the person's own ids without their
        groups, as the browser judges them (it looks no membership up): someone allowed only
        through a group is told to answer in the message instead of getting a link that
        refuses them."""
        opened = await self.answering.open_form(click.ask_id, replace(click.who, groups=()))
        if opened.outcome is Outcome.NOT_ALLOWED and opened.explain:
            return replace(opened, explain=f"{opened.explain} {BROWSER_GROUPS}")
        if opened.outcome is not Outcome.OPEN:
            return opened
        if self.links is None:
            return replace(opened, outcome=Outcome.INVALID, explain=NO_BROWSER)
        who = click.who
        person = Person(self.answering.poster.platform, who.user_id, who.name or who.user_id)
        url = self.links.ask_url(click.ask_id, person)
        log.info("gave %s a browser link to ask %s: %s", who.user_id, click.ask_id, shown(url))
        # told privately like any verdict's words (a URL we made, never model text)
        minutes = max(1, round(self.links.ttl / 60))
        valid = f"{minutes} minute{'' if minutes == 1 else 's'}"
        words = LINK_WORDS.format(valid=valid, url=url)
        return replace(opened, outcome=Outcome.LINK, explain=words)

    async def _answer(self, responder: Responder, verdict: Verdict) -> None:
        """Answer in time: the form when one may be shown, else the verdict (its words told
        after, in the background, when the answer cannot carry them)."""
        if verdict.outcome is Outcome.OPEN and verdict.record is not None:
            await responder.open_form(verdict.record)
        elif not await responder.respond(verdict) and verdict.explain:
            self.background.spawn(responder.tell(verdict))

    async def _tell(self, responder: Responder, verdict: Verdict) -> None:
        """The verdict of a click answered without it."""
        if verdict.outcome is Outcome.OPEN and verdict.record is not None:
            await responder.open_form(verdict.record)
        elif verdict.explain:
            await responder.tell(verdict)

    async def _answer_after_ack(self, click: Click, responder: Responder) -> None:
        work = asyncio.ensure_future(self.judge(click))
        done, _ = await asyncio.wait({work}, timeout=self._budget(responder.budget))
        if done:
            await self._answer(responder, work.result())
        else:
            await responder.acknowledge()
            await self._tell(responder, await work)
        self.show(work.result())

    async def _within(self, click: Click, budget: float) -> Verdict:
        """The verdict within ``budget``, the store giving up by then (it withdraws what it did
        not send); out of time, "your answer may have been saved"."""
        with giving_up_after(budget):
            try:
                async with asyncio.timeout(budget + BACKSTOP):
                    return await self.judge(click)
            except TimeoutError:
                return _LATE

    async def in_time(
        self,
        judging: Coroutine[Any, Any, Verdict],
        *,
        ack: Callable[[], Awaitable[object]],
        late: Callable[[Verdict], Awaitable[None]],
        budget: float | None = None,
    ) -> Verdict | None:
        """Judge before the platform's ack when the store answers within ``budget`` (default
        ``ack_budget``).

        Returns the verdict when it came in time: the caller acknowledges (with the verdict, where
        the platform allows) and the answer is already stored. Otherwise calls ``ack()`` at once,
        lets the judgement finish in the background, hands its verdict to ``late`` (which tells
        the person), shows it, and returns ``None``."""
        started = time.monotonic()
        work = asyncio.ensure_future(judging)
        self._judging += 1
        self._quiet.clear()
        try:
            done, _ = await asyncio.wait({work}, timeout=self._budget(budget))
        finally:
            self._judging -= 1
            if not self._judging:
                self._quiet.set()
        if done:
            verdict = work.result()
            metrics.acked(metrics.platform_of(verdict.record), time.monotonic() - started)
            return verdict
        await ack()
        metrics.acked(metrics.UNKNOWN, time.monotonic() - started)
        self.background.spawn(self._finish_late(work, late))
        return None

    async def _finish_late(
        self, work: asyncio.Future[Verdict], late: Callable[[Verdict], Awaitable[None]]
    ) -> None:
        verdict = await work
        log.info("slow click on ask %s judged after its ack: %s", _ask_of(verdict), verdict.outcome)
        await late(verdict)
        self.show(verdict)

    def show(self, verdict: Verdict) -> None:
        """Show the ask's new state on its message in the background (:meth:`Showing.show
        <bridge.showing.Showing.show>`) if the verdict found it ended (its final state) or
        recorded one of several people's submissions (the pending message lists them); once no
        click is being judged, or ``show_wait`` from now (acks first, see the module)."""
        if (verdict.show_final or verdict.show_progress) and verdict.record is not None:
            turn = self._turn()
            self.background.spawn(
                self.showing.show(verdict.record, claimed=verdict.claimed, turn=turn)
            )

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """A showing's turn to update messages: one of ``show_at_once``, once no click is being
        judged or ``show_wait`` passed (acks first, see the module)."""
        async with self._show_slots:
            if self._judging:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.show_wait):
                        await self._quiet.wait()
            yield

    async def drain(self, within: float = 5.0) -> None:
        """Let clicks in flight finish (verdicts, showings, explanations) on shutdown."""
        await self.background.drain(within)


def _ask_of(verdict: Verdict) -> str:
    return verdict.record.id if verdict.record is not None else "?"


def answer_clicks(
    store: Store,
    poster: Poster,
    replies: Replies,
    *,
    membership: Membership | None = None,
    identities: Identities | None = None,
    store_timeout: float = 5.0,
    ack_budget: float = 1.5,
    links: Links | None = None,
) -> Clicks:
    """The click entry point of one platform's receiver: judged by ``store`` (within
    ``store_timeout``), shown through ``poster``, explained in ``replies``' words, with
    the platform's group ``membership`` lookup (see :class:`~bridge.answering.Answering`), and
    ``links`` for ``Open in browser`` (see :class:`Clicks`). Every receiver builds its entry
    point here, alike."""
    answering = Answering(
        store,
        poster,
        replies,
        membership=membership,
        identities=identities,
        store_timeout=store_timeout,
    )
    return Clicks(answering, ack_budget=ack_budget, links=links)
