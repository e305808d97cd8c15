"""A tool's parameters as Ollama's tool decoder reads them: every local `$ref` inlined.

Ollama decodes each property into a fixed struct (`anyOf`, `type`, `items`, `description`,
`enum`, `properties`, `required`): a `$ref` there is dropped on input and the property reads
as any value (the model sees no fields). Only the root's `$defs`, and whatever sits under
`items` (kept verbatim), survive. So each `$ref` is replaced by its target, merged as
`inline_root_ref` merges a root's (the one inliner), and the root's `$defs` stay for the
`$ref`s that must remain: one leading back to a schema it is inside (recursion, cut where
it comes round again), one the inliner leaves (its target starts a resource of its own, or
assertions sit beside it), and those past the size limits. Where Ollama would drop such a
`$ref` (not under `items`), the caller is told.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from allama.schema._errors import SchemaError
from allama.schema._inline import inline_root_ref
from allama.schema._pointer import child, quoted
from allama.schema._types import derived
from allama.schema._walk import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_SINGLE, SchemaIndex, preflight

__all__ = ["Inlined", "inline_refs"]

_DOCUMENT = ("$schema", "$id", "id", "$defs", "definitions")
"""The root's keywords a `$ref` below it is read against: given to each one inlined."""
_DEFINITIONS = frozenset({"$defs", "definitions"})
_MAPS = SCHEMA_MAPS - _DEFINITIONS
_SINGLE = SCHEMA_SINGLE | {"items"}
_TYPED = frozenset({"properties", "anyOf"})
"""Where Ollama's struct reads a subschema as a property again (a `$ref` there is dropped);
under `items` everything is kept as written, and any other keyword is dropped whole."""
_MAX_DEPTH = 64
"""Subschemas deep past which a `$ref` is not inlined: what is below stays the caller's
(which `preflight` bounds), so the walk stays well inside the interpreter's recursion limit."""
_MAX_INLINED = 256
"""`$ref`s inlined per tool: definitions that each name the next twice would otherwise grow
into a tree of exponential size."""


@dataclass(frozen=True, slots=True)
class Inlined:
    """The parameters to send, and what became of each `$ref` left where Ollama drops it
    ("the recursion at `/properties/next` was cut")."""

    schema: dict[str, Any]
    left: tuple[str, ...]

    def notes(self, tool: str, display: str) -> list[str]:
        """What the caller is told about each `$ref` left, for tool `tool`."""
        return [
            f"tool `{tool}`: {what}, and {display} drops the `$ref` there: the arguments "
            "below it are not described to the model"
            for what in self.left
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
        self.left: list[str] = []
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
        for key, value in node.items():
            at = child(pointer, key)
            deeper = typed and key in _TYPED
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
        return out

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
            self.left.append(what)
        return node, inside
