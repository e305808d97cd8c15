"""llama.cpp's server: its own JSON-Schema-to-grammar converter, measured against the real server.

The chat endpoint compiles a schema with llama.cpp's converter (not llguidance, even in
builds that carry it). Tests against the server (`tests/test_local_integration.py`) show
it enforces what `grammar_engine` says a grammar engine enforces, with these differences
handled here:

- patterns: `\\d` and `\\w` are unknown to the converter (it then accepts any string), so
  they are spelled out as the classes they are, and `^a$|^b$` becomes `^(a|b)$` (it takes
  only one anchor at each end); a pattern with anything else it cannot compile faithfully
  (`\\s`, `\\/`, `\\n`, an escaped backslash, negated classes, lookarounds, lazy quantifiers,
  anchors inside) is removed, widening the schema, since the server would otherwise ignore
  it, fail, or write raw control characters or backslashes into the JSON string;
- a string node compiles to its `pattern` alone, else to its `format` (`uuid`, `date`,
  `time`, `date-time`) alone, and an `enum` node to its values alone: the keywords beside
  them are noted as not enforced (values of an `enum` that break a length, count or bound
  beside it are removed, which changes nothing it accepts);
- `format` `date`, `time` and `date-time` are enforced in shape only (`0000-02-31` passes);
- the converter reads an integer's `minimum` and skips an `exclusiveMinimum` beside it (and
  likewise above), so each side is sent as the one inclusive integer bound it means; an
  empty range makes the server fail every generation (HTTP 500): it is a node that accepts
  nothing (below);
- an integer whose only bound is an upper bound below zero makes the server fail every
  generation (HTTP 500), so that bound is removed, widening the schema;
- a length or item-count bound above 2000 exceeds the grammar's repetition limit (HTTP 400,
  "failed to parse grammar"), so it is removed, widening the schema;
- a boolean `items` (as in `prefixItems` + `items: false`) is rejected with HTTP 400, so it
  is removed, widening the schema;
- any other boolean subschema is rejected too ("schema must be an object"): `true` is sent
  as `{}`; a node that accepts nothing (`false`, a `$ref` to one, a union of them, an object
  that requires one) is left out where that changes nothing (a union's branch, an optional
  property of a closed object) and elsewhere sent as `{}`, widening the schema.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from allama.schema._dialects._grammar import grammar_engine
from allama.schema._pointer import child, quoted
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._walk import copy_json
from allama.types import WarningKind

__all__ = ["llama_cpp", "llama_cpp_pattern"]

_CLASS_ESCAPES = {"d": "0-9", "w": "A-Za-z0-9_"}
_LITERAL_ESCAPES = frozenset(".-[](){}*+?|^$")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")

_SHAPE_FORMATS = frozenset({"date", "time", "date-time"})
_FORMAT_LENGTHS = {
    "date": (10, 10),
    "time": (9, 18),
    "date-time": (20, 29),
    **dict.fromkeys(("uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"), (36, 36)),
}
"""Formats the converter compiles to a rule of its own, and the lengths that rule writes."""
_LENGTHS = ("minLength", "maxLength")
_LOWER = ("minimum", "exclusiveMinimum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_MAX_REPETITIONS = 2000


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


_ENUM_CHECKS: dict[str, Callable[[Any, Any], bool]] = {
    "minLength": lambda v, n: not isinstance(v, str) or len(v) >= n,
    "maxLength": lambda v, n: not isinstance(v, str) or len(v) <= n,
    "minItems": lambda v, n: not isinstance(v, list) or len(v) >= n,
    "maxItems": lambda v, n: not isinstance(v, list) or len(v) <= n,
    "minimum": lambda v, n: not _number(v) or v >= n,
    "maximum": lambda v, n: not _number(v) or v <= n,
    "exclusiveMinimum": lambda v, n: not _number(v) or v > n,
    "exclusiveMaximum": lambda v, n: not _number(v) or v < n,
    "required": lambda v, n: not isinstance(v, dict) or all(name in v for name in n),
}
"""Keywords beside an `enum` that the values can be checked against exactly."""
_ENUM_UNCHECKED = frozenset(
    {"pattern", "format", "properties", "additionalProperties", "items", "prefixItems"}
)
"""Keywords beside an `enum` the converter skips and no value check stands in for (the
grammar engine notes the others it ignores anywhere)."""


def _anchored_at_end(text: str) -> bool:
    """Whether `text` ends with a `$` that is an anchor, not an escaped dollar."""
    slashes = len(text) - 1 - len(text[:-1].rstrip("\\"))
    return text.endswith("$") and slashes % 2 == 0


def _alternatives(pattern: str) -> list[str] | None:
    """`pattern` split at its top-level `|`s; `None` when its parentheses do not balance."""
    parts: list[str] = []
    depth = 0
    in_class = False
    start = i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":  # `[]` is an empty class, `[^]` any character
                in_class = False
                i += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return None
        elif char == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    if depth != 0:
        return None
    parts.append(pattern[start:])
    return parts


def _spell(body: str) -> tuple[str | None, str]:
    """The inside of an anchored pattern as the converter compiles it faithfully."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(body):
        char = body[i]
        after = body[i + 1 : i + 2]
        if char == "\\":
            if after in _CLASS_ESCAPES:
                spelled = _CLASS_ESCAPES[after]
                out.append(spelled if in_class else f"[{spelled}]")
                i += 2
            elif after == "\\":
                # Copied into the grammar as it is: a raw backslash inside the JSON string.
                return None, "an escaped backslash, which it writes unescaped into the JSON string"
            elif after and after in _LITERAL_ESCAPES:
                out.append(char + after)
                i += 2
            elif after == "u" and _HEX4.fullmatch(body[i + 2 : i + 6]):
                code = int(body[i + 2 : i + 6], 16)
                if code < 0x20 or chr(code) in '"\\':
                    return None, "an escaped control character, quote or backslash"
                out.append(body[i : i + 6])
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
        elif char in "^$":
            # Newer converters then accept any string; older ones read a literal `^` or `$`.
            return None, "an anchor inside the pattern"
        elif char == "(" and after == "?" and body[i + 2 : i + 3] != ":":
            return None, "a lookaround or named group"
        elif char in "*+?}" and after == "?":
            return None, "a lazy quantifier"
        out.append(char)
        i += 1
    return "".join(out), ""


def llama_cpp_pattern(pattern: str) -> tuple[str | None, str]:
    """`pattern` as llama.cpp's converter compiles it faithfully, or `None` and why not.

    >>> llama_cpp_pattern(r"^[A-Z]{2}-\\d{3}$")
    ('^[A-Z]{2}-[0-9]{3}$', '')
    >>> llama_cpp_pattern(r"^\\d{5}$|^\\d{5}-\\d{4}$")
    ('^([0-9]{5}|[0-9]{5}-[0-9]{4})$', '')
    >>> llama_cpp_pattern(r"^a\\sb$")
    (None, 'the escape `\\\\s`')
    """
    alternatives = _alternatives(pattern)
    if alternatives is None:
        return None, "unbalanced parentheses"
    bodies: list[str] = []
    for alternative in alternatives:
        # The converter strips one `^` and one `$` and compiles the rest as one expression.
        if len(alternative) < 2 or not (
            alternative.startswith("^") and _anchored_at_end(alternative)
        ):
            return None, "an alternative without `^` at its start and `$` at its end"
        spelled, why = _spell(alternative[1:-1])
        if spelled is None:
            return None, why
        bodies.append(spelled)
    if len(bodies) == 1:
        return f"^{bodies[0]}$", ""
    # A plain group: older converters do not read `(?:`.
    return "^(" + "|".join(bodies) + ")$", ""


def _negative_ceiling(node: Mapping[str, Any]) -> list[str]:
    """The upper-bound keywords llama.cpp cannot compile: below zero with no lower bound."""
    if node.get("type") != "integer" or any(key in node for key in _LOWER):
        return []
    found = []
    maximum = node.get("maximum")
    if _number(maximum) and maximum < 0:
        found.append("maximum")
    exclusive = node.get("exclusiveMaximum")
    if _number(exclusive) and exclusive <= 0:
        found.append("exclusiveMaximum")
    return found


def _bound(
    node: dict[str, Any],
    inclusive: str,
    exclusive: str,
    inward: Callable[[float], int],
    past: Callable[[float], int],
    tightest: Callable[[list[int]], int],
) -> int | None:
    """One side of an integer's range as one inclusive integer bound, written as such when
    the converter would misread it: it skips an exclusive bound beside an inclusive one, and
    cuts the fraction off a bound (`minimum: 1.5` would let 1 through)."""
    given = {
        key: node[key]
        for key in (inclusive, exclusive)
        if _number(node.get(key)) and (isinstance(node[key], int) or math.isfinite(node[key]))
    }
    if not given:
        return None
    bound = tightest([inward(v) if key == inclusive else past(v) for key, v in given.items()])
    if len(given) == 2 or not all(isinstance(v, int) or v.is_integer() for v in given.values()):
        node.pop(exclusive, None)
        node[inclusive] = bound
    return bound


def _integer_range(node: dict[str, Any]) -> bool:
    """An integer's bounds as the converter reads them right; False when none is in range
    (the server fails every generation on an empty range, HTTP 500)."""
    if node.get("type") != "integer":
        return True
    low = _bound(node, "minimum", "exclusiveMinimum", math.ceil, lambda v: math.floor(v) + 1, max)
    high = _bound(node, "maximum", "exclusiveMaximum", math.floor, lambda v: math.ceil(v) - 1, min)
    return low is None or high is None or low <= high


def _compiled_format(fmt: Any) -> bool:
    """Whether the grammar engine counts `fmt` enforced (it notes the others)."""
    return fmt in _SHAPE_FORMATS or fmt == "uuid"


def _may_be_string(node: Mapping[str, Any]) -> bool:
    kinds = node.get("type")
    return kinds is None or kinds == "string" or (isinstance(kinds, list) and "string" in kinds)


class _Fix:
    """One pass over the grammar engine's output, node by node, children first."""

    def __init__(self, dead: frozenset[str]) -> None:
        self.dead = dead
        """`$ref`s to definitions that accept nothing."""
        self.notes: list[SchemaNote] = []

    def note(self, pointer: str, message: str) -> None:
        self.notes.append(SchemaNote(WarningKind.APPROXIMATED, pointer or "/", message))

    def nothing(self, pointer: str) -> dict[str, Any]:
        self.note(
            pointer,
            f"the subschema at {quoted(pointer)} accepts nothing; llama.cpp cannot say so, "
            "so it accepts anything",
        )
        return {}

    def schema(self, value: Any, pointer: str) -> Any:
        """`value` for the converter; `False` when it accepts nothing."""
        if value is True:
            return {}
        if not isinstance(value, dict):
            return value
        if value.get("$ref") in self.dead:
            return False
        if not self.children(value, pointer):
            return False
        return value if self.keywords(value, pointer) else False

    def children(self, node: dict[str, Any], pointer: str) -> bool:
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            node["additionalProperties"] = self.schema(
                extra, child(pointer, "additionalProperties")
            )
        if "items" in node and not isinstance(node["items"], list):
            node["items"] = self.schema(node["items"], child(pointer, "items"))
        prefix = node.get("prefixItems")
        if isinstance(prefix, list):
            for i, sub in enumerate(prefix):
                at = child(pointer, "prefixItems", i)
                fixed = self.schema(sub, at)
                prefix[i] = self.nothing(at) if fixed is False else fixed
        union = node.get("anyOf")
        if isinstance(union, list):
            branches = [self.schema(sub, child(pointer, "anyOf", i)) for i, sub in enumerate(union)]
            node["anyOf"] = [branch for branch in branches if branch is not False]
            if not node["anyOf"]:
                return False
        props = node.get("properties")
        if isinstance(props, dict):
            required = node.get("required", ())
            closed = node.get("additionalProperties", False) is False
            for name in list(props):
                at = child(pointer, "properties", name)
                fixed = self.schema(props[name], at)
                if fixed is not False:
                    props[name] = fixed
                elif name in required:
                    if node.get("type") == "object":
                        return False  # every value is an object, and none can hold it
                    props[name] = self.nothing(at)
                else:
                    # The key may not appear: left out of a closed object, the converter
                    # rejects it all the same.
                    del props[name]
                    if not closed:
                        self.note(
                            at,
                            f"the subschema at {quoted(at)} accepts nothing; llama.cpp cannot "
                            "say so, so the key is allowed like any other",
                        )
        return True

    def keywords(self, node: dict[str, Any], pointer: str) -> bool:
        """The node's own keywords for the converter; False when it accepts nothing."""
        live = self.enum(node, pointer) if "enum" in node else self.value(node, pointer)
        if isinstance(node.get("items"), bool):
            del node["items"]
            self.note(
                pointer, f"boolean `items` was removed at {quoted(pointer)}: llama.cpp rejects it"
            )
        return live

    def value(self, node: dict[str, Any], pointer: str) -> bool:
        at = quoted(pointer)
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            spelled, why = llama_cpp_pattern(pattern)
            if spelled is None:
                del node["pattern"]
                self.note(
                    pointer,
                    f"`pattern` was removed at {at}: llama.cpp's grammar cannot compile {why}",
                )
            else:
                node["pattern"] = spelled
        self.string(node, pointer)
        for key in _negative_ceiling(node):
            del node[key]
            self.note(
                pointer,
                f"`{key}` was removed at {at}: llama.cpp fails on a negative upper bound "
                "without a lower one",
            )
        if not _integer_range(node):
            return False
        for key in _COUNTS:
            count = node.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count > _MAX_REPETITIONS:
                del node[key]
                self.note(
                    pointer,
                    f"`{key}` was removed at {at}: llama.cpp's grammar allows at most "
                    f"{_MAX_REPETITIONS} repetitions",
                )
        return True

    def string(self, node: dict[str, Any], pointer: str) -> None:
        """Notes what the converter skips beside the `pattern` or `format` it compiles."""
        if not _may_be_string(node):
            return
        at = quoted(pointer)
        fmt = node.get("format")
        lengths = _FORMAT_LENGTHS.get(fmt) if isinstance(fmt, str) else None
        if "pattern" in node:
            skipped = [key for key in _LENGTHS if key in node]
            if _compiled_format(fmt):
                skipped.append("format")
            for key in skipped:
                self.note(
                    pointer,
                    f"`{key}` is not enforced by the grammar at {at}: llama.cpp compiles "
                    "only the `pattern` beside it",
                )
            return
        if lengths is None:
            return
        shortest, longest = lengths
        for key in _LENGTHS:
            value = node.get(key)
            if _number(value) and (value > shortest if key == "minLength" else value < longest):
                self.note(
                    pointer,
                    f"`{key}` is not enforced by the grammar at {at}: llama.cpp compiles "
                    f"only the `format` `{fmt}` beside it",
                )
        if fmt in _SHAPE_FORMATS:
            self.note(pointer, f"`format` `{fmt}` is enforced in shape only by the grammar at {at}")

    def enum(self, node: dict[str, Any], pointer: str) -> bool:
        """The values that hold under the keywords beside them, which the converter skips;
        False when none does."""
        values = node["enum"]
        if not isinstance(values, list):
            return True
        for key, check in _ENUM_CHECKS.items():
            if key in node:
                values = [value for value in values if check(value, node[key])]
        if not values:
            return False
        node["enum"] = values
        for key in sorted(_ENUM_UNCHECKED & node.keys()):
            if key == "format" and not _compiled_format(node[key]):
                continue
            self.note(
                pointer,
                f"`{key}` is not enforced by the grammar at {quoted(pointer)}: llama.cpp "
                "compiles only the `enum` values beside it",
            )
        return True


def _dead_definitions(defs: Mapping[str, Any]) -> frozenset[str]:
    """`$ref`s to the definitions that accept nothing: none at first, then those found so
    given the ones before, until no more are found."""
    dead: frozenset[str] = frozenset()
    while True:
        trial = _Fix(dead)
        found = frozenset(
            "#" + child("", "$defs", name)
            for name, sub in defs.items()
            if trial.schema(copy_json(sub), child("", "$defs", name)) is False
        )
        if found <= dead:
            return dead
        dead |= found


def llama_cpp(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` for llama.cpp's server, with notes on what its grammar does not enforce.

    Raises `SchemaError` for a schema that is not valid JSON Schema.

    >>> [n.message for n in llama_cpp({"type": "integer", "maximum": -1}).notes]
    ['`maximum` was removed at `/`: llama.cpp fails on a negative upper bound without a lower one']
    """
    base = grammar_engine(schema)
    out = copy_json(base.schema)
    defs = out.pop("$defs", None)
    dead = _dead_definitions(defs) if isinstance(defs, dict) else frozenset()
    fix = _Fix(dead)
    if isinstance(defs, dict):
        live = {}
        for name, sub in defs.items():
            ref = "#" + child("", "$defs", name)
            if ref not in dead:  # a dead one is no longer referred to: every `$ref` went
                live[name] = fix.schema(sub, child("", "$defs", name))
        if live:
            out["$defs"] = live
    root = fix.schema(out, "")
    if root is False:
        root = fix.nothing("")
    notes = [*base.notes, *fix.notes]
    notes.sort(key=lambda n: n.pointer)
    return Rewrite(schema=root, notes=tuple(notes))
