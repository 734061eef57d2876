"""What an ask looks like on Slack, in Block Kit: the channel message in each status, and the
answer modals.

Everything is built with ``slack_sdk.models`` so ``to_dict()`` validates it. Shapes:

* one single-select question: one button per option plus ``Other…`` -- one click answers;
* anything else (multiSelect, several questions): an ``Answer`` button opening a modal form, so
  each person's half-made selections live in their own modal and are never shown to anyone else.

What the message shows in each status, and the walk through levels of cuts, are the bridge's
(:mod:`bridge.presentation`, the same on every platform); this module is Slack's markup and numbers.
Every text from the model or a teammate goes through :func:`text.fit` (escaped, cut with ``…``
to a cost in UTF-16 units of its JSON, never fewer than the characters Slack counts).

**Within Slack's limits, always.** A message is rendered at the first of :data:`LEVELS` whose
result fits (:func:`fits`: every block valid for slack_sdk -- a section's text 3,000 characters,
a button's 75 --, every text object at most 3,000, and the block JSON within
:data:`BLOCKS_BUDGET`). The first level cuts nothing; then the options' descriptions and the typed
answers are shortened, then the question texts and labels too, a little more at each level. Every
cut is visible (``…``) and keeps the text's beginning, so the question's first words, every
option's label and the outcome always show. The last level (:data:`TIGHTEST`) fits whatever the
record, by arithmetic on its caps alone, in UTF-16 units of the JSON (never fewer than the
characters Slack counts; a newline is two):

* a question's section: its header (at most 12 characters, :data:`HEADER` 60 escaped), `` · ``,
  the question (500) and the multiSelect hint (15); while pending four option lines
  ``• *label* — description`` (4 × (9 + 60 + 60)): 1,096; once answered the chosen labels
  (4 × (2 + 60) and their separators) and the typed answer (300 and its markup): 1,145. Both
  are well within a section's 3,000 (1,172 and 1,221 with the block's JSON);
* the intro (the asker, :data:`ASKER` 80, and ten answerers' mentions of at most 42 each): 621;
  the ``Answer`` button: 227, and 145 more with ``Open in browser`` beside it (when the web
  platform is on); the approvals of an ask several people must agree on (the rule, a
  count of earlier ones and ten submissions of at most 240 each,
  :meth:`bridge.replies.Replies.approvals`): 2,563, or once ended the outcome (ten mentions):
  545. One single-select question's buttons instead: 976, and ``Open in browser`` in a block
  of its own: 201;
* so at most ``4 × 1,172 + 621 + 227 + 145 + 2,563 + 8 = 8,252`` (the 8: the array's brackets
  and commas) of the 12,000 budget pending, 5,200 once answered, in at most 7 blocks of 50
  (``tests/platforms/conformance/test_slack_conformance.py`` renders these worst cases).

The poster may also ask for the last level directly (``tightest=True``), to retry once when
Slack refuses a rendering for a reason nobody documents (``msg_blocks_too_long`` has no number).

**The modals** fit whatever the question set at once: a question's header section is at most
60 + 2,500 of 3,000; option texts and descriptions are cut to Slack's 75; four questions are 12
blocks of 100.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
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
from bridge.answering import MAX_TYPED
from bridge.models import MAX_DESCRIPTION, MAX_LABEL, MAX_QUESTION_TEXT, Question
from bridge.presentation import Caps, Markup, Shown, first_fit
from bridge.record import AskRecord, AskStatus
from bridge.replies import Replies
from bridge.text import ELLIPSIS, one_line
from platforms.slack import ids
from platforms.slack.text import fit, mention

BLOCKS_BUDGET = 12_000
"""Upper bound for a message's block JSON (UTF-16 units): Slack refuses somewhere above 13,000
(``msg_blocks_too_long``), by a count it does not document."""
TEXT_LIMIT = 3000
"""Slack's limit on the text of any text object (a section's text, a context element)."""
CONTROL_TEXT = 75
"""Slack's limit on a button's text, and on an option's text and description."""
MODAL_QUESTION = 2500
"""Cap of a question's text in a modal, whose header section holds nothing else."""

SHOWN_TEXT = 150
"""Cost cap of a label list or typed answer in a line of the bridge's words (a submission)."""

REPLIES = Replies(mention=mention, text=lambda text: fit(one_line(text), SHOWN_TEXT))
"""The answering layer's words, with Slack's mentions and escaping."""

HEADER = 60
"""Cap of a question's header (at most 12 characters, escaped: never cut)."""
ASKER = 80
"""Cap of the asker's name."""
MAX_COST = 5
"""The most one character of a model's text costs once escaped (``&`` is ``&amp;``)."""


WHOLE = Caps(
    question=MAX_COST * MAX_QUESTION_TEXT,
    label=MAX_COST * MAX_LABEL,
    description=MAX_COST * MAX_DESCRIPTION,
    other=MAX_COST * MAX_TYPED,
)
"""The first level: nothing cut (no text the contract accepts costs more)."""
TIGHTEST = Caps(question=500, label=60, description=60, other=300)
"""The last level, which fits whatever the record (see the module docstring)."""
LEVELS = (
    WHOLE,
    Caps(question=WHOLE.question, label=WHOLE.label, description=300, other=1000),
    Caps(question=1500, label=150, description=150, other=600),
    Caps(question=1000, label=100, description=100, other=400),
    Caps(question=700, label=75, description=75, other=300),
    TIGHTEST,
)
"""From the most generous to the tightest: descriptions and typed answers are shortened first,
then the question texts and labels too."""

OPEN_IN_BROWSER = "Open in browser"
"""The button that gives the person who clicks it their own link to answer in the browser."""

MARKUP = Markup(cut=lambda text, cap: fit(text, cap), bold="*", typed="✏️ _{}_")
"""Slack's mrkdwn for a question's options and answers (each text escaped and cut by
:func:`text.fit`)."""


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
    return fit(replies.asker(record), ASKER)


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


def render_message(record: AskRecord, *, tightest: bool = False, browser: bool = False) -> Message:
    """The message for the record's status, at the most generous level that fits; at the last
    level at once with ``tightest`` (a retry after Slack refused a rendering). The last level
    fits whatever the record: see the module docstring. ``browser``: a pending ask also offers
    ``Open in browser`` (the web platform is on)."""
    return first_fit(LEVELS, lambda caps: _message(record, caps, browser), fits, tightest=tightest)


def fits(message: Message) -> bool:
    """Whether Slack takes ``message``: slack_sdk validates every block (``to_dict`` raises for a
    section over 3,000, a button text over 75...), every text object holds at most 3,000
    characters (a context element's, which slack_sdk does not count), and the block JSON is within
    :data:`BLOCKS_BUDGET`."""
    try:
        wire = message.wire
    except SlackObjectFormationError:
        return False
    longest = max((len(text) for block in wire for text in _texts(block)), default=0)
    return longest <= TEXT_LIMIT and blocks_cost(message) <= BLOCKS_BUDGET


def _texts(block: dict[str, Any]) -> list[str]:
    """The texts of a block's text objects that can be long: its own, and its elements'."""
    found = [block["text"]["text"]] if isinstance(block.get("text"), dict) else []
    return found + [e["text"] for e in block.get("elements", ()) if e.get("type") == "mrkdwn"]


def _message(record: AskRecord, caps: Caps, browser: bool = False) -> Message:
    rid = secrets.token_hex(3)  # fresh block ids on every render, so clients drop stale state
    shown = Shown(record)
    blocks: list[Block] = [ContextBlock(block_id=f"{rid}.who", elements=[_intro(shown)])]
    questions = record.questions.questions
    for i, q in enumerate(questions):
        body = _question_text(q, caps) + "\n" + shown.body(i, caps, MARKUP)
        blocks.append(SectionBlock(block_id=f"{rid}.q{i}", text=MarkdownTextObject(text=body)))
        if shown.one_click:
            blocks.append(_buttons(record.id, i, q, caps, rid))
    controls: list[ButtonElement] = []
    if shown.form:
        label = "Answer" if len(questions) == 1 else f"Answer {len(questions)} questions"
        controls.append(
            ButtonElement(
                text=label, action_id=routing.answer_id(record.id), value="answer", style="primary"
            )
        )
    if browser and shown.pending:  # not a URL button: each person gets a link of their own
        controls.append(
            ButtonElement(text=OPEN_IN_BROWSER, action_id=routing.web_id(record.id), value="web")
        )
    if controls:
        blocks.append(ActionsBlock(block_id=f"{rid}.act", elements=controls))
    approvals = shown.approvals(REPLIES)
    if approvals:  # at most 12 lines of at most ~200 each: within a section's 3000
        text = MarkdownTextObject(text="\n".join(approvals))
        blocks.append(SectionBlock(block_id=f"{rid}.subs", text=text))
    outcome = shown.outcome(REPLIES)
    if outcome is not None:
        text = MarkdownTextObject(text=outcome)
        blocks.append(ContextBlock(block_id=f"{rid}.end", elements=[text]))
    return Message(text=_fallback(record), blocks=blocks)


def _intro(shown: Shown) -> MarkdownTextObject:
    text = f"*{asker(shown.record)}* {shown.verb}"
    answerers = shown.answerers(mention)
    if answerers is not None:
        text += " " + answerers
    return MarkdownTextObject(text=text + ":")


def _question_text(q: Question, caps: Caps) -> str:
    hint = " _(choose any)_" if q.multiSelect else ""
    return f"*{fit(one_line(q.header), HEADER)}* · {fit(q.question, caps.question)}{hint}"


def _buttons(ask_id: str, qi: int, q: Question, caps: Caps, rid: str) -> ActionsBlock:
    label_cap = min(caps.label, CONTROL_TEXT)
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
                text=PlainTextObject(text=fit(one_line(o.label), CONTROL_TEXT), emoji=False),
                description=PlainTextObject(
                    text=fit(one_line(o.description), CONTROL_TEXT), emoji=False
                ),
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
    return _answer_modal(ids.FORM_CALLBACK, "Answer", meta, blocks)


def other_view(record: AskRecord, meta: ids.ModalMeta) -> View:
    """``Other…`` for the one-click shape: the person types their own answer."""
    qi = meta.question or 0
    q = record.questions.questions[qi]
    blocks: list[Block] = [
        _modal_header(qi, q),
        _text_input(qi, "Your answer", optional=False, hint=None),
    ]
    return _answer_modal(ids.OTHER_CALLBACK, "Other answer", meta, blocks)


def _answer_modal(callback_id: str, title: str, meta: ids.ModalMeta, blocks: list[Block]) -> View:
    """A modal a person answers in: submitted to ``callback_id``, carrying ``meta``."""
    return View(
        type="modal",
        callback_id=callback_id,
        title=title,
        submit="Submit",
        close="Cancel",
        private_metadata=meta.dump(),
        blocks=blocks,
    )


def _modal_header(qi: int, q: Question) -> SectionBlock:
    """A question as a modal shows it: header in bold, then the full question text."""
    text = f"*{fit(one_line(q.header), HEADER)}*\n{fit(q.question, MODAL_QUESTION)}"
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
