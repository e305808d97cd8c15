"""The test provider's `multipleOf` as the reader of the value judges it: pydantic's `float`
(a tolerance of its own), pydantic's `Decimal` (exact decimal arithmetic), and for a schema
without a type, a value jsonschema's binary floats and exact arithmetic both take where
there is one."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema.validators import validator_for
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, create_model

import allama
from allama import ChatRequest
from allama.mock import TestProvider, value_for_schema


def _extracted(model: type[BaseModel]) -> Any:
    return allama.extract(TestProvider(), model, ChatRequest("m").user("x")).value


# The reviewer's cases


class Rating(BaseModel):
    score: Annotated[float, Field(ge=0.6, le=0.7, multiple_of=0.1)]


class Rate(BaseModel):
    vat: Annotated[Decimal, Field(ge=Decimal("0.3"), le=Decimal("0.3"), multiple_of=Decimal("0.1"))]


class Big(BaseModel):
    amount: Annotated[
        Decimal,
        Field(gt=Decimal("1e15"), lt=Decimal("1000000000000003.2"), multiple_of=Decimal("0.07")),
    ]


class Tiny(BaseModel):
    """No float between the bounds is a multiple: only the decimal's numeral string is."""

    amount: Annotated[
        Decimal,
        Field(gt=Decimal("1e15"), lt=Decimal("1000000000000000.2"), multiple_of=Decimal("0.03")),
    ]


def test_a_float_range_pydantic_satisfies_gets_its_multiple() -> None:
    # 0.6 / 0.1 is 5.999999999999999 in binary floats; pydantic takes 0.6.
    assert _extracted(Rating) == Rating(score=0.6)


def test_a_decimal_range_of_one_multiple_gets_it() -> None:
    assert _extracted(Rate) == Rate(vat=Decimal("0.3"))


def test_a_large_decimal_is_an_exact_multiple() -> None:
    # 1000000000000000.1 was written: a multiple of 0.07 to binary floats, not to a Decimal.
    value = _extracted(Big)
    assert value == Big(amount=Decimal("1000000000000001"))
    assert value.amount % Decimal("0.07") == 0


def test_a_decimal_no_float_can_hold_is_written_as_its_numeral() -> None:
    assert _extracted(Tiny) == Tiny(amount=Decimal("1000000000000000.02"))


def test_a_schema_without_a_type_prefers_a_multiple_every_reader_takes() -> None:
    # 0.6 and 0.7 are no multiples of 0.1 to jsonschema: 0.8 is, to every reader.
    assert value_for_schema({"type": "number", "minimum": 0.6, "multipleOf": 0.1}) == 0.8
    # Where jsonschema takes none, the value pydantic and exact arithmetic take.
    narrow = {"type": "number", "minimum": 0.6, "maximum": 0.7, "multipleOf": 0.1}
    assert value_for_schema(narrow) == 0.6


# Sweeps over ranges and steps

_FLOAT_STEPS = [0.1, 0.05, 0.01, 0.2, 0.25, 0.3, 0.07, 0.001, 0.003, 1e-05, 0.7, 1.1, 3.0, 0.33]
_DECIMAL_STEPS = ["0.1", "0.05", "0.01", "0.2", "0.25", "0.3", "0.07", "0.001", "1e-05", "1.1"]


def _float_probes(low: float, high: float, step: float) -> set[float]:
    """Floats in [low, high] a reader may take: the bounds, the floats nearest the exact
    multiples and their neighbours, the products binary floats make, the floats above low."""
    unit = Fraction(repr(step))
    first = math.ceil(Fraction(low) / unit)
    last = math.floor(Fraction(high) / unit)
    probes = {low, high}
    for k in range(first - 1, min(last + 2, first + 50)):
        for near in (float(unit * k), float(k) * step):
            probes |= {near, math.nextafter(near, math.inf), math.nextafter(near, -math.inf)}
    point = low
    for _ in range(20):
        probes.add(point)
        point = math.nextafter(point, math.inf)
    return {p for p in probes if low <= p <= high}


@st.composite
def _float_ranges(draw: st.DrawFn) -> tuple[float, float, float]:
    step = draw(st.sampled_from(_FLOAT_STEPS))
    magnitude = draw(st.sampled_from([1.0, 100.0, 1e4, 1e8, 1e12, 1e15]))
    low = float(f"{draw(st.floats(-magnitude, magnitude)):.{draw(st.integers(0, 6))}f}")
    span = draw(st.sampled_from([0.0, step / 2, step, 3 * step]) | st.floats(0, 5 * step))
    return low, low + span, step


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_float_ranges())
def test_a_satisfiable_float_range_gets_a_value_pydantic_accepts(
    bounds: tuple[float, float, float],
) -> None:
    low, high, step = bounds
    kind = Annotated[float, Field(ge=low, le=high, multiple_of=step)]
    adapter = TypeAdapter(kind)
    assume(any(adapter.validator.isinstance_python(p) for p in _float_probes(low, high, step)))
    model = create_model("Ranged", x=(kind, ...))
    value = _extracted(model).x
    assert adapter.validate_python(value) == value


@st.composite
def _decimal_ranges(draw: st.DrawFn) -> tuple[Decimal, Decimal, Decimal, bool, bool]:
    step = Decimal(draw(st.sampled_from(_DECIMAL_STEPS)))
    multiple = draw(st.integers(-100, 1000) | st.integers(0, 10**6) | st.integers(10**12, 10**17))
    low = step * multiple
    high = low + step * draw(st.sampled_from([0, 0, 1, 2, 5]))
    # The schema writes a decimal's bounds as JSON numbers: only those a float holds.
    assume(all(Decimal(repr(float(bound))) == bound for bound in (low, high)))
    return low, high, step, draw(st.booleans()), draw(st.booleans())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_decimal_ranges())
def test_a_satisfiable_decimal_range_gets_an_exact_multiple(
    bounds: tuple[Decimal, Decimal, Decimal, bool, bool],
) -> None:
    low, high, step, above, below = bounds
    limits = {"gt" if above else "ge": low, "lt" if below else "le": high}
    kind = Annotated[Decimal, Field(multiple_of=step, **limits)]
    adapter = TypeAdapter(kind)
    # Pydantic accepts some multiple in the range: the bounds, or the numeral past one.
    numerals = [low, high, low + step, high - step]
    satisfiable = False
    for numeral in numerals:
        try:
            adapter.validate_python(numeral)
        except ValidationError:
            continue
        satisfiable = True
    assume(satisfiable)
    value = _extracted(create_model("Ranged", x=(kind, ...))).x
    assert adapter.validate_python(value) == value
    assert value % step == 0
    assert (low < value if above else low <= value) and (value < high if below else value <= high)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_float_ranges())
def test_a_schema_without_a_type_keeps_a_value_jsonschema_and_exact_arithmetic_take(
    bounds: tuple[float, float, float],
) -> None:
    low, high, step = bounds
    schema = {"type": "number", "minimum": low, "maximum": high, "multipleOf": step}
    checker = validator_for(schema)(schema)
    pydantic_float = TypeAdapter(Annotated[float, Field(multiple_of=step)]).validator
    unit = Fraction(Decimal(repr(step)))

    def exact(number: float) -> bool:
        return Fraction(Decimal(repr(number))) % unit == 0

    # Where a value jsonschema, exact arithmetic and pydantic's float all take exists...
    assume(
        any(
            checker.is_valid(p) and exact(p) and pydantic_float.isinstance_python(p)
            for p in _float_probes(low, high, step)
        )
    )
    value = value_for_schema(schema)
    # ...the value is one jsonschema and exact arithmetic take.
    assert checker.is_valid(value), value
    assert isinstance(value, (int, float)) and exact(float(value)), value
