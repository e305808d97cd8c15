"""Patterns the type's validation (Rust's regex syntax, in pydantic) and a provider that
enforces patterns (ECMA-262's, as JSON Schema says) read as two languages are removed, with
a note, by every dialect that keeps patterns; the rest are sent as written."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from allama.schema import anthropic, grammar_engine, openai_strict, type_schema
from allama.schema._patterns import read_otherwise

READ_OTHERWISE = {
    r"\Ahello\z": "`\\A` (an anchor in Rust's syntax, a letter in ECMA-262's)",
    r"^hello\z": "`\\z` (an anchor in Rust's syntax, a letter in ECMA-262's)",
    r"^[[:alpha:]]+$": "a POSIX class (`[[:alpha:]]`: Rust's syntax only)",
    r"^[a-z&&[^b]]$": "`&&` in a class (a set operation in Rust's syntax)",
    r"^[a-z--b]$": "`--` in a class (a set operation in Rust's syntax)",
    r"^[a[bc]]$": "a class inside a class (Rust's syntax only)",
    r"^(?i)abc$": "inline flags (`(?i)`: Rust's syntax only)",
    r"^(?i:abc)$": "inline flags (`(?i)`: Rust's syntax only)",
    r"^(?P<year>\d{4})$": "`(?P<name>...)` (Rust's syntax; `(?<name>...)` in ECMA-262's)",
    r"^[]a]$": "a `]` first in a class (itself in Rust's syntax, an end in ECMA-262's)",
    r"^[^]a]$": "a `]` first in a class (itself in Rust's syntax, an end in ECMA-262's)",
    r"^a{,3}$": "`{,n}` (a count in Rust's syntax, text in ECMA-262's)",
    r"^\x{e9}$": "`\\x{...}` (a code point in Rust's syntax only)",
    r"^\pL+$": "`\\p` with a one-letter class (Rust's syntax only)",
    r"^\W+$": "`\\W` (all but Unicode's word characters in Rust's syntax, ASCII's in ECMA's)",
    r"^\D$": "`\\D` (all but Unicode's digits in Rust's syntax, ASCII's in ECMA's)",
    r"^[^\d]+$": (
        "`\\d` in a negated class (all but Unicode's digits in Rust's syntax, ASCII's in ECMA's)"
    ),
    r"^.*\bcat\b.*$": ("`\\b` (Unicode's word boundaries in Rust's syntax, ASCII's in ECMA-262's)"),
    r"^\p{Greek}+$": (
        "`\\p{Greek}` (a property name Rust's syntax takes and ECMA-262's does not, "
        "or not so spelled)"
    ),
    r"^\p{lu}+$": (
        "`\\p{lu}` (a property name Rust's syntax takes and ECMA-262's does not, or not so spelled)"
    ),
    r"^[\U0001F600-\U0001F64F]+$": "`\\U` (Rust's syntax only)",
    r"^\a$": "`\\a` (Rust's syntax only)",
    r"^\<\w+\>$": "`\\<` (a word boundary in Rust's syntax only)",
    r"^x{2}{3}$": "a quantifier after a quantifier (Rust's syntax only)",
    r"^a**$": "a quantifier after a quantifier (Rust's syntax only)",
    r"^[a-z]+\Z": "`\\Z` (an anchor in Python's syntax, a letter in ECMA-262's)",
    r"^\u{e9}$": "`\\u{...}` (a code point in Rust's syntax; text outside ECMA-262's `u` mode)",
}

THE_SAME = [
    r"^[A-Z]{3}-[0-9]{4}$",
    r"^[^@ ]+@[^@ ]+$",
    r"^(?:ab|cd)+$",
    r"^(?<year>[0-9]{4})$",
    r"^[\]a]$",
    r"^[a\-z]$",
    r"^\p{L}+$",
    r"^\\A$",  # an escaped backslash, then the letter
    r"^[\[]$",
    r"^a{2,3}$",
    r"^a*?b+?c??d{2}?$",  # lazy quantifiers
    r"^\*+$",
    r"^[*+]{2}$",
    r"^\p{Lu}\p{Script=Greek}\p{sc=Latn}\p{White_Space}$",
    r"^[^a-z]$",
]


@pytest.mark.parametrize(("pattern", "said"), READ_OTHERWISE.items())
def test_rust_syntax_ecma_reads_otherwise_is_found(pattern: str, said: str) -> None:
    assert read_otherwise(pattern) == said


@pytest.mark.parametrize("pattern", THE_SAME)
def test_patterns_both_read_alike_are_not(pattern: str) -> None:
    assert read_otherwise(pattern) is None


def _object(pattern: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": pattern}},
        "required": ["code"],
        "additionalProperties": False,
    }


DIALECTS = {
    "openai": lambda s: openai_strict(s),
    "xai": lambda s: openai_strict(s, profile="xai"),
    "anthropic": lambda s: anthropic(s),
    "grammar": lambda s: grammar_engine(s),
}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_that_keeps_patterns_removes_one_read_otherwise(dialect: str) -> None:
    rewrite = DIALECTS[dialect](_object(r"^[[:alpha:]]+$"))
    assert "pattern" not in rewrite.schema["properties"]["code"]
    [note] = [n for n in rewrite.notes if "pattern" in n.message]
    assert note.message.startswith(
        "`pattern` was removed at `/properties/code`: it has a POSIX class"
    )
    kept = DIALECTS[dialect](_object(r"^[A-Z]{3}-[0-9]{4}$"))
    assert kept.schema["properties"]["code"]["pattern"] == r"^[A-Z]{3}-[0-9]{4}$"
    assert not [n for n in kept.notes if "pattern" in n.message]


def test_a_types_rust_pattern_is_said_approximate() -> None:
    class Ticket(BaseModel):
        code: str = Field(pattern=r"\ATCK-\d+\z")

    rewrite = openai_strict(type_schema(Ticket).schema)
    assert "pattern" not in rewrite.schema["properties"]["code"]
    assert [n.kind.value for n in rewrite.notes] == ["approximated"]
