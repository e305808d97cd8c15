"""Reading the model's output as strict JSON: `NaN`, `Infinity`, numbers too large for a
float and duplicate keys are not values, and the error names the place.

Python's parsers accept all four (a duplicate key silently keeps its last value), so the
fast parser reads the text and two cheap checks look for what it lets through; only when a
check cannot rule them out does a slow reader walk the text to find the first one and its
path. What no parser accepts is reported as `json.loads` reports it.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from pydantic_core import from_json

from allama._printable import storable
from allama.adapters._surrogates import holds_lone_surrogate, storable_json
from allama.extract._kept import kept_keys
from allama.schema._undeclared import format_path

__all__ = ["NotJsonError", "keys_all_kept", "loads", "read", "written_keys"]


class NotJsonError(ValueError):
    """The output is not strict JSON; `path` names where (`None` for the root). `parts` is
    that place as keys and indices, `said` the message without it, `key` the key written
    twice and `number` the number too large, where that is what is wrong (the reader does
    not know the type: a message that must not quote them is made again from these, the
    type known)."""

    def __init__(
        self,
        message: str,
        path: str | None,
        parts: tuple[str | int, ...] = (),
        said: str = "",
        key: str | None = None,
        number: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.parts = parts
        self.said = said or message
        self.key = key
        self.number = number


def loads(raw: str) -> Any:
    """The JSON value of `raw`, read strictly.

    Raises `NotJsonError` (a `ValueError`) for `NaN`, `Infinity`, an overflowing number or a
    duplicate key, naming the place; `json.loads`'s own `ValueError` for text no parser
    reads; `RecursionError` for a value nested past what the parsers take.
    """
    return _read(raw)[0]


def read(raw: str) -> tuple[Any, bool]:
    """`loads`'s value of `raw` with each half of a character in it (a lone surrogate,
    escaped `\\ud83d` or not) as U+FFFD (`storable_json`), and whether there was one: the
    paid answer is kept, told `lone_surrogates`. Only text pydantic-core refused can hold
    one (it reads none), so the common answer is not walked."""
    value, fallen_back = _read(raw)
    if fallen_back and holds_lone_surrogate(value):
        return storable_json(value), True
    return value, False


def _read(raw: str) -> tuple[Any, bool]:
    """`loads`'s value, and whether the standard library's reader read it (pydantic-core
    refused the text; that reader keeps a lone surrogate as it came)."""
    try:
        value = from_json(raw, allow_inf_nan=False)
    except (ValueError, TypeError):  # `TypeError`: a lone surrogate in the text
        located = _first_non_json(raw)
        if located is not None:
            raise located from None
        return json.loads(raw), True
    if not keys_all_kept(raw, kept_keys(value)):
        located = _first_non_json(raw)
        if located is not None:
            raise located
    return value, False


def keys_all_kept(raw: str, kept: int) -> bool:
    """Whether the JSON text `raw` writes exactly the `kept` keys its value kept (a duplicate
    key is written twice and kept once; `NOT_FINITE`, a float that is not finite, is never
    a match). When the count in the text is not sure, this says no: the slow reader decides.

    Every key is followed by one colon, so a text with as many colons as kept keys writes
    no key twice (each kept key was written, and no colon is left for another): one count,
    the usual answer. Colons inside strings (times, addresses) send it to the closer count.
    """
    if raw.count(":") == kept:
        return True
    written = written_keys(raw)
    return written is not None and written == kept


def written_keys(raw: str) -> int | None:
    """How many keys the JSON text writes at least, counted by the `":` that ends each;
    `None` when a key may have white space before its colon (then it would not be counted).

    An escaped quote followed by a colon inside a string is counted too: counting more keys
    than there are only ever sends an output to the careful reading, while counting fewer
    could hide a duplicate.
    """
    quoted = raw.count('":')
    # Every colon right after a quote: no key has white space before its colon. Otherwise
    # look closer (colons in text are common; white space before a colon is not).
    if raw.count(":") != quoted and (" :" in raw or "\n:" in raw or "\t:" in raw or "\r:" in raw):
        return None
    return quoted


# The slow reader: only for text the checks above could not clear.

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_SPACE = re.compile(r"[ \t\n\r]*")
_WORDS = {"true": True, "false": False, "null": None}
_NOT_NUMBERS = ("NaN", "Infinity", "-Infinity")


class _Stop(Exception):
    """The reader met something no JSON parser reads: `json.loads` reports it."""


def _first_non_json(raw: str) -> NotJsonError | None:
    """The first `NaN`, `Infinity`, overflowing number or duplicate key in `raw`, with its
    path; `None` when there is none (or the text is broken in a way `json.loads` reports)."""
    try:
        _Reader(raw).document()
    except NotJsonError as found:
        return found
    except (_Stop, ValueError, IndexError, RecursionError):
        return None
    return None


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.path: list[str | int] = []

    def document(self) -> None:
        self.space()
        self.value()

    def space(self) -> None:
        match = _SPACE.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos

    def fail(self, message: str, key: str | None = None, number: str | None = None) -> NotJsonError:
        parts = tuple(self.path)
        place = format_path(parts) or None
        full = f"{message} at `{place}`" if place else message
        return NotJsonError(full, place, parts, message, key, number)

    def value(self) -> None:
        text, pos = self.text, self.pos
        if pos >= len(text):
            raise _Stop
        char = text[pos]
        if char == "{":
            self.object()
        elif char == "[":
            self.array()
        elif char == '"':
            _, self.pos = scanstring(text, pos + 1)
        else:
            for word in _NOT_NUMBERS:
                if text.startswith(word, pos):
                    raise self.fail(f"`{word}` is not a JSON number")
            for word in _WORDS:
                if text.startswith(word, pos):
                    self.pos = pos + len(word)
                    return
            match = _NUMBER.match(text, pos)
            if match is None:
                raise _Stop
            literal = match.group()
            if any(mark in literal for mark in ".eE") and float(literal) in (
                float("inf"),
                float("-inf"),
            ):
                raise self.fail(
                    f"the number `{literal}` is too large for a floating point value",
                    number=literal,
                )
            self.pos = match.end()

    def object(self) -> None:
        text = self.text
        self.pos += 1
        seen: set[str] = set()
        self.space()
        if text[self.pos] == "}":
            self.pos += 1
            return
        while True:
            self.space()
            if text[self.pos] != '"':
                raise _Stop
            key, self.pos = scanstring(text, self.pos + 1)
            # Half of a character is U+FFFD (`read`): keys that differ only in their halves
            # (`"\\ud83d"`, `"\\ud83e"`) are one key written twice, as literal ones are.
            key = storable(key)
            if key in seen:
                raise self.fail(f"the key `{key}` appears twice in the object", key=key)
            seen.add(key)
            self.space()
            if text[self.pos] != ":":
                raise _Stop
            self.pos += 1
            self.space()
            self.path.append(key)
            self.value()
            self.path.pop()
            self.space()
            char = text[self.pos]
            self.pos += 1
            if char == "}":
                return
            if char != ",":
                raise _Stop

    def array(self) -> None:
        text = self.text
        self.pos += 1
        self.space()
        if text[self.pos] == "]":
            self.pos += 1
            return
        index = 0
        while True:
            self.space()
            self.path.append(index)
            self.value()
            self.path.pop()
            self.space()
            char = text[self.pos]
            self.pos += 1
            if char == "]":
                return
            if char != ",":
                raise _Stop
            index += 1
