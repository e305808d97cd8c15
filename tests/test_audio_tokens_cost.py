"""Audio tokens in the OpenAI dialect (Chat Completions) are priced at the model's audio prices.

OpenAI's audio models (`gpt-audio`, `gpt-4o-audio-preview`, ...) report their audio tokens
in `prompt_tokens_details.audio_tokens` and `completion_tokens_details.audio_tokens`, each a
part of the count beside it, and bill them at several times the text's price. The expected
figures are genai-prices' own calculation (`extract_usage(...).calc_price()`) and the same
figure worked out here from the model's per-million prices, so they stay exact whichever
data version is installed. A model genai-prices has no audio price for has no cost, with
the reason, rather than its audio priced as text (which is what genai-prices answers).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from allama import ChatResponse, Error, ExtractionMetadata, ExtractionMode, Usage
from allama import _prices as prices
from allama.adapters.openai_compat import decode_body
from allama.adapters.openai_compat._sse import decode_stream
from allama.errors import REPORTED_EXTRAS_KEY, paid_for
from allama.stream import StreamCollector
from allama.types._response import AUDIO_TOKENS_KEY, billed_extras

genai_prices = pytest.importorskip("genai_prices")
from genai_prices.data_snapshot import get_snapshot  # noqa: E402

VERSION = genai_prices.__version__
MILLION = Decimal(1_000_000)

AUDIO_USAGE: dict[str, Any] = {
    "prompt_tokens": 2_000,
    "completion_tokens": 900,
    "total_tokens": 2_900,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 1_500, "text_tokens": 500},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 800, "text_tokens": 100},
}
AUDIO_KEPT = {"input_audio_tokens": 1_500, "output_audio_tokens": 800}


def _body(model: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"name": "Ada"}'},
                "finish_reason": "stop",
            }
        ],
        "usage": AUDIO_USAGE if usage is None else usage,
    }


def record(*responses: ChatResponse) -> ExtractionMetadata:
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    for one in responses:
        metadata.record_pass(one, lambda warning: warning)
    return metadata


def _model_price(provider_id: str, model: str) -> Any:
    snapshot = get_snapshot()
    provider = snapshot.find_provider(None, provider_id, None)
    _, found = snapshot.find_provider_model(model, provider, None, None)
    return found.get_prices(datetime.now(tz=UTC), None)


def _their_price(body: dict[str, Any], provider_id: str) -> Any:
    """genai-prices' own answer for the body, read by its own extractor."""
    return genai_prices.extract_usage(body, provider_id=provider_id, api_flavor="chat").calc_price()


def _worked_out(price: Any, usage: dict[str, Any]) -> tuple[Decimal, Decimal]:
    """Text and audio tokens each at their own per-million price (no cached tokens)."""
    audio_in = usage["prompt_tokens_details"]["audio_tokens"]
    audio_out = usage["completion_tokens_details"]["audio_tokens"]
    input_price = (
        price.input_mtok * (usage["prompt_tokens"] - audio_in) + price.input_audio_mtok * audio_in
    ) / MILLION
    output_price = (
        price.output_mtok * (usage["completion_tokens"] - audio_out)
        + price.output_audio_mtok * audio_out
    ) / MILLION
    return input_price, output_price


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o-audio-preview",
        "gpt-4o-audio-preview-2024-12-17",
        "gpt-4o-mini-audio-preview",
        "gpt-audio",
        "gpt-audio-2025-08-28",
        "gpt-audio-mini",
        "gpt-realtime",
    ],
)
def test_audio_tokens_are_priced_at_the_models_audio_prices(model: str) -> None:
    body = _body(model)
    answered = decode_body(json.dumps(body), provider="openai")
    assert answered.provider_data == {"openai": {AUDIO_TOKENS_KEY: AUDIO_KEPT}}
    # The counts are as before: the audio is part of them.
    assert answered.usage == Usage(
        input_tokens=2_000, output_tokens=900, reasoning_tokens=0, cache_read_tokens=0
    )
    metadata = record(answered)
    price = _model_price("openai", model)
    if price.input_audio_mtok is None or price.output_audio_mtok is None:
        # No audio price: no cost, rather than its audio at the text's price (which is what
        # genai-prices itself answers).
        assert metadata.cost is None
        found = prices.cost_of("openai", model, answered.usage)
        assert isinstance(found, prices.Cost)
        ref = found.source.rsplit(", ", 1)[1]
        assert metadata.cost_missing == (
            f"genai-prices {VERSION} has no price for the input audio and output audio of {ref}"
        )
        assert _their_price(body, "openai").total_price == found.total  # text prices
        return
    cost = metadata.cost
    theirs = _their_price(body, "openai")
    assert cost is not None
    assert (cost.input, cost.output, cost.total) == (
        theirs.input_price,
        theirs.output_price,
        theirs.total_price,
    )
    input_price, output_price = _worked_out(price, AUDIO_USAGE)
    assert (cost.input, cost.output) == (input_price, output_price)
    assert cost.total == input_price + output_price
    # Several times what the same counts cost as text.
    as_text = prices.cost_of("openai", model, answered.usage)
    assert isinstance(as_text, prices.Cost) and cost.total > 3 * as_text.total


def test_gpt_audio_at_genai_prices_0_2_3() -> None:
    """The figure of the report, by hand: 500 text tokens in at $2.50 a million and 1,500
    audio at $32, 100 text out at $10 and 800 audio at $64."""
    if VERSION != "0.2.3":
        pytest.skip("written out from genai-prices 0.2.3's data")
    answered = decode_body(json.dumps(_body("gpt-audio-2025-08-28")), provider="openai")
    cost = record(answered).cost
    assert cost is not None
    assert (cost.input, cost.output, cost.total) == (
        Decimal("0.04925"),
        Decimal("0.0522"),
        Decimal("0.10145"),
    )
    assert cost.source == f"genai-prices {VERSION}, openai/gpt-audio"


def test_a_stream_is_priced_by_its_final_usage_chunk() -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": '{"name": "Ada"}'}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": AUDIO_USAGE},
    ]
    data = "".join(
        f"data: {json.dumps({'id': 'c', 'model': 'gpt-audio-2025-08-28', **chunk})}\n\n"
        for chunk in chunks
    )
    collector = StreamCollector()
    for event in decode_stream((data + "data: [DONE]\n\n").encode(), provider="openai"):
        collector.push(event)
    streamed = collector.finish().model_copy(update={"provider": "openai"})
    body = decode_body(json.dumps(_body("gpt-audio-2025-08-28")), provider="openai")
    assert streamed.provider_data == body.provider_data == {"openai": {"audio_tokens": AUDIO_KEPT}}
    cost = record(streamed).cost
    assert cost is not None and cost == record(body).cost
    assert cost.total == _their_price(_body("gpt-audio-2025-08-28"), "openai").total_price


def test_a_later_usage_without_audio_is_the_calls() -> None:
    """A stream reporting its usage twice (xAI sends one on every chunk) is priced at the
    last: audio tokens an earlier usage had are not kept past it."""
    text_usage = {
        "prompt_tokens": 2_000,
        "completion_tokens": 900,
        "prompt_tokens_details": {"audio_tokens": 0},
        "completion_tokens_details": {"audio_tokens": 0},
    }
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "{}"}}], "usage": AUDIO_USAGE},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": text_usage},
    ]
    data = "".join(
        f"data: {json.dumps({'id': 'c', 'model': 'gpt-audio', **chunk})}\n\n" for chunk in chunks
    )
    collector = StreamCollector()
    for event in decode_stream(data.encode(), provider="openai"):
        collector.push(event)
    streamed = collector.finish().model_copy(update={"provider": "openai"})
    assert billed_extras(streamed.provider_data) is None
    assert record(streamed).cost == prices.cost_of(
        "openai", "gpt-audio", Usage(input_tokens=2_000, output_tokens=900)
    )


def test_no_audio_tokens_leave_no_key_and_the_text_price() -> None:
    """Every OpenAI usage carries `audio_tokens: 0`: nothing kept, priced as before."""
    usage = {
        "prompt_tokens": 2_000,
        "completion_tokens": 900,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    answered = decode_body(json.dumps(_body("gpt-4o-2024-08-06", usage)), provider="openai")
    assert answered.provider_data == {}
    cost = record(answered).cost
    assert cost is not None
    assert cost.total == _their_price(_body("gpt-4o-2024-08-06", usage), "openai").total_price


def test_azure_prices_audio_at_its_audio_prices() -> None:
    body = _body("gpt-audio")
    answered = decode_body(json.dumps(body), provider="azure-openai")
    assert answered.provider_data == {"azure-openai": {"audio_tokens": AUDIO_KEPT}}
    cost = record(answered).cost
    theirs = _their_price(body, "azure")
    assert cost is not None
    assert (cost.input, cost.output, cost.total) == (
        theirs.input_price,
        theirs.output_price,
        theirs.total_price,
    )
    assert cost.source == f"genai-prices {VERSION}, azure/gpt-audio"


def test_openrouter_audio_without_an_audio_price_has_no_cost_unless_it_says_it() -> None:
    body = _body("openai/gpt-audio")
    answered = decode_body(json.dumps(body), provider="openrouter")
    assert answered.provider_data == {"openrouter": {"audio_tokens": AUDIO_KEPT}}
    price = _model_price("openrouter", "openai/gpt-audio")
    if price.input_audio_mtok is None:
        assert record(answered).cost_missing == (
            f"genai-prices {VERSION} has no price for the input audio and output audio of "
            "openrouter/openai/gpt-audio"
        )
    # What OpenRouter says the call cost, in full, is its cost.
    usage = {
        **AUDIO_USAGE,
        "cost": 0.10145,
        "is_byok": False,
        "cost_details": {
            "upstream_inference_cost": None,
            "upstream_inference_prompt_cost": 0.04925,
            "upstream_inference_completions_cost": 0.0522,
        },
    }
    reported = decode_body(json.dumps(_body("openai/gpt-audio", usage)), provider="openrouter")
    cost = record(reported).cost
    assert cost is not None and cost.total == Decimal("0.10145")
    assert cost.source == "as openrouter reported, openai/gpt-audio"


def test_groqs_usage_in_x_groq_keeps_its_audio_tokens() -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "{}"}, "finish_reason": "stop"}]},
        {"choices": [], "x_groq": {"id": "req_1", "usage": AUDIO_USAGE}},
    ]
    data = "".join(
        f"data: {json.dumps({'id': 'c', 'model': 'm', **chunk})}\n\n" for chunk in chunks
    )
    collector = StreamCollector()
    for event in decode_stream(data.encode(), provider="groq"):
        collector.push(event)
    assert collector.finish().provider_data == {"groq": {"audio_tokens": AUDIO_KEPT}}


def test_cached_tokens_beside_audio_ones() -> None:
    """The Chat Completions usage does not say how many cached tokens are audio: priced
    where the model prices no cache reads apart (the split changes nothing), no cost with
    the reason where it does (genai-prices itself refuses such a usage there)."""
    usage = {
        **AUDIO_USAGE,
        "prompt_tokens_details": {"cached_tokens": 400, "audio_tokens": 1_500},
    }
    for model in ("gpt-audio", "gpt-realtime"):
        body = _body(model, usage)
        metadata = record(decode_body(json.dumps(body), provider="openai"))
        price = _model_price("openai", model)
        if price.cache_read_mtok is None and price.cache_audio_read_mtok is None:
            cost = metadata.cost
            assert cost is not None
            assert cost.total == _their_price(body, "openai").total_price
            assert (cost.input, cost.output) == _worked_out(price, usage)
        else:
            assert metadata.cost is None
            assert metadata.cost_missing == (
                "the usage does not say how many of its 400 cached tokens are audio, which "
                f"the prices of openai/{model} need"
            )


def test_an_answer_that_fails_keeps_its_audio_tokens() -> None:
    """A body that does not fit the completion shape was still billed for its audio."""
    body = {**_body("gpt-audio-2025-08-28"), "choices": "nope"}
    with pytest.raises(Error) as raised:
        decode_body(json.dumps(body), provider="openai")
    error = raised.value
    assert error.context.metadata[REPORTED_EXTRAS_KEY] == AUDIO_KEPT
    error.with_provider("openai")
    paid = paid_for(error)
    assert paid[0]["billed_extras"] == AUDIO_KEPT
    metadata = ExtractionMetadata.new(ExtractionMode.NATIVE)
    metadata.record_paid(paid)
    cost = metadata.cost
    assert cost is not None
    assert cost.total == _their_price(_body("gpt-audio-2025-08-28"), "openai").total_price


def test_billed_extras_reads_audio_tokens_in_any_namespace() -> None:
    assert billed_extras({"azure-openai": {"audio_tokens": {"input_audio_tokens": 5}}}) == {
        "input_audio_tokens": 5
    }
    assert billed_extras({"openai": {"audio_tokens": {"input_audio_tokens": 0}}}) is None
    assert billed_extras({"openai": {"audio_tokens": {"input_audio_tokens": True}}}) is None
    assert billed_extras({"openai": {"audio_tokens": {"image_tokens": 5}}}) is None


def test_gemini_audio_without_a_price_of_its_own_is_still_priced_as_text() -> None:
    """Google's price data gives audio a price only where it costs more than text."""
    usage = Usage(input_tokens=10_100, output_tokens=200)
    charged = prices.price(
        [("gemini", "gemini-2.5-pro", usage, 1.8e9, False, {"input_audio_tokens": 10_000})]
    )
    assert charged == prices.cost_of(
        "gemini", "gemini-2.5-pro", usage, at=datetime.fromtimestamp(1.8e9, tz=UTC)
    )
    # The same extras at OpenAI, for a model without an audio price: no cost.
    unpriced = prices.price(
        [("openai", "gpt-4o-audio-preview", usage, 1.8e9, False, {"input_audio_tokens": 10_000})]
    )
    price = _model_price("openai", "gpt-4o-audio-preview")
    if price.input_audio_mtok is None:
        assert unpriced == (
            f"genai-prices {VERSION} has no price for the input audio of "
            "openai/gpt-4o-audio-preview"
        )
