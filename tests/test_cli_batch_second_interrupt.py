"""`allama batch run` stopped by a second Ctrl-C while results wait for the command or while
it writes one: each result counted once and written whole. And the words of `status` for
a run whose requests a function built, of the ledger's line for one document, and of JSONL
lines that begin with a byte-order mark or end in a bare CR."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from _batch_server import _completion
from _replay_server import ReplyHandler
from allama.cli import main
from test_cli_batch import folder, row_type, rows_of, run, summary_of

__all__ = ["row_type"]  # the fixture, used by name


class HoldingServer(ThreadingHTTPServer):
    """Answers `doc <n>` with `{"n": n}` at once, but the documents in `held`: those wait
    until `release` is set (at the test's end), so that they are in flight for as long as
    the test wants."""

    daemon_threads = True

    def __init__(self, held: set[int]) -> None:
        super().__init__(("127.0.0.1", 0), _Holding)
        self.held = held
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.sent: Counter[int] = Counter()
        self.holding = 0
        """Requests waiting for `release` now."""

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that hung up on a held request (the run abandoned it)


class _Holding(ReplyHandler):
    server: HoldingServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        text = " ".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
        found = re.search(r"doc (\d+)", text)
        n = int(found.group(1)) if found else -1
        server = self.server
        with server.lock:
            server.sent[n] += 1
        if n in server.held and not server.release.is_set():
            with server.lock:
                server.holding += 1
            server.release.wait(30)
            with server.lock:
                server.holding -= 1
        self.send_json(200, _completion("gpt-4o-mini", json.dumps({"n": n})))


@pytest.fixture
def holding(monkeypatch: pytest.MonkeyPatch) -> Iterator[HoldingServer]:
    """Documents 3 to 9 held, 0 to 2 answered at once."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = HoldingServer(held=set(range(3, 10)))
    threading.Thread(target=served.serve_forever, args=(0.05,), daemon=True).start()
    yield served
    served.release.set()
    served.shutdown()
    served.server_close()


def until(condition: Callable[[], bool]) -> None:
    """Wait for a state the run reaches (not a time): the test fails if it never does."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the run never got there"
        time.sleep(0.005)


def ledger_counts(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    try:
        return dict(db.execute("SELECT status, COUNT(*) FROM items GROUP BY status").fetchall())
    finally:
        db.close()


@pytest.mark.parametrize("where", ["value", "row"])
def test_a_second_ctrl_c_counts_each_result_once_and_writes_each_whole(
    holding: HoldingServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """Both Ctrl-Cs come while the command takes its first result (`value`: as it makes the
    row's value; `row`: once the row is written), the other two finished and waiting for
    it, four in flight (held by the server). The results the run counted are written and
    counted once, not again as values of the ledger for documents not reached; those in
    flight are left unfinished; the output holds every value the ledger does, and says
    how many."""
    import allama
    import allama.cli._batch as command
    from allama.batch import _run as runner

    made: list[Any] = []
    make = allama.batch

    def batch(*args: Any, **kwargs: Any) -> Any:
        made.append(make(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(allama, "batch", batch)

    def two_ctrl_cs() -> None:
        (the_run,) = made
        summary = the_run.summary
        until(lambda: summary.done == 3 and holding.holding == 4)
        signal.raise_signal(signal.SIGINT)  # no input starts
        signal.raise_signal(signal.SIGINT)  # those in flight are abandoned

    calls = 0

    def at_the_first(original: Callable[..., Any], before: bool) -> Callable[..., Any]:
        def hooked(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1 and before:
                two_ctrl_cs()
            done = original(*args)
            if calls == 1 and not before:
                two_ctrl_cs()
            return done

        return hooked

    if where == "value":
        monkeypatch.setattr(runner, "stored_python", at_the_first(runner.stored_python, True))
    else:
        monkeypatch.setattr(command, "_write_row", at_the_first(command._write_row, False))
    docs = folder(tmp_path, list(range(7)))
    out = tmp_path / "out.jsonl"
    status = run(holding, row_type, docs, out, "--concurrency", "4", "--no-progress")
    summary = summary_of(capsys.readouterr().err)
    # The output holds the values the ledger does, as many as it says; each counted once.
    assert {
        "status": status,
        "output rows": sorted(row["value"]["n"] for row in rows_of(out)),
        "ledger": ledger_counts(tmp_path / "out.jsonl.ledger.sqlite"),
        "summary": summary[1:5] + summary[7:],
    } == {
        "status": 130,
        "output rows": [0, 1, 2],
        "ledger": {"done": 3, "pending": 4},
        "summary": [
            "3 done, 0 failed, 4 left unfinished (4 with a call under way, which may be paid "
            "for, at a cost not counted here), in T s",
            "enforcement: exact 3",
            "passes 3, attempts 3, tokens 300 in / 30 out",
            "cost $0.000063",
            "stopped starting new inputs: interrupted (Ctrl-C)",
            "not finished: 4 (pending: the same command takes them up)",
            f"output: {out} (3 values)",
            f"ledger: {out}.ledger.sqlite",
        ],
    }
    slowest = re.findall(r"doc-\d\d\.txt", summary[5])
    assert summary[5].startswith("slowest: ") and sorted(slowest) == [
        "doc-00.txt",
        "doc-01.txt",
        "doc-02.txt",
    ]
    # Run again: the rest is sent, those finished are not.
    holding.release.set()
    assert run(holding, row_type, docs, out, "--no-progress") == 0
    assert sorted(row["value"]["n"] for row in rows_of(out)) == list(range(7))
    assert [holding.sent[n] for n in range(3)] == [1, 1, 1]
    assert summary_of(capsys.readouterr().err)[2] == (
        "7 done, 0 failed (3 finished by an earlier run), in T s"
    )


def test_status_names_the_model_of_a_run_whose_requests_a_function_built(
    holding: HoldingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import allama

    holding.release.set()
    ledger = tmp_path / "run.sqlite"
    provider = allama.provider("openai", base_url=holding.url)
    template = allama.ChatRequest("gpt-4o-mini").system("Read the number.")
    built = allama.batch(provider, dict, ["doc 1"], request=template.user, ledger=ledger)
    assert [result.ok for result in built] == [True]
    given = allama.batch(provider, dict, ["doc 2"], request=template, ledger=ledger)
    assert [result.ok for result in given] == [True]
    capsys.readouterr()
    assert main(["batch", "status", str(ledger)]) == 0
    lines = capsys.readouterr().out.splitlines()
    sets = [line.split(" [inputs ")[0] for line in lines if line.startswith("  set ")]
    assert sets == [
        "  set 1: openai (model set by the request function), dict",
        "  set 2: openai gpt-4o-mini, dict",
    ]
    runs = [re.sub(r"^  (\d)\. .* UTC  ", r"\1. ", line) for line in lines if " UTC " in line]
    assert [line.split(": finished after ")[0] for line in runs] == [
        "1. set 1, openai (model set by the request function), dict",
        "2. set 2, openai gpt-4o-mini, dict",
    ]


def test_the_ledgers_line_for_one_document_and_one_other(
    holding: HoldingServer, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holding.release.set()

    def documents(name: str, numbers: list[int]) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps({"text": f"doc {n}"}) + "\n" for n in numbers))
        return path

    ledger = ["--ledger", str(tmp_path / "shared.sqlite"), "--no-progress"]
    out = tmp_path / "out.jsonl"
    assert run(holding, row_type, documents("a.jsonl", [1]), out, *ledger) == 0
    assert run(holding, row_type, documents("b.jsonl", [2]), out, *ledger) == 0
    said = capsys.readouterr().err.splitlines()
    assert "ledger: the document is not in it; it holds 1 other" in said
    assert run(holding, row_type, documents("c.jsonl", [3]), out, *ledger) == 0
    assert run(holding, row_type, documents("d.jsonl", [3]), out, *ledger) == 0
    said = capsys.readouterr().err.splitlines()
    assert "ledger: the document is not in it; it holds 2 others" in said
    assert "ledger: the document is in it (1 done, 0 failed), 0 to send" in said
    # Of other settings (another prompt): the input it holds was extracted so, and stays.
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Read the number.", encoding="utf-8")
    alone = ["--ledger", str(tmp_path / "alone.sqlite"), "--no-progress"]
    assert run(holding, row_type, documents("e.jsonl", [1]), out, *alone) == 0
    capsys.readouterr()
    assert (
        run(holding, row_type, documents("e.jsonl", [1]), out, *alone, "--prompt", str(prompt)) == 0
    )
    assert (
        "ledger: the document is not in it; its 1 input was extracted with other settings "
        "(type, prompt, model or provider), and stays"
    ) in capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            # Two files joined with `cat`, each with its byte-order mark.
            b'\xef\xbb\xbf{"text": "doc 1"}\n\xef\xbb\xbf{"text": "doc 2"}\n',
            "line 2: a byte-order mark at the start of the line (files joined?): remove it",
        ),
        (
            b'{"text": "doc 1"}\r{"text": "doc 2"}\r',
            "line 1: its lines end in a bare CR (classic Mac): save it with LF line endings",
        ),
    ],
    ids=["bom-within", "bare-cr"],
)
def test_a_jsonl_line_of_joined_files_or_of_bare_cr_endings_is_said_so(
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    data: bytes,
    said: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    source = tmp_path / "in.jsonl"
    source.write_bytes(data)
    command = ["batch", "run", str(source), "--type", row_type, "--provider", "openai"]
    command += ["--base-url", "http://127.0.0.1:9/v1", "--model", "gpt-4o-mini"]
    assert main([*command, "--out", str(tmp_path / "out.jsonl")]) == 1
    assert capsys.readouterr().err == f"allama batch run: {source} {said}\n"


def stopped_at_the_first_row(
    holding: HoldingServer, monkeypatch: pytest.MonkeyPatch, made: list[Any]
) -> None:
    """The first Ctrl-C comes as the command writes its first row, documents 0 to 2
    finished and 3 to 6 in flight (held by the server, then let go: they finish)."""
    import allama
    import allama.cli._batch as command

    make = allama.batch

    def batch(*args: Any, **kwargs: Any) -> Any:
        made.append(make(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(allama, "batch", batch)
    write_row = command._write_row
    rows = 0

    def first_row(*args: Any) -> Any:
        nonlocal rows
        rows += 1
        if rows == 1:
            summary = made[0].summary
            until(lambda: summary.done == 3 and holding.holding == 4)
            signal.raise_signal(signal.SIGINT)  # no input starts
            holding.release.set()  # those in flight finish
        return write_row(*args)

    monkeypatch.setattr(command, "_write_row", first_row)


def with_a_copy(tmp_path: Path) -> Path:
    """Documents 0 to 29, and `doc-99.txt`, a copy of document 0 past what a run stopped
    at its start reads."""
    docs = folder(tmp_path, list(range(30)))
    (docs / "doc-99.txt").write_text("doc 0\n", encoding="utf-8")
    return docs


def test_a_second_ctrl_c_cuts_short_the_writing_of_what_the_ledger_holds(
    holding: HoldingServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """After a stop, the command writes what the ledger holds of the inputs the run did not
    reach (seconds for a large input, which it reads again): a second Ctrl-C then ends it
    (it was only taken for the exit status), the output it would replace left as it was."""
    import allama.cli._batch as command

    made: list[Any] = []
    stopped_at_the_first_row(holding, monkeypatch, made)
    kept_value_line = command._kept_value_line

    def second(*args: Any) -> Any:
        signal.raise_signal(signal.SIGINT)  # as the copy's row is made
        return kept_value_line(*args)

    monkeypatch.setattr(command, "_kept_value_line", second)
    out = tmp_path / "out.jsonl"
    part = tmp_path / "out.jsonl.part"
    status = run(holding, row_type, with_a_copy(tmp_path), out, "--concurrency", "4")
    assert status == 130
    assert capsys.readouterr().err.splitlines()[-3:] == [
        f"ledger: {out}.ledger.sqlite",
        "allama batch run: the run stopped: KeyboardInterrupt: interrupted while writing the "
        "ledger's values",
        f"allama batch run: `{out}` is left as it was; this run's 7 values are in `{part}`",
    ]
    assert not out.exists()
    assert sorted(row["label"] for row in rows_of(part)) == [f"doc-0{n}.txt" for n in range(7)]


def test_a_stopped_run_of_a_ledger_of_its_own_looks_up_only_copies_of_what_it_reached(
    holding: HoldingServer,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The ledger holds only what the run reached: of the documents it did not reach, only
    a copy of one of those (the same text) can be in it; the rest are read, not keyed
    (keying took twice as long as reading, 30 s for 1.5 million lines). The copy's value
    is written."""
    import allama.cli._batch as command

    made: list[Any] = []
    stopped_at_the_first_row(holding, monkeypatch, made)
    looked_up: list[str] = []
    look_up = command._looked_up

    def looking(*args: Any) -> Any:
        for found in look_up(*args):
            looked_up.append(found[1].label)
            yield found

    monkeypatch.setattr(command, "_looked_up", looking)
    out = tmp_path / "out.jsonl"
    status = run(holding, row_type, with_a_copy(tmp_path), out, "--concurrency", "4")
    assert status == 130
    assert looked_up == ["doc-99.txt"]
    rows = {row["label"]: row for row in rows_of(out)}
    assert sorted(rows) == [*(f"doc-0{n}.txt" for n in range(7)), "doc-99.txt"]
    assert (rows["doc-99.txt"]["value"], rows["doc-99.txt"]["duplicate"]) == ({"n": 0}, True)
    assert rows["doc-99.txt"]["key"] == rows["doc-00.txt"]["key"]
    err = capsys.readouterr().err
    assert f"output: {out} (8 values, 1 of them from the ledger for documents not reached)" in err
