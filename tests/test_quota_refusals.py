"""Refusals that say the account's credit or usage limit is spent: a `QuotaExceededError`,
not retryable, so that a batch run stops with its inputs pending rather than fail each one
(Anthropic's 400 for a workspace's usage limit) or send each again up to 100 times (xAI's
429 for spent credits, Ollama Cloud's 429 for a weekly, session or hourly usage limit)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest
from allama.batch import Ledger
from allama.transport import Transport

ANTHROPIC_LIMIT = (
    "You have reached your specified API usage limits. "
    "You will regain access on 2026-04-01 at 00:00 UTC."
)
ANTHROPIC_WORKSPACE_LIMIT = (
    "You have reached your specified workspace API usage limits. "
    "You will regain access on 2026-04-01 at 00:00 UTC."
)
XAI_CREDITS = (
    "Your team 16f2151a-40f4-4a80-8ad0-cae00c27e8dd has either used all available credits or "
    "reached its monthly spending limit. To continue making API requests, please purchase "
    "more credits or raise your spending limit."
)
OLLAMA_WEEKLY = (
    "you (alice) have reached your weekly usage limit, upgrade for higher limits: "
    "https://ollama.com/upgrade"
)
OLLAMA_SESSION = (
    "you (alice) have reached your session usage limit, upgrade for higher limits: "
    "https://ollama.com/upgrade"
)
OLLAMA_HOURLY = "you've reached your hourly usage limit, please wait or upgrade to continue"


class Endpoint:
    """A mock endpoint answering every request with one status, headers and body, counting
    the requests it is sent."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = json.dumps(body).encode()
        self.headers = {"content-type": "application/json", **(headers or {})}
        self.sent = 0
        self._lock = threading.Lock()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        with self._lock:
            self.sent += 1
        return httpx2.Response(self.status, content=self.body, headers=self.headers)

    def provider(self, preset: str) -> Any:
        transport = Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )
        return allama.provider(preset, api_key="test-key-0000", transport=transport)


def anthropic_body(message: str) -> dict[str, Any]:
    error = {"type": "invalid_request_error", "message": message}
    return {"type": "error", "error": error, "request_id": "req_011CZ"}


def openai_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "api_error", "param": None, "code": None}}


# (preset, model, status, body, the provider's words)
SPENT = {
    "anthropic-usage-limit": (
        "anthropic",
        "claude-sonnet-4-5",
        400,
        anthropic_body(ANTHROPIC_LIMIT),
        ANTHROPIC_LIMIT,
    ),
    "anthropic-workspace-usage-limit": (
        "anthropic",
        "claude-sonnet-4-5",
        400,
        anthropic_body(ANTHROPIC_WORKSPACE_LIMIT),
        ANTHROPIC_WORKSPACE_LIMIT,
    ),
    "xai-credits": (
        "xai",
        "grok-4",
        429,
        {"code": "Some resource has been exhausted", "error": XAI_CREDITS},
        XAI_CREDITS,
    ),
    "ollama-weekly": ("ollama", "gpt-oss:120b", 429, {"error": OLLAMA_WEEKLY}, OLLAMA_WEEKLY),
    "ollama-session": ("ollama", "gpt-oss:120b", 429, {"error": OLLAMA_SESSION}, OLLAMA_SESSION),
    "ollama-hourly": ("ollama", "gpt-oss:120b", 429, {"error": OLLAMA_HOURLY}, OLLAMA_HOURLY),
    "ollama-openai-weekly": (
        "ollama-openai",
        "gpt-oss:120b",
        429,
        openai_body(OLLAMA_WEEKLY),
        OLLAMA_WEEKLY,
    ),
}


def raised(endpoint: Endpoint, preset: str, model: str, *, run_async: bool) -> allama.Error:
    target = endpoint.provider(preset)
    request = ChatRequest(model).user("hi")
    with pytest.raises(allama.Error) as caught:
        if run_async:
            asyncio.run(target.achat(request))
        else:
            target.chat(request)
    return caught.value


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("case", list(SPENT))
def test_a_spent_credit_or_usage_limit_is_a_quota_not_retried(case: str, run_async: bool) -> None:
    preset, model, status, body, words = SPENT[case]
    endpoint = Endpoint(status, body)
    error = raised(endpoint, preset, model, run_async=run_async)
    assert type(error) is allama.QuotaExceededError
    assert (error.message, error.retryable, error.retry_after) == (words, False, None)
    assert (error.context.status, error.context.body) == (status, json.dumps(body))
    assert not error.authored  # the provider's words: withheld from every log view
    assert endpoint.sent == 1


def test_spent_credits_are_a_quota_whatever_wait_the_429_asks_for() -> None:
    body = {"code": "Some resource has been exhausted", "error": XAI_CREDITS}
    error = raised(Endpoint(429, body, {"retry-after": "5"}), "xai", "grok-4", run_async=False)
    assert type(error) is allama.QuotaExceededError
    assert error.retryable is False


@pytest.mark.parametrize("preset", ["ollama", "ollama-openai"])
def test_a_usage_limit_whose_end_the_response_gives_is_waited_for(preset: str) -> None:
    body = {"error": OLLAMA_HOURLY} if preset == "ollama" else openai_body(OLLAMA_HOURLY)
    endpoint = Endpoint(429, body, {"retry-after": "120"})
    error = raised(endpoint, preset, "gpt-oss:120b", run_async=False)
    assert type(error) is allama.RateLimitedError
    assert (error.retryable, error.retry_after) == (True, 120.0)


@pytest.mark.parametrize(
    ("preset", "body"),
    [
        ("ollama", {"error": "too many concurrent requests"}),
        ("xai", {"code": "Some resource has been exhausted", "error": "Rate limit exceeded"}),
    ],
)
def test_a_plain_rate_limit_stays_a_rate_limit(preset: str, body: dict[str, Any]) -> None:
    model = "grok-4" if preset == "xai" else "gpt-oss:120b"
    error = raised(Endpoint(429, body), preset, model, run_async=False)
    assert type(error) is allama.RateLimitedError
    assert (error.retryable, error.retry_after) == (True, None)


IN_PASSING = {
    "monthly usage limit named": (
        "together",
        "Rate limit exceeded: 60 requests per minute. See your monthly usage limit on the "
        "dashboard.",
        {},
        None,
    ),
    "credits named, with a wait": (
        "together",
        "Rate limit exceeded: 60 requests per minute. Upgrade your plan so you never run out "
        "of credits.",
        {"retry-after": "5"},
        5.0,
    ),
    "weekly usage limit named": (
        "ollama",
        "Too many requests per minute; this does not count toward your weekly usage limit.",
        {},
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(IN_PASSING))
def test_a_rate_limit_naming_a_quota_in_passing_stays_a_rate_limit(case: str) -> None:
    # Words said of the account (credit used up, a period's limit reached) are a quota;
    # the same words in passing are not, and a per-minute limit is waited out.
    preset, message, headers, wait = IN_PASSING[case]
    body = {"error": message} if preset == "ollama" else openai_body(message)
    model = "gpt-oss:120b" if preset == "ollama" else "meta-llama/Llama-3.3-70B-Instruct-Turbo"
    error = raised(Endpoint(429, body, headers), preset, model, run_async=False)
    assert type(error) is allama.RateLimitedError
    assert (error.retryable, error.retry_after) == (True, wait)


def test_another_invalid_request_to_anthropic_stays_the_requests_own() -> None:
    body = anthropic_body("messages: at least one message is required")
    error = raised(Endpoint(400, body), "anthropic", "claude-sonnet-4-5", run_async=False)
    assert type(error) is allama.InvalidRequestError


class Row(BaseModel):
    n: int


REFUSED = "the provider refused the run's key or account: quota_exceeded ("


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("case", ["anthropic-usage-limit", "xai-credits", "ollama-weekly"])
def test_a_batch_run_stops_with_the_inputs_pending(
    case: str, run_async: bool, tmp_path: Path
) -> None:
    preset, model, status, body, words = SPENT[case]
    endpoint = Endpoint(status, body)
    ledger = tmp_path / "run.sqlite"
    docs = [f"doc {n}" for n in range(30)]
    options: dict[str, Any] = {
        "request": ChatRequest(model),
        "concurrency": 4,
        "backoff": 0.01,
        "ledger": ledger,
    }
    # A run that took the refusal for a rate limit would go on for minutes: stopped by
    # hand at 10 s, it fails below, as the refusals it sent are more than those in flight.
    if run_async:

        async def collect() -> tuple[list[allama.BatchResult[Row]], Any]:
            run = allama.abatch(endpoint.provider(preset), Row, docs, **options)
            timer = threading.Timer(10.0, run.stop)
            timer.start()
            try:
                return [result async for result in run], run.summary
            finally:
                timer.cancel()

        results, summary = asyncio.run(collect())
    else:
        run = allama.batch(endpoint.provider(preset), Row, docs, **options)
        timer = threading.Timer(10.0, run.stop)
        timer.start()
        try:
            results = list(run)
        finally:
            timer.cancel()
        summary = run.summary
    kinds = {r.index: r.failure.kind for r in results if r.failure is not None}
    assert len(kinds) == len(results) and set(kinds.values()) == {"quota_exceeded", "not_started"}
    refused = [r for r in results if kinds[r.index] == "quota_exceeded"]
    # Those in flight together when the first refusal came were refused; no other was sent.
    assert 1 <= len(refused) == endpoint.sent <= 4
    assert all(r.pending and r.attempts == 1 for r in refused)
    assert [r.failure.provider_message for r in refused if r.failure is not None] == [words] * len(
        refused
    )
    assert summary.refused == "quota_exceeded"
    assert summary.stopped is not None and summary.stopped.startswith(REFUSED)
    assert (summary.failed, summary.pending, summary.rate_limited) == (
        len(refused),
        len(refused),
        0,
    )
    assert summary.not_started == 30 - len(refused)
    rows = list(Ledger(ledger, settings={}).rows())
    assert {(row.status, row.attempts) for row in rows} == {("pending", 1)}
    assert {row.position for row in rows} == {r.index for r in refused}
