"""A failover passes over a provider that asked to wait (a 429's `retry-after`) until the
wait has passed: the calls that follow go straight to the next provider, rather than each
paying a round trip to the one that asked them to wait."""

from __future__ import annotations

import asyncio
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx2
import pytest

import allama
from allama import FailoverProvider, RetryingProvider
from allama.errors import (
    InvalidRequestError,
    OverloadedError,
    RateLimitedError,
    ServerError,
    asked_wait,
)
from allama.mock import ChatResponseBuilder, FunctionProvider, MockProvider
from allama.transport import Transport
from allama.types import ProviderDataEvent, StreamEvent

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
    assert both.chat(REQUEST).text() == "b"
    assert both.chat(REQUEST).text() == "from a"


_TOO_LARGE = (
    "Request too large for gpt-4o-mini in organization org-x on tokens per min (TPM): "
    "Limit 30000, Requested 45000."
)


@pytest.mark.parametrize(
    ("words", "headers"),
    [
        # A 429 the provider says not to send again.
        (
            "Rate limit reached for gpt-4o-mini on requests per min (RPM)",
            {"x-should-retry": "false"},
        ),
        # A request larger than the account's limit per minute: no wait lets it through.
        (_TOO_LARGE, {}),
        # Groq's words for it: what it asks beside what the limit holds.
        ("Limit 7000, Used 0, Requested 7895. Please try again in 7.67s.", {}),
    ],
)
def test_a_rate_limit_no_wait_gets_through_moves_on_to_the_next_provider(
    words: str, headers: dict[str, str]
) -> None:
    """The limit is the account's (or its tier's), as a quota is: another provider's may be
    higher, and the request goes there rather than being raised with the backup unasked."""
    refused = [0]

    def limited(request: httpx2.Request) -> httpx2.Response:
        refused[0] += 1
        body = {"error": {"message": words, "type": "tokens", "code": "rate_limit_exceeded"}}
        return httpx2.Response(429, headers=headers, json=body)

    backup = _Endpoint()
    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(limited)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(limited)),
    )
    first = allama.provider("openai", api_key="sk-test", transport=transport)
    both = FailoverProvider([first, _served("groq", backup)], clock=Clock())

    answered = both.chat(REQUEST)
    assert (answered.text(), answered.provider_data["allama"]["failover"]) == (
        "hi",
        {"attempts": 2, "providers": ["openai", "groq"]},
    )
    assert asyncio.run(both.achat(REQUEST)).provider == "groq"
    assert (refused[0], backup.calls) == (2, 2)  # no wait kept: the first is tried again

    # The last provider's is raised as it is, the earlier provider's error in its chain.
    last = FailoverProvider([MockProvider([OverloadedError("busy")], name="a"), first])
    with pytest.raises(RateLimitedError) as raised:
        last.chat(REQUEST)
    assert (str(raised.value), raised.value.retryable) == (words, False)
    assert type(raised.value.fallback_from) is OverloadedError


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


# --- an answer saying a rate limit is used up ------------------------------------------------

_COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
_EVENTS = (
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    '[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}\n\n'
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    '[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)


class _Endpoint:
    """An OpenAI-compatible endpoint answering 200; where `resets` gives a number for a
    call, its headers say the token limit is used up, resetting in that many seconds."""

    def __init__(self, *resets: float | None) -> None:
        self.resets = list(resets)
        self.calls = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        reset = self.resets[self.calls] if self.calls < len(self.resets) else None
        self.calls += 1
        headers = {"x-ratelimit-remaining-tokens": "1000", "x-ratelimit-reset-tokens": "1s"}
        if reset is not None:
            headers = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": f"{reset}s"}
        if b'"stream":true' in request.content.replace(b" ", b""):
            headers["content-type"] = "text/event-stream"
            return httpx2.Response(200, headers=headers, content=_EVENTS.encode())
        return httpx2.Response(200, headers=headers, json=_COMPLETION)


def _served(preset: str, endpoint: _Endpoint) -> allama.ChatProvider:
    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(endpoint)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint)),
    )
    return allama.provider(preset, api_key="sk-test", transport=transport)


def _reset_skipped(provider: str, seconds_left: float) -> dict[str, object]:
    return _skipped(provider, seconds_left, why="rate_limit_reset")


def test_an_answer_saying_a_limit_is_used_up_passes_its_provider_over_until_it_resets() -> None:
    """Its note is that provider's wait, not the caller's: a batch run would pause every
    request for it while the next provider sat idle."""
    clock = Clock()
    first, second = _Endpoint(8.0), _Endpoint()
    both = FailoverProvider([_served("openai", first), _served("groq", second)], clock=clock)

    answered = both.chat(REQUEST)
    assert (answered.text(), answered.provider_data) == ("hi", {})

    clock.now += 1.5
    straight = both.chat(REQUEST)
    assert straight.provider_data == {
        "allama": {
            "failover": {
                "attempts": 1,
                "providers": ["groq"],
                "skipped": [_reset_skipped("openai", 6.5)],
            }
        }
    }
    assert (first.calls, second.calls) == (1, 1)

    clock.now += 6.5  # the limit has reset: the first provider is tried first again
    assert both.chat(REQUEST).provider_data == {}
    assert (first.calls, second.calls) == (2, 1)


def test_where_every_provider_then_waits_the_note_says_the_shortest_wait() -> None:
    clock = Clock()
    first, second = _Endpoint(3.0, None), _Endpoint(5.0, 5.0)
    both = FailoverProvider([_served("openai", first), _served("groq", second)], clock=clock)
    assert "allama" not in both.chat(REQUEST).provider_data

    clock.now += 1.0
    answered = both.chat(REQUEST)  # the second's limit is used up too: the first's ends first
    assert answered.provider_data["allama"] == {
        "rate_limit_reset": 2.0,
        "failover": {
            "attempts": 1,
            "providers": ["groq"],
            "skipped": [_reset_skipped("openai", 2.0)],
        },
    }

    clock.now += 2.0  # the first's wait is over: it serves, and the note goes
    assert both.chat(REQUEST).provider_data == {
        "allama": {
            "failover": {
                "attempts": 1,
                "providers": ["openai"],
                "skipped": [_reset_skipped("groq", 3.0)],
            }
        }
    }
    assert (first.calls, second.calls) == (2, 1)

    # A lone provider: its note is the wait of the whole failover, as it was.
    alone = FailoverProvider([_served("openai", _Endpoint(4.0))], clock=clock)
    assert alone.chat(REQUEST).provider_data == {"allama": {"rate_limit_reset": 4.0}}


def test_the_async_calls_take_the_note_as_a_wait_too() -> None:
    clock = Clock()
    first, second = _Endpoint(8.0), _Endpoint()
    both = FailoverProvider([_served("openai", first), _served("groq", second)], clock=clock)

    async def two() -> tuple[allama.ChatResponse, allama.ChatResponse]:
        answered = await both.achat(REQUEST)
        clock.now += 0.5
        return answered, await both.achat(REQUEST)

    answered, straight = asyncio.run(two())
    assert answered.provider_data == {}
    assert straight.provider_data["allama"]["failover"]["skipped"] == [
        _reset_skipped("openai", 7.5)
    ]
    assert (first.calls, second.calls) == (1, 1)


def _notes(events: list[StreamEvent]) -> list[object]:
    return [
        event.value
        for event in events
        if isinstance(event, ProviderDataEvent) and event.key == "rate_limit_reset"
    ]


def test_a_streams_note_is_taken_as_a_wait_and_not_handed_on() -> None:
    clock = Clock()
    first, second = _Endpoint(8.0), _Endpoint(5.0)
    both = FailoverProvider([_served("openai", first), _served("groq", second)], clock=clock)
    with both.chat_stream(REQUEST) as stream:
        events = list(stream)
        response = stream.response()
    assert (_notes(events), response.text(), response.provider_data) == ([], "hi", {})

    clock.now += 1.0
    with both.chat_stream(REQUEST) as stream:  # the second's used up too: its 5 s is shorter
        events = list(stream)
        response = stream.response()
    assert _notes(events) == [5.0]
    assert response.provider_data["allama"] == {
        "rate_limit_reset": 5.0,
        "failover": {
            "attempts": 1,
            "providers": ["groq"],
            "skipped": [_reset_skipped("openai", 7.0)],
        },
    }
    assert (first.calls, second.calls) == (1, 1)


def test_a_stream_closed_at_once_does_not_hand_the_note_on_either() -> None:
    both = FailoverProvider(
        [_served("openai", _Endpoint(8.0)), _served("groq", _Endpoint())], clock=Clock()
    )
    stream = both.chat_stream(REQUEST)
    assert "allama" not in stream.collector.reported_metadata().provider_data
    stream.close()
    assert stream.collector.response_metadata().provider_data == {}


def test_an_async_stream_takes_the_note_as_a_wait_too() -> None:
    clock = Clock()
    first, second = _Endpoint(8.0), _Endpoint()
    both = FailoverProvider([_served("openai", first), _served("groq", second)], clock=clock)

    async def two() -> tuple[list[StreamEvent], allama.ChatResponse, allama.ChatResponse]:
        stream = await both.achat_stream(REQUEST)
        async with stream:
            events = [event async for event in stream]
            answered = await stream.response()
        clock.now += 2.0
        again = await both.achat_stream(REQUEST)
        async with again:
            return events, answered, await again.response()

    events, answered, again = asyncio.run(two())
    assert (_notes(events), answered.provider_data) == ([], {})
    assert again.provider_data["allama"]["failover"]["skipped"] == [_reset_skipped("openai", 6.0)]
    assert (first.calls, second.calls) == (1, 1)


def test_a_failover_within_a_failover_hands_the_note_on_only_where_all_of_its_own_wait() -> None:
    clock = Clock()
    first, second, third = _Endpoint(8.0), _Endpoint(4.0), _Endpoint()
    inner = FailoverProvider([_served("openai", first), _served("groq", second)], clock=clock)
    outer = FailoverProvider([inner, _served("mistral", third)], clock=clock)
    assert outer.chat(REQUEST).provider_data == {}

    clock.now += 1.0
    # The inner's second is used up too: the inner waits 4 s, the outer goes on to the third.
    answered = outer.chat(REQUEST)
    assert answered.provider_data == {
        "allama": {
            "failover": {
                "attempts": 1,
                "providers": ["groq"],
                "skipped": [_reset_skipped("openai", 7.0)],
            }
        }
    }
    clock.now += 1.0
    assert outer.chat(REQUEST).provider_data["allama"]["failover"] == {
        "attempts": 1,
        "providers": ["mistral"],
        "skipped": [_reset_skipped(inner.name, 3.0)],
    }
    assert (first.calls, second.calls, third.calls) == (1, 1, 1)


def test_a_retry_around_or_inside_passes_the_note_to_the_failover() -> None:
    clock = Clock()
    first, second = _Endpoint(8.0), _Endpoint()
    inside = FailoverProvider(
        [RetryingProvider(_served("openai", first)), _served("groq", second)], clock=clock
    )
    around = RetryingProvider(inside)
    assert around.chat(REQUEST).provider_data == {}
    assert around.chat(REQUEST).provider_data["allama"]["failover"]["skipped"] == [
        _reset_skipped("openai", 8.0)
    ]
    assert (first.calls, second.calls) == (1, 1)
