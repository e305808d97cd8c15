"""Killing a run mid-way by what the fake server has seen, not after a fixed sleep: a
sleep that lands mid-run on one machine lands after the end on a faster one."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable


def kill_after(
    start: Callable[[], subprocess.Popen[str]], progress: Callable[[], int], steps: int
) -> None:
    """Start a run and SIGKILL it as soon as `progress()` (a count the server keeps) has
    grown by `steps`; a run that ends first is left be."""
    target = progress() + steps
    process = start()
    deadline = time.monotonic() + 60
    while progress() < target:
        if process.poll() is not None:
            return
        assert time.monotonic() < deadline, "the run made no progress for a minute"
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    process.wait()
