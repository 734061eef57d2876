"""The web platform's defences: refused links change nothing, CSRF and cross-site posts are
refused, hostile text is escaped, every response carries the headers, submits are rate-limited."""

from __future__ import annotations

import pytest

from bridge.record import AskStatus
from bridge.web_links import Person
from platforms.web import WebPlatform
from platforms.web.security import CSP
from tests.platforms.web.conftest import Web, question


async def _untouched(web: Web, ask_id: str) -> None:
    stored = await web.store.get(ask_id)
    assert stored is not None and stored.status is AskStatus.PENDING and not stored.submissions


def _tampered(url: str) -> str:
    head, _, token = url.rpartition("/")
    payload, _, signature = token.partition(".")
    flipped = payload[:-1] + ("A" if payload[-1] != "A" else "B")
    return f"{head}/{flipped}.{signature}"


async def test_forged_tampered_and_expired_links_say_so_and_change_nothing(web: Web) -> None:
    record = await web.ask(question())
    good = web.url(record.id)
    expired = web.links.ask_url(record.id, Person("web", "alice", "Alice"), ttl=-1)
    other_secret = good.replace(good.rpartition(".")[2], "x" * 43)
    token = await web.csrf(good)
    before = await web.store.history(record.id)
    for url, status, words in [
        (_tampered(good), 403, "not valid"),
        (other_secret, 403, "not valid"),
        (good[:-5], 403, "not valid"),
        (expired, 410, "expired"),
    ]:
        got, page = await web.page(url)
        assert (got, words in page) == (status, True), url
        sent = await web.submit(url, [("q0", "0")], csrf=token)
        assert sent.status == status
        async with web.http.get(url + "/events") as response:
            assert response.status == status
    await _untouched(web, record.id)
    assert await web.store.history(record.id) == before  # not even an "opened" line
    inbox = web.links.inbox_url(Person("web", "alice", "Alice"))
    assert (await web.page(inbox.replace("/inbox/", "/a/")))[0] == 404  # an inbox link's token
    assert (await web.page(good.replace("/a/", "/inbox/")))[0] == 404  # an ask link's token


@pytest.mark.parametrize("csrf", [None, "", "0" * 64])
async def test_a_form_without_its_csrf_field_is_refused_and_nothing_saved(
    web: Web, csrf: str | None
) -> None:
    record = await web.ask(question())
    sent = await web.submit(web.url(record.id), [("q0", "0")], csrf=csrf)
    assert sent.status == 403
    stored = await web.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.PENDING and not stored.submissions


async def test_another_links_csrf_field_does_not_fit_this_link(web: Web) -> None:
    record = await web.ask(question())
    bobs = await web.csrf(web.url(record.id, "bob"))
    sent = await web.submit(web.url(record.id, "alice"), [("q0", "0")], csrf=bobs)
    assert sent.status == 403


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}],
)
async def test_a_cross_site_post_is_refused_even_with_the_field(
    web: Web, headers: dict[str, str]
) -> None:
    record = await web.ask(question())
    sent = await web.submit(web.url(record.id), [("q0", "0")], headers=headers)
    assert sent.status == 403
    stored = await web.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.PENDING
    same = {"Origin": web.server.url(), "Sec-Fetch-Site": "same-origin"}
    assert (await web.submit(web.url(record.id), [("q0", "0")], headers=same)).status == 303


HOSTILE = [
    "<script>alert(1)</script>",
    "javascript:alert(1)",
    "{{7*7}}",
    "evil\u202etxt.exe",
    "@everyone <img src=x onerror=alert(1)>",
]


async def test_hostile_texts_are_shown_escaped_and_without_bidi_overrides(web: Web) -> None:
    record = await web.ask(
        question(HOSTILE[0] + " ship?", "<b>hdr</b>", *HOSTILE[1:]), asker="<i>bot</i>"
    )
    status, page = await web.page(web.url(record.id, "<svg onload=x>"))
    assert status == 200
    assert "<script>" not in page.replace('<script src="/static/web/web.js" defer></script>', "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<b>hdr" not in page and "<i>bot" not in page and "<svg" not in page.lower()
    assert "{{7*7}}" in page and ">49<" not in page
    assert 'href="javascript' not in page and "javascript:alert(1)" in page
    assert "\u202e" not in page and "evil" + "txt.exe" in page
    sent = await web.submit(web.url(record.id, "<svg onload=x>"), [("q0-other", "<b>x\u202e</b>")])
    assert sent.status == 303
    status, page = await web.page(web.url(record.id))
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "\u202e" not in page and "&lt;svg" in page


async def test_every_response_carries_the_security_headers(web: Web) -> None:
    record = await web.ask(question())
    urls = [
        web.url(record.id),
        _tampered(web.url(record.id)),
        web.links.inbox_url(Person("web", "alice", "Alice")),
        web.server.url("/inbox"),
        web.server.url("/static/web/web.css"),
        web.server.url("/static/web/nope.js"),
    ]
    for url in urls:
        async with web.http.get(url) as response:
            h = response.headers
            assert h["Content-Security-Policy"] == CSP, url
            assert "default-src 'none'" in CSP and "frame-ancestors 'none'" in CSP
            assert h["X-Frame-Options"] == "DENY" and h["X-Content-Type-Options"] == "nosniff"
            assert h["Referrer-Policy"] == "no-referrer"
            cache = (
                "public, max-age=3600"
                if response.status == 200 and "/static/" in url
                else "no-store"
            )
            assert h["Cache-Control"] == cache, url
    sent = await web.submit(web.url(record.id), [("q0", "0")])
    assert sent.headers["X-Frame-Options"] == "DENY" and sent.headers["Cache-Control"] == "no-store"
    _, page = await web.page(web.url(record.id))
    assert "http://" not in page and "https://" not in page  # no third-party asset


async def test_submits_are_rate_limited_per_person(web: Web) -> None:
    record = await web.ask(question(), answerers=("alice", "bob"), required=2)
    url = web.url(record.id)
    token = await web.csrf(url)
    statuses = [(await web.submit(url, [("q0", str(i % 3))], csrf=token)).status for i in range(11)]
    assert statuses[:10] == [303] * 10 and statuses[10] == 429
    bob = web.url(record.id, "bob")  # another person's bucket is full
    assert (await web.submit(bob, [("q0", "0")])).status == 303


async def test_a_process_own_secret_serves_loopback_only() -> None:
    from bridge.platform import PlatformUnavailable
    from bridge.runtime import serving
    from bridge.store.memory import MemoryStore

    platform = WebPlatform.own_secret()
    with pytest.raises(PlatformUnavailable, match=r"^the web platform serves 0\.0\.0\.0 .* set it"):
        async with serving([platform], MemoryStore(), host="0.0.0.0", port=0):
            pass
    async with serving([platform], MemoryStore(), host="127.0.0.1", port=0) as served:
        assert served.server is not None
