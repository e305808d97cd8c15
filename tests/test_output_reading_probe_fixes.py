"""Reading an output, as probes of a real local engine found it wrong: a key written twice
among a model's extra keys was kept once (the count of kept keys counted the extras twice),
a `Decimal` written too large for a float was refused as a float's overflow, and what
`exact` enforcement still lets through is a parse error, never a value."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

import allama
from allama import ParseError
from allama.extract import _validation
from allama.extract._kept import kept_keys
from allama.mock import MockProvider

REQUEST = allama.ChatRequest("gpt-4.1-mini").user("the record")


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: int


class Outer(BaseModel):
    name: str
    inner: Open
    rows: list[Open] = []


class Closed(BaseModel):
    id: int


class Counts(BaseModel):
    counts: dict[str, int]


class Aliased(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: int = Field(0, alias="ID")


def _extract(tp: Any, output: str) -> Any:
    return allama.extract(MockProvider([output]), tp, REQUEST).value


def _refusal(tp: Any, output: str) -> tuple[str, str | None]:
    with pytest.raises(ParseError) as raised:
        allama.extract(MockProvider([output]), tp, REQUEST)
    return raised.value.detail, raised.value.path


@pytest.mark.parametrize(
    ("tp", "output", "detail", "path"),
    [
        (Open, '{"id": 1, "k": 2, "k": 3}', "the key `k` appears twice in the object", None),
        (
            Outer,
            '{"name": "a", "inner": {"id": 1, "k": 2, "k": 3}}',
            "the key `k` appears twice in the object at `inner`",
            "inner",
        ),
        (
            Outer,
            '{"name": "a", "inner": {"id": 1}, "rows": [{"id": 2, "k": [1], "k": [1]}]}',
            "the key `k` appears twice in the object at `rows[0]`",
            "rows[0]",
        ),
        # As a closed model and a map refuse it.
        (Closed, '{"id": 1, "id": 2}', "the key `id` appears twice in the object", None),
        (
            Counts,
            '{"counts": {"k": 2, "k": 3}}',
            "the key `k` appears twice in the object at `counts`",
            "counts",
        ),
        # A field's name freed by its alias, written twice as an extra key.
        (
            Aliased,
            '{"ID": 1, "id": 2, "id": 3}',
            "the key `id` appears twice in the object",
            None,
        ),
    ],
)
def test_a_key_written_twice_among_extra_keys_is_refused(
    tp: Any, output: str, detail: str, path: str | None
) -> None:
    assert _refusal(tp, output) == (detail, path)


def test_extra_keys_written_once_are_kept_and_counted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    careful: list[str] = []
    read = _validation.read

    def spied(raw: str) -> Any:
        careful.append(raw)
        return read(raw)

    monkeypatch.setattr(_validation, "read", spied)
    value = _extract(Outer, '{"name": "a", "inner": {"id": 1, "k": 2, "more": {"x": 1}}}')
    assert value == Outer(name="a", inner=Open(id=1, k=2, more={"x": 1}))
    assert value.inner.model_extra == {"k": 2, "more": {"x": 1}}
    # Every key the text wrote, once: the count matches the colons and the one parse stands.
    assert kept_keys(value) == 6
    assert kept_keys(Open.model_validate_json('{"id": 1, "k": 2}')) == 2
    assert careful == []
    # The alias's case, counted short (the careful reading decides) and read right.
    aliased = _extract(Aliased, '{"ID": 1, "id": 2}')
    assert (aliased.id, aliased.model_extra) == (1, {"id": 2})


class Reading(BaseModel):
    x: float


class Free(BaseModel):
    s: str


@pytest.mark.parametrize(
    ("tp", "output", "detail", "path"),
    [
        # What a grammar held to the schema still lets a model write (README, enforcement).
        (
            Reading,
            '{"x": 1e999}',
            "the number `1e999` is too large for a floating point value",
            "x",
        ),
        (
            Counts,
            '{"counts": {"x": 5, "x": 5}}',
            "the key `x` appears twice in the object at `counts`",
            "counts",
        ),
    ],
)
def test_what_exact_enforcement_lets_through_is_a_parse_error(
    tp: Any, output: str, detail: str, path: str | None
) -> None:
    assert _refusal(tp, output) == (detail, path)


# A number too large for a float, where a `Decimal` goes (README, "What you get back").


class Money(BaseModel):
    amount: Decimal


class Capped(BaseModel):
    amount: Annotated[Decimal, Field(le=100)]


class Ledger(BaseModel):
    rate: float
    entries: list[Decimal]
    by_name: dict[str, Decimal | None]


class StrFirst(BaseModel):
    amount: str | Decimal


class DecimalFirst(BaseModel):
    amount: Decimal | str


class FloatFirst(BaseModel):
    amount: float | Decimal


class FloatSecond(BaseModel):
    amount: Decimal | float


class IntOrDecimal(BaseModel):
    amount: int | Decimal


class Loose(BaseModel):
    amount: Any


def test_a_decimal_too_large_for_a_float_is_the_number_written() -> None:
    assert _extract(Money, '{"amount": 1e999}') == Money(amount=Decimal("1E+999"))
    assert _extract(Money, '{"amount": -1.5E+400}') == Money(amount=Decimal("-1.5E+400"))
    # The same as the numeral in a string, which pydantic reads exactly.
    assert _extract(Money, '{"amount": "1e999"}') == Money(amount=Decimal("1E+999"))
    output = '{"rate": 0.5, "entries": [1e999, 0.1, 2E-400], "by_name": {"a": -3e500, "b": null}}'
    assert _extract(Ledger, output) == Ledger(
        rate=0.5,
        entries=[Decimal("1E+999"), Decimal("0.1"), Decimal("2E-400")],
        by_name={"a": Decimal("-3E+500"), "b": None},
    )
    # (pydantic alone, for the record of why: the float it reads is infinite)
    with pytest.raises(ValidationError) as raised:
        Money.model_validate_json('{"amount": 1e999}')
    assert raised.value.errors()[0]["type"] == "finite_number"


def test_a_decimal_too_large_for_a_float_has_its_bounds_checked_as_written() -> None:
    assert _refusal(Capped, '{"amount": 1e999}') == (
        "invalid value: number `1e999`, expected less than or equal to 100",
        "amount",
    )
    assert _extract(Capped, '{"amount": -1e999}') == Capped(amount=Decimal("-1E+999"))


@pytest.mark.parametrize(
    ("tp", "output", "expected"),
    [
        # A union that reads the numeral as a `Decimal` and a number as a `Decimal` too.
        (DecimalFirst, '{"amount": 1e999}', DecimalFirst(amount=Decimal("1E+999"))),
        (IntOrDecimal, '{"amount": 1e999}', IntOrDecimal(amount=Decimal("1E+999"))),
        # Beside it, a float too large for a float is still refused.
        (Ledger, '{"rate": 1e999, "entries": [], "by_name": {}}', ("rate", "1e999")),
        # A number goes to a float first: refused as pydantic reads it (infinity).
        (FloatFirst, '{"amount": 1e999}', ("amount", "1e999")),
        (FloatSecond, '{"amount": 2E+400}', ("amount", "2E+400")),
        # A numeral in a string goes to `str` first, where pydantic refuses the number.
        (StrFirst, '{"amount": 1e999}', ("amount", "1e999")),
        (Loose, '{"amount": 1e999}', ("amount", "1e999")),
    ],
)
def test_a_number_too_large_for_a_float_is_a_decimal_only_where_a_decimal_reads_it(
    tp: Any, output: str, expected: Any
) -> None:
    if isinstance(expected, BaseModel):
        assert _extract(tp, output) == expected
        return
    path, number = expected
    assert _refusal(tp, output) == (
        f"the number `{number}` is too large for a floating point value",
        path,
    )
