"""Provider batch jobs: rows the provider never ran or billed are not counted paid (an
OpenAI error file gone, results gone of a job that counts fewer rows answered than it
held, a batch cancelled before any ran), and `cancel_jobs` goes on past each job it cannot
cancel, naming them all in one allama error."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import re
import socket
import sqlite3
import threading
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import allama
from _provider_batch_server import ProviderBatchServer, StoredFile
from allama.adapters._http import HttpRequest, HttpResponse
from allama.adapters._jobs import JobAmbiguity, JobState, JobTarget, RowKind
from allama.adapters._jobs._openai import OpenAIJobs
from allama.batch import JobsNotCancelledError, _jobs, cancel_jobs
from allama.batch._ledger import Ledger, LedgerError
from allama.transport import Transport
from test_provider_batch import (
    Doc,
    _anthropic_batch_of_another,
    _batch_run,
    _cut_off,
    _docs,
    _Intercepting,
    _provider,
    _run,
    _run_until,
)


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.001, 0.002))


def _error_file_gone(monkeypatch: pytest.MonkeyPatch, server: ProviderBatchServer) -> None:
    """Every OpenAI job's error file answers 404, for good; its output file reads."""
    import _provider_batch_server

    read = _provider_batch_server._Handler.openai_file_content

    def gone(handler: Any, data: Any, file_id: str) -> Any:
        if any(job.error_file_id == file_id for job in server.jobs):
            raise handler._fail(404, "No such File object.")
        return read(handler, data, file_id)

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_file_content", gone)


def _results_gone(monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    """A job's results answer 404, for good (`reader`: the server's handler of them)."""
    import _provider_batch_server

    def gone(handler: Any, data: Any, *groups: Any) -> Any:
        raise handler._fail(404, "Not found.")

    monkeypatch.setattr(_provider_batch_server._Handler, reader, gone)


# 1. Rows never run or billed are not counted paid.


@pytest.mark.parametrize("budget", [None, "1"])
def test_rows_of_an_openai_error_file_gone_are_unbilled_and_sent_again(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: str | None
) -> None:
    # The job expires with half its rows run: those are in the output file, read; the
    # others, in the error file (never billed), which answers 404. Every row billed is in
    # hand, so those missing were not run: expired rows, sent again, not paid-unknown.
    _error_file_gone(monkeypatch, server)
    server.expire_next = 1
    provider, model = _provider(server, "openai-chat")
    run = _batch_run(provider, model, _docs(4), tmp_path / "err.sqlite", max_cost=budget)
    results = sorted(run, key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=n) for n in range(4)]
    assert run.summary.cost_unknown == 0 and run.summary.stopped is None
    assert len(server.jobs) == 2  # the expired rows, in a follow-up job
    assert sum(server.answered.values()) == 4  # each row run once


def test_a_refused_row_in_a_gone_error_file_does_not_stop_a_budgeted_run(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Doc 13 is an invalid request (400): OpenAI puts it in the error file, unbilled. That
    # file answering 404 leaves no cost unknown, so a budget is kept, not stopped on it.
    _error_file_gone(monkeypatch, server)
    monkeypatch.setattr(_jobs.JobRunner, "_guessed_cost", lambda self, item: Decimal("0.000001"))
    provider, model = _provider(server, "openai-chat")
    docs = [f"doc {n}" for n in (1, 13, 2)]
    run = _batch_run(provider, model, docs, tmp_path / "refused.sqlite", max_cost="1")
    results = sorted(run, key=lambda r: r.index)
    assert run.summary.cost_unknown == 0 and run.summary.stopped is None
    assert [r.value for r in results] == [Doc(n=1), None, Doc(n=2)]
    failure = results[1].failure
    # Sent again as a missing row is, up to max_attempts, and failed as one: not as lost.
    assert failure is not None and failure.kind == "job_missing"
    assert "error file" in failure.message and "unbilled" in failure.message


@pytest.mark.parametrize(
    ("family", "reader"),
    [
        ("openai-chat", "openai_file_content"),
        ("anthropic", "anthropic_results"),
        ("gemini", "gemini_download"),
    ],
)
def test_results_gone_count_no_more_rows_paid_than_the_job_answered(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    reader: str,
) -> None:
    # The job expires having run two of its four rows (its counts say so); its results
    # then answer 404 for good. Its rows fail (any may be one of those paid), but no more
    # than two are counted paid at a cost unknown.
    if family == "gemini":
        from allama.adapters._jobs import _gemini

        monkeypatch.setattr(_gemini, "INLINE_BYTES", 0)  # results in a file, to download
    _results_gone(monkeypatch, reader)
    server.expire_next = 1
    provider, model = _provider(server, family)
    run = _batch_run(provider, model, _docs(4), tmp_path / "gone.sqlite")
    results = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind for r in results if r.failure] == ["job_missing"] * 4
    assert sum(server.answered.values()) == 2
    assert run.summary.cost_unknown == 2
    assert len(server.jobs) == 1  # none bought again unasked


@pytest.mark.parametrize(
    ("family", "reader"),
    [("anthropic", "anthropic_results"), ("openai-chat", "openai_file_content")],
)
def test_a_job_cancelled_before_any_row_ran_whose_results_are_gone_is_not_paid(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    reader: str,
) -> None:
    # Cancelled before anything ran (Anthropic: succeeded 0, canceled 3; OpenAI: no output
    # file, the rows in the error file), its results then answering 404: its rows fail as
    # cancelled rows do, unpaid, and a budget is not stopped on them.
    provider, model = _provider(server, family)
    ledger = tmp_path / "cancelled.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(3), ledger, lambda: any(job.polls for job in server.jobs))
    assert asyncio.run(cancel_jobs(str(ledger), provider)) == [server.jobs[0].id]
    server.hold = False
    _results_gone(monkeypatch, reader)
    run = _batch_run(provider, model, _docs(3), ledger, max_cost="1")
    results = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 3
    assert sum(server.answered.values()) == 0
    assert run.summary.cost_unknown == 0 and run.summary.stopped is None
    assert len(server.jobs) == 1  # cancelled rows are not sent again


def test_results_gone_of_a_job_whose_counts_are_unknown_are_still_counted_paid(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gateway that drops `request_counts`: nothing bounds the rows that may have been
    # paid, so every one is counted so, as before.
    import _provider_batch_server

    view = _provider_batch_server.ProviderBatchServer.openai_batch

    def no_counts(server: Any, job: Any) -> Any:
        shown = view(server, job)
        shown.pop("request_counts", None)
        return shown

    monkeypatch.setattr(_provider_batch_server.ProviderBatchServer, "openai_batch", no_counts)
    _results_gone(monkeypatch, "openai_file_content")
    server.expire_next = 1
    provider, model = _provider(server, "openai-chat")
    run = _batch_run(provider, model, _docs(4), tmp_path / "nocounts.sqlite")
    results = list(run)
    assert [r.failure.kind for r in results if r.failure] == ["job_missing"] * 4
    assert run.summary.cost_unknown == 4


def _drive(steps: Any, bodies: list[bytes | None]) -> Any:
    """Drive a dialect's steps with answers (`None`: a 404)."""
    answers = iter(bodies)
    try:
        next(steps)
        while True:
            body = next(answers)
            steps.send(HttpResponse(404, {}, b"") if body is None else HttpResponse(200, {}, body))
    except StopIteration as done:
        return done.value


def _target() -> JobTarget:
    return JobTarget("https://api.example/v1", {}, "gpt-4o-mini", "/chat/completions")


def test_an_openai_output_file_gone_makes_its_rows_lost_bounded_by_the_jobs_count() -> None:
    # The output file gone, the error file read: the rows neither holds may be paid, but no
    # more than `request_counts.completed` of them; with none completed, none was paid.
    error_line = {
        "custom_id": "c",
        "response": None,
        "error": {"code": "batch_expired", "message": "expired"},
    }
    for completed, paid in ((2, {"a", "b"}), (1, {"a"}), (0, set())):
        state = JobState(
            "batch_1",
            "expired",
            True,
            "expired",
            counts={"completed": completed},
            results=("file-out", "file-err"),
            take_what_is_left=True,
            billed=completed,
            unbilled=frozenset({"file-err"}),
        )
        rows = _drive(
            OpenAIJobs().results(_target(), state, ["a", "b", "c"]),
            [None, json.dumps(error_line).encode()],
        )
        assert [rows[k].kind for k in "abc"] == [RowKind.LOST] * 2 + [RowKind.EXPIRED]
        taken, unknown = _jobs._paid_unknown(state, rows, ["a", "b", "c"])
        assert unknown == paid
        kinds = [taken[k].kind for k in "ab"]
        assert kinds == ([RowKind.EXPIRED] * 2 if completed == 0 else [RowKind.LOST] * 2)


def test_an_openai_error_file_gone_at_the_last_read_leaves_unbilled_rows() -> None:
    answered = {
        "custom_id": "a",
        "response": {"status_code": 200, "body": {"choices": []}},
        "error": None,
    }
    state = JobState(
        "batch_1",
        "completed",
        True,
        "completed",
        results=("file-out", "file-err"),
        billed=1,
        unbilled=frozenset({"file-err"}),
    )
    with pytest.raises(allama.errors.NotFoundError):  # read again first: it may be a delay
        _drive(OpenAIJobs().results(_target(), state, ["a", "b"]), [b"", None])
    last = replace(state, take_what_is_left=True)
    rows = _drive(
        OpenAIJobs().results(_target(), last, ["a", "b"]), [json.dumps(answered).encode(), None]
    )
    assert rows["a"].kind == RowKind.RESPONSE
    assert rows["b"].kind == RowKind.MISSING  # sent again, as a missing row is: not lost


def test_the_job_states_say_how_many_rows_were_answered() -> None:
    from allama.adapters._jobs import _anthropic, _gemini, _openai

    openai = _openai._state(
        {
            "id": "batch_1",
            "status": "expired",
            "request_counts": {"total": 4, "completed": 2, "failed": 2},
            "output_file_id": "file-out",
            "error_file_id": "file-err",
        }
    )
    assert (openai.billed, openai.unbilled) == (2, frozenset({"file-err"}))
    anthropic = _anthropic._state(
        {
            "id": "msgbatch_1",
            "processing_status": "ended",
            "cancel_initiated_at": "2025-01-01T00:00:00Z",
            "request_counts": {"succeeded": 0, "canceled": 3},
        }
    )
    assert anthropic.billed == 0
    ended = {"name": "batches/1", "done": True}
    stats = {"state": "BATCH_STATE_CANCELLED", "batchStats": {"requestCount": "3"}}
    assert _gemini._state({**ended, "metadata": stats}).billed == 0  # zeros are left out
    assert _gemini._state({**ended, "metadata": {"state": "BATCH_STATE_CANCELLED"}}).billed is None
    running = _openai._state({"id": "b", "status": "in_progress", "request_counts": {}})
    assert running.billed is None


# 2. cancel_jobs goes on past each job it cannot cancel, and says them all as an allama error.


def test_cancel_jobs_goes_on_past_a_job_that_ended_and_names_it_in_one_allama_error(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "cancel.sqlite"
    server.hold = True
    _run_until(
        provider,
        model,
        _docs(4),
        ledger,
        lambda: len(server.jobs) == 2 and all(job.polls for job in server.jobs),
        job_size=2,
    )
    first, second = server.jobs
    with server.lock:
        server.finish(first, "completed")  # it ended meanwhile
    with pytest.raises(allama.Error) as raised:
        asyncio.run(cancel_jobs(str(ledger), provider))
    error = raised.value
    assert second.cancel_requested and not first.cancel_requested  # the other, still cancelled
    assert isinstance(error, JobsNotCancelledError) and error.kind == "not_cancelled"
    assert error.asked == [second.id]
    (line,) = error.refused
    assert line.startswith(f"{first.id}: invalid_request (")  # the provider's words withheld
    assert first.id in str(error) and f"cancel requested for the others: {second.id}" in str(error)
    assert "Cannot cancel" not in str(error)
    assert not error.retryable


def test_cancel_jobs_with_a_refused_list_still_returns_what_it_asked(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cancel.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(4), ledger, lambda: len(server.jobs) == 2, job_size=2)
    first, second = server.jobs
    first.end = "completed"
    refused: list[str] = []
    assert asyncio.run(cancel_jobs(str(ledger), provider, refused=refused)) == [second.id]
    assert len(refused) == 1 and refused[0].startswith(f"{first.id}: ")


def test_an_ambiguous_cut_off_job_reaches_a_caller_of_cancel_jobs_as_an_allama_error(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    assert issubclass(JobAmbiguity, allama.Error)
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "ambiguous.sqlite"
    _cut_off(provider, model, _docs(2), ledger)
    _anthropic_batch_of_another(server, server.jobs[0].bodies, "other")
    with pytest.raises(allama.Error) as raised:
        asyncio.run(cancel_jobs(str(ledger), provider))
    error = raised.value
    assert isinstance(error, JobsNotCancelledError) and error.asked == []
    (met,) = error.errors
    assert isinstance(met, JobAmbiguity) and met.kind == "ambiguous_job" and met.authored
    (job,) = Ledger(ledger, read_only=True).jobs()
    assert "cannot be told apart" in str(error) and job.tag in str(error)
    assert not job.cancel_requested  # taken back, as with a refused list
    assert not any(made.cancel_requested for made in server.jobs)


def test_a_job_ambiguity_survives_a_round_trip_as_its_kind() -> None:
    error = JobAmbiguity("2 batches could be it")
    back = allama.Error.from_dict(error.to_dict())
    assert isinstance(back, JobAmbiguity) and back.message == error.message


# The cancel command: its exit code, what it records, and how long it waits


def _open_job_ledger(server: ProviderBatchServer, tmp_path: Path) -> Path:
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cancel.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(2), ledger, lambda: bool(server.jobs))
    return ledger


def _pointed_at(ledger: Path, url: str) -> None:
    with contextlib.closing(sqlite3.connect(ledger)) as db:
        db.execute("UPDATE jobs SET base_url = ?", (url,))
        db.commit()


def _cancels_recorded(ledger: Path) -> list[bool]:
    return [row.cancel_requested for row in Ledger(ledger, read_only=True).jobs()]


class _Refuses(http.server.BaseHTTPRequestHandler):
    """A provider that answers every request 401."""

    def do_POST(self) -> None:
        body = b'{"type": "error", "error": {"type": "authentication_error", "message": "no"}}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: Any) -> None:
        pass


def test_a_cancel_the_provider_refused_fails_the_command_and_is_not_recorded(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    ledger = _open_job_ledger(server, tmp_path)
    refusing = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=refusing.serve_forever, daemon=True).start()
    try:
        there = f"http://127.0.0.1:{refusing.server_address[1]}"
        _pointed_at(ledger, there)
        # the job runs on: no success
        assert main(["batch", "cancel", str(ledger), "--base-url", there]) == 1
    finally:
        refusing.shutdown()
        refusing.server_close()
    out = capsys.readouterr().out
    assert out.startswith("not cancelled: msgbatch_") and "status=401" in out
    assert _cancels_recorded(ledger) == [False]  # `status` does not say it was asked


def test_a_cancel_that_reached_no_provider_fails_the_command(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    ledger = _open_job_ledger(server, tmp_path)
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    _pointed_at(ledger, f"http://127.0.0.1:{port}")
    assert main(["batch", "cancel", str(ledger), "--base-url", f"http://127.0.0.1:{port}"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("not cancelled: msgbatch_") and "could not connect" in out


def test_a_cancel_waits_for_a_silent_provider_as_long_as_status_does(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import allama.cli._batch as command_module
    from allama.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    ledger = _open_job_ledger(server, tmp_path)
    silent = socket.create_server(("127.0.0.1", 0))
    kept: list[Any] = []
    threading.Thread(target=lambda: kept.append(silent.accept()), daemon=True).start()
    monkeypatch.setattr(command_module, "_POLL_SECONDS", 1.0)
    try:
        there = f"http://127.0.0.1:{silent.getsockname()[1]}"
        _pointed_at(ledger, there)
        began = time.monotonic()
        assert main(["batch", "cancel", str(ledger), "--base-url", there]) == 1
        assert time.monotonic() - began < 20  # (the transport's own: ten minutes)
    finally:
        silent.close()
    assert "no answer in 1 s" in capsys.readouterr().out


def test_a_job_whose_provider_has_no_key_does_not_keep_the_others_from_being_cancelled(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "two.sqlite"
    server.hold = True
    for family in ("anthropic", "openai-chat"):
        provider, model = _provider(server, family)
        before = len(server.jobs)
        _run_until(provider, model, _docs(2), ledger, lambda n=before: len(server.jobs) > n)
    first, second = server.jobs
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    refused: list[str] = []
    # The fake's one host serves both: confirmed once.
    asked = asyncio.run(cancel_jobs(str(ledger), refused=refused, base_url=server.url))
    assert asked == [second.id]
    assert second.cancel_requested and not first.cancel_requested
    [line] = refused
    assert line.startswith(f"{first.id}: ") and "ANTHROPIC_API_KEY" in line
    with pytest.raises(JobsNotCancelledError) as caught:  # without `refused`: one error
        asyncio.run(cancel_jobs(str(ledger), base_url=server.url))
    assert caught.value.asked == [second.id]


@pytest.mark.parametrize("preset", ["openai", "anthropic", "gemini"])
def test_a_job_targets_repr_shows_no_credential(preset: str) -> None:
    # A job's runner holds its target in its frames: a traceback shown with its locals
    # (an error tracker's) showed the key, the URL's password and its `?key=`.
    from allama.providers._jobs import provider_jobs

    made = allama.provider(
        preset,
        api_key="sk-LEAK-KEY-1",
        base_url="https://u:LEAK-PASSWORD@gw.example.com/v1?key=LEAK-QUERY&api-version=1",
    )
    target = provider_jobs(made).target("m")
    shown = repr(target)
    assert "LEAK" not in shown
    assert "base_url='https://gw.example.com/v1'" in shown and "'key': '<redacted>'" in shown


# A job's files (the documents' text, the answers) are deleted at the provider once the
# ledger keeps its rows, never before.


def _in_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemini's jobs sent in an uploaded file, answered in a responses file (as one past
    19 MB is); OpenAI's always are."""
    from allama.adapters._jobs import _gemini

    monkeypatch.setattr(_gemini, "INLINE_BYTES", 0)


def _held(job: Any) -> list[str]:
    """The files the fake keeps for `job`: its input file, then its results."""
    if job.provider == "openai":
        files = [job.input_file_id, job.output_file_id, job.error_file_id]
    else:
        files = [job.input_file, job.responses_file]
    return [name for name in files if name]


def _ledger_at_each_delete(
    monkeypatch: pytest.MonkeyPatch, ledger: Path
) -> list[tuple[str, list[str]]]:
    """Each file the fake is asked to delete, with the statuses of the ledger's rows at
    that moment (read as another process would)."""
    import _provider_batch_server

    handler = _provider_batch_server._Handler
    seen: list[tuple[str, list[str]]] = []

    def watched(delete: Any) -> Any:
        def deleting(self: Any, data: bytes, file_id: str) -> Any:
            reader = Ledger(ledger, read_only=True)
            try:
                seen.append((file_id, [row.status for row in reader.rows()]))
            finally:
                reader.close()
            return delete(self, data, file_id)

        return deleting

    for name in ("openai_file_delete", "gemini_file_delete"):
        monkeypatch.setattr(handler, name, watched(getattr(handler, name)))
    return seen


def _run_as(
    mode: str, provider: Any, model: str, docs: list[str], ledger: Path
) -> list[allama.BatchResult[Doc]]:
    """A provider-batch run of `docs`, by `batch` (`mode` "sync") or `abatch`."""
    if mode == "sync":
        return sorted(_batch_run(provider, model, docs, ledger), key=lambda r: r.index)

    async def main() -> list[allama.BatchResult[Doc]]:
        run = allama.abatch(
            provider,
            Doc,
            docs,
            request=allama.ChatRequest(model).system("Read the number."),
            ledger=ledger,
            provider_batch=True,
            poll_interval=0.001,
            backoff=0.001,
        )
        return [result async for result in run]

    return sorted(asyncio.run(main()), key=lambda r: r.index)


def _short(name: str) -> str:
    """A file's id as the fake's route reads it (Gemini's without `files/`)."""
    return name.removeprefix("files/")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("family", ["openai-chat", "gemini"])
def test_a_jobs_files_are_deleted_at_the_provider_once_its_rows_are_kept(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    mode: str,
) -> None:
    # Doc 13 is refused (400): OpenAI answers it in an error file beside the output file.
    _in_files(monkeypatch)
    ledger = tmp_path / "run.sqlite"
    seen = _ledger_at_each_delete(monkeypatch, ledger)
    provider, model = _provider(server, family)
    results = _run_as(mode, provider, model, ["doc 1", "doc 13", "doc 2"], ledger)
    assert [r.value for r in results] == [Doc(n=1), None, Doc(n=2)]
    (job,) = server.jobs
    held = _held(job)
    assert len(held) == (3 if family == "openai-chat" else 2)
    # The input file (the documents' text) and the results (the answers) are gone.
    assert server.deleted == held and server.files == {}
    # Each deleted only once the ledger held every row's end.
    assert seen == [(_short(name), ["done", "failed", "done"]) for name in held]


@pytest.mark.parametrize("dies", ["disk full", "killed"])
@pytest.mark.parametrize("family", ["openai-chat", "gemini"])
def test_a_run_that_ends_before_its_rows_are_kept_leaves_the_jobs_files_for_the_next(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    dies: str,
) -> None:
    # The job's results are read, and the ledger cannot keep its rows (a full disk), or
    # the run dies as it writes them: the answers, paid for, are only in the job's files.
    _in_files(monkeypatch)
    provider, model = _provider(server, family)
    ledger = tmp_path / "run.sqlite"

    def unwritten(self: Ledger, key: str, **outcome: Any) -> bool:
        if dies == "disk full":
            raise sqlite3.OperationalError("database or disk is full")
        raise RuntimeError("died here")

    with (
        mock.patch.object(Ledger, "_finish", unwritten),
        pytest.raises(LedgerError if dies == "disk full" else RuntimeError),
    ):
        list(_batch_run(provider, model, _docs(3), ledger))
    (job,) = server.jobs
    assert server.result_downloads[job.id] == 1
    assert server.deleted == [] and sorted(server.files) == sorted(_held(job))
    # The next run reads the answers from the files (nothing sent again), then deletes them.
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1 and server.result_downloads[job.id] == 2
    assert server.deleted == _held(job) and server.files == {}


def test_a_jobs_file_that_cannot_be_deleted_is_a_warning_and_its_results_stand(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    handler = _provider_batch_server._Handler
    delete = handler.openai_file_delete
    broken = "The server had an error deleting the file."

    def refusing(self: Any, data: bytes, file_id: str) -> Any:
        if any(file_id in (job.input_file_id, job.output_file_id) for job in server.jobs):
            raise self._fail(500, broken)
        return delete(self, data, file_id)

    monkeypatch.setattr(handler, "openai_file_delete", refusing)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    with pytest.warns(RuntimeWarning) as warned:
        run = _batch_run(provider, model, ["doc 1", "doc 13", "doc 2"], ledger)
        results = sorted(run, key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=1), None, Doc(n=2)]
    (job,) = server.jobs
    (tag,) = run.summary.jobs
    downloads = server.result_downloads[job.id]
    why = f"server ({len(broken)} chars withheld) [provider=openai, status=500]"
    said = [
        f"the input file {job.input_file_id} of job {job.id}, whose results are kept, could "
        f"not be deleted ({why}): it holds the requests' text; delete it at the provider",
        f"the output file {job.output_file_id} of job {job.id}, whose results are kept, "
        f"could not be deleted ({why}): it holds the answers; delete it at the provider",
    ]
    assert [str(w.message) for w in warned if w.category is RuntimeWarning] == said
    assert run.summary.jobs[tag].endswith(", collected; " + "; ".join(said))
    assert run.summary.failed == 1 and run.summary.done == 2
    # The error file was deleted all the same; the others are left, named.
    assert server.deleted == [job.error_file_id]
    assert sorted(server.files) == sorted([job.input_file_id, job.output_file_id])
    # The results are the ledger's: a run again gives them, reading nothing at the provider.
    reader = Ledger(ledger, read_only=True)
    try:
        assert [row.status for row in reader.rows()] == ["done", "failed", "done"]
    finally:
        reader.close()
    again = _run(provider, model, ["doc 1", "doc 13", "doc 2"], ledger)
    assert [r.value for r in again] == [Doc(n=1), None, Doc(n=2)]
    assert len(server.jobs) == 1 and server.result_downloads[job.id] == downloads


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("family", ["openai-chat", "gemini"])
def test_a_job_collected_by_a_later_run_has_its_files_deleted_by_that_run(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    mode: str,
) -> None:
    # The run that made the job stops while it is out; the next one collects it, knowing
    # its files only from the provider's view of the job.
    _in_files(monkeypatch)
    provider, model = _provider(server, family)
    ledger = tmp_path / "run.sqlite"
    server.hold = True
    _, left = _run_until(provider, model, _docs(3), ledger, lambda: len(server.jobs) == 1)
    assert [r.failure.kind for r in left if r.failure] == ["in_provider_job"] * 3
    (job,) = server.jobs
    assert server.deleted == [] and len(server.files) == 1  # its input file, uploaded
    server.hold = False
    results = _run_as(mode, provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1 and server.result_downloads[job.id] == 1
    assert server.deleted == _held(job) and server.files == {}


# A run killed while its input file was uploaded (the request sent, its answer never back):
# the file, the documents' text, is known by its name alone; the next run finds and deletes
# it. A file once deleted is no longer recorded for its job.


class _DiesAsItsFileIsUploaded(Transport):
    """A process that dies while its input file is uploaded: the upload reaches the
    provider, which keeps the file, and its answer (the file's id) never comes back."""

    def send(self, request: HttpRequest) -> HttpResponse:
        answer = super().send(request)
        # OpenAI's one request; Gemini's second, to the upload URL its first answer named.
        if request.method == "POST" and (
            request.url.endswith("/v1/files") or "upload_id=" in request.url
        ):
            raise RuntimeError("the process died here")
        return answer


class _CountsListings(Transport):
    """Counts the pages of files asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = 0

    def send(self, request: HttpRequest) -> HttpResponse:
        if request.method == "GET" and request.url.endswith("/files"):
            self.pages += 1
        return super().send(request)


def _older_files(server: ProviderBatchServer, family: str, count: int) -> list[str]:
    """`count` input files of other jobs, uploaded three days ago."""
    openai = family.startswith("openai")
    then = time.time() - 3 * 86400
    stored = []
    for n in range(count):
        tag = f"allama-{n:020}"
        name = f"file-old{n:014}" if openai else f"files/old{n:07}"
        stored.append(
            server.store(
                StoredFile(name, b"{}\n", f"{tag}.jsonl" if openai else tag, "batch", then)
            )
        )
    return [each.id for each in stored]


def _killed_as_its_file_is_uploaded(
    server: ProviderBatchServer, family: str, ledger: Path
) -> tuple[str, str]:
    """The tag of the job a run killed while uploading its file left, and that file."""
    provider, model = _provider(server, family, _DiesAsItsFileIsUploaded())
    with pytest.raises(RuntimeError, match="died here"):
        list(_batch_run(provider, model, _docs(2), ledger))
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.state, row.job_id, row.input_file) == ("submitting", None, None)
    (uploaded,) = [
        each for each in server.files.values() if not each.id.startswith(("file-old", "files/old"))
    ]
    assert uploaded.filename == (f"{row.tag}.jsonl" if family == "openai-chat" else row.tag)
    return row.tag, uploaded.id


@pytest.mark.parametrize("family", ["openai-chat", "gemini"])
def test_a_file_whose_upload_was_cut_off_is_found_by_its_name_and_deleted_by_the_next_run(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    _in_files(monkeypatch)
    # Other jobs' files, older: Gemini lists its files in no order it promises (the fake,
    # oldest first: the file looked for on the second page), OpenAI newest first.
    others = _older_files(server, family, 150)
    ledger = tmp_path / "killed.sqlite"
    tag, uploaded = _killed_as_its_file_is_uploaded(server, family, ledger)
    listing = _CountsListings()
    provider, model = _provider(server, family, listing)
    run = _batch_run(provider, model, _docs(2), ledger)
    results = sorted(run, key=lambda r: r.index)
    assert [(r.value, r.attempts) for r in results] == [(Doc(n=0), 1), (Doc(n=1), 1)]
    # Looked for, not found: its file found by its name, and deleted, before its inputs
    # were sent in a new job; no other file touched. OpenAI's listing stops at the first
    # page of files older than the submission; Gemini's reads every page.
    assert server.deleted[0] == uploaded and uploaded not in server.files
    assert all(name in server.files for name in others)
    assert listing.pages == (1 if family == "openai-chat" else 2)
    said = (
        f"the provider made no job of it (none was found there); its input file {uploaded}, "
        "uploaded but never recorded, was found by its name and deleted"
    )
    unmade, made = Ledger(ledger, read_only=True).jobs()
    assert (unmade.tag, unmade.state, unmade.error) == (tag, "not_submitted", said)
    assert run.summary.jobs[tag] == f"not submitted: {said}"
    assert made.state == "collected" and len(server.jobs) == 1


def test_a_listing_of_files_that_fails_is_a_warning_and_the_run_goes_on(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "killed.sqlite"
    tag, uploaded = _killed_as_its_file_is_uploaded(server, "openai-chat", ledger)
    refused = HttpResponse(
        500,
        {"content-type": "application/json"},
        json.dumps(
            {"error": {"message": "The server had an error.", "type": "server_error"}}
        ).encode(),
    )

    def lists_files(request: HttpRequest) -> bool:
        return request.method == "GET" and request.url.endswith("/files")

    provider, model = _provider(server, "openai-chat", _Intercepting(lists_files, refused, 1))
    with pytest.warns(RuntimeWarning) as warned:
        run = _batch_run(provider, model, _docs(2), ledger)
        assert [r.value for r in sorted(run, key=lambda r: r.index)] == [Doc(n=0), Doc(n=1)]
    words = (
        f"the provider's files could not be listed to find the input file of job {tag}, "
        "which was not made, should its upload have been cut off (server (24 chars withheld) "
        "[provider=openai, status=500]): it would hold the requests' text; look for a file "
        "named after the job at the provider and delete it"
    )
    assert [str(w.message) for w in warned if w.category is RuntimeWarning] == [words]
    assert uploaded in server.files and len(server.jobs) == 1  # left, and said so
    said = f"the provider made no job of it (none was found there); {words}"
    unmade, made = Ledger(ledger, read_only=True).jobs()
    assert (unmade.state, unmade.error) == ("not_submitted", said)
    assert run.summary.jobs[tag] == f"not submitted: {said}"
    assert made.state == "collected"


def _pages(steps: Any, pages: list[Any]) -> tuple[list[HttpRequest], Any]:
    """The requests a dialect's steps send, answered by `pages` in turn, and what they
    return."""
    sent: list[HttpRequest] = []
    try:
        http = next(steps)
        for page in pages:
            sent.append(http)
            http = steps.send(HttpResponse(200, {}, json.dumps(page).encode()))
    except StopIteration as done:
        return sent, done.value
    raise AssertionError(f"asked for more than {len(pages)} pages")


def test_openai_files_named_after_a_job_are_listed_back_to_before_its_submission() -> None:
    since = 1_800_000_000.0
    name = "allama-0123456789abcdef0123.jsonl"

    def file(file_id: str, filename: str, ago: float) -> dict[str, Any]:
        return {"id": file_id, "filename": filename, "created_at": int(since - ago)}

    pages = [
        {
            "data": [file("file-1", name, -10), file("file-2", "other.jsonl", -5)],
            "has_more": True,
        },
        # Within the hour before it (clocks a moment apart), then older: the last page read.
        {
            "data": [file("file-3", name, 100), file("file-4", "other.jsonl", 3700)],
            "has_more": True,
        },
    ]
    steps = OpenAIJobs().uploads(_target(), name.removesuffix(".jsonl"), since)
    sent, found = _pages(steps, pages)
    assert found == ["file-1", "file-3"]
    assert [(http.method, http.url, http.params) for http in sent] == [
        ("GET", "https://api.example/v1/files", {"purpose": "batch", "limit": "100"}),
        (
            "GET",
            "https://api.example/v1/files",
            {"purpose": "batch", "limit": "100", "after": "file-2"},
        ),
    ]


def test_a_files_listing_longer_than_a_look_goes_through_is_an_allama_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from allama.adapters._jobs import _gemini, _openai

    monkeypatch.setattr(_openai, "MOST_PAGES", 2)
    monkeypatch.setattr(_gemini, "MOST_PAGES", 2)
    new = {"id": "file-n", "filename": "x.jsonl", "created_at": 1_900_000_000}
    openai = _openai.OpenAIJobs().uploads(_target(), "allama-x", 1_800_000_000.0)
    gemini = _gemini.GeminiJobs().uploads(_target(), "allama-x", 1_800_000_000.0)
    for steps, page in [
        (openai, {"data": [new], "has_more": True}),
        (gemini, {"files": [{"name": "files/n"}], "nextPageToken": "more"}),
    ]:
        with pytest.raises(allama.Error) as raised:
            _pages(steps, [page, page])
        assert str(raised.value) == (
            "the provider lists more than 200 files, and allama looked no further"
        )


def test_gemini_files_named_after_a_job_are_found_on_any_page() -> None:
    from allama.adapters._jobs._gemini import GeminiJobs

    tag = "allama-0123456789abcdef0123"
    pages = [
        # Older than the submission, first: no order is promised, and the look goes on.
        {
            "files": [
                {"name": "files/a", "displayName": "other", "createTime": "2020-01-01T00:00:00Z"}
            ],
            "nextPageToken": "t1",
        },
        {"files": [{"name": "files/b", "displayName": tag}, {"name": "files/c"}]},
    ]
    sent, found = _pages(GeminiJobs().uploads(_target(), tag, 1_800_000_000.0), pages)
    assert found == ["files/b"]
    assert [http.params for http in sent] == [
        {"pageSize": "100"},
        {"pageSize": "100", "pageToken": "t1"},
    ]


def test_a_listed_file_without_its_id_or_name_is_passed_over_not_a_key_error() -> None:
    # A `KeyError` from the provider's own listing ended a run that was only tidying up.
    from allama.adapters._jobs._gemini import GeminiJobs

    tag = "allama-0123456789abcdef0123"
    openai_pages = [
        {
            "data": [
                {"filename": f"{tag}.jsonl", "created_at": 1_800_000_100},
                {"id": "file-2", "filename": f"{tag}.jsonl", "created_at": 1_800_000_050},
                {"filename": "other.jsonl", "created_at": 1_800_000_000},
            ],
            "has_more": True,
        }
    ]
    sent, found = _pages(OpenAIJobs().uploads(_target(), tag, 1_800_000_000.0), openai_pages)
    assert (found, len(sent)) == (["file-2"], 1)
    gemini_pages = [{"files": [{"displayName": tag}, {"name": "files/b", "displayName": tag}]}]
    _, found = _pages(GeminiJobs().uploads(_target(), tag, 1_800_000_000.0), gemini_pages)
    assert found == ["files/b"]


def test_only_the_batch_apis_whose_jobs_read_an_uploaded_file_name_uploads() -> None:
    from allama.adapters._jobs import NamesUploads, load_job_dialect

    assert [
        isinstance(load_job_dialect(name), NamesUploads)
        for name in ("openai", "gemini", "anthropic")
    ] == [True, True, False]


@pytest.mark.parametrize("family", ["openai-chat", "gemini"])
def test_a_jobs_input_file_is_recorded_until_it_is_deleted(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    # Recorded as uploaded; once deleted with the job's results, no longer (`allama batch
    # status` names a file recorded).
    _in_files(monkeypatch)
    provider, model = _provider(server, family)
    ledger = tmp_path / "run.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(2), ledger, lambda: len(server.jobs) == 1)
    (job,) = server.jobs
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert row.input_file == (job.input_file_id if family == "openai-chat" else job.input_file)
    server.hold = False
    assert [r.value for r in _run(provider, model, _docs(2), ledger)] == [Doc(n=0), Doc(n=1)]
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.state, row.input_file) == ("collected", None) and server.files == {}


def test_the_input_file_of_a_job_never_made_is_no_longer_recorded_once_deleted(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    from test_provider_batch import _killed_after_the_upload

    ledger = tmp_path / "killed.sqlite"
    uploaded = _killed_after_the_upload(server, "openai-chat", _docs(2), ledger)
    provider, model = _provider(server, "openai-chat")
    assert [r.value for r in _run(provider, model, _docs(2), ledger)] == [Doc(n=0), Doc(n=1)]
    unmade, _ = Ledger(ledger, read_only=True).jobs()
    assert (unmade.state, unmade.input_file) == ("not_submitted", None)
    assert uploaded.id in server.deleted


# 3. `status` and `cancel` send the key from the environment only where the caller would:
# a ledger is a file anyone may have written, and its job's base URL any host.


def _refusal(origin: str, preset: str, own: str, variable: str) -> str:
    return (
        f"the ledger sends this job's calls to {origin}, not to {preset}'s own ({own}) nor one "
        f"{variable} names: the key from the environment is not sent to a host a ledger names "
        f"(anyone may have written it); if its runs were yours, confirm it with --base-url "
        f"{origin} (base_url= from Python)"
    )


def _anthropic_refusal(server: ProviderBatchServer) -> str:
    return _refusal(server.url, "anthropic", "https://api.anthropic.com", "ANTHROPIC_BASE_URL")


def test_a_ledger_naming_another_host_gets_no_key_from_the_environment(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch._jobs import EndpointNotConfirmedError, poll_job

    # A ledger whose job names a host (here the fake's) that is not Anthropic's own.
    ledger = _open_job_ledger(server, tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-ENV-KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    [job] = server.jobs
    polls = job.polls
    (row,) = Ledger(ledger, read_only=True).jobs()
    with pytest.raises(EndpointNotConfirmedError) as caught:
        asyncio.run(poll_job(row))
    assert str(caught.value) == _anthropic_refusal(server)
    refused: list[str] = []
    assert asyncio.run(cancel_jobs(str(ledger), refused=refused)) == []
    assert refused == [f"{row.tag}: {_anthropic_refusal(server)}"]
    with pytest.raises(JobsNotCancelledError) as not_cancelled:
        asyncio.run(cancel_jobs(str(ledger)))
    assert isinstance(not_cancelled.value.errors[0], EndpointNotConfirmedError)
    # Nothing sent, and no cancel recorded.
    assert (job.polls, job.cancel_requested) == (polls, False)
    assert _cancels_recorded(ledger) == [False]


@pytest.mark.parametrize("how", ["base_url", "environment"])
def test_a_ledger_naming_a_host_the_caller_confirms_is_asked(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    from allama.batch._jobs import poll_job

    ledger = _open_job_ledger(server, tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-ENV-KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    # The host is confirmed, whatever the path: `--base-url` given, or the variable the
    # preset reads its base URL from.
    given: dict[str, str] = {}
    if how == "base_url":
        given["base_url"] = f"{server.url}/another/path"
    else:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    [job] = server.jobs
    (row,) = Ledger(ledger, read_only=True).jobs()
    state = asyncio.run(poll_job(row, **given))
    assert (state.id, state.ended) == (job.id, False)
    assert asyncio.run(cancel_jobs(str(ledger), **given)) == [job.id]
    assert job.cancel_requested


def test_a_ledger_naming_the_providers_own_endpoint_is_asked_unconfirmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch._jobs import job_provider

    # A run against the default endpoint records it: the normal case.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ENV-KEY")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    book = Ledger(tmp_path / "own.sqlite", settings={"provider": "openai"})
    book.record_job(
        "allama-own",
        provider="openai",
        base_url="https://API.openai.com:443/v1",
        api="chat",
        model="gpt-4o-mini",
        items=[],
    )
    (row,) = book.jobs()
    book.close()
    jobs = job_provider(row)
    assert jobs.provider.base_url == "https://API.openai.com:443/v1"


@pytest.mark.parametrize(
    ("recorded", "origin"),
    [
        # The ledger's user, password and query are not shown: they may be secrets.
        ("https://user:pw@evil.example/v1?key=QUERY-SECRET", "https://evil.example"),
        ("http://api.openai.com/v1", "http://api.openai.com"),  # not over HTTPS
        ("https://api.openai.com:8443/v1", "https://api.openai.com:8443"),
        ("https://api.openai.com.evil.example/v1", "https://api.openai.com.evil.example"),
        ("http://[::1]:8080/v1", "http://[::1]:8080"),
    ],
)
def test_a_refused_ledger_endpoint_is_named_by_its_origin_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: str, origin: str
) -> None:
    from allama.batch._jobs import EndpointNotConfirmedError, job_provider

    monkeypatch.setenv("OPENAI_API_KEY", "sk-ENV-KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gw.mine.example/v1")
    book = Ledger(tmp_path / "theirs.sqlite", settings={"provider": "openai"})
    book.record_job(
        "allama-t", provider="openai", base_url=recorded, api="chat", model="m", items=[]
    )
    (row,) = book.jobs()
    book.close()
    with pytest.raises(EndpointNotConfirmedError) as caught:
        job_provider(row)
    said = str(caught.value)
    assert said == _refusal(origin, "openai", "https://api.openai.com", "OPENAI_BASE_URL")
    assert "sk-ENV-KEY" not in said and "pw" not in said and "QUERY" not in said
    # Another host confirmed confirms none of these.
    with pytest.raises(EndpointNotConfirmedError):
        job_provider(row, base_url="https://gw.mine.example.org")
    assert job_provider(row, base_url=f"{origin}/").provider.base_url is not None


def test_a_confirmed_base_url_that_is_no_url_is_refused(tmp_path: Path) -> None:
    from allama.batch._jobs import poll_job

    book = Ledger(tmp_path / "l.sqlite", settings={"provider": "openai"})
    book.record_job("allama-t", provider="openai", base_url=None, api="chat", model="m", items=[])
    book.job_submitted("allama-t", "batch_1")
    (row,) = book.jobs()
    book.close()
    with pytest.raises(ValueError, match=r"^base_url must start with http:// or https://"):
        asyncio.run(cancel_jobs(str(tmp_path / "l.sqlite"), base_url="gw.example"))
    with pytest.raises(ValueError, match=r"^base_url has a `#` in it"):
        asyncio.run(poll_job(row, base_url="https://evil.example#@api.openai.com"))


# 4. Ids of jobs and files read from a ledger or an answer go into no path but as the
# provider's own: `..`, `/`, `?` and `#` would reach another of its resources, with the key.


def _first_request(steps: Any) -> str:
    http = next(steps)
    return f"{http.method} {http.url}"


_OPENAI = JobTarget(
    base_url="https://api.openai.com/v1",
    headers={"authorization": "Bearer sk-x"},
    model="gpt-4o-mini",
    endpoint="/chat/completions",
)
_GEMINI = JobTarget(
    base_url="https://generativelanguage.googleapis.com/v1beta",
    headers={"x-goog-api-key": "AIza-x"},
    model="gemini-2.5-flash",
    endpoint="",
)
_ANTHROPIC = JobTarget(
    base_url="https://api.anthropic.com/v1",
    headers={"x-api-key": "sk-ant-x"},
    model="claude-sonnet-4-5",
    endpoint="/messages",
)
_OPENAI_BATCH = "an OpenAI batch id (letters, digits, _ and -: batch_...)"
_OPENAI_FILE = "an OpenAI file id (letters, digits, _ and -: file-...)"
_GEMINI_BATCH = "a Gemini batch name (batches/ and letters, digits, _ and -)"
_GEMINI_FILE = "a Gemini file name (files/ and letters, digits, _ and -)"
_ANTHROPIC_BATCH = "an Anthropic batch id (letters, digits, _ and -: msgbatch_...)"


@pytest.mark.parametrize(
    ("dialect", "operation", "target", "given", "shown", "what"),
    [
        # `DELETE /v1/models/ft:...`: a fine-tuned model deleted.
        ("openai", "discard", _OPENAI, {"file": "../models/ft:gpt-4o-mini:org::abc"},
         "'../models/ft:gpt-4o-mini:org::abc'", _OPENAI_FILE),
        ("openai", "cancel", _OPENAI, "../fine_tuning/jobs/ftjob-1",
         "'../fine_tuning/jobs/ftjob-1'", _OPENAI_BATCH),
        ("openai", "state", _OPENAI, "../../v1/files/file-1/content#",
         "'../../v1/files/file-1/content#'", _OPENAI_BATCH),
        ("openai", "state", _OPENAI, "batch_1?limit=1", "'batch_1?limit=1'", _OPENAI_BATCH),
        ("openai", "state", _OPENAI, "batch_1\\x", "'batch_1\\\\x'", _OPENAI_BATCH),
        ("openai", "state", _OPENAI, "", "''", _OPENAI_BATCH),
        ("openai", "state", _OPENAI, "batch_" + "a" * 60 + "/..",
         "'batch_" + "a" * 31 + "...'", _OPENAI_BATCH),
        # A tuned model deleted, a cached content cancelled.
        ("gemini", "discard", _GEMINI, {"file": "tunedModels/my-model"},
         "'tunedModels/my-model'", _GEMINI_FILE),
        ("gemini", "discard", _GEMINI, {"file": "files/a/../../tunedModels/m"},
         "'files/a/../../tunedModels/m'", _GEMINI_FILE),
        ("gemini", "cancel", _GEMINI, "cachedContents/x", "'cachedContents/x'", _GEMINI_BATCH),
        ("gemini", "state", _GEMINI, "batches/a/b", "'batches/a/b'", _GEMINI_BATCH),
        ("gemini", "state", _GEMINI, "batches/", "'batches/'", _GEMINI_BATCH),
        ("anthropic", "cancel", _ANTHROPIC, "../../v1/files/file_1?",
         "'../../v1/files/file_1?'", _ANTHROPIC_BATCH),
        ("anthropic", "state", _ANTHROPIC, "msgbatch_1\u202e", "'msgbatch_1\\u202e'",
         _ANTHROPIC_BATCH),
    ],
)  # fmt: skip
def test_an_id_not_of_the_providers_form_goes_into_no_request(
    dialect: str, operation: str, target: JobTarget, given: Any, shown: str, what: str
) -> None:
    from allama.adapters._jobs import UnsafeIdError, load_job_dialect

    steps = getattr(load_job_dialect(dialect), operation)(target, given)
    with pytest.raises(UnsafeIdError) as caught:
        next(steps)
    assert str(caught.value) == (
        f"the id {shown} is not {what}: it is not put in a request's path, where it could "
        "reach another of the provider's resources with the key"
    )
    assert caught.value.shown == shown


@pytest.mark.parametrize(
    ("dialect", "operation", "target", "given", "sent"),
    [
        ("openai", "state", _OPENAI, "batch_abc-1", "GET https://api.openai.com/v1/batches/batch_abc-1"),
        ("openai", "discard", _OPENAI, {"file": "file-AbC_9"}, "DELETE https://api.openai.com/v1/files/file-AbC_9"),
        ("gemini", "cancel", _GEMINI, "batches/abc-1_x",
         "POST https://generativelanguage.googleapis.com/v1beta/batches/abc-1_x:cancel"),
        ("gemini", "discard", _GEMINI, {"file": "files/batch-abc"},
         "DELETE https://generativelanguage.googleapis.com/v1beta/files/batch-abc"),
        ("anthropic", "cancel", _ANTHROPIC, "msgbatch_01AbC",
         "POST https://api.anthropic.com/v1/messages/batches/msgbatch_01AbC/cancel"),
    ],
)  # fmt: skip
def test_an_id_of_the_providers_form_is_sent_as_it_is(
    dialect: str, operation: str, target: JobTarget, given: Any, sent: str
) -> None:
    from allama.adapters._jobs import load_job_dialect

    assert _first_request(getattr(load_job_dialect(dialect), operation)(target, given)) == sent


@pytest.mark.parametrize(
    ("dialect", "state", "what"),
    [
        ("openai", JobState("batch_1", "completed", True, "completed", results=("../models/m",)),
         _OPENAI_FILE),
        ("gemini", JobState("batches/1", "BATCH_STATE_SUCCEEDED", True, "completed",
                            results={"responsesFile": "tunedModels/m"}), _GEMINI_FILE),
        ("anthropic", JobState("../files/f", "ended", True, "completed"), _ANTHROPIC_BATCH),
    ],
)  # fmt: skip
def test_the_results_an_answer_names_by_an_id_not_of_the_providers_form_are_not_read(
    dialect: str, state: JobState, what: str
) -> None:
    from allama.adapters._jobs import UnsafeIdError, load_job_dialect

    target = {"openai": _OPENAI, "gemini": _GEMINI, "anthropic": _ANTHROPIC}[dialect]
    with pytest.raises(UnsafeIdError, match=f"is not {re.escape(what)}"):
        next(load_job_dialect(dialect).results(target, state, ["k"]))


def test_a_cancel_of_a_ledgers_job_id_not_of_the_providers_form_names_its_tag(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = _open_job_ledger(server, tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-ENV-KEY")
    [job] = server.jobs
    with contextlib.closing(sqlite3.connect(ledger)) as db:
        db.execute("UPDATE jobs SET job_id = ?", ("../../v1/files/file_1?",))
        db.commit()
    (row,) = Ledger(ledger, read_only=True).jobs()
    refused: list[str] = []
    assert asyncio.run(cancel_jobs(str(ledger), refused=refused, base_url=server.url)) == []
    assert refused == [
        f"{row.tag}: the id '../../v1/files/file_1?' is not {_ANTHROPIC_BATCH}: it is not put "
        "in a request's path, where it could reach another of the provider's resources with "
        "the key"
    ]
    assert not job.cancel_requested and _cancels_recorded(ledger) == [False]


# A job's answers quote the token of the request they answer: cut out, however many tokens
# `access_token=`'s function gave since (more than a provider keeps of those it gave lately).

_TOKENS_BETWEEN = 24
"""Tokens asked while a job call is answered (other jobs' calls): more than are kept."""


class _EchoingJobAPI(Transport):
    """OpenAI's Batch API answering a job's read with the token the read went with, after
    other calls asked `access_token=`'s function for `_TOKENS_BETWEEN` tokens meanwhile;
    `failed`: a job refused whole, its words quoting the token, where not a 401."""

    def __init__(self, failed: bool) -> None:
        super().__init__()
        self.failed = failed
        self.jobs: Any = None
        self.sent: list[str] = []

    def send(self, request: HttpRequest) -> HttpResponse:
        token = request.headers["authorization"].removeprefix("Bearer ")
        self.sent.append(token)
        for _ in range(_TOKENS_BETWEEN):
            self.jobs.target("gpt-4o-mini")  # another job's call takes a token of its own
        if not self.failed:
            error = {
                "message": f"Incorrect API key provided: {token}.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
            return HttpResponse(401, {}, json.dumps({"error": error}).encode())
        job = {
            "id": "batch_1",
            "object": "batch",
            "status": "failed",
            "errors": {
                "object": "list",
                "data": [{"code": "invalid_token", "message": f"Token {token} lacks batch scope"}],
            },
        }
        return HttpResponse(200, {}, json.dumps(job).encode())

    async def asend(self, request: HttpRequest) -> HttpResponse:
        return self.send(request)


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("failed", [False, True], ids=["error-status", "job-refused-whole"])
def test_a_job_calls_token_is_redacted_whatever_tokens_were_given_since(
    sync: bool, failed: bool
) -> None:
    from allama.providers._jobs import provider_jobs

    given = iter(range(1, 1000))
    transport = _EchoingJobAPI(failed)
    provider = allama.provider(
        "openai", access_token=lambda: f"entra-token-{next(given):04d}", transport=transport
    )
    transport.jobs = jobs = provider_jobs(provider)
    steps = jobs.dialect.state(jobs.target("gpt-4o-mini"), "batch_1")
    if failed:
        state = asyncio.run(jobs.run(steps, "gpt-4o-mini", sync=sync))
        assert (state.outcome, state.error) == ("failed", "invalid_token")
        assert state.error_words == "Token <redacted> lacks batch scope"
    else:
        with pytest.raises(allama.errors.AuthenticationError) as raised:
            asyncio.run(jobs.run(steps, "gpt-4o-mini", sync=sync))
        assert str(raised.value) == "Incorrect API key provided: <redacted>."
        assert "entra-token" not in raised.value.to_json()
    assert transport.sent == ["entra-token-0001"]
