"""Anthropic's server-side refusal fallback: the usage and the cost of each attempt.

With `fallbacks` (beta `server-side-fallback-2026-06-01`) a request a model declines is
re-run on a fallback model in the same round trip. `usage.iterations` lists each attempt
with its own model: a declined one as a `message` entry, the one that served as a
`fallback_message` entry, whose counts the top level gives. Each attempt is billed at the
rates of the model that ran it, and one declined before any output is not billed at all:
the usage is the serving attempt's (tokens of two models are never summed), the cost each
billed attempt's at its own model's price, or none, with the reason, where one has no
known price. Each case is run through the preset over a mock transport, as a body and as a
stream, sync and async.
"""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Any

import pytest
from tests._recording import provider

from allama import ChatRequest, ChatResponse, ExtractionMetadata, ExtractionMode, Usage

genai_prices = pytest.importorskip("genai_prices")
VERSION = genai_prices.__version__

FLAVOURS = pytest.mark.parametrize(
    ("streamed", "flavour"),
    [(False, "sync"), (True, "sync"), (False, "async"), (True, "async")],
    ids=["body", "stream", "async-body", "async-stream"],
)


def _record(response: ChatResponse) -> ExtractionMetadata:
    """The record of one pass of `response`, which prices it."""
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    metadata.record_pass(response, lambda warning: warning)
    return metadata


def _stream_of(message: dict[str, Any]) -> bytes:
    """`message` as Anthropic streams it: its input counts at the start, each block whole at
    its start, the whole usage (`iterations` with it) in `message_delta`."""
    usage = message["usage"]
    start_usage = {k: v for k, v in usage.items() if k not in ("output_tokens", "iterations")}
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**start_usage, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append({"type": "message_delta", "delta": delta, "usage": usage})
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _answer(message: dict[str, Any], *, streamed: bool, flavour: str) -> ChatResponse:
    answer: Any = _stream_of(message) if streamed else message
    target, _ = provider("anthropic", (200, answer))
    request = ChatRequest("claude-opus-5").user("go on")

    async def run_async() -> ChatResponse:
        async with target:
            if not streamed:
                return await target.achat(request)
            stream = await target.achat_stream(request)
            async with stream:
                return await stream.response()

    if flavour == "async":
        return asyncio.run(run_async())
    if streamed:
        return target.chat_stream(request).response()
    return target.chat(request)


def _attempt(kind: str, model: str, uncached: int, output: int, **cached: int) -> dict[str, Any]:
    """One entry of `usage.iterations`: `read` and `written` (to the one-hour cache)."""
    read, written = cached.get("read", 0), cached.get("written", 0)
    entry: dict[str, Any] = {
        "type": kind,
        "model": model,
        "input_tokens": uncached,
        "output_tokens": output,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }
    if written:
        entry["cache_creation"] = {
            "ephemeral_5m_input_tokens": 0,
            "ephemeral_1h_input_tokens": written,
        }
    return entry


SERVED = _attempt("fallback_message", "claude-opus-4-1-20250805", 412, 264)


def _fallen_back(*declined: dict[str, Any], served: dict[str, Any] = SERVED) -> dict[str, Any]:
    """A message served by `served` after the `declined` attempts: the top-level usage is
    the serving attempt's, as Anthropic gives it."""
    top = {key: value for key, value in served.items() if key not in ("type", "model")}
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": served["model"],
        "content": [
            {
                "type": "fallback",
                "from": {"model": declined[-1]["model"]},
                "to": {"model": served["model"]},
            },
            {"type": "text", "text": "Hi! How can I help you today?"},
        ],
        "stop_reason": "end_turn",
        "stop_details": None,
        "usage": {**top, "iterations": [*declined, served]},
    }


@FLAVOURS
def test_an_attempt_declined_before_any_output_is_neither_counted_nor_priced(
    streamed: bool, flavour: str
) -> None:
    # The probe's message: claude-opus-5 declined, claude-opus-4-1 served.
    declined = _attempt("message", "claude-opus-5", 535, 0)
    response = _answer(_fallen_back(declined), streamed=streamed, flavour=flavour)
    assert response.model == "claude-opus-4-1-20250805"
    # Not 947 input tokens: the declined attempt's 535 are another model's, and not billed.
    assert response.usage == Usage(
        input_tokens=412, output_tokens=264, cache_read_tokens=0, cache_write_tokens=0
    )
    assert response.warnings == ()
    record = _record(response)
    assert record.cost is not None, record.cost_missing
    # 412 input tokens at $15 and 264 output tokens at $75 a million (not $0.034005).
    assert (record.cost.input, record.cost.output, record.cost.total) == (
        Decimal("0.00618"),
        Decimal("0.0198"),
        Decimal("0.02598"),
    )
    assert record.cost.source == f"genai-prices {VERSION}, anthropic/claude-opus-4-1"


@FLAVOURS
def test_an_attempt_declined_after_output_is_priced_at_its_own_model(
    streamed: bool, flavour: str
) -> None:
    chain = (
        # Declined before any output: free.
        _attempt("message", "claude-fable-5", 535, 0),
        # Declined mid-answer: billed at claude-opus-5's rates, its cache use with it.
        _attempt("message", "claude-opus-5", 40, 120, read=10000, written=2000),
    )
    served = _attempt("fallback_message", "claude-opus-4-8", 412, 264)
    response = _answer(_fallen_back(*chain, served=served), streamed=streamed, flavour=flavour)
    # The serving attempt's alone: the declined ones ran other models.
    assert response.usage == Usage(
        input_tokens=412, output_tokens=264, cache_read_tokens=0, cache_write_tokens=0
    )
    record = _record(response)
    assert record.usage == response.usage
    assert record.cost is not None, record.cost_missing
    # claude-opus-4-8: 412 in at $5 ($0.00206), 264 out at $25 ($0.0066) a million.
    # claude-opus-5: 40 in at $5, 10,000 cache reads at $0.50, 2,000 one-hour cache writes
    # at $10 ($0.0252); 120 out at $25 ($0.003) a million.
    assert (record.cost.input, record.cost.output, record.cost.total) == (
        Decimal("0.02726"),
        Decimal("0.0096"),
        Decimal("0.03686"),
    )
    assert record.cost.source == (
        f"genai-prices {VERSION}, anthropic/claude-opus-4-8 + anthropic/claude-opus-5"
    )


@FLAVOURS
def test_a_billed_declined_attempt_of_a_model_without_a_price_has_no_cost(
    streamed: bool, flavour: str
) -> None:
    declined = _attempt("message", "claude-mystery-9", 535, 30)
    response = _answer(_fallen_back(declined), streamed=streamed, flavour=flavour)
    assert response.usage == Usage(
        input_tokens=412, output_tokens=264, cache_read_tokens=0, cache_write_tokens=0
    )
    record = _record(response)
    assert record.cost is None
    assert record.cost_missing == (
        f"genai-prices {VERSION} has no price for 'claude-mystery-9' at anthropic"
    )


def test_an_unbilled_declined_attempt_of_a_model_without_a_price_leaves_the_cost() -> None:
    declined = _attempt("message", "claude-mystery-9", 535, 0)
    record = _record(_answer(_fallen_back(declined), streamed=False, flavour="sync"))
    assert record.cost is not None, record.cost_missing
    assert record.cost.total == Decimal("0.02598")


def test_a_declined_attempt_without_its_counts_has_no_cost_with_the_reason() -> None:
    declined = {"type": "message", "model": "claude-opus-5"}
    response = _answer(_fallen_back(declined), streamed=False, flavour="sync")
    assert response.usage == Usage(
        input_tokens=412, output_tokens=264, cache_read_tokens=0, cache_write_tokens=0
    )
    record = _record(response)
    assert record.cost is None
    assert record.cost_missing == (
        "the attempts a server-side fallback declined (1), billed at their own model's rates "
        "where they had output, whose token counts the usage does not give"
    )


def test_a_paid_failure_prices_its_declined_attempts_as_the_answer_does() -> None:
    from allama.errors import Error, paid_for

    chain = (_attempt("message", "claude-opus-5", 40, 120, read=10000, written=2000),)
    served = _attempt("fallback_message", "claude-opus-4-8", 412, 264)
    message = _fallen_back(*chain, served=served)
    # A message without its `content` list cannot be read, but its usage was billed.
    unreadable = {key: value for key, value in message.items() if key != "content"}
    target, _ = provider("anthropic", (200, unreadable))
    with pytest.raises(Error) as raised:
        target.chat(ChatRequest("claude-opus-5").user("go on"))
    failed = ExtractionMetadata.new(ExtractionMode.NATIVE)
    failed.record_paid(paid_for(raised.value))
    assert failed.usage == Usage(
        input_tokens=412, output_tokens=264, cache_read_tokens=0, cache_write_tokens=0
    )
    assert failed.cost is not None, failed.cost_missing
    assert failed.cost.total == Decimal("0.03686")


@pytest.mark.filterwarnings("ignore:Unsupported usage key")
def test_a_declined_attempt_s_count_not_of_its_form_has_no_cost_rather_than_an_error() -> None:
    from allama._prices import price

    usage = Usage(input_tokens=412, output_tokens=264)
    for key in ("declined_pass:bad", "declined_pass:1:weird_tokens:claude-opus-5"):
        # As a record read back might hold it: no cost, never an exception nor a free pass.
        priced = price([("anthropic", "claude-opus-4-8", usage, 1.8e9, False, {key: 30})])
        assert priced == (
            f"genai-prices {VERSION} has no price for the {key.replace('_', ' ')} of "
            "anthropic/claude-opus-4-8"
        )
