"""Hostile requests to ``POST /slack/events``: verified before parsed, refused in one line.

Anyone who can reach the URL can send anything. Unsigned or forged requests get 401 whatever
their body, signed requests Bolt could not take get 400, and none of it ends in a 500 or a
traceback; a flood of refusals is logged as a few lines, not one per request. Each request is
verified once (slack_sdk's verifier, not again inside Bolt), before anything parses it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from typing import Any
from urllib.parse import quote_plus, unquote_plus, urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.signature import SignatureVerifier

from bridge.http_server import LOG_EVERY
from bridge.record import AskStatus
from platforms.slack import http
from platforms.slack.http import form_value
from tests.support.procs import Serve, cli_env
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import (
    SIGNING_SECRET,
    block_actions,
    form_body,
    signed,
    view_submission,
)
from tests.support.slack.slack_harness import Bolt

GARBAGE: list[bytes] = [
    b"payload=notjson",
    b"payload=123",
    b"payload=%5B%5D",  # []
    b"{bad",
    b"payload=%FF%FE",  # a form whose value is not UTF-8
    b"",
    b"payload=%7B%7D",  # {} (no type)
    b"payload=1&payload=2",
]
NOT_UTF8 = b"\xff\xfe\x00garbage"


def sign_bytes(body: bytes, *, at: float | None = None) -> dict[str, str]:
    ts = str(int(time.time() if at is None else at))
    mac = hmac.new(SIGNING_SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256)
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={mac.hexdigest()}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


async def post(bolt: Bolt, body: bytes, headers: dict[str, str]) -> int:
    async with bolt.session.post(bolt.url, data=body, headers=headers) as resp:
        return resp.status


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.exc_info is not None or r.levelno >= logging.ERROR]
    assert bad == [], [r.getMessage() for r in bad]


@pytest.mark.parametrize("body", [*GARBAGE, NOT_UTF8])
async def test_unsigned_garbage_is_401_without_a_traceback(
    bolt: Bolt, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    assert await post(bolt, body, headers) == 401
    no_tracebacks(caplog)


@pytest.mark.parametrize("timestamp", ["abc", "", "12.5", "1e9", "٣٣٣٣", "9" * 40])
async def test_a_bad_timestamp_is_401(
    bolt: Bolt, timestamp: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {**sign_bytes(b"payload=notjson"), "X-Slack-Request-Timestamp": timestamp}
    assert await post(bolt, b"payload=notjson", headers) == 401
    no_tracebacks(caplog)


@pytest.mark.parametrize("body", GARBAGE)
async def test_signed_garbage_is_400_without_a_traceback(
    bolt: Bolt, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert await post(bolt, body, sign_bytes(body)) == 400
    no_tracebacks(caplog)


async def test_a_body_that_is_not_utf8_is_401_even_signed(
    bolt: Bolt, caplog: pytest.LogCaptureFixture
) -> None:
    """slack_sdk's verifier reads the body as UTF-8, and Slack sends nothing else: bytes that are
    not UTF-8 cannot be a request Slack signed, whatever their signature says."""
    caplog.set_level(logging.DEBUG)
    assert await post(bolt, NOT_UTF8, sign_bytes(NOT_UTF8)) == 401
    no_tracebacks(caplog)


async def test_a_request_is_verified_once_before_it_is_parsed(
    bolt: Bolt, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every signature check slack_sdk's verifier makes (the route's, and Bolt's own if it were
    on) and the route's parsing of the body, in order, for one click: one check, then the
    parse."""
    record = await bolt.ask([q("Deploy now?", "Deploy", ["yes", "no"])])
    seen: list[str] = []
    check, parse = SignatureVerifier.is_valid, http.read_payload

    def counted_check(verifier: SignatureVerifier, *args: Any, **kwargs: Any) -> bool:
        seen.append("verify")
        return check(verifier, *args, **kwargs)

    def counted_parse(*args: Any) -> tuple[str | None, dict[str, Any] | None]:
        seen.append("parse")
        return parse(*args)

    monkeypatch.setattr(SignatureVerifier, "is_valid", counted_check)
    monkeypatch.setattr(http, "read_payload", counted_parse)
    status, _ = await bolt.send(block_actions(bolt.fake, *_where(record), "U0ALICE", "askb:pick:"))
    assert status == 200
    assert seen == ["verify", "parse"]
    await bolt.fake.wait_for("chat.update")  # the click was handled, not only acknowledged


def odd_shapes(bolt: Bolt, record: Any, view_id: str) -> list[dict[str, Any]]:
    """Signed payloads of odd shape, each a real click or submission bent one way."""
    base = block_actions(bolt.fake, *_where(record), "U0ALICE", f"askb:answer:{record.id}")
    sub = view_submission(bolt.fake, view_id, "U0ALICE", {})
    shapes: list[dict[str, Any]] = []
    shapes.append({**base, "actions": []})
    shapes.append({**base, "actions": [{**base["actions"][0], "action_id": 7}]})
    shapes.append({**base, "actions": ["askb:answer"]})
    shapes.append({**base, "user": "U0ALICE"})
    shapes.append({**base, "user": {"id": 5}})
    shapes.append({**base, "channel": "C0GENERAL"})
    shapes.append({**base, "message": []})
    shapes.append({**sub, "view": {**sub["view"], "state": {"values": []}}})
    shapes.append({**sub, "view": {**sub["view"], "state": "x"}})
    shapes.append({**sub, "view": "v"})
    return shapes


async def test_signed_payloads_of_odd_shape_are_400(
    bolt: Bolt, caplog: pytest.LogCaptureFixture
) -> None:
    record = await bolt.ask(
        [q("Which region?", "Region", ["eu", "us"]), q("When?", "When", ["now", "later"])]
    )
    await bolt.send(block_actions(bolt.fake, *_where(record), "U0ALICE", "askb:answer:"))
    await bolt.fake.wait_for("views.open")
    view_id = next(iter(bolt.fake.views))
    caplog.set_level(logging.DEBUG)
    for payload in odd_shapes(bolt, record, view_id):
        body = form_body(payload)
        assert await post(bolt, body.encode(), signed(body)) == 400, payload
    no_tracebacks(caplog)
    still = await bolt.store.get(record.id)
    assert still is not None and still.status is AskStatus.PENDING


def _where(record: Any) -> tuple[str, str]:
    return record.message.channel, record.message.message_id


async def test_a_flood_of_refusals_logs_a_few_lines(
    bolt: Bolt, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    for _ in range(300):
        assert await post(bolt, b"payload=notjson", headers) == 401
    lines = [r for r in caplog.records if "refused a request" in r.getMessage()]
    assert 1 <= len(lines) <= 2
    no_tracebacks(caplog)


def raw_requests(timestamp: int) -> dict[str, tuple[bytes, int]]:
    """Requests no HTTP client library would send, by what is wrong with them: the bytes, and
    the status each must get."""
    head = b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    signed_head = head + b"Connection: close\r\nContent-Length: 9\r\nX-Slack-Request-Timestamp: "
    signed_head += str(timestamp).encode() + b"\r\n"
    return {
        "request line over 8 KB": (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 400),
        "header over 8 KB": (head + b"X-Pad: " + b"a" * 9000 + b"\r\n\r\n", 400),
        "200 headers": (head + b"".join(b"X-%d: y\r\n" % i for i in range(200)) + b"\r\n", 400),
        "bad chunk size": (head + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400),
        "bad Content-Length": (head + b"Content-Length: abc\r\n\r\n", 400),
        "Content-Length and chunked": (
            head + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        "bad HTTP version": (b"GET / HTTP/9.9x\r\n\r\n", 400),
        "non-ASCII signature": (signed_head + b"X-Slack-Signature: v0=\xe9\r\n\r\npayload=x", 401),
        "non-UTF-8 signature": (signed_head + b"X-Slack-Signature: \xff\xfe\r\n\r\npayload=x", 401),
        "another scheme": (
            signed_head + b"X-Slack-Signature: v1=" + b"0" * 64 + b"\r\n\r\npayload=x",
            401,
        ),
        "short signature": (signed_head + b"X-Slack-Signature: v0=00\r\n\r\npayload=x", 401),
        "no signature": (signed_head + b"\r\npayload=x", 401),
    }


async def raw_status(port: int, request: bytes) -> int:
    """The status ``request``, sent as it is on a fresh connection, got."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
    finally:
        writer.close()
    return int(status_line.split()[1])


async def leave_before_the_body(port: int) -> None:
    """A request whose sender leaves before its body has all arrived."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nab")
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def test_serve_refuses_malformed_requests_with_4xx_in_a_few_log_lines(
    fake: FakeSlack,
) -> None:
    """400 requests that are not HTTP, or carry a signature header that is not a signature, to
    a real ``serve``, then a body over the size limit and senders that leave before their body
    arrived: each is refused with its 4xx -- none a 500 -- and the log has no traceback, only a
    line per :data:`LOG_EVERY` seconds (it had one traceback per request but the 413)."""
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    serve = await Serve(env).start()
    served = len(serve.log)
    try:
        started = time.monotonic()
        requests = list(raw_requests(int(time.time())).items()) * 34  # 408
        for first in range(0, len(requests), 12):
            batch = requests[first : first + 12]
            got = await asyncio.gather(*(raw_status(serve.port, raw) for _, (raw, _) in batch))
            assert got == [want for _, (_, want) in batch], [name for name, _ in batch]
        body = b"a" * (2**20 + 1)  # one byte over aiohttp's limit: all sent, none left unread
        head = f"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}"
        assert await raw_status(serve.port, head.encode() + b"\r\n\r\n" + body) == 413
        for _ in range(10):
            await leave_before_the_body(serve.port)
        await asyncio.sleep(0.5)  # their ends reach the server
        took = time.monotonic() - started
    finally:
        await serve.stop()
    assert serve.returncode == 0
    logged = serve.log[served:]
    assert not [line for line in logged if "Traceback" in line or '"ERROR"' in line], logged
    refusals = [line for line in logged if "refused a request" in line]
    assert 1 <= len(refusals) <= 1 + took // LOG_EVERY, refusals
    assert len("".join(logged)) < 4000, logged


async def test_a_body_over_the_size_limit_is_a_refusal_too(
    bolt: Bolt, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    assert await post(bolt, b"a" * (2**20 + 1), headers) == 413  # raised by aiohttp's read
    (line,) = [r.getMessage() for r in caplog.records if "refused a request" in r.getMessage()]
    assert ": 413 Maximum request body size" in line
    no_tracebacks(caplog)


async def test_a_json_body_that_is_not_an_object_is_400(bolt: Bolt) -> None:
    for body in (b"[]", b"12", b'"x"', b"{bad"):
        headers = {**sign_bytes(body), "Content-Type": "application/json"}
        assert await post(bolt, body, headers) == 400


async def test_ssl_check_still_reaches_bolt(bolt: Bolt) -> None:
    body = urlencode({"ssl_check": "1", "token": "x"}).encode()
    assert await post(bolt, body, sign_bytes(body)) == 200


async def test_a_well_formed_click_still_answers(bolt: Bolt) -> None:
    record = await bolt.ask([q("Ship it?", "Deploy", ["Yes", "No"])])
    payload = block_actions(bolt.fake, *_where(record), "U0ALICE", f"askb:pick:{record.id}:0:0")
    status, _ = await bolt.send(payload)
    assert status == 200
    done = await bolt.store.get(record.id)
    assert done is not None and done.status is AskStatus.ANSWERED
    assert done.answers is not None and done.answers[0].selected == ("Yes",)


_FORM_TEXT = st.text(st.characters(codec="utf-8")) | st.text("%=+&; \t\r\n0123456789abcdefABCDEFGz")


@given(_FORM_TEXT, st.sampled_from(["", "/", "+ ", "=%"]), st.booleans())
@settings(max_examples=3000, deadline=None)
def test_a_form_value_decodes_as_python_decodes_it(text: str, safe: str, lower: bool) -> None:
    """The fast decoder gives what ``unquote_plus(..., errors="strict")`` gives for anything:
    what a client encodes (in either case of hex digit), raw text, and malformed escapes."""
    for raw in (quote_plus(text, safe=safe), text):
        raw = raw.lower() if lower else raw
        try:
            want: str | None = unquote_plus(raw, errors="strict")
        except UnicodeDecodeError:
            want = None
        try:
            got: str | None = form_value(raw)
        except UnicodeDecodeError:
            got = None
        assert got == want


@pytest.mark.parametrize(
    "raw", ["%", "a%", "a%4", "%zz", "%4g", "a=b", "=", "%3D", "x%0D%0Ay", "+%2B+"]
)
def test_a_form_value_with_odd_escapes_decodes_as_python_decodes_it(raw: str) -> None:
    assert form_value(raw) == unquote_plus(raw, errors="strict")
