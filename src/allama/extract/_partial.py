"""The typed value of a stream so far, in work linear in the output.

An incremental JSON scanner keeps a stack of open containers. A value is validated when it
completes: a scalar by its field's validator, an object (a model, a dataclass, a
`TypedDict`) by its type's validator from its JSON text (not again over fields validated
already, to be shown while it was open), so that its defaults apply. pydantic validates an
object's text whole, the objects inside it too: a nested object's validators run again each
time an object around it is validated. The value itself, where the caller validates the
output when it ends (`validate_root=False`), is not validated here as well.
A container that ends within the text at hand is read by the C
JSON decoder and validated in one call; only containers still open are scanned token by
token. An object in a list (a row) is not scanned at all: it is held as text while it is
written, read by pydantic-core when the value is asked for, and read and validated by
pydantic-core in one call once it closes (rows of scalars that closed in the same text, as
a list in one call). Reading the partial value
rebuilds only the open path from the root to the value being written (a shallow copy of
each open container, with the open child in place), so a snapshot never changes afterwards
and reading after every chunk stays linear in the chunks where the caller lets each
snapshot go: the open list or map nearest the root is then brought up to date in place,
and text being written decoded as it grows (one the caller holds is copied instead). A
list, map or text open inside another open list or map is copied on each read (the outer
one's last snapshot still holds it when it is looked at), quadratic in its length. Re-parsing
the whole buffer on every chunk, as most libraries do, is quadratic.

The preview follows the rules `finish()` applies: a `null` sent for a field whose type does
not admit it (a strict-mode stand-in) is left out so the default applies, in an open object
and in a completed part, validated without it as `finish()` validates (its type's schema
says which `null`s are stand-ins, where the type may hold one at all). Only text is shown
while it is being written; any other value (a date, a union member) appears when complete.
Open objects are built without validation (their model validators run when they complete)
and without the type's own code: no `model_post_init`, no default factory but a built-in
type's (a field another fills is unset until the object completes); `model_fields_set`
lists the fields that have arrived, a field read from several keys holding the value of the
first choice written. A completed part that does not
validate (a row with a price below its bound, an object its model validator rejects or
raises on) is left out, as a scalar that does not validate is, so that every completed part
shown is a validated value; the value itself (an object or a list at the root), ended but
invalid, stays shown as it was built, and `finish()` raises. An `Iterable`, whose items
pydantic validates as they are iterated, is read through when it completes (an item that
does not fit leaves it out) and kept as its items: each read gets an iterator of its own
over them, so that one read through empties no other. A completed value is validated
as `finish()` validates it: strictly, as JSON (a `date` in a union with `str` is a date,
`"31"` is no int), with the config of the model that holds it (`str_to_upper`,
`use_enum_values`). Text `finish()` does not read as JSON (`NaN`, `Infinity`, a number too
large for a float, a key written twice), which Python's readers and pydantic-core take,
ends the preview there. So does a container opened deeper than `finish()` reads
(pydantic-core reads 201 nested): the preview stays the value as it stood, without that
container, and a read costs nothing more however deep the text goes (a model stuck writing
`[[[[` up to its token limit), where each read rebuilt the whole open path.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import dataclasses
import datetime
import decimal
import enum
import itertools
import json
import re
import sys
import types
import typing
import uuid
from collections.abc import Callable, Iterable
from functools import lru_cache
from json.encoder import encode_basestring_ascii
from typing import Any, Generic, TypeVar

import typing_extensions
from pydantic import (
    AliasChoices,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    RootModel,
    TypeAdapter,
    ValidationError,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, SchemaValidator, from_json, to_json
from typing_extensions import is_typeddict

from allama._printable import storable
from allama.adapters._surrogates import holds_lone_surrogate
from allama.extract._json import keys_all_kept, loads, read
from allama.extract._json_strict import validate_strict_json
from allama.extract._kept import NOT_FINITE, kept_keys
from allama.extract._output import schema_nodes
from allama.schema._nulls import NullWalk, may_hold_stand_in_nulls, null_walk
from allama.schema._types import type_schema

T = TypeVar("T")

_TEXT = r'"([^"\\]*+(?:\\.[^"\\]*+)*+)"'
"""A whole JSON string, its body captured (escapes kept); the loop unrolled, so a long
string is matched in runs rather than one character at a time."""
_TOKEN = re.compile(
    r"""[ \t\r\n]*(?:"""
    + _TEXT
    + r"""[ \t\r\n]*:                                       # 1: a key and its colon
      | """
    + _TEXT
    + r"""                                                  # 2: a whole string
      | ([{}\[\],:])                                            # 3: punctuation
      | (-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?   # 4: a number,
         |true|false|null)(?=[ \t\r\n,:\]}])                    #    or a literal, ended
    )""",
    re.VERBOSE | re.DOTALL,
)
_PAIR = re.compile(
    r"[ \t\r\n]*"
    + _TEXT
    + r"""[ \t\r\n]*:[ \t\r\n]*(?:"""
    + _TEXT
    + r"""                                                  # 2: a string value
      | (-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?   # 3: a number,
         |true|false|null)(?=[ \t\r\n,\]}])                     #    or a literal, ended
    )""",
    re.VERBOSE | re.DOTALL,
)
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}
_SPACE = re.compile(r"[ \t\r\n]*")
_SCALAR_PREFIX = re.compile(r"[-+0-9.eE]+|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?")
_STRING_BODY = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_BRACKET = re.compile(r"[{}\[\]]")
_OUTSIDE = r'(?:[^"{}\[\]]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+'
_SKIP = re.compile(_OUTSIDE)
"""Text up to the next bracket outside a string, or to a string open to the end."""
_LONGEST_ROW = 2_000
"""An object in a list is held as text while it is shorter: a read parses it whole."""
_NEXT_ROW = re.compile(r"[ \t\r\n]*,[ \t\r\n]*\{")
"""A comma, and the next row opening."""
_ROW_RUN = re.compile(r"(?:\{" + _OUTSIDE + r"\}[ \t\r\n]*,[ \t\r\n]*)*+")
"""Rows of scalars that closed, each followed by a comma (no bracket inside one)."""
_MISSING: Any = object()
_LONGEST_SCALAR = 5_000
_DECODER = json.JSONDecoder()


class _Leaf:
    """A value validated whole, by its own validator (with the config of the object that
    holds it, as pydantic validates a field: `str_to_upper`, `use_enum_values`...)."""

    __slots__ = (
        "anything",
        "check",
        "check_json",
        "iterables",
        "nulls",
        "plain",
        "scalar",
        "text",
        "tp",
    )

    def __init__(self, tp: Any, config: ConfigDict | None = None) -> None:
        self.tp = tp
        # The walk of stand-in `null`s (`_without_stand_ins`): `None` where none can be.
        self.nulls: Any = _UNKNOWN
        adapter = _adapter(tp, config)
        self.iterables = _holds_iterable(adapter.core_schema)
        self.check = _python_check(adapter)
        self.check_json = _strict_json(adapter)
        # A JSON scalar of the field's own plain type is its value (unless the config
        # changes text: `str_to_upper`, `str_max_length`...).
        plain = tp in (str, int, float, bool) and not (
            tp is str and config is not None and any(key.startswith("str_") for key in config)
        )
        self.plain: type | None = tp if plain else None
        self.anything = tp is Any  # a JSON value is its own value
        self.text = _is_text(tp)
        self.scalar = _is_scalar(tp)

    def validate(self, raw: Any, text: str | bytes | None = None) -> Any:
        """A completed JSON value (`text`, where the caller has it), validated as `finish()`
        validates it: strictly, as JSON (a date in a union with `str` is a date, `"31"` is
        not an int); a number no float holds is left out."""
        plain = self.plain
        # The common case without a call into the validator: a JSON scalar of the field's
        # own plain type (an int for a float field is a float, as validation makes it).
        if (plain is not None and type(raw) is plain) or self.anything:
            # (a float read as infinite: a number too large for one, not JSON to `finish()`)
            return raw if plain is not float or not raw - raw else _MISSING
        if plain is float and type(raw) is int:
            return float(raw) if -_LARGEST <= raw <= _LARGEST else _MISSING
        given = _MISSING  # (with `text`, `raw` may be its entries validated already)
        if text is None:
            if self.text and type(raw) is str:
                return _attempt(self.check, raw)  # text reads the same in either mode
            try:
                text = _dumps(raw)
            except (ValueError, TypeError, RecursionError):  # not JSON; nested too deep
                return _MISSING
            given = raw
        if self.nulls is not None and (type(raw) is dict or type(raw) is list):
            text = _without_stand_ins(self, text, given)
        return _finite(_attempt(self.check_json, text), text)

    def partial(self, raw: Any) -> Any:
        """An open value as far as it goes: only text, whose every prefix is a prefix of the
        final value. Anything else (a date half written, a union member half built) could
        validate as something the final value is not, so it waits until it completes."""
        if not self.text or not isinstance(raw, str):
            return _MISSING
        if self.plain is str:
            return raw
        return _attempt(self.check, raw)


_LARGEST = int(sys.float_info.max)


def _finite(value: Any, text: str | bytes) -> Any:
    """`value`, validated from the JSON `text`, or `_MISSING` where it holds an infinite
    float: an integer too large for one, which `finish()` refuses (only a text that long
    can hold one)."""
    if type(value) is float:
        return _MISSING if value - value else value
    if len(text) > _FLOAT_DIGITS and value is not _MISSING and kept_keys(value) == NOT_FINITE:
        return _MISSING
    return value


_FLOAT_DIGITS = len(str(int(sys.float_info.max)))


def _dumps(raw: Any) -> str | bytes:
    """A decoded JSON value as JSON text again, for validation as JSON; `ValueError` where
    it holds `NaN` or an infinite float (a number too large for one), which is not JSON."""
    kind = type(raw)
    if kind is str:
        return encode_basestring_ascii(raw)
    if kind is float and raw - raw:
        raise ValueError("not a finite number")
    text = to_json(raw, inf_nan_mode="constants")
    if (b"NaN" in text or b"Infinity" in text) and _NOT_FINITE.search(text) is not None:
        raise ValueError("not a finite number")
    return text


_NOT_FINITE = re.compile(rb"(?:^|[:,\[])-?(?:NaN|Infinity)")
"""`NaN` or an infinite float, as `to_json` writes it (compact: after a colon, a comma or
a bracket); a string that holds the same is taken for one, and waits (`_MISSING`)."""


_UNKNOWN: Any = object()
"""A shape's walk of stand-in `null`s, not looked for yet (`_without_stand_ins`)."""


def _stand_in_walk(tp: Any) -> NullWalk | None:
    """The walk `finish()` removes stand-in `null`s with at a place of `tp`, against `tp`'s
    own schema (`type_schema`'s, as its `$defs` entry in the whole schema reads), where its
    value may hold one (`may_hold_stand_in_nulls`); `None` where it cannot, so that its
    completed parts are validated as written, without a look."""
    try:
        schema = type_schema(tp).schema
    except Exception:  # no schema of its own (the type's code raised): validated as written
        return None
    return null_walk(schema) if may_hold_stand_in_nulls(schema) else None


@typing.overload
def _without_stand_ins(
    shape: _Leaf | _Object, text: str, raw: Any = ..., rows: bool = ...
) -> str: ...
@typing.overload
def _without_stand_ins(
    shape: _Leaf | _Object, text: str | bytes, raw: Any = ..., rows: bool = ...
) -> str | bytes: ...
def _without_stand_ins(
    shape: _Leaf | _Object, text: str | bytes, raw: Any = _MISSING, rows: bool = False
) -> str | bytes:
    """A completed part's JSON `text` without the stand-in `null`s `finish()` removes before
    it validates (`normalize_strict_nulls`), so that their fields' defaults apply here too:
    written again where one was, as `finish()` writes it; `text` itself otherwise. `raw` is
    its JSON value, where the caller has it; `rows`, a list of objects of `shape`. A text
    that writes no `null` is not read."""
    if (b"null" not in text) if isinstance(text, bytes) else ("null" not in text):
        return text
    walk = shape.nulls
    if walk is _UNKNOWN:
        walk = shape.nulls = _stand_in_walk(shape.tp)
    if walk is None:
        return text
    try:
        if raw is _MISSING:
            raw = read(text if isinstance(text, str) else text.decode())[0]
        if rows:
            if not isinstance(raw, list):
                return text
            normalized: Any = [walk.normalize(row) for row in raw]
            if all(new is old for new, old in zip(normalized, raw, strict=True)):
                return text
        else:
            normalized = walk.normalize(raw)
            if normalized is raw:
                return text
        return json.dumps(normalized)
    except (ValueError, RecursionError):  # not JSON to `finish()`: refused as written
        return text


def _adapter(tp: Any, config: ConfigDict | None) -> TypeAdapter[Any]:
    """`tp`'s adapter, with `config` where `tp` takes one (a model has its own)."""
    if config is not None:
        try:
            return TypeAdapter(tp, config=config)
        except PydanticUserError:
            pass
    return TypeAdapter(tp)


def _attempt(check: Callable[[Any], Any], raw: Any) -> Any:
    """`check(raw)`, or `_MISSING` where it does not validate: a `ValidationError`, or an
    exception the type's own validators raise (a lookup's `KeyError`). In a preview either
    means "not valid yet"; `finish()` validates the whole value again and raises it there,
    with the extraction's record on it, as a call that is not streamed does."""
    try:
        return check(raw)
    except ValidationError:
        return _MISSING
    except Exception:  # the type's own code: not valid, not a failure of the preview
        return _MISSING


def _python_check(adapter: TypeAdapter[Any]) -> Callable[[Any], Any]:
    """The validator's own entry point for Python values, without the adapter's per-call
    wrapping where the validator is built; the adapter's otherwise."""
    validator = adapter.validator
    if isinstance(validator, SchemaValidator):
        return validator.validate_python
    return adapter.validate_python


def _strict_json(adapter: TypeAdapter[Any]) -> Callable[[str | bytes], Any]:
    """JSON text's value, validated strictly, as `finish()` validates it (where a validator
    that runs first hands on Python objects the strict reading refuses, its fallbacks:
    `validate_strict_json`); raises `ValidationError`. Where the type holds an `Iterable`,
    its items are checked too (`_held`)."""
    validator = adapter.validator
    direct = validator if isinstance(validator, SchemaValidator) else adapter

    def check(text: str | bytes) -> Any:
        try:
            return direct.validate_json(text, strict=True)
        except ValidationError:
            return validate_strict_json(adapter, text if isinstance(text, str) else text.decode())

    if not _holds_iterable(adapter.core_schema):
        return check

    def check_items(text: str | bytes) -> Any:
        return _held(check(text))

    return check_items


def _holds_iterable(core: Any) -> bool:
    """Whether a core schema reads an `Iterable` (pydantic's `generator`) anywhere in it."""
    return any(node.get("type") == "generator" for node in schema_nodes(core))


_LAZY = type(TypeAdapter(Iterable[int]).validate_python(()))
"""pydantic's value of an `Iterable`: an iterator that validates each item as it is read."""


class _Items:
    """A completed `Iterable`'s items, checked (`_held`): what the partial value keeps in its
    place, each snapshot given an iterator of its own over them (`_fresh`). pydantic's own
    value is one iterator, that validates as it is read: the caller would meet an item that
    does not fit in their own code, and every later snapshot sharing it would find it read."""

    __slots__ = ("items",)

    def __init__(self, items: tuple[Any, ...]) -> None:
        self.items = items


def _held(value: Any) -> Any:
    """A validated value with each `Iterable` in it read whole, its items checked as the
    type checks them (an `_Items` in its place): raises where one does not fit, so that the
    part is left out, as a list that does not validate is."""
    return _swapped(value, _hold)


def _hold(value: Any) -> Any:
    if type(value) is _LAZY:
        return _Items(tuple(_held(item) for item in value))
    return _MISSING


def _fresh(value: Any, made: _Given | None = None) -> Any:
    """A snapshot of the partial value with each `_Items` in it a new iterator over its items
    (the objects around them copied): reading one snapshot's leaves the next one's whole.
    What it makes is recorded in `made`, where given (`_Given`)."""
    if made is None:
        return _swapped(value, _iterator)
    return _swapped(value, lambda part: _iterator(part, made), made)


def _iterator(value: Any, made: _Given | None = None) -> Any:
    if type(value) is _Items:
        items = [_fresh(item, made) for item in value.items]
        iterator = iter(items)
        if made is not None:
            made.iterators.append(iterator)
            made.lengths.append(len(items))
        return iterator
    return _MISSING


def _swapped(value: Any, swap: Callable[[Any], Any], made: _Given | None = None) -> Any:
    """`value` with each part `swap` gives a replacement for (not `_MISSING`) replaced: the
    lists, maps, tuples, models and dataclasses around one copied (each copy recorded in
    `made`, where given), the rest shared."""
    done = swap(value)
    if done is not _MISSING:
        return done
    kind = type(value)
    if kind in _ATOMS:
        return value
    copied: Any
    if kind is list or isinstance(value, tuple):
        items = [_swapped(item, swap, made) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        if kind is list or kind is tuple:
            copied = items if kind is list else tuple(items)
        else:
            make = getattr(kind, "_make", None)  # a named tuple
            if make is None:
                return value
            copied = make(items)
    elif kind is dict:
        entries = {key: _swapped(item, swap, made) for key, item in value.items()}
        if all(entries[key] is item for key, item in value.items()):
            return value
        copied = entries
    else:
        model = isinstance(value, BaseModel)
        if not model and not (dataclasses.is_dataclass(value) and not isinstance(value, type)):
            return value
        names = (
            list(value.__dict__) if model else [field.name for field in dataclasses.fields(value)]
        )
        changed: dict[str, Any] = {}
        for name in names:
            old = value.__dict__[name] if model else getattr(value, name, None)
            new = _swapped(old, swap, made)
            if new is not old:
                changed[name] = new
        return _replaced(value, changed, made)
    if made is not None:
        made.made.append(copied)
    return copied


def _replaced(value: Any, changed: dict[str, Any], made: _Given | None = None) -> Any:
    """A copy of a model or a dataclass `value` with the fields `changed` (name → value)
    set, bypassing validation (and a frozen class's guard); `value` itself where none is.
    The copy is recorded in `made`, where given."""
    if not changed:
        return value
    copied = copy.copy(value)
    for name, new in changed.items():
        if isinstance(copied, BaseModel):
            copied.__dict__[name] = new
        else:
            object.__setattr__(copied, name, new)
    if made is not None:
        made.made.append(copied)
    return copied


_ATOMS = frozenset({str, int, float, bool, type(None), bytes})


def _read_as_written(text: str, value: Any, decimals: bool) -> bool:
    """Whether `value`, read and validated from the JSON `text` by pydantic-core, is what
    `finish()` reads there: pydantic-core reads `NaN`, `Infinity` and numbers too large for
    a float, and keeps a key written twice once; `finish()` refuses all four. A count of
    the keys (`keys_all_kept`) clears it at once (and, with no `Decimal` in the type
    (`decimals`), the search for a large exponent); otherwise the strict reader decides."""
    kept = kept_keys(value)
    if kept == NOT_FINITE:
        return False  # (an integer too large for a float, in a float: `finish()` says so)
    if keys_all_kept(text, kept) and not (decimals and _HUGE.search(text)):
        return True
    try:
        loads(text)
    except (ValueError, RecursionError):
        return False
    return True


_HUGE = re.compile(r"[eE]\+?[0-9]{3}")
"""What may be a number too large for a float though the value validated from it is finite
(a `Decimal` of `1e400`); `NaN` and the others are not finite, which `kept_keys` sees."""


def _holds_decimal(schema: Any) -> bool:
    """Whether a pydantic-core schema validates a `Decimal` anywhere in it."""
    stack, seen = [schema], set()
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.get("type") == "decimal":
                return True
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return False


def _value_pending(text: str) -> bool:
    """Whether the text cut off ends with a key whose value pydantic-core does not read yet
    (none, `-`, `1.`, `tr`...): one key more written than read."""
    tail = text[text.rfind('":') + 2 :].strip()
    return not tail or _PENDING.fullmatch(tail) is not None


_PENDING = re.compile(
    r"-|-?[0-9]+\.|-?[0-9]+(?:\.[0-9]+)?[eE][-+]?|t|tr|tru|f|fa|fal|fals|n|nu|nul"
)
"""A value cut off that pydantic-core's reading leaves out (with its key)."""


def _repeats_key(text: str) -> bool:
    """Whether an object in the JSON text `text` (from its start, maybe cut off) writes a
    key twice."""
    keys: list[set[str] | None] = []
    for body, colon, bracket in _KEYS.findall(text):
        if bracket:
            if bracket == "{":
                keys.append(set())
            elif bracket == "[":
                keys.append(None)
            elif keys:
                keys.pop()
        elif colon and keys:
            seen = keys[-1]
            if seen is not None:
                key = body
                if "\\" in body:
                    with contextlib.suppress(ValueError):
                        key = _decode(body)
                if key in seen:
                    return True
                seen.add(key)
    return False


_KEYS = re.compile(r'"([^"\\]*+(?:\\.[^"\\]*+)*+)"[ \t\r\n]*(:)?|([{}\[\]])', re.DOTALL)
"""A string (a key where a colon follows it), or a bracket."""


_SCALARS: tuple[type, ...] = (str, int, float, bool, enum.Enum, decimal.Decimal, uuid.UUID)
_SCALARS += (datetime.date, datetime.time, datetime.timedelta)


def _is_scalar(tp: Any) -> bool:
    """Whether every JSON value of `tp` is a scalar (no object or array): a plain type, an
    enum, a `Literal` of scalars, or any of them optional or annotated."""
    base, _ = _strip(tp)
    origin = typing.get_origin(base)
    if origin is typing.Literal:
        return True
    if origin in (typing.Union, types.UnionType):
        return all(arg is type(None) or _is_scalar(arg) for arg in typing.get_args(base))
    return isinstance(base, type) and origin is None and issubclass(base, _SCALARS)


def _is_text(tp: Any) -> bool:
    """Whether `tp` is `str`, maybe `Annotated` or `Optional`."""
    base, _ = _strip(tp)
    if typing.get_origin(base) in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(base) if arg is not type(None)]
        if len(options) != 1:
            return False
        base, _ = _strip(options[0])
    return base is str


class _Object:
    """A model, dataclass or TypedDict: fields validated one by one to be shown while it is
    open, the whole once from its text when it completes."""

    __slots__ = (
        "_builder",
        "_by_name",
        "_check",
        "_decimals",
        "_fields",
        "_flat",
        "_iterables",
        "_rows",
        "nullable",
        "nulls",
        "tp",
    )

    def __init__(self, tp: Any, nullable: bool = False) -> None:
        self.tp = tp
        self.nullable = nullable
        # The walk of stand-in `null`s (`_without_stand_ins`): `None` where none can be.
        self.nulls: Any = _UNKNOWN
        self._fields: dict[str, tuple[str, Any]] | None = None
        self._check: Callable[[str | bytes], Any] | None = None
        self._rows: Callable[[str | bytes], Any] | None = None
        self._builder: Callable[[dict[str, Any]], Any] | None = None
        self._flat: bool | None = None
        self._decimals: bool | None = None
        self._iterables: bool | None = None
        self._by_name: dict[str, _Shape] | None = None

    @property
    def iterables(self) -> bool:
        """Whether an `Iterable` may be in the object (`_Fresh`)."""
        if self._iterables is None:
            self._iterables = _holds_iterable(TypeAdapter(self.tp).core_schema)
        return self._iterables

    @property
    def by_name(self) -> dict[str, _Shape]:
        """Attribute name → the shape of its field."""
        if self._by_name is None:
            self._by_name = dict(self.fields.values())
        return self._by_name

    @property
    def flat(self) -> bool:
        """Whether every field holds a JSON scalar: such rows are read more simply (see
        `PartialValue._row_so_far`), and validated many at a time."""
        if self._flat is None:
            if self._fields is None:
                self._fields = _fields_of(self.tp)
            self._flat = bool(self._fields) and all(
                isinstance(shape, _Leaf) and shape.scalar for _, shape in self._fields.values()
            )
        return self._flat

    def field(self, key: str) -> tuple[str, Any] | None:
        """The attribute name and the shape of the field the JSON key `key` fills."""
        if self._fields is None:
            self._fields = _fields_of(self.tp)
        return self._fields.get(key)

    @property
    def fields(self) -> dict[str, tuple[str, Any]]:
        """JSON key → (attribute name, shape)."""
        if self._fields is None:
            self._fields = _fields_of(self.tp)
        return self._fields

    def construct(self, values: dict[str, Any]) -> Any:
        """The object as far as it goes, without validating it as a whole."""
        build = self._builder
        if build is None:
            build = self._builder = _builder(self.tp, self.fields)
        return build(values)

    @property
    def check(self) -> Callable[[str | bytes], Any]:
        """The type's validator of JSON text (strictly, as `finish()` validates it). Never
        one of Python values: those would be its fields validated already, and their
        validators (`Annotated`, a nested model's) would run on them again."""
        if self._check is None:
            self._check = _strict_json(TypeAdapter(self.tp))
        return self._check

    def validate_json(self, raw: dict[str, Any], text: str | bytes | None = None) -> Any:
        """The object from its JSON value `raw` (its text, where the caller has it), read
        as `finish()` reads it."""
        if text is None:
            try:
                text = _dumps(raw)
            except (ValueError, TypeError, RecursionError):  # not JSON; nested too deep
                return _MISSING
        if self.nulls is not None:
            text = _without_stand_ins(self, text, raw)
        return _finite(_attempt(self.check, text), text)

    def validate_rows(self, text: str) -> Any:
        """Rows of this type, `{...}, {...}` as JSON text, validated as a list in one call."""
        if self._rows is None:
            rows: Any = types.GenericAlias(list, (self.tp,))  # `list[tp]`, `tp` known at run time
            self._rows = _strict_json(TypeAdapter(rows))
        text = f"[{text}]"
        if self.nulls is not None and "null" in text:
            text = _without_stand_ins(self, text, rows=True)
        value = _attempt(self._rows, text)
        if value is _MISSING or _read_as_written(text, value, self.decimals):
            return value
        return _MISSING

    def validate_text(self, text: str) -> Any:
        """The object from its whole JSON text, read and validated in one call."""
        if self.nulls is not None and "null" in text:
            text = _without_stand_ins(self, text)
        value = _attempt(self.check, text)
        if value is _MISSING or _read_as_written(text, value, self.decimals):
            return value
        return _MISSING

    @property
    def decimals(self) -> bool:
        """Whether a `Decimal` may be in the object (`_read_as_written`)."""
        if self._decimals is None:
            self._decimals = _holds_decimal(TypeAdapter(self.tp).core_schema)
        return self._decimals

    def complete(self, values: dict[str, Any], text: str, root: bool = False) -> Any:
        """The completed object, validated once from its JSON `text`; `_MISSING` where it
        does not validate, so that a completed part shown is always a validated one. The
        value itself (`root`) is shown as far as it goes instead, from its fields (`values`):
        there is nothing to leave it out of, and `finish()` says why it fails."""
        # (Read as `finish()` reads it by the scanner: no key twice, no `NaN`, no exponent
        # past a float's; an integer too long for a float field is what is left to see.)
        if self.nulls is not None and "null" in text:
            text = _without_stand_ins(self, text)
        checked = _finite(_attempt(self.check, text), text)
        if checked is _MISSING and root:
            return self.construct(values)
        return checked


class _List:
    __slots__ = ("item", "nullable", "whole")

    def __init__(self, item: Any, whole: _Leaf | None, nullable: bool = False) -> None:
        self.item = item
        self.whole = whole
        self.nullable = nullable

    @property
    def iterables(self) -> bool:
        return bool(self.item.iterables or (self.whole is not None and self.whole.iterables))

    def complete(self, values: list[Any], text: str | bytes, root: bool = False) -> Any:
        """The completed list, its items each validated (`values`), or validated whole from
        its JSON `text` where its type says (`Annotated`); as `_Object.complete`, `_MISSING`
        where that fails, unless it is the value itself."""
        if self.whole is None:
            return values
        checked = self.whole.validate(values, text)
        return values if checked is _MISSING and root else checked


class _Map:
    __slots__ = ("nullable", "value", "whole")

    def __init__(self, value: Any, whole: _Leaf | None, nullable: bool = False) -> None:
        self.value = value
        self.whole = whole
        self.nullable = nullable

    @property
    def iterables(self) -> bool:
        return bool(self.value.iterables or (self.whole is not None and self.whole.iterables))

    def complete(self, values: dict[str, Any], text: str | bytes, root: bool = False) -> Any:
        """As `_List.complete`."""
        if self.whole is None:
            return values
        checked = self.whole.validate(values, text)
        return values if checked is _MISSING and root else checked


_Shape = _Leaf | _Object | _List | _Map


def _most_held(objects: list[Any]) -> int:
    """The highest reference count among `objects`, as `sys.getrefcount` sees each."""
    return max(map(sys.getrefcount, objects), default=0)


def _counts_tell() -> bool:
    """Whether reference counts, measured once at import, tell what holds an object for the
    life of the process: CPython's, with the GIL and no JIT (a free-threaded build's counts
    are split between threads, and a JIT may drop a reference the measure saw). Where they
    do not, nothing is updated in place or handed out again: each read copies."""
    if sys.implementation.name != "cpython":
        return False
    gil: Callable[[], bool] = getattr(sys, "_is_gil_enabled", lambda: True)
    jit = getattr(getattr(sys, "_jit", None), "is_enabled", lambda: False)
    return bool(gil()) and not jit()


def _calibrate_held() -> int:
    """What `_most_held` sees of an object two lists hold and nothing else (`_Given`'s
    records): more means the caller holds it too. -1 where reference counts do not tell
    (nothing is then handed out again)."""
    if not _counts_tell():
        return -1
    records: list[Any] = [object()]
    holder = [records[0]]
    seen = _most_held(records)
    return seen if _most_held([holder[0], holder]) > seen else -1


_HELD_TWICE = _calibrate_held()
_LEFT: Callable[[Any], int] = getattr(type(iter([])), "__length_hint__")  # noqa: B009
"""How many items a list's iterator has left to give (one never read: all of them)."""


class _Given:
    """A list's copy handed out by the last read where its items hold an `Iterable`
    (`_Fresh`), each copied item made with iterators of its own. It is handed out again
    (brought up to date in place, as `_Frame.with_tail` does) where the caller let it go:
    the copies of the items before the first one the caller holds, or one of whose
    iterators they hold or have started reading, are kept; that one on is made again. The
    caller holding the list itself (the last snapshot kept) has every item made again."""

    __slots__ = ("copies", "iterators", "lengths", "made", "marks", "sources")

    def __init__(self) -> None:
        # The items of the scanner's list the copies were made from, in order (the list is
        # not held: `_Frame.with_tail` updates it in place where nothing else does).
        self.sources: list[Any] = []
        self.copies: list[Any] = []  # the list handed out
        self.made: list[Any] = []  # what was made for the copies (models, lists, maps...)
        self.iterators: list[Any] = []  # the iterators made for them, and their lengths
        self.lengths: list[int] = []
        # For each item: how many of `made` and of `iterators` were made up to it.
        self.marks: list[tuple[int, int]] = []

    def kept(self) -> int:
        """How many of the copies may be handed out again (-1: not the list itself)."""
        # (No name here for the list: it would hold it once more.)
        if _HELD_TWICE < 0 or _most_held([self.copies]) > _HELD_TWICE:
            return -1
        if len(self.copies) != len(self.sources):
            return -1  # the caller took an item out of it, or put one in: theirs
        count = len(self.copies)
        made, iterators = self.made, self.iterators
        if _most_held(made) > _HELD_TWICE:
            first = next(i for i, n in enumerate(map(sys.getrefcount, made)) if n > _HELD_TWICE)
            count = min(count, bisect.bisect_right([m for m, _ in self.marks], first))
        if iterators and (
            _most_held(iterators) > _HELD_TWICE or list(map(_LEFT, iterators)) != self.lengths
        ):
            counts = map(sys.getrefcount, iterators)
            first = next(
                i
                for i, (n, left, length) in enumerate(
                    zip(counts, map(_LEFT, iterators), self.lengths, strict=True)
                )
                if n > _HELD_TWICE or left != length
            )
            count = min(count, bisect.bisect_right([i for _, i in self.marks], first))
        return count

    def cut(self, count: int) -> None:
        """Keep the copies of the first `count` items only."""
        if count == len(self.copies):
            return
        made, iterators = self.marks[count - 1] if count else (0, 0)
        del self.sources[count:], self.copies[count:], self.marks[count:]
        del self.made[made:], self.iterators[iterators:], self.lengths[iterators:]


class _Fresh:
    """`_fresh`, led by the shape of the value, for each read of a partial value whose type
    holds an `Iterable`: what its type says holds no `Iterable` (a long list of rows without
    one) is not walked. A list of items that hold one (rows with an `Iterable` field) has
    the copies of its items that the caller let go handed out again (`_Given`), so that a
    read costs the items that arrived since the last one, not every item so far."""

    __slots__ = ("given",)

    def __init__(self) -> None:
        self.given: dict[int, _Given] = {}

    def snapshot(self, shape: _Shape, value: Any) -> Any:
        """`value`, the partial value (the scanner's), with iterators of its own."""
        last = self.given
        self.given = {}
        return self._as(shape, value, last, None)

    def _as(
        self, shape: _Shape | None, value: Any, last: dict[int, _Given], made: _Given | None
    ) -> Any:
        """`value` of `shape` with iterators of its own; what is made recorded in `made`
        (inside an item of a list whose copies are kept), where given."""
        if shape is None or value is None or not shape.iterables:
            return value
        if isinstance(shape, _Leaf) or (
            isinstance(shape, _List | _Map) and shape.whole is not None
        ):
            return _fresh(value, made)
        if isinstance(shape, _List):
            if type(value) is not list:
                return _fresh(value, made)
            if made is None and id(value) not in self.given:
                return self._list(shape.item, value, last)
            items = [self._as(shape.item, item, last, made) for item in value]
            if all(new is old for new, old in zip(items, value, strict=True)):
                return value
            if made is not None:
                made.made.append(items)
            return items
        if isinstance(shape, _Map):
            if type(value) is not dict:
                return _fresh(value, made)
            entries = {key: self._as(shape.value, item, last, made) for key, item in value.items()}
            if all(entries[key] is item for key, item in value.items()):
                return value
            if made is not None:
                made.made.append(entries)
            return entries
        fields = shape.by_name
        if type(value) is dict:  # a `TypedDict`
            typed = {
                key: self._as(fields.get(key), item, last, made) for key, item in value.items()
            }
            if all(typed[key] is item for key, item in value.items()):
                return value
            if made is not None:
                made.made.append(typed)
            return typed
        if isinstance(value, BaseModel):
            state = value.__dict__
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            state = {
                field.name: getattr(value, field.name, None) for field in dataclasses.fields(value)
            }
        else:
            return _fresh(value, made)
        changed = {}
        for name, old in state.items():
            new = self._as(fields.get(name), old, last, made)
            if new is not old:
                changed[name] = new
        return _replaced(value, changed, made)

    def _list(self, item: _Shape, value: list[Any], last: dict[int, _Given]) -> list[Any]:
        """A list on the path from the root (not inside an item copied): its copy handed out
        last, brought up to date, where the caller let it go. The scanner's list is brought
        up to date in place (`_Frame.with_tail`): its items before the last one it had at
        the last read are the same; the last may have been the item being written. The list
        is known by its identity, its items checked to be the ones copied."""
        given = last.get(id(value))
        count = -1 if given is None else given.kept()
        if given is not None and count >= 0:
            sources = given.sources
            count = min(count, len(value))
            if count and count == len(sources) and value[count - 1] is not sources[count - 1]:
                count -= 1
            given.cut(count)
            # The same items (a list in another place since, or not: its copies fit it),
            # told by identity where they are the same (no item's `__eq__` runs then).
            try:
                if value[:count] != sources:
                    count = -1
            except Exception:  # an item's own `__eq__`
                count = -1
        if given is None or count < 0:
            given = _Given()
        self.given[id(value)] = given
        sources, copies, marks = given.sources, given.copies, given.marks
        for index in range(len(sources), len(value)):
            source = value[index]
            sources.append(source)
            copies.append(self._as(item, source, last, given))
            marks.append((len(given.made), len(given.iterators)))
        return copies


def _builder(tp: Any, fields: dict[str, tuple[str, Any]]) -> Callable[[dict[str, Any]], Any]:
    """How an object of `tp` is built from the values that arrived (JSON key → value), made
    once per type: a snapshot is built on every read of an open object."""
    names = {key: name for key, (name, _) in fields.items()}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _model_builder(tp, names)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_builder(tp, names)

    pick = _by_priority(names)

    def typed_dict(values: dict[str, Any]) -> dict[str, Any]:
        if pick is not None:
            return pick(values)[0]
        return {names[key]: value for key, value in values.items() if key in names}

    return typed_dict


def _model_builder(tp: type[BaseModel], names: dict[str, str]) -> Callable[[dict[str, Any]], Any]:
    """An open model without validation and without the type's own code: the fields that
    arrived, in the order they arrived, then the defaults of the others (`_defaults`: a
    field a default factory of the type's fills is left unset until the object completes);
    `model_post_init` does not run (private attributes hold their defaults); unknown keys
    are left out (kept as extras only where the model allows them). Not `model_construct`:
    it runs every factory (one taking the data raises on a half object; a `uuid4` would
    change on every read) and `model_post_init` (which may read a field not yet there)."""
    defaults, made = _defaults(tp)
    count = len(tp.model_fields)
    known = names.keys()
    same = all(key == name for key, name in names.items())  # no field is aliased
    pick = _by_priority(names)
    allow = tp.model_config.get("extra") == "allow"
    private = _private_defaults(tp)
    new = object.__new__
    put = object.__setattr__

    def built(values: dict[str, Any]) -> Any:
        extra: dict[str, Any] | None = None
        if same and values.keys() <= known:
            named = values
        elif pick is None:
            named = {names[key]: value for key, value in values.items() if key in known}
            if allow:
                extra = {key: value for key, value in values.items() if key not in known}
        else:
            named, unused = pick(values)
            if allow:
                extra = {key: value for key, value in values.items() if key in unused}
        state = dict(named)
        if len(state) < count:
            for name, default in defaults.items():
                if name not in state:
                    make = made.get(name)
                    state[name] = default if make is None else make(default)
        instance = new(tp)
        put(instance, "__dict__", state)
        put(instance, "__pydantic_fields_set__", set(named))
        put(instance, "__pydantic_extra__", {} if allow and extra is None else extra)
        put(instance, "__pydantic_private__", None if private is None else private())
        return instance

    return built


def _by_priority(
    names: dict[str, str],
) -> Callable[[dict[str, Any]], tuple[dict[str, Any], set[str]]] | None:
    """Where a field is read from several keys (`AliasChoices`, an alias and the name), the
    values by field name as validation takes them: of the keys written, the first choice
    (the alias before the name), whatever the order they came in; and the keys not taken
    (extras, where the model keeps them). `None` where every field has one key. `names` is
    in the order validation tries the keys (`_fields_of`)."""
    rank: dict[str, int] = {}
    keys_of: dict[str, int] = {}
    for key, name in names.items():
        rank[key] = keys_of.get(name, 0)
        keys_of[name] = rank[key] + 1
    if all(count == 1 for count in keys_of.values()):
        return None

    def pick(values: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
        named: dict[str, Any] = {}
        taken: dict[str, str] = {}  # field name -> the key its value came from
        unused: set[str] = set()
        for key, value in values.items():
            name = names.get(key)
            if name is None:
                unused.add(key)
                continue
            held = taken.get(name)
            if held is not None:
                if rank[held] < rank[key]:
                    unused.add(key)
                    continue
                unused.add(held)
            named[name] = value
            taken[name] = key
        return named, unused

    return pick


_SAME_EVERY_CALL = frozenset({list, dict, set, frozenset, tuple, str, bytes, int, float, bool})
"""Default factories that make an equal value on every call and run none of the type's
code: called for an open object's snapshot. Any other factory (a `uuid4`, one that reads
the data) waits until the object completes."""


def _same_every_call(factory: Any) -> bool:
    """Whether `factory` is one of `_SAME_EVERY_CALL` (a type: hashable, as a callable
    object may not be)."""
    return isinstance(factory, type) and factory in _SAME_EVERY_CALL


def _copied(default: Any) -> Any:
    return default.copy()


def _called(factory: Any) -> Any:
    return factory()


def _deep_copied(default: Any) -> Any:
    return copy.deepcopy(default)


def _defaults(tp: type[BaseModel]) -> tuple[dict[str, Any], dict[str, Callable[[Any], Any]]]:
    """The defaults of a model's fields, in field order, and how each of those that is not
    shared is made for an instance: an empty list, dict or set copied, another mutable
    default deep-copied (as pydantic gives each instance its own), a factory of
    `_SAME_EVERY_CALL` called. A field filled by any other factory is not among them."""
    defaults: dict[str, Any] = {}
    made: dict[str, Callable[[Any], Any]] = {}
    for name, info in tp.model_fields.items():
        found = _default_of(info.default, info.default_factory)
        if found is not None:
            defaults[name], make = found
            if make is not None:
                made[name] = make
    return defaults, made


def _default_of(default: Any, factory: Any) -> tuple[Any, Callable[[Any], Any] | None] | None:
    """A field's default for an open object's snapshot and how each snapshot gets its own
    (`None`: shared), as `_defaults` says; `None` where the field has no default, or one
    that a factory not of `_SAME_EVERY_CALL` makes."""
    if factory is not None:
        return (factory, _called) if _same_every_call(factory) else None
    if default is PydanticUndefined:
        return None
    if type(default) in (list, dict, set) and not default:
        return default, _copied
    if not isinstance(default, str | int | float | bool | type(None) | tuple):
        return default, _deep_copied
    return default, None


def _private_defaults(tp: type[BaseModel]) -> Callable[[], dict[str, Any]] | None:
    """How an open model's private attributes are made (`None`: it has none): their
    defaults, as `model_post_init` finds them; one a factory makes as `_defaults` says."""
    attributes = tp.__private_attributes__
    if not attributes:
        return None
    plain: dict[str, Any] = {}
    factories: dict[str, Any] = {}
    for name, attribute in attributes.items():
        factory = attribute.default_factory
        if factory is not None:
            if _same_every_call(factory):
                factories[name] = factory
        elif attribute.default is not PydanticUndefined:
            plain[name] = attribute.default

    def made() -> dict[str, Any]:
        state = {name: copy.deepcopy(default) for name, default in plain.items()}
        for name, factory in factories.items():
            state[name] = factory()
        return state

    return made


def _dataclass_builder(tp: type, names: dict[str, str]) -> Callable[[dict[str, Any]], Any]:
    """A dataclass instance without `__init__` (its checks run when it completes): the
    fields that arrived, defaults for the others, and `None` for a field with neither (a
    dataclass's own `repr`, `==` and `dataclasses.asdict` read every field; left unset,
    printing the preview would raise). The defaults are those validation gives (`_defaults`'
    rules): a `Field(default=...)` assigned is its default, not the `FieldInfo` the class
    holds. A field a factory fills holds `None` too until the object completes, unless the
    factory is one of `_SAME_EVERY_CALL`."""
    fields = [field.name for field in dataclasses.fields(tp)]
    read = _core_fields(tp)
    defaults: dict[str, tuple[Any, Callable[[Any], Any] | None] | None] = {}
    for name in fields:
        field = read.get(name) if read is not None else None
        schema = field.get("schema") if field is not None else None
        if isinstance(schema, dict) and schema.get("type") == "default":
            default = schema.get("default", PydanticUndefined)
            defaults[name] = _default_of(default, schema.get("default_factory"))
        else:
            defaults[name] = None
    pick = _by_priority(names)

    def built(values: dict[str, Any]) -> Any:
        if pick is None:
            named = {names[key]: value for key, value in values.items() if key in names}
        else:
            named = pick(values)[0]
        instance: Any = object.__new__(tp)
        for name in fields:
            if name in named:
                value = named[name]
            else:
                found = defaults[name]
                if found is None:
                    value = None
                else:
                    value, make = found
                    if make is not None:
                        value = make(value)
            object.__setattr__(instance, name, value)
        return instance

    return built


def _strip(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(tp) is typing.Annotated:
        args = typing.get_args(tp)
        return args[0], tuple(args[1:])
    return tp, ()


def _shape(tp: Any, owner: Any = None) -> _Shape:
    """How a value of `tp` is read; `owner`, the object type whose config its values are
    validated with, where that type sets one (a model's config reaches its fields, and the
    items of their lists, not the objects inside them, which have their own).

    Cached per type; a type expression that cannot be hashed (`Annotated[P, {"doc": ...}]`)
    is read each time, as `type_schema` builds its schema each time."""
    try:
        hash((tp, owner))
    except TypeError:
        return _read_shape(tp, owner)
    return _cached_shape(tp, owner)


@lru_cache(maxsize=1024)
def _cached_shape(tp: Any, owner: Any) -> _Shape:
    return _read_shape(tp, owner)


def _read_shape(tp: Any, owner: Any) -> _Shape:
    base, metadata = _strip(tp)
    if any(isinstance(item, FieldInfo) for item in metadata):
        metadata = _validating(metadata)
        tp = typing.Annotated[(base, *metadata)] if metadata else base
    origin = typing.get_origin(base)
    config = None if owner is None else _config_of(owner)
    if origin in (typing.Union, types.UnionType) and not metadata:
        options = [arg for arg in typing.get_args(base) if arg is not type(None)]
        if len(options) == 1:
            inner = _shape(options[0], owner)
            if isinstance(inner, _Object):
                return _Object(inner.tp, nullable=True)
            if isinstance(inner, _List):
                return _List(inner.item, inner.whole, nullable=True)
            if isinstance(inner, _Map):
                return _Map(inner.value, inner.whole, nullable=True)
        return _Leaf(tp, config)
    if not metadata and isinstance(base, type):
        if owner is not None and (
            issubclass(base, BaseModel) or dataclasses.is_dataclass(base) or is_typeddict(base)
        ):
            return _shape(tp)  # validated with its own config
        if issubclass(base, RootModel):
            # Its JSON is its root's, not an object of its fields: validated whole (the
            # stream previews the root of one at the top, see `root_of`).
            return _Leaf(tp)
        if issubclass(base, BaseModel):
            return _Object(base)
        if dataclasses.is_dataclass(base) or is_typeddict(base):
            # One whose fields' types cannot be read (a name `_hints` cannot resolve) is
            # shown once it completes, validated whole, as pydantic reads it.
            return _Object(base) if _hints(tp) is not None else _Leaf(tp)  # (`tp` is `base`)
    whole = _Leaf(tp, config) if metadata else None
    if origin is list:
        (item,) = typing.get_args(base) or (Any,)
        return _List(_shape(item, owner), whole)
    if origin is dict:
        key, value = typing.get_args(base) or (str, Any)
        if key is str:
            return _Map(_shape(value, owner), whole)
    return _Leaf(tp, config)


def _validating(metadata: tuple[Any, ...]) -> tuple[Any, ...]:
    """`Annotated` metadata with each `Field()` in it replaced by what it gives the value's
    validation: its constraints, its discriminator. The rest (an alias, a default) is the
    field's, which `_fields_of` and the builders read; an adapter of the bare type given it
    warns that it has no effect (`UnsupportedFieldAttributeWarning`)."""
    kept: list[Any] = []
    for item in metadata:
        if not isinstance(item, FieldInfo):
            kept.append(item)
            continue
        kept.extend(item.metadata)
        if item.discriminator is not None:
            kept.append(Field(discriminator=item.discriminator))
    return tuple(kept)


_NOT_VALIDATION = frozenset(
    {
        "title",
        "defer_build",
        "frozen",
        "validate_assignment",
        "protected_namespaces",
        "use_attribute_docstrings",
        "model_title_generator",
        "field_title_generator",
        "plugin_settings",
        "serialize_by_alias",
        "json_encoders",
        "hide_input_in_errors",
        "validation_error_cause",
        "loc_by_alias",
        "cache_strings",
        "validate_return",
    }
)
"""Config keys that change nothing a field's value validates to: naming, serialization,
messages."""


def _config_of(tp: Any) -> ConfigDict | None:
    """The config `tp` (a model, a pydantic dataclass, a `TypedDict`) gives its fields'
    validation, where it sets one."""
    config = (
        tp.model_config if issubclass(tp, BaseModel) else getattr(tp, "__pydantic_config__", None)
    )
    kept = {
        key: value
        for key, value in (config or {}).items()
        if key not in _NOT_VALIDATION
        and not key.startswith(("ser_json_", "json_schema"))
        and not (key == "extra" and value == "ignore")
    }
    return ConfigDict(**kept) if kept else None  # type: ignore[typeddict-item]


def root_of(tp: Any) -> tuple[Any, type[RootModel[Any]] | None]:
    """The type a stream's partial value follows for `tp`, and the `RootModel` to wrap each
    snapshot in where `tp` is one (its JSON is its root's)."""
    if isinstance(tp, type) and issubclass(tp, RootModel):
        info = tp.model_fields["root"]
        root: Any = info.annotation
        return (typing.Annotated[(root, *info.metadata)] if info.metadata else root), tp
    return tp, None


def _fields_of(tp: Any) -> dict[str, tuple[str, Any]]:
    """JSON key → (attribute name, shape): every key validation reads a field from."""
    out: dict[str, tuple[str, Any]] = {}
    owner = tp if isinstance(tp, type) and _config_of(tp) is not None else None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        config = tp.model_config
        by_alias = config.get("validate_by_alias", True) is not False
        by_name = bool(config.get("validate_by_name") or config.get("populate_by_name"))
        for name, info in tp.model_fields.items():
            annotation: Any = _with_owner(info.annotation, tp)
            if info.metadata:
                annotation = typing.Annotated[(annotation, *info.metadata)]
            shape = _shape(annotation, owner)
            keys = _alias_keys(info.validation_alias or info.alias) if by_alias else []
            if by_name or not keys:
                keys.append(name)
            for key in keys:
                out[key] = (name, shape)
        return out
    hints = _hints(tp)
    if hints is None:  # (not reached: `_shape` reads such a type whole)
        return out
    annotations: list[tuple[str, Any]] = []
    if dataclasses.is_dataclass(tp):
        for field in dataclasses.fields(tp):
            annotation = hints.get(field.name, Any)
            if isinstance(field.default, FieldInfo):  # `x: int = Field(ge=0)`: its constraints
                annotation = typing.Annotated[annotation, field.default]
            annotations.append((field.name, annotation))
    else:
        annotations = [(name, _item_type(hint)) for name, hint in hints.items()]
    # The keys validation reads, from the type's core schema: aliases (an alias generator's
    # too) and the name, as its config says; as in a model's, the preferred key first.
    read = _core_fields(tp)
    for name, annotation in annotations:
        shape = _shape(_with_owner(annotation, tp), owner)
        core = read.get(name) if read is not None else None
        keys = [name] if core is None else _core_keys(name, core)
        for key in keys:
            out[key] = (name, shape)
    return out


def _hints(tp: Any) -> dict[str, Any] | None:
    """The field types of a dataclass or a `TypedDict` (not to be changed: shared), its
    annotations resolved; `None` where a name in them cannot be. A type defined in a
    function refers to itself by a name only that function sees (`kids: list["Node"]`,
    or any annotation under `from __future__ import annotations`): it is given, as
    pydantic gives it. A pydantic dataclass's fields pydantic resolved, where it did.
    Cached per type; one that cannot be hashed (its metaclass says so) is read each time."""
    try:
        hash(tp)
    except TypeError:
        return _read_hints(tp)
    return _cached_hints(tp)


@lru_cache(maxsize=256)
def _cached_hints(tp: Any) -> dict[str, Any] | None:
    return _read_hints(tp)


def _read_hints(tp: Any) -> dict[str, Any] | None:
    with contextlib.suppress(NameError):
        return typing.get_type_hints(tp, include_extras=True)
    with contextlib.suppress(NameError):
        return typing.get_type_hints(tp, localns={tp.__name__: tp}, include_extras=True)
    fields = getattr(tp, "__pydantic_fields__", None)
    if not isinstance(fields, dict) or not getattr(tp, "__pydantic_complete__", False):
        return None
    return {
        name: typing.Annotated[(info.annotation, *info.metadata)]
        if info.metadata
        else info.annotation
        for name, info in fields.items()
    }


_SELVES = (typing.Self, typing_extensions.Self)


def _with_owner(tp: Any, owner: Any) -> Any:
    """A field's type with each `Self` in it (`Optional[Self]`, `list[Self]`, under
    `Annotated`) the type `owner` whose field it is, as pydantic reads it: an adapter of
    `Self` alone is refused."""
    if any(tp is self for self in _SELVES):
        return owner
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if not args or origin is typing.Literal:
        return tp
    if origin is typing.Annotated:
        inner = _with_owner(args[0], owner)
        return tp if inner is args[0] else typing.Annotated[(inner, *args[1:])]
    new = tuple(_with_owner(arg, owner) for arg in args)
    if all(after is before for after, before in zip(new, args, strict=True)):
        return tp
    if origin in (typing.Union, types.UnionType):
        return typing.Union.__getitem__(new)  # (a `|` of them may not be defined)
    if isinstance(tp, types.GenericAlias):
        return types.GenericAlias(origin, new)
    copy_with = getattr(tp, "copy_with", None)
    return tp if copy_with is None else copy_with(new)


def _core_node(tp: Any) -> dict[str, Any] | None:
    """The node of `tp`'s core schema that validates it as an object: its `typed-dict`, or
    its `dataclass-args` (inside its `dataclass`, under validators that wrap it)."""
    for node in schema_nodes(TypeAdapter(tp).core_schema):
        if node.get("cls") is not tp:
            continue
        if node["type"] == "typed-dict":
            return node
        if node["type"] == "dataclass":
            inner = node.get("schema")
            while isinstance(inner, dict) and inner.get("type") != "dataclass-args":
                inner = inner.get("schema")
            if isinstance(inner, dict):
                return {**inner, "config": node.get("config")}
        return None
    return None


def _core_fields(tp: Any) -> dict[str, dict[str, Any]] | None:
    """A dataclass's or a `TypedDict`'s fields as validation reads them: name → the field's
    core schema, each with `reads` added (`_reads`); `None` where they are not found."""
    node = _core_node(tp)
    fields = None if node is None else node.get("fields")
    if isinstance(fields, dict):
        found = [{**field, "name": name} for name, field in fields.items()]
    elif isinstance(fields, list):
        found = [field for field in fields if isinstance(field, dict)]
    else:
        return None
    reads = _reads(typing.cast("dict[str, Any]", node).get("config"))
    return {field["name"]: {**field, "reads": reads} for field in found}


def _reads(config: Any) -> tuple[bool, bool]:
    """Whether a core config has fields read by their alias, and by their name."""
    if not isinstance(config, dict):
        return True, False
    by_name = config.get("validate_by_name") or config.get("populate_by_name")
    return config.get("validate_by_alias") is not False, bool(by_name)


def _core_keys(name: str, field: dict[str, Any]) -> list[str]:
    """The keys a field's core schema is read from, in the order validation tries them:
    its alias, or each of its choices that is one key, then its name where that is read
    too; none where the field takes no input (a dataclass's `init=False`)."""
    if field.get("init") is False:
        return []
    alias = field.get("validation_alias")
    by_alias, by_name = field["reads"]
    if alias is None or not by_alias:
        return [name]
    choices = alias if isinstance(alias, list) and alias and isinstance(alias[0], list) else [alias]
    keys: list[str] = []
    for choice in choices:
        if isinstance(choice, list) and len(choice) == 1:
            choice = choice[0]
        if isinstance(choice, str):
            keys.append(choice)
    return [*keys, name] if by_name else keys


_QUALIFIERS = (
    typing.Required,
    typing.NotRequired,
    typing_extensions.ReadOnly,
    getattr(typing, "ReadOnly", typing_extensions.ReadOnly),
)
"""The qualifiers of a `TypedDict` item, which say how the key is held, not what its value
is: pydantic has no schema for them."""


def _item_type(hint: Any) -> Any:
    """The type of a `TypedDict` item's value: `hint` without its qualifiers, in any order
    and nesting (`Required[ReadOnly[int]]`, `Annotated[ReadOnly[int], ...]`), its
    `Annotated` metadata kept (its constraints hold in the preview too)."""
    base, metadata = _strip(hint)
    if typing.get_origin(base) not in _QUALIFIERS:
        return hint
    inner = _item_type(typing.get_args(base)[0])
    return typing.Annotated[(inner, *metadata)] if metadata else inner


def _alias_keys(alias: Any) -> list[str]:
    """The keys a field's alias reads it from: the alias, or each of its choices that is one
    key (`AliasChoices("x", AliasPath("y"))`); a path into another key is none."""
    if isinstance(alias, str):
        return [alias]
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    keys = []
    for choice in choices:
        if isinstance(choice, AliasPath):
            choice = choice.path[0] if len(choice.path) == 1 else None
        if isinstance(choice, str):
            keys.append(choice)
    return keys


def _finish_child(shape: _Shape | None, raw: Any) -> Any:
    """A completed scalar, or a container of an untyped or leaf shape, validated."""
    if shape is None:
        return raw
    if isinstance(shape, _Leaf):
        return shape.validate(raw)
    if raw is None:
        # A stand-in `null` for a field whose type does not admit it: left out, as
        # `finish()` leaves it out, so the field's default applies.
        return None if shape.nullable else _MISSING
    return _MISSING


def _from_raw(shape: _Shape | None, raw: Any, root: bool = False, text: str | None = None) -> Any:
    """A whole JSON value (`text`, where the caller has it), validated as the scanner
    validates a container it read piece by piece when it closes: `_MISSING` where it does
    not validate, unless it is the value itself (`root`), shown as far as it goes (see
    `_Object.complete`). `raw` holds no `NaN` nor infinite float (the callers see to it)."""
    if isinstance(shape, _Leaf):
        return shape.validate(raw, text)
    if shape is None or raw is None:
        return _finish_child(shape, raw)
    if isinstance(shape, _Object):
        if not isinstance(raw, dict):
            return _MISSING
        checked = shape.validate_json(raw, text)
        if checked is not _MISSING or not root:
            return checked
        return _built(shape, raw)
    if not isinstance(raw, list if isinstance(shape, _List) else dict):
        return _MISSING
    if shape.whole is not None:
        # Validated whole from its text, not over its entries validated one by one (their
        # validators would run twice); those are shown only where it is the value itself.
        checked = shape.whole.validate(raw, text)
        if checked is not _MISSING or not root:
            return checked
    if isinstance(shape, _List):
        items = [_from_raw(shape.item, item) for item in raw]
        return [item for item in items if item is not _MISSING]
    entries = typing.cast("dict[str, Any]", raw)
    values = {key: _from_raw(shape.value, item) for key, item in entries.items()}
    return {key: value for key, value in values.items() if value is not _MISSING}


def _built(shape: _Object, raw: dict[str, Any]) -> Any:
    """An object from its JSON value, each field validated, the whole not (as the scanner
    builds an open one)."""
    values: dict[str, Any] = {}
    for key, item in raw.items():
        found = shape.field(key)
        value = _from_raw(found[1], item) if found is not None else item
        if value is not _MISSING:
            values[key] = value
    return shape.construct(values)


def _defers(shape: _Shape | None) -> bool:
    """Whether the value, an object of `shape`, may be left to the caller to validate
    (`PartialValue(validate_root=False)`): a model built from its validated fields equals
    the validated one unless its own validators change it, which `==` sees (pydantic's own,
    with the fields set compared as well); not where `model_post_init` runs (its effects
    may be out of `==`'s sight)."""
    if not isinstance(shape, _Object):
        return False
    tp = shape.tp
    return (
        isinstance(tp, type)
        and issubclass(tp, BaseModel)
        and tp.__eq__ is BaseModel.__eq__
        and not tp.__pydantic_post_init__
    )


def _brackets(text: str, pos: int, opened: list[str]) -> tuple[int, list[str], bool]:
    """The brackets of an object read on from `pos`, `opened` those open there (the list is
    updated): where it closes, `(stop, [], False)`; open at the end of the text, `(stop,
    the brackets still open, whether the text ends in a string open at stop)`, a scan
    that can be taken up again from `stop`; brackets that do not match, `(-1, [], False)`.
    """
    skip = _SKIP.match
    end = len(text)
    while True:
        pos = skip(text, pos).end()  # type: ignore[union-attr]
        if pos == end:
            return pos, opened, False
        char = text[pos]
        if char == '"':
            return pos, opened, True
        if char == "{" or char == "[":
            opened.append(char)
        elif opened.pop() != ("{" if char == "}" else "["):
            return -1, [], False
        elif not opened:
            return pos, opened, False
        pos += 1


def _record_so_far(
    shape: _Object, data: Any, text: str, stop: int, opened: list[str], in_string: bool
) -> Any:
    """An object with containers inside it, held as text while it is written (see
    `PartialValue._row_so_far`), as far as it goes, its brackets still `opened`: `data`, as
    pydantic-core reads the text with the string being written (`trailing-strings`); along
    the path of brackets still open, the last entry of each is the open one, every other
    entry completed and is validated."""
    if in_string:
        # A string value is being written (after a colon, or as an item of an array);
        # otherwise a key is, which pydantic-core leaves out.
        before = text[:stop].rstrip()[-1:]
        tail = "text" if before == ":" or (opened[-1] == "[" and before in "[,") else "none"
    elif text.rstrip()[-1:] in "0123456789":
        tail = "number"  # a number at the very end may go on in the next chunk
    else:
        tail = "none"
    return _open_so_far(shape, data, len(opened) - 1, tail)


def _open_so_far(shape: _Shape | None, raw: Any, below: int, tail: str) -> Any:
    """An open container read partially (`raw`), `below` levels above the innermost open
    one; `tail` says what the innermost one's last entry is: `"text"` being written, a
    `"number"` that may go on, or `"none"` (complete)."""
    if isinstance(raw, dict):
        if shape is not None and not isinstance(shape, _Object | _Map):
            return _MISSING  # validated whole (a union, ...), or not the type's container
        values: dict[str, Any] = {}
        entries = list(raw.items())
        last = entries.pop() if entries else None
        for key, item in entries:
            value = _from_raw(_entry_shape(shape, key), item)
            if value is not _MISSING:
                values[key] = value
        if last is not None:
            key, item = last
            value = _open_entry(_entry_shape(shape, key), item, below, tail)
            if value is not _MISSING:
                values[key] = value
        return shape.construct(values) if isinstance(shape, _Object) else values
    if isinstance(raw, list):
        if isinstance(shape, _List):
            item_shape = shape.item
        elif shape is None:
            item_shape = None
        else:
            return _MISSING
        items = [_from_raw(item_shape, item) for item in raw[:-1]]
        if raw:
            items.append(_open_entry(item_shape, raw[-1], below, tail))
        return [item for item in items if item is not _MISSING]
    return _MISSING


def _entry_shape(shape: _Object | _Map | None, key: str) -> _Shape | None:
    """The shape of the value at `key` of an object (`None`: untyped, or unknown)."""
    if isinstance(shape, _Object):
        found = shape.field(key)
        return None if found is None else found[1]
    if isinstance(shape, _Map):
        value: _Shape | None = shape.value
        return value
    return None


def _open_entry(shape: _Shape | None, raw: Any, below: int, tail: str) -> Any:
    """The last entry of an open container: itself open if containers are open below."""
    if below:
        return _open_so_far(shape, raw, below - 1, tail)
    if tail == "text" and isinstance(raw, str):
        if shape is None:
            return raw
        return shape.partial(raw) if isinstance(shape, _Leaf) else _MISSING
    if tail == "number" and type(raw) in (int, float):
        return _MISSING
    return _from_raw(shape, raw)


def _scalar(text: str) -> Any:
    """A JSON number or literal, as `json.loads` reads it; `ValueError` for a number too
    large for a float (`1e400`), which `finish()` does not read as JSON."""
    if text in _LITERALS:
        return _LITERALS[text]
    if "." in text or "e" in text or "E" in text:
        number = float(text)
        if number - number:
            raise ValueError(f"the number `{text}` is too large for a floating point value")
        return number
    try:
        return int(text)
    except ValueError:  # more digits than Python converts: left out, `finish()` says why
        return _MISSING


def _decode(body: str) -> str:
    """A JSON string body (without quotes), escapes resolved; half a surrogate pair alone
    (`"caf\\ud83d"`) is U+FFFD, as `finish()` reads it (`_json.read`)."""
    if "\\" not in body:
        return body
    decoded: str = json.loads(f'"{body}"')
    return storable(decoded)


def _decode_open(body: str) -> str:
    """The part of an unterminated string body that can be decoded so far."""
    if "\\" not in body:
        return body
    cut = body.rfind("\\")
    # An escape at the very end may be incomplete: `\`, `\u12`.
    incomplete = len(body) - cut < 2 or (body[cut + 1] == "u" and len(body) - cut < 6)
    if incomplete and not _escaped_backslash(body, cut):
        body = body[:cut]
    try:
        text: str = json.loads(f'"{body}"')
    except ValueError:
        return body
    # The first half of a surrogate pair (`\ud83d`) waits for its second half.
    if text and "\ud800" <= text[-1] <= "\udbff":
        text = text[:-1]
    # A half alone before it is U+FFFD, as `finish()` reads it.
    return storable(text)


class _OpenText:
    """The text shown of a string being written, as `_decode_open` gives it for the whole
    body so far, decoded as it grows: each read decodes the pieces that came since the last
    (and the end of the last kept back: an escape cut off, the first half of a surrogate
    pair), so that a long text read after every chunk costs its length once, not on every
    read. A body with no escape is shown as written; a body that does not decode (a bad
    escape, a raw control character: `finish()` refuses either) is decoded whole."""

    __slots__ = ("broken", "escaped", "kept", "pieces", "taken", "text")

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces  # the scanner's pieces of the body, growing
        self.taken = 0  # how many of them are in `text` (or `kept`)
        self.text = ""
        self.kept = ""  # the raw end held back for the next read
        self.escaped = False  # an escape came: the body is decoded, not shown as written
        self.broken = False  # the body does not decode: decoded whole, as it is shown

    def shown(self) -> str:
        pieces = self.pieces
        if self.broken:
            return _decode_open("".join(pieces))
        new = "".join(pieces[self.taken :]) if len(pieces) - self.taken != 1 else pieces[-1]
        self.taken = len(pieces)
        if not self.escaped:
            if "\\" not in new:
                return self._grown(new)
            self.escaped = True  # decoded from the start, as `_decode_open` decodes it
            raw = self.text + new
            self.text = ""
        else:
            raw = self.kept + new
        cut = raw.rfind("\\")
        kept = ""
        if cut >= 0:
            # An escape at the very end may be incomplete: `\`, `\u12`.
            incomplete = len(raw) - cut < 2 or (raw[cut + 1] == "u" and len(raw) - cut < 6)
            if incomplete and not _escaped_backslash(raw, cut):
                raw, kept = raw[:cut], raw[cut:]
        try:
            text: str = json.loads(f'"{raw}"')
        except ValueError:
            self.broken = True
            return _decode_open("".join(pieces))
        if text and "\ud800" <= text[-1] <= "\udbff":
            # The first half of a surrogate pair waits for its second half, as written.
            text = text[:-1]
            back = 1 if "\ud800" <= raw[-1] <= "\udbff" else 6
            kept = raw[-back:] + kept
        self.kept = kept
        text = storable(text)  # a half alone is U+FFFD, as `finish()` reads it
        return self._grown(text)

    def _grown(self, more: str) -> str:
        """The text shown, `more` added: in place where nothing else holds it (the caller
        let the last snapshot go), as CPython grows a string only one name holds."""
        text = self.text
        self.text = ""
        text += more
        self.text = text
        return text


def _escaped_backslash(body: str, index: int) -> bool:
    """Whether the backslash at `index` is itself escaped (preceded by an odd run)."""
    run = 0
    while index - run - 1 >= 0 and body[index - run - 1] == "\\":
        run += 1
    return run % 2 == 1


_UNSHARED_REFS = -1
"""The reference count `_Frame.with_tail` sees for a list that only its frame holds; set by
`_calibrate` at import (counts differ between interpreter versions), -1 where reference
counts do not tell (no list is then taken as unshared)."""
_OBSERVED: list[int] | None = None


class _Frame:
    """An open container: its shape, what completed inside it, what is being written."""

    __slots__ = (
        "child",
        "expect",
        "is_object",
        "key",
        "keys",
        "reads_text",
        "row",
        "shape",
        "shown",
        "shown_count",
        "shown_key",
        "start",
        "values",
    )

    def __init__(self, shape: _Shape | None, is_object: bool, start: int = 0) -> None:
        self.shape = shape
        self.is_object = is_object
        # Where its opening bracket is in the text fed (`PartialValue._text`).
        self.start = start
        self.values: Any = {} if is_object else []
        self.key: str | None = None
        # The keys written here (a value left out as invalid is not in `values`).
        self.keys: set[str] = set()
        self.expect = "key" if is_object else "value"
        # The list (a map: the dict) last shown for this container, how many completed
        # entries it holds, and the key of the open one put after them in a map.
        self.shown: Any = None
        self.shown_count = 0
        self.shown_key: str | None = None
        # The shape of the value being written here (known once its key is).
        self.child: _Shape | None = None
        if isinstance(shape, _List) and not is_object:
            self.child = shape.item
        elif isinstance(shape, _Map) and is_object:
            self.child = shape.value
        # The shape of this array's items where they are objects: held as text while open.
        item = self.child
        self.row = item if not is_object and isinstance(item, _Object) else None
        # Whether it is validated from its text when it closes (an object; a list or a map
        # its type validates whole), not from its entries: those were validated already.
        self.reads_text = self.typed() and (
            isinstance(shape, _Object)
            or (isinstance(shape, _List | _Map) and shape.whole is not None)
        )

    def set_key(self, key: str) -> bool:
        """Take the key of the next entry; `False` for a key written twice, which `finish()`
        does not read as JSON (Python's readers keep its last value)."""
        keys = self.keys
        if key in keys:
            return False
        keys.add(key)
        self.key = key
        self.expect = "colon"
        if isinstance(self.shape, _Object):
            found = self.shape.field(key)
            self.child = None if found is None else found[1]
        return True

    def typed(self) -> bool:
        """Whether the shape describes this container (an object for an object, ...)."""
        shape = self.shape
        if isinstance(shape, _Object | _Map):
            return self.is_object
        return isinstance(shape, _List) and not self.is_object

    def child_shape(self) -> _Shape | None:
        return self.child

    def put(self, value: Any) -> None:
        if value is _MISSING:
            return
        if self.is_object:
            if self.key is not None:
                self.values[self.key] = value
        else:
            self.values.append(value)

    def complete(self, root: bool, text: str | None) -> Any:
        """The closed container, validated as its shape says (`root`: it is the value), from
        its JSON `text` where it `reads_text`."""
        shape = self.shape
        if text is not None:
            return shape.complete(self.values, text, root)  # type: ignore[union-attr]
        if self.typed():
            return self.values  # a list or a map of entries validated one by one
        return _finish_child(shape, self.values)

    def with_tail(self, tail: Any) -> Any:
        """This container as far as it goes, with the open child `tail` in place; `_MISSING`
        where its shape does not describe it: a container its type validates whole (shown
        once it closes), or one of the other kind (an object where the type says list), not
        the type's at all (`finish()` fails on it, a field of it is left out)."""
        shape = self.shape
        if shape is not None and not self.typed():
            return _MISSING
        values = self.values
        if self.is_object:
            key = self.key
            if tail is _MISSING:
                key = None
            if isinstance(shape, _Object):
                return shape.construct(values if key is None else {**values, key: tail})
            if key in values:
                return {**values, key: tail}  # (an open entry is not among the completed)
            # A map (or an object of no type), as a list below: brought up to date in place.
            entries = self.shown
            refs = -2 if entries is None else sys.getrefcount(entries)
            if _OBSERVED is not None:
                _OBSERVED.append(refs)
            if entries is not None and refs <= _UNSHARED_REFS:
                if self.shown_key is not None:
                    entries.pop(self.shown_key, None)  # the entry open then: completed, or not
                arrived = len(values) - self.shown_count
                if arrived:  # (keys are only added, each once: the newest are the last)
                    newest = list(itertools.islice(reversed(values.items()), arrived))
                    entries.update(reversed(newest))
            else:
                entries = dict(values)
                self.shown = entries
            self.shown_count = len(values)
            self.shown_key = key
            if key is not None:
                entries[key] = tail
            return entries
        items = self.shown
        refs = -2 if items is None else sys.getrefcount(items)
        if _OBSERVED is not None:
            _OBSERVED.append(refs)
        if items is not None and refs <= _UNSHARED_REFS:
            # Nobody holds the list shown last (the caller let that snapshot go), so it is
            # brought up to date in place: the cost is the items that arrived since, where a
            # copy would cost every item so far, on every read.
            del items[self.shown_count :]
            items.extend(values[self.shown_count :])
        else:
            items = list(values)
            self.shown = items
        self.shown_count = len(values)
        if tail is not _MISSING:
            items.append(tail)
        return items


def _calibrate() -> int:
    """The count `with_tail` sees for a list (a map) nobody else holds, measured on the method
    itself; -1 unless a list the caller holds shows a higher count (so holding is always
    seen), or a map shows another count than a list."""
    global _OBSERVED
    if not _counts_tell():
        return -1
    counts = []
    for is_object in (False, True):
        probe = _Frame(None, is_object)
        probe.key = "one"
        probe.put(1)
        _OBSERVED = []
        try:
            probe.with_tail(_MISSING)  # makes the first one; dropped at once
            probe.with_tail(_MISSING)  # sees it unheld; makes the next one, kept below
            held = probe.with_tail(_MISSING)
            probe.with_tail(_MISSING)  # sees `held`
            counts.append((_OBSERVED[1], _OBSERVED[3]))
        finally:
            _OBSERVED = None
        del held
    (unheld_count, held_count), map_counts = counts
    return unheld_count if held_count > unheld_count and map_counts == counts[0] else -1


_UNSHARED_REFS = _calibrate()


def _deepest() -> int:
    """How many containers pydantic-core reads nested (its reader's recursion limit), which
    is how deep `finish()` reads: more open at once, and the value cannot be read. Measured
    once, on empty arrays (the innermost, empty, costs no level), doubling then halving, so
    that no probe nests more than twice the limit; `sys.maxsize` where it reads them all."""

    def reads(depth: int) -> bool:
        try:
            from_json("[" * depth + "]" * depth)
        except ValueError:
            return False
        return True

    low, high = 0, 64  # `low` is read; `high` is not, once it has been tried
    while reads(high):
        low, high = high, high * 2
        if high > _DEEPEST_TRIED:
            return sys.maxsize
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if reads(middle) else (low, middle)
    return low


_DEEPEST_TRIED = 8_192
_DEEPEST = _deepest()
"""More containers open than this, and `finish()` fails on the value: its preview stops."""


class PartialValue(Generic[T]):
    """Feed it text as it arrives; `value()` is the typed value so far.

    Text before the value (prose, a markdown fence) is skipped; text after it is ignored.

    `validate_root=False`: a caller that validates the whole output itself when the value
    ends (the stream, as `finish()` will) has a model that is the value built from its
    fields, validated each, not validated again as a whole (its validators would run twice);
    it then calls `settle` with the value it found, or `validate_root` where it found none.
    """

    def __init__(self, tp: Any, validate_root: bool = True, iterables: bool | None = None) -> None:
        self._root_shape = _shape(tp)
        # Whether the type holds an `Iterable` (`iterables`, where the caller knows): each
        # snapshot is then given iterators of its own (`_Fresh`).
        self._iterables = self._root_shape.iterables if iterables is None else iterables
        self._fresh = _Fresh()
        # The scanner's own validation of the value, where it is left to the caller.
        self._defer = not validate_root and _defers(self._root_shape)
        self._pending: Callable[[], Any] | None = None
        self._stack: list[_Frame] = []
        self._rest = ""
        self._string: list[str] | None = None
        # The text shown of the string being written, decoded as it grows.
        self._shown: _OpenText | None = None
        self._done: Any = _MISSING
        self._broken = False
        self._started = False
        self._completed_inside = False
        self._cache: Any = _MISSING
        self._dirty = False
        # The root container of a value that nests deeper than `finish()` reads, and its
        # preview, held from then on (`_open`): a read past that depth builds nothing.
        self._deep: _Frame | None = None
        self._held: Any = _MISSING
        # A row (an object in a list) being written is held as text in `_rest`, not
        # scanned token by token: read partially by pydantic-core when the value is asked
        # for, read and validated by it in one call once the row closes.
        self._row: _Object | None = None
        # Where the scan of the held row's brackets stopped, and the brackets open there.
        self._row_scan: tuple[int, list[str]] = (0, [])
        # How many keys (`":`) the held row's text had when it was last read.
        self._row_keys = 0
        # Whether the text being scanned starts with the row held before it came.
        self._rehold = False
        # The text fed, in the pieces it came in, from the first open container validated
        # from its text when it closes (`_reading` of them open); `_fed` characters so far,
        # the text being scanned starting at `_base`.
        self._log: list[str] = []
        self._reading = 0
        self._fed = 0
        self._base = 0

    @property
    def complete(self) -> bool:
        """Whether the value has ended (its closing bracket, or the end of the input)."""
        return self._done is not _MISSING

    def feed(self, text: str) -> None:
        if self._broken or self._done is not _MISSING or not text:
            return
        self._dirty = True
        log = self._log
        if not self._reading and log:
            # No open container will read its text: only the text not yet scanned is kept.
            log.clear()
            if self._rest:
                log.append(self._rest)
        log.append(text)
        self._fed += len(text)
        if (
            self._row is not None
            and len(self._rest) < _LONGEST_ROW
            and _BRACKET.search(text) is None
        ):
            # Without a bracket, a held row neither closes nor nests: it stays held.
            self._rest += text
            return
        buf = self._rest + text if self._rest else text
        self._rest = ""
        self._base = self._fed - len(buf)
        self._rehold = self._row is not None
        self._row = None
        pos = self._scan(buf, 0)
        if pos is not None:
            self._rest = buf[pos:]

    def end(self) -> None:
        """The input ended: a number or literal left at its very end is complete."""
        if self._done is not _MISSING or self._broken or self._string is not None:
            return
        rest = self._rest.strip()
        self._rest = ""
        if rest and _SCALAR.fullmatch(rest) and not self._stack:
            self._dirty = True
            try:
                self._token(_scalar(rest), is_string=False)
            except ValueError:
                self._broken = True

    def _scan(self, buf: str, pos: int) -> int | None:
        """Consume tokens from `pos`; the position of an incomplete token left, if any."""
        end = len(buf)
        token = _TOKEN.match
        pair_token = _PAIR.match
        while pos < end:
            if self._string is not None:
                match = _STRING_BODY.match(buf, pos)
                stop = match.end() if match else pos
                if stop < end and buf[stop] == '"':
                    self._string.append(buf[pos:stop])
                    body = "".join(self._string)
                    self._string = self._shown = None
                    pos = stop + 1
                    if not self._string_token(body):
                        return None
                    continue
                if stop < end:  # a lone backslash at the end: keep it for the next chunk
                    stop = end - 1
                self._string.append(buf[pos:stop])
                return stop if stop < end else None
            stack = self._stack
            if stack and stack[-1].expect == "key":
                # The commonest shape of all, `"key": value,`, in one step.
                pair = pair_token(buf, pos)
                if pair is not None:
                    holder = stack[-1]
                    try:
                        if not holder.set_key(_decode(pair.group(1))):
                            raise ValueError("a key written twice")
                        text = pair.group(2)
                        value = _decode(text) if text is not None else _scalar(pair.group(3))
                    except ValueError:
                        self._broken = True
                        return None
                    self._token(value, is_string=text is not None, in_place=holder)
                    pos = pair.end()
                    continue
            match = token(buf, pos)
            if match is None:
                resume, at = self._odd(buf, pos)
                if at is None or not resume:
                    return at
                pos = at
                continue
            pos = match.end()
            group = match.lastindex
            if group == 1:
                frame = self._stack[-1] if self._stack else None
                if frame is not None and frame.is_object and frame.expect == "key":
                    try:
                        if not frame.set_key(_decode(match.group(1))):
                            raise ValueError("a key written twice")
                    except ValueError:
                        self._broken = True
                        return None
                    frame.expect = "value"
                    continue
                if not self._string_token(match.group(1)):
                    return None
                if not self._punctuation(":", self._base + pos):
                    resume, at = self._restart(buf, pos)
                    if at is None or not resume:
                        return at
                    pos = at
                    continue
            elif group == 2:
                if not self._string_token(match.group(2)):
                    return None
            elif group == 3:
                char = match.group(3)
                row = self._row_shape() if char == "{" else None
                if row is not None:
                    at, held = self._rows(buf, pos - 1, row)
                    if held:
                        return at  # the open row is kept for the next chunk
                    if at != pos - 1:
                        pos = at
                        continue
                if (
                    char in "{["
                    and buf.find("}" if char == "{" else "]", pos) >= 0
                    and self._accepts_value()
                ):
                    # A container that ends within this text is read whole by the C
                    # decoder and validated in one call; only an open one is scanned.
                    try:
                        raw, stop = _DECODER.raw_decode(buf, pos - 1)
                        text = buf[pos - 1 : stop]
                        # Python's reader takes `NaN`, `Infinity`, `1e400` and a key
                        # written twice; `finish()` does not: the scanner says where.
                        if not keys_all_kept(text, kept_keys(raw)):
                            raise ValueError("not strict JSON")
                        if ("\\u" in text or not text.isascii()) and holds_lone_surrogate(raw):
                            raise ValueError("half a surrogate pair alone")  # U+FFFD, scanned
                        value = self._whole_value(raw, text)
                    except (ValueError, RecursionError):
                        pass  # not JSON, or nested too deep to read whole: scanned instead
                    else:
                        self._whole(value)
                        pos = stop
                        if self._done is not _MISSING or self._broken:
                            return None
                        continue
                if not self._punctuation(char, self._base + pos):
                    resume, at = self._restart(buf, pos)
                    if at is None or not resume:
                        return at
                    pos = at
                    continue
            else:
                try:
                    number = _scalar(match.group(4))
                except ValueError:
                    self._broken = True
                    return None
                self._token(number, is_string=False)
            if self._done is not _MISSING or self._broken:
                return None
        return None

    # `_odd` and `_restart` say where scanning goes on: `(True, pos)` to resume at `pos`;
    # `(False, pos)` to stop and keep `buf[pos:]` for the next chunk; `(False, None)` to
    # stop. They never scan themselves, so the scanner's depth stays flat.

    def _odd(self, buf: str, pos: int) -> tuple[bool, int | None]:
        """Not a whole token at `pos`: an open string, a cut-off scalar, or not JSON."""
        pos = _SPACE.match(buf, pos).end()  # type: ignore[union-attr]
        if pos >= len(buf):
            return False, None
        char = buf[pos]
        if char == '"':
            self._string = []
            return True, pos + 1
        prefix = _SCALAR_PREFIX.match(buf, pos)
        if prefix is not None and prefix.end() == len(buf):
            if len(buf) - pos > _LONGEST_SCALAR:
                self._broken = True  # no number is this long: do not keep collecting it
                return False, None
            return False, pos  # `tru`, `-1.`: the rest of it comes with the next chunk
        return self._restart(buf, pos)

    def _restart(self, buf: str, pos: int) -> tuple[bool, int | None]:
        """Prose before the value, or a false start: look for where the JSON begins."""
        if self._completed_inside or (self._started and not self._stack):
            self._broken = True
            return False, None
        starts = [i for i in (buf.find("{", pos), buf.find("[", pos)) if i >= 0]
        if self._started:
            # A bracket in the prose (`see [1]: {...}`) opened a false start: drop it.
            self._stack.clear()
            self._reading = 0
            self._started = False
        if not starts:
            return False, None
        return True, min(starts)

    def _row_shape(self) -> _Object | None:
        """The shape of a row opening here (an object in a list), or `None`."""
        stack = self._stack
        if not stack:
            return None
        frame = stack[-1]
        return frame.row if frame.expect == "value" else None

    def _rows(self, buf: str, start: int, row: _Object) -> tuple[int, bool]:
        """Rows (objects in a list) from the one opening at `start`: each that closes is
        read and validated by pydantic-core in one call, and the next one read on; the last,
        still open, is held as text until it closes (see `_row_so_far`). Where scanning goes
        on, and whether a row is held. A row that closes but does not validate, or whose
        brackets do not match, is left to the scanner, which keeps what does validate; so is
        one too long to read again on every read (`_LONGEST_ROW`)."""
        frame = self._stack[-1]
        items = frame.values
        # Rows of scalars that closed, each followed by a comma: validated as a list in one
        # call.
        run = _ROW_RUN.match(buf, start).end() if row.flat else start  # type: ignore[union-attr]
        if run > start:
            rows = row.validate_rows(buf[start:run].rstrip(" \t\r\n,"))
            if rows is not _MISSING:
                items.extend(rows)
                if not self._completed_inside:
                    self._mark_inside()
                if run == len(buf) or buf[run] != "{":
                    return run, False
                start = run
        validate = row.validate_text
        following = _NEXT_ROW.match
        end = len(buf)
        while True:
            stop, opened, _ = _brackets(buf, start + 1, ["{"])
            if opened:
                if end - start >= _LONGEST_ROW:
                    return start, False  # too long to read again on every read: scanned
                self._row = row
                self._row_scan = (stop - start, opened)
                if start or not self._rehold:  # a new row (not the one held, read on)
                    self._row_keys = 0
                self._rehold = False
                return start, True
            if stop < 0:
                return start, False
            value = validate(buf[start : stop + 1])
            if value is _MISSING:
                return start, False
            items.append(value)
            frame.expect = "comma_or_end"
            if not self._completed_inside:
                self._mark_inside()
            after = following(buf, stop + 1)
            if after is None:
                return stop + 1, False
            frame.expect = "value"
            start = after.end() - 1

    def _row_so_far(self, shape: _Object) -> Any:
        """The row held in `_rest`, as far as it goes: its completed fields validated, and a
        text field being written (only text is shown while it is written).

        pydantic-core reads the row with the text being written (`trailing-strings`). A row
        of scalars whose last value read is text is read again without, to tell an open
        string from a closed one; a row with containers is read by `_record_so_far`."""
        text = self._rest
        if not shape.flat:
            # No bracket came since the row was held (one would have been scanned): the
            # scan of its brackets is taken up where it stopped, for where a string opens.
            at, opened = self._row_scan
            stop, opened, in_string = _brackets(text, at, opened)
            if not opened:
                return _MISSING
            self._row_scan = (stop, opened)
            data = self._read_row(text, False)
            if data is _MISSING:
                return _MISSING
            return _record_so_far(shape, data, text, stop, opened, in_string)
        data = self._read_row(text, True)
        if not isinstance(data, dict):
            return _MISSING
        open_key: str | None = None
        if data:
            last = next(reversed(data))
            kind = type(data[last])
            if kind is str:
                closed = from_json(text, allow_partial=True)
                if last not in closed or closed[last] != data[last]:
                    open_key = last
            elif (kind is int or kind is float) and text.rstrip()[-1] in "0123456789":
                del data[last]  # a number at the very end may go on in the next chunk
        values: dict[str, Any] = {}
        fields = shape.fields
        for key, raw in data.items():
            found = fields.get(key)
            if found is None:
                values[key] = raw
                continue
            leaf = found[1]
            if key == open_key:
                value = leaf.partial(raw)
            elif type(raw) is leaf.plain and type(raw) is not float:
                value = raw  # a plain scalar of its field's type: nothing to validate
            else:
                value = _finish_child(leaf, raw)
            if value is not _MISSING:
                values[key] = value
        return shape.construct(values)

    def _read_row(self, text: str, flat: bool) -> Any:
        """The held row's JSON value so far (`flat`: its fields all scalars), as pydantic-core
        reads it cut off (`trailing-strings`); `_MISSING` where `finish()` will not read it:
        `NaN`, `Infinity`, a key written twice (pydantic-core keeps its last value). A number
        too large for a float, read as infinite, is left out by its field's validation."""
        try:
            data = from_json(text, allow_partial="trailing-strings", allow_inf_nan=False)
        except ValueError:
            return _MISSING
        written = text.count('":')
        if written > self._row_keys:
            # Keys came since the row was last read: counted (`":` in the text, against
            # the keys read, written out again, strings and all), and looked at where the
            # count does not clear them (a key whose value has not come, one written twice).
            kept = len(data) if flat else to_json(data).count(b'":')
            if written > kept:
                if written == kept + 1 and _value_pending(text):
                    return data  # counted again once the value comes (a key twice, then?)
                if _repeats_key(text):
                    return _MISSING
            self._row_keys = written
        return data

    def _string_token(self, body: str) -> bool:
        try:
            value = _decode(body)
        except ValueError:
            self._broken = True
            return False
        self._token(value, is_string=True)
        return True

    def _accepts_value(self) -> bool:
        """Whether a value may start here (not a key, not after a completed value)."""
        if not self._stack:
            return True
        frame = self._stack[-1]
        return frame.expect == "value"

    def _whole_value(self, raw: Any, text: str) -> Any:
        """A container read whole (from `text`), validated as its shape says."""
        if self._stack:
            return _from_raw(self._stack[-1].child_shape(), raw, text=text)
        shape = self._root_shape
        if self._defer and isinstance(raw, dict):
            self._pending = lambda: _from_raw(shape, raw, root=True, text=text)
            return _built(typing.cast("_Object", shape), raw)
        return _from_raw(shape, raw, root=True, text=text)

    def _whole(self, value: Any) -> None:
        """A container read whole and validated, put in place."""
        self._started = True
        if not self._stack:
            if value is _MISSING:
                self._started = False
            else:
                self._done = value
            return
        frame = self._stack[-1]
        frame.put(value)
        frame.expect = "comma_or_end"
        if not self._completed_inside:
            self._mark_inside()

    def _punctuation(self, char: str, after: int) -> bool:
        """`char`, which ends at `after` in the text fed."""
        if char in "{[":
            self._open(char == "{", after - 1)
            return True
        if char in "}]":
            return self._close(char == "}", after)
        if not self._stack:
            return False
        frame = self._stack[-1]
        if char == ",":
            if frame.is_object:
                frame.expect, frame.key = "key", None
            else:
                frame.expect = "value"
        elif frame.is_object and frame.expect == "colon":
            frame.expect = "value"
        else:
            return False
        return True

    def _open(self, is_object: bool, start: int) -> None:
        shape = self._root_shape if not self._stack else self._stack[-1].child_shape()
        self._started = True
        if self._stack:
            self._stack[-1].expect = "comma_or_end"
        frame = _Frame(shape, is_object, start)
        self._reading += frame.reads_text
        stack = self._stack
        stack.append(frame)
        if len(stack) > _DEEPEST and stack[0] is not self._deep:
            # `finish()` cannot read this value now: its preview stops as it stands, the
            # container that went too deep left out, and is kept while the value goes on.
            # A false start (brackets in prose) is left with its root frame, and with it the
            # preview held.
            self._deep = stack[0]
            self._held = self._path(stack[:_DEEPEST], _MISSING)

    def _close(self, is_object: bool, stop: int) -> bool:
        if not self._stack or self._stack[-1].is_object != is_object:
            return False
        frame = self._stack.pop()
        text = None
        if frame.reads_text:
            self._reading -= 1
            text = self._text(frame.start, stop)
        if not self._stack and self._defer and text is not None:
            self._pending = lambda: frame.complete(True, text)
            value = frame.shape.construct(frame.values)  # type: ignore[union-attr]
        else:
            value = frame.complete(not self._stack, text)
        if self._stack:
            self._stack[-1].put(value)
            if not self._completed_inside:
                self._mark_inside()
        elif value is _MISSING:
            # Brackets in prose (`see [1]`) that are not the value: keep looking.
            self._started = self._completed_inside = False
        else:
            self._done = value
            self._log.clear()
        return True

    def _text(self, start: int, stop: int) -> str:
        """The text fed from `start` to `stop` (a container that closed, validated from its
        text; the log holds it): the pieces from the one it starts in to the last, joined
        once and kept joined, since the containers around it read it again when they close."""
        log = self._log
        first = len(log) - 1
        at = self._fed - len(log[first])  # where `log[first]` starts
        while at > start:
            first -= 1
            at -= len(log[first])
        if first < len(log) - 1:
            log[first:] = ["".join(log[first:])]
        return log[first][start - at : stop - at]

    def _mark_inside(self) -> None:
        """Something completed inside the value: from now on, text that is not JSON breaks
        it rather than being skipped as prose."""
        root = self._stack[0]
        if root.typed() or isinstance(root.shape, _Leaf):
            self._completed_inside = True

    def _token(self, value: Any, *, is_string: bool, in_place: _Frame | None = None) -> None:
        """A scalar; `in_place` is the object frame whose key was just read with it."""
        if in_place is not None:
            frame = in_place
        elif not self._stack:
            # A scalar outside any bracket is the value only when the type is validated
            # whole; otherwise it is prose (`I found 3 items: {...}`).
            if isinstance(self._root_shape, _Leaf):
                done = _finish_child(self._root_shape, value)
                if done is not _MISSING:
                    self._started = True
                    self._done = done
            return
        else:
            frame = self._stack[-1]
            if frame.is_object and frame.expect == "key" and is_string:
                if not frame.set_key(value):
                    self._broken = True
                return
        shape = frame.child
        if type(shape) is _Leaf and type(value) is shape.plain:
            frame.put(value)  # a plain scalar of its field's type: nothing to validate
        else:
            frame.put(_finish_child(shape, value))
        frame.expect = "comma_or_end"
        if not self._completed_inside:
            self._mark_inside()

    def value(self) -> T | None:
        if self._dirty or self._cache is _MISSING:
            self._dirty = False
            # Let the last snapshot go before building the next, so that lists nobody else
            # holds can be updated in place.
            self._cache = _MISSING
            if self._done is not _MISSING:
                self._cache = self._done
            elif self._stack and self._stack[0] is self._deep:
                self._cache = self._held  # too deep for `finish()`: the preview stopped
            else:
                self._cache = self._build()
        if self._cache is _MISSING:
            return None
        if self._iterables:
            # Each read its own iterators: one read through leaves the others whole.
            return typing.cast(T, self._fresh.snapshot(self._root_shape, self._cache))
        return typing.cast(T, self._cache)

    def _build(self) -> Any:
        if not self._stack:
            return _MISSING
        tail: Any = _MISSING
        top = self._stack[-1]
        if self._row is not None and self._rest:
            tail = self._row_so_far(self._row)
        elif self._string is not None and top.expect == "value":
            shape = top.child_shape()
            shown = self._shown
            if shown is None or shown.pieces is not self._string:
                shown = self._shown = _OpenText(self._string)
            text = shown.shown()
            if isinstance(shape, _Leaf):
                tail = shape.partial(text)
            elif shape is None:
                tail = text
        return self._path(self._stack, tail)

    @staticmethod
    def _path(frames: list[_Frame], tail: Any) -> Any:
        """The value along the open `frames`, from the root, with `tail` in the last."""
        for frame in reversed(frames):
            tail = frame.with_tail(tail)
        return tail

    def settle(self, value: Any) -> None:
        """Replace the completed value with `value` (the one `finish()` would return)."""
        self._pending = None
        self._done = value
        self._cache = value
        self._dirty = False

    def validate_root(self) -> None:
        """The value, left to the caller to validate (`validate_root=False`) and not settled,
        validated as the scanner validates it."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self.settle(pending())
