"""Receive ask-bridge's outcome webhooks: check the signature, skip repeats, act on the outcome.

The requests follow the Standard Webhooks specification, so this receiver checks them with the
``standardwebhooks`` package (``pip install standardwebhooks``); other languages have theirs
(https://www.standardwebhooks.com).

Run it: ``python examples/webhook_receiver.py``. Runs offline as it is: it starts this receiver on
a loopback port, then ends one ask in an in-memory store with a webhook worker sending to it (what
``ask-bridge serve`` does with ``ASK_BRIDGE_WEBHOOK_URL`` set), and sends it a forged request and
a replay of the real one under a new ``webhook-id`` too.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

# this receiver's own secret: ASK_BRIDGE_WEBHOOK_SECRET's value for ASK_BRIDGE_WEBHOOK_URL, or
# that of the ASK_BRIDGE_WEBHOOK_DESTINATIONS entry covering its URL
SECRET = os.environ.get("WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
seen: set[str] = set()  # a real receiver keeps these durably (a database table, a Redis set)
received: list[tuple[dict[str, str], bytes]] = []  # for the demo below
delivered = threading.Event()


def handle(headers: Mapping[str, str], body: bytes) -> int:
    """One webhook request (its headers and raw body): the HTTP status to answer."""
    lowered = {name.lower(): value for name, value in headers.items()}
    try:
        outcome = Webhook(SECRET).verify(body, lowered)
    except (WebhookVerificationError, ValueError):  # ValueError: headers too garbled to parse
        return 401  # not from the bridge, tampered with, replayed, or more than 5 minutes old
    key = lowered["webhook-id"]  # signed: a replay under another id fails the check above
    if key in seen:
        return 200  # sent again (our earlier reply was lost): already done
    seen.add(key)
    print("outcome:", outcome["ask_id"], outcome["status"], json.dumps(outcome["result"]))
    return 200  # any 2xx: delivered; anything else: the bridge retries with backoff


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = dict(self.headers.items())
        status = handle(headers, body)
        self.send_response(status)
        self.end_headers()
        if status == 200:
            received.append((headers, body))
            delivered.set()

    def log_message(self, *args: Any) -> None:
        pass  # quiet: the outcome lines are this demo's output


async def demo(url: str) -> None:
    """End one ask with the worker sending to ``url``; return once it was delivered."""
    from bridge.aio import stop
    from bridge.models import Answer, Option, Question, QuestionSet
    from bridge.record import AskRecord, Destination, Responder
    from bridge.store.memory import MemoryStore
    from bridge.webhooks import WebhookWorker

    store = MemoryStore()
    question = Question(
        question="Deploy release 9 now?",
        header="Deploy",
        options=(Option(label="Ship it", description="Go"), Option(label="Hold", description="No")),
    )
    record = AskRecord(
        questions=QuestionSet(questions=(question,)),
        destination=Destination(platform="slack", channel="C0DEPLOY"),
        context={"pipeline": "release-9"},
        expires_at=time.time() + 3600,
        deferred=True,
    )
    await store.create(record)
    await store.submit(
        record.id,
        Responder(user_id="U0ALICE", name="Alice"),
        [Answer(question=question.question, selected=("Ship it",))],
    )
    worker = asyncio.create_task(WebhookWorker(store, url=url, secret=SECRET).run())
    await asyncio.to_thread(delivered.wait, 30)
    await stop(worker)  # cancelled until it ended (bridge.aio: one cancel is not always enough)


def refused(url: str, headers: dict[str, str], body: bytes) -> int:
    """POST ``body`` with ``headers``; the status the receiver answered."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hooks/ask-bridge"
    asyncio.run(demo(url))
    stamp = str(int(time.time()))
    forged = {"webhook-id": "msg_1", "webhook-timestamp": stamp, "webhook-signature": "v1,AAAA"}
    print("a forged request was refused:", refused(url, forged, b'{"ask_id": "x"}'))
    headers, body = received[0]
    replay = {k: v for k, v in headers.items() if k.lower().startswith("webhook-")}
    replay["webhook-id"] = "msg_another"  # the signature covers the id
    print("a replay under a new webhook-id was refused:", refused(url, replay, body))
    server.shutdown()


if __name__ == "__main__":
    main()
