"""Soak under faults: two ``serve`` replicas, real Redis with AOF, simulated teammates clicking.

Run: ``.venv/bin/python -m bench.soak [--asks 10000] [--rate 200] [--kill-every 20]
[--platforms slack,discord] [--json]``.

* Redis: a real server with ``appendonly yes`` / ``appendfsync always``, restarted once half-way.
* Platforms: the loopback fakes from the test suite -- Slack's Web API, Discord's REST API and
  gateway. Two ``ask-bridge serve`` replicas (OS processes) serve both: Slack over HTTP, Discord
  over one gateway session each. Every ``--kill-every`` seconds one of them is killed with
  SIGKILL and restarted (its gateway session dies with it and a new one is identified).
* Agents: each ask goes through the real chat handler (:class:`bridge.asking.ChatHandler`:
  create, post, wait, confirm) in this process, up to ``--in-flight`` waiting at once; the asks
  alternate between the platforms.
* Teammates click at ``--rate`` clicks per second in all (open loop, each click timed from when
  it was due). Slack: a signed request to a random replica. Discord: an ``INTERACTION_CREATE`` on
  a random live gateway session. Shapes: a plain one-click ask; an ask only the boss may answer,
  clicked first by someone else (refused, told why); an ask two people click at once (one wins,
  the other is told it was already answered). A click that meets a dead replica, or that gets no
  acknowledgement (Discord: no interaction response within its 3 s) or no answer shown within
  ``--patience`` seconds, is clicked again, as a person would.

Printed per platform: asks answered; answers lost (the store took an answer the waiting call
never returned, and it is not on the answers feed either: target 0); answers handed to the feed
instead (the waiting call's lease lapsed -- its process too busy to renew it -- so the call
returned "deferred" and the answer went to the answers feed, as designed); asks answered twice
(two ``answered`` events: target 0); clicks refused, by the explanation sent; p50/p99
click-to-resume (the winning click's send to the waiting call's return); errors by kind (dead
replica, HTTP status, no response).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import signal
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import aiohttp

from bridge.asking import AskPolicy, ChatHandler
from bridge.models import Question
from bridge.poster import Poster
from bridge.record import AskRecord, Destination, MessageRef
from bridge.result import AskUserAnswered
from bridge.store.redis import RedisStore
from platforms.discord import DiscordPlatform
from platforms.discord.settings import DiscordSettings
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from tests.support.discord.fake_discord import CHANNEL as DISCORD_CHANNEL
from tests.support.discord.fake_discord import TOKEN as DISCORD_TOKEN
from tests.support.discord.fake_discord import FakeDiscord, told_now
from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, block_actions, form_body, signed

CHANNEL = "C0GENERAL"
SHAPES = ("plain", "restricted", "race")
PEOPLE = ("boss", "intern", "left", "right", "alice")
DISCORD_ACK = 3.0
"""Discord's window to respond to an interaction: no response by then, the person clicks again."""
MENTION = re.compile(r"<@[0-9A-Z]+>")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class TellingPoster(Poster):
    """A platform's poster, telling the teammates each posted ask."""

    def __init__(self, inner: Poster, posted: asyncio.Queue[tuple[AskRecord, MessageRef]]) -> None:
        self.inner = inner
        self.platform = inner.platform
        self.posted = posted

    async def post(self, record: AskRecord) -> MessageRef:
        ref = await self.inner.post(record)
        self.posted.put_nowait((record, ref))
        return ref

    async def update(self, record: AskRecord) -> None:
        await self.inner.update(record)


class Side:
    """One platform as the teammates see it: who they are, how they click, what they are told."""

    name: ClassVar[str]
    users: ClassVar[Mapping[str, str]]
    """Each of :data:`PEOPLE` as the platform knows them."""
    destination: ClassVar[Destination]
    soak: Soak

    def poster(self) -> Poster:
        raise NotImplementedError

    def see(self, record: AskRecord, ref: MessageRef, user: str) -> bool:
        """``user`` looks at the message, about to click its button: whether it shows one. A
        press then sends what they saw, even if the message changed meanwhile (a race)."""
        raise NotImplementedError

    def open(self, ref: MessageRef) -> bool:
        """Whether the message still shows its buttons (not yet re-rendered as ended)."""
        raise NotImplementedError

    async def press(self, record: AskRecord, ref: MessageRef, user: str) -> str:
        """One press of the first option's button: ``ok`` once acknowledged, else the error kind
        (clicked again), or ``closed`` when the button is gone."""
        raise NotImplementedError

    def refusals(self) -> Counter[str]:
        """Every explanation sent privately, mentions blanked."""
        raise NotImplementedError


class SlackSide(Side):
    name = "slack"
    users: ClassVar[Mapping[str, str]] = {p: f"U0{p.upper()}" for p in PEOPLE}
    destination = Destination(platform="slack", channel=CHANNEL)

    def __init__(self, fake: FakeSlack) -> None:
        self.fake = fake
        self.payloads: dict[tuple[str, str], dict[str, Any]] = {}

    def see(self, record: AskRecord, ref: MessageRef, user: str) -> bool:
        try:
            self.payloads[(record.id, user)] = block_actions(
                self.fake, ref.channel, ref.message_id, user, f"askb:pick:{record.id}:0:0"
            )
        except AssertionError:  # the message no longer shows the button
            return False
        return True

    def poster(self) -> Poster:
        return SlackPoster(make_client(BOT_TOKEN, self.fake.url))

    def open(self, ref: MessageRef) -> bool:
        message = self.fake.messages[(ref.channel, ref.message_id)]
        return any(block.get("type") == "actions" for block in message.get("blocks") or ())

    async def press(self, record: AskRecord, ref: MessageRef, user: str) -> str:
        key = (record.id, user)
        if key not in self.payloads and not self.see(record, ref, user):
            return "closed"
        body = form_body(self.payloads[key])
        replica = random.choice(self.soak.replicas)
        try:
            async with self.soak.session.post(
                replica.url, data=body, headers=signed(body), timeout=aiohttp.ClientTimeout(5)
            ) as resp:
                status = resp.status
        except (aiohttp.ClientError, TimeoutError):
            return "replica down (clicked again)"
        return "ok" if status == 200 else f"HTTP {status} (clicked again)"

    def refusals(self) -> Counter[str]:
        return Counter(
            MENTION.sub("<@…>", str(c.args.get("text", "")))
            for c in self.fake.calls
            if c.ok and c.method == "chat.postEphemeral"
        )


class DiscordSide(Side):
    name = "discord"
    users: ClassVar[Mapping[str, str]] = {
        p: str(100000000000000010 + i) for i, p in enumerate(PEOPLE)
    }
    destination = Destination(platform="discord", channel=DISCORD_CHANNEL)

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        settings = DiscordSettings(
            token=DISCORD_TOKEN, api_url=fake.url, gateway_url=fake.gateway_url
        )
        self.platform = DiscordPlatform(settings)
        self.saw: set[tuple[str, str]] = set()

    def see(self, record: AskRecord, ref: MessageRef, user: str) -> bool:
        if not self.open(ref):
            return False
        self.saw.add((record.id, user))
        return True

    def poster(self) -> Poster:
        return self.platform.poster()

    def open(self, ref: MessageRef) -> bool:
        return bool(self.fake.messages[ref.message_id].get("components"))

    async def press(self, record: AskRecord, ref: MessageRef, user: str) -> str:
        live = [s for s in self.fake.sessions if s.identified.is_set() and not s.ws.closed]
        if not live:  # both replicas between a kill and their new session
            await asyncio.sleep(0.5)
            return "no gateway session (clicked again)"
        custom_id = f"askb:pick:{record.id}:0:0"
        message = self.fake.messages[ref.message_id]
        try:
            if self.open(ref):
                session = random.choice(live)
                interaction = await self.fake.click(user, message, custom_id, session=session)
            elif (record.id, user) in self.saw:  # clicked what they saw before it changed
                interaction = await self.fake.forge_click(user, message, custom_id)
            else:
                return "closed"
        except (ConnectionError, aiohttp.ClientError):  # the session was closing: a killed replica
            return "replica down (clicked again)"
        try:
            await self.fake.responded(interaction, within=DISCORD_ACK)
        except TimeoutError:
            return "no interaction response (clicked again)"
        return "ok"

    def refusals(self) -> Counter[str]:
        told = (told_now(i) for i in self.fake.interactions.values())
        return Counter(MENTION.sub("<@…>", text) for text in told if text)


@dataclass
class Soak:
    asks: int
    rate: float
    kill_every: float
    in_flight: int
    patience: float
    sides: dict[str, Side]
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
    errors: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    """By platform (``""``: the faults themselves)."""
    outcomes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    ask_ids: list[tuple[str, str]] = field(default_factory=list)
    """(platform, ask id) in the order posted."""
    kills: int = 0
    _slots: asyncio.Semaphore | None = None
    _next_click: float = 0.0

    # -- the agents ----------------------------------------------------------------------------

    async def agent(self, n: int, posters: dict[str, Poster]) -> None:
        assert self._slots is not None
        async with self._slots:
            side = list(self.sides.values())[n % len(self.sides)]
            shape = SHAPES[(n // len(self.sides)) % len(SHAPES)]
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
                answerers=(side.users["boss"],) if shape == "restricted" else (),
            )  # fmt: skip
            chat = ChatHandler(posters[side.name], self.store, side.destination, policy)
            try:
                result = await chat([question], {"shape": shape})
            except Exception as exc:
                self.outcomes[side.name][f"agent: {type(exc).__name__}"] += 1
                return
            answered = isinstance(result, AskUserAnswered)
            self.outcomes[side.name]["returned answers" if answered else "deferred"] += 1

    # -- the teammates -------------------------------------------------------------------------

    async def due(self) -> float:
        """Wait for this click's slot in the open-loop schedule; return when it was due."""
        now = time.monotonic()
        self._next_click = max(self._next_click + 1 / self.rate, now)
        at = self._next_click
        await asyncio.sleep(max(0.0, at - now))
        return at

    async def click(
        self, side: Side, record: AskRecord, ref: MessageRef, who: str, *, looking: bool = True
    ) -> str:
        """One click until a replica takes it: ``ok`` or the error kind of the last try. A person
        ``looking`` at the message does not click once it shows the answer; racers click the
        buttons they see at the same moment."""
        user = side.users[who]
        if (looking and not side.open(ref)) or not side.see(record, ref, user):
            return "closed"
        outcome = "gave up"
        for _ in range(20):
            due = await self.due()
            outcome = await side.press(record, ref, user)
            if outcome == "ok":
                self.sent[(record.id, user)] = due
                return outcome
            if outcome == "closed":
                return outcome
            self.errors[side.name][outcome] += 1
        return outcome

    async def teammate(self, record: AskRecord, ref: MessageRef) -> None:
        side = self.sides[record.destination.platform]
        shape = record.context.get("shape")
        if shape == "restricted":
            await self.click(side, record, ref, "intern")
            winner = "boss"
        elif shape == "race":
            await asyncio.gather(
                self.click(side, record, ref, "left", looking=False),
                self.click(side, record, ref, "right", looking=False),
            )
            winner = "left"
        else:
            winner = "alice"
        if shape != "race":
            await self.click(side, record, ref, winner)
        deadline = time.monotonic() + 60
        while record.id not in self.returned and time.monotonic() < deadline:
            try:
                await asyncio.wait_for(self._returned(record.id), self.patience)
            except TimeoutError:
                if not side.open(ref):
                    continue  # the message shows the answer: nothing to click any more
                self.errors[side.name]["no answer shown within patience (clicked again)"] += 1
                await self.click(side, record, ref, winner)

    async def _returned(self, ask_id: str) -> None:
        await self.resumed[ask_id].wait()

    async def teammates(self) -> None:
        running: set[asyncio.Task[None]] = set()
        for _ in range(self.asks):
            record, ref = await self.posted.get()
            self.ask_ids.append((record.destination.platform, record.id))
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
            if not restarted_redis and time.monotonic() - started >= redis_restart_at:
                restarted_redis = True  # while the victim is down: both faults at once
                await asyncio.to_thread(self.redis.restart)
                self.errors[""]["redis restarted (planned)"] += 1
            await victim.start()


class ResumeTimingStore(RedisStore):
    """The store, noting when each waiting call got its answer back (click-to-resume)."""

    soak: Soak | None = None

    async def confirm(self, ask_id: str) -> None:
        if self.soak is not None:
            self.soak.returned[ask_id] = time.monotonic()
            self.soak.resumed[ask_id].set()
        await super().confirm(ask_id)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    names = [n.strip() for n in args.platforms.split(",") if n.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        redis = RedisServer(Path(tmp), extra=["--appendonly", "yes", "--appendfsync", "always"])
        redis.start()
        prefix = f"soak{uuid.uuid4().hex[:6]}"
        env = cli_env(REDIS_URL=redis.url, ASK_BRIDGE_KEY_PREFIX=prefix, LOG_LEVEL="WARNING")
        sides: dict[str, Side] = {}
        fakes: list[FakeSlack | FakeDiscord] = []
        if "slack" in names:
            slack = await FakeSlack().start()
            fakes.append(slack)
            sides["slack"] = SlackSide(slack)
            env.update(
                SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
                SLACK_API_URL=slack.url,
            )  # fmt: skip
        if "discord" in names:
            discord = await FakeDiscord(users={u: u for u in DiscordSide.users.values()}).start()
            fakes.append(discord)
            sides["discord"] = DiscordSide(discord)
            env.update(
                DISCORD_TOKEN=DISCORD_TOKEN, DISCORD_API_URL=discord.url,
                DISCORD_GATEWAY_URL=discord.gateway_url,
            )  # fmt: skip
        if not sides:
            raise SystemExit("--platforms: name slack, discord or both")
        replicas: list[Serve] = []
        store = ResumeTimingStore.from_url(redis.url, prefix=prefix, max_connections=32)
        assert isinstance(store, ResumeTimingStore)
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
        try:
            for _ in range(2):
                replicas.append(await Serve(env).start())
            return await soak_run(args, sides, replicas, redis, store, session)
        finally:  # nothing left running, whatever happened
            await session.close()
            for replica in replicas:
                await replica.stop()
            await store.aclose()
            if "discord" in sides:
                assert isinstance(sides["discord"], DiscordSide)
                await sides["discord"].platform.rest.aclose()
            for fake in fakes:
                await fake.stop()
            redis.stop()


async def soak_run(
    args: argparse.Namespace,
    sides: dict[str, Side],
    replicas: list[Serve],
    redis: RedisServer,
    store: ResumeTimingStore,
    session: aiohttp.ClientSession,
) -> dict[str, Any]:
    soak = Soak(
        args.asks, args.rate, args.kill_every, args.in_flight, args.patience,
        sides, replicas, redis, store, session,
    )  # fmt: skip
    for side in sides.values():
        side.soak = soak
    store.soak = soak
    soak._slots = asyncio.Semaphore(args.in_flight)
    posters: dict[str, Poster] = {
        name: TellingPoster(side.poster(), soak.posted) for name, side in sides.items()
    }
    started = time.monotonic()
    restart_at = args.redis_restart_at
    if restart_at is None:  # half-way through the expected run
        restart_at = args.asks * 1.6 / args.rate / 2
    chaos = asyncio.create_task(soak.chaos(redis_restart_at=restart_at))
    try:
        clicking = asyncio.create_task(soak.teammates())
        await asyncio.gather(*(soak.agent(n, posters) for n in range(args.asks)))
        await clicking
    finally:
        chaos.cancel()
        await asyncio.gather(chaos, return_exceptions=True)
    return await soak_report(soak, time.monotonic() - started)


async def soak_report(soak: Soak, elapsed: float) -> dict[str, Any]:
    """The figures, per platform."""
    per: dict[str, dict[str, Any]] = {}
    for name, side in soak.sides.items():
        ids = [ask_id for platform, ask_id in soak.ask_ids if platform == name]
        answered = lost = fed = double = 0
        resumes: list[float] = []
        for ask_id in ids:
            record = await soak.store.get(ask_id)
            history = await soak.store.history(ask_id)
            double += sum(1 for e in history if e.kind == "answered") > 1
            if record is not None and record.answered_by is not None:
                answered += 1
                if ask_id not in soak.returned:
                    if any(e.kind == "handed_to_feed" for e in history):
                        fed += 1
                    else:
                        lost += 1
                    continue
                clicked = soak.sent.get((ask_id, record.answered_by.user_id))
                if clicked is not None:
                    resumes.append(soak.returned[ask_id] - clicked)
        per[name] = {
            "asks": len(ids),
            "answered": answered,
            "lost": lost,
            "handed_to_feed_instead": fed,
            "answered_twice": double,
            "refused_with_explanation": dict(side.refusals()),
            "click_to_resume_ms": {
                "p50": round(pct(resumes, 50) * 1000, 1),
                "p99": round(pct(resumes, 99) * 1000, 1),
            },
            "errors": dict(soak.errors[name]),
            "agents": dict(soak.outcomes[name]),
        }
    return {
        "asks": len(soak.ask_ids),
        "seconds": round(elapsed, 1),
        "replica_kills": soak.kills,
        "faults": dict(soak.errors[""]),
        "platforms": per,
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
    parser.add_argument(
        "--platforms",
        default="slack,discord",
        help="comma-separated: slack, discord (default both)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report))
        return
    for key, value in report.items():
        if key != "platforms":
            print(f"{key:>26}: {value}")
    for name, figures in report["platforms"].items():
        print(f"-- {name}")
        for key, value in figures.items():
            print(f"{key:>26}: {value}")


if __name__ == "__main__":
    main()
