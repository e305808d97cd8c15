"""A ledger of many inputs: what a budget counts from the start of a run is read row by row
(the rows of a million inputs took 400 MB at once), and a run's `-wal` grown while a reader
held an old moment of the ledger is cut back once a checkpoint has moved it."""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import pytest

from allama._prices import MONEY
from allama.batch import _ledger
from allama.batch._ledger import Ledger, Status, _Agreement

MINE = {"provider": "openai", "model": "gpt-4o-mini", "inputs": "a", "types": "t", "type": "T"}
OTHER = {**MINE, "provider": "anthropic"}


def paid_read_at_once(path: Path, like: dict[str, Any]) -> tuple[Decimal, dict[str, str]]:
    """`Ledger.paid` as it was, every costed row read at once: what it must still answer."""
    agree = _Agreement(like)
    db = sqlite3.connect(path)
    settings_of = dict(db.execute("SELECT run_id, settings FROM runs").fetchall())
    found = db.execute("SELECT key, cost, status, run_id FROM items WHERE cost IS NOT NULL")
    rows = found.fetchall()
    db.close()
    total = Decimal(0)
    unfinished: dict[str, str] = {}
    with localcontext(MONEY):
        for key, cost, status, run_id in rows:
            if not agree(settings_of.get(run_id)):
                continue
            try:
                total += Decimal(cost)
            except ArithmeticError:
                continue
            if status != Status.DONE:
                unfinished[str(key)] = str(cost)
    return total, unfinished


def add_rows(path: Path, rows: list[tuple[str, int, str, str | None, str | None]]) -> None:
    """Rows (key, position, status, run, cost) written at once, as runs would leave them."""
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO items (key, position, label, status, attempts, run_id, cost) "
            "VALUES (?, ?, ?, ?, 1, ?, ?)",
            [(key, n, f"#{n}", status, run, cost) for key, n, status, run, cost in rows],
        )
    db.close()


def test_what_earlier_runs_paid_is_the_same_exact_sum_read_row_by_row(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    mine = Ledger(path, settings=MINE)
    other = Ledger(path, settings=OTHER)
    odd = [
        "0.1",
        "0.2",  # 0.30000000000000004 in floats
        "1E-7",
        "0.000000123456789012345678901",
        "12345678901234567890.123456789",  # past 28 digits: rounded, as it was, in order
        "0E-10",
        "-0.000001",
        "not a number",  # not counted
        None,  # unknown: not counted here (`unpriced` says why)
    ]
    rows: list[tuple[str, int, str, str | None, str | None]] = []
    for n in range(3000):
        run = (mine.run_id, other.run_id, "a-run-no-longer-there", None)[n % 4]
        status = (Status.DONE, Status.FAILED, Status.PENDING, Status.IN_FLIGHT)[n % 7 % 4]
        cost = odd[n % len(odd)] if n % 5 else f"0.{n:07d}{n % 13}"
        rows.append((f"k{n}", n, status, run, cost))
    add_rows(path, rows)
    book = Ledger(path, read_only=True)
    total, unfinished = book.paid(MINE)
    assert (total, unfinished) == paid_read_at_once(path, MINE)
    assert str(total) == "2481481459148148145974.682128"  # (exactly: ...974.682101)
    assert len(unfinished) == 1322
    # Not done, of this job or of a run the ledger does not know (or of none): as kept.
    assert [unfinished[key] for key in ("k2", "k3", "k6", "k10")] == [
        "1E-7",
        "0.000000123456789012345678901",
        "-0.000001",
        "0.000001010",
    ]
    assert "k0" not in unfinished  # done
    assert "k5" not in unfinished  # another provider's
    assert "k8" not in unfinished  # unknown
    assert "k16" not in unfinished  # not a number
    assert book.paid() == paid_read_at_once(path, {})
    for ledger in (book, mine, other):
        ledger.close()


def test_what_earlier_runs_paid_is_read_in_the_memory_of_a_few_rows(tmp_path: Path) -> None:
    """Summed as the rows are read: a ledger of 50,000 finished inputs took 19 MB at once."""
    path = tmp_path / "run.sqlite"
    mine = Ledger(path, settings=MINE)
    done = [(f"{n:064x}", n, Status.DONE, mine.run_id, f"0.000{n:06d}") for n in range(50_000)]
    add_rows(path, [*done, ("failed", 50_000, Status.FAILED, mine.run_id, "0.5")])
    tracemalloc.start()
    try:
        paid = mine.paid(MINE)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert paid == (Decimal("1.749975"), {"failed": "0.5"})
    assert peak < 500_000
    mine.close()


def test_a_wal_grown_while_a_reader_held_an_old_moment_is_cut_back_after_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader reading long (`status`, `export`) keeps the run from starting its `-wal`
    over: it grew 8 KB an input, and kept that size, reused, until the run ended."""
    path = tmp_path / "run.sqlite"
    run = Ledger(path, settings={})
    assert run._connection.execute("PRAGMA journal_size_limit").fetchone() == (64 * 1024 * 1024,)
    run.close()
    limit = 256 * 1024  # in place of 64 MiB: a test that writes little
    monkeypatch.setattr(_ledger, "WAL_SIZE_LIMIT", limit)
    run = Ledger(path, settings={})
    reader = Ledger(path, read_only=True)
    wal = path.with_name("run.sqlite-wal")
    value = json.dumps({"text": "x" * 2000})

    def write(keys: range) -> None:
        for n in keys:
            assert run.claim(f"k{n}", n, f"#{n}").granted
            assert run.finish(f"k{n}", status=Status.DONE, seconds=0.1, value=value)

    with reader.snapshot():
        assert reader.counts() == {}  # the moment it reads, from here
        write(range(250))
        assert reader.counts() == {}
        grown = wal.stat().st_size
        assert grown > 4 * 1024 * 1024  # past SQLite's checkpoint of 1,000 pages: not moved
    write(range(250, 252))  # a checkpoint, as the reader let go; the -wal started over
    assert wal.stat().st_size <= limit
    assert reader.counts() == {"done": 252}
    run.end(None)
    run.close()
    assert not wal.stat().st_size
    reader.close()
