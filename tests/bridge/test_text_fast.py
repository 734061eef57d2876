"""The fast :func:`bridge.text.visible` (one search in C for most texts, a pass joiner by joiner
for texts with emoji) against the straightforward rule it replaced, a Python loop per character,
kept here as the reference: the two must agree on any Unicode text."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bridge.text import blank, look, visible

_ALWAYS = re.compile(
    "["
    r"\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    r"\u200b\u200c\u200e\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0d\ufeff\uffa0"
    r"\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff\ud800-\udfff"
    "]"
)
_BREAKS = {"\r": "\n", "\x0b": "\n", "\x0c": "\n", "\x85": "\n", "\u2028": "\n", "\u2029": "\n"}
_ZWJ = "\u200d"
_PRESENTATION = "\ufe0e\ufe0f"
_SKIN_TONES = range(0x1F3FB, 0x1F400)


def reference_visible(text: str) -> str:
    """The rule as written before the fast path: every character judged in turn."""
    text = text.replace("\r\n", "\n")
    text = "".join(_BREAKS.get(c, " " if c == "\u2800" else c) for c in text)
    chars = _ALWAYS.sub("", text)
    kept: list[str] = []
    for i, char in enumerate(chars):
        after = chars[i + 1] if i + 1 < len(chars) else ""
        if char == _ZWJ:
            base = next(
                (c for c in reversed(kept) if c not in _PRESENTATION and ord(c) not in _SKIN_TONES),
                "",
            )
            if not (
                base
                and unicodedata.category(base) == "So"
                and after
                and unicodedata.category(after) == "So"
            ):
                continue
        elif char in _PRESENTATION:
            before = kept[-1] if kept else ""
            if not before:
                continue
            if before in "0123456789#*":
                if after != "\u20e3":
                    continue
            elif not (ord(before) > 0x7F and unicodedata.category(before)[0] in "SP"):
                continue
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept))


_EMOJI_PARTS = st.sampled_from(
    [
        "\u200d",
        "\ufe0e",
        "\ufe0f",
        "\u20e3",
        "\U0001f3fd",
        "\U0001f3fb",
        "\U0001f468",
        "\U0001f4bb",
        "\u2764",
        "\U0001f3f3",
        "\U0001f308",
        "1",
        "#",
        "a",
        "!",
        "\u00e9",
        "e\u0301",
        "\u200b",
        "\r\n",
        "\u2028",
        "\u2800",
        "\U000e0041",
        " ",
    ]
)
"""The characters the rule judges by their neighbours, and the neighbours that decide: runs of
them find the orderings arbitrary text rarely draws."""

_TEXTS = st.one_of(
    st.text(),
    st.text(st.characters(codec=None)),  # lone surrogates too
    st.lists(st.one_of(_EMOJI_PARTS, st.text(max_size=3)), max_size=30).map("".join),
)


@settings(max_examples=2000)
@given(_TEXTS)
@example("\U0001f468\u200d\U0001f4bb")  # a ZWJ sequence: kept whole
@example("\U0001f44d\U0001f3fd\u200d\u200d\U0001f308")  # a skin tone, then two joiners
@example("\u2764\ufe0f\ufe0f")  # a second selector after a kept one goes
@example("1\ufe0f\ufe0f\u20e3")  # a keycap: the selector just before it stays
@example("\U0001f600\u200d\U0001f3fd\u200d\U0001f600")  # the base found past a skin tone
@example("Appro\u200bve\r\nok\u2029caf\u0065\u0301")
@example("\u4e2d\U0001f600\u4e2d\u200b")  # past an emoji, a BMP character that goes
@example("\u4e2d\U0001f600\u4e2d\U000e0041")  # past an emoji, a tag character
@example("\u4e2d\U0001f600\u4e2d\U0001d173")  # past an emoji, a musical format control
@example("\u4e2d\U0001f600e\u0301")  # past an emoji, nothing that goes: only NFC
def test_visible_is_the_per_character_rule(text: str) -> None:
    assert visible(text) == reference_visible(text)
    assert look(text) == " ".join(reference_visible(text).split())
    assert blank(text) is (look(text) == "")


@given(_TEXTS)
def test_visible_is_idempotent(text: str) -> None:
    once = visible(text)
    assert visible(once) == once
