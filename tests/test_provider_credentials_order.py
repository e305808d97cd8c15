"""A call's own checks (a model name UTF-8 cannot carry, a missing base URL) come before
any credential is fetched, async as sync: the same error, and the `access_token=` function
(or a token refresh) never called for a call that cannot be sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

import allama
from allama import ChatRequest
from allama.errors import InvalidRequestError
from allama.transport import Transport

BASE_URL = "https://llm.example.test/v1"

NO_BASE_URL = "openai-compatible has no base URL: pass base_url="
LONE_SURROGATE = (
    "the model's name holds a lone surrogate, which UTF-8 cannot carry (text cut between "
    "the halves of a character?)"
)

CASES = [
    pytest.param({}, "m", NO_BASE_URL, id="no-base-url"),
    pytest.param({"base_url": BASE_URL}, "m\udc80", LONE_SURROGATE, id="lone-surrogate"),
]

_ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def _streamed() -> bytes:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
    }
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()


class _Failing:
    """An `access_token=` function that counts its calls and fails (an identity service
    out of reach): a call that asked it would say so instead of the request's fault."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        raise RuntimeError("identity service unreachable")


def _calls(target: Any, request: ChatRequest) -> dict[str, Callable[[], object]]:
    async def astream() -> None:
        async with await target.achat_stream(request) as stream:
            await stream.response()

    def stream() -> None:
        with target.chat_stream(request) as opened:
            opened.response()

    return {
        "chat": lambda: target.chat(request),
        "chat_stream": stream,
        "achat": lambda: asyncio.run(target.achat(request)),
        "achat_stream": lambda: asyncio.run(astream()),
    }


@pytest.mark.parametrize(("options", "model", "said"), CASES)
def test_a_request_that_cannot_be_sent_is_refused_before_the_token_sync_and_async(
    options: dict[str, Any], model: str, said: str
) -> None:
    token = _Failing()
    target = allama.provider("openai-compatible", access_token=token, **options)
    errors: dict[str, tuple[type[BaseException], str]] = {}
    for name, call in _calls(target, ChatRequest(model).user("hi")).items():
        with pytest.raises(allama.Error) as caught:
            call()
        errors[name] = (type(caught.value), str(caught.value))
    assert errors == dict.fromkeys(
        ("chat", "chat_stream", "achat", "achat_stream"), (InvalidRequestError, said)
    )
    assert token.calls == 0


@pytest.mark.parametrize(("options", "model", "said"), CASES)
def test_an_async_token_function_is_not_awaited_for_a_request_that_cannot_be_sent(
    options: dict[str, Any], model: str, said: str
) -> None:
    asked: list[str] = []

    async def token() -> str:
        asked.append("asked")
        raise RuntimeError("identity service unreachable")

    target = allama.provider("openai-compatible", access_token=token, **options)
    calls = _calls(target, ChatRequest(model).user("hi"))
    for name in ("achat", "achat_stream"):
        with pytest.raises(InvalidRequestError) as caught:
            calls[name]()
        assert str(caught.value) == said
    assert asked == []


class _Credentials:
    """google-auth credentials that count their refreshes."""

    def __init__(self) -> None:
        self.refreshes = 0
        self.token: str | None = None
        self.valid = False

    def refresh(self, request: Any) -> None:
        self.refreshes += 1
        self.token, self.valid = "ya29.token", True


def test_a_model_name_utf8_cannot_carry_is_refused_before_a_token_refresh() -> None:
    credentials = _Credentials()
    target = allama.provider("vertex-gemini", project="p", credentials=credentials)
    errors = set()
    for call in _calls(target, ChatRequest("gemini\udc80").user("hi")).values():
        with pytest.raises(InvalidRequestError) as caught:
            call()
        errors.add(str(caught.value))
    assert errors == {LONE_SURROGATE}
    assert credentials.refreshes == 0


def test_a_call_that_can_be_sent_still_sends_the_token_sync_and_async() -> None:
    sent: list[tuple[str, str]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append((str(request.url), request.headers["authorization"]))
        if b'"stream":true' in request.content.replace(b" ", b""):
            return httpx2.Response(
                200, content=_streamed(), headers={"content-type": "text/event-stream"}
            )
        return httpx2.Response(200, json=_ANSWER)

    given = iter(range(1, 5))
    target = allama.provider(
        "openai-compatible",
        base_url=BASE_URL,
        access_token=lambda: f"token-{next(given)}",
        transport=Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(handler)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        ),
    )
    for call in _calls(target, ChatRequest("m").user("hi")).values():
        call()
    assert sent == [(f"{BASE_URL}/chat/completions", f"Bearer token-{n}") for n in range(1, 5)]
