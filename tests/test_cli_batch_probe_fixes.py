"""`allama batch` and its input readers, as a probe found them: a file appended to after
its check is read no further than it was checked, request settings the model refuses are
said before the run, joined CSV exports are refused, and empty path arguments are bad
arguments, not the current folder."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from allama.batch import _inputs as inputs_module
from allama.batch._inputs import read_inputs
from allama.cli import main


class _Recording(ThreadingHTTPServer):
    """A Chat Completions endpoint answering `{"n": N}` for a document `doc N` (`-1` for
    none), keeping every body it was sent; `/responses` is answered 400."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.lock = threading.Lock()
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def texts(self) -> list[str]:
        """The user's text of each request, in the order they came."""
        with self.lock:
            return [
                message["content"]
                for body in self.bodies
                for message in body["messages"]
                if message["role"] == "user"
            ]


class _Answer(BaseHTTPRequestHandler):
    server: _Recording

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        if self.path.endswith("/responses"):
            self._send(400, {"error": {"message": "no", "type": "invalid_request_error"}})
            return
        with self.server.lock:
            self.server.bodies.append(body)
        user = " ".join(m["content"] for m in body["messages"] if m["role"] == "user")
        found = re.search(r"doc (\d+)", user)
        answer = json.dumps({"n": int(found.group(1)) if found else -1})
        self._send(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Recording]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    served = _Recording()
    threading.Thread(target=served.serve_forever, args=(0.05,), daemon=True).start()
    yield served
    served.shutdown()
    served.server_close()


@pytest.fixture
def row_type(tmp_path: Path) -> str:
    module = tmp_path / "row.py"
    module.write_text("from pydantic import BaseModel\n\n\nclass Row(BaseModel):\n    n: int\n")
    return f"{module}:Row"


def run(server: _Recording, row_type: str, source: Path | str, *extra: str) -> int:
    options = ["--model", "gpt-4o-mini", "--out", str(Path(source).parent / "o.jsonl")]
    for flag in ("--model", "--out"):
        if flag in extra:  # given by the test
            at = options.index(flag)
            del options[at : at + 2]
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
            "--no-progress",
            *options,
            *extra,
        ]
    )


def rows_of(path: Path) -> list[tuple[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(row["label"], row["value"]) for row in map(json.loads, lines)]


# A file appended to after its check: read as far as it was checked.

CSV_ROWS = "text\n" + "\n".join(f"doc {n}" for n in range(1, 11))  # no newline after row 10
JSONL_LINES = "\n".join(json.dumps({"id": f"d{n}", "text": f"doc {n}"}) for n in range(1, 11))


@pytest.mark.parametrize(
    ("name", "content", "appended", "labels"),
    [
        ("in.csv", CSV_ROWS, "doc 11\n", [f"row {n}" for n in range(1, 11)]),
        (
            "in.jsonl",
            JSONL_LINES,
            json.dumps({"id": "d11", "text": "doc 11"}) + "\n",
            [f"d{n}" for n in range(1, 11)],
        ),
    ],
)
def test_a_last_line_without_a_newline_appended_to_after_the_check_is_read_as_checked(
    tmp_path: Path, name: str, content: str, appended: str, labels: list[str]
) -> None:
    source = tmp_path / name
    source.write_text(content, encoding="utf-8")
    inputs = read_inputs(source)
    with source.open("a", encoding="utf-8") as log:  # a log still written
        log.write(appended)
    documents = list(inputs)
    assert [str(document) for document in documents] == [f"doc {n}" for n in range(1, 11)]
    assert [document.label for document in documents] == labels
    assert inputs.changed == []


@pytest.mark.parametrize(
    ("name", "content", "appended", "labels"),
    [
        ("in.csv", CSV_ROWS, "doc 11\n", [f"row {n}" for n in range(1, 11)]),
        (
            "in.csv",
            "id,text\n" + "\n".join(f"{n},doc {n}" for n in range(1, 11)),
            "11,doc 11\n",
            [str(n) for n in range(1, 11)],
        ),
        (
            "in.jsonl",
            JSONL_LINES,
            json.dumps({"id": "d11", "text": "doc 11"}) + "\n",
            [f"d{n}" for n in range(1, 11)],
        ),
    ],
)
def test_a_run_sends_the_documents_checked_though_the_file_grew_after_its_check(
    server: _Recording,
    row_type: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str,
    appended: str,
    labels: list[str],
) -> None:
    source = tmp_path / name
    source.write_text(content, encoding="utf-8")
    checked = inputs_module.read_inputs

    def checked_then_appended(*args: Any, **kwargs: Any) -> Any:
        found = checked(*args, **kwargs)
        with source.open("a", encoding="utf-8") as log:  # written to as the run starts
            log.write(appended)
        return found

    monkeypatch.setattr(inputs_module, "read_inputs", checked_then_appended)
    assert run(server, row_type, source, "--concurrency", "1") == 0
    err = capsys.readouterr().err
    assert "10 documents from" in err and "10 done, 0 failed" in err
    assert server.texts == [f"doc {n}" for n in range(1, 11)]
    assert rows_of(tmp_path / "o.jsonl") == [
        (label, {"n": n}) for label, n in zip(labels, range(1, 11), strict=True)
    ]


def test_the_check_reads_as_far_as_the_size_it_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(JSONL_LINES + "\n", encoding="utf-8")
    stat = Path.stat
    grown: list[bool] = []

    def stat_then_grow(path: Path, **kwargs: Any) -> Any:
        taken = stat(path, **kwargs)
        # The size the check takes (not `is_dir`'s look), then a line written before it reads.
        if path == source and sys._getframe(1).f_code.co_name == "read_inputs":
            grown.append(True)
            with source.open("a", encoding="utf-8") as log:
                log.write(json.dumps({"id": "d11", "text": "doc 11"}) + "\n")
        return taken

    monkeypatch.setattr(Path, "stat", stat_then_grow)
    inputs = read_inputs(source)
    monkeypatch.undo()
    assert grown == [True]
    assert len(inputs) == 10
    assert [document.label for document in inputs] == [f"d{n}" for n in range(1, 11)]


# Request settings the model refuses: said before the run.


@pytest.mark.parametrize(
    ("model", "given", "note"),
    [
        (
            "gpt-5-mini",
            "0",
            "note: --temperature 0 was left out: `gpt-5-mini` on OpenAI takes no "
            "`temperature` other than 1",
        ),
        (
            "gpt-4o-mini",
            "5",
            "note: --temperature 5 was left out: OpenAI takes `temperature` from 0 to 2",
        ),
        ("gpt-4o-mini", "0.5", None),
    ],
)
def test_a_temperature_the_model_refuses_is_said_once_before_the_run(
    server: _Recording,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model: str,
    given: str,
    note: str | None,
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "doc 1"}\n{"text": "doc 2"}\n', encoding="utf-8")
    assert run(server, row_type, source, "--model", model, "--temperature", given) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"2 documents from {source} (jsonl) to Row with openai {model}")
    notes = [line for line in lines if "--temperature" in line]
    if note is None:
        assert notes == []
        assert [body["temperature"] for body in server.bodies] == [0.5, 0.5]
    else:
        assert notes == [note]
        assert lines[1] == note  # before anything the run does
        assert all("temperature" not in body for body in server.bodies)
    assert len(server.bodies) == 2


def test_output_tokens_sent_otherwise_are_said_before_the_run(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "doc 1"}\n', encoding="utf-8")
    run(server, row_type, source, "--api", "responses", "--max-output-tokens", "10")
    lines = capsys.readouterr().err.splitlines()
    assert lines[1] == (
        "note: --max-output-tokens 10 is not sent as given: the Responses API takes at least "
        "16 output tokens; 16 were asked for instead of 10"
    )
    assert sum("--max-output-tokens" in line for line in lines) == 1


class _NativeAnswer(_Answer):
    """Anthropic's Messages API (`/messages`) and Gemini's `generateContent`, answering
    `{"n": N}` for a document `doc N` as each provider writes an answer."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        with self.server.lock:
            self.server.bodies.append(body)
        found = re.search(r"doc (\d+)", json.dumps(body.get("messages") or body["contents"]))
        answer = json.dumps({"n": int(found.group(1)) if found else -1})
        if self.path.endswith("/messages"):
            self._send(
                200,
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": answer}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 100, "output_tokens": 10},
                },
            )
            return
        self._send(
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": answer}]},
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 100,
                    "candidatesTokenCount": 10,
                    "totalTokenCount": 110,
                },
            },
        )


@pytest.fixture
def native(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Recording]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-test")
    served = _Recording()
    served.RequestHandlerClass = _NativeAnswer
    threading.Thread(target=served.serve_forever, args=(0.05,), daemon=True).start()
    yield served
    served.shutdown()
    served.server_close()


@pytest.mark.parametrize(
    ("provider", "model", "extra", "note", "sent"),
    [
        (
            "anthropic",
            "claude-sonnet-4-5",
            ("--max-output-tokens", "100000"),
            # Capped, not left out: the note says what the warning does.
            "note: --max-output-tokens 100000 is not sent as given: `claude-sonnet-4-5` on "
            "Anthropic writes at most 64000 output tokens; 64000 was sent in place of 100000",
            ("max_tokens", 64000),
        ),
        (
            "gemini",
            "gemini-2.5-flash",
            ("--temperature", "5"),
            "note: --temperature 5 was left out: Gemini takes `temperature` from 0 to 2",
            ("generationConfig", {"responseMimeType": "application/json"}),
        ),
    ],
)
def test_a_setting_each_provider_sends_otherwise_is_said_as_what_was_sent(
    native: _Recording,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    provider: str,
    model: str,
    extra: tuple[str, str],
    note: str,
    sent: tuple[str, Any],
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "doc 1"}\n{"text": "doc 2"}\n', encoding="utf-8")
    host, port = native.server_address[:2]
    code = main(
        [
            "batch",
            "run",
            str(source),
            "--type",
            row_type,
            "--provider",
            provider,
            "--base-url",
            f"http://{host!s}:{port}",
            "--model",
            model,
            "--out",
            str(tmp_path / "o.jsonl"),
            "--no-progress",
            *extra,
        ]
    )
    lines = capsys.readouterr().err.splitlines()
    assert code == 0
    assert lines[1] == note
    assert sum(extra[0] in line for line in lines) == 1
    key, value = sent
    bodies = native.bodies
    assert len(bodies) == 2
    for body in bodies:
        if isinstance(value, dict):
            assert {k: body[key][k] for k in value} == value
            assert "temperature" not in body[key]
        else:
            assert body[key] == value
    assert sorted(rows_of(tmp_path / "o.jsonl")) == [("line 1", {"n": 1}), ("line 2", {"n": 2})]


# Two CSV exports joined: the second's header is no document.


def test_a_csv_row_starting_with_a_byte_order_mark_is_refused_before_anything_is_sent(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bom = "\ufeff"
    joined = tmp_path / "joined.csv"  # `cat a.csv b.csv`, each a spreadsheet's "CSV UTF-8"
    joined.write_text(f"{bom}id,text\r\na,doc 1\r\n{bom}id,text\r\nb,doc 2\r\n", encoding="utf-8")
    assert run(server, row_type, joined) == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {joined} row 2 (line 3): a byte-order mark at the start of the "
        "row (files joined?): remove it\n"
    )
    assert server.bodies == []
    # The file's own mark is read past, as before.
    single = tmp_path / "single.csv"
    single.write_text(f"{bom}id,text\r\na,doc 1\r\n", encoding="utf-8")
    assert [document.label for document in read_inputs(single)] == ["a"]


# Empty path arguments: bad arguments, said so.


def test_empty_path_arguments_of_run_are_refused_before_anything(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "doc 1"}\n', encoding="utf-8")
    out = str(tmp_path / "o.jsonl")
    cases = [
        (("--out", ""), "--out is empty; name the JSONL file to write"),
        (
            ("--out", out, "--ledger", ""),
            "--ledger is empty; name the ledger's file, or leave --ledger out "
            "(`<out>.ledger.sqlite`)",
        ),
        (
            ("--out", out, "--prompt", ""),
            "--prompt is empty; name the file holding the system prompt",
        ),
    ]
    for extra, said in cases:
        assert run(server, row_type, source, *extra) == 2
        assert capsys.readouterr().err == f"allama batch run: {said}\n"
    # INPUT "" would be the current folder's text files.
    assert run(server, row_type, "", "--out", out) == 2
    assert capsys.readouterr().err == (
        "allama batch run: INPUT is empty; name a folder of text files, a .jsonl or a .csv\n"
    )
    assert server.bodies == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.jsonl", "row.py"]


def test_empty_ledger_and_out_of_status_cancel_and_export_are_refused(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "doc 1"}\n', encoding="utf-8")
    assert run(server, row_type, source) == 0
    ledger = str(tmp_path / "o.jsonl.ledger.sqlite")
    capsys.readouterr()
    no_ledger = "the ledger path is empty; name the ledger's file"
    for command in (["status", ""], ["cancel", ""], ["export", ""], ["export", "", "--out", ""]):
        assert main(["batch", *command]) == 2
        assert capsys.readouterr() == ("", f"allama batch {command[0]}: {no_ledger}\n")
    assert main(["batch", "export", ledger, "--out", ""]) == 2
    assert capsys.readouterr() == (
        "",
        "allama batch export: --out is empty; name the file to write (or `-`, stdout)\n",
    )
    # Given, they are read as before.
    assert main(["batch", "export", ledger]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == {"n": 1}


# A JSONL line naming the document's field (or the id's) twice: which is meant is unknown.


@pytest.mark.parametrize(
    ("line", "extra", "said"),
    [
        (
            '{"id": "inv-1", "text": "doc 1", "text": "doc 2"}',
            (),
            "the field `text` is named twice",
        ),
        ('{"id": "a", "id": "b", "text": "doc 1"}', (), "the field `id` is named twice"),
        (
            '{"id": "a", "text": "doc 1", "id": "b", "text": "doc 2"}',
            (),
            "the fields `id`, `text` are named twice",
        ),
        (  # a key spelled with an escape is the same key
            '{"ref": "a", "body": "doc 1", "r\\u0065f": "b"}',
            ("--field", "body", "--id-field", "ref"),
            "the field `ref` is named twice",
        ),
    ],
)
def test_a_jsonl_line_naming_the_documents_or_the_ids_field_twice_is_refused(
    server: _Recording,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    line: str,
    extra: tuple[str, ...],
    said: str,
) -> None:
    source = tmp_path / "in.jsonl"
    first = {"body" if extra else "text": "doc 3", **({"ref": "c"} if extra else {})}
    source.write_text(f"{json.dumps(first)}\n{line}\n", encoding="utf-8")
    assert run(server, row_type, source, *extra) == 1
    assert capsys.readouterr().err == f"allama batch run: {source} line 2: {said}\n"
    assert server.bodies == []


def test_other_keys_named_twice_in_a_jsonl_line_are_no_matter(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"id": "a", "text": "doc 1", "tag": "x", "tag": "y"}\n'
        # (a nested object's own `text`, twice, is not the document)
        '{"id": "b", "text": "doc 2", "meta": {"text": "x", "text": "y", "id": 1, "id": 2}}\n',
        encoding="utf-8",
    )
    assert run(server, row_type, source, "--concurrency", "1") == 0
    assert "2 done, 0 failed" in capsys.readouterr().err
    assert server.texts == ["doc 1", "doc 2"]
    assert rows_of(tmp_path / "o.jsonl") == [("a", {"n": 1}), ("b", {"n": 2})]


# A folder's entries that are no documents: counted in a note, not passed over unsaid.


def test_what_a_folder_holds_besides_its_documents_is_said_in_one_note(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    for year in ("2024", "2025"):
        (docs / year).mkdir(parents=True)
        (docs / year / "r1.txt").write_text(f"report {year}", encoding="utf-8")
    (docs / "a.txt").write_text("doc 1", encoding="utf-8")
    (docs / "b.md").write_text("doc 2", encoding="utf-8")
    (docs / "notes.text").write_text("doc 8", encoding="utf-8")
    (docs / "README").write_text("doc 9", encoding="utf-8")
    (docs / "moved.txt").symlink_to(tmp_path / "nowhere.txt")
    (docs / "loop.txt").symlink_to("loop.txt")
    os.mkfifo(docs / "pipe.txt")
    (docs / ".hidden.txt").write_text("doc 7", encoding="utf-8")  # hidden: not said
    (docs / ".git").mkdir()
    out = str(docs / "o.jsonl")  # the run's own files in the folder are not said
    note = (
        "note: left out of the folder: 2 subfolders, 2 files not *.txt or *.md, 1 link "
        "leading nowhere, 1 link loop, 1 not a regular file"
    )
    for _ in range(2):  # the second with the output and the ledger in the folder
        assert run(server, row_type, docs, "--out", out, "--concurrency", "1") == 0
        lines = capsys.readouterr().err.splitlines()
        assert lines[0].startswith(f"2 documents from {docs} (folder)")
        assert lines[1] == note
        assert sum("left out of the folder" in line for line in lines) == 1
    assert {path.name for path in docs.iterdir()} >= {"o.jsonl", "o.jsonl.ledger.sqlite"}
    assert server.texts == ["doc 1", "doc 2"]
    assert read_inputs(docs, skip=[out]).not_read == (
        (inputs_module.SUBFOLDER, 2),
        (inputs_module.OTHER_SUFFIX, 2),  # (the ledger, beside the output, is the run's too)
        (inputs_module.DANGLING_LINK, 1),
        (inputs_module.LINK_LOOP, 1),
        (inputs_module.NOT_REGULAR, 1),
    )


def test_a_folder_of_documents_alone_has_no_note_and_one_of_each_is_said_singly(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("doc 1", encoding="utf-8")
    assert run(server, row_type, docs) == 0
    assert "left out of the folder" not in capsys.readouterr().err
    (docs / "sub").mkdir()
    (docs / "x.pdf").write_text("doc 9", encoding="utf-8")
    assert run(server, row_type, docs) == 0
    assert capsys.readouterr().err.splitlines()[1] == (
        "note: left out of the folder: 1 subfolder, 1 file not *.txt or *.md"
    )


# A CSV header that begins with a second byte-order mark: its first column is no `id`.


@pytest.mark.parametrize("extra", [(), ("--id-field", "id")])
def test_a_csv_header_starting_with_a_byte_order_mark_is_refused_before_anything_is_sent(
    server: _Recording,
    row_type: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, ...],
) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbfid,text\nINV-7,doc 7\nINV-8,doc 8\n")
    assert run(server, row_type, source, *extra) == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {source} (the header row): a byte-order mark at the start of the "
        "row (files joined?): remove it\n"
    )
    assert server.bodies == []


# A CSV quote out of place: said after the rows to mend before it, and the check stops there.


def test_a_csv_quote_out_of_place_is_said_after_the_rows_to_mend_before_it(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "b.csv"
    source.write_text('id,text\n1,ok\n3,short,extra\n4,"bad"quote\n5,never read,,\n')
    assert run(server, row_type, source) == 1
    assert capsys.readouterr().err == (
        f"allama batch run: {source} row 2 (line 3): 1 more field than the header's 2 columns "
        "(a comma in a field that is not quoted?); row 3 (line 4): ',' expected after '\"' "
        "(reading stopped at this row; 2 to mend up to it)\n"
    )
    assert server.bodies == []
    # Alone, it says so too; after more than are shown, it is said all the same.
    alone = tmp_path / "alone.csv"
    alone.write_text('id,text\n1,"bad"quote\n2,ok\n')
    with pytest.raises(inputs_module.InputError) as raised:
        read_inputs(alone)
    assert str(raised.value) == (
        f"{alone} row 1 (line 2): ',' expected after '\"' (reading stopped at this row)"
    )
    many = tmp_path / "many.csv"
    many.write_text("id,text\n" + "".join(f"{n},doc {n},x\n" for n in range(1, 8)) + '8,"a"b\n')
    with pytest.raises(inputs_module.InputError) as raised:
        read_inputs(many)
    extra = "1 more field than the header's 2 columns (a comma in a field that is not quoted?)"
    assert str(raised.value) == (
        f"{many} row 1 (line 2): {extra}; "
        + "".join(f"row {n} (line {n + 1}): {extra}; " for n in range(2, 6))
        + "and 2 more; row 8 (line 9): ',' expected after '\"' (reading stopped at this row; "
        "8 to mend up to it)"
    )


# A CSV row is named by the file's line it begins on too.


def test_a_csv_row_is_named_by_the_line_it_begins_on(tmp_path: Path) -> None:
    source = tmp_path / "blank.csv"
    # Blank lines, and a quoted field over three lines: rows 3 and 4 are lines 9 and 10.
    source.write_text(
        'id,text\n\n1,ok\n\n\n2,"multi\nline\nfield"\n3,short,extra\n4,\n\n5,"a\nb",c\n'
    )
    with pytest.raises(inputs_module.InputError) as raised:
        read_inputs(source)
    assert str(raised.value) == (
        f"{source} row 3 (line 9): 1 more field than the header's 2 columns (a comma in a "
        "field that is not quoted?); row 4 (line 10): the column `text` is empty; "
        "row 5 (line 12): 1 more field than the header's 2 columns (a comma in a field that "
        "is not quoted?) (3 to mend in all)"
    )
    # The label of a row with no id is its number among the rows, as before.
    fine = tmp_path / "fine.csv"
    fine.write_text('text\n\n"doc\n1"\n\ndoc 2\n')
    assert [document.label for document in read_inputs(fine)] == ["row 1", "row 2"]


# A CSV file separated otherwise than by commas: a bad argument (exit 2), as a column the
# header lacks.


def test_a_csv_file_separated_by_semicolons_exits_as_a_bad_argument(
    server: _Recording, row_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "s.csv"
    source.write_text("id;text\n1;a\n")
    assert run(server, row_type, source) == 2
    assert capsys.readouterr().err == (
        f"allama batch run: {source}: the header reads as `id;text`, and the file is "
        "separated by semicolons, not by commas (a spreadsheet's export in many locales); "
        "save it as CSV with commas, or as JSONL\n"
    )
    assert server.bodies == []


# Progress: a run stopped early shows what was done; a stopping one says what a second
# Ctrl-C does, at once.


def test_the_bar_of_a_run_stopped_early_shows_what_was_done() -> None:
    from allama.batch._run import BatchSummary
    from allama.cli._progress import fitted

    summary = BatchSummary(total=40, done=2, not_started=38, input_tokens=90, output_tokens=10)
    summary.stopped = "interrupted (Ctrl-C)"
    summary.ended = summary.started + 10.0
    assert fitted(summary, 120) == (
        "[#...................] 2/40: 2 done, 0 failed, 0 in flight, 38 not started, "
        "100 tokens, cost ?, 0.20/s, stopped"
    )
    summary.elsewhere, summary.not_started = 10, 28  # finished by another run: done
    assert fitted(summary, 200).startswith("[######..............] 2/40: ")


def test_a_stopping_run_says_what_a_second_signal_does_to_the_calls_in_flight() -> None:
    from allama.batch._run import BatchSummary
    from allama.cli import _batch as command
    from allama.cli import _progress
    from allama.cli._progress import fitted, progress_text

    # Every signal that stops a run as Ctrl-C does has its words here.
    assert set(_progress._AGAIN) == set(command._STOPPING.values())
    summary = BatchSummary(total=40, done=2, in_flight=3, input_tokens=90, output_tokens=10)
    summary.stopped = "interrupted (Ctrl-C)"
    summary.started -= 10.0
    assert progress_text(summary).endswith(
        ", 0.20/s, stopping: Ctrl-C again abandons those in flight"
    )
    # 79 columns: the bar gives way, then "those in flight" is said as "them".
    assert fitted(summary, 79) == (
        "2/40: 2 done, 0 failed, 3 in flight, stopping: Ctrl-C again abandons them"
    )
    summary.done = 4  # (a bar of 13 shows one in ten)
    assert fitted(summary, 100) == (
        "[#............] 4/40: 4 done, 0 failed, 3 in flight, "
        "stopping: Ctrl-C again abandons those in flight"
    )
    summary.stopped = "terminated (SIGTERM)"
    assert progress_text(summary).endswith(", stopping: a second SIGTERM abandons those in flight")
    summary.in_flight = 0  # nothing to abandon
    assert progress_text(summary).endswith(", 0.40/s, stopping")
    summary.in_flight = 3
    # A budget's stop: a first Ctrl-C only stops the run again, so nothing is promised.
    summary.stopped = "the budget of $0.01 is reached ($0.012)"
    assert progress_text(summary).endswith(", 0.40/s, stopping")


class _Lines(io.StringIO):
    """Standard error that is no terminal, read while the run writes to it."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            return super().write(text)

    def text(self) -> str:
        with self.lock:
            return self.getvalue()


def test_the_first_ctrl_c_is_answered_at_once_by_a_progress_line(
    row_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a terminal, a line says the run is stopping (and what a second Ctrl-C does)
    as the first comes, not at the next periodic line (a minute here)."""
    import signal
    import time

    import allama
    import allama.cli._batch as command
    from test_cli_batch import folder
    from test_cli_batch import run as batch_run
    from test_cli_batch_second_interrupt import HoldingServer, until

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    holding = HoldingServer(held=set(range(3, 10)))  # 0 to 2 answered, 3 to 6 held
    threading.Thread(target=holding.serve_forever, args=(0.05,), daemon=True).start()
    made: list[Any] = []
    make = allama.batch

    def batch(*args: Any, **kwargs: Any) -> Any:
        made.append(make(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(allama, "batch", batch)
    err = _Lines()
    monkeypatch.setattr("sys.stderr", err)
    said: list[str] = []
    write_row = command._write_row

    def first_row(*args: Any) -> Any:
        if not said:
            summary = made[0].summary
            until(lambda: summary.done == 3 and holding.holding == 4)
            signal.raise_signal(signal.SIGINT)  # the first: no input starts
            deadline = time.monotonic() + 5  # (not the minute of --progress-every)
            while "stopping" not in err.text():
                assert time.monotonic() < deadline, err.text()
                time.sleep(0.01)
            said.extend(line for line in err.text().splitlines() if "stopping" in line)
            holding.release.set()  # those in flight finish
        return write_row(*args)

    monkeypatch.setattr(command, "_write_row", first_row)
    try:
        docs = folder(tmp_path, list(range(7)))
        out = tmp_path / "out.jsonl"
        status = batch_run(
            holding, row_type, docs, out, "--concurrency", "4", "--progress-every", "60"
        )
    finally:
        holding.release.set()
        holding.shutdown()
        holding.server_close()
    assert status == 130
    assert len(said) == 1 and said[0].startswith("progress: 3/7: 3 done, 0 failed, 4 in flight, ")
    assert said[0].endswith(", stopping: Ctrl-C again abandons those in flight")
    assert len(rows_of(out)) == 7  # (those in flight finished and were written)


def test_a_run_whose_types_default_changed_says_where_the_schemas_differ(
    server: _Recording, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A default computed when the module is imported differs in each process: the ledger
    # said only "other settings (type, prompt, model or provider)", all of them the same.
    module = tmp_path / "row.py"
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "doc 1"}\n')
    for default in (1, 2):
        module.write_text(
            f"from pydantic import BaseModel\n\n\nclass Row(BaseModel):\n    n: int = {default}\n"
        )
        sys.modules.pop("row", None)
        assert run(server, f"{module}:Row", source) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(server.bodies) == 2  # paid again: the key holds the schema
    changed = (
        "the type `Row` has another schema than in an earlier run of the ledger with this "
        "provider and model (at `/properties/n/default`), so an input of that run given to "
        "this one is not taken from the ledger: it is sent, and paid for, again; a default "
        "computed when the module is imported (`uuid4()`, `datetime.now()`) differs in each "
        "process: `Field(default_factory=...)` keeps it out of the schema"
    )
    assert (
        "ledger: the document is not in it; its 1 input was extracted with other settings "
        f"(type, prompt, model or provider), and stays: {changed}"
    ) in lines
    assert [line for line in lines if "another schema" in line] == [
        line for line in lines if line.startswith(("ledger: the document", "the type"))
    ]
    assert len([line for line in lines if "another schema" in line]) == 2  # (and summary)
