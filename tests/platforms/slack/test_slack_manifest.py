"""The Slack app manifest: exactly the scopes the bridge's Web API calls need, valid by Slack's own
JSON Schema (``tests/specs/slack_manifest_schema_v1.json``) and by the documented rules that
schema leaves out, the same in ``deploy/slack/manifest.yaml`` as ``ask-bridge slack manifest``
prints, and carried whole by the "create an app" link."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import pytest
import yaml

from bridge.cli import main
from platforms.slack.http import EVENTS_PATH
from platforms.slack.manifest import build_manifest, create_app_link

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "tests" / "specs" / "slack_manifest_schema_v1.json").read_text())
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
OPTIONAL = {"usergroups:read"}  # only an ask naming a user group among its answerers uses it
HTTP_URL = "https://bridge.example.com/slack/events"
MANIFESTS = {
    "http": build_manifest(HTTP_URL),
    "socket-mode": build_manifest(None),
    "http-no-user-groups": build_manifest(HTTP_URL, user_groups=False),
    "socket-mode-no-user-groups": build_manifest(None, user_groups=False),
}
BACKGROUND_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3}){1,2}$")


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


def schema_errors(manifest: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(manifest)]


def test_manifest_scopes_are_exactly_those_used() -> None:
    called = methods_called()
    assert {"chat_postMessage", "usergroups_users_list"} <= called
    assert called <= set(SCOPES), f"new Web API method, add it to SCOPES: {called - set(SCOPES)}"
    needed = {SCOPES[m] for m in called} - {None}
    assert set(MANIFESTS["http"]["oauth_config"]["scopes"]["bot"]) == needed
    without = set(MANIFESTS["http-no-user-groups"]["oauth_config"]["scopes"]["bot"])
    assert without == needed - OPTIONAL


def test_the_deploy_kit_manifest_is_what_the_command_prints() -> None:
    """One source of truth: the YAML in deploy/ is the builder's output for a placeholder host
    (edit platforms/slack/manifest.py, then the YAML to match)."""
    kit = yaml.safe_load((ROOT / "deploy" / "slack" / "manifest.yaml").read_text())
    assert kit == build_manifest(f"https://YOUR-HOST{EVENTS_PATH}")


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_is_valid_by_slacks_schema_and_documented_rules(name: str) -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    manifest = MANIFESTS[name]
    assert schema_errors(manifest) == []
    # Rules of https://api.slack.com/reference/manifests the schema does not enforce: the colour
    # is a 3- or 6-digit hex value (the schema says so with "regex", which is no JSON Schema
    # keyword); interactivity needs a request URL unless Socket Mode is on (apps.manifest.create's
    # "Interactivity requires a Request URL"), and that URL is "the full https URL".
    assert BACKGROUND_COLOR.match(manifest["display_information"]["background_color"])
    settings = manifest["settings"]
    interactivity = settings["interactivity"]
    assert interactivity["is_enabled"] is True
    if settings["socket_mode_enabled"]:
        assert "request_url" not in interactivity
    else:
        assert interactivity["request_url"] == HTTP_URL
        assert urlsplit(interactivity["request_url"]).scheme == "https"
    assert "event_subscriptions" not in settings  # the bridge reads no event


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("display_information", "name"), "a" * 36),  # names are at most 35 characters
        (("settings", "socket_mode"), True),  # misspelt: socket_mode_enabled
        (("settings", "interactivity", "request_url"), "bridge.example.com/slack/events"),
        (("oauth_config", "scopes", "bot"), "chat:write"),  # a list, not a string
    ],
)
def test_the_schema_refuses_what_slack_refuses(where: tuple[str, ...], value: object) -> None:
    """The vendored schema has teeth: each of these manifests Slack would refuse fails it."""
    manifest = json.loads(json.dumps(MANIFESTS["http"]))
    node = manifest
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    assert schema_errors(manifest) != []


def test_the_create_link_carries_the_whole_manifest() -> None:
    manifest = MANIFESTS["http"]
    link = urlsplit(create_app_link(manifest))
    assert (link.scheme, link.netloc, link.path) == ("https", "api.slack.com", "/apps")
    assert link.fragment == ""  # the colour's '#' is escaped, or the browser would cut there
    query = parse_qs(link.query, strict_parsing=True)
    assert query.keys() == {"new_app", "manifest_json"} and query["new_app"] == ["1"]
    assert json.loads(query["manifest_json"][0]) == manifest


@pytest.fixture
def no_slack_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in ("SLACK_APP_TOKEN", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"):
        monkeypatch.delenv(name, raising=False)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command's status, stdout and stderr (a bad command line exits from the parser)."""
    try:
        status = main(["slack", "manifest", *args])
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.usefixtures("no_slack_settings")
@pytest.mark.parametrize(
    ("given", "request_url"),
    [
        ("https://bridge.example.com", HTTP_URL),  # a bare host gets serve's path
        ("https://bridge.example.com/", HTTP_URL),
        ("https://example.com/ask/slack/events", "https://example.com/ask/slack/events"),
    ],
)
def test_http_mode_prints_the_manifest_and_the_link(
    capsys: pytest.CaptureFixture[str], given: str, request_url: str
) -> None:
    status, out, err = run_cli(capsys, "--request-url", given)
    assert status == 0
    manifest = json.loads(out)
    assert manifest == build_manifest(request_url)
    assert create_app_link(manifest) in err.splitlines()
    assert "SLACK_BOT_TOKEN" in err and "SLACK_SIGNING_SECRET" in err


@pytest.mark.usefixtures("no_slack_settings")
def test_socket_mode_by_flag_or_by_the_configured_app_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, err = run_cli(capsys, "--socket-mode", "--no-user-groups")
    assert status == 0
    assert json.loads(out) == build_manifest(None, user_groups=False)
    assert "connections:write" in err and "SLACK_APP_TOKEN" in err

    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-A0-0-abc")
    status, out, _ = run_cli(capsys)
    assert status == 0
    assert json.loads(out) == build_manifest(None)


@pytest.mark.usefixtures("no_slack_settings")
@pytest.mark.parametrize(
    ("args", "names"),
    [
        ((), ("--request-url", "--socket-mode")),  # HTTP mode, and no URL to send clicks to
        (("--request-url", "http://bridge.example.com"), ("--request-url", "https://")),
        (("--request-url", "bridge.example.com"), ("--request-url",)),
        (("--socket-mode", "--request-url", "https://x.example"), ("not allowed with",)),
    ],
)
def test_what_it_cannot_build_is_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], names: tuple[str, ...]
) -> None:
    status, out, err = run_cli(capsys, *args)
    assert status == 1 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("ask-bridge slack")
    assert all(name in line for name in names), line


def test_without_the_slack_extra_it_names_the_install() -> None:
    code = (
        "import sys\n"
        "for name in ('slack_sdk', 'slack_bolt', 'aiohttp'): sys.modules[name] = None\n"
        "from bridge.cli import main\n"
        "sys.exit(main(['slack', 'manifest', '--socket-mode']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("ask-bridge slack: ") and "pip install 'ask-bridge[slack]'" in line
