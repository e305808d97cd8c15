"""Grammar engines: Ollama `format` and llama.cpp-style JSON-Schema-to-grammar converters.

The grammar enforces types, `properties`/`required`, `enum`, `const`, `anyOf`, local
`$ref`s, `items` with `minItems`/`maxItems`, string lengths, a few formats, integer bounds
and anchored patterns; the notes say what it ignores. The schema goes as written, with
three rewrites that change nothing it accepts, because the converters get them wrong:

- `allOf` is merged into one node (converters make every property of a part required);
- the keywords beside a union move into its branches (converters read only the union,
  dropping the `properties` beside it);
- a `$ref` with assertions beside it is merged with its target (converters ignore them).

`$schema` is not sent: the body is written in 2020-12's forms whatever draft it named.
An unanchored `pattern` makes the converter fail, so it is removed; keywords the grammar
ignores that hold schemas (`not`, `if`, `patternProperties`...) are removed too, so that no
`$ref` inside them is left pointing at a definition that was not carried over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from allama.schema._dialects._engine import ASSERTIONS, Engine
from allama.schema._pointer import child, quoted
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._walk import ANNOTATIONS
from allama.types import WarningKind

__all__ = ["fireworks", "grammar_engine"]

_FORMATS = frozenset({"date", "time", "date-time", "uuid"})
"""Formats the grammar compiles to a rule (llama.cpp's converter): `uuid1` to `uuid5` are
read as `uuid`, any version, which `UUID4` and the like refuse."""
_IGNORED = frozenset(
    {
        "multipleOf",
        "uniqueItems",
        "minContains",
        "maxContains",
        "dependentRequired",
        "minProperties",
        "maxProperties",
    }
)
"""Ignored by the grammar, sent as they are."""
_IGNORED_SCHEMAS = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "contains",
        "dependentSchemas",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
"""Ignored by the grammar and holding schemas: removed."""
_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_STRUCTURE = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "dependencies",
    }
)


class _Grammar(Engine):
    provider: ClassVar[str] = "the grammar"
    keep: ClassVar[frozenset[str]] = ASSERTIONS - _STRUCTURE - _IGNORED_SCHEMAS
    annotations: ClassVar[frozenset[str]] = ANNOTATIONS - {"$schema"}
    """Sent as they are, but `$schema`: the body is written in 2020-12's forms
    (`prefixItems`, numeric `exclusiveMinimum`), which an older draft it names would misread."""
    formats: ClassVar[frozenset[str] | None] = None
    maps: ClassVar[bool] = True
    prefix_items: ClassVar[bool] = True
    close_objects: ClassVar[bool] = False
    tuples_noted: ClassVar[bool] = True
    """Whether tuples are noted as not enforced (llama.cpp's dialect rewrites them itself)."""

    def nothing(self, pointer: str) -> Any:
        return False

    def schema(self, node: Any, pointer: str, *, root: bool = False) -> Any:
        out = super().schema(node, pointer, root=root)
        if root and pointer == "" and out is False:
            # `run` sends a root that accepts nothing as `{}`, which accepts anything.
            self.approximated(
                pointer,
                f"the subschema at {quoted(pointer)} accepts nothing; {self.provider} "
                "cannot say so, so it accepts anything",
            )
        return out

    def keyword(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        at = quoted(pointer)
        if key == "pattern":
            if self.pattern_read_otherwise(value, pointer):
                return
            if isinstance(value, str) and value.startswith("^") and value.endswith("$"):
                out[key] = value
            else:
                self.approximated(
                    pointer, f"`pattern` was removed at {at}: the grammar needs `^` and `$` anchors"
                )
            return
        if key == "format" and value not in _FORMATS:
            self.approximated(pointer, f"`format` `{value}` is not enforced by the grammar at {at}")
        elif key in _BOUNDS and node.get("type") != "integer":
            self.approximated(
                pointer, f"`{key}` is not enforced by the grammar at {at} (only integers)"
            )
        elif key in _IGNORED or key in _IGNORED_SCHEMAS:
            self.approximated(pointer, f"`{key}` is not enforced by the grammar at {at}")
            if key in _IGNORED_SCHEMAS:
                return
        elif key == "dependencies":
            self.approximated(pointer, f"`{key}` is not enforced by the grammar at {at}")
            return
        elif key == "patternProperties":
            self.approximated(pointer, f"`{key}` is not enforced by the grammar at {at}")
            out["additionalProperties"] = True  # the keys it allows stay allowed
            return
        elif key == "additionalProperties" and "patternProperties" in node:
            return
        elif key == "items" and isinstance(value, list | tuple) and self.tuples_noted:
            self.approximated(pointer, f"tuple `items` are not enforced by the grammar at {at}")
        elif key == "prefixItems" and self.tuples_noted:
            self.approximated(pointer, f"`prefixItems` is not enforced by the grammar at {at}")
        super().keyword(key, value, node, out, pointer)

    def one_of(
        self, value: list[Any], node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        if "anyOf" not in node and not self.disjoint(value):
            self.approximated(
                pointer, f"`oneOf` is enforced as `anyOf` by the grammar at {quoted(pointer)}"
            )
            at = child(pointer, "oneOf")
            out["anyOf"] = [self.schema(sub, child(at, i)) for i, sub in enumerate(value)]
            return
        super().one_of(value, node, out, pointer)

    def run(self) -> Rewrite:
        rewrite = super().run()
        notes = sorted(rewrite.notes, key=lambda n: n.pointer)
        return Rewrite(rewrite.schema, tuple(notes), rewrite.dropped)


_FIREWORKS_UNSUPPORTED = frozenset({"minLength", "maxLength", "minItems", "maxItems", "pattern"})
"""Keywords Fireworks documents as not supported (so is `oneOf`, sent as `anyOf`): removed."""


class _Fireworks(_Grammar):
    """Fireworks' `json_schema` output, constrained by its own grammar. Its documentation
    lists keywords it supports and ones it does not; of the others (`enum`, `format`,
    numeric bounds...) it says nothing, so the whole is approximate."""

    provider: ClassVar[str] = "Fireworks' grammar"

    def keyword(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        if key in _FIREWORKS_UNSUPPORTED:
            self.removed(pointer, key, "Fireworks documents it as not supported")
            return
        super().keyword(key, value, node, out, pointer)

    def run(self) -> Rewrite:
        rewrite = super().run()
        note = SchemaNote(
            WarningKind.APPROXIMATED,
            "/",
            "the schema at `/` is compiled by Fireworks' grammar, which documents only some "
            "of the keywords it enforces",
        )
        return Rewrite(rewrite.schema, (note, *rewrite.notes), rewrite.dropped)


def grammar_engine(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` for a grammar engine, with notes on the keywords the grammar ignores.

    Raises `SchemaError` for a schema that is not valid JSON Schema.

    >>> [n.message for n in grammar_engine({"type": "string", "format": "email"}).notes]
    ['`format` `email` is not enforced by the grammar at `/`']
    """
    return _Grammar(schema).run()


def fireworks(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` for Fireworks' `json_schema` output, with notes on what it does not enforce.

    Raises `SchemaError` for a schema that is not valid JSON Schema.

    >>> [n.message for n in fireworks({"type": "string", "maxLength": 9}).notes][1]
    '`maxLength` was removed at `/`: Fireworks documents it as not supported'
    """
    return _Fireworks(schema).run()
