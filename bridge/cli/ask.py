"""``ask-bridge ask``: post one question set, wait for the answer, print the tool result.

Exit status: 0 answered (answers JSON on stdout); 2 the question set was rejected (the
model-facing message on stderr); 3 not answered within ``--wait`` (the deferred result, with the
ask id, on stdout -- the answer will reach the answers feed); 4 the ask expired or was cancelled;
1 anything else, including a post the platform refused (its error on stderr). With ``REDIS_URL``
set, a ``serve`` process handles the clicks; without it this process handles them itself (Slack:
over Socket Mode) and the ask lives only as long as the process: nothing could take a deferred
answer, so ``--mode defer`` is refused and a ``--wait`` that runs out closes the ask as expired,
re-renders it without controls and exits 4.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from bridge.ask import AskRecord, AskStatus, Destination, MessageRef
from bridge.errors import ToolRejected
from bridge.platform import PlatformUnavailable
from bridge.poster import Poster

ANSWERED, FAILED, REJECTED, DEFERRED, ENDED = 0, 1, 2, 3, 4
STANDALONE_DEFER = (
    "ask-bridge ask: --mode defer needs REDIS_URL: without a shared store the ask lives only "
    "as long as this process, so nothing could take the answer later. Set REDIS_URL and run "
    "`ask-bridge serve`, or use --mode block."
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ask",
        help="post a question set and print the answers as the tool result",
        description="Post a question set and print the answers as the tool result. Exit status: "
        "0 answered; 1 any other failure (e.g. the post was refused); 2 the question set was "
        "rejected; 3 not answered within --wait (deferred, ask id printed); 4 expired or "
        "cancelled. Without REDIS_URL this process handles the clicks itself (Slack: Socket "
        "Mode), --mode defer is refused, and an unanswered --wait closes the ask (exit 4).",
    )
    p.add_argument("--platform", default="slack", help="chat platform (default: slack)")
    p.add_argument("--channel", help="channel id to post in (Slack: C…)")
    p.add_argument("--thread", help="thread to post in (Slack: the parent message ts)")
    p.add_argument("--user", help="user id to ask in a direct message (Slack: U…)")
    p.add_argument(
        "--answerer",
        action="append",
        default=[],
        metavar="ID",
        help="who may answer: a user or user-group id; repeat for several (default: anyone)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=600.0,
        help="seconds to wait (default 600); then exit 3 with the ask id, the answer going to "
        "the answers feed -- or, without REDIS_URL, close the ask as expired and exit 4",
    )
    p.add_argument(
        "--expires",
        type=float,
        default=86400.0,
        help="seconds the ask takes answers (default 1 day)",
    )
    p.add_argument(
        "--mode",
        choices=("block", "defer"),
        default="block",
        help="block: wait for the answer (default); defer: exit 3 at once, the answer going to "
        "the answers feed (needs REDIS_URL and a running `serve`)",
    )
    p.add_argument("--asker", default="ask-bridge", help="name shown as who asks")
    p.add_argument("file", metavar="FILE|-", help='{"questions": [...]} or a bare array')
    p.set_defaults(func=run)


def read_questions(source: str) -> object:
    """The ``questions`` value of the tool arguments in ``source`` (a file, or ``-`` for stdin)."""
    text = sys.stdin.read() if source == "-" else Path(source).read_bytes()
    return questions_from_text(text)


def questions_from_text(text: str | bytes) -> object:
    """The ``questions`` value from JSON text holding the tool's arguments object
    (``{"questions": [...]}``) or a bare questions array, unwrapped exactly as a provider's
    arguments are (:func:`~bridge.validation.questions_from_arguments`): malformed or too deeply
    nested JSON, unknown fields and the rest are :class:`ToolRejected` with the model's words."""
    from bridge.validation import decode_arguments, questions_from_arguments

    if not text.strip():
        return questions_from_arguments(text)  # rejected: empty
    data = decode_arguments(text)
    arguments: Any = {"questions": data} if isinstance(data, list) else data
    return questions_from_arguments(arguments)  # rejects anything but an object


def run(args: argparse.Namespace) -> int:
    from bridge.validation import validate_questions

    try:
        questions = validate_questions(read_questions(args.file))
    except OSError as exc:
        print(f"ask-bridge ask: {exc}", file=sys.stderr)
        return FAILED
    except ToolRejected as exc:
        print(exc.message, file=sys.stderr)
        return REJECTED
    if not (args.channel or args.user):
        print("ask-bridge ask: give --channel or --user", file=sys.stderr)
        return FAILED
    try:
        return asyncio.run(_ask(args, questions))
    except PlatformUnavailable as exc:
        print(f"ask-bridge ask: {exc}", file=sys.stderr)
        return FAILED


class _Remember(Poster):
    """Passes through to the platform's poster, remembering the ask so its end can be judged."""

    def __init__(self, inner: Poster) -> None:
        self.inner = inner
        self.platform = inner.platform
        self.record: AskRecord | None = None

    async def post(self, record: AskRecord) -> MessageRef:
        self.record = record
        return await self.inner.post(record)

    async def update(self, record: AskRecord) -> None:
        await self.inner.update(record)


async def _ask(args: argparse.Namespace, questions: Any) -> int:
    from bridge.aio import stop
    from bridge.handler import AskPolicy, ChatHandler
    from bridge.platform import check_standalone, resolve_platform, start_serving
    from bridge.settings import EngineSettings, open_store
    from bridge.tool import tools_interactive

    platform = resolve_platform(args.platform)
    settings = EngineSettings()
    standalone = not settings.redis_url
    if standalone:
        if args.mode == "defer":
            print(STANDALONE_DEFER, file=sys.stderr)
            return FAILED
        check_standalone(platform)
    poster = _Remember(platform.poster())
    store = open_store(settings)
    serving: asyncio.Task[None] | None = None
    try:
        if standalone:
            serving = await start_serving(platform, store)
        wait = args.wait if args.mode == "block" else 0.0
        # Standalone, the ask dies with this process: deferring would leave a live message whose
        # ask id points at nothing, so a wait that runs out closes it (re-rendered, exit 4).
        close_on_timeout = standalone or (args.mode == "block" and wait >= args.expires)
        policy = AskPolicy(
            wait=min(wait, args.expires),
            expires=args.expires,
            on_timeout="error" if close_on_timeout else "defer",
            mode=args.mode,
            answerers=tuple(args.answerer),
        )
        destination = Destination(
            platform=platform.name, channel=args.channel, thread=args.thread, user=args.user
        )
        handler = ChatHandler(poster, store, destination, policy)
        (tool,) = tools_interactive(callback=handler, context={"asker": args.asker})
        return await _outcome(tool, questions, poster, store)
    finally:
        if serving is not None:
            await stop(serving)  # it only ever served this ask: how it ended changes nothing
        await store.aclose()


async def _outcome(tool: Any, questions: Any, poster: _Remember, store: Any) -> int:
    me = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        if me is not None:
            loop.add_signal_handler(sig, me.cancel)
    try:
        outcome = await tool.ainvoke(questions)
    except asyncio.CancelledError:
        print("ask-bridge ask: cancelled; the question set was closed", file=sys.stderr)
        return ENDED
    except ToolRejected as exc:
        print(exc.message, file=sys.stderr)
        record = await store.get(poster.record.id) if poster.record is not None else None
        # no message: the post itself failed (the handler closes such an ask as cancelled)
        if record is None or record.message is None:
            return FAILED
        ended = record.status in (AskStatus.EXPIRED, AskStatus.CANCELLED)
        return ENDED if ended else FAILED
    if outcome.deferred is not None:
        print(outcome.host_text, flush=True)
        return DEFERRED
    print(outcome.text, flush=True)
    return ANSWERED
