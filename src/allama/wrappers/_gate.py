"""A caller's word to the wrappers inside its calls that its work has stopped or closed.

A batch run that stops or closes makes no further call of its own, but a failover's next
provider and a retry's next attempt happen inside one of its calls, where it cannot reach
them: a sync run's call goes on in its worker thread after the run closed, and would pay
for an answer nobody reads. The run sets a `Gate` in the context of each of its calls
(`entered`); the wrappers ask it before a call of their own, and wait on it. A stop ends a
retry's pause and its attempts (the run tries nothing again after a stop either); a close
also ends a failover (nothing after it is read). Outside such a call there is no gate,
and the wrappers behave as they always do; a context copied during a call (a task a
provider starts) holds the gate of a call that ended, which asks nothing of them.

The wrappers also tell the call what goes on inside it, as it happens: each pause
(`pausing`), and what their attempts that ended paid (`holding`), which only their return
would tell the caller. A caller that cuts the call (a batch run closed) reads it there
(`Call.at_cut`): a sync run's call goes on in its thread, an async one's is unwound.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Self

from pydantic import JsonValue


class Gate:
    """Open until `stop` (then `close`), which are safe from any thread."""

    __slots__ = ("_closed", "_stopped", "_waiters")

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._closed = False
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def closed(self) -> bool:
        return self._closed

    def stop(self) -> None:
        """No retry goes after this; every pause ends now."""
        self._stopped.set()
        for loop, waiter in list(self._waiters):
            with contextlib.suppress(RuntimeError):  # its loop closed: nothing waits there
                loop.call_soon_threadsafe(_release, waiter)

    def close(self) -> None:
        """Nothing goes after this: no retry, and no failover either."""
        self._closed = True
        self.stop()

    def pause(self, seconds: float) -> bool:
        """Wait `seconds` in this thread; `False` when the gate stopped first (or was)."""
        return not self._stopped.wait(max(0.0, seconds))

    async def apause(self, seconds: float) -> bool:
        """Wait `seconds` on the running loop; `False` when the gate stopped first (or was)."""
        if self.stopped:
            return False
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry = (loop, waiter)
        self._waiters.add(entry)
        timer = loop.call_later(max(0.0, seconds), _release, waiter)
        try:
            if not self.stopped:  # (stopped as it was added: no release was sent to it)
                await waiter
        finally:
            timer.cancel()
            self._waiters.discard(entry)
        return not self.stopped


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Call:
    """One call of a gate's caller; `ended` once it returned (a call in a thread of its
    own, cancelled, goes on there, and is ended when that work returns: `run_to_its_end`).
    It holds what its caller and the wrappers inside it told of it (`sending`, `pausing`,
    `holding`), safe from any thread, and what a cancellation that cut them found, for
    the caller to read (`at_cut`)."""

    __slots__ = ("_cut", "_held", "_lock", "_pausing", "_sending", "ended", "gate")

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.ended = False
        self._lock = threading.Lock()
        self._sending = 0
        self._pausing = 0
        self._held: list[Holding] = []
        self._cut: tuple[bool, list[dict[str, JsonValue]]] | None = None
        """`_now()` as the innermost span a cancellation unwound found it; `None` again
        once a span begins or ends otherwise (the cancellation was caught inside)."""

    def at_cut(self) -> tuple[bool, list[dict[str, JsonValue]]]:
        """As its caller cuts it (an async call unwound by the cut, as it found it; a sync
        call going on in its thread, as it is): whether an attempt of it is under way
        (sent, and not a retry's pause, where every attempt so far was answered), and what
        the wrappers' attempts that ended reported paying, which they hold until they
        return."""
        with self._lock:
            return self._cut if self._cut is not None else self._now()

    def _now(self) -> tuple[bool, list[dict[str, JsonValue]]]:
        paid = [entry for held in self._held for entry in held.paid]
        return self._sending > 0 and self._pausing == 0, paid


_CALL: contextvars.ContextVar[Call | None] = contextvars.ContextVar("allama_gate", default=None)


@contextlib.contextmanager
def entered(gate: Gate, *, in_thread: bool = False) -> Iterator[Call]:
    """The body is a call of `gate`'s caller: the wrappers inside it ask the gate, and
    tell the call (yielded) what goes on in it. With `in_thread`, its work runs in a thread
    (`run_to_its_end`), which a cancel of the body leaves going: the call ends when that
    work does."""
    call = Call(gate)
    token = _CALL.set(call)
    cancelled = False
    try:
        yield call
    except asyncio.CancelledError:
        cancelled = True
        raise
    finally:
        _CALL.reset(token)
        if not (cancelled and in_thread):
            call.ended = True


def run_to_its_end(work: Callable[..., Any], *args: Any) -> Any:
    """`work(*args)`, a call's work in a thread: when it returns, the call is over, and a
    context copied during it (a worker a provider started) no longer holds the gate."""
    try:
        return work(*args)
    finally:
        call = _CALL.get()
        if call is not None:
            call.ended = True


def _current() -> Call | None:
    call = _CALL.get()
    return None if call is None or call.ended else call


def _gate() -> Gate | None:
    call = _current()
    return None if call is None else call.gate


class _Told:
    """A span of the current call (none outside a gate's), told it as it begins and as it
    ends. The first a cancellation (an interrupt) unwinds keeps the call as it found it,
    for its caller to read (`Call.at_cut`): the spans around it end too as it goes out."""

    __slots__ = ("_call",)

    def __init__(self) -> None:
        self._call = _current()

    def _tell(self, call: Call, step: int) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        call = self._call
        if call is not None:
            with call._lock:
                call._cut = None
                self._tell(call, 1)
        return self

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        call = self._call
        if call is None:
            return
        with call._lock:
            if error is None or isinstance(error, Exception):
                call._cut = None
            elif call._cut is None:
                call._cut = call._now()
            self._tell(call, -1)


class _Sending(_Told):
    __slots__ = ()

    def _tell(self, call: Call, step: int) -> None:
        call._sending += step


class _Pausing(_Told):
    __slots__ = ()

    def _tell(self, call: Call, step: int) -> None:
        call._pausing += step


class Holding(_Told):
    """A wrapper's call (`holding`), and what it holds paid: its attempts that ended, until
    it returns or raises, whose outcome then says it."""

    __slots__ = ("paid",)

    def __init__(self) -> None:
        super().__init__()
        self.paid: list[dict[str, JsonValue]] = []

    def _tell(self, call: Call, step: int) -> None:
        if step > 0:
            call._held.append(self)
        else:
            call._held.remove(self)

    def holds(self, paid: list[dict[str, JsonValue]]) -> None:
        """Its attempts so far paid `paid` (each `allama.errors.paid_for`'s entries)."""
        call = self._call
        if call is not None:
            with call._lock:
                self.paid = list(paid)


def sending() -> _Sending:
    """The body is the caller's call to its provider: an attempt is under way, but during
    a wrapper's pause (`pausing`)."""
    return _Sending()


def pausing() -> _Pausing:
    """The body is a wrapper's pause before its next attempt: none is under way."""
    return _Pausing()


def holding() -> Holding:
    """The body is a wrapper's call, which tells what its attempts paid as they end
    (`Holding.holds`) until it returns or raises (its outcome then says it): the caller
    counts it if it cuts the call meanwhile."""
    return Holding()


def gate_closed() -> bool:
    """Whether the current call's caller closed: a failover tries no further provider."""
    gate = _gate()
    return gate is not None and gate.closed


def paused(seconds: float, sleep: Callable[[float], None]) -> bool:
    """`sleep(seconds)` before a retry, ended at once by the caller's stop (with the
    standard sleep); `False` when the caller stopped: no further attempt."""
    gate = _gate()
    if gate is None:
        sleep(seconds)
        return True
    if sleep is time.sleep:
        return gate.pause(seconds)
    sleep(seconds)  # a sleep of the caller's own: its gate is asked after it
    return not gate.stopped


async def apaused(seconds: float, sleep: Callable[[float], Awaitable[None]]) -> bool:
    """The async twin of `paused`."""
    gate = _gate()
    if gate is None:
        await sleep(seconds)
        return True
    if sleep is asyncio.sleep:
        return await gate.apause(seconds)
    await sleep(seconds)
    return not gate.stopped
