"""Shared bits of the engine benchmarks: a server to run against, and realistic asks."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.question_texts import four_question_dicts
from bridge.mcp_access import is_loopback
from bridge.models import (
    MAX_DESCRIPTION,
    MAX_HEADER,
    MAX_LABEL,
    MAX_OPTIONS,
    MAX_QUESTION_TEXT,
    Option,
    Question,
    QuestionSet,
)
from bridge.poster import Poster
from bridge.record import AskRecord, Destination, MessageRef
from bridge.redis_probe import probe
from bridge.settings import redacted
from bridge.store.terms import StoreUnavailable
from bridge.validation import MAX_BYTES
from tests.support.redis_server import redis_server

ROOT = Path(__file__).resolve().parent.parent
ISSUE_REV = "1a9ff19"
"""The code as issue 11 found it: the benches that take ``--before`` measure it beside this
checkout in the same run (machines differ several times over in speed, so the issue's figures
are compared as ratios)."""


def extract_revision(rev: str, into: Path) -> Path:
    """The ``bridge`` package of ``rev`` (``git archive``) under ``into``; returns ``into``."""
    made = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "bridge"],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        sys.exit(
            f"--before {rev}: git archive failed ({made.stderr.decode().strip()}): a shallow "
            "clone? fetch that revision, or pass --before none"
        )
    tar = into / "before.tar"
    tar.write_bytes(made.stdout)
    with tarfile.open(tar) as archive:
        archive.extractall(into, filter="data")
    return into


def run_child(script: Path, *args: str, code: Path | None = None) -> dict[str, Any]:
    """One fresh process running ``script`` over ``code`` (this checkout if ``None``): its last
    line of output as JSON, checked to come from the code asked for (its ``bridge`` key)."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        sys.exit(f"{script.name} {' '.join(args)} over {code or ROOT} failed:\n{done.stderr}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    where = Path(str(out.pop("bridge"))).resolve()
    if not where.is_relative_to((code or ROOT).resolve()):
        sys.exit(f"{script.name} imported bridge from {where}, not from {code or ROOT}")
    return out


def before_argument(args: list[str], default: str) -> str | None:
    """``--before REV`` (removed from ``args``): the revision, ``default`` if not given, ``None``
    for ``--before none``."""
    if "--before" not in args:
        return default
    at = args.index("--before")
    rev = args[at + 1] if at + 1 < len(args) else "none"
    del args[at : at + 2]
    return None if rev == "none" else rev


def loopback_hosts(url: str) -> list[str]:
    """The hosts of a Redis URL (every Sentinel's too) that are not this machine's loopback;
    none for a Unix socket."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return []
    hosts = parts.netloc.rpartition("@")[2].split(",")
    names = [urlsplit(f"//{host}").hostname or "" for host in hosts]
    return [name for name in names if not is_loopback(name)]


def checked_redis_url(url: str) -> str:
    """``url`` once it names a Redis on this machine that answers: else exits with one line
    (status 1). A bench talks only to loopback, so another host is refused before any
    connection is made."""
    elsewhere = loopback_hosts(url)
    if elsewhere:
        sys.exit(
            f"REDIS_URL={redacted(url)} names {', '.join(elsewhere)}: the benches talk only to "
            "this machine (a Redis on 127.0.0.1, ::1, localhost or a Unix socket)"
        )
    try:
        asyncio.run(probe(url))
    except StoreUnavailable as exc:
        sys.exit(str(exc))
    return url


@contextmanager
def server_url() -> Iterator[str]:
    """``REDIS_URL`` if set (:func:`checked_redis_url`), else a fresh local server for this
    run."""
    if os.environ.get("REDIS_URL"):
        yield checked_redis_url(os.environ["REDIS_URL"])
        return
    with tempfile.TemporaryDirectory() as tmp, redis_server(Path(tmp)) as server:
        yield server.url


def four_questions() -> QuestionSet:
    """Four questions of realistic size (a sentence each, four described options)."""
    return QuestionSet.model_validate({"questions": four_question_dicts()})


_CONTEXTS = (
    ("Export", "The nightly export to the billing warehouse failed {n} times this week"),
    ("Latency", "Checkout latency at p99 went from 180 ms to {n} ms after Tuesday's deploy"),
    ("Certificate", "The certificate for the public API expires in {n} days"),
    ("CI time", "CI on the main branch now takes {n} minutes, mostly in the browser tests"),
    ("Disk", "Disk usage on the primary database reached {n}% overnight"),
    ("Invoices", "Two enterprise customers reported invoices off by {n} cents"),
    ("SDK", "The vendor's SDK we pin is {n} minor versions behind and unsupported"),
    ("Memory", "Memory of the search workers grows by {n} MB an hour until they restart"),
    ("Retention", "Legal asked to keep audit logs for {n} months instead of twelve"),
    ("Sign-up", "The sign-up form drops about {n} submissions a day on older Android phones"),
    ("Budget", "Our error budget for the quarter is down to {n} minutes"),
    ("Flaky test", "A flaky test in the payments suite failed {n} of the last fifty runs"),
)
_ASKS = (
    "How should I handle it before Friday's release freeze?",
    "Which of these do you want me to do first?",
    "Should I fix it now, or leave it for the team's next planning?",
    "What is the safest way forward given the on-call rota this week?",
    "Do you want me to change anything before I open the pull request?",
    "Which option should I take, knowing the change touches shared code?",
    "How far should I go without waiting for the owners to review it?",
    "Who should decide this, and what should I do meanwhile?",
)
_ACTIONS = (
    ("Roll back", "Roll back to the previous release and reopen the ticket"),
    ("Patch and backfill", "Patch the query and backfill the {n} affected rows"),
    ("Pin it", "Pin the dependency to the last version that passed"),
    ("Split pipeline", "Split the browser tests into a nightly pipeline"),
    ("Alert and page", "Add an alert at {n}% and page the on-call engineer"),
    ("Renew by hand", "Renew the certificate by hand and automate it next sprint"),
    ("Ask the owners", "Ask the owning team to review before anything changes"),
    ("Flag off", "Disable the feature flag for new accounts only"),
    ("Shard it", "Shard the job across {n} workers"),
    ("Migrate tonight", "Write a migration and run it in tonight's window"),
    ("Raise limit", "Raise the limit temporarily and watch the dashboards"),
    ("Leave it", "Leave everything as it is and document the risk"),
    ("Move to EU", "Move the job to the EU cluster, which is quieter at night"),
    ("Retry runs", "Retry failed runs automatically up to {n} times"),
    ("Archive old data", "Archive data older than {n} days to cold storage"),
    ("Open incident", "Open an incident and post on the status page"),
)
_EFFECTS = (
    "reports stay stale until it is fixed",
    "it needs roughly {n} hours of work and a short review",
    "the bill for that stage grows by about {n}% a month",
    "pull requests get feedback in under ten minutes again",
    "nobody gets paged at night, but regressions show up a day later",
    "the old version keeps running until every check passes",
    "we lose history older than {n} days unless someone exports it first",
    "customers may see a maintenance banner for about an hour",
    "the data team has to sign off, which usually takes {n} days",
    "rolling it back later is a single command",
    "it blocks the mobile release that is waiting on the same branch",
    "support gets fewer tickets, but finance has to approve the cost",
    "the risk stays, and it will come back after the next traffic peak",
    "two other services need a config change at the same time",
    "it is what we did last quarter, and it held for {n} weeks",
    "the change is invisible to customers",
)


def prose_questions(n_questions: int, call: int) -> list[dict[str, object]]:
    """The ``questions`` argument of one realistic ask as a model sends it (decoded JSON), its
    prose different for every ``call``: each question two sentences naming the call's ticket,
    four options (as :func:`four_questions`) whose descriptions say what the choice does, and
    half the time what follows, with the call's own figures in them; no text repeats within an
    ask (labels and headers, a word or two, are drawn from short lists, as real ones repeat
    across asks). Four questions come to about 2.9 KB of JSON, which raw deflate brings to about
    37% (a hand-written ask of 2.6 KB: 42%; the same set for every call, :func:`four_questions`
    with a call number: 10%), so a compressed copy is not flattered by repetition."""
    rng = random.Random(call)

    def fill(text: str) -> str:
        return text.format(n=rng.randrange(2, 400))

    out: list[dict[str, object]] = []
    contexts = rng.sample(_CONTEXTS, n_questions)
    for i, ((header, context), ask) in enumerate(
        zip(contexts, rng.sample(_ASKS, n_questions), strict=True)
    ):
        options = [
            {
                "label": label,
                "description": f"{fill(action)}: {fill(effect)}."
                if rng.random() < 0.5
                else f"{fill(action)}.",
            }
            for (label, action), effect in zip(
                rng.sample(_ACTIONS, MAX_OPTIONS), rng.sample(_EFFECTS, MAX_OPTIONS), strict=True
            )
        ]
        out.append(
            {
                "question": f"{fill(context)} (ticket #{call:05d}-{i}). {ask}",
                "header": header,
                "options": options,
                "multiSelect": i % 2 == 1,
            }
        )
    return out


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
