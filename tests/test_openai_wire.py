"""The wire contract of OpenAI-compatible chat types (port of seed 003's tests)."""

from __future__ import annotations

import json

from pydantic import TypeAdapter

from allama.adapters.openai_compat._wire import (
    Role,
    WireChunk,
    WireChunkChoice,
    WireDelta,
    WireFunctionCall,
    WireMessage,
    WireRequest,
    WireResponse,
    WireTool,
    WireToolCall,
)


def test_message_user_constructor_serializes_correctly() -> None:
    text = WireMessage.user("What is the capital of France?").dump_json()
    parsed = json.loads(text)
    assert parsed["role"] == "user"
    assert parsed["content"] == "What is the capital of France?"
    assert '"tool_calls"' not in text
    assert '"tool_call_id"' not in text
    assert "null" not in text


def test_message_system_constructor_serializes_correctly() -> None:
    parsed = json.loads(WireMessage.system("You are a helpful assistant.").dump_json())
    assert parsed == {"role": "system", "content": "You are a helpful assistant."}


def test_message_assistant_constructor_serializes_correctly() -> None:
    text = WireMessage.assistant("Paris is the capital of France.").dump_json()
    parsed = json.loads(text)
    assert parsed["role"] == "assistant"
    assert parsed["content"] == "Paris is the capital of France."
    assert '"tool_call_id"' not in text
    assert '"tool_calls"' not in text


def test_message_tool_constructor_serializes_correctly() -> None:
    text = WireMessage.tool("call_abc123", '{"temperature":22}').dump_json()
    parsed = json.loads(text)
    assert parsed["role"] == "tool"
    assert parsed["tool_call_id"] == "call_abc123"
    assert parsed["content"] == '{"temperature":22}'
    assert '"tool_calls"' not in text


def test_message_with_tool_calls_serializes_correctly() -> None:
    call = WireToolCall(
        id="call_xyz789",
        type="function",
        function=WireFunctionCall(name="get_weather", arguments='{"location":"Paris"}'),
    )
    message = WireMessage(role=Role.ASSISTANT, tool_calls=[call])
    text = message.dump_json()
    parsed = json.loads(text)
    assert parsed["role"] == "assistant"
    calls = parsed["tool_calls"]
    assert len(calls) == 1
    assert calls[0]["id"] == "call_xyz789"
    assert calls[0]["function"]["name"] == "get_weather"
    assert '"content"' not in text
    assert '"tool_call_id"' not in text


def test_tool_call_round_trips_through_serde() -> None:
    call = WireToolCall(
        id="call_roundtrip", type="function", function=WireFunctionCall(name="ping", arguments="{}")
    )
    text = call.dump_json()
    assert '"type"' in text
    assert '"tool_type"' not in text
    back = WireToolCall.model_validate_json(text)
    assert back.id == "call_roundtrip"
    assert back.type == "function"
    assert back.function.name == "ping"
    assert back.function.arguments == "{}"


def test_chat_completion_request_omits_none_fields() -> None:
    text = WireRequest(model="gpt-4o", messages=[WireMessage.user("Hello!")]).dump_json()
    assert '"model"' in text
    assert '"messages"' in text
    for absent in (
        "temperature",
        "max_tokens",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
        "stream",
        "tools",
    ):
        assert f'"{absent}"' not in text
    assert "null" not in text


def test_chat_completion_request_stream_set_to_false_appears_in_json() -> None:
    text = WireRequest(
        model="gpt-4o", messages=[WireMessage.user("Hello!")], stream=False
    ).dump_json()
    assert '"stream"' in text
    assert json.loads(text)["stream"] is False


_FIXTURE = """{
  "id": "chatcmpl-abc123xyz", "object": "chat.completion", "created": 1717000000,
  "model": "gpt-4o",
  "choices": [{"index": 0, "message": {"role": "assistant",
    "content": "Paris is the capital of France."}, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 14, "completion_tokens": 8, "total_tokens": 22}
}"""


def test_chat_completion_response_deserializes_from_fixture() -> None:
    response = WireResponse.model_validate_json(_FIXTURE)
    assert response.id == "chatcmpl-abc123xyz"
    assert response.model == "gpt-4o"
    assert response.usage is not None
    assert response.usage.total_tokens == 22
    assert response.choices[0].message.content == "Paris is the capital of France."
    assert response.choices[0].finish_reason == "stop"


def test_response_tolerates_extra_unknown_json_fields() -> None:
    fixture = {
        "id": "chatcmpl-extra",
        "object": "chat.completion",
        "created": 1717000001,
        "model": "gpt-4o",
        "system_fingerprint": "fp_abc123",
        "x_provider_data": {"latency_ms": 42},
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello!", "unknown_future_field": True},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": 5,
            "completion_tokens": 3,
            "total_tokens": 8,
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }
    response = WireResponse.model_validate_json(json.dumps(fixture))
    assert response.id == "chatcmpl-extra"
    assert response.choices[0].message.content == "Hello!"
    assert response.model_extra == {
        "system_fingerprint": "fp_abc123",
        "x_provider_data": {"latency_ms": 42},
    }


def test_response_with_multiple_choices_deserializes() -> None:
    fixture = {
        "id": "chatcmpl-multi",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Answer A"},
                "finish_reason": "stop",
            },
            {
                "index": 1,
                "message": {"role": "assistant", "content": "Answer B"},
                "finish_reason": "stop",
            },
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16},
    }
    response = WireResponse.model_validate(fixture)
    assert len(response.choices) == 2
    assert [choice.index for choice in response.choices] == [0, 1]
    assert [choice.message.content for choice in response.choices] == ["Answer A", "Answer B"]


def test_role_round_trips_through_serde() -> None:
    adapter = TypeAdapter(Role)
    for role, expected in [
        (Role.SYSTEM, b'"system"'),
        (Role.USER, b'"user"'),
        (Role.ASSISTANT, b'"assistant"'),
        (Role.TOOL, b'"tool"'),
    ]:
        assert adapter.dump_json(role) == expected
        assert adapter.validate_json(expected) is role


def test_streaming_chunk_deserializes_from_fixture() -> None:
    fixture = {
        "id": "chatcmpl-stream-abc",
        "object": "chat.completion.chunk",
        "created": 1717000010,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": " world"}, "finish_reason": None}],
    }
    chunk = WireChunk.model_validate_json(json.dumps(fixture))
    assert chunk.id == "chatcmpl-stream-abc"
    assert chunk.object == "chat.completion.chunk"
    assert len(chunk.choices) == 1
    assert chunk.choices[0].delta.content == " world"
    assert chunk.choices[0].finish_reason is None


def test_streaming_delta_none_fields_omitted_from_json() -> None:
    assert WireDelta().dump_json() == "{}"


def test_message_round_trips_through_serde() -> None:
    original = WireMessage.tool("call_rt_001", '{"value":42}')
    assert WireMessage.model_validate_json(original.dump_json()) == original


def test_message_user_empty_content_serializes_correctly() -> None:
    text = WireMessage.user("").dump_json()
    parsed = json.loads(text)
    assert parsed == {"role": "user", "content": ""}
    assert '"tool_calls"' not in text
    assert '"tool_call_id"' not in text


def test_function_call_empty_arguments_round_trips() -> None:
    call = WireToolCall(id="call_empty_args", function=WireFunctionCall(name="no_params_fn"))
    assert WireToolCall.model_validate_json(call.dump_json()).function.arguments == ""


def test_function_call_complex_arguments_preserved_as_string() -> None:
    raw = '{"location":"New York","units":"metric","extra":{"key":"val"}}'
    call = WireToolCall(
        id="call_complex", function=WireFunctionCall(name="get_weather", arguments=raw)
    )
    assert WireToolCall.model_validate_json(call.dump_json()).function.arguments == raw


def test_function_call_arguments_keep_their_spacing() -> None:
    raw = '{ "a" : 1 ,\n "b": [2] }'
    wire = {"id": "c", "type": "function", "function": {"name": "f", "arguments": raw}}
    assert WireToolCall.model_validate(wire).function.arguments == raw


def test_chat_completion_request_stream_true_appears_in_json() -> None:
    text = WireRequest(
        model="gpt-4o", messages=[WireMessage.user("Hello!")], stream=True
    ).dump_json()
    assert json.loads(text)["stream"] is True


def test_chat_completion_request_temperature_appears_when_set() -> None:
    text = WireRequest(
        model="gpt-4o", messages=[WireMessage.user("Hi")], temperature=0.7
    ).dump_json()
    assert abs(json.loads(text)["temperature"] - 0.7) < 0.01


def test_chat_completion_request_max_tokens_appears_when_set() -> None:
    text = WireRequest(
        model="gpt-4o", messages=[WireMessage.user("Hi")], max_tokens=512
    ).dump_json()
    assert json.loads(text)["max_tokens"] == 512


def test_chat_completion_request_tools_array_serializes_with_type_key() -> None:
    tool = WireTool.function_tool(
        "get_weather", "Get current weather", {"type": "object", "properties": {}}
    )
    text = WireRequest(
        model="gpt-4o", messages=[WireMessage.user("What is the weather?")], tools=[tool]
    ).dump_json()
    tools = json.loads(text)["tools"]
    assert len(tools) == 1
    assert tools[0]["type"] == "function"
    assert '"tool_type"' not in text
    assert tools[0]["function"]["name"] == "get_weather"
    assert tools[0]["function"]["description"] == "Get current weather"
    assert '"strict"' not in text


def test_tool_strict_false_is_kept() -> None:
    tool = WireTool.function_tool("f", None, {"type": "object"}, strict=False)
    assert tool.dump() == {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object"}, "strict": False},
    }


def test_response_finish_reason_tool_calls_deserializes() -> None:
    fixture = {
        "id": "chatcmpl-toolcall",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_tc001",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": '{"location":"Paris"}',
                            },
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 20, "total_tokens": 50},
    }
    response = WireResponse.model_validate_json(json.dumps(fixture))
    assert response.choices[0].finish_reason == "tool_calls"
    calls = response.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1
    assert calls[0].id == "call_tc001"
    assert calls[0].function.name == "get_weather"
    assert calls[0].function.arguments == '{"location":"Paris"}'


def test_response_assistant_message_with_tool_calls_deserializes() -> None:
    fixture = {
        "id": "chatcmpl-nested-tc",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_nested_001",
                            "type": "function",
                            "function": {
                                "name": "send_email",
                                "arguments": '{"to":"alice@example.com","subject":"Hello"}',
                            },
                        },
                        {
                            "id": "call_nested_002",
                            "type": "function",
                            "function": {"name": "log_event", "arguments": '{"event":"greeting"}'},
                        },
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    message = WireResponse.model_validate(fixture).choices[0].message
    assert message.content is None
    calls = message.tool_calls
    assert calls is not None
    assert [(call.id, call.function.name) for call in calls] == [
        ("call_nested_001", "send_email"),
        ("call_nested_002", "log_event"),
    ]


def test_streaming_chunk_first_with_role_deserializes() -> None:
    fixture = {
        "id": "chatcmpl-stream-first",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        ],
    }
    chunk = WireChunk.model_validate(fixture)
    assert chunk.choices[0].delta.role is Role.ASSISTANT
    assert chunk.choices[0].finish_reason is None


def test_streaming_chunk_last_with_finish_reason_deserializes() -> None:
    fixture = {
        "id": "chatcmpl-stream-last",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    chunk = WireChunk.model_validate(fixture)
    assert chunk.choices[0].finish_reason == "stop"
    assert chunk.choices[0].delta.content is None
    assert chunk.choices[0].delta.role is None


def test_streaming_chunk_round_trips_through_serde() -> None:
    original = WireChunk(
        id="chatcmpl-rt",
        object="chat.completion.chunk",
        created=1_717_000_050,
        model="gpt-4o",
        choices=[WireChunkChoice(index=0, delta=WireDelta(role=Role.ASSISTANT, content=" Hello"))],
    )
    assert WireChunk.model_validate_json(original.dump_json()) == original


def test_usage_chunk_with_empty_choices_deserializes() -> None:
    chunk = WireChunk.model_validate(
        {"id": "x", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    )
    assert chunk.choices == []
    assert chunk.usage is not None and chunk.usage.prompt_tokens == 3


def test_arguments_sent_as_an_object_are_kept_as_a_string() -> None:
    call = WireToolCall.model_validate(
        {"id": "c", "function": {"name": "f", "arguments": {"a": [1, 2]}}}
    )
    assert call.function.arguments == '{"a":[1,2]}'
