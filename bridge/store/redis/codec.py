"""The record hash of :mod:`bridge.store.keys` <-> :class:`~bridge.record.AskRecord`.

Fields fixed at creation travel as one JSON ``body``; the fields that change (status, message,
answer, closing) are separate hash fields, so the scripts (:mod:`.scripts`) can set
each without re-encoding JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from bridge.identities import PERSON_KEY
from bridge.models import STORED, Answer
from bridge.record import AskRecord, MessageRef, Submission
from bridge.store.keys import Fields
from bridge.store.terms import creation_text


def pairs(flat: Sequence[Any]) -> dict[str, str]:
    """A flat ``[field, value, ...]`` reply (HGETALL inside Lua) as a dict."""
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def record(raw: dict[str, str]) -> AskRecord:
    """The record a (non-empty) record hash holds.

    Its JSON is spliced together from the stored pieces (the body, and the fields that change,
    stored as JSON or numbers) and validated in one pass by pydantic's JSON parser: no Python
    dicts in between, which matters when a sweep builds 100,000 records at once. Read as
    :data:`~bridge.models.STORED`: an ask whose outcome was handed over keeps no option
    descriptions."""
    body = raw[Fields.BODY]
    parts = [body[: body.rindex("}")], ',"status":', json.dumps(raw[Fields.STATUS])]
    parts += [',"deferred":', "true" if raw.get(Fields.DEFERRED) == "1" else "false"]
    if raw.get(Fields.MESSAGE):
        parts += [',"message":', raw[Fields.MESSAGE]]
    if raw.get(Fields.REMINDED):
        parts += [',"reminded":', str(int(raw[Fields.REMINDED]))]
    if raw.get(Fields.ESCALATIONS):
        parts += [',"escalations":', raw[Fields.ESCALATIONS]]
    if raw.get(Fields.ANSWERS):
        answers = raw[Fields.ANSWERS]
        if raw.get(Fields.SLIM) == "1":
            answers = _with_questions(answers, body)
        parts += [',"answers":', answers, ',"answered_by":', raw[Fields.BY]]
        parts += [',"answered_at":', _number(raw[Fields.AT])]
    if raw.get(Fields.CLOSED_AT):
        parts += [',"closed_at":', _number(raw[Fields.CLOSED_AT])]
    parts.append("}")
    built = AskRecord.model_validate_json("".join(parts), context=STORED)
    subs = {
        field[len(Fields.SUBMISSION) :]: value
        for field, value in raw.items()
        if field.startswith(Fields.SUBMISSION)
    }
    if not subs:
        return built
    withdrawn = Fields.SUBMISSION_WITHDRAWN
    gone = {f[len(withdrawn) :] for f in raw if f.startswith(withdrawn)}
    return built.model_copy(update={"submissions": submissions(built, subs, gone)})


def with_messages(record: AskRecord, message: str, escalations: str) -> AskRecord:
    """``record`` posted where the ``message`` and ``escalations`` fields say (JSON; ``''``:
    none): what may change of an ended ask the caller holds."""
    found = json.loads(escalations) if escalations else []
    return record.model_copy(
        update={
            "message": MessageRef.model_validate_json(message),
            "escalations": tuple(MessageRef.model_validate(each) for each in found),
        }
    )


def has_follow_ups(raw: dict[str, str]) -> bool:
    """Whether the ask has follow-ups, read without building the record: its ``body`` is
    canonical JSON (:func:`body`) holding ``"follow_ups":null`` when it has none (that text
    cannot occur inside a JSON string, whose quotes are escaped)."""
    return '"follow_ups":null' not in raw[Fields.BODY]


def submissions(
    record: AskRecord, stored: Mapping[str, str], withdrawn: AbstractSet[str] = frozenset()
) -> tuple[Submission, ...]:
    """The ``sub:<key>`` fields (by key: a user id, or a linked person's ``person:<name>``,
    :mod:`bridge.identities`) as submissions, oldest first, those keyed in ``withdrawn`` marked
    so: their answers leave out the question texts (as the audit trail's do), taken back from the
    record's question set."""
    qs = record.questions.questions
    out = []
    for key, text in stored.items():
        data = json.loads(text)
        answers = tuple(
            Answer(question=q.question, selected=tuple(a["selected"]), other_text=a["other_text"])
            for q, a in zip(qs, data["answers"], strict=True)
        )
        out.append(
            Submission(
                user_id=data["user_id"],
                name=data["name"],
                at=float(data["at"]),
                answers=answers,
                person=key if key.startswith(PERSON_KEY) else None,
                withdrawn=key in withdrawn,
            )
        )
    return tuple(sorted(out, key=lambda s: (s.at, s.user_id)))


def _with_questions(answers: str, body: str) -> str:
    """A settled ask's answers, kept without their question texts (``tidy`` in
    ``lua/lib/core.lua``), with the texts put back from the body: answer ``i`` answers question
    ``i``."""
    questions = json.loads(body)["questions"]["questions"]
    found = json.loads(answers)
    for answer, question in zip(found, questions, strict=False):
        answer["question"] = question["question"]
    return json.dumps(found, ensure_ascii=False)


def _number(text: str) -> str:
    """A stored time as JSON: the text as written (``repr`` of a float), checked to be one."""
    return repr(float(text))


def body(record: AskRecord) -> str:
    """The ``body`` field: JSON of the fields fixed at creation (``deferred`` as created; the
    ``deferred`` field, which may change, is what :func:`record` reads)."""
    return creation_text(record)
