"""Slack's clicks: Bolt payloads parsed into clicks, and Slack's answers to them (the click
step of ask -> post -> click -> resolve -> show, on Slack).

A click on a posted ask reaches Bolt (over HTTP, :mod:`.http`, or Socket Mode,
:mod:`.socket_mode`); a listener per kind of control (chosen by Bolt's matchers on the
``action_id``, :data:`bridge.routing.TEMPLATES`) reads the payload into a
:class:`~bridge.clicks.Click` and makes a Slack responder for it, and
:meth:`bridge.clicks.Clicks.handle` -- built by the receiver
(:class:`platforms.slack.SlackReceiver`) -- does the rest: judging (:mod:`bridge.answering`),
timing, showing the new state (:mod:`bridge.showing`). Slack's own rules are the responders':

* A button click is judged *before* its ack when the store answers within the budget (so a 200
  for an accepting click means the answer is stored); a slow store falls back to ack-then-judge
  and the person is told the outcome by an ephemeral message.
* A button that opens a modal is acked at once and prepares the modal within
  :attr:`Interactions.fast_path` seconds or opens a loading modal and fills it in with
  ``views.update``, so ``views.open`` always lands inside the 3-second ``trigger_id`` window; a
  modal Slack refuses all the same (a late or repeated click) is explained to the person by an
  ephemeral message.
* A modal submission is judged before its ack, bounded by :attr:`Interactions.submit_budget`, so
  that errors (incomplete form, store down) show in the modal with the person's input kept.

Payloads of odd shape (a signed request from a misbehaving client) are acknowledged and logged in
one line, never raised.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bridge import routing
from bridge.answering import Caller, Outcome, Picks, Verdict
from bridge.clicks import Click, Clicks, Kind, Timing
from bridge.record import AskRecord
from bridge.replies import MAYBE_SAVED, NOT_OPENED
from platforms.slack import ids
from platforms.slack.client import error_code
from platforms.slack.markup import form_view, loading_view, notice_view, other_view

log = logging.getLogger(__name__)


def _not_token_skipped(record: logging.LogRecord) -> bool:
    """Bolt warns at every start that the ``SLACK_BOT_TOKEN`` it finds in the environment is
    unused because we hand it our client (built from that very token): noise, dropped."""
    return record.getMessage() != warning_client_prioritized_and_token_skipped()


logging.getLogger("slack_bolt.AsyncApp").addFilter(_not_token_skipped)


@dataclass
class Interactions:
    """Slack's listeners, one per kind of control (Bolt runs the first whose matcher fits), each
    turning its payload into a :class:`~bridge.clicks.Click` and a Slack responder for
    :meth:`Clicks.handle <bridge.clicks.Clicks.handle>`."""

    clicks: Clicks
    fast_path: float = 1.0
    submit_budget: float = 2.0

    def register(self, app: AsyncApp) -> None:
        app.action(routing.whole(routing.TEMPLATES["pick"]))(self.on_pick)
        app.action(routing.whole(routing.TEMPLATES["other"]))(self.on_open)
        app.action(routing.whole(routing.TEMPLATES["answer"]))(self.on_open)
        app.action(routing.whole(routing.TEMPLATES["web"]))(self.on_link)
        app.action(ids.ACTION_PATTERN)(self.on_malformed)  # last: every other id of ours
        app.view(ids.FORM_CALLBACK)(self.on_view)
        app.view(ids.OTHER_CALLBACK)(self.on_view)

    async def drain(self, within: float = 5.0) -> None:
        """Let clicks in progress finish (verdict, showing, explanation) on shutdown."""
        await self.clicks.drain(within)

    # -- buttons --------------------------------------------------------------------------

    async def on_pick(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        """A one-click answer: judged before the ack when the store is quick."""
        await self._handle(ack, body, client, Timing.JUDGE_FIRST, None)

    async def on_open(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        """A button that opens a modal: acked at once, the modal opened within
        :attr:`fast_path` (else a loading modal at once, filled in later)."""
        await self._handle(ack, body, client, Timing.ACK_FIRST, self.fast_path)

    async def on_link(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        """``Open in browser``: judged before the ack as a click is; the person's own link (or
        why there is none) follows in an ephemeral message only they see."""
        await self._handle(ack, body, client, Timing.JUDGE_FIRST, None)

    async def on_malformed(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient
    ) -> None:
        """Any other id of ours (forged, stale, a form step: Slack's forms take one): the
        person is told, nothing changes."""
        await self._handle(ack, body, client, Timing.JUDGE_FIRST, None, malformed=True)

    async def _handle(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        client: AsyncWebClient,
        timing: Timing,
        budget: float | None,
        *,
        malformed: bool = False,
    ) -> None:
        read = _ActionPayload.read(body)
        if read is None:
            log.warning("ignored a block action of unexpected shape")
            await ack()
            return
        found = Click.control(read.action_id, read.who, steps=False)
        click = Click.bad(read.who) if malformed or found is None else found
        if timing is Timing.ACK_FIRST:
            await ack()
        question = click.question if click.kind is Kind.TYPED else None
        meta = ids.ModalMeta(click.ask_id, read.channel, read.thread, question)
        reply = Reply(client, read.channel, read.who.user_id, read.thread)
        responder = _Action(timing, budget, ack, client, read.trigger_id, meta, reply)
        await self.clicks.handle(click, responder)

    # -- modal submissions ----------------------------------------------------------------

    async def on_view(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        """A submitted modal: judged before its ack, within :attr:`submit_budget`, so that its
        problems show in the modal with the person's input kept."""
        view = _dict(body.get("view"))
        meta = ids.ModalMeta.load(view.get("private_metadata"))
        who = _caller(body.get("user"))
        if meta is None or who is None:
            log.warning("ignored a view submission of unexpected shape")
            await ack()
            return
        values = _dict(_dict(view.get("state")).get("values"))
        click = Click(Kind.SUBMIT, meta.ask_id, who, picks=read_form(values))
        reply = Reply(client, meta.channel, who.user_id, meta.thread)
        responder = _Submission(self.submit_budget, ack, _input_blocks(view), meta, reply)
        await self.clicks.handle(click, responder)


@dataclass
class _Action:
    """How a button click is answered on Slack: an ack (empty: a button's ack carries nothing),
    ephemeral messages, and the modal opened by the click's ``trigger_id`` -- at once, or as a
    loading modal filled in with ``views.update``. When Slack refuses to open or fill it in (the
    ``trigger_id`` expired or already used, the modal closed meanwhile) the person would be left
    with nothing on screen: they are told to click again (or why they cannot answer), and the
    log gets one line."""

    timing: Timing
    budget: float | None
    ack: AsyncAck
    client: AsyncWebClient
    trigger_id: str
    meta: ids.ModalMeta
    reply: Reply
    held: bool = False
    """The verdict came late: a loading modal was asked for."""
    loading: AsyncSlackResponse | None = None
    """That loading modal, once Slack opened it."""

    async def acknowledge(self) -> None:
        if self.timing is not Timing.ACK_FIRST:
            await self.ack()
            return
        self.held = True
        try:
            self.loading = await self.client.views_open(
                trigger_id=self.trigger_id, view=loading_view()
            )
        except SlackApiError as exc:
            _not_opened(self.meta, exc)

    async def respond(self, verdict: Verdict) -> bool:
        if self.timing is not Timing.ACK_FIRST:  # an opening click was acked on arrival
            await self.ack()
        return False

    async def tell(self, verdict: Verdict) -> None:
        if self.loading is not None:
            await self._fill(notice_view(verdict.explain or ""))
        await self.reply(verdict.explain or "")

    async def open_form(self, record: AskRecord) -> None:
        meta = self.meta
        view = other_view(record, meta) if meta.question is not None else form_view(record, meta)
        if not self.held:
            try:
                await self.client.views_open(trigger_id=self.trigger_id, view=view)
            except SlackApiError as exc:
                _not_opened(meta, exc)
                await self.reply(NOT_OPENED)
        elif self.loading is None or not await self._fill(view):
            await self.reply(NOT_OPENED)

    async def _fill(self, view: View) -> bool:
        """Show ``view`` in the loading modal; ``False`` if Slack refused."""
        assert self.loading is not None
        shown = self.loading["view"]
        try:
            await self.client.views_update(view_id=shown["id"], hash=shown["hash"], view=view)
        except SlackApiError as exc:
            _not_opened(self.meta, exc)
            return False
        return True


@dataclass
class _Submission:
    """How a modal submission is answered on Slack: its ack carries the verdict -- the modal
    closes, shows a notice, or keeps the person's input with each problem on its field."""

    budget: float
    ack: AsyncAck
    inputs: list[str]
    meta: ids.ModalMeta
    reply: Reply
    timing: Timing = Timing.VERDICT_ONLY

    async def acknowledge(self) -> None:
        await self.ack()

    async def respond(self, verdict: Verdict) -> bool:
        inputs = self.inputs
        if verdict.outcome is Outcome.UNAVAILABLE:
            first = inputs[0] if inputs else ids.text_block(0)
            await self.ack(response_action="errors", errors={first: verdict.explain or MAYBE_SAVED})
        elif verdict.outcome is Outcome.INVALID and verdict.problems:
            await self.ack(response_action="errors", errors=_field_errors(verdict, inputs))
        elif verdict.stands or not verdict.explain:
            await self.ack()
        else:
            await self.ack(response_action="update", view=notice_view(verdict.explain))
        return True

    async def tell(self, verdict: Verdict) -> None:
        await self.reply(verdict.explain or "")

    async def open_form(self, record: AskRecord) -> None:
        await self.ack(response_action="update", view=form_view(record, self.meta))


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
class _ActionPayload:
    """The parts of a ``block_actions`` payload a click needs, checked for shape."""

    action_id: str
    who: Caller
    channel: str | None
    thread: str | None
    trigger_id: str

    @classmethod
    def read(cls, body: dict[str, Any]) -> _ActionPayload | None:
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
        selected = tuple(routing.index(_dict(o).get("value")) for o in chosen)
        picks[i] = Picks(selected, _str(typed.get("value")))
    return picks


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


class OwnClient(AsyncMiddleware):
    """Hands every request ``client`` itself (see :func:`build_app`). A middleware class, not a
    function: Bolt calls a function with the arguments it names, and finds those by building
    every argument any listener could ask for (the payload's action, view and message, ``say``,
    ``respond``...): 10-20 us of every request."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse | None:
        req.context["client"] = self.client
        return await next()


def build_app(
    clicks: Clicks, client: AsyncWebClient, *, fast_path: float = 1.0
) -> tuple[AsyncApp, Interactions]:
    """A Bolt app handing its clicks to ``clicks`` (the receiver's entry point, built by
    :func:`bridge.clicks.answer_clicks` as every platform's is), and its handlers (to
    :meth:`~Interactions.drain` on shutdown). Bolt's request verification is off: an HTTP
    request is verified once, before it is parsed, by the route that hands it over
    (:func:`platforms.slack.http.events_route`), and Socket Mode payloads arrive over the
    app-token connection.

    ``process_before_response``: Bolt answers when a listener returns, so a listener that judges
    a click before acking has the verdict stored before Slack sees the 200; slow work runs in
    the background of :class:`~bridge.clicks.Clicks`.

    Every request is handled with ``client`` itself (its token never changes), not the plain
    per-request copy Bolt would make: Bolt's own ``auth.test`` and every handler's call then go
    through the client that watches for a revoked token
    (:class:`platforms.slack.client.WatchedClient`)."""

    app = AsyncApp(
        before_authorize=OwnClient(client),
        client=client,
        request_verification_enabled=False,
        process_before_response=True,
    )
    interactions = Interactions(clicks, fast_path=fast_path)
    interactions.register(app)
    return app, interactions
