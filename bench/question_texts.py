"""The benches' realistic 4-question ask as the model sends it (plain JSON values): shared by
``engine_common`` and the child scripts that run over earlier revisions too, so it imports no
``bridge`` code."""

from __future__ import annotations

from typing import Any


def four_question_dicts() -> list[dict[str, Any]]:
    """Four questions of realistic size (a sentence each, four described options)."""
    return [
        {
            "question": f"Which deployment strategy should we use for service number {i}?",
            "header": f"Deploy {i}",
            "options": [
                {
                    "label": f"Option {j}",
                    "description": f"Roll out with strategy {j}, "
                    "keeping the old version running until checks pass",
                }
                for j in range(4)
            ],
            "multiSelect": i % 2 == 1,
        }
        for i in range(4)
    ]
