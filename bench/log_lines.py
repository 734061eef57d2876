"""The JSON log formatter (:class:`bridge.logs.JsonFormatter`) beside python-json-logger's, writing
the same line.

Run: ``.venv/bin/python -m bench.log_lines [N]`` (default 50,000 records of each kind; needs
``python-json-logger``, a dev dependency).

Two records, formatted ``N`` times each by each formatter, best of five rounds:

* a lifecycle line as :func:`bridge.metrics.step` logs it (an ask posted: seven fields, one of
  them ``None`` and left out), the message holding a Slack token to mask;
* a line with a traceback (the ``error`` field, masked too).

python-json-logger is set up to write exactly what the bridge writes -- the same keys, the
``ts`` format, the record's ``fields`` merged and ``None`` left out, message and traceback masked
by :func:`bridge.logs.scrub`, nothing else of the record -- and the bench checks that both lines
are equal before it times them. Beside them, python-json-logger as it comes (its own timestamp,
every extra attribute as it is, no masking), for what it costs unconfigured.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter as LibraryFormatter

from bridge.logs import JsonFormatter, scrub

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
ROUNDS = 5


class SameLine(LibraryFormatter):
    """python-json-logger writing the bridge's line: renamed keys, ``ts`` as the bridge writes
    it, the record's ``fields`` merged (``None`` left out), message and traceback masked."""

    def __init__(self) -> None:
        super().__init__(
            ["levelname", "name", "message"],
            rename_fields={"levelname": "level", "name": "logger", "exc_info": "error"},
            reserved_attrs=[*logging.LogRecord("", 0, "", 0, "", (), None).__dict__, "fields"],
            json_ensure_ascii=False,
            json_default=str,
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        log_data["ts"] = f"{stamp}.{int(record.msecs):03d}Z"
        super().add_fields(log_data, record, message_dict)
        log_data["message"] = scrub(log_data["message"])
        error = log_data.pop("error", None)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                if value is not None and key not in log_data:
                    log_data[key] = value
        if error is not None:
            log_data["error"] = scrub(error)


def lifecycle() -> logging.LogRecord:
    fields = {
        "ask_id": "a1b2c3d4e5f6a7b8c9d0e1f2",
        "step": "posted",
        "platform": "slack",
        "channel": "C0GENERAL",
        "user_id": None,
        "outcome": "posted",
        "message_id": "1712345678.000100",
    }
    record = logging.LogRecord(
        "bridge.lifecycle", logging.INFO, __file__, 1, "ask %s %s with xoxb-1-2-secret",
        (fields["ask_id"], "posted"), None,
    )  # fmt: skip
    record.fields = fields
    return record


def failure() -> logging.LogRecord:
    try:
        raise RuntimeError("cannot reach redis://user:hunter2@redis:6379/0")
    except RuntimeError:
        exc_info = sys.exc_info()
    return logging.LogRecord(
        "bridge.sweeper", logging.ERROR, __file__, 1, "sweep failed", (), exc_info
    )


def per_record(formatter: logging.Formatter, record: logging.LogRecord) -> float:
    """Nanoseconds one ``format`` takes, best of :data:`ROUNDS` rounds of :data:`N`. The
    traceback's text is not cached on the record (``exc_text``), as the standard formatter would:
    each line formats it afresh, as a record logged once is."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter_ns()
        for _ in range(N):
            record.exc_text = None
            formatter.format(record)
        best = min(best, (time.perf_counter_ns() - started) / N)
    return best


def main() -> None:
    ours, same, plain = JsonFormatter(), SameLine(), LibraryFormatter(json_ensure_ascii=False)
    print(f"ns per record, best of {ROUNDS} rounds of {N:,}")
    print(f"{'record':<10}{'bridge.logs':>13}{'python-json-logger':>20}{'as it comes':>13}")
    for name, record in (("lifecycle", lifecycle()), ("traceback", failure())):
        line = ours.format(record)
        assert same.format(record) == line, (same.format(record), line)
        mine, theirs, bare = (per_record(f, record) for f in (ours, same, plain))
        print(f"{name:<10}{mine:>13.0f}{theirs:>20.0f}{bare:>13.0f}")


if __name__ == "__main__":
    main()
