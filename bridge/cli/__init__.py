"""The ``ask-bridge`` command line: one module per command group, each with ``register()``.

A command module adds its sub-commands to the parser and sets ``func`` to a callable taking the
parsed namespace and returning the exit status. Heavy imports stay inside those callables so
``ask-bridge --version`` is instant.

Every command fails the same way (:mod:`bridge.cli.failures`): an expected failure -- a bad
setting, a refused token, an unreachable Redis or platform, a busy port, a missing extra -- is one
line on stderr naming what to fix, and exit status 1; never a traceback. Every command takes
``--log-level`` (default ``LOG_LEVEL``, else INFO for ``serve`` and ``mcp``, WARNING for the
others); see :mod:`bridge.logs` for ``LOG_FORMAT``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from bridge import __version__
from bridge.cli.failures import FAILED

COMMAND_MODULES = (
    "bridge.cli.demo",
    "bridge.cli.asks",
    "bridge.cli.link",
    "bridge.cli.ask",
    "bridge.cli.wait",
    "bridge.cli.feed",
    "bridge.cli.serve",
    "bridge.cli.mcp",
    "bridge.cli.doctor",
    "bridge.cli.slack",
)
CHATTY = ("serve", "mcp")
NEEDS_ENGINE = ("serve", "mcp", "ask", "wait", "feed", "list", "show", "cancel", "link")
"""Commands that read the engine settings: read first, so a bad one stops them before anything
else is tried (``doctor`` reports them in its table instead)."""
"""Commands that run for long and log at INFO by default; the others log warnings only."""
REPORTS_SETTINGS = ("doctor",)
"""Commands that report a bad setting as a row of their output: a bad logging setting does not
stop them before they can (they log in the default format meanwhile)."""
EPILOG = (
    "Exit status 1, in every command: a configuration or infrastructure failure (bad setting, "
    "token refused, Redis or the platform unreachable, port busy, missing extra), told in one "
    "line on stderr; so is a bad command line. `ask` and `wait` also use 3 and 4, `ask` 2 (see "
    "`ask-bridge ask --help`)."
)


class Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is a configuration failure like any other: one line
    naming the argument, exit status 1 (argparse's own 2 is what ``ask`` says of a rejected
    question set, which a pipeline must be able to tell apart)."""

    def error(self, message: str) -> NoReturn:
        self.exit(FAILED, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ask-bridge",
        description="Let an LLM agent ask people multiple-choice questions and get the answers.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"ask-bridge {__version__}")
    # required: a bare `ask-bridge` is a bad command line like any other (one line, status 1)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for command in sub.choices.values():
        command.add_argument(
            "--log-level",
            type=str.upper,
            choices=("DEBUG", "INFO", "WARNING", "ERROR"),
            help="log level (default: LOG_LEVEL, else INFO for serve and mcp, WARNING otherwise)",
        )
        command.epilog = f"{command.epilog}\n\n{EPILOG}" if command.epilog else EPILOG
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from bridge.cli.failures import BROKEN_PIPE, explain
    from bridge.logs import close, say

    try:
        _logging(args)
        if args.command in NEEDS_ENGINE:
            from bridge.settings import EngineSettings

            EngineSettings()
        status: int = args.func(args)
    except BrokenPipeError:
        # the reader went away: send what is left in the buffer nowhere, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    except Exception as exc:
        line = explain(exc)
        if line is None:
            raise
        say(f"ask-bridge {args.command}: {line}")  # after the log lines that led to it
        return FAILED
    finally:
        close()  # the queued log lines written, within a bound: a stalled stderr cannot hang it
    return status


def _logging(args: argparse.Namespace) -> None:
    from bridge.logs import LogSettings, settings, setup
    from bridge.settings import SettingsError

    try:
        chosen = settings()
    except SettingsError:
        if args.command not in REPORTS_SETTINGS:
            raise
        chosen = LogSettings.model_construct()  # the defaults, while its row says what is wrong
    level = getattr(args, "log_level", None) or chosen.level
    setup(level or ("INFO" if args.command in CHATTY else "WARNING"), chosen)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
