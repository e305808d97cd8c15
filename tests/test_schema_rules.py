"""What each provider accepts, written down from the provider reference, held against every
rewrite that claims `exact` or `approximate` (a claim the provider would refuse with a 400 is
no claim at all).

One checker per dialect, independent of the toolkit's code:

- OpenAI strict (current and the Azure legacy profile): an object root; every node typed
  (or a lone `$ref`, or an `anyOf`); every object closed with every property required; every
  array with `items`; only the listed keywords and formats; the size limits;
- Anthropic: an object root; every object closed; `minItems` 0 or 1; no numeric bounds,
  string lengths or other array bounds; simple patterns; the ten formats; no recursion; at
  most 24 optional properties and 16 unions;
- Gemini `responseSchema` (OpenAPI subset): only the fields of its `Schema` message; one
  upper-case type; an `OBJECT` with properties, an `ARRAY` with items; `properties`,
  `required` and `items` only on their type; enums of strings on `STRING` only; formats by
  type; `required` names declared properties;
- Gemini `responseJsonSchema`: enforced keywords only (annotations aside); a `$ref` with only
  `$` keywords beside it; enums of strings and numbers; no recursion;
- grammar engines (llama.cpp's converter): anchored patterns; known types; no `properties`
  beside a union (the converter reads only the union); no `allOf` (it makes every property
  of a part required); no assertion beside a `$ref` (ignored); no `patternProperties`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from _schema_support import DIALECTS, corpus_dir, corpus_files, shapes
from allama.schema._errors import SchemaError
from allama.schema._rewrite import Rewrite
from allama.types import WarningKind

Checker = Callable[[Mapping[str, Any]], list[str]]

_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_ONE = (
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


def _nodes(schema: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    """Every subschema of a JSON Schema document, with its pointer."""
    stack = [(pointer, schema)]
    while stack:
        here, node = stack.pop()
        yield here, node
        if not isinstance(node, Mapping):
            continue
        for key in _SUBSCHEMA_MAPS:
            if isinstance(node.get(key), Mapping):
                stack.extend((f"{here}/{key}/{name}", sub) for name, sub in node[key].items())
        for key in _SUBSCHEMA_LISTS:
            if isinstance(node.get(key), list):
                stack.extend((f"{here}/{key}/{i}", sub) for i, sub in enumerate(node[key]))
        for key in _SUBSCHEMA_ONE:
            if key in node and not isinstance(node[key], bool):
                stack.append((f"{here}/{key}", node[key]))
        items = node.get("items")
        if isinstance(items, list):
            stack.extend((f"{here}/items/{i}", sub) for i, sub in enumerate(items))
        elif isinstance(items, Mapping):
            stack.append((f"{here}/items", items))


def _kinds(node: Mapping[str, Any]) -> set[str]:
    kind = node.get("type")
    return set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()


def _value_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _fits(value: Any, kinds: set[str]) -> bool:
    kind = _value_kind(value)
    return kind in kinds or (kind == "integer" and "number" in kinds)


def _local_names(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`#` and `#/$defs/name` to their bodies (the only references a rewrite writes)."""
    bodies: dict[str, Any] = {"#": schema}
    for name, body in (schema.get("$defs") or {}).items():
        bodies["#/$defs/" + name.replace("~", "~0").replace("/", "~1")] = body
    return bodies


def _refs_in(body: Any) -> set[str]:
    return {
        node["$ref"]
        for _, node in _nodes({k: v for k, v in body.items() if k != "$defs"})
        if isinstance(node, Mapping) and isinstance(node.get("$ref"), str)
    }


def _recursive(schema: Mapping[str, Any]) -> bool:
    """Whether a `$ref` cycle can be reached from the root."""
    bodies = _local_names(schema)
    edges = {
        name: _refs_in(body) if isinstance(body, Mapping) else set()
        for name, body in bodies.items()
    }
    state: dict[str, int] = {}

    def visit(name: str) -> bool:
        if state.get(name) == 1:
            return True
        if state.get(name) == 2 or name not in edges:
            return False
        state[name] = 1
        if any(visit(dest) for dest in edges[name]):
            return True
        state[name] = 2
        return False

    return visit("#")


def _object_depth(schema: Mapping[str, Any]) -> int:
    """Objects along the deepest path from the root, `$ref`s followed (each cycle once)."""
    bodies = _local_names(schema)

    def depth(node: Any, seen: frozenset[str]) -> int:
        if not isinstance(node, Mapping):
            return 0
        ref = node.get("$ref")
        if isinstance(ref, str):
            return 0 if ref in seen or ref not in bodies else depth(bodies[ref], seen | {ref})
        here = 1 if "object" in _kinds(node) or "properties" in node else 0
        below = [depth(sub, seen) for key, sub in _children(node)]
        return here + max(below, default=0)

    return depth(schema, frozenset({"#"}))


def _children(node: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for name, sub in (node.get("properties") or {}).items():
        yield name, sub
    for sub in node.get("anyOf") or ():
        yield "anyOf", sub
    items = node.get("items")
    if isinstance(items, Mapping):
        yield "items", items


# ----- OpenAI strict

_OPENAI_BASE = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf", "$ref"}
    | {"$defs", "title", "description"}
)
_OPENAI_2025 = frozenset(
    {"pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    | {"multipleOf", "minItems", "maxItems"}
)
_OPENAI_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)


def openai_rules(schema: Mapping[str, Any], *, legacy: bool = False) -> list[str]:
    """OpenAI strict mode's rules (`legacy`: the 2024 subset and limits Azure documents)."""
    allowed = _OPENAI_BASE if legacy else _OPENAI_BASE | _OPENAI_2025
    problems = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("/: the root must be an object, not a union")
    bodies = _local_names(schema)
    properties = enum_values = text = 0
    text += sum(len(name) for name in schema.get("$defs") or {})
    for pointer, node in _nodes(schema):
        if not isinstance(node, Mapping):
            problems.append(f"{pointer}: a boolean schema")
            continue
        for key in node:
            if key not in allowed or (key == "$defs" and pointer):
                problems.append(f"{pointer}: `{key}` is not supported")
        if "$ref" in node:
            if len(node) > 1:
                problems.append(f"{pointer}: `$ref` has keywords beside it")
            if node["$ref"] not in bodies:
                problems.append(f"{pointer}: `$ref` is not `#` or `#/$defs/...`")
            continue
        if "anyOf" in node:
            if set(node) - {"anyOf", "title", "description"}:
                problems.append(f"{pointer}: `anyOf` has assertions beside it")
            continue
        kinds = _kinds(node)
        if not kinds:
            problems.append(f"{pointer}: no `type`")
        if "enum" in node:
            enum_values += len(node["enum"])
            text += sum(len(v) for v in node["enum"] if isinstance(v, str))
            for value in node["enum"]:
                if isinstance(value, dict | list) or not _fits(value, kinds):
                    problems.append(f"{pointer}: enum value {value!r} does not fit the type")
        if "object" in kinds:
            props = node.get("properties")
            if not isinstance(props, Mapping):
                problems.append(f"{pointer}: an object without `properties`")
                props = {}
            properties += len(props)
            text += sum(len(name) for name in props)
            if node.get("additionalProperties") is not False:
                problems.append(f"{pointer}: an object without `additionalProperties: false`")
            if set(node.get("required", ())) != set(props):
                problems.append(f"{pointer}: not every property is required")
        if "array" in kinds and "items" not in node:
            problems.append(f"{pointer}: an array without `items`")
        if "format" in node and node["format"] not in _OPENAI_FORMATS:
            problems.append(f"{pointer}: format `{node['format']}`")
    limits = (100, 5, 15_000, 500) if legacy else (5000, 10, 120_000, 1000)
    depth = _object_depth(schema)
    for have, cap, what in zip(
        (properties, depth, text, enum_values),
        limits,
        ("properties", "levels", "characters", "enum values"),
        strict=True,
    ):
        if have > cap:
            problems.append(f"/: {have} {what}, more than {cap}")
    return problems


# ----- Anthropic

_ANTHROPIC = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const"}
    | {"anyOf", "allOf", "$ref", "$defs", "definitions", "default", "title", "description"}
    | {"format", "minItems", "pattern"}
)
_ANTHROPIC_FORMATS = _OPENAI_FORMATS | {"uri"}
_HARD_PATTERN = re.compile(r"\\[1-9]|\\k<|\(\?<?[=!]|\\[bB]|\{\d{4,}|,\d{4,}\}")


def anthropic_rules(schema: Mapping[str, Any]) -> list[str]:
    """Anthropic structured outputs' rules (JSON outputs and strict tools)."""
    problems = []
    if schema.get("type") != "object":
        problems.append("/: the root must be an object")
    optional = unions = 0
    for pointer, node in _nodes(schema):
        if not isinstance(node, Mapping):
            problems.append(f"{pointer}: a boolean schema")
            continue
        for key in node:
            if key not in _ANTHROPIC:
                problems.append(f"{pointer}: `{key}` is not supported")
        if not any(k in node for k in ("type", "anyOf", "allOf", "$ref", "enum", "const")):
            problems.append(f"{pointer}: no `type`")
        kinds = _kinds(node)
        if "anyOf" in node or len(kinds) > 1:
            unions += 1
        if "additionalProperties" in node and node["additionalProperties"] is not False:
            problems.append(f"{pointer}: `additionalProperties` other than false")
        if "object" in kinds and node.get("additionalProperties") is not False:
            problems.append(f"{pointer}: an object that is not closed")
        props = node.get("properties")
        if isinstance(props, Mapping):
            optional += sum(1 for name in props if name not in node.get("required", ()))
        if node.get("minItems", 0) not in (0, 1):
            problems.append(f"{pointer}: `minItems` above 1")
        if "format" in node and node["format"] not in _ANTHROPIC_FORMATS:
            problems.append(f"{pointer}: format `{node['format']}`")
        if isinstance(node.get("pattern"), str) and _HARD_PATTERN.search(node["pattern"]):
            problems.append(f"{pointer}: a pattern the grammar cannot compile")
        for value in node.get("enum", ()):
            if isinstance(value, dict | list):
                problems.append(f"{pointer}: an object or array in `enum`")
        for part in node.get("allOf", ()):
            if isinstance(part, Mapping) and "$ref" in part:
                problems.append(f"{pointer}: `allOf` holds a `$ref`")
    if _recursive(schema):
        problems.append("/: the schema is recursive")
    if optional > 24:
        problems.append(f"/: {optional} optional properties, more than 24")
    if unions > 16:
        problems.append(f"/: {unions} unions, more than 16")
    return problems


# ----- Gemini responseSchema (OpenAPI subset)

_GEMINI_FIELDS = frozenset(
    {"type", "format", "title", "description", "nullable", "enum", "items", "minItems"}
    | {"maxItems", "properties", "required", "propertyOrdering", "anyOf", "minimum", "maximum"}
    | {"minLength", "maxLength", "pattern", "minProperties", "maxProperties", "default"}
    | {"example"}
)
_GEMINI_TYPES = frozenset({"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"})
_GEMINI_FORMATS = {
    "STRING": {"date-time", "enum"},
    "INTEGER": {"int32", "int64"},
    "NUMBER": {"float", "double"},
}


def gemini_response_schema_rules(schema: Mapping[str, Any]) -> list[str]:
    """Gemini `responseSchema`'s rules: the `Schema` message and what the API checks on it."""
    problems = []
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        pointer, node = stack.pop()
        if not isinstance(node, Mapping):
            problems.append(f"{pointer}: not a schema object")
            continue
        for key in node:
            if key not in _GEMINI_FIELDS:
                problems.append(f"{pointer}: unknown field `{key}`")
        kind = node.get("type")
        if kind is not None and kind not in _GEMINI_TYPES:
            problems.append(f"{pointer}: type {kind!r}")
        props = node.get("properties")
        if kind == "OBJECT" and not (isinstance(props, Mapping) and props):
            problems.append(f"{pointer}: properties should be non-empty for OBJECT type")
        for key in ("properties", "required", "propertyOrdering"):
            if key in node and kind != "OBJECT":
                problems.append(f"{pointer}: `{key}` only allowed for OBJECT type")
        if kind == "ARRAY" and "items" not in node:
            problems.append(f"{pointer}: items missing for ARRAY type")
        if "items" in node and kind != "ARRAY":
            problems.append(f"{pointer}: `items` only allowed for ARRAY type")
        if "enum" in node:
            if kind != "STRING":
                problems.append(f"{pointer}: enum only allowed for STRING type")
            if not all(isinstance(v, str) for v in node["enum"]):
                problems.append(f"{pointer}: enum values must be strings")
        if "format" in node and node["format"] not in _GEMINI_FORMATS.get(kind, ()):
            problems.append(f"{pointer}: format `{node['format']}` on {kind}")
        if isinstance(props, Mapping):
            if not set(node.get("required", ())) <= set(props):
                problems.append(f"{pointer}: `required` names undeclared properties")
            if "propertyOrdering" in node and set(node["propertyOrdering"]) != set(props):
                problems.append(f"{pointer}: `propertyOrdering` differs from the properties")
            stack.extend((f"{pointer}/properties/{k}", sub) for k, sub in props.items())
        if "items" in node:
            stack.append((f"{pointer}/items", node["items"]))
        stack.extend((f"{pointer}/anyOf/{i}", sub) for i, sub in enumerate(node.get("anyOf", ())))
    return problems


# ----- Gemini responseJsonSchema

_GEMINI_JSON = frozenset(
    {"$id", "$defs", "$ref", "$anchor", "type", "format", "title", "description", "enum"}
    | {"items", "prefixItems", "minItems", "maxItems", "minimum", "maximum", "anyOf", "oneOf"}
    | {"properties", "additionalProperties", "required", "propertyOrdering"}
    | {"default", "examples"}
)


def gemini_json_schema_rules(schema: Mapping[str, Any]) -> list[str]:
    """Gemini `responseJsonSchema`'s rules: enforced keywords, `$ref` alone, no recursion."""
    problems = []
    for pointer, node in _nodes(schema):
        if not isinstance(node, Mapping):
            continue
        for key in node:
            if key not in _GEMINI_JSON:
                problems.append(f"{pointer}: `{key}` is not enforced")
        if "$ref" in node and any(not key.startswith("$") for key in node):
            problems.append(f"{pointer}: `$ref` has keywords beside it")
        kinds = _kinds(node)
        if not kinds <= _JSON_TYPES:
            problems.append(f"{pointer}: type {node['type']!r}")
        for value in node.get("enum", ()):
            if _value_kind(value) not in ("string", "integer", "number"):
                problems.append(f"{pointer}: enum value {value!r}")
    if _recursive(schema):
        problems.append("/: the schema is recursive")
    return problems


# ----- grammar engines

_ASSERTING = frozenset(
    {"type", "enum", "const", "properties", "required", "items", "additionalProperties"}
    | {"minimum", "maximum", "minLength", "maxLength", "pattern", "format", "minItems"}
    | {"maxItems", "anyOf", "oneOf", "allOf"}
)


def grammar_rules(schema: Mapping[str, Any]) -> list[str]:
    """What llama.cpp's JSON-Schema-to-grammar converter refuses or reads narrower."""
    problems = []
    for pointer, node in _nodes(schema):
        if not isinstance(node, Mapping):
            continue
        pattern = node.get("pattern")
        if isinstance(pattern, str) and not (pattern.startswith("^") and pattern.endswith("$")):
            problems.append(f"{pointer}: an unanchored pattern")
        if not _kinds(node) <= _JSON_TYPES:
            problems.append(f"{pointer}: type {node['type']!r}")
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#"):
                problems.append(f"{pointer}: a remote `$ref`")
            if set(node) & (_ASSERTING - {"$ref"}):
                problems.append(f"{pointer}: assertions beside `$ref`")
        if ("anyOf" in node or "oneOf" in node) and set(node) & {"properties", "required"}:
            problems.append(f"{pointer}: `properties` beside a union")
        if "allOf" in node:
            problems.append(f"{pointer}: `allOf`")
        if "patternProperties" in node:
            problems.append(f"{pointer}: `patternProperties`")
    return problems


CHECKERS: dict[str, Checker] = {
    "openai_strict": openai_rules,
    "openai_strict_azure_legacy": lambda schema: openai_rules(schema, legacy=True),
    "anthropic": anthropic_rules,
    "gemini_response_schema": gemini_response_schema_rules,
    "gemini_json_schema": gemini_json_schema_rules,
    "grammar_engine": grammar_rules,
}


def claimed(rewrite: Rewrite) -> bool:
    """Whether the rewrite is sent as enforced (`exact` or `approximate`)."""
    return not any(note.kind is WarningKind.UNSUPPORTED for note in rewrite.notes)


# ----- the checkers catch what they are for

BROKEN = {
    "openai_strict": [
        {"type": "object", "properties": {"a": {"enum": ["x", 1]}}, "required": ["a"]},
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
        {"anyOf": [{"type": "object", "properties": {}, "additionalProperties": False}]},
        {"type": "object", "properties": {"a": {"type": "array"}}, "required": ["a"]},
    ],
    "anthropic": [
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
        {"type": "object", "properties": {"m": {"type": "object"}}, "additionalProperties": False},
        {
            "type": "object",
            "properties": {"next": {"$ref": "#"}},
            "additionalProperties": False,
        },
    ],
    "gemini_response_schema": [
        {"type": "OBJECT", "properties": {"m": {"type": "OBJECT"}}},
        {"type": "OBJECT", "properties": {"a": {"enum": ["x"]}}},
        {"type": "OBJECT", "properties": {"a": {"type": "ARRAY"}}},
        {"type": "OBJECT", "properties": {"a": {"type": "INTEGER", "enum": ["1"]}}},
        {"type": "OBJECT", "properties": {"a": {"properties": {"b": {"type": "STRING"}}}}},
    ],
    "gemini_json_schema": [
        {"$defs": {"A": {"type": "string"}}, "$ref": "#/$defs/A", "description": "x"},
        {"type": "object", "properties": {"a": {"enum": [True]}}},
    ],
    "grammar_engine": [
        {"type": "string", "pattern": "[a-z]+"},
        {"type": "object", "properties": {"a": {}}, "anyOf": [{"required": ["a"]}]},
        {"allOf": [{"type": "object"}]},
    ],
}


@pytest.mark.parametrize(
    ("name", "schema"),
    [(name, schema) for name, broken in BROKEN.items() for schema in broken],
    ids=lambda v: v if isinstance(v, str) else json.dumps(v)[:50],
)
def test_each_checker_finds_what_its_provider_refuses(name: str, schema: dict[str, Any]) -> None:
    assert CHECKERS[name](schema)


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_each_checker_passes_an_ordinary_rewrite(name: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "kind": {"enum": ["a", "b"]},
        },
        "required": ["name", "tags", "kind"],
    }
    rewrite = DIALECTS[name](schema)
    assert rewrite.exact
    assert CHECKERS[name](rewrite.schema) == []


# ----- every claim follows the rules


def _claims(schema: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    found = []
    for name, checker in CHECKERS.items():
        try:
            rewrite = DIALECTS[name](schema)
        except SchemaError:
            continue
        if claimed(rewrite):
            problems = checker(rewrite.schema)
            if problems:
                found.append((name, problems))
    return found


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(schema=shapes())
def test_every_claim_on_the_hard_shapes_is_one_the_provider_accepts(schema: dict[str, Any]) -> None:
    assert _claims(schema) == [], json.dumps(schema)


FILES = corpus_files()


@pytest.mark.skipif(not FILES, reason=f"no schema corpus at {corpus_dir()}")
def test_every_claim_on_the_corpus_is_one_the_provider_accepts() -> None:
    refused = {}
    for path in FILES:
        found = _claims(json.loads(path.read_text()))
        if found:
            refused[f"{path.parent.name}/{path.name}"] = found
    assert refused == {}, (len(refused), list(refused.items())[:3])
