"""A caller's word to the wrappers inside its calls that its work has stopped.

A batch run that stops or closes makes no further call of its own, but a failover's next
provider and a retry's next attempt happen inside one of its calls, where it cannot reach
them: a sync run's call goes on in its worker thread after the run closed, and would pay
for an answer nobody reads. The run sets a `Gate` in the context of its calls (`GATE`);
the wrappers ask it before a call of their own, and wait on it, so that a stop ends their
pause at once. Outside such a caller there is no gate, and they behave as they always do.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading


class Gate:
    """Open until `shut`, which is safe from any thread."""

    __slots__ = ("_shut", "_waiters")

    def __init__(self) -> None:
        self._shut = threading.Event()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()

    @property
    def is_shut(self) -> bool:
        return self._shut.is_set()

    def shut(self) -> None:
        """No wrapper call goes after this; every pause ends now."""
        self._shut.set()
        for loop, waiter in list(self._waiters):
            with contextlib.suppress(RuntimeError):  # its loop closed: nothing waits there
                loop.call_soon_threadsafe(_release, waiter)

    def pause(self, seconds: float) -> bool:
        """Wait `seconds` in this thread; `False` when the gate shut first (or was)."""
        return not self._shut.wait(max(0.0, seconds))

    async def apause(self, seconds: float) -> bool:
        """Wait `seconds` on the running loop; `False` when the gate shut first (or was)."""
        if self.is_shut:
            return False
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry = (loop, waiter)
        self._waiters.add(entry)
        timer = loop.call_later(max(0.0, seconds), _release, waiter)
        try:
            if not self.is_shut:  # (shut as it was added: no release was sent to it)
                await waiter
        finally:
            timer.cancel()
            self._waiters.discard(entry)
        return not self.is_shut


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


GATE: contextvars.ContextVar[Gate | None] = contextvars.ContextVar("allama_gate", default=None)
"""The gate of the work the current call belongs to, if its caller set one."""


def gate_shut() -> bool:
    """Whether the current call's caller stopped: a wrapper makes no further call."""
    gate = GATE.get()
    return gate is not None and gate.is_shut
