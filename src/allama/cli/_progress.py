"""A batch run's progress on stderr: a bar redrawn in place on a terminal, else plain lines.

Drawn by a thread of its own from the run's `BatchSummary` (the run's results come to the
main thread, which may wait long for the next one), at most ten times a second on a
terminal, every few seconds otherwise, at once when the run begins to stop, and once more
when the run ends.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from allama._prices import dollars
from allama._printable import printable, writes_unicode

if TYPE_CHECKING:
    from allama.batch._run import BatchSummary

BAR_WIDTH = 20

_LOOK = 0.1
"""How often, in seconds, the drawing thread looks whether the run began to stop."""


def progress_text(summary: BatchSummary, paused: float = 0.0) -> str:
    """The run so far in one line: finished of total, done, failed, in flight, the pause a
    rate limit asked for (`paused` seconds left), tokens, cost, rate and ETA (once the run
    stopped starting inputs, that it is stopping, and what abandons those in flight)."""
    return ", ".join(text for _, text in _parts(summary, paused))


def _parts(
    summary: BatchSummary, paused: float = 0.0, *, short: bool = False
) -> list[tuple[str, str]]:
    """The line's parts, each named for `_LEAST_NEEDED`; `short`, a stopping run's said in
    fewer words (for a terminal's line)."""
    total = "?" if summary.total is None else str(summary.total)
    parts = [
        (
            "counts",
            f"{summary.finished}/{total}: {summary.done} done, {summary.failed} failed, "
            f"{summary.in_flight} in flight",
        )
    ]
    if paused >= 1.0:
        # A 429's wait: nothing is sent meanwhile, and the line says why.
        parts.append(("paused", f"paused {_duration(paused)} (rate limit)"))
    if summary.retrying:
        # A server error's wait (a 503's `Retry-After` may ask minutes): said, as a pause is.
        parts.append(("retrying", f"{summary.retrying} waiting to retry"))
    if summary.not_started:
        parts.append(("not started", f"{summary.not_started} not started"))
    if summary.elsewhere:
        parts.append(("elsewhere", f"{summary.elsewhere} in another run"))
    waiting = [state for state in summary.jobs.values() if not state.endswith("collected")]
    if waiting:
        more = f" (+{len(waiting) - 1} more jobs)" if len(waiting) > 1 else ""
        # A job's state is the provider's words, escaped as every line of the run's.
        parts.append(("job", f"job {printable(waiting[-1])}{more}"))
    parts.append(("tokens", f"{summary.input_tokens + summary.output_tokens} tokens"))
    if summary.cost_unknown and not summary.priced:
        parts.append(("cost", "cost unknown"))
    elif not summary.priced:  # no input has ended with a cost yet: none known, not $0
        parts.append(("cost", "cost ?"))
    else:
        parts.append(("cost", f"${dollars(summary.cost)}" + ("+?" if summary.cost_unknown else "")))
    parts.append(("rate", f"{summary.rate():.2f}/s"))
    if summary.stopped is not None:  # (Ctrl-C, a budget): no time to the inputs' end
        stopping = _stopping(summary, short=short)
        parts.append(("eta", "stopped" if summary.ended is not None else stopping))
        return parts
    eta = summary.eta()
    parts.append(("eta", "ETA ?" if eta is None else f"ETA {_duration(eta)}"))
    return parts


_AGAIN = {
    "interrupted (Ctrl-C)": "Ctrl-C again",
    "terminated (SIGTERM)": "a second SIGTERM",
    "hung up (SIGHUP)": "a second SIGHUP",
}
"""The command's words for a run a signal stopped (`cli._batch._STOPPING`), and what would
abandon the inputs in flight: the same signal again (the ledger keeps them pending, and a
run again sends them again, though their calls may have been paid for)."""


def _stopping(summary: BatchSummary, *, short: bool = False) -> str:
    """A run stopping: what ends it sooner, where a signal stopped it with calls in flight
    (a budget's stop takes two Ctrl-Cs to abandon them: not said). `short`: "them", for a
    line that says how many are in flight just before, when it must leave out the rest."""
    again = _AGAIN.get(summary.stopped or "")
    if again is None or not summary.in_flight:
        return "stopping"
    return f"stopping: {again} abandons {'them' if short else 'those in flight'}"


_LEAST_NEEDED = ("rate", "tokens", "job", "elsewhere", "not started", "retrying", "cost")
"""The parts a line too long for the terminal leaves out first, in turn."""

MIN_BAR = 10
"""The narrowest bar drawn: narrower, the parts least needed leave room for it."""


def fitted(summary: BatchSummary, width: int, paused: float = 0.0, *, ascii: bool = False) -> str:
    """The bar and the line in `width` columns: the bar narrower, then the parts least
    needed left out; with no room for a bar (or no total), the line alone, as whole as
    fits, then cut. A line that wraps could not be redrawn in place. `ascii`, for a stream
    that writes ASCII alone: what it would write as an escape is counted as the escape."""
    texts: list[str] = []
    # A stopping run's words in full first, then in fewer, before the line is cut.
    for short in (False, True):
        parts = _parts(summary, paused, short=short)
        if ascii:
            parts = [
                (name, said.encode("ascii", "backslashreplace").decode()) for name, said in parts
            ]
        texts.extend(
            ", ".join(said for name, said in parts if name not in _LEAST_NEEDED[:left_out])
            for left_out in range(len(_LEAST_NEEDED) + 1)
        )
    if summary.total:
        for text in texts:
            room = width - len(text) - 3  # "[", "] "
            if room >= MIN_BAR:
                return _bar(summary, min(BAR_WIDTH, room)) + text
    for text in texts:
        if len(text) <= width:
            return text
    if ascii:
        return texts[-1][: width - 3] + "..." if width > 2 else "." * max(width, 0)
    return texts[-1][: width - 1] + "…" if width > 0 else ""


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _bar(summary: BatchSummary, width: int = BAR_WIDTH) -> str:
    if not summary.total:
        return ""
    # What was done (here or by another run): a run stopped early ends with a bar as far
    # as it got, not a full one, its inputs not started left out.
    settled = summary.finished + summary.elsewhere
    filled = min(width, width * settled // summary.total)
    return "[" + "#" * filled + "." * (width - filled) + "] "


class Progress:
    """Draws `summary()` on `stream` until `stop()`: in place when `tty`, else as lines."""

    def __init__(
        self,
        summary: Callable[[], BatchSummary],
        stream: IO[str],
        *,
        tty: bool,
        every: float,
        paused: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self._summary = summary
        self._paused = paused
        """The seconds left of a rate limit's pause."""
        self._stream = stream
        self._tty = tty
        self._every = every
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._drawn = False
        self._ascii = not writes_unicode(stream)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="allama-progress", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        # Drawn every `every` seconds, and at once when the run begins to stop (Ctrl-C):
        # a plain line's 5 s would leave the first Ctrl-C unanswered, and a second one
        # (which abandons the calls in flight) is what a user would try next.
        stopping = False
        due = time.monotonic() + self._every
        while not self._stopped.wait(min(self._every, _LOOK)):
            began = not stopping and self._summary().stopped is not None
            stopping = stopping or began
            if began or time.monotonic() >= due:
                self._draw()
                due = time.monotonic() + self._every

    def _draw(self) -> None:
        summary, paused = self._summary(), self._paused()
        with self._lock:
            if self._tty:
                line = fitted(summary, self._width(), paused, ascii=self._ascii)
                self._stream.write("\r" + line + "\x1b[K")
            else:
                self._stream.write("progress: " + progress_text(summary, paused) + "\n")
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
