"""The answers feed, seen from an agent host: turn a delivery into the model's next message.

A deferred ``ask_user`` call returned at once; when the person answers, the store's feed hands out
a :class:`~bridge.store.base.Delivery`. The host starts the next turn with
:func:`render_delivery` as the user message, then acks. The text for an answer is exactly the tool
result the waiting call would have returned (:func:`bridge.result.answers_result`), so the model
reads one format whichever way the answer came (with ``answered_by`` when the ask's policy tells
the model who answered: ``tell_model_who``).
"""

from __future__ import annotations

import json

from bridge.record import AskRecord, AskStatus
from bridge.result import answers_result
from bridge.store.base import Delivery


def render_delivery(record: AskRecord | Delivery) -> str:
    """The next user message for the model: the answers JSON, or why no answer will come."""
    rec = record.record if isinstance(record, Delivery) else record
    if rec.status is AskStatus.ANSWERED and rec.answers is not None:
        who = rec.who_answered() if rec.tell_model_who else None
        return answers_result(rec.questions, rec.answers, who)
    reason = {
        AskStatus.EXPIRED: "nobody answered before the questions expired",
        AskStatus.CANCELLED: "the questions were cancelled before anyone answered",
        AskStatus.PENDING: "the questions have not been answered yet",
    }.get(rec.status, str(rec.status))
    return json.dumps(
        {"questions": rec.questions.wire(), "status": rec.status.value, "error": reason},
        ensure_ascii=False,
    )
