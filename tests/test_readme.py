"""The README and the documentation stay true.

Every fenced code block in ``README.md``, ``docs/*.md`` and ``bench/README.md`` carries a marker
on the line before it, and an unmarked block fails, so every block that can run is run:

* ``<!-- doc-test: run [expect=TEXT] [NAME=VALUE ...] -->``: run -- a ``python`` block with this
  interpreter, an ``sh`` block with bash, this environment's ``bin`` first on ``PATH`` -- in an
  empty directory (with ``.venv`` linked to this environment, so ``.venv/bin/ask-bridge`` works as
  it does from the repository root) and an environment without the bridge's settings, plus each
  ``NAME=VALUE``. It must exit 0, and print ``TEXT`` when one is given.
* ``<!-- doc-test: excerpt PATH -->``: its lines must appear, line for line and in order, in PATH
  (an example the framework tests run end to end).
* ``<!-- doc-test: skip REASON -->``: it cannot run here (it posts to a real workspace, needs a
  deployment, installs packages); the reason says why.

Besides: the picture of the messages is what the renderers build today (``docs/picture.py``), the
README's test command is exactly ``.ci/run``'s, and the README's and ``bench/README.md``'s
relative links lead to files and headings that exist (``mkdocs build --strict`` checks the
site's own).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>\w*)\s*$")
MARKER = re.compile(r"^\s*<!-- doc-test: (?P<kind>run|excerpt|skip)\b(?P<rest>.*?)\s*-->\s*$")
SETTINGS = ("SLACK_", "DISCORD_", "REDIS_", "ASK_BRIDGE_", "LOG_", "OPENAI_", "ANTHROPIC_")
"""Prefixes of environment variables a block must not inherit from whoever runs the tests."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    kind: str | None
    rest: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, each with the marker on the line before it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent = opening["indent"]
        end = next(j for j in range(i + 1, len(lines)) if lines[j] == f"{indent}```")
        code = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : end]) + "\n"
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        kind, rest = (marker["kind"], marker["rest"].strip()) if marker else (None, "")
        found.append(Block(page, i + 1, opening["lang"], code, kind, rest))
        i = end + 1
    return found


BLOCKS = [block for page in PAGES for block in blocks(page)]


def of_kind(kind: str) -> list[Block]:
    return [b for b in BLOCKS if b.kind == kind]


def test_every_block_is_marked() -> None:
    unmarked = [b.name for b in BLOCKS if b.kind is None]
    assert not unmarked, (
        f"code blocks without a <!-- doc-test: run|excerpt|skip --> line before them: {unmarked}"
    )
    assert all(b.rest for b in of_kind("skip")), "a skipped block says why"
    assert len(of_kind("run")) >= 5
    assert len(of_kind("excerpt")) >= 8


@pytest.mark.parametrize("block", of_kind("run"), ids=lambda b: b.name)
def test_block_runs(block: Block, tmp_path: Path) -> None:
    expect = None
    env = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for word in shlex.split(block.rest):
        name, _, value = word.partition("=")
        if name == "expect":
            expect = value
        else:
            env[name] = value
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    if block.lang == "python":
        command = [sys.executable, "-c", block.code]
    else:
        assert block.lang == "sh", f"{block.name}: run python or sh blocks"
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    out = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    if expect is not None:
        assert expect in out.stdout, out.stdout


@pytest.mark.parametrize("block", of_kind("excerpt"), ids=lambda b: b.name)
def test_excerpt_matches_example(block: Block) -> None:
    source = [line.rstrip() for line in (ROOT / block.rest).read_text().splitlines()]
    wanted = [line.rstrip() for line in block.code.splitlines() if line.strip()]
    pos = 0
    for line in wanted:
        try:
            pos = source.index(line, pos) + 1
        except ValueError:
            pytest.fail(f"{block.name}: not in {block.rest} (in order): {line!r}")


def test_picture_is_current() -> None:
    """``docs/images/messages.svg`` is what ``docs/picture.py`` draws from today's renderers."""
    out = subprocess.run(
        [sys.executable, "docs/picture.py", "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


def test_readme_test_command_is_ci() -> None:
    """The README's test command and ``.ci/run`` are the same command, character for character."""
    ci = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("python3 -m venv")
    ]
    readme = [
        b.code.strip()
        for b in BLOCKS
        if b.page.name == "README.md" and b.page.parent == ROOT and "pytest" in b.code
    ]
    assert ci == readme
    assert "mkdocs build --strict" in ci[0]


LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The ids MkDocs gives ``page``'s headings (as Python-Markdown's toc does, without code
    spans' backticks)."""
    headings = re.findall(r"^#+\s+(.*?)\s*$", page.read_text(encoding="utf-8"), re.M)
    return {slugify(heading.replace("`", ""), "-") for heading in headings}


@pytest.mark.parametrize(
    "page",
    [ROOT / "README.md", ROOT / "bench" / "README.md"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_links_lead_somewhere(page: Path) -> None:
    broken = []
    for m in LINK.finditer(page.read_text(encoding="utf-8")):
        target = m["target"]
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and anchor not in anchors(file)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to nothing: {broken}"
