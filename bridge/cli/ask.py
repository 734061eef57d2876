"""``ask-bridge ask``: post one question set, wait for the answer, print the tool result.

Exit status: 0 answered (answers JSON on stdout); 2 the question set was rejected (the
model-facing message on stderr); 3 not answered within ``--wait`` (the deferred result, with the
ask id, on stdout -- the answer will reach the answers feed); 4 the ask expired or was cancelled;
1 anything else: a configuration or infrastructure failure (bad setting, token refused, Redis or
the platform unreachable -- checked before anything is posted) or a post the platform refused,
in one line on stderr. With ``REDIS_URL``
set, a ``serve`` process handles the clicks; without it this process handles them itself (Slack:
over Socket Mode) and the ask lives only as long as the process: nothing could take a deferred
answer, so ``--mode defer`` is refused and a ``--wait`` that runs out closes the ask as expired,
re-renders it without controls and exits 4.

``--platform web`` asks people on no chat platform, each named by ``--answerer NAME``: as soon as
the ask exists, each one's own link to answer in the browser is printed on stderr, one line per
person (``--json``: one JSON line, ``{"ask_id": ..., "links": {NAME: URL}}``); the result on
stdout is the same as on any platform (:mod:`bridge.cli.link`). Without ``REDIS_URL`` this
process serves the pages itself, on 127.0.0.1 (``--port``, default a free one), signed with
``ASK_BRIDGE_WEB_SECRET`` or else a secret only it knows (:func:`embedded`). These links live
as long as the ask, not ``ASK_BRIDGE_WEB_LINK_TTL`` (the lifetime of links made on demand): an
ask may wait a day, and whoever got the link has no way to ask for a fresh one.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridge.cli.args import port
from bridge.cli.failures import ANSWERED, DEFERRED, ENDED, FAILED, REJECTED
from bridge.errors import InvalidQuestions, NotAnswered, ToolRejected
from bridge.followups import Destination
from bridge.text import one_line

if TYPE_CHECKING:
    from bridge.cli.link import Announce
    from bridge.platform import Platform
    from bridge.result import ToolOutcome
    from bridge.runtime import Serving
    from bridge.store.base import Store
    from bridge.web_links import Links, PagesPlatform

WEB = "web"
"""The web platform's name in the registry: asks people on no chat platform (see the module)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ask",
        help="post a question set and print the answers as the tool result",
        description="Post a question set and print the answers as the tool result. Exit status: "
        "0 answered; 1 a configuration or infrastructure failure (bad setting, token refused, "
        "Redis or the platform unreachable, all checked before posting) or a refused post; 2 "
        "the question set was "
        "rejected; 3 not answered within --wait (deferred, ask id printed); 4 expired or "
        "cancelled. Without REDIS_URL this process handles the clicks itself (Slack: Socket "
        "Mode; Discord: the gateway; web: it serves the pages on 127.0.0.1), --mode defer is "
        "refused, and an unanswered --wait closes the ask (exit 4). On a terminal, a progress "
        "line shows where the question waits. The links --platform web prints live as long as "
        "the ask (--expires), not ASK_BRIDGE_WEB_LINK_TTL: nobody is there to make a fresh one.",
    )
    p.add_argument(
        "--platform",
        default="slack",
        help="chat platform (default: slack), or web: the browser, for the people named by "
        "--answerer NAME, whose links are printed on stderr",
    )
    p.add_argument(
        "--port",
        type=port,
        help="--platform web without REDIS_URL: the port on 127.0.0.1 to serve the pages on "
        "(default: a free one)",
    )
    p.add_argument(
        "--channel",
        help="channel id to post in (Slack: C…; Discord: a number; web: optional, a name its "
        "inbox filters by)",
    )
    p.add_argument(
        "--thread", help="thread to post in (Slack: the parent message ts; Discord: its id)"
    )
    p.add_argument(
        "--user", help="user id to ask in a direct message (Slack: U…; Discord: a number)"
    )
    p.add_argument(
        "--answerer",
        action="append",
        default=[],
        metavar="ID",
        help="who may answer: a user or user-group id (Discord: a user id, or role:ID for a "
        "role); repeat for several (default: anyone). Taken in the platform's own form (Slack "
        "ids in upper case), each person once; an id that cannot be one is refused before "
        "anything is posted",
    )
    p.add_argument(
        "--required",
        type=int,
        default=1,
        metavar="K",
        help="people who must agree: the ask is answered when K distinct answerers submitted the "
        "same choices (typed answers are shown but never count); 1 to 50 (default 1: the first "
        "answer)",
    )
    p.add_argument(
        "--answered-by",
        action="store_true",
        help="add who answered (answered_by: user id, name, time) to the printed result",
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
    p.add_argument(
        "--notify",
        action="append",
        default=[],
        metavar="URL",
        help="also POST the outcome to this webhook URL when the ask ends (sent by `serve`); "
        "it must be under a prefix of ASK_BRIDGE_WEBHOOK_DESTINATIONS, the operator's "
        "allow-list, whose secret signs it (else refused, nothing posted); repeat for several, "
        "up to 5",
    )
    p.add_argument(
        "--remind-after",
        type=float,
        metavar="S",
        help="while nobody answers, reply in the message's thread every S seconds mentioning "
        "who may answer (anyone: the channel's people), at most --remind-times times; fired by "
        "the sweeper (`serve`, or this process without REDIS_URL)",
    )
    p.add_argument(
        "--remind-times",
        type=int,
        metavar="N",
        help="reminders at most (default 3; needs --remind-after)",
    )
    p.add_argument(
        "--escalate-after",
        type=float,
        metavar="S",
        help="S seconds after asking, post the same question set to --escalate-to as well; "
        "either message answers it",
    )
    p.add_argument(
        "--escalate-to",
        metavar="DEST",
        help="where to escalate: a channel id, user:ID for a person's DM, optionally after "
        "another platform and a colon (discord:123456, slack:user:U0BOSS)",
    )
    p.add_argument("--asker", default="ask-bridge", help="name shown as who asks")
    p.add_argument(
        "--json",
        action="store_true",
        help="--platform web: print the answerers' links as one JSON line on stderr, "
        '{"ask_id": ..., "links": {"NAME": "URL"}}',
    )
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
    from bridge.validation import (
        arguments_rejected,
        decode_arguments,
        json_type,
        questions_from_arguments,
    )

    if not text.strip():
        return questions_from_arguments(text)  # rejected: empty
    data = decode_arguments(text)
    if isinstance(data, list):
        return questions_from_arguments({"questions": data})
    if not isinstance(data, dict):  # valid JSON, but a string, a number...: named as what it is
        raise arguments_rejected(
            f"the input is valid JSON but a {json_type(data)}, not a question set "
            '({"questions": [...]} or a bare array of questions)'
        )
    return questions_from_arguments(data)


def run(args: argparse.Namespace) -> int:
    from bridge.validation import validate_questions

    try:
        questions = validate_questions(read_questions(args.file))
    except OSError as exc:
        print(f"ask-bridge ask: {exc}", file=sys.stderr)
        return FAILED
    except InvalidQuestions as exc:
        print(exc.message, file=sys.stderr)
        return REJECTED
    if args.platform == WEB:
        if not args.answerer:
            print(
                "ask-bridge ask: --platform web asks the people named by --answerer NAME "
                "(each gets a link to answer in the browser): give at least one",
                file=sys.stderr,
            )
            return FAILED
    elif not (args.channel or args.user):
        print("ask-bridge ask: give --channel or --user", file=sys.stderr)
        return FAILED
    return asyncio.run(_ask(args, questions))


async def _ask(args: argparse.Namespace, questions: Any) -> int:
    from bridge.asking import ChatHandler
    from bridge.cli.failures import on_terminal
    from bridge.cli.link import NO_LINKS, AnswererLinks, listening
    from bridge.cli.progress import MessageLinks, shown
    from bridge.platform import resolve_platform
    from bridge.runtime import Runtime, stop_on_signals
    from bridge.tool import tools_interactive
    from bridge.web_links import browser_links

    platform = resolve_platform(args.platform)
    runtime = Runtime()
    if platform.name == WEB and runtime.standalone:
        platform = embedded(platform)  # this process serves the pages itself
    elif args.port is not None:
        print(
            "ask-bridge ask: --port is where --platform web without REDIS_URL serves its pages; "
            "here nothing is served (with REDIS_URL, `serve` serves them)",
            file=sys.stderr,
        )
        return FAILED
    try:
        policy = runtime.policy(
            wait=args.wait,
            expires=args.expires,
            mode=args.mode,
            answerers=args.answerer,
            required=args.required,
            tell_model_who=args.answered_by,
            follow_ups=_follow_ups(args),
            notify=args.notify,
        )
        escalation = policy.follow_ups(platform.name)
    except ValueError as exc:
        print(f"ask-bridge ask: {one_line_error(exc)}", file=sys.stderr)
        return FAILED
    also = []  # standalone, this process also receives the clicks where it escalates
    if escalation is not None and escalation.escalate_to is not None:
        also.append(resolve_platform(escalation.escalate_to.platform))
    destination = Destination(
        platform=platform.name, channel=args.channel, thread=args.thread, user=args.user
    )
    try:  # what the command line alone can be judged by, first
        posters = {other.name: other.poster() for other in also}  # to show it ended there too
        handler = ChatHandler(
            platform.poster(), runtime.store, destination, policy, posters=posters
        )
    except ValueError as exc:  # an answerer id that is none, more people required than named,
        print(f"ask-bridge ask: {exc}", file=sys.stderr)  # an identity map that is no map
        return FAILED
    web_links = None  # with a shared store, links to the pages some `serve` serves
    if platform.name == WEB and not runtime.standalone:
        web_links = browser_links()
        if web_links is None:
            print(f"ask-bridge ask: --platform web: {NO_LINKS}", file=sys.stderr)
            return FAILED
    runtime.check(platform)  # before anything is posted
    for other in also:
        runtime.check(other)
    await runtime.ready_to_ask(platform, on_terminal("ask"))
    (tool,) = tools_interactive(callback=handler, context={"asker": args.asker})
    printer = None
    async with stop_on_signals():
        try:
            links = platform if isinstance(platform, MessageLinks) else None
            async with (
                runtime.own_clicks(platform, *also, port=args.port or 0) as receiving,
                shown(links=links),
            ):
                if platform.name == WEB:  # standalone: links to the pages served just now
                    made = web_links or pages_links(platform, receiving)
                    printer = AnswererLinks(
                        made.lasting(policy.expires),  # as long as the ask: see the module
                        handler.policy.answerers,
                        sys.stderr,
                        as_json=args.json,
                        announce=_announcer(runtime.store),
                    )
                with listening(printer):
                    status = await _outcome(receiving.guard(tool.ainvoke(questions)))
            if printer is not None:
                await printer.settled()
            return status
        finally:
            if printer is not None:
                await printer.aclose()
            await runtime.aclose()
    # a signal stopped it: the handler closed the ask as cancelled and re-rendered it
    print("ask-bridge ask: cancelled; the question set was closed", file=sys.stderr)
    return ENDED


def embedded(platform: Platform) -> PagesPlatform:
    """The web platform as a process without ``REDIS_URL`` serves it itself: on 127.0.0.1,
    with ``ASK_BRIDGE_WEB_SECRET`` if set, else with a secret only this process knows."""
    from bridge.platform import PlatformUnavailable
    from bridge.web_links import PagesPlatform

    if not isinstance(platform, PagesPlatform):
        raise PlatformUnavailable(f"platform {platform.name!r} cannot serve its own pages")
    return platform.embedded()


def pages_links(platform: Platform, receiving: Serving) -> Links:
    """Links to the pages ``receiving`` serves here for ``platform`` (:func:`embedded`):
    under ``ASK_BRIDGE_WEB_URL`` if set, else the address its server bound."""
    from bridge.web_links import PagesPlatform

    if not isinstance(platform, PagesPlatform) or receiving.server is None:
        raise AssertionError("pages_links() needs the embedded web platform, served")
    return platform.links(receiving.server.url())


def _announcer(store: Store) -> Announce | None:
    """What sends the opt-in ``created`` webhook event of a web ask (``None``: not opted in, by
    ``ASK_BRIDGE_WEBHOOK_CREATED``), to the ask's destinations (:mod:`bridge.webhooks`)."""
    from bridge.webhook_settings import WebhookSettings

    settings = WebhookSettings()
    if not settings.created:
        return None
    from bridge.webhooks import WebhookWorker

    worker = WebhookWorker(
        store,
        url=settings.url,
        secret=settings.secret or None,
        destinations=settings.destinations,
    )

    async def announce(ask_id: str, links: dict[str, str]) -> None:
        record = await store.get(ask_id)
        if record is not None:
            await worker.announce(record, links)

    return announce


def _follow_ups(args: argparse.Namespace) -> dict[str, Any]:
    """The policy's reminder and escalation fields given on the command line."""
    given = {
        "remind_after": args.remind_after,
        "escalate_after": args.escalate_after,
        "escalate_to": args.escalate_to,
    }
    found: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if args.remind_times is not None:
        if args.remind_after is None:
            raise ValueError("--remind-times needs --remind-after (how often to remind)")
        found["remind_times"] = args.remind_times
    return found


_FLAGS = {"answerers": "--answerer"}
"""Policy fields whose option is not named after them."""


def one_line_error(exc: ValueError) -> str:
    """A policy's validation error in one line, named by the option it came from."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return str(exc)
    parts = []
    for error in exc.errors():
        where = "/".join(
            _FLAGS.get(str(loc), f"--{str(loc).replace('_', '-')}") for loc in error["loc"]
        )
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


async def _outcome(asking: Awaitable[ToolOutcome]) -> int:
    """The exit status for how the ask ended, with its output."""
    try:
        outcome = await asking
    except (InvalidQuestions, NotAnswered) as exc:  # how the ask went: the model's words
        print(exc.message, file=sys.stderr)
        return REJECTED if isinstance(exc, InvalidQuestions) else ENDED
    except ToolRejected as exc:  # PostFailed and the rest: a failure, told as every one is
        print(f"ask-bridge ask: {one_line(exc.message)}", file=sys.stderr)
        return FAILED
    if outcome.deferred is not None:
        print(outcome.host_text, flush=True)
        return DEFERRED
    print(outcome.text, flush=True)
    return ANSWERED
