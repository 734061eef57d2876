"""Process logging for the commands: level, format, and never a secret.

``LOG_LEVEL`` (or ``--log-level``): DEBUG, INFO, WARNING, ERROR (default: INFO for the commands
that keep running, WARNING for the others). ``LOG_FORMAT``:
``json`` -- one JSON object per line with ``ts``, ``level``, ``logger``, ``message`` and the
fields a lifecycle step carries (``ask_id``, ``step``, ``platform``, ``channel``, ``user_id``,
``outcome``: :mod:`bridge.metrics`) -- or ``text``; unset, JSON when stderr is not a terminal
(a container, a service manager) and text on a terminal. ``LOG_QUESTIONS=1`` adds the question
texts to lifecycle lines (off by default: they may be confidential). Every line passes through
:func:`scrub`, which masks Slack tokens and passwords in URLs whatever logged them.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from functools import cache
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_SECRETS = re.compile(
    r"(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+)|(://[^/\s:@]*:)[^@\s/]+@|(Bot )[\w.-]{20,}"
)


class LogSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    level: str | None = Field(default=None, validation_alias="LOG_LEVEL")
    format: Literal["json", "text", "auto"] = Field(default="auto", validation_alias="LOG_FORMAT")
    log_questions: bool = Field(default=False, validation_alias="LOG_QUESTIONS")

    @field_validator("level")
    @classmethod
    def _level(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().upper()
        if value not in LEVELS:
            raise ValueError(f"use one of {', '.join(LEVELS)}")
        return value

    @field_validator("format", mode="before")
    @classmethod
    def _format(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) and value.strip() else "auto"


@cache
def settings() -> LogSettings:
    """The logging settings, read once (a bad value: :class:`bridge.settings.SettingsError`)."""
    from pydantic import ValidationError

    from bridge.settings import SettingsError, one_line

    try:
        return LogSettings()
    except ValidationError as exc:
        raise SettingsError(one_line(exc)) from None


def scrub(text: str) -> str:
    """``text`` with Slack tokens, URL passwords and Discord bot tokens masked."""

    def mask(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1)[:5] + "***"
        if m.group(2):
            return m.group(2) + "***@"
        return m.group(3) + "***"

    return _SECRETS.sub(mask, text)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update({k: v for k, v in fields.items() if v is not None and k not in out})
        if record.exc_info:
            out["error"] = scrub(self.formatException(record.exc_info))
        return json.dumps(out, ensure_ascii=False, default=str)


class _ScrubbingText(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


def setup(level: str) -> None:
    """Configure the root logger on stderr at ``level``, in ``LOG_FORMAT`` (:class:`LogSettings`).
    Called once per process by the command line."""
    chosen = settings()
    name = level.upper()
    fmt = chosen.format
    if fmt == "auto":
        fmt = "text" if sys.stderr.isatty() else "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else _ScrubbingText(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    handler.setLevel(name)  # a logger set lower for its own handlers still prints nothing here
    root.addHandler(handler)
    root.setLevel(name)
