"""``read_json``: what JSON allows reads as ``json.loads`` reads it; the rest is refused by place.

Property tests (bounded, derandomized) over generated JSON values: a clean body comes back
unchanged whichever way it is written, and one hostile value planted anywhere is refused
naming exactly its place, whether the quick check or the full read is what sees it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autofe.pipelines.serve_json import MAX_DEPTH, MAX_PROBLEMS, BodyRefused, Problem, read_json

BOUNDED = settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
MARK = "hostile-51ab"
NOT_FINITE = "is not a finite number (JSON has no NaN or Infinity)"
HOSTILE = [
    ("NaN", f"NaN {NOT_FINITE}"),
    ("-Infinity", f"-Infinity {NOT_FINITE}"),
    ("1e400", "1e400 overflows a 64-bit float: give a finite number"),
    (
        "-1" + "0" * 309,
        "-10000000000... (311 characters) overflows a 64-bit float: give a finite number",
    ),
    ('"\\udfff"', "contains a lone surrogate (\\udfff), which is not Unicode text"),
    ('"a\\ud800b"', "contains a lone surrogate (\\ud800), which is not Unicode text"),
]


def places(value: Any, loc: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every value's place in ``value``, ``value`` itself first."""
    yield loc
    if isinstance(value, dict):
        for key, child in value.items():
            yield from places(child, (*loc, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from places(child, (*loc, index))


def planted(value: Any, loc: tuple[str | int, ...]) -> Any:
    """``value`` with :data:`MARK` at ``loc`` (copied on the way down)."""
    if not loc:
        return MARK
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    copy[loc[0]] = planted(value[loc[0]], loc[1:])
    return copy


@given(value=VALUES, ascii_only=st.booleans())
@BOUNDED
def test_a_body_json_allows_reads_as_json_loads_reads_it(value: Any, ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert read_json(body) == json.loads(body) == value


@given(value=VALUES, data=st.data())
@BOUNDED
def test_a_hostile_value_anywhere_is_refused_naming_its_place(
    value: Any, data: st.DataObject
) -> None:
    loc = data.draw(st.sampled_from(list(places(value))), label="place")
    token, message = data.draw(st.sampled_from(HOSTILE), label="hostile")
    body = json.dumps(planted(value, loc)).replace(f'"{MARK}"', token).encode()
    with pytest.raises(BodyRefused) as refused:
        read_json(body)
    assert refused.value.problems == [Problem(loc, message)]


def test_nesting_is_refused_past_the_limit_at_the_place_it_goes_too_deep() -> None:
    assert read_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    for depth in (MAX_DEPTH + 1, 900, 100_000):
        with pytest.raises(BodyRefused, match=f"nested deeper than {MAX_DEPTH} levels"):
            read_json(b"[" * depth + b"]" * depth)
    with pytest.raises(BodyRefused) as refused:
        read_json(b'{"a": ' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}")
    assert refused.value.problems[0].loc == ("a", *[0] * (MAX_DEPTH - 1))


def test_raw_surrogate_bytes_and_other_encodings_are_read_as_json_loads_reads_them() -> None:
    with pytest.raises(BodyRefused, match=r"^a: contains a lone surrogate \(\\ud83d\)"):
        read_json(b'{"a": "\xed\xa0\xbd"}')  # json.loads decodes UTF-8 with surrogatepass
    utf16 = '{"a": "\\ud83d\\ude00", "b": 1.5}'.encode("utf-16")
    assert read_json(utf16) == json.loads(utf16) == {"a": "\U0001f600", "b": 1.5}
    with pytest.raises(BodyRefused, match="NaN"):
        read_json('{"a": NaN}'.encode("utf-32"))
    assert read_json(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}


def test_the_largest_numbers_pass_and_tiny_ones_round_to_zero() -> None:
    body = f'[{sys.float_info.max!r}, {-int(sys.float_info.max)}, 1e-400, "NaN", "\\\\ud83d"]'
    assert read_json(body.encode()) == [
        sys.float_info.max,
        -int(sys.float_info.max),
        0.0,
        "NaN",
        "\\ud83d",
    ]


def test_not_json_is_left_to_the_caller_as_a_value_error() -> None:
    for body in (b"{not json", b"", b"\xff\xfe\xff"):
        with pytest.raises(ValueError) as raised:
            read_json(body)
        assert not isinstance(raised.value, BodyRefused)
    with pytest.raises(BodyRefused, match="overflows"):
        read_json(b"[" + b"9" * 5000 + b"]")  # json.loads alone: "Exceeds the limit"


def test_a_body_full_of_problems_gets_a_short_answer() -> None:
    with pytest.raises(BodyRefused) as refused:
        read_json(b"[" + b", ".join([b"NaN"] * 50) + b"]")
    assert [p.loc for p in refused.value.problems] == [(i,) for i in range(MAX_PROBLEMS)]
