"""Text from the caller's data made safe to print on a terminal."""

from __future__ import annotations

import re

__all__ = ["printable"]

_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def printable(text: str) -> str:
    """`text` with its control, line-breaking and direction characters written as escapes
    (`\\x1b`): a label, a file's or a column's name is the caller's data, and an escape
    sequence in it, printed as it is, would drive the terminal (clear it, rewrite a line,
    forge one)."""
    return _UNPRINTABLE.sub(lambda found: found.group().encode("unicode_escape").decode(), text)
