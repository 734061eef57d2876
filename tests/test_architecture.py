"""Layering rules that keep the core usable on its own.

``bridge`` must import with no platform or framework extra installed, and must never import
``platforms`` (platforms plug into the core through entry points, not the reverse).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

OPTIONAL = (
    "slack_bolt",
    "slack_sdk",
    "discord",
    "mcp",
    "chatlas",
    "pydantic_ai",
    "langchain_core",
    "langgraph",
    "agents",
    "claude_agent_sdk",
    "aiohttp",
)


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_bridge_never_imports_platforms() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {mod}"
        for path in sorted((ROOT / "bridge").rglob("*.py"))
        for mod in _imported_modules(path)
        if mod == "platforms" or mod.startswith("platforms.")
    ]
    assert offenders == []


def test_bridge_imports_without_any_extra() -> None:
    """Import ``bridge`` (and the CLI) in a fresh interpreter where every extra is unimportable."""
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {OPTIONAL!r}:\n"
        "            raise ImportError(f'blocked optional dependency {name}')\n"
        "        return None\n"
        "sys.meta_path.insert(0, Block())\n"
        "import bridge, bridge.cli\n"
        "bridge.cli.build_parser()\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{OPTIONAL!r} or m.split('.')[0] == 'platforms')\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_every_docstring_encodes_as_utf8() -> None:
    """A lone surrogate in a docstring (``"\\ud800"`` written in a non-raw one) compiles on 3.11,
    but Python 3.13.0, which cleans docstrings up at compile time through UTF-8, cannot import
    the module (``UnicodeEncodeError``). String constants elsewhere may hold them (tests do)."""
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    offenders = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        if path.parts[len(ROOT.parts)].startswith("."):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            doc = ast.get_docstring(node, clean=False) if isinstance(node, documented) else None
            try:
                (doc or "").encode("utf-8")
            except UnicodeEncodeError:
                offenders.append(f"{path.relative_to(ROOT)}: {getattr(node, 'name', 'module')}")
    assert offenders == []
