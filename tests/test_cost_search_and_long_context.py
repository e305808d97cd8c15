"""Charges genai-prices' data leaves out get no cost, with the reason, rather than a figure
far below the bill: OpenAI's search models in Chat Completions search on every call, billed
per call beside the tokens; Claude Sonnet 4 over 200,000 input tokens (its 1M context
window) is billed at long-context rates its prices hold no tier for."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from tests._recording import provider

from allama import ChatRequest, ChatResponse, ExtractionMetadata, ExtractionMode


def _record(response: ChatResponse) -> ExtractionMetadata:
    """The record of one pass of `response`, which prices it."""
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    metadata.record_pass(response, lambda warning: warning)
    return metadata


def _openai(model: str) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100},
    }


@pytest.mark.parametrize(
    "model",
    ["gpt-4o-mini-search-preview-2025-03-11", "gpt-4o-search-preview", "gpt-5-search-api"],
)
def test_a_search_model_answer_has_no_cost_with_the_reason(model: str) -> None:
    target, _ = provider("openai", (200, _openai(model)))
    response = _record(target.chat(ChatRequest(model).user("news?")))
    assert response.cost is None
    reason = response.cost_missing
    assert reason is not None
    assert reason.startswith(f"{model} searches the web on every call, billed per call")


def test_a_model_that_does_not_search_is_priced() -> None:
    target, _ = provider("openai", (200, _openai("gpt-4o-mini")))
    response = _record(target.chat(ChatRequest("gpt-4o-mini").user("Hi")))
    assert response.cost is not None and response.cost.total > 0


def _claude(model: str, uncached: int) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": uncached,
            "output_tokens": 1000,
            "cache_read_input_tokens": 60000,
            "cache_creation_input_tokens": 0,
        },
    }


def test_sonnet_4_over_200k_input_tokens_has_no_cost_with_the_reason() -> None:
    target, _ = provider("anthropic", (200, _claude("claude-sonnet-4-20250514", 150000)))
    response = _record(target.chat(ChatRequest("claude-sonnet-4-20250514").user("Hi")))
    assert response.cost is None
    assert response.cost_missing is not None
    assert response.cost_missing.startswith(
        "210000 input tokens are over 200,000, billed at the model's long-context rates"
    )


def test_sonnet_4_within_200k_and_sonnet_4_5_over_it_are_priced() -> None:
    target, _ = provider("anthropic", (200, _claude("claude-sonnet-4-20250514", 100000)))
    response = _record(target.chat(ChatRequest("claude-sonnet-4-20250514").user("Hi")))
    # 100,000 at $3, 60,000 cache reads at $0.30, 1,000 out at $15 a million.
    assert response.cost is not None
    assert response.cost.total == Decimal("0.333")
    target, _ = provider("anthropic", (200, _claude("claude-sonnet-4-5-20250929", 150000)))
    response = _record(target.chat(ChatRequest("claude-sonnet-4-5-20250929").user("Hi")))
    # Over 200,000: every token at the long-context rates genai-prices holds for 4.5.
    assert response.cost is not None
    assert response.cost.total == Decimal("0.9585")


@pytest.mark.parametrize(
    ("preset", "model"),
    [
        ("vertex-anthropic", "claude-sonnet-4@20250514"),
        ("bedrock", "anthropic.claude-sonnet-4-20250514-v1:0"),
        ("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
    ],
)
def test_sonnet_4_and_4_5_over_200k_have_no_cost_wherever_their_prices_hold_no_tier(
    preset: str, model: str
) -> None:
    from datetime import UTC, datetime

    from allama import Usage
    from allama._prices import cost_of

    usage = Usage(input_tokens=250_000, output_tokens=1_000)
    said = cost_of(preset, model, usage, at=datetime(2025, 10, 1, tzinfo=UTC))
    assert isinstance(said, str)
    assert said.startswith("250000 input tokens are over 200,000, billed at the model's")
    # Within the 200,000, the same model has its flat price.
    within = cost_of(
        preset,
        model,
        Usage(input_tokens=100_000, output_tokens=1_000),
        at=datetime(2025, 10, 1, tzinfo=UTC),
    )
    assert not isinstance(within, str)


def _grok(model: str, prompt: int, **money: int) -> dict[str, Any]:
    """xAI's Chat Completions answer to `prompt` input tokens and 1,000 output tokens, with
    what xAI said it cost (`cost_in_usd_ticks`, `num_server_side_tools_used`), if anything."""
    usage = {"prompt_tokens": prompt, "completion_tokens": 1000, "total_tokens": prompt + 1000}
    return {
        "id": "x",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
        ],
        "usage": {**usage, **money},
    }


def _grok_record(model: str, prompt: int, **money: int) -> ExtractionMetadata:
    target, _ = provider("xai", (200, _grok(model, prompt, **money)))
    return _record(target.chat(ChatRequest(model).user("Hi")))


@pytest.mark.parametrize(
    ("model", "priced_as"),
    [
        ("grok-4", "grok-4-0709"),
        ("grok-4-0709", "grok-4-0709"),
        ("grok-4-latest", "grok-4-0709"),
        ("grok-4-fast", "grok-4-fast-reasoning"),
        ("grok-4-fast-reasoning", "grok-4-fast-reasoning"),
        ("grok-4-fast-non-reasoning", "grok-4-fast-non-reasoning"),
        ("grok-4-1-fast", "grok-4-1-fast-reasoning"),
        ("grok-4-1-fast-reasoning", "grok-4-1-fast-reasoning"),
        ("grok-4-1-fast-non-reasoning", "grok-4-1-fast-non-reasoning"),
    ],
)
def test_grok_4_over_128k_input_tokens_without_xais_total_has_no_cost_with_the_reason(
    model: str, priced_as: str
) -> None:
    version = pytest.importorskip("genai_prices").__version__
    metadata = _grok_record(model, 150_000)
    assert metadata.cost is None
    assert metadata.cost_missing == (
        "150000 input tokens are over 128,000, billed at the model's long-context rates, "
        f"which genai-prices {version} does not hold for x-ai/{priced_as}"
    )


def test_grok_4_within_128k_and_models_without_that_tier_are_priced() -> None:
    # 128,000 in at $3 and 1,000 out at $15 a million: within the standard rates.
    within = _grok_record("grok-4-0709", 128_000).cost
    assert within is not None and within.total == Decimal("0.399")
    # Grok 3 (a 131,072-token window) and Grok Code Fast have no long-context rates.
    grok_3 = _grok_record("grok-3", 130_000).cost
    assert grok_3 is not None and grok_3.total == Decimal("0.405")  # $3 in, $15 out
    code = _grok_record("grok-code-fast-1", 150_000).cost
    assert code is not None and code.total == Decimal("0.0315")  # $0.20 in, $1.50 out
    # Grok 4.3's long-context rates (from 200,000) are in the price data: priced by them.
    grok_4_3 = _grok_record("grok-4.3", 250_000).cost
    assert grok_4_3 is not None and grok_4_3.total == Decimal("0.63")  # $2.50 in, $5 out


def test_grok_4_over_128k_with_xais_total_is_judged_by_that_total() -> None:
    version = pytest.importorskip("genai_prices").__version__
    # The whole bill at the long-context rates ($6 in, $30 out a million), in ticks.
    billed = (150_000 * 6 + 1_000 * 30) * 10_000
    alone = _grok_record("grok-4-0709", 150_000, cost_in_usd_ticks=billed)
    assert alone.cost is None
    assert alone.cost_missing == (
        "xai reported a total of 0.930000 for x-ai/grok-4-0709, where genai-prices "
        f"{version} prices its tokens at 0.465000: billed at rates the price data does not "
        "hold (xAI's above 128,000 tokens, say)"
    )
    # With server-side tools, the total xAI reported is the cost's total.
    tools = _grok_record(
        "grok-4-0709", 150_000, cost_in_usd_ticks=billed, num_server_side_tools_used=1
    )
    assert tools.cost is not None and tools.cost.total == Decimal("0.93")
