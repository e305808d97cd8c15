"""Patterns the type's validation and the provider read as two languages.

pydantic validates a `pattern` with Rust's regex syntax; JSON Schema's `pattern` is
ECMA-262's, which the providers that enforce patterns follow. Most patterns mean the same in
both. Some Rust syntax is plain text to ECMA-262 (`\\A` is the letter A, `[[:alpha:]]` a
class followed by `]`) or an error there (`(?P<name>`, `(?i)`): a provider enforcing such a
pattern produces values the type refuses, or refuses the schema. The class escapes are
Unicode's in Rust's syntax and ASCII's in ECMA-262's, with or without its `u` flag (`\\w`,
`\\d`, `\\b`; `\\s` is ECMA-262's own list): a provider enforcing `^\\w+$` refuses `José`,
which the type takes. Where a dialect keeps patterns, it removes such a one, with a note,
rather than have it read otherwise. (A Rust `(?-u)` or Python `(?a)` that makes the classes
ASCII's is an inline flag, which ECMA-262 has none of: read otherwise too.)
"""

from __future__ import annotations

__all__ = ["read_otherwise"]

_CLASS_OPERATORS = ("&&", "--", "~~")

_GENERAL_CATEGORIES = frozenset(
    {
        "C",
        "Cc",
        "Cf",
        "Cn",
        "Co",
        "Cs",
        "L",
        "LC",
        "Ll",
        "Lm",
        "Lo",
        "Lt",
        "Lu",
        "M",
        "Mc",
        "Me",
        "Mn",
        "N",
        "Nd",
        "Nl",
        "No",
        "P",
        "Pc",
        "Pd",
        "Pe",
        "Pf",
        "Pi",
        "Po",
        "Ps",
        "S",
        "Sc",
        "Sk",
        "Sm",
        "So",
        "Z",
        "Zl",
        "Zp",
        "Zs",
        "Other",
        "Control",
        "Format",
        "Unassigned",
        "Private_Use",
        "Surrogate",
        "Letter",
        "Cased_Letter",
        "Lowercase_Letter",
        "Modifier_Letter",
        "Other_Letter",
        "Titlecase_Letter",
        "Uppercase_Letter",
        "Mark",
        "Combining_Mark",
        "Spacing_Mark",
        "Enclosing_Mark",
        "Nonspacing_Mark",
        "Number",
        "Decimal_Number",
        "Letter_Number",
        "Other_Number",
        "Punctuation",
        "Connector_Punctuation",
        "Dash_Punctuation",
        "Close_Punctuation",
        "Final_Punctuation",
        "Initial_Punctuation",
        "Other_Punctuation",
        "Open_Punctuation",
        "Symbol",
        "Currency_Symbol",
        "Modifier_Symbol",
        "Math_Symbol",
        "Other_Symbol",
        "Separator",
        "Line_Separator",
        "Paragraph_Separator",
        "Space_Separator",
        "Alphabetic",
        "Alpha",
        "Any",
        "ASCII",
        "White_Space",
        "space",
        "Uppercase",
        "Upper",
        "Lowercase",
        "Lower",
        "Emoji",
        "Emoji_Presentation",
        "Extended_Pictographic",
        "Ideographic",
        "Ideo",
        "Math",
        "Hex_Digit",
        "ASCII_Hex_Digit",
    }
)
"""The names `\\p{...}` takes alone in both syntaxes (ECMA-262's General_Category values
and the binary properties both know, spelled exactly: Rust's syntax also takes loose
spellings and script names, which ECMA-262 reads otherwise or refuses)."""

_PROPERTY_KEYS = ("General_Category=", "gc=", "Script=", "sc=", "Script_Extensions=", "scx=")

_QUANTIFIED = frozenset("*+?}")


def read_otherwise(pattern: str) -> str | None:
    """The first construct of `pattern` that ECMA-262 reads otherwise than Rust's regex
    syntax does, in words; `None` when there is none."""
    in_class = False
    negated = False  # the class open is `[^...]`
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            after = pattern[index + 1 : index + 2]
            said = _escape(pattern, index, after, in_class, negated)
            if said is not None:
                return said
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
            negated = pattern.startswith("^", index)
            if negated:
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
        elif (
            char in "*+{"
            and index
            and _after_quantifier(pattern, index)
            and (char != "{" or _is_count(pattern, index))
        ):
            return "a quantifier after a quantifier (Rust's syntax only)"
        index += 1
    return None


def _escape(pattern: str, index: int, after: str, in_class: bool, negated: bool) -> str | None:
    """What ECMA-262 reads otherwise in the escape at `index` (`after` its letter)."""
    if after in ("A", "z") and not in_class:
        return f"`\\{after}` (an anchor in Rust's syntax, a letter in ECMA-262's)"
    if after == "Z":
        return "`\\Z` (an anchor in Python's syntax, a letter in ECMA-262's)"
    if after in ("b", "B") and not in_class:
        if pattern.startswith("{", index + 2):
            return f"`\\{after}{{...}}` (a word boundary in Rust's syntax only)"
        return f"`\\{after}` (Unicode's word boundaries in Rust's syntax, ASCII's in ECMA-262's)"
    if after in ("<", ">"):
        return f"`\\{after}` (a word boundary in Rust's syntax only)"
    if after == "x" and pattern.startswith("{", index + 2):
        return "`\\x{...}` (a code point in Rust's syntax only)"
    if after == "u" and pattern.startswith("{", index + 2):
        return "`\\u{...}` (a code point in Rust's syntax; text outside ECMA-262's `u` mode)"
    if after in ("U", "a"):
        return f"`\\{after}` (Rust's syntax only)"
    if after in ("p", "P"):
        if not pattern.startswith("{", index + 2):
            return f"`\\{after}` with a one-letter class (Rust's syntax only)"
        end = pattern.find("}", index + 3)
        name = pattern[index + 3 : end] if end != -1 else ""
        if name not in _GENERAL_CATEGORIES and not name.startswith(_PROPERTY_KEYS):
            return (
                f"`\\{after}{{{name}}}` (a property name Rust's syntax takes and ECMA-262's "
                "does not, or not so spelled)"
            )
    if after in ("D", "W"):
        what = "digits" if after == "D" else "word characters"
        return f"`\\{after}` (all but Unicode's {what} in Rust's syntax, ASCII's in ECMA's)"
    if after in ("d", "w"):
        # ECMA-262's classes are the ASCII ones, with or without its `u` flag: a provider
        # would refuse a value the type takes (`José`, `٣`), or, negated, allow one it refuses.
        what = "digits" if after == "d" else "word characters"
        if in_class and negated:
            return (
                f"`\\{after}` in a negated class (all but Unicode's {what} in Rust's syntax, "
                "ASCII's in ECMA's)"
            )
        return f"`\\{after}` (Unicode's {what} in Rust's syntax, ASCII's in ECMA's)"
    if after in ("s", "S"):
        # Not ASCII in ECMA-262 either, but its own list: U+FEFF in, U+0085 out.
        but = "all but " if after == "S" else ""
        return (
            f"`\\{after}` ({but}Unicode's white space in Rust's syntax, {but}ECMA-262's own "
            "in ECMA's, which has U+FEFF and not U+0085)"
        )
    return None


def _after_quantifier(pattern: str, index: int) -> bool:
    """Whether the character before `index` ends a quantifier (not an escaped one, not a
    lazy `?` after one)."""
    before = pattern[index - 1]
    if before not in _QUANTIFIED:
        return False
    escapes = 0
    at = index - 2
    while at >= 0 and pattern[at] == "\\":
        escapes += 1
        at -= 1
    if escapes % 2:
        return False  # `\\*`: a character
    if before == "}":
        opened = pattern.rfind("{", 0, index - 1)
        return opened != -1 and _is_count(pattern, opened)
    return index >= 2 or before != "?"


def _is_count(pattern: str, index: int) -> bool:
    """Whether the `{` at `index` opens a count (`{2}`, `{1,3}`, `{2,}`)."""
    end = pattern.find("}", index)
    body = pattern[index + 1 : end] if end != -1 else ""
    low, _, high = body.partition(",")
    return low.isdigit() and (high == "" or high.isdigit())
