"""Discord's rows for ``ask-bridge doctor``: the token (a login), the bot's access to channels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import discord

from bridge.platform import Finding

if TYPE_CHECKING:
    from platforms.discord import DiscordPlatform


async def diagnose(platform: DiscordPlatform, channels: Sequence[str]) -> list[Finding]:
    """Raises ``PlatformUnavailable`` when the token is refused (the caller's row says so)."""
    await platform.check_credentials()
    client = await platform.rest.get()
    try:
        app = f"bot {client.user} (application {client.application_id})"
        rows = [Finding("discord token", "ok", app)]
        for channel in channels:
            if channel.isdigit():  # Discord ids are numbers; Slack's are not
                rows.append(await _access(client, channel))
        return rows
    finally:
        await platform.rest.aclose()


async def _access(client: discord.Client, channel: str) -> Finding:
    check = f"discord channel {channel}"
    try:
        await client.fetch_channel(int(channel))
    except discord.HTTPException as exc:
        return Finding(
            check, "FIX", f"{exc.text or exc}: invite the bot and let it view the channel"
        )
    return Finding(check, "ok", "the bot can see it")
