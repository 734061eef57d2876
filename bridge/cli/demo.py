"""``ask-bridge demo``: a scripted agent asks a sample question set, and the result is printed.

The ask goes through the real handler chain -- a configured global callback, else the terminal
prompt -- exactly as an agent's tool call would. Without a terminal, ``--answers`` scripts the
person's answers so the demo (and its JSON) still runs in CI or a pipe. The narration goes to
stderr and the tool result to stdout, so ``ask-bridge demo --answers ... | jq`` works.

``--web`` asks through the web platform instead, embedded as ``ask --platform web`` embeds it
without ``REDIS_URL`` (:func:`bridge.cli.ask.embedded`): this process serves the page on
127.0.0.1, prints the link, opens the system browser on it when there is one (Python's
``webbrowser``, which honours ``BROWSER``; ``--no-browser`` only prints), and waits for the
answer. It never uses a shared store: the demo's ask is this process's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridge.cli.args import port

if TYPE_CHECKING:
    from bridge.result import ToolOutcome

YOU = "you"
"""Whom ``--web`` asks: the name its link is made for, shown on the page."""
Opener = Callable[[str], bool]
"""Opens a URL in a browser; ``False`` when there is none (``webbrowser.open``)."""

SAMPLE_QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Who are these release notes for?",
        "header": "Audience",
        "options": [
            {"label": "Users", "description": "Plain language: what changed for them"},
            {"label": "Developers", "description": "API changes, migrations and deprecations"},
            {"label": "Both", "description": "A short summary, then a technical section"},
        ],
    },
    {
        "question": "Which sections should I include?",
        "header": "Sections",
        "multiSelect": True,
        "options": [
            {"label": "Highlights", "description": "The three changes that matter most"},
            {"label": "Breaking", "description": "Anything that needs action on upgrade"},
            {"label": "Fixes", "description": "Bugs fixed since the last release"},
            {"label": "Credits", "description": "Thank contributors by name"},
        ],
    },
    {
        "question": "How long should they be?",
        "header": "Length",
        "options": [
            {"label": "Short", "description": "A few lines, fit for a chat message"},
            {"label": "Full", "description": "A page, fit for the changelog"},
        ],
    },
]

EXAMPLE_ANSWERS = '{"Audience": "Users", "Sections": ["Highlights", "Fixes"], "Length": "Short"}'


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "demo",
        help="ask a sample question set through the handler chain and print the result",
        description=(
            "A scripted agent calls the ask_user tool with a sample question set. In a terminal "
            "you answer at the prompt; elsewhere pass --answers. The tool result (what the model "
            "reads) is printed on stdout."
        ),
        epilog=f"example without a terminal: ask-bridge demo --answers '{EXAMPLE_ANSWERS}'",
    )
    parser.add_argument(
        "--answers",
        metavar="JSON",
        help="script the person's answers: a JSON object mapping each question's text or header "
        "to an option label, a list of labels, or free text",
    )
    parser.add_argument(
        "--questions",
        metavar="JSON",
        help="ask this question set instead of the sample: the tool's arguments as JSON text "
        '({"questions": [...]} or the bare array), or @FILE to read them from a file',
    )
    parser.add_argument(
        "--web",
        action="store_true",
        help="answer in the browser: serve the page on 127.0.0.1, print its link and open the "
        "system browser on it (the link lives as long as the ask)",
    )
    parser.add_argument(
        "--port",
        type=port,
        default=0,
        help="--web: the port on 127.0.0.1 to serve the page on (default: a free one)",
    )
    parser.add_argument(
        "--no-browser",
        action="store_true",
        help="--web: print the link only, open no browser",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="print the tool result exactly as the model reads it (no indentation)",
    )
    parser.set_defaults(func=run)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _read(value: str, what: str) -> str:
    """``value`` itself, or the text of the file it names as ``@FILE``."""
    if not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise SystemExit(f"ask-bridge demo: cannot read {what} file: {exc}") from None


def _load_json(value: str, what: str) -> Any:
    try:
        return json.loads(_read(value, what))
    except (ValueError, RecursionError) as exc:
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else exc
        raise SystemExit(f"ask-bridge demo: {what} is not valid JSON: {reason}") from None


def _scripted(answers: Any) -> Any:
    """A handler answering from ``--answers``; keys may be question texts or headers."""
    if not isinstance(answers, dict):
        raise SystemExit("ask-bridge demo: --answers must be a JSON object")

    def callback(questions: list[Any], context: dict[str, Any]) -> dict[str, Any]:
        by_header = {q.header: q.question for q in questions}
        return {str(by_header.get(key, key)): value for key, value in answers.items()}

    return callback


def _summary(result: dict[str, Any]) -> str:
    headers = {q["question"]: q["header"] for q in result["questions"]}
    parts = []
    for answer in result["answers"]:
        chosen = [*answer["selected"], *([answer["other_text"]] if answer["other_text"] else [])]
        parts.append(f"{headers[answer['question']]}: {', '.join(chosen) or '(no answer)'}")
    return "; ".join(parts)


def run(args: argparse.Namespace) -> int:
    from bridge import ToolRejected, tool_ask_user, tools_interactive
    from bridge.cli.ask import questions_from_text
    from bridge.cli.failures import FAILED
    from bridge.tool import NO_HANDLER

    if args.web and args.answers is not None:
        _say("ask-bridge demo: --web is answered in the browser, --answers without it: not both")
        return FAILED
    tool = tool_ask_user
    if args.answers is not None:
        (tool,) = tools_interactive(callback=_scripted(_load_json(args.answers, "--answers")))

    _say("agent: Before I go on I need a few decisions from you.")
    try:
        questions = (
            SAMPLE_QUESTIONS
            if args.questions is None
            else questions_from_text(_read(args.questions, "--questions"))
        )
        count = len(questions) if isinstance(questions, list) else "some"
        _say(f"agent: calling ask_user with {count} question(s)...")
        if args.web:
            opener = None if args.no_browser else webbrowser.open
            outcome = asyncio.run(on_web(questions, port=args.port, opener=opener))
            if outcome is None:
                return 130  # a signal, as KeyboardInterrupt below
        else:
            outcome = tool.invoke(questions)
    except ToolRejected as exc:
        _say(f"\nThe tool call failed; the model would read this error:\n\n{exc.message}\n")
        if exc.message == NO_HANDLER:
            _say(
                "No terminal to ask on: run `ask-bridge demo` in a terminal, or script the "
                f"answers:\n  ask-bridge demo --answers '{EXAMPLE_ANSWERS}'"
            )
            return FAILED  # nothing to ask on: the environment's failure, as in every command
        return 2  # the question set was rejected, as in `ask`
    except KeyboardInterrupt:
        _say("\ninterrupted")
        return 130

    indent = None if args.raw else 2
    if outcome.deferred is not None:  # a configured global handler deferred
        _say("\nagent: The questions are with the person; I will end my turn and wait.")
        print(json.dumps(outcome.payload, indent=indent, ensure_ascii=False))
        return 0
    result = outcome.payload
    _say(f"\nagent: Thanks. Going with {_summary(result)}.\n\nTool result (what the model reads):")
    print(outcome.text if args.raw else json.dumps(result, indent=indent, ensure_ascii=False))
    return 0


async def on_web(questions: Any, *, port: int, opener: Opener | None) -> ToolOutcome | None:
    """Ask ``questions`` through the web platform served here on 127.0.0.1:``port``; tell the
    link (and hand it to ``opener``) once the ask exists. ``None``: stopped by a signal (the
    ask closed as cancelled)."""
    from bridge.asking import ChatHandler
    from bridge.cli.ask import WEB, embedded, pages_links
    from bridge.cli.link import AnswererLinks, listening
    from bridge.followups import Destination
    from bridge.platform import resolve_platform
    from bridge.runtime import Runtime, stop_on_signals
    from bridge.settings import EngineSettings
    from bridge.tool import tools_interactive

    runtime = Runtime(EngineSettings().model_copy(update={"redis_url": None}))
    platform = embedded(resolve_platform(WEB))
    policy = runtime.policy(answerers=[YOU])
    handler = ChatHandler(platform.poster(), runtime.store, Destination(platform=WEB), policy)
    (tool,) = tools_interactive(callback=handler, context={"asker": "the demo agent"})

    async def show(ask_id: str, urls: dict[str, str]) -> None:
        url = urls[YOU]
        _say(f"agent: answer in your browser: {url}")
        if opener is None:
            return
        try:
            opened = await asyncio.to_thread(opener, url)
        except webbrowser.Error as exc:
            opened = False
            _say(f"ask-bridge demo: the browser did not start ({exc})")
        if not opened:
            _say("agent: (no browser to open here: open the link above yourself)")

    async with stop_on_signals():
        try:
            async with runtime.own_clicks(platform, port=port) as receiving:
                links = pages_links(platform, receiving).lasting(policy.expires)
                # the links go to ``show``: the printer's own line speaks as ``ask``
                printer = AnswererLinks(links, [YOU], io.StringIO(), announce=show)
                try:
                    with listening(printer):
                        outcome = await receiving.guard(tool.ainvoke(questions))
                    await printer.settled()
                finally:
                    await printer.aclose()
            return outcome
        finally:
            await runtime.aclose()
    _say("\ninterrupted; the question set was closed")
    return None
