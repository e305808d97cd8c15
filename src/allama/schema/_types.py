"""The JSON Schema of a Python type, and the names messages and tool names use for it."""

from __future__ import annotations

import contextlib
import copy
import decimal
import enum
import json
import math
import re
import threading
import types
import typing
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, TypeVar, cast

from pydantic import (
    ConfigDict,
    PydanticImportError,
    PydanticInvalidForJsonSchema,
    PydanticUndefinedAnnotation,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
)
from pydantic.json_schema import (
    GenerateJsonSchema,
    JsonRef,
    JsonSchemaMode,
    JsonSchemaValue,
)
from pydantic_core import PydanticOmit, PydanticSerializationError, SchemaValidator, core_schema
from pydantic_core import SchemaError as CoreSchemaError

from allama.schema._declared import (
    DECLARING,
    JsonReader,
    may_override,
    refused,
    unread_declared,
)
from allama.schema._errors import SchemaError

__all__ = ["TypeSchema", "derived", "schema_name", "type_label", "type_schema"]


_LABEL_DEPTH = 12
"""Type arguments spelled out in a label; deeper ones are `...`."""


def type_label(tp: Any, _depth: int = 0) -> str:
    """How messages name a type: `Person`, `list[Item]`, `Literal['a', 'b']`, `Item | None`."""
    if _depth > _LABEL_DEPTH:
        return "..."
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:  # constraints are in the schema, not the name
        return type_label(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(type_label(arg, _depth + 1) for arg in typing.get_args(tp))
    if tp is type(None):
        return "None"
    if origin is None:
        name = getattr(tp, "__name__", None)
        return name if isinstance(name, str) else repr(tp)
    args = ", ".join(type_label(arg, _depth + 1) for arg in typing.get_args(tp))
    base = getattr(origin, "__name__", None) or repr(origin).replace("typing.", "")
    if origin is typing.Literal:
        base = "Literal"
        args = ", ".join(repr(arg) for arg in typing.get_args(tp))
    return f"{base}[{args}]"


def schema_name(raw: str) -> str:
    """A name providers accept for a schema or tool: lowercase ASCII, digits and `_`.

    >>> schema_name("Person"), schema_name("list[Item]"), schema_name("???")
    ('person', 'list_item', 'structured_output')
    """
    name = re.sub(r"[^a-z0-9]+", "_", raw.lower()).strip("_")
    return name[:64].rstrip("_") or "structured_output"


@dataclass(frozen=True, slots=True, eq=False)
class TypeSchema:
    """A type with its validator, its JSON Schema, and its names."""

    adapter: TypeAdapter[Any]
    schema: dict[str, Any]
    label: str
    name: str


class _StableDefaults(GenerateJsonSchema):
    """Pydantic's schema, with a default that is a set (or holds one) listed in a fixed
    order: a set of strings or enum members iterates in an order that changes from one
    process to the next, and the schema is hashed into a batch ledger's keys (and sent,
    where a provider's prompt cache compares it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._core_definitions: dict[str, core_schema.CoreSchema] = {}
        self._read_by_functions = 0
        """How many validators of the caller's (before, wrap, plain) the schema being
        written sits under: each may read an answer its enum's own validation refuses."""
        self._tagged = False
        """Whether a tagged union was marked (`tagged_union_schema`)."""
        self._root: core_schema.CoreSchema | None = None
        self._tagged_refs: dict[str, core_schema.TaggedUnionSchema] | None = None
        """The root's tagged unions by ref (`_tagged_unions`), found when first asked."""
        self._owners: list[str | None] = []
        """The models, dataclasses and TypedDicts whose fields are being written, innermost
        last: a field the schema leaves out is named by its owner (`_SkippedRequired`)."""
        self._field_names: dict[int, str] = {}
        """The names of the fields of models and TypedDicts met, by their core schema's
        identity: the field's own schema does not hold its name (a dataclass's does)."""
        self._left_out: dict[int, Any] = {}
        """The core schemas whose JSON Schema was left out (`PydanticOmit`), by identity
        (each kept, so no identity is reused): what lies beneath one is not shown."""
        self._skipped_required: dict[int, tuple[Any, str]] = {}
        """The required fields left out (`_note_skipped`), by their core schema's identity,
        with the name a message gives each (`Owner.field`)."""
        self._unread_enums: dict[int, tuple[Any, _EnumUnread]] = {}
        """The enums none of whose listed values validation reads back (`enum_schema`), by
        their core schema's identity, each with its refusal: refused only if an answer
        reaches one past no validator of the caller's (`_first_reached`)."""
        self._unread_literals: dict[int, tuple[Any, _LiteralUnread]] = {}
        """The `Literal`s some of whose values validation does not read back from their JSON
        (`literal_schema`), by their core schema's identity, each with its refusal: refused,
        as an enum is, only if an answer reaches one past no validator of the caller's."""
        self._fields: list[str | None] = []
        """The fields being written, innermost last, each named by its owner (`Owner.field`;
        `None` where its name is unknown): a refusal names the field it is in."""
        self._failed_in: tuple[BaseException, str] | None = None
        """An error raised while writing a field, with the innermost field it passed: a
        failure of the caller's own code is named by its field (`generate`)."""
        self._configs: list[dict[str, Any] | None] = []
        """The core configurations of the owners in `_owners`, innermost last."""
        self._bases: dict[int, dict[str, Any]] = {}
        """What pydantic's own schema of each node whose own code may override it
        (`may_override`) declares (`DECLARING`), by its core schema's identity, as it is
        written (`_watched`); none where it is not (a `WithJsonSchema` writes it whole)."""
        self._judged: set[int] = set()
        """The nodes judged (`_judge_declared`): a model's written once, then a `$ref`."""
        self._overridden: dict[int, tuple[Any, _DeclaredUnread | _RequiredLeftOut]] = {}
        """The nodes whose schema, as the type's own code wrote it, no answer validates
        against (`_judge_declared`, `_judge_required`), by their core schema's identity, each
        with its refusal: refused, as an enum is, only if an answer reaches one past no
        validator of the caller's (`_first_reached`)."""
        self._copied: dict[str, tuple[Any, list[str]]] = {}
        """The definitions copied by `_json_reader` as nodes are judged."""
        self._keys: dict[int, tuple[Any, str]] = {}
        """The key each field of a model, dataclass or TypedDict was written under in its
        `properties` (`_get_alias_name`), by its core schema's identity (each kept): its
        owner's config, which says whether that is the alias, is in effect only then."""

    @property
    def mode(self) -> JsonSchemaMode:
        """The mode asked for, always: pydantic would take a model's
        `json_schema_mode_override` instead (a response model's `"serialization"`), whose
        schema names what the model writes out, not what validation reads back."""
        return self._mode

    def function_before_schema(
        self, schema: core_schema.BeforeValidatorFunctionSchema
    ) -> JsonSchemaValue:
        with self._under_a_function():
            return super().function_before_schema(schema)

    def function_wrap_schema(
        self, schema: core_schema.WrapValidatorFunctionSchema
    ) -> JsonSchemaValue:
        with self._under_a_function():
            return super().function_wrap_schema(schema)

    def function_plain_schema(
        self, schema: core_schema.PlainValidatorFunctionSchema
    ) -> JsonSchemaValue:
        with self._under_a_function():
            return super().function_plain_schema(schema)

    @contextlib.contextmanager
    def _under_a_function(self) -> Iterator[None]:
        self._read_by_functions += 1
        try:
            yield
        finally:
            self._read_by_functions -= 1

    def encode_default(self, dft: Any) -> Any:
        if isinstance(dft, set | frozenset):
            items = [self.encode_default(item) for item in dft]
            return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, default=str))
        if isinstance(dft, list | tuple) and _holds_a_set(dft):
            return [self.encode_default(item) for item in dft]
        if isinstance(dft, dict) and _holds_a_set(dft):
            plain = super().encode_default  # a key as pydantic writes it
            return {
                next(iter(plain({key: None}))): self.encode_default(value)
                for key, value in dft.items()
            }
        return super().encode_default(dft)

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        """A default no JSON can hold (`float("inf")`) is left out of the schema: it only
        annotates it, and no provider reads a schema holding one. The value is the type's
        own default all the same."""
        json_schema = super().default_schema(schema)
        if "default" in json_schema and not _json_number_safe(json_schema["default"]):
            del json_schema["default"]
        return json_schema

    def datetime_schema(self, schema: core_schema.DatetimeSchema) -> JsonSchemaValue:
        """A datetime that must be naive (`NaiveDatetime`) is a pattern without an offset:
        `format: date-time` is RFC 3339's, whose offset every provider that enforces it
        writes, and which the type refuses. The pattern checks the shape only (February 31
        passes it), so `format: naive-date-time` stands beside it, which no provider
        enforces: each says so, as for `format: decimal`."""
        if schema.get("tz_constraint") == "naive" and self.mode == "validation":
            return {
                "type": "string",
                "pattern": NAIVE_DATETIME_PATTERN,
                "format": NAIVE_DATETIME_FORMAT,
            }
        return self._marked(schema) or super().datetime_schema(schema)

    def date_schema(self, schema: core_schema.DateSchema) -> JsonSchemaValue:
        """A date with a check pydantic leaves out of its schema is marked (`_marked`)."""
        return self._marked(schema) or super().date_schema(schema)

    def time_schema(self, schema: core_schema.TimeSchema) -> JsonSchemaValue:
        """A time with a check pydantic leaves out of its schema is marked (`_marked`)."""
        return self._marked(schema) or super().time_schema(schema)

    def timedelta_schema(self, schema: core_schema.TimedeltaSchema) -> JsonSchemaValue:
        """A duration with a check pydantic leaves out of its schema is marked (`_marked`)."""
        return self._marked(schema) or super().timedelta_schema(schema)

    def complex_schema(self, schema: core_schema.ComplexSchema) -> JsonSchemaValue:
        """A complex number is text pydantic leaves free (`"about three"` passed its schema
        and failed the type): marked (`_marked`)."""
        return self._marked(schema) or super().complex_schema(schema)

    def _marked(self, schema: core_schema.CoreSchema) -> JsonSchemaValue | None:
        """The schema of a complex number, or of a date, time or duration with a check
        pydantic leaves out of its schema (bounds, past or future, an offset), in validation
        mode: a pattern of the text the type reads, as far as a pattern can say it, marked
        with a format no provider enforces (`COMPLEX_FORMAT`, `MOMENT_FORMATS`), so each
        says the value is not fully held. `None` for any other."""
        return _marked_text(schema) if self.mode == "validation" else None

    def dataclass_args_schema(self, schema: core_schema.DataclassArgsSchema) -> JsonSchemaValue:
        """A dataclass's fields as validation reads them: one not in `__init__`
        (`field(init=False)`) is never read from the answer (what the model writes there is
        dropped), so it is no property to write, as a computed field is not."""
        if self.mode == "validation":
            fields = [field for field in schema["fields"] if field.get("init", True)]
            schema = {**schema, "fields": fields}
        return super().dataclass_args_schema(schema)

    def enum_schema(self, schema: core_schema.EnumSchema) -> JsonSchemaValue:
        """A flag (`enum.Flag`, `IntFlag`) as the integers it reads, its members combined:
        pydantic lists the members alone, which leaves out `R | W`. Pydantic lists each
        member by its value's JSON, which validation compares with the value itself: a
        `Decimal` a JSON number equals (`1.5`) is listed as that number; a member no JSON
        reads back (a date, a tuple, `Decimal("0.20")`) is left out, since no answer naming
        it validates, and an enum none of whose members reads back is refused
        (`_EnumUnread`) if an answer reaches it past no validator of the caller's (decided
        from the root, `generate`: a shared enum is written once at the top, apart from the
        validators where it is used). Under a validator of the caller's, which may read what
        the enum alone does not, it is listed as pydantic lists it."""
        json_schema = super().enum_schema(schema)
        cls = schema["cls"]
        listed = json_schema.get("enum")
        if self.mode == "validation" and isinstance(listed, list) and not self._read_by_functions:
            texts = tuple(json.dumps(value) for value in listed)
            unread = _unread_values(cls, texts)
            if unread:
                members = tuple(schema["members"])
                numbers = _as_numbers(cls, members, unread, texts)
                readable = [
                    json.loads(numbers[member.name]) if member.name in numbers else value
                    for member, value, text in zip(members, listed, texts, strict=True)
                    if text not in unread or member.name in numbers
                ]
                if not readable:
                    pairs = list(zip(members, texts, strict=True))
                    self._unread_enums[id(schema)] = (schema, _EnumUnread(cls, pairs))
                else:
                    json_schema = {
                        k: v for k, v in json_schema.items() if k not in ("enum", "type")
                    }
                    kinds = {type(value) for value in readable}
                    for types_, name in (
                        ({str}, "string"),
                        ({int}, "integer"),
                        ({int, float}, "number"),
                    ):
                        if kinds <= types_:
                            json_schema["type"] = name
                            break
                    json_schema["enum"] = readable
        if isinstance(cls, type) and issubclass(cls, enum.Flag):
            values = _flag_values(cls)
            if values is not None:
                kept = {k: v for k, v in json_schema.items() if k not in ("enum", "type")}
                kept.setdefault("description", _flag_description(cls))
                json_schema = {**kept, **values}
        return json_schema

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        """A `Literal` as pydantic lists it, each value by its JSON (a plain `Enum`'s member
        by its value's). Validation compares what it reads with the value itself, which a
        plain `Enum`'s member (`Literal[Kind.CAT]`) or `bytes` never equals: a `Literal`
        holding a value its own JSON validation refuses is refused (`_LiteralUnread`) if an
        answer reaches it past no validator of the caller's (decided from the root,
        `generate`), since every answer naming that value fails, every retry too."""
        json_schema = super().literal_schema(schema)
        listed = [json_schema["const"]] if "const" in json_schema else json_schema.get("enum")
        expected = list(schema["expected"])
        if self.mode == "validation" and isinstance(listed, list) and len(listed) == len(expected):
            texts = tuple(json.dumps(value) for value in listed)
            unread = _unread_literal_values(tuple((type(v), v) for v in expected), texts)
            if unread:
                pairs = [(expected[at], texts[at]) for at in sorted(unread)]
                place = self._fields[-1] if self._fields else None
                refusal = _LiteralUnread(place, expected, pairs)
                self._unread_literals[id(schema)] = (schema, refusal)
        return json_schema

    @contextlib.contextmanager
    def _in_field(self, name: str | None) -> Iterator[None]:
        """A field named `name` is written within: a refusal names it by its owner."""
        owner = self._owners[-1] if self._owners else None
        place = None if name is None else f"{owner}.{name}" if owner else name
        self._fields.append(place)
        try:
            yield
        except Exception as error:
            if place is not None and (self._failed_in is None or self._failed_in[0] is not error):
                self._failed_in = (error, place)  # the innermost field, met first
            raise
        finally:
            self._fields.pop()

    def decimal_schema(self, schema: core_schema.DecimalSchema) -> JsonSchemaValue:
        """A decimal as a number, or as a numeral in a string: pydantic leaves the string
        free (`"$1,234.50"` passed the schema and failed the type). What a branch cannot
        hold (digit limits in a JSON number, bounds in a string) is marked `format: decimal`,
        which no provider enforces, so each says so; the numeral's pattern holds the digit
        limits as far as a pattern can."""
        json_schema = super().decimal_schema(schema)
        if self.mode != "validation":
            return json_schema
        digits = schema.get("max_digits") is not None or schema.get("decimal_places") is not None
        bounded = any(
            schema.get(key) is not None for key in ("le", "ge", "lt", "gt", "multiple_of")
        )
        pattern = self.build_decimal_pattern(schema)
        max_digits, places = schema.get("max_digits"), schema.get("decimal_places")
        if max_digits is not None and places is not None and 0 < max_digits <= places:
            # No digit before the point is allowed, and pydantic counts a bare zero ("0",
            # "0.") as one: a point and digits, at most `max_digits` of them besides
            # trailing zeros, which it does not count. Its own pattern lets the zero by.
            pattern = rf"^[+-]?0*\.[0-9]{{1,{max_digits}}}0*$"
        elif digits and pattern.endswith(_ANY_EXPONENT):
            # An exponent's digits are not held to the limits: numerals without one.
            pattern = pattern[: -len(_ANY_EXPONENT)] + ")$"
        branches: list[JsonSchemaValue] = []
        for branch in json_schema.get("anyOf", ()):
            if branch.get("type") == "string":
                branch = {**branch, "pattern": pattern}
                if digits or bounded:
                    branch["format"] = DECIMAL_FORMAT
            elif digits:
                branch = {**branch, "format": DECIMAL_FORMAT}
            branches.append(branch)
        return {**json_schema, "anyOf": branches}

    def generate_inner(self, schema: Any) -> JsonSchemaValue:
        """Every node as pydantic writes it; a string whose checks read it stripped of
        whitespace (`_reads_stripped`) is marked after the constraints beside it are merged
        in (`Field(min_length=...)` after an `AfterValidator` is). A field is written within
        its name (`_in_field`), its `json_schema_extra` too, which pydantic applies here.

        A node whose own code may write over what pydantic declares of it (`may_override`)
        is judged against what its validation reads (`_judge_declared`), and a model's,
        dataclass's or TypedDict's `required` against the fields it requires
        (`_judge_required`)."""
        kind = schema.get("type") if isinstance(schema, dict) else None
        name = (
            schema.get("name")
            if kind == "dataclass-field"
            else self._field_names.get(id(schema))
            if kind in ("model-field", "typed-dict-field")
            else None
        )
        validating = self.mode == "validation"
        metadata = schema.get("metadata") if validating and kind is not None else None
        watched = bool(metadata and may_override(metadata))
        try:
            with self._in_field(name) if kind in _FIELDS else contextlib.nullcontext():
                if not watched:
                    json_schema = super().generate_inner(schema)
                else:
                    with self._watched(schema):
                        json_schema = super().generate_inner(schema)
                        self._judge_declared(schema, json_schema, self._bases.get(id(schema)))
        except PydanticOmit:
            self._note_skipped(schema)
            raise
        if validating and "$ref" not in json_schema and self._reads_stripped(schema):
            _mark_stripped(json_schema)
        if validating and kind in CLASS_KINDS:
            self._judge_required(schema, json_schema)
        return json_schema

    @contextlib.contextmanager
    def _watched(self, schema: dict[str, Any]) -> Iterator[None]:
        """`schema` is written within, pydantic's own writer of its kind noting what it
        declares (`_bases`), so what the node's own code writes over it is told apart. Only
        watched nodes pay for it: the writer is swapped back after."""
        methods = cast(dict[Any, Callable[[Any], JsonSchemaValue]], self._schema_type_to_method)
        kind = schema.get("type")
        own = methods.get(kind)
        if own is None:  # pydantic's to refuse
            yield
            return

        def noting(node: Any) -> JsonSchemaValue:
            json_schema = own(node)
            if node is schema:
                self._bases[id(schema)] = self._declared(json_schema)
            return json_schema

        methods[kind] = noting
        try:
            yield
        finally:
            methods[kind] = own
            self._bases.pop(id(schema), None)

    def _declared(self, json_schema: JsonSchemaValue) -> dict[str, Any]:
        """What `json_schema` declares of the values it allows (`DECLARING`), through a
        `$ref` beside nothing it declares itself (a model's place)."""
        found = {key: json_schema[key] for key in DECLARING if key in json_schema}
        ref = json_schema.get("$ref")
        if found or not isinstance(ref, str):
            return found
        try:
            target = self.get_schema_from_definitions(JsonRef(ref))
        except (KeyError, PydanticUserError):  # pydantic's own to say, as it writes the schema
            return found
        if not isinstance(target, dict):
            return found
        return {key: target[key] for key in DECLARING if key in target}

    def _judge_declared(
        self, schema: dict[str, Any], json_schema: JsonSchemaValue, base: dict[str, Any] | None
    ) -> None:
        """Notes `schema` (`_overridden`) where its own code (`WithJsonSchema`,
        `json_schema_extra`, a `__get_pydantic_json_schema__`) changed what pydantic declares
        of it (`base`) into values its validation, reading strictly from JSON, never reads
        (`unread_declared`): `{"type": "string"}` over an `int`. Asked of a copy that runs
        none of the caller's code (`_json_reader`): a validator of the caller's there reads
        any value, so a `PlainValidator` reading the override's text is not refused. Without
        a `base`, pydantic's schema was not written: the node's own code wrote it whole."""
        if id(schema) in self._judged:  # a model's, met again: its `$ref`
            return
        self._judged.add(id(schema))
        declared = self._declared(json_schema)
        if not declared or declared == (base or {}):
            return
        value = schema["schema"] if schema.get("type") in _FIELDS else schema
        config = self._configs[-1] if self._configs else None
        reader = _json_reader(value, config, self._core_definitions, self._copied)
        unread = unread_declared(declared, reader)
        if unread is not None:
            place = self._fields[-1] if self._fields else None
            label = _read_label(value, self._core_definitions)
            refusal = _DeclaredUnread(place, declared, label, *unread)
            self._overridden[id(schema)] = (schema, refusal)

    def _get_alias_name(self, field: Any, name: str) -> str:
        """The key pydantic writes `field` under, noted (`_keys`): asked while its owner's
        config is in effect, which `_judge_required`, after, is not."""
        key = super()._get_alias_name(field, name)
        self._keys[id(field)] = (field, key)
        return key

    def _key_of(self, schema: dict[str, Any], field: Any, name: str) -> str:
        """The key `field`, named `name` in the class `schema`, is written under in its
        `properties`: the one pydantic wrote (`_keys`); where the class's own code wrote them
        all, the one pydantic would, under the class's own config as pydantic pushes it."""
        noted = self._keys.get(id(field))
        if noted is not None and noted[0] is field:
            return noted[1]
        if not self.by_alias:
            return name
        cls = schema.get("cls")
        kind = schema.get("type")
        own = getattr(cls, "model_config" if kind == "model" else "__pydantic_config__", None)
        if own is None and kind == "typed-dict":
            own = {}  # pydantic writes a TypedDict without one under the defaults
        config = cast(ConfigDict, own) if isinstance(own, dict) else None  # else its parent's
        with self._config_wrapper_stack.push(config):
            return super()._get_alias_name(field, name)

    def _judge_required(self, schema: dict[str, Any], json_schema: JsonSchemaValue) -> None:
        """Notes a model, dataclass or TypedDict (`_overridden`, by its fields' node) whose
        own code (a `json_schema_extra`, a `__get_pydantic_json_schema__`) left out of
        `required` a field its validation requires: an answer may leave it out, and then
        fails, where the dialect keeps `required` as given. Looked at only where the class
        has such code of its own."""
        cls = schema.get("cls")
        config = getattr(cls, "model_config", None) or getattr(cls, "__pydantic_config__", None)
        extra = config.get("json_schema_extra") if isinstance(config, dict) else None
        metadata = schema.get("metadata")
        if extra is None and not (metadata and may_override(metadata)):
            return
        fields_node = schema if schema.get("type") == "typed-dict" else schema.get("schema")
        while isinstance(fields_node, dict) and fields_node.get("type") == "function-after":
            fields_node = fields_node.get("schema")
        if not isinstance(fields_node, dict):
            return
        if fields_node.get("type") not in ("model-fields", "typed-dict", "dataclass-args"):
            return  # read by a validator of the caller's first, or a root model
        named = named_fields(fields_node)
        written = json_schema
        ref = json_schema.get("$ref")
        if isinstance(ref, str) and "properties" not in json_schema:
            with contextlib.suppress(KeyError, PydanticUserError):
                written = self.get_schema_from_definitions(JsonRef(ref)) or json_schema
        listed = written.get("required")
        required = (
            {name for name in listed if isinstance(name, str)}
            if isinstance(listed, list)
            else set()
        )
        total = bool(fields_node.get("total", True))
        for name, each in named:
            if self._left_out.get(id(each)) is each or not each.get("init", True):
                continue  # said as `_SkippedRequired`, or never read
            if self.field_is_required(cast(Any, each), total) and (
                self._key_of(schema, each, name) not in required
            ):
                owner = getattr(cls, "__name__", None)
                refusal = _RequiredLeftOut(f"{owner}.{name}" if isinstance(owner, str) else name)
                self._overridden[id(fields_node)] = (fields_node, refusal)
                return

    def _note_skipped(self, schema: Any) -> None:
        """Notes a core schema left out of the JSON Schema, and a required field among them
        (`SkipJsonSchema[int]`): no answer holds it, and validation fails without it. Only
        noted here: pydantic writes a shared definition once, at the top, apart from the
        validators and skipped fields above each place it is used, so whether validation
        ever needs the field from an answer is decided from the root (`_shown_skipped`)."""
        if not isinstance(schema, dict) or self.mode != "validation":
            return
        self._left_out[id(schema)] = schema
        kind = schema.get("type")
        if kind == "typed-dict-field":
            required = bool(schema.get("required", True))
        elif kind in ("model-field", "dataclass-field"):
            required = schema["schema"].get("type") != "default"
        else:
            return
        if required:
            name = str(schema.get("name") or self._field_names.get(id(schema), "?"))
            owner = self._owners[-1] if self._owners else None
            self._skipped_required[id(schema)] = (schema, f"{owner}.{name}" if owner else name)

    def _shown_skipped(self, root: core_schema.CoreSchema) -> str | None:
        """The first required field left out of the schema (`_note_skipped`) that an
        answer reaches validation through (`_first_reached`). `None` if there is none: the
        answer never has to hold it."""
        return self._first_reached(root, self._skipped_required)

    def _first_reached(
        self,
        root: core_schema.CoreSchema,
        noted: dict[int, tuple[Any, V]],
        narrowed: Callable[[V, JsonReader], V | None] | None = None,
    ) -> V | None:
        """What is noted of the first of `noted`'s core schemas an answer reaches validation
        through, from the root: not beneath a schema left out (a skipped field holding the
        model), nor beneath a validator of the caller's (before, wrap, plain) or a model's
        own `__init__`, either of which may read the answer another way. `None` if none is.

        A noted value (an enum's, a `Literal`'s) reached as a choice of a union (or of a
        nullable) is read by the whole union first: `narrowed` gives what is left of the
        refusal once the values that union reads (`_json_reader`) are dropped, `None` where
        it reads them all (`Literal[Kind.CAT] | str` reads `"cat"` as text). Each place a
        shared schema is reached is judged by its own union."""
        definitions: dict[str, Any] = dict(self._core_definitions)
        followed: set[tuple[str, int]] = set()
        walked: set[tuple[int, int]] = set()
        readers: dict[tuple[int, int], JsonReader] = {}
        copied: dict[str, tuple[Any, list[str]]] = {}  # definitions copied by `_json_reader`
        # A schema with a ref may be inlined at each place (an enum): pydantic writes the
        # first met, and every copy of it is the same schema.
        by_ref = {
            entry[0]["ref"]: entry
            for entry in noted.values()
            if isinstance(entry[0], dict) and isinstance(entry[0].get("ref"), str)
        }
        # Each node with the outermost union of the place it is at (with the configuration
        # it is read under), if any, and the configuration of its innermost owner.
        stack: list[tuple[Any, _Place | None, dict[str, Any] | None]] = [(root, None, None)]
        while stack:
            node, place, config = stack.pop()
            if isinstance(node, list | tuple):
                stack.extend((item, place, config) for item in reversed(node))
                continue
            at = id(place[0]) if place is not None else 0
            if not isinstance(node, dict) or (id(node), at) in walked:
                continue
            walked.add((id(node), at))
            found = noted.get(id(node))
            if found is None or found[0] is not node:
                ref = node.get("ref")
                found = by_ref.get(ref) if isinstance(ref, str) else None
            if found is not None:
                refusal: V | None = found[1]
                if place is not None and narrowed is not None:
                    key = (id(place[0]), id(place[1]))
                    if key not in readers:
                        readers[key] = _json_reader(place[0], place[1], definitions, copied)
                    refusal = narrowed(found[1], readers[key])
                if refusal is not None:
                    return refusal
                continue
            if self._left_out.get(id(node)) is node:
                continue
            kind = node.get("type")
            if not isinstance(kind, str):
                kind = None  # not a schema (an error's context, say): walked through
            if kind in _READ_BY_CODE or kind == "function-plain":
                continue
            if kind == "model" and node.get("custom_init"):
                continue
            if kind in ("model", "dataclass", "typed-dict") and isinstance(
                node.get("config"), dict
            ):
                config = node["config"]
            if kind in _UNIONS and place is None:
                place = (node, config)
            elif not (kind in _SAME_PLACE or (kind == "model" and node.get("root_model"))):
                place = None  # what lies beneath is read at another place (a field, an item)
            if kind == "definitions":
                definitions.update(
                    (item["ref"], item) for item in node["definitions"] if "ref" in item
                )
                stack.append((node["schema"], place, config))
            elif kind == "definition-ref":
                ref = node.get("schema_ref")
                if ref in definitions and (ref, at) not in followed:
                    followed.add((ref, at))
                    stack.append((definitions[ref], place, config))
            elif kind == "json-or-python":  # an answer is JSON
                stack.append((node["json_schema"], place, config))
            elif kind == "chain":  # a later step reads what the first made of the answer
                stack.append((node["steps"][:1], place, config))
            elif kind == "dataclass-field" and not node.get("init", True):
                continue  # never read from the answer (`dataclass_args_schema`)
            else:
                for key, value in reversed(node.items()):
                    if key in ("fields", "choices") and isinstance(value, dict):
                        # by name or tag, any name
                        stack.extend((each, place, config) for each in reversed(value.values()))
                    elif key not in _NOT_READ:
                        stack.append((value, place, config))
        return None

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        with self._owned_by(schema):
            return super().model_schema(schema)

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        with self._owned_by(schema):
            return super().dataclass_schema(schema)

    def typed_dict_schema(self, schema: core_schema.TypedDictSchema) -> JsonSchemaValue:
        self._field_names.update((id(field), name) for name, field in schema["fields"].items())
        with self._owned_by(schema):
            return super().typed_dict_schema(schema)

    def model_fields_schema(self, schema: core_schema.ModelFieldsSchema) -> JsonSchemaValue:
        self._field_names.update((id(field), name) for name, field in schema["fields"].items())
        return super().model_fields_schema(schema)

    @contextlib.contextmanager
    def _owned_by(self, schema: Any) -> Iterator[None]:
        """The fields of the class of `schema` (a model's, a dataclass's, a TypedDict's core
        schema) are written within: a message names a field by its owner, and a field is
        read under its owner's configuration (`_judge_declared`)."""
        name = getattr(schema.get("cls"), "__name__", None)
        config = schema.get("config")
        self._owners.append(name if isinstance(name, str) else None)
        self._configs.append(config if isinstance(config, dict) else None)
        try:
            yield
        finally:
            self._owners.pop()
            self._configs.pop()

    def _reads_stripped(self, schema: Any) -> bool:
        """Whether `schema` is a `str` (or after-validators over one) that strips whitespace
        before checking its length and pattern: its own `strip_whitespace`, else its
        configuration's `str_strip_whitespace`, as pydantic-core reads them."""
        while isinstance(schema, dict) and schema.get("type") == "function-after":
            schema = schema.get("schema")
        if not isinstance(schema, dict) or schema.get("type") != "str":
            return False
        own = schema.get("strip_whitespace")
        if own is not None:
            return bool(own)
        return bool(self._config.config_dict.get("str_strip_whitespace"))

    def str_schema(self, schema: core_schema.StringSchema) -> JsonSchemaValue:
        """A compiled pattern is validated by Python's `re` with its flags, which pydantic
        leaves out of the schema (under `re.VERBOSE` its spaces are not text, yet a provider
        would write them). They go inline, `(?x)`, as Python reads them: ECMA-262 (the
        providers' syntax) has none, so a dialect that keeps patterns removes this one with a
        note, as it does any in a syntax of the type's own."""
        json_schema = super().str_schema(schema)
        pattern = schema.get("pattern")
        if isinstance(pattern, re.Pattern) and isinstance(json_schema.get("pattern"), str):
            flags = "".join(letter for flag, letter in _INLINE_FLAGS if pattern.flags & flag)
            if flags:
                json_schema["pattern"] = f"(?{flags}){json_schema['pattern']}"
        return json_schema

    def generate(
        self, schema: core_schema.CoreSchema, mode: JsonSchemaMode = "validation"
    ) -> JsonSchemaValue:
        """Pydantic's schema, with each tagged union's tag required in its branches
        (`_TagsRequired`). A type left out whole (`SkipJsonSchema[int]`) is refused
        (`_NothingShown`), as is an enum an answer reaches none of whose values validation
        reads back (`enum_schema`), a `Literal` an answer reaches with a value validation
        does not read back (`literal_schema`), a required field left out that an answer
        must hold (`_shown_skipped`), and a schema the type's own code wrote that no answer
        validates against (`_judge_declared`, `_judge_required`). An error the caller's own
        code raises as the schema is written (a `json_schema_extra` callable, a
        `__get_pydantic_json_schema__`) is a `_CodeFailed` naming it and the field it was in,
        not a traceback out of pydantic."""
        self._root, self._tagged_refs = schema, None
        try:
            json_schema = super().generate(schema, mode)
        except PydanticOmit:
            raise _NothingShown() from None
        except (PydanticUserError, RecursionError, *_REFUSALS):
            raise  # said by `type_schema` and `_build`
        except Exception as error:
            if isinstance(error, KeyError) and _points_nowhere(error):
                raise  # pydantic's own, said by `type_schema`
            failed = self._failed_in
            doing = (
                f"writing the JSON Schema of its field `{failed[1]}`"
                if failed is not None and failed[0] is error
                else "writing its JSON Schema"
            )
            hooks = "a `json_schema_extra` or a `__get_pydantic_json_schema__`"
            raise _CodeFailed(doing, error, hooks) from error
        if self._unread_enums:
            unread = self._first_reached(schema, self._unread_enums, _EnumUnread.narrowed)
            if unread is not None:
                raise unread
        if self._unread_literals:
            refused = self._first_reached(schema, self._unread_literals, _LiteralUnread.narrowed)
            if refused is not None:
                raise refused
        if self._skipped_required:
            skipped = self._shown_skipped(schema)
            if skipped is not None:
                raise _SkippedRequired(skipped)
        if self._overridden:
            overridden = self._first_reached(schema, self._overridden, _narrowed)
            if overridden is not None:
                raise overridden
        return _TagsRequired(json_schema).run() if self._tagged else json_schema

    def union_schema(self, schema: core_schema.UnionSchema) -> JsonSchemaValue:
        """A plain union whose ref a tagged union holds too is written as that tagged union.

        A recursive `TypeAliasType` of a tagged union leaves pydantic's core schema with both
        under one ref (plain within the recursion, which pydantic never tags), and pydantic
        writes the ref's definition from whichever it meets first: the plain one's `anyOf`
        required no tag, though validation where the type is tagged cannot pick a branch
        without it. Every answer the tagged union's schema allows, the plain union reads."""
        ref = schema.get("ref")
        if isinstance(ref, str) and self._root is not None:
            if self._tagged_refs is None:
                self._tagged_refs = _tagged_unions(self._root)
            tagged = self._tagged_refs.get(ref)
            if tagged is not None:
                return self.tagged_union_schema(tagged)
        json_schema = super().union_schema(schema)
        if json_schema.get("anyOf") == []:
            # Pydantic skips a choice whose schema cannot be written (`Callable`,
            # `type[...]`), and none was left: no answer would validate. The first such
            # choice is refused as it would be alone.
            for choice in core_schema.iter_union_choices(schema):
                with contextlib.suppress(PydanticOmit):
                    self.generate_inner(choice)
        return json_schema

    def is_subclass_schema(self, schema: core_schema.IsSubclassSchema) -> JsonSchemaValue:
        """A class (`type[int]`) cannot be written, as a `Callable` cannot: pydantic's
        schema (`{}`) lets any answer by, and validation from JSON refuses every one
        ("Cannot check `issubclass` when validating from json")."""
        return self.handle_invalid_for_json_schema(
            schema, f"core_schema.IsSubclassSchema ({schema['cls']})"
        )

    def tagged_union_schema(self, schema: core_schema.TaggedUnionSchema) -> JsonSchemaValue:
        """A tagged union, marked with the property that holds its tag (`_TAG_MARK`):
        validation reads the branch from that key and fails without it, whatever default
        the branch gives the field, so `generate` makes it required in every branch. A
        callable `Discriminator` names no property: its union is left as pydantic writes it.

        A tag field with an alias is a list of names to pydantic (`[["kind"], ["type"]]`:
        the field's, then its alias), written as a discriminator only if one of them is a
        property of every branch; a branch not yet written (within a recursive union) makes
        pydantic write none, so the tag went optional. Such a union is marked with the
        names (`_tag_names`), and each branch requires the first it declares once every
        branch is written (`_TagsRequired._require_declared`)."""
        json_schema = super().tagged_union_schema(schema)
        discriminator = json_schema.get("discriminator")
        tag: str | list[str] | None = (
            discriminator.get("propertyName")
            if isinstance(discriminator, dict)
            else _tag_names(schema["discriminator"])
        )
        if isinstance(tag, str | list) and isinstance(json_schema.get("oneOf"), list):
            json_schema[_TAG_MARK] = tag
            self._tagged = True
        return json_schema

    def definitions_schema(self, schema: core_schema.DefinitionsSchema) -> JsonSchemaValue:
        """Keeps the definitions, which a map's keys may refer to (`_key_reader`)."""
        self._core_definitions.update(
            (definition["ref"], definition)
            for definition in schema["definitions"]
            if "ref" in definition
        )
        return super().definitions_schema(schema)

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        """A map's schema (`_map_schema`). Its keys are read from JSON's keys, which are
        text, and `_key_names` says which of a `Literal`'s it reads, so a `Literal` among
        them is not refused as a value's is (`literal_schema`)."""
        json_schema = self._map_schema(schema)
        keys = schema.get("keys_schema")
        if keys is not None and self._unread_literals:
            for node in _nodes_within(keys):
                self._unread_literals.pop(id(node), None)
        return json_schema

    def _map_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        """A map's keys as JSON writes them (text) where pydantic's schema would leave them
        unsaid (`_key_names`): pydantic says nothing of keys read as numbers, booleans or
        through `Optional`, so a provider would take any key for enforced. No dialect keeps
        `propertyNames`, so each says the keys are not enforced. A map keyed by a type no
        key is read as (a tuple, a model) is refused (`_KeysUnread`). A map keyed by naive
        datetimes keeps its values' schema under `additionalProperties`, its keys' pattern
        in `propertyNames`: pydantic would make the pattern a `patternProperties`, which
        most dialects drop, values and all."""
        keys = schema.get("keys_schema")
        if keys is None or self.mode != "validation":
            return super().dict_schema(schema)
        reader, by_code = self._key_reader(keys)
        names = _key_names(reader, by_code, self._key_reader)
        if reader.get("type") == "datetime" and reader.get("tz_constraint") == "naive":
            aware: core_schema.CoreSchema = {**reader, "tz_constraint": None}
            json_schema = super().dict_schema({**schema, "keys_schema": aware})
            json_schema["propertyNames"] = {"pattern": NAIVE_DATETIME_PATTERN}
            return json_schema
        marked = _marked_text(reader)
        if marked is not None:
            # Pydantic would make the pattern a `patternProperties`, as for naive keys.
            json_schema = super().dict_schema({**schema, "keys_schema": core_schema.str_schema()})
            json_schema["propertyNames"] = {k: v for k, v in marked.items() if k != "type"}
            return json_schema
        json_schema = super().dict_schema({**schema, "keys_schema": reader})
        if names is not None:
            json_schema["propertyNames"] = names
        elif not (
            "propertyNames" in json_schema
            or "patternProperties" in json_schema
            or _any_text(reader)
            or reader.get("type") == "union"  # `None`: one of its choices reads any text
        ):
            # Keys read otherwise than as text, in a way no schema of text can say.
            json_schema["propertyNames"] = dict(_UNSAID_KEYS)
        return json_schema

    def _key_reader(self, keys: core_schema.CoreSchema) -> tuple[core_schema.CoreSchema, bool]:
        """The schema that reads a map's keys, and whether a validator reads them first.

        JSON writes no key `null` (the key "null" is text), so an `Optional` key reads what
        its type does; a root model reads its root; a validator after it or a default does
        not change which keys are read. One before it (or around it) does: it may read a
        key the type alone cannot."""
        by_code = False
        followed: set[str] = set()  # a root model may hold itself
        while True:
            kind = keys.get("type")
            ref = keys.get("schema_ref")
            if kind == "definition-ref" and ref in self._core_definitions and ref not in followed:
                followed.add(ref)
                keys = self._core_definitions[ref]
            elif kind in _SEE_THROUGH or (kind == "model" and keys.get("root_model")):
                keys = keys["schema"]
            elif kind in _READ_BY_CODE and "schema" in keys:
                by_code = True
                keys = keys["schema"]
            else:
                return keys, by_code


def _tag_names(discriminator: Any) -> list[str] | None:
    """The names a tagged union's core discriminator may read its tag from, in pydantic's
    order: a field's name, or a list of one-name paths (the field's name, its alias).
    `None` for a callable or a path of more than one step, which name no single property."""
    if isinstance(discriminator, str):
        return [discriminator]
    if not isinstance(discriminator, list) or not discriminator:
        return None
    names: list[str] = []
    for path in discriminator:
        if not (isinstance(path, list) and len(path) == 1 and isinstance(path[0], str)):
            return None
        names.append(path[0])
    return names


def _tagged_unions(core: Any) -> dict[str, core_schema.TaggedUnionSchema]:
    """The tagged unions of a core schema that hold a ref, by ref, but those whose
    discriminator is a callable (it names no property, so nothing is required)."""
    found: dict[str, core_schema.TaggedUnionSchema] = {}
    seen: set[int] = set()
    stack: list[Any] = [core]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict | list) or id(node) in seen:
            continue
        seen.add(id(node))  # a node pydantic shares is walked once
        if isinstance(node, list):
            stack.extend(node)
            continue
        ref = node.get("ref")
        if (
            node.get("type") == "tagged-union"
            and isinstance(ref, str)
            and not callable(node.get("discriminator"))
        ):
            found.setdefault(ref, typing.cast(core_schema.TaggedUnionSchema, node))
        stack.extend(node.values())
    return found


_TAG_MARK = "x-allama-tagged-by"
"""Marks, while pydantic writes a schema, a tagged union (`oneOf`) by its tag's property
(or the names it may be, `_tag_names`); `_TagsRequired` reads and removes it."""
_DEFS = "#/$defs/"


class _TagsRequired:
    """A schema whose tagged unions (`_TAG_MARK`) require their tag in each branch.

    Pydantic leaves a field with a default out of `required`, the tag's too, so a provider
    is told it may leave it out (OpenAI strict: write `null`), yet a tagged union's
    validation cannot pick a branch without it. A branch is mostly a `$ref` to a definition
    that other places may use with the tag optional, so the branch gets a copy of the
    definition requiring it (a variant), and the definition stays as it is; one that no
    longer serves anything else is dropped, and its variant takes its name."""

    def __init__(self, root: JsonSchemaValue) -> None:
        self.root = root
        defs = root.get("$defs")
        self.defs: dict[str, Any] = dict(defs) if isinstance(defs, dict) else {}
        self.variants: dict[tuple[str, frozenset[str]], str] = {}
        self.origins: dict[str, tuple[str, frozenset[str]]] = {}
        self.pending: list[str] = list(self.defs)
        self.marked = False

    def run(self) -> JsonSchemaValue:
        body = self._fix({key: value for key, value in self.root.items() if key != "$defs"})
        while self.pending:
            name = self.pending.pop(0)
            self.defs[name] = self._fix(self.defs[name])
        if not self.marked:
            return self.root
        kept = self._reachable(body)
        renames = self._names(kept)
        body = _renamed(body, renames)
        out: dict[str, Any] = {}
        for key in self.root:  # in pydantic's order, `$defs` where it was
            if key in body:
                out[key] = body[key]
            elif key == "$defs" and kept:
                defs = {renames.get(name, name): self.defs[name] for name in kept}
                out["$defs"] = {name: _renamed(defs[name], renames) for name in sorted(defs)}
        return out

    def _names(self, kept: list[str]) -> dict[str, str]:
        """New names for the variants kept: a definition's own where it is no longer used
        (the tagged union was its only use), else `<name>Tagged`, `<name>Tagged2`..."""
        taken = {name for name in kept if name not in self.origins}
        renames: dict[str, str] = {}
        for variant in kept:
            if variant not in self.origins:
                continue
            base = self.origins[variant][0]
            fresh, count = base, 1
            while fresh in taken:
                fresh = f"{base}Tagged" if count == 1 else f"{base}Tagged{count}"
                count += 1
            taken.add(fresh)
            renames[variant] = fresh
        return renames

    def _fix(self, node: Any) -> Any:
        """`node` with each tagged union in it (inner ones first) requiring its tag."""
        if isinstance(node, list):
            return [self._fix(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = {key: _each_schema(key, value, self._fix) for key, value in node.items()}
        tag = node.get(_TAG_MARK)
        branches = node.get("oneOf")
        if not (isinstance(tag, str | list) and isinstance(branches, list)):
            return node
        self.marked = True
        del node[_TAG_MARK]
        if isinstance(tag, str):
            return self._in_branches(node, frozenset({tag}))
        required = [self._require_declared(branch, tag) for branch in branches]
        if any(new is not old for new, old in zip(required, branches, strict=True)):
            node = {**node, "oneOf": required}
        return node

    def _require_declared(self, branch: Any, names: list[str]) -> Any:
        """`branch` requiring the first of `names` it declares a property (through
        `$ref`s): the name validation finds its tag under, as the field's JSON name (its
        alias, or its own where aliases are not read) is the property pydantic writes.
        `branch` itself when it declares none."""
        resolved, followed = branch, set[str]()
        while isinstance(resolved, dict) and isinstance(resolved.get("$ref"), str):
            ref = resolved["$ref"]
            name = ref[len(_DEFS) :] if ref.startswith(_DEFS) else None
            if name is None or name not in self.defs or name in followed:
                break
            followed.add(name)
            resolved = self.defs[name]
        properties = resolved.get("properties") if isinstance(resolved, dict) else None
        if not isinstance(properties, dict):
            return branch
        tag = next((name for name in names if name in properties), None)
        return branch if tag is None else self._require(branch, frozenset({tag}))

    def _in_branches(self, node: dict[str, Any], tags: frozenset[str]) -> dict[str, Any]:
        """`node` whose union branches (and its discriminator's mapping to them) require
        `tags` (`_require`); `node` itself when nothing changes."""
        out = node
        for key in ("anyOf", "oneOf", "allOf"):
            branches = out.get(key)
            if isinstance(branches, list):
                required = [self._require(branch, tags) for branch in branches]
                if any(new is not old for new, old in zip(required, branches, strict=True)):
                    out = {**out, key: required}
        discriminator = out.get("discriminator")
        mapping = discriminator.get("mapping") if isinstance(discriminator, dict) else None
        if out is not node and isinstance(discriminator, dict) and isinstance(mapping, dict):
            mapped = {
                key: self._require({"$ref": value}, tags)["$ref"]
                if isinstance(value, str)
                else self._require(value, tags)
                for key, value in mapping.items()
            }
            out["discriminator"] = {**discriminator, "mapping": mapped}
        return out

    def _require(self, node: Any, tags: frozenset[str]) -> Any:
        """`node` (a union's branch) requiring those of `tags` it declares: through a
        `$ref` (to a variant) and into the branches of a union within; `node` itself when
        nothing changes."""
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS) and ref[len(_DEFS) :] in self.defs:
            name = self._variant(ref[len(_DEFS) :], tags)
            return node if _DEFS + name == ref else {**node, "$ref": _DEFS + name}
        out = self._in_branches(node, tags)
        properties = out.get("properties")
        listed = out.get("required", [])
        if isinstance(properties, dict) and isinstance(listed, list):
            missing = [name for name in properties if name in tags and name not in listed]
            if missing:
                now = {*listed, *missing}
                ordered = [name for name in properties if name in now]
                ordered += [name for name in listed if name not in properties]
                out = dict(sorted({**out, "required": ordered}.items()))
        return out

    def _variant(self, name: str, tags: frozenset[str]) -> str:
        """The definition that is `name`'s requiring `tags` too: `name` where it does, else
        a copy of its original's (made once for each set of tags)."""
        base, had = self.origins.get(name, (name, frozenset()))
        key = (base, had | tags)
        found = self.variants.get(key)
        if found is not None:
            return found
        fresh, count = f"{base}Tagged", 1
        while fresh in self.defs or fresh in self.origins:
            count += 1
            fresh = f"{base}Tagged{count}"
        self.variants[key] = fresh  # a definition that holds itself finds this one
        self.origins[fresh] = key
        content = self._require(self.defs[base], key[1])
        if content is self.defs[base]:
            del self.origins[fresh]
            self.variants[key] = base
            return base
        self.defs[fresh] = content
        self.pending.append(fresh)
        return fresh

    def _reachable(self, body: Any) -> list[str]:
        """The definitions `body` refers to, directly or through others, in `$defs` order."""
        seen: set[str] = set()
        stack = [body]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.startswith(_DEFS):
                    name = ref[len(_DEFS) :]
                    if name in self.defs and name not in seen:
                        seen.add(name)
                        stack.append(self.defs[name])
                for key, value in node.items():
                    _each_schema(key, value, stack.append)
        return [name for name in self.defs if name in seen]


_DATA_KEYWORDS = frozenset({"default", "const", "enum", "examples"})
"""Keywords whose values are data, not schemas: no tagged union or `$ref` is in them."""
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
"""Keywords whose values map names (which may be any keyword) to schemas."""


def _each_schema(key: str, value: Any, visit: Callable[[Any], Any]) -> Any:
    """The value of keyword `key` with `visit` applied to the schemas in it (data as is)."""
    if key in _DATA_KEYWORDS:
        return value
    if key in _NAMED_SCHEMAS and isinstance(value, dict):
        return {name: visit(schema) for name, schema in value.items()}
    if key == "discriminator" and isinstance(value, dict):  # its mapping's keys are tags
        mapping = value.get("mapping")
        if isinstance(mapping, dict):
            return {**value, "mapping": {tag: visit(each) for tag, each in mapping.items()}}
        return value
    return visit(value)


def _renamed(node: Any, renames: dict[str, str]) -> Any:
    """A fresh copy of `node` (no part shared with another), `$ref`s to `renames`'s
    definitions (and a discriminator's mapping to them) pointing to their new names."""
    if isinstance(node, list):
        return [_renamed(item, renames) for item in node]
    if not isinstance(node, dict):
        return node

    def renamed_ref(ref: Any) -> Any:
        if isinstance(ref, str) and ref.startswith(_DEFS):
            return _DEFS + renames.get(ref[len(_DEFS) :], ref[len(_DEFS) :])
        return ref

    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            out[key] = copy.deepcopy(value)
        elif key == "$ref":
            out[key] = renamed_ref(value)
        elif key == "discriminator" and isinstance(value, dict):
            mapping = value.get("mapping")
            out[key] = {**copy.deepcopy(value)}
            if isinstance(mapping, dict):
                out[key]["mapping"] = {
                    tag: renamed_ref(target)
                    if isinstance(target, str)
                    else _renamed(target, renames)
                    for tag, target in mapping.items()
                }
        else:
            out[key] = _each_schema(key, value, lambda schema: _renamed(schema, renames))
    return out


_INLINE_FLAGS = (
    (re.IGNORECASE, "i"),
    (re.MULTILINE, "m"),
    (re.DOTALL, "s"),
    (re.VERBOSE, "x"),
    (re.ASCII, "a"),
)
"""The flags of a compiled pattern that change what it matches, as Python writes them inline
(`re.UNICODE` is a text pattern's own; `re.DEBUG` matches as without it)."""
_FIELDS = frozenset({"model-field", "dataclass-field", "typed-dict-field"})
"""The core schemas of a field of a model, a dataclass or a TypedDict."""


def named_fields(node: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The fields of a model's, a TypedDict's or a dataclass's core schema of fields, each
    with its name (a model's are keyed by it, a dataclass's hold it); none for another."""
    fields = node.get("fields")
    if node.get("type") in ("model-fields", "typed-dict") and isinstance(fields, dict):
        return list(fields.items())
    if node.get("type") == "dataclass-args" and isinstance(fields, list):
        return [(str(each.get("name", "?")), each) for each in fields]
    return []


CLASS_KINDS = frozenset({"model", "dataclass", "typed-dict"})
"""The core schemas of a model, a dataclass or a TypedDict: whose `required` is judged, and
whose configuration holds for the fields within."""
_SEE_THROUGH = frozenset({"nullable", "default", "function-after", "custom-error"})
_READ_BY_CODE = frozenset({"function-before", "function-wrap"})
_UNIONS = frozenset({"union", "nullable", "tagged-union"})
"""The core schemas that read an answer by the first of their choices that reads it."""
_SAME_PLACE = _UNIONS | {
    "default",
    "function-after",
    "custom-error",
    "definitions",
    "definition-ref",
    "json-or-python",
    "chain",
    "lax-or-strict",
}
"""The core schemas whose inner schemas read the very value they read (a root model's too):
a union above them reads it first (`_first_reached`)."""
_Place = tuple[dict[str, Any], dict[str, Any] | None]
"""A union's core schema and the configuration it is read under (its owner's)."""
_NOT_READ = frozenset({"serialization", "metadata", "computed_fields", "default", "config"})
"""A core schema's keys that hold nothing validation reads an answer with."""
_UNREAD = frozenset(
    {"tuple", "list", "set", "frozenset", "dict", "typed-dict", "model", "dataclass", "none"}
)
"""Key types validation reads from no text: a tuple from an array, a model from an object."""
_UNSAID_KEYS: dict[str, Any] = {"type": "string"}
"""The names of keys read in a way a schema cannot say (by a validator, say): any text, and
noted as not enforced like every `propertyNames`."""


_ANY_EXPONENT = r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+)$"
"""The end of pydantic's decimal pattern: any numeral with an exponent."""
_NUMBER_KEY = "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$"
_KEY_NAMES: dict[str, dict[str, Any]] = {
    "int": {"pattern": "^[+-]?[0-9]+$"},
    "float": {"pattern": _NUMBER_KEY},
    "decimal": {"pattern": _NUMBER_KEY},
    "bool": {"enum": ["true", "false"]},
}
"""The keys of a map keyed by numbers or booleans, as JSON writes them."""


def _key_names(
    keys: core_schema.CoreSchema,
    by_code: bool,
    reader: Callable[[core_schema.CoreSchema], tuple[core_schema.CoreSchema, bool]],
) -> dict[str, Any] | None:
    """What the keys of a map keyed by `keys` (as `_key_reader` gives it) are, where they are
    not text: `None` for text (and for what pydantic describes itself, a text enum's
    members). A key is text in JSON: of a `Literal`'s or a plain `Enum`'s members,
    validation reads only text and booleans from it (an `IntEnum`'s numbers too); a map none
    of whose keys can be read is refused (`_KeysUnread`), since only an empty one would
    validate, unless a validator reads the keys first (it may read any)."""
    kind = keys.get("type")
    if kind in _KEY_NAMES:
        return dict(_KEY_NAMES[kind])
    if kind == "union":
        return _union_key_names(keys, by_code, reader)
    if kind in _UNREAD:
        inner = keys.get("schema")
        if by_code or (isinstance(inner, dict) and inner.get("type") in _READ_BY_CODE):
            return dict(_UNSAID_KEYS)
        raise _KeysUnread(keys)
    if kind == "literal":
        expected = keys.get("expected", [])
        if all(isinstance(value, str) for value in expected):
            return None
        read = [value for value in expected if isinstance(value, str | bool)]
    elif kind == "enum":
        values = [member.value for member in keys.get("members", [])]
        if keys.get("sub_type") == "str" or all(isinstance(value, str) for value in values):
            return None
        numbers = keys.get("sub_type") in ("int", "float")
        read = values if numbers else [value for value in values if isinstance(value, str | bool)]
    else:
        return None
    if not read:
        if by_code:
            return dict(_UNSAID_KEYS)
        raise _KeysUnread(keys)
    return {"enum": [_key_text(value) for value in read]}


def _union_key_names(
    keys: core_schema.CoreSchema,
    by_code: bool,
    reader: Callable[[core_schema.CoreSchema], tuple[core_schema.CoreSchema, bool]],
) -> dict[str, Any] | None:
    """The keys a union reads: any text where one of its choices does, else those of its
    choices that read any (pydantic says nothing of a union's keys)."""
    found: list[dict[str, Any]] = []
    for choice in core_schema.iter_union_choices(keys):  # type: ignore[arg-type]
        branch, branch_by_code = reader(choice)
        if _any_text(branch):
            return None
        try:
            names = _key_names(branch, by_code or branch_by_code, reader)
        except _KeysUnread:
            continue
        if names is None:
            names = _text_names(branch)
        if names not in found:
            found.append(names)
    if not found:
        raise _KeysUnread(keys)
    return found[0] if len(found) == 1 else {"anyOf": found}


def _any_text(keys: core_schema.CoreSchema) -> bool:
    """Whether `keys` reads every text as a key (a `str` with no constraint, or `Any`)."""
    kind = keys.get("type")
    if kind == "any":
        return True
    return kind == "str" and not any(
        keys.get(limit) is not None for limit in ("pattern", "min_length", "max_length")
    )


def _text_names(keys: core_schema.CoreSchema) -> dict[str, Any]:
    """The keys a text `Literal` or enum reads, for a union's choice (which pydantic does not
    describe); any text for other text, which a union's schema cannot say."""
    if keys.get("type") == "literal":
        return {"enum": list(keys.get("expected", []))}
    if keys.get("type") == "enum":
        return {"enum": [member.value for member in keys.get("members", [])]}
    return dict(_UNSAID_KEYS)


class _SkippedRequired(TypeError):
    """A required field the schema leaves out (`SkipJsonSchema`): validation fails without
    it, and the provider is never asked for it."""

    def __init__(self, field_name: str) -> None:
        super().__init__(
            f"the field `{field_name}` is required but left out of its JSON Schema (a "
            "`SkipJsonSchema`), so no answer would validate; give it a default, or let the "
            "schema show it"
        )


class _DeclaredUnread(TypeError):
    """A schema the type's own code wrote (`WithJsonSchema`, `json_schema_extra`, a
    `__get_pydantic_json_schema__`) allowing only values its validation refuses from JSON
    (`_judge_declared`): every answer fails, every retry too."""

    def __init__(
        self,
        place: str | None,
        declared: dict[str, Any],
        reads: str,
        texts: tuple[str, ...],
        exact: bool,
    ) -> None:
        self.texts, self.exact = texts, exact
        shown = _cut(", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in declared.items()))
        where = f"the field `{place}`" if place is not None else "the type"
        named = declared.get("type")
        several = isinstance(named, list) and len(named) > 1
        none = (
            "none of those values"
            if exact
            else f"no JSON value of {'those types' if several else 'that type'}"
        )
        super().__init__(
            f"{where} declares `{shown}` in its JSON Schema (its own `WithJsonSchema`, "
            f"`json_schema_extra` or `__get_pydantic_json_schema__`), but validation reads "
            f"`{reads}` there, from {none}, so no answer would validate; drop the override, "
            "or read the value in a validator of the field (a `PlainValidator`, or one with "
            "`mode='before'`)"
        )

    def narrowed(self, reads: JsonReader) -> _DeclaredUnread | None:
        """This refusal, unless the union it is a choice of reads what it declares."""
        return self if refused(self.texts, self.exact, reads) else None


class _RequiredLeftOut(TypeError):
    """A required field the schema the type's own code wrote leaves out of `required` (a
    `json_schema_extra`, a `__get_pydantic_json_schema__`): an answer may leave it out."""

    def __init__(self, field_name: str) -> None:
        super().__init__(
            f"the field `{field_name}` is required, but its JSON Schema leaves it out of "
            "`required` (its own `json_schema_extra` or `__get_pydantic_json_schema__`), so an "
            "answer may leave it out, which validation refuses; give it a default, or keep it "
            "in `required`"
        )

    def narrowed(self, reads: JsonReader) -> _RequiredLeftOut:
        """This refusal, whatever union the class is a choice of."""
        return self


def _narrowed(
    refusal: _DeclaredUnread | _RequiredLeftOut, reads: JsonReader
) -> _DeclaredUnread | _RequiredLeftOut | None:
    """`refusal` where the union it is reached within reads an answer first (`_first_reached`)."""
    return refusal.narrowed(reads)


def _read_label(node: Any, definitions: dict[str, Any]) -> str:
    """How a message names what a core schema reads (`bool`, `int | None`, `Item`), through
    what reads the very value it reads (a default, a validator after it, a reference)."""
    for _ in range(_LABEL_DEPTH):
        kind = node.get("type")
        if kind in _FIELDS or kind in ("default", "function-after", "custom-error"):
            node = node["schema"]
        elif kind == "definition-ref" and node.get("schema_ref") in definitions:
            node = definitions[node["schema_ref"]]
        elif kind == "lax-or-strict":
            node = node["strict_schema"]
        elif kind == "json-or-python":
            node = node["json_schema"]
        elif kind == "nullable":
            return f"{_read_label(node['schema'], definitions)} | None"
        else:
            break
    return _key_label(node)


class _CodeFailed(TypeError):
    """An error raised as a type's validator or JSON Schema was built: the caller's own
    code run there (a `json_schema_extra` callable, a `__get_pydantic_json_schema__`, a
    `__get_pydantic_core_schema__`) failed. Its message is the caller's code's, not a
    model's, so it is shown: its first line, cut short (`_REASON_SHOWN`)."""

    def __init__(self, doing: str, error: Exception, hooks: str) -> None:
        reason = _cut(str(error).split("\n", 1)[0])
        raised = f"{type(error).__name__}: {reason}" if reason else type(error).__name__
        super().__init__(
            f"{doing} raised {raised} (code of the type's own runs there, such as {hooks})"
        )


_REASON_SHOWN = 200
"""The most of an error's message a refusal quotes (a `repr` of a large value may run on)."""


def _cut(reason: str) -> str:
    """`reason` on one line, cut short past `_REASON_SHOWN` characters."""
    reason = " ".join(reason.split())
    if len(reason) > _REASON_SHOWN:
        reason = f"{reason[: _REASON_SHOWN - 3]}... ({len(reason):,} characters)"
    return reason


_PYDANTICS_OWN = (
    CoreSchemaError,
    PydanticSerializationError,
    PydanticUndefinedAnnotation,
    PydanticImportError,
)
"""Pydantic's own errors (besides its `PydanticUserError`, said by `_unbuildable`) as it
builds a validator from what the type says: a constraint it cannot take (`pattern`, `gt`),
an example it cannot write as JSON. The caller's code did not fail there."""
_NESTED = re.compile(r"\n  (?=\w+: )")
"""Where pydantic-core's `SchemaError` says the next, inner, step of the build that failed."""
_FIELD = re.compile(r"""Field (['"])(.*)\1:""")


def _pydantic_failed(error: Exception) -> tuple[str, str | None]:
    """What pydantic says failed as it built a validator (`_PYDANTICS_OWN`), on one line,
    and the innermost field it was building, if known. A `SchemaError` nests every step
    of the build (`Error building "dataclass" validator:`, `Field 'code':`...): the last
    says what is wrong; a regex's is a heading, the pattern, markers under it and the
    error, said as `regex parse error: unclosed group in <the pattern>`."""
    if not isinstance(error, CoreSchemaError):
        reason = _cut(str(error).split("\n", 1)[0])
        return (f"{type(error).__name__}: {reason}" if reason else type(error).__name__), None
    steps = [step.removeprefix("SchemaError: ") for step in _NESTED.split(str(error))]
    fields = [found.group(2) for found in map(_FIELD.fullmatch, steps) if found is not None]
    lines = [line.strip() for line in steps[-1].splitlines() if line.strip(" ^")]
    if len(lines) > 1 and lines[0].endswith(":") and lines[-1].startswith("error: "):
        quoted = " ".join(lines[1:-1])
        said = f"{lines[0]} {lines[-1].removeprefix('error: ')}"
        reason = f"{said} in `{quoted}`" if quoted else said
    else:
        reason = " ".join(lines)
    return _cut(reason) or type(error).__name__, fields[-1] if fields else None


def _points_nowhere(error: KeyError) -> bool:
    """Whether `error` is pydantic's, failing to resolve a `$ref` that points nowhere."""
    return bool(error.args) and str(error.args[0]).startswith("#")


class _NothingShown(TypeError):
    """A type its JSON Schema leaves out whole (`SkipJsonSchema` over it, or over what it is
    made of): pydantic raises its `PydanticOmit`, an empty error, out of the schema."""

    def __init__(self) -> None:
        super().__init__(
            "the type is left out of its own JSON Schema (a `SkipJsonSchema` over it or over "
            "what it holds), so there is nothing to ask for; let the schema show it"
        )


class _KeysUnread(TypeError):
    """A map whose keys validation reads from no JSON key (all text): `Literal[1, 2]`,
    `tuple[str, str]`, a model."""

    def __init__(self, keys: core_schema.CoreSchema) -> None:
        super().__init__(
            f"its map keyed by `{_key_label(keys)}` reads no key JSON can write (a key is "
            "text, and validation reads none of these from text), so only an empty map would "
            "validate; key it by `str`, `int` or an `IntEnum`"
        )


def _key_label(keys: core_schema.CoreSchema) -> str:
    """How a message names a key type from its schema."""
    kind = keys.get("type")
    if kind == "literal":
        return f"Literal[{', '.join(repr(value) for value in keys.get('expected', []))}]"
    if kind == "union":
        choices = core_schema.iter_union_choices(keys)  # type: ignore[arg-type]
        return " | ".join(_key_label(choice) for choice in choices)
    if kind == "none":
        return "None"
    name = getattr(keys.get("cls"), "__name__", None)
    if isinstance(name, str):
        return name
    items = keys.get("items_schema")
    if isinstance(items, dict):
        items = [items]
    if isinstance(items, list):
        return f"{kind}[{', '.join(_key_label(item) for item in items)}]"
    return str(kind)


def _key_text(value: Any) -> str:
    """A literal as the key JSON writes for it."""
    value = getattr(value, "value", value)  # an enum member
    return value if isinstance(value, str) else json.dumps(value)


_INT64_END = 2**63
"""A flag reads 64-bit integers only (pydantic refuses a larger JSON number for it)."""
_FLAG_LISTED = 64
"""The most combinations a flag's schema lists (six flags); more are a range."""
FLAG_FORMAT = "flags"
"""Marks a flag's range that holds integers the flag refuses (bits of no member's), which
no provider enforces: each says so, as for `format: decimal`."""


def _flag_values(cls: type[enum.Flag]) -> dict[str, Any] | None:
    """The integers a flag reads from JSON, as its values are written (`None`: pydantic's
    list of members, for a flag of other values or a `_missing_` of its own).

    Any 64-bit integer is read by a flag that keeps unnamed bits (`KEEP`, an `IntFlag`'s)
    or reads them as plain integers (`EJECT`); a `STRICT` flag (a `Flag`'s) reads only
    combinations of its members' bits, `0` included, and a `CONFORM` one drops the other
    bits, so its values are those combinations too. A negative number is read as the
    positive one of the same bits (`-1` as every bit), so only an `EJECT` flag, which
    keeps it as it is, holds negative values; the others' schemas start at `0`."""
    own = getattr(cls._missing_, "__func__", None)
    if own is not getattr(enum.Flag._missing_, "__func__", None):
        return None
    members = cls.__members__.values()  # aliases and `0` too, which iterating leaves out
    if not all(type(member.value) is int and member.value >= 0 for member in members):
        return None
    boundary = getattr(cls, "_boundary_", None)  # Python's own, not in the stubs
    whole = getattr(cls, "_flag_mask_", None)
    if not isinstance(whole, int):
        return None
    if boundary is enum.KEEP:
        return {"type": "integer", "minimum": 0, "maximum": _INT64_END - 1}
    if boundary is enum.EJECT:
        return {"type": "integer", "minimum": -_INT64_END, "maximum": _INT64_END - 1}
    if boundary is not enum.STRICT and boundary is not enum.CONFORM:
        return None
    mask = whole & (_INT64_END - 1)
    if 2 ** mask.bit_count() <= _FLAG_LISTED:
        combined, part = [0], mask
        while part:  # every part of the mask, from the whole down
            combined.append(part)
            part = (part - 1) & mask
        return {"type": "integer", "enum": sorted(combined)}
    bounds: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": mask}
    if mask & (mask + 1):  # bits missing below the highest: integers between are refused
        bounds["format"] = FLAG_FORMAT
    return bounds


def flag_expected(cls: type[enum.Flag]) -> str | None:
    """What a flag's schema lists (`_flag_values`), as a failure says what it expects: the
    sums of its bits, `0` too, for a flag that reads only those (a `Flag`'s); the range for
    one that reads any integer (an `IntFlag`'s). Pydantic's own words list its members
    alone (`1, 2 or 4`), which steers a model away from `3`. `None` where the schema lists
    the members as pydantic does."""
    values = _flag_values(cls)
    if values is None:
        return None
    if getattr(cls, "_boundary_", None) in (enum.KEEP, enum.EJECT):
        return f"an integer from {values['minimum']} to {values['maximum']}"
    mask = int(getattr(cls, "_flag_mask_", 0)) & (_INT64_END - 1)
    bits = [str(1 << at) for at in range(mask.bit_length()) if mask >> at & 1]
    if len(bits) < 2:
        return " or ".join(["0", *bits])
    return f"a sum of any of {', '.join(bits[:-1])} and {bits[-1]}, or 0"


def _flag_description(cls: type[enum.Flag]) -> str:
    """What a flag's numbers mean: its schema lists combinations, or a range, not which
    member each bit is."""
    named = ", ".join(f"{name} = {member.value}" for name, member in cls.__members__.items())
    return f"Flags combined by adding their values: {named}"


STRIPPED_FORMAT = "strip-whitespace"
"""Marks a string whose type strips its whitespace before checking its length and pattern
(`strip_whitespace`, `str_strip_whitespace`), which no provider enforces: each says so, as
for `format: decimal`."""


def _mark_stripped(json_schema: JsonSchemaValue) -> None:
    """A stripped string's checks as far as a schema of the text written can hold them.

    Pydantic strips first, then checks: `" "` is too short for `min_length=1`, `" abc "` is
    3 characters for `max_length=3`. The text written is at least as long as what is
    checked, so `minLength` stays (wider: `" "` passes it), marked; `maxLength` would refuse
    `" abc "`, and a pattern (`^[a-z]+$`) the spaces around a value it matches: narrower,
    so they are removed (whether a pattern holds of the stripped text cannot be said of the
    text written), and the mark says the string is not held to them."""
    if not (json_schema.get("minLength") or "maxLength" in json_schema or "pattern" in json_schema):
        return
    json_schema.pop("maxLength", None)
    json_schema.pop("pattern", None)
    json_schema["format"] = STRIPPED_FORMAT


_DATE_SHAPE = (
    "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
)
_TIME_SHAPE = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?"
_OFFSET_SHAPE = "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
_SECONDS_SHAPE = "[0-9]+(\\.[0-9]{1,6})?S"
_CLOCK_SHAPE = (
    f"T([0-9]+H([0-9]+M)?({_SECONDS_SHAPE})?|[0-9]+M({_SECONDS_SHAPE})?|{_SECONDS_SHAPE})"
)
_DURATION_PATTERN = f"^[+-]?P(([0-9]+Y([0-9]+D)?|[0-9]+D)({_CLOCK_SHAPE})?|{_CLOCK_SHAPE})$"
"""An ISO 8601 duration as pydantic writes one (`P1Y35DT0.5S`, `-PT23H`), at least one part."""
_REAL_SHAPE = "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?"
COMPLEX_PATTERN = f"^[+-]?({_REAL_SHAPE}([+-]({_REAL_SHAPE})?[jJ])?|({_REAL_SHAPE})?[jJ])$"
"""A complex number as Python's `complex()` reads one written plainly (`1.5-2j`, `3`, `-j`);
it also reads what this leaves out (`(1+2j)`, `inf`, spaces around, `1_000`)."""
COMPLEX_FORMAT = "complex"
"""Marks a complex number's text, which no provider enforces: each says so, as for
`format: decimal` (its pattern is lost where a provider drops patterns)."""
DECIMAL_FORMAT = "decimal"
"""allama's mark of a constrained `Decimal` (its digits, places or bounds), which the
number's pattern does not say."""
_MOMENTS = {"date": "date", "datetime": "date-time", "time": "time", "timedelta": "duration"}
"""The format pydantic gives each core schema of a moment or a duration."""
_QUALIFIERS = ("bounded", "past", "future", "constrained")
MOMENT_FORMATS = {
    f"{qualifier}-{fmt}": fmt for qualifier in _QUALIFIERS for fmt in _MOMENTS.values()
}
"""Marks, by the format each stands for, a date, time or duration whose checks pydantic
leaves out of its schema, which no provider enforces: each says so, as for `format:
decimal`. `bounded-` for `le`, `ge`, `lt`, `gt` (`Field(ge=date(2020, 1, 1))`); `past-` and
`future-` for `PastDate`, `FutureDatetime` and the like; `constrained-` for a fixed offset,
a naive time, or fractions of a second past six digits refused (`microseconds_precision`)."""


def _marked_text(schema: core_schema.CoreSchema) -> JsonSchemaValue | None:
    """A complex number's schema, or a date's, time's or duration's with a check pydantic
    leaves unsaid (`MOMENT_FORMATS`): the text the type reads, as a pattern, and a mark no
    provider enforces; `None` for any other schema. An `AwareDatetime` is not marked:
    `format: date-time` is RFC 3339's, whose offset is required, as the type requires one."""
    kind = schema.get("type")
    if kind == "complex":
        return {"type": "string", "pattern": COMPLEX_PATTERN, "format": COMPLEX_FORMAT}
    fmt = _MOMENTS.get(kind) if isinstance(kind, str) else None
    if fmt is None:
        return None
    qualifier = _unsaid_check(schema)
    if qualifier is None:
        return None
    tz = schema.get("tz_constraint")
    offset = "" if tz == "naive" else _OFFSET_SHAPE if tz is not None else f"{_OFFSET_SHAPE}?"
    pattern = {
        "date": f"^{_DATE_SHAPE}$",
        "date-time": f"^{_DATE_SHAPE}T{_TIME_SHAPE}{offset}$",
        "time": f"^{_TIME_SHAPE}{offset}$",
        "duration": _DURATION_PATTERN,
    }[fmt]
    return {"type": "string", "pattern": pattern, "format": f"{qualifier}-{fmt}"}


def _unsaid_check(schema: core_schema.CoreSchema) -> str | None:
    """Which of `_QUALIFIERS` names the checks a moment's or duration's schema makes that
    its JSON Schema's format does not say (`None`: none). A time that must be aware is
    RFC 3339's `time`, whose offset is required; one that must be naive is not."""
    if any(schema.get(bound) is not None for bound in ("le", "ge", "lt", "gt")):
        return "bounded"
    now = schema.get("now_op")
    if now == "past" or now == "future":
        return str(now)
    tz = schema.get("tz_constraint")
    fixed = isinstance(tz, int) and not isinstance(tz, bool)
    if fixed or (tz == "naive" and schema.get("type") == "time"):
        return "constrained"
    if schema.get("microseconds_precision") == "error":
        return "constrained"
    return None


NAIVE_DATETIME_FORMAT = "naive-date-time"
"""Marks `NAIVE_DATETIME_PATTERN`, which checks the shape alone (`2024-02-31T00:00:00`
passes): no provider enforces this format, so each says the value is not fully held."""
NAIVE_DATETIME_PATTERN = f"^{_DATE_SHAPE}T{_TIME_SHAPE}$"
"""An ISO 8601 date and time with no offset, as `NaiveDatetime` reads it (from year 1)."""


def _json_number_safe(value: Any) -> bool:
    """Whether every float in `value` is finite (JSON has no NaN or infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_json_number_safe(item) for item in value)
    if isinstance(value, dict):
        return all(_json_number_safe(item) for item in value.values())
    return True


def _holds_a_set(value: Any) -> bool:
    if isinstance(value, set | frozenset):
        return True
    if isinstance(value, list | tuple):
        return any(_holds_a_set(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_a_set(item) for item in value.values())
    return False


def _build(tp: Any) -> TypeSchema:
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(tp)
    except (PydanticUserError, RecursionError):
        raise  # said by `type_schema`
    except _PYDANTICS_OWN as error:  # pydantic's, not the caller's code's: in its words
        raise _pydantic_refused(tp, error) from error
    except Exception as error:  # the caller's own code (`__get_pydantic_core_schema__`)
        failed = _CodeFailed("building its validator", error, "a `__get_pydantic_core_schema__`")
        raise TypeError(f"cannot extract `{type_label(tp)}`: {failed}") from error
    try:
        schema = adapter.json_schema(mode="validation", schema_generator=_StableDefaults)
    except _CodeFailed as failed:
        raise TypeError(f"cannot extract `{type_label(tp)}`: {failed}") from failed.__cause__
    except _REFUSALS as refused:
        raise TypeError(f"cannot extract `{type_label(tp)}`: {refused}") from None
    except _PYDANTICS_OWN as error:  # a deferred model's validator (`defer_build`) is built here
        raise _pydantic_refused(tp, error) from error
    unread = _read_by_path(adapter.core_schema)
    if unread:
        field_name, path = unread[0]
        raise TypeError(
            f"cannot extract `{type_label(tp)}`: the field `{field_name}` is read from "
            f"`{path}` (an `AliasPath`), which its JSON Schema cannot show, so no answer "
            "would validate; give it an alias of one name among its choices, or set "
            "`validate_by_name=True`"
        )
    label = type_label(tp)
    title = schema.get("title")
    name = schema_name(title if isinstance(title, str) and typing.get_origin(tp) is None else label)
    return TypeSchema(adapter=adapter, schema=schema, label=label, name=name)


def _pydantic_refused(tp: Any, error: Exception) -> TypeError:
    """The refusal of `tp` whose validator pydantic failed to build (`_PYDANTICS_OWN`), in
    pydantic's words, naming the field it was building."""
    reason, place = _pydantic_failed(error)
    doing = "its validator" if place is None else f"the validator of its field `{place}`"
    return TypeError(
        f"cannot extract `{type_label(tp)}`: pydantic failed to build {doing} ({reason})"
    )


def _read_by_path(core: Any) -> list[tuple[str, str]]:
    """The fields validated only from a path (`AliasPath`) a JSON Schema cannot show: the
    schema names the field, validation reads elsewhere. A choice of one name is what the
    schema shows; a configuration that validates by name reads the field's own name."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, Any, str]] = [(core, None, "")]
    while stack:
        node, config, owner = stack.pop()
        if isinstance(node, list):
            stack.extend((item, config, owner) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("config"), dict):
            config = node["config"]
        owner = getattr(node.get("cls"), "__name__", owner)
        named = named_fields(node)
        by_name = isinstance(config, dict) and bool(
            config.get("validate_by_name") or config.get("populate_by_name")
        )
        for name, spec in named:
            alias = spec.get("validation_alias") if isinstance(spec, dict) else None
            if alias is not None and not by_name and not _one_name(alias, name):
                path = alias[0] if alias and isinstance(alias[0], list) else alias
                steps = "".join(
                    f"[{step}]" if isinstance(step, int) else f".{step}" for step in path
                )
                found.append((f"{owner}.{name}" if owner else str(name), steps.lstrip(".")))
        stack.extend((value, config, owner) for value in node.values())
    return found


def _one_name(alias: Any, name: Any) -> bool:
    """Whether a validation alias (core schema's: a name, a path, or a list of paths) has a
    choice of one name, which the JSON Schema shows. An `AliasPath` of one step alone is
    not shown (the schema names the field): a name only where it is the field's own."""
    if isinstance(alias, str):
        return True
    if alias and isinstance(alias[0], list):
        return any(len(path) == 1 and isinstance(path[0], str) for path in alias)
    return len(alias) == 1 and alias[0] == name


_CACHED_TYPES = 512


@lru_cache(maxsize=_CACHED_TYPES)
def _unread_values(cls: Any, texts: tuple[str, ...]) -> frozenset[str]:
    """The JSON texts of an enum's listed values that its validation refuses. Pydantic
    lists each value's JSON (`"0.20"` for `Decimal("0.20")`, `[0, 0]` for `(0, 0)`), but
    JSON validation compares what it reads with the value itself, which only a `str`,
    number, `bool` or `None` equals, unless the enum's `_missing_` reads the text."""
    adapter: TypeAdapter[Any] = TypeAdapter(cls)
    unread: set[str] = set()
    for text in set(texts):
        try:
            adapter.validate_json(text)
        except ValidationError:
            unread.add(text)
    return frozenset(unread)


@lru_cache(maxsize=_CACHED_TYPES)
def _unread_literal_values(
    values: tuple[tuple[type, Any], ...], texts: tuple[str, ...]
) -> frozenset[int]:
    """The places of a `Literal`'s values (each with its type, so that `1` and `True`, which
    are equal, are kept apart in the cache) whose JSON text (`texts`, as pydantic lists
    them) JSON validation of that `Literal` refuses: it compares what it reads with the
    values themselves, which a plain `Enum`'s member or `bytes` never equals."""
    validator = SchemaValidator(core_schema.literal_schema([value for _, value in values]))
    unread: set[int] = set()
    for at, text in enumerate(texts):
        try:
            validator.validate_json(text)
        except ValidationError:
            unread.add(at)
    return frozenset(unread)


def _json_reader(
    schema: dict[str, Any],
    config: dict[str, Any] | None,
    definitions: dict[str, Any],
    copied: dict[str, tuple[Any, list[str]]],
) -> JsonReader:
    """Whether validation of the core schema `schema` (a union's, read under `config`, its
    references among `definitions`) reads a JSON text, strictly, as an answer is read: its
    other choices may read a value one choice refuses. It is built from a copy that runs
    none of the caller's code (`_without_code`), since this is asked as the schema is
    built, not as an answer is read; `copied` keeps the definitions copied so far.

    The union itself is read inline: a `TypeAliasType` used once is inlined by pydantic
    with its ref, which no definition holds. Where validation cannot be built, or fails
    otherwise than by refusing the text, the value is not known to be read: not read, so
    the refusal stands."""
    refs: list[str] = []
    inner: Any = _without_code(schema, refs)
    needed: dict[str, Any] = {}
    while refs:
        ref = refs.pop()
        if ref in needed or ref not in definitions:
            continue
        if ref not in copied:
            within: list[str] = []
            copied[ref] = (_without_code(definitions[ref], within), within)
        needed[ref], within = copied[ref]
        refs.extend(within)
    if needed:
        inner = core_schema.definitions_schema(inner, list(needed.values()))
    try:
        # Not a model's or a dataclass's own validator (prebuilt), which would run its code.
        validator = SchemaValidator(
            inner, cast(core_schema.CoreConfig | None, config), _use_prebuilt=False
        )
    except Exception:  # not to be told: the refusal stands
        return JsonReader(None)
    return JsonReader(validator)


_FUNCTIONS = frozenset({"function-after", "function-before", "function-wrap", "function-plain"})
"""The core schemas that run a function, the caller's or pydantic's own (`_without_code`)."""
_KEPT_AS_IS = _NOT_READ | {"expected", "members", "cls"}
"""A core schema's keys that hold no core schema to copy (`_without_code`): values, classes."""
_BUILT = frozenset({"model", "dataclass"})
"""The core schemas that build their class from what their `schema` reads (`_without_code`)."""
_PYDANTIC_MODULES = frozenset({"pydantic", "pydantic_core"})
"""The packages whose functions in a core schema are pydantic's own (`_pydantics_own`)."""
_VALUE_MODULES = frozenset(
    {"builtins", "collections", "datetime", "decimal", "enum", "fractions", "ipaddress"}
    | {"pathlib", "re", "typing", "uuid", "zoneinfo"}
)
"""The standard library's modules whose classes pydantic reads a value with (an address
is read by `ipaddress.IPv4Address`): making one of a value runs none of the caller's code
and nothing else (`_pydantics_own`), unlike a class of another module (`subprocess.Popen`)."""
_DATA = (str, bytes, int, float, complex, type(None), decimal.Decimal, re.Pattern)
"""What a function of pydantic's may hold that runs no code (`_pydantics_own`)."""


def _top_module(found: Any) -> str:
    """The package `found` was defined in: `pydantic` for `pydantic._internal._validators`,
    not for a module of the caller's named `pydantic_models`."""
    module = getattr(found, "__module__", None)
    return module.partition(".")[0] if isinstance(module, str) else ""


def _pydantics_own(found: Any, seen: dict[int, Any] | None = None) -> bool:
    """Whether `found`, a validator's function in a core schema, is pydantic's own code, or
    a class of the standard library it reads with (`ipaddress.IPv4Address`): it reads a
    value as validation does, and runs none of the caller's code, so `_without_code` keeps
    it. What it holds (its closure, a `partial`'s arguments, a method's class) is looked
    into: pydantic's own function may call the caller's (an `annotated_types.Predicate`,
    a subclass of `HttpUrl` or `Secret`), which is the caller's code."""
    seen = {} if seen is None else seen
    if id(found) in seen:  # looked into, or being looked into
        return True
    seen[id(found)] = found  # kept, so that its id is not another's
    if isinstance(found, _DATA):
        return True
    if isinstance(found, list | tuple | set | frozenset):
        return all(_pydantics_own(item, seen) for item in found)
    if isinstance(found, dict):
        return all(_pydantics_own(item, seen) for item in (*found, *found.values()))
    if isinstance(found, partial):
        held = (found.func, found.args, found.keywords)
        return all(_pydantics_own(item, seen) for item in held)
    if isinstance(found, types.MethodType):
        return _pydantics_own(found.__func__, seen) and _pydantics_own(found.__self__, seen)
    if isinstance(found, type):
        module = _top_module(found)
        return module in _PYDANTIC_MODULES or module in _VALUE_MODULES
    if isinstance(found, types.FunctionType):
        closure = [cell.cell_contents for cell in found.__closure__ or ()]
        defaults = (found.__defaults__ or (), found.__kwdefaults__ or {})
        return _top_module(found) in _PYDANTIC_MODULES and all(
            _pydantics_own(item, seen) for item in (*closure, *defaults)
        )
    if isinstance(found, types.BuiltinFunctionType):  # pydantic-core's, not a builtin
        return _top_module(found) == "pydantic_core"
    if _top_module(type(found)) in _PYDANTIC_MODULES:  # `Base64Str`'s, holding its encoder
        names = [*getattr(found, "__dataclass_fields__", {}), *getattr(found, "__dict__", {})]
        return all(_pydantics_own(getattr(found, name, None), seen) for name in names)
    return False  # a callable object of another's, say


def _without_code(schema: Any, refs: list[str]) -> Any:
    """A copy of a core schema whose validation runs none of the caller's code, adding to
    `refs` each definition it refers to. A validator of pydantic's own (`_pydantics_own`:
    an address's, an import string's) is kept: it is how the type reads a value. One of
    the caller's is left out: one `after` the value is read for what it wraps, which reads
    every value it is given; one `before` or `wrap`, which is given any value and may read
    it as it likes (a member's JSON as a model), and a `plain` one, read as any value: what
    they read is not known without running them. A tagged union picking its choice by a
    function is a plain union of its choices; a model's `__init__` and `model_post_init`,
    a dataclass's `__post_init__`, a default's factory and a validated call are not run.
    An enum's `_missing_` is, as it is for the enum's own values (`_unread_values`): it is
    how the enum reads a value."""
    copies: dict[int, Any] = {}

    def copy_of(node: Any) -> Any:
        if isinstance(node, list | tuple):
            return [copy_of(item) for item in node]
        if not isinstance(node, dict):
            return node
        if id(node) in copies:
            return copies[id(node)]
        kind = node.get("type")
        ref = node.get("ref")
        made: Any
        if kind in _FUNCTIONS and not _pydantics_own(_function_in(node)):
            wrapped = node.get("schema")
            after = kind == "function-after" and isinstance(wrapped, dict)
            made = copy_of(wrapped) if after else core_schema.any_schema()
        elif kind == "tagged-union" and callable(node.get("discriminator")):
            made = core_schema.union_schema(copy_of(list(node["choices"].values())))
        elif kind == "call" and isinstance(node.get("arguments_schema"), dict):
            made = copy_of(node["arguments_schema"])
        else:
            made = {
                key: value if key in _KEPT_AS_IS else copy_of(value) for key, value in node.items()
            }
            target = node.get("schema_ref")
            if kind == "definition-ref" and isinstance(target, str):
                refs.append(target)
            elif kind == "model":
                made["custom_init"] = False
                made.pop("post_init", None)
            elif kind == "dataclass":
                made["post_init"] = False
            elif kind == "default" and "default_factory" in node:
                made.pop("default_factory")
                made.pop("default_factory_takes_data", None)
                made["default"] = None
                made["validate_default"] = False
            if kind not in _BUILT or made["schema"].get("type") != "any":
                copies[id(node)] = made
                return made
            # A model's validator of the caller's before its fields reads any value: so does
            # the model, which cannot be built from what that copy reads.
            made = core_schema.any_schema()
        if isinstance(ref, str):  # what refers to the replaced schema reaches its copy
            made = core_schema.chain_schema([made], ref=ref)
        copies[id(node)] = made
        return made

    return copy_of(schema)


def _function_in(node: dict[str, Any]) -> Any:
    """The function a validator's core schema (`_FUNCTIONS`) runs."""
    function = node.get("function")
    return function.get("function") if isinstance(function, dict) else function


def _nodes_within(schema: Any) -> Iterator[Any]:
    """Every mapping within a core schema, itself included (not through a reference)."""
    seen: set[int] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list | tuple):
            stack.extend(node)
        elif isinstance(node, dict) and id(node) not in seen:
            seen.add(id(node))
            yield node
            stack.extend(node.values())


@lru_cache(maxsize=_CACHED_TYPES)
def _as_numbers(
    cls: Any, members: tuple[Any, ...], unread: frozenset[str], texts: tuple[str, ...]
) -> dict[str, str]:
    """The JSON number, by member name, that validation reads as each `Decimal` member
    whose listed text it refuses: pydantic lists `Decimal("1.5")` as `"1.5"`, which its
    validation never equals, but reads the number `1.5` as it (not `0.20`, which no
    float equals)."""
    adapter: TypeAdapter[Any] = TypeAdapter(cls)
    numbers: dict[str, str] = {}
    for member, text in zip(members, texts, strict=True):
        value = member.value
        if text not in unread or not isinstance(value, decimal.Decimal) or not value.is_finite():
            continue
        number = format(value, "f")
        try:
            read = adapter.validate_json(number)
        except ValidationError:
            continue
        if read is member:
            numbers[member.name] = number
    return numbers


class _EnumUnread(TypeError):
    """An enum some of whose listed values validation does not read back (`_unread_values`)."""

    _SHOWN = 3

    def __init__(self, cls: type[enum.Enum], unread: list[Any]) -> None:
        self.cls, self.unread = cls, unread
        named = list({member.name: (member, text) for member, text in unread}.values())
        shown = ", ".join(
            f"`{cls.__name__}.{member.name} = {member.value!r}` as `{text}`"
            for member, text in named[: self._SHOWN]
        )
        more = f" and {len(named) - self._SHOWN} more" if len(named) > self._SHOWN else ""
        kinds = "/".join(sorted({type(member.value).__name__ for member, _ in named}))
        super().__init__(
            f"the enum `{cls.__name__}` is listed by the JSON of its values ({shown}{more}), "
            f"which validation compares with the {kinds} values themselves and refuses, so "
            "no value of it would validate; give its members `str`, `int`, `float` or `bool` "
            "values, or read the JSON value in its `_missing_` or in a validator of the field "
            "(`mode='before'`)"
        )

    def narrowed(self, reads: Callable[[str], bool]) -> _EnumUnread | None:
        """This refusal without the values a union reads (`_json_reader`) where the enum is
        one of its choices; `None` if the union reads them all."""
        left = [(member, text) for member, text in self.unread if not reads(text)]
        if len(left) == len(self.unread):
            return self
        return _EnumUnread(self.cls, left) if left else None


class _LiteralUnread(TypeError):
    """A `Literal` some of whose values validation does not read back from their JSON
    (`_unread_literal_values`): a plain `Enum`'s member, `bytes`."""

    _SHOWN = 3

    def __init__(self, place: str | None, expected: list[Any], unread: list[Any]) -> None:
        self.place, self.expected, self.unread = place, expected, unread
        shown = ", ".join(
            f"`{_literal_value(value)}` as `{text}`" for value, text in unread[: self._SHOWN]
        )
        more = f" and {len(unread) - self._SHOWN} more" if len(unread) > self._SHOWN else ""
        where = f"in the field `{place}`" if place is not None else "of the type"
        one = len(unread) == 1
        refused = {id(value) for value, _ in unread}
        plain = ", ".join(
            repr(_plain(value)) if id(value) in refused else _literal_value(value)
            for value in expected
        )
        mixins = list(
            dict.fromkeys(
                _mixin(type(value)) for value, _ in unread if isinstance(value, enum.Enum)
            )
        )
        mixed = [mixin for mixin in mixins if mixin is not None]
        instead = f"the plain value{'' if one else 's'} (`Literal[{plain}]`)"
        if mixed:
            instead = f"a member of an enum with a mixin ({', '.join(mixed)}) or {instead}"
        super().__init__(
            f"a `Literal` {where} is listed by the JSON of its values ({shown}{more}), "
            "which validation compares with the values themselves and refuses, so no answer "
            f"holding {'it' if one else 'one of them'} would validate; use {instead}, or read "
            "the JSON value in a validator of the field (`mode='before'`)"
        )

    def narrowed(self, reads: Callable[[str], bool]) -> _LiteralUnread | None:
        """This refusal without the values a union reads (`_json_reader`) where the
        `Literal` is one of its choices (`Literal[Kind.CAT] | str` reads `"cat"`); `None`
        if the union reads them all."""
        left = [(value, text) for value, text in self.unread if not reads(text)]
        if len(left) == len(self.unread):
            return self
        return _LiteralUnread(self.place, self.expected, left) if left else None


def _literal_value(value: Any) -> str:
    """How a message names a `Literal`'s value: an enum member by its name (`Kind.CAT`)."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


def _plain(value: Any) -> Any:
    """The plain value a `Literal` would list in place of `value`, which it reads from
    JSON: an enum member's value, `bytes` as text."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _mixin(cls: type[enum.Enum]) -> str | None:
    """How an enum like `cls` whose members a `Literal` reads from JSON is written: with a
    `str` or `int` mixin, by its members' values. `None` for other values."""
    values = [member.value for member in cls.__members__.values()]
    if all(isinstance(value, str) for value in values):
        return f"`class {cls.__name__}(str, Enum)`"
    if all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        base = "IntFlag" if issubclass(cls, enum.Flag) else "IntEnum"
        return f"`class {cls.__name__}({base})`"
    return None


_REFUSALS = (
    _KeysUnread,
    _EnumUnread,
    _LiteralUnread,
    _SkippedRequired,
    _NothingShown,
    _DeclaredUnread,
    _RequiredLeftOut,
)
"""Why a type's schema, as written, is refused: each said as `cannot extract ...: <it>`."""


@lru_cache(maxsize=_CACHED_TYPES)
def _cached(tp: Any, spelling: str | None) -> TypeSchema:
    built = _build(tp)
    with _READ_ONLY_LOCK:
        while len(_READ_ONLY) >= 2 * _CACHED_TYPES:
            _READ_ONLY.pop(next(iter(_READ_ONLY)))
        _READ_ONLY[id(built.schema)] = _Listed(built.schema)
    return built


@dataclass(slots=True)
class _Listed:
    """A read-only schema and what has been derived from it, by kind."""

    schema: dict[str, Any]
    derived: dict[Hashable, Any] = field(default_factory=dict)


_READ_ONLY: dict[int, _Listed] = {}
"""The schemas of cached types, by identity. Nothing changes them after they are made, so
work derived from one (a dialect rewrite, say) is kept with it and found by identity
instead of by content. Entries hold their schema, so an identity is never reused while it
is listed; the oldest are dropped past twice the type cache, with what was derived from
them."""
_READ_ONLY_LOCK = threading.Lock()

V = TypeVar("V")


def derived(schema: dict[str, Any], kind: Hashable, make: Callable[[], V]) -> V:
    """What `make` derives from `schema`: kept with the schema of a cached type (which
    nothing changes) under `kind`, made afresh for any other schema."""
    listed = _READ_ONLY.get(id(schema))
    if listed is None or listed.schema is not schema:
        return make()
    try:
        value: V = listed.derived[kind]
    except KeyError:
        value = listed.derived[kind] = make()
    return value


def type_schema(tp: Any) -> TypeSchema:
    """The schema of `tp` as pydantic writes it for validation (`$defs` for nested models).

    Cached per type: building a validator is the expensive part of a first extraction. A
    type nested too deep for pydantic (or Python) to walk is a `SchemaError` naming it; one
    no extraction takes is a `TypeError` saying why, an error its own code raised as its
    validator or schema was built too (named, and kept as the cause), and one pydantic
    fails to build a validator of (a `pattern` it cannot parse), in pydantic's words.
    """
    try:
        try:
            hash(tp)
        except TypeError:  # an unhashable type expression: built each time, not cached
            return _build(tp)
        # (Asked apart from the build: a `TypeError` it raises, refusing the type, is the
        # caller's answer, not a reason to build it a second time.)
        # Type expressions compare equal across orderings (`Literal["b", "a"] ==
        # Literal["a", "b"]`), but their schemas list members in order: the spelling
        # keeps them apart. A class is its own key.
        return _cached(tp, None if isinstance(tp, type) else repr(tp))
    except RecursionError:
        label = type_label(tp)
        raise SchemaError(
            "", f"the type `{label}` nests too deep to build its JSON Schema"
        ) from None
    except PydanticUserError as error:
        raise TypeError(_unbuildable(tp, error)) from error
    except KeyError as error:
        # Pydantic resolves `$ref`s it finds anywhere in what it writes, a default's or
        # `json_schema_extra`'s keys included, and fails on one that points nowhere.
        if not _points_nowhere(error):
            raise
        raise TypeError(
            f"cannot extract `{type_label(tp)}`: pydantic failed to write its JSON Schema "
            f"(KeyError {error}; a default or `json_schema_extra` holding a `$ref` key does "
            "this)"
        ) from error


def _unbuildable(tp: Any, error: PydanticUserError) -> str:
    """Why `tp` cannot be extracted, in the caller's terms: pydantic's own message advises
    on a model's configuration, which is not what an extraction's caller can change."""
    reason = str(error).split("\n", 1)[0].split(". Set `arbitrary_types_allowed", 1)[0]
    what = (
        "its JSON Schema cannot be written, and a provider needs it"
        if isinstance(error, PydanticInvalidForJsonSchema)
        else "pydantic cannot validate it"
    )
    return (
        f"cannot extract `{type_label(tp)}`: {what} ({reason.rstrip('.')}); a type to extract "
        "is a pydantic model, a dataclass, a TypedDict, or a type such as `list[...]`, a "
        "`Literal` or an enum, made of types JSON can carry"
    )
