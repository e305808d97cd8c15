"""What the dialects report as enforced, and what the undeclared-key and null walks read, on
types whose check is not where a provider's enforcement sees it: a nullable type alias, a
format the type checks more narrowly, a map key pattern only pydantic's regex engine reads."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

import pytest
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter
from typing_extensions import TypeAliasType, TypedDict

import allama
from allama import ChatRequest, ExtractionMode, Extractor, ParseError, RequestField, Warning
from allama.mock import ChatResponseBuilder, MockProvider
from allama.schema import normalize_strict_nulls, type_schema
from allama.schema._dialects import (
    anthropic,
    gemini_json_schema,
    gemini_response_schema,
    grammar_engine,
    openai_strict,
)
from allama.schema._rewrite import Rewrite
from allama.schema._undeclared import find_undeclared_key


def notes(rewrite: Rewrite) -> list[tuple[str, str, str]]:
    return [(n.kind.value, n.pointer, n.message) for n in rewrite.notes]


def plan_of(preset: str, model: str, tp: Any) -> tuple[str, list[str]]:
    provider = allama.provider(preset, api_key="k", base_url="http://127.0.0.1:9")
    plan = Extractor().plan(provider, tp, ChatRequest(model).user("x"))
    return plan.enforcement.value, [w.message for w in plan.degradations]


# A nullable type alias, optional without a default: sent required under OpenAI's strict mode.

MaybeInt = TypeAliasType("MaybeInt", int | None)
Count = TypeAliasType("Count", int)


class Aliased(TypedDict):
    a: int
    b: NotRequired[MaybeInt]


class AliasedCount(TypedDict):
    a: int
    b: NotRequired[Count]


ALIAS_NOTE = (
    "the schema of `Aliased` was approximated: the optional property at `Aliased.b` admits "
    "`null` and has no default: it is sent required, so an object without it cannot be produced"
)


@pytest.mark.parametrize(("preset", "model"), [("openai", "gpt-4o-2024-08-06"), ("xai", "grok-4")])
def test_a_nullable_alias_left_out_is_approximate_as_the_inline_union_is(
    preset: str, model: str
) -> None:
    assert plan_of(preset, model, Aliased) == ("approximate", [ALIAS_NOTE])


def test_the_alias_is_followed_to_its_definition() -> None:
    rewrite = openai_strict(TypeAdapter(Aliased).json_schema())
    assert notes(rewrite) == [
        (
            "approximated",
            "/properties/b",
            "the optional property at `/properties/b` admits `null` and has no default: "
            "it is sent required, so an object without it cannot be produced",
        )
    ]
    assert rewrite.schema["required"] == ["a", "b"]


def test_an_alias_that_admits_no_null_stays_exact() -> None:
    assert plan_of("openai", "gpt-4o-2024-08-06", AliasedCount) == ("exact", [])


# A format the provider enforces as the standard's, which the type checks more narrowly.

EMAIL = {
    "type": "object",
    "properties": {"email": {"type": "string", "format": "email"}},
    "required": ["email"],
}
EMAIL_NOTE = (
    "`format` `email` at `/properties/email` allows addresses pydantic's email check refuses "
    "(`ops@localhost`, `jane@corp.local`): such a value passes it and fails an `EmailStr`"
)


@pytest.mark.parametrize(
    "rewrite",
    [
        lambda s: openai_strict(s),
        lambda s: openai_strict(s, profile="xai"),
        anthropic,
    ],
    ids=["openai", "xai", "anthropic"],
)
def test_a_kept_email_format_is_approximate(rewrite: Any) -> None:
    done = rewrite(EMAIL)
    assert done.schema["properties"]["email"]["format"] == "email"
    assert notes(done) == [("approximated", "/properties/email", EMAIL_NOTE)]


def test_a_grammar_says_only_that_it_does_not_enforce_the_email_format() -> None:
    assert notes(grammar_engine(EMAIL)) == [
        (
            "approximated",
            "/properties/email",
            "`format` `email` is not enforced by the grammar at `/properties/email`",
        )
    ]


class Contact(BaseModel):
    email: Annotated[str, Field(json_schema_extra={"format": "email"})]


@pytest.mark.parametrize(
    ("preset", "model"),
    [
        ("openai", "gpt-4o-2024-08-06"),
        ("anthropic", "claude-sonnet-4-5"),
        ("xai", "grok-4"),
        ("groq", "openai/gpt-oss-120b"),
    ],
)
def test_an_email_field_is_reported_approximate(preset: str, model: str) -> None:
    # `EmailStr` sends this very schema (email-validator is not a dependency here).
    assert plan_of(preset, model, Contact) == (
        "approximate",
        [
            "the schema of `Contact` was approximated: `format` `email` at `Contact.email` "
            "allows addresses pydantic's email check refuses (`ops@localhost`, "
            "`jane@corp.local`): such a value passes it and fails an `EmailStr`"
        ],
    )


def test_other_kept_formats_stay_exact() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string", "format": "uuid"}},
        "required": ["id"],
    }
    assert notes(openai_strict(schema)) == []
    assert notes(anthropic(schema)) == []


# Map keys matched by pydantic's regex engine, which reads patterns Python's `re` does not.


class Entry(BaseModel):
    email: str | None = None


class Letters(BaseModel):
    m: dict[Annotated[str, StringConstraints(pattern=r"^\p{L}+$")], Entry]


class Anchored(BaseModel):
    m: dict[Annotated[str, StringConstraints(pattern=r"^\w+\z")], Entry]


def approximated(text: str) -> MockProvider:
    warning = Warning.approximated(RequestField.RESPONSE_FORMAT, "`pattern` was removed at `/`")
    return MockProvider([ChatResponseBuilder().text(text).warning(warning).build()])


@pytest.mark.parametrize("tp", [Letters, Anchored])
def test_a_misnamed_key_under_a_key_pattern_re_cannot_read_is_rejected(tp: type) -> None:
    request = ChatRequest("m").user("x").with_option(ExtractionMode.NATIVE)
    with pytest.raises(ParseError) as caught:
        Extractor(retries=0).extract(approximated('{"m": {"bob": {"e_mail": "x@y"}}}'), tp, request)
    assert "at `m.bob.e_mail`: unknown field `e_mail`, expected `email`" in str(caught.value)


def test_keys_are_matched_as_pydantic_matches_them() -> None:
    schema = type_schema(Letters).schema
    found = find_undeclared_key({"m": {"Zoë": {"e_mail": "x"}}}, schema)
    assert found is not None
    assert (found.path, found.message) == (
        "m.Zoë.e_mail",
        "unknown field `e_mail`, expected `email`",
    )
    # A key the pattern does not match is pydantic's to refuse; its value is not walked.
    assert find_undeclared_key({"m": {"bob1": {"e_mail": "x"}}}, schema) is None


class Defaulted(BaseModel):
    note: str = "none"


class DefaultedMap(BaseModel):
    m: dict[Annotated[str, StringConstraints(pattern=r"^\p{L}+$")], Defaulted]


def test_a_stand_in_null_under_such_a_key_is_removed() -> None:
    value = normalize_strict_nulls({"m": {"bob": {"note": None}}}, type_schema(DefaultedMap).schema)
    assert value == {"m": {"bob": {}}}
    assert DefaultedMap.model_validate(value) == DefaultedMap(m={"bob": Defaulted()})


def test_a_lookaround_key_pattern_is_matched_with_re() -> None:
    # pydantic reads it only with `regex_engine="python-re"`, which `re` is.
    schema = {
        "type": "object",
        "patternProperties": {
            "^(?!x)[a-z]+$": {"type": "object", "properties": {"email": {}}},
        },
    }
    found = find_undeclared_key({"bob": {"e_mail": 1}}, schema)
    assert found is not None and found.path == "bob.e_mail"
    assert find_undeclared_key({"xbob": {"e_mail": 1}}, schema) is None


# Gemini's `responseSchema`: a closed object with no properties, which it cannot write (an
# `OBJECT` needs properties, a node without `type` is refused), and the keywords it takes but
# Google does not list as honoured.

CLOSED_EMPTY = [
    {"type": "object", "additionalProperties": False, "properties": {}},
    {"type": "object", "additionalProperties": False},
]


def closed_empty_note(at: str) -> tuple[str, str, str]:
    return (
        "unsupported",
        at,
        f"the object at `{at}` declares no properties, which Gemini responseSchema cannot express",
    )


@pytest.mark.parametrize("closed", CLOSED_EMPTY, ids=["empty_properties", "no_properties"])
def test_a_closed_empty_object_is_not_enforced(closed: dict[str, Any]) -> None:
    # The shape of corpus files such as Github_easy/o21393: only `{}` fits `links`; written
    # as any value (`{}`), which has no `type` and which Gemini refuses.
    schema = {
        "type": "object",
        "properties": {"links": closed, "ok": {"type": "boolean"}},
        "required": ["links", "ok"],
    }
    rewrite = gemini_response_schema(schema)
    assert rewrite.schema["properties"] == {"links": {}, "ok": {"type": "BOOLEAN"}}
    assert notes(rewrite) == [closed_empty_note("/properties/links")]
    assert not rewrite.strict_representable


@pytest.mark.parametrize("closed", CLOSED_EMPTY, ids=["empty_properties", "no_properties"])
def test_a_closed_empty_root_is_not_enforced(closed: dict[str, Any]) -> None:
    rewrite = gemini_response_schema(closed)
    assert rewrite.schema == {}
    assert notes(rewrite) == [closed_empty_note("/")]


@pytest.mark.parametrize("closed", CLOSED_EMPTY, ids=["empty_properties", "no_properties"])
def test_response_json_schema_keeps_a_closed_empty_object_exact(closed: dict[str, Any]) -> None:
    rewrite = gemini_json_schema(closed)
    assert rewrite.schema == closed
    assert notes(rewrite) == []


class Nothing(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HoldsNothing(BaseModel):
    links: Nothing


def test_a_forbidding_model_without_fields_falls_back_to_the_forced_tool_on_gemini_1_5() -> None:
    assert plan_of("gemini", "gemini-1.5-flash", HoldsNothing) == (
        "not_enforced",
        [
            "Gemini has no strict function calling; the schema of `HoldsNothing` was sent "
            "without it",
            "the schema of `HoldsNothing` was approximated: the object at `Nothing` declares "
            "no properties, which Gemini responseSchema cannot express",
        ],
    )
    assert plan_of("gemini", "gemini-2.0-flash", HoldsNothing) == ("exact", [])


BOUNDED = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 5, "maximum": 9},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
    },
    "required": ["n", "tags"],
}


def hint_note(key: str, at: str, sent: str = "") -> tuple[str, str, str]:
    return (
        "approximated",
        at,
        f"`{key}` is not enforced by Gemini responseSchema at `{at}`: Google does not list "
        f"it as honoured (it is sent{sent}, as a hint)",
    )


def test_response_schema_sends_bounds_it_does_not_honour_as_hints() -> None:
    rewrite = gemini_response_schema(BOUNDED)
    assert rewrite.schema["properties"] == {
        "n": {"type": "INTEGER", "minimum": 5, "maximum": 9},
        "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "minItems": 2, "maxItems": 4},
    }
    # `maxItems` is on Google's list of honoured fields: no note of its own.
    assert notes(rewrite) == [
        hint_note("minimum", "/properties/n"),
        hint_note("maximum", "/properties/n"),
        hint_note("minItems", "/properties/tags"),
    ]
    assert not rewrite.exact


def test_response_json_schema_enforces_the_same_bounds() -> None:
    rewrite = gemini_json_schema(BOUNDED)
    assert rewrite.schema["properties"] == BOUNDED["properties"]
    assert notes(rewrite) == []


@pytest.mark.parametrize(
    ("node", "sent", "note"),
    [
        ({"type": "integer", "exclusiveMinimum": 1}, {"type": "INTEGER", "minimum": 2}, "min"),
        ({"type": "number", "exclusiveMaximum": 1.5}, {"type": "NUMBER", "maximum": 1.5}, "max"),
        ({"type": "array", "items": {"type": "string"}, "minItems": 0}, None, ""),
        ({"type": "array", "items": {"type": "string"}, "maxItems": 3}, None, ""),
    ],
    ids=["exclusive_integer", "exclusive_number", "min_items_zero", "max_items"],
)
def test_response_schema_notes_each_unhonoured_bound_once(
    node: dict[str, Any], sent: dict[str, Any] | None, note: str
) -> None:
    rewrite = gemini_response_schema(node)
    if note == "min":
        assert notes(rewrite) == [hint_note("exclusiveMinimum", "/", " as `minimum`")]
    elif note == "max":  # one note, not a second for the inclusive bound as well
        assert notes(rewrite) == [hint_note("exclusiveMaximum", "/", " as `maximum`")]
    else:  # honoured, or asking for nothing
        assert notes(rewrite) == []
    if sent is not None:
        assert rewrite.schema == sent


class Bounded(BaseModel):
    n: Annotated[int, Field(ge=5, le=9)]
    tags: Annotated[list[str], Field(min_length=2, max_length=4)]


def test_bounds_are_reported_approximate_on_gemini_1_5_and_exact_on_2_0() -> None:
    prefix = "the schema of `Bounded` was approximated: "
    tail = ": Google does not list it as honoured (it is sent, as a hint)"
    assert plan_of("gemini", "gemini-1.5-flash", Bounded) == (
        "approximate",
        [
            f"{prefix}`maximum` is not enforced by Gemini responseSchema at `Bounded.n`{tail}",
            f"{prefix}`minimum` is not enforced by Gemini responseSchema at `Bounded.n`{tail}",
            f"{prefix}`minItems` is not enforced by Gemini responseSchema at `Bounded.tags`{tail}",
        ],
    )
    assert plan_of("gemini", "gemini-2.0-flash", Bounded) == ("exact", [])
