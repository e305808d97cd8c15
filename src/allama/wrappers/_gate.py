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
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any


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


class _Call:
    """One call of a gate's caller; `ended` once it returned (a call in a thread of its
    own, cancelled, goes on there, and is ended when that work returns: `run_to_its_end`)."""

    __slots__ = ("ended", "gate")

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.ended = False


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("allama_gate", default=None)


@contextlib.contextmanager
def entered(gate: Gate, *, in_thread: bool = False) -> Iterator[None]:
    """The body is a call of `gate`'s caller: the wrappers inside it ask the gate. With
    `in_thread`, its work runs in a thread (`run_to_its_end`), which a cancel of the body
    leaves going: the call ends when that work does."""
    call = _Call(gate)
    token = _CALL.set(call)
    cancelled = False
    try:
        yield
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


def _gate() -> Gate | None:
    call = _CALL.get()
    return None if call is None or call.ended else call.gate


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
