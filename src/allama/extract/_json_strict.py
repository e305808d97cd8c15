"""Strict JSON reading for types whose validators run before their fields' validation.

An output is validated strictly, as JSON (`"31"` is not an int). Under a `mode="before"`
or `mode="wrap"` validator (a model's or a field's), pydantic hands the fields what the
validator returns, as Python objects, and checks them by the strict rules for Python:
a `Decimal`, a date, a tuple, a set, bytes or an int key must then be that Python object,
so JSON that pydantic itself reads (`model_validate_json`) fails on every pass.

Where that strict reading fails, the text is checked again, strictly as JSON, by a
validator of the same type without its functions (the caller's validators, a model's own
`__init__` and `model_post_init`, and its class); where that holds, the text is strict JSON of the type,
and the type's own reading (laxly, so its validators' Python output is read as pydantic
reads it without allama) gives the value. Where it does not hold, its failure is the one
said: it names what the output got wrong, not what the validators' Python objects did.
Output the type reads only through its validators' changes (a key a validator renames) is
not strict JSON of the type, and fails as before.
"""

from __future__ import annotations

import weakref
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import SchemaError, SchemaValidator, ValidationError, core_schema

__all__ = ["validate_strict_json"]

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
    except ValidationError:
        unwrapped = _unwrapped_validator(adapter)
        if unwrapped is None:
            raise
    try:
        unwrapped.validate_json(text, strict=True)
    except ValidationError as reason:
        raise reason from None
    return adapter.validate_json(text, strict=False)


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
    stack = [node]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            if not isinstance(item.get("type"), str):  # a mapping of fields by name
                stack.extend(item.values())
            elif item["type"] in _FIRST:
                return True
            else:
                stack.extend(value for key, value in item.items() if key not in _BESIDE)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


_BESIDE = frozenset({"cls", "metadata", "serialization", "config", "default", "function"})
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
        key: value if key in _BESIDE else _without_functions(value) for key, value in node.items()
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
