"""``ask-bridge demo``: a scripted agent asks a sample question set, and the result is printed.

The ask goes through the real handler chain -- a configured global callback, else the terminal
prompt -- exactly as an agent's tool call would. Without a terminal, ``--answers`` scripts the
person's answers so the demo (and its JSON) still runs in CI or a pipe. The narration goes to
stderr and the tool result to stdout, so ``ask-bridge demo --answers ... | jq`` works.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

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
