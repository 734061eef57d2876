"""Slack's rules for what an app sends, in one place: Block Kit as slack_sdk models it, the limits
Slack documents that slack_sdk leaves unchecked, and each Web API method's parameters as Slack's
OpenAPI document declares them.

The fake Slack (``tests/support/slack/fake_slack.py``) refuses with :func:`refusal` whatever this
module finds, in Slack's own error shapes, and the conformance tests assert it finds nothing in what
the renderers build -- so the fake and the tests cannot disagree about what Slack accepts.

**Block Kit.** Every block is parsed with ``slack_sdk.models`` (``Block.parse``, ``View``) and
``validate_json()`` is called on every object inside it -- elements, text objects, options,
accessories, input elements: slack_sdk validates the object it is asked about, and a parsed
radio button group, for one, keeps its options as plain dicts it never looks at. A block must
also survive the round trip (``to_dict()`` gives back what was sent), so a field slack_sdk does
not know is found too. On top of that, the limits of :data:`RULES` are checked on the JSON
itself, each with the page that documents it (``docs/limits.md`` lists them), whether or not
slack_sdk checks it as well: the rule holds whatever a later slack_sdk does.

**Lengths** are counted as slack_sdk counts them, in code points (``len``). The renderers cut in
UTF-16 units of the escaped JSON (:func:`platforms.slack.text.cost`), which are never fewer.

**Web API parameters.** ``tests/specs/slack_web_openapi_v2.json`` is Slack's OpenAPI 2.0
description of the Web API (the slackapi/slack-api-specs repository), vendored unmodified so a
clean checkout runs the tests offline (``tests/specs/README.md``). A call's parameters are
validated with ``jsonschema`` against a schema built from its method's parameter list: the
required ones present, none the method does not declare, each of its declared type. Two
adjustments, both Slack's documented behaviour: the token may come as an ``Authorization:
Bearer`` header (as slack_sdk sends it) instead of a parameter, and a JSON body carries the
parameters the document describes as JSON-encoded strings (``blocks``, ``view``) as JSON values.
The document predates Socket Mode, so ``apps.connections.open`` is described here from its
reference page (:data:`UNLISTED`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.basic_objects import JsonObject
from slack_sdk.models.blocks import Block, Option, TextObject
from slack_sdk.models.views import View

SPEC = Path(__file__).resolve().parents[2] / "specs" / "slack_web_openapi_v2.json"
DOCS = "https://docs.slack.dev/reference"


@dataclass(frozen=True)
class Limit:
    """One documented limit: what, how much, and the page that says so."""

    what: str
    most: int
    page: str


MESSAGE_BLOCKS = Limit("blocks per message", 50, f"{DOCS}/block-kit/blocks")
VIEW_BLOCKS = Limit("blocks per modal (at least 1)", 100, f"{DOCS}/views/modal-views")
TEXT_OBJECT = Limit(
    "text of any text object (at least 1)",
    3000,
    f"{DOCS}/block-kit/composition-objects/text-object",
)
SECTION_TEXT = Limit("section text", 3000, f"{DOCS}/block-kit/blocks/section-block")
SECTION_FIELDS = Limit("section fields", 10, f"{DOCS}/block-kit/blocks/section-block")
SECTION_FIELD = Limit("text of each section field", 2000, f"{DOCS}/block-kit/blocks/section-block")
BLOCK_ID = Limit(
    "block_id (unique within a message or view)", 255, f"{DOCS}/block-kit/blocks/section-block"
)
CONTEXT_ELEMENTS = Limit("context block elements", 10, f"{DOCS}/block-kit/blocks/context-block")
ACTIONS_ELEMENTS = Limit("actions block elements", 25, f"{DOCS}/block-kit/blocks/actions-block")
INPUT_LABEL = Limit("input block label", 2000, f"{DOCS}/block-kit/blocks/input-block")
INPUT_HINT = Limit("input block hint", 2000, f"{DOCS}/block-kit/blocks/input-block")
ACTION_ID = Limit(
    "action_id (unique within its block)",
    255,
    f"{DOCS}/block-kit/block-elements/button-element",
)
BUTTON_TEXT = Limit("button text", 75, f"{DOCS}/block-kit/block-elements/button-element")
BUTTON_VALUE = Limit("button value", 2000, f"{DOCS}/block-kit/block-elements/button-element")
CHECKBOXES = Limit(
    "checkboxes options (at least 1)", 10, f"{DOCS}/block-kit/block-elements/checkboxes-element"
)
RADIO_BUTTONS = Limit(
    "radio buttons options (at least 1)",
    10,
    f"{DOCS}/block-kit/block-elements/radio-button-group-element",
)
OPTION_TEXT = Limit("option text", 75, f"{DOCS}/block-kit/composition-objects/option-object")
OPTION_VALUE = Limit("option value", 150, f"{DOCS}/block-kit/composition-objects/option-object")
OPTION_DESCRIPTION = Limit(
    "option description", 75, f"{DOCS}/block-kit/composition-objects/option-object"
)
TEXT_INPUT_MAX = Limit(
    "plain_text_input max_length (1 to 3000; min_length 0 to 3000)",
    3000,
    f"{DOCS}/block-kit/block-elements/plain-text-input-element",
)
PLACEHOLDER = Limit(
    "placeholder text", 150, f"{DOCS}/block-kit/block-elements/plain-text-input-element"
)
VIEW_TITLE = Limit("modal title (required)", 24, f"{DOCS}/views/modal-views")
VIEW_BUTTON = Limit(
    "modal submit and close (submit required with input blocks)", 24, f"{DOCS}/views/modal-views"
)
PRIVATE_METADATA = Limit("modal private_metadata", 3000, f"{DOCS}/views/modal-views")
CALLBACK_ID = Limit("modal callback_id", 255, f"{DOCS}/views/modal-views")
VIEW_SIZE = Limit(
    "bytes of a view's JSON (view_too_large beyond 250 kB)", 250_000, f"{DOCS}/methods/views.open"
)
MESSAGE_TEXT = Limit(
    "message text (msg_too_long beyond it)", 40_000, f"{DOCS}/methods/chat.postMessage"
)
BLOCKS_JSON = Limit(
    "UTF-16 units of a message's block JSON (msg_blocks_too_long): no number documented; "
    "the fake's own, see the comment",
    13_400,
    f"{DOCS}/methods/chat.postMessage",
)
# Slack documents msg_blocks_too_long without a number. Reported: markdown blocks holding 13,297
# characters of text were accepted and a divider added lowered that to 13,172
# (https://github.com/slackapi/bolt-js/issues/2509); 11,341 characters of rich_text were refused
# (https://github.com/slackapi/bolt-js/issues/2867): Slack counts something besides the text.
# The fake counts the block JSON in UTF-16 units and refuses above 13,400, which the largest
# message reported accepted stays under (13,297 characters in two markdown blocks are 13,358 as
# JSON): stricter than the documentation, which sets no bound at all, and lenient enough not to
# refuse what Slack was seen to accept. Some messages Slack refuses pass the fake (those of the
# reports above); the renderers keep to 12,000 (platforms.slack.markup.BLOCKS_BUDGET), and the
# poster retries once at the tightest level if Slack still refuses.

RULES = (
    MESSAGE_BLOCKS,
    VIEW_BLOCKS,
    TEXT_OBJECT,
    SECTION_TEXT,
    SECTION_FIELDS,
    SECTION_FIELD,
    BLOCK_ID,
    CONTEXT_ELEMENTS,
    ACTIONS_ELEMENTS,
    INPUT_LABEL,
    INPUT_HINT,
    ACTION_ID,
    BUTTON_TEXT,
    BUTTON_VALUE,
    CHECKBOXES,
    RADIO_BUTTONS,
    OPTION_TEXT,
    OPTION_VALUE,
    OPTION_DESCRIPTION,
    TEXT_INPUT_MAX,
    PLACEHOLDER,
    VIEW_TITLE,
    VIEW_BUTTON,
    PRIVATE_METADATA,
    CALLBACK_ID,
    VIEW_SIZE,
    MESSAGE_TEXT,
    BLOCKS_JSON,
)
"""Every limit this module holds a payload to (``docs/limits.md`` lists them with their pages)."""

UNLISTED: dict[str, tuple[dict[str, Any], str]] = {
    "apps.connections.open": (
        {"type": "object", "properties": {}, "additionalProperties": False},
        f"{DOCS}/methods/apps.connections.open",
    ),
}
"""Methods the bridge calls that the OpenAPI document does not describe: their parameters as a
JSON Schema, from the reference page given."""

MESSAGE_METHODS = frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral"})
VIEW_METHODS = frozenset({"views.open", "views.update", "views.push"})

_PLAIN_ONLY = ("title", "submit", "close", "label", "hint", "placeholder", "description")
"""Fields whose text object must be ``plain_text`` (header and button texts are checked apart)."""


@dataclass(frozen=True)
class Problem:
    """One reason Slack would refuse a payload: where (a JSON pointer from the request's
    parameters: ``/blocks/0/text/text``, ``/view/title/text``) and why."""

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"[ERROR] {self.message} [json-pointer:{self.pointer}]"


@dataclass(frozen=True)
class Refusal:
    """Slack's answer to a call it refuses: its error code and the problems it names."""

    error: str
    problems: tuple[Problem, ...] = ()

    def body(self) -> dict[str, Any]:
        """The JSON Slack answers with: ``invalid_blocks`` lists each problem in ``errors`` and
        in ``response_metadata.messages``, ``invalid_arguments`` in the latter only; the size
        errors name no detail."""
        body: dict[str, Any] = {"ok": False, "error": self.error}
        if self.error == "invalid_blocks":
            body["errors"] = [f"{p.message} [json-pointer:{p.pointer}]" for p in self.problems]
        if self.problems:
            body["response_metadata"] = {"messages": [str(p) for p in self.problems]}
        return body


# -- sizes --------------------------------------------------------------------------------------


def json_units(value: Any) -> int:
    """The UTF-16 length of ``value`` as compact JSON with its non-ASCII kept: how the block
    budget is counted (see :data:`BLOCKS_JSON`)."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(raw.encode("utf-16-le")) // 2


def json_bytes(value: Any) -> int:
    """The UTF-8 size of ``value`` as compact JSON (:data:`VIEW_SIZE`)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


# -- Block Kit as slack_sdk models it -------------------------------------------------------------


def _children(obj: JsonObject) -> Iterator[tuple[str, Any]]:
    """The values inside ``obj`` that are objects in the JSON, with their keys: its attributes
    (an option keeps its text objects apart from them)."""
    if isinstance(obj, Option):
        yield "text", obj._text
        yield "description", obj._block_description
        return
    for key in sorted(obj.attributes):
        yield key, getattr(obj, key, None)


def _as_object(key: str, value: Any) -> Any:
    """A dict slack_sdk left unparsed (a radio button group's options), parsed as the object it
    is, so its validators run too."""
    if not isinstance(value, dict):
        return value
    if key in ("options", "initial_options", "initial_option"):
        return Option(**copy.deepcopy(value))
    if value.get("type") in ("plain_text", "mrkdwn"):
        return TextObject.parse(copy.deepcopy(value))
    return value


def _sdk_problems(obj: Any, pointer: str) -> Iterator[Problem]:
    """``validate_json()`` on ``obj`` and on every object inside it."""
    if isinstance(obj, list | tuple):
        for i, item in enumerate(obj):
            yield from _sdk_problems(item, f"{pointer}/{i}")
        return
    if not isinstance(obj, JsonObject):
        return
    try:
        obj.validate_json()
    except SlackObjectFormationError as exc:
        yield Problem(pointer, f"slack_sdk: {exc}")
    for key, value in _children(obj):
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                yield from _sdk_problems(_as_object(key, item), f"{pointer}/{key}/{i}")
        else:
            yield from _sdk_problems(_as_object(key, value), f"{pointer}/{key}")


def _parsed_block(raw: Mapping[str, Any], pointer: str, *, round_trip: bool) -> list[Problem]:
    """The block as slack_sdk parses it: known, valid throughout, and (``round_trip``: when
    nothing else was found, which may explain a difference, such as an empty text slack_sdk
    drops) sent back unchanged."""
    try:
        block = Block.parse(copy.deepcopy(dict(raw)))
        if block is None:
            return [Problem(pointer, f"unknown block type {raw.get('type')!r}")]
        problems = list(_sdk_problems(block, pointer))
        if round_trip and not problems and block.to_dict() != raw:
            return [
                Problem(pointer, "slack_sdk reads it otherwise: a field or value it does not know")
            ]
    except (SlackObjectFormationError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return [Problem(pointer, f"slack_sdk cannot read the block: {exc!r}")]
    return problems


# -- the documented limits, on the JSON itself -----------------------------------------------------


def _text_of(obj: Any) -> str | None:
    if isinstance(obj, Mapping) and isinstance(obj.get("text"), str):
        return str(obj["text"])
    return None


def _too_long(pointer: str, text: object, limit: Limit) -> list[Problem]:
    if isinstance(text, str) and len(text) > limit.most:
        return [Problem(pointer, f"must be at most {limit.most} characters ({limit.what})")]
    return []


def _too_many(pointer: str, items: object, limit: Limit, *, least: int = 0) -> list[Problem]:
    count = len(items) if isinstance(items, list) else 0
    if not least <= count <= limit.most:
        return [Problem(pointer, f"must hold {least} to {limit.most} items ({limit.what})")]
    return []


def _text_objects(
    node: Any, pointer: str, key: str = ""
) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """Every text object inside ``node``: its pointer, itself, and the key it sits under (a list's
    key for its items: a context block's ``elements``)."""
    if isinstance(node, Mapping):
        if node.get("type") in ("plain_text", "mrkdwn"):
            yield pointer, node, key
            return
        for k, value in node.items():
            yield from _text_objects(value, f"{pointer}/{k}", k)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _text_objects(item, f"{pointer}/{i}", key)


def _texts(block: Mapping[str, Any], pointer: str) -> list[Problem]:
    """Every text object: a string of 1 to 3000 characters; ``plain_text`` where only that is
    allowed."""
    problems: list[Problem] = []
    for where, obj, key in _text_objects(block, pointer):
        text = obj.get("text")
        if not isinstance(text, str) or not 1 <= len(text) <= TEXT_OBJECT.most:
            problems.append(
                Problem(f"{where}/text", f"must be 1 to 3000 characters ({TEXT_OBJECT.what})")
            )
        if key in _PLAIN_ONLY and obj.get("type") != "plain_text":
            problems.append(Problem(f"{where}/type", f"{key} must be a plain_text object"))
    return problems


def _options(element: Mapping[str, Any], pointer: str) -> list[Problem]:
    problems: list[Problem] = []
    for key in ("options", "initial_options"):
        for i, option in enumerate(element.get(key) or ()):
            at = f"{pointer}/{key}/{i}"
            if not isinstance(option, Mapping):
                problems.append(Problem(at, "an option must be an object"))
                continue
            problems += _too_long(f"{at}/text/text", _text_of(option.get("text")), OPTION_TEXT)
            problems += _too_long(f"{at}/value", option.get("value"), OPTION_VALUE)
            description = _text_of(option.get("description"))
            problems += _too_long(f"{at}/description/text", description, OPTION_DESCRIPTION)
    return problems


def _element(element: Any, pointer: str) -> list[Problem]:
    """An interactive element's own limits (action_id, button, choices, text input)."""
    if not isinstance(element, Mapping):
        return [Problem(pointer, "must be an object")]
    problems = _too_long(f"{pointer}/action_id", element.get("action_id"), ACTION_ID)
    kind = element.get("type")
    if kind == "button":
        text = element.get("text")
        problems += _too_long(f"{pointer}/text/text", _text_of(text), BUTTON_TEXT)
        if isinstance(text, Mapping) and text.get("type") != "plain_text":
            problems.append(Problem(f"{pointer}/text/type", "button text must be plain_text"))
        problems += _too_long(f"{pointer}/value", element.get("value"), BUTTON_VALUE)
    elif kind in ("checkboxes", "radio_buttons"):
        limit = CHECKBOXES if kind == "checkboxes" else RADIO_BUTTONS
        problems += _too_many(f"{pointer}/options", element.get("options"), limit, least=1)
        problems += _options(element, pointer)
    elif kind == "plain_text_input":
        most, least = element.get("max_length"), element.get("min_length")
        if most is not None and not (isinstance(most, int) and 1 <= most <= TEXT_INPUT_MAX.most):
            problems.append(Problem(f"{pointer}/max_length", "must be 1 to 3000"))
        if least is not None and not (isinstance(least, int) and 0 <= least <= 3000):
            problems.append(Problem(f"{pointer}/min_length", "must be 0 to 3000"))
        if isinstance(most, int) and isinstance(least, int) and least > most:
            problems.append(Problem(f"{pointer}/min_length", "must not exceed max_length"))
    problems += _too_long(
        f"{pointer}/placeholder/text", _text_of(element.get("placeholder")), PLACEHOLDER
    )
    return problems


def _block_limits(block: Mapping[str, Any], pointer: str) -> list[Problem]:
    problems = _too_long(f"{pointer}/block_id", block.get("block_id"), BLOCK_ID)
    problems += _texts(block, pointer)
    kind = block.get("type")
    elements: list[tuple[str, Any]] = []
    if kind == "section":
        if "text" not in block and not block.get("fields"):
            problems.append(Problem(pointer, "a section needs text or fields"))
        problems += _too_long(f"{pointer}/text/text", _text_of(block.get("text")), SECTION_TEXT)
        if "fields" in block:
            problems += _too_many(f"{pointer}/fields", block["fields"], SECTION_FIELDS, least=1)
            for i, field in enumerate(block.get("fields") or ()):
                problems += _too_long(f"{pointer}/fields/{i}/text", _text_of(field), SECTION_FIELD)
        if "accessory" in block:
            elements.append((f"{pointer}/accessory", block["accessory"]))
    elif kind == "context":
        problems += _too_many(
            f"{pointer}/elements", block.get("elements"), CONTEXT_ELEMENTS, least=1
        )
    elif kind == "actions":
        problems += _too_many(
            f"{pointer}/elements", block.get("elements"), ACTIONS_ELEMENTS, least=1
        )
        elements += [
            (f"{pointer}/elements/{i}", e) for i, e in enumerate(block.get("elements") or ())
        ]
    elif kind == "input":
        problems += _too_long(f"{pointer}/label/text", _text_of(block.get("label")), INPUT_LABEL)
        problems += _too_long(f"{pointer}/hint/text", _text_of(block.get("hint")), INPUT_HINT)
        if "label" not in block or "element" not in block:
            problems.append(Problem(pointer, "an input block needs a label and an element"))
        else:
            elements.append((f"{pointer}/element", block["element"]))
    action_ids: set[str] = set()
    for where, element in elements:
        problems += _element(element, where)
        action_id = element.get("action_id") if isinstance(element, Mapping) else None
        if isinstance(action_id, str):
            if action_id in action_ids:
                problems.append(
                    Problem(f"{where}/action_id", "action_id must be unique in its block")
                )
            action_ids.add(action_id)
    return problems


def block_problems(blocks: Any, pointer: str, limit: Limit) -> list[Problem]:
    """What Slack would refuse in a message's or a view's ``blocks`` (``limit``: how many)."""
    if not isinstance(blocks, list):
        return [Problem(pointer, "blocks must be an array")]
    problems = _too_many(pointer, blocks, limit, least=1)
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        at = f"{pointer}/{i}"
        if not isinstance(block, Mapping):
            problems.append(Problem(at, "a block must be an object"))
            continue
        limits = _block_limits(block, at)
        problems += _parsed_block(block, at, round_trip=not limits) + limits
        block_id = block.get("block_id")
        if isinstance(block_id, str):
            if block_id in block_ids:
                problems.append(Problem(f"{at}/block_id", "block_id must be unique"))
            block_ids.add(block_id)
    return problems


# -- surfaces -----------------------------------------------------------------------------------


def message_refusal(text: Any, blocks: Any) -> Refusal | None:
    """How ``chat.postMessage``, ``chat.update`` or ``chat.postEphemeral`` would refuse a
    message of ``text`` and ``blocks`` (either may be ``None``), or ``None``."""
    if not text and not blocks:
        return Refusal("no_text")
    if text is not None and (not isinstance(text, str) or len(text) > MESSAGE_TEXT.most):
        return Refusal("msg_too_long")
    if blocks is None:
        return None
    problems = block_problems(blocks, "/blocks", MESSAGE_BLOCKS)
    if problems:
        return Refusal("invalid_blocks", tuple(problems))
    if json_units(blocks) > BLOCKS_JSON.most:
        return Refusal("msg_blocks_too_long")
    return None


def view_problems(view: Any, pointer: str = "/view") -> list[Problem]:
    """What Slack would refuse in a modal ``view`` (``views.open``, ``views.update``, a
    ``response_action`` of ``update``)."""
    if not isinstance(view, Mapping) or view.get("type") != "modal":
        return [Problem(f"{pointer}/type", "must be a modal view")]
    problems: list[Problem] = []
    try:
        parsed = View(**copy.deepcopy(dict(view)))
    except (SlackObjectFormationError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return [Problem(pointer, f"slack_sdk cannot parse the view: {exc!r}")]
    try:
        parsed.validate_json()
    except SlackObjectFormationError as exc:
        problems.append(Problem(pointer, f"slack_sdk: {exc}"))
    problems += _texts({k: v for k, v in view.items() if k != "blocks"}, pointer)
    title = _text_of(view.get("title"))
    if not title:
        problems.append(Problem(f"{pointer}/title", "a modal needs a title"))
    problems += _too_long(f"{pointer}/title/text", title, VIEW_TITLE)
    for key in ("submit", "close"):
        problems += _too_long(f"{pointer}/{key}/text", _text_of(view.get(key)), VIEW_BUTTON)
    blocks = view.get("blocks")
    has_input = isinstance(blocks, list) and any(
        isinstance(b, Mapping) and b.get("type") == "input" for b in blocks
    )
    if has_input and "submit" not in view:
        problems.append(Problem(f"{pointer}/submit", "a modal with input blocks needs submit"))
    problems += _too_long(
        f"{pointer}/private_metadata", view.get("private_metadata"), PRIVATE_METADATA
    )
    problems += _too_long(f"{pointer}/callback_id", view.get("callback_id"), CALLBACK_ID)
    return problems + block_problems(blocks, f"{pointer}/blocks", VIEW_BLOCKS)


def response_problems(body: Any) -> list[Problem]:
    """What Slack would refuse in an app's answer to a modal submission: a ``response_action``
    of ``update`` or ``push`` carries a view, one of ``errors`` an object of messages by block id
    (https://docs.slack.dev/surfaces/modals#displaying_errors); an empty answer closes the modal."""
    if not body:
        return []
    if not isinstance(body, Mapping):
        return [Problem("/", "must be an object")]
    action = body.get("response_action")
    if action in ("update", "push"):
        return view_problems(body.get("view"))
    if action == "errors":
        errors = body.get("errors")
        if not errors or not isinstance(errors, Mapping):
            return [Problem("/errors", "must be an object of messages by block_id")]
        return [
            Problem(f"/errors/{k}", "must be a non-empty string")
            for k, v in errors.items()
            if not isinstance(v, str) or not v
        ]
    return [Problem("/response_action", f"unknown response_action {action!r}")]


def view_refusal(view: Any) -> Refusal | None:
    """How ``views.open``, ``views.update`` or ``views.push`` would refuse ``view``, or ``None``."""
    problems = view_problems(view)
    if problems:
        return Refusal("invalid_arguments", tuple(problems))
    if json_bytes(view) > VIEW_SIZE.most:
        return Refusal("view_too_large")
    return None


# -- Web API parameters, by Slack's OpenAPI document ----------------------------------------------


@cache
def spec() -> dict[str, Any]:
    """The vendored document, parsed once per process."""
    loaded: dict[str, Any] = json.loads(SPEC.read_text(encoding="utf-8"))
    return loaded


def _operation(method: str) -> dict[str, Any] | None:
    path = spec()["paths"].get(f"/{method}")
    if path is None:
        return None
    operation: dict[str, Any] = next(iter(path.values()))
    return operation


@cache
def _parameters(method: str) -> tuple[Draft4Validator, frozenset[str], bool] | None:
    """A validator of ``method``'s parameters (all but the token), the names of those the
    document sends as JSON-encoded strings, and whether it requires a token; ``None`` for a
    method neither the document nor :data:`UNLISTED` knows."""
    operation = _operation(method)
    if operation is None:
        if method not in UNLISTED:
            return None
        return Draft4Validator(UNLISTED[method][0]), frozenset(), True
    params = [p for p in operation.get("parameters", ()) if p["name"] != "token"]
    schema = {
        "type": "object",
        "properties": {p["name"]: {"type": p["type"]} for p in params},
        "required": [p["name"] for p in params if p.get("required")],
        "additionalProperties": False,
    }
    encoded = frozenset(
        p["name"] for p in params if p["type"] == "string" and "JSON" in p.get("description", "")
    )
    token = any(p["name"] == "token" and p.get("required") for p in operation["parameters"])
    return Draft4Validator(schema), encoded, token


def _as_declared(value: Any, kind: str | None, encoded: bool) -> Any:
    """``value`` as the document's wire types see it: a JSON value for a JSON-encoded string
    parameter as that string, ``"true"``/``"1"`` for a boolean as the boolean (form and query
    strings carry them so), a string of digits for an integer as the integer."""
    if encoded and isinstance(value, dict | list):
        return json.dumps(value)
    if kind == "boolean" and value in ("true", "false", "1", "0"):
        return value in ("true", "1")
    if kind == "integer" and isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def parameter_problems(method: str, args: Mapping[str, Any], *, bearer: bool) -> list[Problem]:
    """What is wrong with a call's parameters by the method's declaration (``bearer``: the token
    came as an ``Authorization`` header)."""
    known = _parameters(method)
    if known is None:
        return [Problem("/", f"{method} is not a Web API method the document or UNLISTED knows")]
    validator, encoded, needs_token = known
    props = validator.schema["properties"]
    given = {k: v for k, v in args.items() if k != "token"}
    instance = {
        k: _as_declared(v, props.get(k, {}).get("type"), k in encoded) for k, v in given.items()
    }
    problems = [
        Problem("/" + "/".join(str(p) for p in error.absolute_path), error.message)
        for error in validator.iter_errors(instance)
    ]
    if needs_token and not bearer and not args.get("token"):
        problems.append(Problem("/token", "a token is required"))
    return problems


def refusal(method: str, args: Mapping[str, Any], *, bearer: bool) -> Refusal | None:
    """How Slack would refuse a call of ``method`` with ``args`` for its shape (parameters,
    message, view), or ``None``: the one judgement the fake answers by and the tests assert."""
    problems = parameter_problems(method, args, bearer=bearer)
    if problems:
        return Refusal("invalid_arguments", tuple(problems))
    if method in MESSAGE_METHODS:
        return message_refusal(args.get("text"), args.get("blocks"))
    if method in VIEW_METHODS:
        return view_refusal(args.get("view"))
    return None


def describe(found: Refusal | list[Problem] | None) -> str:
    """Problems or a refusal as lines, for an assertion's message."""
    if found is None:
        return ""
    if isinstance(found, Refusal):
        return "\n".join([found.error, *map(str, found.problems)])
    return "\n".join(map(str, found))
