"""A recording endpoint of Anthropic's, Gemini's or Ollama's wire that calls the first
tool offered, for tests of what tool schemas are sent."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from allama.transport import Transport


class ToolEndpoint:
    """An endpoint of `dialect` answering with a call of the first tool offered (with
    `args`), or with `text` when no tool is offered."""

    def __init__(self, dialect: str, args: dict[str, Any] | None = None, text: str = "ok"):
        self.dialect = dialect
        self.args = args or {}
        self.text = text
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.read())
        self.bodies.append(body)
        return httpx2.Response(200, json=getattr(self, self.dialect)(body))

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        content: dict[str, Any] = {"type": "text", "text": self.text}
        if body.get("tools"):
            name = body["tools"][0]["name"]
            content = {"type": "tool_use", "id": "toolu_1", "name": name, "input": self.args}
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [content],
            "stop_reason": "tool_use" if body.get("tools") else "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def gemini(self, body: dict[str, Any]) -> dict[str, Any]:
        part: dict[str, Any] = {"text": self.text}
        if body.get("tools"):
            name = body["tools"][0]["functionDeclarations"][0]["name"]
            part = {"functionCall": {"name": name, "args": self.args}}
        return {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
        }

    def ollama(self, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            call = {"function": {"name": name, "arguments": self.args}}
            message = {"role": "assistant", "content": "", "tool_calls": [call]}
        return {
            "model": body["model"],
            "created_at": "2025-01-01T00:00:00Z",
            "message": message,
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 10,
            "eval_count": 5,
        }

    def transport(self) -> Transport:
        return Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )


def sent_schema(preset: str, body: dict[str, Any]) -> Any:
    tool = body["tools"][0]
    if preset == "anthropic":
        return tool["input_schema"]
    if preset == "gemini":
        return tool["functionDeclarations"][0]["parametersJsonSchema"]
    return tool["function"]["parameters"]
