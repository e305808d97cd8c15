"""Request shapes a provider answers 400 to, dealt with before sending: Gemini's empty text
parts and a request of system instructions alone, and tool parameters whose root is no
object on Anthropic, Gemini and Ollama (`{}`, the plain way to write a tool of no
arguments, goes as an empty object; a union or a scalar is refused)."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import allama
from _tool_endpoint import ToolEndpoint as Recorder
from _tool_endpoint import sent_schema as _sent_schema
from allama import ChatRequest, ExtractionMode, ToolDefinition
from allama.errors import InvalidRequestError
from allama.types import ImagePart

MODELS = {"anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash", "ollama": "llama3.1"}
DISPLAY = {"anthropic": "Anthropic", "gemini": "Gemini", "ollama": "Ollama"}


def _provider(preset: str, recorder: Recorder) -> Any:
    key = {} if preset == "ollama" else {"api_key": "k"}
    return allama.provider(preset, transport=recorder.transport(), **key)


def _chat(provider: Any, request: ChatRequest, mode: str) -> Any:
    if mode == "async":
        return asyncio.run(provider.achat(request))
    return provider.chat(request)


# Gemini: empty text, and no contents

PNG = b"\x89PNG\r\n"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gemini_leaves_an_empty_text_out_beside_an_image(mode: str) -> None:
    """`.user("", image)`: the empty text part ("it has an empty text parameter") says
    nothing; the image goes alone."""
    recorder = Recorder("gemini")
    gemini = _provider("gemini", recorder)
    image = ImagePart(data=PNG, media_type="image/png")
    response = _chat(gemini, ChatRequest("gemini-2.5-flash").user("", image), mode)
    assert response.text() == "ok"
    [body] = recorder.bodies
    encoded = base64.b64encode(PNG).decode("ascii")
    assert body["contents"] == [
        {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": encoded}}]}
    ]


@pytest.mark.parametrize("blank", ["", "  \n"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gemini_leaves_blank_text_out_of_a_turn_that_says_something(blank: str, mode: str) -> None:
    """A blank user message after another is merged into its turn: left out there, as
    Anthropic's encoder leaves text of whitespace alone out."""
    recorder = Recorder("gemini")
    gemini = _provider("gemini", recorder)
    request = ChatRequest("gemini-2.5-flash").system("Extract the person.").user("Bob").user(blank)
    assert _chat(gemini, request, mode).text() == "ok"
    [body] = recorder.bodies
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Bob"}]}]
    assert body["systemInstruction"] == {"parts": [{"text": "Extract the person."}]}


def test_gemini_sends_a_lone_empty_user_turn_as_it_is() -> None:
    """A request whose one user turn is empty text went to Gemini 3 Flash and was answered
    (a recorded exchange, the corpus's gemini/parallel_function_calls_3): it is sent."""
    recorder = Recorder("gemini")
    gemini = _provider("gemini", recorder)
    request = ChatRequest("gemini-2.5-flash").system("Tell a joke.").user("")
    assert gemini.chat(request).text() == "ok"
    assert recorder.bodies[0]["contents"] == [{"role": "user", "parts": [{"text": ""}]}]


NO_CONTENTS = (
    "Gemini needs at least one user or assistant message besides the system instructions, "
    "and the request has none left to send"
)


def _run(provider: Any, request: ChatRequest, how: str) -> None:
    if how == "chat":
        provider.chat(request)
    elif how == "achat":
        asyncio.run(provider.achat(request))
    elif how == "stream":
        with provider.chat_stream(request) as stream:
            for _ in stream:
                pass
    else:
        allama.extract(provider, Person, request)


class Person(BaseModel):
    name: str


@pytest.mark.parametrize("how", ["chat", "achat", "stream", "extract"])
@pytest.mark.parametrize(
    "request_",
    [
        ChatRequest("gemini-2.5-flash").system("Extract the person: Bob."),
        ChatRequest("gemini-2.5-flash").system("Extract the person: Bob.").assistant(""),
    ],
    ids=["system-alone", "empty-assistant-turn-left-out"],
)
def test_gemini_refuses_system_instructions_alone_before_sending(
    request_: ChatRequest, how: str
) -> None:
    """Gemini answers 400 ("contents is not specified"); refused unpaid, as for Anthropic."""
    recorder = Recorder("gemini")
    gemini = _provider("gemini", recorder)
    with pytest.raises(InvalidRequestError) as caught:
        _run(gemini, request_, how)
    assert str(caught.value) == NO_CONTENTS
    assert caught.value.provider == "gemini"
    assert recorder.bodies == []


# Tool parameters whose root is no object


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("preset", ["anthropic", "gemini", "ollama"])
def test_a_tool_of_no_arguments_goes_as_an_empty_object(preset: str, mode: str) -> None:
    """`parameters={}` was sent as `input_schema: {}` (Anthropic: "input_schema.type: Field
    required"): it goes as an object of no properties."""
    recorder = Recorder(preset, args={})
    provider = _provider(preset, recorder)
    tool = ToolDefinition(name="now", parameters={})
    response = _chat(provider, ChatRequest(MODELS[preset]).user("Time?").add_tool(tool), mode)
    [call] = response.tool_calls()
    assert (call.name, json.loads(call.arguments)) == ("now", {})
    assert _sent_schema(preset, recorder.bodies[0]) == {"type": "object", "properties": {}}
    assert response.warnings == ()
    assert tool.parameters == {}  # the caller's schema is left as it was


@pytest.mark.parametrize("preset", ["anthropic", "gemini", "ollama"])
def test_a_root_of_object_keywords_without_a_type_gets_its_type(preset: str) -> None:
    recorder = Recorder(preset, args={"city": "Paris"})
    provider = _provider(preset, recorder)
    parameters: dict[str, Any] = {
        "description": "Where to look",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    tool = ToolDefinition(name="weather", parameters=parameters)
    response = provider.chat(ChatRequest(MODELS[preset]).user("Weather?").add_tool(tool))
    assert json.loads(response.tool_calls()[0].arguments) == {"city": "Paris"}
    assert _sent_schema(preset, recorder.bodies[0]) == {"type": "object", **parameters}


def test_a_strict_anthropic_tool_of_no_arguments_goes_without_strict_as_an_object() -> None:
    recorder = Recorder("anthropic", args={})
    provider = _provider("anthropic", recorder)
    tool = ToolDefinition(name="now", parameters={}, strict=True)
    response = provider.chat(ChatRequest("claude-sonnet-4-5").user("Time?").add_tool(tool))
    assert recorder.bodies[0]["tools"] == [
        {"name": "now", "input_schema": {"type": "object", "properties": {}}}
    ]
    assert [w.message for w in response.warnings] == [
        "tool `now` is not strict-representable: the subschema at `/` accepts any value, "
        "which Anthropic strict mode cannot express; the root at `/` is not an object, which "
        "Anthropic strict mode requires; it goes without `strict`"
    ]


NOT_OBJECTS = {
    "union": {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"b": {"type": "string"}}},
        ]
    },
    "scalar": {"type": "string"},
    "nullable-object": {"type": ["object", "null"], "properties": {}},
    "ref-to-enum": {
        "$defs": {"Shade": {"enum": ["red", "green"], "type": "string"}},
        "$ref": "#/$defs/Shade",
    },
    "enum-without-type": {"enum": [{"a": 1}]},
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("strict", [None, True])
@pytest.mark.parametrize("schema", list(NOT_OBJECTS))
@pytest.mark.parametrize(
    ("preset", "model"),
    [
        ("anthropic", "claude-sonnet-4-5"),
        ("gemini", "gemini-2.5-flash"),
        ("gemini", "gemini-1.5-pro"),
        ("ollama", "llama3.1"),
    ],
    ids=["anthropic", "gemini", "gemini-openapi", "ollama"],
)
def test_tool_parameters_that_are_no_object_are_refused_before_sending(
    preset: str, model: str, schema: str, strict: bool | None, mode: str
) -> None:
    """Each provider passes the arguments as a JSON object: a union or a scalar could not
    be what the tool gets (Anthropic answers 400 to a root union), and wrapping it would
    change the value the caller's code receives, so it is refused."""
    recorder = Recorder(preset)
    provider = _provider(preset, recorder)
    other = ToolDefinition(name="first", parameters={"type": "object", "properties": {}})
    tool = ToolDefinition(name="pick", parameters=NOT_OBJECTS[schema], strict=strict)
    request = ChatRequest(model).user("Pick one.").with_tools([other, tool])
    with pytest.raises(InvalidRequestError) as caught:
        _chat(provider, request, mode)
    assert str(caught.value) == (
        f"the parameters of tool `pick` are not an object schema: {DISPLAY[preset]} passes "
        "a tool's arguments as a JSON object, so its parameters must be an object schema "
        '(`"type": "object"`), of which a union or a single value can be a property'
    )
    assert caught.value.provider == preset
    assert recorder.bodies == []


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


@pytest.mark.parametrize("preset", ["anthropic", "gemini", "ollama"])
def test_extractions_forced_tool_of_a_union_goes_wrapped(preset: str) -> None:
    """Extraction wraps a type whose schema has no object root: its forced tool is never
    refused."""
    recorder = Recorder(preset, args={"value": {"kind": "dog", "good": True}})
    provider = _provider(preset, recorder)
    request = ChatRequest(MODELS[preset]).user("Rex").with_option(ExtractionMode.FORCED_TOOL)
    extraction = allama.extract(provider, Cat | Dog, request)
    assert extraction.value == Dog(kind="dog", good=True)
    assert extraction.metadata.root_wrapped is True
    assert _sent_schema(preset, recorder.bodies[0])["type"] == "object"


def test_an_object_type_written_as_a_list_of_one_is_an_object() -> None:
    from allama.schema._inline import object_parameters

    schema = {"type": ["object"], "properties": {"x": {"type": "integer"}}}
    assert object_parameters(schema) == {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert object_parameters({"type": ["object", "null"]}) is None  # arguments are no null
