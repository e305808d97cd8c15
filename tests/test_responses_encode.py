"""Encoding for the Responses API: how `api=` picks it, the body `POST /responses` gets, and
the warnings and refusals of what an endpoint or a model family cannot honour.

Schemas are held to Chat Completions: the same request to the same preset gets the same
schema, the same `strict` answer and the same warnings under either API.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest
from pydantic import BaseModel, Field

import allama
from allama import ChatRequest, ExtractionMode, Extractor
from allama.adapters.openai_compat._adapter import ChatCompletionsAdapter
from allama.adapters.openai_responses._adapter import ResponsesAdapter
from allama.adapters.openai_responses._decode import decode_response
from allama.errors import UnsupportedError
from allama.providers import PRESETS, HttpProvider
from allama.transport import Transport
from allama.types import (
    AssistantMessage,
    CapabilitySupport,
    ChatCapability,
    DocumentPart,
    ImagePart,
    Reasoning,
    Refusal,
    RequestField,
    ResponseFormat,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    ToolMessage,
    UnsupportedPolicy,
    UnsupportedStage,
    UserMessage,
    Warning,
)

KEY = "sk-test-responses-1234"
RESPONSES_PRESETS = ("openai", "azure-openai", "xai", "openrouter", "openai-compatible")
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
OPTIONAL = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "nick": {"type": "string", "maxLength": 8}},
    "required": ["name"],
}
MAP = {
    "type": "object",
    "properties": {"counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
    "required": ["counts"],
}


def responses(name: str = "openai", **options: Any) -> HttpProvider:
    if name in ("openai-compatible",) and "base_url" not in options:
        options["base_url"] = "https://llm.example.com/v1"
    if name == "azure-openai" and "endpoint" not in options:
        options["endpoint"] = "https://res.openai.azure.com"
    return allama.provider(name, api="responses", api_key=KEY, **options)


def chat(name: str = "openai", **options: Any) -> HttpProvider:
    if name in ("openai-compatible",) and "base_url" not in options:
        options["base_url"] = "https://llm.example.com/v1"
    if name == "azure-openai" and "endpoint" not in options:
        options["endpoint"] = "https://res.openai.azure.com"
    return allama.provider(name, api_key=KEY, **options)


def encode(
    request: ChatRequest, *, stream: bool = False, name: str = "openai"
) -> tuple[dict[str, Any], list[Warning]]:
    http, warnings = responses(name)._prepare(request, stream=stream)
    # The body is what goes on the wire: compact JSON.
    assert json.loads(http.content) == http.body
    return http.body, warnings


def fields(warnings: list[Warning]) -> list[tuple[str, str]]:
    return [(str(getattr(w.subject, "field", "")), str(w.kind)) for w in warnings]


# Which API


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("openai", "https://api.openai.com/v1/responses"),
        ("azure-openai", "https://res.openai.azure.com/openai/v1/responses"),
        ("xai", "https://api.x.ai/v1/responses"),
        ("openrouter", "https://openrouter.ai/api/v1/responses"),
        ("openai-compatible", "https://llm.example.com/v1/responses"),
    ],
)
def test_api_responses_on_each_preset_that_has_it(name: str, url: str) -> None:
    target = responses(name)
    assert isinstance(target.adapter, ResponsesAdapter)
    assert (target.name, target.preset.api, target.preset.dialect) == (
        name,
        "responses",
        "openai_responses",
    )
    http, _ = target._prepare(ChatRequest("gpt-5-mini").user("Hi"), stream=False)
    assert http.url == url and dict(http.params) == {}
    # The chat API is the default, and can be named (on the base URL, not the operation's:
    # Azure refuses an endpoint naming one).
    base = url.removesuffix("/responses")
    for default in (chat(name), allama.provider(name, api="chat", api_key=KEY, base_url=base)):
        assert isinstance(default.adapter, ChatCompletionsAdapter)
        assert default.preset.api == "chat"


def test_azure_speaks_the_v1_api_whatever_endpoint_form_it_is_given() -> None:
    for options in (
        {"endpoint": "https://res.openai.azure.com/"},
        {"endpoint": "https://res.openai.azure.com/openai/v1"},
    ):
        target = allama.provider("azure", api="responses", api_key=KEY, **options)
        http, _ = target._prepare(ChatRequest("my-gpt-4o").user("Hi"), stream=False)
        assert http.url == "https://res.openai.azure.com/openai/v1/responses"
        assert dict(http.params) == {}  # no `api-version` on the v1 API
        assert http.headers["api-key"] == KEY
        assert http.body["model"] == "my-gpt-4o"  # the deployment name
    # A dated version is no version of the v1 API: refused, not dropped.
    with pytest.raises(ValueError, match="takes no dated api-version"):
        allama.provider(
            "azure",
            api="responses",
            api_key=KEY,
            endpoint="https://res.openai.azure.com",
            api_version="2025-04-01-preview",
        )
    # The Chat Completions preset is untouched: deployment URLs with `api-version`.
    http, _ = chat("azure-openai")._prepare(ChatRequest("my-gpt-4o").user("Hi"), stream=False)
    assert http.url == "https://res.openai.azure.com/openai/deployments/my-gpt-4o/chat/completions"
    assert dict(http.params) == {"api-version": "2024-10-21"}


def test_the_api_is_preset_data() -> None:
    for name, preset in PRESETS.items():
        expected = {"responses"} if name in RESPONSES_PRESETS else set()
        assert set(preset.apis) == expected, name
        for changes in preset.apis.values():
            assert changes["dialect"] == "openai_responses"
    assert PRESETS["azure-openai"].apis["responses"]["deployment_path"] is None


@pytest.mark.parametrize("name", ["groq", "mistral", "anthropic", "gemini", "azure-foundry"])
def test_other_presets_refuse_the_responses_api_naming_those_that_have_it(name: str) -> None:
    with pytest.raises(ValueError) as caught:
        allama.provider(name, api="responses", api_key=KEY)
    message = str(caught.value)
    assert message.startswith(f"{name} has no api='responses'")
    assert "the presets that have it: openai, azure-openai, xai, openrouter, openai-compatible" in (
        message
    )


def test_unknown_and_mistyped_apis_are_refused() -> None:
    with pytest.raises(
        ValueError, match=r"unknown api 'assistants'; known APIs: .*chat.*responses"
    ):
        allama.provider("openai", api="assistants")
    with pytest.raises(TypeError, match="api must be a str"):
        allama.provider("openai", api=2)
    with pytest.raises(ValueError, match="anthropic has no api='chat'"):
        allama.provider("anthropic", api="chat")
    # An alias names the same preset.
    assert allama.provider(
        "azure", api="responses", endpoint="https://r.openai.azure.com"
    ).name == ("azure-openai")


def test_capabilities_are_the_chat_completions_ones() -> None:
    models = ("gpt-5-mini", "gpt-4o", "gpt-4-turbo", "o3-mini", "o1-mini", "something-else")
    for name in RESPONSES_PRESETS:
        ours, theirs = responses(name), chat(name)
        for model in models:
            for capability in ChatCapability:
                assert ours.chat_capability(model, capability) == theirs.chat_capability(
                    model, capability
                ), (name, model, capability)
    assert responses().chat_capability("gpt-5", ChatCapability.RESPONSE_SCHEMA_ANY_ROOT) is (
        CapabilitySupport.UNSUPPORTED
    )


# The body


def test_url_headers_and_the_smallest_body() -> None:
    http, warnings = responses()._prepare(ChatRequest("gpt-4o").user("Hi"), stream=False)
    assert http.url == "https://api.openai.com/v1/responses"
    assert dict(http.headers) == {
        "content-type": "application/json",
        "accept": "application/json",
        "authorization": f"Bearer {KEY}",
    }
    assert http.body == {
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "Hi"}],
        "store": False,
    }
    assert warnings == []


def test_system_messages_before_the_conversation_are_instructions() -> None:
    request = (
        ChatRequest("gpt-4o")
        .system("Be brief.")
        .system("Answer in French.")
        .developer("Prefer tools.")
        .user("Hi")
        .system("Now in German.")
        .developer("Stop.")
    )
    body, warnings = encode(request)
    assert body["instructions"] == "Be brief.\n\nAnswer in French."
    assert body["input"] == [
        {"role": "developer", "content": "Prefer tools."},
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": "Now in German."},
        {"role": "developer", "content": "Stop."},
    ]
    assert warnings == []
    # Where the endpoint has no developer role, a developer message is a system one.
    body, _ = encode(request.model_copy(update={"model": "m"}), name="openai-compatible")
    assert body["instructions"] == "Be brief.\n\nAnswer in French.\n\nPrefer tools."
    assert [item["role"] for item in body["input"]] == ["user", "system", "system"]


def test_user_parts_images_and_documents() -> None:
    request = ChatRequest("gpt-4o").user(
        "What is in these?",
        ImagePart(url="https://example.com/cat.png"),
        ImagePart(data=b"\x89PNG", media_type="image/png"),
        DocumentPart(data=b"%PDF-1.7", media_type="application/pdf", title="report.pdf"),
        DocumentPart(data=b"%PDF-1.7", media_type="application/pdf"),
        DocumentPart(url="https://example.com/a.pdf"),
        DocumentPart(data="Zürich notes".encode(), media_type="text/plain"),
    )
    body, warnings = encode(request)
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is in these?"},
                {
                    "type": "input_image",
                    "image_url": "https://example.com/cat.png",
                    "detail": "auto",
                },
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBORw==",
                    "detail": "auto",
                },
                {
                    "type": "input_file",
                    "filename": "report.pdf",
                    "file_data": "data:application/pdf;base64,JVBERi0xLjc=",
                },
                {
                    "type": "input_file",
                    "filename": "document.pdf",
                    "file_data": "data:application/pdf;base64,JVBERi0xLjc=",
                },
                {"type": "input_file", "file_url": "https://example.com/a.pdf"},
                {"type": "input_text", "text": "Zürich notes"},
            ],
        }
    ]
    assert warnings == []


def test_documents_an_endpoint_does_not_take_are_left_out_with_a_warning() -> None:
    request = ChatRequest("m").user(
        "Read",
        DocumentPart(data=b"%PDF", media_type="application/pdf"),
        DocumentPart(data=b"<html>", media_type="text/html"),
    )
    body, warnings = encode(request, name="openai-compatible")
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "Read"}]}]
    assert fields(warnings) == [("documents", "unsupported")] * 2
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR), name="openai-compatible")
    assert caught.value.field is RequestField.DOCUMENTS


def test_assistant_turns_tool_calls_and_results_as_items() -> None:
    call = ToolCall(id="call_1", name="lookup", arguments='{"city": "Paris", "n": 2}')
    request = (
        ChatRequest("gpt-4o")
        .user("Weather?")
        .assistant(
            [
                TextPart(text="Looking."),
                Refusal(text="Not the rest."),
                call,
                ToolCall(id="call_2", name="lookup", arguments="{}"),
                TextPart(text="Done."),
            ]
        )
        .tool_result(call, "18C")
        .tool_result("call_2", "failed", is_error=True)
        .user("Thanks")
    )
    body, warnings = encode(request)
    assert body["input"] == [
        {"role": "user", "content": "Weather?"},
        # Its text and its refusal, in their order: no input message part holds a refusal.
        {"role": "assistant", "content": "Looking.Not the rest."},
        # The arguments go back as the string they were, spaces and all.
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": '{"city": "Paris", "n": 2}',
        },
        {"type": "function_call", "call_id": "call_2", "name": "lookup", "arguments": "{}"},
        {"role": "assistant", "content": "Done."},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {"type": "function_call_output", "call_id": "call_2", "output": "failed"},
        {"role": "user", "content": "Thanks"},
    ]
    assert fields(warnings) == [("tool_result_error", "unsupported")]


def _gemini_call(city: str) -> bytes:
    """A Gemini answer calling `weather`, its `functionCall` without an id."""
    call = {"functionCall": {"name": "weather", "args": {"city": city}}}
    answer = {
        "candidates": [
            {"content": {"role": "model", "parts": [call]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    }
    return json.dumps(answer).encode()


def _call_ids(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each call and result item sent, as (type, call_id, its arguments or output)."""
    return [
        (item["type"], item["call_id"], item.get("arguments", item.get("output", "")))
        for item in body["input"]
        if "call_id" in item
    ]


@pytest.mark.parametrize("name", RESPONSES_PRESETS)
def test_a_gemini_tool_loop_continued_on_the_responses_api_sends_unique_call_ids(
    name: str,
) -> None:
    """Gemini gives calls no id: allama's stand-in `call_0` restarts in every response, and
    the API answers 400 to a repeated `call_id` ("Duplicate function_call_output")."""
    answers = [_gemini_call("Paris"), _gemini_call("Rome")]

    def gemini_endpoint(http: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "application/json"}
        return httpx2.Response(200, content=answers.pop(0), headers=headers)

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(gemini_endpoint)))
    gemini = allama.provider("gemini", api_key=KEY, transport=transport)
    weather = ToolDefinition(name="weather", parameters={"type": "object"})
    request = ChatRequest("gemini-2.5-flash").user("Paris, then Rome?").with_tools([weather])
    for result in ("sunny", "rainy"):
        response = gemini.chat(request)
        request = request.push(response.to_assistant_message())
        request = request.tool_result(response.tool_calls()[0], result)
    assert [m.tool_call_id for m in request.messages if isinstance(m, ToolMessage)] == [
        "call_0",
        "call_0",
    ]
    continued = ChatRequest("gpt-5").extend_messages(request.messages).with_tools([weather])
    body, warnings = encode(continued, name=name)
    assert _call_ids(body) == [
        ("function_call", "call_0", '{"city":"Paris"}'),
        ("function_call_output", "call_0", "sunny"),
        ("function_call", "call_0_1", '{"city":"Rome"}'),
        ("function_call_output", "call_0_1", "rainy"),
    ]
    assert warnings == []


def test_repeated_call_ids_go_unique_and_unique_ones_as_given() -> None:
    """A repeat gets a suffix no call in the request has (the third call's own id is what the
    second's would be), its result follows it, and the same request encodes the same way."""
    request = (
        ChatRequest("gpt-5")
        .user("Paris, then Rome, then Oslo?")
        .assistant([ToolCall.of("call_0", "weather", {"city": "Paris"})])
        .tool_result("call_0", "sunny")
        .assistant([ToolCall.of("call_0", "weather", {"city": "Rome"})])
        .tool_result("call_0", "rainy")
        .assistant([ToolCall.of("call_0_1", "weather", {"city": "Oslo"})])
        .tool_result("call_0_1", "snowy")
    )
    body, _ = encode(request)
    assert _call_ids(body) == [
        ("function_call", "call_0", '{"city":"Paris"}'),
        ("function_call_output", "call_0", "sunny"),
        ("function_call", "call_0_1", '{"city":"Rome"}'),
        ("function_call_output", "call_0_1", "rainy"),
        ("function_call", "call_0_1_1", '{"city":"Oslo"}'),
        ("function_call_output", "call_0_1_1", "snowy"),
    ]
    assert encode(request)[0] == body
    # Ids already unique (OpenAI's own, any characters) go as they are.
    unique = (
        ChatRequest("gpt-5")
        .user("Paris and Rome?")
        .assistant(
            [
                ToolCall.of("call_abc", "weather", {"city": "Paris"}),
                ToolCall.of("toolu_01:x.y", "weather", {"city": "Rome"}),
            ]
        )
        .tool_result("call_abc", "sunny")
        .tool_result("toolu_01:x.y", "rainy")
    )
    assert [(kind, i) for kind, i, _ in _call_ids(encode(unique)[0])] == [
        ("function_call", "call_abc"),
        ("function_call", "toolu_01:x.y"),
        ("function_call_output", "call_abc"),
        ("function_call_output", "toolu_01:x.y"),
    ]


def test_parallel_calls_sharing_an_id_each_get_their_own_result() -> None:
    """A server that gives every call of a turn one id: each result answers the next call
    of its turn, in order."""
    request = (
        ChatRequest("gpt-5")
        .user("Paris and Rome?")
        .assistant(
            [
                ToolCall.of("call_0", "weather", {"city": "Paris"}),
                ToolCall.of("call_0", "weather", {"city": "Rome"}),
            ]
        )
        .tool_result("call_0", "sunny")
        .tool_result("call_0", "rainy")
        .assistant([ToolCall.of("call_0", "weather", {"city": "Oslo"})])
        .tool_result("call_0", "snowy")
    )
    body, _ = encode(request)
    assert _call_ids(body) == [
        ("function_call", "call_0", '{"city":"Paris"}'),
        ("function_call", "call_0_1", '{"city":"Rome"}'),
        ("function_call_output", "call_0", "sunny"),
        ("function_call_output", "call_0_1", "rainy"),
        ("function_call", "call_0_2", '{"city":"Oslo"}'),
        ("function_call_output", "call_0_2", "snowy"),
    ]


def test_a_repeated_id_of_a_custom_tool_call_keeps_its_result_a_custom_one() -> None:
    """A function's call and a custom tool's share the stand-in id: each result goes back as
    its own call's kind, under its own call's id."""
    request = (
        ChatRequest("gpt-5")
        .user("Weather, then count?")
        .assistant([ToolCall.of("call_0", "weather", {"city": "Paris"})])
        .tool_result("call_0", "sunny")
        .assistant([ToolCall(id="call_0", name="run_sql", arguments="SELECT 1")])
        .tool_result("call_0", "1")
        .with_option_json("openai_responses", {"tools": [{"type": "custom", "name": "run_sql"}]})
    )
    body, _ = encode(request)
    assert body["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_0",
            "name": "weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_0", "output": "sunny"},
        {"type": "custom_tool_call", "call_id": "call_0_1", "name": "run_sql", "input": "SELECT 1"},
        {"type": "custom_tool_call_output", "call_id": "call_0_1", "output": "1"},
    ]


SPEC = Path("/work/shared/reference/specs/openai-openapi.yaml")
"""OpenAI's OpenAPI spec, whose `InputItem` is every item `input` takes."""


@functools.cache
def _spec_input_item() -> jsonschema.Draft202012Validator:
    yaml = pytest.importorskip("yaml")
    if not SPEC.exists():
        pytest.skip(f"OpenAI's OpenAPI spec is not at {SPEC}")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    components = yaml.load(SPEC.read_text(encoding="utf-8"), Loader=loader)["components"]
    # Any of its kinds: its `oneOf` is told apart by the `type` discriminator, which JSON
    # Schema does not read, and a user message with a content list fits two of them
    # (`EasyInputMessage` and `InputMessage`), the spec's own overlap.
    schema = {"components": components, "anyOf": components["schemas"]["InputItem"]["oneOf"]}
    return jsonschema.Draft202012Validator(schema)


def _unfit(item: dict[str, Any]) -> list[str]:
    """Why `item` is no `InputItem` of the spec (each deepest error), or nothing."""
    found: list[str] = []

    def walk(errors: Any) -> None:
        for error in errors:
            if error.context:
                walk(error.context)
            else:
                where = "/".join(map(str, error.absolute_path))
                found.append(f"{where}: {error.message[:100]}")

    walk(_spec_input_item().iter_errors(item))
    return sorted(set(found))


def _stored_turn() -> AssistantMessage:
    """A turn of a stored response (`store: true`), its item ids kept: reasoning that goes
    by id alone, then a message with a text and a refusal part, then a call."""
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Looking.", "annotations": [], "logprobs": []},
                {"type": "refusal", "refusal": "Not the rest."},
            ],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": "{}",
            "status": "completed",
        },
    ]
    answer = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5-2025-08-07",
        "store": True,
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 7, "total_tokens": 17},
    }
    content = json.dumps(answer).encode()
    return decode_response(200, {}, content, provider="openai").to_assistant_message()


def test_assistant_messages_go_back_as_input_messages_of_their_text() -> None:
    """An output message needs its `id` and `status` (and `annotations` on each text part):
    strict Responses servers (vLLM, Azure AI Foundry, LiteLLM) answer 400 without them. A
    message allama names no id is an input message, its text its content, and its refusal
    with it (no input content part is a refusal), as a refusal alone goes, rather than
    left out beside text."""
    turns = [
        AssistantMessage(content=(TextPart(text="Ada"), TextPart(text=" Lovelace."))),
        AssistantMessage(content=(Refusal(text="I can't help with that."),)),
        AssistantMessage(content=(TextPart(text="Partly."), Refusal(text="Not the rest."))),
    ]
    for turn in turns:
        request = ChatRequest("gpt-4o").user("Who?").push(turn).user("And?")
        body, warnings = encode(request)
        assert body["input"][0] == {"role": "user", "content": "Who?"}
        assert body["input"][2] == {"role": "user", "content": "And?"}
        assert warnings == []
    sent = [encode(ChatRequest("gpt-4o").user("Who?").push(turn))[0]["input"][1] for turn in turns]
    assert sent == [
        {"role": "assistant", "content": "Ada Lovelace."},
        {"role": "assistant", "content": "I can't help with that."},
        {"role": "assistant", "content": "Partly.Not the rest."},
    ]


@pytest.mark.parametrize("name", RESPONSES_PRESETS)
def test_a_refusal_beside_text_goes_back_with_it_in_their_order(name: str) -> None:
    """No input content part is a refusal, and an output message needs the id allama does
    not have: the refusal goes in the content with the text, as a refusal alone does,
    rather than left out."""
    turn = [
        TextPart(text="Part one. "),
        Refusal(text="I won't do part two."),
        TextPart(text=" Ask me again."),
    ]
    request = ChatRequest("gpt-4.1").user("x").assistant(turn).user("why?")
    body, warnings = encode(request, name=name)
    assert body["input"] == [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "Part one. I won't do part two. Ask me again."},
        {"role": "user", "content": "why?"},
    ]
    assert warnings == []


def test_a_message_sent_by_its_id_is_a_whole_output_message() -> None:
    """After reasoning that goes by id alone (`store: true`), the message goes by its id
    too, as the output message the spec requires: `status`, each text part's `annotations`
    and `logprobs`, and its refusal part kept."""
    request = (
        ChatRequest("gpt-5")
        .user("Weather?")
        .push(_stored_turn())
        .tool_result("call_1", "18C")
        .with_option_json("openai_responses", {"store": True})
    )
    body, warnings = encode(request)
    assert body["input"][1:] == [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Looking.", "annotations": [], "logprobs": []},
                {"type": "refusal", "refusal": "Not the rest."},
            ],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
    ]
    assert warnings == []


def test_every_input_item_allama_sends_is_an_input_item_of_the_spec() -> None:
    """Each kind of item, validated against `InputItem` in OpenAI's OpenAPI spec."""
    image = ImagePart(data=b"\x89PNG", media_type="image/png")
    pdf = DocumentPart(data=b"%PDF-1.7", media_type="application/pdf", title="a.pdf")
    call = ToolCall(id="call_1", name="lookup", arguments="{}")
    custom = ToolCall(id="call_2", name="patch", arguments="*** Begin Patch")
    encrypted = Reasoning(text="Plan.", signature="rs_1", encrypted_content="gAAA")
    unstored = (
        ChatRequest("gpt-5")
        .system("Be brief.")
        .user("Weather?")
        .push(
            UserMessage(content=(TextPart(text="And this?"), image, pdf)),
            SystemMessage(content="A later instruction."),
            AssistantMessage(content=(TextPart(text="Looking."), Refusal(text="Not that."))),
            AssistantMessage(content=(Refusal(text="No."),)),
            AssistantMessage(content=(encrypted, TextPart(text="Calling."), call, custom)),
            ToolMessage(tool_call_id="call_1", content="18C"),
            ToolMessage(tool_call_id="call_2", content="done"),
        )
        .developer("Cite sources.")
        .with_option_json("openai_responses", {"tools": [{"type": "custom", "name": "patch"}]})
    )
    stored = (
        ChatRequest("gpt-5")
        .user("Weather?")
        .push(_stored_turn())
        .tool_result("call_1", "18C")
        .with_option_json("openai_responses", {"store": True})
    )
    items = [*encode(unstored)[0]["input"], *encode(stored)[0]["input"]]
    assert {json.dumps(item): _unfit(item) for item in items} == {
        json.dumps(item): [] for item in items
    }
    # Every kind is among them.
    kinds = {(item.get("type"), item.get("role"), "id" in item) for item in items}
    assert kinds == {
        (None, "user", False),
        (None, "system", False),
        (None, "developer", False),
        (None, "assistant", False),
        ("message", "assistant", True),
        ("reasoning", None, True),
        ("function_call", None, False),
        ("function_call", None, True),
        ("function_call_output", None, False),
        ("custom_tool_call", None, False),
        ("custom_tool_call_output", None, False),
    }


def _with_reasoning(*blocks: Reasoning) -> ChatRequest:
    turn = AssistantMessage(content=(*blocks, ToolCall(id="call_1", name="f", arguments="{}")))
    return ChatRequest("gpt-5").user("Hi").push(turn).tool_result("call_1", "ok")


def test_reasoning_goes_back_by_id_with_its_encrypted_content() -> None:
    body, warnings = encode(
        _with_reasoning(Reasoning(text="Plan.\n\nAct.", signature="rs_1", encrypted_content="gAAA"))
    )
    assert body["input"][1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Plan.\n\nAct."}],
        "encrypted_content": "gAAA",
    }
    assert body["input"][2]["type"] == "function_call"
    assert warnings == []
    body, _ = encode(_with_reasoning(Reasoning(signature="rs_2", encrypted_content="gAAA")))
    assert body["input"][1] == {
        "type": "reasoning",
        "id": "rs_2",
        "summary": [],
        "encrypted_content": "gAAA",
    }


def test_reasoning_that_cannot_be_read_back_is_left_out_with_a_warning() -> None:
    unreadable = (
        Reasoning(text="No encrypted content", signature="rs_1"),  # with `store: false`
        Reasoning(text="Claude's", signature="EqQBCkYIBxgCKkB"),  # another provider's
        Reasoning(text="DeepSeek's"),
        Reasoning(encrypted_content="EmwKAhgBEgy3va3pzix"),  # redacted thinking, no id
    )
    for block in unreadable:
        body, warnings = encode(_with_reasoning(block))
        assert [item.get("type") for item in body["input"]] == [
            None,
            "function_call",
            "function_call_output",
        ]
        assert fields(warnings) == [("reasoning", "approximated")]
    # Stored on the server, an item goes back by its id alone, and only with the id of the
    # item that followed it (the API refuses it without: "provided without its required
    # following item"); a turn built by hand knows none, so the item is left out.
    stored = _with_reasoning(unreadable[0]).with_option_json("openai_responses", {"store": True})
    body, warnings = encode(stored)
    assert [item.get("type") for item in body["input"]] == [
        None,
        "function_call",
        "function_call_output",
    ]
    assert body["store"] is True and "include" not in body
    assert fields(warnings) == [("reasoning", "approximated")]


def test_tools_are_flat_and_always_say_strict() -> None:
    tools = [
        ToolDefinition(name="person", parameters=PERSON, description="A person", strict=True),
        ToolDefinition(name="loose", parameters=OPTIONAL),
        ToolDefinition(name="never", parameters=OPTIONAL, strict=False),
    ]
    request = (
        ChatRequest("gpt-4.1")
        .user("Hi")
        .with_tools(tools)
        .with_tool_choice(ToolChoice.tool("person"))
        .with_parallel_tool_calls(True)
    )
    body, warnings = encode(request)
    assert body["tools"] == [
        {
            "type": "function",
            "name": "person",
            "description": "A person",
            "parameters": PERSON,
            "strict": True,
        },
        # Without `strict`, the server would make the schema strict where it can, silently.
        {"type": "function", "name": "loose", "parameters": OPTIONAL, "strict": False},
        {"type": "function", "name": "never", "parameters": OPTIONAL, "strict": False},
    ]
    assert body["tool_choice"] == {"type": "function", "name": "person"}
    assert body["parallel_tool_calls"] is True
    # The caller's parallel calls go as asked, but the strict tool is not enforced under them.
    assert fields(warnings) == [("tools", "approximated")]
    assert "tool `person` was sent with it beside `parallel_tool_calls: true`" in (
        warnings[0].message
    )


@pytest.mark.parametrize("name", RESPONSES_PRESETS)
def test_a_tool_of_no_arguments_goes_with_empty_properties(name: str) -> None:
    """OpenAI answers 400 to an object root without `properties` ("object schema missing
    properties", gpt-5), as `ToolDefinition`'s default `{"type": "object"}` is; strict,
    it is an object closed with no keys, not one open to any keys sent loose."""
    tools = [ToolDefinition(name="now"), ToolDefinition(name="today", strict=True)]
    body, warnings = encode(ChatRequest("gpt-5").user("Hi").with_tools(tools), name=name)
    closed = {"type": "object", "properties": {}, "additionalProperties": False, "required": []}
    assert body["tools"] == [
        {
            "type": "function",
            "name": "now",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        },
        {"type": "function", "name": "today", "parameters": closed, "strict": True},
    ]
    unchecked = (
        "tool `today` was approximated: the schema at `/` was sent unchecked: the endpoint "
        "does not report which keywords it enforces"
    )
    # Only where no endpoint says which keywords it enforces, as of any strict tool there.
    expected = [unchecked] if name in ("openrouter", "openai-compatible") else []
    assert [w.message for w in warnings] == expected


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice.auto(), "auto"),
        (ToolChoice.none(), "none"),
        (ToolChoice.required(), "required"),
        (ToolChoice.tool("f"), {"type": "function", "name": "f"}),
    ],
)
def test_tool_choice_modes(choice: ToolChoice, wire: Any) -> None:
    request = ChatRequest("gpt-4o").user("Hi").with_tools([ToolDefinition(name="f")])
    body, _ = encode(request.with_tool_choice(choice))
    assert body["tool_choice"] == wire


def test_strict_tools_are_called_one_at_a_time_where_the_endpoint_needs_it() -> None:
    strict = (
        ChatRequest("gpt-4o")
        .user("Hi")
        .add_tool(ToolDefinition(name="person", parameters=PERSON, strict=True))
    )
    for name in ("openai", "azure-openai"):
        body, _ = encode(strict, name=name)
        assert body["parallel_tool_calls"] is False
    body, _ = encode(strict, name="xai")
    assert "parallel_tool_calls" not in body
    loose = ChatRequest("gpt-4o").user("Hi").add_tool(ToolDefinition(name="f"))
    assert "parallel_tool_calls" not in encode(loose)[0]


def test_text_format_json_schema_json_mode_and_text() -> None:
    request = (
        ChatRequest("gpt-4o")
        .user("Hi")
        .with_response_format(
            ResponseFormat.for_schema(PERSON, name="a person!", description="Who")
        )
    )
    body, warnings = encode(request)
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "a_person_",
            "schema": PERSON,
            "description": "Who",
            "strict": True,
        }
    }
    assert warnings == []
    loose = request.with_response_format(ResponseFormat.for_schema(OPTIONAL, strict=None))
    assert encode(loose)[0]["text"]["format"] == {
        "type": "json_schema",
        "name": "response",
        "schema": OPTIONAL,
        "strict": False,
    }
    json_mode = request.with_response_format(ResponseFormat.json_object())
    assert encode(json_mode)[0]["text"] == {"format": {"type": "json_object"}}
    text = request.with_response_format(ResponseFormat.text())
    assert encode(text)[0]["text"] == {"format": {"type": "text"}}


def _schema_request(model: str, schema: dict[str, Any], *, tool: bool) -> ChatRequest:
    request = ChatRequest(model).user("Hi")
    if tool:
        return request.add_tool(ToolDefinition(name="answer", parameters=schema, strict=True))
    return request.with_response_format(ResponseFormat.for_schema(schema, name="answer"))


@pytest.mark.parametrize("name", RESPONSES_PRESETS)
@pytest.mark.parametrize("schema", [PERSON, OPTIONAL, MAP], ids=["person", "optional", "map"])
@pytest.mark.parametrize("tool", [False, True], ids=["format", "tool"])
@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4-turbo", "custom-model"])
def test_schemas_are_sent_exactly_as_chat_completions_sends_them(
    name: str, schema: dict[str, Any], tool: bool, model: str
) -> None:
    request = _schema_request(model, schema, tool=tool)
    ours, our_warnings = responses(name)._prepare(request, stream=False)
    theirs, their_warnings = chat(name)._prepare(request, stream=False)
    # But for where the schema in words went, for a family with JSON mode alone: first in
    # the input where the endpoint reads the input alone for "json" (OpenAI's, Azure's).
    first = "written first in the input as a developer message"
    said = [
        w.model_copy(update={"message": w.message.replace(first, "written into the instructions")})
        for w in our_warnings
    ]
    assert said == list(their_warnings)
    if tool:
        (function,) = [t["function"] for t in theirs.body["tools"]]
        (flat,) = ours.body["tools"]
        assert flat == {"type": "function", **function, "strict": bool(function.get("strict"))}
    else:
        fmt = theirs.body["response_format"]
        inner = fmt.get("json_schema")
        expected = (
            {"type": "json_schema", **inner, "strict": bool(inner.get("strict"))}
            if isinstance(inner, dict)
            else fmt
        )
        assert ours.body["text"] == {"format": expected}
    # And under the error policy, the same refusals before sending.
    strict = request.with_unsupported_policy(UnsupportedPolicy.ERROR)
    outcomes = []
    for target in (responses(name), chat(name)):
        try:
            target.validate_chat_request(strict)
            outcomes.append(None)
        except UnsupportedError as error:
            assert error.stage is UnsupportedStage.BEFORE_SENDING
            outcomes.append(str(error))
    assert outcomes[0] == outcomes[1]


def test_a_schema_strict_mode_cannot_hold_goes_loose_with_a_warning() -> None:
    body, warnings = encode(_schema_request("gpt-4o", MAP, tool=False))
    assert body["text"]["format"]["strict"] is False
    assert ("response_format", "unsupported") in fields(warnings)
    with pytest.raises(UnsupportedError) as caught:
        encode(
            _schema_request("gpt-4o", MAP, tool=True).with_unsupported_policy(
                UnsupportedPolicy.ERROR
            )
        )
    assert caught.value.field is RequestField.TOOLS


def test_a_family_with_json_mode_only_gets_json_object_with_a_refusal() -> None:
    body, warnings = encode(_schema_request("gpt-4-turbo", PERSON, tool=False))
    assert body["text"] == {"format": {"type": "json_object"}}
    assert fields(warnings) == [("response_format", "unsupported")]
    # Told the schema in words, which also says "JSON" as the mode requires: in an input
    # message, first, for OpenAI reads the word there and not in `instructions`.
    schema = json.dumps(PERSON, separators=(",", ":"))
    note = f"Answer with one JSON object that follows this JSON Schema:\n{schema}"
    assert "instructions" not in body
    assert body["input"] == [
        {"role": "developer", "content": note},
        {"role": "user", "content": "Hi"},
    ]
    request = _schema_request("gpt-4-turbo", PERSON, tool=False)
    request = request.model_copy(
        update={"messages": [SystemMessage(content="Be brief."), *request.messages]}
    )
    body, _ = encode(request)
    assert body["instructions"] == "Be brief."
    assert body["input"][0] == {"role": "developer", "content": note}
    # An input message that says JSON already: the note goes with the instructions.
    asks = ChatRequest("gpt-4-turbo").system("Be brief.").user("Hi, in JSON")
    asks = asks.with_response_format(request.response_format)
    body, _ = encode(asks)
    assert body["instructions"] == f"Be brief.\n\n{note}"
    assert body["input"] == [{"role": "user", "content": "Hi, in JSON"}]


def test_openrouter_requires_the_parameters_when_a_schema_is_sent() -> None:
    request = _schema_request("openai/gpt-5", PERSON, tool=False).with_option_json(
        "openai_responses", {"provider": {"order": ["openai"]}}
    )
    body, _ = encode(request, name="openrouter")
    assert body["provider"] == {"order": ["openai"], "require_parameters": True}
    body, _ = encode(ChatRequest("openai/gpt-5").user("Hi"), name="openrouter")
    assert "provider" not in body


def test_reasoning_effort_and_encrypted_content_where_the_family_reasons() -> None:
    # No summary is asked for: OpenAI refuses one to an organization it has not verified.
    body, warnings = encode(ChatRequest("gpt-5").user("Hi").with_reasoning_effort("low"))
    assert body["reasoning"] == {"effort": "low"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert warnings == []
    # A reasoning family reasons without being asked: its reasoning is kept all the same.
    body, _ = encode(ChatRequest("gpt-5-mini").user("Hi"))
    assert "reasoning" not in body and body["include"] == ["reasoning.encrypted_content"]
    body, _ = encode(ChatRequest("gpt-5.1").user("Hi").with_reasoning_effort("none"))
    assert body["reasoning"] == {"effort": "none"} and "include" not in body
    # A model that does not reason answers 400 to `include`, and takes no effort.
    body, warnings = encode(ChatRequest("gpt-4o").user("Hi").with_reasoning_effort("high"))
    assert "reasoning" not in body and "include" not in body
    assert fields(warnings) == [("reasoning_effort", "unsupported")]
    # Nor does the chat model of ChatGPT, a `gpt-5` by name.
    for model in ("gpt-5-chat-latest", "gpt-5-chat"):
        body, warnings = encode(ChatRequest(model).user("Hi").with_reasoning_effort("low"))
        assert "reasoning" not in body and "include" not in body
        assert fields(warnings) == [("reasoning_effort", "unsupported")]
    # A family nobody knows reasons when asked to.
    body, _ = encode(
        ChatRequest("m").user("Hi").with_reasoning_effort("high"), name="openai-compatible"
    )
    assert body["reasoning"] == {"effort": "high"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert "include" not in encode(ChatRequest("m").user("Hi"), name="openai-compatible")[0]


def test_efforts_a_family_maps_are_approximated_as_in_chat_completions() -> None:
    request = ChatRequest("grok-3-mini").user("Hi").with_reasoning_effort("medium")
    body, warnings = encode(request, name="xai")
    assert body["reasoning"] == {"effort": "high"}
    assert warnings == chat("xai")._prepare(request, stream=False)[1]
    assert fields(warnings) == [("reasoning_effort", "approximated")]


def test_sampling_limits_and_what_the_api_has_no_field_for() -> None:
    request = (
        ChatRequest("gpt-4o")
        .user("Hi")
        .with_temperature(0.2)
        .with_top_p(0.9)
        .with_max_output_tokens(512)
    )
    body, warnings = encode(request)
    assert (body["temperature"], body["top_p"], body["max_output_tokens"]) == (0.2, 0.9, 512)
    assert warnings == []
    body, warnings = encode(request.with_max_output_tokens(5).with_stop("END").with_seed(7))
    assert body["max_output_tokens"] == 16
    assert "stop" not in body and "seed" not in body
    assert fields(warnings) == [
        ("stop", "unsupported"),
        ("seed", "unsupported"),
        ("max_output_tokens", "approximated"),
    ]
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_seed(7).with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.SEED


def _said(warnings: list[Warning]) -> list[tuple[str, str, str]]:
    return [(str(getattr(w.subject, "field", "")), str(w.kind), w.message) for w in warnings]


@pytest.mark.parametrize(
    ("model", "limit", "asked"),
    [
        ("gpt-4o", 16_384, 20_480),
        ("gpt-4.1-mini", 32_768, 40_000),
        ("o4-mini", 100_000, 100_001),
        ("o3-pro", 100_000, 150_000),
        ("gpt-5-nano", 128_000, 200_000),
        ("gpt-5-pro", 272_000, 300_000),
    ],
)
def test_an_output_limit_above_the_models_is_lowered_as_in_chat_completions(
    model: str, limit: int, asked: int
) -> None:
    """OpenAI answers 400 to a `max_output_tokens` above the model's limit: the limit is
    sent, with the warning Chat Completions gives, and the span shows it."""
    request = ChatRequest(model).user("Hi").with_max_output_tokens(asked)
    http, warnings = responses()._prepare(request, stream=False)
    assert http.body["max_output_tokens"] == limit
    assert _said(warnings) == [
        (
            "max_output_tokens",
            "unsupported",
            f"`{model}` on OpenAI writes at most {limit} output tokens; {limit} was sent in "
            f"place of {asked}",
        )
    ]
    assert warnings == chat()._prepare(request, stream=False)[1]
    assert http.as_sent == {"max_output_tokens": limit}
    # The dry run says so too.
    assert list(responses().validate_chat_request(request).warnings) == warnings


def test_an_output_limit_within_the_models_or_of_an_unknown_one_goes_as_asked() -> None:
    for name, model, asked in (
        ("openai", "gpt-4o", 16_384),
        ("openai", "gpt-9-next", 500_000),
        ("xai", "grok-4", 200_000),
        ("openrouter", "openai/gpt-4o", 20_480),
    ):
        request = ChatRequest(model).user("Hi").with_max_output_tokens(asked)
        http, warnings = responses(name)._prepare(request, stream=False)
        assert (http.body["max_output_tokens"], warnings, http.as_sent) == (asked, [], {})


def test_an_output_limit_over_the_models_is_refused_under_error_and_the_options_goes() -> None:
    request = ChatRequest("gpt-4o").user("Hi").with_max_output_tokens(20_480)
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert str(caught.value) == (
        "cannot send `max_output_tokens`: `gpt-4o` on OpenAI writes at most 16384 output tokens"
    )
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    # The body option's own limit goes in place of allama's: nothing is lowered.
    body, warnings = encode(
        request.with_option_json("openai_responses", {"max_output_tokens": 30_000})
    )
    assert (body["max_output_tokens"], warnings) == (30_000, [])


def test_streaming_and_the_option_namespace() -> None:
    request = (
        ChatRequest("gpt-5")
        .user("Hi")
        .with_reasoning_effort("low")
        .with_response_format(ResponseFormat.for_schema(PERSON, name="person"))
        .with_option_json(
            "openai_responses",
            {
                "previous_response_id": "resp_prev",
                "text": {"verbosity": "low"},
                "reasoning": {"summary": "detailed"},
                "include": ["message.output_text.logprobs", "reasoning.encrypted_content"],
                "truncation": "auto",
            },
        )
    )
    http, _ = responses()._prepare(request, stream=True)
    body = http.body
    assert http.headers["accept"] == "text/event-stream"
    assert body["stream"] is True
    assert body["previous_response_id"] == "resp_prev" and body["truncation"] == "auto"
    # Objects and lists of the option are added to allama's, not put in their place.
    assert body["text"]["verbosity"] == "low"
    assert body["text"]["format"]["name"] == "person"
    assert body["reasoning"] == {"effort": "low", "summary": "detailed"}
    assert body["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    # Other fields replace allama's.
    replaced = request.with_option_json("openai_responses", {"store": True, "tool_choice": "none"})
    body, _ = encode(replaced)
    assert body["store"] is True and body["tool_choice"] == "none" and "include" not in body


def test_the_key_never_shows() -> None:
    target = responses()
    assert KEY not in repr(target)
    http, _ = target._prepare(ChatRequest("gpt-4o").user("Hi"), stream=False)
    assert KEY not in repr(http)


# Extraction plans


class _Strings(BaseModel):
    name: str


class _Unsigned(BaseModel):
    count: int = Field(ge=0)


class _Map(BaseModel):
    counts: dict[str, int]


def _planned(target: HttpProvider, model: str, mode: ExtractionMode) -> tuple[str, ...]:
    out = []
    for tp in (_Strings, _Unsigned, _Map, list[int]):
        request = ChatRequest(model).user("x").with_option(mode)
        try:
            plan = Extractor().plan(target, tp, request)
        except UnsupportedError:
            out.append("refused")
            continue
        out.append(f"{plan.enforcement.value}{' wrapped' if plan.root_wrapped else ''}")
    return tuple(out)


@pytest.mark.parametrize("name", RESPONSES_PRESETS)
@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_extraction_plans_are_the_chat_completions_ones(name: str, mode: ExtractionMode) -> None:
    model = {"xai": "grok-4", "openrouter": "openai/gpt-5"}.get(name, "gpt-4o")
    assert _planned(responses(name), model, mode) == _planned(chat(name), model, mode)


def test_seed_types_on_openai() -> None:
    """Native: exact, exact (OpenAI's current subset keeps `minimum`), a map not enforced,
    a list wrapped in an object root; forced tool the same."""
    native = _planned(responses(), "gpt-4o", ExtractionMode.NATIVE)
    assert native == ("exact", "exact", "not_enforced", "exact wrapped")
    forced = _planned(responses(), "gpt-4o", ExtractionMode.FORCED_TOOL)
    assert forced == ("exact", "exact", "not_enforced", "exact wrapped")
