"""A completed object in `stream.partial` is validated once, from its JSON text, as `finish()`
validates it, whatever the chunking: not again over its fields validated already (their
`Annotated` validators, a nested model's validators, would run twice, and a valid object that
reads its fields as JSON would be left out). Fields are keyed as validation reads them."""

from __future__ import annotations

import datetime
import enum
import json
from typing import Annotated, Any

import pytest
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    Json,
    field_validator,
    model_validator,
)

from allama import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ExtractionMode,
    Extractor,
    Finish,
    ParseError,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
)
from allama.mock import MockStreamingProvider

SIZES = [1, 2, 3, 5, 8, 1_000]


REQUEST = ChatRequest("m").user("extract").with_option(ExtractionMode.NATIVE)


def provider_of(text: str, size: int) -> MockStreamingProvider:
    """A provider streaming `text` in chunks of `size` characters."""
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    events: list[StreamEvent] = [
        ResponseStart(),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        *[TextDelta(index=0, text=chunk) for chunk in chunks],
        BlockStop(index=0),
        Finish(finish_reason="stop"),
    ]
    return MockStreamingProvider.with_stream(events)


def stream(tp: Any, text: str, size: int) -> tuple[list[Any], Any]:
    """The partial value after each chunk of `size` characters, and `finish()`'s value."""
    partials: list[Any] = []
    with Extractor().extract_stream(provider_of(text, size), tp, REQUEST) as opened:
        for event in opened:
            if isinstance(event, TextDelta):
                partials.append(opened.partial)
        value = opened.finish().value
    return partials, value


def while_tail(partials: list[Any]) -> list[Any]:
    """The partial values read while `tail`, the last field, was being written."""
    return [p for p in partials if p is not None and "tail" in p.model_fields_set]


def _double(value: int) -> int:
    return value * 2


Doubled = Annotated[int, AfterValidator(_double)]


class Scaled(BaseModel):
    x: Doubled


class HoldsScaled(BaseModel):
    a: Scaled
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_an_annotated_validator_of_a_nested_field_runs_once(size: int) -> None:
    partials, value = stream(HoldsScaled, '{"a": {"x": 1}, "tail": "some text"}', size)
    assert value == HoldsScaled(a=Scaled(x=1), tail="some text")
    assert value.a.x == 2
    shown = [
        p.a.x for p in partials if p is not None and "x" in getattr(p, "a", p).model_fields_set
    ]
    assert shown and set(shown) == {2}
    assert all(p.a == Scaled(x=1) for p in while_tail(partials))


class Values(BaseModel):
    vals: list[Doubled] = Field(min_length=1)
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_a_list_validated_whole_does_not_validate_its_items_again(size: int) -> None:
    partials, value = stream(Values, '{"vals": [1, 2], "tail": "some text"}', size)
    assert value.vals == [2, 4]
    assert all(p.vals == [2, 4] for p in while_tail(partials))
    shown = [p.vals for p in partials if p is not None and "vals" in p.model_fields_set]
    assert shown and all(vals in ([], [2], [2, 4]) for vals in shown)


class Weights(BaseModel):
    by_name: dict[str, Doubled] = Field(min_length=1)
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_a_map_validated_whole_does_not_validate_its_values_again(size: int) -> None:
    partials, value = stream(Weights, '{"by_name": {"a": 1, "b": 2}, "tail": "some text"}', size)
    assert value.by_name == {"a": 2, "b": 4}
    assert all(p.by_name == {"a": 2, "b": 4} for p in while_tail(partials))


class Counter(BaseModel):
    n: int

    @model_validator(mode="after")
    def bump(self) -> Counter:
        self.n += 1
        return self


class Middle(BaseModel):
    inner: Counter
    k: int


class Top(BaseModel):
    mid: Middle
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_a_nested_model_validator_runs_once(size: int) -> None:
    text = '{"mid": {"inner": {"n": 1}, "k": 0}, "tail": "some text"}'
    partials, value = stream(Top, text, size)
    assert value.mid.inner.n == 2
    tails = while_tail(partials)
    assert tails and all(p.mid == value.mid and p.mid.inner.n == 2 for p in tails)
    # Never 3 (run twice); 1 only while `inner` is open (its validator has not run yet).
    inners = [
        p.mid.inner
        for p in partials
        if p is not None and "mid" in p.model_fields_set and "inner" in p.mid.model_fields_set
    ]
    assert {inner.n for inner in inners if "n" in inner.model_fields_set} <= {1, 2}


class Counters(BaseModel):
    by_name: dict[str, Counter]
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_models_in_a_map_are_validated_once(size: int) -> None:
    text = '{"by_name": {"a": {"n": 1}, "b": {"n": 5}}, "tail": "some text"}'
    partials, value = stream(Counters, text, size)
    assert {key: c.n for key, c in value.by_name.items()} == {"a": 2, "b": 6}
    tails = while_tail(partials)
    assert tails and all({k: c.n for k, c in p.by_name.items()} == {"a": 2, "b": 6} for p in tails)


class UsDate(BaseModel):
    d: datetime.date

    @field_validator("d", mode="before")
    @classmethod
    def us(cls, value: Any) -> Any:
        if isinstance(value, str) and "/" in value:
            month, day, year = value.split("/")
            return datetime.date(int(year), int(month), int(day))
        return value


class HoldsDate(BaseModel):
    d: UsDate
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_a_nested_object_whose_validator_reads_its_json_is_shown(size: int) -> None:
    partials, value = stream(HoldsDate, '{"d": {"d": "01/02/2024"}, "tail": "some text"}', size)
    assert value.d.d == datetime.date(2024, 1, 2)
    tails = while_tail(partials)
    assert tails and all("d" in p.model_fields_set for p in tails)
    assert all(p.d == UsDate(d=datetime.date(2024, 1, 2)) for p in tails)


class Color(enum.Enum):
    RED = "red"


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, use_enum_values=True)
    c: Color


class HoldsStrict(BaseModel):
    e: Strict
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_a_strict_nested_model_with_enum_values_is_shown(size: int) -> None:
    partials, value = stream(HoldsStrict, '{"e": {"c": "red"}, "tail": "some text"}', size)
    assert value.e.c == "red"
    tails = while_tail(partials)
    assert tails and all("e" in p.model_fields_set and p.e.c == "red" for p in tails)


class Packed(BaseModel):
    payload: Json[list[int]]


class HoldsPacked(BaseModel):
    p: Packed
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_a_nested_object_with_a_json_field_is_shown(size: int) -> None:
    text = json.dumps({"p": {"payload": "[1, 2]"}, "tail": "some text"})
    partials, value = stream(HoldsPacked, text, size)
    assert value.p.payload == [1, 2]
    tails = while_tail(partials)
    assert tails and all("p" in p.model_fields_set and p.p.payload == [1, 2] for p in tails)


class Stock(BaseModel):
    sku: str
    count: int = 0


class HoldsStock(BaseModel):
    stock: Stock
    tail: str


@pytest.mark.parametrize("size", SIZES)
def test_a_nested_object_that_does_not_validate_is_left_out_not_shown_with_a_default(
    size: int,
) -> None:
    # `"many"` is no int: the object does not validate, and `finish()` says so. It is not
    # shown as `Stock(sku="A", count=0)`, its default in place of the field left out.
    text = '{"stock": {"sku": "A", "count": "many"}, "tail": "some text"}'
    shown: list[Any] = []
    with Extractor().extract_stream(provider_of(text, size), HoldsStock, REQUEST) as opened:
        for event in opened:
            if isinstance(event, TextDelta):
                shown.append(opened.partial)
        with pytest.raises(ParseError, match=r"stock\.count"):
            opened.finish()
    tails = while_tail(shown)
    assert tails and all("stock" not in p.model_fields_set for p in tails)


class ByName(BaseModel):
    model_config = ConfigDict(validate_by_alias=False, validate_by_name=True)
    first_name: str = Field(alias="firstName")
    tail: str


class ByEither(BaseModel):
    model_config = ConfigDict(validate_by_name=True)
    first_name: str = Field(alias="firstName")
    tail: str


class ByChoice(BaseModel):
    first_name: str = Field(validation_alias=AliasChoices("given", "first"))
    tail: str


@pytest.mark.parametrize(
    ("tp", "key"),
    [
        (ByName, "first_name"),
        (ByEither, "first_name"),
        (ByEither, "firstName"),
        (ByChoice, "given"),
    ],
)
@pytest.mark.parametrize("size", [1, 2, 7])
def test_a_field_is_shown_under_every_key_validation_reads_it_from(
    tp: type[BaseModel], key: str, size: int
) -> None:
    text = json.dumps({key: "Ada", "tail": "a long note here"})
    partials, value = stream(tp, text, size)
    assert value.model_dump() == {"first_name": "Ada", "tail": "a long note here"}
    tails = while_tail(partials)
    assert tails and all(
        "first_name" in p.model_fields_set and p.first_name == "Ada" for p in tails
    )
    assert tails[-1] == value


def test_an_alias_is_not_read_where_validation_reads_names_only() -> None:
    # `validate_by_alias=False`: `firstName` is an unknown key, as `finish()` reads it.
    text = json.dumps({"firstName": "Ada", "first_name": "Bea", "tail": "a long note here"})
    partials, value = stream(ByName, text, 2)
    assert value.first_name == "Bea"
    assert all(p.first_name == "Bea" for p in while_tail(partials))
