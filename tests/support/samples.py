"""Question sets and small helpers that several test files share, as plain data.

Each set is the raw JSON a model sends as ``ask_user`` arguments. The lists and dicts are shared by
every test that imports them: build a variant with ``{**QUESTION, "header": ...}`` or
``copy.deepcopy``, never edit one in place.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

from bridge import Question, QuestionSet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def one_question_set(question: str, header: str, *options: tuple[str, str]) -> QuestionSet:
    """A validated set of one single-select question; options as (label, description)."""
    listed = [{"label": label, "description": about} for label, about in options]
    raw = {"question": question, "header": header, "options": listed}
    return QuestionSet.model_validate({"questions": [raw]})


# -- the report pair the core tests use: a single-select and a multi-select question ----------

FORMAT = "How should I format the output?"
SECTIONS = "Which sections should I include?"
FORMAT_QUESTION: dict[str, Any] = {
    "question": FORMAT,
    "header": "Format",
    "options": [
        {"label": "Summary", "description": "Brief overview"},
        {"label": "Detailed", "description": "Full explanation"},
    ],
}
SECTIONS_QUESTION: dict[str, Any] = {
    "question": SECTIONS,
    "header": "Sections",
    "multiSelect": True,
    "options": [
        {"label": "Intro", "description": "a"},
        {"label": "Body", "description": "b"},
    ],
}
FORMAT_AND_SECTIONS: list[dict[str, Any]] = [FORMAT_QUESTION, SECTIONS_QUESTION]

# -- the same pair, worded short, that the MCP and LangChain tests send ----------------------

SHORT_FORMAT_AND_SECTIONS: list[dict[str, Any]] = [
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

# -- the service-planning pair the framework adapter tests send ------------------------------

DATABASE = "Which database should the service use?"
FEATURES = "Which features ship first?"
DATABASE_QUESTION: dict[str, Any] = {
    "question": DATABASE,
    "header": "Database",
    "options": [
        {"label": "Postgres", "description": "Relational, already run by ops"},
        {"label": "SQLite", "description": "A file next to the service"},
    ],
}
FEATURES_QUESTION: dict[str, Any] = {
    "question": FEATURES,
    "header": "Features",
    "options": [
        {"label": "Search", "description": "Full-text search"},
        {"label": "Export", "description": "CSV export"},
        {"label": "Sharing", "description": "Share links"},
    ],
    "multiSelect": True,
}
DATABASE_AND_FEATURES: list[dict[str, Any]] = [DATABASE_QUESTION, FEATURES_QUESTION]
# What a person picks for DATABASE_AND_FEATURES (features in click order, not option order).
DATABASE_AND_FEATURES_PICKS: dict[str, Any] = {DATABASE: "Postgres", FEATURES: ["Export", "Search"]}


def answer_postgres(questions: list[Question], context: dict[str, Any]) -> dict[str, str]:
    """A ``tools_interactive`` callback: Postgres for DATABASE."""
    return {DATABASE: "Postgres"}


def answer_database_and_features(
    questions: list[Question], context: dict[str, Any]
) -> dict[str, Any]:
    """A ``tools_interactive`` callback: DATABASE_AND_FEATURES_PICKS."""
    return DATABASE_AND_FEATURES_PICKS


def example_globals(name: str) -> dict[str, Any]:
    """The globals of ``examples/<name>``, run as a module (not ``__main__``), for a test that
    borrows one of its functions. Its imports are found as when it runs as a script, with
    ``examples/`` first on ``sys.path`` (``handler.py``); neither the path nor the modules
    imported from there outlive the call, so nothing else ever imports them by accident."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        return runpy.run_path(str(EXAMPLES / name))
    finally:
        sys.path.remove(str(EXAMPLES))
        for module_name, module in list(sys.modules.items()):
            if Path(getattr(module, "__file__", None) or "/").parent == EXAMPLES:
                del sys.modules[module_name]


def q(text: str, header: str, labels: list[str], *, multi: bool = False) -> dict[str, Any]:
    """One question as the model sends it; each option described as "<label> description"."""
    return {
        "question": text,
        "header": header,
        "multiSelect": multi,
        "options": [{"label": lab, "description": f"{lab} description"} for lab in labels],
    }
