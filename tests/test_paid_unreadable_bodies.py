"""A 2xx answer whose body does not fit its wire shape, but says what it was billed for:
the error it is (a server error, tried again) carries that usage, so that an extraction's
record and a batch run count the tokens paid for, in every dialect."""

from __future__ import annotations

import json
from typing import Any

import pytest

from allama.errors import ServerError, paid_for

BILLED = {"input_tokens": 1_000, "output_tokens": 500}


def _openai() -> tuple[Any, dict[str, Any]]:
    from allama.adapters.openai_compat import decode_body

    body = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1.5,  # no integer: read all the same (allama does not read it)
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"}}],
        "usage": {"prompt_tokens": 1_000, "completion_tokens": 500, "total_tokens": 1_500},
    }
    return decode_body, body


def _anthropic() -> tuple[Any, dict[str, Any]]:
    from allama.adapters.anthropic._decode import decode_body

    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": 42}],  # no string
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 900,
            "cache_read_input_tokens": 100,
            "output_tokens": 500,
            "server_tool_use": {"web_search_requests": 2},
        },
    }
    return decode_body, body


def _gemini() -> tuple[Any, dict[str, Any]]:
    from allama.adapters.gemini._decode import decode_body

    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": 42}]}}],
        "usageMetadata": {
            "promptTokenCount": 1_000,
            "candidatesTokenCount": 500,
            "trafficType": "ON_DEMAND_FLEX",
        },
        "modelVersion": "gemini-2.5-flash",
    }
    return decode_body, body


def _ollama() -> tuple[Any, dict[str, Any]]:
    from allama.adapters.ollama._decode import decode_body

    body = {
        "model": "gpt-oss:120b",
        "message": {"role": "assistant", "content": 42},
        "done": True,
        "prompt_eval_count": 1_000,
        "eval_count": 500,
    }
    return decode_body, body


@pytest.mark.parametrize(
    ("dialect", "provider", "paid"),
    [
        ("openai", "openai", {"model": "gpt-4o-mini-2024-07-18"}),
        (
            "anthropic",
            "anthropic",
            {
                "model": "claude-haiku-4-5",
                "billed_extras": {"web_searches": 2},
                "usage": {**BILLED, "cache_read_tokens": 100},
            },
        ),
        ("gemini", "gemini", {"model": "gemini-2.5-flash", "service_tier": "flex"}),
        ("ollama", "ollama-cloud", {"model": "gpt-oss:120b"}),
    ],
)
def test_an_answer_that_does_not_fit_keeps_what_it_was_billed_for(
    dialect: str, provider: str, paid: dict[str, Any]
) -> None:
    decode, body = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini}.get(
        dialect, _ollama
    )()
    if dialect == "openai":  # content no answer can be read from
        body["choices"][0]["message"]["content"] = 42
    with pytest.raises(ServerError) as raised:
        decode(json.dumps(body), provider=provider, model="asked-for")
    error = raised.value
    assert error.retryable
    error.with_provider(provider)  # as the provider that decoded it names it
    assert paid_for(error) == [{"provider": provider, "usage": BILLED, **paid}]


def test_a_usage_with_details_of_another_shape_leaves_the_answer_and_its_counts() -> None:
    from allama.adapters.openai_compat import decode_body

    _, body = _openai()
    body["created"] = 1
    body["usage"]["prompt_tokens_details"] = "junk"
    response = decode_body(json.dumps(body), provider="openai")
    assert response.text() == "{}"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1_000, 500)


def test_a_usage_detail_of_another_shape_leaves_the_counts_beside_it() -> None:
    from allama.adapters.openai_compat import decode_body

    _, body = _openai()
    body["created"] = 1
    body["usage"] = {
        "prompt_tokens": 10_000,
        "completion_tokens": 500,
        "prompt_tokens_details": {"cached_tokens": 9_000},
        "completion_tokens_details": [],  # another shape: left out, and it alone
    }
    usage = decode_body(json.dumps(body), provider="openai").usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (
        10_000,
        500,
        9_000,
    )


def _streamed(chunks: list[dict[str, Any]], provider: str) -> Any:
    """The response a Chat Completions stream of `chunks` collects to."""
    from allama.adapters.openai_compat._sse import decode_stream
    from allama.stream import StreamCollector

    data = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    collector = StreamCollector()
    for event in decode_stream(data.encode(), provider=provider):
        collector.push(event)
    return collector.finish()


def test_a_streamed_usage_of_another_shape_leaves_the_answer_and_its_cost() -> None:
    usage = {
        "prompt_tokens": 50,
        "completion_tokens": 7,
        "prompt_tokens_details": [],
        "cost": 0.00005,
        "is_byok": False,
        "cost_details": {
            "upstream_inference_prompt_cost": 0.00003,
            "upstream_inference_completions_cost": 0.00002,
        },
    }
    chunks = [
        {"id": "g", "model": "m/x", "choices": [{"index": 0, "delta": {"content": "{}"}}]},
        {"id": "g", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "g", "choices": [], "usage": usage},
    ]
    response = _streamed(chunks, "openrouter")
    assert response.text() == "{}"
    assert response.usage is not None and response.usage.input_tokens == 50
    assert response.provider_data["openrouter"]["usage_cost"]["cost"] == 0.00005


@pytest.mark.parametrize(
    "body",
    [
        {"object": "response", "status": "completed", "output": None},
        {"object": "response", "status": "completed", "error": {"message": "upstream"}},
    ],
)
def test_a_responses_body_that_does_not_fit_keeps_what_it_was_billed_for(
    body: dict[str, Any],
) -> None:
    from allama.adapters.openai_responses import decode_body
    from allama.errors import Error

    usage = {"input_tokens": 1_000, "output_tokens": 500, "cost": 0.001}
    with pytest.raises(Error) as raised:
        decode_body(json.dumps({**body, "model": "m/x", "usage": usage}), provider="openrouter")
    raised.value.with_provider("openrouter")
    assert paid_for(raised.value) == [
        {"provider": "openrouter", "model": "m/x", "usage": BILLED, "usage_cost": {"cost": 0.001}}
    ]


def test_an_error_object_whose_other_fields_do_not_fit_keeps_its_usage() -> None:
    from allama.adapters.openai_compat import decode_body
    from allama.errors import Error

    body = {"error": {"message": "upstream"}, "model": 5, "usage": {"prompt_tokens": 1_000}}
    with pytest.raises(Error) as raised:
        decode_body(json.dumps(body), provider="openrouter")
    raised.value.with_provider("openrouter")
    assert paid_for(raised.value) == [
        {"provider": "openrouter", "model": None, "usage": {"input_tokens": 1_000}}
    ]


def test_groqs_streamed_usage_of_another_shape_leaves_the_answer() -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": []}
    chunks = [
        {"id": "g", "choices": [{"index": 0, "delta": {"content": "{}"}}]},
        {"id": "g", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "g", "choices": [], "x_groq": {"usage": usage}},
    ]
    response = _streamed(chunks, "groq")
    assert response.text() == "{}"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 2)


def test_a_details_object_keeps_the_counts_in_it_that_read() -> None:
    from allama.adapters.openai_compat import decode_body

    _, body = _openai()
    body["created"] = 1
    body["usage"]["prompt_tokens_details"] = {
        "cached_tokens": 800,
        "cache_write_tokens": {"5m": 0, "1h": 0},  # another shape: it alone left out
    }
    usage = decode_body(json.dumps(body), provider="openai").usage
    assert usage is not None and usage.cache_read_tokens == 800


def test_a_body_nested_too_deeply_is_a_server_error() -> None:
    from allama.adapters.openai_compat import decode_body
    from allama.adapters.openai_compat._sse import decode_stream
    from allama.errors import StreamDecodeError

    _, body = _openai()
    body["created"] = 1
    nested = json.dumps(body)[:-1] + ', "deep": ' + "[" * 5_000 + "]" * 5_000 + "}"
    with pytest.raises(ServerError):
        decode_body(nested, provider="openai")
    with pytest.raises(StreamDecodeError):
        list(decode_stream(f"data: {nested}\n\n".encode(), provider="openai"))


def test_an_automatic_fallback_refused_twice_counts_what_was_paid_once() -> None:
    from pydantic import BaseModel

    import allama
    from allama.errors import UnsupportedError
    from allama.extract import ExtractionMetadata
    from allama.mock import MockStreamingProvider, SetupError
    from allama.types import (
        CapabilitySupport,
        ChatCapability,
        ChatRequest,
        RequestField,
        ResponseStart,
        Usage,
        UsageEvent,
    )
    from allama.wrappers import RetryingProvider

    class Person(BaseModel):
        name: str

    def refused(field: RequestField) -> UnsupportedError:
        return UnsupportedError(
            f"{field.value} unsupported", field=field, stage="before_sending"
        ).mark_authored()

    # Native output refused before sending; forced-tool mode's first stream reports usage
    # and fails before its answer, and its retry is refused before sending.
    for streamed in (False, True):
        provider = MockStreamingProvider(
            [
                SetupError(refused(RequestField.RESPONSE_FORMAT)),
                [
                    ResponseStart(id="r", model="m"),
                    UsageEvent(usage=Usage(input_tokens=10, output_tokens=5)),
                    ServerError("busy"),
                ],
                SetupError(refused(RequestField.TOOL_CHOICE)),
            ],
            name="mock",
        )
        provider.with_chat_capability(ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.SUPPORTED)
        retrying = RetryingProvider(provider, sleep=lambda s: None, random=lambda: 0.0)
        request = ChatRequest("m").user("hi")
        with pytest.raises(UnsupportedError) as raised:
            if streamed:
                with allama.extract_stream(retrying, Person, request) as stream:
                    stream.finish()
            else:
                allama.extract(retrying, Person, request)
        paid = [entry["usage"] for entry in paid_for(raised.value)]
        assert paid == [{"input_tokens": 10, "output_tokens": 5}]
        usage = ExtractionMetadata.from_error(raised.value).usage
        assert usage is not None and (usage.input_tokens, usage.output_tokens) == (10, 5)
