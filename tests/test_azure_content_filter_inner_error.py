"""Error bodies of the Chat Completions family read as what they say, whichever way they
spell it.

Azure's content filter names what it flagged in `innererror` (its services, OpenAI's SDK)
or `inner_error` (its REST spec's `components.schemas.error`): both are read, on Chat
Completions and on Responses. Mistral's 400 for a model it has not (`type` `invalid_model`)
is a `NotFoundError`, which a failover moves on from; its 429 for a tier at capacity is an
`OverloadedError`, as the same body on 503 is. Ollama's `/v1` relays its own API's refusal
of tools or thinking, read as the Ollama adapter reads it: an `UnsupportedError` naming the
field.
"""

from __future__ import annotations

from typing import Any

import pytest

import allama
from _recording import Recorder, provider
from allama import ChatRequest
from allama.adapters.openai_compat._errors import CONTENT_FILTER_KEY, error_from_payload
from allama.errors import (
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    RateLimitedError,
    UnsupportedError,
)
from allama.types import RequestField, UnsupportedStage
from allama.wrappers import FailoverProvider

# Azure's content filter, its verdicts under `inner_error`

ENDPOINT = "https://r.openai.azure.com"
KEY = "azure-key-0123456789abcdef"
BLOCKED_WORDS = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content "
    "management policy."
)
FLAGGED = "the content filter flagged: jailbreak (flagged)"


def _blocked(inner_key: str) -> dict[str, Any]:
    """Azure's 400 for a prompt its filter blocked, as its REST spec gives the body."""
    return {
        "error": {
            inner_key: {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_results": {"jailbreak": {"filtered": True, "detected": True}},
            },
            "code": "content_filter",
            "message": BLOCKED_WORDS,
            "param": "prompt",
            "type": None,
        }
    }


def _azure(api: str, *answers: tuple[int, Any]) -> Any:
    recorder = Recorder(*answers)
    return allama.provider(
        "azure-openai", api=api, api_key=KEY, endpoint=ENDPOINT, transport=recorder.transport()
    )


@pytest.mark.parametrize("inner_key", ["inner_error", "innererror"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_blocked_prompt_says_what_the_filter_flagged_under_either_spelling(
    api: str, inner_key: str
) -> None:
    made = _azure(api, (400, _blocked(inner_key)))

    with pytest.raises(InvalidRequestError) as caught:
        made.chat(ChatRequest("dep").user("hi"))

    error = caught.value
    assert type(error) is InvalidRequestError
    assert str(error) == f"{BLOCKED_WORDS} ({FLAGGED})"
    assert (error.status, error.retryable) == (400, False)
    assert error.context.metadata[CONTENT_FILTER_KEY] == FLAGGED


def test_a_blocked_prompt_in_a_stream_reads_inner_error_too() -> None:
    error = error_from_payload(_blocked("inner_error"), provider="azure-openai")

    assert type(error) is InvalidRequestError
    assert str(error) == f"{BLOCKED_WORDS} ({FLAGGED})"
    assert error.context.metadata[CONTENT_FILTER_KEY] == FLAGGED


# Mistral's unknown model and its tier at capacity

INVALID_MODEL = {
    "object": "error",
    "message": "Invalid model: mistral-large-2402",
    "type": "invalid_model",
    "param": None,
    "code": "1500",
}
AT_CAPACITY = {
    "object": "error",
    "message": "Service tier capacity exceeded for this model.",
    "type": "invalid_request_error",
    "param": None,
    "code": "3505",
}
ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "created": 1,
    "model": "mistral-small-latest",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def test_mistrals_unknown_model_is_not_found() -> None:
    mistral, _ = provider("mistral", (400, INVALID_MODEL))

    with pytest.raises(NotFoundError) as caught:
        mistral.chat(ChatRequest("mistral-large-2402").user("hi"))

    assert str(caught.value) == "Invalid model: mistral-large-2402"
    assert (caught.value.status, caught.value.retryable) == (400, False)


def test_a_failover_moves_on_from_mistrals_unknown_model() -> None:
    mistral, _ = provider("mistral", (400, INVALID_MODEL))
    other, recorder = provider("mistral", (200, ANSWER))

    response = FailoverProvider([mistral, other]).chat(ChatRequest("mistral-large-2402").user("hi"))

    assert response.text() == "ok"
    assert len(recorder.bodies) == 1


def test_mistrals_tier_at_capacity_is_overloaded_on_429_as_on_503() -> None:
    mistral, _ = provider("mistral", (429, AT_CAPACITY))
    busy, _ = provider("mistral", (503, AT_CAPACITY))

    errors = []
    for made in (mistral, busy):
        with pytest.raises(OverloadedError) as caught:
            made.chat(ChatRequest("mistral-small-latest").user("hi"))
        errors.append(caught.value)

    assert [(type(e), e.status, e.retryable, str(e)) for e in errors] == [
        (OverloadedError, 429, True, "Service tier capacity exceeded for this model."),
        (OverloadedError, 503, True, "Service tier capacity exceeded for this model."),
    ]


def test_a_429_that_only_says_a_rate_is_still_rate_limited() -> None:
    limited = {**AT_CAPACITY, "message": "Requests rate limit exceeded"}
    mistral, _ = provider("mistral", (429, limited))

    with pytest.raises(RateLimitedError) as caught:
        mistral.chat(ChatRequest("mistral-small-latest").user("hi"))

    assert type(caught.value) is RateLimitedError


# Ollama's /v1: a model without tools or without thinking


def _ollama_refusal(message: str) -> dict[str, Any]:
    """Ollama's `/v1` error body (its OpenAI middleware's shape, its own API's words)."""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ("registry.ollama.ai/library/gemma:2b does not support tools", RequestField.TOOLS),
        ('"gemma3:4b" does not support thinking', RequestField.REASONING_EFFORT),
    ],
    ids=["tools", "thinking"],
)
def test_ollama_v1_says_the_field_a_model_does_not_take_as_its_own_api_does(
    message: str, field: RequestField
) -> None:
    compat, _ = provider("ollama-openai", (400, _ollama_refusal(message)))
    native, _ = provider("ollama", (400, {"error": message}))

    caught: list[UnsupportedError] = []
    for made in (compat, native):
        with pytest.raises(UnsupportedError) as raised:
            made.chat(ChatRequest("gemma3:4b").user("hi"))
        caught.append(raised.value)

    assert [(e.field, e.stage, e.status, str(e)) for e in caught] == [
        (field, UnsupportedStage.PROVIDER, 400, message),
        (field, UnsupportedStage.PROVIDER, 400, message),
    ]
