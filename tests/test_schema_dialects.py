"""Each dialect on the schemas users meet first (pydantic's), on bad input, and at its limits."""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, Json, create_model

from _schema_support import DIALECTS
from allama.schema._dialects import (
    anthropic,
    gemini_json_schema,
    gemini_response_schema,
    grammar_engine,
    json_object_fallback,
    openai_strict,
    passthrough,
)
from allama.schema._errors import SchemaError
from allama.schema._rewrite import Rewrite, SchemaNote
from allama.types import WarningKind

APPROXIMATED, UNSUPPORTED = WarningKind.APPROXIMATED, WarningKind.UNSUPPORTED


def outcome(rewrite: Rewrite) -> str:
    """How extraction reports it: exact, approximate, or not enforced."""
    kinds = {note.kind for note in rewrite.notes}
    if UNSUPPORTED in kinds:
        return "not_enforced"
    return "approximate" if kinds else "exact"


def notes(rewrite: Rewrite) -> list[tuple[str, str, str]]:
    return [(n.kind.value, n.pointer, n.message) for n in rewrite.notes]


class Color(Enum):
    RED = "red"
    GREEN = "green"


class Level(IntEnum):
    LOW = 1
    HIGH = 2


class Contact(BaseModel):
    email: str
    phone: str | None = None


class Person(BaseModel):
    name: str
    age: Annotated[int, Field(ge=0)]
    nickname: str | None = None
    score: int = 0
    contact: Contact


class Node(BaseModel):
    value: int
    children: list[Node] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


class Pet(BaseModel):
    pet: Cat | Dog = Field(discriminator="kind")


def wrapped(tp: Any, default: Any = ...) -> dict[str, Any]:
    """The schema of a model with one field `value: tp`, the shape extraction sends."""
    model = create_model("Wrapper", value=(tp, default))
    return model.model_json_schema()


# ----- the seed's table: strings, unsigned integers, maps

SEED_TYPES = {"string": str, "unsigned": Annotated[int, Field(ge=0)], "map": dict[str, int]}
SEED_TABLE = {
    "openai_strict": ("exact", "exact", "not_enforced"),
    "openai_strict_azure_legacy": ("exact", "approximate", "not_enforced"),
    "anthropic": ("exact", "approximate", "not_enforced"),
    "gemini_json_schema": ("exact", "exact", "exact"),
    # responseSchema takes `minimum` but Google does not list it as honoured
    "gemini_response_schema": ("exact", "approximate", "not_enforced"),
    "grammar_engine": ("exact", "exact", "exact"),
    "passthrough": ("approximate", "approximate", "approximate"),
    "json_object_fallback": ("not_enforced", "not_enforced", "not_enforced"),
}


@pytest.mark.parametrize("name", sorted(SEED_TABLE))
def test_what_each_dialect_reports_for_the_seed_types(name: str) -> None:
    got = tuple(outcome(DIALECTS[name](wrapped(tp))) for tp in SEED_TYPES.values())
    assert got == SEED_TABLE[name]


# ----- the ordinary pydantic cases, by outcome

CASES: dict[str, dict[str, Any]] = {
    "optional": wrapped(str | None, None),
    "default": wrapped(int, 3),
    "nested": wrapped(Contact),
    "list_of_models": wrapped(list[Contact]),
    "map": wrapped(dict[str, Contact]),
    "literal": wrapped(Literal["a", "b"]),
    "enum": wrapped(Color),
    "int_enum": wrapped(Level),
    "union": wrapped(int | str),
    "discriminated_union": Pet.model_json_schema(),
    "recursive": Node.model_json_schema(),
    "constrained_int": wrapped(Annotated[int, Field(ge=1, le=5)]),
    "constrained_str": wrapped(Annotated[str, Field(min_length=2, max_length=5)]),
    "pattern": wrapped(Annotated[str, Field(pattern=r"^[A-Z]{3}$")]),
}
E, A, N = "exact", "approximate", "not_enforced"
OUTCOMES: dict[str, tuple[str, ...]] = {
    # optional default nested list map literal enum int_enum union disc rec c_int c_str pattern
    "openai_strict": (E, E, E, E, N, E, E, E, E, E, E, E, A, E),
    "openai_strict_azure_legacy": (E, E, E, E, N, E, E, E, E, E, E, A, A, A),
    "anthropic": (E, E, E, E, N, E, E, E, E, E, N, A, A, E),
    "gemini_json_schema": (E, E, E, E, E, E, E, E, E, E, N, E, A, A),
    "gemini_response_schema": (E, E, E, E, N, E, E, A, A, A, N, A, A, A),
    "grammar_engine": (E, E, E, E, E, E, E, E, E, E, E, E, E, E),
}


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_the_ordinary_pydantic_cases(name: str) -> None:
    got = {case: outcome(DIALECTS[name](schema)) for case, schema in CASES.items()}
    assert got == dict(zip(CASES, OUTCOMES[name], strict=True))


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_the_json_a_string_holds_is_enforced_by_no_dialect(name: str) -> None:
    # `Json[list[int]]`: a string to JSON Schema, with the JSON it holds in `contentSchema`,
    # which the type checks and no provider does.
    rewrite = DIALECTS[name](wrapped(Json[list[int]]))
    assert outcome(rewrite) == "approximate"
    assert [message for _, _, message in notes(rewrite) if "contentSchema" in message] == [
        f"`contentSchema` was removed at `/properties/value`: {rewrite_provider(name)} does "
        "not enforce the JSON in a string"
    ]
    # Beside no string it holds nothing, an annotation like any other.
    number = {"type": "object", "properties": {"n": {"type": "integer", "contentSchema": {}}}}
    assert outcome(DIALECTS[name]({**number, "required": ["n"]})) == "exact"


def rewrite_provider(name: str) -> str:
    return {
        "openai_strict": "OpenAI strict mode",
        "openai_strict_azure_legacy": "Azure OpenAI strict mode",
        "anthropic": "Anthropic strict mode",
        "gemini_json_schema": "Gemini responseJsonSchema",
        "gemini_response_schema": "Gemini responseSchema",
        "grammar_engine": "the grammar",
    }[name]


# ----- exact rewrites of a few


def test_openai_makes_optional_properties_required_and_nullable() -> None:
    rewrite = openai_strict(Person.model_json_schema())
    assert rewrite.exact
    assert rewrite.schema == {
        "type": "object",
        "title": "Person",
        "properties": {
            "name": {"title": "Name", "type": "string"},
            "age": {"minimum": 0, "title": "Age", "type": "integer"},
            "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Nickname"},
            "score": {"title": "Score", "type": ["integer", "null"]},
            "contact": {"$ref": "#/$defs/Contact"},
        },
        "required": ["name", "age", "nickname", "score", "contact"],
        "additionalProperties": False,
        "$defs": {
            "Contact": {
                "type": "object",
                "title": "Contact",
                "properties": {
                    "email": {"title": "Email", "type": "string"},
                    "phone": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Phone"},
                },
                "required": ["email", "phone"],
                "additionalProperties": False,
            }
        },
    }


def test_openai_keeps_recursion_and_inlines_the_root() -> None:
    rewrite = openai_strict(Node.model_json_schema())
    body = {
        "type": "object",
        "title": "Node",
        "properties": {
            "value": {"title": "Value", "type": "integer"},
            "children": {
                "items": {"$ref": "#/$defs/Node"},
                "title": "Children",
                "type": ["array", "null"],
            },
        },
        "required": ["value", "children"],
        "additionalProperties": False,
    }
    assert rewrite.exact
    assert rewrite.schema == {**body, "$defs": {"Node": body}}


def test_openai_a_discriminated_union_is_an_exact_anyof() -> None:
    rewrite = openai_strict(Pet.model_json_schema())
    assert rewrite.exact
    assert rewrite.schema["properties"]["pet"] == {
        "anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
        "title": "Pet",
    }
    assert rewrite.schema["$defs"]["Cat"]["properties"]["kind"] == {
        "title": "Kind",
        "type": "string",
        "enum": ["cat"],
    }


def test_openai_a_oneof_that_may_overlap_is_widened_to_anyof() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"oneOf": [{"type": "integer"}, {"type": "number"}]}},
        "required": ["n"],
    }
    rewrite = openai_strict(schema)
    assert rewrite.schema["properties"]["n"] == {"anyOf": [{"type": "integer"}, {"type": "number"}]}
    assert notes(rewrite) == [
        (
            "approximated",
            "/properties/n/oneOf",
            "`oneOf` at `/properties/n/oneOf` became `anyOf`: "
            "a value may match more than one branch",
        )
    ]


def test_openai_a_map_is_not_strict_representable_and_stays_as_wide() -> None:
    rewrite = openai_strict(wrapped(dict[str, int]))
    assert rewrite.schema["properties"]["value"] == {
        "additionalProperties": {"type": "integer"},
        "title": "Value",
        "type": "object",
    }
    assert notes(rewrite) == [
        (
            "unsupported",
            "/properties/value",
            "the subschema at `/properties/value` is a map, "
            "which OpenAI strict mode cannot enforce",
        )
    ]
    assert not rewrite.strict_representable


def test_openai_the_root_must_be_an_object() -> None:
    rewrite = openai_strict({"type": "array", "items": {"type": "string"}})
    assert notes(rewrite) == [
        ("unsupported", "/", "the root at `/` is not an object, which OpenAI strict mode requires")
    ]


OBJECT_ROOT_DIALECTS = [
    *(
        pytest.param(lambda s, p=p: openai_strict(s, profile=p), id=f"openai_{p}")
        for p in ("current", "azure_legacy", "fine_tuned", "xai", "deepseek", "groq")
    ),
    pytest.param(anthropic, id="anthropic"),
]


@pytest.mark.parametrize("dialect", OBJECT_ROOT_DIALECTS)
def test_a_root_typed_as_a_list_of_one_object_is_an_object_root(dialect: Any) -> None:
    # Valid JSON Schema (corpus o13017, o72529): the same type, sent in the form the
    # provider checks its root for; nested, the list is kept as it was.
    inner = {"type": ["object"], "properties": {"b": {"type": "string"}}, "required": ["b"]}
    rewrite = dialect(
        {"type": ["object"], "properties": {"a": inner}, "required": ["a"]},
    )
    assert rewrite.schema == {
        "type": "object",
        "properties": {"a": {**inner, "additionalProperties": False}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert notes(rewrite) == []
    assert rewrite.strict_representable


@pytest.mark.parametrize(
    ("dialect", "provider"),
    [
        pytest.param(openai_strict, "OpenAI strict mode", id="openai"),
        pytest.param(
            lambda s: openai_strict(s, profile="azure_legacy"),
            "Azure OpenAI strict mode",
            id="azure_legacy",
        ),
        pytest.param(anthropic, "Anthropic strict mode", id="anthropic"),
    ],
)
@pytest.mark.parametrize(
    ("root", "may_be"),
    [
        pytest.param({"type": ["object", "null"]}, "`null`", id="object_or_null"),
        pytest.param(
            {"type": ["null", "array", "object"], "items": {"type": "string"}},
            "an array or `null`",
            id="object_array_or_null",
        ),
        pytest.param({"anyOf": [{"type": "object"}, {"type": "null"}]}, "`null`", id="any_of"),
    ],
)
def test_a_root_that_may_be_null_is_refused_as_one_that_may_be_null(
    dialect: Any, provider: str, root: dict[str, Any], may_be: str
) -> None:
    # An object or `null` is not an object alone: refused, but not as "not an object".
    props = {"properties": {"a": {"type": "string"}}, "required": ["a"]}
    if "anyOf" in root:
        root = {"anyOf": [{**root["anyOf"][0], **props}, root["anyOf"][1]]}
    else:
        root = {**root, **props}
    rewrite = dialect(root)
    assert notes(rewrite) == [
        (
            "unsupported",
            "/",
            f"the root at `/` may be {may_be} as well as an object, where {provider} requires "
            "only an object",
        )
    ]
    assert not rewrite.strict_representable


@pytest.mark.parametrize("dialect", [openai_strict, anthropic])
def test_a_root_of_a_string_or_null_is_still_not_an_object(dialect: Any) -> None:
    rewrite = dialect({"type": ["string", "null"]})
    provider = "Anthropic" if dialect is anthropic else "OpenAI"
    assert notes(rewrite) == [
        (
            "unsupported",
            "/",
            f"the root at `/` is not an object, which {provider} strict mode requires",
        )
    ]


def test_openai_azure_legacy_removes_what_2024_strict_mode_rejected() -> None:
    schema = wrapped(Annotated[str, Field(pattern=r"^[a-z]+$")])
    assert openai_strict(schema).exact
    rewrite = openai_strict(schema, profile="azure_legacy")
    assert rewrite.schema["properties"]["value"] == {"title": "Value", "type": "string"}
    assert notes(rewrite) == [
        ("approximated", "/properties/value", "`pattern` was removed at `/properties/value`")
    ]


def test_openai_format_outside_the_list_is_removed() -> None:
    rewrite = openai_strict(wrapped(Annotated[str, Field(json_schema_extra={"format": "uri"})]))
    assert notes(rewrite) == [
        (
            "approximated",
            "/properties/value",
            "`format` was removed at `/properties/value`: "
            "OpenAI strict mode does not enforce `uri`",
        )
    ]


def test_anthropic_removes_numeric_bounds_and_lengths() -> None:
    rewrite = anthropic(Person.model_json_schema())
    assert rewrite.schema["properties"]["age"] == {"title": "Age", "type": "integer"}
    assert rewrite.schema["required"] == ["name", "age", "contact"]
    assert rewrite.schema["additionalProperties"] is False
    assert notes(rewrite) == [
        ("approximated", "/properties/age", "`minimum` was removed at `/properties/age`")
    ]


def test_anthropic_refuses_recursion_and_maps() -> None:
    assert notes(anthropic(Node.model_json_schema())) == [
        (
            "unsupported",
            "/$defs/Node/properties/children/items",
            "the subschema at `/$defs/Node/properties/children/items` is recursive, "
            "which Anthropic strict mode cannot enforce",
        )
    ]
    assert outcome(anthropic(wrapped(dict[str, str]))) == "not_enforced"


def test_anthropic_keeps_min_items_of_one_and_lowers_larger_ones() -> None:
    schema = wrapped(Annotated[list[int], Field(min_length=3)])
    rewrite = anthropic(schema)
    assert rewrite.schema["properties"]["value"]["minItems"] == 1
    assert notes(rewrite) == [
        ("approximated", "/properties/value", "`minItems` was lowered to 1 at `/properties/value`")
    ]
    assert anthropic(wrapped(Annotated[list[int], Field(min_length=1)])).exact


def test_anthropic_removes_a_pattern_with_lookahead() -> None:
    value = {"type": "string", "pattern": r"^(?=a)[a-z]+$"}
    rewrite = anthropic({"type": "object", "properties": {"value": value}, "required": ["value"]})
    assert rewrite.schema["properties"]["value"] == {"type": "string"}
    assert notes(rewrite)[0][2] == (
        "`pattern` was removed at `/properties/value`: "
        "it uses regex features the grammar does not support"
    )


def test_gemini_response_schema_speaks_openapi() -> None:
    rewrite = gemini_response_schema(Person.model_json_schema())
    assert [n.message for n in rewrite.notes] == [
        "`minimum` is not enforced by Gemini responseSchema at `/properties/age`: "
        "Google does not list it as honoured (it is sent, as a hint)"
    ]
    assert rewrite.schema == {
        "type": "OBJECT",
        "title": "Person",
        "properties": {
            "name": {"title": "Name", "type": "STRING"},
            "age": {"minimum": 0, "title": "Age", "type": "INTEGER"},
            "nickname": {"title": "Nickname", "type": "STRING", "nullable": True, "default": None},
            "score": {"title": "Score", "type": "INTEGER", "default": 0},
            "contact": {
                "type": "OBJECT",
                "title": "Contact",
                "properties": {
                    "email": {"title": "Email", "type": "STRING"},
                    "phone": {
                        "title": "Phone",
                        "type": "STRING",
                        "nullable": True,
                        "default": None,
                    },
                },
                "required": ["email"],
                "propertyOrdering": ["email", "phone"],
            },
        },
        "required": ["name", "age", "contact"],
        "propertyOrdering": ["name", "age", "nickname", "score", "contact"],
    }


def test_gemini_response_schema_cuts_recursion_not_enforced() -> None:
    rewrite = gemini_response_schema(Node.model_json_schema())
    assert rewrite.schema["properties"]["children"] == {
        "items": {},
        "title": "Children",
        "type": "ARRAY",
        "default": [],
    }
    # `items: {}` has no `type`, which Gemini's OpenAPI schema refuses: not enforced.
    assert notes(rewrite) == [
        (
            "unsupported",
            "/$defs/Node/properties/children/items",
            "the subschema at `/$defs/Node/properties/children/items` is recursive, "
            "which Gemini responseSchema cannot enforce",
        ),
        (
            "approximated",
            "/$defs/Node/properties/children/items",
            "the recursion at `/$defs/Node/properties/children/items` was cut: "
            "below it the value is not constrained",
        ),
    ]


def test_gemini_response_schema_lists_strings_only() -> None:
    rewrite = gemini_response_schema(wrapped(Level))
    assert rewrite.schema["properties"]["value"] == {"title": "Level", "type": "INTEGER"}
    assert notes(rewrite) == [
        (
            "approximated",
            "/$defs/Level/enum",
            "`enum` at `/$defs/Level/enum` was widened to the types of values "
            "Gemini responseSchema cannot list",
        )
    ]


def test_gemini_json_schema_keeps_maps_and_bounds() -> None:
    rewrite = gemini_json_schema(wrapped(dict[str, Annotated[int, Field(ge=0, lt=10)]]))
    assert rewrite.exact
    assert rewrite.schema["properties"]["value"] == {
        "additionalProperties": {"maximum": 9, "minimum": 0, "type": "integer"},
        "title": "Value",
        "type": "object",
    }


def test_gemini_json_schema_an_exclusive_bound_on_a_number_is_widened() -> None:
    rewrite = gemini_json_schema({"type": "number", "exclusiveMinimum": 0.5})
    assert rewrite.schema == {"type": "number", "minimum": 0.5}
    assert notes(rewrite) == [
        ("approximated", "/", "`exclusiveMinimum` became an inclusive `minimum` at `/`")
    ]


def test_grammar_engine_sends_the_schema_whole_and_says_what_it_ignores() -> None:
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "code": {"type": "string", "pattern": "[A-Z]+"},
            "price": {"type": "number", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        },
    }
    rewrite = grammar_engine(schema)
    expected = {**schema, "properties": {**schema["properties"], "code": {"type": "string"}}}
    assert rewrite.schema == expected
    assert notes(rewrite) == [
        (
            "approximated",
            "/properties/code",
            "`pattern` was removed at `/properties/code`: the grammar needs `^` and `$` anchors",
        ),
        (
            "approximated",
            "/properties/email",
            "`format` `email` is not enforced by the grammar at `/properties/email`",
        ),
        (
            "approximated",
            "/properties/price",
            "`minimum` is not enforced by the grammar at `/properties/price` (only integers)",
        ),
        (
            "approximated",
            "/properties/tags",
            "`uniqueItems` is not enforced by the grammar at `/properties/tags`",
        ),
    ]


def test_passthrough_and_json_object_fallback() -> None:
    schema = Person.model_json_schema()
    sent = passthrough(schema)
    assert sent.schema == schema
    assert sent.notes == (
        SchemaNote(
            APPROXIMATED,
            "/",
            "the schema at `/` was sent unchecked: the endpoint does not report which "
            "keywords it enforces",
        ),
    )
    fallback = json_object_fallback(schema)
    assert fallback.schema == schema
    assert [n.kind for n in fallback.notes] == [UNSUPPORTED]
    assert not fallback.strict_representable


# ----- normalizations that keep a rewrite exact


def test_a_ref_with_siblings_is_merged_and_an_allof_of_one_too() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A", "description": "the a"},
            "b": {"allOf": [{"$ref": "#/$defs/A"}], "description": "the b"},
        },
        "required": ["a", "b"],
        "$defs": {"A": {"type": "string", "enum": ["x", "y"]}},
    }
    for name in ("openai_strict", "anthropic", "gemini_json_schema"):
        rewrite = DIALECTS[name](schema)
        assert rewrite.exact, name
        assert rewrite.schema["properties"] == {
            "a": {"type": "string", "enum": ["x", "y"], "description": "the a"},
            "b": {"type": "string", "enum": ["x", "y"], "description": "the b"},
        }


def test_draft_7_ignores_the_siblings_of_a_ref() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/A", "maxLength": 1}},
        "required": ["a"],
        "definitions": {"A": {"type": "string"}},
    }
    rewrite = openai_strict(schema)
    assert rewrite.exact
    assert rewrite.schema["properties"]["a"] == {"$ref": "#/$defs/A"}
    assert rewrite.schema["$defs"] == {"A": {"type": "string"}}


def test_draft_4_boolean_exclusive_bounds_become_numeric() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "exclusiveMinimum": True}},
        "required": ["n"],
    }
    rewrite = openai_strict(schema)
    assert rewrite.exact
    assert rewrite.schema["properties"]["n"] == {"type": "integer", "exclusiveMinimum": 0}
    assert gemini_json_schema(schema).schema["properties"]["n"] == {
        "type": "integer",
        "minimum": 1,
    }


def test_a_const_becomes_a_one_value_enum() -> None:
    rewrite = gemini_response_schema({"type": "string", "const": "ok"})
    assert rewrite.exact
    assert rewrite.schema == {"type": "STRING", "enum": ["ok"]}


# ----- limits


def _flat(count: int, *, optional: bool = False) -> dict[str, Any]:
    props = {f"p{i}": {"type": "string"} for i in range(count)}
    return {
        "type": "object",
        "properties": props,
        "required": [] if optional else list(props),
    }


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    for _ in range(levels - 1):
        schema = {"type": "object", "properties": {"in": schema}, "required": ["in"]}
    return schema


def test_openai_limits() -> None:
    assert openai_strict(_flat(5000)).exact
    assert notes(openai_strict(_flat(5001))) == [
        (
            "unsupported",
            "/",
            "the schema at `/` has 5001 object properties, "
            "more than the 5000 OpenAI strict mode allows",
        )
    ]
    assert openai_strict(_nested(10)).exact
    deepest = "/properties/in" * 10
    assert notes(openai_strict(_nested(11))) == [
        (
            "unsupported",
            deepest,
            f"the object at `{deepest}` is 11 levels deep, more than the 10 OpenAI strict "
            "mode allows: nest fewer objects along that path",
        )
    ]
    big_enum = {"type": "object", "properties": {"e": {"enum": list(range(1001))}}}
    assert "1001 enum values" in notes(openai_strict(big_enum))[0][2]
    words = {"type": "object", "properties": {"e": {"enum": [f"{i:060d}" for i in range(251)]}}}
    assert notes(openai_strict(words))[0][2] == (
        "the enum at `/properties/e/anyOf/0` has 15060 characters, more than the 15000 OpenAI "
        "strict mode allows in an enum of more than 250 values: shorten its values or split it"
    )


def test_azure_legacy_limits() -> None:
    assert openai_strict(_nested(5), profile="azure_legacy").exact
    rewrite = openai_strict(_nested(6), profile="azure_legacy")
    assert [n.kind for n in rewrite.notes] == [UNSUPPORTED]
    assert "more than the 5 Azure OpenAI strict mode allows" in rewrite.notes[0].message
    assert not openai_strict(_flat(101), profile="azure_legacy").exact


def test_anthropic_limits() -> None:
    assert anthropic(_flat(24, optional=True)).exact
    assert notes(anthropic(_flat(25, optional=True))) == [
        (
            "unsupported",
            "/",
            "the schema at `/` has 25 optional properties, "
            "more than the 24 Anthropic strict mode allows per request",
        )
    ]
    unions = {
        "type": "object",
        "properties": {f"u{i}": {"type": ["string", "null"]} for i in range(17)},
        "required": [f"u{i}" for i in range(17)],
    }
    assert "17 unions" in notes(anthropic(unions))[0][2]


# ----- bad input


BAD = [
    ([], "", "the schema at `/` must be a JSON object"),
    ({"type": "strnig"}, "/type", "`type` at `/type` must be a JSON type name or an array of them"),
    (
        {"properties": []},
        "/properties",
        "`properties` at `/properties` must be an object of schemas",
    ),
    (
        {"properties": {"a": {"required": True}}},
        "/properties/a/required",
        "`required` at `/properties/a/required` must be an array of property names",
    ),
    ({"anyOf": []}, "/anyOf", "`anyOf` at `/anyOf` must be a non-empty array of schemas"),
    (
        {"properties": {"a": {"$ref": "#/$defs/Missing"}}},
        "/properties/a/$ref",
        "the `$ref` `#/$defs/Missing` at `/properties/a/$ref` does not resolve in this schema",
    ),
    (
        {"items": {"$ref": "https://example.com/other.json"}},
        "/items/$ref",
        "the `$ref` `https://example.com/other.json` at `/items/$ref` points outside this "
        "schema (not supported)",
    ),
    ({"minimum": float("nan")}, "/minimum", "the number at `/minimum` is not finite"),
    ({"items": 3}, "/items", "the schema at `/items` must be an object or a boolean"),
]


@pytest.mark.parametrize("name", sorted(DIALECTS))
@pytest.mark.parametrize(("schema", "pointer", "message"), BAD)
def test_bad_input_is_a_schema_error_naming_the_place(
    name: str, schema: Any, pointer: str, message: str
) -> None:
    with pytest.raises(SchemaError) as caught:
        DIALECTS[name](schema)
    assert str(caught.value) == message
    assert caught.value.pointer == (pointer or "/")
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_schema_thousands_deep_is_refused_without_recursion_error(name: str) -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = {"type": "array", "items": schema}
    with pytest.raises(SchemaError, match="nests deeper than 128 levels"):
        DIALECTS[name](schema)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_schema_that_contains_itself_is_refused(name: str) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["self"] = schema
    with pytest.raises(SchemaError, match="nests deeper"):
        DIALECTS[name](schema)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_deep_but_reasonable_schema_goes_through(name: str) -> None:
    schema = _nested(60)
    rewrite = DIALECTS[name](schema)
    assert isinstance(rewrite.schema, dict)


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_root_that_refers_to_itself_goes_through(name: str) -> None:
    schema = {
        "type": "object",
        "properties": {"next": {"$ref": "#"}, "value": {"type": "integer"}},
        "required": ["value"],
    }
    rewrite = DIALECTS[name](schema)
    if name == "openai_strict":
        assert rewrite.exact
        assert rewrite.schema["properties"]["next"] == {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
    if name in ("anthropic", "gemini_json_schema", "gemini_response_schema"):
        assert outcome(rewrite) == "not_enforced"


def test_a_ref_chain_that_never_ends_is_refused_or_cut() -> None:
    schema = {
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
        "$ref": "#/$defs/A",
    }
    for name, dialect in DIALECTS.items():
        rewrite = dialect(schema)
        assert isinstance(rewrite.schema, dict), name


def test_the_object_beside_a_union_is_distributed_into_its_branches() -> None:
    schema = {
        "type": "object",
        "properties": {"kind": {"type": "string"}, "note": {"type": "string"}},
        "oneOf": [
            {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}},
            {"properties": {"kind": {"const": "b"}}, "required": ["kind"]},
        ],
    }
    rewrite = anthropic(schema)
    # each branch is one object: the node's properties and the branch's, closed together
    assert rewrite.schema == {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["a"]},
                    "note": {"type": "string"},
                    "x": {"type": "integer"},
                },
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["b"]},
                    "note": {"type": "string"},
                },
                "required": ["kind"],
                "additionalProperties": False,
            },
        ]
    }
    # a value without `kind` could match both branches, so `oneOf` was widened
    assert notes(rewrite) == [
        (
            "approximated",
            "/oneOf",
            "`oneOf` at `/oneOf` became `anyOf`: a value may match more than one branch",
        ),
        (
            "unsupported",
            "/",
            "the root at `/` is not an object, which Anthropic strict mode requires",
        ),
    ]
    openai = openai_strict(
        {"type": "object", "properties": {"wrapped": schema}, "required": ["wrapped"]}
    )
    first = openai.schema["properties"]["wrapped"]["anyOf"][0]
    assert first["required"] == ["kind", "note", "x"]
    assert first["properties"]["note"] == {"type": ["string", "null"]}
    assert outcome(openai) == "approximate"


def test_gemini_response_schema_null_outside_an_enum_stays_out() -> None:
    rewrite = gemini_response_schema({"type": ["string", "null"], "enum": ["a", "b"]})
    assert rewrite.exact
    assert rewrite.schema == {"type": "STRING", "enum": ["a", "b"]}


# ----- the shapes real schemas have and pydantic never writes


def test_an_enum_gets_the_type_of_its_values_and_a_mixed_one_a_branch_per_type() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"enum": ["x", "y"]},
            "b": {"enum": ["x", 1, None]},
            "c": {"const": True},
        },
        "required": ["a", "b", "c"],
    }
    rewrite = openai_strict(schema)
    assert rewrite.exact
    assert rewrite.schema["properties"] == {
        "a": {"type": "string", "enum": ["x", "y"]},
        "b": {
            "anyOf": [
                {"type": "string", "enum": ["x"]},
                {"type": "integer", "enum": [1]},
                {"type": "null"},
            ]
        },
        "c": {"type": "boolean", "enum": [True]},
    }


def test_an_enum_loses_the_values_its_type_rejects() -> None:
    schema = {"type": "string", "enum": ["a", "b", None]}
    assert gemini_response_schema(schema).schema == {"type": "STRING", "enum": ["a", "b"]}
    assert gemini_response_schema(schema).exact  # null was never valid: no `nullable`
    assert openai_strict({"type": "integer", "enum": ["a"]}).notes[0].message == (
        "the subschema at `/` accepts nothing, which OpenAI strict mode cannot express"
    )


def test_a_ref_beside_a_vendor_keyword_is_merged_without_a_note() -> None:
    schema = {
        "type": "object",
        "properties": {"d": {"$ref": "#/$defs/D", "x-order": 1}},
        "required": ["d"],
        "$defs": {"D": {"type": "string", "x-order": 2}},
    }
    for name in ("openai_strict", "anthropic", "gemini_json_schema", "grammar_engine"):
        rewrite = DIALECTS[name](schema)
        assert rewrite.exact, (name, rewrite.notes)
        assert rewrite.schema["properties"]["d"] == {"type": "string"}


def test_allof_parts_lose_only_the_keyword_they_disagree_on() -> None:
    schema = {
        "type": "object",
        "properties": {
            "code": {
                "allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "b$", "maxLength": 9}]
            }
        },
        "required": ["code"],
    }
    rewrite = gemini_json_schema(schema)
    assert rewrite.schema["properties"]["code"] == {"type": "string"}
    rewrite = openai_strict(schema)
    assert rewrite.schema["properties"]["code"] == {"type": "string", "pattern": "^a"}
    assert notes(rewrite) == [
        (
            "approximated",
            "/properties/code/allOf/1",
            "`pattern` was removed at `/properties/code/allOf/1`: "
            "it differs from the same keyword it is merged with",
        ),
        ("approximated", "/properties/code", "`maxLength` was removed at `/properties/code`"),
    ]


def test_allof_parts_make_one_object_with_the_keys_of_all() -> None:
    schema = {
        "type": "object",
        "properties": {
            "v": {
                "allOf": [
                    {"$ref": "#/$defs/Base"},
                    {"properties": {"extra": {"type": "boolean"}}, "required": ["extra"]},
                ]
            }
        },
        "required": ["v"],
        "$defs": {
            "Base": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
            }
        },
    }
    rewrite = anthropic(schema)
    assert rewrite.exact
    assert rewrite.schema["properties"]["v"] == {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "extra": {"type": "boolean"}},
        "required": ["id", "extra"],
        "additionalProperties": False,
    }


def test_a_union_too_wide_to_repeat_its_object_is_widened_with_a_note() -> None:
    props = {f"p{i}": {"type": "string"} for i in range(50)}
    branches = [{"properties": {f"b{i}": {"type": "integer"}}} for i in range(100)]
    schema = {"type": "object", "properties": props, "anyOf": branches}
    rewrite = gemini_json_schema(schema)
    assert set(rewrite.schema["properties"]) == set(props) | {f"b{i}" for i in range(100)}
    assert "anyOf" not in rewrite.schema
    assert notes(rewrite) == [
        (
            "approximated",
            "/anyOf",
            "the union at `/anyOf` is not enforced: it has too many branches to repeat "
            "the object beside it in each, so their properties were added to that object",
        )
    ]


def test_gemini_response_schema_what_it_cannot_express() -> None:
    schema = {
        "type": "object",
        "properties": {
            "open": {"type": "object"},
            "empty": {"type": "object", "properties": {}},
            "list": {"type": "array"},
            "loose": {"properties": {"a": {"type": "string"}}, "required": ["a"]},
            "count": {"type": "integer", "format": "date-time"},
        },
        "required": ["open", "empty", "list", "loose", "count"],
    }
    rewrite = gemini_response_schema(schema)
    props = rewrite.schema["properties"]
    assert props["open"] == {} and props["empty"] == {}
    assert props["list"] == {"type": "ARRAY", "items": {}}
    assert props["count"] == {"type": "INTEGER"}
    assert [branch.get("type") for branch in props["loose"]["anyOf"]] == [
        "OBJECT",
        "ARRAY",
        "STRING",
        "NUMBER",
        "BOOLEAN",
    ]
    assert props["loose"]["anyOf"][0] == {
        "type": "OBJECT",
        "properties": {"a": {"type": "STRING"}},
        "required": ["a"],
        "nullable": True,
    }
    # Each is written in its widest form, but without a `type` where Gemini's OpenAPI schema
    # wants one (400): not enforced.
    assert notes(rewrite) == [
        (
            "unsupported",
            "/properties/open",
            "the subschema at `/properties/open` is an object open to any keys, "
            "which Gemini responseSchema cannot enforce",
        ),
        (
            "unsupported",
            "/properties/empty",
            "the object at `/properties/empty` declares no properties, which Gemini "
            "responseSchema cannot express",
        ),
        (
            "unsupported",
            "/properties/list",
            "the array at `/properties/list` does not constrain its items, which Gemini "
            "responseSchema cannot express",
        ),
        (
            "unsupported",
            "/properties/loose/anyOf/1",
            "the array at `/properties/loose/anyOf/1` does not constrain its items, which "
            "Gemini responseSchema cannot express",
        ),
        (
            "approximated",
            "/properties/loose",
            "`anyOf` is not enforced by Gemini responseSchema at `/properties/loose`: Google "
            "does not list it as honoured (it is sent, as a hint)",
        ),
        (
            "approximated",
            "/properties/count",
            "`format` was removed at `/properties/count`: "
            "Gemini responseSchema takes a `format` on strings only",
        ),
    ]


# ----- annotations


ANNOTATED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "default": 3, "examples": [1, 2]},
        "u": {
            "oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}],
            "discriminator": {"propertyName": "k"},
        },
    },
    "required": ["u"],
    "$defs": {
        "A": {"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
        "B": {"type": "object", "properties": {"k": {"const": "b"}}, "required": ["k"]},
    },
}


@pytest.mark.parametrize(
    ("name", "kept", "dropped"),
    [
        ("openai_strict", {}, ["default", "examples", "discriminator"]),
        ("anthropic", {"default": 3}, ["examples", "discriminator"]),
        ("gemini_json_schema", {"default": 3, "examples": [1, 2]}, ["discriminator"]),
        ("gemini_response_schema", {"default": 3}, ["examples", "discriminator"]),
        ("grammar_engine", {"default": 3, "examples": [1, 2]}, []),
    ],
)
def test_annotations_are_kept_where_the_dialect_takes_them_and_listed_where_not(
    name: str, kept: dict[str, Any], dropped: list[str]
) -> None:
    rewrite = DIALECTS[name](ANNOTATED)
    # an annotation never changes what is accepted (on `responseSchema` the union is sent as
    # an `anyOf`, which Google does not list as honoured there: a hint)
    hints = [note.pointer for note in rewrite.notes if note.message.startswith("`anyOf`")]
    assert len(rewrite.notes) == len(hints)
    assert hints == (["/properties/u"] if name == "gemini_response_schema" else [])
    n = rewrite.schema["properties"]["n"]
    assert {k: v for k, v in n.items() if k in ("default", "examples")} == kept
    provider = {
        "openai_strict": "OpenAI strict mode",
        "anthropic": "Anthropic strict mode",
        "gemini_json_schema": "Gemini responseJsonSchema",
        "gemini_response_schema": "Gemini responseSchema",
    }.get(name, "")
    places = {"discriminator": "/properties/u"}
    expected = [
        f"`{key}` was not sent at `{places.get(key, '/properties/n')}`: {provider} does not take it"
        for key in dropped
    ]
    assert [note.message for note in rewrite.dropped] == expected


def test_refs_beside_annotations_are_merged_to_keep_them_until_that_would_grow_the_schema() -> None:
    item = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    props = {f"p{i:03}": {"$ref": "#/$defs/Item", "description": f"the {i}th"} for i in range(300)}
    schema = {
        "type": "object",
        "properties": props,
        "required": list(props),
        "$defs": {"Item": item},
    }
    rewrite = openai_strict(schema)
    assert rewrite.exact
    out = rewrite.schema["properties"]
    assert out["p000"] == {**item, "description": "the 0th", "additionalProperties": False}
    assert out["p255"]["description"] == "the 255th"
    assert out["p256"] == {"$ref": "#/$defs/Item"}  # 256 merges, then `$ref`s
    assert rewrite.schema["$defs"] == {"Item": {**item, "additionalProperties": False}}
    wrapped = {"allOf": [{"$ref": "#/$defs/Item"}], "description": "d", "default": {"n": 1}}
    schema = {
        "type": "object",
        "properties": {"w": wrapped},
        "required": ["w"],
        "$defs": {"Item": item},
    }
    assert anthropic(schema).schema["properties"]["w"] == {
        **item,
        "description": "d",
        "default": {"n": 1},
        "additionalProperties": False,
    }
