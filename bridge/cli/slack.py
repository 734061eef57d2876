"""``ask-bridge slack manifest``: the Slack app this bridge needs, set up in one step.

The manifest goes to stdout as JSON (``> manifest.json`` keeps just it); the link that opens
Slack's "create an app" page with it filled in, and what to copy from the new app into the
settings, go to stderr. The manifest is the Slack platform's own, reached through its entry point
as every command reaches a platform (``bridge`` never imports ``platforms``), so its scopes are
the ones the installed code calls; without the slack extra the command fails in one line naming
the install.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit


@runtime_checkable
class AppManifest(Protocol):
    """A platform that can describe the app to create for it (Slack's ``SlackPlatform``)."""

    def app_setup(
        self, *, socket_mode: bool, request_url: str | None, user_groups: bool
    ) -> tuple[dict[str, Any], str]:
        """The manifest, and the words that say what to do with it."""
        ...


def register(sub: Any) -> None:
    slack = sub.add_parser(
        "slack",
        help="Slack app set-up (ask-bridge slack manifest)",
        description="Slack app set-up.",
    )
    commands = slack.add_subparsers(dest="slack_command", metavar="COMMAND", required=True)
    p = commands.add_parser(
        "manifest",
        help="print the Slack app manifest and the link that creates the app from it",
        description="Print the Slack app manifest the bridge needs (JSON, on stdout) and, on "
        "stderr, the link that opens Slack's 'create an app' page with it filled in, then what "
        "to copy into SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET or SLACK_APP_TOKEN. Without "
        "--socket-mode or --request-url: Socket Mode if SLACK_APP_TOKEN is set.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--socket-mode",
        action="store_true",
        help="clicks over Socket Mode: no public URL (needs an app-level token)",
    )
    mode.add_argument(
        "--request-url",
        type=https_url,
        metavar="URL",
        help="HTTP mode: the public https URL Slack posts clicks to, reaching `serve` "
        "(a bare https://HOST gets /slack/events)",
    )
    p.add_argument(
        "--no-user-groups",
        dest="user_groups",
        action="store_false",
        help="leave out the usergroups:read scope (used only when an ask names a user group)",
    )
    p.set_defaults(func=run)


def https_url(text: str) -> str:
    """Slack posts interactions only to an https URL."""
    parts = urlsplit(text)
    if parts.scheme != "https" or not parts.hostname:
        raise argparse.ArgumentTypeError(f"expected an https://HOST URL, not {text!r}")
    return text


def run(args: argparse.Namespace) -> int:
    from bridge.platform import PlatformUnavailable, load_platform

    slack = load_platform("slack")
    if not isinstance(slack, AppManifest):
        raise PlatformUnavailable("the installed slack platform describes no app manifest")
    manifest, guide = slack.app_setup(
        socket_mode=args.socket_mode, request_url=args.request_url, user_groups=args.user_groups
    )
    print(json.dumps(manifest, indent=2))
    print(guide, file=sys.stderr)
    return 0
