"""Grammar engines: Ollama `format` and llama.cpp-style JSON-Schema-to-grammar converters.

The schema goes whole; the grammar enforces types, `properties`/`required`, `enum`,
`const`, `anyOf`, local `$ref`s, `items` with `minItems`/`maxItems`, string lengths, a few
formats, integer bounds and anchored patterns. The notes say what it ignores. An
unanchored `pattern` makes the converter fail, so it is the one keyword removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from allama.schema._dialects._engine import branches_disjoint
from allama.schema._pointer import child, lookup, quoted
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._walk import (
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_SINGLE,
    copy_json,
    preflight,
)
from allama.types import WarningKind

__all__ = ["grammar_engine"]

_FORMATS = frozenset(
    {"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"}
)
_IGNORED = (
    "multipleOf",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
    "additionalItems",
)
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _schema_children(node: Mapping[str, Any], pointer: str) -> list[tuple[Any, str]]:
    found: list[tuple[Any, str]] = []
    for key, value in node.items():
        if key in SCHEMA_MAPS:
            found.extend((sub, child(pointer, key, name)) for name, sub in value.items())
        elif key in SCHEMA_LISTS or (key == "items" and isinstance(value, list | tuple)):
            found.extend((sub, child(pointer, key, i)) for i, sub in enumerate(value))
        elif key in SCHEMA_SINGLE or key == "items":
            found.append((value, child(pointer, key)))
        elif key == "dependencies":
            found.extend(
                (sub, child(pointer, key, name))
                for name, sub in value.items()
                if not isinstance(sub, list | tuple)
            )
    return found


def grammar_engine(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` for a grammar engine, whole, with notes on the keywords the grammar ignores.

    Raises `SchemaError` for a schema that is not valid JSON Schema.

    >>> [n.message for n in grammar_engine({"type": "string", "format": "email"}).notes]
    ['`format` `email` is not enforced by the grammar at `/`']
    """
    index = preflight(schema)
    notes: list[SchemaNote] = []
    seen: set[str] = set()
    removals: list[str] = []

    def note(pointer: str, message: str) -> None:
        notes.append(SchemaNote(WarningKind.APPROXIMATED, pointer or "/", message))

    pending: list[tuple[Any, str]] = [(schema, "")]
    while pending:
        node, pointer = pending.pop()
        if pointer in seen or not isinstance(node, Mapping):
            continue
        seen.add(pointer)
        at = quoted(pointer)
        pattern = node.get("pattern")
        if isinstance(pattern, str) and not (pattern.startswith("^") and pattern.endswith("$")):
            removals.append(child(pointer, "pattern"))
            note(pointer, f"`pattern` was removed at {at}: the grammar needs `^` and `$` anchors")
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt not in _FORMATS:
            note(pointer, f"`format` `{fmt}` is not enforced by the grammar at {at}")
        if node.get("type") != "integer":
            for key in _BOUNDS:
                if key in node:
                    note(pointer, f"`{key}` is not enforced by the grammar at {at} (only integers)")
        for key in _IGNORED:
            if key in node:
                note(pointer, f"`{key}` is not enforced by the grammar at {at}")
        if isinstance(node.get("items"), list | tuple):
            note(pointer, f"tuple `items` are not enforced by the grammar at {at}")
        if "allOf" in node:
            note(pointer, f"`allOf` is only partly enforced by the grammar at {at}")
        if "oneOf" in node and not branches_disjoint(index, list(node["oneOf"])):
            note(pointer, f"`oneOf` is enforced as `anyOf` by the grammar at {at}")
        if "properties" in node and ("anyOf" in node or "oneOf" in node):
            note(pointer, f"`properties` beside a union may be ignored by the grammar at {at}")
        pending.extend(_schema_children(node, pointer))
    out = copy_json(schema)
    for pointer in removals:
        parent = lookup(out, pointer.rsplit("/", 1)[0])
        parent.pop("pattern", None)
    notes.sort(key=lambda n: n.pointer)
    return Rewrite(schema=out, notes=tuple(notes))
