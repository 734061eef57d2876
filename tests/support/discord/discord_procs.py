"""The CLI as separate OS processes against the fake Discord (see :mod:`tests.support.procs`)."""

from __future__ import annotations

from tests.support.discord.fake_discord import TOKEN, FakeDiscord
from tests.support.procs import Serve, cli_env


def discord_env(fake: FakeDiscord, **extra: str) -> dict[str, str]:
    """The environment of a process that talks to ``fake`` (and to nothing it inherited)."""
    return cli_env(
        DISCORD_TOKEN=TOKEN, DISCORD_API_URL=fake.url, DISCORD_GATEWAY_URL=fake.gateway_url, **extra
    )


def discord_bot(env: dict[str, str]) -> Serve:
    """One ``ask-bridge serve --platform discord`` process (not started)."""
    return Serve(env, args=("--platform", "discord"))
