"""The web platform's pages: Jinja2 templates (autoescaped), what each shows, and a submitted form
read into :class:`~bridge.answering.Picks`.

Every text from the model or a person passes the ``shown`` filter (:func:`bridge.text.shown`:
no bidi overrides, zero-width or tag characters, never blank) and then autoescaping; each is
shown whole (the contract bounds them). Nothing a page shows is built by string concatenation
of HTML: the templates say where each text goes, and Jinja escapes it there.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from multidict import MultiMapping

from bridge.answering import MAX_TYPED, Picks, Problem
from bridge.models import MAX_QUESTIONS
from bridge.presentation import Shown
from bridge.record import AskRecord, AskStatus
from bridge.replies import Replies, asker
from bridge.text import one_line, shown

ENV = Environment(
    loader=PackageLoader("platforms.web", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters["shown"] = shown
ENV.filters["line"] = lambda text: one_line(shown(text))


def _mention(user_id: str) -> str:
    return one_line(shown(user_id))


REPLIES = Replies(mention=_mention, text=lambda text: one_line(shown(text)))
"""The answering layer's words for the web: people named as their ids are (a web person's id is
their name), texts made visible; the templates escape them."""

_FIELD = re.compile(r"q(\d{1,2})(-other)?")
OTHER = "other"
"""The value of a single-select question's ``Other…`` radio button."""


def ago(seconds: float) -> str:
    """A duration in words a glance can read: ``40 s``, ``12 min``, ``3 h``, ``2 days``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{int(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} days"


def read_form(form: MultiMapping[object]) -> dict[int, Picks]:
    """A posted form's picks by question index: ``q<i>`` the chosen options (an index each; one
    that is not a number becomes -1, which judging calls no such option), ``q<i>-other`` the
    typed text. A single-select question's ``Other…`` is a choice of its own radio group
    (``q<i>=other``), so someone who first ticked an option can still pick their own words
    without a script; it chooses no option, and its answer is the typed text (none typed: judged
    as no answer). Questions beyond the contract's most are ignored; the store judges the rest."""
    selected: dict[int, list[int]] = {}
    typed: dict[int, str] = {}
    for name, value in form.items():
        found = _FIELD.fullmatch(name)
        if found is None or not isinstance(value, str):
            continue
        index = int(found.group(1))
        if index >= MAX_QUESTIONS:
            continue
        if found.group(2):
            if value.strip():
                typed[index] = value[: MAX_TYPED * 4]  # judged TOO_LONG past MAX_TYPED anyway
        elif value == OTHER:
            selected.setdefault(index, [])
        else:
            number = value.isascii() and value.isdigit() and len(value) < 4
            selected.setdefault(index, []).append(int(value) if number else -1)
    return {
        i: Picks(tuple(sorted(set(selected.get(i, ())))), typed.get(i))
        for i in sorted(selected.keys() | typed.keys())
    }


@dataclass(frozen=True)
class AskPage:
    """What an ask's page shows: the record as it is, and for a form shown again the person's
    input and the problems beside each question."""

    record: AskRecord
    csrf: str | None
    """The form's CSRF field; ``None``: no form (the ask ended, or the person may not answer)."""
    notice: str | None = None
    """A line at the top: what became of the person's last submit, or why they cannot answer."""
    kept: Mapping[int, Picks] = field(default_factory=dict)
    problems: Mapping[int, Problem] = field(default_factory=dict)
    person: str = ""


def status_context(record: AskRecord, now: float | None = None) -> dict[str, Any]:
    """The status part of a page (also what a live update replaces): the state, time left, who
    may answer, the approvals so far, and the outcome once ended."""
    now = time.time() if now is None else now
    view = Shown(record)
    return {
        "status": record.status.value,
        "pending": view.pending,
        "left": ago(record.expires_at - now) if view.pending else None,
        "age": ago(now - record.created_at),
        "answerers": view.answerers(_mention),
        "approvals": view.approvals(REPLIES),
        "outcome": view.outcome(REPLIES),
    }


def render_ask(page: AskPage, *, events: str | None, now: float | None = None) -> str:
    """The ask's page. ``events``: the URL of its live updates (``None``: nothing to watch)."""
    record = page.record
    answers = record.answers or ()
    questions = []
    for i, q in enumerate(record.questions.questions):
        kept = page.kept.get(i, Picks())
        questions.append(
            {
                "index": i,
                "q": q,
                "answer": answers[i]
                if record.status is AskStatus.ANSWERED and i < len(answers)
                else None,
                "chosen": set(kept.selected),
                "typed": kept.text or "",
                "problem": page.problems.get(i),
            }
        )
    return ENV.get_template("ask.html").render(
        title=asker(record),
        record=record,
        questions=questions,
        form=page.csrf is not None and record.status is AskStatus.PENDING,
        csrf=page.csrf,
        notice=page.notice,
        person=page.person,
        events=events,
        max_typed=MAX_TYPED,
        other=OTHER,
        s=status_context(record, now),
    )


def render_status(record: AskRecord, now: float | None = None) -> str:
    """The status fragment alone, as a live update sends it."""
    return ENV.get_template("_status.html").render(s=status_context(record, now))


def render_message(title: str, text: str) -> str:
    """A page that only says something: a refused link, a refusal, a limit reached."""
    return ENV.get_template("message.html").render(title=title, text=text)


@dataclass(frozen=True)
class InboxRow:
    record: AskRecord
    url: str | None
    """Where this person answers it (a fresh link); ``None`` on the operators' read-only view."""


def render_inbox(
    rows: list[InboxRow],
    *,
    person: str | None,
    channel: str | None,
    older: str | None,
    now: float | None = None,
) -> str:
    """The inbox: pending asks newest first, each with its age, time left and where to answer;
    ``older``: the URL of the next page, if any."""
    now = time.time() if now is None else now
    items = [
        {
            "record": row.record,
            "url": row.url,
            "asker": asker(row.record),
            "where": row.record.destination.channel or row.record.destination.user or "",
            "age": ago(now - row.record.created_at),
            "left": ago(row.record.expires_at - now),
        }
        for row in rows
    ]
    return ENV.get_template("inbox.html").render(
        items=items, person=person, channel=channel, older=older
    )
