"""Sizes of a rewritten schema, the quantities providers cap (properties, depth, enums...)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from allama.schema._pointer import child
from allama.schema._walk import strong_components

__all__ = ["Measure", "measure"]

_BIG_ENUM = 250
_SEARCH = 50_000
"""Steps the longest-path search through mutually recursive definitions may take; past it
their depth is bounded from above instead (the search is exponential in a dense tangle)."""


@dataclass(frozen=True, slots=True)
class Measure:
    properties: int
    """Object properties declared anywhere, `$defs` included."""
    depth: int
    """Objects along the deepest path, the root object counting as 1. The path follows
    `$ref`s and enters each definition (and the root) at most once: a `$ref` back into one
    already on it, recursion, is not followed, so each cycle counts once, whichever side
    the path comes into it from. (When the definitions that recur through one another take
    more than `_SEARCH` steps to search, an upper bound: each of them counted once.)"""
    deepest: tuple[str, ...]
    """Where that path runs, as pointers into the schema: the `$ref`s it follows, then its
    deepest object. (With the upper bound, a path into the recursion and out of it.)"""
    enum_values: int
    most_enum_values: tuple[str, int] | None
    """The place and size of the `enum` with the most values (`None` if there is none)."""
    string_length: int
    """Characters in property names, definition names and string enum values."""
    largest_string_enum: int
    """Characters in the longest string `enum` of more than 250 values (0 if none)."""
    largest_string_enum_at: str | None
    """Where that `enum` is."""
    optional: int
    """Properties not listed in their object's `required`."""
    unions: int
    """`anyOf`s and type arrays of more than one type."""


_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SINGLE = frozenset({"additionalProperties", "not", "if", "then", "else", "contains"})

# A place is kept as a link, `(parent, token)` down from the pointer of its body (a `str`),
# written out as a pointer only for the few places `Measure` names.
_Link = Any
_Edge = tuple[str, int, _Link]
"""A `$ref` in a body: its target, the objects above it in the body, its place."""


def _pointer(link: _Link) -> str:
    tokens: list[str | int] = []
    while type(link) is tuple:
        link, token = link
        tokens.append(token)
    return child(link, *reversed(tokens))


def _is_object(node: Mapping[str, Any], kind: Any) -> bool:
    if "properties" in node:
        return True
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
    most: tuple[_Link, int] | None = None
    largest_at: _Link = None
    if isinstance(defs, Mapping):
        string_length += sum(len(str(name)) for name in defs)
    local: dict[str, tuple[int, _Link]] = {}
    refs: dict[str, list[_Edge]] = {}
    for name, body in bodies.items():
        own_refs: list[_Edge] = []
        refs[name] = own_refs
        base = name[1:]
        stack: list[tuple[Any, int, _Link]] = [(body, 0, base)]
        deepest, deepest_at = 0, base
        push = stack.append
        while stack:
            node, depth, at = stack.pop()
            if type(node) is not dict and not isinstance(node, Mapping):
                continue
            kind = node.get("type")
            if _is_object(node, kind):
                depth += 1
                if depth > deepest:
                    deepest, deepest_at = depth, at
            ref = node.get("$ref")
            if type(ref) is str:
                own_refs.append((ref, depth, at))
            props = node.get("properties")
            if props is not None and (type(props) is dict or isinstance(props, Mapping)):
                properties += len(props)
                string_length += sum(map(len, props))
                required = node.get("required") or ()
                optional += sum(1 for p in props if p not in required)
            enum = node.get("enum")
            if enum is not None and isinstance(enum, list):
                enum_values += len(enum)
                if most is None or len(enum) > most[1]:
                    most = (at, len(enum))
                text = sum(len(v) for v in enum if isinstance(v, str))
                string_length += text
                if (
                    len(enum) > _BIG_ENUM
                    and text > largest
                    and all(isinstance(v, str) for v in enum)
                ):
                    largest, largest_at = text, at
            if "anyOf" in node or (isinstance(kind, list) and len(kind) > 1):
                unions += 1
            for key in node:
                if key in _MAPS:
                    value = node[key]
                    if type(value) is dict or isinstance(value, Mapping):
                        inner = (at, key)
                        for sub_name, sub in value.items():
                            push((sub, depth, (inner, sub_name)))
                elif key in _LISTS or key == "items":
                    value = node[key]
                    if isinstance(value, list):
                        inner = (at, key)
                        for index, sub in enumerate(value):
                            push((sub, depth, (inner, index)))
                    elif key == "items":
                        push((value, depth, (at, key)))
                elif key in _SINGLE:
                    push((node[key], depth, (at, key)))
        local[name] = (deepest, deepest_at)
    depth, path = _depth(local, refs)
    return Measure(
        properties=properties,
        depth=depth,
        deepest=tuple(_pointer(link) for link in path),
        enum_values=enum_values,
        most_enum_values=None if most is None else (_pointer(most[0]), most[1]),
        string_length=string_length,
        largest_string_enum=largest,
        largest_string_enum_at=None if largest_at is None else _pointer(largest_at),
        optional=optional,
        unions=unions,
    )


_Path = Any
"""A path as nested pairs, `(place, rest)`, ending in `(deepest object, None)`."""


def _depth(
    local: dict[str, tuple[int, _Link]], refs: dict[str, list[_Edge]]
) -> tuple[int, list[_Link]]:
    """The longest path from the root (`Measure.depth`) and the places along it.

    The definitions that reach one another (strongly connected components) are taken
    sinks first, so a path that leaves one never comes back: each has a depth of its own,
    the same from every path into it. Within a tangle of them, every way through that
    enters none twice is tried; when that takes more than `_SEARCH` steps in all (a count
    that does not depend on the order of anything), every tangle is bounded instead."""
    components = _components(refs, local)
    best = _best(components, local, refs, _SEARCH)
    if best is None:
        best = _best(components, local, refs, None)
        assert best is not None  # (unbudgeted, it bounds)
    value, path = best["#"]
    places: list[_Link] = []
    while path is not None:
        place, path = path
        places.append(place)
    return value, places


def _best(
    components: list[list[str]],
    local: dict[str, tuple[int, _Link]],
    refs: dict[str, list[_Edge]],
    budget: int | None,
) -> dict[str, tuple[int, _Path]] | None:
    """Each definition's longest path, its tangles searched within `budget` steps (`None`
    when they take more) or, without a budget, bounded: each member counted once."""
    best: dict[str, tuple[int, _Path]] = {}
    entries = _entries(components, refs)
    for component in components:
        exits: dict[str, tuple[int, _Path]] = {}
        for name in component:  # its longest path out, not back through its component
            deepest, at = local[name]
            value, path = deepest, (at, None)
            for target, above, place in refs[name]:
                found = best.get(target)
                if found is not None and above + found[0] > value:
                    value, path = above + found[0], (place, found[1])
            exits[name] = (value, path)
        if len(component) == 1:
            best.update(exits)
            continue
        members = set(component)
        inner = {
            name: [edge for edge in refs[name] if edge[0] in members and edge[0] != name]
            for name in component
        }
        if budget is None:
            # A path enters each member once: at most the largest step out of every
            # member but one, then the longest way out.
            steps = sorted(max((edge[1] for edge in inner[name]), default=0) for name in members)
            bound = sum(steps[1:]) + max(value for value, _ in exits.values())
            best.update((name, (bound, exits[name][1])) for name in component)
            continue
        for name in component:
            if name in entries:  # (no path comes into the others from outside)
                found, budget = _longest(name, inner, exits, budget)
                if found is None:
                    return None
                best[name] = found
    return best


def _entries(components: list[list[str]], refs: dict[str, list[_Edge]]) -> set[str]:
    """The members of tangles that a path can come into from outside them (or start at)."""
    tangled = {name: index for index, c in enumerate(components) if len(c) > 1 for name in c}
    if not tangled:
        return set()
    entries = {"#"}
    for component in components:
        for name in component:
            own = tangled.get(name)
            entries.update(
                target
                for target, _, _ in refs[name]
                if target in tangled and tangled[target] != own
            )
    return entries


def _longest(
    start: str,
    inner: dict[str, list[_Edge]],
    exits: dict[str, tuple[int, _Path]],
    budget: int,
) -> tuple[tuple[int, _Path] | None, int]:
    """The longest path from `start` through its component, entering no member twice
    (`None` when `budget` runs out first), and the budget left."""
    on_path = {start}
    value, path = exits[start]
    # Each frame: its member, the edges left, its best so far, and the edge into it.
    frames: list[list[Any]] = [[start, iter(inner[start]), value, path, 0, None]]
    while frames:
        frame = frames[-1]
        edges: Iterator[_Edge] = frame[1]
        for target, above, place in edges:
            budget -= 1
            if budget < 0:
                return None, budget
            if target not in on_path:
                on_path.add(target)
                value, path = exits[target]
                frames.append([target, iter(inner[target]), value, path, above, place])
                break
        else:
            frames.pop()
            on_path.discard(frame[0])
            if not frames:
                return (frame[2], frame[3]), budget
            parent = frames[-1]
            if frame[4] + frame[2] > parent[2]:
                parent[2], parent[3] = frame[4] + frame[2], (frame[5], frame[3])
    raise AssertionError("unreachable")


def _components(refs: dict[str, list[_Edge]], local: Mapping[str, object]) -> list[list[str]]:
    """The strongly connected components reachable from the root, each after every one
    it reaches."""
    successors = {
        name: [target for target, _, _ in edges if target in local] for name, edges in refs.items()
    }
    return strong_components(["#"], successors)
