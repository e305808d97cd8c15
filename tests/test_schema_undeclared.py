"""The undeclared-key walk: what it reports, and that remembering per schema set changes nothing."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, create_model

from allama.schema import _types
from allama.schema._nulls import _properties
from allama.schema._types import derived, type_schema
from allama.schema._undeclared import (
    UndeclaredKey,
    UndeclaredKeys,
    _candidates,
    _is_open,
    _item_schemas,
    find_undeclared_key,
    format_path,
    may_ignore_undeclared_keys,
    undeclared_keys,
)


class Line(BaseModel):
    sku: str
    price: float


class Note(BaseModel):
    kind: Literal["note"]
    text: str


class Order(BaseModel):
    id: int
    lines: list[Line]
    extra: dict[str, Line]
    tagged: Line | list[Line] | None = None
    notes: list[Note | str] = []


ORDER = type_schema(Order).schema

HANDWRITTEN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pair": {
            "type": "array",
            "prefixItems": [
                {"type": "object", "properties": {"a": {}}},
                {"type": "object", "properties": {"b": {}}},
            ],
        },
        "either": {
            "oneOf": [
                {"type": "object", "properties": {"a": {}}},
                {"type": "object", "properties": {"b": {}}},
                {"type": "array", "items": {"$ref": "#/$defs/leaf"}},
            ]
        },
        "mixed": {
            "allOf": [{"properties": {"a": {}}}, {"$ref": "#/$defs/leaf"}],
        },
        "open": {"type": "object"},
        "map": {"type": "object", "additionalProperties": {"$ref": "#/$defs/leaf"}},
        "pattern": {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/leaf"}},
            "patternProperties": {"^b": {"$ref": "#/$defs/leaf"}},
        },
    },
    "$defs": {"leaf": {"type": "object", "properties": {"a": {}, "b": {"$ref": "#/$defs/leaf"}}}},
}


def test_an_undeclared_key_is_named_with_its_path_and_the_expected_fields() -> None:
    value = {"id": 1, "lines": [{"sku": "a", "price": 1}, {"sku": "b", "prise": 2}], "extra": {}}
    assert find_undeclared_key(value, ORDER) == UndeclaredKey(
        path="lines[1].prise", message="unknown field `prise`, expected one of `sku`, `price`"
    )


def test_maps_take_any_key() -> None:
    assert find_undeclared_key({"id": 1, "lines": [], "extra": {"any key": {}}}, ORDER) is None


def test_a_union_takes_the_keys_of_every_branch_the_value_fits() -> None:
    walk = UndeclaredKeys(HANDWRITTEN)
    assert walk.find({"either": {"a": 1, "b": 2}}) is None
    assert walk.find({"either": [{"b": {"a": 1}}]}) is None
    found = walk.find({"either": [{"b": {"c": 1}}]})
    assert found is not None and found.path == "either[0].b.c"


def test_prefix_items_allof_and_open_objects() -> None:
    walk = UndeclaredKeys(HANDWRITTEN)
    assert walk.find({"pair": [{"a": 1}, {"b": 2}, {"z": 3}]}) is None
    found = walk.find({"pair": [{"a": 1}, {"a": 2}]})
    assert found is not None and found.path == "pair[1].a"
    assert walk.find({"mixed": {"a": 1, "b": {"a": 1}}, "open": {"anything": 1}}) is None
    assert walk.find({"mixed": {"c": 1}}) == UndeclaredKey(
        path="mixed.c", message="unknown field `c`, expected one of `a`, `b`"
    )


def test_arrays_under_different_schemas_keep_their_own_item_schemas() -> None:
    walk = UndeclaredKeys(ORDER)
    lines = [{"sku": "a", "price": 1}]
    assert walk.find({"lines": lines, "notes": [{"kind": "note", "text": "t"}]}) is None
    found = walk.find({"lines": lines, "notes": [{"kind": "note", "sku": "t"}]})
    assert found == UndeclaredKey(
        path="notes[0].sku", message="unknown field `sku`, expected one of `kind`, `text`"
    )


def test_a_scalar_first_does_not_hide_keys_in_a_later_array() -> None:
    schema = type_schema(list[Line] | str).schema
    walk = undeclared_keys(schema)
    assert walk.find("plain text") is None
    found = walk.find([{"sku": "a", "price": 1, "qty": 2}])
    assert found is not None and found.path == "[0].qty"


def _kept(schema: dict[str, Any]) -> bool:
    """Whether work derived from `schema` is kept with it (it is a cached type's)."""
    return undeclared_keys(schema) is undeclared_keys(schema)


def test_the_walk_of_a_types_schema_is_kept_and_others_are_not() -> None:
    # Asked for now: the list of cached types is bounded, and the tests run before this one
    # in the same process may have built more than it holds since `ORDER` was made.
    order = type_schema(Order).schema
    assert _kept(order)
    assert not _kept(dict(order))
    assert not _kept(HANDWRITTEN)
    assert derived(order, "probe", object) is derived(order, "probe", object)
    assert derived(HANDWRITTEN, "probe", object) is not derived(HANDWRITTEN, "probe", object)


def test_only_cached_types_are_listed_and_the_list_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = len(_types._READ_ONLY)
    for index in range(20):  # an unhashable type expression is built afresh, never listed
        schema = type_schema(Annotated[Line, {"variant": index}]).schema
        assert not _kept(schema)
    assert len(_types._READ_ONLY) == listed
    monkeypatch.setattr(_types, "_CACHED_TYPES", 2)
    made = [create_model(f"Bounded{index}", a=(int, 0)) for index in range(6)]
    schemas = [type_schema(model).schema for model in made]
    assert len(_types._READ_ONLY) <= 4
    assert _kept(schemas[-1]) and not _kept(schemas[0])
    # A schema no longer listed is still walked correctly, just not kept.
    assert find_undeclared_key({"b": 1}, schemas[0]) == UndeclaredKey(
        path="b", message="unknown field `b`, expected `a`"
    )


def _reference(value: Any, schemas: list[Any], root: dict[str, Any], path: tuple[Any, ...]) -> Any:
    """The walk written as plain recursion, with nothing remembered."""
    candidates = _candidates(value, schemas, root)
    if candidates is None:
        return None
    if isinstance(value, dict):
        open_ = any(_is_open(candidate) for candidate in candidates)
        declared: dict[str, list[Any]] = {}
        for candidate in candidates:
            for key, sub in _properties(candidate, root).items():
                declared.setdefault(key, []).append(sub)
        extra = [
            c["additionalProperties"]
            for c in candidates
            if isinstance(c.get("additionalProperties"), dict)
        ]
        patterns = [
            (re.compile(pattern), sub)
            for c in candidates
            for pattern, sub in (c.get("patternProperties") or {}).items()
        ]
        if not open_:
            for key in value:
                if key not in declared:
                    return format_path((*path, key)), key
        for key, item in value.items():
            subs = (
                declared.get(key)
                or [sub for pattern, sub in patterns if pattern.search(key)]
                or extra
            )
            if subs:
                found = _reference(item, subs, root, (*path, key))
                if found is not None:
                    return found
        return None
    for index, item in enumerate(value):
        subs = [sub for candidate in candidates for sub in _item_schemas(candidate, index)]
        if subs:
            found = _reference(item, subs, root, (*path, index))
            if found is not None:
                return found
    return None


KEYS = st.sampled_from(
    [
        "id",
        "lines",
        "extra",
        "tagged",
        "notes",
        "sku",
        "price",
        "kind",
        "text",
        "pair",
        "either",
        "mixed",
        "open",
        "map",
        "pattern",
        "bee",
        "a",
        "b",
        "c",
    ]
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["x", "note"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)


@given(st.lists(JSON, min_size=1, max_size=6))
def test_a_walk_kept_across_values_answers_as_a_fresh_walk_does(values: list[Any]) -> None:
    for schema in (ORDER, HANDWRITTEN):
        kept = UndeclaredKeys(schema)
        for value in values:
            found = kept.find(value)
            expected = _reference(value, [schema], schema, ())
            assert (found.path if found else None) == (expected[0] if expected else None)
            if found is not None:
                assert found.message.startswith(f"unknown field `{expected[1]}`")


# ----- maps and open objects are exempt at their own level only


class Contact(BaseModel):
    email: str | None = None


class Book(BaseModel):
    contacts: dict[str, Contact]


class Shelves(BaseModel):
    contacts: dict[str, list[Contact]]


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    contact: Contact | None = None


class Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


class ForbidAll(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inner: Forbid
    byname: dict[str, Forbid] = {}


def test_the_values_of_a_map_are_walked() -> None:
    schema = type_schema(Book).schema
    assert find_undeclared_key({"contacts": {"ada": {"email": "a@b.c"}}}, schema) is None
    assert find_undeclared_key({"contacts": {"ada": {"e_mail": "x"}}}, schema) == UndeclaredKey(
        path="contacts.ada.e_mail", message="unknown field `e_mail`, expected `email`"
    )
    found = find_undeclared_key(
        {"contacts": {"ada": [{}, {"e_mail": "x"}]}}, type_schema(Shelves).schema
    )
    assert found is not None and found.path == "contacts.ada[1].e_mail"


def test_the_declared_children_of_an_open_object_are_walked() -> None:
    schema = type_schema(Open).schema
    assert find_undeclared_key({"anything": {"e_mail": 1}, "contact": {}}, schema) is None
    found = find_undeclared_key({"anything": 1, "contact": {"e_mail": "x"}}, schema)
    assert found == UndeclaredKey(
        path="contact.e_mail", message="unknown field `e_mail`, expected `email`"
    )


def test_pattern_properties_walk_the_keys_they_match() -> None:
    walk = UndeclaredKeys(HANDWRITTEN)
    assert walk.find({"pattern": {"a": {"a": 1}, "bee": {"b": {}}, "zed": {"c": 1}}}) is None
    found = walk.find({"pattern": {"bee": {"c": 1}}})
    assert found is not None and found.path == "pattern.bee.c"


def test_an_extraction_rejects_a_misnamed_key_inside_a_map() -> None:
    from allama import ChatRequest, ExtractionMode, Extractor, ParseError, RequestField, Warning
    from allama.mock import ChatResponseBuilder, MockProvider

    warning = Warning.approximated(RequestField.RESPONSE_FORMAT, "`pattern` was removed at `/`")
    response = ChatResponseBuilder().text('{"contacts": {"ada": {"e_mail": "x"}}}')
    provider = MockProvider([response.warning(warning).build()])
    request = ChatRequest("m").user("Ada").with_option(ExtractionMode.NATIVE)
    with pytest.raises(ParseError) as caught:
        Extractor().extract(provider, Book, request)
    assert caught.value.path == "contacts.ada.e_mail"
    assert caught.value.detail == "unknown field `e_mail`, expected `email`"


# ----- whether the walk can find anything pydantic would not reject itself


def test_a_key_pydantic_ignores_can_only_hide_under_an_object_closed_by_convention() -> None:
    assert may_ignore_undeclared_keys(ORDER)
    assert may_ignore_undeclared_keys(type_schema(Book).schema)  # Contact ignores extras
    assert not may_ignore_undeclared_keys(type_schema(ForbidAll).schema)
    assert not may_ignore_undeclared_keys(type_schema(dict[str, int]).schema)
    assert not may_ignore_undeclared_keys(type_schema(list[Forbid | int]).schema)
    assert may_ignore_undeclared_keys(type_schema(list[Forbid | Contact]).schema)
    assert not may_ignore_undeclared_keys({"type": "object", "additionalProperties": True})


def test_the_answer_is_kept_with_a_types_schema() -> None:
    schema = type_schema(ForbidAll).schema
    assert may_ignore_undeclared_keys(schema) is False
    assert derived(schema, may_ignore_undeclared_keys, lambda: True) is False  # not made again
    assert may_ignore_undeclared_keys(dict(schema)) is False  # a copy: worked out afresh
