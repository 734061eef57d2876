"""A Redis user (ACL) without a command the bridge sends: ``doctor`` names it with what to grant,
``/readyz`` answers 503 naming it, a click it fails is logged as the permission problem it is
(naming the command, no traceback), and a command fails in one line. A least-privilege user with
every command the bridge sends (but not INFO) passes ``doctor``.

Through the CLI as separate processes, over a real server whose users the test sets up: one that
lacks EVALSHA (checked with ``ACL DRYRUN``, which it may run), one that lacks XADD and XREADGROUP
and may not run ``ACL`` either (checked by queueing each command in ``MULTI`` and discarding it).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import uuid
from pathlib import Path

import aiohttp
import pytest

from bridge.models import QuestionSet
from bridge.record import AskRecord, Destination
from bridge.replies import MAYBE_SAVED, TRY_AGAIN
from bridge.store.redis import RedisStore
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer, redis_cli
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, block_actions, form_body, signed

CHANNEL = "C0GENERAL"
LACKING = {
    "noeval": (["-evalsha"], ["EVALSHA"]),
    "nostream": (["-xadd", "-xreadgroup", "-acl"], ["XADD", "XREADGROUP"]),
}
"""User name: the rules taken away from a user who may do anything, the commands then missing."""


def user_url(server: RedisServer, name: str, *rules: str) -> str:
    """The URL of a fresh user ``name`` on ``server``: every command, key and channel, then
    ``rules``."""
    redis_cli(
        server.port, "ACL", "SETUSER", name, "reset", "on", ">pw", "~*", "&*", "+@all", *rules
    )
    return f"redis://{name}:pw@127.0.0.1:{server.port}/0"


def slack_env(fake: FakeSlack, url: str, prefix: str) -> dict[str, str]:
    return cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url,
        REDIS_URL=url, ASK_BRIDGE_KEY_PREFIX=prefix,
    )  # fmt: skip


async def cli(cwd: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


def rows_of(out: str) -> dict[str, str]:
    rows = {}
    for line in out.splitlines():
        check, _, rest = line.partition("  ")
        rows[check.strip()] = rest.strip()
    return rows


async def posted_ask(store: RedisStore, fake: FakeSlack, expires_in: float = 300) -> AskRecord:
    """An ask created with the store's own (permitted) user and posted to the fake Slack."""
    record = AskRecord(
        questions=QuestionSet.model_validate({"questions": [q("Ship it?", "Ship", ["y", "n"])]}),
        destination=Destination(platform="slack", channel=CHANNEL),
        expires_at=time.time() + expires_in,
    )
    await store.create(record)
    ref = await SlackPoster(make_client(BOT_TOKEN, fake.url)).post(record)
    posted = await store.set_message(record.id, ref)
    assert posted is not None and posted.message is not None
    return posted


@pytest.mark.parametrize("user", sorted(LACKING))
async def test_doctor_names_each_missing_command_and_what_to_grant(
    fake: FakeSlack, redis_srv: RedisServer, tmp_path: Path, user: str
) -> None:
    rules, missing = LACKING[user]
    url = user_url(redis_srv, user, *rules)
    code, out, err = await cli(tmp_path, slack_env(fake, url, "acl"), "doctor")
    assert "Traceback" not in err
    rows = rows_of(out)
    assert code == 1, out
    assert rows["redis"].startswith("ok")  # it answers: only the permissions are wrong
    for command in missing:
        row = rows[f"redis permission {command}"]
        assert row.startswith("FIX") and f"Redis user '{user}' may not run {command} (" in row
        assert row.endswith(f"grant it: ACL SETUSER {user} +{command.lower()}")
    assert [r for r in rows if r.startswith("redis permission")] == [
        f"redis permission {c}" for c in missing
    ]


async def test_a_least_privilege_user_with_every_command_passes_doctor(
    fake: FakeSlack, redis_srv: RedisServer, tmp_path: Path
) -> None:
    """Only the bridge's keys and channels, nothing @dangerous (INFO, CONFIG, ACL among them):
    checked by MULTI/DISCARD, and INFO's facts are left as notes, not a failure."""
    prefix = "lp"
    url = user_url(redis_srv, "leastpriv", "-@dangerous", "resetkeys", f"~{prefix}:*")
    redis_cli(redis_srv.port, "ACL", "SETUSER", "leastpriv", "resetchannels", f"&{prefix}:*")
    code, out, err = await cli(tmp_path, slack_env(fake, url, prefix), "doctor")
    rows = rows_of(out)
    assert code == 0, out + err
    assert rows["redis permissions"] == (
        "ok    user 'leastpriv' may run every command the bridge sends (checked with MULTI/DISCARD)"
    )
    assert rows["redis persistence"].startswith("note") and "INFO" in rows["redis persistence"]
    assert rows["redis maxmemory-policy"].startswith("note")

    # and a user without the bridge's keys and channels: one row each, not one per command
    url = user_url(redis_srv, "elsewhere", "-@dangerous", "resetkeys", "~other:*")
    redis_cli(redis_srv.port, "ACL", "SETUSER", "elsewhere", "resetchannels")
    code, out, _ = await cli(tmp_path, slack_env(fake, url, prefix), "doctor")
    rows = rows_of(out)
    assert code == 1
    assert rows["redis permission keys"].startswith("FIX   Redis user 'elsewhere' may not use ")
    assert rows["redis permission keys"].endswith(f"grant it: ACL SETUSER elsewhere ~{prefix}:*")
    assert rows["redis permission channels"].endswith(f"ACL SETUSER elsewhere &{prefix}:*")
    assert len([r for r in rows if r.startswith("redis permission")]) == 2


@pytest.mark.parametrize("user", sorted(LACKING))
async def test_serve_is_not_ready_and_a_refused_click_is_logged_as_a_permission_problem(
    fake: FakeSlack, redis_srv: RedisServer, user: str
) -> None:
    rules, missing = LACKING[user]
    prefix = f"acl{uuid.uuid4().hex[:6]}"
    url = user_url(redis_srv, user, *rules)
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)  # the default user: may do all
    serve = await Serve(slack_env(fake, url, prefix)).start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{serve.port}/readyz") as resp:
                status, reasons = resp.status, await resp.text()
            assert status == 503
            for command in missing:
                assert f"Redis user '{user}' may not run {command} (" in reasons

            record = await posted_ask(store, fake)
            assert record.message is not None
            click = block_actions(
                fake, CHANNEL, record.message.message_id, "U0ALICE", f"askb:pick:{record.id}:0:0"
            )
            body = form_body(click)
            async with http.post(serve.url, data=body, headers=signed(body)) as resp:
                assert resp.status == 200
            (told,) = await fake.wait_for("chat.postEphemeral", lambda a: a["user"] == "U0ALICE")
            assert told["text"] in (TRY_AGAIN, MAYBE_SAVED)
            await posted_ask(store, fake, expires_in=0.5)  # expiring it is the sweeper's step
            await asyncio.sleep(3)  # sweeps 0.5 s apart meet the refusal: said once, not each
    finally:
        await serve.stop()
        await store.aclose()
    logged = [json.loads(line) for line in serve.log if line.startswith("{")]
    judged = [e for e in logged if e["message"].startswith("a click could not be judged")]
    assert len(judged) == 1, judged
    assert judged[0]["level"] == "ERROR"
    assert judged[0]["message"].startswith(
        f"a click could not be judged: Redis refused the command {missing[0]} to this user: a "
        "permission (ACL) problem, not an outage ("
    )
    (swept,) = [e for e in logged if e["message"].startswith("sweep failed")]
    assert swept["message"].startswith(
        f"sweep failed: Redis refused the command {missing[0]} to this user: a permission (ACL) "
        "problem"
    )
    assert "Traceback" not in "".join(serve.log)


async def test_a_command_refused_a_permission_fails_in_one_line(
    fake: FakeSlack, redis_srv: RedisServer, tmp_path: Path
) -> None:
    prefix = f"acl{uuid.uuid4().hex[:6]}"
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    try:
        record = await posted_ask(store, fake)
    finally:
        await store.aclose()
    url = user_url(redis_srv, "noeval", "-evalsha")
    code, out, err = await cli(tmp_path, slack_env(fake, url, prefix), "cancel", record.id)
    assert code == 1 and out == ""
    assert err.startswith(
        "ask-bridge cancel: Redis refused the command EVALSHA to this user: a permission (ACL) "
        "problem, not an outage (User noeval has no permissions to run the 'evalsha' command); "
        "grant it (ask-bridge doctor lists every one missing)\n"
    )
    assert err.count("\n") == 1


def test_every_command_the_script_calls_is_checked() -> None:
    """The scripts' own calls are checked too (an ACL applies inside a script): a call added
    there without its check here would pass ``doctor`` and fail every ask."""
    from bridge.redis_acl import needs
    from bridge.store.redis.scripts import SOURCES

    script = "\n".join(SOURCES.values())
    called = set(re.findall(r"redis\.call\('([A-Z]+)'(?:, '([A-Z]+)')?", script))
    checked = {n.command for n in needs("p", cluster=True)}
    words = {f"{c} {sub}" if c == "PUBSUB" else c for c, sub in called}
    assert words and words <= checked, words - checked
