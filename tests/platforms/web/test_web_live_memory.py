"""Live pages that leave give back what they held (issue 30, point 7: 1,000 open live pages per
replica with flat memory): a page whose browser closed the connection is let go at its ask's next
read, not at its stream's next heartbeat (15 s) -- until then its stream, its ask's watcher and the
store's observer of that ask stayed, and its place among the open streams was taken, so pages
reloaded faster than the heartbeat were refused."""

from __future__ import annotations

import asyncio

import aiohttp

from bridge.store.redis import RedisStore
from tests.platforms.web.conftest import Web

N = 40
"""Pages on as many asks, and as many again on one ask."""


async def _opened(browser: aiohttp.ClientSession, url: str) -> aiohttp.ClientResponse:
    response = await browser.get(url)
    assert response.status == 200
    assert await response.content.readline() == b": live\n"
    return response


def _held(web: Web) -> dict[str, int]:
    """What the process holds for live pages, each counted per ask or per page."""
    live = web.receiver.live
    held = {
        "streams": live.open,
        "watched asks": len(live._watches),
        "watchers": sum(t.get_name() == "web live ask" for t in asyncio.all_tasks()),
    }
    if isinstance(web.store, RedisStore):
        wakeups = web.store._wakeups
        held["observed asks"] = len(wakeups._observers) + len(wakeups._waiters)
        held["asks to check"] = len(wakeups._checks) + len(wakeups._parked)
    else:
        held["observed asks"] = len(web.store._waiters)  # type: ignore[attr-defined]
    return held


async def test_pages_that_leave_are_let_go_before_the_next_heartbeat(web: Web) -> None:
    spread = [web.url((await web.ask()).id, f"p{i}") + "/events" for i in range(N)]
    one = (await web.ask()).id
    same = [web.url(one, f"q{i}") + "/events" for i in range(N)]
    web.receiver.live.max_streams = 2 * N
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as browser:
        pages = [await _opened(browser, url) for url in spread + same]
        assert _held(web)["streams"] == 2 * N and _held(web)["watched asks"] == N + 1
        for page in pages:
            page.close()  # the browser leaves: its connection closes
    async with asyncio.timeout(5):  # the fixture reads each ask every 0.2 s
        # the structures of several objects: no event says they all emptied
        while any(_held(web).values()):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    # their places are free: as many pages again are served
    async with aiohttp.ClientSession() as browser:
        for page in [await _opened(browser, url) for url in spread + same]:
            page.close()
