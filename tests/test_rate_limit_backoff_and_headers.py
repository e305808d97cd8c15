"""A 429's asked wait is the least a batch run pauses, not the pause: the backoff still
doubles while 429s keep coming. And a wait field sent twice (joined "30, 30") is read as
the longer of its values, not as no wait."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import httpx2
import pydantic
import pytest

import allama
from _virtual_loop import VirtualLoop
from allama import AsyncBatchRun, ChatRequest, RetryingProvider
from allama.adapters.openai_compat import retry_after_seconds
from allama.batch import _run
from allama.batch._limits import RateLimiter
from allama.transport import Transport

# --- the pauses the limiter takes --------------------------------------------------------


def _storm(asked: float | None, count: int = 8) -> list[float]:
    """The pauses for `count` 429s in a row, each answering a request sent when the last
    pause ended, 0.1 s later (a provider refusing every request for a while)."""
    now = [0.0]
    limiter = RateLimiter(rpm=500, backoff=0.5, clock=lambda: now[0])
    pauses = []
    for _ in range(count):
        pauses.append(limiter.slow_down(asked, sent_at=now[0]))
        now[0] += pauses[-1] + 0.1
    return pauses


def test_a_few_milliseconds_asked_at_every_429_still_back_off_doubling() -> None:
    doubling = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0]
    assert _storm(None) == doubling
    # OpenAI's `x-ratelimit-reset-requests: 6ms`, `retry-after-ms: 20`: before, the pause
    # was the 6 ms asked at every 429, and the run sent as fast as it was refused.
    assert _storm(0.006) == doubling
    assert _storm(0.02) == doubling


def test_a_wait_asked_longer_than_the_backoff_is_waited_then_the_backoff_passes_it() -> None:
    # The first 429's pause is the wait asked (longer than `backoff`); the backoff grows
    # under it while 429s keep coming, and past it (before: 30 s each time, for ever).
    assert _storm(30.0) == [30.0, 30.0, 30.0, 30.0, 30.0, 30.0, 32.0, 60.0]


def test_after_a_quiet_spell_the_backoff_starts_again_and_a_burst_shares_the_pause() -> None:
    now = [0.0]
    limiter = RateLimiter(rpm=500, backoff=0.5, clock=lambda: now[0])
    assert limiter.slow_down(0.006, sent_at=0.0) == 0.5  # `backoff`, not the 6 ms asked
    now[0] = 0.1
    # A request on its way before that 429 (its burst): the pause in force, not 6 ms.
    assert limiter.slow_down(0.006, sent_at=-0.05) == pytest.approx(0.4)
    now[0] = 0.6
    assert limiter.slow_down(0.006, sent_at=0.5) == 1.0  # a second 429 in a row
    # Served again, and ten quiet seconds after the last pause ended: a 429 is a first.
    limiter.served(2.0)
    now[0] = 12.0
    assert limiter.slow_down(0.006, sent_at=11.9) == 0.5
    now[0] = 40.0
    assert limiter.slow_down(3.0, sent_at=39.9) == 3.0  # a wait asked past `backoff`
    # Cut at 0 s and at 12 s (something sent at the cut rate was answered before it).
    assert (limiter.rate_limited, limiter.slowdowns) == (5, 2)


# --- a batch run in a storm of 429s, on a virtual clock ----------------------------------


class _Item(pydantic.BaseModel):
    n: int


_OK = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": '{"n": 1}'},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
}
_OPENAI_429 = {
    "error": {
        "message": "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 500, "
        "Used 500, Requested 1.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
_STORM = 300.0


def _run_in_storm(
    monkeypatch: pytest.MonkeyPatch, headers: dict[str, str]
) -> tuple[int, list[str | None], int]:
    """Ten inputs against a provider refusing every request for 300 s with `headers`:
    the requests it refused, each input's failure kind, and the 429s the run counted."""
    loop = VirtualLoop(1000.0)
    limiters: list[RateLimiter] = []

    def limiter(*args: Any, **options: Any) -> RateLimiter:
        limiters.append(RateLimiter(*args, **options, clock=loop.time))
        return limiters[-1]

    monkeypatch.setattr(_run, "RateLimiter", limiter)
    monkeypatch.setattr(time, "monotonic", loop.time)
    refused = [0]

    def handler(request: httpx2.Request) -> httpx2.Response:
        if loop.now - 1000.0 < _STORM:
            refused[0] += 1
            return httpx2.Response(429, headers=headers, json=_OPENAI_429)
        return httpx2.Response(200, json=_OK)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    provider = allama.provider("openai", api_key="sk-test", transport=transport)

    async def main() -> list[Any]:
        run: AsyncBatchRun[_Item] = allama.abatch(
            provider,
            _Item,
            [f"doc {i}" for i in range(10)],
            request=ChatRequest("gpt-4o-mini").system("x"),
            rpm=500,
            concurrency=8,
        )
        return [result async for result in run]

    try:
        results = loop.run_until_complete(main())
    finally:
        loop.close()
    kinds = [None if r.failure is None else r.failure.kind for r in results]
    return refused[0], kinds, limiters[-1].rate_limited


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-ratelimit-reset-requests": "6ms", "x-ratelimit-remaining-requests": "0"},
        {"retry-after-ms": "20"},
    ],
    ids=["no-wait-asked", "reset-6ms", "retry-after-ms-20"],
)
def test_a_storm_of_429s_asking_milliseconds_slows_the_run_instead_of_ending_it(
    monkeypatch: pytest.MonkeyPatch, headers: dict[str, str]
) -> None:
    refused, kinds, rate_limited = _run_in_storm(monkeypatch, headers)
    # Pauses of 0.5, 1, 2 ... 32, 60, 60, 60, 60 s: the eleventh ends past the storm's 300
    # s. Before, a wait of milliseconds asked made 1,000 refused requests, every input
    # failing `rate_limited` after its 100 tries.
    assert (refused, rate_limited) == (11, 11)
    assert kinds == [None] * 10


# --- a wait field sent twice ---------------------------------------------------------------

_ANTHROPIC_429 = {
    "type": "error",
    "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded"},
}
_ANSWERS_429 = {"openai": _OPENAI_429, "anthropic": _ANTHROPIC_429}
_DATE = "Wed, 21 Oct 2015 07:28:00 GMT"
"""The provider's clock, years from this machine's: a moment is read on it, exactly."""


def _provider(preset: str, handler: Callable[[httpx2.Request], httpx2.Response]) -> Any:
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    return allama.provider(preset, api_key="sk-test", transport=transport)


def _asked(preset: str, headers: list[tuple[str, str]]) -> float | None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(429, headers=headers, content=json.dumps(_ANSWERS_429[preset]))

    with pytest.raises(allama.RateLimitedError) as raised:
        _provider(preset, handler).chat(ChatRequest("m").user("hi"))
    return raised.value.retry_after


@pytest.mark.parametrize("preset", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ([("retry-after", "30"), ("retry-after", "30")], 30.0),
        ([("retry-after", "7"), ("retry-after", "30")], 30.0),
        ([("retry-after-ms", "20"), ("retry-after-ms", "25")], 0.025),
        (
            [
                ("date", _DATE),
                ("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT"),
                ("retry-after", "Wed, 21 Oct 2015 07:28:45 GMT"),
            ],
            45.0,
        ),
    ],
    ids=["same-seconds", "two-seconds", "two-ms", "two-dates"],
)
def test_a_wait_field_sent_twice_is_read_as_its_longer_value(
    preset: str, headers: list[tuple[str, str]], wait: float
) -> None:
    assert _asked(preset, headers) == wait


def test_a_joined_list_of_waits_reads_each_value_and_a_single_date_still_reads() -> None:
    at = 1445412480.0  # 21 Oct 2015 07:28:00 GMT
    dates = "Wed, 21 Oct 2015 07:28:00 GMT, Wed, 21 Oct 2015 07:28:45 GMT"
    assert retry_after_seconds({"retry-after": dates}, now=at) == 45.0  # not the first's 0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=at) == 30.0
    assert retry_after_seconds({"retry-after": "soon, 12"}) == 12.0  # what reads of it
    assert retry_after_seconds({"retry-after": "soon, later"}) is None
    assert retry_after_seconds({"Retry-After": formatdate(at + 5, usegmt=True)}, now=at) == 5.0


def test_a_retry_waits_as_long_as_a_wait_sent_twice_asked() -> None:
    answers = iter([429, 200])
    ok = dict(_OK, model="m")

    def handler(request: httpx2.Request) -> httpx2.Response:
        if next(answers) == 429:
            headers = [("retry-after", "30"), ("retry-after", "30")]
            return httpx2.Response(429, headers=headers, json=_OPENAI_429)
        return httpx2.Response(200, json=ok)

    sleeps: list[float] = []
    retrying = RetryingProvider(
        _provider("openai", handler), sleep=sleeps.append, random=lambda: 0.5
    )
    retrying.chat(ChatRequest("m").user("hi"))
    assert sleeps == [30.0]  # before: the policy's backoff alone, as if no wait was asked


def test_a_server_errors_short_asked_wait_does_not_replace_the_inputs_backoff() -> None:
    # A 503 asking a few milliseconds at every try would have the input's tries spent at
    # once: the asked wait is a floor under the doubling backoff, as for a 429.
    import random

    from allama.batch._run import _retry_pause
    from allama.errors import OverloadedError

    limiter = RateLimiter(None, None)
    asked_little = OverloadedError("busy", retry_after=0.006)
    asked_long = OverloadedError("busy", retry_after=30.0)
    pauses = [
        _retry_pause(limiter, asked_little, tried, 0.0, 0.5, random.Random(1))
        for tried in range(1, 5)
    ]
    jitter = random.Random(1).random()
    assert pauses == [0.5 * 2**n * (0.5 + jitter / 2) for n in range(4)]
    assert _retry_pause(limiter, asked_long, 1, 0.0, 0.5, random.Random(1)) == 30.0
