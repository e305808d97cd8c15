"""Decimals read from JSON numbers without going through a float.

pydantic reads a JSON number with a fraction or an exponent as a float before it makes a
`Decimal` of it, so `1.234567890123456789` becomes `Decimal('1.2345678901234567')` and
`1E-400` becomes `Decimal('0')`: a value other than the one written, with nothing to say
so. For a type that holds a `Decimal`, an output with such a number is read a second time,
with each of those numbers written as a numeral in a string (which a `Decimal` reads
exactly); that reading is kept only where it differs from the first in `Decimal`s alone,
each the same number as a float, so that a float field, a union or an `Any` never sees a
string the model did not write. Where some of the numbers go to floats (which refuse a
string), each is tried on its own.

A number too large for a float (`1e999`) is refused as one, as strict JSON reading refuses
it, unless a `Decimal` is where it goes: read as a numeral in a string, it is a `Decimal`
in a value otherwise the same, but for its `Decimal`s, as the one read with a float near the
largest in its place, one for each number (a float, a string or anything else there says
no).
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

__all__ = [
    "MOST_TRIED",
    "lossy_numbers",
    "only_decimals_differ",
    "quoted",
    "same_but_decimals",
    "stood_in",
    "too_large",
]

_TOKENS = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?', re.DOTALL
)
"""A JSON string, or a JSON number (the only tokens of valid JSON with digits in them)."""

_AS_DECIMAL: TypeAdapter[Decimal] = TypeAdapter(Decimal)

MOST_TRIED = 32
"""Numbers tried one by one where reading them all as numerals fails (some go to a float):
past this many, an output's `Decimal`s are read as pydantic reads them."""


def _read_exactly(numeral: str) -> bool:
    """Whether pydantic's `Decimal` of the JSON number `numeral` is the number written."""
    try:
        return _AS_DECIMAL.validate_json(numeral) == Decimal(numeral)
    except (ValidationError, InvalidOperation):
        return False


def lossy_numbers(raw: str) -> list[tuple[int, int]]:
    """Where `raw` (valid JSON) writes a number a `Decimal` would not read exactly (start
    and end of each). Integers are read exactly, however long."""
    found: list[tuple[int, int]] = []
    for match in _TOKENS.finditer(raw):
        token = match.group()
        if token[0] == '"' or token.isdigit() or (token[0] == "-" and token[1:].isdigit()):
            continue
        if not _read_exactly(token):
            found.append(match.span())
    return found


def quoted(raw: str, spans: list[tuple[int, int]]) -> str:
    """`raw` with the numbers at `spans` (in order) written as strings."""
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces += (raw[last:start], '"', raw[start:end], '"')
        last = end
    pieces.append(raw[last:])
    return "".join(pieces)


def too_large(raw: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The numbers at `spans` of `raw` with a fraction or an exponent too large for a float
    (what strict JSON reading refuses as one; a long integer it reads)."""
    return [
        (start, end)
        for start, end in spans
        if any(mark in raw[start:end] for mark in ".eE") and math.isinf(float(raw[start:end]))
    ]


def stood_in(raw: str, spans: list[tuple[int, int]]) -> str:
    """`raw` with the numbers at `spans` (in order, each too large for a float) written as
    floats near the largest of their sign: a number each place reads as it reads numbers.
    Each number written is given a float of its own (the same number, the same float), one
    no other number of `raw` is, so that a set holding two of them holds two stand-ins."""
    taken = {float(token) for token in _TOKENS.findall(raw) if token[0] != '"'}
    given: dict[Decimal, str] = {}
    size = sys.float_info.max
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        number = Decimal(raw[start:end])
        stand_in = given.get(number)
        if stand_in is None:
            while size in taken or -size in taken:
                size = math.nextafter(size, 0.0)
            stand_in = given[number] = repr(-size if number < 0 else size)
            size = math.nextafter(size, 0.0)
        pieces += (raw[last:start], stand_in)
        last = end
    pieces.append(raw[last:])
    return "".join(pieces)


def only_decimals_differ(first: Any, second: Any) -> bool:
    """Whether two readings of an output differ in `Decimal`s alone, each pair the same
    number as a float: the second changed only what floats lose. The values themselves
    are walked (a model's fields, a dataclass's, containers, sets by their order), not
    their dumps, which a serializer of the type's own may write as anything."""
    return _alike(first, second, _same_float)


def same_but_decimals(first: Any, second: Any) -> bool:
    """Whether two readings of an output are the same but for the values of their
    `Decimal`s (each a `Decimal` in both), walked as `only_decimals_differ` walks them."""
    return _alike(first, second, _any_decimal)


def _same_float(first: Decimal, second: Decimal) -> bool:
    return bool(first == second) or float(first) == float(second)


def _any_decimal(first: Decimal, second: Decimal) -> bool:
    return True


def _alike(first: Any, second: Any, decimals: Callable[[Decimal, Decimal], bool]) -> bool:
    if type(first) is not type(second):
        return False
    if isinstance(first, Decimal):
        return decimals(first, second)
    if isinstance(first, BaseModel):
        return _alike(vars(first), vars(second), decimals) and _alike(
            first.__pydantic_extra__, second.__pydantic_extra__, decimals
        )
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        return all(
            _alike(getattr(first, f.name), getattr(second, f.name), decimals)
            for f in dataclasses.fields(first)
        )
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(
            _alike(value, second[key], decimals) for key, value in first.items()
        )
    if isinstance(first, list | tuple):
        return len(first) == len(second) and all(
            _alike(a, b, decimals) for a, b in zip(first, second, strict=True)
        )
    if isinstance(first, set | frozenset) and first != second:
        if len(first) != len(second) or not all(isinstance(x, Decimal) for x in (*first, *second)):
            return False
        return all(
            _alike(a, b, decimals) for a, b in zip(sorted(first), sorted(second), strict=True)
        )
    return bool(first == second)
