"""The tests' own Redis servers start even when the port chosen for one is taken before it binds
it (two pytest workers choose ports at the same time), and keep their port across a restart."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.redis_server import RedisServer


def squat(port: int) -> socket.socket:
    """Bind ``port`` as another process would, between a server's choosing it and its start."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", port))
    taken.listen()
    return taken


def test_a_chosen_port_taken_before_the_start_is_replaced(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "a")
    chosen = server.port
    with squat(chosen):
        server.start()
        try:
            assert server.port != chosen
            server.restart()  # a restart keeps the port its data and clients know
            assert server.port != chosen
        finally:
            server.stop()


def test_a_cluster_bus_port_taken_before_the_start_is_replaced(tmp_path: Path) -> None:
    with squat(0) as taken_bus:
        taken = taken_bus.getsockname()[1]
        extra = ["--cluster-enabled", "yes", "--cluster-port", str(taken)]
        server = RedisServer(tmp_path / "b", extra=extra)
        server.start()
        try:
            assert server.bus_port != taken
        finally:
            server.stop()


def test_a_port_given_by_the_test_is_never_changed(tmp_path: Path) -> None:
    with squat(0) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match="Address already in use"):
            RedisServer(tmp_path / "c", port=port).start()
