"""What a type's JSON Schema declares, judged against what its validation reads from JSON.

A type may write its own schema (`WithJsonSchema`, `json_schema_extra`, a
`__get_pydantic_json_schema__`): one that declares a value validation never reads (a `bool`
sent as `"yes"`/`"no"`) fails every answer, every retry too, while the schema is sent as
enforced. Validation reads an answer strictly, as JSON (`"yes"` is no `bool`), so whether it
reads any value the schema allows is asked of a validator that reads the same way."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import SchemaValidator, ValidationError

__all__ = ["DECLARING", "JsonReader", "may_override", "refused", "unread_declared"]

DECLARING = ("type", "enum", "const")
"""The keywords that say which JSON values a schema allows."""
_DECLARING = frozenset(DECLARING)

_MODELS_OWN = BaseModel.__get_pydantic_json_schema__.__func__  # type: ignore[attr-defined]
"""The hook every model's core schema lists, which writes the model as pydantic does."""


def may_override(metadata: dict[str, Any]) -> bool:
    """Whether a core schema's metadata holds what may change the values its JSON Schema
    declares: a hook (`WithJsonSchema`, a `__get_pydantic_json_schema__` of the type's own)
    or extra keys naming them. A `Field`'s title or description cannot, nor a model's own
    hook, so the schema of a plain field is not looked at twice (asked of every node that
    has metadata, so kept cheap)."""
    updates = metadata.get("pydantic_js_updates")
    if updates and not _DECLARING.isdisjoint(updates):
        return True
    extra = metadata.get("pydantic_js_extra")
    if extra is not None and (callable(extra) or not _DECLARING.isdisjoint(extra)):
        return True
    if metadata.get("pydantic_js_annotation_functions"):
        return True
    for hook in metadata.get("pydantic_js_functions") or ():
        if getattr(hook, "__func__", None) is not _MODELS_OWN:
            return True
    return False


_SAMPLES: dict[str, tuple[str, ...]] = {
    "string": ('""',),
    "integer": ("0",),
    "number": ("0", "0.5"),
    "boolean": ("false",),
    "null": ("null",),
    "array": ("[]",),
    "object": ("{}",),
}
"""A JSON value of each type, to ask whether validation refuses that type whatever its value."""


class JsonReader:
    """Whether a validator reads a JSON text strictly, as an answer is read. Without a
    validator (one that could not be built), nothing is known to be read."""

    __slots__ = ("_validator",)

    def __init__(self, validator: SchemaValidator | None) -> None:
        self._validator = validator

    @property
    def known(self) -> bool:
        """Whether there is a validator to ask."""
        return self._validator is not None

    def __call__(self, text: str) -> bool:
        """Whether `text` is read; not where validation fails in any way."""
        if self._validator is None:
            return False
        try:
            self._validator.validate_json(text, strict=True)
        except Exception:  # refused, or failed otherwise (an enum's `_missing_`)
            return False
        return True

    def refuses_kind(self, text: str) -> bool:
        """Whether `text` is refused for its JSON type alone (a string where a `bool` is read),
        so that no value of that type is read: every error says the type is wrong. Not where
        it is read, nor refused for its value (a string too short, a date it cannot parse:
        another string may do), nor where validation fails otherwise."""
        if self._validator is None:
            return False
        try:
            self._validator.validate_json(text, strict=True)
        except ValidationError as error:
            kinds = [each["type"] for each in error.errors(include_url=False)]
            return all(kind.endswith("_type") or kind == "none_required" for kind in kinds)
        except Exception:
            return False
        return False


def _texts(declared: dict[str, Any]) -> tuple[tuple[str, ...], bool] | None:
    """The JSON texts that stand for what `declared` (`DECLARING`'s keys) allows, and whether
    they are all it allows (a `const`'s, an `enum`'s values) or one value of each type it
    names. `None` where it says nothing this can judge."""
    try:
        if "const" in declared:
            return (json.dumps(declared["const"]),), True
        listed = declared.get("enum")
        if isinstance(listed, list) and listed:
            return tuple(json.dumps(value) for value in listed), True
    except (TypeError, ValueError):  # not JSON (a `WithJsonSchema` holding a date, say)
        return None
    named = declared.get("type")
    kinds = [named] if isinstance(named, str) else named if isinstance(named, list) else []
    if not kinds or not all(isinstance(kind, str) and kind in _SAMPLES for kind in kinds):
        return None
    return tuple(text for kind in kinds for text in _SAMPLES[kind]), False


def unread_declared(
    declared: dict[str, Any], reader: JsonReader
) -> tuple[tuple[str, ...], bool] | None:
    """What `declared` allows (`_texts`), where `reader` reads none of it: none of its values,
    or no value of any of its types. `None` where it reads some, or where that is unknown."""
    texts = _texts(declared)
    if texts is None or not reader.known or not refused(*texts, reader):
        return None
    return texts


def refused(texts: tuple[str, ...], exact: bool, reader: JsonReader) -> bool:
    """Whether `reader` reads none of `texts` (`exact`: all the values allowed), or refuses
    each for its type (else: one value of each type allowed)."""
    if exact:
        return not any(reader(text) for text in texts)
    return all(reader.refuses_kind(text) for text in texts)
