"""Responses API: a call of a `custom` tool (OpenAI's free-text tools, given through the
`openai_responses` body option) is a tool call, in a body and in a stream, and goes back on
the next turn as a `custom_tool_call` with its result as a `custom_tool_call_output`."""

from __future__ import annotations

import json
from typing import Any

import httpx2

import allama
from _responses_support import sse
from allama.adapters.openai_responses._decode import NAMESPACE, decode_response
from allama.adapters.openai_responses._sse import decode_stream
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ChatResponse,
    FinishReason,
    Reasoning,
    StreamBlockType,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
)

KEY = "sk-test-custom-tools-1234"
SQL = "SELECT count(*) FROM orders WHERE note = 'a \"quoted\" {not json}'"
CUSTOM_TOOLS: dict[str, Any] = {
    "tools": [{"type": "custom", "name": "run_sql", "description": "Runs SQL."}]
}
CALL = {
    "type": "custom_tool_call",
    "id": "ctc_1",
    "call_id": "call_1",
    "name": "run_sql",
    "input": SQL,
    "status": "completed",
}


def response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": output,
        "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
    }


def collect(data: bytes) -> ChatResponse:
    collector = StreamCollector()
    for event in decode_stream(data):
        collector.push(event)
    return collector.finish()


def encode(request: ChatRequest) -> dict[str, Any]:
    made = allama.provider("openai", api="responses", api_key=KEY)
    http, _ = made._prepare(request, stream=False)
    body: dict[str, Any] = http.body
    return body


def test_a_custom_tool_call_in_a_body_is_a_tool_call_finished_as_tool_calls() -> None:
    sent: list[Any] = []

    def reply(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.read()))
        return httpx2.Response(200, json=response([CALL]))

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(reply)))
    made = allama.provider("openai", api="responses", api_key=KEY, transport=transport)
    request = ChatRequest("gpt-5").user("count").with_option_json(NAMESPACE, CUSTOM_TOOLS)
    answer = made.chat(request)
    assert answer.tool_calls() == (ToolCall(id="call_1", name="run_sql", arguments=SQL),)
    assert answer.finish_reason == FinishReason.TOOL_CALLS
    assert answer.text() is None
    assert answer.provider_data == {}  # not kept among the items allama has no block for
    assert sent[0]["tools"] == CUSTOM_TOOLS["tools"]


def test_a_custom_tool_call_in_a_stream_is_read_as_in_a_body() -> None:
    where = {"item_id": "ctc_1", "output_index": 0}
    data = sse(
        {"type": "response.created", "response": {**response([]), "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**CALL, "input": "", "status": "in_progress"},
        },
        {"type": "response.custom_tool_call_input.delta", **where, "delta": SQL[:10]},
        {"type": "response.custom_tool_call_input.delta", **where, "delta": SQL[10:]},
        {"type": "response.custom_tool_call_input.done", **where, "input": SQL},
        {"type": "response.output_item.done", "output_index": 0, "item": CALL},
        {"type": "response.completed", "response": response([CALL])},
    )
    events = decode_stream(data)
    calls = [event for event in events if isinstance(event, BlockStart | ToolCallDelta)]
    assert calls == [
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="call_1", name="run_sql"),
        ToolCallDelta(index=0, arguments=SQL[:10]),
        ToolCallDelta(index=0, arguments=SQL[10:]),
    ]
    assert BlockStop(index=0) in events
    streamed = collect(data)
    body = decode_response(200, {}, json.dumps(response([CALL])).encode())
    assert streamed.tool_calls() == body.tool_calls()
    assert streamed.tool_calls() == (ToolCall(id="call_1", name="run_sql", arguments=SQL),)
    assert streamed.finish_reason == FinishReason.TOOL_CALLS
    assert streamed.provider_data == {}


def test_the_input_done_event_brings_what_the_deltas_did_not() -> None:
    where = {"item_id": "ctc_1", "output_index": 0}
    data = sse(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**CALL, "input": "", "status": "in_progress"},
        },
        {"type": "response.custom_tool_call_input.delta", **where, "delta": SQL[:6]},
        {"type": "response.custom_tool_call_input.done", **where, "input": SQL},
        {"type": "response.completed", "response": {**response([]), "output": []}},
    )
    streamed = collect(data)
    assert streamed.tool_calls() == (ToolCall(id="call_1", name="run_sql", arguments=SQL),)
    assert streamed.finish_reason == FinishReason.TOOL_CALLS


def test_a_custom_tool_call_goes_back_in_its_own_shape_and_a_function_call_as_before() -> None:
    weather = ToolDefinition(name="weather", parameters={"type": "object", "properties": {}})
    turn = decode_response(
        200,
        {},
        json.dumps(
            response(
                [
                    CALL,
                    {
                        "type": "function_call",
                        "id": "fc_2",
                        "call_id": "call_2",
                        "name": "weather",
                        "arguments": "{}",
                        "status": "completed",
                    },
                ]
            )
        ).encode(),
    )
    request = (
        ChatRequest("gpt-5")
        .with_tools([weather])
        .user("count, and the weather")
        .push(turn.to_assistant_message())
        .tool_result("call_1", "42")
        .tool_result("call_2", "sunny")
    )
    sent = encode(request.with_option_json(NAMESPACE, CUSTOM_TOOLS))
    assert sent["input"][1:] == [
        {"type": "custom_tool_call", "call_id": "call_1", "name": "run_sql", "input": SQL},
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": "{}"},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "42"},
        {"type": "function_call_output", "call_id": "call_2", "output": "sunny"},
    ]
    # A request whose option names no such custom tool sends every call as a function's.
    plain = encode(request)
    assert [item["type"] for item in plain["input"][1:]] == [
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert plain["input"][1]["arguments"] == SQL


def test_reasoning_before_a_custom_tool_call_goes_back_with_it() -> None:
    thought = Reasoning(text="Count them.", signature="rs_1", encrypted_content="enc")
    call = ToolCall(id="call_1", name="run_sql", arguments=SQL)
    request = (
        ChatRequest("gpt-5")
        .user("count")
        .assistant([thought, call])
        .tool_result("call_1", "42")
        .with_option_json(NAMESPACE, CUSTOM_TOOLS)
    )
    made = allama.provider("openai", api="responses", api_key=KEY)
    http, warnings = made._prepare(request, stream=False)
    assert http.body["input"][1:] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Count them."}],
            "encrypted_content": "enc",
        },
        {"type": "custom_tool_call", "call_id": "call_1", "name": "run_sql", "input": SQL},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "42"},
    ]
    assert warnings == []
