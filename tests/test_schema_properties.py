"""Property tests of every dialect rewrite: never narrower, and exact when it says so.

Schemas come from a generator of the keywords real schemas use; instances from the
generator in `_schema_support` (hypothesis-jsonschema does not run with this hypothesis
version). For each dialect:

- every instance of the original (closed-object convention applied, stand-in `null`s added
  for OpenAI strict mode) is valid under the rewrite;
- when the rewrite has no notes, every instance of the rewrite (stand-in `null`s removed) is
  valid under the original.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from _schema_support import (
    DIALECTS,
    STRICT_NULLS,
    fill_nulls,
    instances,
    original_reading,
    rewritten_reading,
    shapes,
    strip_nulls,
    whole_floats_as_ints,
)
from allama.schema import normalize_strict_nulls
from allama.schema._dialects import openai_strict
from allama.schema._rewrite import Rewrite

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)

NAMES = st.sampled_from(["a", "b", "id", "name", "x_y"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([0.5, -1.5]),
    st.sampled_from(["", "a", "b", "zz"]),
)


def _optional(draw: st.DrawFn, keyword: str, values: st.SearchStrategy[Any]) -> dict[str, Any]:
    return {keyword: draw(values)} if draw(st.booleans()) else {}


@st.composite
def _string(draw: st.DrawFn) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    node |= _optional(draw, "minLength", st.integers(0, 2))
    node |= _optional(draw, "maxLength", st.integers(3, 6))
    node |= _optional(draw, "pattern", st.sampled_from(["^[a-c]*$", "b", "^x"]))
    node |= _optional(draw, "format", st.sampled_from(["date", "email", "uuid", "ipv4"]))
    return node


@st.composite
def _number(draw: st.DrawFn) -> dict[str, Any]:
    node: dict[str, Any] = {"type": draw(st.sampled_from(["integer", "number"]))}
    node |= _optional(draw, "minimum", st.integers(-3, 0))
    node |= _optional(draw, "maximum", st.integers(1, 9))
    node |= _optional(draw, "exclusiveMinimum", st.sampled_from([-4, -0.5]))
    node |= _optional(draw, "exclusiveMaximum", st.sampled_from([10, 9.5]))
    node |= _optional(draw, "multipleOf", st.sampled_from([1, 2]))
    return node


LEAVES = st.one_of(
    _string(),
    _number(),
    st.sampled_from(
        [
            {"type": "boolean"},
            {"type": "null"},
            {"type": ["string", "null"]},
            {"type": ["integer", "string"]},
            {},
            {"description": "anything"},
        ]
    ),
    st.lists(SCALARS, min_size=1, max_size=4, unique_by=repr).map(lambda v: {"enum": v}),
    SCALARS.map(lambda v: {"const": v}),
    st.sampled_from([{"type": "string", "enum": ["x", "y"]}, {"type": "integer", "const": 3}]),
)


@st.composite
def _object(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    props = draw(st.dictionaries(NAMES, children, max_size=3))
    node: dict[str, Any] = {"type": "object", "properties": props}
    node["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    extra = draw(st.sampled_from(["absent", "false", "true", "schema"]))
    if extra == "false":
        node["additionalProperties"] = False
    elif extra == "true":
        node["additionalProperties"] = True
    elif extra == "schema":
        node["additionalProperties"] = draw(children)
    if draw(st.booleans()):
        node["title"] = "T"
    return node


@st.composite
def _array(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "array", "items": draw(children)}
    node |= _optional(draw, "minItems", st.integers(0, 2))
    node |= _optional(draw, "maxItems", st.integers(2, 4))
    node |= _optional(draw, "uniqueItems", st.just(True))
    return node


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    unions = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        _object(children),
        _array(children),
        st.lists(children, min_size=1, max_size=2).map(
            lambda p: {"type": "array", "prefixItems": p}
        ),
        unions.map(lambda b: {"anyOf": b}),
        unions.map(lambda b: {"oneOf": b}),
        st.tuples(_object(children), _object(children)).map(lambda p: {"allOf": list(p)}),
        children.map(lambda c: {"not": c}),
    )


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A schema, sometimes with a `$defs` entry that other places `$ref`."""
    body = draw(st.recursive(LEAVES, _extend, max_leaves=6))
    if not draw(st.booleans()):
        return body if isinstance(body, dict) and body else {"type": "object", "properties": {}}
    shared = draw(st.recursive(LEAVES, _extend, max_leaves=3))
    described = draw(st.booleans())
    ref: dict[str, Any] = {"$ref": "#/$defs/Shared"}
    if described:
        ref["description"] = "a shared part"
    return {
        "type": "object",
        "properties": {
            "first": ref,
            "second": {"type": "array", "items": {"$ref": "#/$defs/Shared"}},
            "own": body,
        },
        "required": draw(st.lists(st.sampled_from(["first", "second", "own"]), unique=True)),
        "$defs": {"Shared": shared},
    }


def _draw(data: st.DataObject, strategy: st.SearchStrategy[Any]) -> Any:
    try:
        return data.draw(strategy)
    except InvalidArgument:  # a schema nothing satisfies, e.g. two unique nulls
        reject()


def check_never_narrower(
    name: str, schema: Mapping[str, Any], rewrite: Rewrite, instance: Any
) -> None:
    """`instance`, valid under `schema` (closed-object convention), is valid under the rewrite."""
    reading = rewritten_reading(name, schema, rewrite.schema)
    candidates = fill_nulls(schema, instance) if name in STRICT_NULLS else [instance]
    assert any(reading.is_valid(sent) for sent in candidates), (name, rewrite.schema, candidates)


def check_exact(
    name: str, schema: Mapping[str, Any], rewrite: Rewrite, data: st.DataObject
) -> None:
    """An instance of an exact rewrite (stand-in `null`s removed) is valid under `schema`."""
    reading = rewritten_reading(name, schema, rewrite.schema)
    instance = _draw(data, instances(reading.schema, reading))
    received = strip_nulls(schema, instance) if name in STRICT_NULLS else instance
    if "draft-04" in str(schema.get("$schema", "")):
        received = whole_floats_as_ints(received)
    errors = original_reading(schema).errors(received)
    assert not errors, (name, rewrite.schema, received, errors)
    if name in STRICT_NULLS:  # the library's own normalisation finds the same stand-ins
        ours = normalize_strict_nulls(instance, dict(schema))
        if "draft-04" in str(schema.get("$schema", "")):
            ours = whole_floats_as_ints(ours)
        errors = original_reading(schema).errors(ours)
        assert not errors, (name, rewrite.schema, instance, ours, errors)


@SETTINGS
@given(schema=schemas(), data=st.data())
def test_every_rewrite_is_never_narrower(schema: dict[str, Any], data: st.DataObject) -> None:
    instance = _draw(data, instances(schema))
    for name, dialect in DIALECTS.items():
        check_never_narrower(name, schema, dialect(schema), instance)


@SETTINGS
@given(schema=schemas(), data=st.data())
def test_an_exact_rewrite_accepts_nothing_more(schema: dict[str, Any], data: st.DataObject) -> None:
    for name, dialect in DIALECTS.items():
        rewrite = dialect(schema)
        if rewrite.exact:
            check_exact(name, schema, rewrite, data)


@SETTINGS
@given(schema=shapes(), data=st.data())
def test_every_rewrite_of_a_hard_shape_is_never_narrower(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    """Unions beside properties, allOf-built variants, untyped and nullable enums, empty
    objects and arrays, `$ref` beside keywords (`_schema_support.shapes`)."""
    instance = _draw(data, instances(schema))
    for name, dialect in DIALECTS.items():
        check_never_narrower(name, schema, dialect(schema), instance)


@SETTINGS
@given(schema=shapes(), data=st.data())
def test_an_exact_rewrite_of_a_hard_shape_accepts_nothing_more(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    for name, dialect in DIALECTS.items():
        rewrite = dialect(schema)
        if rewrite.exact:
            check_exact(name, schema, rewrite, data)


@SETTINGS
@given(schema=schemas())
def test_a_rewrite_never_mutates_its_input(schema: dict[str, Any]) -> None:
    before = repr(schema)
    for dialect in DIALECTS.values():
        dialect(schema)
    assert repr(schema) == before


@SETTINGS
@given(schema=schemas())
def test_every_optional_property_is_required_and_nullable_under_openai(
    schema: dict[str, Any],
) -> None:
    out = openai_strict(schema).schema
    stack: list[Any] = [out]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict):
                assert set(node["required"]) >= set(node["properties"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


CATALOG: list[dict[str, Any]] = [
    {"type": "string", "minLength": 2},
    {"type": "string", "maxLength": 3},
    {"type": "string", "pattern": "^[ab]+$"},
    {"type": "string", "pattern": "b"},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "email"},
    {"type": "integer", "minimum": 0},
    {"type": "integer", "maximum": 5},
    {"type": "integer", "exclusiveMinimum": 2},
    {"type": "number", "exclusiveMaximum": 2.5},
    {"type": "integer", "multipleOf": 3},
    {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "integer",
        "minimum": 1,
        "exclusiveMinimum": True,
    },
    {"type": "array", "items": {"type": "integer"}, "minItems": 2},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
    {
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 3},
        "uniqueItems": True,
    },
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}],
        "additionalItems": False,
    },
    {"type": "array", "items": {"enum": ["a", "b"]}, "contains": {"const": "a"}},
    {"enum": ["a", 1, None, True]},
    {"enum": [{"a": 1}, [1]]},
    {"const": "fixed"},
    {"type": "string", "const": "x", "enum": ["x", "y"]},
    {"type": ["string", "null"]},
    {"type": ["integer", "string", "null"], "minimum": 3},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"not": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer", "default": 1}},
    },
    {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
    {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}},
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
    {
        "type": "object",
        "patternProperties": {"^x": {"type": "integer"}},
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1},
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "dependentRequired": {"a": ["b"]},
    },
    {"type": "object"},
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "allOf": [{"required": ["b"]}, {"minProperties": 1}],
    },
    {"allOf": [{"type": "integer"}, {"minimum": 2}]},
    {
        "type": "object",
        "properties": {"k": {"$ref": "#/$defs/K", "description": "a k"}},
        "$defs": {"K": {"type": "string", "maxLength": 2}},
    },
    {
        "type": "object",
        "properties": {"k": {"$ref": "#/definitions/K"}},
        "definitions": {"K": {"type": "object", "properties": {"z": {"type": "boolean"}}}},
    },
    {
        "$ref": "#/$defs/Root",
        "$defs": {
            "Root": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        },
    },
    {
        "oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "a"}, "x": {"type": "string"}},
                "required": ["kind"],
            },
            {
                "type": "object",
                "properties": {"kind": {"const": "b"}, "y": {"type": "integer"}},
                "required": ["kind"],
            },
        ]
    },
]


@pytest.mark.parametrize("schema", CATALOG, ids=lambda s: json.dumps(s)[:60])
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_each_keyword_is_kept_exactly_or_noted(schema: dict[str, Any], data: st.DataObject) -> None:
    instance = _draw(data, instances(schema))
    for name, dialect in DIALECTS.items():
        rewrite = dialect(schema)
        check_never_narrower(name, schema, rewrite, instance)
        if rewrite.exact:
            check_exact(name, schema, rewrite, data)
