"""A native extraction through a preset's wire, answered by a mock endpoint with given text:
the record and the schema the request carried, for tests of what a schema becomes on the
way to each provider."""

from __future__ import annotations

import json
from typing import Any

import httpx2

import allama
from allama import ChatRequest, Extracted, Extractor
from allama.transport import Transport

MODELS = {
    "openai": "gpt-4o",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "llama-cpp": "m",
}
"""A model of each preset whose native pass sends the schema whole."""


def answer(name: str, reply: str) -> dict[str, Any]:
    """`reply` as the text of a native-mode answer in `name`'s wire format."""
    if name == "anthropic":
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODELS[name],
            "content": [{"type": "text", "text": reply}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 5, "output_tokens": 5},
        }
    if name == "gemini":
        return {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": reply}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 5},
        }
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": MODELS[name],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


def sent_schema(body: dict[str, Any]) -> Any:
    if "output_config" in body:
        return body["output_config"]["format"]["schema"]
    if "generationConfig" in body:
        return body["generationConfig"]["responseJsonSchema"]
    return body["response_format"]["json_schema"]["schema"]


def extract_through(name: str, tp: Any, reply: str) -> tuple[Extracted[Any], Any]:
    """`tp` extracted through `name`'s preset from a mock endpoint answering `reply`, with
    the schema the request carried."""
    sent: list[dict[str, Any]] = []

    def endpoint(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, json=answer(name, reply))

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(endpoint)))
    provider = allama.provider(name, api_key="k", transport=transport)
    extracted = Extractor().extract(provider, tp, ChatRequest(MODELS[name]).user("x"))
    (body,) = sent
    return extracted, sent_schema(body)
