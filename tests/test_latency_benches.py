"""The latency benches' ``--busy`` mode (issue 27): a CPU hog really runs beside what is measured,
and is gone afterwards; the answer-to-resume bench runs with it and says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import busy

ROOT = Path(__file__).resolve().parents[1]


def _children() -> set[int]:
    """The pids of this process's children (``/proc``, Linux)."""
    me = os.getpid()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                found.add(int(entry.name))
    return found


def test_the_neighbour_spins_on_a_core_while_the_block_runs_and_is_gone_after() -> None:
    before = _children()
    with busy.neighbour(True):
        hog = _children() - before
        assert len(hog) == 1, hog
        (pid,) = hog
        spent = busy.cpu_seconds(pid)
        time.sleep(1.0)
        # it spins: a core's worth when it has one, a share of one on a loaded machine
        assert busy.cpu_seconds(pid) - spent > 0.05
    assert pid not in _children()


def test_no_neighbour_unless_asked() -> None:
    before = _children()
    with busy.neighbour(False):
        assert _children() == before


def test_the_flag_and_the_count_are_read_wherever_the_flag_stands() -> None:
    assert busy.wanted(["b", "--busy", "50"]) and not busy.wanted(["b", "50"])
    assert busy.count(["b", "--busy", "50"], 300) == 50
    assert busy.count(["b", "50", "--busy"], 300) == 50
    assert busy.count(["b", "--busy"], 300) == 300


def latency(*args: str) -> subprocess.CompletedProcess[str]:
    """``bench.engine_latency`` run with ``args``, as from the repository's root."""
    return subprocess.run(
        [sys.executable, "-m", "bench.engine_latency", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_answer_to_resume_runs_with_a_busy_neighbour() -> None:
    done = latency("50", "--busy")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "asks: 50, waiter and answerer in separate processes, a busy neighbour" in done.stdout
    assert "each answer 2 ms after its wait began" in done.stdout
    assert "answer->resume        p50" in done.stdout


def test_the_answer_waits_the_gap_asked_for_and_a_bad_gap_is_refused_in_words() -> None:
    ran = latency("20", "--gap", "0")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "asks: 20," in ran.stdout
    assert "each answer 0 ms after its wait began" in ran.stdout
    for bad in (["soon"], ["-1"], ["inf"], ["nan"], []):
        refused = latency("20", "--gap", *bad)
        assert refused.returncode == 1, bad
        assert refused.stderr.strip() == "--gap takes milliseconds from 0 to 1000, e.g. --gap 2"
