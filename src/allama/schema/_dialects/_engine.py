"""The walk every rewriting dialect shares; each dialect says which keywords it keeps.

A dialect subclass sets the keyword tables and overrides a few hooks. The engine:

- reads the schema with `preflight` (bad input is a `SchemaError` before anything else);
- normalizes each node without changing what it accepts: `$defs` containers are rebuilt,
  draft-4 boolean `exclusiveMinimum` becomes the numeric form, a `const` becomes a one-value
  `enum` and an `enum` loses the values its `type` rejects, a `$ref` with assertions beside it
  and an `allOf` are merged into one node (keyword by keyword: a keyword that cannot be merged
  is removed, with a note; item keywords position by position, so that one part's `items`
  never lands after another part's tuple), and the keywords beside a union are distributed
  into its branches (each side's `additionalProperties` then applies to the names only the
  other declares); an `unevaluatedProperties` then becomes the `additionalProperties` it
  means in the merged node (it saw the keys of the parts and of the branch);
- copies kept keywords, removes the rest (an `APPROXIMATED` note for assertions, dynamic
  references among them; annotations such as `default` are listed in `Rewrite.dropped`;
  unknown keywords go silently, since they never change what a schema accepts);
- gives every `enum` the `type` of its values;
- either keeps `$ref`s, moving every target under `$defs`, or inlines them.

Objects that declare `properties` and say nothing about other keys are treated as closed,
the library's convention (the undeclared-key walk rejects such keys). One object is the node,
its `allOf` parts and, when it holds a union, the branch the value matches: merging the parts
and distributing the node into the branches keeps that, so closing each resulting object with
`additionalProperties: false` is exact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from allama.schema._errors import SchemaError
from allama.schema._patterns import read_otherwise
from allama.schema._pointer import child, display, lookup, quoted
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._walk import (
    ANNOTATIONS,
    ARRAY_KEYWORDS,
    NUMBER_KEYWORDS,
    OBJECT_KEYWORDS,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_SINGLE,
    STRING_KEYWORDS,
    SchemaIndex,
    copy_json,
    preflight,
)
from allama.types import WarningKind

__all__ = [
    "ARRAY_KEYWORDS",
    "ASSERTIONS",
    "NOTED_ANNOTATIONS",
    "NUMBER_KEYWORDS",
    "OBJECT_KEYWORDS",
    "STRING_KEYWORDS",
    "Engine",
    "admits_null",
    "branches_disjoint",
    "follow",
    "json_kind",
    "kinds_disjoint",
    "vacuous_keywords",
    "values_disjoint",
]

ASSERTIONS = frozenset(
    {
        "type",
        "enum",
        "const",
        "required",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependencies",
        "items",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
    }
    | SCHEMA_LISTS
    | (SCHEMA_SINGLE - {"contentSchema"})
    | (SCHEMA_MAPS - {"$defs", "definitions"})
)
"""Keywords that can reject an instance: removing one widens the schema."""

NOTED_ANNOTATIONS = frozenset(
    {"default", "examples", "example", "discriminator", "deprecated", "readOnly", "writeOnly"}
)
"""Annotations worth telling the caller about when a dialect does not send them."""

_LOWER_BOUNDS = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"})
_UPPER_BOUNDS = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"})
_SCHEMA_VALUED = frozenset(
    {
        "items",
        "additionalProperties",
        "additionalItems",
        "propertyNames",
        "contains",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
_DYNAMIC_REFS = frozenset({"$dynamicRef", "$recursiveRef"})
"""References resolved against where the schema is used (2020-12, 2019-09): not followed."""
_UNIONS = ("anyOf", "oneOf")
_MISSING: Any = object()
_INLINE_DEPTH = 32
_BUDGET = 20_000
_PART_BUDGET = 20_000
"""`allOf` parts and union branches normalized to be merged, per rewrite (a `$ref` target
once): past it a part is left unconstrained (noted), so that merging stays bounded where
paths through the schema multiply (each definition naming the next twice)."""
_MAX_NESTING = 100
_PRODUCT_LIMIT = 32
"""Branches two unions in one node may multiply into before one of them is removed."""
_DISTRIBUTE_LIMIT = 4_000
"""Keywords (properties counted one by one) a union's branches may receive from the node
beside it; past it, the branches' properties join the node and the union is not enforced."""
_MERGED_REFS = 256
"""`$ref`s beside annotations merged with their target (to keep the annotations) per rewrite;
past it they stay `$ref`s, so that a large schema is not inlined into a tree."""
_PAIRWISE = 24
"""Up to this many branches, disjointness is checked pair by pair; above, by hashing."""
_NARROWED_FORMATS = {
    "email": "addresses pydantic's email check refuses (`ops@localhost`, `jane@corp.local`): "
    "such a value passes it and fails an `EmailStr`",
}
"""Formats whose type's own check is narrower than the format a provider enforces (RFC
5321's addresses, where `EmailStr`'s email-validator refuses special-use domains, quoted
local parts, IP literals). Nothing in the schema tells such a type from a `str` that only
names the format (which any value passes), so either is approximate. (`AnyUrl`'s `uri` is
narrowed too, but its `minLength` is removed wherever `uri` is kept: approximate already.)"""
_TYPED_KEYWORDS = (OBJECT_KEYWORDS | ARRAY_KEYWORDS | STRING_KEYWORDS | NUMBER_KEYWORDS) - {
    "format"  # it names number formats too: left beside the union
}
"""Keywords that apply to one kind of value only (`items` to arrays, say)."""
_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else"})
"""Keywords whose subschemas apply to the value itself, not to a property or an item."""
_ITEM_KEYWORDS = ("prefixItems", "items", "additionalItems")
_EVALUATING = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependencies",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
    }
)
"""Keywords whose subschemas evaluate keys for the `unevaluatedProperties` beside them."""


def json_kind(value: Any) -> str:
    """The JSON type of a value (`integer` for whole numbers, as JSON Schema counts them)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def _same(a: Any, b: Any) -> bool:
    """JSON equality (`True` is not `1`)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _value_key(value: Any) -> Any:
    """A hashable key under which two JSON values are `_same` exactly when keys are equal."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    return ("json", json.dumps(value, sort_keys=True, default=str))


def values_disjoint(left: list[Any], right: list[Any]) -> bool:
    """Whether no value of `left` equals one of `right`."""
    keys = {_value_key(v) for v in left}
    return not any(_value_key(v) in keys for v in right)


_KIND_NAMES = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "array": "an array",
    "null": "`null`",
}
"""How a note names the JSON types other than `object`, in the order it lists them."""


def _root_kinds(root: Any) -> set[str] | None:
    """The JSON types a rewritten root may be, by its `type` or its `anyOf` branches'
    (`None` when something there has no `type`, a `$ref` say)."""
    if not isinstance(root, Mapping):
        return None
    branches = root.get("anyOf")
    if isinstance(branches, list):
        found: set[str] = set()
        for branch in branches:
            kinds = _root_kinds(branch) if isinstance(branch, Mapping) else None
            if kinds is None:
                return None
            found |= kinds
        return found
    kinds = root.get("type")
    if isinstance(kinds, str):
        return {kinds}
    if isinstance(kinds, list) and all(isinstance(kind, str) for kind in kinds):
        return set(kinds)
    return None


def _type_set(kinds: Any) -> set[str]:
    names = set(kinds) if isinstance(kinds, list | tuple) else {kinds}
    if "number" in names:
        names.add("integer")
    return names


def kinds_disjoint(left: Any, right: Any) -> bool:
    """Whether two `type` values share no JSON type (`integer` is a `number`)."""
    return not (_type_set(left) & _type_set(right))


def _within(inner: Any, outer: Any) -> bool:
    """Whether every JSON type `inner` allows is one `outer` allows."""
    return _type_set(inner) <= _type_set(outer)


def admits_null(schema: Any) -> bool:
    """Whether `null` is certainly valid under an output schema node (no `$ref` followed)."""
    if schema is True or schema == {}:
        return True
    if not isinstance(schema, dict) or "$ref" in schema or "not" in schema:
        return False
    kind = schema.get("type")
    if kind is not None and "null" not in _type_set(kind):
        return False
    if "enum" in schema and not any(v is None for v in schema["enum"]):
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    for key in _UNIONS:
        if key in schema and not any(admits_null(branch) for branch in schema[key]):
            return False
    return "allOf" not in schema or all(admits_null(branch) for branch in schema["allOf"])


def _intersect_types(left: Any, right: Any) -> Any:
    a = set(left) if isinstance(left, list | tuple) else {left}
    b = set(right) if isinstance(right, list | tuple) else {right}
    common = a & b
    if "integer" in a and "number" in b:
        common.add("integer")
    if "number" in a and "integer" in b:
        common.add("integer")
    if not common:
        return None
    order = [k for k in (left if isinstance(left, list | tuple) else [left]) if k in common]
    order += sorted(common - set(order))
    return order[0] if len(order) == 1 else order


def _enum_within_type(node: dict[str, Any]) -> bool:
    """Drops the `enum` values `type` rejects and the types no value has (exact: both apply).

    False when no value is left: the node accepts nothing.
    """
    kinds = node["type"]
    allowed = _type_set(kinds)
    values = [v for v in node["enum"] if json_kind(v) in allowed]
    if not values:
        return False
    if len(values) != len(node["enum"]):
        node["enum"] = values
    used = {json_kind(v) for v in values}
    names = kinds if isinstance(kinds, list | tuple) else [kinds]
    kept = [k for k in names if k in used or (k == "number" and "integer" in used)]
    if kept != list(names):
        node["type"] = kept[0] if len(kept) == 1 else kept
    return True


def vacuous_keywords(kinds: frozenset[str]) -> frozenset[str]:
    """The keywords that constrain none of `kinds` (`properties` on a string, say)."""
    found = _VACUOUS.get(kinds)
    if found is None:
        found = _VACUOUS[kinds] = _vacuous_for(kinds)
    return found


_VACUOUS: dict[frozenset[str], frozenset[str]] = {}


def _vacuous_for(kinds: frozenset[str]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    if "object" not in kinds:
        out |= OBJECT_KEYWORDS
    if "array" not in kinds:
        out |= ARRAY_KEYWORDS
    if "string" not in kinds:
        out |= STRING_KEYWORDS - {"format"}  # `format` also names number formats
    if "integer" not in kinds:
        out |= NUMBER_KEYWORDS
    return out


def _declared(node: Mapping[str, Any]) -> Mapping[str, Any]:
    props = node.get("properties")
    return props if isinstance(props, Mapping) else {}


def _both(left: Any, right: Any) -> Any:
    """A schema for the values both `left` and `right` accept."""
    if left is True or left == {}:
        return right
    if right is True or right == {} or _same(left, right):
        return left
    if left is False or right is False:
        return False
    return {"allOf": [left, right]}


def _tuple_of(node: Mapping[str, Any]) -> tuple[str | None, list[Any], Any]:
    """How the engine reads `node`'s items: the keyword of its tuple (`prefixItems`, a list
    `items`, or None), the tuple, and the schema of the items after it (of every item when
    there is no tuple; `True` when nothing constrains them). An `additionalItems` beside no
    list `items` constrains nothing."""
    items = node.get("items", True)
    if isinstance(items, list | tuple):
        return "items", list(items), node.get("additionalItems", True)
    prefix = node.get("prefixItems")
    if isinstance(prefix, list | tuple):
        return "prefixItems", list(prefix), items
    return None, [], items


class Engine:
    """One rewrite of one schema. Subclasses set the tables; `run()` returns the `Rewrite`."""

    provider: ClassVar[str] = ""
    """How notes name the target, e.g. "OpenAI strict mode"."""
    keep: ClassVar[frozenset[str]] = frozenset({"type", "enum", "required"})
    """Data keywords copied as they are."""
    annotations: ClassVar[frozenset[str]] = frozenset({"title", "description"})
    """Annotations sent as they are; the others of `NOTED_ANNOTATIONS` go to `dropped`."""
    formats: ClassVar[frozenset[str] | None] = frozenset()
    """Formats kept; `None` keeps every format."""
    enum_kinds: ClassVar[frozenset[str]] = frozenset(
        {"string", "number", "integer", "boolean", "null", "object", "array"}
    )
    """JSON types an `enum` may list."""
    inline_refs: ClassVar[bool] = False
    close_objects: ClassVar[bool] = True
    strict_shapes: ClassVar[bool] = False
    """Every node needs a type, every object properties, every array items (strict modes)."""
    maps: ClassVar[bool] = False
    """Whether `additionalProperties` schemas (maps) are enforced."""
    prefix_items: ClassVar[bool] = False
    recursion: ClassVar[bool] = True
    """Whether recursive `$ref`s are enforced."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        index = preflight(schema)
        if not index.plain:  # other mappings and tuples: read a plain copy
            index = preflight(copy_json(schema))
        self.index: SchemaIndex = index
        self.notes: list[SchemaNote] = []
        self.dropped: list[SchemaNote] = []
        self._seen: set[tuple[WarningKind, str, str]] = set()
        self._dropped_seen: set[tuple[str, str]] = set()
        self.defs: dict[str, Any] = {}
        self._def_names: dict[str, str] = {}
        self._names_taken: set[str] = set()
        self._def_queue: list[tuple[str, str]] = []
        self._inlining: list[str] = []
        self._inlining_set: set[str] = set()
        self._resolving: set[str] = set()
        self._normalized: dict[str, Any] = {}
        """`$ref` targets normalized once, by pointer: a part named twice is not redone."""
        self._cuts = 0
        """Times normalizing depended on where it was reached (a loop cut, a `$ref` kept)."""
        self._loops = _loops(index)
        self._budget = _BUDGET
        self._part_budget = _PART_BUDGET
        self._depth = 0
        self._merged_refs = 0

    # ----- notes

    def note(self, kind: WarningKind, pointer: str, message: str) -> None:
        key = (kind, pointer, message)
        if key not in self._seen:
            self._seen.add(key)
            self.notes.append(SchemaNote(kind, display(pointer), message))

    def approximated(self, pointer: str, message: str) -> None:
        self.note(WarningKind.APPROXIMATED, pointer, message)

    def unsupported(self, pointer: str, message: str) -> None:
        self.note(WarningKind.UNSUPPORTED, pointer, message)

    def removed(self, pointer: str, keyword: str, why: str = "") -> None:
        reason = f": {why}" if why else ""
        self.approximated(pointer, f"`{keyword}` was removed at {quoted(pointer)}{reason}")

    def dropped_annotation(self, pointer: str, keyword: str) -> None:
        if (pointer, keyword) not in self._dropped_seen:
            self._dropped_seen.add((pointer, keyword))
            self.dropped.append(
                SchemaNote(
                    WarningKind.APPROXIMATED,
                    display(pointer),
                    f"`{keyword}` was not sent at {quoted(pointer)}: "
                    f"{self.provider} does not take it",
                )
            )

    # ----- entry

    def run(self) -> Rewrite:
        out = self.schema(self.index.root, "", root=True)
        while self._def_queue:
            pointer, name = self._def_queue.pop()
            self.defs[name] = self.schema(_lookup(self.index, pointer), pointer)
        if self.defs and isinstance(out, dict):
            out["$defs"] = {name: self.defs[name] for name in sorted(self.defs)}
        if isinstance(out, dict):
            self.finish(out)
        return Rewrite(
            schema=out if isinstance(out, dict) else {},
            notes=tuple(self.notes),
            dropped=tuple(self.dropped),
        )

    def finish(self, out: dict[str, Any]) -> None:
        """Whole-schema checks (limits, the root); the default has none."""

    def object_root(self, root: Any) -> None:
        """For a dialect whose root must be an object: an `UNSUPPORTED` note on any other
        root. A `type` of `["object"]` is that type, as a list of one: written `"object"`,
        the form the provider checks its root for. A root that may also be something else
        (an object or `null`) is refused as such, not as one that is no object."""
        at = quoted("")
        kinds = _root_kinds(root)
        if isinstance(root, dict) and kinds == {"object"} and "anyOf" not in root:
            root["type"] = "object"
            return
        others = [name for kind, name in _KIND_NAMES.items() if kind in (kinds or ())]
        if kinds is not None and "object" in kinds and others:
            *first, last = others
            alternatives = f"{', '.join(first)} or {last}" if first else last
            self.unsupported(
                "",
                f"the root at {at} may be {alternatives} as well as an object, where "
                f"{self.provider} requires only an object",
            )
            return
        self.unsupported("", f"the root at {at} is not an object, which {self.provider} requires")

    # ----- nodes

    def schema(self, node: Any, pointer: str, *, root: bool = False) -> Any:
        self._budget -= 1
        if self._budget < 0:
            self.too_large(pointer)
            return {}
        if node is True or (isinstance(node, dict) and not node):
            return self.any_value(pointer)
        if node is False:
            return self.nothing(pointer)
        if self._depth >= _MAX_NESTING:
            self.approximated(
                pointer,
                f"the subschema at {quoted(pointer)} was left unconstrained: "
                "it nests too deep to rewrite",
            )
            return {}
        fresh = pointer not in self._resolving
        if fresh:
            self._resolving.add(pointer)
        try:
            work = self.normalize(dict(node), pointer)
        finally:
            if fresh:
                self._resolving.discard(pointer)
        if work is False:
            return self.nothing(pointer)
        if "$ref" in work:
            for key in work:
                if key in NOTED_ANNOTATIONS:
                    self.dropped_annotation(pointer, key)
            return self.reference(work["$ref"], pointer, root=root)
        if not work:
            return self.any_value(pointer)
        self._depth += 1
        try:
            return self.rewrite(work, pointer)
        finally:
            self._depth -= 1

    def too_large(self, pointer: str) -> None:
        self.approximated(
            pointer,
            f"the subschema at {quoted(pointer)} was left unconstrained: "
            "the schema is too large to rewrite whole",
        )

    def any_value(self, pointer: str) -> Any:
        if self.strict_shapes:
            self.unsupported(
                pointer,
                f"the subschema at {quoted(pointer)} accepts any value, "
                f"which {self.provider} cannot express",
            )
        return {}

    def nothing(self, pointer: str) -> Any:
        if not self.strict_shapes:
            self.approximated(
                pointer,
                f"the subschema at {quoted(pointer)} accepts nothing; "
                f"{self.provider} cannot say so, so it accepts anything",
            )
            return {}
        self.unsupported(
            pointer,
            f"the subschema at {quoted(pointer)} accepts nothing, "
            f"which {self.provider} cannot express",
        )
        return {"not": {}}

    # ----- normalization (exact, or widened with a note)

    def normalize(self, node: dict[str, Any], pointer: str, *, distribute: bool = True) -> Any:
        """`node` as one equivalent node without `allOf`, `const` or `$ref` siblings, its
        union's branches holding the keywords beside it; `False` when it accepts nothing."""
        node.pop("$defs", None)
        node.pop("definitions", None)
        for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            flag = node.get(exclusive)
            if isinstance(flag, bool):
                del node[exclusive]
                if flag and bound in node:
                    node[exclusive] = node.pop(bound)
        if "const" in node:
            value = node.pop("const")
            enum = node.get("enum")
            node["enum"] = [v for v in enum if _same(v, value)] if enum is not None else [value]
        if "$ref" in node and len(node) > 1:
            node = self._ref_siblings(node, pointer)
        elif (
            "allOf" in node
            and len(node["allOf"]) == 1
            and _only_ref(node["allOf"][0])
            and not any(key in ASSERTIONS for key in node if key != "allOf")
        ):  # `allOf: [{$ref}]` beside annotations, as a `$ref` beside annotations
            node = self._annotated_ref(node.pop("allOf")[0]["$ref"], node)
        if "allOf" in node:
            merged = self._merge_all_of(node, pointer)
            if merged is False:
                return False
            node = merged
        if "enum" in node:
            if not node["enum"]:
                return False
            if "type" in node and not _enum_within_type(node):
                return False
        if distribute and ("anyOf" in node) != ("oneOf" in node):
            node = self._distribute(node, pointer)
            if not isinstance(node, dict):
                return node
        return self._unevaluated(node, pointer, distribute=distribute)

    def _unevaluated(self, node: dict[str, Any], pointer: str, *, distribute: bool) -> Any:
        """`node` with its `unevaluatedProperties` as the `additionalProperties` it means once
        nothing beside it evaluates keys: both then apply to the keys `properties` and
        `patternProperties` leave. By now its `allOf` is merged (the parts' keys are the
        node's, as they were to it) and each branch of its union holds it (the branch's keys,
        as they were); a union not yet distributed keeps it. Where other keywords evaluate
        keys (`if`, `dependentSchemas`...) it is removed (noted) and, unless it is `false`,
        the object left open rather than closed over keys it would skip. Before 2019-09 it
        is no keyword: dropped, the object open unless it is `false`, as the library's
        undeclared-key walk reads it."""
        rest = node.get("unevaluatedProperties", _MISSING)
        if rest is _MISSING:
            return node
        keyword = self.index.draft >= 2019
        if keyword and not distribute and ("anyOf" in node or "oneOf" in node):
            return node
        beside = [key for key in node if key in _EVALUATING] if keyword else []
        if not keyword or beside or "additionalProperties" in node:
            # (`additionalProperties` evaluates every key the others leave: none is left.)
            del node["unevaluatedProperties"]
            if "additionalProperties" not in node:
                if beside:
                    names = ", ".join(f"`{key}`" for key in beside)
                    self.removed(
                        pointer,
                        "unevaluatedProperties",
                        f"{names} beside it evaluate keys it would skip",
                    )
                if rest is not False:
                    node["additionalProperties"] = True
            return node
        return {
            ("additionalProperties" if key == "unevaluatedProperties" else key): value
            for key, value in node.items()
        }

    def _ref_siblings(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        ref = node.pop("$ref")
        if self.index.draft <= 7:  # siblings of `$ref` are ignored before 2019-09
            return {"$ref": ref}
        if not any(key in ASSERTIONS for key in node):
            return self._annotated_ref(ref, node)
        node["allOf"] = [{"$ref": ref}, *node.get("allOf", [])]
        return node

    def _annotated_ref(self, ref: str, node: dict[str, Any]) -> dict[str, Any]:
        """A `$ref` with only annotations beside it: merged with its target to keep them, as
        long as that stays small (each merge repeats the target's subtree in a new place)."""
        target_pointer, _ = self.index.target(ref)
        if (
            target_pointer in self.index.recursive
            or target_pointer in self._inlining_set
            or self._merged_refs >= _MERGED_REFS
        ):
            self._cuts += 1
            return {"$ref": ref, **{k: v for k, v in node.items() if k in ANNOTATIONS}}
        self._merged_refs += 1
        return {**node, "allOf": [{"$ref": ref}]}

    def _resolve_part(self, part: Any, pointer: str) -> tuple[Any, str]:
        """`part` with `$ref` chains followed and normalized, and where it is; a `$ref` that
        leads back to a node being normalized stays as it is.

        A `$ref` target is the same node wherever it is named: it is normalized once per
        rewrite (unless that depended on the chain that reached it: then each time). A part
        written in place keeps its own union undistributed: merged, the union sits beside
        the merged keywords and is distributed when that node is rewritten, where doing it
        here would redo every union below for each union above."""
        hops = 0
        while isinstance(part, dict) and "$ref" in part and hops < 64:
            if self.index.draft > 7 and any(k != "$ref" and k in ASSERTIONS for k in part):
                break
            target_pointer, target = self.loop_free(part["$ref"])
            if target_pointer in self._resolving:
                self._cuts += 1
                return part, pointer
            part, pointer, hops = target, target_pointer, hops + 1
        if isinstance(part, dict) and part:
            if pointer in self._resolving:
                self._cuts += 1
                return part, pointer
            known = self._normalized.get(pointer, _MISSING) if hops else _MISSING
            if known is not _MISSING:
                return (dict(known) if isinstance(known, dict) else known), pointer
            self._part_budget -= 1
            if self._part_budget < 0:
                self.too_large(pointer)
                return {}, pointer
            cuts = self._cuts
            self._resolving.add(pointer)
            try:
                found = self.normalize(dict(part), pointer, distribute=bool(hops))
            finally:
                self._resolving.discard(pointer)
            if hops and cuts == self._cuts:
                self._normalized[pointer] = found
            return (dict(found) if isinstance(found, dict) and hops else found), pointer
        return part, pointer

    def _merge_all_of(self, node: dict[str, Any], pointer: str) -> Any:
        parts = node.pop("allOf")
        closures = [(node.get("additionalProperties"), set(_declared(node)))]
        for i, raw in enumerate(parts):
            at = child(pointer, "allOf", i)
            part, part_at = self._resolve_part(raw, at)
            if part is False:
                return False
            if part is True or not isinstance(part, dict) or not part:
                continue
            if "$ref" in part:
                self.removed(at, "$ref", "it leads back to the schema that holds it")
                continue
            closures.append((part.get("additionalProperties"), set(_declared(part))))
            if not self.combine(node, part, part_at):
                return False
        merged = set(_declared(node))
        if len(closures) > 1 and any(
            extra is not None and extra is not True and not merged <= names
            for extra, names in closures
        ):
            at = child(pointer, "allOf")
            self.approximated(
                at,
                f"the objects of `allOf` at {quoted(at)} were merged "
                "into one that accepts keys some of them reject",
            )
        return node

    def combine(self, out: dict[str, Any], part: Mapping[str, Any], at: str) -> bool:
        """Adds `part`'s keywords to `out`, so that `out` requires both. A keyword that cannot
        be written as one is removed (widening, with a note). False: nothing satisfies both."""
        if any(key in part for key in _ITEM_KEYWORDS):
            self._combine_items(out, part)
        for key, value in part.items():
            if key in ("$defs", "definitions") or key in _ITEM_KEYWORDS:
                continue
            if key == "unevaluatedProperties":
                # The part's own keys were all it saw; merged, it sees the others' too.
                self.approximated(
                    at,
                    f"`unevaluatedProperties` at {quoted(at)} was merged with the schemas "
                    "beside it: it no longer checks the keys they declare",
                )
            have = out.get(key, _MISSING)
            if have is not _MISSING and (
                key in ANNOTATIONS or key not in ASSERTIONS or _same(have, value)
            ):
                continue
            if key in _UNIONS and any(union in out for union in _UNIONS):
                self._multiply(out, key, value, at)
                continue
            if have is _MISSING:
                out[key] = value
                continue
            if key in ("properties", "patternProperties", "dependentSchemas"):
                merged = dict(have)
                for name, sub in value.items():
                    other = merged.get(name)
                    merged[name] = (
                        sub if other is None or _same(other, sub) else {"allOf": [other, sub]}
                    )
                out[key] = merged
            elif key == "required":
                out[key] = list(dict.fromkeys([*have, *value]))
            elif key == "dependentRequired":
                joined = {name: list(names) for name, names in have.items()}
                for name, names in value.items():
                    joined[name] = list(dict.fromkeys([*joined.get(name, []), *names]))
                out[key] = joined
            elif key == "type":
                common = _intersect_types(have, value)
                if common is None:
                    return False
                out[key] = common
            elif key == "enum":
                keys = {_value_key(v) for v in value}
                common_values = [v for v in have if _value_key(v) in keys]
                if not common_values:
                    return False
                out[key] = common_values
            elif key in _LOWER_BOUNDS and not isinstance(value, bool):
                out[key] = max(have, value)
            elif key in _UPPER_BOUNDS and not isinstance(value, bool):
                out[key] = min(have, value)
            elif key == "uniqueItems":
                out[key] = bool(have) or bool(value)
            elif key == "not":
                out[key] = {"anyOf": [have, value]}
            elif (
                key in _SCHEMA_VALUED and not isinstance(have, list) and not isinstance(value, list)
            ):
                if value is True:
                    continue
                if have is True:
                    out[key] = value
                elif have is False or value is False:
                    out[key] = False
                else:
                    out[key] = {"allOf": [have, value]}
            else:
                self.removed(at, key, "it differs from the same keyword it is merged with")
        return True

    @staticmethod
    def _combine_items(out: dict[str, Any], part: Mapping[str, Any]) -> None:
        """`part`'s item keywords added to `out` position by position: a tuple applies to its
        own positions, the schema beside it (`items` after `prefixItems`, `additionalItems`
        after a list `items`) to the rest, so each position takes what both give it. Exact:
        one part's `items` is never left applying where the other's tuple moved it."""
        mine, theirs = _tuple_of(out), _tuple_of(part)
        size = max(len(mine[1]), len(theirs[1]))
        tuple_ = [
            _both(
                mine[1][i] if i < len(mine[1]) else mine[2],
                theirs[1][i] if i < len(theirs[1]) else theirs[2],
            )
            for i in range(size)
        ]
        rest = _both(mine[2], theirs[2])
        end = next((i for i, sub in enumerate(tuple_) if sub is False), None)
        if end is not None:  # no array is longer than that position: nothing comes after it
            tuple_, rest = tuple_[:end], False
        kinds = {mine[0], theirs[0]} - {None}
        keyword = "prefixItems" if "prefixItems" in kinds or not kinds else "items"
        if not tuple_:
            new = {"items": rest}
        elif keyword == "items":
            new = {"items": tuple_, "additionalItems": rest}
        else:
            new = {"prefixItems": tuple_, "items": rest}
        for key in _ITEM_KEYWORDS:
            value = new.get(key, True)
            if value is True:
                out.pop(key, None)
            else:
                out[key] = value

    def _multiply(self, out: dict[str, Any], key: str, value: list[Any], at: str) -> None:
        """Two unions in one node: every pair of branches, or the second removed (noted)."""
        have_key = "anyOf" if "anyOf" in out else "oneOf"
        have = out[have_key]
        if len(have) * len(value) > _PRODUCT_LIMIT:
            self.removed(at, key, "it could not be combined with the union beside it")
            return
        del out[have_key]
        kind = "oneOf" if have_key == key == "oneOf" else "anyOf"
        if kind == "anyOf":
            for name, branches in ((have_key, have), (key, value)):
                if name == "oneOf" and not self.disjoint(list(branches)):
                    here = child(at, key)
                    self.approximated(
                        here,
                        f"`oneOf` at {quoted(here)} became `anyOf`: "
                        "a value may match more than one branch",
                    )
        out[kind] = [{"allOf": [a, b]} for a in have for b in value]

    def _distribute(self, node: dict[str, Any], pointer: str) -> Any:
        """`{A, anyOf: [B, C]}` as `anyOf: [A and B, A and C]`: the same values, and every
        branch one object with the node's properties (and its `type`, which providers need)."""
        key = "anyOf" if "anyOf" in node else "oneOf"
        keep: dict[str, Any] = {}
        asserting: dict[str, Any] = {}
        for name, value in node.items():
            if name != key:
                (asserting if name in ASSERTIONS else keep)[name] = value
        if not asserting:
            return node
        at = child(pointer, key)
        resolved = [self._resolve_part(raw, child(at, i)) for i, raw in enumerate(node[key])]
        if set(asserting) == {"type"} and all(
            part is False
            or (isinstance(part, dict) and "type" in part and _within(part["type"], node["type"]))
            for part, _ in resolved
        ):
            return node  # the type is implied by every branch: nothing to move
        size = len(asserting) + len(_declared(asserting))
        if len(resolved) * size > _DISTRIBUTE_LIMIT:
            return self._flatten_union(keep, asserting, resolved, at)
        branches: list[Any] = []
        for part, part_at in resolved:
            if part is False:
                continue  # a branch that accepts nothing: leaving it out changes nothing
            merged = dict(asserting)
            if isinstance(part, dict) and not (
                self.combine(merged, part, part_at)
                and self._close_over(merged, (asserting, part), at)
            ):
                continue
            branches.append(self._unevaluated(merged, pointer, distribute=False))
        if not branches:
            return False
        if (
            key == "anyOf"
            and "unevaluatedProperties" in asserting
            and self.index.draft >= 2019
            and not self.disjoint(branches)
        ):  # it saw the keys of every branch a value matches; in a branch, that branch's
            self.approximated(
                pointer,
                f"`unevaluatedProperties` at {quoted(pointer)} went into each branch of the "
                "union beside it, where it sees that branch's keys only: a value matching "
                "several branches may be refused",
            )
        return {**keep, key: branches}

    def _close_over(
        self, merged: dict[str, Any], sides: tuple[Mapping[str, Any], ...], at: str
    ) -> bool:
        """`merged` (a union's branch and the node beside it) with each side's closure over
        the properties only the other side declares: JSON Schema's `additionalProperties`
        sees the `properties` beside it alone, and once merged those would hide the names
        from it. `false` forbids such a name (a required one leaves the branch no object),
        a schema joins the name's own. False when the branch accepts nothing."""
        props = _declared(merged)
        changed: dict[str, Any] | None = None
        for side in sides:
            extra = side.get("additionalProperties")
            if extra is None or extra is True:
                continue
            own = _declared(side)
            outside = [name for name in props if name not in own]
            if not outside:
                continue
            if "patternProperties" in merged:  # a pattern may take the name: not followed
                self.approximated(
                    at,
                    f"the branches of the union at {quoted(at)} were merged with the object "
                    "beside it into objects that accept keys some of them reject",
                )
                continue
            if changed is None:
                changed = dict(props)
            for name in outside:
                if name not in changed:
                    continue
                if extra is not False:
                    changed[name] = {"allOf": [changed[name], extra]}
                elif name not in merged.get("required", ()):
                    del changed[name]  # the merged `additionalProperties` is `false` too
                elif _objects_only(merged):
                    return False
                else:
                    changed[name] = False  # objects fail; other values pass as they did
        if changed is not None:
            merged["properties"] = changed
        return True

    def _flatten_union(
        self,
        keep: dict[str, Any],
        asserting: dict[str, Any],
        resolved: list[tuple[Any, str]],
        at: str,
    ) -> dict[str, Any]:
        props = dict(_declared(asserting))
        added: dict[str, list[Any]] = {}
        for part, _ in resolved:
            if isinstance(part, dict):
                for name, sub in _declared(part).items():
                    if name not in props:
                        added.setdefault(name, []).append(sub)
        for name, subs in added.items():
            props[name] = subs[0] if len(subs) == 1 else {"anyOf": subs}
        self.approximated(
            at,
            f"the union at {quoted(at)} is not enforced: it has too many branches to repeat "
            "the object beside it in each, so their properties were added to that object",
        )
        out = {**keep, **asserting}
        if props:
            out["properties"] = props
        return out

    # ----- references

    def loop_free(self, ref: str) -> tuple[str, Any]:
        """Where `ref` points and what is there, to be merged in; `SchemaError` when that
        leads back to itself without going into a property or an item: merging it (and
        checking a value against it) would never end. (Kept as a `$ref` or inlined, such a
        target is cut where it comes round again.)"""
        target_pointer, target = self.index.target(ref)
        if target_pointer in self._loops:
            raise SchemaError(
                target_pointer,
                f"the subschema at {quoted(target_pointer)} refers back to itself without going "
                "into a property or an item: checking a value against it would never end",
            )
        return target_pointer, target

    def reference(self, ref: str, pointer: str, *, root: bool = False) -> Any:
        target_pointer, target = self.index.target(ref)
        recursive = target_pointer in self.index.recursive
        if recursive and not self.recursion and not root:
            self.unsupported(
                pointer,
                f"the subschema at {quoted(pointer)} is recursive, "
                f"which {self.provider} cannot enforce",
            )
        if self.inline_refs or root:
            return self.inline(target, target_pointer, pointer, root=root)
        return {"$ref": self.def_ref(target_pointer)}

    def inline(self, target: Any, target_pointer: str, pointer: str, *, root: bool = False) -> Any:
        if target_pointer in self._inlining_set:
            return self.cut_cycle(pointer)
        if len(self._inlining) >= _INLINE_DEPTH:
            self.approximated(
                pointer,
                f"the subschema at {quoted(pointer)} was left unconstrained: "
                "its `$ref`s nest too deep to inline",
            )
            return {}
        self._inlining.append(target_pointer)
        self._inlining_set.add(target_pointer)
        try:
            return self.schema(target, target_pointer, root=root)
        finally:
            self._inlining.pop()
            self._inlining_set.discard(target_pointer)

    def cut_cycle(self, pointer: str) -> Any:
        self.approximated(
            pointer,
            f"the recursion at {quoted(pointer)} was cut: below it the value is not constrained",
        )
        return {}

    def def_ref(self, target_pointer: str) -> str:
        if target_pointer == "":
            return "#"
        name = self._def_names.get(target_pointer)
        if name is None:
            parts = target_pointer.split("/")
            if len(parts) == 3 and parts[1] in ("$defs", "definitions"):
                base = parts[2].replace("~1", "/").replace("~0", "~")
            else:
                base = re.sub(r"[^A-Za-z0-9_.-]+", "_", target_pointer.strip("/")) or "root"
            name, n = base, 2
            while name in self._names_taken:
                name, n = f"{base}_{n}", n + 1
            self._def_names[target_pointer] = name
            self._names_taken.add(name)
            self._def_queue.append((target_pointer, name))
        return "#/$defs/" + name.replace("~", "~0").replace("/", "~1")

    # ----- one node

    def rewrite(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        kinds = node.get("type")
        if kinds is not None:
            vacuous = vacuous_keywords(frozenset(_type_set(kinds)))
            if any(key in vacuous for key in node):  # they apply to no type the node allows
                node = {k: v for k, v in node.items() if k not in vacuous}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key != "enum":
                self.keyword(key, value, node, out, pointer)
        if "enum" in node:
            self.enum(list(node["enum"]), node, out, pointer)
        self.shape(out, node, pointer)
        return out

    def keyword(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        if key == "contentSchema":
            # An annotation to JSON Schema, but the type checks it (`Json[list[int]]`: the
            # JSON a string holds), and no provider does: the string is any string to it.
            # (Beside no string, it holds nothing: dropped as the annotation it is.)
            kinds = node.get("type", "string")
            if "string" in (kinds if isinstance(kinds, list) else [kinds]):
                self.removed(pointer, key, f"{self.provider} does not enforce the JSON in a string")
        elif key == "properties":
            out[key] = {
                name: self.schema(sub, child(pointer, key, name)) for name, sub in value.items()
            }
        elif key == "anyOf":
            out[key] = [self.schema(sub, child(pointer, key, i)) for i, sub in enumerate(value)]
        elif key == "oneOf":
            self.one_of(value, node, out, pointer)
        elif key == "items":
            if isinstance(value, list | tuple):
                self.tuple_items(list(value), node, out, pointer)
            elif "prefixItems" not in node or self.prefix_items:
                out[key] = self.schema(value, child(pointer, key))
            # else it only applies after the tuple, removed (and noted) with the tuple
        elif key == "prefixItems":
            self.tuple_items(value, node, out, pointer, prefix=True)
        elif key == "additionalItems":
            if not isinstance(node.get("items"), list | tuple):
                return
            if not self.prefix_items:
                self.removed(pointer, key)
        elif key == "additionalProperties":
            self.additional_properties(value, node, out, pointer)
        elif key == "patternProperties":
            self.removed(pointer, key)
            out["additionalProperties"] = True  # open, or the closed convention would narrow
            self.unsupported(
                pointer,
                f"the subschema at {quoted(pointer)} is a map (`patternProperties`), "
                f"which {self.provider} cannot enforce",
            )
        elif key == "format":
            if self.formats is None or value in self.formats:
                out[key] = value
                # (A dialect that keeps every format, a grammar's, says which it ignores.)
                narrowed = _NARROWED_FORMATS.get(value) if self.formats is not None else None
                if narrowed is not None:
                    self.approximated(
                        pointer, f"`format` `{value}` at {quoted(pointer)} allows {narrowed}"
                    )
            else:
                self.removed(pointer, key, f"{self.provider} does not enforce `{value}`")
        elif key in _DYNAMIC_REFS:  # before `keep`: a grammar keeps what it does not name
            self.removed(pointer, key, f"{self.provider} does not follow dynamic references")
        elif key == "pattern" and key in self.keep and self.pattern_read_otherwise(value, pointer):
            return
        elif key in self.keep or key in self.annotations:
            out[key] = value if type(value) is str else copy_json(value)
        elif key in ASSERTIONS:
            self.removed(pointer, key)
        elif key in NOTED_ANNOTATIONS:
            self.dropped_annotation(pointer, key)
        # other annotations and unknown keywords never reject anything: removing them is exact

    def pattern_read_otherwise(self, pattern: Any, pointer: str) -> bool:
        """Whether `pattern` is one the provider would read as another language than the
        type's validation does (`read_otherwise`): removed, with a note."""
        foreign = read_otherwise(pattern) if isinstance(pattern, str) else None
        if foreign is not None:
            self.removed(
                pointer, "pattern", f"it has {foreign}, which {self.provider} would read otherwise"
            )
        return foreign is not None

    def one_of(
        self, value: list[Any], node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        at = child(pointer, "oneOf")
        branches = [self.schema(sub, child(at, i)) for i, sub in enumerate(value)]
        if "anyOf" in node:
            self.removed(pointer, "oneOf", "it sits beside an `anyOf`")
            return
        if not self.disjoint(value):
            self.approximated(
                at,
                f"`oneOf` at {quoted(at)} became `anyOf`: a value may match more than one branch",
            )
        out["anyOf"] = branches

    def disjoint(self, branches: list[Any]) -> bool:
        return branches_disjoint(self.index, branches)

    def tuple_items(
        self,
        value: list[Any],
        node: dict[str, Any],
        out: dict[str, Any],
        pointer: str,
        *,
        prefix: bool = False,
    ) -> None:
        key = "prefixItems" if prefix else "items"
        if not self.prefix_items:
            self.removed(pointer, key, f"{self.provider} does not enforce tuples")
            return
        at = child(pointer, key)
        out["prefixItems"] = [self.schema(sub, child(at, i)) for i, sub in enumerate(value)]
        extra = node.get("additionalItems") if not prefix else None
        if extra is not None and extra is not True:
            out["items"] = self.schema(extra, child(pointer, "additionalItems"))

    def additional_properties(
        self, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        if "patternProperties" in node:
            if value is not True:
                self.removed(
                    pointer, "additionalProperties", "it applies beside `patternProperties`"
                )
            return
        if value is False:
            out["additionalProperties"] = False
            return
        if self.maps:
            out["additionalProperties"] = self.schema(value, child(pointer, "additionalProperties"))
            return
        kind = "a map" if "properties" not in node else "an object open to other keys"
        self.unsupported(
            pointer,
            f"the subschema at {quoted(pointer)} is {kind}, which {self.provider} cannot enforce",
        )
        self.open_object(value, out, pointer)

    def open_object(self, value: Any, out: dict[str, Any], pointer: str) -> None:
        """What a dialect sends for a map it cannot enforce; by default the map as it is."""
        out["additionalProperties"] = (
            True if value is True else self.schema(value, child(pointer, "additionalProperties"))
        )

    def enum(
        self, values: list[Any], node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        """The values with their `type` (providers want one), split by type when they mix;
        types whose values the provider cannot list are widened to the whole type (noted)."""
        allowed = self.enum_kinds | ({"integer"} if "number" in self.enum_kinds else set())
        groups: dict[str, list[Any]] = {}
        for v in values:
            kind = json_kind(v)
            groups.setdefault("number" if kind == "integer" else kind, []).append(v)
        branches: list[dict[str, Any]] = []
        wide: list[dict[str, Any]] = []
        for kind, members in groups.items():
            if kind == "number":
                kind = "integer" if all(json_kind(v) == "integer" for v in members) else "number"
            if kind == "null":
                branches.append({"type": "null"})
            elif kind in allowed:
                branches.append({"type": kind, "enum": copy_json(members)})
            elif kind == "boolean" and len(set(members)) == 2:
                # Both values, not two entries: an alias lists `true` twice.
                branches.append({"type": "boolean"})
            else:
                wide.append({"type": kind})
                branches.append(wide[-1])
        if len(branches) > 1 and ("anyOf" in out or "anyOf" in node or "oneOf" in node):
            self.removed(pointer, "enum", f"{self.provider} cannot list these values")
            return
        if wide:
            at = child(pointer, "enum")
            self.approximated(
                at,
                f"`enum` at {quoted(at)} was widened to the types of values "
                f"{self.provider} cannot list",
            )
        if len(branches) == 1:
            out.update(branches[0])
        else:
            out.pop("type", None)
            self.widened_branches(wide, node, out, pointer)
            out["anyOf"] = branches

    def widened_branches(
        self, wide: list[dict[str, Any]], node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        """Each branch a split `enum` widened to a whole type takes the keywords beside it
        that apply to that type (exact: they constrain no other) and is shaped as the type
        alone would be: a widened `{"type": "array"}` is no more sendable in a union."""
        typed = [key for key in out if key in _TYPED_KEYWORDS]
        for branch in wide:
            vacuous = vacuous_keywords(frozenset(_type_set(branch["type"])))
            moved = [key for key in typed if key not in vacuous]
            branch.update((key, out.pop(key)) for key in moved)
            self.shape(branch, node, pointer)

    # ----- after the keywords

    def required_undeclared(self, out: dict[str, Any], pointer: str, *, closed: bool) -> None:
        """An object `closed` to other keys whose `required` names a property it does not
        declare accepts no object. A strict mode cannot say so (as `nothing`): unsupported,
        and sent as it is; elsewhere the names are removed, a wider object (noted). An
        object open to other keys takes such a name among them: nothing to say."""
        props = out.get("properties")
        required = out.get("required")
        if not closed or not isinstance(props, dict) or not isinstance(required, list):
            return
        undeclared = [name for name in required if name not in props]
        if not undeclared:
            return
        if self.strict_shapes:
            for name in undeclared:
                self.unsupported(
                    pointer,
                    f"the object at {quoted(pointer)} requires `{name}`, which it does not declare",
                )
            return
        kept = [name for name in required if name in props]
        if kept:
            out["required"] = kept
        else:
            del out["required"]
        self.removed(pointer, "required", "it names properties the object does not declare")

    def shape(self, out: dict[str, Any], node: dict[str, Any], pointer: str) -> None:
        if (
            self.close_objects
            and "properties" in out
            and "additionalProperties" not in out
            and "additionalProperties" not in node
            and "patternProperties" not in node
        ):
            out["additionalProperties"] = False
        if not self.strict_shapes:
            return
        kinds = out.get("type")
        typed = kinds is not None or any(k in out for k in ("anyOf", "$ref"))
        if not typed:
            what = "has no `type`" if out else "accepts any value"
            self.unsupported(
                pointer,
                f"the subschema at {quoted(pointer)} {what}, which {self.provider} cannot express",
            )
            return
        names = _type_set(kinds) if kinds is not None else set()
        if (
            "object" in names
            and "properties" not in out
            and out.get("additionalProperties") is not False
            and "additionalProperties" not in node
            and "patternProperties" not in node
        ):
            self.unsupported(
                pointer,
                f"the subschema at {quoted(pointer)} is an object open to any keys, "
                f"which {self.provider} cannot enforce",
            )
        if "array" in names and "items" not in out and "prefixItems" not in out:
            self.unsupported(
                pointer,
                f"the array at {quoted(pointer)} does not constrain its items, "
                f"which {self.provider} cannot express",
            )


def _loops(index: SchemaIndex) -> frozenset[str]:
    """The `$ref` targets that lead back to themselves at the same place of the value:
    through `$ref`s and the keywords that apply to the value itself (`allOf`, `anyOf`,
    `not`...), never through a property or an item. Only targets that recurse at all can."""
    leads: dict[str, set[str]] = {}
    for target in index.recursive:
        found = leads[target] = set()
        stack = [_lookup(index, target)]
        while stack:
            node = stack.pop()
            if not isinstance(node, Mapping):
                continue
            ref = node.get("$ref")
            if isinstance(ref, str) and ref in index.targets:
                found.add(index.targets[ref])
            for key in _IN_PLACE & node.keys():
                sub = node[key]
                stack.extend(sub if isinstance(sub, list | tuple) else [sub])
            for key in ("dependentSchemas", "dependencies"):
                subs = node.get(key)
                if isinstance(subs, Mapping):
                    stack.extend(v for v in subs.values() if not isinstance(v, list | tuple))
    loops = set()
    for start, first in leads.items():
        seen: set[str] = set()
        stack = list(first)
        while stack:
            target = stack.pop()
            if target == start:
                loops.add(start)
                break
            if target not in seen:
                seen.add(target)
                stack.extend(leads.get(target, ()))
    return frozenset(loops)


def _lookup(index: SchemaIndex, pointer: str) -> Any:
    return lookup(index.root, pointer)


def _only_ref(node: Any) -> bool:
    return (
        isinstance(node, dict)
        and "$ref" in node
        and all(key == "$ref" or key in ANNOTATIONS for key in node)
    )


def follow(index: SchemaIndex, node: Any) -> Any:
    """`node` with `$ref`-only chains followed (at most 64 hops), without rewriting anything."""
    hops = 0
    while _only_ref(node) and hops < 64:
        node = index.target(node["$ref"])[1]
        hops += 1
    return node


def _values(node: Any, index: SchemaIndex | None = None) -> list[Any] | None:
    """The values `node` is limited to (`const`, `enum`, or those of an `allOf` part)."""
    if not isinstance(node, dict):
        return None
    if "const" in node:
        return [node["const"]]
    if "enum" in node:
        return list(node["enum"])
    parts = node.get("allOf")
    if isinstance(parts, list) and index is not None:
        for part in parts:
            values = _values(follow(index, part), index)
            if values is not None:
                return values  # the node's values are among these
    return None


def _kinds(node: Mapping[str, Any]) -> Any:
    values = _values(node)
    if values is not None:
        return sorted({json_kind(v) for v in values})
    return node.get("type")


def _objects_only(node: Mapping[str, Any]) -> bool:
    kinds = _kinds(node)
    return kinds is not None and _type_set(kinds) == {"object"}


def _pair_disjoint(index: SchemaIndex, left: Any, right: Any) -> bool:
    if not isinstance(left, Mapping) or not isinstance(right, Mapping):
        return left is False or right is False
    kinds_left, kinds_right = _kinds(left), _kinds(right)
    if (
        kinds_left is not None
        and kinds_right is not None
        and kinds_disjoint(kinds_left, kinds_right)
    ):
        return True
    values_left, values_right = _values(left), _values(right)
    if values_left is not None and values_right is not None:
        return values_disjoint(values_left, values_right)
    if not (_objects_only(left) and _objects_only(right)):
        return False  # a discriminator tells objects apart, not other values
    common = set(left.get("required", ())) & set(right.get("required", ()))
    props_left, props_right = _declared(left), _declared(right)
    for name in common:
        a = _values(follow(index, props_left.get(name)), index)
        b = _values(follow(index, props_right.get(name)), index)
        if a is not None and b is not None and values_disjoint(a, b):
            return True
    return False


def branches_disjoint(index: SchemaIndex, branches: list[Any]) -> bool:
    """Whether no value can match two `branches` (by types, enums or a discriminator).

    Pair by pair for a few branches; for many, by hashing: distinct types, distinct values,
    or one discriminating property all branches require, so that the cost stays linear.
    """
    shapes = [follow(index, b) for b in branches]
    if len(shapes) <= _PAIRWISE:
        return all(
            _pair_disjoint(index, shapes[i], shapes[j])
            for i in range(len(shapes))
            for j in range(i + 1, len(shapes))
        )
    live = [s for s in shapes if s is not False]
    if not all(isinstance(s, Mapping) for s in live):
        return False
    seen: set[Any] = set()
    if all(_values(s) is not None for s in live):
        for s in live:
            keys = {_value_key(v) for v in _values(s) or ()}
            if keys & seen:
                return False
            seen |= keys
        return True
    kinds = [_kinds(s) for s in live]
    if all(k is not None for k in kinds):
        total = 0
        for k in kinds:
            names = _type_set(k)
            total += len(names)
            seen |= names
        if total == len(seen):
            return True
    if not all(_objects_only(s) for s in live):
        return False
    common = set.intersection(*(set(s.get("required", ())) for s in live))
    for name in sorted(common):
        seen = set()
        for s in live:
            values = _values(follow(index, _declared(s).get(name)), index)
            if values is None:
                break
            keys = {_value_key(v) for v in values}
            if keys & seen:
                break
            seen |= keys
        else:
            return True
    return False
