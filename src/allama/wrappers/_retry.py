"""Retry with exponential backoff: the decision written once, driven by a sync and an async loop.

Each attempt is a separate paid call, so the number of attempts is never hidden: it goes on
the context metadata of the error that is finally raised (`allama.retry`), with why no
further attempt was made (`gave_up`), and on a response that needed more than one attempt
(`provider_data["allama"]["retry"]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import numbers
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Self, TypeVar, cast

from pydantic import JsonValue

from allama._lazy import deferred_module
from allama._not_a_request import not_a_request
from allama.errors import (
    INNER_RECORD,
    Error,
    asked_wait,
    may_pass_again,
    paid_ahead,
    paid_before_foreign,
    paid_for,
)
from allama.provider import ChatProvider
from allama.stream import AsyncChatStream, ChatStream
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
)
from allama.wrappers._gate import Holding, _gate, apaused, holding, paused, pausing
from allama.wrappers._lifetime import Wrapper
from allama.wrappers._opening import aopened, opened
from allama.wrappers._record import (
    PAID_BEFORE,
    record_async_stream,
    record_response,
    record_stream,
)

if TYPE_CHECKING:
    from allama import _tracing
else:
    # Spans load with the first call (`opentelemetry` itself only if a tracer is set).
    _tracing = deferred_module("allama._tracing", globals(), "_tracing")

__all__ = ["RETRY_METADATA_KEY", "RetryPolicy", "RetryingProvider"]

RETRY_METADATA_KEY = "allama.retry"
"""The error-context metadata key holding `{"attempts": n, "gave_up": why}` for the error a
retry gave up on (`RetryPolicy` lists the reasons)."""

_RETRY_DATA_KEY = "retry"
_GAVE_UP = "gave_up"

_SECONDS_AND_FACTORS = (
    "initial_backoff",
    "max_backoff",
    "multiplier",
    "jitter",
    "budget",
    "max_retry_after",
)

R = TypeVar("R")


_FOREVER = float("inf")
_LONGEST_SLEEP = threading.TIMEOUT_MAX / 2
"""Well inside the longest wait a sleep takes on this platform (`time.sleep` refuses one
past `TIMEOUT_MAX` less the monotonic clock's reading)."""

_CLOSE_NOTICED_WITHIN = 0.05
"""Seconds: how soon a sync pause inside a batch call notices a close (its wait is on the
batch's stop, which wakes it at once; a close is looked at between slices of it)."""


def _seconds(value: numbers.Real | Decimal) -> float:
    """`value` as a float; a whole number too large for one (`10**400`) is infinite."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if cast("float", value) > 0 else float("-inf")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When to retry and how long to wait: a pure decision, with no clock and no sleeping.

    Only errors that say they are `retryable` are retried. The wait before retry `n` is
    `initial_backoff * multiplier ** (n - 1)`, capped at `max_backoff`, spread by `jitter`
    (0.2 means ±20%), and never shorter than the error's `retry_after`. A provider that asks
    for more than `max_retry_after` seconds is not retried: retrying sooner would be refused
    again. `budget` bounds the whole call in seconds, from the first attempt: a retry whose
    wait would end after it is not made. `None` means no time bound (attempts still are).

    The error a retry raises says why it made no further attempt, under `gave_up` in its
    `allama.retry` record: `"not_retryable"` (the error is not worth sending again),
    `"max_attempts"` (all made), `"max_retry_after"` (the provider asked to wait longer:
    `retry_after` and `max_retry_after` give both), `"budget"` (the next wait would end past
    it, given as `budget`), `"wait_too_long"` (longer than any sleep takes), `"stopped"` (its
    caller, a batch run, stopped during the wait) or `"closed"` (the wrapper was).

    >>> policy = RetryPolicy(jitter=0.0)
    >>> from allama.errors import RateLimitedError, InvalidRequestError
    >>> policy.delay(1, RateLimitedError("slow down", retry_after=3.0), elapsed=0.0, unit=0.5)
    3.0
    >>> policy.delay(1, InvalidRequestError("bad"), elapsed=0.0, unit=0.5) is None
    True
    """

    max_attempts: int = 3
    initial_backoff: float = 0.5
    max_backoff: float = 20.0
    multiplier: float = 2.0
    jitter: float = 0.2
    budget: float | None = 60.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        # `bool` is an `int`: a flag passed as a count or as seconds is a mistake too. A NaN
        # count passed every comparison and retried without end, each attempt paid.
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, numbers.Integral) or attempts < 1:
            raise ValueError(f"max_attempts must be a whole number of at least 1, not {attempts!r}")
        for name in _SECONDS_AND_FACTORS:
            value = getattr(self, name)
            if value is None and name == "budget":
                continue
            # NaN passes every comparison below.
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Real | Decimal)
                or (value.is_nan() if isinstance(value, Decimal) else value != value)
            ):
                raise ValueError(f"{name} must be a number, not {value!r}")
            # Kept as given, numpy's float32 or a Fraction reached a sync wait
            # (`threading.Event.wait`), which refuses them: a retry became a TypeError.
            object.__setattr__(self, name, _seconds(value))
        object.__setattr__(self, "max_attempts", int(attempts))
        if self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff times cannot be negative")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be at least 1, not {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, not {self.jitter}")
        if self.budget is not None and self.budget < 0:
            raise ValueError(f"budget cannot be negative, not {self.budget}")
        if self.max_retry_after < 0:
            raise ValueError(f"max_retry_after cannot be negative, not {self.max_retry_after}")
        if self.initial_backoff == float("inf"):
            raise ValueError("initial_backoff must be finite (max_backoff caps the waits)")
        if self.multiplier == float("inf"):
            raise ValueError("multiplier must be finite (max_backoff caps the waits)")
        if self.max_backoff == float("inf") and (self.budget is None or self.budget == _FOREVER):
            raise ValueError(
                "max_backoff must be finite when budget is None or infinite: nothing would "
                "bound a wait"
            )

    def backoff(self, retry: int, unit: float) -> float:
        """The backoff before retry number `retry` (1 = first retry); `unit` is in [0, 1)."""
        try:
            base = self.initial_backoff * self.multiplier ** (retry - 1)
        except OverflowError:
            base = self.max_backoff
        base = min(self.max_backoff, base)
        spread = 1.0 + self.jitter * (2.0 * unit - 1.0)
        return min(self.max_backoff, base * spread)

    def delay(self, attempts: int, error: Error, *, elapsed: float, unit: float) -> float | None:
        """Seconds to wait before the next attempt, or `None` to give up and raise `error`.

        `attempts` is how many attempts were made so far, `elapsed` the seconds since the first
        began, `unit` a random number in [0, 1) for the jitter.
        """
        decided = self._decide(attempts, error, elapsed=elapsed, unit=unit)
        return None if isinstance(decided, dict) else decided

    def _decide(
        self, attempts: int, error: Error, *, elapsed: float, unit: float
    ) -> float | dict[str, JsonValue]:
        """`delay`, with why it gives up: the entries it adds to the `allama.retry` record
        (allama's words and the policy's numbers, never the provider's)."""
        # A failover's error is its last provider's, its chain the others': one of them
        # that may pass (overloaded a moment) serves the next attempt, though the backup's
        # refused key is what was raised (`may_pass_again`). One that may not would not
        # have been sent again with attempts left either: that is said first.
        if not may_pass_again(error):
            return {_GAVE_UP: "not_retryable"}
        if attempts >= self.max_attempts:
            return {_GAVE_UP: "max_attempts"}
        wait = self.backoff(attempts, unit)
        retry_after = asked_wait(error)
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return {
                    _GAVE_UP: "max_retry_after",
                    "retry_after": float(retry_after),
                    "max_retry_after": float(self.max_retry_after),
                }
            wait = max(wait, retry_after)
        if self.budget is not None and elapsed + wait > self.budget:
            return {_GAVE_UP: "budget", "budget": float(self.budget)}
        if wait > _LONGEST_SLEEP:  # (a finite budget of ages): no sleep takes it, given up
            return {_GAVE_UP: "wait_too_long"}
        return wait


class _Attempts:
    """The state of one retried call; both loops ask it what to do after each failure."""

    __slots__ = ("_clock", "_policy", "_random", "_start", "count", "paid")

    def __init__(
        self, policy: RetryPolicy, clock: Callable[[], float], random: Callable[[], float]
    ) -> None:
        self._policy = policy
        self._clock = clock
        self._random = random
        self._start = clock()
        self.count = 0
        self.paid: list[dict[str, JsonValue]] = []
        """What the failed attempts so far reported paying (`allama.errors.paid_for`)."""

    def begin(self) -> None:
        self.count += 1

    def after_failure(self, error: Error) -> float | None:
        """The wait before trying again; `None` after recording the attempts on `error`,
        and why no further one is made (`give_up`)."""
        elapsed = self._clock() - self._start
        decided = self._policy._decide(self.count, error, elapsed=elapsed, unit=self._random())
        if isinstance(decided, dict):
            self.give_up(error, decided)
            return None
        return decided

    def cut(self, error: Error, retried: _Call) -> None:
        """`give_up` after a pause that ended with no further attempt: the wrapper closed,
        or its caller stopped."""
        self.give_up(error, {_GAVE_UP: "closed" if retried.ended else "stopped"})

    def give_up(self, error: Error, why: dict[str, JsonValue]) -> None:
        """Record the attempts on `error`, the one raised, and `why` no further one is made:
        around an inner retry's, which made its own for each of these."""
        record: dict[str, JsonValue] = {"attempts": self.count, **why}
        inner = error.context.metadata.get(RETRY_METADATA_KEY)
        if isinstance(inner, dict):
            record[INNER_RECORD] = inner
        error.with_metadata(RETRY_METADATA_KEY, record)
        # The attempts before this one were paid too: the record counts them.
        paid_ahead(error, self.paid)

    def pausing_after(self, error: Error, held: Holding) -> list[dict[str, JsonValue]]:
        """What the attempts so far paid, `error`'s too, as a pause follows it: told the
        caller (`allama.wrappers._gate`), which counts it if it cuts the call meanwhile."""
        paid = [*self.paid, *paid_for(error)]
        held.holds(paid)
        return paid

    def go_on(self, error: Error) -> None:
        """Another attempt follows `error`: what it paid is counted with the attempts'."""
        self.paid.extend(paid_for(error))

    def record(self) -> JsonValue | None:
        """What a success reports about its attempts, when there was more than one: their
        count, and what the failed ones reported paying (`paid_before`)."""
        if self.count <= 1:
            return None
        record: dict[str, JsonValue] = {"attempts": self.count}
        if self.paid:
            record[PAID_BEFORE] = list(self.paid)
        return record


class _Call:
    """One retried call, from its first attempt to its last, and where it runs: on an event
    loop, or in a thread (a sync call, `loop` None). A close that closes its connections
    ends it, and wakes its pause: it makes no further attempt (each would open new
    connections to what was closed, and be paid for)."""

    __slots__ = ("_calls", "_ended", "_lock", "_waiters", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop | None, calls: _Calls) -> None:
        self.loop = loop
        self._calls = calls
        self._ended = threading.Event()
        self._lock = threading.Lock()
        self._waiters: set[asyncio.Future[None]] = set()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        # (A class's, not `contextlib.contextmanager`'s: an exception passing through is
        # left as it is, one that refuses a traceback set on it too.)
        self._calls.finished(self)

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def closed_by(self, closing: asyncio.AbstractEventLoop | None) -> bool:
        """Whether a close made on `closing` (`None`: a sync `close()`) closes this call's
        connections, as a provider's close does: a sync call's, a call's on a loop that is
        not running, and the closing loop's own. A call on another loop, running in another
        thread, goes on with its connections."""
        loop = self.loop
        return loop is None or loop is closing or not loop.is_running()

    def end(self) -> None:
        """Safe from any thread, and from any loop: the pause is woken on its own loop."""
        self._ended.set()
        with self._lock:
            waiters = list(self._waiters)
        loop = self.loop
        if loop is None:
            return
        for waiter in waiters:
            with contextlib.suppress(RuntimeError):  # its loop closed: nothing waits there
                loop.call_soon_threadsafe(_release, waiter)

    def wait(self, seconds: float) -> bool:
        """Wait up to `seconds` in this thread; `True` when it ended (first, or before)."""
        return self._ended.wait(seconds)

    async def until_ended(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiters.add(waiter)
        try:
            if not self.ended:  # (ended as it was added: no wake was sent to it)
                await waiter
        finally:
            with self._lock:
                self._waiters.discard(waiter)


class _Calls:
    """The calls a `RetryingProvider` is making. A close ends those whose connections it
    closes (`_Call.closed_by`); a call begun after it goes on as a call to a closed
    provider does: over new connections."""

    __slots__ = ("_lock", "_running")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[_Call] = set()

    def __reduce__(self) -> tuple[type[_Calls], tuple[()]]:
        return (_Calls, ())  # a copy (pickled, deep-copied) makes calls of its own

    def begun(self, loop: asyncio.AbstractEventLoop | None) -> _Call:
        """A call begins, on `loop` (`None`: a sync call); it ends as its `with` does."""
        retried = _Call(loop, self)
        with self._lock:
            self._running.add(retried)
        return retried

    def finished(self, retried: _Call) -> None:
        with self._lock:
            self._running.discard(retried)

    def end(self, closing: asyncio.AbstractEventLoop | None) -> None:
        with self._lock:
            running = list(self._running)
        for retried in running:
            if retried.closed_by(closing):
                retried.end()


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class RetryingProvider(Wrapper):
    """A provider that retries the retryable errors of another, with backoff.

    `chat_stream` retries errors met before the first piece of the answer (raised while
    opening the stream, or sent as its first event); once the answer has begun, an error
    comes out of the iteration as it is. The sleep functions, the
    random source and the clock can be replaced, so tests run instantly and repeatably.
    `close()`, `aclose()`, `with` and `async with` close the provider it wraps, and end
    the calls made before whose connections they close: one waiting out a backoff makes no
    further attempt, and raises the error it would have retried (with its attempts
    recorded), as a batch's stop does. As a provider's connections, `close()` ends the sync
    calls and those on loops not running, `aclose()` the running loop's too; a call on
    another loop, running in another thread, goes on retrying.

    >>> from allama.mock import MockProvider
    >>> from allama.errors import ServerError
    >>> retrying = RetryingProvider(MockProvider([ServerError("busy"), "ok"]), sleep=lambda s: None)
    >>> retrying.chat(ChatRequest("m").user("hi")).text()
    'ok'
    """

    def __init__(
        self,
        inner: ChatProvider,
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        random: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.policy = policy if policy is not None else RetryPolicy()
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._random = random
        self._clock = clock
        self._calls = _Calls()

    @property
    def name(self) -> str:
        return self.inner.name

    def _wrapped(self) -> tuple[ChatProvider, ...]:
        return (self.inner,)

    def _end_calls(self, closing: asyncio.AbstractEventLoop | None) -> None:
        self._calls.end(closing)

    def _attempts(self) -> _Attempts:
        return _Attempts(self.policy, self._clock, self._random)

    def _run(self, call: Callable[[], R], request: ChatRequest) -> tuple[R, _Attempts]:
        """`call` made until it succeeds or the policy gives up: outside an extraction, one
        span holds the attempts' spans (`allama._tracing.WrapperSpan`)."""
        if not isinstance(request, ChatRequest):  # (once per call: the calls all come here)
            raise not_a_request(request)
        traced = _tracing.start_wrapper(_RETRY_DATA_KEY, self, request)
        if traced is None:
            return self._attempting(call, None)
        with traced:
            return self._attempting(call, traced)

    def _attempting(
        self, call: Callable[[], R], traced: _tracing.WrapperSpan | None
    ) -> tuple[R, _Attempts]:
        attempts = self._attempts()
        with self._calls.begun(None) as retried, holding() as held:
            while True:
                attempts.begin()
                try:
                    with _tracing.attempt(traced, attempts.count):
                        return call(), attempts
                except Error as error:
                    wait = attempts.after_failure(error)
                    if wait is None:
                        raise
                    paid = attempts.pausing_after(error, held)
                    try:
                        with pausing():
                            going_on = self._paused(wait, retried)
                    except BaseException as raised:  # interrupted: what was paid goes with it
                        paid_before_foreign(raised, paid)
                        raise
                    if not going_on:  # the caller stopped or closed meanwhile: no more tries
                        attempts.cut(error, retried)
                        raise
                    attempts.go_on(error)
                except BaseException as raised:  # the provider's own: the attempts before paid
                    paid_before_foreign(raised, attempts.paid)
                    raise

    async def _arun(
        self, call: Callable[[], Awaitable[R]], request: ChatRequest
    ) -> tuple[R, _Attempts]:
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        traced = _tracing.start_wrapper(_RETRY_DATA_KEY, self, request)
        if traced is None:
            return await self._aattempting(call, None)
        with traced:
            return await self._aattempting(call, traced)

    async def _aattempting(
        self, call: Callable[[], Awaitable[R]], traced: _tracing.WrapperSpan | None
    ) -> tuple[R, _Attempts]:
        attempts = self._attempts()
        loop = asyncio.get_running_loop()
        with self._calls.begun(loop) as retried, holding() as held:
            while True:
                attempts.begin()
                try:
                    with _tracing.attempt(traced, attempts.count):
                        return await call(), attempts
                except Error as error:
                    wait = attempts.after_failure(error)
                    if wait is None:
                        raise
                    paid = attempts.pausing_after(error, held)
                    try:
                        with pausing():
                            going_on = await self._apaused(wait, retried)
                    except BaseException as raised:  # cancelled: what was paid goes with it
                        paid_before_foreign(raised, paid)
                        raise
                    if not going_on:
                        attempts.cut(error, retried)
                        raise
                    attempts.go_on(error)
                except BaseException as raised:
                    paid_before_foreign(raised, attempts.paid)
                    raise

    def _paused(self, seconds: float, retried: _Call) -> bool:
        """Wait before the next attempt; `False` when the caller (a batch run) stopped
        first (`allama.wrappers._gate`), or this wrapper was closed: no further attempt.
        The standard sleep is woken by either; a sleep of the caller's own is not, and
        both are asked after it."""
        if retried.ended:
            return False
        if self._sleep is not time.sleep:
            return paused(seconds, self._sleep) and not retried.ended
        gate = _gate()
        if gate is None:
            return not retried.wait(seconds)
        # Two things to wait on: the gate's stop wakes each slice at once, the close is
        # asked between them.
        deadline = time.monotonic() + seconds
        while not retried.ended:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if not gate.pause(min(left, _CLOSE_NOTICED_WITHIN)):
                return False
        return False

    async def _apaused(self, seconds: float, retried: _Call) -> bool:
        """`_paused` on the running loop: a close wakes any sleep, the caller's own too
        (it is cancelled)."""
        if retried.ended:
            return False
        pause = asyncio.ensure_future(apaused(seconds, self._async_sleep))
        closed = asyncio.ensure_future(retried.until_ended())
        try:
            await asyncio.wait((pause, closed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            pause.cancel()  # (either done, or no longer waited for)
            closed.cancel()
        if not pause.done() or pause.cancelled():  # closed first
            return False
        return pause.result() and not retried.ended  # (a sleep's own error is raised)

    def chat(self, request: ChatRequest) -> ChatResponse:
        response, attempts = self._run(lambda: self.inner.chat(request), request)
        return record_response(response, _RETRY_DATA_KEY, attempts.record())

    async def achat(self, request: ChatRequest) -> ChatResponse:
        response, attempts = await self._arun(lambda: self.inner.achat(request), request)
        return record_response(response, _RETRY_DATA_KEY, attempts.record())

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        stream, attempts = self._run(lambda: opened(self.inner.chat_stream(request)), request)
        return record_stream(stream, _RETRY_DATA_KEY, attempts.record())

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        async def open_one() -> AsyncChatStream:
            return await aopened(await self.inner.achat_stream(request))

        stream, attempts = await self._arun(open_one, request)
        return record_async_stream(stream, _RETRY_DATA_KEY, attempts.record())

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return self.inner.chat_capability(model, capability)

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        if not isinstance(request, ChatRequest):
            raise not_a_request(request)
        return self.inner.validate_chat_request(request, stream=stream)

    def __repr__(self) -> str:
        return f"RetryingProvider({self.inner!r}, {self.policy!r})"
