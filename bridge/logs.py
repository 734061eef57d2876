"""Process logging for the commands: level, format, and never a secret.

``LOG_LEVEL`` (or ``--log-level``): DEBUG, INFO, WARNING, ERROR (default: INFO for the commands
that keep running, WARNING for the others). ``LOG_FORMAT``:
``json`` -- one JSON object per line with ``ts``, ``level``, ``logger``, ``message`` and the
fields a lifecycle step carries (``ask_id``, ``step``, ``platform``, ``channel``, ``user_id``,
``outcome``: :mod:`bridge.metrics`) -- or ``text``; unset, JSON when stderr is not a terminal
(a container, a service manager) and text on a terminal. ``LOG_QUESTIONS=1`` adds the question
texts to lifecycle lines (off by default: they may be confidential). Every line passes through
:func:`scrub`, which masks Slack tokens and passwords in URLs whatever logged them.
:class:`StateLog` logs a service going down and coming back, once each, however often it is
retried.

Logging never waits on stderr (:class:`QueuedStderr`). A log collector that stops reading fills
the pipe, and a write to a full pipe blocks: ``serve`` once stopped answering every click and
ignored SIGTERM that way, its event loop stuck in a log call. So a record is formatted where it
is logged and its line queued (at most :data:`QUEUE_LINES`), and one thread writes the queue to
stderr, what gathered in one write at most every :data:`LINGER` seconds; it alone waits on a
full pipe. When the queue is full, lines are dropped and counted, and
one line says how many once the writer has caught up. A command ends with :func:`close`, which
gives the writer :data:`FLUSH_WITHIN` seconds to write what is queued, and never more.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import re
import sys
import threading
import time
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, TextIO

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bridge.settings_error import SettingsError, one_line, unset_if_blank

if TYPE_CHECKING:
    from tenacity import RetryCallState

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
QUEUE_LINES = 10_000
"""Log lines waiting for stderr at most (a few MB); more are dropped, and counted."""
FLUSH_WITHIN = 2.0
"""Seconds a command's end waits for its queued log lines to be written (SIGTERM: within 10 s)."""
LINGER = 0.02
"""Seconds the writer lets lines gather after a write: they reach stderr at most this much later,
in one write (see :meth:`QueuedStderr._write_all`)."""
DROPPED = "%d log lines dropped: the log output was not being read"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_SECRETS = re.compile(
    r"(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+)|(://[^/\s:@]*:)[^@\s/]+@|(Bot )[\w.-]{20,}"
)


class LogSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    level: str | None = Field(default=None, validation_alias="LOG_LEVEL")
    format: Literal["json", "text", "auto"] = Field(default="auto", validation_alias="LOG_FORMAT")
    log_questions: bool = Field(default=False, validation_alias="LOG_QUESTIONS")

    @field_validator("level")
    @classmethod
    def _level(cls, value: str | None) -> str | None:
        level = (unset_if_blank(value) or "").upper()
        if level and level not in LEVELS:
            raise ValueError(f"use one of {', '.join(LEVELS)}")
        return level or None

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) and value.strip() else "auto"


@cache
def settings() -> LogSettings:
    """The logging settings, read once (a bad value: :class:`~bridge.settings_error.SettingsError`,
    raised as every bad setting is)."""
    try:
        return LogSettings()
    except ValidationError as exc:
        raise SettingsError(one_line(exc)) from None


def scrub(text: str) -> str:
    """``text`` with Slack tokens, URL passwords and Discord bot tokens masked."""

    def mask(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1)[:5] + "***"
        if m.group(2):
            return m.group(2) + "***@"
        return m.group(3) + "***"

    return _SECRETS.sub(mask, text)


class StateLog:
    """Logs ``what`` going down (WARNING, with the reason) and coming back (INFO), each once: a
    retry loop -- tenacity's (:meth:`attempt_failed` as its ``after`` hook), or one that retries
    at its own pace (a sweeper, a health check) -- logs a change of state, never an attempt."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.down: str | None = None

    def failed(self, reason: object) -> None:
        if self.down is None:
            self.down = str(reason) or type(reason).__name__
            self.logger.warning("%s: %s", self.what, self.down)

    def attempt_failed(self, retry_state: RetryCallState) -> None:
        """:meth:`failed`, with the exception a tenacity attempt raised."""
        if retry_state.outcome is not None:
            self.failed(retry_state.outcome.exception())

    def ok(self) -> None:
        if self.down is not None:
            self.down = None
            self.logger.info("%s: reachable again", self.what)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the record's ``fields``.

    Not python-json-logger's: to write this line (these keys, ``fields`` merged without its
    ``None`` values, message and traceback masked by :func:`scrub`, nothing else of the record)
    it takes a subclass overriding ``add_fields``, as long as this class, and the line costs more.
    ``bench/log_lines.py`` checks that both write the same line, then times them: 6.8 us a
    lifecycle line here, 11.2 there; 40 us and 51 with a traceback (python-json-logger 4.2,
    Python 3.11, 2026-12-03; as it comes, masking nothing and writing another line, 5.6 and 34).
    The encoder is made once and a second's stamp written once: 8.4 us a line before (same run)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": _stamp(record.created, record.msecs),
            "level": record.levelname,
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update({k: v for k, v in fields.items() if v is not None and k not in out})
        if record.exc_info:
            out["error"] = scrub(self.formatException(record.exc_info))
        return _ENCODE(out)


_ENCODE = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""``json.dumps(..., ensure_ascii=False, default=str)``, its encoder made once, not per line."""
_SECOND: tuple[int, str] = (-1, "")
"""The last second a line was stamped in, and its text: one ``strftime`` a second, not a line."""


def _stamp(created: float, msecs: float) -> str:
    """A line's ``ts``: UTC, to the millisecond."""
    global _SECOND
    second = int(created)
    last = _SECOND  # one read: another thread may stamp at the same time
    if last[0] != second:
        last = _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{last[1]}.{int(msecs):03d}Z"


class _ScrubbingText(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


class QueuedStderr(logging.Handler):
    """A handler that never waits on ``stream``: each record is formatted in the thread that
    logs it, and the line goes to a bounded queue that a thread of its own writes out.

    ``stream`` is written through its file descriptor, not the file object: the writer may be
    stuck in a write for ever, and the interpreter, at exit, flushes ``sys.stderr`` under the
    same lock its writes take (a stuck daemon thread holding it aborts the exit). A stream with
    no descriptor (a test's capture) is written as a file object. Not a
    ``logging.handlers.QueueListener``: its ``stop()`` waits for the writer without a bound, and
    ``logging.shutdown`` takes its handlers' locks again at exit -- a writer stuck on a full pipe
    would hang the exit either way."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._lines: queue.Queue[str | threading.Event | None] = queue.Queue(QUEUE_LINES)
        self._stream = stream
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            self._fd: int | None = stream.fileno()
        except (OSError, ValueError):  # io.UnsupportedOperation is both
            self._fd = None
        self._dropped = 0
        self._counting = threading.Lock()
        self._closed = False
        self._writer = threading.Thread(target=self._write_all, name="log writer", daemon=True)
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self._put(line)

    def say(self, line: str) -> None:
        """``line`` as it is (not a record: a command's own line), after the lines logged before
        it; waits up to :data:`FLUSH_WITHIN` seconds for room in the queue, then drops it."""
        try:
            self._lines.put(line, timeout=FLUSH_WITHIN)
        except queue.Full:
            with self._counting:
                self._dropped += 1

    def _put(self, line: str) -> None:
        """Queue ``line``, or drop it and count it. Once lines were dropped, the next ones are
        too until the writer has caught up with half the queue, then one line tells how many
        were lost: a stalled reader gets one gap and one report, not a line lost here and there
        each with a report of its own."""
        with self._counting:
            if self._dropped and self._lines.qsize() > QUEUE_LINES // 2:
                self._dropped += 1
                return
            try:
                if self._dropped:
                    self._lines.put_nowait(self._report(self._dropped))
                    self._dropped = 0
                self._lines.put_nowait(line)
            except queue.Full:
                self._dropped += 1

    def _report(self, dropped: int) -> str:
        record = logging.LogRecord(
            __name__, logging.WARNING, __file__, 0, DROPPED, (dropped,), None
        )
        return self.format(record)

    def _write_all(self) -> None:
        """Write what is queued, all of it in one write, then let lines gather for
        :data:`LINGER` seconds: a line woke this thread (and took the GIL from the event loop)
        once each, and a ``serve`` writing two lines a click spent a tenth of its CPU on them."""
        while True:
            batch = [self._lines.get()]
            with contextlib.suppress(queue.Empty):
                while len(batch) < QUEUE_LINES:
                    batch.append(self._lines.get_nowait())
            text: list[str] = []
            for item in batch:
                if isinstance(item, str):
                    text.append(item + "\n")
                    continue
                if text:  # what came before a flush's mark, or the end, is written first
                    self._write("".join(text))
                    text = []
                if item is None:
                    return
                item.set()
            if text:
                self._write("".join(text))
            time.sleep(LINGER)

    def _write(self, text: str) -> None:
        try:
            if self._fd is None:
                self._stream.write(text)
                self._stream.flush()
                return
            data = text.encode(self._encoding, "backslashreplace")
            while data:
                data = data[os.write(self._fd, data) :]
        except (OSError, ValueError):  # stderr closed: the line goes nowhere, as a print's would
            pass

    def flush(self) -> None:
        """Wait up to :data:`FLUSH_WITHIN` seconds for the queued lines to be written (and the
        count of dropped ones, if any, to be told)."""
        if self._closed:
            return
        deadline = time.monotonic() + FLUSH_WITHIN
        with self._counting:
            if self._dropped:
                try:
                    self._lines.put_nowait(self._report(self._dropped))
                    self._dropped = 0
                except queue.Full:
                    pass
        written = threading.Event()
        try:
            self._lines.put(written, timeout=FLUSH_WITHIN)
        except queue.Full:
            return
        written.wait(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Flush (bounded), then stop the writer if it is not stuck: a stuck one is a daemon
        thread, and ends with the process."""
        self.flush()
        if not self._closed:
            self._closed = True
            try:
                self._lines.put_nowait(None)
            except queue.Full:
                pass
        super().close()


_output: QueuedStderr | None = None
"""The handler :func:`setup` installed, until :func:`close`."""


def setup(level: str, chosen: LogSettings | None = None) -> None:
    """Configure the root logger on stderr at ``level``, in ``LOG_FORMAT`` (``chosen``, else
    :func:`settings`), through a :class:`QueuedStderr`. Called by the command line as a command
    starts; :func:`close` as it ends."""
    chosen = chosen or settings()
    name = level.upper()
    fmt = chosen.format
    if fmt == "auto":
        fmt = "text" if sys.stderr.isatty() else "json"
    close()
    handler = QueuedStderr(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else _ScrubbingText(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler.setLevel(name)  # a logger set lower for its own handlers still prints nothing here
    root.addHandler(handler)
    root.setLevel(name)
    global _output
    _output = handler


def say(line: str) -> None:
    """``line`` on stderr, as it is, in order with the log lines and without waiting on stderr
    (:meth:`QueuedStderr.say`): a command's ready line, its one-line failure. Printed directly
    when logging is not set up."""
    if _output is None:
        print(line, file=sys.stderr, flush=True)
    else:
        _output.say(line)


def announce(logger: logging.Logger, message: str) -> None:
    """``message`` as an INFO record of ``logger``, in ``LOG_FORMAT`` like the lines around it
    (a JSON reader gets JSON), yet shown whatever the level: a milestone an operator, a service
    manager or a test waits for (``serve``'s ready line). Printed as it is when logging is not
    set up."""
    if _output is None:
        print(message, file=sys.stderr, flush=True)
        return
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, (), None)
    _output.say(_output.format(record))


def close() -> None:
    """The end of a command: write what is queued (within :data:`FLUSH_WITHIN` seconds) and
    stop logging through the queue. Whatever is logged later (at the interpreter's exit) gets
    Python's last-resort handler: warnings and errors, straight to stderr."""
    global _output
    if _output is not None:
        logging.getLogger().removeHandler(_output)
        _output.close()
        _output = None
