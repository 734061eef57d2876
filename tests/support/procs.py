"""The CLI as separate OS processes: ``serve`` replicas and ``ask`` agents, with their output.

Shared by the Slack and Discord suites and benches; a process sees none of the settings this
one inherited (``SLACK_``, ``DISCORD_``, ``REDIS_``, ``ASK_BRIDGE_``), only those it is given.

Deadlines here and in the fakes' waits are generous (a minute): a loaded 2-core machine takes
seconds to start a Python process, and a deadline costs nothing when the awaited thing comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field

from tests.support.redis_server import free_port

INHERITED = ("SLACK_", "DISCORD_", "REDIS_", "ASK_BRIDGE_")


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED)}
    env.update(extra)
    return env


@dataclass
class Serve:
    """One ``ask-bridge serve`` replica on its own loopback port (its HTTP server, if it serves
    any HTTP route), with extra command-line ``args``; ``returncode`` is set once stopped."""

    env: dict[str, str]
    args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    returncode: int | None = None
    proc: asyncio.subprocess.Process | None = None
    log: list[str] = field(default_factory=list)
    _drain: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    async def start(self) -> Serve:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge.cli", "serve", "--port", str(self.port),
            "--sweep-interval", "0.5", *self.args,
            env=self.env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stderr is not None
        async with asyncio.timeout(60):
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
                await asyncio.wait_for(self.proc.wait(), 10)
        if self._drain is not None:
            await self._drain
        if self.proc is not None:
            self.returncode = self.proc.returncode
        self.proc = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


@dataclass
class Agent:
    """One ``ask-bridge ask`` process: the agent side, waiting on the store for the answer."""

    proc: asyncio.subprocess.Process

    @classmethod
    async def start(cls, env: dict[str, str], questions: str, *args: str) -> Agent:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge.cli", "ask", *args, "-",
            env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdin is not None
        proc.stdin.write(questions.encode())
        await proc.stdin.drain()
        proc.stdin.close()
        return cls(proc)

    async def result(self, within: float = 60) -> tuple[int, str, str]:
        out, err = await asyncio.wait_for(self.proc.communicate(), within)
        assert self.proc.returncode is not None
        return self.proc.returncode, out.decode(), err.decode()

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
