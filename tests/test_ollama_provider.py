"""The Ollama provider end to end, over real sockets on 127.0.0.1.

A local HTTP server answers every recorded native `/api/chat` case under `ALLAMA_CORPUS_DIR`
(default `../shared/corpus/cases` next to the repository), and `allama.provider("ollama",
base_url=...)` asks it the equivalent of the recorded request, with `chat`, `achat`,
`chat_stream` and `achat_stream`. The server answers as Ollama would the call it gets: a
recorded stream is streamed (NDJSON, in small chunks, chunked transfer encoding) to a
streamed call and put together into one body, as Ollama puts a `stream: false` answer
together, for a call that is not; a recorded body is sent as it is, or as the one line of a
stream (a body is a stream's last line, with everything in it). Expectations are read from
the recording alone: the thinking, text, tool calls, finish reason, usage, model and
creation time of a response. The reading assumes only what the wire format promises: counts,
durations, `done_reason`, ids and `thinking` may be missing, and fields may be new.

Where the request body was recorded, the equivalent `ChatRequest` must encode to it; the
differences allama makes on purpose are spelled out where the bodies are normalised.

Then what the recordings do not show: streams cut mid-way, an error line mid-stream, a model
the server does not have, a `format` it cannot compile, a busy server, a 429, the key kept
out of errors; and extraction end to end. The decoder-level replay (any chunking) is in
`test_ollama_decode.py`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from _recording import Recorder
from _replay_server import (
    CORPUS,
    CORPUS_IS_DEFAULT,
    ReplayServer,
    ReplyHandler,
)
from _replay_server import pieces as _pieces
from allama.errors import (
    AuthenticationError,
    Error,
    IncompleteStreamError,
    NetworkError,
    NotFoundError,
    OverloadedError,
    RateLimitedError,
    ServerError,
    UnsupportedError,
)
from allama.extract import (
    EXTRACTION_TOOL,
    ExtractionMode,
    ModeUnsupportedError,
    SchemaEnforcement,
)
from allama.providers import HttpProvider
from allama.types import (
    AssistantMessage,
    ChatRequest,
    ChatResponse,
    ContentBlock,
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
    ToolDefinition,
    ToolMessage,
    UnsupportedPolicy,
    UnsupportedStage,
    UserMessage,
    WarningKind,
)

KEY = "ollama-SECRET-test-key-4242"
CHAT_PATH = "/api/chat"
MODEL = "llama3.1"
NDJSON = "application/x-ndjson"


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
    def is_error(self) -> bool:
        return self.status >= 400 or (self.stream is not None and stream_error(self.stream))


def _load() -> list[Case]:
    """The native chat cases: those whose endpoint is `/api/chat` (not `/api/generate`, not
    the OpenAI-compatible `/v1`)."""
    if not CORPUS.is_dir():
        return []
    cases = []
    for path in sorted(CORPUS.glob("*/*.json")):
        data = json.loads(path.read_text())
        if str(data.get("endpoint") or "").split("?")[0].endswith(CHAT_PATH):
            cases.append(Case(f"{path.parent.name}/{path.stem}", data))
    return cases


def _ndjson(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def _synthetic(key: str, **data: Any) -> Case:
    """A recording of a shape the wire format allows, written here rather than captured."""
    base: dict[str, Any] = {
        "provider": "ollama",
        "endpoint": CHAT_PATH,
        "status": 200,
        "response_headers": {},
        "tags": ["synthetic"],
    }
    return Case(f"synthetic/{key}", {**base, **data})


_IMAGE = (  # a PNG of one pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
    "AAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
_WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city."}},
    "required": ["city"],
}

SYNTHETIC = [
    _synthetic(
        # Thinking streamed in pieces, two calls in one chunk (one without an id), counts
        # and durations only on the last line, fields nobody knows yet.
        "stream_thinking_and_two_calls",
        request_body={
            "model": "qwen3:8b",
            "messages": [{"role": "user", "content": "Weather in Paris and Zürich?"}],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "The weather in a city.",
                        "parameters": _WEATHER,
                    },
                }
            ],
            "think": False,
            "stream": True,
        },
        stream=_ndjson(
            {
                "model": "qwen3:8b",
                "created_at": "2026-08-01T10:00:00.1Z",
                "message": {"role": "assistant", "content": "", "thinking": "Two "},
                "done": False,
            },
            {
                "model": "qwen3:8b",
                "created_at": "2026-08-01T10:00:00.2Z",
                "message": {"role": "assistant", "content": "", "thinking": "cities."},
                "done": False,
                "brand_new": {"x": 1},
            },
            {
                "model": "qwen3:8b",
                "created_at": "2026-08-01T10:00:00.3Z",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_k3v9x2ab",
                            "function": {
                                "index": 0,
                                "name": "get_weather",
                                "arguments": {"city": "Paris"},
                            },
                        },
                        {
                            "function": {
                                "index": 1,
                                "name": "get_weather",
                                "arguments": {"city": "Zürich"},
                            }
                        },
                    ],
                },
                "done": False,
            },
            {
                "model": "qwen3:8b",
                "created_at": "2026-08-01T10:00:00.4Z",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "total_duration": 900,
                "prompt_eval_count": 120,
                "eval_count": 33,
            },
        ),
    ),
    _synthetic(
        # Cut by `num_predict`, no prompt count (a cached prompt, on older versions).
        "length_without_prompt_count",
        response_body={
            "model": "llama3.1",
            "created_at": "2026-08-01T10:00:00Z",
            "message": {"role": "assistant", "content": "Once upon a"},
            "done": True,
            "done_reason": "length",
            "eval_count": 3,
        },
    ),
    _synthetic(
        "stream_error_line_after_text",
        tags=["synthetic", "in_stream_error"],
        stream=_ndjson(
            {
                "model": MODEL,
                "message": {"role": "assistant", "content": "Half an "},
                "done": False,
            },
            {"model": MODEL, "message": {"role": "assistant", "content": "answer"}, "done": False},
            {"error": "an error was encountered while running the model: unexpected EOF"},
        ),
    ),
    _synthetic(
        "error_404_model_not_found",
        status=404,
        response_headers={"content-type": "application/json; charset=utf-8"},
        response_body={"error": "model 'llama9' not found"},
    ),
    _synthetic(
        "error_500_invalid_format",
        status=500,
        tags=["synthetic", "invalid_schema"],
        response_headers={"content-type": "application/json; charset=utf-8"},
        response_body={
            "error": 'invalid format: "yaml"; expected "json" or a valid JSON Schema object'
        },
    ),
    _synthetic(
        "error_503_busy",
        status=503,
        response_headers={"content-type": "application/json; charset=utf-8"},
        response_body={
            "error": "server busy, please try again.  maximum pending requests exceeded"
        },
    ),
    _synthetic(
        "error_429_cloud",
        status=429,
        response_headers={"content-type": "application/json", "retry-after": "12"},
        response_body={"error": "you have reached your hourly usage limit"},
    ),
    _synthetic(
        # A request with every shape the harness maps: system turns, text and an image,
        # an assistant turn with thinking and calls (with and without an id), results
        # naming their function, tools, a schema, sampling, thinking off, fields allama has
        # no name for.
        "request_with_every_shape",
        request_body={
            "model": "qwen3:8b",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is in this image?", "images": [_IMAGE]},
                {
                    "role": "assistant",
                    "content": "Let me look the cities up.",
                    "thinking": "Two cities to look up.",
                    "tool_calls": [
                        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                        {
                            "id": "call_zq81mv0c",
                            "function": {"name": "get_weather", "arguments": {"city": "Zürich"}},
                        },
                    ],
                },
                {"role": "tool", "content": "Sunny", "tool_name": "get_weather"},
                {
                    "role": "tool",
                    "content": "Snow",
                    "tool_name": "get_weather",
                    "tool_call_id": "call_zq81mv0c",
                },
                {"role": "assistant", "content": "Paris is sunny, Zürich has snow."},
                {"role": "user", "content": "Thanks. As JSON?"},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "get_weather", "parameters": _WEATHER},
                }
            ],
            "format": {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            },
            "options": {
                "temperature": 0.3,
                "top_p": 0.9,
                "seed": 7,
                "num_predict": 128,
                "stop": ["###"],
                "num_ctx": 8192,
            },
            "think": False,
            "keep_alive": "10m",
            "stream": False,
        },
        response_body={
            "model": "qwen3:8b",
            "created_at": "2026-08-01T10:00:00Z",
            "message": {"role": "assistant", "content": '{"answer": "You are welcome."}'},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 80,
            "eval_count": 9,
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


@dataclass
class Expected:
    thinking: str | None
    text: str | None
    calls: list[tuple[str, str, Any]]
    """(id, name, arguments as a value)."""
    finish: str | None
    usage: tuple[int | None, int | None] | None
    model: str | None
    created_at: str | None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stream_lines(stream: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.splitlines() if line.strip()]


def stream_error(stream: str) -> bool:
    return any("error" in line and "message" not in line for line in stream_lines(stream))


def read(messages: list[dict[str, Any]], last: dict[str, Any], asked: str) -> Expected:
    """What the messages of a response (one body, or the lines of a stream in order) and its
    last object say: texts joined, calls in order (numbered where Ollama gave no id), `stop`
    with calls read as tool calls, a count not reported unknown."""
    calls = [call for message in messages for call in message.get("tool_calls") or []]
    reason = last.get("done_reason") or None
    if reason == "stop" and calls:
        reason = "tool_calls"
    prompt, generated = _int(last.get("prompt_eval_count")), _int(last.get("eval_count"))
    thinking = "".join(str(m.get("thinking") or "") for m in messages)
    text = "".join(str(m.get("content") or "") for m in messages)
    model = next((m for m in (last.get("model"),) if isinstance(m, str) and m), None)
    return Expected(
        thinking or None,
        text or None,
        [
            (
                call.get("id") or f"call_{n}",
                call["function"]["name"],
                call["function"].get("arguments", {}),
            )
            for n, call in enumerate(calls)
        ],
        reason,
        None if prompt is None and generated is None else (prompt, generated),
        model or asked,
        last.get("created_at"),
    )


def read_stream(stream: str, asked: str) -> tuple[Expected, dict[str, Any] | None]:
    """The response a stream adds up to, as far as it goes, and the error line that ended
    it, if one did. The model is the first line's."""
    lines = stream_lines(stream)
    taken: list[dict[str, Any]] = []
    error = None
    for line in lines:
        if "error" in line and "message" not in line:
            error = line
            break
        taken.append(line)
        if line.get("done") is True:
            break
    last = taken[-1] if taken and taken[-1].get("done") is True else {}
    first_model = taken[0].get("model") if taken else None
    expected = read(
        [line.get("message") or {} for line in taken], {**last, "model": first_model}, asked
    )
    return expected, error


def expected_of(case: Case, asked: str) -> Expected:
    if case.stream is not None:
        return read_stream(case.stream, asked)[0]
    body = case.data["response_body"]
    return read([body.get("message") or {}], body, asked)


def as_body(stream: str) -> dict[str, Any]:
    """A stream put together as Ollama puts the answer of `stream: false` together: the
    thinking and content joined, the calls collected, the last line's fields."""
    lines = stream_lines(stream)
    messages = [line.get("message") or {} for line in lines]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(str(m.get("content") or "") for m in messages),
    }
    thinking = "".join(str(m.get("thinking") or "") for m in messages)
    if thinking:
        message["thinking"] = thinking
    calls = [call for m in messages for call in m.get("tool_calls") or []]
    if calls:
        message["tool_calls"] = calls
    return {**lines[-1], "model": lines[0].get("model"), "message": message}


def check(response: ChatResponse, expected: Expected) -> None:
    assert response.reasoning() == expected.thinking
    assert response.text() == expected.text
    calls = [(c.id, c.name, c.parsed_arguments()) for c in response.tool_calls()]
    assert calls == expected.calls
    assert response.finish_reason == expected.finish
    usage = response.usage
    assert (None if usage is None else (usage.input_tokens, usage.output_tokens)) == (
        expected.usage
    )
    assert response.model == expected.model
    assert response.provider_value("ollama", "created_at") == expected.created_at
    assert response.provider == "ollama" and response.id is None


def expected_error(case: Case) -> type[Error]:
    """The class a recorded error stands for: by its tags, its status, its message."""
    tags = set(case.data.get("tags") or [])
    if "invalid_schema" in tags:
        return UnsupportedError
    if case.status == 404:
        return NotFoundError
    if case.status == 429:
        return RateLimitedError
    if case.status == 503:
        return OverloadedError
    return ServerError


def check_error(error: Error, case: Case, asked: str, *, stream: bool = True) -> None:
    """`stream`: whether the call was streamed (an error line ends a stream; a call that was
    not streamed gets the error with status 500 instead)."""
    assert type(error) is expected_error(case)
    assert error.provider == "ollama" and error.model == asked
    if case.status >= 400:
        assert error.status == case.status
    else:
        assert error.status == (None if stream else 500)
    if case.headers.get("retry-after", "").isdigit():
        assert error.retry_after == float(case.headers["retry-after"])
    else:
        assert error.retry_after is None
    if isinstance(error, NotFoundError):
        assert f"ollama pull {asked}" in error.message
    # The provider's words stay out of the log view; the key is nowhere.
    assert error.message not in str(error.as_log())
    for view in (str(error), repr(error), str(error.as_log()), error.to_json()):
        assert KEY not in view


def test_the_harness_reads_the_shapes_the_wire_allows() -> None:
    """What the independent reading makes of the synthetic recordings, spelled out, so that
    the harness and the adapter cannot agree on a wrong reading."""
    by_key = {case.key.removeprefix("synthetic/"): case for case in SYNTHETIC}
    two_calls = by_key["stream_thinking_and_two_calls"]
    assert expected_of(two_calls, "asked") == Expected(
        "Two cities.",
        None,
        [
            ("call_k3v9x2ab", "get_weather", {"city": "Paris"}),
            ("call_1", "get_weather", {"city": "Zürich"}),
        ],
        "tool_calls",
        (120, 33),
        "qwen3:8b",
        "2026-08-01T10:00:00.4Z",
    )
    assert two_calls.stream is not None
    whole = as_body(two_calls.stream)
    assert read([whole["message"]], whole, "asked") == expected_of(two_calls, "asked")
    assert expected_of(by_key["length_without_prompt_count"], "asked").usage == (None, 3)
    broken = by_key["stream_error_line_after_text"]
    assert broken.stream is not None and broken.is_error
    partial, error = read_stream(broken.stream, "asked")
    assert (partial.text, partial.finish, partial.model) == ("Half an answer", None, MODEL)
    assert error == {"error": "an error was encountered while running the model: unexpected EOF"}
    assert expected_error(broken) is ServerError
    assert expected_error(by_key["error_500_invalid_format"]) is UnsupportedError


def test_the_corpus_has_every_kind_of_case() -> None:
    recorded = [case for case in CASES if not case.key.startswith("synthetic/")]
    if not recorded:
        pytest.skip(f"no Ollama /api/chat cases under {CORPUS}")
    kinds = {(case.is_error, case.stream is not None) for case in recorded}
    assert {(False, False), (False, True)} <= kinds
    assert all(case.request_body is not None for case in recorded)


# Recorded requests as allama requests


class NoName(Exception):
    """A part of a recorded request allama has no name for."""


@dataclass(frozen=True)
class Built:
    request: ChatRequest
    passed: frozenset[str]
    """The recorded fields sent as they are through the `ollama` option (allama has no name
    for them), as `field` or `options.key`."""


_OPTION_FIELDS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "num_predict": "max_output_tokens",
}


def _only(message: dict[str, Any], *keys: str) -> None:
    if not set(message) <= {"role", "content", *keys}:
        extra = sorted(set(message) - {"role", "content", *keys})
        raise NoName(f"a `{message['role']}` message with {extra}")


def _assistant(message: dict[str, Any]) -> AssistantMessage:
    _only(message, "thinking", "tool_calls")
    blocks: list[ContentBlock] = []
    if message.get("thinking"):
        blocks.append(Reasoning(text=message["thinking"]))
    if message.get("content"):
        blocks.append(TextPart(text=message["content"]))
    for n, call in enumerate(message.get("tool_calls") or []):
        if not set(call) <= {"id", "function"}:
            raise NoName(f"a tool call with {sorted(call)}")
        function = call["function"]
        if not set(function) <= {"name", "arguments", "index"}:
            raise NoName(f"a function with {sorted(function)}")
        # A call Ollama gave no id gets the decoder's numbered id, which is not sent back.
        blocks.append(
            ToolCall.of(
                call.get("id") or f"call_{n}", function["name"], function.get("arguments", {})
            )
        )
    return AssistantMessage(content=tuple(blocks))


def _messages(raw: list[dict[str, Any]]) -> list[Message]:
    out: list[Message] = []
    pending: list[ToolCall] = []
    for message in raw:
        role = message["role"]
        content = message.get("content") or ""
        if role == "system":
            _only(message)
            out.append(SystemMessage(content=content))
        elif role == "user":
            _only(message, "images")
            parts: list[TextPart | ImagePart] = [TextPart(text=content)]
            # As data URLs, so that the recorded base64 text is sent as it is.
            parts += [
                ImagePart(url=f"data:image/png;base64,{image}")
                for image in message.get("images") or []
            ]
            out.append(UserMessage(content=tuple(parts)))
        elif role == "assistant":
            assistant = _assistant(message)
            pending = [block for block in assistant.content if isinstance(block, ToolCall)]
            out.append(assistant)
        elif role == "tool":
            _only(message, "tool_name", "tool_call_id")
            # The call it answers: by id, else the next one of that name (or any) in order.
            wanted = message.get("tool_call_id")
            named = message.get("tool_name")
            if wanted:
                answered = next((call for call in pending if call.id == wanted), None)
            else:
                answered = next((c for c in pending if named in (None, c.name)), None)
                if answered is None:
                    raise NoName("a tool result that answers no call")
                wanted = answered.id
            if answered is not None:
                pending.remove(answered)
            out.append(ToolMessage(tool_call_id=wanted, content=content))
        else:
            raise NoName(f"a message of role {role!r}")
    return out


_FUNCTION_KEYS = {"name", "description", "parameters"}


def _tools(raw: list[dict[str, Any]]) -> list[ToolDefinition]:
    tools = []
    for tool in raw:
        function = tool.get("function") or {}
        if tool.get("type") != "function" or not set(function) <= _FUNCTION_KEYS:
            raise NoName(f"a tool with {sorted(function)}")
        tools.append(
            ToolDefinition(
                name=function["name"],
                description=function.get("description") or None,
                parameters=function["parameters"],
            )
        )
    return tools


def request_from_body(body: dict[str, Any]) -> Built:
    """The `ChatRequest` allama users would write for a recorded body.

    A top-level field allama has no name for (`keep_alive`, `truncate`, `think` as a level
    the model's row does not know), and an option without an allama name (`num_ctx`), goes
    through the `ollama` option, which is what that option is for. A message allama cannot
    express raises `NoName`: passing the conversation itself through would leave nothing to
    compare.
    """
    body = normal(body)
    option: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    for name, value in body.items():
        if name in ("model", "stream", "messages"):
            continue
        if name == "tools":
            fields["tools"] = tuple(_tools(value))
        elif name == "format":
            fields["response_format"] = (
                ResponseFormat.json_object()
                if value == "json"
                else ResponseFormat.for_schema(value)
            )
        elif name == "options":
            rest = {}
            for key, setting in value.items():
                if key in _OPTION_FIELDS:
                    fields[_OPTION_FIELDS[key]] = setting
                elif key == "stop":
                    fields["stop"] = tuple(setting)
                else:
                    rest[key] = setting
            if rest:
                option["options"] = rest
        elif name == "think" and value is False:
            fields["reasoning_effort"] = "none"
        else:
            option[name] = value
    request = ChatRequest(body["model"], messages=tuple(_messages(body["messages"])), **fields)
    if option:
        request = request.with_option_json("ollama", option)
    passed = {name for name in option if name != "options"}
    passed |= {f"options.{key}" for key in option.get("options", {})}
    return Built(request, frozenset(passed))


def normal(body: dict[str, Any]) -> dict[str, Any]:
    """A body with the differences that mean nothing to Ollama taken out, applied to what
    allama sends and to the recording alike:

    - `stream` left out is `true`, Ollama's default (allama always sends it).
    - `format` `""` or `null` is no format; `options` `{}` or `null` is none; `keep_alive`,
      `think` and `tools` set to `null` (or `tools: []`) are their defaults.
    - A message's `images: []` or `tool_calls: []` is none.
    - `truncate: false`, which allama always sends (a prompt past `num_ctx` is then an
      error, not cut), is left out: these recordings fit their context, where Ollama's
      default (`true`) cuts nothing either. `truncate: true` is still a difference.

    Everything else is compared as it is, `format` schemas included: allama rewrites a
    schema for llama.cpp's converter, but only where it would be read the same (`\\d` spelled
    out, say) or on purpose: an integer without both bounds gets int64's ends (alone, a
    bound or none lets the converter write at most 16 digits), which are left out here. So
    the schemas of these recordings come out unchanged, and a difference is a finding.
    """
    if isinstance(body.get("format"), dict):
        body = {**body, "format": _without_int64_ends(body["format"])}
    out = {
        key: value
        for key, value in body.items()
        if not (
            (key == "format" and value in ("", None))
            or (key == "options" and not value)
            or (key in ("keep_alive", "think") and value is None)
            or (key == "tools" and not value)
            or (key == "truncate" and value is False)
        )
    }
    out["stream"] = body.get("stream", True) is not False
    out["messages"] = [
        {
            key: value
            for key, value in message.items()
            if not (key in ("images", "tool_calls") and not value)
        }
        for message in body.get("messages") or []
    ]
    return out


def _without_int64_ends(node: Any) -> Any:
    """`node` without the int64 ends allama gives an integer's unbounded sides."""
    if isinstance(node, list):
        return [_without_int64_ends(item) for item in node]
    if not isinstance(node, dict):
        return node
    ends = {"minimum": -(2**63 - 2), "maximum": 2**63 - 2}
    integer = node.get("type") == "integer"
    return {
        key: _without_int64_ends(value)
        for key, value in node.items()
        if not (integer and ends.get(key) == value)
    }


def named_results(body: dict[str, Any]) -> dict[str, Any]:
    """The recording with the one thing allama adds on purpose: a tool result names the
    function it answers (`tool_name`) when the call is in the conversation. Results answer
    the calls of the assistant turn before them, by id or in order."""
    messages = []
    pending: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        if message.get("role") == "assistant":
            pending = list(message.get("tool_calls") or [])
        elif message.get("role") == "tool" and pending:
            wanted = message.get("tool_call_id")
            call = next((c for c in pending if not wanted or c.get("id") == wanted), None)
            if call is not None:
                pending.remove(call)
                message = {**message, "tool_name": call["function"]["name"]}
        messages.append(message)
    return {**body, "messages": messages}


# What the recorded fields allama has no name for are, in the shared corpus: each of these
# is sent as recorded through the `ollama` option, and compared as such.
PASSED_THROUGH: dict[str, set[str]] = {
    "synthetic/request_with_every_shape": {"keep_alive", "options.num_ctx"},
}


def _built(case: Case) -> Built:
    assert case.request_body is not None
    try:
        return request_from_body(case.request_body)
    except NoName as why:
        pytest.skip(f"the recorded conversation has {why}, which allama does not write")


def _offline() -> HttpProvider:
    return allama.provider("ollama", api_key=KEY, base_url="http://127.0.0.1:9")


@pytest.mark.parametrize("case", WITH_REQUESTS, ids=_ids(WITH_REQUESTS))
def test_equivalent_request_encodes_to_the_recorded_body(case: Case) -> None:
    recorded = case.request_body
    assert recorded is not None
    built = _built(case)
    if CORPUS_IS_DEFAULT or case.key.startswith("synthetic/"):
        assert built.passed == PASSED_THROUGH.get(case.key, set())
    stream = normal(recorded)["stream"]
    http, warnings = _offline()._prepare(built.request, stream=stream)
    assert http.url == f"http://127.0.0.1:9{CHAT_PATH}"
    assert json.loads(http.content) == http.body
    assert normal(http.body) == normal(named_results(recorded))
    # Recorded requests were accepted as sent: nothing in them is refused before sending.
    # (A `format` is approximate, as on any Ollama.)
    assert [w for w in warnings if w.kind is WarningKind.UNSUPPORTED] == []
    assert all(w.subject.field is RequestField.RESPONSE_FORMAT for w in warnings)  # type: ignore[union-attr]


def test_the_normalisation_leaves_a_real_difference_a_difference() -> None:
    """The comparison above is not loosened past what it says: a changed field still fails."""
    case = _named("synthetic/request_with_every_shape")
    assert case.request_body is not None
    http, _ = _offline()._prepare(_built(case).request, stream=False)
    sent = http.body
    recorded = named_results(case.request_body)
    assert normal(sent) == normal(recorded)
    messages = sent["messages"]
    for change in (
        {"stream": True},
        {"think": True},
        {"format": "json"},
        {"options": {**sent["options"], "num_ctx": 4096}},
        {"keep_alive": 0},
        {"truncate": True},
        {"messages": [*messages[:-1], {"role": "user", "content": "Thanks!"}]},
        {"messages": [messages[0], {**messages[1], "images": []}, *messages[2:]]},
        {"messages": [*messages[:3], {**messages[3], "tool_name": "other"}, *messages[4:]]},
    ):
        assert normal({**sent, **change}) != normal(recorded), change


# The server


class _Server(ReplayServer):
    routes: dict[str, Callable[[_Handler], None]]
    seen: list[tuple[str, dict[str, str], dict[str, Any]]]
    lock: threading.Lock

    def requests_to(self, route: str) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
        with self.lock:
            return [entry for entry in self.seen if entry[0].startswith(f"/{route}/")]


class _Handler(ReplyHandler):
    json_type = "application/json; charset=utf-8"
    stream_type = NDJSON
    server: _Server
    request_body: dict[str, Any]

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.request_body = body
        with self.server.lock:
            self.server.seen.append((self.path, headers, body))
        route = self.path.split("?")[0].removesuffix(CHAT_PATH).strip("/")
        self.server.routes[route](self)

    @property
    def streamed(self) -> bool:
        """Whether the call asked for a stream (Ollama's default when it does not say)."""
        return self.request_body.get("stream", True) is not False

    def answer(self, lines: list[dict[str, Any]]) -> None:
        """Answer as Ollama does the call it got: the lines streamed, or put together."""
        text = _ndjson(*lines)
        if self.streamed:
            self.send_stream(text.encode())
        else:
            self.send_json(200, as_body(text))


_FRAMING = ("content-length", "transfer-encoding", "connection")


def _serve_case(case: Case) -> Callable[[_Handler], None]:
    def serve(h: _Handler) -> None:
        headers = {k: v for k, v in case.headers.items() if k not in _FRAMING}
        if case.status >= 400:
            h.send_body(case.status, headers, json.dumps(case.data["response_body"]).encode())
        elif case.stream is not None and h.streamed:
            h.send_stream(case.stream.encode(), {**headers, "content-type": NDJSON})
        elif case.stream is not None and case.is_error:
            # Nothing was written yet when a `stream: false` call fails: a status, the error.
            h.send_json(500, read_stream(case.stream, MODEL)[1])
        elif case.stream is not None:
            h.send_json(200, as_body(case.stream), headers)
        else:
            body = json.dumps(case.data["response_body"]).encode()
            if h.streamed:
                # A final body is the last line of a stream, with everything in it.
                h.send_stream(body + b"\n", {**headers, "content-type": NDJSON})
            else:
                h.send_body(200, headers, body)

    return serve


def _line(content: str = "", *, done: bool = False, **fields: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "model": MODEL,
        "created_at": "2026-08-01T10:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": done,
    }
    if done:
        line.update(done_reason="stop", prompt_eval_count=12, eval_count=9)
    return {**line, **fields}


WORDS = ("Hello", " there", ", wor", "ld")
TEXT_LINES = [*(_line(word) for word in WORDS), _line(done=True)]
BEFORE_DONE = _ndjson(*TEXT_LINES[:-1])
"""The stream up to its last text line, at a line boundary."""


class City(BaseModel):
    city: str
    country: str
    population: int


class Tally(BaseModel):
    store: str
    counts: dict[str, int]


LONDON = {"city": "London", "country": "United Kingdom", "population": 9002488}
TALLY_PIECES = ('{"store": "No', 'rth", "cou', 'nts": {"apples', '": 3, "pea', 'rs": 12}}')


def _routes() -> dict[str, Callable[[_Handler], None]]:
    def text(h: _Handler) -> None:
        h.answer(TEXT_LINES)

    def cut_between(h: _Handler) -> None:
        h.send_stream(BEFORE_DONE.encode())

    def cut_inside(h: _Handler) -> None:
        done = _ndjson(TEXT_LINES[-1])
        h.send_stream((BEFORE_DONE + done[: len(done) // 2]).encode())

    def dropped(h: _Handler) -> None:
        h.start_chunked()
        for piece in _pieces(BEFORE_DONE.encode(), 13):
            h.chunk(piece)
        h.drop()

    def busy_mid_stream(h: _Handler) -> None:
        error = {"error": "server busy, please try again.  maximum pending requests exceeded"}
        h.send_stream((BEFORE_DONE + _ndjson(error, TEXT_LINES[-1])).encode())

    def not_found(h: _Handler) -> None:
        h.send_json(404, {"error": f"model '{h.request_body.get('model')}' not found"})

    def auth_echo(h: _Handler) -> None:
        auth = h.headers.get("authorization", "")
        h.send_json(401, {"error": f"unauthorized: {auth}"})

    def extract_native(h: _Handler) -> None:
        h.answer([_line(json.dumps(LONDON), done=True)])

    def extract_pieces(h: _Handler) -> None:
        h.answer([*(_line(piece) for piece in TALLY_PIECES), _line(done=True)])

    def extract_tool(h: _Handler) -> None:
        call = {"function": {"name": EXTRACTION_TOOL, "arguments": LONDON}}
        h.answer(
            [_line(done=True, message={"role": "assistant", "content": "", "tool_calls": [call]})]
        )

    return {
        "text": text,
        "cut-between": cut_between,
        "cut-inside": cut_inside,
        "dropped": dropped,
        "busy-mid-stream": busy_mid_stream,
        "not-found": not_found,
        "auth-echo": auth_echo,
        "extract-native": extract_native,
        "extract-pieces": extract_pieces,
        "extract-tool": extract_tool,
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


def _provider(server: _Server, route: str, **options: Any) -> HttpProvider:
    return allama.provider(
        "ollama", **{"api_key": KEY, "base_url": _base(server, route), **options}
    )


def _use(server: _Server, route: str, how: str) -> str:
    """A route of its own for one call, so that its requests are counted alone."""
    mine = f"{route}/{how}"
    server.routes[mine] = server.routes[route]
    return mine


def _check_sent(server: _Server, route: str, *, stream: bool) -> dict[str, Any]:
    """The one request the route got: its path and headers; returns its body."""
    seen = server.requests_to(route)
    assert len(seen) == 1
    path, headers, body = seen[0]
    assert path == f"/{route}{CHAT_PATH}"
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == (NDJSON if stream else "application/json")
    assert body["stream"] is stream
    return body


# Replay over the socket

CALLS = ["chat", "achat", "chat_stream", "achat_stream"]


def _replay_request(case: Case) -> tuple[ChatRequest, bool]:
    """The equivalent of the recorded request, and whether it is one; a plain request where
    none was recorded (or allama does not write its conversation)."""
    if case.request_body is not None:
        try:
            return request_from_body(case.request_body).request, True
        except NoName:
            return ChatRequest(case.request_body["model"]).user("Hello"), False
    return ChatRequest(MODEL).user("Hello"), False


class _Failed(Exception):
    def __init__(self, error: Error, partial: ChatResponse | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.partial = partial


def _call(target: HttpProvider, request: ChatRequest, how: str) -> ChatResponse:
    """The response of one call, or `_Failed` with its error and the stream's partial
    response (`None` when the call failed before a stream opened)."""

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
            with target.chat_stream(request) as stream:
                try:
                    return stream.response()
                except Error as error:
                    raise _Failed(error, stream.collector.partial_response()) from None
    except Error as error:
        raise _Failed(error, None) from None


@pytest.mark.parametrize("how", CALLS)
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_recorded_case_through_the_provider(server: _Server, case: Case, how: str) -> None:
    route = _use(server, case.route, how)
    target = _provider(server, route)
    request, rebuilt = _replay_request(case)
    stream = how.endswith("stream")
    sent, _ = target._prepare(request, stream=stream)
    if case.is_error:
        with pytest.raises(_Failed) as caught:
            _call(target, request, how)
        check_error(caught.value.error, case, request.model, stream=stream)
        if case.status < 400 and stream:
            # The lines before the error were paid for: what they said stays readable.
            assert case.stream is not None
            partial = caught.value.partial
            assert partial is not None
            expected = read_stream(case.stream, request.model)[0]
            assert (partial.text(), partial.finish_reason) == (expected.text, None)
    else:
        check(_call(target, request, how), expected_of(case, request.model))
    body = _check_sent(server, route, stream=stream)
    assert body == sent.body
    if rebuilt:
        # What was sent is the recorded request, asked the way this call asks.
        assert case.request_body is not None
        recorded = normal(named_results(case.request_body))
        assert normal(body) == {**recorded, "stream": stream}
    assert KEY not in repr(target)


# Sockets: what the recordings do not show

REQUEST = ChatRequest(MODEL).system("Be brief.").user("Hello")


def _stream_events(target: HttpProvider, how: str) -> tuple[list[StreamEvent], Any, Error]:
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

    if how == "achat_stream":
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


@pytest.mark.parametrize("how", CALLS)
def test_text_every_way(server: _Server, how: str) -> None:
    route = _use(server, "text", how)
    response = _call(_provider(server, route), REQUEST, how)
    assert response.text() == "".join(WORDS)
    assert response.finish_reason == "stop"
    assert response.usage is not None and (
        response.usage.input_tokens,
        response.usage.output_tokens,
    ) == (12, 9)
    body = _check_sent(server, route, stream=how.endswith("stream"))
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ]


@pytest.mark.parametrize("how", ["chat_stream", "achat_stream"])
@pytest.mark.parametrize(
    ("route", "cls"),
    [
        # The server ends the body cleanly between two lines, before the done line.
        ("cut-between", IncompleteStreamError),
        # ... or in the middle of the done line.
        ("cut-inside", IncompleteStreamError),
        # The connection breaks in the middle of a chunk.
        ("dropped", NetworkError),
    ],
)
def test_a_stream_cut_mid_way(server: _Server, route: str, cls: type[Error], how: str) -> None:
    events, collector, error = _stream_events(_provider(server, route), how)
    assert type(error) is cls
    assert error.retryable and error.provider == "ollama"
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
        assert text == "".join(WORDS)  # every text line before the cut was whole
    assert KEY not in repr(error) and KEY not in error.to_json()


@pytest.mark.parametrize("how", ["chat_stream", "achat_stream"])
def test_an_error_line_mid_stream(server: _Server, how: str) -> None:
    events, collector, error = _stream_events(_provider(server, "busy-mid-stream"), how)
    assert type(error) is OverloadedError
    assert error.retryable and error.status is None
    assert (error.provider, error.model) == ("ollama", MODEL)
    # The text before the error came first; nothing after it was read.
    assert _texts(events) == list(WORDS)
    assert collector.partial_response().text() == "".join(WORDS)
    assert collector.partial_response().finish_reason is None
    assert collector.error is error


@pytest.mark.parametrize("how", CALLS)
def test_a_model_the_server_does_not_have(server: _Server, how: str) -> None:
    route = _use(server, "not-found", how)
    with pytest.raises(_Failed) as caught:
        _call(_provider(server, route), ChatRequest("llama9:70b").user("Hi"), how)
    error = caught.value.error
    assert type(error) is NotFoundError
    assert (error.status, error.retryable, error.model) == (404, False, "llama9:70b")
    assert error.message == "model 'llama9:70b' not found (pull it with `ollama pull llama9:70b`)"
    assert error.message not in str(error.as_log())
    _check_sent(server, route, stream=how.endswith("stream"))


@pytest.mark.parametrize("how", CALLS)
def test_the_key_reaches_the_server_and_nothing_else(server: _Server, how: str) -> None:
    route = _use(server, "auth-echo", how)
    target = _provider(server, route)
    assert KEY not in repr(target) and KEY not in str(target)
    with pytest.raises(_Failed) as caught:
        _call(target, REQUEST, how)
    error = caught.value.error
    assert type(error) is AuthenticationError and error.status == 401
    for view in (str(error), repr(error), str(error.as_log()), error.to_json(), error.message):
        assert KEY not in view
    assert error.context.body is not None and KEY not in error.context.body
    assert "unauthorized: Bearer <redacted>" in error.message
    # It did reach the server, in its own header and only there.
    seen = server.requests_to(route)
    assert len(seen) == 1
    _, headers, body = seen[0]
    assert [name for name, value in headers.items() if KEY in value] == ["authorization"]
    assert KEY not in json.dumps(body)


def test_without_a_key_no_authorization_is_sent(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    route = "text/keyless"
    server.routes[route] = server.routes["text"]
    target = allama.provider("ollama", base_url=_base(server, route))
    assert _call(target, REQUEST, "chat").text() == "".join(WORDS)
    ((_, headers, _),) = server.requests_to(route)
    assert "authorization" not in headers


@pytest.mark.parametrize("how", CALLS)
def test_the_body_options_stream_is_the_calls(server: _Server, how: str) -> None:
    """A body option's `stream` would make `chat` read Ollama's NDJSON as one JSON body
    (and the usage with it): the call's own is sent, and the option's dropped is said."""
    stream = how.endswith("stream")
    route = _use(server, "text", f"{how}/stream-option")
    request = REQUEST.with_option_json("ollama", {"stream": not stream, "keep_alive": "5m"})
    response = _call(_provider(server, route), request, how)
    assert response.text() == "".join(WORDS)
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 9)
    assert [(w.kind, w.is_about(RequestField.OPTIONS)) for w in response.warnings] == [
        (WarningKind.UNSUPPORTED, True)
    ]
    assert f"`stream` of the body option `ollama` ({json.dumps(not stream)}) was not sent" in (
        response.warnings[0].message
    )
    body = _check_sent(server, route, stream=stream)
    assert body["keep_alive"] == "5m"


@pytest.mark.parametrize("how", ["chat", "achat"])
@pytest.mark.parametrize("suffix", ["/api", "/api/", "/api/chat"])
def test_a_base_url_ending_in_the_api_path_reaches_the_server(
    server: _Server, suffix: str, how: str
) -> None:
    """`https://ollama.com/api`, as Ollama's documentation writes it: the server's own
    `/api/chat`, where `/api/api/chat` is its bare 404."""
    route = _use(server, "text", f"{how}/api-suffix{suffix.replace('/', '-')}")
    target = _provider(server, route, base_url=_base(server, route) + suffix)
    assert _call(target, REQUEST, how).text() == "".join(WORDS)
    _check_sent(server, route, stream=False)


# Extraction end to end

TELL = ChatRequest(MODEL).user("Tell me about London")
_UNREPORTED = (
    "the schema of `City` was approximated: the schema at `City` is compiled by Ollama's "
    "llama.cpp grammar converter, which does not report which keywords it enforces"
)
_INT64 = 2**63 - 2
"""An integer without both bounds is sent with int64's ends: alone, a bound (or none) lets
llama.cpp's converter write at most 16 digits."""
_NARROWED = (
    "the schema of `City` was approximated: `integer` was narrowed at `City.population`: "
    "llama.cpp's grammar writes integers only from -9223372036854775806 to "
    "9223372036854775806 (64 bits; bounds within them keep it exact)"
)


@pytest.mark.parametrize("how", ["sync", "async"])
def test_native_extraction_with_format(server: _Server, how: str) -> None:
    route = _use(server, "extract-native", how)
    target = _provider(server, route)
    if how == "async":
        extracted = asyncio.run(allama.aextract(target, City, TELL))
    else:
        extracted = allama.extract(target, City, TELL)
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.NATIVE
    assert (metadata.passes, metadata.auto_fallback) == (1, None)
    # Ollama does not report what it enforces: approximate, and the reason is given.
    assert metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message for w in metadata.degradations] == [_NARROWED, _UNREPORTED]
    assert metadata.usage is not None
    assert (metadata.usage.input_tokens, metadata.usage.output_tokens) == (12, 9)
    sent = _check_sent(server, route, stream=False)
    assert "tools" not in sent
    schema = sent["format"]
    assert schema["type"] == "object"
    assert schema["required"] == ["city", "country", "population"]
    assert {name: spec["type"] for name, spec in schema["properties"].items()} == {
        "city": "string",
        "country": "string",
        "population": "integer",
    }


def test_native_extraction_asks_what_the_recording_asked(server: _Server) -> None:
    """The documented example asked for an age and an availability with `format`;
    extracting that type asks for the same, give or take the titles pydantic puts in its
    schemas (annotations, which constrain nothing)."""
    case = _named("ollama/api_chat_format_json_schema_documented")
    recorded = case.request_body
    assert recorded is not None

    class Availability(BaseModel):
        age: int
        available: bool

    route = "replay/ollama/api_chat_format_json_schema_documented/extract"
    server.routes[route] = server.routes[case.route]
    request = ChatRequest(recorded["model"]).user(recorded["messages"][0]["content"])
    extracted = allama.extract(_provider(server, route), Availability, request.with_temperature(0))
    assert extracted.value == Availability(age=22, available=False)
    sent = _check_sent(server, route, stream=False)

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if k != "title"}
        return value

    bounded = {"minimum": -_INT64, "maximum": _INT64}
    age = {**recorded["format"]["properties"]["age"], **bounded}
    asked = {**recorded["format"], "properties": {**recorded["format"]["properties"], "age": age}}
    assert plain(sent["format"]) == asked
    assert normal({**sent, "format": recorded["format"]}) == normal(recorded)


def test_extract_stream_gives_typed_partials(server: _Server) -> None:
    route = "extract-pieces/stream"
    server.routes[route] = server.routes["extract-pieces"]
    target = _provider(server, route)
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
    assert metadata.mode is ExtractionMode.NATIVE and metadata.passes == 1
    assert metadata.enforcement is SchemaEnforcement.APPROXIMATE
    sent = _check_sent(server, route, stream=True)
    # A map: the grammar takes `additionalProperties` with a schema.
    assert sent["format"]["properties"]["counts"]["additionalProperties"] == {
        "type": "integer",
        "minimum": -_INT64,
        "maximum": _INT64,
    }


def test_a_forced_tool_is_offered_not_forced_and_reported_so(server: _Server) -> None:
    route = "extract-tool/warn"
    server.routes[route] = server.routes["extract-tool"]
    request = TELL.with_option(ExtractionMode.FORCED_TOOL)
    extracted = allama.extract(_provider(server, route), City, request)
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL
    assert metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert any(
        w.kind is WarningKind.UNSUPPORTED and "cannot force a tool call" in w.message
        for w in extracted.response.warnings
    )
    sent = _check_sent(server, route, stream=False)
    assert "tool_choice" not in sent and "format" not in sent
    assert [tool["function"]["name"] for tool in sent["tools"]] == [EXTRACTION_TOOL]
    assert "strict" not in sent["tools"][0]["function"]


def test_a_forced_tool_is_refused_before_sending_under_the_error_policy(server: _Server) -> None:
    route = "extract-tool/error"
    server.routes[route] = server.routes["extract-tool"]
    request = TELL.with_option(ExtractionMode.FORCED_TOOL).with_unsupported_policy(
        UnsupportedPolicy.ERROR
    )
    with pytest.raises(UnsupportedError) as caught:
        allama.extract(_provider(server, route), City, request)
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    assert server.requests_to(route) == []
    # Automatic extraction never picks it: Ollama answers that a tool cannot be forced.
    auto = allama.Extractor().plan(_provider(server, route), City, TELL)
    assert auto.mode is ExtractionMode.NATIVE


_CLOUD_ANSWER = {
    "model": "gpt-oss:120b",
    "created_at": "2026-08-01T10:00:00Z",
    "message": {"role": "assistant", "content": json.dumps(LONDON)},
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 12,
    "eval_count": 9,
}


@pytest.mark.parametrize("how", ["sync", "async"])
def test_extraction_on_ollamas_cloud_api_is_not_enforced(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Ollama's cloud API itself (`OLLAMA_HOST=ollama.com`) names its models without
    `-cloud`, and applies no `format`: auto mode has no mode to pick, as for a `-cloud`
    name, and a native extraction goes without `format`, recorded as not enforced."""
    monkeypatch.setenv("OLLAMA_HOST", "ollama.com")
    recorder = Recorder((200, _CLOUD_ANSWER))
    target = allama.provider("ollama", api_key=KEY, transport=recorder.transport())
    assert target.base_url == "https://ollama.com"
    tell = ChatRequest("gpt-oss:120b").user("Tell me about London")

    def extract(request: ChatRequest) -> Any:
        if how == "async":
            return asyncio.run(allama.aextract(target, City, request))
        return allama.extract(target, City, request)

    with pytest.raises(ModeUnsupportedError):
        extract(tell)
    assert recorder.bodies == []
    native = tell.with_option(ExtractionMode.NATIVE)
    with pytest.raises(UnsupportedError) as caught:
        extract(native.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.RESPONSE_FORMAT
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    assert recorder.bodies == []
    extracted = extract(native)
    assert extracted.value == City.model_validate(LONDON)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.NATIVE
    assert metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [w.message for w in metadata.degradations] == [
        "`gpt-oss:120b` on Ollama does not apply `format` (it runs on Ollama's cloud, which "
        "has no structured outputs); the output is unconstrained"
    ]
    [sent] = recorder.bodies
    assert "format" not in sent and sent["model"] == "gpt-oss:120b"


def test_ollama_host_as_the_server_itself_writes_it(
    monkeypatch: pytest.MonkeyPatch, server: _Server
) -> None:
    """`OLLAMA_HOST=0.0.0.0:<port>`, the server's setting to listen everywhere, reaches the
    server on this machine."""
    port = server.server_address[1]
    monkeypatch.setenv("OLLAMA_HOST", f"0.0.0.0:{port}")
    target = allama.provider("ollama", api_key=KEY)
    assert target.base_url == f"http://127.0.0.1:{port}"
    # No route prefix on this base URL: the server answers `/api/chat` itself.
    server.routes[""] = server.routes["text"]
    try:
        assert _call(target, REQUEST, "chat_stream").text() == "".join(WORDS)
    finally:
        del server.routes[""]
