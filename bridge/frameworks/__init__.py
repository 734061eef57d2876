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
keep their own handlers. The three outcomes map the same way everywhere: answers become the tool
result; a :class:`~bridge.errors.ToolRejected` becomes an error result the model reads and can fix;
a deferral ends the model's turn (or pauses the run, where the framework has its own way to pause
and resume), with ``AskUserDeferred.extra`` (the ask id) kept out of the model's sight in the
framework's own metadata slot.
"""
