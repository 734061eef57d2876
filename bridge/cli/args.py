"""Argument types the commands share, so a bad value reads the same in every command."""

from __future__ import annotations

import argparse


def positive(text: str) -> int:
    """A whole number of at least 1 (``--limit``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds, 0 or more (``--wait``, ``--older-than``)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds (a number, 0 or more), not {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port to listen on, 0 to 65535 (0: any free one, as the tests use). Checked here: a
    number out of range reaches the socket as an ``OverflowError`` traceback, not a bind error."""
    value = int(text) if text.isdigit() else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, not {text!r}")
    return value
