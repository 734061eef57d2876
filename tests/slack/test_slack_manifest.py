"""The app manifest asks for exactly the scopes the bridge's Web API calls need."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from platforms.slack.http import EVENTS_PATH

ROOT = Path(__file__).resolve().parents[2]
SCOPES = {  # Web API method (as slack_sdk names it) -> bot scope it needs
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write",
    "chat_getPermalink": None,  # needs no scope: the message link `ask` shows
    "usergroups_users_list": "usergroups:read",
    "views_open": None,
    "views_update": None,
    "apps_connections_open": None,  # the app-level token's connections:write (start-up check)
    "conversations_info": None,  # doctor only: without channels:read it says it cannot check
}


API_FAMILIES = ("chat", "conversations", "users", "usergroups", "views", "reactions", "apps")


def methods_called() -> set[str]:
    """Every ``client.<family>_<method>(...)`` call in platforms/slack."""
    found = set()
    for path in (ROOT / "platforms" / "slack").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr.split("_")[0] in API_FAMILIES and "_" in node.func.attr:
                    found.add(node.func.attr)
    return found


def test_manifest_scopes_are_exactly_those_used() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "slack" / "manifest.yaml").read_text())
    called = methods_called()
    assert {"chat_postMessage", "usergroups_users_list"} <= called
    assert called <= set(SCOPES), f"new Web API method, add it to SCOPES: {called - set(SCOPES)}"
    needed = {SCOPES[m] for m in called} - {None}
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == needed
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert interactivity["request_url"].endswith(EVENTS_PATH)
