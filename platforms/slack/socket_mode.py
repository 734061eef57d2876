"""Socket Mode: interactions over a websocket opened with the app-level (``xapp-``) token.

No public URL and no request signing: Slack pushes envelopes down the connection and Bolt acks
them (with a modal ``response_action`` as the ack payload when there is one). On shutdown the
connection stays up until envelopes in flight are acked: a standalone ``ask`` process stops as
soon as its answer lands, which is usually before Bolt has sent the ack for that very click.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

DRAIN_SECONDS = 3.0
log = logging.getLogger(__name__)
SDK_LOGGER = "slack_sdk.socket_mode.aiohttp"


class ReconnectsOnce(logging.Filter):
    """slack_sdk retries a lost Socket Mode connection every 10 s and logs each failed attempt
    with a traceback. This lets the first failure of a streak through as one line and drops the
    repeats; a failure after :attr:`quiet` seconds without one starts a new streak. (The
    reconnection itself is logged at INFO by slack_sdk.)"""

    quiet = 30.0

    def __init__(self) -> None:
        super().__init__()
        self.last: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith("Failed to connect"):
            return True
        now, last = record.created, self.last
        self.last = now
        if last is not None and now - last < self.quiet:
            return False
        record.exc_info = record.exc_text = None
        record.msg, record.args = message + " (repeats are not logged)", None
        return True


logging.getLogger(SDK_LOGGER).addFilter(ReconnectsOnce())


class _DrainingHandler(AsyncSocketModeHandler):
    """Counts envelopes being handled so shutdown can wait for their acks."""

    def __init__(self, app: AsyncApp, app_token: str) -> None:
        super().__init__(app, app_token)
        self.idle = asyncio.Event()
        self.idle.set()
        self._busy = 0

    async def handle(self, client: Any, req: Any) -> None:
        self._busy += 1
        self.idle.clear()
        try:
            await super().handle(client, req)
        finally:
            self._busy -= 1
            if not self._busy:
                self.idle.set()


class SocketModeLink:
    """The Socket Mode connection of one receiver: :meth:`run` holds it, :meth:`connected` says
    whether it is up now (``/readyz``)."""

    def __init__(self, app: AsyncApp, app_token: str) -> None:
        self.app = app
        self.app_token = app_token
        self._handler: _DrainingHandler | None = None

    async def connected(self) -> bool:
        handler = self._handler
        return handler is not None and bool(await handler.client.is_connected())

    async def run(self, ready: asyncio.Event) -> None:
        """Stay connected until cancelled, setting ``ready`` once connected; slack_sdk reconnects
        on its own when the link drops. Cancelled, it first lets envelopes in flight be acked."""
        handler = self._handler = _DrainingHandler(self.app, self.app_token)
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            log.info("receiving Slack interactions over Socket Mode")
            ready.set()
            await asyncio.Event().wait()
        finally:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(handler.idle.wait(), DRAIN_SECONDS)
            await handler.close_async()  # type: ignore[no-untyped-call]
            self._handler = None
