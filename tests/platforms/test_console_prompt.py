"""The terminal prompt, driven through a real pseudo-terminal (pexpect), and ``ask-bridge demo``.

Each test spawns a small Python script that calls ``tool_ask_user`` with no handler configured, so
the tool finds the ``console`` platform through its entry point because stdin and stdout are a
TTY -- the same path a developer's agent takes in a terminal. Nothing is patched in the child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from bridge import ToolRejected, validate_questions
from bridge.cli.demo import SAMPLE_QUESTIONS
from bridge.judging import MAX_TYPED, Picks
from bridge.replies import NEED_ANSWER, NO_SUCH_OPTION, ONE_ONLY, TOO_LONG
from platforms.console import ConsolePlatform, platform
from platforms.console.markup import clean
from platforms.console.prompt import parse
from tests.support.samples import FORMAT, FORMAT_QUESTION, SECTIONS

# The core pair, with a third format and descriptions worth reading at a terminal prompt.
TABLE = {"label": "Table", "description": "Rows and columns"}
QUESTIONS: list[dict[str, Any]] = [
    {**FORMAT_QUESTION, "options": [*FORMAT_QUESTION["options"], TABLE]},
    {
        "question": SECTIONS,
        "header": "Sections",
        "multiSelect": True,
        "options": [
            {"label": "Intro", "description": "Why this matters"},
            {"label": "Body", "description": "The details"},
            {"label": "Outro", "description": "What to do next"},
        ],
    },
]

SCRIPT = r"""
import asyncio, json, sys, threading
import builtins
from bridge import ToolRejected, set_ask_user_callback, tool_ask_user

mode, questions = sys.argv[1], json.loads(sys.argv[2])

def show(content):
    print("RESULT:" + json.dumps(content if isinstance(content, dict) else json.loads(content)))

async def ask_from_a_running_loop():
    loop = asyncio.get_running_loop()
    prompted = asyncio.Event()
    real_input = builtins.input
    def observed_input(prompt=""):  # lets the loop know a prompt is waiting; reads for real
        loop.call_soon_threadsafe(prompted.set)
        return real_input(prompt)
    builtins.input = observed_input
    async def heartbeat():
        await prompted.wait()
        print("LOOP-ALIVE", flush=True)  # the loop runs while the person is at the prompt
    beat = asyncio.create_task(heartbeat())
    content = await tool_ask_user.acall(questions)
    await beat
    return content

async def two_at_once():
    first, second = questions[:1], questions[1:]
    return await asyncio.gather(tool_ask_user.acall(first), tool_ask_user.acall(second))

try:
    if mode == "expiring":  # a policy that waits one second, then a second call at the terminal
        from bridge.asking import AskPolicy
        from platforms.console import ConsolePlatform
        set_ask_user_callback(ConsolePlatform(AskPolicy(wait=1, on_timeout="error")).callback)
        try:
            tool_ask_user(questions)
        except ToolRejected as exc:
            print("REJECTED:" + exc.message)
        set_ask_user_callback(None)
    if mode == "global":
        set_ask_user_callback(lambda qs, ctx: {qs[0].question: qs[0].options[1].label})
    if mode == "async":
        show(asyncio.run(ask_from_a_running_loop()))
    elif mode == "async-plain":
        show(asyncio.run(tool_ask_user.acall(questions)))
    elif mode == "two":
        for content in asyncio.run(two_at_once()):
            show(content)
    else:
        show(tool_ask_user(questions))
except ToolRejected as exc:
    print("REJECTED:" + exc.message)
except KeyboardInterrupt:
    print("INTERRUPTED")
"""

Spawn = Callable[..., pexpect.spawn]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    script = tmp_path / "ask.py"
    script.write_text(SCRIPT)
    children: list[pexpect.spawn] = []

    def start(
        mode: str = "sync", questions: list[dict[str, Any]] | None = None, term: str = "dumb"
    ) -> pexpect.spawn:
        env = {**os.environ, "TERM": term}
        env.pop("NO_COLOR", None)
        child = pexpect.spawn(
            sys.executable,
            [str(script), mode, json.dumps(QUESTIONS if questions is None else questions)],
            env=env,
            encoding="utf-8",
            timeout=15,
            dimensions=(40, 200),
        )
        children.append(child)
        return child

    yield start
    for child in children:
        child.close(force=True)


def result(child: pexpect.spawn) -> dict[str, Any]:
    child.expect(r"RESULT:(.*)\r\n")
    data: dict[str, Any] = json.loads(child.match.group(1))
    child.expect(pexpect.EOF)
    return data


def answers(child: pexpect.spawn) -> list[tuple[list[str], str | None]]:
    return [(a["selected"], a["other_text"]) for a in result(child)["answers"]]


SINGLE = "Enter a number, or type your own answer: "
MULTI = "Enter numbers separated by commas, or type your own answer: "


def test_prompt_shows_header_question_numbered_options_and_hints(spawn: Spawn) -> None:
    child = spawn()
    child.expect_exact("[Format] (1 of 2)\r\n")
    child.expect_exact(FORMAT + "\r\n")
    child.expect_exact("  1. Summary - Brief overview\r\n")
    child.expect_exact("  2. Detailed - Full explanation\r\n")
    child.expect_exact("  3. Table - Rows and columns\r\n")
    child.expect_exact(SINGLE)
    child.sendline("2")
    child.expect_exact("[Sections] (2 of 2), choose any\r\n")
    child.expect_exact("  1. Intro - Why this matters\r\n")
    child.expect_exact(MULTI)
    child.sendline("3, 1")
    assert answers(child) == [(["Detailed"], None), (["Intro", "Outro"], None)]


def test_result_echoes_the_questions_with_multiselect(spawn: Spawn) -> None:
    child = spawn(questions=QUESTIONS[:1])
    child.expect_exact(SINGLE)
    child.sendline("1")
    data = result(child)
    assert data["questions"][0]["multiSelect"] is False
    assert data["answers"] == [{"question": FORMAT, "selected": ["Summary"], "other_text": None}]


def asked_again(child: pexpect.spawn, heading: str, problem: str, prompt: str) -> None:
    """A question whose answer the bridge refused comes back whole, with the bridge's words."""
    child.expect_exact(heading + "\r\n")
    child.expect_exact(problem + "\r\n" + prompt)


def test_answers_are_judged_as_a_form_and_only_the_refused_questions_asked_again(
    spawn: Spawn,
) -> None:
    """Every question is read, then the set is submitted as a chat's form is and judged by the
    bridge: each question it refuses is asked again, with the problem in the bridge's words."""
    child = spawn()
    child.expect_exact(SINGLE)
    child.sendline("4")
    child.expect_exact(MULTI)
    child.sendline("   ")
    asked_again(child, "[Format] (1 of 2)", NO_SUCH_OPTION, SINGLE)
    child.sendline("0")
    asked_again(child, "[Sections] (2 of 2), choose any", NEED_ANSWER, MULTI)
    child.sendline("1,7")
    asked_again(child, "[Format] (1 of 2)", NO_SUCH_OPTION, SINGLE)
    child.sendline("3")
    asked_again(child, "[Sections] (2 of 2), choose any", NO_SUCH_OPTION, MULTI)
    child.sendline("")
    child.expect_exact(NEED_ANSWER + "\r\n" + MULTI)
    child.sendline("2 3")
    child.expect_exact("Answered by you")
    assert answers(child) == [(["Table"], None), (["Body", "Outro"], None)]


def test_a_line_that_shows_nothing_asks_again_and_hidden_characters_are_dropped(
    spawn: Spawn,
) -> None:
    """The terminal judges a typed line as a chat judges a typed answer (:func:`bridge.text.typed`):
    zero-width characters alone are no answer, and inside a number or a word they are not kept."""
    child = spawn()
    child.expect_exact(SINGLE)
    child.sendline("\u200b \u2060")
    child.expect_exact(MULTI)
    child.sendline("a F\u200bAQ")
    asked_again(child, "[Format] (1 of 2)", NEED_ANSWER, SINGLE)
    child.sendline("2\u200b")
    assert answers(child) == [(["Detailed"], None), ([], "a FAQ")]


def test_signed_numbers_are_numbers_not_free_text(spawn: Spawn) -> None:
    """A sign does not turn a number into the person's own answer: it is read by its value, and
    a value that names no option is refused (free text would have been taken)."""
    child = spawn()
    child.expect_exact(SINGLE)
    child.sendline("-1")
    child.expect_exact(MULTI)
    child.sendline("1, -3")
    asked_again(child, "[Format] (1 of 2)", NO_SUCH_OPTION, SINGLE)
    child.sendline("-0")
    asked_again(child, "[Sections] (2 of 2), choose any", NO_SUCH_OPTION, MULTI)
    child.sendline("+1, 3")
    asked_again(child, "[Format] (1 of 2)", NO_SUCH_OPTION, SINGLE)
    child.sendline("+2")
    assert answers(child) == [(["Detailed"], None), (["Intro", "Outro"], None)]


def test_several_numbers_for_a_single_select_question_ask_again(spawn: Spawn) -> None:
    child = spawn()
    child.expect_exact(SINGLE)
    child.sendline("1,2")
    child.expect_exact(MULTI)
    child.sendline("1")
    asked_again(child, "[Format] (1 of 2)", ONE_ONLY, SINGLE)
    child.sendline("1")  # the accepted answer to Sections stands: it is not asked again
    assert answers(child) == [(["Summary"], None), (["Intro"], None)]


def test_free_text_is_the_persons_own_answer(spawn: Spawn) -> None:
    child = spawn()
    child.expect_exact(SINGLE)
    child.sendline("  a haiku, please ")
    child.expect_exact(MULTI)
    child.sendline("1, and a FAQ")
    assert answers(child) == [([], "a haiku, please"), ([], "1, and a FAQ")]


def test_a_typed_answer_over_the_limit_asks_again(spawn: Spawn) -> None:
    """Judged as a chat's typed answer is (:data:`bridge.judging.MAX_TYPED`), measured on what
    the person saw: hidden characters do not count towards the limit."""
    child = spawn()
    child.expect_exact(SINGLE)
    child.sendline("x" * (MAX_TYPED + 1))
    child.expect_exact(MULTI)
    child.sendline("y" * MAX_TYPED + "\u200b" * 10)
    asked_again(child, "[Format] (1 of 2)", TOO_LONG.format(limit=MAX_TYPED), SINGLE)
    child.sendline("2,2")  # the same option twice is one option
    assert answers(child) == [(["Detailed"], None), ([], "y" * MAX_TYPED)]


def test_a_typed_line_parses_into_picks_for_judging() -> None:
    """Numbers from 1 on the screen are option indices from 0, as typed (out of range too, so
    judging can find them); any other line is typed text, left for judging to keep or refuse."""
    assert parse("2") == Picks(selected=(1,))
    assert parse(" 3, +1\u200b ") == Picks(selected=(2, 0))
    assert parse("-1 0") == Picks(selected=(-2, -1))
    assert parse("1, and a FAQ") == Picks(text="1, and a FAQ")
    assert parse("\u200b ") == Picks(text="\u200b ")


def test_the_global_callback_beats_the_terminal(spawn: Spawn) -> None:
    child = spawn("global")
    assert answers(child) == [(["Detailed"], None), ([], None)]
    assert SINGLE not in (child.before or "")


def test_async_call_prompts_off_the_event_loop(spawn: Spawn) -> None:
    child = spawn("async", QUESTIONS[1:])
    child.expect_exact("LOOP-ALIVE")  # printed by another task while input() waits
    child.sendline("2,1")
    assert answers(child) == [(["Intro", "Body"], None)]


def test_end_of_input_is_a_tool_rejected(spawn: Spawn) -> None:
    """The ask is closed as cancelled (and shown so) and the call ends with one line."""
    child = spawn()
    child.expect_exact(SINGLE)
    child.sendeof()
    child.expect_exact("🚫 Cancelled.")
    child.expect_exact(
        "REJECTED:could not get the person's answer: the terminal closed before the person answered"
    )
    child.expect(pexpect.EOF)


def test_ctrl_c_propagates_as_keyboard_interrupt(spawn: Spawn) -> None:
    """The ask is cancelled by the bridge (closed, shown so) before the interrupt goes on."""
    child = spawn()
    child.expect_exact(SINGLE)
    child.sendintr()
    child.expect_exact("🚫 Cancelled.")
    child.expect_exact("INTERRUPTED")
    child.expect(pexpect.EOF)


def test_ctrl_c_on_the_async_path_interrupts_at_once(spawn: Spawn) -> None:
    """``asyncio.run`` turns SIGINT into cancelling its task and then joins the default
    executor: a prompt sitting in ``input()`` there would keep the process alive for ever."""
    child = spawn("async-plain")
    child.expect_exact(SINGLE)
    child.sendintr()
    child.expect_exact("🚫 Cancelled.", timeout=5)
    child.expect_exact("INTERRUPTED", timeout=5)
    child.expect(pexpect.EOF, timeout=5)
    assert "Fatal" not in child.before  # the abandoned prompt thread does not wreck the exit
    child.close()
    assert child.exitstatus == 0


def test_an_ask_expires_by_its_policy_and_the_next_ask_gets_the_keyboard(spawn: Spawn) -> None:
    """The wait and expiry are the bridge's: a console waiting one second closes the ask as
    expired, shows it so and tells the model. The prompt it abandoned was still reading; the
    next ask's prompt takes that read over, so the line typed next answers it."""
    child = spawn("expiring", QUESTIONS[:1])
    child.expect_exact(SINGLE)
    child.expect_exact("⌛ Expired without an answer.", timeout=10)
    child.expect_exact("REJECTED:nobody answered within 1 second; the questions are closed.")
    child.expect_exact("The agent has a question for you.")
    child.expect_exact(SINGLE)
    child.sendline("3")
    assert answers(child) == [(["Table"], None)]


def test_concurrent_asks_take_turns_at_the_keyboard(spawn: Spawn) -> None:
    """Two calls at once in one process: the second is shown only once the first is answered."""
    child = spawn("two")
    child.expect_exact("[Format]")
    child.expect_exact(SINGLE)
    child.sendline("1")
    child.expect_exact("Answered by you")
    assert "[Sections]" not in child.before
    child.expect_exact("[Sections]")
    child.expect_exact(MULTI)
    child.sendline("2")
    child.expect(r"RESULT:([^\r\n]*)\r\n")
    first = json.loads(child.match.group(1))
    second = result(child)
    assert [a["selected"] for a in (*first["answers"], *second["answers"])] == [
        ["Summary"],
        ["Body"],
    ]


def test_model_text_cannot_drive_the_terminal(spawn: Spawn) -> None:
    """Control characters (escape sequences, bells) are refused by validation before any
    prompt; the format characters it accepts (bidi overrides, isolates) reach the terminal only
    escaped."""
    hostile = [
        {
            "question": "Pick \u2066one\u2069?",
            "header": "Ev\u202eil",
            "options": [
                {"label": "A\u202e", "description": "red"},
                {"label": "B", "description": "line\nbreak"},
            ],
        }
    ]
    child = spawn(questions=hostile)
    child.expect_exact(SINGLE)
    shown = child.before
    assert not any(c in shown for c in "\u202e\u2066\u2069")
    assert "Pick \\u2066one\\u2069?" in shown
    assert "[Ev\\u202eil]" in shown
    child.sendline("1")
    assert answers(child) == [(["A\u202e"], None)]
    escape = [{**hostile[0], "question": "Pick \x1b[2J one?"}]
    with pytest.raises(ToolRejected, match="control character U\\+001B"):
        validate_questions(escape)


def test_clean_keeps_ordinary_text_and_newlines() -> None:
    assert clean("Café – ok?\n\tyes") == "Café – ok?\n\tyes"
    assert clean("\x1b[1m") == "\\x1b[1m"


def test_console_platform_has_no_chat_channel() -> None:
    from bridge.platform import Platform, PlatformUnavailable, load_platform, resolve_platform

    assert load_platform("console") is platform
    assert isinstance(platform, ConsolePlatform) and not isinstance(platform, Platform)
    assert platform.name == "console"
    with pytest.raises(PlatformUnavailable, match="cannot post and serve"):
        resolve_platform("console")


# -- ask-bridge demo ------------------------------------------------------------------------------

DEMO = [sys.executable, "-c", "import sys; from bridge.cli import main; sys.exit(main())", "demo"]


def test_demo_in_a_terminal(tmp_path: Path) -> None:
    env = {**os.environ, "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    child = pexpect.spawn(DEMO[0], DEMO[1:], env=env, encoding="utf-8", timeout=15)
    try:
        child.expect_exact("Audience")
        child.expect_exact("\x1b[1m")  # a styled terminal
        child.expect_exact(SINGLE)
        child.sendline("2")
        child.expect_exact(MULTI)
        child.sendline("1,3")
        child.expect_exact(SINGLE)
        child.sendline("about a page")
        child.expect_exact("Going with Audience: Developers; Sections: Highlights, Fixes; Length:")
        child.expect_exact('"other_text": "about a page"')
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_demo_without_a_terminal_explains_and_exits_1() -> None:
    done = subprocess.run(
        DEMO, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1  # a configuration failure, as in every command
    assert done.stdout == ""
    assert "set_ask_user_callback" in done.stderr
    assert "ask-bridge demo --answers '" in done.stderr


def test_demo_with_scripted_answers_prints_the_result_json() -> None:
    scripted = json.dumps(
        {"Audience": "Users", "Which sections should I include?": ["Fixes", "Credits", "a joke"]}
    )
    done = subprocess.run(
        [*DEMO, "--answers", scripted, "--raw"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [(a["selected"], a["other_text"]) for a in data["answers"]] == [
        (["Users"], None),
        (["Fixes", "Credits"], "a joke"),
        ([], None),
    ]


def test_demo_reports_a_malformed_question_set_as_the_model_would_read_it(tmp_path: Path) -> None:
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps([{"question": "Go?", "header": "Go", "options": []}]))
    done = subprocess.run(
        [*DEMO, "--questions", f"@{bad}", "--answers", "{}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "questions[0].options has 0 options: give 2 to 4 options" in done.stderr


def test_demo_reports_deeply_nested_questions_as_the_model_would_read_it(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    done = subprocess.run(
        [*DEMO, "--questions", f"@{deep}", "--answers", "{}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "The ask_user call was rejected: the arguments are nested too deeply" in done.stderr


def test_demo_takes_the_arguments_object_with_a_null_multiselect() -> None:
    questions = [{**SAMPLE_QUESTIONS[0], "multiSelect": None}]
    done = subprocess.run(
        [*DEMO, "--questions", json.dumps({"questions": questions}), "--answers", "{}", "--raw"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["questions"][0]["multiSelect"] is False
