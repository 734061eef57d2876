"""Discord's clicks and modal submissions translated for the answering layer.

Everything about judging a click -- who may answer, building answers from indices, the store's
verdict, the re-render rule, the words of a refusal -- is :class:`bridge.answering.Answering`'s.
This module turns interactions into plain values and verdicts into interaction responses, within
Discord's rules:

* **Routing without memory.** Buttons are dispatched by one ``ui.DynamicItem`` template
  (:data:`ids.CONTROL`, registered at start-up) that rebuilds the route from the ``custom_id`` on
  every click, so they work after a restart, on any replica and any shard, and never time out.
  Modal submissions are read from the payload and routed by the modal's ``custom_id`` (the
  :func:`on_interaction` listener), not from discord.py's per-process modal store.
* **3 seconds.** A click is judged before its response when the store answers within the
  answering layer's budget (well under 3 s): a refusal is the ephemeral response itself, an
  accepted click a deferred update, and the message is re-rendered in the background. A slow
  store falls back to a deferred response at once and an ephemeral follow-up with the outcome.
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
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import discord
from discord import ui
from discord.utils import MISSING

from bridge import routing
from bridge.answering import Answering, Caller, Outcome, Picks, Verdict
from bridge.record import AskRecord
from bridge.replies import BAD_CONTROL, GONE, NOT_OPENED
from bridge.text import blank
from platforms.discord import ids
from platforms.discord.render import (
    form_modal,
    other_modal,
    plain,
    retry_view,
    step_text,
    step_view,
    typed_modal,
)
from platforms.discord.text import NO_MENTIONS, ROLE_PREFIX

log = logging.getLogger(__name__)
RECORDED_NOW = "✅ Your answer is recorded."
FORM_READY = "The form is ready:"
_PICK_FIELD = re.compile(r"^q([0-9])$")
_RETRYABLE = (Outcome.INVALID, Outcome.UNAVAILABLE)
UNKNOWN_INTERACTION = 10062
"""Discord's code for a response to an interaction it no longer knows (its 3 s are over)."""
ALREADY_ACKNOWLEDGED = 40060
"""Discord's code for a second response to one interaction."""
Parsed = routing.Route | routing.Step | routing.BadRoute | None


def caller(interaction: discord.Interaction[Any]) -> Caller:
    """Who clicked; in a guild, their roles (read from the interaction's member, through the
    guild cache the non-privileged GUILDS intent keeps) as ``role:ID`` and bare ``ID`` groups."""
    user = interaction.user
    roles = user.roles if isinstance(user, discord.Member) else []
    groups = tuple(g for r in roles for g in (f"{ROLE_PREFIX}{r.id}", str(r.id)))
    return Caller(user_id=str(user.id), name=user.name, groups=groups)


class Interactions:
    """The handlers of one bot: buttons (:meth:`on_click`) and modal submissions
    (:meth:`on_interaction`), judged by ``answering``."""

    def __init__(self, answering: Answering) -> None:
        self.answering = answering

    def install(self, client: discord.Client) -> None:
        """Register the button template and the modal listener on ``client`` (before it
        connects)."""
        client.add_dynamic_items(control_item(self))
        handler = self.on_interaction

        async def on_interaction(interaction: discord.Interaction[Any]) -> None:
            await handler(interaction)

        client.event(on_interaction)

    async def drain(self, within: float = 5.0) -> None:
        await self.answering.drain(within)

    # -- buttons --------------------------------------------------------------------------

    async def on_click(self, interaction: discord.Interaction[Any], parsed: Parsed) -> None:
        if parsed is None or isinstance(parsed, routing.BadRoute):
            log.warning("refused a malformed control id from %s", interaction.user.id)
            await tell(interaction, BAD_CONTROL)
            return
        who = caller(interaction)
        answering = self.answering
        if isinstance(parsed, routing.Step):
            step = parsed
            if not _typing_left(step.choices):  # Submit: the choices are complete
                picks = {i: Picks(tuple(sorted(c.selected))) for i, c in enumerate(step.choices)}
                judging = answering.submit_form(step.ask_id, who, picks)
                await self.judge(interaction, judging, retry=None)
                return
            await self.open(
                interaction, step.ask_id, who, None, lambda r: typed_modal(step, r), "Next"
            )
            return
        route = parsed
        if route.kind == "pick":
            judging = answering.pick(route.ask_id, route.question, route.option, who)
            await self.judge(interaction, judging, retry=None)
        elif route.kind == "other":
            q = route.question
            await self.open(
                interaction, route.ask_id, who, q, lambda r: other_modal(r, q), "Other…"
            )
        else:
            await self.open(interaction, route.ask_id, who, None, form_modal, "Answer")

    async def open(
        self,
        interaction: discord.Interaction[Any],
        ask_id: str,
        who: Caller,
        question: int | None,
        build: Callable[[AskRecord], ui.Modal],
        label: str,
    ) -> None:
        """Open a modal as the first response, or explain why not (see the module docstring)."""
        control_id = _custom_id(interaction)

        async def thinking() -> None:
            await interaction.response.defer(ephemeral=True, thinking=True)

        async def late(verdict: Verdict) -> None:
            if verdict.outcome is Outcome.OPEN:
                await interaction.followup.send(
                    FORM_READY,
                    view=retry_view(control_id, label),
                    ephemeral=True,
                    allowed_mentions=NO_MENTIONS,
                )
            else:
                await interaction.followup.send(
                    plain(verdict.explain or GONE), ephemeral=True, allowed_mentions=NO_MENTIONS
                )

        answering = self.answering
        verdict = await answering.in_time(
            answering.open_form(ask_id, who, question), ack=thinking, late=late
        )
        if verdict is None:
            return
        record = verdict.record if verdict.outcome is Outcome.OPEN else None
        modal = build(record) if record is not None else None
        if modal is not None and modal.children:
            try:
                await interaction.response.send_modal(modal)
            except discord.HTTPException as refused:
                await not_opened(interaction, ask_id, refused)
        elif modal is not None:  # a forged step asking nothing
            await tell(interaction, BAD_CONTROL)
        else:
            await tell(interaction, verdict.explain or GONE)
        answering.settle(verdict)

    async def judge(
        self,
        interaction: discord.Interaction[Any],
        judging: Coroutine[Any, Any, Verdict],
        *,
        retry: ui.View | None,
    ) -> None:
        """Judge an answer before responding when the store is quick, else respond at once and
        follow up; a form that could be retried gets ``retry`` (its input kept) with the
        explanation."""
        ephemeral_source = _from_ephemeral(interaction)

        async def deferred() -> None:
            await interaction.response.defer()

        async def late(verdict: Verdict) -> None:
            if verdict.explain:
                view = retry if retry is not None and verdict.outcome in _RETRYABLE else None
                await interaction.followup.send(
                    plain(verdict.explain),
                    ephemeral=True,
                    allowed_mentions=NO_MENTIONS,
                    view=view if view is not None else MISSING,
                )

        answering = self.answering
        verdict = await answering.in_time(judging, ack=deferred, late=late)
        if verdict is None:
            return
        view = retry if verdict.outcome in _RETRYABLE else None
        if verdict.explain is None:
            if ephemeral_source:  # the step message: show the outcome in place of its button
                await interaction.response.edit_message(
                    content=RECORDED_NOW, view=None, allowed_mentions=NO_MENTIONS
                )
            else:
                await interaction.response.defer()
        elif ephemeral_source:
            await interaction.response.edit_message(
                content=plain(verdict.explain), view=view, allowed_mentions=NO_MENTIONS
            )
        else:
            await tell(interaction, verdict.explain, view=view)
        answering.settle(verdict)

    # -- modal submissions ----------------------------------------------------------------

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Every interaction passes here; only submissions of our modals are handled (buttons go
        through the DynamicItem template)."""
        if interaction.type is not discord.InteractionType.modal_submit:
            return
        data: Mapping[str, Any] = interaction.data or {}
        custom_id = data.get("custom_id")
        if not isinstance(custom_id, str) or not routing.is_ours(custom_id):
            return
        try:
            parsed = routing.parse(custom_id)
        except routing.BadRoute:
            log.warning("refused a malformed modal id from %s", interaction.user.id)
            await tell(interaction, BAD_CONTROL)
            return
        fields = read_fields(data.get("components"))
        who = caller(interaction)
        answering = self.answering
        if isinstance(parsed, routing.Step):
            picks = {
                i: Picks(tuple(sorted(c.selected)), _text(fields, i))
                for i, c in enumerate(parsed.choices)
            }
            judging = answering.submit_form(parsed.ask_id, who, picks)
            await self.judge(interaction, judging, retry=step_view(parsed))
            return
        if parsed is None or parsed.kind == "pick":
            await tell(interaction, BAD_CONTROL)
            return
        if parsed.kind == "other":
            q = parsed.question
            picks = {q: Picks((), _text(fields, q))}
            retry = retry_view(routing.other_id(parsed.ask_id, q), "Other…")
            judging = answering.submit_form(parsed.ask_id, who, picks)
            await self.judge(interaction, judging, retry=retry)
            return
        await self.on_form(interaction, parsed.ask_id, who, fields)

    async def on_form(
        self,
        interaction: discord.Interaction[Any],
        ask_id: str,
        who: Caller,
        fields: Mapping[str, object],
    ) -> None:
        """The form's (first) modal: answer at once when it is complete, else hand the person the
        typed-answer step, their choices in its button (no store work: nothing to judge yet)."""
        picks = read_picks(fields)
        ticked = {_index(v) for v in _values(fields.get(ids.TYPED_FOR))}
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
        step = routing.Step(ask_id, choices)
        if one_modal or not _typing_left(choices):
            judging = self.answering.submit_form(ask_id, who, picks)
            await self.judge(interaction, judging, retry=step_view(step))
            return
        await tell(interaction, step_text(step), view=step_view(step))


def _typing_left(choices: tuple[routing.Choice, ...]) -> bool:
    return any(not c.selected or c.typed for c in choices)


def control_item(interactions: Interactions) -> type[ui.DynamicItem[ui.Button[ui.View]]]:
    """The DynamicItem class for every button of ours, bound to ``interactions``."""

    class Control(ui.DynamicItem[ui.Button[ui.View]], template=ids.CONTROL):
        def __init__(self, item: ui.Button[ui.View], parsed: Parsed) -> None:
            super().__init__(item)
            self.parsed = parsed

        @classmethod
        async def from_custom_id(
            cls,
            interaction: discord.Interaction[Any],
            item: ui.Item[Any],
            match: re.Match[str],
            /,
        ) -> Control:
            parsed: Parsed
            try:
                parsed = routing.parse(match.group(0))
            except routing.BadRoute as exc:
                parsed = exc
            if not isinstance(item, ui.Button):
                parsed = routing.BadRoute("not a button")
                item = ui.Button(custom_id=match.group(0))
            return cls(item, parsed)

        async def callback(self, interaction: discord.Interaction[Any]) -> None:
            await interactions.on_click(interaction, self.parsed)

    return Control


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
        i: Picks(tuple(_index(v) for v in _values(fields.get(ids.pick_field(i)))), _text(fields, i))
        for i in sorted(questions)
    }


def _values(value: object) -> list[str]:
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return [value] if isinstance(value, str) and value else []


def _text(fields: Mapping[str, object], question: int) -> str | None:
    value = fields.get(ids.text_field(question))
    return value if isinstance(value, str) else None


def _index(value: str) -> int:
    return int(value) if value.isascii() and value.isdigit() and len(value) < 3 else -1
