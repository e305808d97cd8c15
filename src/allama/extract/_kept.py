"""What a validated value kept of its JSON text: how many keys, and whether every float in
it is finite. Compared with the keys the text wrote, the count tells a duplicate key
(written twice, kept once) without parsing the text a second time.

Models are walked by what their fields can hold, worked out once per class: a field that
holds only scalars is not visited, a float field is checked for `NaN` and infinity. A list
of models of one class whose fields hold only scalars (the usual shape of a long answer) is
counted by C loops: the sizes of their fields-set (or, when every field is required, the
number of fields for each row), and the sum of each float field (a sum is finite only when
every term is, or it overflowed, which is then checked item by item).

Only keys the text wrote are counted: a model's fields it did not set (a default, which
may hold a map of its own) are not walked, and a root model's `root` is no key. pydantic
never gives a map more keys than its object wrote, so the count comes short of the keys
written wherever one map kept fewer, however many the others hold. Only a validator
function of the caller's, making keys of its own, can make up for one lost.

Where the count comes short of the keys written, `merged_keys` looks, along the type's
schema, for a map that kept fewer keys than its object wrote: two keys its key type reads
as one (`"1"` and `"01"` to an `int`), whose values one of them would drop.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import itertools
import json
import types
import typing
import uuid
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeAlias, cast

from pydantic import BaseModel
from pydantic_core import SchemaValidator
from pydantic_core.core_schema import CoreSchema, dict_schema

__all__ = ["NOT_FINITE", "kept_keys", "non_finite_place"]

NOT_FINITE = -1
"""What `kept_keys` returns for a value holding `NaN` or an infinite float."""

_LEAVES = frozenset({str, int, bool, type(None)})
_SCALAR_TYPES: tuple[type, ...] = (
    str,
    int,
    bool,
    type(None),
    enum.Enum,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    bytes,
)
_FIELDS_SET = attrgetter("__pydantic_fields_set__")


@dataclass(frozen=True, slots=True)
class _Fields:
    """What a model's fields can hold, worked out from their annotations."""

    floats: tuple[str, ...]
    """Fields that hold a float or a `Decimal` (maybe `None`)."""
    plain_floats: tuple[attrgetter[Any], ...]
    """Getters of the float fields that always hold a float (summed in C)."""
    loose_floats: tuple[str, ...]
    """The other float fields (a `Decimal`, or maybe `None`), checked one by one."""
    inner: tuple[str, ...]
    """Fields that may hold containers, models or anything: walked into."""
    flat: bool
    """No inner fields and no extra keys allowed: the model is a row of scalars."""
    root: bool
    """A root model: its one field is the value the text wrote, not a key of it."""
    width: int | None
    """The keys every validated instance keeps, when all its fields are required (a valid
    row set them all); `None` when some field has a default."""


_MODELS: dict[type, _Fields] = {}


def _kind(annotation: Any) -> str:
    """`leaf`, `float`, `plain_float` (always a float) or `inner` (anything else)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return "leaf"
    if origin in (typing.Union, types.UnionType):
        kinds = {_kind(arg) for arg in typing.get_args(annotation)}
        if "inner" in kinds:
            return "inner"
        return "float" if kinds & {"float", "plain_float"} else "leaf"
    if annotation is float:
        return "plain_float"
    if annotation is decimal.Decimal:
        return "float"
    if isinstance(annotation, type) and origin is None and issubclass(annotation, _SCALAR_TYPES):
        return "leaf"
    return "inner"


def _fields(cls: type[BaseModel]) -> _Fields:
    found = _MODELS.get(cls)
    if found is None:
        floats: list[str] = []
        plain: list[str] = []
        inner: list[str] = []
        for name, info in cls.model_fields.items():
            kind = _kind(info.annotation)
            if kind in ("float", "plain_float"):
                floats.append(name)
                if kind == "plain_float":
                    plain.append(name)
            elif kind == "inner":
                inner.append(name)
        root = bool(getattr(cls, "__pydantic_root_model__", False))
        flat = not inner and cls.model_config.get("extra") != "allow" and not root
        required = all(info.is_required() for info in cls.model_fields.values())
        found = _MODELS[cls] = _Fields(
            floats=tuple(floats),
            plain_floats=tuple(attrgetter(name) for name in plain),
            loose_floats=tuple(name for name in floats if name not in plain),
            inner=tuple(inner),
            flat=flat,
            root=root,
            width=len(cls.model_fields) if required else None,
        )
    return found


def _finite(number: Any) -> bool:
    """Whether a float field's value (a float, a `Decimal`, or `None`) is a finite number."""
    kind = type(number)
    if kind is float:
        return not (number - number)  # `inf - inf` and `nan - nan` are `nan`, not zero
    return not (kind is decimal.Decimal and not number.is_finite())


def _rows(items: list[Any], shape: _Fields) -> int:
    """Keys kept by a list of flat models of one class, or `NOT_FINITE`."""
    width = shape.width
    count = len(items) * width if width is not None else sum(map(len, map(_FIELDS_SET, items)))
    for getter in shape.plain_floats:
        total = sum(map(getter, items))
        # `total - total` is not zero when some term is not finite, or the sum overflowed
        # (then each term is looked at).
        if total - total and not all(map(_finite, map(getter, items))):
            return NOT_FINITE
    for name in shape.loose_floats:
        for item in items:
            if not _finite(item.__dict__[name]):
                return NOT_FINITE
    return count


def kept_keys(value: Any) -> int:
    """The keys `value` kept of those its text wrote (every dict's keys, every model's
    fields set and extras, and what those fields hold), or `NOT_FINITE` when a float in it
    is `NaN` or infinite."""
    count = 0
    stack = [value]
    pop, push, leaves, models = stack.pop, stack.append, _LEAVES, _MODELS
    while stack:
        node = pop()
        kind = type(node)
        if kind in leaves:
            continue
        if kind is float or kind is decimal.Decimal:
            if not _finite(node):
                return NOT_FINITE
            continue
        if kind is list or kind is tuple:
            if node:
                first = type(node[0])
                shape = models.get(first)
                if shape is None and issubclass(first, BaseModel):
                    shape = _fields(first)
                if shape is not None and shape.flat and len(set(map(type, node))) == 1:
                    rows = _rows(node if kind is list else list(node), shape)
                    if rows == NOT_FINITE:
                        return NOT_FINITE
                    count += rows
                    continue
            for child in node:
                if type(child) not in leaves:
                    push(child)
            continue
        if kind is dict:
            count += len(node)
            for child in node.values():
                if type(child) not in leaves:
                    push(child)
            continue
        if isinstance(node, BaseModel):
            shape = models.get(kind) or _fields(kind)
            fields_set = node.__pydantic_fields_set__
            extra = node.__pydantic_extra__
            if shape.root:
                pass  # `root` is the value the text wrote, not a key of it
            elif extra:
                # The fields set hold the extra keys too: counted once, as extras. (A field
                # whose alias frees its name for an extra key of that name is then not
                # counted: too few keys only sends the output to the careful reading.)
                count += len(fields_set - extra.keys()) + len(extra)
                push(list(extra.values()))
            else:
                count += len(fields_set)
            held = node.__dict__
            for name in shape.floats:
                if not _finite(held[name]):
                    return NOT_FINITE
            for name in shape.inner:
                # A field not set holds its default: no keys of the text, which counted
                # would make up for a key a map of the text lost.
                if name in fields_set:
                    child = held[name]
                    if type(child) not in leaves:
                        push(child)
            continue
        if isinstance(node, dict):  # an `OrderedDict`, a `defaultdict`, a `Counter`
            count += len(node)
            for child in node.values():
                if type(child) not in leaves:
                    push(child)
            continue
        if isinstance(node, set | frozenset):
            for child in node:
                if not _finite(child):
                    return NOT_FINITE
    return count


def non_finite_place(value: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """Where in `value` a float is `NaN` or infinite (`("rows", 3, "price")`), found slowly:
    only for a value `kept_keys` found one in. Its steps are indices, and keys as the value
    holds them: a map's keys as validated (an `int`, a `SecretStr`), not as written."""
    if type(value) in (float, decimal.Decimal):
        return None if _finite(value) else path
    children: Any = ()
    if isinstance(value, BaseModel):
        children = [*value.__dict__.items(), *(value.__pydantic_extra__ or {}).items()]
    elif isinstance(value, dict):
        children = value.items()
    elif isinstance(value, list | tuple | set | frozenset):
        children = enumerate(value)
    for key, child in children:
        found = non_finite_place(child, (*path, key))
        if found is not None:
            return found
    return None


Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Merged:
    """An object of the text whose keys the type read as fewer keys: two it wrote are one
    key to it (`"1"` and `"01"` to an `int`, `"A"` and `"a"` to a lowered string)."""

    path: Path
    """Where the object is in the JSON value."""
    keys_schema: dict[str, Any] | None
    """The core schema of the map's keys (`None`: any key)."""
    written: dict[str, Any]
    """The object as the text wrote it."""


class _Unfit:
    """A value not of a schema node's kind: a union's other choice made it."""


class _Unseen:
    """The value a schema node made is not at hand: a function made the value from it
    afterwards (an `AfterValidator`, a model's after-validator, a chain's later steps)."""


_UNFIT = _Unfit()
_UNSEEN = _Unseen()
_Found: TypeAlias = Merged | _Unfit | None


def merged_keys(core: Any, value: Any, written: Any) -> Merged | None:
    """The first map of `value` (validated by the core schema `core` from the JSON value
    `written`) that kept fewer keys than its object wrote; `None` where there is none.

    Only for a value whose count of kept keys came short of the keys written: walked along
    the schema, so that what else keeps fewer keys is not taken for one (a model's or a
    `TypedDict`'s undeclared keys, left out; a validator's map, its own).

    Below a function that runs after validation (`AfterValidator`, a model's after
    validator), the function was given the map validation made of the object written, so
    a key lost there is lost whatever the function returns; the map is not at hand, and
    its key schema is asked instead whether two of the keys written are one key. Where the
    caller's function reads the object first (`BeforeValidator`, `WrapValidator`,
    `PlainValidator`), the map validation read may be the function's own making, keys it
    merged included: nothing below is taken for merged. Nor past a set, or a JSON string."""
    from allama.extract._output import schema_nodes

    refs = {node["ref"]: node for node in schema_nodes(core) if isinstance(node.get("ref"), str)}
    try:
        found = _MergedWalk(refs).walk(core, value, written, ())
    except RecursionError:
        return None
    return found if isinstance(found, Merged) else None


_CONTAINERS = (dict, list, tuple, set, frozenset, BaseModel)
_MAPS = frozenset({"dict", "ordered-dict", "counter"})


@dataclass(frozen=True, slots=True)
class _MergedWalk:
    refs: dict[str, dict[str, Any]]

    def walk(self, node: Any, value: Any, written: Any, path: Path) -> _Found:
        """A map that merged keys, `None` (none here), or `_UNFIT` (`value` is no value
        of `node`). `value` is `_UNSEEN` below a function that made the value afterwards:
        then only `written` says which choice of a union fits."""
        if not isinstance(node, dict):
            return None
        kind = node.get("type")
        unseen = value is _UNSEEN
        if kind == "definitions":
            return self.walk(node.get("schema"), value, written, path)
        if kind == "definition-ref":
            return self.walk(self.refs.get(node.get("schema_ref", "")), value, written, path)
        if kind in ("nullable", "default"):
            if written is None and (unseen or value is None):
                return None
            return self.walk(node.get("schema"), value, written, path)
        if kind == "function-after":
            return self.walk(node.get("schema"), _UNSEEN, written, path)
        if kind == "chain":  # the first step reads the object written; the others, its value
            steps = node.get("steps")
            first = steps[0] if isinstance(steps, list) and steps else None
            return self.walk(first, _UNSEEN, written, path)
        if kind == "json-or-python":  # the output is read as JSON
            return self.walk(node.get("json_schema"), value, written, path)
        if kind == "lax-or-strict":
            # Read strictly, or laxly where only Python's rules refused the strict reading
            # (`validate_strict_json`): either may have made the value.
            choices = [node.get("strict_schema"), node.get("lax_schema")]
            return self._union(choices, value, written, path)
        if kind == "function-wrap" and _makes_defaultdict(node):
            # pydantic's own `defaultdict[K, V]`: the dict schema inside reads the object
            # written, and the value holds the keys it kept.
            return self.walk(node.get("schema"), value, written, path)
        if kind in ("union", "tagged-union"):
            listed: Any = node.get("choices", ())
            if isinstance(listed, dict):
                chosen = _tagged(node, listed, written)
                listed = list(listed.values()) if chosen is None else [chosen]
            each = [choice[0] if isinstance(choice, tuple) else choice for choice in listed]
            return self._union(each, value, written, path)
        if kind == "model":
            if not unseen and not isinstance(value, node.get("cls", ())):
                return _UNFIT
            fields = node.get("schema")
            if node.get("root_model"):
                root = value if unseen else getattr(value, "root", None)
                return self.walk(fields, root, written, path)
            if type(written) is not dict:
                return _UNFIT
            if not isinstance(fields, dict) or fields.get("type") != "model-fields":
                return None  # a model read by a function
            reads = _reads(node)
            found = self._fields(fields, None if unseen else value.__dict__, written, path, reads)
            if found is None and not unseen:
                return _extras(fields, value.__pydantic_extra__, written, path, reads)
            return found
        if kind == "dataclass":
            if type(written) is not dict or not (unseen or isinstance(value, node.get("cls", ()))):
                return _UNFIT
            args = node.get("schema")
            listed = args.get("fields") if isinstance(args, dict) else None
            if not isinstance(listed, list):
                return None  # a dataclass read by a function
            named = {f["name"]: f for f in listed if isinstance(f, dict) and "name" in f}
            held = None if unseen else {n: getattr(value, n) for n in named if hasattr(value, n)}
            return self._fields({"fields": named}, held, written, path, _reads(node))
        if kind == "typed-dict":
            if type(written) is not dict or not (unseen or type(value) is dict):
                return _UNFIT
            return self._fields(node, None if unseen else value, written, path, _reads(node))
        if kind in _MAPS:
            if type(written) is not dict or not (unseen or isinstance(value, dict)):
                return _UNFIT
            keys = node.get("keys_schema")
            keys = keys if isinstance(keys, dict) else None
            if unseen:
                if self._reads_fewer(keys, written):
                    return Merged(path, keys, written)
                kept_values: Any = itertools.repeat(_UNSEEN)
            elif len(value) < len(written):
                return Merged(path, keys, written)
            else:
                kept_values = value.values()
            values = node.get("values_schema")
            if _holds_no_map(values):
                return None
            for kept, (key, text) in zip(kept_values, written.items(), strict=False):
                found = self.walk(values, kept, text, (*path, key))
                if isinstance(found, Merged):
                    return found
            return None
        if kind in ("list", "tuple"):
            made = list if kind == "list" else tuple
            if type(written) is not list or not (unseen or type(value) is made):
                return _UNFIT
            items = node.get("items_schema")
            if _holds_no_map(items):
                return None
            kept_items = itertools.repeat(_UNSEEN) if unseen else value
            for index, (kept, text) in enumerate(zip(kept_items, written, strict=False)):
                item = _item_schema(node, items, index, len(written))
                found = self.walk(item, kept, text, (*path, index))
                if isinstance(found, Merged):
                    return found
            return None
        if kind == "generator":
            # An `Iterable`, where the answer's whole reading (each `Iterable` a list) is
            # not at hand: its items are unread, so each map's key schema is asked.
            items = node.get("items_schema")
            if type(written) is not list or _holds_no_map(items):
                return None
            for index, text in enumerate(written):
                found = self.walk(items, _UNSEEN, text, (*path, index))
                if isinstance(found, Merged):
                    return found
            return None
        if kind == "any":
            return None
        if kind in _SCALAR_KINDS:
            return _UNFIT if isinstance(written if unseen else value, _CONTAINERS) else None
        # The caller's function before or around validation (which may hand it a map of
        # its own: keys it merged are its doing), a set's items, a JSON string's value:
        # what it kept is its own.
        return None

    def _union(self, choices: list[Any], value: Any, written: Any, path: Path) -> _Found:
        """A merged map where every choice that may have made `value` merged keys."""
        found: _Found = _UNFIT
        for choice in choices:
            each = self.walk(choice, value, written, path)
            if each is None:
                return None  # a choice that made it without merging keys
            if isinstance(each, Merged) and not isinstance(found, Merged):
                found = each
        return found

    def _fields(
        self,
        node: dict[str, Any],
        held: dict[str, Any] | None,
        written: dict[str, Any],
        path: Path,
        reads: tuple[bool, bool],
    ) -> _Found:
        """The first merged map among the fields written; `held` is `None` where what they
        hold is unseen."""
        fields = node.get("fields")
        if not isinstance(fields, dict):
            return None
        for name, field in fields.items():
            if not isinstance(field, dict) or (held is not None and name not in held):
                continue
            key = next((key for key in _keys_of(name, field, reads) if key in written), None)
            if key is None:
                continue  # not written: a default, or read from a path
            kept = _UNSEEN if held is None else held[name]
            found = self.walk(field.get("schema"), kept, written[key], (*path, key))
            if isinstance(found, Merged):
                return found
        return None

    def _reads_fewer(self, keys: dict[str, Any] | None, written: dict[str, Any]) -> bool:
        """Whether the key schema `keys` reads two of the keys `written` as one key (the
        map validation made of them is unseen). Not where that cannot be told: a key
        refused strictly, read laxly then or by another choice; a schema not built alone."""
        if keys is None or len(written) < 2:
            return False
        reader = _keys_reader(keys)
        if reader is None:
            return False
        try:
            read = reader.validate_json(json.dumps(dict.fromkeys(written)), strict=True)
        except Exception:  # refused (or the caller's key validator raised): not known
            return False
        return len(read) < len(written)


def _holds_no_map(node: Any) -> bool:
    """Whether a container's items are of a scalar schema (not walked one by one)."""
    return isinstance(node, dict) and (
        node.get("type") in _SCALAR_KINDS or node.get("type") == "any"
    )


def _tagged(node: dict[str, Any], choices: dict[Any, Any], written: Any) -> Any:
    """The choice of a tagged union that the tag written names (`{"kind": "cat"}`), where
    the tag is a key of the object written as the choice's tag is; `None` otherwise."""
    discriminator = node.get("discriminator")
    if not isinstance(discriminator, str) or type(written) is not dict:
        return None
    tag = written.get(discriminator)
    return choices.get(tag) if type(tag) in (str, int) else None


def _keys_reader(keys: dict[str, Any]) -> SchemaValidator | None:
    """A validator of a map whose keys `keys` reads (its values anything); `None` where the
    key schema is not built alone (pydantic names a definition only where a type refers
    to itself, which no key read from a string does). Kept with the key schema it reads
    (held, so that its `id` names no other), a few hundred at most: a valid answer whose
    count comes short (a key the type ignores) reads its keys again each time."""
    held = _READERS.get(id(keys))
    if held is not None and held[0] is keys:
        return held[1]
    try:
        reader: SchemaValidator | None = SchemaValidator(
            dict_schema(keys_schema=cast(CoreSchema, keys))
        )
    except Exception:
        reader = None
    if len(_READERS) >= 256:
        _READERS.clear()
    _READERS[id(keys)] = (keys, reader)
    return reader


_READERS: dict[int, tuple[dict[str, Any], SchemaValidator | None]] = {}


def _extras(
    node: dict[str, Any], extra: Any, written: dict[str, Any], path: Path, reads: tuple[bool, bool]
) -> Merged | None:
    """Two extra keys of a model read as one by the key type its extras are given
    (`__pydantic_extra__: dict[Lowered, int]`): fewer extras kept than the keys written that
    no field reads. Not where a field reads a path (which keys it reads is not known)."""
    keys, fields = node.get("extras_keys_schema"), node.get("fields")
    if not isinstance(keys, dict) or not isinstance(extra, dict) or not isinstance(fields, dict):
        return None  # extra keys are kept as written
    read: set[str] = set()
    for name, field in fields.items():
        field_keys = _keys_of(name, field, reads) if isinstance(field, dict) else []
        if not field_keys:
            return None
        read.update(field_keys)
    unread = {key: text for key, text in written.items() if key not in read}
    return Merged(path, keys, unread) if len(extra) < len(unread) else None


def _pydantic_defaultdict() -> Any:
    """pydantic's function that makes a `defaultdict` of the dict it validates (a private
    name: looked for, not relied on)."""
    try:
        from pydantic._internal import _validators
    except ImportError:
        return None
    return getattr(_validators, "defaultdict_validator", None)


_DEFAULTDICT = _pydantic_defaultdict()


def _makes_defaultdict(node: dict[str, Any]) -> bool:
    """Whether a `function-wrap` node is pydantic's own for `defaultdict`."""
    function = node.get("function")
    made = function.get("function") if isinstance(function, dict) else None
    return _DEFAULTDICT is not None and getattr(made, "func", made) is _DEFAULTDICT


_SCALAR_KINDS = frozenset(
    {"str", "int", "float", "bool", "none", "literal", "enum", "date", "datetime", "time"}
    | {"timedelta", "uuid", "decimal", "bytes", "url", "multi-host-url"}
)


def _reads(node: dict[str, Any]) -> tuple[bool, bool]:
    """Whether a model's or a `TypedDict`'s configuration reads a field by its alias, and
    by its name."""
    config = node.get("config")
    if not isinstance(config, dict):
        return True, False
    by_name = config.get("validate_by_name") or config.get("populate_by_name")
    return config.get("validate_by_alias") is not False, bool(by_name)


def _keys_of(name: str, field: dict[str, Any], reads: tuple[bool, bool]) -> list[str]:
    """The keys a field is read from, in the order validation looks for them: its alias
    (or each of its one-key choices), then its name where that is read too. None where a
    choice is a path into another key (`AliasPath("a", 0)`): which choice was read is not
    known, and the field is not followed."""
    alias = field.get("validation_alias")
    by_alias, by_name = reads
    if alias is None:
        return [name]
    keys: list[str] = []
    if by_alias:
        paths = (
            alias if isinstance(alias, list) and alias and isinstance(alias[0], list) else [alias]
        )
        for path in paths:
            if isinstance(path, str):
                keys.append(path)
            elif isinstance(path, list) and len(path) == 1 and isinstance(path[0], str):
                keys.append(path[0])
            else:
                return []
    return [*keys, name] if by_name or not by_alias else keys


def _item_schema(node: dict[str, Any], items: Any, index: int, length: int) -> Any:
    """The schema of a list's item, or of a tuple's at `index` of `length` items."""
    if not isinstance(items, list):
        return items
    variadic = node.get("variadic_item_index")
    if variadic is None or index < variadic:
        return items[index] if index < len(items) else None
    after = len(items) - variadic - 1
    if index >= length - after:
        return items[index - (length - len(items))]
    return items[variadic]
