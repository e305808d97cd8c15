"""Finding keys the schema of the target type does not declare.

Pydantic ignores unknown keys by default, so a model that misnames a key (`e_mail` for
`email`) yields a value that validates and is wrong. Without constrained decoding the
extraction therefore rejects such keys. An object schema without `additionalProperties`
counts as closed; maps (`additionalProperties`), `patternProperties` and open schemas
(`{}`, `true`, an object without `properties`) take any key. Under a union, a key is
undeclared only when no branch that may apply declares it: one of the object's JSON type
that its tag does not rule out (`branches`); where the tag rules out every branch, or there
is none, every branch of its type.

An open object is exempt at its own level only: the values of a map are walked with the
map's value schema (`dict[str, Contact]`), those of `patternProperties` with the schemas
whose patterns match, and the declared properties of an object open to other keys (a model
with `extra="allow"`) with their own schemas.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from allama.schema._nulls import KeySearch, _properties, key_search
from allama.schema._resolve import branches, json_type, resolve, union_tags
from allama.schema._types import derived

__all__ = [
    "UndeclaredKey",
    "UndeclaredKeys",
    "find_undeclared_key",
    "format_path",
    "key_step",
    "may_ignore_undeclared_keys",
    "undeclared_keys",
]


@dataclass(frozen=True, slots=True)
class UndeclaredKey:
    """The first undeclared key: where it is (`contact.e_mail`) and what was expected."""

    path: str
    message: str


def format_path(parts: tuple[str | int, ...]) -> str:
    """`("items", 1, "price")` as `items[1].price`; a key that would read as more than one
    step, or as none (`a.b`, `a[0]`, `""`), in quotes: `by_name["a.b"].price`.

    >>> format_path(("by_name", "a.b", "price")), format_path(("x y", 0))
    ('by_name["a.b"].price', '["x y"][0]')
    """
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            step = key_step(part)
            out += step if out or step.startswith("[") else part
    return out


def key_step(key: str) -> str:
    """A key as a step of a path: `.price`, or in quotes where bare it would read as more
    than one step, as none, or hide what it holds (`["a.b"]`, `[""]`, a control or
    direction character escaped)."""
    if key and not _UNSPELLABLE.search(key):
        return f".{key}"
    return f"[{json.dumps(key, ensure_ascii=_HIDDEN.search(key) is not None)}]"


_UNSPELLABLE = re.compile(r'[.\[\]"\s\x00-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]')
"""What a key cannot hold and be written bare in a path: it would read as another step, or
hide itself in the text."""
_HIDDEN = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
"""Characters that change how text shows without showing themselves: written escaped."""


def expected_fields(names: list[str]) -> str:
    if not names:
        return "there are no fields"
    if len(names) == 1:
        return f"expected `{names[0]}`"
    return "expected one of " + ", ".join(f"`{name}`" for name in names)


def find_undeclared_key(value: Any, schema: dict[str, Any]) -> UndeclaredKey | None:
    """The first key in `value` that no applicable schema declares, or `None`.

    >>> schema = {"type": "object", "properties": {"email": {}, "phone": {}}}
    >>> find_undeclared_key({"e_mail": "x"}, schema).message
    'unknown field `e_mail`, expected one of `email`, `phone`'
    """
    return undeclared_keys(schema).find(value)


def undeclared_keys(schema: dict[str, Any]) -> UndeclaredKeys:
    """The walk for `schema`: kept with a type's schema (never changed), fresh otherwise."""
    return derived(schema, UndeclaredKeys, lambda: UndeclaredKeys(schema))


def may_ignore_undeclared_keys(schema: dict[str, Any]) -> bool:
    """Whether an output of `schema` can hold a key the walk rejects and pydantic would
    accept: some reachable object is closed by the library's convention (no
    `additionalProperties`) rather than by its schema (`additionalProperties: false`, which
    a model with `extra="forbid"` writes, and which pydantic enforces itself). When not,
    `find_undeclared_key` finds nothing that validation would not reject anyway, but for a
    key only validation knows (an alias the schema does not show: `OutputPlan.renamed`) or
    an object whose schema the type wrote itself closed (`OutputPlan.undeclared`).

    Kept with a type's schema, so asking again costs a look-up.

    >>> may_ignore_undeclared_keys({"type": "object", "properties": {"a": {}}})
    True
    >>> may_ignore_undeclared_keys({"type": "object", "properties": {"a": {}},
    ...     "additionalProperties": False})
    False
    """
    return derived(
        schema, may_ignore_undeclared_keys, lambda: undeclared_keys(schema).any_ignored()
    )


_MEMO_SIZE = 4096
"""Plans kept per walk."""

_SKIP: Any = object()
"""A node under an open schema (or no schema at all): any key goes, nothing to walk."""
_UNSET: Any = object()


class _Fields:
    """What an object's candidate schemas declare: the plan of each declared key, whether
    other keys are allowed, and the plans of their values (a map's value schema, or the
    schemas of the `patternProperties` their key matches).

    Where a union's tag may rule out some of its branches (`tags` not empty), these are the
    fields of every branch, which only the questions about the schema as a whole read
    (`_quiet`, `any_ignored`); an object is walked with the fields of the branches its tag
    leaves (`_Plan.fields`). Those questions then ask of each candidate on its own too:
    `some_closed`, `some_ignoring`, and the plans of each declared key's schemas one by one
    (`singles`), since the tag may leave a closed branch among open ones."""

    __slots__ = (
        "_by_key",
        "extra",
        "ignoring",
        "names",
        "open",
        "patterns",
        "plans",
        "singles",
        "some_closed",
        "some_ignoring",
        "tags",
        "walk",
    )

    def __init__(
        self,
        walk: UndeclaredKeys,
        plans: dict[str, _Plan],
        *,
        open_: bool,
        ignoring: bool,
        extra: tuple[Any, ...],
        patterns: tuple[tuple[KeySearch, Any], ...],
        tags: tuple[str, ...] = (),
        some_closed: bool = False,
        some_ignoring: bool = False,
        singles: tuple[_Plan, ...] = (),
    ) -> None:
        self.walk = walk
        self.plans = plans
        self.names = list(plans)
        self.open = open_
        self.ignoring = ignoring
        self.extra = walk._plan(extra) if extra else None
        self.patterns = patterns
        self.tags = tags
        self.some_closed = some_closed
        self.some_ignoring = some_ignoring
        self.singles = singles
        self._by_key: dict[str, _Plan | None] = {}

    def value_plan(self, key: str) -> _Plan | None:
        """The plan of the value of an undeclared key (`None`: anything goes)."""
        if not self.patterns:
            return self.extra
        if key in self._by_key:
            return self._by_key[key]
        matched = tuple(sub for search, sub in self.patterns if search(key))
        plan = self.walk._plan(matched) if matched else self.extra
        if len(self._by_key) < _MEMO_SIZE:
            self._by_key[key] = plan
        return plan


class _Plan:
    """What one set of schemas asks of the node under it, worked out on first use.

    For an object: its `_Fields`, or `_SKIP`. For an array: the plan of each item position,
    or `_SKIP`. Which `anyOf`/`oneOf` branches apply depends only on the node being an
    object or an array, and for an object on the values of its tags (`union_tags`), so the
    fields of an object are kept by those values.
    """

    __slots__ = ("_by_tags", "_fields", "_items", "quiet", "schemas", "walk")

    def __init__(self, walk: UndeclaredKeys, schemas: tuple[Any, ...]) -> None:
        self.walk = walk
        self.schemas = schemas
        self._fields: Any = _UNSET
        self._items: Any = _UNSET
        self._by_tags: dict[tuple[Any, ...], Any] = {}
        self.quiet: bool | None = None
        """Whether no key at or below can be undeclared (`None`: not worked out yet)."""

    def fields(self, node: dict[str, Any] | None = None) -> _Fields | Any:
        """The fields of `node`: of the branches its tags leave. Without a node, the fields
        of every branch (which questions about the schema as a whole read)."""
        fields = self._fields
        if fields is _UNSET:
            fields = self._fields = self.walk._fields_of(self.schemas, None)
        if node is None or fields is _SKIP or not fields.tags:
            return fields
        key = tuple(_tag_key(node.get(name, _UNSET)) for name in fields.tags)
        found = self._by_tags.get(key)
        if found is None:
            found = self.walk._fields_of(self.schemas, node)
            if len(self._by_tags) < _MEMO_SIZE:
                self._by_tags[key] = found
        return found

    def items(self) -> _Items | Any:
        items = self._items
        if items is _UNSET:
            items = self._items = self.walk._items_of(self.schemas)
        return items


class _Items:
    """The plans of an array's items: one per leading (`prefixItems`) position, then one."""

    __slots__ = ("leading", "rest")

    def __init__(self, leading: list[_Plan | None], rest: _Plan | None) -> None:
        self.leading = leading
        self.rest = rest

    def at(self, index: int) -> _Plan | None:
        leading = self.leading
        return leading[index] if index < len(leading) else self.rest


class UndeclaredKeys:
    """The undeclared-key walk over one root schema.

    The walk is compiled into plans as values reach new parts of the schema, and the plans
    are kept, so walking the next value is dictionary look-ups.
    """

    __slots__ = ("_plans", "_top", "root")

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self._plans: dict[tuple[int, ...], _Plan] = {}
        self._top = self._plan((root,))

    def find(self, value: Any) -> UndeclaredKey | None:
        if not isinstance(value, dict | list):
            return None
        # Paths are linked pairs (parent, key), spelled out only for the key reported.
        if self._quiet(self._top):
            return None
        stack: list[tuple[Any, _Plan, Any]] = [(value, self._top, None)]
        pop, push = stack.pop, stack.append
        quiet = self._quiet
        steps = 0
        while stack:
            steps += 1
            if steps > 1_000_000:
                return None
            node, plan, path = pop()
            mark = len(stack)
            if isinstance(node, dict):
                fields = plan.fields(node)
                if fields is _SKIP:
                    continue
                plans = fields.plans
                for key, item in node.items():
                    sub = plans.get(key)
                    if sub is None:
                        if not fields.open:
                            return UndeclaredKey(
                                path=format_path(_spelled((path, key))),
                                message=f"unknown field `{key}`, {expected_fields(fields.names)}",
                            )
                        if not isinstance(item, dict | list):
                            continue
                        sub = fields.value_plan(key)
                        if sub is None:
                            continue
                    if (type(item) is dict or type(item) is list) and not (
                        sub.quiet if sub.quiet is not None else quiet(sub)
                    ):
                        push((item, sub, (path, key)))
            else:
                items = plan.items()
                if items is _SKIP:
                    continue
                leading, rest = items.leading, items.rest
                if not leading and (
                    rest is None or (rest.quiet if rest.quiet is not None else quiet(rest))
                ):
                    continue
                for index, item in enumerate(node):
                    if type(item) is dict or type(item) is list:
                        sub = leading[index] if index < len(leading) else rest
                        if sub is not None:
                            push((item, sub, (path, index)))
            if len(stack) - mark > 1:  # children are visited in order: the first found is first
                stack[mark:] = stack[mark:][::-1]
        return None

    def _quiet(self, start: _Plan) -> bool:
        """Whether no object at or below `start` is closed, so no key there can be
        undeclared (kept on the plans: when none is found, every plan visited is quiet)."""
        pending = [start]
        visited: list[_Plan] = []
        seen: set[tuple[int, ...]] = set()
        while pending:
            plan = pending.pop()
            if plan.quiet is not None:
                if plan.quiet:
                    continue
                start.quiet = False
                return False
            key = tuple(map(id, plan.schemas))
            if key in seen:
                continue
            seen.add(key)
            visited.append(plan)
            fields = plan.fields()
            if fields is not _SKIP:
                if not fields.open or fields.some_closed:
                    start.quiet = False
                    return False
                pending.extend(fields.plans.values())
                pending.extend(fields.singles)
                if fields.extra is not None:
                    pending.append(fields.extra)
                pending.extend(self._plan((sub,)) for _, sub in fields.patterns)
            items = plan.items()
            if items is not _SKIP:
                pending.extend(sub for sub in items.leading if sub is not None)
                if items.rest is not None:
                    pending.append(items.rest)
        for plan in visited:
            plan.quiet = True
        return True

    def any_ignored(self) -> bool:
        """Whether some reachable object is closed by convention only (see
        `may_ignore_undeclared_keys`)."""
        pending = [self._top]
        seen: set[tuple[int, ...]] = set()
        while pending:
            plan = pending.pop()
            key = tuple(map(id, plan.schemas))
            if key in seen:
                continue
            seen.add(key)
            fields = plan.fields()
            if fields is not _SKIP:
                if (not fields.open and fields.ignoring) or fields.some_ignoring:
                    return True
                pending.extend(fields.plans.values())
                pending.extend(fields.singles)
                if fields.extra is not None:
                    pending.append(fields.extra)
                pending.extend(self._plan((sub,)) for _, sub in fields.patterns)
            items = plan.items()
            if items is not _SKIP:
                pending.extend(sub for sub in items.leading if sub is not None)
                if items.rest is not None:
                    pending.append(items.rest)
        return False

    def _plan(self, schemas: tuple[Any, ...]) -> _Plan:
        """One plan per set of schemas (a recursive schema reuses its plans)."""
        key = tuple(map(id, schemas))
        plan = self._plans.get(key)
        if plan is None or not _same(plan.schemas, schemas):
            plan = _Plan(self, schemas)
            if len(self._plans) < _MEMO_SIZE:
                self._plans[key] = plan
        return plan

    def _fields_of(self, schemas: tuple[Any, ...], node: dict[str, Any] | None) -> _Fields | Any:
        """The fields of the branches `node` may be of; without a node, of every branch,
        with the tags that choose among them."""
        tags: set[str] | None = set() if node is None else None
        candidates = _candidates({} if node is None else node, list(schemas), self.root, tags)
        if candidates is None:
            return _SKIP
        declared: dict[str, list[Any]] = {}
        open_ = ignoring = False
        extra: list[Any] = []
        patterns: list[tuple[KeySearch, Any]] = []
        for candidate in candidates:
            for name, sub in _properties(candidate, self.root).items():
                declared.setdefault(name, []).append(sub)
            open_ = open_ or _is_open(candidate)
            ignoring = ignoring or candidate.get("additionalProperties") is not False
            if isinstance(candidate.get("additionalProperties"), dict):
                extra.append(candidate["additionalProperties"])
            pattern_props = candidate.get("patternProperties")
            if isinstance(pattern_props, dict):
                for pattern, sub in pattern_props.items():
                    search = key_search(pattern)
                    if search is not None:
                        patterns.append((search, sub))
        if open_ and not declared and not extra and not patterns:
            return _SKIP
        plans = {name: self._plan(tuple(subs)) for name, subs in declared.items()}
        closed = [candidate for candidate in candidates if not _is_open(candidate)]
        return _Fields(
            self,
            plans,
            open_=open_,
            ignoring=ignoring,
            extra=tuple(extra),
            patterns=tuple(patterns),
            tags=tuple(sorted(tags or ())),
            some_closed=bool(tags and closed),
            some_ignoring=bool(tags)
            and any(c.get("additionalProperties") is not False for c in closed),
            singles=_singles(self, [*declared.values(), extra]) if tags else (),
        )

    def _items_of(self, schemas: tuple[Any, ...]) -> _Items | Any:
        candidates = _candidates([], list(schemas), self.root)
        if candidates is None:
            return _SKIP
        positions = max(map(_leading_positions, candidates))
        plans = [self._item_plan(candidates, index) for index in range(positions + 1)]
        return _Items(plans[:-1], plans[-1])

    def _item_plan(self, candidates: list[Any], index: int) -> _Plan | None:
        subs = tuple(sub for candidate in candidates for sub in _item_schemas(candidate, index))
        return self._plan(subs) if subs else None


def _leading_positions(schema: dict[str, Any]) -> int:
    """How many leading item positions have a schema of their own."""
    prefix = schema.get("prefixItems")
    items = schema.get("items")
    return max(
        len(prefix) if isinstance(prefix, list) else 0, len(items) if isinstance(items, list) else 0
    )


def _spelled(path: Any) -> tuple[str | int, ...]:
    parts: list[str | int] = []
    while path is not None:
        path, part = path
        parts.append(part)
    return tuple(reversed(parts))


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _singles(walk: UndeclaredKeys, merged: list[list[Any]]) -> tuple[_Plan, ...]:
    """The plans of the schemas merged into one plan (a key's, the maps' values), each on its
    own: a tag may leave any few of them."""
    return tuple(walk._plan((sub,)) for subs in merged if len(subs) > 1 for sub in subs)


def _tag_key(value: Any) -> Any:
    """A tag's value as a key: of its JSON type (`1` is `1.0`, not `true`)."""
    kind = json_type(value) if value is not _UNSET else "absent"
    if kind == "integer":
        kind = "number"
    if kind in ("array", "object"):
        return kind, json.dumps(value, sort_keys=True, default=str)
    return kind, value


def _candidates(
    node: Any, schemas: list[Any], root: dict[str, Any], tags: set[str] | None = None
) -> list[Any] | None:
    """The resolved object/array schemas that apply to `node`; `None` when any is open.
    `tags` collects the properties of an object whose values chose among branches."""
    if not isinstance(node, dict | list):
        return None
    found: list[Any] = []
    pending = list(schemas)
    seen = 0
    while pending:
        seen += 1
        if seen > 10_000:
            return None
        schema = resolve(pending.pop(), root)
        if schema is True or schema == {}:
            return None
        if not isinstance(schema, dict):
            continue
        options = branches(schema, root, node)
        if options is not None:
            if tags is not None:
                tags.update(union_tags(schema, root))
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            if not options:
                continue
            pending.extend(options)
            if _properties(rest, root):
                found.append(rest)
            continue
        found.append(schema)
    return found or None


def _is_open(schema: dict[str, Any]) -> bool:
    extra = schema.get("additionalProperties")
    if extra is not None and extra is not False:
        return True
    if schema.get("patternProperties"):
        return True
    unevaluated = schema.get("unevaluatedProperties")
    if unevaluated is not None and unevaluated is not False:
        return True
    return not isinstance(schema.get("properties"), dict) and not isinstance(
        schema.get("allOf"), list
    )


def _item_schemas(schema: dict[str, Any], index: int) -> list[Any]:
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        return [prefix[index]]
    items = schema.get("items")
    if isinstance(items, list):
        return [items[index]] if index < len(items) else []
    if isinstance(items, dict):
        return [items]
    return []
