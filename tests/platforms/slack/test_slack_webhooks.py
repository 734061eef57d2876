"""Outcome webhooks sent by ``serve``: two replicas with ``ASK_BRIDGE_WEBHOOK_URL`` set, a click
through the fake Slack answers an ask, another is cancelled from the CLI's store: the loopback
receiver gets each outcome once, signed (Standard Webhooks, checked with ``standardwebhooks``),
with the ask's context; a per-ask ``notify`` URL too, signed with its allow-list entry's secret.
Notify URLs that no entry allows, or whose host resolves to loopback, get nothing -- no
connection at all -- and ``ask-bridge show`` tells so without the URLs' credentials."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import sys
import time
import uuid
from typing import Any

import aiohttp
from standardwebhooks import Webhook

from bridge.models import QuestionSet
from bridge.record import AskRecord, AskStatus, Destination
from bridge.store.redis import RedisStore
from bridge.webhook_settings import DESTINATIONS_ENV
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from tests.support.loopback_receiver import Receiver, Trap
from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, block_actions, form_body, signed

CHANNEL = "C0GENERAL"
HOOK_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
OWN_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


async def post_ask(store: RedisStore, fake: FakeSlack, notify: tuple[str, ...] = ()) -> AskRecord:
    record = AskRecord(
        questions=QuestionSet.model_validate(
            {"questions": [q("Deploy now?", "Deploy", ["y", "n"])]}
        ),
        destination=Destination(platform="slack", channel=CHANNEL),
        context={"pipeline": "release-9"},
        expires_at=time.time() + 300,
        notify=notify,
    )
    await store.create(record)
    ref = await SlackPoster(make_client(BOT_TOKEN, fake.url)).post(record)
    posted = await store.set_message(record.id, ref)
    assert posted is not None and posted.message is not None
    return posted


async def test_two_serve_replicas_send_each_outcome_once(
    fake: FakeSlack, redis_srv: RedisServer
) -> None:
    receiver = await Receiver().start()
    prefix = f"hook{uuid.uuid4().hex[:6]}"
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url,
        REDIS_URL=redis_srv.url, ASK_BRIDGE_KEY_PREFIX=prefix,
        ASK_BRIDGE_WEBHOOK_URL=receiver.url(), ASK_BRIDGE_WEBHOOK_SECRET=HOOK_SECRET,
        **{DESTINATIONS_ENV: json.dumps(
            [{"prefix": f"http://127.0.0.1:{receiver.port}/own", "secret": OWN_SECRET}])},
    )  # fmt: skip
    replicas = [await Serve(env).start(), await Serve(env).start()]
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    try:
        answered = await post_ask(store, fake, notify=(receiver.url("own"),))
        assert answered.message is not None
        click = block_actions(
            fake, answered.message.channel, answered.message.message_id, "U0ALICE",
            f"askb:pick:{answered.id}:0:0",
        )  # fmt: skip
        body = form_body(click)
        async with aiohttp.ClientSession() as http:
            async with http.post(replicas[1].url, data=body, headers=signed(body)) as resp:
                assert resp.status == 200
        cancelled = await post_ask(store, fake)
        await store.close(cancelled.id, AskStatus.CANCELLED, by="ops")
        await receiver.until(lambda: len(receiver.hits) >= 3, within=30)
        await asyncio.sleep(1.5)  # nothing more comes: no replica sends one twice
    finally:
        for serve in replicas:
            await serve.stop()
        await store.aclose()
        await receiver.stop()
    assert sorted((h.path, h.ask_id) for h in receiver.hits) == sorted(
        [("/ok", answered.id), ("/own", answered.id), ("/ok", cancelled.id)]
    )
    for hit in receiver.hits:
        secret = OWN_SECRET if hit.path == "/own" else HOOK_SECRET
        assert Webhook(secret).verify(hit.body, hit.headers)["context"] == {"pipeline": "release-9"}
    done = next(json.loads(h.body) for h in receiver.on("ok") if h.ask_id == answered.id)
    assert done["status"] == "answered" and done["answered_by"][0]["user_id"] == "U0ALICE"
    assert done["result"]["answers"][0]["selected"] == ["y"]
    log = "".join(line for serve in replicas for line in serve.log)
    assert HOOK_SECRET not in log and OWN_SECRET not in log and "Traceback" not in log


async def test_serve_sends_nothing_where_nobody_allowed_and_show_redacts(
    fake: FakeSlack, redis_srv: RedisServer
) -> None:
    """An ask's notify URLs as stored (made under another allow-list): a loopback admin path and
    Redis's port, which no entry of this ``serve`` covers, and a name an entry covers but which
    resolves to loopback, each get one ``refused`` event and no connection; the allowed one is
    delivered. ``show`` prints the record's URLs without their credentials."""
    receiver, trap = await Receiver().start(), await Trap().start()
    prefix = f"hook{uuid.uuid4().hex[:6]}"
    entries = [
        {"prefix": f"http://127.0.0.1:{receiver.port}/own", "secret": OWN_SECRET},
        {"prefix": f"http://localhost:{trap.port}/", "secret": OWN_SECRET},
    ]
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url,
        REDIS_URL=redis_srv.url, ASK_BRIDGE_KEY_PREFIX=prefix,
        **{DESTINATIONS_ENV: json.dumps(entries)},
    )  # fmt: skip
    refused = [
        f"http://127.0.0.1:{trap.port}/admin",
        f"http://127.0.0.1:{redis_srv.port}/",
        f"http://localhost:{trap.port}/hooks",
    ]
    allowed = f"http://bob:hunter2@127.0.0.1:{receiver.port}/own?token=t0ps3cr3t"
    serve = await Serve(env).start()
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    try:
        ask = await post_ask(store, fake, notify=(*refused, allowed))
        await store.close(ask.id, AskStatus.CANCELLED, by="ops")
        await receiver.until(lambda: len(receiver.hits) == 1, within=30)
        deadline = time.monotonic() + 30
        while len([e for e in await store.history(ask.id) if e.kind == "webhook"]) < 4:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        shown = await show(env, ask.id)
    finally:
        await serve.stop()
        await store.aclose()
        await receiver.stop()
        await trap.stop()
    assert trap.connections == 0
    events = {e["detail"]["url"]: e["detail"] for e in shown["history"] if e["kind"] == "webhook"}
    for url in refused:
        assert events[url]["status"] == "refused" and "code" not in events[url], events
    assert "not a public address" in events[refused[2]]["error"]
    assert events[f"http://127.0.0.1:{receiver.port}/own"]["status"] == "delivered"
    (hit,) = receiver.hits
    assert Webhook(OWN_SECRET).verify(hit.body, hit.headers)["status"] == "cancelled"
    text = json.dumps(shown)
    assert "hunter2" not in text and "t0ps3cr3t" not in text and OWN_SECRET not in text
    assert shown["record"]["notify"][-1] == (f"http://***@127.0.0.1:{receiver.port}/own?token=***")


async def show(env: dict[str, str], ask_id: str) -> dict[str, Any]:
    """``ask-bridge show ASK_ID``'s JSON."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "show", ask_id, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    shown: dict[str, Any] = json.loads(out)
    return shown
