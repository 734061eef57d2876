"""The path users call: full ask cycles through ``AskUserTool`` and every framework adapter's
entry point beside the handler path, and what checking a tool call's arguments costs, each beside
the code issue 11 found in the same run.

Run: ``.venv/bin/python -m bench.tool_path [SECONDS] [--before REV|DIR|none] [--entries A,B,...]
[--rounds N]``.

Cycles (``tool_child.py cycles``): one process, 64 calls in flight, each a full cycle of a
4-question ask (create, post to a poster that shows nothing, record the message, wait; a second
store submits the answers once the message is recorded; the wake-up; the call returns), through
one entry point: ``handler`` (the ``ChatHandler`` called with validated questions: the baseline
the tool path is held to, within 20%), ``ainvoke`` and ``acall`` (the model's decoded JSON), and
each framework adapter as its framework calls it: ``providers`` (``arun_tool_call`` with the
arguments object), ``chatlas`` (the async tool's function), ``pydantic-ai`` (the tool's
function), ``openai-agents`` (as the SDK calls a tool with a ``needs_approval`` policy: the
decoded arguments to the policy, which asks, then ``on_invoke_tool`` with the text), ``langchain``
(``_arun``), ``claude`` (``can_use_tool`` deciding ``AskUserQuestion``). Each run is a fresh
process, what its imports and setup made frozen out of the garbage collector's sight before the
cycles start (``gc.freeze``: otherwise a framework's imports, 190,000 objects for the OpenAI
Agents SDK, were scanned by the full collections a short run happens to catch); the entry points
alternate round by round, so a machine that slows down slows all alike; the figure is the median
over :data:`ROUNDS` runs (``--rounds N``: N). ``--before REV`` (default ``1a9ff19``, run as it
was installed then: without hiredis does not matter here, both sides use this environment) runs
the handler, ``ainvoke`` and ``acall`` over that revision too, each run beside this checkout's,
either first in turn; ``--before DIR``, a directory holding another tree's ``bridge`` (e.g.
``git archive HEAD | tar -x -C DIR``, or a worktree), runs every entry point over it.

Argument checking (``tool_child.py check``): microseconds of CPU per call to unwrap the arguments
object and check and build the question set (``questions_from_arguments`` then
``validate_questions``), the least disturbed of five batches, for: the benches' realistic
4-question call (``question_texts.four_question_dicts``), distinct realistic prose
(``engine_common.prose_questions``), the contract's maximum sizes in ASCII, and the maximum in
3-byte UTF-8 the byte bounds allow -- over this checkout and the revision ``--before`` names.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.engine_common import (
    ISSUE_REV,
    before_argument,
    extract_revision,
    maximal_questions,
    prose_questions,
    run_child,
    server_url,
)
from bench.question_texts import four_question_dicts

CHILD = Path(__file__).resolve().parent / "tool_child.py"
ROUNDS = 3
ENTRIES = (
    "handler",
    "ainvoke",
    "acall",
    "providers",
    "chatlas",
    "pydantic-ai",
    "openai-agents",
    "langchain",
    "claude",
)
BEFORE_ENTRIES = ("handler", "ainvoke", "acall")
"""What an earlier revision runs: its adapters' entry points differ (a tree given as a directory
runs them all)."""
CHECK_ROUNDS = 500
TARGETS = {"realistic": 50.0, "maximal ASCII": 150.0, "maximal 3-byte UTF-8": 150.0}


def question_sets() -> dict[str, list[dict[str, Any]]]:
    return {
        "realistic": four_question_dicts(),
        "realistic prose": prose_questions(4, 1),
        "maximal ASCII": maximal_questions().model_dump(mode="json")["questions"],
        "maximal 3-byte UTF-8": maximal_questions("\u20ac", in_bytes=True).model_dump(mode="json")[
            "questions"
        ],
    }


def rate(runs: list[dict[str, Any]]) -> float:
    """Median cycles per client CPU-second over ``runs``."""
    return statistics.median(r["cycles"] / r["cpu"] for r in runs)


def main() -> None:
    args = sys.argv[1:]
    before = before_argument(args, ISSUE_REV)
    entries: tuple[str, ...] = ENTRIES
    if "--entries" in args:
        at = args.index("--entries")
        entries = tuple(args[at + 1].split(","))
        del args[at : at + 2]
        if "handler" not in entries:
            entries = ("handler", *entries)
    rounds = ROUNDS
    if "--rounds" in args:
        at = args.index("--rounds")
        rounds = int(args[at + 1])
        del args[at : at + 2]
    seconds = float(args[0]) if args else 3.0
    with tempfile.TemporaryDirectory() as tmp, server_url() as url:
        tree = Path(before) if before and Path(before, "bridge").is_dir() else None
        old = tree or (extract_revision(before, Path(tmp)) if before else None)
        compared = entries if tree else BEFORE_ENTRIES
        sets = Path(tmp) / "sets.json"
        sets.write_text(json.dumps(question_sets()))
        checks_now = [run_child(CHILD, "check", str(sets), str(CHECK_ROUNDS)) for _ in range(2)]
        checks_then = (
            [run_child(CHILD, "check", str(sets), str(CHECK_ROUNDS), code=old) for _ in range(2)]
            if old is not None
            else []
        )
        now: dict[str, list[dict[str, Any]]] = {e: [] for e in entries}
        then: dict[str, list[dict[str, Any]]] = {e: [] for e in compared if e in entries}
        for round_ in range(rounds):
            for entry in entries:
                sides = [(now, None), (then, old)] if old is not None else [(now, None)]
                for runs, code in sides[:: -1 if round_ % 2 else 1]:  # each side first in turn
                    if entry in runs:
                        runs[entry].append(
                            run_child(CHILD, "cycles", url, str(seconds), entry, code=code)
                        )
    print(
        f"argument checking (unwrap the arguments object, check, build the models), us of CPU "
        f"per call, the least of 5 batches of {CHECK_ROUNDS}, 2 processes each:"
    )
    for name in question_sets():
        mine = min(c[name] for c in checks_now)
        line = f"  {name}: {mine:,.1f} us"
        if checks_then:
            theirs = min(c[name] for c in checks_then)
            line += f" ({before}: {theirs:,.1f} us, {theirs / mine:.1f}x faster now)"
        if name in TARGETS:
            met = "met" if mine <= TARGETS[name] else "NOT met"
            line += f"; target <= {TARGETS[name]:g} us -> {met}"
        print(line)
    base = rate(now["handler"])
    print(
        f"full cycles per client CPU-second, 64 in flight, 4-question asks, {seconds:g} s a run, "
        f"median of {rounds} runs (fresh processes, entry points alternating):"
    )
    then_base = rate(then["handler"]) if then.get("handler") else None
    for entry in entries:
        mine = rate(now[entry])
        runs = ", ".join(f"{r['cycles'] / r['cpu']:,.0f}" for r in now[entry])
        line = f"  {entry}: {mine:,.0f} (runs: {runs}); {mine / base:.2f}x the handler path"
        if entry != "handler":
            line += f" (target >= 0.80x -> {'met' if mine >= 0.8 * base else 'NOT met'})"
        if then.get(entry):
            theirs = rate(then[entry])
            line += f"; {before}: {theirs:,.0f}"
            if then_base is not None and entry != "handler":
                line += f" ({theirs / then_base:.2f}x its handler path)"
            line += f", now {mine / theirs:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
