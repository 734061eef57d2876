"""The floor under ``serve``'s CPU per click: the bare libraries doing the same wire work.

``bench/slack_clicks.py`` and ``bench/discord_clicks.py`` read ``serve``'s CPU per click at 200
clicks a second. On its own that figure says little: most of it is the machine's cost of a
wake-up, a socket read and write, and a Redis round trip in Python. :func:`cpu_per_click` runs
:mod:`bench.floor_child` -- aiohttp and redis-py only, with the same click bodies in, the same
edited message out and the same two Redis round trips -- at the same rate in the same run, so
the click benches print ``serve``'s figure as a multiple of what no Python bridge built on these
libraries could go below.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import aiohttp
from aiohttp import web

from bench.busy import cpu_seconds
from tests.support.redis_server import free_port

CHILD = Path(__file__).with_name("floor_child.py")
WARM_UP = 50


async def cpu_per_click(
    kind: Literal["slack", "discord"],
    inbound: Sequence[str],
    outbound: dict[str, Any],
    reply: dict[str, Any],
    redis_url: str,
    rate: int,
) -> float:
    """CPU seconds :mod:`bench.floor_child` spends per click when ``inbound`` (Slack: signed
    form bodies POSTed to it; Discord: gateway frames sent to it) arrive at ``rate`` per second,
    each showing ``outbound`` (the edit ``serve`` sent for a click) to a loopback endpoint here,
    which answers ``reply`` (what the fake platform answered ``serve``). The first
    :data:`WARM_UP` are not counted."""
    shown = 0
    all_shown = asyncio.Event()
    answer = json.dumps(reply)
    frames: asyncio.Queue[str] = asyncio.Queue()

    async def out(request: web.Request) -> web.Response:
        nonlocal shown
        await request.read()
        shown += 1
        if shown == len(inbound):
            all_shown.set()
        return web.Response(text=answer, content_type="application/json")

    async def gateway(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        while (frame := await frames.get()) != "":
            await ws.send_str(frame)
        await ws.close()
        return ws

    app = web.Application()
    app.router.add_post("/out", out)
    app.router.add_get("/gateway", gateway)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    here = f"http://127.0.0.1:{port}"
    child_port = free_port()
    url = str(child_port) if kind == "slack" else f"{here}/gateway"
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), kind, url, f"{here}/out", redis_url, json.dumps(outbound),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        async with asyncio.timeout(30):
            assert (await child.stdout.readline()).strip() == b"ready"
        return await _drive(kind, inbound, rate, child.pid, child_port, frames, all_shown)
    finally:
        frames.put_nowait("")
        child.kill()
        await child.wait()
        await runner.cleanup()


async def _drive(
    kind: str,
    inbound: Sequence[str],
    rate: int,
    pid: int,
    port: int,
    frames: asyncio.Queue[str],
    all_shown: asyncio.Event,
) -> float:
    """Send ``inbound`` at ``rate`` per second; the child's CPU per click after the warm-up,
    read once the last click's edit arrived."""
    from tests.support.slack.payloads import signed

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def send(item: str) -> None:
            if kind == "discord":
                frames.put_nowait(item)
                return
            url = f"http://127.0.0.1:{port}/slack/events"
            async with http.post(url, data=item, headers=signed(item)) as resp:
                assert resp.status == 200

        for item in inbound[:WARM_UP]:
            await send(item)
        await asyncio.sleep(0.5)
        began_cpu = cpu_seconds(pid)
        began = time.perf_counter() + 0.05
        sending = []
        for i, item in enumerate(inbound[WARM_UP:]):
            delay = began + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sending.append(asyncio.create_task(send(item)))
        await asyncio.gather(*sending)
        async with asyncio.timeout(30):
            await all_shown.wait()
        return (cpu_seconds(pid) - began_cpu) / (len(inbound) - WARM_UP)
