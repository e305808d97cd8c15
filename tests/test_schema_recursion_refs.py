"""A `$ref` that leads back to the node it is merged into, without going into a property or an
item (`{"anyOf": [{"$ref": "#", "type": "integer"}, ...]}`), would make the shared rewrite
engine merge the same node into itself forever: every rewriting dialect refuses it with a
`SchemaError` (checking a value against it would never end either), never a
`RecursionError`. Recursion through a property or an item is left alone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import allama
from _schema_support import DIALECTS, UNCHANGED, Dialect
from allama import ChatRequest, ResponseFormat
from allama.errors import InvalidRequestError
from allama.schema import Rewrite, SchemaError, openai_strict
from allama.schema._dialects._llama_cpp import llama_cpp

REWRITING: dict[str, Dialect] = {
    **{name: dialect for name, dialect in DIALECTS.items() if name not in UNCHANGED},
    "openai_strict fine_tuned": lambda s: openai_strict(s, profile="fine_tuned"),
    "openai_strict xai": lambda s: openai_strict(s, profile="xai"),
    "llama_cpp": llama_cpp,
}
UNCHECKED: dict[str, Dialect] = {name: DIALECTS[name] for name in UNCHANGED}

_MESSAGE = (
    "the subschema at `{}` refers back to itself without going into a property or an item: "
    "checking a value against it would never end"
)

LOOPS: list[tuple[dict[str, Any], str]] = [
    ({"anyOf": [{"$ref": "#", "type": "integer"}, {"type": "null"}]}, "/"),
    ({"anyOf": [{"$ref": "#", "type": "integer"}]}, "/"),
    ({"oneOf": [{"$ref": "#", "minimum": 0}]}, "/"),
    (
        {"oneOf": [{"oneOf": [{"contains": False}, True], "$ref": "#", "then": {"const": 0}}]},
        "/",
    ),
    (
        {
            "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a", "maxLength": 3}, {"type": "null"}]}},
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
        "/$defs/a",
    ),
]


@pytest.mark.parametrize(("schema", "pointer"), LOOPS)
@pytest.mark.parametrize("dialect", list(REWRITING))
def test_a_ref_back_into_the_node_being_merged_is_a_schema_error(
    dialect: str, schema: dict[str, Any], pointer: str
) -> None:
    with pytest.raises(SchemaError) as raised:
        REWRITING[dialect](schema)
    assert str(raised.value) == _MESSAGE.format(pointer)
    assert raised.value.pointer == pointer


@pytest.mark.parametrize(("schema", "pointer"), LOOPS)
@pytest.mark.parametrize("dialect", list(UNCHECKED))
def test_the_dialects_that_send_a_schema_as_it_is_do_not_walk_into_the_loop(
    dialect: str, schema: dict[str, Any], pointer: str
) -> None:
    assert UNCHECKED[dialect](schema).schema == schema


def test_a_provider_refuses_the_loop_before_sending() -> None:
    schema = LOOPS[0][0]
    request = (
        ChatRequest("llama3.1")
        .user("Hi")
        .with_response_format(ResponseFormat.for_schema(schema, name="r"))
    )
    with pytest.raises(InvalidRequestError) as raised:
        allama.provider("ollama")._prepare(request, stream=False)
    assert str(raised.value) == (
        "the response format `r` has a schema allama cannot read: " + _MESSAGE.format("/")
    )
    assert isinstance(raised.value.__cause__, SchemaError)


RECURSION_THROUGH_VALUES: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"next": {"anyOf": [{"$ref": "#", "minProperties": 1}, {"type": "null"}]}},
    },
    {"anyOf": [{"type": "array", "items": {"$ref": "#", "type": "integer"}}, {"type": "null"}]},
    {
        "$defs": {
            "a": {"allOf": [{"$ref": "#/$defs/b"}], "type": "object"},
            "b": {"minProperties": 1},
        },
        "anyOf": [{"$ref": "#/$defs/a"}, {"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}]}],
    },
]


@pytest.mark.parametrize("schema", RECURSION_THROUGH_VALUES)
@pytest.mark.parametrize("dialect", list(REWRITING))
def test_recursion_through_a_property_or_an_item_is_rewritten(
    dialect: str, schema: dict[str, Any]
) -> None:
    assert isinstance(REWRITING[dialect](schema), Rewrite)


_SIBLINGS = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["integer", "object"]),
        "minimum": st.just(0),
        "maxLength": st.just(3),
        "minProperties": st.just(1),
        "description": st.just("x"),
    },
)
_LEAVES = st.one_of(
    st.just({"type": "null"}),
    st.just({"type": "integer"}),
    st.just(True),
    _SIBLINGS.map(lambda siblings: {"$ref": "#", **siblings}),
    _SIBLINGS.map(lambda siblings: {"$ref": "#/$defs/d", **siblings}),
)
_NODES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.tuples(
            st.sampled_from(["anyOf", "oneOf", "allOf"]), st.lists(inner, min_size=1, max_size=3)
        ).flatmap(lambda pair: _SIBLINGS.map(lambda siblings: {pair[0]: pair[1], **siblings})),
        inner.map(lambda sub: {"type": "object", "properties": {"a": sub}}),
        inner.map(lambda sub: {"type": "array", "items": sub}),
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(root=_NODES, definition=_NODES)
def test_no_dialect_recurses_without_end(root: Any, definition: Any) -> None:
    schema = {"$defs": {"d": definition}, "anyOf": [root, {"type": "null"}]}
    for name, dialect in REWRITING.items():
        try:
            dialect(schema)
        except SchemaError as error:
            assert "refers back to itself" in str(error), (name, error)
