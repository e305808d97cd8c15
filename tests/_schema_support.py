"""What the schema dialect tests share: the dialects by name, validators, and the conventions.

Two library conventions make a rewrite "exact" where plain JSON Schema would disagree, and
the checks apply them explicitly:

- an object that declares `properties` and says nothing about other keys is closed
  (`close_objects`), because the undeclared-key walk rejects such keys;
- under OpenAI strict mode an optional property is sent as required and nullable, and
  extraction removes those stand-in `null`s before validating (`fill_nulls` adds them to an
  instance of the original, `strip_nulls` removes them from an instance of the rewrite).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
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
UNCHANGED = frozenset({"grammar_engine", "passthrough", "json_object_fallback"})


def corpus_dir() -> Path:
    default = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "schemas"
    return Path(os.environ.get("ALLAMA_SCHEMA_CORPUS", str(default)))


def corpus_files() -> list[Path]:
    root = corpus_dir()
    return sorted(root.glob("*/*.json")) if root.is_dir() else []


def original_validator(schema: Mapping[str, Any]) -> Validator:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)  # type: ignore[no-any-return]


def rewritten_validator(name: str, original: Mapping[str, Any], schema: Any) -> Validator:
    """Validates a dialect's output under the closed-object convention: the original's
    draft when the schema went whole, draft 2020-12 (the form every rewrite writes)
    otherwise."""
    if name in UNCHANGED:
        return original_validator(close_objects(original))
    if name == "gemini_response_schema":
        schema = openapi_to_json_schema(schema)
    return jsonschema.Draft202012Validator(close_objects(schema))


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


class _Walk:
    """Follows an instance through a schema, for the strict-null helpers."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.validator = original_validator(root)

    def valid(self, schema: Any, value: Any) -> bool:
        return bool(self.validator.evolve(schema=schema).is_valid(value))

    def deref(self, schema: Any) -> Any:
        hops = 0
        while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and hops < 50:
            schema = resolve_ref(self.root, schema["$ref"])
            hops += 1
        return schema

    def nulls(
        self,
        schema: Any,
        value: Any,
        *,
        fill: bool,
        depth: int = 0,
        all_of: bool = True,
        mixed: bool = True,
        here: bool = True,
    ) -> Any:
        schema = self.deref(schema)
        if not isinstance(schema, Mapping) or depth > 60:
            return value
        for key in ("anyOf", "oneOf"):
            if key in schema:
                for branch in schema[key]:
                    attempt = self.nulls(
                        branch,
                        value,
                        fill=fill,
                        depth=depth + 1,
                        all_of=all_of,
                        mixed=mixed,
                        here=mixed or "properties" not in schema,
                    )
                    if self.valid(branch, value if fill else attempt):
                        value = attempt
                        break
        for part in schema.get("allOf", ()) if all_of else ():
            value = self.nulls(part, value, fill=fill, depth=depth + 1, all_of=all_of, mixed=mixed)
        if isinstance(value, dict):
            props = schema.get("properties", {})
            required = schema.get("required", ())
            extra = schema.get("additionalProperties")
            out = {}
            for key, item in value.items():
                if key in props:
                    if (
                        not fill
                        and item is None
                        and key not in required
                        and not self.valid(props[key], None)
                    ):
                        continue
                    out[key] = self.nulls(
                        props[key],
                        item,
                        fill=fill,
                        depth=depth + 1,
                        all_of=all_of,
                        mixed=mixed,
                    )
                elif isinstance(extra, Mapping):
                    out[key] = self.nulls(
                        extra, item, fill=fill, depth=depth + 1, all_of=all_of, mixed=mixed
                    )
                else:
                    out[key] = item
            parts = [schema, *(self.deref(p) for p in schema.get("allOf", ()))]
            union = any(isinstance(p, Mapping) and ("anyOf" in p or "oneOf" in p) for p in parts)
            if fill and here and isinstance(props, Mapping) and (mixed or not union):
                for key in props:
                    if key not in out and key not in required:
                        out[key] = None
            return out
        if isinstance(value, list):
            items = schema.get("items")
            prefix = schema.get("prefixItems")
            if isinstance(items, list):
                prefix, items = items, schema.get("additionalItems")
            out_list = []
            for i, item in enumerate(value):
                sub = prefix[i] if isinstance(prefix, list) and i < len(prefix) else items
                out_list.append(
                    self.nulls(sub, item, fill=fill, depth=depth + 1, all_of=all_of, mixed=mixed)
                    if sub is not None
                    else item
                )
            return out_list
        return value


def fill_nulls(original: Mapping[str, Any], value: Any) -> list[Any]:
    """An instance of the original as OpenAI strict mode writes it: optional keys left out
    are sent as `null`. Candidates, one of which the rewrite must accept: with the optional
    keys of `allOf` parts (kept when the parts merge) or without; with those of objects that
    also hold a union (which the rewrite leaves as written) or without."""
    walk = _Walk(close_objects(original))
    return [
        walk.nulls(walk.root, copy_json(value), fill=True, all_of=all_of, mixed=mixed)
        for all_of in (True, False)
        for mixed in (True, False)
    ]


def strip_nulls(original: Mapping[str, Any], value: Any) -> Any:
    """An instance of an OpenAI strict rewrite with the stand-in `null`s removed: a `null`
    for an optional property whose schema in the original admits no `null`."""
    walk = _Walk(close_objects(original))
    return walk.nulls(walk.root, copy_json(value), fill=False)


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
        for key in ("anyOf", "oneOf", "allOf"):
            if key in node:
                parts = node[key] if key != "allOf" else node[key][:1]
                base = {k: v for k, v in node.items() if k != key}
                options = [self.strategy(part, depth + 1) for part in parts]
                if key == "allOf" and set(base) & {"type", "properties"}:
                    options.append(self.strategy(base, depth + 1))
                return st.one_of(options)
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
        extra = node.get("additionalProperties", True)
        if extra is False or "patternProperties" in node or depth > 5:
            return base
        names = [k for k in _KEYS if k not in props]
        more = st.dictionaries(st.sampled_from(names), self.strategy(extra, depth + 1), max_size=2)
        return st.builds(lambda b, m: {**m, **b}, base, more)


def instances(
    schema: Mapping[str, Any], validator: Validator | None = None
) -> st.SearchStrategy[Any]:
    """Instances valid under `schema` (by `validator`, the original's draft by default)."""
    return Instances(schema, validator).strategy()
