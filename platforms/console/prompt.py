"""One ask at the terminal, from post to answer: the console's payload parser and responder.

::

    ChatHandler (bridge.asking: create, post, wait)       the prompt, beside it:
      post -> ConsolePoster prints the announcement  ->   a FORM click: may the person answer?
                                                          each question, a line for each (parse)
      store.wait ...                                      a SUBMIT click of the whole set
      <- the store wakes the call                    <-   Clicks.handle -> Answering -> store
                                                          INVALID: the questions with problems
                                                          asked again, in the bridge's words

The payload is a typed line: :func:`parse` makes it the question's :class:`Picks` -- a number
(or, for multiSelect, numbers separated by commas or spaces, signs allowed) picks options, any
other line is the person's own answer. The whole set's picks go to the bridge as one
:class:`~bridge.clicks.Click` (``SUBMIT``), judged by :class:`~bridge.answering.Answering` as a
chat's form is (a line that shows nothing, a number that matches no option, several numbers for a
single-select question, a typed answer over the limit); :class:`Said`, the responder, prints the
verdict's words, and a verdict with problems has those questions asked again, each with its
problem. The store is a :class:`~bridge.store.memory.MemoryStore` of the ask's own: the answer is
read in the process that waits for it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from bridge.answering import Caller, Outcome, Picks, Problem, Verdict
from bridge.asking import AskPolicy, ChatHandler
from bridge.clicks import Click, Clicks, Kind, Timing, answer_clicks
from bridge.deferred import AskUserDeferred
from bridge.identities import Identities
from bridge.models import Question
from bridge.record import AskRecord, Destination
from bridge.result import AskUserAnswered
from bridge.store.memory import MemoryStore
from bridge.text import typed
from platforms.console import markup
from platforms.console.keyboard import Keyboard
from platforms.console.poster import ConsolePoster

PERSON = Caller(user_id="terminal")
"""Whoever is at the keyboard: the one person who can answer at a terminal."""
DESTINATION = Destination(platform="console", channel="terminal")

_NUMBERS = re.compile(r"[+-]?\d+(?:\s*[,\s]\s*[+-]?\d+)*")
"""A number or a list of them, signs allowed: "-1" is a number matching no option (asked again),
not the person's own answer."""


def parse(line: str) -> Picks:
    """A typed line as one question's picks: the options its numbers name (from 1 on the
    screen, so index ``n - 1``, as typed: judging finds the ones that match no option), or, when
    it is not a list of numbers, the line itself as typed text (judged and kept by
    :func:`bridge.judging.typed_text`, which also finds a line that shows nothing). Numbers are
    read from what the person saw (:func:`bridge.text.typed`): "2" followed by a zero-width
    space is the number 2."""
    shown = typed(line)
    if shown is not None and _NUMBERS.fullmatch(shown):
        return Picks(selected=tuple(int(n) - 1 for n in re.split(r"[,\s]+", shown)))
    return Picks(text=line)


@dataclass
class Said:
    """The console's :class:`~bridge.clicks.Responder` for one click: the verdict is awaited
    (a terminal has no platform deadline to answer by) and its words printed at once, except a
    form's problems, which are printed with the questions asked again."""

    out: TextIO
    timing: Timing = Timing.VERDICT_ONLY
    budget: float | None = None
    verdict: Verdict | None = None
    form: AskRecord | None = None
    """The ask, once the form may be shown (an opening click's verdict)."""

    async def acknowledge(self) -> None:
        """Nothing: a terminal has no click to acknowledge, and a verdict-only click is answered
        with its verdict."""

    async def respond(self, verdict: Verdict) -> bool:
        self.verdict = verdict
        if not self.problems:
            await self.tell(verdict)
        return True

    async def tell(self, verdict: Verdict) -> None:
        if verdict.explain:
            self.out.write(verdict.explain + "\n")
            self.out.flush()

    async def open_form(self, record: AskRecord) -> None:
        self.form = record

    @property
    def problems(self) -> Mapping[int, Problem]:
        """What was wrong with each question of the submitted answers; empty if nothing was."""
        verdict = self.verdict
        if verdict is None or verdict.outcome is not Outcome.INVALID:
            return {}
        return verdict.problems


async def ask(
    keyboard: Keyboard,
    out: TextIO,
    policy: AskPolicy,
    questions: Sequence[Question],
    context: Mapping[str, Any],
) -> AskUserAnswered | AskUserDeferred:
    """Ask ``questions`` at the terminal: the bridge's ask and the prompt side by side. The
    prompt ends at the end of input (:class:`~platforms.console.keyboard.TerminalClosed`, the ask
    closed as cancelled) or once the answer is taken; the ask ends answered, or expired by
    ``policy``, or cancelled with this call (Ctrl-C)."""
    store = MemoryStore()
    poster = ConsolePoster(out)
    nobody_linked = Identities()  # one person, on one platform
    clicks = answer_clicks(store, poster, markup.REPLIES, identities=nobody_linked)
    handler = ChatHandler(poster, store, DESTINATION, policy, identities=nobody_linked)
    asking = asyncio.ensure_future(handler(questions, context))
    prompting = asyncio.ensure_future(_prompt(keyboard, out, clicks, poster))
    try:
        await asyncio.wait({asking, prompting}, return_when=asyncio.FIRST_COMPLETED)
        if prompting.done() and (failed := prompting.exception()) is not None:
            raise failed
        return await asking
    finally:
        prompting.cancel()  # the ask ended while a line was awaited: the line is not wanted
        asking.cancel()  # the terminal closed, or this call was cancelled: close the ask
        await asyncio.wait({asking, prompting})
        await clicks.drain()  # the outcome shown before the call returns
        await store.aclose()


async def _prompt(keyboard: Keyboard, out: TextIO, clicks: Clicks, poster: ConsolePoster) -> None:
    """Once the ask is posted, open its form and read a line for each question, until the bridge
    takes the answers (or finds the ask ended)."""
    ask_id = await poster.posted
    opening = Said(out)
    await clicks.handle(Click(Kind.FORM, ask_id, PERSON), opening)
    if opening.form is None:  # it cannot be answered any more: the verdict said why
        return
    questions = opening.form.questions.questions
    picks: dict[int, Picks] = {}
    problems: Mapping[int, Problem] = {}
    asked: Sequence[int] = range(len(questions))
    while asked:
        for i in asked:
            q = questions[i]
            problem = problems[i].text if i in problems else None
            out.write(markup.question(q, i, len(questions), poster.style, problem))
            picks[i] = parse(await keyboard.line(markup.prompt(q), out))
        submitted = Said(out)
        await clicks.handle(Click(Kind.SUBMIT, ask_id, PERSON, picks=dict(picks)), submitted)
        problems = submitted.problems
        asked = sorted(problems)
