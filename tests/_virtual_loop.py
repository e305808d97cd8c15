"""An event loop whose clock is virtual: a wait with nothing to read moves the clock on
instead of sleeping, so every wait is exact and a test of minutes takes no time."""

from __future__ import annotations

import asyncio
import selectors
from typing import Any


class _Instant(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Polls without blocking; a wait with nothing to read moves the loop's clock on."""

    def __init__(self, loop: VirtualLoop) -> None:
        super().__init__()
        self.loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        ready: list[Any] = super().select(0)
        if not ready and timeout:
            self.loop.now += timeout
        return ready


class VirtualLoop(asyncio.SelectorEventLoop):
    """A selector loop on a virtual clock, starting at `now`."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        super().__init__(_Instant(self))

    def time(self) -> float:
        return self.now
