"""OpenAI strict structured outputs (Chat Completions, Responses, Azure, strict tools).

Every object closed, every property required, every node typed (an `enum` gets the type of
its values). An optional property becomes required and nullable: extraction removes those
stand-in `null`s before validating (`normalize_strict_nulls`), so the rewrite is exact and a
defaulted field never becomes mandatory for the model. `default` and `examples` are not sent
(OpenAI's SDK strips them; listed in `Rewrite.dropped`). Maps, open objects and untyped values
cannot be strict: those are `UNSUPPORTED` notes, and the schema is left as wide as the
original so that it can still be sent without `strict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from allama.schema._dialects._engine import Engine, admits_null
from allama.schema._limits import measure
from allama.schema._pointer import child, quoted
from allama.schema._rewrite import Rewrite

__all__ = ["OpenAIProfile", "openai_strict"]

OpenAIProfile = Literal["current", "azure_legacy", "fine_tuned", "xai"]

_BASE = frozenset({"type", "enum", "required"})


@dataclass(frozen=True, slots=True)
class _Limits:
    properties: int
    depth: int
    string_length: int
    enum_values: int
    big_enum_length: int


class _Current(Engine):
    provider: ClassVar[str] = "OpenAI strict mode"
    keep: ClassVar[frozenset[str]] = _BASE | {
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
    formats: ClassVar[frozenset[str] | None] = frozenset(
        {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
    )
    enum_kinds: ClassVar[frozenset[str]] = frozenset(
        {"string", "number", "integer", "boolean", "null"}
    )
    strict_shapes: ClassVar[bool] = True
    limits: ClassVar[_Limits] = _Limits(5000, 10, 120_000, 1000, 15_000)

    def shape(self, out: dict[str, Any], node: dict[str, Any], pointer: str) -> None:
        super().shape(out, node, pointer)
        props = out.get("properties")
        if not isinstance(props, dict):
            return
        required = list(node.get("required", ()))
        if "anyOf" in out:  # only when the union beside the properties could not be distributed
            self.unsupported(
                pointer,
                f"the object at {quoted(pointer)} mixes `properties` with a union, "
                f"which {self.provider} cannot make strict",
            )
            return
        given = node.get("properties")
        for name in props:
            if name not in required:
                if admits_null(props[name]) and _no_default(given, name):
                    # Its `null` is a value of its own, kept: an object that leaves it out
                    # (a TypedDict's `NotRequired[X | None]`) is one the model cannot write.
                    place = child(child(pointer, "properties"), name)
                    at = quoted(place)
                    self.approximated(
                        place,
                        f"the optional property at {at} admits `null` and has no default: "
                        "it is sent required, so an object without it cannot be produced",
                    )
                props[name] = _nullable(props[name])
        undeclared = [name for name in required if name not in props]
        for name in undeclared:
            self.unsupported(
                pointer,
                f"the object at {quoted(pointer)} requires `{name}`, which it does not declare",
            )
        out["required"] = [*props, *undeclared]

    def finish(self, out: dict[str, Any]) -> None:
        root = out
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            root = self.defs.get(ref[len("#/$defs/") :].replace("~1", "/").replace("~0", "~"), {})
        if not isinstance(root, Mapping) or root.get("type") != "object":
            self.unsupported(
                "",
                f"the root at {quoted('')} is not an object, which {self.provider} requires",
            )
        size, cap = measure(out), self.limits
        checks = (
            (size.properties, cap.properties, "object properties"),
            (size.depth, cap.depth, "levels of object nesting"),
            (size.string_length, cap.string_length, "characters of names and enum values"),
            (size.enum_values, cap.enum_values, "enum values"),
            (size.largest_string_enum, cap.big_enum_length, "characters in one large enum"),
        )
        for have, limit, what in checks:
            if have > limit:
                self.unsupported(
                    "",
                    f"the schema at {quoted('')} has {have} {what}, "
                    f"more than the {limit} {self.provider} allows",
                )


class _AzureLegacy(_Current):
    provider: ClassVar[str] = "Azure OpenAI strict mode"
    keep: ClassVar[frozenset[str]] = _BASE
    formats: ClassVar[frozenset[str] | None] = frozenset()
    limits: ClassVar[_Limits] = _Limits(100, 5, 15_000, 500, 7_500)


class _FineTuned(_Current):
    """OpenAI's fine-tuned models: the keywords the current subset added since 2024 are
    "not for fine-tuned models" (pattern, formats, numeric and array bounds)."""

    provider: ClassVar[str] = "OpenAI strict mode for fine-tuned models"
    keep: ClassVar[frozenset[str]] = _BASE
    formats: ClassVar[frozenset[str] | None] = frozenset()


class _Xai(_Current):
    """xAI's strict outputs: `$ref`s that do not recur, and its own list of formats (others
    are accepted and not enforced)."""

    provider: ClassVar[str] = "xAI strict mode"
    formats: ClassVar[frozenset[str] | None] = frozenset(
        {"date", "time", "date-time", "email", "uuid", "ipv4", "ipv6", "uri"}
    )
    recursion: ClassVar[bool] = False


_ENGINES: dict[str, type[_Current]] = {
    "current": _Current,
    "azure_legacy": _AzureLegacy,
    "fine_tuned": _FineTuned,
    "xai": _Xai,
}


def _no_default(properties: Any, name: str) -> bool:
    """Whether the original property `name` has no `default` (leaving it out is a value of
    its own, not the default's)."""
    given = properties.get(name) if isinstance(properties, Mapping) else None
    return isinstance(given, Mapping) and "default" not in given


def _nullable(schema: Any) -> Any:
    """`schema` widened by `null` (a stand-in for leaving an optional property out)."""
    if admits_null(schema):
        return schema
    if isinstance(schema, dict):
        if "type" in schema and not any(k in schema for k in ("enum", "anyOf", "$ref", "not")):
            kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            return {**schema, "type": [*kinds, "null"]}
        if set(schema) - {"title", "description"} == {"anyOf"}:
            return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def openai_strict(schema: Mapping[str, Any], *, profile: OpenAIProfile = "current") -> Rewrite:
    """`schema` in OpenAI's strict subset, with notes on what it widened or cannot hold.

    `profile="azure_legacy"` applies the older rules Azure OpenAI still documents: no
    `pattern`, `format`, numeric or array bounds, and the smaller limits (100 properties,
    5 levels); `"fine_tuned"` the keywords of OpenAI's fine-tuned models (none of those,
    the current limits); `"xai"` xAI's (no recursion, its formats). Raises `SchemaError`
    for a schema that is not valid JSON Schema.

    >>> openai_strict({"type": "object", "properties": {"n": {"type": "integer"}}}).schema
    {'type': 'object', 'properties': {'n': {'type': ['integer', 'null']}}, \
'additionalProperties': False, 'required': ['n']}
    """
    return _ENGINES[profile](schema).run()
