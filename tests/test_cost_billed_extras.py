"""What a call is billed for above its text tokens, priced where genai-prices has a price
for it and leaving the call without a cost where it has none: Gemini's image, video and
tool-prompt audio tokens, the Responses API's image generation calls.

Extractions run through the provider presets over a mock transport, a body and a stream
each; the expected Gemini figures are genai-prices' own, from its own Gemini usage
extractor run on the same raw `usageMetadata`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from _responses_support import stream_of
from allama import ChatRequest, Cost, Extracted
from allama.transport import Transport

genai_prices = pytest.importorskip("genai_prices")

VERSION = genai_prices.__version__


class Poster(BaseModel):
    title: str


def _provider(preset: str, reply: Callable[[httpx2.Request], bytes], **options: Any) -> Any:
    """A preset over a mock transport: a stream for a streamed request, a body otherwise."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        data = reply(request)
        kind = "text/event-stream" if data.startswith((b"data:", b"event:")) else "application/json"
        return httpx2.Response(200, headers={"content-type": kind}, content=data)

    client = httpx2.Client(transport=httpx2.MockTransport(handle))
    return allama.provider(
        preset, api_key="k", base_url="http://test", transport=Transport(client=client), **options
    )


def _extracted(provider: Any, request: ChatRequest, *, streamed: bool) -> Extracted[Poster]:
    if not streamed:
        return allama.extract(provider, Poster, request)
    with allama.extract_stream(provider, Poster, request) as stream:
        for _ in stream:
            pass
        return stream.finish()


# Gemini: images, video and tool-prompt audio, at genai-prices' own figures.


def _gemini_body(model: str, usage: dict[str, Any]) -> dict[str, Any]:
    parts = [
        {"text": '{"title": "Cat"}'},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    ]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": model,
    }


def _gemini_reply(body: dict[str, Any]) -> Callable[[httpx2.Request], bytes]:
    """The body, or streamed: a first chunk with the input counts and a running output
    count (its output details not final), then the finishing chunk with the whole usage."""
    usage = body["usageMetadata"]
    first = {
        "candidates": [{"content": {"role": "model", "parts": []}, "index": 0}],
        "usageMetadata": {
            **{key: value for key, value in usage.items() if "candidates" not in key},
            "candidatesTokenCount": 3,
            "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 3}],
        },
        "modelVersion": body["modelVersion"],
    }

    def reply(request: httpx2.Request) -> bytes:
        if "streamGenerateContent" not in request.url.path:
            return json.dumps(body).encode()
        return "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in (first, body)).encode()

    return reply


def _genai_prices_cost(body: dict[str, Any]) -> Any:
    """genai-prices' price of a Gemini response, from its own usage extractor."""
    extracted = genai_prices.extract_usage(body, provider_id="google")
    return genai_prices.calc_price(extracted.usage, body["modelVersion"], provider_id="google")


def _gemini_cost(body: dict[str, Any], *, streamed: bool) -> tuple[Cost | None, str | None]:
    provider = _provider("gemini", _gemini_reply(body))
    request = (
        ChatRequest(body["modelVersion"])
        .user("Draw a cat poster and give its title")
        .with_option_json("gemini", {"generationConfig": {"responseModalities": ["TEXT", "IMAGE"]}})
    )
    metadata = _extracted(provider, request, streamed=streamed).metadata
    return metadata.cost, metadata.cost_missing


DRAWN: dict[str, Any] = {
    "promptTokenCount": 10,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 10}],
    "candidatesTokenCount": 1300,
    "candidatesTokensDetails": [
        {"modality": "IMAGE", "tokenCount": 1290},
        {"modality": "TEXT", "tokenCount": 10},
    ],
    "totalTokenCount": 1310,
}


@pytest.mark.parametrize("streamed", [False, True])
def test_a_drawn_image_costs_its_image_price(streamed: bool) -> None:
    body = _gemini_body("gemini-2.5-flash-image", DRAWN)
    cost, missing = _gemini_cost(body, streamed=streamed)
    theirs = _genai_prices_cost(body)
    assert missing is None and cost is not None
    assert (cost.input, cost.output, cost.total) == (
        theirs.input_price,
        theirs.output_price,
        theirs.total_price,
    )
    # 10 input tokens at $0.30 a million, 10 text at $2.50, the 1,290 of the image at $30
    # (where they were priced as text: $0.003253).
    assert cost.total == Decimal("0.038728")
    assert cost.source == f"genai-prices {VERSION}, google/gemini-2.5-flash-image"


@pytest.mark.parametrize("streamed", [False, True])
def test_a_drawn_image_without_an_image_price_has_no_cost(streamed: bool) -> None:
    # genai-prices prices this model as gemini-2.0-flash, which has no image output price:
    # its images (billed by Google at $0.039 each) would count as text.
    body = _gemini_body("gemini-2.0-flash-exp-image-generation", DRAWN)
    assert _gemini_cost(body, streamed=streamed) == (
        None,
        f"genai-prices {VERSION} has no price for the output image of google/gemini-2.0-flash",
    )


SEEN: dict[str, Any] = {
    "promptTokenCount": 5_000,
    "promptTokensDetails": [
        {"modality": "TEXT", "tokenCount": 1_000},
        {"modality": "IMAGE", "tokenCount": 1_000},
        {"modality": "DOCUMENT", "tokenCount": 1_000},
        {"modality": "VIDEO", "tokenCount": 2_000},
    ],
    "candidatesTokenCount": 20,
    "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": 20}],
    "totalTokenCount": 5_020,
}


@pytest.mark.parametrize("streamed", [False, True])
def test_input_images_and_video_cost_their_own_prices_where_the_model_has_them(
    streamed: bool,
) -> None:
    # The native-audio model genai-prices prices as gemini-live-2.5-flash: images and video
    # (and documents, read as images) at $3 a million, text at $0.50.
    body = _gemini_body("gemini-2.5-flash-native-audio-preview-09-2025", SEEN)
    cost, missing = _gemini_cost(body, streamed=streamed)
    assert missing is None and cost is not None
    assert cost.total == _genai_prices_cost(body).total_price
    assert cost.input == Decimal("0.0125")  # 1,000 text tokens at $0.50, 4,000 at $3.00


@pytest.mark.parametrize("streamed", [False, True])
def test_input_images_and_video_cost_the_texts_price_where_google_gives_none(
    streamed: bool,
) -> None:
    # Google's input price is one for text, images and video: it gives no image price then.
    body = _gemini_body("gemini-2.5-flash", SEEN)
    cost, missing = _gemini_cost(body, streamed=streamed)
    assert missing is None and cost is not None
    assert cost.total == _genai_prices_cost(body).total_price
    assert cost.input == Decimal("0.0015")  # 5,000 input tokens at $0.30


TOOL_AUDIO: dict[str, Any] = {
    "promptTokenCount": 1_000,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1_000}],
    "toolUsePromptTokenCount": 4_000,
    "toolUsePromptTokensDetails": [{"modality": "AUDIO", "tokenCount": 4_000}],
    "candidatesTokenCount": 10,
    "totalTokenCount": 5_010,
}


@pytest.mark.parametrize("streamed", [False, True])
def test_audio_in_a_tools_prompt_costs_the_audio_price(streamed: bool) -> None:
    body = _gemini_body("gemini-2.5-flash", TOOL_AUDIO)
    cost, missing = _gemini_cost(body, streamed=streamed)
    assert missing is None and cost is not None
    assert cost.total == _genai_prices_cost(body).total_price
    # 1,000 text tokens at $0.30 a million, the tool's 4,000 audio tokens at $1.00, 10
    # output at $2.50 (where the audio was priced as text: $0.001525).
    assert cost.total == Decimal("0.004325")


def test_the_kept_tokens_name_genai_prices_usage() -> None:
    usage = {
        **SEEN,
        "promptTokensDetails": [
            *SEEN["promptTokensDetails"],
            {"modality": "AUDIO", "tokenCount": 7},
        ],
        "toolUsePromptTokenCount": 4_005,
        "toolUsePromptTokensDetails": [
            {"modality": "AUDIO", "tokenCount": 4_000},
            {"modality": "IMAGE", "tokenCount": 5},
        ],
        "cachedContentTokenCount": 600,
        "cacheTokensDetails": [
            {"modality": "IMAGE", "tokenCount": 500},
            {"modality": "VIDEO", "tokenCount": 100},
        ],
        "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 20}],
    }
    body = _gemini_body("gemini-2.5-flash-image", usage)
    answer = _provider("gemini", _gemini_reply(body)).chat(
        ChatRequest("gemini-2.5-flash-image").user("draw")
    )
    assert answer.provider_data["gemini"]["audio_tokens"] == {"input_audio_tokens": 4_007}
    assert answer.provider_data["gemini"]["media_tokens"] == {
        "input_image_tokens": 2_005,
        "input_video_tokens": 2_000,
        "cache_image_read_tokens": 500,
        "cache_video_read_tokens": 100,
        "output_image_tokens": 20,
    }


def test_a_stream_cut_before_its_end_keeps_its_input_images_alone() -> None:
    # Output counts before the finishing chunk are running ones: not what was billed.
    usage = {**DRAWN, "promptTokensDetails": [{"modality": "IMAGE", "tokenCount": 10}]}
    body = _gemini_body("gemini-2.5-flash-image", usage)
    cut = _gemini_reply(body)

    def reply(request: httpx2.Request) -> bytes:
        return cut(request).split(b"\r\n\r\n")[0] + b"\r\n\r\n"

    stream = _provider("gemini", reply).chat_stream(
        ChatRequest("gemini-2.5-flash-image").user("draw")
    )
    with pytest.raises(allama.IncompleteStreamError):
        stream.response()
    kept = stream.collector.response_metadata().provider_data
    assert kept == {"gemini": {"media_tokens": {"input_image_tokens": 10}}}


# The Responses API's image generation tool.


def _responses_body(item: dict[str, Any]) -> dict[str, Any]:
    message = {
        "type": "message",
        "id": "m1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": '{"title": "Cat"}', "annotations": []}],
    }
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-4.1-mini-2025-04-14",
        "output": [item, message],
        "usage": {
            "input_tokens": 50,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 70,
        },
    }


IMAGE_CALL: dict[str, Any] = {
    "type": "image_generation_call",
    "id": "ig_1",
    "status": "completed",
    "result": "iVBORw0KGgo=",
    "size": "1024x1024",
    "quality": "high",
}


@pytest.mark.parametrize("streamed", [False, True])
def test_an_image_generation_call_leaves_the_call_without_a_cost(streamed: bool) -> None:
    body = _responses_body(IMAGE_CALL)

    def reply(request: httpx2.Request) -> bytes:
        return (
            stream_of(body)
            if json.loads(request.content).get("stream")
            else json.dumps(body).encode()
        )

    provider = _provider("openai", reply, api="responses")
    request = (
        ChatRequest("gpt-4.1-mini")
        .user("Make a poster of a cat and give its title")
        .with_option_json("openai_responses", {"tools": [{"type": "image_generation"}]})
    )
    extracted = _extracted(provider, request, streamed=streamed)
    assert extracted.value == Poster(title="Cat")
    assert extracted.metadata.cost is None
    assert extracted.metadata.cost_missing == (
        "the images of 1 image generation calls, billed apart by their size and quality at "
        "the image model's prices, which genai-prices does not hold"
    )
