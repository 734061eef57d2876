"""What an example needs to reach its model, checked as it starts.

Without it, the model's SDK fails inside its first request, in a traceback dozens of lines long;
:func:`require` says in one line which variable to set instead (the example's docstring says the
rest) and exits with status 1, as ``ask-bridge`` does for a missing setting.
"""

from __future__ import annotations

import os
import sys


def require(variable: str, *alternatives: str) -> None:
    """Exit in one line naming ``variable`` unless it, or one of ``alternatives``, is set."""
    if any(os.environ.get(name, "").strip() for name in (variable, *alternatives)):
        return
    others = "".join(f" (or {name})" for name in alternatives)
    sys.exit(f"{sys.argv[0]}: set {variable}{others} to reach the model; see its docstring")
