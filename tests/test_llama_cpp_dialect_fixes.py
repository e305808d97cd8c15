"""The `llama_cpp` dialect against what llama.cpp's JSON-Schema-to-grammar converter does:
it compiles the first branch that matches a node (a string's `pattern`, else its `format`,
else its lengths; an `enum`'s values; an integer's `minimum`, else its `exclusiveMinimum`),
takes one anchor at each end of a pattern, copies an escaped backslash into the JSON string
as it is, and refuses boolean subschemas. The dialect must rewrite what it can and note the
rest. The last tests run the real server (`xllamacpp`) on the tiny model of
`tests/_tiny_gguf.py`, which answers the shortest value the grammar allows (or, pushed with
`logit_bias`, a long one)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import allama
from allama import ChatRequest, ResponseFormat
from allama.schema._dialects._grammar import grammar_engine
from allama.schema._dialects._llama_cpp import llama_cpp, llama_cpp_pattern
from allama.types import FinishReason

# Patterns


def test_lengths_and_a_format_beside_a_pattern_are_noted() -> None:
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[a-z]*$", "minLength": 3, "maxLength": 8},
            "day": {"type": ["string", "null"], "pattern": "^[0-9-]+$", "format": "date"},
        },
    }
    rewrite = llama_cpp(schema)
    assert rewrite.schema == schema
    assert [n.message for n in rewrite.notes] == [
        "`minLength` is not enforced by the grammar at `/properties/code`: llama.cpp compiles "
        "only the `pattern` beside it",
        "`maxLength` is not enforced by the grammar at `/properties/code`: llama.cpp compiles "
        "only the `pattern` beside it",
        "`format` is not enforced by the grammar at `/properties/day`: llama.cpp compiles "
        "only the `pattern` beside it",
    ]


@pytest.mark.parametrize(
    ("node", "messages"),
    [
        (
            {"type": "string", "format": "date", "maxLength": 3},
            [
                "`maxLength` is not enforced by the grammar at `/`: llama.cpp compiles only the "
                "`format` `date` beside it",
                "`format` `date` is enforced in shape only by the grammar at `/`",
            ],
        ),
        (
            {"type": "string", "format": "uuid", "minLength": 40},
            [
                "`minLength` is not enforced by the grammar at `/`: llama.cpp compiles only the "
                "`format` `uuid` beside it"
            ],
        ),
        # Every UUID the grammar writes has 36 characters: the lengths hold anyway.
        ({"type": "string", "format": "uuid", "minLength": 36, "maxLength": 40}, []),
        (
            {"type": "string", "format": "date-time", "maxLength": 29},
            ["`format` `date-time` is enforced in shape only by the grammar at `/`"],
        ),
    ],
)
def test_lengths_beside_a_compiled_format_are_noted_unless_it_meets_them(
    node: dict[str, Any], messages: list[str]
) -> None:
    rewrite = llama_cpp(node)
    assert rewrite.schema == node
    assert [n.message for n in rewrite.notes] == messages


@pytest.mark.parametrize(
    ("pattern", "spelled"),
    [
        (r"^\d{5}$|^\d{5}-\d{4}$", "^([0-9]{5}|[0-9]{5}-[0-9]{4})$"),
        ("^(?:ab)$|^(?:c)$|^d$", "^((?:ab)|(?:c)|d)$"),
        ("^(a|b)$", "^(a|b)$"),
        ("^a[|]$|^b\\|$", "^(a[|]|b\\|)$"),
    ],
)
def test_alternatives_anchored_apart_become_one_anchored_group(pattern: str, spelled: str) -> None:
    assert llama_cpp_pattern(pattern) == (spelled, "")


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        # Read by JSON Schema as "starts with a, or ends with b"; by llama.cpp as "a" or "b".
        ("^a|b$", "an alternative without `^` at its start and `$` at its end"),
        ("^a$|b$", "an alternative without `^` at its start and `$` at its end"),
        # An escaped dollar anchors nothing (the server fails: "trailing backslash").
        ("^a\\$", "an alternative without `^` at its start and `$` at its end"),
        ("^a$b$", "an anchor inside the pattern"),
        ("^(a$|b)$", "an anchor inside the pattern"),
        ("^(a|b$", "unbalanced parentheses"),
        (
            "^a\\\\b$",
            "an escaped backslash, which it writes unescaped into the JSON string",
        ),
        ("^[\\\\a]$", "an escaped backslash, which it writes unescaped into the JSON string"),
    ],
)
def test_a_pattern_the_converter_misreads_is_removed_and_noted(pattern: str, why: str) -> None:
    assert llama_cpp_pattern(pattern) == (None, why)
    rewrite = llama_cpp({"type": "string", "pattern": pattern})
    assert rewrite.schema == {"type": "string"}
    assert [n.message for n in rewrite.notes] == [
        f"`pattern` was removed at `/`: llama.cpp's grammar cannot compile {why}"
    ]


_PIECES = st.sampled_from(["a", "b", "Z", "-", "\\d", "\\w", "\\.", "[a-c]", "(ab|c)", "(?:x)"])
_QUANTIFIERS = st.sampled_from(["", "?", "*", "+", "{2}", "{1,3}"])
_BODIES = st.lists(st.tuples(_PIECES, _QUANTIFIERS), min_size=1, max_size=4).map(
    lambda pieces: "".join(piece + quantifier for piece, quantifier in pieces)
)


@settings(max_examples=300, deadline=None)
@given(
    bodies=st.lists(_BODIES, min_size=1, max_size=3),
    text=st.text(alphabet="abcZ-._x019", max_size=8),
)
def test_anchored_alternatives_keep_their_meaning(bodies: list[str], text: str) -> None:
    pattern = "|".join(f"^{body}$" for body in bodies)
    spelled, why = llama_cpp_pattern(pattern)
    assert spelled is not None, why
    # The converter strips the first `^` and the last `$` and matches the rest whole: no
    # anchor may be left inside.
    inner = spelled[1:-1]
    assert spelled[0] == "^" and spelled[-1] == "$"
    assert "^" not in inner and "$" not in inner
    assert bool(re.search(pattern, text, re.ASCII)) == bool(re.fullmatch(inner, text))


# Integer bounds


@pytest.mark.parametrize(
    ("node", "sent"),
    [
        (
            {"type": "integer", "minimum": 0, "exclusiveMinimum": 5, "maximum": 9},
            {"type": "integer", "minimum": 6, "maximum": 9},
        ),
        (
            {"type": "integer", "minimum": 7, "exclusiveMinimum": 5},
            {"type": "integer", "minimum": 7},
        ),
        (
            {"type": "integer", "maximum": 9, "exclusiveMaximum": 4, "minimum": 0},
            {"type": "integer", "maximum": 3, "minimum": 0},
        ),
        (
            {"type": "integer", "minimum": 1.5, "exclusiveMaximum": 3.5},
            {"type": "integer", "minimum": 2, "maximum": 3},
        ),
        (
            {"type": "integer", "exclusiveMinimum": -5.5},
            {"type": "integer", "minimum": -5},
        ),
        # Whole bounds alone the converter reads right: sent as written.
        ({"type": "integer", "exclusiveMinimum": 7}, {"type": "integer", "exclusiveMinimum": 7}),
        ({"type": "integer", "minimum": 2.0}, {"type": "integer", "minimum": 2.0}),
    ],
)
def test_each_side_of_an_integer_range_is_one_bound_the_converter_reads(
    node: dict[str, Any], sent: dict[str, Any]
) -> None:
    rewrite = llama_cpp(node)
    assert rewrite.schema == sent
    assert rewrite.notes == ()


def _converter_accepts(node: dict[str, Any], value: int) -> bool:
    """What llama.cpp's converter makes of an integer's bounds: `minimum`, else
    `exclusiveMinimum` + 1 (and likewise above), each cut to a whole number."""
    if node.get("type") != "integer":
        return True
    low = high = None
    if "minimum" in node:
        low = int(node["minimum"])
    elif "exclusiveMinimum" in node:
        low = int(node["exclusiveMinimum"]) + 1
    if "maximum" in node:
        high = int(node["maximum"])
    elif "exclusiveMaximum" in node:
        high = int(node["exclusiveMaximum"]) - 1
    return (low is None or value >= low) and (high is None or value <= high)


def _schema_accepts(node: dict[str, Any], value: int) -> bool:
    return bool(
        value >= node.get("minimum", -math.inf)
        and value > node.get("exclusiveMinimum", -math.inf)
        and value <= node.get("maximum", math.inf)
        and value < node.get("exclusiveMaximum", math.inf)
    )


_BOUND = st.none() | st.integers(-12, 12) | st.floats(-12, 12).map(lambda f: round(f, 1))


@settings(max_examples=400, deadline=None)
@given(minimum=_BOUND, exclusive_min=_BOUND, maximum=_BOUND, exclusive_max=_BOUND)
def test_the_converter_reads_the_sent_bounds_as_the_schema_means_them(
    minimum: float | None,
    exclusive_min: float | None,
    maximum: float | None,
    exclusive_max: float | None,
) -> None:
    bounds = {
        "minimum": minimum,
        "exclusiveMinimum": exclusive_min,
        "maximum": maximum,
        "exclusiveMaximum": exclusive_max,
    }
    node = {"type": "integer", **{k: v for k, v in bounds.items() if v is not None}}
    rewrite = llama_cpp(node)
    for value in range(-20, 21):
        meant = _schema_accepts(node, value)
        read = _converter_accepts(rewrite.schema, value)
        assert read or not meant, value  # never narrower
        if not rewrite.notes:
            assert read == meant, value  # and exact when nothing is noted


def test_an_empty_integer_range_is_a_node_that_accepts_nothing() -> None:
    # The server fails every generation on it (HTTP 500): optional in a closed object, the
    # property is left out, which changes nothing.
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 5, "exclusiveMaximum": 5},
            "b": {"type": "integer"},
        },
    }
    rewrite = llama_cpp(schema)
    assert rewrite.schema == {"type": "object", "properties": {"b": {"type": "integer"}}}
    assert rewrite.notes == ()


# Enums


def test_an_enum_keeps_the_values_the_keywords_beside_it_allow() -> None:
    schema = {
        "type": "object",
        "properties": {
            "size": {"type": "string", "enum": ["abcd", "b", "cc"], "maxLength": 2},
            "count": {"type": "integer", "enum": [1, 5, 9], "minimum": 2, "exclusiveMaximum": 9},
            "code": {"type": "string", "enum": ["a1", "b2"], "pattern": "^a[0-9]$"},
        },
    }
    rewrite = llama_cpp(schema)
    props = rewrite.schema["properties"]
    assert props["size"]["enum"] == ["b", "cc"]
    assert props["count"]["enum"] == [5]
    assert props["code"]["enum"] == ["a1", "b2"]
    assert [n.message for n in rewrite.notes] == [
        "`pattern` is not enforced by the grammar at `/properties/code`: llama.cpp compiles "
        "only the `enum` values beside it"
    ]


def test_an_enum_no_value_of_which_holds_accepts_nothing() -> None:
    schema = {
        "type": "object",
        "properties": {"size": {"type": "string", "enum": ["abcd"], "maxLength": 2}},
        "required": ["size"],
    }
    rewrite = llama_cpp(schema)
    assert rewrite.schema == {}
    assert [n.message for n in rewrite.notes] == [
        "the subschema at `/` accepts nothing; llama.cpp cannot say so, so it accepts anything"
    ]


# Boolean subschemas


@pytest.mark.parametrize(
    ("schema", "sent", "messages"),
    [
        (
            {"type": "object", "properties": {"a": False, "b": {"type": "integer"}}},
            {"type": "object", "properties": {"b": {"type": "integer"}}},
            [],
        ),
        (
            {"type": "object", "properties": {"a": True}, "required": ["a"]},
            {"type": "object", "properties": {"a": {}}, "required": ["a"]},
            [],
        ),
        (
            {"anyOf": [{"type": "integer"}, False, True]},
            {"anyOf": [{"type": "integer"}, {}]},
            [],
        ),
        (
            {
                "type": "object",
                "properties": {"a": False},
                "additionalProperties": {"type": "integer"},
            },
            {"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}},
            [
                "the subschema at `/properties/a` accepts nothing; llama.cpp cannot say so, "
                "so the key is allowed like any other"
            ],
        ),
        (
            {"type": "object", "properties": {"a": {"anyOf": [False, False]}}, "required": ["a"]},
            {},
            [
                "the subschema at `/` accepts nothing; llama.cpp cannot say so, so it accepts "
                "anything"
            ],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {
                        "anyOf": [
                            {"type": "object", "properties": {"x": False}, "required": ["x"]},
                            {"type": "string"},
                        ]
                    }
                },
            },
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
            [],
        ),
        (
            {"type": "array", "prefixItems": [{"type": "integer"}, False]},
            {"type": "array", "prefixItems": [{"type": "integer"}, {}]},
            [
                "`prefixItems` is not enforced by the grammar at `/`",
                "the subschema at `/prefixItems/1` accepts nothing; llama.cpp cannot say so, "
                "so it accepts anything",
            ],
        ),
        (
            {
                "$defs": {"never": False, "maybe": {"anyOf": [{"$ref": "#/$defs/never"}]}},
                "type": "object",
                "properties": {
                    "a": {"$ref": "#/$defs/maybe"},
                    "b": {"anyOf": [{"$ref": "#/$defs/never"}, {"type": "string"}]},
                },
            },
            {"type": "object", "properties": {"b": {"anyOf": [{"type": "string"}]}}},
            [],
        ),
        (
            {"$defs": {"never": False}, "$ref": "#/$defs/never"},
            {},
            [
                "the subschema at `/` accepts nothing; the grammar cannot say so, so it accepts "
                "anything"
            ],
        ),
    ],
)
def test_boolean_subschemas_are_rewritten_or_left_out(
    schema: dict[str, Any], sent: dict[str, Any], messages: list[str]
) -> None:
    rewrite = llama_cpp(schema)
    assert rewrite.schema == sent
    assert [n.message for n in rewrite.notes] == messages


def _booleans(node: Any, pointer: str = "") -> Iterator[str]:
    """Where a boolean stands for a schema (`additionalProperties` booleans are read)."""
    if isinstance(node, bool):
        yield pointer or "/"
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    yield from _booleans(sub, f"{pointer}/{key}/{name}")
            elif key in ("anyOf", "prefixItems"):
                for i, sub in enumerate(value):
                    yield from _booleans(sub, f"{pointer}/{key}/{i}")
            elif key == "items" or (key == "additionalProperties" and isinstance(value, dict)):
                yield from _booleans(value, f"{pointer}/{key}")


_LEAVES = st.sampled_from(
    [True, False, {"type": "integer"}, {"type": "string", "maxLength": 3}, {"$ref": "#/$defs/d"}]
)
_SCHEMAS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.dictionaries(st.sampled_from("abc"), inner, max_size=3).flatmap(
            lambda props: st.fixed_dictionaries(
                {
                    "type": st.just("object"),
                    "properties": st.just(props),
                    "required": st.lists(st.sampled_from(sorted(props) or ["a"]), unique=True),
                },
                optional={"additionalProperties": inner},
            )
        ),
        st.lists(inner, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches}),
        inner.map(lambda items: {"type": "array", "items": items}),
        st.lists(inner, min_size=1, max_size=2).map(
            lambda tuple_: {"type": "array", "prefixItems": tuple_}
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(root=_SCHEMAS, definition=_SCHEMAS)
def test_no_boolean_subschema_is_sent(root: Any, definition: Any) -> None:
    schema = {"$defs": {"d": definition}, "anyOf": [root, {"type": "null"}]}
    rewrite = llama_cpp(schema)
    assert list(_booleans(rewrite.schema)) == []


def test_a_grammar_engine_says_when_the_root_accepts_nothing() -> None:
    rewrite = grammar_engine({"type": "string", "enum": [1]})
    assert rewrite.schema == {}
    assert [n.message for n in rewrite.notes] == [
        "the subschema at `/` accepts nothing; the grammar cannot say so, so it accepts anything"
    ]


# Ollama lists the notes among its warnings


def test_ollama_lists_what_its_converter_skips() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[a-z]*$", "minLength": 3},
            "qty": {"type": "integer", "minimum": 0, "exclusiveMinimum": 5},
            "zip": {"type": "string", "pattern": r"^\d{5}$|^\d{5}-\d{4}$"},
            "gone": False,
        },
        "required": ["code", "qty", "zip"],
    }
    request = (
        ChatRequest("llama3.1")
        .user("Hi")
        .with_response_format(ResponseFormat.for_schema(schema, name="item"))
    )
    http, warnings = allama.provider("ollama")._prepare(request, stream=False)
    sent = http.body["format"]["properties"]
    assert sent == {
        "code": {"type": "string", "pattern": "^[a-z]*$", "minLength": 3},
        "qty": {"type": "integer", "minimum": 6},
        "zip": {"type": "string", "pattern": "^([0-9]{5}|[0-9]{5}-[0-9]{4})$"},
    }
    assert [w.message for w in warnings] == [
        "the response format `item` was approximated: `minLength` is not enforced by the "
        "grammar at `/properties/code`: llama.cpp compiles only the `pattern` beside it",
        "the response format `item` was approximated: the schema at `/` is compiled by "
        "Ollama's llama.cpp grammar converter, which does not report which keywords it enforces",
    ]


# Against the real server

_LONG: Any = [["<|im_end|>", -60], ['"', -60], ["}", -60], ["]", -60], ["a", 6], ["9", 7], [",", 5]]


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("xllamacpp", reason="the llama.cpp engine is not installed")
    pytest.importorskip("gguf", reason="the tiny test models need the gguf package")
    from _tiny_gguf import write_tiny_model

    path: Path = write_tiny_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf").path
    with allama.provider("local", model=path) as provider:
        yield provider.start()  # type: ignore[attr-defined]


def _ask(local: Any, schema: dict[str, Any], bias: str) -> tuple[Any, list[str]]:
    request = (
        ChatRequest("tiny")
        .user("Make a record.")
        .with_max_output_tokens(120)
        .with_temperature(0)
        .with_response_format(
            ResponseFormat(type="json_schema", json_schema=schema, name="probe", strict=True)
        )
    )
    if bias == "longest":
        request = request.with_option_json("openai_compat", {"logit_bias": _LONG})
    response = local.chat(request)
    assert response.finish_reason == FinishReason.STOP
    return json.loads(response.text() or ""), [w.message for w in response.warnings]


ENFORCED: dict[str, dict[str, Any]] = {
    "minimum and exclusiveMinimum": {
        "type": "integer",
        "minimum": 0,
        "exclusiveMinimum": 5,
        "maximum": 9,
    },
    "maximum and exclusiveMaximum": {
        "type": "integer",
        "minimum": 5,
        "maximum": 9,
        "exclusiveMaximum": 6,
    },
    "alternatives anchored apart": {"type": "string", "pattern": r"^\d{2}$|^[b-d]{3}-\d$"},
    "enum beside maxLength": {"type": "string", "enum": ["abcd", "b"], "maxLength": 2},
    "false property": {
        "type": "object",
        "properties": {"a": False, "b": {"type": "integer"}},
        "required": ["b"],
    },
    "false branch": {
        "type": "object",
        "properties": {"b": {"anyOf": [{"type": "integer"}, False]}},
        "required": ["b"],
    },
    "true property": {"type": "object", "properties": {"a": True}, "required": ["a"]},
    "empty integer range": {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 3}, "b": {"const": 1}},
        "required": ["b"],
    },
}


@pytest.mark.local
@pytest.mark.parametrize("bias", ["shortest", "longest"])
@pytest.mark.parametrize("case", list(ENFORCED))
def test_what_the_dialect_claims_enforced_holds_on_the_server(
    local: Any, case: str, bias: str
) -> None:
    import jsonschema

    schema = ENFORCED[case]
    value, warnings = _ask(local, schema, bias)
    assert warnings == []
    jsonschema.validate(value, schema)


REPORTED: dict[str, tuple[dict[str, Any], str]] = {
    "minLength beside a pattern": (
        {"type": "string", "pattern": "^[a-z]*$", "minLength": 3},
        "`minLength` is not enforced by the grammar at `/`: llama.cpp compiles only the "
        "`pattern` beside it",
    ),
    "maxLength beside a format": (
        {"type": "string", "format": "date", "maxLength": 3},
        "`maxLength` is not enforced by the grammar at `/`: llama.cpp compiles only the "
        "`format` `date` beside it",
    ),
    "escaped backslash": (
        {"type": "string", "pattern": r"^a\\b$"},
        "`pattern` was removed at `/`: llama.cpp's grammar cannot compile an escaped "
        "backslash, which it writes unescaped into the JSON string",
    ),
    "required false property": (
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        "the subschema at `/` accepts nothing; llama.cpp cannot say so, so it accepts anything",
    ),
}


@pytest.mark.local
@pytest.mark.parametrize("case", list(REPORTED))
def test_what_the_server_does_not_enforce_is_reported(local: Any, case: str) -> None:
    import jsonschema

    schema, message = REPORTED[case]
    value, warnings = _ask(local, schema, "shortest")
    assert f"the response format `probe` was approximated: {message}" in warnings
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, schema)
