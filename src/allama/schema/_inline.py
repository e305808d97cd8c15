"""A root `$ref` resolved into the root, for tool APIs that read what the root is.

Anthropic's `input_schema`, Gemini's `parametersJsonSchema` and Ollama's tool `parameters`
take an object root (`"type": "object"`). Pydantic writes a recursive model, or a
`RootModel` of a model, as `{"$defs": {...}, "$ref": "#/$defs/Node"}`: Anthropic answers
400 to it ("input_schema.type: Field required"), and Ollama's tool decoder drops the `$ref`,
leaving no parameters. The target's keywords move to the root beside its `$defs`, which stay
(the target may refer to itself from inside), so the schema accepts exactly what it did.
"""

from __future__ import annotations

from typing import Any

from allama.schema._errors import SchemaError
from allama.schema._types import derived
from allama.schema._walk import ANNOTATIONS, preflight

__all__ = ["inline_root_ref"]

_DEFINITIONS = frozenset({"$defs", "definitions"})
_NOT_MOVED = _DEFINITIONS | {"$schema", "$anchor", "$dynamicAnchor"}
"""A target's keywords that stay where it is: its definitions are reached there, and an
anchor named twice would be ambiguous."""
_KEPT_BEFORE_2019 = _DEFINITIONS | {"$schema", "$id", "id"}
"""Siblings of a root `$ref` kept before draft 2019-09, which ignores the others."""


def inline_root_ref(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its root `$ref` (and any `$ref` at the root of its target, in turn)
    resolved into the root. `schema` itself when its root has none, and when resolving it
    could change what it accepts: a reference that does not resolve, or leads back round,
    a target that is a boolean schema or starts a resource of its own (`$id`), or a root
    that asserts something beside its `$ref` (an `additionalProperties` there reads only
    the `properties` beside it, not the target's)."""
    if not isinstance(schema.get("$ref"), str):
        return schema
    inlined: dict[str, Any] = derived(
        schema, "allama.schema.inline_root_ref", lambda: _inlined(schema)
    )
    return inlined


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    try:
        index = preflight(schema)
    except SchemaError:
        return schema  # sent as it is, for the provider to say what it makes of it
    root = schema
    seen: set[str] = set()
    while isinstance(ref := root.get("$ref"), str):
        pointer, target = index.target(ref)
        if pointer in seen or not isinstance(target, dict) or "$id" in target or "id" in target:
            return schema
        seen.add(pointer)
        if index.draft <= 7:  # siblings of `$ref` are ignored before 2019-09
            beside = {k: v for k, v in root.items() if k in _KEPT_BEFORE_2019}
        else:
            beside = {k: v for k, v in root.items() if k != "$ref"}
            if any(k not in ANNOTATIONS and k not in _DEFINITIONS for k in beside):
                return schema
        merged: dict[str, Any] = {}
        for key, value in root.items():  # in the root's order, the target where `$ref` was
            if key == "$ref":
                moved = ((k, v) for k, v in target.items() if k not in _NOT_MOVED)
                merged.update((k, v) for k, v in moved if k not in beside)
            elif key in beside:
                merged[key] = value  # the root's annotations over the target's
        root = merged
    return root
