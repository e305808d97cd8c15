"""A tool's parameters with an object root, for tool APIs that read what the root is.

Anthropic's `input_schema`, Gemini's `parametersJsonSchema` and Ollama's tool `parameters`
take an object root (`"type": "object"`), and each passes the arguments as a JSON object.

Pydantic writes a recursive model, or a `RootModel` of a model, as
`{"$defs": {...}, "$ref": "#/$defs/Node"}`: Anthropic answers 400 to it ("input_schema.type:
Field required"), and Ollama's tool decoder drops the `$ref`, leaving no parameters. The
target's keywords move to the root beside its `$defs`, which stay (the target may refer to
itself from inside), so the schema accepts exactly what it did.

`{}`, the plain way to write a tool of no arguments, is refused as `input_schema` for its
missing `type`; a root union is refused by Anthropic ("input_schema does not support oneOf,
allOf, or anyOf at the top level"), and so is an object root with one of those beside its
properties, which `without_root_combinators` takes out for that API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from allama.schema._errors import SchemaError
from allama.schema._types import derived
from allama.schema._walk import ANNOTATIONS, OBJECT_KEYWORDS, preflight

__all__ = [
    "RootCombinators",
    "inline_root_ref",
    "no_object_parameters",
    "object_parameters",
    "without_root_combinators",
]

_DEFINITIONS = frozenset({"$defs", "definitions"})
_NOT_MOVED = _DEFINITIONS | {"$schema", "$anchor", "$dynamicAnchor"}
"""A target's keywords that stay where it is: its definitions are reached there, and an
anchor named twice would be ambiguous."""
_KEPT_BEFORE_2019 = _DEFINITIONS | {"$schema", "$id", "id"}
"""Siblings of a root `$ref` kept before draft 2019-09, which ignores the others."""
_OF_AN_OBJECT = OBJECT_KEYWORDS | ANNOTATIONS | _DEFINITIONS
"""A root of nothing else says what an object's arguments are, whatever its `type`."""


def object_parameters(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` as a tool's parameters: its root `$ref` resolved (`inline_root_ref`), and
    `"type": "object"` (with `"properties": {}` where it declares none) given to a root
    that says nothing but an object's keywords and annotations, since the arguments are an
    object whatever else the schema would accept: `{}` is a tool of no arguments,
    `{"type": "object", "properties": {}}`. `None` for a root that is no object (a union,
    a scalar, a `$ref` left as it is): the arguments could not be what it describes, and
    wrapping it would change the value the caller's code receives."""
    made: dict[str, Any] | None = derived(
        schema, "allama.schema.object_parameters", lambda: _object_parameters(schema)
    )
    return made


@dataclass(frozen=True, slots=True)
class RootCombinators:
    """An object root without `anyOf`, `oneOf` or `allOf` (`without_root_combinators`)."""

    schema: dict[str, Any]
    """The root as sent: the schema given when there was nothing to change."""
    dropped: tuple[str, ...] = ()
    """The root's `anyOf` and `oneOf` left out, in that order: their rule is not enforced."""


_FOLDABLE = frozenset({"type", "properties", "required"})
_OPEN_ENDED = ("additionalProperties", "patternProperties", "unevaluatedProperties")
"""Root keywords that read the root's own `properties`: folding a branch's into them would
change what they allow."""


def without_root_combinators(schema: dict[str, Any]) -> RootCombinators:
    """`schema` (an `object_parameters` result) for an API that takes no `anyOf`, `oneOf`
    or `allOf` at the root of a tool's parameters (Anthropic's `input_schema`).

    A root `allOf` whose branches say only `type: object`, `properties` and `required` is
    folded into the root, which then accepts exactly what it did: `required` is the union,
    and a property given two schemas is their `allOf`. A root `anyOf` or `oneOf` is left out
    (the object's alternatives, as an "email or phone" tool writes them), which the caller
    must be told. Raises `SchemaError` for an `allOf` that cannot be folded exactly."""
    if not any(key in schema for key in ("anyOf", "oneOf", "allOf")):
        return RootCombinators(schema)
    root = dict(schema)
    if "allOf" in root:  # folded: the root accepts what it did
        root = _folded(root)
    dropped = tuple(key for key in ("anyOf", "oneOf") if key in root)
    for key in dropped:
        del root[key]
    return RootCombinators(root, dropped)


def _folded(root: dict[str, Any]) -> dict[str, Any]:
    branches = root.pop("allOf")
    if not isinstance(branches, list):
        raise SchemaError("/allOf", "`/allOf` is not a list of schemas")
    if opened := [key for key in _OPEN_ENDED if key in root]:
        raise SchemaError(
            "/",
            f"the root's `{opened[0]}` reads only the root's own `properties`, so the "
            "branches' cannot join them",
        )
    own, needed = root.get("properties", {}), root.get("required", [])
    if not isinstance(own, dict) or not isinstance(needed, list):
        raise SchemaError("/", "the root has `properties` or `required` of a wrong shape")
    properties: dict[str, Any] = dict(own)
    required: list[Any] = list(needed)
    for index, branch in enumerate(branches):
        where = f"/allOf/{index}"
        if not isinstance(branch, dict):
            raise SchemaError(where, f"`{where}` is not an object schema")
        other = sorted(key for key in branch if key not in _FOLDABLE)
        if other:
            raise SchemaError(
                where,
                f"`{where}` says `{other[0]}`, beyond the `type`, `properties` and `required` "
                "that can join the root",
            )
        if branch.get("type", "object") not in ("object", ["object"]):
            raise SchemaError(where, f"`{where}` is not of type object")
        given = branch.get("properties", {})
        listed = branch.get("required", [])
        if not isinstance(given, dict) or not isinstance(listed, list):
            raise SchemaError(where, f"`{where}` has `properties` or `required` of a wrong shape")
        for name, value in given.items():
            if name not in properties:
                properties[name] = value
                continue
            held = properties[name]
            nested = isinstance(held, dict) and set(held) == {"allOf"}
            parts = list(held["allOf"]) if nested and isinstance(held["allOf"], list) else [held]
            if value not in parts:
                properties[name] = {"allOf": [*parts, value]}
        required += [name for name in listed if name not in required]
    root["properties"] = properties
    if required:
        root["required"] = required
    return root


def no_object_parameters(tool: str, provider: str) -> str:
    """Why tool `tool`, whose parameters `object_parameters` finds no object, is refused."""
    return (
        f"the parameters of tool `{tool}` are not an object schema: {provider} passes a "
        "tool's arguments as a JSON object, so its parameters must be an object schema "
        '(`"type": "object"`), of which a union or a single value can be a property'
    )


def _object_parameters(schema: dict[str, Any]) -> dict[str, Any] | None:
    root = inline_root_ref(schema)
    if root.get("type") == "object":
        return root
    if root.get("type") == ["object"]:  # the same type, as a list of one
        return {**root, "type": "object"}
    if "type" in root or any(key not in _OF_AN_OBJECT for key in root):
        return None
    return {"type": "object", **root, **({} if "properties" in root else {"properties": {}})}


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
