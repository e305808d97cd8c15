"""Finding keys the schema of the target type does not declare.

Pydantic ignores unknown keys by default, so a model that misnames a key (`e_mail` for
`email`) yields a value that validates and is wrong. Without constrained decoding the
extraction therefore rejects such keys. An object schema without `additionalProperties`
counts as closed; maps (`additionalProperties`), `patternProperties` and open schemas
(`{}`, `true`, an object without `properties`) take any key. Under a union, a key is
undeclared only when no branch that may apply declares it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from allama.schema._nulls import _properties
from allama.schema._resolve import branches, resolve

__all__ = ["UndeclaredKey", "find_undeclared_key", "format_path"]


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
    stack: list[tuple[Any, list[Any], tuple[str | int, ...]]] = [(value, [schema], ())]
    root = schema
    steps = 0
    while stack:
        steps += 1
        if steps > 1_000_000:
            return None
        node, schemas, path = stack.pop()
        candidates = _candidates(node, schemas, root)
        if candidates is None:
            continue
        if isinstance(node, dict):
            declared: dict[str, list[Any]] = {}
            for candidate in candidates:
                if _is_open(candidate):
                    candidates = []
                    declared = {}
                    break
                for key, sub in _properties(candidate, root).items():
                    declared.setdefault(key, []).append(sub)
            if not candidates:
                continue
            names = list(declared)
            children = []
            for key, item in node.items():
                subs = declared.get(key)
                if subs is None:
                    return UndeclaredKey(
                        path=format_path((*path, key)),
                        message=f"unknown field `{key}`, {expected_fields(names)}",
                    )
                children.append((item, subs, (*path, key)))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            children = []
            for index, item in enumerate(node):
                subs = [sub for candidate in candidates for sub in _item_schemas(candidate, index)]
                if subs:
                    children.append((item, subs, (*path, index)))
            stack.extend(reversed(children))
    return None


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
