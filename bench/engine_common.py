"""Shared bits of the engine benchmarks: a server to run against, and realistic asks."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from redis_server import redis_server

from bridge.models import Option, Question, QuestionSet
from bridge.record import AskRecord, Destination


@contextmanager
def server_url() -> Iterator[str]:
    """``REDIS_URL`` if set, else a fresh local server for this run."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    with tempfile.TemporaryDirectory() as tmp, redis_server(Path(tmp)) as server:
        yield server.url


def four_questions() -> QuestionSet:
    """Four questions of realistic size (a sentence each, four described options)."""
    return QuestionSet(
        questions=tuple(
            Question(
                question=f"Which deployment strategy should we use for service number {i}?",
                header=f"Deploy {i}",
                options=tuple(
                    Option(
                        label=f"Option {j}",
                        description=f"Roll out with strategy {j}, "
                        "keeping the old version running until checks pass",
                    )
                    for j in range(4)
                ),
                multiSelect=i % 2 == 1,
            )
            for i in range(4)
        )
    )


def record(qs: QuestionSet, n_questions: int = 4) -> AskRecord:
    now = time.time()
    return AskRecord(
        questions=QuestionSet(questions=qs.questions[:n_questions]),
        destination=Destination(
            platform="slack", channel="C0123456789", thread="1700000000.000100"
        ),
        context={"session": "bench"},
        created_at=now,
        expires_at=now + 86400,
    )


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]
