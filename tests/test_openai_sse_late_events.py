"""Chat Completions streams whose tool call's name comes after its first arguments piece:
the call keeps the name, as OpenAI's SDK joins a name whenever its pieces come."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from _recording import provider
from allama import ChatRequest
from allama.adapters.openai_compat._sse import ChatStreamDecoder, decode_stream
from allama.stream import StreamCollector
from allama.types import (
    BlockStart,
    BlockStop,
    ChatResponse,
    Finish,
    FinishReason,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextPart,
    ToolCall,
    ToolCallDelta,
)


def sse(*payloads: Any) -> bytes:
    return "".join(
        f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads
    ).encode()


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-1", "model": "gpt-4o", "choices": [choice]}


def call(
    index: int = 0, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    piece: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        piece["id"] = id
    return chunk({"tool_calls": [piece]})


def collect(events: list[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def byte_by_byte(data: bytes) -> list[StreamEvent]:
    decoder = ChatStreamDecoder()
    events = [event for at in range(len(data)) for event in decoder.feed(data[at : at + 1])]
    return [*events, *decoder.close()]


WEATHER = ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}')


@pytest.mark.parametrize(
    "deltas",
    [
        # The name alone, between two arguments pieces.
        [
            call(id="call_1", arguments='{"city":'),
            call(name="get_weather"),
            call(arguments='"Paris"}'),
        ],
        # A first delta with the name `""` and arguments, then the name with the rest.
        [
            call(id="call_1", name="", arguments='{"city":'),
            call(name="get_weather", arguments='"Paris"}'),
        ],
        # The name in two pieces, both after the first arguments piece.
        [
            call(id="call_1", arguments='{"city":'),
            call(name="get_"),
            call(name="weather"),
            call(arguments='"Paris"}'),
        ],
        # The name after all the arguments, with none after it: the call ends with it.
        [call(id="call_1", arguments='{"city":"Paris"}'), call(name="get_weather")],
        # No id on the first delta: the id and the name come together later.
        [call(arguments='{"city":'), call(id="call_1", name="get_weather", arguments='"Paris"}')],
    ],
)
def test_a_calls_name_after_its_first_arguments_is_its_name(deltas: list[dict[str, Any]]) -> None:
    data = sse(*deltas, chunk({}, "tool_calls"), "[DONE]")
    for events in (decode_stream(data), byte_by_byte(data)):
        response = collect(events)
        assert response.tool_calls() == (WEATHER,)
        assert response.finish_reason == FinishReason.TOOL_CALLS


def test_the_block_starts_with_the_name_and_the_held_arguments_follow_it() -> None:
    data = sse(
        call(id="call_1", arguments='{"city":'),
        call(name="get_weather"),
        call(arguments='"Paris"}'),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    assert decode_stream(data) == [
        ResponseStart(id="chatcmpl-1", model="gpt-4o"),
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="call_1", name="get_weather"),
        ToolCallDelta(index=0, arguments='{"city":'),
        ToolCallDelta(index=0, arguments='"Paris"}'),
        BlockStop(index=0),
        Finish(finish_reason=FinishReason.TOOL_CALLS),
    ]


def test_other_calls_keep_their_order_and_stream_while_one_waits_for_its_name() -> None:
    data = sse(
        chunk({"content": "Checking."}),
        call(0, "call_1", None, '{"city":'),
        call(1, "call_2", "get_time", '{"tz":"CET"}'),
        call(0, name="get_weather", arguments='"Paris"}'),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    events = decode_stream(data)
    starts = [event for event in events if isinstance(event, BlockStart)]
    # The named call streams at once; the other starts when its name came.
    assert [(start.index, start.name) for start in starts] == [
        (0, None),
        (2, "get_time"),
        (1, "get_weather"),
    ]
    assert collect(events).content == (
        TextPart(text="Checking."),
        WEATHER,
        ToolCall(id="call_2", name="get_time", arguments='{"tz":"CET"}'),
    )


def test_a_legacy_function_calls_name_after_its_first_arguments_is_its_name() -> None:
    data = sse(
        chunk({"function_call": {"arguments": '{"a":'}}),
        chunk({"function_call": {"name": "f"}}),
        chunk({"function_call": {"arguments": "1}"}}),
        chunk({}, "function_call"),
        "[DONE]",
    )
    assert collect(decode_stream(data)).tool_calls() == (
        ToolCall(id="call_0", name="f", arguments='{"a":1}'),
    )


def test_a_streamed_call_through_the_provider_keeps_its_late_name() -> None:
    data = sse(
        call(id="call_1", arguments='{"city":'),
        call(name="get_weather"),
        call(arguments='"Paris"}'),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    openai, _ = provider("openai", (200, data))
    request = ChatRequest("gpt-4o").user("Weather in Paris?")
    assert openai.chat_stream(request).response().tool_calls() == (WEATHER,)

    async def achat() -> ChatResponse:
        return await (await openai.achat_stream(request)).response()

    assert asyncio.run(achat()).tool_calls() == (WEATHER,)
