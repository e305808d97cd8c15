"""`\\w`, `\\d` and `\\s` (and `\\W`, `\\D`, `\\S`) are Unicode's classes to the type (pydantic's
Rust regex) and ASCII's to the providers that enforce patterns (ECMA-262's, with or without
its `u` flag; `\\s` is ECMA-262's own list, which has U+FEFF and not U+0085). Sent, such a
pattern lets the provider refuse a value the type takes (`José`, `٣`), so every dialect that
keeps patterns removes it, with a note, and the rewrite is approximate."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from allama.schema import anthropic, grammar_engine, openai_strict, type_schema
from allama.schema._dialects._llama_cpp import llama_cpp
from allama.schema._patterns import read_otherwise
from allama.schema._rewrite import Rewrite

_WORD = "`\\w` (Unicode's word characters in Rust's syntax, ASCII's in ECMA's)"
_DIGIT = "`\\d` (Unicode's digits in Rust's syntax, ASCII's in ECMA's)"
_SPACE = (
    "`\\s` (Unicode's white space in Rust's syntax, ECMA-262's own in ECMA's, which has "
    "U+FEFF and not U+0085)"
)
_NOT_SPACE = (
    "`\\S` (all but Unicode's white space in Rust's syntax, all but ECMA-262's own in "
    "ECMA's, which has U+FEFF and not U+0085)"
)
_FLAGS = "inline flags (`(?i)`: Rust's syntax only)"

READ_OTHERWISE = {
    r"^\w+$": _WORD,
    r"^\d{5}$": _DIGIT,
    r"^a\sb$": _SPACE,
    r"^\S+$": _NOT_SPACE,
    r"^[\w-]+$": _WORD,  # inside a class too
    r"^[+\d]+$": _DIGIT,
    r"^[,\s]+$": _SPACE,
    r"^[\S]$": _NOT_SPACE,
    r"^\\\w$": _WORD,  # an escaped backslash, then the class
    r"^[^\s]+$": _SPACE,
    # Flags that make the classes ASCII's in the type's own syntax are flags, which ECMA-262
    # has none of (Rust's `(?-u)`; Python's `(?a)`, written for `re.ASCII`).
    r"(?-u)^\w+$": _FLAGS,
    r"^(?-u:\w)+$": _FLAGS,
    r"(?a)^\w+$": _FLAGS,
}


@pytest.mark.parametrize(("pattern", "said"), READ_OTHERWISE.items())
def test_a_class_escape_is_read_otherwise(pattern: str, said: str) -> None:
    assert read_otherwise(pattern) == said


@pytest.mark.parametrize(
    "pattern", [r"^\\w+$", r"^[\\d]+$", r"^a\\\\s$", r"^[0-9A-Za-z_]+$", r"^[ \t]+$"]
)
def test_escaped_backslashes_and_spelled_out_classes_are_not(pattern: str) -> None:
    assert read_otherwise(pattern) is None
    rewrite = openai_strict(_object(pattern))
    assert rewrite.schema == _object(pattern)
    assert rewrite.exact


def _object(pattern: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": pattern}},
        "required": ["code"],
        "additionalProperties": False,
    }


class Person(BaseModel):
    name: str = Field(pattern=r"^\w+$")
    number: str = Field(pattern=r"^\d+$")
    gap: str = Field(pattern=r"^a\sb$")
    handle: str = Field(pattern=r"^[\w-]+$")
    mark: str = Field(pattern=r"^\S$")


# Values the type takes and ECMA-262's reading of the pattern refuses (U+00A0, a no-break
# space, is white space to both: U+0085, next line, is Unicode's only; U+FEFF ECMA-262's).
TAKEN = {
    "name": "José",
    "number": "٣",  # ARABIC-INDIC DIGIT THREE
    "gap": "a\x85b",
    "handle": "José-Luis",
    "mark": "\ufeff",
}
SAID = {"name": _WORD, "number": _DIGIT, "gap": _SPACE, "handle": _WORD, "mark": _NOT_SPACE}

DIALECTS: dict[str, tuple[Callable[[Mapping[str, Any]], Rewrite], str, bool]] = {
    "openai": (openai_strict, "OpenAI strict mode", True),
    "xai": (lambda s: openai_strict(s, profile="xai"), "xAI strict mode", True),
    "anthropic": (anthropic, "Anthropic strict mode", True),
    "grammar": (grammar_engine, "the grammar", False),
    "llama_cpp": (llama_cpp, "the grammar", False),
}


def test_the_type_takes_the_values_ecma_262_refuses() -> None:
    person = Person.model_validate(TAKEN)
    assert person.model_dump() == TAKEN
    # ECMA-262's `\w` and `\d` are Python's ASCII ones.
    assert re.fullmatch(r"\w+", "José", re.ASCII) is None
    assert re.fullmatch(r"\d+", "٣", re.ASCII) is None


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_removes_a_class_escape_and_says_so(dialect: str) -> None:
    rewrite_of, provider, closes = DIALECTS[dialect]
    rewrite = rewrite_of(type_schema(Person).schema)
    fields = {name: {"title": name.title(), "type": "string"} for name in TAKEN}
    expected: dict[str, Any] = {
        "properties": fields,
        "required": list(TAKEN),
        "title": "Person",
        "type": "object",
    }
    if closes:
        expected["additionalProperties"] = False
    assert rewrite.schema == expected
    assert not rewrite.exact
    assert sorted((n.kind.value, n.pointer, n.message) for n in rewrite.notes) == sorted(
        (
            "approximated",
            f"/properties/{name}",
            f"`pattern` was removed at `/properties/{name}`: it has {said}, which {provider} "
            "would read otherwise",
        )
        for name, said in SAID.items()
    )


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_negated_class_escape_is_removed_too(dialect: str) -> None:
    rewrite_of, provider, _ = DIALECTS[dialect]
    rewrite = rewrite_of(_object(r"^[^\w]+$"))
    assert rewrite.schema["properties"]["code"] == {"type": "string"}
    assert [(n.kind.value, n.message) for n in rewrite.notes] == [
        (
            "approximated",
            "`pattern` was removed at `/properties/code`: it has `\\w` in a negated class "
            "(all but Unicode's "
            f"word characters in Rust's syntax, ASCII's in ECMA's), which {provider} would "
            "read otherwise",
        )
    ]


def test_rusts_ascii_flag_is_the_types_reading_and_still_removed() -> None:
    """`(?-u)` makes `\\w` ASCII's to the type as to ECMA-262, which has no such flag: the
    pattern is removed (sending it without the flag would be exact; not done)."""

    class Tag(BaseModel):
        tag: str = Field(pattern=r"(?-u)^\w+$")

    assert Tag(tag="abc_1").tag == "abc_1"
    with pytest.raises(ValidationError):
        Tag(tag="José")
    rewrite = openai_strict(type_schema(Tag).schema)
    assert rewrite.schema["properties"]["tag"] == {"title": "Tag", "type": "string"}
    assert [n.message for n in rewrite.notes] == [
        f"`pattern` was removed at `/properties/tag`: it has {_FLAGS}, which OpenAI strict mode "
        "would read otherwise"
    ]


def test_a_compiled_ascii_pattern_goes_inline_and_is_removed() -> None:
    class Code(BaseModel):
        code: str = Field(pattern=re.compile(r"^\w+$", re.ASCII))

    with pytest.raises(ValidationError):
        Code(code="José")
    schema = type_schema(Code).schema
    assert schema["properties"]["code"]["pattern"] == r"(?a)^\w+$"
    rewrite = anthropic(schema)
    assert rewrite.schema["properties"]["code"] == {"title": "Code", "type": "string"}
    assert [n.message for n in rewrite.notes] == [
        f"`pattern` was removed at `/properties/code`: it has {_FLAGS}, which Anthropic strict "
        "mode would read otherwise"
    ]
