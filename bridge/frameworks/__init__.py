"""Adapters that put the ``ask_user`` tool into agent frameworks, each in that framework's idiom.

One module per framework, each behind its optional extra; importing this package (or ``bridge``)
imports no framework -- import the module you need:

- :mod:`bridge.frameworks.providers`: raw tool definitions for OpenAI (Chat Completions and
  Responses, plus a strict-mode variant) and Anthropic, and one function that executes a provider
  tool call and returns the content and error flag for the next request. No extra needed.
- :mod:`bridge.frameworks.chatlas`: a ``chatlas.Tool`` (extra ``chatlas``).
- :mod:`bridge.frameworks.pydantic_ai`: a pydantic-ai ``Tool`` that defers with ``CallDeferred``,
  and the helper that resumes the run from a delivered answer (extra ``pydantic-ai``).
- :mod:`bridge.frameworks.openai_agents`: an OpenAI Agents SDK ``FunctionTool`` that defers as a
  ``needs_approval`` interruption, and the helper that resumes the same ``RunState`` from a
  delivered answer (extra ``openai-agents``).
- :mod:`bridge.frameworks.langchain`: a LangChain ``BaseTool`` and a LangGraph variant that defers
  with ``interrupt()`` (extra ``langchain``).
- :mod:`bridge.frameworks.claude_agent_sdk`: a ``can_use_tool`` helper that answers Claude's
  built-in ``AskUserQuestion`` through any bridge handler, and a PreToolUse hook that defers it
  (``permissionDecision: "defer"``) with the helper that resumes the session from a delivered
  answer (extra ``claude-agent-sdk``).

Every adapter takes an optional :class:`~bridge.tool.AskUserTool` (default
:data:`~bridge.tool.tool_ask_user`), so per-agent tools from :func:`~bridge.tools_interactive`
keep their own handlers. The outcomes map the same way everywhere (``docs/outcomes.md`` tables
them, adapter by adapter): answers become the tool result; a call to fix
(:class:`~bridge.errors.InvalidQuestions`) becomes an error result the model reads and can fix --
a retry, where the framework has one; any other :class:`~bridge.errors.ToolRejected` (nobody
answered, the ask expired or was cancelled, a refused post, an unreachable store, a failed
handler) a failed result the model adapts to, never a retry; a deferral ends the model's turn (or
pauses the run, where the framework has its own way to pause and resume), with
``AskUserDeferred.extra`` (the ask id) kept out of the model's sight in the framework's own
metadata slot.

Importing an adapter whose framework is not installed raises ``ModuleNotFoundError`` whose message
is the one line to run, e.g. ``pip install 'ask-bridge[chatlas]'`` (:class:`_NamesTheExtra`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType

EXTRAS = {
    "chatlas": "chatlas",
    "pydantic_ai": "pydantic-ai",
    "langchain": "langchain",
    "openai_agents": "openai-agents",
    "claude_agent_sdk": "claude-agent-sdk",
}
"""Adapter module -> the extra that installs its framework."""


class _NamesTheExtra(MetaPathFinder):
    """Finds this package's adapters as usual, with a loader that turns a missing framework into
    the install line (one place, instead of a guard in every adapter)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        package, _, leaf = fullname.rpartition(".")
        if package != __name__ or leaf not in EXTRAS:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, fullname, EXTRAS[leaf])
        return spec


class _Loader(Loader):
    def __init__(self, inner: Loader, name: str, extra: str) -> None:
        self.inner, self.name, self.extra = inner, name, extra

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self.inner.exec_module(module)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                f"{self.name} needs the {self.extra} extra ({exc.name} is not installed): "
                f"pip install 'ask-bridge[{self.extra}]'",
                name=exc.name,
            ) from None


if not any(isinstance(finder, _NamesTheExtra) for finder in sys.meta_path):
    sys.meta_path.insert(0, _NamesTheExtra())
