"""Removing the `null`s a strict mode let the model send for optional properties.

Strict modes that require every property make optional ones nullable. A `null` for an
optional property whose own schema admits no `null` is such a stand-in: removing it lets
the default apply. A `null` that the schema admits (an `Optional` field), or one for a
required property or a map entry, is kept, so validation sees what the model meant.
"""

from __future__ import annotations

from typing import Any

from allama.schema._resolve import admits_null, branches, resolve

__all__ = ["normalize_strict_nulls"]


def normalize_strict_nulls(value: Any, schema: dict[str, Any]) -> Any:
    """`value` without stand-in `null`s; `value` itself when there were none (never changed).

    >>> schema = {"type": "object", "properties": {"tags": {"type": "array"}}}
    >>> normalize_strict_nulls({"tags": None}, schema)
    {}
    """
    return _normalize(value, schema, schema, 0)


def _normalize(value: Any, schema: Any, root: dict[str, Any], depth: int) -> Any:
    if depth > 256:
        return value
    schema = resolve(schema, root)
    if not isinstance(schema, dict):
        return value
    options = branches(schema, root, value)
    if options is not None:
        if len(options) == 1:
            return _normalize(value, options[0], root, depth + 1)
        if isinstance(value, dict):
            best = _best_object_branch(value, options)
            return value if best is None else _normalize(value, best, root, depth + 1)
        return value
    if isinstance(value, dict):
        return _object(value, schema, root, depth)
    if isinstance(value, list):
        return _array(value, schema, root, depth)
    return value


def _best_object_branch(value: dict[str, Any], options: list[Any]) -> Any:
    """The object branch that declares the most of `value`'s keys (the first on a tie)."""
    best, best_score = None, -1
    for option in options:
        if not isinstance(option, dict):
            continue
        properties = option.get("properties")
        if not isinstance(properties, dict):
            continue
        score = sum(1 for key in value if key in properties)
        if score > best_score:
            best, best_score = option, score
    return best


def _object(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], depth: int) -> Any:
    properties = _properties(schema, root)
    required = _required(schema, root)
    out: dict[str, Any] = {}
    changed = False
    for key, item in value.items():
        sub = properties.get(key)
        if sub is None:
            out[key] = item
        elif item is None:
            if key in required or admits_null(sub, root):
                out[key] = item
            else:
                changed = True
        else:
            out[key] = normalized = _normalize(item, sub, root, depth + 1)
            changed = changed or normalized is not item
    return out if changed else value


def _array(value: list[Any], schema: dict[str, Any], root: dict[str, Any], depth: int) -> Any:
    prefix = schema.get("prefixItems")
    items = schema.get("items")
    out: list[Any] = []
    for index, item in enumerate(value):
        if isinstance(prefix, list) and index < len(prefix):
            out.append(_normalize(item, prefix[index], root, depth + 1))
        elif isinstance(items, list):
            sub = items[index] if index < len(items) else None
            out.append(item if sub is None else _normalize(item, sub, root, depth + 1))
        elif isinstance(items, dict):
            out.append(_normalize(item, items, root, depth + 1))
        else:
            out.append(item)
    return out if any(new is not old for new, old in zip(out, value, strict=True)) else value


def _properties(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """The declared properties, including those of `allOf` parts."""
    found: dict[str, Any] = {}
    own = schema.get("properties")
    if isinstance(own, dict):
        found.update(own)
    parts = schema.get("allOf")
    if isinstance(parts, list):
        for part in parts:
            part = resolve(part, root)
            if isinstance(part, dict) and isinstance(part.get("properties"), dict):
                for key, sub in part["properties"].items():
                    found.setdefault(key, sub)
    return found


def _required(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    own = schema.get("required")
    if isinstance(own, list):
        found.update(key for key in own if isinstance(key, str))
    parts = schema.get("allOf")
    if isinstance(parts, list):
        for part in parts:
            part = resolve(part, root)
            if isinstance(part, dict) and isinstance(part.get("required"), list):
                found.update(key for key in part["required"] if isinstance(key, str))
    return found
