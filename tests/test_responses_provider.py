"""The Responses API end to end, over real sockets on 127.0.0.1.

A local HTTP server answers every recorded Responses API case under `ALLAMA_CORPUS_DIR`
(default `../shared/corpus/cases` next to the repository): the cases of its
`openai_responses/` folder, and those of any other folder whose endpoint ends in
`/responses` (xAI, OpenRouter). `allama.provider(<preset>, api="responses", ...)` asks it
the equivalent of the recorded request with each of `chat`, `achat`, `chat_stream` and
`achat_stream`. The call that was recorded gets the recording as it is: its status, its
recorded headers and its body, or its stream in small chunks (chunked transfer encoding).
The other calls get the same response in their framing: a stream's final response (the
one its terminal event carries; the error object of its error event where it has none) as
a body, and a body streamed as OpenAI streams it.
Expectations are read from the recording alone: the text, refusal, tool calls, reasoning,
finish reason, usage and model of a response; the class, status and `retry_after` of an
error. The reading assumes only what the wire format promises: usage counts, headers, item
types and fields may be missing, of a type nobody knows yet, or new.

Where the request body was recorded, the equivalent `ChatRequest` must encode to it; the
differences allama makes on purpose are spelled out where the bodies are normalised.

Then what the recordings do not show: streams cut mid-way, an error event and a failed
response mid-stream, a 429, a schema the endpoint rejects, Azure's v1 URL, the key kept out
of errors; and extraction end to end (native with `text.format`, a list in an object root,
a forced tool, typed partial values from a stream). The decoder-level replay (any chunking,
every item type) is in `test_responses_decode.py`.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
from _responses_support import pieces, sse, stream_of
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
    ServerError,
    UnsupportedError,
)
from allama.extract import EXTRACTION_TOOL, ExtractionMode, RefusedError, SchemaEnforcement
from allama.providers import HttpProvider
from allama.types import (
    AssistantMessage,
    ChatRequest,
    ChatResponse,
    ContentBlock,
    DeveloperMessage,
    DocumentPart,
    ImagePart,
    Message,
    Reasoning,
    Refusal,
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
    Usage,
    UserMessage,
    WarningKind,
)

KEY = "sk-proj-SECRET-test-key-4242"
RESPONSES_PATH = "/responses"
MODEL = "gpt-4o"
PRESET_OF = {"openai_responses": "openai", "openai": "openai", "xai": "xai"}
"""The preset that speaks to a recorded endpoint, by the corpus folder; others by name."""
_TERMINAL = ("response.completed", "response.incomplete", "response.failed", "response.done")


# The recordings


@dataclass(frozen=True)
class Case:
    key: str
    data: dict[str, Any]

    @property
    def route(self) -> str:
        return f"replay/{self.key}"

    @property
    def preset(self) -> str:
        folder = self.key.split("/")[0]
        return PRESET_OF.get(folder, folder.replace("_", "-"))

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
    def body(self) -> bytes:
        """What a non-streamed answer (or an error status) carries."""
        if self.data.get("response_body") is not None:
            return json.dumps(self.data["response_body"]).encode()
        if self.data.get("response_text") is not None:
            return str(self.data["response_text"]).encode()
        return (self.stream or "").encode()

    @property
    def final(self) -> dict[str, Any] | None:
        """The response object: the body, or the one a stream's terminal event carries."""
        if self.stream is None:
            body = self.data.get("response_body")
            return body if isinstance(body, dict) and self.status < 400 else None
        finals = [
            event["response"]
            for _, event in sse_events(self.stream)
            if isinstance(event, dict) and event.get("type") in _TERMINAL
        ]
        return finals[-1] if finals else None

    @property
    def is_error(self) -> bool:
        if self.status >= 400:
            return True
        return self.stream is not None and read_stream(self.stream, MODEL)[1] is not None


def _load() -> list[Case]:
    if not CORPUS.is_dir():
        return []
    cases = []
    for path in sorted(CORPUS.glob("*/*.json")):
        data = json.loads(path.read_text())
        endpoint = str(data.get("endpoint") or "").split("?")[0]
        if path.parent.name == "openai_responses" or endpoint.endswith(RESPONSES_PATH):
            cases.append(Case(f"{path.parent.name}/{path.stem}", data))
    return cases


def _synthetic(key: str, **data: Any) -> Case:
    """A recording of a shape the wire format allows, written here rather than captured."""
    base: dict[str, Any] = {
        "provider": "openai",
        "endpoint": "/v1/responses",
        "status": 200,
        "response_headers": {},
        "tags": ["synthetic"],
    }
    return Case(f"openai/synthetic_{key}", {**base, **data})


_IMAGE = (  # a PNG of one pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
    "AAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
_WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
_ENCRYPTED = "gAAAAABpSynthetic" + "e" * 40
_WEB_SEARCH = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "weather Zürich"},
}

SYNTHETIC = [
    _synthetic(
        # No usage, no headers at all, an item type and fields nobody knows yet, a message
        # with a text part, a part nobody knows and a refusal part, and a reasoning item with
        # only raw reasoning text.
        "response_without_usage_with_unknown_items_and_fields",
        response_body={
            "id": "resp_synthetic_1",
            "object": "response",
            "status": "completed",
            "model": "gpt-5-2025-08-07",
            "output": [
                {
                    "id": "rs_s1",
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": "Look it up."}],
                },
                _WEB_SEARCH,
                {
                    "id": "msg_s1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "phase": "final_answer",
                    "content": [
                        {"type": "output_text", "text": "Sunny in Zürich.", "annotations": []},
                        {"type": "brand_new_part", "x": 1},
                        {"type": "refusal", "refusal": "No forecast beyond that."},
                    ],
                },
            ],
            "brand_new_top_level_field": {"x": [1, 2]},
        },
    ),
    _synthetic(
        # Unknown events, items finished whole without deltas, an item announced only in the
        # final response, a reasoning summary in two parts, usage with cache counts.
        "stream_with_unknown_events_and_whole_items",
        stream=sse(
            {"type": "response.created", "response": {"id": "resp_s2", "model": "gpt-5"}},
            {"type": "response.brand_new_event", "payload": {"anything": True}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"id": "rs_s2", "type": "reasoning", "summary": []},
            },
            {
                "type": "response.reasoning_summary_text.delta",
                "output_index": 0,
                "summary_index": 0,
                "delta": "First.",
            },
            {
                "type": "response.reasoning_summary_text.delta",
                "output_index": 0,
                "summary_index": 1,
                "delta": "Second.",
            },
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {
                    "id": "rs_s2",
                    "type": "reasoning",
                    "summary": [
                        {"type": "summary_text", "text": "First."},
                        {"type": "summary_text", "text": "Second."},
                    ],
                    "encrypted_content": _ENCRYPTED,
                },
            },
            {
                "type": "response.output_item.done",
                "output_index": 1,
                "item": {
                    "id": "fc_s2",
                    "type": "function_call",
                    "call_id": "call_s2",
                    "name": "get_weather",
                    "arguments": '{"city": "Zürich"}',
                },
            },
            {"type": "response.web_search_call.searching", "output_index": 2},
            {
                "type": "response.completed",
                "response": {
                    "id": "resp_s2",
                    "model": "gpt-5-2025-08-07",
                    "status": "completed",
                    "output": [
                        {
                            "id": "rs_s2",
                            "type": "reasoning",
                            "summary": [
                                {"type": "summary_text", "text": "First."},
                                {"type": "summary_text", "text": "Second."},
                            ],
                            "encrypted_content": _ENCRYPTED,
                        },
                        {
                            "id": "fc_s2",
                            "type": "function_call",
                            "call_id": "call_s2",
                            "name": "get_weather",
                            "arguments": '{"city": "Zürich"}',
                        },
                        _WEB_SEARCH,
                    ],
                    "usage": {
                        "input_tokens": 300,
                        "input_tokens_details": {"cached_tokens": 256, "cache_write_tokens": 20},
                        "output_tokens": 40,
                        "output_tokens_details": {"reasoning_tokens": 30},
                    },
                },
            },
        ).decode(),
    ),
    _synthetic(
        "stream_server_error_after_text",
        tags=["synthetic", "in_stream_error"],
        stream=sse(
            {"type": "response.created", "response": {"id": "resp_s3", "model": MODEL}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"id": "msg_s3", "type": "message", "role": "assistant", "content": []},
            },
            *(
                {
                    "type": "response.output_text.delta",
                    "output_index": 0,
                    "content_index": 0,
                    "item_id": "msg_s3",
                    "delta": piece,
                }
                for piece in ("Half an ", "answer")
            ),
            {"type": "error", "code": "server_error", "message": "The server had an error"},
        ).decode(),
    ),
    _synthetic(
        "error_429_rate_limited",
        status=429,
        response_headers={
            "content-type": "application/json",
            "retry-after": "7",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "20s",
            "x-request-id": "req_synthetic_429",
        },
        response_body={
            "error": {
                "message": "Rate limit reached for gpt-4o on requests per min (RPM)",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
    ),
    _synthetic(
        "error_400_schema_rejected",
        status=400,
        tags=["synthetic", "invalid_schema"],
        response_headers={"content-type": "application/json"},
        response_body={
            "error": {
                "message": "Invalid schema for response_format 'answer': In context=(), "
                "'additionalProperties' is required to be supplied and to be false.",
                "type": "invalid_request_error",
                "param": "text.format.schema",
                "code": "invalid_json_schema",
            }
        },
    ),
    _synthetic(
        "error_503_not_json",
        status=503,
        response_headers={"content-type": "text/html"},
        response_text="<html><body>upstream connect error</body></html>",
    ),
    _synthetic(
        # A request with every item shape the harness maps: instructions, a developer
        # message, images by data URL and by URL, a PDF, a reasoning item with its
        # encrypted content, text and a refusal, function calls and their outputs, strict
        # and plain tools, a named tool choice, serial calls, `text.format` with a
        # verbosity allama has no name for, an effort, limits and sampling, and fields
        # allama has no name for.
        "request_with_every_shape",
        request_body={
            "model": "gpt-5",
            "instructions": "Be brief.",
            "input": [
                {"role": "developer", "content": "Cite sources."},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is in these?"},
                        {
                            "type": "input_image",
                            "image_url": f"data:image/png;base64,{_IMAGE}",
                            "detail": "auto",
                        },
                        {"type": "input_image", "image_url": "https://example.com/a.jpg"},
                        {
                            "type": "input_file",
                            "filename": "report.pdf",
                            "file_data": "data:application/pdf;base64,JVBERi0xLjc=",
                        },
                    ],
                },
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "Two images."}],
                    "encrypted_content": _ENCRYPTED,
                },
                {"role": "assistant", "content": "Let me check the weather."},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city":"Paris"}',
                },
                {
                    "type": "function_call",
                    "call_id": "call_2",
                    "name": "get_weather",
                    "arguments": '{"city":"Zürich"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
                {"type": "function_call_output", "call_id": "call_2", "output": "Rain"},
                # Without an id, a refusal goes back as the message's content: no input
                # message part holds one, and an output message needs its id.
                {"role": "assistant", "content": "No more forecasts."},
                {"role": "user", "content": "Thanks."},
            ],
            "tools": [
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "The weather in a city.",
                    "parameters": _WEATHER,
                    "strict": True,
                },
                {"type": "function", "name": "noop", "parameters": {"type": "object"}},
            ],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "parallel_tool_calls": False,
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "answer",
                    "schema": {
                        "type": "object",
                        "properties": {"answer": {"type": "string"}},
                        "required": ["answer"],
                        "additionalProperties": False,
                    },
                    "strict": True,
                },
                "verbosity": "low",
            },
            "reasoning": {"effort": "low", "summary": "auto"},
            "max_output_tokens": 2048,
            "temperature": 1,
            "top_p": 1,
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "metadata": {"user_id": "user-1"},
            "truncation": "auto",
        },
        response_body={
            "id": "resp_synthetic_4",
            "object": "response",
            "status": "completed",
            "model": "gpt-5-2025-08-07",
            "output": [
                {
                    "id": "msg_s4",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": '{"answer": "You are welcome."}'}],
                }
            ],
            "usage": {
                "input_tokens": 2112,
                "input_tokens_details": {"cached_tokens": 2000},
                "output_tokens": 9,
                "output_tokens_details": {"reasoning_tokens": 0},
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


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    inputs = raw.get("input_tokens_details") or {}
    outputs = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=_count(raw.get("input_tokens")),
        output_tokens=_count(raw.get("output_tokens")),
        reasoning_tokens=_count(outputs.get("reasoning_tokens")),
        cache_read_tokens=_count(inputs.get("cached_tokens")),
        cache_write_tokens=_count(inputs.get("cache_write_tokens")),
    )


def _joined(texts: list[str]) -> str:
    return "\n\n".join(text for text in texts if text)


def read_response(items: list[dict[str, Any]], final: dict[str, Any], asked: str) -> Expected:
    """What a response says, items and parts of types nobody knows left aside."""
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[tuple[str, str, Any]] = []
    thoughts: list[str] = []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part["text"])
                elif part.get("type") == "refusal":
                    refusals.append(part["refusal"])
        elif kind == "function_call":
            arguments = item.get("arguments") or "null"
            calls.append((item["call_id"], item["name"], json.loads(arguments)))
        elif kind == "reasoning":
            summary = [part["text"] for part in item.get("summary") or []]
            content = [part["text"] for part in item.get("content") or []]
            thoughts.append(_joined(summary) or _joined(content))
    status = final.get("status")
    finish: str | None
    if status == "completed":
        finish = "tool_calls" if calls else "stop"
    elif status == "incomplete":
        reason = (final.get("incomplete_details") or {}).get("reason")
        finish = _INCOMPLETE.get(reason, reason or "incomplete")
    else:
        finish = None if status in (None, "queued", "in_progress") else status
    model = final.get("model")
    return Expected(
        "".join(texts) if texts else None,
        refusals[0] if refusals else None,
        calls,
        "".join(thoughts) if thoughts else None,
        finish,
        _usage(final.get("usage")),
        model if isinstance(model, str) and model else asked,
    )


def sse_events(stream: str) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of each server-sent event; `data:` lines joined, `[DONE]`
    and comment lines left out."""
    events: list[tuple[str | None, Any]] = []
    name: str | None = None
    data: list[str] = []
    for line in [*stream.splitlines(), ""]:
        if not line:
            joined = "\n".join(data)
            if joined and joined != "[DONE]":
                events.append((name, json.loads(joined)))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return events


_PART_DELTAS = {"response.output_text.delta": "text", "response.refusal.delta": "refusal"}


def read_stream(stream: str, asked: str) -> tuple[Expected, dict[str, Any] | None]:
    """The response a stream adds up to, as far as it goes, read from its deltas: items by
    output index as `added` announced them (or whole, as `done` or the final response gave
    the ones never announced), their deltas appended (summary parts by index, raw reasoning
    text where no summary came); the status, usage and model of the last response an event
    carried. And the error event, or the failed response, that ended it, if one did."""
    items: dict[int, dict[str, Any]] = {}
    summaries: dict[int, dict[int, str]] = {}
    raw_texts: dict[int, dict[int, str]] = {}
    final: dict[str, Any] = {}
    error = None
    for name, event in sse_events(stream):
        kind = event.get("type", name) if isinstance(event, dict) else name
        if kind in ("error", "response.failed") or name == "error":
            error = event if isinstance(event, dict) else {}
            break
        if not isinstance(event, dict):
            continue
        if isinstance(event.get("response"), dict):
            final = event["response"]
        index = event.get("output_index")
        if kind == "response.output_item.added":
            item = dict(event["item"])
            if item.get("type") == "message":
                item["content"] = []
            items[index] = item
        elif kind == "response.output_item.done" and index not in items:
            items[index] = event["item"]
        elif kind == "response.content_part.added" and items[index].get("type") == "message":
            items[index]["content"].append(dict(event["part"]))
        elif kind in _PART_DELTAS:
            key = _PART_DELTAS[kind]
            parts = items[index]["content"]
            while len(parts) <= event["content_index"]:  # a part announced by its delta
                parts.append({"type": "output_text" if key == "text" else key, key: ""})
            parts[event["content_index"]][key] += event["delta"]
        elif kind == "response.function_call_arguments.delta":
            items[index]["arguments"] = items[index].get("arguments", "") + event["delta"]
        elif kind == "response.reasoning_summary_text.delta":
            parts = summaries.setdefault(index, {})
            parts[event["summary_index"]] = parts.get(event["summary_index"], "") + event["delta"]
        elif kind == "response.reasoning_text.delta":
            parts = raw_texts.setdefault(index, {})
            parts[event["content_index"]] = parts.get(event["content_index"], "") + event["delta"]
        elif kind in _TERMINAL:
            break
    for position, item in enumerate(final.get("output") or []):
        items.setdefault(position, item)
    for index, parts in summaries.items():
        items[index]["summary"] = [{"text": parts[i]} for i in sorted(parts)]
    for index, parts in raw_texts.items():
        items[index]["content"] = [{"text": parts[i]} for i in sorted(parts)]
    return read_response([items[i] for i in sorted(items)], final, asked), error


def expected_of(case: Case, asked: str, *, stream: bool) -> Expected:
    """What the call gets: the recording as it is for the call that was recorded, the same
    response in the other framing for the other."""
    if stream and case.stream is not None:
        return read_stream(case.stream, asked)[0]
    final = case.final
    assert final is not None
    return read_response(final.get("output") or [], final, asked)


def check(response: ChatResponse, expected: Expected, preset: str) -> None:
    assert response.text() == expected.text
    assert response.first_refusal() == expected.refusal
    calls = [(c.id, c.name, json.loads(c.arguments or "null")) for c in response.tool_calls()]
    assert calls == expected.calls
    assert response.reasoning() == expected.reasoning
    assert response.finish_reason == expected.finish
    assert response.usage == expected.usage
    assert response.model == expected.model
    assert response.provider == preset


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
    402: QuotaExceededError,
    403: PermissionDeniedError,
    404: NotFoundError,
    429: RateLimitedError,
    503: OverloadedError,
}


def _error_payload(case: Case) -> Any:
    if case.status >= 400:
        return case.data.get("response_body")
    assert case.stream is not None
    payload = read_stream(case.stream, MODEL)[1]
    if isinstance(payload, dict) and payload.get("type") == "response.failed":
        return {"error": (payload.get("response") or {}).get("error")}
    return payload


def expected_error(case: Case) -> type[Error]:
    """The class a recorded error stands for: by its tags, its code, its status."""
    tags = set(case.data.get("tags") or [])
    if "invalid_schema" in tags:
        return UnsupportedError
    if "context_length" in tags:
        return ContextWindowExceededError
    payload = _error_payload(case)
    inner = payload.get("error") if isinstance(payload, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    if code is None and isinstance(payload, dict):
        code = payload.get("code")
    if code in _BY_CODE:
        return _BY_CODE[code]
    if case.status < 400:
        return ServerError  # an error event with a code nobody knows: the server gave up
    if case.status in _BY_STATUS:
        return _BY_STATUS[case.status]
    return ServerError if case.status >= 500 else InvalidRequestError


def check_retry_after(error: Error, case: Case) -> None:
    headers = case.headers
    explicit = [float(headers["retry-after-ms"]) / 1000] if "retry-after-ms" in headers else []
    if headers.get("retry-after", "").strip().isdigit():
        explicit.append(float(headers["retry-after"]))
    resets = any(key.startswith("x-ratelimit-reset-") for key in headers)
    if not isinstance(error, RateLimitedError):
        assert error.retry_after is None
    elif explicit:
        # Either may be rounded, so the longer wait wins.
        assert error.retry_after == max(explicit)
    elif resets:
        assert error.retry_after is not None and error.retry_after >= 0
    else:
        assert error.retry_after is None


def check_error(error: Error, case: Case, asked: str, *, stream: bool) -> None:
    cls = expected_error(case)
    assert type(error) is cls
    assert error.provider == case.preset
    assert error.model == asked
    assert error.status == (case.status if case.status >= 400 else None)
    if stream or case.status >= 400:
        check_retry_after(error, case)
    flag = case.headers.get("x-should-retry", "").strip().lower()
    if flag in ("true", "false") and cls is not QuotaExceededError:
        assert error.retryable is (flag == "true")
    request_id = case.headers.get("x-request-id")
    if request_id and case.status >= 400:
        assert error.request_id == request_id
    # The provider's words stay out of the log view; the key is nowhere.
    assert error.message not in str(error.as_log())
    for view in (str(error), repr(error), str(error.as_log()), error.to_json()):
        assert KEY not in view


def test_the_harness_reads_the_shapes_the_wire_allows() -> None:
    """What the independent reading makes of the synthetic recordings, spelled out, so that
    the harness and the adapter cannot agree on a wrong reading."""
    by_key = {case.key.removeprefix("openai/synthetic_"): case for case in SYNTHETIC}
    assert expected_of(
        by_key["response_without_usage_with_unknown_items_and_fields"], "asked", stream=False
    ) == Expected(
        "Sunny in Zürich.",
        "No forecast beyond that.",
        [],
        "Look it up.",
        "stop",
        None,
        "gpt-5-2025-08-07",
    )
    whole = by_key["stream_with_unknown_events_and_whole_items"]
    streamed = Expected(
        None,
        None,
        [("call_s2", "get_weather", {"city": "Zürich"})],
        "First.\n\nSecond.",
        "tool_calls",
        Usage(
            input_tokens=300,
            output_tokens=40,
            reasoning_tokens=30,
            cache_read_tokens=256,
            cache_write_tokens=20,
        ),
        "gpt-5-2025-08-07",
    )
    assert expected_of(whole, "asked", stream=True) == streamed
    assert expected_of(whole, "asked", stream=False) == streamed
    failing = by_key["stream_server_error_after_text"]
    assert failing.stream is not None
    partial, error = read_stream(failing.stream, "asked")
    assert (partial.text, partial.finish, partial.usage) == ("Half an answer", None, None)
    assert error == {
        "type": "error",
        "code": "server_error",
        "message": "The server had an error",
        "sequence_number": 4,
    }
    assert failing.is_error and expected_error(failing) is ServerError
    assert expected_error(by_key["error_429_rate_limited"]) is RateLimitedError
    assert expected_error(by_key["error_503_not_json"]) is OverloadedError
    assert expected_error(by_key["error_400_schema_rejected"]) is UnsupportedError


def test_the_corpus_has_every_kind_of_case() -> None:
    recorded = [case for case in CASES if case not in SYNTHETIC]
    if not recorded:
        pytest.skip(f"no Responses API cases under {CORPUS}")
    kinds = {(case.is_error, case.stream is not None) for case in recorded}
    assert {(False, False), (False, True), (True, False), (True, True)} <= kinds
    assert {case.preset for case in recorded} >= {"openai", "xai", "openrouter"}


# Recorded requests as allama requests


class NoName(Exception):
    """A part of a recorded request allama has no name for."""


@dataclass(frozen=True)
class Built:
    request: ChatRequest
    passed: frozenset[str]
    """The recorded fields sent as they are through the `openai_responses` option (allama
    has no name for them), as `field` or `field.key`."""


def _only(block: dict[str, Any], *keys: str) -> None:
    if not set(block) <= {"type", *keys}:
        raise NoName(f"a `{block.get('type')}` part with {sorted(set(block) - {'type', *keys})}")


def _user_part(part: dict[str, Any]) -> TextPart | ImagePart | DocumentPart:
    kind = part.get("type")
    if kind == "input_text":
        _only(part, "text")
        return TextPart(text=part["text"])
    if kind == "input_image" and part.get("detail", "auto") == "auto":
        _only(part, "image_url", "detail")
        return ImagePart(url=part["image_url"])
    if kind == "input_file" and str(part.get("file_data", "")).startswith("data:application/pdf"):
        _only(part, "file_data", "filename")
        import base64

        data = base64.b64decode(part["file_data"].partition(",")[2])
        return DocumentPart(data=data, media_type="application/pdf", title=part.get("filename"))
    raise NoName(f"a user part of type {kind!r}")


def _text_of(content: Any, kind: str) -> str:
    if isinstance(content, str):
        return content
    if len(content) == 1 and content[0].get("type") == kind:
        return str(content[0]["text"])
    raise NoName("a system message that is not one text")


def _assistant_blocks(item: dict[str, Any]) -> list[ContentBlock]:
    kind = item.get("type", "message")
    if kind == "message":
        content = item["content"]
        if isinstance(content, str):
            return [TextPart(text=content)]
        blocks: list[ContentBlock] = []
        for part in content:
            if part.get("type") == "output_text":
                _only(part, "text", "annotations")
                blocks.append(TextPart(text=part["text"]))
            elif part.get("type") == "refusal":
                _only(part, "refusal")
                blocks.append(Refusal(text=part["refusal"]))
            else:
                raise NoName(f"an assistant part of type {part.get('type')!r}")
        return blocks
    if kind == "function_call":
        _only(item, "call_id", "name", "arguments")
        return [ToolCall(id=item["call_id"], name=item["name"], arguments=item["arguments"])]
    assert kind == "reasoning"
    _only(item, "id", "summary", "encrypted_content")
    summary = "\n\n".join(part["text"] for part in item["summary"])
    return [
        Reasoning(
            text=summary, signature=item["id"], encrypted_content=item.get("encrypted_content")
        )
    ]


def _messages(raw: Any) -> list[Message]:
    if isinstance(raw, str):
        return [UserMessage(content=(TextPart(text=raw),))]
    out: list[Message] = []
    turn: list[ContentBlock] = []
    for item in raw:
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in ("function_call", "reasoning") or (kind == "message" and role == "assistant"):
            if not set(item) <= {
                "type",
                "role",
                "content",
                "call_id",
                "name",
                "arguments",
                "id",
                "summary",
                "encrypted_content",
                "status",
            }:
                raise NoName(f"an item with {sorted(item)}")
            turn.extend(_assistant_blocks(item))
            continue
        if turn:
            out.append(AssistantMessage(content=tuple(turn)))
            turn = []
        if kind == "function_call_output":
            _only(item, "call_id", "output")
            out.append(ToolMessage(tool_call_id=item["call_id"], content=item["output"]))
        elif kind == "message" and role == "user":
            content = item["content"]
            parts = (
                [TextPart(text=content)]
                if isinstance(content, str)
                else [_user_part(part) for part in content]
            )
            out.append(UserMessage(content=tuple(parts)))
        elif kind == "message" and role == "system":
            out.append(SystemMessage(content=_text_of(item["content"], "input_text")))
        elif kind == "message" and role == "developer":
            out.append(DeveloperMessage(content=_text_of(item["content"], "input_text")))
        else:
            raise NoName(f"an input item of type {kind!r}")
    if turn:
        out.append(AssistantMessage(content=tuple(turn)))
    return out


def _tools(raw: list[dict[str, Any]]) -> list[ToolDefinition]:
    tools = []
    for tool in raw:
        if tool.get("type") != "function" or not set(tool) <= {
            "type",
            "name",
            "description",
            "parameters",
            "strict",
        }:
            raise NoName(f"a tool with {sorted(tool)}")
        tools.append(
            ToolDefinition(
                name=tool["name"],
                parameters=tool.get("parameters") or {"type": "object"},
                description=tool.get("description") or None,
                strict=tool.get("strict"),
            )
        )
    return tools


def _tool_choice(raw: Any) -> ToolChoice:
    if isinstance(raw, dict) and raw.get("type") == "function" and set(raw) == {"type", "name"}:
        return ToolChoice.tool(raw["name"])
    if raw in ("auto", "none", "required"):
        return ToolChoice(mode=raw)
    raise NoName(f"a tool choice {raw!r}")


def _response_format(raw: dict[str, Any]) -> ResponseFormat:
    kind = raw.get("type")
    if kind == "json_schema":
        _only(raw, "name", "schema", "strict", "description")
        return ResponseFormat.for_schema(
            raw["schema"],
            name=raw["name"],
            strict=raw.get("strict"),
            description=raw.get("description"),
        )
    if kind == "json_object":
        return ResponseFormat.json_object()
    if kind == "text":
        return ResponseFormat.text()
    raise NoName(f"a format of type {kind!r}")


_ALLAMAS_OWN = (("store", False), ("include", ["reasoning.encrypted_content"]))
"""Recorded fields that say what allama sends by itself."""


def request_from_body(body: dict[str, Any]) -> Built:
    """The `ChatRequest` allama users would write for a recorded body.

    A top-level field allama has no name for (`metadata`, `truncation`, a hosted tool in
    `tools`, `text.verbosity`, a `reasoning.summary`) goes through the `openai_responses`
    option, which is what that option is for: allama asks for no summary by itself (OpenAI
    refuses one to an organization it has not verified). `store: false` and the `include`
    of encrypted reasoning are what allama sends by itself. An input item allama cannot
    express raises `NoName`:
    passing the conversation itself through would leave nothing to compare.
    """
    option: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    messages: list[Message] = []
    for name, value in body.items():
        try:
            if name in ("model", "stream", "input"):
                continue
            if name == "instructions":
                messages.insert(0, SystemMessage(content=value))
            elif (name, value) in _ALLAMAS_OWN:
                continue
            elif name in ("max_output_tokens", "temperature", "top_p", "parallel_tool_calls"):
                fields[name] = value
            elif name == "tools":
                fields["tools"] = tuple(_tools(value))
            elif name == "tool_choice":
                fields["tool_choice"] = _tool_choice(value)
            elif name == "text":
                rest = {k: v for k, v in value.items() if k != "format"}
                if "format" in value:
                    fields["response_format"] = _response_format(value["format"])
                if rest:
                    option["text"] = rest
            elif name == "reasoning":
                rest = {k: v for k, v in value.items() if k != "effort"}
                if "effort" in value:
                    fields["reasoning_effort"] = value["effort"]
                if rest:
                    option["reasoning"] = rest
            else:
                option[name] = value
        except NoName:
            option[name] = value
    messages.extend(_messages(body["input"]))
    request = ChatRequest(body["model"], messages=tuple(messages), **fields)
    if option:
        request = request.with_option_json("openai_responses", option)
    passed = {name for name in option if name not in ("text", "reasoning")}
    for merged in ("text", "reasoning"):
        passed |= {f"{merged}.{key}" for key in option.get(merged, {})}
    return Built(request, frozenset(passed))


def _user_content(content: Any) -> Any:
    if isinstance(content, list):
        parts = []
        for part in content:
            if part.get("type") == "input_image":
                part = {"detail": "auto", **part}
            parts.append(part)
        if len(parts) == 1 and parts[0].get("type") == "input_text":
            return parts[0]["text"]
        return parts
    return content


def _normal_input(raw: Any) -> list[dict[str, Any]]:
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    out: list[dict[str, Any]] = []
    for item in raw:
        item = dict(item)
        if item.get("type", "message") == "message" and "role" in item:
            item.pop("type", None)
            if item["role"] == "assistant":
                content = item["content"]
                if isinstance(content, str):
                    content = [{"type": "output_text", "text": content}]
                item["content"] = [
                    {k: v for k, v in part.items() if k != "annotations"} for part in content
                ]
                if out and out[-1].get("role") == "assistant":
                    out[-1]["content"] = out[-1]["content"] + item["content"]
                    continue
            else:
                item["content"] = _user_content(item["content"])
        out.append(item)
    return out


def normal(body: dict[str, Any]) -> dict[str, Any]:
    """A body with the differences that mean nothing to the endpoint taken out, applied to
    what allama sends and to the recording alike:

    - `stream: false` is the default; allama leaves it out.
    - `input` as a string is one user message; a message's `type: message` is the
      default; a user message of one text part is that text; an image's `detail` is
      `auto` unless said; consecutive assistant message items are one (allama sends a run
      of text and refusals as one item); `annotations` of a text sent back say nothing.
    - An empty or null tool description says nothing; allama leaves it out.
    - `text.format.description: null` says nothing.

    And the differences allama makes on purpose:

    - `store` is `false` unless the caller says otherwise: a recording without it relied
      on the server's default, `true`.
    - `include: ["reasoning.encrypted_content"]` is what allama asks for by itself when it
      does not store and the model reasons, so that the reasoning can go back next turn.
    - `strict` is always said: on a tool without it the server makes the schema strict
      where it can, silently; allama sends `false`. On `text.format` absent is `false`.
    - `parallel_tool_calls: false` beside a strict tool: OpenAI and Azure do not hold
      strict schemas under parallel calls, so allama asks for serial ones (as it does on
      Chat Completions).
    - `"properties": {}` on a tool's object root that has none: OpenAI answers 400 to one
      without ("object schema missing properties", gpt-5), so allama adds it; it allows
      every key the root did.

    Everything else is compared as it is, strict schemas included: allama rewrites a strict
    schema for OpenAI's subset, but a schema OpenAI accepted comes out unchanged, so a
    difference is a finding.
    """
    out = dict(body)
    out["stream"] = bool(out.get("stream"))
    out.setdefault("store", False)
    include = [entry for entry in out.pop("include", []) if entry != "reasoning.encrypted_content"]
    if include:
        out["include"] = include
    out["input"] = _normal_input(out.get("input") or [])
    if "tools" in out:
        tools = []
        for tool in out["tools"]:
            tool = dict(tool)
            if not tool.get("description"):
                tool.pop("description", None)
            tool["strict"] = bool(tool.get("strict"))
            parameters = tool.get("parameters")
            if isinstance(parameters, dict) and parameters.get("type") == "object":
                tool["parameters"] = {"properties": {}, **parameters}
            tools.append(tool)
        out["tools"] = tools
        if out.get("parallel_tool_calls") is False and any(t["strict"] for t in tools):
            del out["parallel_tool_calls"]
    fmt = (out.get("text") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        fmt = {k: v for k, v in fmt.items() if not (k == "description" and v is None)}
        fmt["strict"] = bool(fmt.get("strict"))
        out["text"] = {**out["text"], "format": fmt}
    return out


# What the recorded fields allama has no name for are, in the shared corpus: each of these
# is sent as recorded through the `openai_responses` option, and compared as such.
PASSED_THROUGH: dict[str, set[str]] = {
    "openai_responses/reasoning_with_function_call": {"reasoning.summary"},  # `detailed`
    "openai_responses/reasoning_summary": {"reasoning.summary"},  # `auto`: asked for
    "openai_responses/reasoning_summary_stream": {"reasoning.summary"},
    "openai/synthetic_request_with_every_shape": {
        "text.verbosity",
        "reasoning.summary",
        "metadata",
        "truncation",
    },
}


REFUSED_WHEN_MADE: dict[str, str] = {
    "openai_responses/error_400_stream_request": "temperature",  # -1
}
"""Recorded requests the provider refused for a setting allama refuses as the request is
made (the field named): their encoding cannot be compared; their answer is replayed for
the request without it."""


def test_a_recorded_request_the_provider_refused_is_refused_as_it_is_made() -> None:
    for key, field in REFUSED_WHEN_MADE.items():
        case = _named(key)
        assert case.request_body is not None
        with pytest.raises(ValueError, match=f"{field}"):
            request_from_body(case.request_body)
        assert field in str(case.data["response_body"])  # the provider's refusal names it


def _built(case: Case) -> Built:
    assert case.request_body is not None
    if case.key in REFUSED_WHEN_MADE:
        pytest.skip(f"allama refuses its `{REFUSED_WHEN_MADE[case.key]}` as it is made")
    try:
        return request_from_body(case.request_body)
    except NoName as why:
        pytest.skip(f"the recorded conversation has {why}, which allama does not write")


def _offline(case: Case) -> HttpProvider:
    return allama.provider(
        case.preset, api="responses", api_key=KEY, base_url="http://127.0.0.1:9/v1"
    )


@pytest.mark.parametrize("case", WITH_REQUESTS, ids=_ids(WITH_REQUESTS))
def test_equivalent_request_encodes_to_the_recorded_body(case: Case) -> None:
    recorded = case.request_body
    assert recorded is not None
    built = _built(case)
    if CORPUS_IS_DEFAULT or case in SYNTHETIC:
        assert built.passed == PASSED_THROUGH.get(case.key, set())
    http, warnings = _offline(case)._prepare(built.request, stream=bool(recorded.get("stream")))
    assert http.url == f"http://127.0.0.1:9/v1{RESPONSES_PATH}"
    assert json.loads(http.content) == http.body
    assert normal(http.body) == normal(recorded)
    # Recorded requests were accepted as sent (or refused for what allama does not check):
    # nothing in them is refused before sending.
    assert [w for w in warnings if w.kind is WarningKind.UNSUPPORTED] == []


def test_the_normalisation_leaves_a_real_difference_a_difference() -> None:
    """The comparison above is not loosened past what it says: a changed field still fails."""
    case = _named("openai/synthetic_request_with_every_shape")
    assert case.request_body is not None
    http, _ = _offline(case)._prepare(_built(case).request, stream=False)
    sent = http.body
    assert normal(sent) == normal(case.request_body)
    for change in (
        {"stream": True},
        {"store": True},
        {"instructions": "Be brief!"},
        {"max_output_tokens": 2047},
        {"tool_choice": "required"},
        {"parallel_tool_calls": True},
        {"include": ["message.output_text.logprobs"]},
        {"text": {"format": sent["text"]["format"]}},
        {"reasoning": {"effort": "low", "summary": "detailed"}},
        {"tools": [{**sent["tools"][0], "strict": False}, sent["tools"][1]]},
        {"input": [*sent["input"][:-1], {"role": "user", "content": "Thanks!"}]},
        {"input": [item for item in sent["input"] if item.get("type") != "reasoning"]},
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
        route = self.path.split("?")[0].removesuffix(RESPONSES_PATH)
        route = route.removesuffix("/openai/v1").strip("/")
        self.server.routes[route](self)

    @property
    def wants_stream(self) -> bool:
        return bool(self.request_body.get("stream"))

    def answer(self, body: dict[str, Any]) -> None:
        """A response object, as a body or as a stream, as the request asked."""
        if self.wants_stream:
            self.send_stream(stream_of(body))
        else:
            self.send_json(200, body)


_FRAMING = ("content-length", "transfer-encoding", "connection")
_ERROR_KEYS = ("type", "code", "message", "param")


def _serve_case(case: Case) -> Callable[[_Handler], None]:
    def serve(h: _Handler) -> None:
        headers = {k: v for k, v in case.headers.items() if k not in _FRAMING}
        if case.status >= 400:
            h.send_body(case.status, headers, case.body)
        elif h.wants_stream and case.stream is not None:
            h.send_stream(case.stream.encode(), headers)
        elif h.wants_stream:
            final = case.final
            assert final is not None
            h.send_stream(stream_of(final), {**headers, "content-type": "text/event-stream"})
        elif case.stream is not None:
            # The response the stream ended with; or, where it ended with an error event and
            # no response, that error as the error object of a body.
            final = case.final
            if final is None:
                event = read_stream(case.stream, MODEL)[1] or {}
                final = {"error": event.get("error") or {k: event.get(k) for k in _ERROR_KEYS}}
            h.send_json(200, final, {k: v for k, v in headers.items() if k != "content-type"})
        else:
            h.send_body(case.status, headers, case.body)

    return serve


def _response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "id": "resp_local",
        "object": "response",
        "status": "completed",
        "model": f"{MODEL}-2024-08-06",
        "output": output,
        "usage": {
            "input_tokens": 48,
            "input_tokens_details": {"cached_tokens": 8},
            "output_tokens": 12,
            "output_tokens_details": {"reasoning_tokens": 0},
        },
        **fields,
    }


def _message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_local",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": "fc_local",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_local",
        "name": name,
        "arguments": arguments,
    }


WORDS = ("Hello", " there", ", wor", "ld")
_TEXT_START = (
    {"type": "response.created", "response": {"id": "resp_text", "model": MODEL}},
    {"type": "response.in_progress", "response": {"id": "resp_text", "model": MODEL}},
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"id": "msg_text", "type": "message", "role": "assistant", "content": []},
    },
    {
        "type": "response.content_part.added",
        "output_index": 0,
        "content_index": 0,
        "item_id": "msg_text",
        "part": {"type": "output_text", "text": "", "annotations": []},
    },
    *(
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_text",
            "delta": word,
        }
        for word in WORDS
    ),
)
TEXT_EVENTS = [
    sse(event).decode().replace('"sequence_number": 0', f'"sequence_number": {n}')
    for n, event in enumerate(
        (
            *_TEXT_START,
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": _message("".join(WORDS)),
            },
            {
                "type": "response.completed",
                "response": _response([_message("".join(WORDS))], id="resp_text"),
            },
        )
    )
]
BEFORE_END = "".join(TEXT_EVENTS[: len(_TEXT_START)])
"""The stream up to its last text delta, at an event boundary."""

LONDON = {"city": "London", "country": "United Kingdom", "population": 9002488}
PARIS = {"city": "Paris", "country": "France", "population": 2102650}
SCHEMA_REJECTED = {
    "error": {
        "message": "Invalid schema for response_format 'City': In context=(), 'minimum' is "
        "not permitted.",
        "type": "invalid_request_error",
        "param": "text.format.schema",
        "code": "invalid_json_schema",
    }
}


def _routes() -> dict[str, Callable[[_Handler], None]]:
    def cut_between(h: _Handler) -> None:
        h.send_stream(BEFORE_END.encode())

    def cut_inside(h: _Handler) -> None:
        done = TEXT_EVENTS[-2]
        h.send_stream((BEFORE_END + done[: len(done) // 2]).encode())

    def dropped(h: _Handler) -> None:
        h.start_chunked()
        data = BEFORE_END.encode()
        for start in range(0, len(data), 13):
            h.chunk(data[start : start + 13])
        h.drop()

    def error_mid_stream(h: _Handler) -> None:
        error = {"type": "error", "code": "server_error", "message": "The server had an error"}
        h.send_stream((BEFORE_END + sse(error).decode() + "".join(TEXT_EVENTS[-2:])).encode())

    def failed_mid_stream(h: _Handler) -> None:
        failed = {
            "type": "response.failed",
            "response": {
                "id": "resp_text",
                "status": "failed",
                "error": {"code": "rate_limit_exceeded", "message": "Rate limit reached"},
            },
        }
        h.send_stream((BEFORE_END + sse(failed).decode()).encode())

    def rate_limited(h: _Handler) -> None:
        headers = {
            "retry-after": "7",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "30s",
            "x-request-id": "req_429",
        }
        body = {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
        h.send_json(429, body, headers)

    def schema_rejected(h: _Handler) -> None:
        h.send_json(400, SCHEMA_REJECTED)

    def auth_echo(h: _Handler) -> None:
        key = (h.headers.get("authorization") or h.headers.get("api-key") or "").removeprefix(
            "Bearer "
        )
        error = {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}
        h.send_json(401, {"error": error})

    def azure(h: _Handler) -> None:
        h.answer(_response([_message("Hi from Azure")]))

    def extract_native(h: _Handler) -> None:
        h.answer(_response([_message(json.dumps(LONDON))]))

    def extract_list(h: _Handler) -> None:
        h.answer(_response([_message(json.dumps({"value": [LONDON, PARIS]}))]))

    def extract_tool(h: _Handler) -> None:
        h.answer(_response([_call(EXTRACTION_TOOL, json.dumps(LONDON))]))

    def extract_refused(h: _Handler) -> None:
        refusal = {"type": "refusal", "refusal": "I can't help with that."}
        h.answer(_response([{**_message(""), "content": [refusal]}]))

    def extract_rejected(h: _Handler) -> None:
        # An endpoint that does not say what it enforces: it rejects the schema, then
        # answers the forced tool.
        if "text" in h.request_body:
            schema_rejected(h)
            return
        h.answer(_response([_call(EXTRACTION_TOOL, json.dumps(LONDON))]))

    return {
        "cut-between": cut_between,
        "cut-inside": cut_inside,
        "dropped": dropped,
        "error-mid-stream": error_mid_stream,
        "failed-mid-stream": failed_mid_stream,
        "rate-limited": rate_limited,
        "schema-rejected": schema_rejected,
        "auth-echo": auth_echo,
        "azure": azure,
        "extract-native": extract_native,
        "extract-list": extract_list,
        "extract-tool": extract_tool,
        "extract-refused": extract_refused,
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


def _provider(server: _Server, route: str, name: str = "openai") -> HttpProvider:
    return allama.provider(name, api="responses", api_key=KEY, base_url=_base(server, route))


def _route(server: _Server, base: str, how: str) -> str:
    """A route of its own for one call, answered as `base` is."""
    route = f"{base}/{how}"
    server.routes[route] = server.routes[base]
    return route


def _check_sent(server: _Server, route: str, *, stream: bool) -> dict[str, Any]:
    """The one request the route got: its path and headers; returns its body."""
    seen = server.requests_to(route)
    assert len(seen) == 1
    path, headers, body = seen[0]
    assert path == f"/{route}{RESPONSES_PATH}"
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == ("text/event-stream" if stream else "application/json")
    assert body.get("stream", False) is stream
    return body


# Replay over the socket

CALLS = ["chat", "achat", "chat_stream", "achat_stream"]


def _replay_request(case: Case) -> ChatRequest:
    """The equivalent of the recorded request; a plain one where none was recorded."""
    if case.request_body is not None:
        body = case.request_body
        if case.key in REFUSED_WHEN_MADE:  # (the request without what allama refuses)
            body = {k: v for k, v in body.items() if k != REFUSED_WHEN_MADE[case.key]}
        try:
            return request_from_body(body).request
        except NoName:
            return ChatRequest(case.request_body["model"]).user("Hello")
    final = case.final or {}
    model = final.get("model")
    return ChatRequest(model if isinstance(model, str) and model else MODEL).user("Hello")


class _Failed(Exception):
    def __init__(self, error: Error, partial: ChatResponse | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.partial = partial


def _call_as(target: HttpProvider, request: ChatRequest, how: str) -> ChatResponse:
    """The response of one call, or `_Failed` with the error it raised and the stream's
    partial response (`None` when the call failed before a stream opened)."""

    async def run_async() -> ChatResponse:
        async with target:
            if how == "achat":
                return await target.achat(request)
            astream = await target.achat_stream(request)
            async with astream:
                try:
                    return await astream.response()
                except Error as error:
                    raise _Failed(error, astream.collector.partial_response()) from None

    try:
        if how.startswith("a"):
            return asyncio.run(run_async())
        with target:
            if how == "chat":
                return target.chat(request)
            with target.chat_stream(request) as sync_stream:
                try:
                    return sync_stream.response()
                except Error as error:
                    raise _Failed(error, sync_stream.collector.partial_response()) from None
    except Error as error:
        raise _Failed(error, None) from None


@pytest.mark.parametrize("how", CALLS)
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_recorded_case_through_the_provider(server: _Server, case: Case, how: str) -> None:
    route = _route(server, case.route, how)
    target = allama.provider(
        case.preset, api="responses", api_key=KEY, base_url=_base(server, route)
    )
    request = _replay_request(case)
    stream = how.endswith("stream")
    sent, _ = target._prepare(request, stream=stream)
    if case.is_error:
        with pytest.raises(_Failed) as caught:
            _call_as(target, request, how)
        check_error(caught.value.error, case, request.model, stream=stream)
        if stream and case.status < 400:
            # The events before the error were paid for: what they said stays readable.
            assert case.stream is not None
            partial = caught.value.partial
            assert partial is not None
            check(partial, read_stream(case.stream, request.model)[0], case.preset)
    else:
        answered = _call_as(target, request, how)
        check(answered, expected_of(case, request.model, stream=stream), case.preset)
    assert _check_sent(server, route, stream=stream) == sent.body
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
        # The server ends the body cleanly between two events, before the terminal one.
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
    assert error.retryable and error.provider == "openai"
    if cls is NetworkError:
        assert isinstance(error.__cause__, httpx2.TransportError)
    # What arrived stays readable, and is all there is.
    assert collector.error is error
    partial = collector.partial_response()
    assert partial.finish_reason is None and partial.usage is None
    text = partial.text() or ""
    assert "".join(_texts(events)) == text
    assert text and "".join(WORDS).startswith(text)
    if cls is IncompleteStreamError:
        assert text == "".join(WORDS)  # every text event before the cut was whole
    assert (partial.id, partial.model) == ("resp_text", MODEL)
    assert KEY not in repr(error) and KEY not in error.to_json()


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(
    ("route", "cls"),
    [("error-mid-stream", ServerError), ("failed-mid-stream", RateLimitedError)],
)
def test_an_error_inside_the_stream(
    server: _Server, route: str, cls: type[Error], flavour: str
) -> None:
    route = _route(server, route, flavour)
    events, collector, error = _stream_events(_provider(server, route), flavour)
    assert type(error) is cls
    assert error.retryable and error.status is None
    assert (error.provider, error.model) == ("openai", MODEL)
    # The text before the error came first; nothing after it was read.
    assert _texts(events) == list(WORDS)
    assert collector.partial_response().text() == "".join(WORDS)
    assert collector.error is error
    assert error.message not in str(error.as_log())


def _fail(target: HttpProvider, request: ChatRequest, how: str) -> Error:
    with pytest.raises(_Failed) as caught:
        _call_as(target, request, how)
    return caught.value.error


@pytest.mark.parametrize("how", CALLS)
def test_a_429_with_retry_after_and_rate_limit_headers(server: _Server, how: str) -> None:
    route = _route(server, "rate-limited", how)
    error = _fail(_provider(server, route), REQUEST, how)
    assert type(error) is RateLimitedError
    # The explicit `retry-after` wins over the moment the exhausted limit resets.
    assert error.retry_after == 7.0
    assert (error.status, error.retryable, error.request_id) == (429, True, "req_429")
    _check_sent(server, route, stream=how.endswith("stream"))


@pytest.mark.parametrize("how", CALLS)
def test_a_400_rejecting_the_schema(server: _Server, how: str) -> None:
    route = _route(server, "schema-rejected", how)
    schema: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    request = REQUEST.with_response_format(ResponseFormat.for_schema(schema, name="n"))
    error = _fail(_provider(server, route), request, how)
    assert isinstance(error, UnsupportedError)
    assert (error.field, error.stage) == (RequestField.RESPONSE_FORMAT, UnsupportedStage.PROVIDER)
    assert (error.status, error.retryable) == (400, False)
    sent = _check_sent(server, route, stream=how.endswith("stream"))
    assert sent["text"] == {
        "format": {"type": "json_schema", "name": "n", "schema": schema, "strict": True}
    }


@pytest.mark.parametrize("how", CALLS)
def test_the_key_reaches_the_server_and_nothing_else(server: _Server, how: str) -> None:
    route = _route(server, "auth-echo", how)
    target = _provider(server, route)
    assert KEY not in repr(target) and KEY not in str(target)
    error = _fail(target, REQUEST, how)
    assert type(error) is AuthenticationError and error.status == 401
    for view in (str(error), repr(error), str(error.as_log()), error.to_json(), error.message):
        assert KEY not in view
    assert error.context.body is not None and KEY not in error.context.body
    assert "Incorrect API key provided: <redacted>" in error.message
    # It did reach the server, in its own header and only there.
    seen = server.requests_to(route)
    assert len(seen) == 1
    _, headers, body = seen[0]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert [name for name, value in headers.items() if KEY in value] == ["authorization"]
    assert KEY not in json.dumps(body)


@pytest.mark.parametrize("how", CALLS)
def test_azure_over_its_v1_url(server: _Server, how: str) -> None:
    route = _route(server, "azure", how)
    target = allama.provider(
        "azure-openai", api="responses", api_key=KEY, endpoint=_base(server, route)
    )
    answered = _call_as(target, ChatRequest("my-gpt-4o").user("Hi"), how)
    assert answered.text() == "Hi from Azure" and answered.provider == "azure-openai"
    ((path, headers, body),) = server.requests_to(route)
    assert path == f"/{route}/openai/v1/responses"  # no deployment path, no `api-version`
    assert headers["api-key"] == KEY and "authorization" not in headers
    assert body["model"] == "my-gpt-4o"


# Extraction end to end


class City(BaseModel):
    city: str
    country: str
    population: int


TELL = ChatRequest(MODEL).user("Tell me about London")


def _extract(target: HttpProvider, tp: Any, request: ChatRequest, flavour: str) -> Any:
    if flavour == "async":
        return asyncio.run(allama.aextract(target, tp, request))
    return allama.extract(target, tp, request)


def _check_format(sent: dict[str, Any]) -> dict[str, Any]:
    assert "tools" not in sent and "tool_choice" not in sent
    fmt = sent["text"]["format"]
    assert (fmt["type"], fmt["strict"]) == ("json_schema", True)
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", fmt["name"])
    schema: dict[str, Any] = fmt["schema"]
    assert schema["additionalProperties"] is False
    return schema


def _check_city(schema: dict[str, Any]) -> None:
    assert schema["required"] == ["city", "country", "population"]
    assert schema["additionalProperties"] is False
    assert {name: spec["type"] for name, spec in schema["properties"].items()} == {
        "city": "string",
        "country": "string",
        "population": "integer",
    }


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_native_extraction_with_text_format_strict(server: _Server, flavour: str) -> None:
    route = _route(server, "extract-native", flavour)
    extracted = _extract(_provider(server, route), City, TELL, flavour)
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.NATIVE
    assert metadata.enforcement is SchemaEnforcement.EXACT
    assert (metadata.passes, metadata.auto_fallback, metadata.degradations) == (1, None, [])
    assert metadata.usage is not None
    assert (metadata.usage.input_tokens, metadata.usage.output_tokens) == (48, 12)
    _check_city(_check_format(_check_sent(server, route, stream=False)))


def test_native_extraction_asks_what_the_recording_asked(server: _Server) -> None:
    """The recording asked for a person with `text.format` (the OpenAI SDK's `parse`);
    extracting a pydantic `Person` asks for the very same format."""
    case = _named("openai_responses/json_schema_strict_parse")
    recorded = case.request_body
    assert recorded is not None

    class Person(BaseModel):
        name: str
        age: int

    route = "extract-person"
    server.routes[route] = lambda h: h.answer(_response([_message('{"name":"Alice","age":30}')]))
    request = ChatRequest(recorded["model"]).user(recorded["input"])
    extracted = allama.extract(_provider(server, route), Person, request)
    assert extracted.value == Person(name="Alice", age=30)
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    sent = _check_sent(server, route, stream=False)
    # The format's name is the extraction's own (`person`), which names the schema to the
    # model and constrains nothing.
    fmt = {**sent["text"]["format"], "name": recorded["text"]["format"]["name"]}
    assert {"format": fmt} == recorded["text"]
    assert normal({**sent, "text": recorded["text"]}) == normal(recorded)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_list_is_sent_wrapped_in_an_object_root(server: _Server, flavour: str) -> None:
    route = _route(server, "extract-list", flavour)
    request = ChatRequest(MODEL).user("Two capitals")
    extracted = _extract(_provider(server, route), list[City], request, flavour)
    assert extracted.value == [City.model_validate(LONDON), City.model_validate(PARIS)]
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.NATIVE and metadata.root_wrapped
    assert metadata.enforcement is SchemaEnforcement.EXACT
    schema = _check_format(_check_sent(server, route, stream=False))
    assert schema["required"] == ["value"] and schema["type"] == "object"
    assert schema["properties"]["value"]["type"] == "array"


def _check_forced_tool(sent: dict[str, Any]) -> None:
    assert "text" not in sent
    assert sent["tool_choice"] == {"type": "function", "name": EXTRACTION_TOOL}
    assert sent["parallel_tool_calls"] is False
    (tool,) = sent["tools"]
    assert (tool["type"], tool["name"], tool["strict"]) == ("function", EXTRACTION_TOOL, True)
    _check_city(tool["parameters"])


@pytest.mark.parametrize("how", CALLS)
def test_forced_tool_extraction(server: _Server, how: str) -> None:
    route = _route(server, "extract-tool", how)
    request = TELL.with_option(ExtractionMode.FORCED_TOOL)
    target = _provider(server, route)
    if how.endswith("stream"):

        async def run_async() -> Any:
            async with allama.aextract_stream(target, City, request) as astream:
                async for _ in astream:
                    pass
                return await astream.finish()

        if how == "achat_stream":
            extracted = asyncio.run(run_async())
        else:
            with allama.extract_stream(target, City, request) as stream:
                for _ in stream:
                    pass
                extracted = stream.finish()
    else:
        extracted = _extract(target, City, request, "async" if how == "achat" else "sync")
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL
    assert metadata.enforcement is SchemaEnforcement.EXACT
    assert metadata.passes == 1
    _check_forced_tool(_check_sent(server, route, stream=how.endswith("stream")))


def test_a_refusal_in_place_of_the_answer_is_a_refusal(server: _Server) -> None:
    with pytest.raises(RefusedError) as caught:
        allama.extract(_provider(server, "extract-refused"), City, TELL)
    assert caught.value.text == "I can't help with that."
    assert "I can't help" not in str(caught.value.as_log())


def test_a_schema_the_endpoint_rejects_falls_back_after_its_400(server: _Server) -> None:
    """An endpoint that does not say what it enforces: native output is a guess, its 400 on
    the schema costs nothing, and the forced tool is asked next."""
    route = "extract-rejected"
    target = _provider(server, route, name="openai-compatible")
    extracted = allama.extract(target, City, ChatRequest("house-model").user("London"))
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL
    assert metadata.auto_fallback is not None
    assert metadata.auto_fallback.stage is UnsupportedStage.PROVIDER
    assert metadata.passes == 1
    first, second = (body for _, _, body in server.requests_to(route))
    assert "text" in first and "tools" not in first
    assert "text" not in second and second["tools"][0]["name"] == EXTRACTION_TOOL


class Report(BaseModel):
    title: str
    tags: list[str]
    score: int


REPORT = {"title": "Quarterly", "tags": ["sales", "eu"], "score": 7}


def _json_stream(text: str) -> bytes:
    """A text answer streamed in small pieces, as typed events."""
    message = _message(text)
    head = [
        {"type": "response.created", "response": {"id": "resp_json", "model": MODEL}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**message, "content": [], "status": "in_progress"},
        },
    ]
    deltas = [
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_local",
            "delta": piece,
        }
        for piece in pieces(text, 12)
    ]
    tail = [
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": "response.completed", "response": _response([message], id="resp_json")},
    ]
    return sse(*head, *deltas, *tail)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_extract_stream_gives_typed_partials(server: _Server, flavour: str) -> None:
    route = f"extract-stream/{flavour}"
    text = json.dumps(REPORT)
    server.routes[route] = lambda h: h.send_stream(_json_stream(text))
    target = _provider(server, route)
    request = ChatRequest(MODEL).user("Report")
    partials: list[Report] = []

    def keep(value: Report | None) -> None:
        if value is not None and (not partials or value != partials[-1]):
            partials.append(value)

    if flavour == "async":

        async def run_async() -> Any:
            async with allama.aextract_stream(target, Report, request) as astream:
                async for _ in astream:
                    keep(astream.partial)
                return await astream.finish()

        extracted = asyncio.run(run_async())
    else:
        with allama.extract_stream(target, Report, request) as stream:
            for _ in stream:
                keep(stream.partial)
            extracted = stream.finish()
    final = Report.model_validate(REPORT)
    assert extracted.value == final
    # Each partial value is a `Report` whose fields, as far as they arrived, have their types.
    assert len(partials) >= 3 and partials[-1] == final
    for partial in partials:
        assert isinstance(partial, Report)
        for name in partial.model_fields_set:
            if name == "title":
                assert isinstance(partial.title, str) and "Quarterly".startswith(partial.title)
            elif name == "tags":
                assert all(isinstance(tag, str) for tag in partial.tags)
            else:
                assert type(partial.score) is int
    assert any(p.tags == ["sales"] for p in partials if "tags" in p.model_fields_set)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.NATIVE
    assert metadata.enforcement is SchemaEnforcement.EXACT and metadata.passes == 1
    sent = _check_sent(server, route, stream=True)
    assert sent["text"]["format"]["strict"] is True
