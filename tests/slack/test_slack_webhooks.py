"""Outcome webhooks sent by ``serve``: two replicas with ``ASK_BRIDGE_WEBHOOK_URL`` set, a click
through the fake Slack answers an ask, another is cancelled from the CLI's store: the loopback
receiver gets each outcome once, signed, with the ask's context; a per-ask ``notify`` URL too."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid

import aiohttp
from fake_slack import BOT_TOKEN, FakeSlack
from loopback_receiver import Receiver
from payloads import SIGNING_SECRET, block_actions, form_body, signed
from procs import Serve, cli_env
from redis_server import RedisServer
from samples import q

from bridge.models import QuestionSet
from bridge.record import AskRecord, AskStatus, Destination
from bridge.store.redis import RedisStore
from bridge.webhooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster

CHANNEL = "C0GENERAL"
HOOK_SECRET = secrets.token_hex(16)


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
        stamp, signature = hit.headers[TIMESTAMP_HEADER], hit.headers[SIGNATURE_HEADER]
        assert verify_signature(HOOK_SECRET, stamp, hit.body, signature)
        assert json.loads(hit.body)["context"] == {"pipeline": "release-9"}
    done = next(json.loads(h.body) for h in receiver.on("ok") if h.ask_id == answered.id)
    assert done["status"] == "answered" and done["answered_by"][0]["user_id"] == "U0ALICE"
    assert done["result"]["answers"][0]["selected"] == ["y"]
    log = "".join(line for serve in replicas for line in serve.log)
    assert HOOK_SECRET not in log and "Traceback" not in log
