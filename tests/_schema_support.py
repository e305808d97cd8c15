"""What the schema dialect tests share: the dialects by name, how a schema is read, and the
conventions.

Two library conventions make a rewrite "exact" where plain JSON Schema would disagree, and
the checks apply them explicitly, without the toolkit's own code:

- an object that declares `properties` and says nothing about other keys is closed, because
  the undeclared-key walk rejects such keys. One object is the node, its `allOf` parts (and
  a `$ref` beside other keywords) and, when it holds a union, the branch the value matches:
  `Convention` walks a value that way, and `original_reading` is plain JSON Schema validity
  plus that walk. A rewrite is read as its provider reads it: each node with `properties` on
  its own (`close_objects`);
- under OpenAI strict mode an optional property is sent as required and nullable, and
  extraction removes those stand-in `null`s before validating (`fill_nulls` adds them to an
  instance of the original, `strip_nulls` removes them from an instance of the rewrite).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
from hypothesis import strategies as st
from jsonschema.protocols import Validator

from allama.schema._dialects import (
    anthropic,
    gemini_json_schema,
    gemini_response_schema,
    grammar_engine,
    json_object_fallback,
    openai_strict,
    passthrough,
)
from allama.schema._pointer import lookup
from allama.schema._rewrite import Rewrite
from allama.schema._walk import copy_json

Dialect = Callable[[Mapping[str, Any]], Rewrite]


def _azure(schema: Mapping[str, Any]) -> Rewrite:
    return openai_strict(schema, profile="azure_legacy")


DIALECTS: dict[str, Dialect] = {
    "openai_strict": openai_strict,
    "openai_strict_azure_legacy": _azure,
    "anthropic": anthropic,
    "gemini_json_schema": gemini_json_schema,
    "gemini_response_schema": gemini_response_schema,
    "grammar_engine": grammar_engine,
    "passthrough": passthrough,
    "json_object_fallback": json_object_fallback,
}
STRICT_NULLS = frozenset({"openai_strict", "openai_strict_azure_legacy"})
UNCHANGED = frozenset({"passthrough", "json_object_fallback"})
_ANNOTATION_KEYS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly"}
)


def corpus_dir() -> Path:
    default = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "schemas"
    return Path(os.environ.get("ALLAMA_SCHEMA_CORPUS", str(default)))


def corpus_files() -> list[Path]:
    root = corpus_dir()
    return sorted(root.glob("*/*.json")) if root.is_dir() else []


def original_validator(schema: Mapping[str, Any]) -> Validator:
    """Plain JSON Schema validity, in the schema's own draft (objects open)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)  # type: ignore[no-any-return]


def _draft_7_or_older(schema: Mapping[str, Any]) -> bool:
    uri = str(schema.get("$schema", ""))
    return any(f"draft-0{n}" in uri for n in (3, 4, 6, 7))


@dataclass(frozen=True)
class Reading:
    """How one party reads a schema: `validator` checks a node on its own (for generating
    instances), `is_valid` and `errors` judge a whole value."""

    schema: Any
    validator: Validator
    convention: Convention | None = None

    def errors(self, value: Any) -> list[str]:
        found = [error.message for error in self.validator.iter_errors(value)]
        if not found and self.convention is not None:
            key = self.convention.undeclared(value)
            if key is not None:
                found.append(f"undeclared key at {key}")
        return found

    def is_valid(self, value: Any) -> bool:
        if not self.validator.is_valid(value):
            return False
        return self.convention is None or self.convention.undeclared(value) is None


def original_reading(schema: Mapping[str, Any]) -> Reading:
    """The caller's schema as the library reads it: valid, and no undeclared key."""
    return Reading(schema, original_validator(schema), Convention(schema))


def rewritten_reading(name: str, original: Mapping[str, Any], schema: Any) -> Reading:
    """A dialect's output as its provider reads it: each object with `properties` closed on
    its own, in draft 2020-12 (the form every rewrite writes); what goes unchanged is read
    as the original."""
    if name in UNCHANGED:
        return original_reading(original)
    if name == "gemini_response_schema":
        schema = openapi_to_json_schema(schema)
    closed = close_objects(schema)
    return Reading(closed, jsonschema.Draft202012Validator(closed))


class Convention:
    """The closed-object convention, walked over a value (`undeclared`)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.validator = original_validator(root)
        self.old_refs = _draft_7_or_older(root)

    def valid(self, schema: Any, value: Any) -> bool:
        return bool(self.validator.evolve(schema=schema).is_valid(value))

    def views(
        self, schema: Any, value: Any, depth: int = 0, *, every_branch: bool = False
    ) -> list[list[Mapping[str, Any]]]:
        """The ways `value` reads `schema` as one object or array: the nodes that make it
        up (the node, its `allOf` parts, its `$ref`, the union branch it matches, or any
        branch with `every_branch`)."""
        if depth > 30 or not isinstance(schema, Mapping):
            return [[]]
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = resolve_ref(self.root, ref)
            if self.old_refs or set(schema) <= {"$ref"} | _ANNOTATION_KEYS:
                return self.views(target, value, depth + 1, every_branch=every_branch)
        views: list[list[Mapping[str, Any]]] = [[schema]]
        parts: list[list[list[Mapping[str, Any]]]] = []
        if isinstance(ref, str):
            parts.append(
                self.views(resolve_ref(self.root, ref), value, depth + 1, every_branch=every_branch)
            )
        parts.extend(
            self.views(part, value, depth + 1, every_branch=every_branch)
            for part in schema.get("allOf", ())
        )
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [
                    view
                    for branch in schema[key]
                    if every_branch or self.valid(branch, value)
                    for view in self.views(branch, value, depth + 1, every_branch=every_branch)
                ]
                if options:
                    parts.append(options)
        for choices in parts:
            views = [a + b for a, b in itertools.islice(itertools.product(views, choices), 32)]
        return views

    def undeclared(
        self, value: Any, schema: Any = None, path: str = "", depth: int = 0
    ) -> str | None:
        """The place of the first key no object declares (`None` when there is none)."""
        schema = self.root if schema is None else schema
        if depth > 40 or not isinstance(value, dict | list):
            return None
        found: str | None = None
        for view in self.views(schema, value, depth):
            here = (
                self._object(view, value, path, depth)
                if isinstance(value, dict)
                else self._array(view, value, path, depth)
            )
            if here is None:
                return None
            found = found or here
        return found

    def keys_fit(self, view: list[Mapping[str, Any]], value: dict[str, Any]) -> bool:
        """Whether every key of `value` is declared by the object `view` makes up."""
        return self._object(view, value, "", 0, children=False) is None

    def _object(
        self,
        view: list[Mapping[str, Any]],
        value: dict[str, Any],
        path: str,
        depth: int,
        *,
        children: bool = True,
    ) -> str | None:
        declared: set[str] = set()
        closable = False
        explicit = False
        for node in view:
            props = node.get("properties")
            if isinstance(props, Mapping):
                declared |= set(props)
                closable = True
            explicit = explicit or any(
                k in node
                for k in ("additionalProperties", "patternProperties", "unevaluatedProperties")
            )
        if closable and not explicit:
            for key in value:
                if key not in declared:
                    return f"{path}/{key}"
        if not children:
            return None
        for key, item in value.items():
            for node in view:
                for sub in _value_schemas(node, key):
                    found = self.undeclared(item, sub, f"{path}/{key}", depth + 1)
                    if found is not None:
                        return found
        return None

    def _array(
        self, view: list[Mapping[str, Any]], value: list[Any], path: str, depth: int
    ) -> str | None:
        for node in view:
            prefix, rest = node.get("prefixItems"), node.get("items")
            if isinstance(rest, list):
                prefix, rest = rest, node.get("additionalItems")
            for index, item in enumerate(value):
                sub = prefix[index] if isinstance(prefix, list) and index < len(prefix) else rest
                if isinstance(sub, Mapping):
                    found = self.undeclared(item, sub, f"{path}/{index}", depth + 1)
                    if found is not None:
                        return found
        return None


def _value_schemas(node: Mapping[str, Any], key: str) -> list[Any]:
    """The subschemas one object node applies to the value of `key`."""
    found = []
    props = node.get("properties")
    declared = isinstance(props, Mapping) and key in props
    if declared:
        found.append(props[key])  # type: ignore[index]
    matched = False
    patterns = node.get("patternProperties")
    if isinstance(patterns, Mapping):
        for pattern, sub in patterns.items():
            try:
                if re.search(pattern, key):
                    found.append(sub)
                    matched = True
            except re.error:
                continue
    extra = node.get("additionalProperties")
    if not declared and not matched and isinstance(extra, Mapping):
        found.append(extra)
    return found


def openapi_to_json_schema(node: Any) -> Any:
    """Gemini's OpenAPI form back to JSON Schema: lower-case types, `nullable` as `null`."""
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: openapi_to_json_schema(v) for k, v in value.items()}
        elif key == "items":
            out[key] = openapi_to_json_schema(value)
        elif key == "anyOf":
            out[key] = [openapi_to_json_schema(v) for v in value]
        elif key == "type":
            out[key] = value.lower()
        elif key not in ("nullable", "propertyOrdering"):
            out[key] = value
    if node.get("nullable") is True:
        if "type" in out and "enum" not in out and "anyOf" not in out:
            out["type"] = [out["type"], "null"]
        else:
            return {"anyOf": [out, {"type": "null"}]}
    return out


_OPEN_KEYS = ("additionalProperties", "patternProperties", "unevaluatedProperties")
_SUB_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUB_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUB_ONE = (
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
)


def close_objects(schema: Mapping[str, Any]) -> Any:
    """`schema` with the closed-object convention written out."""
    out = copy_json(schema)
    stack: list[Any] = [out]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if "properties" in node and not any(k in node for k in _OPEN_KEYS):
            node["additionalProperties"] = False
        if isinstance(node.get("$ref"), str):  # targets outside the usual keywords too
            target = resolve_ref(out, node["$ref"])
            if isinstance(target, dict) and id(target) not in seen:
                seen.add(id(target))
                stack.append(target)
        for key in _SUB_MAPS:
            if isinstance(node.get(key), dict):
                stack.extend(node[key].values())
        for key in _SUB_LISTS:
            if isinstance(node.get(key), list):
                stack.extend(node[key])
        for key in _SUB_ONE:
            if key in node:
                stack.append(node[key])
        items = node.get("items")
        stack.extend(items if isinstance(items, list) else [items])
    return out


def resolve_ref(root: Mapping[str, Any], ref: str) -> Any:
    """The target of a local `$ref`: a pointer (`#/...`) or an anchor (`#name`); `True`
    (anything) for what this test cannot resolve."""
    if not ref.startswith("#"):
        return True
    fragment = unquote(ref[1:])
    if fragment == "" or fragment.startswith("/"):
        try:
            return lookup(root, fragment)
        except KeyError:
            return True
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            names = (node.get("$anchor"), node.get("$id"), node.get("id"))
            if fragment in names or f"#{fragment}" in names:
                return node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True


def _one(schemas: list[Any]) -> Any:
    return schemas[0] if len(schemas) == 1 else {"allOf": schemas}


class _Nulls:
    """Stand-in `null`s for the optional properties of the objects `Convention` reads."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.convention = Convention(root)

    def fill(self, schema: Any, value: Any, depth: int = 0) -> list[Any]:
        """`value` with a `null` for each optional property left out, one way per reading."""
        if depth > 30 or not isinstance(value, dict | list):
            return [value]
        filled = []
        views = self.convention.views(schema, value, depth)
        if isinstance(value, dict):  # the readings under which every key is declared
            views = [v for v in views if self.convention.keys_fit(v, value)] or views
        for view in views:
            if isinstance(value, list):
                filled.append(self._items(view, value, depth, self.fill))
                continue
            required = {k for node in view for k in node.get("required", ()) if isinstance(k, str)}
            out = {
                key: self.fill(_one(subs), item, depth + 1)[0] if subs else item
                for key, item in value.items()
                for subs in [[s for node in view for s in _value_schemas(node, key)]]
            }
            for node in view:
                for key in node.get("properties") or {}:
                    if key not in out and key not in required:
                        out[key] = None
            filled.append(out)
        return filled or [value]

    def strip(self, schema: Any, value: Any, depth: int = 0) -> Any:
        """`value` without the `null`s that stand in for optional properties."""
        if depth > 30 or not isinstance(value, dict | list):
            return value
        stripped = []
        for view in self.convention.views(schema, value, depth, every_branch=True):
            if isinstance(value, list):
                stripped.append(self._items(view, value, depth, self._strip_one))
                continue
            required = {k for node in view for k in node.get("required", ()) if isinstance(k, str)}
            out = {}
            for key, item in value.items():
                subs = [s for node in view for s in _value_schemas(node, key)]
                declared = any(key in (node.get("properties") or {}) for node in view)
                if (
                    item is None
                    and declared
                    and key not in required
                    and not all(self.convention.valid(sub, None) for sub in subs)
                ):
                    continue
                out[key] = self.strip(_one(subs), item, depth + 1) if subs else item
            stripped.append(out)
        for candidate in stripped:
            if self.convention.valid(schema, candidate) and (
                self.convention.undeclared(candidate, schema, depth=depth) is None
            ):
                return candidate
        return stripped[0] if stripped else value

    def _strip_one(self, schema: Any, value: Any, depth: int) -> list[Any]:
        return [self.strip(schema, value, depth)]

    @staticmethod
    def _items(
        view: list[Mapping[str, Any]],
        value: list[Any],
        depth: int,
        each: Callable[[Any, Any, int], list[Any]],
    ) -> list[Any]:
        out = []
        for index, item in enumerate(value):
            subs = []
            for node in view:
                prefix, rest = node.get("prefixItems"), node.get("items")
                if isinstance(rest, list):
                    prefix, rest = rest, node.get("additionalItems")
                sub = prefix[index] if isinstance(prefix, list) and index < len(prefix) else rest
                if isinstance(sub, Mapping):
                    subs.append(sub)
            out.append(each(_one(subs), item, depth + 1)[0] if subs else item)
        return out


def fill_nulls(original: Mapping[str, Any], value: Any) -> list[Any]:
    """An instance of the original as OpenAI strict mode writes it: optional keys left out
    are sent as `null`. Candidates, one per reading of the value (the union branch it
    matches); the rewrite must accept one of them."""
    return _Nulls(original).fill(original, copy_json(value))


def strip_nulls(original: Mapping[str, Any], value: Any) -> Any:
    """An instance of an OpenAI strict rewrite with the stand-in `null`s removed: a `null`
    for an optional property whose schema in the original admits no `null`."""
    return _Nulls(original).strip(original, copy_json(value))


def whole_floats_as_ints(value: Any) -> Any:
    """`1.0` as `1`: only draft 4 tells them apart, and no provider does."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [whole_floats_as_ints(v) for v in value]
    if isinstance(value, dict):
        return {k: whole_floats_as_ints(v) for k, v in value.items()}
    return value


# ----- instances of a schema
#
# hypothesis-jsonschema 0.23.1 fails on every object schema with hypothesis 6.170
# (`'many' object has no attribute 'more'`), so instances come from this generator: it
# builds a candidate from the keywords that shape a value and filters by the validator,
# which keeps the rest (`not`, `allOf`, `oneOf` exclusivity, patterns) honest.

_KEYS = ["a", "b", "id", "name", "x_y", "zz"]
_FORMATS: dict[str, st.SearchStrategy[str]] = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "date-time": st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    "time": st.times().map(lambda t: t.isoformat() + "Z"),
    "email": st.sampled_from(["a@example.com", "ada@lovelace.org"]),
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
    "hostname": st.sampled_from(["example.com", "localhost"]),
    "uri": st.sampled_from(["https://example.com/a", "urn:isbn:0451450523"]),
}


def _any_value(depth: int) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-10, 10), st.floats(-10, 10), st.text(max_size=4)
    )
    if depth > 3:
        return scalars
    return st.one_of(
        scalars,
        st.lists(scalars, max_size=2),
        st.dictionaries(st.sampled_from(_KEYS), scalars, max_size=2),
    )


class Instances:
    """Hypothesis strategies for the instances of one schema document."""

    def __init__(self, root: Mapping[str, Any], validator: Validator | None = None) -> None:
        self.root = root
        self.validator = validator or original_validator(root)

    def strategy(self, node: Any = None, depth: int = 0) -> st.SearchStrategy[Any]:
        node = self.root if node is None else node
        if depth > 10:
            return st.nothing()
        raw = node
        if isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            if not node["$ref"].startswith("#"):
                return st.nothing()
            node = resolve_ref(self.root, node["$ref"])
        if node is True or node == {}:
            return _any_value(depth)
        if not isinstance(node, Mapping):
            return st.nothing()
        candidates = self._candidates(node, depth)
        check = self.validator.evolve(schema=raw)
        return candidates.filter(check.is_valid)

    def _candidates(self, node: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(list(node["enum"])) if node["enum"] else st.nothing()
        for key in ("anyOf", "oneOf"):
            if key in node:
                base = {k: v for k, v in node.items() if k != key}
                if set(base) <= _ANNOTATION_KEYS:
                    return st.one_of([self.strategy(part, depth + 1) for part in node[key]])
                return st.one_of(
                    [self.strategy(self._joined(base, part), depth + 1) for part in node[key]]
                )
        if "allOf" in node:
            joined = {k: v for k, v in node.items() if k != "allOf"}
            for part in node["allOf"]:
                joined = self._joined(joined, part)
            return self.strategy(joined, depth + 1)
        kinds = node.get("type")
        if kinds is None:
            if "properties" in node or "required" in node:
                kinds = ["object"]
            elif "items" in node or "prefixItems" in node:
                kinds = ["array"]
            else:
                return _any_value(depth)
        kinds = kinds if isinstance(kinds, list) else [kinds]
        return st.one_of([self._typed(kind, node, depth) for kind in kinds])

    def _joined(self, base: Mapping[str, Any], part: Any) -> dict[str, Any]:
        """`base` and `part` as one node to generate from (the filters keep what is valid)."""
        hops = 0
        while isinstance(part, Mapping) and isinstance(part.get("$ref"), str) and hops < 20:
            extra = {k: v for k, v in part.items() if k != "$ref"}
            part, hops = resolve_ref(self.root, part["$ref"]), hops + 1
            if extra and isinstance(part, Mapping):
                part = {**part, **extra}
        out = dict(base)
        if not isinstance(part, Mapping):
            return out
        for key, value in part.items():
            if key == "properties" and isinstance(out.get(key), Mapping):
                out[key] = {**out[key], **value}
            elif key == "required" and isinstance(out.get(key), list):
                out[key] = list(dict.fromkeys([*out[key], *value]))
            elif key not in out and key not in ("$defs", "definitions"):
                out[key] = value
        return out

    def _typed(self, kind: str, node: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
        if kind == "null":
            return st.none()
        if kind == "boolean":
            return st.booleans()
        if kind in ("integer", "number"):
            return self._number(kind, node)
        if kind == "string":
            return self._string(node)
        if kind == "array":
            return self._array(node, depth)
        return self._object(node, depth)

    def _number(self, kind: str, node: Mapping[str, Any]) -> st.SearchStrategy[Any]:
        low, high = node.get("minimum", -100), node.get("maximum", 100)
        if isinstance(node.get("exclusiveMinimum"), int | float) and not isinstance(
            node.get("exclusiveMinimum"), bool
        ):
            low = max(low, node["exclusiveMinimum"])
        if isinstance(node.get("exclusiveMaximum"), int | float) and not isinstance(
            node.get("exclusiveMaximum"), bool
        ):
            high = min(high, node["exclusiveMaximum"])
        step = node.get("multipleOf")
        if step:
            first, last = math.ceil(low / step), math.floor(high / step)
            if first > last:
                return st.nothing()
            return st.integers(first, min(last, first + 50)).map(lambda k: k * step)
        if kind == "integer" or low > high:
            first, last = math.ceil(low), math.floor(high)
            return st.integers(first, last) if first <= last else st.nothing()
        return st.one_of(
            st.integers(math.ceil(low), math.floor(high))
            if math.ceil(low) <= high
            else st.nothing(),
            st.floats(low, high, allow_nan=False, allow_infinity=False),
        )

    def _string(self, node: Mapping[str, Any]) -> st.SearchStrategy[Any]:
        fmt = node.get("format")
        if fmt in _FORMATS:
            return _FORMATS[fmt]
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            try:
                re.compile(pattern)
            except re.error:
                return st.nothing()
            return st.from_regex(pattern)
        low = int(node.get("minLength", 0))
        high = int(node.get("maxLength", low + 12))
        alphabet = "abcxyz01 -"
        sized = st.text(alphabet=alphabet, min_size=low, max_size=max(low, min(high, low + 12)))
        if high > low + 2:  # reach the far end often: that is where a dropped bound shows
            edge = max(low, min(high, low + 12))
            sized = st.one_of(sized, st.text(alphabet=alphabet, min_size=edge, max_size=edge))
        return sized

    def _array(self, node: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
        prefix = node.get("prefixItems")
        items = node.get("items", True)
        if isinstance(items, list):
            prefix, items = items, node.get("additionalItems", True)
        low = int(node.get("minItems", 0))
        high = int(node.get("maxItems", low + 3))
        high = max(low, min(high, low + 3))
        unique = bool(node.get("uniqueItems"))
        if prefix:
            head = st.tuples(*(self.strategy(p, depth + 1) for p in prefix)).map(list)
            tail = (
                st.lists(self.strategy(items, depth + 1), max_size=1)
                if items is not False
                else st.just([])
            )
            return st.builds(lambda h, t: h + t, head, tail)
        return st.lists(
            self.strategy(items, depth + 1),
            min_size=low,
            max_size=high,
            unique_by=(lambda v: json.dumps(v, sort_keys=True)) if unique else None,
        )

    def _object(self, node: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
        props = node.get("properties", {})
        required = [k for k in node.get("required", ()) if isinstance(k, str)]
        fixed = {k: self.strategy(props.get(k, True), depth + 1) for k in required}
        optional = {k: self.strategy(v, depth + 1) for k, v in props.items() if k not in required}
        if depth > 5:
            optional = {}
        base = st.fixed_dictionaries(fixed, optional=optional)
        extra = node.get("additionalProperties", None if props else True)
        if extra is None or extra is False or "patternProperties" in node or depth > 5:
            return base
        names = [k for k in _KEYS if k not in props]
        more = st.dictionaries(st.sampled_from(names), self.strategy(extra, depth + 1), max_size=2)
        return st.builds(lambda b, m: {**m, **b}, base, more)


def instances(schema: Mapping[str, Any], reading: Reading | None = None) -> st.SearchStrategy[Any]:
    """Instances of `schema` as `reading` reads it (by default, as the library reads the
    caller's schema)."""
    reading = reading or original_reading(schema)
    return Instances(schema, reading.validator).strategy().filter(reading.is_valid)


# ----- the hard shapes: what real schemas do that pydantic never writes
#
# Objects whose union branches add properties of their own, unions of variants built with
# `allOf` from a shared definition, enums without a type or of mixed types, nullable enums,
# empty objects and arrays, and `$ref` beside other keywords.

BASE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "kind": {"type": "string"},
        "note": {"type": ["string", "null"]},
    },
    "required": ["id"],
}
_SHAPE_NAMES = st.sampled_from(["a", "b", "id", "kind", "x_y"])
_PRIMITIVES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, "", "a", "b", "zz"])
)
_SHAPE_LEAVES = st.one_of(
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "integer", "minimum": 0},
            {"type": ["string", "null"]},
            {"type": "boolean"},
            {"type": "object", "properties": {}},
            {"type": "object"},
            {"type": "array"},
            {},
            {"type": "object", "additionalProperties": {"type": "integer"}},
            {"type": ["string", "null"], "enum": ["a", "b"]},
            {"type": ["string", "null"], "enum": ["a", None]},
            {"type": "string", "enum": ["a", "b", None]},
            {"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]},
            {"$ref": "#/$defs/Base"},
            {"$ref": "#/$defs/Leaf", "description": "a leaf", "x-vendor": 1},
            {"$ref": "#/$defs/Leaf", "maxLength": 3},
            {"$ref": "#/$defs/Base", "properties": {"extra": {"type": "boolean"}}},
            {"type": ["object", "string"], "properties": {"a": {"type": "string"}}, "maxLength": 3},
            {"type": ["array", "integer", "null"], "items": {"type": "string"}, "minimum": 1},
        ]
    ),
    st.lists(_PRIMITIVES, min_size=1, max_size=4, unique_by=repr).map(lambda v: {"enum": v}),
    _PRIMITIVES.map(lambda v: {"const": v}),
)


def _variant(kind: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A union variant built from the shared definition, as hand-written schemas do."""
    own = {"type": "object", "properties": {"kind": {"const": kind}, **extra}, "required": ["kind"]}
    return {"allOf": [{"$ref": "#/$defs/Base"}, own]}


@st.composite
def _union_beside_properties(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    props = draw(st.dictionaries(_SHAPE_NAMES, children, max_size=3))
    node: dict[str, Any] = {"properties": props}
    if draw(st.booleans()):
        node["type"] = "object"
    node["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    branch = st.one_of(
        st.builds(
            lambda p, r: {"properties": p, "required": sorted(set(r) & set(p))},
            st.dictionaries(_SHAPE_NAMES, children, min_size=1, max_size=2),
            st.lists(_SHAPE_NAMES, max_size=2),
        ),
        _SHAPE_NAMES.map(lambda name: {"required": [name]}),
        st.just({"$ref": "#/$defs/Base"}),
        st.sampled_from(["p", "q"]).map(
            lambda k: {"properties": {"kind": {"const": k}}, "required": ["kind"]}
        ),
        st.builds(
            _variant,
            st.sampled_from(["p", "q"]),
            st.dictionaries(_SHAPE_NAMES, children, max_size=1),
        ),
    )
    node[draw(st.sampled_from(["anyOf", "oneOf"]))] = draw(st.lists(branch, min_size=1, max_size=3))
    return node


def _extend_shapes(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        _union_beside_properties(children),
        st.builds(
            lambda p: {"type": "object", "properties": p},
            st.dictionaries(_SHAPE_NAMES, children, max_size=3),
        ),
        children.map(lambda c: {"type": "array", "items": c}),
        st.lists(children, min_size=1, max_size=3).map(lambda b: {"anyOf": b}),
        st.lists(
            st.builds(
                _variant,
                st.sampled_from(["p", "q", "r"]),
                st.dictionaries(_SHAPE_NAMES, children, max_size=1),
            ),
            min_size=1,
            max_size=3,
        ).map(lambda b: {"oneOf": b}),
        st.tuples(children, children).map(lambda p: {"allOf": list(p)}),
    )


@st.composite
def shapes(draw: st.DrawFn) -> dict[str, Any]:
    """An object schema whose properties are hard shapes, with the shared definitions."""
    parts = draw(
        st.lists(st.recursive(_SHAPE_LEAVES, _extend_shapes, max_leaves=5), min_size=1, max_size=3)
    )
    props = {f"p{i}": part for i, part in enumerate(parts)}
    return {
        "type": "object",
        "properties": props,
        "required": draw(st.lists(st.sampled_from(sorted(props)), unique=True)),
        "$defs": {"Base": BASE, "Leaf": {"type": "string"}},
    }
