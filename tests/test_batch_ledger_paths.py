"""A ledger a run cannot use is said as what it is, as a `LedgerError`, before anything is
sent: a folder that is not there, or a ledger this user cannot write (which is a ledger,
that `status` and `export` read, not "not a ledger")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import allama
from allama.batch import LedgerError
from allama.mock import TestProvider


def test_a_ledger_in_a_folder_that_is_not_there_is_a_ledger_error(tmp_path: Path) -> None:
    where = tmp_path / "nope" / "sub"
    with pytest.raises(LedgerError) as raised:
        list(
            allama.batch(
                TestProvider(),
                int,
                ["doc"],
                request=allama.ChatRequest("m"),
                ledger=where / "run.sqlite",
            )
        )
    assert str(raised.value) == f"the ledger's folder does not exist: `{where}`"
    assert isinstance(raised.value, FileNotFoundError)  # as it was before


def test_a_ledger_this_user_cannot_write_is_said_read_only_not_no_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "run.sqlite"
    request = allama.ChatRequest("m")
    list(allama.batch(TestProvider(), int, ["doc"], request=request, ledger=ledger))
    if os.geteuid() == 0:  # no folder is read-only to root: the system says so instead
        from allama.batch import _ledger

        real = os.access
        monkeypatch.setattr(
            _ledger.os,
            "access",
            lambda path, mode: real(path, mode) and not (mode & os.W_OK and Path(path) == tmp_path),
        )
    os.chmod(tmp_path, 0o555)
    try:
        with pytest.raises(LedgerError) as raised:
            list(allama.batch(TestProvider(), int, ["doc"], request=request, ledger=ledger))
    finally:
        os.chmod(tmp_path, 0o755)
    assert str(raised.value) == (
        f"cannot write the ledger: `{tmp_path}` is read-only (a run records every input "
        "there); `allama batch status` and `export` read it where it is"
    )


def test_a_ledger_another_process_holds_whole_is_said_held_not_no_ledger(
    tmp_path: Path,
) -> None:
    # "`l.sqlite` is not a ledger: database is locked" sent its reader looking for another
    # file, where a moment's wait was all it needed.
    import sqlite3

    from allama.batch._ledger import Ledger, runs_settings

    ledger = tmp_path / "l.sqlite"
    run = allama.batch(TestProvider(), int, ["1"], request=allama.ChatRequest("m"), ledger=ledger)
    assert [r.failure for r in run] == [None]
    holder = sqlite3.connect(ledger, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(LedgerError) as caught:
            Ledger(ledger, read_only=True)
        assert str(caught.value) == (
            f"`{ledger}` is held by another process (database is locked): a run or a copy "
            "holding it whole; try again in a moment"
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert runs_settings(ledger) != []
