"""What an operator watches: Prometheus metrics and one log line per lifecycle step of an ask.

Each step of an ask's life -- created, posted, a click's verdict, answered, expired, cancelled,
resumed (the waiting call returned the answers), handed to the feed -- is one call here, made
where the step happens (:mod:`bridge.asking`, :mod:`bridge.answering`, :mod:`bridge.sweeper`), so
the metric and the log line cannot disagree. The log line (logger ``bridge.lifecycle``, INFO)
carries the ask id, platform, channel, user id and outcome as fields (``LOG_FORMAT=json`` prints
them, :mod:`bridge.logs`); never a token, and the question text only with ``LOG_QUESTIONS=1``.

``ask-bridge serve`` exposes the metrics at ``GET /metrics`` (:mod:`bridge.http_server`); every
series is labelled by platform where one applies.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ParamSpec, Protocol, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from bridge.record import AskRecord, MessageRef
from bridge.store.base import FEED_OBSERVERS

log = logging.getLogger("bridge.lifecycle")
_P = ParamSpec("_P")
_V = TypeVar("_V", bound="_Judged")
UNKNOWN = "unknown"
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 5.0, 10.0)
ANSWER_BUCKETS = (5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0)

ASKS_CREATED = Counter("ask_bridge_asks_created", "Asks created", ["platform"])
ASKS_ENDED = Counter(
    "ask_bridge_asks_ended",
    "Asks ended, by how: answered, expired, cancelled (counted by the process that ended them: "
    "an expiry by the sweep that found it, or by the click that found it past its expiry)",
    ["platform", "status"],
)
CLICKS = Counter(
    "ask_bridge_clicks", "Clicks and form submissions judged, by verdict", ["platform", "outcome"]
)
TIME_TO_ANSWER = Histogram(
    "ask_bridge_time_to_answer_seconds",
    "From an ask's creation to the click that answered it",
    ["platform"],
    buckets=ANSWER_BUCKETS,
)
ACK_LATENCY = Histogram(
    "ask_bridge_interaction_ack_seconds",
    "From receiving a click to acknowledging it (the verdict stored, unless the store was slow)",
    ["platform"],
    buckets=LATENCY_BUCKETS,
)
ANSWER_TO_RESUME = Histogram(
    "ask_bridge_answer_to_resume_seconds",
    "From the answering click to the waiting tool call returning the answers (observed by the "
    "process whose call waited: ask, mcp, an agent's own)",
    ["platform"],
    buckets=LATENCY_BUCKETS,
)
STORE_ERRORS = Counter(
    "ask_bridge_store_errors", "Store operations that found the store unreachable", ["op"]
)
PLATFORM_ERRORS = Counter(
    "ask_bridge_platform_errors",
    "Platform API calls that failed (kind: post, update, ratelimited)",
    ["platform", "kind"],
)
PENDING = Gauge("ask_bridge_pending_asks", "Asks pending in the store", ["platform"])


@functools.cache
def _child(metric: Counter | Histogram, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once per process: every click counts and times
    itself under a handful of label sets, and each lookup takes the metric's lock and checks
    its labels anew. A child stays valid for the process's life (nothing removes them)."""
    return metric.labels(*labels)


class _Judged(Protocol):
    @property
    def outcome(self) -> Any: ...

    @property
    def record(self) -> AskRecord | None: ...


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus' text format, and its content type."""
    return generate_latest(), CONTENT_TYPE_LATEST


def step(
    name: str,
    record: AskRecord,
    *,
    user_id: str | None = None,
    outcome: str = "",
    more: Mapping[str, Any] | None = None,
) -> None:
    """Log one lifecycle step of ``record`` with its fields (and ``more`` of the step's own);
    the fields are built only when the line is written (an agent that logs nothing at INFO
    pays nothing for its five steps a call)."""
    if not log.isEnabledFor(logging.INFO):
        return
    dest = record.destination
    fields: dict[str, Any] = {
        "ask_id": record.id,
        "step": name,
        "platform": dest.platform,
        "channel": dest.channel or (record.message.channel if record.message else None),
        "user_id": user_id,
        "outcome": outcome or None,
    }
    if record.message is not None:
        fields["message_id"] = record.message.message_id
        if record.message.extra.get("link"):
            fields["link"] = record.message.extra["link"]
    fields.update(more or {})
    if log_questions():
        fields["questions"] = [q.question for q in record.questions.questions]
    shown = f" ({outcome})" if outcome else ""
    who = f" by {user_id}" if user_id else ""
    log.info("ask %s %s%s%s", record.id, name, who, shown, extra={"fields": fields})


def log_questions() -> bool:
    from bridge.logs import settings

    return settings().log_questions


def created(record: AskRecord) -> None:
    ASKS_CREATED.labels(record.destination.platform).inc()
    step("created", record)


def posted(record: AskRecord, message: MessageRef | None = None) -> None:
    """``record`` was posted (as ``message``, where the record itself does not hold it yet:
    copied in only if the line is written)."""
    if message is not None and log.isEnabledFor(logging.INFO):
        record = record.model_copy(update={"message": message})
    step("posted", record)


def post_failed(record: AskRecord) -> None:
    PLATFORM_ERRORS.labels(record.destination.platform, "post").inc()
    step("post_failed", record, outcome="cancelled")


def ended(record: AskRecord, *, user_id: str | None = None) -> None:
    """``record`` ended (answered, expired, cancelled) by this process's doing."""
    platform = record.destination.platform
    _child(ASKS_ENDED, platform, record.status.value).inc()
    if record.status.value == "answered":
        _child(TIME_TO_ANSWER, platform).observe(max(0.0, _answered_at(record) - record.created_at))
    step(record.status.value, record, user_id=user_id, outcome=record.status.value)


def expired_unread(ask_id: str, platform: str) -> None:
    """A sweep expired the ask ``ask_id`` (of ``platform``, its destination's) and this process
    will not read its record: its sweeper's show queue was full or stopped, so a later sweep
    shows it. Counted now, as :func:`ended` would have, and logged with the fields a sweep names
    (no channel or message id): an expiry is counted once, by the sweep that made it."""
    ASKS_ENDED.labels(platform, "expired").inc()
    fields = {"ask_id": ask_id, "step": "expired", "platform": platform, "outcome": "expired"}
    log.info("ask %s expired (expired)", ask_id, extra={"fields": fields})


def resumed(record: AskRecord) -> None:
    """The waiting call returned ``record``'s answers. Only the process whose call waited sees
    this (``serve`` does not): the latency goes to its histogram and, as ``seconds``, to the
    ``resumed`` log line, which every agent process writes."""
    seconds = max(0.0, time.time() - _answered_at(record))
    ANSWER_TO_RESUME.labels(record.destination.platform).observe(seconds)
    step("resumed", record, outcome="answered", more={"seconds": round(seconds, 6)})


def handed_to_feed(ask: AskRecord | str) -> None:
    """The answer of ``ask`` (a record, or only its id where the store knows no more) was put on
    the answers feed: a deferred ask ended, or nobody held the lease when it was answered. Logged
    by the process that put it there, as the store tells it: subscribed below to
    :data:`bridge.store.base.FEED_OBSERVERS` when this module is imported."""
    if isinstance(ask, AskRecord):
        step("handed_to_feed", ask, outcome="to the feed")
        return
    fields = {"ask_id": ask, "step": "handed_to_feed", "outcome": "to the feed"}
    log.info("ask %s handed_to_feed (to the feed)", ask, extra={"fields": fields})


FEED_OBSERVERS.append(handed_to_feed)  # the store tells each hand-off; it never imports this


def deferred(record: AskRecord) -> None:
    """The call returned without the answer: it will be handed to the answers feed."""
    step("deferred", record, outcome="to the feed")


def reminded(record: AskRecord, n: int) -> None:
    """Reminder ``n`` of ``record`` was posted in its message's thread."""
    step("reminded", record, outcome=f"reminder {n}")


def escalated(record: AskRecord) -> None:
    """``record`` was posted again at its escalation destination."""
    follow = record.follow_ups
    where = follow.escalate_to if follow is not None else None
    to = (where.channel or where.user or "") if where is not None else ""
    step("escalated", record, outcome=f"to {where.platform}:{to}" if where else "")


def poster_platform(ask: AskRecord | str) -> str:
    """The platform of an ask given as a record (an id alone does not say)."""
    return ask.destination.platform if isinstance(ask, AskRecord) else UNKNOWN


def platform_of(record: AskRecord | None) -> str:
    return record.destination.platform if record is not None else UNKNOWN


def acked(platform: str, seconds: float) -> None:
    _child(ACK_LATENCY, platform).observe(seconds)


def store_error(op: str) -> None:
    STORE_ERRORS.labels(op).inc()


def platform_error(platform: str, kind: str) -> None:
    PLATFORM_ERRORS.labels(platform, kind).inc()
    if kind == "ratelimited":
        _RATE_LIMITED[platform] = _RATE_LIMITED.get(platform, 0) + 1


_RATE_LIMITED: dict[str, int] = {}


def rate_limited(platform: str) -> int:
    """The 429s ``platform`` answered this process so far (its client counts each through
    :func:`platform_error`): the sweeper's show queue slows down when they rise."""
    return _RATE_LIMITED.get(platform, 0)


def set_pending(counts: Mapping[str, int]) -> None:
    """The pending asks per platform, as last counted (platforms not listed: 0)."""
    for labels in list(PENDING._metrics):
        if labels[0] not in counts:
            PENDING.labels(*labels).set(0)
    for platform, count in counts.items():
        PENDING.labels(platform).set(count)


def judged(
    judge: Callable[_P, Coroutine[Any, Any, _V]],
) -> Callable[_P, Coroutine[Any, Any, _V]]:
    """Decorate an :class:`~bridge.answering.Answering` judging method that writes the verdict to
    the store (whose arguments include the ``who`` :class:`~bridge.answering.Caller`): count and
    log its verdict, and the ending when the verdict took it -- an answer, or an expiry: a
    ``closed`` verdict on an ask whose ``closed_at`` is not older than the click found it past
    ``expires_at`` and expired it in that very step (:meth:`bridge.store.base.Store.submit`), and
    no sweep will count it."""
    return _judged(judge, ends=True)


def judged_read(
    judge: Callable[_P, Coroutine[Any, Any, _V]],
) -> Callable[_P, Coroutine[Any, Any, _V]]:
    """:func:`judged` for a judging method that only reads the store (opening a form): it counts
    and logs the verdict, and never ends an ask."""
    return _judged(judge, ends=False)


def _judged(
    judge: Callable[_P, Coroutine[Any, Any, _V]], *, ends: bool
) -> Callable[_P, Coroutine[Any, Any, _V]]:
    @functools.wraps(judge)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _V:
        started = time.time()
        verdict = await judge(*args, **kwargs)
        record = verdict.record
        who = kwargs.get("who") or next((a for a in args if hasattr(a, "user_id")), None)
        user_id = getattr(who, "user_id", None)
        outcome = str(getattr(verdict.outcome, "value", verdict.outcome))
        platform = platform_of(record)
        _child(CLICKS, platform, outcome).inc()
        if record is not None:
            step("click", record, user_id=user_id, outcome=outcome)
            if ends and _ended_by_this(outcome, record, started):
                ended(record, user_id=user_id)
        else:
            log.info(
                "click by %s on an unknown ask (%s)",
                user_id,
                outcome,
                extra={"fields": {"user_id": user_id, "outcome": outcome, "step": "click"}},
            )
        return verdict

    return run


def _ended_by_this(outcome: str, record: AskRecord, started: float) -> bool:
    if outcome == "accepted":
        return record.status.value == "answered"
    if outcome == "closed" and record.status.value == "expired":
        return record.closed_at is not None and record.closed_at >= started
    return False


def _answered_at(record: AskRecord) -> float:
    return record.answered_at or record.closed_at or time.time()
