"""ask-bridge: let an LLM agent ask people multiple-choice questions and get the answers back.

The platform-free core: the question model, the ``ask_user`` tool and its handler chain. Chat
platforms (Slack, Discord, the terminal) live in ``platforms`` and plug in through entry points;
``import bridge`` needs none of them.
"""

from importlib.metadata import PackageNotFoundError, version

from bridge.deferred import DEFAULT_INSTRUCTIONS, AskUserDeferred
from bridge.errors import ToolRejected
from bridge.models import Answer, Option, Question, QuestionSet
from bridge.result import ToolOutcome, answers_result, deferred_result, normalise_answers
from bridge.tool import (
    AskContext,
    AskUserCallback,
    AskUserTool,
    Tool,
    ToolAnnotations,
    get_ask_user_callback,
    set_ask_user_callback,
    tool_ask_user,
    tools_interactive,
)
from bridge.validation import validate_questions

try:
    __version__ = version("ask-bridge")
    """The installed distribution's version: pyproject.toml's, the one place it is written."""
except PackageNotFoundError:  # the source tree on sys.path, never installed: no metadata to read
    __version__ = "0+unknown"

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "Answer",
    "AskContext",
    "AskUserCallback",
    "AskUserDeferred",
    "AskUserTool",
    "Option",
    "Question",
    "QuestionSet",
    "Tool",
    "ToolAnnotations",
    "ToolOutcome",
    "ToolRejected",
    "answers_result",
    "deferred_result",
    "get_ask_user_callback",
    "normalise_answers",
    "set_ask_user_callback",
    "tool_ask_user",
    "tools_interactive",
    "validate_questions",
]
