"""Live pages (Server-Sent Events), the inbox, and ``serve`` serving the web platform."""

from __future__ import annotations

import asyncio
import re
import time

import aiohttp

from bridge.record import AskStatus
from bridge.web_links import Links, Person
from tests.platforms.web.conftest import SECRET, Web, question
from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer


async def _next_event(response: aiohttp.ClientResponse) -> tuple[str, str]:
    """The next event on a stream (comments skipped): its name and its data."""
    name, data = "", []
    async with asyncio.timeout(20):
        while True:
            line = (await response.content.readline()).decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif not line and name:
                return name, "\n".join(data)


async def test_a_live_page_hears_another_persons_submit_then_the_cancel(web: Web) -> None:
    record = await web.ask(question(), answerers=("alice", "bob"), required=2)
    async with web.http.get(web.url(record.id, "alice") + "/events") as stream:
        assert stream.status == 200 and stream.headers["Content-Type"] == "text/event-stream"
        assert stream.headers["Content-Security-Policy"]
        assert await stream.content.readline() == b": live\n"  # watching before bob submits
        assert (await web.submit(web.url(record.id, "bob"), [("q0", "1")])).status == 303
        kind, data = await _next_event(stream)
        assert kind == "progress" and "1 of 2: bob chose No" in data
        await web.store.close(record.id, AskStatus.CANCELLED, by="ops")
        assert await _next_event(stream) == ("ended", "cancelled")
        assert await stream.content.read() == b""  # the stream ends with the ask
    assert web.receiver.live.open == 0


async def test_a_submit_between_the_page_and_its_stream_is_not_missed(web: Web) -> None:
    """The stream watches from the moment it connects; the page says what it showed, so a
    submission that landed in between is sent at once."""
    record = await web.ask(question(), answerers=("alice", "bob"), required=2)
    status, page = await web.page(web.url(record.id, "alice"))
    assert status == 200
    events = re.search(r'data-events="([^"]+)"', page)
    assert events is not None and "seen=" in events.group(1)
    assert (await web.submit(web.url(record.id, "bob"), [("q0", "1")])).status == 303
    stream_url = web.server.url() + events.group(1).replace("&amp;", "&")
    async with web.http.get(stream_url) as stream:
        kind, data = await _next_event(stream)
        assert kind == "progress" and "1 of 2: bob chose No" in data
    status, page = await web.page(web.url(record.id, "alice"))  # a page made now: nothing due
    events = re.search(r'data-events="([^"]+)"', page)
    assert events is not None
    async with web.http.get(web.server.url() + events.group(1).replace("&amp;", "&")) as stream:
        assert await stream.content.readline() == b": live\n"


async def test_a_live_page_hears_the_answer_and_streams_are_bounded(web: Web) -> None:
    record = await web.ask(question())
    url = web.url(record.id, "alice") + "/events"
    web.receiver.live.max_streams = 1
    async with web.http.get(url) as stream:
        await stream.content.readline()
        async with web.http.get(url) as refused:
            assert refused.status == 503
        assert (await web.submit(web.url(record.id, "bob"), [("q0", "0")])).status == 303
        assert await _next_event(stream) == ("ended", "answered")
    async with web.http.get(url) as ended:  # an ended ask: told at once
        assert await _next_event(ended) == ("ended", "answered")


def _asks_listed(page: str) -> list[str]:
    return re.findall(r'<a href="/a/([^"]+)">', page)


async def test_the_inbox_lists_what_the_person_may_answer_newest_first_paged(web: Web) -> None:
    now = time.time()
    mine = [
        await web.ask(question(f"Mine {i}?"), answerers=("alice",), created_at=now - 100 + i)
        for i in range(23)
    ]
    anyone = await web.ask(question("Anyone?"), created_at=now - 1, channel="ops")
    await web.ask(question("Not mine?"), answerers=("bob",), created_at=now)
    await web.ask(question("Elsewhere?"), platform="slack", created_at=now)
    ended = await web.ask(question("Ended?"), answerers=("alice",), created_at=now)
    await web.store.close(ended.id, AskStatus.CANCELLED)
    alice = Person("web", "alice", "Alice")
    inbox = web.links.inbox_url(alice)
    status, page = await web.page(inbox)
    assert status == 200 and "Waiting for Alice" in page
    first = _asks_listed(page)
    assert len(first) == 20
    opened = [web.links.verify(token).ask_id for token in first]
    assert opened == [anyone.id, *[r.id for r in reversed(mine)][:19]]
    assert all(web.links.verify(t).person == alice for t in first)  # links to answer as alice
    assert "Anyone?" in page and "Not mine?" not in page and "Elsewhere?" not in page
    assert "Ended?" not in page and "min ago" in page and "min left" in page
    older = re.search(r'<a href="(\?[^"]+)" rel="next">', page)
    assert older is not None
    status, rest = await web.page(inbox + older.group(1).replace("&amp;", "&"))
    assert [web.links.verify(t).ask_id for t in _asks_listed(rest)] == [
        r.id for r in reversed(mine)
    ][19:]
    assert 'rel="next"' not in rest
    status, ops = await web.page(inbox + "?channel=ops")
    assert [web.links.verify(t).ask_id for t in _asks_listed(ops)] == [anyone.id]
    # answering from it works like the message
    assert (await web.submit(web.server.url("/a/" + first[0]), [("q0", "0")])).status == 303
    assert len(_asks_listed((await web.page(inbox))[1])) == 20
    assert (await web.page(inbox + "?after=garbage"))[0] == 400


async def test_the_operators_inbox_needs_the_bearer_token(web: Web) -> None:
    record = await web.ask(question("Ops?"), answerers=("bob",))
    url = web.server.url("/inbox")
    assert (await web.page(url))[0] == 401
    for wrong_token in ("t" * 40, "é" * 40, SECRET[:-1]):
        bearer = {"Authorization": "Bearer " + wrong_token}
        async with web.http.get(url, headers=bearer) as wrong:
            assert wrong.status == 401
    async with web.http.get(url, headers={"Authorization": "Bearer " + SECRET}) as right:
        page = await right.text()
    assert right.status == 200 and "Ops?" in page and record.id in page
    assert "/a/" not in page  # read-only: the operator answers as nobody


async def test_serve_with_the_secret_serves_the_web_platform(standalone: RedisServer) -> None:
    env = cli_env(ASK_BRIDGE_WEB_SECRET=SECRET, REDIS_URL=standalone.url)
    serve = await Serve(env, ("--platform", "web")).start()
    try:
        base = f"http://127.0.0.1:{serve.port}"
        links = Links([SECRET], base)
        token = links.token("nope", Person("web", "alice", "Alice"))
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/a/{token}") as page:
                assert page.status == 404 and "no longer open" in await page.text()
            async with http.get(f"{base}/a/{token[:-3]}") as forged:
                assert forged.status == 403
            async with http.get(f"{base}/healthz") as alive:
                assert alive.status == 200
    finally:
        await serve.stop()
    assert "ready (web)" in "".join(serve.log) and token not in "".join(serve.log)
