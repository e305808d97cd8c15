"""A call's span shows the request settings as sent where a body option replaced them: on
every adapter, the option's temperature and output-token limit (and, where the API has
them, top_p, seed and stop sequences) are on the span, not the request's, which were not
sent; without an option the span shows the request's own.

Spans go to an SDK `TracerProvider` passed explicitly, with an in-memory exporter; the
providers answer through in-process httpx2 transports.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests._tool_endpoint import ToolEndpoint

import allama
from allama import ChatRequest
from allama._tracing import CAPTURE_CONTENT_ENV

KEY = "sk-test-9f8e7d6c5b4a"


class Endpoint(ToolEndpoint):
    """`ToolEndpoint`, with OpenAI's Chat Completions and Responses answers."""

    def openai(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def responses(self, body: dict[str, Any]) -> dict[str, Any]:
        text = {"type": "output_text", "text": self.text, "annotations": []}
        message = {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        }
        return {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": body["model"],
            "output": [message],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        }


# dialect: (model, body option namespace, where the settings are in the body, the limit's key)
ADAPTERS: dict[str, tuple[str, str, str | None, str]] = {
    "openai": ("gpt-4o-mini", "openai_compat", None, "max_completion_tokens"),
    "responses": ("gpt-4o-mini", "openai_responses", None, "max_output_tokens"),
    "anthropic": ("claude-sonnet-4-5", "anthropic", None, "max_tokens"),
    "gemini": ("gemini-2.5-flash", "gemini", "generationConfig", "maxOutputTokens"),
    "ollama": ("llama3.1", "ollama", "options", "num_predict"),
}


class Traced:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def one(self) -> ReadableSpan:
        (span,) = self.exporter.get_finished_spans()
        return span


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Traced:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    return Traced()


def call(traced: Traced, dialect: str, request: ChatRequest) -> dict[str, Any]:
    """Send `request` on `dialect`'s adapter; the settings sent (the object that holds them
    in the body)."""
    endpoint = Endpoint(dialect)
    options: dict[str, Any] = {} if dialect == "ollama" else {"api_key": KEY}
    if dialect == "responses":
        options["api"] = "responses"
    provider = allama.provider(
        "openai" if dialect == "responses" else dialect,
        transport=endpoint.transport(),
        tracer_provider=traced.provider,
        **options,
    )
    provider.chat(request)
    (body,) = endpoint.bodies
    where = ADAPTERS[dialect][2]
    sent: dict[str, Any] = body if where is None else body[where]
    return sent


def settings(span: ReadableSpan) -> dict[str, Any]:
    names = ("temperature", "top_p", "max_tokens", "seed", "stop_sequences")
    found = dict(span.attributes or {})
    return {
        name: found[f"gen_ai.request.{name}"] for name in names if f"gen_ai.request.{name}" in found
    }


def replacing(dialect: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A body option of `dialect` that gives `fields`, where its settings go."""
    where = ADAPTERS[dialect][2]
    return fields if where is None else {where: fields}


@pytest.mark.parametrize("dialect", list(ADAPTERS))
def test_a_temperature_and_limit_the_body_option_replaced_are_on_the_span_as_sent(
    traced: Traced, dialect: str
) -> None:
    model, namespace, _, limit = ADAPTERS[dialect]
    request = (
        ChatRequest(model, temperature=0.2, max_output_tokens=50)
        .user("hi")
        .with_option_json(namespace, replacing(dialect, {"temperature": 0.9, limit: 999}))
    )
    sent = call(traced, dialect, request)
    assert (sent["temperature"], sent[limit]) == (0.9, 999)
    assert settings(traced.one()) == {"temperature": 0.9, "max_tokens": 999}


@pytest.mark.parametrize("dialect", list(ADAPTERS))
def test_without_a_body_option_the_span_shows_the_requests_settings(
    traced: Traced, dialect: str
) -> None:
    model, _, _, limit = ADAPTERS[dialect]
    sent = call(
        traced, dialect, ChatRequest(model, temperature=0.2, max_output_tokens=50).user("hi")
    )
    assert (sent["temperature"], sent[limit]) == (0.2, 50)
    assert settings(traced.one()) == {"temperature": 0.2, "max_tokens": 50}


@pytest.mark.parametrize("dialect", ["openai", "gemini", "ollama"])
def test_top_p_seed_and_stop_the_body_option_replaced_are_on_the_span_as_sent(
    traced: Traced, dialect: str
) -> None:
    model, namespace, _, _ = ADAPTERS[dialect]
    keys = {"top_p": "topP", "stop": "stopSequences"} if dialect == "gemini" else {}
    given = {keys.get("top_p", "top_p"): 0.3, "seed": 9, keys.get("stop", "stop"): ["END"]}
    request = (
        ChatRequest(model, top_p=0.8, seed=7, stop=("a", "b"))
        .user("hi")
        .with_option_json(namespace, replacing(dialect, given))
    )
    sent = call(traced, dialect, request)
    assert {key: sent[key] for key in given} == given
    assert settings(traced.one()) == {"top_p": 0.3, "seed": 9, "stop_sequences": ("END",)}


def test_one_stop_sequence_given_as_a_string_is_on_the_span_as_sent(traced: Traced) -> None:
    request = (
        ChatRequest("gpt-4o-mini", stop=("a",))
        .user("hi")
        .with_option_json("openai_compat", {"stop": "END"})
    )
    assert call(traced, "openai", request)["stop"] == "END"
    assert settings(traced.one()) == {"stop_sequences": ("END",)}


def test_geminis_snake_case_generation_config_is_on_the_span_as_sent(traced: Traced) -> None:
    request = (
        ChatRequest("gemini-2.5-flash", temperature=0.2, max_output_tokens=50)
        .user("hi")
        .with_option_json("gemini", {"generation_config": {"max_output_tokens": 999}})
    )
    assert call(traced, "gemini", request)["maxOutputTokens"] == 999
    assert settings(traced.one()) == {"temperature": 0.2, "max_tokens": 999}


def test_a_setting_the_body_option_sent_as_null_is_not_on_the_span(traced: Traced) -> None:
    # Neither the request's 0.2 (not sent) nor a null: the span shows no temperature.
    request = (
        ChatRequest("gpt-4o-mini", temperature=0.2, max_output_tokens=50)
        .user("hi")
        .with_option_json("openai_compat", {"temperature": None})
    )
    assert call(traced, "openai", request)["temperature"] is None
    assert settings(traced.one()) == {"max_tokens": 50}


def test_a_limit_the_body_option_gives_where_the_request_set_none_is_on_the_span(
    traced: Traced,
) -> None:
    request = (
        ChatRequest("gpt-4o-mini").user("hi").with_option_json("openai_compat", {"max_tokens": 64})
    )
    assert call(traced, "openai", request)["max_tokens"] == 64
    assert settings(traced.one()) == {"max_tokens": 64}


def test_anthropics_default_limit_and_the_options_temperature_are_on_the_span(
    traced: Traced,
) -> None:
    request = (
        ChatRequest("claude-sonnet-4-5", temperature=0.2)
        .user("hi")
        .with_option_json("anthropic", {"temperature": 0.7})
    )
    sent = call(traced, "anthropic", request)
    assert (sent["temperature"], sent["max_tokens"]) == (0.7, 16_384)
    assert settings(traced.one()) == {"temperature": 0.7, "max_tokens": 16_384}
