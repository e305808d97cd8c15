"""A batch run's progress on stderr: a bar redrawn in place on a terminal, else plain lines.

Drawn by a thread of its own from the run's `BatchSummary` (the run's results come to the
main thread, which may wait long for the next one), at most ten times a second on a
terminal, every few seconds otherwise, and once more when the run ends.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from allama._prices import dollars

if TYPE_CHECKING:
    from allama.batch._run import BatchSummary

BAR_WIDTH = 20


def progress_text(summary: BatchSummary) -> str:
    """The run so far in one line: finished of total, done, failed, in flight, tokens,
    cost, rate and ETA."""
    total = "?" if summary.total is None else str(summary.total)
    parts = [
        f"{summary.finished}/{total}: {summary.done} done, {summary.failed} failed, "
        f"{summary.in_flight} in flight"
    ]
    if summary.not_started:
        parts.append(f"{summary.not_started} not started")
    if summary.elsewhere:
        parts.append(f"{summary.elsewhere} in another run")
    waiting = [state for state in summary.jobs.values() if not state.endswith("collected")]
    if waiting:
        more = f" (+{len(waiting) - 1} more jobs)" if len(waiting) > 1 else ""
        parts.append(f"job {waiting[-1]}{more}")
    parts.append(f"{summary.input_tokens + summary.output_tokens} tokens")
    if summary.cost_unknown and not summary.cost:
        parts.append("cost unknown")
    else:
        parts.append(f"${dollars(summary.cost)}" + ("+?" if summary.cost_unknown else ""))
    parts.append(f"{summary.rate():.2f}/s")
    eta = summary.eta()
    parts.append("ETA ?" if eta is None else f"ETA {_duration(eta)}")
    return ", ".join(parts)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _bar(summary: BatchSummary) -> str:
    if not summary.total:
        return ""
    settled = summary.finished + summary.not_started + summary.elsewhere
    filled = min(BAR_WIDTH, BAR_WIDTH * settled // summary.total)
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "] "


class Progress:
    """Draws `summary()` on `stream` until `stop()`: in place when `tty`, else as lines."""

    def __init__(
        self, summary: Callable[[], BatchSummary], stream: IO[str], *, tty: bool, every: float
    ) -> None:
        self._summary = summary
        self._stream = stream
        self._tty = tty
        self._every = every
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="allama-progress", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while not self._stopped.wait(self._every):
            self._draw()

    def _draw(self) -> None:
        summary = self._summary()
        with self._lock:
            if self._tty:
                width = self._width()
                text = progress_text(summary)
                line = _bar(summary) + text
                if len(line) > width:  # a wrapped line cannot be redrawn: the numbers first
                    line = text[:width]
                self._stream.write("\r" + line + "\x1b[K")
            else:
                self._stream.write("progress: " + progress_text(summary) + "\n")
            self._stream.flush()
            self._drawn = True

    def _width(self) -> int:
        """The terminal's width, less one column (writing the last one wraps on some). A
        terminal that says it has no columns (a pty not sized yet, `stty cols 0`) has not
        said: `COLUMNS`, else stdout's width, else 80, as `shutil.get_terminal_size`."""
        try:
            columns = os.get_terminal_size(self._stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        if columns <= 0:
            columns = shutil.get_terminal_size().columns
        return max(1, columns - 1)  # however narrow: a line longer wraps, and stays

    def stop(self) -> None:
        """Stop drawing; draw the last state, and end the bar's line on a terminal."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        self._draw()
        if self._tty:
            with self._lock:
                self._stream.write("\n")
                self._stream.flush()
