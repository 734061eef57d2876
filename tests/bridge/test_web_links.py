"""Signed answer links: made, verified, refused when forged, tampered, cut or expired; the
secrets rotate; the settings say in one line what is wrong."""

from __future__ import annotations

import base64
import json

import pytest

from bridge.settings_error import SettingsError
from bridge.web_links import (
    ASK_PATH,
    INBOX_PATH,
    LinkExpired,
    LinkForged,
    Links,
    Person,
    WebSettings,
    read_web_settings,
    shown,
)

OLD = "o" * 40
NEW = "n" * 40
ALICE = Person("slack", "U_ALICE", "Alice")


def test_a_link_names_the_ask_the_person_and_the_expiry() -> None:
    links = Links([NEW], "https://asks.example.com/", ttl=60)
    token = links.token("ask1", ALICE, now=1000.0)
    link = links.verify(token, now=1059.0)
    assert (link.ask_id, link.person, link.expires_at) == ("ask1", ALICE, 1060.0)
    assert links.ask_url("ask1", ALICE).startswith(f"https://asks.example.com{ASK_PATH}")
    inbox = links.inbox_url(ALICE).rpartition("/")[2]
    assert links.inbox_url(ALICE).startswith(f"https://asks.example.com{INBOX_PATH}")
    assert links.verify(inbox).ask_id is None


def test_an_expired_link_is_told_apart_from_a_forged_one() -> None:
    links = Links([NEW], "http://127.0.0.1:1")
    token = links.token("ask1", ALICE, ttl=60, now=1000.0)
    with pytest.raises(LinkExpired):
        links.verify(token, now=1060.0)


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t[:-1],  # cut short
        lambda t: t + "A",
        lambda t: t.replace(".", ""),
        lambda t: t + ".x",
        lambda t: "",
        lambda t: "." * 3,
        lambda t: "%%%.%%%",
        lambda t: "x" * 5000,
        lambda t: t.split(".")[0] + "." + base64.urlsafe_b64encode(b"\0" * 32).decode().strip("="),
    ],
    ids=["cut", "appended", "no-dot", "two-dots", "empty", "dots", "not-base64", "huge", "zeros"],
)
def test_a_damaged_link_is_forged(damage: object) -> None:
    links = Links([NEW], "http://127.0.0.1:1")
    token = links.token("ask1", ALICE)
    with pytest.raises(LinkForged):
        links.verify(damage(token))  # type: ignore[operator]


def test_a_payload_changed_by_hand_does_not_verify() -> None:
    """Another ask, another person, a later expiry: each breaks the signature."""
    links = Links([NEW], "http://127.0.0.1:1")
    payload, _, signature = links.token("ask1", ALICE).partition(".")
    fields = json.loads(base64.urlsafe_b64decode(payload + "=="))
    for change in ({"a": "ask2"}, {"u": "U_MALLORY"}, {"e": fields["e"] + 86400}):
        raw = json.dumps({**fields, **change}, separators=(",", ":")).encode()
        forged = base64.urlsafe_b64encode(raw).decode().rstrip("=") + "." + signature
        with pytest.raises(LinkForged):
            links.verify(forged)


def test_rotation_the_first_secret_signs_every_one_verifies() -> None:
    before = Links([OLD], "http://127.0.0.1:1").token("ask1", ALICE)
    rotated = Links([NEW, OLD], "http://127.0.0.1:1")
    assert rotated.verify(before).person == ALICE
    after = rotated.token("ask1", ALICE)
    assert Links([NEW], "http://127.0.0.1:1").verify(after).ask_id == "ask1"
    with pytest.raises(LinkForged):
        Links([OLD], "http://127.0.0.1:1").verify(after)
    with pytest.raises(LinkForged):  # the old secret retired: its links stop working
        Links([NEW], "http://127.0.0.1:1").verify(before)


def test_logs_see_only_the_start_of_a_token() -> None:
    links = Links([NEW], "https://asks.example.com")
    url = links.ask_url("ask1", ALICE)
    token = url.rpartition("/")[2]
    assert token not in shown(url) and shown(url).startswith("https://asks.example.com/a/")
    assert token not in shown(token) and len(shown(token)) == 11


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASK_BRIDGE_WEB_SECRET", f" {NEW} , {OLD} ")
    monkeypatch.setenv("ASK_BRIDGE_WEB_URL", "https://asks.example.com/")
    monkeypatch.setenv("ASK_BRIDGE_WEB_LINK_TTL", "120")
    settings = read_web_settings()
    assert settings.configured and settings.url == "https://asks.example.com"
    links = settings.links()
    assert links.verify(Links([OLD], "x").token("a", ALICE)).ask_id == "a"
    assert links.ttl == 120 and links.base_url == "https://asks.example.com"


def test_unset_the_web_platform_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASK_BRIDGE_WEB_SECRET", "ASK_BRIDGE_WEB_URL", "ASK_BRIDGE_WEB_LINK_TTL"):
        monkeypatch.delenv(name, raising=False)
    settings = read_web_settings()
    assert not settings.configured and settings.link_ttl == WebSettings().link_ttl == 900
    with pytest.raises(SettingsError, match="ASK_BRIDGE_WEB_SECRET"):
        settings.links("http://127.0.0.1:8080")


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("ASK_BRIDGE_WEB_SECRET", "short", "at least 32 characters"),
        ("ASK_BRIDGE_WEB_SECRET", f"{NEW},", "at least 32 characters"),
        ("ASK_BRIDGE_WEB_URL", "ftp://x", "http(s)://host"),
        ("ASK_BRIDGE_WEB_URL", "https://x/?a=1", "no query"),
        ("ASK_BRIDGE_WEB_LINK_TTL", "0", "greater than 0"),
        ("ASK_BRIDGE_WEB_LINK_TTL", "99999999", "less than or equal"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv("ASK_BRIDGE_WEB_SECRET", NEW)
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as error:
        read_web_settings()
    message = str(error.value)
    assert name in message and says in message and "\n" not in message
    assert NEW not in message  # a secret is never echoed
    if name == "ASK_BRIDGE_WEB_SECRET":
        assert value.rstrip(",") not in message
