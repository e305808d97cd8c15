"""Responses API errors: the codes that say the server is too busy (`server_is_overloaded`,
`slow_down`) are an overloaded server however they come, as their HTTP 503 is: in a failed
response's body, in `response.failed`, in a stream's `error` event. A batch run's outage
detection and its unanswered rows key on `OverloadedError`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

import allama
from _responses_support import sse
from allama.adapters.openai_responses._decode import decode_response
from allama.adapters.openai_responses._errors import error_from_failed, error_from_payload
from allama.adapters.openai_responses._sse import decode_stream
from allama.errors import Error, MessageOrigin, OverloadedError, ServerError
from allama.transport import Transport
from allama.types import ChatRequest
from allama.wrappers import RetryingProvider

WORDS = "Selected model is at capacity. Please try a different model."


def _failed(code: str) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "failed",
        "error": {"code": code, "message": WORDS},
        "incomplete_details": None,
        "model": "gpt-5-mini",
        "output": [],
        "usage": None,
    }


def _in_a_body(code: str) -> None:
    decode_response(
        200, {}, json.dumps(_failed(code)).encode(), provider="openai", model="gpt-5-mini"
    )


def _in_response_failed(code: str) -> None:
    started = {**_failed(code), "status": "in_progress", "error": None}
    decode_stream(
        sse(
            {"type": "response.created", "response": started},
            {"type": "response.failed", "response": _failed(code)},
        ),
        provider="openai",
        model="gpt-5-mini",
    )


def _in_an_error_event(code: str) -> None:
    event = {"type": "error", "code": code, "message": WORDS, "param": None}
    decode_stream(sse(event), provider="openai", model="gpt-5-mini")


def _in_a_nested_error_event(code: str) -> None:
    event = {"type": "error", "error": {"code": code, "message": WORDS}}
    decode_stream(sse(event), provider="openai", model="gpt-5-mini")


def _over_http_503(code: str) -> None:
    body = {"error": {"message": WORDS, "type": "service_unavailable_error", "code": code}}
    decode_response(503, {}, json.dumps(body).encode(), provider="openai", model="gpt-5-mini")


WAYS: dict[str, Callable[[str], None]] = {
    "failed body": _in_a_body,
    "response.failed": _in_response_failed,
    "error event": _in_an_error_event,
    "nested error event": _in_a_nested_error_event,
    "HTTP 503": _over_http_503,
}


@pytest.mark.parametrize("code", ["server_is_overloaded", "slow_down"])
@pytest.mark.parametrize("way", list(WAYS))
def test_an_overloaded_code_is_an_overloaded_server_however_it_comes(code: str, way: str) -> None:
    with pytest.raises(Error) as raised:
        WAYS[way](code)
    error = raised.value
    assert type(error) is OverloadedError
    assert (error.message, error.retryable, error.retry_after) == (WORDS, True, None)
    assert (error.provider, error.model) == ("openai", "gpt-5-mini")
    assert error.origin is MessageOrigin.UPSTREAM


@pytest.mark.parametrize("code", ["server_is_overloaded", "slow_down", "capacity_exceeded"])
def test_the_mappings_read_directly_agree(code: str) -> None:
    failed = error_from_failed(_failed(code), provider="openai")
    event = error_from_payload({"type": "error", "code": code, "message": WORDS})
    assert (type(failed), type(event)) == (OverloadedError, OverloadedError)
    assert failed.context.body == json.dumps({"error": {"code": code, "message": WORDS}})


def test_a_server_error_code_stays_a_server_error() -> None:
    error = error_from_failed(
        {"status": "failed", "error": {"code": "server_error", "message": "x"}}
    )
    assert type(error) is ServerError


def test_a_failed_overloaded_response_is_asked_again_by_a_retrying_provider() -> None:
    answers = [
        httpx2.Response(200, json=_failed("server_is_overloaded")),
        httpx2.Response(
            200,
            json={
                **_failed("server_is_overloaded"),
                "status": "completed",
                "error": None,
                "output": [
                    {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "hi", "annotations": []}],
                    }
                ],
                "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
            },
        ),
    ]

    def reply(request: httpx2.Request) -> httpx2.Response:
        return answers.pop(0)

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(reply)))
    inner = allama.provider("openai", api="responses", api_key="sk-test-1234", transport=transport)
    slept: list[float] = []
    retrying = RetryingProvider(inner, sleep=slept.append)
    assert retrying.chat(ChatRequest("gpt-5-mini").user("Hi")).text() == "hi"
    assert len(slept) == 1 and answers == []
