"""Cost in money on every extraction record, from `genai-prices` (the `prices` extra).

Expected figures are worked out here from genai-prices' own price data (its per-million
prices, by the formula each test states), so they stay exact whichever data version is
installed; one figure is written out by hand, from the data of genai-prices 0.2.3.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    Cost,
    Error,
    ExtractionError,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    RateLimitedError,
    Usage,
)
from allama import _prices as prices
from allama.mock import ChatResponseBuilder, MockProvider

genai_prices = pytest.importorskip("genai_prices")
from genai_prices.data_snapshot import get_snapshot  # noqa: E402

VERSION = genai_prices.__version__
MILLION = Decimal(1_000_000)


class Person(BaseModel):
    name: str


def response(
    text: str = '{"name": "Ada"}',
    *,
    provider: str | None = "openai",
    model: str | None = "gpt-4o-2024-08-06",
    usage: Usage | None = None,
) -> ChatResponse:
    built = ChatResponseBuilder().text(text)
    if model is not None:
        built = built.model(model)
    if provider is not None:
        built = built.provider(provider)
    if usage is not None:
        built = built.usage_value(usage)
    return built.build()


def record(*responses: ChatResponse) -> ExtractionMetadata:
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    for one in responses:
        metadata.record_pass(one, lambda warning: warning)
    return metadata


def _rate(value: Any) -> Decimal:
    """A per-million price (a tiered price's base rate: these usages stay under its tiers)."""
    if value is None:
        return Decimal(0)
    base = getattr(value, "base", value)
    assert isinstance(base, Decimal)
    return base


def expected(
    provider_id: str,
    model: str,
    usage: Usage,
    *,
    batch: bool = False,
    at: datetime | None = None,
) -> tuple[Decimal, Decimal]:
    """(input, output) from genai-prices' data: cache reads and writes are part of the
    input tokens and priced at their own rates, the rest of the input at the input rate;
    reasoning is part of the output tokens."""
    _, info = get_snapshot().find_provider_model(model, None, provider_id, None)
    rates = info.get_prices(at or datetime.now(tz=UTC), {"processing": "batch"} if batch else None)
    read = usage.cache_read_tokens or 0
    written = usage.cache_write_tokens or 0
    assert usage.input_tokens is not None and usage.output_tokens is not None
    uncached = usage.input_tokens - read - written
    cost_in = (
        uncached * _rate(rates.input_mtok)
        + read * _rate(rates.cache_read_mtok)
        + written * _rate(rates.cache_write_mtok)
    ) / MILLION
    cost_out = usage.output_tokens * _rate(rates.output_mtok) / MILLION
    return cost_in, cost_out


# Prices of known models.


def test_gpt_4o_by_hand_from_the_0_2_3_data() -> None:
    if VERSION != "0.2.3":
        pytest.skip("figures written out from genai-prices 0.2.3")
    # $2.50 per million input, $1.25 per million cached input, $10 per million output.
    usage = Usage(input_tokens=1000, output_tokens=500, cache_read_tokens=200)
    cost = prices.cost_of("openai", "gpt-4o-2024-08-06", usage)
    assert cost == Cost(
        input=Decimal("0.00225"),
        output=Decimal("0.005"),
        total=Decimal("0.00725"),
        source="genai-prices 0.2.3, openai/gpt-4o",
    )
    assert cost.currency == "USD" and cost.batch is False


@pytest.mark.parametrize(
    ("preset", "model", "provider_id", "matched", "usage"),
    [
        (
            "openai",
            "gpt-4o-2024-08-06",
            "openai",
            "openai/gpt-4o",
            Usage(input_tokens=12_345, output_tokens=678, cache_read_tokens=4_096),
        ),
        (
            "anthropic",
            "claude-haiku-4-5-20251001",
            "anthropic",
            "anthropic/claude-haiku-4-5",
            Usage(
                input_tokens=2_000,
                output_tokens=100,
                cache_read_tokens=500,
                cache_write_tokens=300,
            ),
        ),
        (
            "gemini",
            "models/gemini-2.5-flash",
            "google",
            "google/gemini-2.5-flash",
            Usage(input_tokens=3_000, output_tokens=900, reasoning_tokens=600),
        ),
        (
            "vertex-gemini",
            "gemini-2.5-flash",
            "google",
            "google/gemini-2.5-flash",
            Usage(input_tokens=3_000, output_tokens=900, cache_read_tokens=1_000),
        ),
        (
            "azure-openai",
            "gpt-4o-2024-11-20",
            "azure",
            "azure/gpt-4o",
            Usage(input_tokens=1_000, output_tokens=1_000),
        ),
        ("xai", "grok-4", "x-ai", "x-ai/grok-4-0709", Usage(input_tokens=10, output_tokens=20)),
        (
            "mistral",
            "mistral-large-latest",
            "mistral",
            "mistral/mistral-large",
            Usage(input_tokens=1_000, output_tokens=500),
        ),
        (
            "groq",
            "llama-3.3-70b-versatile",
            "groq",
            "groq/llama-3.3-70b-versatile",
            Usage(input_tokens=1_000, output_tokens=500),
        ),
        (
            "openrouter",
            "openai/gpt-4o",
            "openrouter",
            "openrouter/openai/gpt-4o",
            Usage(input_tokens=1_000, output_tokens=500),
        ),
        (
            "workers-ai",
            "@cf/meta/llama-3.1-8b-instruct",
            "cloudflare",
            "cloudflare/@cf/meta/llama-3.1-8b-instruct",
            Usage(input_tokens=1_000, output_tokens=500),
        ),
    ],
)
def test_a_known_model_costs_exactly_what_its_prices_say(
    preset: str, model: str, provider_id: str, matched: str, usage: Usage
) -> None:
    at = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    cost = prices.cost_of(preset, model, usage, at=at)
    # genai-prices knows Gemini's models by their bare names, without `models/`.
    ref = model.rsplit("/", 1)[-1] if provider_id == "google" else model
    cost_in, cost_out = expected(provider_id, ref, usage, at=at)
    assert isinstance(cost, Cost), cost
    assert (cost.input, cost.output, cost.total) == (cost_in, cost_out, cost_in + cost_out)
    assert cost.source == f"genai-prices {VERSION}, {matched}"
    # The same as genai-prices' own answer for the same usage.
    answer = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        ),
        ref,
        provider_id=provider_id,
        genai_request_timestamp=at,
    )
    assert cost.total == answer.total_price


def test_reasoning_tokens_are_part_of_the_output_and_not_priced_again() -> None:
    plain = prices.cost_of("openai", "gpt-5-mini", Usage(input_tokens=100, output_tokens=900))
    thinking = prices.cost_of(
        "openai", "gpt-5-mini", Usage(input_tokens=100, output_tokens=900, reasoning_tokens=800)
    )
    assert isinstance(plain, Cost) and plain == thinking


@pytest.mark.parametrize(
    ("preset", "model"),
    [("openrouter", "perplexity/sonar-deep-research"), ("perplexity", "sonar-deep-research")],
)
def test_reasoning_a_model_prices_apart_is_priced_as_it_says(preset: str, model: str) -> None:
    # $2 a million input, $8 output, $3 reasoning (the 0.2.3 data): reasoning is 90,000 of
    # the 100,000 output tokens.
    usage = Usage(input_tokens=10_000, output_tokens=100_000, reasoning_tokens=90_000)
    at = datetime(2026, 5, 9, 12, tzinfo=UTC)
    cost = prices.cost_of(preset, model, usage, at=at)
    reference = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=10_000, output_tokens=100_000, output_reasoning_tokens=90_000
        ),
        model,
        provider_id=preset,
        genai_request_timestamp=at,
    )
    assert isinstance(cost, Cost)
    assert (cost.input, cost.output, cost.total) == (
        reference.input_price,
        reference.output_price,
        reference.total_price,
    )
    assert cost.output == Decimal("0.35")  # 10,000 x $8 + 90,000 x $3, not 100,000 x $8


@pytest.mark.parametrize(
    "usage",
    [
        Usage(input_tokens=100, output_tokens=-10),
        Usage(input_tokens=100, output_tokens=10, cache_read_tokens=-50),
        Usage(input_tokens=-1, output_tokens=10),
    ],
)
def test_a_negative_count_has_no_price(usage: Usage) -> None:
    for provider, model in (("openai", "gpt-4o"), ("gemini", "gemini-2.5-pro")):
        cost = prices.cost_of(provider, model, usage)
        assert isinstance(cost, str) and "Invalid usage value" in cost, (provider, cost)


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        ("0", "0.000000"),
        ("0.000021", "0.000021"),
        ("1.5", "1.500000"),
        ("3E-7", "0.0000003"),
        ("1E-7", "0.0000001"),
        ("0.00000125", "0.000001"),
        ("12345.6789", "12345.678900"),
    ],
)
def test_dollars_read_as_plain_digits_down_to_the_last_one(amount: str, shown: str) -> None:
    assert prices.dollars(Decimal(amount)) == shown


def test_cached_input_costs_less_than_the_same_input_uncached() -> None:
    uncached = prices.cost_of(
        "anthropic", "claude-haiku-4-5", Usage(input_tokens=10_000, output_tokens=0)
    )
    cached = prices.cost_of(
        "anthropic",
        "claude-haiku-4-5",
        Usage(input_tokens=10_000, output_tokens=0, cache_read_tokens=9_000),
    )
    assert isinstance(uncached, Cost) and isinstance(cached, Cost)
    # 1,000 at $1 and 9,000 at $0.10 per million, against 10,000 at $1.
    cost_in, _ = expected(
        "anthropic",
        "claude-haiku-4-5",
        Usage(input_tokens=10_000, output_tokens=0, cache_read_tokens=9_000),
    )
    assert cached.input == cost_in < uncached.input
    assert cached.output == uncached.output == 0


def test_prices_are_those_in_force_when_the_call_was_made() -> None:
    """DeepSeek's off-peak hours: the same usage costs what genai-prices says for the time
    of the call, and the record keeps that time rather than the time it is read."""
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    for hour in (3, 10, 17, 23):
        at = datetime(2026, 11, 2, hour, 0, tzinfo=UTC)
        cost = prices.cost_of("deepseek", "deepseek-chat", usage, at=at)
        answer = genai_prices.calc_price(
            genai_prices.Usage(input_tokens=1_000_000, output_tokens=1_000_000),
            "deepseek-chat",
            provider_id="deepseek",
            genai_request_timestamp=at,
        )
        assert isinstance(cost, Cost) and cost.total == answer.total_price


# Batch prices.


def test_the_batch_price_of_the_same_usage() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=2_000, cache_read_tokens=1_000)
    standard = prices.cost_of("openai", "gpt-4o", usage)
    batch = prices.cost_of("openai", "gpt-4o", usage, batch=True)
    assert isinstance(standard, Cost) and isinstance(batch, Cost)
    assert batch.batch is True and standard.batch is False
    assert (batch.input, batch.output) == expected("openai", "gpt-4o", usage, batch=True)
    assert batch.total < standard.total
    assert "at batch prices" in str(batch)


def test_a_model_without_a_batch_price_says_so_rather_than_answer_the_standard_one() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=500)
    assert isinstance(prices.cost_of("mistral", "mistral-large-latest", usage), Cost)
    reason = prices.cost_of("mistral", "mistral-large-latest", usage, batch=True)
    assert reason == f"genai-prices {VERSION} has no batch price for mistral/mistral-large"


def test_a_record_prices_its_usage_at_batch_prices_on_request() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=500)
    metadata = record(response(usage=usage), response(usage=usage))
    batch = metadata.priced(batch=True)
    assert isinstance(batch, Cost) and batch.batch
    one_in, one_out = expected("openai", "gpt-4o", usage, batch=True)
    assert (batch.input, batch.output) == (2 * one_in, 2 * one_out)
    assert metadata.cost is not None and metadata.cost.total == 2 * sum(
        expected("openai", "gpt-4o", usage)
    )


# A call served at another service tier than the standard one is billed at its prices.

TIER_USAGE = {
    "prompt_tokens": 100_000,
    "completion_tokens": 10_000,
    "total_tokens": 110_000,
    "prompt_tokens_details": {"cached_tokens": 40_000},
}


def _chat_body(tier: str | None, model: str = "gpt-5-mini") -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"name": "Ada"}'},
                "finish_reason": "stop",
            }
        ],
        "usage": TIER_USAGE,
    }
    if tier is not None:
        body["service_tier"] = tier
    return json.dumps(body)


def _tier_price(model: str, tier: str | None) -> Decimal:
    """genai-prices' own calculation of `TIER_USAGE` at `tier`'s prices."""
    snapshot = get_snapshot()
    provider, info = snapshot.find_provider_model(model, None, "openai", None)
    calculated = info.calc_price(
        genai_prices.Usage(input_tokens=100_000, output_tokens=10_000, cache_read_tokens=40_000),
        provider,
        price_context=None if tier is None else {"service_tier": tier},
    )
    return Decimal(calculated.total_price)


def test_a_call_served_at_another_service_tier_is_priced_at_that_tiers_prices() -> None:
    from allama.adapters.openai_compat import decode_body

    standard = decode_body(_chat_body("default"), provider="openai")
    assert standard.provider_data == {}  # the standard tier is not kept
    cost = record(standard).cost
    assert cost is not None and cost.total == _tier_price("gpt-5-mini", None) == Decimal("0.036")
    for tier, total in (("priority", Decimal("0.0648")), ("flex", Decimal("0.018"))):
        served = decode_body(_chat_body(tier), provider="openai")
        assert served.provider_data == {"openai": {"service_tier": tier}}
        cost = record(served).cost
        assert cost is not None
        assert cost.total == _tier_price("gpt-5-mini", tier) == total
        assert cost.source == f"genai-prices {VERSION}, openai/gpt-5-mini ({tier} tier)"


def test_a_tier_with_no_price_leaves_the_cost_unknown_rather_than_standard() -> None:
    from allama.adapters.openai_compat import decode_body

    metadata = record(decode_body(_chat_body("scale"), provider="openai"))
    assert metadata.cost is None
    assert metadata.priced() == (
        f"genai-prices {VERSION} has no price for the 'scale' service tier of openai/gpt-5-mini"
    )
    # Anthropic's priority tier, in the usage details its adapter keeps: no price there.
    usage = Usage(input_tokens=1_000, output_tokens=100)
    priority = _anthropic("claude-sonnet-4-5", usage, {"service_tier": "priority"})
    assert record(priority).priced() == (
        f"genai-prices {VERSION} has no price for the 'priority' service tier of "
        "anthropic/claude-sonnet-4-5"
    )
    standard = _anthropic("claude-sonnet-4-5", usage, {"service_tier": "standard"})
    assert isinstance(record(standard).priced(), Cost)


def test_a_streamed_call_and_the_responses_api_tell_their_tier_too() -> None:
    from allama.adapters.openai_compat._sse import decode_stream
    from allama.adapters.openai_responses import decode_body as decode_responses_body
    from allama.stream import StreamCollector

    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": '{"name": "Ada"}'}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": TIER_USAGE},
    ]
    data = "".join(
        "data: "
        + json.dumps({"id": "c", "model": "gpt-5-mini", "service_tier": "priority", **chunk})
        + "\n\n"
        for chunk in chunks
    )
    collector = StreamCollector()
    for event in decode_stream((data + "data: [DONE]\n\n").encode(), provider="openai"):
        collector.push(event)
    streamed = collector.finish().model_copy(update={"provider": "openai"})  # as its provider
    assert streamed.provider_data == {"openai": {"service_tier": "priority"}}
    assert record(streamed).cost == record(decode_body_of("priority")).cost
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5-mini",
        "service_tier": "flex",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": '{"name": "Ada"}'}],
            }
        ],
        "usage": {
            "input_tokens": 100_000,
            "output_tokens": 10_000,
            "total_tokens": 110_000,
            "input_tokens_details": {"cached_tokens": 40_000},
        },
    }
    answered = decode_responses_body(json.dumps(body), provider="openai")
    cost = record(answered).cost
    assert cost is not None and cost.total == _tier_price("gpt-5-mini", "flex")


# Groq's answer at its `flex` tier, as recorded (`groq/json_schema_strict.json`, whose
# `service_tier` reads `on_demand`), the answer and usage cut to what is priced.
GROQ_USAGE = {"prompt_tokens": 178, "completion_tokens": 94, "total_tokens": 272}


def _groq_body(tier: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-92437948-262c-49fe-87d1-774e54201105",
        "object": "chat.completion",
        "created": 1756843265,
        "model": "openai/gpt-oss-120b",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"name": "Ada"}'},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "service_tier": tier,
        "system_fingerprint": "fp_213abb2467",
        "usage": {**GROQ_USAGE, "queue_time": 1.09, "prompt_time": 0.008, "total_time": 0.19},
        "usage_breakdown": None,
        "x_groq": {"id": "req_01k4609j8zemga5d9erfnwbfma"},
    }


def _groq_on_demand() -> Decimal:
    """genai-prices' on-demand price of `GROQ_USAGE` at groq/openai/gpt-oss-120b."""
    price_in, price_out = expected(
        "groq", "openai/gpt-oss-120b", Usage(input_tokens=178, output_tokens=94)
    )
    assert price_in + price_out == Decimal("0.0000831")  # $0.15 in, $0.60 out a million
    return price_in + price_out


def test_a_groq_flex_answer_is_priced_at_the_on_demand_price_and_says_so() -> None:
    from tests._recording import provider

    source = f"genai-prices {VERSION}, groq/openai/gpt-oss-120b"
    for tier, said in (
        ("flex", f"{source} (flex tier, at on-demand prices)"),
        ("on_demand", source),
        ("auto", source),
    ):
        target, _ = provider("groq", (200, _groq_body(tier)))
        answered = target.chat(ChatRequest("openai/gpt-oss-120b").user("Who?"))
        cost = record(answered).cost
        assert cost is not None, tier
        assert (cost.total, cost.source) == (_groq_on_demand(), said)
    # OpenAI's flex tier keeps its own, cheaper price (`test_a_call_served_at_another...`).
    flex = record(decode_body_of("flex")).cost
    assert flex is not None and flex.total == _tier_price("gpt-5-mini", "flex")


def test_a_groq_answer_at_its_performance_tier_has_no_cost_with_the_reason() -> None:
    from tests._recording import provider

    target, _ = provider("groq", (200, _groq_body("performance")))
    metadata = record(target.chat(ChatRequest("openai/gpt-oss-120b").user("Who?")))
    assert metadata.cost is None
    assert metadata.cost_missing == (
        "served at Groq's 'performance' service tier, provisioned throughput billed by the "
        "capacity bought under an enterprise agreement rather than by token "
        "(groq/openai/gpt-oss-120b)"
    )


def test_a_streamed_groq_flex_answer_is_priced_at_the_on_demand_price() -> None:
    from tests._recording import provider

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "openai/gpt-oss-120b",
            "service_tier": "flex",
            "choices": [choice],
            **more,
        }
        return f"data: {json.dumps(body)}\n\n"

    data = (
        chunk({"role": "assistant", "content": ""})
        + chunk({"content": '{"name": "Ada"}'})
        + chunk({}, "stop", x_groq={"id": "req_1", "usage": GROQ_USAGE})
        + "data: [DONE]\n\n"
    ).encode()
    target, _ = provider("groq", (200, data))
    stream = target.chat_stream(ChatRequest("openai/gpt-oss-120b").user("Who?"))
    streamed = stream.response()
    assert streamed.provider_data["groq"]["service_tier"] == "flex"
    cost = record(streamed).cost
    assert cost is not None
    assert (cost.total, cost.source) == (
        _groq_on_demand(),
        f"genai-prices {VERSION}, groq/openai/gpt-oss-120b (flex tier, at on-demand prices)",
    )


def test_a_batch_with_a_budget_runs_on_past_groq_flex_answers() -> None:
    from tests._recording import provider

    target, recorder = provider("groq", (200, _groq_body("flex")))
    run = allama.batch(
        target,
        Person,
        ["Ada", "Grace", "Edsger"],
        request=ChatRequest("openai/gpt-oss-120b"),
        max_cost="1",
        concurrency=1,
    )
    results = list(run)
    assert [result.value for result in results] == [Person(name="Ada")] * 3
    assert len(recorder.bodies) == 3
    summary = run.summary
    assert (summary.stopped, summary.priced, summary.cost_unknown) == (None, 3, 0)
    assert summary.cost == 3 * _groq_on_demand()


def _gemini_audio_body(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "index": 0,
                "content": {"role": "model", "parts": [{"text": '{"name": "Ada"}'}]},
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": usage,
        "modelVersion": "gemini-2.5-flash",
    }


GEMINI_AUDIO_USAGE = {
    "promptTokenCount": 10_100,
    "candidatesTokenCount": 200,
    "totalTokenCount": 10_300,
    "promptTokensDetails": [
        {"modality": "TEXT", "tokenCount": 100},
        {"modality": "AUDIO", "tokenCount": 10_000},
    ],
}


def test_gemini_audio_input_is_priced_at_its_own_price() -> None:
    from allama.adapters.gemini._decode import decode_body
    from allama.adapters.gemini._stream import decode_stream
    from allama.stream import StreamCollector

    answered = decode_body(json.dumps(_gemini_audio_body(GEMINI_AUDIO_USAGE)), provider="gemini")
    assert answered.provider_data["gemini"]["audio_tokens"] == {"input_audio_tokens": 10_000}
    cost = record(answered).cost
    # 100 text tokens at $0.30, 10,000 audio tokens at $1.00 a million, 200 out at $2.50.
    assert cost is not None and cost.total == Decimal("0.01053")
    assert (cost.input, cost.output) == (Decimal("0.01003"), Decimal("0.0005"))
    # Streamed: the last usage, with its details, is the call's.
    first = _gemini_audio_body({"promptTokenCount": 10_100})
    data = "".join(
        f"data: {json.dumps(chunk)}\r\n\r\n"
        for chunk in (first, _gemini_audio_body(GEMINI_AUDIO_USAGE))
    )
    collector = StreamCollector()
    for event in decode_stream(data.encode(), provider="gemini"):
        collector.push(event)
    streamed = collector.finish().model_copy(update={"provider": "gemini"})
    assert record(streamed).cost == cost
    # A model without a price of its own for audio prices it as text.
    text_only = decode_body(
        json.dumps({**_gemini_audio_body(GEMINI_AUDIO_USAGE), "modelVersion": "gemini-2.5-pro"}),
        provider="gemini",
    )
    priced = record(text_only).cost
    assert priced is not None
    assert (
        priced.total
        == prices.cost_of(
            "gemini", "gemini-2.5-pro", Usage(input_tokens=10_100, output_tokens=200)
        ).total
    )  # type: ignore[union-attr]


def decode_body_of(tier: str) -> ChatResponse:
    from allama.adapters.openai_compat import decode_body

    return decode_body(_chat_body(tier), provider="openai")


# An extraction's record.


def _anthropic(model: str, usage: Usage, details: dict[str, Any]) -> ChatResponse:
    """A response whose usage details (as the Anthropic adapter keeps them) bill more than
    its token counts say."""
    return (
        ChatResponseBuilder()
        .text('{"name": "Ada"}')
        .model(model)
        .provider("anthropic")
        .usage_value(usage)
        .provider_data("anthropic", "usage_details", details)
        .build()
    )


def test_web_searches_and_one_hour_cache_writes_are_priced() -> None:
    """Anthropic bills a web search per request and a one-hour cache write at its own
    (higher) price; both are in the cost, by genai-prices' prices, checked by hand."""
    usage = Usage(input_tokens=10_000, output_tokens=500, cache_write_tokens=3_000)
    details = {
        "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 1},
        "cache_creation": {"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 2_000},
    }
    metadata = record(_anthropic("claude-sonnet-4-5", usage, details))
    _, info = get_snapshot().find_provider_model("claude-sonnet-4-5", None, "anthropic", None)
    rates = info.get_prices(datetime.now(tz=UTC), None)
    cost_in = (
        7_000 * _rate(rates.input_mtok)
        + 1_000 * _rate(rates.cache_write_mtok)
        + 2_000 * _rate(rates.cache_write_1h_mtok)
    ) / MILLION
    cost_out = 500 * _rate(rates.output_mtok) / MILLION
    searches = 3 * rates.web_searches_kcount / 1000
    assert _rate(rates.cache_write_1h_mtok) > _rate(rates.cache_write_mtok) and searches > 0
    cost = metadata.cost
    assert cost is not None, metadata.cost_missing
    assert (cost.input, cost.output, cost.total) == (
        cost_in,
        cost_out,
        cost_in + cost_out + searches,
    )
    # Without the details, the same counts cost less: every write at the five-minute price.
    plain = record(response(usage=usage, provider="anthropic", model="claude-sonnet-4-5")).cost
    assert plain is not None and plain.total < cost.total


def test_five_minute_cache_writes_alone_cost_what_the_counts_say() -> None:
    usage = Usage(input_tokens=4_000, output_tokens=100, cache_write_tokens=1_500)
    details = {
        "cache_creation": {"ephemeral_5m_input_tokens": 1_500, "ephemeral_1h_input_tokens": 0}
    }
    with_details = record(_anthropic("claude-sonnet-4-5", usage, details)).cost
    plain = record(response(usage=usage, provider="anthropic", model="claude-sonnet-4-5")).cost
    assert with_details is not None and with_details == plain


def test_web_searches_a_model_has_no_price_for_leave_the_cost_unknown() -> None:
    """genai-prices would count them as free: the record says the cost is unknown, and why."""
    usage = Usage(input_tokens=1_000, output_tokens=50)
    details = {"server_tool_use": {"web_search_requests": 2}}
    metadata = record(_anthropic("claude-3-haiku-20240307", usage, details))
    assert metadata.cost is None
    assert metadata.cost_missing == (
        f"genai-prices {VERSION} has no price for the web searches of anthropic/claude-3-haiku"
    )


def test_an_extraction_with_a_retry_sums_the_cost_of_both_passes() -> None:
    first_usage = Usage(input_tokens=1_200, output_tokens=80, cache_read_tokens=1_024)
    second_usage = Usage(input_tokens=1_500, output_tokens=40)
    provider = MockProvider(
        [
            response('{"nam": "Ada"}', usage=first_usage, provider=None),
            response('{"name": "Ada"}', usage=second_usage, provider=None),
        ],
        name="openai",
    )
    extracted = Extractor(retries=1).extract(provider, Person, ChatRequest("gpt-4o").user("?"))
    metadata = extracted.metadata
    assert metadata.passes == 2
    first_in, first_out = expected("openai", "gpt-4o", first_usage)
    second_in, second_out = expected("openai", "gpt-4o", second_usage)
    assert metadata.cost == Cost(
        input=first_in + second_in,
        output=first_out + second_out,
        total=first_in + second_in + first_out + second_out,
        source=f"genai-prices {VERSION}, openai/gpt-4o",
    )
    assert metadata.cost_missing is None


@pytest.mark.parametrize("passes", [1, 2, 3])
def test_passes_none_of_which_reported_usage_have_no_usage(passes: int) -> None:
    """However many passes, none reporting usage: `usage` stays `None`, as after one, and
    the reason is the record's, not "one of its calls"'."""
    answers = [response('{"nam": "Ada"}', provider=None)] * (passes - 1)
    provider = MockProvider([*answers, response(provider=None)], name="openai")
    extracted = Extractor(retries=2).extract(provider, Person, ChatRequest("gpt-4o").user("?"))
    metadata = extracted.metadata
    assert metadata.passes == passes
    assert metadata.usage is None
    assert "usage" not in metadata.to_json_dict()
    assert (metadata.cost, metadata.cost_missing) == (None, "no usage was reported")


def test_a_pass_without_usage_beside_one_with_it_is_said_of_one_call() -> None:
    provider = MockProvider(
        [
            response('{"nam": "Ada"}', provider=None),
            response(usage=Usage(input_tokens=10, output_tokens=2), provider=None),
        ],
        name="openai",
    )
    metadata = Extractor(retries=1).extract(provider, Person, ChatRequest("gpt-4o").user("?"))
    assert metadata.metadata.cost_missing == "no usage was reported for one of its calls"


def test_an_async_extraction_records_the_cost_too() -> None:
    usage = Usage(input_tokens=100, output_tokens=10)
    provider = MockProvider([response(usage=usage)])
    extracted = asyncio.run(allama.aextract(provider, Person, ChatRequest("gpt-4o").user("?")))
    assert extracted.metadata.cost is not None
    assert extracted.metadata.cost.total == sum(expected("openai", "gpt-4o", usage))


def test_a_streamed_extraction_records_the_cost() -> None:
    usage = Usage(input_tokens=100, output_tokens=10)
    provider = MockProvider([response(usage=usage, provider=None)], name="openai")
    request = ChatRequest("gpt-4o").user("?").with_option(ExtractionMode.NATIVE)
    with allama.extract_stream(provider, Person, request) as stream:
        for _ in stream:
            pass
        extracted = stream.finish()
    assert extracted.metadata.cost is not None
    assert extracted.metadata.cost.total == sum(expected("openai", "gpt-4o", usage))


def test_passes_through_different_providers_add_up_with_both_sources() -> None:
    """A failover across providers: each pass at its own provider's prices."""
    usage = Usage(input_tokens=1_000, output_tokens=100)
    metadata = record(
        response(usage=usage),
        response(provider="anthropic", model="claude-haiku-4-5", usage=usage),
    )
    assert metadata.cost is not None
    assert metadata.cost.total == sum(expected("openai", "gpt-4o", usage)) + sum(
        expected("anthropic", "claude-haiku-4-5", usage)
    )
    assert metadata.cost.source == (
        f"genai-prices {VERSION}, openai/gpt-4o + anthropic/claude-haiku-4-5"
    )


def test_a_decision_carries_the_cost_of_its_call() -> None:
    usage = Usage(input_tokens=50, output_tokens=1)
    provider = MockProvider([response("Yes", usage=usage, provider=None)], name="openai")
    # Neither structured output nor tools: the decision's own loop, options in the prompt.
    for capability in (
        ChatCapability.STRUCTURED_OUTPUT,
        ChatCapability.TOOL_CALLS,
        ChatCapability.FORCED_TOOL_CHOICE,
        ChatCapability.CHOICE_OUTPUT,
    ):
        provider = provider.with_chat_capability(capability, CapabilitySupport.UNSUPPORTED)
    decision = allama.decide(provider, bool, ChatRequest("gpt-4o").user("Is water wet?"))
    assert decision.value is True
    assert decision.metadata.cost is not None
    assert decision.metadata.cost.total == sum(expected("openai", "gpt-4o", usage))


def test_a_failed_extraction_carries_the_cost_of_what_it_paid_for() -> None:
    usage = Usage(input_tokens=100, output_tokens=10)
    provider = MockProvider([response("not json", usage=usage), response("nor this", usage=usage)])
    with pytest.raises(ExtractionError) as raised:
        Extractor(retries=1).extract(provider, Person, ChatRequest("gpt-4o").user("?"))
    metadata = raised.value.metadata
    assert metadata is not None and metadata.cost is not None
    assert metadata.cost.total == 2 * sum(expected("openai", "gpt-4o", usage))
    # Its JSON form (as `to_dict` writes it) reads back with the cost.
    again = Error.from_dict(raised.value.to_dict())
    assert isinstance(again, ExtractionError) and again.metadata is not None
    assert again.metadata.cost == metadata.cost


def test_a_provider_error_after_a_pass_carries_that_pass_cost() -> None:
    usage = Usage(input_tokens=100, output_tokens=10)
    provider = MockProvider([response("not json", usage=usage), RateLimitedError("busy")])
    with pytest.raises(Error) as raised:
        Extractor(retries=1).extract(provider, Person, ChatRequest("gpt-4o").user("?"))
    metadata = ExtractionMetadata.from_error(raised.value)
    assert metadata is not None and metadata.cost is not None
    assert metadata.cost.total == sum(expected("openai", "gpt-4o", usage))


# The reasons there is no cost; never an exception.


@pytest.mark.parametrize("preset", ["local", "llama-cpp", "vllm"])
def test_a_model_run_locally_has_no_price(preset: str) -> None:
    metadata = record(
        response(provider=preset, model="gpt-4o", usage=Usage(input_tokens=1, output_tokens=1))
    )
    assert metadata.cost is None
    assert metadata.cost_missing == f"no price for a model run locally ({preset})"


@pytest.mark.parametrize("preset", ["ollama", "ollama-openai"])
@pytest.mark.parametrize("model", ["llama3.1", "gpt-oss:120b-cloud", "gpt-oss:120b"])
def test_a_model_ollama_serves_has_no_price_and_is_not_said_to_run_locally(
    preset: str, model: str
) -> None:
    """Ollama's cloud runs `-cloud` models for a local server, and every model on
    ollama.com (named without `-cloud`): the reason claims neither place."""
    metadata = record(
        response(provider=preset, model=model, usage=Usage(input_tokens=1, output_tokens=1))
    )
    assert metadata.cost is None
    assert metadata.cost_missing == (
        f"no price for a model Ollama serves, locally or in its cloud ({preset})"
    )


@pytest.mark.parametrize("preset", ["openai-compatible", "anthropic-compatible"])
def test_an_endpoint_of_ones_own_has_no_price_whatever_its_model_is_called(preset: str) -> None:
    reason = prices.cost_of(preset, "gpt-4o", Usage(input_tokens=1, output_tokens=1))
    assert reason == f"no price list for an endpoint of your own ({preset})"


def test_azure_prices_only_what_azure_bills_at_the_vendors_list_price() -> None:
    usage = Usage(input_tokens=100_000, output_tokens=10_000)
    # genai-prices' Azure prices fall back to DeepSeek's own (with its off-peak hours, a
    # quarter of the price in the evening) and xAI's: not what Azure charges.
    for model, owner in (("DeepSeek-R1", "deepseek"), ("grok-3", "x-ai")):
        for hour in (10, 20):
            at = datetime(2026, 11, 2, hour, tzinfo=UTC)
            assert prices.cost_of("azure-foundry", model, usage, at=at) == (
                f"genai-prices {VERSION} has no Azure price for {model!r} (only {owner}'s own, "
                "which Azure does not charge)"
            )
    # OpenAI's and Anthropic's models at their list prices, and Azure's own.
    for preset, model in (
        ("azure-openai", "gpt-4o"),
        ("azure-anthropic", "claude-sonnet-4-5"),
        ("azure-foundry", "phi-4"),
    ):
        assert isinstance(prices.cost_of(preset, model, usage), Cost)


def test_an_unknown_model_has_no_price_and_says_so() -> None:
    metadata = record(
        response(model="no-such-model-7", usage=Usage(input_tokens=1, output_tokens=1))
    )
    assert metadata.cost is None
    assert metadata.cost_missing == (
        f"genai-prices {VERSION} has no price for 'no-such-model-7' at openai"
    )


def test_a_provider_genai_prices_does_not_know_has_no_price() -> None:
    reason = prices.cost_of(
        "deepinfra", "meta-llama/Llama-3.3-70B-Instruct", Usage(input_tokens=1, output_tokens=1)
    )
    assert reason == f"genai-prices {VERSION} has no prices for the provider 'deepinfra'"
    assert prices.cost_of("mock", "gpt-4o", Usage(input_tokens=1, output_tokens=1)) == (
        f"genai-prices {VERSION} has no prices for the provider 'mock'"
    )


@pytest.mark.parametrize(
    ("usage", "reason"),
    [
        (None, "no usage was reported"),
        (Usage(output_tokens=5), "the provider did not report the input tokens"),
        (Usage(input_tokens=5), "the provider did not report the output tokens"),
        (Usage(), "no token counts came with a call that was made (its answer cut off, say)"),
    ],
)
def test_usage_not_reported_has_no_price(usage: Usage | None, reason: str) -> None:
    metadata = record(response(usage=usage))
    assert (metadata.cost, metadata.cost_missing) == (None, reason)


def test_one_pass_without_usage_leaves_the_whole_cost_unknown() -> None:
    metadata = record(response(usage=Usage(input_tokens=5, output_tokens=5)), response())
    # The totals are what the calls reported; the cost says one reported none.
    assert metadata.usage == Usage(input_tokens=5, output_tokens=5)
    assert (metadata.cost, metadata.cost_missing) == (
        None,
        "no usage was reported for one of its calls",
    )
    only = record(response(usage=Usage(input_tokens=5)), response(usage=Usage(output_tokens=1)))
    assert only.cost_missing == "the provider did not report the output tokens for one of its calls"


def test_a_count_one_call_did_not_report_is_unknown_for_the_record() -> None:
    # One call counted reasoning (0), the next (Anthropic's thinking) only its whole output:
    # the record does not say none of the 974 output tokens went to reasoning.
    first = Usage(input_tokens=100, output_tokens=10, reasoning_tokens=0, cache_read_tokens=0)
    second = Usage(input_tokens=67, output_tokens=964)
    metadata = record(response(usage=first), response(usage=second))
    assert metadata.usage == Usage(input_tokens=167, output_tokens=974)
    assert metadata.usage.reasoning_share() is None
    assert first.of_calls(second) == metadata.usage
    # `+` adds what was reported, as before.
    assert (first + second).reasoning_tokens == 0


def test_a_response_naming_no_model_or_provider_has_no_price() -> None:
    usage = Usage(input_tokens=5, output_tokens=5)
    assert record(response(model=None, usage=usage)).cost_missing == "the response names no model"
    assert record(response(provider=None, usage=usage)).cost_missing == (
        "the response names no provider"
    )


def test_a_record_with_no_response_has_no_cost() -> None:
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    assert (metadata.cost, metadata.cost_missing) == (None, "no usage was reported")


def test_counts_genai_prices_rejects_are_a_reason_not_an_exception() -> None:
    usage = Usage(input_tokens=10, output_tokens=1, cache_read_tokens=50)
    reason = prices.cost_of("openai", "gpt-4o", usage)
    assert isinstance(reason, str)
    assert reason.startswith(
        f"genai-prices {VERSION} could not price the usage for openai/gpt-4o: "
    )


def test_whatever_genai_prices_raises_becomes_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("price data unreadable")

    monkeypatch.setattr(prices, "_lookup", broken)
    metadata = record(response(usage=Usage(input_tokens=5, output_tokens=5)))
    assert metadata.cost is None
    assert metadata.cost_missing == (
        "genai-prices could not price 'gpt-4o-2024-08-06' at openai: price data unreadable"
    )


def test_without_genai_prices_the_reason_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # `import genai_prices` fails
    usage = Usage(input_tokens=5, output_tokens=5)
    metadata = record(response(usage=usage))
    assert (metadata.cost, metadata.cost_missing) == (None, "install allama[prices] for costs")
    assert metadata.to_json_dict()["cost_missing"] == "install allama[prices] for costs"
    # What needs no price data still says what it is.
    local = record(response(provider="ollama", usage=usage))
    assert (
        local.cost_missing == "no price for a model Ollama serves, locally or in its cloud (ollama)"
    )


# Work done only when read, and once.


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real: Callable[..., Cost | str] = prices.price

    def counted(*args: Any, **kwargs: Any) -> Cost | str:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(prices, "price", counted)
    return calls


def test_nothing_is_priced_until_the_cost_is_read_and_then_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _counting(monkeypatch)
    usage = Usage(input_tokens=100, output_tokens=10)
    provider = MockProvider([response('{"nam": 1}', usage=usage), response(usage=usage)])
    extracted = Extractor(retries=1).extract(provider, Person, ChatRequest("gpt-4o").user("?"))
    metadata = extracted.metadata
    repr(metadata), metadata.model_dump(), metadata == record()
    assert calls == []
    cost = metadata.cost
    assert metadata.cost == cost and metadata.cost_missing is None and metadata.priced() == cost
    assert len(calls) == 1
    metadata.priced(batch=True)
    metadata.priced(batch=True)
    assert len(calls) == 2
    # A further response prices again, with it.
    metadata.record_pass(response(usage=usage), lambda warning: warning)
    assert metadata.cost is not None and metadata.cost.total == 3 * sum(
        expected("openai", "gpt-4o", usage)
    )
    assert len(calls) == 3


def test_a_copy_taken_before_a_pass_keeps_its_own_cost() -> None:
    usage = Usage(input_tokens=100, output_tokens=10)
    metadata = record(response(usage=usage))
    before = metadata.cost
    copy = metadata.model_copy()
    metadata.record_pass(response(usage=usage), lambda warning: warning)
    assert copy.cost == before
    assert metadata.cost is not None and before is not None
    assert metadata.cost.total == 2 * before.total


def test_a_model_is_looked_up_once_found_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = get_snapshot()
    looked_up: list[str] = []
    real = snapshot.find_provider_model

    def counted(model_ref: str, *args: Any) -> Any:
        looked_up.append(model_ref)
        return real(model_ref, *args)

    monkeypatch.setattr(snapshot, "find_provider_model", counted)
    monkeypatch.setattr(prices, "_found", {})
    usage = Usage(input_tokens=1, output_tokens=1)
    for _ in range(3):
        assert isinstance(prices.cost_of("openai", "gpt-4o-mini", usage), Cost)
        assert isinstance(prices.cost_of("openai", "not-a-model-at-all", usage), str)
    assert looked_up == ["gpt-4o-mini", "not-a-model-at-all"]


def test_an_extraction_imports_neither_the_prices_nor_genai_prices() -> None:
    code = (
        "import sys, allama\n"
        "from allama.mock import ChatResponseBuilder, MockProvider\n"
        "from pydantic import BaseModel\n"
        "class P(BaseModel):\n"
        "    name: str\n"
        "r = (ChatResponseBuilder().text('{\"name\": \"a\"}').usage(10, 2).model('gpt-4o')"
        ".provider('openai').build())\n"
        "request = allama.ChatRequest('gpt-4o').user('?')\n"
        "m = allama.extract(MockProvider([r]), P, request).metadata\n"
        "assert 'allama._prices' not in sys.modules and 'genai_prices' not in sys.modules\n"
        "assert m.cost is not None and 'genai_prices' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# The JSON form.


def test_the_record_json_carries_the_cost_and_reads_back() -> None:
    usage = Usage(input_tokens=1_234, output_tokens=56, cache_read_tokens=1_024)
    metadata = record(response(usage=usage), response(usage=usage))
    data = json.loads(json.dumps(metadata.to_json_dict()))
    cost_in, cost_out = expected("openai", "gpt-4o", usage)
    assert data["cost"] == {
        "input": str(2 * cost_in),
        "output": str(2 * cost_out),
        "total": str(2 * (cost_in + cost_out)),
        "currency": "USD",
        "source": f"genai-prices {VERSION}, openai/gpt-4o",
    }
    assert "cost_missing" not in data
    again = ExtractionMetadata.from_json_dict(data)
    assert again == metadata
    assert again.cost == metadata.cost and again.cost_missing is None
    assert again.to_json_dict() == data
    # A record read back holds the cost, not the usage by model: no batch price.
    assert again.priced(batch=True) == prices.STANDARD_ONLY


def test_prices_genai_prices_fetched_itself_are_named_by_their_date() -> None:
    from genai_prices.data_snapshot import DataSnapshot, set_custom_snapshot

    fetched = DataSnapshot(
        providers=get_snapshot().providers,
        from_auto_update=True,
        timestamp=datetime(2026, 11, 30, 6, 0),
    )
    set_custom_snapshot(fetched)
    try:
        cost = prices.cost_of("openai", "gpt-4o-mini", Usage(input_tokens=1, output_tokens=1))
        assert isinstance(cost, Cost)
        assert cost.source == f"genai-prices {VERSION} (prices of 2026-11-30), openai/gpt-4o-mini"
        # Billed beyond the usage (web searches): priced by genai-prices' own machinery.
        usage = Usage(input_tokens=1_000, output_tokens=100)
        details = {"server_tool_use": {"web_search_requests": 2}}
        searched = record(_anthropic("claude-sonnet-4-5", usage, details)).cost
        assert searched is not None
        assert searched.source == (
            f"genai-prices {VERSION} (prices of 2026-11-30), anthropic/claude-sonnet-4-5"
        )
    finally:
        set_custom_snapshot(None)
    cost = prices.cost_of("openai", "gpt-4o-mini", Usage(input_tokens=1, output_tokens=1))
    assert isinstance(cost, Cost) and cost.source == f"genai-prices {VERSION}, openai/gpt-4o-mini"


def test_a_record_of_batch_and_live_passes_reads_back_without_a_batch_price() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=100)
    from_job = response(usage=usage).model_copy(update={"batch_job": "batch_1"})
    metadata = record(from_job, response(usage=usage))  # a follow-up sent live
    assert metadata.batch_passes == 1
    mixed = metadata.cost
    assert mixed is not None and mixed.batch is False  # not all of it at batch prices
    again = ExtractionMetadata.from_json_dict(json.loads(json.dumps(metadata.to_json_dict())))
    assert again.cost == mixed and again.batch_passes == 1
    assert again.priced(batch=True) == (
        "the record holds its cost as it was priced (not all of it at batch prices), "
        "not the usage to price again"
    )


def test_a_record_of_batch_and_live_passes_names_its_batch_part() -> None:
    # A provider batch job's answer and a live follow-up: not all at standard prices.
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    live = prices.cost_of("openai", "gpt-4o-2024-08-06", usage)
    in_job = prices.cost_of("openai", "gpt-4o-2024-08-06", usage, batch=True)
    assert isinstance(live, Cost) and isinstance(in_job, Cost)
    total = live.total + in_job.total
    from_job = response(usage=usage).model_copy(update={"batch_job": "batch_1"})
    first = record(from_job, response(usage=usage)).cost
    assert first is not None and first.batch is False and first.total == total
    assert str(first) == (
        f"{total} USD (genai-prices {VERSION}, openai/gpt-4o (batch) + openai/gpt-4o)"
    )
    second = record(response(usage=usage), from_job).cost
    assert second is not None
    assert second.source == f"genai-prices {VERSION}, openai/gpt-4o + openai/gpt-4o (batch)"
    # All of it from jobs: at batch prices, said once, as before.
    both = record(from_job, from_job).cost
    assert str(both) == (
        f"{in_job.total * 2} USD at batch prices (genai-prices {VERSION}, openai/gpt-4o)"
    )


def test_a_batch_cost_added_to_another_names_its_batch_part() -> None:
    def cost(source: str, *, batch: bool) -> Cost:
        one = Decimal(1)
        return Cost(input=one, output=one, total=one + one, source=source, batch=batch)

    job = cost("genai-prices 1, openai/gpt-4o + openai/gpt-4o-mini", batch=True)
    live = cost("genai-prices 1, openai/gpt-4o", batch=False)
    assert (job + live).source == (
        "genai-prices 1, openai/gpt-4o (batch) + openai/gpt-4o-mini (batch) + openai/gpt-4o"
    )
    assert (live + job).batch is False
    assert (live + job).source == (
        "genai-prices 1, openai/gpt-4o + openai/gpt-4o (batch) + openai/gpt-4o-mini (batch)"
    )
    # A total over a run of both names each price once, however many were added.
    total = sum([live, job] * 200, start=job)
    assert total.source == (job + live).source
    # All of it at batch prices: as it is.
    assert (job + job).source == job.source and (job + job).batch is True
    assert (cost("s", batch=True) + live).source == "s (batch); genai-prices 1, openai/gpt-4o"


def test_a_batch_cost_reads_back_as_one() -> None:
    cost = Cost(
        input=Decimal("0.5"), output=Decimal("1.25"), total=Decimal("1.75"), source="s", batch=True
    )
    assert cost.to_json_dict()["batch"] is True
    assert Cost.from_json_dict(json.loads(json.dumps(cost.to_json_dict()))) == cost


def test_the_reason_reads_back_too() -> None:
    metadata = record(response(provider="ollama", usage=Usage(input_tokens=1, output_tokens=1)))
    data = metadata.to_json_dict()
    assert (
        data["cost_missing"]
        == "no price for a model Ollama serves, locally or in its cloud (ollama)"
    )
    assert "cost" not in data
    again = ExtractionMetadata.from_json_dict(data)
    assert (
        again.cost_missing == "no price for a model Ollama serves, locally or in its cloud (ollama)"
    )


def test_a_record_of_no_response_writes_no_cost() -> None:
    data = ExtractionMetadata.new(ExtractionMode.NATIVE).to_json_dict()
    assert "cost" not in data and "cost_missing" not in data
    assert ExtractionMetadata.from_json_dict(data).cost_missing == "no usage was reported"


def test_old_records_read_back() -> None:
    written_before = {
        "mode": "native",
        "passes": 1,
        "usage": {"input_tokens": 5, "output_tokens": 6},
    }
    metadata = ExtractionMetadata.from_json_dict(written_before)
    assert metadata.cost is None
    assert metadata.cost_missing == "the record was written without its cost"
    no_usage = ExtractionMetadata.from_json_dict({"mode": "native", "passes": 1})
    assert no_usage.cost_missing == "no usage was reported"


def test_an_unreadable_cost_is_a_reason_not_an_error() -> None:
    data = {"mode": "native", "passes": 1, "cost": {"input": "lots"}}
    metadata = ExtractionMetadata.from_json_dict(data)
    assert metadata.passes == 1
    assert metadata.cost_missing == "the record's cost could not be read"


# The type.


def test_costs_add_up_exactly() -> None:
    a = Cost(input=Decimal("0.1"), output=Decimal("0.2"), total=Decimal("0.3"), source="x")
    b = Cost(input=Decimal("0.01"), output=Decimal("0.02"), total=Decimal("0.03"), source="y")
    total = a + b
    assert (total.input, total.output, total.total) == (
        Decimal("0.11"),
        Decimal("0.22"),
        Decimal("0.33"),
    )
    assert total.source == "x; y" and (a + a).source == "x"
    with pytest.raises(ValueError, match="EUR"):
        a + Cost(input=Decimal(0), output=Decimal(0), total=Decimal(0), currency="EUR", source="z")


def test_cost_is_exported_and_frozen() -> None:
    assert allama.Cost is Cost
    cost = Cost(input=Decimal(1), output=Decimal(2), total=Decimal(3), source="s")
    with pytest.raises(AttributeError):
        cost.total = Decimal(4)  # type: ignore[misc]
    assert str(cost) == "3 USD (s)"


def test_every_flat_price_gives_genai_prices_own_answer_to_the_last_digit() -> None:
    # The fast path (flat token prices, computed as genai-prices computes them) against
    # genai-prices' full calculation, for every model of every provider it knows.
    when = datetime(2026, 6, 1, tzinfo=UTC)
    usages = [(120, 20, 0, 0), (5000, 777, 1000, 300), (1_234_567, 3, 999_999, 0)]
    checked = 0
    for provider in get_snapshot().providers:
        for model in provider.models:
            model_price = model.get_prices(when)
            flat = prices._flat(genai_prices, model_price)
            if flat is None:
                continue
            for tokens in usages:
                want = model_price.calc_price(
                    genai_prices.Usage(
                        input_tokens=tokens[0],
                        output_tokens=tokens[1],
                        cache_read_tokens=tokens[2] or None,
                        cache_write_tokens=tokens[3] or None,
                    )
                )
                got = prices._flat_cost(flat, tokens)
                assert (str(got.input), str(got.output), str(got.total)) == (
                    str(want["input_price"]),
                    str(want["output_price"]),
                    str(want["total_price"]),
                ), (provider.id, model.id, tokens)
                checked += 1
    assert checked > 300  # most models have flat prices


def test_costs_keep_their_digits_whatever_the_callers_decimal_precision() -> None:
    import decimal

    usage = Usage(input_tokens=123_457, output_tokens=654_321)
    exact = prices.cost_of("openai", "gpt-4o-mini", usage)
    assert isinstance(exact, prices.Cost)
    # $0.15 and $0.60 per million tokens in and out.
    assert (exact.input, exact.output) == (Decimal("0.01851855"), Decimal("0.3925926"))
    with decimal.localcontext(decimal.Context(prec=3)):  # a program that rounds its own
        assert prices.cost_of("openai", "gpt-4o-mini", usage) == exact
        assert (exact + exact).total == Decimal("0.82222230")

        async def run() -> Decimal:
            answer = ChatResponseBuilder().text('{"name": "Ada"}').usage(123_457, 654_321)
            provider = MockProvider([answer.model("gpt-4o-mini").build()] * 2, name="openai")
            batch = allama.abatch(
                provider, Person, ["a", "b"], request=allama.ChatRequest("gpt-4o-mini")
            )
            assert len([r async for r in batch]) == 2
            return batch.summary.cost

        assert asyncio.run(run()) == Decimal("0.82222230")


def _failed_call(error: Exception, requested: str) -> ExtractionMetadata:
    """The record of an extraction whose one call failed with `error`, its usage reported,
    as the provider raises it (named by the request's model)."""
    from allama.errors import paid_for

    assert isinstance(error, Error)
    error.with_model(requested)
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    metadata.record_paid(paid_for(error))
    return metadata


def test_a_failed_call_is_priced_at_the_tier_and_the_model_its_body_names() -> None:
    from allama.adapters.openai_compat import decode_body as decode_chat_body
    from allama.adapters.openai_responses import decode_body as decode_responses_body

    # A failed response at the priority tier, asked for by an alias: gpt-5-mini's priority
    # prices, as a call that succeeds at that tier is priced.
    failed = {
        "id": "resp_1",
        "object": "response",
        "status": "failed",
        "error": {"code": "server_error", "message": "The model failed."},
        "model": "gpt-5-mini",
        "service_tier": "priority",
        "output": [],
        "usage": {
            "input_tokens": 100_000,
            "output_tokens": 10_000,
            "total_tokens": 110_000,
            "input_tokens_details": {"cached_tokens": 40_000},
        },
    }
    with pytest.raises(Error) as raised:
        decode_responses_body(json.dumps(failed), provider="openai", model="my-alias")
    cost = _failed_call(raised.value, "my-alias").cost
    assert cost is not None and cost.total == _tier_price("gpt-5-mini", "priority")
    # A choice's error from a router asked for `openrouter/auto`: the model it chose.
    chosen = {
        "id": "gen-1",
        "object": "chat.completion",
        "created": 1,
        "model": "openai/gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ""},
                "finish_reason": "error",
                "error": {"code": 502, "message": "Upstream error"},
            }
        ],
        "usage": {"prompt_tokens": 50_000, "completion_tokens": 3_000, "total_tokens": 53_000},
    }
    with pytest.raises(Error) as raised:
        decode_chat_body(json.dumps(chosen), provider="openrouter", model="openrouter/auto")
    metadata = _failed_call(raised.value, "openrouter/auto")
    usage = Usage(input_tokens=50_000, output_tokens=3_000)
    assert metadata.cost is not None
    assert metadata.cost.total == sum(expected("openrouter", "openai/gpt-4o-mini", usage))


def test_a_gemini_call_served_at_another_tier_is_not_priced_at_the_standard_one() -> None:
    from allama.adapters.gemini._decode import decode_body
    from allama.adapters.gemini._stream import decode_stream
    from allama.stream import StreamCollector

    usage = {"promptTokenCount": 1_000, "candidatesTokenCount": 100, "totalTokenCount": 1_100}
    standard = decode_body(
        json.dumps(_gemini_audio_body({**usage, "serviceTier": "standard"})), provider="gemini"
    )
    assert standard.provider_data == {}
    assert isinstance(record(standard).priced(), Cost)
    # Flex is billed at half, priority at up to twice: genai-prices has neither for Gemini,
    # so the cost is unknown, with the reason, rather than the standard price.
    for tier, spelled in (("flex", "flex"), ("priority", "PRIORITY")):
        body = _gemini_audio_body({**usage, "serviceTier": spelled})
        served = decode_body(json.dumps(body), provider="gemini")
        assert served.provider_data == {"gemini": {"service_tier": tier}}
        assert record(served).priced() == (
            f"genai-prices {VERSION} has no price for the '{tier}' service tier of "
            "google/gemini-2.5-flash"
        )
        collector = StreamCollector()
        for event in decode_stream(f"data: {json.dumps(body)}\r\n\r\n".encode(), provider="gemini"):
            collector.push(event)
        streamed = collector.finish()
        assert streamed.provider_data == {"gemini": {"service_tier": tier}}


def test_a_stream_that_fails_is_priced_at_the_model_and_tier_it_named() -> None:
    from allama.adapters.gemini._stream import GenerateStreamDecoder
    from allama.adapters.openai_responses._sse import ResponsesStreamDecoder
    from allama.stream import StreamCollector

    def collected(decoder: Any, data: str) -> StreamCollector:
        """The events a stream gave before its error, as a stream's reader collects them."""
        collector = StreamCollector()
        with pytest.raises(Error):
            for event in decoder.feed(data.encode()):
                collector.push(event)
        return collector

    # A Responses stream asked for by an alias whose `response.failed` says the model and
    # the tier that served it, with its usage: priced there, as a failed body is.
    usage = {
        "input_tokens": 100_000,
        "output_tokens": 10_000,
        "total_tokens": 110_000,
        "input_tokens_details": {"cached_tokens": 40_000},
    }
    created = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "alias"}
    failed = {
        **created,
        "status": "failed",
        "model": "gpt-5-mini",
        "service_tier": "priority",
        "error": {"code": "server_error", "message": "The model failed."},
        "output": [],
        "usage": usage,
    }
    data = "".join(
        f"event: {kind}\ndata: {json.dumps({'type': kind, 'response': body})}\n\n"
        for kind, body in (("response.created", created), ("response.failed", failed))
    )
    collector = collected(ResponsesStreamDecoder(provider="openai", model="alias"), data)
    so_far = collector.response_metadata().model_copy(update={"provider": "openai"})
    assert (so_far.model, so_far.provider_data) == (
        "gpt-5-mini",
        {"openai_responses": {"service_tier": "priority"}},
    )
    cost = record(so_far).cost
    assert cost is not None and cost.total == _tier_price("gpt-5-mini", "priority")
    # A Gemini stream at the flex tier that fails after its usage: unknown, not standard.
    chunk = _gemini_audio_body(
        {"promptTokenCount": 1_000, "candidatesTokenCount": 10, "serviceTier": "flex"}
    )
    error = {"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}
    data = f"data: {json.dumps(chunk)}\r\n\r\ndata: {json.dumps(error)}\r\n\r\n"
    collector = collected(GenerateStreamDecoder(provider="gemini"), data)
    so_far = collector.response_metadata().model_copy(update={"provider": "gemini"})
    assert so_far.provider_data == {"gemini": {"service_tier": "flex"}}
    assert record(so_far).cost is None
    # Its audio tokens, at the audio price, as in a stream that ends.
    audio = f"data: {json.dumps(_gemini_audio_body(GEMINI_AUDIO_USAGE))}\r\n\r\n"
    collector = collected(
        GenerateStreamDecoder(provider="gemini"), audio + data.split("\r\n\r\n", 1)[1]
    )
    so_far = collector.response_metadata().model_copy(update={"provider": "gemini"})
    cost = record(so_far).cost
    assert cost is not None and cost.total == Decimal("0.01053")


def test_gemini_unspecified_tier_is_the_standard_one() -> None:
    from allama.adapters.gemini._decode import decode_body

    usage = {"promptTokenCount": 1_000, "candidatesTokenCount": 100, "serviceTier": "unspecified"}
    answered = decode_body(json.dumps(_gemini_audio_body(usage)), provider="gemini")
    assert answered.provider_data == {} and isinstance(record(answered).priced(), Cost)


def test_a_vertex_call_is_priced_by_the_traffic_that_served_it() -> None:
    from allama.adapters.gemini._decode import decode_body

    # Vertex AI says how a call was billed in `usageMetadata.trafficType`: pay-as-you-go at
    # the standard price, its priority and flex traffic at other prices (genai-prices has
    # none for Gemini: unknown, with the reason), provisioned throughput by its reservation.
    usage = {"promptTokenCount": 1_000, "candidatesTokenCount": 100, "totalTokenCount": 1_100}

    def served(traffic: str) -> ChatResponse:
        body = _gemini_audio_body({**usage, "trafficType": traffic})
        return decode_body(json.dumps(body), provider="vertex-gemini")

    for standard in ("ON_DEMAND", "TRAFFIC_TYPE_UNSPECIFIED"):
        assert served(standard).provider_data == {}
    for traffic, tier in (("ON_DEMAND_PRIORITY", "priority"), ("ON_DEMAND_FLEX", "flex")):
        answered = served(traffic)
        assert answered.provider_data == {"gemini": {"service_tier": tier}}
        assert record(answered).priced() == (
            f"genai-prices {VERSION} has no price for the '{tier}' service tier of "
            "google/gemini-2.5-flash"
        )
    reserved = served("PROVISIONED_THROUGHPUT")
    assert reserved.provider_data == {"gemini": {"service_tier": "provisioned_throughput"}}
    assert record(reserved).priced() == (
        "served by provisioned throughput, billed by its reservation rather than by token"
    )
    # A kind of traffic not known here may be billed otherwise: no price, rather than a guess.
    assert record(served("ON_DEMAND_SOMETHING_NEW")).cost is None


def test_the_tier_a_gemini_usage_says_is_read_whatever_its_spelling() -> None:
    from allama.adapters.gemini._decode import served_tier

    assert served_tier({"trafficType": "", "serviceTier": "flex"}) == "flex"
    assert served_tier({"trafficType": "ON_DEMAND", "serviceTier": "priority"}) == "priority"
    assert served_tier({"trafficType": "on_demand_priority"}) == "priority"
    assert served_tier({"trafficType": "traffic_type_unspecified"}) is None
    assert served_tier({"trafficType": "ON_DEMAND_FLEX", "serviceTier": "priority"}) == "flex"
    # The enum's number, or a kind not known here: a tier with no price, never the standard.
    assert served_tier({"trafficType": 2}) == "traffic type 2"
    assert served_tier({"trafficType": "default", "serviceTier": "priority"}) == (
        "traffic type DEFAULT"
    )
    # Such a kind is no standard tier's name where a failed call's is kept either: an
    # answer and a failed stream of the same usage both have no price.
    from allama.types._response import service_tier_of

    for kind in ("STANDARD", "default", "Auto"):
        tier = served_tier({"trafficType": kind})
        assert tier is not None and service_tier_of(tier) == tier


def test_a_gemini_stream_whose_later_usage_says_the_standard_tier_is_priced_at_it() -> None:
    from allama.adapters.gemini._stream import decode_stream
    from allama.stream import StreamCollector

    usage = {"promptTokenCount": 1_000, "candidatesTokenCount": 100, "totalTokenCount": 1_100}
    first = _gemini_audio_body({**usage, "trafficType": "ON_DEMAND_PRIORITY"})
    last = _gemini_audio_body({**usage, "trafficType": "ON_DEMAND"})
    data = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in (first, last))
    collector = StreamCollector()
    for event in decode_stream(data.encode(), provider="vertex-gemini"):
        collector.push(event)
    streamed = collector.finish().model_copy(update={"provider": "vertex-gemini"})
    assert streamed.provider_data == {"gemini": {"service_tier": None}}
    assert isinstance(record(streamed).priced(), Cost)


# What the provider says a call cost.

CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"

OPENROUTER_MONEY = {
    "cost": 0.000669,
    "is_byok": False,
    "cost_details": {
        "upstream_inference_cost": None,
        "upstream_inference_prompt_cost": 0.000129,
        "upstream_inference_completions_cost": 0.00054,
    },
}


def _recorded(key: str) -> dict[str, Any]:
    path = CORPUS / f"{key}.json"
    if not path.is_file():
        pytest.skip(f"{key} is not in {CORPUS}")
    case: dict[str, Any] = json.loads(path.read_text())
    return case


def _routed_body(usage: dict[str, Any], model: str = "anthropic/claude-sonnet-4.5") -> str:
    choice = {"index": 0, "message": {"role": "assistant", "content": '{"name": "Ada"}'}}
    return json.dumps({"id": "gen-1", "model": model, "choices": [choice], "usage": usage})


def _openrouter_usage(money: dict[str, Any]) -> dict[str, Any]:
    return {"prompt_tokens": 43, "completion_tokens": 36, "total_tokens": 79, **money}


def test_openrouters_recorded_stream_costs_what_openrouter_billed() -> None:
    from allama.adapters.openai_compat._sse import decode_stream
    from allama.stream import StreamCollector

    case = _recorded("openrouter/reasoning_stream")
    collector = StreamCollector()
    collector.provider = "openrouter"
    for event in decode_stream(case["stream"].encode(), provider="openrouter"):
        collector.push(event)
    metadata = record(collector.finish())
    # What the router billed, whichever upstream served the call (Google's, here), rather
    # than genai-prices' list price for the model.
    assert metadata.cost == Cost(
        input=Decimal("0.000129"),
        output=Decimal("0.00054"),
        total=Decimal("0.000669"),
        source="as openrouter reported, anthropic/claude-sonnet-4.5",
    )
    assert metadata.to_json_dict()["cost"] == {
        "input": "0.000129",
        "output": "0.00054",
        "total": "0.000669",
        "currency": "USD",
        "source": "as openrouter reported, anthropic/claude-sonnet-4.5",
    }


def test_openrouters_recorded_responses_stream_costs_what_openrouter_billed() -> None:
    from allama.adapters.openai_responses._sse import ResponsesStreamDecoder
    from allama.stream import StreamCollector

    case = _recorded("openrouter/responses_api_reasoning_stream")
    collector = StreamCollector()
    collector.provider = "openrouter"
    decoder = ResponsesStreamDecoder(provider="openrouter", model="openai/gpt-oss-20b")
    for event in [*decoder.feed(case["stream"].encode()), *decoder.close()]:
        collector.push(event)
    metadata = record(collector.finish())
    assert metadata.cost == Cost(
        input=Decimal("0.0000039"),
        output=Decimal("0.0000074"),
        total=Decimal("0.0000113"),
        source="as openrouter reported, openai/gpt-oss-20b",
    )


def test_a_call_billed_to_ones_own_upstream_key_costs_the_fee_and_the_upstreams_charge() -> None:
    from allama.adapters.openai_compat import decode_body

    money = {
        "cost": 0.0005,
        "is_byok": True,
        "cost_details": {
            "upstream_inference_cost": 0.01,
            "upstream_inference_prompt_cost": 0.004,
            "upstream_inference_completions_cost": 0.006,
        },
    }
    decoded = decode_body(_routed_body(_openrouter_usage(money)), provider="openrouter")
    assert record(decoded).cost == Cost(
        input=Decimal("0.004"),
        output=Decimal("0.006"),
        total=Decimal("0.0105"),
        source="as openrouter reported, anthropic/claude-sonnet-4.5",
    )


@pytest.mark.parametrize(
    "money",
    [
        {"cost": 0.000669},  # no parts
        {"cost": 0.000669, "is_byok": False},
        {**OPENROUTER_MONEY, "is_byok": "false"},
        {**OPENROUTER_MONEY, "cost": -1.0},
        {**OPENROUTER_MONEY, "cost": True},
        {**OPENROUTER_MONEY, "cost": "0.0006x"},
        {**OPENROUTER_MONEY, "cost": "9.99999e999999"},  # no cost of one call
        {  # nor is this any amount of money (its digits would fill a line)
            "cost": "1e-999999",
            "is_byok": False,
            "cost_details": {
                "upstream_inference_prompt_cost": "0",
                "upstream_inference_completions_cost": "1e-999999",
            },
        },
        {**OPENROUTER_MONEY, "cost": 0.0001},  # parts that sum past the whole
        {  # one's own key: parts past the fee and the upstream's charge together
            **OPENROUTER_MONEY,
            "is_byok": True,
            "cost": 0.00001,
            "cost_details": {
                "upstream_inference_cost": 0.0001,
                "upstream_inference_prompt_cost": 0.000129,
                "upstream_inference_completions_cost": 0.00054,
            },
        },
        {**OPENROUTER_MONEY, "cost_details": {"upstream_inference_prompt_cost": 0.000129}},
        {**OPENROUTER_MONEY, "is_byok": True},  # the upstream's charge not given
    ],
)
def test_a_cost_not_reported_in_full_is_priced_by_genai_prices(money: dict[str, Any]) -> None:
    from allama.adapters.openai_compat import decode_body

    model = "openai/gpt-4o-mini"
    decoded = decode_body(_routed_body(_openrouter_usage(money), model), provider="openrouter")
    cost = record(decoded).cost
    assert cost is not None
    assert cost.source == f"genai-prices {VERSION}, openrouter/{model}"
    usage = Usage(input_tokens=43, output_tokens=36)
    assert cost.total == sum(expected("openrouter", model, usage))


def test_a_reported_cost_written_as_text_is_read() -> None:
    from allama.adapters.openai_compat import decode_body

    money = {**OPENROUTER_MONEY, "cost": "0.000669"}
    decoded = decode_body(_routed_body(_openrouter_usage(money)), provider="openrouter")
    cost = record(decoded).cost
    assert cost is not None and cost.total == Decimal("0.000669")
    assert cost.source == "as openrouter reported, anthropic/claude-sonnet-4.5"


# A call that searched the web through OpenRouter (its `web` plugin, an `:online` model).

_SEARCHED = {"server_tool_use": {"web_search_requests": 2}}
_WEB_FEE = "without its parts (`cost_details`, `is_byok`)"


@pytest.mark.parametrize(
    ("money", "told"),
    [
        ({"cost": 0.0235}, f"reported a total of 0.023500 {_WEB_FEE}"),
        ({"cost": 0.0235, "is_byok": False}, f"reported a total of 0.023500 {_WEB_FEE}"),
        ({}, "did not say what the call cost"),
    ],
)
def test_a_web_search_openrouter_did_not_report_in_full_has_no_cost(
    money: dict[str, Any], told: str
) -> None:
    from allama.adapters.openai_compat import decode_body
    from allama.adapters.openai_compat._sse import decode_stream
    from allama.stream import StreamCollector

    usage = {"prompt_tokens": 1_000, "completion_tokens": 100, "total_tokens": 1_100, **money}
    # OpenRouter says how many searches it ran: the tokens' list price would leave them out.
    counted = _routed_body({**usage, **_SEARCHED}, "openai/gpt-4o")
    decoded = decode_body(counted, provider="openrouter")
    reason = (
        f"openrouter billed 2 web searches beyond the tokens, which genai-prices has no "
        f"price for, and {told}"
    )
    assert (record(decoded).cost, record(decoded).cost_missing) == (None, reason)
    streamed = json.loads(counted)
    chunk = {**streamed, "object": "chat.completion.chunk", "choices": []}
    collector = StreamCollector()
    collector.provider = "openrouter"
    for event in decode_stream(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()):
        collector.push(event)
    assert record(collector.finish()).cost_missing == reason
    # An `:online` model (the body naming none, the one asked for is the response's).
    online = json.loads(_routed_body(usage, "openai/gpt-4o"))
    del online["model"]
    decoded = decode_body(json.dumps(online), provider="openrouter", model="openai/gpt-4o:online")
    assert record(decoded).cost_missing == (
        "openai/gpt-4o:online searches the web on every call (OpenRouter's `web` plugin), "
        f"billed per result beyond its tokens at prices genai-prices does not hold, and "
        f"openrouter {told}"
    )


def test_a_web_search_openrouter_reported_in_full_costs_what_it_reported() -> None:
    from allama.adapters.openai_compat import decode_body

    money = {
        "cost": 0.0235,
        "is_byok": False,
        "cost_details": {
            "upstream_inference_cost": None,
            "upstream_inference_prompt_cost": 0.0025,
            "upstream_inference_completions_cost": 0.001,
        },
    }
    usage = {"prompt_tokens": 1_000, "completion_tokens": 100, **money, **_SEARCHED}
    for model in ("openai/gpt-4o:online", "openai/gpt-4o"):
        decoded = decode_body(_routed_body(usage, model), provider="openrouter")
        assert record(decoded).cost == Cost(
            input=Decimal("0.0025"),
            output=Decimal("0.001"),
            total=Decimal("0.0235"),
            source=f"as openrouter reported, {model}",
        )


def test_an_endpoint_of_ones_own_that_reports_its_cost_has_that_cost() -> None:
    from allama.adapters.openai_compat import decode_body

    usage = _openrouter_usage(OPENROUTER_MONEY)
    decoded = decode_body(_routed_body(usage), provider="openai-compatible")
    cost = record(decoded).cost
    assert cost is not None and cost.total == Decimal("0.000669")
    assert cost.source == "as openai-compatible reported, anthropic/claude-sonnet-4.5"


def test_passes_priced_two_ways_name_both_sources() -> None:
    from allama.adapters.openai_compat import decode_body

    reported = decode_body(_routed_body(_openrouter_usage(OPENROUTER_MONEY)), provider="openrouter")
    listed = Usage(input_tokens=1_000, output_tokens=100)
    metadata = record(reported, reported, response(usage=listed))
    assert metadata.cost is not None
    assert metadata.cost.total == Decimal("0.001338") + sum(expected("openai", "gpt-4o", listed))
    assert metadata.cost.source == (
        "as openrouter reported, anthropic/claude-sonnet-4.5; "
        f"genai-prices {VERSION}, openai/gpt-4o"
    )


def test_a_reported_cost_has_no_batch_price() -> None:
    from allama.adapters.openai_compat import decode_body

    decoded = decode_body(_routed_body(_openrouter_usage(OPENROUTER_MONEY)), provider="openrouter")
    assert record(decoded).priced(batch=True) == prices.REPORTED_ONLY


def test_a_failed_call_costs_what_its_body_says_it_cost() -> None:
    from allama.adapters.openai_compat import decode_body

    failed = json.loads(_routed_body(_openrouter_usage(OPENROUTER_MONEY)))
    failed["choices"][0].update(
        finish_reason="error", error={"code": 502, "message": "Upstream error"}
    )
    with pytest.raises(Error) as raised:
        decode_body(json.dumps(failed), provider="openrouter", model="openrouter/auto")
    cost = _failed_call(raised.value, "openrouter/auto").cost
    assert cost is not None and cost.total == Decimal("0.000669")
    assert cost.source == "as openrouter reported, anthropic/claude-sonnet-4.5"


def test_a_failed_responses_body_and_stream_cost_what_they_say() -> None:
    from allama.adapters.openai_responses import decode_body
    from allama.adapters.openai_responses._sse import ResponsesStreamDecoder
    from allama.errors import paid_for
    from allama.mock import MockStreamingProvider
    from allama.stream import with_paid

    money = {
        "cost": 0.0000113,
        "is_byok": False,
        "cost_details": {
            "upstream_inference_cost": None,
            "upstream_inference_input_cost": 0.0000039,
            "upstream_inference_output_cost": 0.0000074,
        },
    }
    failed = {
        "id": "gen-1",
        "object": "response",
        "status": "failed",
        "error": {"code": "server_error", "message": "The model failed."},
        "model": "openai/gpt-oss-20b",
        "output": [],
        "usage": {"input_tokens": 78, "output_tokens": 37, "total_tokens": 115, **money},
    }
    with pytest.raises(Error) as raised:
        decode_body(json.dumps(failed), provider="openrouter", model="openai/gpt-oss-20b")
    cost = _failed_call(raised.value, "openai/gpt-oss-20b").cost
    assert cost is not None and cost.total == Decimal("0.0000113")
    # Streamed: the stream's error, as a wrapper reads what was paid from it.
    created = {**failed, "status": "in_progress", "usage": None}
    data = "".join(
        f"event: {kind}\ndata: {json.dumps({'type': kind, 'response': body})}\n\n"
        for kind, body in (("response.created", created), ("response.failed", failed))
    ).encode()
    events: list[Any] = []
    with pytest.raises(Error) as raised:
        events.extend(ResponsesStreamDecoder(provider="openrouter").feed(data))
    stream = MockStreamingProvider([[*events, raised.value]], name="openrouter").chat_stream(
        ChatRequest("openai/gpt-oss-20b").user("?")
    )
    with pytest.raises(Error) as streamed:
        for _ in stream:
            pass
    entries = paid_for(with_paid(streamed.value, stream))
    assert [entry.get("usage_cost") for entry in entries] == [money]
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    metadata.record_paid(entries)
    assert metadata.cost is not None and metadata.cost.total == Decimal("0.0000113")


def test_an_online_model_is_openrouters_alone_and_a_count_of_searches_may_be_written_whole() -> (
    None
):
    from allama._prices import _searched_unreported

    # `:online` names OpenRouter's web plugin; another server's tag of that name is no search.
    assert _searched_unreported("ollama", "mymodel:online", {}) == ""
    assert _searched_unreported("openrouter", "openai/gpt-4o:online", {}).startswith(
        "openai/gpt-4o:online searches the web on every call"
    )
    # A proxy's `2.0` is two searches, as an integer count is.
    counted = {"server_tool_use": {"web_search_requests": 2.0}, "cost": 0.0235}
    assert _searched_unreported("openrouter", "openai/gpt-4o", counted).startswith(
        "openrouter billed 2 web searches beyond the tokens"
    )
