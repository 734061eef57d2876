"""Checking the model's ``questions`` argument and turning it into a :class:`QuestionSet`.

The arguments come from a language model, so they are untrusted and often slightly wrong. Rather
than let pydantic's messages (or a ``TypeError``) reach the agent loop, every rule of the contract
is checked here by hand and *all* violations go back in one :class:`ToolRejected`, each naming its
place (``questions[2].options[0].label is empty``) and how to fix it, so the model can repair the
whole call in one retry. Only a set that passes every rule is built into the frozen models.

Hosts that receive a whole arguments object (JSON text or a dict: the provider APIs, chatlas,
pydantic-ai, the OpenAI Agents SDK, both LangChain tools, the MCP server) unwrap it with
:func:`questions_from_arguments` first, so every host answers the same mistakes with the same
words. (Claude's built-in ``AskUserQuestion`` is not our tool: its input keeps only the contract's
fields, :data:`QUESTION_FIELDS` and :data:`OPTION_FIELDS`, before the same checks.)

Whether a text is empty, and whether two labels (or two questions) are the same, is decided on what
a person sees (:func:`bridge.text.look`): every platform shows text without zero-width, bidi, tag
and control characters, so a label of only such characters would show as nothing, and "Approve"
next to "Appro\\u200bve" as two identical buttons (empty is :func:`bridge.text.blank`, the one rule
people's typed answers are judged by too). The texts themselves are kept as sent (stripped), so
answers quote the model's own words. Control characters other than newline and tab, and the line
and paragraph separators U+2028 and U+2029, are refused wherever they are, at the ends too
(``str.strip`` would otherwise drop a C1 ``NEL`` there silently while refusing it inside).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from bridge.errors import InvalidQuestions
from bridge.models import (
    MAX_DESCRIPTION,
    MAX_HEADER,
    MAX_LABEL,
    MAX_OPTIONS,
    MAX_QUESTION_TEXT,
    MAX_QUESTIONS,
    MIN_OPTIONS,
    MIN_QUESTIONS,
    Option,
    Question,
    QuestionSet,
    checked_question_set,
)
from bridge.text import ASCII_CONTROL, blank, look

QUESTION_FIELDS = ("question", "header", "options", "multiSelect")
OPTION_FIELDS = ("label", "description")
_QUESTION_KEYS = frozenset(QUESTION_FIELDS)
_OPTION_KEYS = frozenset(OPTION_FIELDS)

_QUESTIONS_ARRAY = f"an array of {MIN_QUESTIONS} to {MAX_QUESTIONS} question objects"
_OPTION_EXAMPLE = '{"label": "...", "description": "..."}'


def _question_example(options: str) -> str:
    return f'{{"question": "...", "header": "...", "options": [{options}], "multiSelect": false}}'


_SHAPE = f"{_QUESTIONS_ARRAY}, each {_question_example(f'{_OPTION_EXAMPLE}, ...')}"

_MAX_LENGTH = {
    "question": MAX_QUESTION_TEXT,
    "label": MAX_LABEL,
    "description": MAX_DESCRIPTION,
}  # header has its own, more specific check in _Checker.question

MAX_BYTES = {
    "question": 2 * MAX_QUESTION_TEXT,
    "header": 4 * MAX_HEADER,
    "label": 2 * MAX_LABEL,
    "description": 2 * MAX_DESCRIPTION,
}
"""Bounds in UTF-8 bytes beside those in characters: what an ask weighs in the store (and on the
wire) follows its bytes, and a text of 3- or 4-byte characters would otherwise weigh up to four
times its character bound. Twice the character bound leaves every Latin text its full length and
others at least half of it; a header may be any 12 characters, emoji included."""

_MAX_CHARS = {key: min(_MAX_LENGTH.get(key, size), size) for key, size in MAX_BYTES.items()}
"""The most characters an ASCII text may have (one byte each): within both bounds."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
"""Control characters other than tab and newline (C0, DEL and C1), and the line and paragraph
separators: no platform shows the controls, JSON escapes each to six bytes, none belongs in a
question, and a separator is a newline written so that some readers break the line and others
(a JavaScript string, a log line) do not."""
_SEPARATORS = {"\u2028": "line separator", "\u2029": "paragraph separator"}

MAX_LISTED_PROBLEMS = 20
"""A rejection lists at most this many problems, then how many more there are: a huge malformed
call must not turn into a huge message (the model repairs the kinds of mistake, not each one)."""

_EXTRA_CHECKED = 2
"""Items past the allowed count of questions or options are counted, and only this many of them
checked: the model is told to drop the rest anyway."""

_FIX = {
    "question": "give the full question text",
    "header": f"give a short label of at most {MAX_HEADER} characters",
    "label": "give every option a short label",
    "description": "say what choosing this option means",
}


def json_type(value: object) -> str:
    """The JSON name of a value's type, as the model thinks of it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, Sequence):
        return "array"
    return type(value).__name__


def _as_list(value: object) -> list[object] | None:
    """A list/tuple as a list; anything else (strings and bytes included) as ``None``."""
    if isinstance(value, list | tuple):
        return list(value)
    return None


def _as_mapping(value: object) -> Mapping[Any, object] | None:
    """A mapping (or a ready :class:`Question`/:class:`Option` model, dumped) or ``None``."""
    if type(value) is dict:  # decoded JSON: most of the time
        return value
    if isinstance(value, Question | Option):
        return value.model_dump()
    if isinstance(value, Mapping):
        return value
    return None


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(text: str, limit: int = 40) -> str:
    """A bounded ``repr`` of ``text`` for a rejection message."""
    return repr(shorten(text, limit))


class _Checker:
    """Collects violations; each ``text`` check returns the stripped string or ``None``."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.checked: list[dict[str, object]] = []
        """Each question's stripped fields, while no problem was found: what the models are
        built from, so the arguments are walked once."""

    def add(self, problem: str) -> None:
        self.problems.append(problem)

    def unknown_fields(
        self, obj: Mapping[Any, object], path: str, allowed: tuple[str, ...]
    ) -> None:
        for key in obj:
            if key not in allowed:
                # not repr(): a Python caller's key may nest deeper than repr can recurse
                shown = _short(key) if isinstance(key, str) else f"of type {json_type(key)}"
                self.add(
                    f"{path} has an unknown field {shown}: remove it "
                    f"(allowed fields: {', '.join(allowed)})"
                )

    def text(self, obj: Mapping[Any, object], key: str, path: str) -> str | None:
        value = obj.get(key)
        if (
            type(value) is str
            and value.isascii()
            and (value.isprintable() or ASCII_CONTROL.search(value) is None)
        ):
            # nearly every text: ASCII without controls, so blank only if all whitespace, its
            # bytes its characters, and nothing to encode -- the same checks, in fewer steps
            stripped = value.strip()
            if stripped and len(stripped) <= _MAX_CHARS[key]:
                return stripped
        return self._text_problem(obj, key, path)

    def _text_problem(self, obj: Mapping[Any, object], key: str, path: str) -> str | None:
        """Every rule for one text, in the order its first broken one is reported."""
        where = f"{path}.{key}"
        if key not in obj:
            self.add(f"{where} is missing: {_FIX[key]}")
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.add(f"{where} must be a string, got {json_type(value)}: {_FIX[key]}")
            return None
        stripped = value.strip()
        try:
            encoded = stripped.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates, e.g. from a "\ud800" JSON escape
            self.add(f"{where} is not valid Unicode text: remove the broken characters")
            return None
        if blank(stripped):  # blank, or only characters no platform shows
            self.add(f"{where} is empty: {_FIX[key]}")
            return None
        # not only inside: the ends too. Every character of _CONTROL is unprintable, and
        # str.isprintable tells most texts in a fraction of the class's search
        control = None if value.isprintable() else _CONTROL.search(value)
        if control is not None:
            char = control.group()
            if char in _SEPARATORS:
                self.add(
                    f"{where} contains the {_SEPARATORS[char]} U+{ord(char):04X}: write a "
                    "newline instead (only newline and tab are allowed)"
                )
            else:
                self.add(
                    f"{where} contains the control character U+{ord(char):04X}: remove "
                    "control characters (only newline and tab are allowed)"
                )
            return None
        limit = _MAX_LENGTH.get(key)
        if limit is not None and len(stripped) > limit:
            self.add(
                f"{where} is {len(stripped)} characters long: shorten it to at most {limit} "
                "characters"
            )
            return None
        size = len(encoded)
        if size > MAX_BYTES[key]:
            self.add(
                f"{where} is {size} bytes long in UTF-8: shorten it to at most {MAX_BYTES[key]} "
                "bytes (characters outside Latin scripts take 2 to 4 bytes each)"
            )
            return None
        return stripped

    def question(self, item: object, path: str) -> str | None:
        """Check one question; return its stripped text for the duplicate check. Once it passes,
        its stripped fields are in :attr:`checked`, ready for the models."""
        obj = _as_mapping(item)
        if obj is None:
            self.add(
                f"{path} must be an object with question, header, options and optional "
                f"multiSelect, got {json_type(item)}"
            )
            return None
        if not obj.keys() <= _QUESTION_KEYS:
            self.unknown_fields(obj, path, QUESTION_FIELDS)
        text = self.text(obj, "question", path)
        header = self.text(obj, "header", path)
        if header is not None and len(header) > MAX_HEADER:
            self.add(
                f"{path}.header {_short(header)} is {len(header)} characters long: use at most "
                f"{MAX_HEADER} characters (a one or two word label such as 'Format')"
            )
        if "multiSelect" in obj and not isinstance(obj["multiSelect"], bool):
            self.add(
                f"{path}.multiSelect must be true or false, got {json_type(obj['multiSelect'])}"
            )
        options = self.options(obj, path)
        if not self.problems:
            checked: dict[str, object] = {"question": text, "header": header, "options": options}
            if "multiSelect" in obj:
                checked["multiSelect"] = obj["multiSelect"]
            self.checked.append(checked)
        return text

    def options(self, obj: Mapping[Any, object], path: str) -> list[dict[str, str | None]]:
        """Check a question's options; return each one's stripped fields."""
        checked: list[dict[str, str | None]] = []
        where = f"{path}.options"
        if "options" not in obj:
            self.add(f"{where} is missing: give {MIN_OPTIONS} to {MAX_OPTIONS} options")
            return checked
        options = _as_list(obj["options"])
        if options is None:
            self.add(
                f"{where} must be an array of {MIN_OPTIONS} to {MAX_OPTIONS} objects with label "
                f"and description, got {json_type(obj['options'])}"
            )
            return checked
        if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
            self.add(
                f"{where} has {len(options)} option{'s' if len(options) != 1 else ''}: give "
                f"{MIN_OPTIONS} to {MAX_OPTIONS} options (the person can always type their own "
                "answer, so do not add an 'Other' option)"
            )
        seen: dict[str, tuple[int, str]] = {}
        for j, option in enumerate(options[: MAX_OPTIONS + _EXTRA_CHECKED]):
            opath = f"{where}[{j}]"
            ob = _as_mapping(option)
            if ob is None:
                self.add(
                    f"{opath} must be an object with label and description, got {json_type(option)}"
                )
                continue
            if not ob.keys() <= _OPTION_KEYS:
                self.unknown_fields(ob, opath, OPTION_FIELDS)
            label = self.text(ob, "label", opath)
            checked.append({"label": label, "description": self.text(ob, "description", opath)})
            if label is None:
                continue
            first = seen.setdefault(look(label), (j, label))
            if first[0] != j:
                self.add(
                    f"{opath}.label {_short(label)} repeats {where}[{first[0]}].label"
                    f"{_alike(label, first[1])}: give each option of a question a distinct label"
                )
        return checked


def _alike(text: str, first: str) -> str:
    """Why ``text`` repeats ``first`` when the model sent two different strings."""
    if text == first:
        return ""
    return (
        " (they differ only in invisible characters, spacing or how accents are encoded, so "
        "they look the same)"
    )


def validate_questions(raw: object) -> QuestionSet:
    """The ``questions`` argument as a :class:`QuestionSet`, or :class:`ToolRejected`.

    ``raw`` is the value of the tool's ``questions`` argument: a list of question objects (dicts
    or :class:`Question` models, mixed freely), or a ready :class:`QuestionSet`. Any other input --
    a string, even one holding valid JSON, a number, ``None`` -- is rejected with a message asking
    for an array of objects. A ready set is taken as it is unless an option in it has no
    description (one read back from a store that dropped them: :class:`Option`): then it is
    checked as a list, and refused as a model's option without one would be. Nothing but
    ``ToolRejected`` is ever raised.
    """
    if isinstance(raw, QuestionSet):
        if all(o.description for q in raw.questions for o in q.options):
            return raw
        raw = raw.questions
    if isinstance(raw, str | bytes):
        _reject(
            [
                f"questions must be {_SHAPE}, not a string (even one holding JSON text): pass "
                "the array itself as the value of questions"
            ]
        )
    items = _as_list(raw)
    if items is None:
        _reject([f"questions must be {_SHAPE}, got {json_type(raw)}"])
    checker = _Checker()
    if not items:
        checker.add(f"questions is empty: give {MIN_QUESTIONS} to {MAX_QUESTIONS} questions")
    elif len(items) > MAX_QUESTIONS:
        checker.add(
            f"questions has {len(items)} items: give at most {MAX_QUESTIONS} questions (ask the "
            "most important ones now and the rest in a later call)"
        )
    seen: dict[str, tuple[int, str]] = {}
    for i, item in enumerate(items[: MAX_QUESTIONS + _EXTRA_CHECKED]):
        text = checker.question(item, f"questions[{i}]")
        if text is None:
            continue
        first = seen.setdefault(look(text), (i, text))
        if first[0] != i:
            checker.add(
                f"questions[{i}].question repeats questions[{first[0]}].question"
                f"{_alike(text, first[1])}: give each question a distinct text"
            )
    if checker.problems:
        _reject(checker.problems)
    return checked_question_set(checker.checked)


def _reject(problems: list[str]) -> NoReturn:
    count = len(problems)
    head = (
        "The ask_user call was rejected: "
        + ("1 problem" if count == 1 else f"{count} problems")
        + " to fix before calling it again."
    )
    listed = [f"- {p}" for p in problems[:MAX_LISTED_PROBLEMS]]
    if count > MAX_LISTED_PROBLEMS:
        listed.append(
            f"- ... and {count - MAX_LISTED_PROBLEMS} more problems of the same kinds: fix those "
            "above the same way everywhere"
        )
    raise InvalidQuestions("\n".join([head, *listed]))


# -- the arguments object ------------------------------------------------------------------------

_EXPECTED = (
    f'send the arguments as a JSON object with one field, "questions": {_QUESTIONS_ARRAY}, e.g. '
    f'{{"questions": [{_question_example(f"{_OPTION_EXAMPLE}, {_OPTION_EXAMPLE}")}]}}'
)
_MAX_NAMED = 5
"""Unknown argument names listed in a rejection; the rest are counted."""


def arguments_rejected(problem: str) -> InvalidQuestions:
    """The rejection of a call's arguments for ``problem``, with the shape to send instead (also
    ``ask-bridge ask``'s, for a questions file that holds no question set)."""
    return InvalidQuestions(f"The ask_user call was rejected: {problem}: {_EXPECTED}.")


def questions_from_arguments(arguments: str | bytes | Mapping[str, Any] | None) -> object:
    """The ``questions`` value from a tool call's arguments object, or :class:`ToolRejected`.

    ``arguments`` is the JSON text a provider sends (OpenAI) or the decoded object (Anthropic,
    MCP, most frameworks). Malformed JSON (including JSON nested too deeply to decode), a
    non-object, a missing ``questions`` or an unknown argument is rejected with a message the
    model can act on. A ``multiSelect`` of ``null`` -- how OpenAI strict mode says "left out" --
    is dropped; the value itself is for :func:`validate_questions`.
    """
    if arguments is None or (isinstance(arguments, str | bytes) and not arguments.strip()):
        raise arguments_rejected("the arguments are empty")
    if isinstance(arguments, str | bytes):
        decoded = decode_arguments(arguments)
    else:
        decoded = arguments
    if not isinstance(decoded, Mapping):
        raise arguments_rejected(f"the arguments must be a JSON object, got {json_type(decoded)}")
    unknown = [key for key in decoded if key != "questions"]
    if unknown:
        names = ", ".join(
            _short(key) if isinstance(key, str) else json_type(key) for key in unknown[:_MAX_NAMED]
        )
        more = f" and {len(unknown) - _MAX_NAMED} more" if len(unknown) > _MAX_NAMED else ""
        noun, pronoun = ("argument", "it") if len(unknown) == 1 else ("arguments", "them")
        raise arguments_rejected(f"unknown {noun} {names}{more} (remove {pronoun})")
    if "questions" not in decoded:
        raise arguments_rejected('the "questions" argument is missing')
    return _drop_null_multiselect(decoded["questions"])


def decode_arguments(text: str | bytes) -> object:
    """JSON text of tool arguments as Python data; anything unreadable is a :class:`ToolRejected`
    the model can act on (never a ``RecursionError`` or ``ValueError`` from the decoder)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise arguments_rejected(
            f"the arguments are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except UnicodeDecodeError:
        raise arguments_rejected("the arguments are not UTF-8 text") from None
    except RecursionError:
        raise arguments_rejected("the arguments are nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer beyond the decoder's digit limit
        reason = str(exc).split(";")[0].strip()[:120] or type(exc).__name__
        raise arguments_rejected(f"the arguments are not valid JSON ({reason})") from None


def _drop_null_multiselect(questions: object) -> object:
    if not isinstance(questions, list) or not any(
        type(q) is not dict or q.get("multiSelect", False) is None for q in questions
    ):  # nothing to drop (nearly always): the list as it came, no copy
        return questions
    return [
        {k: v for k, v in q.items() if not (k == "multiSelect" and v is None)}
        if isinstance(q, Mapping)
        else q
        for q in questions
    ]
