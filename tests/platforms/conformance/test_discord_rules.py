"""The Discord rules themselves (:mod:`tests.support.discord.discord_rules`): each documented limit
refuses one character or item too many and takes the limit itself, with Discord's error at Discord's
path; snowflakes sent as integers conform; and where Discord's OpenAPI document states a limit,
whether it agrees with the documentation (pinned, so a new document that changes one is seen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.discord import discord_rules as rules
from tests.support.discord.discord_rules import Limit, Problem, check_request, refusal, spec

MESSAGE = "/channels/1/messages"
CALLBACK = "/interactions/1/token/callback"


def button(custom_id: str = "b0", label: str = "Go") -> dict[str, Any]:
    return {"type": 2, "style": 1, "label": label, "custom_id": custom_id}


def row(*items: dict[str, Any]) -> dict[str, Any]:
    return {"type": 1, "components": list(items)}


def message(**fields: Any) -> dict[str, Any]:
    return {"content": "hi", "allowed_mentions": {"parse": []}} | fields


def modal(*components: dict[str, Any], title: str = "Answer") -> dict[str, Any]:
    return {"type": 9, "data": {"custom_id": "m", "title": title, "components": list(components)}}


def label(component: dict[str, Any], text: str = "Pick", **extra: Any) -> dict[str, Any]:
    return {"type": 18, "label": text, "component": component} | extra


def group(kind: int, count: int, **extra: Any) -> dict[str, Any]:
    options = [{"label": f"o{i}", "value": str(i)} for i in range(count)]
    return {"type": kind, "custom_id": "g", "options": options} | extra


def select(count: int) -> dict[str, Any]:
    return group(3, count)


def text_input(**extra: Any) -> dict[str, Any]:
    return {"type": 4, "custom_id": "t", "style": 2} | extra


def paths(problems: list[Problem]) -> list[tuple[tuple[str | int, ...], str]]:
    return [(p.path, p.code) for p in problems]


# Each case: a route, a body at the limit (taken) and the same one past it (refused, with the
# path and code Discord answers).
CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], tuple[str | int, ...], str]] = [
    (
        "content 2000",
        MESSAGE,
        message(content="x" * 2000),
        message(content="x" * 2001),
        ("content",),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "interaction message content 2000",
        CALLBACK,
        {"type": 4, "data": message(content="x" * 2000)},
        {"type": 4, "data": message(content="x" * 2001)},
        ("data", "content"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "embeds 6000 in all",
        MESSAGE,
        message(embeds=[{"title": "t" * 256, "description": "d" * 2744}] * 2),
        message(embeds=[{"title": "t" * 256, "description": "d" * 2745}] * 2),
        ("embeds",),
        "MAX_EMBED_SIZE_EXCEEDED",
    ),
    (
        "10 embeds",
        MESSAGE,
        message(embeds=[{"description": "d"}] * 10),
        message(embeds=[{"description": "d"}] * 11),
        ("embeds",),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "embed description 4096",
        MESSAGE,
        message(embeds=[{"description": "d" * 4096}]),
        message(embeds=[{"description": "d" * 4097}]),
        ("embeds", 0, "description"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "embed author name 256",
        MESSAGE,
        message(embeds=[{"author": {"name": "a" * 256}}]),
        message(embeds=[{"author": {"name": "a" * 257}}]),
        ("embeds", 0, "author", "name"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "5 action rows",
        MESSAGE,
        message(components=[row(button(f"b{i}")) for i in range(5)]),
        message(components=[row(button(f"b{i}")) for i in range(6)]),
        ("components",),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "5 buttons a row",
        MESSAGE,
        message(components=[row(*(button(f"b{i}") for i in range(5)))]),
        message(components=[row(*(button(f"b{i}") for i in range(6)))]),
        ("components", 0, "components"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "button label 80",
        MESSAGE,
        message(components=[row(button(label="l" * 80))]),
        message(components=[row(button(label="l" * 81))]),
        ("components", 0, "components", 0, "label"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "custom_id 100",
        MESSAGE,
        message(components=[row(button("c" * 100))]),
        message(components=[row(button("c" * 101))]),
        ("components", 0, "components", 0, "custom_id"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "custom_ids unique",
        MESSAGE,
        message(components=[row(button("a"), button("b"))]),
        message(components=[row(button("a"), button("a"))]),
        ("components", 0, "components", 1, "custom_id"),
        "COMPONENT_CUSTOM_ID_DUPLICATED",
    ),
    (
        "a button needs a custom_id",
        MESSAGE,
        message(components=[row(button())]),
        message(components=[row({"type": 2, "style": 1, "label": "Go"})]),
        ("components", 0, "components", 0, "custom_id"),
        "BASE_TYPE_REQUIRED",
    ),
    (
        "select options 25",
        MESSAGE,
        message(components=[row(select(25))]),
        message(components=[row(select(26))]),
        ("components", 0, "components", 0, "options"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "classic messages hold action rows",
        MESSAGE,
        message(content=None, flags=1 << 15, components=[{"type": 10, "content": "hi"}]),
        message(content=None, components=[{"type": 10, "content": "hi"}]),
        ("components", 0, "type"),
        "COMPONENT_LAYOUT_INVALID",
    ),
    (
        "modal title 45",
        CALLBACK,
        modal(label(text_input()), title="t" * 45),
        modal(label(text_input()), title="t" * 46),
        ("data", "title"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "modal components 5",
        CALLBACK,
        modal(*(label({**text_input(), "custom_id": f"t{i}"}) for i in range(5))),
        modal(*(label({**text_input(), "custom_id": f"t{i}"}) for i in range(6))),
        ("data", "components"),
        "BASE_TYPE_BAD_LENGTH",
    ),
    (
        "custom_ids unique in a modal",
        CALLBACK,
        modal(label(text_input()), label({**text_input(), "custom_id": "u"})),
        modal(label(text_input()), label(text_input())),
        ("data", "components", 1, "component", "custom_id"),
        "COMPONENT_CUSTOM_ID_DUPLICATED",
    ),
    (
        "Label label 45",
        CALLBACK,
        modal(label(text_input(), "l" * 45)),
        modal(label(text_input(), "l" * 46)),
        ("data", "components", 0, "label"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "Label description 100",
        CALLBACK,
        modal(label(text_input(), description="d" * 100)),
        modal(label(text_input(), description="d" * 101)),
        ("data", "components", 0, "description"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "text input label 45",
        CALLBACK,
        modal(row(text_input(label="l" * 45))),
        modal(row(text_input(label="l" * 46))),
        ("data", "components", 0, "components", 0, "label"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "text input max_length 4000",
        CALLBACK,
        modal(label(text_input(max_length=4000))),
        modal(label(text_input(max_length=4001))),
        ("data", "components", 0, "component", "max_length"),
        "NUMBER_TYPE_MAX",
    ),
    (
        "radio group 10 options",
        CALLBACK,
        modal(label(group(21, 10))),
        modal(label(group(21, 11))),
        ("data", "components", 0, "component", "options"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "radio group 2 options at least",
        CALLBACK,
        modal(label(group(21, 2))),
        modal(label(group(21, 1))),
        ("data", "components", 0, "component", "options"),
        "BASE_TYPE_MIN_LENGTH",
    ),
    (
        "checkbox group 10 options",
        CALLBACK,
        modal(label(group(22, 10))),
        modal(label(group(22, 11))),
        ("data", "components", 0, "component", "options"),
        "BASE_TYPE_MAX_LENGTH",
    ),
    (
        "checkbox group max_values within its options",
        CALLBACK,
        modal(label(group(22, 3, min_values=0, max_values=3))),
        modal(label(group(22, 3, min_values=0, max_values=4))),
        ("data", "components", 0, "component", "max_values"),
        "SELECT_COMPONENT_VALUES_INVALID",
    ),
]


@pytest.mark.parametrize(
    ("path", "taken", "refused", "where", "code"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_documented_limit_takes_its_limit_and_refuses_one_more(
    path: str,
    taken: dict[str, Any],
    refused: dict[str, Any],
    where: tuple[str | int, ...],
    code: str,
) -> None:
    assert check_request("POST", path, taken) == []
    assert paths(check_request("POST", path, refused)) == [(where, code)]


def test_an_option_over_100_is_refused_wherever_it_is() -> None:
    options = group(21, 2)
    options["options"][1]["description"] = "d" * 101
    found = check_request("POST", CALLBACK, modal(label(options)))
    assert paths(found) == [
        (
            ("data", "components", 0, "component", "options", 1, "description"),
            "BASE_TYPE_MAX_LENGTH",
        )
    ]


def test_snowflakes_sent_as_integers_conform_and_nothing_else_is_turned() -> None:
    """discord.py sends ids as integers; Discord takes them; the document says strings."""
    sent = message(
        allowed_mentions={"parse": [], "users": [123, 456], "roles": [789], "replied_user": False},
        message_reference={"message_id": 1, "channel_id": 2, "fail_if_not_exists": False},
        flags=64,
    )
    assert check_request("POST", MESSAGE, sent) == []
    assert check_request("POST", "/users/@me/channels", {"recipient_id": 123}) == []
    validator = rules.request_validator("post", "/channels/{channel_id}/messages")
    normalised = rules.normalise(sent, [validator.schema])
    assert normalised["allowed_mentions"]["users"] == ["123", "456"]
    assert normalised["flags"] == 64 and sent["allowed_mentions"]["users"] == [123, 456]
    not_ids = message(allowed_mentions={"parse": [], "users": ["alice"]})
    assert paths(check_request("POST", MESSAGE, not_ids))[0][0][:2] == ("allowed_mentions", "users")
    assert check_request("POST", MESSAGE, message(content=5))  # a number is no text


def test_refusals_have_discords_shape() -> None:
    """``{"code": 50035, "errors": {...}, "message": "Invalid Form Body"}``, each problem
    nested by its path, list indices as keys (discord.py flattens it to ``In a.0.b: ...``)."""
    body = message(content="x" * 2001, components=[row(button(label="l" * 81))])
    assert refusal(check_request("POST", MESSAGE, body)) == {
        "code": 50035,
        "message": "Invalid Form Body",
        "errors": {
            "content": {
                "_errors": [
                    {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}
                ]
            },
            "components": {
                "0": {
                    "components": {
                        "0": {
                            "label": {
                                "_errors": [
                                    {
                                        "code": "BASE_TYPE_MAX_LENGTH",
                                        "message": "Must be 80 or fewer in length.",
                                    }
                                ]
                            }
                        }
                    }
                }
            },
        },
    }


@pytest.mark.parametrize(
    ("method", "path", "template"),
    [
        ("GET", "/users/@me", "/users/@me"),
        ("GET", "/oauth2/applications/@me", "/oauth2/applications/@me"),
        ("POST", "/users/@me/channels", "/users/@me/channels"),
        ("POST", "/channels/1/messages", "/channels/{channel_id}/messages"),
        ("PATCH", "/channels/1/messages/2", "/channels/{channel_id}/messages/{message_id}"),
        (
            "POST",
            "/interactions/1/tok/callback?with_response=true",
            "/interactions/{interaction_id}/{interaction_token}/callback",
        ),
        ("POST", "/webhooks/9/tok?wait=1", "/webhooks/{webhook_id}/{webhook_token}"),
        (
            "PATCH",
            "/webhooks/9/tok/messages/@original",
            "/webhooks/{webhook_id}/{webhook_token}/messages/@original",
        ),
    ],
)
def test_every_route_the_bot_uses_is_in_the_document(method: str, path: str, template: str) -> None:
    assert rules.route(method, path) == template
    takes_body = method != "GET"
    assert (rules.request_validator(method, template) is not None) == takes_body


def test_a_route_the_document_lacks_and_a_body_where_none_belongs() -> None:
    with pytest.raises(KeyError):
        rules.route("POST", "/no/such/route")
    assert check_request("GET", "/users/@me", {"a": 1})


def stated(schema: str, field: str, keyword: str) -> Any:
    """The number the document states for ``field`` of component schema ``schema``."""
    return spec()["components"]["schemas"][schema]["properties"][field][keyword]


# Where the document states a limit the documentation states too: (the limit, the document's
# number there). Equal numbers agree; the others are where a bot's request must keep to the
# documentation's, tighter, number (docs/limits.md).
STATED = [
    (rules.CONTENT, stated("MessageCreateRequest", "content", "maxLength")),
    (rules.CONTENT, stated("MessageEditRequestPartial", "content", "maxLength")),
    (rules.CONTENT, stated("IncomingWebhookInteractionRequest", "content", "maxLength")),
    (rules.EMBEDS, stated("MessageCreateRequest", "embeds", "maxItems")),
    (rules.EMBED_TITLE, stated("RichEmbed", "title", "maxLength")),
    (rules.EMBED_DESCRIPTION, stated("RichEmbed", "description", "maxLength")),
    (rules.EMBED_FIELDS, stated("RichEmbed", "fields", "maxItems")),
    (rules.ACTION_ROWS, stated("MessageCreateRequest", "components", "maxItems")),
    (rules.ROW_BUTTONS, stated("ActionRowComponentForMessageRequest", "components", "maxItems")),
    (rules.CUSTOM_ID, stated("ButtonComponentForMessageRequest", "custom_id", "maxLength")),
    (rules.BUTTON_LABEL, stated("ButtonComponentForMessageRequest", "label", "maxLength")),
    (rules.SELECT_OPTIONS, stated("StringSelectComponentForMessageRequest", "options", "maxItems")),
    (rules.OPTION_TEXT, stated("RadioGroupOptionForRequest", "label", "maxLength")),
    (rules.RADIO_OPTIONS, stated("RadioGroupComponentForModalRequest", "options", "maxItems")),
    (
        rules.CHECKBOX_OPTIONS,
        stated("CheckboxGroupComponentForModalRequest", "options", "maxItems"),
    ),
    (rules.MODAL_TITLE, stated("ModalInteractionCallbackRequestData", "title", "maxLength")),
    (
        rules.MODAL_COMPONENTS,
        stated("ModalInteractionCallbackRequestData", "components", "maxItems"),
    ),
    (rules.LABEL_LABEL, stated("LabelComponentForModalRequest", "label", "maxLength")),
    (rules.LABEL_DESCRIPTION, stated("LabelComponentForModalRequest", "description", "maxLength")),
    (rules.TEXT_INPUT_LABEL, stated("TextInputComponentForModalRequest", "label", "maxLength")),
    (rules.TEXT_INPUT_LENGTH, stated("TextInputComponentForModalRequest", "max_length", "maximum")),
]


def test_where_the_document_and_the_documentation_disagree() -> None:
    """Pinned: the document allows a bot's content 4,000 (Discord documents 2,000: 4,000 is for
    Nitro users) and 40 components in a message or a modal (the Components V2 count; a classic
    message holds 5 action rows, a modal 5 components). Everything else it states agrees."""
    disagree = {(limit.what, stated) for limit, stated in STATED if stated != limit.most}
    assert disagree == {
        ("message content", 4000),
        ("action rows per message (classic components)", 40),
        ("top-level components of a modal (at least 1)", 40),
    }
    assert all(
        isinstance(limit, Limit) and limit.page.startswith(rules.DOCS) for limit in rules.RULES
    )


def test_the_vendored_document_is_discords_and_says_where_it_comes_from() -> None:
    document = spec()
    assert document["openapi"] == "3.1.0" and document["info"]["version"] == "10"
    assert document["info"]["title"] == "Discord HTTP API (Preview)"
    readme = (Path(rules.SPEC).parent / "README.md").read_text(encoding="utf-8")
    assert "discord_openapi.json" in readme and "discord/discord-api-spec" in readme
    limits = (Path(__file__).resolve().parents[3] / "docs" / "limits.md").read_text(
        encoding="utf-8"
    )
    discord_section = limits.split("## Discord", 1)[1]
    assert all(limit.page in discord_section for limit in rules.RULES)
