"""Two keys a map's key type reads as one (`"1"` and `"01"` to an `int`), where the check
that refuses them did not look:

- maps of other classes: `OrderedDict`, `defaultdict`, `Counter`, a root model's map;
- maps behind a validator that runs after validation (`AfterValidator`, a field's or a
  model's after-validator), which is handed the map that already lost a value;
- a map beside keys the text never wrote (a default that holds a map, a default model, a
  root model's `root`), which made up for the lost key in the count;
- a model's extra keys, given a key type that reads two of them as one.

Each was accepted with one of the model's values dropped; each is refused as a key written
twice is. A validator that reads the object first (`BeforeValidator`, `WrapValidator`) may
merge keys on purpose: what it kept is its own, and is not refused.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    WrapValidator,
    field_validator,
    model_validator,
)
from tests._native_wire import extract_through

import allama
from allama import ChatRequest, ExtractionMode, ParseError, SchemaEnforcement
from allama.mock import MockProvider

REQUEST = ChatRequest("gpt-4.1-mini").user("the record")
MERGED = '{"m": {"1": "a", "01": "b"}}'
SAME_KEY = "the keys `1` and `01` are the same key to the type in the object"


def _extract(tp: Any, output: str) -> Any:
    return allama.extract(MockProvider([output]), tp, REQUEST).value


def _refusal(tp: Any, output: str) -> tuple[str, str | None]:
    with pytest.raises(ParseError) as raised:
        allama.extract(MockProvider([output]), tp, REQUEST)
    return raised.value.detail, raised.value.path


class Ordered(BaseModel):
    m: collections.OrderedDict[int, str]


class Defaulting(BaseModel):
    m: collections.defaultdict[int, str]


class After(BaseModel):
    m: Annotated[dict[int, str], AfterValidator(lambda d: d)]


class FieldAfter(BaseModel):
    m: dict[int, str]

    @field_validator("m")
    @classmethod
    def _same(cls, value: dict[int, str]) -> dict[int, str]:
        return dict(sorted(value.items()))  # a new dict: not the one validation made


class ModelAfter(BaseModel):
    m: dict[int, str]

    @model_validator(mode="after")
    def _same(self) -> ModelAfter:
        return self


class BesideDefault(BaseModel):
    m: dict[int, str]
    d: dict[str, int] = {"x": 1}


class Inner(BaseModel):
    j: dict[int, str] = {1: "z"}


class BesideDefaultModel(BaseModel):
    m: dict[int, str]
    inner: Inner = Inner()


class BesideRoots(BaseModel):
    ids: list[RootModel[int]]
    m: dict[int, str]


class Cat(BaseModel):
    kind: Literal["cat"]
    m: dict[int, str]


class Dog(BaseModel):
    kind: Literal["dog"]
    m: dict[str, str]


class Pet(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind"), AfterValidator(lambda p: p)]


Lower = Annotated[str, StringConstraints(to_lower=True)]


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[Lower, int]
    name: str


@pytest.mark.parametrize(
    ("tp", "output", "path"),
    [
        (Ordered, MERGED, "m"),
        (Defaulting, MERGED, "m"),
        (After, MERGED, "m"),
        (FieldAfter, MERGED, "m"),
        (ModelAfter, MERGED, "m"),
        (BesideDefault, MERGED, "m"),
        (BesideDefaultModel, MERGED, "m"),
        (BesideRoots, '{"ids": [7], "m": {"1": "a", "01": "b"}}', "m"),
        (RootModel[dict[int, str]], '{"1": "a", "01": "b"}', None),
        (collections.Counter[int], '{"1": 1, "01": 2}', None),
        (list[collections.OrderedDict[int, str]], '[{"1": "a"}, {"1": "a", "01": "b"}]', "[1]"),
        (Pet, '{"pet": {"kind": "cat", "m": {"1": "a", "01": "b"}}}', "pet.m"),
    ],
)
def test_keys_read_as_one_are_refused_in_every_map(tp: Any, output: str, path: str | None) -> None:
    where = f" at `{path}`" if path else ""
    assert _refusal(tp, output) == (SAME_KEY + where, path)


def test_extra_keys_read_as_one_are_refused() -> None:
    assert _refusal(Open, '{"name": "n", "Apples": 3, "apples": 5}') == (
        "the keys `Apples` and `apples` are the same key to the type in the object",
        None,
    )
    got = _extract(Open, '{"name": "n", "Apples": 3, "pears": 5}')
    assert (got.name, got.__pydantic_extra__) == ("n", {"apples": 3, "pears": 5})


@pytest.mark.parametrize(
    ("tp", "output", "held"),
    [
        (Ordered, '{"m": {"2": "b", "1": "a"}}', collections.OrderedDict([(2, "b"), (1, "a")])),
        (
            Defaulting,
            '{"m": {"1": "a", "2": "b"}}',
            collections.defaultdict(str, {1: "a", 2: "b"}),
        ),
        (After, '{"m": {"1": "a", "2": "b"}}', {1: "a", 2: "b"}),
        (BesideDefault, '{"m": {"1": "a", "2": "b"}}', {1: "a", 2: "b"}),
        (Pet, '{"pet": {"kind": "dog", "m": {"1": "a", "01": "b"}}}', {"1": "a", "01": "b"}),
    ],
)
def test_maps_that_kept_every_key_are_read(tp: Any, output: str, held: dict[Any, str]) -> None:
    got = _extract(tp, output)
    value = got.pet if isinstance(got, Pet) else got
    assert (type(value.m), value.m) == (type(held), held)


def _dropping_empty(value: dict[int, str]) -> dict[int, str]:
    return {key: text for key, text in value.items() if text}


def _summing_lowered(value: Any) -> Any:
    summed: dict[str, int] = {}
    for key, count in value.items():
        summed[key.lower()] = summed.get(key.lower(), 0) + count
    return summed


def _summing_around(value: Any, handler: Callable[[Any], Any]) -> Any:
    return handler(_summing_lowered(value))


@pytest.mark.parametrize(
    ("tp", "output", "held"),
    [
        # The validator drops a key it was given: fewer keys, none of them read as one.
        (
            Annotated[dict[int, str], AfterValidator(_dropping_empty)],
            '{"1": "a", "2": ""}',
            {1: "a"},
        ),
        # The caller's function merges keys before validation, on purpose.
        (
            Annotated[dict[Lower, int], BeforeValidator(_summing_lowered)],
            '{"Apples": 3, "apples": 5}',
            {"apples": 8},
        ),
        (
            Annotated[dict[Lower, int], WrapValidator(_summing_around)],
            '{"Apples": 3, "apples": 5}',
            {"apples": 8},
        ),
    ],
)
def test_a_validators_own_keys_are_not_taken_for_keys_read_as_one(
    tp: Any, output: str, held: dict[Any, Any]
) -> None:
    assert _extract(tp, output) == held


def test_an_ordered_dict_under_an_exact_record_is_refused() -> None:
    with pytest.raises(ParseError) as raised:
        extract_through("gemini", Ordered, MERGED)
    error = raised.value
    assert (error.detail, error.path) == (f"{SAME_KEY} at `m`", "m")
    assert (error.metadata.mode, error.metadata.enforcement) == (
        ExtractionMode.NATIVE,
        SchemaEnforcement.EXACT,
    )
