"""`allama batch run | status | export` against a local Chat Completions server that fails
some documents (see `_batch_server`): the output rows, the summary, resuming, the budget
stop, Ctrl-C, progress lines and the errors a bad input file gets."""

from __future__ import annotations

import codecs
import contextlib
import http.server
import importlib
import io
import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from hypothesis import assume, settings
from hypothesis import given as generated
from hypothesis import strategies as st

from _batch_server import BatchServer
from _provider_batch_server import ProviderBatchServer
from allama.batch import Ledger
from allama.cli import main

PIPES: dict[str, Any] = {"capture_output": True, "text": True, "check": True}
PRICES = genai_prices.__version__
ROW_TYPE = "from pydantic import BaseModel\n\n\nclass Row(BaseModel):\n    n: int\n"

USAGE = {"input_tokens": 100, "output_tokens": 10}
COST = {"input": "0.000015", "output": "0.000006", "total": "0.000021", "currency": "USD"}
"""gpt-4o-mini at $0.15 / $0.60 per million tokens: every answer is 100 in, 10 out."""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[BatchServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = BatchServer().start()
    yield served
    served.stop()


@pytest.fixture
def row_type(tmp_path: Path) -> str:
    module = tmp_path / "row.py"
    module.write_text(ROW_TYPE, encoding="utf-8")
    return f"{module}:Row"


def folder(tmp_path: Path, numbers: list[int]) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in numbers:
        (docs / f"doc-{n:02d}.txt").write_text(f"doc {n}\n", encoding="utf-8")
    (docs / "notes.pdf").write_bytes(b"%PDF not a document")  # neither .txt nor .md
    return docs


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
            *extra,
        ]
    )


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def by_label(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["label"]: row for row in rows}


def summary_of(err: str) -> list[str]:
    """The summary's lines, after the progress lines, with times made `T`."""
    lines = [
        line
        for line in err.splitlines()
        if not line.startswith(("progress: ", "note: left out of the folder: "))
    ]
    return [re.sub(r"\d+\.\d+ s\b", "T s", line) for line in lines]


def record(passes: int = 1) -> dict[str, Any]:
    return {
        "mode": "native",
        "passes": passes,
        "repaired": False,
        "enforcement": "exact",
        "usage": USAGE,
        "cost": COST,
    }


def without_source(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its price source (which names the price package's version) checked
    and left out."""
    source = row["record"]["cost"].pop("source")
    assert source.startswith("genai-prices ") and source.endswith(", openai/gpt-4o-mini")
    return row


def test_a_folder_run_writes_validated_values_with_their_records(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2, 3, 4, 7, 13])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    rows = rows_of(out)
    # Only the validated values: 7 answers no JSON, 13 is refused with a 400.
    assert sorted(row["label"] for row in rows) == [
        "doc-01.txt",
        "doc-02.txt",
        "doc-03.txt",
        "doc-04.txt",
    ]
    for row in rows:
        n = int(row["label"][4:6])
        assert list(row) == ["label", "key", "value", "record"]
        assert re.fullmatch(r"[0-9a-f]{64}", row["key"])
        assert without_source(row)["value"] == {"n": n}
        assert row["record"] == record()
    err = capsys.readouterr().err
    ledger = tmp_path / "out.jsonl.ledger.sqlite"
    assert err.splitlines()[0] == (
        f"6 documents from {docs} (folder) to Row with openai gpt-4o-mini, concurrency 8"
    )
    summary = summary_of(err)[1:]
    assert summary[:5] == [
        "4 done, 2 failed, in T s",
        "enforcement: exact 4",
        "failures: extraction_parse 1, invalid_request 1",
        # 3 was answered 503 once and sent again; 7's answer was paid for, 13's was not.
        "passes 5, attempts 7, tokens 500 in / 50 out",
        "cost $0.000105",
    ]
    assert summary[5].startswith("slowest: ")
    assert summary[6].startswith("most expensive: ")
    assert summary[7] == (
        "failed: doc-07.txt: extraction_parse: openai: failed to parse the output in `native` "
        "mode [provider=openai]"
    )
    assert summary[8:] == [
        # The provider's own words are withheld from logs, as the model's text is.
        "failed: doc-13.txt: invalid_request: invalid_request (12 chars withheld) "
        "[provider=openai, status=400]",
        f"output: {out} (4 values)",
        f"ledger: {ledger}",
    ]
    assert not out.with_name("out.jsonl.part").exists()
    assert sorted(server.sent.items()) == [(1, 1), (2, 1), (3, 2), (4, 1), (7, 1), (13, 1)]


def test_the_providers_words_for_a_failure_are_shown_only_when_asked(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Document 13 is refused with a 400 whose message is the provider's ("bad document"):
    # withheld from what the command prints and exports, unless asked for.
    docs = folder(tmp_path, [1, 13])
    out = tmp_path / "out.jsonl"
    ledger = tmp_path / "out.jsonl.ledger.sqlite"
    assert run(server, row_type, docs, out) == 0
    assert "bad document" not in capsys.readouterr().err
    export = ["batch", "export", str(ledger), "--failed"]
    assert main(export) == 0
    (failure,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert failure["error"] == {
        "kind": "invalid_request",
        "message": "invalid_request (12 chars withheld) [provider=openai, status=400]",
    }
    assert main([*export, "--provider-messages"]) == 0
    (failure,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert failure["error"]["provider_message"] == "bad document"
    assert main(["batch", "export", str(ledger), "--provider-messages"]) == 2
    assert "--provider-messages goes with --failed" in capsys.readouterr().err

    again = tmp_path / "again"
    again.mkdir()
    assert run(server, row_type, docs, again / "out.jsonl", "--provider-messages") == 0
    lines = capsys.readouterr().err.splitlines()
    (line,) = [line for line in lines if line.startswith("failed: doc-13")]
    assert line == (
        "failed: doc-13.txt: invalid_request: invalid_request (12 chars withheld) "
        "[provider=openai, status=400]; the provider said: bad document"
    )


def test_the_words_of_an_exception_of_the_types_own_code_are_shown_only_when_asked(
    server: BatchServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "picky.py"
    module.write_text(
        "from pydantic import BaseModel, field_validator\n\n"
        "class Row(BaseModel):\n"
        "    n: int\n\n"
        "    @field_validator('n')\n"
        "    @classmethod\n"
        "    def known(cls, n: int) -> int:\n"
        "        if n == 2:\n"
        "            raise LookupError(f'no record numbered {n}')  # not a ValueError\n"
        "        return n\n",
        encoding="utf-8",
    )
    docs = folder(tmp_path, [1, 2])
    assert run(server, f"{module}:Row", docs, tmp_path / "out.jsonl") == 0
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("failed: doc-02")]
    assert line == "failed: doc-02.txt: LookupError: message withheld (20 chars)"
    again = tmp_path / "again.jsonl"
    assert run(server, f"{module}:Row", docs, again, "--provider-messages") == 0
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("failed: doc-02")]
    assert line == (
        "failed: doc-02.txt: LookupError: message withheld (20 chars); its message was: "
        "no record numbered 2"
    )


def test_the_count_to_send_before_a_run_counts_a_document_given_again_once(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    first = tmp_path / "first.jsonl"
    first.write_text('{"text": "doc 1"}\n')
    assert run(server, row_type, first, out) == 0
    given = tmp_path / "given.jsonl"
    given.write_text("".join(f'{{"text": "doc {n}"}}\n' for n in [1, 2, 2, 2, 2, 4, 4]))
    capsys.readouterr()
    assert run(server, row_type, given, out) == 0
    # Two documents to send, each once, whatever their copies.
    assert summary_of(capsys.readouterr().err)[1] == (
        "ledger: 1 of these 7 documents is in it (1 done, 0 failed), 2 to send"
    )
    assert (server.sent[1], server.sent[2], server.sent[4]) == (1, 1, 1)


def test_the_providers_words_for_a_refusal_that_stopped_the_run_are_shown_when_asked(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.refusing = "model"  # a mistyped model: every input would meet it
    docs = folder(tmp_path, [1, 2])
    assert run(server, row_type, docs, tmp_path / "out.jsonl") == 1
    assert "does not exist" not in capsys.readouterr().err  # withheld, unasked
    assert run(server, row_type, docs, tmp_path / "out.jsonl", "--provider-messages") == 1
    lines = capsys.readouterr().err.splitlines()
    assert (
        lines.count(
            "stopped: the provider said: The model `gpt-4o-mini` does not exist or you have no "
            "access."
        )
        == 1
    )


def test_a_second_run_resumes_from_the_ledger_and_sends_nothing(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2, 5, 7])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    first = rows_of(out)
    sent = sum(server.sent.values())
    capsys.readouterr()
    assert run(server, row_type, docs, out) == 0
    assert sum(server.sent.values()) == sent
    # The output is written whole again, from the ledger.
    again = rows_of(out)
    assert sorted(again, key=lambda row: row["label"]) == sorted(
        first, key=lambda row: row["label"]
    )
    assert len(again) == 3
    summary = summary_of(capsys.readouterr().err)
    # Said before anything is sent.
    assert summary[1] == ("ledger: 4 of these 4 documents are in it (3 done, 1 failed), 0 to send")
    assert summary[2] == "3 done, 1 failed (4 finished by an earlier run), in T s"
    assert "passes 4, attempts 4, tokens 400 in / 40 out" in summary
    # Asked to, the failed input is sent again (and fails again).
    assert run(server, row_type, docs, out, "--retry-failed") == 0
    assert server.sent[7] == 2 and sum(server.sent.values()) == sent + 1
    assert summary_of(capsys.readouterr().err)[1] == (
        "ledger: 4 of these 4 documents are in it (3 done, 1 failed, tried again), 1 to send"
    )
    # A ledger of other settings (here another prompt) holds none of them, and says so.
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Read the number, carefully.")
    assert run(server, row_type, docs, out, "--prompt", str(prompt)) == 0
    assert summary_of(capsys.readouterr().err)[1] == (
        "ledger: none of these 4 documents is in it; its 4 inputs were extracted with other "
        "settings (type, prompt, model or provider), and stay"
    )
    # Its status tells the two sets of inputs apart.
    ledger = str(tmp_path / "out.jsonl.ledger.sqlite")
    assert main(["batch", "status", ledger]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "inputs: 8 (done 6, failed 2)"
    assert lines[2] == (
        "  of 2 settings (runs of another type, prompt, model or provider shared this ledger; "
        "each run sends only its own):"
    )
    assert [re.sub(r"\[inputs [0-9a-f]{12}\]", "[inputs X]", line) for line in lines[3:5]] == [
        f"  set {n}: openai gpt-4o-mini, Row [inputs X]: 4 (done 3, failed 1)" for n in (1, 2)
    ]
    assert lines[3][8:] != lines[4][8:]
    assert main(["batch", "status", ledger, "--json"]) == 0
    sets = json.loads(capsys.readouterr().out)["sets"]
    assert [(entry["set"], entry["inputs"], entry["counts"]) for entry in sets] == [
        (n, 4, {"done": 3, "failed": 1}) for n in (1, 2)
    ]
    one, two = (entry["inputs_of"] for entry in sets)
    # Export does not mix the two sets' values into one file unasked.
    assert main(["batch", "export", ledger]) == 2
    assert capsys.readouterr().err == (
        f"allama batch export: `{ledger}` holds values of 2 settings (runs of another type, "
        f"prompt, model or provider): set 1, openai gpt-4o-mini, Row [inputs {one}] (3); "
        f"set 2, openai gpt-4o-mini, Row [inputs {two}] (3); give --set N for one (as "
        "`allama batch status` numbers them), or --set all\n"
    )
    exported = {}
    for chosen in ("1", "2", "all"):
        assert main(["batch", "export", ledger, "--set", chosen]) == 0
        exported[chosen] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [len(exported[chosen]) for chosen in ("1", "2", "all")] == [3, 3, 6]
    assert {row["key"] for row in exported["1"]} | {row["key"] for row in exported["2"]} == {
        row["key"] for row in exported["all"]
    }
    assert not {row["key"] for row in exported["1"]} & {row["key"] for row in exported["2"]}
    # The first set is the first run's: the default prompt.
    assert {row["key"] for row in exported["1"]} == {row["key"] for row in first}
    # All of them: each row says its set (their labels are alike).
    assert "set" not in exported["1"][0]
    for number in ("1", "2"):
        mine = {row["key"] for row in exported[number]}
        assert {row["set"] for row in exported["all"] if row["key"] in mine} == {int(number)}
    assert main(["batch", "export", ledger, "--failed", "--set", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    for wrong in ("3", "0", "two"):
        assert main(["batch", "export", ledger, "--set", wrong]) == 2
        assert capsys.readouterr().err == (
            f"allama batch export: --set {wrong}: the ledger's runs have 2 sets of settings "
            "(1 to 2), or all\n"
        )


def test_sets_and_run_lengths_keep_to_the_order_runs_began_in_on_a_clock_set_back(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import types

    docs = folder(tmp_path, [1, 2])
    out, ledger = tmp_path / "out.jsonl", str(tmp_path / "out.jsonl.ledger.sqlite")
    assert run(server, row_type, docs, out) == 0
    first = {row["key"] for row in rows_of(out)}
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Read the number, carefully.")
    # The second run's clock is an hour behind (a time server's step; another host).
    real = time.time
    behind = types.SimpleNamespace(time=lambda: real() - 3600, monotonic=time.monotonic)
    module = sys.modules["allama.batch._ledger"]
    monkeypatch.setattr(module, "time", behind)
    assert (
        run(
            server,
            row_type,
            docs,
            tmp_path / "other.jsonl",
            "--ledger",
            ledger,
            "--prompt",
            str(prompt),
        )
        == 0
    )
    monkeypatch.setattr(module, "time", time)
    capsys.readouterr()
    assert main(["batch", "export", ledger, "--set", "1"]) == 0
    # Set 1 is the first run's, as status numbers sets: by their first run.
    assert {json.loads(line)["key"] for line in capsys.readouterr().out.splitlines()} == first
    # A run whose clock is set back while it runs is not said to end before it began.
    back = types.SimpleNamespace(time=real, monotonic=time.monotonic)
    steps = iter([0.0, *[-3600.0] * 10_000])
    back.time = lambda: real() + next(steps)
    monkeypatch.setattr(module, "time", back)
    third = tmp_path / "third.sqlite"
    assert run(server, row_type, docs, tmp_path / "o3.jsonl", "--ledger", str(third)) == 0
    monkeypatch.setattr(module, "time", time)
    capsys.readouterr()
    assert main(["batch", "status", str(third), "--json"]) == 0
    (seconds,) = [entry["seconds"] for entry in json.loads(capsys.readouterr().out)["runs"]]
    assert 0 <= seconds < 60


@pytest.mark.parametrize(
    ("reopened", "said"),
    [
        (None, "1 done, 0 failed, 2 in flight in another run, left to it, 1 pending or in "
         "flight), 1 to send"),
        # Failures those runs were trying again: the live run's are still its own; the
        # other's are failures to a run that does not try failures again.
        ("run-0", "1 done, 1 failed, 2 in flight in another run, left to it), 0 to send"),
    ],
)  # fmt: skip
def test_the_opening_line_leaves_out_of_what_it_sends_what_a_live_run_holds(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    reopened: str | None,
    said: str,
) -> None:
    import sqlite3

    docs = folder(tmp_path, [1, 2, 5, 4])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    ledger = tmp_path / "out.jsonl.ledger.sqlite"
    # Another run, alive (this process), holds two of them in flight; a dead one a third.
    live = Ledger(ledger, settings={"provider": "openai", "model": "gpt-4o-mini"})
    with contextlib.closing(sqlite3.connect(ledger)) as db, db:
        db.execute(
            "UPDATE items SET status = 'in_flight', run_id = ? WHERE position IN (0, 1)",
            (live.run_id,),
        )
        db.execute("UPDATE items SET status = 'in_flight' WHERE position = 2")
        db.execute("UPDATE items SET reopened = ? WHERE position < 3", (reopened,))
    capsys.readouterr()
    try:
        run(server, row_type, docs, out)
    finally:
        live.close()
    assert summary_of(capsys.readouterr().err)[1] == (
        f"ledger: 4 of these 4 documents are in it ({said}"
    )


def test_jsonl_input_with_fields_and_labels(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    lines = [
        {"ref": "A-1", "body": "doc 1"},
        {"body": "doc 2", "id": 17},
        {"body": "doc 4"},
    ]
    source.write_text(
        "\n".join(json.dumps(line) for line in lines[:2]) + "\n\n" + json.dumps(lines[2]) + "\n"
    )
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, source, out, "--field", "body") == 0
    labels = {row["label"]: row["value"] for row in rows_of(out)}
    # `id` where a line has one, else the line's number (blank lines count).
    assert labels == {"line 1": {"n": 1}, "17": {"n": 2}, "line 4": {"n": 4}}
    assert "3 documents from" in capsys.readouterr().err
    out.unlink()
    assert run(server, row_type, source, out, "--field", "body", "--id-field", "ref") == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {source} line 2: no value in the field `ref` (--id-field); "
        "line 4: no value in the field `ref` (--id-field) (2 to mend in all)\n"
    )
    assert not out.exists()


def test_csv_input(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.csv"
    source.write_text('id,text\nx1,doc 1\n,"doc 2, with a comma"\nx3,"doc 5\nover two lines"\n')
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, source, out) == 0
    labels = {row["label"]: row["value"] for row in rows_of(out)}
    assert labels == {"x1": {"n": 1}, "row 2": {"n": 2}, "x3": {"n": 5}}
    assert "3 documents from" in capsys.readouterr().err


def test_a_spreadsheets_csv_with_columns_of_no_name_or_named_twice_unread(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.csv"
    # As spreadsheets save them: trailing columns with no name, CRLF, a blank line.
    source.write_bytes(b"id,text,,,note,note\r\nx1,doc 1,,,a,b\r\n\r\nx2,doc 2,,,c,d\r\n")
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, source, out) == 0
    assert {row["label"]: row["value"] for row in rows_of(out)} == {
        "x1": {"n": 1},
        "x2": {"n": 2},
    }
    # The id's column named twice is ambiguous: which is the label?
    source.write_text("id,text,id\nx1,doc 1,y1\n")
    assert run(server, row_type, source, out) == 1
    assert capsys.readouterr().err.endswith(
        f"allama batch run: {source} (the header row): the column `id` is named twice\n"
    )


def test_ids_given_twice_are_said_and_every_output_line_is_one_row(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    lines = [
        {"id": "a\u2028b", "text": "doc 1"},
        {"id": "x\x85y", "text": "doc 2"},
        {"id": "a\u2028b", "text": "doc 4"},
        {"id": 7, "text": "doc 5"},
        {"id": "7", "text": "doc 8"},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, source, out) == 0
    assert (
        # (written escaped, as the summary writes labels: the terminal reads one line)
        "note: 2 documents have the id of an earlier document (`a\\u2028b`, `7`): their rows "
        "in the output share a label (their keys tell different documents apart)\n"
    ) in capsys.readouterr().err
    # Line ends to `str.splitlines` (U+2028, U+0085) are escaped: one line a row.
    rows = rows_of(out)
    assert len(rows) == 5 and len(out.read_bytes().splitlines()) == 5
    assert sorted(row["label"] for row in rows) == ["7", "7", "a\u2028b", "a\u2028b", "x\x85y"]
    assert len({row["key"] for row in rows}) == 5
    ledger = str(out) + ".ledger.sqlite"
    assert main(["batch", "export", ledger, "--out", str(tmp_path / "export.jsonl")]) == 0
    assert len((tmp_path / "export.jsonl").read_text(encoding="utf-8").splitlines()) == 5


def test_a_long_id_is_shown_shortened_and_written_whole(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An id may be a whole document (`--id-field text`): a megabyte of it printed in each
    line that names it made the summary megabytes long."""
    source = tmp_path / "in.jsonl"
    long = "doc 13 " + "x" * 100_000  # the fake refuses document 13: a failure's line too
    source.write_text("".join(json.dumps({"text": text}) + "\n" for text in [long, long]))
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, source, out, "--id-field", "text") == 0
    err = capsys.readouterr().err
    shown = "doc 13 " + "x" * 70 + "... (100,007 characters)"
    assert max(map(len, err.splitlines())) < 400
    assert f"note: 1 document has the id of an earlier document (`{shown}`)" in err
    assert f"failed: {shown}: invalid_request: " in err
    assert f"slowest: {shown} " in err
    ledger = str(out) + ".ledger.sqlite"
    assert main(["batch", "export", ledger, "--failed", "--out", str(tmp_path / "f.jsonl")]) == 0
    (row,) = rows_of(tmp_path / "f.jsonl")
    assert row["label"] == long


def test_a_copys_row_says_so_and_the_rows_costs_add_up_once(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    texts = ["doc 1", "doc 2", "doc 1", "doc 1"]
    source.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    out = tmp_path / "out.jsonl"
    for again in (False, True):  # the run, then a run that reads every value from the ledger
        assert run(server, row_type, source, out, "--concurrency", "1") == 0
        cost = [line for line in summary_of(capsys.readouterr().err) if line.startswith("cost")]
        rows = sorted(rows_of(out), key=lambda row: row["label"])
        assert [(row["label"], row.get("duplicate", False)) for row in rows] == [
            ("line 1", False),
            ("line 2", False),
            ("line 3", True),
            ("line 4", True),
        ]
        paid = sum(Decimal(r["record"]["cost"]["total"]) for r in rows if "duplicate" not in r)
        earlier = f" (${paid:f} of it paid by earlier runs)" if again else ""
        assert cost == [f"cost ${paid:f}{earlier}"] and paid == 2 * Decimal(COST["total"])
    assert sorted(server.sent.items()) == [(1, 1), (2, 1)]


def test_a_folders_documents_are_not_the_runs_own_output_prompt_or_ledger(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2])
    prompt = docs / "prompt.txt"
    prompt.write_text("Read the number.")
    out = docs / "results.txt"
    extra = ("--prompt", str(prompt), "--ledger", str(docs / "ledger.md"))
    for _ in range(2):
        assert run(server, row_type, docs, out, *extra) == 0
        assert "2 documents from" in capsys.readouterr().err
        assert sorted(row["label"] for row in rows_of(out)) == ["doc-01.txt", "doc-02.txt"]
    assert sum(server.sent.values()) == 2
    # A document of the folder the user wrote is not taken for an output, nor written over.
    for text in ("doc 4\n", '{"note": "doc 4"}\n'):
        (docs / "doc-04.txt").write_text(text)
        assert run(server, row_type, docs, docs / "doc-04.txt", *extra) == 2
        assert capsys.readouterr().err.endswith(
            f"--out `{docs / 'doc-04.txt'}` is a document of the input folder, not an output "
            "of this command: the run would write over it; name a .jsonl file, or one "
            "outside it\n"
        )
        assert (docs / "doc-04.txt").read_text() == text
    assert sum(server.sent.values()) == 2
    # The run's own output is one however long its first row (a value of megabytes); a
    # document that begins as a row does but is none is not.
    (docs / "doc-04.txt").write_text('{"label": "urgent", "text": "doc 4"}\n')
    assert run(server, row_type, docs, docs / "doc-04.txt", *extra) == 2
    assert "is a document of the input folder" in capsys.readouterr().err
    (docs / "doc-04.txt").unlink()
    out.write_text(
        out.read_text().replace('"value": {', f'"value": {{"_": "{"x" * (1 << 21)}", ', 1)
    )
    assert run(server, row_type, docs, out, *extra) == 0
    assert sorted(row["label"] for row in rows_of(out)) == ["doc-01.txt", "doc-02.txt"]


def test_a_csv_document_longer_than_the_csv_modules_own_limit(tmp_path: Path) -> None:
    from allama.batch._inputs import read_inputs

    long = "doc 4 " + "x" * 300_000  # the csv module stops at 131,072 characters a field
    source = tmp_path / "long.csv"
    source.write_text(f"id,text\nshort,doc 1\nlong,{long}\n")
    inputs = read_inputs(source)
    assert [(document.label, len(document)) for document in inputs] == [
        ("short", 5),
        ("long", len(long)),
    ]


def test_a_jsonl_line_holding_a_bare_carriage_return_is_one_line(tmp_path: Path) -> None:
    from allama.batch._inputs import read_inputs

    # JSON reads a `\r` between tokens as whitespace; a line ends at `\n` (or `\r\n`).
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"id": "a",\r "text": "doc 1"}\r\n{"id": "b", "text": "doc 2"}\n')
    inputs = read_inputs(source, id_field="id")
    assert [(document.label, str(document)) for document in inputs] == [
        ("a", "doc 1"),
        ("b", "doc 2"),
    ]


def test_documents_added_to_the_input_after_it_was_checked_are_not_read(tmp_path: Path) -> None:
    from allama.batch._inputs import read_inputs

    source = tmp_path / "growing.jsonl"
    source.write_text('{"text": "doc 1"}\n{"text": "doc 2"}\n')
    inputs = read_inputs(source)
    with source.open("a") as log:  # a log still written: one more, and one unfinished
        log.write('{"text": "doc 3"}\n{"text": ')
    assert len(inputs) == 2 and [document.label for document in inputs] == ["line 1", "line 2"]


@pytest.mark.parametrize(
    ("name", "content", "extra", "message"),
    [
        (
            "in.jsonl",
            '{"text": "doc 1"}\n{"text": "doc 2"\n',
            (),
            "{path} line 2: not JSON (Expecting ',' delimiter at column 17)",
        ),
        (
            "in.jsonl",
            '{"text": "doc 1"}\n{"text": "doc 2\n',  # a line cut short as it was written
            (),
            "{path} line 2: not JSON (Unterminated string starting at column 10)",
        ),
        (
            "in.jsonl",
            '{"text": "doc 1"}\n{"body": "doc 2", "id": 3}\n',
            (),
            "{path} line 2: no field `text` (its fields: `body`, `id`); "
            "name the document's field with --field",
        ),
        (
            "in.jsonl",
            '{"text": "doc 1"}\n\n{"text": 2}\n',
            (),
            "{path} line 3: the field `text` is a JSON number, not text",
        ),
        ("in.jsonl", '["doc 1"]\n', (), "{path} line 1: a JSON array, not an object"),
        (
            "in.jsonl",
            '{"text": "doc 1", "ref": NaN}\n',
            ("--id-field", "ref"),
            "{path} line 1: the field `ref` is a JSON number that is not finite: an id is text "
            "or a number",
        ),
        (
            "in.jsonl",
            '{"text": "doc 1", "ref": true}\n',
            ("--id-field", "ref"),
            "{path} line 1: the field `ref` is a JSON boolean: an id is text or a number",
        ),
        (
            "in.csv",
            "id,text\n1,doc 1\n2\n",
            (),
            "{path} row 2 (line 3): 1 field where the header has 2 columns (a row cut short?)",
        ),
        (  # a row without its id's cell: not named `row 1` without a word
            "in.csv",
            "text,id,source\ndoc 1,1\n",
            (),
            "{path} row 1 (line 2): 2 fields where the header has 3 columns (a row cut short?)",
        ),
        (
            "in.jsonl",
            '{"text": "doc 1", "n": 1' + "0" * 5000 + "}\n",
            (),
            "{path} line 1: JSON that cannot be read (Exceeds the limit (4300 digits) for "
            "integer string conversion: value has 5001 digits)",
        ),
        (
            "in.jsonl",
            '{"text": "doc 1"}\n{"text": "doc 2", "n": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
            (),
            "{path} line 2: JSON that cannot be read (nested too deeply)",
        ),
        ("in.jsonl", "\n\n", (), "{path}: no documents in this file"),
        ("in.jsonl", '{"id": 1, "text": null}\n', (), "{path} line 1: the field `text` is null"),
        ("in.jsonl", '{"text": " "}\n', (), "{path} line 1: the field `text` is empty"),
        (
            "in.jsonl",
            '{"text": "doc 1 \\ud800"}\n',
            (),
            "{path} line 1: the field `text` holds half of a character (a lone surrogate, "
            "\\ud800), not text",
        ),
        (
            "in.csv",
            "id,text\n1,doc 1\n2,\"doc 2 12'' screen\n3,doc 3\n4,doc 4\n",
            (),
            "{path} row 2 (line 3): unexpected end of data (reading stopped at this row)",
        ),
        (
            "in.csv",
            "id,text\n1,doc 1\n2,doc 12, and the rest\n",
            (),
            "{path} row 2 (line 3): 1 more field than the header's 2 columns (a comma in a "
            "field that is not quoted?)",
        ),
        (
            "in.csv",
            "id,text,text\n1,doc 1,doc 2\n",
            (),
            "{path} (the header row): the column `text` is named twice",
        ),
    ],
)
def test_a_bad_input_file_is_reported_before_anything_is_sent(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str,
    extra: tuple[str, ...],
    message: str,
) -> None:
    _refused_before_sending(server, row_type, tmp_path, capsys, name, content, extra, message, 1)


def _refused_before_sending(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str,
    extra: tuple[str, ...],
    message: str,
    status: int,
) -> None:
    """A run over the file `name` holding `content` exits with `status`, says `message`
    (`{path}` the file's), and sends nothing."""
    source = tmp_path / name
    source.write_text(content, encoding="utf-8")
    assert run(server, row_type, source, tmp_path / "out.jsonl", *extra) == status
    assert capsys.readouterr().err == f"allama batch run: {message.format(path=source)}\n"
    assert not server.sent


@pytest.mark.parametrize(
    ("name", "content", "extra", "message"),
    [
        (
            "in.csv",
            "Notes; comments\nfine\n",  # commas, one column whose name holds a semicolon
            (),
            "{path}: no column `text` (the columns are `Notes; comments`); name the column "
            "with --field",
        ),
        (
            "in.csv",
            "id;text\n1;doc 1\n",
            (),
            "{path}: the header reads as `id;text`, and the file is separated by semicolons, "
            "not by commas (a spreadsheet's export in many locales); save it as CSV with "
            "commas, or as JSONL",
        ),
        (
            "in.csv",
            "id;Betrag, EUR;text\n1;12,50;doc 1\n",  # a comma in a column's name
            (),
            "{path}: the header reads as `id;Betrag`, ` EUR;text`, and the file is separated "
            "by semicolons, not by commas (a spreadsheet's export in many locales); save it "
            "as CSV with commas, or as JSONL",
        ),
        (
            "in.csv",
            "id\ttext\n1\tdoc 1\n",
            ("--id-field", "id"),
            "{path}: the header reads as `id\\ttext`, and the file is separated by tabs, not by "
            "commas (a spreadsheet's export in many locales); save it as CSV with commas, or "
            "as JSONL",
        ),
        (
            "in.jsonl",
            '\n{"body": "doc 1", "id": 3}\n{"text": "doc 2"}\n',
            (),
            "{path} line 2: no field `text` (its fields: `body`, `id`); "
            "name the document's field with --field",
        ),
        (
            "in.jsonl",
            '{"text": "doc 1"}\n',
            ("--id-field", "ref"),
            "{path} line 1: no field `ref` (its fields: `text`); name the id's field with "
            "--id-field",
        ),
        (
            "in.csv",
            "id,body\n1,doc 1\n",
            (),
            "{path}: no column `text` (the columns are `id`, `body`); name the column with --field",
        ),
        (
            "in.csv",
            "id,text\n1,doc 1\n",
            ("--id-field", "ref"),
            "{path}: no column `ref` (the columns are `id`, `text`); name the column with "
            "--id-field",
        ),
        (  # a name from the data is written with its control characters escaped
            "in.csv",
            "id,X\x1b[2JY\n1,doc 1\n",
            (),
            "{path}: no column `text` (the columns are `id`, `X\\x1b[2JY`); name the column "
            "with --field",
        ),
        (
            "in.jsonl",
            '{"X\\u001b]0;owned\\u0007": "doc 1"}\n',
            (),
            "{path} line 1: no field `text` (its fields: `X\\x1b]0;owned\\x07`); "
            "name the document's field with --field",
        ),
        (  # no kind of input the command reads: the argument is wrong
            "in.txt",
            "doc 1",
            (),
            "{path}: not a folder, a .jsonl or a .csv file; give a folder of text files, "
            "a JSONL file (one object per line) or a CSV file with a header row",
        ),
    ],
)
def test_a_field_the_source_does_not_have_is_a_bad_argument(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str,
    extra: tuple[str, ...],
    message: str,
) -> None:
    """Named by --field or --id-field (or the defaults) and not in the first document or
    the header, or an INPUT of no kind the command reads (a CSV file separated by
    semicolons or tabs): the argument is wrong (exit status 2), where a later line that
    lacks it is the data's fault (1)."""
    _refused_before_sending(server, row_type, tmp_path, capsys, name, content, extra, message, 2)


def test_ids_that_are_no_text_or_number_are_named_by_their_line_and_said(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    lines = [
        {"id": True, "text": "doc 1"},
        {"id": "B", "text": "doc 2"},
        {"id": None, "text": "doc 3"},
        {"id": [4], "text": "doc 4"},
        {"id": {"n": 5}, "text": "doc 5"},
        {"id": 1e400, "text": "doc 6"},
        {"id": "", "text": "doc 8"},
    ]
    source.write_text(
        "".join(json.dumps(line) + "\n" for line in lines).replace("Infinity", "1e400")
    )
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, source, out) == 0
    err = capsys.readouterr().err
    # A null or empty id is no id; `true`, an array, an object and 1e400 are ids of no use.
    assert (
        "note: 4 documents have an `id` that is no text or number (line 1, line 4, line 5, "
        "...), named by their line instead (with --id-field id, such an id is an error)\n"
    ) in err
    assert sorted(row["label"] for row in rows_of(out)) == [
        "B",
        "line 1",
        "line 3",
        "line 4",
        "line 5",
        "line 6",
        "line 7",
    ]


def test_hidden_files_and_what_is_not_a_file_are_not_documents(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2])
    (docs / "._doc-01.txt").write_bytes(b"\x00\x05\x16\x07\xff")  # a resource fork
    (docs / ".#doc-02.txt").symlink_to("user@host.1234:1700000000")  # an editor's lock
    (docs / "more.txt").mkdir()
    (docs / "doc-03.txt").write_bytes(b"\xef\xbb\xbfdoc 3\n")  # with a byte-order mark
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    assert "3 documents from" in capsys.readouterr().err
    assert sorted(row["label"] for row in rows_of(out)) == [
        "doc-01.txt",
        "doc-02.txt",
        "doc-03.txt",
    ]


def test_a_folder_without_documents_and_a_file_that_is_not_text(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(server, row_type, empty, tmp_path / "out.jsonl") == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {empty}: no *.txt or *.md files in this folder\n"
    )
    docs = folder(tmp_path, [1])
    (docs / "empty.txt").write_text("\n")
    assert run(server, row_type, docs, tmp_path / "out.jsonl") == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {docs / 'empty.txt'}: the file is empty\n"
    )
    (docs / "empty.txt").unlink()
    (docs / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    assert run(server, row_type, docs, tmp_path / "out.jsonl") == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {docs / 'latin1.txt'} line 1: not UTF-8 text (byte 3 of the file "
        "cannot be decoded)\n"
    )
    # Counted in the file, after a byte-order mark, on its line.
    (docs / "latin1.txt").write_bytes(b"\xef\xbb\xbfab\ncd\xe9")
    assert run(server, row_type, docs, tmp_path / "out.jsonl") == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {docs / 'latin1.txt'} line 2: not UTF-8 text (byte 8 of the file "
        "cannot be decoded)\n"
    )
    # Every file to mend said at once, not one a run.
    (docs / "blank.txt").write_text(" \n\t\n")
    (docs / "empty.txt").write_bytes(b"")
    assert run(server, row_type, docs, tmp_path / "out.jsonl") == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {docs / 'blank.txt'}: the file is empty; empty.txt: the file is "
        "empty; latin1.txt line 2: not UTF-8 text (byte 8 of the file cannot be decoded) (3 to "
        "mend in all)\n"
    )


@pytest.mark.parametrize(
    ("name", "content", "line", "byte"),
    [
        ("in.jsonl", b'{"text": "doc 1"}\n{"text": "caf\xe9"}\n', 2, 31),
        ("in.csv", b"id,text\n1,doc 1\n2,caf\xe9\n", 3, 21),
        ("in.csv", b"\xef\xbb\xbfid,text\n1,caf\xe9\n", 2, 16),  # after a byte-order mark
        ("in.csv", b"id,t\xe9xt\n1,doc 1\n", 1, 4),
    ],
)
def test_a_file_that_is_not_utf8_is_reported_at_its_line(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: bytes,
    line: int,
    byte: int,
) -> None:
    """Not the line the reader had reached: it decodes ahead, a chunk at a time."""
    source = tmp_path / name
    source.write_bytes(content)
    assert content[byte] == 0xE9
    assert run(server, row_type, source, tmp_path / "out.jsonl") == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {source} line {line}: not UTF-8 text (byte {byte} of the file "
        "cannot be decoded)\n"
    )
    assert not server.sent


def test_one_id_given_three_times_is_said_as_one_label() -> None:
    from allama.batch._inputs import read_inputs

    with tempfile.TemporaryDirectory() as place:
        source = Path(place) / "in.csv"
        source.write_text("id,text\na,doc 1\na,doc 2\na,doc 3\n")
        assert read_inputs(source).labels_repeated == (2, 1, ("a",))
        source.write_text("id,text\n" + "".join(f"{n % 4},doc {n}\n" for n in range(12)))
        assert read_inputs(source).labels_repeated == (8, 4, ("0", "1", "2"))


def test_a_folder_is_read_as_it_was_checked(tmp_path: Path) -> None:
    """A file added after the check (one that sorts first) is for the next run: it pushes
    no document the run counted out."""
    from allama.batch._inputs import read_inputs

    docs = folder(tmp_path, [2, 3, 4])
    inputs = read_inputs(docs)
    (docs / "doc-01.txt").write_text("doc 1")
    assert [(document.label, str(document)) for document in inputs] == [
        ("doc-02.txt", "doc 2\n"),
        ("doc-03.txt", "doc 3\n"),
        ("doc-04.txt", "doc 4\n"),
    ]
    # One gone as it is read is said; back when it is read again (a run again), it is not.
    (docs / "doc-03.txt").rename(tmp_path / "away.txt")
    assert [document.label for document in inputs] == ["doc-02.txt", "doc-04.txt"]
    assert inputs.removed == ["doc-03.txt"]
    (tmp_path / "away.txt").rename(docs / "doc-03.txt")
    assert len(list(inputs)) == 3 and inputs.removed == []


def test_a_file_written_over_during_the_run_is_said_to_be(tmp_path: Path) -> None:
    from allama.batch._inputs import InputError, read_inputs

    source = tmp_path / "in.jsonl"
    source.write_text("".join(f'{{"text": "doc {n}"}}\n' for n in range(3)))
    # Appended to (a log still written): the documents counted, and no more.
    inputs = read_inputs(source)
    with source.open("a") as log:
        log.write('{"text": "doc 3"}\n')
    assert [str(document) for document in inputs] == ["doc 0", "doc 1", "doc 2"]
    # Cut short, or another file in its place (valid, and longer): not the documents
    # counted, said so before any is read.
    for change in ("cut", "rewritten", "replaced"):
        inputs = read_inputs(source)
        if change == "cut":
            source.write_text('{"text": "doc 0"}\n')
        elif change == "rewritten":  # in place, to the same size, a moment later
            before = source.stat()
            source.write_text(source.read_text().replace("doc", "DOC"))
            os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
        else:
            replacement = tmp_path / "new.jsonl"
            replacement.write_text("".join(f'{{"text": "new {n}"}}\n' for n in range(9)))
            replacement.replace(source)
        with pytest.raises(InputError) as raised:
            next(iter(inputs))
        assert str(raised.value) == (
            f"{source}: the file was written over during the run: run again on the new one"
        )
    # Replaced once it is open (`mv new.jsonl in.jsonl`, an editor's save): the one opened
    # is read to its end, the documents checked, and the change said when it ends.
    source.write_text("".join(f'{{"text": "doc {n}"}}\n' for n in range(3)))
    inputs = read_inputs(source)
    documents = iter(inputs)
    assert str(next(documents)) == "doc 0"
    replacement = tmp_path / "new.jsonl"
    replacement.write_text("".join(f'{{"text": "new {n}"}}\n' for n in range(9)))
    replacement.replace(source)
    assert [str(document) for document in documents] == ["doc 1", "doc 2"]
    assert inputs.changed == ["the file was written over during the run: run again on the new one"]
    with pytest.raises(InputError):  # read again, it is no longer the file checked
        next(iter(inputs))
    assert inputs.changed == []
    # Cut short as it is read (past what the reader holds): fewer documents than counted.
    source.write_text("".join(f'{{"text": "doc {n:04d} {"x" * 80}"}}\n' for n in range(3000)))
    inputs = read_inputs(source)
    documents = iter(inputs)
    assert next(documents).startswith("doc 0000")
    source.write_text('{"text": "doc 0"}\n{"text": "doc 1"}\n')
    with pytest.raises(InputError) as raised:
        list(documents)
    # (Where the reader's last chunk ends in a line cut in two, that line is no JSON.)
    assert str(raised.value).startswith(f"{source}")
    assert str(raised.value).endswith(
        " (the file was written over during the run: run again on the new one)"
    )


@pytest.mark.parametrize("stopped", [False, True])
def test_a_folders_file_removed_during_the_run_is_said_counted_once_and_the_others_sent(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stopped: bool,
) -> None:
    from allama.batch import _inputs

    docs = folder(tmp_path, [1, 2, 3, 4])
    checked = _inputs.read_inputs

    def removed_after_the_check(*args: Any, **kwargs: Any) -> Any:
        inputs = checked(*args, **kwargs)
        (docs / "doc-02.txt").unlink()
        (docs / "doc-03.txt").unlink()
        (docs / "doc-03.txt").mkdir()  # no file now: as a removed one
        return inputs

    monkeypatch.setattr(_inputs, "read_inputs", removed_after_the_check)
    out = tmp_path / "out.jsonl"
    # Stopped by a budget of one input's worth, the run reads on (what earlier runs
    # finished is given) and finds them removed too.
    options = ("--concurrency", "1", "--max-cost", "0.00002") if stopped else ()
    assert run(server, row_type, docs, out, *options) == (3 if stopped else 0)
    err = capsys.readouterr().err
    assert "removed from the folder during the run, not sent: `doc-02.txt`, `doc-03.txt`\n" in err
    assert "not finished" not in err
    summary = "1 done, 0 failed, 1 not started, in " if stopped else "2 done, 0 failed, in "
    assert re.search(rf"^{summary}", err, re.MULTILINE), err
    sent = ["doc-01.txt"] if stopped else ["doc-01.txt", "doc-04.txt"]
    assert sorted(row["label"] for row in rows_of(out)) == sent


def test_every_line_or_row_to_mend_is_said_at_once(tmp_path: Path) -> None:
    """A file with many bad lines is mended in one go: the first few are said, and how
    many there are, not one a run."""
    from allama.batch._inputs import InputError, read_inputs

    source = tmp_path / "in.jsonl"
    lines = ['{"text": "doc 1"}', "not JSON", '{"text": ""}', "[1]", '{"text": "doc 5"}']
    source.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as raised:
        read_inputs(source)
    assert str(raised.value) == (
        f"{source} line 2: not JSON (Expecting value at column 1); line 3: the field `text` "
        "is empty; line 4: a JSON array, not an object (3 to mend in all)"
    )
    table = tmp_path / "in.csv"
    table.write_text("id,text\n" + "".join(f"{n},doc {n},extra\n" for n in range(8)))
    with pytest.raises(InputError) as raised:
        read_inputs(table)
    extra = "1 more field than the header's 2 columns (a comma in a field that is not quoted?)"
    assert str(raised.value) == (
        f"{table} row 1 (line 2): {extra}; "
        + "; ".join(f"row {n} (line {n + 1}): {extra}" for n in range(2, 6))
        + "; and 3 more (8 to mend in all)"
    )


def test_blank_lines_before_a_csv_header_are_skipped(tmp_path: Path) -> None:
    from allama.batch._inputs import read_inputs

    source = tmp_path / "in.csv"
    source.write_text("\n\r\nid,text\n\n1,doc 1\n")
    assert [(d.label, str(d)) for d in read_inputs(source)] == [("1", "doc 1")]


def test_a_utf16_file_is_said_to_be_one(tmp_path: Path) -> None:
    from allama.batch._inputs import InputError, read_inputs

    source = tmp_path / "in.csv"
    for encoding, said in (("utf-16", "UTF-16"), ("utf-32", "UTF-32")):
        source.write_bytes("id,text\n1,café\n".encode(encoding))
        with pytest.raises(InputError) as raised:
            read_inputs(source)
        assert str(raised.value) == (
            f"{source}: {said} text (it begins with {said}'s byte order mark), not UTF-8: "
            "save it as UTF-8"
        )


@generated(
    before=st.lists(st.sampled_from(["a", "\n", "é", "€", "😀", "\r\n"]), max_size=60),
    bad=st.sampled_from([b"\xe9", b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xe2\x82"]),
    after=st.binary(max_size=8),
    bom=st.booleans(),
    chunk=st.integers(min_value=1, max_value=9),
)
@settings(max_examples=300, deadline=None)
def test_where_a_file_stops_being_utf8_is_found_a_chunk_at_a_time(
    before: list[str], bad: bytes, after: bytes, bom: bool, chunk: int
) -> None:
    """The line and the byte of the first that cannot be decoded, as decoding the whole file
    finds them, read in chunks that may cut a character in two."""
    from allama.batch._inputs import _undecodable

    data = (codecs.BOM_UTF8 if bom else b"") + "".join(before).encode() + bad + after
    assume(not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)))  # (said UTF-16)
    skip = len(codecs.BOM_UTF8) if bom else 0
    try:
        data[skip:].decode("utf-8")
        assume(False)  # (what came after the bad bytes made them a character)
    except UnicodeDecodeError as error:
        at = skip + error.start
        line = data.count(b"\n", 0, at) + 1
        expected = f"line {line}: not UTF-8 text (byte {at} of the file cannot be"
    with tempfile.TemporaryDirectory() as place:
        path = Path(place) / "in.jsonl"
        path.write_bytes(data)
        assert str(_undecodable(path, chunk)) == f"{path} {expected} decoded)"


def test_bad_arguments(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    out = str(tmp_path / "out.jsonl")
    assert main(["batch", "run", str(docs), "--type", row_type, "--provider", "openai"]) == 2
    assert "the following arguments are required: --out" in capsys.readouterr().err
    base = ["batch", "run", str(docs), "--type", row_type, "--out", out]
    assert main([*base, "--provider", "openai"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --model is required with --provider openai\n"
    )
    assert main([*base, "--provider", "nope", "--model", "m"]) == 2
    assert "allama batch run: unknown provider 'nope'" in capsys.readouterr().err
    # A name no preset has is said before a missing --model.
    assert main([*base, "--provider", "opneai"]) == 2
    assert "allama batch run: unknown provider 'opneai'; known presets: openai," in (
        capsys.readouterr().err
    )
    # The local engine runs a model file: another name would be the default model under it.
    assert main([*base, "--provider", "local", "--model", "/nope.gguf"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --model with --provider local is a .gguf model file, or `smollm2` "
        "(the default): no such file `/nope.gguf`\n"
    )
    missing = tmp_path / "missing"
    assert main(["batch", "run", str(missing), "--type", row_type, "--out", out]) == 2
    assert capsys.readouterr().err == (f"allama batch run: no such file or folder: `{missing}`\n")
    assert main([*base, "--max-cost", "0"]) == 2
    assert "argument --max-cost: must be more than 0, not 0" in capsys.readouterr().err
    for endless in ("inf", "Infinity", "$-inf", "nan"):
        assert main([*base, "--max-cost", endless]) == 2
        assert (
            f"argument --max-cost: must be a finite amount of dollars, not {endless}"
            in capsys.readouterr().err
        )
    assert main([*base[:4], "missing.py:Row", "--out", out]) == 2
    assert capsys.readouterr().err == "allama batch run: no such file: `missing.py`\n"
    assert main([*base, "--provider", "openai", "--model", "m", "--job-size", "5"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --job-size is for runs with --provider-batch\n"
    )
    assert main([*base, "--job-size", "5", "--poll-interval", "1"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --poll-interval and --job-size are for runs with --provider-batch\n"
    )
    assert not server.sent


def test_a_provider_without_its_base_url_is_a_bad_argument_with_nothing_recorded(
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    docs = folder(tmp_path, [1, 2])
    out = tmp_path / "out.jsonl"
    command = ["batch", "run", str(docs), "--type", row_type, "--out", str(out)]
    assert main([*command, "--provider", "openai-compatible", "--model", "m"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: openai-compatible has no base URL: pass base_url= "
        "(here: --base-url URL)\n"
    )
    assert not out.exists() and not Path(f"{out}.ledger.sqlite").exists()


def test_a_presets_refusal_of_its_base_url_advises_in_the_commands_options(
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The refusal names another preset to build at the address: said as the command's
    # --provider and --base-url, not as allama.provider(...), which the command has not.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://api.deepseek.com/anthropic")
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    docs = folder(tmp_path, [1])
    out = tmp_path / "out.jsonl"
    command = ["batch", "run", str(docs), "--type", row_type, "--out", str(out), "--model", "m"]
    assert main([*command, "--provider", "anthropic"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: the base URL (from ANTHROPIC_BASE_URL) is on api.deepseek.com, "
        "DeepSeek's host, which serves DeepSeek's own models in Anthropic's dialect, not "
        "Claude: use --provider anthropic-compatible --base-url URL\n"
    )
    ollama = ["--provider", "ollama", "--base-url", "http://localhost:11434/v1"]
    assert main([*command, *ollama]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: a base URL ending in /v1 is Ollama's OpenAI-compatible endpoint: "
        "use --provider ollama-openai --base-url URL, or leave /v1 out\n"
    )
    # A base URL no call can reach is named as the option it came from, as `status` names it.
    unreachable = ["--provider", "openai", "--base-url", "http://127.0.0.1:99999/v1"]
    assert main([*command, *unreachable]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --base-url has port 99999, outside 1-65535\n"
    )
    azure = ["--provider", "azure-openai", "--base-url", "https://x.services.ai.azure.com/models"]
    assert main([*command, *azure]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: an endpoint ending in /models is Azure AI Foundry's model-inference "
        "API, which serves models of many families: use --provider azure-foundry --base-url URL\n"
    )
    assert not out.exists() and not Path(f"{out}.ledger.sqlite").exists()


def test_a_provider_without_its_key_is_a_bad_argument_with_nothing_recorded(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    docs = folder(tmp_path, [1, 2])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 2
    assert capsys.readouterr().err == (
        "allama batch run: openai needs an API key: set OPENAI_API_KEY\n"
    )
    assert not out.exists() and not Path(f"{out}.ledger.sqlite").exists() and not server.sent


def test_a_float_that_is_no_number_is_written_as_the_types_json_writes_it(
    server: BatchServer, tmp_path: Path
) -> None:
    module = tmp_path / "reading.py"
    module.write_text(
        "from typing import Annotated\n"
        "from pydantic import BaseModel, BeforeValidator\n\n"
        "def unread(v):\n"
        "    return {1: float('nan'), 2: float('-inf')}.get(v, v)\n\n"
        "class Row(BaseModel):\n"
        "    n: Annotated[float, BeforeValidator(unread)]\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert run(server, f"{module}:Row", folder(tmp_path, [1, 2, 4]), out) == 0
    lines = out.read_text(encoding="utf-8").splitlines()

    def strict(line: str) -> Any:
        def refuse(constant: str) -> Any:
            raise ValueError(f"{constant} is no JSON")

        return json.loads(line, parse_constant=refuse)

    values = {row["label"]: row["value"] for row in map(strict, lines)}
    assert values == {"doc-01.txt": {"n": None}, "doc-02.txt": {"n": None}, "doc-04.txt": {"n": 4}}
    exported = io.StringIO()
    with contextlib.redirect_stdout(exported):
        assert main(["batch", "export", f"{out}.ledger.sqlite"]) == 0
    assert [row["value"] for row in map(strict, exported.getvalue().splitlines())] == [
        values[label] for label in sorted(values)
    ]


def test_paths_that_would_write_over_the_input_or_each_other_are_refused(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "doc 1"}\n')
    out = tmp_path / "out.jsonl"
    cases = [
        ((str(source),), f"--out `{source}` is the input: the run would write over it"),
        ((str(out), "--ledger", str(source)), f"--ledger `{source}` is the input"),
        ((str(out), "--ledger", str(out)), f"--out and --ledger are the same file, `{out}`"),
        (("-",), "--out names the JSONL file the run writes (`allama batch export LEDGER"),
    ]
    for (where, *extra), message in cases:
        assert run(server, row_type, source, Path(where), *extra) == 2
        assert message in capsys.readouterr().err
    assert source.read_text() == '{"text": "doc 1"}\n' and not server.sent
    ledger = tmp_path / "done.sqlite"
    assert run(server, row_type, source, out, "--ledger", str(ledger)) == 0
    assert main(["batch", "export", str(ledger), "--out", str(ledger)]) == 2
    assert "is the ledger: the export would write over it" in capsys.readouterr().err
    # Written as a folder's (`results/`): no file of that name is written, nor one beside.
    for flag in ("--out", "--ledger"):
        named = f"{tmp_path / 'results'}/"
        assert run(server, row_type, source, out, flag, named) == 2  # (the last --out counts)
        assert f"{flag} `{named}` names a folder (it ends with a slash)" in capsys.readouterr().err
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    for named, ending in ((f"{notes}/", "a slash"), (f"{notes}/.", "`.`")):
        assert main(["batch", "export", str(ledger), "--out", named]) == 2
        assert f"names a folder (it ends with {ending}); name the file to write" in (
            capsys.readouterr().err
        )
    assert notes.read_text() == "mine" and not (tmp_path / "results").exists()
    # A folder that is not there, before `..`: refused as the run refuses it, not written
    # beside the folder it leads out of.
    for named in (f"{tmp_path / 'nosuch'}/../e.jsonl", f"{tmp_path / 'nosuch'}/e.jsonl"):
        assert main(["batch", "export", str(ledger), "--out", named]) == 2
        assert f"no such folder for --out: `{Path(named).parent}`" in capsys.readouterr().err
        assert run(server, row_type, source, Path(named), "--ledger", str(ledger)) == 2
        assert f"no such folder for --out: `{Path(named).parent}`" in capsys.readouterr().err
    assert not (tmp_path / "e.jsonl").exists()
    # Under another name (a hard link): the same file, refused as such.
    linked = tmp_path / "linked.jsonl"
    os.link(ledger, linked)
    kept = ledger.read_bytes()
    assert main(["batch", "export", str(ledger), "--out", str(linked)]) == 2
    assert f"--out `{linked}` is the ledger" in capsys.readouterr().err
    assert run(server, row_type, source, linked, "--ledger", str(ledger)) == 2
    assert "--out and --ledger are the same file" in capsys.readouterr().err
    assert ledger.read_bytes() == kept


def test_an_output_that_would_write_over_the_prompt_or_the_types_module_is_refused(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Read the number.")
    module = Path(row_type.rpartition(":")[0])
    kept = module.read_text()
    assert run(server, row_type, docs, prompt, "--prompt", str(prompt)) == 2
    assert capsys.readouterr().err == (
        f"allama batch run: --out `{prompt}` is the --prompt file: the run would write over it\n"
    )
    assert run(server, row_type, docs, tmp_path / "o.jsonl", "--ledger", str(module)) == 2
    assert capsys.readouterr().err == (
        f"allama batch run: --ledger `{module}` is the --type's module: the run would write "
        "over it\n"
    )
    assert prompt.read_text() == "Read the number." and module.read_text() == kept
    assert not server.sent


def test_a_temperature_that_is_no_number_a_provider_reads_is_refused(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    for given in ("nan", "inf", "1e999"):
        assert run(server, row_type, docs, tmp_path / "o.jsonl", "--temperature", given) == 2
        err = capsys.readouterr().err
        assert f"argument --temperature: must be a finite number, not {given}" in err
    assert not server.sent


def test_a_prompt_files_byte_order_mark_is_not_sent(
    server: BatchServer, row_type: str, tmp_path: Path
) -> None:
    docs = folder(tmp_path, [1, 2])
    ledger = ("--ledger", str(tmp_path / "run.sqlite"))
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_text("Read the number.", encoding="utf-8")
    marked.write_text("Read the number.", encoding="utf-8-sig")
    assert marked.read_bytes().startswith(b"\xef\xbb\xbf")
    assert run(server, row_type, docs, tmp_path / "a.jsonl", "--prompt", str(plain), *ledger) == 0
    sent = sum(server.sent.values())
    # The same prompt: the same keys, so nothing is sent again.
    assert run(server, row_type, docs, tmp_path / "b.jsonl", "--prompt", str(marked), *ledger) == 0
    assert sum(server.sent.values()) == sent == 2


def test_a_file_that_is_not_a_ledger_is_refused_before_the_output_is_touched(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    out = tmp_path / "keep.jsonl"
    out.write_text('{"precious": 1}\n')
    junk = tmp_path / "notes.sqlite"
    junk.write_text("not a database")
    assert run(server, row_type, docs, out, "--ledger", str(junk)) == 2
    assert f"`{junk}` is not a ledger" in capsys.readouterr().err
    assert run(server, row_type, docs, out, "--ledger", str(tmp_path)) == 2
    assert f"--ledger names a folder: `{tmp_path}`" in capsys.readouterr().err
    assert out.read_text() == '{"precious": 1}\n' and not server.sent


def test_a_ledger_in_no_folder_is_said_so_through_a_link_too(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, out = folder(tmp_path, [1]), tmp_path / "out.jsonl"
    gone = tmp_path / "gone" / "run.sqlite"
    assert run(server, row_type, docs, out, "--ledger", str(gone)) == 2
    assert capsys.readouterr().err.endswith(f"no such folder for --ledger: `{gone.parent}`\n")
    link = tmp_path / "link.sqlite"
    link.symlink_to(gone)
    assert run(server, row_type, docs, out, "--ledger", str(link)) == 2
    assert capsys.readouterr().err.endswith(
        f"no such folder for --ledger: `{gone.parent}` (where `{link}` leads)\n"
    )
    assert not server.sent


def test_an_output_it_replaces_keeps_its_mode_and_a_read_only_one_is_refused(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs, out = folder(tmp_path, [1]), tmp_path / "out.jsonl"
    out.write_text("")
    out.chmod(0o600)  # private, and still so when it is written anew
    assert run(server, row_type, docs, out) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and len(rows_of(out)) == 1
    capsys.readouterr()
    access = os.access
    # As its owner sees a read-only file (the tests run as any user, root included).
    monkeypatch.setattr(
        os, "access", lambda p, m: m != os.W_OK and access(p, m) if Path(p) == out else access(p, m)
    )
    assert run(server, row_type, docs, out) == 1
    assert capsys.readouterr().err == (
        f"allama batch run: cannot write --out: `{out}` is read-only (the run would replace it)\n"
    )


@pytest.mark.parametrize("stdout_full", [False, True])
def test_values_neither_the_output_nor_the_ledger_can_hold_go_to_stdout_or_are_said_lost(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    stdout_full: bool,
) -> None:
    from allama.batch import _ledger
    from allama.cli import _batch

    def full_disk(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    def ledger_full(self: Any, key: str, **outcome: Any) -> bool:
        raise sqlite3.OperationalError("database or disk is full")

    class FullStdout(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(_batch, "_write_row", full_disk)
    monkeypatch.setattr(_ledger.Ledger, "_finish", ledger_full)
    docs, out = folder(tmp_path, [1, 2, 4, 5]), tmp_path / "out.jsonl"
    ledger = tmp_path / "run.sqlite"
    options = ("--ledger", str(ledger), "--concurrency", "2")
    with contextlib.redirect_stdout(FullStdout()) if stdout_full else contextlib.nullcontext():
        assert run(server, row_type, docs, out, *options) == 1
    captured = capsys.readouterr()
    count = len(server.sent)
    these = f"allama batch run: {count} value{'' if count == 1 else 's'} the ledger could not be "
    if stdout_full:
        assert (
            f"{these}written with either, nor stdout (No space left on device): lost, and a "
            "run again sends their inputs again\n"
        ) in captured.err
    else:
        # Every value the server answered is on stdout: nothing else could hold it.
        rows = [json.loads(line) for line in captured.out.splitlines()]
        assert sorted(row["value"]["n"] for row in rows) == sorted(server.sent)
        assert f"{these}written with either: on stdout, one JSONL row each\n" in captured.err
    assert f"LedgerError: the ledger `{ledger}` could not be written" in captured.err
    assert "values are in the ledger" not in captured.err  # it holds none of this run's


def test_a_device_or_a_fifo_is_no_ledger_for_a_run_status_or_export(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    docs = folder(tmp_path, [1])
    for path in (Path(os.devnull), fifo):
        said = f"`{path}` is not a file (a device, a FIFO)"
        assert run(server, row_type, docs, tmp_path / "out.jsonl", "--ledger", str(path)) == 2
        assert said + ": name the ledger's file" in capsys.readouterr().err
        assert main(["batch", "status", str(path)]) == 2
        assert capsys.readouterr().err == f"allama batch status: {said}, not a ledger\n"
    assert not server.sent and not Path(os.devnull + "-journal").exists()


def test_an_output_that_cannot_be_written_stops_the_run_and_loses_no_value(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from allama.cli import _batch

    rows = _batch._write_row
    written = itertools.count()

    def full_disk(output: Any, line: str) -> None:
        if next(written) >= 2:
            raise OSError(28, "No space left on device")
        rows(output, line)

    monkeypatch.setattr(_batch, "_write_row", full_disk)
    docs = folder(tmp_path, [1, 2, 4, 5, 6, 8, 9])  # each answered at the first try
    out, ledger = tmp_path / "out.jsonl", tmp_path / "run.sqlite"
    earlier = '{"label": "doc-00.txt", "key": "' + "0" * 64 + '", "value": {"n": 0}}\n'
    out.write_text(earlier)  # an earlier run's output
    assert run(server, row_type, docs, out, "--ledger", str(ledger), "--concurrency", "2") == 1
    err = capsys.readouterr().err
    assert "stopped starting new inputs: cannot write the output: No space left on device" in err
    assert err.endswith(
        f"allama batch run: cannot write `{out}`: No space left on device\n"
        f"allama batch run: its values are in the ledger: `allama batch export {ledger}`\n"
    )
    assert out.read_text() == earlier  # as it was, and no part left beside it
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    monkeypatch.setattr(_batch, "_write_row", rows)
    assert main(["batch", "export", str(ledger), "--out", str(tmp_path / "all.jsonl")]) == 0
    # The value whose write failed, and any in flight then, are in the ledger.
    exported = sorted(row["label"] for row in rows_of(tmp_path / "all.jsonl"))
    assert exported == [f"doc-{n:02d}.txt" for n in sorted(server.sent)]
    assert len(exported) >= 3


def test_new_documents_on_a_ledger_of_the_same_settings_are_said_as_such(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "run.sqlite"
    assert run(server, row_type, folder(tmp_path, [1, 2, 3]), tmp_path / "a.jsonl",
               "--ledger", str(ledger)) == 0  # fmt: skip
    capsys.readouterr()
    later = tmp_path / "later"
    later.mkdir()
    for n in (4, 5):
        (later / f"doc-{n:02d}.txt").write_text(f"doc {n}\n", encoding="utf-8")
    assert run(server, row_type, later, tmp_path / "b.jsonl", "--ledger", str(ledger)) == 0
    assert "ledger: none of these 2 documents is in it; it holds 3 others\n" in (
        capsys.readouterr().err
    )


def test_a_ledger_that_fails_during_the_run_is_named_and_promises_nothing(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from allama.batch import _ledger

    def malformed(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(_ledger.Ledger, "_claim", malformed)
    ledger = tmp_path / "run.sqlite"
    docs = folder(tmp_path, [1, 2, 4])
    assert run(server, row_type, docs, tmp_path / "out.jsonl", "--ledger", str(ledger)) == 1
    err = capsys.readouterr().err
    # Each input whose claim failed is not started, and nothing promises a resume.
    assert re.search(r"^0 done, 0 failed, 3 not started, in ", err, re.MULTILINE)
    assert "not finished" not in err and "pending: the same command" not in err
    assert (
        f"allama batch run: the run stopped: LedgerError: the ledger `{ledger}` could not be "
        "written: database disk image is malformed\n"
    ) in err
    assert not server.sent


def _three_done(path: Path) -> Path:
    """A ledger at `path` with three inputs done, `k0` to `k2`."""
    ledger = Ledger(path, settings={})
    for n in range(3):
        ledger.claim(f"k{n}", n, f"#{n}")
        ledger.finish(f"k{n}", status="done", seconds=0.1, value=f'{{"n": {n}}}')
    ledger.close()
    return path


def test_a_damaged_ledger_is_one_line_of_status_and_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _three_done(tmp_path / "run.sqlite")
    with sqlite3.connect(path) as db:
        (page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'items'").fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
    damaged = bytearray(path.read_bytes())
    damaged[(page - 1) * size : (page - 1) * size + 8] = b"\xff" * 8  # its table's first page
    path.write_bytes(bytes(damaged))
    said = f"`{path}` cannot be read as a ledger: database disk image is malformed\n"
    for command in (["status"], ["export"], ["export", "--failed"]):
        assert main(["batch", *command, str(path)]) == 1
        err = capsys.readouterr().err
        assert err == f"allama batch {command[0]}: {said}"


@pytest.mark.parametrize(
    ("update", "said"),
    [
        (
            "UPDATE items SET record = '{bad' WHERE key = 'k1'",
            "the `record` of the input keyed `k1`",
        ),
        (
            "UPDATE items SET record = '[1]' WHERE key = 'k1'",
            "the `record` of the input keyed `k1`",
        ),
        ("UPDATE items SET error = '7' WHERE key = 'k1'", "the `error` of the input keyed `k1`"),
        ("UPDATE runs SET settings = '[1, 2]'", "the `settings` of the input keyed `run "),
    ],
)
def test_a_ledger_with_a_damaged_column_is_one_line_of_status_and_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], update: str, said: str
) -> None:
    path = _three_done(tmp_path / "run.sqlite")
    with sqlite3.connect(path) as db:
        db.execute(update)
    for command in (["status", "--no-poll"], ["export"]):
        assert main(["batch", *command, str(path)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"allama batch {command[0]}: `{path}` cannot be read as a ledger: ")
        assert said in err and err.endswith("is not what a ledger writes there (a damaged file?)\n")
        assert "Traceback" not in err


def test_an_output_that_would_write_over_the_ledgers_own_files_is_refused(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    out = tmp_path / "out.jsonl"
    ledger = tmp_path / "out.jsonl.ledger.sqlite"
    for suffix, what in (("-wal", "write-ahead log"), ("-shm", "shared memory file")):
        beside = tmp_path / f"{ledger.name}{suffix}"
        assert run(server, row_type, docs, beside, "--ledger", str(ledger)) == 2
        assert capsys.readouterr().err.endswith(
            f"--out `{beside}` is the ledger's {what} (`{ledger.name}{suffix}`): the run "
            "would write over it\n"
        )
    assert not server.sent
    assert run(server, row_type, docs, out) == 0
    capsys.readouterr()
    for suffix, what in (("-wal", "write-ahead log"), ("-journal", "rollback journal")):
        beside = tmp_path / f"{ledger.name}{suffix}"
        assert main(["batch", "export", str(ledger), "--out", str(beside)]) == 2
        assert capsys.readouterr().err.endswith(
            f"--out `{beside}` is the ledger's {what} (`{ledger.name}{suffix}`): the export "
            "would write over it\n"
        )
    assert main(["batch", "status", str(ledger)]) == 0


def test_an_output_that_would_write_over_another_runs_ledger_is_refused(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `results.jsonl.ledger.sqlite` is one tab away from `results.jsonl`: a second run or an
    # export whose --out names the first run's ledger, or a file beside it, would replace
    # what it paid for with lines of JSON.
    docs = folder(tmp_path, [1, 2])
    first = tmp_path / "results.jsonl"
    assert run(server, row_type, docs, first) == 0
    capsys.readouterr()
    ledger = tmp_path / "results.jsonl.ledger.sqlite"
    kept = ledger.read_bytes()
    sent = sum(server.sent.values())
    assert run(server, row_type, docs, ledger) == 2
    assert capsys.readouterr().err.endswith(
        f"--out `{ledger}` is a SQLite database (a ledger?): the run would write over it\n"
    )
    wal = tmp_path / "results.jsonl.ledger.sqlite-wal"
    wal.write_bytes(b"")
    assert run(server, row_type, docs, wal) == 2
    assert capsys.readouterr().err.endswith(
        f"--out `{wal}` is the write-ahead log of the SQLite database "
        "`results.jsonl.ledger.sqlite`: the run would write over it\n"
    )
    other = tmp_path / "other.jsonl"
    assert run(server, row_type, docs, other) == 0
    capsys.readouterr()
    assert main(["batch", "export", f"{other}.ledger.sqlite", "--out", str(ledger)]) == 2
    assert capsys.readouterr().err.endswith(
        f"--out `{ledger}` is a SQLite database (a ledger?): the export would write over it\n"
    )
    assert ledger.read_bytes() == kept
    assert sum(server.sent.values()) == sent + 2  # the other run's, nothing more
    assert main(["batch", "status", str(ledger)]) == 0


def test_an_export_to_a_pipe_is_written_not_read_first(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Looking for a database at --out reads regular files only: a FIFO (or `/dev/stdout`
    # into a pipe) read first would wait for a writer that is the export itself.
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, folder(tmp_path, [1, 2]), out) == 0
    capsys.readouterr()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    codes: list[int] = []
    ledger = f"{out}.ledger.sqlite"
    export = threading.Thread(
        target=lambda: codes.append(main(["batch", "export", ledger, "--out", str(fifo)])),
        daemon=True,
    )
    export.start()
    export.join(30)
    reader.join(30)
    assert codes == [0]
    assert len(got[0].splitlines()) == 2


def test_a_ledger_another_run_is_making_is_taken_for_one(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    # What a run starting at the same moment leaves while it makes a new ledger: the
    # file, then the database in WAL mode, before its tables.
    empty, begun = tmp_path / "empty.sqlite", tmp_path / "begun.sqlite"
    empty.touch()
    with contextlib.closing(sqlite3.connect(begun)) as db:
        assert db.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    assert begun.stat().st_size
    # `status` in that moment says so, rather than that it is no ledger.
    assert main(["batch", "status", str(begun)]) == 1
    assert capsys.readouterr().err == (
        f"allama batch status: `{begun}` holds no ledger yet: an SQLite file with no tables, "
        "which a run starting may be making; look again in a moment\n"
    )
    for ledger in (empty, begun):
        assert (
            run(server, row_type, docs, tmp_path / f"{ledger.stem}.jsonl", "--ledger", str(ledger))
            == 0
        )
        assert "not a ledger" not in capsys.readouterr().err
        assert len(list(Ledger(ledger, read_only=True).rows())) == 1
    # An SQLite file with tables of its own is another database, and stays refused.
    app = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(app)) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, sku TEXT)")
    assert run(server, row_type, docs, tmp_path / "app.jsonl", "--ledger", str(app)) == 2
    assert f"`{app}` is not a ledger: an SQLite file without its tables" in capsys.readouterr().err


def test_a_second_run_writing_the_same_output_is_refused(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fcntl = pytest.importorskip("fcntl")
    docs = folder(tmp_path, [1])
    out = tmp_path / "out.jsonl"
    with (tmp_path / "out.jsonl.part").open("a") as other:  # a run writing it
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert run(server, row_type, docs, out) == 2
    # Refused first: before the run is made, the ledger read, or a model started.
    assert capsys.readouterr().err == (
        f"allama batch run: another run is writing `{out}` (its `out.jsonl.part` is locked); "
        "give this one another --out (both may share the ledger)\n"
    )
    assert not server.sent and not (tmp_path / "out.jsonl.ledger.sqlite").exists()
    assert run(server, row_type, docs, out) == 0  # once it is done


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        pytest.param(
            "from typing import TypedDict\n\nclass Row(TypedDict):\n    n: int\n",
            "Please use",
            marks=pytest.mark.skipif(
                sys.version_info >= (3, 12), reason="pydantic takes typing.TypedDict from 3.12"
            ),
        ),
        ("class Row:\n    n: int\n", "Unable to generate pydantic-core schema"),
    ],
)
def test_a_type_pydantic_cannot_validate_is_a_bad_argument(
    server: BatchServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: str,
    reason: str,
) -> None:
    module = tmp_path / "odd.py"
    module.write_text(source)
    docs = folder(tmp_path, [1])
    assert run(server, f"{module}:Row", docs, tmp_path / "out.jsonl") == 2
    err = capsys.readouterr().err
    assert f"allama batch run: `{module}:Row` is not a type pydantic can validate: " in err
    assert reason in err and "Traceback" not in err


def test_the_budget_stops_the_run(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2, 4, 5, 6, 8])
    out = tmp_path / "out.jsonl"
    # $0.000021 a call: the third reaches $0.00005, and nothing more is started.
    extra = ("--max-cost", "0.00005", "--concurrency", "1")
    assert run(server, row_type, docs, out, *extra) == 3
    assert [row["label"] for row in rows_of(out)] == ["doc-01.txt", "doc-02.txt", "doc-04.txt"]
    assert sum(server.sent.values()) == 3
    summary = summary_of(capsys.readouterr().err)
    assert summary[1] == "3 done, 0 failed, 3 not started, in T s"
    assert summary[-3] == (
        "stopped starting new inputs: the budget of $0.00005 is reached ($0.000063)"
    )
    reader = Ledger(tmp_path / "out.jsonl.ledger.sqlite")
    assert reader.counts() == {"done": 3}
    reader.close()


def half_finished(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    earlier: list[int] | None = None,
    documents: list[int] | None = None,
) -> tuple[Path, Path]:
    """A ledger in which an earlier run finished the documents `earlier` (doc 5, 6 and 8),
    and a folder of the documents `documents` (doc 1, 2, 4, 5, 6 and 8)."""
    ledger = tmp_path / "shared.sqlite"
    (tmp_path / "later").mkdir()
    later = folder(tmp_path / "later", earlier or [5, 6, 8])
    assert run(server, row_type, later, tmp_path / "later.jsonl", "--ledger", str(ledger)) == 0
    return ledger, folder(tmp_path, documents or [1, 2, 4, 5, 6, 8])


def test_a_run_stopped_by_its_budget_still_gives_what_the_ledger_holds(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, docs = half_finished(server, row_type, tmp_path)
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    extra = ("--max-cost", "0.00012", "--concurrency", "1", "--ledger", str(ledger))
    # The budget is the job's: the earlier run's three paid calls ($0.000063) count from
    # the start, and the budget is reached at the third call of this run, which the
    # values of the other three, finished by the earlier run, join. Nothing was held
    # back, so the budget's stop is no failure of the command.
    assert run(server, row_type, docs, out, *extra) == 0
    assert sorted(row["label"] for row in rows_of(out)) == [
        f"doc-0{n}.txt" for n in (1, 2, 4, 5, 6, 8)
    ]
    assert sum(server.sent.values()) == 6
    err = capsys.readouterr().err
    assert f"output: {out} (6 values)\n" in err
    summary = summary_of(err)
    assert summary[2] == "6 done, 0 failed (3 finished by an earlier run), in T s"
    assert summary[3] == "enforcement: exact 6"
    # What the earlier run paid for them is the job's too, as a run that reads them says.
    assert summary[4:6] == [
        "passes 6, attempts 6, tokens 600 in / 60 out",
        "cost $0.000126 ($0.000063 of it paid by earlier runs)",
    ]


def test_the_opening_line_under_a_spent_budget_says_nothing_is_sent(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, docs = half_finished(server, row_type, tmp_path)  # three paid: $0.000063
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    extra = ("--max-cost", "0.00006", "--ledger", str(ledger))
    assert run(server, row_type, docs, out, *extra) == 3
    assert sum(server.sent.values()) == 3  # the earlier run's alone
    line = summary_of(capsys.readouterr().err)[1]
    assert line == (
        "ledger: 3 of these 6 documents are in it (3 done, 0 failed), none sent: the budget "
        "of $0.00006 is spent ($0.000063 paid by earlier runs)"
    )


def test_a_run_that_stops_still_writes_what_the_ledger_holds(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, docs = half_finished(server, row_type, tmp_path)
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    # A refused key stops the run at its first call, and it reads no further; the values
    # of the three documents an earlier run finished are written from the ledger rather
    # than left out of the output.
    server.refusing = "key"
    extra = ("--concurrency", "1", "--ledger", str(ledger))
    assert run(server, row_type, docs, out, *extra) == 1
    assert sorted(row["label"] for row in rows_of(out)) == [f"doc-0{n}.txt" for n in (5, 6, 8)]
    assert server.refused == 1
    err = capsys.readouterr().err
    assert f"output: {out} (3 values, 3 of them from the ledger for documents not reached)" in err
    summary = summary_of(err)
    assert summary[2] == (
        "3 done, 1 failed (3 finished by an earlier run; 1 kept pending for the next run), "
        "2 not started, in T s"
    )
    assert summary[4:7] == [
        "failures: authentication 1",
        "passes 3, attempts 4, tokens 300 in / 30 out",
        "cost $0.000063 ($0.000063 of it paid by earlier runs)",
    ]


def test_a_run_that_stops_counts_the_failures_an_earlier_run_ended_with(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # doc 7 answers no JSON: a paid failure. 5 and 7 come past what the run reads.
    ledger, docs = half_finished(server, row_type, tmp_path, [5, 7], [1, 2, 4, 5, 6, 7])
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    server.refusing = "key"
    assert run(server, row_type, docs, out, "--concurrency", "1", "--ledger", str(ledger)) == 1
    err = capsys.readouterr().err
    assert f"output: {out} (1 value, 1 of them from the ledger for documents not reached)" in err
    summary = summary_of(err)
    # doc 7's failure is the earlier run's, with what it paid: not "not started".
    assert summary[2] == (
        "1 done, 2 failed (2 finished by an earlier run; 1 kept pending for the next run), "
        "3 not started, in T s"
    )
    assert "passes 2, attempts 3, tokens 200 in / 20 out" in summary
    assert "cost $0.000042 ($0.000042 of it paid by earlier runs)" in summary
    assert any(line.startswith("failed: doc-07.txt: extraction_parse: ") for line in summary)


def test_a_stopped_run_counts_a_copy_of_a_document_it_gave_once(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def documents(name: str, numbers: list[int]) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps({"text": f"doc {n}"}) + "\n" for n in numbers))
        return path

    ledger = tmp_path / "shared.sqlite"
    later = documents("later.jsonl", [5, 6])
    assert run(server, row_type, later, tmp_path / "later.out", "--ledger", str(ledger)) == 0
    # Copies of a document this run sends, and of one the ledger holds.
    source = documents("in.jsonl", [1, 2, 4, 5, 6, 1, 5, 5])
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    # The budget is the job's: reached at the third document sent ($0.000042 before).
    extra = ("--max-cost", "0.0001", "--concurrency", "1", "--ledger", str(ledger))
    assert run(server, row_type, source, out, *extra) == 0
    assert len(rows_of(out)) == 8 and sum(server.sent.values()) == 5
    summary = summary_of(capsys.readouterr().err)
    assert summary[2].startswith("8 done, 0 failed (")
    # Five documents paid for, whatever number of copies each came in.
    assert summary[4:6] == [
        "passes 5, attempts 5, tokens 500 in / 50 out",
        "cost $0.000105 ($0.000042 of it paid by earlier runs)",
    ]


STRICT_ROW_TYPE = """from pydantic import BaseModel, field_validator


class Row(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def not_eight(cls, n: int) -> int:
        if n == 8:
            raise ValueError("eight is no longer accepted")
        return n
"""


def test_what_a_stopped_run_writes_from_the_ledger_is_validated_again(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, docs = half_finished(server, row_type, tmp_path)
    # The same type (the same schema, so the same keys), its validators since stricter.
    strict = tmp_path / "strict.py"
    strict.write_text(STRICT_ROW_TYPE, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    server.refusing = "key"
    extra = ("--concurrency", "1", "--ledger", str(ledger))
    assert run(server, f"{strict}:Row", docs, out, *extra) == 1
    rows = rows_of(out)
    assert sorted(row["label"] for row in rows) == [f"doc-0{n}.txt" for n in (5, 6)]
    assert all("earlier_attempts" not in (row["record"] or {}) for row in rows)
    # The value the type now refuses is not counted done: its document is not started.
    summary = summary_of(capsys.readouterr().err)
    assert summary[2] == (
        "2 done, 1 failed (2 finished by an earlier run; 1 kept pending for the next run), "
        "3 not started, in T s"
    )


def test_a_refused_key_stops_the_run_and_fails_the_command(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.refusing = "key"
    docs = folder(tmp_path, [1, 2, 4, 5, 6, 8])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out, "--concurrency", "1") == 1
    assert rows_of(out) == [] and server.refused == 1
    err = capsys.readouterr().err
    summary = summary_of(err)
    assert summary[1] == "0 done, 1 failed (1 kept pending for the next run), 5 not started, in T s"
    assert (
        "stopped starting new inputs: the provider refused the run's key or account: "
        "authentication (39 chars withheld) [provider=openai, status=401]"
    ) in summary
    reader = Ledger(tmp_path / "out.jsonl.ledger.sqlite")
    assert reader.counts() == {"pending": 1}
    reader.close()
    server.refusing = None
    assert run(server, row_type, docs, out, "--concurrency", "1") == 0
    assert len(rows_of(out)) == 6


def test_status_and_export_read_the_ledger(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2, 7, 13])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    capsys.readouterr()
    ledger = str(tmp_path / "out.jsonl.ledger.sqlite")
    assert main(["batch", "status", ledger]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:6] == [
        f"ledger: {ledger}",
        "inputs: 4 (done 2, failed 2)",
        "attempts 4, passes 3, tokens 300 in / 30 out",
        "cost $0.000063",
        "failures: extraction_parse 1, invalid_request 1",
        "runs: 1",
    ]
    assert re.fullmatch(
        r"  1\. \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC  openai gpt-4o-mini, Row: "
        r"finished after \d+\.\d s",
        lines[6],
    )
    assert main(["batch", "status", ledger, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"] == {"done": 2, "failed": 2}
    assert (report["passes"], report["batch_passes"], report["cost"], report["failures"]) == (
        3,
        0,
        "0.000063",
        {"extraction_parse": 1, "invalid_request": 1},
    )
    (only,) = report["runs"]
    assert (only["state"], only["settings"]["model"], only["stopped"]) == (
        "finished",
        "gpt-4o-mini",
        None,
    )

    # The values, in the rows the run wrote, in input order.
    exported = tmp_path / "values.jsonl"
    assert main(["batch", "export", ledger, "--out", str(exported)]) == 0
    assert capsys.readouterr().err == f"2 values written to {exported}\n"
    assert rows_of(exported) == sorted(rows_of(out), key=lambda row: row["label"])
    assert main(["batch", "export", ledger, "--failed"]) == 0
    captured = capsys.readouterr()
    failures = [json.loads(line) for line in captured.out.splitlines()]
    assert captured.err == "2 failures written to stdout\n"
    assert [(f["label"], f["attempts"], f["error"]["kind"]) for f in failures] == [
        ("doc-07.txt", 1, "extraction_parse"),
        ("doc-13.txt", 1, "invalid_request"),
    ]
    assert failures[1]["error"]["message"] == (
        "invalid_request (12 chars withheld) [provider=openai, status=400]"
    )
    assert failures[0]["record"]["passes"] == 1
    assert "no JSON here" not in captured.out  # the model's text is never in the log view

    missing = str(tmp_path / "nope.sqlite")
    assert main(["batch", "status", missing]) == 2
    assert capsys.readouterr().err == f"allama batch status: no such ledger: `{missing}`\n"
    assert main(["batch", "export", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"allama batch export: `{out}` is not a ledger: file is not a database\n"
    )


def test_plain_progress_lines_when_stderr_is_not_a_terminal(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.delay = 0.1
    docs = folder(tmp_path, [1, 2, 4, 5, 6, 8, 9, 10])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out, "--concurrency", "2", "--progress-every", "0.05") == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    progress = [line for line in err.splitlines() if line.startswith("progress: ")]
    assert len(progress) >= 3
    pattern = (
        r"progress: (\d)/8: \d done, 0 failed, [0-2] in flight, \d+ tokens, "
        r"(\$0\.\d{6}|cost \?), \d+\.\d\d/s, ETA (\d+ s|\?)"
    )
    assert all(re.fullmatch(pattern, line) for line in progress), progress
    assert progress[-1].startswith("progress: 8/8: 8 done, 0 failed, 0 in flight, 880 tokens, ")
    assert progress[-1].endswith(", ETA 0 s")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_redrawn_in_place_on_a_terminal(
    server: BatchServer, row_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.delay = 0.15
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setenv("COLUMNS", "200")  # the bar fits: on a narrower one only the numbers do
    docs = folder(tmp_path, [1, 2, 4, 5])
    assert run(server, row_type, docs, tmp_path / "out.jsonl", "--concurrency", "1") == 0
    err = terminal.getvalue()
    assert "progress: " not in err
    draws = err.split("\r")[1:]
    assert len(draws) >= 3
    assert draws[0].startswith("[")
    last = draws[-1].split("\n")[0]
    assert last.startswith("[####################] 4/4: 4 done, 0 failed, 0 in flight, ")
    assert last.endswith("\x1b[K")
    # The bar's line is ended before the summary.
    assert draws[-1].split("\n")[1].startswith("4 done, 0 failed, in ")

    # However narrow the terminal, a redrawn line fits it (a wrapped one would stay).
    narrow = _Terminal()
    monkeypatch.setattr("sys.stderr", narrow)
    monkeypatch.setenv("COLUMNS", "10")
    (tmp_path / "narrow").mkdir()
    again = folder(tmp_path / "narrow", [1, 2])
    assert run(server, row_type, again, tmp_path / "narrow.jsonl", "--concurrency", "1") == 0
    drawn = [
        draw.split("\n")[0].removesuffix("\x1b[K") for draw in narrow.getvalue().split("\r")[1:]
    ]
    assert drawn and all(len(line) <= 9 for line in drawn), drawn


class _AsciiTerminal(_Terminal):
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "ascii"


def test_a_terminal_that_writes_ascii_alone_gets_a_line_that_fits_it(
    server: BatchServer, row_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.delay = 0.15
    terminal = _AsciiTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setenv("COLUMNS", "30")  # too narrow for the line: it is cut
    docs = folder(tmp_path, [1, 2, 4])
    assert run(server, row_type, docs, tmp_path / "out.jsonl", "--concurrency", "1") == 0
    drawn = [
        draw.split("\n")[0].removesuffix("\x1b[K") for draw in terminal.getvalue().split("\r")[1:]
    ]
    # Cut with what the terminal writes as it is ("…" would be written as `\u2026`, six
    # columns, and the line would wrap instead of being drawn again).
    assert drawn and all(line.isascii() and len(line) <= 29 for line in drawn), drawn
    assert drawn[-1] == "3/3: 3 done, 0 failed, 0 i..."


def test_a_terminal_that_cannot_redraw_a_line_gets_plain_lines(
    server: BatchServer, row_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setenv("TERM", "dumb")  # an editor's shell, say: no escapes, no redraws
    docs = folder(tmp_path, [1, 2])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out, "--progress-every", "0.05") == 0
    err = terminal.getvalue()
    assert "\r" not in err and "\x1b" not in err
    assert [line for line in err.splitlines() if line.startswith("progress: ")]


def test_on_an_80_column_terminal_the_bar_is_drawn_and_the_least_needed_parts_give_way() -> None:
    from allama.batch._run import BatchSummary
    from allama.cli._progress import fitted, progress_text

    summary = BatchSummary(total=8, done=3, in_flight=1, input_tokens=409, output_tokens=100)
    summary.cost_unknown = 3
    summary.ended = summary.started + 10.0
    assert progress_text(summary) == (
        "3/8: 3 done, 0 failed, 1 in flight, 509 tokens, cost unknown, 0.30/s, ETA 17 s"
    )
    assert fitted(summary, 120) == (
        "[#######.............] 3/8: 3 done, 0 failed, 1 in flight, 509 tokens, "
        "cost unknown, 0.30/s, ETA 17 s"
    )
    # 79 columns (the last left free): a narrower bar, the rate and the tokens left out.
    assert fitted(summary, 79) == (
        "[######............] 3/8: 3 done, 0 failed, 1 in flight, cost unknown, ETA 17 s"
    )
    assert fitted(summary, 60) == "[####.........] 3/8: 3 done, 0 failed, 1 in flight, ETA 17 s"
    # No room for a bar: the line as whole as fits, then cut.
    assert fitted(summary, 44) == "3/8: 3 done, 0 failed, 1 in flight, ETA 17 s"
    assert fitted(summary, 20) == "3/8: 3 done, 0 fail…"
    # A stream that writes ASCII alone would write "…" as 6 columns, and the line would wrap.
    assert fitted(summary, 20, ascii=True) == "3/8: 3 done, 0 fa..."
    assert fitted(summary, 0) == ""
    summary.total = None  # no bar without a total
    assert fitted(summary, 70) == (
        "3/?: 3 done, 0 failed, 1 in flight, 509 tokens, cost unknown, ETA ?"
    )
    # A rate limit's pause is said while it lasts, the last part a narrow line leaves out.
    assert progress_text(summary, paused=72.4) == (
        "3/?: 3 done, 0 failed, 1 in flight, paused 1 min 12 s (rate limit), 509 tokens, "
        "cost unknown, 0.30/s, ETA ?"
    )
    assert fitted(summary, 79, paused=72.4) == (
        "3/?: 3 done, 0 failed, 1 in flight, paused 1 min 12 s (rate limit), ETA ?"
    )
    assert "paused" not in progress_text(summary, paused=0.4)
    summary.retrying = 2  # a 503's wait, say
    assert ", 1 in flight, 2 waiting to retry, 509 tokens, " in progress_text(summary)
    summary.retrying = 0
    # Inputs priced at $0 beside one of unknown price: a cost, as the summary says, not none.
    summary.priced, summary.cost_unknown = 2, 1
    assert "509 tokens, $0.000000+?, " in progress_text(summary)
    summary.priced = summary.cost_unknown = 0  # no input has ended with a cost yet
    assert ", 509 tokens, cost ?, " in progress_text(summary)
    summary.priced, summary.cost_unknown = 2, 1
    summary.stopped = "interrupted (Ctrl-C)"  # no ETA: those in flight finish
    assert progress_text(summary).endswith(", 0.30/s, stopped")  # (the run has ended)
    summary.ended = None  # and what a second Ctrl-C would do to the one in flight
    assert progress_text(summary).endswith("/s, stopping: Ctrl-C again abandons those in flight")
    summary.stopped, summary.ended = None, summary.started + 10.0
    # A job's state is the provider's words: escaped, as on every line the run prints.
    summary.jobs["t1"] = "batch_1: in_progress\x1b]0;title\x07\x1b[2J"
    assert ", job batch_1: in_progress\\x1b]0;title\\x07\\x1b[2J, " in progress_text(summary)
    assert "\x1b" not in fitted(summary, 200).removesuffix("\x1b[K")
    summary.jobs["t1"] = "batch_1: en_cours_été"
    assert fitted(summary, 82).startswith("3/?: 3 done, 0 failed, 1 in flight, job batch_1: e")
    # Written as escapes, the job's state would not fit: it gives way.
    assert (
        fitted(summary, 82, ascii=True) == "3/?: 3 done, 0 failed, 1 in flight, $0.000000+?, ETA ?"
    )
    assert fitted(summary, 90, ascii=True) == (
        "3/?: 3 done, 0 failed, 1 in flight, job batch_1: en_cours_\\xe9t\\xe9, $0.000000+?, ETA ?"
    )


def after_two_sends(server: BatchServer, act: Callable[[], None]) -> None:
    """`act`, in a thread of its own, once the server has received two requests."""

    def wait_and_act() -> None:
        deadline = time.monotonic() + 30
        while sum(server.sent.values()) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        act()

    threading.Thread(target=wait_and_act, daemon=True).start()


def interrupt_after_two_sends(server: BatchServer, signum: int = signal.SIGINT) -> None:
    """Ctrl-C (or another signal) to this process once the server has received two
    requests."""
    after_two_sends(server, lambda: os.kill(os.getpid(), signum))


@pytest.mark.parametrize(
    ("signum", "said"),
    [
        (signal.SIGINT, "interrupted (Ctrl-C)"),
        # A service manager's or a container runtime's stop, or `timeout`'s.
        (signal.SIGTERM, "terminated (SIGTERM)"),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_stops_starting_inputs_and_lets_the_run_end(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    signum: int,
    said: str,
) -> None:
    server.delay = 0.1
    docs = folder(tmp_path, [1, 2, 4, 5, 6, 8, 9, 10, 11, 12])
    out = tmp_path / "out.jsonl"
    before = signal.getsignal(signum)
    interrupt_after_two_sends(server, signum)
    assert run(server, row_type, docs, out, "--concurrency", "2") == 128 + signum
    assert signal.getsignal(signum) is before  # given back
    summary = summary_of(capsys.readouterr().err)
    assert f"stopped starting new inputs: {said}" in summary
    sent = sum(server.sent.values())
    assert 2 <= sent < 10
    # What was in flight finished and is in the output and the ledger; the rest is not.
    assert len(rows_of(out)) == sent
    reader = Ledger(tmp_path / "out.jsonl.ledger.sqlite")
    assert reader.counts() == {"done": sent}
    reader.close()
    assert summary[1] == f"{sent} done, 0 failed, {10 - sent} not started, in T s"
    # Run again: the rest is sent, nothing twice.
    assert run(server, row_type, docs, out) == 0
    assert sorted(server.sent.values()) == [1] * 10
    assert len(rows_of(out)) == 10


def test_a_copy_of_an_input_a_stopped_run_finished_is_no_earlier_runs(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.delay = 0.1
    source = tmp_path / "in.jsonl"
    texts = ["doc 1", "doc 2", "doc 4", "doc 5", "doc 6", "doc 8", "doc 1"]
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out.jsonl"
    interrupt_after_two_sends(server)
    assert run(server, row_type, source, out, "--concurrency", "1") == 130
    summary = summary_of(capsys.readouterr().err)
    sent = sum(server.sent.values())
    assert 2 <= sent <= 4
    # The last line, a copy of the first, is written from the ledger: the first run's own.
    assert [row["label"] for row in rows_of(out)][-1] == "line 7"
    assert summary[1] == (
        f"{sent + 1} done, 0 failed (1 repeating an earlier input), "
        f"{len(texts) - sent - 1} not started, in T s"
    )


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "batch"


@pytest.mark.local
def test_the_readme_example_runs_on_the_local_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("xllamacpp", reason="the llama.cpp engine is not installed")
    pytest.importorskip("gguf", reason="the tiny test model needs the gguf package")
    from _tiny_gguf import write_tiny_model

    # The tiny model answers the shortest value the grammar allows, in a fraction of the
    # time SmolLM2 takes; the command, the engine and the grammar are the real ones.
    monkeypatch.setenv("ALLAMA_LOCAL_MODEL", str(write_tiny_model(tmp_path / "tiny.gguf").path))
    out = tmp_path / "tickets.jsonl"
    command = ["batch", "run", str(EXAMPLE / "tickets"), "--type"]
    command += [f"{EXAMPLE / 'ticket.py'}:Ticket", "--prompt", str(EXAMPLE / "prompt.txt")]
    assert main([*command, "--out", str(out)]) == 0
    rows = rows_of(out)
    assert [row["label"] for row in rows] == sorted(p.name for p in (EXAMPLE / "tickets").iterdir())
    for row in rows:
        assert set(row["value"]) == {"category", "priority", "summary"}
        assert row["record"]["enforcement"] == "exact"
        assert row["record"]["cost_missing"] == "no price for a model run locally (local)"
    err = capsys.readouterr().err
    assert err.startswith("local: llama.cpp with tiny.gguf, ready in ")
    assert "8 documents from " in err and "8 done, 0 failed, in " in err
    # Run again, the engine on another port: every value comes from the ledger.
    assert main([*command, "--out", str(out)]) == 0
    assert rows_of(out) == rows
    err = capsys.readouterr().err
    assert "8 done, 0 failed (8 finished by an earlier run), in " in err


@pytest.mark.local
def test_a_local_run_holds_no_more_slots_than_there_are_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each llama.cpp slot holds its context's memory from the start: `--concurrency 32`
    on three documents took 3.2 GB for a 135M model."""
    pytest.importorskip("xllamacpp", reason="the llama.cpp engine is not installed")
    pytest.importorskip("gguf", reason="the tiny test model needs the gguf package")
    import allama.cli._batch as command
    from _tiny_gguf import write_tiny_model

    monkeypatch.setenv("ALLAMA_LOCAL_MODEL", str(write_tiny_model(tmp_path / "tiny.gguf").path))
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a", "b", "c"):
        (docs / f"{name}.txt").write_text(f"ticket {name}\n", encoding="utf-8")
    start_local = command._start_local
    slots: list[tuple[int, int]] = []

    def started(provider: Any) -> Any:
        slots.append((provider.engine.parallel, provider.engine.context))
        return start_local(provider)

    monkeypatch.setattr(command, "_start_local", started)
    out = tmp_path / "out.jsonl"
    argv = ["batch", "run", str(docs), "--type", f"{EXAMPLE / 'ticket.py'}:Ticket"]
    assert main([*argv, "--out", str(out), "--concurrency", "32"]) == 0
    assert slots == [(3, 3 * 4096)] and len(rows_of(out)) == 3


@pytest.mark.local
def test_a_local_model_that_does_not_load_is_one_error_of_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("xllamacpp", reason="the llama.cpp engine is not installed")
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + b"\x00" * 64)
    monkeypatch.setenv("ALLAMA_LOCAL_MODEL", str(corrupt))
    out = tmp_path / "tickets.jsonl"
    command = ["batch", "run", str(EXAMPLE / "tickets"), "--type"]
    command += [f"{EXAMPLE / 'ticket.py'}:Ticket", "--out", str(out)]
    assert main(command) == 1
    err = capsys.readouterr().err
    assert err.startswith("allama batch run: cannot start the local provider: ")
    assert "Traceback" not in err and not out.exists()


def test_status_tells_a_running_run_from_a_dead_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "shared.sqlite"
    settings = {"provider": "openai", "model": "gpt-4o-mini", "type": "Row"}
    running = Ledger(path, settings=settings)  # this process: alive
    running.claim("k0", 0, "doc-00.txt")
    killed = Ledger(path, settings=settings)
    killed.claim("k1", 1, "doc-01.txt")
    killed.claim("k2", 2, "doc-02.txt")
    killed.close()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **PIPES)
    with sqlite3.connect(path) as db:  # as if its process had been killed
        db.execute("UPDATE runs SET pid = ? WHERE run_id = ?", (int(gone.stdout), killed.run_id))
    try:
        assert main(["batch", "status", str(path), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert [run["state"] for run in report["runs"]] == ["running", "dead"]
        assert report["counts"] == {"in_flight": 3}
        assert report["in_flight"] == {"dead": 2, "running": 1}
        assert main(["batch", "status", str(path)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1] == (
            "inputs: 3 (claimed by a running run 1 (sent or next in line), "
            "left in flight by a dead run 2 (sent again on resume; a failure it was trying "
            "again, only with --retry-failed))"
        )
        assert f"openai gpt-4o-mini, Row: running (pid {os.getpid()} on " in lines[-2]
        assert "Row: dead: never finished (killed?), last heard from at " in lines[-1]
    finally:
        running.close()


def test_the_summary_names_the_first_failures_in_input_order(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    numbers = [1, *range(7, 1000, 50)][:16]  # 7, 57, 107...: no JSON in the answer
    source.write_text("".join(json.dumps({"text": f"doc {n}"}) + "\n" for n in numbers))
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, source, out, "--no-progress") == 0
    err = capsys.readouterr().err
    assert "progress: " not in err
    lines = summary_of(err)
    assert lines[1] == "1 done, 15 failed, in T s"
    named = [line.split(":")[1].strip() for line in lines if line.startswith("failed: ")]
    assert named == ["line 2", "line 3", "line 4", "line 5", "line 6"]
    ledger = tmp_path / "out.jsonl.ledger.sqlite"
    assert f"... and 10 more failures: allama batch export {ledger} --failed" in lines
    # The ledger shared by a run of another prompt: the command named is one that runs.
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Read the number, carefully.")
    assert run(server, row_type, source, out, "--no-progress", "--prompt", str(prompt)) == 0
    lines = summary_of(capsys.readouterr().err)
    named = f"allama batch export {ledger} --set 2 --failed"
    assert f"... and 10 more failures: {named}" in lines
    assert main(named.split()[1:]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 15
    # `status` says which set each run is of.
    assert main(["batch", "status", str(ledger)]) == 0
    shown = capsys.readouterr().out.splitlines()
    listed = [line.split("  ", 2)[-1] for line in shown if line.startswith(("  1. ", "  2. "))]
    assert [line.split(":")[0] for line in listed] == [
        "set 1, openai gpt-4o-mini, Row",
        "set 2, openai gpt-4o-mini, Row",
    ]


def test_the_summary_sends_failures_whose_values_the_ledger_holds_to_export(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2, 4, 5, 6, 8, 9])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    other = BatchServer().start()  # another endpoint: its values are not this one's
    try:
        capsys.readouterr()
        code = main(
            [
                *("batch", "run", str(docs), "--type", row_type, "--provider", "openai"),
                *("--base-url", other.url, "--model", "gpt-4o-mini", "--out", str(out)),
            ]
        )
        lines = summary_of(capsys.readouterr().err)
    finally:
        other.stop()
    assert code == 0 and not other.sent
    assert lines[1] == (
        "ledger: 7 of these 7 documents are in it (7 done (7 against another endpoint, not "
        "given), 0 failed), 0 to send"
    )
    ledger = tmp_path / "out.jsonl.ledger.sqlite"
    shown = f"allama batch export {ledger} writes the 7 values the ledger holds of them"
    assert f"... and 2 more failures: {shown}" in lines
    assert main(["batch", "export", str(ledger), "--failed"]) == 0
    assert capsys.readouterr().out == ""  # none failed there


def test_a_few_failures_whose_values_the_ledger_holds_name_the_export_in_full(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Five failures or fewer are each shown, their messages cut to a line: the command
    that writes the values the ledger holds of them is said on a line of its own, with the
    set of a ledger that holds two."""
    docs = folder(tmp_path, [1, 2, 4])
    out = tmp_path / "out.jsonl"
    ledger = tmp_path / "shared.sqlite"
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Read the number, carefully.")
    assert run(server, row_type, docs, out, "--ledger", str(ledger)) == 0
    assert run(server, row_type, docs, out, "--ledger", str(ledger), "--prompt", str(prompt)) == 0
    other = BatchServer().start()  # another endpoint: its values are not this one's
    try:
        capsys.readouterr()
        code = main(
            [
                *("batch", "run", str(docs), "--type", row_type, "--provider", "openai"),
                *("--base-url", other.url, "--model", "gpt-4o-mini", "--out", str(out)),
                *("--ledger", str(ledger), "--prompt", str(prompt)),
            ]
        )
        lines = summary_of(capsys.readouterr().err)
    finally:
        other.stop()
    assert code == 0 and not other.sent
    assert sum(line.startswith("failed: ") for line in lines) == 3
    named = f"allama batch export {ledger} --set 2"
    assert f"kept: {named} writes the 3 values the ledger holds of them" in lines
    assert main(named.split()[1:]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_a_stopped_run_writes_no_value_of_another_endpoint_from_the_ledger(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stopped run writes what the ledger holds of the documents it did not reach, as it
    would have given them: a value another endpoint made is not given, though the run's
    ledger was closed by then (it read which endpoint made it from the closed ledger, and
    wrote every such value)."""

    def documents(name: str, numbers: list[int]) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps({"text": f"doc {n}"}) + "\n" for n in numbers))
        return path

    out = tmp_path / "out.jsonl"
    assert run(server, row_type, documents("first.jsonl", [1, 2, 4]), out) == 0
    other = BatchServer().start()
    other.refusing = "key"  # the run stops at its first document, before the ledger's
    try:
        capsys.readouterr()
        code = main(
            [
                *("batch", "run", str(documents("in.jsonl", [5, 6, 1, 2, 4]))),
                *("--type", row_type, "--provider", "openai", "--concurrency", "1"),
                *("--base-url", other.url, "--model", "gpt-4o-mini", "--out", str(out)),
            ]
        )
        err = capsys.readouterr().err
    finally:
        other.stop()
    assert code == 1 and other.refused == 1
    assert "(3 done (3 against another endpoint, not given), 0 failed)" in err
    assert rows_of(out) == []


def test_export_writes_a_corpus_split_over_runs_part_after_part(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each run gives its inputs positions from 0: ordered by them, two parts of a corpus
    on one ledger were interleaved (`d1, d8, d2, d9, ...`)."""
    ledger = tmp_path / "corpus.sqlite"
    parts = [[1, 2, 4, 5, 6], [8, 9, 10, 11, 12]]
    for number, part in enumerate(parts):
        source = tmp_path / f"part{number}.jsonl"
        source.write_text(
            "".join(json.dumps({"id": f"d{n}", "text": f"doc {n}"}) + "\n" for n in part)
        )
        out = tmp_path / f"part{number}.out.jsonl"
        assert run(server, row_type, source, out, "--ledger", str(ledger)) == 0
    capsys.readouterr()
    assert main(["batch", "export", str(ledger)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["label"] for row in rows] == [f"d{n}" for n in parts[0] + parts[1]]


def test_a_ledger_that_cannot_be_written_is_refused_before_the_run(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = folder(tmp_path, [1, 2])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    ledger = tmp_path / "out.jsonl.ledger.sqlite"
    capsys.readouterr()
    writable = os.access
    # A file made read-only (as root can write anything, the check is what is stubbed).
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if Path(path) == ledger else writable(path, mode)
    )
    assert run(server, row_type, docs, out) == 1
    assert capsys.readouterr().err == (
        f"allama batch run: cannot write the ledger: `{ledger}` is read-only (a run records "
        "every input there); `allama batch status` and `export` read it where it is\n"
    )
    assert sum(server.sent.values()) == 2


def test_a_field_named_for_a_folder_is_a_bad_argument(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    assert run(server, row_type, docs, tmp_path / "out.jsonl", "--field", "body") == 2
    assert "a folder's documents are its files" in capsys.readouterr().err


HUNDREDS_TYPE = """from typing import Annotated

from pydantic import BaseModel, BeforeValidator


class Row(BaseModel):
    n: Annotated[int, BeforeValidator(lambda v: int(v) * 100)]
"""


def test_a_value_read_from_the_ledger_is_written_as_the_run_gave_it(
    server: BatchServer, tmp_path: Path
) -> None:
    # A validator that changes what it reads: its output read again, not its value's JSON
    # (which would come back a hundred times too large).
    hundreds = tmp_path / "hundreds.py"
    hundreds.write_text(HUNDREDS_TYPE, encoding="utf-8")
    docs = folder(tmp_path, [1, 2, 4, 5, 6, 8])
    out = tmp_path / "out.jsonl"
    assert run(server, f"{hundreds}:Row", docs, out) == 0
    expected = {f"doc-0{n}.txt": {"n": 100 * n} for n in (1, 2, 4, 5, 6, 8)}
    assert {row["label"]: row["value"] for row in rows_of(out)} == expected
    # Resumed: every value from the ledger.
    assert run(server, f"{hundreds}:Row", docs, out) == 0
    assert {row["label"]: row["value"] for row in rows_of(out)} == expected
    # Stopped at once: the documents not reached are written from the ledger.
    assert run(server, f"{hundreds}:Row", docs, out, "--max-cost", "0.00001") == 0
    assert {row["label"]: row["value"] for row in rows_of(out)} == expected
    assert sum(server.sent.values()) == 6


def test_a_budget_that_holds_nothing_back_is_no_stop_of_the_command(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2, 4])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    # Run again under a budget the earlier run's cost is past: nothing is left to send.
    assert run(server, row_type, docs, out, "--max-cost", "0.00001") == 0
    assert len(rows_of(out)) == 3


def test_an_output_named_by_a_link_is_written_through_it(
    server: BatchServer, row_type: str, tmp_path: Path
) -> None:
    docs = folder(tmp_path, [1, 2])
    target = tmp_path / "results" / "run.jsonl"
    target.parent.mkdir()
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    assert run(server, row_type, docs, link) == 0
    assert link.is_symlink() and sorted(row["value"]["n"] for row in rows_of(target)) == [1, 2]
    assert (tmp_path / "results" / "run.jsonl.ledger.sqlite").is_file()


def test_an_output_that_is_no_regular_file_or_the_ledger_its_part_is_refused(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    assert run(server, row_type, docs, pipe) == 2
    assert f"--out `{pipe}` is no regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(pipe.stat().st_mode) and sum(server.sent.values()) == 0
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out, "--ledger", f"{out}.part") == 2
    assert "is where the run writes its output until it ends" in capsys.readouterr().err
    assert not out.exists() and not Path(f"{out}.part").exists()


class _ReaderLeft(io.StringIO):
    """Standard error piped to a reader that left after the first line (`2>&1 | head -1`)."""

    def write(self, text: str) -> int:
        if self.getvalue():
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


@pytest.mark.parametrize("stderr", ["reader left", "closed"])
def test_standard_error_that_cannot_be_written_does_not_cost_the_output(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stderr: str,
) -> None:
    docs = folder(tmp_path, [1, 2, 4])
    out = tmp_path / "out.jsonl"
    monkeypatch.setattr(sys, "stderr", _ReaderLeft() if stderr == "reader left" else None)
    assert run(server, row_type, docs, out, "--progress-every", "0.01") == 0
    assert sorted(row["value"]["n"] for row in rows_of(out)) == [1, 2, 4]
    assert not Path(f"{out}.part").exists()


def test_a_label_that_is_no_text_is_shown_escaped_and_the_run_goes_on(
    server: BatchServer, row_type: str, tmp_path: Path
) -> None:
    docs = folder(tmp_path, [1])
    # A file name in Latin-1 on a UTF-8 file system: bytes that are no UTF-8.
    with open(os.fsencode(docs) + b"/caf\xe9-02.txt", "w", encoding="utf-8") as file:
        file.write("doc 2\n")
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    assert sorted(row["label"] for row in rows_of(out)) == ["caf\\xe9-02.txt", "doc-01.txt"]
    # Half a character, as JSON can spell it, in an id.
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"id": "a\\ud800", "text": "doc 4"}\n{"id": "b", "text": "doc 5"}\n')
    assert run(server, row_type, lines, tmp_path / "lines.jsonl") == 0
    assert [row["label"] for row in rows_of(tmp_path / "lines.jsonl")] in (
        ["a\\ud800", "b"],
        ["b", "a\\ud800"],
    )


def test_inputs_kept_pending_are_not_listed_as_failures(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.refusing = "key"
    docs = folder(tmp_path, list(range(1, 13)))
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 1
    err = capsys.readouterr().err
    summary = summary_of(err)
    assert summary[1].startswith("0 done, ") and "kept pending for the next run" in summary[1]
    # Nothing points at `export --failed`, which lists no pending input.
    assert not [line for line in summary if line.startswith(("failed: ", "... and "))]
    assert main(["batch", "export", f"{out}.ledger.sqlite", "--failed"]) == 0
    assert capsys.readouterr().out == ""


def test_an_input_that_is_a_pipe_is_refused_rather_than_waited_on(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipe = tmp_path / "in.jsonl"
    os.mkfifo(pipe)  # nothing writes it: reading it would wait for ever
    assert run(server, row_type, pipe, tmp_path / "out.jsonl") == 2
    assert f"`{pipe}` is no file or folder (a pipe, a device)" in capsys.readouterr().err


def test_standard_input_as_the_input_is_said_not_read_not_missing(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `-` read as "no such file or folder: `-`", as if a file had been misnamed.
    monkeypatch.chdir(tmp_path)
    assert run(server, row_type, Path("-"), tmp_path / "out.jsonl") == 2
    assert (
        "INPUT `-` (standard input) is not read: the command reads its input more than once "
        "(to find what the ledger holds); write it to a file first"
    ) in capsys.readouterr().err


def test_failures_a_spent_budget_keeps_from_being_tried_again_are_held_back(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2, 7, 13, 57])  # 7 and 57 answer no JSON, 13 a 400
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    sent = sum(server.sent.values())
    # Asked to try the failures again under a budget already spent: none is sent, and the
    # command says the budget held them back.
    assert run(server, row_type, docs, out, "--retry-failed", "--max-cost", "0.00001") == 3
    assert sum(server.sent.values()) == sent
    assert len(rows_of(out)) == 2


def test_a_finished_job_run_again_under_its_spent_budget_reports_no_stop(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2, 4])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    sent = sum(server.sent.values())
    capsys.readouterr()
    # The job paid $0.000063, past the budget; every value is the ledger's, and nothing
    # is left to send: nothing was held back, so nothing says the run stopped.
    assert run(server, row_type, docs, out, "--max-cost", "0.00005") == 0
    assert sum(server.sent.values()) == sent and len(rows_of(out)) == 3
    err = capsys.readouterr().err
    assert "stopped starting new inputs" not in err
    summary = summary_of(err)
    assert summary[2] == "3 done, 0 failed (3 finished by an earlier run), in T s"
    assert summary[-3] == (
        "the budget of $0.00005 is reached ($0.000063, $0.000063 of it paid before this run), "
        "with nothing left to send"
    )
    assert main(["batch", "status", f"{out}.ledger.sqlite"]) == 0
    assert "stopped" not in capsys.readouterr().out


def test_status_says_a_cost_no_price_is_known_for_is_unknown(
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = BatchServer(model="a-model-of-our-own").start()
    try:
        docs = folder(tmp_path, [1, 2])
        out = tmp_path / "out.jsonl"
        assert run(served, row_type, docs, out, "--model", "a-model-of-our-own") == 0
    finally:
        served.stop()
    capsys.readouterr()
    ledger = f"{out}.ledger.sqlite"
    assert main(["batch", "status", ledger, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"] is None  # not $0
    assert main(["batch", "status", ledger]) == 0
    assert (
        f"cost unknown (genai-prices {PRICES} has no price for 'a-model-of-our-own' at openai)"
        in capsys.readouterr().out.splitlines()
    )


def test_status_says_the_passes_provider_batch_jobs_answered_as_the_runs_summary_does(
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = ProviderBatchServer().start()
    docs = folder(tmp_path, [1, 2, 7, 13])
    out = tmp_path / "out.jsonl"
    command = ["batch", "run", str(docs), "--type", row_type, "--provider", "openai"]
    command += ["--base-url", served.openai_base, "--model", "gpt-4o-mini", "--out", str(out)]
    try:
        # A job answers each document (7 with no JSON, 13 refused); a live run then tries
        # the two failures again, and 7 passes: 3 passes at batch prices, 1 live.
        assert main([*command, "--provider-batch", "--poll-interval", "0.01"]) == 0
        capsys.readouterr()
        assert main([*command, "--retry-failed"]) == 0
    finally:
        served.stop()
    said = "passes 4 (3 by provider batch jobs, at batch prices)"
    assert f"{said}, attempts 6, tokens 40 in / 20 out" in summary_of(capsys.readouterr().err)
    ledger = f"{out}.ledger.sqlite"
    assert main(["batch", "status", ledger, "--no-poll"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == f"attempts 6, {said}, tokens 40 in / 20 out"
    assert main(["batch", "status", ledger, "--no-poll", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["passes"], report["batch_passes"]) == (4, 3)


def test_status_names_a_jobs_input_file_left_at_the_provider(
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import _provider_batch_server

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = ProviderBatchServer().start()
    handler = _provider_batch_server._Handler
    delete = handler.openai_file_delete

    def refusing(self: Any, data: bytes, file_id: str) -> Any:
        if any(file_id == job.input_file_id for job in served.jobs):
            raise self._fail(500, "The server had an error deleting the file.")
        return delete(self, data, file_id)

    monkeypatch.setattr(handler, "openai_file_delete", refusing)
    docs = folder(tmp_path, [1, 2])
    out = tmp_path / "out.jsonl"
    command = ["batch", "run", str(docs), "--type", row_type, "--provider", "openai"]
    command += ["--base-url", served.openai_base, "--model", "gpt-4o-mini", "--out", str(out)]
    try:
        with pytest.warns(RuntimeWarning, match="could not be deleted"):
            assert main([*command, "--provider-batch", "--poll-interval", "0.01"]) == 0
    finally:
        served.stop()
    (job,) = served.jobs
    # Its results' files deleted, its input file not (the provider refused): named, as no
    # run deletes it now.
    assert sorted(served.files) == [job.input_file_id]
    capsys.readouterr()
    ledger = f"{out}.ledger.sqlite"
    assert main(["batch", "status", ledger, "--no-poll"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split(", 2 requests, ")[1] == (
        f"{job.id}: collected (total 2, completed 2, failed 0), completed; input file "
        f"{job.input_file_id} left at the provider: it holds the requests' text; delete it there"
    )
    assert main(["batch", "status", ledger, "--no-poll", "--json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["jobs"]
    assert (shown["job_id"], shown["input_file"]) == (job.id, job.input_file_id)


def test_status_names_the_input_file_of_a_job_still_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One being made (a run cut off there: the next run deletes it if none was made), one
    # made: deleted once its rows are kept; one whose file was never uploaded names none.
    ledger = tmp_path / "jobs.sqlite"
    book = Ledger(ledger, settings={"provider": "openai", "model": "gpt-4o-mini", "type": "Doc"})
    for tag, name, job_id in [
        ("allama-a", "file-a", None),
        ("allama-b", "file-b", "batch_b"),
        ("allama-c", None, "batch_c"),
    ]:
        book.record_job(
            tag, provider="openai", base_url=None, api="chat", model="gpt-4o-mini", items=[]
        )
        if name is not None:
            book.job_file(tag, name)
        if job_id is not None:
            book.job_submitted(tag, job_id)
    book.end(None)
    book.close()
    assert main(["batch", "status", str(ledger), "--no-poll"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(", 0 requests, ")[1] for line in lines[-3:]] == [
        "allama-a: submitting; input file file-a at the provider",
        "batch_b: submitted; input file file-b at the provider",
        "batch_c: submitted",
    ]


class _Recording(http.server.BaseHTTPRequestHandler):
    """A host a ledger names: records each request (method, path, headers), and answers
    as OpenAI does for a batch in progress."""

    def _answer(self) -> None:
        seen: list[tuple[str, str, dict[str, str]]] = self.server.seen  # type: ignore[attr-defined]
        seen.append((self.command, self.path, dict(self.headers)))
        body = json.dumps(
            {"id": "batch_abc", "object": "batch", "status": "in_progress", "created_at": 1}
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


def test_status_and_cancel_send_the_key_only_to_a_host_the_caller_confirms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A ledger someone else wrote names their host: the key from the environment went there.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ENV-KEY")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    host = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recording)
    seen: list[tuple[str, str, dict[str, str]]] = []
    host.seen = seen  # type: ignore[attr-defined]
    threading.Thread(target=host.serve_forever, daemon=True).start()
    there = f"http://127.0.0.1:{host.server_address[1]}"
    ledger = tmp_path / "theirs.sqlite"
    book = Ledger(ledger, settings={"provider": "openai", "model": "gpt-4o-mini", "type": "Doc"})
    book.record_job(
        "allama-theirs",
        provider="openai",
        base_url=f"http://user:pw@127.0.0.1:{host.server_address[1]}/v1?key=QUERY-SECRET",
        api="chat",
        model="gpt-4o-mini",
        items=[],
    )
    book.job_submitted("allama-theirs", "batch_abc")
    book.end(None)
    book.close()
    said = (
        f"the ledger sends this job's calls to {there}, not to openai's own "
        "(https://api.openai.com) nor one OPENAI_BASE_URL names: the key from the environment "
        "is not sent to a host a ledger names (anyone may have written it); if its runs were "
        f"yours, confirm it with --base-url {there} (base_url= from Python)"
    )
    try:
        # `status` shows what the ledger says, and asks nothing.
        assert main(["batch", "status", str(ledger)]) == 0
        line = capsys.readouterr().out.splitlines()[-1]
        assert line.split(", 0 requests, ")[1] == f"batch_abc: submitted; now: not asked ({said})"
        assert main(["batch", "status", str(ledger), "--json"]) == 0
        (job,) = json.loads(capsys.readouterr().out)["jobs"]
        assert job["polled"] == f"not asked ({said})"
        assert main(["batch", "cancel", str(ledger)]) == 1
        assert capsys.readouterr().out == (
            f"not cancelled: allama-theirs: {said} (the next `allama batch run` collects it)\n"
        )
        assert seen == []
        (row,) = Ledger(ledger, read_only=True).jobs()
        assert not row.cancel_requested
        # A --base-url that is no URL is the command's usage error.
        assert main(["batch", "status", str(ledger), "--base-url", f"{there}#"]) == 2
        assert capsys.readouterr().err.startswith("allama batch status: --base-url has a `#`")
        # Confirmed: asked, there.
        assert main(["batch", "status", str(ledger), "--base-url", there]) == 0
        assert capsys.readouterr().out.splitlines()[-1].endswith("now: in_progress")
        assert main(["batch", "cancel", str(ledger), "--base-url", f"{there}/v1"]) == 0
        assert capsys.readouterr().out == (
            "cancel requested: batch_abc (the next `allama batch run` collects what it ran)\n"
        )
    finally:
        host.shutdown()
        host.server_close()
    assert [(method, path) for method, path, _ in seen] == [
        ("GET", "/v1/batches/batch_abc?key=QUERY-SECRET"),
        ("POST", "/v1/batches/batch_abc/cancel?key=QUERY-SECRET"),
    ]


def test_a_run_with_nothing_left_to_send_starts_no_local_engine(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A finished batch run again loaded llama.cpp's model (seconds, and gigabytes of
    memory) to send nothing. The engine starts once the ledger shows something to send."""
    import allama.cli._batch as command

    starts: list[str] = []
    start_local = command._start_local

    def counted(provider: Any) -> str | None:
        starts.append(provider.name)
        return start_local(provider)

    monkeypatch.setattr(command, "_start_local", counted)
    docs = folder(tmp_path, [1, 2])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    assert starts == ["openai"]
    assert run(server, row_type, docs, out) == 0
    assert starts == ["openai"]
    assert "ledger: 2 of these 2 documents are in it (2 done, 0 failed), 0 to send" in (
        capsys.readouterr().err
    )
    (docs / "3.txt").write_text("three", encoding="utf-8")
    assert run(server, row_type, docs, out) == 0
    assert starts == ["openai", "openai"]


def test_ctrl_c_while_the_ledger_is_read_before_the_run_leaves_nothing_behind(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import allama.cli._batch as command

    docs = folder(tmp_path, [1, 2])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    before, sent = out.read_bytes(), sum(server.sent.values())
    files = [path.name for path in tmp_path.iterdir()]
    capsys.readouterr()

    def interrupted(*_: Any) -> Any:
        raise KeyboardInterrupt

    # The look-up of what the ledger holds of every document takes seconds for a large
    # source: Ctrl-C then leaves the output as it was, and no half-written file beside it.
    monkeypatch.setattr(command, "_in_ledger", interrupted)
    assert run(server, row_type, docs, out) == 130
    assert capsys.readouterr().err.endswith(
        "allama batch run: interrupted (Ctrl-C) before the run began: nothing was sent\n"
    )
    assert out.read_bytes() == before and sum(server.sent.values()) == sent
    assert not (tmp_path / "out.jsonl.part").exists() and "out.jsonl.part" not in files
    # Nor just after it: the command still holds Ctrl-C until the run's own handler does.
    monkeypatch.undo()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # (undone with the rest)
    monkeypatch.setattr(command, "_isatty", interrupted)
    assert run(server, row_type, docs, out) == 130
    assert "before the run began: nothing was sent" in capsys.readouterr().err
    assert out.read_bytes() == before and not (tmp_path / "out.jsonl.part").exists()


def test_a_large_input_is_said_to_be_checked_before_it_is_and_ctrl_c_there_says_so(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every document of a JSONL or CSV input is checked before anything is sent (seconds
    for a large one: 8 s for 100 MB): said first, so the command does not seem to hang,
    and Ctrl-C meanwhile says what it ended."""
    import allama.cli._batch as command

    inputs = importlib.import_module("allama.batch._inputs")  # (`allama.batch`: a function)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": f"doc {n}"}) + "\n" for n in range(2)))
    out = tmp_path / "out.jsonl"
    size = source.stat().st_size
    monkeypatch.setattr(command, "_megabytes", lambda bytes_: f"{bytes_} bytes", raising=False)
    monkeypatch.setattr(command, "_SAID_WHILE_CHECKED", size, raising=False)
    assert run(server, row_type, source, out, "--no-progress") == 0
    assert capsys.readouterr().err.splitlines()[:2] == [
        f"checking the {size} bytes of {source} before anything is sent",
        f"2 documents from {source} (jsonl) to Row with openai gpt-4o-mini, concurrency 8",
    ]
    monkeypatch.setattr(command, "_SAID_WHILE_CHECKED", size + 1)
    source.write_text(source.read_text() + json.dumps({"text": "doc 2"}) + "\n")

    def interrupted(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(inputs, "read_inputs", interrupted)
    before, sent = out.read_bytes(), sum(server.sent.values())
    assert run(server, row_type, source, out, "--no-progress") == 130
    assert capsys.readouterr().err == (
        f"checking the {source.stat().st_size} bytes of {source} before anything is sent\n"
        "allama batch run: interrupted (Ctrl-C) before the run began: nothing was sent\n"
    )
    assert out.read_bytes() == before and sum(server.sent.values()) == sent
    assert not (tmp_path / "out.jsonl.part").exists()
    # A small one is checked with nothing said.
    monkeypatch.undo()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # (undone with the rest)
    assert run(server, row_type, source, out, "--no-progress") == 0
    assert capsys.readouterr().err.startswith(f"3 documents from {source} (jsonl)")
    assert command._megabytes(137_277_780) == "137 MB"  # (said past 10 MB: a second or so)


def test_a_stopped_run_whose_ledger_holds_nothing_finished_reads_no_input_again(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A refused key stops a run at its first call, on a ledger of its own: nothing the
    ledger holds is finished, so nothing is written from it, and the input (of a million
    lines, say) is not read again for it, nor said to be."""
    import allama.cli._batch as command

    monkeypatch.setattr(command, "_SAID_WHILE_WRITTEN", 1)
    looked_up: list[Any] = []
    look_up = command._looked_up

    def looking(*args: Any) -> Any:
        looked_up.append(args)
        return look_up(*args)

    monkeypatch.setattr(command, "_looked_up", looking)
    server.refusing = "key"
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, folder(tmp_path, [1, 2, 4]), out, "--concurrency", "1") == 1
    err = capsys.readouterr().err
    assert "writing what the ledger holds" not in err and not looked_up
    assert summary_of(err)[1] == (
        "0 done, 1 failed (1 kept pending for the next run), 2 not started, in T s"
    )
    assert f"output: {out} (0 values)" in err and out.read_text() == ""


def test_a_rows_earlier_paid_attempts_are_in_it_so_that_its_costs_add_up(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    # Answered with no JSON (a paid pass), then a 503, then its value: two paid passes.
    (docs / "a.txt").write_text("doc 1, flaky\n", encoding="utf-8")
    (docs / "b.txt").write_text("doc 2\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out, "--retries", "1", "--concurrency", "1") == 0
    summary = summary_of(capsys.readouterr().err)
    assert "cost $0.000063" in summary
    rows = by_label(rows_of(out))
    assert "earlier_attempts" not in rows["b.txt"]
    (earlier,) = rows["a.txt"]["earlier_attempts"]
    assert (earlier["passes"], earlier["cost"]["total"]) == (1, "0.000021")
    assert rows["a.txt"]["record"]["cost"]["total"] == "0.000021"
    paid = sum(
        Decimal(record["cost"]["total"])
        for row in rows.values()
        for record in [row["record"], *row.get("earlier_attempts", [])]
    )
    assert paid == Decimal("0.000063")
    # `export` writes the same rows, from the ledger.
    exported = tmp_path / "exported.jsonl"
    assert main(["batch", "export", f"{out}.ledger.sqlite", "--out", str(exported)]) == 0
    assert by_label(rows_of(exported)) == rows


def test_inputs_a_run_finished_and_abandoned_before_giving_are_its_own_not_an_earlier_runs(
    server: BatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A second Ctrl-C abandons results the run finished (in the ledger) and had not given
    yet: written from the ledger, they are this run's, counted once, with what they paid;
    not "finished by an earlier run", nor copies of an earlier input."""
    import types

    import allama
    import allama.cli._batch as command
    from allama.cli._batch import _count_earlier, _write_from_ledger

    ledger = tmp_path / "run.sqlite"
    request = allama.ChatRequest("gpt-4o-mini").system("Read the number.")
    provider = allama.provider("openai", api_key="sk-test", base_url=server.url)
    finished = allama.batch(provider, dict, ["doc 1", "doc 2"], request=request, ledger=ledger)
    assert all(result.ok for result in finished)
    (this_run,) = {row.run_id for row in Ledger(ledger, read_only=True).rows()}
    # The same run, as the command holds it once it was closed: both read, neither given.
    run = allama.batch(provider, dict, ["doc 1", "doc 2"], request=request, ledger=ledger)
    book = Ledger(ledger, read_only=True)
    run._runner.book = types.SimpleNamespace(
        run_id=this_run, settings_of_runs=book.settings_of_runs
    )
    output = io.StringIO()
    # Said before it is done, for as many inputs as take seconds (here, two): a stop
    # otherwise seemed to hang, nothing said, for ten seconds a hundred thousand inputs.
    monkeypatch.setattr(command, "_SAID_WHILE_WRITTEN", 2)
    capsys.readouterr()
    results = _write_from_ledger(run, ledger, output, bytearray(2), set())
    assert capsys.readouterr().err == (
        "writing what the ledger holds of the 2 inputs the run did not reach\n"
    )
    assert [(r.ok, r.resumed, r.duplicate) for r in results] == [(True, False, False)] * 2
    assert len(output.getvalue().splitlines()) == 2
    summary = run.summary
    summary.abandoned = 2
    _count_earlier(summary, results, read=2)
    assert (summary.done, summary.resumed, summary.duplicates, summary.abandoned) == (2, 0, 0, 0)
    assert (summary.passes, summary.cost) == (2, Decimal("0.000042"))
    # One it gave already (its key among those given), written again for a copy: a copy.
    given = {int(results[0].key[:16], 16)}
    again = _write_from_ledger(run, ledger, io.StringIO(), bytearray(2), given)
    assert [r.duplicate for r in again] == [True, False]


def test_paths_with_control_characters_are_printed_escaped(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from allama._printable import printable

    place = tmp_path / "in\x1b[2J\x07\u202e\u061c"
    place.mkdir()
    docs = folder(place, [1, 7])  # doc 7 fails: the line naming `export --failed` too
    out = place / "out\x1b[2J.jsonl"
    assert run(server, row_type, docs, out) == 0
    assert main(["batch", "status", f"{out}.ledger.sqlite"]) == 0
    exported = place / "failed\x1b[2J.jsonl"
    ledger = f"{out}.ledger.sqlite"
    assert main(["batch", "export", ledger, "--failed", "--out", str(exported)]) == 0
    printed = capsys.readouterr()
    for text in (printed.err, printed.out):
        assert not any(ch in text for ch in "\x1b\x07\u202e\u061c")
    assert f"output: {printable(str(out))} (1 value)" in printed.err
    assert printable("a\u061cb") == "a\\u061cb"


def test_a_job_that_could_not_be_asked_about_is_said_without_the_providers_words() -> None:
    import allama
    from allama.cli._batch import _said

    error = allama.ServerError("upstream quoted: the document").mark_upstream().with_status(500)
    assert _said(error.with_provider("openai")) == (
        "kind=server provider=openai status=500 message_len=29"
    )
    assert _said(OSError("no route to host")) == "OSError: no route to host"


def test_a_stopped_run_counts_each_document_once(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Documents 13, 63, ... are refused (400). Tried again with a key the provider refuses,
    # the run stops at its first send: the documents it read ahead and gave as not started
    # are finished in the ledger, and counted once, as failures an earlier run ended with.
    docs = folder(tmp_path, [13, 63, 113, 163])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    server.refusing = "key"
    capsys.readouterr()
    assert run(server, row_type, docs, out, "--retry-failed", "--concurrency", "1") == 1
    summary = summary_of(capsys.readouterr().err)
    (counted,) = [line for line in summary if line.startswith("0 done, ")]
    assert counted == (
        "0 done, 4 failed (3 finished by an earlier run; 1 kept pending for the next run), in T s"
    )


def test_a_set_that_is_no_number_is_a_bad_argument(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    capsys.readouterr()
    ledger = f"{out}.ledger.sqlite"
    # Digits int() cannot read (a superscript, a circled one), and more than it reads.
    for wrong in ("²", "①", "9" * 5000):
        assert main(["batch", "export", ledger, "--set", wrong]) == 2
        assert capsys.readouterr() == (
            "",
            f"allama batch export: --set {wrong}: the ledger's runs have 1 set of settings "
            "(1 to 1), or all\n",
        )
    assert main(["batch", "export", ledger, "--set", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_an_empty_field_or_id_field_names_the_field_or_column_of_no_name(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.csv"
    source.write_text(",text,id\ndoc 1,doc 9,x1\ndoc 2,doc 8,x2\n")
    out = tmp_path / "out.jsonl"
    # The document is the column with no name, not `text`.
    assert run(server, row_type, source, out, "--field", "") == 0
    assert {row["label"]: row["value"] for row in rows_of(out)} == {
        "x1": {"n": 1},
        "x2": {"n": 2},
    }
    lines = tmp_path / "in.jsonl"
    lines.write_text(
        json.dumps({"": "A-1", "text": "doc 4", "id": "z1"})
        + "\n"
        + json.dumps({"": "A-2", "text": "doc 5", "id": "z2"})
        + "\n"
    )
    out = tmp_path / "lines.jsonl"
    # The label is the field with no name, not `id`.
    assert run(server, row_type, lines, out, "--id-field", "") == 0
    assert {row["label"]: row["value"] for row in rows_of(out)} == {
        "A-1": {"n": 4},
        "A-2": {"n": 5},
    }
    capsys.readouterr()
    # A source without one says so, rather than reading `text` or `id`.
    source.write_text("text,id\ndoc 1,x1\n")
    assert run(server, row_type, source, tmp_path / "none.jsonl", "--field", "") == 2
    assert capsys.readouterr().err == (
        f"allama batch run: {source}: no column `` (the columns are `text`, `id`); "
        "name the column with --field\n"
    )
    lines.write_text(json.dumps({"text": "doc 1", "id": "z1"}) + "\n")
    assert run(server, row_type, lines, tmp_path / "none.jsonl", "--id-field", "") == 2
    assert capsys.readouterr().err == (
        f"allama batch run: {lines} line 1: no field `` (its fields: `text`, `id`); "
        "name the id's field with --id-field\n"
    )


def test_a_bar_on_a_terminal_that_says_it_has_no_columns_is_drawn_at_a_sane_width(
    server: BatchServer, row_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pty not sized yet (`stty cols 0`, some CI runners and containers) says 0 columns.
    import fcntl
    import struct
    import termios

    main_end, terminal_end = os.openpty()
    try:
        fcntl.ioctl(terminal_end, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
        assert os.get_terminal_size(terminal_end).columns == 0

        class Unsized(_Terminal):
            def fileno(self) -> int:
                return terminal_end

        terminal = Unsized()
        monkeypatch.setattr("sys.stderr", terminal)
        monkeypatch.setenv("COLUMNS", "200")  # what shutil.get_terminal_size falls back to
        docs = folder(tmp_path, [1, 2])
        assert run(server, row_type, docs, tmp_path / "out.jsonl", "--concurrency", "1") == 0
    finally:
        os.close(main_end)
        os.close(terminal_end)
    last = terminal.getvalue().split("\r")[-1].split("\n")[0]
    assert last.startswith("[####################] 2/2: 2 done, 0 failed, 0 in flight, ")
    assert last.endswith(", ETA 0 s\x1b[K")


class _Full(io.StringIO):
    """Standard output on a full disk (`> /dev/full`)."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_status_and_export_to_a_stdout_that_cannot_be_written_fail_in_one_line(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stdout: str,
) -> None:
    docs = folder(tmp_path, [1, 2, 7])
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out) == 0
    capsys.readouterr()
    ledger = f"{out}.ledger.sqlite"
    monkeypatch.setattr(sys, "stdout", _Full() if stdout == "full" else None)
    why = "No space left on device" if stdout == "full" else "it is closed"
    for command in (["status"], ["status", "--json"], ["export"], ["export", "--failed"]):
        assert main(["batch", command[0], ledger, *command[1:]]) == 1
        assert capsys.readouterr().err == (
            f"allama batch {command[0]}: cannot write to stdout: {why}\n"
        )


def test_status_and_export_to_an_ascii_stdout_write_other_characters_as_escapes(
    server: BatchServer, row_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "naïve.txt").write_text("doc 3\n", encoding="utf-8")
    out, ledger = tmp_path / "out.jsonl", tmp_path / "lëdger.sqlite"
    assert run(server, row_type, docs, out, "--ledger", str(ledger)) == 0
    written = io.BytesIO()
    # `PYTHONIOENCODING=ascii`, or a terminal of another encoding.
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(written, "ascii", write_through=True))
    assert main(["batch", "export", str(ledger)]) == 0
    # The same JSON as the output file's, its other characters as JSON's escapes.
    assert [json.loads(line) for line in written.getvalue().splitlines()] == rows_of(out)
    assert b'"label": "na\\u00efve.txt"' in written.getvalue()
    written.seek(0)
    written.truncate()
    assert main(["batch", "status", str(ledger)]) == 0
    assert f"ledger: {tmp_path}/l\\xebdger.sqlite\n" in written.getvalue().decode("ascii")


def ledger_of(server: BatchServer, row_type: str, tmp_path: Path, numbers: list[int]) -> str:
    """The ledger a run over documents `numbers` fills, as `allama batch run` leaves it."""
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, folder(tmp_path, numbers), out) == 0
    return f"{out}.ledger.sqlite"


def test_an_export_stopped_midway_leaves_the_file_it_would_replace_whole(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import allama.cli._batch as command

    ledger = ledger_of(server, row_type, tmp_path, [1, 2, 4])
    exported = tmp_path / "values.jsonl"
    assert main(["batch", "export", ledger, "--out", str(exported)]) == 0
    before = exported.read_bytes()
    assert len(before.splitlines()) == 3
    made = command._export_row
    rows = iter(range(3))

    def stopped(*args: Any, **kwargs: Any) -> Any:
        if next(rows) == 1:
            raise KeyboardInterrupt  # Ctrl-C, after one row was written
        return made(*args, **kwargs)

    monkeypatch.setattr(command, "_export_row", stopped)
    assert main(["batch", "export", ledger, "--out", str(exported)]) == 130
    # Written as it is read, the file it would have replaced is as it was, and nothing of
    # the half written is left.
    assert exported.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.endswith(".part")) == []
    capsys.readouterr()


def test_an_export_keeps_what_its_out_is_a_link_a_mode_or_a_device(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = ledger_of(server, row_type, tmp_path, [1, 2])
    plain = tmp_path / "plain.jsonl"
    assert main(["batch", "export", ledger, "--out", str(plain)]) == 0
    # A link is written through, a private file stays private, a file's other name sees it.
    # (It holds an earlier export, of one value: a file of the caller's is not written over.)
    real = tmp_path / "real.jsonl"
    real.write_bytes(plain.read_bytes().splitlines(keepends=True)[0])
    real.chmod(0o600)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    other = tmp_path / "other-name.jsonl"
    other.hardlink_to(real)
    assert main(["batch", "export", ledger, "--out", str(link)]) == 0
    assert link.is_symlink() and stat.S_IMODE(real.stat().st_mode) == 0o600
    assert real.read_bytes() == other.read_bytes() == plain.read_bytes()
    capsys.readouterr()
    # A device is written as it is: no file's name is beside it.
    assert main(["batch", "export", ledger, "--out", os.devnull]) == 0
    assert capsys.readouterr().err == f"2 values written to {os.devnull}\n"
    # A loop of links is refused as opening it is, and stays.
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    assert main(["batch", "export", ledger, "--out", str(loop)]) == 1
    assert "cannot write" in capsys.readouterr().err and loop.is_symlink()


def test_an_export_over_another_owners_file_writes_it_in_place(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ledger = ledger_of(server, row_type, tmp_path, [1, 2])
    theirs = tmp_path / "theirs.jsonl"
    # An earlier export (of one value): a file of the caller's is not written over at all.
    assert main(["batch", "export", ledger, "--out", str(theirs)]) == 0
    theirs.write_text(theirs.read_text().splitlines(keepends=True)[0])
    inode = theirs.stat().st_ino
    # Renamed over, it would become this user's (and in a sticky folder, /tmp, the rename
    # is refused): written in place, it stays the file it was.
    monkeypatch.setattr(os, "geteuid", lambda: theirs.stat().st_uid + 1)
    assert main(["batch", "export", ledger, "--out", str(theirs)]) == 0
    assert theirs.stat().st_ino == inode and len(theirs.read_text().splitlines()) == 2
    capsys.readouterr()


def test_an_export_into_a_folder_it_may_not_add_to_writes_the_file_in_place(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import allama.cli._batch as command

    ledger = ledger_of(server, row_type, tmp_path, [1, 2])
    plain = tmp_path / "plain.jsonl"
    assert main(["batch", "export", ledger, "--out", str(plain)]) == 0
    opened = command._opened

    def no_new_names(path: Path, mode: int | None) -> Any:
        if path.name.endswith(".part"):  # as a folder without write permission refuses it
            raise PermissionError(13, "Permission denied", str(path))
        return opened(path, mode)

    monkeypatch.setattr(command, "_opened", no_new_names)
    writable = tmp_path / "writable.jsonl"
    writable.write_bytes(plain.read_bytes().splitlines(keepends=True)[0])  # an earlier export
    assert main(["batch", "export", ledger, "--out", str(writable)]) == 0
    assert writable.read_bytes() == plain.read_bytes()
    capsys.readouterr()


def test_an_export_ended_by_sigterm_leaves_no_part_of_a_file(
    server: BatchServer, row_type: str, tmp_path: Path
) -> None:
    ledger = ledger_of(server, row_type, tmp_path, list(range(1, 60)))
    script = tmp_path / "slow_export.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            import allama.cli._batch as command
            from allama.cli import main
            made = command._export_row

            def slow(*args, **kwargs):
                time.sleep(0.05)
                return made(*args, **kwargs)

            command._export_row = slow
            sys.exit(main(["batch", "export", {ledger!r}, "--out",
                           {str(tmp_path / "values.jsonl")!r}]))
            """
        )
    )
    exporting = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE)
    # Signalled once rows are being written (its part file is there), however long the
    # interpreter took to start on a loaded machine.
    deadline = time.monotonic() + 60
    while not any("values" in path.name for path in tmp_path.iterdir()):
        assert exporting.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    exporting.send_signal(signal.SIGTERM)
    assert exporting.wait(timeout=60) == 143
    assert sorted(path.name for path in tmp_path.iterdir() if "values" in path.name) == []


def test_a_full_stdout_is_said_without_a_traceback(
    server: BatchServer, row_type: str, tmp_path: Path
) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, folder(tmp_path, [1, 2]), out) == 0
    for command in ("status", "export"):
        # What is written is buffered: the write fails at the last flush, which the
        # interpreter would report with a traceback ("Exception ignored ...").
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-m", "allama.cli", "batch", command, f"{out}.ledger.sqlite"],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
            )
        assert (done.returncode, done.stderr) == (
            1,
            f"allama batch {command}: cannot write to stdout: No space left on device\n",
        ), done.stderr


def test_a_prompt_that_is_no_readable_text_file_and_links_in_a_loop_are_one_line(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    out = tmp_path / "o.jsonl"
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Lis le num\xe9ro.".encode("latin-1"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would wait for a writer that never comes
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    cases = [
        (
            latin,
            f"--prompt {latin} line 1: not UTF-8 text (byte 10 of the file cannot be decoded)",
        ),
        (tmp_path / "none.txt", f"no such --prompt: `{tmp_path / 'none.txt'}`"),
        (fifo, f"--prompt `{fifo}` is not a file"),
        (loop, f"cannot read --prompt `{loop}`: a loop of symbolic links"),
    ]
    for prompt, said in cases:
        assert run(server, row_type, docs, out, "--prompt", str(prompt)) == 2
        assert capsys.readouterr().err == f"allama batch run: {said}\n"
    assert run(server, row_type, docs, out, "--ledger", str(loop)) == 2
    assert capsys.readouterr().err == (
        f"allama batch run: --ledger `{loop}`: a loop of symbolic links\n"
    )
    assert sum(server.sent.values()) == 0
    # An output that is such a loop is written in its place, as any link named by --out.
    assert run(server, row_type, docs, loop) == 0
    assert not loop.is_symlink() and [row["value"] for row in rows_of(loop)] == [{"n": 1}]


def test_status_and_export_read_the_ledger_at_one_moment_while_runs_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Runs of one set of settings keep starting, each finishing one input: a status or an
    # export read at two moments saw inputs of a run it did not know, as a second set.
    path = tmp_path / "one set.sqlite"
    settings = {"provider": "openai", "model": "gpt-4o-mini", "type": "Row", "inputs": "abc"}
    Ledger(path, settings=settings).close()
    stop = threading.Event()

    def runs() -> None:
        for position in itertools.count():
            if stop.is_set():
                return
            ledger = Ledger(path, settings=settings)
            key = f"{position:064x}"
            ledger.claim(key, position, f"doc {position}")
            ledger.finish(key, status="done", seconds=0.1, value='{"n": 1}')
            ledger.end(None)
            ledger.close()

    writer = threading.Thread(target=runs, daemon=True)
    writer.start()
    try:
        began = time.monotonic()
        while time.monotonic() - began < 3.0:
            assert main(["batch", "export", str(path), "--out", str(tmp_path / "v.jsonl")]) == 0
            assert main(["batch", "status", str(path), "--json", "--no-poll"]) == 0
            report = json.loads(capsys.readouterr().out)
            assert report["sets"] == [] and "dead" not in str(report["in_flight"])
    finally:
        stop.set()
        writer.join()


def test_an_export_whose_reader_goes_away_ends_as_sigpipe_would(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `allama batch export LEDGER | head -3`: more than a pipe holds, read a little of.
    out = tmp_path / "out.jsonl"
    numbers = [n for n in range(300) if n % 10 != 7 and n not in (13, 23)]
    assert run(server, row_type, folder(tmp_path, numbers), out, "--concurrency", "16") == 0
    capsys.readouterr()
    read, write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "allama.cli", "batch", "export", f"{out}.ledger.sqlite"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    with os.fdopen(read, "rb") as reader:
        assert reader.read(100)
    _, said = process.communicate(timeout=120)
    # Not "N values written to stdout", status 0: the reader took three lines, not all.
    assert (process.returncode, said) == (128 + signal.SIGPIPE, "")


def test_a_closed_stderr_writes_nothing_into_the_output(tmp_path: Path) -> None:
    # `allama batch export LEDGER 2>&-`: what it says is lost, not added to the rows.
    done = subprocess.run(
        [sys.executable, "-m", "allama.cli", "batch", "export", str(tmp_path / "none.sqlite")],
        stdout=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(2),
    )
    assert (done.returncode, done.stdout) == (2, "")


def test_a_hangup_the_process_was_started_ignoring_stays_ignored(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `nohup allama batch run ...`: the terminal closing does not stop the run.
    server.delay = 0.05
    docs = folder(tmp_path, [1, 2, 4, 5, 6, 8])
    out = tmp_path / "out.jsonl"
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        interrupt_after_two_sends(server, signal.SIGHUP)
        assert run(server, row_type, docs, out, "--concurrency", "2") == 0
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert sorted(server.sent.values()) == [1] * 6 and len(rows_of(out)) == 6


def test_an_output_folder_removed_during_the_run_is_said_in_one_line(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.delay = 0.05
    docs = folder(tmp_path, [1, 2, 4, 5])
    gone = tmp_path / "gone"
    gone.mkdir()
    ledger = tmp_path / "run.sqlite"

    after_two_sends(server, lambda: shutil.rmtree(gone))
    code = run(server, row_type, docs, gone / "out.jsonl", "--ledger", str(ledger))
    said = capsys.readouterr().err
    assert code == 1 and "Traceback" not in said
    assert f"allama batch run: cannot write `{gone / 'out.jsonl'}`: No such file" in said
    assert f"allama batch run: its values are in the ledger: `allama batch export {ledger}`" in said
    reader = Ledger(ledger)
    assert reader.counts() == {"done": 4}
    reader.close()


def test_a_part_file_renamed_by_a_run_ending_as_this_one_opens_it_is_made_anew(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Another run on the same --out ends between this one's opening its `.part` and locking
    # it: it renames that file to the output. This run writes a `.part` of its own.
    from allama.cli import _batch

    out = tmp_path / "out.jsonl"
    part = tmp_path / "out.jsonl.part"
    part.write_text('{"the other run": 1}\n')
    lock = _batch._lock
    ended = []

    def other_run_ends_first(output: Any) -> bool:
        if not ended:
            ended.append(part.rename(out))
        return lock(output)

    monkeypatch.setattr(_batch, "_lock", other_run_ends_first)
    assert run(server, row_type, folder(tmp_path, [1, 2]), out) == 0
    assert sorted(row["value"]["n"] for row in rows_of(out)) == [1, 2]
    assert not part.exists()


def test_sigterm_before_the_run_begins_ends_the_command_sending_nothing(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A container's first process has no default action for SIGTERM: the command's own ends
    # it, as Ctrl-C would, while it prepares. Its `.part` is removed while still locked, so
    # that a run starting meanwhile on the same --out never loses a file of its own.
    import fcntl

    from allama.cli import _batch

    def terminated(provider: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)

    locked = []
    unlink = Path.unlink

    def unlink_part(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith(".part"):
            with self.open("a") as other:
                try:
                    fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    locked.append(True)
                else:
                    locked.append(False)
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(_batch, "_start_local", terminated)
    monkeypatch.setattr(Path, "unlink", unlink_part)
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, folder(tmp_path, [1, 2]), out) == 128 + signal.SIGTERM
    assert capsys.readouterr().err.endswith(
        "allama batch run: terminated (SIGTERM) before the run began: nothing was sent\n"
    )
    assert locked == [True] and not (tmp_path / "out.jsonl.part").exists()
    assert sum(server.sent.values()) == 0
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_budget_whose_answers_have_no_price_sends_one_request_not_one_a_slot(
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A model genai-prices has no price for goes one input at a time until an answer says
    what it cost: here, that it is unknown, after one request, not one in each of the 8
    slots, each paid for past a budget it cannot keep."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    unpriced = BatchServer(model="a-model-of-our-own").start()  # answers as an unpriced model
    try:
        docs = folder(tmp_path, list(range(1, 11)))
        command = ["batch", "run", str(docs), "--type", row_type, "--provider", "openai"]
        command += ["--base-url", unpriced.url, "--model", "a-model-of-our-own"]
        command += ["--out", str(tmp_path / "out.jsonl"), "--max-cost", "1", "--concurrency", "8"]
        assert main(command) == 3
        assert sum(unpriced.sent.values()) == 1
    finally:
        unpriced.stop()
    assert (
        "stopped starting new inputs: the cost of doc-01.txt is unknown (genai-prices "
        f"{PRICES} has no price for 'a-model-of-our-own' at openai): the budget of $1 cannot "
        "be kept"
    ) in capsys.readouterr().err.splitlines()


def test_a_budget_is_refused_with_a_local_model_before_it_starts(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model run locally has no price, whatever its answer: the budget is a bad argument,
    said before the engine starts (the run would send one document, then stop, run after
    run)."""
    docs = folder(tmp_path, [1, 2])
    base = ["batch", "run", str(docs), "--type", row_type, "--out", str(tmp_path / "o.jsonl")]
    assert main([*base, "--provider", "local", "--max-cost", "0.01"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --max-cost cannot be kept with --provider local: no price for a "
        "model run locally (local)\n"
    )
    served = ["--base-url", server.url, "--model", "m", "--max-cost", "1"]
    assert main([*base, "--provider", "vllm", *served]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --max-cost cannot be kept with --provider vllm: no price for a "
        "model run locally (vllm)\n"
    )
    assert sum(server.sent.values()) == 0 and not (tmp_path / "o.jsonl").exists()


def test_a_budget_is_refused_without_genai_prices_before_anything_is_sent(
    server: BatchServer,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without genai-prices (a core install) no answer of OpenAI's has a price: the run
    sent one document, paid for it and stopped (exit 3), the rest never started."""
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # `import genai_prices` fails
    docs = folder(tmp_path, [1, 2, 3])
    command = ["batch", "run", str(docs), "--type", row_type, "--out", str(tmp_path / "o.jsonl")]
    command += ["--provider", "openai", "--base-url", server.url, "--model", "gpt-4o-mini"]
    assert main([*command, "--max-cost", "1.00"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --max-cost cannot be kept with --provider openai: no price for "
        "openai's answers without the genai-prices package: pip install 'allama[prices]'\n"
    )
    assert sum(server.sent.values()) == 0 and not (tmp_path / "o.jsonl").exists()


def test_a_local_model_that_is_no_gguf_file_says_what_it_is(
    row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    base = ["batch", "run", str(docs), "--type", row_type, "--out", str(tmp_path / "o.jsonl")]
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    models = tmp_path / "models.gguf"
    models.mkdir()
    said = "allama batch run: --model with --provider local is a .gguf model file, or `smollm2`"
    for model, why in [
        (notes, f"`{notes}` is not a .gguf file"),
        (models, f"`{models}` is a folder"),
        (tmp_path / "nope.gguf", f"no such file `{tmp_path / 'nope.gguf'}`"),
    ]:
        assert main([*base, "--provider", "local", "--model", str(model)]) == 2
        assert capsys.readouterr().err == f"{said} (the default): {why}\n"
    assert notes.read_text() == "precious\n"


def test_an_export_does_not_write_over_a_file_that_is_no_output_of_the_command(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `run` refuses such an --out: the caller's notes, the run's own input."""
    ledger = ledger_of(server, row_type, tmp_path, [1, 2, 7])
    capsys.readouterr()
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    table = tmp_path / "in.csv"
    table.write_text("id,text\n1,doc 1\n")
    for theirs in (notes, table):
        before = theirs.read_bytes()
        assert main(["batch", "export", ledger, "--out", str(theirs)]) == 2
        assert capsys.readouterr().err == (
            f"allama batch export: --out `{theirs}` is there and is no output of this command: "
            "the export would replace it; name another file, or move this one away first\n"
        )
        assert theirs.read_bytes() == before
    # An empty file, an earlier export (of values, of failures) are written anew.
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    failures = tmp_path / "failures.jsonl"
    for args in (["--out", str(empty)], ["--failed", "--out", str(failures)]):
        assert main(["batch", "export", ledger, *args]) == 0
        first = Path(args[-1]).read_bytes()
        assert main(["batch", "export", ledger, *args]) == 0
        assert Path(args[-1]).read_bytes() == first and first.count(b"\n") == 2 - (
            "--failed" in args
        )
    capsys.readouterr()
    # And a run's --out may be an earlier export of failures.
    (tmp_path / "more").mkdir()
    assert run(server, row_type, folder(tmp_path / "more", [3]), failures) == 0
    assert [row["label"] for row in rows_of(failures)] == ["doc-03.txt"]


def test_a_folder_says_which_of_its_files_it_does_not_read(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1, 2])
    prompt = docs / "prompt.txt"
    prompt.write_text("Read the number.\n")
    out = tmp_path / "out.jsonl"
    assert run(server, row_type, docs, out, "--prompt", str(prompt)) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == [
        f"2 documents from {docs} (folder) to Row with openai gpt-4o-mini, concurrency 8",
        "note: prompt.txt is the --prompt: left out of the folder's documents",
    ]
    # A folder whose documents are all in its subfolders, or whose one text file is the
    # prompt: said so, not only that it has none.
    nested = tmp_path / "nested"
    (nested / "2024").mkdir(parents=True)
    (nested / "2024" / "doc-01.txt").write_text("doc 1\n")
    assert run(server, row_type, nested, out) == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {nested}: no *.txt or *.md files in this folder (its subfolders "
        "are not read)\n"
    )
    (nested / "prompt.md").write_text("Read the number.\n")
    assert run(server, row_type, nested, out, "--prompt", str(nested / "prompt.md")) == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {nested}: no *.txt or *.md files in this folder (prompt.md is the "
        "run's own output or prompt; its subfolders are not read)\n"
    )


def test_a_retry_route_without_provider_batch_is_refused(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `live` or `batch` says how a job's failed rows are sent again: without jobs, the
    # failures would go again as ordinary calls, at full price, which no one asked for.
    docs = folder(tmp_path, [1, 7])
    out = tmp_path / "out.jsonl"
    alone = " (--retry-failed alone sends the failures again as the run's own calls)\n"
    for route in ("live", "batch"):
        assert run(server, row_type, docs, out, "--retry-failed", route) == 2
        assert capsys.readouterr() == (
            "",
            f"allama batch run: --retry-failed {route} is for runs with --provider-batch" + alone,
        )
    assert run(server, row_type, docs, out, "--job-size", "5", "--retry-failed=live") == 2
    assert capsys.readouterr().err == (
        "allama batch run: --job-size and --retry-failed live are for runs with "
        "--provider-batch" + alone
    )
    assert not server.sent and not out.exists()
    # The plain form sends the failures of earlier runs again, as it did.
    assert run(server, row_type, docs, out) == 0
    assert run(server, row_type, docs, out, "--retry-failed") == 0
    assert sorted(server.sent.items()) == [(1, 1), (7, 2)]


def test_a_hosted_model_without_a_provider_says_local_was_taken(
    row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path, [1])
    base = ["batch", "run", str(docs), "--type", row_type, "--out", str(tmp_path / "o.jsonl")]
    local = (
        "allama batch run: no --provider was given, so the run is --provider local's, whose "
        "--model is a .gguf model file, or `smollm2` (the default): "
    )
    assert main([*base, "--model", "gpt-4o-mini"]) == 2
    assert capsys.readouterr() == (
        "",
        f"{local}no such file `gpt-4o-mini`; for a hosted model, name its provider "
        "(`--provider openai`, say)\n",
    )
    # A model file's path, or a file that is there, is no hosted model's name.
    nope = tmp_path / "nope.gguf"
    assert main([*base, "--model", str(nope)]) == 2
    assert capsys.readouterr().err == f"{local}no such file `{nope}`\n"
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    assert main([*base, "--model", str(notes)]) == 2
    assert capsys.readouterr().err == f"{local}`{notes}` is not a .gguf file\n"
    # --provider local named: no provider was left out.
    assert main([*base, "--provider", "local", "--model", "gpt-4o-mini"]) == 2
    assert capsys.readouterr().err == (
        "allama batch run: --model with --provider local is a .gguf model file, or `smollm2` "
        "(the default): no such file `gpt-4o-mini`\n"
    )


def test_a_failure_before_any_pass_is_exported_without_an_enforcement(
    server: BatchServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 13 is refused with a 400, answered by no pass: no schema was enforced or not, and a
    # `not_enforced` there would be counted with the answers' enforcement.
    ledger = ledger_of(server, row_type, tmp_path, [1, 7, 13])
    summary = summary_of(capsys.readouterr().err)
    assert summary[1:3] == ["1 done, 2 failed, in T s", "enforcement: exact 1"]
    assert main(["batch", "export", ledger, "--failed"]) == 0
    failures = by_label([json.loads(line) for line in capsys.readouterr().out.splitlines()])
    assert failures["doc-13.txt"]["record"] == {"mode": "native", "passes": 0, "repaired": False}
    # One answered (7's, whose answer was no JSON) keeps it.
    assert without_source(failures["doc-07.txt"])["record"] == record()


def test_status_json_shows_no_schema_a_run_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Runs kept their type's schema whole in their settings, which the report printed for
    # each: 3.3 MB for 5 runs of a type of 20,000 choices. The ledger keeps it once, apart.
    import warnings
    from typing import Literal

    from pydantic import Field, create_model

    import allama
    from allama import ChatRequest
    from allama.mock import MockProvider

    ledger = tmp_path / "l.db"
    codes = tuple(f"code-{n:05d}" for n in range(2_000))

    def run_once(description: str) -> None:
        tp = create_model("Product", code=(Literal[codes], Field(description=description)))
        provider = MockProvider([json.dumps({"code": codes[0]})])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            list(allama.batch(provider, tp, [description], request=ChatRequest("m"), ledger=ledger))

    run_once("first")
    # As a version that kept the schema in the run's settings left it: no table of them.
    with sqlite3.connect(ledger) as db:
        (text,) = db.execute("SELECT settings FROM runs").fetchone()
        db.execute(
            "UPDATE runs SET settings = ?", (json.dumps({**json.loads(text), "schema": "{}"}),)
        )
        db.execute("DROP TABLE schemas")
    for _ in range(2):
        assert main(["batch", "status", str(ledger), "--json"]) == 0
        out = capsys.readouterr().out
        report = json.loads(out)
        assert ["schema" in run["settings"] for run in report["runs"]] == [False] * len(
            report["runs"]
        )
        assert all(len(run["settings"]["types"]) == 12 for run in report["runs"])
        assert len(out) < 8_000
        run_once("second")
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT COUNT(*) FROM schemas").fetchone() == (1,)
