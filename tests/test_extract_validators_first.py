"""A type whose validators run before its fields' validation (`mode="before"` or `"wrap"`)
reads the JSON pydantic reads: its dates, decimals, tuples, sets, bytes and int keys are
not held to the strict rules for Python objects, and strictness of the JSON still holds."""

from __future__ import annotations

import asyncio
import datetime
import re
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    WrapValidator,
    field_validator,
    model_validator,
)

import allama
from allama.mock import MockProvider

REQUEST = allama.ChatRequest("gpt-4.1-mini").user("the invoice")
CALLS: list[str] = []


class Invoice(BaseModel):
    number: str
    issued: datetime.date
    total: Decimal
    lines: tuple[int, int]
    tags: set[str]
    raw: bytes
    by_id: dict[int, str]

    @model_validator(mode="before")
    @classmethod
    def legacy_number(cls, data: Any) -> Any:
        CALLS.append("before")
        if isinstance(data, dict) and "no" in data:
            data = {**data, "number": data.pop("no")}
        return data


OUTPUT = (
    '{"number": "A1", "issued": "2024-01-02", "total": 12.5, "lines": [1, 2],'
    ' "tags": ["x"], "raw": "YWI=", "by_id": {"7": "seven"}}'
)


def _extract(tp: Any, *outputs: str, retries: int = 0, provider: MockProvider | None = None) -> Any:
    extractor = allama.Extractor(retries=retries)
    return extractor.extract(provider or MockProvider(list(outputs)), tp, REQUEST)


def test_a_before_model_validator_reads_the_json_pydantic_reads() -> None:
    CALLS.clear()
    result = _extract(Invoice, OUTPUT)
    assert result.value == Invoice.model_validate_json(OUTPUT)
    assert result.value.issued == datetime.date(2024, 1, 2)
    assert result.value.lines == (1, 2)
    assert result.value.by_id == {7: "seven"}
    assert result.metadata.passes == 1
    assert "before" in CALLS  # the caller's validator ran


def test_async_reads_it_the_same() -> None:
    extractor = allama.Extractor()
    result = asyncio.run(extractor.aextract(MockProvider([OUTPUT]), Invoice, REQUEST))
    assert result.value == Invoice.model_validate_json(OUTPUT)


class Wrapped(BaseModel):
    when: datetime.datetime
    price: Annotated[Decimal, BeforeValidator(lambda v: v)]
    count: int
    due: Annotated[datetime.date, WrapValidator(lambda v, handler: handler(v))]

    @model_validator(mode="wrap")
    @classmethod
    def around(cls, data: Any, handler: Any) -> Any:
        return handler(data)


def test_wrap_and_field_before_validators_read_the_json_too() -> None:
    output = '{"when": "2024-01-02T03:04:05Z", "price": 1.5, "count": 3, "due": "2024-02-01"}'
    value = _extract(Wrapped, output).value
    assert value.price == Decimal("1.5")
    assert value.when == datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def test_output_that_is_not_strict_json_of_the_type_is_still_refused() -> None:
    # `"3"` for an int: the failure names it, not the validators' Python objects.
    output = '{"when": "2024-01-02T03:04:05Z", "price": 1.5, "count": "3", "due": "2024-02-01"}'
    good = '{"when": "2024-01-02T03:04:05Z", "price": 1.5, "count": 3, "due": "2024-02-01"}'
    provider = MockProvider([output, good])
    result = _extract(Wrapped, retries=1, provider=provider)
    assert result.value.count == 3
    assert result.metadata.passes == 2
    told = provider.requests[1].messages[-1].text()
    assert "`count`" in told and "Decimal" not in told and "datetime" not in told


def test_a_validator_that_refuses_still_refuses() -> None:
    class Positive(BaseModel):
        issued: datetime.date
        amount: Annotated[Decimal, Field(gt=0)]

        @field_validator("issued", mode="before")
        @classmethod
        def not_in_2020(cls, value: Any) -> Any:
            if isinstance(value, str) and value.startswith("2020"):
                raise ValueError("no invoices from 2020")
            return value

    with pytest.raises(allama.ParseError, match="no invoices from 2020"):
        _extract(Positive, '{"issued": "2020-05-01", "amount": 1.5}')
    with pytest.raises(allama.ParseError, match="greater than 0"):
        _extract(Positive, '{"issued": "2021-05-01", "amount": -1.5}')
    assert _extract(Positive, '{"issued": "2021-05-01", "amount": 1.5}').value.amount == Decimal(
        "1.5"
    )


class Dollars(BaseModel):
    cents: Annotated[int, BeforeValidator(lambda v: round(float(v) * 100))]
    issued: datetime.date


def test_a_validator_that_reads_what_its_schema_does_not_show_still_works() -> None:
    # The model writes dollars (a float for an int the validator makes of it) beside a
    # date: the strict reading's only failure is the date's Python rule.
    value = _extract(Dollars, '{"cents": 12.34, "issued": "2024-01-02"}').value
    assert (value.cents, value.issued) == (1234, datetime.date(2024, 1, 2))
    with pytest.raises(allama.ParseError, match="at `issued`"):
        _extract(Dollars, '{"cents": 12.34, "issued": 20240102}')


class Pairs(BaseModel):
    pair: tuple[int, int]
    flags: set[bool]
    day: datetime.date

    @model_validator(mode="before")
    @classmethod
    def untouched(cls, data: Any) -> Any:
        return data


@pytest.mark.parametrize(
    ("output", "where"),
    [
        ('{"pair": ["31", 2], "flags": [true], "day": "2024-01-02"}', "at `pair[0]`"),
        ('{"pair": [1, 2], "flags": ["yes"], "day": "2024-01-02"}', "at `flags[0]`"),
        ('{"pair": [1, 2], "flags": [true], "day": "2024-01-02T00:00:00"}', "at `day`"),
    ],
)
def test_what_pythons_rules_hide_is_still_read_strictly(output: str, where: str) -> None:
    # A tuple's or a set's items, a date's text: pydantic's rules for Python objects fail
    # the container whole, so the items are read as JSON by the type without its validator.
    with pytest.raises(allama.ParseError, match=re.escape(where)):
        _extract(Pairs, output)
    good = '{"pair": [1, 2], "flags": [true], "day": "2024-01-02"}'
    assert _extract(Pairs, good).value.pair == (1, 2)
