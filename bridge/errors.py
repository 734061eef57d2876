"""The one exception a host has to know about.

Everything the model should read as an error result -- a question set it must fix, a handler that
failed, nobody answering -- is raised as :class:`ToolRejected`. A host needs exactly one rule: catch
``ToolRejected`` around the tool call and send ``.message`` back to the model as an error result.
"""

from __future__ import annotations


class ToolRejected(Exception):
    """A tool call the model must read as an error result.

    ``message`` is written for the model: it says what went wrong and, where the model can fix it,
    how.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __repr__(self) -> str:
        return f"ToolRejected({self.message!r})"
