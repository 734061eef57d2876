"""The one error every bad setting is raised as, and its one-line message.

A leaf (nothing of ``bridge`` imported): each module that reads settings of its own --
:mod:`bridge.settings`, :mod:`bridge.logs`, :mod:`bridge.webhooks` -- raises it without
importing another's settings, so a low module like :mod:`bridge.logs` never reaches up to the
engine settings (and through them the store). :mod:`bridge.settings` re-exports both names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class SettingsError(ValueError):
    """An invalid setting in the environment; the message is one line naming the variable(s)."""


def one_line(exc: ValidationError) -> str:
    """``exc`` as the one line a :class:`SettingsError` says: each bad variable and what is wrong
    with it (pydantic's own report spans lines and repeats each value, which may be a secret)."""
    problems = []
    for error in exc.errors():
        name = ".".join(str(part) for part in error["loc"]) or "settings"
        problems.append(f"{name}: {error['msg'].removeprefix('Value error, ')}")
    return "invalid setting " + "; ".join(problems)
