"""Discord's rules for what a bot sends, in one place: the request schema of each route in
Discord's official OpenAPI document, plus the documented limits that schema does not state.

The fake Discord (``tests/support/discord/fake_discord.py``) refuses with :func:`refusal` whatever
:func:`check_request` finds, and the conformance tests assert it finds nothing in what the
renderers build -- so the fake and the tests cannot disagree about what Discord accepts.

**The document.** ``tests/specs/discord_openapi.json`` is Discord's OpenAPI 3.1 description of
API v10 (the discord/discord-api-spec repository), vendored unmodified so a clean checkout runs
the tests offline (``tests/specs/README.md``). A request body is validated against its route's
``application/json`` request schema as JSON Schema 2020-12, every ``$ref`` resolved within the
document.

**Snowflakes.** discord.py sends ids as JSON integers (``allowed_mentions.users``,
``message_reference.message_id``, ``recipient_id``); the document types every snowflake as a
string of digits, and Discord accepts both. An integer is therefore written as its digits before
validation, wherever the schema at that place is a snowflake and no alternative there takes an
integer (:func:`normalise`), so that conformance is judged on everything else.

**Lengths** are counted in code points, as JSON Schema's ``maxLength`` counts them and as
Discord counts characters (twilight-validate documents its copies of these limits "in
codepoints"). The renderers cut in UTF-16 code units, which are never fewer, so what they build
fits either way.

**The rules the schema cannot express** (:data:`RULES`, each with the page that documents it),
and where the document states less than the documentation (a bot's ``content`` is 2,000
characters, the document says 4,000 for create and edit; a classic message holds 5 action rows
and a modal 5 top-level components, the document says 40 for both, the Components V2 count).
Limits the document does state (button label 80, custom_id 1-100, modal title 45, ...) are in
the table too, so :func:`check_request` holds to them whatever a later document says, and the
tests show where the document agrees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC = Path(__file__).resolve().parents[2] / "specs" / "discord_openapi.json"
_BASE = "urn:discord-openapi"
"""The URI the document is registered under, so its ``#/components/...`` refs resolve."""

IS_COMPONENTS_V2 = 1 << 15
"""The message flag that switches a message to Components V2 (no content or embeds, 40
components in all instead of 5 action rows)."""

DOCS = "https://discord.com/developers/docs"


@dataclass(frozen=True)
class Limit:
    """One documented limit: what, how much, and the page that says so."""

    what: str
    most: int
    page: str


CONTENT = Limit("message content", 2000, f"{DOCS}/resources/message#create-message")
EMBEDS = Limit("embeds per message", 10, f"{DOCS}/resources/message#create-message")
EMBED_TITLE = Limit("embed title", 256, f"{DOCS}/resources/message#embed-object-embed-limits")
EMBED_DESCRIPTION = Limit(
    "embed description", 4096, f"{DOCS}/resources/message#embed-object-embed-limits"
)
EMBED_AUTHOR = Limit(
    "embed author name", 256, f"{DOCS}/resources/message#embed-object-embed-limits"
)
EMBED_FOOTER = Limit(
    "embed footer text", 2048, f"{DOCS}/resources/message#embed-object-embed-limits"
)
EMBED_FIELDS = Limit("embed fields", 25, f"{DOCS}/resources/message#embed-object-embed-limits")
EMBED_FIELD_NAME = Limit(
    "embed field name", 256, f"{DOCS}/resources/message#embed-object-embed-limits"
)
EMBED_FIELD_VALUE = Limit(
    "embed field value", 1024, f"{DOCS}/resources/message#embed-object-embed-limits"
)
EMBEDS_TOTAL = Limit(
    "characters in all embeds of a message (titles, descriptions, field names and values, "
    "footers, author names)",
    6000,
    f"{DOCS}/resources/message#embed-object-embed-limits",
)
ACTION_ROWS = Limit(
    "action rows per message (classic components)",
    5,
    f"{DOCS}/components/reference#action-row",
)
ROW_BUTTONS = Limit("buttons per action row", 5, f"{DOCS}/components/reference#action-row")
CUSTOM_ID = Limit(
    "custom_id (1 to 100 characters, unique within a message or modal)",
    100,
    f"{DOCS}/components/reference#anatomy-of-a-component-custom-id",
)
BUTTON_LABEL = Limit("button label", 80, f"{DOCS}/components/reference#button")
SELECT_OPTIONS = Limit("string select options", 25, f"{DOCS}/components/reference#string-select")
OPTION_TEXT = Limit(
    "select, radio group and checkbox group option label, value, description",
    100,
    f"{DOCS}/components/reference#string-select-select-option-structure",
)
RADIO_OPTIONS = Limit(
    "radio group options (at least 2)", 10, f"{DOCS}/components/reference#radio-group"
)
CHECKBOX_OPTIONS = Limit(
    "checkbox group options (at least 1)", 10, f"{DOCS}/components/reference#checkbox-group"
)
MODAL_TITLE = Limit(
    "modal title",
    45,
    f"{DOCS}/interactions/receiving-and-responding#interaction-response-object-modal",
)
MODAL_COMPONENTS = Limit(
    "top-level components of a modal (at least 1)",
    5,
    f"{DOCS}/interactions/receiving-and-responding#interaction-response-object-modal",
)
LABEL_LABEL = Limit("Label component label", 45, f"{DOCS}/components/reference#label")
LABEL_DESCRIPTION = Limit("Label component description", 100, f"{DOCS}/components/reference#label")
TEXT_INPUT_LABEL = Limit("text input label", 45, f"{DOCS}/components/reference#text-input")
TEXT_INPUT_LENGTH = Limit(
    "text input max_length (1 to 4000) and value", 4000, f"{DOCS}/components/reference#text-input"
)
RULES = (
    CONTENT,
    EMBEDS,
    EMBED_TITLE,
    EMBED_DESCRIPTION,
    EMBED_AUTHOR,
    EMBED_FOOTER,
    EMBED_FIELDS,
    EMBED_FIELD_NAME,
    EMBED_FIELD_VALUE,
    EMBEDS_TOTAL,
    ACTION_ROWS,
    ROW_BUTTONS,
    CUSTOM_ID,
    BUTTON_LABEL,
    SELECT_OPTIONS,
    OPTION_TEXT,
    RADIO_OPTIONS,
    CHECKBOX_OPTIONS,
    MODAL_TITLE,
    MODAL_COMPONENTS,
    LABEL_LABEL,
    LABEL_DESCRIPTION,
    TEXT_INPUT_LABEL,
    TEXT_INPUT_LENGTH,
)
"""Every limit :func:`check_request` holds a body to beyond the schema (``docs/limits.md``
lists them with their pages)."""
ERRORS_PAGE = f"{DOCS}/reference#error-messages"
"""Where Discord documents the shape of its ``50035 Invalid Form Body`` answer."""


@dataclass(frozen=True)
class Problem:
    """One reason Discord would refuse a body: where (keys and list indices from the body's
    root), Discord's error code for it, and the message."""

    path: tuple[str | int, ...]
    code: str
    message: str


# -- the document -----------------------------------------------------------------------------


@cache
def spec() -> dict[str, Any]:
    """The vendored document, parsed once per process."""
    loaded: dict[str, Any] = json.loads(SPEC.read_text(encoding="utf-8"))
    return loaded


@cache
def _registry() -> Registry[Any]:
    resource: Resource[Any] = Resource.from_contents(spec(), default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(_BASE, resource)
    return registry


def _anchored(schema: Any) -> Any:
    """``schema`` with its document-relative refs (``#/components/...``) made absolute."""
    if isinstance(schema, dict):
        return {
            k: (_BASE + v if k == "$ref" and v.startswith("#") else _anchored(v))
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_anchored(v) for v in schema]
    return schema


def _template(path: str) -> re.Pattern[str]:
    parts = [("[^/]+" if p.startswith("{") else re.escape(p)) for p in path.split("/")]
    return re.compile("/".join(parts) + "/?")


@cache
def _routes() -> list[tuple[str, re.Pattern[str], int]]:
    """Every path template, with its pattern and how many segments are literal (a literal
    segment wins: ``messages/@original`` over ``messages/{message_id}``)."""
    found = [
        (p, _template(p), sum(not s.startswith("{") for s in p.split("/"))) for p in spec()["paths"]
    ]
    return sorted(found, key=lambda r: -r[2])


def route(method: str, path: str) -> str:
    """The document's path template for a request (``/channels/1/messages`` ->
    ``/channels/{channel_id}/messages``); ``KeyError`` if the document has none."""
    bare = path.split("?", 1)[0]
    for template, pattern, _ in _routes():
        if pattern.fullmatch(bare) and method.lower() in spec()["paths"][template]:
            return template
    raise KeyError(f"no route {method} {path} in Discord's OpenAPI document")


def _kinds(schema: Any) -> set[object] | None:
    """The values of ``type`` a union's branch takes (a component's or a callback's kind), or
    ``None`` when it does not say."""
    resolved = _resolved(schema)
    kind = resolved.get("properties", {}).get("type", {}) if isinstance(resolved, dict) else {}
    if "enum" in kind:
        return set(kind["enum"])
    return {kind["const"]} if "const" in kind else None


def _by_kind(keyword: Any) -> Any:
    """``oneOf``/``anyOf`` judged among the branches of the instance's own ``type`` only.

    The same verdict, sooner: a branch for another ``type`` fails on it anyway, so it changes
    neither whether one branch holds nor which; but jsonschema would validate the whole body
    against each (seven callback kinds, seven component kinds at every level), 50 ms a body."""

    def judged(validator: Any, branches: Any, instance: Any, schema: Any) -> Any:
        kind = instance.get("type") if isinstance(instance, dict) else None
        if isinstance(kind, int | str):
            kinds = [_kinds(b) for b in branches]
            meant = [b for b, k in zip(branches, kinds, strict=True) if k is None or kind in k]
            branches = meant or branches
        yield from keyword(validator, branches, instance, schema)

    return judged


_Validator = validators.extend(
    Draft202012Validator,
    {
        "oneOf": _by_kind(Draft202012Validator.VALIDATORS["oneOf"]),
        "anyOf": _by_kind(Draft202012Validator.VALIDATORS["anyOf"]),
    },
)


@cache
def request_validator(method: str, template: str) -> Any:
    """The validator of a route's JSON request body (``None``: the route takes no body)."""
    operation = spec()["paths"][template][method.lower()]
    body = operation.get("requestBody")
    if body is None:
        return None
    schema = _anchored(body["content"]["application/json"]["schema"])
    return _Validator(schema, registry=_registry())


# -- snowflakes -------------------------------------------------------------------------------


@cache
def _lookup(ref: str) -> Any:
    return _registry().resolver(_BASE).lookup(ref).contents


def _resolved(schema: Any) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = _lookup(schema["$ref"])
    return schema


_FLAT: dict[int, tuple[Any, tuple[dict[str, Any], ...]]] = {}
""":func:`_alternatives` of each schema of the document, by identity (the document is parsed
once and kept, so its schemas stay the same objects)."""


def _alternatives(schema: Any) -> tuple[dict[str, Any], ...]:
    """Every schema an instance at this place may be judged by (through refs and unions)."""
    known = _FLAT.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    resolved = _resolved(schema)
    found: tuple[dict[str, Any], ...] = ()
    if isinstance(resolved, dict):
        unions = [sub for key in ("oneOf", "anyOf", "allOf") for sub in resolved.get(key, ())]
        found = (resolved, *(a for sub in unions for a in _alternatives(sub)))
    _FLAT[id(schema)] = (schema, found)
    return found


def _types(schema: Mapping[str, Any]) -> set[str]:
    kind = schema.get("type", ())
    return {kind} if isinstance(kind, str) else set(kind)


def normalise(value: Any, schemas: Sequence[Any]) -> Any:
    """``value`` with each integer written as its digits where the ``schemas`` that may judge
    it expect a snowflake there (and nothing there takes an integer): discord.py sends ids as
    integers, Discord takes them, the document types them as strings. Everything else is left
    as it is (in new containers: ``value`` is not changed)."""
    if isinstance(value, bool) or not schemas:
        return value
    options = [o for s in schemas for o in _alternatives(s)]
    if isinstance(value, int):
        snowflake = any(o.get("format") == "snowflake" for o in options)
        numeric = any(_types(o) & {"integer", "number"} for o in options)
        return str(value) if snowflake and not numeric and value >= 0 else value
    if isinstance(value, dict):
        props = [o["properties"] for o in options if isinstance(o.get("properties"), dict)]
        return {k: normalise(v, [p[k] for p in props if k in p]) for k, v in value.items()}
    if isinstance(value, list):
        items = [o["items"] for o in options if "items" in o]
        return [normalise(v, items) for v in value]
    return value


# -- checking ---------------------------------------------------------------------------------


def _wrong_kind(error: ValidationError) -> bool:
    """Whether ``error`` says the instance is not of its branch's kind at all (another JSON
    type, or another ``type`` discriminator): not the branch the sender meant."""
    place = list(error.relative_path)
    return (not place and error.validator in ("type", "const", "enum")) or place == ["type"]


def _schema_problems(error: ValidationError) -> list[Problem]:
    """Discord's words for a schema violation. In a union (``oneOf``/``anyOf``: a component
    of some type, a callback of some type) the branch of the instance's own kind speaks, as
    Discord reports the fields of the component it was sent, not of every other kind."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict[object, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.schema_path[0], []).append(sub)
        meant = [errs for errs in branches.values() if not any(map(_wrong_kind, errs))]
        if len(meant) == 1:
            return [p for sub in meant[0] for p in _schema_problems(sub)]
    kind, expected = error.validator, error.validator_value
    if kind in ("maxLength", "maxItems"):
        code, message = "BASE_TYPE_MAX_LENGTH", f"Must be {expected} or fewer in length."
    elif kind in ("minLength", "minItems"):
        code, message = "BASE_TYPE_MIN_LENGTH", f"Must be {expected} or more in length."
    elif kind == "required":
        code, message = "BASE_TYPE_REQUIRED", "This field is required"
    elif kind in ("maximum", "minimum"):
        bound = "less" if kind == "maximum" else "greater"
        code = "NUMBER_TYPE_MAX" if kind == "maximum" else "NUMBER_TYPE_MIN"
        message = f"int value should be {bound} than or equal to {expected}."
    elif kind in ("oneOf", "anyOf"):
        code, message = "UNION_TYPE_CHOICES", "Value is not one of the accepted shapes."
    elif kind in ("enum", "const"):
        code, message = "BASE_TYPE_CHOICES", f"Value must be one of {expected!r}."
    else:
        code, message = "BASE_TYPE_INVALID", error.message[:200]
    path = tuple(error.absolute_path)
    if kind == "required":  # Discord names the missing field itself
        missing = re.search(r"'([^']+)' is a required property", error.message)
        path += (missing.group(1),) if missing else ()
    return [Problem(path, code, message)]


def _too_long(path: tuple[str | int, ...], value: object, limit: Limit) -> list[Problem]:
    if isinstance(value, str) and len(value) > limit.most:
        return [Problem(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit.most} or fewer in length.")]
    return []


def _too_many(path: tuple[str | int, ...], items: object, limit: Limit) -> list[Problem]:
    if isinstance(items, list) and len(items) > limit.most:
        return [Problem(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit.most} or fewer in length.")]
    return []


def embeds_total(embeds: object) -> int:
    """What Discord counts against :data:`EMBEDS_TOTAL`."""
    total = 0
    for embed in embeds if isinstance(embeds, list) else ():
        if not isinstance(embed, dict):
            continue
        author, footer = embed.get("author") or {}, embed.get("footer") or {}
        texts = [embed.get("title"), embed.get("description"), author.get("name")]
        texts.append(footer.get("text"))
        for field in embed.get("fields") or ():
            texts += [field.get("name"), field.get("value")]
        total += sum(len(t) for t in texts if isinstance(t, str))
    return total


def _message_rules(body: Mapping[str, Any], at: tuple[str | int, ...]) -> list[Problem]:
    """The documented rules of a message body (create, edit, interaction message, follow-up)."""
    found = _too_long((*at, "content"), body.get("content"), CONTENT)
    embeds = body.get("embeds")
    found += _too_many((*at, "embeds"), embeds, EMBEDS)
    for i, embed in enumerate(embeds if isinstance(embeds, list) else ()):
        if not isinstance(embed, dict):
            continue
        here = (*at, "embeds", i)
        found += _too_long((*here, "title"), embed.get("title"), EMBED_TITLE)
        found += _too_long((*here, "description"), embed.get("description"), EMBED_DESCRIPTION)
        author, footer = embed.get("author") or {}, embed.get("footer") or {}
        found += _too_long((*here, "author", "name"), author.get("name"), EMBED_AUTHOR)
        found += _too_long((*here, "footer", "text"), footer.get("text"), EMBED_FOOTER)
        fields = embed.get("fields")
        found += _too_many((*here, "fields"), fields, EMBED_FIELDS)
        for j, field in enumerate(fields if isinstance(fields, list) else ()):
            found += _too_long((*here, "fields", j, "name"), field.get("name"), EMBED_FIELD_NAME)
            found += _too_long((*here, "fields", j, "value"), field.get("value"), EMBED_FIELD_VALUE)
    if embeds_total(embeds) > EMBEDS_TOTAL.most:
        found.append(
            Problem(
                (*at, "embeds"),
                "MAX_EMBED_SIZE_EXCEEDED",
                f"Embed size exceeds maximum size of {EMBEDS_TOTAL.most}",
            )
        )
    components = body.get("components")
    if not int(body.get("flags") or 0) & IS_COMPONENTS_V2:
        found += _too_many((*at, "components"), components, ACTION_ROWS)
        for i, row in enumerate(components if isinstance(components, list) else ()):
            if isinstance(row, dict) and row.get("type") != 1:
                found.append(
                    Problem(
                        (*at, "components", i, "type"),
                        "COMPONENT_LAYOUT_INVALID",
                        "Only action rows are top-level components without IS_COMPONENTS_V2",
                    )
                )
    found += _component_rules((*at, "components"), components)
    return found


def _component_rules(at: tuple[str | int, ...], components: object) -> list[Problem]:
    """Limits of every component in a tree, and custom_ids unique within it."""
    found: list[Problem] = []
    seen: set[str] = set()

    def walk(path: tuple[str | int, ...], item: object) -> None:
        if isinstance(item, list):
            for i, each in enumerate(item):
                walk((*path, i), each)
            return
        if not isinstance(item, dict):
            return
        kind = item.get("type")
        custom_id = item.get("custom_id")
        if isinstance(custom_id, str):
            if not 1 <= len(custom_id) <= CUSTOM_ID.most:
                found.append(
                    Problem(
                        (*path, "custom_id"),
                        "BASE_TYPE_BAD_LENGTH",
                        f"Must be between 1 and {CUSTOM_ID.most} in length.",
                    )
                )
            if custom_id in seen:
                found.append(
                    Problem(
                        (*path, "custom_id"),
                        "COMPONENT_CUSTOM_ID_DUPLICATED",
                        "Component custom id cannot be duplicated",
                    )
                )
            seen.add(custom_id)
        if kind == 1:
            found.extend(_too_many((*path, "components"), item.get("components"), ROW_BUTTONS))
        elif kind == 2:
            found.extend(_too_long((*path, "label"), item.get("label"), BUTTON_LABEL))
            if item.get("style") in (1, 2, 3, 4) and not custom_id:
                found.append(
                    Problem((*path, "custom_id"), "BASE_TYPE_REQUIRED", "This field is required")
                )
        elif kind == 4:
            found.extend(_too_long((*path, "label"), item.get("label"), TEXT_INPUT_LABEL))
            found.extend(_too_long((*path, "value"), item.get("value"), TEXT_INPUT_LENGTH))
            most = item.get("max_length")
            if isinstance(most, int) and not 1 <= most <= TEXT_INPUT_LENGTH.most:
                found.append(
                    Problem(
                        (*path, "max_length"),
                        "NUMBER_TYPE_MAX",
                        f"int value should be less than or equal to {TEXT_INPUT_LENGTH.most}.",
                    )
                )
        elif kind == 18:
            found.extend(_too_long((*path, "label"), item.get("label"), LABEL_LABEL))
            found.extend(
                _too_long((*path, "description"), item.get("description"), LABEL_DESCRIPTION)
            )
        if kind in (3, 21, 22):
            found.extend(_options(path, kind, item))
        walk((*path, "components"), item.get("components"))
        walk((*path, "component"), item.get("component"))
        walk((*path, "accessory"), item.get("accessory"))

    walk(at, components)
    return found


def _options(path: tuple[str | int, ...], kind: int, item: Mapping[str, Any]) -> list[Problem]:
    """A string select's, radio group's or checkbox group's options and value counts."""
    options = item.get("options")
    count = len(options) if isinstance(options, list) else 0
    most = {3: SELECT_OPTIONS, 21: RADIO_OPTIONS, 22: CHECKBOX_OPTIONS}[kind]
    least = 2 if kind == 21 else 1
    found = []
    if not least <= count <= most.most:
        found.append(
            Problem(
                (*path, "options"),
                "BASE_TYPE_BAD_LENGTH",
                f"Must be between {least} and {most.most} in length.",
            )
        )
    for i, option in enumerate(options if isinstance(options, list) else ()):
        for key in ("label", "value", "description"):
            found += _too_long((*path, "options", i, key), option.get(key), OPTION_TEXT)
    if kind != 21:
        lo, hi = item.get("min_values", 1), item.get("max_values", 1 if kind == 3 else count)
        if isinstance(lo, int) and isinstance(hi, int) and not lo <= hi <= count:
            found.append(
                Problem(
                    (*path, "max_values"),
                    "SELECT_COMPONENT_VALUES_INVALID",
                    "min_values and max_values must be in order and at most the options",
                )
            )
    return found


def _modal_rules(data: Mapping[str, Any], at: tuple[str | int, ...]) -> list[Problem]:
    found = _too_long((*at, "title"), data.get("title"), MODAL_TITLE)
    components = data.get("components")
    count = len(components) if isinstance(components, list) else 0
    if not 1 <= count <= MODAL_COMPONENTS.most:
        found.append(
            Problem(
                (*at, "components"),
                "BASE_TYPE_BAD_LENGTH",
                f"Must be between 1 and {MODAL_COMPONENTS.most} in length.",
            )
        )
    found += _component_rules((*at, "components"), components)
    return found


def _rules(template: str, body: Mapping[str, Any]) -> list[Problem]:
    """The documented rules for a route's body (beyond its schema)."""
    if template.endswith("/callback"):
        data = body.get("data")
        if not isinstance(data, dict):
            return []
        if body.get("type") == 9:
            return _modal_rules(data, ("data",))
        return _message_rules(data, ("data",))
    if "/messages" in template or template.startswith("/webhooks/"):
        return _message_rules(body, ())
    return []


def check_request(method: str, path: str, body: object) -> list[Problem]:
    """Why Discord would refuse this request body (empty: it would take it). ``path`` is the
    API path below ``/api/v10`` as sent (ids filled in, a query string allowed)."""
    template = route(method, path)
    validator = request_validator(method, template)
    if validator is None:
        if body in (None, {}, b"", ""):
            return []
        return [Problem((), "BASE_TYPE_INVALID", f"{method} {template} takes no body")]
    if not isinstance(body, dict):
        return [Problem((), "BASE_TYPE_INVALID", "The request body must be a JSON object")]
    sent: dict[str, Any] = normalise(body, [validator.schema])
    found = [p for e in validator.iter_errors(sent) for p in _schema_problems(e)]
    seen = {p.path for p in found}  # one problem a place, as Discord reports it
    found += [p for p in _rules(template, sent) if p.path not in seen]
    return found


def errors_tree(problems: list[Problem]) -> dict[str, Any]:
    """``problems`` nested as Discord nests them under ``errors``: each key or list index (as a
    string) a level, ``_errors`` the list of ``{code, message}`` at a place."""
    tree: dict[str, Any] = {}
    for problem in problems:
        node = tree
        for key in problem.path:
            node = node.setdefault(str(key), {})
        node.setdefault("_errors", []).append({"code": problem.code, "message": problem.message})
    return tree


def refusal(problems: list[Problem]) -> dict[str, Any]:
    """Discord's answer to an invalid body (HTTP 400; :data:`ERRORS_PAGE`)."""
    return {"code": 50035, "errors": errors_tree(problems), "message": "Invalid Form Body"}


def describe(problems: list[Problem]) -> str:
    """One line per problem, for an assertion message."""
    return "\n".join(
        f"{'.'.join(map(str, p.path)) or '(body)'}: {p.code}: {p.message}" for p in problems
    )
