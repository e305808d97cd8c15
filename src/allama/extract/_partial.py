"""The typed value of a stream so far, in work linear in the output.

An incremental JSON scanner keeps a stack of open containers. A value is validated once,
when it completes (a list item, a field); reading the partial value rebuilds only the open
path from the root to the value being written, so reading it after every chunk stays
linear. Re-parsing the whole buffer on every chunk, as most libraries do, is quadratic.

The partial value is a preview: models are built with `model_construct` from fields
validated one by one, so model-level validators run only in `finish()`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from functools import lru_cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

T = TypeVar("T")

_WS = re.compile(r"[ \t\r\n]*")
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*', re.DOTALL)
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
_MISSING = object()


class _Leaf:
    """A value validated whole, by its own validator."""

    __slots__ = ("adapter",)

    def __init__(self, adapter: TypeAdapter[Any]) -> None:
        self.adapter = adapter

    def validate(self, raw: Any) -> Any:
        try:
            return self.adapter.validate_python(raw)
        except ValidationError:
            return _MISSING

    def partial(self, raw: Any) -> Any:
        try:
            return self.adapter.validate_python(raw, experimental_allow_partial=True)
        except (ValidationError, TypeError, ValueError):
            return _MISSING


class _Object:
    """A model, dataclass or TypedDict: fields validated one by one."""

    __slots__ = ("build", "fields", "tp")

    def __init__(self, tp: Any) -> None:
        self.tp = tp
        self.fields: dict[str, tuple[str, Any]] | None = None
        self.build: Any = None

    def field(self, key: str) -> tuple[str, Any] | None:
        if self.fields is None:
            self.fields = _fields_of(self.tp)
        return self.fields.get(key)

    def construct(self, values: dict[str, Any]) -> Any:
        tp = self.tp
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp.model_construct(**values)
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            instance = object.__new__(tp)
            for name, value in values.items():
                object.__setattr__(instance, name, value)
            return instance
        return dict(values)


class _List:
    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item


class _Map:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _strip(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(tp) is typing.Annotated:
        args = typing.get_args(tp)
        return args[0], tuple(args[1:])
    return tp, ()


@lru_cache(maxsize=1024)
def _shape(tp: Any) -> Any:
    base, metadata = _strip(tp)
    origin = typing.get_origin(base)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(base) if arg is not type(None)]
        if len(options) == 1 and not metadata:
            return _shape(options[0])
    elif not metadata:
        if isinstance(base, type) and issubclass(base, BaseModel):
            return _Object(base)
        if isinstance(base, type) and dataclasses.is_dataclass(base):
            return _Object(base)
        if typing.is_typeddict(base):
            return _Object(base)
        if origin is list:
            (item,) = typing.get_args(base) or (Any,)
            return _List(_shape(item))
        if origin is dict:
            key, value = typing.get_args(base) or (str, Any)
            if key is str:
                return _Map(_shape(value))
    return _Leaf(TypeAdapter(tp))


def _fields_of(tp: Any) -> dict[str, tuple[str, Any]]:
    """JSON key → (attribute name, shape)."""
    out: dict[str, tuple[str, Any]] = {}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        for name, info in tp.model_fields.items():
            key = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
            annotation: Any = info.annotation
            if info.metadata:
                annotation = typing.Annotated[(annotation, *info.metadata)]
            out[key or name] = (name, _shape(annotation))
        return out
    hints = typing.get_type_hints(tp, include_extras=True)
    if dataclasses.is_dataclass(tp):
        for field in dataclasses.fields(tp):
            out[field.name] = (field.name, _shape(hints.get(field.name, Any)))
        return out
    for name, hint in hints.items():
        base, _ = _strip(hint)
        if typing.get_origin(base) in (typing.Required, typing.NotRequired):
            hint = typing.get_args(base)[0]
        out[name] = (name, _shape(hint))
    return out


class _Frame:
    """An open container: its shape, what completed inside it, what is being written."""

    __slots__ = ("expect", "is_object", "key", "shape", "values")

    def __init__(self, shape: Any, is_object: bool) -> None:
        self.shape = shape
        self.is_object = is_object
        self.values: Any = {} if is_object else []
        self.key: str | None = None
        self.expect = "key" if is_object else "value"

    def child_shape(self) -> Any:
        shape = self.shape
        if isinstance(shape, _Object) and self.key is not None:
            found = shape.field(self.key)
            return None if found is None else found[1]
        if isinstance(shape, _List) and not self.is_object:
            return shape.item
        if isinstance(shape, _Map) and self.is_object:
            return shape.value
        return None

    def typed(self) -> bool:
        shape = self.shape
        return (isinstance(shape, _Object | _Map) and self.is_object) or (
            isinstance(shape, _List) and not self.is_object
        )

    def put(self, value: Any) -> None:
        if value is _MISSING:
            return
        if self.is_object:
            if self.key is None:
                return
            name = self.key
            if isinstance(self.shape, _Object):
                found = self.shape.field(self.key)
                if found is None:
                    return
                name = found[0]
            self.values[name] = value
        else:
            self.values.append(value)

    def complete(self) -> Any:
        if isinstance(self.shape, _Object) and self.is_object:
            return self.shape.construct(self.values)
        return self.values

    def with_tail(self, tail: Any) -> Any:
        """This container as far as it goes, with the open child `tail` in place."""
        if self.is_object:
            values = dict(self.values)
            if tail is not _MISSING and self.key is not None and self.expect == "comma_or_end":
                name = self.key
                if isinstance(self.shape, _Object):
                    found = self.shape.field(self.key)
                    name = found[0] if found else ""
                if name:
                    values[name] = tail
            if isinstance(self.shape, _Object):
                return self.shape.construct(values)
            return values
        items = list(self.values)
        if tail is not _MISSING:
            items.append(tail)
        return items


def _finish_child(shape: Any, raw: Any, typed: bool) -> Any:
    """A completed value, validated by the shape it belongs to."""
    if typed:
        return raw
    if raw is None and shape is not None and not isinstance(shape, _Leaf):
        return None
    if isinstance(shape, _Leaf):
        return shape.validate(raw)
    if shape is None:
        return raw
    return _MISSING


class PartialValue(Generic[T]):
    """Feed it text as it arrives; `value()` is the typed value so far."""

    def __init__(self, tp: Any) -> None:
        self._root_shape = _shape(tp)
        self._stack: list[_Frame] = []
        self._rest = ""
        self._string: list[str] | None = None
        self._done: Any = _MISSING
        self._broken = False
        self._started = False
        self._cache: Any = _MISSING
        self._dirty = False

    def feed(self, text: str) -> None:
        if self._broken or self._done is not _MISSING or not text:
            return
        self._dirty = True
        buf = self._rest + text if self._rest else text
        self._rest = ""
        pos, end = 0, len(buf)
        while pos < end:
            if self._string is not None:
                match = _STRING_BODY.match(buf, pos)
                stop = match.end() if match else pos
                self._string.append(buf[pos:stop])
                if stop < end and buf[stop] == '"':
                    body = "".join(self._string)
                    self._string = None
                    pos = stop + 1
                    try:
                        self._token(json.loads(f'"{body}"'), is_string=True)
                    except ValueError:
                        self._broken = True
                        return
                    continue
                self._rest = buf[stop:]
                return
            pos = _WS.match(buf, pos).end()  # type: ignore[union-attr]
            if pos >= end:
                return
            char = buf[pos]
            if char == '"':
                self._string = []
                pos += 1
            elif char in "{[":
                self._open(char == "{")
                pos += 1
            elif char in "}]":
                if not self._close(char == "}"):
                    self._broken = True
                    return
                pos += 1
            elif char == ",":
                if self._stack:
                    frame = self._stack[-1]
                    frame.expect = "key" if frame.is_object else "value"
                    frame.key = None if frame.is_object else frame.key
                pos += 1
            elif char == ":":
                if self._stack:
                    self._stack[-1].expect = "value"
                pos += 1
            else:
                match = _SCALAR.match(buf, pos)
                if match is None:
                    if not self._started or (not self._stack and self._done is _MISSING):
                        # Prose before the value: look for where the JSON starts.
                        start = min(
                            (i for i in (buf.find("{", pos), buf.find("[", pos)) if i >= 0),
                            default=-1,
                        )
                        if start < 0 or self._started:
                            self._broken = self._started
                            return
                        pos = start
                        continue
                    self._broken = True
                    return
                if match.end() == end:
                    self._rest = buf[pos:]
                    return
                self._token(json.loads(match.group()), is_string=False)
                pos = match.end()

    def _open(self, is_object: bool) -> None:
        shape = self._root_shape if not self._stack else self._stack[-1].child_shape()
        self._started = True
        if self._stack:
            self._stack[-1].expect = "comma_or_end"
        self._stack.append(_Frame(shape, is_object))

    def _close(self, is_object: bool) -> bool:
        if not self._stack or self._stack[-1].is_object != is_object:
            return False
        frame = self._stack.pop()
        value = _finish_child(frame.shape, frame.complete(), frame.typed())
        if self._stack:
            self._stack[-1].put(value)
        else:
            self._done = value
        return True

    def _token(self, value: Any, *, is_string: bool) -> None:
        self._started = True
        if not self._stack:
            self._done = _finish_child(self._root_shape, value, False)
            return
        frame = self._stack[-1]
        if frame.is_object and frame.expect == "key" and is_string:
            frame.key = value
            frame.expect = "colon"
            return
        frame.put(_finish_child(frame.child_shape(), value, False))
        frame.expect = "comma_or_end"

    def value(self) -> T | None:
        if not self._dirty and self._cache is not _MISSING:
            return typing.cast(T, self._cache)
        self._dirty = False
        if self._done is not _MISSING:
            self._cache = self._done
        else:
            self._cache = self._build()
        return None if self._cache is _MISSING else typing.cast(T, self._cache)

    def _build(self) -> Any:
        if not self._stack:
            return _MISSING
        tail: Any = _MISSING
        top = self._stack[-1]
        if self._string is not None and top.expect == "value":
            shape = top.child_shape()
            text = "".join(self._string)
            tail = shape.partial(text) if isinstance(shape, _Leaf) else text
            if tail is not _MISSING:
                top.expect = "comma_or_end"
                result = self._assemble(tail)
                top.expect = "value"
                return result
        return self._assemble(tail)

    def _assemble(self, tail: Any) -> Any:
        for frame in reversed(self._stack):
            partial = frame.with_tail(tail)
            if not frame.typed() and isinstance(frame.shape, _Leaf):
                partial = frame.shape.partial(partial)
            tail = partial
        return tail
