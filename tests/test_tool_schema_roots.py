"""A tool schema whose root is a `$ref` (pydantic's for a recursive model, or a `RootModel`
of a model) is sent with the reference resolved into the root, where the tool API takes an
object root: Anthropic's `input_schema` (400 "input_schema.type: Field required" without
it), Gemini's `parametersJsonSchema`, Ollama's tool `parameters` (whose decoder drops
`$ref`). The caller's own tools as well as extraction's forced tool."""

from __future__ import annotations

import asyncio
import json
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, RootModel

import allama
from _tool_endpoint import ToolEndpoint as Recorder
from _tool_endpoint import sent_schema as _sent_schema
from allama import ChatRequest, ExtractionMode, SchemaEnforcement, ToolChoice, ToolDefinition
from allama.extract._root import object_rooted
from allama.schema._inline import inline_root_ref


class Node(BaseModel):
    name: str
    children: list[Node]


class Person(BaseModel):
    name: str


class People(RootModel[Person]):
    pass


class Colour(Enum):
    RED = "red"
    GREEN = "green"


class Shade(RootModel[Colour]):
    pass


NODE_PROPERTIES = {
    "name": {"title": "Name", "type": "string"},
    "children": {"items": {"$ref": "#/$defs/Node"}, "title": "Children", "type": "array"},
}
NODE_DEF = {
    "properties": NODE_PROPERTIES,
    "required": ["name", "children"],
    "title": "Node",
    "type": "object",
}
NODE_SENT = {
    "$defs": {"Node": NODE_DEF},
    "properties": NODE_PROPERTIES,
    "required": ["name", "children"],
    "title": "Node",
    "type": "object",
}
PERSON_DEF = {
    "properties": {"name": {"title": "Name", "type": "string"}},
    "required": ["name"],
    "title": "Person",
    "type": "object",
}
PEOPLE_SENT = {  # the root's own title over the target's
    "$defs": {"Person": PERSON_DEF},
    "properties": {"name": {"title": "Name", "type": "string"}},
    "required": ["name"],
    "title": "People",
    "type": "object",
}

ANSWER = {"name": "a", "children": [{"name": "b", "children": []}]}
VALUE = Node(name="a", children=[Node(name="b", children=[])])


PRESETS = {
    "anthropic": ("claude-3-5-haiku-20241022", "anthropic"),
    "gemini": ("gemini-2.0-flash", "gemini"),
    "ollama": ("llama3.1", "ollama"),
}


def _provider(preset: str, args: dict[str, Any]) -> tuple[Any, Recorder, str]:
    model, dialect = PRESETS[preset]
    recorder = Recorder(dialect, args)
    key = {} if preset == "ollama" else {"api_key": "k"}
    return allama.provider(preset, transport=recorder.transport(), **key), recorder, model


def _extract(provider: Any, tp: Any, request: ChatRequest, mode: str) -> Any:
    if mode == "async":
        return asyncio.run(allama.aextract(provider, tp, request))
    return allama.extract(provider, tp, request)


# Extraction's forced tool


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-3-5-haiku-20241022"])
def test_recursive_model_goes_to_claude_as_an_object_rooted_tool(model: str, mode: str) -> None:
    """Recursion is beyond Anthropic's strict grammar (and Claude 3.5 has none): auto mode
    falls back to a forced tool without `strict`, whose `input_schema` has an object root."""
    recorder = Recorder("anthropic", ANSWER)
    provider = allama.provider("anthropic", api_key="k", transport=recorder.transport())
    extraction = _extract(provider, Node, ChatRequest(model).user("q"), mode)
    assert extraction.value == VALUE
    assert extraction.metadata.mode is ExtractionMode.FORCED_TOOL
    assert extraction.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert extraction.metadata.root_wrapped is False
    [body] = recorder.bodies
    [tool] = body["tools"]
    assert tool["input_schema"] == NODE_SENT
    assert "strict" not in tool
    assert body["tool_choice"] == {
        "type": "tool",
        "name": tool["name"],
        "disable_parallel_tool_use": True,
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("preset", ["anthropic", "gemini", "ollama"])
def test_root_model_of_a_model_goes_as_an_object_rooted_tool(preset: str, mode: str) -> None:
    provider, recorder, model = _provider(preset, {"name": "Ada"})
    request = ChatRequest(model).user("q").with_option(ExtractionMode.FORCED_TOOL)
    extraction = _extract(provider, People, request, mode)
    assert extraction.value == People(Person(name="Ada"))
    assert extraction.metadata.root_wrapped is False
    assert extraction.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert _sent_schema(preset, recorder.bodies[0]) == PEOPLE_SENT


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_root_ref_to_an_enum_is_wrapped(mode: str) -> None:
    """A root `$ref` to what is no object is no object root: the type goes wrapped."""
    recorder = Recorder("anthropic", {"value": "green"})
    provider = allama.provider("anthropic", api_key="k", transport=recorder.transport())
    extraction = _extract(provider, Shade, ChatRequest("claude-3-5-haiku-20241022").user("q"), mode)
    assert extraction.value == Shade(Colour.GREEN)
    assert extraction.metadata.root_wrapped is True
    schema = recorder.bodies[0]["tools"][0]["input_schema"]
    assert schema["type"] == "object"
    assert schema["properties"] == {"value": {"$ref": "#/$defs/Shade"}}


# The caller's own tools


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("preset", ["anthropic", "gemini", "ollama"])
def test_callers_tool_with_a_root_ref_is_sent_object_rooted(preset: str, mode: str) -> None:
    provider, recorder, model = _provider(preset, ANSWER)
    tool = ToolDefinition(name="tree", parameters=Node.model_json_schema())
    request = ChatRequest(model).user("q").with_tools([tool]).with_tool_choice(ToolChoice.auto())
    response = asyncio.run(provider.achat(request)) if mode == "async" else provider.chat(request)
    assert json.loads(response.tool_calls()[0].arguments) == ANSWER
    assert _sent_schema(preset, recorder.bodies[0]) == NODE_SENT
    assert tool.parameters == Node.model_json_schema()  # the caller's schema is left as it was


def test_anthropic_strict_tool_falls_back_object_rooted() -> None:
    """A strict tool whose schema recurses is sent without `strict`, as its own schema."""
    recorder = Recorder("anthropic", ANSWER)
    provider = allama.provider("anthropic", api_key="k", transport=recorder.transport())
    tool = ToolDefinition(name="tree", parameters=Node.model_json_schema(), strict=True)
    request = ChatRequest("claude-sonnet-4-5").user("q").with_tools([tool])
    response = provider.chat(request)
    assert [w.message for w in response.warnings] == [
        "tool `tree` is not strict-representable: the subschema at "
        "`/$defs/Node/properties/children/items` is recursive, which Anthropic strict mode "
        "cannot enforce; it goes without `strict`"
    ]
    [sent] = recorder.bodies[0]["tools"]
    assert sent == {"name": "tree", "input_schema": NODE_SENT}


# What the root becomes


def test_annotations_beside_the_ref_stay_over_the_targets() -> None:
    schema = {
        "$defs": {"A": {"type": "object", "title": "A", "description": "an A"}},
        "$ref": "#/$defs/A",
        "description": "the root",
    }
    assert inline_root_ref(schema) == {
        "$defs": {"A": {"type": "object", "title": "A", "description": "an A"}},
        "type": "object",
        "title": "A",
        "description": "the root",
    }
    assert object_rooted(schema) is True


def test_assertions_beside_the_ref_leave_the_schema_as_it_is() -> None:
    """Merged, an `additionalProperties` at the root would read the target's `properties`."""
    schema = {
        "$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "$ref": "#/$defs/A",
        "additionalProperties": False,
    }
    assert inline_root_ref(schema) is schema
    assert object_rooted(schema) is False  # so extraction would wrap it


def test_draft_07_definitions_and_ignored_siblings() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"A": {"type": "object", "properties": {"x": {"$ref": "#/definitions/A"}}}},
        "$ref": "#/definitions/A",
        "additionalProperties": False,  # ignored beside `$ref` before 2019-09
        "title": "ignored too",
    }
    assert inline_root_ref(schema) == {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"A": {"type": "object", "properties": {"x": {"$ref": "#/definitions/A"}}}},
        "type": "object",
        "properties": {"x": {"$ref": "#/definitions/A"}},
    }
    assert object_rooted(schema) is True


def test_a_chain_of_refs_is_followed_to_its_end() -> None:
    b = {"type": "object", "properties": {"n": {"type": "integer"}}, "title": "B"}
    schema = {
        "$defs": {"A": {"$ref": "#/$defs/B", "description": "an A"}, "B": b},
        "$ref": "#/$defs/A",
    }
    assert inline_root_ref(schema) == {
        "$defs": {"A": {"$ref": "#/$defs/B", "description": "an A"}, "B": b},
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "title": "B",
        "description": "an A",
    }
    assert object_rooted(schema) is True


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"},
        {"$defs": {"A": {"$ref": "#"}}, "$ref": "#/$defs/A"},
        {"$defs": {"A": True}, "$ref": "#/$defs/A"},
        {"$defs": {"A": {"$id": "urn:a", "type": "object"}}, "$ref": "#/$defs/A"},
        {"$ref": "#/$defs/missing"},
    ],
    ids=["loop", "loop-through-root", "boolean", "own-resource", "unresolved"],
)
def test_what_cannot_be_merged_exactly_is_left_as_it_is(schema: dict[str, Any]) -> None:
    assert inline_root_ref(schema) is schema
    assert object_rooted(schema) is False


def test_a_root_ref_to_no_object_is_no_object_root() -> None:
    schema = Shade.model_json_schema()
    assert inline_root_ref(schema) == {
        "$defs": {"Colour": {"enum": ["red", "green"], "title": "Colour", "type": "string"}},
        "enum": ["red", "green"],
        "type": "string",
        "title": "Shade",
    }
    assert object_rooted(schema) is False


# Anthropic: `anyOf`, `oneOf` or `allOf` beside an object root's properties

# Anthropic answers 400 to each ("input_schema does not support oneOf, allOf, or anyOf at
# the top level"): an `allOf` is folded into the root, the others are left out with a warning.

EMAIL_OR_PHONE = {  # MCP's "email or phone" shape
    "type": "object",
    "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
    "anyOf": [{"required": ["email"]}, {"required": ["phone"]}],
}
CONTACT = {
    "type": "object",
    "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
}
BOTH_IN_PARTS = {
    "type": "object",
    "properties": {"email": {"type": "string"}},
    "required": ["email"],
    "allOf": [
        {"properties": {"phone": {"type": "string"}, "email": {"format": "email"}}},
        {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["phone"]},
    ],
}
FOLDED = {
    "type": "object",
    "properties": {
        "email": {"allOf": [{"type": "string"}, {"format": "email"}]},
        "phone": {"type": "string"},
    },
    "required": ["email", "phone"],
}


def _left_out(what: str, tool: str = "lookup") -> str:
    return (
        f"Anthropic takes no {what} at the top level of `input_schema`; it was left out of "
        f"tool `{tool}`, so the rule it states is not enforced"
    )


def _lookup(schema: dict[str, Any], strict: bool | None = None) -> tuple[Any, Recorder]:
    recorder = Recorder("anthropic", {"email": "ada@example.com"})
    provider = allama.provider("anthropic", api_key="k", transport=recorder.transport())
    tool = ToolDefinition(name="lookup", parameters=schema, strict=strict)
    return provider.chat(ChatRequest("claude-sonnet-4-5").user("find Ada").add_tool(tool)), recorder


@pytest.mark.parametrize("strict", [None, False])
def test_anthropic_tool_root_anyof_is_left_out_with_a_warning(strict: bool | None) -> None:
    response, recorder = _lookup(EMAIL_OR_PHONE, strict)
    assert recorder.bodies[0]["tools"] == [{"name": "lookup", "input_schema": CONTACT}]
    assert [(w.kind.value, w.message) for w in response.warnings] == [
        ("approximated", _left_out("`anyOf`"))
    ]
    assert EMAIL_OR_PHONE["anyOf"] == [{"required": ["email"]}, {"required": ["phone"]}]


def test_anthropic_strict_tool_is_rewritten_from_the_root_without_anyof() -> None:
    response, recorder = _lookup(EMAIL_OR_PHONE, strict=True)
    assert recorder.bodies[0]["tools"] == [
        {
            "name": "lookup",
            "input_schema": {**CONTACT, "additionalProperties": False},
            "strict": True,
        }
    ]
    assert [w.message for w in response.warnings] == [_left_out("`anyOf`")]


def test_anthropic_tool_root_anyof_and_oneof_are_both_named() -> None:
    schema = {**EMAIL_OR_PHONE, "oneOf": [{"required": ["email"]}, {"required": ["phone"]}]}
    response, recorder = _lookup(schema)
    assert recorder.bodies[0]["tools"][0]["input_schema"] == CONTACT
    assert [w.message for w in response.warnings] == [
        "Anthropic takes no `anyOf` or `oneOf` at the top level of `input_schema`; they were "
        "left out of tool `lookup`, so the rules they state are not enforced"
    ]


@pytest.mark.parametrize("strict", [None, True])
def test_anthropic_tool_root_allof_is_folded_into_the_root(strict: bool | None) -> None:
    response, recorder = _lookup(BOTH_IN_PARTS, strict)
    [tool] = recorder.bodies[0]["tools"]
    if strict:
        # The strict rewrite starts from the folded root (and merges the `allOf` it finds).
        assert tool["input_schema"] == {
            **FOLDED,
            "properties": {**FOLDED["properties"], "email": {"type": "string", "format": "email"}},
            "additionalProperties": False,
        }
        assert tool["strict"] is True
    else:
        assert tool == {"name": "lookup", "input_schema": FOLDED}
        assert list(response.warnings) == []


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (
            {**BOTH_IN_PARTS, "additionalProperties": False},
            "the root's `additionalProperties` reads only the root's own `properties`, so the "
            "branches' cannot join them",
        ),
        (
            {"type": "object", "allOf": [{"properties": {"a": {}}}, {"minProperties": 1}]},
            "`/allOf/1` says `minProperties`, beyond the `type`, `properties` and `required` "
            "that can join the root",
        ),
        (
            {"type": "object", "allOf": [{"type": "string"}]},
            "`/allOf/0` is not of type object",
        ),
    ],
    ids=["closed-root", "other-keyword", "not-an-object"],
)
@pytest.mark.parametrize("strict", [None, True])
def test_anthropic_tool_root_allof_that_cannot_be_folded_is_refused_unsent(
    schema: dict[str, Any], why: str, strict: bool | None
) -> None:
    with pytest.raises(allama.InvalidRequestError) as raised:
        _lookup(schema, strict)
    assert str(raised.value) == (
        "Anthropic takes no `allOf` at the top level of `input_schema`, and that of tool "
        f"`lookup` cannot be folded into its root: {why}"
    )


def test_anthropic_tool_root_combinator_refused_nothing_sent() -> None:
    recorder = Recorder("anthropic", {})
    provider = allama.provider("anthropic", api_key="k", transport=recorder.transport())
    schema = {"type": "object", "allOf": [{"type": "string"}]}
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("q")
        .add_tool(ToolDefinition(name="t", parameters=schema))
    )
    with pytest.raises(allama.InvalidRequestError):
        provider.chat(request)
    assert recorder.bodies == []


class Contact(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"anyOf": [{"required": ["email"]}, {"required": ["phone"]}]}
    )
    email: str | None = None
    phone: str | None = None


def test_extraction_still_wraps_a_type_whose_root_has_anyof() -> None:
    """Extraction's own tool keeps the type whole inside `{"value": ...}`: no rule lost."""
    recorder = Recorder("anthropic", {"value": {"email": "ada@example.com"}})
    provider = allama.provider("anthropic", api_key="k", transport=recorder.transport())
    request = ChatRequest("claude-3-5-haiku-20241022").user("q")
    extraction = allama.extract(provider, Contact, request.with_option(ExtractionMode.FORCED_TOOL))
    assert extraction.value == Contact(email="ada@example.com")
    assert extraction.metadata.root_wrapped is True
    [tool] = recorder.bodies[0]["tools"]
    assert tool["input_schema"] == {
        "$defs": {"Contact": Contact.model_json_schema()},
        "additionalProperties": False,
        "properties": {"value": {"$ref": "#/$defs/Contact"}},
        "required": ["value"],
        "type": "object",
    }
    said = [w.message for w in extraction.metadata.degradations]
    assert not any("top level" in message for message in said)
