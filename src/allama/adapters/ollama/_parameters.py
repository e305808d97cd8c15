"""A tool's parameters as Ollama's tool decoder reads them: every local `$ref` inlined, and
`oneOf`, `const` and a lone `allOf` in the keywords it keeps.

Ollama decodes each property into a fixed struct (`anyOf`, `type`, `items`, `description`,
`enum`, `properties`, `required`): a `$ref` there is dropped on input and the property reads
as any value (the model sees no fields). Only the root's `$defs`, and whatever sits under
`items` (kept verbatim), survive. So each `$ref` is replaced by its target, merged as
`inline_root_ref` merges a root's (the one inliner), and the root's `$defs` stay for the
`$ref`s that must remain: one leading back to a schema it is inside (recursion, cut where
it comes round again), one the inliner leaves (its target starts a resource of its own, or
assertions sit beside it), and those past the size limits. Where Ollama would drop such a
`$ref` (not under `items`), the caller is told.

The struct drops `oneOf`, `const` and `allOf` too: a pydantic union with a discriminator
(`oneOf`) would reach the model as a property of no type and no fields, a `Literal` of one
value (`const`) as any value. Where Ollama reads a property, `oneOf` goes as `anyOf` (its
branches are what the model must choose from; that only one may match is not said), `const`
as a one-value `enum` (beside an `enum`, the values both allow), and an `allOf` of one
schema beside nothing but annotations (older pydantic's `allOf: [{"$ref": ...}]` with a
description) is merged into the node, which then accepts what it did. An `allOf` that cannot
be merged, and a `oneOf` beside an `anyOf`, are dropped by Ollama, and the caller is told.
Ollama drops a `discriminator` too, which says nothing the `anyOf` does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from allama.schema._errors import SchemaError
from allama.schema._inline import inline_root_ref
from allama.schema._pointer import child, quoted
from allama.schema._types import derived
from allama.schema._walk import (
    ANNOTATIONS,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_SINGLE,
    SchemaIndex,
    preflight,
)

__all__ = ["Inlined", "inline_refs"]

_DOCUMENT = ("$schema", "$id", "id", "$defs", "definitions")
"""The root's keywords a `$ref` below it is read against: given to each one inlined."""
_DEFINITIONS = frozenset({"$defs", "definitions"})
_MAPS = SCHEMA_MAPS - _DEFINITIONS
_SINGLE = SCHEMA_SINGLE | {"items"}
_TYPED = frozenset({"properties", "anyOf"})
"""Where Ollama's struct reads a subschema as a property again (a `$ref` there is dropped);
under `items` everything is kept as written, and any other keyword is dropped whole (but a
`oneOf` sent as `anyOf` and the schema of an `allOf` merged, which are read there too)."""
_BESIDE_MERGED = ANNOTATIONS - {"$id", "id"}
"""What may sit beside an `allOf` of one schema merged into its node: annotations, which the
node's own say over the schema's (a property's description over its model's); beside an
assertion the two would have to be read together, and a new `$id` would move the base the
schema's references are read against."""
_OWN_DOCUMENT = frozenset({"$id", "id", "$defs", "definitions", "$schema"})
"""A schema that holds one of these is a document of its own: not merged into another."""
_MAX_DEPTH = 64
"""Subschemas deep past which a `$ref` is not inlined: what is below stays the caller's
(which `preflight` bounds), so the walk stays well inside the interpreter's recursion limit."""
_MAX_INLINED = 256
"""`$ref`s inlined per tool: definitions that each name the next twice would otherwise grow
into a tree of exponential size."""


class Left(NamedTuple):
    """A keyword left where Ollama drops it: what became of it ("the recursion at
    `/properties/next` was cut") and which keyword it is."""

    what: str
    keyword: str = "$ref"


@dataclass(frozen=True, slots=True)
class Inlined:
    """The parameters to send, and each keyword left where Ollama drops it."""

    schema: dict[str, Any]
    left: tuple[Left, ...]

    def notes(self, tool: str, display: str) -> list[str]:
        """What the caller is told about each keyword left, for tool `tool`."""
        return [
            f"tool `{tool}`: {left.what}, and {display} drops the `{left.keyword}` there: the "
            "arguments below it are not described to the model"
            for left in self.left
        ]


def inline_refs(schema: dict[str, Any]) -> Inlined:
    """`schema` (a tool's parameters) with its local `$ref`s inlined; `schema` as it is when
    it cannot be read (sent for the provider to say what it makes of it)."""
    made: Inlined = derived(schema, "allama.adapters.ollama.inline_refs", lambda: _inline(schema))
    return made


def _inline(schema: dict[str, Any]) -> Inlined:
    try:
        index = preflight(schema)
    except SchemaError:
        return Inlined(schema, ())
    walk = _Walk(schema, index)
    out = walk.node(schema, "", (), 0, typed=True)
    return Inlined(out, tuple(walk.left))


class _Walk:
    def __init__(self, root: dict[str, Any], index: SchemaIndex) -> None:
        self.index = index
        self.document = {key: root[key] for key in _DOCUMENT if key in root}
        self.left: list[Left] = []
        self.inlined = 0

    def node(
        self, node: Any, pointer: str, inside: tuple[str, ...], depth: int, *, typed: bool
    ) -> Any:
        """`node` rebuilt with its `$ref`s inlined (the caller's schema is left as it was);
        `inside` holds the targets being inlined around it, `depth` counts the subschemas
        above it, `typed` says whether Ollama reads it as a property."""
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            node, inside = self.reference(node, ref, pointer, inside, depth, typed=typed)
            if "$ref" in node:
                return dict(node)
        out: dict[str, Any] = {}
        below = depth + 1
        merges = _merges(node, root=not pointer)
        for key, value in node.items():
            at = child(pointer, key)
            deeper = typed and (
                key in _TYPED
                or (key == "oneOf" and "anyOf" not in node)
                or (key == "allOf" and merges)
            )
            if key in _MAPS and isinstance(value, dict):
                out[key] = {
                    name: self.node(sub, child(at, name), inside, below, typed=deeper)
                    for name, sub in value.items()
                }
            elif (key in SCHEMA_LISTS or key == "items") and isinstance(value, list):
                out[key] = [
                    self.node(sub, child(at, i), inside, below, typed=deeper)
                    for i, sub in enumerate(value)
                ]
            elif key in _SINGLE:
                out[key] = self.node(value, at, inside, below, typed=False)
            else:
                out[key] = value
        return self.narrowed(out, pointer, merges=merges) if typed else out

    def narrowed(self, node: dict[str, Any], pointer: str, *, merges: bool) -> dict[str, Any]:
        """`node` (rebuilt, and read by Ollama as a property) in the keywords Ollama's struct
        keeps: `oneOf` as `anyOf`, `const` as a one-value `enum`, its lone `allOf` merged
        (`merges`: nothing but annotations beside it). What stays where Ollama drops it is
        noted."""
        at = quoted(pointer)
        if "oneOf" in node:
            if "anyOf" in node:
                self.left.append(Left(f"the `oneOf` at {at} stands beside an `anyOf`", "oneOf"))
            else:
                node = {("anyOf" if key == "oneOf" else key): value for key, value in node.items()}
        if "const" in node:
            value, enum = node["const"], node.get("enum")
            # Beside an `enum`, the values both allow, as one `enum`.
            values = [v for v in enum if _same(v, value)] if isinstance(enum, list) else [value]
            node = {
                ("enum" if key == "const" else key): (values if key == "const" else item)
                for key, item in node.items()
                if key != "enum"
            }
        # Last: the schema merged in is narrowed already (a lone `allOf` has only annotations
        # beside it, nothing to narrow).
        if "allOf" in node:
            part = node["allOf"][0] if merges else None
            if isinstance(part, dict) and "$ref" not in part and not _OWN_DOCUMENT & part.keys():
                node = _merged(node, part)
            elif not (isinstance(part, dict) and "$ref" in part):  # a `$ref` left is noted
                self.left.append(
                    Left(f"the `allOf` at {at} could not be merged into one schema", "allOf")
                )
        return node

    def reference(
        self,
        node: dict[str, Any],
        ref: str,
        pointer: str,
        inside: tuple[str, ...],
        depth: int,
        *,
        typed: bool,
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """`node` with its `$ref` inlined and the targets now around it; `node` as it is (the
        reason noted where Ollama drops it) when it stays."""
        target = self.index.targets.get(ref)
        at = quoted(pointer)
        if target is None:
            what = f"the `$ref` at {at} does not resolve in this schema"
        elif target in inside:
            what = f"the recursion at {at} was cut"
        elif depth >= _MAX_DEPTH or self.inlined >= _MAX_INLINED:
            what = f"the `$ref` at {at} was not inlined: the schema is too large to inline whole"
        else:
            root = pointer == ""
            merged = inline_root_ref(node if root else {**self.document, **node})
            if "$ref" not in merged:
                self.inlined += 1
                if not root:  # the document it was read against stays at the root only
                    merged = {
                        key: value
                        for key, value in merged.items()
                        if not (key in self.document and value is self.document[key])
                    }
                return merged, (*inside, target)
            what = f"the `$ref` at {at} was not inlined: that would change what the schema accepts"
        if typed and pointer:
            self.left.append(Left(what))
        return node, inside


def _merges(node: dict[str, Any], *, root: bool) -> bool:
    """Whether `node`'s `allOf` holds one schema beside nothing but annotations (and, at the
    root, the document's keywords), so that it can be merged into `node`."""
    parts = node.get("allOf")
    if not isinstance(parts, list) or len(parts) != 1:
        return False
    beside = _BESIDE_MERGED | _OWN_DOCUMENT if root else _BESIDE_MERGED
    return all(key in beside for key in node if key != "allOf")


def _merged(node: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """`node` with its `allOf` of one schema, `part`, merged in where the `allOf` was: the
    node's own annotations over the part's."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "allOf":
            out.update((k, v) for k, v in part.items() if k not in node)
        else:
            out[key] = value
    return out


def _same(a: Any, b: Any) -> bool:
    """JSON equality (`true` is not `1`)."""
    return isinstance(a, bool) is isinstance(b, bool) and bool(a == b)
