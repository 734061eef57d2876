"""Discord's own ids: the fields inside our modals.

Buttons carry the platform-neutral routing ids of :mod:`bridge.routing` (``pick``, ``other``,
``answer``, and ``next`` for the second step of a three- or four-question form, on an ephemeral
message only the person sees; see :mod:`platforms.discord.markup`). A modal's ``custom_id`` is
the id of the control that opened it, so a submission is routed the same way: ``answer`` (the
form), ``other`` (one typed answer), ``next`` (the typed-answer step). Buttons are read from
their ids alike (:meth:`platforms.discord.app.Interactions.on_interaction`).
"""

from __future__ import annotations

TYPED_FOR = "typed"
"""The form's checkbox group: for which multiSelect questions to type an answer as well."""


def pick_field(question: int) -> str:
    return f"q{question}"


def text_field(question: int) -> str:
    return f"t{question}"
