"""The one exception a host has to know about, and the kinds of it a program may tell apart.

Everything the model should read as an error result -- a question set it must fix, a handler that
failed, nobody answering -- is raised as :class:`ToolRejected`. A host needs exactly one rule: catch
``ToolRejected`` around the tool call and send ``.message`` back to the model as an error result.

A program that acts on *why* (``ask-bridge ask`` maps it to its exit status) catches the
subclasses instead of re-reading the store: :class:`InvalidQuestions` (the call itself must be
fixed), :class:`NotAnswered` (the ask ended, expired or cancelled, without an answer) and
:class:`PostFailed` (the platform refused to show the questions). Any other ``ToolRejected`` is a
handler failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.record import AskRecord


class ToolRejected(Exception):
    """A tool call the model must read as an error result.

    ``message`` is written for the model: it says what went wrong and, where the model can fix it,
    how.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class InvalidQuestions(ToolRejected):
    """The call's arguments or question set break the tool contract: the model must fix its
    call (every problem is listed in ``message``); nothing was asked."""


class NotAnswered(ToolRejected):
    """The ask ended without an answer: ``record`` is how it ended (status expired or
    cancelled), so a caller can tell which without asking the store again."""

    def __init__(self, message: str, record: AskRecord) -> None:
        super().__init__(message)
        self.record = record


class PostFailed(ToolRejected):
    """The platform refused to show the questions (nobody saw them). ``record`` is the ask as
    closed after the failure (cancelled, with a ``post_failed`` event in its history)."""

    def __init__(self, message: str, record: AskRecord) -> None:
        super().__init__(message)
        self.record = record
