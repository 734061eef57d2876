"""A real browser for the web platform's tests: Debian's Chromium driven by Playwright, fenced to
loopback, and axe-core for the accessibility audit.

Playwright's own browser download is not reachable here, so the tests launch the system
Chromium (``apt-get install chromium``) by its path. Chromium calls update and account services
at start-up even when told not to, and tests may send traffic only to loopback: every launch
carries :data:`FENCE` (names resolve to nothing but loopback, any other connection goes to a
proxy on a closed port), and the tests record the page's requests and assert that none leaves
its origin.

``python -m tests.support.browser install`` (in the test command, before pytest) installs what
is missing and can be installed: Chromium through apt-get when run as root, axe-core through npm
into :data:`CACHE`. It never fails the run: where something cannot be installed it says so in
one line, and the browser tests skip with that reason (:func:`missing`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "browser"
"""Where npm puts axe-core (under ``build/``, which git ignores)."""
AXE_VERSION = "4.14.1"
AXE = CACHE / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM_ENV = "ASK_BRIDGE_CHROMIUM"
"""A Chromium executable to use instead of Debian's."""
_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
FENCE = (
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE [::1]",
    "--proxy-server=http://127.0.0.1:9",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--disable-gpu",
)
"""Launch arguments that keep Chromium on this machine (see the module docstring)."""


def chromium() -> str | None:
    """The Chromium executable to launch, or ``None`` when there is none."""
    named = os.environ.get(CHROMIUM_ENV)
    if named:
        return named if os.access(named, os.X_OK) else None
    return next((c for c in _CANDIDATES if os.access(c, os.X_OK)), None)


def missing() -> str | None:
    """Why the browser tests cannot run here (the skip reason), or ``None`` when they can."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    if chromium() is None:
        return (
            "no Chromium: apt-get install chromium (as root), or set "
            f"{CHROMIUM_ENV} to a Chromium executable"
        )
    return None


def axe_source() -> str | None:
    """axe-core's script, or ``None`` when npm could not install it."""
    return AXE.read_text(encoding="utf-8") if AXE.is_file() else None


def install() -> None:
    """Install Chromium and axe-core where missing and possible; one line on each outcome."""
    if chromium() is None:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            print("browser tests: no Chromium, and apt-get cannot install it here (not root)")
        else:
            print("browser tests: installing Chromium with apt-get", flush=True)
            quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            updated = subprocess.run(["apt-get", "update", "-qq"], env=env, **quiet, timeout=600)
            if updated.returncode == 0:
                subprocess.run(
                    ["apt-get", "install", "-y", "-qq", "chromium"], env=env, **quiet, timeout=900
                )
            if chromium() is None:
                print("browser tests: apt-get could not install Chromium; they will skip")
    if not AXE.is_file():
        npm = shutil.which("npm")
        if npm is None:
            print("browser tests: no npm, so no axe-core; the accessibility audit will skip")
            return
        CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", "--silent",
             f"axe-core@{AXE_VERSION}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0 or not AXE.is_file():
            why = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
            print(f"browser tests: npm could not install axe-core ({why}); the audit will skip")


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m tests.support.browser install")
    install()
