"""Receive ask-bridge's outcome webhooks: check the signature, skip repeats, act on the outcome.

Run it: ``python examples/webhook_receiver.py``. Runs offline as it is: it starts this receiver on
a loopback port, then ends one ask in an in-memory store with a webhook worker sending to it (what
``ask-bridge serve`` does with ``ASK_BRIDGE_WEBHOOK_URL`` set), and sends it a tampered copy too.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bridge.webhooks import verify_signature

SECRET = os.environ.get("ASK_BRIDGE_WEBHOOK_SECRET", "example-secret")
seen: set[str] = set()  # a real receiver keeps these durably (a database table, a Redis set)
delivered = threading.Event()  # for the demo below


def handle(headers: Any, body: bytes) -> int:
    """One webhook request (its headers and raw body): the HTTP status to answer."""
    timestamp = headers.get("X-AskBridge-Timestamp", "")
    signature = headers.get("X-AskBridge-Signature", "")
    if not verify_signature(SECRET, timestamp, body, signature):
        return 401  # not from the bridge, tampered with, or replayed more than 5 minutes later
    key = headers.get("Idempotency-Key", "")
    if key in seen:
        return 200  # sent again (our earlier reply was lost): already done
    seen.add(key)
    outcome = json.loads(body)  # ask_id, status, result, answered_by, context, ...
    print("outcome:", outcome["ask_id"], outcome["status"], json.dumps(outcome["result"]))
    delivered.set()
    return 200  # any 2xx: delivered; anything else: the bridge retries with backoff


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(handle(self.headers, body))
        self.end_headers()

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
    worker = asyncio.create_task(WebhookWorker(store, SECRET, url=url).run())
    await asyncio.to_thread(delivered.wait, 30)
    await stop(worker)  # cancelled until it ended (bridge.aio: one cancel is not always enough)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hooks/ask-bridge"
    asyncio.run(demo(url))
    forged = urllib.request.Request(
        url,
        data=b'{"ask_id": "x", "status": "answered"}',
        headers={"X-AskBridge-Timestamp": str(int(time.time())), "X-AskBridge-Signature": "v1=00"},
    )
    try:
        urllib.request.urlopen(forged, timeout=5)
    except urllib.error.HTTPError as exc:
        print("a forged request was refused:", exc.code)
    server.shutdown()


if __name__ == "__main__":
    main()
