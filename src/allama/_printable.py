"""Text from the caller's data, or a provider's, made safe to print on a terminal and to
store as UTF-8."""

from __future__ import annotations

import re

__all__ = ["printable", "storable", "writes_unicode"]

_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` with its control, line-breaking and direction characters written as escapes
    (`\\x1b`): a label, a file's or a column's name is the caller's data, and an escape
    sequence in it, printed as it is, would drive the terminal (clear it, rewrite a line,
    forge one)."""
    return _UNPRINTABLE.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


LABEL_SHOWN = 80
"""The most of a label a line shows: an id may be a whole document (`--id-field text`)."""


def printable_label(label: str) -> str:
    """A label as a line shows it: `printable`, its first `LABEL_SHOWN` characters only."""
    if len(label) > LABEL_SHOWN:
        label = f"{label[: LABEL_SHOWN - 3]}... ({len(label):,} characters)"
    return printable(label)


def storable(text: str) -> str:
    """`text` with each lone surrogate (which JSON may spell, `\\ud800`, and no UTF-8 text
    holds) as U+FFFD: a provider's words or codes written to the ledger or a file."""
    return _SURROGATE.sub("\ufffd", text)


def writes_unicode(stream: object) -> bool:
    """Whether `stream` writes every character as it is: a UTF encoding, or none said (a
    `StringIO`). Not so for `PYTHONIOENCODING=ascii` or a Latin-1 terminal."""
    import codecs

    encoding = getattr(stream, "encoding", None)
    try:
        return encoding is None or codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False
