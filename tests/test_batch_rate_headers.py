"""A successful answer whose rate-limit headers say a limit is used up (remaining 0) pauses
a batch run's new requests until the limit resets, rather than let them meet 429s; and the
limits a run is given are checked as numbers, whatever their type."""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from email.utils import formatdate
from fractions import Fraction
from typing import Any

import httpx2
import numpy
import pydantic
import pytest

import allama
from _virtual_loop import VirtualLoop
from allama import AsyncBatchRun, ChatRequest, RetryingProvider
from allama.batch import _run
from allama.batch._limits import RateLimiter
from allama.mock import TestProvider
from allama.transport import Transport


class _Item(pydantic.BaseModel):
    n: int


_OPENAI_OK = {
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


def _ok(preset: str, request: httpx2.Request) -> dict[str, Any]:
    """A successful answer of `{"n": 1}`: Anthropic's by the tool the request forced."""
    if preset == "openai":
        return _OPENAI_OK
    tools = json.loads(request.content).get("tools")
    content = (
        [{"type": "tool_use", "id": "toolu_1", "name": tools[0]["name"], "input": {"n": 1}}]
        if tools
        else [{"type": "text", "text": '{"n": 1}'}]
    )
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-haiku-latest",
        "content": content,
        "stop_reason": "tool_use" if tools else "end_turn",
        "usage": {"input_tokens": 100, "output_tokens": 10},
    }


_429 = {
    "openai": {
        "error": {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    },
    "anthropic": {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded"},
    },
}
_PROVIDER_CLOCK = 1445412480.0
"""The provider's clock when the test begins (21 Oct 2015 07:28:00 GMT), years from this
machine's: its `Date` makes the resets read on it, exactly."""


def _iso(moment: float) -> str:
    stamp = datetime.datetime.fromtimestamp(round(moment, 3), datetime.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _limit_headers(preset: str, remaining: int, reset: float, now: float) -> dict[str, str]:
    """A provider's rate-limit headers, `now` seconds into the test: `remaining` requests
    left, the window resetting in `reset` seconds."""
    if preset == "openai":
        return {
            "x-ratelimit-limit-requests": "4",
            "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": f"{round(reset * 1000)}ms",
        }
    return {
        "date": formatdate(_PROVIDER_CLOCK + now, usegmt=True),
        "anthropic-ratelimit-requests-limit": "4",
        "anthropic-ratelimit-requests-remaining": str(remaining),
        "anthropic-ratelimit-requests-reset": _iso(_PROVIDER_CLOCK + now + reset),
    }


class _Window:
    """A provider serving `limit` requests a window of `seconds` from the first of it,
    saying on each answer how many are left and when the window ends, and answering 429
    (with the wait) to one past the limit."""

    def __init__(
        self, preset: str, clock: Callable[[], float], limit: int = 4, seconds: float = 3.0
    ) -> None:
        self.preset, self.clock, self.limit, self.seconds = preset, clock, limit, seconds
        self.began: float | None = None
        self.served: list[float] = []
        self.refused = 0
        self.lock = threading.Lock()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        with self.lock:
            now = self.clock()
            if self.began is None or now >= self.began + self.seconds:
                self.began, count = now, 0
            else:
                count = sum(1 for moment in self.served if moment >= self.began)
            reset = self.began + self.seconds - now
            if count >= self.limit:
                self.refused += 1
                headers = _limit_headers(self.preset, 0, reset, now)
                headers["retry-after"] = str(max(1, round(reset)))
                return httpx2.Response(429, headers=headers, json=_429[self.preset])
            self.served.append(now)
            headers = _limit_headers(self.preset, self.limit - count - 1, reset, now)
            return httpx2.Response(200, headers=headers, json=_ok(self.preset, request))


def _provider(preset: str, handler: Callable[[httpx2.Request], httpx2.Response]) -> Any:
    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider(preset, api_key="sk-test", transport=transport)


_MODEL = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}


# --- a batch run ---------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["openai", "anthropic"])
def test_an_answer_saying_the_limit_is_used_up_pauses_the_run_until_it_resets(
    monkeypatch: pytest.MonkeyPatch, preset: str
) -> None:
    """Twelve inputs against 4 requests per 3 s, one at a time: the fourth answer of each
    window says none is left, and the next request waits for the window's end. Before, the
    run sent on at once and met a 429 in every window, each cutting its rate."""
    loop = VirtualLoop(1000.0)
    limiters: list[RateLimiter] = []

    def limiter(*args: Any, **options: Any) -> RateLimiter:
        limiters.append(RateLimiter(*args, **options, clock=loop.time))
        return limiters[-1]

    monkeypatch.setattr(_run, "RateLimiter", limiter)
    monkeypatch.setattr(time, "monotonic", loop.time)
    window = _Window(preset, lambda: loop.now - 1000.0)
    provider = _provider(preset, window)

    async def main() -> AsyncBatchRun[_Item]:
        run: AsyncBatchRun[_Item] = allama.abatch(
            provider,
            _Item,
            [f"doc {i}" for i in range(12)],
            request=ChatRequest(_MODEL[preset]).system("x"),
            concurrency=1,
        )
        results = [result async for result in run]
        assert [r.value for r in results] == [_Item(n=1)] * 12
        return run

    try:
        run = loop.run_until_complete(main())
    finally:
        loop.close()
    assert window.refused == 0
    assert [round(moment, 6) for moment in window.served] == [0.0] * 4 + [3.0] * 4 + [6.0] * 4
    summary = run.summary
    assert (summary.rate_limited, summary.slowdowns, summary.resets_waited) == (0, 0, 3)
    assert limiters[-1].rpm_in_force is None  # no rate cut, nor one guessed
    assert [line for line in summary.lines() if "limits" in line] == [
        "limits: 6.0 s waited by inputs in all for their turn "
        "(3 pauses until a limit an answer said was used up reset)"
    ]


def test_a_run_in_worker_threads_pauses_for_a_used_up_limit_too() -> None:
    """`batch` (the provider's sync calls in threads), on the real clock: 2 requests per
    0.5 s, one at a time: no 429."""
    window = _Window("openai", time.monotonic, limit=2, seconds=0.5)
    run = allama.batch(
        _provider("openai", window),
        _Item,
        [f"doc {i}" for i in range(4)],
        request=ChatRequest("gpt-4o-mini").system("x"),
        concurrency=1,
    )
    assert [r.value for r in run] == [_Item(n=1)] * 4
    assert (window.refused, run.summary.rate_limited, run.summary.resets_waited) == (0, 0, 2)
    first, third = window.served[0], window.served[2]
    assert third - first >= 0.5  # the second window's first request


# --- the limiter -----------------------------------------------------------------------------


def test_a_pause_until_a_reset_holds_the_waiting_requests_and_cuts_nothing() -> None:
    async def main() -> tuple[list[float], RateLimiter]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(rpm=60, clock=loop.time)
        sends = [asyncio.create_task(limiter.acquire()) for _ in range(4)]
        await asyncio.sleep(0.5)
        limiter.until_reset(20.0)
        limiter.until_reset(19.0)  # another answer of the same window: the same pause
        return sorted([await send for send in sends]), limiter

    loop = VirtualLoop()
    try:
        sent, limiter = loop.run_until_complete(main())
    finally:
        loop.close()
    assert sent == [0.0, 20.5, 21.5, 22.5]  # after the pause, at the rate given
    assert (limiter.rpm_in_force, limiter.rate_limited, limiter.slowdowns) == (60, 0, 0)
    assert limiter.resets_waited == 1


def test_a_429_after_a_pause_for_a_reset_backs_off_from_the_start() -> None:
    """A pause for a reset is no 429: one coming after it is the first of its spell."""
    now = [0.0]
    limiter = RateLimiter(rpm=600, clock=lambda: now[0])
    assert limiter.slow_down(None, sent_at=0.0) == 1.0
    now[0] = 30.0
    limiter.served(29.0)
    limiter.until_reset(5.0)
    now[0] = 36.0  # a second after the reset, long after the last 429
    assert limiter.slow_down(None, sent_at=35.5) == 1.0  # not 2.0
    assert limiter.paused_for == 1.0


def test_a_reset_further_off_than_a_run_waits_is_left_to_the_next_429() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    limiter.until_reset(2 * 3600.0)  # Groq's requests per day
    assert (limiter.paused_for, limiter.resets_waited) == (0.0, 0)
    limiter.until_reset(900.0)
    assert (limiter.paused_for, limiter.resets_waited) == (900.0, 1)


# --- the headers read ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "2s"}, None),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2.7s"}, 2.7),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2700ms"}, 2.7),
        (
            {
                "x-ratelimit-remaining-requests": "7",
                "x-ratelimit-reset-requests": "1s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "6m0s",
            },
            360.0,
        ),
        ({"x-ratelimit-remaining-tokens-minute": "0", "x-ratelimit-reset-tokens-minute": "12"}, 12),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1445412490000"}, 10.0),
        ({"x-ratelimit-remaining-requests": "0"}, None),  # Azure's: no reset said
        ({"x-ratelimit-reset-requests": "2s"}, None),
    ],
    ids=["left", "seconds", "ms", "tokens", "cerebras", "openrouter-moment", "no-reset", "bare"],
)
def test_the_openai_familys_headers_say_the_wait_only_when_a_limit_is_used_up(
    headers: dict[str, str], wait: float | None
) -> None:
    from allama.adapters.openai_compat._errors import exhausted_wait

    assert exhausted_wait(headers, now=_PROVIDER_CLOCK) == wait


def test_anthropics_headers_say_the_wait_until_the_latest_used_up_limit_resets() -> None:
    from allama.adapters.anthropic._errors import exhausted_wait as anthropic_exhausted

    headers = {
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2015-10-21T07:28:03Z",
        "anthropic-ratelimit-tokens-remaining": "0",
        "anthropic-ratelimit-tokens-reset": "2015-10-21T07:28:05.5Z",
        "anthropic-ratelimit-input-tokens-remaining": "9000",
        "anthropic-ratelimit-input-tokens-reset": "2015-10-21T07:29:00Z",
    }
    assert anthropic_exhausted(headers, now=_PROVIDER_CLOCK) == 5.5
    headers["anthropic-ratelimit-tokens-remaining"] = "1000"
    assert anthropic_exhausted(headers, now=_PROVIDER_CLOCK) == 3.0
    headers["anthropic-ratelimit-requests-remaining"] = "1"
    assert anthropic_exhausted(headers, now=_PROVIDER_CLOCK) is None


_OPENAI_EVENTS = (
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",'
    '"choices":[{"index":0,"delta":{"role":"assistant","content":"{}"},"finish_reason":null}]}'
    "\n\n"
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",'
    '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)


def _answered(preset: str, headers: dict[str, str]) -> Callable[[httpx2.Request], httpx2.Response]:
    """A provider answering with `headers`: OpenAI's streams as server-sent events,
    Anthropic's as a whole answer (which a gateway may send to a streamed call)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        if preset == "openai" and b'"stream":true' in request.content.replace(b" ", b""):
            events = {**headers, "content-type": "text/event-stream"}
            return httpx2.Response(200, headers=events, content=_OPENAI_EVENTS.encode())
        return httpx2.Response(200, headers=headers, json=_ok(preset, request))

    return handler


@pytest.mark.parametrize("preset", ["openai", "anthropic"])
def test_a_used_up_limit_is_noted_on_the_response_through_a_wrapper(preset: str) -> None:
    used_up = _limit_headers(preset, 0, 2.5, 0.0)
    request = ChatRequest(_MODEL[preset]).user("hi")
    provider = RetryingProvider(_provider(preset, _answered(preset, used_up)))
    assert provider.chat(request).provider_data["allama"]["rate_limit_reset"] == 2.5
    with provider.chat_stream(request) as stream:
        for _ in stream:
            pass
        assert stream.response().provider_data["allama"]["rate_limit_reset"] == 2.5
    left = _limit_headers(preset, 3, 2.5, 0.0)
    answer = _provider(preset, _answered(preset, left)).chat(request)
    assert "allama" not in answer.provider_data


# --- the limits given ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting",
    [
        {"rpm": Decimal("60")},
        {"rpm": Fraction(1, 3)},
        {"rpm": numpy.float64(60.0)},
        {"tpm": numpy.int64(10_000)},
        {"tpm": Decimal("1e-300")},  # a request a minute: one goes alone once it is clear
    ],
    ids=["decimal", "fraction", "numpy-float", "numpy-int", "tiny-tpm"],
)
def test_a_limit_of_any_real_number_type_is_taken_as_a_float(setting: dict[str, Any]) -> None:
    ((name, value),) = setting.items()
    limiter = RateLimiter(**setting)
    if name == "rpm":
        assert limiter.rpm_in_force == float(value)
        assert type(limiter.rpm_in_force) is float
    run = allama.batch(TestProvider(), _Item, ["doc"], request=ChatRequest("m"), **setting)
    assert [r.ok for r in run] == [True]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"rpm": 10**400}, f"rpm must be a number more than 0 (a rate per minute), not {10**400}"),
        (
            {"tpm": Decimal("NaN")},
            "tpm must be a number more than 0 (a rate per minute), not Decimal('NaN')",
        ),
        (
            {"rpm": Fraction(-1, 3)},
            "rpm must be a number more than 0 (a rate per minute), not Fraction(-1, 3)",
        ),
        ({"rpm": True}, "rpm must be a number more than 0 (a rate per minute), not True"),
        (
            {"rpm": 1e-300},
            "rpm must be at least 1/15 (a request every 15 minutes, the longest a run waits), "
            "not 1e-300",
        ),
        (
            {"rpm": 0.06},
            "rpm must be at least 1/15 (a request every 15 minutes, the longest a run waits), "
            "not 0.06",
        ),
    ],
    ids=["overflow", "nan", "negative", "bool", "tiny", "under-a-fifteenth"],
)
def test_a_limit_out_of_range_is_refused_saying_why(setting: dict[str, Any], message: str) -> None:
    provider = TestProvider()
    with pytest.raises(ValueError) as raised:
        allama.batch(provider, _Item, ["doc"], request=ChatRequest("m"), **setting)
    assert str(raised.value) == message
    with pytest.raises(ValueError) as direct:
        RateLimiter(**setting)
    assert str(direct.value) == message
    assert provider.requests == []


def test_a_request_every_fifteen_minutes_is_the_least_rpm() -> None:
    assert RateLimiter(rpm=1 / 15).rpm_in_force == 1 / 15


# --- through a failover ----------------------------------------------------------------------


class _UsedUp:
    """An OpenAI endpoint answering 200, its headers saying its token limit is used up,
    resetting `reset` seconds after each answer (`reset` None: limits left)."""

    def __init__(self, reset: float | None) -> None:
        self.reset = reset
        self.served: list[float] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.served.append(time.monotonic())
        headers = {"x-ratelimit-remaining-tokens": "1000", "x-ratelimit-reset-tokens": "1s"}
        if self.reset is not None:
            headers = {
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": f"{self.reset}s",
            }
        return httpx2.Response(200, headers=headers, json=_OPENAI_OK)


def _failover_run(
    monkeypatch: pytest.MonkeyPatch, first: _UsedUp, second: _UsedUp, inputs: int
) -> AsyncBatchRun[_Item]:
    """A run of `inputs`, one at a time, through a failover of the two, on a virtual clock
    starting at 0."""
    loop = VirtualLoop(0.0)
    monkeypatch.setattr(
        _run, "RateLimiter", lambda *args, **options: RateLimiter(*args, **options, clock=loop.time)
    )
    monkeypatch.setattr(time, "monotonic", loop.time)
    both = allama.FailoverProvider(
        [_provider("openai", first), _provider("openai", second)], clock=loop.time
    )

    async def main() -> AsyncBatchRun[_Item]:
        run: AsyncBatchRun[_Item] = allama.abatch(
            both,
            _Item,
            [f"doc {i}" for i in range(inputs)],
            request=ChatRequest("gpt-4o-mini").system("x"),
            concurrency=1,
        )
        assert [result.value async for result in run] == [_Item(n=1)] * inputs
        return run

    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_a_failover_sends_on_to_its_next_provider_rather_than_pause_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, the first provider's note paused every request for 8 s, twice over, while the
    second sat idle (and the failover's next call still went to the first)."""
    first, second = _UsedUp(8.0), _UsedUp(None)
    run = _failover_run(monkeypatch, first, second, 6)
    assert (first.served, second.served) == ([0.0], [0.0] * 5)
    assert (run.summary.resets_waited, run.summary.rate_limited) == (0, 0)


def test_a_failover_whose_providers_all_wait_pauses_the_run_until_the_first_may_serve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = _UsedUp(8.0), _UsedUp(5.0)
    run = _failover_run(monkeypatch, first, second, 4)
    # 0: the first used up (until 8), the second serves; 0: it is used up (until 5), the run
    # pauses; 5: it serves, until 10, the run pauses until 8; 8: the first serves.
    assert (first.served, second.served) == ([0.0, 8.0], [0.0, 5.0])
    assert (run.summary.resets_waited, run.summary.rate_limited) == (3, 0)
