"""Patterns the type's validation and the provider read as two languages.

pydantic validates a `pattern` with Rust's regex syntax; JSON Schema's `pattern` is
ECMA-262's, which the providers that enforce patterns follow. Most patterns mean the same in
both. Some Rust syntax is plain text to ECMA-262 (`\\A` is the letter A, `[[:alpha:]]` a
class followed by `]`) or an error there (`(?P<name>`, `(?i)`): a provider enforcing such a
pattern produces values the type refuses, or refuses the schema. Where a dialect keeps
patterns, it removes such a one, with a note, rather than have it read otherwise.
"""

from __future__ import annotations

__all__ = ["read_otherwise"]

_CLASS_OPERATORS = ("&&", "--", "~~")


def read_otherwise(pattern: str) -> str | None:
    """The first construct of `pattern` that ECMA-262 reads otherwise than Rust's regex
    syntax does, in words; `None` when there is none."""
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            after = pattern[index + 1 : index + 2]
            if after in ("A", "z") and not in_class:
                return f"`\\{after}` (an anchor in Rust's syntax, a letter in ECMA-262's)"
            if after == "x" and pattern.startswith("{", index + 2):
                return "`\\x{...}` (a code point in Rust's syntax only)"
            if after in ("p", "P") and not pattern.startswith("{", index + 2):
                return f"`\\{after}` with a one-letter class (Rust's syntax only)"
            if after in ("D", "W"):
                what = "digits" if after == "D" else "word characters"
                return f"`\\{after}` (all but Unicode's {what} in Rust's syntax, ASCII's in ECMA's)"
            index += 2
            continue
        if in_class:
            if char == "[":
                if pattern.startswith("[:", index):
                    return "a POSIX class (`[[:alpha:]]`: Rust's syntax only)"
                return "a class inside a class (Rust's syntax only)"
            if pattern.startswith(_CLASS_OPERATORS, index):
                return (
                    f"`{pattern[index : index + 2]}` in a class (a set operation in Rust's syntax)"
                )
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            index += 1
            if pattern.startswith("^", index):
                index += 1
            if pattern.startswith("]", index):
                return "a `]` first in a class (itself in Rust's syntax, an end in ECMA-262's)"
            continue
        elif char == "(" and pattern.startswith("(?", index):
            kind = pattern[index + 2 : index + 3]
            if kind == "P":
                return "`(?P<name>...)` (Rust's syntax; `(?<name>...)` in ECMA-262's)"
            if kind not in (":", "<", "=", "!"):
                return "inline flags (`(?i)`: Rust's syntax only)"
        elif char == "{" and pattern.startswith("{,", index):
            return "`{,n}` (a count in Rust's syntax, text in ECMA-262's)"
        index += 1
    return None
