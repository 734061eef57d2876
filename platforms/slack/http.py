"""HTTP mode: the Bolt app behind ``POST /slack/events`` on the process's one HTTP server.

The server is the core's (:mod:`bridge.http_server`, started by :func:`bridge.runtime.serving`),
shared with every other platform the process serves; Slack contributes this one route, which hands
each request to Bolt through its aiohttp adapter. Bolt verifies each request's signature
(``SLACK_SIGNING_SECRET``) and answers 401 to forged or stale ones before any listener runs.
"""

from __future__ import annotations

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

from bridge.platform import HttpRoute

EVENTS_PATH = "/slack/events"


def events_route(app: AsyncApp) -> HttpRoute:
    """``POST /slack/events``, dispatched to ``app``."""

    async def events(request: web.Request) -> web.StreamResponse:
        bolt_response = await app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(bolt_response)

    return HttpRoute("POST", EVENTS_PATH, events)
