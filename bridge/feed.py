"""The answers feed, seen from an agent host: turn a delivery into the model's next message.

A deferred ``ask_user`` call returned at once; when the person answers, the store's feed hands out
a :class:`~bridge.store.base.Delivery`. The host starts the next turn with
:func:`render_delivery` as the user message, then acks. The text for an answer is exactly the tool
result the waiting call would have returned (:func:`bridge.result.answers_result`), so the model
reads one format whichever way the answer came (with ``answered_by`` when the ask's policy tells
the model who answered: ``tell_model_who``), the questions echoed whole: the store keeps an ask's
option descriptions until its feed delivery is acknowledged (``bridge.store.keys``, Retention).
"""

from __future__ import annotations

import json
from typing import Any

from bridge.record import AskRecord, AskStatus
from bridge.result import answers_result, who_payload
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


def outcome_payload(record: AskRecord, *, descriptions: bool = True) -> dict[str, Any]:
    """How an ask ended, as JSON-ready data for a pipeline (``ask-bridge feed``, webhooks):
    ``ask_id``, ``status``, ``result`` (the tool-result JSON: the answers the waiting call would
    have returned, or why none will come: :func:`render_delivery`), ``answered_by`` (everyone whose
    answer was taken -- one person, or the K who agreed -- each with user id, name and ISO time;
    empty when nobody answered), ``answered_at``/``closed_at`` and the ask's ``context``.

    Without ``descriptions`` (webhooks: sent from the ended-asks stream at any time, when the
    store may or may not have dropped them yet) the result's questions leave out every option's
    description, so an ask's payload is the same whenever it is built."""
    if not descriptions:
        record = record.model_copy(update={"questions": record.questions.undescribed()})
    return {
        "ask_id": record.id,
        "status": record.status.value,
        "result": json.loads(render_delivery(record)),
        "answered_by": who_payload(record.who_answered()),
        "answered_at": record.answered_at,
        "closed_at": record.closed_at,
        "context": record.context,
    }


def feed_line(delivery: Delivery) -> str:
    """A delivery as one JSON line (:func:`outcome_payload` and its ``delivery_id``): what
    ``ask-bridge feed`` prints, and what ``feed --exec``'s command reads on its stdin."""
    line = {**outcome_payload(delivery.record), "delivery_id": delivery.delivery_id}
    return json.dumps(line, ensure_ascii=False) + "\n"
