"""Interaction payloads shaped like Slack's, and request signing like Slack's."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

from tests.support.slack.fake_slack import FakeSlack

SIGNING_SECRET = "test-signing-secret"
TEAM = {"id": "T0FAKE", "domain": "fake"}


def signed(body: str, *, secret: str = SIGNING_SECRET, at: float | None = None) -> dict[str, str]:
    ts = str(int(time.time() if at is None else at))
    mac = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={mac}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def form_body(payload: dict[str, Any]) -> str:
    return urlencode({"payload": json.dumps(payload)})


def user(user_id: str) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": user_id.lower(),
        "name": user_id.lower(),
        "team_id": "T0FAKE",
    }


def find_action(message: dict[str, Any], prefix: str) -> tuple[str, dict[str, Any]]:
    """The block id and element of the first control whose action_id starts with ``prefix``."""
    for block in message.get("blocks") or ():
        for el in block.get("elements") or ():
            if str(el.get("action_id", "")).startswith(prefix):
                return str(block["block_id"]), el
    raise AssertionError(f"no action {prefix!r} in message: {message.get('blocks')}")


def block_actions(
    fake: FakeSlack, channel: str, ts: str, user_id: str, action_prefix: str
) -> dict[str, Any]:
    """A click on a control of a message the fake holds, as Slack would deliver it."""
    message = fake.messages[(channel, ts)]
    block_id, el = find_action(message, action_prefix)
    return {
        "type": "block_actions",
        "user": user(user_id),
        "api_app_id": "A0FAKE",
        "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": ts, "channel_id": channel},
        "trigger_id": fake.new_trigger(),
        "team": TEAM,
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "general"},
        "message": {
            "type": "message",
            "ts": ts,
            "text": message.get("text", ""),
            "blocks": message.get("blocks"),
            **({"thread_ts": message["thread_ts"]} if message.get("thread_ts") else {}),
        },
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T0FAKE/1/x",
        "actions": [
            {
                "type": "button",
                "action_id": el["action_id"],
                "block_id": block_id,
                "text": el.get("text"),
                "value": el.get("value"),
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def view_submission(
    fake: FakeSlack, view_id: str, user_id: str, values: dict[str, Any]
) -> dict[str, Any]:
    """Submitting a modal the fake opened, with ``values`` as ``state.values``."""
    view = fake.views[view_id]
    return {
        "type": "view_submission",
        "team": TEAM,
        "user": user(user_id),
        "api_app_id": "A0FAKE",
        "token": "legacy-verification-token",
        "trigger_id": fake.new_trigger(),
        "view": {**view, "state": {"values": values}},
        "response_urls": [],
        "is_enterprise_install": False,
    }


def radio(index: int | None) -> dict[str, Any]:
    chosen = {"value": str(index), "text": {"type": "plain_text", "text": "x"}}
    return {"type": "radio_buttons", "selected_option": chosen if index is not None else None}


def checks(*indices: int) -> dict[str, Any]:
    return {
        "type": "checkboxes",
        "selected_options": [
            {"value": str(i), "text": {"type": "plain_text", "text": "x"}} for i in indices
        ],
    }


def typed(text: str | None) -> dict[str, Any]:
    return {"type": "plain_text_input", "value": text}


def form_values(*answers: tuple[dict[str, Any] | None, str | None]) -> dict[str, Any]:
    """``state.values`` of the answer form: per question (choice state or None, typed text)."""
    values: dict[str, Any] = {}
    for i, (choice, text) in enumerate(answers):
        if choice is not None:
            values[f"q{i}.pick"] = {"pick": choice}
        values[f"q{i}.other"] = {"text": typed(text)}
    return values
