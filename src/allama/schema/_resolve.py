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

    A branch of another JSON type never applies. For an object, neither does a branch its
    tag rules out: the `discriminator`'s `mapping` names another branch, or a property the
    branch pins (`const`, `enum`) holds another value (a `null` rules nothing out: it may be
    a stand-in). Validation cannot pick such a branch, so its keys are not the object's.
    When that rules out every branch, which one applies is not known: all those of the
    value's type are kept.

    `None` when `schema` is not a union.
    """
    options = schema.get("anyOf", schema.get("oneOf"))
    if not isinstance(options, list):
        return None
    resolved = [resolve(option, root) for option in options]
    fitting = [option for option in resolved if type_fits(option, value)]
    if not isinstance(value, dict) or len(fitting) < 2:
        return fitting
    mapped = _mapped(schema, root, value)
    picked = [option for option in fitting if mapped is None or option is mapped]
    picked = [option for option in picked or fitting if not _pinned_elsewhere(option, root, value)]
    return picked or fitting


def union_tags(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """The properties of an object whose values `branches` reads to rule out branches of
    `schema` (its discriminator's, and those a branch pins): an object's branches depend on
    nothing else."""
    options = schema.get("anyOf", schema.get("oneOf"))
    if not isinstance(options, list):
        return set()
    tags: set[str] = set()
    discriminator = schema.get("discriminator")
    if isinstance(discriminator, dict) and isinstance(discriminator.get("propertyName"), str):
        tags.add(discriminator["propertyName"])
    for option in options:
        option = resolve(option, root)
        if isinstance(option, dict):
            tags.update(name for name, _ in _pins(option, root))
    return tags


def _mapped(schema: dict[str, Any], root: dict[str, Any], value: dict[str, Any]) -> Any:
    """The branch the discriminator's `mapping` names for `value`'s tag, resolved; `None`
    when it names none."""
    discriminator = schema.get("discriminator")
    if not isinstance(discriminator, dict):
        return None
    name, mapping = discriminator.get("propertyName"), discriminator.get("mapping")
    if not isinstance(name, str) or not isinstance(mapping, dict):
        return None
    tag = value.get(name)
    ref = mapping.get(tag) if isinstance(tag, str) else None
    if not isinstance(ref, str):
        return None
    target = resolve({"$ref": ref}, root)
    return target if isinstance(target, dict) else None


def _pins(schema: dict[str, Any], root: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """The properties of an object schema (and of its `allOf` parts) whose schema lists
    the values they may take (`const`, `enum`), with those values."""
    pinned: list[tuple[str, list[Any]]] = []
    parts = [schema]
    if isinstance(schema.get("allOf"), list):
        parts += [resolve(part, root) for part in schema["allOf"]]
    for part in parts:
        properties = part.get("properties") if isinstance(part, dict) else None
        if not isinstance(properties, dict):
            continue
        for name, sub in properties.items():
            sub = resolve(sub, root)
            if not isinstance(sub, dict):
                continue
            if "const" in sub:
                pinned.append((name, [sub["const"]]))
            elif isinstance(sub.get("enum"), list):
                pinned.append((name, sub["enum"]))
    return pinned


def _pinned_elsewhere(option: Any, root: dict[str, Any], value: dict[str, Any]) -> bool:
    """Whether `value` holds, for a property `option` pins, a value it does not allow."""
    if not isinstance(option, dict):
        return False
    for name, allowed in _pins(option, root):
        held = value.get(name)
        if held is not None and not any(_same_json(held, one) for one in allowed):
            return True
    return False


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality: `1` is `1.0`, `true` is not `1`."""
    kind_a, kind_b = json_type(a), json_type(b)
    numbers = ("integer", "number")
    if kind_a != kind_b and not (kind_a in numbers and kind_b in numbers):
        return False
    if kind_a == "array":
        return len(a) == len(b) and all(map(_same_json, a, b))
    if kind_a == "object":
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return bool(a == b)
