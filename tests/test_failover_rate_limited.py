"""A failover passes over a provider that asked to wait (a 429's `retry-after`) until the
wait has passed: the calls that follow go straight to the next provider, rather than each
paying a round trip to the one that asked them to wait."""

from __future__ import annotations

import asyncio
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import allama
from allama import FailoverProvider
from allama.errors import (
    InvalidRequestError,
    OverloadedError,
    RateLimitedError,
    ServerError,
    asked_wait,
)
from allama.mock import ChatResponseBuilder, FunctionProvider, MockProvider

REQUEST = allama.ChatRequest("m").user("hi")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _limited(seconds: float | None = 5.0) -> RateLimitedError:
    return RateLimitedError("slow down", retry_after=seconds)


def _skipped(provider: str, seconds_left: float, why: str = "rate_limited") -> dict[str, object]:
    return {"provider": provider, "why": why, "seconds_left": seconds_left}


def test_a_provider_that_asked_to_wait_is_passed_over_until_the_wait_has_passed() -> None:
    clock = Clock()
    first = MockProvider([_limited(), "from a"], name="a")
    second = MockProvider(["b1", "b2"], name="b")
    both = FailoverProvider([first, second], clock=clock)

    answered = both.chat(REQUEST)
    assert (answered.provider, answered.provider_data["allama"]["failover"]) == (
        "b",
        {"attempts": 2, "providers": ["a", "b"]},
    )

    clock.now += 1.5
    straight = both.chat(REQUEST)
    assert (straight.text(), straight.provider_data["allama"]["failover"]) == (
        "b2",
        {"attempts": 1, "providers": ["b"], "skipped": [_skipped("a", 3.5)]},
    )
    assert len(first.requests) == 1

    clock.now += 3.5  # the wait is over: the first provider is tried first again
    again = both.chat(REQUEST)
    assert (again.text(), again.provider_data) == ("from a", {})
    assert len(first.requests) == 2


def test_the_async_calls_pass_it_over_too() -> None:
    clock = Clock()
    first = MockProvider([_limited(2.0)], name="a")
    second = MockProvider(["b1", "b2"], name="b")
    both = FailoverProvider([first, second], clock=clock)

    async def two() -> tuple[allama.ChatResponse, allama.ChatResponse]:
        answered = await both.achat(REQUEST)
        clock.now += 0.25
        return answered, await both.achat(REQUEST)

    _, straight = asyncio.run(two())
    assert straight.provider_data["allama"]["failover"] == {
        "attempts": 1,
        "providers": ["b"],
        "skipped": [_skipped("a", 1.75)],
    }
    assert len(first.requests) == 1


def test_the_wait_is_kept_between_calls_without_a_clock_given() -> None:
    # A long wait, on the real clock: the second call does not go to the first provider.
    first = MockProvider([_limited(600.0), "from a"], name="a")
    both = FailoverProvider([first, MockProvider(["b1", "b2"], name="b")])
    both.chat(REQUEST)
    assert both.chat(REQUEST).text() == "b2"
    assert len(first.requests) == 1


def test_a_stream_passes_it_over_too() -> None:
    clock = Clock()
    first = MockProvider([_limited()], name="a")
    both = FailoverProvider([first, MockProvider(["b1", "b2"], name="b")], clock=clock)
    both.chat(REQUEST)
    with both.chat_stream(REQUEST) as stream:
        response = stream.response()
    assert response.provider_data["allama"]["failover"] == {
        "attempts": 1,
        "providers": ["b"],
        "skipped": [_skipped("a", 5.0)],
    }
    assert len(first.requests) == 1


def test_where_every_provider_waits_the_one_whose_wait_ends_first_is_tried() -> None:
    clock = Clock()
    first = MockProvider([_limited(5.0)], name="a")
    second = MockProvider([_limited(2.0), "b", "b again"], name="b")
    both = FailoverProvider([first, second], clock=clock)
    with pytest.raises(RateLimitedError) as raised:
        both.chat(REQUEST)
    assert asked_wait(raised.value) == 2.0  # what a batch run waits, as before

    clock.now += 1.0
    response = both.chat(REQUEST)
    assert (response.text(), response.provider_data["allama"]["failover"]) == (
        "b",
        {"attempts": 1, "providers": ["b"], "skipped": [_skipped("a", 4.0)]},
    )
    # It answered: waited for no longer, while the other still is.
    clock.now += 0.5
    assert both.chat(REQUEST).provider_data["allama"]["failover"] == {
        "attempts": 1,
        "providers": ["b"],
        "skipped": [_skipped("a", 3.5)],
    }
    assert (len(first.requests), len(second.requests)) == (1, 3)


def test_where_every_provider_waits_the_error_of_the_one_tried_is_raised() -> None:
    clock = Clock()
    first = MockProvider([_limited(5.0), _limited(7.0)], name="a")
    second = MockProvider([_limited(9.0)], name="b")
    both = FailoverProvider([first, second], clock=clock)
    with pytest.raises(RateLimitedError):
        both.chat(REQUEST)
    clock.now += 1.0
    with pytest.raises(RateLimitedError) as raised:
        both.chat(REQUEST)
    assert raised.value.retry_after == 7.0
    assert raised.value.fallback_from is None
    assert raised.value.context.metadata["allama.failover"] == {"skipped": [_skipped("b", 8.0)]}
    assert (len(first.requests), len(second.requests)) == (2, 1)


def test_an_error_raised_past_a_skipped_provider_says_it_was_skipped() -> None:
    clock = Clock()
    first = MockProvider([OverloadedError("busy", retry_after=30)], name="a")
    second = MockProvider(["b", InvalidRequestError("bad")], name="b")
    both = FailoverProvider([first, second], clock=clock)
    both.chat(REQUEST)
    clock.now += 10.0
    with pytest.raises(InvalidRequestError) as raised:
        both.chat(REQUEST)
    assert raised.value.context.metadata["allama.failover"] == {
        "skipped": [_skipped("a", 20.0, why="overloaded")]
    }
    assert raised.value.as_log()["allama.failover"] == {
        "skipped": [_skipped("a", 20.0, why="overloaded")]
    }


@pytest.mark.parametrize(
    "failure",
    [
        ServerError("failed"),  # no wait asked
        RateLimitedError("over quota", retry_after=5.0, retryable=False),
    ],
)
def test_no_wait_is_kept_without_a_retryable_error_that_asked_for_one(
    failure: allama.Error,
) -> None:
    first = MockProvider([failure, "from a"], name="a")
    both = FailoverProvider([first, MockProvider(["b"], name="b")], clock=Clock())
    if failure.retryable:
        both.chat(REQUEST)
    else:
        with pytest.raises(RateLimitedError):
            both.chat(REQUEST)
    assert both.chat(REQUEST).text() == "from a"


def test_calls_from_threads_share_the_wait_and_hold_no_lock_over_a_call() -> None:
    clock = Clock()
    first = MockProvider([_limited(60.0)], name="a")
    together = threading.Barrier(2, timeout=10)
    calls = iter([False, True, True])

    def answer(request: allama.ChatRequest) -> allama.ChatResponse:
        if next(calls):
            together.wait()  # two calls in it at once: neither waits on the other
        return ChatResponseBuilder().text("b").build()

    both = FailoverProvider([first, FunctionProvider(answer, name="b")], clock=clock)
    both.chat(REQUEST)  # meets the 429
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(both.chat, REQUEST) for _ in range(2)]
        records = [future.result(timeout=10).provider_data for future in futures]
    skipped = {"attempts": 1, "providers": ["b"], "skipped": [_skipped("a", 60.0)]}
    assert records == [{"allama": {"failover": skipped}}] * 2
    assert len(first.requests) == 1


class _Named:
    """A provider as far as a failover's constructor reads one, which pickles."""

    name = "plain"


def test_a_failover_of_providers_that_pickle_still_pickles() -> None:
    plain = FailoverProvider([_Named(), _Named()])  # type: ignore[list-item]
    assert pickle.loads(pickle.dumps(plain)).name == "failover(plain, plain)"
