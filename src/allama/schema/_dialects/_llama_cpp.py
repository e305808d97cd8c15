"""llama.cpp's server: its own JSON-Schema-to-grammar converter, measured against the real server.

The chat endpoint compiles a schema with llama.cpp's converter (not llguidance, even in
builds that carry it). Tests against the server (`tests/test_local_integration.py`) show
it enforces what `grammar_engine` says a grammar engine enforces, with three differences
handled here:

- patterns: `\\d` and `\\w` are unknown to the converter (it then accepts any string), so
  they are spelled out as the classes they are; a pattern with anything else it cannot
  compile faithfully (`\\s`, `\\/`, `\\n`, negated classes, lookarounds, lazy quantifiers)
  is removed, widening the schema, since the server would otherwise ignore it, fail, or
  write raw control characters into the JSON string;
- `format` `date`, `time` and `date-time` are enforced in shape only (`0000-02-31` passes);
- an integer whose only bound is an upper bound below zero makes the server fail every
  generation (HTTP 500), so that bound is removed, widening the schema;
- a length or item-count bound above 2000 exceeds the grammar's repetition limit (HTTP 400,
  "failed to parse grammar"), so it is removed, widening the schema;
- a boolean `items` (as in `prefixItems` + `items: false`) is rejected with HTTP 400, so it
  is removed, widening the schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from allama.schema._dialects._grammar import grammar_engine
from allama.schema._pointer import child, quoted
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._walk import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_SINGLE, copy_json
from allama.types import WarningKind

__all__ = ["llama_cpp", "llama_cpp_pattern"]

_CLASS_ESCAPES = {"d": "0-9", "w": "A-Za-z0-9_"}
_LITERAL_ESCAPES = frozenset(".-\\[](){}*+?|^$")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")

_SHAPE_FORMATS = frozenset({"date", "time", "date-time"})
_LOWER = ("minimum", "exclusiveMinimum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_MAX_REPETITIONS = 2000


def llama_cpp_pattern(pattern: str) -> tuple[str | None, str]:
    """`pattern` as llama.cpp's converter compiles it faithfully, or `None` and why not.

    >>> llama_cpp_pattern(r"^[A-Z]{2}-\\d{3}$")
    ('^[A-Z]{2}-[0-9]{3}$', '')
    >>> llama_cpp_pattern(r"^a\\sb$")
    (None, 'the escape `\\\\s`')
    """
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        after = pattern[i + 1 : i + 2]
        if char == "\\":
            if after in _CLASS_ESCAPES:
                spelled = _CLASS_ESCAPES[after]
                out.append(spelled if in_class else f"[{spelled}]")
                i += 2
            elif after and after in _LITERAL_ESCAPES:
                out.append(char + after)
                i += 2
            elif after == "u" and _HEX4.fullmatch(pattern[i + 2 : i + 6]):
                code = int(pattern[i + 2 : i + 6], 16)
                if code < 0x20 or chr(code) in '"\\':
                    return None, "an escaped control character, quote or backslash"
                out.append(pattern[i : i + 6])
                i += 6
            else:
                return None, f"the escape `\\{after}`"
            continue
        if char == '"' or ord(char) < 0x20:
            return None, "a quote or control character"
        if in_class:
            in_class = char != "]"
        elif char == "[":
            if after == "^":
                return None, "a negated character class"
            in_class = True
            if after == "]":
                out.append("[]")
                i += 2
                continue
        elif char == ".":
            # Compiled to any character but a line break, inside the JSON string the
            # grammar writes: a raw quote, backslash or control character breaks it.
            return None, "`.`, which it reads as any character but a line break"
        elif char == "(" and after == "?" and pattern[i + 2 : i + 3] != ":":
            return None, "a lookaround or named group"
        elif char in "*+?}" and after == "?":
            return None, "a lazy quantifier"
        out.append(char)
        i += 1
    return "".join(out), ""


def _negative_ceiling(node: Mapping[str, Any]) -> list[str]:
    """The upper-bound keywords llama.cpp cannot compile: below zero with no lower bound."""
    if node.get("type") != "integer" or any(key in node for key in _LOWER):
        return []
    found = []
    maximum = node.get("maximum")
    if isinstance(maximum, int | float) and not isinstance(maximum, bool) and maximum < 0:
        found.append("maximum")
    exclusive = node.get("exclusiveMaximum")
    if isinstance(exclusive, int | float) and not isinstance(exclusive, bool) and exclusive <= 0:
        found.append("exclusiveMaximum")
    return found


def _walk(node: Any, pointer: str, visit: list[tuple[dict[str, Any], str]]) -> None:
    """Every subschema that is an object, with its pointer (values in `const`/`enum` skipped)."""
    if not isinstance(node, dict):
        return
    visit.append((node, pointer))
    for key, value in node.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                _walk(sub, child(pointer, key, name), visit)
        elif key in SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                _walk(sub, child(pointer, key, i), visit)
        elif key in SCHEMA_SINGLE or key == "items":
            _walk(value, child(pointer, key), visit)


def llama_cpp(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` for llama.cpp's server, with notes on what its grammar does not enforce.

    Raises `SchemaError` for a schema that is not valid JSON Schema.

    >>> [n.message for n in llama_cpp({"type": "integer", "maximum": -1}).notes]
    ['`maximum` was removed at `/`: llama.cpp fails on a negative upper bound without a lower one']
    """
    base = grammar_engine(schema)
    out = copy_json(base.schema)
    notes = list(base.notes)
    nodes: list[tuple[dict[str, Any], str]] = []
    _walk(out, "", nodes)
    for node, pointer in nodes:
        at = quoted(pointer)
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            spelled, why = llama_cpp_pattern(pattern)
            if spelled is None:
                del node["pattern"]
                notes.append(
                    SchemaNote(
                        WarningKind.APPROXIMATED,
                        pointer or "/",
                        f"`pattern` was removed at {at}: llama.cpp's grammar cannot compile {why}",
                    )
                )
            else:
                node["pattern"] = spelled
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in _SHAPE_FORMATS:
            notes.append(
                SchemaNote(
                    WarningKind.APPROXIMATED,
                    pointer or "/",
                    f"`format` `{fmt}` is enforced in shape only by the grammar at {at}",
                )
            )
        for key in _negative_ceiling(node):
            del node[key]
            notes.append(
                SchemaNote(
                    WarningKind.APPROXIMATED,
                    pointer or "/",
                    f"`{key}` was removed at {at}: llama.cpp fails on a negative upper bound "
                    "without a lower one",
                )
            )
        for key in _COUNTS:
            count = node.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count > _MAX_REPETITIONS:
                del node[key]
                notes.append(
                    SchemaNote(
                        WarningKind.APPROXIMATED,
                        pointer or "/",
                        f"`{key}` was removed at {at}: llama.cpp's grammar allows at most "
                        f"{_MAX_REPETITIONS} repetitions",
                    )
                )
        if isinstance(node.get("items"), bool):
            del node["items"]
            notes.append(
                SchemaNote(
                    WarningKind.APPROXIMATED,
                    pointer or "/",
                    f"boolean `items` was removed at {at}: llama.cpp rejects it",
                )
            )
    notes.sort(key=lambda n: n.pointer)
    return Rewrite(schema=out, notes=tuple(notes))
