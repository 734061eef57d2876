"""Every example runs the way its docstring says, as a script, and none shadows a package.

Run as ``python examples/NAME.py``, a file's directory comes first on ``sys.path``: a file named
like a package it imports (``claude_agent_sdk.py``) would import itself instead, half-initialised.
The examples that talk to a model run in ``tests/platforms/slack/test_examples_e2e.py`` (the Claude
Agent SDK ones, through the Claude Code CLI, in ``tests/platforms/slack/test_examples_claude.py``),
against a scripted one, with the stand-in handlers and asking in Slack; the others run here, offline
as they are, and those that talk to a model run here without credentials, to fail in one line.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

from tests.support.example_runs import (
    CLAUDE_EXAMPLES,
    CLAUDE_MODEL_ENV,
    DEADLINE,
    EXAMPLES,
    HANDLER_ENV,
    MODEL_ENV,
    ROOT,
    clean_env,
    run_script,
)
from tests.support.model_server import RefusingProxy

FILES = sorted((ROOT / "examples").glob("*.py"))
SCRIPTS = [p for p in FILES if 'if __name__ == "__main__":' in p.read_text()]
"""The examples proper; the rest (``handler.py``) are modules they import."""
MODEL_EXAMPLES = {
    **{example.name: (*MODEL_ENV, *dict(example.env)) for example in EXAMPLES},
    **dict.fromkeys(CLAUDE_EXAMPLES, CLAUDE_MODEL_ENV),
}
"""Each example that talks to a model, and the variables it is run with to reach it."""
SELF_CONTAINED = [p for p in SCRIPTS if p.name not in MODEL_EXAMPLES]


def doc(path: Path) -> str:
    return path.read_text().split('"""')[1]


HANDLER_DOC = doc(ROOT / "examples" / "handler.py")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_example_shadows_a_package(path: Path) -> None:
    assert importlib.util.find_spec(path.stem) is None, f"{path.name} shadows a package"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_each_example_says_how_it_runs(path: Path) -> None:
    """The command, and every variable the tests run it with: in its docstring, or -- the
    handler's -- in ``handler.py``'s, which the docstring points to."""
    said = doc(path)
    assert f"python examples/{path.name}" in said
    variables = MODEL_EXAMPLES.get(path.name)
    if variables is None:
        return
    for name in variables:
        assert f"``{name}" in said, name
    assert "SLACK_BOT_TOKEN" in said and "handler.py" in said
    for name in HANDLER_ENV:
        assert f"``{name}" in HANDLER_DOC, name


async def test_the_self_contained_examples_run_offline() -> None:
    async def run(path: Path) -> tuple[str, int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(path.relative_to(ROOT)), cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
        return path.name, proc.returncode or 0, out.decode(), err.decode()

    for name, status, out, err in await asyncio.gather(*(run(p) for p in SELF_CONTAINED)):
        assert status == 0, f"{name}: {err[-2000:]}"
        assert out.strip(), name
        assert "Traceback" not in err, name


async def test_an_example_without_its_model_credentials_says_so_in_one_line() -> None:
    """Run with nothing naming a model, and behind the refusing proxy: each example that talks to
    a model exits 1 with one line naming the variable to set (not the SDK's traceback from its
    first request), having tried to reach nothing."""
    async with RefusingProxy() as proxy:
        env = {**clean_env(), **proxy.env()}
        runs = await asyncio.gather(
            *(run_script(name, env, ROOT, "without credentials") for name in MODEL_EXAMPLES)
        )
    for name, (status, out, err) in zip(MODEL_EXAMPLES, runs, strict=True):
        variable = MODEL_EXAMPLES[name][0]
        assert (status, out) == (1, ""), f"{name}: {err[-2000:]}"
        (line,) = err.splitlines()
        assert f"examples/{name}: set {variable}" in line, line
    assert not proxy.destinations
