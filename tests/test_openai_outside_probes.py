"""Shapes outside probes sent through the OpenAI-compatible providers, end to end.

Each test goes through `allama.provider(...)` over httpx2's mock transport: usage that
arrives with an in-stream error, a choice Azure's content filter stopped without a message,
the deprecated `function_call`, a router relaying its upstream's schema rejection, an Azure
deployment's name in the URL, JSON mode refused, and Mistral's nested validation errors.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMetadata, ExtractionMode
from allama.adapters.openai_compat._sse import ChatStreamDecoder
from allama.errors import (
    ContextWindowExceededError,
    InvalidRequestError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    UnsupportedError,
)
from allama.extract import EXTRACTION_TOOL
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    FinishReason,
    RequestField,
    StreamEvent,
    TextPart,
    ToolCall,
    UnsupportedStage,
    Usage,
)

Handler = Callable[[httpx2.Request], httpx2.Response]


def _mock(handler: Handler) -> Transport:
    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


def answering(status: int, body: Any, *, stream: bool = False) -> Transport:
    """A transport whose endpoint answers every request with `body`."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    kind = "text/event-stream" if stream else "application/json"

    def handler(http: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=content, headers={"content-type": kind})

    return _mock(handler)


def sse(*payloads: Any) -> bytes:
    return "".join(
        f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads
    ).encode()


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-1", "model": "m", "choices": choices, **extra}


USAGE = {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}


class Person(BaseModel):
    name: str


# 1. Usage in the same chunk as an in-stream error


OPENROUTER_FAILED_STREAM = sse(
    chunk({"role": "assistant", "content": '{"name": "Ad'}),
    {
        "id": "gen-1",
        "model": "m",
        "error": {"code": "server_error", "message": "Provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        "usage": USAGE,
    },
)


def test_usage_in_the_error_chunk_is_kept_by_the_collector() -> None:
    target = allama.provider(
        "openrouter", api_key="k", transport=answering(200, OPENROUTER_FAILED_STREAM, stream=True)
    )
    stream = target.chat_stream(ChatRequest("m").user("x"))
    with pytest.raises(ServerError):
        for _ in stream:
            pass
    collector = stream.collector
    expected = Usage(input_tokens=11, output_tokens=4)
    assert collector.response_metadata().usage == expected
    partial = collector.partial_response()
    assert (partial.usage, partial.text(), partial.finish_reason) == (
        expected,
        '{"name": "Ad',
        None,
    )


def test_usage_in_an_error_event_is_kept_async() -> None:
    error_event = {
        "error": {
            "message": "Tool choice is required",
            "code": "tool_use_failed",
            "status_code": 400,
        },
        "x_groq": {"usage": USAGE},
    }
    data = sse(chunk({"content": "maybe"})) + (
        b"event: error\ndata: " + json.dumps(error_event).encode() + b"\n\n"
    )
    target = allama.provider("groq", api_key="k", transport=answering(200, data, stream=True))

    async def run() -> StreamCollector:
        stream = await target.achat_stream(ChatRequest("openai/gpt-oss-120b").user("x"))
        with pytest.raises(InvalidRequestError):
            async for _ in stream:
                pass
        return stream.collector

    collector = asyncio.run(run())
    assert collector.response_metadata().usage == Usage(input_tokens=11, output_tokens=4)


def test_a_failed_streamed_extraction_records_the_usage_of_the_error_chunk() -> None:
    target = allama.provider(
        "openrouter", api_key="k", transport=answering(200, OPENROUTER_FAILED_STREAM, stream=True)
    )
    request = ChatRequest("openai/gpt-4o").user("Ada").with_option(ExtractionMode.NATIVE)
    with (
        allama.extract_stream(target, Person, request) as stream,
        pytest.raises(ServerError) as caught,
    ):
        stream.finish()
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert record.usage == Usage(input_tokens=11, output_tokens=4)


def failing_split(data: bytes, cuts: list[int]) -> list[str]:
    """The types of the events `data` gives, fed in pieces cut at `cuts`, before the
    `ServerError` it ends with."""
    decoder = ChatStreamDecoder(provider="openrouter")
    events: list[StreamEvent] = []
    last = 0
    with pytest.raises(ServerError):
        for cut in [*sorted(cuts), len(data)]:
            events.extend(decoder.feed(data[last:cut]))
            last = cut
        events.extend(decoder.close())
    return [event.type for event in events]


BEFORE_THE_ERROR = ["response_start", "block_start", "text_delta", "usage"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(OPENROUTER_FAILED_STREAM)), max_size=20))
def test_the_error_chunk_decodes_the_same_however_it_is_split(cuts: list[int]) -> None:
    assert failing_split(OPENROUTER_FAILED_STREAM, cuts) == BEFORE_THE_ERROR


# 2. A content-filtered choice without a message


FILTERED = {
    "id": "chatcmpl-f",
    "model": "gpt-4o",
    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
    "choices": [
        {
            "index": 0,
            "finish_reason": "content_filter",
            "content_filter_results": {
                "hate": {"filtered": False, "severity": "safe"},
                "sexual": {"filtered": True, "severity": "medium"},
            },
        }
    ],
    "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
}


def test_a_filtered_choice_without_a_message_is_a_content_filter_finish() -> None:
    target = allama.provider(
        "azure-openai",
        api_key="k",
        endpoint="https://res.openai.azure.com",
        transport=answering(200, FILTERED),
    )
    response = target.chat(ChatRequest("gpt-4o").user("x"))
    assert response.finish_reason == FinishReason.CONTENT_FILTER
    assert response.content == ()
    assert response.usage == Usage(input_tokens=30, output_tokens=12)
    assert response.decline_explanation() == "the content filter flagged: sexual (medium)"


def test_a_filtered_extraction_is_not_a_retryable_server_error() -> None:
    target = allama.provider(
        "azure-openai",
        api_key="k",
        endpoint="https://res.openai.azure.com",
        transport=answering(200, FILTERED),
    )
    with pytest.raises(allama.ExtractionError) as caught:
        allama.extract(target, Person, ChatRequest("gpt-4o").user("x"))
    failure = caught.value
    assert not isinstance(failure, ServerError)
    assert failure.response is not None
    assert failure.response.finish_reason == FinishReason.CONTENT_FILTER
    assert failure.metadata is not None
    assert failure.metadata.usage == Usage(input_tokens=30, output_tokens=12)


def test_only_a_filtered_choice_may_come_without_a_message() -> None:
    body = {**FILTERED, "choices": [{"index": 0, "finish_reason": "stop"}]}
    target = allama.provider("openai", api_key="k", transport=answering(200, body))
    with pytest.raises(ServerError, match="its choice has no message"):
        target.chat(ChatRequest("gpt-4o").user("x"))


@pytest.mark.parametrize("delta", [None, "absent", {}])
def test_a_filtered_stream_choice_without_a_delta_finishes_with_its_usage(delta: Any) -> None:
    last: dict[str, Any] = {"index": 0, "finish_reason": "content_filter"}
    if delta != "absent":
        last["delta"] = delta
    last["content_filter_results"] = {"violence": {"filtered": True, "severity": "high"}}
    data = sse(
        {"id": "", "model": "", "choices": [], "prompt_filter_results": []},
        chunk({"content": "Once"}),
        {"id": "chatcmpl-1", "model": "m", "choices": [last]},
        chunk(None, usage=USAGE),
        "[DONE]",
    )
    target = allama.provider(
        "azure-openai",
        api_key="k",
        endpoint="https://res.openai.azure.com",
        transport=answering(200, data, stream=True),
    )
    response = target.chat_stream(ChatRequest("gpt-4o").user("x")).response()
    assert response.finish_reason == FinishReason.CONTENT_FILTER
    assert response.text() == "Once"
    assert response.usage == Usage(input_tokens=11, output_tokens=4)
    assert response.decline_explanation() == "the content filter flagged: violence (high)"


# 3. The deprecated function_call


def test_a_legacy_function_call_is_a_tool_call() -> None:
    body = {
        "id": "chatcmpl-2",
        "model": "gpt-3.5-turbo-0613",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "submit", "arguments": '{"name": "Ada"}'},
                },
                "finish_reason": "function_call",
            }
        ],
        "usage": USAGE,
    }
    target = allama.provider(
        "openai-compatible", base_url="http://x", transport=answering(200, body)
    )
    response = target.chat(ChatRequest("m").user("x"))
    assert response.tool_calls() == (
        ToolCall(id="call_0", name="submit", arguments='{"name": "Ada"}'),
    )
    assert response.finish_reason == FinishReason.TOOL_CALLS


def test_a_legacy_function_call_follows_the_tool_calls_of_the_same_message() -> None:
    call = {"id": "call_x", "type": "function", "function": {"name": "a", "arguments": "{}"}}
    body = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "content": "Calling",
                    "tool_calls": [call],
                    "function_call": {"name": "b", "arguments": "[]"},
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    target = allama.provider(
        "openai-compatible", base_url="http://x", transport=answering(200, body)
    )
    response = target.chat(ChatRequest("m").user("x"))
    assert response.content == (
        TextPart(text="Calling"),
        ToolCall(id="call_x", name="a", arguments="{}"),
        ToolCall(id="call_1", name="b", arguments="[]"),
    )


LEGACY_STREAM = sse(
    chunk(
        {"role": "assistant", "content": None, "function_call": {"name": "submit", "arguments": ""}}
    ),
    chunk({"function_call": {"arguments": '{"name":'}}),
    chunk({"function_call": {"arguments": ' "Ada"}'}}),
    chunk({}, "function_call"),
    chunk(None, usage=USAGE),
    "[DONE]",
)


def test_a_streamed_legacy_function_call_is_a_tool_call() -> None:
    target = allama.provider(
        "openai-compatible",
        base_url="http://x",
        transport=answering(200, LEGACY_STREAM, stream=True),
    )
    response = target.chat_stream(ChatRequest("m").user("x")).response()
    assert response.content == (ToolCall(id="call_0", name="submit", arguments='{"name": "Ada"}'),)
    assert response.finish_reason == FinishReason.TOOL_CALLS
    assert response.usage == Usage(input_tokens=11, output_tokens=4)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(LEGACY_STREAM)), max_size=20))
def test_a_legacy_function_call_stream_decodes_the_same_however_it_is_split(
    cuts: list[int],
) -> None:
    decoder = ChatStreamDecoder()
    collector = StreamCollector()
    last = 0
    for cut in [*sorted(cuts), len(LEGACY_STREAM)]:
        for event in decoder.feed(LEGACY_STREAM[last:cut]):
            collector.push(event)
        last = cut
    for event in decoder.close():
        collector.push(event)
    assert collector.finish().tool_calls() == (
        ToolCall(id="call_0", name="submit", arguments='{"name": "Ada"}'),
    )


def test_a_forced_tool_extraction_reads_a_legacy_function_call() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "content": None,
                    "function_call": {
                        "name": "submit_structured_output",
                        "arguments": '{"name": "Ada"}',
                    },
                },
                "finish_reason": "function_call",
            }
        ]
    }
    target = allama.provider(
        "openai-compatible", base_url="http://x", transport=answering(200, body)
    )
    request = ChatRequest("m").user("Ada").with_option(ExtractionMode.FORCED_TOOL)
    assert allama.extract(target, Person, request).value == Person(name="Ada")


# 4. A router relaying its upstream's schema rejection


def openrouter_error(raw: Any, provider_name: str | None = "OpenAI", code: int = 400) -> bytes:
    metadata: dict[str, Any] = {"raw": raw if isinstance(raw, str) else json.dumps(raw)}
    if provider_name is not None:
        metadata["provider_name"] = provider_name
    body = {
        "error": {"message": "Provider returned error", "code": code, "metadata": metadata},
        "user_id": "user_x",
    }
    return json.dumps(body).encode()


OPENAI_SCHEMA_REJECTION = {
    "error": {
        "message": "Invalid schema for response_format 'Person': In context=(), 'required' is "
        "required to be supplied and to be an array including every key in properties.",
        "type": "invalid_request_error",
        "param": "response_format",
        "code": "invalid_json_schema",
    }
}


@pytest.mark.parametrize(
    ("raw", "upstream", "field"),
    [
        (OPENAI_SCHEMA_REJECTION, "OpenAI", RequestField.RESPONSE_FORMAT),
        (
            {
                "error": {
                    "message": "Invalid schema for function 'submit': 'minLength' is not "
                    "permitted.",
                    "type": "invalid_request_error",
                    "code": "invalid_function_parameters",
                }
            },
            "Azure",
            RequestField.TOOLS,
        ),
        (
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "output_format.schema: For 'integer' type, property 'minimum' is "
                    "not supported",
                },
            },
            "Anthropic",
            RequestField.RESPONSE_FORMAT,
        ),
        (
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "tools.0.custom.input_schema: JSON schema is invalid",
                },
            },
            "Anthropic",
            RequestField.TOOLS,
        ),
        (
            {
                "error": {
                    "code": 400,
                    "message": 'Invalid JSON payload received. Unknown name "additionalProperties"'
                    " at 'generation_config.response_schema.properties[0].value': Cannot find "
                    "field.",
                    "status": "INVALID_ARGUMENT",
                }
            },
            "Google",
            RequestField.RESPONSE_FORMAT,
        ),
        (
            # Plain text rather than a JSON body.
            "Invalid schema for response_format 'Person': 'maxLength' is not permitted.",
            None,
            RequestField.RESPONSE_FORMAT,
        ),
    ],
)
def test_a_relayed_schema_rejection_is_unsupported_by_the_provider(
    raw: Any, upstream: str | None, field: RequestField
) -> None:
    target = allama.provider(
        "openrouter", api_key="k", transport=answering(400, openrouter_error(raw, upstream))
    )
    with pytest.raises(UnsupportedError) as caught:
        target.chat(ChatRequest("openai/gpt-4o").user("x"))
    error = caught.value
    assert (error.field, error.stage, error.status) == (field, UnsupportedStage.PROVIDER, 400)
    assert error.provider == "openrouter"
    assert error.context.metadata.get("upstream_provider") == upstream
    # The upstream's words are the caller's to read, and stay out of the log view.
    assert error.message.startswith("Provider returned error")
    assert "not permitted" in error.message or "schema" in error.message
    log = str(error.as_log())
    assert "Provider returned error" not in log and "upstream_provider" not in log
    if upstream is not None:
        assert upstream not in log


def test_other_relayed_errors_keep_the_routers_class() -> None:
    rate = openrouter_error("model is temporarily rate-limited upstream", "Google", code=429)
    target = allama.provider("openrouter", api_key="k", transport=answering(429, rate))
    with pytest.raises(RateLimitedError) as caught:
        target.chat(ChatRequest("google/gemini-2.0-flash-exp:free").user("x"))
    assert "rate-limited upstream" in caught.value.message

    words = {"error": {"message": "Response input messages must contain the word 'json'"}}
    target = allama.provider(
        "openrouter", api_key="k", transport=answering(400, openrouter_error(words))
    )
    with pytest.raises(InvalidRequestError) as invalid:
        target.chat(ChatRequest("openai/gpt-4o").user("x"))
    assert type(invalid.value) is InvalidRequestError

    full = {"error": {"message": "too long", "code": "context_length_exceeded"}}
    target = allama.provider(
        "openrouter", api_key="k", transport=answering(400, openrouter_error(full))
    )
    with pytest.raises(ContextWindowExceededError):
        target.chat(ChatRequest("openai/gpt-4o").user("x"))


def test_a_moderation_refusal_is_the_inputs_not_the_keys() -> None:
    # OpenRouter's 403 when its moderation flags the input: `metadata` has the reasons and
    # the flagged text. That request's failure (a batch run goes on); a 403 without them is
    # the key's or the account's (a batch run stops).
    flagged = {
        "error": {
            "code": 403,
            "message": "openai/gpt-4o requires moderation on OpenRouter. Your input was flagged.",
            "metadata": {
                "reasons": ["harassment"],
                "flagged_input": "the flagged words...",
                "provider_name": "OpenAI",
                "model_slug": "openai/gpt-4o",
            },
        }
    }
    target = allama.provider("openrouter", api_key="k", transport=answering(403, flagged))
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("openai/gpt-4o").user("x"))
    assert type(caught.value) is InvalidRequestError and not caught.value.retryable
    assert caught.value.status == 403
    denied = {"error": {"code": 403, "message": "Key is disabled"}}
    target = allama.provider("openrouter", api_key="k", transport=answering(403, denied))
    with pytest.raises(PermissionDeniedError):
        target.chat(ChatRequest("openai/gpt-4o").user("x"))


def test_a_relayed_schema_rejection_in_a_stream_is_unsupported() -> None:
    payload = json.loads(openrouter_error(OPENAI_SCHEMA_REJECTION))
    data = sse(chunk({"role": "assistant", "content": ""}), payload)
    target = allama.provider("openrouter", api_key="k", transport=answering(200, data, stream=True))
    with pytest.raises(UnsupportedError) as caught:
        target.chat_stream(ChatRequest("openai/gpt-4o").user("x")).response()
    assert caught.value.field is RequestField.RESPONSE_FORMAT


def test_auto_falls_back_to_a_forced_tool_when_the_upstream_rejects_the_schema() -> None:
    bodies: list[dict[str, Any]] = []
    tool_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "submit_structured_output", "arguments": '{"name": "Ada"}'},
    }
    answer = {
        "id": "gen-2",
        "choices": [
            {
                "index": 0,
                "message": {"content": None, "tool_calls": [tool_call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": USAGE,
    }

    def handler(http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.content)
        bodies.append(body)
        if "response_format" in body:
            return httpx2.Response(400, content=openrouter_error(OPENAI_SCHEMA_REJECTION))
        return httpx2.Response(200, json=answer)

    target = allama.provider("openrouter", api_key="k", transport=_mock(handler))
    extracted = allama.extract(target, Person, ChatRequest("openai/gpt-4o").user("Ada"))
    assert extracted.value == Person(name="Ada")
    assert extracted.metadata.mode is ExtractionMode.FORCED_TOOL
    fallback = extracted.metadata.auto_fallback
    assert fallback is not None
    assert (fallback.field, fallback.stage) == (
        RequestField.RESPONSE_FORMAT,
        UnsupportedStage.PROVIDER,
    )
    assert ["response_format" in body for body in bodies] == [True, False]


# 5. An error reported on the choice itself (OpenRouter, after the answer began)


CHOICE_ERROR = {"code": 502, "message": "Upstream provider crashed"}
FAILED_CHOICE_BODY = {
    "id": "gen-3",
    "model": "openai/gpt-4o",
    "choices": [
        {
            "index": 0,
            "finish_reason": "error",
            "native_finish_reason": "error",
            "message": {"role": "assistant", "content": ""},
            "error": CHOICE_ERROR,
        }
    ],
    "usage": USAGE,
}


def test_an_error_on_the_choice_of_a_body_is_raised_not_an_empty_answer() -> None:
    target = allama.provider(
        "openrouter", api_key="sk-or-test", transport=answering(200, FAILED_CHOICE_BODY)
    )
    with pytest.raises(ServerError) as caught:
        target.chat(ChatRequest("openai/gpt-4o").user("x"))
    error = caught.value
    assert (error.message, error.status, error.provider, error.retryable) == (
        "Upstream provider crashed",
        502,
        "openrouter",
        True,
    )
    # The whole body is kept on the error: the usage it reports is not lost.
    assert json.loads(error.context.body or "")["usage"] == USAGE


def test_an_extraction_whose_choice_failed_raises_the_providers_error() -> None:
    target = allama.provider(
        "openrouter", api_key="k", transport=answering(200, FAILED_CHOICE_BODY)
    )
    request = ChatRequest("openai/gpt-4o").user("Ada").with_option(ExtractionMode.NATIVE)
    with pytest.raises(ServerError) as caught:
        allama.extract(target, Person, request)
    assert caught.value.message == "Upstream provider crashed"
    # The tokens the failed call reported are paid for: in the record, though not a pass.
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage) == (0, Usage(input_tokens=11, output_tokens=4))

    async def run() -> ExtractionMetadata | None:
        with pytest.raises(ServerError) as caught:
            await allama.aextract(target, Person, request)
        return ExtractionMetadata.from_error(caught.value)

    assert asyncio.run(run()) == record


FAILED_CHOICE_STREAM = sse(
    chunk({"role": "assistant", "content": '{"name": "Ad'}),
    chunk({"content": ""}, "error", error=None, usage=USAGE)
    | {
        "choices": [
            {"index": 0, "delta": {"content": ""}, "finish_reason": "error", "error": CHOICE_ERROR}
        ]
    },
    "[DONE]",
)


def test_an_error_on_the_choice_of_a_stream_chunk_is_raised_after_what_came_before() -> None:
    target = allama.provider(
        "openrouter", api_key="k", transport=answering(200, FAILED_CHOICE_STREAM, stream=True)
    )
    stream = target.chat_stream(ChatRequest("m").user("x"))
    with pytest.raises(ServerError) as caught:
        for _ in stream:
            pass
    assert (caught.value.message, caught.value.status) == ("Upstream provider crashed", 502)
    partial = stream.collector.partial_response()
    assert (partial.text(), partial.usage, partial.finish_reason) == (
        '{"name": "Ad',
        Usage(input_tokens=11, output_tokens=4),
        None,
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, len(FAILED_CHOICE_STREAM)), max_size=12))
def test_the_failed_choice_decodes_the_same_however_it_is_split(cuts: list[int]) -> None:
    assert failing_split(FAILED_CHOICE_STREAM, cuts) == BEFORE_THE_ERROR


# 6. Reasoning sent under both of its names


def _reasoning_body(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-r",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }


@pytest.mark.parametrize(
    ("reasoning", "reasoning_content", "expected"),
    [
        ("Think.", "Think.", "Think."),  # vLLM while renaming the field: one text, two names
        ("Think.", None, "Think."),
        (None, "Think.", "Think."),
        ("First.", "Second.", "First.Second."),  # two texts: both kept
    ],
)
def test_reasoning_under_both_names_is_read_once_when_it_is_the_same_text(
    reasoning: str | None, reasoning_content: str | None, expected: str
) -> None:
    fields = {"reasoning": reasoning, "reasoning_content": reasoning_content}
    message = {"role": "assistant", "content": "42", **fields}
    target = allama.provider(
        "vllm",
        base_url="http://127.0.0.1:1/v1",
        transport=answering(200, _reasoning_body(message)),
    )
    response = target.chat(ChatRequest("m").user("x"))
    assert (response.reasoning(), response.text()) == (expected, "42")
    streamed = sse(
        chunk({"role": "assistant", **fields}),
        chunk({"content": "42"}, "stop"),
        "[DONE]",
    )
    target = allama.provider(
        "vllm",
        base_url="http://127.0.0.1:1/v1",
        transport=answering(200, streamed, stream=True),
    )
    collected = target.chat_stream(ChatRequest("m").user("x")).response()
    assert (collected.reasoning(), collected.text()) == (expected, "42")


def test_a_groq_stream_stopped_early_raises_its_reason_after_what_came_before() -> None:
    stopped = sse(
        chunk({"role": "assistant", "content": '{"name": "Ad'}),
        chunk({}, x_groq={"id": "req_1", "error": "stream stopped: upstream timeout"}),
        "[DONE]",
    )
    target = allama.provider(
        "groq", api_key="gsk-test", transport=answering(200, stopped, stream=True)
    )
    stream = target.chat_stream(ChatRequest("m").user("x"))
    with pytest.raises(ServerError) as caught:
        for _ in stream:
            pass
    assert caught.value.message == "stream stopped: upstream timeout"
    assert stream.collector.partial_response().text() == '{"name": "Ad'


# 7. A streamed extraction falls back on a refusal the wire sends as its first event


SCHEMA_REFUSED_EVENT = {
    "error": {
        "message": "This model does not support response format `json_schema`",
        "type": "invalid_request_error",
        "status_code": 400,
    },
    "x_groq": {"usage": USAGE},
}
TOOL_ANSWER = sse(
    chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": EXTRACTION_TOOL,
                        "arguments": '{"name": "Ada"}',
                    },
                }
            ],
        }
    ),
    chunk({}, "tool_calls", usage=USAGE),
    "[DONE]",
)


def _refusing_then_answering() -> tuple[Transport, list[dict[str, Any]]]:
    """Refuses the response format as the stream's first event; answers the forced tool."""
    bodies: list[dict[str, Any]] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.content)
        bodies.append(body)
        if "response_format" in body:
            data = b"event: error\ndata: " + json.dumps(SCHEMA_REFUSED_EVENT).encode() + b"\n\n"
        else:
            data = TOOL_ANSWER
        return httpx2.Response(200, content=data, headers={"content-type": "text/event-stream"})

    return _mock(handler), bodies


def test_a_streamed_extraction_falls_back_past_the_providers_own_warnings() -> None:
    """The provider warns about the schema before the wire's first event (its enforcement
    is unknown), and the refusal arrives after that warning and the usage of the error
    event: auto mode still falls back, as the same refusal as an HTTP 400 does."""
    transport, bodies = _refusing_then_answering()
    target = allama.provider(
        "openai-compatible", base_url="http://127.0.0.1:9/v1", api_key="sk-t", transport=transport
    )
    with allama.extract_stream(target, Person, ChatRequest("m").user("Ada")) as stream:
        events = list(stream)
        extracted = stream.finish()
    assert extracted.value == Person(name="Ada")
    metadata = extracted.metadata
    assert (metadata.mode, metadata.passes) == (ExtractionMode.FORCED_TOOL, 1)
    assert metadata.auto_fallback is not None
    assert metadata.auto_fallback.field is RequestField.RESPONSE_FORMAT
    assert ["response_format" in body for body in bodies] == [True, False]
    # The forced tool's own stream is given whole, its warnings first.
    assert events[0].type == "warning" and events[-1].type == "usage"

    async def run() -> Any:
        transport, _ = _refusing_then_answering()
        target = allama.provider(
            "openai-compatible",
            base_url="http://127.0.0.1:9/v1",
            api_key="sk-t",
            transport=transport,
        )
        async with allama.aextract_stream(target, Person, ChatRequest("m").user("Ada")) as s:
            seen = [event async for event in s]
            return seen, await s.finish()

    seen, done = asyncio.run(run())
    assert [event.type for event in seen] == [event.type for event in events]
    assert (done.value, done.metadata.mode) == (Person(name="Ada"), ExtractionMode.FORCED_TOOL)


# 8. An Azure deployment's name is one segment of the URL's path


def _recording_azure() -> tuple[Any, list[str]]:
    """An Azure OpenAI resource whose every request's URL is kept, answered 200."""
    urls: list[str] = []
    answer = {
        "id": "chatcmpl-1",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": USAGE,
    }

    def handler(http: httpx2.Request) -> httpx2.Response:
        urls.append(str(http.url))
        return httpx2.Response(200, json=answer)

    target = allama.provider(
        "azure-openai", api_key="k", endpoint="https://r.openai.azure.com", transport=_mock(handler)
    )
    return target, urls


@pytest.mark.parametrize(
    ("model", "wrong"),
    [
        ("dep#1", "it holds '#', which a URL path segment cannot carry"),
        ("dep?x=1", "it holds '?', which a URL path segment cannot carry"),
        ("a/../../../v1", "it holds '/', which a URL path segment cannot carry"),
        ("dep%2F1", "it holds '%', which a URL path segment cannot carry"),
        ("dep\n1", "it holds '\\n', which a URL path segment cannot carry"),
        ("..", "`..` alone is a step to this folder or its parent, not a name"),
        (".", "`.` alone is a step to this folder or its parent, not a name"),
    ],
)
def test_a_deployment_name_that_cannot_be_one_path_segment_is_refused_before_sending(
    model: str, wrong: str
) -> None:
    target, urls = _recording_azure()
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest(model).user("hi"))
    error = caught.value
    assert type(error) is InvalidRequestError
    assert str(error) == (
        f"the model {model!r} cannot be a deployment's name in the URL: {wrong} (a "
        "deployment's name has letters, digits, `-`, `_` and `.`)"
    )
    assert (error.provider, error.model, error.status) == ("azure-openai", model, None)
    assert urls == []


@pytest.mark.parametrize(
    ("model", "path"),
    [
        ("gpt-4o", "gpt-4o"),
        ("my.dep_2", "my.dep_2"),
        ("my dep", "my%20dep"),
        ("dép", "d%C3%A9p"),
        ("a[b]", "a%5Bb%5D"),
    ],
)
def test_a_deployment_name_is_quoted_as_one_path_segment(model: str, path: str) -> None:
    target, urls = _recording_azure()
    target.chat(ChatRequest(model).user("hi"))
    assert urls == [
        f"https://r.openai.azure.com/openai/deployments/{path}/chat/completions"
        "?api-version=2024-10-21"
    ]


# 9. JSON mode refused as JSON Schema output is (DeepInfra's 405, direct or relayed)


def _json_mode_refused(model: str) -> dict[str, Any]:
    return {"detail": f"json_object response format is not supported for model: {model}"}


def test_a_refusal_of_json_mode_is_unsupported_by_the_provider() -> None:
    model = "Qwen/Qwen3.5-9B"
    refused = _json_mode_refused(model)
    target = allama.provider("deepinfra", api_key="k", transport=answering(405, refused))
    request = ChatRequest(model, response_format=allama.ResponseFormat.json_object())
    with pytest.raises(UnsupportedError) as caught:
        target.chat(request.user("answer in JSON"))
    error = caught.value
    assert (error.field, error.stage, error.status) == (
        RequestField.RESPONSE_FORMAT,
        UnsupportedStage.PROVIDER,
        405,
    )
    assert error.message == f"json_object response format is not supported for model: {model}"


def test_a_relayed_refusal_of_json_mode_is_unsupported_by_the_provider() -> None:
    model = "nvidia/Nemotron-3-Nano-30B-A3B"
    raw = {
        "error": {
            "message": f"json_object response format is not supported for model: {model}",
            "type": "invalid_request_error",
            "param": "response_format",
            "code": None,
        }
    }
    body = openrouter_error(raw, "DeepInfra", code=405)
    target = allama.provider("openrouter", api_key="k", transport=answering(405, body))
    request = ChatRequest(model, response_format=allama.ResponseFormat.json_object())
    with pytest.raises(UnsupportedError) as caught:
        target.chat(request.user("answer in JSON"))
    error = caught.value
    assert (error.field, error.stage, error.status) == (
        RequestField.RESPONSE_FORMAT,
        UnsupportedStage.PROVIDER,
        405,
    )
    assert error.message == (
        "Provider returned error (DeepInfra): json_object response format is not supported "
        f"for model: {model}"
    )


def test_auto_falls_back_to_a_forced_tool_when_json_mode_is_refused() -> None:
    bodies: list[dict[str, Any]] = []
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": EXTRACTION_TOOL, "arguments": '{"name": "Ada"}'},
    }
    answer = {
        "id": "chatcmpl-2",
        "choices": [
            {
                "index": 0,
                "message": {"content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": USAGE,
    }

    def handler(http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.content)
        bodies.append(body)
        if "response_format" in body:
            return httpx2.Response(405, json=_json_mode_refused("m"))
        return httpx2.Response(200, json=answer)

    target = allama.provider(
        "openai-compatible", base_url="http://127.0.0.1:9/v1", api_key="k", transport=_mock(handler)
    )
    extracted = allama.extract(target, Person, ChatRequest("m").user("Ada"))
    assert extracted.value == Person(name="Ada")
    assert extracted.metadata.mode is ExtractionMode.FORCED_TOOL
    fallback = extracted.metadata.auto_fallback
    assert fallback is not None
    assert (fallback.field, fallback.stage) == (
        RequestField.RESPONSE_FORMAT,
        UnsupportedStage.PROVIDER,
    )
    assert ["response_format" in body for body in bodies] == [True, False]


def test_auto_on_deepinfra_falls_back_when_the_model_has_no_json_schema_output() -> None:
    # DeepInfra takes `json_schema` per model, and answers the others 405: native output is
    # a guess there, so auto mode asks a forced tool next, as on an endpoint of no table.
    model = "Qwen/Qwen3.5-9B"
    bodies: list[dict[str, Any]] = []
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": EXTRACTION_TOOL, "arguments": '{"name": "Ada"}'},
    }
    answer = {
        "id": "x",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": USAGE,
    }
    refused = {"detail": f"json_schema response format is not supported for model: {model}"}

    def handler(http: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(http.content))
        if len(bodies) == 1:
            return httpx2.Response(405, json=refused)
        return httpx2.Response(200, json=answer)

    target = allama.provider("deepinfra", api_key="k", transport=_mock(handler))
    extracted = allama.extract(target, Person, ChatRequest(model).user("Ada"))
    assert extracted.value == Person(name="Ada")
    assert extracted.metadata.mode is ExtractionMode.FORCED_TOOL
    assert extracted.metadata.auto_fallback == allama.AutoFallback(
        field=RequestField.RESPONSE_FORMAT, message="", stage=UnsupportedStage.PROVIDER
    )
    assert extracted.metadata.passes == 1
    assert [body["response_format"]["type"] for body in bodies[:1]] == ["json_schema"]
    assert "response_format" not in bodies[1]
    assert bodies[1]["tool_choice"] == {"type": "function", "function": {"name": EXTRACTION_TOOL}}


@pytest.mark.parametrize(
    ("preset", "model", "support"),
    [
        # Per model, as their pages say, with no list a table could keep: unknown.
        ("deepinfra", "Qwen/Qwen3.5-9B", allama.CapabilitySupport.UNKNOWN),
        ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", allama.CapabilitySupport.UNKNOWN),
        # Workers AI's JSON Mode page lists its models: those are best-effort, others unknown.
        ("workers-ai", "@cf/meta/llama-3.1-8b-instruct", allama.CapabilitySupport.SUPPORTED),
        ("workers-ai", "@cf/qwen/qwq-32b", allama.CapabilitySupport.UNKNOWN),
    ],
)
def test_json_schema_output_per_model_is_not_claimed_for_every_model(
    preset: str, model: str, support: allama.CapabilitySupport
) -> None:
    options = {"account_id": "acc"} if preset == "workers-ai" else {}
    target = allama.provider(preset, api_key="k", transport=answering(200, {}), **options)
    answer = target.chat_capability(model, allama.ChatCapability.STRUCTURED_OUTPUT)
    assert answer is support


# 10. Mistral's 422 of a validation, its problems under `message.detail`


MISTRAL_PROBLEMS = [
    {
        "type": "extra_forbidden",
        "loc": ["body", "store"],
        "msg": "Extra inputs are not permitted",
        "input": "sk-echoed-value",
    },
    {
        "type": "string_type",
        "loc": ["body", "messages", 0, "content"],
        "msg": "Input should be a valid string",
        "input": "the model's own words",
    },
]
MISTRAL_EXTRA_FIELD = {
    "object": "error",
    "message": {"detail": MISTRAL_PROBLEMS},
    "type": "invalid_request_error",
    "param": None,
    "code": None,
    "raw_status_code": 422,
}


@pytest.mark.parametrize("body", [MISTRAL_EXTRA_FIELD, {"detail": MISTRAL_PROBLEMS}])
def test_a_validations_problems_are_its_message(body: dict[str, Any]) -> None:
    target = allama.provider("mistral", api_key="k", transport=answering(422, body))
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("mistral-small-latest").user("hi"))
    error = caught.value
    assert type(error) is InvalidRequestError and error.status == 422
    # Each problem's place and words; not the values the request sent, which `input` echoes.
    assert str(error) == (
        "body.store: Extra inputs are not permitted; "
        "body.messages.0.content: Input should be a valid string"
    )


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"detail": "Unprocessable"}, "Unprocessable"),
        # A problem without its words: the detail, whole, is all there is to say.
        (
            {"detail": [{"loc": ["body"], "type": "missing"}]},
            '[{"loc": ["body"], "type": "missing"}]',
        ),
        (
            {"other": 1},
            '{"object": "error", "message": {"other": 1}, "type": "invalid_request_error"}',
        ),
    ],
)
def test_a_message_object_read_no_other_way_is_dumped(message: Any, said: str) -> None:
    body = {"object": "error", "message": message, "type": "invalid_request_error"}
    target = allama.provider("mistral", api_key="k", transport=answering(422, body))
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest("mistral-small-latest").user("hi"))
    assert str(caught.value) == said
