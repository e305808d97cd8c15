"""Strict-null normalisation: stand-in nulls go, meant nulls stay, the input is never changed."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from allama.schema import normalize_strict_nulls, type_schema
from allama.schema._nulls import may_hold_stand_in_nulls
from allama.schema._types import derived


class Line(BaseModel):
    name: str
    tags: list[str] = []
    note: str | None = None


class Order(BaseModel):
    lines: list[Line]
    ref: str | None = None


SCHEMA = type_schema(Order).schema


def test_stand_in_nulls_are_removed_and_meant_nulls_kept() -> None:
    value = {"lines": [{"name": "a", "tags": None, "note": None}], "ref": None}
    assert normalize_strict_nulls(value, SCHEMA) == {
        "lines": [{"name": "a", "note": None}],
        "ref": None,
    }
    assert value == {"lines": [{"name": "a", "tags": None, "note": None}], "ref": None}


def test_a_required_null_is_kept_for_validation_to_report() -> None:
    value = {"lines": [{"name": None}]}
    assert normalize_strict_nulls(value, SCHEMA) == {"lines": [{"name": None}]}


def test_nothing_to_remove_returns_the_value_itself() -> None:
    value = {"lines": [{"name": "a", "tags": ["x"], "note": None}], "ref": None}
    assert normalize_strict_nulls(value, SCHEMA) is value


# ----- map values


class Inner(BaseModel):
    n: int = 5


class Named(BaseModel):
    byname: dict[str, Inner]
    maybe: dict[str, Inner | None] = {}


def test_a_stand_in_null_inside_a_map_value_is_removed() -> None:
    schema = type_schema(Named).schema
    value = {"byname": {"k": {"n": None}, "j": {"n": 2}}}
    normalized = normalize_strict_nulls(value, schema)
    assert normalized == {"byname": {"k": {}, "j": {"n": 2}}}
    assert Named.model_validate(normalized) == Named(byname={"k": Inner(), "j": Inner(n=2)})


def test_a_null_for_a_map_entry_itself_stays() -> None:
    schema = type_schema(Named).schema
    value = {"byname": {"k": None}, "maybe": {"k": None}}
    assert normalize_strict_nulls(value, schema) is value


def test_an_extraction_of_a_map_gets_the_default_for_a_stand_in_null() -> None:
    import allama
    from allama import ChatRequest, ExtractionMode
    from allama.mock import ChatResponseBuilder, MockProvider

    provider = MockProvider([ChatResponseBuilder().text('{"byname": {"k": {"n": null}}}').build()])
    request = ChatRequest("m").user("x").with_option(ExtractionMode.NATIVE)
    extracted = allama.extract(provider, Named, request)
    assert extracted.value == Named(byname={"k": Inner(n=5)})


# ----- unions: the branch the value is, found by what it carries

BASE: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "kind": {"type": "string"}},
    "required": ["id", "kind"],
}
VARIANTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "item": {
            "oneOf": [
                {
                    "allOf": [
                        {"$ref": "#/$defs/Base"},
                        {"properties": {"kind": {"const": "a"}, "size": {"type": "integer"}}},
                    ]
                },
                {
                    "allOf": [
                        {"$ref": "#/$defs/Base"},
                        {"properties": {"kind": {"const": "b"}, "size": {"type": "string"}}},
                    ]
                },
            ]
        }
    },
    "required": ["item"],
    "$defs": {"Base": BASE},
}


@pytest.mark.parametrize("kind", ["a", "b"])
def test_a_union_of_variants_built_with_allof_finds_the_branch(kind: str) -> None:
    value = {"item": {"id": 1, "kind": kind, "size": None}}
    assert normalize_strict_nulls(value, VARIANTS) == {"item": {"id": 1, "kind": kind}}


def test_the_properties_beside_a_union_count_with_the_branch() -> None:
    schema = {
        "type": "object",
        "properties": {"kind": {"type": "string"}, "note": {"type": "string"}},
        "anyOf": [
            {
                "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                "required": ["kind"],
            },
            {"properties": {"kind": {"const": "b"}}, "required": ["kind"]},
        ],
    }
    assert normalize_strict_nulls({"kind": "b", "note": None}, schema) == {"kind": "b"}
    assert normalize_strict_nulls({"kind": "a", "note": None, "x": None}, schema) == {"kind": "a"}


def test_a_required_null_rules_a_branch_out() -> None:
    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["a"],
            },
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["b"],
            },
        ]
    }
    assert normalize_strict_nulls({"a": None, "b": "x"}, schema) == {"b": "x"}
    assert normalize_strict_nulls({"a": "x", "b": None}, schema) == {"a": "x"}


# ----- whether there is anything to do


class Tagged(BaseModel):
    kind: Literal["t"]
    note: str | None = None


class Plain(BaseModel):
    name: str
    note: str | None = None
    items: list[Tagged]


def test_a_schema_without_optional_non_nullable_properties_has_nothing_to_do() -> None:
    assert not may_hold_stand_in_nulls(type_schema(Plain).schema)
    assert not may_hold_stand_in_nulls(type_schema(dict[str, int]).schema)
    assert may_hold_stand_in_nulls(SCHEMA)  # `tags: list[str] = []`
    assert may_hold_stand_in_nulls(type_schema(Named).schema)  # inside the map's values
    assert may_hold_stand_in_nulls(VARIANTS)


def test_the_answer_is_kept_with_a_types_schema() -> None:
    schema = type_schema(Plain).schema
    assert may_hold_stand_in_nulls(schema) is False
    assert derived(schema, may_hold_stand_in_nulls, lambda: True) is False
