"""The threads a sync batch run makes its provider calls in: daemons, which a run can leave.

`concurrent.futures.ThreadPoolExecutor` is not made for work that may be abandoned. When
the interpreter begins to exit it refuses new work ("cannot schedule new futures after
shutdown"), so a run still going then would see every input it starts fail; and it joins
its threads, so a run ended by `close()` holds the program's exit for as long as its calls
take. A run's calls are abandoned with the process instead: the ledger keeps those inputs
in flight, and the next run, seeing this one's process gone, sends them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["DaemonPool", "settle"]

_Work = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonPool(Executor):
    """Up to `size` daemon threads, started as work comes and none is idle."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._shut:
                raise RuntimeError("the batch run's threads are shut down: the run has ended")
            future: Future[Any] = Future()
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._serve,
                    name=f"{self._name}_{len(self._threads)}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
        return future

    def _serve(self) -> None:
        while True:
            work = self._work.get()
            if work is None:
                return
            _run(*work)
            del work  # the request and its answer are not kept while the thread waits
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more work; with `cancel_futures`, drop what has not started; with
        `wait`, wait for the threads to finish what they are doing."""
        with self._lock:
            self._shut = True
            if cancel_futures:
                with contextlib.suppress(queue.Empty):
                    while True:
                        work = self._work.get_nowait()
                        if work is not None:
                            work[0].cancel()
            for _ in self._threads:
                self._work.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


def _run(
    future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as error:  # handed to whoever waits on the future
        future.set_exception(error)
    else:
        future.set_result(result)


def settle(done: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Hand a result (or the error instead) to the future a task waits on, unless the task
    gave up waiting (it was cancelled): on the future's loop, after work done elsewhere."""
    if done.cancelled():
        return
    if isinstance(error, StopIteration):  # which a future cannot hold
        error = RuntimeError(f"the call raised StopIteration: {error}")
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(result)
