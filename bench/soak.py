"""Soak under faults: two ``serve`` replicas, real Redis with AOF, simulated teammates clicking.

Run: ``.venv/bin/python bench/soak.py [--asks 10000] [--rate 200] [--kill-every 20] [--json]``.

* Redis: a real server with ``appendonly yes`` / ``appendfsync always``, restarted once half-way.
* Slack: the loopback fake from the test suite; two ``ask-bridge serve`` replicas (HTTP mode, OS
  processes); every ``--kill-every`` seconds one of them is killed with SIGKILL and restarted.
* Agents: each ask goes through the real chat handler (:class:`bridge.asking.ChatHandler`:
  create, post, wait, confirm) in this process, up to ``--in-flight`` waiting at once.
* Teammates click at ``--rate`` clicks per second (open loop, each click timed from when it was
  due) on a random replica. Shapes: a plain one-click ask; an ask only ``U0BOSS`` may answer,
  clicked first by someone else (refused, told why); an ask two people click at once (one wins,
  the other is told it was already answered). A click that meets a dead replica or no answer
  within ``--patience`` seconds is clicked again, as a person would.

Printed: asks answered; answers lost (the store took an answer the waiting call never returned:
target 0); asks answered twice (two ``answered`` events: target 0); clicks refused, by the
explanation sent; p50/p99 click-to-resume (the winning click's send to the waiting call's return);
errors by kind (dead replica, HTTP status, Redis down during a click).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "slack"), str(ROOT / "tests"), str(ROOT / "bench")]

import aiohttp  # noqa: E402
from fake_slack import BOT_TOKEN, FakeSlack  # noqa: E402
from payloads import SIGNING_SECRET, block_actions, form_body, signed  # noqa: E402
from procs import Serve, cli_env  # noqa: E402
from redis_server import RedisServer  # noqa: E402

from bridge.asking import AskPolicy, ChatHandler  # noqa: E402
from bridge.models import Question  # noqa: E402
from bridge.record import AskRecord, Destination, MessageRef  # noqa: E402
from bridge.result import AskUserAnswered  # noqa: E402
from bridge.store.redis import RedisStore  # noqa: E402
from platforms.slack.client import make_client  # noqa: E402
from platforms.slack.poster import SlackPoster  # noqa: E402

CHANNEL = "C0GENERAL"
BOSS = "U0BOSS"
SHAPES = ("plain", "restricted", "race")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class TellingPoster(SlackPoster):
    """The Slack poster, telling the teammates each posted ask."""

    def __init__(self, client: Any, posted: asyncio.Queue[tuple[AskRecord, MessageRef]]) -> None:
        super().__init__(client)
        self.posted = posted

    async def post(self, record: AskRecord) -> MessageRef:
        ref = await super().post(record)
        self.posted.put_nowait((record, ref))
        return ref


@dataclass
class Soak:
    asks: int
    rate: float
    kill_every: float
    in_flight: int
    patience: float
    fake: FakeSlack
    replicas: list[Serve]
    redis: RedisServer
    store: RedisStore
    session: aiohttp.ClientSession
    posted: asyncio.Queue[tuple[AskRecord, MessageRef]] = field(default_factory=asyncio.Queue)
    returned: dict[str, float] = field(default_factory=dict)
    resumed: defaultdict[str, asyncio.Event] = field(
        default_factory=lambda: defaultdict(asyncio.Event)
    )
    sent: dict[tuple[str, str], float] = field(default_factory=dict)
    resumes: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    ask_ids: list[str] = field(default_factory=list)
    kills: int = 0
    _slots: asyncio.Semaphore | None = None
    _next_click: float = 0.0

    # -- the agents ----------------------------------------------------------------------------

    async def agent(self, n: int, handler: ChatHandler) -> None:
        assert self._slots is not None
        async with self._slots:
            shape = SHAPES[n % len(SHAPES)]
            question = Question.model_validate(
                {
                    "question": f"Soak {n}: ship build {uuid.uuid4().hex[:6]}?",
                    "header": "Ship",
                    "options": [
                        {"label": "Yes", "description": "Ship it"},
                        {"label": "No", "description": "Hold it"},
                    ],
                }
            )
            policy = AskPolicy(
                wait=120, expires=600, on_timeout="error",
                answerers=(BOSS,) if shape == "restricted" else (),
            )  # fmt: skip
            chat = ChatHandler(handler.poster, handler.store, handler.destination, policy)
            try:
                result = await chat([question], {"shape": shape})
            except Exception as exc:
                self.outcomes[f"agent: {type(exc).__name__}"] += 1
                return
            answered = isinstance(result, AskUserAnswered)
            self.outcomes["returned answers" if answered else "deferred"] += 1

    # -- the teammates -------------------------------------------------------------------------

    async def due(self) -> float:
        """Wait for this click's slot in the open-loop schedule; return when it was due."""
        now = time.monotonic()
        self._next_click = max(self._next_click + 1 / self.rate, now)
        at = self._next_click
        await asyncio.sleep(max(0.0, at - now))
        return at

    async def click(
        self, record: AskRecord, ref: MessageRef, user: str, *, looking: bool = True
    ) -> str:
        """One click until a replica takes it: ``ok`` or the error kind of the last try. A person
        ``looking`` at the message does not click once it shows the answer; racers click the
        buttons they see at the same moment."""
        if looking and not self.open(ref):
            return "closed"
        payload = block_actions(
            self.fake, ref.channel, ref.message_id, user, f"askb:pick:{record.id}:0:0"
        )
        for _ in range(20):
            due = await self.due()
            replica = random.choice(self.replicas)
            body = form_body(payload)
            try:
                async with self.session.post(
                    replica.url, data=body, headers=signed(body), timeout=aiohttp.ClientTimeout(5)
                ) as resp:
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError):
                self.errors["replica down (clicked again)"] += 1
                continue
            if status == 200:
                self.sent[(record.id, user)] = due
                return "ok"
            self.errors[f"HTTP {status} (clicked again)"] += 1
        return "gave up"

    async def teammate(self, record: AskRecord, ref: MessageRef) -> None:
        shape = record.context.get("shape")
        if shape == "restricted":
            await self.click(record, ref, "U0INTERN")
            winner_pool = [BOSS]
        elif shape == "race":
            await asyncio.gather(
                self.click(record, ref, "U0LEFT", looking=False),
                self.click(record, ref, "U0RIGHT", looking=False),
            )
            winner_pool = ["U0LEFT", "U0RIGHT"]
        else:
            winner_pool = ["U0ALICE"]
        if shape != "race":
            await self.click(record, ref, winner_pool[0])
        deadline = time.monotonic() + 60
        while record.id not in self.returned and time.monotonic() < deadline:
            try:
                await asyncio.wait_for(self._returned(record.id), self.patience)
            except TimeoutError:
                if not self.open(ref):
                    continue  # the message shows the answer: nothing to click any more
                self.errors["no answer shown within patience (clicked again)"] += 1
                await self.click(record, ref, winner_pool[0])

    def open(self, ref: MessageRef) -> bool:
        """Whether the message still shows its buttons (not yet re-rendered as ended)."""
        message = self.fake.messages[(ref.channel, ref.message_id)]
        return any(block.get("type") == "actions" for block in message.get("blocks") or ())

    async def _returned(self, ask_id: str) -> None:
        await self.resumed[ask_id].wait()

    async def teammates(self) -> None:
        running: set[asyncio.Task[None]] = set()
        for _ in range(self.asks):
            record, ref = await self.posted.get()
            self.ask_ids.append(record.id)
            task = asyncio.create_task(self.teammate(record, ref))
            running.add(task)
            task.add_done_callback(running.discard)
        if running:
            await asyncio.gather(*running)

    # -- faults --------------------------------------------------------------------------------

    async def chaos(self, redis_restart_at: float) -> None:
        started = time.monotonic()
        restarted_redis = False
        turn = 0
        while True:
            await asyncio.sleep(self.kill_every)
            victim = self.replicas[turn % len(self.replicas)]
            turn += 1
            await victim.stop(signal.SIGKILL)
            self.kills += 1
            await victim.start()
            if not restarted_redis and time.monotonic() - started >= redis_restart_at:
                restarted_redis = True
                await asyncio.to_thread(self.redis.restart)
                self.errors["redis restarted (planned)"] += 1


class ResumeTimingStore(RedisStore):
    """The store, noting when each waiting call got its answer back (click-to-resume)."""

    soak: Soak | None = None

    async def confirm(self, ask_id: str) -> None:
        if self.soak is not None:
            self.soak.returned[ask_id] = time.monotonic()
            self.soak.resumed[ask_id].set()
        await super().confirm(ask_id)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        redis = RedisServer(Path(tmp), extra=["--appendonly", "yes", "--appendfsync", "always"])
        redis.start()
        fake = await FakeSlack().start()
        prefix = f"soak{uuid.uuid4().hex[:6]}"
        env = cli_env(
            SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=fake.url, REDIS_URL=redis.url, ASK_BRIDGE_KEY_PREFIX=prefix,
            LOG_LEVEL="WARNING",
        )  # fmt: skip
        replicas = [await Serve(env).start() for _ in range(2)]
        store = ResumeTimingStore.from_url(redis.url, prefix=prefix, max_connections=32)
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
        soak = Soak(
            args.asks, args.rate, args.kill_every, args.in_flight, args.patience,
            fake, replicas, redis, store, session,
        )  # fmt: skip
        store.soak = soak
        soak._slots = asyncio.Semaphore(args.in_flight)
        poster = TellingPoster(make_client(BOT_TOKEN, fake.url), soak.posted)
        base = ChatHandler(poster, store, Destination(platform="slack", channel=CHANNEL))
        started = time.monotonic()
        restart_at = args.redis_restart_at
        if restart_at is None:  # half-way through the expected run
            restart_at = args.asks * 1.6 / args.rate / 2
        chaos = asyncio.create_task(soak.chaos(redis_restart_at=restart_at))
        try:
            clicking = asyncio.create_task(soak.teammates())
            await asyncio.gather(*(soak.agent(n, base) for n in range(args.asks)))
            await clicking
        finally:
            chaos.cancel()
            await asyncio.gather(chaos, return_exceptions=True)
        elapsed = time.monotonic() - started
        report = await soak_report(soak, elapsed)
        await session.close()
        for replica in replicas:
            await replica.stop()
        await store.aclose()
        await fake.stop()
        redis.stop()
        return report


async def soak_report(soak: Soak, elapsed: float) -> dict[str, Any]:
    answered = lost = double = 0
    for ask_id in soak.ask_ids:
        record = await soak.store.get(ask_id)
        history = await soak.store.history(ask_id)
        takes = sum(1 for e in history if e.kind == "answered")
        double += takes > 1
        if record is not None and record.answered_by is not None:
            answered += 1
            if ask_id not in soak.returned:
                lost += 1
                continue
            clicked = soak.sent.get((ask_id, record.answered_by.user_id))
            if clicked is not None:
                soak.resumes.append(soak.returned[ask_id] - clicked)
    refused = Counter(
        str(c.args.get("text", ""))
        .replace("<@U0LEFT>", "<@…>")
        .replace("<@U0RIGHT>", "<@…>")
        .replace("<@U0ALICE>", "<@…>")
        .replace(f"<@{BOSS}>", "<@…>")
        for c in soak.fake.calls
        if c.ok and c.method == "chat.postEphemeral"
    )
    return {
        "asks": len(soak.ask_ids),
        "seconds": round(elapsed, 1),
        "answered": answered,
        "lost": lost,
        "answered_twice": double,
        "refused_with_explanation": dict(refused),
        "click_to_resume_ms": {
            "p50": round(pct(soak.resumes, 50) * 1000, 1),
            "p99": round(pct(soak.resumes, 99) * 1000, 1),
        },
        "replica_kills": soak.kills,
        "errors": dict(soak.errors),
        "agents": dict(soak.outcomes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--asks", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=200.0, help="clicks per second")
    parser.add_argument("--kill-every", type=float, default=20.0, help="seconds between kills")
    parser.add_argument("--in-flight", type=int, default=400, help="asks waiting at once")
    parser.add_argument("--patience", type=float, default=5.0, help="seconds before re-clicking")
    parser.add_argument(
        "--redis-restart-at",
        type=float,
        default=None,
        help="restart Redis at the first kill after this many seconds (default: half-way)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report))
        return
    for key, value in report.items():
        print(f"{key:>26}: {value}")


if __name__ == "__main__":
    main()
