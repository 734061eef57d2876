"""The record hash of :mod:`bridge.store.keys` <-> :class:`~bridge.record.AskRecord`.

Fields fixed at creation travel as one JSON ``body``; the fields that change (status, message,
answer, closing) are separate hash fields, so ``ask.lua`` can set each without re-encoding JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bridge.record import AskRecord
from bridge.store.base import creation_text
from bridge.store.keys import Fields


def pairs(flat: Sequence[Any]) -> dict[str, str]:
    """A flat ``[field, value, ...]`` reply (HGETALL inside Lua) as a dict."""
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def record(raw: dict[str, str]) -> AskRecord:
    """The record a (non-empty) record hash holds."""
    data: dict[str, Any] = json.loads(raw[Fields.BODY])
    data["status"] = raw[Fields.STATUS]
    data["deferred"] = raw.get(Fields.DEFERRED) == "1"
    if raw.get(Fields.MESSAGE):
        data["message"] = json.loads(raw[Fields.MESSAGE])
    if raw.get(Fields.ANSWERS):
        data["answers"] = json.loads(raw[Fields.ANSWERS])
        data["answered_by"] = json.loads(raw[Fields.BY])
        data["answered_at"] = float(raw[Fields.AT])
    if raw.get(Fields.CLOSED_AT):
        data["closed_at"] = float(raw[Fields.CLOSED_AT])
    return AskRecord.model_validate(data)


def body(record: AskRecord) -> str:
    """The ``body`` field: JSON of the fields fixed at creation (``deferred`` as created; the
    ``deferred`` field, which may change, is what :func:`record` reads)."""
    return creation_text(record)
