"""The response side of the Ollama adapter: bodies, NDJSON streams and errors.

Unit tests spell out each mapping; a property test holds the stream decoder to the body
decoder (the same response, streamed as NDJSON and split anywhere, collects to what the body
decodes to); and a replay reads every recorded native `/api/chat` case under
`ALLAMA_CORPUS_DIR` (default `../shared/corpus/cases` next to the repository), with
expectations computed from the recording alone. The replay assumes only what the wire
format promises: counts, durations, `done_reason`, tool call ids and `thinking` may be
missing, and fields may be new.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._recording import provider

import allama
from allama import ChatRequest
from allama.adapters.ollama._decode import decode_response, finish_reason_of, usage_of
from allama.adapters.ollama._errors import error_from_payload, error_from_response
from allama.adapters.ollama._stream import OllamaStreamDecoder, decode_stream
from allama.adapters.openai_compat._decode import LONE_SURROGATES
from allama.errors import (
    AuthenticationError,
    ContextWindowExceededError,
    Error,
    IncompleteStreamError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    StreamDecodeError,
    UnsupportedError,
    paid_for,
)
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
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
)

# Helpers

CREATED = "2026-08-07T06:08:09.335586Z"
TIMINGS = {
    "total_duration": 1735248334,
    "load_duration": 139246000,
    "prompt_eval_count": 292,
    "prompt_eval_duration": 247164000,
    "eval_count": 143,
    "eval_duration": 1337032000,
}


def response(message: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A final body: `message` (an empty assistant message by default), `done_reason: stop`
    and the counts; `fields` replace the body's own (`None` removes one)."""
    base: dict[str, Any] = {
        "model": "qwen3:8b",
        "created_at": CREATED,
        "message": {"role": "assistant", "content": "", **(message or {})},
        "done": True,
        "done_reason": "stop",
        **TIMINGS,
    }
    base.update(fields)
    return {key: value for key, value in base.items() if value is not None}


def decode(body: dict[str, Any] | str, **kwargs: Any) -> ChatResponse:
    raw = body if isinstance(body, str) else json.dumps(body)
    return decode_response(200, {}, raw.encode(), **kwargs)


def ndjson(*lines: dict[str, Any] | str, ascii: bool = True, crlf: bool = False) -> bytes:
    """Chunks as Ollama writes them, one JSON object per line; a string goes as it is."""
    end = "\r\n" if crlf else "\n"
    out = [
        line if isinstance(line, str) else json.dumps(line, ensure_ascii=ascii) + end
        for line in lines
    ]
    return "".join(out).encode()


def chunk(message: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A chunk that is not the last."""
    return {
        "model": "qwen3:8b",
        "created_at": CREATED,
        "message": {"role": "assistant", **message},
        "done": False,
        **fields,
    }


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def collect_any(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish() if collector.finished else collector.partial_response()


def iter_split(data: bytes, cuts: Iterable[int], **kwargs: Any) -> Iterator[StreamEvent]:
    """The events of `data` fed in pieces cut at `cuts`, as they come."""
    decoder = OllamaStreamDecoder(**kwargs)
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        yield from decoder.feed(data[last:cut])
        last = cut
    yield from decoder.close()


def feed_split(data: bytes, cuts: Iterable[int], **kwargs: Any) -> list[StreamEvent]:
    return list(iter_split(data, cuts, **kwargs))


WEATHER_CALL = {
    "id": "call_gsiiy8py",
    "function": {
        "index": 0,
        "name": "get_weather",
        "arguments": {"zeta": 1, "alpha": "Zürich 東京", "nested": {"b": [1, 2], "a": None}},
    },
}
MIXED_MESSAGE = {
    "thinking": "Let me think about it.",
    "content": "Here it is.",
    "tool_calls": [WEATHER_CALL, {"function": {"name": "noop", "arguments": {}}}],
}
MIXED = response(MIXED_MESSAGE)
MIXED_CHUNKS = [
    chunk({"content": "", "thinking": "Let me "}),
    chunk({"content": "", "thinking": "think about it."}),
    chunk({"content": "Here"}),
    chunk({"content": " it is."}),
    chunk({"content": "", "tool_calls": [WEATHER_CALL]}),
    chunk({"content": "", "tool_calls": [{"function": {"name": "noop", "arguments": {}}}]}),
    response(),
]


# Bodies


def test_every_message_field_maps_to_its_block() -> None:
    result = decode(MIXED, provider="ollama", model="asked")
    assert result.content == (
        Reasoning(text="Let me think about it."),
        TextPart(text="Here it is."),
        ToolCall(
            id="call_gsiiy8py",
            name="get_weather",
            arguments='{"zeta":1,"alpha":"Zürich 東京","nested":{"b":[1,2],"a":null}}',
        ),
        # Ollama gave no id: numbered by the call's place among the response's calls.
        ToolCall(id="call_1", name="noop", arguments="{}"),
    )
    assert result.finish_reason == FinishReason.TOOL_CALLS
    assert result.usage == Usage(input_tokens=292, output_tokens=143)
    assert result.model == "qwen3:8b" and result.provider == "ollama" and result.id is None
    assert result.provider_data == {
        "ollama": {
            "created_at": CREATED,
            "total_duration": 1735248334,
            "load_duration": 139246000,
            "prompt_eval_duration": 247164000,
            "eval_duration": 1337032000,
        }
    }


def test_thinking_never_becomes_text() -> None:
    result = decode(response({"thinking": "secret plan"}))
    assert result.text() is None
    assert result.reasoning() == "secret plan"
    assert result.content == (Reasoning(text="secret plan"),)


def test_empty_fields_make_no_block() -> None:
    assert decode(response({"content": "", "thinking": ""})).content == ()
    assert decode(response(message=None)).content == ()
    assert decode({"model": "m", "done": True, "message": None}).content == ()
    result = decode({"model": "m", "done": True, "done_reason": "load"})
    assert (result.content, result.finish_reason, result.usage) == ((), "load", None)


def test_tool_calls_number_the_missing_ids_in_order() -> None:
    calls = [
        {"function": {"name": "a", "arguments": {"x": 1}}},
        {"id": "call_given1", "function": {"name": "b"}},
        {"id": "", "function": {"name": "c", "arguments": '{"raw": "text"}'}},
    ]
    result = decode(response({"tool_calls": calls}))
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls()] == [
        ("call_0", "a", '{"x":1}'),
        ("call_given1", "b", "{}"),
        ("call_2", "c", '{"raw": "text"}'),
    ]


@pytest.mark.parametrize(
    ("raw", "calls", "expected"),
    [
        ("stop", False, FinishReason.STOP),
        ("stop", True, FinishReason.TOOL_CALLS),
        ("length", False, FinishReason.LENGTH),
        ("length", True, FinishReason.LENGTH),
        ("load", False, FinishReason("load")),
        ("unload", False, FinishReason("unload")),
        ("brand_new", False, FinishReason("brand_new")),
        ("", False, None),
        (None, False, None),
        (7, False, None),
    ],
)
def test_finish_reasons(raw: Any, calls: bool, expected: FinishReason | None) -> None:
    found = finish_reason_of(raw, tool_calls=calls)
    assert found == expected
    if found is not None:
        assert found.is_other is (raw not in ("stop", "length"))


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({"prompt_eval_count": 17, "eval_count": 50}, Usage(input_tokens=17, output_tokens=50)),
        # Ollama omits a count that is zero; allama does not guess it.
        ({"eval_count": 50}, Usage(output_tokens=50)),
        ({"prompt_eval_count": 17}, Usage(input_tokens=17)),
        ({"prompt_eval_count": 0, "eval_count": 0}, Usage(input_tokens=0, output_tokens=0)),
        ({}, None),
        ({"prompt_eval_count": "17", "eval_count": True}, None),
    ],
)
def test_usage(counts: dict[str, Any], expected: Usage | None) -> None:
    assert usage_of(counts) == expected
    body = response(**{"prompt_eval_count": None, "eval_count": None, **counts})
    assert decode(body).usage == expected


def test_unknown_fields_are_tolerated() -> None:
    body = response(
        {"content": "ok", "images": None, "brand_new": [1]},
        logprobs=[{"token": "ok", "logprob": -0.1}],
        remote_model="gpt-oss:120b",
        remote_host="https://ollama.com:443",
        something_else={"x": 1},
    )
    result = decode(body)
    assert result.text() == "ok"
    assert result.provider_value("ollama", "remote_model") == "gpt-oss:120b"
    assert result.provider_value("ollama", "remote_host") == "https://ollama.com:443"


def test_model_falls_back_to_the_one_asked_for() -> None:
    result = decode(response({"content": "ok"}, model=None), model="asked")
    assert result.model == "asked"
    assert decode(response({"content": "ok"}, model=""), model="asked").model == "asked"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("not json", "it is not JSON"),
        ('{"model": "m", "done": true', "it is not JSON"),
        ("[1, 2]", "it is not a JSON object"),
        ('{"hello": 1}', "it has none of the fields of a response"),
        ('{"message": "hi"}', "its `message` is not an object"),
        ('{"message": {"content": 5}}', "its `content` is not a string"),
        ('{"message": {"thinking": ["x"]}}', "its `thinking` is not a string"),
        ('{"message": {"tool_calls": {}}}', "its `tool_calls` is not a list"),
        ('{"message": {"tool_calls": [1]}}', "a tool call is not an object"),
        ('{"message": {"tool_calls": [{"name": "f"}]}}', "a tool call has no `function` object"),
        ('{"message": {"tool_calls": [{"function": {}}]}}', "a tool call has no string `name`"),
    ],
)
def test_an_unreadable_body_is_a_server_error(body: str, why: str) -> None:
    with pytest.raises(ServerError) as caught:
        decode_response(200, {}, body.encode(), provider="ollama", model="m")
    error = caught.value
    assert error.message == f"the provider answered with a body that is not a response: {why}"
    assert error.authored and error.context.body == body
    assert (error.provider, error.model) == ("ollama", "m")


def test_an_escaped_lone_surrogate_is_read_as_u_fffd_with_a_warning() -> None:
    # It was kept as it came: the response then could not be written as JSON (`to_json`,
    # a batch's ledger). It is read as Chat Completions reads it.
    body = '{"model": "m", "message": {"content": "a\\ud800b"}, "done": true}'
    result = decode(body, provider="ollama")
    assert result.text() == "a\ufffdb"
    assert [(w.kind, w.message, w.provider) for w in result.warnings] == [
        ("approximated", LONE_SURROGATES, "ollama")
    ]
    assert ChatResponse.from_json(result.to_json()) == result


def test_an_error_object_in_a_200_body_is_that_error() -> None:
    with pytest.raises(NotFoundError, match="ollama pull llama9"):
        decode({"error": "model 'llama9' not found"}, provider="ollama", model="llama9")


# Another API's answers (a proxy's, a base URL that points elsewhere): each carries `model`
# (a Responses body `created_at` too), none Ollama's `message` or `done`.
FOREIGN_BODIES = {
    "chat_completion": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1754546889,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    },
    "responses": {
        "id": "resp_1",
        "object": "response",
        "created_at": 1754546889,
        "status": "completed",
        "model": "gpt-4o",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 4},
    },
    "chat_completion_chunk": {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1754546889,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}],
    },
}
NOT_A_RESPONSE = (
    "the provider answered with a body that is not a response: it has none of the fields of a "
    "response"
)


def _is_not_a_response(error: Error, body: str) -> None:
    """The error every decoder gives a 2xx body that is not its answer: a server error to
    try again, holding the body, its cost unknown (an empty usage, not none)."""
    assert type(error) is ServerError
    assert error.message == NOT_A_RESPONSE
    assert error.retryable and error.authored
    assert error.context.body == body
    assert paid_for(error) == [{"provider": "ollama", "model": "llama3.2", "usage": {}}]


@pytest.mark.parametrize("name", sorted(FOREIGN_BODIES))
def test_another_apis_body_is_not_an_empty_answer(name: str) -> None:
    body = json.dumps(FOREIGN_BODIES[name])
    with pytest.raises(ServerError) as caught:
        decode(body, provider="ollama", model="llama3.2")
    _is_not_a_response(caught.value, body)


@pytest.mark.parametrize("name", sorted(FOREIGN_BODIES))
def test_a_stream_whose_first_line_is_another_apis_is_not_an_empty_answer(name: str) -> None:
    line = json.dumps(FOREIGN_BODIES[name])
    data = ndjson(FOREIGN_BODIES[name], chunk({"content": "later"}), response())
    seen: list[StreamEvent] = []
    with pytest.raises(ServerError) as caught:
        for event in iter_split(data, [5], provider="ollama", model="llama3.2"):
            seen.append(event)
    assert seen == []
    _is_not_a_response(caught.value, line)


@pytest.mark.parametrize("labelled", ["application/json", "application/x-ndjson"])
@pytest.mark.parametrize("run_async", [False, True])
def test_a_streamed_call_answered_by_another_api_raises_not_a_response(
    labelled: str, run_async: bool
) -> None:
    """Through the provider: a whole chat completion under a 200, labelled JSON (read as a
    plain call's answer) or as Ollama's stream (read line by line), is the same error."""
    body = json.dumps(FOREIGN_BODIES["chat_completion"])

    def answer(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body.encode(), headers={"content-type": labelled})

    target = allama.provider(
        "ollama",
        base_url="http://127.0.0.1:11434",
        transport=Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(answer)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
        ),
    )
    request = ChatRequest("llama3.2").user("hi")

    async def read_async() -> None:
        async with await target.achat_stream(request) as stream:
            async for _ in stream:
                pass

    with pytest.raises(ServerError) as caught:
        if run_async:
            asyncio.run(read_async())
        else:
            with target.chat_stream(request) as stream:
                for _ in stream:
                    pass
    _is_not_a_response(caught.value, body)


def test_a_body_with_only_one_of_ollamas_fields_is_read() -> None:
    assert decode('{"done": true, "done_reason": "stop"}').finish_reason == "stop"
    assert decode('{"message": {"role": "assistant", "content": "hi"}}').text() == "hi"
    events = decode_stream(b'{"message": {"content": "hi"}}\n{"done": true}\n')
    assert collect(events).text() == "hi"


# Errors


def error_of(status: int, body: Any, headers: dict[str, str] | None = None, **kw: Any) -> Error:
    raw = body if isinstance(body, str) else json.dumps(body)
    return error_from_response(status, headers or {}, raw.encode(), provider="ollama", **kw)


@pytest.mark.parametrize(
    ("status", "message", "cls", "retryable"),
    [
        (
            400,
            "json: cannot unmarshal number into Go value of type string",
            InvalidRequestError,
            False,
        ),
        (400, "missing request body", InvalidRequestError, False),
        (401, "unauthorized", AuthenticationError, False),
        (403, "forbidden", PermissionDeniedError, False),
        (404, "404 page not found", NotFoundError, False),
        (408, "request timed out", RequestTimeoutError, True),
        (429, "too many requests", RateLimitedError, True),
        (499, "client closed the connection", InvalidRequestError, False),
        (500, "model runner has unexpectedly stopped", ServerError, True),
        (502, "cloud model unreachable", ServerError, True),
        (
            503,
            "server busy, please try again.  maximum pending requests exceeded",
            OverloadedError,
            True,
        ),
    ],
)
def test_every_status(status: int, message: str, cls: type[Error], retryable: bool) -> None:
    error = error_of(status, {"error": message}, model="llama3")
    assert type(error) is cls
    assert error.retryable is retryable
    assert error.message == message and error.status == status
    assert (error.provider, error.model) == ("ollama", "llama3")
    assert not error.authored
    assert error.context.body == json.dumps({"error": message})
    # The provider's words stay out of the log view.
    assert message not in str(error.as_log()) and message not in repr(error)


@pytest.mark.parametrize(
    ("message", "model", "said"),
    [
        (
            "model 'llama9' not found",
            "llama9",
            "model 'llama9' not found (pull it with `ollama pull llama9`)",
        ),
        # The error came without the request: the name the server quoted.
        (
            'model "qwen3:8b" not found',
            None,
            'model "qwen3:8b" not found (pull it with `ollama pull qwen3:8b`)',
        ),
        # Ollama's own words already say to pull: no second remedy.
        (
            'model "llama3.1" not found, try pulling it first',
            "llama3.1",
            'model "llama3.1" not found, try pulling it first',
        ),
        (
            "model 'llama3:70b' not found, try pulling it first",
            None,
            "model 'llama3:70b' not found, try pulling it first",
        ),
    ],
)
def test_a_missing_model_says_how_to_pull_it(message: str, model: str | None, said: str) -> None:
    error = error_of(404, {"error": message}, model=model)
    assert type(error) is NotFoundError and not error.retryable
    assert error.message == said
    assert error.model == model
    # In a stream, Ollama's own words alone say it.
    streamed = error_from_payload({"error": message}, model=model)
    assert type(streamed) is NotFoundError and streamed.message == said
    assert streamed.status is None and not streamed.retryable


def test_a_404_in_other_words_still_names_the_pull() -> None:
    error = error_of(404, {"error": "model not found"})
    assert type(error) is NotFoundError
    assert error.message == "model not found (pull it with `ollama pull <model>`)"


@pytest.mark.parametrize(
    "message",
    [
        "llama runner: failed to load model vocab: file not found",
        "model not found",
        "error loading model: tensor 'output.weight' not found",
    ],
)
def test_an_error_line_that_only_mentions_a_model_not_found_is_a_server_error(
    message: str,
) -> None:
    """Without a status, only Ollama's quoted `model "x" not found` says the model is
    missing: a runner failure that names a model and a missing file is the server's."""
    error = error_from_payload({"error": message}, provider="ollama", model="qwen3")
    assert type(error) is ServerError and error.retryable
    assert error.message == message and error.status is None


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (500, 'invalid format: "yaml"; expected "json" or a valid JSON Schema object'),
        (400, "invalid JSON schema in format"),
        (400, "failed to parse grammar"),
        (500, 'JSON schema conversion failed:\nUnrecognized schema: {"type": "date"}'),
        (400, "Unsupported ref: https://example.com/schema.json"),
    ],
)
def test_a_format_ollama_cannot_compile_is_unsupported_by_the_provider(
    status: int, message: str
) -> None:
    error = error_of(status, {"error": message})
    assert type(error) is UnsupportedError
    assert (error.field, error.stage) == (RequestField.RESPONSE_FORMAT, UnsupportedStage.PROVIDER)
    assert error.status == status and not error.retryable


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ("registry.ollama.ai/library/gemma:2b does not support tools", RequestField.TOOLS),
        ('"llama3" does not support thinking', RequestField.REASONING_EFFORT),
    ],
)
def test_a_model_without_a_capability(message: str, field: RequestField) -> None:
    error = error_of(400, {"error": message})
    assert type(error) is UnsupportedError
    assert (error.field, error.stage) == (field, UnsupportedStage.PROVIDER)


@pytest.mark.parametrize(
    "message",
    [
        "the input length exceeds the context length",
        "the request exceeds the available context size, try increasing it",
        "prompt too long; exceeded max context length by 1119046 tokens",
        # Ollama's runner with context shift off, and its MLX runner.
        "the prompt is longer than the context length currently available to the model; "
        "shorten the prompt, adjust the context length in settings, or use a model with a "
        "longer context length",
        "input length (5000 tokens) exceeds the model's maximum context length (4096 tokens)",
    ],
)
def test_a_full_context_window(message: str) -> None:
    assert type(error_of(400, {"error": message})) is ContextWindowExceededError
    assert type(error_from_payload({"error": message})) is ContextWindowExceededError


LLAMA_SERVER_CONTEXT = {
    "error": {
        "code": 400,
        "message": "request (351 tokens) exceeds the available context size (256 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 351,
        "n_ctx": 256,
    }
}


CONTEXT_REMEDY = (
    " (give the model a larger context, `num_ctx` in the body option `ollama`'s "
    '`"options"`, or send `"truncate": true` there to let Ollama cut the prompt)'
)


def test_llama_servers_error_relayed_as_text_says_its_own_message() -> None:
    """Told `truncate: false`, Ollama (v0.30 on) relays llama-server's answer to a prompt past
    `num_ctx` as the text of its `error`: the message is llama-server's, with the remedies,
    the class a full context window, the body kept as it came."""
    body = {"error": json.dumps(LLAMA_SERVER_CONTEXT)}
    error = error_of(400, body, model="qwen2.5:0.5b")
    assert type(error) is ContextWindowExceededError and not error.retryable
    assert error.message == (
        "request (351 tokens) exceeds the available context size (256 tokens), try increasing it"
        + CONTEXT_REMEDY
    )
    assert error.status == 400 and error.context.body == json.dumps(body)
    streamed = error_from_payload(body)
    assert type(streamed) is ContextWindowExceededError
    assert streamed.message == error.message
    # Text in braces that is no error object stays as it is.
    for text in ("{not json", '{"detail": "x"}'):
        assert error_of(500, {"error": text}).message == text


def test_a_full_context_window_says_how_to_let_the_prompt_through() -> None:
    """`truncate: false` makes a prompt past `num_ctx` (Ollama's default is often far below
    the model's own) an error where Ollama would cut it: the message says how to send it."""
    message = "the input length exceeds the context length"
    target, recorder = provider("ollama", (400, {"error": message}))
    with pytest.raises(ContextWindowExceededError) as caught:
        target.chat(ChatRequest("llama3.1").user("a long document"))
    assert caught.value.message == ("the input length exceeds the context length" + CONTEXT_REMEDY)
    assert recorder.bodies[0]["truncate"] is False and len(recorder.bodies) == 1
    error = error_of(400, {"error": message}, model="llama3.1")
    assert error.message == caught.value.message
    assert error_from_payload({"error": message}).message == error.message
    assert error.context.body == json.dumps({"error": message})  # the body as it came
    # Ollama's cloud does not say that it reads `num_ctx`: its words alone.
    cloud = error_from_response(
        400, {}, json.dumps({"error": message}).encode(), provider="ollama", cloud=True
    )
    assert type(cloud) is ContextWindowExceededError and cloud.message == message
    assert error_from_payload({"error": message}, cloud=True).message == message


@pytest.mark.parametrize("status", [500, None])
def test_a_model_larger_than_the_servers_memory_is_not_retried(status: int | None) -> None:
    """Each try would load the model again, into the memory it did not fit."""
    message = "model requires more system memory (12.0 GiB) than is available (8.0 GiB)"
    if status is None:
        error = error_from_payload({"error": message}, provider="ollama", model="llama3.1")
    else:
        error = error_of(status, {"error": message}, model="llama3.1")
    assert type(error) is ServerError and not error.retryable
    assert error.message == message and error.status == status


@pytest.mark.parametrize(
    "message", ["model 'gpt-oss:12b' not found", 'model "gpt-oss:12b" not found']
)
@pytest.mark.parametrize("how", ["chat", "chat_stream"])
def test_a_missing_model_on_ollamas_cloud_names_no_pull(message: str, how: str) -> None:
    """Ollama's cloud (a base URL on ollama.com) pulls nothing: its 404 is said as it came."""
    target, recorder = provider("ollama", (404, {"error": message}), base_url="https://ollama.com")
    request = ChatRequest("gpt-oss:12b").user("Hi")
    with pytest.raises(NotFoundError) as caught:
        if how == "chat":
            target.chat(request)
        else:
            with target.chat_stream(request) as stream:
                stream.response()
    assert caught.value.message == message and caught.value.status == 404
    assert len(recorder.bodies) == 1
    assert error_from_payload({"error": message}, cloud=True).message == message
    # A local server still names the pull.
    local, _ = provider("ollama", (404, {"error": message}), base_url="http://127.0.0.1:9")
    with pytest.raises(NotFoundError) as caught:
        local.chat(request)
    assert caught.value.message == f"{message} (pull it with `ollama pull gpt-oss:12b`)"


def test_a_429_waits_what_retry_after_says() -> None:
    error = error_of(429, {"error": "rate limited"}, {"retry-after": "7"})
    assert isinstance(error, RateLimitedError) and error.retry_after == 7.0
    dated = error_from_response(
        429, {"Retry-After": "Thu, 01 Jan 2037 00:00:30 GMT"}, b"{}", now=2114380800.0
    )
    assert isinstance(dated, RateLimitedError) and dated.retry_after == 30.0
    assert error_of(429, {"error": "rate limited"}).retry_after is None


def test_other_error_shapes() -> None:
    # Not JSON at all: its text.
    error = error_of(502, "<html>Bad Gateway</html>")
    assert type(error) is ServerError and error.message == (
        "the provider answered HTTP 502 with an HTML page (not its API's error): Bad Gateway"
    )
    assert error_of(500, "").message == "HTTP 500"
    # An OpenAI-style object relayed from the cloud.
    nested = {"error": {"message": "prompt too long; exceeded max context length by 5 tokens"}}
    assert type(error_of(400, nested)) is ContextWindowExceededError
    # A cloud sign-in error.
    signin = {"error": "unauthorized", "signin_url": "https://ollama.com/connect?key=x"}
    assert type(error_of(401, signin)) is AuthenticationError


@pytest.mark.parametrize(
    ("message", "cls"),
    [
        ("an error was encountered while running the model: unexpected EOF", ServerError),
        ("server busy, please try again.  maximum pending requests exceeded", OverloadedError),
        ("invalid JSON schema in format", UnsupportedError),
    ],
)
def test_an_error_line_goes_by_its_message(message: str, cls: type[Error]) -> None:
    error = error_from_payload({"error": message}, provider="ollama", model="m")
    assert type(error) is cls
    assert error.status is None and not error.authored
    assert (error.provider, error.model) == ("ollama", "m")
    assert error.context.body == json.dumps({"error": message})


# Streams


def test_stream_events_in_order() -> None:
    events = decode_stream(ndjson(*MIXED_CHUNKS, ascii=False), model="asked")
    assert events == [
        ResponseStart(model="qwen3:8b"),
        BlockStart(index=0, block_type=StreamBlockType.REASONING),
        ReasoningDelta(index=0, text="Let me "),
        ReasoningDelta(index=0, text="think about it."),
        BlockStop(index=0),
        BlockStart(index=1, block_type=StreamBlockType.TEXT),
        TextDelta(index=1, text="Here"),
        TextDelta(index=1, text=" it is."),
        BlockStop(index=1),
        BlockStart(
            index=2, block_type=StreamBlockType.TOOL_CALL, id="call_gsiiy8py", name="get_weather"
        ),
        ToolCallDelta(
            index=2, arguments='{"zeta":1,"alpha":"Zürich 東京","nested":{"b":[1,2],"a":null}}'
        ),
        BlockStop(index=2),
        BlockStart(index=3, block_type=StreamBlockType.TOOL_CALL, id="call_1", name="noop"),
        ToolCallDelta(index=3, arguments="{}"),
        BlockStop(index=3),
        UsageEvent(usage=Usage(input_tokens=292, output_tokens=143)),
        ProviderDataEvent(namespace="ollama", key="created_at", value=CREATED),
        ProviderDataEvent(namespace="ollama", key="total_duration", value=1735248334),
        ProviderDataEvent(namespace="ollama", key="load_duration", value=139246000),
        ProviderDataEvent(namespace="ollama", key="prompt_eval_duration", value=247164000),
        ProviderDataEvent(namespace="ollama", key="eval_duration", value=1337032000),
        Finish(finish_reason=FinishReason.TOOL_CALLS),
    ]
    assert collect(events) == decode(MIXED)


def test_done_turns_true_at_the_done_line_and_the_rest_is_ignored() -> None:
    decoder = OllamaStreamDecoder()
    events = list(decoder.feed(ndjson(chunk({"content": "Hi"}))))
    assert not decoder.done and not any(isinstance(e, Finish) for e in events)
    events += list(decoder.feed(ndjson(response({"content": "!"}))[:-1]))
    assert not decoder.done  # the line has not ended yet
    events += list(decoder.feed(b"\n" + ndjson(chunk({"content": "after"}))))
    assert decoder.done
    assert list(decoder.feed(ndjson({"error": "late"}))) == []
    assert list(decoder.close()) == []
    assert collect(events).text() == "Hi!"


def test_a_stream_without_the_done_line_is_left_unfinished() -> None:
    events = decode_stream(ndjson(chunk({"content": "Half an "}), chunk({"content": "answer"})))
    assert not any(isinstance(e, Finish) for e in events)
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    with pytest.raises(IncompleteStreamError):
        collector.finish()
    assert collector.partial_response().text() == "Half an answer"


def test_a_stream_cut_inside_a_line_is_incomplete() -> None:
    data = ndjson(chunk({"content": "Half"}), response({"content": " done"}))
    seen: list[StreamEvent] = []
    with pytest.raises(IncompleteStreamError, match="in the middle of a line"):
        for event in iter_split(data[:-20], []):
            seen.append(event)
    assert collect_any(seen).text() == "Half"


def test_the_last_line_without_its_line_break_is_read() -> None:
    data = ndjson(chunk({"content": "Hi"}), response())
    assert collect(decode_stream(data.rstrip(b"\n"))).text() == "Hi"


def test_blank_lines_and_crlf_say_nothing() -> None:
    data = b"\n\r\n" + ndjson(chunk({"content": "Hi"}), response(), crlf=True) + b"\r\n\n"
    assert collect(decode_stream(data)) == decode(response({"content": "Hi"}))


def test_an_error_line_after_text_yields_the_text_first() -> None:
    data = ndjson(
        chunk({"content": "Half an "}),
        chunk({"content": "answer"}),
        {"error": "an error was encountered while running the model"},
        response(),
    )
    seen: list[StreamEvent] = []
    with pytest.raises(ServerError) as caught:
        for event in iter_split(data, [], provider="ollama", model="m"):
            seen.append(event)
    assert caught.value.status is None and caught.value.retryable
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["Half an ", "answer"]
    assert collect_any(seen).text() == "Half an answer"


def test_a_last_line_that_does_not_read_still_says_its_token_counts() -> None:
    """Ollama counts tokens on its last line alone (and bills them on its cloud): a last
    line whose message does not fit the shape still yields its usage before the error, as
    the whole body's error carries it."""
    data = ndjson(
        chunk({"content": '{"age": 3}'}),
        response({"content": "", "tool_calls": {"oops": 1}}, prompt_eval_count=100, eval_count=50),
    )
    seen: list[StreamEvent] = []
    with pytest.raises(StreamDecodeError, match="does not fit"):
        for event in iter_split(data, [7], provider="ollama", model="m"):
            seen.append(event)
    assert [e.usage for e in seen if isinstance(e, UsageEvent)] == [
        Usage(input_tokens=100, output_tokens=50)
    ]


def test_a_runner_failure_after_text_is_retryable_not_a_missing_model() -> None:
    data = ndjson(
        chunk({"content": "Hello"}),
        {"error": "llama runner: failed to load model vocab: file not found"},
    )
    seen: list[StreamEvent] = []
    with pytest.raises(Error) as caught:
        for event in iter_split(data, [], provider="ollama", model="qwen3"):
            seen.append(event)
    error = caught.value
    assert type(error) is ServerError
    assert (error.status, error.retryable) == (None, True)
    assert error.message == "llama runner: failed to load model vocab: file not found"
    assert collect_any(seen).text() == "Hello"


def test_an_error_line_before_anything() -> None:
    with pytest.raises(NotFoundError, match="ollama pull nope"):
        decode_stream(ndjson({"error": "model 'nope' not found"}), model="nope")


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_an_error_line_split_anywhere_after_text(data: st.DataObject) -> None:
    raw = ndjson(
        chunk({"content": "Só "}),
        chunk({"content": "far"}),
        {"error": "server busy, please try again.  maximum pending requests exceeded"},
        ascii=False,
    )
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12), label="cuts")
    seen: list[StreamEvent] = []
    with pytest.raises(OverloadedError):
        for event in iter_split(raw, cuts):
            seen.append(event)
    assert collect_any(seen).text() == "Só far"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"not json\n", "not valid JSON"),
        (b"[1, 2]\n", "not a JSON object"),
        (b'{"message": {"content": 1}, "done": false}\n', "does not fit"),
        (b'{"message": {"tool_calls": [{"function": 3}]}}\n', "does not fit"),
    ],
)
def test_lines_that_make_no_sense_are_decode_errors(data: bytes, why: str) -> None:
    with pytest.raises(StreamDecodeError, match=why):
        decode_stream(data)


def test_one_byte_at_a_time() -> None:
    raw = ndjson(*MIXED_CHUNKS, ascii=False)
    assert collect(feed_split(raw, range(len(raw)))) == decode(MIXED)


def test_a_long_stream_is_read_in_linear_time() -> None:
    # 20,000 chunks of one text delta each (two megabytes), fed in 7-byte pieces and in one
    # piece: a decoder that rescans what it buffered would take minutes here.
    raw = ndjson(*(chunk({"content": 'x{y}\\"z'}) for _ in range(20_000)), response())
    started = time.perf_counter()
    pieces: tuple[Iterable[int], ...] = (range(0, len(raw), 7), ())
    for cuts in pieces:
        assert collect(feed_split(raw, cuts)).text() == 'x{y}\\"z' * 20_000
    assert time.perf_counter() - started < 60


# Any response, streamed and split anywhere

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_ids = st.text("abcdefxyz0123456789", min_size=1, max_size=8).map(lambda s: f"call_{s}x")
_calls = st.lists(
    st.builds(
        lambda i, n, a: {**({"id": i} if i else {}), "function": {"name": n, "arguments": a}},
        st.none() | _ids,
        st.text("abc_", min_size=1, max_size=6),
        st.dictionaries(st.text(max_size=5), _json, max_size=4),
    ),
    max_size=3,
)
_counts = st.fixed_dictionaries(
    {},
    optional={key: st.integers(0, 10**6) for key in ("prompt_eval_count", "eval_count")},
)
_kept = st.fixed_dictionaries(
    {},
    optional={
        "created_at": st.sampled_from([CREATED, "2024-05-24T20:01:31.01558Z"]),
        "total_duration": st.integers(0, 10**10),
        "load_duration": st.integers(0, 10**10),
        "prompt_eval_duration": st.integers(0, 10**10),
        "eval_duration": st.integers(0, 10**10),
        "remote_model": st.sampled_from(["gpt-oss:120b"]),
    },
)


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c for c in cuts if 0 < c < len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@dataclass
class Generated:
    body: dict[str, Any]
    chunks: list[dict[str, Any]]


@st.composite
def generated(draw: st.DrawFn) -> Generated:
    """A final body, and the NDJSON chunks Ollama could stream it as: the thinking in
    pieces, then the content in pieces (the body holds each concatenated), then each tool
    call whole, in a chunk of its own or beside the last piece, and a last chunk with
    `done: true`, `done_reason`, the counts and the durations (and the last piece of
    content, when no call came)."""
    model = draw(st.none() | st.sampled_from(["qwen3:8b", "gpt-oss:20b"]))
    thinking = draw(st.text(max_size=12))
    content = draw(st.text(max_size=12))
    calls = draw(_calls)
    reason = draw(st.sampled_from(["stop", "length", "load", "unload", "", None, "new_one"]))
    counts = draw(_counts)
    kept = draw(_kept)
    meta = {"model": model} if model is not None else {}
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking or draw(st.booleans()):
        message["thinking"] = thinking
    if calls:
        message["tool_calls"] = calls
    final = {**meta, **kept, "done": True, **counts}
    if reason is not None:
        final["done_reason"] = reason
    body = {**final, "message": message}
    thinking_pieces = _pieces(thinking, draw(st.lists(st.integers(0, 12), max_size=3)))
    content_pieces = _pieces(content, draw(st.lists(st.integers(0, 12), max_size=3)))
    last_content = ""
    if content_pieces and not calls and draw(st.booleans()):
        last_content = content_pieces.pop()
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": "", "thinking": piece} for piece in thinking_pieces
    ]
    messages += [{"role": "assistant", "content": piece} for piece in content_pieces]
    for call in calls:
        if messages and messages[-1].get("content") and draw(st.booleans()):
            messages[-1].setdefault("tool_calls", []).append(call)  # beside the last piece
        else:
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    chunks = [
        {**meta, "created_at": CREATED, "message": piece, "done": False} for piece in messages
    ]
    chunks.append({**final, "message": {"role": "assistant", "content": last_content}})
    return Generated(body, chunks)


@settings(max_examples=200, deadline=None)
@given(case=generated(), data=st.data())
def test_any_response_streamed_and_split_anywhere_collects_to_its_body(
    case: Generated, data: st.DataObject
) -> None:
    ascii = data.draw(st.booleans(), label="ascii")
    crlf = data.draw(st.booleans(), label="crlf")
    raw = ndjson(*case.chunks, ascii=ascii, crlf=crlf)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=20), label="cuts")
    expected = decode(case.body, model="asked")
    events = feed_split(raw, cuts, model="asked")
    assert collect(events) == expected
    starts = [e.index for e in events if isinstance(e, BlockStart)]
    assert starts == list(range(len(expected.content)))
    # Nothing after the done line: the decoder says it is done and reads no further.
    decoder = OllamaStreamDecoder(model="asked")
    list(decoder.feed(raw))
    assert decoder.done


# Replay of the recorded native traffic

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))
CHAT_PATH = "/api/chat"


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


CASES = _load()
RESPONSES = [c for c in CASES if not c.is_error and c.stream is None]
STREAMS = [c for c in CASES if not c.is_error and c.stream is not None]
ERRORS = [c for c in CASES if c.is_error]


def _keys(cases: list[Case]) -> list[str]:
    return [case.key for case in cases]


# Independent reading of the recordings


@dataclass
class Expected:
    thinking: str
    text: str
    calls: list[tuple[str, str, Any]]
    """(id, name, arguments as a value)."""
    finish: str | None
    usage: tuple[int | None, int | None] | None
    model: str | None
    created_at: str | None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _expected(
    messages: list[dict[str, Any]], last: dict[str, Any], first: dict[str, Any]
) -> Expected:
    """What the messages of a response (one body, or every chunk of a stream in order) and
    its last object say: texts concatenated, calls in order (numbered where Ollama gave no
    id), `stop` with calls read as tool calls."""
    calls = [call for message in messages for call in message.get("tool_calls") or []]
    reason = last.get("done_reason") or None
    if reason == "stop" and calls:
        reason = "tool_calls"
    prompt, generated = _int(last.get("prompt_eval_count")), _int(last.get("eval_count"))
    return Expected(
        "".join(str(m.get("thinking") or "") for m in messages),
        "".join(str(m.get("content") or "") for m in messages),
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
        first.get("model") or None,
        last.get("created_at"),
    )


def expected_response(case: Case) -> Expected:
    body = case.data["response_body"]
    return _expected([body.get("message") or {}], body, body)


def stream_lines(stream: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.splitlines() if line.strip()]


def expected_stream(case: Case) -> Expected:
    """The response a recorded stream adds up to, as far as its `done: true` line."""
    assert case.stream is not None
    lines = stream_lines(case.stream.decode())
    upto = next((n for n, line in enumerate(lines) if line.get("done") is True), len(lines) - 1)
    lines = lines[: upto + 1]
    return _expected([line.get("message") or {} for line in lines], lines[-1], lines[0])


def check(result: ChatResponse, expected: Expected) -> None:
    assert (result.reasoning() or "") == expected.thinking
    assert (result.text() or "") == expected.text
    assert [(c.id, c.name, c.parsed_arguments()) for c in result.tool_calls()] == expected.calls
    assert result.finish_reason == expected.finish
    usage = result.usage
    assert (None if usage is None else (usage.input_tokens, usage.output_tokens)) == (
        expected.usage
    )
    assert result.model == expected.model
    assert result.provider_value("ollama", "created_at") == expected.created_at
    assert result.id is None


def test_the_harness_reads_a_stream_as_its_response() -> None:
    """The independent reading of a stream agrees with its reading of the same response, so
    that the harness and the adapter cannot agree on a wrong reading."""
    streamed = Case("synthetic", {"status": 200, "stream": ndjson(*MIXED_CHUNKS).decode()})
    whole = Case("body", {"status": 200, "response_body": MIXED})
    assert expected_stream(streamed) == expected_response(whole)
    assert expected_response(whole) == Expected(
        "Let me think about it.",
        "Here it is.",
        [
            ("call_gsiiy8py", "get_weather", WEATHER_CALL["function"]["arguments"]),  # type: ignore[index]
            ("call_1", "noop", {}),
        ],
        "tool_calls",
        (292, 143),
        "qwen3:8b",
        CREATED,
    )
    check(collect(decode_stream(streamed.stream or b"")), expected_response(whole))


def test_the_corpus_has_every_kind_of_case() -> None:
    if not CASES:
        pytest.skip(f"no Ollama /api/chat cases under {CORPUS}")
    assert RESPONSES and STREAMS


@pytest.mark.parametrize("case", RESPONSES, ids=_keys(RESPONSES))
def test_recorded_response_decodes(case: Case) -> None:
    result = decode_response(
        case.data["status"],
        case.data.get("response_headers") or {},
        case.body,
        provider="ollama",
    )
    check(result, expected_response(case))
    assert result.provider == "ollama"


def _decode_whole(case: Case) -> ChatResponse:
    assert case.stream is not None
    return collect(decode_stream(case.stream, provider="ollama"))


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
    result = collect(feed_split(raw, cuts, provider="ollama"))
    assert result == _decode_whole(case)
    check(result, expected_stream(case))


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
def test_recorded_stream_collects_to_its_body(case: Case) -> None:
    """A recorded stream, put together as Ollama puts a `stream: false` body together (the
    texts concatenated, the calls collected, the last line's fields), decodes to what the
    stream collects to."""
    assert case.stream is not None
    lines = stream_lines(case.stream.decode())
    last = lines[-1]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(str((line.get("message") or {}).get("content") or "") for line in lines),
    }
    thinking = "".join(str((line.get("message") or {}).get("thinking") or "") for line in lines)
    if thinking:
        message["thinking"] = thinking
    calls = [c for line in lines for c in (line.get("message") or {}).get("tool_calls") or []]
    if calls:
        message["tool_calls"] = calls
    body = {**last, "model": lines[0].get("model"), "message": message}
    assert decode(body) == _decode_whole(case)


def expected_error(case: Case) -> type[Error]:
    tags = set(case.data.get("tags", []))
    if "invalid_schema" in tags:
        return UnsupportedError
    if "context_length" in tags:
        return ContextWindowExceededError
    status = int(case.data["status"])
    by_status: dict[int, type[Error]] = {
        401: AuthenticationError,
        403: PermissionDeniedError,
        404: NotFoundError,
        408: RequestTimeoutError,
        429: RateLimitedError,
        503: OverloadedError,
    }
    if status in by_status:
        return by_status[status]
    return ServerError if status >= 500 or status < 400 else InvalidRequestError


@pytest.mark.parametrize("case", ERRORS, ids=_keys(ERRORS))
def test_recorded_error_maps_to_its_class(case: Case) -> None:
    with pytest.raises(Error) as caught:
        if case.stream is not None and case.data["status"] < 400:
            decode_stream(case.stream, provider="ollama")
        else:
            decode_response(
                case.data["status"],
                case.data.get("response_headers") or {},
                case.body,
                provider="ollama",
            )
    error = caught.value
    assert type(error) is expected_error(case)
    assert error.provider == "ollama" and not error.authored
    assert error.message not in str(error.as_log()) and error.message not in repr(error)


def test_the_replay_reads_only_the_native_chat_endpoint() -> None:
    for case in CASES:
        assert case.data["endpoint"].endswith(CHAT_PATH), case.key


@pytest.mark.parametrize("how", ["chat", "stream"])
def test_an_error_in_a_200_from_ollamas_cloud_names_no_local_remedy(how: str) -> None:
    """An error object in a 200 body, or a stream's error line, from Ollama's cloud: said as
    it came, as its 404 is (no `ollama pull`, which the cloud does not read)."""
    message = "model 'gpt-oss:12b' not found"
    target, _ = provider("ollama", (200, {"error": message}), base_url="https://ollama.com")
    request = ChatRequest("gpt-oss:12b").user("Hi")
    with pytest.raises(NotFoundError) as caught:
        if how == "chat":
            target.chat(request)
        else:
            with target.chat_stream(request) as stream:
                stream.response()
    assert caught.value.message == message
