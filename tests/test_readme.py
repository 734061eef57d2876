"""The README stays true: its quick start runs, and its framework snippets match the examples.

A code block preceded by ``<!-- readme-test: run -->`` is executed; one preceded by
``<!-- readme-test: excerpt PATH -->`` must appear, line for line and in order, in that file (which
the framework tests run end to end).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MARKED = re.compile(r"<!-- readme-test: (run|excerpt (\S+)) -->\n```(\w+)\n(.*?)```", re.S)
BLOCKS = [(m.group(1), m.group(2), m.group(4)) for m in MARKED.finditer(README)]


def test_readme_has_marked_blocks() -> None:
    kinds = [kind.split()[0] for kind, _, _ in BLOCKS]
    assert kinds.count("run") >= 1
    assert kinds.count("excerpt") >= 6


@pytest.mark.parametrize(
    "code", [code for kind, _, code in BLOCKS if kind == "run"], ids=lambda c: c.split("\n")[0]
)
def test_readme_block_runs(code: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert '"answers"' in out.stdout


@pytest.mark.parametrize(
    ("path", "code"),
    [(path, code) for kind, path, code in BLOCKS if kind != "run"],
    ids=lambda v: str(v).split("\n")[0],
)
def test_readme_excerpt_matches_example(path: str, code: str) -> None:
    source = [line.rstrip() for line in (ROOT / path).read_text().splitlines()]
    wanted = [line.rstrip() for line in code.splitlines() if line.strip()]
    pos = 0
    for line in wanted:
        try:
            pos = source.index(line, pos) + 1
        except ValueError:
            pytest.fail(f"README excerpt line not found in {path} (in order): {line!r}")
