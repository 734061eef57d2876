"""Every command fails fast in one line with exit status 1: bad settings, Redis down, a busy port,
a missing extra, a bare command line; a closed stdout ends quietly; ``.env`` holds every
setting."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bridge.cli import main
from bridge.cli.demo import EXAMPLE_ANSWERS
from bridge.platform import PlatformUnavailable
from tests.support.procs import INHERITED

COMMANDS = [
    ["list"],
    ["show", "abc"],
    ["cancel", "abc"],
    ["serve", "--port", "0"],
    ["mcp"],
    ["ask", "--channel", "C1", "-"],
    ["doctor"],
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in list(os.environ):
        if name.startswith((*INHERITED, "LOG_")):
            monkeypatch.delenv(name)


def one_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(f"ask-bridge {command}: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("REDIS_URL", "http://x", "REDIS_URL: use a redis://"),
        ("ASK_BRIDGE_RETENTION", "abc", "ASK_BRIDGE_RETENTION: "),
        ("REDIS_MAX_CONNECTIONS", "1", "REDIS_MAX_CONNECTIONS: "),
        ("ASK_BRIDGE_REDIS_WAIT", "-1", "ASK_BRIDGE_REDIS_WAIT: "),
        ("LOG_LEVEL", "loud", "LOG_LEVEL: "),
    ],
)
@pytest.mark.parametrize("argv", COMMANDS[:-1], ids=lambda a: a[0])
def test_a_bad_setting_is_one_line_and_status_1_in_every_command(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    variable: str,
    value: str,
    said: str,
) -> None:
    monkeypatch.setenv(variable, value)
    monkeypatch.setattr("sys.stdin", open(os.devnull))
    from bridge.logs import settings

    settings.cache_clear()
    try:
        assert main(argv) == 1
    finally:
        settings.cache_clear()
    assert said in one_line(capsys, argv[0])


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("{", "ASK_BRIDGE_IDENTITIES is not JSON"),
        ('{"alice": {"slack": "C0CHANNEL"}}', "'alice''s slack id 'C0CHANNEL' is not a slack"),
    ],
)
@pytest.mark.parametrize(
    "argv", [["serve", "--port", "0"], ["ask", "--channel", "C1", "-"]], ids=lambda a: a[0]
)
def test_a_bad_identity_map_is_one_line_where_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    value: str,
    said: str,
) -> None:
    """``ASK_BRIDGE_IDENTITIES`` links people across platforms; ``serve`` (judging clicks) and
    ``ask`` (counting approvers) read it at start: a malformed map or an id that is no user of
    its platform stops them in one line, before anything is posted."""
    monkeypatch.setenv("ASK_BRIDGE_IDENTITIES", value)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1-unused")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "unused")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:1/api/")  # never reached
    questions = (
        '[{"question": "Which?", "header": "Which", "options": '
        '[{"label": "a", "description": "a"}, {"label": "b", "description": "b"}]}]'
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(questions))
    assert main(argv) == 1
    assert said in one_line(capsys, argv[0])


@pytest.mark.parametrize("argv", [["list"], ["show", "abc"], ["cancel", "abc"]], ids=str)
def test_redis_down_is_named_once_with_the_password_redacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://:s3cret@127.0.0.1:1/0")
    monkeypatch.setenv("ASK_BRIDGE_REDIS_WAIT", "0")  # no wait for a restart (the default 5 s)
    started = time.monotonic()
    assert main(argv) == 1
    assert time.monotonic() - started < 3  # at once, not after the store's retries
    line = one_line(capsys, argv[0])
    assert "cannot reach Redis at REDIS_URL=redis://:***@127.0.0.1:1/0: " in line
    assert "s3cret" not in line


def test_ask_with_redis_down_says_so_before_posting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1")
    monkeypatch.setenv("ASK_BRIDGE_REDIS_WAIT", "0")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-unused")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:1/api/")  # never reached
    questions = tmp_path / "q.json"
    questions.write_text(
        '[{"question": "Which?", "header": "Which", "multiSelect": false, "options": '
        '[{"label": "a", "description": "a"}, {"label": "b", "description": "b"}]}]'
    )
    started = time.monotonic()
    assert main(["ask", "--channel", "C1", str(questions)]) == 1
    assert time.monotonic() - started < 3
    assert "cannot reach Redis at REDIS_URL=redis://127.0.0.1:1: " in one_line(capsys, "ask")


def test_a_missing_extra_names_the_pip_install() -> None:
    code = (
        "import sys; sys.modules['anyio'] = None; sys.modules['mcp'] = None\n"
        "from bridge.cli import main; sys.exit(main(['mcp']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert (
        done.stderr.strip().splitlines()
        == [
            "ask-bridge mcp: this needs the mcp extra (module 'anyio' is missing): "
            "pip install 'ask-bridge[mcp]'"
        ]
        or "pip install 'ask-bridge[mcp]'" in done.stderr.strip()
    )
    assert "Traceback" not in done.stderr


def cli(*argv: str, env: dict[str, str] | None = None, code: str = "") -> tuple[int, list[str]]:
    """The command line run as a person runs it (a process of its own; ``code``: Python run
    before ``main``, to take an extra away): its status and its lines on stderr."""
    script = f"{code}\nimport sys\nfrom bridge.cli import main\nsys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", script, *argv],
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr.splitlines()


WITHOUT_SLACK = "import sys; sys.modules['slack_sdk'] = sys.modules['slack_bolt'] = None"
"""A base install's view of Slack: its extra's packages cannot be imported."""


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["serve", "--port", "0"],
            "ask-bridge serve: no chat platform is installed and configured (slack needs its "
            "extra: pip install 'ask-bridge[slack]'; discord: Discord is not configured: set "
            "DISCORD_TOKEN, the bot token; web: ASK_BRIDGE_WEB_SECRET is not set (make one "
            "with: openssl rand -hex 32))",
        ),
        (
            ["serve", "--platform", "nosuch"],
            "ask-bridge serve: unknown platform 'nosuch' (installed: console, discord, web; slack "
            "needs its extra: pip install 'ask-bridge[slack]')",
        ),
    ],
    ids=["serve", "serve --platform nosuch"],
)
def test_serve_with_slack_configured_but_not_installed_names_the_pip_install(
    argv: list[str], said: str
) -> None:
    """``SLACK_BOT_TOKEN`` set on a base install: ``serve`` names the extra to install, as ``ask``
    and ``mcp`` do (not "no chat platform is configured"), and never lists Slack as installed."""
    env = {"SLACK_BOT_TOKEN": "xoxb-1-unused", "SLACK_SIGNING_SECRET": "unused"}
    assert cli(*argv, env=env, code=WITHOUT_SLACK) == (1, [said])


def test_a_bare_command_line_is_a_usage_error() -> None:
    """``ask-bridge`` alone did nothing and exited 0: now a bad command line like any other."""
    status, lines = cli()
    assert (status, lines) == (
        1,
        ["ask-bridge: the following arguments are required: COMMAND (see ask-bridge --help)"],
    )


def test_python_m_bridge_is_the_command() -> None:
    for argv in ([], ["--version"]):
        done = subprocess.run(
            [sys.executable, "-m", "bridge", *argv], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == (1 if not argv else 0), done.stderr
        assert (done.stdout or done.stderr).startswith("ask-bridge"), done


@pytest.mark.parametrize("command", ["show", "cancel"])
def test_an_ask_named_without_redis_url_is_one_line(command: str) -> None:
    """An ask lives in the shared store: without ``REDIS_URL`` there is none to find, said in
    the command's one line (as ``wait`` says it), not "no ask" after a note."""
    status, lines = cli(command, "nosuch")
    assert status == 1
    assert lines == [
        f"ask-bridge {command}: REDIS_URL is not set: an ask lives in Redis, shared by the "
        "process that asked it and `serve`; set REDIS_URL to that deployment's Redis"
    ]


@pytest.mark.parametrize(("held", "kind"), [('"just a string"', "string"), ("42", "number")])
def test_a_questions_file_of_json_that_is_no_question_set_says_what_it_holds(
    tmp_path: Path, held: str, kind: str
) -> None:
    """Valid JSON, but not a question set: rejected (status 2, as any rejected question set) in
    words that say so -- never "not valid JSON"."""
    (tmp_path / "q.json").write_text(held)
    status, lines = cli("ask", "--channel", "C1", str(tmp_path / "q.json"))
    assert status == 2
    (line,) = lines
    assert line.startswith(
        f"The ask_user call was rejected: the input is valid JSON but a {kind}, not a question "
        'set ({"questions": [...]} or a bare array of questions): send the arguments as'
    )


def test_a_discord_token_with_a_space_is_one_line_before_any_call() -> None:
    """ "Bot " copied with the token (discord.py adds it): said at once, not after a login."""
    env = {"DISCORD_TOKEN": "Bot abc.def.ghi", "DISCORD_API_URL": "http://127.0.0.1:1/api/v10"}
    status, lines = cli("serve", "--port", "0", "--platform", "discord", env=env)
    assert (status, lines) == (
        1,
        [
            "ask-bridge serve: Discord settings are invalid: DISCORD_TOKEN has a space in it: set "
            "the bot token alone (without 'Bot ')"
        ],
    )


def test_a_reader_that_goes_away_ends_it_quietly() -> None:
    """``ask-bridge show ID | head``: output to a closed pipe is no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bridge.cli", "demo", "--answers", EXAMPLE_ANSWERS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it writes: every write meets a closed pipe
    err = proc.stderr.read()
    assert proc.wait(60) == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_the_mcp_destination_is_read_from_dotenv_too(tmp_path: Path) -> None:
    from bridge.cli.mcp import chat_route_from_env

    (tmp_path / ".env").write_text("ASK_BRIDGE_PLATFORM=console\nASK_BRIDGE_CHANNEL=C1\n")
    with pytest.raises(PlatformUnavailable, match="ASK_BRIDGE_PLATFORM=console cannot work"):
        chat_route_from_env()


def test_help_of_every_command_documents_status_1(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in [*COMMANDS, ["demo"]]:
        with pytest.raises(SystemExit):
            main([argv[0], "--help"])
        assert "Exit status 1" in " ".join(capsys.readouterr().out.split()), argv[0]


def test_the_mcp_token_is_read_from_dotenv_and_an_empty_app_token_is_unset(
    tmp_path: Path,
) -> None:
    from bridge.mcp_access import token_from_env
    from platforms.slack.settings import SlackSettings

    token = "t0ken-from-dotenv-0123456789abcdef"
    (tmp_path / ".env").write_text(f"ASK_BRIDGE_MCP_TOKEN={token}\nSLACK_APP_TOKEN=\n")
    assert token_from_env("0.0.0.0") == token
    assert not SlackSettings().socket_mode  # a copied .env.example line does not mean Socket Mode


def test_a_framework_adapter_without_its_framework_names_the_pip_install() -> None:
    code = """
import importlib, sys
blocked = {"chatlas": "chatlas", "pydantic_ai": "pydantic_ai", "langchain": "langchain_core",
           "openai_agents": "agents", "claude_agent_sdk": "claude_agent_sdk"}
for name in blocked.values():
    sys.modules[name] = None
for adapter in blocked:
    try:
        importlib.import_module("bridge.frameworks." + adapter)
    except ModuleNotFoundError as exc:
        print(exc)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "bridge.frameworks.chatlas needs the chatlas extra (chatlas is not installed): "
        "pip install 'ask-bridge[chatlas]'",
        "bridge.frameworks.pydantic_ai needs the pydantic-ai extra (pydantic_ai is not "
        "installed): pip install 'ask-bridge[pydantic-ai]'",
        "bridge.frameworks.langchain needs the langchain extra (langchain_core.callbacks is not "
        "installed): pip install 'ask-bridge[langchain]'",
        "bridge.frameworks.openai_agents needs the openai-agents extra (agents is not "
        "installed): pip install 'ask-bridge[openai-agents]'",
        "bridge.frameworks.claude_agent_sdk needs the claude-agent-sdk extra "
        "(claude_agent_sdk is not installed): pip install 'ask-bridge[claude-agent-sdk]'",
    ]
