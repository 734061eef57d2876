"""The one error every bad setting is raised as, its one-line message, and the rules every
module reading settings of its own shares.

A leaf (nothing of ``bridge`` imported): each module that reads settings of its own --
:mod:`bridge.settings`, :mod:`bridge.logs`, :mod:`bridge.webhook_settings`, each platform's --
raises it and uses these rules without importing another's settings, so a low module like
:mod:`bridge.logs` never reaches up to the engine settings (and through them the store).
:mod:`bridge.settings` re-exports :class:`SettingsError` and :func:`one_line`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import SecretStr, ValidationError


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


def problems(exc: ValidationError) -> str:
    """``exc`` as what is wrong, in the validators' own words (each names its variable), joined
    by ``; `` on one line -- never the values, which pydantic's own report would show."""
    return "; ".join(error["msg"].removeprefix("Value error, ") for error in exc.errors())


def unset_if_blank(value: str | None) -> str | None:
    """A setting's value trimmed; ``None`` when it is unset or holds only whitespace, as a line
    copied from ``.env.example`` without a value does: that means "not set", never "set to
    nothing"."""
    if value is None or not value.strip():
        return None
    return value.strip()


def spaced(secret: str, *, trimmed: bool = False) -> bool:
    """Whether ``secret`` has a space or line break in it -- inside it, or with ``trimmed`` false
    at its ends too (``trimmed``: its reader strips the ends itself). No token or signing secret
    has one, so it is certainly a copying mistake (most often a word copied with it), and a local
    one: said as the settings are read, not after the platform refused it -- or, unreachable,
    after retrying for seconds. A blank one is unset, not spaced."""
    words = secret.split()
    return len(words) > 1 or (not trimmed and bool(words) and words != [secret])


def one_word(value: SecretStr | None, problem: str, *, trimmed: bool = False) -> SecretStr | None:
    """``value``, or ``ValueError(problem)`` when its secret is :func:`spaced` -- a validator's
    answer for a token or signing secret setting."""
    if value is not None and spaced(value.get_secret_value(), trimmed=trimmed):
        raise ValueError(problem)
    return value
