"""The response side of the Anthropic Messages adapter: bodies, streams and errors.

Unit tests spell out each mapping; a property test holds the stream decoder to the body
decoder (the same message, streamed and split anywhere, collects to what the body decodes
to); and a replay reads every recorded Anthropic case under `ALLAMA_CORPUS_DIR` (default
`../shared/corpus/cases` next to the repository), with expectations computed from the
recording alone. The replay assumes only what the wire format promises: usage fields,
`stop_sequence`, `stop_details` and content blocks may be missing, unknown or new.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allama.adapters.anthropic._decode import decode_response
from allama.adapters.anthropic._errors import (
    error_from_payload,
    error_from_response,
    retry_after,
)
from allama.adapters.anthropic._sse import MessagesStreamDecoder, decode_stream
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
    RequestTimeoutError,
    ServerError,
    StreamDecodeError,
    UnsupportedError,
)
from allama.stream import StreamCollector
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    BlockStart,
    BlockStop,
    ChatResponse,
    Finish,
    FinishReason,
    ProviderDataEvent,
    Reasoning,
    ReasoningDelta,
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


def message(content: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    return {**base, **fields}


def decode(body: dict[str, Any] | str, **kwargs: Any) -> ChatResponse:
    raw = body if isinstance(body, str) else json.dumps(body)
    return decode_response(200, {}, raw.encode(), **kwargs)


def sse(*events: dict[str, Any] | tuple[str, str]) -> bytes:
    """Events as Anthropic frames them: `event: <type>` then `data: <json>`; a tuple is
    (event name, raw data)."""
    out = []
    for event in events:
        name, data = event if isinstance(event, tuple) else (event["type"], json.dumps(event))
        out.append(f"event: {name}\ndata: {data}\n\n")
    return "".join(out).encode()


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def feed_split(data: bytes, cuts: Iterable[int], **kwargs: Any) -> list[StreamEvent]:
    decoder = MessagesStreamDecoder(**kwargs)
    events: list[StreamEvent] = []
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        events.extend(decoder.feed(data[last:cut]))
        last = cut
    events.extend(decoder.close())
    return events


def pieces(text: str, parts: int = 3) -> list[str]:
    """The text in up to `parts` pieces, as a stream would send it."""
    step = max(1, -(-len(text) // parts))
    return [text[i : i + step] for i in range(0, len(text), step)]


def stream_of(msg: dict[str, Any]) -> bytes:
    """The stream Anthropic sends for a message: empty blocks at the start, their content in
    deltas, the stop reason and output count in `message_delta`."""
    usage = dict(msg.get("usage") or {})
    output = {k: usage.pop(k) for k in ("output_tokens", "output_tokens_details") if k in usage}
    start = {**msg, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    start.pop("stop_details", None)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(msg["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in pieces(block["text"])]
        elif kind in ("tool_use", "server_tool_use"):
            first = {**block, "input": {}}
            text = json.dumps(block["input"], ensure_ascii=False, separators=(",", ":"))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(text)]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": t} for t in pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            first = block
        events.append({"type": "content_block_start", "index": index, "content_block": first})
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas
        )
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": msg["stop_reason"], "stop_sequence": msg.get("stop_sequence")}
    if "stop_details" in msg:
        delta["stop_details"] = msg["stop_details"]
    events.append(
        {
            "type": "message_delta",
            "delta": delta,
            "usage": output,
        }
    )
    events.append({"type": "message_stop"})
    return sse(*events)


SIGNATURE = "EqQBCkYIBxgCKkB" + "x" * 40
WEB_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "https://example.com", "title": "Ex"}],
}
MIXED = message(
    [
        {"type": "thinking", "thinking": "Let me think", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "text", "text": "Searching"},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "météo"},
        },
        WEB_RESULT,
        {"type": "text", "text": " done"},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "get_weather",
            "input": {"zeta": 1, "alpha": "Zürich 東京", "nested": {"b": [1, 2], "a": None}},
        },
    ],
    stop_reason="tool_use",
    usage={
        "input_tokens": 10,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 30,
        "output_tokens": 7,
        "output_tokens_details": {"thinking_tokens": 3},
        "service_tier": "standard",
    },
)


# Responses


def test_every_block_type_maps_to_its_block() -> None:
    response = decode(MIXED, provider="anthropic", model="claude-asked-for")
    assert response.content == (
        Reasoning(text="Let me think", signature=SIGNATURE),
        Reasoning(text="", encrypted_content="EmwKAhgBEgy3va3pzix"),
        TextPart(text="Searching"),
        TextPart(text=" done"),
        ToolCall(
            id="toolu_1",
            name="get_weather",
            arguments='{"zeta":1,"alpha":"Zürich 東京","nested":{"b":[1,2],"a":null}}',
        ),
    )
    assert response.finish_reason == FinishReason.TOOL_CALLS
    assert response.provider_data == {
        "anthropic": {
            "server_blocks": [MIXED["content"][3], WEB_RESULT],
            # It searched before its tool call: it goes back whole, the results with it.
            "resume": {
                "issuer": "anthropic",
                "paused": False,
                "blocks": [0, 1, 2, MIXED["content"][3], WEB_RESULT, 3, 4],
            },
            "usage_details": {"service_tier": "standard"},
        }
    }
    assert (response.model, response.id, response.provider) == (
        "claude-sonnet-4-5",
        "msg_1",
        "anthropic",
    )


def test_server_blocks_never_become_text() -> None:
    response = decode(MIXED)
    assert response.text() == "Searching done"
    assert "web_search" not in (response.text() or "")


def test_redacted_thinking_has_no_text() -> None:
    response = decode(message([{"type": "redacted_thinking", "data": "opaque"}]))
    assert response.content == (Reasoning(text="", encrypted_content="opaque"),)
    assert response.reasoning() == ""


def test_tool_arguments_keep_key_order_and_non_ascii() -> None:
    raw = '{"content":[{"type":"tool_use","id":"t","name":"f","input":{"b":"é","a":[1]}}]}'
    response = decode(raw)
    assert response.tool_calls() == (ToolCall(id="t", name="f", arguments='{"b":"é","a":[1]}'),)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("tool_use", FinishReason.TOOL_CALLS),
        ("max_tokens", FinishReason.LENGTH),
        ("refusal", FinishReason.REFUSAL),
        ("model_context_window_exceeded", FinishReason.CONTEXT_WINDOW),
        ("pause_turn", FinishReason("pause_turn")),
        ("compaction", FinishReason("compaction")),
        (None, None),
    ],
)
def test_stop_reasons(raw: str | None, expected: FinishReason | None) -> None:
    response = decode(message([], stop_reason=raw))
    assert response.finish_reason == expected
    if raw in ("pause_turn", "compaction"):
        assert response.finish_reason is not None and response.finish_reason.is_other


def test_stop_sequence_is_kept() -> None:
    response = decode(message([], stop_reason="stop_sequence", stop_sequence="END"))
    assert response.finish_reason == FinishReason.STOP
    assert response.provider_data == {"anthropic": {"stop_sequence": "END"}}


def test_refusal_keeps_its_explanation_and_category() -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Blocked by policy."}
    response = decode(message([], stop_reason="refusal", stop_details=details))
    assert response.finish_reason == FinishReason.REFUSAL
    assert response.provider_data == {
        "anthropic": {DECLINE_EXPLANATION_KEY: "Blocked by policy.", "refusal_category": "cyber"}
    }
    assert response.decline_explanation() == "Blocked by policy."


@pytest.mark.parametrize("explanation", [None, "", "  "])
def test_refusal_without_an_explanation(explanation: str | None) -> None:
    details = {"type": "refusal", "category": None, "explanation": explanation}
    response = decode(message([], stop_reason="refusal", stop_details=details))
    assert response.provider_data == {}
    assert response.decline_explanation() is None


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "input_tokens": 10,
                "cache_creation_input_tokens": 20,
                "cache_read_input_tokens": 30,
                "output_tokens": 7,
                "output_tokens_details": {"thinking_tokens": 3},
            },
            Usage(
                input_tokens=60,
                output_tokens=7,
                reasoning_tokens=3,
                cache_read_tokens=30,
                cache_write_tokens=20,
            ),
        ),
        ({"input_tokens": 10, "output_tokens": 5}, Usage(input_tokens=10, output_tokens=5)),
        (
            {"input_tokens": 10, "cache_read_input_tokens": 4, "output_tokens": 5},
            Usage(input_tokens=14, output_tokens=5, cache_read_tokens=4),
        ),
        ({"output_tokens": 5}, Usage(output_tokens=5)),
        ({"cache_read_input_tokens": 4}, Usage(cache_read_tokens=4)),
        ({"input_tokens": None, "output_tokens": 2}, Usage(output_tokens=2)),
        ({}, Usage()),
    ],
)
def test_usage(usage: dict[str, Any], expected: Usage) -> None:
    assert decode(message([], usage=usage)).usage == expected


def test_no_usage_is_none() -> None:
    body = message([])
    del body["usage"]
    assert decode(body).usage is None


def test_unknown_fields_are_tolerated_and_the_rest_passes_through() -> None:
    body = message(
        [{"type": "text", "text": "hi", "citations": [{"type": "x"}], "future": 1}],
        container={"id": "c"},
        future_field=[1, 2],
    )
    body["usage"]["brand_new_count"] = 9
    warning = Warning.unsupported(RequestField.SEED, "seed is not supported")
    response = decode(body, provider="anthropic", warnings=[warning])
    assert response.content == (TextPart(text="hi"),)
    assert response.warnings == (warning,)


def test_model_falls_back_to_the_one_asked_for() -> None:
    body = message([])
    del body["model"]
    assert decode(body, model="claude-x").model == "claude-x"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("<html>oops</html>", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"type": "completion", "content": []}', "`type` is not `message`"),
        ('{"type": "message"}', "no `content` list"),
        ('{"content": [{"type": "text"}]}', "no string `text`"),
        ('{"content": [{"type": "tool_use", "input": {}}]}', "no string `id`"),
    ],
)
def test_an_unreadable_body_is_a_server_error(body: str, why: str) -> None:
    with pytest.raises(ServerError) as caught:
        decode(body, provider="anthropic", model="m")
    error = caught.value
    assert type(error) is ServerError and error.authored and error.retryable
    assert why in error.message
    assert error.context.body == body
    assert (error.provider, error.model) == ("anthropic", "m")


def test_an_error_object_in_a_200_body_is_that_error() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(OverloadedError):
        decode(body)


def test_error_status_raises_the_mapped_error() -> None:
    body = b'{"type":"error","error":{"type":"not_found_error","message":"model: x"}}'
    with pytest.raises(NotFoundError) as caught:
        decode_response(404, {}, body, provider="anthropic", model="x")
    assert (caught.value.status, caught.value.provider, caught.value.model) == (
        404,
        "anthropic",
        "x",
    )


# Errors


def body_of(kind: str, message: str, **extra: Any) -> str:
    error: dict[str, Any] = {"type": kind, "message": message, **extra}
    return json.dumps({"type": "error", "error": error, "request_id": "req_body"})


@pytest.mark.parametrize(
    ("status", "kind", "cls", "retryable"),
    [
        (400, "invalid_request_error", InvalidRequestError, False),
        (401, "authentication_error", AuthenticationError, False),
        (402, "billing_error", QuotaExceededError, False),
        (403, "permission_error", PermissionDeniedError, False),
        (404, "not_found_error", NotFoundError, False),
        (413, "request_too_large", InvalidRequestError, False),
        (429, "rate_limit_error", RateLimitedError, True),
        (500, "api_error", ServerError, True),
        (504, "timeout_error", ServerError, True),
        (529, "overloaded_error", OverloadedError, True),
    ],
)
def test_every_error_type(status: int, kind: str, cls: type[Error], retryable: bool) -> None:
    words = "Provider words that quote the caller"
    error = error_from_response(
        status, {}, body_of(kind, words), provider="anthropic", model="claude-x"
    )
    assert type(error) is cls
    assert error.retryable is retryable
    assert (error.status, error.provider, error.model) == (status, "anthropic", "claude-x")
    assert error.request_id == "req_body"
    assert error.context.body == body_of(kind, words)
    assert words in error.message and not error.authored
    assert words not in str(error.as_log()) and words not in repr(error)
    assert "message" not in error.as_log().to_dict()


def test_a_spent_credit_balance_is_a_refusal_of_the_account() -> None:
    # An `invalid_request_error` by its type, which every request would meet.
    words = (
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
        "Billing to upgrade or purchase credits."
    )
    error = error_from_response(400, {}, body_of("invalid_request_error", words))
    assert type(error) is QuotaExceededError and not error.retryable


def test_the_type_decides_over_the_status() -> None:
    error = error_from_response(400, {}, body_of("overloaded_error", "busy"))
    assert type(error) is OverloadedError


def test_request_too_large_says_so() -> None:
    error = error_from_response(413, {}, body_of("request_too_large", "Request exceeds 32MB"))
    assert type(error) is InvalidRequestError
    assert error.message.startswith("the request is too large")
    assert not error.retryable


def test_a_cloudflare_html_413_is_too_large_in_allama_words() -> None:
    html = "<html><head><title>413 Request Entity Too Large</title></head></html>"
    error = error_from_response(413, {"Content-Type": "text/html"}, html.encode())
    assert type(error) is InvalidRequestError and not error.retryable
    assert error.authored and "too large" in error.message
    assert "<html>" not in error.message and error.context.body == html
    assert "too large" in str(error.as_log())


def test_spend_limit_is_a_quota_not_a_rate_limit() -> None:
    body = body_of(
        "rate_limit_error",
        "You have reached your spend limit",
        details={"error_code": "enforced_spend_limit_reached"},
    )
    error = error_from_response(429, {"retry-after": "5", "x-should-retry": "true"}, body)
    assert type(error) is QuotaExceededError
    assert not error.retryable


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, InvalidRequestError),
        (401, AuthenticationError),
        (402, QuotaExceededError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (408, RequestTimeoutError),
        (409, InvalidRequestError),
        (413, InvalidRequestError),
        (422, InvalidRequestError),
        (429, RateLimitedError),
        (500, ServerError),
        (502, ServerError),
        (503, OverloadedError),
        (529, OverloadedError),
    ],
)
def test_unknown_type_or_no_json_goes_by_status(status: int, cls: type[Error]) -> None:
    for body in (body_of("brand_new_error", "new"), "upstream connect error", ""):
        assert type(error_from_response(status, {}, body)) is cls


def test_a_conflict_may_be_retried() -> None:
    assert error_from_response(409, {}, "").retryable


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            "output_format.schema: For 'integer' type, property 'minimum' is not supported",
            RequestField.RESPONSE_FORMAT,
        ),
        ("output_config.format.schema: Unsupported keyword", RequestField.RESPONSE_FORMAT),
        ("output_format: Extra inputs are not permitted", RequestField.RESPONSE_FORMAT),
        # A limit on every strict schema together names no field, whatever its advice
        # says of tools: the provider reads it from the request (test_anthropic_encode_fixes).
        ("Schema is too complex for compilation", None),
        (
            "tools.0.custom.input_schema: JSON schema is invalid",
            RequestField.TOOLS,
        ),
        (
            "input_schema does not support oneOf, allOf, or anyOf at the top level",
            RequestField.TOOLS,
        ),
        ("tools.2.custom.strict: Extra inputs are not permitted", RequestField.TOOLS),
        ("Too many strict tools: at most 20 are allowed", RequestField.TOOLS),
        (
            "The compiled grammar is too large, which would cause performance issues. "
            "Simplify your tool schemas or reduce the number of strict tools.",
            None,
        ),
    ],
)
def test_a_rejected_schema_is_unsupported_by_the_provider(
    message: str, field: RequestField | None
) -> None:
    error = error_from_response(400, {}, body_of("invalid_request_error", message))
    assert isinstance(error, UnsupportedError)
    assert (error.field, error.stage) == (field, UnsupportedStage.PROVIDER)
    assert error.status == 400 and not error.authored
    assert message not in str(error.as_log())


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 210000 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000",
        "The request would exceed the context window of this model",
    ],
)
def test_a_full_context_window(message: str) -> None:
    error = error_from_response(400, {}, body_of("invalid_request_error", message))
    assert type(error) is ContextWindowExceededError


def test_other_invalid_requests_stay_invalid_requests() -> None:
    words = "tool_choice: Thinking may not be enabled when tool_choice forces tool use"
    assert type(error_from_response(400, {}, body_of("invalid_request_error", words))) is (
        InvalidRequestError
    )


NOW = 1_766_100_000.0  # 2025-12-18T23:20:00Z


def test_retry_after_seconds_and_ms() -> None:
    body = body_of("rate_limit_error", "slow down")
    assert error_from_response(429, {"retry-after": "18"}, body).retry_after == 18.0
    assert error_from_response(429, {"Retry-After-Ms": "1500"}, body).retry_after == 1.5


def test_retry_after_http_date() -> None:
    headers = {"retry-after": "Thu, 18 Dec 2025 23:20:30 GMT"}
    assert retry_after(headers, now=NOW) == 30.0


@pytest.mark.parametrize("off", [-1200.0, 1200.0])
def test_a_reset_moment_is_read_on_the_providers_clock(off: float) -> None:
    from datetime import UTC, datetime
    from email.utils import formatdate

    provider_now = round(time.time() - off)  # this machine's clock `off` from Anthropic's
    headers = {
        "date": formatdate(provider_now, usegmt=True),
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": datetime.fromtimestamp(provider_now + 3, UTC)
        .isoformat()
        .replace("+00:00", "Z"),
    }
    wait = retry_after(headers)
    assert wait is not None and 2.0 <= wait <= 4.0


def test_retry_after_explicit_wins_over_resets() -> None:
    headers = {
        "retry-after": "4",
        "anthropic-ratelimit-tokens-remaining": "0",
        "anthropic-ratelimit-tokens-reset": "2025-12-18T23:21:00Z",
    }
    assert retry_after(headers, now=NOW) == 4.0


def test_retry_after_from_the_exhausted_limits_reset() -> None:
    headers = {
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2025-12-18T23:22:00Z",
        "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-input-tokens-reset": "2025-12-18T23:20:12Z",
        "anthropic-ratelimit-output-tokens-remaining": "0",
        "anthropic-ratelimit-output-tokens-reset": "2025-12-18T23:20:07.5Z",
    }
    assert retry_after(headers, now=NOW) == 12.0
    error = error_from_response(429, headers, body_of("rate_limit_error", "x"), now=NOW)
    assert isinstance(error, RateLimitedError) and error.retry_after == 12.0


def test_retry_after_from_the_latest_reset_when_none_is_exhausted() -> None:
    headers = {
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2025-12-18T23:20:05Z",
        "anthropic-ratelimit-tokens-reset": "2025-12-18T23:20:09+00:00",
    }
    assert retry_after(headers, now=NOW) == 9.0


def test_retry_after_reads_resets_written_in_lowercase_or_without_an_offset() -> None:
    # RFC 3339 allows a lowercase `t` and `z`; a time without an offset is UTC, not the
    # machine's local time.
    for stamp in ("2025-12-18t23:20:09z", "2025-12-18T23:20:09", "2025-12-18 23:20:09Z"):
        headers = {
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-tokens-reset": stamp,
        }
        assert retry_after(headers, now=NOW) == 9.0, stamp


def test_retry_after_never_negative_and_none_without_headers() -> None:
    headers = {"anthropic-ratelimit-tokens-reset": "2025-12-18T23:00:00Z"}
    assert retry_after(headers, now=NOW) == 0.0
    assert retry_after({}, now=NOW) is None
    assert retry_after({"anthropic-ratelimit-tokens-reset": "soon"}, now=NOW) is None
    assert error_from_response(429, {}, body_of("rate_limit_error", "x")).retry_after is None


def test_should_retry_header() -> None:
    body = body_of("api_error", "Internal server error")
    assert not error_from_response(500, {"x-should-retry": "false"}, body).retryable
    invalid = body_of("invalid_request_error", "bad")
    assert error_from_response(400, {"X-Should-Retry": "true"}, invalid).retryable


def test_request_id_from_the_header_first() -> None:
    body = body_of("api_error", "boom")
    assert error_from_response(500, {"request-id": "req_head"}, body).request_id == "req_head"
    assert error_from_response(500, {}, body).request_id == "req_body"
    assert error_from_response(500, {}, "not json").request_id is None


def test_error_payload_in_a_stream_has_no_status() -> None:
    payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = error_from_payload(payload, provider="anthropic", model="m")
    assert type(error) is OverloadedError and error.retryable
    assert (error.status, error.provider, error.model) == (None, "anthropic", "m")
    assert error.context.body == json.dumps(payload)
    unknown = {"type": "error", "error": {"type": "brand_new", "message": "?"}}
    assert type(error_from_payload(unknown)) is ServerError
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
    assert type(error_from_payload(limited)) is RateLimitedError


# Streams


def test_stream_events_in_order_with_dense_indices() -> None:
    events = decode_stream(stream_of(MIXED), provider="anthropic")
    assert events == [
        ResponseStart(id="msg_1", model="claude-sonnet-4-5"),
        UsageEvent(
            usage=Usage(input_tokens=60, cache_read_tokens=30, cache_write_tokens=20),
        ),
        ProviderDataEvent(
            namespace="anthropic", key="usage_details", value={"service_tier": "standard"}
        ),
        BlockStart(index=0, block_type=StreamBlockType.REASONING),
        ReasoningDelta(index=0, text="Let "),
        ReasoningDelta(index=0, text="me t"),
        ReasoningDelta(index=0, text="hink"),
        ReasoningDelta(index=0, signature=SIGNATURE),
        BlockStop(index=0),
        BlockStart(index=1, block_type=StreamBlockType.REASONING),
        ReasoningDelta(index=1, encrypted_content="EmwKAhgBEgy3va3pzix"),
        BlockStop(index=1),
        BlockStart(index=2, block_type=StreamBlockType.TEXT),
        TextDelta(index=2, text="Sea"),
        TextDelta(index=2, text="rch"),
        TextDelta(index=2, text="ing"),
        BlockStop(index=2),
        ProviderDataEvent(namespace="anthropic", key="server_blocks", value=[MIXED["content"][3]]),
        ProviderDataEvent(
            namespace="anthropic", key="server_blocks", value=[MIXED["content"][3], WEB_RESULT]
        ),
        BlockStart(index=3, block_type=StreamBlockType.TEXT),
        TextDelta(index=3, text=" d"),
        TextDelta(index=3, text="on"),
        TextDelta(index=3, text="e"),
        BlockStop(index=3),
        BlockStart(index=4, block_type=StreamBlockType.TOOL_CALL, id="toolu_1", name="get_weather"),
        ToolCallDelta(index=4, arguments='{"zeta":1,"alpha":"Z'),
        ToolCallDelta(index=4, arguments='ürich 東京","nested":{'),
        ToolCallDelta(index=4, arguments='"b":[1,2],"a":null}}'),
        BlockStop(index=4),
        UsageEvent(
            usage=Usage(
                input_tokens=60,
                output_tokens=7,
                reasoning_tokens=3,
                cache_read_tokens=30,
                cache_write_tokens=20,
            )
        ),
        ProviderDataEvent(
            namespace="anthropic",
            key="resume",
            value={
                "issuer": "anthropic",
                "paused": False,
                "blocks": [0, 1, 2, MIXED["content"][3], WEB_RESULT, 3, 4],
            },
        ),
        Finish(finish_reason=FinishReason.TOOL_CALLS),
    ]


def test_stream_collects_to_what_the_body_decodes_to() -> None:
    assert collect(decode_stream(stream_of(MIXED))) == decode(MIXED)


def test_a_tool_call_without_arguments_gets_the_empty_object() -> None:
    data = sse(
        {"type": "message_start", "message": {"id": "m", "model": "c", "content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    )
    response = collect(decode_stream(data))
    assert response.tool_calls() == (ToolCall(id="toolu_1", name="now", arguments="{}"),)


def test_a_tool_input_given_whole_at_the_start() -> None:
    data = sse(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {"x": "é"}},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
    )
    events = decode_stream(data)
    assert ToolCallDelta(index=0, arguments='{"x":"é"}') in events
    assert collect(events).tool_calls() == (ToolCall(id="t", name="f", arguments='{"x":"é"}'),)


def test_a_text_start_with_text_and_ignored_events() -> None:
    data = sse(
        {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "A"}},
        {"type": "brand_new_event", "x": 1},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "citations_delta", "citation": {"type": "char_location"}},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "new_delta", "y": 2}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "B"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "C"}},
    )
    decoder = MessagesStreamDecoder()
    events = list(decoder.feed(data))
    assert decoder.done
    assert events == [
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="A"),
        TextDelta(index=0, text="B"),
        BlockStop(index=0),
        ProviderDataEvent(
            namespace="anthropic",
            key="citations",
            value=[{"index": 0, "citations": [{"type": "char_location"}]}],
        ),
        Finish(finish_reason=FinishReason.STOP),
    ]


def test_stream_refusal_carries_its_explanation() -> None:
    details = {"type": "refusal", "category": "bio", "explanation": "Refused."}
    msg = message([{"type": "text", "text": "Sure, here"}], stop_reason="refusal")
    msg["stop_details"] = details
    events = decode_stream(stream_of(msg))
    assert events[-3:] == [
        ProviderDataEvent(namespace="anthropic", key=DECLINE_EXPLANATION_KEY, value="Refused."),
        ProviderDataEvent(namespace="anthropic", key="refusal_category", value="bio"),
        Finish(finish_reason=FinishReason.REFUSAL),
    ]
    response = collect(events)
    assert response == decode(msg)
    assert response.decline_explanation() == "Refused."


def test_stream_stop_sequence() -> None:
    msg = message([{"type": "text", "text": "a"}], stop_reason="stop_sequence", stop_sequence="##")
    assert collect(decode_stream(stream_of(msg))).provider_data == {
        "anthropic": {"stop_sequence": "##"}
    }


def test_stream_usage_is_the_running_total() -> None:
    start_usage = {
        "input_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 100,
        "output_tokens": 1,
    }
    data = sse(
        {"type": "message_start", "message": {"id": "m", "content": [], "usage": start_usage}},
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 3}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"input_tokens": 6, "output_tokens": 9},
        },
    )
    usages = [event.usage for event in decode_stream(data) if isinstance(event, UsageEvent)]
    assert usages == [
        Usage(input_tokens=105, cache_read_tokens=100, cache_write_tokens=0),
        Usage(input_tokens=105, output_tokens=3, cache_read_tokens=100, cache_write_tokens=0),
        Usage(input_tokens=106, output_tokens=9, cache_read_tokens=100, cache_write_tokens=0),
    ]


def test_stream_error_after_text_yields_the_text_first() -> None:
    data = sse(
        {"type": "message_start", "message": {"id": "m", "model": "c", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        (
            "error",
            '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
        ),
        {"type": "content_block_stop", "index": 0},
    )
    decoder = MessagesStreamDecoder(provider="anthropic", model="c")
    seen: list[StreamEvent] = []
    with pytest.raises(OverloadedError) as caught:
        for event in decoder.feed(data):
            seen.append(event)
    assert seen == [
        ResponseStart(id="m", model="c"),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="Hi"),
    ]
    error = caught.value
    assert (error.provider, error.model, error.status) == ("anthropic", "c", None)
    assert error.retryable and "Overloaded" not in str(error.as_log())


def test_a_stream_cut_inside_an_event_is_incomplete() -> None:
    data = stream_of(message([{"type": "text", "text": "abc"}]))
    cut = data.index(b"message_delta") + 40
    with pytest.raises(IncompleteStreamError) as caught:
        decode_stream(data[:cut])
    assert caught.value.authored and caught.value.retryable


def test_a_stream_without_message_stop_reads_its_last_event() -> None:
    data = stream_of(message([{"type": "text", "text": "abc"}]))
    trimmed = data[: data.index(b"event: message_stop")].rstrip(b"\n")
    assert collect(decode_stream(trimmed)).text() == "abc"


def test_an_error_event_in_plain_words_is_the_servers_error() -> None:
    # `event: error` with text, or a JSON string (a proxy's words): the server's error,
    # tried again, not a stream allama could not read.
    for words in (b"Internal Server Error", b'"upstream timed out"'):
        for end in (b"\n\n", b""):  # (cut at the end too: an error event all the same)
            with pytest.raises(ServerError) as caught:
                decode_stream(b"event: error\ndata: " + words + end)
            assert caught.value.retryable and str(caught.value) == words.decode().strip('"')


def test_data_that_is_not_json_is_a_decode_error() -> None:
    data = sse(("content_block_delta", "{not json")) + sse({"type": "message_stop"})
    with pytest.raises(StreamDecodeError) as caught:
        decode_stream(data)
    assert caught.value.authored


@pytest.mark.parametrize(
    "events",
    [
        [{"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta"}}],
        [{"type": "content_block_stop", "index": 0}],
        [
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{"},
            },
        ],
        [
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ],
        [{"type": "content_block_start", "content_block": {"type": "text"}}],
        [
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ],
    ],
)
def test_events_that_make_no_sense_are_decode_errors(events: list[dict[str, Any]]) -> None:
    with pytest.raises(StreamDecodeError):
        decode_stream(sse(*events))


def test_a_server_block_assembled_from_its_deltas() -> None:
    block = {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {"q": "x"}}
    msg = message([block, {"type": "text", "text": "ok"}], stop_reason="pause_turn")
    events = decode_stream(stream_of(msg))
    assert ProviderDataEvent(namespace="anthropic", key="server_blocks", value=[block]) in events
    assert [e.index for e in events if isinstance(e, BlockStart)] == [0]
    assert collect(events) == decode(msg)


def test_an_unknown_block_keeps_its_streamed_text_and_citations() -> None:
    citation = {"type": "char_location", "cited_text": "x"}
    data = sse(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "future_block", "text": "a", "extra": 1},
        },
        *(
            {"type": "content_block_delta", "index": 0, "delta": delta}
            for delta in (
                {"type": "text_delta", "text": "b"},
                {"type": "citations_delta", "citation": citation},
                {"type": "text_delta", "text": "c"},
            )
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    )
    response = collect(decode_stream(data))
    assert response.content == ()
    block = {"type": "future_block", "text": "abc", "extra": 1, "citations": [citation]}
    assert response.provider_data == {
        "anthropic": {"server_blocks": [block], "resume": {"paused": False, "blocks": [block]}}
    }


# Any message, streamed and split anywhere, collects to what its body decodes to.

_json_leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_ids = st.text("abcdefXYZ0123456789_", min_size=1, max_size=12)
_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=20)),
    st.builds(
        lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a},
        _ids,
        _ids,
        st.dictionaries(st.text(max_size=5), _json, max_size=4),
    ),
    st.builds(
        lambda t, s: {"type": "thinking", "thinking": t, "signature": s},
        st.text(max_size=20),
        _ids,
    ),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, _ids),
    st.builds(
        lambda i, a: {"type": "server_tool_use", "id": i, "name": "web_search", "input": a},
        _ids,
        st.dictionaries(st.text(max_size=5), _json, min_size=1, max_size=3),
    ),
    st.builds(lambda c: {"type": "web_fetch_tool_result", "content": c}, _json),
)
_messages = st.builds(
    lambda content, reason, sequence, counts: message(
        content,
        stop_reason=reason,
        stop_sequence=sequence,
        usage={k: v for k, v in counts.items() if v is not None},
    ),
    st.lists(_blocks, max_size=6),
    st.sampled_from(["end_turn", "tool_use", "max_tokens", "pause_turn", "refusal", "new"]),
    st.none() | st.text(min_size=1, max_size=4),
    st.fixed_dictionaries(
        {
            "input_tokens": st.none() | st.integers(0, 10**6),
            "cache_creation_input_tokens": st.none() | st.integers(0, 10**6),
            "cache_read_input_tokens": st.none() | st.integers(0, 10**6),
            "output_tokens": st.none() | st.integers(0, 10**6),
        }
    ),
)


@settings(max_examples=150, deadline=None)
@given(msg=_messages, data=st.data())
def test_any_message_streamed_and_split_anywhere_collects_to_its_body(
    msg: dict[str, Any], data: st.DataObject
) -> None:
    raw = stream_of(msg)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=20), label="cuts")
    expected = decode(msg)
    assert collect(feed_split(raw, cuts)) == expected
    surfaced = [e.index for e in decode_stream(raw) if isinstance(e, BlockStart)]
    assert surfaced == list(range(len(expected.content)))


def test_one_byte_at_a_time() -> None:
    raw = stream_of(MIXED)
    assert collect(feed_split(raw, range(len(raw)))) == decode(MIXED)


# Replay of the recorded Anthropic traffic

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
    folder = CORPUS / "anthropic"
    if not folder.is_dir():
        return []
    return [
        Case(f"anthropic/{path.stem}", json.loads(path.read_text()))
        for path in sorted(folder.glob("*.json"))
    ]


CASES = _load()
RESPONSES = [c for c in CASES if not c.is_error and c.stream is None]
STREAMS = [c for c in CASES if not c.is_error and c.stream is not None]
ERRORS = [c for c in CASES if c.is_error]


def _keys(cases: list[Case]) -> list[str]:
    return [case.key for case in cases]


# Independent reading of the recordings

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "refusal",
    "model_context_window_exceeded": "context_window",
}


@dataclass
class Expected:
    text: str | None
    calls: list[tuple[str, str, Any]]
    """(id, name, input as a value)."""
    reasoning: str | None
    finish: str | None
    usage: Usage | None
    model: str | None
    id: str | None
    server_blocks: int


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: dict[str, Any] | None) -> Usage | None:
    if raw is None:
        return None
    base = _int(raw.get("input_tokens"))
    written = _int(raw.get("cache_creation_input_tokens"))
    read = _int(raw.get("cache_read_input_tokens"))
    details = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=None if base is None else base + (written or 0) + (read or 0),
        output_tokens=_int(raw.get("output_tokens")),
        reasoning_tokens=_int(details.get("thinking_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


def _finish(raw: Any) -> str | None:
    return _FINISH.get(raw, raw) if raw else None


def _expected(
    blocks: list[dict[str, Any]], msg: dict[str, Any], usage: dict[str, Any] | None
) -> Expected:
    texts = [b["text"] for b in blocks if b.get("type") == "text"]
    thoughts = [b.get("thinking", "") for b in blocks if b.get("type") == "thinking"] + [
        "" for b in blocks if b.get("type") == "redacted_thinking"
    ]
    known = {"text", "tool_use", "thinking", "redacted_thinking"}
    return Expected(
        "".join(texts) if texts else None,
        [(b["id"], b["name"], b.get("input", {})) for b in blocks if b.get("type") == "tool_use"],
        "".join(thoughts) if thoughts else None,
        _finish(msg.get("stop_reason")),
        _usage(usage),
        msg.get("model"),
        msg.get("id"),
        sum(1 for b in blocks if b.get("type") not in known),
    )


def expected_response(case: Case) -> Expected:
    body = case.data["response_body"]
    return _expected(body.get("content") or [], body, body.get("usage"))


def _sse_data(stream: str) -> list[str]:
    """The data of each server-sent event: `data:` lines joined, events split at blank lines."""
    events: list[str] = []
    data: list[str] = []
    for line in [*stream.splitlines(), ""]:
        if not line:
            if data:
                events.append("\n".join(data))
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return events


def expected_stream(case: Case) -> Expected:
    """The message a recorded stream adds up to: blocks by Anthropic's index, their deltas
    appended, the usage counts each event reported (the last report of a count wins; the
    output count of `message_start` is only where the running total began)."""
    assert case.stream is not None
    msg: dict[str, Any] = {}
    usage: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for data in _sse_data(case.stream.decode()):
        event = json.loads(data)
        kind = event.get("type")
        if kind == "message_start":
            msg = dict(event["message"])
            if "usage" in msg:
                usage = {k: v for k, v in msg["usage"].items() if not k.startswith("output_")}
        elif kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "input_json_delta":
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
        elif kind == "message_delta":
            msg.update(event.get("delta") or {})
            if event.get("usage") is not None:
                usage = {
                    **(usage or {}),
                    **{k: v for k, v in event["usage"].items() if v is not None},
                }
        elif kind == "message_stop":
            break
    for index, text in partial.items():
        if text:
            blocks[index]["input"] = json.loads(text)
    return _expected([blocks[i] for i in sorted(blocks)], msg, usage)


def check(response: ChatResponse, expected: Expected) -> None:
    assert response.text() == expected.text
    calls = response.tool_calls()
    assert [(c.id, c.name, c.parsed_arguments()) for c in calls] == expected.calls
    assert response.reasoning() == expected.reasoning
    assert response.finish_reason == expected.finish
    assert response.usage == expected.usage
    assert response.model == expected.model
    assert response.id == expected.id
    server = response.provider_value("anthropic", "server_blocks")
    count = len(server) if isinstance(server, list) else 0
    assert count == expected.server_blocks


def test_the_harness_reads_a_stream_as_its_message() -> None:
    """The independent reading of a stream agrees with its reading of the same message, so
    that the harness and the adapter cannot agree on a wrong reading."""
    synthetic = Case("synthetic", {"status": 200, "stream": stream_of(MIXED).decode()})
    assert expected_stream(synthetic) == _expected(MIXED["content"], MIXED, MIXED["usage"])
    assert expected_stream(synthetic).usage == Usage(
        input_tokens=60,
        output_tokens=7,
        reasoning_tokens=3,
        cache_read_tokens=30,
        cache_write_tokens=20,
    )


def test_the_corpus_has_every_kind_of_case() -> None:
    if not CASES:
        pytest.skip(f"no Anthropic cases under {CORPUS}")
    assert RESPONSES and STREAMS and ERRORS


@pytest.mark.parametrize("case", RESPONSES, ids=_keys(RESPONSES))
def test_recorded_response_decodes(case: Case) -> None:
    response = decode_response(
        case.data["status"],
        case.data.get("response_headers") or {},
        case.body,
        provider="anthropic",
    )
    check(response, expected_response(case))
    assert response.provider == "anthropic"


def _decode_whole(case: Case) -> ChatResponse:
    assert case.stream is not None
    return collect(decode_stream(case.stream, provider="anthropic"))


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
def test_recorded_stream_decodes(case: Case) -> None:
    check(_decode_whole(case), expected_stream(case))


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_recorded_stream_any_chunking(case: Case, data: st.DataObject) -> None:
    assert case.stream is not None
    raw = case.stream
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=30), label="cuts")
    response = collect(feed_split(raw, cuts, provider="anthropic"))
    assert response == _decode_whole(case)
    check(response, expected_stream(case))


def test_recorded_refusal_keeps_its_explanation_both_ways() -> None:
    by_key = {case.key: case for case in CASES}
    body = by_key.get("anthropic/refusal_stop_reason_fixture")
    streamed = by_key.get("anthropic/refusal_stop_reason_stream_sdk_fixture")
    if body is None or streamed is None:
        pytest.skip(f"the refusal fixtures are not in {CORPUS}")
    details = body.data["response_body"]["stop_details"]
    response = decode_response(200, {}, body.body)
    assert response.decline_explanation() == details["explanation"]
    assert response.provider_value("anthropic", "refusal_category") == details["category"]
    collected = _decode_whole(streamed)
    assert collected.finish_reason == FinishReason.REFUSAL
    assert collected.decline_explanation() == "This request was refused due to policy."
    assert collected.provider_value("anthropic", "refusal_category") == "cyber"


_ERROR_CLASS: dict[str, type[Error]] = {
    "invalid_request_error": InvalidRequestError,
    "authentication_error": AuthenticationError,
    "permission_error": PermissionDeniedError,
    "not_found_error": NotFoundError,
    "billing_error": QuotaExceededError,
    "request_too_large": InvalidRequestError,
    "rate_limit_error": RateLimitedError,
    "api_error": ServerError,
    "timeout_error": ServerError,
    "overloaded_error": OverloadedError,
}


def expected_error(case: Case) -> type[Error]:
    """The class a recorded error stands for, from its tags and error type alone."""
    tags = set(case.data.get("tags", []))
    if "invalid_schema" in tags:
        return UnsupportedError
    if "context_length" in tags:
        return ContextWindowExceededError
    payload = case.data.get("response_body")
    if case.stream is not None and int(case.data["status"]) < 400:
        errors = [json.loads(d) for d in _sse_data(case.stream.decode()) if '"error"' in d]
        payload = errors[-1] if errors else None
    kind = ((payload or {}).get("error") or {}).get("type")
    if kind in _ERROR_CLASS:
        return _ERROR_CLASS[kind]
    status = int(case.data["status"])
    if status == 429:
        return RateLimitedError
    return ServerError if status >= 500 else InvalidRequestError


@pytest.mark.parametrize("case", ERRORS, ids=_keys(ERRORS))
def test_recorded_error_maps_to_its_class(case: Case) -> None:
    with pytest.raises(Error) as caught:
        if case.stream is not None and case.data["status"] < 400:
            decode_stream(case.stream, provider="anthropic")
        else:
            decode_response(
                case.data["status"],
                case.data.get("response_headers") or {},
                case.body,
                provider="anthropic",
            )
    error = caught.value
    assert type(error) is expected_error(case)
    assert error.provider == "anthropic"
    if case.data["status"] >= 400:
        assert error.status == case.data["status"]
    request_id = (case.data.get("response_body") or {}).get("request_id")
    if request_id:
        assert error.request_id == request_id
    headers = {k.lower(): v for k, v in (case.data.get("response_headers") or {}).items()}
    if headers.get("x-should-retry") in ("true", "false"):
        assert error.retryable is (headers["x-should-retry"] == "true")
    assert error.message not in str(error.as_log())


@pytest.mark.parametrize("status", [400, 429, 500, 529])
def test_an_empty_error_body_gives_allamas_own_message(status: int) -> None:
    # Nothing the provider wrote: `HTTP <status>` is allama's, and shown in log views.
    error = error_from_response(status, {}, b"")
    assert error.authored and error.message == f"HTTP {status}"
    assert error.as_log()["message"] == f"HTTP {status}"
