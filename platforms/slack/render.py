"""Block Kit renderings of an ask: the channel message in each status, and the answer modals.

Everything is built with ``slack_sdk.models`` so ``to_dict()`` validates it. Shapes:

* one single-select question: one button per option plus ``Other…`` -- one click answers;
* anything else (multiSelect, several questions): an ``Answer`` button opening a modal form, so
  each person's half-made selections live in their own modal and are never shown to anyone else.

Every text from the model or a teammate goes through :func:`text.fit` (escaped, cut with ``…``).
A rendering is tried with generous limits first and tighter ones until its block JSON fits
:data:`BLOCKS_BUDGET`; the last, tightest level fits whatever the input, which the hypothesis test
checks over the whole input space.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    CheckboxesElement,
    ContextBlock,
    InputBlock,
    MarkdownTextObject,
    Option,
    PlainTextInputElement,
    PlainTextObject,
    RadioButtonsElement,
    SectionBlock,
)
from slack_sdk.models.views import View

from bridge import replies, routing
from bridge.answering import MAX_TYPED, one_click
from bridge.models import Answer, Question
from bridge.record import AskRecord, AskStatus
from bridge.replies import MAX_ANSWERERS_SHOWN, Replies
from bridge.text import ELLIPSIS, one_line
from platforms.slack import ids
from platforms.slack.text import fit, mention

BLOCKS_BUDGET = 12_000
"""Upper bound for a message's block JSON (UTF-16 units); Slack rejects about 13.2k."""

SHOWN_TEXT = 150
"""Cost cap of a label list or typed answer in a line of the bridge's words (a submission)."""

REPLIES = Replies(mention=mention, text=lambda text: fit(one_line(text), SHOWN_TEXT))
"""The answering layer's words, with Slack's mentions and escaping."""


@dataclass(frozen=True)
class Caps:
    """Display limits (in :func:`text.cost` units) for one rendering attempt."""

    question: int
    label: int
    description: int
    other: int


LEVELS = (
    Caps(question=1500, label=150, description=300, other=1000),
    Caps(question=600, label=75, description=150, other=400),
    Caps(question=250, label=60, description=75, other=150),
    Caps(question=100, label=30, description=30, other=60),
)


@dataclass(frozen=True)
class Message:
    """A chat message: notification ``text`` plus ``blocks``."""

    text: str
    blocks: list[Block]

    @cached_property
    def wire(self) -> list[dict[str, Any]]:
        """The blocks as sent: built once, both to check their size and to send them (each
        ``to_dict`` walks every element of every block)."""
        return [b.to_dict() for b in self.blocks]


def blocks_cost(blocks: Sequence[Block] | Message) -> int:
    """The block JSON size the way the budget counts it (UTF-16 units, unescaped non-ASCII)."""
    wire = blocks.wire if isinstance(blocks, Message) else [b.to_dict() for b in blocks]
    raw = json.dumps(wire, ensure_ascii=False, separators=(",", ":"))
    return len(raw.encode("utf-16-le")) // 2


def asker(record: AskRecord) -> str:
    return fit(replies.asker(record), 80)


def reminder_text(record: AskRecord, n: int) -> str:
    """Reminder ``n`` for a thread reply: the mentions of the answerers still to answer
    (:func:`bridge.replies.to_remind`: ``<@U…>``, ``<!subteam^S…>``), or ``<!here>`` when
    anyone may answer in a channel (nobody in a DM: the DM notifies its person anyway); the time
    the question was asked in each reader's own zone.
    Every other character is escaped, so the reply pings nobody else."""
    at = int(record.created_at)
    fallback = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))
    since = f"<!date^{at}^{{date_short_pretty}} at {{time}}|{fallback}>"
    here = "<!here>" if record.message is not None and not _is_dm(record) else ""
    return REPLIES.reminder(record, n, asker=asker(record), since=since, here=here)


def _is_dm(record: AskRecord) -> bool:
    dest = record.destination
    channel = record.message.channel if record.message is not None else dest.channel or ""
    return channel.startswith("D") or (dest.user is not None and not dest.channel)


def render_message(record: AskRecord) -> Message:
    """The message for the record's status, at the most generous level that fits the budget."""
    for caps in LEVELS:
        message = _message(record, caps)
        if blocks_cost(message) <= BLOCKS_BUDGET:
            return message
    return message  # the last level always fits; the hypothesis test holds us to that


def _message(record: AskRecord, caps: Caps) -> Message:
    rid = secrets.token_hex(3)  # fresh block ids on every render, so clients drop stale state
    status = record.status
    blocks: list[Block] = [ContextBlock(block_id=f"{rid}.who", elements=[_intro(record, caps)])]
    questions = record.questions.questions
    answers = record.answers or ()
    for i, q in enumerate(questions):
        body = _question_text(q, caps)
        if status is AskStatus.ANSWERED and i < len(answers):
            body += "\n" + _answer_text(answers[i], caps)
        else:
            body += "\n" + _options_text(q, caps, described=status is AskStatus.PENDING)
        blocks.append(SectionBlock(block_id=f"{rid}.q{i}", text=MarkdownTextObject(text=body)))
        if status is AskStatus.PENDING and one_click(record.questions):
            blocks.append(_buttons(record.id, i, q, caps, rid))
    if status is AskStatus.PENDING and not one_click(record.questions):
        label = "Answer" if len(questions) == 1 else f"Answer {len(questions)} questions"
        button = ButtonElement(
            text=label, action_id=routing.answer_id(record.id), value="answer", style="primary"
        )
        blocks.append(ActionsBlock(block_id=f"{rid}.act", elements=[button]))
    approvals = REPLIES.approvals(record) if status is AskStatus.PENDING else []
    if approvals:  # at most 12 lines of at most ~200 each: within a section's 3000
        text = MarkdownTextObject(text="\n".join(approvals))
        blocks.append(SectionBlock(block_id=f"{rid}.subs", text=text))
    if status is not AskStatus.PENDING:
        outcome = MarkdownTextObject(text=REPLIES.outcome(record))
        blocks.append(ContextBlock(block_id=f"{rid}.end", elements=[outcome]))
    return Message(text=_fallback(record), blocks=blocks)


def _intro(record: AskRecord, caps: Caps) -> MarkdownTextObject:
    verb = "asks" if record.status is AskStatus.PENDING else "asked"
    text = f"*{asker(record)}* {verb}"
    if record.answerers and record.status is AskStatus.PENDING:
        shown = [mention(a) for a in record.answerers[:MAX_ANSWERERS_SHOWN]]
        more = len(record.answerers) - len(shown)
        text += " " + ", ".join(shown) + (f" and {more} more" if more > 0 else "")
    return MarkdownTextObject(text=text + ":")


def _question_text(q: Question, caps: Caps) -> str:
    hint = " _(choose any)_" if q.multiSelect else ""
    return f"*{fit(one_line(q.header), 60)}* · {fit(q.question, caps.question)}{hint}"


def _options_text(q: Question, caps: Caps, *, described: bool) -> str:
    """The options: each label, with its description while the ask is pending (``described``;
    an ended ask is shown without them, and its store drops them once settled)."""
    lines = []
    for o in q.options:
        line = f"• *{fit(one_line(o.label), caps.label)}*"
        if described:
            line += f" — {fit(one_line(o.description), caps.description)}"
        lines.append(line)
    return "\n".join(lines)


def _answer_text(answer: Answer, caps: Caps) -> str:
    lines = []
    if answer.selected:
        labels = ", ".join(f"*{fit(one_line(s), caps.label)}*" for s in answer.selected)
        lines.append(f"✅ {labels}")
    if answer.other_text:
        lines.append(f"✏️ _{fit(one_line(answer.other_text), caps.other)}_")
    return "\n".join(lines) or "—"


def _buttons(ask_id: str, qi: int, q: Question, caps: Caps, rid: str) -> ActionsBlock:
    label_cap = min(caps.label, 75)
    elements = [
        ButtonElement(
            text=PlainTextObject(text=fit(one_line(o.label), label_cap), emoji=False),
            action_id=routing.pick_id(ask_id, qi, oi),
            value=f"{qi}:{oi}",
        )
        for oi, o in enumerate(q.options)
    ]
    other = ButtonElement(text="Other…", action_id=routing.other_id(ask_id, qi), value=f"{qi}")
    elements.append(other)
    return ActionsBlock(block_id=f"{rid}.a{qi}", elements=elements)


def _fallback(record: AskRecord) -> str:
    first = record.questions.questions[0].question
    more = len(record.questions.questions) - 1
    suffix = f" (+{more} more)" if more else ""
    name = asker(record)
    if record.status is not AskStatus.PENDING:
        return f"{name} asked: {fit(one_line(first), 150)}{suffix} — {record.status.value}"
    return f"{name} asks: {fit(one_line(first), 200)}{suffix}"


# -- modals -----------------------------------------------------------------------------------


def form_view(record: AskRecord, meta: ids.ModalMeta) -> View:
    """The answer form: per question a choice group and an optional ``Other…`` text field."""
    blocks: list[Block] = []
    for i, q in enumerate(record.questions.questions):
        blocks.append(_modal_header(i, q))
        options = [
            Option(
                value=str(oi),
                text=PlainTextObject(text=fit(one_line(o.label), 75), emoji=False),
                description=PlainTextObject(text=fit(one_line(o.description), 75), emoji=False),
            )
            for oi, o in enumerate(q.options)
        ]
        element: CheckboxesElement | RadioButtonsElement
        if q.multiSelect:
            element = CheckboxesElement(action_id=ids.PICK_ACTION, options=options)
        else:
            element = RadioButtonsElement(action_id=ids.PICK_ACTION, options=options)
        label = "Choose any" if q.multiSelect else "Choose one"
        blocks.append(
            InputBlock(block_id=ids.pick_block(i), label=label, element=element, optional=True)
        )
        hint = "In addition to your choices." if q.multiSelect else "Instead of choosing above."
        blocks.append(_text_input(i, "Other…", optional=True, hint=hint))
    return View(
        type="modal",
        callback_id=ids.FORM_CALLBACK,
        title="Answer",
        submit="Submit",
        close="Cancel",
        private_metadata=meta.dump(),
        blocks=blocks,
    )


def other_view(record: AskRecord, meta: ids.ModalMeta) -> View:
    """``Other…`` for the one-click shape: the person types their own answer."""
    qi = meta.question or 0
    q = record.questions.questions[qi]
    return View(
        type="modal",
        callback_id=ids.OTHER_CALLBACK,
        title="Other answer",
        submit="Submit",
        close="Cancel",
        private_metadata=meta.dump(),
        blocks=[
            _modal_header(qi, q),
            _text_input(qi, "Your answer", optional=False, hint=None),
        ],
    )


def _modal_header(qi: int, q: Question) -> SectionBlock:
    """A question as a modal shows it: header in bold, then the full question text."""
    text = f"*{fit(one_line(q.header), 60)}*\n{fit(q.question, 2500)}"
    return SectionBlock(block_id=ids.header_block(qi), text=MarkdownTextObject(text=text))


def _text_input(qi: int, label: str, *, optional: bool, hint: str | None) -> InputBlock:
    return InputBlock(
        block_id=ids.text_block(qi),
        label=label,
        hint=hint,
        optional=optional,
        element=PlainTextInputElement(
            action_id=ids.TEXT_ACTION, multiline=True, max_length=MAX_TYPED
        ),
    )


def notice_view(text: str) -> View:
    """A modal that only explains (answered already, not yours, try again): no submit button."""
    return View(
        type="modal",
        title="Ask bridge",
        close="Close",
        blocks=[SectionBlock(text=MarkdownTextObject(text=text))],
    )


def loading_view() -> View:
    """Opened at once when preparing the real modal may outlast the 3-second trigger window."""
    return View(
        type="modal",
        title="Ask bridge",
        close="Close",
        blocks=[SectionBlock(text=MarkdownTextObject(text=f"Loading{ELLIPSIS}"))],
    )
