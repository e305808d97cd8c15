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
