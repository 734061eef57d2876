"""``ask-bridge doctor`` with Discord configured (the fake): the token and a channel's access."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.support.discord.fake_discord import CHANNEL, TOKEN, FakeDiscord
from tests.support.procs import cli_env


async def doctor(cwd: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "doctor", *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert b"Traceback" not in err, err.decode()
    return proc.returncode or 0, out.decode()


async def test_discord_token_and_channels(fake: FakeDiscord, tmp_path: Path) -> None:
    env = cli_env(
        DISCORD_TOKEN=TOKEN, DISCORD_API_URL=fake.url, DISCORD_GATEWAY_URL=fake.gateway_url
    )
    status, out = await doctor(tmp_path, env, "--channel", CHANNEL)
    assert status == 0, out
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert rows["discord token"].split()[2] == "ok"
    assert rows[f"discord channel {CHANNEL}"].split()[3] == "ok"

    status, out = await doctor(tmp_path, env, "--channel", "899999999999999999")
    assert status == 1
    assert "FIX" in next(line for line in out.splitlines() if "899999999999999999" in line)

    status, out = await doctor(tmp_path, {**env, "DISCORD_TOKEN": "wrong"})
    assert status == 1
    token_row = next(line for line in out.splitlines() if line.startswith("discord token"))
    assert "FIX" in token_row and "DISCORD_TOKEN" in token_row
