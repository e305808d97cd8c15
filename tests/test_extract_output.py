"""Reading an output with one parse gives what the careful reading gives, on every text.

The careful reading parses the text, normalises stand-in nulls, walks for undeclared keys
and validates; the one-parse reading validates the text directly where the type's plan
says that changes nothing. For any output (valid ones and ones broken in the ways models
break them) both must return the same value or the same failure.
"""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, RootModel, WithJsonSchema, field_validator
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from allama.extract import _output
from allama.extract._output import CAREFUL, output_plan
from allama.extract._validation import Failure, check
from allama.schema._types import type_schema


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


class Row(BaseModel):
    id: int
    name: str
    price: float
    tags: list[str] = []
    note: str | None = None
    size: int = 5
    colour: Colour = Colour.RED


class Flat(BaseModel):
    id: int
    name: str
    price: float
    ratio: float | None = None
    amount: Decimal = Decimal(0)


class Table(BaseModel):
    rows: list[Flat]


def _integer_only(schema: dict[str, Any]) -> None:
    schema.pop("anyOf", None)
    schema["type"] = "integer"


def _shown_integer(schema: dict[str, Any]) -> None:
    schema["properties"]["v"] = {"type": "integer", "default": 3}


class Limited(BaseModel):
    """A `null` the type reads and its schema does not show: a stand-in, to the schema."""

    name: str
    limit: int | SkipJsonSchema[None] = 3
    cap: Annotated[int | None, WithJsonSchema({"type": "integer"})] = 4
    v: int | None = Field(default=3, json_schema_extra=_integer_only)


class LimitedByItsModel(BaseModel):
    """The same, by a model's own `json_schema_extra`."""

    model_config = ConfigDict(json_schema_extra=_shown_integer)
    name: str
    v: int | None = 3


class Line(BaseModel):
    """Every field required: a valid row keeps as many keys as it has fields."""

    id: int
    name: str
    price: float


class Sheet(BaseModel):
    lines: list[Line]


class Catalog(BaseModel):
    title: str
    rows: list[Row]
    extra_info: dict[str, int] = {}


class Email(BaseModel):
    email: str | None = None


class Phone(BaseModel):
    phone: str | None = None


class Lead(BaseModel):
    reach: Email | Phone


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: list[int] = []


class Shout(BaseModel):
    word: str

    @field_validator("word")
    @classmethod
    def upper(cls, value: str) -> str:
        return value.upper()


class Point(TypedDict):
    x: int
    y: float


@dataclasses.dataclass
class Pair:
    left: int
    right: int = 0


class Labels(RootModel[list[str]]):
    pass


class Anything(BaseModel):
    data: Any
    weights: dict[str, float] = {}


TYPES: list[tuple[Any, list[Any]]] = [
    (
        Limited,
        [
            {"name": "a", "limit": None, "cap": None, "v": None},
            {"name": "b", "limit": 7, "cap": 9, "v": 1},
        ],
    ),
    (LimitedByItsModel, [{"name": "a", "v": None}, {"name": "b", "v": 1}]),
    (
        Catalog,
        [
            {
                "title": "t",
                "rows": [
                    {"id": 1, "name": "a", "price": 1.5, "tags": ["x"], "note": None},
                    {"id": 2, "name": 'b "q": c', "price": 2, "size": 3, "colour": "blue"},
                ],
                "extra_info": {"k": 1},
            }
        ],
    ),
    (
        Table,
        [
            {
                "rows": [
                    {"id": 1, "name": "a", "price": 1.5, "ratio": 0.5, "amount": 2},
                    {"id": 2, "name": "b", "price": 2, "ratio": None},
                    {"id": 3, "name": "c", "price": 1e300},
                ]
            }
        ],
    ),
    (
        Sheet,
        [
            {
                "lines": [
                    {"id": 1, "name": "a", "price": 1.5},
                    {"id": 2, "name": "at 10:30", "price": 2},
                    {"id": 3, "name": "c", "price": 1e300},
                ]
            },
            {"lines": [{"id": 1, "name": "a", "price": 0.5}]},
        ],
    ),
    (
        list[Flat],
        [[{"id": 1, "name": "a", "price": 1e308}, {"id": 2, "name": "b", "price": 1e308}]],
    ),
    (Lead, [{"reach": {"email": "e"}}, {"reach": {"phone": "1"}}]),
    (Open, [{"a": 1, "z": [1, 2]}]),
    (Closed, [{"a": 1, "b": [2]}]),
    (Shout, [{"word": "hi"}]),
    (Point, [{"x": 1, "y": 2.5}]),
    (Pair, [{"left": 1, "right": 2}, {"left": 1}]),
    (Labels, [["a", "b"]]),
    (Anything, [{"data": {"k": [1, {"n": None}]}, "weights": {"a": 0.5}}]),
    (list[Row], [[{"id": 1, "name": "a", "price": 1.0}]]),
    (Annotated[list[int], Field(min_length=1)], [[1, 2]]),
    (Literal["a", "b"], ["a"]),
]


def _mutations(value: Any) -> st.SearchStrategy[str]:
    text = json.dumps(value)
    compact = json.dumps(value, separators=(",", ":"))
    pretty = json.dumps(value, indent=2)
    spaced = json.dumps(value, separators=(" , ", " : "))

    def edit(original: str, at: int, insert: str) -> str:
        at = at % (len(original) + 1)
        return original[:at] + insert + original[at:]

    inserts = st.sampled_from(
        [
            ', "name": "dup"',
            ', "id": 7',
            ', "e_mail": "x"',
            ', "note": null',
            ', "size": null',
            ', "price": NaN',
            ', "price": Infinity',
            ', "price": 1e999',
            ', "ratio": NaN',
            ', "amount": NaN',
            ', "price": 1' + "0" * 400,
            ", null",
            '"',
            ' "k" : 1,',
            '\\": ',
        ]
    )
    edited = st.builds(edit, st.sampled_from([text, compact]), st.integers(0, 400), inserts)
    return st.one_of(st.sampled_from([text, compact, pretty, spaced]), edited)


def _outcome(result: Any) -> Any:
    if isinstance(result, Failure):
        return ("failure", result.message, result.path, result.invalid_json, result.undeclared)
    if isinstance(result, BaseModel):
        return ("value", type(result), result.model_dump(), result.model_fields_set)
    return ("value", result)


def _careful(monkeypatch: pytest.MonkeyPatch) -> Any:
    def never(self: Any, raw: str, adapter: Any, reject: bool) -> Any:
        return CAREFUL

    monkeypatch.setattr(_output.OutputPlan, "validate_once", never)


@pytest.mark.parametrize(("tp", "values"), TYPES, ids=[str(i) for i in range(len(TYPES))])
@given(data=st.data(), reject=st.booleans())
def test_one_parse_reads_as_the_careful_reading_does(
    tp: Any, values: list[Any], data: st.DataObject, reject: bool
) -> None:
    schema = type_schema(tp)
    raw = data.draw(st.sampled_from(values).flatmap(_mutations))
    fast = _outcome(check(raw, schema.adapter, schema.schema, reject))
    with pytest.MonkeyPatch.context() as patch:
        _careful(patch)
        careful = _outcome(check(raw, schema.adapter, schema.schema, reject))
    assert fast == careful, raw


def test_a_plain_answer_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """No parse but pydantic's own, on an approximate pass with the key check on."""
    from allama.extract import _json as strict

    def no_second_parse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the output was parsed a second time")

    monkeypatch.setattr(strict, "from_json", no_second_parse)
    monkeypatch.setattr(strict.json, "loads", no_second_parse)
    schema = type_schema(Catalog)
    value = {
        "title": "t",
        "rows": [
            {"id": 1, "name": "a: b", "price": 1.5, "tags": ["x"], "note": None},
            {"id": 2, "name": "c", "price": 2, "size": 3, "colour": "blue"},
        ],
        "extra_info": {"k": 1},
    }
    for raw in (json.dumps(value), json.dumps(value, indent=2)):
        for reject in (False, True):
            result = check(raw, schema.adapter, schema.schema, reject)
            assert isinstance(result, Catalog), result
    sheet = type_schema(Sheet)
    lines = {"lines": [{"id": n, "name": f"line {n}", "price": n / 2} for n in range(50)]}
    for raw in (json.dumps(lines), json.dumps(lines, indent=2)):
        assert isinstance(check(raw, sheet.adapter, sheet.schema, True), Sheet)


@pytest.mark.parametrize(
    ("tp", "counted", "forbid"),
    [
        (Catalog, True, True),
        (Lead, True, False),
        (Open, True, False),
        (Closed, True, True),
        (Shout, False, False),
        (Point, True, True),
        (Pair, False, False),
        (Labels, False, False),
        (Anything, True, True),
        (list[int], True, True),
        (Limited, False, False),
        (LimitedByItsModel, False, False),
    ],
)
def test_the_plan_of_a_type(tp: Any, counted: bool, forbid: bool) -> None:
    schema = type_schema(tp)
    plan = output_plan(schema.adapter, schema.schema)
    assert (plan.counted, plan.forbid) == (counted, forbid)
    assert output_plan(schema.adapter, schema.schema) is plan
