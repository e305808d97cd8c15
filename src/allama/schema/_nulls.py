"""Removing the `null`s a strict mode let the model send for optional properties.

Strict modes that require every property make optional ones nullable. A `null` for an
optional property whose own schema admits no `null` is such a stand-in: removing it lets
the default apply. A `null` that the schema admits (an `Optional` field), or one for a
required property or a map entry, is kept, so validation sees what the model meant.

One object is read as the dialects write it: the node, its `allOf` parts and, when it holds
a union, the branch the value matches (chosen by the constants it carries, the properties it
requires, then the most keys it declares). Map values (`additionalProperties`,
`patternProperties`) and array items are walked too.

The walk is compiled: what a set of schemas asks of an object (its "views", one per union
branch) is worked out once and kept, so normalising the next value is dictionary look-ups.
A type's schema keeps its compiled walk (`derived`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from itertools import islice, product
from typing import Any

from pydantic_core import SchemaError, SchemaValidator, core_schema

from allama.schema._resolve import admits_null, resolve
from allama.schema._types import derived

__all__ = ["NullWalk", "may_hold_stand_in_nulls", "normalize_strict_nulls"]

_MEMO_SIZE = 4096
"""Plans kept per walk."""

_VIEWS = 64
"""Readings of one object kept (union branches times union branches...)."""
_MAX_DEPTH = 256
_MISSING: Any = object()

KeySearch = Callable[[str], object]
"""Whether a pattern is found in a key (truthy: found)."""


@lru_cache(maxsize=1024)
def key_search(pattern: str) -> KeySearch | None:
    """How pydantic looks for a `patternProperties` pattern in a key: with Rust's `regex`,
    its default engine, which reads patterns Python's `re` cannot (`\\p{L}`, `\\z`) and some
    it reads otherwise (`$` before a final line break); with `re` where Rust's cannot read
    the pattern (a lookaround: the type then validates with `regex_engine="python-re"`).
    `None` when neither reads it."""
    try:
        return SchemaValidator(core_schema.str_schema(pattern=pattern)).isinstance_python
    except (SchemaError, RecursionError, OverflowError):
        pass
    try:
        return re.compile(pattern).search
    except (re.error, RecursionError, OverflowError):
        return None


def normalize_strict_nulls(value: Any, schema: dict[str, Any]) -> Any:
    """`value` without stand-in `null`s; `value` itself when there were none (never changed).

    >>> schema = {"type": "object", "properties": {"tags": {"type": "array"}}}
    >>> normalize_strict_nulls({"tags": None}, schema)
    {}
    """
    return null_walk(schema).normalize(value)


def may_hold_stand_in_nulls(schema: dict[str, Any]) -> bool:
    """Whether any object reachable in `schema` has an optional property whose schema admits
    no `null`: when not, `normalize_strict_nulls` can only return its value unchanged.

    Kept with a type's schema, so asking again costs a look-up.

    >>> may_hold_stand_in_nulls({"type": "object", "properties": {"n": {"type": "integer"}}})
    True
    >>> may_hold_stand_in_nulls({"type": "object", "properties": {"n": {"type": "integer"}},
    ...     "required": ["n"]})
    False
    """
    return derived(schema, may_hold_stand_in_nulls, lambda: null_walk(schema).any_removable())


def null_walk(schema: dict[str, Any]) -> NullWalk:
    """The walk for `schema`: kept with a type's schema (never changed), fresh otherwise."""
    return derived(schema, NullWalk, lambda: NullWalk(schema))


def _value_key(value: Any) -> Any:
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if value is None or isinstance(value, str):
        return value
    return ("json", repr(value))


def _kinds_of(schema: dict[str, Any]) -> frozenset[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    names = set(kind) if isinstance(kind, list) else {kind}
    if "number" in names:
        names.add("integer")
    return frozenset(names)


class _Field:
    """One declared property of a view: its schemas, whether a `null` for it is a stand-in,
    and (once asked for) the plan of its value."""

    __slots__ = ("admits_null", "plan", "removable", "schemas")

    def __init__(self, schemas: tuple[Any, ...], required: bool, root: dict[str, Any]) -> None:
        self.schemas = schemas
        self.admits_null = all(admits_null(s, root) for s in schemas)
        self.removable = not required and not self.admits_null
        self.plan: _Plan | None = None


class _View:
    """One reading of an object or array: the nodes that make it up, merged."""

    __slots__ = ("extra", "fields", "items", "kinds", "patterns", "prefix", "required", "values")

    def __init__(self, nodes: list[dict[str, Any]], root: dict[str, Any]) -> None:
        declared: dict[str, list[Any]] = {}
        required: set[str] = set()
        kinds: frozenset[str] | None = None
        extra: list[Any] = []
        patterns: list[tuple[KeySearch, Any]] = []
        items: list[Any] = []
        prefix: list[list[Any]] = []
        for node in nodes:
            props = node.get("properties")
            if isinstance(props, dict):
                for name, sub in props.items():
                    declared.setdefault(name, []).append(sub)
            names = node.get("required")
            if isinstance(names, list):
                required.update(name for name in names if isinstance(name, str))
            own = _kinds_of(node)
            if own is not None:
                kinds = own if kinds is None else kinds & own
            if isinstance(node.get("additionalProperties"), dict):
                extra.append(node["additionalProperties"])
            pattern_props = node.get("patternProperties")
            if isinstance(pattern_props, dict):
                for pattern, sub in pattern_props.items():
                    search = key_search(pattern)
                    if search is not None:
                        patterns.append((search, sub))
            leading = node.get("prefixItems")
            rest = node.get("items")
            if isinstance(rest, list):
                leading, rest = rest, node.get("additionalItems")
            if isinstance(leading, list):
                for index, sub in enumerate(leading):
                    while len(prefix) <= index:
                        prefix.append([])
                    prefix[index].append(sub)
            if isinstance(rest, dict):
                items.append(rest)
        self.fields = {
            name: _Field(tuple(subs), name in required, root) for name, subs in declared.items()
        }
        self.required = frozenset(required)
        self.kinds = kinds
        self.extra = tuple(extra)
        self.patterns = tuple(patterns)
        self.items = tuple(items)
        self.prefix = tuple(tuple(subs) for subs in prefix)
        self.values = _discriminators(self.fields, root)


def _discriminators(fields: dict[str, _Field], root: dict[str, Any]) -> dict[str, frozenset[Any]]:
    """The properties whose schema lists the values they may take (`const`, `enum`)."""
    found: dict[str, frozenset[Any]] = {}
    for name, field in fields.items():
        allowed: frozenset[Any] | None = None
        for sub in field.schemas:
            sub = resolve(sub, root)
            if not isinstance(sub, dict):
                continue
            if "const" in sub:
                listed = frozenset({_value_key(sub["const"])})
            elif isinstance(sub.get("enum"), list):
                listed = frozenset(_value_key(v) for v in sub["enum"])
            else:
                continue
            allowed = listed if allowed is None else allowed & listed
        if allowed is not None:
            found[name] = allowed
    return found


class _Plan:
    """What one set of schemas (all of which apply) asks of the value under it."""

    __slots__ = ("_array", "_object", "_views", "inert", "schemas", "walk")

    def __init__(self, walk: NullWalk, schemas: tuple[Any, ...]) -> None:
        self.walk = walk
        self.schemas = schemas
        self._views: list[_View] | None = None
        self._object: Any = _MISSING
        self._array: Any = _MISSING
        self.inert: bool | None = None
        """Whether no stand-in `null` can be removed below (`None`: not worked out yet)."""

    def views(self) -> list[_View]:
        views = self._views
        if views is None:
            views = self._views = self.walk._views_of(self.schemas)
        return views

    def for_object(self, value: dict[str, Any]) -> _View | None:
        single = self._object
        if single is _MISSING:
            views = self.views()
            single = None if len(views) > 1 else _fitting(views, "object")
            if single is None and len(views) > 1:
                return _choose(views, value)
            self._object = single
        return single  # type: ignore[no-any-return]

    def for_array(self) -> _View | None:
        found = self._array
        if found is _MISSING:
            fitting = [v for v in self.views() if v.kinds is None or "array" in v.kinds]
            found = self._array = fitting[0] if len(fitting) == 1 else None
        return found  # type: ignore[no-any-return]


def _fitting(views: list[_View], kind: str) -> _View | None:
    view = views[0] if views else None
    return view if view is not None and (view.kinds is None or kind in view.kinds) else None


def _choose(views: list[_View], value: dict[str, Any]) -> _View | None:
    """The reading of `value` among union branches: not one whose constants it contradicts
    or whose required properties it lacks (a `null` counts only where admitted); of those,
    the one that declares most of its keys, the first on a tie."""
    best: _View | None = None
    best_score = -1
    fallback: _View | None = None
    fallback_score = -1
    for view in views:
        if view.kinds is not None and "object" not in view.kinds:
            continue
        score = sum(1 for key in value if key in view.fields)
        if score > fallback_score:
            fallback, fallback_score = view, score
        if score <= best_score or not _consistent(view, value):
            continue
        best, best_score = view, score
    return best if best is not None else fallback


def _consistent(view: _View, value: dict[str, Any]) -> bool:
    for name, allowed in view.values.items():
        item = value.get(name, _MISSING)
        if item is not _MISSING and item is not None and _value_key(item) not in allowed:
            return False
    for name in view.required:
        item = value.get(name, _MISSING)
        if item is _MISSING:
            return False
        if item is None:
            field = view.fields.get(name)
            if field is not None and not field.admits_null:
                return False
    return True


class NullWalk:
    """Strict-null normalisation over one root schema, compiled as values reach it."""

    __slots__ = ("_plans", "_top", "root")

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self._plans: dict[tuple[int, ...], _Plan] = {}
        self._top = self._plan((root,))

    def normalize(self, value: Any) -> Any:
        if not isinstance(value, dict | list):
            return value
        return self._normalize(value, self._top, 0)

    def _normalize(self, value: Any, plan: _Plan, depth: int) -> Any:
        if depth > _MAX_DEPTH or (plan.inert if plan.inert is not None else self._inert(plan)):
            return value
        if isinstance(value, dict):
            view = plan.for_object(value)
            return value if view is None else self._object(value, view, depth)
        if isinstance(value, list):
            view = plan.for_array()
            return value if view is None else self._array(value, view, depth)
        return value

    def _object(self, value: dict[str, Any], view: _View, depth: int) -> dict[str, Any]:
        out: dict[str, Any] | None = None
        fields = view.fields
        index = -1
        for key, item in value.items():
            index += 1
            new = item
            if item is None:
                field = fields.get(key)
                if field is not None and field.removable:
                    if out is None:
                        out = dict(islice(value.items(), index))
                    continue
            elif type(item) is dict or type(item) is list:
                field = fields.get(key)
                if field is not None:
                    sub = field.plan
                    if sub is None:
                        sub = field.plan = self._plan(field.schemas)
                    new = self._normalize(item, sub, depth + 1)
                elif view.extra or view.patterns:
                    found = self._map_value(view, key)
                    if found is not None:
                        new = self._normalize(item, found, depth + 1)
                if out is None and new is not item:
                    out = dict(islice(value.items(), index))
            if out is not None:
                out[key] = new
        return value if out is None else out

    def _array(self, value: list[Any], view: _View, depth: int) -> list[Any]:
        out: list[Any] | None = None
        rest = self._plan(view.items) if view.items else None
        leading = view.prefix
        for index, item in enumerate(value):
            new = item
            if isinstance(item, dict | list):
                sub = self._plan(leading[index]) if index < len(leading) else rest
                if sub is not None:
                    new = self._normalize(item, sub, depth + 1)
            if out is None:
                if new is item:
                    continue
                out = value[:index]
            out.append(new)
        return value if out is None else out

    def _map_value(self, view: _View, key: str) -> _Plan | None:
        matched = tuple(sub for search, sub in view.patterns if search(key))
        schemas = matched or view.extra
        return self._plan(schemas) if schemas else None

    def _plan(self, schemas: tuple[Any, ...]) -> _Plan:
        key = tuple(map(id, schemas))
        plan = self._plans.get(key)
        if plan is None or not all(a is b for a, b in zip(plan.schemas, schemas, strict=True)):
            plan = _Plan(self, schemas)
            if len(self._plans) < _MEMO_SIZE:
                self._plans[key] = plan
        return plan

    def _views_of(self, schemas: tuple[Any, ...]) -> list[_View]:
        readings: list[list[dict[str, Any]]] = [[]]
        for schema in schemas:
            options = self._node_views(schema, 0)
            readings = [a + b for a, b in islice(product(readings, options), _VIEWS)]
        return [_View(nodes, self.root) for nodes in readings]

    def _node_views(self, schema: Any, depth: int) -> list[list[dict[str, Any]]]:
        """The node lists one schema can read as: the node, its `allOf` parts, and one
        branch of each union in it."""
        schema = resolve(schema, self.root)
        if not isinstance(schema, dict) or depth > 32:
            return [[]]
        readings: list[list[dict[str, Any]]] = [[schema]]
        for part in schema.get("allOf", ()) if isinstance(schema.get("allOf"), list) else ():
            options = self._node_views(part, depth + 1)
            readings = [a + b for a, b in islice(product(readings, options), _VIEWS)]
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                options = [v for branch in branches for v in self._node_views(branch, depth + 1)]
                readings = [a + b for a, b in islice(product(readings, options), _VIEWS)]
        return readings

    def any_removable(self) -> bool:
        """Whether a stand-in `null` can be removed anywhere below the root."""
        return not self._inert(self._top)

    def _inert(self, start: _Plan) -> bool:
        """Whether no stand-in `null` can be removed at or below `start` (kept on the plans:
        when none is found, every plan visited is inert too)."""
        pending = [start]
        visited: list[_Plan] = []
        seen: set[tuple[int, ...]] = set()
        while pending:
            plan = pending.pop()
            if plan.inert is not None:
                if plan.inert:
                    continue
                start.inert = False
                return False
            key = tuple(map(id, plan.schemas))
            if key in seen:
                continue
            seen.add(key)
            visited.append(plan)
            for view in plan.views():
                for field in view.fields.values():
                    if field.removable:
                        start.inert = False
                        return False
                    if field.plan is None:
                        field.plan = self._plan(field.schemas)
                    pending.append(field.plan)
                pending.extend(self._plan((sub,)) for sub in view.extra)
                pending.extend(self._plan((sub,)) for _, sub in view.patterns)
                if view.items:
                    pending.append(self._plan(view.items))
                pending.extend(self._plan(subs) for subs in view.prefix)
        for plan in visited:
            plan.inert = True
        return True


def _properties(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """The declared properties, including those of `allOf` parts."""
    found: dict[str, Any] = {}
    own = schema.get("properties")
    if isinstance(own, dict):
        found.update(own)
    parts = schema.get("allOf")
    if isinstance(parts, list):
        for part in parts:
            part = resolve(part, root)
            if isinstance(part, dict) and isinstance(part.get("properties"), dict):
                for key, sub in part["properties"].items():
                    found.setdefault(key, sub)
    return found
