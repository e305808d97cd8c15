"""Strict-null normalisation: stand-in nulls go, meant nulls stay, the input is never changed."""

from __future__ import annotations

from pydantic import BaseModel

from allama.schema import normalize_strict_nulls, type_schema


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
