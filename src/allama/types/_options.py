"""Typed options for one provider or one feature, kept apart by namespace."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from pydantic import JsonValue, TypeAdapter

T = TypeVar("T")


@runtime_checkable
class ProviderOption(Protocol):
    """A type whose values can be attached to a request with `ChatRequest.with_option`.

    It names its namespace in `__option_namespace__` (a dunder, so that enums can carry it).
    """

    __option_namespace__: ClassVar[str]


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def namespace_of(cls: type[Any]) -> str:
    namespace = getattr(cls, "__option_namespace__", None)
    if not isinstance(namespace, str):
        raise TypeError(
            f"{cls.__name__} cannot be a request option: it has no `__option_namespace__`"
        )
    return namespace


def dump_option(value: Any) -> JsonValue:
    dumped: JsonValue = _adapter(type(value)).dump_python(value, mode="json")
    return dumped


def load_option(cls: type[T], raw: JsonValue) -> T:
    value: T = _adapter(cls).validate_python(raw)
    return value
