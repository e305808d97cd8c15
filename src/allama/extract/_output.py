"""What reading a type's output takes, worked out once per type: so that the common answer
is parsed once, by pydantic, and the walks run only where the schema gives them work.

The output is validated straight from its text (`validate_json`, one parse) when that is
sure to give what the careful reading would: the text is strict JSON, nothing in it needs
the strict-null normalisation, and no key is one the type ignores. Each of those is checked
cheaply, from the type and from the text:

- A duplicate key is written twice and kept once: the keys the text writes (counted by its
  colons, or where some are in strings by the `":` that ends each key, where that count is
  sure) must equal the keys the validated value kept (a model's fields set, a dict's keys).
  The same walk of the value finds a `NaN` or an infinity (what `NaN`, `Infinity` or an
  overflowing number reads as) in any float. The count is only trusted for types whose
  validation keeps every key it reads and invents none: no validator functions,
  dataclasses, root models or JSON-in-a-string fields.
- Undeclared keys are rejected by validating with `extra="forbid"` (which the walk agrees
  with wherever validation succeeds); any failure goes to the careful reading, which words
  the answer. Where validation reads a key the schema does not show (a second validation
  alias, an alias path, a field's own name beside its alias under `validate_by_name`), the
  walk rejects it as undeclared and `extra="forbid"` does not: the careful reading decides.
- A stand-in `null` that normalisation would remove is one the type rejects, so validation
  fails on it and the careful reading normalises; where the type may read a `null` its
  schema does not show (a JSON Schema of the caller's own: `SkipJsonSchema[None]`,
  `json_schema_extra`, a class's `__get_pydantic_json_schema__`), the careful reading
  always decides.
"""

from __future__ import annotations

import datetime
import enum
import hashlib
import inspect
import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, TypeAdapter

from allama.extract._json import keys_all_kept
from allama.extract._kept import kept_keys
from allama.schema._nulls import may_hold_stand_in_nulls
from allama.schema._types import derived
from allama.schema._undeclared import may_ignore_undeclared_keys

__all__ = ["CAREFUL", "OutputPlan", "dump_consumes", "dump_reads_back", "output_plan"]


_NOT_PLAIN = frozenset(
    {
        "function-before",
        "function-after",
        "function-wrap",
        "function-plain",
        "dataclass",
        "dataclass-args",
        "json",
        "call",
        "custom-error",
        "lax-or-strict",
        "json-or-python",
        "chain",
        "is-instance",
        "is-subclass",
        "callable",
        "arguments",
        "arguments-v3",
        "generator",
        "complex",
    }
)
"""Core schema kinds whose validation may read keys without keeping them as keys, or make
values (and models with fields set) the text did not write."""


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """How a type's output is read: see the module's docstring."""

    counted: bool
    """The keys the validated value kept can be counted (no validator functions...)."""
    forbid: bool
    """Rejecting undeclared keys is `extra="forbid"` at validation (no model allows extras)."""
    undeclared: bool
    """Some object of the schema is closed by convention only (`may_ignore_undeclared_keys`)."""
    nulls: bool
    """Normalisation could remove a stand-in `null` (`may_hold_stand_in_nulls`)."""
    decimals: bool = False
    """The type holds a `Decimal`, which pydantic reads from a JSON number through a float
    (`_decimals`)."""
    renamed: bool = False
    """Validation reads some key the schema does not show (`_Kinds.unshown_keys`)."""
    generators: bool = False
    """The type holds an `Iterable` (pydantic's `generator`), whose items validation leaves
    to the caller's iteration: the careful reading checks them whole (`generator` is a
    kind `_NOT_PLAIN`, so such a type is never read at once)."""

    def validate_once(self, raw: str, adapter: TypeAdapter[Any], reject_undeclared: bool) -> Any:
        """The value, read with one parse; `CAREFUL` when the careful reading must decide."""
        extra: Any = None
        if reject_undeclared and self.renamed:
            return CAREFUL  # a key only validation knows: the walk says it is undeclared
        if reject_undeclared and self.undeclared:
            if not self.forbid:
                return CAREFUL
            extra = "forbid"
        if not self.counted:
            return CAREFUL
        try:
            value = adapter.validate_json(raw, strict=True, extra=extra)
        except ValueError:  # a `ValidationError`: the careful reading says why
            return CAREFUL
        if not keys_all_kept(raw, kept_keys(value)):
            return CAREFUL
        return value


CAREFUL: Any = object()
"""`validate_once` could not decide: the careful reading (parse, normalise, walk) does."""


_RUNTIME_EXTRA = "extra" in inspect.signature(TypeAdapter.validate_json).parameters
"""Whether the installed pydantic takes `extra=` at validation (newer releases); without
it, rejecting undeclared keys is left to the walk."""


def output_plan(adapter: TypeAdapter[Any], schema: dict[str, Any]) -> OutputPlan:
    """The plan of the type whose validator is `adapter` and JSON Schema `schema`: kept with
    a type's schema (worked out once), made afresh for any other."""
    return derived(schema, output_plan, lambda: _make(adapter, schema))


def _make(adapter: TypeAdapter[Any], schema: dict[str, Any]) -> OutputPlan:
    kinds = _core_kinds(adapter.core_schema)
    nulls = may_hold_stand_in_nulls(schema)
    # Read at once only where a stand-in `null` is sure to be rejected (the module's last
    # point): not where the type may read a `null` its schema does not show.
    counted = (
        not (kinds.kinds & _NOT_PLAIN)
        and not kinds.special_models
        and not (nulls and kinds.hidden_nulls)
    )
    return OutputPlan(
        counted=counted,
        forbid=_RUNTIME_EXTRA and counted and not kinds.open_models and not kinds.object_unions,
        undeclared=may_ignore_undeclared_keys(schema) or kinds.closed_by_own_schema,
        nulls=nulls,
        decimals="decimal" in kinds.kinds,
        renamed=kinds.unshown_keys,
        generators="generator" in kinds.kinds,
    )


_SCALAR_KINDS = frozenset(
    {"str", "int", "float", "bool", "none", "literal", "enum", "date", "datetime", "time"}
    | {"timedelta", "uuid", "decimal", "bytes", "url"}
)


def _choices(union: dict[str, Any]) -> list[Any]:
    """A union's choices (each a schema, or a schema and its label)."""
    return [
        choice[0] if isinstance(choice, tuple) else choice for choice in union.get("choices", ())
    ]


@dataclass(slots=True)
class _Kinds:
    kinds: set[str]
    special_models: bool = False
    """A model that is a root model, has a `model_post_init`, or a custom `__init__`."""
    open_models: bool = False
    """A model or `TypedDict` that allows extra keys."""
    object_unions: bool = False
    """A union (not a tagged one) with an object among its choices: forbidding extra keys
    could change which choice validation picks, so the walk decides instead."""
    own_schemas: bool = False
    """A JSON Schema of the caller's own making somewhere (`_own_json_schema`)."""
    hidden_nulls: bool = False
    """A `null` the type reads that its JSON Schema may not show (`SkipJsonSchema[None]`,
    `WithJsonSchema`): a stand-in `null` there is read as itself, not rejected."""
    closed_by_own_schema: bool = False
    """A model (or `TypedDict`) that ignores extra keys, with a JSON Schema of its own making,
    which may close it (`additionalProperties: false`, as the root wrapper's does): the walk
    rejects a key there that validation ignores."""
    unshown_keys: bool = False
    """A key validation reads that the JSON Schema does not show: a validation alias's
    second choice or a path (`AliasChoices`, `AliasPath`), or a field's name beside its
    alias where a configuration validates by name (or not by alias)."""


def schema_nodes(core: Any) -> Iterator[dict[str, Any]]:
    """Every node of a core schema (a dictionary naming its `type`), each once: not what a
    node holds beside its schema (its class, metadata, serializer, config, default), but
    every field of a mapping of fields by name, whatever the field is called."""
    seen: set[int] = set()
    stack = [core]
    while stack:
        node = stack.pop()
        if isinstance(node, list | tuple):
            stack.extend(node)
            continue
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if not isinstance(node.get("type"), str):  # a mapping of fields by name
            stack.extend(node.values())
            continue
        yield node
        for key, child in node.items():
            if key not in _BESIDE_THE_SCHEMA and isinstance(child, dict | list | tuple):
                stack.append(child)


_BESIDE_THE_SCHEMA = frozenset({"cls", "ref", "metadata", "serialization", "config", "default"})


def _core_kinds(core: Any) -> _Kinds:
    """Every kind of node in a core schema, and the models that make counting unsure."""
    found = _Kinds(set())
    aliased = by_name = False
    for node in schema_nodes(core):
        kind = node["type"]
        found.kinds.add(kind)
        config = node.get("config")
        if isinstance(config, dict) and (
            config.get("validate_by_name")
            or config.get("populate_by_name")
            or config.get("validate_by_alias") is False
        ):
            by_name = True
        if kind in _FIELD_GROUPS:
            for name, field in _named_fields(node):
                alias = field.get("validation_alias")
                if alias is None:
                    continue
                if not isinstance(alias, str) and _alias_choices(alias) != 1:
                    found.unshown_keys = True
                elif _key_of(name, alias) != name:
                    aliased = True
        if kind == "model" and (
            node.get("root_model") or node.get("post_init") or node.get("custom_init")
        ):
            found.special_models = True
        if kind == "model":
            config = node.get("config") or {}
            if config.get("extra_fields_behavior") == "allow":
                found.open_models = True
        if kind in ("model-fields", "typed-dict") and node.get("extra_behavior") == "allow":
            found.open_models = True
        if kind == "union" and any(
            not (isinstance(choice, dict) and choice.get("type") in _SCALAR_KINDS)
            for choice in _choices(node)
        ):
            found.object_unions = True
        if _own_json_schema(node):
            found.own_schemas = True
            if kind in ("model", "typed-dict") and _extra_behavior(node) != "forbid":
                found.closed_by_own_schema = True
    # A `null` the type reads where a schema of the caller's own making may not show it.
    found.hidden_nulls = found.own_schemas and bool(found.kinds & {"none", "nullable"})
    found.unshown_keys = found.unshown_keys or (aliased and by_name)
    return found


def _extra_behavior(node: dict[str, Any]) -> Any:
    """What a model or `TypedDict` node does with extra keys (`None`: pydantic's default,
    ignore them)."""
    config = node.get("config") or {}
    inner = node.get("schema") if node["type"] == "model" else node
    own = inner.get("extra_behavior") if isinstance(inner, dict) else None
    return own if own is not None else config.get("extra_fields_behavior")


def _named_fields(node: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The fields of a node of named fields (`_FIELD_GROUPS`), with their names."""
    fields: Any = node.get("fields")
    if isinstance(fields, dict):
        return [(name, field) for name, field in fields.items() if isinstance(field, dict)]
    if isinstance(fields, list):
        return [
            (field["name"], field)
            for field in fields
            if isinstance(field, dict) and isinstance(field.get("name"), str)
        ]
    return []


def _alias_choices(alias: Any) -> int:
    """How many keys a validation alias chooses among; `0` where a choice is a path into
    another key (`AliasPath("a", "b")`), or the alias cannot be read."""
    if not isinstance(alias, list) or not alias:
        return 0
    paths = alias if isinstance(alias[0], list) else [alias]
    if any(not (len(path) == 1 and isinstance(path[0], str)) for path in paths):
        return 0
    return len(paths)


def _own_json_schema(node: dict[str, Any]) -> bool:
    """Whether a core schema node's JSON Schema is one the caller made or changed: a marker
    (`SkipJsonSchema`, `WithJsonSchema`), `json_schema_extra` (a field's or a model's), or a
    class's own `__get_pydantic_json_schema__`, any of which may leave out a `null` it reads.
    (A field's description, title or examples, pydantic's own types, change no type.)"""
    metadata = node.get("metadata") or {}
    if "pydantic_js_annotation_functions" in metadata or "pydantic_js_extra" in metadata:
        return True
    for made in metadata.get("pydantic_js_functions", ()):
        function = getattr(made, "__func__", made)
        if function is not _MODEL_JSON_SCHEMA and not getattr(
            function, "__module__", ""
        ).startswith("pydantic."):
            return True
    cls = node.get("cls")
    config = getattr(cls, "model_config", None) if node.get("type") == "model" else None
    return isinstance(config, dict) and config.get("json_schema_extra") is not None


_MODEL_JSON_SCHEMA = BaseModel.__get_pydantic_json_schema__.__func__  # type: ignore[attr-defined]


_READ_BACK_KINDS = frozenset(
    {
        "definitions",
        "definition-ref",
        "model",
        "model-fields",
        "model-field",
        "typed-dict",
        "typed-dict-field",
        "list",
        "set",
        "frozenset",
        "tuple",
        "dict",
        "nullable",
        "default",
        "tagged-union",
    }
    | _SCALAR_KINDS - {"bytes"}
)
"""Core schema kinds whose values their JSON gives back as they were, by themselves."""


def dump_reads_back(adapter: TypeAdapter[Any]) -> bool:
    """Whether every value of the type is sure to read back from its JSON (`dump_json` in
    the round-trip form, keyed by field name) as itself: only the kinds above, and no
    serializer of its own, no field left out of the JSON, no model with an `__init__` or a
    `model_post_init` of its own, no JSON setting of a model's. Where it is not sure (a
    validator function, a union that may read another choice, `bytes`...), a value may
    still read back, which only trying tells."""
    return all(_node_reads_back(node) for node in schema_nodes(adapter.core_schema))


_DEFAULTS_READ_BACK: dict[str, type] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "decimal": Decimal,
}
"""The kinds whose default, when of this Python type, is what its JSON reads back as."""


def _node_reads_back(node: dict[str, Any]) -> bool:
    """Whether one node of a core schema is sure to read back as it was written."""
    kind = node["type"]
    if kind not in _READ_BACK_KINDS or "serialization" in node:
        return False
    if node.get("serialization_exclude") or node.get("serialization_exclude_if"):
        return False
    if node.get("extra_behavior") == "allow":  # extra keys written beside fields, by name
        return False
    config = node.get("config") or {}
    if any(config.get(name) for name in _STRING_CHANGES):
        return False  # its strings changed after their constraints were checked
    if any(config.get(name) is not None for name in _STRING_LIMITS):
        return False  # limits on its fields' strings, which a default may not meet
    if kind == "model":
        if node.get("root_model") or node.get("post_init") or node.get("custom_init"):
            return False
        if any(name.startswith(("ser_json_", "val_json_")) for name in config):
            return False
        if config.get("extra_fields_behavior") == "allow":
            return False
    if kind == "tagged-union" and callable(node.get("discriminator")):
        return False  # a function of the value, which may pick another choice from its JSON
    if kind == "str" and (
        node.get("to_upper") or node.get("to_lower") or node.get("strip_whitespace")
    ):
        return False  # changed after its constraints were checked
    if kind == "enum" and node.get("sub_type") not in ("str", "int", "float"):
        return False  # members of other values (`Decimal`) are written as other JSON
    if kind == "literal" and not all(map(_literal_reads_back, node.get("expected") or ())):
        return False  # `Literal[Color.RED]` of a plain `Enum`: `"red"` is not the member
    if kind == "default" and "default" in node:
        return _default_reads_back(node["default"], node.get("schema") or {})
    if kind == "default" and "default_factory" in node:
        return _factory_reads_back(node)
    return True


def _factory_reads_back(node: dict[str, Any]) -> bool:
    """What a factory makes may be of any type, and differ from call to call: known only
    for the standard library's own (an empty container, a new id, the time now)."""
    factory = node["default_factory"]
    if node.get("default_factory_takes_data"):
        return False
    schema = node.get("schema") or {}
    if schema.get("type") == "nullable":
        schema = schema.get("schema") or {}
    try:
        makes = _KNOWN_FACTORIES.get(factory)
    except TypeError:  # an object that cannot be hashed
        return False
    if makes is None:
        return False
    if makes in ("list", "dict", "set", "frozenset", "tuple"):
        return _default_reads_back(factory(), schema)
    return schema.get("type") == makes and set(schema) <= _UNCONSTRAINED


_KNOWN_FACTORIES: dict[Any, str] = {
    **{kind: kind.__name__ for kind in (list, dict, set, frozenset, tuple)},
    uuid.uuid1: "uuid",
    uuid.uuid4: "uuid",
    datetime.datetime.now: "datetime",
    datetime.datetime.utcnow: "datetime",
    datetime.date.today: "date",
}
"""Factories whose values are of one kind (and none of its constraints met or not)."""


def _literal_reads_back(value: Any) -> bool:
    """Whether a literal's value is what its JSON reads back as: JSON's own (text, a whole
    number, a truth value, null), or a member of an enum of text or whole numbers."""
    if value is None or type(value) in (str, int, bool):
        return True
    return isinstance(value, enum.Enum) and isinstance(value, str | int)


def _default_reads_back(default: Any, schema: dict[str, Any]) -> bool:
    """Whether a default (which validation does not check) is what its JSON reads back as:
    `None` where its field takes it, an empty container its field takes, one of a literal's
    values, a member of an enum, or a scalar of its kind's own Python type (`0` for a float
    would read back as `0.0`)."""
    kind = schema.get("type")
    if default is None:
        return kind in ("nullable", "none")  # `x: int = None` writes a `null` it refuses
    if kind == "nullable":
        schema = schema.get("schema") or {}
        kind = schema.get("type")
    if kind in ("list", "dict", "set", "frozenset", "tuple"):
        if type(default).__name__ != kind or default or schema.get("min_length"):
            return False
        if kind == "tuple":  # empty reads back where no item is required: `tuple[int, ...]`
            items = schema.get("items_schema") or []
            return not items or (schema.get("variadic_item_index") == 0 and len(items) == 1)
        return True
    if kind == "literal":
        return any(
            type(default) is type(value) and default == value
            for value in schema.get("expected") or ()
        )
    if kind == "enum":
        return isinstance(default, schema.get("cls") or ())
    wanted = _DEFAULTS_READ_BACK.get(str(kind))
    if wanted is None or type(default) is not wanted:
        return False
    if isinstance(default, Decimal):
        if not default.is_finite():
            return False  # no JSON number: written as `null`
    elif isinstance(default, float) and not math.isfinite(default):
        return False
    # Validation does not check a default: one its field's constraints refuse (`""` with a
    # `min_length`) would not read back.
    return set(schema) <= _UNCONSTRAINED


_UNCONSTRAINED = frozenset({"type", "metadata", "ref", "strict", "microseconds_precision"})
"""A scalar schema's keys that constrain no value."""

_STRING_CHANGES = ("str_to_upper", "str_to_lower", "str_strip_whitespace")
"""A configuration's settings that change a string after its constraints are checked."""

_STRING_LIMITS = ("str_min_length", "str_max_length")
"""A configuration's limits on its fields' strings, defaults not checked against them."""


def stored_names(adapter: TypeAdapter[Any]) -> str | None:
    """A digest of which field each key of the type's JSON is read into, where the two
    differ (an alias), by the key's place in the JSON, for a value's JSON kept by field
    name: two types of one schema whose fields are named otherwise (two swapped behind
    their aliases, in one model or across two, of one name or not) read such JSON into
    other fields. Read from the core schema, so that a JSON Schema of the type's own, alike
    by alias and by name, hides no field; by place, not by class, so that a class renamed
    or moved keeps its digest. Types whose keys and fields' names are the same have one
    digest, aliases or not. `None` where the core schema cannot be walked."""
    try:
        core = adapter.core_schema
        defined = {node["ref"]: node for node in schema_nodes(core) if "ref" in node}
        renamed: set[tuple[str, str, str]] = set()
        walked: set[int] = set()
        stack: list[tuple[Any, str]] = [(core, "")]
        while stack:
            node, place = stack.pop()
            if isinstance(node, list | tuple):
                stack.extend((child, place) for child in node)
                continue
            if not isinstance(node, dict):
                continue
            kind = node.get("type")
            if kind == "definitions":  # each walked where it is used
                stack.append((node.get("schema"), place))
                continue
            if kind == "definition-ref":  # walked once, at the first place it is used
                target = defined.get(node.get("schema_ref"))
                if target is not None and id(target) not in walked:
                    walked.add(id(target))
                    stack.append((target, place))
                continue
            if kind in _FIELD_GROUPS:
                fields: Any = node["fields"]
                named = (
                    [(field["name"], field) for field in fields]
                    if kind == "dataclass-args"
                    else list(fields.items())
                )
                for name, field in named:
                    key = _key_of(name, field.get("validation_alias"))
                    if key != name:
                        renamed.add((place, key, name))
                    stack.append((field.get("schema"), f"{place}/{key}"))
                continue
            for key, child in node.items():
                if key not in _BESIDE_THE_SCHEMA and isinstance(child, dict | list | tuple):
                    stack.append((child, place))
    except (KeyError, TypeError, AttributeError, ValueError):
        return None
    text = json.dumps(sorted(renamed))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _key_of(name: str, alias: Any) -> str:
    """The key a field's JSON Schema gives it: its alias, or the first of its choices that is
    one key (a path is not one); its name where it has none."""
    if isinstance(alias, str):
        return alias
    if isinstance(alias, list) and alias:
        paths = alias if isinstance(alias[0], list) else [alias]
        for path in paths:
            if len(path) == 1 and isinstance(path[0], str):
                return path[0]
    return name


_FIELD_GROUPS = frozenset({"model-fields", "typed-dict", "dataclass-args"})
"""The core schema's kinds of node holding named fields."""


def dump_consumes(adapter: TypeAdapter[Any]) -> bool:
    """Whether writing a value of the type reads some of it to its end (an `Iterable`
    field is validated as an iterator, which its JSON empties)."""
    return "generator" in _core_kinds(adapter.core_schema).kinds
