"""The batch rate limiter, on an event loop whose clock is virtual: a sleep takes no time,
so every wait is exact and the tests are fast."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _virtual_loop import VirtualLoop
from allama.batch._limits import RateLimiter


def run(main: Coroutine[Any, Any, Any]) -> Any:
    loop = VirtualLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


def test_a_pause_holds_the_requests_already_waiting_for_their_turn() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(rpm=60, clock=loop.time)
        sends = [asyncio.create_task(limiter.acquire()) for _ in range(6)]
        await asyncio.sleep(0.5)
        limiter.slow_down(30.0, sent_at=0.0)  # a 429 asking for 30 s
        return [await send for send in sends]

    sent = sorted(run(main()))
    assert sent[0] == 0.0
    assert all(moment >= 30.5 for moment in sent[1:])  # none inside the pause
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent[1:])]
    assert min(gaps) >= 1.5  # the rate was halved, recovering during the pause


def test_tokens_are_taken_with_the_turn_so_waiting_requests_share_none() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(rpm=600, tpm=10_000, clock=loop.time)
        return list(await asyncio.gather(*(limiter.acquire(5_000) for _ in range(6))))

    sent = run(main())
    # Two requests' tokens a minute: the next two go when the first two are a minute old.
    assert sorted(round(moment, 6) for moment in sent) == [0.0, 0.1, 60.0, 60.1, 120.0, 120.1]


def test_a_burst_of_429s_answering_requests_sent_together_is_one() -> None:
    now = [0.0]
    limiter = RateLimiter(rpm=600, clock=lambda: now[0])
    now[0] = 1.0
    pauses = [limiter.slow_down(None, sent_at=0.0) for _ in range(8)]
    assert pauses == [1.0] * 8  # not 1, 2, 4 ... 60
    assert limiter.rpm_in_force == 300.0
    assert (limiter.slowdowns, limiter.rate_limited) == (1, 8)


def test_the_rate_recovers_by_a_tenth_every_ten_seconds() -> None:
    now = [0.0]
    limiter = RateLimiter(rpm=60, clock=lambda: now[0])
    limiter.slow_down(0.001, sent_at=0.0)
    assert limiter.rpm_in_force == 30.0

    async def main() -> None:
        for moment in (15.0, 30.0, 45.0, 60.0):  # each acquire a while after the last
            now[0] = moment
            await limiter.acquire()

    asyncio.run(main())
    assert limiter.rpm_in_force == pytest.approx(30 * 1.1**6)


def test_429s_with_nothing_answered_between_them_cut_the_rate_once() -> None:
    """A provider that refuses everything for a while (its minute not over, a storm): the
    backoff grows, but the rate is cut again only once something sent at the cut rate was
    answered, and a 429 still came."""
    now = [0.0]
    limiter = RateLimiter(rpm=600, clock=lambda: now[0])
    assert limiter.slow_down(None, sent_at=0.0) == 1.0
    assert (limiter.rpm_in_force, limiter.slowdowns) == (300.0, 1)
    pauses = []
    for _ in range(5):  # each request sent after the last 429 is answered 429 in turn
        now[0] += 1.0
        sent = now[0]
        now[0] += 0.1
        pauses.append(limiter.slow_down(None, sent_at=sent))
    assert pauses == [2.0, 4.0, 8.0, 16.0, 32.0]
    assert (limiter.rpm_in_force, limiter.slowdowns, limiter.rate_limited) == (300.0, 1, 6)
    # Served again, at the cut rate, and then a 429: the rate is still too high.
    now[0] += 40.0
    limiter.served(now[0])
    now[0] += 1.0
    sent = now[0]
    limiter.slow_down(0.5, sent_at=sent)
    assert (limiter.rpm_in_force, limiter.slowdowns) == (150.0, 2)
    # A request answered that was sent before that 429 is no news of the rate cut to.
    limiter.served(sent - 0.5)
    now[0] += 1.0
    limiter.slow_down(0.5, sent_at=now[0] - 0.1)
    assert (limiter.rpm_in_force, limiter.slowdowns) == (150.0, 2)


def test_an_answer_slower_than_the_429s_after_it_still_lets_the_next_cut_the_rate() -> None:
    """A provider whose answers take longer than the gap between its 429s: a request sent
    at the cut rate, answered after a later 429 that cut nothing, is news of that rate."""
    now = [0.0]
    limiter = RateLimiter(rpm=600, clock=lambda: now[0])
    limiter.slow_down(None, sent_at=0.0)  # cut to 300
    now[0] = 1.2
    limiter.slow_down(None, sent_at=1.2)  # nothing answered since the cut: no cut
    now[0] = 3.0
    limiter.served(1.0)  # sent at 1.0, at the cut rate, answered 2 s later
    now[0] = 3.5
    limiter.slow_down(None, sent_at=3.5)
    assert (limiter.rpm_in_force, limiter.slowdowns) == (150.0, 2)


def test_the_first_429_after_a_quiet_spell_backs_off_from_the_start() -> None:
    now = [0.0]
    limiter = RateLimiter(rpm=60, clock=lambda: now[0])
    assert limiter.slow_down(None) == 1.0
    now[0] = 101.0
    asyncio.run(limiter.acquire())  # recovering does not count as a 429
    assert limiter.slow_down(None) == 1.0


def test_a_days_pause_and_a_storm_of_429s_do_not_overflow() -> None:
    now = [0.0]
    limiter = RateLimiter(rpm=60, clock=lambda: now[0])
    assert limiter.slow_down(86_400.0) == 86_400.0
    now[0] = 86_400.0
    asyncio.run(limiter.acquire())  # 1.1 ** 8640 would overflow: the rate is whole again
    assert limiter.rpm_in_force == 60.0
    storm = [limiter.slow_down(None) for _ in range(1_100)]  # 2 ** 1024 would overflow
    # Right as the day's pause ends: a second 429 in a row.
    assert storm[:6] == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0] and storm[-1] == 60.0


def test_the_backoff_keeps_doubling_while_429s_follow_its_pauses() -> None:
    now = [0.0]
    limiter = RateLimiter(rpm=60, clock=lambda: now[0])
    pauses = []
    for _ in range(8):  # each 429 comes half a second after the last pause ended
        pauses.append(limiter.slow_down(None))
        now[0] += pauses[-1] + 0.5
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]  # not 16, then 1 again


def test_a_rate_guessed_from_a_first_burst_recovers_past_it() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])  # no rpm given

    async def send(count: int) -> None:
        for _ in range(count):
            await limiter.acquire()

    asyncio.run(send(8))  # eight requests in the run's first moment, and a 429
    now[0] = 0.01
    limiter.slow_down(0.001, sent_at=0.0)
    assert limiter.rpm_in_force == 240.0  # eight a second (a second at least), halved
    now[0] = 600.0  # ten quiet minutes
    asyncio.run(send(1))
    # Past the 480 a minute it guessed: no `rpm` was given, so it is no limit of the run.
    assert limiter.rpm_in_force == pytest.approx(480.0 * 0.5 * 1.1**44)
    given = RateLimiter(rpm=480, clock=lambda: now[0])
    given.slow_down(0.001, sent_at=0.0)
    now[0] = 1200.0
    asyncio.run(given.acquire())
    assert given.rpm_in_force == 480.0  # one given is kept


def test_a_later_429_halves_the_rate_the_run_sends_at_not_what_recovery_counted_to() -> None:
    async def main() -> tuple[float | None, float | None]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(clock=loop.time)  # no rpm given
        for _ in range(20):  # two a second, each answered
            limiter.served(await limiter.acquire())
            await asyncio.sleep(0.5)
        limiter.slow_down(0.5, sent_at=loop.time())
        first = limiter.rpm_in_force  # 120 a minute measured, halved
        # Ten minutes on at two a second, which the run's own pace holds to (the limit
        # recovered far past it), then a second 429.
        await asyncio.sleep(600.0)
        for _ in range(40):
            limiter.served(await limiter.acquire())
            await asyncio.sleep(0.5)
        limiter.slow_down(0.5, sent_at=loop.time())
        return first, limiter.rpm_in_force

    first, second = run(main())
    assert first == pytest.approx(60.0, rel=0.05)
    assert second == pytest.approx(60.0, rel=0.05)  # before: 53,000 a minute, no limit


def test_the_pause_before_a_429_is_sent_again_counts_as_waited() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(clock=loop.time)
        await limiter.acquire()
        pause = limiter.slow_down(3.0, sent_at=loop.time())
        await limiter.sleep(pause, counted=True)  # the input answered 429 waits to go again
        await limiter.sleep(2.0)  # an overloaded server's backoff is no wait on the limits
        return limiter.waited

    assert run(main()) == 3.0


def test_a_halt_ends_every_wait_at_once() -> None:
    async def main() -> tuple[list[float], float]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(rpm=1, clock=loop.time)  # a minute apart
        turns = [asyncio.create_task(limiter.acquire()) for _ in range(4)]
        resting = asyncio.create_task(limiter.sleep(3600.0))  # a wait before a try again
        await asyncio.sleep(5.0)
        limiter.halt()
        moments = [await turn for turn in turns]
        await resting
        return moments, loop.time()

    moments, ended = run(main())
    assert sorted(moments) == [0.0, 5.0, 5.0, 5.0]  # not 60, 120 and 180
    assert ended == 5.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=9_000), min_size=1, max_size=40))
def test_the_tokens_of_any_minute_stay_within_tpm(sizes: list[int]) -> None:
    """From the start (no full bucket to spend at once): any 60 seconds hold `tpm` tokens
    at most, but for a request larger than `tpm`, which goes alone."""
    tpm = 6_000

    async def main() -> list[tuple[float, int]]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(tpm=tpm, clock=loop.time)

        async def one(size: int) -> tuple[float, int]:
            return await limiter.acquire(size), size

        return list(await asyncio.gather(*(one(size) for size in sizes)))

    sent = sorted(run(main()))
    for start, _ in sent:
        window = [size for moment, size in sent if start <= moment < start + 60.0]
        assert sum(window) <= tpm or len(window) == 1


def test_a_requests_tokens_count_as_its_usage_said() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(tpm=10_000, clock=loop.time)
        first = await limiter.acquire(8_000)
        limiter.spent(8_000, 2_000, first)  # it used a quarter of its estimate
        second = await limiter.acquire(8_000)  # room for it: 2,000 + 8,000
        limiter.spent(8_000, 9_000, second)  # more than its estimate
        third = await limiter.acquire(1_000)  # 11,000 in the minute: when the first leaves
        return [first, second, third]

    assert run(main()) == [0.0, 0.0, 60.0]


def test_a_wait_a_halt_ends_is_counted_as_waited() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(rpm=60, clock=loop.time)
        limiter.slow_down(30.0)  # a 429 asking for 30 s
        waiting = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(4.0)
        limiter.halt()
        await waiting
        return limiter.waited

    assert run(main()) == 4.0


def test_a_request_waiting_for_room_goes_when_an_answer_frees_some() -> None:
    async def main() -> tuple[float, float, int]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(tpm=10_000, clock=loop.time)
        first = await limiter.acquire(8_000)
        waiting = asyncio.create_task(limiter.acquire(5_000))  # room in a minute
        await asyncio.sleep(2.0)
        limiter.spent(8_000, 3_000, first, output=1_200)  # answered: 3,000 used
        return first, await waiting, limiter.output_guess()

    # Not the minute it reckoned from the estimate: when the answer said.
    assert run(main()) == (0.0, 2.0, 1_200)


def test_the_output_of_the_last_answers_on_average_is_counted_before_an_answer_says() -> None:
    limiter = RateLimiter(tpm=10_000)
    assert limiter.output_guess() == 0  # no answer yet
    for output in [100] * 31 + [9_000]:
        limiter.spent(0, None, output=output)
    # One long answer does not hold back every request after it.
    assert limiter.output_guess() == -(-(31 * 100 + 9_000) // 32) == 379
    for _ in range(32):
        limiter.spent(0, None, output=50)
    assert limiter.output_guess() == 50  # the last 32 answers'


def test_requests_waiting_at_the_old_rate_take_their_turn_again_when_it_changes() -> None:
    async def cut() -> list[float]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(rpm=120, clock=loop.time)  # half a second apart
        sends = [asyncio.create_task(limiter.acquire()) for _ in range(16)]
        await asyncio.sleep(0.2)
        limiter.slow_down(1.0, sent_at=0.0)  # a 429 asking for a second
        return [await send for send in sends]

    sent = sorted(run(cut()))
    assert sent[0] == 0.0
    assert sent[1] >= 1.2  # none inside the pause
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent[1:])]
    # The halved rate, for every request that waited, until it recovers a tenth ten
    # seconds after the 429.
    early = [gap for gap, at in zip(gaps, sent[2:], strict=True) if at <= 10.2]
    assert len(early) == 9 and min(early) >= 1.0 - 1e-9
    assert min(gaps) >= 1 / 1.1 - 1e-9

    async def recovering() -> list[float]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(rpm=60, clock=loop.time)
        limiter.slow_down(0.001, sent_at=-1.0)  # cut to 30 a minute: 2 s apart
        sends = [asyncio.create_task(limiter.acquire()) for _ in range(20)]
        await asyncio.sleep(10.5)
        sends.append(asyncio.create_task(limiter.acquire()))  # ten quiet seconds later
        return [await send for send in sends]

    later = sorted(moment for moment in run(recovering()) if moment > 11.0)
    gaps = [b - a for a, b in itertools.pairwise(later)]
    # 33 a minute after the recovery's first step (60 / 33 s apart), for those that waited,
    # and a tenth more at each step of ten seconds after.
    assert max(gaps) == pytest.approx(60 / 33) and min(gaps) >= 60 / (30 * 1.1**3) - 1e-9


def test_a_cut_rate_recovers_for_requests_that_all_wait_for_their_turn() -> None:
    async def waiting() -> list[float]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(rpm=60, clock=loop.time)
        limiter.slow_down(0.001, sent_at=-1.0)  # cut to 30 a minute: 2 s apart
        sends = [asyncio.create_task(limiter.acquire()) for _ in range(40)]
        return [await send for send in sends]  # none comes later to see the recovery

    sent = sorted(run(waiting()))
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    # 2 s apart for the first ten seconds, then each step of ten a tenth faster.
    assert max(gaps[:4]) == pytest.approx(2.0)
    assert min(gaps) >= 60 / (60 * 1.1**8) - 1e-9
    assert gaps[-1] < 60 / 33  # more than one step recovered by the end
    assert sent[-1] < 2.0 * 39  # sooner than at the cut rate throughout


def test_each_call_of_an_extraction_is_settled_by_its_own_usage() -> None:
    """Calls at 0, 1 and 2 s estimated at 5,000 tokens each use 100: the window holds 100
    of each while it holds them, never less (the whole miss laid on one call would make it
    negative once the others left, and let more than `tpm` through)."""
    from allama import ChatRequest
    from allama.batch._run import TURN, Turn, Turns
    from allama.mock import ChatResponseBuilder

    class Answers:
        name = "answers"

        async def achat(self, request: ChatRequest) -> Any:
            return ChatResponseBuilder().text("no JSON").usage(90, 10).build()

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        limiter = RateLimiter(tpm=15_000, clock=loop.time)
        turns = Turns(Answers(), limiter)  # type: ignore[arg-type]
        request = ChatRequest("m").user("x").with_max_output_tokens(5_000)
        sent = await limiter.acquire(5_000)
        entered = TURN.set(Turn(sent, 5_000))
        try:
            for _ in range(3):  # an extraction's first call and its two retries
                await turns.achat(request)
                await asyncio.sleep(1.0)
        finally:
            TURN.reset(entered)
        await asyncio.sleep(57.5)  # 60.5 s: the first call's tokens have left the window
        big = await limiter.acquire(14_800)  # 200 of the last two calls, and these
        more = await limiter.acquire(1_000)  # when 15,000 leaves room for it
        return [big, more]

    big, more = run(main())
    assert big == pytest.approx(60.5)
    assert more >= 120.5  # when the 14,800 leave; not at once
