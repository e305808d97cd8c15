"""Reading the model's JSON: the fast parser answers exactly as `json.loads` would."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allama.extract._validation import _loads

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
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


@given(st.text(alphabet='{}[]":,0123456789.eE+-truefalsn \\u\n', max_size=40))
def test_any_text_reads_or_fails_as_json_loads_does(text: str) -> None:
    ours, theirs = _outcome(_loads, text), _outcome(json.loads, text)
    assert ours[0] == theirs[0]
    if ours[0] == "value":
        assert _same(ours[1], theirs[1])
    else:
        assert ours[1] == theirs[1]


@pytest.mark.parametrize(
    "text",
    [
        '{"n": ' + "1" * 5_000 + "}",
        "[" * 300 + "]" * 300,
        '{"a": 1, "a": 2}',
        '"\\ud800"',
        '{"name": "x\ud83d"}',
        "NaN",
        "[1e400, -Infinity]",
        '{"a": 1} trailing',
        " \n[1, 2.50, -0.0]\t",
    ],
)
def test_edge_cases_read_as_json_loads_reads_them(text: str) -> None:
    ours, theirs = _outcome(_loads, text), _outcome(json.loads, text)
    assert ours[0] == theirs[0]
    assert _same(ours[1], theirs[1]) if ours[0] == "value" else ours[1] == theirs[1]
