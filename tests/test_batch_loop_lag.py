"""A run on the caller's event loop never stops it while SQLite waits for another
connection's lock on the ledger: another run's write (at the opening, or in the middle), a
reader (`allama batch status`, `export`) that its end's checkpoint waits for. The loop's other
tasks (a web server's) go on; the run waits, as it did, and every input ends in the ledger."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import allama
import allama.mock
from allama import ChatRequest
from allama.batch import BatchFailure, Ledger, _ledger
from allama.batch._run import CLOSED_EARLY

TEMPLATE = ChatRequest("gpt-4o-mini").system("Read the number.")


class Row(BaseModel):
    n: int


class Ticker:
    """A task that wakes every 5 ms, as a server's would: how late it woke, at most."""

    def __init__(self) -> None:
        self.most_late = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            self.most_late = max(self.most_late, now - last - 0.005)
            last = now

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@contextmanager
def held(path: Path, how: str, seconds: float) -> Iterator[threading.Event]:
    """Another connection holds the ledger for `seconds` from when the event is set: its
    write lock (`BEGIN IMMEDIATE`), or a read of it (`BEGIN`, a read: the moment it
    reads)."""
    taken = threading.Event()

    def hold() -> None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute(how)
        db.execute("SELECT COUNT(*) FROM items").fetchall()
        taken.set()
        time.sleep(seconds)
        db.execute("ROLLBACK")
        db.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        taken.wait()
        yield taken
    finally:
        holder.join()


def made(path: Path) -> None:
    """The ledger, made by a first run (WAL mode, its tables)."""
    provider = allama.mock.MockProvider(['{"n": 0}'])
    results = list(allama.batch(provider, Row, ["doc x"], request=TEMPLATE, ledger=path))
    assert [r.failure for r in results] == [None]


def counts(path: Path) -> tuple[dict[str, int], list[tuple[str, str | None]]]:
    book = Ledger(path, read_only=True)
    try:
        return book.counts(), [(run["state"], run["stopped"]) for run in book.runs()]
    finally:
        book.close()


def docs(count: int) -> list[str]:
    return [f"doc {n}" for n in range(count)]


def test_a_run_waits_for_another_runs_write_and_for_a_reader_without_stopping_the_loop(
    tmp_path: Path,
) -> None:
    # Before, the loop stopped a second behind the write lock (the run's opening waited
    # in SQLite's sleep) and again behind the reader (its end's checkpoint, up to 3 s).
    path = tmp_path / "l.sqlite"
    made(path)

    async def main() -> tuple[list[Any], float, float]:
        provider = allama.mock.MockProvider([f'{{"n": {n}}}' for n in range(20)])
        with Ticker() as ticker, held(path, "BEGIN", 2.0), held(path, "BEGIN IMMEDIATE", 1.0):
            began = time.monotonic()
            async with allama.abatch(provider, Row, docs(20), request=TEMPLATE, ledger=path) as run:
                results = [result async for result in run]
            took = time.monotonic() - began
            return results, took, ticker.most_late

    results, took, most_late = asyncio.run(main())
    assert sorted((r.index, r.value, r.failure) for r in results) == [
        (n, Row(n=n), None) for n in range(20)
    ]
    assert most_late < 0.5
    # The run waited for the write (1 s) and its end for the reader (2 s), as before.
    assert took > 1.5
    assert counts(path) == ({"done": 21}, [("finished", None), ("finished", None)])


class LockedAfterTheFirst:
    """Inputs whose first is read, and its result given (so committed), before another
    run's write takes the ledger for `seconds`; the rest are read once it holds it, and
    claimed while it does. `times`: when the lock was taken and let go."""

    def __init__(self, path: Path, count: int, seconds: float) -> None:
        self.path, self.count, self.seconds = path, count, seconds
        self.times: list[float] = []
        self.first_given = asyncio.Event()

    def _hold(self, taken: threading.Event) -> None:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        self.times.append(time.monotonic())
        taken.set()
        time.sleep(self.seconds)
        self.times.append(time.monotonic())
        db.execute("ROLLBACK")
        db.close()

    async def inputs(self) -> AsyncIterator[str]:
        yield "doc 0"
        await self.first_given.wait()
        taken = threading.Event()
        threading.Thread(target=self._hold, args=(taken,)).start()
        while not taken.is_set():
            await asyncio.sleep(0.001)
        for n in range(1, self.count):
            yield f"doc {n}"

    async def let_go(self) -> None:
        while len(self.times) < 2:
            await asyncio.sleep(0.01)


def test_a_lock_held_in_the_middle_of_a_run_holds_its_writes_not_the_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.sqlite"
    made(path)

    async def main() -> tuple[list[tuple[Any, float]], list[float], float]:
        provider = allama.mock.MockProvider([f'{{"n": {n}}}' for n in range(10)])
        locked = LockedAfterTheFirst(path, 10, 0.8)
        results = []
        with Ticker() as ticker:
            async with allama.abatch(
                provider, Row, locked.inputs(), request=TEMPLATE, ledger=path
            ) as run:
                async for result in run:
                    results.append((result, time.monotonic()))
                    locked.first_given.set()
            await locked.let_go()
            return results, locked.times, ticker.most_late

    results, lock, most_late = asyncio.run(main())
    assert sorted((r.index, r.value, r.failure) for r, _ in results) == [
        (n, Row(n=n), None) for n in range(10)
    ]
    # Each input after the first was given once the lock was let go: after its commits.
    assert all(at >= lock[1] for r, at in results if r.index > 0)
    assert most_late < 0.3
    assert counts(path) == ({"done": 11}, [("finished", None), ("finished", None)])


def test_a_lock_held_past_the_wait_fails_the_runs_writes_as_sqlites_wait_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The whole wait is a minute; cut here to a fifth of a second, the lock held 1.5 s.
    path = tmp_path / "l.sqlite"
    made(path)
    monkeypatch.setattr(_ledger, "LOCK_WAIT_MS", 200)

    async def main() -> tuple[list[tuple[Any, float]], BaseException | None, list[float], float]:
        provider = allama.mock.MockProvider([f'{{"n": {n}}}' for n in range(5)])
        locked = LockedAfterTheFirst(path, 5, 1.5)
        results = []
        error: BaseException | None = None
        with Ticker() as ticker:
            try:
                async with allama.abatch(
                    provider, Row, locked.inputs(), request=TEMPLATE, ledger=path
                ) as run:
                    async for result in run:
                        results.append((result, time.monotonic()))
                        locked.first_given.set()
            except allama.LedgerError as raised:
                error = raised
            await locked.let_go()
            return results, error, locked.times, ticker.most_late

    results, error, lock, most_late = asyncio.run(main())
    unwritten = BatchFailure(
        "not_started",
        "not started: the ledger could not be written: OperationalError: database is locked",
    )
    assert [(r.index, r.failure) for r, _ in results] == [
        (0, None),
        *[(n, unwritten) for n in range(1, 5)],
    ]
    # Given up after its wait, not when the lock was let go.
    assert all(at < lock[1] for _, at in results)
    assert str(error) == (
        f"the ledger `{path}` could not be written: database is locked; every input this "
        "run ended is in it; the run started no more"
    )
    assert most_late < 0.3


def test_a_run_closed_while_its_ledger_opens_ends_in_it_as_closed(tmp_path: Path) -> None:
    # Its opening waits for another run's write in a thread: closed meanwhile, the run
    # waits for the opening to end, then ends as any run closed early does.
    path = tmp_path / "l.sqlite"
    made(path)

    async def main() -> float:
        provider = allama.mock.MockProvider(['{"n": 1}'])
        with Ticker() as ticker, held(path, "BEGIN IMMEDIATE", 0.6):
            run = allama.abatch(provider, Row, docs(3), request=TEMPLATE, ledger=path)
            reading = asyncio.ensure_future(anext(aiter(run)))
            await asyncio.sleep(0.1)
            await run.aclose()
            with pytest.raises(StopAsyncIteration):
                await reading
        assert provider.call_count == 0
        return ticker.most_late

    assert asyncio.run(main()) < 0.3
    assert counts(path) == ({"done": 1}, [("finished", None), ("finished", CLOSED_EARLY)])
