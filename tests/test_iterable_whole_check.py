"""An `Iterable` field's items are checked when the answer is read, by reading the answer a
second time with each `Iterable` read as a list. That whole reading now decides all the
checks a list gets, not only whether each item fits:

- two keys of a map that the type reads as one key (`"1"` and `"01"` to an `int`) inside an
  `Iterable` were merged silently, one value lost, under an exact record; they are a parse
  error, asked again, as in a `list`;
- a `Decimal` inside an `Iterable` was read through a float (digits lost, `1E-400` read as
  0, `1e400` refused); it gets the number written, as in a `list`, and the value is still
  the type's own lazy iterator;
- the check subclassed the caller's models: a base whose `__init_subclass__` requires a
  keyword made the check give up without a word (the bad item then raised in the
  caller's code), and a registry kept by `__init_subclass__` ended up holding allama's
  copy. No class of the caller's is subclassed now; a type whose whole reader cannot be
  built is refused with a `TypeError`, not read lazily without a word.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import InitVar
from decimal import Decimal
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, PrivateAttr, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass
from tests._native_wire import extract_through

import allama
from allama import ExtractionMode, Extractor, ParseError, SchemaEnforcement
from allama.batch import batch
from allama.extract import _validation
from allama.mock import MockProvider

REQUEST = allama.ChatRequest("gpt-4.1-mini").user("the rows")
SAME = "the keys `1` and `01` are the same key to the type in the object at `rows[0]`"


def _refused(tp: Any, output: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        Extractor(retries=0).extract(MockProvider([output]), tp, REQUEST)
    return caught.value


# Keys read as one inside an `Iterable`.


class Rows(BaseModel):
    rows: Iterable[dict[int, str]]


class Listed(BaseModel):
    rows: list[dict[int, str]]


class Cell(BaseModel):
    by_id: dict[int, str]


class Cells(BaseModel):
    rows: Iterable[Cell]


def test_keys_read_as_one_in_an_iterable_are_refused_as_in_a_list() -> None:
    for tp in (Listed, Rows):
        error = _refused(tp, '{"rows": [{"1": "a", "01": "b"}]}')
        assert (error.path, error.detail) == ("rows[0]", SAME)


def test_keys_read_as_one_in_an_iterable_are_asked_again() -> None:
    provider = MockProvider(['{"rows": [{"1": "a", "01": "b"}]}', '{"rows": [{"1": "a"}]}'])
    got = Extractor(retries=1).extract(provider, Rows, REQUEST)
    assert got.metadata.passes == 2
    assert SAME in (provider.requests[1].messages[-1].text() or "")
    assert isinstance(got.value.rows, Iterator) and not isinstance(got.value.rows, list)
    assert list(got.value.rows) == [{1: "a"}]


def test_keys_read_as_one_in_a_model_inside_an_iterable_are_refused() -> None:
    error = _refused(Cells, '{"rows": [{"by_id": {"2": "x"}}, {"by_id": {"1": "a", "+1": "b"}}]}')
    assert (error.path, error.detail) == (
        "rows[1].by_id",
        "the keys `1` and `+1` are the same key to the type in the object at `rows[1].by_id`",
    )
    ok = Extractor(retries=0).extract(
        MockProvider(['{"rows": [{"by_id": {"1": "a"}}]}']), Cells, REQUEST
    )
    assert [cell.by_id for cell in ok.value.rows] == [{1: "a"}]


@pytest.mark.parametrize(
    ("name", "enforcement"),
    [("openai", SchemaEnforcement.NOT_ENFORCED), ("gemini", SchemaEnforcement.APPROXIMATE)],
)
def test_keys_read_as_one_in_an_iterable_are_refused_through_the_wire(
    name: str, enforcement: SchemaEnforcement
) -> None:
    with pytest.raises(ParseError) as raised:
        extract_through(name, Rows, '{"rows": [{"1": "first", "01": "second"}]}')
    error = raised.value
    assert (error.path, error.detail) == ("rows[0]", SAME)
    assert (error.metadata.mode, error.metadata.enforcement) == (ExtractionMode.NATIVE, enforcement)


def test_keys_read_as_one_in_an_iterable_fail_a_batch_row() -> None:
    ledger = os.path.join(tempfile.mkdtemp(), "ledger.db")
    provider = MockProvider(['{"rows": [{"1": "a", "01": "b"}]}'])
    (row,) = batch(provider, Rows, ["a"], request=REQUEST, ledger=ledger)
    assert row.value is None
    assert row.failure is not None and row.failure.kind == "extraction_parse"


# Decimals inside an `Iterable`.


class Amounts(BaseModel):
    amounts: Iterable[Decimal]


class Mixed(BaseModel):
    prices: Iterable[float]
    amounts: Iterable[Decimal]


class Price(BaseModel):
    amount: Decimal


class Prices(BaseModel):
    rows: Iterable[Price]


def _value(tp: Any, output: str) -> Any:
    return Extractor(retries=0).extract(MockProvider([output]), tp, REQUEST).value


@pytest.mark.parametrize(
    ("output", "items"),
    [
        (
            '{"amounts": [0.12345678901234567890123, 1E-400, 2.5]}',
            [Decimal("0.12345678901234567890123"), Decimal("1E-400"), Decimal("2.5")],
        ),
        ('{"amounts": [1e400, -1E+999]}', [Decimal("1E+400"), Decimal("-1E+999")]),
    ],
)
def test_a_decimal_in_an_iterable_is_the_number_written(output: str, items: list[Decimal]) -> None:
    value = _value(Amounts, output)
    # The type's own iterator (not a list made of it), over the numbers as written.
    assert isinstance(value.amounts, Iterator) and not isinstance(value.amounts, list)
    got = list(value.amounts)
    assert got == items
    assert [str(each) for each in got] == [str(each) for each in items]


def test_a_float_beside_a_decimal_in_iterables_stays_a_float() -> None:
    value = _value(
        Mixed, '{"prices": [0.12345678901234567890123], "amounts": [0.12345678901234567890123]}'
    )
    assert list(value.prices) == [0.12345678901234568]
    assert [str(each) for each in value.amounts] == ["0.12345678901234567890123"]


def test_a_decimal_of_a_model_in_an_iterable_is_the_number_written() -> None:
    value = _value(Prices, '{"rows": [{"amount": 1E-400}, {"amount": 0.1000000000000000000001}]}')
    assert [str(row.amount) for row in value.rows] == ["1E-400", "0.1000000000000000000001"]


# The caller's classes are not subclassed.


class Tagged(BaseModel):
    def __init_subclass__(cls, *, tag: str, **kw: Any) -> None:
        super().__init_subclass__(**kw)


class Batch(Tagged, tag="batch"):
    ids: Iterable[int]


def test_a_base_that_requires_a_subclass_keyword_is_checked_and_asked_again() -> None:
    provider = MockProvider(['{"ids": [1, "x"]}', '{"ids": [1, 2]}'])
    got = Extractor(retries=1).extract(provider, Batch, REQUEST)
    assert got.metadata.passes == 2
    told = provider.requests[1].messages[-1].text() or ""
    assert 'at `ids[1]`: invalid type: string "x", expected an integer' in told
    assert list(got.value.ids) == [1, 2]


class Plugin(BaseModel):
    registry: ClassVar[dict[str, type]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        Plugin.registry[cls.__name__] = cls


class Plugged(Plugin):
    ids: Iterable[int]


class Shelf(BaseModel):
    plugged: Plugged


def test_a_registry_kept_by_init_subclass_holds_the_callers_class() -> None:
    got = allama.extract(MockProvider(['{"plugged": {"ids": [1, 2]}}']), Shelf, REQUEST)
    assert type(got.value.plugged) is Plugged
    assert list(got.value.plugged.ids) == [1, 2]
    with pytest.raises(ParseError):
        allama.extract(MockProvider(['{"plugged": {"ids": ["z"]}}']), Shelf, REQUEST)
    assert Plugin.registry == {"Plugged": Plugged}
    assert Plugin.__subclasses__() == [Plugged]
    assert Plugged.__subclasses__() == []
    assert Shelf.__subclasses__() == []


class Item(BaseModel):
    n: int
    tags: Iterable[str] = ()
    _doubled: int = PrivateAttr(default=0)

    def model_post_init(self, context: Any) -> None:
        self._doubled = self.n * 2

    def doubled(self) -> int:
        return self._doubled

    @model_validator(mode="after")
    def _small(self) -> Item:
        if self.doubled() > 10:
            raise ValueError(f"{self.n} doubled is over 10")
        return self


class Items(BaseModel):
    items: Iterable[Item]


@pydantic_dataclass
class Span:
    ids: Iterable[int]
    shift: InitVar[int] = 0

    def __post_init__(self, shift: int) -> None:
        if shift < 0:
            raise ValueError("a negative shift")


class Spans(BaseModel):
    spans: Iterable[Span]


def test_an_items_validators_run_on_the_callers_class_in_the_check() -> None:
    error = _refused(Items, '{"items": [{"n": 1}, {"n": 6}]}')
    assert (error.path, error.detail) == ("items[1]", "6 doubled is over 10")
    error = _refused(Items, '{"items": [{"n": 1, "tags": ["a", 2]}]}')
    assert (error.path, error.detail) == (
        "items[0].tags[1]",
        "invalid type: integer `2`, expected a string",
    )
    value = _value(Items, '{"items": [{"n": 1, "tags": ["a"]}, {"n": 5}]}')
    assert [(type(item), item.doubled(), list(item.tags)) for item in value.items] == [
        (Item, 2, ["a"]),
        (Item, 10, []),
    ]
    assert Item.__subclasses__() == []


def test_a_dataclass_post_init_runs_with_its_init_vars_in_the_check() -> None:
    error = _refused(Spans, '{"spans": [{"ids": [1], "shift": -1}]}')
    assert (error.path, error.detail) == ("spans[0]", "a negative shift")
    error = _refused(Spans, '{"spans": [{"ids": [1, "q"], "shift": 1}]}')
    assert (error.path, error.detail) == (
        "spans[0].ids[1]",
        'invalid type: string "q", expected an integer',
    )
    value = _value(Spans, '{"spans": [{"ids": [3], "shift": 1}]}')
    assert [(type(span), list(span.ids)) for span in value.spans] == [(Span, [3])]
    assert Span.__subclasses__() == []


def test_a_type_whose_whole_reader_cannot_be_built_is_refused_not_read_lazily(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Unbuilt(BaseModel):
        ids: Iterable[int]

    def refuse(schema: Any) -> Any:
        raise ValueError("refused for the test")

    monkeypatch.setattr(_validation, "SchemaValidator", refuse)
    provider = MockProvider(['{"ids": [1, "x"]}'])
    with pytest.raises(TypeError) as raised:
        allama.extract(provider, Unbuilt, REQUEST)
    assert str(raised.value) == (
        "allama cannot check the items of an `Iterable` in `Unbuilt` when the answer is read "
        "(ValueError: refused for the test); use a `list` in its place"
    )
    assert provider.requests == []  # refused before anything was sent
