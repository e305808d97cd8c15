"""Short strings that match a regular expression, built from Python's own regex parser.

A JSON Schema `pattern` is unanchored, so a string that contains a match is valid. The
sampler walks the parsed pattern and takes the least it can: repeats at their minimum count,
the first branch of an alternation, the first character of a class. `length` asks for that
many more characters, spent on repeats; `variant` picks other characters, so that several
distinct strings can be drawn. Characters a positive lookahead needs are queued and spent
on the first class that accepts them, which covers the common "at least one digit" rules.
"""

from __future__ import annotations

import importlib
from typing import Any

from allama.mock._conform import compiled

__all__ = ["sample_pattern"]

_parser: Any = importlib.import_module("re._parser")

_PREFERRED = (
    "abcdefghijklmnopqrstuvwxyz"
    "0123456789"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    "_-. @:/+,;!#$%&*=?^~|'\"()[]{}<>\\`"
    " \t"
)
_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0123456789",
    "CATEGORY_NOT_DIGIT": "abcdefghij",
    "CATEGORY_WORD": "abcdefghij0123456789_",
    "CATEGORY_NOT_WORD": "-. @:/+,;!",
    "CATEGORY_SPACE": " \t\n",
    "CATEGORY_NOT_SPACE": "abcdefghij",
    "CATEGORY_LINEBREAK": "\n",
    "CATEGORY_NOT_LINEBREAK": "abcdefghij",
}
_MAX_OUTPUT = 10_000


def _name(op: Any) -> str:
    return str(getattr(op, "name", op))


class _TooHard(Exception):
    """The pattern uses something the sampler cannot satisfy."""


class _Sampler:
    def __init__(self, length: int, variant: int) -> None:
        self.need = length
        self.variant = variant
        self.groups: dict[int, str] = {}
        self.pending: list[str] = []
        self.out: list[str] = []
        self.size = 0

    def emit(self, text: str) -> None:
        self.out.append(text)
        self.need -= len(text)
        self.size += len(text)
        if self.size > _MAX_OUTPUT:
            raise _TooHard("the sample grew too long")

    def choose(self, accepts: Any, options: str) -> str:
        """A character `accepts` takes: a queued lookahead need, else one of `options`."""
        for index, wanted in enumerate(self.pending):
            if accepts(wanted):
                del self.pending[index]
                return wanted
        fitting = [ch for ch in options if accepts(ch)]
        if not fitting:
            fitting = [ch for ch in _PREFERRED if accepts(ch)]
        if not fitting:
            for code in range(0xA1, 0x3000):
                if accepts(chr(code)):
                    return chr(code)
            raise _TooHard("no character fits a class")
        pick = fitting[self.variant % len(fitting)] if self.variant else fitting[0]
        self.variant = 0
        return pick

    def run(self, items: Any) -> None:
        for op, arg in items:
            self.step(_name(op), arg)

    def step(self, op: str, arg: Any) -> None:
        if op == "LITERAL":
            self.emit(chr(arg))
        elif op == "NOT_LITERAL":
            self.emit(self.choose(lambda ch: ch != chr(arg), _PREFERRED))
        elif op == "ANY":
            self.emit(self.choose(lambda ch: ch != "\n", _PREFERRED))
        elif op == "IN":
            first = _first_options(arg)
            self.emit(self.choose(lambda ch: _in_class(arg, ch), first))
        elif op == "AT":
            return
        elif op == "BRANCH":
            branches = arg[1]
            self.run(branches[0])
        elif op in ("SUBPATTERN", "ATOMIC_GROUP"):
            group = arg[0] if op == "SUBPATTERN" else None
            body = arg[-1] if op == "SUBPATTERN" else arg
            start = len("".join(self.out))
            self.run(body)
            if group is not None:
                self.groups[group] = "".join(self.out)[start:]
        elif op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            self.repeat(arg)
        elif op == "GROUPREF":
            self.emit(self.groups.get(arg, ""))
        elif op == "GROUPREF_EXISTS":
            group, yes, no = arg
            self.run(yes if group in self.groups else (no or []))
        elif op == "ASSERT":
            direction, body = arg
            if direction == 1:
                ahead = _Sampler(0, 0)
                ahead.run(body)
                needed = "".join(ahead.out)
                self.pending.extend(needed[-1:] if needed else "")
        elif op in ("ASSERT_NOT", "FAILURE", "SUCCESS"):
            return
        else:
            raise _TooHard(f"unsupported regex construct {op}")

    def repeat(self, arg: Any) -> None:
        low, high, body = arg
        maximum = _parser.MAXREPEAT
        count = 0
        for _ in range(low):
            self.run(body)
            count += 1
        while high == maximum or count < high:
            wants_length = self.need > 0
            if not wants_length and not self.pending:
                break
            before, pending = self.need, len(self.pending)
            self.run(body)
            count += 1
            progressed = self.need < before if wants_length else len(self.pending) < pending
            if not progressed or count > _MAX_OUTPUT:
                break


def _first_options(items: Any) -> str:
    """Characters a class names outright, in order: its first literal or range start."""
    options: list[str] = []
    for op, arg in items:
        name = _name(op)
        if name == "LITERAL":
            options.append(chr(arg))
        elif name == "RANGE":
            low, high = arg
            options.extend(chr(code) for code in range(low, min(high, low + 25) + 1))
        elif name == "CATEGORY":
            options.extend(_CATEGORY_CHARS.get(_name(arg), ""))
    return "".join(options)


def _in_class(items: Any, ch: str) -> bool:
    negate = False
    hit = False
    code = ord(ch)
    for op, arg in items:
        name = _name(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            hit = hit or code == arg
        elif name == "RANGE":
            hit = hit or arg[0] <= code <= arg[1]
        elif name == "CATEGORY":
            hit = hit or _in_category(_name(arg), ch)
    return hit != negate


def _in_category(name: str, ch: str) -> bool:
    if name == "CATEGORY_DIGIT":
        return ch.isdigit()
    if name == "CATEGORY_NOT_DIGIT":
        return not ch.isdigit()
    if name == "CATEGORY_WORD":
        return ch.isalnum() or ch == "_"
    if name == "CATEGORY_NOT_WORD":
        return not (ch.isalnum() or ch == "_")
    if name == "CATEGORY_SPACE":
        return ch.isspace()
    if name == "CATEGORY_NOT_SPACE":
        return not ch.isspace()
    if name == "CATEGORY_LINEBREAK":
        return ch == "\n"
    return ch != "\n"


def sample_pattern(pattern: str, *, length: int = 0, variant: int = 0) -> str | None:
    """A short string containing a match of `pattern`, or `None` when none can be made.

    `length` asks for at least that many characters where the pattern allows it.

    >>> sample_pattern(r"^[A-Z]{2}-\\d{3}$")
    'AA-000'
    """
    regex = compiled(pattern)
    if regex is None:
        return None
    try:
        parsed = _parser.parse(pattern)
        sampler = _Sampler(length, variant)
        sampler.run(parsed)
        text = "".join(sampler.out)
    except (_TooHard, RecursionError, ValueError, OverflowError, TypeError):
        return None
    return text if regex.search(text) is not None else None
