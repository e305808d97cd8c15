"""Tool call arguments that come as a JSON object (Anthropic's `tool_use.input`, Gemini's
`functionCall.args`, Ollama's `function.arguments`, a Responses server's object), written
back as the JSON text a `ToolCall` carries.

The body reader (`read_json`) reads every number into a float, which keeps 17 digits:
`1.2345678901234567890123` would be written back as `1.2345678901234567`, `1E-400` as
`0.0` and `1e999` as `Infinity` (no JSON number), where the same call streamed as text
keeps what the model wrote. So an arguments object that holds a float is read again from
the text it came in (`Numbers`), each number kept as written (`ExactNumber`): only then,
since the body reader is on every call's path and most arguments hold no float. Whole
bodies, and Gemini's and Ollama's streams, are read so; an Anthropic stream's arguments
come as text already (`input_json_delta`), but an object its `content_block_start` gives
whole, and a Responses stream's server object, are still written from floats.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring
from typing import Any

from allama.adapters._surrogates import storable_json

__all__ = [
    "ExactNumber",
    "Numbers",
    "arguments_text",
    "json_text",
    "written",
]


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""`json.dumps` with these arguments, made once rather than on each call."""


def json_text(value: Any) -> str:
    """A value as compact JSON text, its key order and non-ASCII characters kept."""
    return _COMPACT.encode(value)


_FINITE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""`json_text`'s encoder that refuses an infinite or NaN float (`ValueError`): such a float
is found as the text is written, at no cost."""
_POINT = re.compile(r"\.(?<=[0-9]\.)")
_MINUS = re.compile(r"e-(?<=[0-9]e-)")
_PLUS = re.compile(r"e\+(?<=[0-9]e\+)")
"""What `json_text` writes of a finite float: a digit and its point (`0.5`), or its
exponent (`1e-05`, `1e+16`). Each starts with a literal, which the regex engine finds
fastest (a class of characters first is scanned for char by char, several times slower)."""


def _may_hold_float(text: str) -> bool:
    """Whether `json_text`'s text of a value without an infinite or NaN float may hold a
    float: text without what it writes of one holds none, found at C speed, faster than a
    walk of the value (a string may hold it too: the value is then walked)."""
    return (
        _POINT.search(text) is not None
        or _MINUS.search(text) is not None
        or ("+" in text and _PLUS.search(text) is not None)
    )


class ExactNumber(float):
    """A JSON number with a fraction or an exponent as written (`literal`): a float to
    whatever reads it, its text written back by `Numbers.text_of` as it came."""

    __slots__ = ("literal",)

    literal: str

    def __new__(cls, literal: str) -> ExactNumber:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number


def exact_json(data: bytes | str) -> Any:
    """JSON by the standard library's reader, each number with a fraction or an exponent as
    an `ExactNumber` (an integer is exact as read); `ValueError` for what it cannot read
    (nested past the interpreter's recursion limit too)."""
    try:
        return json.loads(data, parse_float=ExactNumber)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def holds_float(value: Any) -> bool:
    """Whether JSON data holds a float anywhere (whose digits may not be the ones written).
    Walked without recursion, as `exact_json` reads deeper than a recursive walk goes."""
    if isinstance(value, float):
        return True
    if not isinstance(value, dict | list):
        return False
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        for member in item.values() if isinstance(item, dict) else item:
            if isinstance(member, float):
                return True
            if isinstance(member, dict | list):
                pending.append(member)
    return False


class Numbers:
    """A parsed payload and the text it was read from: a part of the payload that holds a
    float is written (`text_of`) from that text read again (`exact_json`), once, its numbers
    as written. The part is found in the payload by identity, so any part is found where it
    sits, whatever shape holds it; one not found, or text that does not read again, is
    written as read. `halves`: the payload holds each lone surrogate of the text as U+FFFD
    (`read_storable_json` said so), as the text read again then does."""

    __slots__ = ("_exact", "_halves", "_parents", "_payload", "_text")

    def __init__(self, payload: Any, text: bytes | str, *, halves: bool = False) -> None:
        self._payload = payload
        self._text = text
        self._halves = halves
        self._exact: Any = _UNREAD
        self._parents: dict[int, tuple[int, str | int]] | None = None
        """Each container of the payload by identity, with its parent's and its key there:
        walked once, on the first part asked for, so that each part's place is found by
        going up, not by walking the payload again for each (a body of 1,600 calls)."""

    def text_of(self, value: Any) -> str:
        """`value`, a part of the payload, as compact JSON text (`json_text`), its numbers
        as the text wrote them where it holds a float."""
        try:
            text = _FINITE.encode(value)
        except ValueError:  # an infinite or NaN float (`1e999`, `NaN`)
            return written(self.exact(value))
        if not (_may_hold_float(text) and holds_float(value)):
            return text
        return written(self.exact(value))

    def exact(self, value: Any) -> Any:
        """`value`, a part of the payload, read again from the text with its numbers as
        written (`ExactNumber`); `value` itself when it holds no float or is not found."""
        if not holds_float(value):
            return value
        if self._parents is None:
            self._parents = _parents_in(self._payload)
        path = _path_up(self._parents, self._payload, value)
        if path is None:
            return value
        if self._exact is _UNREAD:
            try:
                exact = exact_json(self._text)
            except ValueError:
                exact = None
            self._exact = storable_json(exact) if self._halves else exact
        node = self._exact
        for step in path:
            if not _has(node, step):  # not the same shape (the text did not read again)
                return value
            node = node[step]
        return node


def arguments_text(raw: Any, numbers: Numbers | None) -> str:
    """A call's arguments as sent: a string as it is, an object (`null` as `{}`) as JSON
    text, its numbers as `numbers` (the text it was read from, where known) wrote them."""
    if isinstance(raw, str):
        return raw
    value = {} if raw is None else raw
    return json_text(value) if numbers is None else numbers.text_of(value)


_UNREAD: Any = object()
"""`Numbers._exact` before the text is read again."""


def _has(node: Any, step: str | int) -> bool:
    """Whether `node` has a member at `step` (a key of an object, an index of an array)."""
    if isinstance(step, int):
        return isinstance(node, list) and step < len(node)
    return isinstance(node, dict) and step in node


def _parents_in(root: Any) -> dict[int, tuple[int, str | int]]:
    """Each object and array within `root` by identity, with its parent's identity and its
    key or index there. Walked once, without recursion."""
    parents: dict[int, tuple[int, str | int]] = {}
    pending = [root] if isinstance(root, dict | list) else []
    while pending:
        item = pending.pop()
        members = item.items() if isinstance(item, dict) else enumerate(item)
        for key, member in members:
            if isinstance(member, dict | list) and id(member) not in parents:
                parents[id(member)] = (id(item), key)
                pending.append(member)
    return parents


def _path_up(
    parents: dict[int, tuple[int, str | int]], root: Any, target: Any
) -> list[str | int] | None:
    """The keys and indexes from `root` to `target` (the very object), or `None` when it is
    not in `root`."""
    path: list[str | int] = []
    at = id(target)
    while at != id(root):
        found = parents.get(at)
        if found is None:
            return None
        at, key = found
        path.append(key)
    path.reverse()
    return path


class _Mark(str):
    """Punctuation (and keys) among the values `written` has yet to write."""

    __slots__ = ()


def written(value: Any) -> str:
    """JSON data as compact JSON text (as `json_text` writes it), each `ExactNumber` as it
    was written. Written without recursion, as `exact_json` reads deeper than a recursive
    writer goes; its keys are strings, as JSON's are."""
    out: list[str] = []
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, _Mark):
            out.append(item)
        elif isinstance(item, ExactNumber):
            out.append(item.literal)
        elif isinstance(item, dict):
            pending.append(_Mark("}"))
            entries = list(item.items())
            for place in range(len(entries) - 1, -1, -1):
                key, member = entries[place]
                pending.append(member)
                pending.append(_Mark(("," if place else "") + encode_basestring(key) + ":"))
            out.append("{")
        elif isinstance(item, list):
            pending.append(_Mark("]"))
            for place in range(len(item) - 1, -1, -1):
                pending.append(item[place])
                if place:
                    pending.append(_Mark(","))
            out.append("[")
        elif isinstance(item, str):
            out.append(encode_basestring(item))
        elif item is None or isinstance(item, bool):
            out.append("null" if item is None else "true" if item else "false")
        elif isinstance(item, int):
            out.append(int.__repr__(item))
        else:  # a float read as one (`NaN`), or what is no JSON: as `json_text` writes it
            out.append(json_text(item))
    return "".join(out)
