"""Sampling settings outside what any provider takes are refused when the request is made;
a `temperature` above what an endpoint takes (OpenAI's and Groq's 2) is left out with a
warning rather than sent to fail the whole request."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

import allama
from allama import ChatRequest


def test_a_negative_temperature_or_a_top_p_past_one_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"invalid `temperature`: .* greater than or equal to 0"):
        ChatRequest("gpt-4.1").with_temperature(-0.1)
    with pytest.raises(ValueError, match=r"invalid `top_p`: .* less than or equal to 1"):
        ChatRequest("gpt-4.1").with_top_p(1.5)
    assert ChatRequest("gpt-4.1").with_temperature(0).with_top_p(1).temperature == 0


def _sent(preset: str, request: ChatRequest, **options: Any) -> tuple[dict[str, Any], Any]:
    sent: list[dict[str, Any]] = []

    def answer(http: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(http.content))
        if http.url.path.endswith("/responses"):
            return httpx2.Response(
                200,
                json={
                    "id": "r",
                    "object": "response",
                    "status": "completed",
                    "model": request.model,
                    "output": [
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": "ok"}],
                        }
                    ],
                },
            )
        message = {"role": "assistant", "content": "ok"}
        return httpx2.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "model": request.model,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            },
        )

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    provider = allama.provider(preset, api_key="k", transport=transport, **options)
    response = provider.chat(request)
    return sent[0], response


@pytest.mark.parametrize(
    ("preset", "model", "options"),
    [
        ("openai", "gpt-4.1", {}),
        ("openai", "gpt-4.1", {"api": "responses"}),
        ("groq", "llama-3.3-70b-versatile", {}),
    ],
)
def test_a_temperature_above_two_is_left_out_where_the_endpoint_refuses_it(
    preset: str, model: str, options: dict[str, Any]
) -> None:
    body, response = _sent(preset, ChatRequest(model).user("hi").with_temperature(5), **options)
    assert "temperature" not in body
    [warning] = [w for w in response.warnings if "temperature" in w.message]
    assert warning.message.endswith("takes `temperature` from 0 to 2; 5 was left out")
    body, _ = _sent(preset, ChatRequest(model).user("hi").with_temperature(2), **options)
    assert body["temperature"] == 2


def test_an_endpoint_with_no_known_limit_gets_the_temperature_as_given() -> None:
    request = ChatRequest("my-model").user("hi").with_temperature(5)
    body, _ = _sent("vllm", request, base_url="http://127.0.0.1:8000/v1")
    assert body["temperature"] == 5
