"""JSON nested past the interpreter's recursion limit (a gateway's or a proxy's body, a
stream event, a line of a batch job's results, a tool call's arguments in the caller's
history) is read as JSON that cannot be read: an allama error, never `RecursionError`."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

import allama
from allama import ChatRequest
from allama.adapters._http import HttpResponse, read_json, wire_json
from allama.adapters._jobs import json_lines, json_of
from allama.transport import Transport

DEEP = "[" * 1200 + "]" * 1200

DIALECTS = [
    ("anthropic", "claude-sonnet-4-5", None),
    ("openai", "gpt-4o", None),
    ("openai", "gpt-4o", "responses"),
    ("gemini", "gemini-2.5-flash", None),
    ("ollama", "qwen3", None),
]


def _provider(name: str, api: str | None, status: int, body: bytes, kind: str) -> Any:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers={"content-type": kind}, content=body)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    options: dict[str, Any] = {"api": api} if api else {}
    return allama.provider(
        name, api_key="sk-test", base_url="http://gateway", transport=transport, **options
    )


@pytest.mark.parametrize("status", [200, 400, 500])
@pytest.mark.parametrize(("name", "model", "api"), DIALECTS)
def test_a_body_nested_too_deeply_is_an_allama_error(
    name: str, model: str, api: str | None, status: int
) -> None:
    provider = _provider(name, api, status, DEEP.encode(), "application/json")
    request = ChatRequest(model).user("hi")
    with pytest.raises(allama.Error):
        provider.chat(request)
    with pytest.raises(allama.Error):
        asyncio.run(provider.achat(request))
    with pytest.raises(allama.Error), provider.chat_stream(request) as stream:
        for _ in stream:
            pass


@pytest.mark.parametrize(("name", "model", "api"), DIALECTS)
def test_a_stream_event_nested_too_deeply_is_a_stream_decode_error(
    name: str, model: str, api: str | None
) -> None:
    if name == "ollama":
        body, kind = (DEEP + "\n").encode(), "application/x-ndjson"
    else:
        event = {"anthropic": "event: message_start\n", "openai": ""}.get(name, "")
        if api == "responses":
            event = "event: response.created\n"
        body, kind = f"{event}data: {DEEP}\n\n".encode(), "text/event-stream"
    provider = _provider(name, api, 200, body, kind)
    with (
        pytest.raises(allama.StreamDecodeError),
        provider.chat_stream(ChatRequest(model).user("hi")) as stream,
    ):
        for _ in stream:
            pass


def test_the_readers_say_value_error_for_json_nested_too_deeply() -> None:
    for read in (read_json, wire_json):
        with pytest.raises(ValueError, match="nested too deeply"):
            read(DEEP)
    assert read_json("[" * 300 + "]" * 300) is not None  # past pydantic-core's limit alone
    # A batch job's results: the line is unread, the others are read.
    assert json_lines(f'{DEEP}\n{{"custom_id": "a"}}\n'.encode()) == [None, {"custom_id": "a"}]
    with pytest.raises(ValueError):
        json_of(HttpResponse(200, {}, DEEP.encode()))


@pytest.mark.parametrize(("name", "model", "api"), [d for d in DIALECTS if d[0] != "openai"])
def test_tool_arguments_nested_too_deeply_in_the_history_are_an_invalid_request(
    name: str, model: str, api: str | None
) -> None:
    from allama.types import ToolCall

    provider = _provider(name, api, 200, b"{}", "application/json")
    request = (
        ChatRequest(model)
        .user("hi")
        .assistant([ToolCall(id="c1", name="f", arguments=DEEP)])
        .tool_result("c1", "done")
    )
    with pytest.raises(allama.InvalidRequestError):
        provider.chat(request)
