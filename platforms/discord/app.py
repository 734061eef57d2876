"""Discord's clicks: interactions parsed into clicks, and Discord's responses to them (the click
step of ask -> post -> click -> resolve -> show, on Discord).

A click on a posted ask reaches the bot over the gateway, and every interaction passes the one
listener (:meth:`Interactions.on_interaction`): a button of ours is read from its ``custom_id``
alone (:meth:`bridge.clicks.Click.control`; discord.py's views and ``DynamicItem`` templates
would rebuild a view from the message on every click first), a modal submission by its
``custom_id``'s kind (:data:`_MODALS`); each is read into a :class:`~bridge.clicks.Click` and
handed, with a Discord responder (:class:`_Reply`), to :meth:`bridge.clicks.Clicks.handle` --
built by the receiver (:class:`platforms.discord.DiscordReceiver`) -- which judges it
(:mod:`bridge.answering`), times it and shows the new state (:mod:`bridge.showing`). Discord's
own rules are the responder's:

* **Routing without memory.** Buttons are routed by their ``custom_id`` on every click, so they
  work after a restart, on any replica and any shard, and never time out. Modal submissions are
  read from the payload, not from discord.py's per-process modal store.
* **3 seconds.** A click is judged before its response when the store answers within the
  budget (well under 3 s): a refusal is the ephemeral response itself; the accepted click that
  ends the ask is answered by updating the message to its final state (UPDATE_MESSAGE: one
  request where a deferred update and an edit were two, :meth:`_Reply._show_final`); any other
  accepted click by a deferred update, the message showing the new state in the background. A
  slow store falls back to a deferred response at once and an ephemeral follow-up with the
  outcome (a form's retry view kept).
* **Modals first.** A modal must be the first response to its click: a control that opens one
  (``Answer``, ``Other…``, ``Next``) does one bounded store read (may this person answer, and the
  question set to render) and then either opens the modal or explains; if the store is slow it
  answers "thinking…" at once and follows up with a button that opens the form. A modal
  Discord refuses is explained where Discord still allows it (:func:`not_opened`).

Every response is sent with allowed mentions that parse nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import discord
from discord import ui
from discord.utils import MISSING

from bridge import routing
from bridge.answering import Caller, Outcome, Picks, Verdict
from bridge.clicks import OPENING, Click, Clicks, Kind, Timing, typing_left
from bridge.record import AskRecord
from bridge.replies import BAD_CONTROL, GONE, NOT_OPENED
from bridge.text import blank
from platforms.discord import ids
from platforms.discord.markup import (
    form_modal,
    other_modal,
    plain,
    render_message,
    retry_view,
    step_text,
    step_view,
    typed_modal,
)
from platforms.discord.poster import DiscordPoster
from platforms.discord.text import NO_MENTIONS, ROLE_PREFIX

log = logging.getLogger(__name__)
RECORDED_NOW = "✅ Your answer is recorded."
FORM_READY = "The form is ready:"
_PICK_FIELD = re.compile(r"^q([0-9])$")
_RETRYABLE = (Outcome.INVALID, Outcome.UNAVAILABLE)
_BUTTON = discord.ComponentType.button.value
_MODAL_SUBMIT = discord.InteractionType.modal_submit
UNKNOWN_INTERACTION = 10062
"""Discord's code for a response to an interaction it no longer knows (its 3 s are over)."""
ALREADY_ACKNOWLEDGED = 40060
"""Discord's code for a second response to one interaction."""


def caller(interaction: discord.Interaction[Any]) -> Caller:
    """Who clicked; in a guild, their roles (read from the interaction's member, through the
    guild cache the non-privileged GUILDS intent keeps) as ``role:ID`` and bare ``ID`` groups."""
    user = interaction.user
    roles = user.roles if isinstance(user, discord.Member) else []
    groups = tuple(g for r in roles for g in (f"{ROLE_PREFIX}{r.id}", str(r.id)))
    return Caller(user_id=str(user.id), name=user.name, groups=groups)


class Interactions:
    """The handlers of one bot: its buttons' clicks and its modals' submissions, both through
    :meth:`on_interaction`, each read into a :class:`~bridge.clicks.Click` for ``clicks``."""

    def __init__(self, clicks: Clicks, poster: DiscordPoster | None = None) -> None:
        self.clicks = clicks
        self.poster = poster
        """The poster that shows this bot's asks' new states: a click that ends an ask shows the
        final state in its own response and tells it so (:meth:`_Reply.respond`)."""

    def install(self, client: discord.Client) -> None:
        """Register the one listener of every interaction on ``client`` (before it connects)."""
        handler = self.on_interaction

        async def on_interaction(interaction: discord.Interaction[Any]) -> None:
            await handler(interaction)

        client.event(on_interaction)

    async def drain(self, within: float = 5.0) -> None:
        await self.clicks.drain(within)

    async def on_click(self, interaction: discord.Interaction[Any], control_id: str | None) -> None:
        """A button of ours; ``control_id`` ``None`` for one that is malformed."""
        who = caller(interaction)
        found = None if control_id is None else Click.control(control_id, who, steps=True)
        click = found or Click.bad(who)
        label = _LABELS.get(click.kind, "")
        reply = _Reply(interaction, click, label=label, poster=self.poster)
        await self.clicks.handle(click, reply)

    # -- modal submissions ----------------------------------------------------------------

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Every interaction passes here; those of our controls are handled, by their
        ``custom_id``: a button's click (:meth:`on_click`), a modal's submission read as
        :data:`_MODALS` says by the kind of the control that opened the modal."""
        sent = interaction.type
        if sent is not discord.InteractionType.component and sent is not _MODAL_SUBMIT:
            return
        data: Mapping[str, Any] = interaction.data or {}
        custom_id = data.get("custom_id")
        if not isinstance(custom_id, str) or not routing.is_ours(custom_id):
            return
        if sent is discord.InteractionType.component:
            well_formed = data.get("component_type") == _BUTTON and not routing.MALFORMED.fullmatch(
                custom_id
            )
            await self.on_click(interaction, custom_id if well_formed else None)
            return
        who = caller(interaction)
        try:
            parsed = routing.parse(custom_id)
        except routing.BadRoute:
            parsed = None
        kind = "next" if isinstance(parsed, routing.Step) else parsed.kind if parsed else None
        read = _MODALS.get(kind or "")
        if parsed is None or read is None:
            bad = Click.bad(who)
            await self.clicks.handle(bad, _Reply(interaction, bad))
            return
        fields = read_fields(data.get("components"))
        submitted = read(parsed, who, fields)
        if submitted.click is None:  # the form's first modal, incomplete: nothing to judge
            assert submitted.step is not None
            await tell(interaction, step_text(submitted.step), view=submitted.retry)
            return
        click = submitted.click
        reply = _Reply(interaction, click, retry=submitted.retry, poster=self.poster)
        await self.clicks.handle(click, reply)


@dataclass(frozen=True)
class _Submitted:
    """A submitted modal, read: the click to judge (``None``: nothing to judge yet, the
    typed-answer step ``step`` is next) and the view that lets the person try again."""

    click: Click | None
    retry: ui.View
    step: routing.Step | None = None


_LABELS = {Kind.FORM: "Answer", Kind.TYPED: "Other…", Kind.STEP: "Next"}
"""The label of the button that opens a form again, by the kind of click that opened it."""


def _typed_answer(
    route: routing.Route | routing.Step, who: Caller, fields: Mapping[str, object]
) -> _Submitted:
    """``Other…``'s modal: one question's typed answer."""
    assert isinstance(route, routing.Route)
    q = route.question
    click = Click(Kind.SUBMIT, route.ask_id, who, picks={q: Picks((), _text(fields, q))})
    return _Submitted(click, retry_view(routing.other_id(route.ask_id, q), "Other…"))


def _typed_step(
    route: routing.Route | routing.Step, who: Caller, fields: Mapping[str, object]
) -> _Submitted:
    """The typed-answer step: the choices carried in its id, the typed text from its fields."""
    assert isinstance(route, routing.Step)
    picks = {
        i: Picks(tuple(sorted(c.selected)), _text(fields, i)) for i, c in enumerate(route.choices)
    }
    return _Submitted(Click(Kind.SUBMIT, route.ask_id, who, picks=picks), step_view(route))


def _first_modal(
    route: routing.Route | routing.Step, who: Caller, fields: Mapping[str, object]
) -> _Submitted:
    """The form's (first) modal: answered at once when it is complete; else no click, and the
    typed-answer step is handed to the person with their choices in its button."""
    picks = read_picks(fields)
    ticked = {routing.index(v) for v in _values(fields.get(ids.TYPED_FOR))}
    one_modal = any(ids.text_field(i) in fields for i in picks)
    # a checkbox group sends a list (multiSelect): only there is typed text kept beside a
    # choice; a single-select choice and typed text are "not both", and a retry keeps the
    # choice
    choices = tuple(
        routing.Choice(
            frozenset(o for o in p.selected if o >= 0),
            typed=i in ticked
            or (not blank(p.text or "") and isinstance(fields.get(ids.pick_field(i)), list)),
        )
        for i, p in sorted(picks.items())
    )
    step = routing.Step(route.ask_id, choices)
    if one_modal or not typing_left(choices):
        return _Submitted(Click(Kind.SUBMIT, route.ask_id, who, picks=picks), step_view(step))
    return _Submitted(None, step_view(step), step)


_MODALS: dict[
    str, Callable[[routing.Route | routing.Step, Caller, Mapping[str, object]], _Submitted]
] = {"answer": _first_modal, "other": _typed_answer, "next": _typed_step}
"""How a submitted modal is read, by the kind of the control that opened it."""


class _Reply:
    """How a click is answered on Discord: the interaction's one response (a modal must be the
    first), or a deferred response and an ephemeral follow-up. A click on the step message (an
    ephemeral message of ours) replaces that message with its outcome."""

    timing = Timing.JUDGE_FIRST
    budget = None

    def __init__(
        self,
        interaction: discord.Interaction[Any],
        click: Click,
        *,
        retry: ui.View | None = None,
        label: str = "",
        poster: DiscordPoster | None = None,
    ) -> None:
        self.interaction = interaction
        self.poster = poster
        self.click = click
        self.retry = retry
        """A form that can be tried again: the view offered with a retryable refusal."""
        self.label = label
        self.opening = click.kind in OPENING or click.kind in (Kind.BAD, Kind.LINK)
        """Answered privately whatever the verdict (an ephemeral response), never by updating
        the message: a form, an explanation, or the person's own link."""
        self.deferred = False

    async def acknowledge(self) -> None:
        self.deferred = True
        if self.opening:
            await self.interaction.response.defer(ephemeral=True, thinking=True)
        else:
            await self.interaction.response.defer()

    async def respond(self, verdict: Verdict) -> bool:
        interaction = self.interaction
        if self.opening:
            await tell(interaction, verdict.explain or GONE)
            return True
        view = self.retry if verdict.outcome in _RETRYABLE else None
        ephemeral_source = _from_ephemeral(interaction)
        if verdict.explain is None:
            if ephemeral_source:  # the step message: show the outcome in place of its button
                await interaction.response.edit_message(
                    content=RECORDED_NOW, view=None, allowed_mentions=NO_MENTIONS
                )
            elif not await self._show_final(verdict):
                await interaction.response.defer()
        elif ephemeral_source:
            await interaction.response.edit_message(
                content=plain(verdict.explain), view=view, allowed_mentions=NO_MENTIONS
            )
        else:
            await tell(interaction, verdict.explain, view=view)
        return True

    async def _show_final(self, verdict: Verdict) -> bool:
        """The click ended the ask, on the ask's one message: the response itself shows the
        final state (UPDATE_MESSAGE) -- one request where a deferred update and an edit of the
        message were two -- and the poster is told, so the showing that follows (its claim, then
        the update: :func:`bridge.showing.show_final`) sends nothing more and marks it shown.
        ``False`` when this is not that click, or Discord refused the rendering (nothing was
        answered yet: the caller defers, and the showing's edit tightens the rendering)."""
        record, poster, message = verdict.record, self.poster, self.interaction.message
        if (
            poster is None
            or record is None
            or not verdict.show_final
            or message is None
            or record.message is None
            or record.escalations
            or record.message.message_id != str(message.id)
        ):
            return False
        final = render_message(record, browser=poster.browser)
        response = self.interaction.response

        def respond() -> Awaitable[object]:
            return response.edit_message(
                content=final.content,
                embeds=final.embeds,
                view=final.view,
                allowed_mentions=final.allowed_mentions,
            )

        try:
            await poster.showing_by_click(record.id, record.message.message_id, respond)
        except discord.HTTPException as refused:
            if poster.refusal(refused) is None:
                raise
            return False
        return True

    async def tell(self, verdict: Verdict) -> None:
        retryable = self.retry is not None and verdict.outcome in _RETRYABLE
        await self.interaction.followup.send(
            plain(verdict.explain or GONE),
            ephemeral=True,
            allowed_mentions=NO_MENTIONS,
            view=self.retry if retryable and self.retry is not None else MISSING,
        )

    async def open_form(self, record: AskRecord) -> None:
        """The modal as the click's response; after a deferred response (too late for a
        modal), a button that opens it."""
        interaction = self.interaction
        if self.deferred:
            await interaction.followup.send(
                FORM_READY,
                view=retry_view(_custom_id(interaction), self.label),
                ephemeral=True,
                allowed_mentions=NO_MENTIONS,
            )
            return
        modal = _modal(self.click, record)
        if not modal.children:  # a forged step asking nothing
            await tell(interaction, BAD_CONTROL)
            return
        try:
            await interaction.response.send_modal(modal)
        except discord.HTTPException as refused:
            await not_opened(interaction, record.id, refused)


def _modal(click: Click, record: AskRecord) -> ui.Modal:
    """The modal a click opens: one question's typed answer, the typed-answer step, the form."""
    if click.kind is Kind.TYPED and click.question is not None:
        return other_modal(record, click.question)
    if click.kind is Kind.STEP and click.step is not None:
        return typed_modal(click.step, record)
    return form_modal(record)


async def not_opened(
    interaction: discord.Interaction[Any], ask_id: str, refused: discord.HTTPException
) -> None:
    """Discord refused the modal, the click's one response: tell the person privately to click
    again where Discord still lets anything reach them, and log one line (an expected event --
    a late click, another process of the bot answering first -- not a bug).

    What Discord allows then depends on why it refused. Already acknowledged (40060, by another
    process run with the same token): the interaction has its response, so its token carries
    follow-ups for 15 minutes -- an ephemeral follow-up. Unknown interaction (10062: the 3 s to
    respond had passed): Discord has invalidated the token, and a follow-up needs a response
    first, so nothing more can reach the person. Any other refusal left the interaction
    unanswered: the message can still be its response (if time remains)."""
    if refused.code == UNKNOWN_INTERACTION:
        outcome = "the click expired, so nothing can reach the person"
    else:
        try:
            if refused.code == ALREADY_ACKNOWLEDGED:
                await interaction.followup.send(
                    NOT_OPENED, ephemeral=True, allowed_mentions=NO_MENTIONS
                )
            else:
                await tell(interaction, NOT_OPENED)
            outcome = "told the person privately to click again"
        except discord.HTTPException as again:
            outcome = f"nor could the person be told ({again})"
    log.warning(
        "could not open the form of ask %s (Discord answered %s): %s", ask_id, refused, outcome
    )


async def tell(
    interaction: discord.Interaction[Any], text: str, *, view: ui.View | None = None
) -> None:
    """An ephemeral message to the person who clicked, as the interaction's response."""
    await interaction.response.send_message(
        plain(text),
        ephemeral=True,
        allowed_mentions=NO_MENTIONS,
        view=view if view is not None else MISSING,
    )


def _custom_id(interaction: discord.Interaction[Any]) -> str:
    data: Mapping[str, Any] = interaction.data or {}
    found = data.get("custom_id")
    return found if isinstance(found, str) else ""


def _from_ephemeral(interaction: discord.Interaction[Any]) -> bool:
    """Whether the clicked control (or the one that opened the modal) is on an ephemeral
    message: our step message, which the response then replaces."""
    message = interaction.message
    return message is not None and message.flags.ephemeral


def read_fields(components: object) -> dict[str, object]:
    """A modal submission's values by custom_id, whatever their nesting (classic action rows or
    ``Label`` s): text and radio values as ``str`` or ``None``, checkbox groups and selects as
    lists of ``str``. Anything of unexpected shape is skipped."""
    found: dict[str, object] = {}

    def walk(items: object) -> None:
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict):
                continue
            if item.get("type") == 1:
                walk(item.get("components"))
            elif item.get("type") == 18:
                walk([item.get("component")])
            elif isinstance(item.get("custom_id"), str):
                if isinstance(item.get("values"), list):
                    found[item["custom_id"]] = [v for v in item["values"] if isinstance(v, str)]
                elif "value" in item:
                    found[item["custom_id"]] = item["value"]

    walk(components)
    return found


def read_picks(fields: Mapping[str, object]) -> dict[int, Picks]:
    """Each question's picks from the form's fields (``q{i}`` choices, ``t{i}`` typed text), as
    sent: the answering layer checks them against the question set. An option value that is not
    an index becomes ``-1``, which it refuses as out of range."""
    questions = {int(m.group(1)) for key in fields if (m := _PICK_FIELD.match(key))}
    return {
        i: Picks(
            tuple(routing.index(v) for v in _values(fields.get(ids.pick_field(i)))),
            _text(fields, i),
        )
        for i in sorted(questions)
    }


def _values(value: object) -> list[str]:
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return [value] if isinstance(value, str) and value else []


def _text(fields: Mapping[str, object], question: int) -> str | None:
    value = fields.get(ids.text_field(question))
    return value if isinstance(value, str) else None
