"""Reading a schema before any rewrite: shape checks, `$ref` resolution and recursion.

Everything here iterates with explicit stacks, so a schema nested thousands deep or a
Python object that contains itself gets a `SchemaError`, never a `RecursionError`. Once
`preflight` has passed, a schema is at most `MAX_DEPTH` levels deep, which is what makes
the (recursive) dialect rewrites safe.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from allama.schema._errors import SchemaError
from allama.schema._pointer import child, lookup, parse_fragment, quoted

__all__ = [
    "ANNOTATIONS",
    "ARRAY_KEYWORDS",
    "NUMBER_KEYWORDS",
    "OBJECT_KEYWORDS",
    "STRING_KEYWORDS",
    "MAX_DEPTH",
    "SCHEMA_LISTS",
    "SCHEMA_MAPS",
    "SCHEMA_SINGLE",
    "SchemaIndex",
    "check_json",
    "copy_json",
    "preflight",
]

MAX_DEPTH = 128
"""JSON nesting levels a schema may have (objects and arrays, data included)."""

SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
SCHEMA_SINGLE = frozenset(
    {
        "additionalProperties",
        "additionalItems",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contentSchema",
    }
)
# The keywords that constrain one JSON type each (a keyword of another type's is vacuous).
OBJECT_KEYWORDS = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
    }
)
ARRAY_KEYWORDS = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
    }
)
STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
NUMBER_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)


ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "$comment",
        "readOnly",
        "writeOnly",
        "deprecated",
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "contentMediaType",
        "contentEncoding",
        "discriminator",
    }
)
"""Keywords that never change what a schema accepts: removing them is exact."""

_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_NUMBERS = ("minimum", "maximum", "multipleOf")
_COUNTS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)


@dataclass(frozen=True, slots=True)
class SchemaIndex:
    """What `preflight` learnt: the draft, where each `$ref` points, and which targets recurse."""

    root: Mapping[str, Any]
    draft: int
    targets: Mapping[str, str]
    """Each `$ref` string to the pointer of its target."""
    recursive: frozenset[str]
    """Target pointers that can reach themselves through `$ref`s."""
    plain: bool = True
    """Whether the schema is dicts and lists only (no other mappings or tuples)."""
    _found: dict[str, tuple[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    def target(self, ref: str) -> tuple[str, Any]:
        """The pointer and the subschema a `$ref` names."""
        found = self._found.get(ref)
        if found is None:
            pointer = self.targets[ref]
            found = self._found[ref] = (pointer, lookup(self.root, pointer))
        return found


_SCALARS = (str, int, float, bool, type(None))


def copy_json(value: Any) -> Any:
    """A deep copy of JSON data as plain dicts and lists, without recursion."""
    if type(value) in _SCALARS or not isinstance(value, Mapping | list | tuple):
        return value
    top: Any = {} if isinstance(value, Mapping) else []
    stack: list[tuple[Any, Any]] = [(value, top)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, Mapping) else enumerate(source)
        into_dict = type(target) is dict
        for key, item in items:
            kind = type(item)
            if kind in _SCALARS:
                copy: Any = item
            elif kind is dict or kind is list or isinstance(item, Mapping | list | tuple):
                copy = {} if kind is dict or isinstance(item, Mapping) else []
                stack.append((item, copy))
            else:
                copy = item
            if into_dict:
                target[key] = copy
            else:
                target.append(copy)
    return top


def _draft(root: Mapping[str, Any]) -> int:
    uri = root.get("$schema")
    if not isinstance(uri, str):
        return 2020
    for marker, draft in (
        ("draft-03", 4),
        ("draft-04", 4),
        ("draft-06", 6),
        ("draft-07", 7),
        ("2019-09", 2019),
    ):
        if marker in uri:
            return draft
    return 2020


def check_json(schema: Mapping[str, Any]) -> bool:
    """Depth and JSON types of every value, iteratively (a self-containing dict stops at depth).
    What is wrong is a `SchemaError` naming its place (a `datetime` pydantic left in a model's
    `json_schema_extra`), where `json.dumps` raises a bare `TypeError`.

    Returns whether the schema is plain JSON data (dicts and lists only). Scalars are checked
    where they sit, without a visit of their own; when something is wrong, a second walk
    that keeps paths finds it and says where.
    """
    plain = True
    stack: list[tuple[Any, int]] = [(schema, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth = pop()
        kind = type(value)
        if depth >= MAX_DEPTH:
            return _check_json_slowly(schema)
        keyed = kind is dict
        if keyed:
            items: Any = value.items()
        elif kind is list:
            items = enumerate(value)
        elif isinstance(value, Mapping):
            plain, keyed = False, True
            items = value.items()
        elif isinstance(value, tuple):
            plain = False
            items = enumerate(value)
        else:
            return _check_json_slowly(schema)
        for key, item in items:
            if keyed and type(key) is not str:
                return _check_json_slowly(schema)
            sort = type(item)
            if sort is str or sort is int or sort is bool or item is None:
                continue
            if sort is float:
                if not math.isfinite(item):
                    return _check_json_slowly(schema)
                continue
            push((item, depth + 1))
    return plain


def _spell(link: Any) -> str:
    """The pointer of a `(parent link, key)` chain."""
    tokens: list[str | int] = []
    while link is not None:
        link, token = link
        tokens.append(token)
    return child("", *reversed(tokens))


def _check_json_slowly(schema: Mapping[str, Any]) -> bool:
    """`check_json` keeping the path to each value, to name the place of what is wrong."""
    plain = True
    stack: list[tuple[Any, int, Any]] = [(schema, 0, None)]
    while stack:
        value, depth, link = stack.pop()
        if isinstance(value, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                pointer = _spell(link)
                raise SchemaError(
                    pointer, f"the schema nests deeper than {MAX_DEPTH} levels at {quoted(pointer)}"
                )
            if isinstance(value, Mapping):
                plain = plain and type(value) is dict
                for key, item in value.items():
                    if not isinstance(key, str):
                        pointer = _spell(link)
                        raise SchemaError(
                            pointer,
                            f"the object at {quoted(pointer)} has a key that is not a string",
                        )
                    stack.append((item, depth + 1, (link, key)))
            else:
                plain = plain and type(value) is list
                stack.extend((item, depth + 1, (link, i)) for i, item in enumerate(value))
        elif isinstance(value, float):
            if not math.isfinite(value):
                pointer = _spell(link)
                raise SchemaError(pointer, f"the number at {quoted(pointer)} is not finite")
        elif value is not None and not isinstance(value, str | int):
            pointer = _spell(link)
            raise SchemaError(pointer, f"the value at {quoted(pointer)} is not JSON")
    return plain


def _bad(pointer: str, keyword: str, what: str) -> SchemaError:
    at = child(pointer, keyword)
    return SchemaError(at, f"`{keyword}` at {quoted(at)} must be {what}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_MAP, _LIST, _ONE, _ITEMS, _DEPENDENCIES, _TYPE, _REQUIRED, _DEPENDENT = range(8)
_ENUM, _NUMBER, _EXCLUSIVE, _COUNT, _STRING, _UNIQUE = range(8, 14)
_KIND = {
    **dict.fromkeys(SCHEMA_MAPS, _MAP),
    **dict.fromkeys(SCHEMA_LISTS, _LIST),
    **dict.fromkeys(SCHEMA_SINGLE, _ONE),
    "items": _ITEMS,
    "dependencies": _DEPENDENCIES,
    "type": _TYPE,
    "required": _REQUIRED,
    "dependentRequired": _DEPENDENT,
    "enum": _ENUM,
    **dict.fromkeys(_NUMBERS, _NUMBER),
    "exclusiveMinimum": _EXCLUSIVE,
    "exclusiveMaximum": _EXCLUSIVE,
    **dict.fromkeys(_COUNTS, _COUNT),
    "pattern": _STRING,
    "format": _STRING,
    "$ref": _STRING,
    "uniqueItems": _UNIQUE,
}
"""What kind of check each keyword gets; other keywords (annotations, unknown) get none."""


def _names(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(type(n) is str for n in value)


def _check_node(node: Mapping[str, Any], pointer: str, pending: list[tuple[Any, str]]) -> None:
    """Checks one schema object's keywords and queues its subschemas."""
    for keyword, value in node.items():
        kind = _KIND.get(keyword)
        if kind is None:
            continue
        if kind == _MAP:
            if not isinstance(value, Mapping):
                raise _bad(pointer, keyword, "an object of schemas")
            at = child(pointer, keyword)
            pending.extend((sub, child(at, name)) for name, sub in value.items())
        elif kind == _TYPE:
            if type(value) is str:
                if value not in _TYPES:
                    raise _bad(pointer, keyword, "a JSON type name or an array of them")
            elif not (
                isinstance(value, list | tuple)
                and value
                and all(isinstance(k, str) and k in _TYPES for k in value)
            ):
                raise _bad(pointer, keyword, "a JSON type name or an array of them")
        elif kind == _REQUIRED:
            if not _names(value):
                raise _bad(pointer, keyword, "an array of property names")
        elif kind == _ITEMS:
            if isinstance(value, list | tuple):
                at = child(pointer, keyword)
                pending.extend((sub, child(at, i)) for i, sub in enumerate(value))
            else:
                pending.append((value, child(pointer, keyword)))
        elif kind == _STRING:
            if type(value) is not str:
                raise _bad(pointer, keyword, "a string")
        elif kind == _ENUM:
            if not isinstance(value, list | tuple):
                raise _bad(pointer, keyword, "an array")
        elif kind == _LIST:
            if not isinstance(value, list | tuple) or not value:
                raise _bad(pointer, keyword, "a non-empty array of schemas")
            at = child(pointer, keyword)
            pending.extend((sub, child(at, i)) for i, sub in enumerate(value))
        elif kind == _ONE:
            pending.append((value, child(pointer, keyword)))
        elif kind == _NUMBER:
            if not _is_number(value):
                raise _bad(pointer, keyword, "a number")
            if keyword == "multipleOf" and value <= 0:
                raise _bad(pointer, keyword, "greater than 0")
        elif kind == _EXCLUSIVE:
            if not _is_number(value) and not isinstance(value, bool):
                raise _bad(pointer, keyword, "a number")
        elif kind == _COUNT:
            if not _is_number(value) or value < 0 or value != int(value):
                raise _bad(pointer, keyword, "a non-negative integer")
        elif kind == _UNIQUE:
            if not isinstance(value, bool):
                raise _bad(pointer, keyword, "a boolean")
        elif kind == _DEPENDENT:
            if not isinstance(value, Mapping) or not all(_names(v) for v in value.values()):
                raise _bad(pointer, keyword, "an object of arrays of names")
        elif kind == _DEPENDENCIES:
            if not isinstance(value, Mapping):
                raise _bad(pointer, keyword, "an object")
            for name, sub in value.items():
                if not isinstance(sub, list | tuple):
                    pending.append((sub, child(pointer, keyword, name)))
                elif not all(isinstance(item, str) for item in sub):
                    raise _bad(pointer, keyword, "an object of schemas or arrays of names")


def _resolve(ref: str, pointer: str, base: str | None, anchors: Mapping[str, str]) -> str:
    at = child(pointer, "$ref")
    address, hash_mark, fragment = ref.partition("#")
    if address and (base is None or address.rstrip("/") != base.rstrip("/")):
        raise SchemaError(
            at,
            f"the `$ref` `{ref}` at {quoted(at)} points outside this schema (not supported)",
        )
    if not hash_mark or fragment == "":
        return ""
    if not fragment.startswith("/"):
        if fragment in anchors:
            return anchors[fragment]
        raise SchemaError(at, f"the `$ref` `{ref}` at {quoted(at)} names no anchor in this schema")
    return parse_fragment(fragment)


def strong_components(
    starts: Iterable[str], successors: Mapping[str, Iterable[str]]
) -> list[list[str]]:
    """The strongly connected components of the graph `successors` reachable from `starts`,
    each listed after every one it reaches (Tarjan's, without recursion: linear in the
    edges, at any depth)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in starts:
        if start in order:
            continue
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        work: list[tuple[str, Iterator[str]]] = [(start, iter(successors[start]))]
        while work:
            node, pending = work[-1]
            for dest in pending:
                if dest not in order:
                    order[dest] = low[dest] = len(order)
                    stack.append(dest)
                    on_stack.add(dest)
                    work.append((dest, iter(successors[dest])))
                    break
                if dest in on_stack:
                    low[node] = min(low[node], order[dest])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == order[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def _recursive(refs: list[tuple[str, str]]) -> frozenset[str]:
    """The targets that can reach themselves: a `$ref` inside a target (at it or below it)
    is an edge to the target it names; a target recurses when it sits on a cycle.

    Strongly connected components (`strong_components`), so the cost is linear in the
    references times the depth of their places, however many targets there are.
    """
    edges: dict[str, set[str]] = {target: set() for _, target in refs}
    for origin, dest in refs:
        place = origin
        while True:
            out = edges.get(place)
            if out is not None:
                out.add(dest)
            if not place:
                break
            place = place.rpartition("/")[0]
    recursive: set[str] = set()
    for component in strong_components(edges, edges):
        if len(component) > 1 or component[0] in edges[component[0]]:
            recursive.update(component)
    return frozenset(recursive)


def preflight(schema: Any) -> SchemaIndex:
    """Check that `schema` can be walked and index its references; `SchemaError` if not."""
    if not isinstance(schema, Mapping):
        raise SchemaError("", "the schema at `/` must be a JSON object")
    plain = check_json(schema)
    root_id = schema.get("$id", schema.get("id"))
    base = (
        root_id.partition("#")[0]
        if isinstance(root_id, str) and root_id.partition("#")[0]
        else None
    )
    pending: list[tuple[Any, str]] = [(schema, "")]
    seen: set[str] = set()
    refs: list[tuple[str, str]] = []
    raw_refs: list[tuple[str, str]] = []
    anchors: dict[str, str] = {}
    while pending:
        node, pointer = pending.pop()
        if pointer in seen:
            continue
        seen.add(pointer)
        if type(node) is not dict:
            if isinstance(node, bool):
                continue
            if not isinstance(node, Mapping):
                raise SchemaError(
                    pointer, f"the schema at {quoted(pointer)} must be an object or a boolean"
                )
        _check_node(node, pointer, pending)
        if "$anchor" in node or "$id" in node or "id" in node:
            for key in ("$anchor", "$id", "id"):
                name = node.get(key)
                if isinstance(name, str):
                    anchor = name[1:] if key != "$anchor" and name.startswith("#") else name
                    if key == "$anchor" or name.startswith("#"):
                        anchors.setdefault(anchor, pointer)
        ref = node.get("$ref")
        if type(ref) is str:
            raw_refs.append((pointer, ref))
    targets: dict[str, str] = {}
    queue = list(raw_refs)
    while queue:
        pointer, ref = queue.pop()
        target = _resolve(ref, pointer, base, anchors)
        at = child(pointer, "$ref")
        try:
            found = lookup(schema, target)
        except KeyError:
            raise SchemaError(
                at, f"the `$ref` `{ref}` at {quoted(at)} does not resolve in this schema"
            ) from None
        if target not in seen:
            pending = [(found, target)]
            while pending:
                node, sub_pointer = pending.pop()
                if sub_pointer in seen:
                    continue
                seen.add(sub_pointer)
                if isinstance(node, bool):
                    continue
                if not isinstance(node, Mapping):
                    raise SchemaError(
                        at, f"the `$ref` `{ref}` at {quoted(at)} does not point at a schema"
                    )
                _check_node(node, sub_pointer, pending)
                if isinstance(node.get("$ref"), str):
                    queue.append((sub_pointer, node["$ref"]))
        elif not isinstance(found, Mapping | bool):
            raise SchemaError(at, f"the `$ref` `{ref}` at {quoted(at)} does not point at a schema")
        targets[ref] = target
        refs.append((pointer, target))
    return SchemaIndex(
        root=schema,
        draft=_draft(schema),
        targets=targets,
        recursive=_recursive(refs),
        plain=plain,
    )
