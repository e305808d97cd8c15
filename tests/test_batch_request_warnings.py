"""A batch run keeps what the provider did not do as each input's request asked (a setting
left out, a list cut short), as a single extraction's response does: on each result, in
the ledger (read back by a resumed run), and counted in the summary. And a label function's
falsy name (a row id of 0) is the input's label, not its index."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ChatResponse, RequestField, Warning, WarningKind
from allama.batch import BatchResult
from allama.cli import main
from allama.mock import ChatResponseBuilder, FunctionProvider
from allama.transport import Transport
from allama.types import FieldSubject


class Row(BaseModel):
    n: int


ASKED = (
    ChatRequest("gpt-4o-mini")
    .system("Read the number.")
    .with_temperature(2.5)
    .with_stop("a", "b", "c", "d", "e")
)
"""A request OpenAI does not take as it is: a temperature past 2, five stop sequences."""

MESSAGES = [
    "OpenAI takes `temperature` from 0 to 2; 2.5 was left out",
    "OpenAI takes at most 4 stop sequences; the first 4 were sent",
]
SUMMARY_LINE = (
    "request warnings (each result's `warnings` says what was sent otherwise): "
    "stop unsupported ({n} inputs), temperature unsupported ({n} inputs)"
)


class Server:
    """A fake OpenAI (`httpx2.MockTransport`): `doc <n>` is answered `{"n": <n>}`, or, for
    `no json`, with text that is no JSON. It keeps the bodies it was sent."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.read())
        with self.lock:
            self.bodies.append(body)
        text = json.dumps(body)
        found = re.search(r"doc (\d+)", text)
        content = "no JSON here" if "no json" in text else json.dumps({"n": int(found[1])})
        return httpx2.Response(
            200,
            json={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
            },
        )

    def provider(self) -> allama.HttpProvider:
        transport = Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )
        return allama.provider("openai", api_key="sk-test", transport=transport)


def _refusing(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError("a resumed run sends nothing")


def _run(how: str, provider: Any, inputs: list[Any], **options: Any) -> tuple[list[Any], Any]:
    """The results of `allama.batch` or `allama.abatch` (`how`), in input order, and the run."""
    if how == "batch":
        run: Any = allama.batch(provider, Row, inputs, **options)
        results = list(run)
    else:

        async def read() -> tuple[list[Any], Any]:
            arun = allama.abatch(provider, Row, inputs, **options)
            return [result async for result in arun], arun

        results, run = asyncio.run(read())
    return sorted(results, key=lambda result: result.index), run


def _said(result: BatchResult[Any]) -> list[tuple[str, str, str]]:
    said = []
    for warning in result.warnings:
        assert isinstance(warning.subject, FieldSubject)
        said.append((warning.subject.field.value, warning.kind.value, warning.message))
    return said


EXPECTED = [("temperature", "unsupported", MESSAGES[0]), ("stop", "unsupported", MESSAGES[1])]


def test_a_single_extraction_says_the_same_warnings() -> None:
    """What the batch results are checked against: `allama.extract`'s response."""
    server = Server()
    one = allama.extract(server.provider(), Row, ASKED.user("doc 1"))
    assert [w.message for w in one.response.warnings] == MESSAGES
    assert one.metadata.degradations == [] and one.metadata.notes == []


@pytest.mark.parametrize("how", ["batch", "abatch"])
@pytest.mark.parametrize("with_ledger", [False, True])
def test_each_result_keeps_its_requests_warnings(
    tmp_path: Path, how: str, with_ledger: bool
) -> None:
    server = Server()
    ledger = tmp_path / "run.sqlite" if with_ledger else None
    results, run = _run(how, server.provider(), ["doc 1", "doc 2"], request=ASKED, ledger=ledger)
    # The request sent is not the one asked for: no temperature, four stop sequences.
    assert all("temperature" not in body for body in server.bodies)
    assert [body["stop"] for body in server.bodies] == [["a", "b", "c", "d"]] * 2
    assert [result.value for result in results] == [Row(n=1), Row(n=2)]
    assert [_said(result) for result in results] == [EXPECTED, EXPECTED]
    assert all(result.warnings[0].provider == "openai" for result in results)
    assert [repr(result) for result in results] == [
        f"BatchResult(index={i}, label='#{i}', ok, attempts=1, resumed=False, warnings=2)"
        for i in (0, 1)
    ]
    assert run.summary.request_warnings == Counter(
        {("temperature", "unsupported"): 2, ("stop", "unsupported"): 2}
    )
    assert SUMMARY_LINE.format(n=2) in run.summary.lines()
    if ledger is not None:
        records = [
            json.loads(r) for (r,) in sqlite3.connect(ledger).execute("SELECT record FROM items")
        ]
        assert [[w["message"] for w in record["request_warnings"]] for record in records] == [
            MESSAGES,
            MESSAGES,
        ]


@pytest.mark.parametrize("how", ["batch", "abatch"])
def test_a_resumed_run_reads_the_warnings_back(tmp_path: Path, how: str) -> None:
    ledger = tmp_path / "run.sqlite"
    inputs = ["doc 1", "doc 2", "doc 1"]  # the third a copy of the first
    first, _ = _run(how, Server().provider(), inputs, request=ASKED, ledger=ledger)
    assert [_said(result) for result in first] == [EXPECTED] * 3
    assert first[2].duplicate

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(_refusing)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(_refusing)),
    )
    refusing = allama.provider("openai", api_key="sk-test", transport=transport)
    again, run = _run(how, refusing, inputs, request=ASKED, ledger=ledger)
    assert [result.resumed for result in again] == [True, True, True]
    assert [result.value for result in again] == [Row(n=1), Row(n=2), Row(n=1)]
    assert [result.warnings for result in again] == [result.warnings for result in first]
    assert [_said(result) for result in again] == [EXPECTED] * 3
    # Every input given counted, a copy too (its value came of the same request).
    assert SUMMARY_LINE.format(n=3) in run.summary.lines()

    # No schema change: the warnings are held in the record's JSON.
    db = sqlite3.connect(ledger)
    (version,) = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
    assert version == "4"
    # A ledger written before they were kept reads as holding none.
    with db:
        db.execute("UPDATE items SET record = json_remove(record, '$.request_warnings')")
    db.close()
    old, run = _run(how, refusing, inputs, request=ASKED, ledger=ledger)
    assert [result.value for result in old] == [Row(n=1), Row(n=2), Row(n=1)]
    assert [result.warnings for result in old] == [(), (), ()]
    assert not any(line.startswith("request warnings") for line in run.summary.lines())


@pytest.mark.parametrize("how", ["batch", "abatch"])
def test_a_failure_keeps_the_warnings_of_its_last_answer(tmp_path: Path, how: str) -> None:
    ledger = tmp_path / "run.sqlite"
    server = Server()
    results, run = _run(how, server.provider(), ["no json"], request=ASKED, ledger=ledger)
    (result,) = results
    assert result.failure is not None and result.failure.kind == "extraction_parse"
    assert _said(result) == EXPECTED
    assert SUMMARY_LINE.format(n=1).replace("inputs", "input") in run.summary.lines()
    again, _ = _run(how, server.provider(), ["no json"], request=ASKED, ledger=ledger)
    (resumed,) = again
    assert resumed.resumed and resumed.failure is not None
    assert _said(resumed) == EXPECTED


def test_the_export_of_the_ledger_writes_them_in_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "run.sqlite"
    _run("batch", Server().provider(), ["doc 1"], request=ASKED, ledger=ledger)
    capsys.readouterr()
    assert main(["batch", "export", str(ledger)]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["value"] == {"n": 1}
    assert [w["message"] for w in row["record"]["request_warnings"]] == MESSAGES


@pytest.mark.parametrize("how", ["batch", "abatch"])
def test_a_request_taken_as_asked_has_none(tmp_path: Path, how: str) -> None:
    asked = ChatRequest("gpt-4o-mini").system("Read the number.").with_temperature(0.5)
    results, run = _run(
        how, Server().provider(), ["doc 1"], request=asked, ledger=tmp_path / "run.sqlite"
    )
    assert [result.warnings for result in results] == [()]
    assert repr(results[0]).endswith("resumed=False)")
    assert run.summary.request_warnings == Counter()
    assert not any(line.startswith("request warnings") for line in run.summary.lines())
    (record,) = sqlite3.connect(tmp_path / "run.sqlite").execute("SELECT record FROM items")
    assert "request_warnings" not in json.loads(record[0])


def _answer_warned(request: ChatRequest) -> ChatResponse:
    """An answer warning of two fields: the response format, which the extraction relies
    on (its record's `degradations`), and the seed, which it does not."""
    text = request.messages[-1].text() or ""
    return (
        ChatResponseBuilder()
        .text(json.dumps({"n": int(text.split()[1])}))
        .warning(Warning.approximated(RequestField.RESPONSE_FORMAT, "the schema was loosened"))
        .warning(Warning.unsupported(RequestField.SEED, "no seed here"))
        .build()
    )


@pytest.mark.parametrize("how", ["batch", "abatch"])
def test_the_warnings_the_record_holds_are_not_repeated(how: str) -> None:
    provider = FunctionProvider(_answer_warned)
    request = ChatRequest("mock-model").system("Read the number.")
    (result,), run = _run(how, provider, ["doc 3"], request=request)
    assert result.metadata is not None
    assert [w.message for w in result.metadata.degradations] == ["the schema was loosened"]
    assert [(w.kind, w.message) for w in result.warnings] == [
        (WarningKind.UNSUPPORTED, "no seed here")
    ]
    assert run.summary.request_warnings == Counter({("seed", "unsupported"): 1})


@pytest.mark.parametrize("how", ["batch", "abatch"])
def test_a_falsy_name_is_the_label(how: str) -> None:
    rows = [
        {"id": 0, "text": "doc 1"},
        {"id": 0.0, "text": "doc 2"},
        {"id": False, "text": "doc 3"},
        {"id": None, "text": "doc 4"},
        {"id": "", "text": "doc 5"},
        {"id": 7, "text": "doc 6"},
    ]
    results, _ = _run(
        how,
        Server().provider(),
        rows,
        request=lambda row: ASKED.user(row["text"]),
        label=lambda row: row["id"],
    )
    assert [result.label for result in results] == ["0", "0.0", "False", "#3", "#4", "7"]
    assert [result.value for result in results] == [Row(n=n) for n in range(1, 7)]


def test_the_commands_output_rows_hold_them_as_the_ledgers_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`allama batch run --out`: a row written as its input finishes holds the request's
    warnings in its record, as a row written from the ledger on a second run does."""
    from _batch_server import BatchServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "row.py").write_text(
        "from pydantic import BaseModel\n\n\nclass Row(BaseModel):\n    n: int\n", encoding="utf-8"
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "doc-1.txt").write_text("doc 1\n", encoding="utf-8")
    server = BatchServer().start()
    try:

        def run(out: Path) -> list[dict[str, Any]]:
            args = ["batch", "run", str(docs), "--type", f"{tmp_path / 'row.py'}:Row"]
            args += ["--provider", "openai", "--base-url", server.url, "--model", "gpt-4o-mini"]
            args += ["--temperature", "2.5", "--out", str(out)]
            args += ["--ledger", str(tmp_path / "run.sqlite")]
            assert main(args) == 0
            return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

        (first,) = run(tmp_path / "first.jsonl")
        (again,) = run(tmp_path / "again.jsonl")
    finally:
        server.stop()
    said = [MESSAGES[0]]
    assert [w["message"] for w in first["record"]["request_warnings"]] == said
    assert again["record"]["request_warnings"] == first["record"]["request_warnings"]
    assert again["value"] == first["value"] == {"n": 1}
    capsys.readouterr()
