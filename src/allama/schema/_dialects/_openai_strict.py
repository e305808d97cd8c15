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
from typing import Any, ClassVar, Literal, cast

from allama.schema._dialects._engine import Engine, admits_null
from allama.schema._limits import measure
from allama.schema._pointer import child, quoted
from allama.schema._resolve import admits_null as may_be_null
from allama.schema._rewrite import Rewrite

__all__ = ["OpenAIProfile", "openai_strict"]

OpenAIProfile = Literal["current", "azure_legacy", "fine_tuned", "xai", "deepseek", "groq"]

_BASE = frozenset({"type", "enum", "required"})
_XAI_BOUNDS = {
    "minLength": (2048, "characters"),
    "maxLength": (2048, "characters"),
    "minItems": (256, "items"),
    "maxItems": (256, "items"),
    "minProperties": (64, "properties"),
    "maxProperties": (64, "properties"),
}
"""The bounds xAI enforces, up to a value; above it they are accepted, not enforced."""


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
    limits_of: ClassVar[str | None] = None
    """Whose documented `limits` these are, when not the provider's own (assumed for it)."""

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
        given = given if isinstance(given, Mapping) else {}
        root = cast(dict[str, Any], self.index.root)  # a plain copy (`Engine.__init__`)
        for name in props:
            if name not in required:
                original = given.get(name)
                # Whether `null` is valid is asked of the original, `$ref`s followed.
                if _no_default(original) and may_be_null(original, root):
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
        # Strict mode takes no `required` name an object does not declare, closed or not.
        self.required_undeclared(out, pointer, closed=True)
        undeclared = [name for name in required if name not in props]
        out["required"] = [*props, *undeclared]

    def finish(self, out: dict[str, Any]) -> None:
        root = out
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            root = self.defs.get(ref[len("#/$defs/") :].replace("~1", "/").replace("~0", "~"), {})
        self.object_root(root)
        size, cap = measure(out), self.limits
        allows = f"{self.limits_of or self.provider} allows"
        if self.limits_of:
            allows += f", a limit assumed for {self.provider}, which documents none"
        whole = f"the schema at {quoted('')} has"
        if size.properties > cap.properties:
            self.unsupported(
                "",
                f"{whole} {size.properties} object properties, more than the {cap.properties} "
                f"{allows}",
            )
        if size.depth > cap.depth:
            *through, deepest = size.deepest
            via = f" (through {', '.join(map(quoted, through))})" if through else ""
            self.unsupported(
                deepest,
                f"the object at {quoted(deepest)} is {size.depth} levels deep{via}, more than "
                f"the {cap.depth} {allows}: nest fewer objects along that path",
            )
        if size.string_length > cap.string_length:
            self.unsupported(
                "",
                f"{whole} {size.string_length} characters of names and enum values, more than "
                f"the {cap.string_length} {allows}",
            )
        if size.enum_values > cap.enum_values and size.most_enum_values is not None:
            at, count = size.most_enum_values
            self.unsupported(
                "",
                f"{whole} {size.enum_values} enum values, more than the {cap.enum_values} "
                f"{allows}: the largest enum, of {count}, is at {quoted(at)}",
            )
        place = size.largest_string_enum_at
        if size.largest_string_enum > cap.big_enum_length and place is not None:
            self.unsupported(
                place,
                f"the enum at {quoted(place)} has {size.largest_string_enum} characters, more than "
                f"the {cap.big_enum_length} {allows} in an enum of more than 250 values: "
                "shorten its values or split it",
            )


class _AzureLegacy(_Current):
    provider: ClassVar[str] = "Azure OpenAI strict mode"
    keep: ClassVar[frozenset[str]] = _BASE
    formats: ClassVar[frozenset[str] | None] = frozenset()
    limits: ClassVar[_Limits] = _Limits(100, 5, 15_000, 500, 7_500)


class _DeepSeek(_AzureLegacy):
    """DeepSeek's strict tools (its beta base URL): the same keywords as Azure's older
    subset (no string formats, patterns, numeric or array bounds). It documents no size
    limits: Azure's, the smaller, are kept, and said to be assumed."""

    provider: ClassVar[str] = "DeepSeek strict mode"
    limits_of: ClassVar[str | None] = _AzureLegacy.provider


class _FineTuned(_Current):
    """OpenAI's fine-tuned models: the keywords the current subset added since 2024 are
    "not for fine-tuned models" (pattern, formats, numeric and array bounds)."""

    provider: ClassVar[str] = "OpenAI strict mode for fine-tuned models"
    keep: ClassVar[frozenset[str]] = _BASE
    formats: ClassVar[frozenset[str] | None] = frozenset()


class _Groq(_Current):
    """Groq's strict mode (its gpt-oss models): OpenAI's rules, as Groq says, and no size
    limits of its own published: OpenAI's are kept, and said to be assumed."""

    provider: ClassVar[str] = "Groq strict mode"
    limits_of: ClassVar[str | None] = _Current.provider


class _Xai(_Current):
    """xAI's strict outputs: `$ref`s that do not recur, its own list of formats (others
    are accepted and not enforced), string, array and object bounds up to 2,048 characters,
    256 items and 64 properties (larger ones are best-effort), and patterns in a subset of
    ECMA's whose `.` matches a line break, matched whole (implicitly anchored: an unanchored
    end gets `.*`). It documents no size limits: OpenAI's are kept."""

    provider: ClassVar[str] = "xAI strict mode"
    keep: ClassVar[frozenset[str]] = _Current.keep | _XAI_BOUNDS.keys()
    formats: ClassVar[frozenset[str] | None] = frozenset(
        {"date", "time", "date-time", "email", "uuid", "ipv4", "ipv6", "uri"}
    )
    recursion: ClassVar[bool] = False
    limits_of: ClassVar[str | None] = _Current.provider

    def keyword(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        super().keyword(key, value, node, out, pointer)
        at = quoted(pointer)
        if key in ("minProperties", "maxProperties") and key in out and _optional(node):
            del out[key]
            self.removed(
                pointer,
                key,
                f"{self.provider} would count the `null` sent for an optional property left out",
            )
        elif key in _XAI_BOUNDS and key in out and _count(value) > _XAI_BOUNDS[key][0]:
            most, unit = _XAI_BOUNDS[key]
            self.approximated(
                pointer,
                f"`{key}` of {value} at {at} is past the {most} {unit} {self.provider} "
                "enforces: sent, not enforced",
            )
        elif key == "format" and out.get(key) == "uri":
            # The type's own check is narrower (`HttpUrl`'s schemes). Other dialects that keep
            # `uri` remove the `minLength` pydantic sends beside it; this one keeps that.
            self.approximated(
                pointer,
                f"`format` `uri` at {at} allows URLs pydantic's URL types refuse (`HttpUrl` "
                "takes http and https only): such a value passes it and fails the type",
            )
        elif key == "pattern" and isinstance(out.get(key), str):
            outside, any_character = _xai_pattern(value)
            if outside is not None:
                del out[key]
                self.removed(pointer, key, f"{self.provider} takes no {outside} in a pattern")
                return
            if any_character:
                self.approximated(
                    pointer,
                    f"the `pattern` at {at} has `.`, which {self.provider} lets match a line "
                    "break: a value holding one passes it and fails the type",
                )
            whole = _whole_match(out[key])
            if whole is None:
                self.approximated(
                    pointer,
                    f"the `pattern` at {at} has a `^` or `$` inside it, and {self.provider} "
                    "anchors a pattern at both ends where the type searches for it: sent as "
                    "it is, it refuses values the type takes",
                )
            else:
                out[key] = whole


def _optional(node: Mapping[str, Any]) -> bool:
    """Whether an object has properties it does not require (sent required, with `null`)."""
    props = node.get("properties")
    required = node.get("required", ())
    return isinstance(props, Mapping) and any(name not in required for name in props)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _xai_pattern(pattern: str) -> tuple[str | None, bool]:
    """What of `pattern` xAI's subset lacks (`None` when nothing), and whether it has a `.`
    outside a class (which xAI lets match a line break, where the type's does not)."""
    dot = in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            after = pattern[index + 1 : index + 2]
            if after in ("p", "P"):
                return "Unicode property classes (`\\p{...}`)", dot
            if after == "B" or (after == "b" and not in_class):  # (in a class, a backspace)
                return "word boundaries (`\\b`)", dot
            if after == "k" or (after.isdigit() and after != "0" and not in_class):
                return "backreferences", dot
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern.startswith("^]", index + 1) or pattern.startswith("]", index + 1):
                index += 2 if pattern[index + 1] == "]" else 3  # a `]` first is literal
                continue
        elif char == "(" and pattern.startswith("(?", index):
            kind = pattern[index + 2 : index + 4]
            if kind[:1] in ("=", "!") or kind in ("<=", "<!"):
                return "lookaround", dot
            if kind[:1] not in (":", "<"):
                return "inline flags", dot
        elif char == ".":
            dot = True
        index += 1
    return None, dot


def _whole_match(pattern: str) -> str | None:
    """`pattern` rewritten so that matching it whole, as xAI does (it anchors patterns
    implicitly), means what searching for it means to the type: each top-level branch gets
    `.*` on an end it does not anchor (xAI's `.` matches a line break, so `.*` is any text).
    `None` when a `^` or `$` stands elsewhere than at a branch's ends."""
    branches: list[tuple[int, int]] = []
    anchors: set[int] = set()
    start = depth = index = 0
    in_class = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char in "^$":
            anchors.add(index)
        elif char == "|" and depth == 0:
            branches.append((start, index))
            start = index + 1
        index += 1
    branches.append((start, len(pattern)))
    parts: list[str] = []
    for start, end in branches:
        lead = start in anchors and pattern[start] == "^"
        trail = end - 1 in anchors and pattern[end - 1] == "$"
        if any(start + lead <= at < end - trail for at in anchors):
            return None
        body = pattern[start + lead : end - trail]
        if lead and trail:
            parts.append(pattern[start:end])
        elif not (lead or trail or body):
            parts.append(".*")
        else:
            parts.append(f"{'^' if lead else '.*'}{body}{'$' if trail else '.*'}")
    return "|".join(parts)


_ENGINES: dict[str, type[_Current]] = {
    "current": _Current,
    "azure_legacy": _AzureLegacy,
    "fine_tuned": _FineTuned,
    "xai": _Xai,
    "deepseek": _DeepSeek,
    "groq": _Groq,
}


def _no_default(given: Any) -> bool:
    """Whether an original property has no `default` (leaving it out is a value of its own,
    not the default's)."""
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
    the current limits); `"xai"` xAI's (no recursion, its formats and bounds);
    `"deepseek"` DeepSeek's strict tools (Azure's older keywords and limits); `"groq"`
    Groq's (the current rules, its limits assumed from OpenAI's). Raises
    `SchemaError` for a schema that is not valid JSON Schema, and a `ValueError` naming
    the profiles for another profile.

    >>> openai_strict({"type": "object", "properties": {"n": {"type": "integer"}}}).schema
    {'type': 'object', 'properties': {'n': {'type': ['integer', 'null']}}, \
'additionalProperties': False, 'required': ['n']}
    """
    # A profile read from settings is a plain str: the type checker does not see it.
    engine = _ENGINES.get(profile) if isinstance(profile, str) else None
    if engine is None:
        known = ", ".join(_ENGINES)
        raise ValueError(f"unknown profile {profile!r}; known profiles: {known}")
    return engine(schema).run()
