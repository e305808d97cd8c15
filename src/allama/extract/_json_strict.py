"""Strict JSON reading for types whose validators run before their fields' validation.

An output is validated strictly, as JSON (`"31"` is not an int). Under a `mode="before"`
or `mode="wrap"` validator (a model's or a field's), pydantic hands the fields what the
validator returns, as Python objects, and checks them by the strict rules for Python:
a `Decimal`, a date, a tuple, a set, bytes or an int key must then be that Python object,
so JSON that pydantic itself reads (`model_validate_json`) fails on every pass.

Where that strict reading fails, the type's own reading (lax, as pydantic reads JSON
without allama) gives the value when the text is strict JSON of the type all the same: it
validates, strictly as JSON, by a validator of the same type without its functions (the
caller's validators, a model's own `__init__` and `model_post_init`, and its class); or
every failure was of Python's rules alone (a date written as a string, a decimal as a
number, an array for a tuple, a key of a map: `python_only`) and that validator finds
nothing wrong where they were (a tuple's items, a date's text), only where a validator
makes a value of what the model wrote. Otherwise the first
reading's failure stands, and what is said of it is a failure of another kind, where there
is one (`said_first`): what the output got wrong, not what the validators' objects did.
"""

from __future__ import annotations

import weakref
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import ErrorDetails, SchemaError, SchemaValidator, ValidationError, core_schema

from allama.extract._output import schema_nodes

__all__ = ["python_only", "said_first", "validate_strict_json"]

_FIRST = frozenset({"function-before", "function-wrap"})
_FUNCTIONS = _FIRST | {"function-after"}

_unwrapped: weakref.WeakKeyDictionary[TypeAdapter[Any], SchemaValidator | None] = (
    weakref.WeakKeyDictionary()
)


def validate_strict_json(adapter: TypeAdapter[Any], text: str) -> Any:
    """`text`'s value, validated strictly as JSON; raises a `ValidationError` as
    `adapter.validate_json(text, strict=True)` does (see the module's docstring)."""
    try:
        return adapter.validate_json(text, strict=True)
    except ValidationError as error:
        unwrapped = _unwrapped_validator(adapter)
        if unwrapped is None:
            raise
        failed = error.errors(include_url=False)
        try:
            unwrapped.validate_json(text, strict=True)
        except ValidationError as reason:
            if not all(python_only(each) for each in failed):
                raise error from None
            # Only Python's rules failed the first reading: what the output wrote there (a
            # tuple's items, a date's text) is read as JSON by the type without its
            # functions, whose failures elsewhere are the validators' to mend (a field a
            # validator makes an int of what the model wrote).
            places = [tuple(each["loc"]) for each in failed]
            if any(_within(tuple(each["loc"]), places) for each in reason.errors()):
                raise reason from None
    return adapter.validate_json(text, strict=False)


def _within(place: tuple[Any, ...], places: list[tuple[Any, ...]]) -> bool:
    return any(place[: len(outer)] == outer for outer in places)


_STRINGS = frozenset({"date_type", "datetime_type", "time_type", "time_delta_type", "bytes_type"})
_ARRAYS = frozenset({"tuple_type", "set_type", "frozen_set_type", "deque_type"})


def python_only(error: ErrorDetails) -> bool:
    """Whether `error`, of a strict reading, is one the JSON value would not fail as JSON:
    only the strict rules for Python objects (after a validator) refuse it."""
    kind, given = error["type"], error["input"]
    if error["loc"] and error["loc"][-1] == "[key]":
        return isinstance(given, str)  # a JSON key is text, whatever the map's keys are
    if kind in _STRINGS:
        return isinstance(given, str)
    if kind in _ARRAYS:
        return isinstance(given, list)
    if kind == "is_instance_of" and (error.get("ctx") or {}).get("class") == "Decimal":
        return isinstance(given, int | float | str) and not isinstance(given, bool)
    return False


def said_first(errors: list[ErrorDetails]) -> ErrorDetails:
    """The error to say of a failed reading: the first not `python_only`, where one is."""
    return next((each for each in errors if not python_only(each)), errors[0])


def _unwrapped_validator(adapter: TypeAdapter[Any]) -> SchemaValidator | None:
    """A validator of `adapter`'s type without its functions, where one of them runs before
    its fields' validation; `None` where none does (or the schema cannot be rebuilt)."""
    try:
        return _unwrapped[adapter]
    except KeyError:
        pass
    validator: SchemaValidator | None = None
    core = adapter.core_schema
    if _has_first(core):
        try:
            validator = SchemaValidator(_without_functions(core))
        except (SchemaError, TypeError, ValueError):
            validator = None
    _unwrapped[adapter] = validator
    return validator


def _has_first(node: Any) -> bool:
    return any(each["type"] in _FIRST for each in schema_nodes(node))


BESIDE = frozenset({"cls", "metadata", "serialization", "config", "default", "function"})
"""What a core schema node holds beside its schemas: kept as it is."""


def _identity(value: Any) -> Any:
    return value


def _without_functions(node: Any) -> Any:
    """A copy of a core schema with every validator function taken out: a function's
    schema stands in its place (under the function's `ref`, kept by an identity function
    where the schema has a `ref` of its own), a plain validator reads anything."""
    if isinstance(node, list):
        return [_without_functions(item) for item in node]
    if isinstance(node, tuple):
        return tuple(_without_functions(item) for item in node)
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if not isinstance(kind, str):  # a mapping of fields by name
        return {key: _without_functions(value) for key, value in node.items()}
    if kind in _FUNCTIONS:
        inner = _without_functions(node["schema"])
        ref = node.get("ref")
        if ref is None:
            return inner
        return core_schema.no_info_after_validator_function(_identity, inner, ref=ref)
    if kind == "function-plain":
        ref = node.get("ref")
        return core_schema.any_schema(ref=ref) if ref else core_schema.any_schema()
    copied = {
        key: value if key in BESIDE else _without_functions(value) for key, value in node.items()
    }
    if kind in ("model", "dataclass"):
        # Not the class itself: pydantic-core would reuse the class's own validator.
        copied["cls"] = _Checked
        copied.pop("custom_init", None)
        copied.pop("post_init", None)
    return copied


class _Checked:
    """What the validator without functions makes of a model or a dataclass: only whether
    it validates is read."""
