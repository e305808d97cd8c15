"""Replay of recorded traffic for the OpenAI-compatible family.

Reads every case under `ALLAMA_CORPUS_DIR` (default `../shared/corpus/cases` next to the
repository) whose provider speaks Chat Completions. Expectations are read from the
recording itself, independently of the adapter: the text, tool calls, finish reason and
usage a response holds; the error class (and `retry_after`) an error maps to; the same
response from a stream however its bytes are split; and, where the request body was
recorded, the same body from encoding the equivalent `ChatRequest`.

The reading assumes only what the wire format promises, not what the shared recordings
happen to contain: any number of choices (the first one, `index` 0, is the response), a
choice without a message (a content filter), tool-call deltas with or without `index` and
`id`, the deprecated `function_call`, SSE events whose data spans several lines, and
`developer` messages. A few synthetic recordings of those shapes run with the corpus.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import allama
from allama.adapters.openai_compat._decode import decode_response
from allama.adapters.openai_compat._sse import ChatStreamDecoder, decode_stream
from allama.errors import (
    AuthenticationError,
    ContextWindowExceededError,
    Error,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    RejectedOutputError,
    ServerError,
    UnsupportedError,
)
from allama.providers import provider
from allama.stream import StreamCollector
from allama.types import (
    AssistantMessage,
    ChatRequest,
    ChatResponse,
    DeveloperMessage,
    ImagePart,
    Message,
    RequestField,
    ResponseFormat,
    StreamEvent,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    ToolMessage,
    UnsupportedStage,
    UserMessage,
    WarningKind,
)

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))
CORPUS_IS_DEFAULT = CORPUS.resolve() == DEFAULT_CORPUS.resolve()

PRESET_OF = {
    "openai": "openai",
    "azure_openai": "azure-openai",
    "groq": "groq",
    "xai": "xai",
    "mistral": "mistral",
    "openrouter": "openrouter",
    "deepseek": "deepseek",
    "together": "together",
    "fireworks": "fireworks",
    "deepinfra": "deepinfra",
    "vllm": "vllm",
    "ollama": "ollama-openai",
    "workers_ai": "workers-ai",
    "cerebras": "openai-compatible",
    "huggingface_router": "openai-compatible",
}
REASONING_OUTSIDE_COMPLETION = {"xai"}

# A few recorded errors, checked by name as well: a changed mapping shows up here first.
KNOWN_ERRORS: dict[str, type[Error]] = {
    "azure_openai/foundry_models_429_retry_after": RateLimitedError,
    "groq/error_in_stream_tool_use_failed": RejectedOutputError,
    "openai/error_400_invalid_json_schema_from_issue": UnsupportedError,
    "openrouter/error_400_context_length": ContextWindowExceededError,
    "xai/error_400_invalid_api_key": AuthenticationError,
}


@dataclass(frozen=True)
class Case:
    key: str
    data: dict[str, Any]

    @property
    def provider(self) -> str:
        return str(self.data["provider"])

    @property
    def preset(self) -> str:
        """The preset that speaks to the recorded endpoint."""
        if self.provider == "azure_openai" and str(self.data.get("endpoint", "")).startswith(
            "/models/"
        ):
            return "azure-foundry"  # Azure AI Foundry's model-inference endpoint
        return PRESET_OF[self.provider]

    @property
    def stream(self) -> bytes | None:
        raw = self.data.get("stream")
        return raw.encode() if isinstance(raw, str) else None

    @property
    def body(self) -> str:
        if self.data.get("response_body") is not None:
            return json.dumps(self.data["response_body"])
        return str(self.data.get("response_text") or "")

    @property
    def is_error(self) -> bool:
        return int(self.data["status"]) >= 400 or "in_stream_error" in self.data.get("tags", [])


def _load() -> list[Case]:
    if not CORPUS.is_dir():
        return []
    cases = []
    for path in sorted(CORPUS.glob("*/*.json")):
        if path.parent.name not in PRESET_OF:
            continue
        data = json.loads(path.read_text())
        if not str(data.get("endpoint", "")).endswith("chat/completions"):
            continue
        cases.append(Case(f"{path.parent.name}/{path.stem}", data))
    return cases


CORPUS_CASES = _load()


def _named(cases: list[Case], key: str) -> Case:
    """A case by name; skips when the corpus in use does not have it."""
    for case in cases:
        if case.key == key:
            return case
    pytest.skip(f"{key} is not in {CORPUS}")


def _ids(cases: list[Case]) -> list[str]:
    return [case.key for case in cases]


def _sse(*payloads: Any) -> str:
    return "".join(f"data: {json.dumps(p) if not isinstance(p, str) else p}\n\n" for p in payloads)


def _synthetic(key: str, **data: Any) -> Case:
    """A recording of a shape the wire format allows, written here rather than captured."""
    base: dict[str, Any] = {
        "endpoint": "/v1/chat/completions",
        "status": 200,
        "response_headers": {},
        "tags": ["synthetic"],
    }
    return Case(f"synthetic/{key}", {**base, **data})


_USAGE = {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
_DEVELOPER_REQUEST = {
    "model": "gpt-4o",
    "messages": [
        {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
        {"role": "user", "content": "Hello"},
    ],
}

SYNTHETIC = [
    _synthetic(
        "two_choices_second_listed_first",
        provider="openai",
        request_body={**_DEVELOPER_REQUEST, "n": 2},
        response_body={
            "id": "chatcmpl-n2",
            "choices": [
                {"index": 1, "message": {"content": "Bonjour !"}, "finish_reason": "stop"},
                {"index": 0, "message": {"content": "Salut."}, "finish_reason": "length"},
            ],
            "usage": _USAGE,
        },
    ),
    _synthetic(
        "developer_role_where_it_becomes_system",
        provider="mistral",
        request_body={**_DEVELOPER_REQUEST, "model": "mistral-small-latest"},
        response_body={
            "id": "m-1",
            "choices": [{"index": 0, "message": {"content": "Bonjour"}, "finish_reason": "stop"}],
        },
    ),
    _synthetic(
        "filtered_choice_without_message",
        provider="azure_openai",
        response_body={
            "id": "chatcmpl-f",
            "choices": [{"index": 0, "finish_reason": "content_filter"}],
            "usage": _USAGE,
        },
    ),
    _synthetic(
        "legacy_function_call_and_an_id_less_tool_call",
        provider="openai",
        response_body={
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "content": None,
                        "tool_calls": [{"function": {"name": "a", "arguments": "{}"}}],
                        "function_call": {"name": "b", "arguments": '{"x": 1}'},
                    },
                    "finish_reason": "function_call",
                }
            ]
        },
    ),
    _synthetic(
        "stream_tool_deltas_without_index",
        provider="openai",
        stream=_sse(
            {"id": "c1", "choices": [{"delta": {"role": "assistant", "content": None}}]},
            {
                "id": "c1",
                "choices": [
                    {
                        "delta": {
                            "tool_calls": [
                                {"id": "call_a", "function": {"name": "a", "arguments": ""}}
                            ]
                        }
                    }
                ],
            },
            {
                "id": "c1",
                "choices": [{"delta": {"tool_calls": [{"function": {"arguments": '{"k"'}}]}}],
            },
            {
                "id": "c1",
                "choices": [{"delta": {"tool_calls": [{"function": {"arguments": ": 1}"}}]}}],
            },
            {
                "id": "c1",
                "choices": [
                    {
                        "delta": {
                            "tool_calls": [
                                {"id": "call_b", "function": {"name": "b", "arguments": "[]"}}
                            ]
                        }
                    }
                ],
            },
            {"id": "c1", "choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
            {"id": "c1", "choices": [], "usage": _USAGE},
            "[DONE]",
        ),
    ),
    _synthetic(
        "stream_two_choices_interleaved_and_data_on_two_lines",
        provider="openai",
        stream=_sse(
            {"id": "c2", "choices": [{"index": 1, "delta": {"content": "Other "}}]},
            {"id": "c2", "choices": [{"index": 0, "delta": {"content": "First "}}]},
        )
        # One event whose JSON is split over two `data:` lines.
        + 'data: {"id": "c2", "choices": [{"index": 0,\n'
        + 'data:  "delta": {"content": "answer"}}]}\n\n'
        + _sse(
            {
                "id": "c2",
                "choices": [
                    {"index": 1, "delta": {}, "finish_reason": "length"},
                    {"index": 0, "delta": {}, "finish_reason": "stop"},
                ],
            },
            "[DONE]",
        ),
    ),
    _synthetic(
        "stream_legacy_function_call",
        provider="openai",
        stream=_sse(
            {"id": "c3", "choices": [{"index": 0, "delta": {"function_call": {"name": "f"}}}]},
            {
                "id": "c3",
                "choices": [{"index": 0, "delta": {"function_call": {"arguments": "{}"}}}],
            },
            {"id": "c3", "choices": [{"index": 0, "delta": {}, "finish_reason": "function_call"}]},
            "[DONE]",
        ),
    ),
]

CASES = CORPUS_CASES + SYNTHETIC
RESPONSES = [
    c for c in CASES if not c.is_error and c.stream is None and c.data.get("response_body")
]
STREAMS = [c for c in CASES if not c.is_error and c.stream is not None]
ERRORS = [c for c in CASES if c.is_error]
WITH_REQUESTS = [c for c in CASES if c.data.get("request_body")]


# Independent reading of the recordings

_FINISH = {
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


def _finish(raw: str | None, has_calls: bool) -> str | None:
    if not raw:
        # No finish reason, or xAI's empty one: the calls say what it was.
        return "tool_calls" if raw == "" and has_calls else None
    finish = _FINISH.get(raw, raw)
    # A normal stop with calls (OpenAI's answer to a named tool_choice) is a tool-call turn.
    return "tool_calls" if finish == "stop" and has_calls else finish


@dataclass
class Expected:
    text: str | None
    calls: list[tuple[str | None, str, str]]
    """(id, name, arguments); the id is `None` where the recording has none to compare."""
    finish: str | None
    input_tokens: int | None
    output_tokens: int | None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if p.get("type") == "text")
    return ""


def _usage(case: Case, usage: dict[str, Any] | None) -> tuple[int | None, int | None]:
    if not usage:
        return None, None
    output = usage.get("completion_tokens")
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    if case.provider in REASONING_OUTSIDE_COMPLETION and output is not None:
        output += reasoning
    return usage.get("prompt_tokens"), output


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _first_choice(choices: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The choice with `index` 0 (an absent index is 0), else the first listed."""
    return next((c for c in choices if c.get("index", 0) == 0), choices[0] if choices else None)


def expected_response(case: Case) -> Expected:
    body = case.data["response_body"]
    choice = _first_choice(body.get("choices") or []) or {}
    message = choice.get("message") or {}
    calls: list[tuple[str | None, str, str]] = [
        (call.get("id"), call["function"]["name"], _arguments(call["function"].get("arguments")))
        for call in message.get("tool_calls") or []
    ]
    legacy = message.get("function_call")
    if legacy:
        calls.append((None, legacy["name"], _arguments(legacy.get("arguments", ""))))
    return Expected(
        _text_of(message.get("content")) or None,
        calls,
        _finish(choice.get("finish_reason"), bool(calls)),
        *_usage(case, body.get("usage")),
    )


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
    assert case.stream is not None
    text: list[str] = []
    calls: list[list[Any]] = []  # [key, id, name, arguments] in order of appearance
    finish = None
    usage = None
    for data in _sse_data(case.stream.decode()):
        if data.strip() == "[DONE]":
            break
        chunk = json.loads(data)
        usage = chunk.get("usage") or (chunk.get("x_groq") or {}).get("usage") or usage
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text.append(_text_of(delta.get("content")))
            deltas = [(call, call.get("function") or {}) for call in delta.get("tool_calls") or []]
            if delta.get("function_call"):
                deltas.append(({"index": "function_call"}, delta["function_call"]))
            for call, function in deltas:
                # A delta belongs to the call of its index; without one, to the call of its
                # id; without either, to the call before it.
                key = ("index", call["index"]) if "index" in call else ("id", call.get("id"))
                entry = next((c for c in calls if c[0] == key), None)
                if entry is None and key[1] is None and calls:
                    entry = calls[-1]
                if entry is None:
                    entry = [key, None, "", ""]
                    calls.append(entry)
                entry[1] = entry[1] or call.get("id")
                entry[2] = entry[2] or function.get("name") or ""
                entry[3] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return Expected(
        "".join(text) or None,
        [(entry[1], entry[2], entry[3]) for entry in calls],
        _finish(finish, bool(calls)),
        *_usage(case, usage),
    )


def check(response: ChatResponse, expected: Expected) -> None:
    assert response.text() == expected.text
    got = response.tool_calls()
    assert [(c.name, c.arguments) for c in got] == [(n, a) for _, n, a in expected.calls]
    for call, (expected_id, _, _) in zip(got, expected.calls, strict=True):
        if expected_id is not None:
            assert call.id == expected_id
    # Every call has an id, recorded or made up, and no two share one.
    assert all(call.id for call in got) and len({call.id for call in got}) == len(got)
    assert response.finish_reason == expected.finish
    usage = response.usage
    assert (usage.input_tokens if usage else None) == expected.input_tokens
    assert (usage.output_tokens if usage else None) == expected.output_tokens


def collect(events: list[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def _outside(case: Case) -> bool:
    return case.provider in REASONING_OUTSIDE_COMPLETION


def test_the_harness_reads_the_shapes_the_wire_allows() -> None:
    """What the independent reading makes of the synthetic recordings, spelled out, so the
    harness and the adapter cannot agree on a wrong reading."""
    by_key = {case.key.removeprefix("synthetic/"): case for case in SYNTHETIC}
    assert expected_response(by_key["two_choices_second_listed_first"]) == Expected(
        "Salut.", [], "length", 9, 3
    )
    assert expected_response(by_key["filtered_choice_without_message"]) == Expected(
        None, [], "content_filter", 9, 3
    )
    assert expected_response(by_key["legacy_function_call_and_an_id_less_tool_call"]) == Expected(
        None, [(None, "a", "{}"), (None, "b", '{"x": 1}')], "tool_calls", None, None
    )
    assert expected_stream(by_key["stream_tool_deltas_without_index"]) == Expected(
        None, [("call_a", "a", '{"k": 1}'), ("call_b", "b", "[]")], "tool_calls", 9, 3
    )
    assert expected_stream(
        by_key["stream_two_choices_interleaved_and_data_on_two_lines"]
    ) == Expected("First answer", [], "stop", None, None)
    assert expected_stream(by_key["stream_legacy_function_call"]) == Expected(
        None, [(None, "f", "{}")], "tool_calls", None, None
    )
    recorded = by_key["developer_role_where_it_becomes_system"].data["request_body"]
    assert [m.role for m in request_from_body(recorded).messages] == ["developer", "user"]


# Responses


@pytest.mark.parametrize("case", RESPONSES, ids=_ids(RESPONSES))
def test_recorded_response_decodes(case: Case) -> None:
    response = decode_response(
        case.data["status"],
        case.data.get("response_headers") or {},
        case.body,
        provider=case.provider,
        reasoning_outside_completion=_outside(case),
    )
    check(response, expected_response(case))
    assert response.id == (case.data["response_body"].get("id") or None)


def test_refusal_is_a_refusal_block() -> None:
    case = _named(RESPONSES, "openai/refusal_strict_schema")
    response = decode_response(200, {}, case.body)
    refusal = case.data["response_body"]["choices"][0]["message"]["refusal"]
    assert response.first_refusal() == refusal
    assert response.text() is None


def test_reasoning_and_cached_tokens_reach_usage() -> None:
    case = _named(RESPONSES, "xai/parallel_tool_calls_2")
    response = decode_response(200, {}, case.body, reasoning_outside_completion=True)
    assert response.usage is not None
    assert (response.usage.reasoning_tokens, response.usage.cache_read_tokens) == (211, 128)
    assert response.usage.total_tokens == case.data["response_body"]["usage"]["total_tokens"]


# Streams


def _decode_whole(case: Case) -> ChatResponse:
    assert case.stream is not None
    return collect(
        decode_stream(
            case.stream, provider=case.provider, reasoning_outside_completion=_outside(case)
        )
    )


@pytest.mark.parametrize("case", STREAMS, ids=_ids(STREAMS))
def test_recorded_stream_decodes(case: Case) -> None:
    check(_decode_whole(case), expected_stream(case))


@pytest.mark.parametrize("case", STREAMS, ids=_ids(STREAMS))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_recorded_stream_any_chunking(case: Case, data: st.DataObject) -> None:
    assert case.stream is not None
    raw = case.stream
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=30), label="cuts"))
    decoder = ChatStreamDecoder(provider=case.provider, reasoning_outside_completion=_outside(case))
    events: list[StreamEvent] = []
    last = 0
    for cut in [*cuts, len(raw)]:
        events.extend(decoder.feed(raw[last:cut]))
        last = cut
    events.extend(decoder.close())
    assert collect(events) == _decode_whole(case)


# Errors


def _error_of(case: Case) -> Error:
    with pytest.raises(Error) as caught:
        if case.stream is not None and case.data["status"] < 400:
            decode_stream(case.stream, provider=case.provider)
        else:
            decode_response(
                case.data["status"],
                case.data.get("response_headers") or {},
                case.body,
                provider=case.provider,
            )
    return caught.value


def expected_error(case: Case) -> type[Error]:
    """The class a recorded error stands for, from its tags and status alone."""
    tags = set(case.data.get("tags", []))
    status = int(case.data["status"])
    if "invalid_schema" in tags:
        return UnsupportedError
    if "auth_error" in tags or status == 401:
        return AuthenticationError
    if status == 429 or "rate_limit" in tags:
        return RateLimitedError
    if "context_length" in tags:
        return ContextWindowExceededError
    if status == 404:
        return NotFoundError
    if status == 403:
        return PermissionDeniedError
    if status >= 500:
        return ServerError
    body = case.data.get("response_body")
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    stream = str(case.data.get("stream", ""))
    if code in REFUSED_OUTPUT or any(f'"code":"{code}"' in stream for code in REFUSED_OUTPUT):
        return RejectedOutputError  # the model's output Groq's check refused
    return InvalidRequestError


REFUSED_OUTPUT = ("tool_use_failed", "json_validate_failed")
"""Groq's codes for a model output its own check refused."""


def expected_retry_after(case: Case) -> float | None:
    headers = {k.lower(): v for k, v in (case.data.get("response_headers") or {}).items()}
    waits = [float(headers["retry-after"])] if "retry-after" in headers else []
    if "retry-after-ms" in headers:
        waits.append(float(headers["retry-after-ms"]) / 1000)
    return max(waits) if waits else None


def test_known_errors_are_in_the_corpus() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"the recorded traffic is not at {CORPUS} (set ALLAMA_CORPUS_DIR)")
    if CORPUS_IS_DEFAULT:
        assert set(KNOWN_ERRORS) <= {c.key for c in ERRORS}


@pytest.mark.parametrize("case", ERRORS, ids=_ids(ERRORS))
def test_recorded_error_maps_to_its_class(case: Case) -> None:
    cls = expected_error(case)
    assert KNOWN_ERRORS.get(case.key, cls) is cls
    error = _error_of(case)
    assert isinstance(error, cls) if cls is ServerError else type(error) is cls
    assert error.retry_after == (expected_retry_after(case) if cls is RateLimitedError else None)
    assert error.provider == case.provider
    if case.data["status"] >= 400:
        assert error.status == case.data["status"]
    # The provider's words stay out of the log view.
    assert error.message not in str(error.as_log())


def test_rejected_schema_is_unsupported_by_the_provider() -> None:
    case = _named(ERRORS, "openai/error_400_invalid_json_schema_from_issue")
    error = _error_of(case)
    assert isinstance(error, UnsupportedError)
    assert (error.field, error.stage) == (RequestField.RESPONSE_FORMAT, UnsupportedStage.PROVIDER)


# Requests


class Inexpressible(Exception):
    """A recorded request uses wire features allama does not write (the deprecated
    `function` role and `functions` list, audio or file parts)."""


def _message(raw: dict[str, Any]) -> Message:
    role = raw["role"]
    content = raw.get("content")
    if role == "system":
        return SystemMessage(content=_text_of(content))
    if role == "developer":
        return DeveloperMessage(content=_text_of(content))
    if role == "user":
        if isinstance(content, str):
            return UserMessage(content=(TextPart(text=content),))
        parts: list[TextPart | ImagePart] = []
        for part in content:
            if part["type"] == "text":
                parts.append(TextPart(text=part["text"]))
            elif part["type"] == "image_url":
                parts.append(ImagePart(url=part["image_url"]["url"]))
            else:
                raise Inexpressible(f"a user content part of type {part['type']!r}")
        return UserMessage(content=tuple(parts))
    if role not in ("tool", "assistant"):
        raise Inexpressible(f"a message with role {role!r}")
    if role == "tool":
        return ToolMessage(tool_call_id=raw["tool_call_id"], content=_text_of(content))
    blocks: list[TextPart | ToolCall] = []
    if _text_of(content):
        blocks.append(TextPart(text=_text_of(content)))
    for call in raw.get("tool_calls") or []:
        function = call["function"]
        blocks.append(
            ToolCall(id=call["id"], name=function["name"], arguments=function["arguments"])
        )
    return AssistantMessage(content=tuple(blocks))


def _tool_choice(raw: Any) -> ToolChoice | None:
    if raw is None:
        return None
    if isinstance(raw, dict):
        return ToolChoice.tool(raw["function"]["name"])
    return ToolChoice.required() if raw == "any" else ToolChoice(mode=raw)


def request_from_body(body: dict[str, Any]) -> ChatRequest:
    for legacy in ("functions", "function_call"):
        if legacy in body:
            raise Inexpressible(f"the deprecated `{legacy}` request field")
    tools = [
        ToolDefinition(
            name=t["function"]["name"],
            parameters=t["function"].get("parameters") or {"type": "object"},
            description=t["function"].get("description"),
            strict=t["function"].get("strict"),
        )
        for t in body.get("tools") or []
    ]
    fmt = body.get("response_format")
    response_format = None
    if fmt and fmt["type"] == "json_object":
        response_format = ResponseFormat.json_object()
    elif fmt and fmt["type"] == "json_schema":
        spec = fmt["json_schema"]
        response_format = ResponseFormat.for_schema(
            spec["schema"], name=spec.get("name"), strict=spec.get("strict")
        )
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    return ChatRequest(
        body["model"],
        messages=tuple(_message(m) for m in body["messages"]),
        tools=tuple(tools),
        tool_choice=_tool_choice(body.get("tool_choice")),
        response_format=response_format,
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        max_output_tokens=limit,
        reasoning_effort=body.get("reasoning_effort"),
    )


def _normal_messages(
    messages: list[dict[str, Any]], *, developer_role: bool = True
) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and all(p.get("type") == "text" for p in content):
            content = _text_of(content)
        calls = [
            (c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in m.get("tool_calls") or []
        ]
        role = m["role"]
        if role == "developer" and not developer_role:
            role = "system"  # where the endpoint has no developer role, it is sent as system
        out.append(
            {
                "role": role,
                "content": content or None,
                "calls": calls,
                "id": m.get("tool_call_id"),
            }
        )
    return out


def _normal_tools(body: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (
            t["function"]["name"],
            None if t["function"].get("strict") else t["function"].get("parameters"),
        )
        for t in body.get("tools") or []
    ]


def _normal_format(body: dict[str, Any]) -> Any:
    fmt = body.get("response_format")
    if not fmt:
        return None
    spec = fmt.get("json_schema") or {}
    strict = bool(spec.get("strict"))
    return (fmt["type"], spec.get("name"), strict, None if strict else spec.get("schema"))


@pytest.mark.parametrize("case", WITH_REQUESTS, ids=_ids(WITH_REQUESTS))
def test_equivalent_request_encodes_to_an_equivalent_body(case: Case) -> None:
    recorded = case.data["request_body"]
    stream = bool(recorded.get("stream"))
    try:
        request = request_from_body(recorded)
    except Inexpressible as why:
        pytest.skip(f"the recording uses {why}, which allama does not write")
    target = provider(case.preset, api_key="sk-test", base_url="http://127.0.0.1:9")
    degradations = allama.Degradations(target.name, allama.UnsupportedPolicy.WARN)
    encoded = target._encode(
        request,
        degradations,
        stream=stream,
        url="http://127.0.0.1:9/chat/completions",
        headers={},
        params={},
    ).body
    assert encoded["model"] == recorded["model"]
    developer_role = target.preset.profile.developer_role
    assert _normal_messages(encoded["messages"]) == _normal_messages(
        recorded["messages"], developer_role=developer_role
    )
    assert _normal_tools(encoded) == _normal_tools(recorded)
    assert encoded.get("tool_choice") == recorded.get("tool_choice")
    assert _normal_format(encoded) == _normal_format(recorded)
    assert encoded.get("stream", False) == stream
    limit = recorded.get("max_completion_tokens") or recorded.get("max_tokens")
    token_field = target.preset.profile.token_field
    assert encoded.get(token_field) == limit
    for key in ("temperature", "top_p", "reasoning_effort"):
        assert encoded.get(key) == recorded.get(key)
    # Recorded requests were accepted as sent: nothing in them is refused.
    assert [w for w in degradations.warnings if w.kind is WarningKind.UNSUPPORTED] == []
