"""A small run of ``bench/soak.py``: two ``serve`` replicas serving Slack and Discord, killed with
SIGKILL and restarted, Redis (AOF) restarted once, teammates clicking on both platforms --
nothing lost, nothing answered twice, every refusal explained."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_small_soak_loses_nothing_and_answers_nothing_twice_on_either_platform() -> None:
    args = ["--asks", "300", "--rate", "100", "--kill-every", "1.5", "--in-flight", "100"]
    args += ["--patience", "2", "--redis-restart-at", "0", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.soak", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["asks"] == 300, report
    assert report["replica_kills"] >= 1, report
    assert report["faults"].get("redis restarted (planned)") == 1, report
    assert set(report["platforms"]) == {"slack", "discord"}, report
    for name, figures in report["platforms"].items():
        assert figures["asks"] == figures["answered"] == 150, (name, figures)
        assert figures["lost"] == 0 and figures["answered_twice"] == 0, (name, figures)
        assert figures["agents"] == {"returned answers": 150}, (name, figures)
        # A refusal changes nothing and its explanation is posted just after the click's ack,
        # so a replica killed in that instant loses it (the person sees no reply and may click
        # again): nearly all are explained, never more than one per click -- the 50 refused
        # first clicks and any click repeated because no acknowledgement came.
        refused = figures["refused_with_explanation"]
        again = sum(n for kind, n in figures["errors"].items() if "clicked again" in kind)
        for text in (
            "Sorry, you can't answer this one: it is for <@…>.",
            "This was already answered by <@…>.",
        ):
            assert 45 <= refused.get(text, 0) <= 50 + again, (name, refused, again)
