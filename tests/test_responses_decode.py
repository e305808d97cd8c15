"""The response side of the Responses API adapter: bodies, streams and errors.

Unit tests spell out each mapping; a property test holds the stream decoder to the body
decoder (the same response, streamed as OpenAI streams it and split anywhere, collects to
what the body decodes to); and a replay reads every recorded Responses API case under
`ALLAMA_CORPUS_DIR` (default `../shared/corpus/cases` next to the repository): those of its
`openai_responses/` folder, and those of any folder whose endpoint ends in `/responses`
(xAI, OpenRouter). Expectations are computed from the recording alone, a stream's from its
deltas rather than from the response it ends with. The replay assumes only what the wire
format promises: usage counts, ids, `status` details, item and part types may be missing,
unknown or new.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _responses_support import sse, stream_of
from allama.adapters.openai_responses._decode import decode_object, decode_response
from allama.adapters.openai_responses._errors import (
    error_from_failed,
    error_from_payload,
    error_from_response,
)
from allama.adapters.openai_responses._sse import ResponsesStreamDecoder, decode_stream
from allama.errors import (
    AuthenticationError,
    ContextWindowExceededError,
    Error,
    IncompleteStreamError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitedError,
    ServerError,
    StreamDecodeError,
    UnsupportedError,
)
from allama.stream import StreamCollector
from allama.types import (
    BlockStart,
    BlockStop,
    ChatResponse,
    Finish,
    FinishReason,
    ProviderDataEvent,
    Reasoning,
    ReasoningDelta,
    Refusal,
    RefusalDelta,
    RequestField,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    UnsupportedStage,
    Usage,
    UsageEvent,
    Warning,
)

# Helpers


def response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_766_000_000,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-2025-08-07",
        "output": output,
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 17,
        },
    }
    return {**base, **fields}


def decode(body: dict[str, Any] | str, **kwargs: Any) -> ChatResponse:
    raw = body if isinstance(body, str) else json.dumps(body)
    return decode_response(200, {}, raw.encode(), **kwargs)


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def feed_split(data: bytes, cuts: Iterable[int], **kwargs: Any) -> list[StreamEvent]:
    decoder = ResponsesStreamDecoder(**kwargs)
    events: list[StreamEvent] = []
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        events.extend(decoder.feed(data[last:cut]))
        last = cut
    events.extend(decoder.close())
    return events


ENCRYPTED = "gAAAAABo" + "x" * 40
WEB_SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "météo Zürich"},
}
MIXED = response(
    [
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [
                {"type": "summary_text", "text": "**Plan**\n\nLook it up."},
                {"type": "summary_text", "text": "Then answer."},
            ],
            "encrypted_content": ENCRYPTED,
        },
        WEB_SEARCH,
        {
            "id": "msg_1",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Searching", "annotations": [], "logprobs": []},
                {"type": "refusal", "refusal": "Not that part."},
            ],
        },
        {
            "id": "fc_1",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"zeta":1, "alpha":"Zürich 東京"}',
        },
    ]
)

MIXED_RESUME = {
    "following": [{"type": "web_search_call", "id": None}, None, None, None],
    "reasoning_parts": [
        {"summary": MIXED["output"][0]["summary"], "content": []},
        None,
        None,
        None,
    ],
}
"""Its reasoning item's two summary parts, kept so that they go back as two, and the web
search call that followed the reasoning (no id: the response was not stored), before
which alone the reasoning goes back."""


# Responses


def test_every_item_type_maps_to_its_block() -> None:
    decoded = decode(MIXED, provider="openai", model="gpt-5")
    assert decoded.content == (
        Reasoning(
            text="**Plan**\n\nLook it up.\n\nThen answer.",
            signature="rs_1",
            encrypted_content=ENCRYPTED,
        ),
        TextPart(text="Searching"),
        Refusal(text="Not that part."),
        ToolCall(id="call_1", name="get_weather", arguments='{"zeta":1, "alpha":"Zürich 東京"}'),
    )
    assert decoded.finish_reason == FinishReason.TOOL_CALLS
    assert decoded.provider_data == {
        "openai_responses": {"items": [WEB_SEARCH], "resume": MIXED_RESUME}
    }
    assert (decoded.model, decoded.id, decoded.provider) == ("gpt-5-2025-08-07", "resp_1", "openai")
    assert decoded.usage == Usage(
        input_tokens=10, output_tokens=7, reasoning_tokens=3, cache_read_tokens=4
    )


def test_other_items_never_become_text() -> None:
    decoded = decode(MIXED)
    assert decoded.text() == "Searching"
    assert decoded.first_refusal() == "Not that part."
    assert "météo" not in (decoded.text() or "")


def test_a_reasoning_item_without_a_summary_gives_its_reasoning_text() -> None:
    item = {
        "id": "rs_tmp_1",
        "type": "reasoning",
        "summary": [],
        "content": [
            {"type": "reasoning_text", "text": "The user asks."},
            {"type": "reasoning_text", "text": "Answer 4."},
        ],
    }
    assert decode(response([item])).content == (
        Reasoning(text="The user asks.\n\nAnswer 4.", signature="rs_tmp_1"),
    )
    both = {**item, "summary": [{"type": "summary_text", "text": "Short."}]}
    assert decode(response([both])).reasoning() == "Short."
    bare = {"type": "reasoning", "summary": [{"type": "summary_text", "text": ""}]}
    assert decode(response([bare])).content == (Reasoning(text=""),)


def test_function_call_ids_are_the_call_ids_and_arguments_stay_as_sent() -> None:
    calls = [
        {"id": "fc_a", "type": "function_call", "call_id": "call_a", "name": "f", "arguments": ""},
        {"id": "fc_b", "type": "function_call", "name": "g", "arguments": {"b": "é", "a": [1]}},
    ]
    assert decode(response(calls)).tool_calls() == (
        ToolCall(id="call_a", name="f", arguments=""),
        # A server that sends an object gets it as JSON text; one without `call_id` is
        # answered by its item id.
        ToolCall(id="fc_b", name="g", arguments='{"b":"é","a":[1]}'),
    )


@pytest.mark.parametrize(
    ("fields", "calls", "expected"),
    [
        ({"status": "completed"}, False, FinishReason.STOP),
        ({"status": "completed"}, True, FinishReason.TOOL_CALLS),
        (
            {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
            False,
            FinishReason.LENGTH,
        ),
        (
            {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}},
            True,
            FinishReason.CONTENT_FILTER,
        ),
        (
            {"status": "incomplete", "incomplete_details": {"reason": "brand_new"}},
            False,
            FinishReason("brand_new"),
        ),
        ({"status": "incomplete", "incomplete_details": None}, False, FinishReason("incomplete")),
        ({"status": "cancelled"}, False, FinishReason("cancelled")),
        ({"status": None}, False, None),
    ],
)
def test_status_to_finish_reason(
    fields: dict[str, Any], calls: bool, expected: FinishReason | None
) -> None:
    output = (
        [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}] if calls else []
    )
    decoded = decode(response(output, **fields))
    assert decoded.finish_reason == expected
    if expected is not None and expected not in FinishReason.KNOWN:
        assert expected.is_other


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "input_tokens": 254,
                "input_tokens_details": {"cached_tokens": 192, "cache_write_tokens": 8},
                "output_tokens": 221,
                "output_tokens_details": {"reasoning_tokens": 212},
                "total_tokens": 475,
                "cost_in_usd_ticks": 6684000,
            },
            Usage(
                input_tokens=254,
                output_tokens=221,
                reasoning_tokens=212,
                cache_read_tokens=192,
                cache_write_tokens=8,
            ),
        ),
        ({"input_tokens": 5, "output_tokens": 2}, Usage(input_tokens=5, output_tokens=2)),
        (
            {"input_tokens": 5, "input_tokens_details": None, "output_tokens_details": None},
            Usage(input_tokens=5),
        ),
        ({"output_tokens": True}, Usage()),
        ({}, Usage()),
    ],
)
def test_usage(usage: dict[str, Any], expected: Usage) -> None:
    assert decode(response([], usage=usage)).usage == expected


def test_no_usage_is_none() -> None:
    assert decode(response([], usage=None)).usage is None


def test_unknown_fields_and_parts_are_tolerated() -> None:
    message = {
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "output_audio", "data": "..."},
            {"type": "output_text", "text": "hi", "annotations": [{"type": "url_citation"}]},
        ],
        "phase": "final_answer",
        "future": 1,
    }
    warning = Warning.unsupported(RequestField.SEED, "the Responses API takes no seed")
    decoded = decode(response([message], future_field=[1, 2]), warnings=[warning])
    assert decoded.content == (TextPart(text="hi"),)
    assert decoded.warnings == (warning,)


def test_model_falls_back_to_the_one_asked_for_and_an_empty_id_is_none() -> None:
    body = response([], id="")
    del body["model"]
    decoded = decode(body, model="gpt-asked")
    assert (decoded.model, decoded.id) == ("gpt-asked", None)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("<html>oops</html>", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"object": "response", "status": "completed"}', "no `output` list"),
        ('{"output": [1]}', "an output item is not an object"),
        ('{"output": [{"type": "message", "content": ["x"]}]}', "a message part is not an object"),
        ('{"output": [{"type": "function_call", "arguments": "{}"}]}', "no `call_id`"),
    ],
)
def test_an_unreadable_body_is_a_server_error(body: str, why: str) -> None:
    with pytest.raises(ServerError) as caught:
        decode(body, provider="openai", model="m")
    error = caught.value
    assert type(error) is ServerError and error.authored and error.retryable
    assert why in error.message
    assert error.context.body == body
    assert (error.provider, error.model) == ("openai", "m")


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("server_error", ServerError),
        ("rate_limit_exceeded", RateLimitedError),
        ("invalid_prompt", InvalidRequestError),
        ("invalid_image_url", InvalidRequestError),
        ("vector_store_timeout", ServerError),
        ("context_length_exceeded", ContextWindowExceededError),
        ("brand_new_code", ServerError),
    ],
)
def test_a_failed_response_raises_its_error(code: str, cls: type[Error]) -> None:
    words = "Provider words that quote the caller"
    body = response([], status="failed", error={"code": code, "message": words})
    with pytest.raises(Error) as caught:
        decode(body, provider="openai", model="gpt-4o")
    error = caught.value
    assert type(error) is cls
    assert (error.provider, error.model, error.status) == ("openai", "gpt-4o", None)
    assert words in error.message and not error.authored
    assert words not in str(error.as_log())
    assert error.retryable is (cls in (ServerError, RateLimitedError))


def test_a_failed_response_rejecting_the_schema_is_unsupported() -> None:
    failed = {"code": "invalid_json_schema", "message": "Invalid schema for response_format"}
    error = error_from_failed({"status": "failed", "error": failed})
    assert isinstance(error, UnsupportedError)
    assert (error.field, error.stage) == (RequestField.RESPONSE_FORMAT, UnsupportedStage.PROVIDER)


def test_a_failed_response_that_says_nothing() -> None:
    with pytest.raises(ServerError) as caught:
        decode(response([], status="failed", error=None), provider="openai")
    assert caught.value.authored and "did not say why" in caught.value.message
    assert caught.value.provider == "openai"


def test_an_error_object_in_a_200_body_is_that_error() -> None:
    body = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    with pytest.raises(RateLimitedError):
        decode({**body, "error": {**body["error"], "code": "rate_limit_exceeded"}})
    with pytest.raises(ServerError):
        decode({"error": {"message": "boom", "type": "server_error"}})


# Errors (the Chat Completions mapping, with the Responses API's fields)


def error_body(message: str, **fields: Any) -> bytes:
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return json.dumps({"error": {**error, **fields}}).encode()


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (400, error_body("Invalid 'temperature'", param="temperature"), InvalidRequestError),
        (
            400,
            error_body("Your input exceeds the context window of this model.", param="input"),
            ContextWindowExceededError,
        ),
        (401, error_body("Incorrect API key provided: sk-...", code="invalid_api_key"), None),
        (403, error_body("Not allowed"), PermissionDeniedError),
        (404, error_body("The model `x` does not exist", code="model_not_found"), NotFoundError),
        (429, error_body("Rate limit", code="rate_limit_exceeded"), RateLimitedError),
        (429, error_body("You exceeded your quota", code="insufficient_quota"), None),
        (500, error_body("boom", type="server_error"), ServerError),
        (503, b"upstream connect error", OverloadedError),
    ],
)
def test_error_statuses(status: int, body: bytes, cls: type[Error] | None) -> None:
    error = error_from_response(status, {"x-request-id": "req_1"}, body, provider="openai")
    expected = (
        {401: AuthenticationError, 429: QuotaExceededError}.get(status) if cls is None else cls
    )
    assert type(error) is expected
    assert (error.status, error.provider, error.request_id) == (status, "openai", "req_1")
    assert error.context.body == body.decode()


def test_a_429_waits_as_its_headers_say() -> None:
    headers = {"retry-after-ms": "1500", "x-ratelimit-reset-requests": "20s"}
    error = error_from_response(429, headers, error_body("slow", code="rate_limit_exceeded"))
    assert isinstance(error, RateLimitedError) and error.retry_after == 1.5


@pytest.mark.parametrize(
    ("param", "code", "message", "field"),
    [
        (
            "text.format.schema",
            "invalid_json_schema",
            "Invalid schema for response_format 'Person': In context=(), 'minimum' is not "
            "permitted.",
            RequestField.RESPONSE_FORMAT,
        ),
        (
            "text.format.schema",
            None,
            "Invalid schema: schema must be a JSON Schema of 'type: \"object\"'",
            RequestField.RESPONSE_FORMAT,
        ),
        (
            "tools[0].parameters",
            "invalid_function_parameters",
            "Invalid schema for function 'lookup': In context=(), 'additionalProperties' is "
            "required to be supplied and to be false.",
            RequestField.TOOLS,
        ),
    ],
)
def test_a_rejected_schema_is_unsupported_by_the_provider(
    param: str, code: str | None, message: str, field: RequestField
) -> None:
    error = error_from_response(400, {}, error_body(message, param=param, code=code))
    assert isinstance(error, UnsupportedError)
    assert (error.field, error.stage) == (field, UnsupportedStage.PROVIDER)
    assert error.status == 400 and not error.retryable


def test_error_events_in_either_shape() -> None:
    flat = {"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None}
    nested = {"type": "error", "error": {"type": "tokens", "code": "rate_limit_exceeded"}}
    nested["error"]["message"] = "slow"
    for payload in (flat, nested):
        error = error_from_payload(payload, provider="openai", model="m")
        assert type(error) is RateLimitedError
        assert (error.provider, error.model, error.status) == ("openai", "m", None)
        assert error.context.body == json.dumps(payload)
    server = error_from_payload({"type": "error", "code": "server_error", "message": "x"})
    assert type(server) is ServerError and server.retryable


def test_an_error_event_in_plain_words_is_the_servers_error() -> None:
    # `event: error` with text, or a JSON string (a proxy's words): the server's error,
    # tried again, not a stream allama could not read.
    for words in (b"Internal Server Error", b'"upstream timed out"'):
        for end in (b"\n\n", b""):  # (cut at the end too: an error event all the same)
            with pytest.raises(ServerError) as caught:
                decode_stream(b"event: error\ndata: " + words + end)
            assert caught.value.retryable and str(caught.value) == words.decode().strip('"')


# Streams


def test_stream_events_in_order_with_dense_indices() -> None:
    events = decode_stream(stream_of(MIXED), provider="openai")
    assert events == [
        ResponseStart(id="resp_1", model="gpt-5-2025-08-07"),
        BlockStart(index=0, block_type=StreamBlockType.REASONING),
        ReasoningDelta(index=0, signature="rs_1"),
        ReasoningDelta(index=0, text="**Plan*"),
        ReasoningDelta(index=0, text="*\n\nLook"),
        ReasoningDelta(index=0, text=" it up."),
        ReasoningDelta(index=0, text="\n\nThen"),
        ReasoningDelta(index=0, text=" ans"),
        ReasoningDelta(index=0, text="wer."),
        ReasoningDelta(index=0, encrypted_content=ENCRYPTED),
        BlockStop(index=0),
        ProviderDataEvent(namespace="openai_responses", key="items", value=[WEB_SEARCH]),
        BlockStart(index=1, block_type=StreamBlockType.TEXT),
        TextDelta(index=1, text="Sea"),
        TextDelta(index=1, text="rch"),
        TextDelta(index=1, text="ing"),
        BlockStart(index=2, block_type=StreamBlockType.REFUSAL),
        RefusalDelta(index=2, text="Not t"),
        RefusalDelta(index=2, text="hat p"),
        RefusalDelta(index=2, text="art."),
        BlockStop(index=1),
        BlockStop(index=2),
        BlockStart(index=3, block_type=StreamBlockType.TOOL_CALL, id="call_1", name="get_weather"),
        ToolCallDelta(index=3, arguments='{"zeta":1, '),
        ToolCallDelta(index=3, arguments='"alpha":"Zü'),
        ToolCallDelta(index=3, arguments='rich 東京"}'),
        BlockStop(index=3),
        ProviderDataEvent(namespace="openai_responses", key="resume", value=MIXED_RESUME),
        UsageEvent(
            usage=Usage(input_tokens=10, output_tokens=7, reasoning_tokens=3, cache_read_tokens=4)
        ),
        Finish(finish_reason=FinishReason.TOOL_CALLS),
    ]


def test_stream_collects_to_what_the_body_decodes_to() -> None:
    assert collect(decode_stream(stream_of(MIXED))) == decode(MIXED)


def test_an_incomplete_stream_ends_with_its_reason() -> None:
    body = response(
        [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "1."}],
            }
        ],
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
    )
    events = decode_stream(stream_of(body))
    assert events[-1] == Finish(finish_reason=FinishReason.LENGTH)
    assert collect(events) == decode(body)


def _events_until_error(data: bytes) -> tuple[list[StreamEvent], Error]:
    decoder = ResponsesStreamDecoder(provider="openai", model="gpt-4o")
    seen: list[StreamEvent] = []
    with pytest.raises(Error) as caught:
        # (An error event is raised at the terminal event or the stream's end: a
        # `response.failed` after it may report the usage.)
        for event in itertools.chain(decoder.feed(data), decoder.close()):
            seen.append(event)
    return seen, caught.value


TEXT_ITEM = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
TEXT_START = (
    {"type": "response.created", "response": {"id": "resp_e", "model": "gpt-4o", "output": []}},
    {"type": "response.output_item.added", "output_index": 0, "item": TEXT_ITEM},
    {
        "type": "response.output_text.delta",
        "output_index": 0,
        "item_id": "msg_1",
        "content_index": 0,
        "delta": "Hi",
    },
)


@pytest.mark.parametrize(
    "error_event",
    [
        {"type": "error", "code": "server_error", "message": "The server had an error"},
        {"type": "error", "error": {"code": "server_error", "message": "The server had an error"}},
        # OpenRouter's, by its errors page: `response.error`.
        {
            "type": "response.error",
            "error": {"code": "server_error", "message": "The server had an error"},
        },
        {
            "type": "response.failed",
            "response": {
                "id": "resp_e",
                "status": "failed",
                "error": {"code": "server_error", "message": "The server had an error"},
            },
        },
    ],
)
def test_stream_error_after_text_yields_the_text_first(error_event: dict[str, Any]) -> None:
    data = sse(*TEXT_START, error_event, {"type": "response.completed", "response": {}})
    seen, error = _events_until_error(data)
    assert seen == [
        ResponseStart(id="resp_e", model="gpt-4o"),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="Hi"),
    ]
    assert type(error) is ServerError and error.retryable
    assert (error.provider, error.model, error.status) == ("openai", "gpt-4o", None)
    assert "The server had an error" not in str(error.as_log())


def test_an_event_that_is_only_an_error_object_is_the_providers_error() -> None:
    # OpenRouter sends an error mid-generation as a plain `data:` line holding `error`.
    error = {"code": "rate_limit_exceeded", "message": "Rate limit exceeded: try again in 20s"}
    data = sse(*TEXT_START) + b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
    seen, raised = _events_until_error(data)
    assert seen == [
        ResponseStart(id="resp_e", model="gpt-4o"),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="Hi"),
    ]
    assert type(raised) is RateLimitedError
    assert raised.retry_after == 20.0


def test_a_completed_response_with_failed_status_is_its_error() -> None:
    failed = {"status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow"}}
    data = sse(*TEXT_START, {"type": "response.completed", "response": failed})
    _, error = _events_until_error(data)
    assert type(error) is RateLimitedError


def test_a_stream_cut_inside_an_event_is_incomplete() -> None:
    data = stream_of(MIXED)
    cut = data.index(b"response.completed") + 60
    with pytest.raises(IncompleteStreamError) as caught:
        decode_stream(data[:cut])
    assert caught.value.authored and caught.value.retryable


@pytest.mark.parametrize("ending", [b"", b"data: [DONE]\n\n"])
def test_a_stream_without_its_terminal_event_does_not_finish(ending: bytes) -> None:
    data = stream_of(MIXED)
    data = data[: data.index(b"event: response.completed")] + ending
    events = decode_stream(data)
    assert not any(isinstance(event, Finish) for event in events)
    with pytest.raises(IncompleteStreamError):
        collect(events)


def test_a_last_event_without_its_blank_line_is_read() -> None:
    data = stream_of(MIXED).rstrip(b"\n")
    assert collect(decode_stream(data)) == decode(MIXED)


def test_unknown_events_and_events_after_the_end_are_ignored() -> None:
    body = response([{"type": "message", "role": "assistant", "content": []}])
    data = (
        sse(
            {"type": "response.brand_new", "x": 1},
            {"type": "response.output_text.annotation.added", "annotation": {}},
            {"type": "response.completed", "response": body},
            {"type": "response.output_item.added", "output_index": 9, "item": TEXT_ITEM},
        )
        + b"data: [DONE]\n\n"
    )
    decoder = ResponsesStreamDecoder()
    events = list(decoder.feed(data))
    assert decoder.done
    assert events == [
        ResponseStart(id="resp_1", model="gpt-5-2025-08-07"),
        UsageEvent(
            usage=Usage(input_tokens=10, output_tokens=7, reasoning_tokens=3, cache_read_tokens=4)
        ),
        Finish(finish_reason=FinishReason.STOP),
    ]


def test_a_server_that_sends_finished_items_only() -> None:
    """No deltas, no `added`: each item whole at `done`, or only in the final response."""
    done_only = sse(
        *(
            {"type": "response.output_item.done", "output_index": index, "item": item}
            for index, item in enumerate(MIXED["output"][:2])
        ),
        {"type": "response.completed", "response": MIXED},
    )
    assert collect(decode_stream(done_only)) == decode(MIXED)
    final_only = sse({"type": "response.completed", "response": MIXED})
    assert collect(decode_stream(final_only)) == decode(MIXED)


def test_items_may_finish_out_of_order() -> None:
    """OpenRouter finishes a reasoning item after the message that follows it."""
    reasoning = {
        "id": "rs_tmp",
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "Think"}],
    }
    message = {
        "id": "msg_tmp",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "4", "annotations": []}],
    }
    body = response([reasoning, message])
    data = sse(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**reasoning, "content": []},
        },
        {
            "type": "response.content_part.added",
            "output_index": 0,
            "content_index": 0,
            "item_id": "rs_tmp",
            "part": {"type": "reasoning_text", "text": ""},
        },
        {"type": "response.reasoning_text.delta", "output_index": 0, "delta": "Thi"},
        {"type": "response.reasoning_text.delta", "output_index": 0, "delta": "nk"},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**message, "content": []},
        },
        {"type": "response.output_text.delta", "item_id": "msg_tmp", "delta": "4"},
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        {"type": "response.reasoning_text.done", "output_index": 0, "text": "Think"},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {"type": "response.completed", "response": body},
    )
    events = decode_stream(data)
    assert [e for e in events if isinstance(e, BlockStop)] == [
        BlockStop(index=1),
        BlockStop(index=0),
    ]
    assert collect(events) == decode(body)


def test_a_summary_and_reasoning_text_of_one_item() -> None:
    """The summary is the text; reasoning text streamed after a summary began is not."""
    item = {
        "id": "rs_2",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Short."}],
        "content": [{"type": "reasoning_text", "text": "Long and raw."}],
    }
    body = response([item])
    assert collect(decode_stream(stream_of(body))) == decode(body)
    assert decode(body).reasoning() == "Short."


def test_data_that_is_not_json_is_a_decode_error() -> None:
    data = sse(("response.output_text.delta", "{not json")) + sse(
        {"type": "response.completed", "response": response([])}
    )
    with pytest.raises(StreamDecodeError) as caught:
        decode_stream(data)
    assert caught.value.authored


@pytest.mark.parametrize(
    "events",
    [
        [{"type": "response.output_text.delta", "output_index": 3, "delta": "x"}],
        [{"type": "response.output_text.delta", "item_id": "nobody", "delta": "x"}],
        [TEXT_START[1], TEXT_START[1]],
        [TEXT_START[1], {"type": "response.function_call_arguments.delta", "output_index": 0}],
        [TEXT_START[1], {"type": "response.reasoning_summary_text.delta", "output_index": 0}],
        [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": "function_call", "call_id": "c", "name": "f"},
            },
            {"type": "response.output_text.delta", "output_index": 0, "delta": "x"},
        ],
        [
            TEXT_START[1],
            {"type": "response.output_item.done", "output_index": 0, "item": TEXT_ITEM},
            TEXT_START[2],
        ],
        [
            TEXT_START[1],
            TEXT_START[2],
            {**TEXT_START[2], "type": "response.refusal.delta"},
        ],
        [{"type": "response.output_item.added", "output_index": 0}],
        [{"type": "response.completed"}],
        [{"type": "response.output_item.added", "item": TEXT_ITEM}],
    ],
)
def test_events_that_make_no_sense_are_decode_errors(events: list[dict[str, Any]]) -> None:
    with pytest.raises(StreamDecodeError):
        decode_stream(sse(*events))


def test_an_id_and_model_learnt_at_the_end_are_reported_before_the_finish() -> None:
    body = response([])
    data = sse(
        {"type": "response.created", "response": {}},
        {"type": "response.completed", "response": body},
    )
    events = decode_stream(data, model="asked")
    assert events[0] == ResponseStart(id=None, model="asked")
    assert ResponseStart(id="resp_1", model="gpt-5-2025-08-07") in events
    assert collect(events) == decode(body, model="asked")


# Any response, streamed and split anywhere, collects to what its body decodes to.

_json_leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_ids = st.text("abcdefXYZ0123456789_", min_size=1, max_size=12)
_parts = st.one_of(
    st.builds(
        lambda t: {"type": "output_text", "text": t, "annotations": [], "logprobs": []},
        st.text(max_size=20),
    ),
    st.builds(lambda t: {"type": "refusal", "refusal": t}, st.text(max_size=20)),
    st.builds(lambda d: {"type": "output_audio", "data": d}, st.text(max_size=5)),
)
_items = st.one_of(
    st.builds(
        lambda i, parts: {
            "id": f"msg_{i}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": parts,
        },
        _ids,
        st.lists(_parts, max_size=3),
    ),
    st.builds(
        lambda i, c, n, a: {
            "id": f"fc_{i}",
            "type": "function_call",
            "status": "completed",
            "call_id": c,
            "name": n,
            "arguments": json.dumps(a, ensure_ascii=False),
        },
        _ids,
        _ids,
        _ids,
        st.dictionaries(st.text(max_size=5), _json, max_size=4),
    ),
    st.builds(
        lambda i, summary, content, encrypted: {
            "id": f"rs_{i}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t} for t in summary],
            **(
                {"content": [{"type": "reasoning_text", "text": t} for t in content]}
                if content
                else {}
            ),
            **({"encrypted_content": encrypted} if encrypted else {}),
        },
        _ids,
        st.lists(st.text(max_size=15), max_size=3),
        st.lists(st.text(max_size=15), max_size=2),
        st.none() | _ids,
    ),
    st.builds(
        lambda i, kind, extra: {"id": i, "type": kind, "status": "completed", "extra": extra},
        _ids,
        st.sampled_from(["web_search_call", "file_search_call", "mcp_call", "brand_new_call"]),
        _json,
    ),
)
_responses = st.builds(
    lambda output, status, reason, counts: response(
        output,
        status=status,
        incomplete_details={"reason": reason} if status == "incomplete" else None,
        usage={k: v for k, v in counts.items() if v is not None},
    ),
    st.lists(_items, max_size=6),
    st.sampled_from(["completed", "incomplete"]),
    st.sampled_from(["max_output_tokens", "content_filter", "new"]),
    st.fixed_dictionaries(
        {
            "input_tokens": st.none() | st.integers(0, 10**6),
            "output_tokens": st.none() | st.integers(0, 10**6),
            "input_tokens_details": st.none()
            | st.fixed_dictionaries({"cached_tokens": st.integers(0, 9)}),
        }
    ),
)


@settings(max_examples=150, deadline=None)
@given(body=_responses, data=st.data())
def test_any_response_streamed_and_split_anywhere_collects_to_its_body(
    body: dict[str, Any], data: st.DataObject
) -> None:
    raw = stream_of(body)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=20), label="cuts")
    expected = decode(body)
    assert collect(feed_split(raw, cuts)) == expected
    surfaced = [e.index for e in decode_stream(raw) if isinstance(e, BlockStart)]
    assert surfaced == list(range(len(expected.content)))


def test_one_byte_at_a_time() -> None:
    raw = stream_of(MIXED)
    assert collect(feed_split(raw, range(len(raw)))) == decode(MIXED)


# Replay of the recorded Responses API traffic

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))


@dataclass(frozen=True)
class Case:
    key: str
    data: dict[str, Any]

    @property
    def stream(self) -> bytes | None:
        raw = self.data.get("stream")
        return raw.encode() if isinstance(raw, str) else None

    @property
    def body(self) -> bytes:
        if self.data.get("response_body") is not None:
            return json.dumps(self.data["response_body"]).encode()
        return str(self.data.get("response_text") or "").encode()

    @property
    def is_error(self) -> bool:
        return int(self.data["status"]) >= 400 or "in_stream_error" in self.data.get("tags", [])


def _load() -> list[Case]:
    if not CORPUS.is_dir():
        return []
    cases = []
    for path in sorted(CORPUS.glob("*/*.json")):
        data = json.loads(path.read_text())
        endpoint = str(data.get("endpoint") or "").split("?")[0]
        if path.parent.name == "openai_responses" or endpoint.endswith("/responses"):
            cases.append(Case(f"{path.parent.name}/{path.stem}", data))
    return cases


CASES = _load()
RESPONSES = [c for c in CASES if not c.is_error and c.stream is None]
STREAMS = [c for c in CASES if not c.is_error and c.stream is not None]
ERRORS = [c for c in CASES if c.is_error]


def _keys(cases: list[Case]) -> list[str]:
    return [case.key for case in cases]


# Independent reading of the recordings

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


@dataclass
class Expected:
    text: str | None
    refusal: str | None
    calls: list[tuple[str, str, Any]]
    """(call id, name, arguments as a value)."""
    reasoning: str | None
    finish: str | None
    usage: Usage | None
    model: str | None
    id: str | None
    others: int


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    inputs = raw.get("input_tokens_details") or {}
    outputs = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=_int(raw.get("input_tokens")),
        output_tokens=_int(raw.get("output_tokens")),
        reasoning_tokens=_int(outputs.get("reasoning_tokens")),
        cache_read_tokens=_int(inputs.get("cached_tokens")),
        cache_write_tokens=_int(inputs.get("cache_write_tokens")),
    )


def _finish(final: dict[str, Any], calls: bool) -> str | None:
    status = final.get("status")
    if status == "completed":
        return "tool_calls" if calls else "stop"
    if status == "incomplete":
        reason = (final.get("incomplete_details") or {}).get("reason")
        return _INCOMPLETE.get(reason, reason or "incomplete")
    return None if status in (None, "queued", "in_progress") else status


def _joined(texts: list[str]) -> str:
    return "\n\n".join(text for text in texts if text)


def _expected(items: list[dict[str, Any]], final: dict[str, Any]) -> Expected:
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[tuple[str, str, Any]] = []
    thoughts: list[str] = []
    others = 0
    for item in items:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part["text"])
                elif part.get("type") == "refusal":
                    refusals.append(part["refusal"])
        elif kind == "function_call":
            calls.append((item["call_id"], item["name"], json.loads(item["arguments"] or "null")))
        elif kind == "reasoning":
            summary = [p["text"] for p in item.get("summary") or []]
            content = [p["text"] for p in item.get("content") or []]
            thoughts.append(_joined(summary) or _joined(content))
        else:
            others += 1
    return Expected(
        "".join(texts) if texts else None,
        refusals[0] if refusals else None,
        calls,
        "".join(thoughts) if thoughts else None,
        _finish(final, bool(calls)),
        _usage(final.get("usage")),
        final.get("model"),
        final.get("id") or None,
        others,
    )


def expected_response(case: Case) -> Expected:
    body = case.data["response_body"]
    return _expected(body.get("output") or [], body)


def sse_data(stream: str) -> list[dict[str, Any]]:
    """The JSON data of each server-sent event: `data:` lines joined, events split at blank
    lines; `[DONE]` and comment lines left out."""
    events: list[dict[str, Any]] = []
    data: list[str] = []
    for line in [*stream.splitlines(), ""]:
        if not line:
            joined = "\n".join(data)
            if joined and joined != "[DONE]":
                events.append(json.loads(joined))
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return events


def read_stream(stream: str) -> tuple[Expected, dict[str, Any] | None]:
    """What a recorded stream adds up to, read from its deltas (not from the response it
    ends with): items by output index as `added` announced them, their text, refusal,
    arguments and summary deltas appended (summary parts by index, reasoning text where no
    summary came); the status, usage, model and id of the last response an event carried;
    and the error event (or failed response) that ended it, if one did."""
    items: dict[int, dict[str, Any]] = {}
    summaries: dict[int, dict[int, str]] = {}
    reasoning_texts: dict[int, dict[int, str]] = {}
    final: dict[str, Any] = {}
    error = None
    for event in sse_data(stream):
        kind = event.get("type")
        if kind == "error" or kind == "response.failed":
            error = event
            break
        if isinstance(event.get("response"), dict):
            final = event["response"]
        index = event.get("output_index")
        if kind == "response.output_item.added":
            item = dict(event["item"])
            if item["type"] == "message":
                item["content"] = []
            items[index] = item
        elif kind == "response.content_part.added" and items[index]["type"] == "message":
            part = dict(event["part"])
            items[index]["content"].append(part)
        elif kind == "response.output_text.delta":
            items[index]["content"][event["content_index"]]["text"] += event["delta"]
        elif kind == "response.refusal.delta":
            items[index]["content"][event["content_index"]]["refusal"] += event["delta"]
        elif kind == "response.function_call_arguments.delta":
            items[index]["arguments"] += event["delta"]
        elif kind == "response.reasoning_summary_text.delta":
            parts = summaries.setdefault(index, {})
            parts[event["summary_index"]] = parts.get(event["summary_index"], "") + event["delta"]
        elif kind == "response.reasoning_text.delta":
            parts = reasoning_texts.setdefault(index, {})
            parts[event["content_index"]] = parts.get(event["content_index"], "") + event["delta"]
        elif kind in ("response.completed", "response.incomplete"):
            break
    for index, parts in summaries.items():
        items[index]["summary"] = [{"text": parts[i]} for i in sorted(parts)]
    for index, parts in reasoning_texts.items():
        items[index]["content"] = [{"text": parts[i]} for i in sorted(parts)]
    return _expected([items[i] for i in sorted(items)], final), error


def check(response: ChatResponse, expected: Expected) -> None:
    assert response.text() == expected.text
    assert response.first_refusal() == expected.refusal
    calls = response.tool_calls()
    assert [(c.id, c.name, json.loads(c.arguments or "null")) for c in calls] == expected.calls
    assert response.reasoning() == expected.reasoning
    assert response.finish_reason == expected.finish
    assert response.usage == expected.usage
    assert response.model == expected.model
    assert response.id == expected.id
    others = response.provider_value("openai_responses", "items")
    assert (len(others) if isinstance(others, list) else 0) == expected.others


def test_the_harness_reads_a_stream_as_its_response() -> None:
    """The independent reading of a stream agrees with its reading of the same response, so
    that the harness and the adapter cannot agree on a wrong reading."""
    streamed, error = read_stream(stream_of(MIXED).decode())
    assert error is None
    assert streamed == _expected(MIXED["output"], MIXED)
    assert streamed.reasoning == "**Plan**\n\nLook it up.\n\nThen answer."
    assert streamed.calls == [("call_1", "get_weather", {"zeta": 1, "alpha": "Zürich 東京"})]


def test_the_corpus_has_every_kind_of_case() -> None:
    if not CASES:
        pytest.skip(f"no Responses API cases under {CORPUS}")
    assert RESPONSES and STREAMS and ERRORS


@pytest.mark.parametrize("case", RESPONSES, ids=_keys(RESPONSES))
def test_recorded_response_decodes(case: Case) -> None:
    decoded = decode_response(
        case.data["status"], case.data.get("response_headers") or {}, case.body, provider="p"
    )
    check(decoded, expected_response(case))
    assert decoded.provider == "p"


def _decode_whole(case: Case) -> ChatResponse:
    assert case.stream is not None
    return collect(decode_stream(case.stream))


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
def test_recorded_stream_decodes(case: Case) -> None:
    assert case.stream is not None
    check(_decode_whole(case), read_stream(case.stream.decode())[0])


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
def test_recorded_stream_collects_to_the_response_it_ends_with(case: Case) -> None:
    """Item for item what the final response says, but for what a server changed between the
    stream and its final response (OpenRouter renames its temporary reasoning item ids)."""
    assert case.stream is not None
    final = [
        e["response"]
        for e in sse_data(case.stream.decode())
        if e.get("type") in ("response.completed", "response.incomplete")
    ][-1]
    collected = _decode_whole(case)
    body = decode_object(final)
    renamed = {
        block.signature: other.signature
        for block, other in zip(collected.content, body.content, strict=True)
        if isinstance(block, Reasoning) and isinstance(other, Reasoning)
    }
    if case.data.get("provider") != "openrouter":
        assert all(ours == theirs for ours, theirs in renamed.items())
    content = tuple(
        block.model_copy(update={"signature": renamed[block.signature]})
        if isinstance(block, Reasoning)
        else block
        for block in collected.content
    )
    assert collected.model_copy(update={"content": content}) == body


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_recorded_stream_any_chunking(case: Case, data: st.DataObject) -> None:
    assert case.stream is not None
    raw = case.stream
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=30), label="cuts")
    collected = collect(feed_split(raw, cuts, provider="p"))
    assert collected == _decode_whole(case)
    check(collected, read_stream(raw.decode())[0])


_BY_CODE: dict[str, type[Error]] = {
    "rate_limit_exceeded": RateLimitedError,
    "insufficient_quota": QuotaExceededError,
    "context_length_exceeded": ContextWindowExceededError,
    "invalid_api_key": AuthenticationError,
    "model_not_found": NotFoundError,
    "server_error": ServerError,
    "invalid_prompt": InvalidRequestError,
}
_BY_STATUS: dict[int, type[Error]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    429: RateLimitedError,
    503: OverloadedError,
}


def expected_error(case: Case) -> type[Error]:
    """The class a recorded error stands for, from its tags, its code and its status."""
    tags = set(case.data.get("tags", []))
    if "invalid_schema" in tags:
        return UnsupportedError
    if "context_length" in tags:
        return ContextWindowExceededError
    status = int(case.data["status"])
    payload: Any = case.data.get("response_body")
    if case.stream is not None and status < 400:
        payload = read_stream(case.stream.decode())[1]
        if payload is not None and payload.get("type") == "response.failed":
            payload = {"error": payload["response"].get("error")}
    inner = (payload or {}).get("error") if isinstance(payload, dict) else None
    code = (inner or {}).get("code") if isinstance(inner, dict) else None
    if code is None and isinstance(payload, dict):
        code = payload.get("code")
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status < 400:
        return ServerError
    return ServerError if status >= 500 else InvalidRequestError


@pytest.mark.parametrize("case", ERRORS, ids=_keys(ERRORS))
def test_recorded_error_maps_to_its_class(case: Case) -> None:
    status = int(case.data["status"])
    with pytest.raises(Error) as caught:
        if case.stream is not None and status < 400:
            decode_stream(case.stream, provider="p", model="m")
        else:
            decode_response(
                status, case.data.get("response_headers") or {}, case.body, provider="p"
            )
    error = caught.value
    assert type(error) is expected_error(case)
    assert error.provider == "p"
    assert error.status == (status if status >= 400 else None)
    assert error.message not in str(error.as_log())


def test_the_recorded_in_stream_rate_limit_keeps_what_came_before() -> None:
    case = next(
        (c for c in CASES if c.key == "openai_responses/error_in_stream_rate_limit_tpm"), None
    )
    if case is None or case.stream is None:
        pytest.skip(f"the in-stream rate limit case is not in {CORPUS}")
    seen: list[StreamEvent] = []
    decoder = ResponsesStreamDecoder(provider="openai", model="gpt-4o")
    with pytest.raises(RateLimitedError) as caught:
        for event in decoder.feed(case.stream):
            seen.append(event)
    assert seen == [
        ResponseStart(
            id="resp_6867f1cae59481a0a6d8b23d1b93e4aa02dfa4dca8f6376f", model="gpt-4o-2024-08-06"
        )
    ]
    # A request larger than the per-minute limit: a rate limit no wait ends.
    assert not caught.value.retryable and caught.value.status is None
