"""Discord at start: the token is checked by logging in before anything else; a refused token or
an unreachable API is one line naming the setting; readiness follows the gateway connection; a
token revoked while serving (the gateway closes with 4004) stops ``serve`` in one line."""

from __future__ import annotations

import asyncio
import socket

import pytest

from bridge.platform import PlatformUnavailable
from bridge.store.memory import MemoryStore
from platforms.discord import DiscordPlatform
from platforms.discord.settings import DiscordSettings
from tests.support.discord.discord_harness import settings_for
from tests.support.discord.discord_procs import discord_bot, discord_env
from tests.support.discord.fake_discord import FakeDiscord


async def test_a_refused_token_names_discord_token(fake: FakeDiscord) -> None:
    settings = settings_for(fake).model_copy(update={"token": "wrong"})
    with pytest.raises(PlatformUnavailable, match="Discord refused DISCORD_TOKEN"):
        await DiscordPlatform(
            DiscordSettings.model_validate(settings.model_dump())
        ).check_credentials()


async def test_an_unreachable_api_names_discord_api_url() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/api/v10"
    from platforms.discord.client import RestClient, check_login

    rest = RestClient(DiscordSettings(token="t", api_url=url))
    with pytest.raises(
        PlatformUnavailable, match=f"cannot reach Discord's API at DISCORD_API_URL={url}"
    ):
        await check_login(rest, url, seconds=0.6)


async def test_the_receiver_is_connected_only_while_the_gateway_is(fake: FakeDiscord) -> None:
    platform = DiscordPlatform(settings_for(fake))
    await platform.check_credentials()
    receiver = platform.receiver(MemoryStore())
    assert not await receiver.connected()
    ready = asyncio.Event()
    running = asyncio.create_task(receiver.run(ready))
    await asyncio.wait_for(ready.wait(), 10)
    assert await receiver.connected()
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    await receiver.drain()
    assert not await receiver.connected()
    await platform.rest.aclose()


async def test_serve_stops_when_its_token_is_revoked_while_serving(fake: FakeDiscord) -> None:
    serve = await discord_bot(discord_env(fake)).start()
    try:
        await fake.wait_sessions()
        await fake.revoke()  # the gateway closes with 4004: discord.py does not reconnect
        assert serve.proc is not None
        await asyncio.wait_for(serve.proc.wait(), 20)
    finally:
        await serve.stop()
    assert serve.returncode == 1
    log = "".join(serve.log)
    (line,) = [x for x in serve.log if x.startswith("ask-bridge serve: Discord")]
    assert "Discord closed the gateway connection (4004): authentication failed" in line
    assert "DISCORD_TOKEN" in line and "Traceback" not in log
