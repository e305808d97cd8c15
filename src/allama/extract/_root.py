"""Types whose schema root is not an object, wrapped where a dialect needs an object root.

OpenAI's strict mode (Chat Completions and Responses) takes only an object at the root of a
response schema, and every tool API takes only an object as a tool's parameters. A list, an
enum, a `Literal`, a union or a scalar is then sent as `{"value": <its schema>}`, strict, and
the answer is unwrapped before it reaches the caller. The wrapping object adds nothing the
model may choose (one required key, no other), so it keeps whatever enforcement the type's
own schema gets.

Its schema is closed (`additionalProperties: false`, what strict modes take), but its
validation ignores other keys, as a model of the caller's does: a key beside `value` is an
undeclared key like any other, rejected by the undeclared-key walk (and counted) unless the
extraction allows undeclared keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from allama.schema._inline import inline_root_ref
from allama.schema._types import TypeSchema, derived, type_schema

__all__ = ["ROOT_KEY", "ROOT_OPTION", "object_rooted", "unwrap", "wrapped_schema", "wrapper_type"]

ROOT_KEY = "value"
"""The one property of the wrapping object."""

ROOT_OPTION = "allama.extraction.root"
"""Request option set on a derived request whose schema wraps the type: its JSON value is
the key the value is wrapped in (`ROOT_KEY`). Scripted providers read it to answer in the
shape the request asks for; nothing sends it."""


def _closed(schema: dict[str, Any]) -> None:
    schema.pop("title", None)
    schema["additionalProperties"] = False


class _Wrapped(BaseModel):
    """The wrapping object: `{"value": ...}`, and no other key in its schema (each type's
    wrapper adds the `value` field, `wrapper_type`)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_closed)


_UNIONS = ("anyOf", "oneOf", "allOf")


def object_rooted(schema: dict[str, Any]) -> bool:
    """Whether the root of `schema`, a root `$ref` resolved into it as the tool adapters
    send it, is a plain object: `"type": "object"` and no union or `$ref` beside it, which
    is what object-root dialects take. Answered once per cached type's schema."""
    return derived(schema, _is_object_rooted, lambda: _is_object_rooted(inline_root_ref(schema)))


def _is_object_rooted(schema: Mapping[str, Any]) -> bool:
    # `["object"]` is the same type, as a list of one: the dialects send it as `"object"`
    # (`object_root`), the tool encoders too (`object_parameters`), so it needs no wrapping.
    return schema.get("type") in ("object", ["object"]) and not any(
        key in schema for key in (*_UNIONS, "$ref")
    )


def wrapper_type(tp: Any) -> Any:
    """The wrapping object's type for `tp` (what a wrapped stream's partial value follows).

    Made here rather than as a generic model's `_Wrapped[tp]`: pydantic keeps one class per
    type expression that compares equal, and `Literal["b", "a"] == Literal["a", "b"]`, so the
    second would be sent with the first's order (and a scripted answer take "a"). The
    spelling keeps them apart, as `type_schema`'s cache does."""
    try:
        hash(tp)
    except TypeError:  # an unhashable type expression: made each time, not cached
        return _wrapper(tp)
    return _cached_wrapper(tp, repr(tp))


@lru_cache(maxsize=512)
def _cached_wrapper(tp: Any, spelling: str) -> Any:
    return _wrapper(tp)


def _wrapper(tp: Any) -> Any:
    return create_model("_Wrapped", __base__=_Wrapped, value=(tp, ...))


def wrapped_schema(tp: Any, caller: TypeSchema) -> TypeSchema:
    """The wrapping object's schema and validator, named as the caller's type (so the
    response format, the record and messages keep the caller's names). Kept with the
    caller's schema, so every extraction of the type shares one."""

    def make() -> TypeSchema:
        inner = type_schema(wrapper_type(tp))
        return TypeSchema(
            adapter=inner.adapter, schema=inner.schema, label=caller.label, name=caller.name
        )

    made: TypeSchema = derived(caller.schema, "allama.extract.wrapped_root", make)
    return made


def unwrap(value: Any) -> Any:
    """The caller's value inside a validated (or partial) wrapping object; `None` before
    its key arrived."""
    return getattr(value, ROOT_KEY, None)
