"""Half of a character in a provider's JSON: a lone surrogate, which JSON may escape
(`"\\ud83d"`) and no UTF-8 text holds. Every API reads it as U+FFFD and says so in the same
words, so that the paid answer can be stored (the ledger, `to_json`) and sent back."""

from __future__ import annotations

import re
from typing import Any

import pydantic_core

from allama._printable import storable
from allama.adapters._http import wire_json
from allama.types._lone_surrogates import (
    LONE_SURROGATES,
    lone_surrogates,
    with_lone_surrogates,
)

__all__ = [
    "LONE_SURROGATES",
    "EscapedHalves",
    "holds_lone_surrogate",
    "lone_surrogates",
    "read_storable_json",
    "storable_json",
    "with_lone_surrogates",
]


def holds_lone_surrogate(value: Any) -> bool:
    """Whether a string in JSON data (a key too) holds a lone surrogate. Walked without
    recursion: the standard library reads JSON nested deeper than a recursive walk goes."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if storable(item) != item:
                return True
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
    return False


def storable_json(value: Any) -> Any:
    """JSON data with each lone surrogate in its strings (keys too) as U+FFFD (`storable`),
    in the same order; built without recursion, as `holds_lone_surrogate` walks it. Keys
    that differ only in their halves are one key then, read as a key written twice is (the
    standard library's reader and pydantic-core keep its first place and its last value)."""
    pending: list[tuple[Any, Any]] = []

    def copied(item: Any) -> Any:
        if isinstance(item, str):
            return storable(item)
        if isinstance(item, list | dict):
            made: Any = [] if isinstance(item, list) else {}
            pending.append((item, made))
            return made
        return item

    root = copied(value)
    while pending:
        source, made = pending.pop()
        if isinstance(source, list):
            made.extend(copied(item) for item in source)
        else:
            made.update((storable(key), copied(item)) for key, item in source.items())
    return root


def read_storable_json(data: bytes | str) -> tuple[Any, bool]:
    """JSON as `read_json` reads it, each lone surrogate in it as U+FFFD (`storable_json`),
    and whether it held one (its answer is then told `lone_surrogates`); `ValueError` when
    it is not JSON. Only what pydantic-core refused can hold one: it reads no lone
    surrogate, and the standard library's reader, taking over, keeps each as it came."""
    try:
        return pydantic_core.from_json(data), False
    except ValueError:
        payload = wire_json(data)
    if not holds_lone_surrogate(payload):
        return payload, False
    return storable_json(payload), True


_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_CUT_HALF = re.compile(r"\\(?:u(?:[dD](?:[89a-fA-F][0-9a-fA-F]?)?)?)?")
"""The start of an escape of half of a character (`\\ud8`) that a piece cut short."""
_CUT_SECOND = re.compile(r"(?:\\(?:u(?:[dD](?:[c-fC-F][0-9a-fA-F]?)?)?)?)?")
"""What may yet be the escape of a first half's second half (`\\udc`), or nothing yet."""


class EscapedHalves:
    """JSON text that comes in pieces (an Anthropic stream's tool call arguments), each half
    of a character escaped alone in it (`\\ud83d` with no `\\udc00` after it) as U+FFFD,
    as a body's reader reads the same JSON (`read_storable_json`); `met` once one was. An
    escaped pair is kept as written. An escape a piece cuts short (`\\ud8`), and a first
    half at the end of a piece, wait for the next piece (`read`) or the end (`end`): its
    other half may come."""

    __slots__ = ("_held", "met")

    def __init__(self) -> None:
        self._held = ""
        self.met = False

    def read(self, piece: str) -> str:
        """The text of `piece` (after what waited) that can be given now."""
        ready, self._held = self._read(self._held + piece, final=False)
        return ready

    def end(self) -> str:
        """What still waited, read at the end: a first half with no second is U+FFFD."""
        ready, self._held = self._read(self._held, final=True)
        return ready

    def _read(self, text: str, *, final: bool) -> tuple[str, str]:
        """`text` read up to what waits for more (nothing when `final`), and what waits."""
        pos = text.find("\\")
        if pos < 0:
            return text, ""
        out: list[str] = []
        start = 0
        while pos >= 0:
            escape = _ESCAPE.match(text, pos)
            if escape is None:  # another escape (`\\\\`, `\\"`), or one cut short
                if not final and _CUT_HALF.fullmatch(text, pos):
                    out.append(text[start:pos])
                    return "".join(out), text[pos:]
                pos = text.find("\\", pos + 2)
                continue
            code = int(escape.group(1), 16)
            after = pos + 6
            if not 0xD800 <= code <= 0xDFFF:
                pos = text.find("\\", after)
                continue
            if code <= 0xDBFF:
                second = _ESCAPE.match(text, after)
                if second is not None and 0xDC00 <= int(second.group(1), 16) <= 0xDFFF:
                    pos = text.find("\\", after + 6)  # a pair, as written
                    continue
                if second is None and not final and _CUT_SECOND.fullmatch(text, after):
                    out.append(text[start:pos])
                    return "".join(out), text[pos:]
            out.append(text[start:pos])
            out.append("\ufffd")
            self.met = True
            start = after
            pos = text.find("\\", after)
        out.append(text[start:])
        return "".join(out), ""
