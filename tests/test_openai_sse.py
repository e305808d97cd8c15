"""The incremental SSE decoder of Chat Completions streams: any chunking, same events."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allama.adapters.openai_compat._sse import ChatStreamDecoder, SseParser, decode_stream
from allama.errors import (
    Error,
    IncompleteStreamError,
    RateLimitedError,
    RejectedOutputError,
    ServerError,
    StreamDecodeError,
)
from allama.stream import StreamCollector
from allama.types import (
    ChatResponse,
    FinishReason,
    Reasoning,
    Refusal,
    StreamEvent,
    TextPart,
    ToolCall,
    Usage,
)


def sse(*payloads: Any) -> bytes:
    lines = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        lines.append(f"data: {data}\n\n")
    return "".join(lines).encode()


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-1", "model": "gpt-4o", "choices": choices, **extra}


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(cut, 0), len(data)) for cut in cuts})
    pieces, last = [], 0
    for point in points:
        pieces.append(data[last:point])
        last = point
    pieces.append(data[last:])
    return pieces


def feed_pieces(pieces: list[bytes]) -> list[StreamEvent]:
    decoder = ChatStreamDecoder(provider="openai", model="gpt-4o")
    events: list[StreamEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    events.extend(decoder.close())
    return events


TOOL_STREAM = sse(
    chunk({"role": "assistant", "content": None, "reasoning_content": "Think"}),
    chunk({"reasoning_content": "ing é"}),
    chunk({"content": "Calling "}),
    chunk({"content": "tools"}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "a", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x":'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "b", "arguments": "{}"},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}),
    chunk({}, "tool_calls"),
    chunk(
        None,
        usage={
            "prompt_tokens": 10,
            "completion_tokens": 7,
            "total_tokens": 17,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    ),
    "[DONE]",
)

TOOL_RESPONSE = ChatResponse(
    (
        Reasoning(text="Thinking é"),
        TextPart(text="Calling tools"),
        ToolCall(id="call_a", name="a", arguments='{"x": 1}'),
        ToolCall(id="call_b", name="b", arguments="{}"),
    ),
    finish_reason=FinishReason.TOOL_CALLS,
    usage=Usage(input_tokens=10, output_tokens=7, reasoning_tokens=2, cache_read_tokens=4),
    model="gpt-4o",
    id="chatcmpl-1",
)


def test_tool_call_deltas_fold_by_index_and_usage_arrives_after_finish() -> None:
    assert collect(decode_stream(TOOL_STREAM)) == TOOL_RESPONSE


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(TOOL_STREAM)), max_size=40))
def test_any_chunking_decodes_to_the_same_response(cuts: list[int]) -> None:
    assert collect(feed_pieces(split_at(TOOL_STREAM, cuts))) == TOOL_RESPONSE


def test_one_byte_at_a_time_keeps_multibyte_characters() -> None:
    pieces = [TOOL_STREAM[i : i + 1] for i in range(len(TOOL_STREAM))]
    assert collect(feed_pieces(pieces)).reasoning() == "Thinking é"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.sampled_from(["error", "message"]),
            st.lists(
                st.text(
                    alphabet=st.characters(
                        blacklist_categories=("Cs",), blacklist_characters="\r\n"
                    ),
                    max_size=12,
                ),
                min_size=1,
                max_size=3,
            ),
        ),
        max_size=6,
    ),
    st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.booleans(),
)
def test_sse_parser_any_chunking_and_line_ending(
    events: list[tuple[str | None, list[str]]], cuts: list[int], newline: str, marked: bool
) -> None:
    # Lines end with LF, CRLF or CR (the SSE format allows each; CR alone read a whole
    # stream as one line); a byte-order mark opening the stream is no part of its first
    # line (it made the first field `\ufeffdata`, and the event was dropped).
    text = ("\ufeff" if marked else "") + ": keep-alive" + newline
    for name, lines in events:
        if name is not None:
            text += f"event: {name}{newline}"
        text += "".join(f"data: {line}{newline}" for line in lines) + newline
    data = text.encode()
    parser = SseParser()
    parsed = []
    for piece in split_at(data, cuts):
        parsed.extend(parser.feed(piece))
    rest, cut = parser.close()
    parsed.extend(rest)
    assert not cut
    assert [(event.event, event.data) for event in parsed] == [
        (name, "\n".join(lines)) for name, lines in events
    ]


def test_comment_lines_and_done_end_the_stream() -> None:
    data = (
        b": OPENROUTER PROCESSING\n\n"
        + sse(chunk({"content": "hi"}, "stop"), "[DONE]")
        + sse(chunk({"content": "after done"}))
    )
    response = collect(decode_stream(data))
    assert response.text() == "hi"
    assert response.finish_reason == "stop"


def test_azure_first_chunk_without_choices_or_id() -> None:
    first = {"id": "", "model": "", "choices": [], "prompt_filter_results": [{"prompt_index": 0}]}
    data = sse(first, chunk({"content": "ok"}), chunk({}, "stop"), "[DONE]")
    response = collect(decode_stream(data))
    assert (response.text(), response.id, response.model) == ("ok", "chatcmpl-1", "gpt-4o")


def test_refusal_deltas_become_a_refusal_block() -> None:
    data = sse(
        chunk({"role": "assistant", "content": None, "refusal": ""}),
        chunk({"refusal": "I can't"}),
        chunk({}, "stop"),
        "[DONE]",
    )
    response = collect(decode_stream(data))
    assert response.content == (Refusal(text="I can't"),)


def test_whole_tool_calls_in_one_delta() -> None:
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a":1}'}}
    data = sse(chunk({"tool_calls": [call]}), chunk({"content": ""}, "tool_calls"), "[DONE]")
    assert collect(decode_stream(data)).tool_calls() == (
        ToolCall(id="call_1", name="f", arguments='{"a":1}'),
    )


@pytest.mark.parametrize(
    "deltas",
    [
        # Only `index` need come on a call's first delta: the id, the name, or the name's
        # second half may come on a later one. The call kept the first delta's (a made-up
        # id, no name: a forced tool's answer was "no tool call").
        [{"id": "call_1", "function": {"arguments": ""}}, {"function": {"name": "f"}}],
        [{"function": {"name": "f", "arguments": ""}}, {"id": "call_1"}],
        [
            {"id": "call_1", "function": {"name": "sub", "arguments": ""}},
            {"function": {"name": "mit"}},
        ],
        # A server that repeats the whole name (and id) on every delta: said once.
        [{"id": "call_1", "function": {"name": "f"}}, {"id": "call_1", "function": {"name": "f"}}],
    ],
)
def test_a_tool_calls_id_and_name_may_come_on_later_deltas(deltas: list[dict[str, Any]]) -> None:
    pieces = [chunk({"tool_calls": [{"index": 0, **delta}]}) for delta in deltas]
    arguments = chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":1}'}}]})
    data = sse(*pieces, arguments, chunk({}, "tool_calls"), "[DONE]")
    name = "submit" if any(d.get("function", {}).get("name") == "sub" for d in deltas) else "f"
    assert collect(decode_stream(data)).tool_calls() == (
        ToolCall(id="call_1", name=name, arguments='{"a":1}'),
    )
    # A call that never sends arguments still ends with its id and name.
    bare = sse(*pieces, chunk({}, "tool_calls"), "[DONE]")
    assert collect(decode_stream(bare)).tool_calls() == (
        ToolCall(id="call_1", name=name, arguments=""),
    )


def test_a_call_without_an_index_takes_its_id_from_a_later_delta() -> None:
    # No index: the id on the second delta is the first's call, not a call of its own (the
    # call was split in two, one with the name and one with the arguments).
    first = chunk({"tool_calls": [{"function": {"name": "f", "arguments": ""}}]})
    later = chunk({"tool_calls": [{"id": "call_X", "function": {"arguments": '{"a":1}'}}]})
    data = sse(first, later, chunk({}, "tool_calls"), "[DONE]")
    assert collect(decode_stream(data)).tool_calls() == (
        ToolCall(id="call_X", name="f", arguments='{"a":1}'),
    )


def test_a_legacy_function_calls_name_may_come_on_a_later_delta() -> None:
    first = chunk({"function_call": {"arguments": ""}})
    later = chunk({"function_call": {"name": "f", "arguments": '{"a":1}'}})
    data = sse(first, later, chunk({}, "function_call"), "[DONE]")
    assert collect(decode_stream(data)).tool_calls() == (
        ToolCall(id="call_0", name="f", arguments='{"a":1}'),
    )


def test_groq_usage_under_x_groq() -> None:
    data = sse(
        chunk({"content": "x"}),
        chunk(
            {},
            "stop",
            x_groq={"id": "req_1", "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
        ),
        "[DONE]",
    )
    assert collect(decode_stream(data)).usage == Usage(input_tokens=5, output_tokens=1)


def test_xai_reasoning_counts_outside_completion_tokens() -> None:
    usage = {
        "prompt_tokens": 5,
        "completion_tokens": 2,
        "completion_tokens_details": {"reasoning_tokens": 8},
    }
    data = sse(chunk({"content": "x"}, "stop"), chunk(None, usage=usage), "[DONE]")
    events = decode_stream(data, reasoning_outside_completion=True)
    assert collect(events).usage == Usage(input_tokens=5, output_tokens=10, reasoning_tokens=8)


def _events_until_error(data: bytes) -> tuple[list[StreamEvent], Error]:
    decoder = ChatStreamDecoder(provider="groq", model="m")
    seen: list[StreamEvent] = []
    with pytest.raises(Error) as caught:
        for event in decoder.feed(data):
            seen.append(event)
        for event in decoder.close():
            seen.append(event)
    return seen, caught.value


def test_openrouter_mid_stream_error_after_content() -> None:
    error_chunk = {
        "id": "gen-1",
        "error": {"code": "server_error", "message": "Provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    seen, error = _events_until_error(sse(chunk({"content": "partial"}), error_chunk))
    assert [event.type for event in seen] == ["response_start", "block_start", "text_delta"]
    assert type(error) is ServerError
    assert error.provider == "groq"
    assert error.retryable


def test_groq_error_event_maps_to_its_status() -> None:
    payload = {
        "error": {
            "message": "Tool choice is required, but model did not call a tool",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "status_code": 400,
        }
    }
    data = (
        sse(chunk({"content": "maybe"}))
        + b"event: error\ndata: "
        + json.dumps(payload).encode()
        + b"\n\n"
    )
    _, error = _events_until_error(data)
    assert type(error) is RejectedOutputError
    assert error.status == 400
    assert error.retryable


def test_an_error_event_in_plain_words_is_the_servers_error() -> None:
    # `event: error` with text, or a JSON string: the server's error (tried again), not a
    # stream allama could not read.
    for words in (b"Internal Server Error", b'"upstream timed out"'):
        data = sse(chunk({"content": "maybe"})) + b"event: error\ndata: " + words + b"\n\n"
        _, error = _events_until_error(data)
        assert type(error) is ServerError and error.retryable
        assert str(error) == words.decode().strip('"')


def test_an_error_event_cut_at_the_end_is_the_servers_error() -> None:
    data = sse(chunk({"content": "maybe"})) + b"event: error\ndata: Internal Server Error"
    _, error = _events_until_error(data)
    assert type(error) is ServerError and str(error) == "Internal Server Error"


def test_half_an_emoji_beside_a_usage_of_another_shape_is_read() -> None:
    usage = '"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,'
    usage += '"prompt_tokens_details":{"cached_tokens":"x"}}'
    first = 'data: {"choices":[{"index":0,"delta":{"content":"a\\ud83d"}}],' + usage + "}\n\n"
    second = b'data: {"choices":[{"index":0,"delta":{"content":"\\ude00"}}]}\n\n'
    data = first.encode() + second + sse(chunk({}, "stop"), "[DONE]")
    response = collect(decode_stream(data))
    assert response.text() == "a\U0001f600"
    assert response.usage is not None and response.usage.output_tokens == 2


def test_an_emoji_escaped_in_halves_across_chunks_is_read() -> None:
    # `\ud83d` in one chunk, `\ude00` in the next: JSON the standard library reads, and
    # pydantic-core refuses; the stream failed as no chunk.
    first = b'data: {"choices":[{"index":0,"delta":{"content":"a\\ud83d"}}]}\n\n'
    second = b'data: {"choices":[{"index":0,"delta":{"content":"\\ude00b"}}]}\n\n'
    response = collect(decode_stream(first + second + sse(chunk({}, "stop"), "[DONE]")))
    assert response.text() == "a\U0001f600b"


def test_rate_limit_error_object_in_stream() -> None:
    payload = {
        "error": {
            "message": "Rate limit reached for tokens",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
    _, error = _events_until_error(sse(payload))
    assert isinstance(error, RateLimitedError)
    assert "Rate limit reached" not in str(error.as_log())


def test_stream_without_finish_is_incomplete() -> None:
    with pytest.raises(IncompleteStreamError):
        collect(decode_stream(sse(chunk({"content": "cut"}))))


def test_stream_cut_inside_an_event_is_incomplete() -> None:
    data = sse(chunk({"content": "a"}))[:-1] + b'data: {"id": "chatcmpl-1", "choi'
    with pytest.raises(IncompleteStreamError):
        decode_stream(data)


def test_last_event_without_blank_line_is_read() -> None:
    data = sse(chunk({"content": "a"}, "stop")) + b"data: [DONE]"
    assert collect(decode_stream(data)).text() == "a"


def test_invalid_json_mid_stream_is_a_decode_error() -> None:
    with pytest.raises(StreamDecodeError):
        decode_stream(b"data: {not json\n\n" + sse("[DONE]"))


def test_done_without_finish_reason_finishes_without_one() -> None:
    response = collect(decode_stream(sse(chunk({"content": "a"}), "[DONE]")))
    assert (response.text(), response.finish_reason) == ("a", None)


def test_mistral_thinking_blocks_in_delta_content() -> None:
    thinking = [{"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]}]
    data = sse(
        chunk({"content": thinking}),
        chunk({"content": [{"type": "text", "text": "144"}]}, "stop"),
        "[DONE]",
    )
    response = collect(decode_stream(data))
    assert response.content == (Reasoning(text="hmm"), TextPart(text="144"))


def test_content_filter_finish_carries_its_explanation() -> None:
    verdicts = {"self_harm": {"filtered": True, "severity": "medium"}}
    last = chunk({}, "content_filter")
    last["choices"][0]["content_filter_results"] = verdicts
    events = decode_stream(sse(chunk({"content": "par"}), last, "[DONE]"), provider="azure-openai")
    response = collect(events)
    assert response.finish_reason == FinishReason.CONTENT_FILTER
    assert response.decline_explanation() == "the content filter flagged: self_harm (medium)"
