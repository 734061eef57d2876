"""Log lines: JSON with the lifecycle fields, never a secret, the question text only on request."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
import time
from typing import Any

import pytest

from bridge import logs, metrics
from bridge.aio import stop
from bridge.logs import JsonFormatter, QueuedStderr, StateLog, scrub, settings
from bridge.models import QuestionSet
from bridge.record import AskRecord, Destination
from tests.support.engine_fixtures import new_record


def record() -> AskRecord:
    questions = {
        "questions": [
            {
                "question": "Merge the secret branch?",
                "header": "Merge",
                "multiSelect": False,
                "options": [
                    {"label": "yes", "description": "y"},
                    {"label": "no", "description": "n"},
                ],
            }
        ]
    }
    return AskRecord(
        questions=QuestionSet.model_validate(questions),
        destination=Destination(platform="slack", channel="C1"),
        expires_at=time.time() + 60,
    )


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("token xoxb-1234-5678-abcdef in a message", "1234-5678-abcdef"),
        ("app token xapp-1-A0-123-abc", "1-A0-123-abc"),
        ("redis://user:hunter2@redis:6379/0 is down", "hunter2"),
        ("Authorization: Bot MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.abcdefghijklmnop", "GhIjKl"),
    ],
)
def test_secrets_are_masked_whoever_logged_them(text: str, hidden: str) -> None:
    assert hidden not in scrub(text)


def test_a_lifecycle_line_is_json_with_its_fields_and_no_question_text(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOG_QUESTIONS", raising=False)
    settings.cache_clear()
    caplog.set_level(logging.INFO, logger="bridge.lifecycle")
    rec = record()
    metrics.created(rec)
    line = json.loads(JsonFormatter().format(caplog.records[-1]))
    assert line["ask_id"] == rec.id and line["step"] == "created"
    assert line["platform"] == "slack" and line["channel"] == "C1"
    assert "secret branch" not in json.dumps(line)

    monkeypatch.setenv("LOG_QUESTIONS", "1")
    settings.cache_clear()
    try:
        metrics.posted(rec)
    finally:
        settings.cache_clear()
    line = json.loads(JsonFormatter().format(caplog.records[-1]))
    assert line["questions"] == ["Merge the secret branch?"]


def test_a_state_log_tells_each_change_once_naming_a_failure_without_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="test.state")
    state = StateLog(logging.getLogger("test.state"), "Redis")
    for _ in range(3):
        state.failed(TimeoutError())  # what asyncio.timeout raises: no text of its own
    state.ok()
    state.ok()
    state.failed("refused")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "Redis: TimeoutError"),
        ("INFO", "Redis: reachable again"),
        ("WARNING", "Redis: refused"),
    ]


def test_the_pending_gauge_zeroes_a_platform_gone_quiet() -> None:
    metrics.set_pending({"slack": 3, "discord": 1})
    metrics.set_pending({"slack": 2})
    text = metrics.exposition()[0].decode()
    assert 'ask_bridge_pending_asks{platform="slack"} 2.0' in text
    assert 'ask_bridge_pending_asks{platform="discord"} 0.0' in text


class Stalled(io.StringIO):
    """A stderr nobody reads: every write waits until ``reading`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = threading.Event()

    def write(self, text: str) -> int:
        self.reading.wait()
        return super().write(text)


def a_logger(handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"test.stalled.{id(handler)}")
    logger.propagate = False
    logger.addHandler(handler)
    return logger


def test_a_stalled_stderr_drops_log_lines_counted_and_never_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(logs, "QUEUE_LINES", 10)
    stderr = Stalled()
    handler = QueuedStderr(stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = a_logger(handler)
    started = time.monotonic()
    for n in range(100):
        logger.warning("line %d", n)
    assert time.monotonic() - started < 1  # the logging thread never waited for stderr

    stderr.reading.set()  # the reader is back: the queue drains, then the gap is told
    handler.flush()
    logger.warning("after")
    handler.close()
    lines = stderr.getvalue().splitlines()
    kept = [int(line.split()[1]) for line in lines if line.startswith("line ")]
    assert kept == list(range(len(kept))) and 0 < len(kept) < 100  # the first ones, in order
    assert (
        lines[len(kept)]
        == f"{100 - len(kept)} log lines dropped: the log output was not being read"
    )
    assert lines[len(kept) + 1 :] == ["after"]


def test_closing_on_a_stalled_stderr_gives_up_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "FLUSH_WITHIN", 0.2)
    stderr = Stalled()
    handler = QueuedStderr(stderr)
    a_logger(handler).warning("never read")
    started = time.monotonic()
    handler.close()
    handler.close()  # and again at the interpreter's exit (logging.shutdown): at once
    assert time.monotonic() - started < 1
    stderr.reading.set()  # lets the writer thread end


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_ask_shows_where_it_waits_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from bridge.cli import progress
    from bridge.record import MessageRef

    monkeypatch.setattr(progress, "TICK", 0.01)
    term = Terminal()
    async with progress.shown(term):
        await asyncio.sleep(0.03)
        rec = record()
        link = "https://discord.com/channels/1/2/3"
        ref = MessageRef(platform="slack", channel="C1", message_id="9", extra={"link": link})
        metrics.posted(rec.model_copy(update={"message": ref}))
        await asyncio.sleep(0.03)
    shown = term.getvalue()
    assert "posting the questions" in shown
    assert f"waiting for an answer in slack C1 (ask {rec.id}), 0:00 {link}" in shown
    assert shown.endswith("\r\x1b[2K")  # the line is cleared at the end

    pipe = io.StringIO()
    async with progress.shown(pipe) as nothing:
        assert nothing is None
    assert pipe.getvalue() == ""


class HttpReceiver:
    """A receiver served over HTTP: no routes of its own here, ready at once."""

    def routes(self) -> list[Any]:
        return []

    async def run(self, ready: asyncio.Event) -> None:
        ready.set()


async def test_the_pending_gauge_counts_each_served_platform() -> None:
    from bridge.health import Health
    from bridge.store.memory import MemoryStore

    store = MemoryStore()
    for platform in ("slack", "slack", "discord", "elsewhere"):
        rec = new_record().model_copy(update={"destination": Destination(platform=platform)})
        await store.create(rec)
    metrics.set_pending({"slack": 0, "discord": 0})
    health = Health(store, None, {"slack": HttpReceiver(), "discord": HttpReceiver()}, interval=60)
    watching = asyncio.create_task(health.watch())
    wanted = ['_pending_asks{platform="slack"} 2.0', '_pending_asks{platform="discord"} 1.0']
    try:
        for _ in range(200):
            text = metrics.exposition()[0].decode()
            if all(line in text for line in wanted):
                break
            await asyncio.sleep(0.01)
        assert all(line in text for line in wanted), text
        assert 'platform="elsewhere"' not in text  # counted per served platform only
    finally:
        await stop(watching)
