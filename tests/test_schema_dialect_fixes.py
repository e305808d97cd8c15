"""Anthropic's and Gemini's dialects on an object closed to other keys that requires a name it
does not declare (no object satisfies it), and `type_schema` on a type its build refuses."""

from __future__ import annotations

import json
import traceback
from typing import Annotated, Any
from unittest import mock

import pytest
from pydantic import AliasPath, BaseModel, ConfigDict, Field

import allama
import allama.schema._types as types_module
from allama import ChatRequest, ExtractionMode, Extractor, UnsupportedError, UnsupportedPolicy
from allama.schema import type_schema
from allama.schema._dialects import anthropic, gemini_json_schema, gemini_response_schema
from allama.schema._rewrite import Rewrite


def notes(rewrite: Rewrite) -> list[tuple[str, str, str]]:
    return [(n.kind.value, n.pointer, n.message) for n in rewrite.notes]


# The corpus's Github_easy/o27044.json: a typo requires `color` where `colors` is declared.
THEME: dict[str, Any] = {
    "type": "object",
    "properties": {"colors": {"type": "string", "enum": ["dark", "light"]}},
    "required": ["color"],
}
REMOVED = "`required` was removed at `/`: it names properties the object does not declare"


@pytest.mark.parametrize("closure", [{}, {"additionalProperties": False}])
def test_anthropic_reports_a_closed_object_requiring_an_undeclared_name(
    closure: dict[str, Any],
) -> None:
    rewrite = anthropic({**THEME, **closure})
    assert notes(rewrite) == [
        ("unsupported", "/", "the object at `/` requires `color`, which it does not declare")
    ]
    assert not rewrite.exact
    assert not rewrite.strict_representable


@pytest.mark.parametrize("closure", [{}, {"additionalProperties": False}])
def test_gemini_json_schema_removes_the_undeclared_names_with_a_note(
    closure: dict[str, Any],
) -> None:
    rewrite = gemini_json_schema({**THEME, **closure})
    assert notes(rewrite) == [("approximated", "/", REMOVED)]
    assert rewrite.schema == {
        "type": "object",
        "properties": {"colors": {"type": "string", "enum": ["dark", "light"]}},
        "additionalProperties": False,
    }


def test_gemini_json_schema_keeps_the_declared_required_names() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "z", "b"],
    }
    rewrite = gemini_json_schema(schema)
    assert notes(rewrite) == [("approximated", "/", REMOVED)]
    assert rewrite.schema["required"] == ["a", "b"]


def test_a_nested_object_is_named_where_it_is() -> None:
    schema = {
        "type": "object",
        "properties": {"theme": THEME},
        "required": ["theme"],
    }
    assert notes(anthropic(schema)) == [
        (
            "unsupported",
            "/properties/theme",
            "the object at `/properties/theme` requires `color`, which it does not declare",
        )
    ]
    assert notes(gemini_json_schema(schema)) == [
        (
            "approximated",
            "/properties/theme",
            "`required` was removed at `/properties/theme`: it names properties the object "
            "does not declare",
        )
    ]


def test_an_object_open_to_other_keys_may_require_an_undeclared_one() -> None:
    # `color` can be one of the other keys: satisfiable, nothing to say about `required`.
    schema = {**THEME, "additionalProperties": {"type": "string"}}
    rewrite = gemini_json_schema(schema)
    assert rewrite.exact
    assert rewrite.schema["required"] == ["color"]
    assert rewrite.schema["additionalProperties"] == {"type": "string"}
    opened = anthropic({**THEME, "additionalProperties": True})
    assert notes(opened) == [
        (
            "unsupported",
            "/",
            "the subschema at `/` is an object open to other keys, which Anthropic strict "
            "mode cannot enforce",
        )
    ]


def test_gemini_response_schema_still_removes_them() -> None:
    rewrite = gemini_response_schema(THEME)
    assert notes(rewrite) == [("approximated", "/", REMOVED)]
    assert rewrite.schema == {
        "type": "OBJECT",
        "properties": {"colors": {"type": "STRING", "enum": ["dark", "light"]}},
    }


class Theme(BaseModel):
    """A type whose schema requires a name the model does not declare (`colors` has a
    default: an override leaving a field validation requires out of `required` is refused
    before any dialect sees it)."""

    model_config = ConfigDict(json_schema_extra={"required": ["color"]})
    colors: str = "dark"


UNDECLARED = "the object at `Theme` requires `color`, which it does not declare"


def test_anthropic_extraction_falls_back_and_goes_without_strict() -> None:
    provider = allama.provider("anthropic", api_key="k", base_url="http://127.0.0.1:9")
    plan = Extractor().plan(provider, Theme, ChatRequest("claude-sonnet-4-5").user("x"))
    assert plan.mode is ExtractionMode.FORCED_TOOL
    assert plan.enforcement.value == "not_enforced"
    assert plan.auto_fallback is not None
    assert plan.auto_fallback.message == (
        "cannot send `response_format`: Anthropic cannot enforce the schema of `Theme` in "
        f"`output_config.format`: {UNDECLARED}"
    )
    assert [w.message for w in plan.degradations] == [
        f"the schema of `Theme` is not strict-representable: {UNDECLARED}; it goes without `strict`"
    ]
    strict = ChatRequest("claude-sonnet-4-5", unsupported_policy=UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError, match="forced-tool mode was refused too"):
        Extractor().plan(provider, Theme, strict.user("x"))


def test_gemini_extraction_is_approximate_and_says_why() -> None:
    provider = allama.provider("gemini", api_key="k", base_url="http://127.0.0.1:9")
    plan = Extractor().plan(provider, Theme, ChatRequest("gemini-2.5-flash").user("x"))
    assert plan.mode is ExtractionMode.NATIVE
    assert plan.enforcement.value == "approximate"
    assert [w.message for w in plan.degradations] == [
        "the schema of `Theme` was approximated: `required` was removed at `Theme`: it names "
        "properties the object does not declare"
    ]


# `type_schema`: the build's own refusal is raised once, the type built once.


class ReadByPath(BaseModel):
    city: str = Field(validation_alias=AliasPath("addr", "city"))


def test_a_refused_type_is_built_once_and_its_error_raised_once() -> None:
    real = types_module._build
    with (
        mock.patch.object(types_module, "_build", side_effect=real) as build,
        pytest.raises(TypeError, match="cannot extract `ReadByPath`") as raised,
    ):
        type_schema(ReadByPath)
    assert build.call_count == 1
    assert raised.value.__context__ is None
    text = "".join(traceback.format_exception(raised.value))
    assert text.count("cannot extract `ReadByPath`") == 1


def test_an_unhashable_type_expression_is_still_built() -> None:
    unhashable = Annotated[int, {"note": 1}]
    with pytest.raises(TypeError):
        hash(unhashable)
    assert type_schema(unhashable).schema == {"type": "integer"}


# Gemini's `propertyOrdering`: the caller's kept on both surfaces, a note where it is not

ORDERED: dict[str, Any] = {
    "type": "object",
    "properties": {"b": {"type": "string"}, "a": {"type": "string"}},
    "required": ["b", "a"],
    "propertyOrdering": ["a", "b"],
}


def test_gemini_json_schema_keeps_the_callers_property_ordering() -> None:
    rewrite = gemini_json_schema(ORDERED)
    assert rewrite.schema == {
        "type": "object",
        "properties": {"b": {"type": "string"}, "a": {"type": "string"}},
        "required": ["b", "a"],
        "additionalProperties": False,
        "propertyOrdering": ["a", "b"],
    }
    assert notes(rewrite) == []


def test_gemini_response_schema_keeps_the_callers_property_ordering() -> None:
    rewrite = gemini_response_schema(ORDERED)
    assert rewrite.schema == {
        "type": "OBJECT",
        "properties": {"b": {"type": "STRING"}, "a": {"type": "STRING"}},
        "required": ["b", "a"],
        "propertyOrdering": ["a", "b"],
    }
    assert notes(rewrite) == []


def test_a_nested_objects_ordering_and_one_of_a_nullable_object_are_kept() -> None:
    inner = {
        "type": ["object", "null"],
        "properties": {"y": {"type": "integer"}, "x": {"type": "integer"}},
        "required": ["y", "x"],
        "propertyOrdering": ["x", "y"],
    }
    schema = {"type": "object", "properties": {"o": inner}, "required": ["o"]}
    sent = gemini_response_schema(schema)
    assert sent.schema["properties"]["o"] == {
        "type": "OBJECT",
        "properties": {"y": {"type": "INTEGER"}, "x": {"type": "INTEGER"}},
        "required": ["y", "x"],
        "propertyOrdering": ["x", "y"],
        "nullable": True,
    }
    assert gemini_json_schema(schema).schema["properties"]["o"]["propertyOrdering"] == ["x", "y"]


@pytest.mark.parametrize(
    ("ordering", "why", "sent"),
    [
        (["c"], "does not name every property", ["c", "b", "a"]),
        (["a", "z", "c", "b"], "names properties the object does not declare", ["a", "c", "b"]),
        (["a", "c", "b", "a"], "names a property more than once", ["a", "c", "b"]),
        ("a,b,c", "is not a list of property names", ["b", "a", "c"]),
        (["a", 1, "b", "c"], "is not a list of property names", ["a", "b", "c"]),
    ],
)
@pytest.mark.parametrize("dialect", [gemini_json_schema, gemini_response_schema])
def test_an_ordering_that_does_not_name_each_property_once_is_sent_completed_with_a_note(
    dialect: Any, ordering: Any, why: str, sent: list[str]
) -> None:
    schema = {
        "type": "object",
        "properties": {"b": {"type": "string"}, "a": {"type": "string"}, "c": {"type": "string"}},
        "propertyOrdering": ordering,
    }
    rewrite = dialect(schema)
    assert rewrite.schema["propertyOrdering"] == sent
    message = f"`propertyOrdering` at `/` {why}: it was sent as {json.dumps(sent)}"
    assert notes(rewrite) == [("approximated", "/", message)]
    assert rewrite.strict_representable


@pytest.mark.parametrize("dialect", [gemini_json_schema, gemini_response_schema])
def test_an_ordering_beside_no_property_is_removed_with_a_note(dialect: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "propertyOrdering": ["q"]}},
        "required": ["s"],
    }
    rewrite = dialect(schema)
    assert "propertyOrdering" not in rewrite.schema["properties"]["s"]
    assert notes(rewrite) == [
        (
            "approximated",
            "/properties/s",
            "`propertyOrdering` was removed at `/properties/s`: no properties are sent beside it",
        )
    ]


def test_an_object_without_type_keeps_its_ordering_on_its_object_branch() -> None:
    schema = {
        "properties": {"b": {"type": "string"}, "a": {"type": "string"}},
        "propertyOrdering": ["a", "b"],
    }
    rewrite = gemini_response_schema(schema)
    (branch,) = [b for b in rewrite.schema["anyOf"] if b["type"] == "OBJECT"]
    assert branch["propertyOrdering"] == ["a", "b"]
    assert not any("propertyOrdering" in n.message for n in rewrite.notes)
