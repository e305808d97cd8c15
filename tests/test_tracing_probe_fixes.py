"""Tracing, as probed: `gen_ai.output.type` says the type of output asked for (text for a
plain-text format or a choice, JSON for a JSON one), on a call's span and a decision's; an
extraction through a failover ended by no error of allama's (a cancellation, an exception
of the caller's own) names the provider it was calling, not the failover; an extraction
through a failover logs a degraded enforcement for the provider that answered, in every
form; a call's span shows the output-token limit sent where the adapter filled one the
request did not set (Anthropic's `max_tokens`).

Spans go to an SDK `TracerProvider` passed explicitly, with an in-memory exporter; the
providers answer through in-process httpx2 transports.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import uuid
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel
from tests._recording import prompt_only_over
from tests._recording import provider as recorded
from tests._tool_endpoint import ToolEndpoint

import allama
from allama import ChatRequest, ExtractionMode, Extractor, ReasoningEffort, ResponseFormat
from allama._tracing import CAPTURE_CONTENT_ENV
from allama.extract import EXTRACTION_TOOL
from allama.transport import Transport
from allama.wrappers import FailoverProvider

KEY = "sk-test-9f8e7d6c5b4a"
MODEL = "gpt-4o-mini"


class Program(BaseModel):
    name: str
    year: int


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Traced:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def one(self, name: str) -> ReadableSpan:
        (span,) = [span for span in self.exporter.get_finished_spans() if span.name == name]
        return span


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Traced:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    return Traced()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-42",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 41, "completion_tokens": 17, "total_tokens": 58},
    }


def tool_call(arguments: str) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": EXTRACTION_TOOL, "arguments": arguments},
            }
        ],
    }
    body = completion("")
    body["choices"] = [{"index": 0, "message": message, "finish_reason": "tool_calls"}]
    return body


GEMINI_RED = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "red"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1, "totalTokenCount": 6},
    "modelVersion": "gemini-2.5-flash",
    "responseId": "r1",
}


# gen_ai.output.type

THING: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (ResponseFormat.text(), "text"),
        (ResponseFormat.json_object(), "json"),
        (ResponseFormat.for_schema(THING, name="thing"), "json"),
    ],
)
def test_a_calls_output_type_is_its_response_formats(
    traced: Traced, fmt: ResponseFormat, expected: str
) -> None:
    answer = "just words" if fmt.type == "text" else "{}"
    provider, recorder = recorded(
        "openai", (200, completion(answer)), tracer_provider=traced.provider
    )
    request = ChatRequest(MODEL).user("Say something in JSON.").with_response_format(fmt)
    provider.chat(request)
    assert (
        recorder.bodies[0]["response_format"]["type"]
        == {
            "text": "text",
            "json": "json_object",
            "json_schema": "json_schema",
        }[fmt.type]
    )
    assert attrs(traced.one(f"chat {MODEL}"))["gen_ai.output.type"] == expected


def test_a_call_with_no_response_format_has_no_output_type(traced: Traced) -> None:
    provider, _ = recorded("openai", (200, completion("hi")), tracer_provider=traced.provider)
    provider.chat(ChatRequest(MODEL).user("hi"))
    assert "gen_ai.output.type" not in attrs(traced.one(f"chat {MODEL}"))


def test_a_decision_answered_as_a_gemini_enum_is_text_on_both_spans(traced: Traced) -> None:
    gemini, recorder = recorded("gemini", (200, GEMINI_RED))
    request = ChatRequest("gemini-2.5-flash").user("The colour of blood?")
    extractor = Extractor(tracer_provider=traced.provider)
    decision = extractor.decide(gemini, Colour, request, probabilities=False)
    assert decision.value is Colour.RED
    assert recorder.bodies[0]["generationConfig"]["responseMimeType"] == "text/x.enum"
    call = attrs(traced.one("generate_content gemini-2.5-flash"))
    decide = attrs(traced.one("decide Colour"))
    assert call["gen_ai.output.type"] == "text"
    assert decide["gen_ai.output.type"] == "text"


def test_a_decision_answered_as_a_json_enum_is_json(traced: Traced) -> None:
    provider, recorder = recorded("openai", (200, completion('{"value": "red"}')))
    extractor = Extractor(tracer_provider=traced.provider)
    decision = extractor.decide(
        provider, Colour, ChatRequest(MODEL).user("A ruby?"), probabilities=False
    )
    assert decision.value is Colour.RED
    assert recorder.bodies[0]["response_format"]["type"] == "json_schema"
    assert attrs(traced.one(f"chat {MODEL}"))["gen_ai.output.type"] == "json"
    assert attrs(traced.one("decide Colour"))["gen_ai.output.type"] == "json"


def test_a_decision_answered_through_a_forced_tool_is_json(traced: Traced) -> None:
    provider, recorder = recorded("openai", (200, tool_call('{"value": "green"}')))
    extractor = Extractor(tracer_provider=traced.provider)
    request = ChatRequest(MODEL).user("Grass?").with_option(ExtractionMode.FORCED_TOOL)
    decision = extractor.decide(provider, Colour, request, probabilities=False)
    assert decision.value is Colour.GREEN
    assert "response_format" not in recorder.bodies[0]
    assert attrs(traced.one("decide Colour"))["gen_ai.output.type"] == "json"


def test_a_decision_in_the_prompt_alone_has_no_output_type(traced: Traced) -> None:
    # Nothing in the request asks for a type of output: the span does not guess one.
    provider, recorder = recorded("openai", (200, completion("red")))
    extractor = Extractor(tracer_provider=traced.provider)
    decision = extractor.decide(
        prompt_only_over(provider), Colour, ChatRequest(MODEL).user("A ruby?"), probabilities=False
    )
    assert decision.value is Colour.RED
    assert "response_format" not in recorder.bodies[0]
    assert "gen_ai.output.type" not in attrs(traced.one("decide Colour"))


def test_an_extraction_is_json_whatever_its_mode(traced: Traced) -> None:
    provider, _ = recorded("openai", (200, tool_call('{"name": "Ada", "year": 1843}')))
    request = ChatRequest(MODEL).user("Ada, 1843").with_option(ExtractionMode.FORCED_TOOL)
    Extractor(tracer_provider=traced.provider).extract(provider, Program, request)
    assert attrs(traced.one("extract Program"))["gen_ai.output.type"] == "json"


# The provider an extraction through a failover ended at


def _down() -> httpx2.Response:
    return httpx2.Response(503, json={"error": {"message": "down", "type": "server_error"}})


class Broken(RuntimeError):
    """An exception none of allama's, raised as a request is sent."""


def test_an_extraction_ended_by_a_foreign_exception_names_the_provider_called(
    traced: Traced,
) -> None:
    def breaks(request: httpx2.Request) -> httpx2.Response:
        raise Broken("the caller's transport broke")

    first = allama.provider(
        "openai",
        api_key=KEY,
        transport=Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(lambda r: _down()))
        ),
    )
    second = allama.provider(
        "groq",
        api_key=KEY,
        transport=Transport(client=httpx2.Client(transport=httpx2.MockTransport(breaks))),
    )
    failover = FailoverProvider([first, second])
    with pytest.raises(Broken):
        Extractor(tracer_provider=traced.provider).extract(
            failover, Program, ChatRequest(MODEL).user("Ada, 1843")
        )
    span = traced.one("extract Program")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "Broken"
    assert attrs(span)["gen_ai.provider.name"] == "groq"


class Hang(httpx2.AsyncBaseTransport):
    """Never answers; says when a request reached it."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.reached.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_cancelled_extraction_through_a_failover_names_the_provider_called(
    traced: Traced,
) -> None:
    async def main() -> None:
        hang = Hang()
        first = allama.provider(
            "openai",
            api_key=KEY,
            transport=Transport(
                async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: _down()))
            ),
        )
        second = allama.provider(
            "groq",
            api_key=KEY,
            transport=Transport(async_client=httpx2.AsyncClient(transport=hang)),
        )
        failover = FailoverProvider([first, second])
        extractor = Extractor(tracer_provider=traced.provider)
        task = asyncio.create_task(
            extractor.aextract(failover, Program, ChatRequest(MODEL).user("Ada, 1843"))
        )
        await hang.reached.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    span = traced.one("extract Program")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "CancelledError"
    assert attrs(span)["gen_ai.provider.name"] == "groq"


# The degraded-enforcement log record of an extraction through a failover


def _events(text: str) -> bytes:
    """An OpenAI-style stream answering `text`."""
    chunks: list[dict[str, Any]] = [
        {"id": "c7", "model": MODEL, "choices": [{"index": 0, "delta": {"content": text}}]},
        {
            "id": "c7",
            "model": MODEL,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
        },
    ]
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


def _extract(form: str, provider: Any, request: ChatRequest) -> Any:
    if form == "extract":
        return allama.extract(provider, Program, request)
    if form == "extract_stream":
        with allama.extract_stream(provider, Program, request) as stream:
            return stream.finish()

    async def run() -> Any:
        if form == "aextract":
            return await allama.aextract(provider, Program, request)
        async with allama.aextract_stream(provider, Program, request) as stream:
            return await stream.finish()

    return asyncio.run(run())


@pytest.mark.parametrize("form", ["extract", "aextract", "extract_stream", "aextract_stream"])
def test_each_provider_of_a_failover_warns_of_its_own_degraded_enforcement(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    # OpenRouter answers, then is down and Mistral answers: neither says which schema
    # keywords it enforces (approximate). The WARNING is once per provider, model and type
    # in the process: a model of its own keeps the test independent of others.
    model = f"probe-{uuid.uuid4().hex}"
    program = '{"name": "Ada", "year": 1843}'
    answer: tuple[int, Any] = (
        (200, _events(program)) if form.endswith("stream") else (200, completion(program))
    )
    first, _ = recorded("openrouter", answer, (503, _down().json()))
    second, _ = recorded("mistral", answer)
    failover = FailoverProvider([first, second])
    caplog.set_level(logging.DEBUG, logger="allama.extraction")
    request = ChatRequest(model).user("Ada, 1843")
    answered = [_extract(form, failover, request).response.provider for _ in range(2)]
    assert answered == ["openrouter", "mistral"]
    logged = [
        (record.levelname, getattr(record, "provider", None), getattr(record, "model", None))
        for record in caplog.records
        if record.name == "allama.extraction"
    ]
    assert logged == [("WARNING", "openrouter", model), ("WARNING", "mistral", model)]


# The output-token limit as sent


def _call(form: str, provider: Any, request: ChatRequest) -> None:
    if form == "chat":
        provider.chat(request)
    elif form == "achat":
        asyncio.run(provider.achat(request))
    else:
        with provider.chat_stream(request) as stream:
            stream.response()


@pytest.mark.parametrize("form", ["chat", "achat", "chat_stream"])
def test_anthropics_default_max_tokens_is_on_the_call_span(traced: Traced, form: str) -> None:
    endpoint = ToolEndpoint("anthropic")
    provider = allama.provider(
        "anthropic", api_key=KEY, transport=endpoint.transport(), tracer_provider=traced.provider
    )
    _call(form, provider, ChatRequest("claude-sonnet-4-5").user("hi"))
    assert endpoint.bodies[0]["max_tokens"] == 16_384
    span = traced.one("chat claude-sonnet-4-5")
    assert attrs(span)["gen_ai.request.max_tokens"] == 16_384


def test_anthropics_default_max_tokens_with_a_thinking_budget_is_on_the_span(
    traced: Traced,
) -> None:
    endpoint = ToolEndpoint("anthropic")
    provider = allama.provider(
        "anthropic", api_key=KEY, transport=endpoint.transport(), tracer_provider=traced.provider
    )
    request = ChatRequest("claude-sonnet-4-5").user("hi").with_reasoning_effort(ReasoningEffort.LOW)
    provider.chat(request)
    sent = endpoint.bodies[0]
    assert (sent["max_tokens"], sent["thinking"]["budget_tokens"]) == (18_432, 2048)
    assert attrs(traced.one("chat claude-sonnet-4-5"))["gen_ai.request.max_tokens"] == 18_432


def test_max_tokens_of_anthropics_body_option_is_on_the_span(traced: Traced) -> None:
    endpoint = ToolEndpoint("anthropic")
    provider = allama.provider(
        "anthropic", api_key=KEY, transport=endpoint.transport(), tracer_provider=traced.provider
    )
    request = (
        ChatRequest("claude-sonnet-4-5", max_output_tokens=100)
        .user("hi")
        .with_option_json("anthropic", {"max_tokens": 50})
    )
    provider.chat(request)
    assert endpoint.bodies[0]["max_tokens"] == 50
    assert attrs(traced.one("chat claude-sonnet-4-5"))["gen_ai.request.max_tokens"] == 50


def test_a_limit_the_request_sets_is_on_the_span_as_it_was(traced: Traced) -> None:
    endpoint = ToolEndpoint("anthropic")
    provider = allama.provider(
        "anthropic", api_key=KEY, transport=endpoint.transport(), tracer_provider=traced.provider
    )
    provider.chat(ChatRequest("claude-sonnet-4-5", max_output_tokens=300).user("hi"))
    assert endpoint.bodies[0]["max_tokens"] == 300
    assert attrs(traced.one("chat claude-sonnet-4-5"))["gen_ai.request.max_tokens"] == 300


@pytest.mark.parametrize("dialect", ["gemini", "ollama"])
def test_no_limit_is_on_the_span_where_none_was_sent(traced: Traced, dialect: str) -> None:
    # Gemini and Ollama fill no default limit: the span shows none.
    endpoint = ToolEndpoint(dialect)
    options: dict[str, Any] = {} if dialect == "ollama" else {"api_key": KEY}
    provider = allama.provider(
        dialect, transport=endpoint.transport(), tracer_provider=traced.provider, **options
    )
    provider.chat(ChatRequest("gemma3").user("hi"))
    assert not {"maxOutputTokens", "num_predict"} & {
        *endpoint.bodies[0].get("generationConfig", {}),
        *endpoint.bodies[0].get("options", {}),
    }
    (span,) = traced.exporter.get_finished_spans()
    assert "gen_ai.request.max_tokens" not in attrs(span)
