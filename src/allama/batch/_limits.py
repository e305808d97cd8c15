"""Rate limits for a batch run: requests and tokens per minute, tightened by the provider.

Requests are spaced evenly (`60 / rpm` apart); the tokens of the requests sent in any 60
seconds stay within `tpm` (a request larger than `tpm` goes alone, once the minute before
it is clear), the estimate of each settled against its usage when the answer says (a
request waiting for room looks again then). A request waiting for its turn when the rate
changes (a cut, a recovery) takes its turn again at the new rate. A rate-limit answer
(429) pauses every new request for the longer of the wait the provider gave
(`retry_after`, which the adapters read from `retry-after` and the rate-limit reset
headers) and a backoff that doubles while 429s keep coming, and halves the request rate
(with no `rpm` given, from the rate the run was sending at, which it may recover past);
the rate recovers by a tenth of itself (x1.1) every ten seconds without one, the requests
waiting for their turns taking them again at each step. Requests already on their way
when the rate was cut neither cut it again nor double the backoff: a burst of 429s
answering requests sent together is one.
Nor do 429s with nothing sent since the last cut answered (a provider that refuses every
request for a while) cut it again: their backoff grows, and the rate stays where it was cut
to.
A request waiting for its turn when a pause begins waits for the pause too. So a 429 slows
the run instead of ending it.
A successful answer whose rate-limit headers say a limit is used up (a remaining count of
0, `RATE_LIMIT_RESET_KEY`) pauses every new request until that limit resets, which would
each meet a 429 before: no 429 was met, so the rate is not cut, nor the backoff grown.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import numbers
import time
from collections import deque
from collections.abc import Callable
from decimal import Decimal
from typing import Any

__all__ = ["LONGEST_WAIT", "RateLimiter", "per_minute"]

_RECOVERY_SECONDS = 10.0
_FIRST_BACKOFF = 1.0
_MAX_BACKOFF = 60.0
_WINDOW = 10.0
_OUTPUTS_KEPT = 32
"""The answers whose output tokens the next requests' estimates average."""
_GUESSED_CEILING = 1e6
"""How far past the rate it guessed (no `rpm` given) a run's rate may recover: so far
that it is no limit."""


LONGEST_WAIT = 900.0
"""The longest wait a run makes when a provider asks for one (15 minutes): one asked for
longer (a limit per day, reset tomorrow) stops the run, whose inputs a later run sends."""
_SLOWEST_RPM = 60.0 / LONGEST_WAIT
"""The least `rpm`: a request every 15 minutes, the longest a run waits."""


def positive(value: Any, *, zero: bool = False) -> bool:
    """Whether `value` is a finite real number more than 0 (or 0, with `zero`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and (value >= 0 if zero else value > 0)
    except OverflowError:  # an int past a float's range
        return False


def per_minute(name: str, rate: Any) -> float | None:
    """`rate` (`rpm` or `tpm`) checked: a real number (an `int`, a `float`, a `Decimal`, a
    `Fraction`, numpy's), finite and more than 0, as a float (an `int` as it is, which the
    ledger's settings keep as they were); an `rpm` so low that its requests would be more
    than 15 minutes apart, a wait no provider asks a run to make silently, is refused."""
    if rate is None:
        return None
    number = None
    if not isinstance(rate, bool) and isinstance(rate, numbers.Real | Decimal):
        try:
            number = float(rate)
        except (OverflowError, ValueError, TypeError):
            number = None
    if number is None or not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a number more than 0 (a rate per minute), not {rate!r}")
    if name == "rpm" and number < _SLOWEST_RPM:
        raise ValueError(
            f"rpm must be at least 1/15 (a request every 15 minutes, the longest a run "
            f"waits), not {rate!r}"
        )
    return rate if type(rate) is int else number


class RateLimiter:
    """Shared by every task of one run, on one event loop."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        backoff: float = _FIRST_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        rpm, tpm = per_minute("rpm", rpm), per_minute("tpm", tpm)
        self._clock = clock
        self._backoff = backoff
        self._rpm = rpm
        self._scale = 1.0
        """The share of `rpm` in force: halved by a rate-limit answer, recovering after."""
        self._ceiling = 1.0
        """What the share recovers to: the whole `rpm` given, or past a guessed one."""
        self._next = 0.0
        self._paused_until = 0.0
        self._limited_until = 0.0
        """The end of the last pause a 429 made (the pause may last longer, for a reset)."""
        self._tpm = tpm
        self._window: deque[list[float]] = deque()
        """The requests of the last 60 seconds, each `[sent at, tokens]`, in order."""
        self._in_window = 0.0
        self._outputs: deque[int] = deque(maxlen=_OUTPUTS_KEPT)
        """The output tokens of the last answers (`output_guess`)."""
        self._roomier: asyncio.Event | None = None
        """Set (and replaced) when an answer's usage frees room in the window."""
        self._strikes = 0
        self._last_strike = 0.0
        self._recovered_at = 0.0
        """Where the rate's recovery has counted to: the last 429, then ten seconds a step."""
        self._cut_at = float("-inf")
        """The last 429 that counted (a cut, or a strike that doubled the backoff alone): a
        request sent before it and answered 429 is of its burst."""
        self._last_cut = float("-inf")
        """When the rate was last cut."""
        self._served = float("-inf")
        """When the last request answered (a 429 is no answer) was sent: one sent since the
        last cut was let through at the rate cut to, and a 429 then says it is still too
        high."""
        self._sent: deque[float] = deque()
        """When recent requests went out: the rate a 429 answered, when no `rpm` was given."""
        self._halted = asyncio.Event()
        """Set when the run stops: waits end at once, and no turn is waited for."""
        self._respaced: asyncio.Event | None = None
        """Set (and replaced) when the rate changes: turns taken at the old rate are taken
        again."""
        self._last_sent = float("-inf")
        self.waited = 0.0
        """Seconds tasks spent waiting on the limits (summed over tasks)."""
        self.slowdowns = 0
        """Times the rate was cut: a burst of 429s answering requests sent together is one."""
        self.rate_limited = 0
        """Rate-limit answers (429s) met."""
        self.resets_waited = 0
        """Pauses until a rate limit an answer's headers said was used up reset
        (`until_reset`): no 429 met."""

    @property
    def paused_for(self) -> float:
        return max(0.0, self._paused_until - self._clock())

    @property
    def counts_tokens(self) -> bool:
        """Whether a request's tokens matter here (a tokens-per-minute limit is set)."""
        return self._tpm is not None

    @property
    def rpm_in_force(self) -> float | None:
        return None if self._rpm is None else self._rpm * self._scale

    def halt(self) -> None:
        """The run stopped: end every wait now (what waited is not sent)."""
        self._halted.set()

    async def sleep(self, seconds: float, *, counted: bool = False) -> None:
        """`asyncio.sleep`, ended early by `halt`. `counted`: a wait on the limits (before
        a request answered 429 is sent again), which `waited` counts as it lasted."""
        if seconds <= 0 or self._halted.is_set():
            await asyncio.sleep(0)
            return
        began = self._clock()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._halted.wait(), seconds)
        finally:
            if counted:
                self.waited += self._clock() - began

    async def acquire(self, tokens: int = 0) -> float:
        """Wait for this request's turn: after any pause, its tokens, and its slot. Returns
        the moment it went (for `slow_down` and `spent`); at once after `halt`, when it is
        not to go."""
        began = self._clock()
        while True:
            await self._clear(tokens)
            if self._halted.is_set():
                now = self._clock()
                self.waited += now - began  # waited, though it does not go
                return now
            # Its tokens and its slot are taken at once, with nothing awaited between the
            # check and the taking: requests waiting for their slots share no tokens, and
            # its tokens count from its slot.
            now = self._clock()
            slot = self._take_slot(now)
            entry = None
            if self._tpm is not None:
                entry = [slot, float(tokens)]
                self._window.append(entry)
                self._in_window += tokens
            respaced = False
            if slot > now:
                respaced = await self._wait_for_slot(slot - now)
            if not respaced and self._paused_until <= self._clock():
                break
            # The rate changed, or a 429 came, while it waited for its slot: it takes its
            # turn again, at the new rate, after the pause.
            if entry is not None:
                self._in_window -= entry[1]
                with contextlib.suppress(ValueError):
                    self._window.remove(entry)
        now = self._clock()
        if entry is not None:
            entry[0] = now  # its tokens count from when it went
        self._last_sent = now
        self._sent.append(now)
        while self._sent and now - self._sent[0] > _WINDOW:
            self._sent.popleft()
        self.waited += now - began
        return now

    @property
    def halted(self) -> bool:
        return self._halted.is_set()

    async def late_turn(self) -> float:
        """The turn of a call of an extraction in flight when the run stopped (what is in
        flight finishes): no wait for a pause or for tokens, but spaced at the rate still,
        rather than sent together with every other such call."""
        now = self._clock()
        slot = self._take_slot(now)
        if slot > now:
            await asyncio.sleep(slot - now)
        self._last_sent = self._clock()
        return self._last_sent

    def _take_slot(self, now: float) -> float:
        """The next slot of the request rate, taken (`now` with no `rpm`)."""
        if self._rpm is None:
            return now
        slot = max(now, self._next)
        self._next = slot + 60.0 / (self._rpm * self._scale)
        return slot

    def moved(self) -> None:
        """Used on another event loop from now on (a step driven by hand, one `asyncio.run`
        after another): its events are made anew there, since one waited on is bound to
        the loop it was waited on; what it counted (the window, the pace, a pause) stays."""
        halted = self._halted.is_set()
        self._halted = asyncio.Event()
        if halted:
            self._halted.set()
        self._roomier = self._respaced = None  # (no waiter of the ended loop is left)

    async def _wait_for_slot(self, seconds: float) -> bool:
        """Sleep until a slot; `True` when the rate changed meanwhile (the slot is stale).
        A rate that was cut recovers while every request waits for its turn (none comes
        into `acquire` to see it): the wait wakes at each step of the recovery."""
        if self._respaced is None:
            self._respaced = asyncio.Event()
        respaced = self._respaced
        if self._halted.is_set():
            await asyncio.sleep(0)
            return False
        until = self._clock() + seconds
        while not respaced.is_set() and not self._halted.is_set():
            now = self._clock()
            left = until - now
            if self._scale < self._ceiling:
                if now - self._recovered_at >= _RECOVERY_SECONDS:
                    self._recover(now)  # a step due: every turn is taken again
                    continue
                left = min(left, self._recovered_at + _RECOVERY_SECONDS - now)
            if left <= 0:
                break
            await self._wait_on(respaced, left)
        return respaced.is_set() and not self._halted.is_set()

    async def _wait_on(self, event: asyncio.Event, seconds: float) -> None:
        """Sleep `seconds`, or until `event` is set or the run halts."""
        waits = [asyncio.ensure_future(self._halted.wait()), asyncio.ensure_future(event.wait())]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def _respace(self) -> None:
        """The rate changed: the turns taken at the old one are taken again, from the last
        request sent on."""
        if self._rpm is not None:
            interval = 60.0 / (self._rpm * self._scale)
            self._next = max(self._clock(), self._last_sent + interval)
        if self._respaced is not None:
            self._respaced.set()
            self._respaced = None

    async def _clear(self, tokens: int) -> None:
        """Wait until no pause is in force and the last minute's requests leave room for
        `tokens` (a request larger than `tpm`: until the minute is clear)."""
        while True:
            now = self._clock()
            self._recover(now)
            wait = self._paused_until - now
            if wait <= 0 and self._tpm is not None:
                wait = self._room_in(now, min(float(tokens), float(self._tpm)))
            if wait <= 0 or self._halted.is_set():
                return
            if self._paused_until > now:
                await self.sleep(wait)
            else:
                # For room in the window, or until an answer's usage frees some.
                if self._roomier is None:
                    self._roomier = asyncio.Event()
                await self._wait_on(self._roomier, wait)

    def _room_in(self, now: float, need: float) -> float:
        """Seconds until the requests of the 60 seconds before leave `need` tokens of room."""
        assert self._tpm is not None
        window = self._window
        while window and window[0][0] + 60.0 <= now:  # as the wait below reckons it
            self._in_window -= window.popleft()[1]
        over = self._in_window + need - self._tpm
        if over <= 0:
            return 0.0
        for sent_at, counted in window:  # the oldest leave first
            over -= counted
            if over <= 0:
                return sent_at + 60.0 - now
        return window[-1][0] + 60.0 - now if window else 0.0

    def output_guess(self) -> int:
        """The output tokens a request is counted for before its answer says: as many as
        the last answers used on average (none before one came: a guess then would hold
        every request back on a number no answer gave; and one long answer does not hold
        back every request after it, as the largest would)."""
        outputs = self._outputs
        return -(-sum(outputs) // len(outputs)) if outputs else 0

    def spent(
        self,
        estimated: int,
        actual: int | None,
        sent_at: float | None = None,
        output: int | None = None,
    ) -> None:
        """Settle the tokens of a request sent at `sent_at` once its usage is known: its
        estimate becomes what it used, while it is within the last minute. `output`: the
        tokens it answered with, which the next requests' estimates count."""
        if output is not None:
            self._outputs.append(output)
        if self._tpm is None or actual is None:
            return
        change = float(actual - estimated)
        for entry in reversed(self._window):
            if sent_at is None or entry[0] == sent_at:
                entry[1] += change
                self._in_window += change
                if change < 0 and self._roomier is not None:
                    # Room freed: the requests waiting for room look again now, rather
                    # than at the moment they reckoned from the estimate.
                    self._roomier.set()
                    self._roomier = None
                return

    def slow_down(self, retry_after: float | None, sent_at: float = float("inf")) -> float:
        """A rate-limit answer to a request sent at `sent_at`: pause new requests and, unless
        the request left before the last cut, halve the rate. Returns the pause."""
        now = self._clock()
        self.rate_limited += 1
        self._recovered_at = now
        asked = retry_after if retry_after is not None and retry_after > 0 else None
        if sent_at < self._cut_at:
            # On its way before the last cut: part of the burst that cut it. It waits as
            # the provider asked, and for the pause in force; the backoff stays.
            pause = max(asked or 0.0, self._paused_until - now, 0.0)
            self._paused_until = max(self._paused_until, now + pause)
            self._limited_until = max(self._limited_until, now + pause)
            return pause
        # 429s in a row double the backoff: one within ten seconds of the last, or of the
        # end of the pause it made (a pause longer than ten seconds is no quiet spell).
        quiet = now - max(self._last_strike, self._limited_until)
        self._strikes = self._strikes + 1 if quiet < _RECOVERY_SECONDS else 1
        self._last_strike = now
        # The wait asked is the least to pause, not the pause: a provider asking a few
        # milliseconds at every 429 (its reset of the requests per minute, say) would have
        # the run refused as fast as it sends, each input's tries spent, where the backoff
        # grows while 429s keep coming (as `RetryPolicy.delay` waits the longer of both).
        backoff = min(_MAX_BACKOFF, self._backoff * 2.0 ** min(self._strikes - 1, 32))
        pause = max(asked or 0.0, backoff)
        self._paused_until = max(self._paused_until, now + pause)
        self._limited_until = max(self._limited_until, now + pause)
        self._cut_at = now
        if self._served < self._last_cut:
            # Nothing sent since the last cut was answered: the provider still refuses (its
            # minute is not over, or it refuses all for a while), which says nothing of the
            # rate cut to. The backoff grows; cutting again would leave the run crawling at
            # a sixty-fourth of its rate for minutes after the provider serves again.
            return pause
        self.slowdowns += 1
        self._last_cut = now
        if (self._rpm is None or self._ceiling == _GUESSED_CEILING) and self._sent:
            # No `rpm` given: the rate that was answered with a 429 is the rate to keep
            # under, measured again at each 429. It is a guess (a burst in the run's first
            # second reads low), which the rate recovers past while no 429 comes; so a
            # later 429 halves the rate the run was sending at, not what the recovery
            # has counted up to since.
            span = max(now - self._sent[0], 1.0)
            measured = len(self._sent) / span * 60.0
            if self._rpm is None or measured < self._rpm * self._scale:
                self._rpm = measured
                self._scale = 1.0
                self._ceiling = _GUESSED_CEILING
        self._scale = max(self._scale / 2, 1 / 64)
        self._respace()
        return pause

    def until_reset(self, wait: float) -> None:
        """An answer's headers said a rate limit of the provider is used up, resetting in
        `wait` seconds: no new request goes before then (each would meet a 429). Not a
        429: the rate and the backoff stay. A wait longer than a run makes is not made
        here: the next request's 429 asks for it, which stops the run saying so."""
        if not 0 < wait <= LONGEST_WAIT:
            return
        now = self._clock()
        if self._paused_until <= now:
            self.resets_waited += 1  # (answers saying so during the pause are of it)
        self._paused_until = max(self._paused_until, now + wait)

    def served(self, sent_at: float) -> None:
        """A request sent at `sent_at` was answered (not with a 429). From a worker thread
        too: two threads at once may leave the earlier of their times, which can only
        spare the rate a cut, never make one."""
        if sent_at > self._served:
            self._served = sent_at

    def _recover(self, now: float) -> None:
        if self._scale < self._ceiling and now - self._recovered_at >= _RECOVERY_SECONDS:
            steps = int((now - self._recovered_at) // _RECOVERY_SECONDS)
            # 1.1 ** 44 is past 64, the most the rate is ever cut by: a longer quiet spell
            # (a day's pause) recovers it in full, without overflowing.
            self._scale = min(self._ceiling, self._scale * 1.1 ** min(steps, 44))
            self._recovered_at += steps * _RECOVERY_SECONDS
            self._respace()
