"""Every example runs the way its docstring says, as a script, and none shadows a package.

Run as ``python examples/NAME.py``, a file's directory comes first on ``sys.path``: a file named
like a package it imports (``claude_agent_sdk.py``) would import itself instead, half-initialised.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
OFFLINE_FLAG = {"claude_agent_permissions.py": ("--offline",)}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_no_example_shadows_a_package(path: Path) -> None:
    assert importlib.util.find_spec(path.stem) is None, f"{path.name} shadows a package"


def test_each_example_says_how_it_runs() -> None:
    for path in EXAMPLES:
        doc = path.read_text().split('"""')[1]
        extra = " ".join(OFFLINE_FLAG.get(path.name, ()))
        command = f"python examples/{path.name}" + (f" {extra}" if extra else "")
        assert command in doc or "Runs offline as it is" in doc, path.name


async def test_each_example_runs_offline_as_a_script() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}

    async def run(path: Path) -> tuple[str, int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(path.relative_to(ROOT)), *OFFLINE_FLAG.get(path.name, ()),
            cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 90)
        return path.name, proc.returncode or 0, out.decode(), err.decode()

    for name, status, out, err in await asyncio.gather(*(run(p) for p in EXAMPLES)):
        assert status == 0, f"{name}: {err[-2000:]}"
        assert out.strip(), name
        assert "Traceback" not in err, name
