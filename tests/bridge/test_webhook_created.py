"""The opt-in ``created`` webhook event: a web ask announced with its answerers' links.

Against a loopback receiver and a real Redis: through the worker's :meth:`announce` (signed as
every webhook is, its own ``webhook-id``, one audit event without the links), and end to end
through ``ask --platform web`` -- sent only when ``ASK_BRIDGE_WEBHOOK_CREATED`` opts in.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from bridge.record import AskStatus
from bridge.store.redis import RedisStore
from bridge.web_links import ASK_PATH, Links, Person
from bridge.webhook_settings import CREATED_ENV, DESTINATIONS_ENV, WebhookDestination
from bridge.webhooks import ID_HEADER, WebhookWorker, idempotency_key
from tests.support.engine_fixtures import new_record
from tests.support.loopback_receiver import Receiver
from tests.support.procs import cli_env
from tests.support.redis_server import RedisServer

OWN = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
WEB_SECRET = "w" * 40
BASE = "https://asks.example.com"
QUESTIONS = [
    {
        "question": "Approve the release?",
        "header": "Release",
        "multiSelect": False,
        "options": [{"label": "y", "description": "y"}, {"label": "n", "description": "n"}],
    }
]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.start()
    yield r
    await r.stop()


@pytest.fixture
def prefix() -> str:
    return f"wc{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def store(standalone: RedisServer, prefix: str) -> AsyncIterator[RedisStore]:
    s = RedisStore.from_url(standalone.url, prefix=prefix)
    yield s
    await s.aclose()


def allowing(receiver: Receiver) -> WebhookDestination:
    return WebhookDestination(
        prefix=f"http://127.0.0.1:{receiver.port}/", secret=OWN, networks=("127.0.0.0/8",)
    )


async def hooks(store: RedisStore, ask_id: str) -> list[dict[str, Any]]:
    return [e.detail for e in await store.history(ask_id) if e.kind == "webhook"]


async def test_announce_sends_the_links_signed_once_per_destination(
    store: RedisStore, receiver: Receiver
) -> None:
    record = new_record().model_copy(update={"notify": (receiver.url(),)})
    await store.create(record)
    links = {"Ana": f"{BASE}/a/token-of-ana"}
    worker = WebhookWorker(store, destinations=(allowing(receiver),))
    await worker.announce(record, links)
    (hit,) = receiver.hits
    payload = Webhook(OWN).verify(hit.body, hit.headers)
    assert payload["event"] == "created" and payload["ask_id"] == record.id
    assert payload["links"] == links and payload["expires_at"] == record.expires_at
    assert hit.headers[ID_HEADER] == idempotency_key(record.id, receiver.url(), "created")
    assert hit.headers[ID_HEADER] != idempotency_key(record.id, receiver.url())  # the outcome's
    (event,) = await hooks(store, record.id)
    assert (event["event"], event["status"], event["code"]) == ("created", "delivered", 204)
    trail = json.dumps([e.model_dump() for e in await store.history(record.id)])
    assert "token-of-ana" not in trail and "t0ps3cr3t" not in trail  # links are credentials


async def test_announce_gives_up_after_its_attempts(store: RedisStore, receiver: Receiver) -> None:
    record = new_record().model_copy(update={"notify": (receiver.url("fail"),)})
    await store.create(record)
    worker = WebhookWorker(store, destinations=(allowing(receiver),), first_delay=0.01)
    await worker.announce(record, {"Ana": f"{BASE}/a/x"})
    assert len(receiver.hits) == 4
    (event,) = await hooks(store, record.id)
    assert (event["status"], event["attempt"], event["code"]) == ("gave_up", 4, 500)


async def _ask(env: dict[str, str]) -> tuple[int | None, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "ask", "--platform", "web", "--answerer", "Ana",
        "--answerer", "Bo", "--notify", env["NOTIFY"], "--mode", "defer", "-", env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(json.dumps(QUESTIONS).encode()), 60)
    return proc.returncode, out, err


async def test_ask_on_the_web_announces_the_links_when_opted_in(
    standalone: RedisServer, prefix: str, store: RedisStore, receiver: Receiver
) -> None:
    env = cli_env(
        REDIS_URL=standalone.url,
        ASK_BRIDGE_KEY_PREFIX=prefix,
        ASK_BRIDGE_WEB_SECRET=WEB_SECRET,
        ASK_BRIDGE_WEB_URL=BASE,
        NOTIFY=receiver.url(),
        **{DESTINATIONS_ENV: json.dumps([allowing(receiver).model_dump()])},
    )
    status, out, err = await _ask(env)
    assert status == 3, err
    await asyncio.sleep(0.2)
    assert receiver.hits == []  # not opted in: only the outcome, later, from serve
    status, out, err = await _ask({**env, CREATED_ENV: "1"})
    assert status == 3, err
    ask_id = json.loads(out)["ask_id"]
    (hit,) = receiver.hits
    payload = Webhook(OWN).verify(hit.body, hit.headers)
    assert payload["ask_id"] == ask_id and list(payload["links"]) == ["Ana", "Bo"]
    links = Links([WEB_SECRET], BASE)
    for name, url in payload["links"].items():
        link = links.verify(url.removeprefix(BASE + ASK_PATH))
        assert (link.ask_id, link.person) == (ask_id, Person("web", name, name))
    record = await store.get(ask_id)
    assert record is not None and record.status is AskStatus.PENDING
