"""The web platform's pages: their weight, time to first byte, and submit-to-resume, beside the
Slack click path in the same run.

Run: ``.venv/bin/python -m bench.web_pages [N] [--no-browser]`` (default 100 rounds; each round
measures every path once, interleaved, so a slow second of the machine falls on all of them).
``bench/web_streams.py`` measures the live pages (1,000 open streams on one replica).

Everything goes through one ``ask-bridge serve`` process (HTTP mode, Slack and the web platform
on its one port, a separate OS process) over one Redis; the waiting side is ``store.wait`` in
this process, as ``bench/slack_clicks.py`` has it.

* **Weight**: ``GET /a/<token>`` of the largest ask the contract allows (4 questions of 4
  options, every text at its bound: 27,248 bytes of ASCII; and the same at the validator's byte
  bounds in 3-byte UTF-8), and of typical asks: the bytes of the texts alone, of the HTML, and
  the overhead (target: at most 12 KB). Every text must be in the page whole and escaped,
  between tags; texts of ``<`` show what escaping adds on top (not overhead: the texts
  themselves, escaped).
  The stylesheet and script must be separate same-origin files a browser may cache, the page
  itself ``no-store`` and without inline styles or scripts.
* **Time to first byte** of the page, without a browser (aiohttp: from sending the request to
  its headers) and in Chromium (Navigation Timing's ``responseStart``: from the navigation's
  start, as web-vitals counts it), beside ``GET /healthz`` on the same server (the HTTP floor)
  and a Slack click's ack (one store round trip behind it, like the page).
* **Submit-to-resume**: from the form's POST being sent to the waiting call's return. Without a
  browser: aiohttp POSTs the form (its CSRF field read from the page). In Chromium: a click on
  Submit, timed from the browser's own start of the POST (``Request.timing``, wall clock) to the
  wait's return (wall clock, same machine), and from the Python click call (which adds
  Playwright's own dispatch); and submit to the confirmation page loaded (Navigation Timing of
  the page the 303 leads to: what the person sees). Beside them, in the same rounds, a Slack
  button click to the same kind of wait (``bench/slack_clicks.py``'s path) and the engine's
  bare submit-to-resume. One question (the Slack button's equal), typical 4 questions and the
  maximal ask.

Chromium is Debian's (:mod:`tests.support.browser`), launched fenced to loopback; every request
the page makes is checked to stay on its origin. Without Playwright or Chromium the browser
figures are skipped with the reason, and so are they with ``--no-browser``.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from markupsafe import escape

from bench.engine_common import pct, prose_questions, server_url
from bench.slack_clicks import click_for, new_ask, one_click_set
from bridge.models import (
    MAX_DESCRIPTION,
    MAX_HEADER,
    MAX_LABEL,
    MAX_OPTIONS,
    MAX_QUESTION_TEXT,
    MAX_QUESTIONS,
    Answer,
    Option,
    Question,
    QuestionSet,
)
from bridge.record import AskRecord, Destination, Responder
from bridge.store.redis import RedisStore
from bridge.validation import MAX_BYTES
from bridge.web_links import Links, Person
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from platforms.web.poster import WebPoster
from tests.support.browser import FENCE, chromium, missing
from tests.support.procs import Serve, cli_env
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, signed

SECRET = "bench-web-secret-" + "k" * 32
OVERHEAD_TARGET = 12 * 1024
"""Bytes the page may add to its texts at the contract's largest ask (issue 30, point 7)."""
_CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


# -- the serving process ---------------------------------------------------------------------


@dataclass
class Bed:
    """One ``serve`` process (Slack over HTTP and the web platform) over one Redis, the fake
    Slack, and this process's stores: ``store`` makes asks and waits, ``other`` answers for the
    engine's baseline."""

    serve: Serve
    fake: FakeSlack
    store: RedisStore
    other: RedisStore
    slack: SlackPoster
    links: Links
    origin: str
    people: int = 0

    def person(self) -> Person:
        """A new person each time: submits are rate-limited per person (10 a minute)."""
        self.people += 1
        return Person("web", f"bench{self.people}", f"Bench person {self.people}")

    async def web_ask(self, questions: QuestionSet) -> tuple[AskRecord, str]:
        """An ask posted to the web, as ``ask --platform web`` makes it, and a link to it."""
        record = AskRecord(
            questions=questions,
            destination=Destination(platform="web", channel="bench"),
            expires_at=time.time() + 3600,
        )
        await self.store.create(record)
        await self.store.set_message(record.id, await WebPoster().post(record))
        return record, self.links.ask_url(record.id, self.person())


@asynccontextmanager
async def bed() -> AsyncIterator[Bed]:
    with server_url() as url:
        fake = await FakeSlack().start()
        prefix = f"bench{uuid.uuid4().hex[:6]}"
        env = cli_env(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=fake.url,
            REDIS_URL=url,
            ASK_BRIDGE_KEY_PREFIX=prefix,
            ASK_BRIDGE_WEB_SECRET=SECRET,
        )
        serve = await Serve(env).start()
        origin = f"http://127.0.0.1:{serve.port}"
        store = RedisStore.from_url(url, prefix=prefix)
        other = RedisStore.from_url(url, prefix=prefix)
        try:
            yield Bed(
                serve,
                fake,
                store,
                other,
                SlackPoster(make_client(BOT_TOKEN, fake.url)),
                Links([SECRET], origin),
                origin,
            )
        finally:
            await serve.stop()
            await store.aclose()
            await other.aclose()
            await fake.stop()


# -- question sets ---------------------------------------------------------------------------


def maximal(char: str, *, in_bytes: bool) -> QuestionSet:
    """The largest ask the contract allows: 4 questions of 4 options, each text at its bound in
    characters (``in_bytes``: and at the validator's bound in UTF-8 bytes), made of ``char``
    after a tag that makes every text unique, so that one shown cut would be noticed."""
    size = len(char.encode())

    def text(tag: str, n: int, kind: str) -> str:
        if in_bytes:
            n = min(n, (MAX_BYTES[kind] - len(tag)) // size + len(tag))
        return tag + char * (n - len(tag))

    return QuestionSet(
        questions=tuple(
            Question(
                question=text(f"Q{i}:", MAX_QUESTION_TEXT, "question"),
                header=text(f"H{i}:", MAX_HEADER, "header"),
                options=tuple(
                    Option(
                        label=text(f"L{i}.{j}:", MAX_LABEL, "label"),
                        description=text(f"D{i}.{j}:", MAX_DESCRIPTION, "description"),
                    )
                    for j in range(MAX_OPTIONS)
                ),
                multiSelect=i % 2 == 1,
            )
            for i in range(MAX_QUESTIONS)
        )
    )


def texts(questions: QuestionSet) -> list[str]:
    """Every text of ``questions`` the page shows."""
    out: list[str] = []
    for q in questions.questions:
        out += [q.question, q.header]
        for o in q.options:
            out += [o.label, *([o.description] if o.description else [])]
    return out


SIZES: dict[str, Callable[[], QuestionSet]] = {
    "1 question": one_click_set,
    "typical 4": lambda: QuestionSet.model_validate({"questions": prose_questions(4, 7)}),
    "maximal 4": lambda: maximal("x", in_bytes=False),
}
"""The asks the latency rounds use: the Slack button's equal, typical prose, the largest."""


# -- 1. weight -------------------------------------------------------------------------------


@dataclass
class Weight:
    name: str
    text_bytes: int
    html_bytes: int
    whole: bool
    judged: bool
    gzip_bytes: int

    @property
    def overhead(self) -> int:
        return self.html_bytes - self.text_bytes


async def weigh(bed: Bed, http: aiohttp.ClientSession) -> tuple[list[Weight], list[str]]:
    """Each ask's page weighed, and what is wrong with how the page is served (empty: nothing)."""
    asks = [
        ("maximal, ASCII", maximal("x", in_bytes=False), True),
        ("maximal, 3-byte UTF-8 at the byte bounds", maximal("\u20ac", in_bytes=True), True),
        ("maximal, every character '<' (escaped)", maximal("<", in_bytes=False), False),
        ("typical, 4 questions of prose", SIZES["typical 4"](), False),
        ("typical, 1 question", one_click_set(), False),
    ]
    out: list[Weight] = []
    wrong: list[str] = []
    for name, questions, judged in asks:
        _, url = await bed.web_ask(questions)
        async with http.get(url) as response:
            body = await response.read()
            if response.status != 200:
                sys.exit(f"web_pages: GET of the {name} page answered {response.status}")
            if response.headers.get("Cache-Control") != "no-store":
                wrong.append(f"the page is not no-store: {response.headers.get('Cache-Control')}")
        page = body.decode()
        # whole: from a tag's end or the space after the header to the next tag, escaped
        whole = all(re.search(f"[> ]{re.escape(str(escape(t)))}<", page) for t in texts(questions))
        if re.search(r"<style|<script(?![^>]*\ssrc=)|\sstyle=", page):
            wrong.append(f"{name}: inline style or script in the page")
        raw = sum(len(t.encode()) for t in texts(questions))
        out.append(Weight(name, raw, len(body), whole, judged, len(zlib.compress(body, 6))))
    for name in ("web.css", "web.js"):
        async with http.get(f"{bed.origin}/static/web/{name}") as response:
            await response.read()
            cache = response.headers.get("Cache-Control", "")
            age = re.search(r"max-age=(\d+)", cache)
            if response.status != 200 or "public" not in cache or not age or age.group(1) == "0":
                wrong.append(f"/static/web/{name} is not cacheable: Cache-Control {cache!r}")
    return out, wrong


def print_weight(weights: list[Weight], wrong: list[str]) -> bool:
    print("page weight, GET /a/<token> (the form a person may answer):")
    print(f"  {'ask':44} {'texts':>8} {'HTML':>8} {'overhead':>9}  whole  gzip")
    passed = not wrong
    for w in weights:
        verdict = ""
        if w.judged:
            ok = w.whole and w.overhead <= OVERHEAD_TARGET
            passed = passed and ok
            verdict = "  PASS" if ok else "  FAIL"
        print(
            f"  {w.name:44} {w.text_bytes:8,} {w.html_bytes:8,} {w.overhead:9,}  "
            f"{'yes' if w.whole else 'NO':5}  {w.gzip_bytes:,}{verdict}"
        )
    print(
        f"  target: overhead <= {OVERHEAD_TARGET:,} bytes at the largest ask, each text whole "
        "and escaped (the '<' row: escaping makes the texts 4x, judged nowhere)"
    )
    print("  gzip: what the HTML would be compressed; the server sends it uncompressed")
    for line in wrong:
        print(f"  FAIL: {line}")
    if not wrong:
        print("  web.css and web.js: separate same-origin files, Cache-Control public with a "
              "max-age; the page no-store, no inline style or script")  # fmt: skip
    return passed


# -- 2. latency ------------------------------------------------------------------------------


@dataclass
class Figures:
    """Seconds, by what was measured."""

    runs: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        self.runs.setdefault(name, []).append(seconds)


async def waiter(store: RedisStore, ask_id: str) -> tuple[float, float]:
    """Wait for ``ask_id``'s answer; when it came, by ``perf_counter`` and by the wall clock."""
    assert await store.wait(ask_id, 20) is not None, f"ask {ask_id} never answered"
    return time.perf_counter(), time.time()


async def started_wait(store: RedisStore, ask_id: str) -> asyncio.Task[tuple[float, float]]:
    task = asyncio.create_task(waiter(store, ask_id))
    await asyncio.sleep(0.01)  # the wait registered and its first read done
    return task


async def engine_round(bed: Bed, figures: Figures) -> None:
    record = await new_ask(bed.store, bed.slack)
    waiting = await started_wait(bed.store, record.id)
    answer = Answer(question=record.questions.questions[0].question, selected=("Yes",))
    start = time.perf_counter()
    await bed.other.submit(record.id, Responder(user_id="U0ENGINE"), [answer])
    figures.add("engine", (await waiting)[0] - start)


async def slack_round(bed: Bed, http: aiohttp.ClientSession, figures: Figures) -> None:
    start = time.perf_counter()
    async with http.get(f"{bed.origin}/healthz") as response:
        figures.add("healthz", time.perf_counter() - start)
        await response.read()
    record = await new_ask(bed.store, bed.slack)
    body = click_for(bed.fake, record)
    waiting = await started_wait(bed.store, record.id)
    start = time.perf_counter()
    async with http.post(bed.serve.url, data=body, headers=signed(body)) as response:
        figures.add("slack ack", time.perf_counter() - start)
        assert response.status == 200
    figures.add("slack resume", (await waiting)[0] - start)


def form_fields(questions: QuestionSet) -> list[tuple[str, str]]:
    """The first option of every question, as the form posts it."""
    return [(f"q{i}", "0") for i in range(len(questions.questions))]


async def http_round(bed: Bed, http: aiohttp.ClientSession, size: str, figures: Figures) -> None:
    questions = SIZES[size]()
    record, url = await bed.web_ask(questions)
    start = time.perf_counter()
    async with http.get(url) as response:
        figures.add(f"http ttfb {size}", time.perf_counter() - start)
        page = await response.text()
        figures.add(f"http page {size}", time.perf_counter() - start)
    found = _CSRF.search(page)
    assert response.status == 200 and found is not None, page[:300]
    data = [*form_fields(questions), ("csrf", found.group(1))]
    waiting = await started_wait(bed.store, record.id)
    start = time.perf_counter()
    async with http.post(url, data=data, allow_redirects=False) as response:
        figures.add(f"http response {size}", time.perf_counter() - start)
        assert response.status == 303, (response.status, await response.text())
    figures.add(f"http resume {size}", (await waiting)[0] - start)


class Browser:
    """Chromium (fenced to loopback) with one page, which records every request it makes."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.requests: list[str] = []
        self._stack: Any = None
        self.page: Any = None
        self.cached: set[str] = set()
        self.refused: str | None = None
        """Why ``serve`` refused Chromium's own POST, if it did (then no submit is measured)."""

    async def start(self) -> Browser:
        from playwright.async_api import async_playwright

        self._stack = await async_playwright().start()
        browser = await self._stack.chromium.launch(
            executable_path=chromium(), headless=True, args=list(FENCE)
        )
        self.page = await (await browser.new_context()).new_page()
        self.page.on("request", lambda request: self.requests.append(request.url))
        return self

    async def stop(self) -> None:
        if self._stack is not None:
            await self._stack.stop()

    def strays(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(self.origin + "/")]

    async def probe(self, bed: Bed) -> None:
        """Submit one form as Chromium sends it; if ``serve`` refuses it, note why (see
        :attr:`refused`)."""
        questions = one_click_set()
        _, url = await bed.web_ask(questions)
        await self.page.goto(url, wait_until="load")
        await self.page.check("#q0o0")
        async with self.page.expect_request(lambda r: r.method == "POST") as posted:
            await self.page.click("button[type=submit]")
        request = await posted.value
        response = await request.response()
        if response.status != 303:
            origin = (await request.all_headers()).get("origin")
            self.refused = f"{response.status} for Chromium's own POST (its Origin: {origin})"

    async def round(self, bed: Bed, size: str, figures: Figures) -> None:
        questions = SIZES[size]()
        record, url = await bed.web_ask(questions)
        page = self.page
        await page.goto(url, wait_until="load")
        timing = await page.evaluate(
            "(() => { const n = performance.getEntriesByType('navigation')[0];"
            " return {ttfb: n.responseStart, load: n.loadEventEnd,"
            " cached: performance.getEntriesByType('resource')"
            ".filter(r => r.transferSize === 0).map(r => r.name)}; })()"
        )
        figures.add(f"browser ttfb {size}", timing["ttfb"] / 1000)
        figures.add(f"browser page {size}", timing["load"] / 1000)
        self.cached.update(timing["cached"])
        for i in range(len(questions.questions)):
            await page.check(f"#q{i}o0")
        waiting = await started_wait(bed.store, record.id)
        start = time.perf_counter()
        async with page.expect_request(lambda r: r.method == "POST") as posted:
            await page.click("button[type=submit]")
        request = await posted.value
        sent = request.timing["startTime"] / 1000
        resumed, resumed_wall = await waiting
        figures.add(f"browser resume {size}", resumed_wall - sent)
        figures.add(f"browser click-resume {size}", resumed - start)
        await page.wait_for_url(lambda u: u.endswith("?sent=1"), wait_until="load")
        shown = await page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        figures.add(f"browser confirmed {size}", shown / 1000)


async def latency(bed: Bed, rounds: int, browser: Browser | None) -> Figures:
    figures = Figures()
    warm = Figures()
    async with aiohttp.ClientSession() as http:
        for n, into in ((5, warm), (rounds, figures)):
            for _ in range(n):
                await engine_round(bed, into)
                await slack_round(bed, http, into)
                for size in SIZES:
                    await http_round(bed, http, size, into)
                    if browser is not None:
                        await browser.round(bed, size, into)
    return figures


def print_latency(figures: Figures, rounds: int, browser: str | None) -> None:
    runs = figures.runs

    def ms(name: str, p: float) -> float:
        return pct(runs[name], p) * 1000

    def line(label: str, name: str, base: str | None) -> None:
        if name not in runs:
            return
        ratio = f"  {ms(name, 50) / ms(base, 50):5.1f}x" if base else ""
        print(f"  {label:52} p50 {ms(name, 50):7.2f} ms   p95 {ms(name, 95):7.2f} ms{ratio}")

    print(f"\ntime to first byte ({rounds} rounds; ratio: p50 / the Slack click's ack p50):")
    line("GET /healthz (the HTTP floor)", "healthz", "slack ack")
    line("slack click: the ack (baseline)", "slack ack", "slack ack")
    for size in SIZES:
        line(f"page, {size}, aiohttp", f"http ttfb {size}", "slack ack")
        line(f"page, {size}, Chromium (responseStart)", f"browser ttfb {size}", "slack ack")
    for size in SIZES:
        line(f"page loaded whole, {size}, aiohttp", f"http page {size}", "slack ack")
        line(f"page loaded, {size}, Chromium (load event)", f"browser page {size}", "slack ack")
    print(f"\nsubmit-to-resume ({rounds} rounds; ratio: p50 / the Slack click-to-resume p50):")
    line("engine: submit -> the wait returns", "engine", "slack resume")
    line("slack click -> the wait returns (baseline)", "slack resume", "slack resume")
    for size in SIZES:
        line(f"web POST, {size}, aiohttp", f"http resume {size}", "slack resume")
        line(
            f"web POST, {size}, Chromium (from the POST)", f"browser resume {size}", "slack resume"
        )
        line("  from the click call (+ Playwright)", f"browser click-resume {size}", "slack resume")
    for size in SIZES:
        line(f"POST's response (303), {size}, aiohttp", f"http response {size}", "slack ack")
        line(f"submit -> 'sent' page loaded, {size}, Chromium", f"browser confirmed {size}", None)
    if browser is not None:
        print(f"  Chromium figures skipped: {browser}")


async def run(rounds: int, use_browser: bool) -> int:
    why_not = missing() if use_browser else "--no-browser"
    refused = False
    async with bed() as b, aiohttp.ClientSession() as http:
        weights, wrong = await weigh(b, http)
        browser = await Browser(b.origin).start() if why_not is None else None
        try:
            if browser is not None:
                await browser.probe(b)
                if browser.refused:
                    why_not, refused = f"FAIL: serve answered {browser.refused}", True
                    await browser.stop()
                    browser = None
            figures = await latency(b, rounds, browser)
        finally:
            if browser is not None:
                await browser.stop()
    passed = print_weight(weights, wrong) and not refused
    print_latency(figures, rounds, why_not)
    if browser is not None:
        cached = sorted(u.rsplit("/", 1)[1] for u in browser.cached)
        print(f"  Chromium took from its cache on later pages: {', '.join(cached) or 'nothing'}")
        strays = browser.strays()
        print(f"  requests leaving the page's origin: {len(strays)} of {len(browser.requests)}")
        if strays:
            print(f"  FAIL: {strays[:3]}")
            passed = False
    print(f"\n{'PASS' if passed else 'FAIL'}: page weight and serving (issue 30, point 7)")
    return 0 if passed else 1


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-browser"]
    sys.exit(asyncio.run(run(int(args[0]) if args else 100, "--no-browser" not in sys.argv)))
