"""Provider batch jobs: an input its adapter refuses to encode fails alone, as in a live run
(the others go in the job, and a run again does not crash on it); what the answers of an
input in a follow-up job paid is in the ledger, and a later run counts it, as paid before
it, against its budget; a billed row whose line of the results cannot be read is counted
paid, at a cost unknown, as it is sent again."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import allama
from _provider_batch_server import Job, ProviderBatchServer
from allama.adapters._jobs import JobState, Row, RowKind
from allama.batch import BatchResult, _jobs
from allama.batch._ledger import Ledger
from allama.errors import UnsupportedError
from allama.types import RequestField
from test_provider_batch import Doc, _batch_run, _docs, _provider, _run_until


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.001, 0.002))


def _either(
    provider: Any,
    model: str,
    docs: list[str],
    ledger: Path,
    *,
    provider_batch: bool,
    asynchronous: bool = False,
) -> list[BatchResult[Doc]]:
    """A run of `docs`, live or as provider batch jobs, sync or async, its results by index."""
    options: dict[str, Any] = {
        "request": allama.ChatRequest(model).system("Read the number."),
        "ledger": ledger,
        "provider_batch": provider_batch,
        "poll_interval": 0.001,
        "backoff": 0.001,
    }
    if asynchronous:

        async def run() -> list[BatchResult[Doc]]:
            given: list[BatchResult[Doc]] = []
            stream: Any = allama.abatch(provider, Doc, docs, **options)
            async for result in stream:
                given.append(result)
            return given

        results = asyncio.run(run())
    else:
        results = list(allama.batch(provider, Doc, docs, **options))
    return sorted(results, key=lambda result: result.index)


def _rows(ledger: Path) -> list[Any]:
    book = Ledger(ledger)
    try:
        return sorted(book.rows(), key=lambda row: row.position)
    finally:
        book.close()


# 1. An input the adapter refuses fails alone.


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_input_its_adapter_refuses_fails_alone_as_in_a_live_run(
    server: ProviderBatchServer, tmp_path: Path, asynchronous: bool
) -> None:
    # Anthropic refuses a blank last user message before anything is sent.
    provider, model = _provider(server, "anthropic")
    docs = ["doc 0", "   ", "doc 2"]
    live = _either(provider, model, docs, tmp_path / "live.sqlite", provider_batch=False)
    ledger = tmp_path / "jobs.sqlite"
    results = _either(provider, model, docs, ledger, provider_batch=True, asynchronous=asynchronous)
    assert [r.value for r in results] == [Doc(n=0), None, Doc(n=2)]
    refused, said = results[1].failure, live[1].failure
    assert refused is not None and said is not None
    assert (refused.kind, refused.message) == (said.kind, said.message)
    assert refused.kind == "invalid_request"
    assert refused.message.startswith(
        "the last user message holds nothing but whitespace, which Anthropic refuses"
    )
    assert results[1].attempts == live[1].attempts == 1
    assert results[1].metadata is not None and results[1].metadata.passes == 0
    # The others went in the job; the refused one in none, failed in the ledger, unpaid.
    assert len(server.jobs) == 1 and len(server.jobs[0].keys) == 2
    assert [(row.status, row.cost) for row in _rows(ledger)][1] == ("failed", None)
    # A run again gives it back as it was, sending nothing.
    again = _either(provider, model, docs, ledger, provider_batch=True, asynchronous=asynchronous)
    assert [r.value for r in again] == [Doc(n=0), None, Doc(n=2)]
    assert again[1].failure is not None and again[1].failure.message == refused.message
    assert again[1].resumed
    assert len(server.jobs) == 1


def _no_native_output_for(monkeypatch: pytest.MonkeyPatch, provider: Any, doc: str) -> None:
    """The adapter refuses native output (the response format) for `doc` before sending,
    as `unsupported_policy=ERROR` refuses a schema it cannot enforce: the extraction falls
    back to a forced tool call."""
    prepare = type(provider)._prepare

    def refusing(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        text = json.dumps(request.model_dump(mode="json"))
        if request.response_format is not None and doc in text:
            raise UnsupportedError(
                f"no native output for {doc}", field=RequestField.RESPONSE_FORMAT
            )
        return prepare(self, request, *args, **kwargs)

    monkeypatch.setattr(type(provider), "_prepare", refusing)


def test_an_input_whose_native_output_is_refused_falls_back_in_its_job_and_on_resume(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, "anthropic")
    _no_native_output_for(monkeypatch, provider, "doc 5")
    docs = ["doc 4", "doc 5"]
    live = _either(provider, model, docs, tmp_path / "live.sqlite", provider_batch=False)
    assert live[1].metadata is not None and live[1].metadata.mode == "forced_tool"
    ledger = tmp_path / "jobs.sqlite"
    server.hold = True
    _, first = _run_until(provider, model, docs, ledger, lambda: any(j.polls for j in server.jobs))
    assert [r.failure.kind for r in first if r.failure] == ["in_provider_job"] * 2
    assert len(server.jobs) == 1 and len(server.jobs[0].keys) == 2  # its fallback in the job
    server.hold = False
    results = sorted(_batch_run(provider, model, docs, ledger), key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=4), Doc(n=5)]
    metadata = results[1].metadata
    assert metadata is not None and live[1].metadata is not None
    assert (metadata.mode, metadata.passes, metadata.auto_fallback) == (
        "forced_tool",
        1,
        live[1].metadata.auto_fallback,
    )
    assert results[1].attempts == 1
    assert len(server.jobs) == 1


# 2. What answers of an input in a follow-up job paid is counted.


def _follow_up_held(server: ProviderBatchServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first job runs; the second is held (until `server.hold` is unset)."""
    add = ProviderBatchServer.add_job

    def adding(fake: ProviderBatchServer, job: Job) -> Job:
        if len(fake.jobs) == 1:
            fake.hold = True
        return add(fake, job)

    monkeypatch.setattr(ProviderBatchServer, "add_job", adding)


def _first_run(
    server: ProviderBatchServer, monkeypatch: pytest.MonkeyPatch, ledger: Path
) -> tuple[Any, str, Decimal]:
    """Docs 0-3 and 7 in a job; doc 7's answer is no JSON, so it is asked again in a
    follow-up job, which is still running when the run stops. The price of one pass."""
    provider, model = _provider(server, "anthropic")
    _follow_up_held(server, monkeypatch)
    docs = ["doc 0", "doc 1", "doc 2", "doc 3", "doc 7"]
    _, results = _run_until(
        provider,
        model,
        docs,
        ledger,
        lambda: len(server.jobs) == 2 and server.jobs[1].polls > 0,
        extractor=allama.Extractor(retries=1),
    )
    assert [r.failure.kind for r in results if r.failure] == ["in_provider_job"]
    server.hold = False
    metadata = results[0].metadata
    assert metadata is not None and metadata.cost is not None
    return provider, model, metadata.cost.total


def test_the_answers_of_an_input_in_a_follow_up_job_are_paid_in_the_ledger(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "follow.sqlite"
    provider, model, price = _first_run(server, monkeypatch, ledger)
    book = Ledger(ledger)
    try:
        total, unfinished = book.paid()
    finally:
        book.close()
    assert total == 5 * price  # four answers, and doc 7's first
    assert list(unfinished.values()) == [str(price)]
    docs = ["doc 0", "doc 1", "doc 2", "doc 3", "doc 7"]
    run = _batch_run(provider, model, docs, ledger, extractor=allama.Extractor(retries=1))
    results = sorted(run, key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=n) for n in (0, 1, 2, 3, 7)]
    metadata = results[4].metadata
    assert metadata is not None and metadata.passes == 2 and metadata.cost is not None
    assert metadata.cost.total == 2 * price
    assert run.summary.cost == 6 * price
    assert run.summary.cost_earlier == 5 * price  # doc 7's first pass too, counted once


def test_a_budgeted_run_counts_what_an_input_in_a_follow_up_job_paid_before_it(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "budget.sqlite"
    provider, model, price = _first_run(server, monkeypatch, ledger)
    monkeypatch.setattr(_jobs.JobRunner, "_guessed_cost", lambda self, item: price)
    budget = price * Decimal("7.5")
    docs = ["doc 0", "doc 1", "doc 2", "doc 3", "doc 7", "doc 4", "doc 5", "doc 6"]
    run = _batch_run(
        provider, model, docs, ledger, extractor=allama.Extractor(retries=1), max_cost=budget
    )
    results = sorted(run, key=lambda r: r.index)
    # Five passes paid before it, doc 7's follow-up out (guessed at one): room for one more.
    assert [r.value for r in results[:6]] == [Doc(n=n) for n in (0, 1, 2, 3, 7, 4)]
    assert [r.failure.kind for r in results[6:] if r.failure] == ["not_started"] * 2
    assert sum(server.answered.values()) == 7  # seven passes paid, within the budget
    assert run.summary.cost == 7 * price and run.summary.cost <= budget
    assert run.summary.past_budget is None


# 3. A billed row whose line cannot be read is counted paid.


_DOC_1_ANSWER = b'\\"n\\": 1}'
"""Doc 1's answer as a line of any provider's results holds it (JSON in JSON)."""


def _doc_1_line_cut_once(monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    """The first results read (`reader`: the fake's handler of them) come with the line of
    doc 1's answer cut short, as a download cut mid-line leaves it."""
    import _provider_batch_server

    read = getattr(_provider_batch_server._Handler, reader)
    cut: list[bool] = []

    def reading(handler: Any, *args: Any) -> Any:
        send = handler.send_body

        def cutting(status: int, headers: Any, content: bytes) -> Any:
            if not cut and _DOC_1_ANSWER in content:
                cut.append(True)
                lines = content.split(b"\n")
                content = b"\n".join(
                    line[: len(line) // 2] if _DOC_1_ANSWER in line else line for line in lines
                )
            return send(status, headers, content)

        handler.send_body = cutting
        return read(handler, *args)

    monkeypatch.setattr(_provider_batch_server._Handler, reader, reading)


_READERS = [
    ("anthropic", "anthropic_results"),
    ("openai-chat", "openai_file_content"),
    ("gemini", "gemini_download"),
]


def _results_in_a_file(monkeypatch: pytest.MonkeyPatch, family: str) -> None:
    if family == "gemini":
        from allama.adapters._jobs import _gemini

        monkeypatch.setattr(_gemini, "INLINE_BYTES", 0)  # results in a file, to download


@pytest.mark.parametrize(("family", "reader"), _READERS)
def test_a_billed_row_whose_line_cannot_be_read_is_counted_paid_as_it_is_sent_again(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    reader: str,
) -> None:
    _results_in_a_file(monkeypatch, family)
    _doc_1_line_cut_once(monkeypatch, reader)
    provider, model = _provider(server, family)
    run = _batch_run(provider, model, _docs(3), tmp_path / "cut.sqlite")
    results = sorted(run, key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 2 and server.answered[(family, 1)] == 2  # billed twice
    # Its first send was billed (the job counts three answered, two were read): paid, at a
    # cost nothing says, with the pass of its second.
    metadata = results[1].metadata
    assert metadata is not None and metadata.passes == 1 and metadata.cost is None
    assert metadata.cost_missing == (
        "no token counts came with a call that was made (its answer cut off, say) for one of "
        "its calls"
    )
    assert run.summary.cost_unknown == 1
    first = results[0].metadata
    assert first is not None and first.cost is not None
    assert run.summary.cost == 2 * first.cost.total


@pytest.mark.parametrize(("family", "reader"), _READERS[:2])
def test_a_billed_row_whose_line_cannot_be_read_stops_a_budgeted_run(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    reader: str,
) -> None:
    # As for results that answer 404: a cost unknown cannot be kept within a budget.
    _doc_1_line_cut_once(monkeypatch, reader)
    provider, model = _provider(server, family)
    ledger = tmp_path / "cut.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger, max_cost="1")
    results = sorted(run, key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=0), None, Doc(n=2)]
    assert run.summary.stopped is not None
    assert "is unknown (no token counts came with a call that was made" in run.summary.stopped
    assert "the budget of $1 cannot be kept" in run.summary.stopped
    assert len(server.jobs) == 1  # not sent again past the budget
    failure = results[1].failure
    assert failure is not None and failure.kind == "job_missing" and results[1].pending
    # Kept pending with what it paid: a budgeted run after it cannot keep its budget either.
    again = _batch_run(provider, model, _docs(3), ledger, max_cost="1")
    list(again)
    assert again.summary.stopped is not None
    assert "the cost of inputs earlier runs sent is unknown" in again.summary.stopped
    assert len(server.jobs) == 1


def test_rows_no_line_named_are_counted_paid_up_to_the_answers_the_job_counts_unread() -> None:
    state = JobState("msgbatch_1", "ended", True, "completed", billed=2)
    rows = {
        "a": Row("a", RowKind.RESPONSE, 200, b"{}"),
        "b": Row("b", RowKind.MISSING, note="no result", absent=True),
        "c": Row("c", RowKind.EXPIRED, note="the batch reported the request expired"),
        "d": Row("d", RowKind.MISSING, note="no result", absent=True),
    }
    keys = ["a", "b", "c", "d"]
    # Two answered, one read: one of the rows no line named was billed (which, none says).
    assert _jobs._paid_unknown(state, rows, keys) == (rows, frozenset({"b"}))
    # As many answered as read: none of them was.
    counted = JobState("msgbatch_1", "ended", True, "completed", billed=1)
    assert _jobs._paid_unknown(counted, rows, keys) == (rows, frozenset())
    # No counts: nothing bounds them, nor says any was billed.
    unknown = JobState("msgbatch_1", "ended", True, "completed")
    assert _jobs._paid_unknown(unknown, rows, keys) == (rows, frozenset())
