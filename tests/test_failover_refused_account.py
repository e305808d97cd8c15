"""A failover passes over a provider that refused its key or account (a spent quota, a key
refused) for `refused_account_wait` seconds: such a refusal asks no wait, yet meets every
request, and the calls that follow go straight to the next provider rather than each
paying a round trip to it again (in a batch run, one per input)."""

from __future__ import annotations

import asyncio

import pytest

import allama
from allama import FailoverProvider
from allama.errors import (
    AuthenticationError,
    OverloadedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitedError,
    errors_in_chain,
)
from allama.mock import ChatResponseBuilder, FunctionProvider, MockProvider

REQUEST = allama.ChatRequest("m").user("hi")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _skipped(provider: str, why: str, seconds_left: float) -> dict[str, object]:
    return {"provider": provider, "why": why, "seconds_left": seconds_left}


@pytest.mark.parametrize(
    ("refusal", "why"),
    [
        (QuotaExceededError("You exceeded your current quota"), "quota_exceeded"),
        (AuthenticationError("Incorrect API key provided"), "authentication"),
    ],
)
def test_a_refused_account_is_called_once_across_three_calls(
    refusal: allama.Error, why: str
) -> None:
    clock = Clock()
    first = MockProvider([refusal, "from a"], name="a")
    second = MockProvider(["b1", "b2", "b3"], name="b")
    both = FailoverProvider([first, second], clock=clock)

    answered = both.chat(REQUEST)
    assert (answered.text(), answered.provider_data["allama"]["failover"]) == (
        "b1",
        {"attempts": 2, "providers": ["a", "b"]},
    )
    clock.now += 10.0
    straight = both.chat(REQUEST)
    assert (straight.text(), straight.provider_data["allama"]["failover"]) == (
        "b2",
        {"attempts": 1, "providers": ["b"], "skipped": [_skipped("a", why, 50.0)]},
    )
    clock.now += 20.5
    again = both.chat(REQUEST)
    assert (again.text(), again.provider_data["allama"]["failover"]) == (
        "b3",
        {"attempts": 1, "providers": ["b"], "skipped": [_skipped("a", why, 29.5)]},
    )
    assert (len(first.requests), len(second.requests)) == (1, 3)


def test_a_permission_denied_is_tried_each_call() -> None:
    """It may be about one model the account lacks, while others work."""
    first = MockProvider([PermissionDeniedError("no access to m")] * 3, name="a")
    both = FailoverProvider([first, MockProvider(["b1", "b2", "b3"], name="b")], clock=Clock())
    records = [both.chat(REQUEST).provider_data["allama"]["failover"] for _ in range(3)]
    assert records == [{"attempts": 2, "providers": ["a", "b"]}] * 3
    assert len(first.requests) == 3


def test_a_wait_of_0_tries_a_refused_account_each_call() -> None:
    first = MockProvider([QuotaExceededError("quota")] * 3, name="a")
    both = FailoverProvider(
        [first, MockProvider(["b1", "b2", "b3"], name="b")],
        clock=Clock(),
        refused_account_wait=0,
    )
    records = [both.chat(REQUEST).provider_data["allama"]["failover"] for _ in range(3)]
    assert records == [{"attempts": 2, "providers": ["a", "b"]}] * 3
    assert len(first.requests) == 3


def test_the_wait_passed_the_refused_account_is_tried_again() -> None:
    clock = Clock()
    first = MockProvider([AuthenticationError("key revoked"), "from a"], name="a")
    both = FailoverProvider(
        [first, MockProvider(["b1", "b2"], name="b")], clock=clock, refused_account_wait=30.0
    )
    both.chat(REQUEST)
    clock.now += 29.0
    assert both.chat(REQUEST).text() == "b2"
    clock.now += 1.0  # the wait is over: the first provider is tried first again
    again = both.chat(REQUEST)
    assert (again.text(), again.provider_data) == ("from a", {})
    assert len(first.requests) == 2


def test_where_every_provider_refused_the_one_whose_wait_ends_first_is_tried() -> None:
    clock = Clock()
    first = MockProvider([QuotaExceededError("quota a")] * 2, name="a")
    second = MockProvider([AuthenticationError("key b")] * 2, name="b")
    both = FailoverProvider([first, second], clock=clock)

    with pytest.raises(AuthenticationError) as raised:
        both.chat(REQUEST)
    assert [type(link) for link in errors_in_chain(raised.value)] == [
        AuthenticationError,
        QuotaExceededError,
    ]

    clock.now += 5.0  # both wait 55 s more: the first of them is tried, and its error raised
    with pytest.raises(QuotaExceededError) as raised_again:
        both.chat(REQUEST)
    assert str(raised_again.value) == "quota a"
    assert errors_in_chain(raised_again.value) == [raised_again.value]
    assert raised_again.value.context.metadata["allama.failover"] == {
        "skipped": [_skipped("b", "authentication", 55.0)]
    }

    clock.now += 1.0  # the first's wait began again as it refused: now the second's ends first
    with pytest.raises(AuthenticationError) as raised_last:
        both.chat(REQUEST)
    assert raised_last.value.context.metadata["allama.failover"] == {
        "skipped": [_skipped("a", "quota_exceeded", 59.0)]
    }
    assert (len(first.requests), len(second.requests)) == (2, 2)


def test_a_refused_account_that_answers_when_tried_is_waited_for_no_longer() -> None:
    clock = Clock()
    first = MockProvider([QuotaExceededError("quota"), "a1", "a2"], name="a")
    second = MockProvider([AuthenticationError("key")], name="b")
    both = FailoverProvider([first, second], clock=clock)
    with pytest.raises(AuthenticationError):
        both.chat(REQUEST)
    clock.now += 1.0
    assert both.chat(REQUEST).provider_data["allama"]["failover"] == {
        "attempts": 1,
        "providers": ["a"],
        "skipped": [_skipped("b", "authentication", 59.0)],
    }
    # It answered: its wait is over, while the other's still runs.
    assert both.chat(REQUEST).provider_data["allama"]["failover"] == {
        "attempts": 1,
        "providers": ["a"],
        "skipped": [_skipped("b", "authentication", 59.0)],
    }
    assert (len(first.requests), len(second.requests)) == (3, 1)


def test_a_failover_within_whose_first_provider_may_serve_is_not_passed_over() -> None:
    """Its error is the last provider's refusal, but an overloaded one may serve the next
    call: only a failover within whose every provider refused is passed over."""
    inner = FailoverProvider(
        [
            MockProvider([OverloadedError("busy"), "inner a"], name="ia"),
            MockProvider([AuthenticationError("key")], name="ib"),
        ],
        clock=Clock(),
    )
    outer = FailoverProvider([inner, MockProvider(["b1"], name="b")], clock=Clock())
    assert outer.chat(REQUEST).text() == "b1"
    assert outer.chat(REQUEST).text() == "inner a"


def test_the_async_calls_pass_a_refused_account_over_too() -> None:
    clock = Clock()
    first = MockProvider([QuotaExceededError("quota")], name="a")
    second = MockProvider(["b1", "b2", "b3"], name="b")
    both = FailoverProvider([first, second], clock=clock)

    async def three() -> list[allama.ChatResponse]:
        answers = [await both.achat(REQUEST)]
        clock.now += 0.25
        answers.append(await both.achat(REQUEST))
        async with await both.achat_stream(REQUEST) as stream:
            answers.append(await stream.response())
        return answers

    answers = asyncio.run(three())
    assert [answer.text() for answer in answers] == ["b1", "b2", "b3"]
    assert [answer.provider_data["allama"]["failover"] for answer in answers[1:]] == [
        {"attempts": 1, "providers": ["b"], "skipped": [_skipped("a", "quota_exceeded", 59.75)]}
    ] * 2
    assert len(first.requests) == 1


def test_the_async_calls_where_every_provider_refused_raise_the_first_to_end() -> None:
    clock = Clock()
    first = MockProvider([AuthenticationError("key a")] * 2, name="a")
    second = MockProvider([QuotaExceededError("quota b")], name="b")
    both = FailoverProvider([first, second], clock=clock, refused_account_wait=10.0)

    async def twice() -> allama.Error:
        with pytest.raises(QuotaExceededError):
            await both.achat(REQUEST)
        clock.now += 2.0
        with pytest.raises(AuthenticationError) as raised:
            await both.achat(REQUEST)
        return raised.value

    error = asyncio.run(twice())
    assert str(error) == "key a"
    assert error.context.metadata["allama.failover"] == {
        "skipped": [_skipped("b", "quota_exceeded", 8.0)]
    }
    assert (len(first.requests), len(second.requests)) == (2, 1)


@pytest.mark.parametrize(
    "wait",
    [-1.0, float("nan"), float("inf"), True, "60", 10**400],
    ids=["negative", "nan", "inf", "bool", "str", "huge-int"],
)
def test_a_wait_that_is_not_a_finite_number_of_seconds_0_or_more_is_refused(
    wait: object,
) -> None:
    with pytest.raises(ValueError) as raised:
        FailoverProvider([MockProvider(["a"])], refused_account_wait=wait)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "refused_account_wait must be a finite number of seconds, 0 or more (0 keeps no wait), "
        f"not {wait!r}"
    )


def test_a_whole_number_of_seconds_is_kept_as_a_float() -> None:
    assert (
        FailoverProvider([MockProvider(["a"])], refused_account_wait=30).refused_account_wait
        == 30.0
    )


def test_a_failover_within_that_passed_a_provider_over_is_waited_for_no_longer_than_it() -> None:
    """Its error is its last provider's refused key alone: the first, passed over for a 429's
    5 s, serves once they have passed (the failover within keeps its own waits)."""
    clock = Clock()
    first = MockProvider([RateLimitedError("busy").with_retry_after(5.0), "from a"], name="a")
    second = MockProvider(["b1", AuthenticationError("key revoked")], name="b")
    inner = FailoverProvider([first, second], clock=clock, name="inner")
    outer = FailoverProvider([inner, MockProvider(["c1", "c2"], name="c")], clock=clock)

    assert outer.chat(REQUEST).text() == "b1"  # a: 429, waits 5 s
    clock.now += 1.0
    assert outer.chat(REQUEST).text() == "c1"  # a passed over, b: key refused
    clock.now += 1.0
    passed = outer.chat(REQUEST)
    assert (passed.text(), passed.provider_data["allama"]["failover"]) == (
        "c2",
        {"attempts": 1, "providers": ["c"], "skipped": [_skipped("inner", "authentication", 3.0)]},
    )
    clock.now += 8.0
    served = outer.chat(REQUEST)
    assert (served.text(), served.provider_data["allama"]["failover"]) == (
        "from a",
        {"attempts": 1, "providers": ["a"], "skipped": [_skipped("b", "authentication", 51.0)]},
    )
    assert (len(first.requests), len(second.requests)) == (2, 2)


def test_a_failover_within_whose_keys_were_refused_in_turn_is_passed_over_until_the_first() -> None:
    """Its first key refused, then its second: it is passed over until the first one's wait
    ends (not 60 s from the second's refusal), and sent nothing meanwhile."""
    clock = Clock()
    first = MockProvider([AuthenticationError("key a revoked")], name="a")
    second = MockProvider(["b1", AuthenticationError("key b revoked")], name="b")
    inner = FailoverProvider([first, second], clock=clock, name="inner")
    outer = FailoverProvider([inner, MockProvider(["c1", "c2"], name="c")], clock=clock)

    assert outer.chat(REQUEST).text() == "b1"
    clock.now += 1.0
    assert outer.chat(REQUEST).text() == "c1"
    clock.now += 1.0
    assert outer.chat(REQUEST).provider_data["allama"]["failover"] == {
        "attempts": 1,
        "providers": ["c"],
        "skipped": [_skipped("inner", "authentication", 58.0)],
    }
    assert (len(first.requests), len(second.requests)) == (1, 2)


GEMINI_PRO_QUOTA = (
    "Quota exceeded for metric: generativelanguage.googleapis.com/"
    "generate_content_free_tier_requests, limit: 0, model: gemini-2.5-pro"
)


def _gemini(refusal: allama.Error) -> tuple[FunctionProvider, list[str]]:
    """A provider that refuses `gemini-2.5-pro` with `refusal` and answers other models."""
    asked: list[str] = []

    def answer(request: allama.ChatRequest) -> allama.ChatResponse:
        asked.append(request.model)
        if request.model == "gemini-2.5-pro":
            raise refusal
        return ChatResponseBuilder().text(f"gemini: {request.model}").build()

    return FunctionProvider(answer, name="gemini"), asked


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_a_spent_quota_passes_its_provider_over_for_that_model_alone(sync: bool) -> None:
    clock = Clock()
    gemini, asked = _gemini(QuotaExceededError(GEMINI_PRO_QUOTA))
    both = FailoverProvider([gemini, MockProvider(["b1", "b2"], name="backup")], clock=clock)
    pro = allama.ChatRequest("gemini-2.5-pro").user("hi")
    flash = allama.ChatRequest("gemini-2.5-flash").user("hi")

    async def asked_in_turn(request: allama.ChatRequest) -> allama.ChatResponse:
        return await both.achat(request)

    answers = []
    for request in [pro, flash, pro]:
        answers.append(both.chat(request) if sync else asyncio.run(asked_in_turn(request)))
        clock.now += 1.0
    assert [(answer.text(), answer.provider_data) for answer in answers] == [
        ("b1", {"allama": {"failover": {"attempts": 2, "providers": ["gemini", "backup"]}}}),
        # The flash model's quota is not pro's: it is sent there, and served.
        ("gemini: gemini-2.5-flash", {}),
        # Served for flash, the provider still waits out pro's quota.
        (
            "b2",
            {
                "allama": {
                    "failover": {
                        "attempts": 1,
                        "providers": ["backup"],
                        "skipped": [_skipped("gemini", "quota_exceeded", 58.0)],
                    }
                }
            },
        ),
    ]
    assert asked == ["gemini-2.5-pro", "gemini-2.5-flash"]


def test_a_refused_key_passes_its_provider_over_for_every_model() -> None:
    """A key is the account's: another model's calls meet it too."""
    clock = Clock()
    gemini, asked = _gemini(AuthenticationError("API key not valid"))
    both = FailoverProvider([gemini, MockProvider(["b1", "b2"], name="backup")], clock=clock)
    both.chat(allama.ChatRequest("gemini-2.5-pro").user("hi"))
    clock.now += 1.0
    flash = both.chat(allama.ChatRequest("gemini-2.5-flash").user("hi"))
    assert (flash.text(), flash.provider_data["allama"]["failover"]) == (
        "b2",
        {
            "attempts": 1,
            "providers": ["backup"],
            "skipped": [_skipped("gemini", "authentication", 59.0)],
        },
    )
    assert asked == ["gemini-2.5-pro"]
