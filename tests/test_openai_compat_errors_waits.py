"""A 429's wait is the longest its headers and its words give, a reset of `0` of a limit not
known to be used up being no wait (Azure's `-1` headers); and a 429 whose words say the
request asks more than the limit holds is one no wait lets through."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

import allama
from allama import RetryingProvider, RetryPolicy
from allama.adapters.openai_compat import retry_after_seconds
from allama.adapters.openai_compat._errors import error_from_response
from allama.errors import RateLimitedError
from allama.transport import Transport

_AZURE_WORDS = (
    "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
    "2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. "
    "Please retry after 38 seconds. Please go here: https://aka.ms/oai/quotaincrease if you "
    "would like to further increase the default rate limit."
)
_AZURE_UNKNOWN = {
    "x-ratelimit-limit-tokens": "-1",
    "x-ratelimit-remaining-tokens": "-1",
    "x-ratelimit-reset-tokens": "0",
}
"""What Azure OpenAI sends with its 429s (openai/openai-dotnet#838): no limit known."""
_GROQ_TPM = (
    "Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_x` on tokens "
    "per minute (TPM): Limit 6000, Used 5940, Requested 1200. Please try again in 11.4s."
)
_GROQ_TOO_LARGE = (
    "Rate limit reached for model `llama-3.2-90b-text-preview` in organization `org_x` on "
    "tokens per minute (TPM): Limit 7000, Used 0, Requested 7895. Please try again in "
    "7.671428571s. Visit https://console.groq.com/docs/rate-limits for more information."
)


def _limited(words: str, headers: dict[str, str] | None = None) -> RateLimitedError:
    body = {"error": {"message": words, "type": "tokens", "code": "rate_limit_exceeded"}}
    error = error_from_response(429, headers or {}, json.dumps(body).encode(), provider="p")
    assert isinstance(error, RateLimitedError)
    return error


def test_azures_unknown_limit_headers_are_no_wait_and_its_words_give_it() -> None:
    assert retry_after_seconds(_AZURE_UNKNOWN) is None
    error = _limited(_AZURE_WORDS, _AZURE_UNKNOWN)
    assert (error.retryable, error.retry_after) == (True, 38.0)
    # Without words, no wait is asked: the retry's own backoff is the wait, not 0.
    assert _limited("Rate limit is exceeded.", _AZURE_UNKNOWN).retry_after is None


def test_a_reset_of_zero_counts_for_a_limit_used_up_only() -> None:
    used_up = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "0s"}
    assert retry_after_seconds(used_up) == 0.0
    # One with some left (or none said) that resets now is not the limit met: the other is.
    left = {
        "x-ratelimit-remaining-tokens": "500",
        "x-ratelimit-reset-tokens": "0s",
        "x-ratelimit-remaining-requests": "3",
        "x-ratelimit-reset-requests": "2s",
    }
    assert retry_after_seconds(left) == 2.0
    assert retry_after_seconds({"x-ratelimit-reset": "0"}) is None


@pytest.mark.parametrize(
    ("words", "headers", "wait"),
    [
        # Groq's reset of a used-up limit saying `0s` while its words ask 11.4 s.
        (_GROQ_TPM, {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "0s"}, 11.4),
        # A `retry-after` rounded down beside the words' wait, and one longer than theirs.
        ("Please try again in 8.64s.", {"retry-after": "1"}, 8.64),
        ("Please try again in 2s.", {"retry-after": "20"}, 20.0),
        (_AZURE_WORDS, {"retry-after-ms": "500"}, 38.0),
    ],
)
def test_the_wait_is_the_longest_of_the_headers_and_the_words(
    words: str, headers: dict[str, str], wait: float
) -> None:
    error = _limited(words, headers)
    assert (error.retryable, error.retry_after) == (True, wait)


def test_a_retry_waits_the_wait_azures_words_ask_beside_its_unknown_limit_headers() -> None:
    sent = [0]

    def azure(request: httpx2.Request) -> httpx2.Response:
        sent[0] += 1
        body = {"error": {"code": "429", "message": _AZURE_WORDS}}
        return httpx2.Response(429, headers=_AZURE_UNKNOWN, json=body)

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(azure)))
    inner = allama.provider(
        "azure-openai", api_key="k", endpoint="https://r.openai.azure.com", transport=transport
    )
    slept: list[float] = []
    retrying = RetryingProvider(inner, RetryPolicy(jitter=0), sleep=slept.append)
    with pytest.raises(RateLimitedError):
        retrying.chat(allama.ChatRequest("gpt-4o").user("hi"))
    assert (sent[0], slept) == (3, [38.0, 38.0])


@pytest.mark.parametrize(
    "words",
    [
        _GROQ_TOO_LARGE,
        "Limit 1, Requested 30.",
        "Rate limit reached on tokens per min (TPM): Limit 1,000,000, Requested 1,200,000.",
    ],
)
def test_a_429_asking_more_than_the_limit_holds_is_not_retried(words: str) -> None:
    error = _limited(words, {"retry-after": "8"})
    assert (str(error), error.retryable, error.retry_after) == (words, False, None)


@pytest.mark.parametrize(
    "words",
    [
        _GROQ_TPM,  # what it asks fits the limit: the minute's use is what is over it
        "Rate limit reached on tokens per min (TPM): Limit 1,000,000, Requested 2,000.",
        "Limit 30000. Requested 45000 tokens over the day.",  # not one sentence's
    ],
)
def test_a_429_asking_what_the_limit_holds_is_waited_out(words: str) -> None:
    assert _limited(words, {"retry-after": "8"}).retryable


def test_a_retry_sends_a_request_larger_than_the_limit_once() -> None:
    sent: list[Any] = []

    def groq(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        body = {"error": {"message": _GROQ_TOO_LARGE, "code": "rate_limit_exceeded"}}
        return httpx2.Response(429, headers={"retry-after": "8"}, json=body)

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(groq)))
    inner = allama.provider("groq", api_key="k", transport=transport)
    slept: list[float] = []
    retrying = RetryingProvider(inner, RetryPolicy(jitter=0), sleep=slept.append)
    with pytest.raises(RateLimitedError) as raised:
        retrying.chat(allama.ChatRequest("llama-3.2-90b-text-preview").user("hi"))
    assert (len(sent), slept, raised.value.retryable) == (1, [], False)
