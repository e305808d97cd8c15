"""Types whose schema root is not an object: sent wrapped in `{"value": ...}` where the
mode's schema needs an object root (OpenAI strict, every tool API), strict, and unwrapped
before they reach the caller; sent as they are where the provider takes any root."""

from __future__ import annotations

import asyncio
import json
from enum import Enum
from typing import Annotated, Any, Literal

import httpx2
import pytest
from pydantic import BaseModel, ConfigDict, Field, RootModel

import allama
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    ParseError,
    SchemaEnforcement,
)
from allama.mock import ChatResponseBuilder, MockProvider, MockStreamingProvider, TestProvider
from allama.mock._events import response_events
from allama.providers import provider as make_provider
from allama.transport import Transport


class Person(BaseModel):
    name: str
    age: int


class Colour(Enum):
    RED = "red"
    GREEN = "green"


ROOTS: list[tuple[Any, Any, Any]] = [
    # (type, the value the model writes inside the wrapper, the value the caller gets)
    (list[Person], [{"name": "Ada", "age": 36}], [Person(name="Ada", age=36)]),
    (Colour, "green", Colour.GREEN),
    (Literal["yes", "no"], "no", "no"),
    (Person | None, None, None),
    (Person | None, {"name": "Ada", "age": 36}, Person(name="Ada", age=36)),
    (int, 1843, 1843),
    (str, "Ada", "Ada"),
    (list[int], [1, 2, 3], [1, 2, 3]),
]

IDS = ["list", "enum", "literal", "union-null", "union-model", "int", "str", "list-int"]


def _transport(handler: Any) -> Transport:
    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


def _completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class OpenAIServer:
    """An OpenAI endpoint that answers with `output` in the shape the request asks for."""

    def __init__(self, output: Any) -> None:
        self.output = json.dumps(output)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.content)
        self.bodies.append(body)
        if "tools" in body:
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": "submit_structured_output", "arguments": self.output},
            }
            return httpx2.Response(200, json=_completion({"tool_calls": [call]}, "tool_calls"))
        return httpx2.Response(200, json=_completion({"content": self.output}))

    def provider(self, name: str = "openai") -> Any:
        return make_provider(name, api_key="k", base_url="http://test", transport=_transport(self))


def _request(mode: ExtractionMode = ExtractionMode.AUTO) -> ChatRequest:
    request = ChatRequest("gpt-4o-2024-08-06").user("Ada Lovelace, 36, likes green.")
    return request if mode is ExtractionMode.AUTO else request.with_option(mode)


@pytest.mark.parametrize(("tp", "written", "expected"), ROOTS, ids=IDS)
def test_openai_native_sends_a_wrapped_root_strict_and_unwraps_it(
    tp: Any, written: Any, expected: Any
) -> None:
    server = OpenAIServer({"value": written})
    extracted = allama.extract(server.provider(), tp, _request())

    assert extracted.value == expected
    assert extracted.metadata.mode is ExtractionMode.NATIVE
    assert extracted.metadata.root_wrapped is True
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []
    fmt = server.bodies[0]["response_format"]
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["type"] == "object"
    assert schema["required"] == ["value"]
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == ["value"]


@pytest.mark.parametrize(("tp", "written", "expected"), ROOTS, ids=IDS)
def test_openai_forced_tool_sends_wrapped_parameters_strict(
    tp: Any, written: Any, expected: Any
) -> None:
    server = OpenAIServer({"value": written})
    request = _request(ExtractionMode.FORCED_TOOL)
    extracted = allama.extract(server.provider(), tp, request)

    assert extracted.value == expected
    assert extracted.metadata.mode is ExtractionMode.FORCED_TOOL
    assert extracted.metadata.root_wrapped is True
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    function = server.bodies[0]["tools"][0]["function"]
    assert function["strict"] is True
    assert function["parameters"]["required"] == ["value"]


def test_an_object_root_is_never_wrapped() -> None:
    server = OpenAIServer({"name": "Ada", "age": 36})
    extracted = allama.extract(server.provider(), Person, _request())
    assert extracted.value == Person(name="Ada", age=36)
    assert extracted.metadata.root_wrapped is False
    assert "value" not in server.bodies[0]["response_format"]["json_schema"]["schema"]["properties"]


class ListedPerson(BaseModel):
    """A model whose schema's root is typed `["object"]` (a `json_schema_extra` written as a
    list of types), which is the same type as `"object"`."""

    model_config = ConfigDict(json_schema_extra={"type": ["object"]})

    name: str
    age: int


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_a_root_typed_as_a_list_of_one_object_is_not_wrapped(mode: ExtractionMode) -> None:
    server = OpenAIServer({"name": "Ada", "age": 36})
    planned = Extractor().plan(server.provider(), ListedPerson, _request(mode))
    assert (planned.enforcement, planned.root_wrapped) == (SchemaEnforcement.EXACT, False)
    extracted = allama.extract(server.provider(), ListedPerson, _request(mode))
    assert extracted.value == ListedPerson(name="Ada", age=36)
    assert (extracted.metadata.mode, extracted.metadata.root_wrapped) == (mode, False)
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    body = server.bodies[0]
    if mode is ExtractionMode.NATIVE:
        carrier = body["response_format"]["json_schema"]
    else:
        carrier = body["tools"][0]["function"]
    schema = carrier.get("schema", carrier.get("parameters"))
    assert carrier["strict"] is True
    # Sent as the object it is, in the form OpenAI checks a root for.
    assert (schema["type"], schema["required"]) == ("object", ["name", "age"])


class ListedScores(BaseModel):
    """A root typed `["object"]` that OpenAI's strict subset cannot hold (a map): it goes
    as given, without `strict`."""

    model_config = ConfigDict(json_schema_extra={"type": ["object"]})

    name: str
    scores: dict[str, int]


def _sent_schema(body: dict[str, Any]) -> dict[str, Any]:
    if "tools" in body:
        parameters: dict[str, Any] = body["tools"][0]["function"]["parameters"]
        return parameters
    schema: dict[str, Any] = body["response_format"]["json_schema"]["schema"]
    return schema


@pytest.mark.parametrize(
    ("preset", "tp", "mode", "output"),
    [
        ("together", ListedPerson, ExtractionMode.FORCED_TOOL, {"name": "Ada", "age": 36}),
        ("deepseek", ListedPerson, ExtractionMode.FORCED_TOOL, {"name": "Ada", "age": 36}),
        ("openai", ListedScores, ExtractionMode.NATIVE, {"name": "Ada", "scores": {"x": 1}}),
        ("openai", ListedScores, ExtractionMode.FORCED_TOOL, {"name": "Ada", "scores": {"x": 1}}),
    ],
    ids=["together-tool", "deepseek-tool", "openai-native", "openai-tool"],
)
def test_a_root_typed_as_a_list_of_one_object_goes_as_an_object_where_not_strict(
    preset: str, tp: Any, mode: ExtractionMode, output: dict[str, Any]
) -> None:
    """Not wrapped, the root goes as the object it is where the schema goes as given, not
    strict: `"type": "object"`, the form a tool's parameters are checked for."""
    server = OpenAIServer(output)
    extracted = allama.extract(server.provider(preset), tp, _request(mode))
    assert extracted.value == tp.model_validate(output)
    assert (extracted.metadata.mode, extracted.metadata.root_wrapped) == (mode, False)
    schema = _sent_schema(server.bodies[0])
    assert (schema["type"], schema["required"]) == ("object", list(output))
    assert schema["properties"].keys() == output.keys()
    assert tp.model_json_schema()["type"] == ["object"]  # the caller's schema is left as is


def test_a_non_strict_response_format_and_tool_send_a_listed_object_root_as_an_object() -> None:
    server = OpenAIServer({"name": "Ada", "age": 36})
    schema = ListedPerson.model_json_schema()
    tool = allama.ToolDefinition(name="person", parameters=schema)
    request = (
        ChatRequest("gpt-4o-2024-08-06")
        .user("Ada, 36.")
        .with_response_format(allama.ResponseFormat.for_schema(schema, name="p", strict=None))
    )
    server.provider().chat(request)
    server.provider().chat(ChatRequest("gpt-4o-2024-08-06").user("Ada, 36.").with_tools([tool]))
    sent_format = server.bodies[0]["response_format"]["json_schema"]
    sent_tool = server.bodies[1]["tools"][0]["function"]
    assert (sent_format["schema"]["type"], sent_format.get("strict")) == ("object", None)
    assert (sent_tool["parameters"]["type"], sent_tool.get("strict")) == ("object", None)
    assert schema["type"] == ["object"]


def test_the_wrapped_names_stay_the_callers() -> None:
    server = OpenAIServer({"value": []})
    allama.extract(server.provider(), list[Person], _request())
    assert server.bodies[0]["response_format"]["json_schema"]["name"] == "list_person"


def test_a_grammar_engine_takes_the_root_as_it_is_in_native_mode() -> None:
    server = OpenAIServer([{"name": "Ada", "age": 36}])
    vllm = server.provider("vllm")
    request = ChatRequest("Qwen/Qwen3-0.6B").user("Ada, 36").with_option(ExtractionMode.NATIVE)
    extracted = allama.extract(vllm, list[Person], request)
    assert extracted.value == [Person(name="Ada", age=36)]
    assert extracted.metadata.root_wrapped is False
    assert server.bodies[0]["response_format"]["json_schema"]["schema"]["type"] == "array"


def test_a_grammar_engine_wraps_tool_parameters() -> None:
    server = OpenAIServer({"value": [{"name": "Ada", "age": 36}]})
    vllm = server.provider("vllm")
    request = ChatRequest("Qwen/Qwen3-0.6B").user("Ada").with_option(ExtractionMode.FORCED_TOOL)
    extracted = allama.extract(vllm, list[Person], request)
    assert extracted.value == [Person(name="Ada", age=36)]
    assert extracted.metadata.root_wrapped is True


def test_the_plan_says_the_root_is_wrapped() -> None:
    openai = OpenAIServer(None).provider()
    planned = Extractor().plan(openai, list[Person], _request())
    assert (planned.mode, planned.enforcement, planned.root_wrapped) == (
        ExtractionMode.NATIVE,
        SchemaEnforcement.EXACT,
        True,
    )
    assert Extractor().plan(openai, Person, _request()).root_wrapped is False


def test_degradations_inside_a_wrapped_root_name_the_callers_type() -> None:
    tp = list[Annotated[str, Field(min_length=2)]]
    server = OpenAIServer({"value": ["Ada"]})
    azure = make_provider(
        "azure-openai",
        api_key="k",
        base_url="http://test.openai.azure.com",
        transport=_transport(server),
    )
    extracted = allama.extract(azure, tp, ChatRequest("gpt-4o").user("Ada"))
    assert extracted.value == ["Ada"]
    assert extracted.metadata.enforcement is SchemaEnforcement.APPROXIMATE
    [warning] = extracted.metadata.degradations
    assert "`list[str][]`" in warning.message, warning.message
    assert "/properties/value" not in warning.message


def test_a_failure_inside_a_wrapped_root_names_the_callers_path() -> None:
    server = OpenAIServer({"value": [{"name": "Ada", "age": "36"}]})
    with pytest.raises(ParseError) as raised:
        allama.extract(server.provider(), list[Person], _request())
    assert raised.value.path == "[0].age"
    record = raised.value.metadata
    assert (record.passes, record.root_wrapped) == (1, True)


def test_the_retry_feedback_names_the_place_the_model_wrote() -> None:
    provider = MockProvider(
        [
            ChatResponseBuilder().text('{"value": [{"name": "Ada", "age": "36"}]}').build(),
            ChatResponseBuilder().text('{"value": [{"name": "Ada", "age": 36}]}').build(),
        ]
    ).with_chat_capability(ChatCapability.RESPONSE_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED)
    request = ChatRequest("m").user("Ada").with_option(ExtractionMode.NATIVE)
    extracted = Extractor(retries=1).extract(provider, list[Person], request)
    assert extracted.value == [Person(name="Ada", age=36)]
    feedback = provider.last_request.messages[-1].text() if provider.last_request else None
    assert feedback is not None
    assert "at `value[0].age`" in feedback


def test_a_bare_answer_to_a_wrapped_request_is_not_accepted() -> None:
    server = OpenAIServer([{"name": "Ada", "age": 36}])
    with pytest.raises(ParseError) as raised:
        allama.extract(server.provider(), list[Person], _request())
    assert raised.value.path is None


def test_mocks_take_any_root_unless_told_otherwise() -> None:
    provider = MockProvider.with_text('[{"name": "Ada", "age": 36}]')
    request = ChatRequest("m").user("Ada").with_option(ExtractionMode.NATIVE)
    extracted = allama.extract(provider, list[Person], request)
    assert extracted.value == [Person(name="Ada", age=36)]
    assert extracted.metadata.root_wrapped is False


def test_the_derived_request_marks_the_wrapping() -> None:
    provider = MockProvider.with_text('{"value": "green"}').with_chat_capability(
        ChatCapability.RESPONSE_SCHEMA_ANY_ROOT, CapabilitySupport.UNKNOWN
    )
    request = ChatRequest("m").user("?").with_option(ExtractionMode.NATIVE)
    assert allama.extract(provider, Colour, request).value is Colour.GREEN
    sent = provider.last_request
    assert sent is not None
    assert sent.option_json("allama.extraction.root") == "value"


def test_the_test_provider_answers_a_wrapped_request() -> None:
    provider = TestProvider().with_chat_capability(
        ChatCapability.TOOL_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED
    )
    request = ChatRequest("m").user("?").with_option(ExtractionMode.FORCED_TOOL)
    extracted = allama.extract(provider, list[Person], request)
    assert extracted.metadata.root_wrapped is True
    assert isinstance(extracted.value, list)


def test_parse_reads_a_wrapped_response() -> None:
    response = ChatResponseBuilder().text('{"value": ["a", "b"]}').build()
    extracted = Extractor().parse(list[str], response, "native", root_wrapped=True)
    assert extracted.value == ["a", "b"]
    assert extracted.metadata.root_wrapped is True


def test_a_record_says_root_wrapped_and_reads_back() -> None:
    server = OpenAIServer({"value": "green"})
    record = allama.extract(server.provider(), Colour, _request()).metadata
    data = record.to_json_dict()
    assert data["root_wrapped"] is True
    assert ExtractionMetadata.from_json_dict(data) == record
    assert "root_wrapped=True" in repr(record)


# Streams: the partial value is the unwrapped one.


def _sse(*pieces: str) -> bytes:
    chunks = [
        {
            "id": "c",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
        }
        for piece in pieces
    ]
    chunks.append(
        {
            "id": "c",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


def _streaming_openai(pieces: list[str]) -> Any:
    def handler(http: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, content=_sse(*pieces), headers={"content-type": "text/event-stream"}
        )

    return make_provider(
        "openai", api_key="k", base_url="http://test", transport=_transport(handler)
    )


PIECES = ['{"value": [{"name": "Ada", ', '"age": 36}, {"name"', ': "Bob", "age": 7}]}']


def test_a_wrapped_stream_shows_the_unwrapped_partial_value() -> None:
    seen: list[Any] = []
    with allama.extract_stream(_streaming_openai(PIECES), list[Person], _request()) as stream:
        for _ in stream:
            seen.append(stream.partial)
        extracted = stream.finish()
    assert extracted.value == [Person(name="Ada", age=36), Person(name="Bob", age=7)]
    assert extracted.metadata.root_wrapped is True
    assert all(value is None or isinstance(value, list) for value in seen)
    assert seen[-1] == extracted.value
    assert any(value and value[0] == Person(name="Ada", age=36) for value in seen[:-1])


def _streamed_async(tp: Any) -> tuple[Any, Any]:
    """The partial value at the end of `PIECES` streamed async as `tp`, and the extraction."""

    async def run() -> tuple[Any, Any]:
        provider = _streaming_openai(PIECES)
        async with allama.aextract_stream(provider, tp, _request()) as stream:
            async for _ in stream:
                pass
            partial = stream.partial
            extracted = await stream.finish()
        return partial, extracted

    return asyncio.run(run())


def test_a_wrapped_stream_async() -> None:
    partial, extracted = _streamed_async(list[Person])
    assert partial == extracted.value == [Person(name="Ada", age=36), Person(name="Bob", age=7)]


def test_a_scripted_stream_with_a_wrapped_root() -> None:
    provider = MockStreamingProvider.with_text('{"value": ["a", "b"]}').with_chat_capability(
        ChatCapability.RESPONSE_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED
    )
    request = ChatRequest("m").user("?").with_option(ExtractionMode.NATIVE)
    with allama.extract_stream(provider, list[str], request) as stream:
        for _ in stream:
            pass
        assert stream.partial == ["a", "b"]
        assert stream.finish().value == ["a", "b"]


# A RootModel: its JSON is its root's


class People(RootModel[list[Person]]):
    pass


class Census(BaseModel):
    people: People
    year: int


def _chunked_text(text: str, chunk: int) -> MockStreamingProvider:
    response = ChatResponseBuilder().text(text).build()
    return MockStreamingProvider([response_events(response, chunk=chunk)])


def _rows_as_seen(stream: Any) -> list[list[tuple[str | None, int | None]]]:
    """Each snapshot's people, as the fields that have arrived."""
    seen: list[list[tuple[str | None, int | None]]] = []
    for _ in stream:
        value = stream.partial
        if value is not None:
            assert type(value) is People
            seen.append([(p.__dict__.get("name"), p.__dict__.get("age")) for p in value.root])
    return seen


def test_a_root_model_streams_its_root_wrapped_or_not() -> None:
    """A `RootModel` streams as its root: every snapshot is the caller's type, its list of
    rows growing as under any list, and the last one is the value `finish()` returns."""
    final = People([Person(name="Ada", age=36), Person(name="Bob", age=7)])
    with allama.extract_stream(_streaming_openai(PIECES), People, _request()) as stream:
        seen = _rows_as_seen(stream)
        extracted = stream.finish()
        assert stream.partial == extracted.value == final
    assert extracted.metadata.root_wrapped is True
    assert seen[:3] == [[("Ada", None)], [("Ada", 36), (None, None)], [("Ada", 36), ("Bob", 7)]]

    text = '[{"name": "Ada", "age": 36}, {"name": "Bob", "age": 7}]'
    provider = _chunked_text(text, 7)
    request = ChatRequest("m").user("?").with_option(ExtractionMode.NATIVE)
    with allama.extract_stream(provider, People, request) as stream:
        seen = _rows_as_seen(stream)
        extracted = stream.finish()
        assert stream.partial == extracted.value == final
    assert extracted.metadata.root_wrapped is False
    assert list(dict.fromkeys(map(tuple, seen))) == [
        ((None, None),),
        (("Ada", None),),
        (("Ada", 36),),
        (("Ada", 36), (None, None)),
        (("Ada", 36), ("Bob", None)),
        (("Ada", 36), ("Bob", 7)),
    ]


def test_a_root_model_inside_an_object_shows_once_complete() -> None:
    text = '{"people": [{"name": "Ada", "age": 36}], "year": 1843}'
    provider = _chunked_text(text, 5)
    request = ChatRequest("m").user("?").with_option(ExtractionMode.NATIVE)
    with allama.extract_stream(provider, Census, request) as stream:
        seen = []
        for _ in stream:
            if stream.partial is not None:
                seen.append(stream.partial.__dict__.get("people"))
        value = stream.finish().value
    assert value == Census(people=People([Person(name="Ada", age=36)]), year=1843)
    assert set(map(repr, seen)) == {"None", repr(value.people)}


def test_a_root_model_streams_async() -> None:
    partial, extracted = _streamed_async(People)
    assert (
        partial
        == extracted.value
        == People([Person(name="Ada", age=36), Person(name="Bob", age=7)])
    )


def test_a_wrapped_literal_keeps_its_own_order_after_one_of_another_order() -> None:
    """`Literal["b", "a"] == Literal["a", "b"]`, and pydantic's generic models keep one
    class for both: the wrapper made for the first was sent for the second, its order and
    a scripted answer ("a") the first's."""
    provider = (
        TestProvider()
        .with_chat_capability(
            ChatCapability.RESPONSE_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED
        )
        .with_chat_capability(ChatCapability.TOOL_SCHEMA_ANY_ROOT, CapabilitySupport.UNSUPPORTED)
    )
    request = ChatRequest("m").user("x")
    first = allama.extract(provider, Literal["wrapped-a", "wrapped-b"], request)
    second = allama.extract(provider, Literal["wrapped-b", "wrapped-a"], request)
    assert (first.value, second.value) == ("wrapped-a", "wrapped-b")
    sent = provider.requests[-1].response_format
    assert sent is not None and sent.json_schema is not None
    assert sent.json_schema["properties"]["value"]["enum"] == ["wrapped-b", "wrapped-a"]
    with allama.extract_stream(provider, Literal["wrapped-b", "wrapped-a"], request) as stream:
        for _ in stream:
            pass
        assert stream.finish().value == "wrapped-b"
