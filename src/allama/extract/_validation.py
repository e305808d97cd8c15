"""Turning the output into the value, with errors that name the field and say what is wrong.

The model reads these messages on a retry, so they name the place (`items[1].price`) and the
problem in plain words: a missing field, an unknown enum value, a wrong type, or the message
of the caller's own validator.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError
from pydantic_core import CoreSchema, ErrorDetails, SchemaValidator
from pydantic_core.core_schema import dict_schema

from allama.extract._decimals import (
    MOST_TRIED,
    lossy_numbers,
    only_decimals_differ,
    quoted,
    same_but_decimals,
    stood_in,
    too_large,
)
from allama.extract._json import NotJsonError, keys_all_kept, loads
from allama.extract._json_strict import said_first, validate_strict_json
from allama.extract._kept import NOT_FINITE, Merged, kept_keys, merged_keys, non_finite_path
from allama.extract._output import CAREFUL, OutputPlan, output_plan
from allama.schema._nulls import normalize_strict_nulls
from allama.schema._undeclared import find_undeclared_key, format_path


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a text did not become the value."""

    message: str
    path: str | None
    invalid_json: bool = False
    undeclared: bool = False
    kind: str | None = None
    """pydantic's kind of error (`int_parsing`), where validation said it."""
    bounds: bool = False
    """Every error validation said is a bound's (`_BOUNDS`): a value broke a limit, none
    was of the wrong type."""


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f"string {json.dumps(value)}"
    if isinstance(value, list):
        return "a sequence"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "bool": "a boolean",
    "list": "a list",
    "tuple": "a list",
    "set": "a list",
    "frozen_set": "a list",
    "dict": "an object",
    "model": "an object",
    "model_attributes": "an object",
    "dataclass": "an object",
    "typed_dict": "an object",
}


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return f"missing field `{error['loc'][-1]}`" if error["loc"] else "missing value"
    if kind in ("enum", "literal_error"):
        expected = ctx.get("expected", "")
        return f"unknown variant {_describe_variant(value)}, expected {expected}"
    if kind == "value_error":
        reason = ctx.get("error")
        return str(reason) if reason is not None else error["msg"].removeprefix("Value error, ")
    if kind == "assertion_error":
        return error["msg"].removeprefix("Assertion failed, ")
    if kind == "extra_forbidden":
        return f"unknown field `{error['loc'][-1]}`"
    if kind.endswith(("_type", "_parsing")):
        base = kind.removesuffix("_type").removesuffix("_parsing")
        expected = _EXPECTED.get(base, error["msg"].removeprefix("Input should be ").lower())
        return f"invalid type: {_describe(value)}, expected {expected}"
    if kind in (
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "multiple_of",
        "string_too_short",
        "string_too_long",
        "too_short",
        "too_long",
        "string_pattern_mismatch",
        "finite_number",
    ):
        expected = error["msg"].removeprefix("Input should ").removeprefix("be ")
        return f"invalid value: {_describe(value)}, expected {expected}"
    return str(error["msg"])


def _describe_variant(value: Any) -> str:
    return f"`{value}`" if isinstance(value, str) else _describe(value)


def _path(error: ErrorDetails, output: Any) -> str | None:
    """Where in the output an error is: the parts of pydantic's location that are keys and
    indices of the output, walked through it. The others are no place in it: a union's
    member (`int`, a model's name), a tagged branch, a validator, a key that is missing
    (the path names the object that lacks it), and they are left out, whatever a real key
    holds (`a[0]`, `function-x`)."""
    node, kept = output, []
    for part in error["loc"]:
        key = isinstance(node, dict) and isinstance(part, str) and part in node
        index = (
            isinstance(node, list)
            and isinstance(part, int)
            and not isinstance(part, bool)
            and 0 <= part < len(node)
        )
        if key or index:
            node = node[part]
            kept.append(part)
    return format_path(tuple(kept)) or None


def from_validation_error(error: ValidationError, output: Any) -> Failure:
    """The first error of validating `output` (the JSON value read), as a `Failure` (of
    those a validator's Python objects did not cause, where there are some: `said_first`)."""
    errors = error.errors(include_url=False)
    first = said_first(errors)
    bounds = all(each["type"] in _BOUNDS for each in errors)
    return Failure(_message(first), _path(first, output), kind=first["type"], bounds=bounds)


def _overflows(value: Any) -> bool:
    """Whether a JSON value holds a number no float holds: one read as infinite, or an
    integer past the largest float."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is float:
            if node in (_INFINITY, -_INFINITY):
                return True
        elif kind is int:
            if not -_LARGEST <= node <= _LARGEST:
                return True
        elif kind is dict:
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
    return False


_INFINITY = float("inf")
_LARGEST = int(sys.float_info.max)


def _loads(raw: str) -> Any:
    """The output's JSON value, read strictly (`NaN`, `Infinity` and duplicate keys are
    errors that name the place); otherwise `json.loads`'s answer and message."""
    return loads(raw)


def check(
    raw: str,
    adapter: TypeAdapter[Any],
    schema: dict[str, Any] | None,
    reject_undeclared: bool,
) -> Any | Failure:
    """The value in `raw`, or why there is none.

    Stand-in `null`s are removed first (against `schema`), then undeclared keys are looked
    for (when asked), then the value is validated strictly, as JSON: `"31"` is not an int.
    Where the type's plan can tell that none of that changes anything, the text is
    validated once, directly (`OutputPlan.validate_once`). A `Decimal` gets the number
    written, not the float nearest it, nor a refusal where it is too large for a float
    (`_decimals`).
    """
    plan = None if schema is None else output_plan(adapter, schema)
    value = _check(raw, adapter, schema, reject_undeclared, plan)
    if plan is None or not plan.decimals:
        return value
    lossy = lossy_numbers(raw)
    if not lossy:
        return value

    def read(text: str) -> Any:
        return _check(text, adapter, schema, reject_undeclared, plan)

    huge = too_large(raw, lossy) if isinstance(value, Failure) else []
    if not huge:
        return _exact_decimals(raw, value, lossy, read)
    # Refused as too large for a float: read as numerals where each is a `Decimal` (a value
    # the same but for its `Decimal`s as with the largest float there), or breaks a bound.
    written = quoted(raw, huge)
    numerals = read(written)
    if isinstance(numerals, Failure):
        if not numerals.bounds:
            return value
    else:
        try:
            if not same_but_decimals(read(stood_in(raw, huge)), numerals):
                return value
        except Exception:  # a type's own `__eq__`: the refusal stands
            return value
    exact = _exact_decimals(written, numerals, lossy_numbers(written), read)
    return _as_written(exact, raw, huge) if isinstance(exact, Failure) else exact


def _exact_decimals(
    raw: str, value: Any, lossy: list[tuple[int, int]], read: Callable[[str], Any]
) -> Any:
    """`value`, read from `raw`, or the reading with the numbers at `lossy` (each one a
    float does not hold) written as numerals where they go to `Decimal`s."""
    failed = isinstance(value, Failure)
    if not lossy or (failed and not value.bounds):
        return value

    def read_as_numerals(spans: list[tuple[int, int]]) -> Any:
        """The reading with the numbers at `spans` as written: a value, a `Failure` where
        one of them breaks a bound (the written number's, which its float may not break),
        or `None` where one goes elsewhere than a `Decimal` (a float, a union's string).
        After a first reading that failed on a bound, any value read is the one."""
        again = read(quoted(raw, spans))
        if isinstance(again, Failure):
            return _as_written(again, raw, spans) if again.bounds else None
        if failed:
            return again
        try:
            return again if only_decimals_differ(value, again) else None
        except Exception:  # a type's own `__eq__`: the first reading stands
            return None

    exact = read_as_numerals(lossy)
    if exact is not None or len(lossy) > MOST_TRIED:
        return value if exact is None else exact
    # Some go to floats: each of the others on its own. One that reads, or breaks a bound
    # alone (its own, or, after a failed first reading, another's float still unread),
    # goes to a `Decimal`; the numbers so found are read as written together.
    kept = [span for span in lossy if read_as_numerals([span]) is not None]
    exact = read_as_numerals(kept) if kept else None
    return value if exact is None else exact


_BOUNDS = frozenset(
    {
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "multiple_of",
        "finite_number",
        "decimal_max_digits",
        "decimal_max_places",
        "decimal_whole_digits",
    }
)
"""Kinds of failure a number's value decides, not its type: where a `Decimal` is read from
the float nearest the number written, the written number decides them."""


def _as_written(failure: Failure, raw: str, spans: list[tuple[int, int]]) -> Failure:
    """`failure` of a reading with numbers written as strings, saying them as the numbers
    the output wrote (the model reads it on a retry)."""
    message = failure.message
    for start, end in spans:
        number = raw[start:end]
        message = message.replace(f'string "{number}"', f"number `{number}`")
    return replace(failure, message=message)


def _check(
    raw: str,
    adapter: TypeAdapter[Any],
    schema: dict[str, Any] | None,
    reject_undeclared: bool,
    plan: OutputPlan | None,
) -> Any | Failure:
    if plan is not None:
        once = plan.validate_once(raw, adapter, reject_undeclared)
        if once is not CAREFUL:
            return once
    try:
        value = _loads(raw)
    except NotJsonError as error:
        return Failure(message=str(error), path=error.path, invalid_json=True)
    except ValueError as error:  # a `JSONDecodeError`, or a number too long to convert
        return Failure(message=str(error), path=None, invalid_json=True)
    except RecursionError:
        return Failure(message="the JSON value nests too deep", path=None, invalid_json=True)
    text = raw
    if schema is not None:
        # Without a `null` in the text, or a property a stand-in could fill, there is
        # nothing to normalise: skip the walk.
        nulls = plan is not None and plan.nulls and "null" in raw
        normalized = normalize_strict_nulls(value, schema) if nulls else value
        if reject_undeclared:
            undeclared = find_undeclared_key(normalized, schema)
            if undeclared is not None:
                return Failure(undeclared.message, undeclared.path, undeclared=True)
        if normalized is not value:
            text = json.dumps(normalized)
    written = normalized if schema is not None else value
    try:
        validated = validate_strict_json(adapter, text)
    except ValidationError as error:
        return from_validation_error(error, written)
    kept = kept_keys(validated)
    if kept != NOT_FINITE and not keys_all_kept(text, kept) and kept < kept_keys(written):
        # Fewer keys kept than written (no key was written twice: `_loads` says so): a key
        # the type ignores, or two keys it reads as one, whose values one would drop.
        merged = merged_keys(adapter.core_schema, validated, written)
        if merged is not None:
            return _keys_read_as_one(merged)
    if kept == NOT_FINITE and _overflows(value):
        # A number too large for a float (`1e400`, a long integer), in a float field, reads
        # as infinity. One the output does not hold is the type's own: a default of
        # `float("inf")`, a validator's.
        path = non_finite_path(validated)
        where = f" at `{path}`" if path else ""
        return Failure(
            f"a number is too large for a floating point value{where}", path, invalid_json=True
        )
    return validated


def _keys_read_as_one(merged: Merged) -> Failure:
    """The failure of an object two of whose keys the type reads as one key: refused as a
    key written twice is (the model's answer lost a value either way), naming both where
    the map's keys can be read on their own."""
    where = f" at `{format_path(merged.path)}`" if merged.path else ""
    pair = _same_key(merged)
    keys = "two keys" if pair is None else f"the keys `{pair[0]}` and `{pair[1]}`"
    return Failure(
        f"{keys} are the same key to the type in the object{where}",
        format_path(merged.path) or None,
        invalid_json=True,
    )


def _same_key(merged: Merged) -> tuple[str, str] | None:
    """The first two keys of the object that the map's key schema reads as one; `None`
    where that schema cannot be read on its own (it refers to a definition elsewhere)."""
    keys = merged.keys_schema or {"type": "any"}
    try:
        validator = SchemaValidator(dict_schema(keys_schema=cast(CoreSchema, keys)))
        seen: dict[Any, str] = {}
        for key in merged.written:
            read = next(iter(validator.validate_json(json.dumps({key: None}), strict=True)))
            if read in seen:
                return seen[read], key
            seen[read] = key
    except Exception:  # a schema of its own, a key it now refuses: the keys go unnamed
        return None
    return None
