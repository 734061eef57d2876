"""What an ask looks like on Discord: the channel message in each status, and the answer modals.

**The message** is classic components: one embed per question (header as title, question text,
each option's label in bold, with its description while pending; once answered, the answers),
the asker in the first embed's author line, and while pending the controls in one action row:

* one single-select question: one button per option (its label) plus ``Other…`` -- one click
  answers; ``Other…`` opens a modal with one paragraph text input;
* every other shape: an ``Answer`` button opening a modal form;
* when the web platform is on, ``Open in browser`` on a second row (two rows of the five a
  message may hold): it gives the person who clicks it their own link, privately.

What the message shows in each status, and the walk through levels of cuts, are the bridge's
(:mod:`bridge.presentation`, the same on every platform); this module is Discord's markup and
numbers.

The message ``content`` holds only the bridge's own words: the configured answerers' mentions
while pending (the only pings the bridge ever allows) and the outcome line once ended. Embeds
never ping.

**Within Discord's limits, always.** A message is rendered at the first of :data:`LEVELS` whose
result fits (:func:`fits`: content 2,000, at most 10 embeds, titles and author names 256, each
description 4,096, all embed text together :data:`EMBEDS_BUDGET`). The first level cuts nothing;
then the options' descriptions are shortened, then the question texts, labels and typed answers
too, a little more at each level. Every cut is visible (``…``) and keeps the text's beginning, so
the question's first words, every option's label and the outcome always show. The last level
(:data:`TIGHTEST`) fits whatever the question set, by arithmetic on its caps alone -- each text
is cut to its cap in UTF-16 code units (never fewer than the characters Discord counts), so no
input can make it longer:

* a question's embed: title :data:`MAX_TITLE` and a description of at most the question (300),
  the multiSelect hint and blank line (17) and four option lines of ``• **label** —
  description`` (4 × (9 + 40 + 40) + 3 newlines): 676 while pending, less once ended;
* four of them, the author line (:data:`MAX_ASKER` + 5) and the approvals embed of an ask
  several people must agree on (:data:`MAX_APPROVALS`): ``4 × (60 + 676) + 85 + 2,600 =
  5,629`` of the 5,800 budget; no description near 4,096; five embeds of ten;
* the content: the bridge's own words (answerer mentions, the outcome), cut to 2,000
  (:func:`plain`) -- a few hundred at most.

The poster may also ask for the last level directly (``tightest=True``), to retry once when
Discord refuses a rendering for a reason nobody documents.

**The form** lives in modals, at most five top-level components each (a ``Label`` holding a
``RadioGroup``, ``CheckboxGroup`` or ``TextInput``):

* one or two questions: one modal -- per question its choices and an optional ``Other…`` text;
* three or four: first a modal with every question's choices (a radio group, or a checkbox group
  for multiSelect), plus, when a question is multiSelect, a checkbox group "Also type your own
  answer for". Submitting it answers at once if every question has a choice and no typed answer
  was asked for; otherwise the person gets an ephemeral message only they see, whose ``Next``
  button carries their choices (:mod:`platforms.discord.ids`) and opens a second modal with an
  ``Other…`` text input for each question left without a choice (required) or ticked (optional).
  A single-select question is answered by typing simply by leaving its choice empty.

A modal cannot be opened from a modal submission, hence the ephemeral ``Next`` step; the choices
are in its button, so nothing is held in memory, and one teammate's partial choices are never shown
to or mixed with another's.
"""

from __future__ import annotations

from dataclasses import dataclass

import discord
from discord import ui

from bridge import replies, routing
from bridge.answering import MAX_TYPED, one_click
from bridge.models import Question
from bridge.presentation import Caps, Markup, Shown, first_fit
from bridge.record import AskRecord, AskStatus
from bridge.replies import MAX_ANSWERERS_SHOWN, Replies
from bridge.text import one_line
from platforms.discord import ids
from platforms.discord.text import (
    NO_MENTIONS,
    answerer_mentions,
    fit,
    mention,
    units,
)

SHOWN_TEXT = 150
"""Cap (UTF-16 units) of a label list or typed answer in a line of the bridge's words."""

REPLIES = Replies(mention=mention, text=lambda text: fit(one_line(text), SHOWN_TEXT, markdown=True))
"""The answering layer's words, with Discord's mentions and escaping."""

EMBEDS_BUDGET = 5800
"""Upper bound for all embed text of a message: Discord allows 6,000; the margin is for a way of
counting nobody documents."""
MAX_CONTENT = 2000
MAX_EMBED_TITLE = 256
MAX_EMBED_DESCRIPTION = 4096
MAX_EMBED_AUTHOR = 256
MAX_EMBEDS = 10
MAX_BUTTON = 80
MAX_LABEL = 45
MAX_LABEL_DESCRIPTION = 100
MAX_OPTION = 100
ONE_MODAL = 2
"""Questions a single modal holds with a text input each (2 x 2 components of at most 5)."""
MODAL_HEADER = 14
"""Cap of a header in a modal's label, which leaves the question 21 of the 45 at least (after
``Other… `` and `` · ``)."""
MAX_TITLE = 60
"""Cap of an embed title (a question's header: at most 12 characters, escaped)."""
MAX_ASKER = 80
"""Cap of the asker's name (the first embed's author line, the reminders)."""
MAX_APPROVALS = 2600
"""Cap of the approvals embed (the rule, a count of earlier submissions and the latest ten, each
at most about 240: :meth:`bridge.replies.Replies.approvals`), so that at the last level four
questions still fit beside it."""

PENDING_COLOUR = discord.Colour.blurple()
ANSWERED_COLOUR = discord.Colour.green()
ENDED_COLOUR = discord.Colour.light_grey()


WHOLE = Caps(
    question=MAX_EMBED_DESCRIPTION,
    label=MAX_EMBED_DESCRIPTION,
    description=MAX_EMBED_DESCRIPTION,
    other=MAX_EMBED_DESCRIPTION,
)
"""The first level: nothing cut (no text of the contract is longer than an embed can hold, so
these caps cut nothing that could have been shown)."""
TIGHTEST = Caps(question=300, label=40, description=40, other=150)
"""The last level, which fits whatever the question set (see the module docstring)."""
LEVELS = (
    WHOLE,
    Caps(
        question=MAX_EMBED_DESCRIPTION,
        label=MAX_EMBED_DESCRIPTION,
        description=300,
        other=MAX_EMBED_DESCRIPTION,
    ),
    Caps(question=1800, label=200, description=150, other=1000),
    Caps(question=900, label=100, description=80, other=500),
    Caps(question=600, label=80, description=60, other=250),
    TIGHTEST,
)
"""From the most generous to the tightest: descriptions are shortened first, then the question
texts, labels and typed answers too."""

MARKUP = Markup(cut=lambda text, cap: fit(text, cap, markdown=True), bold="**", typed="✏️ {}")
"""Discord's Markdown for a question's options and answers (each text escaped and cut by
:func:`text.fit`)."""


@dataclass(frozen=True)
class Message:
    """A message's parts, sent as they are on every post and edit."""

    content: str | None
    embeds: list[discord.Embed]
    view: ui.View | None
    allowed_mentions: discord.AllowedMentions


def embeds_cost(embeds: list[discord.Embed]) -> int:
    """What Discord counts against its 6000 characters: titles, descriptions, field names and
    values, footers and author names."""
    return sum(sum(_units_of(embed)) for embed in embeds)


def _units_of(embed: discord.Embed) -> tuple[int, int, int, int]:
    """``embed``'s title, description and author name in UTF-16 units, and the rest it costs
    (footer, fields): what :func:`fits` checks, each text counted once."""
    author, footer = embed.author.name, embed.footer.text
    rest = units(footer) if footer else 0
    for field in embed.fields:
        rest += units(field.name or "") + units(field.value or "")
    return units(embed.title or ""), units(embed.description or ""), units(author or ""), rest


def fits(message: Message) -> bool:
    """Whether ``message`` is within Discord's limits on text (counted in UTF-16 units, never
    fewer than Discord's count). The controls are within theirs by construction
    (:func:`message_view`)."""
    if len(message.embeds) > MAX_EMBEDS or units(message.content or "") > MAX_CONTENT:
        return False
    total = 0
    for embed in message.embeds:
        title, description, author, rest = _units_of(embed)
        if (
            title > MAX_EMBED_TITLE
            or description > MAX_EMBED_DESCRIPTION
            or author > MAX_EMBED_AUTHOR
        ):
            return False
        total += title + description + author + rest
    return total <= EMBEDS_BUDGET


def asker(record: AskRecord) -> str:
    return fit(replies.asker(record), MAX_ASKER)


def reminder_content(record: AskRecord, n: int) -> tuple[str, discord.AllowedMentions]:
    """Reminder ``n`` for a reply to the message, and the mentions it may notify: exactly the
    answerers shown (``<@id>``, ``<@&role>``; those :func:`bridge.replies.to_remind` names).
    When anyone may answer it mentions nobody: a bot's ``@here`` needs the Mention Everyone
    permission and would notify every online member who can see the channel, so the reply
    (which shows as new in the channel) is the nudge.
    The time the question was asked shows in each reader's own zone (``<t:…:f>``)."""
    at = int(record.created_at)
    since = f"<t:{at}:f> (<t:{at}:R>)"
    text = REPLIES.reminder(
        record,
        n,
        asker=fit(replies.asker(record), MAX_ASKER, markdown=True),
        since=since,
        here="",
    )
    return plain(text), answerer_mentions(replies.to_remind(record)[:MAX_ANSWERERS_SHOWN])


def render_message(record: AskRecord, *, tightest: bool = False, browser: bool = False) -> Message:
    """The message for the record's status, at the most generous level that fits; at the last
    level at once with ``tightest`` (a retry after Discord refused a rendering). The last level
    fits whatever the record: see the module docstring. ``browser``: a pending ask also offers
    ``Open in browser`` (the web platform is on)."""
    return first_fit(LEVELS, lambda caps: _message(record, caps, browser), fits, tightest=tightest)


def _message(record: AskRecord, caps: Caps, browser: bool = False) -> Message:
    shown = Shown(record)
    colour = (
        PENDING_COLOUR
        if shown.pending
        else ANSWERED_COLOUR
        if record.status is AskStatus.ANSWERED
        else ENDED_COLOUR
    )
    embeds = []
    for i, q in enumerate(record.questions.questions):
        embed = discord.Embed(
            title=fit(one_line(q.header), MAX_TITLE, markdown=True), colour=colour
        )
        embed.description = _question_text(q, caps) + "\n\n" + shown.body(i, caps, MARKUP)
        embeds.append(embed)
    embeds[0].set_author(name=f"{asker(record)} {shown.verb}")
    approvals = shown.approvals(REPLIES)
    if approvals:  # mentions in an embed show who, and never ping
        listing = fit("\n".join(approvals), MAX_APPROVALS)
        embeds.append(discord.Embed(description=listing, colour=colour))
    outcome = shown.outcome(REPLIES)
    if outcome is None:
        content = _answerers_line(shown)
        view = message_view(record, browser=browser)
        allowed = answerer_mentions(record.answerers[:MAX_ANSWERERS_SHOWN])
    else:
        content, view, allowed = plain(outcome), None, NO_MENTIONS
    return Message(content=content, embeds=embeds, view=view, allowed_mentions=allowed)


def _answerers_line(shown: Shown) -> str | None:
    answerers = shown.answerers(mention)
    return None if answerers is None else plain(f"For {answerers}:")


def _question_text(q: Question, caps: Caps) -> str:
    hint = "\n*(choose any)*" if q.multiSelect else ""
    return fit(q.question, caps.question) + hint


OPEN_IN_BROWSER = "Open in browser"
"""The button that gives the person who clicks it their own link to answer in the browser."""


def _view(*buttons: ui.Button[ui.View]) -> ui.View:
    """A view only to render: stopped, so discord.py keeps no copy (clicks are read from the
    custom_id alone, :mod:`platforms.discord.app`), and no timeout ever disables it."""
    view = ui.View(timeout=None)
    for button in buttons:
        view.add_item(button)
    view.stop()
    return view


def message_view(record: AskRecord, *, browser: bool = False) -> ui.View:
    """The controls of a pending ask; with ``browser``, ``Open in browser`` on a row of its own
    after them (a one-click question's five buttons fill the first row)."""
    web = (
        [ui.Button[ui.View](label=OPEN_IN_BROWSER, custom_id=routing.web_id(record.id), row=1)]
        if browser
        else []
    )
    if one_click(record.questions):
        q = record.questions.questions[0]
        buttons = [
            ui.Button[ui.View](
                label=fit(one_line(o.label), MAX_BUTTON),
                custom_id=routing.pick_id(record.id, 0, oi),
                style=discord.ButtonStyle.secondary,
                row=0,
            )
            for oi, o in enumerate(q.options)
        ]
        other = ui.Button[ui.View](label="Other…", custom_id=routing.other_id(record.id, 0), row=0)
        return _view(*buttons, other, *web)
    answer = ui.Button[ui.View](
        label="Answer",
        custom_id=routing.answer_id(record.id),
        style=discord.ButtonStyle.primary,
        row=0,
    )
    return _view(answer, *web)


def step_view(step: routing.Step) -> ui.View:
    """The ephemeral ``Next`` (a typed answer is still needed) or ``Submit`` button."""
    label = "Next" if typed_questions(step.choices) else "Submit"
    button = ui.Button[ui.View](
        label=label,
        custom_id=routing.next_id(step.ask_id, step.choices),
        style=discord.ButtonStyle.primary,
    )
    return _view(button)


def retry_view(custom_id: str, label: str) -> ui.View:
    """One button repeating a control (a form that could not open in time, or again)."""
    return _view(ui.Button[ui.View](label=label, custom_id=custom_id))


def typed_questions(choices: tuple[routing.Choice, ...]) -> list[int]:
    """The questions the typed-answer step asks about: those without a choice, and those the
    person ticked (multiSelect) or typed for before."""
    return [i for i, c in enumerate(choices) if not c.selected or c.typed]


def step_text(step: routing.Step) -> str:
    """The step message: no store work goes into it, so it names questions by number."""
    numbers = [str(i + 1) for i in typed_questions(step.choices)]
    if not numbers:
        return "Your choices are ready (only you see this): press Submit to send them."
    which = "question " if len(numbers) == 1 else "questions "
    which += ", ".join(numbers[:-1]) + (" and " if len(numbers) > 1 else "") + numbers[-1]
    return f"Your choices are kept (only you see this). Next: type your own answer for {which}."


# -- modals -----------------------------------------------------------------------------------


def _modal(title: str, custom_id: str) -> ui.Modal:
    """A modal only to render: stopped, so discord.py keeps no copy (a submission is read from
    its payload, routed by ``custom_id``, so it works after a restart too)."""
    modal = ui.Modal(title=title, custom_id=custom_id, timeout=None)
    modal.stop()
    return modal


def _label(q: Question, prefix: str = "") -> str:
    """A question's label in a modal: its header (cut to :data:`MODAL_HEADER`, so the
    question's first words always follow) and question, within Discord's 45."""
    header = fit(one_line(q.header), MODAL_HEADER)
    return fit(prefix + header + " · " + one_line(q.question), MAX_LABEL)


def form_modal(record: AskRecord) -> ui.Modal:
    """The answer form's (first) modal: see the module docstring."""
    qs = record.questions.questions
    modal = _modal("Answer", routing.answer_id(record.id))
    single = len(qs) <= ONE_MODAL
    for i, q in enumerate(qs):
        options = [
            (fit(one_line(o.label), MAX_OPTION), fit(one_line(o.description), MAX_OPTION))
            for o in q.options
        ]
        component: ui.Item[ui.Modal]
        if q.multiSelect:
            hint = "Choose any."
            component = ui.CheckboxGroup(
                custom_id=ids.pick_field(i),
                required=False,
                min_values=0,
                max_values=len(options),
                options=[
                    discord.CheckboxGroupOption(label=lab, value=str(oi), description=desc)
                    for oi, (lab, desc) in enumerate(options)
                ],
            )
        else:
            hint = "Choose one, or leave empty and type your own answer " + (
                "below." if single else "next."
            )
            component = ui.RadioGroup(
                custom_id=ids.pick_field(i),
                required=False,
                options=[
                    discord.RadioGroupOption(label=lab, value=str(oi), description=desc)
                    for oi, (lab, desc) in enumerate(options)
                ],
            )
        modal.add_item(ui.Label(text=_label(q), description=hint, component=component))
        if single:
            extra = "In addition to your choices." if q.multiSelect else "Instead of choosing."
            modal.add_item(_text_label(q, i, required=False, hint=extra))
    multi = [i for i, q in enumerate(qs) if q.multiSelect]
    if not single and multi:
        ticks = ui.CheckboxGroup[ui.Modal](
            custom_id=ids.TYPED_FOR,
            required=False,
            min_values=0,
            max_values=len(multi),
            options=[discord.CheckboxGroupOption(label=_label(qs[i]), value=str(i)) for i in multi],
        )
        modal.add_item(ui.Label(text="Also type your own answer (Other…) for", component=ticks))
    return modal


def typed_modal(step: routing.Step, record: AskRecord) -> ui.Modal:
    """The typed-answer step: an ``Other…`` text input per question that needs one."""
    qs = record.questions.questions
    modal = _modal("Other…", routing.next_id(step.ask_id, step.choices))
    for i in typed_questions(step.choices):
        if i >= len(qs):
            continue
        chosen = i < len(step.choices) and step.choices[i].selected
        hint = "In addition to your choices." if chosen else None
        modal.add_item(_text_label(qs[i], i, required=not chosen, hint=hint))
    return modal


def other_modal(record: AskRecord, question: int) -> ui.Modal:
    """``Other…`` of the one-click shape: the person types their own answer."""
    q = record.questions.questions[question]
    modal = _modal("Other answer", routing.other_id(record.id, question))
    modal.add_item(_text_label(q, question, required=True, hint=None))
    return modal


def _text_label(q: Question, i: int, *, required: bool, hint: str | None) -> ui.Label[ui.Modal]:
    text_input = ui.TextInput[ui.Modal](
        custom_id=ids.text_field(i),
        style=discord.TextStyle.paragraph,
        required=required,
        max_length=MAX_TYPED,
    )
    description = fit(hint or one_line(q.question), MAX_LABEL_DESCRIPTION)
    return ui.Label(text=_label(q, "Other… "), description=description, component=text_input)


def plain(text: str) -> str:
    """A reply within Discord's content limit."""
    return fit(text, MAX_CONTENT) if units(text) > MAX_CONTENT else text
