"""The schema of a type: a type too deep to build is a `SchemaError` naming it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, create_model

from allama.schema import SchemaError, type_schema


def test_a_type_nested_too_deep_is_a_schema_error_naming_it() -> None:
    tp: Any = int
    for _ in range(1000):
        tp = list[tp]
    with pytest.raises(SchemaError) as caught:
        type_schema(tp)
    message = str(caught.value)
    assert message.startswith("the type `list[list[list[")
    assert message.endswith("[...]]]]]]]]]]]]]` nests too deep to build its JSON Schema")
    assert caught.value.pointer == "/"


def test_a_chain_of_models_too_deep_is_a_schema_error_naming_the_outer_model() -> None:
    model: Any = create_model("Level0", value=(int, 0))
    for level in range(1, 1000):
        model = create_model(f"Level{level}", inner=(model, ...))
    with pytest.raises(SchemaError, match=r"^the type `Level999` nests too deep"):
        type_schema(model)


def test_an_ordinary_type_still_builds_after_one_that_did_not() -> None:
    class Point(BaseModel):
        x: int

    assert type_schema(Point).schema["required"] == ["x"]


def test_type_expressions_equal_but_spelled_apart_keep_their_own_schemas() -> None:
    from typing import Literal

    from allama.schema._types import type_schema

    first = type_schema(Literal["a", "b"]).schema
    second = type_schema(Literal["b", "a"]).schema
    assert (first["enum"], second["enum"]) == (["a", "b"], ["b", "a"])
    assert type_schema(list[Literal["b", "a"]]).schema["items"]["enum"] == ["b", "a"]
