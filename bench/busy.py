"""What the latency benches share: ``--busy`` (a CPU hog beside the measured processes) and a
process's CPU time.

A quiet machine flatters latency: on a 2-core machine shared with other work, the waiter, the
answerer, ``serve`` and Redis wait for a core behind whatever else runs, and the p99 is the
scheduler's as much as ours. ``--busy`` puts one process spinning on a core beside every measured
phase, so a figure says what the code does when the machine is not idle.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FLAG = "--busy"


def wanted(argv: list[str]) -> bool:
    """Whether ``argv`` asks for ``--busy``."""
    return FLAG in argv


def count(argv: list[str], default: int) -> int:
    """The first argument of ``argv`` (after the program) that is not ``--busy``, as a number."""
    given = [a for a in argv[1:] if a != FLAG]
    return int(given[0]) if given else default


@contextmanager
def neighbour(on: bool) -> Iterator[None]:
    """A process spinning on a core for the duration of the block (none unless ``on``)."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        yield
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (``/proc``, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
