"""Retry, failover and capability overrides: each a provider, sync and async, deterministic."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

import allama
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatProvider,
    ChatRequest,
    ChatResponse,
    Error,
    ExtractionMetadata,
    IncompleteStreamError,
    InvalidRequestError,
    NetworkError,
    OverloadedError,
    ProviderDataEvent,
    RateLimitedError,
    RequestField,
    ResponseStart,
    ServerError,
    StreamEvent,
    TextDelta,
    UnsupportedError,
    UnsupportedStage,
    Usage,
    ValidationCoverage,
)
from allama.errors import REPORTED_USAGE_KEY, errors_in_chain
from allama.mock import ChatResponseBuilder, FunctionProvider, MockProvider, MockStreamingProvider
from allama.wrappers import (
    RETRY_METADATA_KEY,
    CapabilityOverrideProvider,
    FailoverProvider,
    RetryingProvider,
    RetryPolicy,
)

T = TypeVar("T")
REQUEST = ChatRequest("m").user("hi")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


class Clock:
    """A fake clock: sleeping advances it instantly, and calls can be made to take time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def retrying(
    inner: ChatProvider, clock: Clock, policy: RetryPolicy | None = None, unit: float = 0.5
) -> RetryingProvider:
    return RetryingProvider(
        inner,
        policy,
        sleep=clock.sleep,
        async_sleep=clock.async_sleep,
        random=lambda: unit,
        clock=clock,
    )


def attempts_of(error: Error) -> Any:
    return error.context.metadata[RETRY_METADATA_KEY]


class Keeping(MockProvider):
    """A scripted provider that keeps the errors it raised (a fresh copy of the scripted one
    each call), to read what a wrapper wrote on each."""

    def __init__(self, script: Sequence[Error | str]) -> None:
        super().__init__(script)
        self.raised: list[Error] = []

    def chat(self, request: ChatRequest) -> ChatResponse:
        try:
            return super().chat(request)
        except Error as error:
            self.raised.append(error)
            raise


# RetryPolicy


def test_policy_backoff_grows_caps_and_spreads() -> None:
    policy = RetryPolicy(initial_backoff=1.0, multiplier=3.0, max_backoff=10.0, jitter=0.25)
    assert [policy.backoff(n, 0.5) for n in (1, 2, 3, 4)] == [1.0, 3.0, 9.0, 10.0]
    assert policy.backoff(1, 0.0) == 0.75
    assert policy.backoff(1, 0.75) == 1.125
    assert policy.backoff(4, 0.75) == 10.0
    assert policy.backoff(5000, 0.5) == 10.0


def test_policy_decisions() -> None:
    policy = RetryPolicy(jitter=0.0, max_attempts=3, budget=10.0, max_retry_after=30.0)
    assert policy.delay(1, ServerError("x"), elapsed=0.0, unit=0.5) == 0.5
    assert policy.delay(2, ServerError("x"), elapsed=0.0, unit=0.5) == 1.0
    assert policy.delay(3, ServerError("x"), elapsed=0.0, unit=0.5) is None
    assert policy.delay(1, InvalidRequestError("x"), elapsed=0.0, unit=0.5) is None
    assert policy.delay(1, InvalidRequestError("x").with_retryable(True), elapsed=0, unit=0) == 0.5
    assert policy.delay(1, ServerError("x").with_retryable(False), elapsed=0, unit=0) is None
    assert policy.delay(1, RateLimitedError("x", retry_after=7.0), elapsed=0.0, unit=0.5) == 7.0
    assert policy.delay(1, RateLimitedError("x", retry_after=0.1), elapsed=0.0, unit=0.5) == 0.5
    assert policy.delay(1, RateLimitedError("x", retry_after=31.0), elapsed=0, unit=0.5) is None
    assert policy.delay(1, RateLimitedError("x", retry_after=7.0), elapsed=3.0, unit=0.5) == 7.0
    assert policy.delay(1, RateLimitedError("x", retry_after=7.0), elapsed=3.5, unit=0.5) is None
    unbounded = RetryPolicy(jitter=0.0, budget=None)
    assert unbounded.delay(1, ServerError("x"), elapsed=1e9, unit=0.5) == 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_attempts": 0}, "max_attempts must be a whole number of at least 1, not 0"),
        ({"initial_backoff": -1.0}, "backoff times cannot be negative"),
        ({"multiplier": 0.5}, "multiplier must be at least 1, not 0.5"),
        ({"jitter": 1.5}, "jitter must be between 0 and 1, not 1.5"),
        ({"budget": -1.0}, "budget cannot be negative, not -1.0"),
        ({"max_retry_after": -1.0}, "max_retry_after cannot be negative, not -1.0"),
        ({"max_backoff": float("nan")}, "max_backoff must be a number, not nan"),
        ({"initial_backoff": float("nan")}, "initial_backoff must be a number, not nan"),
        ({"multiplier": float("nan")}, "multiplier must be a number, not nan"),
        ({"budget": float("nan")}, "budget must be a number, not nan"),
        ({"max_retry_after": float("nan")}, "max_retry_after must be a number, not nan"),
        ({"initial_backoff": float("inf")}, "initial_backoff must be finite"),
        ({"multiplier": float("inf")}, "multiplier must be finite"),
        (
            {"max_backoff": float("inf"), "budget": None},
            "max_backoff must be finite when budget is None",
        ),
        (
            {"max_backoff": float("inf"), "budget": float("inf")},
            "max_backoff must be finite when budget is None or infinite",
        ),
    ],
)
def test_policy_rejects_nonsense(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**kwargs)


def test_a_wait_no_sleep_can_take_gives_up_rather_than_sleeping_for_ages() -> None:
    # A finite budget of ages and a huge multiplier: the third wait is past what a sleep
    # takes (sync raised OverflowError, async slept for good).
    policy = RetryPolicy(
        max_backoff=float("inf"), budget=1e308, multiplier=1e300, jitter=0.0, max_attempts=4
    )
    assert policy.delay(1, ServerError("x"), elapsed=0.0, unit=0.5) == 0.5
    assert policy.delay(2, ServerError("x"), elapsed=0.0, unit=0.5) is None
    inner = MockProvider([ServerError("a"), ServerError("b"), "ok"])
    clock = Clock()
    with pytest.raises(ServerError):
        retrying(inner, clock, policy).chat(REQUEST)
    assert inner.call_count == 2 and clock.sleeps == [0.5]
    # A provider asking for a wait just short of the platform's longest (a sleep refuses
    # it once the clock has run a while): given up too, not a bare OSError.
    import threading

    asking = RetryPolicy(max_retry_after=float("inf"), budget=None)
    ask = RateLimitedError("slow", retry_after=threading.TIMEOUT_MAX - 10)
    assert asking.delay(1, ask, elapsed=0.0, unit=0.5) is None


# RetryingProvider


def test_retries_retryable_errors_with_backoff_and_retry_after() -> None:
    clock = Clock()
    inner = MockProvider([ServerError("busy"), RateLimitedError("slow", retry_after=3.0), "ok"])
    response = retrying(inner, clock).chat(REQUEST)
    assert response.text() == "ok"
    assert inner.call_count == 3
    assert inner.requests == [REQUEST] * 3
    assert clock.sleeps == [0.5, 3.0]
    assert response.provider_data == {"allama": {"retry": {"attempts": 3}}}


def test_jitter_comes_from_the_injected_random_source() -> None:
    clock = Clock()
    inner = MockProvider([ServerError("a"), ServerError("b"), "ok"])
    policy = RetryPolicy(jitter=0.25)
    retrying(inner, clock, policy, unit=0.75).chat(REQUEST)
    assert clock.sleeps == [0.5625, 1.125]
    clock = Clock()
    inner = MockProvider([ServerError("a"), ServerError("b"), "ok"])
    retrying(inner, clock, policy, unit=0.0).chat(REQUEST)
    assert clock.sleeps == [0.375, 0.75]


def test_a_first_time_success_is_not_marked() -> None:
    clock = Clock()
    response = retrying(MockProvider(["ok"]), clock).chat(REQUEST)
    assert response.provider_data == {}
    assert clock.sleeps == []


def test_non_retryable_errors_are_raised_at_once() -> None:
    clock = Clock()
    error = InvalidRequestError("bad request")
    inner = MockProvider([error, "ok"])
    with pytest.raises(InvalidRequestError) as caught:
        retrying(inner, clock).chat(REQUEST)
    assert (type(caught.value), caught.value.message) == (InvalidRequestError, "bad request")
    assert inner.call_count == 1
    assert clock.sleeps == []
    assert attempts_of(caught.value) == {"attempts": 1, "gave_up": "not_retryable"}


def test_attempts_are_bounded_and_counted_on_the_last_error() -> None:
    clock = Clock()
    inner = Keeping([ServerError("1"), OverloadedError("2"), NetworkError("3"), "never"])
    with pytest.raises(NetworkError) as caught:
        retrying(inner, clock).chat(REQUEST)
    assert inner.raised[2] is caught.value
    assert [(type(e), e.message) for e in inner.raised] == [
        (ServerError, "1"),
        (OverloadedError, "2"),
        (NetworkError, "3"),
    ]
    assert inner.call_count == 3
    assert clock.sleeps == [0.5, 1.0]
    assert attempts_of(caught.value) == {"attempts": 3, "gave_up": "max_attempts"}
    assert caught.value.as_log()["allama.retry"] == {"attempts": 3, "gave_up": "max_attempts"}
    assert [RETRY_METADATA_KEY in e.context.metadata for e in inner.raised] == [False, False, True]


def test_max_backoff_caps_each_wait() -> None:
    clock = Clock()
    policy = RetryPolicy(max_attempts=4, initial_backoff=1.0, multiplier=10.0, max_backoff=5.0)
    inner = MockProvider([ServerError("x")] * 3 + ["ok"])
    retrying(inner, clock, policy).chat(REQUEST)
    assert clock.sleeps == [1.0, 5.0, 5.0]


def test_a_retry_after_beyond_the_cap_is_not_retried() -> None:
    clock = Clock()
    inner = MockProvider([RateLimitedError("later", retry_after=120.0), "ok"])
    with pytest.raises(RateLimitedError) as caught:
        retrying(inner, clock, RetryPolicy(max_retry_after=60.0)).chat(REQUEST)
    assert inner.call_count == 1
    assert clock.sleeps == []
    assert attempts_of(caught.value) == {
        "attempts": 1,
        "gave_up": "max_retry_after",
        "retry_after": 120.0,
        "max_retry_after": 60.0,
    }


def test_a_failover_tried_again_waits_for_the_provider_that_serves_first() -> None:
    clock = Clock()
    daily = RateLimitedError("limit per day", retry_after=86400.0)
    first = MockProvider([daily, RateLimitedError("limit per day", retry_after=86399.0)])
    second = MockProvider([RateLimitedError("busy", retry_after=3.0), "ok"])
    policy = RetryPolicy(jitter=0.0, max_retry_after=60.0)
    failover = FailoverProvider([first, second], clock=clock)
    response = retrying(failover, clock, policy).chat(REQUEST)
    assert response.text() == "ok" and clock.sleeps == [3.0]
    # One that asked for no wait may serve at once: the backoff alone (the failover passes
    # over the one that asked for a day).
    clock = Clock()
    first = MockProvider([RateLimitedError("limit per day", retry_after=86400.0)])
    second = MockProvider([OverloadedError("busy"), "ok"])
    failover = FailoverProvider([first, second], clock=clock)
    response = retrying(failover, clock, policy).chat(REQUEST)
    assert response.text() == "ok" and clock.sleeps == [0.5]
    assert len(first.requests) == 1


def test_a_caller_that_stops_ends_a_retrys_pause_and_its_attempts() -> None:
    import threading
    import time

    from allama.wrappers._gate import Gate, entered

    for driven in ("sync", "async"):
        gate = Gate()
        inner = MockProvider([OverloadedError("busy", retry_after=30.0), "ok"])
        provider = RetryingProvider(inner, RetryPolicy(max_retry_after=60.0))
        threading.Timer(0.2, gate.stop).start()
        began = time.monotonic()
        with entered(gate), pytest.raises(OverloadedError) as caught:
            if driven == "sync":
                provider.chat(REQUEST)
            else:
                run(provider.achat(REQUEST))
        # Ended as the caller stopped, not 30 s later, and not tried again.
        assert time.monotonic() - began < 10 and inner.call_count == 1
        assert attempts_of(caught.value) == {"attempts": 1, "gave_up": "stopped"}
    # Without a gate (outside a batch run), a wrapper waits as it always did.
    inner = MockProvider([OverloadedError("busy", retry_after=30.0), "ok"])
    clock = Clock()
    assert retrying(inner, clock, RetryPolicy(max_retry_after=60.0)).chat(REQUEST).text() == "ok"
    assert clock.sleeps == [30.0]


def test_a_failover_whose_caller_closed_tries_no_further_provider() -> None:
    from allama.wrappers._gate import Gate, entered

    for ending in ("stop", "close"):
        gate = Gate()
        second = MockProvider(["ok"], name="b")

        def failing_as_the_caller_ends(
            request: ChatRequest, end: str = ending, gate: Gate = gate
        ) -> ChatResponse:
            getattr(gate, end)()
            raise OverloadedError("busy")

        failover = FailoverProvider([FunctionProvider(failing_as_the_caller_ends), second])
        with entered(gate):
            if ending == "stop":  # in flight, the call finishes: its failover too
                assert failover.chat(REQUEST).text() == "ok"
            else:  # closed: nothing more is read
                with pytest.raises(OverloadedError):
                    failover.chat(REQUEST)
        assert second.call_count == (ending == "stop")


def test_a_gate_asks_nothing_of_a_call_that_ended_in_a_context_copied_during_it() -> None:
    import contextvars

    from allama.wrappers._gate import Gate, entered

    gate = Gate()
    with entered(gate):
        copied = contextvars.copy_context()  # as a task a provider starts would hold it
    gate.close()
    inner = MockProvider([OverloadedError("busy", retry_after=0.0), "ok"])
    provider = RetryingProvider(inner, RetryPolicy(initial_backoff=0.0, jitter=0.0))
    assert copied.run(provider.chat, REQUEST).text() == "ok"


def test_a_call_cut_short_keeps_its_gate_only_while_its_threads_work_goes_on() -> None:
    import contextvars

    from allama.wrappers._gate import Gate, entered, gate_closed, run_to_its_end

    async def cut(in_thread: bool) -> contextvars.Context:
        gate = Gate()
        copied: list[contextvars.Context] = []

        async def call() -> None:
            with entered(gate, in_thread=in_thread):
                copied.append(contextvars.copy_context())
                await asyncio.sleep(10)

        task = asyncio.create_task(call())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.close()
        return copied[0]

    # An async call cancelled is over: a context copied during it is asked nothing.
    assert run(cut(in_thread=False)).run(gate_closed) is False
    # A call whose work goes on in a thread holds its gate until that work returns.
    going = run(cut(in_thread=True))
    assert going.run(gate_closed) is True
    going.run(run_to_its_end, lambda: None)
    assert going.run(gate_closed) is False


def test_a_provider_that_refused_for_good_asks_no_wait_of_a_failover() -> None:
    from allama.errors import asked_wait

    limited = RateLimitedError("limit per day", retry_after=86400.0)
    refused = allama.AuthenticationError("key revoked")
    limited.with_fallback_from(refused)  # the chain a failover of the two raises
    assert asked_wait(limited) == 86400.0  # not `None`: the refused one never serves
    # A single error's own wait, retryable or not, as it always was.
    assert asked_wait(RateLimitedError("too large", retry_after=60.0, retryable=False)) == 60.0


def test_the_time_budget_counts_the_calls_and_the_waits() -> None:
    clock = Clock()

    def slow_failure(request: ChatRequest) -> ChatResponse:
        clock.now += 1.0
        raise ServerError("slow and failing")

    inner = FunctionProvider(slow_failure)
    policy = RetryPolicy(max_attempts=10, jitter=0.0, budget=2.0)
    with pytest.raises(ServerError) as caught:
        retrying(inner, clock, policy).chat(REQUEST)
    # Failed at t=1, waited 0.5 (1.5 <= 2); failed at t=2.5: a wait of 1.0 would pass 2.0.
    assert clock.sleeps == [0.5]
    assert inner.call_count == 2
    assert attempts_of(caught.value) == {"attempts": 2, "gave_up": "budget", "budget": 2.0}


def test_async_retry_uses_the_async_sleep() -> None:
    clock = Clock()
    inner = MockProvider([RateLimitedError("slow", retry_after=2.0), OverloadedError("x"), "ok"])
    provider = retrying(inner, clock)

    async def main() -> ChatResponse:
        return await provider.achat(REQUEST)

    response = run(main())
    assert response.text() == "ok"
    assert clock.sleeps == [2.0, 1.0]
    assert response.provider_data == {"allama": {"retry": {"attempts": 3}}}


def test_async_retry_gives_up_like_the_sync_one() -> None:
    clock = Clock()
    inner = MockProvider([ServerError("1"), InvalidRequestError("2"), "never"])

    async def main() -> None:
        await retrying(inner, clock).achat(REQUEST)

    with pytest.raises(InvalidRequestError) as caught:
        run(main())
    assert inner.call_count == 2
    assert clock.sleeps == [0.5]
    assert attempts_of(caught.value) == {"attempts": 2, "gave_up": "not_retryable"}


def test_a_stream_is_retried_only_while_it_opens() -> None:
    clock = Clock()
    answer = ChatResponseBuilder().text("streamed").build()
    inner = (
        MockStreamingProvider()
        .then_setup_error(ServerError("busy"))
        .then_response(answer)
        .then_response(answer)
    )
    stream = retrying(inner, clock).chat_stream(REQUEST)
    events = list(stream)
    assert events[0].type == "response_start"
    assert events[-1] == ProviderDataEvent(namespace="allama", key="retry", value={"attempts": 2})
    response = stream.response()
    assert response.text() == "streamed"
    assert response.provider == "mock"
    assert response.provider_data == {"allama": {"retry": {"attempts": 2}}}
    assert clock.sleeps == [0.5]
    assert inner.call_count == 2


def test_an_error_inside_a_stream_is_not_retried() -> None:
    clock = Clock()
    error = NetworkError("reset")
    inner = MockStreamingProvider([[TextDelta(index=0, text="par"), error]]).then_response(
        ChatResponseBuilder().text("never").build()
    )
    stream = retrying(inner, clock).chat_stream(REQUEST)
    seen: list[StreamEvent] = []
    with pytest.raises(NetworkError) as caught:
        seen.extend(stream)
    assert (type(caught.value), caught.value.message) == (NetworkError, "reset")
    assert seen == [TextDelta(index=0, text="par")]
    assert inner.call_count == 1
    assert clock.sleeps == []


def test_chat_over_a_stream_retries_an_incomplete_one() -> None:
    clock = Clock()
    inner = MockStreamingProvider([[TextDelta(index=0, text="cut off")]]).then_response(
        ChatResponseBuilder().text("whole").build()
    )
    response = retrying(inner, clock).chat(REQUEST)
    assert response.text() == "whole"
    assert clock.sleeps == [0.5]


def test_async_streams_are_retried_while_they_open() -> None:
    clock = Clock()
    inner = (
        MockStreamingProvider()
        .then_setup_error(RateLimitedError("slow", retry_after=4.0))
        .then_response(ChatResponseBuilder().text("ok").build())
    )
    provider = retrying(inner, clock)

    async def main() -> ChatResponse:
        stream = await provider.achat_stream(REQUEST)
        return await stream.response()

    response = run(main())
    assert response.text() == "ok"
    assert response.provider_data == {"allama": {"retry": {"attempts": 2}}}
    assert clock.sleeps == [4.0]

    failing = MockStreamingProvider().then_setup_error(InvalidRequestError("no"))

    async def fail() -> None:
        await retrying(failing, clock).achat_stream(REQUEST)

    with pytest.raises(InvalidRequestError):
        run(fail())
    assert clock.sleeps == [4.0]


def test_retrying_delegates_the_rest() -> None:
    inner = MockProvider(name="inner").with_chat_capability(
        ChatCapability.STREAMING, CapabilitySupport.UNSUPPORTED
    )
    provider = RetryingProvider(inner)
    assert isinstance(provider, ChatProvider)
    assert provider.name == "inner"
    assert provider.chat_capability("m", ChatCapability.STREAMING) is CapabilitySupport.UNSUPPORTED
    assert provider.validate_chat_request(REQUEST).coverage is ValidationCoverage.ENCODING
    assert inner.call_count == 0


# FailoverProvider


def test_failover_moves_on_after_a_retryable_error() -> None:
    first = MockProvider([OverloadedError("busy")], name="a")
    second = MockProvider(["from b"], name="b")
    response = FailoverProvider([first, second]).chat(REQUEST)
    assert response.text() == "from b"
    assert response.provider == "b"
    assert response.provider_data == {
        "allama": {"failover": {"attempts": 2, "providers": ["a", "b"]}}
    }
    assert (first.call_count, second.call_count) == (1, 1)


def test_the_failover_record_tells_two_endpoints_of_one_preset_apart() -> None:
    """A failover across two Azure resources names each by its host (no key, no path)."""
    import httpx2

    answer = {
        "id": "c",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    }

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.host.startswith("east"):
            return httpx2.Response(503, json={"error": {"message": "busy", "code": "503"}})
        return httpx2.Response(200, json=answer)

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    east, west = (
        allama.provider(
            "azure-openai",
            endpoint=f"https://{region}.openai.azure.com",
            api_key="secret-key",
            transport=transport,
        )
        for region in ("east", "west")
    )
    response = FailoverProvider([east, west]).chat(ChatRequest("gpt-4o").user("hi"))
    assert response.provider_data["allama"]["failover"] == {
        "attempts": 2,
        "providers": ["azure-openai@east.openai.azure.com", "azure-openai@west.openai.azure.com"],
    }


def test_no_failover_when_the_first_answers() -> None:
    first = MockProvider(["from a"], name="a")
    second = MockProvider(["from b"], name="b")
    response = FailoverProvider([first, second]).chat(REQUEST)
    assert response.provider_data == {}
    assert second.call_count == 0


def test_when_all_fail_the_last_error_keeps_the_chain() -> None:
    e1 = RateLimitedError("a", retry_after=1.0)
    e2 = ServerError("b")
    e3 = NetworkError("c")
    providers = [
        MockProvider([e1], name="a"),
        MockProvider([e2], name="b"),
        MockProvider([e3], name="c"),
    ]
    with pytest.raises(NetworkError) as caught:
        FailoverProvider(providers).chat(REQUEST)
    chain = errors_in_chain(caught.value)
    assert [(type(e), e.message, e.provider) for e in chain] == [
        (NetworkError, "c", "c"),
        (ServerError, "b", "b"),
        (RateLimitedError, "a", "a"),
    ]
    assert str(caught.value.as_log()) == (
        "kind=network provider=c model=m message_len=1 fallback_from.kind=server "
        "fallback_from.provider=b fallback_from.model=m fallback_from.message_len=1 "
        "fallback_from.fallback_from.kind=rate_limited fallback_from.fallback_from.provider=a "
        "fallback_from.fallback_from.model=m fallback_from.fallback_from.retry_after=1.0 "
        "fallback_from.fallback_from.message_len=1"
    )


def test_a_non_retryable_error_is_raised_without_failover() -> None:
    e1 = ServerError("busy")
    e2 = InvalidRequestError("bad")
    third = MockProvider(["never"], name="c")
    with pytest.raises(InvalidRequestError) as caught:
        FailoverProvider([MockProvider([e1], name="a"), MockProvider([e2], name="b"), third]).chat(
            REQUEST
        )
    chain = errors_in_chain(caught.value)
    assert [(type(e), e.message, e.provider) for e in chain] == [
        (InvalidRequestError, "bad", "b"),
        (ServerError, "busy", "a"),
    ]
    assert third.call_count == 0


@pytest.mark.parametrize(
    "refusal",
    [
        allama.AuthenticationError("key revoked"),
        allama.PermissionDeniedError("no access to the model"),
        allama.QuotaExceededError("credit spent"),
    ],
)
def test_a_refusal_of_the_account_fails_over_to_another_providers(refusal: Error) -> None:
    second = MockProvider(["ok"], name="b")
    response = FailoverProvider([MockProvider([refusal], name="a"), second]).chat(REQUEST)
    assert response.text() == "ok" and second.call_count == 1
    assert response.provider_data["allama"]["failover"]["providers"] == ["a", "b"]


def test_unsupported_before_sending_fails_over_only_when_asked() -> None:
    def refused() -> UnsupportedError:
        return UnsupportedError(
            "cannot send `response_format`: no", field=RequestField.RESPONSE_FORMAT
        ).mark_authored()

    second = MockProvider(["ok"], name="b")
    with pytest.raises(UnsupportedError):
        FailoverProvider([MockProvider([refused()], name="a"), second]).chat(REQUEST)
    assert second.call_count == 0

    failover = FailoverProvider(
        [MockProvider([refused()], name="a"), second], failover_on_unsupported=True
    )
    assert failover.chat(REQUEST).provider == "b"

    by_provider = UnsupportedError("no", stage=UnsupportedStage.PROVIDER)
    third = MockProvider(["ok"], name="c")
    with pytest.raises(UnsupportedError):
        FailoverProvider(
            [MockProvider([by_provider], name="a"), third], failover_on_unsupported=True
        ).chat(REQUEST)
    assert third.call_count == 0


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_refusal_a_failed_backup_hides_still_lets_auto_mode_fall_back(run: str) -> None:
    # The first provider refuses the schema for free (before sending); with
    # `failover_on_unsupported` the backup is tried, and is down: the refusal is in the
    # chain, and auto mode asks again with a forced tool, which the first serves.
    from allama.extract import EXTRACTION_TOOL

    refused = UnsupportedError(
        "cannot send `response_format`: a map", field=RequestField.RESPONSE_FORMAT
    ).mark_authored()
    answer = ChatResponseBuilder().tool_call("c1", EXTRACTION_TOOL, {"name": "Ada"}).build()
    first = MockProvider([refused, answer], name="a").with_chat_capability(
        ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.SUPPORTED
    )
    backup = MockProvider([allama.OverloadedError("down").with_status(529)], name="b")
    failover = FailoverProvider([first, backup], failover_on_unsupported=True)
    if run == "sync":
        extracted = allama.extract(failover, Named, REQUEST)
    else:
        extracted = asyncio.run(allama.aextract(failover, Named, REQUEST))
    assert extracted.value == Named(name="Ada")
    assert extracted.metadata.mode is allama.ExtractionMode.FORCED_TOOL
    fallback = extracted.metadata.auto_fallback
    assert fallback is not None and fallback.message == "cannot send `response_format`: a map"
    assert (first.call_count, backup.call_count) == (2, 1)


def test_a_nested_chain_is_kept_whole() -> None:
    e1, e2, e3 = ServerError("1"), ServerError("2"), ServerError("3")
    inner = FailoverProvider([MockProvider([e2], name="b"), MockProvider([e3], name="c")])
    outer = FailoverProvider([MockProvider([e1], name="a"), inner])
    with pytest.raises(ServerError) as caught:
        outer.chat(REQUEST)
    chain = errors_in_chain(caught.value)
    assert [(e.message, e.provider) for e in chain] == [("3", "c"), ("2", "b"), ("1", "a")]


def test_the_same_error_twice_does_not_make_a_cycle() -> None:
    # Scripted for two providers, the error is raised afresh by each, as a provider raises a
    # new one per call: the second is chained onto the first, and the chain ends there.
    shared = ServerError("same")
    scripted = [MockProvider([shared], name="a"), MockProvider([shared], name="b")]
    with pytest.raises(ServerError) as caught:
        FailoverProvider(scripted).chat(REQUEST)
    chain = errors_in_chain(caught.value)
    assert [(type(e), e.message, e.provider) for e in chain] == [
        (ServerError, "same", "b"),
        (ServerError, "same", "a"),
    ]
    assert chain[1].fallback_from is None and shared.fallback_from is None

    # A provider of the caller's own that raises the one object each time: it is kept once,
    # not chained onto itself.
    def answer(request: ChatRequest) -> ChatResponse:
        raise shared

    own = [FunctionProvider(answer, name="a"), FunctionProvider(answer, name="b")]
    with pytest.raises(ServerError) as caught:
        FailoverProvider(own).chat(REQUEST)
    assert caught.value is shared
    assert errors_in_chain(shared) == [shared]


def test_async_failover_keeps_the_chain() -> None:
    e1 = ServerError("1")
    e2 = OverloadedError("2")

    async def main() -> tuple[ChatResponse, Error]:
        ok = FailoverProvider([MockProvider([e1], name="a"), MockProvider(["fine"], name="b")])
        response = await ok.achat(REQUEST)
        failing = FailoverProvider([MockProvider([ServerError("x")]), MockProvider([e2])])
        try:
            await failing.achat(REQUEST)
        except Error as error:
            return response, error
        raise AssertionError("the failover should have failed")

    response, error = run(main())
    assert response.text() == "fine"
    assert response.provider_data == {
        "allama": {"failover": {"attempts": 2, "providers": ["a", "b"]}}
    }
    assert (type(error), error.message) == (OverloadedError, "2")
    assert [e.message for e in errors_in_chain(error)] == ["2", "x"]


def test_streams_fail_over_while_they_open() -> None:
    first = MockStreamingProvider(name="a").then_setup_error(NetworkError("down"))
    second = MockStreamingProvider.with_text("ok").with_provider_name("b")
    stream = FailoverProvider([first, second]).chat_stream(REQUEST)
    response = stream.response()
    assert response.text() == "ok"
    assert response.provider == "b"
    assert response.provider_data == {
        "allama": {"failover": {"attempts": 2, "providers": ["a", "b"]}}
    }

    error = NetworkError("mid-stream")
    broken = MockStreamingProvider([[TextDelta(index=0, text="x"), error]], name="a")
    spare = MockStreamingProvider.with_text("never")
    stream = FailoverProvider([broken, spare]).chat_stream(REQUEST)
    with pytest.raises(NetworkError):
        stream.response()
    assert spare.call_count == 0


def test_a_stream_fails_over_on_an_error_sent_before_its_answer_began() -> None:
    # An overloaded server answers HTTP 200, a start, then its error: nothing of the answer
    # has reached the caller, so the next provider is asked.
    busy = OverloadedError("Overloaded")
    first = MockStreamingProvider([[ResponseStart(id="msg_1"), busy]], name="a")
    second = MockStreamingProvider.with_text("ok").with_provider_name("b")
    stream = FailoverProvider([first, second]).chat_stream(REQUEST)
    events = list(stream)
    assert events[0] == ResponseStart(model="m")  # the second provider's, not the first's (`msg_1`)
    response = stream.response()
    assert (response.text(), response.provider) == ("ok", "b")
    assert response.provider_data == {
        "allama": {"failover": {"attempts": 2, "providers": ["a", "b"]}}
    }

    async def main() -> ChatResponse:
        first = MockStreamingProvider([[ResponseStart(id="msg_1"), busy]], name="a")
        second = MockStreamingProvider.with_text("ok").with_provider_name("b")
        stream = await FailoverProvider([first, second]).achat_stream(REQUEST)
        return await stream.response()

    assert run(main()).provider == "b"


def test_a_stream_is_retried_on_an_error_sent_before_its_answer_began() -> None:
    clock = Clock()
    inner = MockStreamingProvider([[ResponseStart(id="r"), ServerError("busy")]]).then_response(
        ChatResponseBuilder().text("whole").build()
    )
    stream = retrying(inner, clock).chat_stream(REQUEST)
    assert stream.response().text() == "whole"
    assert (inner.call_count, clock.sleeps) == (2, [0.5])

    async def main() -> ChatResponse:
        inner = MockStreamingProvider([[ResponseStart(id="r"), ServerError("busy")]])
        stream = await retrying(
            inner.then_response(ChatResponseBuilder().text("ok").build()), clock
        ).achat_stream(REQUEST)
        return await stream.response()

    assert run(main()).text() == "ok"


def test_async_streams_fail_over_while_they_open() -> None:
    first = MockStreamingProvider(name="a").then_setup_error(OverloadedError("busy"))
    second = MockStreamingProvider.with_text("ok").with_provider_name("b")

    async def main() -> ChatResponse:
        stream = await FailoverProvider([first, second]).achat_stream(REQUEST)
        return await stream.response()

    response = run(main())
    assert response.text() == "ok"
    assert response.provider == "b"


def test_failover_answers_from_the_first_provider() -> None:
    first = MockProvider(name="a").with_chat_capability(
        ChatCapability.REASONING, CapabilitySupport.SUPPORTED
    )
    second = MockProvider(name="b")
    failover = FailoverProvider([first, second])
    assert isinstance(failover, ChatProvider)
    assert failover.name == "failover(a, b)"
    assert FailoverProvider([first], name="primary").name == "primary"
    assert failover.chat_capability("m", ChatCapability.REASONING) is CapabilitySupport.SUPPORTED
    assert failover.validate_chat_request(REQUEST).coverage is ValidationCoverage.ENCODING
    with pytest.raises(ValueError, match="at least one provider"):
        FailoverProvider([])


def test_retry_over_failover_counts_attempts_and_keeps_chains() -> None:
    clock = Clock()
    a = MockProvider([ServerError("a1"), ServerError("a2")], name="a")
    b = MockProvider([ServerError("b1"), "ok"], name="b")
    provider = retrying(FailoverProvider([a, b]), clock)
    response = provider.chat(REQUEST)
    assert response.text() == "ok"
    assert response.provider_data == {
        "allama": {
            "failover": {"attempts": 2, "providers": ["a", "b"]},
            "retry": {"attempts": 2},
        }
    }
    assert clock.sleeps == [0.5]


# CapabilityOverrideProvider


def test_overrides_answer_and_the_rest_is_delegated() -> None:
    inner = (
        MockProvider(["ok"], name="inner")
        .with_chat_capability(ChatCapability.STREAMING, CapabilitySupport.SUPPORTED)
        .with_chat_capability(ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.UNSUPPORTED)
    )
    provider = CapabilityOverrideProvider(
        inner,
        {
            ChatCapability.STRUCTURED_OUTPUT: CapabilitySupport.SUPPORTED,
            ChatCapability.IMAGE_INPUT: CapabilitySupport.UNSUPPORTED,
        },
    )
    assert isinstance(provider, ChatProvider)
    assert provider.name == "inner"
    answers = {
        capability: provider.chat_capability("any-model", capability)
        for capability in (
            ChatCapability.STRUCTURED_OUTPUT,
            ChatCapability.IMAGE_INPUT,
            ChatCapability.STREAMING,
            ChatCapability.REASONING,
        )
    }
    assert answers == {
        ChatCapability.STRUCTURED_OUTPUT: CapabilitySupport.SUPPORTED,
        ChatCapability.IMAGE_INPUT: CapabilitySupport.UNSUPPORTED,
        ChatCapability.STREAMING: CapabilitySupport.SUPPORTED,
        ChatCapability.REASONING: CapabilitySupport.UNKNOWN,
    }
    assert provider.chat(REQUEST).text() == "ok"
    assert inner.last_request == REQUEST
    assert provider.validate_chat_request(REQUEST).coverage is ValidationCoverage.ENCODING


def test_overrides_limited_to_some_models() -> None:
    inner = MockProvider().with_chat_capability(
        ChatCapability.TOOL_CALLS, CapabilitySupport.UNSUPPORTED
    )
    provider = CapabilityOverrideProvider(
        inner, {ChatCapability.TOOL_CALLS: CapabilitySupport.SUPPORTED}, models=["local-llama"]
    )
    assert provider.chat_capability("local-llama", ChatCapability.TOOL_CALLS) is (
        CapabilitySupport.SUPPORTED
    )
    assert provider.chat_capability("other", ChatCapability.TOOL_CALLS) is (
        CapabilitySupport.UNSUPPORTED
    )
    # One model's name given alone is that model, not its letters.
    alone = CapabilityOverrideProvider(
        inner, {ChatCapability.TOOL_CALLS: CapabilitySupport.SUPPORTED}, models="local-llama"
    )
    assert alone.models == frozenset({"local-llama"})
    assert alone.chat_capability("l", ChatCapability.TOOL_CALLS) is CapabilitySupport.UNSUPPORTED


def test_an_override_the_adapter_cannot_send_is_reported_as_what_was_sent() -> None:
    # Groq's Llama has no JSON Schema output: overridden, the engine asks for it, the
    # adapter sends `json_object`, and the record says what that enforced.
    import json

    import httpx2

    sent: list[dict[str, Any]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        message = {"role": "assistant", "content": '{"name": "Ada"}'}
        return httpx2.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "created": 1,
                "model": "llama-3.1-8b-instant",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            },
        )

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    groq = allama.provider("groq", api_key="k", transport=transport)
    provider = CapabilityOverrideProvider(
        groq, {ChatCapability.STRUCTURED_OUTPUT: CapabilitySupport.SUPPORTED}
    )

    class Person(BaseModel):
        name: str

    result = allama.extract(
        provider, Person, allama.ChatRequest("llama-3.1-8b-instant").user("Ada")
    )
    assert sent[0]["response_format"] == {"type": "json_object"}
    assert result.value == Person(name="Ada")
    assert result.metadata.mode is allama.ExtractionMode.NATIVE
    assert result.metadata.enforcement is allama.SchemaEnforcement.NOT_ENFORCED
    assert [d.kind for d in result.metadata.degradations] == [allama.WarningKind.UNSUPPORTED]


def test_overrides_delegate_async_calls_and_streams() -> None:
    inner = MockStreamingProvider.from_responses(
        [ChatResponseBuilder().text(text).build() for text in ("one", "two", "three", "four")]
    )
    provider = CapabilityOverrideProvider(inner, {})

    async def main() -> list[str | None]:
        first = await provider.achat(REQUEST)
        stream = await provider.achat_stream(REQUEST)
        return [first.text(), (await stream.response()).text()]

    assert run(main()) == ["one", "two"]
    assert provider.chat(REQUEST).text() == "three"
    assert provider.chat_stream(REQUEST).response().text() == "four"
    assert inner.call_count == 4


def wrappers_of(inner: ChatProvider) -> Sequence[ChatProvider]:
    return [
        RetryingProvider(inner),
        FailoverProvider([inner]),
        CapabilityOverrideProvider(inner, {}),
    ]


def test_wrappers_pass_incomplete_stream_errors_through_chat_streams() -> None:
    for provider in wrappers_of(MockStreamingProvider([[TextDelta(index=0, text="x")]] * 3)):
        with pytest.raises(IncompleteStreamError):
            provider.chat_stream(REQUEST).response()


# What failed attempts reported paying reaches the extraction's record


def _paid_failure(provider: str, tokens: int) -> ServerError:
    """A failure in a 200 body that reported usage (OpenRouter's error on the choice)."""
    error = ServerError("upstream failed").with_provider(provider).with_model("gpt-4o")
    return error.with_metadata(REPORTED_USAGE_KEY, {"input_tokens": tokens, "output_tokens": 5})


def _answer(provider: str) -> ChatResponse:
    return (
        ChatResponseBuilder()
        .text('{"name": "Ada"}')
        .usage(10, 2)
        .provider(provider)
        .model("gpt-4o")
        .build()
    )


class Named(BaseModel):
    name: str


def test_a_retry_after_a_paid_failure_counts_what_it_paid() -> None:
    clock = Clock()
    inner = MockProvider([_paid_failure("a", 100), _paid_failure("a", 200), _answer("a")], name="a")
    extracted = allama.extract(retrying(inner, clock), Named, REQUEST)
    metadata = extracted.metadata
    assert metadata.passes == 1
    assert metadata.usage == Usage(input_tokens=310, output_tokens=12)
    assert extracted.response.provider_data["allama"]["retry"] == {
        "attempts": 3,
        "paid_before": [
            {
                "provider": "a",
                "model": "gpt-4o",
                "usage": {"input_tokens": 100, "output_tokens": 5},
            },
            {
                "provider": "a",
                "model": "gpt-4o",
                "usage": {"input_tokens": 200, "output_tokens": 5},
            },
        ],
    }


def test_a_retry_that_gives_up_counts_every_attempt_it_paid_for() -> None:
    clock = Clock()
    policy = RetryPolicy(max_attempts=3)
    inner = MockProvider([_paid_failure("a", 100) for _ in range(3)], name="a")
    with pytest.raises(ServerError) as caught:
        allama.extract(retrying(inner, clock, policy), Named, REQUEST)
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage) == (0, Usage(input_tokens=300, output_tokens=15))


def test_retries_within_retries_that_give_up_count_every_attempt() -> None:
    clock = Clock()
    policy = RetryPolicy(max_attempts=2)
    # Two tries outside, each of two inside: four paid failures, each counted once.
    tokens = (1_000, 2_000, 4_000, 8_000)
    inner = MockProvider([_paid_failure("a", n) for n in tokens], name="a")
    outer = retrying(retrying(inner, clock, policy), clock, policy)
    with pytest.raises(ServerError) as caught:
        allama.extract(outer, Named, REQUEST)
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage) == (0, Usage(input_tokens=15_000, output_tokens=20))


def test_a_failover_counts_what_the_providers_before_it_paid() -> None:
    first = MockProvider([_paid_failure("a", 100)], name="a")
    second = MockProvider([_answer("b")], name="b")
    extracted = allama.extract(FailoverProvider([first, second]), Named, REQUEST)
    assert extracted.metadata.usage == Usage(input_tokens=110, output_tokens=7)
    assert extracted.response.provider == "b"

    both = FailoverProvider(
        [
            MockProvider([_paid_failure("a", 100)], name="a"),
            MockProvider([_paid_failure("b", 40)], name="b"),
        ]
    )
    with pytest.raises(ServerError) as caught:
        allama.extract(both, Named, REQUEST)
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None and record.usage == Usage(input_tokens=140, output_tokens=10)


def _streamed(*bodies: dict[str, Any]) -> bytes:
    import json

    return "".join(f"data: {json.dumps(body)}\n\n" for body in bodies).encode()


def _failing(gen: str, content: str, usage: dict[str, int]) -> bytes:
    """The router's stream of `content`, then an error on its choice with the usage paid."""
    return _streamed(
        {
            "id": gen,
            "model": "openai/gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}}],
        },
        {
            "id": gen,
            "model": "openai/gpt-4o-mini",
            "error": {"code": "server_error", "message": "Provider disconnected"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
            "usage": usage,
        },
    )


_PAID = {"prompt_tokens": 50_000, "completion_tokens": 3_000, "total_tokens": 53_000}
_FAILED_STREAM = _failing("gen-1", "", _PAID)
_GOOD_STREAM = (
    _streamed(
        {
            "id": "gen-2",
            "model": "openai/gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": '{"name": "Ada"}'}}],
        },
        {
            "id": "gen-2",
            "model": "openai/gpt-4o-mini",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 50_000, "completion_tokens": 20, "total_tokens": 50_020},
        },
    )
    + b"data: [DONE]\n\n"
)


def _router(*streams: bytes) -> ChatProvider:
    import httpx2

    from allama.transport import Transport

    answers = iter(streams)

    def handler(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, content=next(answers), headers=headers)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return allama.provider("openrouter", api_key="k", transport=transport)


def test_a_streamed_attempt_that_failed_after_its_usage_is_counted_by_a_retry() -> None:
    # The router's stream reports the tokens of a call that failed before any answer: the
    # retry that follows counts them, priced as the model the stream named.
    clock = Clock()
    request = ChatRequest("openrouter/auto").user("Who?")
    stream = allama.extract_stream(
        retrying(_router(_FAILED_STREAM, _GOOD_STREAM), clock), Named, request
    )
    for _ in stream:
        pass
    extracted = stream.finish()
    assert extracted.metadata.usage == Usage(input_tokens=100_000, output_tokens=3_020)
    (paid,) = extracted.response.provider_data["allama"]["retry"]["paid_before"]
    assert (paid["model"], paid["usage"]) == (
        "openai/gpt-4o-mini",
        {"input_tokens": 50_000, "output_tokens": 3_000},
    )
    # Given up after two such attempts: the error's record counts both.
    policy = RetryPolicy(max_attempts=2)
    with pytest.raises(allama.Error) as caught:
        allama.extract_stream(
            retrying(_router(_FAILED_STREAM, _FAILED_STREAM), clock, policy), Named, request
        )
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert record.usage == Usage(input_tokens=100_000, output_tokens=6_000)


def test_a_refused_streams_tokens_are_counted_when_the_extraction_falls_back() -> None:
    import json

    from allama.extract import EXTRACTION_TOOL

    # The router's first stream reports its tokens, then refuses the native format: the
    # extraction falls back to the forced tool, on a second stream. Both were paid for.
    refused = _streamed(
        {
            "id": "gen-1",
            "model": "openai/gpt-4o-mini",
            "error": {
                "code": 400,
                "message": "This model does not support response format `json_schema`",
            },
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105},
        }
    )
    call = {"name": EXTRACTION_TOOL, "arguments": json.dumps({"name": "Ada"})}
    tool = (
        _streamed(
            {
                "id": "gen-2",
                "model": "openai/gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "role": "assistant",
                            "tool_calls": [
                                {"index": 0, "id": "c1", "type": "function", "function": call}
                            ],
                        },
                    }
                ],
            },
            {
                "id": "gen-2",
                "model": "openai/gpt-4o-mini",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 1_000, "completion_tokens": 20, "total_tokens": 1_020},
            },
        )
        + b"data: [DONE]\n\n"
    )
    request = ChatRequest("openrouter/auto").user("Who?")
    stream = allama.extract_stream(_router(refused, tool), Named, request)
    for _ in stream:
        pass
    extracted = stream.finish()
    assert extracted.metadata.auto_fallback is not None
    assert extracted.metadata.usage == Usage(input_tokens=1_100, output_tokens=25)


def test_the_paid_usage_of_a_failed_stream_names_its_model_and_tier() -> None:
    import types

    from allama.errors import paid_for
    from allama.stream import StreamCollector, with_paid
    from allama.types import ProviderDataEvent, ResponseStart, UsageEvent

    # Anthropic keeps its tier in the usage details it reports: read there as the
    # response's own record reads it, so the attempt is priced at that tier too.
    collector = StreamCollector()
    for event in (
        ResponseStart(id="msg_1", model="claude-sonnet-4-5"),
        UsageEvent(usage=Usage(input_tokens=100, output_tokens=3)),
        ProviderDataEvent(
            namespace="anthropic", key="usage_details", value={"service_tier": "priority"}
        ),
    ):
        collector.push(event)
    error = with_paid(OverloadedError("busy"), types.SimpleNamespace(collector=collector))  # type: ignore[arg-type]
    (entry,) = paid_for(error)
    assert (entry["model"], entry["service_tier"]) == ("claude-sonnet-4-5", "priority")
    assert entry["usage"] == {"input_tokens": 100, "output_tokens": 3}


_BROKEN_AFTER_ITS_ANSWER_BEGAN = _failing(
    "gen-3",
    '{"name": "A',
    {"prompt_tokens": 1_000, "completion_tokens": 10, "total_tokens": 1_010},
)


@pytest.mark.parametrize("kind", ["retry", "failover"])
def test_a_stream_that_fails_after_its_answer_began_counts_the_attempts_before_it(
    kind: str,
) -> None:
    # The wrapper's first stream failed after its usage, the second after its answer began:
    # the extraction's error counts both, though the wrapper's record never arrived.
    request = ChatRequest("openrouter/auto").user("Who?")

    def wrapped() -> ChatProvider:
        if kind == "retry":
            return retrying(_router(_FAILED_STREAM, _BROKEN_AFTER_ITS_ANSWER_BEGAN), Clock())
        first, second = _router(_FAILED_STREAM), _router(_BROKEN_AFTER_ITS_ANSWER_BEGAN)
        return FailoverProvider([first, second])

    expected = Usage(input_tokens=51_000, output_tokens=3_010)
    with pytest.raises(ServerError) as caught:
        for _ in allama.extract_stream(wrapped(), Named, request):
            pass
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None and record.usage == expected

    async def read() -> Any:
        stream = await allama.aextract_stream(wrapped(), Named, request)
        async for _ in stream:
            pass

    with pytest.raises(ServerError) as caught:
        run(read())
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None and record.usage == expected

    # Read without an extraction, the error says what the attempts before it paid, and
    # what its own stream reported (it said nothing of it: only an extraction read it).
    from allama.errors import paid_for

    with pytest.raises(ServerError) as caught:
        for _ in wrapped().chat_stream(request):
            pass
    assert [entry["usage"] for entry in paid_for(caught.value)] == [
        {"input_tokens": 50_000, "output_tokens": 3_000},
        {"input_tokens": 1_000, "output_tokens": 10},
    ]


def test_retries_within_retries_count_what_both_paid_before_an_answer() -> None:
    clock = Clock()
    policy = RetryPolicy(max_attempts=2)
    # The inner retry gives up twice paid; the outer tries again, and the inner answers on
    # its second attempt: three paid failures before the answer, each counted once.
    calls = [_paid_failure("a", 1_000), _paid_failure("a", 2_000)]
    inner = MockProvider([*calls, _paid_failure("a", 4_000), _answer("a")], name="a")
    extracted = allama.extract(retrying(retrying(inner, clock, policy), clock), Named, REQUEST)
    assert extracted.metadata.usage == Usage(input_tokens=7_010, output_tokens=17)
    record = extracted.response.provider_data["allama"]["retry"]
    assert (record["attempts"], record["inner"]["attempts"]) == (2, 2)


def test_failovers_within_failovers_count_what_both_paid_before_an_answer() -> None:
    def failing(name: str, tokens: int) -> MockProvider:
        return MockProvider([_paid_failure(name, tokens)], name=name)

    first = FailoverProvider([failing("a", 100), failing("b", 200)])
    second = FailoverProvider([failing("c", 400), MockProvider([_answer("d")], name="d")])
    extracted = allama.extract(FailoverProvider([first, second]), Named, REQUEST)
    assert extracted.metadata.usage == Usage(input_tokens=710, output_tokens=17)
    record = extracted.response.provider_data["allama"]["failover"]
    assert record["inner"]["providers"] == ["c", "d"]


def test_retries_within_retries_count_what_both_paid_before_a_streamed_answer() -> None:
    clock = Clock()
    policy = RetryPolicy(max_attempts=2)
    request = ChatRequest("openrouter/auto").user("Who?")
    streams = (_FAILED_STREAM, _FAILED_STREAM, _FAILED_STREAM, _GOOD_STREAM)

    def wrapped() -> ChatProvider:
        return retrying(retrying(_router(*streams), clock, policy), clock)

    stream = allama.extract_stream(wrapped(), Named, request)
    for _ in stream:
        pass
    assert stream.finish().metadata.usage == Usage(input_tokens=200_000, output_tokens=9_020)

    async def read() -> Any:
        stream = await allama.aextract_stream(wrapped(), Named, request)
        async for _ in stream:
            pass
        return (await stream.finish()).metadata.usage

    assert run(read()) == Usage(input_tokens=200_000, output_tokens=9_020)


def test_a_failed_streams_paid_usage_keeps_what_it_was_billed_beyond_tokens() -> None:
    import types

    from allama.errors import paid_for
    from allama.stream import StreamCollector, with_paid
    from allama.types import ProviderDataEvent, ResponseStart, UsageEvent

    # A stream reported a million tokens written to the one-hour cache and a web search,
    # then failed: its paid usage is priced as the same usage on an answer is (one-hour
    # writes at twice the input price rather than 1.25 times, the search at its own price).
    details = {
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 10**6},
        "server_tool_use": {"web_search_requests": 1},
    }
    usage = Usage(input_tokens=10**6 + 10, output_tokens=1, cache_write_tokens=10**6)
    collector = StreamCollector()
    for event in (
        ResponseStart(id="msg_1", model="claude-sonnet-4-6"),
        UsageEvent(usage=usage),
        ProviderDataEvent(namespace="anthropic", key="usage_details", value=details),
    ):
        collector.push(event)
    error = with_paid(OverloadedError("busy"), types.SimpleNamespace(collector=collector))  # type: ignore[arg-type]
    (entry,) = paid_for(error.with_provider("anthropic"))
    assert entry["billed_extras"] == {"cache_write_1h_tokens": 10**6, "web_searches": 1}

    failed = ExtractionMetadata(mode="native")
    failed.record_paid([entry])
    answered = (
        ChatResponseBuilder()
        .text('{"name": "Ada"}')
        .provider("anthropic")
        .model("claude-sonnet-4-6")
    ).build()
    answered = answered.model_copy(
        update={"usage": usage, "provider_data": {"anthropic": {"usage_details": details}}}
    )
    request = ChatRequest("claude-sonnet-4-6").user("Who?")
    once = allama.extract(MockProvider([answered], name="anthropic"), Named, request).metadata
    assert once.cost is not None and failed.cost is not None
    assert failed.cost.total == once.cost.total
    plain = ExtractionMetadata(mode="native")
    plain.record_paid([{key: value for key, value in entry.items() if key != "billed_extras"}])
    assert plain.cost is not None and failed.cost.total > plain.cost.total


def _paid_stream() -> list[Any]:
    """A stream that reports its usage, then fails before its answer (a new error each)."""
    usage = allama.UsageEvent(usage=Usage(input_tokens=1_000, output_tokens=1))
    return [ResponseStart(model="gpt-4o"), usage, ServerError("busy")]


_ANSWER_STREAM: list[Any] = [
    ResponseStart(model="gpt-4o"),
    allama.UsageEvent(usage=Usage(input_tokens=10, output_tokens=2)),
    allama.BlockStart(index=0, block_type=allama.StreamBlockType.TEXT),
    TextDelta(index=0, text='{"name": '),
    TextDelta(index=0, text='"Ada"}'),
    allama.Finish(finish_reason="stop"),
]


def _closed_early_cases() -> dict[str, Any]:
    def retry() -> ChatProvider:
        inner = MockStreamingProvider([_paid_stream(), _ANSWER_STREAM], name="a")
        return retrying(inner, Clock())

    def failover() -> ChatProvider:
        first = MockStreamingProvider([_paid_stream()], name="a")
        return FailoverProvider([first, MockStreamingProvider([_ANSWER_STREAM], name="b")])

    def retry_of_failovers() -> ChatProvider:
        # The outer retry's first try: both providers fail paid; its second: the first
        # fails paid again and the second answers.
        first = MockStreamingProvider([_paid_stream(), _paid_stream()], name="a")
        second = MockStreamingProvider([_paid_stream(), _ANSWER_STREAM], name="b")
        return retrying(FailoverProvider([first, second]), Clock())

    return {
        "retry": (retry, 1_010),
        "failover": (failover, 1_010),
        "nested": (retry_of_failovers, 3_010),
    }


CLOSED_EARLY = r"^the stream was closed \(close\(\) or aclose\(\)\) before the response finished$"
"""A stream its caller closed before its end: not a stream that ended early."""


@pytest.mark.parametrize("kind", ["retry", "failover", "nested"])
def test_a_stream_closed_before_its_end_counts_what_the_wrappers_paid_before_it(kind: str) -> None:
    make, tokens = _closed_early_cases()[kind]
    stream = allama.extract_stream(make(), Named, REQUEST)
    next(stream)
    stream.close()
    with pytest.raises(Error, match=CLOSED_EARLY) as caught:
        stream.finish()
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None and record.usage is not None
    assert (record.passes, record.usage.input_tokens) == (0, tokens)

    async def read() -> Any:
        stream = await allama.aextract_stream(make(), Named, REQUEST)
        await stream.__anext__()
        await stream.aclose()
        with pytest.raises(Error, match=CLOSED_EARLY) as caught:
            await stream.finish()
        return ExtractionMetadata.from_error(caught.value)

    record = run(read())
    assert record is not None and record.usage is not None
    assert (record.passes, record.usage.input_tokens) == (0, tokens)

    # Read to its end, the same stream counts the answer's pass too.
    stream = allama.extract_stream(make(), Named, REQUEST)
    for _ in stream:
        pass
    usage = stream.finish().metadata.usage
    assert usage is not None and usage.input_tokens == tokens


def test_a_paid_entry_with_counts_allama_does_not_know_still_counts_the_ones_it_does() -> None:
    record = ExtractionMetadata(mode="native")
    usage = {"input_tokens": 100, "output_tokens": 5, "total_tokens": 105, "audio_seconds": 2}
    record.record_paid([{"provider": "openai", "model": "gpt-4o", "usage": usage}])
    assert record.usage == Usage(input_tokens=100, output_tokens=5)
    assert record.cost is not None and record.passes == 0


@pytest.mark.parametrize("mode", [allama.ExtractionMode.NATIVE, allama.ExtractionMode.FORCED_TOOL])
def test_a_stream_closed_before_it_gave_what_the_wrapper_read_ahead_counts_it(
    mode: allama.ExtractionMode,
) -> None:
    # The retry reads the second stream up to its answer's first piece (its usage among
    # what it reads) before handing it over; closed at once, the stream still counts it.
    def make() -> ChatProvider:
        inner = MockStreamingProvider([_paid_stream(), _ANSWER_STREAM], name="a")
        return retrying(inner, Clock())

    raw = make().chat_stream(REQUEST)
    raw.close()
    assert raw.collector.response_metadata().usage == Usage(input_tokens=10, output_tokens=2)

    request = REQUEST.with_option(mode)
    stream = allama.extract_stream(make(), Named, request)
    stream.close()
    with pytest.raises(Error, match=CLOSED_EARLY) as caught:
        stream.finish()
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None and record.usage == Usage(input_tokens=1_010, output_tokens=3)

    async def read() -> Any:
        stream = await allama.aextract_stream(make(), Named, request)
        await stream.aclose()
        with pytest.raises(Error, match=CLOSED_EARLY) as caught:
            await stream.finish()
        return ExtractionMetadata.from_error(caught.value)

    record = run(read())
    assert record is not None and record.usage == Usage(input_tokens=1_010, output_tokens=3)


@pytest.mark.parametrize(
    "mode", [None, allama.ExtractionMode.NATIVE, allama.ExtractionMode.FORCED_TOOL]
)
def test_a_wrapped_extraction_stream_dropped_unclosed_ends_its_span_with_what_was_paid(
    mode: allama.ExtractionMode | None,
) -> None:
    import gc

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    inner = MockStreamingProvider([_paid_stream(), _ANSWER_STREAM], name="a")
    # The usage the retry read ahead of the answer reaches the outer stream when the
    # inner one is closed, which a dropped stream never is: its span counts it still.
    request = REQUEST if mode is None else REQUEST.with_option(mode)
    stream = allama.Extractor(tracer_provider=tracing).extract_stream(
        retrying(inner, Clock()), Named, request
    )
    next(stream)
    del stream
    gc.collect()
    (span,) = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert attributes["allama.stream.closed_early"] is True
    assert attributes["allama.extract.usage.input_tokens"] == 1_010


def test_a_mock_streaming_providers_chat_says_what_a_failed_stream_reported() -> None:
    inner = MockStreamingProvider([_paid_stream(), _ANSWER_STREAM], name="a")
    extracted = allama.extract(retrying(inner, Clock()), Named, REQUEST)
    assert extracted.metadata.usage == Usage(input_tokens=1_010, output_tokens=3)

    async def answer() -> Any:
        inner = MockStreamingProvider([_paid_stream(), _ANSWER_STREAM], name="a")
        return (await allama.aextract(retrying(inner, Clock()), Named, REQUEST)).metadata.usage

    assert run(answer()) == Usage(input_tokens=1_010, output_tokens=3)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_failover_is_tried_again_when_any_of_its_providers_may_pass(flavour: str) -> None:
    # The first is overloaded a moment, the backup refuses its key: the error raised is the
    # backup's, not worth retrying alone, but the failover tried again is served by the first.
    clock = Clock()
    first = MockProvider([OverloadedError("busy"), "ok"])
    backup = MockProvider([allama.AuthenticationError("bad key")] * 2)
    provider = retrying(FailoverProvider([first, backup]), clock)
    response = provider.chat(REQUEST) if flavour == "sync" else run(provider.achat(REQUEST))
    assert response.text() == "ok"
    assert (first.call_count, backup.call_count) == (2, 1)
    # A backup that refuses the request (too long for it, invalid) meets it again: raised.
    for refusal in (allama.ContextWindowExceededError("long"), InvalidRequestError("bad")):
        first = MockProvider([OverloadedError("busy"), "ok"])
        backup = MockProvider([refusal])
        with pytest.raises(type(refusal)):
            retrying(FailoverProvider([first, backup]), clock).chat(REQUEST)
        assert (first.call_count, backup.call_count) == (1, 1)
    # Where none may pass, the error is raised at once.
    refused = MockProvider([allama.AuthenticationError("bad key")])
    other = MockProvider([allama.AuthenticationError("bad key")])
    with pytest.raises(allama.AuthenticationError):
        retrying(FailoverProvider([refused, other]), clock).chat(REQUEST)
    assert (refused.call_count, other.call_count) == (1, 1)


def test_a_retry_around_a_retry_says_both_counts_on_the_error_it_raises() -> None:
    # "The number of attempts is never hidden": 2 outer attempts of 3 inner calls each.
    clock = Clock()
    inner = MockProvider([ServerError("busy") for _ in range(6)])
    policy = RetryPolicy(max_attempts=3)
    outer = retrying(retrying(inner, clock, policy), clock, RetryPolicy(max_attempts=2))
    with pytest.raises(ServerError) as caught:
        outer.chat(REQUEST)
    assert inner.call_count == 6
    assert attempts_of(caught.value) == {
        "attempts": 2,
        "gave_up": "max_attempts",
        "inner": {"attempts": 3, "gave_up": "max_attempts"},
    }


# A policy's numbers are numbers, and a retry that stops says why


@pytest.mark.parametrize(
    "count", [float("nan"), float("inf"), 2.5, 2.0, True, False, "3", None, 0, -1]
)
def test_a_policy_refuses_a_count_of_attempts_that_is_not_a_whole_number(count: Any) -> None:
    # A NaN count passed `< 1` and every later comparison: the call was retried without end,
    # each attempt paid for. `True` is an `int`, a flag passed as a count.
    with pytest.raises(ValueError) as caught:
        RetryPolicy(max_attempts=count, budget=None)
    assert str(caught.value) == f"max_attempts must be a whole number of at least 1, not {count!r}"
    with pytest.raises(ValueError, match="max_attempts must be a whole number of at least 1"):
        import dataclasses

        dataclasses.replace(RetryPolicy(), max_attempts=count)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("jitter", float("nan")),
        ("jitter", True),
        ("budget", True),
        ("max_retry_after", False),
        ("initial_backoff", True),
        ("max_backoff", "20"),
        ("multiplier", None),
        ("max_retry_after", None),
    ],
)
def test_a_policy_refuses_a_flag_or_text_for_a_time_or_a_factor(name: str, value: Any) -> None:
    with pytest.raises(ValueError) as caught:
        RetryPolicy(**{name: value})
    assert str(caught.value) == f"{name} must be a number, not {value!r}"


def test_a_policy_takes_whole_numbers_of_seconds_and_no_bound() -> None:
    policy = RetryPolicy(max_attempts=1, initial_backoff=0, max_backoff=5, budget=10, jitter=0)
    assert (policy.max_attempts, policy.budget) == (1, 10)
    assert RetryPolicy(budget=None).budget is None
    assert RetryPolicy(budget=float("inf"), max_retry_after=float("inf")).max_attempts == 3


def test_a_policy_takes_a_whole_number_of_attempts_of_any_integral_type() -> None:
    # A count read from a numpy array or a dataframe is a whole number too; its bool is not.
    np = pytest.importorskip("numpy")
    assert RetryPolicy(max_attempts=np.int64(3)).max_attempts == 3
    with pytest.raises(ValueError, match="must be a whole number of at least 1"):
        RetryPolicy(max_attempts=np.bool_(True))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_policy_of_numpy_or_fraction_seconds_waits_in_sync_calls_as_in_async(
    flavour: str,
) -> None:
    # A sync wait (`threading.Event.wait`) refuses a float32 or a Fraction: kept as given,
    # they turned the first retry of a sync call into a TypeError.
    np = pytest.importorskip("numpy")
    from fractions import Fraction

    policy = RetryPolicy(
        max_attempts=np.int64(2),
        initial_backoff=np.float32(0.01),
        max_backoff=Fraction(1, 50),
        jitter=0,
    )
    assert [type(policy.max_attempts), type(policy.initial_backoff)] == [int, float]
    assert (policy.initial_backoff, policy.max_backoff) == (float(np.float32(0.01)), 0.02)
    retrying = RetryingProvider(MockProvider([ServerError("busy"), "ok"]), policy)
    response = retrying.chat(REQUEST) if flavour == "sync" else run(retrying.achat(REQUEST))
    assert response.text() == "ok"


def test_a_policy_takes_decimal_seconds_and_a_whole_number_too_large_for_a_float() -> None:
    # `Decimal` was refused as no number, and `10**400` raised Python's OverflowError.
    from decimal import Decimal

    policy = RetryPolicy(initial_backoff=Decimal("0.5"), budget=10**400)
    assert (policy.initial_backoff, policy.budget) == (0.5, float("inf"))
    for bad in (Decimal("NaN"), Decimal("sNaN")):
        with pytest.raises(ValueError, match="initial_backoff must be a number"):
            RetryPolicy(initial_backoff=bad)


def _gave_up(provider: RetryingProvider, flavour: str, error: type[Error] = Error) -> Any:
    """The `allama.retry` record of the error `provider` raised, called sync or async."""
    with pytest.raises(error) as caught:
        if flavour == "sync":
            provider.chat(REQUEST)
        else:
            run(provider.achat(REQUEST))
    return attempts_of(caught.value)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_wait_asked_beyond_max_retry_after_is_said_with_both_numbers(flavour: str) -> None:
    clock = Clock()
    inner = MockProvider([RateLimitedError("slow down, says the provider", retry_after=120.0)])
    record = _gave_up(retrying(inner, clock), flavour, RateLimitedError)
    assert record == {
        "attempts": 1,
        "gave_up": "max_retry_after",
        "retry_after": 120.0,
        "max_retry_after": 60.0,
    }
    assert (inner.call_count, clock.sleeps) == (1, [])


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_time_budget_with_no_room_for_the_next_wait_is_said(flavour: str) -> None:
    clock = Clock()
    inner = MockProvider([OverloadedError("busy")] * 3 + ["ok"])
    policy = RetryPolicy(jitter=0.0, initial_backoff=10.0, budget=15, max_attempts=5)
    record = _gave_up(retrying(inner, clock, policy), flavour, OverloadedError)
    # Waited 10 s after the first; 10 + 20 would end past 15.
    assert record == {"attempts": 2, "gave_up": "budget", "budget": 15.0}
    assert (inner.call_count, clock.sleeps) == (2, [10.0])


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_attempts_spent_and_an_error_not_worth_retrying_are_told_apart(flavour: str) -> None:
    clock = Clock()
    spent = MockProvider([ServerError("busy")] * 3 + ["ok"])
    assert _gave_up(retrying(spent, clock), flavour, ServerError) == {
        "attempts": 3,
        "gave_up": "max_attempts",
    }
    refused = MockProvider([ServerError("busy"), InvalidRequestError("bad"), "ok"])
    assert _gave_up(retrying(refused, clock), flavour, InvalidRequestError) == {
        "attempts": 2,
        "gave_up": "not_retryable",
    }
    # On its last attempt, an error not worth retrying says so: none was left, but it would
    # not have been sent again either.
    last = MockProvider([InvalidRequestError("bad")])
    one = RetryPolicy(max_attempts=1)
    assert _gave_up(retrying(last, clock, one), flavour) == {
        "attempts": 1,
        "gave_up": "not_retryable",
    }
    # A failover whose providers all refused the account: not worth sending again.
    refusing = FailoverProvider(
        [MockProvider([allama.AuthenticationError("bad key")], name=n) for n in ("a", "b")]
    )
    assert _gave_up(retrying(refusing, clock), flavour, allama.AuthenticationError) == {
        "attempts": 1,
        "gave_up": "not_retryable",
    }


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_wait_no_sleep_takes_is_said(flavour: str) -> None:
    clock = Clock()
    inner = MockProvider([ServerError("a"), ServerError("b"), "ok"])
    policy = RetryPolicy(
        max_backoff=float("inf"), budget=1e308, multiplier=1e300, jitter=0.0, max_attempts=4
    )
    record = _gave_up(retrying(inner, clock, policy), flavour, ServerError)
    assert record == {"attempts": 2, "gave_up": "wait_too_long"}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_wrapper_closed_during_its_wait_says_it_closed(flavour: str) -> None:
    inner = MockProvider([ServerError("busy"), "never"])
    provider: RetryingProvider

    def sleep(seconds: float) -> None:
        provider.close()

    async def async_sleep(seconds: float) -> None:
        await provider.aclose()

    provider = RetryingProvider(inner, sleep=sleep, async_sleep=async_sleep, random=lambda: 0.5)
    assert _gave_up(provider, flavour, ServerError) == {"attempts": 1, "gave_up": "closed"}
    assert inner.call_count == 1


def test_a_stream_that_gives_up_while_it_opens_says_why() -> None:
    clock = Clock()
    inner = MockStreamingProvider().then_setup_error(RateLimitedError("later", retry_after=90.0))
    with pytest.raises(RateLimitedError) as caught:
        retrying(inner, clock).chat_stream(REQUEST)
    assert attempts_of(caught.value) == {
        "attempts": 1,
        "gave_up": "max_retry_after",
        "retry_after": 90.0,
        "max_retry_after": 60.0,
    }


def test_why_a_retry_gave_up_is_in_the_log_line_and_never_the_providers_words() -> None:
    clock = Clock()
    words = "Please wait two minutes, key sk-secret"
    inner = MockProvider([RateLimitedError(words, retry_after=120.0)])
    with pytest.raises(RateLimitedError) as caught:
        retrying(inner, clock).chat(REQUEST)
    line = str(caught.value.as_log())
    assert (
        "allama.retry.attempts=1 allama.retry.gave_up=max_retry_after "
        "allama.retry.retry_after=120.0 allama.retry.max_retry_after=60.0"
    ) in line
    assert "sk-secret" not in repr(attempts_of(caught.value)) and "Please" not in line
