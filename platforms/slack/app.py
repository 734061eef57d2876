"""The Bolt app: Slack's clicks and modal submissions translated for the answering layer.

Everything about judging a click -- who may answer, building answers from indices, the store's
verdict, the re-render rule, the words of a refusal -- is :class:`bridge.answering.Answering`'s.
This module only turns Slack payloads into plain values and verdicts back into Slack responses,
within Slack's timing rules:

* A button click is judged *before* its ack when the store answers within the answering layer's
  budget (so a 200 for an accepting click means the answer is stored); a slow store falls back to
  ack-then-judge and the person is told the outcome by an ephemeral message.
* A button that opens a modal prepares it within :attr:`Interactions.fast_path` seconds or opens a
  loading modal at once and fills it in with ``views.update``, so ``views.open`` always lands inside
  the 3-second ``trigger_id`` window; a modal Slack refuses all the same (a late or repeated
  click) is explained to the person by an ephemeral message.
* A modal submission is judged before its ack, bounded by :attr:`Interactions.submit_budget`, so
  that errors (incomplete form, store down) show in the modal with the person's input kept.

Payloads of odd shape (a signed request from a misbehaving client) are acknowledged and logged in
one line, never raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.errors import SlackApiError
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from bridge import routing
from bridge.answering import BACKSTOP, Answering, Caller, Outcome, Picks, Verdict
from bridge.replies import BAD_CONTROL, MAYBE_SAVED, NOT_OPENED
from bridge.store.base import Store, giving_up_after
from platforms.slack import ids
from platforms.slack.client import error_code
from platforms.slack.groups import GroupResolver
from platforms.slack.poster import SlackPoster
from platforms.slack.render import REPLIES, form_view, loading_view, notice_view, other_view

log = logging.getLogger(__name__)


def _not_token_skipped(record: logging.LogRecord) -> bool:
    """Bolt warns at every start that the ``SLACK_BOT_TOKEN`` it finds in the environment is
    unused because we hand it our client (built from that very token): noise, dropped."""
    return record.getMessage() != warning_client_prioritized_and_token_skipped()


logging.getLogger("slack_bolt.AsyncApp").addFilter(_not_token_skipped)


@dataclass
class Interactions:
    answering: Answering
    fast_path: float = 1.0
    submit_budget: float = 2.0

    def register(self, app: AsyncApp) -> None:
        app.action(ids.ACTION_PATTERN)(self.on_action)
        app.view(ids.FORM_CALLBACK)(self.on_view)
        app.view(ids.OTHER_CALLBACK)(self.on_view)

    async def drain(self, within: float = 5.0) -> None:
        """Let clicks in progress finish (verdict, re-render, explanation) on shutdown."""
        await self.answering.drain(within)

    # -- buttons --------------------------------------------------------------------------

    async def on_action(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        click = _Click.read(body)
        if click is None:
            log.warning("ignored a block action of unexpected shape")
            await ack()
            return
        reply = Reply(client, click.channel, click.who.user_id, click.thread)
        try:
            route = routing.parse(click.action_id)
        except routing.BadRoute:
            log.warning("ignored a malformed action id from %s", click.who.user_id)
            await ack()
            self.answering.spawn(reply(BAD_CONTROL))
            return
        if route is None:
            await ack()
            return
        if isinstance(route, routing.Step):  # Slack's forms take one step: not from us
            await ack()
            self.answering.spawn(reply(BAD_CONTROL))
            return
        if route.kind != "pick":
            await ack()
            meta = ids.ModalMeta(
                route.ask_id,
                channel=click.channel,
                thread=click.thread,
                question=route.question if route.kind == "other" else None,
            )
            self.answering.spawn(self._open(client, click.trigger_id, meta, click.who, reply))
            return

        async def late(verdict: Verdict) -> None:
            if verdict.explain:
                await reply(verdict.explain)

        answering = self.answering
        judging = answering.pick(route.ask_id, route.question, route.option, click.who)
        verdict = await answering.in_time(judging, ack=ack, late=late)
        if verdict is None:  # acknowledged already; ``late`` tells the person
            return
        await ack()
        answering.settle(verdict)
        if verdict.explain:
            answering.spawn(reply(verdict.explain))

    async def _open(
        self,
        client: AsyncWebClient,
        trigger_id: str,
        meta: ids.ModalMeta,
        who: Caller,
        reply: Reply,
    ) -> None:
        """Open the form (or a loading modal, filled in when the form is ready). When Slack
        refuses to open or fill it in (the ``trigger_id`` expired or already used, the modal
        closed meanwhile) the person would be left with nothing on screen: they are told to click
        again (or why they cannot answer), and the log gets one line."""
        work = asyncio.ensure_future(self._prepare(meta, who))
        done, _ = await asyncio.wait({work}, timeout=self.fast_path)
        try:
            if done:
                view, refusal = work.result()
                if view is None:
                    return await reply(refusal or "")
                await client.views_open(trigger_id=trigger_id, view=view)
                return None
            opened = await client.views_open(trigger_id=trigger_id, view=loading_view())
        except SlackApiError as exc:
            _not_opened(meta, exc)
            _, refusal = await work  # a refusal is the truer answer: clicking again won't help
            await reply(refusal or NOT_OPENED)
            return None
        view, refusal = await work
        shown = view or notice_view(refusal or "")
        try:
            await client.views_update(
                view_id=opened["view"]["id"], hash=opened["view"]["hash"], view=shown
            )
        except SlackApiError as exc:
            _not_opened(meta, exc)
            refusal = refusal or NOT_OPENED
        if refusal:
            await reply(refusal)
        return None

    async def _prepare(self, meta: ids.ModalMeta, who: Caller) -> tuple[View | None, str | None]:
        """The modal to show, or why there is none."""
        verdict = await self.answering.open_form(meta.ask_id, who, meta.question)
        self.answering.settle(verdict)
        if verdict.outcome is not Outcome.OPEN or verdict.record is None:
            return None, verdict.explain
        if meta.question is not None:
            return other_view(verdict.record, meta), None
        return form_view(verdict.record, meta), None

    # -- modal submissions ----------------------------------------------------------------

    async def on_view(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        view = _dict(body.get("view"))
        meta = ids.ModalMeta.load(view.get("private_metadata"))
        who = _caller(body.get("user"))
        if meta is None or who is None:
            log.warning("ignored a view submission of unexpected shape")
            await ack()
            return
        inputs = _input_blocks(view)
        values = _dict(_dict(view.get("state")).get("values"))
        with giving_up_after(self.submit_budget):  # the store withdraws what it did not send
            judging = self.answering.submit_form(meta.ask_id, who, read_form(values))
            try:
                verdict = await asyncio.wait_for(judging, self.submit_budget + BACKSTOP)
            except TimeoutError:
                verdict = None
        if verdict is None or verdict.outcome is Outcome.UNAVAILABLE:
            first = inputs[0] if inputs else ids.text_block(0)
            words = MAYBE_SAVED if verdict is None else verdict.explain or MAYBE_SAVED
            await ack(response_action="errors", errors={first: words})
            return
        if verdict.outcome is Outcome.INVALID and verdict.problems:
            await ack(response_action="errors", errors=_field_errors(verdict, inputs))
            return
        if verdict.stands or not verdict.explain:
            await ack()
        else:
            await ack(response_action="update", view=notice_view(verdict.explain))
        self.answering.settle(verdict)


def _not_opened(meta: ids.ModalMeta, error: SlackApiError) -> None:
    """Slack refusing a modal is an expected event (a late or repeated click), not a bug: one
    line naming Slack's error, no traceback."""
    log.warning(
        "could not open the form of ask %s: Slack answered %s",
        meta.ask_id,
        error_code(error) or error,
    )


@dataclass(frozen=True)
class Reply:
    """An ephemeral message to the person who clicked, in the ask's channel and thread."""

    client: AsyncWebClient
    channel: str | None
    user: str
    thread: str | None

    async def __call__(self, text: str) -> None:
        if not self.channel or not text:
            return
        try:
            await self.client.chat_postEphemeral(
                channel=self.channel, user=self.user, text=text, thread_ts=self.thread
            )
        except SlackApiError:
            log.exception("could not send an ephemeral explanation")


@dataclass(frozen=True)
class _Click:
    """The parts of a ``block_actions`` payload a click needs, checked for shape."""

    action_id: str
    who: Caller
    channel: str | None
    thread: str | None
    trigger_id: str

    @classmethod
    def read(cls, body: dict[str, Any]) -> _Click | None:
        actions = body.get("actions")
        first = actions[0] if isinstance(actions, list) and actions else None
        action_id = first.get("action_id") if isinstance(first, dict) else None
        who = _caller(body.get("user"))
        if not isinstance(action_id, str) or who is None:
            return None
        message = _dict(body.get("message"))
        return cls(
            action_id=action_id,
            who=who,
            channel=_str(_dict(body.get("channel")).get("id")),
            thread=_str(message.get("thread_ts")),
            trigger_id=_str(body.get("trigger_id")) or "",
        )


def _caller(user: object) -> Caller | None:
    """Who clicked; ``None`` unless the payload's ``user`` is an object with a string id."""
    if not isinstance(user, dict):
        return None
    user_id = _str(user.get("id"))
    if not user_id:
        return None
    name = _str(user.get("name")) or _str(user.get("username"))
    return Caller(user_id=user_id, name=name)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def read_form(values: dict[str, Any]) -> dict[int, Picks]:
    """Each question's picks from a modal's ``state.values`` (our block ids ``q{i}.pick`` and
    ``q{i}.other``), as sent: the answering layer checks them against the question set. An option
    value that is not an index becomes ``-1``, which it refuses as out of range."""
    picks: dict[int, Picks] = {}
    found = (ids.block_question(block) for block in values)
    for i in sorted({i for i in found if i is not None}):
        pick = _dict(_dict(values.get(ids.pick_block(i))).get(ids.PICK_ACTION))
        typed = _dict(_dict(values.get(ids.text_block(i))).get(ids.TEXT_ACTION))
        chosen = [pick.get("selected_option")] if pick.get("selected_option") else []
        many = pick.get("selected_options")
        chosen += many if isinstance(many, list) else []
        selected = tuple(_index(_dict(o).get("value")) for o in chosen)
        picks[i] = Picks(selected, _str(typed.get("value")))
    return picks


def _index(value: object) -> int:
    text = value if isinstance(value, str) else ""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 3 else -1


def _input_blocks(view: dict[str, Any]) -> list[str]:
    blocks = view.get("blocks")
    found = blocks if isinstance(blocks, list) else []
    return [
        str(b["block_id"])
        for b in found
        if isinstance(b, dict) and b.get("type") == "input" and "block_id" in b
    ]


def _field_errors(verdict: Verdict, inputs: list[str]) -> dict[str, str]:
    """The answering layer's problems, each on the modal field it is about (typed-text problems on
    the text field; a question the modal does not show on its first field)."""
    errors: dict[str, str] = {}
    for i, problem in verdict.problems.items():
        fields = (ids.pick_block(i), ids.text_block(i))
        preferred = fields[::-1] if problem.typed else fields
        where = next((b for b in preferred if b in inputs), inputs[0] if inputs else None)
        if where is not None:
            errors.setdefault(where, problem.text)
    return errors


def build_app(
    store: Store,
    client: AsyncWebClient,
    *,
    fast_path: float = 1.0,
    store_timeout: float = 5.0,
) -> tuple[AsyncApp, Interactions]:
    """A Bolt app answering asks from ``store``, and its handlers (to :meth:`~Interactions.drain`
    on shutdown). Bolt's request verification is off: an HTTP request is verified once, before
    it is parsed, by the route that hands it over (:func:`platforms.slack.http.events_route`),
    and Socket Mode payloads arrive over the app-token connection.

    ``process_before_response``: Bolt answers when a listener returns, so a listener that judges
    a click before acking has the verdict stored before Slack sees the 200; slow work is handed
    to :meth:`Answering.spawn`.

    Every request is handled with ``client`` itself (its token never changes), not the plain
    per-request copy Bolt would make: Bolt's own ``auth.test`` and every handler's call then go
    through the client that watches for a revoked token
    (:class:`platforms.slack.client.WatchedClient`)."""

    async def own_client(context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:
        context["client"] = client
        await next()

    app = AsyncApp(
        before_authorize=own_client,
        client=client,
        request_verification_enabled=False,
        process_before_response=True,
    )
    answering = Answering(
        store,
        SlackPoster(client),
        REPLIES,
        membership=GroupResolver(client),
        store_timeout=store_timeout,
    )
    interactions = Interactions(answering, fast_path=fast_path)
    interactions.register(app)
    return app, interactions
