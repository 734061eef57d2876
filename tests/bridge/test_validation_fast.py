"""The checks of one text take a short way for ASCII without control characters (nearly every
text a model sends); it must judge every text exactly as the full sequence of rules does, which
it falls back to for any text it does not pass."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from bridge.validation import _Checker

_ASCII = st.text(st.characters(max_codepoint=0x7F), max_size=60)
_LONG = st.builds(
    lambda char, n, pad: pad + char * n + pad,
    st.sampled_from(["x", " ", "\t", "\n", "\x01", "\x7f", "\u00e9", "\u20ac"]),
    st.sampled_from([0, 11, 12, 13, 48, 49, 199, 200, 201, 400, 401, 999, 1000, 1001, 2000, 2001]),
    st.sampled_from(["", " ", "\n", "a"]),
)


@given(
    st.sampled_from(["question", "header", "label", "description"]),
    st.one_of(_ASCII, _LONG, st.text(), st.none(), st.integers()),
)
@example("header", "x" * 49)  # over the header's bytes: reported here, not as too long a header
@example("label", " \r ")  # a carriage return alone: empty before it is a control character
def test_the_short_way_judges_as_every_rule_does(key: str, value: object) -> None:
    short, full = _Checker(), _Checker()
    assert short.text({key: value}, key, "q") == full._text_problem({key: value}, key, "q")
    assert short.problems == full.problems
