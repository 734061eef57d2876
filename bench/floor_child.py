"""The bare libraries doing a click's wire work and nothing else: the floor ``serve``'s CPU per
click is read against (:mod:`bench.floor`).

Run by :mod:`bench.floor` as ``python floor_child.py slack|discord URL OUT REDIS_URL BODY``.
It imports no ``bridge``, no Bolt, no slack_sdk and no discord.py: only aiohttp and redis-py
(with hiredis, as ``serve`` runs), which every ``serve`` click rests on. What it does per click
is what ``serve`` does on the wire for one:

* ``slack``: an aiohttp server at ``URL`` (a port) takes the click's POST and reads its body;
  one script call to Redis, sending the body (as a click's submission sends its answers) and
  reading it back (as the submission returns the record); the 200 answer; then a JSON POST of
  the edited message (``BODY``, JSON) to ``OUT`` (as ``chat.update``), its JSON answer read,
  and a second script call (as the showing's mark).
* ``discord``: an aiohttp websocket client connected to ``URL`` takes each text frame and decodes
  its JSON (the gateway's ``INTERACTION_CREATE``); the same first script call; the interaction
  response POSTed to ``OUT`` and its answer read; the second script call.

Prints ``ready`` once serving; runs until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp
from aiohttp import web
from redis.asyncio import Redis

SUBMIT = "return ARGV[1]"
MARK = "return 1"


async def main(kind: str, url: str, out: str, redis_url: str, body: str) -> None:
    redis = Redis.from_url(redis_url)
    submit, mark = await redis.script_load(SUBMIT), await redis.script_load(MARK)
    outbound = body.encode()
    headers = {"Content-Type": "application/json; charset=utf-8", "Authorization": "Bearer x"}
    http = aiohttp.ClientSession()
    running: set[asyncio.Task[None]] = set()

    async def show() -> None:
        async with http.post(out, data=outbound, headers=headers) as resp:
            if resp.content_type == "application/json":
                await resp.json()
            else:
                await resp.read()
        await redis.evalsha(mark, 1, "floor:mark")  # type: ignore[misc]

    def then_show() -> None:  # after the ack, as serve shows the outcome
        task = asyncio.create_task(show())
        running.add(task)
        task.add_done_callback(running.discard)

    if kind == "slack":

        async def click(request: web.Request) -> web.Response:
            body = await request.read()
            await redis.evalsha(submit, 1, "floor:ask", body)  # type: ignore[misc]
            then_show()
            return web.Response()

        app = web.Application()
        app.router.add_post("/slack/events", click)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", int(url)).start()
        print("ready", flush=True)
        await asyncio.Event().wait()

    async def interaction(data: str) -> None:
        event = json.loads(data)
        await redis.evalsha(submit, 1, "floor:ask", json.dumps(event["d"]))  # type: ignore[misc]
        await show()

    async with http.ws_connect(url) as ws:
        print("ready", flush=True)
        async for frame in ws:
            task = asyncio.create_task(interaction(frame.data))
            running.add(task)
            task.add_done_callback(running.discard)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
