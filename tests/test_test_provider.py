"""`TestProvider`: answers any request, sync and async, whole and streamed."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Literal

import pytest
from jsonschema.validators import validator_for
from pydantic import Field

import allama
from allama import ExtractionMode
from allama.errors import InvalidRequestError
from allama.extract import EXTRACTION_TOOL
from allama.extract._root import ROOT_KEY, ROOT_OPTION
from allama.mock._test_provider import TEXT_ANSWER, TestProvider
from allama.provider import ChatProvider
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    FinishReason,
    RequestField,
    ResponseFormat,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
    ToolDefinition,
    ValidationCoverage,
    WarningKind,
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 18},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": True},
        "nickname": {"type": "string"},
    },
    "required": ["name", "age", "email", "tags"],
    "additionalProperties": False,
}
PERSON_VALUE = {"name": "a", "age": 18, "email": "a@example.com", "tags": ["", "a"]}

WEATHER = ToolDefinition(
    name="weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city", "unit"],
    },
)
LOOKUP = ToolDefinition(
    name="lookup",
    parameters={
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 1}},
        "required": ["id"],
    },
)

BASE = ChatRequest("test-model").system("Extract.").user("Ada, 36, ada@example.com")


def schema_request() -> ChatRequest:
    return BASE.with_response_format(ResponseFormat.for_schema(PERSON, name="person"))


def named_tool_request() -> ChatRequest:
    return BASE.with_tools([WEATHER, LOOKUP]).with_tool_choice(ToolChoice.tool("lookup"))


def required_tool_request() -> ChatRequest:
    return BASE.with_tools([WEATHER, LOOKUP]).with_tool_choice(ToolChoice.required())


def accepts(schema: Any, value: Any) -> bool:
    return validator_for(schema)(schema).is_valid(value)


def collect_sync(provider: TestProvider, request: ChatRequest) -> tuple[ChatResponse, list[Any]]:
    with provider.chat_stream(request) as stream:
        events = list(stream)
        return stream.response(), events


def collect_async(provider: TestProvider, request: ChatRequest) -> tuple[ChatResponse, list[Any]]:
    async def run() -> tuple[ChatResponse, list[Any]]:
        stream = await provider.achat_stream(request)
        async with stream:
            events = [event async for event in stream]
            return await stream.response(), events

    return asyncio.run(run())


def answer(provider: TestProvider, request: ChatRequest, how: str) -> ChatResponse:
    if how == "chat":
        return provider.chat(request)
    if how == "achat":
        return asyncio.run(provider.achat(request))
    if how == "stream":
        return collect_sync(provider, request)[0]
    return collect_async(provider, request)[0]


WAYS = ["chat", "achat", "stream", "astream"]


def test_is_a_chat_provider_with_the_capabilities_of_native_extraction() -> None:
    provider = TestProvider()
    assert isinstance(provider, ChatProvider)
    assert provider.name == "test"
    for capability in (
        ChatCapability.STRUCTURED_OUTPUT,
        ChatCapability.TOOL_CALLS,
        ChatCapability.FORCED_TOOL_CHOICE,
        ChatCapability.STREAMING,
    ):
        assert provider.chat_capability("any", capability) is CapabilitySupport.SUPPORTED
    assert provider.chat_capability("any", ChatCapability.REASONING) is CapabilitySupport.UNKNOWN
    validation = provider.validate_chat_request(schema_request())
    assert validation.coverage is ValidationCoverage.ENCODING
    # What no provider's dialect enforces exactly (`format: email`, `uniqueItems`) the test
    # provider does not say it holds either.
    said = [
        (w.kind, w.is_about(RequestField.RESPONSE_FORMAT), w.message.split(" is enforced")[0])
        for w in validation.warnings
    ]
    assert said == [
        (WarningKind.APPROXIMATED, True, "`/properties/email`"),
        (WarningKind.APPROXIMATED, True, "`/properties/tags`"),
    ]
    assert provider.call_count == 0
    assert TestProvider(name="other").name == "other"


@pytest.mark.parametrize("how", WAYS)
def test_json_schema_answer(how: str) -> None:
    provider = TestProvider()
    response = answer(provider, schema_request(), how)
    assert response.text() == json.dumps(PERSON_VALUE, separators=(",", ":"))
    assert accepts(PERSON, json.loads(response.text() or ""))
    assert response.finish_reason == FinishReason.STOP
    assert response.tool_calls() == ()
    assert response.model == "test-model"
    assert response.provider == "test"
    assert response.id == "test-1"


@pytest.mark.parametrize("how", WAYS)
def test_named_tool_answer(how: str) -> None:
    provider = TestProvider()
    response = answer(provider, named_tool_request(), how)
    assert response.tool_calls() == (
        ToolCall(id="call_test_1", name="lookup", arguments='{"id":1}'),
    )
    assert response.finish_reason == FinishReason.TOOL_CALLS
    assert response.text() is None
    assert accepts(LOOKUP.parameters, response.tool_calls()[0].parsed_arguments())


@pytest.mark.parametrize("how", WAYS)
def test_required_tool_choice_calls_the_first_tool(how: str) -> None:
    provider = TestProvider()
    response = answer(provider, required_tool_request(), how)
    (call,) = response.tool_calls()
    assert (call.id, call.name) == ("call_test_1", "weather")
    assert call.parsed_arguments() == {"city": "", "unit": "c"}
    assert accepts(WEATHER.parameters, call.parsed_arguments())
    assert response.finish_reason == FinishReason.TOOL_CALLS


@pytest.mark.parametrize("how", WAYS)
def test_plain_text_answer(how: str) -> None:
    provider = TestProvider()
    request = BASE.with_tools([WEATHER]).with_tool_choice(ToolChoice.auto())
    response = answer(provider, request, how)
    assert response.text() == TEXT_ANSWER
    assert response.finish_reason == FinishReason.STOP


@pytest.mark.parametrize("how", WAYS)
def test_json_object_answer(how: str) -> None:
    response = answer(TestProvider(), BASE.with_response_format(ResponseFormat.json_object()), how)
    assert response.text() == "{}"


def test_forced_tool_wins_over_response_format() -> None:
    request = named_tool_request().with_response_format(ResponseFormat.for_schema(PERSON))
    response = TestProvider().chat(request)
    assert [call.name for call in response.tool_calls()] == ["lookup"]


def test_usage_is_derived_from_lengths() -> None:
    provider = TestProvider()
    chars = len("Extract.") + len("Ada, 36, ada@example.com")
    text = provider.chat(schema_request())
    assert text.usage is not None
    assert text.usage.input_tokens == -(-chars // 4)
    assert text.usage.output_tokens == -(-len(text.text() or "") // 4)
    call = provider.chat(named_tool_request())
    assert call.usage is not None
    assert call.usage.output_tokens == 2  # '{"id":1}' is 8 characters
    empty = provider.chat(ChatRequest("m").user(""))
    assert empty.usage is not None
    assert (empty.usage.input_tokens, empty.usage.output_tokens) == (1, 6)


def test_streams_deliver_values_in_pieces() -> None:
    provider = TestProvider()
    _, text_events = collect_sync(provider, schema_request())
    deltas = [event.text for event in text_events if isinstance(event, TextDelta)]
    assert len(deltas) > 1
    assert json.loads("".join(deltas)) == PERSON_VALUE
    _, call_events = collect_async(provider, required_tool_request())
    pieces = [event.arguments for event in call_events if isinstance(event, ToolCallDelta)]
    assert json.loads("".join(p or "" for p in pieces)) == {"city": "", "unit": "c"}


def test_requests_are_recorded_in_order() -> None:
    provider = TestProvider()
    first, second, third = schema_request(), named_tool_request(), BASE
    provider.chat(first)
    asyncio.run(provider.achat(second))
    collect_sync(provider, third)
    collect_async(provider, first)
    assert provider.requests == [first, second, third, first]
    assert provider.last_request == first
    assert provider.call_count == 4
    responses = [provider.chat(BASE) for _ in range(2)]
    assert [r.id for r in responses] == ["test-5", "test-6"]
    assert repr(provider) == "TestProvider(name='test', calls=6)"


def test_same_request_same_answer() -> None:
    a, b = TestProvider(), TestProvider()
    for request in (schema_request(), named_tool_request(), required_tool_request(), BASE):
        assert a.chat(request) == b.chat(request)


def test_unknown_tool_is_an_invalid_request() -> None:
    provider = TestProvider()
    request = BASE.with_tools([WEATHER]).with_tool_choice(ToolChoice.tool("missing"))
    with pytest.raises(InvalidRequestError, match="`missing`") as caught:
        provider.chat(request)
    assert caught.value.provider == "test"
    assert caught.value.authored
    # A choice among no tools is not sent, as every adapter leaves it out, with its warning.
    streamed = provider.chat_stream(BASE.with_tool_choice(ToolChoice.tool("missing")))
    response = streamed.response()
    assert response.text() == TEXT_ANSWER
    assert [(w.kind, w.message) for w in response.warnings] == [
        (WarningKind.UNSUPPORTED, "the request gives no tools to call; `tool_choice` was not sent")
    ]
    assert provider.call_count == 2


def test_unsatisfiable_schema_is_an_invalid_request_naming_the_place() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 1}},
        "required": ["n"],
    }
    request = BASE.with_response_format(ResponseFormat.for_schema(schema))
    with pytest.raises(InvalidRequestError, match="#/properties/n"):
        TestProvider().chat(request)
    with pytest.raises(InvalidRequestError, match="response format schema"):
        asyncio.run(TestProvider().achat_stream(request))


def test_tool_without_parameters_gets_empty_arguments() -> None:
    request = BASE.with_tools([ToolDefinition(name="ping")]).with_tool_choice(ToolChoice.required())
    (call,) = TestProvider().chat(request).tool_calls()
    assert call.arguments == "{}"


def test_not_collected_by_pytest() -> None:
    assert TestProvider.__test__ is False


# Non-object roots, wrapped for providers that take only objects

COLOURS = {"type": "array", "items": {"enum": ["red", "green"]}, "minItems": 2}
WRAPPED: dict[str, Any] = {
    "type": "object",
    "properties": {ROOT_KEY: COLOURS},
    "required": [ROOT_KEY],
    "additionalProperties": False,
}
"""A list type's schema as extraction sends it where the root must be an object."""


def wrapped(request: ChatRequest) -> ChatRequest:
    return request.with_option_json(ROOT_OPTION, ROOT_KEY)


@pytest.mark.parametrize("how", WAYS)
def test_a_wrapped_request_gets_the_value_under_the_key(how: str) -> None:
    provider = TestProvider()
    native = wrapped(BASE.with_response_format(ResponseFormat.for_schema(WRAPPED)))
    assert answer(provider, native, how).text() == '{"value":["red","red"]}'
    tool = ToolDefinition(name=EXTRACTION_TOOL, parameters=WRAPPED, strict=True)
    forced = wrapped(BASE.add_tool(tool).with_tool_choice(ToolChoice.tool(EXTRACTION_TOOL)))
    (call,) = answer(provider, forced, how).tool_calls()
    assert (call.name, call.arguments) == (EXTRACTION_TOOL, '{"value":["red","red"]}')


Colours = Annotated[list[Literal["red", "green"]], Field(min_length=2)]


@pytest.mark.parametrize("mode", list(ExtractionMode))
@pytest.mark.parametrize("roots", [CapabilitySupport.SUPPORTED, CapabilitySupport.UNSUPPORTED])
def test_extracts_every_root_in_every_mode_whatever_the_roots_it_takes(
    mode: ExtractionMode, roots: CapabilitySupport
) -> None:
    provider = (
        TestProvider()
        .with_chat_capability(ChatCapability.RESPONSE_SCHEMA_ANY_ROOT, roots)
        .with_chat_capability(ChatCapability.TOOL_SCHEMA_ANY_ROOT, roots)
    )
    request = BASE.with_option(mode)
    for tp, value in ((Colours, ["red", "red"]), (int, 0), (Literal["b", "a"], "b")):
        assert allama.extract(provider, tp, request).value == value
        assert asyncio.run(allama.aextract(provider, tp, request)).value == value
        with allama.extract_stream(provider, tp, request) as stream:
            for _ in stream:
                pass
            assert stream.finish().value == value


def test_calls_from_many_threads_each_get_their_own_ids() -> None:
    """The call's number was read after its record, apart: two threads could take one."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    provider = TestProvider()
    request = ChatRequest("m").user("x")
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(16) as pool:
            ids = list(pool.map(lambda _: provider.chat(request).id, range(1600)))
    finally:
        sys.setswitchinterval(before)
    assert len(set(ids)) == 1600
    assert provider.call_count == 1600
