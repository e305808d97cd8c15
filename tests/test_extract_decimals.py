"""A `Decimal` gets the number the output wrote, not the float nearest it: pydantic reads a
JSON number with a fraction or an exponent through a float."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field, TypeAdapter

import allama
from allama.extract._decimals import MOST_TRIED, lossy_numbers, only_decimals_differ, quoted
from allama.mock import MockProvider

REQUEST = allama.ChatRequest("gpt-4.1-mini").user("the amounts")


class Transfer(BaseModel):
    wei: Decimal
    fee: Decimal
    items: list[Decimal]


class Mixed(BaseModel):
    wei: Decimal
    rate: float
    note: Any
    maybe: str | float


def _extract(tp: Any, output: str) -> Any:
    return allama.extract(MockProvider([output]), tp, REQUEST).value


def test_a_decimal_gets_every_digit_written() -> None:
    output = '{"wei": 1.234567890123456789, "fee": 1E-400, "items": [0.1, 123456789.123456789]}'
    assert _extract(Transfer, output) == Transfer(
        wei=Decimal("1.234567890123456789"),
        fee=Decimal("1E-400"),
        items=[Decimal("0.1"), Decimal("123456789.123456789")],
    )
    # (pydantic alone, for the record of why)
    assert Transfer.model_validate_json(output).wei == Decimal("1.2345678901234567")


def test_numbers_that_go_elsewhere_than_a_decimal_are_read_as_pydantic_reads_them() -> None:
    # A float, an `Any` and a union with a string never see a string the model did not write.
    long = "1.234567890123456789"
    output = f'{{"wei": {long}, "rate": {long}, "note": {long}, "maybe": {long}}}'
    value = _extract(Mixed, output)
    assert value == Mixed(wei=Decimal(long), rate=float(long), note=float(long), maybe=float(long))
    assert type(value.note) is float and type(value.maybe) is float


def test_short_numbers_and_integers_are_read_once() -> None:
    assert lossy_numbers('{"a": 0.1, "b": 12345678901234567890123, "c": -7, "d": 1.5e3}') == []
    assert lossy_numbers('{"1.234567890123456789": "1.234567890123456789"}') == []
    raw = '[1.234567890123456789, 2, "x", 1E-400]'
    spans = lossy_numbers(raw)
    assert [raw[a:b] for a, b in spans] == ["1.234567890123456789", "1E-400"]
    assert quoted(raw, spans) == '["1.234567890123456789", 2, "x", "1E-400"]'


def test_past_the_numbers_tried_one_by_one_the_decimals_are_pydantics() -> None:
    class Many(BaseModel):
        rates: list[float]
        wei: Decimal

    long = "1.234567890123456789"
    output = json.dumps({"rates": [0.5] * 2, "wei": 0}).replace("0.5", long)
    output = output.replace('"wei": 0', f'"wei": {long}')
    assert _extract(Many, output).wei == Decimal(long)
    crowded = json.dumps({"rates": [0.5] * (MOST_TRIED + 1), "wei": 0}).replace("0.5", long)
    crowded = crowded.replace('"wei": 0', f'"wei": {long}')
    assert _extract(Many, crowded).wei == Decimal("1.2345678901234567")


def test_only_decimals_differ_compares_what_floats_lose() -> None:
    assert only_decimals_differ(
        {"a": [Decimal("1.2345678901234567")]}, {"a": [Decimal("1.234567890123456789")]}
    )
    assert not only_decimals_differ({"a": 1.5}, {"a": "1.5"})
    assert not only_decimals_differ({"a": Decimal("1.5")}, {"a": Decimal("2.5")})
    assert not only_decimals_differ([Decimal(1)], [Decimal(1), Decimal(1)])


_NUMERALS = st.from_regex(r"\A-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?\Z")
"""JSON numbers of up to 25 digits a side, with exponents up to 999."""


@given(st.lists(st.one_of(_NUMERALS, st.text().map(json.dumps)), max_size=8))
def test_exactly_the_numbers_a_decimal_would_lose_are_quoted(tokens: list[str]) -> None:
    raw = "[" + ", ".join(tokens) + "]"
    again = json.loads(quoted(raw, lossy_numbers(raw)), parse_float=Decimal, parse_int=Decimal)
    reader: TypeAdapter[Decimal] = TypeAdapter(Decimal)
    for token, read in zip(tokens, again, strict=True):
        if token.startswith('"'):
            assert read == json.loads(token)  # strings untouched
        elif isinstance(read, str):  # quoted: pydantic's reading is another number
            assert Decimal(read) == Decimal(token) and read == token
            lost = reader.validate_json(token) if abs(Decimal(token).adjusted()) < 308 else None
            assert lost != Decimal(token)
        else:
            assert read == Decimal(token) == reader.validate_json(token)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_streamed_extraction_gets_the_same_decimal(flavour: str) -> None:
    from allama.mock import MockStreamingProvider

    output = '{"wei": 1.234567890123456789, "fee": 2, "items": []}'
    provider = MockStreamingProvider.with_text(output)
    if flavour == "sync":
        with allama.extract_stream(provider, Transfer, REQUEST) as stream:
            value = stream.finish().value
    else:
        import asyncio

        async def main() -> Transfer:
            stream = await allama.aextract_stream(provider, Transfer, REQUEST)
            return (await stream.finish()).value

        value = asyncio.run(main())
    assert value.wei == Decimal("1.234567890123456789")


class Probability(BaseModel):
    p: Decimal = Field(le=1)


class Tiny(BaseModel):
    x: Decimal = Field(gt=0)


class Money(BaseModel):
    amount: Decimal = Field(max_digits=5, decimal_places=2)


def test_a_decimals_bounds_are_checked_on_the_number_written() -> None:
    # The float nearest it keeps the bound the number breaks, or breaks one it keeps.
    with pytest.raises(allama.ParseError) as caught:
        _extract(Probability, '{"p": 1.00000000000000001}')
    assert caught.value.detail == (
        "invalid value: number `1.00000000000000001`, expected less than or equal to 1"
    )
    with pytest.raises(allama.ParseError, match="no more than 5 digits in total"):
        _extract(Money, '{"amount": 1.2300000000000000001}')
    assert _extract(Tiny, '{"x": 1E-400}') == Tiny(x=Decimal("1E-400"))
    with pytest.raises(allama.ParseError, match="expected greater than 0"):
        _extract(Tiny, '{"x": 0}')  # (a number that breaks it as written still does)


class Labelled(BaseModel):
    p: Decimal = Field(ge=0, lt=1)
    label: str = "none"
    rate: float = 0.0


def test_a_bound_kept_as_written_beside_a_stand_in_null_or_a_long_float() -> None:
    # A strict mode's stand-in `null` (removed so the default applies) and a long number
    # that goes to a float do not hide that the `Decimal` as written keeps its bound.
    assert _extract(Labelled, '{"p": 0.99999999999999999999, "label": null}') == Labelled(
        p=Decimal("0.99999999999999999999")
    )
    long = "0.1234567890123456789"
    assert _extract(Tiny, '{"x": 1E-400}') == Tiny(x=Decimal("1E-400"))
    assert _extract(Labelled, f'{{"p": 0.99999999999999999999, "rate": {long}}}') == Labelled(
        p=Decimal("0.99999999999999999999"), rate=float(long)
    )
    with pytest.raises(allama.ParseError) as caught:
        _extract(Labelled, f'{{"p": 1.00000000000000000001, "label": null, "rate": {long}}}')
    assert caught.value.detail == (
        "invalid value: number `1.00000000000000000001`, expected less than 1"
    )


def test_a_decimal_with_a_serializer_of_its_own_or_in_a_set_gets_every_digit() -> None:
    from typing import Annotated

    from pydantic import PlainSerializer

    class Invoice(BaseModel):
        total: Annotated[Decimal, PlainSerializer(str)]

    class Rates(BaseModel):
        rates: frozenset[Decimal]

    long = "1.234567890123456789"
    assert _extract(Invoice, f'{{"total": {long}}}').total == Decimal(long)
    assert _extract(Rates, f'{{"rates": [{long}, 2.5]}}').rates == frozenset(
        {Decimal(long), Decimal("2.5")}
    )
