"""The least value a JSON Schema accepts, found deterministically, for the test provider.

The generator takes what a careful person would write by hand: the first `enum` value,
`const`, `true`, the lowest number in range (0 when 0 is allowed), the shortest string that
fits its length, pattern and format, only the required properties, only the items
`minItems` asks for. `allOf` is merged; `anyOf`, `oneOf` and `if` are tried branch by
branch in order. Every candidate is checked against the schema before it is returned (see
`_conform`), so an answer is valid or there is a `ValueError` naming the place that could
not be met. Recursion ends at a fixed depth and the whole search has a step budget, so no
schema can hang it (nor can a pattern: see `_conform.pattern_matches`).

A `multipleOf` is met as the number's reader judges it (readers disagree: `0.6` is a
multiple of `0.1` to pydantic and in exact arithmetic, not to jsonschema's binary floats):
pydantic's `float` for a number, its `Decimal` beside a decimal's numeral, exact arithmetic
for an integer; values jsonschema and exact arithmetic take too come first. Candidates are
the multiples counted exactly in the numerals of the bounds and steps.

A string with a `format` takes that format's values (`_formats`), distinct ones for sets
and maps, and never a plain string once the format has given one; only where no value of
the format meets the length limits is a plain string tried, as formats are annotations to
the checker. A `format: decimal` branch (allama's constrained `Decimal`) takes its digit
limits from the pattern of its string sibling and its bounds from its number sibling.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from itertools import chain, count, islice
from typing import Any

from pydantic import JsonValue

from allama.mock._conform import (
    SchemaContext,
    SchemaError,
    canonical,
    checked_length,
    decimal_multiple,
    exact_multiple,
    float_multiple,
    is_multiple,
    is_number,
    jsonschema_multiple,
    numeral_value,
    pattern_matches,
    pointer_join,
    rust_matches,
)
from allama.mock._formats import UNENFORCED_MARKS, format_values, knows_format, plain_strings
from allama.mock._pattern import PatternSamples
from allama.schema._types import _KEY_NAMES
from allama.schema._walk import (
    ARRAY_KEYWORDS,
    NUMBER_KEYWORDS,
    OBJECT_KEYWORDS,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_SINGLE,
    STRING_KEYWORDS,
)

__all__ = ["unenforced_marks", "unknown_formats", "value_and_plain_formats", "value_for_schema"]

MAX_DEPTH = 40
"""Nesting below which a required part is given up on: the schema recurses without end."""
SOFT_DEPTH = 8
"""Nesting from which branches without `$ref` are tried first, so recursion winds down."""
BUDGET = 40_000
"""Steps (generations and checks) one value may take before the search gives up."""
CHARACTERS_PER_STEP = 16
"""Characters a pattern's walk builds or a check reads for one step of the budget."""
VARIANTS = 8
"""Candidates drawn per place when the first ones do not fit (unique items, `not`, `oneOf`)."""
MOST_ITEMS = 10_000
"""The most items or properties a generated array or object may be asked for."""
LONGEST = 1_000_000
"""The longest string a schema may ask for."""
REJECTS = 128
"""Candidates of one type that may fail in a row before that type is given up."""

_DEFAULT_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


class _Unsat(Exception):
    """This combination of constraints has no value."""


class _Exhausted(Exception):
    """The step budget ran out."""


@dataclass(frozen=True)
class _Node:
    """A subschema, the base URI its refs resolve against, and where it sits."""

    schema: Any
    base: str
    pointer: str


def value_and_plain_formats(
    schema: Mapping[str, Any] | bool,
) -> tuple[JsonValue, list[tuple[str, str]]]:
    """`value_for_schema`'s value, with each unknown `format` (and the pointer of the
    schema naming it) the value may hold as plain text: only the formats a string was
    written for, not those of parts the value leaves out (an optional property)."""
    generator = _Generator(schema)
    value: JsonValue = generator.value()
    return value, list(generator.plain)


def value_for_schema(schema: Mapping[str, Any] | bool) -> JsonValue:
    """A small, deterministic value `schema` accepts; `ValueError` when there is none.

    >>> value_for_schema({"type": "object", "properties": {"n": {"type": "integer",
    ...     "minimum": 3}}, "required": ["n"]})
    {'n': 3}
    """
    generator = _Generator(schema)
    value: JsonValue = generator.value()
    return value


class _Generator:
    def __init__(self, schema: Any) -> None:
        # A value is kept where the reader its type names takes it for a multiple; which
        # of those to offer is decided in `_numbers`.
        self.ctx = SchemaContext(schema, multiple=is_multiple)
        self.steps = 0
        self.failure: tuple[str, str] | None = None
        self._ref_free: dict[int, bool] = {}
        self._decimal_siblings = _decimal_siblings(self.ctx.root)
        self._decimal_branches = set(self._decimal_siblings) | {
            id(branch) for others in self._decimal_siblings.values() for branch in others
        }
        """Every branch of a union holding a `format: decimal` branch (by `id`): a number
        there is read by pydantic's `Decimal`."""
        self.plain: dict[tuple[str, str], None] = {}
        """Each unknown `format` a string was given for, written as plain text, with the
        pointer of the schema naming it (over the whole search: a string tried and
        refused counts too)."""

    # Driving

    def value(self) -> Any:
        root = _Node(self.ctx.root, self.ctx.base, "")
        try:
            for candidate in self._gen([root], _Trail()):
                return candidate
        except _Exhausted:
            where = (
                f" (last trouble at #{self.failure[0]}: {self.failure[1]})" if self.failure else ""
            )
            raise ValueError(
                f"gave up looking for a value after {BUDGET} steps: the schema is too "
                f"entangled{where}"
            ) from None
        except RecursionError:
            raise ValueError("the schema nests too deeply to generate a value") from None
        except SchemaError as error:
            raise ValueError(f"invalid schema: {error}") from None
        pointer, reason = self.failure or ("", "no value found")
        raise ValueError(f"no value satisfies the schema at #{pointer}: {reason}")

    def _tick(self, weight: int = 1) -> None:
        self.steps += weight
        if self.steps > BUDGET:
            raise _Exhausted

    def _spend(self, characters: int) -> None:
        """Characters a pattern's walks built or checked, counted against the budget."""
        self._tick(characters // CHARACTERS_PER_STEP)

    def _fail(self, pointer: str, reason: str) -> None:
        if self.failure is None:
            self.failure = (pointer, reason)

    def _valid(self, nodes: list[_Node], value: Any) -> bool:
        for node in nodes:
            self._tick()
            if not self.ctx.is_valid(value, node.schema, node.base):
                return False
        return True

    def _gen(
        self, nodes: list[_Node], trail: _Trail, decided: dict[str, int] | None = None
    ) -> Iterator[Any]:
        """Values valid against every node, best first (possibly none)."""
        self._tick()
        decided = decided or {}
        if trail.depth > MAX_DEPTH:
            self._fail(nodes[0].pointer if nodes else "", "the schema requires endless nesting")
            return
        try:
            atoms, choices = self._flatten(nodes, decided)
        except _Unsat as unsat:
            self._fail(*unsat.args)
            return
        if choices:
            key, options = choices[0]
            order = list(range(len(options)))
            order.sort(key=lambda i: self._recursive(options[i], trail))
            for index in order:
                yield from self._gen(nodes, trail, {**decided, key: index})
            return
        produced = 0
        rejected: list[Any] = []
        for source in self._atoms(atoms, nodes, trail):
            misses = 0
            try:
                for candidate in source:
                    if self._valid(nodes, candidate):
                        produced += 1
                        misses = 0
                        yield candidate
                        continue
                    if not rejected:
                        rejected.append(candidate)
                    misses += 1
                    if misses > REJECTS:
                        break
            except _Unsat as unsat:
                self._fail(*unsat.args)
        if not produced and self.failure is None:
            reason = self._diagnose(nodes, rejected[0]) if rejected else "no value could be made"
            self._fail(nodes[0].pointer if nodes else "", reason)

    def _diagnose(self, nodes: list[_Node], rejected: Any) -> str:
        """Why the first candidate failed: the first keyword it breaks, for the error."""
        for node in nodes:
            if not isinstance(node.schema, dict):
                continue
            for key, rule in node.schema.items():
                probe = {key: rule}
                if key in ("then", "else"):
                    probe = {"if": node.schema.get("if", True), key: rule}
                if not self.ctx.is_valid(rejected, probe, node.base):
                    if key == "oneOf" and isinstance(rule, list):
                        hits = sum(self.ctx.is_valid(rejected, b, node.base) for b in rule)
                        return f"the first value tried matched {hits} `oneOf` branches, not one"
                    return (
                        f"the first value tried broke `{key}` at #{pointer_join(node.pointer, key)}"
                    )
        return "no value tried met every constraint"

    def _recursive(self, option: list[_Node], trail: _Trail) -> bool:
        """Whether a branch leads back into a schema being generated (tried last).

        Past `SOFT_DEPTH` any branch holding a `$ref` counts, so that recursion winds down.
        """
        for node in option:
            current: Any = node.schema
            base, pointer = node.base, node.pointer
            for _ in range(8):
                if pointer in trail.ancestors:
                    return True
                if not isinstance(current, dict):
                    break
                ref = self.ctx.ref_of(current)
                if ref is None:
                    break
                try:
                    current, base, pointer = self.ctx.resolve(
                        ref, self.ctx.rebase(current, base), pointer
                    )
                except SchemaError:
                    break
            if trail.depth > SOFT_DEPTH and not self._no_ref(node.schema):
                return True
        return False

    def _no_ref(self, schema: Any) -> bool:
        """Whether `schema` holds no `$ref` at all (a branch that cannot recurse)."""
        key = id(schema)
        if key not in self._ref_free:
            self._ref_free[key] = "$ref" not in repr(schema)
        return self._ref_free[key]

    # Flattening: refs and allOf merge into one list; anyOf, oneOf and if become choices

    def _flatten(
        self, nodes: list[_Node], decided: dict[str, int]
    ) -> tuple[list[_Node], list[tuple[str, list[list[_Node]]]]]:
        atoms: list[_Node] = []
        choices: list[tuple[str, list[list[_Node]]]] = []
        seen: set[tuple[str, str]] = set()

        def visit(node: _Node) -> None:
            self._tick()
            schema = node.schema
            if schema is True:
                return
            if schema is False:
                raise _Unsat(node.pointer, "the schema is `false`")
            if not isinstance(schema, dict):
                raise SchemaError(f"a schema is an object or a boolean at #{node.pointer}")
            mark = (node.pointer, node.base)
            if mark in seen:
                return
            seen.add(mark)
            base = self.ctx.rebase(schema, node.base)
            ref = self.ctx.ref_of(schema)
            if ref is not None:
                target, target_base, target_ptr = self.ctx.resolve(ref, base, node.pointer)
                visit(_Node(target, target_base, target_ptr))
                if self.ctx.ref_only(schema):
                    return
            here = _Node(schema, base, node.pointer)
            atoms.append(here)
            for index, sub in enumerate(_schema_list(schema, "allOf", node.pointer)):
                visit(_Node(sub, base, pointer_join(node.pointer, "allOf", index)))
            for key in ("anyOf", "oneOf"):
                subs = _schema_list(schema, key, node.pointer)
                if not subs:
                    if key in schema:
                        raise _Unsat(pointer_join(node.pointer, key), f"`{key}` is empty")
                    continue
                branches = [
                    _Node(sub, base, pointer_join(node.pointer, key, i))
                    for i, sub in enumerate(subs)
                ]
                options = [[branch] for branch in branches]
                if key == "oneOf" and len(branches) > 1:
                    options.extend(
                        [branch, *(_negated(other) for other in branches if other is not branch)]
                        for branch in branches
                    )
                self._choose(pointer_join(node.pointer, key), options, decided, choices, visit)
            if "if" in schema and self.ctx.draft >= 7 and ("then" in schema or "else" in schema):
                cond = _Node(schema["if"], base, pointer_join(node.pointer, "if"))
                yes = [cond]
                if "then" in schema:
                    yes.append(_Node(schema["then"], base, pointer_join(node.pointer, "then")))
                no = []
                if "else" in schema:
                    no.append(_Node(schema["else"], base, pointer_join(node.pointer, "else")))
                self._choose(pointer_join(node.pointer, "if"), [yes, no], decided, choices, visit)

        for node in nodes:
            visit(node)
        return atoms, choices

    @staticmethod
    def _choose(
        key: str,
        options: list[list[_Node]],
        decided: dict[str, int],
        choices: list[tuple[str, list[list[_Node]]]],
        visit: Any,
    ) -> None:
        if key in decided:
            for chosen in options[decided[key]]:
                visit(chosen)
        else:
            choices.append((key, options))

    # Candidates by type

    def _atoms(
        self, atoms: list[_Node], nodes: list[_Node], trail: _Trail
    ) -> Iterator[Iterator[Any]]:
        """Sources of candidates, one per type (or the `const`/`enum` values alone)."""
        for atom in atoms:
            schema = atom.schema
            if "const" in schema and self.ctx.draft >= 6:
                yield iter([schema["const"]])
                return
        for atom in atoms:
            enum = atom.schema.get("enum")
            if enum is not None:
                if not isinstance(enum, list):
                    raise SchemaError(f"`enum` is not an array at #{atom.pointer}")
                if not enum:
                    self._fail(atom.pointer, "`enum` is empty")
                yield iter(enum)
                return
        try:
            recursing = any(atom.pointer in trail.ancestors for atom in atoms)
            kinds = self._types(atoms, recursing=recursing)
        except _Unsat as unsat:
            self._fail(*unsat.args)
            return
        for kind in kinds:
            yield self._of_type(kind, atoms, nodes, trail)

    def _of_type(
        self, kind: str, atoms: list[_Node], nodes: list[_Node], trail: _Trail
    ) -> Iterator[Any]:
        if kind == "null":
            yield None
        elif kind == "boolean":
            yield True
            yield False
        elif kind in ("integer", "number"):
            yield from self._numbers(atoms, integer=kind == "integer")
        elif kind == "string":
            yield from self._strings(atoms)
        elif kind == "array":
            yield from self._arrays(atoms, trail)
        elif kind == "object":
            yield from self._objects(atoms, nodes, trail)

    def _types(self, atoms: list[_Node], *, recursing: bool = False) -> list[str]:
        """Allowed types, best first: as written, then as the keywords suggest, then the rest.

        Inside its own recursion an untyped schema tries the plain types first, so that a
        tree ends at the first level it may.
        """
        allowed: set[str] | None = None
        written: list[str] = []
        for atom in atoms:
            kind = atom.schema.get("type")
            if kind is None:
                continue
            names = [kind] if isinstance(kind, str) else kind
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise SchemaError(f"`type` is not a name or a list of names at #{atom.pointer}")
            if "any" in names:
                continue
            these = set(names) | ({"integer"} if "number" in names else set())
            allowed = these if allowed is None else allowed & these
            if not written:
                written = [n for n in names if n != "null"] + [n for n in names if n == "null"]
        for atom in atoms:
            negated = atom.schema.get("not")
            if isinstance(negated, dict) and set(negated) <= {"type", "title", "description"}:
                kind = negated.get("type")
                names = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
                removed = set(names) | ({"integer"} if "number" in names else set())
                allowed = (set(_DEFAULT_TYPES) if allowed is None else allowed) - removed
        inferred: list[str] = []
        words = set().union(*(atom.schema.keys() for atom in atoms)) if atoms else set()
        if words & OBJECT_KEYWORDS:
            inferred.append("object")
        if words & ARRAY_KEYWORDS:
            inferred.append("array")
        if words & STRING_KEYWORDS:
            inferred.append("string")
        if words & NUMBER_KEYWORDS:
            inferred.extend(("integer", "number"))
        order: list[str] = []
        preferred = (*written, *_DEFAULT_TYPES, *inferred) if recursing else (*written, *inferred)
        for name in (*preferred, *_DEFAULT_TYPES):
            if (
                name in _DEFAULT_TYPES
                and (allowed is None or name in allowed)
                and name not in order
            ):
                order.append(name)
        if not order and atoms:
            raise _Unsat(atoms[0].pointer, "no type is allowed by every `type`")
        return order

    # Numbers

    def _numbers(self, atoms: list[_Node], *, integer: bool) -> Iterator[Any]:
        low, high, steps = _bounds(atoms)
        # A decimal's digit limits are held by the pattern of its string branch alone.
        digits = [
            sibling["pattern"]
            for sibling in self._siblings(atoms, "decimal")
            if isinstance(sibling.get("pattern"), str)
        ]

        # The reader of the number: an integer's is exact, a decimal's pydantic's
        # `Decimal`, any other number's pydantic's `float`.
        decimal = any(id(atom.schema) in self._decimal_branches for atom in atoms)
        reader = exact_multiple if integer else decimal_multiple if decimal else float_multiple
        agreed = (reader, jsonschema_multiple, exact_multiple)

        def within(value: float) -> bool:
            if low is not None and (value < low[0] or (low[1] and value == low[0])):
                return False
            if high is not None and (value > high[0] or (high[1] and value == high[0])):
                return False
            return _digits_fit(_numeral(value), digits)

        candidates = _number_candidates(low, high, steps, integer=integer)
        if digits:
            candidates = chain(_decimal_candidates(low, high), candidates)
        seen: set[float] = set()
        later: list[float] = []
        offered = False
        for exact in candidates:
            self._tick()
            value = _written(exact, integer=integer)
            if value is None or value in seen or not within(value):
                continue
            seen.add(value)
            if all(judge(value, step) for step in steps for judge in agreed):
                offered = True
                yield value
            elif all(reader(value, step) for step in steps):
                later.append(value)
        # Multiples jsonschema and exact arithmetic take too come first (a raw schema's
        # reader is not known), then those only the type's reader takes (0.6 of 0.1 is
        # none to jsonschema).
        for value in later:
            offered = True
            yield value
        if not offered:
            where = atoms[0].pointer if atoms else ""
            raise _Unsat(where, "no number meets the bounds and `multipleOf`")

    def _siblings(self, atoms: list[_Node], fmt: str) -> list[dict[str, Any]]:
        """The other branches of the `anyOf` holding an atom of format `fmt`."""
        found: list[dict[str, Any]] = []
        for atom in atoms:
            if atom.schema.get("format") == fmt:
                found.extend(self._decimal_siblings.get(id(atom.schema), ()))
        return found

    # Strings

    def _strings(self, atoms: list[_Node]) -> Iterator[str]:
        """Strings every atom accepts; each one given records the formats the atoms name
        that the generator does not write (the string is plain text to them)."""
        unknown = [
            (atom.pointer, fmt)
            for atom in atoms
            if isinstance(fmt := atom.schema.get("format"), str) and not knows_format(fmt)
        ]
        for text in self._strings_of(atoms):
            self.plain.update(dict.fromkeys(unknown))
            yield text

    def _strings_of(self, atoms: list[_Node]) -> Iterator[str]:
        shortest = 0
        longest: int | None = None
        patterns: list[str] = []
        pattern_at = ""
        formats: list[str] = []
        for atom in atoms:
            schema = atom.schema
            low = _number(schema, "minLength", atom.pointer)
            high = _number(schema, "maxLength", atom.pointer)
            if low is not None:
                shortest = max(shortest, math.ceil(low))
            if high is not None:
                longest = math.floor(high) if longest is None else min(longest, math.floor(high))
            pattern = schema.get("pattern")
            if pattern is not None:
                if not isinstance(pattern, str):
                    raise SchemaError(f"`pattern` is not a string at #{atom.pointer}")
                if not patterns:
                    pattern_at = atom.pointer
                patterns.append(pattern)
            fmt = schema.get("format")
            if isinstance(fmt, str):
                formats.append(fmt)
        if shortest > LONGEST:
            raise _Unsat(atoms[0].pointer, f"`minLength` {shortest} is above {LONGEST}")
        if longest is not None and longest < shortest:
            raise _Unsat(atoms[0].pointer, f"`minLength` {shortest} exceeds `maxLength` {longest}")
        seen: set[str] = set()

        def fitting(text: str) -> bool:
            size = len(text)
            ok = size >= shortest and (longest is None or size <= longest) and text not in seen
            seen.add(text)
            return ok

        for fmt in formats[:1]:
            if fmt == "decimal":
                yield from self._decimal_strings(atoms, patterns, fitting)
                return
            values = format_values(fmt, shortest, longest)
            if values is None:
                continue
            made = misses = 0
            for text in values:
                self._tick()
                if fitting(text) and all(pattern_matches(p, text) for p in patterns):
                    made += 1
                    misses = 0
                    yield text
                    continue
                misses += 1
                if misses > REJECTS:
                    break
            if made:
                # Never a plain string after the format's values: one is not of the format.
                return
        for text in self._embedded_json(atoms):
            if fitting(text):
                yield text
        if patterns:
            samples = PatternSamples(
                patterns[0], shortest=shortest, longest=longest, spend=self._spend
            )
            fitted = 0
            for sampled in samples:
                self._tick()
                if fitting(sampled):
                    fitted += 1
                    yield sampled
            if fitted:
                return
            where = pointer_join(pattern_at, "pattern")
            if samples.readable:
                why = "fits the length limits" if samples.made else "could be made"
                limit = checked_length(patterns[0])
                if limit is not None and shortest > limit:
                    why += (
                        f" (with nested repeats and syntax only Python's `re` reads, a text "
                        f"over {limit} characters cannot be checked in bounded time)"
                    )
                raise _Unsat(where, f"no string matching {patterns[0]!r} {why}")
            if rust_matches(patterns[0], "") is not None:
                # Pydantic's engine reads what the sampler cannot walk: a plain string
                # it matches, else none.
                for text in islice(plain_strings(shortest, longest), REJECTS):
                    self._tick()
                    if pattern_matches(patterns[0], text) and fitting(text):
                        fitted += 1
                        yield text
                if not fitted:
                    raise _Unsat(
                        where,
                        f"no string matching {patterns[0]!r} could be made (the sampler "
                        "cannot walk this pattern)",
                    )
                return
            # A pattern no engine here reads is not held against a value (`_conform`).
        for text in islice(plain_strings(shortest, longest), MOST_ITEMS * 2):
            if fitting(text):
                yield text

    def _decimal_strings(
        self, atoms: list[_Node], patterns: list[str], fitting: Callable[[str], bool]
    ) -> Iterator[str]:
        """Numerals of a decimal written as a string: within the bounds its number branch
        holds (`format: decimal` says the string cannot), digits as its pattern says."""
        numbers = [
            _Node(sibling, atoms[0].base, atoms[0].pointer)
            for sibling in self._siblings(atoms, "decimal")
            if sibling.get("type") in ("number", "integer")
        ]
        low, high, steps = _bounds(numbers)
        candidates = chain(
            _decimal_candidates(low, high),
            _number_candidates(low, high, steps, integer=False),
        )
        for exact in candidates:
            self._tick()
            if not _inside(exact, low, high):
                continue
            text = _decimal_text(exact)
            if text is None or not all(decimal_multiple(text, step) for step in steps):
                continue
            if _digits_fit(text, patterns) and fitting(text):
                yield text

    def _embedded_json(self, atoms: list[_Node]) -> Iterator[str]:
        """JSON text of a `contentSchema` value, for strings that carry JSON."""
        for atom in atoms:
            schema = atom.schema
            if schema.get("contentMediaType") == "application/json" and "contentSchema" in schema:
                node = _Node(
                    schema["contentSchema"],
                    atom.base,
                    pointer_join(atom.pointer, "contentSchema"),
                )
                for inner in islice(self._gen([node], _Trail()), 1):
                    yield json.dumps(inner, separators=(",", ":"))
                return

    # Arrays

    def _arrays(self, atoms: list[_Node], trail: _Trail) -> Iterator[list[Any]]:
        least = 0
        most: int | None = None
        unique = False
        contains: list[tuple[_Node, int]] = []
        shapes: list[tuple[_Node, list[Any], Any]] = []
        for atom in atoms:
            schema = atom.schema
            low = _number(schema, "minItems", atom.pointer)
            high = _number(schema, "maxItems", atom.pointer)
            if low is not None:
                least = max(least, math.ceil(low))
            if high is not None:
                most = math.floor(high) if most is None else min(most, math.floor(high))
            unique = unique or schema.get("uniqueItems") is True
            prefix, rest = self.ctx.item_schemas(schema)
            if rest is None and self.ctx.draft >= 2019 and "unevaluatedItems" in schema:
                rest = schema["unevaluatedItems"]
            if rest is False:
                most = len(prefix) if most is None else min(most, len(prefix))
            shapes.append((atom, prefix, rest))
            if "contains" in schema and self.ctx.draft >= 6:
                needed = 1
                if self.ctx.draft >= 2019 and is_number(schema.get("minContains")):
                    needed = math.ceil(schema["minContains"])
                node = _Node(schema["contains"], atom.base, pointer_join(atom.pointer, "contains"))
                if needed > 0:
                    contains.append((node, needed))
        where = atoms[0].pointer if atoms else ""
        inner = trail.down(atoms)
        if most is not None and most < least:
            raise _Unsat(where, f"`minItems` {least} exceeds `maxItems` {most}")
        if least > MOST_ITEMS:
            raise _Unsat(where, f"`minItems` {least} is above {MOST_ITEMS}")

        def position(index: int) -> list[_Node]:
            found: list[_Node] = []
            for atom, prefix, rest in shapes:
                if index < len(prefix):
                    sub, key = (
                        prefix[index],
                        ("prefixItems" if "prefixItems" in atom.schema else "items"),
                    )
                    found.append(_Node(sub, atom.base, pointer_join(atom.pointer, key, index)))
                elif rest is not None:
                    key = _rest_key(atom.schema)
                    found.append(_Node(rest, atom.base, pointer_join(atom.pointer, key)))
            return found

        items: list[Any] = []
        draws = _Draws(unique)
        wanted = {id(node): count for node, count in contains}
        size = max([least, *(count for _, count in contains)])
        if most is not None:
            size = min(size, most)
        index = 0
        while index < size or (any(wanted.values()) and (most is None or index < most)):
            if index > least + sum(count for _, count in contains) + 1:
                break
            needs = [node for node, _ in contains if wanted[id(node)] > 0]
            item, satisfied = self._item(position(index), needs, inner, draws)
            if item is _MISSING:
                raise _Unsat(pointer_join(where, "items", index), "no item fits this position")
            for node in satisfied:
                wanted[id(node)] -= 1
            items.append(item)
            index += 1
        yield items
        if most is None or len(items) < most:
            extra, _ = self._item(position(len(items)), [], inner, draws)
            if extra is not _MISSING:
                yield [*items, extra]
        # Then one item drawn anew in place, the last position first (as one counts): a set
        # of fixed-length tuples has as many distinct members as it asks for, as a set of
        # models has through its properties.
        for index in reversed(range(len(items))):
            mark = canonical(items[index])
            for value in islice(self._gen(position(index), inner), MOST_ITEMS):
                if canonical(value) != mark:
                    yield [*items[:index], value, *items[index + 1 :]]

    def _item(
        self, nodes: list[_Node], needs: list[_Node], trail: _Trail, draws: _Draws
    ) -> tuple[Any, list[_Node]]:
        """An item for a position, meeting as many `contains` needs as it can."""
        attempts = [needs, *([need] for need in needs)] if needs else []
        attempts.append([])
        for extra in attempts:
            value = draws.pick([*nodes, *extra], lambda group: self._gen(group, trail))
            if value is not _MISSING:
                satisfied = [n for n in needs if self.ctx.is_valid(value, n.schema, n.base)]
                return value, satisfied
        return _MISSING, []

    # Objects

    def _objects(self, atoms: list[_Node], nodes: list[_Node], trail: _Trail) -> Iterator[Any]:
        declared: dict[str, None] = {}
        required: dict[str, None] = {}
        least = 0
        forbidden: set[str] = set()
        for atom in atoms:
            schema = atom.schema
            props = schema.get("properties", {})
            if not isinstance(props, dict):
                raise SchemaError(f"`properties` is not an object at #{atom.pointer}")
            declared.update(dict.fromkeys(props))
            names = schema.get("required", [])
            if isinstance(names, list):
                required.update(dict.fromkeys(n for n in names if isinstance(n, str)))
            elif not isinstance(names, bool):
                raise SchemaError(f"`required` is not an array at #{atom.pointer}")
            low = _number(schema, "minProperties", atom.pointer)
            if low is not None:
                least = max(least, math.ceil(low))
            negated = schema.get("not")
            if isinstance(negated, dict) and isinstance(negated.get("required"), list):
                forbidden.update(n for n in negated["required"] if isinstance(n, str))
        if least > MOST_ITEMS:
            where = atoms[0].pointer if atoms else ""
            raise _Unsat(where, f"`minProperties` {least} is above {MOST_ITEMS}")
        keys = self._closure(atoms, list(required))
        inner = trail.down(atoms)
        chosen: list[str] = []
        built: dict[str, Any] = {}
        for name in keys:
            value = self._first(self._value_nodes(atoms, name), inner)
            if value is _MISSING:
                where = atoms[0].pointer if atoms else ""
                raise _Unsat(pointer_join(where, "properties", name), "no value fits this property")
            built[name] = value
            chosen.append(name)
        if len(built) < least:
            for name in self._extra_names(atoms, declared, built, forbidden):
                if len(built) >= least:
                    break
                value = self._first(self._value_nodes(atoms, name), inner)
                if value is not _MISSING:
                    for dependency in self._closure(atoms, [name]):
                        if dependency not in built:
                            extra = self._first(self._value_nodes(atoms, dependency), inner)
                            if extra is _MISSING:
                                break
                            built[dependency] = extra
                    else:
                        built[name] = value
        dependent = self._dependent(atoms, built, nodes)
        if dependent:
            yield from self._gen([*nodes, *dependent], trail)
            return
        ordered = {name: built[name] for name in [*declared, *built] if name in built}
        yield ordered
        for name, nodes_against in self._breaking(atoms, built):
            value = self._first([*self._value_nodes(atoms, name), *nodes_against], inner)
            if value is not _MISSING:
                yield {**ordered, name: value}
        for name in declared:
            if name not in built and name not in forbidden and trail.depth <= SOFT_DEPTH:
                if not self._allowed(atoms, name):
                    continue
                value = self._first(self._value_nodes(atoms, name), inner)
                if value is not _MISSING:
                    yield {**ordered, name: value}
        if chosen:
            first = chosen[0]
            others = self._gen(self._value_nodes(atoms, first), inner)
            for drawn, value in enumerate(others):
                if drawn:
                    yield {**ordered, first: value}
                if drawn >= MOST_ITEMS:
                    break

    def _breaking(
        self, atoms: list[_Node], built: dict[str, Any]
    ) -> Iterator[tuple[str, list[_Node]]]:
        """Properties that would break a `not` schema, with what their value must break."""
        for atom in atoms:
            negated = atom.schema.get("not")
            if not isinstance(negated, dict):
                continue
            props = negated.get("properties")
            if not isinstance(props, dict):
                continue
            for name, sub in props.items():
                if name not in built and self._allowed(atoms, name):
                    pointer = pointer_join(atom.pointer, "not", "properties", name)
                    yield name, [_negated(_Node(sub, atom.base, pointer))]

    def _first(self, nodes: list[_Node], trail: _Trail) -> Any:
        for value in self._gen(nodes, trail):
            return value
        return _MISSING

    def _closure(self, atoms: list[_Node], names: list[str]) -> list[str]:
        """`names` with every property `dependentRequired` (or array `dependencies`) adds."""
        result = dict.fromkeys(names)
        changed = True
        while changed:
            changed = False
            for atom in atoms:
                for key in ("dependentRequired", "dependencies"):
                    deps = atom.schema.get(key)
                    if not isinstance(deps, dict):
                        continue
                    for name, need in deps.items():
                        if name in result and isinstance(need, list):
                            for other in need:
                                if isinstance(other, str) and other not in result:
                                    result[other] = None
                                    changed = True
        return list(result)

    def _dependent(
        self, atoms: list[_Node], built: dict[str, Any], nodes: list[_Node]
    ) -> list[_Node]:
        """Schemas that apply because a property is present and are not applied yet."""
        present = {node.pointer for node in nodes}
        found: list[_Node] = []
        for atom in atoms:
            for key in ("dependentSchemas", "dependencies"):
                deps = atom.schema.get(key)
                if not isinstance(deps, dict):
                    continue
                for name, sub in deps.items():
                    if name in built and isinstance(sub, (dict, bool)):
                        pointer = pointer_join(atom.pointer, key, name)
                        if pointer not in present:
                            found.append(_Node(sub, atom.base, pointer))
        return found

    def _allowed(self, atoms: list[_Node], name: str) -> bool:
        """Whether every part lets a property called `name` exist at all."""
        everywhere = set().union(*(_declared(atom.schema) for atom in atoms))
        for atom in atoms:
            schema = atom.schema
            closed = schema.get("additionalProperties") is False
            if closed and name not in _declared(schema) and not _pattern_hit(schema, name):
                return False
            if (
                schema.get("unevaluatedProperties") is False
                and self.ctx.draft >= 2019
                and name not in everywhere
                and not any(_pattern_hit(a.schema, name) for a in atoms)
            ):
                return False
            names = schema.get("propertyNames")
            if names is not None and not self.ctx.is_valid(name, names, atom.base):
                return False
        return True

    def _extra_names(
        self,
        atoms: list[_Node],
        declared: dict[str, None],
        built: dict[str, Any],
        forbidden: set[str],
    ) -> Iterator[str]:
        """Property names to add for `minProperties`: declared ones, then made-up ones
        (drawn as they are needed, so that a map of dates or UUIDs gets as many as it asks)."""
        for name in declared:
            if name not in built and name not in forbidden and self._allowed(atoms, name):
                yield name
        read = _key_reader(atoms)
        given: set[object] = {read(name) for name in chain(built, declared)}

        def fresh(names: Iterable[str]) -> Iterator[str]:
            for name in names:
                mark = read(name)
                if mark in given or name in built or name in declared:
                    continue
                given.add(mark)
                if self._allowed(atoms, name):
                    yield name

        if read is not _as_text:  # a map keyed by numbers: plain numerals first
            yield from fresh(str(number) for number in range(MOST_ITEMS))
        for atom in atoms:
            patterns = atom.schema.get("patternProperties")
            if isinstance(patterns, dict):
                for pattern in patterns:
                    samples = PatternSamples(pattern, spend=self._spend)
                    yield from fresh(islice(samples, MOST_ITEMS))
        formatted = False
        for atom in atoms:
            names = atom.schema.get("propertyNames")
            if isinstance(names, dict):
                fmt = names.get("format")
                formatted = formatted or (isinstance(fmt, str) and knows_format(fmt))
                node = _Node(names, atom.base, pointer_join(atom.pointer, "propertyNames"))
                drawn = islice(self._gen([node], _Trail()), MOST_ITEMS)
                yield from fresh(value for value in drawn if isinstance(value, str))
        if not formatted:  # a made-up name is no date or UUID
            yield from fresh(f"key{index}" for index in range(1, VARIANTS * 4))

    def _value_nodes(self, atoms: list[_Node], name: str) -> list[_Node]:
        """Every schema a property called `name` must meet."""
        found: list[_Node] = []
        for atom in atoms:
            schema = atom.schema
            matched = False
            props = schema.get("properties")
            if isinstance(props, dict) and name in props:
                matched = True
                found.append(
                    _Node(props[name], atom.base, pointer_join(atom.pointer, "properties", name))
                )
            patterns = schema.get("patternProperties")
            if isinstance(patterns, dict):
                for pattern, sub in patterns.items():
                    if pattern_matches(pattern, name):
                        matched = True
                        pointer = pointer_join(atom.pointer, "patternProperties", pattern)
                        found.append(_Node(sub, atom.base, pointer))
            if not matched:
                for key in ("additionalProperties", "unevaluatedProperties"):
                    if key in schema and (key == "additionalProperties" or self.ctx.draft >= 2019):
                        pointer = pointer_join(atom.pointer, key)
                        found.append(_Node(schema[key], atom.base, pointer))
                        break
        return found


def _as_text(name: str) -> object:
    return name


def _int_key(name: str) -> object:
    try:
        return int(name)
    except ValueError:
        return name


def _float_key(name: str) -> object:
    try:
        return float(name)
    except ValueError:
        return name


_NUMBER_KEYS: dict[str, Callable[[str], object]] = {
    _KEY_NAMES["int"]["pattern"]: _int_key,
    _KEY_NAMES["float"]["pattern"]: _float_key,
    _KEY_NAMES["decimal"]["pattern"]: _float_key,
}
"""How validation reads a key of a map keyed by numbers, by the pattern allama gives such
keys: `"0"`, `"+0"` and `"00"` are one key of an `int` map. A `Decimal` key is read as a
float here (coarser: two keys apart as floats are apart as decimals)."""


def _key_reader(atoms: list[_Node]) -> Callable[[str], object]:
    """How a map's keys are told apart: as the numbers they name where a key pattern says
    the map is keyed by numbers, else as text."""
    readers: list[Callable[[str], object]] = []
    for atom in atoms:
        names = atom.schema.get("propertyNames")
        patterns = list(atom.schema.get("patternProperties") or ())
        if isinstance(names, dict) and isinstance(names.get("pattern"), str):
            patterns.append(names["pattern"])
        readers.extend(
            _NUMBER_KEYS[p] for p in patterns if isinstance(p, str) and p in _NUMBER_KEYS
        )
    if _float_key in readers:
        return _float_key
    return readers[0] if readers else _as_text


@dataclass(frozen=True)
class _Trail:
    """How deep the generation is, and which schemas enclose it (to spot recursion)."""

    depth: int = 0
    ancestors: frozenset[str] = frozenset()

    def down(self, atoms: list[_Node]) -> _Trail:
        return _Trail(self.depth + 1, self.ancestors | {atom.pointer for atom in atoms})


class _Draws:
    """Items of one array: the same first value everywhere, or distinct ones in order.

    For `uniqueItems` each group of schemas keeps one running generator, so that the
    hundredth item costs what the second did instead of a new search from the start.
    """

    def __init__(self, unique: bool) -> None:
        self.unique = unique
        self.taken: set[str] = set()
        self.firsts: dict[tuple[tuple[str, str], ...], Any] = {}
        self.pools: dict[tuple[tuple[str, str], ...], Iterator[Any]] = {}

    def pick(self, nodes: list[_Node], start: Callable[[list[_Node]], Iterator[Any]]) -> Any:
        key = tuple((node.pointer, node.base) for node in nodes)
        if not self.unique:
            if key not in self.firsts:
                self.firsts[key] = next(start(nodes), _MISSING)
            return self.firsts[key]
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = start(nodes)
        for value in islice(pool, len(self.taken) + VARIANTS * 2):
            mark = canonical(value)
            if mark not in self.taken:
                self.taken.add(mark)
                return value
        return _MISSING


def _negated(node: _Node) -> _Node:
    """A schema a value meets exactly when it breaks `node` (for `oneOf` exclusivity)."""
    return _Node({"not": node.schema}, node.base, node.pointer + "/~not")


class _Missing:
    """No value could be made (distinct from a generated `null`)."""


_MISSING: Any = _Missing()


def _number(schema: dict[str, Any], key: str, pointer: str) -> float | None:
    value = schema.get(key)
    if value is None:
        return None
    if not is_number(value):
        raise SchemaError(f"`{key}` is not a number at #{pointer}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"`{key}` is not a finite number at #{pointer}")
    return float(value) if isinstance(value, float) else int(value)


def _tighter(
    current: tuple[float, bool] | None, new: tuple[float, bool], *, upper: bool
) -> tuple[float, bool]:
    if current is None:
        return new
    if new[0] == current[0]:
        return (new[0], new[1] or current[1])
    better = new[0] < current[0] if upper else new[0] > current[0]
    return new if better else current


def _exact(number: float) -> Fraction:
    """A schema's number as its numeral reads (`0.1` is 1/10, not the float nearest it):
    what a decimal compares, and what multiples are counted in."""
    value = numeral_value(number)
    if value is None:
        raise SchemaError(f"{number!r} is not a finite number")
    return value


def _unit(steps: list[float], *, integer: bool) -> Fraction | None:
    """The step candidates are counted in: the least common multiple of every step, read
    exactly (of 0.2 and 0.3, 0.6), whole for an integer (`multipleOf` 0.001 gives 1, 2.5
    gives 5); the largest step where that grows too large to count in."""
    result = Fraction(1) if integer else None
    for step in steps:
        exact = _exact(step)
        if result is None:
            result = exact
            continue
        # The multiples of p/q are k * p/q: those of both steps, of lcm(p1, p2) / gcd(q1, q2).
        numerator = math.lcm(result.numerator, exact.numerator)
        if numerator > 2**53:
            return max(_exact(step) for step in steps)
        result = Fraction(numerator, math.gcd(result.denominator, exact.denominator))
    return result


def _number_candidates(
    low: tuple[float, bool] | None,
    high: tuple[float, bool] | None,
    steps: list[float],
    *,
    integer: bool,
) -> Iterator[Fraction]:
    """Numbers to try, lowest acceptable first (0 when nothing bounds it from below), as
    the exact values of numerals: bounds and steps read as their numerals say, multiples
    counted in them (0.1 * 3 is 0.3). With a step the bounds come last, as a float's
    reader may take a bound for a multiple that no exact multiple rounds to.

    Each run is monotonic and stops at the far bound or after `_SCAN` numbers, so the
    sequence is finite even when nothing in it fits.
    """
    unit = _unit(steps, integer=integer)
    floor = None if low is None else _exact(low[0])
    top = None if high is None else _exact(high[0])
    if unit is not None:
        binary = not integer
        if floor is not None:
            first = math.ceil(floor / unit)
            yield from _multiples(unit, count(first - 1), top, up=True, binary=binary)
        elif top is not None and top < 0:
            last = math.floor(top / unit)
            yield from _multiples(unit, count(last + 1, -1), None, up=False, binary=binary)
        else:
            yield from _multiples(unit, count(0), top, up=True, binary=binary)
            yield from _multiples(unit, count(-1, -1), None, up=False, binary=binary)
        if binary:
            yield from (bound for bound in (floor, top) if bound is not None)
        return
    if low is not None and floor is not None:
        whole = math.floor(floor) + 1 if floor.denominator == 1 else math.ceil(floor)
        yield floor
        yield Fraction(whole)
        if top is not None:
            yield (floor + top) / 2
        yield floor + Fraction(1, 2)
        yield from _next_float(low[0], math.inf)
        yield from _run(map(Fraction, count(whole + 1)), top, up=True)
        if top is not None:
            yield from _halves(floor, top)
        return
    if high is not None and top is not None and top <= 0:
        below = math.floor(top) - 1 if top.denominator == 1 else math.floor(top)
        yield top
        yield Fraction(below)
        yield from _next_float(high[0], -math.inf)
        yield from _run(map(Fraction, count(below - 1, -1)), None, up=False)
        return
    yield from _run(map(Fraction, count(0)), top, up=True)
    if top is not None:
        yield from _halves(Fraction(0), top)
    yield from _run(map(Fraction, count(-1, -1)), None, up=False)


def _multiples(
    unit: Fraction, counts: Iterator[int], bound: Fraction | None, *, up: bool, binary: bool
) -> Iterator[Fraction]:
    """A run of the multiples k * unit, each followed, with `binary`, by the product as
    binary floats make it: pydantic's `float` measures a number against that product, so
    of 0.00001 it takes 65612655.68000001 and refuses 65612655.68."""
    for exact in _run((unit * k for k in counts), bound, up=up):
        yield exact
        if binary:
            try:
                product = float(exact / unit) * float(unit)
            except OverflowError:
                continue
            if math.isfinite(product):
                yield _exact(product)


def _next_float(number: float, toward: float) -> Iterator[Fraction]:
    """The float next to a bound, toward `toward` (none past the floats)."""
    try:
        after = math.nextafter(float(number), toward)
    except OverflowError:
        return
    if math.isfinite(after):
        yield _exact(after)


def _written(value: Fraction, *, integer: bool) -> float | None:
    """The JSON number written for an exact value: a whole one as an int where a float
    holds it exactly (any whole one for an integer), else the nearest float, which is the
    number judged (`None` past the floats)."""
    if value.denominator == 1 and (integer or abs(value) <= 2**53):
        return int(value)
    try:
        written = float(value)
    except OverflowError:
        return None
    return _tidy(written, integer=integer)


def _inside(
    value: Fraction, low: tuple[float, bool] | None, high: tuple[float, bool] | None
) -> bool:
    """Whether an exact value lies within the bounds read as their numerals say, as a
    decimal compares them."""
    if low is not None:
        floor = _exact(low[0])
        if value < floor or (low[1] and value == floor):
            return False
    if high is not None:
        top = _exact(high[0])
        if value > top or (high[1] and value == top):
            return False
    return True


def _bounds(
    atoms: list[_Node],
) -> tuple[tuple[float, bool] | None, tuple[float, bool] | None, list[float]]:
    """The tightest lower and upper bound (value, exclusive) and every `multipleOf`."""
    low: tuple[float, bool] | None = None
    high: tuple[float, bool] | None = None
    steps: list[float] = []
    for atom in atoms:
        schema = atom.schema
        exclusive_low = schema.get("exclusiveMinimum")
        exclusive_high = schema.get("exclusiveMaximum")
        minimum = _number(schema, "minimum", atom.pointer)
        maximum = _number(schema, "maximum", atom.pointer)
        if minimum is not None:
            low = _tighter(low, (minimum, exclusive_low is True), upper=False)
        if maximum is not None:
            high = _tighter(high, (maximum, exclusive_high is True), upper=True)
        if is_number(exclusive_low):
            low = _tighter(low, (exclusive_low, True), upper=False)
        if is_number(exclusive_high):
            high = _tighter(high, (exclusive_high, True), upper=True)
        step = _number(schema, "multipleOf", atom.pointer)
        if step is not None:
            if step <= 0:
                raise SchemaError(f"`multipleOf` must be above 0 at #{atom.pointer}")
            steps.append(step)
    if (
        low is not None
        and high is not None
        and (low[0] > high[0] or (low[0] == high[0] and (low[1] or high[1])))
    ):
        where = atoms[0].pointer if atoms else ""
        raise _Unsat(where, f"no number lies between {low[0]} and {high[0]}")
    return low, high, steps


_PLACES = 7
"""Decimal places the numbers tried for a decimal go to."""


def _decimal_candidates(
    low: tuple[float, bool] | None, high: tuple[float, bool] | None
) -> Iterator[Fraction]:
    """Numbers with few digits near the lower bound (or the upper), then near 0: whole
    ones, then with one decimal place, then two..., for a decimal's digit limits."""
    for places in range(_PLACES):
        unit = Fraction(1, 10**places)
        values: list[Fraction] = []
        if low is not None:
            floor = _exact(low[0])
            start = math.ceil(floor / unit) * unit
            if low[1] and start == floor:
                start += unit
            values.extend(start + unit * k for k in range(3))
        elif high is not None and high[0] <= 0:
            top = _exact(high[0])
            start = math.floor(top / unit) * unit
            if high[1] and start == top:
                start -= unit
            values.extend(start - unit * k for k in range(3))
        values.extend((Fraction(0), unit, -unit))
        yield from values


def _numeral(value: float) -> str:
    """A number as a numeral without an exponent, as a decimal's digits are counted."""
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return str(int(value))
    return format(Decimal(repr(value)), "f")


def _decimal_text(value: Fraction) -> str | None:
    """The exact numeral of a value without an exponent (`None` for one no decimal
    numeral ends, 1/3): a decimal written as a string is read as written."""
    rest, places = value.denominator, 0
    for prime in (2, 5):
        power = 0
        while rest % prime == 0:
            rest //= prime
            power += 1
        places = max(places, power)
    if rest != 1:
        return None
    scaled = value.numerator * 10**places // value.denominator
    return format(Decimal(f"{scaled}e-{places}"), "f")


def _digits_fit(text: str, patterns: list[str]) -> bool:
    """Whether a decimal's digits meet its patterns, as pydantic counts them: zero has
    one whole digit (the patterns let `0` through where no whole digit is allowed)."""
    if not patterns:
        return True
    if Decimal(text) == 0 and not all(pattern_matches(p, "1") for p in patterns):
        return False
    return all(pattern_matches(p, text) for p in patterns)


def _decimal_siblings(root: Any) -> dict[int, list[dict[str, Any]]]:
    """For each `format: decimal` branch of an `anyOf` or `oneOf`, the other branches
    (by the branch's `id`: the schema is kept by the generator, so ids stay valid)."""
    found: dict[int, list[dict[str, Any]]] = {}
    stack: list[Any] = [root]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if not isinstance(branches, list):
                continue
            for branch in branches:
                if isinstance(branch, dict) and branch.get("format") == "decimal":
                    found[id(branch)] = [
                        other
                        for other in branches
                        if other is not branch and isinstance(other, dict)
                    ]
        stack.extend(node.values())
    return found


def unknown_formats(schema: Any) -> list[tuple[str, str]]:
    """Each string `format` in the schema the generator does not write, with the pointer
    of the schema naming it: its strings are plain text, which the format may refuse."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack and len(found) < 100:
        node, pointer = stack.pop()
        if isinstance(node, list):
            stack.extend(
                (item, pointer_join(pointer, i)) for i, item in reversed(list(enumerate(node)))
            )
            continue
        if not isinstance(node, dict):
            continue
        fmt = node.get("format")
        kind = node.get("type", "string")
        textual = kind == "string" or (isinstance(kind, list) and "string" in kind)
        listed = "enum" in node or "const" in node  # the value is one of those
        if isinstance(fmt, str) and textual and not listed and not knows_format(fmt):
            found.append((pointer, fmt))
        for key, sub in reversed(list(node.items())):
            if key not in ("enum", "const", "default", "examples") and isinstance(
                sub, (dict, list)
            ):
                stack.append((sub, pointer_join(pointer, key)))
    return found


def unenforced_marks(schema: Any) -> list[tuple[str, str]]:
    """Each place `schema` asks for what no provider enforces, with its pointer: a format
    of allama's own marking a check the schema cannot say (`UNENFORCED_MARKS`), and the
    JSON in a string (`contentSchema`, not looked into: the provider sees a string). Only
    the keywords that hold subschemas are walked, so a property named `format` is none."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(schema, "")]
    walked = 0  # bounded, as a schema built in Python may hold itself
    while stack and len(found) < 100 and walked < 100_000:
        node, pointer = stack.pop()
        walked += 1
        if not isinstance(node, dict):
            continue
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in UNENFORCED_MARKS:
            found.append((pointer, f"`format` `{fmt}`"))
        kinds = node.get("type", "string")
        if "contentSchema" in node and "string" in (kinds if isinstance(kinds, list) else [kinds]):
            found.append((pointer, "`contentSchema` (the JSON in a string)"))
        subschemas: list[tuple[Any, str]] = []
        for key, sub in node.items():
            if key in SCHEMA_MAPS and isinstance(sub, dict):
                subschemas.extend(
                    (each, pointer_join(pointer, key, name)) for name, each in sub.items()
                )
            elif (key in SCHEMA_LISTS or key == "items") and isinstance(sub, list):
                subschemas.extend(
                    (each, pointer_join(pointer, key, i)) for i, each in enumerate(sub)
                )
            elif (key in SCHEMA_SINGLE or key == "items") and key != "contentSchema":
                subschemas.append((sub, pointer_join(pointer, key)))
        stack.extend(reversed(subschemas))
    return found


_SCAN = 4096
"""Numbers one monotonic run of candidates may try."""


def _run(values: Iterator[Fraction], bound: Fraction | None, *, up: bool) -> Iterator[Fraction]:
    for value in islice(values, _SCAN):
        if bound is not None and (value > bound if up else value < bound):
            return
        yield value


def _halves(low: Fraction, high: Fraction) -> Iterator[Fraction]:
    """Points inside (low, high) at ever finer halves: the middle, the quarters, ..."""
    for depth in range(1, 12):
        parts = 2**depth
        for index in range(1, parts, 2):
            yield low + (high - low) * index / parts


def _tidy(value: float, *, integer: bool) -> float:
    """Whole numbers as `int`, so that `0` and not `0.0` reaches the JSON."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if integer and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _schema_list(schema: dict[str, Any], key: str, pointer: str) -> list[Any]:
    value = schema.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SchemaError(f"`{key}` is not an array at #{pointer}")
    return value


def _rest_key(schema: dict[str, Any]) -> str:
    if isinstance(schema.get("items"), list):
        return "additionalItems"
    if "items" in schema:
        return "items"
    return "unevaluatedItems"


def _declared(schema: dict[str, Any]) -> set[str]:
    props = schema.get("properties")
    return set(props) if isinstance(props, dict) else set()


def _pattern_hit(schema: dict[str, Any], name: str) -> bool:
    patterns = schema.get("patternProperties")
    return isinstance(patterns, dict) and any(pattern_matches(p, name) for p in patterns)
