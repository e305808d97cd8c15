"""Where `allama batch run` and `export` write: an `--out` that is no output of the command,
standard output named as a file (`/dev/stdout`) closed, a pipe or gone, a folder; and the
messages of a missing subcommand and of an API a preset does not speak."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import allama
from _batch_server import BatchServer
from allama.batch import Ledger
from allama.cli import main

ROOT = Path(__file__).resolve().parent.parent
INVOICE = f"{ROOT / 'examples' / 'invoice.py'}:Invoice"
ROW_TYPE = "from pydantic import BaseModel\n\n\nclass Row(BaseModel):\n    n: int\n"
COMMAND = [sys.executable, "-m", "allama.cli"]
"""The command, run as a process of its own: its standard output is the test's to set."""

needs_dev_stdout = pytest.mark.skipif(
    not os.path.exists("/dev/stdout"), reason="no /dev/stdout here"
)


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[BatchServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = BatchServer().start()
    yield served
    served.stop()


@pytest.fixture
def row_type(tmp_path: Path) -> str:
    module = tmp_path / "row.py"
    module.write_text(ROW_TYPE, encoding="utf-8")
    return f"{module}:Row"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "text": "doc 1"}\n{"id": "b", "text": "doc 2"}\n')
    return path


def run_args(chat: BatchServer, row_type: str, source: Path, out: str) -> list[str]:
    return [
        *("batch", "run", str(source), "--type", row_type, "--provider", "openai"),
        *("--base-url", chat.url, "--model", "gpt-4o-mini", "--no-progress", "--out", out),
    ]


def values_of(path: Path) -> list[Any]:
    return [json.loads(line)["value"] for line in path.read_text().splitlines()]


def test_an_out_that_is_no_output_of_the_command_is_refused_not_replaced(
    chat: BatchServer,
    row_type: str,
    source: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Another corpus, one tab-completion away: not replaced by the run's values.
    other = tmp_path / "corpus2.jsonl"
    other.write_text('{"id": "x", "text": "my other corpus"}\n')
    assert main(run_args(chat, row_type, source, str(other))) == 2
    assert capsys.readouterr().err == (
        f"allama batch run: --out `{other}` is there and is no output of this command: the "
        "run would replace it; name another file, or move this one away first\n"
    )
    assert other.read_text() == '{"id": "x", "text": "my other corpus"}\n'
    assert not chat.sent and not Path(f"{other}.ledger.sqlite").exists()
    # Through a link, the file it leads to is looked at.
    link = tmp_path / "link.jsonl"
    link.symlink_to(other)
    assert main(run_args(chat, row_type, source, str(link))) == 2
    assert "is there and is no output of this command" in capsys.readouterr().err
    assert other.read_text() == '{"id": "x", "text": "my other corpus"}\n'
    # An earlier output of the command is written anew (the same command run again), as
    # is an empty file and a file of values `batch export` wrote.
    out, empty, exported = tmp_path / "out.jsonl", tmp_path / "empty.jsonl", tmp_path / "e.jsonl"
    empty.write_text("")
    for _ in range(2):
        assert main(run_args(chat, row_type, source, str(out))) == 0
        assert sorted(value["n"] for value in values_of(out)) == [1, 2]
    assert main(["batch", "export", f"{out}.ledger.sqlite", "--out", str(exported)]) == 0
    for written in (empty, exported):
        assert main(run_args(chat, row_type, source, str(written))) == 0
        assert sorted(value["n"] for value in values_of(written)) == [1, 2]
    assert sum(chat.sent.values()) == 6  # each run of its own ledger sent both


def test_an_export_to_a_folder_is_a_bad_argument(
    chat: BatchServer,
    row_type: str,
    source: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out.jsonl"
    assert main(run_args(chat, row_type, source, str(out))) == 0
    capsys.readouterr()
    folder = tmp_path / "results"
    folder.mkdir()
    assert main(["batch", "export", f"{out}.ledger.sqlite", "--out", str(folder)]) == 2
    assert capsys.readouterr().err == (
        f"allama batch export: --out names a folder: `{folder}`; name the file to write\n"
    )
    assert list(folder.iterdir()) == []


@needs_dev_stdout
def test_stdout_named_as_a_file_when_it_was_closed_is_said_closed(
    chat: BatchServer, row_type: str, source: Path, tmp_path: Path
) -> None:
    # `allama batch export LEDGER --out /dev/stdout >&-`: descriptor 1 is no file, or the
    # ledger's own by the time the export opens it; said as `--out -` says it.
    out = tmp_path / "out.jsonl"
    assert main(run_args(chat, row_type, source, str(out))) == 0
    ledger = f"{out}.ledger.sqlite"
    for named in ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
        done = subprocess.run(
            [*COMMAND, "batch", "export", ledger, "--out", named],
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            preexec_fn=lambda: os.close(1),
        )
        assert (done.returncode, done.stderr) == (
            1,
            "allama batch export: cannot write to stdout: it is closed\n",
        ), named
    sent = sum(chat.sent.values())
    done = subprocess.run(
        [*COMMAND, *run_args(chat, row_type, source, "/dev/stdout")],
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),
    )
    assert (done.returncode, done.stderr) == (
        1,
        "allama batch run: cannot write to stdout: it is closed\n",
    )
    assert sum(chat.sent.values()) == sent


@needs_dev_stdout
def test_a_run_writing_dev_stdout_into_a_pipe_is_refused_as_no_regular_file(
    chat: BatchServer, row_type: str, source: Path
) -> None:
    # `allama batch run ... --out /dev/stdout | cat`: its link leads to `pipe:[N]`, no file
    # to write beside and rename into place.
    done = subprocess.run(
        [*COMMAND, *run_args(chat, row_type, source, "/dev/stdout")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "allama batch run: --out `/dev/stdout` is no regular file (a device, a pipe or a "
        "socket): the run writes its output beside it and renames it into place; name a "
        "JSONL file\n",
    )
    assert not chat.sent


@needs_dev_stdout
def test_an_export_to_dev_stdout_whose_reader_goes_away_ends_as_sigpipe_would(
    tmp_path: Path,
) -> None:
    # `allama batch export LEDGER --out /dev/stdout | head -1`: as `--out -` ends, 141 and
    # nothing said, rather than "cannot write `/dev/stdout`: Broken pipe", status 1.
    path = tmp_path / "ledger.sqlite"
    settings = {"provider": "openai", "model": "gpt-4o-mini", "type": "Row", "inputs": "abc"}
    ledger = Ledger(path, settings=settings)
    for position in range(2000):  # more than a pipe holds
        key = f"{position:064x}"
        ledger.claim(key, position, f"doc {position}")
        ledger.finish(key, status="done", seconds=0.1, value=json.dumps({"n": position}))
    ledger.end(None)
    ledger.close()
    for named in ("-", "/dev/stdout"):
        read, write = os.pipe()
        process = subprocess.Popen(
            [*COMMAND, "batch", "export", str(path), "--out", named],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(write)
        with os.fdopen(read, "rb") as reader:
            assert reader.read(100)
        _, said = process.communicate(timeout=120)
        assert (process.returncode, said) == (128 + signal.SIGPIPE, ""), named


def test_a_missing_subcommand_is_named_as_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["batch"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "allama batch: error: the following arguments are required: command"
    )
    assert main([]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "allama: error: the following arguments are required: command"
    )


def test_an_api_a_preset_does_not_speak_lists_every_one_it_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `openai:responses` is one: "it speaks 'chat'" alone sent the caller elsewhere.
    assert main(["plan", INVOICE, "--provider", "openai:anthropic"]) == 2
    assert capsys.readouterr().err == (
        "allama plan: openai has no api='anthropic' (it speaks 'chat' and 'responses'); the "
        "presets that have it: anthropic, azure-anthropic, anthropic-compatible\n"
    )
    with pytest.raises(ValueError, match=r"^groq has no api='responses' \(it speaks 'chat'\);"):
        allama.provider("groq", api="responses")
