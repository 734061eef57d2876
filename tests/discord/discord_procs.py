"""The CLI as separate OS processes against the fake Discord: ``serve`` bots and ``ask`` agents."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field

from fake_discord import TOKEN, FakeDiscord


def discord_env(fake: FakeDiscord, **extra: str) -> dict[str, str]:
    """The environment of a process that talks to ``fake`` (and to nothing it inherited)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "DISCORD_", "REDIS_", "ASK_BRIDGE_"))
    }
    env.update(DISCORD_TOKEN=TOKEN, DISCORD_API_URL=fake.url, DISCORD_GATEWAY_URL=fake.gateway_url)
    env.update(extra)
    return env


@dataclass
class Bot:
    """One ``ask-bridge serve --platform discord`` process; ``returncode`` set once stopped."""

    env: dict[str, str]
    returncode: int | None = None
    proc: asyncio.subprocess.Process | None = None
    log: list[str] = field(default_factory=list)
    _drain: asyncio.Task[None] | None = None

    async def start(self) -> Bot:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge.cli", "serve", "--platform", "discord",
            "--sweep-interval", "0.5",
            env=self.env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stderr is not None
        async with asyncio.timeout(30):
            while True:
                line = (await self.proc.stderr.readline()).decode()
                if not line:
                    raise RuntimeError("serve exited before it was ready:\n" + "".join(self.log))
                self.log.append(line)
                if "ready (" in line:
                    break
        self._drain = asyncio.create_task(self._read_rest())
        return self

    async def _read_rest(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.log.append(line.decode())

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
            with contextlib.suppress(ProcessLookupError):
                await asyncio.wait_for(self.proc.wait(), 15)
        if self._drain is not None:
            await self._drain
        if self.proc is not None:
            self.returncode = self.proc.returncode
        self.proc = None


@dataclass
class Agent:
    """One ``ask-bridge ask --platform discord`` process."""

    proc: asyncio.subprocess.Process

    @classmethod
    async def start(cls, env: dict[str, str], questions: str, *args: str) -> Agent:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge.cli", "ask", "--platform", "discord", *args, "-",
            env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdin is not None
        proc.stdin.write(questions.encode())
        await proc.stdin.drain()
        proc.stdin.close()
        return cls(proc)

    async def result(self, within: float = 30) -> tuple[int, str, str]:
        out, err = await asyncio.wait_for(self.proc.communicate(), within)
        assert self.proc.returncode is not None
        return self.proc.returncode, out.decode(), err.decode()

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
