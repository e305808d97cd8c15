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
"""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

__all__ = ["MOST_TRIED", "lossy_numbers", "only_decimals_differ", "quoted"]

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


def only_decimals_differ(first: Any, second: Any) -> bool:
    """Whether two readings of an output differ in `Decimal`s alone, each pair the same
    number as a float: the second changed only what floats lose. The values themselves
    are walked (a model's fields, a dataclass's, containers, sets by their order), not
    their dumps, which a serializer of the type's own may write as anything."""
    if type(first) is not type(second):
        return False
    if isinstance(first, Decimal):
        return bool(first == second) or float(first) == float(second)
    if isinstance(first, BaseModel):
        return only_decimals_differ(vars(first), vars(second)) and only_decimals_differ(
            first.__pydantic_extra__, second.__pydantic_extra__
        )
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        return all(
            only_decimals_differ(getattr(first, f.name), getattr(second, f.name))
            for f in dataclasses.fields(first)
        )
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(
            only_decimals_differ(value, second[key]) for key, value in first.items()
        )
    if isinstance(first, list | tuple):
        return len(first) == len(second) and all(
            only_decimals_differ(a, b) for a, b in zip(first, second, strict=True)
        )
    if isinstance(first, set | frozenset) and first != second:
        if len(first) != len(second) or not all(isinstance(x, Decimal) for x in (*first, *second)):
            return False
        return all(
            only_decimals_differ(a, b) for a, b in zip(sorted(first), sorted(second), strict=True)
        )
    return bool(first == second)
