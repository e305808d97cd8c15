"""An `Iterable` field (pydantic's `generator`) is validated lazily, item by item as the
caller iterates it: `{"ids": ["one", "two"]}` was taken for `ids: Iterable[int]`, recorded
as one pass, never asked again, and raised in the caller's code. The output is now checked
with each `Iterable` read as a list of its items, wherever in the type it is: an item that
does not fit is a parse error naming its place, asked again under retries. The value is
still the type's own, its iterator lazy."""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterable, Iterator
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator, BaseModel, Field, RootModel, SecretStr, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass
from tests._native_wire import extract_through
from typing_extensions import TypedDict

import allama
from allama import ExtractionMode, Extractor, ParseError, SchemaEnforcement
from allama.mock import MockProvider

REQUEST = allama.ChatRequest("gpt-4.1-mini").user("the ids")
PREFIX = "mock: failed to parse the output in `native` mode: "


class Batch(BaseModel):
    ids: Iterable[int]


def _failure(tp: Any, output: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        allama.extract(MockProvider([output]), tp, REQUEST)
    return caught.value


def test_an_invalid_item_is_refused_under_an_exact_record() -> None:
    with pytest.raises(ParseError) as raised:
        extract_through("openai", Batch, '{"ids": ["one", "two"]}')
    error = raised.value
    assert (error.detail, error.path) == (
        'invalid type: string "one", expected an integer',
        "ids[0]",
    )
    assert (error.metadata.mode, error.metadata.enforcement) == (
        ExtractionMode.NATIVE,
        SchemaEnforcement.EXACT,
    )


def test_an_invalid_item_is_asked_again_and_the_value_stays_lazy() -> None:
    provider = MockProvider(['{"ids": ["one", "two"]}', '{"ids": [1, 2]}'])
    got = Extractor(retries=1).extract(provider, Batch, REQUEST)
    assert got.metadata.passes == 2
    told = provider.requests[1].messages[-1].text() or ""
    assert 'it did not match the schema at `ids[0]`: invalid type: string "one"' in told
    # The type's own value: an iterator (not a list made of it), over the valid items.
    assert isinstance(got.value.ids, Iterator) and not isinstance(got.value.ids, list)
    assert list(got.value.ids) == [1, 2]


class Line(BaseModel):
    sku: str
    parts: list[Iterable[int]] | None = None


class Order(BaseModel):
    lines: list[Line]


class Either(BaseModel):
    x: int | dict[str, Generator[int, None, None]]


class Tree(BaseModel):
    ids: Iterable[int] = ()
    kids: list[Tree] = []


class Bounded(BaseModel):
    ids: Annotated[Iterable[int], Field(min_length=2, max_length=3)]


def _positive(value: int) -> int:
    if value <= 0:
        raise ValueError("not positive")
    return value


class Positive(BaseModel):
    ids: Iterable[Annotated[int, AfterValidator(_positive)]]


class Counted(BaseModel):
    ids: Iterable[int]
    n: int

    @model_validator(mode="before")
    @classmethod
    def _as_given(cls, data: Any) -> Any:
        return data


@pydantic_dataclass
class Bin:
    ids: Iterable[int]


class Shelf(TypedDict):
    ids: Iterable[int]


class Own(BaseModel):
    ids: Iterable[int]

    def __init__(self, **data: Any) -> None:
        data.setdefault("ids", [7])
        super().__init__(**data)


class Holder(BaseModel):
    own: Own


class Ids(RootModel[Iterable[int]]):
    pass


class Tokens(BaseModel):
    by_key: dict[SecretStr, Iterable[SecretStr]]


@pytest.mark.parametrize(
    ("tp", "output", "detail"),
    [
        (
            Order,
            '{"lines": [{"sku": "a", "parts": [[1], [2, "x"]]}]}',
            'at `lines[0].parts[1][1]`: invalid type: string "x", expected an integer',
        ),
        # In a union beside a plain member (said as a union's failure is: its first).
        (Either, '{"x": {"a": [1, "b"]}}', "at `x`: invalid type: a map, expected an integer"),
        # In a model that refers to itself (a definition of the type's schema).
        (
            Tree,
            '{"kids": [{"kids": [{"ids": [1, "z"]}]}]}',
            'at `kids[0].kids[0].ids[1]`: invalid type: string "z", expected an integer',
        ),
        (
            Bounded,
            '{"ids": [1]}',
            "at `ids`: invalid value: a sequence, expected at least 2 items after validation, "
            "not 1",
        ),
        (
            Bounded,
            '{"ids": [1, 2, 3, 4]}',
            "at `ids`: invalid value: a sequence, expected at most 3 items after validation, not 4",
        ),
        # The caller's validator of an item runs on each, as iterating would run it.
        (Positive, '{"ids": [1, -2]}', "at `ids[1]`: not positive"),
        # A model validator before the fields (read strictly, then as the type reads JSON).
        (
            Counted,
            '{"ids": [1, "x"], "n": 1}',
            'at `ids[1]`: invalid type: string "x", expected an integer',
        ),
        (Bin, '{"ids": ["z"]}', 'at `ids[0]`: invalid type: string "z", expected an integer'),
        (Shelf, '{"ids": ["z"]}', 'at `ids[0]`: invalid type: string "z", expected an integer'),
        # A model whose `__init__` is its own, inside another.
        (
            Holder,
            '{"own": {"ids": [1, "z"]}}',
            'at `own.ids[1]`: invalid type: string "z", expected an integer',
        ),
        (Ids, '[1, "z"]', 'at `[1]`: invalid type: string "z", expected an integer'),
        (
            Iterable[int] | None,
            '[1, "z"]',
            'at `[1]`: invalid type: string "z", expected an integer',
        ),
        # Its items secret, below a secret key: neither quoted.
        (
            Tokens,
            '{"by_key": {"sk-HUNTER2": ["a", 5]}}',
            "at `by_key.<secret key>[1]`: invalid type: a secret integer, expected a string",
        ),
    ],
)
def test_an_iterable_anywhere_in_the_type_is_checked_whole(
    tp: Any, output: str, detail: str
) -> None:
    error = _failure(tp, output)
    assert str(error) == PREFIX + detail


@pytest.mark.parametrize(
    ("tp", "output", "items"),
    [
        (Order, '{"lines": [{"sku": "a", "parts": [[1], [2, 3]]}]}', [2, 3]),
        (Either, '{"x": {"a": [4, 5]}}', [4, 5]),
        (Tree, '{"kids": [{"kids": [{"ids": [1, 2]}]}]}', [1, 2]),
        (Bounded, '{"ids": [1, 2]}', [1, 2]),
        (Positive, '{"ids": [1, 2]}', [1, 2]),
        (Counted, '{"ids": [1, 2], "n": 1}', [1, 2]),
        (Bin, '{"ids": [1, 2]}', [1, 2]),
        (Shelf, '{"ids": [1, 2]}', [1, 2]),
        # The model's own `__init__` fills the field: it runs in the check too.
        (Holder, '{"own": {}}', [7]),
        (Ids, "[1, 2]", [1, 2]),
    ],
)
def test_a_valid_answer_is_taken_with_its_lazy_iterator(
    tp: Any, output: str, items: list[int]
) -> None:
    value = allama.extract(MockProvider([output]), tp, REQUEST).value
    held: Any = {
        Order: lambda v: v.lines[0].parts[1],
        Either: lambda v: v.x["a"],
        Tree: lambda v: v.kids[0].kids[0].ids,
        Shelf: lambda v: v["ids"],
        Holder: lambda v: v.own.ids,
        Ids: lambda v: v.root,
    }.get(tp, lambda v: v.ids)(value)
    assert isinstance(held, Iterator)
    assert list(held) == items
    if tp is Holder:
        assert type(value.own) is Own  # the caller's class, not the check's


def test_a_streamed_extraction_checks_it_at_finish() -> None:
    output = '{"ids": ["one", "two"]}'
    with allama.extract_stream(MockProvider([output]), Batch, REQUEST) as opened:
        for _ in opened:
            pass
        with pytest.raises(ParseError) as caught:
            opened.finish()
    assert str(caught.value) == (
        PREFIX + 'at `ids[0]`: invalid type: string "one", expected an integer'
    )
    with allama.extract_stream(MockProvider(['{"ids": [3]}']), Batch, REQUEST) as opened:
        for _ in opened:
            pass
        assert list(opened.finish().value.ids) == [3]


def test_an_async_extraction_checks_it_too() -> None:
    async def run() -> ParseError:
        with pytest.raises(ParseError) as caught:
            await allama.aextract(MockProvider(['{"ids": [1, "x"]}']), Batch, REQUEST)
        return caught.value

    error = asyncio.run(run())
    assert (error.detail, error.path) == ('invalid type: string "x", expected an integer', "ids[1]")
