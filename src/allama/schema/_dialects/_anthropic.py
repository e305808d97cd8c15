"""Anthropic structured outputs (`output_config.format`) and strict tools.

Anthropic's grammar keeps types, `enum`, `anyOf`, local `$ref`s, ten string formats,
simple patterns and `minItems` of 0 or 1 (`default` is documented as supported, and sent).
It rejects numeric bounds, string lengths and other array bounds, so those are removed
(`APPROXIMATED`); it cannot hold maps, open objects or recursion (`UNSUPPORTED`), and it
caps optional properties and unions per request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from allama.schema._dialects._engine import Engine
from allama.schema._limits import measure
from allama.schema._pointer import quoted
from allama.schema._rewrite import Rewrite

__all__ = ["anthropic"]

MAX_OPTIONAL = 24
MAX_UNIONS = 16

_UNSAFE_PATTERN = re.compile(r"\\[1-9]|\\k<|\(\?[=!]|\(\?<[=!]|\\[bB]|\{(\d{4,}|\d*,\d{4,})\}")


class _Anthropic(Engine):
    provider: ClassVar[str] = "Anthropic strict mode"
    keep: ClassVar[frozenset[str]] = frozenset({"type", "enum", "required"})
    annotations: ClassVar[frozenset[str]] = frozenset({"title", "description", "default"})
    formats: ClassVar[frozenset[str] | None] = frozenset(
        {
            "date-time",
            "time",
            "date",
            "duration",
            "email",
            "hostname",
            "uri",
            "ipv4",
            "ipv6",
            "uuid",
        }
    )
    enum_kinds: ClassVar[frozenset[str]] = frozenset(
        {"string", "number", "integer", "boolean", "null"}
    )
    strict_shapes: ClassVar[bool] = True
    recursion: ClassVar[bool] = False

    def keyword(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        if key == "pattern":
            if self.pattern_read_otherwise(value, pointer):
                return
            if _UNSAFE_PATTERN.search(value):
                self.removed(pointer, key, "it uses regex features the grammar does not support")
            else:
                out[key] = value
        elif key == "minItems":
            if value <= 1:
                out[key] = int(value)
            else:
                out[key] = 1
                self.approximated(pointer, f"`minItems` was lowered to 1 at {quoted(pointer)}")
        else:
            super().keyword(key, value, node, out, pointer)

    def shape(self, out: dict[str, Any], node: dict[str, Any], pointer: str) -> None:
        super().shape(out, node, pointer)
        self.required_undeclared(out, pointer, closed=out.get("additionalProperties") is False)

    def finish(self, out: dict[str, Any]) -> None:
        self.object_root(out)
        size = measure(out)
        if size.optional > MAX_OPTIONAL:
            self.unsupported(
                "",
                f"the schema at {quoted('')} has {size.optional} optional properties, "
                f"more than the {MAX_OPTIONAL} {self.provider} allows per request",
            )
        if size.unions > MAX_UNIONS:
            self.unsupported(
                "",
                f"the schema at {quoted('')} has {size.unions} unions (`anyOf` or type arrays), "
                f"more than the {MAX_UNIONS} {self.provider} allows per request",
            )


def anthropic(schema: Mapping[str, Any]) -> Rewrite:
    """`schema` in Anthropic's strict subset, with notes on what it removed or cannot hold.

    Raises `SchemaError` for a schema that is not valid JSON Schema.

    >>> [n.message for n in anthropic({"type": "object", "properties": {
    ...     "age": {"type": "integer", "minimum": 0}}, "required": ["age"]}).notes]
    ['`minimum` was removed at `/properties/age`']
    """
    return _Anthropic(schema).run()
