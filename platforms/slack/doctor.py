"""Slack's rows for ``ask-bridge doctor``: the token, its scopes, the bot's channel membership."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from bridge.platform import Finding
from platforms.slack.client import error_code, refusal_line
from platforms.slack.credentials import NEEDED_SCOPES, OPTIONAL_SCOPES

if TYPE_CHECKING:
    from platforms.slack import SlackPlatform


async def diagnose(platform: SlackPlatform, channels: Sequence[str]) -> list[Finding]:
    """Raises ``PlatformUnavailable`` when the token is refused (the caller's row says so)."""
    identity = await platform.check_credentials()
    settings = platform.settings
    mode = "Socket Mode" if settings.socket_mode else "HTTP (SLACK_SIGNING_SECRET)"
    rows = [Finding("slack token", "ok", f"bot {identity.user_id} in {identity.team}; {mode}")]
    if not settings.socket_mode:
        try:
            settings.signing()
        except Exception as exc:
            rows.append(Finding("slack signing secret", "FIX", str(exc)))
    if identity.scopes is None:
        rows.append(Finding("slack scopes", "note", "Slack did not list the token's scopes"))
    else:
        missing = [s for s in NEEDED_SCOPES if s not in identity.scopes]
        optional = [s for s in OPTIONAL_SCOPES if s not in identity.scopes]
        if missing:
            rows.append(Finding("slack scopes", "FIX", f"missing {', '.join(missing)}"))
        elif optional:
            why = f"no {', '.join(optional)}: user-group answerers cannot be checked"
            rows.append(Finding("slack scopes", "note", why))
        else:
            rows.append(Finding("slack scopes", "ok", ", ".join(sorted(identity.scopes))))
    for channel in channels:
        if not channel.isdigit():  # Slack ids are letters and digits (C…); Discord's numbers
            rows.append(await _membership(platform, channel))
    return rows


async def _membership(platform: SlackPlatform, channel: str) -> Finding:
    check = f"slack channel {channel}"
    try:
        info = await platform.client.conversations_info(channel=channel)
    except SlackApiError as exc:
        if error_code(exc) == "missing_scope":  # channels:read, which only this check would use
            return Finding(check, "note", "cannot check without the channels:read scope")
        return Finding(check, "FIX", refusal_line("conversations.info", exc))
    channel_info = info.get("channel") or {}
    if channel_info.get("is_member") is False:
        return Finding(check, "FIX", "the bot is not a member: /invite it to the channel")
    return Finding(check, "ok", "the bot is a member")
