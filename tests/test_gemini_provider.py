"""The Gemini provider end to end, over real sockets on 127.0.0.1.

A local HTTP server answers every recorded Gemini case under `ALLAMA_CORPUS_DIR` (default
`../shared/corpus/cases` next to the repository): the cases of its `gemini/` folder, and
those of any other folder whose endpoint is a `:generateContent` or `:streamGenerateContent`
one. It sends each one's status, its recorded headers and its body, or its stream in small
chunks (chunked transfer encoding), and the provider asks it the equivalent of the recorded
request, sync and async: `allama.provider("vertex-gemini", access_token=...)` for a Vertex
recording (an endpoint under `/projects/`), `allama.provider("gemini", api_key=...)`
otherwise. Each recorded stream is also served as a streamed JSON array (what the endpoint
answers without `alt=sse`). Expectations are read from the recording alone: the text, the
tool calls, the finish reason (a content filter or a blocked prompt with the provider's
explanation), the usage and the model of a response; the class, status and `retry_after` of
an error. The reading assumes only what the wire format promises: counts are omitted when
zero, `modelVersion`, `index`, call ids and parts may be missing, and parts, fields and
finish reasons may be of kinds nobody knows yet.

Where the request body was recorded, the equivalent `ChatRequest` must encode to it; the
differences allama makes on purpose are spelled out where the bodies are normalised.

Then what the recordings do not show: streams cut mid-way, an error object in the middle of
a stream, 429, 503 and schema-rejecting 400 answers, the key and token kept out of errors;
and extraction end to end. The decoder-level replay (any chunking, either framing, every
part kind) is in `test_gemini_decode.py`.
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
from pydantic import BaseModel, Field

import allama
from _replay_server import (
    CORPUS,
    CORPUS_IS_DEFAULT,
    ReplayServer,
    ReplyHandler,
)
from _replay_server import pieces as _pieces
from allama.adapters.gemini import THINKING_BUDGETS
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
from allama.extract import (
    EXTRACTION_TOOL,
    ExtractionMetadata,
    ExtractionMode,
    RefusalSource,
    RefusedError,
    SchemaEnforcement,
)
from allama.providers import HttpProvider
from allama.types import (
    AssistantMessage,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ContentBlock,
    DocumentPart,
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
from allama.wrappers import CapabilityOverrideProvider

KEY = "AIzaSy-SECRET-test-key-4242"
TOKEN = "ya29.SECRET-test-token-4242"
PROJECT = "test-project"
"""Stands in for the `<project>` the corpus puts in Vertex endpoints."""
MODEL = "gemini-2.5-flash"
API = "/v1beta"
VERTEX_PREFIX = f"/v1/projects/{PROJECT}/locations/us-central1/publishers/google"
GENERATE = ":generateContent"
STREAM = ":streamGenerateContent"


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
    def endpoint(self) -> str:
        return str(self.data.get("endpoint") or "").split("?")[0]

    @property
    def streamed(self) -> bool:
        """Whether the call was a streamed one: Gemini says so in the URL alone."""
        return self.endpoint.endswith(STREAM)

    @property
    def vertex(self) -> bool:
        return "/projects/" in self.endpoint

    @property
    def model(self) -> str:
        """The model the recorded call asked for, from its URL (`.../models/{model}:...`)."""
        return self.endpoint.rsplit("/models/", 1)[1].rsplit(":", 1)[0]

    @property
    def prefix(self) -> str:
        """The recorded path before `/models/`: the API version and, on Vertex, the project,
        location and publisher."""
        return self.endpoint.rsplit("/models/", 1)[0].replace("<project>", PROJECT)

    @property
    def location(self) -> str | None:
        found = re.search(r"/locations/([^/]+)/", self.prefix)
        return found.group(1) if found else None

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
        gemini = endpoint.endswith((GENERATE, STREAM))
        if path.parent.name == "gemini" or gemini:
            cases.append(Case(f"{path.parent.name}/{path.stem}", data))
    return cases


def _sse(*chunks: dict[str, Any] | str) -> str:
    """Chunks framed as `alt=sse` frames them; a string is sent as it is (a raw line)."""
    return "".join(
        chunk if isinstance(chunk, str) else f"data: {json.dumps(chunk)}\r\n\r\n"
        for chunk in chunks
    )


def _raw_error(code: int, status: str, message: str) -> str:
    """An error object as Gemini writes it in the middle of an SSE stream: pretty-printed
    JSON on lines of their own, outside any `data:` line."""
    payload = {"error": {"code": code, "message": message, "status": status}}
    return json.dumps(payload, indent=2) + "\n"


def _synthetic(key: str, *, model: str = MODEL, **data: Any) -> Case:
    """A recording of a shape the wire format allows, written here rather than captured;
    one with a `stream` is a streamed call."""
    stream = "stream" in data
    base: dict[str, Any] = {
        "provider": "gemini",
        "endpoint": f"{API}/models/{model}{STREAM if stream else GENERATE}",
        "status": 200,
        "response_headers": {"content-type": "application/json; charset=UTF-8"},
        "tags": ["synthetic"],
    }
    if stream:
        base["query"] = "alt=sse"
        base["response_headers"] = {"content-type": "text/event-stream"}
    return Case(f"synthetic/{key}", {**base, **data})


def _rpc(kind: str, **fields: Any) -> dict[str, Any]:
    return {"@type": f"type.googleapis.com/google.rpc.{kind}", **fields}


def _google_error(code: int, status: str, message: str, *details: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return {"error": error}


def _quota(quota_id: str, delay: str | None) -> list[dict[str, Any]]:
    details = [
        _rpc(
            "QuotaFailure",
            violations=[
                {
                    "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                    "quotaId": quota_id,
                    "quotaDimensions": {"model": MODEL, "location": "global"},
                    "quotaValue": "10",
                }
            ],
        )
    ]
    if delay is not None:
        details.append(_rpc("RetryInfo", retryDelay=delay))
    return details


TOO_MANY_STATES = (
    "The specified schema produces a constraint that has too many states for serving. "
    "Typical causes of this error are schemas with lots of text (for example, very long "
    "property or enum names), schemas with long array length limits (especially when "
    "nested), or schemas using complex value matchers (for example, integers or numbers "
    "with minimum/maximum bounds or strings with complex formats like date-time)"
)

_IMAGE = (  # a PNG of one pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
    "AAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
_SIG = "CtICAdHtim9BiyFrJTR8wDY7/ya4zvN0E7f/NCDBmJdBIPp4X8Gl=="
_SIG2 = "EsgFCsUFAXLI2nx+second/signature=="
_SIG3 = "Ev0BCvoBAXLI2nx+third/signature=="
_WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
_ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "sources": {"type": "array", "items": {}}},
    "required": ["answer"],
    "additionalProperties": False,
}


def _candidate(parts: list[dict[str, Any]], finish: str | None = "STOP", **more: Any) -> Any:
    out: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, **more}
    if finish is not None:
        out["finishReason"] = finish
    return out


SYNTHETIC = [
    _synthetic(
        # No usage, no model version, no content type; a second candidate without an index
        # before the one with index 0; parts and fields nobody knows yet; calls without ids.
        "body_without_usage_with_other_candidates_and_unknown_parts",
        response_headers={},
        response_body={
            "candidates": [
                {
                    "content": {"parts": [{"text": "the other candidate"}], "role": "model"},
                    "finishReason": "STOP",
                    "index": 1,
                },
                _candidate(
                    [
                        {"text": "Looking", "brandNewFlag": True},
                        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                        {"text": " it up."},
                        {"functionCall": {"name": "lookup", "args": {"q": "Zürich", "n": [1]}}},
                        {"functionCall": {"name": "lookup"}},
                        {"videoMetadata": {"fps": 2}},
                    ],
                    index=0,
                    groundingMetadata={"webSearchQueries": ["x"]},
                ),
            ],
            "brandNewTopLevelField": {"x": [1, 2]},
        },
    ),
    _synthetic(
        "finish_safety_with_its_message",
        response_body={
            "candidates": [
                _candidate(
                    [{"text": "Here is a partial"}],
                    "PROHIBITED_CONTENT",
                    finishMessage="The response was blocked for prohibited content.",
                    index=0,
                )
            ],
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
            "modelVersion": "gemini-2.5-flash-001",
        },
    ),
    _synthetic(
        # The Developer API says why it blocked a prompt only by its reason.
        "prompt_blocked_without_a_message",
        response_body={
            "promptFeedback": {
                "blockReason": "PROHIBITED_CONTENT",
                "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH"}],
            },
            "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
            "modelVersion": "gemini-2.5-flash",
        },
    ),
    _synthetic(
        # A stream that is blocked in its first chunk, and cached input reported in usage.
        "stream_prompt_blocked",
        stream=_sse(
            {
                "promptFeedback": {"blockReason": "SAFETY"},
                "usageMetadata": {
                    "promptTokenCount": 40,
                    "cachedContentTokenCount": 32,
                    "totalTokenCount": 40,
                },
                "modelVersion": "gemini-2.5-flash",
                "responseId": "resp_blocked",
            }
        ),
    ),
    _synthetic(
        # Text, then Gemini's error object on raw lines of its own, then what the server
        # never gets to send.
        "stream_unavailable_after_text",
        tags=["synthetic", "in_stream_error"],
        stream=_sse(
            {
                "candidates": [_candidate([{"text": "Half an "}], None, index=0)],
                "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7},
                "modelVersion": "gemini-2.5-flash",
            },
            {"candidates": [_candidate([{"text": "answer"}], None, index=0)]},
        )
        + _raw_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
        + _sse({"candidates": [_candidate([{"text": " never read"}], index=0)]}),
    ),
    _synthetic(
        "error_429_per_minute_with_retry_delay",
        status=429,
        response_body=_google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota. Please retry in 37.2s.",
            *_quota("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "37s"),
        ),
    ),
    _synthetic(
        "error_429_per_day_quota",
        status=429,
        response_body=_google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            *_quota("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "20s"),
        ),
    ),
    _synthetic(
        # Vertex's short form: no details at all, a `retry-after` header.
        "error_429_vertex_without_details",
        status=429,
        endpoint=f"/v1/projects/<project>/locations/us-central1/publishers/google/models/{MODEL}"
        f"{GENERATE}",
        response_headers={"content-type": "application/json", "retry-after": "12"},
        response_body=_google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "Resource exhausted. Please try again later. Please refer to https://cloud.google"
            ".com/vertex-ai/generative-ai/docs/error-code-429 for more details.",
        ),
    ),
    _synthetic(
        "error_503_unavailable",
        status=503,
        response_body=_google_error(
            503, "UNAVAILABLE", "The model is overloaded. Please try again later."
        ),
    ),
    _synthetic(
        "error_503_not_json",
        status=503,
        response_headers={"content-type": "text/html"},
        response_text="<html><body>Service Unavailable</body></html>",
    ),
    _synthetic(
        # Its words name no field: the error is put on the one that carried a schema.
        "error_400_too_many_states",
        status=400,
        tags=["synthetic", "invalid_schema"],
        request_body={
            "contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseJsonSchema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        },
        response_body=_google_error(400, "INVALID_ARGUMENT", TOO_MANY_STATES),
    ),
    _synthetic(
        # A streamed call refused before it streams, with the error object wrapped in a
        # one-element array (as the endpoint answers without `alt=sse`).
        "error_403_stream_wrapped_in_an_array",
        status=403,
        endpoint=f"{API}/models/{MODEL}{STREAM}",
        response_body=[
            _google_error(403, "PERMISSION_DENIED", "The caller does not have permission")
        ],
    ),
    _synthetic(
        "error_404_model_not_found",
        status=404,
        response_body=_google_error(
            404,
            "NOT_FOUND",
            "models/gemini-0-nope is not found for API version v1beta, or is not supported "
            "for generateContent.",
        ),
    ),
    _synthetic(
        # A request with every shape the harness maps: system parts, inline and file data,
        # a signed thought, signed and unsigned calls (with and without ids) and their
        # results, declarations in both schema forms, sampling, stop sequences, a seed, a
        # response schema, a thinking level, and fields allama has no name for.
        "request_with_every_shape",
        model="gemini-3-flash-preview",
        request_body={
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"text": "What is in these?"},
                        {"inlineData": {"mimeType": "image/png", "data": _IMAGE}},
                        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/r.pdf"}},
                        {
                            "fileData": {
                                "fileUri": "https://example.com/a.jpg",
                                "mimeType": "image/jpeg",
                            }
                        },
                    ],
                },
                {
                    "role": "model",
                    "parts": [
                        {"text": "Two images.", "thought": True, "thoughtSignature": _SIG},
                        {"text": "Let me check the weather there."},
                        {
                            "functionCall": {
                                "id": "fc_1",
                                "name": "get_weather",
                                "args": {"city": "Paris"},
                            },
                            "thoughtSignature": _SIG2,
                        },
                        {"functionCall": {"name": "get_weather", "args": {"city": "Zürich"}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "id": "fc_1",
                                "name": "get_weather",
                                "response": {"output": "Sunny"},
                            }
                        },
                        {
                            "functionResponse": {
                                "name": "get_weather",
                                "response": {"error": "no such city"},
                            }
                        },
                    ],
                },
                # What the user says after the results goes apart from them: Gemini answers
                # 400 to a function-response content that holds text.
                {"role": "user", "parts": [{"text": "And now?"}]},
                {
                    "role": "model",
                    # Gemini 3 may end a turn with a signature on an empty text part.
                    "parts": [{"text": "Paris is sunny."}, {"text": "", "thoughtSignature": _SIG3}],
                },
                {"role": "user", "parts": [{"text": "Thanks."}]},
            ],
            "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Cite."}]},
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "get_weather",
                            "description": "The weather in a city.",
                            "parametersJsonSchema": _WEATHER,
                        },
                        {
                            "name": "noop",
                            "parameters": {
                                "type": "OBJECT",
                                "properties": {
                                    "verbose": {"type": "BOOLEAN", "nullable": True},
                                    "level": {"type": "INTEGER"},
                                },
                                "property_ordering": ["verbose", "level"],
                            },
                        },
                    ]
                }
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
            "safetySettings": [
                {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}
            ],
            "generationConfig": {
                "temperature": 0.3,
                "topP": 0.9,
                "topK": 40,
                "maxOutputTokens": 2048,
                "stopSequences": ["###", "END"],
                "seed": 7,
                "responseMimeType": "application/json",
                "responseJsonSchema": _ANSWER,
                "thinkingConfig": {"thinkingLevel": "LOW"},
            },
        },
        response_body={
            "candidates": [
                _candidate([{"text": '{"answer": "You are welcome."}'}], index=0),
            ],
            "usageMetadata": {
                "promptTokenCount": 2100,
                "cachedContentTokenCount": 2000,
                "toolUsePromptTokenCount": 12,
                "candidatesTokenCount": 9,
                "thoughtsTokenCount": 30,
                "totalTokenCount": 2151,
            },
            "modelVersion": "gemini-3-flash-preview",
            "responseId": "resp_every_shape",
        },
    ),
]

CASES = _load() + SYNTHETIC
WITH_REQUESTS = [case for case in CASES if case.request_body is not None]
STREAMS = [case for case in CASES if case.stream is not None and case.status < 400]


def _ids(cases: list[Case]) -> list[str]:
    return [case.key for case in cases]


def _named(key: str) -> Case:
    """A case by name; skips when the corpus in use does not have it."""
    for case in CASES:
        if case.key == key:
            return case
    pytest.skip(f"{key} is not in {CORPUS}")


# Independent reading of the recordings

_FILTERS = frozenset(
    {
        # The reasons Gemini gives for output its filters stopped (the image ones included).
        "SAFETY",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "RECITATION",
        "LANGUAGE",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)

UsageCounts = tuple[int | None, int | None, int | None, int | None]
"""(input, output, reasoning, cache read); input counts tool-use prompts and cached input,
output counts thoughts."""


@dataclass
class Expected:
    text: str | None
    reasoning: str | None
    calls: list[tuple[str | None, str, Any]]
    """(id when recorded, name, arguments as a value)."""
    finish: str | None
    explanation: str | None
    blocked: str | None
    """The block reason of a prompt Gemini blocked."""
    usage: UsageCounts
    model: str


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _counts(raw: Any) -> UsageCounts:
    """One `usageMetadata`. Gemini omits a count that is zero and reports `totalTokenCount`
    as the four added up, so within a reported object an absent addend is 0 when the other
    one of its sum is reported, and a sum of which neither is reported is what the total
    leaves once the other sum is known; a count nothing says stays unknown."""
    if not isinstance(raw, dict):
        return None, None, None, None
    prompt, tools = _count(raw.get("promptTokenCount")), _count(raw.get("toolUsePromptTokenCount"))
    visible, thoughts = (
        _count(raw.get("candidatesTokenCount")),
        _count(raw.get("thoughtsTokenCount")),
    )
    total = _count(raw.get("totalTokenCount"))
    inputs = None if prompt is None and tools is None else (prompt or 0) + (tools or 0)
    outputs = None if visible is None and thoughts is None else (visible or 0) + (thoughts or 0)
    if total is not None and inputs is None and outputs is not None:
        inputs = total - outputs
    elif total is not None and outputs is None and inputs is not None:
        outputs = total - inputs
    return inputs, outputs, thoughts, _count(raw.get("cachedContentTokenCount"))


def _merge(before: UsageCounts, after: UsageCounts) -> UsageCounts:
    """A stream's usage: each count as last reported (a chunk's counts are running totals)."""
    return (
        after[0] if after[0] is not None else before[0],
        after[1] if after[1] is not None else before[1],
        after[2] if after[2] is not None else before[2],
        after[3] if after[3] is not None else before[3],
    )


def _index(candidate: dict[str, Any]) -> int:
    index = _count(candidate.get("index"))
    return 0 if index is None else index


def _response_candidate(chunk: dict[str, Any], *, first_listed: bool) -> dict[str, Any] | None:
    """The candidate with index 0 (an absent index is 0); a whole body without one answers
    with the first listed."""
    candidates = [c for c in chunk.get("candidates") or [] if isinstance(c, dict)]
    for candidate in candidates:
        if _index(candidate) == 0:
            return candidate
    return candidates[0] if candidates and first_listed else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def read_chunks(chunks: list[dict[str, Any]], asked: str, *, first_listed: bool) -> Expected:
    """What a response says: one body, or the chunks of a stream in order (each holding
    only its new parts, the last finish reason the one)."""
    parts: list[dict[str, Any]] = []
    finish: str | None = None
    message: Any = None
    blocked: str | None = None
    block_message: str | None = None
    usage: UsageCounts = (None, None, None, None)
    for chunk in chunks:
        candidate = _response_candidate(chunk, first_listed=first_listed)
        if candidate is not None:
            content = candidate.get("content") or {}
            parts.extend(p for p in content.get("parts") or [] if isinstance(p, dict))
            if _text(candidate.get("finishReason")):
                finish, message = candidate["finishReason"], candidate.get("finishMessage")
        else:
            feedback = chunk.get("promptFeedback") or {}
            if blocked is None and _text(feedback.get("blockReason")):
                blocked = feedback["blockReason"]
                block_message = _text(feedback.get("blockReasonMessage"))
        if "usageMetadata" in chunk:
            counts = _counts(chunk["usageMetadata"])
            if not first_listed and finish is None and blocked is None:
                # A stream's chunks before the finishing one: running output counts.
                counts = (counts[0], None, None, counts[3])
            usage = _merge(usage, counts)
    texts = [p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought")]
    thoughts = [p["text"] for p in parts if isinstance(p.get("text"), str) and p.get("thought")]
    calls = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)]
    if blocked is not None:
        reason: str | None = "content_filter"
    elif finish is None or finish == "FINISH_REASON_UNSPECIFIED":
        reason = None
    elif finish == "STOP":
        reason = "tool_calls" if calls else "stop"
    elif finish == "MAX_TOKENS":
        reason = "length"
    elif finish in _FILTERS:
        reason = "content_filter"
    else:
        reason = finish.lower()
    if blocked is not None:
        explanation = block_message
    elif finish in _FILTERS:
        explanation = _text(message)
    else:
        explanation = None
    first = chunks[0] if chunks else {}
    return Expected(
        "".join(texts) or None,
        "".join(thoughts) or None,
        [(_text(call.get("id")), call["name"], call.get("args") or {}) for call in calls],
        reason,
        explanation,
        blocked,
        usage,
        _text(first.get("modelVersion")) or asked,
    )


def stream_items(stream: str) -> list[Any]:
    """The JSON values of a recorded stream, in order: the elements of a streamed JSON
    array; or each server-sent event's data (its `data:` lines joined) and each value
    written outside any event (Gemini's mid-stream error object, on raw lines)."""
    if stream.lstrip().startswith("["):
        values: list[Any] = json.loads(stream)
        return values
    decoder = json.JSONDecoder()
    items: list[Any] = []
    data: list[str] = []
    position, end = 0, len(stream)
    while position < end:
        newline = stream.find("\n", position)
        line_end = end if newline < 0 else newline + 1
        line = stream[position:line_end].rstrip("\r\n")
        stripped = line.lstrip()
        if stripped[:1] in ("{", "["):
            if data:
                items.append(json.loads("\n".join(data)))
                data = []
            value, position = decoder.raw_decode(stream, position + len(line) - len(stripped))
            items.append(value)
            continue
        if line.startswith("data:"):
            value_text = line[5:]
            data.append(value_text[1:] if value_text.startswith(" ") else value_text)
        elif not line and data:
            items.append(json.loads("\n".join(data)))
            data = []
        position = line_end
    if data:
        items.append(json.loads("\n".join(data)))
    return items


def _is_error(item: Any) -> bool:
    return isinstance(item, dict) and "error" in item and "candidates" not in item


def read_stream(stream: str, asked: str) -> tuple[Expected, dict[str, Any] | None]:
    """The response a stream adds up to, as far as it goes, and the error object that
    ended it, if one did (wrapped in a one-element array or not)."""
    chunks: list[dict[str, Any]] = []
    error = None
    for item in stream_items(stream):
        for value in item if isinstance(item, list) else [item]:
            if error is None and _is_error(value):
                error = value
            elif error is None and isinstance(value, dict):
                chunks.append(value)
        if error is not None:
            break
    return read_chunks(chunks, asked, first_listed=False), error


def expected_of(case: Case, asked: str) -> Expected:
    if case.stream is not None:
        return read_stream(case.stream, asked)[0]
    return read_chunks([case.data["response_body"]], asked, first_listed=True)


def _usage_of(response: ChatResponse) -> UsageCounts:
    usage = response.usage
    if usage is None:
        return None, None, None, None
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        usage.cache_read_tokens,
    )


def check(response: ChatResponse, expected: Expected, provider: str) -> None:
    assert (response.text() or None) == expected.text
    assert (response.reasoning() or None) == expected.reasoning
    calls = response.tool_calls()
    assert [(c.name, c.parsed_arguments()) for c in calls] == [
        (name, args) for _, name, args in expected.calls
    ]
    for call, (recorded_id, _, _) in zip(calls, expected.calls, strict=True):
        # A recorded id is the call's; without one, the call still gets an id of its own.
        if recorded_id is not None:
            assert call.id == recorded_id
        else:
            assert call.id
    assert len({call.id for call in calls}) == len(calls)
    assert response.finish_reason == expected.finish
    if expected.finish == "content_filter":
        assert response.finish_reason == FinishReason.CONTENT_FILTER
    explanation = response.decline_explanation()
    if expected.blocked is not None:
        # A blocked prompt answers nothing; without a message, the reason says why.
        assert response.content == ()
        assert explanation is not None
        if expected.explanation is not None:
            assert explanation == expected.explanation
        else:
            assert expected.blocked in explanation
    else:
        assert explanation == expected.explanation
    assert response.first_refusal() is None  # Gemini has no refusal part
    assert _usage_of(response) == expected.usage
    assert response.model == expected.model
    assert response.provider == provider


_BY_NAME: dict[str, type[Error]] = {
    "INVALID_ARGUMENT": InvalidRequestError,
    "FAILED_PRECONDITION": InvalidRequestError,
    "OUT_OF_RANGE": InvalidRequestError,
    "UNAUTHENTICATED": AuthenticationError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "NOT_FOUND": NotFoundError,
    "INTERNAL": ServerError,
    "UNAVAILABLE": OverloadedError,
    "DEADLINE_EXCEEDED": ServerError,
}
_BY_STATUS: dict[int, type[Error]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    408: RequestTimeoutError,
    503: OverloadedError,
}
_RETRYABLE: dict[type[Error], bool] = {
    # As the google.rpc codes say: what waiting may clear, and what it will not.
    RateLimitedError: True,
    OverloadedError: True,
    ServerError: True,
    QuotaExceededError: False,
    AuthenticationError: False,
    PermissionDeniedError: False,
    NotFoundError: False,
    InvalidRequestError: False,
    UnsupportedError: False,
    ContextWindowExceededError: False,
}


def _error_payload(case: Case) -> Any:
    if case.status >= 400:
        payload = case.data.get("response_body")
    else:
        assert case.stream is not None
        payload = read_stream(case.stream, MODEL)[1]
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]
    return payload


def _details(inner: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    details = inner.get("details")
    listed = details if isinstance(details, list) else []
    return [
        d for d in listed if isinstance(d, dict) and str(d.get("@type", "")).endswith(f".{kind}")
    ]


def _seconds(duration: Any) -> float | None:
    """A protobuf `Duration` in its JSON form (`"37s"`, `"1.5s"`)."""
    found = re.fullmatch(r"(\d+(?:\.\d*)?)s", duration) if isinstance(duration, str) else None
    return float(found.group(1)) if found else None


def expected_error(case: Case) -> tuple[type[Error], float | None]:
    """The class a recorded error stands for and the wait it asks for: by its tags, its
    google.rpc status name and details, or its HTTP status when it names none."""
    tags = set(case.data.get("tags") or [])
    payload = _error_payload(case)
    inner = payload.get("error") if isinstance(payload, dict) else None
    inner = inner if isinstance(inner, dict) else {}
    name = inner.get("status")
    reasons = {d.get("reason") for d in _details(inner, "ErrorInfo")}
    if "API_KEY_INVALID" in reasons or "auth_error" in tags:
        return AuthenticationError, None
    if "invalid_schema" in tags:
        return UnsupportedError, None
    if "context_length" in tags and name != "RESOURCE_EXHAUSTED":
        return ContextWindowExceededError, None
    if name == "RESOURCE_EXHAUSTED" or (name is None and case.status == 429):
        quotas = [
            f"{violation.get('quotaId', '')} {violation.get('quotaMetric', '')}"
            for failure in _details(inner, "QuotaFailure")
            for violation in failure.get("violations") or []
        ]
        if any(re.search(r"(?i)per[_ -]?day", quota) for quota in quotas):
            return QuotaExceededError, None
        delays = [_seconds(d.get("retryDelay")) for d in _details(inner, "RetryInfo")]
        header = case.headers.get("retry-after", "").strip()
        if delays and delays[0] is not None:
            return RateLimitedError, delays[0]
        return RateLimitedError, float(header) if header.isdigit() else None
    if name in _BY_NAME:
        return _BY_NAME[name], None
    status = _count(inner.get("code")) if case.status < 400 else case.status
    if status is None:
        return ServerError, None  # an error object that says neither: the server gave up
    if status in _BY_STATUS:
        return _BY_STATUS[status], None
    return (ServerError if status >= 500 else InvalidRequestError), None


def check_error(error: Error, case: Case, asked: str, provider: str) -> None:
    cls, wait = expected_error(case)
    assert type(error) is cls
    assert error.provider == provider
    assert error.model == asked
    if case.status >= 400:
        assert error.status == case.status
    else:
        # An error object in a stream carries the HTTP status it stands for as its code.
        inner = (_error_payload(case) or {}).get("error") or {}
        code = _count(inner.get("code")) if isinstance(inner, dict) else None
        assert error.status == (code if code is not None and 400 <= code <= 599 else None)
    assert error.retry_after == wait
    assert error.retryable is _RETRYABLE[cls]
    if isinstance(error, UnsupportedError):
        assert error.field is RequestField.RESPONSE_FORMAT
        assert error.stage is UnsupportedStage.PROVIDER
    # The provider's words stay out of the log view; the credentials are nowhere.
    assert error.message not in str(error.as_log())
    for view in (str(error), repr(error), str(error.as_log()), error.to_json()):
        assert KEY not in view and TOKEN not in view


def test_the_harness_reads_the_shapes_the_wire_allows() -> None:
    """What the independent reading makes of the synthetic recordings, spelled out, so that
    the harness and the adapter cannot agree on a wrong reading."""
    by_key = {case.key.removeprefix("synthetic/"): case for case in SYNTHETIC}
    assert expected_of(
        by_key["body_without_usage_with_other_candidates_and_unknown_parts"], "asked"
    ) == Expected(
        "Looking it up.",
        None,
        [(None, "lookup", {"q": "Zürich", "n": [1]}), (None, "lookup", {})],
        "tool_calls",
        None,
        None,
        (None, None, None, None),
        "asked",
    )
    assert expected_of(by_key["finish_safety_with_its_message"], "asked") == Expected(
        "Here is a partial",
        None,
        [],
        "content_filter",
        "The response was blocked for prohibited content.",
        None,
        (9, 0, None, None),
        "gemini-2.5-flash-001",
    )
    blocked = expected_of(by_key["stream_prompt_blocked"], "asked")
    assert (blocked.finish, blocked.blocked, blocked.explanation) == (
        "content_filter",
        "SAFETY",
        None,
    )
    assert blocked.usage == (40, 0, None, 32)
    unavailable = by_key["stream_unavailable_after_text"]
    partial, error = read_stream(unavailable.stream or "", "asked")
    assert (partial.text, partial.finish, partial.usage) == (
        "Half an answer",
        None,
        (7, None, None, None),
    )
    assert error == {
        "error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }
    }
    assert unavailable.is_error and expected_error(unavailable) == (OverloadedError, None)
    assert expected_error(by_key["error_429_per_minute_with_retry_delay"]) == (
        RateLimitedError,
        37.0,
    )
    assert expected_error(by_key["error_429_per_day_quota"]) == (QuotaExceededError, None)
    assert expected_error(by_key["error_429_vertex_without_details"]) == (RateLimitedError, 12.0)
    assert expected_error(by_key["error_503_not_json"]) == (OverloadedError, None)
    assert expected_error(by_key["error_400_too_many_states"]) == (UnsupportedError, None)
    assert expected_of(by_key["request_with_every_shape"], "asked").usage == (2112, 39, 30, 2000)
    # A stream read either way says the same.
    stream = unavailable.stream or ""
    assert stream_items(_as_array(stream)) == stream_items(stream)


def test_the_corpus_has_every_kind_of_case() -> None:
    recorded = [case for case in CASES if not case.key.startswith("synthetic/")]
    if not recorded:
        pytest.skip(f"no Gemini cases under {CORPUS}")
    kinds = {(case.is_error, case.stream is not None) for case in recorded}
    assert {(False, False), (False, True), (True, False)} <= kinds
    if CORPUS_IS_DEFAULT:
        assert any(case.vertex for case in recorded)
        assert any(case.request_body is not None and case.streamed for case in recorded)


# Recorded requests as allama requests


class NoName(Exception):
    """A part of a recorded request allama has no name for."""


@dataclass(frozen=True)
class Built:
    request: ChatRequest
    passed: frozenset[str]
    """The recorded fields sent as they are through the `gemini` option (allama has no name
    for them), as `field` or `generationConfig.key`."""


def _camel(name: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda found: found.group(1).upper(), name)


_OPAQUE = frozenset(
    {
        # `google.protobuf.Struct`/`Value` fields: their keys are data, not field names.
        "args",
        "response",
        "parametersJsonSchema",
        "responseJsonSchema",
        "default",
        "example",
        "enum",
    }
)
_MAPS = frozenset({"properties"})
"""`map<string, Schema>` fields: their keys are names, their values messages."""


def proto_json(value: Any) -> Any:
    """A body with each field named in lowerCamelCase. Gemini reads its JSON by the proto3
    mapping, whose parsers take a field's original snake_case name as well as its
    lowerCamelCase one: `thinking_budget` is `thinkingBudget`. Names inside values that
    are data (a call's `args`, a JSON schema, the keys of `properties`) stay as they are."""
    if isinstance(value, list):
        return [proto_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel(key)
        if name in _OPAQUE:
            out[name] = item
        elif name in _MAPS and isinstance(item, dict):
            out[name] = {sub: proto_json(schema) for sub, schema in item.items()}
        else:
            out[name] = proto_json(item)
    return out


def from_openapi(node: Any) -> Any:
    """A `Schema` of the OpenAPI subset (`responseSchema`, `parameters`) as the JSON Schema
    it stands for: lower-case types, `nullable` as a `null` type, the properties in their
    `propertyOrdering` (which must name each of them once)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in proto_json(node).items():
        if key == "properties":
            out[key] = {name: from_openapi(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = from_openapi(value)
        elif key == "anyOf":
            out[key] = [from_openapi(sub) for sub in value]
        elif key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key not in ("nullable", "propertyOrdering"):
            out[key] = value
    ordering = proto_json(node).get("propertyOrdering")
    if ordering is not None:
        properties = out.get("properties") or {}
        if sorted(ordering) != sorted(properties):
            raise NoName(f"a `propertyOrdering` of {ordering} for properties {list(properties)}")
        out["properties"] = {name: properties[name] for name in ordering}
    if node.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif isinstance(out.get("anyOf"), list):
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


def _only(part: dict[str, Any], *keys: str) -> None:
    if not set(part) <= set(keys):
        raise NoName(f"a part with {sorted(set(part) - set(keys))}")


_UNNAMED = re.compile(r"call_\d+")


class _Conversation:
    """`contents` as allama messages; calls Gemini sent without an id get one that allama
    does not send back (`call_<n>`), and a result without an id answers the first call of
    its name not answered yet."""

    def __init__(self) -> None:
        self.unnamed = 0
        self.open: list[ToolCall] = []

    def call(self, raw: dict[str, Any]) -> ToolCall:
        _only(raw, "id", "name", "args")
        call_id = raw.get("id")
        if not call_id:
            call_id = f"call_{self.unnamed}"
            self.unnamed += 1
        call = ToolCall.of(call_id, raw["name"], raw.get("args") or {})
        self.open.append(call)
        return call

    def result(self, raw: dict[str, Any]) -> ToolMessage:
        _only(raw, "id", "name", "response")
        response = raw.get("response")
        if not (isinstance(response, dict) and len(response) == 1):
            raise NoName("a function response that is not one output or error")
        ((key, content),) = response.items()
        if key not in ("output", "error") or not isinstance(content, str):
            raise NoName(f"a function response of `{key}`")
        answered = raw.get("id")
        for call in self.open:
            if answered and call.id != answered:
                continue
            if not answered and not (call.name == raw["name"] and _UNNAMED.fullmatch(call.id)):
                continue
            if call.name != raw["name"]:
                raise NoName("a function response naming another function than its call")
            self.open.remove(call)
            return ToolMessage(tool_call_id=call.id, content=content, is_error=key == "error")
        raise NoName("a function response answering no call")

    def user(self, parts: list[dict[str, Any]]) -> list[Message]:
        """A user turn: text and data as user messages, function responses as tool messages
        (sent back merged into one user turn, in order)."""
        out: list[Message] = []
        pending: list[TextPart | ImagePart | DocumentPart] = []
        for part in parts:
            if "functionResponse" in part:
                _only(part, "functionResponse")
                if pending:
                    out.append(UserMessage(content=tuple(pending)))
                    pending = []
                out.append(self.result(part["functionResponse"]))
            elif "text" in part:
                _only(part, "text")
                pending.append(TextPart(text=part["text"]))
            elif "inlineData" in part:
                _only(part, "inlineData")
                data = part["inlineData"]
                _only(data, "mimeType", "data")
                # As a data URL, so that the recorded base64 text is sent as it is.
                url = f"data:{data['mimeType']};base64,{data['data']}"
                image = data["mimeType"].startswith("image/")
                pending.append(ImagePart(url=url) if image else DocumentPart(url=url))
            elif "fileData" in part:
                _only(part, "fileData")
                data = part["fileData"]
                _only(data, "mimeType", "fileUri")
                if "mimeType" not in data:
                    raise NoName("a file without its media type")
                kind = ImagePart if data["mimeType"].startswith("image/") else DocumentPart
                pending.append(kind(url=data["fileUri"], media_type=data["mimeType"]))
            else:
                raise NoName(f"a user part with {sorted(part)}")
        if pending:
            out.append(UserMessage(content=tuple(pending)))
        return out

    def model(self, parts: list[dict[str, Any]]) -> AssistantMessage:
        """A model turn. A signature on a part that is not a thought is a text-less signed
        reasoning block just before that part's block: the decoder's convention, which the
        encoder reads back."""
        blocks: list[ContentBlock] = []
        for part in parts:
            signature = part.get("thoughtSignature")
            if "functionCall" in part:
                _only(part, "functionCall", "thoughtSignature")
                block: ContentBlock = self.call(part["functionCall"])
            elif part.get("thought") is True:
                _only(part, "text", "thought", "thoughtSignature")
                if not part.get("text"):
                    raise NoName("a thought without text")
                blocks.append(Reasoning(text=part["text"], signature=signature))
                continue
            elif "text" in part:
                _only(part, "text", "thoughtSignature")
                if not part["text"] and signature is None:
                    raise NoName("an empty model text part, which allama leaves out")
                block = TextPart(text=part["text"])
            else:
                raise NoName(f"a model part with {sorted(part)}")
            if signature is not None:
                blocks.append(Reasoning(text="", signature=signature))
            blocks.append(block)
        return AssistantMessage(content=tuple(blocks))


def _messages(contents: list[dict[str, Any]]) -> list[Message]:
    conversation = _Conversation()
    out: list[Message] = []
    for turn in contents:
        _only(turn, "role", "parts")
        role = turn.get("role") or "user"  # the role Gemini reads when none is given
        parts = turn.get("parts") or []
        if role == "user":
            out.extend(conversation.user(parts))
        elif role == "model":
            out.append(conversation.model(parts))
        else:
            raise NoName(f"a turn of role {role!r}")
    return out


def _system(raw: dict[str, Any]) -> list[Message]:
    _only(raw, "parts", "role")
    messages: list[Message] = []
    for part in raw.get("parts") or []:
        _only(part, "text")
        if not part.get("text"):
            raise NoName("an empty system part, which allama leaves out")
        messages.append(SystemMessage(content=part["text"]))
    return messages


def _tools(raw: list[dict[str, Any]]) -> list[ToolDefinition]:
    tools = []
    for entry in raw:
        _only(entry, "functionDeclarations")
        for declaration in entry["functionDeclarations"]:
            _only(declaration, "name", "description", "parameters", "parametersJsonSchema")
            if "parametersJsonSchema" in declaration:
                parameters = declaration["parametersJsonSchema"]
            elif "parameters" in declaration:
                parameters = from_openapi(declaration["parameters"])
            else:
                raise NoName("a declaration without parameters")
            tools.append(
                ToolDefinition(
                    name=declaration["name"],
                    parameters=parameters,
                    description=declaration.get("description") or None,
                )
            )
    return tools


def _tool_choice(raw: dict[str, Any], declared: list[str]) -> ToolChoice:
    _only(raw, "functionCallingConfig")
    config = raw["functionCallingConfig"]
    _only(config, "mode", "allowedFunctionNames")
    mode, names = config.get("mode"), config.get("allowedFunctionNames")
    if mode in ("AUTO", "NONE") and names is None:
        return ToolChoice(mode="auto" if mode == "AUTO" else "none")
    if mode == "ANY" and names is not None and len(names) == 1:
        return ToolChoice.tool(names[0])
    if mode == "ANY" and (names is None or sorted(names) == sorted(declared)):
        return ToolChoice.required()
    raise NoName(f"a function calling config of {config}")


def _reasoning_effort(raw: dict[str, Any]) -> str:
    """A thinking config that is one of allama's efforts, and nothing else."""
    if set(raw) == {"thinkingLevel"} and str(raw["thinkingLevel"]).lower() in THINKING_BUDGETS:
        return str(raw["thinkingLevel"]).lower()
    budgets = {budget: effort for effort, budget in THINKING_BUDGETS.items()}
    if set(raw) == {"thinkingBudget"} and raw["thinkingBudget"] == 0:
        return "none"
    if set(raw) == {"thinkingBudget"} and raw["thinkingBudget"] in budgets:
        return budgets[raw["thinkingBudget"]]
    raise NoName(f"a thinking config of {raw}")


def _generation(raw: dict[str, Any], fields: dict[str, Any], passed: dict[str, Any]) -> None:
    """`generationConfig` as request fields; what allama has no name for into `passed`."""
    config = proto_json(raw)
    originals = {_camel(key): key for key in raw}
    schema_keys = [key for key in ("responseSchema", "responseJsonSchema") if key in config]
    mime = config.get("responseMimeType")
    for key, value in config.items():
        try:
            if key == "temperature":
                fields["temperature"] = value
            elif key == "topP":
                fields["top_p"] = value
            elif key == "maxOutputTokens":
                fields["max_output_tokens"] = value
            elif key == "stopSequences":
                fields["stop"] = tuple(value)
            elif key == "seed":
                fields["seed"] = value
            elif key == "thinkingConfig":
                fields["reasoning_effort"] = _reasoning_effort(value)
            elif key == "responseMimeType":
                if value != "application/json" or len(schema_keys) > 1:
                    raise NoName(f"a response of type {value}")
                if not schema_keys:
                    fields["response_format"] = ResponseFormat.json_object()
            elif key in schema_keys:
                if mime != "application/json" or len(schema_keys) > 1:
                    raise NoName("a response schema without JSON output")
                schema = value if key == "responseJsonSchema" else from_openapi(value)
                fields["response_format"] = ResponseFormat.for_schema(schema, strict=True)
            else:
                raise NoName(f"`generationConfig.{key}`")
        except NoName:
            passed[originals[key]] = raw[originals[key]]


def request_from_body(body: dict[str, Any], model: str) -> Built:
    """The `ChatRequest` allama users would write for a recorded body.

    A field allama has no name for (`safetySettings`, `responseModalities`, a thinking
    config with `includeThoughts`) goes through the `gemini` option as recorded, which is
    what that option is for; inside `generationConfig`, key by key. A turn allama cannot
    express raises `NoName`: passing the conversation itself through would leave nothing to
    compare.
    """
    option: dict[str, Any] = {}
    generation: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    system: list[Message] = []
    tools: list[ToolDefinition] = []
    for key, value in body.items():
        name = _camel(key)
        try:
            if name == "contents":
                continue  # below
            if name == "systemInstruction":
                system = _system(proto_json(value))
            elif name == "tools":
                tools = _tools(proto_json(value))
                fields["tools"] = tuple(tools)
            elif name == "toolConfig":
                continue  # below, once the declarations are known
            elif name == "generationConfig":
                _generation(value, fields, generation)
            else:
                option[key] = value
        except NoName:
            option[key] = value
    for key, value in body.items():
        if _camel(key) == "toolConfig":
            try:
                fields["tool_choice"] = _tool_choice(proto_json(value), [t.name for t in tools])
            except NoName:
                option[key] = value
    messages = [*system, *_messages(proto_json(body.get("contents") or []))]
    request = ChatRequest(model, messages=tuple(messages), **fields)
    if generation:
        option["generationConfig"] = generation
    if option:
        request = request.with_option_json("gemini", option)
    passed = {_camel(name) for name in option if _camel(name) != "generationConfig"}
    passed |= {f"generationConfig.{_camel(key)}" for key in generation}
    return Built(request, frozenset(passed))


_SUBSCHEMAS = ("items", "prefixItems", "additionalProperties", "not", "anyOf", "oneOf", "allOf")


def closed(node: Any) -> Any:
    """A JSON schema with each object that declares its properties and says nothing about
    others closed (`additionalProperties: false`): allama's convention for a schema of
    properties (the one extraction validates by), which it writes out on the JSON Schema
    surface."""
    if isinstance(node, list):
        return [closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions", "patternProperties"):
            out[key] = {name: closed(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMAS:
            out[key] = closed(value)
        else:
            out[key] = value
    if "properties" in out and not {"additionalProperties", "patternProperties"} & set(out):
        out["additionalProperties"] = False
    return out


_SCHEMA_SLOTS = {
    # where a schema goes on the JSON Schema surface, and on the OpenAPI one
    "responseJsonSchema": "responseSchema",
    "parametersJsonSchema": "parameters",
}


def _schema_slot(holder: dict[str, Any], json_key: str) -> None:
    """Both places a schema may go, as one: the JSON schema it stands for, closed."""
    openapi_key = _SCHEMA_SLOTS[json_key]
    if openapi_key in holder and json_key not in holder:
        holder[json_key] = from_openapi(holder.pop(openapi_key))
    if json_key in holder:
        holder[json_key] = closed(holder[json_key])


def schema_places(body: dict[str, Any]) -> list[str]:
    """Where a body puts its schemas: `generationConfig.<key>` and `tools.<key>` in order."""
    body = proto_json(body)
    places = [
        f"generationConfig.{key}"
        for key in ("responseSchema", "responseJsonSchema")
        if key in (body.get("generationConfig") or {})
    ]
    for entry in body.get("tools") or []:
        for declaration in entry.get("functionDeclarations") or []:
            places += [
                f"tools.{key}"
                for key in ("parameters", "parametersJsonSchema")
                if key in declaration
            ]
    return places


def normal(body: dict[str, Any]) -> dict[str, Any]:
    """A body with the differences that mean nothing to Gemini taken out, applied to what
    allama sends and to the recording alike:

    - Field names in lowerCamelCase: the proto3 JSON mapping reads `thinking_budget`,
      `parameters_json_schema` and `property_ordering` as their camel-case names.
    - `systemInstruction` without `role` (Gemini ignores it; allama sends none), a turn
      without `role` as a `user` turn (its default), an empty `generationConfig` as none,
      an empty function description as none (allama leaves it out).
    - `ANY` with `allowedFunctionNames` naming every declared function as plain `ANY`: the
      model calls one of the declared functions either way.
    - A schema as the JSON schema it stands for, whichever surface carries it: a
      `responseSchema` or `parameters` (the OpenAPI subset) is read as JSON Schema (see
      `from_openapi`; a `propertyOrdering` that does not name each property once fails the
      comparison), and put where `responseJsonSchema` / `parametersJsonSchema` go; which
      key each body used is compared apart (`SCHEMA_PLACES`). Allama sends the surface
      its capability table gives the model family (the JSON Schema one on Gemini 2.5 and
      later, the OpenAPI one on 2.0 and 1.5), so a recording made with the other one is
      compared by meaning, not by spelling.
    - Objects of a schema that declare properties and say nothing of others as closed:
      allama closes them on the JSON Schema surface (`additionalProperties: false`, its
      convention for a schema of properties, which extraction validates by), and the
      OpenAPI subset has no other objects.

    Everything else is compared as it is, parts, signatures and call ids included.
    """
    out = proto_json(body)
    system = out.get("systemInstruction")
    if isinstance(system, dict):
        out["systemInstruction"] = {k: v for k, v in system.items() if k != "role"}
    out["contents"] = [{"role": "user", **turn} for turn in out.get("contents") or []]
    generation = dict(out.get("generationConfig") or {})
    _schema_slot(generation, "responseJsonSchema")
    if generation:
        out["generationConfig"] = generation
    else:
        out.pop("generationConfig", None)
    declared: list[str] = []
    tools = []
    for entry in out.get("tools") or []:
        entry = dict(entry)
        if "functionDeclarations" in entry:
            declarations = []
            for declaration in entry["functionDeclarations"]:
                declaration = dict(declaration)
                if declaration.get("description") == "":
                    del declaration["description"]
                _schema_slot(declaration, "parametersJsonSchema")
                declared.append(str(declaration.get("name")))
                declarations.append(declaration)
            entry["functionDeclarations"] = declarations
        tools.append(entry)
    if "tools" in out:
        out["tools"] = tools
    config = (out.get("toolConfig") or {}).get("functionCallingConfig")
    if isinstance(config, dict) and config.get("mode") == "ANY":
        names = config.get("allowedFunctionNames")
        if names is not None and len(names) > 1 and sorted(names) == sorted(declared):
            config = {k: v for k, v in config.items() if k != "allowedFunctionNames"}
            out["toolConfig"] = {**out["toolConfig"], "functionCallingConfig": config}
    normalised: dict[str, Any] = out
    return normalised


# What the recorded fields allama has no name for are, in the shared corpus: each of these
# is sent as recorded through the `gemini` option, and compared as such.
PASSED_THROUGH: dict[str, set[str]] = {
    "gemini/finish_max_tokens": {"generationConfig.responseModalities"},
    "gemini/finish_max_tokens_thinking_empty_text": {"generationConfig.responseModalities"},
    "gemini/finish_safety": {"safetySettings"},
    "gemini/function_calling_allowed_function_names": {"generationConfig.responseModalities"},
    "gemini/parallel_function_calls_3": {"generationConfig.responseModalities"},
    "gemini/response_schema": {"generationConfig.responseModalities"},
    "gemini/response_schema_nested_models": {"generationConfig.responseModalities"},
    # a thinking budget of 6400 and `include_thoughts`: no allama names
    "gemini/thinking_include_thoughts": {"generationConfig.thinkingConfig"},
    "gemini/thinking_include_thoughts_stream": {"generationConfig.thinkingConfig"},
    "gemini/vertex_prompt_blocked_model_armor": {
        "generationConfig.responseModalities",
        "modelArmorConfig",
    },
    "synthetic/request_with_every_shape": {"generationConfig.topK", "safetySettings"},
}

# Where allama puts a schema elsewhere than the recording did (see `normal`): recorded
# place, then allama's.
SCHEMA_PLACES: dict[str, tuple[list[str], list[str]]] = {
    # OpenAPI schemas sent to Gemini 2.5 and 3, which allama asks in JSON Schema.
    "gemini/response_schema_openapi_types": (
        ["generationConfig.responseSchema"],
        ["generationConfig.responseJsonSchema"],
    ),
    "gemini/soft_refusal_in_schema": (
        ["generationConfig.responseSchema"],
        ["generationConfig.responseJsonSchema"],
    ),
    "gemini/parallel_function_calls_2": (["tools.parameters"], ["tools.parametersJsonSchema"]),
    # OpenAPI parameters sent to Gemini 2.0, which allama declares in JSON Schema.
    "gemini/stream_sse_parallel_function_calls": (
        ["tools.parameters"],
        ["tools.parametersJsonSchema"],
    ),
    "synthetic/request_with_every_shape": (
        [
            "generationConfig.responseJsonSchema",
            "tools.parametersJsonSchema",
            "tools.parameters",
        ],
        [
            "generationConfig.responseJsonSchema",
            "tools.parametersJsonSchema",
            "tools.parametersJsonSchema",
        ],
    ),
}


def _built(case: Case) -> Built:
    assert case.request_body is not None
    try:
        return request_from_body(case.request_body, case.model)
    except NoName as why:
        pytest.skip(f"the recorded conversation has {why}, which allama does not write")


def _offline(case: Case) -> HttpProvider:
    base = f"http://127.0.0.1:9{case.prefix}"
    if case.vertex:
        return allama.provider(
            "vertex-gemini",
            base_url=base,
            access_token=TOKEN,
            project=PROJECT,
            location=case.location,
        )
    return allama.provider("gemini", api_key=KEY, base_url=base)


@pytest.mark.parametrize("case", WITH_REQUESTS, ids=_ids(WITH_REQUESTS))
def test_equivalent_request_encodes_to_the_recorded_body(case: Case) -> None:
    recorded = case.request_body
    assert recorded is not None
    built = _built(case)
    if CORPUS_IS_DEFAULT or case.key.startswith("synthetic/"):
        assert built.passed == PASSED_THROUGH.get(case.key, set())
    http, warnings = _offline(case)._prepare(built.request, stream=case.streamed)
    assert http.url == f"http://127.0.0.1:9{case.prefix}/models/{case.model}" + (
        STREAM if case.streamed else GENERATE
    )
    assert dict(http.params) == ({"alt": "sse"} if case.streamed else {})
    assert json.loads(http.content) == http.body
    assert normal(http.body) == normal(recorded)
    places = (schema_places(recorded), schema_places(http.body))
    if CORPUS_IS_DEFAULT or case.key.startswith("synthetic/"):
        assert places == SCHEMA_PLACES.get(case.key, (places[0], places[0]))
    # Recorded requests were accepted as sent (or refused for what allama does not check):
    # nothing in them is refused before sending.
    assert [w for w in warnings if w.kind is WarningKind.UNSUPPORTED] == []


def test_the_normalisation_leaves_a_real_difference_a_difference() -> None:
    """The comparison above is not loosened past what it says: a changed field still fails."""
    case = _named("synthetic/request_with_every_shape")
    assert case.request_body is not None
    http, _ = _offline(case)._prepare(_built(case).request, stream=False)
    sent = http.body
    assert normal(sent) == normal(case.request_body)
    generation = sent["generationConfig"]
    schema = generation["responseJsonSchema"]
    declarations = sent["tools"][0]["functionDeclarations"]
    model_turn = sent["contents"][1]
    for change in (
        {"systemInstruction": {"parts": [{"text": "Be brief.Cite."}]}},
        {"generationConfig": {**generation, "temperature": 0.4}},
        {"generationConfig": {**generation, "stopSequences": ["###"]}},
        {"generationConfig": {**generation, "thinkingConfig": {"thinkingLevel": "HIGH"}}},
        {"generationConfig": {**generation, "responseJsonSchema": {**schema, "required": []}}},
        {"generationConfig": {**generation, "responseSchema": schema}},
        {"generationConfig": {k: v for k, v in generation.items() if k != "responseMimeType"}},
        {"tools": [{"functionDeclarations": declarations[:1]}]},
        {"toolConfig": {"functionCallingConfig": {"mode": "ANY"}}},
        {
            "contents": [
                sent["contents"][0],
                {
                    **model_turn,
                    "parts": [{"text": "Two images.", "thought": True}, *model_turn["parts"][1:]],
                },
                *sent["contents"][2:],
            ]
        },
        {"contents": [*sent["contents"][:-1], {"role": "user", "parts": [{"text": "Thanks!"}]}]},
    ):
        assert normal({**sent, **change}) != normal(case.request_body), change
    # A forced function is not every function, and the ordering must name the properties.
    forced = {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["noop"]}}
    assert normal({**sent, "toolConfig": forced})["toolConfig"] == forced
    with pytest.raises(NoName):
        from_openapi({"type": "OBJECT", "properties": {"a": {}}, "propertyOrdering": ["b"]})


# The server


class _Server(ReplayServer):
    routes: dict[str, Callable[[_Handler], None]]
    seen: list[tuple[str, dict[str, str], dict[str, Any]]]
    lock: threading.Lock

    def route_of(self, path: str) -> str:
        """The longest route the path starts with."""
        found = [route for route in list(self.routes) if path.startswith(f"/{route}/")]
        return max(found, key=len)

    def requests_to(self, route: str) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
        with self.lock:
            return [entry for entry in self.seen if self.route_of(entry[0]) == route]


class _Handler(ReplyHandler):
    json_type = "application/json; charset=UTF-8"
    server: _Server
    request_body: dict[str, Any]

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.request_body = body
        with self.server.lock:
            self.server.seen.append((self.path, headers, body))
        self.server.routes[self.server.route_of(self.path)](self)


_FRAMING = ("content-length", "transfer-encoding", "connection")


def _serve_case(case: Case) -> Callable[[_Handler], None]:
    def serve(h: _Handler) -> None:
        headers = {k: v for k, v in case.headers.items() if k not in _FRAMING}
        if case.stream is not None and case.status < 400:
            h.send_stream(case.stream.encode(), headers or None)
        else:
            h.send_body(case.status, headers, case.body)

    return serve


def _as_array(stream: str) -> str:
    """A recorded stream as the endpoint streams it without `alt=sse`: a JSON array whose
    elements are the chunks, written out as Google's front end writes them."""
    elements = (json.dumps(item, indent=2, ensure_ascii=False) for item in stream_items(stream))
    return "[" + ",\r\n".join(elements) + "]"


def _serve_array(case: Case) -> Callable[[_Handler], None]:
    assert case.stream is not None
    data = _as_array(case.stream).encode()

    def serve(h: _Handler) -> None:
        h.send_stream(data, {"content-type": "application/json; charset=UTF-8"})

    return serve


def _chunk(parts: list[dict[str, Any]], finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"candidates": [_candidate(parts, finish, index=0)], **fields}


def _response(parts: list[dict[str, Any]], finish: str = "STOP") -> dict[str, Any]:
    return _chunk(
        parts,
        finish,
        usageMetadata={"promptTokenCount": 48, "candidatesTokenCount": 12, "totalTokenCount": 60},
        modelVersion=MODEL,
        responseId="resp_local",
    )


WORDS = ("Hello", " there", ", wor", "ld")
TEXT_CHUNKS = [
    _sse(
        _chunk(
            [{"text": WORDS[0]}],
            usageMetadata={"promptTokenCount": 12, "totalTokenCount": 12},
            modelVersion=MODEL,
        )
    ),
    *(_sse(_chunk([{"text": word}])) for word in WORDS[1:]),
    _sse(
        _chunk(
            [{"text": ""}],
            "STOP",
            usageMetadata={
                "promptTokenCount": 12,
                "candidatesTokenCount": 4,
                "totalTokenCount": 16,
            },
        )
    ),
]
BEFORE_STOP = "".join(TEXT_CHUNKS[: len(WORDS)])
"""The stream up to its last text, at a chunk boundary: no finish reason yet."""
OVERLOADED = "The model is overloaded. Please try again later."

LONDON = {"city": "London", "country": "United Kingdom", "population": 9002488}
TALLY = {"store": "North", "counts": {"apples": 3, "pears": 12}}
TALLY_PIECES = ('{"store": "No', 'rth", "cou', 'nts": {"apples', '": 3, "pea', 'rs": 12}}')
TREE = {"name": "root", "children": [{"name": "leaf", "children": []}]}
BLOCKED_MESSAGE = "The prompt violated Prompt Injection and Jailbreak filters."


def _has_response_schema(body: dict[str, Any]) -> bool:
    generation = body.get("generationConfig") or {}
    return any(key in generation for key in ("responseSchema", "responseJsonSchema"))


def _routes() -> dict[str, Callable[[_Handler], None]]:
    def text_stream(h: _Handler) -> None:
        h.send_stream("".join(TEXT_CHUNKS).encode())

    def cut_between(h: _Handler) -> None:
        h.send_stream(BEFORE_STOP.encode())

    def cut_inside(h: _Handler) -> None:
        stop = TEXT_CHUNKS[-1]
        h.send_stream((BEFORE_STOP + stop[: len(stop) // 2]).encode())

    def dropped(h: _Handler) -> None:
        h.start_chunked()
        for piece in _pieces(BEFORE_STOP.encode(), 13):
            h.chunk(piece)
        h.drop()

    def error_mid_stream(h: _Handler) -> None:
        rest = _raw_error(503, "UNAVAILABLE", OVERLOADED) + TEXT_CHUNKS[-1]
        h.send_stream((BEFORE_STOP + rest).encode())

    def rate_limited(h: _Handler) -> None:
        payload = _google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota. Please retry in 37.5s.",
            _rpc("Help", links=[{"description": "quotas", "url": "https://ai.google.dev"}]),
            *_quota("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "37s"),
        )
        # The RetryInfo of the body says more than the header.
        h.send_json(429, payload, {"retry-after": "5"})

    def per_day(h: _Handler) -> None:
        payload = _google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            *_quota("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "3600s"),
        )
        h.send_json(429, payload)

    def unavailable(h: _Handler) -> None:
        h.send_json(503, _google_error(503, "UNAVAILABLE", OVERLOADED))

    def too_many_states(h: _Handler) -> None:
        h.send_json(400, _google_error(400, "INVALID_ARGUMENT", TOO_MANY_STATES))

    def bad_key_echo(h: _Handler) -> None:
        key = h.headers.get("x-goog-api-key", "")
        payload = _google_error(
            400,
            "INVALID_ARGUMENT",
            f"API key not valid: {key}. Please pass a valid API key.",
            _rpc("ErrorInfo", reason="API_KEY_INVALID", domain="googleapis.com"),
        )
        h.send_json(400, payload)

    def bad_token_echo(h: _Handler) -> None:
        token = h.headers.get("authorization", "").removeprefix("Bearer ")
        payload = _google_error(
            401,
            "UNAUTHENTICATED",
            f"Request had invalid authentication credentials ({token}). Expected OAuth 2 "
            "access token, login cookie or other valid authentication credential.",
        )
        h.send_json(401, payload)

    def extract_native(h: _Handler) -> None:
        h.send_json(200, _response([{"text": json.dumps(LONDON)}]))

    def extract_tree(h: _Handler) -> None:
        call = {"functionCall": {"name": EXTRACTION_TOOL, "args": TREE}}
        h.send_json(200, _response([{**call, "thoughtSignature": _SIG}]))

    def extract_rejected(h: _Handler) -> None:
        # The schema is refused; the forced tool (if asked next) is answered.
        if _has_response_schema(h.request_body):
            too_many_states(h)
            return
        h.send_json(200, _response([{"functionCall": {"name": EXTRACTION_TOOL, "args": LONDON}}]))

    def extract_blocked(h: _Handler) -> None:
        feedback: dict[str, Any] = {"blockReason": "PROHIBITED_CONTENT"}
        if h.headers.get("authorization"):  # Vertex says why
            feedback = {"blockReason": "MODEL_ARMOR", "blockReasonMessage": BLOCKED_MESSAGE}
        body = {
            "promptFeedback": feedback,
            "usageMetadata": {"promptTokenCount": 11, "totalTokenCount": 11},
            "modelVersion": MODEL,
        }
        h.send_json(200, body)

    def extract_tool_stream(h: _Handler) -> None:
        stream = _sse(
            _chunk(
                [{"text": "Counting the fruit.", "thought": True}],
                usageMetadata={
                    "promptTokenCount": 300,
                    "totalTokenCount": 340,
                    "thoughtsTokenCount": 40,
                },
                modelVersion=MODEL,
            ),
            _chunk(
                [
                    {
                        "functionCall": {"name": EXTRACTION_TOOL, "args": TALLY},
                        "thoughtSignature": _SIG,
                    }
                ],
                "STOP",
                usageMetadata={
                    "promptTokenCount": 300,
                    "candidatesTokenCount": 30,
                    "thoughtsTokenCount": 40,
                    "totalTokenCount": 370,
                },
            ),
        )
        h.send_stream(stream.encode())

    def extract_text_stream(h: _Handler) -> None:
        chunks = [_chunk([{"text": piece}], modelVersion=MODEL) for piece in TALLY_PIECES]
        chunks[-1] = _chunk(
            [{"text": TALLY_PIECES[-1]}],
            "STOP",
            usageMetadata={
                "promptTokenCount": 20,
                "candidatesTokenCount": 15,
                "totalTokenCount": 35,
            },
        )
        h.send_stream(_sse(*chunks).encode())

    return {
        "text-stream": text_stream,
        "cut-between": cut_between,
        "cut-inside": cut_inside,
        "dropped": dropped,
        "error-mid-stream": error_mid_stream,
        "rate-limited": rate_limited,
        "per-day": per_day,
        "unavailable": unavailable,
        "too-many-states": too_many_states,
        "bad-key-echo": bad_key_echo,
        "bad-token-echo": bad_token_echo,
        "extract-native": extract_native,
        "extract-tree": extract_tree,
        "extract-rejected": extract_rejected,
        "extract-blocked": extract_blocked,
        "extract-tool-stream": extract_tool_stream,
        "extract-text-stream": extract_text_stream,
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


def _base(server: _Server, route: str, prefix: str = API) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/{route}{prefix}"


def _provider(server: _Server, route: str, *, vertex: bool = False) -> HttpProvider:
    if vertex:
        return allama.provider(
            "vertex-gemini",
            base_url=_base(server, route, VERTEX_PREFIX),
            access_token=TOKEN,
            project=PROJECT,
            location="us-central1",
        )
    return allama.provider("gemini", api_key=KEY, base_url=_base(server, route))


def _case_provider(server: _Server, case: Case, route: str) -> HttpProvider:
    base = _base(server, route, case.prefix)
    if case.vertex:
        return allama.provider(
            "vertex-gemini",
            base_url=base,
            access_token=TOKEN,
            project=PROJECT,
            location=case.location,
        )
    return allama.provider("gemini", api_key=KEY, base_url=base)


def _check_sent(
    server: _Server,
    route: str,
    *,
    stream: bool,
    model: str = MODEL,
    prefix: str = API,
    vertex: bool = False,
) -> dict[str, Any]:
    """The one request the route got: its path, query and headers; returns its body."""
    seen = server.requests_to(route)
    assert len(seen) == 1
    return _check_request(seen[0], route, stream=stream, model=model, prefix=prefix, vertex=vertex)


def _check_request(
    seen: tuple[str, dict[str, str], dict[str, Any]],
    route: str,
    *,
    stream: bool,
    model: str = MODEL,
    prefix: str = API,
    vertex: bool = False,
) -> dict[str, Any]:
    path, headers, body = seen
    verb = STREAM + "?alt=sse" if stream else GENERATE
    assert path == f"/{route}{prefix}/models/{model}{verb}"
    if vertex:
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert "x-goog-api-key" not in headers
    else:
        assert headers["x-goog-api-key"] == KEY
        assert "authorization" not in headers
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == ("text/event-stream" if stream else "application/json")
    return body


# Replay over the socket


def _replay_request(case: Case) -> ChatRequest:
    """The equivalent of the recorded request; a plain one where none was recorded."""
    if case.request_body is not None:
        try:
            return request_from_body(case.request_body, case.model).request
        except NoName:
            pass
    return ChatRequest(case.model).user("Hello")


class _Failed(Exception):
    def __init__(self, error: Error, partial: ChatResponse | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.partial = partial


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


def _replay(server: _Server, case: Case, route: str, flavour: str) -> None:
    target = _case_provider(server, case, route)
    request = _replay_request(case)
    sent, _ = target._prepare(request, stream=case.streamed)
    if case.is_error:
        with pytest.raises(_Failed) as caught:
            _call(target, request, stream=case.streamed, flavour=flavour)
        check_error(caught.value.error, case, request.model, target.name)
        if case.status < 400:
            # The chunks before the error were paid for: what they said stays readable.
            assert case.stream is not None
            partial = caught.value.partial
            assert partial is not None
            check(partial, read_stream(case.stream, request.model)[0], target.name)
    else:
        response = _call(target, request, stream=case.streamed, flavour=flavour)
        check(response, expected_of(case, request.model), target.name)
    body = _check_sent(
        server,
        route,
        stream=case.streamed,
        model=case.model,
        prefix=case.prefix,
        vertex=case.vertex,
    )
    assert body == sent.body
    assert target.name == ("vertex-gemini" if case.vertex else "gemini")
    assert KEY not in repr(target) and TOKEN not in repr(target)


FLAVOURS = ["sync", "async"]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_recorded_case_through_the_provider(server: _Server, case: Case, flavour: str) -> None:
    route = f"{case.route}/{flavour}"
    server.routes[route] = _serve_case(case)
    _replay(server, case, route, flavour)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("case", STREAMS, ids=_ids(STREAMS))
def test_recorded_stream_served_as_a_json_array(server: _Server, case: Case, flavour: str) -> None:
    route = f"{case.route}/array-{flavour}"
    server.routes[route] = _serve_array(case)
    _replay(server, case, route, flavour)


# Sockets: what the recordings do not show

REQUEST = ChatRequest(MODEL).system("Be brief.").user("Hello")
CALLS = ["chat", "achat", "chat_stream", "achat_stream"]


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


def _route_for(server: _Server, name: str, how: str) -> str:
    route = f"{name}/{how}"
    server.routes[route] = server.routes[name]
    return route


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_stream_in_small_chunks(server: _Server, flavour: str) -> None:
    """Chunks of 13 bytes split lines, JSON strings and the blank lines between events: the
    text still arrives word by word, in order, and adds up with the usage last reported."""
    route = _route_for(server, "text-stream", flavour)
    target = _provider(server, route)
    events: list[StreamEvent] = []

    async def run_async() -> ChatResponse:
        async with target:
            astream = await target.achat_stream(REQUEST)
            async for event in astream:
                events.append(event)
            return await astream.response()

    if flavour == "async":
        response = asyncio.run(run_async())
    else:
        with target, target.chat_stream(REQUEST) as stream:
            events.extend(stream)
            response = stream.response()
    assert _texts(events) == list(WORDS)
    assert response.text() == "".join(WORDS)
    assert response.finish_reason == FinishReason.STOP
    assert _usage_of(response) == (12, 4, None, None)
    body = _check_sent(server, route, stream=True)
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
    }


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(
    ("route", "cls"),
    [
        # The server ends the body cleanly between two chunks, before the finish reason.
        ("cut-between", IncompleteStreamError),
        # ... or in the middle of a chunk.
        ("cut-inside", IncompleteStreamError),
        # The connection breaks in the middle of an HTTP chunk.
        ("dropped", NetworkError),
    ],
)
def test_a_stream_cut_mid_way(server: _Server, route: str, cls: type[Error], flavour: str) -> None:
    route = _route_for(server, route, flavour)
    events, collector, error = _stream_events(_provider(server, route), flavour)
    assert type(error) is cls
    assert error.retryable and error.provider == "gemini"
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
        assert text == "".join(WORDS)  # every chunk before the cut was whole
    assert _usage_of(partial)[0] == 12
    assert KEY not in repr(error) and KEY not in error.to_json()
    _check_sent(server, route, stream=True)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_error_object_in_the_middle_of_a_stream(server: _Server, flavour: str) -> None:
    """Gemini writes an error that comes mid-stream as a raw JSON object on lines of its own,
    not as a `data:` event: the text before it came first, nothing after it is read."""
    route = _route_for(server, "error-mid-stream", flavour)
    events, collector, error = _stream_events(_provider(server, route), flavour)
    assert type(error) is OverloadedError
    assert (error.status, error.retryable, error.retry_after) == (503, True, None)
    assert (error.provider, error.model) == ("gemini", MODEL)
    assert error.message == OVERLOADED and OVERLOADED not in str(error.as_log())
    assert _texts(events) == list(WORDS)
    partial = collector.partial_response()
    assert partial.text() == "".join(WORDS) and partial.finish_reason is None
    assert collector.error is error
    _check_sent(server, route, stream=True)


@pytest.mark.parametrize("how", CALLS)
def test_a_429_waits_its_retry_delay(server: _Server, how: str) -> None:
    route = _route_for(server, "rate-limited", how)
    error = _fail(_provider(server, route), REQUEST, how)
    assert type(error) is RateLimitedError
    # `RetryInfo.retryDelay` says how long; the header's shorter wait does not.
    assert error.retry_after == 37.0
    assert (error.status, error.retryable) == (429, True)
    _check_sent(server, route, stream=how.endswith("stream"))


@pytest.mark.parametrize("how", CALLS)
def test_a_per_day_quota_is_exceeded_not_rate_limited(server: _Server, how: str) -> None:
    route = _route_for(server, "per-day", how)
    error = _fail(_provider(server, route), REQUEST, how)
    assert type(error) is QuotaExceededError
    assert (error.status, error.retryable, error.retry_after) == (429, False, None)


@pytest.mark.parametrize("how", CALLS)
def test_a_503_unavailable_is_overloaded(server: _Server, how: str) -> None:
    """On the Gemini API for the sync calls, on Vertex for the async ones."""
    route = _route_for(server, "unavailable", how)
    vertex = how.startswith("a")
    error = _fail(_provider(server, route, vertex=vertex), REQUEST, how)
    assert type(error) is OverloadedError
    assert (error.status, error.retryable, error.retry_after) == (503, True, None)
    assert error.provider == ("vertex-gemini" if vertex else "gemini")
    prefix = VERTEX_PREFIX if vertex else API
    _check_sent(server, route, stream=how.endswith("stream"), prefix=prefix, vertex=vertex)


PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


@pytest.mark.parametrize("how", CALLS)
def test_a_schema_with_too_many_states_is_unsupported_by_the_provider(
    server: _Server, how: str
) -> None:
    route = _route_for(server, "too-many-states", how)
    request = REQUEST.with_response_format(ResponseFormat.for_schema(PERSON, name="person"))
    error = _fail(_provider(server, route), request, how)
    assert isinstance(error, UnsupportedError)
    assert (error.field, error.stage) == (RequestField.RESPONSE_FORMAT, UnsupportedStage.PROVIDER)
    assert (error.status, error.retryable) == (400, False)
    sent = _check_sent(server, route, stream=how.endswith("stream"))
    assert sent["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": {**PERSON, "additionalProperties": False},
    }


def _secret_views(error: Error) -> list[str]:
    body = error.context.body
    assert body is not None
    return [str(error), repr(error), str(error.as_log()), error.to_json(), error.message, body]


@pytest.mark.parametrize("how", CALLS)
def test_the_key_reaches_the_server_and_nothing_else(server: _Server, how: str) -> None:
    route = _route_for(server, "bad-key-echo", how)
    target = _provider(server, route)
    assert KEY not in repr(target) and KEY not in str(target)
    error = _fail(target, REQUEST, how)
    assert type(error) is AuthenticationError and error.status == 400
    for view in _secret_views(error):
        assert KEY not in view
    assert "API key not valid: <redacted>." in error.message
    # It did reach the server, in its own header and only there (not as `?key=`).
    seen = server.requests_to(route)
    assert len(seen) == 1
    path, headers, body = seen[0]
    assert headers["x-goog-api-key"] == KEY
    assert [name for name, value in headers.items() if KEY in value] == ["x-goog-api-key"]
    assert KEY not in path and KEY not in json.dumps(body)


@pytest.mark.parametrize("how", CALLS)
def test_the_vertex_token_reaches_the_server_and_nothing_else(server: _Server, how: str) -> None:
    route = _route_for(server, "bad-token-echo", how)
    target = _provider(server, route, vertex=True)
    assert TOKEN not in repr(target) and TOKEN not in str(target)
    error = _fail(target, REQUEST, how)
    assert type(error) is AuthenticationError and error.status == 401
    assert error.provider == "vertex-gemini"
    for view in _secret_views(error):
        assert TOKEN not in view
    assert "credentials (<redacted>)" in error.message
    seen = server.requests_to(route)
    assert len(seen) == 1
    path, headers, body = seen[0]
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert [name for name, value in headers.items() if TOKEN in value] == ["authorization"]
    assert TOKEN not in path and TOKEN not in json.dumps(body)
    assert path.startswith(f"/{route}{VERTEX_PREFIX}/models/")


# Extraction end to end


class City(BaseModel):
    city: str
    country: str
    population: int


class Tally(BaseModel):
    store: str
    counts: dict[str, int]


class Node(BaseModel):
    name: str
    children: list[Node]


TELL = ChatRequest(MODEL).user("Tell me about London")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_native_extraction(server: _Server, flavour: str) -> None:
    route = _route_for(server, "extract-native", flavour)
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
    assert "tools" not in sent and "toolConfig" not in sent
    generation = sent["generationConfig"]
    assert set(generation) == {"responseMimeType", "responseJsonSchema"}
    assert generation["responseMimeType"] == "application/json"
    schema = generation["responseJsonSchema"]
    assert schema["required"] == ["city", "country", "population"]
    assert schema["additionalProperties"] is False
    assert {name: spec["type"] for name, spec in schema["properties"].items()} == {
        "city": "string",
        "country": "string",
        "population": "integer",
    }


class NestedModel(BaseModel):
    """Represents the deepest nested level."""

    name: str = Field(description="Name of the item")
    value: int = Field(description="Value of the item")


class MiddleModel(BaseModel):
    """Represents the middle nested level."""

    title: str = Field(description="Title of the page")
    items: list[NestedModel] = Field(description="List of nested items")


class TopModel(BaseModel):
    """Represents the top-level structure."""

    name: str = Field(description="Name of the collection")
    pages: list[MiddleModel] = Field(description="List of pages")


def _without_property_titles(schema: Any) -> Any:
    """A schema without the titles pydantic gives each property (`"title": "Name"`):
    annotations, which constrain nothing. A property may itself be named `title`."""
    if isinstance(schema, list):
        return [_without_property_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {
                name: {k: v for k, v in _without_property_titles(sub).items() if k != "title"}
                for name, sub in value.items()
            }
        else:
            out[key] = _without_property_titles(value)
    return out


def test_native_extraction_asks_what_the_recording_asked(server: _Server) -> None:
    """The recording asked Gemini 2.5 for nested models with `responseJsonSchema`;
    extracting the same models asks for the same, give or take the titles pydantic puts on
    properties, and with the objects closed (see `normal`); and its recorded answer is read
    back as the models."""
    case = _named("gemini/response_schema_nested_models")
    recorded = case.request_body
    assert recorded is not None
    route = "extract-recorded"
    server.routes[route] = _serve_case(case)
    request = ChatRequest(case.model).user(recorded["contents"][0]["parts"][0]["text"])
    extracted = allama.extract(_provider(server, route), TopModel, request)
    answer = case.data["response_body"]["candidates"][0]["content"]["parts"][0]["text"]
    assert extracted.value == TopModel.model_validate_json(answer)
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    sent = _check_sent(server, route, stream=False, model=case.model)["generationConfig"]
    asked = {k: v for k, v in recorded["generationConfig"].items() if k != "responseModalities"}
    assert set(sent) == set(asked) == {"responseMimeType", "responseJsonSchema"}
    assert sent["responseMimeType"] == asked["responseMimeType"]
    schema = _without_property_titles(sent["responseJsonSchema"])
    assert schema == closed(asked["responseJsonSchema"])


def _check_forced_tool(sent: dict[str, Any]) -> dict[str, Any]:
    """The request of a forced-tool pass; returns the tool's schema."""
    assert not _has_response_schema(sent)
    assert "responseMimeType" not in (sent.get("generationConfig") or {})
    assert sent["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [EXTRACTION_TOOL]}
    }
    ((declaration,),) = [entry["functionDeclarations"] for entry in sent["tools"]]
    assert declaration["name"] == EXTRACTION_TOOL
    schema: dict[str, Any] = declaration["parametersJsonSchema"]
    return schema


def test_a_recursive_type_falls_back_to_the_forced_tool_before_sending(server: _Server) -> None:
    """Gemini unrolls a recursive response schema only so deep, which would narrow it: the
    native attempt is refused before anything is sent, and the forced tool is asked instead
    (Gemini has no strict function calling, so the schema is not enforced)."""
    target = _provider(server, "extract-tree")
    extracted = allama.extract(target, Node, ChatRequest(MODEL).user("Draw the tree"))
    assert extracted.value == Node.model_validate(TREE)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL
    assert metadata.passes == 1
    assert metadata.auto_fallback is not None
    assert metadata.auto_fallback.field is RequestField.RESPONSE_FORMAT
    assert metadata.auto_fallback.stage is UnsupportedStage.BEFORE_SENDING
    assert metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert metadata.degradations
    # The refused native attempt sent nothing: exactly one request reached the server.
    schema = _check_forced_tool(_check_sent(server, "extract-tree", stream=False))
    assert schema["type"] == "object" and "$ref" not in schema  # an object root
    assert schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_a_schema_the_provider_refuses_ends_a_verified_native_extraction(server: _Server) -> None:
    """Gemini 2.5 is known to take a response schema, so native output was not a guess: its
    400 ("too many states") is raised as it is, with the record of the extraction, and the
    forced tool is not asked (the seed's `only_a_refused_response_format_falls_back...`:
    after a refusal by the provider, only a guessed native mode falls back)."""
    route = "extract-rejected/verified"
    server.routes[route] = server.routes["extract-rejected"]
    with pytest.raises(UnsupportedError) as caught:
        allama.extract(_provider(server, route), City, TELL)
    error = caught.value
    assert (error.field, error.stage) == (RequestField.RESPONSE_FORMAT, UnsupportedStage.PROVIDER)
    assert (error.status, error.provider) == (400, "gemini")
    record = ExtractionMetadata.from_error(error)
    assert record is not None
    assert (record.mode, record.auto_fallback, record.passes) == (ExtractionMode.NATIVE, None, 0)
    sent = _check_sent(server, route, stream=False)
    assert sent["generationConfig"]["responseMimeType"] == "application/json"
    assert "responseJsonSchema" in sent["generationConfig"] and "tools" not in sent


def test_a_schema_the_provider_refuses_after_a_guess_falls_back(server: _Server) -> None:
    """With capability answers that only let `auto` guess native output, the same 400 costs
    nothing and the forced tool is asked next."""
    route = "extract-rejected/guessed"
    server.routes[route] = server.routes["extract-rejected"]
    unknown = CapabilitySupport.UNKNOWN
    target = CapabilityOverrideProvider(
        _provider(server, route),
        {
            ChatCapability.STRUCTURED_OUTPUT: unknown,
            ChatCapability.TOOL_CALLS: unknown,
            ChatCapability.FORCED_TOOL_CHOICE: unknown,
        },
    )
    extracted = allama.extract(target, City, TELL)
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL and metadata.passes == 1
    assert metadata.auto_fallback is not None
    assert metadata.auto_fallback.stage is UnsupportedStage.PROVIDER
    first, second = server.requests_to(route)
    native = _check_request(first, route, stream=False)
    assert native["generationConfig"]["responseMimeType"] == "application/json"
    assert _has_response_schema(native) and "tools" not in native
    _check_forced_tool(_check_request(second, route, stream=False))


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini", "vertex"])
def test_a_blocked_prompt_is_a_refusal_with_the_providers_explanation(
    server: _Server, vertex: bool
) -> None:
    """A 200 without candidates whose `promptFeedback` has a block reason: the provider
    declined, and says why (Vertex in its own words, the Gemini API by the reason alone);
    not a parse failure of a missing answer."""
    route = f"extract-blocked/{'vertex' if vertex else 'gemini'}"
    server.routes[route] = server.routes["extract-blocked"]
    with pytest.raises(RefusedError) as caught:
        allama.extract(_provider(server, route, vertex=vertex), City, TELL)
    failure = caught.value
    assert failure.source == RefusalSource.PROVIDER
    assert failure.mode is ExtractionMode.NATIVE
    assert failure.finish_reason == FinishReason.CONTENT_FILTER
    if vertex:
        assert failure.text == BLOCKED_MESSAGE
    else:
        assert failure.text is not None and "PROHIBITED_CONTENT" in failure.text
    assert failure.text not in str(failure.as_log())
    assert failure.metadata.passes == 1
    assert failure.response is not None and failure.response.content == ()
    _check_sent(server, route, stream=False, prefix=VERTEX_PREFIX if vertex else API, vertex=vertex)


def test_extract_stream_over_a_streamed_function_call(server: _Server) -> None:
    """The Gemini API sends a function call whole, in one chunk: the one partial value is
    the final one, typed."""
    target = _provider(server, "extract-tool-stream")
    request = ChatRequest(MODEL).user("Count").with_option(ExtractionMode.FORCED_TOOL)
    partials: list[Tally] = []
    with allama.extract_stream(target, Tally, request) as stream:
        for _ in stream:
            value = stream.partial
            if value is not None and (not partials or value != partials[-1]):
                partials.append(value)
        extracted = stream.finish()
    final = Tally.model_validate(TALLY)
    assert extracted.value == final
    assert partials == [final] and all(isinstance(p, Tally) for p in partials)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL and metadata.passes == 1
    assert metadata.auto_fallback is None
    assert metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert metadata.usage is not None
    assert (metadata.usage.input_tokens, metadata.usage.output_tokens) == (300, 70)
    schema = _check_forced_tool(_check_sent(server, "extract-tool-stream", stream=True))
    assert schema["properties"]["counts"]["additionalProperties"] == {"type": "integer"}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_extract_stream_over_streamed_json_text(server: _Server, flavour: str) -> None:
    route = _route_for(server, "extract-text-stream", flavour)
    target = _provider(server, route)
    request = ChatRequest(MODEL).user("Count the fruit")
    partials: list[Tally] = []

    def keep(value: Tally | None) -> None:
        if value is not None and (not partials or value != partials[-1]):
            partials.append(value)

    async def run_async() -> Any:
        async with allama.aextract_stream(target, Tally, request) as astream:
            async for _ in astream:
                keep(astream.partial)
            return await astream.finish()

    if flavour == "async":
        extracted = asyncio.run(run_async())
    else:
        with allama.extract_stream(target, Tally, request) as stream:
            for _ in stream:
                keep(stream.partial)
            extracted = stream.finish()
    final = Tally.model_validate(TALLY)
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
    assert metadata.mode is ExtractionMode.NATIVE and metadata.passes == 1
    assert metadata.enforcement is SchemaEnforcement.EXACT
    sent = _check_sent(server, route, stream=True)
    schema = sent["generationConfig"]["responseJsonSchema"]
    assert schema["properties"]["counts"]["additionalProperties"] == {"type": "integer"}
