"""llama.cpp's server: its own JSON-Schema-to-grammar converter, measured against the real server.

The chat endpoint compiles a schema with llama.cpp's converter (not llguidance, even in
builds that carry it). Tests against the server (`tests/test_local_integration.py`,
`tests/test_llama_cpp_dialect_fixes.py`) show it enforces what `grammar_engine` says a
grammar engine enforces, with these differences handled here:

- patterns: `\\d` and `\\w` are unknown to the converter (it then accepts any string), so
  `llama_cpp_pattern` spells them out as their ASCII classes (a pattern of a type, where they
  are Unicode's classes, has them removed first by the grammar dialect), and `^a$|^b$`
  becomes `^(a|b)$` (it takes only one anchor at each end). Escaped punctuation is
  written as the converter reads it:
  inside a class it knows only `\\-`, `\\[`, `\\]` (any other escape there makes it accept any
  string), so `[a\\.]` is sent as `[a.]`; outside, `\\/` and the like become the character. It
  merges a run of literal characters into one and repeats the whole run when an escaped or
  non-ASCII character is quantified (`ab\\.?`), so such a character is sent as a one-character
  class (`ab[.]?`). A class range that covers a quote, a backslash or a control character
  (`[ -~]`) would let the grammar write it raw into the JSON string: the range leaves them
  out (the pattern is narrowed, with a note). A pattern with anything else it cannot compile
  faithfully (`\\s`, an escaped backslash, negated or empty classes, `.`, lookarounds, lazy
  quantifiers, anchors inside, a repetition over 2000 or with its bounds reversed) is
  removed, widening the schema, since the server would otherwise ignore it, fail, run out of
  memory or write raw control characters or backslashes into the JSON string;
- a string node compiles to its `pattern` alone, else to its `format` (`uuid`, `date`,
  `time`, `date-time`) alone, and an `enum` node to its values alone: the keywords beside
  them are noted as not enforced (values of an `enum` that break a length, count or bound
  beside it are removed, which changes nothing it accepts; so are those of the one-type
  branches an `enum` of several types becomes, whose keywords stay beside the union);
- `format` `date`, `time` and `date-time` are enforced in shape only (`0000-02-31` passes);
- integer bounds (whenever `integer` is one of the types): the converter reads an integer's
  `minimum` and skips an `exclusiveMinimum` beside it (and likewise above), so each side is
  sent as the one inclusive integer bound it means. Without both bounds it writes at most 16
  digits (`tweet_id: int` cut short), misreads a `minimum` of 100 or more (`minimum: 100`
  lets 10 through) and fails every generation on a negative `maximum` (HTTP 500), so a side
  without a bound gets the widest one the converter reads, 64 bits' end; it writes no integer
  beyond that, so an integer allowed past it is narrowed there (noted), and a range with no
  64-bit integer in it has its bounds removed (noted); an empty range is a node that accepts
  nothing (below);
- a number (`type: number`) is written with at most 16 digits before the point and 16 after
  it, and with an exponent beyond: every value can be written, so nothing is noted (a model
  writing a longer one out in full is cut short);
- a string's length is counted in the characters written, escapes counted as one each: an
  escaped surrogate pair (`\\ud83d\\ude00`, one character past U+FFFF) counts as two, so a
  `minLength` of 2 or more lets a shorter string through (noted as not fully enforced); a
  `maxLength` refuses no value the type takes (the grammar lets the model write such a
  character raw, as one), only the escaped spelling of one at the limit, which it cuts to a
  lone surrogate (a parse error, retried);
- a string length or item-count range that is empty (`minLength` above `maxLength`) makes
  the server's grammar parser allocate without limit: no string (or array) is allowed there;
- a length or item-count bound above 2000 exceeds the grammar's repetition limit (HTTP 400,
  "failed to parse grammar"), so it is removed, widening the schema; a whole-number float
  count (`minLength: 2.0`) is refused, so it is sent as an integer;
- a `required` key missing from `properties` is dropped by the converter: an open object
  gets it as a property (of the `additionalProperties` schema), a closed one accepts nothing;
- `$ref: "#"` is refused ("only references into the same document"): the root moves into
  `$defs` and the root refers to it;
- `prefixItems` is read as a tuple of exactly its length, and not at all beside `items`
  (which then holds every item): it is sent as the tuple only where the schema allows that
  length alone (`tuple[int, str]`), else as `items` that each may match any position's
  schema or the rest's, widening the schema (noted); `items: false` after a tuple becomes a
  `maxItems`;
- a boolean `items` (as in `items: false` alone) is rejected with HTTP 400, so it is removed,
  widening the schema;
- any other boolean subschema is rejected too ("schema must be an object"): `true` is sent
  as `{}`; a node that accepts nothing (`false`, a `$ref` to one, a union of them, an object
  that requires one) is left out where that changes nothing (a union's branch, an optional
  property of a closed object, a type of several) and elsewhere sent as `{}`, widening the
  schema.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeGuard

from allama.schema._dialects._engine import vacuous_keywords
from allama.schema._dialects._grammar import _Grammar
from allama.schema._errors import SchemaError
from allama.schema._pointer import child, quoted
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._walk import copy_json
from allama.types import WarningKind

__all__ = ["llama_cpp", "llama_cpp_pattern"]

_CLASS_ESCAPES = {"d": "0-9", "w": "A-Za-z0-9_"}
_SYNTAX = frozenset("|.()[]{}*+?^$")
"""What the converter reads as pattern syntax outside a class, so written escaped there."""
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_REPEAT = re.compile(r"\{(?:(\d+)(,(\d*))?|,(\d+))\}")
"""`{n}`, `{n,}`, `{n,m}` and `{,m}`; any other `{` is a literal brace."""
_NARROWED = "the quotes, backslashes and control characters a class range covers"

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
_UPPER = ("maximum", "exclusiveMaximum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")
_WHOLE = (*_COUNTS, "minProperties", "maxProperties", "minContains", "maxContains")
_RANGES = (("minLength", "maxLength", "string"), ("minItems", "maxItems", "array"))
_MAX_REPETITIONS = 2000
_INT_LIMIT = 2**63 - 2
"""The widest integer bound the converter reads: it takes int64's own ends for no bound."""
_PAIR = 2
"""From here up, a `minLength` lets a shorter string through: the grammar counts the two
escapes of a surrogate pair (`\\ud83d\\ude00`, one character) as two characters."""


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


def _holds(value: Any, node: Mapping[str, Any]) -> bool:
    return all(check(value, node[key]) for key, check in _ENUM_CHECKS.items() if key in node)


def _kinds(node: Mapping[str, Any]) -> list[str] | None:
    """The node's types as a list; `None` when it has no `type`."""
    kinds = node.get("type")
    if kinds is None:
        return None
    return list(kinds) if isinstance(kinds, list) else [kinds]


def _without(node: dict[str, Any], kind: str) -> bool:
    """`kind` taken out of the node's types (the converter compiles each type apart), with the
    keywords that applied to it alone; False when no type is left."""
    rest = [k for k in _kinds(node) or () if k != kind]
    if not rest:
        return False
    node["type"] = rest[0] if len(rest) == 1 else rest
    left = {*rest, "integer"} if "number" in rest else set(rest)
    for key in vacuous_keywords(frozenset(left)) & node.keys():
        del node[key]
    return True


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


class _Unfaithful(Exception):
    """A pattern the converter cannot compile faithfully; the message says what it holds."""


def _unwritable(char: str) -> bool:
    """Whether the grammar would write `char` raw into the JSON string, breaking it."""
    return ord(char) < 0x20 or char in '"\\'


def _escape(body: str, i: int) -> tuple[str, int, bool]:
    """The escape at `i`: the character it stands for (or, for `\\d` and `\\w`, the ranges
    of a class, two characters or more), where the pattern goes on, and whether it is a class."""
    after = body[i + 1 : i + 2]
    if after in _CLASS_ESCAPES:
        return _CLASS_ESCAPES[after], i + 2, True
    if after == "\\":
        # Copied into the grammar as it is: a raw backslash inside the JSON string.
        raise _Unfaithful("an escaped backslash, which it writes unescaped into the JSON string")
    if after == "u" and _HEX4.fullmatch(body[i + 2 : i + 6]):
        char = chr(int(body[i + 2 : i + 6], 16))
        if 0xD800 <= ord(char) <= 0xDFFF:
            raise _Unfaithful("an escaped surrogate")
        return char, i + 6, False
    if after.isascii() and len(after) == 1 and not after.isalnum():
        return after, i + 2, False  # punctuation stands for itself
    raise _Unfaithful(f"the escape `\\{after}`")


def _single(char: str, escaped: bool) -> None:
    """Refuses a character the grammar would write raw into the JSON string."""
    if _unwritable(char):
        raise _Unfaithful(
            "an escaped control character, quote or backslash"
            if escaped
            else "a quote or control character"
        )


def _in_class(char: str, source: str = "") -> str:
    """`char` (written `source`, if given) as a class member the converter copies and the
    grammar reads right; a `^` first in a class is written `\\u005E` by the caller. The
    converter knows no escape there but `\\-`, `\\[`, `\\]` and `\\uXXXX`: it then
    accepts any string."""
    if source and (not source.startswith("\\") or source[1] in "-[]u"):
        return source
    if char == "\x7f" or "\x80" <= char <= "\x9f":
        return f"\\u{ord(char):04X}"  # control characters, written as such
    return "\\" + char if char in "[]-" else char


def _writable(low: int, high: int) -> list[tuple[int, int]]:
    """The range `low`-`high` without the characters the grammar cannot write raw."""
    pieces = []
    start = max(low, 0x20)
    for cut in (ord('"'), ord("\\")):
        if start <= cut <= high:
            if start < cut:
                pieces.append((start, cut - 1))
            start = cut + 1
    if start <= high:
        pieces.append((start, high))
    return pieces


def _class(body: str, i: int) -> tuple[str, int, bool]:
    """The class at `i` (its `[`) as the converter reads it faithfully, where the pattern goes
    on, and whether quotes, backslashes or control characters were left out of its ranges."""
    j = i + 1
    if body[j : j + 1] == "^":
        raise _Unfaithful("a negated character class")
    if body[j : j + 1] == "]":
        raise _Unfaithful("an empty class `[]`, which matches nothing")
    parts: list[str] = []
    narrowed = False

    def member(at: int) -> tuple[str, int, bool, bool]:
        if at >= len(body):
            raise _Unfaithful("an unterminated character class")
        if body[at] != "\\":
            return body[at], at + 1, False, False
        char, end, is_class = _escape(body, at)
        return char, end, True, is_class

    def range_follows(at: int) -> bool:
        return body[at : at + 1] == "-" and body[at + 1 : at + 2] not in ("", "]")

    while j >= len(body) or body[j] != "]":
        start = j
        low, j, escaped, is_class = member(j)
        low_source = body[start:j]
        if is_class or not range_follows(j):
            if is_class:
                if range_follows(j):
                    raise _Unfaithful("a class escape at one end of a range")
                parts.append(low)
            else:
                _single(low, escaped)
                parts.append(_in_class(low, low_source))
            continue
        start = j + 1
        high, j, _, is_class = member(start)
        if is_class:
            raise _Unfaithful("a class escape at one end of a range")
        if ord(high) < ord(low):
            raise _Unfaithful("a class range out of order")
        pieces = _writable(ord(low), ord(high))
        if pieces == [(ord(low), ord(high))]:
            parts.append(f"{_in_class(low, low_source)}-{_in_class(high, body[start:j])}")
            continue
        narrowed = True
        for first, last in pieces:
            one, other = _in_class(chr(first)), _in_class(chr(last))
            parts.append(one if first == last else f"{one}-{other}")
    inner = "".join(parts)
    if not inner:
        raise _Unfaithful("a class of quotes, backslashes or control characters only")
    if inner.startswith("^"):
        inner = "\\u005E" + inner[1:]  # a `^` first would negate the class
    return f"[{inner}]", j + 1, narrowed


def _quantifier(body: str, i: int) -> int:
    """Where the quantifier at `i` ends; -1 when there is none (a `{` then is a brace)."""
    char = body[i : i + 1]
    if char and char in "?*+":
        return i + 1
    if char != "{":
        return -1
    match = _REPEAT.match(body, i)
    if match is None:
        return -1
    low = int(match[1] or 0)
    high = int(match[4]) if match[4] else int(match[3]) if match[3] else None
    if not match[2] and not match[4]:
        high = low
    if max(low, high or 0) > _MAX_REPETITIONS:
        raise _Unfaithful(f"a repetition count above {_MAX_REPETITIONS}")
    if high is not None and high < low:
        # Read as written, it makes the grammar parser allocate without limit.
        raise _Unfaithful(f"the repetition `{match[0]}`, whose bounds are reversed")
    return match.end()


def _literal(char: str, source: str, quantified: bool) -> str:
    """One literal character (written `source`) as the converter reads it."""
    if quantified and (source.startswith("\\") or not char.isascii()):
        # Merged with the literal characters before it, it would take the quantifier with
        # them (`ab\\.?` repeats `ab.`): a class stands alone.
        return "[\\u005E]" if char == "^" else f"[{_in_class(char)}]"
    if source.startswith("\\u") or not char.isascii():
        return source
    return "\\" + char if char in _SYNTAX else char


def _spell(body: str) -> tuple[str, bool]:
    """The inside of an anchored pattern as the converter compiles it faithfully, and whether
    class ranges were narrowed; `_Unfaithful` when it cannot be."""
    out: list[str] = []
    narrowed = False
    last = "none"  # what a quantifier here would repeat: "none", "atom" or "quantifier"
    i = 0
    while i < len(body):
        char = body[i]
        end = _quantifier(body, i)
        if end >= 0:
            if last != "atom":
                raise _Unfaithful(
                    "a quantifier after a quantifier"
                    if last == "quantifier"
                    else "a quantifier with nothing to repeat"
                )
            if body[end : end + 1] == "?":
                raise _Unfaithful("a lazy quantifier")
            out.append(body[i:end])
            i, last = end, "quantifier"
            continue
        if char == "[":
            text, i, cut = _class(body, i)
            out.append(text)
            narrowed, last = narrowed or cut, "atom"
            continue
        if char == "(":
            if body[i + 1 : i + 2] == "?" and body[i + 2 : i + 3] != ":":
                raise _Unfaithful("a lookaround or named group")
            opening = "(?:" if body.startswith("(?:", i) else "("
            out.append(opening)
            i, last = i + len(opening), "none"
            continue
        if char in ")|":
            out.append(char)
            i, last = i + 1, "atom" if char == ")" else "none"
            continue
        if char == ".":
            # Compiled to any character but a line break, inside the JSON string the
            # grammar writes: a raw quote, backslash or control character breaks it.
            raise _Unfaithful("`.`, which it reads as any character but a line break")
        if char in "^$":
            # Newer converters then accept any string; older ones read a literal `^` or `$`.
            raise _Unfaithful("an anchor inside the pattern")
        if char == "\\":
            literal, after, is_class = _escape(body, i)
            if is_class:
                out.append(f"[{literal}]")
                i, last = after, "atom"
                continue
        else:
            literal, after = char, i + 1
        _single(literal, char == "\\")
        out.append(_literal(literal, body[i:after], _quantifier(body, after) >= 0))
        i, last = after, "atom"
    return "".join(out), narrowed


def llama_cpp_pattern(pattern: str) -> tuple[str | None, str]:
    """`pattern` as llama.cpp's converter compiles it faithfully, or `None` and why not.

    A class range covering quotes, backslashes or control characters leaves them out (the
    grammar would write them raw into the JSON string): the pattern comes back with what was
    left out as the second item, which is empty when the pattern means what it meant.

    >>> llama_cpp_pattern(r"^[A-Z]{2}-\\d{3}$")
    ('^[A-Z]{2}-[0-9]{3}$', '')
    >>> llama_cpp_pattern(r"^\\d{5}$|^\\d{5}-\\d{4}$")
    ('^([0-9]{5}|[0-9]{5}-[0-9]{4})$', '')
    >>> llama_cpp_pattern(r"^v1\\.0\\.?$")
    ('^v1\\\\.0[.]?$', '')
    >>> llama_cpp_pattern(r"^a\\sb$")
    (None, 'the escape `\\\\s`')
    """
    alternatives = _alternatives(pattern)
    if alternatives is None:
        return None, "unbalanced parentheses"
    bodies: list[str] = []
    narrowed = False
    for alternative in alternatives:
        # The converter strips one `^` and one `$` and compiles the rest as one expression.
        if len(alternative) < 2 or not (
            alternative.startswith("^") and _anchored_at_end(alternative)
        ):
            return None, "an alternative without `^` at its start and `$` at its end"
        try:
            spelled, cut = _spell(alternative[1:-1])
        except _Unfaithful as error:
            return None, str(error)
        bodies.append(spelled)
        narrowed = narrowed or cut
    why = _NARROWED if narrowed else ""
    if len(bodies) == 1:
        return f"^{bodies[0]}$", why
    # A plain group: older converters do not read `(?:`.
    return "^(" + "|".join(bodies) + ")$", why


def _side(
    node: Mapping[str, Any],
    inclusive: str,
    exclusive: str,
    inward: Callable[[float], int],
    past: Callable[[float], int],
    tightest: Callable[[list[int]], int],
) -> tuple[int | None, bool]:
    """One side of an integer's range as one inclusive integer bound, and whether the node
    says it in a way the converter misreads: it skips an exclusive bound beside an inclusive
    one, and cuts the fraction off a bound (`minimum: 1.5` would let 1 through)."""
    given = {key: node[key] for key in (inclusive, exclusive) if _number(node.get(key))}
    if not given:
        return None, False
    bound = tightest([inward(v) if key == inclusive else past(v) for key, v in given.items()])
    whole = all(isinstance(v, int) or v.is_integer() for v in given.values())
    return bound, len(given) == 2 or not whole


def _set_side(node: dict[str, Any], inclusive: str, exclusive: str, bound: int | None) -> None:
    node.pop(exclusive, None)
    if bound is None:
        node.pop(inclusive, None)
    else:
        node[inclusive] = bound


def _compiled_format(fmt: Any) -> bool:
    """Whether the grammar engine counts `fmt` enforced (it notes the others)."""
    return fmt in _SHAPE_FORMATS or fmt == "uuid"


def _may_be_string(node: Mapping[str, Any]) -> bool:
    kinds = _kinds(node)
    return kinds is None or "string" in kinds


def _whole_counts(node: dict[str, Any]) -> None:
    """Counts written as whole floats (`2.0`), which the server refuses, as integers."""
    for key in _WHOLE:
        value = node.get(key)
        if isinstance(value, float) and value.is_integer():
            node[key] = int(value)


def _refs(node: Any) -> Iterator[dict[str, Any]]:
    """Every object under `node` (itself included) that holds a `$ref`."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("$ref"), str):
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


class _Converter(_Grammar):
    """The grammar engine's pass, leaving tuples to `_Fix.tuple_items`, which says what it
    does with them."""

    tuples_noted = False


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
        if isinstance(prefix, list) and ("enum" in node or "anyOf" in node):
            # Compiled alone, the `enum` or union beside it has its own note on the tuple.
            for i, sub in enumerate(prefix):
                at = child(pointer, "prefixItems", i)
                fixed = self.schema(sub, at)
                prefix[i] = self.nothing(at) if fixed is False else fixed
        elif isinstance(prefix, list):
            self.tuple_items(prefix, node, pointer)
        union = node.get("anyOf")
        if isinstance(union, list):
            self.beside_union(node, union, pointer)
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
                    if _kinds(node) is not None:
                        # Every value of the other types holds; no object can hold it.
                        return _without(node, "object")
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
        return self.required(node, pointer)

    def tuple_items(self, prefix: list[Any], node: dict[str, Any], pointer: str) -> None:
        """`prefixItems` as the converter reads it right. It reads them as a tuple of exactly
        their length, and not at all beside `items` (which then holds every item): sent as
        the tuple where that length is the only one allowed, else as `items` that may match
        any position's schema (noted where that widens the schema). Never narrower."""
        live: list[Any] = []
        dead = None  # the first position that accepts nothing: no item reaches past it
        for i, sub in enumerate(prefix):
            fixed = self.schema(sub, child(pointer, "prefixItems", i))
            if fixed is False:
                dead = i
                break
            live.append(fixed)
        rest = node.get("items", {})
        if dead == 0:
            # Only `[]` passes, which the converter cannot say safely (older ones fail on
            # `maxItems: 0`): any item is let through.
            del node["prefixItems"]
            node["items"] = self.nothing(child(pointer, "prefixItems", 0))
            return
        high = node.get("maxItems")
        if dead is not None or rest is False:
            # No item can follow the positions that accept something.
            high = min(high, len(live)) if _number(high) else len(live)
            node["maxItems"] = high
        low = node.get("minItems", 0)
        if low == high == len(live):
            node["prefixItems"] = live
            node.pop("items", None)  # (read before the tuple; no item follows it)
            return
        del node["prefixItems"]
        branches: list[Any] = []
        for sub in (*live, *(() if dead is not None or rest is False else (rest,))):
            if sub not in branches:
                branches.append(sub)
        if {} in branches:
            node["items"] = {}
        else:
            node["items"] = branches[0] if len(branches) == 1 else {"anyOf": branches}
        if len(branches) > 1:
            self.note(
                pointer,
                f"`prefixItems` is not enforced by the grammar at {quoted(pointer)}: llama.cpp "
                "reads it as a tuple of exactly its length, so each item may match any "
                "position's schema",
            )

    def beside_union(self, node: dict[str, Any], union: list[Any], pointer: str) -> None:
        """The keywords beside a union, which the converter skips (an `enum` of several types
        becomes a union of one branch per type, its keywords staying beside it): the values
        of the branches that break them are removed, and the others are noted."""
        checked = [key for key in _ENUM_CHECKS if key in node]
        unchecked = sorted(_ENUM_UNCHECKED & node.keys())
        if not checked and not unchecked:
            return
        for branch in union:
            if not isinstance(branch, dict):
                continue
            values = branch.get("enum")
            if isinstance(values, list):
                branch["enum"] = [value for value in values if _holds(value, node)]
            elif branch.get("type") not in ("null", "boolean"):  # these hold anyway
                unchecked = sorted({*unchecked, *checked})
        split = any("enum" in branch for branch in union if isinstance(branch, dict))
        what = "`enum` values" if split else "union"
        for key in unchecked:
            if key == "format" and not _compiled_format(node[key]):
                continue  # the grammar engine noted it
            self.note(
                pointer,
                f"`{key}` is not enforced by the grammar at {quoted(pointer)}: llama.cpp "
                f"compiles only the {what} beside it",
            )
        for key in (*checked, *unchecked):
            node.pop(key, None)

    def required(self, node: dict[str, Any], pointer: str) -> bool:
        """`required` keys missing from `properties`, which the converter drops: an open
        object gets them as properties, a closed one accepts nothing. False then."""
        names = node.get("required")
        props = node.get("properties")
        declared = props if isinstance(props, dict) else {}
        missing = [name for name in names or () if name not in declared]
        kinds = _kinds(node)
        if not missing or (kinds is not None and "object" not in kinds) or "enum" in node:
            return True  # (an `enum` is compiled alone, its values checked against them)
        extra = node.get("additionalProperties")
        closed = extra is False or (extra is None and isinstance(props, dict))
        if kinds is None:
            # Given `properties`, the converter would compile an object rule for a node
            # that also accepts values of other types.
            listed = ", ".join(f"`{name}`" for name in missing)
            self.note(
                pointer,
                f"`required` {listed} is not enforced by the grammar at {quoted(pointer)}: "
                "llama.cpp requires only keys declared in `properties`",
            )
            return True
        if closed:
            return _without(node, "object")
        value = extra if isinstance(extra, dict) else {}
        node["properties"] = {**declared, **{name: copy_json(value) for name in missing}}
        if extra is None:
            node["additionalProperties"] = True  # as open as it was without `properties`
        return True

    def keywords(self, node: dict[str, Any], pointer: str) -> bool:
        """The node's own keywords for the converter; False when it accepts nothing."""
        _whole_counts(node)
        live = self.enum(node, pointer) if "enum" in node else self.value(node, pointer)
        if isinstance(node.get("items"), bool):
            del node["items"]
            self.note(
                pointer, f"boolean `items` was removed at {quoted(pointer)}: llama.cpp rejects it"
            )
        return live

    def value(self, node: dict[str, Any], pointer: str) -> bool:
        if not self.ranges(node, pointer) or not self.integer(node, pointer):
            return False
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
                if why:
                    self.note(
                        pointer,
                        f"`pattern` was narrowed at {at}: llama.cpp's grammar would write {why} "
                        "raw into the JSON string, so they were left out",
                    )
        self.string(node, pointer)
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

    def ranges(self, node: dict[str, Any], pointer: str) -> bool:
        """Empty length and item-count ranges (the grammar parser allocates without limit on
        them): no value of that type passes. False when the node accepts nothing."""
        for low_key, high_key, kind in _RANGES:
            low, high = node.get(low_key), node.get(high_key)
            kinds = _kinds(node)
            if not (_number(low) and _number(high) and low > high):
                continue
            if kinds is not None and kind not in kinds:
                continue  # they apply to no type the node has
            del node[low_key], node[high_key]
            if kinds is None:
                self.note(
                    pointer,
                    f"`{low_key}` and `{high_key}` were removed at {quoted(pointer)}: no "
                    f"{kind} meets both, which llama.cpp cannot say, so any {kind} passes",
                )
            elif not _without(node, kind):
                return False
        return True

    def integer(self, node: dict[str, Any], pointer: str) -> bool:
        """An integer's bounds as the converter reads them right, on both sides; False when
        none is in range (the server fails every generation on an empty range, HTTP 500)."""
        kinds = _kinds(node)
        if kinds is None or "integer" not in kinds:
            return True
        low, fix_low = _side(node, *_LOWER, math.ceil, lambda v: math.floor(v) + 1, max)
        high, fix_high = _side(node, *_UPPER, math.floor, lambda v: math.ceil(v) - 1, min)
        if low is not None and high is not None and low > high:
            return _without(node, "integer")
        if (low is not None and low > _INT_LIMIT) or (high is not None and high < -_INT_LIMIT):
            # No integer the converter reads is in range.
            for key in (*_LOWER, *_UPPER):
                if key in node:
                    del node[key]
                    self.note(
                        pointer,
                        f"`{key}` was removed at {quoted(pointer)}: llama.cpp reads integer "
                        "bounds only within 64 bits",
                    )
            return True
        # Without both bounds the converter writes at most 16 digits, misreads a `minimum`
        # of 100 or more and fails on a negative `maximum`; beyond 64 bits it reads a bound
        # wrong. Each side gets the widest bound it reads: it writes no integer past them.
        wide = False
        if low is None or low < -_INT_LIMIT:
            low, fix_low, wide = -_INT_LIMIT, True, True
        if high is None or high > _INT_LIMIT:
            high, fix_high, wide = _INT_LIMIT, True, True
        if wide:
            self.note(
                pointer,
                f"`integer` was narrowed at {quoted(pointer)}: llama.cpp's grammar writes "
                f"integers only from {-_INT_LIMIT} to {_INT_LIMIT} "
                "(64 bits; bounds within them keep it exact)",
            )
        if fix_low:
            _set_side(node, *_LOWER, low)
        if fix_high:
            _set_side(node, *_UPPER, high)
        return True

    def string(self, node: dict[str, Any], pointer: str) -> None:
        """Notes what the converter skips beside the `pattern` or `format` it compiles, and a
        `minLength` it counts in escapes (`_PAIR`)."""
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
            low = node.get("minLength")
            if _number(low) and _PAIR <= low <= _MAX_REPETITIONS:  # (else removed below)
                self.note(
                    pointer,
                    f"`minLength` is not fully enforced by the grammar at {at}: llama.cpp "
                    "counts a character past U+FFFF written escaped (`\\ud83d\\ude00`) as "
                    "two characters, the type as one",
                )
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
        values = [value for value in values if _holds(value, node)]
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


def _place(name: str, places: Mapping[str, str]) -> str:
    """Where notes place the definition `name`: under `$defs`, or the root it was."""
    ref = "#" + child("", "$defs", name)
    return places.get(ref, child("", "$defs", name))


def _dead_definitions(defs: Mapping[str, Any], places: Mapping[str, str]) -> frozenset[str]:
    """`$ref`s to the definitions that accept nothing: none at first, then those found so
    given the ones before, until no more are found."""
    dead: frozenset[str] = frozenset()
    while True:
        trial = _Fix(dead)
        found = frozenset(
            "#" + child("", "$defs", name)
            for name, sub in defs.items()
            if trial.schema(copy_json(sub), _place(name, places)) is False
        )
        if found <= dead:
            return dead
        dead |= found


def _root_into_defs(out: dict[str, Any]) -> dict[str, str]:
    """The root moved into `$defs` when something refers to it: the server refuses
    `$ref: "#"`. Returns where notes place it (the root), by its new `$ref`."""
    refs = [node for node in _refs(out) if node["$ref"] == "#"]
    if not refs:
        return {}
    defs = out.setdefault("$defs", {})
    name, n = "root", 2
    while name in defs:
        name, n = f"root_{n}", n + 1
    ref = "#" + child("", "$defs", name)
    for node in refs:
        node["$ref"] = ref
    defs[name] = {key: value for key, value in out.items() if key != "$defs"}
    for key in list(out):
        if key != "$defs":
            del out[key]
    out["$ref"] = ref
    return {ref: ""}


def _left_recursion(defs: Mapping[str, Any], places: Mapping[str, str]) -> None:
    """`SchemaError` for a definition that leads back to itself through `$ref`s and unions
    alone, without going into a property or an item: checking a value against it never ends,
    and the server refuses the grammar (left-recursive rules)."""
    names = {"#" + child("", "$defs", name): name for name in defs}
    heads: dict[str, set[str]] = {}
    for name, body in defs.items():
        found = heads[name] = set()
        stack = [body]
        while stack:
            node = stack.pop()
            if not isinstance(node, dict):
                continue
            if node.get("$ref") in names:
                found.add(names[node["$ref"]])
            if isinstance(node.get("anyOf"), list):
                stack.extend(node["anyOf"])
    for start in heads:
        seen: set[str] = set()
        stack = list(heads[start])
        while stack:
            name = stack.pop()
            if name == start:
                at = _place(start, places)
                raise SchemaError(
                    at,
                    f"the subschema at {quoted(at)} refers back to itself without going into "
                    "a property or an item: checking a value against it would never end",
                )
            if name not in seen:
                seen.add(name)
                stack.extend(heads[name])


def llama_cpp(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` for llama.cpp's server, with notes on what its grammar does not enforce.

    Raises `SchemaError` for a schema that is not valid JSON Schema.

    >>> llama_cpp({"type": "integer", "maximum": -1}).schema
    {'type': 'integer', 'maximum': -1, 'minimum': -9223372036854775806}
    >>> llama_cpp({"type": ["string", "null"], "minLength": 3, "maxLength": 1}).schema
    {'type': 'null'}
    """
    base = _Converter(schema).run()
    out = copy_json(base.schema)
    places = _root_into_defs(out)
    defs = out.pop("$defs", None)
    dead = _dead_definitions(defs, places) if isinstance(defs, dict) else frozenset()
    fix = _Fix(dead)
    if isinstance(defs, dict):
        live = {}
        for name, sub in defs.items():
            ref = "#" + child("", "$defs", name)
            if ref not in dead:  # a dead one is no longer referred to: every `$ref` went
                live[name] = fix.schema(sub, _place(name, places))
        _left_recursion(live, places)
        if live:
            out["$defs"] = live
    root = fix.schema(out, "")
    if root is False:
        root = fix.nothing("")
    notes = [*base.notes, *fix.notes]
    notes.sort(key=lambda n: n.pointer)
    return Rewrite(schema=root, notes=tuple(notes))
