"""Following local `$ref`s inside one schema document, without recursion limits to trip over."""

from __future__ import annotations

from typing import Any

_MAX_HOPS = 64


def resolve(schema: Any, root: dict[str, Any]) -> Any:
    """`schema` with its local `$ref` followed (siblings of the `$ref` are ignored here).

    Unknown or non-local references resolve to `True` (anything), which is the safe answer
    for the walks that use this: they never reject what they cannot see.
    """
    hops = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        hops += 1
        if hops > _MAX_HOPS:
            return True
        target = pointer_get(root, schema["$ref"])
        if target is None:
            return True
        schema = target
    return schema


def pointer_get(root: dict[str, Any], ref: str) -> Any:
    """The subschema at a local reference such as `#/$defs/Item`; `None` when there is none."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for raw in ref[1:].split("/")[1:] if ref != "#" else []:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def admits_null(schema: Any, root: dict[str, Any], _depth: int = 0) -> bool:
    """Whether `null` can be valid under `schema` (an open schema admits it)."""
    schema = resolve(schema, root)
    if _depth > _MAX_HOPS:
        return True
    if schema is True or schema == {}:
        return True
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if "null" not in kinds:
            return False
    if "const" in schema and schema["const"] is not None:
        return False
    if "enum" in schema and None not in schema["enum"]:
        return False
    if schema.get("nullable") is True:
        return True
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and not any(
            admits_null(branch, root, _depth + 1) for branch in branches
        ):
            return False
    parts = schema.get("allOf")
    return not isinstance(parts, list) or all(admits_null(part, root, _depth + 1) for part in parts)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def type_fits(schema: Any, value: Any) -> bool:
    """Whether `schema`'s own `type` (if any) allows `value`'s JSON type."""
    if not isinstance(schema, dict):
        return schema is not False
    kind = schema.get("type")
    if kind is None:
        if "const" in schema:
            return json_type(schema["const"]) == json_type(value) or (
                json_type(value) in ("integer", "number")
                and json_type(schema["const"]) in ("integer", "number")
            )
        return True
    kinds = kind if isinstance(kind, list) else [kind]
    actual = json_type(value)
    return actual in kinds or (actual == "integer" and "number" in kinds)


def branches(schema: dict[str, Any], root: dict[str, Any], value: Any) -> list[Any] | None:
    """The `anyOf`/`oneOf` branches of `schema` that may apply to `value`, resolved.

    `None` when `schema` is not a union.
    """
    options = schema.get("anyOf", schema.get("oneOf"))
    if not isinstance(options, list):
        return None
    resolved = [resolve(option, root) for option in options]
    return [option for option in resolved if type_fits(option, value)]
