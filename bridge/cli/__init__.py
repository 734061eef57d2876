"""The ``ask-bridge`` command line: one module per command group, each with ``register()``.

A command module adds its sub-commands to the parser and sets ``func`` to a callable taking the
parsed namespace and returning the exit status. Heavy imports stay inside those callables so
``ask-bridge --version`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

COMMAND_MODULES = (
    "bridge.cli.demo",
    "bridge.cli.asks",
    "bridge.cli.ask",
    "bridge.cli.serve",
    "bridge.cli.mcp",
)


def _version() -> str:
    try:
        return version("ask-bridge")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ask-bridge",
        description="Let an LLM agent ask people multiple-choice questions and get the answers.",
    )
    parser.add_argument("--version", action="version", version=f"ask-bridge {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0
    try:
        status: int = func(args)
    except ValueError as exc:  # bridge.settings is imported lazily, like every heavy module
        from bridge.settings import SettingsError

        if not isinstance(exc, SettingsError):
            raise
        print(f"ask-bridge {args.command}: {exc}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
