"""The suite's core on the other supported Pythons, after the whole suite ran on this one.

``requires-python`` lets pip install the package on every Python from 3.11 on, so each supported
minor version runs, in a virtualenv of its own (``.venv-3.12``, ...), with only the Slack and
Discord extras and the test tools (``ask-bridge[slack,discord,test]``):

* the package imports and the CLI starts (``ask-bridge --version``), with no docstring its
  compiler refuses (3.13.0 refused one in ``bridge.text``), and the layering rules hold;
* the tool contract (what the model sends and reads back);
* the store contract over a real Redis-protocol server;
* end to end on each platform, every question shape: an ask answered by a signed Slack click
  through ``serve``, and one answered by a Discord click over the gateway.

The versions run one after the other's install (pip's editable install writes into the checkout)
and then side by side. A version that is not installed fails the run under CI (``CI`` set), where
the machines have them, and is skipped with one line elsewhere, so a contributor with only one
Python still runs everything else. Exit status: 0 when every installed version passed, 1 if any
failed (its pytest output is printed), 2 when CI lacks a version.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ("3.12", "3.13")
EXTRAS = ".[slack,discord,test]"
SUBSET = (
    "tests/test_architecture.py",
    "tests/bridge/test_tool.py",
    "tests/bridge/store/test_contract.py",
    "tests/platforms/slack/test_slack_e2e.py::test_each_shape_resolves_the_waiting_agent",
    "tests/platforms/discord/test_discord_e2e.py::test_every_shape_end_to_end",
)
STORE_PARAMS = "not memory and not cluster and not sentinel"
"""Of the store contract, the plain Redis server: the same Lua and client on every Python."""
PYTEST_ARGS = ("-q", "-p", "no:cacheprovider", "-k", STORE_PARAMS, *SUBSET)


def interpreter(version: str) -> str | None:
    """An interpreter of ``version`` that runs: pyenv's build of it, or ``python3.X`` on
    ``PATH`` (a pyenv shim on ``PATH`` exists even when its version is not selected)."""
    root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    builds = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
    for candidate in [*reversed(builds), shutil.which(f"python{version}")]:
        if candidate is None:
            continue
        probe = [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
        try:
            said = subprocess.run(probe, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if said.strip() == version:
            return candidate
    return None


def prepare(version: str, python: str) -> Path:
    """The version's virtualenv with the package (editable) and the test tools."""
    venv = ROOT / f".venv-{version}"
    run([python, "-m", "venv", str(venv)])
    pip = str(venv / "bin" / "pip")
    run([pip, "install", "-q", "-U", "pip"])
    run([pip, "install", "-q", "-e", EXTRAS])
    run([str(venv / "bin" / "ask-bridge"), "--version"])
    return venv


def run(argv: list[str]) -> None:
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stdout.write(done.stdout + done.stderr)
        raise SystemExit(f"other_pythons: {' '.join(argv[:4])} failed ({done.returncode})")


def main() -> int:
    ready: dict[str, Path] = {}
    for version in VERSIONS:
        python = interpreter(version)
        if python is None:
            if os.environ.get("CI"):
                print(f"other_pythons: Python {version} is not installed; CI needs it")
                return 2
            print(f"other_pythons: Python {version} is not installed; its tests are skipped")
            continue
        ready[version] = prepare(version, python)
    tests = {
        version: subprocess.Popen(
            [str(venv / "bin" / "pytest"), *PYTEST_ARGS],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for version, venv in ready.items()
    }
    failed = False
    for version, proc in tests.items():
        out, _ = proc.communicate()
        summary = out.strip().splitlines()[-1] if out.strip() else "no output"
        if proc.returncode != 0:
            failed = True
            sys.stdout.write(out)
        print(f"other_pythons: Python {version}: {summary}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
