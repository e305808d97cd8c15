"""Reading the model's JSON strictly: as `json.loads` reads it, except that `NaN`,
`Infinity`, numbers too large for a float and duplicate keys are errors naming the place."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allama.extract._json import NotJsonError
from allama.extract._json import loads as _loads

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with the JSON types kept apart (`1` is not `1.0`, `True` is not `1`)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", parse(text)
    except ValueError as error:
        return "error", str(error)
    except RecursionError:
        return "recursion", None


@given(JSON, st.sampled_from([None, 2, (",", ":")]))
def test_any_json_reads_as_json_loads_reads_it(value: Any, layout: Any) -> None:
    if isinstance(layout, tuple):
        text = json.dumps(value, separators=layout, ensure_ascii=False)
    else:
        text = json.dumps(value, indent=layout)
    assert _same(_loads(text), json.loads(text))


class _Duplicate(Exception):
    pass


def _strict_json_loads(text: str) -> Any:
    """`json.loads`, refusing what strict JSON refuses."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in items}) != len(items):
            raise _Duplicate
        return dict(items)

    def constant(word: str) -> Any:
        raise _Duplicate

    value = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    if _has_infinity(value):
        raise _Duplicate
    return value


def _has_infinity(value: Any) -> bool:
    if isinstance(value, float):
        return math.isinf(value)
    if isinstance(value, dict):
        return any(_has_infinity(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_infinity(v) for v in value)
    return False


@given(st.text(alphabet='{}[]":,0123456789.eE+-truefalsnNaIiy \\u\n', max_size=40))
def test_any_text_reads_or_fails_as_strict_json_does(text: str) -> None:
    try:
        expected: tuple[str, Any] = ("value", _strict_json_loads(text))
    except _Duplicate:
        expected = ("not json", None)
    except ValueError as error:
        expected = ("error", str(error))
    except RecursionError:
        expected = ("recursion", None)
    try:
        ours: tuple[str, Any] = ("value", _loads(text))
    except NotJsonError:
        ours = ("not json", None)
    except ValueError as error:
        ours = ("error", str(error))
    except RecursionError:
        ours = ("recursion", None)
    assert ours[0] == expected[0], (text, ours, expected)
    if ours[0] == "value":
        assert _same(ours[1], expected[1])
    elif ours[0] == "error":
        assert ours[1] == expected[1]


@given(JSON, st.sampled_from([None, 2, (",", ":"), (" , ", " : ")]))
def test_a_duplicate_key_anywhere_is_found_with_its_place(value: Any, layout: Any) -> None:
    # The marker is longer than any key or string the strategy draws, so it is only here.
    marker = "a-marker-longer-than-any-drawn-text"
    duplicated = {"outer": [value, {"k": 1, marker: value}]}
    if isinstance(layout, tuple):
        text = json.dumps(duplicated, separators=layout)
    else:
        text = json.dumps(duplicated, indent=layout)
    text = text.replace(f'"{marker}"', '"k"')
    with pytest.raises(NotJsonError) as raised:
        _loads(text)
    assert raised.value.path == "outer[1]"
    assert str(raised.value) == "the key `k` appears twice in the object at `outer[1]`"


@pytest.mark.parametrize(
    ("text", "message", "path"),
    [
        ('{"a": 1, "a": 2}', "the key `a` appears twice in the object", None),
        ('{"s": "q\\": 1", "a": 1, "a": 2}', "the key `a` appears twice in the object", None),
        ('{"a" : 1, "a" : 2}', "the key `a` appears twice in the object", None),
        ("NaN", "`NaN` is not a JSON number", None),
        (
            '{"items": [{"x": 1}, {"x": NaN}]}',
            "`NaN` is not a JSON number at `items[1].x`",
            "items[1].x",
        ),
        ("[1, -Infinity]", "`-Infinity` is not a JSON number at `[1]`", "[1]"),
        ('{"p": Infinity}', "`Infinity` is not a JSON number at `p`", "p"),
        (
            '{"p": [1e400]}',
            "the number `1e400` is too large for a floating point value at `p[0]`",
            "p[0]",
        ),
    ],
)
def test_what_strict_json_refuses_is_an_error_naming_the_place(
    text: str, message: str, path: str | None
) -> None:
    with pytest.raises(NotJsonError) as raised:
        _loads(text)
    assert (str(raised.value), raised.value.path) == (message, path)


@pytest.mark.parametrize(
    "text",
    [
        '{"n": ' + "1" * 5_000 + "}",
        "[" * 300 + "]" * 300,
        '"\\ud800"',
        '{"name": "x\ud83d"}',
        '{"a": 1} trailing',
        " \n[1, 2.50, -0.0]\t",
        '{"said": "he said \\": no", "k": 1}',
        '{"a": {"a": {"a": 1}}}',
        '[{"k": 1}, {"k": 2}]',
    ],
)
def test_edge_cases_read_as_json_loads_reads_them(text: str) -> None:
    ours, theirs = _outcome(_loads, text), _outcome(json.loads, text)
    assert ours[0] == theirs[0]
    assert _same(ours[1], theirs[1]) if ours[0] == "value" else ours[1] == theirs[1]
