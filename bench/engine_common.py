"""Shared bits of the engine benchmarks: a server to run against, and realistic asks."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from redis_server import redis_server

from bridge.models import (
    MAX_DESCRIPTION,
    MAX_HEADER,
    MAX_LABEL,
    MAX_QUESTION_TEXT,
    Option,
    Question,
    QuestionSet,
)
from bridge.poster import Poster
from bridge.record import AskRecord, Destination, MessageRef
from bridge.validation import MAX_BYTES


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


class NullPoster(Poster):
    """A platform that shows nothing and keeps nothing: only the engine's own costs are measured.
    ``posted`` counts posts, so a bench knows every call got as far as its wait."""

    platform = "slack"

    def __init__(self) -> None:
        self.posted = 0
        self.queue: asyncio.Queue[AskRecord] | None = None

    async def post(self, record: AskRecord) -> MessageRef:
        self.posted += 1
        if self.queue is not None:
            self.queue.put_nowait(record)
        return MessageRef(platform="slack", channel="C0123456789", message_id=str(self.posted))

    async def update(self, record: AskRecord) -> None:
        return None


def maximal_questions(char: str = "x", *, in_bytes: bool = False) -> QuestionSet:
    """Four questions of four options at the contract's maximum lengths, every text made of
    ``char`` (``"x"``: 1 byte in UTF-8, ``"\u20ac"``: 3 bytes), each text distinct. ``in_bytes``:
    at most as many characters as the validator's bounds in bytes allow, too."""
    size = len(char.encode())

    def text(n: int, tag: str) -> str:
        if in_bytes:
            field = {MAX_QUESTION_TEXT: "question", MAX_HEADER: "header", MAX_LABEL: "label"}
            n = min(n, MAX_BYTES[field.get(n, "description")] // size)
        return (tag + char * n)[:n]

    return QuestionSet(
        questions=tuple(
            Question(
                question=text(MAX_QUESTION_TEXT, f"{i}"),
                header=text(MAX_HEADER, f"{i}"),
                options=tuple(
                    Option(label=text(MAX_LABEL, f"{j}"), description=text(MAX_DESCRIPTION, "d"))
                    for j in range(4)
                ),
                multiSelect=i % 2 == 1,
            )
            for i in range(4)
        )
    )


def rss() -> int:
    """Resident set size of this process, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


async def command_calls(raw: Any, command: str) -> int:
    """How many times the server ran ``command`` since it started (INFO commandstats)."""
    stats = await raw.info("commandstats")
    entry = stats.get(f"cmdstat_{command}")
    return int(entry["calls"]) if entry else 0


async def server_cpu(raw: Any) -> float:
    """CPU seconds the server process has spent (INFO cpu: user + system, all its threads): the
    difference over a phase is the server's cost of that phase, for 'how many clients one Redis
    serves'."""
    info = await raw.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
