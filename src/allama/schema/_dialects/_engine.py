"""The walk every rewriting dialect shares; each dialect says which keywords it keeps.

A dialect subclass sets the keyword tables and overrides a few hooks. The engine:

- reads the schema with `preflight` (bad input is a `SchemaError` before anything else);
- normalizes each node without changing what it accepts: `$defs` containers are rebuilt,
  draft-4 boolean `exclusiveMinimum` becomes the numeric form, a `$ref` with siblings and
  an `allOf` are merged when the merge is exact;
- copies kept keywords, removes the rest (an `APPROXIMATED` note for assertions, silently
  for annotations and unknown keywords, which never change what a schema accepts);
- either keeps `$ref`s, moving every target under `$defs`, or inlines them.

Objects that declare `properties` and say nothing about other keys are treated as closed,
the library's convention (the undeclared-key walk rejects such keys), so closing them with
`additionalProperties: false` is exact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from allama.schema._pointer import child, display, lookup, quoted
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.schema._walk import (
    ANNOTATIONS,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_SINGLE,
    SchemaIndex,
    copy_json,
    preflight,
)
from allama.types import WarningKind

__all__ = [
    "Engine",
    "admits_null",
    "branches_disjoint",
    "follow",
    "json_kind",
    "kinds_disjoint",
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
    }
    | SCHEMA_LISTS
    | (SCHEMA_SINGLE - {"contentSchema"})
    | (SCHEMA_MAPS - {"$defs", "definitions"})
)
"""Keywords that can reject an instance: removing one widens the schema."""

_LOWER_BOUNDS = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"})
_UPPER_BOUNDS = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"})
_INLINE_DEPTH = 32
_BUDGET = 20_000
_MAX_NESTING = 100


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


def values_disjoint(left: list[Any], right: list[Any]) -> bool:
    """Whether no value of `left` equals one of `right`."""
    return not any(_same(a, b) for a in left for b in right)


def _type_set(kinds: Any) -> set[str]:
    names = set(kinds) if isinstance(kinds, list | tuple) else {kinds}
    if "number" in names:
        names.add("integer")
    return names


def kinds_disjoint(left: Any, right: Any) -> bool:
    """Whether two `type` values share no JSON type (`integer` is a `number`)."""
    return not (_type_set(left) & _type_set(right))


def admits_null(schema: Any) -> bool:
    """Whether `null` is certainly valid under an output schema node (no `$ref` followed)."""
    if schema is True or schema == {}:
        return True
    if not isinstance(schema, Mapping) or "$ref" in schema or "not" in schema:
        return False
    kind = schema.get("type")
    if kind is not None and "null" not in _type_set(kind):
        return False
    if "enum" in schema and not any(v is None for v in schema["enum"]):
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    for key in ("anyOf", "oneOf"):
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


def _merge(base: dict[str, Any], part: Mapping[str, Any]) -> dict[str, Any] | None:
    """`base` and `part` as one node accepting exactly both, or `None` when that is not simple."""
    out = dict(base)
    for key, value in part.items():
        if key in ("$defs", "definitions"):
            continue
        if key not in out:
            out[key] = value
        elif key in ANNOTATIONS or _same(out[key], value):
            continue
        elif key == "properties" and isinstance(value, Mapping):
            merged = dict(out[key])
            for name, sub in value.items():
                if name in merged and not _same(merged[name], sub):
                    return None
                merged[name] = sub
            out[key] = merged
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key == "type":
            common = _intersect_types(out[key], value)
            if common is None:
                return None
            out[key] = common
        elif key in _LOWER_BOUNDS and not isinstance(value, bool):
            out[key] = max(out[key], value)
        elif key in _UPPER_BOUNDS and not isinstance(value, bool):
            out[key] = min(out[key], value)
        else:
            return None
    return out


def _closed(node: Mapping[str, Any]) -> bool:
    if node.get("additionalProperties") is False:
        return True
    return "properties" in node and not any(
        key in node
        for key in ("additionalProperties", "patternProperties", "unevaluatedProperties")
    )


class Engine:
    """One rewrite of one schema. Subclasses set the tables; `run()` returns the `Rewrite`."""

    provider: ClassVar[str] = ""
    """How notes name the target, e.g. "OpenAI strict mode"."""
    keep: ClassVar[frozenset[str]] = frozenset({"type", "enum", "required"})
    """Data keywords copied as they are."""
    annotations: ClassVar[frozenset[str]] = frozenset({"title", "description"})
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
        self.index: SchemaIndex = preflight(schema)
        self.notes: list[SchemaNote] = []
        self._seen: set[tuple[WarningKind, str, str]] = set()
        self.defs: dict[str, Any] = {}
        self._def_names: dict[str, str] = {}
        self._def_queue: list[tuple[str, str]] = []
        self._inlining: list[str] = []
        self._budget = _BUDGET
        self._depth = 0
        self._as_written: set[str] = set()
        """Pointers of nodes a dialect leaves as the caller wrote them (no strict rewrite)."""

    # ----- notes

    def note(self, kind: WarningKind, pointer: str, message: str) -> None:
        key = (kind, display(pointer), message)
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
        return Rewrite(schema=out if isinstance(out, dict) else {}, notes=tuple(self.notes))

    def finish(self, out: dict[str, Any]) -> None:
        """Whole-schema checks (limits, the root); the default has none."""

    # ----- nodes

    def schema(self, node: Any, pointer: str, *, root: bool = False) -> Any:
        self._budget -= 1
        if self._budget < 0:
            self.approximated(
                pointer,
                f"the subschema at {quoted(pointer)} was left unconstrained: "
                "the schema is too large to rewrite whole",
            )
            return {}
        if node is True or (isinstance(node, Mapping) and not node):
            return self.any_value(pointer)
        if node is False:
            return self.nothing(pointer)
        work = self.normalize(dict(node), pointer)
        if "$ref" in work:
            return self.reference(work["$ref"], pointer, root=root)
        if not work:
            return self.any_value(pointer)
        if self._depth >= _MAX_NESTING:
            self.approximated(
                pointer,
                f"the subschema at {quoted(pointer)} was left unconstrained: "
                "it nests too deep to rewrite",
            )
            return {}
        self._depth += 1
        try:
            return self.rewrite(work, pointer)
        finally:
            self._depth -= 1

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

    def normalize(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
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
        if "allOf" in node:
            node = self._merge_all_of(node, pointer)
        return node

    def _ref_siblings(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        ref = node.pop("$ref")
        if self.index.draft <= 7:
            return {"$ref": ref}
        siblings = {k: v for k, v in node.items() if k not in ANNOTATIONS}
        target_pointer, _ = self.index.target(ref)
        if target_pointer in self.index.recursive or target_pointer in self._inlining:
            for key in siblings:
                self.removed(pointer, key, "it sits beside a recursive `$ref`")
            return {"$ref": ref}
        node["allOf"] = [{"$ref": ref}, *node.get("allOf", [])]
        return node

    def _resolve_part(self, part: Any, pointer: str) -> Any:
        hops = 0
        while isinstance(part, Mapping) and set(part) - ANNOTATIONS == {"$ref"} and hops < 64:
            target_pointer, target = self.index.target(part["$ref"])
            if target_pointer in self.index.recursive:
                return part
            part, pointer, hops = target, target_pointer, hops + 1
        if isinstance(part, Mapping) and ("allOf" in part or "$ref" in part) and hops < 64:
            return self.normalize(dict(part), pointer)
        return part

    def _merge_all_of(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        parts = node.pop("allOf")
        merged = node
        shapes: list[Mapping[str, Any]] = [node]
        failed = False
        for i, raw in enumerate(parts):
            part = self._resolve_part(raw, child(pointer, "allOf", i))
            if part is True or part == {}:
                continue
            result = None
            if isinstance(part, Mapping) and "$ref" not in part and "allOf" not in part:
                result = _merge(merged, part)
            if result is None:
                failed = True
                continue
            merged = result
            shapes.append(part)
        if failed:
            self.removed(pointer, "allOf", "its parts could not be merged into one schema")
        declared = [set(s.get("properties", {})) for s in shapes]
        closed = [_closed(s) for s in shapes]
        if (any(closed) and not _closed(merged)) or any(
            closed[i] and not declared[j] <= declared[i]
            for i in range(len(shapes))
            for j in range(len(shapes))
        ):
            self.approximated(
                child(pointer, "allOf"),
                f"the objects of `allOf` at {quoted(child(pointer, 'allOf'))} were merged "
                "into one that accepts keys some of them reject",
            )
        return merged

    # ----- references

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
        if target_pointer in self._inlining:
            return self.cut_cycle(pointer)
        if len(self._inlining) >= _INLINE_DEPTH:
            self.approximated(
                pointer,
                f"the subschema at {quoted(pointer)} was left unconstrained: "
                "its `$ref`s nest too deep to inline",
            )
            return {}
        self._inlining.append(target_pointer)
        try:
            return self.schema(target, target_pointer, root=root)
        finally:
            self._inlining.pop()

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
            taken = set(self._def_names.values())
            while name in taken:
                name, n = f"{base}_{n}", n + 1
            self._def_names[target_pointer] = name
            self._def_queue.append((target_pointer, name))
        return "#/$defs/" + name.replace("~", "~0").replace("/", "~1")

    # ----- one node

    def rewrite(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            self.keyword(key, value, node, out, pointer)
        self.shape(out, node, pointer)
        return out

    def keyword(
        self, key: str, value: Any, node: dict[str, Any], out: dict[str, Any], pointer: str
    ) -> None:
        at = child(pointer, key)
        if key == "properties":
            out[key] = {name: self.schema(sub, child(at, name)) for name, sub in value.items()}
        elif key == "anyOf":
            out[key] = [self.schema(sub, child(at, i)) for i, sub in enumerate(value)]
        elif key == "oneOf":
            self.one_of(value, node, out, pointer)
        elif key == "items":
            if isinstance(value, list | tuple):
                self.tuple_items(list(value), node, out, pointer)
            else:
                out[key] = self.schema(value, at)
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
        elif key == "enum":
            self.enum(list(value), node, out, pointer)
        elif key == "format":
            if self.formats is None or value in self.formats:
                out[key] = value
            else:
                self.removed(pointer, key, f"{self.provider} does not enforce `{value}`")
        elif key in self.keep or key in self.annotations:
            out[key] = copy_json(value)
        elif key in ASSERTIONS:
            self.removed(pointer, key)
        # annotations and unknown keywords never reject anything: removing them is exact

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
        allowed = self.enum_kinds | ({"integer"} if "number" in self.enum_kinds else set())
        kept = [v for v in values if json_kind(v) in allowed]
        if len(kept) == len(values):
            out["enum"] = copy_json(values)
            return
        at = child(pointer, "enum")
        others: dict[str, list[Any]] = {}
        for v in values:
            if json_kind(v) not in allowed:
                others.setdefault(json_kind(v), []).append(v)
        branches: list[dict[str, Any]] = [{"enum": copy_json(kept)}] if kept else []
        exact = True
        for kind, members in others.items():
            if kind == "null":
                branches.append({"type": "null"})
            elif kind == "boolean" and {True, False} <= set(members):
                branches.append({"type": "boolean"})
            else:
                branches.append({"type": kind})
                exact = False
        if "anyOf" in node or "oneOf" in node:
            self.removed(pointer, "enum", f"{self.provider} cannot list these values")
            return
        if not exact:
            self.approximated(
                at,
                f"`enum` at {quoted(at)} was widened to the types of values "
                f"{self.provider} cannot list",
            )
        if len(branches) > 1:
            out["anyOf"] = branches
        elif "type" not in node:
            out["type"] = branches[0]["type"]

    # ----- after the keywords

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
        typed = kinds is not None or any(k in out for k in ("enum", "anyOf", "$ref"))
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


def _lookup(index: SchemaIndex, pointer: str) -> Any:
    return lookup(index.root, pointer)


def follow(index: SchemaIndex, node: Any) -> Any:
    """`node` with `$ref`-only chains followed (at most 64 hops), without rewriting anything."""
    hops = 0
    while isinstance(node, Mapping) and set(node) - ANNOTATIONS == {"$ref"} and hops < 64:
        node = index.target(node["$ref"])[1]
        hops += 1
    return node


def _values(node: Any) -> list[Any] | None:
    if not isinstance(node, Mapping):
        return None
    if "const" in node:
        return [node["const"]]
    if "enum" in node:
        return list(node["enum"])
    return None


def _kinds(node: Mapping[str, Any]) -> Any:
    values = _values(node)
    if values is not None:
        return sorted({json_kind(v) for v in values})
    return node.get("type")


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
    common = set(left.get("required", ())) & set(right.get("required", ()))
    props_left, props_right = left.get("properties", {}), right.get("properties", {})
    for name in common:
        a = _values(follow(index, props_left.get(name)))
        b = _values(follow(index, props_right.get(name)))
        if a is not None and b is not None and values_disjoint(a, b):
            return True
    return False


def branches_disjoint(index: SchemaIndex, branches: list[Any]) -> bool:
    """Whether no value can match two `branches` (by types, enums or a discriminator)."""
    shapes = [follow(index, b) for b in branches]
    return all(
        _pair_disjoint(index, shapes[i], shapes[j])
        for i in range(len(shapes))
        for j in range(i + 1, len(shapes))
    )
