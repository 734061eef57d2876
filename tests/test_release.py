"""What a user checks before depending on the package: the version written once
(pyproject.toml) and read back by ``bridge.__version__`` and ``ask-bridge --version``; a changelog
entry for that version, in Keep a Changelog's form; and the Python versions the classifiers claim,
from ``requires-python`` up."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import bridge

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_version_is_the_installed_metadata_s() -> None:
    version = PROJECT["version"]
    assert bridge.__version__ == importlib.metadata.version("ask-bridge") == version
    done = subprocess.run(
        [sys.executable, "-m", "bridge.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ask-bridge {version}"


def test_a_source_tree_never_installed_still_imports() -> None:
    code = (
        "import importlib.metadata as m\n"
        "def missing(name): raise m.PackageNotFoundError(name)\n"
        "m.version = missing\n"
        "import bridge; print(bridge.__version__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0+unknown"


def test_the_changelog_has_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, flags=re.M)
    assert headings[0] == ("Unreleased", "")
    dated = dict(headings[1:])
    assert dated.get(PROJECT["version"]), f"no dated section for {PROJECT['version']}"
    assert set(re.findall(r"^### (.+)$", text, flags=re.M)) <= SECTIONS


def test_the_classifiers_claim_each_python_from_requires_python_up() -> None:
    lowest = re.fullmatch(r">=3\.(\d+)", PROJECT["requires-python"])
    assert lowest is not None
    minors = sorted(
        int(c.rsplit(".", 1)[1])
        for c in PROJECT["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert minors == list(range(int(lowest.group(1)), 14))
