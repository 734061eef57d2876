"""The JSON line's parts made once (its encoder; the stamp's second, once a second) write what
``json.dumps`` and ``strftime`` per line wrote."""

from __future__ import annotations

import calendar
import json
import logging
import time
from datetime import UTC, datetime

from bridge.logs import JsonFormatter


def line_of(created: float, message: str, fields: object) -> dict[str, object]:
    record = logging.LogRecord("bridge.lifecycle", logging.INFO, __file__, 1, message, (), None)
    record.created, record.msecs = created, (created - int(created)) * 1000
    record.fields = fields
    text = JsonFormatter().format(record)
    assert "\n" not in text
    parsed: dict[str, object] = json.loads(text)
    return parsed


def test_each_line_is_stamped_with_its_own_time_to_the_millisecond() -> None:
    # the same second twice, then the next, then an earlier one: the cached second never leaks
    for created in (1_796_330_000.25, 1_796_330_000.999, 1_796_330_001.0, 1_700_000_000.5):
        ts = str(line_of(created, "m", None)["ts"])
        expected = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        assert ts == f"{expected}.{int((created - int(created)) * 1000):03d}Z"
        assert calendar.timegm(time.strptime(ts[:-5], "%Y-%m-%dT%H:%M:%S")) == int(created)


def test_a_line_keeps_text_as_written_and_writes_what_json_cannot_as_text() -> None:
    fields = {
        "ask_id": "a1",
        "user": "Zoë 👋",
        "when": datetime(2026, 12, 3, tzinfo=UTC),
        "x": None,
    }
    line = line_of(1_796_330_000.5, "ask a1 answered by Zoë", fields)
    assert line["message"] == "ask a1 answered by Zoë" and line["user"] == "Zoë 👋"
    assert line["when"] == "2026-12-03 00:00:00+00:00" and "x" not in line
    record = logging.LogRecord("n", logging.INFO, __file__, 1, "é", (), None)
    assert "é" in JsonFormatter().format(record)  # not escaped to \u00e9, as before
