"""`allama batch run` sharing its ledger with another run: the inputs it met in flight in
that run, and left to it, are written to its `--out` when the other run finished them
before this one ended, and the summary says where the rest stand."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _batch_server import BatchServer
from allama.batch import Ledger
from allama.batch._run import IN_FLIGHT_ELSEWHERE, _Runner
from allama.cli import main

ROW_TYPE = "from pydantic import BaseModel\n\n\nclass Row(BaseModel):\n    n: int\n"


class HoldingServer(BatchServer):
    """A `BatchServer` that calls `before` once, as the next request comes, before
    answering it: the other run finishes its inputs while this run's request waits."""

    def __init__(self) -> None:
        super().__init__()
        self.before: Callable[[], None] | None = None

    def admit(self) -> float | None:
        with self.lock:
            hook, self.before = self.before, None
        if hook is not None:
            hook()
        return super().admit()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[HoldingServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = HoldingServer()
    served.start()
    yield served
    served.stop()


@pytest.fixture
def row_type(tmp_path: Path) -> str:
    module = tmp_path / "row.py"
    module.write_text(ROW_TYPE, encoding="utf-8")
    return f"{module}:Row"


def write_docs(docs: Path, texts: dict[str, int]) -> None:
    docs.mkdir(exist_ok=True)
    for name, n in texts.items():
        (docs / name).write_text(f"doc {n}\n", encoding="utf-8")


def run(server: BatchServer, row_type: str, source: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "batch",
            "run",
            str(source),
            "--type",
            row_type,
            "--provider",
            "openai",
            "--base-url",
            server.url,
            "--model",
            "gpt-4o-mini",
            "--out",
            str(out),
            "--no-progress",
            *extra,
        ]
    )


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def summary_of(err: str) -> list[str]:
    return [re.sub(r"\d+\.\d+ s\b", "T s", line) for line in err.splitlines()]


class OtherRun:
    """Another run of the shared ledger, alive (this process), holding `held` in flight:
    it finishes them as a run does, with the outcome a first run's ledger recorded."""

    def __init__(self, shared: Path, first: Path, held: list[str]) -> None:
        earlier = Ledger(first, read_only=True)
        try:
            (settings,) = [entry["settings"] for entry in earlier.runs()]
            self.rows = {row.label: row for row in earlier.rows()}
        finally:
            earlier.close()
        self.ledger = Ledger(shared, settings=settings)
        for label in held:
            row = self.rows[label]
            assert self.ledger.claim(row.key, row.position, label).granted

    def finish(self, label: str) -> None:
        row = self.rows[label]
        assert self.ledger.finish(
            row.key,
            status=row.status,
            seconds=row.seconds or 0.0,
            value=row.value,
            source=row.source,
            record=row.record,
            error=row.error,
            cost=row.cost,
            tokens=row.tokens,
        )

    def key(self, label: str) -> str:
        return self.rows[label].key


def met_elsewhere(monkeypatch: pytest.MonkeyPatch, keys: set[str]) -> threading.Event:
    """An event set once the run has given each of `keys` as in flight in another run."""
    met: set[str] = set()
    all_met = threading.Event()
    finish = _Runner._finish

    def noted(self: _Runner, result: Any) -> None:
        finish(self, result)
        if result.failure is not None and result.failure.kind == IN_FLIGHT_ELSEWHERE:
            met.add(result.key)
            if keys <= met:
                all_met.set()

    monkeypatch.setattr(_Runner, "_finish", noted)
    return all_met


def test_values_the_other_run_finished_before_this_one_ended_are_in_its_output(
    server: HoldingServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, {"doc-01.txt": 1, "doc-02.txt": 2, "doc-04.txt": 4})
    first = tmp_path / "first.jsonl"
    assert run(server, row_type, docs, first) == 0
    earlier_rows = {row["label"]: row for row in rows_of(first)}
    # Doc 5 is this run's to send; doc-06 is a copy of doc 1.
    write_docs(docs, {"doc-05.txt": 5, "doc-06.txt": 1})
    shared = tmp_path / "shared.sqlite"
    other = OtherRun(
        shared, Path(f"{first}.ledger.sqlite"), ["doc-01.txt", "doc-02.txt", "doc-04.txt"]
    )
    held = {other.key(label) for label in ("doc-01.txt", "doc-02.txt", "doc-04.txt")}
    all_met = met_elsewhere(monkeypatch, held)

    def finish_two() -> None:
        # As this run's request for doc 5 waits, the other run finishes two of the three
        # it holds, after this run met them in flight there.
        assert all_met.wait(30)
        other.finish("doc-01.txt")
        other.finish("doc-02.txt")

    server.before = finish_two
    capsys.readouterr()
    out = tmp_path / "a.jsonl"
    try:
        assert run(server, row_type, docs, out, "--ledger", str(shared)) == 0
    finally:
        other.ledger.close()
    err = capsys.readouterr().err
    rows = rows_of(out)
    # Doc 5 as sent, then the two the other run finished, once each, as an earlier run's
    # values are written (their records), the copy of doc 1 marked so.
    assert [row["label"] for row in rows] == [
        "doc-05.txt",
        "doc-01.txt",
        "doc-02.txt",
        "doc-06.txt",
    ]
    assert rows[0]["value"] == {"n": 5}
    assert rows[1] == earlier_rows["doc-01.txt"]
    assert rows[2] == earlier_rows["doc-02.txt"]
    assert rows[3] == {**earlier_rows["doc-01.txt"], "label": "doc-06.txt", "duplicate": True}
    export = f"allama batch export {shared}"
    lines = summary_of(err)
    # The run's own summary is what it was when it ended; the line after it says what the
    # ledger holds of those it left to the other run.
    assert "1 done, 0 failed, 4 in flight in another run, in T s" in lines
    assert (
        "in flight in another run when met: 4; 3 finished by it since, written to the output; "
        f"1 still in flight there (`{export}` writes its value once it finishes it)"
    ) in lines
    assert (
        f"output: {out} (4 values, 3 of them finished by the other run that held them in flight)"
        in lines
    )


def test_failures_and_inputs_left_by_the_other_run_are_counted_and_not_written(
    server: HoldingServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, {"doc-01.txt": 1, "doc-02.txt": 2, "doc-07.txt": 7})
    first = tmp_path / "first.jsonl"
    assert run(server, row_type, docs, first) == 0
    earlier_rows = {row["label"]: row for row in rows_of(first)}
    write_docs(docs, {"doc-05.txt": 5})
    shared = tmp_path / "shared.sqlite"
    held = ["doc-01.txt", "doc-02.txt", "doc-07.txt"]
    other = OtherRun(shared, Path(f"{first}.ledger.sqlite"), held)
    all_met = met_elsewhere(monkeypatch, {other.key(label) for label in held})

    def finish_and_end() -> None:
        # It fails doc 7 (no JSON), finishes doc 1, and is killed holding doc 2.
        assert all_met.wait(30)
        other.finish("doc-07.txt")
        other.finish("doc-01.txt")
        other.ledger.end("killed")

    server.before = finish_and_end
    capsys.readouterr()
    out = tmp_path / "a.jsonl"
    try:
        assert run(server, row_type, docs, out, "--ledger", str(shared)) == 0
    finally:
        other.ledger.close()
    lines = summary_of(capsys.readouterr().err)
    rows = rows_of(out)
    assert [row["label"] for row in rows] == ["doc-05.txt", "doc-01.txt"]
    assert rows[1] == earlier_rows["doc-01.txt"]
    export = f"allama batch export {shared}"
    assert (
        "1 done, 0 failed, 3 in flight in another run (1 of them left unfinished by it, which "
        "has ended: a run again sends them), in T s"
    ) in lines
    assert (
        "in flight in another run when met: 3; 1 finished by it since, written to the output; "
        f"1 failed there (`{export} --failed` writes them); 1 left unfinished there (a run "
        "again sends it)"
    ) in lines
    assert (
        f"output: {out} (2 values, 1 of them finished by the other run that held it in flight)"
        in lines
    )


def test_a_run_whose_inputs_the_other_run_still_holds_points_to_export(
    server: HoldingServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, {"doc-01.txt": 1, "doc-02.txt": 2})
    first = tmp_path / "first.jsonl"
    assert run(server, row_type, docs, first) == 0
    shared = tmp_path / "shared.sqlite"
    other = OtherRun(shared, Path(f"{first}.ledger.sqlite"), ["doc-01.txt", "doc-02.txt"])
    capsys.readouterr()
    out = tmp_path / "a.jsonl"
    try:
        assert run(server, row_type, docs, out, "--ledger", str(shared)) == 0
        lines = summary_of(capsys.readouterr().err)
        assert out.read_text(encoding="utf-8") == ""
        export = f"allama batch export {shared}"
        assert "0 done, 0 failed, 2 in flight in another run, in T s" in lines
        assert (
            "in flight in another run when met: 2; 2 still in flight there "
            f"(`{export}` writes their values once it finishes them)"
        ) in lines
        assert f"output: {out} (0 values)" in lines
        # Once the other run finishes them, `export` writes them; a run again gives them.
        other.finish("doc-01.txt")
        other.finish("doc-02.txt")
    finally:
        other.ledger.close()
    assert main(["batch", "export", str(shared)]) == 0
    exported = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(row["label"] for row in exported) == ["doc-01.txt", "doc-02.txt"]
