"""The Bolt app: clicks and modal submissions, judged by the store, explained to the person.

Every process holds no state of its own: a click is routed by the ask id in its ``action_id`` and
judged by ``Store.submit``, so it works after a restart and on whichever replica Slack picks. Every
click whose verdict finds the ask answered re-renders the message (the accepting one, and any later
one, in case the accepting attempt never got to); every refusal gets an ephemeral explanation (or,
inside a modal, an error or notice there) and changes nothing.

Timing: buttons are acknowledged first and worked on after, in a task of their own. A button
that opens a modal prepares it within :attr:`Interactions.fast_path` seconds or opens a loading
modal at once and fills it in with ``views.update``, so ``views.open`` always lands inside the
3-second ``trigger_id`` window. A modal submission is judged before its ack, bounded by
:attr:`Interactions.submit_budget`, so that errors (incomplete form, store down) show in the modal
with the person's input kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from bridge.ask import AskRecord, AskStatus, Responder
from bridge.models import Answer
from bridge.store.base import Store, SubmitOutcome, SubmitResult
from platforms.slack import ids, replies
from platforms.slack.groups import GroupResolver
from platforms.slack.poster import SlackPoster
from platforms.slack.render import (
    MAX_OTHER_TEXT,
    form_view,
    loading_view,
    notice_view,
    one_click,
    other_view,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


class StoreUnavailable(Exception):
    """The store (or a lookup the judgement needs) failed: nothing was changed."""


@dataclass(frozen=True)
class Picks:
    """One question's part of a submitted modal: chosen option indices and typed text."""

    selected: tuple[int, ...] = ()
    text: str | None = None


@dataclass
class Interactions:
    store: Store
    poster: SlackPoster
    groups: GroupResolver
    fast_path: float = 1.0
    submit_budget: float = 2.0
    store_timeout: float = 5.0
    _log: logging.Logger = field(default=log, repr=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, repr=False)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a click's work after its ack has gone out; kept referenced until done, and any
        failure logged (nobody awaits the task, so it would otherwise be lost)."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("a click's work failed", exc_info=task.exception())

    async def drain(self, within: float = 5.0) -> None:
        """Let clicks in progress finish (store verdict, re-render, explanation) on shutdown."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=within)

    def register(self, app: AsyncApp) -> None:
        async def on_action(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            self._spawn(self.on_action(body, client))

        app.action(ids.ACTION_PATTERN)(on_action)
        app.view(ids.FORM_CALLBACK)(self.on_view)
        app.view(ids.OTHER_CALLBACK)(self.on_view)

    # -- buttons --------------------------------------------------------------------------

    async def on_action(self, body: dict[str, Any], client: AsyncWebClient) -> None:
        actions = body.get("actions") or [{}]
        route = ids.parse_action(str(actions[0].get("action_id", "")))
        user = body.get("user") or {}
        channel = (body.get("channel") or {}).get("id")
        message = body.get("message") or {}
        reply = Reply(client, channel, str(user.get("id", "")), message.get("thread_ts"))
        if route is None or not reply.user:
            return
        if route.kind == "pick":
            await self._pick(route, user, reply)
        else:
            meta = ids.ModalMeta(
                route.ask_id,
                channel=channel,
                thread=message.get("thread_ts"),
                question=route.question if route.kind == "other" else None,
            )
            await self._open(client, str(body.get("trigger_id", "")), meta, user, reply)

    async def _pick(self, route: ids.Route, user: dict[str, Any], reply: Reply) -> None:
        try:
            record = await self._guard(self.store.get(route.ask_id))
            if record is None:
                return await reply(replies.GONE)
            questions = record.questions.questions
            if route.question >= len(questions) or not one_click(record):
                return await reply(replies.GONE)
            question = questions[route.question]
            if route.option >= len(question.options):
                return await reply(replies.GONE)
            label = question.options[route.option].label
            answer = Answer(question=question.question, selected=(label,))
            who = await self._responder(record, user)
            result = await self._guard(self.store.submit(record.id, who, [answer]))
        except StoreUnavailable:
            return await reply(replies.TRY_AGAIN)
        await self._settle(result, reply)

    async def _open(
        self,
        client: AsyncWebClient,
        trigger_id: str,
        meta: ids.ModalMeta,
        user: dict[str, Any],
        reply: Reply,
    ) -> None:
        work = asyncio.ensure_future(self._prepare(meta, user))
        done, _ = await asyncio.wait({work}, timeout=self.fast_path)
        if done:
            view, refusal = work.result()
            if view is None:
                return await reply(refusal or replies.GONE)
            await client.views_open(trigger_id=trigger_id, view=view)
            return None
        opened = await client.views_open(trigger_id=trigger_id, view=loading_view())
        view, refusal = await work
        shown = view or notice_view(refusal or replies.GONE)
        await client.views_update(
            view_id=opened["view"]["id"], hash=opened["view"]["hash"], view=shown
        )
        if refusal:
            await reply(refusal)
        return None

    async def _prepare(
        self, meta: ids.ModalMeta, user: dict[str, Any]
    ) -> tuple[View | None, str | None]:
        """The modal to show, or why there is none."""
        try:
            record = await self._guard(self.store.get(meta.ask_id))
            if record is None:
                return None, replies.GONE
            ended = replies.ended(record)
            if ended:
                return None, ended
            who = await self._responder(record, user)
            if not record.may_answer(who):
                return None, replies.not_allowed(record)
            await self._guard(self.store.record_event(record.id, "opened", user_id=who.user_id))
        except StoreUnavailable:
            return None, replies.TRY_AGAIN
        if meta.question is not None:
            if meta.question >= len(record.questions.questions):
                return None, replies.GONE
            return other_view(record, meta), None
        return form_view(record, meta), None

    # -- modal submissions ----------------------------------------------------------------

    async def on_view(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        view = body.get("view") or {}
        meta = ids.ModalMeta.load(view.get("private_metadata"))
        user = body.get("user") or {}
        if meta is None or not user.get("id"):
            await ack()
            return
        picks, errors = read_form(((view.get("state") or {}).get("values")) or {})
        if errors:
            await ack(response_action="errors", errors=errors)
            return
        try:
            result = await asyncio.wait_for(self._submit(meta, user, picks), self.submit_budget)
        except (StoreUnavailable, TimeoutError):
            first = next(iter(_input_blocks(view)), ids.text_block(0))
            await ack(response_action="errors", errors={first: replies.TRY_AGAIN})
            return
        refusal = replies.refusal(result.outcome, result.record)
        if refusal is None or result.outcome is SubmitOutcome.REPEATED:
            await ack()
        else:
            await ack(response_action="update", view=notice_view(refusal))
        self._spawn(self._settle(result, None))

    async def _submit(
        self, meta: ids.ModalMeta, user: dict[str, Any], picks: dict[int, Picks]
    ) -> SubmitResult:
        record = await self._guard(self.store.get(meta.ask_id))
        if record is None:
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        answers = []
        for i, q in enumerate(record.questions.questions):
            got = picks.get(i, Picks())
            labels = [q.options[o].label for o in sorted(set(got.selected)) if o < len(q.options)]
            if not q.multiSelect:
                labels = labels[:1]
            answers.append(Answer(question=q.question, selected=tuple(labels), other_text=got.text))
        who = await self._responder(record, user)
        return await self._guard(self.store.submit(record.id, who, answers))

    # -- shared ---------------------------------------------------------------------------

    async def _settle(self, result: SubmitResult, reply: Reply | None) -> None:
        """Re-render when the ask is answered, whatever the verdict; explain anything else.

        Not only the accepting click re-renders: the store may have committed an earlier attempt
        whose click timed out here ("try again"), so nobody re-rendered it, and the message keeps
        its controls. The retry comes back ``REPEATED`` (same answer) or ``ALREADY_ANSWERED``
        (changed their mind), and anyone else's click on the stale controls ``ALREADY_ANSWERED``
        too. ``chat.update`` of the final state (from the stored record) is idempotent, so
        rendering again is harmless when someone already did; and it is one update per click,
        never a loop, so there is no storm: once rendered, the message has nothing to click."""
        record = result.record
        if record is not None and record.status is AskStatus.ANSWERED:
            try:
                await self.poster.update(record)
            except Exception:  # the answer stands; a Slack or network failure is only logged
                self._log.exception("answer stored but the message could not be re-rendered")
        if result.outcome is SubmitOutcome.ACCEPTED:
            return
        text = replies.refusal(result.outcome, result.record)
        if reply is not None and text:
            await reply(text)

    async def _responder(self, record: AskRecord, user: dict[str, Any]) -> Responder:
        user_id = str(user.get("id", ""))
        name = user.get("name") or user.get("username")
        groups: tuple[str, ...] = ()
        if record.answerers and user_id not in record.answerers:
            try:
                groups = await self.groups.groups_of(user_id, record.answerers)
            except SlackApiError as exc:
                self._log.warning("user-group lookup failed: %s", exc)
                raise StoreUnavailable("user groups unavailable") from exc
        return Responder(user_id=user_id, name=str(name) if name else None, groups=groups)

    async def _guard(self, op: Coroutine[Any, Any, T]) -> T:
        """Run a store operation; any failure means "unavailable", never a half-done click."""
        try:
            return await asyncio.wait_for(op, self.store_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._log.warning("store unavailable: %r", exc)
            raise StoreUnavailable(str(exc)) from exc


@dataclass(frozen=True)
class Reply:
    """An ephemeral message to the person who clicked, in the ask's channel and thread."""

    client: AsyncWebClient
    channel: str | None
    user: str
    thread: str | None

    async def __call__(self, text: str) -> None:
        if not self.channel:
            return
        try:
            await self.client.chat_postEphemeral(
                channel=self.channel, user=self.user, text=text, thread_ts=self.thread
            )
        except SlackApiError:
            log.exception("could not send an ephemeral explanation")


def read_form(values: dict[str, Any]) -> tuple[dict[int, Picks], dict[str, str]]:
    """Each question's picks from a modal's ``state.values``, or errors keyed by block id."""
    picks: dict[int, Picks] = {}
    errors: dict[str, str] = {}
    found = (ids.block_question(block) for block in values)
    for i in sorted({i for i in found if i is not None}):
        pick = (values.get(ids.pick_block(i)) or {}).get(ids.PICK_ACTION) or {}
        typed = (values.get(ids.text_block(i)) or {}).get(ids.TEXT_ACTION) or {}
        chosen = [pick["selected_option"]] if pick.get("selected_option") else []
        chosen += list(pick.get("selected_options") or [])
        selected = tuple(int(o["value"]) for o in chosen if str(o.get("value", "")).isdigit())
        text = (typed.get("value") or "").strip()[:MAX_OTHER_TEXT] or None
        if not selected and text is None:
            where = ids.pick_block(i) if ids.pick_block(i) in values else ids.text_block(i)
            errors[where] = replies.NEED_ANSWER
        elif text is not None and selected and pick.get("type") == "radio_buttons":
            errors[ids.text_block(i)] = replies.NOT_BOTH
        picks[i] = Picks(selected, text)
    return picks, errors


def _input_blocks(view: dict[str, Any]) -> list[str]:
    blocks = view.get("blocks") or ()
    return [str(b["block_id"]) for b in blocks if b.get("type") == "input" and "block_id" in b]


def build_app(
    store: Store,
    client: AsyncWebClient,
    *,
    signing_secret: str | None,
    fast_path: float = 1.0,
    store_timeout: float = 5.0,
) -> tuple[AsyncApp, Interactions]:
    """A Bolt app answering asks from ``store``, and its handlers (to :meth:`~Interactions.drain`
    on shutdown). Without a signing secret (Socket Mode) HTTP request verification is off: Socket
    Mode payloads arrive over the app-token connection.

    ``process_before_response``: Bolt answers as soon as a listener returns, instead of polling
    for the ack every 10 ms; listeners ack first and hand slow work to :meth:`Interactions._spawn`
    (modal submissions are judged before their ack, within ``submit_budget``)."""
    app = AsyncApp(
        client=client,
        signing_secret=signing_secret or "",
        request_verification_enabled=signing_secret is not None,
        process_before_response=True,
    )
    interactions = Interactions(
        store,
        SlackPoster(client),
        GroupResolver(client),
        fast_path=fast_path,
        store_timeout=store_timeout,
    )
    interactions.register(app)
    return app, interactions
