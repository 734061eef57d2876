"""The web platform's benches, small, as CI runs them (issue 30): the page's weight for the
largest ask with every text whole, its serving beside the Slack click path, and live pages whose
memory stays flat -- each bench's own PASS, so a regression fails the run, not only the figure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.browser import missing

ROOT = Path(__file__).resolve().parents[1]


def _bench(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_page_bench_passes_through_the_browser_where_there_is_one() -> None:
    out = _bench("bench.web_pages", "3", *(["--no-browser"] if missing() else []))
    assert "PASS: page weight and serving" in out
    if missing() is None:
        assert "requests leaving the page's origin: 0 of" in out


def test_the_live_pages_bench_passes() -> None:
    """500 streams: enough that a kilobyte or two kept per page and round (a watcher, a task, an
    observer left behind) outgrows the bench's allowance for the allocator's arenas (2 MB), few
    enough to run in about a minute on two loaded cores."""
    out = _bench("bench.web_streams", "500", "--idle", "1")
    assert "PASS: 500 streams, flat memory" in out
