"""Untrusted text as people see it: without the characters that show as nothing.

Model text can carry characters no reader sees: zero-width spaces and joiners, direction marks and
overrides, word joiners, soft hyphens, byte order marks, Hangul fillers, Unicode tag characters
(which can smuggle whole hidden sentences), stray variation selectors, and control characters. With
them "Approve" and "Appro\\u200bve" are two options that look the same, and a label of "\\u200b"
looks empty. :func:`visible` removes them (one rule, used by validation and by every platform's
rendering), :func:`look` is the key under which two texts look the same, and :func:`blank` is the
one rule for "empty": a question, label or typed answer a person would see nothing of. People's
typed answers are kept as :func:`typed` makes them: what the person saw, nothing hidden (a
teammate cannot smuggle tag characters or a terminal's escape sequences to the model).

What is kept, so emoji still work: a zero-width joiner between two symbols (👨‍💻, 🏳️‍🌈) and a
text or emoji presentation selector (U+FE0E, U+FE0F) directly after a non-ASCII symbol or
punctuation mark (❤️), or in a keycap (1️⃣). Everywhere else they are invisible and go. Tag
characters always go, so a subdivision flag (England's) shows as a plain black flag, and so does
the zero-width non-joiner, so Persian or Indic words that use it may join where the writer split
them: both are rare in questions, and a hidden difference between two options is worse.
"""

from __future__ import annotations

import re
import unicodedata

_BMP_CHARS = (
    r"\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 and C1 controls, except tab and newline
    r"\u00ad\u034f\u061c"  # soft hyphen, combining grapheme joiner, Arabic letter mark
    r"\u115f\u1160\u17b4\u17b5\u180b-\u180f"  # Hangul fillers, Khmer inherent vowels, Mongolian
    r"\u200b\u200c\u200e\u200f"  # zero-width space and non-joiner, direction marks
    r"\u202a-\u202e\u2060-\u206f"  # bidi embeddings and overrides, word joiner.., isolates
    r"\u3164\ufe00-\ufe0d\ufeff\uffa0\ufff0-\ufff8"  # fillers, variation selectors 1-14, BOM
    r"\ud800-\udfff"  # lone surrogates (no character at all; unencodable)
)
_ASTRAL_CHARS = (
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"  # shorthand and musical format controls
    r"\U000e0000-\U000e0fff"  # tag characters, variation selectors 17-256
)
_ALWAYS_CHARS = _BMP_CHARS + _ASTRAL_CHARS
_ALWAYS = re.compile(f"[{_ALWAYS_CHARS}]")
"""Characters removed wherever they are: controls and Unicode's default-ignorable characters,
except the three kept in emoji (ZWJ U+200D, selectors U+FE0E and U+FE0F)."""

_JOINERS = re.compile(r"[\u200d\ufe0e\ufe0f]")
"""The characters :func:`visible` keeps or drops by their neighbours (:func:`_joiners_kept`)."""

_BLANK = re.compile(f"[\\s\u2800\u200d\ufe0e\ufe0f{_ALWAYS_CHARS}]*")
"""A text a person sees nothing of: whitespace (the braille blank U+2800 looks like one) and
characters :func:`visible` removes. Matched in C and stopped at the first visible character, so
judging a long typed answer costs next to nothing; equal to ``not look(text)``, which the tests
hold it to."""

_LINE_BREAKS = str.maketrans(
    {
        "\r": "\n",
        "\x0b": "\n",
        "\x0c": "\n",
        "\x85": "\n",
        "\u2028": "\n",
        "\u2029": "\n",
        "\u2800": " ",
    }
)
"""Every other line break (carriage return, vertical tab, form feed, next line U+0085, line and
paragraph separators) as the newline it shows as, rather than removed with the other controls
(two lines would run together); and the braille blank, which shows as a space, as one."""
_ZWJ = "\u200d"
_KEYCAP = "\u20e3"
_CHANGED = re.compile(f"[\r\x0b\x0c\x85\u2028\u2029\u2800\u200d\ufe0e\ufe0f{_ALWAYS_CHARS}]")
"""Any character :func:`visible` removes, replaces or judges by its neighbours: a text without
one (nearly every text) is returned as it is, once it is known to be NFC, after one search in C."""
_CHANGED_OR_ASTRAL = re.compile(
    f"[\r\x0b\x0c\x85\u2028\u2029\u2800\u200d\ufe0e\ufe0f{_BMP_CHARS}\U00010000-\U0010ffff]"
)
""":data:`_CHANGED` with every character beyond the Basic Multilingual Plane, as the first search.
``re`` tests a class of BMP characters against one bitmap, but tries ranges beyond the BMP one by
one for every character, and the tag characters' range is slow to try: searching 15,000 CJK
characters for :data:`_CHANGED` took three times as long as this class. Where it finds an astral
character (an emoji, say), :data:`_CHANGED` searches on from there."""
ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""The ASCII characters :func:`visible` changes (controls but tab and newline; carriage return is
one), in a small class that is quick to search: ASCII text is told by ``str.isascii`` and most of
it by ``str.isprintable`` (no tab or newline either), both far quicker than any character class."""
_SKIN_TONE_CHARS = "".join(map(chr, range(0x1F3FB, 0x1F400)))
_DIGITS = frozenset("0123456789#*")


def _symbol(char: str) -> bool:
    return unicodedata.category(char) == "So"


def _takes_presentation(before: str, after: str) -> bool:
    """Whether a presentation selector between ``before`` and ``after`` changes what is shown."""
    if not before:
        return False
    if before in _DIGITS:
        return after == _KEYCAP
    return ord(before) > 0x7F and unicodedata.category(before)[0] in "SP"


def _joiners_kept(chars: str) -> str:
    """``chars`` (no character of :data:`_ALWAYS` left) without the joiners and presentation
    selectors that change nothing shown: a ZWJ stays only between two symbols (the one before it
    found past skin tones and selectors), a selector only where :func:`_takes_presentation` says.

    Each decision depends on what was kept before it, so it is made joiner by joiner, in order;
    the text between two joiners is kept whole, in slices, so the Python work grows with the
    joiners (a few in a text with emoji), not with the text's length."""
    pieces: list[str] = []
    last = ""  # the last character kept
    base = ""  # the last character kept that a ZWJ would join: no selector, no skin tone
    start = 0
    end = len(chars)
    for found in _JOINERS.finditer(chars):
        at = found.start()
        if at > start:
            run = chars[start:at]
            pieces.append(run)
            last = run[-1]
            toned = run.rstrip(_SKIN_TONE_CHARS)
            if toned:
                base = toned[-1]
        start = at + 1
        char = chars[at]
        after = chars[start] if start < end else ""
        if char == _ZWJ:
            if not (base and _symbol(base) and after and _symbol(after)):
                continue
            base = char
        elif not _takes_presentation(last, after):
            continue
        pieces.append(char)
        last = char
    pieces.append(chars[start:])
    return "".join(pieces)


def visible(text: str) -> str:
    """``text`` without the characters that show as nothing, NFC-normalised; every line break
    (CR LF, CR, NEL, line and paragraph separators...) becomes a newline. Idempotent; leading and
    trailing whitespace is left alone."""
    if text.isascii():
        if text.isprintable() or ASCII_CONTROL.search(text) is None:
            return text
    elif (found := _CHANGED_OR_ASTRAL.search(text)) is None or (
        found.group() > "\uffff" and _CHANGED.search(text, found.start()) is None
    ):
        if unicodedata.is_normalized("NFC", text):
            return text
        return unicodedata.normalize("NFC", text)
    chars = _ALWAYS.sub("", text.replace("\r\n", "\n").translate(_LINE_BREAKS))
    if _JOINERS.search(chars) is not None:
        chars = _joiners_kept(chars)
    return unicodedata.normalize("NFC", chars)


def look(text: str) -> str:
    """What ``text`` looks like, as a key: two texts with the same key cannot be told apart by a
    reader (:func:`visible`, then every run of whitespace as one space, none at the ends)."""
    return " ".join(visible(text).split())


def blank(text: str) -> bool:
    """Whether a person would see nothing of ``text``: only whitespace and characters that show
    as nothing (``look(text) == ""``). The one rule for "empty", wherever a text is judged:
    the model's questions and labels (:mod:`bridge.validation`), people's typed answers
    (:func:`typed`), what a platform shows (:func:`shown`)."""
    return _BLANK.fullmatch(text) is not None


def typed(text: str) -> str | None:
    """A person's typed answer as it is judged and kept: encodable, :func:`visible` (line breaks
    as newlines; controls, zero-width and tag characters gone), trimmed; ``None`` when
    :func:`blank`.

    Normalised rather than refused: every character taken out is one the person could not see
    (a stray control from a paste, a Windows line ending), so what they saw is what is kept,
    and what reaches the model holds nothing hidden -- no tag characters spelling out unseen
    instructions, no C1 ``CSI`` acting on the terminal of whoever reads the answer."""
    text = encodable(text)
    if blank(text):
        return None
    return visible(text).strip()


ELLIPSIS = "…"
"""How every platform shows that a text was cut."""
BLANK = "(blank)"
"""Shown for a text with nothing visible (platforms refuse empty labels)."""


def shown(text: str) -> str:
    """What a platform shows of ``text``: :func:`visible`, and never empty."""
    return BLANK if blank(text) else visible(text)


def one_line(text: str) -> str:
    """Newlines collapsed to spaces, for places that show one line (buttons, labels, headers)."""
    return " ".join(text.split())


def encodable(text: str) -> str:
    r"""``text`` with lone surrogates replaced by U+FFFD, so it encodes as UTF-8.

    A JSON ``"\ud800"`` escape (a platform's payload, a handler's reply) decodes to a lone
    surrogate, which no encoder takes: Redis, a log line or a reply would fail on it. Text taken
    from people is made encodable where it enters (typed text, display names), so nothing fails
    later; :func:`visible` removes them from what is shown."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
