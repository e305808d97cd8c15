"""Finding keys the schema of the target type does not declare.

Pydantic ignores unknown keys by default, so a model that misnames a key (`e_mail` for
`email`) yields a value that validates and is wrong. Without constrained decoding the
extraction therefore rejects such keys. An object schema without `additionalProperties`
counts as closed; maps (`additionalProperties`), `patternProperties` and open schemas
(`{}`, `true`, an object without `properties`) take any key. Under a union, a key is
undeclared only when no branch that may apply declares it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from allama.schema._nulls import _properties
from allama.schema._resolve import branches, resolve
from allama.schema._types import is_read_only

__all__ = [
    "UndeclaredKey",
    "UndeclaredKeys",
    "find_undeclared_key",
    "format_path",
    "undeclared_keys",
]


@dataclass(frozen=True, slots=True)
class UndeclaredKey:
    """The first undeclared key: where it is (`contact.e_mail`) and what was expected."""

    path: str
    message: str


def format_path(parts: tuple[str | int, ...]) -> str:
    """`("items", 1, "price")` as `items[1].price`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


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
    """The walk for `schema`: kept for a type's schema (never changed), fresh otherwise."""
    if not is_read_only(schema):
        return UndeclaredKeys(schema)
    walk = _WALKS.get(id(schema))
    if walk is None or walk.root is not schema:
        walk = UndeclaredKeys(schema)
        with _WALKS_LOCK:
            if len(_WALKS) >= _MEMO_SIZE:
                _WALKS.pop(next(iter(_WALKS)), None)
            _WALKS[id(schema)] = walk
    return walk


_MEMO_SIZE = 4096
_WALKS: dict[int, UndeclaredKeys] = {}
_WALKS_LOCK = threading.Lock()

_Schemas = tuple[Any, ...]
_Declared = tuple[dict[str, _Schemas], list[str]]
_SKIP: Any = object()
"""A node under an open schema (or no schema at all): any key goes, nothing to walk."""


class UndeclaredKeys:
    """The undeclared-key walk over one root schema.

    What a set of schemas declares for an object (or allows for an array's items) depends
    only on the schemas and on the node being an object or an array, so it is worked out
    once per set and remembered; walking a value is then dictionary look-ups.
    """

    __slots__ = ("_arrays", "_objects", "root")

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self._objects: dict[tuple[int, ...], tuple[_Schemas, _Declared | Any]] = {}
        self._arrays: dict[tuple[int, ...], tuple[_Schemas, list[Any] | Any]] = {}

    def find(self, value: Any) -> UndeclaredKey | None:
        if not isinstance(value, dict | list):
            return None
        # Paths are linked pairs (parent, key), spelled out only for the key reported.
        stack: list[tuple[Any, _Schemas, Any]] = [(value, (self.root,), None)]
        steps = 0
        while stack:
            steps += 1
            if steps > 1_000_000:
                return None
            node, schemas, path = stack.pop()
            children: list[tuple[Any, _Schemas, Any]] = []
            if isinstance(node, dict):
                declared = self._declared(node, schemas)
                if declared is _SKIP:
                    continue
                subs_by_key, names = declared
                for key, item in node.items():
                    subs = subs_by_key.get(key)
                    if subs is None:
                        return UndeclaredKey(
                            path=format_path(_spelled((path, key))),
                            message=f"unknown field `{key}`, {expected_fields(names)}",
                        )
                    if isinstance(item, dict | list):
                        children.append((item, subs, (path, key)))
            else:
                candidates = self._items(node, schemas)
                if candidates is _SKIP:
                    continue
                for index, item in enumerate(node):
                    if isinstance(item, dict | list):
                        subs = tuple(
                            sub
                            for candidate in candidates
                            for sub in _item_schemas(candidate, index)
                        )
                        if subs:
                            children.append((item, subs, (path, index)))
            stack.extend(reversed(children))
        return None

    def _declared(self, node: dict[str, Any], schemas: _Schemas) -> _Declared | Any:
        key = tuple(map(id, schemas))
        seen = self._objects.get(key)
        if seen is not None and _same(seen[0], schemas):
            return seen[1]
        candidates = _candidates(node, list(schemas), self.root)
        result: _Declared | Any = _SKIP
        if candidates is not None and not any(_is_open(c) for c in candidates):
            merged: dict[str, list[Any]] = {}
            for candidate in candidates:
                for name, sub in _properties(candidate, self.root).items():
                    merged.setdefault(name, []).append(sub)
            result = ({name: tuple(subs) for name, subs in merged.items()}, list(merged))
        if len(self._objects) < _MEMO_SIZE:
            self._objects[key] = (schemas, result)
        return result

    def _items(self, node: list[Any], schemas: _Schemas) -> list[Any] | Any:
        key = tuple(map(id, schemas))
        seen = self._arrays.get(key)
        if seen is not None and _same(seen[0], schemas):
            return seen[1]
        candidates = _candidates(node, list(schemas), self.root)
        result = _SKIP if candidates is None else candidates
        if len(self._arrays) < _MEMO_SIZE:
            self._arrays[key] = (schemas, result)
        return result


def _spelled(path: Any) -> tuple[str | int, ...]:
    parts: list[str | int] = []
    while path is not None:
        path, part = path
        parts.append(part)
    return tuple(reversed(parts))


def _same(a: _Schemas, b: _Schemas) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _candidates(node: Any, schemas: list[Any], root: dict[str, Any]) -> list[Any] | None:
    """The resolved object/array schemas that apply to `node`; `None` when any is open."""
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
