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
from allama.schema._errors import SchemaError
from allama.schema._patterns import read_otherwise
from allama.types import FinishReason

# Patterns


def _rewritten(schema: Any) -> tuple[Any, list[str]]:
    """What the dialect sends of `schema`, and its notes' words."""
    rewrite = llama_cpp(schema)
    return rewrite.schema, [note.message for note in rewrite.notes]


_LIMIT = 2**63 - 2
_INT = {"type": "integer", "minimum": -_LIMIT, "maximum": _LIMIT}
"""An integer as sent: without both bounds the converter writes at most 16 digits."""


def _narrowed(at: str) -> str:
    return (
        f"`integer` was narrowed at `{at}`: llama.cpp's grammar writes integers only from "
        f"{-_LIMIT} to {_LIMIT} (64 bits; bounds within them keep it exact)"
    )


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


def _removed(pattern: str, why: str) -> str:
    """The note of a pattern llama.cpp's grammar cannot compile for `why`; one the type's
    validation (Rust's syntax) reads otherwise is removed for that first."""
    foreign = read_otherwise(pattern)
    if foreign is not None:
        said = f"it has {foreign}, which the grammar would read otherwise"
        return f"`pattern` was removed at `/`: {said}"
    return f"`pattern` was removed at `/`: llama.cpp's grammar cannot compile {why}"


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
    assert [n.message for n in rewrite.notes] == [_removed(pattern, why)]


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
            {"type": "integer", "minimum": 7, "maximum": _LIMIT},
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
            {"type": "integer", "minimum": -5, "maximum": _LIMIT},
        ),
        # Whole bounds the converter reads right: sent as written, the other side its widest.
        (
            {"type": "integer", "exclusiveMinimum": 7},
            {"type": "integer", "exclusiveMinimum": 7, "maximum": _LIMIT},
        ),
        (
            {"type": "integer", "minimum": 2.0},
            {"type": "integer", "minimum": 2.0, "maximum": _LIMIT},
        ),
    ],
)
def test_each_side_of_an_integer_range_is_one_bound_the_converter_reads(
    node: dict[str, Any], sent: dict[str, Any]
) -> None:
    rewrite = llama_cpp(node)
    assert rewrite.schema == sent
    # A side without a bound gets int64's end: integers past it are lost (noted).
    one_sided = "maximum" not in node and "exclusiveMaximum" not in node
    assert [n.message for n in rewrite.notes] == ([_narrowed("/")] if one_sided else [])


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
    assert rewrite.schema == {"type": "object", "properties": {"b": _INT}}
    assert [n.message for n in rewrite.notes] == [_narrowed("/properties/b")]


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
            {"type": "object", "properties": {"b": _INT}},
            [_narrowed("/properties/b")],
        ),
        (
            {"type": "object", "properties": {"a": True}, "required": ["a"]},
            {"type": "object", "properties": {"a": {}}, "required": ["a"]},
            [],
        ),
        (
            {"anyOf": [{"type": "integer"}, False, True]},
            {"anyOf": [_INT, {}]},
            [_narrowed("/anyOf/0")],
        ),
        (
            {
                "type": "object",
                "properties": {"a": False},
                "additionalProperties": {"type": "integer"},
            },
            {"type": "object", "properties": {}, "additionalProperties": _INT},
            [
                _narrowed("/additionalProperties"),
                "the subschema at `/properties/a` accepts nothing; llama.cpp cannot say so, "
                "so the key is allowed like any other",
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
            # No item after the one that accepts nothing: at most one, exactly (the converter
            # reads `prefixItems` as a tuple of exactly its length).
            {"type": "array", "prefixItems": [{"type": "integer"}, False]},
            {"type": "array", "items": _INT, "maxItems": 1},
            [_narrowed("/prefixItems/0")],
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
    assert _rewritten(schema) == (sent, messages)


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
    try:
        rewrite = llama_cpp(schema)
    except SchemaError as error:
        # Only when `d` is used and refers to itself in place (the server refuses that).
        assert _leads_back(definition), error
        assert str(error).endswith(
            "refers back to itself without going into a property or an "
            "item: checking a value against it would never end"
        )
        return
    assert list(_booleans(rewrite.schema)) == []


def _leads_back(definition: Any) -> bool:
    """Whether `d` refers to itself through its unions alone (a left-recursive grammar)."""
    if not isinstance(definition, dict):
        return False
    if definition.get("$ref") == "#/$defs/d":
        return True
    return any(_leads_back(branch) for branch in definition.get("anyOf", ()))


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
            "zip": {"type": "string", "pattern": r"^[0-9]{5}$|^[0-9]{5}-[0-9]{4}$"},
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
        "qty": {"type": "integer", "minimum": 6, "maximum": _LIMIT},
        "zip": {"type": "string", "pattern": "^([0-9]{5}|[0-9]{5}-[0-9]{4})$"},
    }
    assert [w.message for w in warnings] == [
        "the response format `item` was approximated: `minLength` is not enforced by the "
        "grammar at `/properties/code`: llama.cpp compiles only the `pattern` beside it",
        f"the response format `item` was approximated: {_narrowed('/properties/qty')}",
        "the response format `item` was approximated: the schema at `/` is compiled by "
        "Ollama's llama.cpp grammar converter, which does not report which keywords it enforces",
    ]


# What llama.cpp's converter makes of a pattern, as a Python regex (`None` where it gives up
# and accepts any string): it merges a run of literal characters and repeats the whole run
# when a quantifier follows an escaped one (`ab\.?` is `(ab.)?`), reads a non-ASCII character
# byte by byte (a quantifier after one repeats its last byte: the server refuses it), copies
# a class as it is and knows no escape there but these (measured: `\-` too).

_CONVERTER_CLASS_ESCAPES = frozenset('-[]\\"trnxuU')
_CONVERTER_LITERAL_ESCAPES = frozenset("^$.[]()|{}*+?")
_CONVERTER_SYNTAX = frozenset("|.()[]{}*+?")


def _as_converter_reads(pattern: str) -> str | None:
    body = pattern[1:-1]
    at = 0

    def rule(item: tuple[str, bool]) -> str:
        text, literal = item
        return f"(?:{re.escape(text)})" if literal else text

    def join(seq: list[tuple[str, bool]]) -> str:
        out, run = [], ""
        for text, literal in seq:
            if literal:
                run += text
                continue
            if run:
                out.append(rule((run, True)))
                run = ""
            out.append(text)
        if run:
            out.append(rule((run, True)))
        return "".join(out)

    def transform() -> str | None:
        nonlocal at
        seq: list[tuple[str, bool]] = []
        while at < len(body):
            char = body[at]
            if char == ".":
                seq.append(("[^\\n\\r]", False))
                at += 1
            elif char == "(":
                at += 3 if body.startswith("(?:", at) else 1
                inner = transform()
                if inner is None:
                    return None
                seq.append((f"(?:{inner})", False))
            elif char == ")":
                at += 1
                return join(seq)
            elif char == "[":
                end = at + 1
                while body[end] != "]":
                    if body[end] == "\\":
                        if body[end + 1] not in _CONVERTER_CLASS_ESCAPES:
                            return None  # "unsupported escape in character class"
                        end += 6 if body[end + 1] == "u" else 2
                    else:
                        end += 1
                seq.append((body[at : end + 1], False))
                at = end + 1
            elif char == "|":
                seq.append(("|", False))
                at += 1
            elif char in "*+?":
                seq[-1] = (rule(seq[-1]) + char, False)
                at += 1
            elif char == "{":
                end = body.index("}", at)
                seq[-1] = (rule(seq[-1]) + body[at : end + 1], False)
                at = end + 1
            else:
                literal = ""
                while at < len(body):
                    char = body[at]
                    after = body[at + 1 : at + 2]
                    if char == "\\":
                        if after in _CONVERTER_LITERAL_ESCAPES or after == "-":
                            literal, at = literal + after, at + 2
                        elif after == "u":
                            literal += chr(int(body[at + 2 : at + 6], 16))
                            at += 6
                        else:
                            return None
                    elif char not in _CONVERTER_SYNTAX and (
                        not after or not literal or after == "." or after not in _CONVERTER_SYNTAX
                    ):
                        if not char.isascii() and after and after in "*+?{":
                            return None  # its last byte alone takes the quantifier
                        literal, at = literal + char, at + 1
                    else:
                        break
                seq.append((literal, True))
        return join(seq)

    return transform()


def _unwritable(text: str) -> bool:
    """Whether `text` holds what the grammar would write raw into the JSON string."""
    return any(ord(char) < 0x20 or char in '"\\' for char in text)


_ATOMS = st.sampled_from(
    [
        "a",
        "-",
        "é",
        "\\.",
        "\\-",
        "\\^",
        "\\$",
        "\\/",
        "\\}",
        "\\u0041",
        "\\u00e9",
        "\\d",
        "[a\\.c]",
        "[\\^a]",
        "[a\\^]",
        "[\\(\\)]",
        "[a\\|$]",
        "[\\*\\+\\?]",
        "[\\{\\}]",
        "[a\\-c]",
        "[ -~]",
        "[!-$]",
        "[\\u0000-\\u0041]",
        "[#-\\]]",
        "(a|\\.)",
        "(?:a\\.)",
    ]
)
_REPEATS = st.sampled_from(["", "", "?", "*", "+", "{2}", "{1,2}", "{0,}"])
_ESCAPED_BODIES = st.lists(st.tuples(_ATOMS, _REPEATS), min_size=1, max_size=4).map(
    lambda pieces: "".join(atom + repeat for atom, repeat in pieces)
)
_TEXTS = st.text(alphabet='a-é.^$/}A0c()|*+?{ !#"\\\x01]x', max_size=6)


@settings(max_examples=400, deadline=None)
@given(bodies=st.lists(_ESCAPED_BODIES, min_size=1, max_size=2), texts=st.lists(_TEXTS))
def test_the_converter_reads_a_sent_pattern_as_it_was_meant(
    bodies: list[str], texts: list[str]
) -> None:
    pattern = "|".join(f"^{body}$" for body in bodies)
    spelled, why = llama_cpp_pattern(pattern)
    assert spelled is not None, why
    read = _as_converter_reads(spelled)
    assert read is not None, spelled
    for text in [*texts, "a", "é", ".", "-", "a.", "A", '"', "\\", "]", "\x01"]:
        meant = bool(re.search(pattern, text, re.ASCII))
        got = bool(re.fullmatch(read, text))
        # Never a raw quote, backslash or control character; otherwise what it meant.
        assert got == (meant and not _unwritable(text)), (spelled, text)
        if meant and _unwritable(text):
            assert why == "the quotes, backslashes and control characters a class range covers"


@pytest.mark.parametrize(
    ("pattern", "spelled"),
    [
        # The converter knows no escape inside a class but `\-`, `\[`, `\]` and `\uXXXX`.
        (r"^[a\.c]$", "^[a.c]$"),
        (r"^[a\^]$", "^[a^]$"),
        (r"^[\^a]$", "^[\\u005Ea]$"),  # a `^` first would negate the class
        (r"^[\(a\|\*\+\?\{\$]$", "^[(a|*+?{$]$"),
        (r"^[a\-c\]\[]$", r"^[a\-c\]\[]$"),
        (r"^[\u0041-\u005a]$", r"^[\u0041-\u005a]$"),
        # A quantified escaped or non-ASCII character is a class of its own.
        (r"^ab\.?$", "^ab[.]?$"),
        (r"^x\-?y$", r"^x[\-]?y$"),
        (r"^a\.{2}$", "^a[.]{2}$"),
        (r"^0{2} \u0041*$", "^0{2} [A]*$"),
        (r"^\^+$", "^[\\u005E]+$"),
        ("^é+$", "^[é]+$"),
        # Punctuation that means itself, written as the character.
        (r"^https?:\/\/[a-z]+$", "^https?://[a-z]+$"),
        (r"^a\-b$", "^a-b$"),
        ("^a}$", r"^a\}$"),
        ("^a{x}$", r"^a\{x\}$"),
    ],
)
def test_a_pattern_is_sent_as_the_converter_reads_it(pattern: str, spelled: str) -> None:
    assert llama_cpp_pattern(pattern) == (spelled, "")
    rewrite = llama_cpp({"type": "string", "pattern": pattern})
    assert rewrite.schema == {"type": "string", "pattern": spelled}
    assert rewrite.notes == ()


@pytest.mark.parametrize(
    ("pattern", "spelled"),
    [
        ("^[ -~]{2}$", r"^[ -!#-\[\]-~]{2}$"),
        (r"^[\u0000-\u007f]+$", r"^[ -!#-\[\]-\u007F]+$"),
        (r"^[a-z#-\]]$", r"^[a-z#-\[\]]$"),
    ],
)
def test_a_class_range_leaves_out_what_the_grammar_cannot_write(pattern: str, spelled: str) -> None:
    # A raw quote or backslash would end or break the JSON string the grammar writes.
    why = "the quotes, backslashes and control characters a class range covers"
    assert llama_cpp_pattern(pattern) == (spelled, why)
    rewrite = llama_cpp({"type": "string", "pattern": pattern})
    assert rewrite.schema == {"type": "string", "pattern": spelled}
    assert [n.message for n in rewrite.notes] == [
        f"`pattern` was narrowed at `/`: llama.cpp's grammar would write {why} raw into the "
        "JSON string, so they were left out"
    ]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        # Read as written, a reversed repetition makes the grammar parser allocate without
        # limit; over 2000 repetitions, it refuses the grammar (HTTP 400).
        ("^[a-z]{3,1}$", "the repetition `{3,1}`, whose bounds are reversed"),
        ("^a$|^b{5,2}$", "the repetition `{5,2}`, whose bounds are reversed"),
        ("^[0-9]{2500}$", "a repetition count above 2000"),
        ("^(ab){1,2001}$", "a repetition count above 2000"),
        ("^a{2001,}$", "a repetition count above 2000"),
        # `[]` matches nothing (ECMA-262); the converter reads something else.
        ("^[]a]$", "an empty class `[]`, which matches nothing"),
        ("^a[]$|^b$", "an empty class `[]`, which matches nothing"),
        (r"^[\u0000-\u001f]$", "a class of quotes, backslashes or control characters only"),
        ("^*a$", "a quantifier with nothing to repeat"),
        ("^a**$", "a quantifier after a quantifier"),
        ("^[z-a]$", "a class range out of order"),
        (r"^[\d-z]$", "a class escape at one end of a range"),
        ("^[ab$", "an unterminated character class"),
    ],
)
def test_a_pattern_the_server_refuses_or_chokes_on_is_removed(pattern: str, why: str) -> None:
    assert llama_cpp_pattern(pattern) == (None, why)
    rewrite = llama_cpp({"type": "string", "pattern": pattern})
    assert rewrite.schema == {"type": "string"}
    assert [n.message for n in rewrite.notes] == [_removed(pattern, why)]


# Empty length and item-count ranges (the grammar parser allocates without limit on them)

_NOTHING = "the subschema at `/` accepts nothing; llama.cpp cannot say so, so it accepts anything"


@pytest.mark.parametrize(
    ("schema", "sent", "messages"),
    [
        (
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "code": {
                        "anyOf": [
                            {"type": "string", "minLength": 3, "maxLength": 1},
                            {"type": "null"},
                        ]
                    },
                },
                "required": ["name"],
            },
            {
                "type": "object",
                "properties": {"name": {"type": "string"}, "code": {"anyOf": [{"type": "null"}]}},
                "required": ["name"],
            },
            [],
        ),
        (
            {"type": ["string", "null"], "minLength": 3, "maxLength": 1, "pattern": "^a+$"},
            {"type": "null"},
            [],
        ),
        (
            {"type": ["array", "null"], "items": {"type": "integer"}, "minItems": 3, "maxItems": 2},
            {"type": "null"},
            [_narrowed("/items")],  # (said of the items before the arrays were left out)
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "minLength": 30.0, "maxLength": 5}},
            },
            {"type": "object", "properties": {}},
            [],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"allOf": [{"type": "string", "minLength": 3}, {"maxLength": 1}]}
                },
                "required": ["a"],
            },
            {},
            [_NOTHING],
        ),
        (
            {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 1},
            {},
            [_NOTHING, _narrowed("/items")],
        ),
        (
            {"items": {"type": "integer"}, "minItems": 3, "maxItems": 2},
            {"items": _INT},
            [
                "`minItems` and `maxItems` were removed at `/`: no array meets both, which "
                "llama.cpp cannot say, so any array passes",
                _narrowed("/items"),
            ],
        ),
    ],
)
def test_an_empty_length_or_count_range_allows_no_value_of_its_type(
    schema: dict[str, Any], sent: dict[str, Any], messages: list[str]
) -> None:
    assert _rewritten(schema) == (sent, messages)


def _nodes(schema: Any) -> Iterator[dict[str, Any]]:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


_COUNT = st.none() | st.integers(0, 5) | st.integers(0, 5).map(float)


@settings(max_examples=300, deadline=None)
@given(
    kinds=st.sampled_from([["string"], ["string", "null"], ["array"], ["array", "null"], None]),
    low=_COUNT,
    high=_COUNT,
    items=st.booleans(),
)
def test_no_empty_range_is_sent_and_no_value_it_allows_is_lost(
    kinds: list[str] | None, low: float | None, high: float | None, items: bool
) -> None:
    kind = kinds[0] if kinds else ("array" if items else "string")
    keys = ("minItems", "maxItems") if kind == "array" else ("minLength", "maxLength")
    node: dict[str, Any] = {k: v for k, v in zip(keys, (low, high), strict=True) if v is not None}
    if kinds is not None:
        node["type"] = kinds[0] if len(kinds) == 1 else kinds
    if kind == "array":
        node["items"] = _INT
    rewrite = llama_cpp({"type": "object", "properties": {"v": node}, "required": ["v"]})
    sent = [n for n in _nodes(rewrite.schema) if any(k in n for k in keys)]
    for n in sent:
        assert n.get(keys[0], 0) <= n.get(keys[1], math.inf)
        assert all(type(n[k]) is int for k in keys if k in n)  # `2.0` is refused
    empty = low is not None and high is not None and low > high
    value = rewrite.schema.get("properties", {}).get("v")
    if not empty:
        assert value == {k: int(v) if isinstance(v, float) else v for k, v in node.items()}
    elif kinds == [kind, "null"]:
        assert value == {"type": "null"}
    elif kinds == [kind]:
        assert rewrite.schema == {}  # nothing passes: noted
        assert len(rewrite.notes) == 1


# Required keys that `properties` does not declare (the converter drops them)


@pytest.mark.parametrize(
    ("schema", "sent", "messages"),
    [
        (
            {
                "type": "object",
                "properties": {"b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": {"type": "integer", "minimum": 1},
            },
            {
                "type": "object",
                "properties": {
                    "b": _INT,
                    "a": {"type": "integer", "minimum": 1, "maximum": _LIMIT},
                },
                "required": ["a", "b"],
                "additionalProperties": {"type": "integer", "minimum": 1, "maximum": _LIMIT},
            },
            [_narrowed("/additionalProperties"), _narrowed("/properties/b")],
        ),
        (
            {"type": "object", "required": ["a"]},
            {
                "type": "object",
                "required": ["a"],
                "properties": {"a": {}},
                "additionalProperties": True,
            },
            [],
        ),
        (
            {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["a"]},
            {},
            [_NOTHING, _narrowed("/properties/b")],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "x": {"type": ["object", "null"], "properties": {}, "required": ["a"]},
                    "y": {"type": "object", "properties": {}, "required": ["a"]},
                },
                "required": ["x"],
            },
            {"type": "object", "properties": {"x": {"type": "null"}}, "required": ["x"]},
            [],
        ),
        (
            {"properties": {"b": {"type": "integer"}}, "required": ["a", "b", "c"]},
            {"properties": {"b": _INT}, "required": ["a", "b", "c"]},
            [
                "`required` `a`, `c` is not enforced by the grammar at `/`: llama.cpp requires "
                "only keys declared in `properties`",
                _narrowed("/properties/b"),
            ],
        ),
    ],
)
def test_a_required_key_missing_from_properties_is_declared_or_accepts_nothing(
    schema: dict[str, Any], sent: dict[str, Any], messages: list[str]
) -> None:
    assert _rewritten(schema) == (sent, messages)


# An enum of several types with keywords beside it


@pytest.mark.parametrize(
    ("schema", "sent", "messages"),
    [
        ({"enum": ["abc", 1], "maxLength": 1}, {"anyOf": [{"type": "integer", "enum": [1]}]}, []),
        (
            {"type": ["string", "null"], "enum": ["abc", None, "d"], "maxLength": 1},
            {"anyOf": [{"type": "string", "enum": ["d"]}, {"type": "null"}]},
            [],
        ),
        ({"enum": ["", None], "minLength": 1}, {"anyOf": [{"type": "null"}]}, []),
        (
            {"enum": [1, 5, "x"], "minimum": 3},
            {"anyOf": [{"type": "integer", "enum": [5]}, {"type": "string", "enum": ["x"]}]},
            ["`minimum` is not enforced by the grammar at `/` (only integers)"],
        ),
        (
            {"enum": ["a", 1], "pattern": "^b$"},
            {"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "integer", "enum": [1]}]},
            [
                "`pattern` is not enforced by the grammar at `/`: llama.cpp compiles only the "
                "`enum` values beside it"
            ],
        ),
    ],
)
def test_the_branches_of_an_enum_of_several_types_keep_the_values_beside_it_allows(
    schema: dict[str, Any], sent: dict[str, Any], messages: list[str]
) -> None:
    assert _rewritten(schema) == (sent, messages)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.none() | st.booleans() | st.integers(-3, 3) | st.text("ab", max_size=3),
        min_size=1,
        max_size=5,
        unique_by=lambda v: (type(v), v),
    ),
    keyword=st.sampled_from(["minLength", "maxLength", "minimum", "maximum", "exclusiveMaximum"]),
    bound=st.integers(0, 3),
)
def test_an_enum_of_several_types_sends_exactly_the_values_beside_it_allows(
    values: list[Any], keyword: str, bound: int
) -> None:
    import jsonschema

    schema = {"enum": values, keyword: bound}
    rewrite = llama_cpp(schema)
    sent = rewrite.schema
    listed = [v for branch in sent.get("anyOf", [sent]) for v in branch.get("enum", [])]
    typed = {branch.get("type") for branch in sent.get("anyOf", [sent])}
    allowed = [v for v in values if jsonschema.Draft202012Validator(schema).is_valid(v)]
    if not allowed:
        assert sent == {}
        return
    for value in allowed:
        assert value in listed or (value is None and "null" in typed) or isinstance(value, bool)
    assert all(jsonschema.Draft202012Validator(schema).is_valid(v) for v in listed)


# Integer bounds the converter misreads or the server refuses

_ONLY_INTEGERS = "`{}` is not enforced by the grammar at `/` (only integers)"


@pytest.mark.parametrize(
    ("node", "sent", "messages"),
    [
        # An upper bound below zero alone fails every generation (HTTP 500), whatever the
        # other types: it gets the lower bound the converter reads widest.
        (
            {"type": ["integer", "null"], "maximum": -1},
            {"type": ["integer", "null"], "maximum": -1, "minimum": -_LIMIT},
            [_ONLY_INTEGERS.format("maximum"), _narrowed("/")],
        ),
        (
            {"type": ["null", "integer"], "exclusiveMaximum": 0},
            {"type": ["null", "integer"], "exclusiveMaximum": 0, "minimum": -_LIMIT},
            [_ONLY_INTEGERS.format("exclusiveMaximum"), _narrowed("/")],
        ),
        (
            {"type": ["integer", "null"], "minimum": 5, "exclusiveMaximum": 5},
            {"type": "null"},
            [_ONLY_INTEGERS.format("minimum"), _ONLY_INTEGERS.format("exclusiveMaximum")],
        ),
        # A minimum of 100 or more alone is misread (`minimum: 100` lets 10 through); any
        # bound alone lets at most 16 digits through: the other side gets its widest bound.
        (
            {"type": "integer", "minimum": 100},
            {"type": "integer", "minimum": 100, "maximum": _LIMIT},
            [_narrowed("/")],
        ),
        (
            {"type": "integer", "exclusiveMinimum": 99.5},
            {"type": "integer", "minimum": 100, "maximum": _LIMIT},
            [_narrowed("/")],
        ),
        (
            {"type": "integer", "minimum": 99},
            {"type": "integer", "minimum": 99, "maximum": _LIMIT},
            [_narrowed("/")],
        ),
        # Beyond 64 bits: brought within them, the integers past them lost (noted)...
        (
            {"type": "integer", "minimum": 0, "maximum": 2**64 - 1},
            {"type": "integer", "minimum": 0, "maximum": _LIMIT},
            [_narrowed("/")],
        ),
        ({"type": "integer", "minimum": -(10**21)}, _INT, [_narrowed("/")]),
        (
            {"type": "integer", "minimum": -1e300, "maximum": 7.5},
            {"type": "integer", "minimum": -_LIMIT, "maximum": 7},
            [_narrowed("/")],
        ),
        # ... and removed where no number in range is one it reads.
        (
            {"type": "integer", "minimum": 2**63},
            {"type": "integer"},
            ["`minimum` was removed at `/`: llama.cpp reads integer bounds only within 64 bits"],
        ),
        (
            {"type": "integer", "minimum": 1e300},
            {"type": "integer"},
            ["`minimum` was removed at `/`: llama.cpp reads integer bounds only within 64 bits"],
        ),
        (
            {"type": "integer", "maximum": -(10**21)},
            {"type": "integer"},
            ["`maximum` was removed at `/`: llama.cpp reads integer bounds only within 64 bits"],
        ),
    ],
)
def test_integer_bounds_are_sent_as_the_converter_reads_them_right(
    node: dict[str, Any], sent: dict[str, Any], messages: list[str]
) -> None:
    rewrite = llama_cpp(node)
    assert rewrite.schema == sent
    assert [n.message for n in rewrite.notes] == messages


_WIDE_BOUND = (
    st.none()
    | st.integers(-150, 150)
    | st.sampled_from([2**63 - 1, 2**63, 2**64, -(2**63), -(2**64), 10**17, -(10**17)])
    | st.floats(-1e20, 1e20, allow_nan=False).map(lambda f: round(f, 1))
)


@settings(max_examples=500, deadline=None)
@given(
    minimum=_WIDE_BOUND,
    exclusive_min=_WIDE_BOUND,
    maximum=_WIDE_BOUND,
    exclusive_max=_WIDE_BOUND,
    nullable=st.booleans(),
)
def test_no_integer_bound_is_sent_that_the_converter_misreads(
    minimum: float | None,
    exclusive_min: float | None,
    maximum: float | None,
    exclusive_max: float | None,
    nullable: bool,
) -> None:
    bounds = {
        "minimum": minimum,
        "exclusiveMinimum": exclusive_min,
        "maximum": maximum,
        "exclusiveMaximum": exclusive_max,
    }
    node = {
        "type": ["integer", "null"] if nullable else "integer",
        **{k: v for k, v in bounds.items() if v is not None},
    }
    rewrite = llama_cpp(node)
    sent = rewrite.schema
    if "integer" not in _kinds_of(sent):
        assert not any(_schema_accepts(node, v) for v in _probes(node))
        return
    for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        if key in sent:
            assert -_LIMIT - 1 <= sent[key] <= _LIMIT + 1, (key, sent)
    lower = any(k in sent for k in ("minimum", "exclusiveMinimum"))
    upper = any(k in sent for k in ("maximum", "exclusiveMaximum"))
    if lower and not upper:
        assert sent.get("minimum", sent.get("exclusiveMinimum", 0) + 1) < 100
    if upper and not lower:
        assert sent.get("maximum", sent.get("exclusiveMaximum", 0) - 1) >= 0
    exact = not [n for n in rewrite.notes if "only integers" not in n.message]
    for value in _probes(node):
        meant = _schema_accepts(node, value)
        read = _converter_accepts({**sent, "type": "integer"}, value)
        assert read or not meant, value  # never narrower
        if exact:
            assert read == meant, value


def _kinds_of(node: dict[str, Any]) -> list[str]:
    kinds = node.get("type", [])
    return kinds if isinstance(kinds, list) else [kinds]


def _probes(node: dict[str, Any]) -> list[int]:
    """Integers the grammar may write (within 64 bits) around the node's bounds."""
    near = [0, 1, -1, 9, 10, 99, 100, 101, _LIMIT, -_LIMIT]
    for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        if key in node:
            whole = math.floor(node[key])
            near += [whole - 1, whole, whole + 1, whole + 2]
    return [v for v in near if -_LIMIT <= v <= _LIMIT]


# The schemas the server refuses


def test_a_root_refered_to_moves_into_defs() -> None:
    # `$ref: "#"` is refused ("only references into the same document are supported").
    schema = {
        "title": "Node",
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3.0}},
    }
    rewrite = llama_cpp(schema)
    assert rewrite.schema == {
        "$ref": "#/$defs/root",
        "$defs": {
            "root": {
                "title": "Node",
                "type": "object",
                "properties": {
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/root"}, "maxItems": 3}
                },
            }
        },
    }
    assert rewrite.notes == ()


def test_the_root_moved_into_defs_keeps_its_notes_and_its_name_free() -> None:
    schema = {
        "$defs": {"root": {"type": "string", "format": "date"}},
        "type": "object",
        "properties": {
            "day": {"$ref": "#/$defs/root"},
            "next": {"$ref": "#"},
            "n": {"type": "integer", "minimum": 2**63},
        },
    }
    rewrite = llama_cpp(schema)
    assert rewrite.schema == {
        "$ref": "#/$defs/root_2",
        "$defs": {
            "root": {"type": "string", "format": "date"},
            "root_2": {
                "type": "object",
                "properties": {
                    "day": {"$ref": "#/$defs/root"},
                    "next": {"$ref": "#/$defs/root_2"},
                    "n": {"type": "integer"},
                },
            },
        },
    }
    assert [(n.pointer, n.message) for n in rewrite.notes] == [
        (
            "/$defs/root",
            "`format` `date` is enforced in shape only by the grammar at `/$defs/root`",
        ),
        (
            "/properties/n",
            "`minimum` was removed at `/properties/n`: llama.cpp reads integer bounds only "
            "within 64 bits",
        ),
    ]


@pytest.mark.parametrize(
    "schema",
    [
        {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
        {
            "$defs": {"a": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}},
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
    ],
)
def test_a_schema_that_refers_back_to_itself_in_place_is_refused(schema: dict[str, Any]) -> None:
    # The grammar would be left-recursive: the server refuses it (HTTP 400).
    with pytest.raises(SchemaError, match="refers back to itself without going into a property"):
        llama_cpp(schema)


def test_whole_float_counts_are_sent_as_integers_and_capped() -> None:
    # The server refuses `minLength: 2.0` ("must be a non-negative integer").
    rewrite = llama_cpp(
        {
            "type": "object",
            "properties": {
                "s": {"type": "string", "minLength": 2.0, "maxLength": 3000.0},
                "a": {"type": "array", "items": _INT, "maxItems": 4.0},
                "o": {"type": "object", "minProperties": 1.0},
            },
        }
    )
    assert rewrite.schema["properties"] == {
        "s": {"type": "string", "minLength": 2},
        "a": {"type": "array", "items": _INT, "maxItems": 4},
        "o": {"type": "object", "minProperties": 1},
    }
    assert [type(v) for v in rewrite.schema["properties"]["a"].values()] == [str, dict, int]
    assert [n.message for n in rewrite.notes] == [
        "`minProperties` is not enforced by the grammar at `/properties/o`",
        "`minLength` is not fully enforced by the grammar at `/properties/s`: llama.cpp counts "
        "a character past U+FFFF written escaped (`\\ud83d\\ude00`) as two characters, the "
        "type as one",
        "`maxLength` was removed at `/properties/s`: llama.cpp's grammar allows at most 2000 "
        "repetitions",
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


def _ask(local: Any, schema: dict[str, Any], bias: str | list[Any]) -> tuple[Any, list[str]]:
    request = (
        ChatRequest("tiny")
        .user("Make a record.")
        .with_max_output_tokens(120)
        .with_temperature(0)
        .with_response_format(
            ResponseFormat(type="json_schema", json_schema=schema, name="probe", strict=True)
        )
    )
    if bias != "shortest":
        logit_bias = _LONG if bias == "longest" else bias
        request = request.with_option_json("openai_compat", {"logit_bias": logit_bias})
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
    "alternatives anchored apart": {"type": "string", "pattern": r"^[0-9]{2}$|^[b-d]{3}-[0-9]$"},
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
    "escaped punctuation in a class": {"type": "string", "pattern": r"^[a\.\(]{2}$"},
    "a quantified escaped character": {"type": "string", "pattern": r"^ab\.?$"},
    "a quantified non-ASCII character": {"type": "string", "pattern": "^aé{1,3}$"},
    "a whole float count": {"type": "string", "minLength": 1.0, "maxLength": 4.0},
    "an empty length range": {
        "type": "object",
        "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 1}, "b": {"const": 1}},
        "required": ["b"],
    },
    "an empty item-count range": {
        "type": "object",
        "properties": {
            "a": {
                "type": ["array", "null"],
                "items": {"type": "integer"},
                "minItems": 3,
                "maxItems": 2,
            }
        },
        "required": ["a"],
    },
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
    assert [w for w in warnings if "narrowed" not in w] == []  # (integers kept to 64 bits)
    jsonschema.validate(value, schema)


UNBOUNDED: dict[str, dict[str, Any]] = {
    "a required key declared by additionalProperties": {
        "type": "object",
        "properties": {"b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": {"type": "integer"},
    },
    "a required key of an object without properties": {"type": "object", "required": ["a"]},
    "a root refered to": {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["kids"],
    },
}
"""Cases whose longest answer never ends: asked for the shortest only."""


@pytest.mark.local
@pytest.mark.parametrize("case", list(UNBOUNDED))
def test_what_the_dialect_claims_enforced_holds_for_the_shortest_answer(
    local: Any, case: str
) -> None:
    import jsonschema

    schema = UNBOUNDED[case]
    value, warnings = _ask(local, schema, "shortest")
    assert [w for w in warnings if "narrowed" not in w] == []  # (integers kept to 64 bits)
    jsonschema.validate(value, schema)


BIASED: dict[str, tuple[dict[str, Any], list[Any]]] = {
    # `minimum: 100` alone was read as "1" and one digit or more: 10 passed.
    "a minimum alone": (
        {"type": "integer", "minimum": 100},
        [["<|im_end|>", 9], ["1", 3], ["0", 4]],
    ),
    "an enum of several types beside maxLength": (
        {"type": ["string", "null"], "enum": ["abc", None], "maxLength": 1},
        [['"', 9], ["a", 8], ["n", -60]],
    ),
    "a closed quote-free class": (
        {"type": "string", "pattern": "^[#-~]{2}$"},
        [["<|im_end|>", -60], ["\\", 60], ['"', 50]],
    ),
}


@pytest.mark.local
@pytest.mark.parametrize("case", list(BIASED))
def test_what_the_dialect_claims_enforced_holds_when_pushed_off_it(local: Any, case: str) -> None:
    import jsonschema

    schema, bias = BIASED[case]
    value, warnings = _ask(local, schema, bias)
    assert [w for w in warnings if "narrowed" not in w] == []
    jsonschema.validate(value, schema)


@pytest.mark.local
@pytest.mark.parametrize("bias", ["shortest", [["n", -60], ["-", 5], ["1", 4]]])
def test_an_integer_or_null_under_a_negative_maximum_is_generated(local: Any, bias: Any) -> None:
    # Sent as written, the server failed every generation (HTTP 500); with the lower bound
    # the converter reads widest beside it, it answers within it.
    schema = {
        "type": "object",
        "properties": {"n": {"type": ["integer", "null"], "maximum": -1}},
        "required": ["n"],
    }
    value, warnings = _ask(local, schema, bias)
    assert set(value) == {"n"}
    assert value["n"] is None or (isinstance(value["n"], int) and value["n"] <= -1)
    assert (
        f"the response format `probe` was approximated: {_narrowed('/properties/n')}"
    ) in warnings


@pytest.mark.local
@pytest.mark.parametrize("bias", ["shortest", [["\\", 60], ['"', 50]], [["\\", 60], ['"', -60]]])
def test_a_narrowed_class_never_writes_a_quote_or_backslash(local: Any, bias: Any) -> None:
    import jsonschema

    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[ -~]{2}$"}},
        "required": ["code"],
    }
    value, warnings = _ask(local, schema, bias)
    jsonschema.validate(value, schema)
    assert warnings == [
        "the response format `probe` was approximated: `pattern` was narrowed at "
        "`/properties/code`: llama.cpp's grammar would write the quotes, backslashes and "
        "control characters a class range covers raw into the JSON string, so they were left out"
    ]


@pytest.mark.local
def test_a_reversed_repetition_is_removed_before_the_server_sees_it(local: Any) -> None:
    # Sent as written, the grammar parser allocated until the process ran out of memory.
    schema = {"type": "string", "pattern": "^[a-z]{3,1}$"}
    value, warnings = _ask(local, schema, "shortest")
    assert isinstance(value, str)
    assert warnings == [
        "the response format `probe` was approximated: `pattern` was removed at `/`: "
        "llama.cpp's grammar cannot compile the repetition `{3,1}`, whose bounds are reversed"
    ]


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
    "a minimum beyond 64 bits": (
        {"type": "integer", "minimum": 2**63},
        "`minimum` was removed at `/`: llama.cpp reads integer bounds only within 64 bits",
    ),
    "a repetition above 2000": (
        {"type": "string", "pattern": "^[0-9]{2500}$"},
        "`pattern` was removed at `/`: llama.cpp's grammar cannot compile a repetition count "
        "above 2000",
    ),
    "a closed object requiring an undeclared key": (
        {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["a"]},
        "the subschema at `/` accepts nothing; llama.cpp cannot say so, so it accepts anything",
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
