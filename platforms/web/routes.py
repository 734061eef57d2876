"""The web platform's HTTP handlers: a link verified, a request read into a
:class:`~bridge.clicks.Click`, and a :class:`PageResponder` that renders the verdict as the page.

An ask's page is a click on the same path as a chat's buttons: opening it is the ``Answer`` button
(:attr:`Kind.FORM <bridge.clicks.Kind.FORM>`: may this person answer? recorded as ``opened``),
its Submit a form's submission (:attr:`Kind.SUBMIT <bridge.clicks.Kind.SUBMIT>`), both judged by
:class:`~bridge.clicks.Clicks` and shown on the ask's other messages the same way.

**Who answers.** The link's :class:`~bridge.web_links.Person`: a person bound to a chat identity
(``slack``, ``discord``: a link made from that chat) is that user id, judged with that
platform's poster (its id rules, its cross-platform identities, its message shown again), so
"who may answer" and approvals count them as in the chat; a ``web`` person is their name. Group
membership (Slack user groups, Discord roles) is not looked up here: a browser carries no
interaction to read roles from, and the web platform holds no platform's API client for it. So
the caller's groups are known to be none (``Caller.groups=()``): someone allowed only through a
group is refused on the web -- and told to answer in the chat -- rather than let in on a guess.
That is exact for everyone named directly, and never admits anyone the chat would not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from importlib.resources import files
from urllib.parse import urlencode

from aiohttp import web

from bridge.answering import Caller, Outcome, Picks, Verdict
from bridge.clicks import Click, Clicks, Kind, Timing
from bridge.identities import Identities
from bridge.judging import may_answer
from bridge.platform import HttpRoute, PlatformUnavailable
from bridge.record import AskRecord, AskStatus, Responder
from bridge.store.base import Store, StoreUnavailable
from bridge.store.terms import page_cursor
from bridge.web_links import ASK_PATH, INBOX_PATH, Link, LinkError, LinkExpired, Links, shown
from platforms.web import pages
from platforms.web.live import HEARTBEAT, LiveAsks, event, until, version
from platforms.web.poster import WEB
from platforms.web.security import Csrf, RateLimit, same_origin, secure

log = logging.getLogger(__name__)
STATIC_PATH = "/static/web/"
STATIC = {"web.css": "text/css", "web.js": "text/javascript"}
INBOX_PAGE = 20
"""Asks an inbox page lists."""
INBOX_READS = 10
"""Pages of the store's listing one inbox page reads at most."""
BUDGET = 5.0
"""Seconds a verdict may take: a page has no platform deadline, only the store's own."""
GROUPS_ON_WEB = (
    " If you may answer through a group or role, answer in the chat instead: the browser "
    "counts only people named directly."
)


class PageResponder:
    """Answers one request's click with a page: the verdict is rendered, never acknowledged
    without it (:attr:`Timing.VERDICT_ONLY`: the response is the verdict)."""

    timing = Timing.VERDICT_ONLY
    budget: float | None = BUDGET

    def __init__(self, render: Callable[[Verdict], web.StreamResponse]) -> None:
        self._render = render
        self.response: web.StreamResponse | None = None

    async def acknowledge(self) -> None:
        """Never called for ``VERDICT_ONLY``: the page waits for its verdict."""

    async def respond(self, verdict: Verdict) -> bool:
        self.response = self._render(verdict)
        return True

    async def tell(self, verdict: Verdict) -> None:
        self.response = self._render(verdict)

    async def open_form(self, record: AskRecord) -> None:
        self.response = self._render(Verdict(Outcome.OPEN, record, None, show_final=False))


def html(text: str, status: int = 200) -> web.Response:
    response = web.Response(text=text, status=status, content_type="text/html")
    secure(response)
    return response


def message(title: str, text: str, status: int) -> web.Response:
    return html(pages.render_message(title, text), status)


class WebRoutes:
    """The web platform's handlers over one store: ``clicks_for(platform)`` is the click entry
    point judging people of that platform (see the module), ``links`` verifies and makes links
    (its base URL: the public one, else links made here are relative), ``csrf`` signs forms."""

    def __init__(
        self,
        store: Store,
        links: Links,
        csrf: Csrf,
        clicks_for: Callable[[str], Clicks],
        *,
        operator: Callable[[str], bool],
        public_url: str | None,
        live: LiveAsks,
        limit: RateLimit,
        identities: Identities,
    ) -> None:
        self.store = store
        self.links = links
        self.csrf = csrf
        self.clicks_for = clicks_for
        self.operator = operator
        self.public_url = public_url
        self.live = live
        self.limit = limit
        self.identities = identities

    def routes(self) -> list[HttpRoute]:
        return [
            HttpRoute("GET", ASK_PATH + "{token}", self.ask_page),
            HttpRoute("POST", ASK_PATH + "{token}", self.submit),
            HttpRoute("GET", ASK_PATH + "{token}/events", self.events),
            HttpRoute("GET", INBOX_PATH + "{token}", self.inbox),
            HttpRoute("GET", INBOX_PATH.rstrip("/"), self.operator_inbox),
            HttpRoute("GET", STATIC_PATH + "{name}", self.static),
        ]

    # -- links -----------------------------------------------------------------------------------

    def _link(self, request: web.Request, *, ask: bool) -> Link | web.Response:
        """The request's verified link, or the page saying why it opens nothing (403 forged or
        tampered, 410 expired, 404 a link of the other kind); nothing is read or changed."""
        token = request.match_info["token"]
        try:
            link = self.links.verify(token)
        except LinkError as exc:
            status = 410 if isinstance(exc, LinkExpired) else 403
            log.info("web: refused link %s (%d)", shown(token), status)
            return message("This link does not open", str(exc), status)
        if (link.ask_id is not None) is not ask:
            what = "an ask's page" if link.ask_id is not None else "an inbox"
            return message("Wrong kind of link", f"This link opens {what}, not this page.", 404)
        return link

    @staticmethod
    def _caller(link: Link) -> Caller:
        return Caller(link.person.user_id, link.person.name, groups=())

    def _judge(self, link: Link) -> Clicks | web.Response:
        try:
            return self.clicks_for(link.person.platform)
        except PlatformUnavailable as exc:
            where = link.person.platform
            text = f"This link is for a {where} identity, which this server cannot judge: {exc}"
            return message("Cannot answer here", text, 503)

    # -- an ask's page ---------------------------------------------------------------------------

    async def ask_page(self, request: web.Request) -> web.StreamResponse:
        link = self._link(request, ask=True)
        if isinstance(link, web.Response):
            return link
        clicks = self._judge(link)
        if isinstance(clicks, web.Response):
            return clicks
        assert link.ask_id is not None
        token = request.match_info["token"]
        notice = "Your answer was sent." if request.query.get("sent") else None
        responder = PageResponder(lambda v: self._page(v, link, token, notice=notice))
        await clicks.handle(Click(Kind.FORM, link.ask_id, self._caller(link)), responder)
        assert responder.response is not None
        return responder.response

    async def submit(self, request: web.Request) -> web.StreamResponse:
        link = self._link(request, ask=True)
        if isinstance(link, web.Response):
            return link
        assert link.ask_id is not None
        token = request.match_info["token"]
        form = await request.post()
        given = form.get("csrf")
        if not same_origin(request, self.public_url) or not (
            isinstance(given, str) and self.csrf.valid(token, given)
        ):
            log.warning("web: refused a cross-site or unsigned form for ask %s", link.ask_id)
            text = "This form was not sent from its own page: reload the page and send it again."
            return message("Form refused", text, 403)
        person = link.person
        if not self.limit.allow(f"{person.platform}:{person.user_id}"):
            log.warning("web: %s submits too often (ask %s)", person.user_id, link.ask_id)
            text = "Too many answers sent in a short time: wait a minute, then send it again."
            response = message("Slow down", text, 429)
            response.headers["Retry-After"] = "60"
            return response
        clicks = self._judge(link)
        if isinstance(clicks, web.Response):
            return clicks
        picks = pages.read_form(form)
        click = Click(Kind.SUBMIT, link.ask_id, self._caller(link), picks=picks)
        responder = PageResponder(lambda v: self._submitted(v, link, token, picks))
        await clicks.handle(click, responder)
        assert responder.response is not None
        return responder.response

    def _submitted(
        self, verdict: Verdict, link: Link, token: str, picks: dict[int, Picks]
    ) -> web.StreamResponse:
        who = f"{link.person.platform}:{link.person.user_id}"
        log.info("web: ask %s, submit by %s: %s", link.ask_id, who, verdict.outcome.value)
        if verdict.outcome in (Outcome.ACCEPTED, Outcome.RECORDED):
            # Post/Redirect/Get: a reload does not send it again
            found = web.Response(status=303, headers={"Location": f"{ASK_PATH}{token}?sent=1"})
            secure(found)
            return found
        if verdict.outcome is Outcome.INVALID and verdict.problems:
            return self._page(verdict, link, token, kept=picks, status=422)
        return self._page(verdict, link, token)

    def _page(
        self,
        verdict: Verdict,
        link: Link,
        token: str,
        *,
        notice: str | None = None,
        kept: dict[int, Picks] | None = None,
        status: int | None = None,
    ) -> web.Response:
        """The ask's page for ``verdict``: the form while this person may answer, the state
        (without a form) once it ended, the refusal otherwise."""
        record, outcome = verdict.record, verdict.outcome
        if record is None:
            code = 503 if outcome is Outcome.UNAVAILABLE else 404
            return message("Not available", verdict.explain or "", code)
        may = outcome in (Outcome.OPEN, Outcome.INVALID, Outcome.REPEATED, Outcome.RECORDED)
        words = verdict.explain
        if outcome is Outcome.NOT_ALLOWED and words is not None:
            words += GROUPS_ON_WEB
        if outcome is Outcome.INVALID and verdict.problems:
            words = "Your answer was not saved: see the questions marked below."
        if outcome is Outcome.UNAVAILABLE and words is not None:
            status = status or 503
        page = pages.AskPage(
            record,
            self.csrf.token(token) if may else None,
            # the page after one's own submit says it was sent, not "already answered by" oneself
            notice=notice if notice and outcome is not Outcome.NOT_ALLOWED else words or notice,
            kept=kept or {},
            problems=verdict.problems,
            person=link.person.name,
        )
        pending = record.status is AskStatus.PENDING
        events = f"{ASK_PATH}{token}/events?seen={version(record)}" if pending else None
        code = status or {Outcome.NOT_ALLOWED: 403, Outcome.NOT_FOUND: 404}.get(outcome, 200)
        return html(pages.render_ask(page, events=events), code)

    # -- live updates ----------------------------------------------------------------------------

    async def events(self, request: web.Request) -> web.StreamResponse:
        """The ask's changes as Server-Sent Events (see :mod:`platforms.web.live`)."""
        link = self._link(request, ask=True)
        if isinstance(link, web.Response):
            return link
        assert link.ask_id is not None
        if self.live.full():
            return message("Busy", "Too many live pages are open: reload the page later.", 503)
        try:
            record = await self.store.get(link.ask_id)
        except StoreUnavailable:
            return message("Not available", "The store cannot be reached: try again soon.", 503)
        if record is None:
            return message("Not available", "This question is no longer open.", 404)
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        secure(stream)
        await stream.prepare(request)
        if record.status is not AskStatus.PENDING:
            await stream.write(event("ended", record.status.value))
            return stream
        if request.query.get("seen", version(record)) != version(record):
            # changed since the page was made: it catches up before the watch takes over
            await stream.write(event("progress", pages.render_status(record)))
        try:
            await self._stream(request, stream, record, link)
        except ConnectionError:  # the page was closed or left: nothing to tell anyone
            pass
        return stream

    async def _stream(
        self, request: web.Request, stream: web.StreamResponse, record: AskRecord, link: Link
    ) -> None:
        """Send ``record``'s changes until it ends, ``link`` expires or the page leaves (its
        connection closed: aiohttp then drops the request's transport), a heartbeat between."""
        async with self.live.changes(record, lambda: request.transport is not None) as changes:
            await stream.write(b": live\n\n")
            while (left := until(link.expires_at)) > 0:
                try:
                    async with asyncio.timeout(min(HEARTBEAT, left)):
                        change = await changes.get()
                except TimeoutError:
                    await stream.write(b": keep-alive\n\n")
                    continue
                if change.kind == "left":
                    break
                if change.kind == "ended":
                    await stream.write(event("ended", change.record.status.value))
                    break
                await stream.write(event("progress", pages.render_status(change.record)))

    # -- the inbox -------------------------------------------------------------------------------

    async def inbox(self, request: web.Request) -> web.StreamResponse:
        """The pending asks this link's person may answer, newest first, paged, each with a
        fresh link to answer it as them."""
        link = self._link(request, ask=False)
        if isinstance(link, web.Response):
            return link
        person = link.person
        who = Responder(
            user_id=person.user_id,
            aliases=self.identities.aliases(person.platform, person.user_id),
            person=self.identities.person(person.platform, person.user_id),
        )

        def theirs(record: AskRecord) -> bool:
            where = record.destination.platform
            return where in (person.platform, WEB) and may_answer(
                record.answerers, who.key, who.authorising
            )

        def answer_url(record: AskRecord) -> str:
            return ASK_PATH + self.links.token(record.id, person)

        return await self._inbox_page(request, theirs, answer_url, person.name)

    async def operator_inbox(self, request: web.Request) -> web.StreamResponse:
        """Every pending ask, read-only, for whoever holds an operator token (``Authorization:
        Bearer <one of ASK_BRIDGE_WEB_SECRET's secrets>``)."""
        given = request.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not self.operator(token.strip()):
            response = message("Sign in", "This page needs an operator's bearer token.", 401)
            response.headers["WWW-Authenticate"] = 'Bearer realm="ask-bridge"'
            return response
        return await self._inbox_page(request, lambda record: True, lambda record: None, None)

    async def _inbox_page(
        self,
        request: web.Request,
        theirs: Callable[[AskRecord], bool],
        answer_url: Callable[[AskRecord], str | None],
        person: str | None,
    ) -> web.StreamResponse:
        channel = request.query.get("channel", "").strip() or None
        cursor = request.query.get("after") or None
        rows: list[pages.InboxRow] = []
        try:
            cursor = await self._fill(rows, theirs, answer_url, cursor, channel)
        except ValueError:
            return message("Bad page", "That page of the inbox does not exist.", 400)
        except StoreUnavailable:
            return message("Not available", "The store cannot be reached: try again soon.", 503)
        query = {"channel": channel} if channel else {}
        older = f"?{urlencode({**query, 'after': cursor})}" if cursor is not None else None
        text = pages.render_inbox(rows, person=person, channel=channel, older=older)
        return html(text)

    async def _fill(
        self,
        rows: list[pages.InboxRow],
        theirs: Callable[[AskRecord], bool],
        answer_url: Callable[[AskRecord], str | None],
        cursor: str | None,
        channel: str | None,
    ) -> str | None:
        """Fill ``rows`` with up to :data:`INBOX_PAGE` of the person's asks from the store's
        listing after ``cursor``, reading at most :data:`INBOX_READS` of its pages (an inbox
        of someone named on few of many asks must not read them all at once); the cursor of
        what follows, if anything may."""
        now = time.time()
        for _ in range(INBOX_READS):
            page = await self.store.pending_page(limit=INBOX_PAGE, cursor=cursor, channel=channel)
            for i, record in enumerate(page.asks):
                if record.expires_at > now and theirs(record):
                    rows.append(pages.InboxRow(record, answer_url(record)))
                    if len(rows) == INBOX_PAGE:
                        more = i < len(page.asks) - 1 or page.cursor is not None
                        return page_cursor(record.created_at, record.id) if more else None
            if page.cursor is None:
                return None
            cursor = page.cursor
        return cursor

    # -- static files ----------------------------------------------------------------------------

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        kind = STATIC.get(name)
        if kind is None:
            return message("Not found", "No such file.", 404)
        body = files("platforms.web").joinpath("static", name).read_bytes()
        response = web.Response(body=body, content_type=kind)
        secure(response, cache=True)
        return response
