"""Gemini structured output: `responseJsonSchema` (a JSON Schema subset) and `responseSchema`
(an OpenAPI 3.0 subset).

`responseJsonSchema` keeps `$defs`/`$ref`, maps, tuples, numeric and array bounds, and
enums of strings and numbers; Gemini unrolls recursion only to a limited depth, which would
narrow the schema, so recursion is `UNSUPPORTED`. `default` and `examples` go as they are.

`responseSchema` has no references and no `additionalProperties`: `$ref`s are inlined,
nullability is `nullable`, types are upper-case, enums list strings only, `format` is
`date-time` on strings only. Gemini's OpenAPI `Schema` needs a `type` on every node outside
an `anyOf` (400, "type: must be specified"), `properties` on an `OBJECT` and `items` on an
`ARRAY`, and takes `properties` or `items` on no other type: so any value (`{}`, an `Any`
field), an array whose items are any value, an object without properties (closed or not)
and recursion (cut where it comes round again) are `UNSUPPORTED`, as on the strict modes;
what is written for them is the widest form (`items: {}`, an object as any value). A node
without `type` that has object or array keywords becomes one branch per JSON type.
Google lists only `enum`, `items`, `maxItems`, `nullable`, `properties` and `required` as
honoured there, other known fields "processed but ignored" (older guidance added `type`,
`format`, `minItems` and `propertyOrdering`): `minimum`, `maximum`, `minItems` and `anyOf`
are still sent, as a hint, but noted as not enforced (the other bounds, `pattern` among
them, are removed with a note); an `anyOf` that is only `X` or `null` goes as a `nullable`
`X`, which is honoured.

`propertyOrdering` (Google's keyword for the order the model writes an object's properties
in, taken on both surfaces) is kept as the caller gives it where it names each property sent
once; one that does not is sent as the names it lists, in its order, then the others, and
one beside no property sent is removed, each with a note. `responseSchema` gets the
properties' order where the caller gave none (Gemini 2.0 needs it for a stable order).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from allama.schema._dialects._engine import (
    ARRAY_KEYWORDS,
    NUMBER_KEYWORDS,
    OBJECT_KEYWORDS,
    STRING_KEYWORDS,
    Engine,
    vacuous_keywords,
)
from allama.schema._pointer import quoted
from allama.schema._rewrite import Rewrite
from allama.schema._walk import copy_json

__all__ = ["gemini_json_schema", "gemini_response_schema"]

_ORDERING = "propertyOrdering"
"""Google's own keyword, on both surfaces: the order the model writes an object's
properties in. A caller's is kept (see `_GeminiBase.ordering`); `responseSchema` has the
properties' order where the caller gave none."""
_OBJECT_WORDS = OBJECT_KEYWORDS | {_ORDERING}
_TYPED_WORDS = _OBJECT_WORDS | ARRAY_KEYWORDS | STRING_KEYWORDS | NUMBER_KEYWORDS


_HINTS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems"})
"""Keywords `responseSchema` takes but Google does not list as honoured: sent, not enforced.
(`anyOf` is one too, noted where its node is finished: `X` or `null` goes as a `nullable`
`X`, no `anyOf`.)"""
_SENT_AS = {"exclusiveMinimum": " as `minimum`", "exclusiveMaximum": " as `maximum`"}


class _GeminiBase(Engine):
    keep: ClassVar[frozenset[str]] = frozenset(
        {"type", "enum", "required", "minimum", "maximum", "minItems", "maxItems"}
    )
    bounds_enforced: ClassVar[bool] = True
    """Whether the numeric bounds are enforced (else their widening needs no note of its own)."""

    def keyword(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        if key == _ORDERING:
            out[key] = copy_json(value)  # checked against the properties sent (`ordering`)
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            self.exclusive(key, value, node, out, pointer)
        elif key in ("minimum", "maximum"):
            other = out.get(key)
            if other is None:
                out[key] = value
            else:
                out[key] = max(other, value) if key == "minimum" else min(other, value)
        else:
            super().keyword(key, value, node, out, pointer)

    def exclusive(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        """`exclusiveMinimum: n` as `minimum`: exact for integers, widened for numbers."""
        lower = key == "exclusiveMinimum"
        bound = "minimum" if lower else "maximum"
        if node.get("type") == "integer":
            edge = math.floor(value) + 1 if lower else math.ceil(value) - 1
        else:
            edge = value
            if self.bounds_enforced:
                self.approximated(
                    pointer, f"`{key}` became an inclusive `{bound}` at {quoted(pointer)}"
                )
        other = out.get(bound, node.get(bound))
        if other is not None:
            edge = max(edge, other) if lower else min(edge, other)
        out[bound] = edge

    def ordering(self, out: dict[str, Any], pointer: str) -> None:
        """The caller's `propertyOrdering` kept where it lists each property sent once;
        otherwise sent as the names it lists that are sent, in its order, then the others in
        theirs, or removed where no property is sent: with a note either way."""
        given = out.pop(_ORDERING, None)
        if given is None:
            return
        props = out.get("properties")
        names: list[str] = list(props) if isinstance(props, dict) else []
        if not names:
            self.removed(pointer, _ORDERING, "no properties are sent beside it")
            return
        listed = given if isinstance(given, list) else []
        words = [name for name in listed if isinstance(name, str)]
        if len(words) == len(listed) and sorted(set(words)) == sorted(names) == sorted(words):
            out[_ORDERING] = words
            return
        declared = set(names)
        order = [name for name in dict.fromkeys(words) if name in declared]
        named = set(order)
        order += [name for name in names if name not in named]
        out[_ORDERING] = order
        if not isinstance(given, list) or len(words) < len(listed):
            why = "is not a list of property names"
        elif any(name not in declared for name in words):
            why = "names properties the object does not declare"
        elif len(set(words)) < len(words):
            why = "names a property more than once"
        else:
            why = "does not name every property"
        self.approximated(
            pointer,
            f"`{_ORDERING}` at {quoted(pointer)} {why}: it was sent as "
            f"{json.dumps(order, ensure_ascii=False)}",
        )


class _JsonSchema(_GeminiBase):
    provider: ClassVar[str] = "Gemini responseJsonSchema"
    annotations: ClassVar[frozenset[str]] = frozenset(
        {"title", "description", "default", "examples"}
    )
    formats: ClassVar[frozenset[str] | None] = frozenset({"date-time", "date", "time"})
    enum_kinds: ClassVar[frozenset[str]] = frozenset({"string", "number"})
    maps: ClassVar[bool] = True
    prefix_items: ClassVar[bool] = True
    recursion: ClassVar[bool] = False

    def shape(self, out: dict[str, Any], node: dict[str, Any], pointer: str) -> None:
        super().shape(out, node, pointer)
        self.required_undeclared(out, pointer, closed=out.get("additionalProperties") is False)
        self.ordering(out, pointer)


class _ResponseSchema(_GeminiBase):
    provider: ClassVar[str] = "Gemini responseSchema"
    annotations: ClassVar[frozenset[str]] = frozenset(
        {"title", "description", "default", "example"}
    )
    formats: ClassVar[frozenset[str] | None] = frozenset({"date-time"})
    enum_kinds: ClassVar[frozenset[str]] = frozenset({"string"})
    inline_refs: ClassVar[bool] = True
    close_objects: ClassVar[bool] = False
    bounds_enforced: ClassVar[bool] = False
    strict_shapes: ClassVar[bool] = True
    """A node without `type` is refused by the API: any value cannot be written."""
    recursion: ClassVar[bool] = False
    """Inlined recursion is cut with `{}`, a node without `type`."""

    def rewrite(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        if not any(k in node for k in ("type", "enum", "anyOf", "oneOf")) and any(
            k in node for k in OBJECT_KEYWORDS | ARRAY_KEYWORDS
        ):
            node = _by_type(node)
        return super().rewrite(node, pointer)

    def keyword(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        kinds = node.get("type")
        if key == "format" and "string" not in (kinds if isinstance(kinds, list) else [kinds]):
            self.removed(pointer, key, f"{self.provider} takes a `format` on strings only")
            return
        if key in _HINTS and not (key == "minItems" and value == 0):  # 0 asks for nothing
            sent = _SENT_AS.get(key, "")
            self.approximated(
                pointer,
                f"`{key}` is not enforced by {self.provider} at {quoted(pointer)}: "
                f"Google does not list it as honoured (it is sent{sent}, as a hint)",
            )
        super().keyword(key, value, node, out, pointer)

    def additional_properties(
        self, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        if value is False or "patternProperties" in node:
            return
        kind = "a map" if "properties" not in node else "an object open to other keys"
        self.unsupported(
            pointer,
            f"the subschema at {quoted(pointer)} is {kind}, which {self.provider} cannot express",
        )

    def shape(self, out: dict[str, Any], node: dict[str, Any], pointer: str) -> None:
        super().shape(out, node, pointer)
        out.pop("additionalProperties", None)
        extra = node.get("additionalProperties", False)
        if extra is not False or "patternProperties" in node:
            # without `additionalProperties` an object with `properties` is closed: an open
            # one goes without them, wider than the original rather than narrower
            out.pop("properties", None)
        kinds = out.get("type")
        names = kinds if isinstance(kinds, list) else [kinds]
        if "object" in names and not out.get("properties"):
            # an open object (by the strict shapes) or a map was noted already
            closed = extra is False and "patternProperties" not in node
            if closed and ("properties" in node or "additionalProperties" in node):
                # closed (by `additionalProperties: false` or by convention): only `{}`
                self.unsupported(
                    pointer,
                    f"the object at {quoted(pointer)} declares no properties, which "
                    f"{self.provider} cannot express",
                )
            for key in ("type", "properties", "required"):
                out.pop(key, None)  # any value, the widest form (noted as not enforced)
        elif "array" in names and "items" not in out:
            out["items"] = {}  # any item, the widest form (noted as not enforced)
        # `properties` are left on closed objects only (an open one lost them above)
        self.undeclared_required(out, pointer)
        self.ordering(out, pointer)
        if _sends_any_of(out):
            what = "`anyOf`" if "anyOf" in out else "`type` with more than one type (an `anyOf`)"
            self.approximated(
                pointer,
                f"{what} is not enforced by {self.provider} at {quoted(pointer)}: "
                "Google does not list it as honoured (it is sent, as a hint)",
            )

    def undeclared_required(self, out: dict[str, Any], pointer: str) -> None:
        """`required` names the object does not declare are removed, a wider object (noted):
        Gemini refuses them, and unlike the strict modes the object can go without them."""
        props = out.get("properties")
        required = out.get("required")
        if not isinstance(props, dict) or not isinstance(required, list):
            return
        kept = [name for name in required if name in props]
        if len(kept) == len(required):
            return
        if kept:
            out["required"] = kept
        else:
            del out["required"]
        self.removed(pointer, "required", "it names properties the object does not declare")

    def run(self) -> Rewrite:
        rewrite = super().run()
        return Rewrite(
            schema=_openapi(rewrite.schema), notes=rewrite.notes, dropped=rewrite.dropped
        )


def _sends_any_of(out: dict[str, Any]) -> bool:
    """Whether a rewritten node goes out with an `anyOf`, as `_openapi` writes it: a union
    that is `X` or `null` alone goes as a `nullable` `X` (where no keyword of `X` is also
    beside the union), a `type` of two or more types other than `null` as an `anyOf`."""
    kinds = out.get("type")
    if isinstance(kinds, list) and len([k for k in kinds if k != "null"]) > 1:
        return True
    branches = out.get("anyOf")
    if not isinstance(branches, list):
        return False
    rest = [b for b in branches if not _only_null(b)]
    folds = len(rest) == 1 < len(branches) and not set(rest[0]) & (set(out) - {"anyOf"})
    return not folds


def _only_null(branch: Any) -> bool:
    return isinstance(branch, Mapping) and len(branch) == 1 and branch.get("type") in _NULL


_NULL = ("null", ["null"])


def _by_type(node: dict[str, Any]) -> dict[str, Any]:
    """A node without `type` as one branch per JSON type, each with its own keywords: the
    same values, in a form where every `properties` and `items` has its type."""
    outer = {k: v for k, v in node.items() if k not in _TYPED_WORDS}
    branches: list[dict[str, Any]] = []
    for kind, words in (
        ("object", _OBJECT_WORDS),
        ("array", ARRAY_KEYWORDS),
        ("string", STRING_KEYWORDS),
        ("number", NUMBER_KEYWORDS),
    ):
        branches.append({"type": kind, **{k: v for k, v in node.items() if k in words}})
    branches += [{"type": "boolean"}, {"type": "null"}]
    return {**outer, "anyOf": branches}


def _openapi(node: Any) -> Any:
    """A JSON Schema node of the subset above in OpenAPI form (upper-case types, `nullable`)."""
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _openapi(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = _openapi(value)
        elif key == "anyOf":
            out[key] = [_openapi(sub) for sub in value]
        else:
            out[key] = value
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "NULL"} in branches:
        rest = [b for b in branches if b != {"type": "NULL"}]
        if len(rest) == 1 and not set(rest[0]) & (set(out) - {"anyOf"}):
            del out["anyOf"]
            out.update(rest[0])
            out["nullable"] = True
        elif rest:
            out["anyOf"] = [{**b, "nullable": True} for b in rest]
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = kind.upper()
    elif isinstance(kind, list):
        kinds = [k.upper() for k in kind if k != "null"]
        # an `enum` without `null` rejects it whatever the type says
        nullable = "null" in kind and ("enum" not in out or None in out["enum"])
        if len(kinds) == 1:
            out["type"] = kinds[0]
        elif not kinds:
            out["type"] = "NULL"
        else:
            branch_list = []
            for kind in kinds:
                names = {kind.lower()} | ({"integer"} if kind == "NUMBER" else set())
                vacuous = vacuous_keywords(frozenset(names)) | (
                    {"propertyOrdering"} if kind != "OBJECT" else set()
                )
                kept = {k: v for k, v in out.items() if k != "type" and k not in vacuous}
                branch_list.append({**kept, "type": kind})
            if nullable:
                branch_list = [{**b, "nullable": True} for b in branch_list]
            return {"anyOf": branch_list}
        if nullable and kinds:
            out["nullable"] = True
    props = out.get("properties")
    if isinstance(props, dict) and len(props) > 1 and _ORDERING not in out:
        out[_ORDERING] = list(props)  # the caller's own, checked, stands
    return out


def gemini_json_schema(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` for Gemini's `responseJsonSchema`, with notes on what it removed.

    Raises `SchemaError` for a schema that is not valid JSON Schema.
    """
    return _JsonSchema(schema).run()


def gemini_response_schema(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` for Gemini's `responseSchema` (OpenAPI subset), with notes on what it removed.

    Raises `SchemaError` for a schema that is not valid JSON Schema.

    >>> gemini_response_schema({"type": ["string", "null"], "maxLength": 3}).schema
    {'type': 'STRING', 'nullable': True}
    """
    return _ResponseSchema(schema).run()
