"""The Anthropic provider end to end, over real sockets on 127.0.0.1.

A local HTTP server answers every recorded Messages case under `ALLAMA_CORPUS_DIR` (default
`../shared/corpus/cases` next to the repository): the cases of its `anthropic/` folder, and
those of any other folder whose endpoint is `/v1/messages`. It sends each one's status, its
recorded headers and its body, or its stream in small chunks (chunked transfer encoding),
and `allama.provider("anthropic", ...)` asks it the equivalent of the recorded request, sync
and async. Expectations are read from the recording alone: the text, refusal, tool calls,
finish reason, usage and model of a response; the class, status and `retry_after` of an
error. The reading assumes only what the wire format promises: usage counts, headers,
`stop_details` and blocks may be missing, of a type nobody knows yet, or carry new fields.

Where the request body was recorded, the equivalent `ChatRequest` must encode to it; the
differences allama makes on purpose are spelled out where the bodies are normalised.

Then what the recordings do not show: streams cut mid-way, an `event: error` mid-stream, 429
and 529 answers, a schema the provider rejects, the key kept out of errors; and extraction
end to end. The decoder-level replay (any chunking, every block type) is in
`test_anthropic_decode.py`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel, JsonValue

import allama
from _replay_server import (
    CORPUS,
    CORPUS_IS_DEFAULT,
    ReplayServer,
    ReplyHandler,
)
from _replay_server import pieces as _pieces
from allama.errors import (
    AuthenticationError,
    ContextWindowExceededError,
    Error,
    IncompleteStreamError,
    InvalidRequestError,
    NetworkError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    UnsupportedError,
)
from allama.extract import EXTRACTION_TOOL, ExtractionMode, SchemaEnforcement
from allama.providers import HttpProvider
from allama.types import (
    AssistantMessage,
    ChatRequest,
    ChatResponse,
    ContentBlock,
    FinishReason,
    ImagePart,
    Message,
    Reasoning,
    RequestField,
    ResponseFormat,
    StreamEvent,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    ToolMessage,
    UnsupportedStage,
    UserMessage,
    WarningKind,
)

KEY = "sk-ant-api03-SECRET-test-key-4242"
VERSION = "2023-06-01"
MESSAGES_PATH = "/v1/messages"
MODEL = "claude-sonnet-4-5"


# The recordings


@dataclass(frozen=True)
class Case:
    key: str
    data: dict[str, Any]

    @property
    def route(self) -> str:
        return f"replay/{self.key}"

    @property
    def status(self) -> int:
        return int(self.data["status"])

    @property
    def headers(self) -> dict[str, str]:
        raw = self.data.get("response_headers") or {}
        return {str(key).lower(): str(value) for key, value in raw.items()}

    @property
    def stream(self) -> str | None:
        raw = self.data.get("stream")
        return raw if isinstance(raw, str) else None

    @property
    def request_body(self) -> dict[str, Any] | None:
        body = self.data.get("request_body")
        return body if isinstance(body, dict) else None

    @property
    def streamed(self) -> bool:
        """Whether the call was a streamed one: it answered a stream, or asked for one."""
        return self.stream is not None or bool((self.request_body or {}).get("stream"))

    @property
    def body(self) -> bytes:
        """What a non-streamed answer (or an error status) carries."""
        if self.data.get("response_body") is not None:
            return json.dumps(self.data["response_body"]).encode()
        if self.data.get("response_text") is not None:
            return str(self.data["response_text"]).encode()
        return (self.stream or "").encode()

    @property
    def is_error(self) -> bool:
        return self.status >= 400 or (
            self.stream is not None and read_stream(self.stream, MODEL)[1] is not None
        )


def _load() -> list[Case]:
    if not CORPUS.is_dir():
        return []
    cases = []
    for path in sorted(CORPUS.glob("*/*.json")):
        data = json.loads(path.read_text())
        endpoint = str(data.get("endpoint") or "").split("?")[0]
        if path.parent.name == "anthropic" or endpoint.endswith(MESSAGES_PATH):
            cases.append(Case(f"{path.parent.name}/{path.stem}", data))
    return cases


def _sse(*events: dict[str, Any] | tuple[str, str]) -> str:
    """Events framed as Anthropic frames them; a tuple is (event name, raw data)."""
    out = []
    for event in events:
        name, data = event if isinstance(event, tuple) else (event["type"], json.dumps(event))
        out.append(f"event: {name}\ndata: {data}\n\n")
    return "".join(out)


def _synthetic(key: str, **data: Any) -> Case:
    """A recording of a shape the wire format allows, written here rather than captured."""
    base: dict[str, Any] = {
        "provider": "anthropic",
        "endpoint": MESSAGES_PATH,
        "status": 200,
        "response_headers": {},
        "tags": ["synthetic"],
    }
    return Case(f"synthetic/{key}", {**base, **data})


_IMAGE = (  # a PNG of one pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
    "AAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
_SIGNATURE = "EqQBCkYIBxgCKkBsig" + "n" * 40
_WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}

SYNTHETIC = [
    _synthetic(
        # No usage, no headers at all (not even a content type), a block type and fields
        # nobody knows yet, and a stop on a custom sequence.
        "message_without_usage_with_unknown_blocks_and_fields",
        response_body={
            "id": "msg_synthetic_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                {"type": "text", "text": "Looking", "citations": None, "new_field": 1},
                {"type": "container_upload", "file_id": "file_1"},
                {"type": "text", "text": " it up."},
                {"type": "tool_use", "id": "toolu_s1", "name": "lookup", "input": {"q": "Zürich"}},
            ],
            "stop_reason": "stop_sequence",
            "stop_sequence": "###",
            "brand_new_top_level_field": {"x": [1, 2]},
        },
    ),
    _synthetic(
        # Pings and an event type nobody knows; a tool input in pieces and one given whole
        # at the start; a server tool block; usage without cache counts whose input count
        # arrives again, cumulative, in `message_delta`; a refusal without an explanation.
        "stream_with_pings_unknown_events_and_tools",
        stream=_sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_synthetic_2",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 31, "output_tokens": 1},
                },
            },
            {"type": "ping"},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Só "},
            },
            {"type": "brand_new_event", "index": 0, "payload": {"anything": True}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "citations_delta", "citation": {"cited_text": "x"}},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {},
                },
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"query": "x"}'},
            },
            {"type": "content_block_stop", "index": 1},
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "tool_use", "id": "toolu_a", "name": "a", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": '{"city": "Pa'},
            },
            {"type": "ping"},
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": 'ris", "n": [1, 2]}'},
            },
            {"type": "content_block_stop", "index": 2},
            {
                "type": "content_block_start",
                "index": 3,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "b",
                    "input": {"whole": True},
                },
            },
            {"type": "content_block_stop", "index": 3},
            {
                "type": "content_block_start",
                "index": 4,
                "content_block": {"type": "tool_use", "id": "toolu_c", "name": "c", "input": {}},
            },
            {"type": "content_block_stop", "index": 4},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "refusal", "stop_details": {"type": "refusal"}},
                "usage": {"input_tokens": 31, "output_tokens": 40, "cache_read_input_tokens": None},
            },
            {"type": "message_stop"},
        ),
    ),
    _synthetic(
        "stream_overloaded_after_text",
        tags=["synthetic", "in_stream_error"],
        stream=_sse(
            {
                "type": "message_start",
                "message": {"id": "msg_synthetic_3", "model": MODEL, "content": []},
            },
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Half an "},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "answer"},
            },
            (
                "error",
                '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
            ),
        ),
    ),
    _synthetic(
        "error_429_rate_limited",
        status=429,
        response_headers={
            "content-type": "application/json",
            "retry-after": "7",
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2030-01-01T00:00:00Z",
            "x-should-retry": "true",
        },
        response_body={
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "Number of requests exceeded"},
            "request_id": "req_synthetic_429",
        },
    ),
    _synthetic(
        "error_529_overloaded",
        status=529,
        response_headers={"content-type": "application/json"},
        response_body={
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        },
    ),
    _synthetic(
        "error_529_not_json",
        status=529,
        response_headers={"content-type": "text/html"},
        response_text="<html><body>upstream overloaded</body></html>",
    ),
    _synthetic(
        "error_400_schema_rejected",
        status=400,
        tags=["synthetic", "invalid_schema"],
        response_headers={"content-type": "application/json"},
        response_body={
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "output_config.format.schema: For 'integer' type, property "
                "'minimum' is not supported",
            },
        },
    ),
    _synthetic(
        # A request with every message shape the harness maps: system blocks, images by
        # base64 and by URL, signed and redacted thinking, tool calls and a failed result
        # next to text, strict and plain tools, sampling, stop sequences, a response format
        # beside an effort allama has no name for, and fields allama has no name for.
        "request_with_every_shape",
        request_body={
            "model": "claude-opus-4-6",
            "max_tokens": 2048,
            "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Cite."}],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in these?"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": _IMAGE},
                        },
                        {
                            "type": "image",
                            "source": {"type": "url", "url": "https://example.com/a.jpg"},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Two images.", "signature": _SIGNATURE},
                        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                        {"type": "text", "text": "Let me check the weather there."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                        {
                            "type": "tool_use",
                            "id": "toolu_2",
                            "name": "get_weather",
                            "input": {"city": "Zürich"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "content": [{"type": "text", "text": "no such city"}],
                            "is_error": True,
                        },
                        {"type": "text", "text": "And now?"},
                    ],
                },
                {"role": "assistant", "content": "Paris is sunny."},
                {"role": "user", "content": "Thanks."},
            ],
            "tools": [
                {
                    "name": "get_weather",
                    "description": "The weather in a city.",
                    "input_schema": _WEATHER,
                    "strict": True,
                },
                {"name": "noop", "input_schema": {"type": "object", "properties": {}}},
            ],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
            "temperature": 0.3,
            "stop_sequences": ["###", "END"],
            "top_k": 40,
            "metadata": {"user_id": "user-1"},
            "output_config": {
                "format": {
                    "type": "json_schema",
                    "schema": {
                        "type": "object",
                        "properties": {"answer": {"type": "string"}},
                        "required": ["answer"],
                        "additionalProperties": False,
                    },
                },
                "effort": "max",
            },
        },
        response_body={
            "id": "msg_synthetic_4",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": '{"answer": "You are welcome."}'}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 12,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 2000,
                "output_tokens": 9,
            },
        },
    ),
]

CASES = _load() + SYNTHETIC
WITH_REQUESTS = [case for case in CASES if case.request_body is not None]


def _ids(cases: list[Case]) -> list[str]:
    return [case.key for case in cases]


def _named(key: str) -> Case:
    """A case by name; skips when the corpus in use does not have it."""
    for case in CASES:
        if case.key == key:
            return case
    pytest.skip(f"{key} is not in {CORPUS}")


# Independent reading of the recordings

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "refusal",
    "model_context_window_exceeded": "context_window",
}

UsageCounts = tuple[int | None, int | None, int | None, int | None]
"""(input, output, cache read, cache write), input counting the cached input too."""


@dataclass
class Expected:
    text: str | None
    calls: list[tuple[str, str, Any]]
    """(id, name, input as a value)."""
    finish: str | None
    explanation: str | None
    usage: UsageCounts | None
    model: str | None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: Any) -> UsageCounts | None:
    """Anthropic splits the input in three (uncached, cache written, cache read); allama's
    input count is their sum. A count not reported stays unknown."""
    if not isinstance(raw, dict):
        return None
    uncached = _count(raw.get("input_tokens"))
    written = _count(raw.get("cache_creation_input_tokens"))
    read = _count(raw.get("cache_read_input_tokens"))
    total = None if uncached is None else uncached + (written or 0) + (read or 0)
    return total, _count(raw.get("output_tokens")), read, written


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def read_message(message: dict[str, Any], usage: Any, asked: str) -> Expected:
    """What a message says, blocks of types nobody knows left aside."""
    blocks = [block for block in message.get("content") or [] if isinstance(block, dict)]
    texts = [str(block.get("text") or "") for block in blocks if block.get("type") == "text"]
    calls = [
        (block["id"], block["name"], {} if block.get("input") is None else block["input"])
        for block in blocks
        if block.get("type") == "tool_use"
    ]
    details = message.get("stop_details")
    explanation = None
    if isinstance(details, dict) and details.get("type") == "refusal":
        raw = details.get("explanation")
        explanation = raw if isinstance(raw, str) and raw.strip() else None
    stop = message.get("stop_reason")
    return Expected(
        "".join(texts) if texts else None,
        calls,
        _FINISH.get(stop, stop) if isinstance(stop, str) and stop else None,
        explanation,
        _usage(usage),
        _text(message.get("model")) or asked,
    )


def sse_events(stream: str) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of each server-sent event; `data:` lines joined."""
    events: list[tuple[str | None, Any]] = []
    name: str | None = None
    data: list[str] = []
    for line in [*stream.splitlines(), ""]:
        if not line:
            if data:
                events.append((name, json.loads("\n".join(data))))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return events


def read_stream(stream: str, asked: str) -> tuple[Expected, dict[str, Any] | None]:
    """The message a stream adds up to, as far as it goes, and the error event that ended
    it, if one did. Blocks go by Anthropic's index, their deltas appended; each usage count
    reported replaces the one before (the output count of `message_start` only starts the
    running total); events of other types say nothing read here."""
    message: dict[str, Any] = {}
    usage: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    pieces: dict[int, list[str]] = {}
    error = None
    for name, payload in sse_events(stream):
        kind = payload.get("type", name) if isinstance(payload, dict) else name
        if kind == "error" or name == "error":
            error = payload if isinstance(payload, dict) else {}
            break
        if not isinstance(payload, dict):
            continue
        if kind == "message_start":
            message = dict(payload.get("message") or {})
            if isinstance(message.get("usage"), dict):
                usage = {k: v for k, v in message["usage"].items() if k != "output_tokens"}
        elif kind == "content_block_start":
            blocks[payload["index"]] = dict(payload["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[payload["index"]], payload.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = str(block.get("text") or "") + delta["text"]
            elif delta.get("type") == "input_json_delta":
                pieces.setdefault(payload["index"], []).append(delta["partial_json"])
        elif kind == "message_delta":
            message.update(payload.get("delta") or {})
            reported = payload.get("usage")
            if isinstance(reported, dict):
                counts = {k: v for k, v in reported.items() if v is not None}
                usage = {**(usage or {}), **counts}
        elif kind == "message_stop":
            break
    for index, parts in pieces.items():
        if "".join(parts):
            blocks[index]["input"] = json.loads("".join(parts))
    message["content"] = [blocks[index] for index in sorted(blocks)]
    return read_message(message, usage, asked), error


def expected_of(case: Case, asked: str) -> Expected:
    if case.stream is not None:
        return read_stream(case.stream, asked)[0]
    body = case.data["response_body"]
    return read_message(body, body.get("usage"), asked)


def _usage_of(response: ChatResponse) -> UsageCounts | None:
    usage = response.usage
    if usage is None:
        return None
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )


def check(response: ChatResponse, expected: Expected) -> None:
    assert response.text() == expected.text
    calls = [(c.id, c.name, c.parsed_arguments()) for c in response.tool_calls()]
    assert calls == expected.calls
    assert response.finish_reason == expected.finish
    if expected.finish == "refusal":
        assert response.finish_reason == FinishReason.REFUSAL
    assert response.decline_explanation() == expected.explanation
    assert _usage_of(response) == expected.usage
    assert response.model == expected.model
    assert response.provider == "anthropic"


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
_BY_STATUS: dict[int, type[Error]] = {
    401: AuthenticationError,
    402: QuotaExceededError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: RequestTimeoutError,
    429: RateLimitedError,
    503: OverloadedError,
    529: OverloadedError,
}


def _error_payload(case: Case) -> Any:
    if case.status >= 400:
        return case.data.get("response_body")
    assert case.stream is not None
    return read_stream(case.stream, MODEL)[1]


def expected_error(case: Case) -> type[Error]:
    """The class a recorded error stands for: by its tags, its error type, its status."""
    tags = set(case.data.get("tags") or [])
    if "invalid_schema" in tags:
        return UnsupportedError
    if "context_length" in tags:
        return ContextWindowExceededError
    payload = _error_payload(case)
    inner = payload.get("error") if isinstance(payload, dict) else None
    kind = inner.get("type") if isinstance(inner, dict) else None
    if kind in _ERROR_CLASS:
        return _ERROR_CLASS[kind]
    if case.status < 400:
        return ServerError  # an error event of a type nobody knows: the server gave up
    if case.status in _BY_STATUS:
        return _BY_STATUS[case.status]
    return ServerError if case.status >= 500 else InvalidRequestError


def check_retry_after(error: Error, case: Case) -> None:
    headers = case.headers
    explicit = [float(headers["retry-after-ms"]) / 1000] if "retry-after-ms" in headers else []
    if headers.get("retry-after", "").strip().isdigit():
        explicit.append(float(headers["retry-after"]))
    resets = any(key.startswith("anthropic-ratelimit-") for key in headers)
    if not isinstance(error, RateLimitedError):
        if not explicit and not resets and "retry-after" not in headers:
            assert error.retry_after is None
    elif explicit:
        # Either may be rounded, so the longer wait wins.
        assert error.retry_after == max(explicit)
    elif resets or "retry-after" in headers:
        # A date, or the moment a limit resets: how long that is depends on the clock.
        assert error.retry_after is not None and error.retry_after >= 0
    else:
        assert error.retry_after is None


def check_error(error: Error, case: Case, asked: str) -> None:
    cls = expected_error(case)
    assert type(error) is cls
    assert error.provider == "anthropic"
    assert error.model == asked
    assert error.status == (case.status if case.status >= 400 else None)
    check_retry_after(error, case)
    flag = case.headers.get("x-should-retry", "").strip().lower()
    if flag in ("true", "false") and cls is not QuotaExceededError:
        assert error.retryable is (flag == "true")
    payload = _error_payload(case)
    request_id = case.headers.get("request-id") or (
        payload.get("request_id") if isinstance(payload, dict) else None
    )
    if request_id:
        assert error.request_id == request_id
    # The provider's words stay out of the log view; the key is nowhere.
    assert error.message not in str(error.as_log())
    for view in (str(error), repr(error), str(error.as_log()), error.to_json()):
        assert KEY not in view


def test_the_harness_reads_the_shapes_the_wire_allows() -> None:
    """What the independent reading makes of the synthetic recordings, spelled out, so that
    the harness and the adapter cannot agree on a wrong reading."""
    by_key = {case.key.removeprefix("synthetic/"): case for case in SYNTHETIC}
    assert expected_of(
        by_key["message_without_usage_with_unknown_blocks_and_fields"], "asked"
    ) == Expected(
        "Looking it up.",
        [("toolu_s1", "lookup", {"q": "Zürich"})],
        "stop",
        None,
        None,
        "claude-sonnet-4-5-20250929",
    )
    assert expected_of(by_key["stream_with_pings_unknown_events_and_tools"], "asked") == Expected(
        "Só ",
        [
            ("toolu_a", "a", {"city": "Paris", "n": [1, 2]}),
            ("toolu_b", "b", {"whole": True}),
            ("toolu_c", "c", {}),
        ],
        "refusal",
        None,
        (31, 40, None, None),
        "claude-sonnet-4-5-20250929",
    )
    overloaded = by_key["stream_overloaded_after_text"]
    partial, error = read_stream(overloaded.stream or "", "asked")
    assert (partial.text, partial.finish, partial.usage) == ("Half an answer", None, None)
    assert error == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert overloaded.is_error and expected_error(overloaded) is OverloadedError
    assert expected_error(by_key["error_529_not_json"]) is OverloadedError
    assert expected_error(by_key["error_400_schema_rejected"]) is UnsupportedError
    assert expected_of(by_key["request_with_every_shape"], "asked").usage == (2112, 9, 2000, 100)


def test_the_corpus_has_every_kind_of_case() -> None:
    recorded = [case for case in CASES if not case.key.startswith("synthetic/")]
    if not recorded:
        pytest.skip(f"no Anthropic Messages cases under {CORPUS}")
    kinds = {(case.is_error, case.stream is not None) for case in recorded}
    assert {(False, False), (False, True), (True, False)} <= kinds


# Recorded requests as allama requests


class NoName(Exception):
    """A part of a recorded request allama has no name for."""


@dataclass(frozen=True)
class Built:
    request: ChatRequest
    passed: frozenset[str]
    """The recorded fields sent as they are through the `anthropic` option (allama has no
    name for them), as `field` or `field.key`."""


def _only(block: dict[str, Any], *keys: str) -> None:
    if not set(block) <= {"type", *keys}:
        raise NoName(f"a `{block.get('type')}` block with {sorted(set(block) - {'type', *keys})}")


def _image(block: dict[str, Any]) -> ImagePart:
    _only(block, "source")
    source = block["source"]
    if source.get("type") == "url" and set(source) == {"type", "url"}:
        return ImagePart(url=source["url"])
    if source.get("type") == "base64" and set(source) == {"type", "media_type", "data"}:
        # As a data URL, so that the recorded base64 text is sent as it is.
        return ImagePart(url=f"data:{source['media_type']};base64,{source['data']}")
    raise NoName(f"an image source of type {source.get('type')!r}")


def _tool_result(block: dict[str, Any]) -> ToolMessage:
    _only(block, "tool_use_id", "content", "is_error")
    content = block.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        _only(content[0], "text")
        if content[0].get("type") == "text":
            content = content[0]["text"]
    if not isinstance(content, str):
        raise NoName("a tool result that is not one text")
    return ToolMessage(
        tool_call_id=block["tool_use_id"], content=content, is_error=bool(block.get("is_error"))
    )


def _user(content: Any) -> list[Message]:
    """A user turn: its text and images, and its tool results as tool messages (sent back
    merged into one user turn, in order)."""
    if isinstance(content, str):
        return [UserMessage(content=(TextPart(text=content),))]
    out: list[Message] = []
    parts: list[TextPart | ImagePart] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            _only(block, "text")
            parts.append(TextPart(text=block["text"]))
        elif kind == "image":
            parts.append(_image(block))
        elif kind == "tool_result":
            if parts:
                out.append(UserMessage(content=tuple(parts)))
                parts = []
            out.append(_tool_result(block))
        else:
            raise NoName(f"a user block of type {kind!r}")
    if parts:
        out.append(UserMessage(content=tuple(parts)))
    return out


def _assistant(content: Any) -> AssistantMessage:
    if isinstance(content, str):
        return AssistantMessage(content=(TextPart(text=content),))
    blocks: list[ContentBlock] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            _only(block, "text")
            blocks.append(TextPart(text=block["text"]))
        elif kind == "tool_use":
            _only(block, "id", "name", "input")
            blocks.append(ToolCall.of(block["id"], block["name"], block["input"]))
        elif kind == "thinking" and block.get("signature"):
            _only(block, "thinking", "signature")
            blocks.append(Reasoning(text=block["thinking"], signature=block["signature"]))
        elif kind == "redacted_thinking":
            _only(block, "data")
            blocks.append(Reasoning(encrypted_content=block["data"]))
        else:
            raise NoName(f"an assistant block of type {kind!r}")
    return AssistantMessage(content=tuple(blocks))


def _messages(raw: list[dict[str, Any]]) -> list[Message]:
    out: list[Message] = []
    for turn in raw:
        if set(turn) != {"role", "content"}:
            raise NoName(f"a turn with {sorted(turn)}")
        if turn["role"] == "user":
            out.extend(_user(turn["content"]))
        elif turn["role"] == "assistant":
            out.append(_assistant(turn["content"]))
        else:
            raise NoName(f"a turn of role {turn['role']!r}")
    return out


def _system(raw: Any) -> list[Message]:
    if isinstance(raw, str):
        return [SystemMessage(content=raw)]
    for block in raw:
        _only(block, "text")
        if block.get("type") != "text":
            raise NoName(f"a system block of type {block.get('type')!r}")
    return [SystemMessage(content=block["text"]) for block in raw]


def _tools(raw: list[dict[str, Any]]) -> list[ToolDefinition]:
    tools = []
    for tool in raw:
        if not set(tool) <= {"name", "description", "input_schema", "strict"}:
            raise NoName(f"a tool with {sorted(tool)}")
        tools.append(
            ToolDefinition(
                name=tool["name"],
                parameters=tool["input_schema"],
                description=tool.get("description") or None,
                strict=tool.get("strict"),
            )
        )
    return tools


def _tool_choice(raw: dict[str, Any]) -> tuple[ToolChoice, bool | None]:
    if not set(raw) <= {"type", "name", "disable_parallel_tool_use"}:
        raise NoName(f"a tool choice with {sorted(raw)}")
    parallel = False if raw.get("disable_parallel_tool_use") else None
    kind = raw["type"]
    if kind == "tool":
        # A named tool is asked for one call unless parallel calls are allowed: a body
        # without the flag is what `parallel_tool_calls=True` sends, one with it the default.
        return ToolChoice.tool(raw["name"]), (True if parallel is None else None)
    if kind == "any":
        return ToolChoice.required(), parallel
    if kind in ("auto", "none"):
        return ToolChoice(mode=kind), parallel
    raise NoName(f"a tool choice of type {kind!r}")


def _response_format(raw: Any) -> ResponseFormat:
    schema_only = isinstance(raw, dict) and set(raw) == {"type", "schema"}
    if not schema_only or raw["type"] != "json_schema":
        raise NoName("an output format that is not a JSON schema alone")
    return ResponseFormat.for_schema(raw["schema"], strict=True)


def request_from_body(body: dict[str, Any]) -> Built:
    """The `ChatRequest` allama users would write for a recorded body.

    A top-level field allama has no name for (`thinking`, `top_k`, a server tool in
    `tools`, `cache_control` in `system`) goes through the `anthropic` option whole, which
    is what that option is for. A turn allama cannot express raises `NoName`: passing the
    conversation itself through would leave nothing to compare.
    """
    option: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    messages: list[Message] = []
    for name, value in body.items():
        try:
            if name in ("model", "stream"):
                continue
            if name == "messages":
                continue  # below, after the system instructions
            if name == "system":
                messages[:0] = _system(value)
            elif name == "max_tokens":
                fields["max_output_tokens"] = value
            elif name in ("temperature", "top_p"):
                fields[name] = value
            elif name == "stop_sequences":
                fields["stop"] = tuple(value)
            elif name == "tools":
                fields["tools"] = tuple(_tools(value))
            elif name == "tool_choice":
                fields["tool_choice"], parallel = _tool_choice(value)
                if parallel is not None:
                    fields["parallel_tool_calls"] = parallel
            elif name == "output_format":
                # The beta name of `output_config.format`.
                fields["response_format"] = _response_format(value)
            elif name == "output_config":
                rest = {k: v for k, v in value.items() if k != "format"}
                if "format" in value:
                    fields["response_format"] = _response_format(value["format"])
                if rest:
                    option["output_config"] = rest
            else:
                option[name] = value
        except NoName:
            option[name] = value
    messages.extend(_messages(body["messages"]))
    request = ChatRequest(body["model"], messages=tuple(messages), **fields)
    if option:
        request = request.with_option_json("anthropic", option)
    passed = {name for name in option if name != "output_config"}
    passed |= {f"output_config.{key}" for key in option.get("output_config", {})}
    return Built(request, frozenset(passed))


def _blocks(content: Any) -> list[Any]:
    """A turn's content as blocks: Anthropic reads a string as one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for block in content:
        if block.get("type") == "tool_result":
            block = dict(block)
            inner = block.get("content")
            if (
                isinstance(inner, list)
                and len(inner) == 1
                and inner[0] == {"type": "text", "text": inner[0].get("text")}
            ):
                # A result of one text block is that text.
                block["content"] = inner[0]["text"]
            if block.get("is_error") is False:
                del block["is_error"]  # the default
        out.append(block)
    return out


def normal(body: dict[str, Any]) -> dict[str, Any]:
    """A body with the differences that mean nothing to Anthropic taken out, applied to
    what allama sends and to the recording alike:

    - `stream: false` is the default; allama leaves it out.
    - A `system` string is one text block; allama always sends blocks.
    - A turn's string content is one text block; allama sends a lone text block as a string.
      Consecutive turns of one role are one turn (Anthropic merges them; allama sends them
      merged). A tool result of one text block is that text; `is_error: false` is the
      default.
    - An empty tool description says nothing; allama leaves it out. `strict: false` is the
      default.
    - `output_format` is the deprecated beta name of `output_config.format`, which allama
      sends instead: the schema is compared where allama puts it.

    Everything else is compared as it is, strict schemas included: allama rewrites a strict
    schema for Anthropic's grammar (the `anthropic` dialect), but only where Anthropic would
    refuse it or read it the same, so the schema of a request Anthropic accepted comes out
    unchanged, and a difference is a finding.
    """
    out = dict(body)
    out["stream"] = bool(out.get("stream"))
    if isinstance(out.get("system"), str):
        out["system"] = _blocks(out["system"])
    turns: list[dict[str, Any]] = []
    for turn in out.get("messages") or []:
        blocks = _blocks(turn["content"])
        if turns and turns[-1]["role"] == turn["role"]:
            turns[-1]["content"] = turns[-1]["content"] + blocks
        else:
            turns.append({**turn, "content": blocks})
    out["messages"] = turns
    if "tools" in out:
        tools = []
        for tool in out["tools"]:
            tool = dict(tool)
            if tool.get("description") == "":
                del tool["description"]
            if tool.get("strict") is False:
                del tool["strict"]
            tools.append(tool)
        out["tools"] = tools
    if "output_format" in out:
        beta = out.pop("output_format")
        out["output_config"] = {**(out.get("output_config") or {}), "format": beta}
    return out


# What the recorded fields allama has no name for are, in the shared corpus: each of these
# is sent as recorded through the `anthropic` option, and compared as such.
PASSED_THROUGH: dict[str, set[str]] = {
    "anthropic/error_400_invalid_request": {"output_config.effort"},  # `xhigh`: no allama name
    "anthropic/extended_thinking": {"thinking"},  # a budget of its own
    "anthropic/extended_thinking_stream": {"thinking"},
    "anthropic/forced_named_tool_structured_stream": {"system", "tools"},  # `cache_control`
    "anthropic/pause_turn_server_tool": {"thinking", "tools"},  # a server tool
    "anthropic/thinking_with_tool_use": {"thinking"},
    "synthetic/request_with_every_shape": {"output_config.effort", "top_k", "metadata"},
}


def _built(case: Case) -> Built:
    assert case.request_body is not None
    try:
        return request_from_body(case.request_body)
    except NoName as why:
        pytest.skip(f"the recorded conversation has {why}, which allama does not write")


def _offline() -> HttpProvider:
    return allama.provider("anthropic", api_key=KEY, base_url="http://127.0.0.1:9")


@pytest.mark.parametrize("case", WITH_REQUESTS, ids=_ids(WITH_REQUESTS))
def test_equivalent_request_encodes_to_the_recorded_body(case: Case) -> None:
    recorded = case.request_body
    assert recorded is not None
    built = _built(case)
    if CORPUS_IS_DEFAULT or case.key.startswith("synthetic/"):
        assert built.passed == PASSED_THROUGH.get(case.key, set())
    http, warnings = _offline()._prepare(built.request, stream=bool(recorded.get("stream")))
    assert http.url == f"http://127.0.0.1:9{MESSAGES_PATH}"
    assert json.loads(http.content) == http.body
    assert normal(http.body) == normal(recorded)
    # Recorded requests were accepted as sent (or refused for what allama does not check):
    # nothing in them is refused before sending.
    assert [w for w in warnings if w.kind is WarningKind.UNSUPPORTED] == []


def test_the_normalisation_leaves_a_real_difference_a_difference() -> None:
    """The comparison above is not loosened past what it says: a changed field still fails."""
    case = _named("synthetic/request_with_every_shape")
    assert case.request_body is not None
    http, _ = _offline()._prepare(_built(case).request, stream=False)
    sent = http.body
    assert normal(sent) == normal(case.request_body)
    for change in (
        {"stream": True},
        {"system": "Be brief.Cite."},
        {"max_tokens": 2047},
        {"tool_choice": {"type": "auto"}},
        {"output_config": {"format": sent["output_config"]["format"]}},
        {"messages": [*sent["messages"][:-1], {"role": "user", "content": "Thanks!"}]},
    ):
        assert normal({**sent, **change}) != normal(case.request_body), change


# The server


class _Server(ReplayServer):
    routes: dict[str, Callable[[_Handler], None]]
    seen: list[tuple[str, dict[str, str], dict[str, Any]]]
    lock: threading.Lock

    def requests_to(self, route: str) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
        with self.lock:
            return [entry for entry in self.seen if entry[0].startswith(f"/{route}/")]


class _Handler(ReplyHandler):
    server: _Server
    request_body: dict[str, Any]

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.request_body = body
        with self.server.lock:
            self.server.seen.append((self.path, headers, body))
        route = self.path.split("?")[0].removesuffix(MESSAGES_PATH).strip("/")
        self.server.routes[route](self)


_FRAMING = ("content-length", "transfer-encoding", "connection")


def _serve_case(case: Case) -> Callable[[_Handler], None]:
    def serve(h: _Handler) -> None:
        headers = {k: v for k, v in case.headers.items() if k not in _FRAMING}
        if case.stream is not None and case.status < 400:
            h.send_stream(case.stream.encode(), headers)
        else:
            h.send_body(case.status, headers, case.body)

    return serve


def _message(content: list[dict[str, Any]], stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_local",
        "type": "message",
        "role": "assistant",
        "model": f"{MODEL}-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 40, "cache_read_input_tokens": 8, "output_tokens": 12},
    }


def _text_stream(*texts: str) -> list[str]:
    """The events of a streamed text answer, one string each."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_text",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "usage": {"input_tokens": 12, "output_tokens": 1},
        },
    }
    return [
        _sse(start),
        _sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        *(
            _sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                }
            )
            for text in texts
        ),
        _sse({"type": "content_block_stop", "index": 0}),
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 9},
            }
        ),
        _sse({"type": "message_stop"}),
    ]


WORDS = ("Hello", " there", ", wor", "ld")
TEXT_EVENTS = _text_stream(*WORDS)
BEFORE_STOP = "".join(TEXT_EVENTS[: 2 + len(WORDS)])
"""The stream up to its last text delta, at an event boundary."""

TALLY_PIECES = ('{"store": "No', 'rth", "cou', 'nts": {"apples', '": 3, "pea', 'rs": 12}}')


def _tool_stream(name: str, pieces: tuple[str, ...]) -> str:
    return _sse(
        {
            "type": "message_start",
            "message": {
                "id": "msg_tool",
                "model": MODEL,
                "content": [],
                "usage": {"input_tokens": 300, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_x", "name": name, "input": {}},
        },
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
            for piece in pieces
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 30},
        },
        {"type": "message_stop"},
    )


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}


LONDON = {"city": "London", "country": "United Kingdom", "population": 9002488}
SCHEMA_REJECTED = (
    "output_config.format.schema: For 'integer' type, property 'minimum' is not supported"
)


def _routes() -> dict[str, Callable[[_Handler], None]]:
    def cut_between(h: _Handler) -> None:
        h.send_stream(BEFORE_STOP.encode())

    def cut_inside(h: _Handler) -> None:
        stop = TEXT_EVENTS[-2]
        h.send_stream((BEFORE_STOP + TEXT_EVENTS[-3] + stop[: len(stop) // 2]).encode())

    def dropped(h: _Handler) -> None:
        h.start_chunked()
        for piece in _pieces(BEFORE_STOP.encode(), 13):
            h.chunk(piece)
        h.drop()

    def overloaded_mid_stream(h: _Handler) -> None:
        error = json.dumps(_error("overloaded_error", "Overloaded"))
        rest = _sse(("error", error)) + "".join(TEXT_EVENTS[-3:])
        h.send_stream((BEFORE_STOP + rest).encode())

    def rate_limited(h: _Handler) -> None:
        reset = (datetime.now(UTC) + timedelta(seconds=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
        headers = {
            "retry-after": "7",
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset,
            "anthropic-ratelimit-tokens-limit": "40000",
            "anthropic-ratelimit-tokens-remaining": "39000",
            "anthropic-ratelimit-tokens-reset": reset,
            "request-id": "req_429",
        }
        h.send_json(429, _error("rate_limit_error", "Number of requests exceeded"), headers)

    def rate_limited_resets(h: _Handler) -> None:
        now = datetime.now(UTC)
        headers = {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": (now + timedelta(seconds=30)).isoformat(),
            "anthropic-ratelimit-tokens-remaining": "1000",
            "anthropic-ratelimit-tokens-reset": (now + timedelta(seconds=50)).isoformat(),
        }
        h.send_json(429, _error("rate_limit_error", "Number of requests exceeded"), headers)

    def overloaded(h: _Handler) -> None:
        h.send_json(529, _error("overloaded_error", "Overloaded"))

    def schema_rejected(h: _Handler) -> None:
        h.send_json(400, _error("invalid_request_error", SCHEMA_REJECTED))

    def auth_echo(h: _Handler) -> None:
        key = h.headers.get("x-api-key", "")
        h.send_json(401, _error("authentication_error", f"invalid x-api-key: {key}"))

    def extract_native(h: _Handler) -> None:
        h.send_json(200, _message([{"type": "text", "text": json.dumps(LONDON)}]))

    def extract_tool(h: _Handler) -> None:
        call = {
            "type": "tool_use",
            "id": "toolu_t",
            "name": EXTRACTION_TOOL,
            "input": {"store": "North", "counts": {"apples": 3, "pears": 12}},
        }
        h.send_json(200, _message([call], "tool_use"))

    def extract_tool_stream(h: _Handler) -> None:
        h.send_stream(_tool_stream(EXTRACTION_TOOL, TALLY_PIECES).encode())

    def extract_rejected(h: _Handler) -> None:
        # A host that does not say what it enforces: it rejects the schema, then answers
        # the forced tool.
        if "output_config" in h.request_body:
            schema_rejected(h)
            return
        call = {"type": "tool_use", "id": "toolu_c", "name": EXTRACTION_TOOL, "input": LONDON}
        h.send_json(200, _message([call], "tool_use"))

    return {
        "cut-between": cut_between,
        "cut-inside": cut_inside,
        "dropped": dropped,
        "overloaded-mid-stream": overloaded_mid_stream,
        "rate-limited": rate_limited,
        "rate-limited-resets": rate_limited_resets,
        "overloaded": overloaded,
        "schema-rejected": schema_rejected,
        "auth-echo": auth_echo,
        "extract-native": extract_native,
        "extract-tool": extract_tool,
        "extract-tool-stream": extract_tool_stream,
        "extract-rejected": extract_rejected,
        **{case.route: _serve_case(case) for case in CASES},
    }


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    httpd.lock = threading.Lock()
    httpd.routes = _routes()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _base(server: _Server, route: str) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/{route}"


def _provider(server: _Server, route: str, name: str = "anthropic") -> HttpProvider:
    return allama.provider(name, api_key=KEY, base_url=_base(server, route))


def _check_sent(server: _Server, route: str, *, stream: bool) -> dict[str, Any]:
    """The one request the route got: its path and headers; returns its body."""
    seen = server.requests_to(route)
    assert len(seen) == 1
    path, headers, body = seen[0]
    assert path == f"/{route}{MESSAGES_PATH}"
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == VERSION
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == ("text/event-stream" if stream else "application/json")
    assert "authorization" not in headers
    return body


# Replay over the socket


def _replay_request(case: Case) -> ChatRequest:
    """The equivalent of the recorded request; a plain one where none was recorded."""
    if case.request_body is not None:
        try:
            return request_from_body(case.request_body).request
        except NoName:
            return ChatRequest(case.request_body["model"]).user("Hello")
    body = case.data.get("response_body")
    model = _text(body.get("model")) if isinstance(body, dict) else None
    return ChatRequest(model or MODEL).user("Hello")


def _call(target: HttpProvider, request: ChatRequest, *, stream: bool, flavour: str) -> Any:
    """The response of one call, or the error it raised with the stream's partial response
    (`None` when the call failed before a stream opened)."""

    async def run_async() -> ChatResponse:
        async with target:
            if not stream:
                return await target.achat(request)
            astream = await target.achat_stream(request)
            async with astream:
                try:
                    return await astream.response()
                except Error as error:
                    raise _Failed(error, astream.collector.partial_response()) from None

    try:
        if flavour == "async":
            return asyncio.run(run_async())
        with target:
            if not stream:
                return target.chat(request)
            with target.chat_stream(request) as sync_stream:
                try:
                    return sync_stream.response()
                except Error as error:
                    raise _Failed(error, sync_stream.collector.partial_response()) from None
    except Error as error:
        raise _Failed(error, None) from None


class _Failed(Exception):
    def __init__(self, error: Error, partial: ChatResponse | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.partial = partial


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_recorded_case_through_the_provider(server: _Server, case: Case, flavour: str) -> None:
    route = f"{case.route}/{flavour}"
    server.routes[route] = server.routes[case.route]
    target = _provider(server, route)
    request = _replay_request(case)
    sent, _ = target._prepare(request, stream=case.streamed)
    if case.is_error:
        with pytest.raises(_Failed) as caught:
            _call(target, request, stream=case.streamed, flavour=flavour)
        check_error(caught.value.error, case, request.model)
        if case.status < 400:
            # The events before the error were paid for: what they said stays readable.
            assert case.stream is not None
            partial = caught.value.partial
            assert partial is not None
            check(partial, read_stream(case.stream, request.model)[0])
    else:
        response = _call(target, request, stream=case.streamed, flavour=flavour)
        check(response, expected_of(case, request.model))
    assert _check_sent(server, route, stream=case.streamed) == sent.body
    assert KEY not in repr(target)


# Sockets: what the recordings do not show

REQUEST = ChatRequest(MODEL).system("Be brief.").user("Hello")
FLAVOURS = ["sync", "async"]


def _stream_events(target: HttpProvider, flavour: str) -> tuple[list[StreamEvent], Any, Error]:
    """The events a stream gave before it failed, its collector, and its error."""
    seen: list[StreamEvent] = []

    async def run_async() -> tuple[Any, Error]:
        async with target:
            astream = await target.achat_stream(REQUEST)
            try:
                async for event in astream:
                    seen.append(event)
            except Error as error:
                return astream.collector, error
            raise AssertionError("the stream did not fail")

    if flavour == "async":
        collector, error = asyncio.run(run_async())
        return seen, collector, error
    with target:
        stream = target.chat_stream(REQUEST)
        try:
            for event in stream:
                seen.append(event)
        except Error as failed:
            return seen, stream.collector, failed
    raise AssertionError("the stream did not fail")


def _texts(events: list[StreamEvent]) -> list[str]:
    return [event.text for event in events if isinstance(event, TextDelta)]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(
    ("route", "cls"),
    [
        # The server ends the body cleanly between two events, before the stop reason.
        ("cut-between", IncompleteStreamError),
        # ... or in the middle of an event.
        ("cut-inside", IncompleteStreamError),
        # The connection breaks in the middle of a chunk.
        ("dropped", NetworkError),
    ],
)
def test_a_stream_cut_mid_way(server: _Server, route: str, cls: type[Error], flavour: str) -> None:
    events, collector, error = _stream_events(_provider(server, route), flavour)
    assert type(error) is cls
    assert error.retryable and error.provider == "anthropic"
    if cls is NetworkError:
        assert isinstance(error.__cause__, httpx2.TransportError)
    # What arrived stays readable, and is all there is.
    assert collector.error is error
    partial = collector.partial_response()
    assert partial.finish_reason is None
    text = partial.text() or ""
    assert "".join(_texts(events)) == text
    assert text and "".join(WORDS).startswith(text)
    if cls is IncompleteStreamError:
        assert text == "".join(WORDS)  # every text event before the cut was whole
    assert partial.usage is not None and partial.usage.input_tokens == 12
    assert KEY not in repr(error) and KEY not in error.to_json()


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_overloaded_error_event_mid_stream(server: _Server, flavour: str) -> None:
    events, collector, error = _stream_events(_provider(server, "overloaded-mid-stream"), flavour)
    assert type(error) is OverloadedError
    assert error.retryable and error.status is None
    assert (error.provider, error.model, error.request_id) == ("anthropic", MODEL, "req_1")
    # The text before the error came first; nothing after it was read.
    assert _texts(events) == list(WORDS)
    assert collector.partial_response().text() == "".join(WORDS)
    assert collector.error is error


def _fail(target: HttpProvider, request: ChatRequest, how: str) -> Error:
    """The error a call raises: `chat`, `achat`, `chat_stream` or `achat_stream`."""

    async def run_async() -> None:
        async with target:
            if how == "achat":
                await target.achat(request)
            else:
                await (await target.achat_stream(request)).response()

    try:
        if how.startswith("a"):
            asyncio.run(run_async())
        else:
            with target:
                if how == "chat":
                    target.chat(request)
                else:
                    target.chat_stream(request).response()
    except Error as error:
        return error
    raise AssertionError(f"{how} did not fail")


CALLS = ["chat", "achat", "chat_stream", "achat_stream"]


@pytest.mark.parametrize("how", CALLS)
def test_a_429_with_retry_after_and_rate_limit_headers(server: _Server, how: str) -> None:
    route = f"rate-limited/{how}"
    server.routes[route] = server.routes["rate-limited"]
    error = _fail(_provider(server, route), REQUEST, how)
    assert type(error) is RateLimitedError
    # The explicit `retry-after` wins over the moment the exhausted limit resets.
    assert error.retry_after == 7.0
    assert (error.status, error.retryable, error.request_id) == (429, True, "req_429")
    _check_sent(server, route, stream=how.endswith("stream"))


def test_a_429_with_only_the_rate_limit_resets(server: _Server) -> None:
    error = _fail(_provider(server, "rate-limited-resets"), REQUEST, "chat")
    assert type(error) is RateLimitedError
    # The exhausted limit (requests) resets in 30 s; the later reset of the limit that is
    # not exhausted does not count.
    assert error.retry_after is not None and 28.0 < error.retry_after <= 30.0


@pytest.mark.parametrize("how", CALLS)
def test_a_529(server: _Server, how: str) -> None:
    route = f"overloaded/{how}"
    server.routes[route] = server.routes["overloaded"]
    error = _fail(_provider(server, route), REQUEST, how)
    assert type(error) is OverloadedError
    assert (error.status, error.retryable, error.retry_after) == (529, True, None)


@pytest.mark.parametrize("how", CALLS)
def test_a_400_rejecting_the_schema(server: _Server, how: str) -> None:
    route = f"schema-rejected/{how}"
    server.routes[route] = server.routes["schema-rejected"]
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    request = REQUEST.with_response_format(ResponseFormat.for_schema(schema))
    error = _fail(_provider(server, route), request, how)
    assert isinstance(error, UnsupportedError)
    assert (error.field, error.stage) == (RequestField.RESPONSE_FORMAT, UnsupportedStage.PROVIDER)
    assert (error.status, error.retryable) == (400, False)
    sent = _check_sent(server, route, stream=how.endswith("stream"))
    assert sent["output_config"] == {"format": {"type": "json_schema", "schema": schema}}


@pytest.mark.parametrize("how", CALLS)
def test_the_key_reaches_the_server_and_nothing_else(server: _Server, how: str) -> None:
    route = f"auth-echo/{how}"
    server.routes[route] = server.routes["auth-echo"]
    target = _provider(server, route)
    assert KEY not in repr(target) and KEY not in str(target)
    error = _fail(target, REQUEST, how)
    assert type(error) is AuthenticationError and error.status == 401
    for view in (str(error), repr(error), str(error.as_log()), error.to_json(), error.message):
        assert KEY not in view
    assert error.context.body is not None and KEY not in error.context.body
    assert "invalid x-api-key: <redacted>" in error.message
    # It did reach the server, in its own header and only there.
    seen = server.requests_to(route)
    assert len(seen) == 1
    _, headers, body = seen[0]
    assert headers["x-api-key"] == KEY and headers["anthropic-version"] == VERSION
    assert [name for name, value in headers.items() if KEY in value] == ["x-api-key"]
    assert KEY not in json.dumps(body)


# Extraction end to end


class City(BaseModel):
    city: str
    country: str
    population: int


class Tally(BaseModel):
    store: str
    counts: dict[str, int]


TELL = ChatRequest(MODEL).user("Tell me about London")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_native_extraction(server: _Server, flavour: str) -> None:
    route = f"extract-native/{flavour}"
    server.routes[route] = server.routes["extract-native"]
    target = _provider(server, route)
    if flavour == "async":
        extracted = asyncio.run(allama.aextract(target, City, TELL))
    else:
        extracted = allama.extract(target, City, TELL)
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.NATIVE
    assert metadata.enforcement is SchemaEnforcement.EXACT
    assert (metadata.passes, metadata.auto_fallback, metadata.degradations) == (1, None, [])
    assert metadata.usage is not None
    assert (metadata.usage.input_tokens, metadata.usage.output_tokens) == (48, 12)
    sent = _check_sent(server, route, stream=False)
    assert "tools" not in sent and "tool_choice" not in sent
    assert sent["output_config"]["format"]["type"] == "json_schema"
    schema = sent["output_config"]["format"]["schema"]
    assert schema["required"] == ["city", "country", "population"]
    assert schema["additionalProperties"] is False
    assert {name: spec["type"] for name, spec in schema["properties"].items()} == {
        "city": "string",
        "country": "string",
        "population": "integer",
    }


def test_native_extraction_asks_what_the_recording_asked(server: _Server) -> None:
    """The recording asked for a city with `output_config.format`; extracting `City` asks
    for the same, give or take the titles pydantic puts in its schemas (annotations, which
    constrain nothing)."""
    case = _named("anthropic/output_config_format_strict")
    recorded = case.request_body
    assert recorded is not None
    route = "extract-native/recorded"
    server.routes[route] = server.routes["extract-native"]
    request = ChatRequest(recorded["model"]).user("Tell me about London")
    allama.extract(_provider(server, route), City, request.with_max_output_tokens(4096))
    sent = _check_sent(server, route, stream=False)
    fmt = sent["output_config"]["format"]

    def untitled(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: untitled(v) for k, v in value.items() if k != "title"}
        return value

    assert {**fmt, "schema": untitled(fmt["schema"])} == recorded["output_config"]["format"]
    assert normal(sent) == normal({**recorded, "output_config": sent["output_config"]})


def _check_forced_tool(sent: dict[str, Any]) -> None:
    assert "output_config" not in sent
    assert sent["tool_choice"] == {
        "type": "tool",
        "name": EXTRACTION_TOOL,
        "disable_parallel_tool_use": True,
    }
    (tool,) = sent["tools"]
    assert tool["name"] == EXTRACTION_TOOL
    schema = tool["input_schema"]
    assert schema["properties"]["counts"]["additionalProperties"] == {"type": "integer"}
    # A map cannot be enforced strictly: the tool goes without `strict`, and says so.
    assert "strict" not in tool


def test_a_map_falls_back_to_the_forced_tool_before_sending(server: _Server) -> None:
    target = _provider(server, "extract-tool")
    extracted = allama.extract(target, Tally, ChatRequest(MODEL).user("Count the fruit"))
    assert extracted.value == Tally(store="North", counts={"apples": 3, "pears": 12})
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL
    assert metadata.passes == 1
    assert metadata.auto_fallback is not None
    assert metadata.auto_fallback.field is RequestField.RESPONSE_FORMAT
    assert metadata.auto_fallback.stage is UnsupportedStage.BEFORE_SENDING
    assert metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert metadata.degradations
    # The refused native attempt sent nothing: exactly one request reached the server.
    _check_forced_tool(_check_sent(server, "extract-tool", stream=False))


def test_a_schema_the_host_rejects_falls_back_after_its_400(server: _Server) -> None:
    """A model no row knows (a gateway's own name for it): native output is a guess, the
    host's 400 on the schema costs nothing, and the forced tool is asked next."""
    route = "extract-rejected"
    target = _provider(server, route)
    extracted = allama.extract(target, City, ChatRequest("house-model").user("London"))
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL
    assert metadata.auto_fallback is not None
    assert metadata.auto_fallback.stage is UnsupportedStage.PROVIDER
    assert metadata.passes == 1
    first, second = (body for _, _, body in server.requests_to(route))
    assert "output_config" in first and "tools" not in first
    assert "output_config" not in second and second["tools"][0]["name"] == EXTRACTION_TOOL


def test_extract_stream_over_a_streamed_tool_call(server: _Server) -> None:
    target = _provider(server, "extract-tool-stream")
    partials: list[Tally] = []
    with allama.extract_stream(target, Tally, ChatRequest(MODEL).user("Count")) as stream:
        for _ in stream:
            value = stream.partial
            if value is not None and (not partials or value != partials[-1]):
                partials.append(value)
        extracted = stream.finish()
    final = Tally(store="North", counts={"apples": 3, "pears": 12})
    assert extracted.value == final
    # Each partial value is a `Tally` whose fields, as far as they arrived, have their types.
    assert len(partials) >= 3 and partials[-1] == final
    for partial in partials:
        assert isinstance(partial, Tally)
        for name in partial.model_fields_set:
            if name == "store":
                assert isinstance(partial.store, str) and "North".startswith(partial.store)
            else:
                assert all(type(v) is int for v in partial.counts.values())
                assert partial.counts.items() <= final.counts.items()
    assert any(p.counts == {"apples": 3} for p in partials if "counts" in p.model_fields_set)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL and metadata.passes == 1
    assert metadata.auto_fallback is not None
    _check_forced_tool(_check_sent(server, "extract-tool-stream", stream=True))
