"""Sizes of a rewritten schema, the quantities providers cap (properties, depth, enums...)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Measure", "measure"]

_BIG_ENUM = 250


@dataclass(frozen=True, slots=True)
class Measure:
    properties: int
    """Object properties declared anywhere, `$defs` included."""
    depth: int
    """Objects along the deepest path, the root object counting as 1; `$ref`s followed,
    recursion counted once."""
    enum_values: int
    string_length: int
    """Characters in property names, definition names and string enum values."""
    largest_string_enum: int
    """Characters in the longest string `enum` of more than 250 values (0 if none)."""
    optional: int
    """Properties not listed in their object's `required`."""
    unions: int
    """`anyOf`s and type arrays of more than one type."""


_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SINGLE = frozenset({"additionalProperties", "not", "if", "then", "else", "contains"})


def _is_object(node: Mapping[str, Any]) -> bool:
    if "properties" in node:
        return True
    kind = node.get("type")
    if type(kind) is str:
        return kind == "object" or kind == "OBJECT"
    return isinstance(kind, list) and ("object" in kind or "OBJECT" in kind)


def measure(schema: Mapping[str, Any]) -> Measure:
    """Counts over `schema` and its `$defs` (local `#/$defs/name` and `#` references)."""
    defs = schema.get("$defs")
    bodies: dict[str, Any] = {"#": schema}
    if isinstance(defs, Mapping):
        for name, body in defs.items():
            bodies["#/$defs/" + str(name).replace("~", "~0").replace("/", "~1")] = body
    properties = enum_values = string_length = largest = optional = unions = 0
    if isinstance(defs, Mapping):
        string_length += sum(len(str(name)) for name in defs)
    local: dict[str, int] = {}
    refs: dict[str, list[tuple[str, int]]] = {}
    for name, body in bodies.items():
        local[name], refs[name] = 0, []
        stack: list[tuple[Any, int]] = [(body, 0)]
        deepest = 0
        own_refs = refs[name]
        push = stack.append
        while stack:
            node, depth = stack.pop()
            if type(node) is not dict and not isinstance(node, Mapping):
                continue
            if _is_object(node):
                depth += 1
                if depth > deepest:
                    deepest = depth
            ref = node.get("$ref")
            if type(ref) is str:
                own_refs.append((ref, depth))
            props = node.get("properties")
            if isinstance(props, Mapping):
                properties += len(props)
                string_length += sum(map(len, props))
                required = node.get("required") or ()
                optional += sum(1 for p in props if p not in required)
            enum = node.get("enum")
            if isinstance(enum, list):
                enum_values += len(enum)
                text = sum(len(v) for v in enum if isinstance(v, str))
                string_length += text
                if len(enum) > _BIG_ENUM and all(isinstance(v, str) for v in enum):
                    largest = max(largest, text)
            kind = node.get("type")
            if "anyOf" in node or (isinstance(kind, list) and len(kind) > 1):
                unions += 1
            for key in node:
                if key in _MAPS:
                    value = node[key]
                    if isinstance(value, Mapping):
                        for sub in value.values():
                            push((sub, depth))
                elif key in _LISTS or key == "items":
                    value = node[key]
                    if isinstance(value, list):
                        for sub in value:
                            push((sub, depth))
                    elif key == "items":
                        push((value, depth))
                elif key in _SINGLE:
                    push((node[key], depth))
        local[name] = deepest
    return Measure(
        properties=properties,
        depth=_depth("#", local, refs),
        enum_values=enum_values,
        string_length=string_length,
        largest_string_enum=largest,
        optional=optional,
        unions=unions,
    )


def _depth(start: str, local: dict[str, int], refs: dict[str, list[tuple[str, int]]]) -> int:
    """Longest object path from `start` through `$ref`s, each cycle entered once."""
    memo: dict[str, int] = {}
    stack: list[tuple[str, Iterator[tuple[str, int]]]] = [(start, iter(refs[start]))]
    visiting = {start}
    while stack:
        name, edges = stack[-1]
        for target, _ in edges:
            if target in local and target not in memo and target not in visiting:
                visiting.add(target)
                stack.append((target, iter(refs[target])))
                break
        else:
            stack.pop()
            visiting.discard(name)
            memo[name] = max(
                [local[name]] + [d + memo[t] for t, d in refs[name] if t in memo and t != name]
            )
    return memo[start]
