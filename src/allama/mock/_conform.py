"""A small JSON Schema validator, so the test provider can check its own answers.

jsonschema is a dev dependency only, and the generator needs a yes/no answer many times per
value (for `anyOf` branches, `not`, `if`, `contains`), so this module answers it: drafts 4 to
2020-12, local `$ref`s with `$id` and anchors, `unevaluated*`. Formats are annotations here,
as they are in jsonschema by default.

A `pattern` is read by Python's `re`, as jsonschema reads it, except where `re` cannot
read it as meant (a syntax error, Rust's set syntax): such a pattern is matched by Rust's
`regex` (pydantic's engine) where that reads it, and otherwise not held against a value.
Where a pattern nests repeats, Rust's `regex` (linear in time) matches it instead, so that
no value takes exponential time to check; where Rust cannot read it either, a text too
long to check in bounded time is taken as not matching.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, TypeGuard
from urllib.parse import unquote, urldefrag, urljoin

from pydantic_core import SchemaError as SchemaError_
from pydantic_core import SchemaValidator, ValidationError, core_schema

__all__ = ["SchemaContext", "SchemaError", "canonical", "json_equal", "pointer_join"]

_parser: Any = importlib.import_module("re._parser")


class SchemaError(ValueError):
    """The schema is malformed, or refers to something that cannot be found."""


_DRAFTS = (
    ("draft-03", 4),
    ("draft-04", 4),
    ("draft-06", 6),
    ("draft-07", 7),
    ("2019-09", 2019),
    ("2020-12", 2020),
)

_METASCHEMA_HOSTS = ("json-schema.org/",)
_META_STANDIN: dict[str, Any] = {"type": ["object", "boolean"]}
"""What a `$ref` to a published meta-schema stands for: any schema is an object or boolean."""

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
)


def pointer_join(pointer: str, *parts: str | int) -> str:
    """`pointer` extended by `parts`, escaped as JSON Pointer wants."""
    tail = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return pointer + tail


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON means it: `true` is not `1`, `1` is `1.0`, order matters in arrays."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) or isinstance(b, str) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return False


def canonical(value: Any) -> str:
    """A text equal for two values exactly when `json_equal` holds, for sets and dicts."""
    return json.dumps(_canon(value), sort_keys=True, separators=(",", ":"))


def _canon(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_canon(item) for item in value]
    if isinstance(value, dict):
        return {key: _canon(item) for key, item in value.items()}
    return value


def draft_of(root: Any) -> int:
    """The draft a schema declares with `$schema`; 2020-12 when it declares none."""
    declared = root.get("$schema") if isinstance(root, dict) else None
    if isinstance(declared, str):
        for marker, draft in _DRAFTS:
            if marker in declared:
                return draft
    return 2020


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def has_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return is_integer(value)
    if name == "number":
        return is_number(value)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    return name == "any"


def jsonschema_multiple(value: float, step: float) -> bool:
    """`value` is a multiple of `step`, judged the way jsonschema judges it for floats
    (`0.3 / 0.1` is not whole there)."""
    if isinstance(step, float) or isinstance(value, float):
        try:
            quotient = value / step
        except OverflowError:
            return False
        if math.isinf(quotient):
            return False
        return quotient == int(quotient)
    return value % step == 0


def exact_multiple(value: float, step: float) -> bool:
    """`value` is a multiple of `step` in exact arithmetic on the numerals JSON writes
    (`0.3` of `0.1`): what a schema's `multipleOf` means, and how an integer is read."""
    exact_value, exact_step = numeral_value(value), numeral_value(step)
    if exact_value is None or exact_step is None or exact_step == 0:
        return False
    return exact_value % exact_step == 0


def numeral_value(number: float | str) -> Fraction | None:
    """The exact value of a number's JSON numeral (a float's shortest one, as `json`
    writes it), or of a numeral text; `None` for what is no finite number."""
    if isinstance(number, int):
        return Fraction(number)
    try:
        decimal = Decimal(repr(number) if isinstance(number, float) else number)
    except ArithmeticError:
        return None
    return Fraction(decimal) if decimal.is_finite() else None


@functools.lru_cache(maxsize=256)
def _float_reader(step: float) -> SchemaValidator | None:
    """Pydantic's `float` reader of multiples of `step` (kept for the steps used most: a
    process that mocks many distinct steps does not keep them all)."""
    try:
        return SchemaValidator(core_schema.float_schema(multiple_of=step))
    except (SchemaError_, OverflowError, TypeError):
        return None


@functools.lru_cache(maxsize=256)
def _decimal_reader(step: float) -> SchemaValidator | None:
    """Pydantic's `Decimal` reader of multiples of `step`, kept as `_float_reader` is."""
    if numeral_value(step) is None:
        return None
    decimal = Decimal(repr(step) if isinstance(step, float) else step)
    try:
        return SchemaValidator(core_schema.decimal_schema(multiple_of=decimal))
    except SchemaError_:
        return None


def float_multiple(value: float, step: float) -> bool:
    """`value`, written as JSON, is a multiple of `step` to pydantic's `float`: its own
    check, whose tolerance takes `0.3` for a multiple of `0.1` and refuses some exact
    multiples (`15987644.7`)."""
    return _reads(_float_reader(step), value)


def decimal_multiple(value: float | str, step: float) -> bool:
    """`value`, written as JSON (a number, or a numeral in a string), is a multiple of
    `step` to pydantic's `Decimal`: decimal arithmetic on the numeral, which a number
    reaches through a float (`1000000000000000.02` is read as `1000000000000000.0`)."""
    return _reads(_decimal_reader(step), value)


def _reads(reader: SchemaValidator | None, value: float | str) -> bool:
    if reader is None:
        return False
    try:
        reader.validate_json(json.dumps(value))
    except (ValidationError, ValueError, OverflowError):
        return False
    return True


MULTIPLE_READERS: tuple[Callable[[Any, float], bool], ...] = (
    jsonschema_multiple,
    exact_multiple,
    float_multiple,
    decimal_multiple,
)
"""The ways a number is judged a multiple by what reads it: jsonschema's binary floats,
the exact numerals, pydantic's `float` and `Decimal` (which disagree at the edges)."""


def is_multiple(value: float, step: float) -> bool:
    """`value` is a multiple of `step` to some reader of it: the generator's check, so
    that a value is kept wherever the reader its type names takes it, and a `not` keeps
    only values no reader takes for a multiple (the generator picks among the rest)."""
    return any(reader(value, step) for reader in MULTIPLE_READERS)


_REGEX_CACHE: dict[str, re.Pattern[str] | None] = {}
_RUST_CACHE: dict[str, SchemaValidator | None] = {}
_NESTED_CACHE: dict[str, bool] = {}
_SLOW_TEXT = 16
"""The longest text a pattern with nested repeats is matched against by Python's `re`
alone: its backtracking takes time exponential in the length (`^(a+)+$`)."""


def compiled(pattern: str) -> re.Pattern[str] | None:
    """The pattern compiled by Python's `re`, or `None` when `re` cannot read it as meant:
    a syntax error, or a class holding Rust's set syntax (`[[:upper:]]`, `[a-z&&[^x]]`,
    which `re` reads as other characters and pydantic's engine as sets)."""
    if pattern not in _REGEX_CACHE:
        regex: re.Pattern[str] | None = None
        if not rust_set_syntax(pattern):
            try:
                regex = re.compile(pattern)
            except (re.error, OverflowError, RecursionError):
                regex = None
        _REGEX_CACHE[pattern] = regex
    return _REGEX_CACHE[pattern]


def rust_set_syntax(pattern: str) -> bool:
    """Whether a class holds a nested class or `&&`, `--`, `~~` (the syntax Rust's
    `regex` reads as set operations and Python's `re` as plain characters)."""
    index, depth = 0, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if depth == 0:
            if char == "[":
                depth = 1
                index += 1
                if pattern.startswith("^", index):
                    index += 1
                if pattern.startswith("]", index):
                    index += 1  # a leading `]` is a literal in both engines
                continue
        elif char == "[" or pattern[index : index + 2] in ("&&", "--", "~~"):
            return True
        elif char == "]":
            depth = 0
        index += 1
    return False


def rust_matches(pattern: str, text: str) -> bool | None:
    """Whether pydantic's default engine (Rust's `regex`) finds the pattern in `text`;
    `None` when it cannot compile the pattern (lookarounds and backreferences: pydantic
    then needs `regex_engine="python-re"`, and `re` is the engine)."""
    if pattern not in _RUST_CACHE:
        try:
            _RUST_CACHE[pattern] = SchemaValidator(core_schema.str_schema(pattern=pattern))
        except (SchemaError_, RecursionError, OverflowError):
            _RUST_CACHE[pattern] = None
    validator = _RUST_CACHE[pattern]
    return None if validator is None else validator.isinstance_python(text)


def _nested_repeats(pattern: str) -> bool:
    """Whether a repeat holds another repeat (`(a+)+`), which `re` backtracks through in
    exponential time on a text that almost matches."""
    if pattern not in _NESTED_CACHE:
        try:
            parsed = _parser.parse(pattern)
            _NESTED_CACHE[pattern] = _repeat_in_repeat(parsed, inside=False)
        except (re.error, OverflowError, RecursionError):
            _NESTED_CACHE[pattern] = False
    return _NESTED_CACHE[pattern]


def _repeat_in_repeat(items: Any, *, inside: bool) -> bool:
    for op, arg in items:
        name = str(getattr(op, "name", op))
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            many = arg[1] > 1
            if many and inside:
                return True
            if _repeat_in_repeat(arg[2], inside=inside or many):
                return True
        elif name == "BRANCH":
            if any(_repeat_in_repeat(branch, inside=inside) for branch in arg[1]):
                return True
        elif name == "SUBPATTERN":
            if _repeat_in_repeat(arg[-1], inside=inside):
                return True
        elif name == "ATOMIC_GROUP":
            if _repeat_in_repeat(arg, inside=inside):
                return True
        elif name in ("ASSERT", "ASSERT_NOT"):
            if _repeat_in_repeat(arg[1], inside=inside):
                return True
        elif name == "GROUPREF_EXISTS" and any(
            _repeat_in_repeat(part or [], inside=inside) for part in arg[1:]
        ):
            return True
    return False


def checked_length(pattern: str) -> int | None:
    """The longest text `pattern_matches` can check against the pattern (longer ones are
    taken as not matching), or `None` when any text can be checked."""
    regex = compiled(pattern)
    if regex is None or not _nested_repeats(pattern) or rust_matches(pattern, "") is not None:
        return None
    return _SLOW_TEXT


class _Unchecked(Exception):
    """A text a pattern cannot be matched against in bounded time: the value is refused."""


def pattern_holds(pattern: str, text: str) -> bool:
    """`pattern_matches` for a validation: `_Unchecked` where the text cannot be checked,
    so that the value is refused whichever way the match would count (under `not` too)."""
    limit = checked_length(pattern)
    if limit is not None and len(text) > limit:
        raise _Unchecked
    return pattern_matches(pattern, text)


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether `text` contains a match. A pattern `re` cannot read is matched by Rust's
    `regex` where that compiles it (`\\p{Thai}`, `[a-z&&[^aeiou]]`: pydantic's engine holds
    a value to it), and is not held against a value where neither engine reads it.

    A pattern with nested repeats is matched by Rust's `regex` (linear time) where it
    compiles, and otherwise by `re` on short texts only: a longer text is taken as not
    matching (it cannot be checked in bounded time), so that no schema makes a check take
    exponential time and no unchecked text is taken for a match."""
    regex = compiled(pattern)
    if regex is None:
        return rust_matches(pattern, text) is not False
    if _nested_repeats(pattern):
        rust = rust_matches(pattern, text)
        if rust is not None:
            return rust
        if len(text) > _SLOW_TEXT:
            return False
    return regex.search(text) is not None


@dataclass
class _Seen:
    """Annotations of a successful validation, for `unevaluated*`."""

    props: set[str] = field(default_factory=set)
    items: int = 0

    def merge(self, other: _Seen) -> None:
        self.props |= other.props
        self.items = max(self.items, other.items)


class SchemaContext:
    """A root schema with its draft and every `$id` and anchor it holds, ready to resolve refs."""

    def __init__(
        self, root: Any, *, multiple: Callable[[Any, float], bool] = jsonschema_multiple
    ) -> None:
        if not isinstance(root, (dict, bool)):
            raise SchemaError(f"a schema is an object or a boolean, not {type(root).__name__}")
        self.root = root
        self.multiple = multiple
        """How `multipleOf` is judged: as jsonschema judges it unless told otherwise."""
        self.draft = draft_of(root)
        self._resources: dict[str, tuple[Any, str]] = {}
        self._anchors: dict[str, tuple[Any, str, str]] = {}
        self._following: set[tuple[int, int]] = set()
        self.base = self._index(root, "", "")

    # Indexing and resolution

    def _id_of(self, schema: dict[str, Any]) -> str | None:
        value = schema.get("id" if self.draft <= 4 else "$id")
        if not isinstance(value, str) or (self.draft <= 7 and "$ref" in schema):
            return None
        return value

    def _index(self, root: Any, base: str, pointer: str) -> str:
        """Record every resource and anchor under `root`; the base URI of `root` itself."""
        own_base = base
        stack: list[tuple[Any, str, str]] = [(root, base, pointer)]
        first = True
        while stack:
            schema, base_uri, ptr = stack.pop()
            if not isinstance(schema, dict):
                continue
            identifier = self._id_of(schema)
            if identifier is not None:
                if identifier.startswith("#") and self.draft <= 7:
                    self._anchors[urljoin(base_uri, identifier)] = (schema, base_uri, ptr)
                else:
                    base_uri = urldefrag(urljoin(base_uri, identifier))[0]
                    self._resources.setdefault(base_uri, (schema, ptr))
            anchor = schema.get("$anchor")
            if isinstance(anchor, str):
                self._anchors[base_uri + "#" + anchor] = (schema, base_uri, ptr)
            dynamic = schema.get("$dynamicAnchor")
            if isinstance(dynamic, str):
                self._anchors.setdefault(base_uri + "#" + dynamic, (schema, base_uri, ptr))
            if first:
                own_base = base_uri
                first = False
            for sub, sub_ptr in _children(schema, ptr):
                stack.append((sub, base_uri, sub_ptr))
        self._resources.setdefault(own_base, (root, pointer))
        return own_base

    def resolve(self, ref: str, base: str, at: str) -> tuple[Any, str, str]:
        """The schema `ref` names from `base`, with its base URI and pointer."""
        target = base + ref if ref.startswith("#") or not base else urljoin(base, ref)
        document, fragment = urldefrag(target)
        if document not in self._resources and not document:
            document = self.base
        if target in self._anchors:
            return self._anchors[target]
        if document not in self._resources:
            if any(host in document for host in _METASCHEMA_HOSTS):
                return _META_STANDIN, document, pointer_join(at, "$ref")
            raise SchemaError(f"cannot resolve $ref {ref!r} at #{at}")
        schema, ptr = self._resources[document]
        if fragment and not fragment.startswith("/"):
            anchored = self._anchors.get(document + "#" + fragment)
            if anchored is None:
                raise SchemaError(f"cannot resolve $ref {ref!r} at #{at}: no anchor {fragment!r}")
            return anchored
        node: Any = schema
        node_base = document
        for raw in fragment.split("/")[1:] if fragment else ():
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"cannot resolve $ref {ref!r} at #{at}: no {part!r}")
            ptr = pointer_join(ptr, part)
            if isinstance(node, dict):
                identifier = self._id_of(node)
                if identifier is not None and not identifier.startswith("#"):
                    node_base = urldefrag(urljoin(node_base, identifier))[0]
        return node, node_base, ptr

    def rebase(self, schema: dict[str, Any], base: str) -> str:
        """The base URI inside `schema`, which may declare its own `$id`."""
        identifier = self._id_of(schema)
        if identifier is None or identifier.startswith("#"):
            return base
        return urldefrag(urljoin(base, identifier))[0]

    def ref_of(self, schema: dict[str, Any]) -> str | None:
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):
            value = schema.get(key)
            if isinstance(value, str):
                return value
        return None

    def ref_only(self, schema: dict[str, Any]) -> bool:
        """Drafts up to 7 ignore everything beside a `$ref`."""
        return self.draft <= 7 and isinstance(schema.get("$ref"), str)

    # Validation

    def is_valid(self, value: Any, schema: Any = None, base: str | None = None) -> bool:
        """Whether `value` is valid against `schema` (the root when omitted)."""
        target = self.root if schema is None else schema
        try:
            return self._check(target, value, self.base if base is None else base, 0) is not None
        except (RecursionError, _Unchecked):
            return False

    def _check(self, schema: Any, value: Any, base: str, depth: int) -> _Seen | None:
        if schema is True:
            return _Seen()
        if schema is False:
            return None
        if not isinstance(schema, dict):
            return _Seen()
        if depth > 200:
            return None
        base = self.rebase(schema, base)
        seen = _Seen()
        ref = self.ref_of(schema)
        if ref is not None:
            target, target_base, _ = self.resolve(ref, base, "")
            loop = (id(target), id(value))
            if loop in self._following:
                return None  # a cycle of refs that never reaches a keyword: no value passes
            self._following.add(loop)
            try:
                result = self._check(target, value, target_base, depth + 1)
            finally:
                self._following.discard(loop)
            if result is None:
                return None
            if self.ref_only(schema):
                return result
            seen.merge(result)
        if not self._check_local(schema, value):
            return None
        for key in ("allOf", "anyOf", "oneOf"):
            subs = schema.get(key)
            if not isinstance(subs, list):
                continue
            passed = [self._check(sub, value, base, depth + 1) for sub in subs]
            good = [p for p in passed if p is not None]
            if key == "allOf" and len(good) != len(subs):
                return None
            if key == "anyOf" and not good:
                return None
            if key == "oneOf" and len(good) != 1:
                return None
            for p in good:
                seen.merge(p)
        if "not" in schema and self._check(schema["not"], value, base, depth + 1) is not None:
            return None
        if "if" in schema and self.draft >= 7:
            cond = self._check(schema["if"], value, base, depth + 1)
            branch = schema.get("then" if cond is not None else "else", True)
            if cond is not None:
                seen.merge(cond)
            result = self._check(branch, value, base, depth + 1)
            if result is None:
                return None
            seen.merge(result)
        if isinstance(value, dict) and not self._check_object(schema, value, base, depth, seen):
            return None
        if isinstance(value, list) and not self._check_array(schema, value, base, depth, seen):
            return None
        return seen

    def _check_local(self, schema: dict[str, Any], value: Any) -> bool:
        """The keywords that look at `value` alone, without subschemas."""
        kind = schema.get("type")
        if isinstance(kind, str) and not has_type(value, kind):
            return False
        if isinstance(kind, list) and not any(
            has_type(value, k) for k in kind if isinstance(k, str)
        ):
            return False
        if "const" in schema and self.draft >= 6 and not json_equal(schema["const"], value):
            return False
        enum = schema.get("enum")
        if isinstance(enum, list) and not any(json_equal(e, value) for e in enum):
            return False
        if is_number(value):
            return self._check_number(schema, value)
        if isinstance(value, str):
            length = len(value)
            low = schema.get("minLength")
            if is_number(low) and length < low:
                return False
            high = schema.get("maxLength")
            if is_number(high) and length > high:
                return False
            pattern = schema.get("pattern")
            if isinstance(pattern, str) and not pattern_holds(pattern, value):
                return False
        return True

    def _check_number(self, schema: dict[str, Any], value: float) -> bool:
        low, high = schema.get("minimum"), schema.get("maximum")
        xlow, xhigh = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if is_number(low) and (value < low or (xlow is True and value == low)):
            return False
        if is_number(high) and (value > high or (xhigh is True and value == high)):
            return False
        if is_number(xlow) and value <= xlow:
            return False
        if is_number(xhigh) and value >= xhigh:
            return False
        step = schema.get("multipleOf")
        return not (is_number(step) and step > 0 and not self.multiple(value, step))

    def _check_object(
        self, schema: dict[str, Any], value: dict[str, Any], base: str, depth: int, seen: _Seen
    ) -> bool:
        required = schema.get("required")
        if isinstance(required, list) and any(
            isinstance(name, str) and name not in value for name in required
        ):
            return False
        low, high = schema.get("minProperties"), schema.get("maxProperties")
        if (is_number(low) and len(value) < low) or (is_number(high) and len(value) > high):
            return False
        names = schema.get("propertyNames")
        if names is not None and any(
            self._check(names, name, base, depth + 1) is None for name in value
        ):
            return False
        for key in ("dependentRequired", "dependencies"):
            deps = schema.get(key)
            if not isinstance(deps, dict):
                continue
            for name, need in deps.items():
                if name not in value:
                    continue
                if isinstance(need, list):
                    if any(isinstance(n, str) and n not in value for n in need):
                        return False
                elif key == "dependencies" and self._check(need, value, base, depth + 1) is None:
                    return False
        dependent = schema.get("dependentSchemas")
        if isinstance(dependent, dict):
            for name, sub in dependent.items():
                if name in value:
                    result = self._check(sub, value, base, depth + 1)
                    if result is None:
                        return False
                    seen.merge(result)
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        patterns = schema.get("patternProperties")
        patterns = patterns if isinstance(patterns, dict) else {}
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            matched = False
            if name in props:
                matched = True
                if self._check(props[name], item, base, depth + 1) is None:
                    return False
            for pattern, sub in patterns.items():
                if pattern_holds(pattern, name):
                    matched = True
                    if self._check(sub, item, base, depth + 1) is None:
                        return False
            if matched:
                seen.props.add(name)
            elif extra is not None:
                if self._check(extra, item, base, depth + 1) is None:
                    return False
                seen.props.add(name)
        rest = schema.get("unevaluatedProperties")
        if rest is not None and self.draft >= 2019:
            for name, item in value.items():
                if name not in seen.props:
                    if self._check(rest, item, base, depth + 1) is None:
                        return False
                    seen.props.add(name)
        return True

    def _check_array(
        self, schema: dict[str, Any], value: list[Any], base: str, depth: int, seen: _Seen
    ) -> bool:
        low, high = schema.get("minItems"), schema.get("maxItems")
        if (is_number(low) and len(value) < low) or (is_number(high) and len(value) > high):
            return False
        if schema.get("uniqueItems") is True and len({canonical(v) for v in value}) < len(value):
            return False
        prefix, rest = self.item_schemas(schema)
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else rest
            if sub is None:
                continue
            if self._check(sub, item, base, depth + 1) is None:
                return False
        if prefix:
            seen.items = max(seen.items, min(len(prefix), len(value)))
        if rest is not None:
            seen.items = len(value)
        contains = schema.get("contains")
        if contains is not None and self.draft >= 6:
            count = sum(self._check(contains, item, base, depth + 1) is not None for item in value)
            least, most = 1, None
            if self.draft >= 2019:
                if is_number(schema.get("minContains")):
                    least = schema["minContains"]
                if is_number(schema.get("maxContains")):
                    most = schema["maxContains"]
            if count < least or (most is not None and count > most):
                return False
            if self.draft >= 2020 and count == len(value):
                seen.items = len(value)
        rest_unevaluated = schema.get("unevaluatedItems")
        if rest_unevaluated is not None and self.draft >= 2019:
            for item in value[seen.items :]:
                if self._check(rest_unevaluated, item, base, depth + 1) is None:
                    return False
            seen.items = len(value)
        return True

    def item_schemas(self, schema: dict[str, Any]) -> tuple[list[Any], Any]:
        """The schemas of the leading positions, and of every later one (`None`: any)."""
        items = schema.get("items")
        if isinstance(items, list):
            extra = schema.get("additionalItems")
            return list(items), extra
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and self.draft >= 2020:
            return list(prefix), items
        return [], items


def _children(schema: dict[str, Any], pointer: str) -> Iterator[tuple[Any, str]]:
    """The subschemas directly inside `schema`, with their pointers."""
    for key in _SCHEMA_MAPS:
        value = schema.get(key)
        if isinstance(value, dict):
            for name, sub in value.items():
                yield sub, pointer_join(pointer, key, name)
    deps = schema.get("dependencies")
    if isinstance(deps, dict):
        for name, sub in deps.items():
            if isinstance(sub, (dict, bool)):
                yield sub, pointer_join(pointer, "dependencies", name)
    for key in _SCHEMA_LISTS:
        value = schema.get(key)
        if isinstance(value, list):
            for index, sub in enumerate(value):
                yield sub, pointer_join(pointer, key, index)
    items = schema.get("items")
    if isinstance(items, list):
        for index, sub in enumerate(items):
            yield sub, pointer_join(pointer, "items", index)
    elif items is not None:
        yield items, pointer_join(pointer, "items")
    for key in _SCHEMA_ONE:
        if key in schema:
            yield schema[key], pointer_join(pointer, key)
