"""The Slack app this bridge needs, as an app manifest (https://api.slack.com/reference/manifests).

One builder for every copy: ``ask-bridge slack manifest`` prints it with the link that opens
Slack's "create an app" page already filled in, and ``deploy/slack/manifest.yaml`` is its output
for a placeholder host (a test holds the two equal). Built, not typed by hand, because a manifest
written by hand drifts from the code: the scopes here are the ones ``doctor`` checks a token for
(:data:`.credentials.NEEDED_SCOPES`, :data:`~.credentials.OPTIONAL_SCOPES`), which a test holds
to the Web API methods the code calls, and the interactivity URL ends in the path ``serve``
answers (:data:`.http.EVENTS_PATH`).

The bridge needs interactivity only (button clicks and form submissions); it subscribes to no
event and reads no message, so the manifest asks for no event subscription and no read scope.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit, urlunsplit

from bridge.platform import PlatformUnavailable
from platforms.slack.credentials import NEEDED_SCOPES, OPTIONAL_SCOPES
from platforms.slack.http import EVENTS_PATH
from platforms.slack.settings import load_settings

NAME = "ask-bridge"
CREATE_APP_URL = "https://api.slack.com/apps?new_app=1&manifest_json="
"""Slack's page for a new app, with a manifest to fill in (api.slack.com/reference/manifests,
"sharing manifests"): the JSON goes in the query, percent-encoded."""


class AppSetup(NamedTuple):
    """What ``ask-bridge slack manifest`` prints: the manifest, and the words that say what to do
    with it (the prefilled link, then what to copy from the new app into the settings)."""

    manifest: dict[str, Any]
    guide: str


def build_manifest(request_url: str | None, *, user_groups: bool = True) -> dict[str, Any]:
    """The app manifest: Socket Mode when ``request_url`` is ``None`` (clicks come over the
    connection ``serve`` opens with ``SLACK_APP_TOKEN``), else HTTP mode with clicks posted to
    ``request_url``. ``user_groups=False`` leaves out ``usergroups:read``, which only an ask
    naming a user group (``S…``) among its answerers uses."""
    scopes = [*NEEDED_SCOPES, *(OPTIONAL_SCOPES if user_groups else ())]
    interactivity: dict[str, Any] = {"is_enabled": True}
    if request_url is not None:
        interactivity["request_url"] = request_url
    return {
        "_metadata": {"major_version": 1, "minor_version": 1},
        "display_information": {
            "name": NAME,
            "description": "Lets an AI agent ask your team multiple-choice questions and wait "
            "for the answers.",
            "background_color": "#2c2d30",
        },
        "features": {
            # Asks may go to a person's DM, which is the app's Messages tab; nobody types there.
            "app_home": {
                "home_tab_enabled": False,
                "messages_tab_enabled": True,
                "messages_tab_read_only_enabled": True,
            },
            "bot_user": {"display_name": NAME, "always_online": True},
        },
        "oauth_config": {"scopes": {"bot": sorted(scopes)}},
        "settings": {
            "interactivity": interactivity,
            "org_deploy_enabled": False,
            "socket_mode_enabled": request_url is None,
            "token_rotation_enabled": False,  # the bridge keeps one bot token; it refreshes none
        },
    }


def interactivity_url(url: str) -> str:
    """Where Slack posts clicks, from what an operator knows: a bare ``https://HOST`` gets the
    path ``serve`` answers (``/slack/events``); a URL with a path is taken as given, since an
    ingress may route another path to ``serve``."""
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        parts = parts._replace(path=EVENTS_PATH)
    return urlunsplit(parts)


def create_app_link(manifest: dict[str, Any]) -> str:
    """Slack's "create an app" page with ``manifest`` filled in (compact JSON: a shorter link)."""
    return CREATE_APP_URL + quote(json.dumps(manifest, separators=(",", ":")), safe="")


def app_setup(*, socket_mode: bool, request_url: str | None, user_groups: bool) -> AppSetup:
    """The manifest for the mode asked for -- ``socket_mode``, or HTTP mode at ``request_url``
    -- else for the mode configured (Socket Mode when ``SLACK_APP_TOKEN`` is set). HTTP mode
    needs the public URL, which no setting holds: without it, ``PlatformUnavailable`` says
    how to give it."""
    if not socket_mode and request_url is None:
        socket_mode = load_settings().socket_mode
        if not socket_mode:
            raise PlatformUnavailable(
                "say where Slack sends clicks: --request-url https://HOST (HTTP mode: `serve` "
                f"reachable there, at {EVENTS_PATH}) or --socket-mode (no public URL)"
            )
    url = None if socket_mode or request_url is None else interactivity_url(request_url)
    manifest = build_manifest(url, user_groups=user_groups)
    return AppSetup(manifest, _guide(manifest, url))


def _guide(manifest: dict[str, Any], request_url: str | None) -> str:
    if request_url is None:
        clicks = (
            "2. Basic Information -> App-Level Tokens -> Generate Token and Scopes, with the "
            "scope connections:write: that xapp- token is SLACK_APP_TOKEN (Socket Mode)."
        )
    else:
        clicks = (
            "2. Basic Information -> App Credentials -> Signing Secret: SLACK_SIGNING_SECRET. "
            "Leave SLACK_APP_TOKEN unset (with it, `serve` uses Socket Mode), and run "
            f"`ask-bridge serve` where {request_url} reaches it."
        )
    return "\n".join(
        [
            "Create the Slack app from this manifest: open the link, pick a workspace, Create.",
            create_app_link(manifest),
            "(Or paste the JSON above at https://api.slack.com/apps -> Create New App -> "
            "From a manifest.) Then, in the new app's settings:",
            "1. Install App -> Install to Workspace: the Bot User OAuth Token (xoxb-) is "
            "SLACK_BOT_TOKEN.",
            clicks,
            f"3. Invite @{NAME} to each channel it asks in, and check: "
            "ask-bridge doctor --channel CHANNEL_ID",
        ]
    )
