"""Shared pieces of the MCP tests: a question set, and result readers."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which format?",
        "header": "Format",
        "options": [
            {"label": "Summary", "description": "Brief overview"},
            {"label": "Detailed", "description": "Full explanation"},
        ],
    },
    {
        "question": "Which sections?",
        "header": "Sections",
        "multiSelect": True,
        "options": [
            {"label": "Intro", "description": "Background"},
            {"label": "Results", "description": "Findings"},
            {"label": "Appendix", "description": "Raw data"},
        ],
    },
]

BAD_QUESTIONS: list[dict[str, Any]] = [
    {"question": "Q?", "header": "A header far too long", "options": [{"label": "only"}]}
]


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def answers_of(result: types.CallToolResult) -> list[dict[str, Any]]:
    assert not result.is_error, text_of(result)
    payload = json.loads(text_of(result))
    answers: list[dict[str, Any]] = payload["answers"]
    return answers


def assert_rejected(result: types.CallToolResult, *fragments: str) -> None:
    assert result.is_error
    text = text_of(result)
    assert text.startswith("The ask_user call was rejected"), text
    for fragment in fragments:
        assert fragment in text, text
