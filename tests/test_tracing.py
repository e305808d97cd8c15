"""OpenTelemetry GenAI spans: one CLIENT span per provider call, one INTERNAL span per
extraction holding its calls, one span per batch input under the run's span.

Spans go to an SDK `TracerProvider` passed explicitly (the global one is left alone, but in
a subprocess), with an in-memory exporter; the provider answers through an in-process
httpx2 transport scripted per test.
"""

from __future__ import annotations

import asyncio
import enum
import gc
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, cast

import httpx2
import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel, field_validator
from tests._recording import provider as recorded_provider

import allama
from allama import ChatRequest, ExtractionMode, Extractor, ReasoningEffort
from allama._tracing import CAPTURE_CONTENT_ENV, genai_provider_name, type_name
from allama.extract import EXTRACTION_TOOL
from allama.transport import Transport

KEY = "sk-test-9f8e7d6c5b4a"
MODEL = "gpt-5-mini"
SERVED = "gpt-5-mini-2025-08-07"
PROMPT = "Ada Lovelace published the first program in 1843."
ANSWER = '{"name": "Ada Lovelace", "year": 1843}'


class Program(BaseModel):
    name: str
    year: int


class Tally(BaseModel):
    store: str
    counts: dict[str, int]


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


# The scripted endpoint


Reply = httpx2.Response | Callable[[httpx2.Request], httpx2.Response]


class Script:
    """Replies in order, one per request; the requests it saw."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.seen: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(request)
        reply = self.replies.pop(0)
        return reply(request) if callable(reply) else reply


def completion(
    content: str | None = ANSWER,
    *,
    refusal: str | None = None,
    finish: str = "stop",
    usage: dict[str, Any] | None = None,
) -> httpx2.Response:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    body = {
        "id": "chatcmpl-42",
        "object": "chat.completion",
        "model": SERVED,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 41, "completion_tokens": 17, "total_tokens": 58},
    }
    return httpx2.Response(200, json=body)


def sse(text: str, *, finish: bool = True) -> httpx2.Response:
    chunks: list[dict[str, Any]] = [
        {"id": "chatcmpl-7", "model": SERVED, "choices": [{"index": 0, "delta": {"content": p}}]}
        for p in (text[i : i + 6] for i in range(0, len(text), 6))
    ]
    if finish:
        chunks.append(
            {
                "id": "chatcmpl-7",
                "model": SERVED,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
            }
        )
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    if finish:
        body += b"data: [DONE]\n\n"
    return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})


def failure(status: int, message: str) -> httpx2.Response:
    return httpx2.Response(
        status, json={"error": {"message": message, "type": "server_error", "code": None}}
    )


def openai(script: Script, **options: Any) -> allama.HttpProvider:
    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(script)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(script)),
    )
    return allama.provider("openai", api_key=KEY, transport=transport, **options)


# Spans


class Traced:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def values(self) -> Iterator[str]:
        """Every attribute value and status description, as text; but for floats (timings,
        costs), whose digits hold any text by chance (`0.00016527000116184354`)."""
        for span in self.spans:
            for value in (span.attributes or {}).values():
                if isinstance(value, float):
                    continue
                yield json.dumps(value) if not isinstance(value, str) else value
            if span.status.description:
                yield span.status.description


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Traced:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    return Traced()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def child_of(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None and parent.context is not None
    return (
        child.parent.span_id == parent.context.span_id
        and child.context is not None
        and child.context.trace_id == parent.context.trace_id
    )


def run(flavour: str, sync: Callable[[], Any], async_: Callable[[], Any]) -> Any:
    return sync() if flavour == "sync" else asyncio.run(async_())


REQUEST = ChatRequest(MODEL).user(PROMPT).with_temperature(0.2).with_max_output_tokens(200)
FLAVOURS = pytest.mark.parametrize("flavour", ["sync", "async"])


# A successful extraction


@FLAVOURS
def test_a_successful_extraction_is_a_span_with_its_call_as_child(
    traced: Traced, flavour: str
) -> None:
    cached = {
        "prompt_tokens": 41,
        "completion_tokens": 17,
        "total_tokens": 58,
        "prompt_tokens_details": {"cached_tokens": 32},
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    provider = openai(Script(completion(usage=cached)))
    extractor = Extractor(tracer_provider=traced.provider)
    extracted = run(
        flavour,
        lambda: extractor.extract(provider, Program, REQUEST),
        lambda: extractor.aextract(provider, Program, REQUEST),
    )
    assert extracted.value == Program(name="Ada Lovelace", year=1843)

    extraction, call = traced.one("extract Program"), traced.one(f"chat {MODEL}")
    assert len(traced.spans) == 2
    assert extraction.kind is SpanKind.INTERNAL and call.kind is SpanKind.CLIENT
    assert extraction.parent is None and child_of(call, extraction)
    assert extraction.status.status_code is StatusCode.UNSET
    assert call.status.status_code is StatusCode.UNSET

    # No temperature: gpt-5-mini takes none, and allama did not send the 0.2 asked for.
    assert attrs(call) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": 200,
        "gen_ai.output.type": "json",
        "server.address": "api.openai.com",
        "server.port": 443,
        "gen_ai.response.model": SERVED,
        "gen_ai.response.id": "chatcmpl-42",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 41,
        "gen_ai.usage.output_tokens": 17,
        "gen_ai.usage.cache_read.input_tokens": 32,
        "gen_ai.usage.reasoning.output_tokens": 5,
    }
    found = attrs(extraction)
    cost = found.pop("allama.cost.total", None)
    missing = found.pop("allama.cost.missing", None)
    currency = found.pop("allama.cost.currency", None)
    assert (cost is not None and cost > 0 and currency == "USD") or isinstance(missing, str)
    assert found == {
        "gen_ai.operation.name": "extract",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.output.type": "json",
        "allama.extract.type": "Program",
        "allama.extract.mode": "native",
        "allama.extract.passes": 1,
        "allama.extract.retries": 0,
        "allama.extract.enforcement": "exact",
        "allama.extract.auto_fallback": False,
        "allama.extract.degradations": 0,
        "allama.extract.repaired": False,
        "allama.extract.usage.input_tokens": 41,
        "allama.extract.usage.output_tokens": 17,
        "allama.extract.usage.cache_read.input_tokens": 32,
        "allama.extract.usage.reasoning.output_tokens": 5,
    }


@FLAVOURS
def test_cache_writes_are_counted_by_the_conventions_name(traced: Traced, flavour: str) -> None:
    # Anthropic's `cache_creation_input_tokens`: the conventions' `cache_creation`, on the
    # call's span and the extraction's.
    def reply(request: httpx2.Request) -> httpx2.Response:
        answered = _anthropic_reply(request)
        body = json.loads(answered.read())
        body["usage"] = {
            "input_tokens": 40,
            "output_tokens": 17,
            "cache_creation_input_tokens": 2000,
            "cache_read_input_tokens": 500,
        }
        return httpx2.Response(200, json=body)

    script = Script(reply)
    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(script)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(script)),
    )
    provider = allama.provider("anthropic", api_key=KEY, transport=transport)
    extractor = Extractor(tracer_provider=traced.provider)
    request = ChatRequest("claude-sonnet-4-5").user(PROMPT).with_option(ExtractionMode.NATIVE)
    run(
        flavour,
        lambda: extractor.extract(provider, Program, request),
        lambda: extractor.aextract(provider, Program, request),
    )
    counts = {
        "input_tokens": 2540,  # (the cached tokens included, as the conventions count)
        "output_tokens": 17,
        "cache_read.input_tokens": 500,
        "cache_creation.input_tokens": 2000,
    }
    for span, prefix in (
        (traced.one("chat claude-sonnet-4-5"), "gen_ai.usage."),
        (traced.one("extract Program"), "allama.extract.usage."),
    ):
        found = {
            key.removeprefix(prefix): value
            for key, value in attrs(span).items()
            if key.startswith(prefix)
        }
        assert found == counts


def test_the_cost_is_on_the_extraction_span_when_known(traced: Traced) -> None:
    pytest.importorskip("genai_prices")
    provider = openai(Script(completion()))
    extracted = Extractor(tracer_provider=traced.provider).extract(provider, Program, REQUEST)
    cost = extracted.metadata.cost
    assert cost is not None
    found = attrs(traced.one("extract Program"))
    assert found["allama.cost.total"] == pytest.approx(float(cost.total))
    assert found["allama.cost.currency"] == "USD"


# A retried one


@FLAVOURS
def test_a_retried_extraction_holds_both_calls_and_counts_the_retry(
    traced: Traced, flavour: str
) -> None:
    provider = openai(Script(completion('{"name": "Ada"}'), completion()))
    extractor = Extractor(retries=2, tracer_provider=traced.provider)
    extracted = run(
        flavour,
        lambda: extractor.extract(provider, Program, REQUEST),
        lambda: extractor.aextract(provider, Program, REQUEST),
    )
    assert extracted.metadata.passes == 2
    extraction = traced.one("extract Program")
    calls = traced.named(f"chat {MODEL}")
    assert len(calls) == 2 and all(child_of(call, extraction) for call in calls)
    assert all(call.status.status_code is StatusCode.UNSET for call in calls)
    found = attrs(extraction)
    assert (found["allama.extract.passes"], found["allama.extract.retries"]) == (2, 1)
    assert found["allama.extract.usage.input_tokens"] == 82
    assert extraction.status.status_code is StatusCode.UNSET


def test_an_answer_the_provider_refused_and_asked_again_counts_as_a_retry(
    traced: Traced,
) -> None:
    """Groq's `json_validate_failed` holds the model's answer, which the extraction asks
    again as it would one that came in a response: a retry, though no response came."""
    refused = {
        "error": {
            "message": "Generated JSON does not match the expected schema.",
            "type": "invalid_request_error",
            "code": "json_validate_failed",
            "failed_generation": '{"name": "Ada"}',
        }
    }
    good = {
        "id": "x",
        "object": "chat.completion",
        "model": "moonshotai/kimi-k2-instruct-0905",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"name": "Ada", "year": 1843}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    groq, recorder = recorded_provider("groq", (400, refused), (200, good))
    extractor = Extractor(retries=1, tracer_provider=traced.provider)
    request = ChatRequest("moonshotai/kimi-k2-instruct-0905").user("Ada, 1843")
    extracted = extractor.extract(groq, Program, request)
    assert extracted.value == Program(name="Ada", year=1843)
    assert len(recorder.bodies) == 2
    found = attrs(traced.one("extract Program"))
    assert (found["allama.extract.passes"], found["allama.extract.retries"]) == (1, 1)


def test_retries_that_run_out_end_the_extraction_span_in_error(traced: Traced) -> None:
    provider = openai(Script(completion('{"name": "Ada"}'), completion('{"year": 1}')))
    extractor = Extractor(retries=1, tracer_provider=traced.provider)
    with pytest.raises(allama.ExtractionError):
        extractor.extract(provider, Program, REQUEST)
    extraction = traced.one("extract Program")
    found = attrs(extraction)
    assert (found["allama.extract.passes"], found["allama.extract.retries"]) == (2, 1)
    assert extraction.status.status_code is StatusCode.ERROR
    assert found["error.type"] == "extraction_parse"
    assert len(traced.named(f"chat {MODEL}")) == 2


# An automatic fallback


def test_an_auto_fallback_is_recorded_and_the_refused_attempt_has_no_call_span(
    traced: Traced,
) -> None:
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": EXTRACTION_TOOL,
                "input": {"store": "North", "counts": {"apples": 3}},
            }
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 50, "output_tokens": 20},
    }
    script = Script(httpx2.Response(200, json=answer))
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(script)))
    provider = allama.provider(
        "anthropic", api_key=KEY, transport=transport, tracer_provider=traced.provider
    )
    request = ChatRequest("claude-sonnet-4-5").user("Count the fruit")
    extracted = Extractor(tracer_provider=traced.provider).extract(provider, Tally, request)
    assert extracted.metadata.auto_fallback is not None and len(script.seen) == 1

    extraction = traced.one("extract Tally")
    (call,) = traced.named("chat claude-sonnet-4-5")
    assert child_of(call, extraction)
    assert attrs(call)["gen_ai.provider.name"] == "anthropic"
    assert attrs(call)["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert "gen_ai.output.type" not in attrs(call)  # a forced tool, not a response format
    found = attrs(extraction)
    assert found["allama.extract.auto_fallback"] is True
    assert found["allama.extract.mode"] == "forced_tool"
    assert found["allama.extract.enforcement"] == "not_enforced"
    assert found["allama.extract.degradations"] >= 1
    assert found["allama.extract.passes"] == 1
    assert extraction.status.status_code is StatusCode.UNSET


# A refusal


@FLAVOURS
def test_a_refusal_fails_the_extraction_span_not_the_call(traced: Traced, flavour: str) -> None:
    provider = openai(Script(completion(None, refusal="I will not say who wrote it.")))
    extractor = Extractor(tracer_provider=traced.provider)
    with pytest.raises(allama.RefusedError):
        run(
            flavour,
            lambda: extractor.extract(provider, Program, REQUEST),
            lambda: extractor.aextract(provider, Program, REQUEST),
        )
    extraction, call = traced.one("extract Program"), traced.one(f"chat {MODEL}")
    assert child_of(call, extraction)
    assert call.status.status_code is StatusCode.UNSET
    assert extraction.status.status_code is StatusCode.ERROR
    found = attrs(extraction)
    assert found["error.type"] == "extraction_refused"
    assert found["allama.extract.passes"] == 1
    # The model's words stay out of the spans.
    assert not any("will not say" in value for value in traced.values())


# A provider error


@FLAVOURS
def test_a_provider_error_fails_the_call_and_the_extraction(traced: Traced, flavour: str) -> None:
    upstream = f"upstream says: the prompt {PROMPT!r} broke us (key {KEY})"
    provider = openai(Script(failure(500, upstream)))
    extractor = Extractor(tracer_provider=traced.provider)
    with pytest.raises(allama.ServerError):
        run(
            flavour,
            lambda: extractor.extract(provider, Program, REQUEST),
            lambda: extractor.aextract(provider, Program, REQUEST),
        )
    extraction, call = traced.one("extract Program"), traced.one(f"chat {MODEL}")
    assert child_of(call, extraction)
    for span in (call, extraction):
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "server"
        assert span.status.description == "server"  # not the provider's words
    assert attrs(extraction)["allama.extract.passes"] == 0
    assert not any("upstream says" in value or KEY in value for value in traced.values())


def test_a_rate_limit_is_its_own_error_type(traced: Traced) -> None:
    provider = openai(Script(failure(429, "slow down")), tracer_provider=traced.provider)
    with pytest.raises(allama.RateLimitedError):
        provider.chat(REQUEST)
    call = traced.one(f"chat {MODEL}")
    assert call.parent is None
    assert attrs(call)["error.type"] == "rate_limited"


def test_a_call_refused_before_sending_has_no_span(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    script = Script()
    provider = allama.provider(
        "openai",
        transport=Transport(client=httpx2.Client(transport=httpx2.MockTransport(script))),
        tracer_provider=traced.provider,
    )
    with pytest.raises(allama.AuthenticationError):
        Extractor(tracer_provider=traced.provider).extract(provider, Program, REQUEST)
    assert [span.name for span in traced.spans] == ["extract Program"]
    assert attrs(traced.one("extract Program"))["error.type"] == "authentication"
    assert not script.seen


# Streams


@FLAVOURS
def test_a_streamed_extraction_is_spanned_until_it_ends(traced: Traced, flavour: str) -> None:
    provider = openai(Script(sse(ANSWER)))
    extractor = Extractor(tracer_provider=traced.provider)

    def sync() -> Any:
        with extractor.extract_stream(provider, Program, REQUEST) as stream:
            for _ in stream:
                assert not traced.spans  # nothing has ended yet
            return stream.finish()

    async def async_() -> Any:
        async with extractor.aextract_stream(provider, Program, REQUEST) as stream:
            async for _ in stream:
                assert not traced.spans
            return await stream.finish()

    extracted = run(flavour, sync, async_)
    assert extracted.value.year == 1843
    extraction, call = traced.one("extract Program"), traced.one(f"chat {MODEL}")
    assert child_of(call, extraction)
    found = attrs(call)
    assert found["gen_ai.request.stream"] is True
    assert found["gen_ai.response.finish_reasons"] == ("stop",)
    assert found["gen_ai.response.id"] == "chatcmpl-7"
    assert found["gen_ai.usage.input_tokens"] == 30
    assert found["gen_ai.response.time_to_first_chunk"] >= 0
    assert call.status.status_code is StatusCode.UNSET
    assert attrs(extraction)["allama.extract.passes"] == 1
    assert extraction.status.status_code is StatusCode.UNSET
    assert call.end_time is not None and extraction.end_time is not None
    assert call.end_time <= extraction.end_time


@FLAVOURS
def test_a_stream_cut_mid_way_fails_both_spans(traced: Traced, flavour: str) -> None:
    provider = openai(Script(sse(ANSWER[:20], finish=False)))
    extractor = Extractor(tracer_provider=traced.provider)

    def sync() -> Any:
        with extractor.extract_stream(provider, Program, REQUEST) as stream:
            return stream.finish()

    async def async_() -> Any:
        async with extractor.aextract_stream(provider, Program, REQUEST) as stream:
            return await stream.finish()

    with pytest.raises(allama.IncompleteStreamError):
        run(flavour, sync, async_)
    extraction, call = traced.one("extract Program"), traced.one(f"chat {MODEL}")
    assert child_of(call, extraction)
    for span in (call, extraction):
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "stream_incomplete"
    assert attrs(call)["gen_ai.response.finish_reasons"] == ("error",)
    assert attrs(extraction)["allama.extract.passes"] == 0


def test_a_stream_that_fails_in_transit_fails_its_call_span(traced: Traced) -> None:
    class Broken(httpx2.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b'data: {"id": "c", "model": "m", "choices": [{"index": 0, '
            yield b'"delta": {"content": "{\\"na"}}]}\n\n'
            raise httpx2.ReadError("connection reset")

    reply = httpx2.Response(200, stream=Broken(), headers={"content-type": "text/event-stream"})
    provider = openai(Script(reply), tracer_provider=traced.provider)
    with provider.chat_stream(REQUEST) as stream, pytest.raises(allama.NetworkError):
        for _ in stream:
            pass
    call = traced.one(f"chat {MODEL}")
    assert attrs(call)["error.type"] == "network"
    assert attrs(call)["gen_ai.response.finish_reasons"] == ("error",)


def test_a_stream_closed_early_ends_its_spans_unfailed(traced: Traced) -> None:
    provider = openai(Script(sse(ANSWER)))
    extractor = Extractor(tracer_provider=traced.provider)
    with extractor.extract_stream(provider, Program, REQUEST) as stream:
        next(iter(stream))
    extraction, call = traced.one("extract Program"), traced.one(f"chat {MODEL}")
    for span in (extraction, call):
        assert span.status.status_code is StatusCode.UNSET
        assert attrs(span)["allama.stream.closed_early"] is True
    # The answer did not finish: the conventions' `error`, beside `closed_early` (the
    # status stays unset); and no pass measured an enforcement.
    assert attrs(call)["gen_ai.response.finish_reasons"] == ("error",)
    assert attrs(extraction)["allama.extract.passes"] == 0
    assert "allama.extract.enforcement" not in attrs(extraction)


def test_a_stream_closed_early_captures_its_output_with_the_finish_reason_error(
    traced: Traced,
) -> None:
    provider = openai(Script(sse(ANSWER)), tracer_provider=traced.provider, capture_content=True)
    with provider.chat_stream(REQUEST) as stream:
        for _, _event in zip(range(4), stream, strict=False):
            pass
    call = traced.one(f"chat {MODEL}")
    assert attrs(call)["allama.stream.closed_early"] is True
    assert call.status.status_code is StatusCode.UNSET
    (output,) = json.loads(attrs(call)["gen_ai.output.messages"])
    # The conventions' output message requires a finish reason: `error` for one that did
    # not finish, as on the span.
    assert set(output) == {"role", "parts", "finish_reason"}
    assert (output["role"], output["finish_reason"]) == ("assistant", "error")
    assert attrs(call)["gen_ai.response.finish_reasons"] == ("error",)


@FLAVOURS
def test_a_stream_dropped_without_closing_still_ends_its_spans(
    traced: Traced, flavour: str
) -> None:
    provider = openai(Script(sse(ANSWER)))
    extractor = Extractor(tracer_provider=traced.provider)

    def sync() -> None:
        stream = extractor.extract_stream(provider, Program, REQUEST)
        next(iter(stream))
        del stream

    async def async_() -> None:
        stream = await extractor.aextract_stream(provider, Program, REQUEST)
        await anext(aiter(stream))
        del stream

    run(flavour, sync, async_)
    gc.collect()
    names = sorted(span.name for span in traced.spans)
    assert names == [f"chat {MODEL}", "extract Program"]
    assert all(attrs(span)["allama.stream.closed_early"] for span in traced.spans)


def _extraction_attributes(traced: Traced) -> dict[str, Any]:
    """The `allama.*` attributes of the one extraction span, which is unfailed."""
    extraction = traced.one("extract Program")
    assert extraction.status.status_code is StatusCode.UNSET
    return {key: value for key, value in attrs(extraction).items() if key.startswith("allama.")}


@FLAVOURS
def test_a_stream_read_to_its_end_and_closed_without_finish_was_not_closed_early(
    traced: Traced, flavour: str
) -> None:
    extractor = Extractor(tracer_provider=traced.provider)

    def sync() -> None:
        with extractor.extract_stream(openai(Script(sse(ANSWER))), Program, REQUEST) as stream:
            for _ in stream:
                pass
            assert stream.partial == Program(name="Ada Lovelace", year=1843)

    async def async_() -> None:
        provider = openai(Script(sse(ANSWER)))
        async with extractor.aextract_stream(provider, Program, REQUEST) as stream:
            async for _ in stream:
                pass

    run(flavour, sync, async_)
    closed = _extraction_attributes(traced)
    assert "allama.stream.closed_early" not in closed
    # The pass was made and paid: counted, with its usage, as `finish()` counts it.
    assert closed["allama.extract.passes"] == 1
    assert closed["allama.extract.enforcement"] == "exact"
    assert closed["allama.extract.usage.input_tokens"] == 30
    assert closed["allama.extract.usage.output_tokens"] == 12
    call = traced.one(f"chat {MODEL}")
    assert "allama.stream.closed_early" not in attrs(call)
    assert attrs(call)["gen_ai.response.finish_reasons"] == ("stop",)

    traced.exporter.clear()
    with extractor.extract_stream(openai(Script(sse(ANSWER))), Program, REQUEST) as stream:
        stream.finish()
    assert _extraction_attributes(traced) == closed


@FLAVOURS
def test_a_stream_read_to_its_end_and_dropped_was_not_closed_early(
    traced: Traced, flavour: str
) -> None:
    extractor = Extractor(tracer_provider=traced.provider)

    def sync() -> None:
        stream = extractor.extract_stream(openai(Script(sse(ANSWER))), Program, REQUEST)
        for _ in stream:
            pass
        del stream

    async def async_() -> None:
        stream = await extractor.aextract_stream(openai(Script(sse(ANSWER))), Program, REQUEST)
        async for _ in stream:
            pass
        del stream

    run(flavour, sync, async_)
    gc.collect()
    dropped = _extraction_attributes(traced)
    assert "allama.stream.closed_early" not in dropped
    assert dropped["allama.extract.passes"] == 1
    assert dropped["allama.extract.usage.output_tokens"] == 12


@FLAVOURS
def test_a_stream_that_fails_while_read_and_is_dropped_fails_its_span_and_is_freed(
    traced: Traced, flavour: str
) -> None:
    import weakref

    class Broken(httpx2.SyncByteStream, httpx2.AsyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b'data: {"id": "c", "model": "m", "choices": [{"index": 0, '
            yield b'"delta": {"content": "{\\"na"}}]}\n\n'
            raise httpx2.ReadError("connection reset")

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in self:
                yield chunk

    reply = httpx2.Response(200, stream=Broken(), headers={"content-type": "text/event-stream"})
    provider = openai(Script(reply))
    extractor = Extractor(tracer_provider=traced.provider)
    streams: list[weakref.ref[Any]] = []

    def sync() -> None:
        stream = extractor.extract_stream(provider, Program, REQUEST)
        streams.append(weakref.ref(stream))
        with pytest.raises(allama.NetworkError):
            for _ in stream:
                pass

    async def async_() -> None:
        stream = await extractor.aextract_stream(provider, Program, REQUEST)
        streams.append(weakref.ref(stream))
        with pytest.raises(allama.NetworkError):
            async for _ in stream:
                pass

    # Neither closed nor finished: the failure ends its span, with the error, and the
    # stream is freed (the span's watch on it kept it alive through the error's traceback).
    run(flavour, sync, async_)
    gc.collect()
    extraction = traced.one("extract Program")
    assert extraction.status.status_code is StatusCode.ERROR
    assert attrs(extraction)["error.type"] == "network"
    assert streams[0]() is None


def test_a_chat_stream_never_read_and_dropped_ends_its_span(traced: Traced) -> None:
    provider = openai(Script(sse(ANSWER)), tracer_provider=traced.provider)
    stream = provider.chat_stream(REQUEST)
    assert not traced.spans
    del stream
    gc.collect()
    found = attrs(traced.one(f"chat {MODEL}"))
    assert found["allama.stream.closed_early"] is True
    assert found["gen_ai.response.finish_reasons"] == ("error",)


# The request's settings, as sent


def _anthropic_reply(request: httpx2.Request) -> httpx2.Response:
    body = json.loads(request.read())
    return httpx2.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": ANSWER}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 3},
        },
    )


def _responses_reply(request: httpx2.Request) -> httpx2.Response:
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
    }
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": SERVED,
        "output": [message],
        "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
    }
    return httpx2.Response(200, json=body)


def _completion_reply(request: httpx2.Request) -> httpx2.Response:
    return completion()


def _settings(span: ReadableSpan) -> dict[str, Any]:
    return {
        key: value
        for key, value in attrs(span).items()
        if (key.startswith("gen_ai.request.") and key != "gen_ai.request.model")
        or key == "gen_ai.output.type"
    }


_ASKED = ChatRequest(MODEL).user(PROMPT)
_MINI = ChatRequest("gpt-4o-mini").user(PROMPT)


@pytest.mark.parametrize(
    ("preset", "request_", "reply", "sent", "spanned"),
    [
        pytest.param(  # gpt-5-mini takes no sampling settings and no stop sequences
            "openai",
            _ASKED.with_temperature(0.2)
            .with_top_p(0.5)
            .with_seed(7)
            .with_stop("END")
            .with_reasoning_effort(ReasoningEffort.LOW),
            _completion_reply,
            {"seed": 7, "reasoning_effort": "low"},
            {"gen_ai.request.seed": 7, "gen_ai.request.reasoning.level": "low"},
            id="dropped-sampling-and-stop",
        ),
        pytest.param(  # gpt-4o-mini does not reason
            "openai",
            _MINI.with_stop("END").with_reasoning_effort(ReasoningEffort.LOW),
            _completion_reply,
            {"stop": ["END"]},
            {"gen_ai.request.stop_sequences": ("END",)},
            id="dropped-reasoning",
        ),
        pytest.param(  # Anthropic: no seed, and no top_p beside a temperature
            "anthropic",
            ChatRequest("claude-opus-4-1")
            .user(PROMPT)
            .with_temperature(0.2)
            .with_top_p(0.5)
            .with_seed(7),
            _anthropic_reply,
            {"temperature": 0.2, "max_tokens": 16384},  # (a default: shown as sent)
            {"gen_ai.request.temperature": 0.2, "gen_ai.request.max_tokens": 16384},
            id="anthropic-seed-and-top-p",
        ),
        pytest.param(  # a level sent for another: not the request's, so not shown
            "openai",
            ChatRequest("gpt-5.1").user(PROMPT).with_reasoning_effort(ReasoningEffort.MINIMAL),
            _completion_reply,
            {"reasoning_effort": "low"},
            {},
            id="level-approximated",
        ),
        pytest.param(  # a thinking budget lowered: no level says what was sent
            "anthropic",
            ChatRequest("claude-sonnet-4-5")
            .user(PROMPT)
            .with_reasoning_effort(ReasoningEffort.LOW)
            .with_max_output_tokens(2000),
            _anthropic_reply,
            {"max_tokens": 2000},
            {"gen_ai.request.max_tokens": 2000},
            id="budget-approximated",
        ),
        pytest.param(  # OpenAI takes four stop sequences: not the request's five, not shown
            "openai",
            _MINI.with_stop("a", "b", "c", "d", "e"),
            _completion_reply,
            {"stop": ["a", "b", "c", "d"]},
            {},
            id="stop-cut",
        ),
        pytest.param(  # the Responses API's floor of 16 output tokens: 5 was not sent
            "responses",
            _ASKED.with_max_output_tokens(5),
            _responses_reply,
            {"max_output_tokens": 16},
            {},
            id="max-tokens-floor",
        ),
    ],
)
def test_a_call_span_shows_the_request_settings_as_sent(
    traced: Traced,
    preset: str,
    request_: ChatRequest,
    reply: Callable[[httpx2.Request], httpx2.Response],
    sent: dict[str, Any],
    spanned: dict[str, Any],
) -> None:
    script = Script(reply)
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(script)))
    options: dict[str, Any] = {"api": "responses"} if preset == "responses" else {}
    provider = allama.provider(
        "openai" if preset == "responses" else preset,
        api_key=KEY,
        transport=transport,
        tracer_provider=traced.provider,
        **options,
    )
    provider.chat(request_)
    body = json.loads(script.seen[0].read())
    named = ("temperature", "top_p", "seed", "stop", "reasoning_effort", "max_output_tokens")
    on_wire = {key: body[key] for key in (*named, "max_tokens") if key in body}
    if "effort" in body.get("reasoning", {}):  # (the Responses API's)
        on_wire["reasoning_effort"] = body["reasoning"]["effort"]
    assert on_wire == sent
    assert _settings(traced.one(f"chat {request_.model}")) == spanned


@pytest.mark.parametrize("stream", [False, True])
@FLAVOURS
def test_every_kind_of_call_leaves_out_the_settings_not_sent(
    traced: Traced, flavour: str, stream: bool
) -> None:
    provider = openai(
        Script(sse(ANSWER) if stream else completion()), tracer_provider=traced.provider
    )
    request = REQUEST.with_top_p(0.5).with_seed(7)  # gpt-5-mini: no temperature, no top_p

    def sync() -> None:
        if stream:
            with provider.chat_stream(request) as streamed:
                for _ in streamed:
                    pass
        else:
            provider.chat(request)

    async def async_() -> None:
        if stream:
            async with await provider.achat_stream(request) as streamed:
                async for _ in streamed:
                    pass
        else:
            await provider.achat(request)

    run(flavour, sync, async_)
    found = _settings(traced.one(f"chat {MODEL}"))
    assert found.pop("gen_ai.request.stream", False) is stream
    assert found == {"gen_ai.request.max_tokens": 200, "gen_ai.request.seed": 7}


def test_integers_outside_int64_stay_off_spans(traced: Traced) -> None:
    """OTLP carries integers as int64: an exporter refuses a span with a larger one."""
    usage = {"prompt_tokens": 2**64, "completion_tokens": 17, "total_tokens": 2**64 + 17}
    script = Script(completion(usage=usage))
    provider = openai(script, tracer_provider=traced.provider)
    # A model whose output limit allama's table does not know: the limit goes as asked.
    request = ChatRequest("gpt-9-next").user(PROMPT)
    provider.chat(request.with_max_output_tokens(2**63).with_temperature(0.2))
    assert json.loads(script.seen[0].read())["max_completion_tokens"] == 2**63  # as asked
    found = attrs(traced.one("chat gpt-9-next"))
    assert found["gen_ai.request.temperature"] == 0.2
    assert "gen_ai.request.max_tokens" not in found
    assert "gen_ai.usage.input_tokens" not in found
    assert found["gen_ai.usage.output_tokens"] == 17


# Content: only on opt-in; secrets: never


def _texts_absent(traced: Traced) -> None:
    for value in traced.values():
        assert "Lovelace" not in value and "1843" not in value, value
        assert KEY not in value


def test_no_content_without_the_opt_in(traced: Traced) -> None:
    provider = openai(Script(completion(), sse(ANSWER)))
    extractor = Extractor(tracer_provider=traced.provider)
    extractor.extract(provider, Program, REQUEST.system("Be exact."))
    with extractor.extract_stream(provider, Program, REQUEST) as stream:
        stream.finish()
    assert len(traced.spans) == 4
    for span in traced.spans:
        found = attrs(span)
        assert "gen_ai.input.messages" not in found and "gen_ai.output.messages" not in found
    _texts_absent(traced)


def _check_content(traced: Traced) -> None:
    for span in traced.spans:
        found = attrs(span)
        messages = json.loads(found["gen_ai.input.messages"])
        assert messages[0] == {"role": "system", "parts": [{"type": "text", "content": "Hi."}]}
        assert messages[-1] == {"role": "user", "parts": [{"type": "text", "content": PROMPT}]}
        if span.kind is SpanKind.CLIENT:
            (output,) = json.loads(found["gen_ai.output.messages"])
            assert output == {
                "role": "assistant",
                "parts": [{"type": "text", "content": ANSWER}],
                "finish_reason": "stop",
            }
    assert not any(KEY in value for value in traced.values())


def test_content_with_the_conventions_environment_variable(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "SPAN_ONLY")
    provider = openai(Script(completion()))
    request = ChatRequest(MODEL).system("Hi.").user(PROMPT)
    Extractor(tracer_provider=traced.provider).extract(provider, Program, request)
    assert len(traced.spans) == 2
    _check_content(traced)


def test_content_with_the_argument_and_the_argument_wins(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = openai(Script(completion(), completion()))
    request = ChatRequest(MODEL).system("Hi.").user(PROMPT)
    extractor = Extractor(tracer_provider=traced.provider, capture_content=True)
    extractor.extract(provider, Program, request)
    _check_content(traced)

    traced.exporter.clear()
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "SPAN_AND_EVENT")
    refusing = Extractor(tracer_provider=traced.provider, capture_content=False)
    refusing.extract(provider, Program, request)
    _texts_absent(traced)


@pytest.mark.parametrize("capture", [False, True])
def test_an_extractions_content_setting_holds_for_calls_of_a_provider_with_its_own_tracer(
    traced: Traced, monkeypatch: pytest.MonkeyPatch, capture: bool
) -> None:
    """Both with their tracer provider (as the README shows): the extractor's
    `capture_content` was not applied to the calls' spans, which recorded the document and
    the answer under the environment's opt-in although the extractor said no."""
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "false" if capture else "true")
    provider = openai(Script(completion()), tracer_provider=traced.provider)
    request = ChatRequest(MODEL).system("Hi.").user(PROMPT)
    extractor = Extractor(tracer_provider=traced.provider, capture_content=capture)
    extractor.extract(provider, Program, request)
    assert len(traced.spans) == 2
    if capture:
        _check_content(traced)
    else:
        _texts_absent(traced)
        for span in traced.spans:
            assert "gen_ai.input.messages" not in attrs(span)


@pytest.mark.parametrize("capture", [False, True])
@pytest.mark.parametrize("how", ["extract", "stream", "decide"])
def test_an_untraced_extractions_content_setting_holds_for_its_calls_spans(
    traced: Traced, monkeypatch: pytest.MonkeyPatch, capture: bool, how: str
) -> None:
    """The provider traced, the extractor not (no span of its own): its content setting
    was not the calls' spans', which followed the environment alone."""
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "false" if capture else "true")
    answer = '{"value": "a"}' if how == "decide" else ANSWER
    script = Script(sse(answer)) if how == "stream" else Script(completion(answer))
    provider = openai(script, tracer_provider=traced.provider)
    request = ChatRequest(MODEL).system("Hi.").user(PROMPT)
    extractor = Extractor(capture_content=capture)
    if how == "extract":
        asyncio.run(extractor.aextract(provider, Program, request))
    elif how == "stream":
        with extractor.extract_stream(provider, Program, request) as stream:
            stream.finish()
    else:
        extractor.decide(provider, Literal["a", "b"], request)
    call = attrs(traced.one(f"chat {MODEL}"))
    assert ("gen_ai.input.messages" in call) is capture
    assert ("gen_ai.output.messages" in call) is capture
    if not capture:
        _texts_absent(traced)


def test_a_providers_own_content_setting_holds_for_its_calls_in_any_extraction(
    traced: Traced,
) -> None:
    provider = openai(Script(completion()), tracer_provider=traced.provider, capture_content=False)
    request = ChatRequest(MODEL).system("Hi.").user(PROMPT)
    Extractor(tracer_provider=traced.provider, capture_content=True).extract(
        provider, Program, request
    )
    call = attrs(traced.one(f"chat {MODEL}"))
    extraction = attrs(traced.one("extract Program"))
    assert "gen_ai.input.messages" not in call and "gen_ai.output.messages" not in call
    assert "gen_ai.input.messages" in extraction


def test_a_streamed_answer_is_recorded_as_far_as_it_came_on_opt_in(traced: Traced) -> None:
    provider = openai(Script(sse(ANSWER, finish=False)))
    extractor = Extractor(tracer_provider=traced.provider, capture_content=True)
    with (
        extractor.extract_stream(provider, Program, REQUEST) as stream,
        pytest.raises(allama.IncompleteStreamError),
    ):
        stream.finish()
    (output,) = json.loads(attrs(traced.one(f"chat {MODEL}"))["gen_ai.output.messages"])
    assert output["parts"] == [{"type": "text", "content": ANSWER}]
    assert output["finish_reason"] == "error"


def test_the_key_is_never_recorded_even_with_content(traced: Traced) -> None:
    echo = f"invalid key {KEY}"
    provider = openai(
        Script(completion(), failure(401, echo)),
        tracer_provider=traced.provider,
        capture_content=True,
        headers={"x-trace": "plain"},
    )
    Extractor(tracer_provider=traced.provider).extract(provider, Program, REQUEST)
    with pytest.raises(allama.AuthenticationError):
        provider.chat(REQUEST)
    assert len(traced.spans) == 3
    assert not any(KEY in value for value in traced.values())


# Where spans go


def test_an_extraction_s_tracer_provider_carries_to_its_calls(traced: Traced) -> None:
    provider = openai(Script(completion()))  # no tracer provider of its own
    Extractor(tracer_provider=traced.provider).extract(provider, Program, REQUEST)
    assert sorted(span.name for span in traced.spans) == [f"chat {MODEL}", "extract Program"]


def test_a_provider_s_own_tracer_provider_traces_its_calls_alone(traced: Traced) -> None:
    provider = openai(Script(completion()), tracer_provider=traced.provider)
    allama.extract(provider, Program, REQUEST)  # the default extractor: no tracer here
    assert [span.name for span in traced.spans] == [f"chat {MODEL}"]


_IN_A_PROCESS = textwrap.dedent(
    f"""
    import httpx2, pydantic, allama
    from allama.transport import Transport

    class Program(pydantic.BaseModel):
        name: str
        year: int

    def reply(request):
        return httpx2.Response(200, json={{
            "id": "c", "model": "m",
            "choices": [{{"index": 0, "finish_reason": "stop",
                "message": {{"role": "assistant", "content": {ANSWER!r}}}}}]}})

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(reply)))
    provider = allama.provider("xai", api_key="k", transport=transport)
    """
)
"""The start of a program run in a process of its own: xAI answering `ANSWER` at once."""


def test_nothing_is_traced_or_imported_without_a_tracer_provider() -> None:
    """No tracer provider anywhere: no `opentelemetry` import, and no spans. A global one set
    later is used from then on, and the GenAI provider name follows the conventions."""
    code = _IN_A_PROCESS + textwrap.dedent(
        f"""
        import sys, allama.mock
        request = allama.ChatRequest("grok-4").user("Ada")
        allama.extract(provider, Program, request)
        with allama.extract_stream(allama.mock.MockStreamingProvider.with_text({ANSWER!r}),
                                   Program, request) as stream:
            stream.finish()
        assert not any(m.startswith("opentelemetry") for m in sys.modules), "imported"

        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
        allama.extract(provider, Program, request)  # the API's no-op provider: no spans
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(tracer_provider)
        allama.extract(provider, Program, request)
        spans = exporter.get_finished_spans()
        print(sorted(s.name for s in spans), spans[0].attributes["gen_ai.provider.name"])
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['chat grok-4', 'extract Program'] x_ai"


def test_a_tracer_provider_must_be_one() -> None:
    with pytest.raises(TypeError, match="tracer_provider"):
        Extractor(tracer_provider="collector:4317")
    with pytest.raises(TypeError, match="capture_content"):
        allama.provider("openai", api_key=KEY, capture_content="yes")  # type: ignore[arg-type]


def test_with_options_keeps_the_tracing(traced: Traced) -> None:
    extractor = Extractor(tracer_provider=traced.provider).with_options(retries=1)
    assert extractor.retries == 1
    extractor.extract(openai(Script(completion())), Program, REQUEST)
    assert len(traced.spans) == 2
    assert repr(extractor) == repr(Extractor(retries=1))  # the batch ledger keys on it


# Decisions, the provider names, the type names


def test_a_decision_is_a_decide_span(traced: Traced) -> None:
    provider = openai(Script(completion('{"value": "red"}')))
    extractor = Extractor(tracer_provider=traced.provider)
    request = ChatRequest(MODEL).user("The colour of a ruby?")
    decision = extractor.decide(provider, Colour, request, probabilities=False)
    assert decision.value is Colour.RED
    span, call = traced.one("decide Colour"), traced.one(f"chat {MODEL}")
    assert child_of(call, span)
    found = attrs(span)
    assert found["gen_ai.operation.name"] == "decide"
    assert found["allama.extract.passes"] == 1


def test_gemini_calls_are_generate_content() -> None:
    traced = Traced()
    body = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": ANSWER}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r-1",
    }
    script = Script(httpx2.Response(200, json=body))
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(script)))
    provider = allama.provider(
        "gemini", api_key=KEY, transport=transport, tracer_provider=traced.provider
    )
    allama.extract(provider, Program, ChatRequest("gemini-2.5-flash").user(PROMPT))
    call = traced.one("generate_content gemini-2.5-flash")
    assert attrs(call)["gen_ai.provider.name"] == "gcp.gemini"
    assert attrs(call)["server.address"] == "generativelanguage.googleapis.com"
    assert attrs(call)["gen_ai.response.id"] == "r-1"


def test_provider_names_follow_the_conventions() -> None:
    assert [
        genai_provider_name(name)
        for name in ("openai", "azure-openai", "xai", "mistral", "vertex-gemini", "groq", "vllm")
    ] == ["openai", "azure.ai.openai", "x_ai", "mistral_ai", "gcp.vertex_ai", "groq", "vllm"]


def test_type_names_are_short() -> None:
    assert type_name(Program) == "Program"
    assert type_name(list[Program]) == "list[Program]"
    assert type_name(Program | None) == "Program | None"
    assert type_name(dict[str, int]) == "dict[str, int]"


# Batch runs


def _batch_request(document: str) -> ChatRequest:
    return ChatRequest(MODEL).user(document).with_option(ExtractionMode.NATIVE)


@FLAVOURS
def test_a_batch_run_is_a_span_with_one_span_per_input(traced: Traced, flavour: str) -> None:
    script = Script(
        completion(), completion(None, refusal="No."), failure(503, "busy"), completion()
    )
    provider = openai(script)
    extractor = Extractor(tracer_provider=traced.provider)
    documents = ["one", "two", "three"]
    options: dict[str, Any] = {
        "request": _batch_request,
        "extractor": extractor,
        "concurrency": 1,
        "backoff": 0.001,
    }

    def sync() -> list[Any]:
        return list(allama.batch(provider, Program, documents, **options))

    async def async_() -> list[Any]:
        return [result async for result in allama.abatch(provider, Program, documents, **options)]

    results = run(flavour, sync, async_)
    assert [(result.ok, result.attempts) for result in results] == [
        (True, 1),
        (False, 1),
        (True, 2),
    ]

    batch = traced.one("batch Program")
    inputs = sorted(
        traced.named("batch.input Program"), key=lambda span: attrs(span)["allama.batch.index"]
    )
    extractions = traced.named("extract Program")
    calls = traced.named(f"chat {MODEL}")
    assert (len(inputs), len(extractions), len(calls)) == (3, 4, 4)
    assert batch.parent is None
    assert all(child_of(span, batch) for span in inputs)
    under = [[e for e in extractions if child_of(e, span)] for span in inputs]
    assert [len(found) for found in under] == [1, 1, 2]  # the third input was tried twice
    for call in calls:
        assert sum(child_of(call, extraction) for extraction in extractions) == 1
    assert [attrs(span)["allama.batch.label"] for span in inputs] == ["#0", "#1", "#2"]
    assert [attrs(span)["allama.batch.attempts"] for span in inputs] == [1, 1, 2]
    assert [span.status.status_code for span in inputs] == [
        StatusCode.UNSET,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    assert attrs(inputs[1])["error.type"] == "extraction_refused"
    found = attrs(batch)
    assert (found["allama.batch.total"], found["allama.batch.done"]) == (3, 2)
    assert found["allama.batch.failed"] == 1
    assert batch.status.status_code is StatusCode.UNSET


def test_an_inputs_key_is_on_its_span_only_with_content(traced: Traced, tmp_path: Path) -> None:
    """The key is a hash of the request: without content, one who knows the template could
    test guesses of a short input against it."""
    from allama.mock import MockProvider

    for capture in (False, True):
        traced.exporter.clear()
        extractor = Extractor(tracer_provider=traced.provider, capture_content=capture)
        ledger = tmp_path / f"{capture}.sqlite"
        provider = MockProvider([ANSWER] * 2, name="openai")
        first: allama.BatchRun[Program] = allama.batch(
            provider, Program, ["one"], request=_batch_request, ledger=ledger
        )
        assert all(result.ok for result in first)
        # One input resumed from the ledger, one run now.
        again: allama.BatchRun[Program] = allama.batch(
            provider,
            Program,
            ["one", "two"],
            request=_batch_request,
            extractor=extractor,
            ledger=ledger,
        )
        results = list(again)
        assert sorted(result.resumed for result in results) == [False, True]
        keys = {result.index: result.key for result in results}
        inputs = traced.named("batch.input Program")
        assert sorted(attrs(span)["allama.batch.index"] for span in inputs) == [0, 1]
        for span in inputs:
            found = attrs(span)
            index = found["allama.batch.index"]
            assert found["allama.batch.label"] == f"#{index}"
            assert found.get("allama.batch.key") == (keys[index] if capture else None)
        if not capture:
            assert not any(key in value for key in keys.values() for value in traced.values())


@FLAVOURS
def test_a_batch_runs_span_is_a_child_of_the_callers_span(traced: Traced, flavour: str) -> None:
    provider = openai(Script(completion(), completion()))
    extractor = Extractor(tracer_provider=traced.provider)
    options: dict[str, Any] = {"request": _batch_request, "extractor": extractor}
    tracer = traced.provider.get_tracer("the caller's")

    def sync() -> list[Any]:
        with tracer.start_as_current_span("job"):
            return list(allama.batch(provider, Program, ["one", "two"], **options))

    async def async_() -> list[Any]:
        with tracer.start_as_current_span("job"):
            run = allama.abatch(provider, Program, ["one", "two"], **options)
            return [result async for result in run]

    assert [result.ok for result in run(flavour, sync, async_)] == [True, True]
    job, batch = traced.one("job"), traced.one("batch Program")
    assert child_of(batch, job)  # one trace, the caller's, in both drivers


def test_inputs_a_stopped_run_read_ahead_get_spans_of_their_own(traced: Traced) -> None:
    from allama.mock import MockProvider

    extractor = Extractor(tracer_provider=traced.provider)
    provider = MockProvider([ANSWER] * 40)
    read: list[int] = []

    def documents() -> Iterator[str]:  # read ahead by a thread of the run
        for n in range(40):
            read.append(n)
            yield f"document {n}"

    run = allama.batch(
        provider, Program, documents(), request=_batch_request, extractor=extractor, concurrency=2
    )
    results = []
    for result in run:
        results.append(result)
        waited = time.monotonic() + 10
        while len(read) < 8 and time.monotonic() < waited:  # the thread reads on meanwhile
            time.sleep(0.001)
        run.stop()
    not_started = [r for r in results if r.failure is not None and r.failure.kind == "not_started"]
    assert not_started  # (inputs the thread read ahead of the stop)
    # Each result is on a span of its own: none on the run's, which the stop does not fail.
    inputs = traced.named("batch.input Program")
    assert sorted(attrs(span)["allama.batch.index"] for span in inputs) == sorted(
        r.index for r in results
    )
    assert all(child_of(span, traced.one("batch Program")) for span in inputs)
    found = attrs(traced.one("batch Program"))
    assert "allama.batch.label" not in found and "error.type" not in found
    assert traced.one("batch Program").status.status_code is StatusCode.UNSET
    assert found["allama.batch.not_started"] == run.summary.not_started > 0
    assert found["allama.batch.stopped"] == "stopped by the caller"
    # Not failures: the run counts them apart (`failed` 0), and so do their spans.
    assert run.summary.failed == 0
    left = [s for s in inputs if attrs(s).get("allama.batch.outcome") == "not_started"]
    assert len(left) == len(not_started)
    # Without content, no input's key (a hash of its request) on its span.
    assert not any("allama.batch.key" in attrs(span) for span in inputs)
    assert [(s.status.status_code, "error.type" in attrs(s)) for s in left] == [
        (StatusCode.UNSET, False)
    ] * len(left)
    from allama._tracing import _NOT_ENDED_HERE as untraced
    from allama.batch._run import _NOT_ENDED_HERE

    assert untraced == _NOT_ENDED_HERE  # (the tracing module's copy of the run's kinds)


def test_a_run_left_before_its_end_is_no_error_of_its_own(traced: Traced) -> None:
    def slow(request: httpx2.Request) -> httpx2.Response:
        time.sleep(0.5)
        return completion()

    provider = openai(Script(completion(), *[slow] * 3))
    extractor = Extractor(tracer_provider=traced.provider)
    options: dict[str, Any] = {"request": _batch_request, "extractor": extractor}
    run = allama.batch(provider, Program, ["a", "b", "c", "d"], concurrency=4, **options)
    for _ in run:
        break  # leaves the loop: the run is closed, the calls in flight abandoned
    batch = traced.one("batch Program")
    assert batch.status.status_code is StatusCode.UNSET
    found = attrs(batch)
    assert found["allama.batch.abandoned"] == run.summary.abandoned == 3
    # Their calls go on in their threads: sent, and perhaps paid for.
    assert found["allama.batch.abandoned_calls"] == run.summary.abandoned_calls == 3
    assert found["allama.batch.stopped"] == run.summary.stopped
    left = [span for span in traced.named("batch.input Program") if span is not None]
    assert sorted(attrs(span).get("allama.batch.abandoned", False) for span in left) == [
        False,
        True,
        True,
        True,
    ]


class _FailsAtTheEnd(SpanProcessor):
    """A span processor that raises as a span ends (an exporter's bug, say)."""

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("the processor's own bug")


def test_a_span_processor_that_fails_as_spans_end_fails_no_extraction_and_no_run(
    traced: Traced,
) -> None:
    traced.provider.add_span_processor(_FailsAtTheEnd())
    provider = openai(
        Script(completion(), completion(), completion()), tracer_provider=traced.provider
    )
    extractor = Extractor(tracer_provider=traced.provider)
    extracted = extractor.extract(provider, Program, REQUEST)
    assert extracted.value == Program.model_validate_json(ANSWER)
    results = list(
        allama.batch(provider, Program, ["a", "b"], request=_batch_request, extractor=extractor)
    )
    assert [result.ok for result in results] == [True, True]
    assert len(traced.named("batch.input Program")) == 2  # (ended: the exporter saw them)


def test_a_batch_runs_span_has_no_cost_it_does_not_know(traced: Traced) -> None:
    from allama.mock import ChatResponseBuilder, MockProvider

    def answer(model: str) -> Any:
        return ChatResponseBuilder().text(ANSWER).usage(100, 10).model(model).build()

    extractor = Extractor(tracer_provider=traced.provider)
    options: dict[str, Any] = {"request": _batch_request, "extractor": extractor}
    # No input priced: no total (a cost of 0 would be a lie), and why.
    unpriced = MockProvider([answer("acme-unpriced-1")] * 2, name="openai")
    run = allama.batch(unpriced, Program, ["one", "two"], concurrency=1, **options)
    assert all(result.ok for result in run)
    found = attrs(traced.one("batch Program"))
    assert "allama.cost.total" not in found
    assert found["allama.cost.unknown_inputs"] == 2
    assert found["allama.cost.missing"] == run.summary.cost_missing
    assert "has no price for 'acme-unpriced-1'" in found["allama.cost.missing"]
    traced.exporter.clear()
    # Some priced: their sum, and how many it leaves out.
    mixed = MockProvider([answer("gpt-4o-mini"), answer("acme-unpriced-1")], name="openai")
    run = allama.batch(mixed, Program, ["one", "two"], concurrency=1, **options)
    assert all(result.ok for result in run)
    found = attrs(traced.one("batch Program"))
    assert found["allama.cost.total"] == float(run.summary.cost) == 0.000021
    assert found["allama.cost.unknown_inputs"] == 1


def test_a_resumed_runs_span_says_what_of_its_cost_earlier_runs_paid(
    traced: Traced, tmp_path: Path
) -> None:
    """The run's cost is the job's (an input an earlier run finished counts what it paid
    then): summed across runs' spans it counted that money twice, and nothing said which."""
    from allama.mock import ChatResponseBuilder, MockProvider

    answer = ChatResponseBuilder().text(ANSWER).usage(100, 10).model("gpt-4o-mini").build()
    extractor = Extractor(tracer_provider=traced.provider)
    options: dict[str, Any] = {"request": _batch_request, "extractor": extractor}
    ledger = tmp_path / "run.sqlite"
    provider = MockProvider([answer] * 3, name="openai")
    first = allama.batch(provider, Program, ["one"], ledger=ledger, **options)
    assert all(result.ok for result in first)
    found = attrs(traced.one("batch Program"))
    assert found["allama.cost.total"] == 0.0000210 and "allama.cost.earlier_runs" not in found
    traced.exporter.clear()
    again = allama.batch(provider, Program, ["one", "two"], ledger=ledger, **options)
    assert [r.resumed for r in sorted(again, key=lambda r: r.index)] == [True, False]
    found = attrs(traced.one("batch Program"))
    assert found["allama.cost.total"] == pytest.approx(0.000042)
    assert found["allama.cost.earlier_runs"] == pytest.approx(0.000021)
    assert again.summary.cost_earlier == Decimal("0.000021")
    traced.exporter.clear()
    # A failure an earlier run paid for, sent again: its earlier attempt is that run's.
    prose = ChatResponseBuilder().text("no JSON").usage(100, 10).model("gpt-4o-mini").build()
    failing = MockProvider([prose], name="openai")
    (failed,) = allama.batch(failing, Program, ["three"], ledger=ledger, **options)
    assert failed.failure is not None and failed.failure.kind == "extraction_parse"
    traced.exporter.clear()
    retried = allama.batch(
        provider, Program, ["three"], ledger=ledger, retry_failed=True, **options
    )
    (result,) = retried
    assert result.ok and not result.resumed and len(result.spent) == 1
    found = attrs(traced.one("batch Program"))
    assert found["allama.cost.total"] == pytest.approx(0.000042)
    assert found["allama.cost.earlier_runs"] == pytest.approx(0.000021)
    assert "cost $0.000042 ($0.000021 of it paid by earlier runs)" in retried.summary.lines()


@FLAVOURS
def test_a_batch_runs_span_says_its_types_schema_changed(
    traced: Traced, tmp_path: Path, flavour: str
) -> None:
    """A run whose type's schema is not that of an earlier run of the ledger sends that
    run's inputs again: its span says why, as its summary and its warning do."""
    import warnings

    from pydantic import Field, create_model

    from allama.mock import MockProvider

    extractor = Extractor(tracer_provider=traced.provider)
    ledger = tmp_path / "run.sqlite"

    def batch_of(tp: Any) -> Any:
        provider = MockProvider([ANSWER] * 2, name="openai")
        options: dict[str, Any] = {"request": _batch_request, "extractor": extractor}
        if flavour == "sync":
            return allama.batch(provider, tp, ["one"], ledger=ledger, **options)
        return allama.abatch(provider, tp, ["one"], ledger=ledger, **options)

    def ended(tp: Any) -> tuple[Any, list[str]]:
        run_ = batch_of(tp)

        async def drain() -> None:
            async for _ in run_:
                pass

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if flavour == "sync":
                list(run_)
            else:
                asyncio.run(drain())
        return run_.summary, [str(w.message) for w in caught if w.category is RuntimeWarning]

    first = create_model("Program", name=(str, ...), year=(int, ...))
    summary, said = ended(first)
    assert (summary.schema_changed, said) == (None, [])
    assert "allama.batch.schema_changed" not in attrs(traced.one("batch Program"))
    traced.exporter.clear()
    said_of_name = Field(description="Who published it.")
    second = create_model("Program", name=(str, said_of_name), year=(int, ...))
    summary, said = ended(second)
    expected = (
        "the type `Program` has another schema than in an earlier run of the ledger with this "
        "provider and model (at `/properties/name/description`), so an input of that run given to "
        "this one is not taken from the ledger: it is sent, and paid for, again"
    )
    assert (summary.schema_changed, said) == (expected, [expected])
    assert attrs(traced.one("batch Program"))["allama.batch.schema_changed"] == expected


def test_a_call_billed_before_it_failed_keeps_its_tokens_on_its_span(traced: Traced) -> None:
    # An error on the choice of a 200 body that reported usage (OpenRouter's): paid for,
    # and counted on the call's span as on the extraction's.
    body = {
        "id": "gen-1",
        "model": "anthropic/claude-x-served",
        "choices": [
            {
                "index": 0,
                "finish_reason": "error",
                "message": {"role": "assistant", "content": ""},
                "error": {"code": 502, "message": "upstream failed"},
            }
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500},
    }
    transport = Transport(
        client=httpx2.Client(
            transport=httpx2.MockTransport(Script(httpx2.Response(200, json=body)))
        )
    )
    provider = allama.provider("openrouter", api_key=KEY, transport=transport)
    with pytest.raises(allama.Error):
        Extractor(tracer_provider=traced.provider).extract(
            provider, Program, ChatRequest("anthropic/claude-x").user(PROMPT)
        )
    call = traced.one("chat anthropic/claude-x")
    assert call.status.status_code is StatusCode.ERROR
    assert attrs(call)["gen_ai.usage.input_tokens"] == 1000
    assert attrs(call)["gen_ai.usage.output_tokens"] == 500
    assert attrs(call)["gen_ai.response.model"] == "anthropic/claude-x-served"


class Picky(BaseModel):
    name: str
    year: int

    @field_validator("year")
    @classmethod
    def known(cls, year: int) -> int:
        raise KeyError(year)  # the type's own error, not a validation error


def test_a_streamed_extraction_failed_by_the_types_own_error_is_a_failed_span(
    traced: Traced,
) -> None:
    provider = openai(Script(sse(ANSWER)))
    extractor = Extractor(tracer_provider=traced.provider)
    with (
        pytest.raises(KeyError) as caught,
        extractor.extract_stream(provider, Picky, REQUEST) as stream,
    ):
        stream.finish()
    extraction = traced.one("extract Picky")
    assert extraction.status.status_code is StatusCode.ERROR
    assert attrs(extraction)["error.type"] == "KeyError"
    assert "allama.stream.closed_early" not in attrs(extraction)
    # The pass was made and paid for: on the span, and with the error, as unstreamed.
    assert attrs(extraction)["allama.extract.passes"] == 1
    record = allama.ExtractionMetadata.from_error(caught.value)
    assert record is not None and record.passes == 1 and record.usage is not None


def _broken_midway(request: httpx2.Request) -> httpx2.Response:
    """A stream whose transport raises an exception none of allama's after a chunk."""
    first = b'data: {"id": "c", "model": "m", "choices": [{"index": 0, "delta": '
    first += b'{"content": "{\\"name\\""}}]}\n\n'

    class Broken(httpx2.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield first
            raise RuntimeError("the transport's own bug")

    headers = {"content-type": "text/event-stream"}
    return httpx2.Response(200, stream=Broken(), headers=headers)


def test_a_stream_ended_by_an_exception_not_allamas_is_a_failed_span(traced: Traced) -> None:
    # Not a close by the caller: the extraction span fails as a non-streamed one's does.
    provider = openai(Script(_broken_midway))
    extractor = Extractor(tracer_provider=traced.provider)
    with (
        pytest.raises(RuntimeError, match="own bug"),
        extractor.extract_stream(provider, Program, REQUEST) as stream,
    ):
        stream.finish()
    extraction = traced.one("extract Program")
    assert extraction.status.status_code is StatusCode.ERROR
    assert attrs(extraction)["error.type"] == "RuntimeError"
    assert "allama.stream.closed_early" not in attrs(extraction)


def test_a_cancelled_stream_is_a_failed_span_as_a_cancelled_extraction_is(
    traced: Traced,
) -> None:
    first = b'data: {"id": "c", "model": "m", "choices": [{"index": 0, "delta": '
    first += b'{"content": "{\\"name\\""}}]}\n\n'

    class Held(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield first
            await asyncio.sleep(30)  # the rest never comes: cancelled while it waits

    def held(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=Held(), headers={"content-type": "text/event-stream"})

    async def slow(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(30)  # cancelled while it waits
        raise AssertionError("cancelled before it is answered")

    provider = openai(Script(held, cast(Reply, slow)))
    extractor = Extractor(tracer_provider=traced.provider)

    async def read(started: asyncio.Event) -> None:
        stream = await extractor.aextract_stream(provider, Program, REQUEST)
        async for _ in stream:
            started.set()

    async def cancelled(work: Callable[[asyncio.Event], Any]) -> None:
        started = asyncio.Event()
        task = asyncio.ensure_future(work(started))
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def call(started: asyncio.Event) -> None:
        started.set()
        await extractor.aextract(provider, Program, REQUEST)

    asyncio.run(cancelled(read))
    asyncio.run(cancelled(call))
    streamed, unstreamed = traced.named("extract Program")
    assert [
        (span.status.status_code, attrs(span).get("error.type")) for span in (streamed, unstreamed)
    ] == [(StatusCode.ERROR, "CancelledError")] * 2
    assert "allama.stream.closed_early" not in attrs(streamed)


class _NoTracer:
    """A tracer provider that raises as its tracer is asked for."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the tracer provider's own bug")


class _RaisingSpan:
    """A span whose attributes cannot be set (outside the API's contract, but met)."""

    def __getattr__(self, name: str) -> Any:
        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError(f"{name}: the span's own bug")

        return broken

    def is_recording(self) -> bool:
        return True


class _RaisingTracer:
    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        return _RaisingSpan()


class _RaisingSpans:
    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return _RaisingTracer()


@pytest.mark.parametrize("tracer_provider", [_NoTracer(), _RaisingSpans()])
def test_a_tracer_provider_or_span_that_raises_fails_no_extraction(tracer_provider: Any) -> None:
    expected = Program.model_validate_json(ANSWER)
    extractor = Extractor(tracer_provider=tracer_provider)
    assert extractor.extract(openai(Script(completion())), Program, REQUEST).value == expected
    traced_calls = openai(Script(completion()), tracer_provider=tracer_provider)
    assert allama.extract(traced_calls, Program, REQUEST).value == expected
    with extractor.extract_stream(openai(Script(sse(ANSWER))), Program, REQUEST) as stream:
        assert stream.finish().value == expected
    results = list(
        allama.batch(
            openai(Script(completion())),
            Program,
            ["a"],
            request=_batch_request,
            extractor=extractor,
        )
    )
    assert [result.value for result in results] == [expected]


def test_a_tracer_provider_the_environment_names_and_cannot_be_loaded_fails_no_call() -> None:
    code = _IN_A_PROCESS + textwrap.dedent(
        """
        print(allama.extract(provider, Program, allama.ChatRequest("grok-4").user("Ada")).value)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_PYTHON_TRACER_PROVIDER"] = "no_such_provider"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "name='Ada Lovelace' year=1843"


def test_an_extraction_through_a_failover_names_the_provider_that_answered(
    traced: Traced,
) -> None:
    from allama.wrappers import FailoverProvider

    down = httpx2.Response(503, json={"error": {"message": "down"}})
    script = Script(completion(), sse(ANSWER))
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(script)))
    groq = allama.provider("groq", api_key=KEY, transport=transport)
    failover = FailoverProvider([openai(Script(down, down)), groq])
    extractor = Extractor(tracer_provider=traced.provider)
    extractor.extract(failover, Program, ChatRequest(MODEL).user(PROMPT))
    with extractor.extract_stream(failover, Program, ChatRequest(MODEL).user(PROMPT)) as stream:
        stream.finish()
    names = [attrs(span)["gen_ai.provider.name"] for span in traced.named("extract Program")]
    assert names == ["groq", "groq"]


def test_an_extraction_every_provider_of_a_failover_failed_names_the_last_one(
    traced: Traced,
) -> None:
    # No provider answered: the extraction's span names the one whose error ended it, as
    # the error and that call's span do, not the failover.
    from allama.wrappers import FailoverProvider

    down = httpx2.Response(503, json={"error": {"message": "down"}})
    script = Script(down, down)
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(script)))
    groq = allama.provider("groq", api_key=KEY, transport=transport)
    failover = FailoverProvider([openai(Script(down, down)), groq])
    extractor = Extractor(tracer_provider=traced.provider)
    raised: list[allama.Error] = []
    with pytest.raises(allama.ServerError) as caught:
        extractor.extract(failover, Program, ChatRequest(MODEL).user(PROMPT))
    raised.append(caught.value)
    with (
        pytest.raises(allama.ServerError) as caught,
        extractor.extract_stream(failover, Program, ChatRequest(MODEL).user(PROMPT)) as stream,
    ):
        stream.finish()
    raised.append(caught.value)
    assert [error.provider for error in raised] == ["groq", "groq"]
    names = [attrs(span)["gen_ai.provider.name"] for span in traced.named("extract Program")]
    assert names == ["groq", "groq"]
    calls = [attrs(span)["gen_ai.provider.name"] for span in traced.named(f"chat {MODEL}")]
    assert calls == ["openai", "groq"] * 2


# A wrapper's call: one trace, its attempts under one span


async def _no_wait(seconds: float) -> None:
    return None


def _retrying(provider: Any, **options: Any) -> Any:
    from allama.wrappers import RetryingProvider

    return RetryingProvider(provider, sleep=lambda seconds: None, async_sleep=_no_wait, **options)


def _groq(script: Script, **options: Any) -> allama.HttpProvider:
    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(script)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(script)),
    )
    return allama.provider("groq", api_key=KEY, transport=transport, **options)


_CHAT = ChatRequest(MODEL).user(PROMPT)


@FLAVOURS
def test_a_retrying_providers_call_is_one_trace_its_attempts_under_one_span(
    traced: Traced, flavour: str
) -> None:
    script = Script(failure(500, "boom"), failure(503, "busy"), completion())
    provider = _retrying(openai(script, tracer_provider=traced.provider))
    response = run(flavour, lambda: provider.chat(_CHAT), lambda: provider.achat(_CHAT))
    assert response.provider_data["allama"]["retry"] == {"attempts": 3}

    wrapper = traced.one(f"retry {MODEL}")
    calls = traced.named(f"chat {MODEL}")
    assert (wrapper.parent, wrapper.kind, wrapper.status.status_code) == (
        None,
        SpanKind.INTERNAL,
        StatusCode.UNSET,
    )
    assert attrs(wrapper) == {"gen_ai.request.model": MODEL, "allama.retry.attempts": 3}
    assert [child_of(call, wrapper) for call in calls] == [True] * 3
    assert [attrs(call)["allama.retry.attempt"] for call in calls] == [1, 2, 3]
    assert [attrs(call).get("error.type") for call in calls] == ["server", "overloaded", None]


@pytest.mark.parametrize(
    ("replies", "attempts", "why", "error_type"),
    [
        ([failure(500, "boom"), failure(500, "boom")], 2, "max_attempts", "server"),
        (
            [
                httpx2.Response(
                    400, json={"error": {"message": "bad", "type": "invalid_request_error"}}
                )
            ],
            1,
            "not_retryable",
            "invalid_request",
        ),
    ],
)
def test_a_retry_that_gives_up_fails_its_span_saying_why(
    traced: Traced, replies: list[httpx2.Response], attempts: int, why: str, error_type: str
) -> None:
    from allama.wrappers import RetryPolicy

    provider = _retrying(
        openai(Script(*replies), tracer_provider=traced.provider), policy=RetryPolicy(2)
    )
    with pytest.raises(allama.Error) as caught:
        provider.chat(_CHAT)
    assert caught.value.context.metadata["allama.retry"]["gave_up"] == why

    wrapper = traced.one(f"retry {MODEL}")
    assert wrapper.status.status_code is StatusCode.ERROR
    found = attrs(wrapper)
    assert (found["allama.retry.attempts"], found["allama.retry.gave_up"]) == (attempts, why)
    assert found["error.type"] == error_type
    calls = traced.named(f"chat {MODEL}")
    assert [attrs(call)["allama.retry.attempt"] for call in calls] == list(range(1, attempts + 1))
    assert all(child_of(call, wrapper) for call in calls)


@FLAVOURS
def test_a_retried_stream_is_one_trace_too(traced: Traced, flavour: str) -> None:
    provider = _retrying(
        openai(Script(failure(503, "busy"), sse(ANSWER)), tracer_provider=traced.provider)
    )

    def sync() -> str:
        with provider.chat_stream(_CHAT) as stream:
            return str(stream.response().text())

    async def async_() -> str:
        stream = await provider.achat_stream(_CHAT)
        async with stream:
            return str((await stream.response()).text())

    assert run(flavour, sync, async_) == ANSWER
    wrapper = traced.one(f"retry {MODEL}")
    calls = traced.named(f"chat {MODEL}")
    assert attrs(wrapper)["allama.retry.attempts"] == 2
    assert [child_of(call, wrapper) for call in calls] == [True, True]
    assert [attrs(call)["allama.retry.attempt"] for call in calls] == [1, 2]
    assert attrs(calls[1])["gen_ai.request.stream"] is True
    assert attrs(calls[1])["gen_ai.usage.output_tokens"] == 12  # spanned to the stream's end


@FLAVOURS
def test_a_failovers_call_is_one_trace_its_providers_under_one_span(
    traced: Traced, flavour: str
) -> None:
    from allama.wrappers import FailoverProvider

    failover = FailoverProvider(
        [
            openai(Script(failure(503, "busy")), tracer_provider=traced.provider),
            _groq(Script(completion()), tracer_provider=traced.provider),
        ]
    )
    response = run(flavour, lambda: failover.chat(_CHAT), lambda: failover.achat(_CHAT))
    assert response.provider == "groq"

    wrapper = traced.one(f"failover {MODEL}")
    calls = traced.named(f"chat {MODEL}")
    assert (wrapper.parent, wrapper.status.status_code) == (None, StatusCode.UNSET)
    assert attrs(wrapper) == {"gen_ai.request.model": MODEL, "allama.failover.attempts": 2}
    assert [child_of(call, wrapper) for call in calls] == [True, True]
    assert [
        (attrs(call)["gen_ai.provider.name"], attrs(call)["allama.failover.attempt"])
        for call in calls
    ] == [("openai", 1), ("groq", 2)]


def _limited(seconds: int) -> httpx2.Response:
    return httpx2.Response(
        429,
        json={"error": {"message": "slow down", "type": "rate_limit_error", "code": None}},
        headers={"retry-after": str(seconds)},
    )


@FLAVOURS
def test_a_failovers_span_names_the_providers_it_passed_over(traced: Traced, flavour: str) -> None:
    # OpenAI asked for 30 s: the next call passes it over, which no call span shows.
    from allama.wrappers import FailoverProvider

    failover = FailoverProvider(
        [
            openai(Script(_limited(30)), tracer_provider=traced.provider),
            _groq(Script(completion(), completion()), tracer_provider=traced.provider),
        ],
        clock=lambda: 100.0,
    )
    for _ in range(2):
        run(flavour, lambda: failover.chat(_CHAT), lambda: failover.achat(_CHAT))

    first, second = traced.named(f"failover {MODEL}")
    assert attrs(first) == {"gen_ai.request.model": MODEL, "allama.failover.attempts": 2}
    assert attrs(second) == {
        "gen_ai.request.model": MODEL,
        "allama.failover.attempts": 1,
        "allama.failover.skipped": 1,
        "allama.failover.skipped_providers": ("openai",),
        "allama.failover.skipped_reasons": ("rate_limited",),
    }
    (call,) = [span for span in traced.named(f"chat {MODEL}") if child_of(span, second)]
    assert attrs(call)["gen_ai.provider.name"] == "groq"


def test_a_failed_failovers_span_names_the_providers_it_passed_over(traced: Traced) -> None:
    # Both asked to wait: the one whose wait ends first is tried, the other passed over.
    from allama.wrappers import FailoverProvider

    failover = FailoverProvider(
        [
            openai(Script(_limited(30)), tracer_provider=traced.provider),
            _groq(Script(_limited(10), _limited(10)), tracer_provider=traced.provider),
        ],
        clock=lambda: 100.0,
    )
    for _ in range(2):
        with pytest.raises(allama.RateLimitedError):
            failover.chat(_CHAT)

    last = traced.named(f"failover {MODEL}")[-1]
    assert last.status.status_code is StatusCode.ERROR
    found = attrs(last)
    assert found["allama.failover.attempts"] == 1
    assert (
        found["allama.failover.skipped"],
        found["allama.failover.skipped_providers"],
        found["allama.failover.skipped_reasons"],
    ) == (1, ("openai",), ("rate_limited",))


def test_a_retry_of_a_failover_holds_a_failover_span_per_attempt(traced: Traced) -> None:
    from allama.wrappers import FailoverProvider

    first = openai(Script(failure(503, "busy"), completion()), tracer_provider=traced.provider)
    second = _groq(Script(failure(503, "busy")), tracer_provider=traced.provider)
    _retrying(FailoverProvider([first, second])).chat(_CHAT)

    retry = traced.one(f"retry {MODEL}")
    failovers = traced.named(f"failover {MODEL}")
    calls = traced.named(f"chat {MODEL}")
    assert retry.parent is None and attrs(retry)["allama.retry.attempts"] == 2
    assert [child_of(span, retry) for span in failovers] == [True, True]
    assert [
        (attrs(span)["allama.retry.attempt"], attrs(span)["allama.failover.attempts"])
        for span in failovers
    ] == [(1, 2), (2, 1)]
    assert [span.status.status_code for span in failovers] == [StatusCode.ERROR, StatusCode.UNSET]
    assert [[child_of(call, span) for span in failovers] for call in calls] == [
        [True, False],
        [True, False],
        [False, True],
    ]
    # Each call says which attempt it is of the wrapper whose span holds it, not the outer.
    assert [attrs(call)["allama.failover.attempt"] for call in calls] == [1, 2, 1]
    assert not any("allama.retry.attempt" in attrs(call) for call in calls)


def test_inside_an_extraction_a_wrappers_attempts_stay_the_extractions_calls(
    traced: Traced,
) -> None:
    from allama.wrappers import FailoverProvider

    first = openai(
        Script(failure(503, "busy"), failure(503, "busy")), tracer_provider=traced.provider
    )
    second = _groq(Script(failure(503, "busy"), completion()), tracer_provider=traced.provider)
    provider = _retrying(FailoverProvider([first, second]))
    Extractor(tracer_provider=traced.provider).extract(provider, Program, _CHAT)

    assert [span.name for span in traced.spans if not span.name.startswith("chat ")] == [
        "extract Program"
    ]
    extraction = traced.one("extract Program")
    calls = traced.named(f"chat {MODEL}")
    assert all(child_of(call, extraction) for call in calls)
    assert [
        (
            attrs(call)["gen_ai.provider.name"],
            attrs(call)["allama.retry.attempt"],
            attrs(call)["allama.failover.attempt"],
        )
        for call in calls
    ] == [("openai", 1, 1), ("groq", 1, 2), ("openai", 2, 1), ("groq", 2, 2)]


_SKIPPED_KEYS = (
    "allama.failover.skipped",
    "allama.failover.skipped_providers",
    "allama.failover.skipped_reasons",
)


def _skipped_on(span: ReadableSpan) -> dict[str, Any]:
    return {key: value for key, value in attrs(span).items() if key in _SKIPPED_KEYS}


def _extracted_through(extractor: Extractor, provider: Any, flavour: str, stream: bool) -> Program:
    """One extraction of `Program` through `provider`: sync or async, streamed or not."""

    def sync() -> Any:
        if not stream:
            return extractor.extract(provider, Program, _CHAT)
        with extractor.extract_stream(provider, Program, _CHAT) as streamed:
            return streamed.finish()

    async def async_() -> Any:
        if not stream:
            return await extractor.aextract(provider, Program, _CHAT)
        async with extractor.aextract_stream(provider, Program, _CHAT) as streamed:
            return await streamed.finish()

    value = run(flavour, sync, async_).value
    assert isinstance(value, Program)
    return value


@FLAVOURS
@pytest.mark.parametrize("stream", [False, True])
def test_inside_an_extraction_the_call_a_failover_sent_names_the_providers_it_passed_over(
    traced: Traced, flavour: str, stream: bool
) -> None:
    # No failover span inside an extraction: the call span that stands for its call says
    # what its span would, as it says which attempt it is.
    from allama.wrappers import FailoverProvider

    answer = sse(ANSWER) if stream else completion()
    failover = FailoverProvider(
        [openai(Script(_limited(30))), _groq(Script(answer, answer))], clock=lambda: 100.0
    )
    extractor = Extractor(tracer_provider=traced.provider)
    for _ in range(2):
        assert _extracted_through(extractor, failover, flavour, stream).year == 1843

    assert [span.name for span in traced.spans if not span.name.startswith("chat ")] == [
        "extract Program"
    ] * 2
    first, second = traced.named("extract Program")
    calls = traced.named(f"chat {MODEL}")
    assert [
        (attrs(call)["gen_ai.provider.name"], attrs(call)["allama.failover.attempt"])
        for call in calls
    ] == [("openai", 1), ("groq", 2), ("groq", 1)]
    assert [child_of(call, second) for call in calls] == [False, False, True]
    assert [_skipped_on(call) for call in calls] == [
        {},
        {},
        {
            "allama.failover.skipped": 1,
            "allama.failover.skipped_providers": ("openai",),
            "allama.failover.skipped_reasons": ("rate_limited",),
        },
    ]
    assert (_skipped_on(first), _skipped_on(second)) == ({}, {})


def test_inside_an_extraction_the_providers_passed_over_are_on_one_call_span_only(
    traced: Traced,
) -> None:
    # Groq, tried in OpenAI's place, fails once and is retried: the first call sent after
    # passing OpenAI over names it, the retry's second does not, so that the extraction's
    # call spans count each provider passed over once.
    from allama.wrappers import FailoverProvider

    failover = FailoverProvider(
        [
            openai(Script(_limited(30))),
            _retrying(_groq(Script(completion(), failure(503, "busy"), completion()))),
        ],
        clock=lambda: 100.0,
    )
    extractor = Extractor(tracer_provider=traced.provider)
    extractor.extract(failover, Program, _CHAT)
    traced.exporter.clear()
    extracted = extractor.extract(failover, Program, _CHAT)
    assert extracted.response.provider_data["allama"]["failover"]["skipped"] == [
        {"provider": "openai", "why": "rate_limited", "seconds_left": 30.0}
    ]

    calls = traced.named(f"chat {MODEL}")
    assert [
        (attrs(call)["allama.failover.attempt"], attrs(call)["allama.retry.attempt"])
        for call in calls
    ] == [(1, 1), (1, 2)]
    assert [_skipped_on(call) for call in calls] == [
        {
            "allama.failover.skipped": 1,
            "allama.failover.skipped_providers": ("openai",),
            "allama.failover.skipped_reasons": ("rate_limited",),
        },
        {},
    ]
    assert _skipped_on(traced.one("extract Program")) == {}


def test_inside_an_extraction_a_failover_within_a_failover_names_both_ones_passed_over(
    traced: Traced,
) -> None:
    # The outer passed OpenAI over, the inner Groq: the call the inner sent names both, in
    # the order they were passed over.
    from allama.wrappers import FailoverProvider

    xai = allama.provider(
        "xai",
        api_key=KEY,
        transport=Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(Script(completion(), completion())))
        ),
    )
    inner = FailoverProvider([_groq(Script(_limited(10))), xai], clock=lambda: 100.0)
    outer = FailoverProvider([openai(Script(_limited(30))), inner], clock=lambda: 100.0)
    extractor = Extractor(tracer_provider=traced.provider)
    extractor.extract(outer, Program, _CHAT)
    traced.exporter.clear()
    extractor.extract(outer, Program, _CHAT)

    (call,) = traced.named(f"chat {MODEL}")
    assert attrs(call)["gen_ai.provider.name"] == "x_ai"
    assert _skipped_on(call) == {
        "allama.failover.skipped": 2,
        "allama.failover.skipped_providers": ("openai", "groq"),
        "allama.failover.skipped_reasons": ("rate_limited", "rate_limited"),
    }


def test_a_wrapper_without_a_tracer_provider_imports_nothing_and_spans_nothing() -> None:
    code = _IN_A_PROCESS + textwrap.dedent(
        """
        import sys
        from allama.wrappers import FailoverProvider, RetryingProvider
        request = allama.ChatRequest("grok-4").user("Ada")
        RetryingProvider(FailoverProvider([provider])).chat(request)
        with RetryingProvider(provider).chat_stream(request) as stream:
            stream.response()
        assert not any(m.startswith("opentelemetry") for m in sys.modules), "imported"
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# What a batch input paid, on its span


def test_a_batch_inputs_span_has_its_usage_and_cost(traced: Traced, tmp_path: Path) -> None:
    provider = openai(Script(completion(), completion()))
    extractor = Extractor(tracer_provider=traced.provider)
    results = sorted(
        allama.batch(
            provider,
            Program,
            ["one", "two", "one"],
            request=_batch_request,
            extractor=extractor,
            concurrency=1,
            ledger=tmp_path / "run.sqlite",
        ),
        key=lambda result: result.index,
    )
    assert [result.duplicate for result in results] == [False, False, True]
    inputs = sorted(
        traced.named("batch.input Program"), key=lambda span: attrs(span)["allama.batch.index"]
    )
    costs = [float(cast(Any, result.metadata).cost.total) for result in results]
    paid = [
        {key: value for key, value in attrs(span).items() if "usage" in key or "cost" in key}
        for span in inputs
    ]
    assert paid == [
        {
            "allama.extract.usage.input_tokens": 41,
            "allama.extract.usage.output_tokens": 17,
            "allama.cost.total": costs[0],
            "allama.cost.currency": "USD",
        },
        {
            "allama.extract.usage.input_tokens": 41,
            "allama.extract.usage.output_tokens": 17,
            "allama.cost.total": costs[1],
            "allama.cost.currency": "USD",
        },
        {},  # a copy: counted once, with the first, as the run's summary counts it
    ]
    run_cost = attrs(traced.one("batch Program"))["allama.cost.total"]
    assert run_cost == pytest.approx(costs[0] + costs[1])


def test_a_provider_batch_jobs_inputs_have_their_usage_and_cost_on_their_spans(
    traced: Traced, tmp_path: Path
) -> None:
    from tests._provider_batch_server import ProviderBatchServer

    server = ProviderBatchServer().start()
    try:
        provider = allama.provider("openai", base_url=server.openai_base, api_key="test-key")
        results = list(
            allama.batch(
                provider,
                Program,
                ["doc 1", "doc 2"],
                request=lambda doc: ChatRequest("gpt-4o-mini").system("Read it.").user(doc),
                ledger=tmp_path / "run.sqlite",
                provider_batch=True,
                poll_interval=0.001,
                backoff=0.001,
                extractor=Extractor(retries=0, tracer_provider=traced.provider),
            )
        )
    finally:
        server.shutdown()
    assert [result.metadata.batch_passes for result in results if result.metadata] == [1, 1]
    inputs = traced.named("batch.input Program")
    assert len(inputs) == 2
    for span in inputs:
        (result,) = [each for each in results if each.index == attrs(span)["allama.batch.index"]]
        metadata = cast(Any, result.metadata)
        assert attrs(span)["allama.extract.usage.input_tokens"] == metadata.usage.input_tokens
        assert attrs(span)["allama.extract.usage.output_tokens"] == metadata.usage.output_tokens
        assert attrs(span)["allama.cost.total"] == float(metadata.cost.total)
    assert sum(attrs(span)["allama.cost.total"] for span in inputs) == pytest.approx(
        attrs(traced.one("batch Program"))["allama.cost.total"]
    )


# Content in the conventions' shapes


def test_a_data_url_is_captured_as_a_blob_not_a_uri(traced: Traced) -> None:
    provider = openai(Script(completion()), tracer_provider=traced.provider, capture_content=True)
    request = ChatRequest(MODEL).user(
        "look",
        allama.ImagePart(url="data:image/png;base64,iVBORw0KGgo="),
        allama.DocumentPart(url="data:text/plain,hello%20world"),
        allama.ImagePart(url="https://example.com/cat.png"),
    )
    provider.chat(request)
    (message,) = json.loads(attrs(traced.one(f"chat {MODEL}"))["gen_ai.input.messages"])
    assert message["parts"][1:] == [
        {"type": "blob", "modality": "image", "content": "iVBORw0KGgo=", "mime_type": "image/png"},
        {
            "type": "blob",
            "modality": "document",
            "content": "aGVsbG8gd29ybGQ=",  # "hello world"
            "mime_type": "text/plain",
        },
        {"type": "uri", "modality": "image", "uri": "https://example.com/cat.png"},
    ]


def _gemini_reply(request: httpx2.Request) -> httpx2.Response:
    body = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": ANSWER}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4},
        "responseId": "r-1",
    }
    return httpx2.Response(200, json=body)


_SYSTEM = [{"type": "text", "content": "Be brief."}]
_USER = {"role": "user", "parts": [{"type": "text", "content": PROMPT}]}
_LATER = {"role": "system", "parts": [{"type": "text", "content": "Answer in English."}]}
_AS_A_TURN = {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}


@pytest.mark.parametrize(
    ("preset", "options", "model", "reply", "instructions", "messages"),
    [
        pytest.param(
            "anthropic", {}, "claude-sonnet-4-5", _anthropic_reply, _SYSTEM, [_USER], id="anthropic"
        ),
        pytest.param(
            "gemini", {}, "gemini-2.5-flash", _gemini_reply, _SYSTEM, [_USER], id="gemini"
        ),
        pytest.param(  # no system instruction on Gemma: its words open the first turn
            "gemini", {}, "gemma-3-27b-it", _gemini_reply, None, [_AS_A_TURN, _USER], id="gemma"
        ),
        pytest.param(  # the opening system messages are the instructions, a later one a turn
            "openai",
            {"api": "responses"},
            MODEL,
            _responses_reply,
            _SYSTEM,
            [_USER, _LATER],
            id="responses",
        ),
        pytest.param(  # system messages are part of the history
            "openai", {}, MODEL, _completion_reply, None, [_AS_A_TURN, _USER], id="chat"
        ),
    ],
)
def test_system_instructions_sent_apart_are_captured_apart(
    traced: Traced,
    preset: str,
    options: dict[str, Any],
    model: str,
    reply: Reply,
    instructions: list[dict[str, Any]] | None,
    messages: list[dict[str, Any]],
) -> None:
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(Script(reply))))
    provider = allama.provider(
        preset,
        api_key=KEY,
        transport=transport,
        tracer_provider=traced.provider,
        capture_content=True,
        **options,
    )
    request = ChatRequest(model).system("Be brief.").user(PROMPT)
    if preset == "openai":
        request = request.system("Answer in English.") if options else request
    provider.chat(request)
    (call,) = traced.spans
    found = attrs(call)
    said = found.get("gen_ai.system_instructions")
    assert (None if said is None else json.loads(said)) == instructions
    assert json.loads(found["gen_ai.input.messages"]) == messages


def test_without_the_opt_in_no_system_instructions_are_recorded(traced: Traced) -> None:
    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(Script(_anthropic_reply)))
    )
    provider = allama.provider(
        "anthropic", api_key=KEY, transport=transport, tracer_provider=traced.provider
    )
    provider.chat(ChatRequest("claude-sonnet-4-5").system("Be brief.").user(PROMPT))
    assert not any("Be brief." in value for value in traced.values())
    assert "gen_ai.system_instructions" not in attrs(traced.one("chat claude-sonnet-4-5"))


def test_content_is_not_built_for_spans_that_do_not_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from allama import _tracing

    built: list[str] = []
    real_input, real_output = _tracing.input_messages, _tracing.output_messages

    def input_messages(*args: Any) -> str:
        built.append("input")
        return real_input(*args)

    def output_messages(*args: Any) -> str:
        built.append("output")
        return real_output(*args)

    monkeypatch.setattr(_tracing, "input_messages", input_messages)
    monkeypatch.setattr(_tracing, "output_messages", output_messages)

    def both(tracer_provider: TracerProvider) -> None:
        script = Script(completion(), completion())
        provider = openai(script, tracer_provider=tracer_provider, capture_content=True)
        provider.chat(_CHAT)
        extractor = Extractor(tracer_provider=tracer_provider, capture_content=True)
        extractor.extract(provider, Program, _CHAT)

    both(TracerProvider(sampler=ALWAYS_OFF))
    assert built == []
    both(Traced().provider)  # a span that records has them
    assert sorted(built) == ["input", "input", "input", "output", "output"]
