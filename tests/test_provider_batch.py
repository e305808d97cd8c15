"""Provider batch jobs (`provider_batch=True`) against a local fake of OpenAI's, Anthropic's
and Gemini's batch APIs: every row accounted for, rows validated as live answers are,
failed and expired rows sent again (in a follow-up job or live), jobs recorded in the
ledger so that a run stopped or killed between submission and collection is collected by
the next one, never submitted twice, and costs at batch prices."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import genai_prices
import pytest
from pydantic import BaseModel, field_validator, model_validator

import allama
from _kill import kill_after
from _provider_batch_server import Outcome, ProviderBatchServer
from allama._prices import cost_of
from allama.adapters._http import HttpRequest, HttpResponse
from allama.batch import AsyncBatchRun, BatchResult, BatchRun, _jobs
from allama.batch._jobs import cancel_jobs
from allama.batch._ledger import Ledger
from allama.errors import InvalidRequestError
from allama.transport import Transport


class Doc(BaseModel):
    n: int


FAMILIES: dict[str, tuple[str, dict[str, str], str]] = {
    "openai-chat": ("openai", {}, "gpt-4o-mini"),
    "openai-responses": ("openai", {"api": "responses"}, "gpt-4o-mini"),
    "anthropic": ("anthropic", {}, "claude-sonnet-4-5"),
    "gemini": ("gemini", {}, "gemini-2.5-flash"),
}
JOB_PROVIDER = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gemini",
}


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The looks for a job whose making's answer was lost, as many, over milliseconds
    rather than half a minute."""
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.001, 0.002, 0.004, 0.008, 0.016))


@pytest.fixture
def guessed_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs guessed, before they are submitted, to cost nothing: a guess short of what a
    job costs, whose budget is then reached as its rows are taken in."""
    monkeypatch.setattr(_jobs.JobRunner, "_guessed_cost", lambda self, item: Decimal(0))


def _base(server: ProviderBatchServer, name: str) -> str:
    return {
        "openai": server.openai_base,
        "anthropic": server.anthropic_base,
        "gemini": server.gemini_base,
    }[name]


def _provider(
    server: ProviderBatchServer, family: str, transport: Transport | None = None
) -> tuple[Any, str]:
    name, options, model = FAMILIES[family]
    extra: dict[str, Any] = {} if transport is None else {"transport": transport}
    provider = allama.provider(
        name, base_url=_base(server, name), api_key="test-key", **options, **extra
    )
    return provider, model


def _batch_run(
    provider: Any, model: str, docs: Iterable[str], ledger: Path, **options: Any
) -> BatchRun[Doc]:
    """A provider-batch run of `docs`, polling and backing off at once (the fake is local)."""
    settings: dict[str, Any] = {"poll_interval": 0.001, "backoff": 0.001, **options}
    return allama.batch(
        provider,
        Doc,
        docs,
        request=allama.ChatRequest(model).system("Read the number."),
        ledger=ledger,
        provider_batch=True,
        **settings,
    )


def _run(
    provider: Any, model: str, docs: list[str], ledger: Path, **options: Any
) -> list[BatchResult[Doc]]:
    return sorted(_batch_run(provider, model, docs, ledger, **options), key=lambda r: r.index)


def _docs(count: int) -> list[str]:
    return [f"doc {n}" for n in range(count)]


def test_a_program_that_ends_during_a_sync_runs_job_upload_ends(tmp_path: Path) -> None:
    """As with its live calls: a sync run's job calls are made in daemon threads, so a
    program that ends while a job's upload is slow is not held for as long as it takes."""
    script = tmp_path / "ends.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, threading, time
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import _provider_batch_server as fake
            from pydantic import BaseModel
            import allama

            dispatch = fake._Handler._dispatch

            def slow(self, method):
                if method == "POST" and self.path.startswith("/v1/files"):
                    time.sleep(30)  # an upload that takes long
                return dispatch(self, method)

            fake._Handler._dispatch = slow

            class Doc(BaseModel):
                n: int

            server = fake.ProviderBatchServer().start()
            provider = allama.provider("openai", base_url=server.openai_base, api_key="k")
            run = allama.batch(
                provider, Doc, ["doc 1", "doc 2"], request=allama.ChatRequest("gpt-4o-mini"),
                ledger={str(tmp_path / "jobs.sqlite")!r}, provider_batch=True,
            )
            threading.Thread(target=lambda: next(iter(run), None), daemon=True).start()
            time.sleep(1.5)  # the upload is on its way
            """
        )
    )
    began = time.monotonic()
    subprocess.run([sys.executable, str(script)], check=True, timeout=60)
    assert time.monotonic() - began < 15  # not the upload's 30 s


def test_a_child_process_runs_jobs_after_its_parent_did(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    import warnings

    provider, model = _provider(server, "openai-chat")
    assert [r.value for r in _run(provider, model, _docs(2), tmp_path / "parent.sqlite")] == [
        Doc(n=0),
        Doc(n=1),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # a process with threads
        pid = os.fork()
    if pid == 0:  # nothing of the parent's job calls is waited on here
        try:
            results = _run(provider, model, _docs(3), tmp_path / "child.sqlite")
            os._exit(0 if [r.value for r in results] == [Doc(n=n) for n in range(3)] else 3)
        except BaseException:
            os._exit(4)
    began = time.monotonic()
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() - began < 60:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0


def _first_job_ends_first(server: ProviderBatchServer) -> None:
    """The server's first job ends after 2 polls, every later one after 6."""
    add_job = server.add_job

    def later(job: Any) -> Any:
        job.polls_to_finish = 2 if not server.jobs else 6
        return add_job(job)

    server.add_job = later  # type: ignore[method-assign]


def _overloaded_live(
    server: ProviderBatchServer, meanwhile: Callable[[], None]
) -> Callable[..., Outcome]:
    """The server's answers, but for a live (not batch) call: `meanwhile` happens, and the
    call meets a 503."""
    answer = server.answer

    def busy(family: str, body: Any, *, batch: bool, model: str = "") -> Outcome:
        if batch:
            return answer(family, body, batch=batch, model=model)
        meanwhile()
        return Outcome("overloaded", message="The server is overloaded; try again.")

    return busy


def _clean(count: int) -> list[int]:
    """Documents the fake answers right the first time."""
    return [n for n in range(100, 200) if n % 50 not in (7, 13, 23)][:count]


def _keys_in(server: ProviderBatchServer, family: str) -> list[list[str]]:
    """The documents of each job, in order of submission."""
    jobs = [job for job in server.jobs if job.family == family]
    return [sorted(_doc_of(body) for body in job.bodies) for job in jobs]


def _doc_of(body: Any) -> str:
    text = json.dumps(body)
    start = text.index("doc ")
    end = start + 4
    while end < len(text) and text[end].isdigit():
        end += 1
    return text[start:end]


# Every row accounted for, in each provider's batch API


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("retry", ["batch", "live"])
def test_every_row_is_accounted_for(
    server: ProviderBatchServer, tmp_path: Path, family: str, retry: str
) -> None:
    provider, model = _provider(server, family)
    results = _run(
        provider,
        model,
        _docs(60),
        tmp_path / "run.sqlite",
        extractor=allama.Extractor(retries=1),
        job_retry=retry,
    )
    assert [r.index for r in results] == list(range(60))
    for n, result in enumerate(results):
        if n == 13:  # always refused: the provider's own error, per row
            assert result.failure is not None and result.failure.kind == "invalid_request"
            assert result.attempts == 1
            continue
        assert result.ok, (n, result.failure)
        assert result.value == Doc(n=n)
        assert result.metadata is not None
        assert result.metadata.enforcement is allama.SchemaEnforcement.EXACT
        if n in (7, 57):  # the first answer was no JSON: asked again, a second pass
            assert result.metadata.passes == 2
            assert result.metadata.batch_passes == (2 if retry == "batch" else 1)
            assert result.attempts == 2
        elif n == 23:  # a server error in the job: sent again
            assert result.metadata.passes == 1
            assert result.metadata.batch_passes == (1 if retry == "batch" else 0)
            assert result.attempts == 2
        else:
            assert (result.metadata.passes, result.metadata.batch_passes) == (1, 1)
            assert result.attempts == 1
    jobs = _keys_in(server, family)
    assert jobs[0] == sorted(_docs(60))
    if retry == "batch":
        assert jobs[1:] == [["doc 23", "doc 57", "doc 7"]]
        assert sum(server.live.values()) == 0
    else:
        assert len(jobs) == 1
        assert {n for (_, n), count in server.live.items() if count} == {7, 23, 57}
    # Each document went into a job once, and once more only where it had to.
    for n in range(60):
        assert server.submitted[(family, n)] == (2 if retry == "batch" and n in (7, 23, 57) else 1)


def _recording() -> tuple[Any, Any]:
    """A tracer provider whose spans are kept in memory, and what keeps them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, tracer_provider


@pytest.mark.parametrize("traced", ["both", "extractor"])
@pytest.mark.parametrize("retry", ["batch", "live"])
def test_each_input_of_a_provider_batch_run_has_a_span_of_its_own(
    server: ProviderBatchServer, tmp_path: Path, retry: str, traced: str
) -> None:
    from opentelemetry.trace import StatusCode

    exporter, tracing = _recording()
    # The extractor's tracer spans its calls, as in a run of live extractions, where the
    # provider has none of its own.
    own = {"tracer_provider": tracing} if traced == "both" else {}
    provider = allama.provider("openai", base_url=server.openai_base, api_key="test-key", **own)
    extractor = allama.Extractor(retries=1, tracer_provider=tracing)
    docs = [*_docs(16), "doc 7"]  # 7: no JSON at first, asked again; 13: refused; 16: 7 again
    _run(
        provider, "gpt-4o-mini", docs, tmp_path / "run.sqlite", extractor=extractor, job_retry=retry
    )
    spans = exporter.get_finished_spans()
    (run,) = [span for span in spans if span.name == "batch Doc"]
    inputs = {
        dict(span.attributes or {})["allama.batch.index"]: span
        for span in spans
        if span.name == "batch.input Doc"
    }
    assert sorted(inputs) == list(range(17))
    assert run.context is not None
    # Each the run's child: the copy too, made as the input it repeats ended.
    assert all(
        span.parent is not None and span.parent.span_id == run.context.span_id
        for span in inputs.values()
    )
    assert dict(inputs[16].attributes or {})["allama.batch.duplicate"] is True
    assert run.status.status_code is StatusCode.UNSET
    assert "allama.batch.label" not in dict(run.attributes or {})
    assert [n for n, span in inputs.items() if span.status.status_code is StatusCode.ERROR] == [13]
    assert dict(inputs[7].attributes or {})["allama.extract.passes"] == 2
    calls = [span for span in spans if span.name.startswith("chat ")]
    if retry == "live":  # the live call asking again is under its input's span
        (call,) = calls
        assert call.parent is not None and inputs[7].context is not None
        assert call.parent.span_id == inputs[7].context.span_id
    else:
        assert calls == []


def test_a_live_follow_ups_span_records_no_content_the_extractor_withholds(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follow-up sent live is a call of the run's provider, made outside an extraction:
    its span recorded the document and the answer under the environment's opt-in, though
    the run's extractor said no."""
    from allama._tracing import CAPTURE_CONTENT_ENV

    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    exporter, tracer_provider = _recording()
    provider = allama.provider(
        "openai", base_url=server.openai_base, api_key="k", tracer_provider=tracer_provider
    )
    extractor = allama.Extractor(retries=1, capture_content=False)
    # doc 7's first answer is no JSON: asked again, live.
    (result,) = _run(
        provider,
        "gpt-4o-mini",
        ["secret doc 7"],
        tmp_path / "run.sqlite",
        job_retry="live",
        extractor=extractor,
    )
    assert result.value == Doc(n=7)
    calls = [span for span in exporter.get_finished_spans() if span.name == "chat gpt-4o-mini"]
    assert len(calls) == 1
    recorded = json.dumps(dict(calls[0].attributes or {}))
    assert "gen_ai.input.messages" not in recorded and "secret" not in recorded


def test_a_ledger_that_cannot_be_written_is_named_and_the_jobs_answers_are_collected_later(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    collected = _ledger.Ledger.job_collected

    def full_disk(self: Any, tag: str) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(_ledger.Ledger, "job_collected", full_disk)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    with pytest.raises(allama.LedgerError) as raised:
        _run(provider, model, _docs(5), ledger)
    assert str(raised.value) == (
        f"the ledger `{ledger}` could not be written: database or disk is full; what the "
        "provider's jobs answered stays with the provider, and a run again, with room to "
        "write, collects it"
    )
    monkeypatch.setattr(_ledger.Ledger, "job_collected", collected)
    results = _run(provider, model, _docs(5), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(5)]
    assert sum(server.submitted.values()) == 5  # collected, not submitted again


def test_an_input_end_the_ledger_cannot_write_is_given_and_the_run_raises(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finish = Ledger._finish
    failures = [sqlite3.OperationalError("database or disk is full")]

    def full_disk_once(self: Ledger, key: str, **outcome: Any) -> bool:
        if failures:
            raise failures.pop()
        return finish(self, key, **outcome)

    monkeypatch.setattr(Ledger, "_finish", full_disk_once)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger)
    results: list[BatchResult[Doc]] = []
    with pytest.raises(allama.LedgerError) as raised:
        results.extend(run)
    assert str(raised.value) == (
        f"the ledger `{ledger}` could not be written: database or disk is full; 1 input this "
        "run ended is not in it (given all the same; a run again sends it again); what the "
        "provider's jobs answered stays with the provider, and a run again, with room to "
        "write, collects it"
    )
    # Every value given, the one the ledger could not take said so.
    assert sorted((r.index, r.value) for r in results) == [(n, Doc(n=n)) for n in range(3)]
    assert sum(r.unkept for r in results) == run.summary.unkept == 1


def test_a_live_follow_ups_tokens_are_settled_by_its_usage(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    """Under `tpm`, a follow-up sent live counts toward the limit per minute what its
    answer says it used, as a live run's calls do, not the guess made before it went."""
    provider, model = _provider(server, "openai-chat")
    run = _batch_run(
        provider,
        model,
        _docs(60),
        tmp_path / "run.sqlite",
        extractor=allama.Extractor(retries=1),
        job_retry="live",
        tpm=1_000_000,
    )
    assert sum(result.ok for result in run) == 59
    assert {n for (_, n), count in server.live.items() if count} == {7, 23, 57}
    assert run._runner.limiter._in_window == 3 * 15  # each live answer's usage


def test_the_async_twin_runs_the_same(server: ProviderBatchServer, tmp_path: Path) -> None:
    provider, model = _provider(server, "anthropic")

    async def main() -> list[BatchResult[Doc]]:
        run: AsyncBatchRun[Doc] = allama.abatch(
            provider,
            Doc,
            _docs(10),
            request=allama.ChatRequest(model).system("Read the number."),
            ledger=tmp_path / "async.sqlite",
            provider_batch=True,
            poll_interval=0.001,
            backoff=0.001,
            extractor=allama.Extractor(retries=1),
        )
        return [result async for result in run]

    results = sorted(asyncio.run(main()), key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=n) for n in range(10)]
    assert results[7].metadata is not None and results[7].metadata.batch_passes == 2


# The same encoding, the same record, at batch prices


class _Recording(Transport):
    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []

    def send(self, request: HttpRequest) -> HttpResponse:
        if request.raw is None:
            self.bodies.append(json.loads(request.content))
        return super().send(request)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_row_is_the_live_call_and_gets_the_live_record_at_batch_prices(
    server: ProviderBatchServer, tmp_path: Path, family: str
) -> None:
    recording = _Recording()
    provider, model = _provider(server, family, recording)
    request = allama.ChatRequest(model).system("Read the number.")
    live = allama.extract(provider, Doc, request.user("doc 1"))
    [result] = _run(provider, model, ["doc 1"], tmp_path / "one.sqlite")
    [job] = server.jobs
    assert job.bodies == [recording.bodies[0]]  # the job's request is the live call's body
    record = result.metadata
    assert record is not None
    assert (record.mode, record.enforcement, record.degradations, record.usage) == (
        live.metadata.mode,
        live.metadata.enforcement,
        live.metadata.degradations,
        live.metadata.usage,
    )
    assert record.batch_passes == 1 and live.metadata.batch_passes == 0
    standard, batch = live.metadata.cost, record.cost
    assert standard is not None and batch is not None
    assert batch.batch and not standard.batch
    assert batch.total == live.metadata.priced(batch=True).total  # type: ignore[union-attr]
    assert batch.total < standard.total
    # The record in the ledger keeps the batch cost.
    reader = Ledger(tmp_path / "one.sqlite", read_only=True)
    [row] = list(reader.rows())
    reader.close()
    assert row.cost == str(batch.total)
    assert row.record is not None and row.record["cost"]["batch"] is True


# Stopped, killed or cut off between submission and collection


def _run_until(
    provider: Any,
    model: str,
    docs: list[str],
    ledger: Path,
    ready: Callable[[], bool],
    **options: Any,
) -> tuple[BatchRun[Doc], list[BatchResult[Doc]]]:
    """A provider-batch run stopped (as Ctrl-C stops it) once `ready()`, and its results."""
    run = _batch_run(provider, model, docs, ledger, **options)

    def watch() -> None:
        deadline = time.monotonic() + 10
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.002)
        run.stop("stopped by the test")

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    results = sorted(run, key=lambda result: result.index)
    watcher.join()
    return run, results


def test_a_stop_between_polls_leaves_the_jobs_at_once(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    # A poll every minute: a stop (Ctrl-C, SIGTERM) waits for none of them, as the jobs are
    # left to the provider either way.
    provider, model = _provider(server, "openai-chat")
    server.hold = True
    began = time.monotonic()
    run, results = _run_until(
        provider,
        model,
        _docs(2),
        tmp_path / "stopped.sqlite",
        lambda: bool(server.jobs),
        poll_interval=60,
    )
    assert time.monotonic() - began < 20
    assert [r.failure.kind for r in results if r.failure] == ["in_provider_job"] * 2
    assert run.summary.stopped == "stopped by the test"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_run_stopped_while_its_job_runs_is_collected_by_the_next_once(
    server: ProviderBatchServer, tmp_path: Path, family: str
) -> None:
    provider, model = _provider(server, family)
    ledger = tmp_path / "stopped.sqlite"
    server.hold = True
    run, first = _run_until(
        provider, model, _docs(20), ledger, lambda: any(job.polls for job in server.jobs)
    )
    assert {r.failure.kind for r in first if r.failure} == {"in_provider_job"}
    assert run.summary.in_jobs == 20 and run.summary.failed == 0
    # Each sent once, in the job: the summary counts those attempts, as the ledger does.
    assert [r.attempts for r in first] == [1] * 20 and run.summary.attempts == 20
    assert "20 in provider batch jobs" in run.summary.lines()[0]
    server.hold = False
    second = _run(provider, model, _docs(20), ledger, extractor=allama.Extractor(retries=1))
    assert [r.index for r in second if not r.ok] == [13]
    assert [r.value for r in second if r.ok] == [Doc(n=n) for n in range(20) if n != 13]
    first_job = server.jobs[0]
    # Collected once: each result file read once (OpenAI's output and error files;
    # Gemini's rows come inline, in the job itself).
    files = {"openai": 2, "anthropic": 1, "gemini": 0}[first_job.provider]
    assert server.result_downloads[first_job.id] == files
    assert all(server.submitted[(family, n)] == 1 for n in range(20) if n not in (7, 23))
    assert len([job for job in server.jobs if job.family == family]) == 2  # + the follow-up


def test_a_provider_batch_run_closed_while_its_jobs_run_counts_them(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "closed.sqlite"
    server.hold = True
    run = _batch_run(provider, model, _docs(20), ledger)

    def close_when_polled() -> None:
        deadline = time.monotonic() + 10
        while not any(job.polls for job in server.jobs) and time.monotonic() < deadline:
            time.sleep(0.002)
        run.close()

    closer = threading.Thread(target=close_when_polled, daemon=True)
    closer.start()
    assert list(run) == []
    closer.join()
    summary = run.summary
    assert summary.stopped == "closed before its end (the results were left, or `close()` called)"
    # Every input accounted for: in the job, which goes on at the provider.
    assert (summary.in_jobs, summary.abandoned, summary.done) == (20, 0, 0)
    assert "20 in provider batch jobs" in summary.lines()[0]
    server.hold = False
    again = _run(provider, model, _docs(20), ledger, extractor=allama.Extractor(retries=1))
    assert [r.value for r in again if r.ok] == [Doc(n=n) for n in range(20) if n != 13]
    assert all(server.submitted[("openai-chat", n)] == 1 for n in range(20) if n != 7)


def _dies_before_the_id_is_recorded(self: Ledger, tag: str, job_id: str) -> None:
    """`Ledger.job_submitted` in a process that dies after the job reached the provider."""
    raise RuntimeError("the process died here")


def _cut_off(provider: Any, model: str, docs: list[str], ledger: Path) -> None:
    """A run that dies after its job reached the provider, before its id reached the
    ledger."""
    with (
        mock.patch.object(Ledger, "job_submitted", _dies_before_the_id_is_recorded),
        pytest.raises(RuntimeError, match="died here"),
    ):
        _run(provider, model, docs, ledger)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_submission_cut_off_before_its_id_was_recorded_is_found_not_sent_again(
    server: ProviderBatchServer, tmp_path: Path, family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, family)
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(10), ledger)
    assert len(server.jobs) == 1  # it reached the provider; its id did not reach the ledger
    results = _run(provider, model, _docs(10), ledger, extractor=allama.Extractor(retries=1))
    assert [r.value for r in results] == [Doc(n=n) for n in range(10)]
    assert len(server.jobs) == 2  # the one found, and the follow-up of doc 7
    assert all(server.submitted[(family, n)] == 1 for n in range(10) if n != 7)


def _other_jobs(server: ProviderBatchServer, family: str, count: int) -> None:
    """Jobs of one request each made at the provider meanwhile (another tool, a busy org)."""
    from _provider_batch_server import Job

    provider = JOB_PROVIDER[family]
    prefix = {"openai": "batch_", "anthropic": "msgbatch_", "gemini": "batches/"}[provider]
    with server.lock:
        for n in range(count):
            server.jobs.append(
                Job(
                    provider=provider,
                    family=family,
                    id=server.new_id(prefix),
                    requests=[],
                    keys=[],
                    bodies=[],
                    polls_to_finish=2,
                    expire=False,
                    created=time.time(),
                    metadata={"other": str(n)},
                    display_name=f"other-{n}",
                )
            )


@pytest.mark.parametrize("family", ["openai-chat", "anthropic", "gemini"])
def test_a_cut_off_submission_is_found_behind_many_jobs_made_since(
    server: ProviderBatchServer, tmp_path: Path, family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, family)
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(4), ledger)
    # More than five pages of 100 (a look went no further, and took the job for none).
    _other_jobs(server, family, 620)
    results = _run(provider, model, _docs(4), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(4)]
    assert all(server.submitted[(family, n)] == 1 for n in range(4))


def test_a_provider_listing_more_jobs_than_a_look_reads_stops_the_run_sending_nothing(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, "gemini")  # listed in no promised order: read whole
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(2), ledger)
    server.jobs.reverse()  # the cut-off job listed last
    _other_jobs(server, "gemini", 150)
    monkeypatch.setattr("allama.adapters._jobs._gemini.MOST_PAGES", 1)  # of 200
    run = _batch_run(provider, model, _docs(2), ledger)
    results = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind for r in results if r.failure] == ["in_provider_job"] * 2
    assert run.summary.refused == "ambiguous_job"
    assert run.summary.stopped is not None
    assert "lists more than 100 jobs made since" in run.summary.stopped
    assert all(server.submitted[("gemini", n)] == 1 for n in range(2))


def _provider_clock(monkeypatch: pytest.MonkeyPatch, now: Callable[[], float]) -> None:
    """The fake provider's clock, and the `Date` its answers carry, read from `now`."""
    import email.utils
    import types

    import _provider_batch_server

    clock = types.SimpleNamespace(time=now, monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(_provider_batch_server, "time", clock)
    monkeypatch.setattr(
        _provider_batch_server._Handler,
        "date_time_string",
        lambda handler, timestamp=None: email.utils.formatdate(now(), usegmt=True),
    )


def test_a_cut_off_anthropic_submission_is_found_on_a_provider_whose_clock_is_behind(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic keeps no tag: the batch is told by when it was made, on the provider's
    clock, which its answers' `Date` gives."""
    _provider_clock(monkeypatch, lambda: time.time() - 40.0)
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(4), ledger)
    results = _run(provider, model, _docs(4), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(4)]
    assert len(server.jobs) == 1 and all(server.submitted[("anthropic", n)] == 1 for n in range(4))


@pytest.mark.parametrize("where", ["this machine", "another machine", "asleep"])
def test_a_cut_off_anthropic_submission_is_found_after_the_clock_was_set_back(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The run that looks reads the time on a clock a minute behind the one that recorded
    the submission: the same machine's, set back (a time server's step), or another's."""
    from allama.batch import _ledger

    real = time.time
    slept = 0.0
    _provider_clock(monkeypatch, lambda: real() + slept)  # the provider keeps the true time
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(4), ledger)
    if where == "asleep":
        # Ten minutes asleep (a laptop's lid closed): every clock moves on but the monotonic
        # one; the clock since boot counts them.
        slept = 600.0
        since_boot = _ledger.since_boot
        monkeypatch.setattr(_ledger, "since_boot", lambda: since_boot() + slept)
        monkeypatch.setattr(time, "time", lambda: real() + slept)
    else:
        monkeypatch.setattr(time, "time", lambda: real() - 60.0)
    if where == "another machine":
        monkeypatch.setattr(_ledger, "_BOOT", "another-machine")
    results = _run(provider, model, _docs(4), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(4)]
    # Found, not made again (and paid twice).
    assert len(server.jobs) == 1 and all(server.submitted[("anthropic", n)] == 1 for n in range(4))


def test_the_clock_since_boot_counts_time_asleep() -> None:
    from allama.batch._ledger import since_boot

    if not hasattr(time, "CLOCK_BOOTTIME"):
        pytest.skip("no clock since boot here")
    # Not the monotonic clock, which stops while the machine sleeps.
    assert abs(since_boot() - time.clock_gettime(time.CLOCK_BOOTTIME)) < 0.5


@pytest.mark.parametrize(
    ("date", "ahead"),
    [
        ("Fri, 04 Dec 2026 09:19:36 GMT", 0.0),
        ("Fri Dec  4 09:19:36 2026", 0.0),  # asctime: GMT, as HTTP says, not local time
        ("Fri, 04 Dec 2026 09:19:36 -0000", 0.0),
        ("Fri, 04 Dec 2026 10:19:36 +0100", 0.0),
        ("", None),
        ("yesterday", None),
    ],
)
def test_the_providers_clock_is_read_from_its_date(
    date: str, ahead: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.adapters._jobs import clock_ahead

    monkeypatch.setattr(time, "time", lambda: 1796375976.0)  # 2026-12-04 09:19:36 UTC
    monkeypatch.setenv("TZ", "America/New_York")  # a machine's own zone is not the date's
    time.tzset()
    try:
        headers = {"date": date} if date else {}
        assert clock_ahead(HttpResponse(200, headers, b"{}")) == ahead
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_cut_off_anthropic_submission_is_found_when_no_date_tells_the_providers_clock(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy that drops `Date`, and a provider's clock 40 s behind this machine's."""
    import types

    import _provider_batch_server

    clock = types.SimpleNamespace(
        time=lambda: time.time() - 40.0, monotonic=time.monotonic, sleep=time.sleep
    )
    monkeypatch.setattr(_provider_batch_server, "time", clock)

    def without_date(handler: Any, code: int, message: str | None = None) -> None:
        handler.log_request(code)
        handler.send_response_only(code, message)

    monkeypatch.setattr(_provider_batch_server._Handler, "send_response", without_date)
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(3), ledger)
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1


def test_a_cut_off_job_the_provider_cannot_be_asked_about_stays_for_the_next_run(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(3), ledger)
    listing = _provider_batch_server._Handler.openai_list

    def down(handler: Any, data: Any) -> Any:
        raise handler._fail(500, "The server had an error.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_list", down)
    run = _batch_run(provider, model, _docs(3), ledger)
    results = list(run)  # an orderly stop, not the look's error raised
    assert {r.failure.kind for r in results if r.failure} == {"in_provider_job"}
    assert (run.summary.refused, run.summary.stopped) == (
        "server",
        f"provider batch job {server.jobs[0].metadata['allama_job']} may have been made (its "
        "id never reached the ledger), and the provider's jobs could not be listed to tell "
        "(server): the same command looks for it again",
    )
    monkeypatch.setattr(_provider_batch_server._Handler, "openai_list", listing)
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1


def test_a_submission_that_never_reached_the_provider_is_sent_on_the_next_run(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.providers._jobs import ProviderJobs

    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "never.sqlite"
    submit = ProviderJobs.submit

    def unreachable(self: ProviderJobs, *args: Any) -> Any:
        raise RuntimeError("the process died before sending")

    monkeypatch.setattr(ProviderJobs, "submit", unreachable)
    for _ in range(6):  # cut off more often than max_attempts (5): no attempt was a send
        with pytest.raises(RuntimeError, match="before sending"):
            _run(provider, model, _docs(5), ledger)
    assert server.jobs == []
    monkeypatch.setattr(ProviderJobs, "submit", submit)
    results = _run(provider, model, _docs(5), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(5)]
    assert [row.attempts for row in Ledger(ledger, read_only=True).rows()] == [1] * 5
    assert [r.attempts for r in results] == [1] * 5  # the runs that died sent nothing
    assert len(server.jobs) == 1


def test_a_follow_up_job_picks_up_the_extraction_where_it_was(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "gemini")
    ledger = tmp_path / "follow.sqlite"

    def second_job_submitted() -> bool:
        if len(server.jobs) >= 2:
            server.hold = True
            return True
        return False

    _, first = _run_until(
        provider,
        model,
        _docs(10),
        ledger,
        second_job_submitted,
        poll_interval=0.05,
        extractor=allama.Extractor(retries=1),
    )
    assert [r.index for r in first if r.failure and r.failure.kind == "in_provider_job"] == [7]
    follow_up = server.jobs[1]
    [body] = follow_up.bodies
    assert len(body["contents"]) == 3  # the document, the answer that was no JSON, the ask
    server.hold = False
    resumed = _run(provider, model, _docs(10), ledger, extractor=allama.Extractor(retries=1))
    [again] = [r for r in resumed if r.index == 7]
    assert again.value == Doc(n=7) and not again.resumed
    assert again.metadata is not None
    assert (again.metadata.passes, again.metadata.batch_passes) == (2, 2)
    assert len(server.jobs) == 2


# Expired, cancelled, and a job that says it succeeded while every row failed


@pytest.mark.parametrize("family", ["openai-chat", "anthropic", "gemini"])
def test_expired_rows_are_sent_again_in_a_follow_up_job(
    server: ProviderBatchServer, tmp_path: Path, family: str
) -> None:
    provider, model = _provider(server, family)
    server.expire_next = 1
    numbers = _clean(20)  # no row that fails on its own
    results = _run(provider, model, [f"doc {n}" for n in numbers], tmp_path / "expired.sqlite")
    assert [r.value for r in results] == [Doc(n=n) for n in numbers]
    jobs = _keys_in(server, family)
    assert len(jobs) == 2 and len(jobs[1]) == 10  # the half the first job left unrun
    assert sorted(r.attempts for r in results) == [1] * 10 + [2] * 10


def test_expired_rows_with_no_attempts_left_fail_as_expired(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    server.expire_next = 5
    results = _run(
        provider,
        model,
        [f"doc {n}" for n in range(100, 104)],
        tmp_path / "e.sqlite",
        max_attempts=2,
    )
    # Each job runs the first half of its rows: 100 and 101, then 102; 103 expires twice.
    assert [r.failure.kind if r.failure else "ok" for r in results] == [
        "ok",
        "ok",
        "ok",
        "job_expired",
    ]
    assert [r.attempts for r in results] == [1, 1, 2, 2]
    failure = results[3].failure
    assert failure is not None and failure.retryable
    assert "expired" in failure.message


def test_a_job_that_succeeded_while_every_row_failed_is_reported_per_row(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "gemini")
    server.fail_all_rows = True
    run: BatchRun[Doc] = allama.batch(
        provider,
        Doc,
        _docs(6),
        request=allama.ChatRequest(model).system("Read the number."),
        ledger=tmp_path / "all-failed.sqlite",
        provider_batch=True,
        poll_interval=0.001,
        backoff=0.001,
        max_attempts=2,
    )
    results = list(run)
    assert all(job.end == "completed" for job in server.jobs)  # the jobs said they succeeded
    assert [r.ok for r in results] == [False] * 6
    assert {r.failure.kind for r in results if r.failure} == {"server"}
    assert run.summary.done == 0 and run.summary.failed == 6
    assert "failures: server 6" in run.summary.lines()


def test_cancelled_jobs_fail_their_unrun_rows_and_send_nothing_again(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cancelled.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(5), ledger, lambda: bool(server.jobs))
    asked = asyncio.run(cancel_jobs(str(ledger), provider))
    assert asked == [server.jobs[0].id]
    assert server.jobs[0].cancel_requested
    server.hold = False
    results = _run(provider, model, _docs(5), ledger)
    assert {r.failure.kind for r in results if r.failure} == {"job_canceled"}
    assert len(server.jobs) == 1


@pytest.mark.parametrize("family", ["openai-chat", "anthropic", "gemini"])
def test_a_cancel_asked_for_while_a_run_polls_fails_the_rows_it_cancelled(
    server: ProviderBatchServer, tmp_path: Path, family: str
) -> None:
    provider, model = _provider(server, family)
    ledger = tmp_path / "cancelled.sqlite"
    server.hold = True
    run = _batch_run(provider, model, _docs(4), ledger, poll_interval=0.02)

    def cancel_from_another_terminal() -> None:
        while not any(job.polls for job in server.jobs):
            time.sleep(0.005)
        asyncio.run(cancel_jobs(str(ledger), provider))
        server.hold = False

    thread = threading.Thread(target=cancel_from_another_terminal)
    thread.start()
    results = list(run)
    thread.join()
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 4
    assert len(server.jobs) == 1  # nothing sent again


@pytest.mark.parametrize("family", ["openai-chat", "anthropic", "gemini"])
def test_rows_of_a_job_cancelled_at_the_provider_fail_and_are_not_sent_again(
    server: ProviderBatchServer, tmp_path: Path, family: str
) -> None:
    provider, model = _provider(server, family)
    server.hold = True
    ledger = tmp_path / "console.sqlite"
    run = _batch_run(provider, model, _docs(4), ledger, poll_interval=0.02)

    def cancel_at_the_console() -> None:
        while not any(job.polls for job in server.jobs):
            time.sleep(0.005)
        server.jobs[0].cancel_requested = True  # not through allama: the ledger knows nothing
        server.hold = False

    thread = threading.Thread(target=cancel_at_the_console)
    thread.start()
    results = list(run)
    thread.join()
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 4
    assert len(server.jobs) == 1  # nothing sent again: the cancel meant to spend no more
    again = _run(provider, model, _docs(4), ledger, retry_failed=True)  # asked: sent
    assert [r.value for r in again] == [Doc(n=n) for n in range(4)]
    assert len(server.jobs) == 2


def test_a_cancel_while_a_job_is_being_submitted_cancels_it_as_it_is_made(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    upload = _provider_batch_server._Handler.openai_upload
    uploading = threading.Event()

    def slow(handler: Any, data: Any) -> Any:
        uploading.set()
        time.sleep(0.3)  # a large file: the cancel comes meanwhile
        return upload(handler, data)

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_upload", slow)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "cancel.sqlite"
    run = _batch_run(provider, model, _docs(4), ledger, poll_interval=0.02)
    unmade: list[str] = []

    def cancel_from_another_terminal() -> None:
        uploading.wait()
        assert asyncio.run(cancel_jobs(str(ledger), provider, unmade=unmade)) == []

    thread = threading.Thread(target=cancel_from_another_terminal)
    thread.start()
    results = list(run)
    thread.join()
    (job,) = server.jobs
    assert job.cancel_requested  # cancelled by the run as soon as it was made
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 4
    assert [row.tag for row in Ledger(ledger, read_only=True).jobs()] == unmade


def test_a_cancel_between_tries_of_a_submission_makes_no_job(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    failed = threading.Event()

    def busy(handler: Any, data: Any) -> Any:
        failed.set()
        raise handler._fail(500, "The server had an error.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_upload", busy)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "cancel.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger, backoff=0.5)
    unmade: list[str] = []

    def cancel_from_another_terminal() -> None:
        failed.wait()  # the run waits before it tries again
        assert asyncio.run(cancel_jobs(str(ledger), provider, unmade=unmade)) == []

    thread = threading.Thread(target=cancel_from_another_terminal)
    thread.start()
    results = list(run)
    thread.join()
    assert not server.jobs and len(unmade) == 1
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 3
    (job,) = Ledger(ledger, read_only=True).jobs()
    assert (job.state, job.error) == (
        "not_submitted",
        "cancelled (`allama batch cancel`) before the job was made",
    )


def test_a_cancel_of_a_job_a_killed_run_was_submitting_fails_its_inputs_sending_nothing(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main
    from allama.providers._jobs import ProviderJobs

    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cut.sqlite"

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the process died here")  # recorded as submitting, never sent

    with monkeypatch.context() as patched:
        patched.setattr(ProviderJobs, "submit", killed)
        with pytest.raises(RuntimeError, match="the process died here"):
            list(_batch_run(provider, model, _docs(3), ledger))
    (tag,) = [row.tag for row in Ledger(ledger, read_only=True).jobs()]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert main(["batch", "cancel", str(ledger), "--base-url", server.anthropic_base]) == 0
    assert capsys.readouterr().out == (
        f"cancel requested: {tag}, being submitted or cut off: no run makes its job, and one "
        "that finds it made cancels it; its inputs fail as cancelled\n"
    )
    run = _batch_run(provider, model, _docs(3), ledger)
    results = list(run)
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 3
    assert not server.jobs  # nothing sent
    assert run.summary.jobs == {
        tag: "not submitted: cancelled (`allama batch cancel`) before the job was made"
    }
    again = _run(provider, model, _docs(3), ledger, retry_failed=True)  # asked: sent
    assert [r.value for r in again] == [Doc(n=n) for n in range(3)]


def test_a_job_whose_collection_was_cut_off_after_its_rows_is_marked_collected_later(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cut.sqlite"

    def killed(self: Ledger, tag: str) -> None:
        raise RuntimeError("the process died here")  # its rows written, not marked

    with monkeypatch.context() as patched:
        patched.setattr(Ledger, "job_collected", killed)
        with pytest.raises(RuntimeError, match="the process died here"):
            list(_batch_run(provider, model, _docs(3), ledger))
    (job,) = Ledger(ledger, read_only=True).jobs()
    assert (job.state, job.outcome) == ("ended", "completed")
    results = _run(provider, model, _docs(3), ledger)
    assert [(r.value, r.resumed) for r in results] == [(Doc(n=n), True) for n in range(3)]
    assert [job.state for job in Ledger(ledger, read_only=True).jobs()] == ["collected"]
    assert len(server.jobs) == 1


def test_a_job_whose_record_is_deleted_from_the_ledger_has_its_inputs_sent_again(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(3), ledger)
    # What a look that cannot tell the job apart says to do, to send its inputs again.
    with contextlib.closing(sqlite3.connect(ledger)) as db, db:
        db.execute("DELETE FROM jobs")
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 2  # sent again, as asked: the first job was made too


def test_a_jobs_record_keeps_the_query_of_its_base_url_for_status_and_cancel(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch._jobs import job_provider

    name, options, model = FAMILIES["anthropic"]
    provider = allama.provider(
        name, base_url=f"{_base(server, name)}?key=gw", api_key="test-key", **options
    )
    ledger = tmp_path / "gateway.sqlite"
    assert all(r.ok for r in _run(provider, model, _docs(2), ledger))
    (job,) = Ledger(ledger, read_only=True).jobs()
    assert job.base_url == f"{provider.base_url}?key=gw"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    # As `allama batch status` and `cancel` make it, the fake's endpoint confirmed.
    rebuilt = job_provider(job, base_url=_base(server, name))
    assert rebuilt.target(model).params == {"key": "gw"}
    assert rebuilt.provider.base_url == provider.base_url


@pytest.mark.parametrize("family", ["openai-chat", "anthropic"])
def test_a_cancel_whose_look_for_a_job_being_submitted_fails_is_recorded_and_said(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    import _provider_batch_server

    provider, model = _provider(server, family)
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(3), ledger)

    def down(handler: Any, data: Any) -> Any:
        raise handler._fail(503, "Overloaded.")

    lists = {"openai-chat": "openai_list", "anthropic": "anthropic_list"}[family]
    with monkeypatch.context() as patched:
        patched.setattr(_provider_batch_server._Handler, lists, down)
        unmade: list[str] = []
        refused: list[str] = []
        asked = asyncio.run(cancel_jobs(str(ledger), provider, refused=refused, unmade=unmade))
    (job,) = Ledger(ledger, read_only=True).jobs()
    # Said as a job that may run on (the look failed), its cancel recorded all the same.
    assert (asked, unmade, job.cancel_requested) == ([], [], True)
    assert [line.split(": ", 1)[0] for line in refused] == [job.tag]
    assert "its job could not be looked for" in refused[0]
    results = _run(provider, model, _docs(3), ledger)
    (made,) = server.jobs
    if family == "anthropic":
        # A batch found running, that nothing confirms is the job's (Anthropic's keep no
        # tag): not cancelled, as it may be another's; once it ends, its results' request
        # ids confirm it, and its rows are kept.
        assert not made.cancel_requested
        assert [(r.value, r.failure) for r in results] == [(Doc(n=n), None) for n in range(3)]
        return
    assert made.cancel_requested  # found made, by its tag, and cancelled
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 3


def test_the_cancel_command_goes_on_past_a_job_that_ended(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cancel.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(4), ledger, lambda: len(server.jobs) == 2, job_size=2)
    first, second = server.jobs
    first.end = "completed"  # it ended at the provider before anyone looked
    assert main(["batch", "cancel", str(ledger), "--base-url", server.anthropic_base]) == 0
    out = capsys.readouterr().out
    (refused,) = [line for line in out.splitlines() if line.startswith("not cancelled: ")]
    # The provider's words (which may quote the requests) are withheld, as a failure's are.
    assert re.fullmatch(
        rf"not cancelled: {first.id}: invalid_request \(\d+ chars withheld\) "
        r"\[provider=anthropic, status=400\] \(the next `allama batch run` collects it\)",
        refused,
    )
    assert f"cancel requested: {second.id} (the next `allama batch run` collects" in out
    assert second.cancel_requested and not first.cancel_requested


def test_cancel_and_status_without_the_key_name_its_environment_variable(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The commands have no `api_key=`: the way to give them the key is its variable.
    from allama.cli import main

    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "nokey.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(2), ledger, lambda: bool(server.jobs))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    confirmed = ["--base-url", server.anthropic_base]
    assert main(["batch", "cancel", str(ledger), *confirmed]) == 1
    said = capsys.readouterr().out
    assert said.startswith("not cancelled: ") and "set ANTHROPIC_API_KEY" in said
    assert "api_key=" not in said
    assert main(["batch", "status", str(ledger), *confirmed]) == 0
    out = capsys.readouterr().out
    assert "not asked (" in out and "set ANTHROPIC_API_KEY" in out and "api_key=" not in out


def test_the_cancel_finds_a_job_whose_id_never_reached_the_ledger(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "cut.sqlite"
    server.hold = True
    _cut_off(provider, model, _docs(3), ledger)
    (job,) = server.jobs
    assert asyncio.run(cancel_jobs(str(ledger), provider)) == [job.id]
    assert job.cancel_requested
    server.hold = False
    results = _run(provider, model, _docs(3), ledger)
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 3
    assert len(server.jobs) == 1


def test_a_refused_key_stops_a_provider_batch_run_and_its_inputs_stay_pending(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    def refuse(handler: Any, data: Any) -> Any:
        raise handler._fail(401, "Incorrect API key provided: sk-wrong.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_upload", refuse)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "refused.sqlite"
    run = _batch_run(provider, model, _docs(6), ledger, job_size=2)
    results = list(run)
    assert {r.failure.kind for r in results if r.failure} == {"authentication", "not_started"}
    assert run.summary.refused == "authentication"
    assert not server.jobs
    refused = [r.index for r in results if r.failure and r.failure.kind == "authentication"]
    assert len(refused) == 2  # the first job's: no other job was tried
    rows = list(Ledger(ledger, settings={}).rows())  # inputs not started leave no row
    assert [(row.position, row.status) for row in rows] == [(n, "pending") for n in refused]


def test_a_job_whose_submission_the_run_stopped_before_trying_again_stays_pending(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    run: BatchRun[Doc] | None = None

    def busy(handler: Any, data: Any) -> Any:
        assert run is not None
        run.stop("stopped by the caller")
        raise handler._fail(500, "The server had an error.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_upload", busy)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "stopped.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger)
    results = list(run)
    assert {r.failure.kind for r in results if r.failure} == {"server"}
    assert run.summary.refused is None
    assert {(row.status, row.attempts) for row in Ledger(ledger, settings={}).rows()} == {
        ("pending", 1)
    }


def test_a_submission_stopped_in_its_wait_before_trying_again_is_not_sent_again(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    uploads: list[int] = []

    def busy(handler: Any, data: Any) -> Any:
        uploads.append(1)
        threading.Timer(0.2, run.stop).start()  # while the run waits to try again
        raise handler._fail(500, "The server had an error.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_upload", busy)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "stopped.sqlite"
    # A wait before the try again longer than any test: the stop has to end it.
    run = _batch_run(provider, model, _docs(3), ledger, backoff=600.0)
    results = list(run)
    assert uploads == [1]  # asked whether that try reached the provider, not sent again
    assert {r.failure.kind for r in results if r.failure} == {"server"}
    assert all(r.pending for r in results)
    assert {(row.status, row.attempts) for row in Ledger(ledger, settings={}).rows()} == {
        ("pending", 1)
    }
    # The next run sends them, as one job.
    monkeypatch.undo()
    assert all(r.ok for r in _run(provider, model, _docs(3), ledger))
    assert len(server.jobs) == 1


def test_a_submission_that_reached_the_provider_before_a_stop_is_found_not_left_behind(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    create = _provider_batch_server._Handler.openai_create

    def lost(handler: Any, data: Any) -> Any:
        answer = handler.send_json
        handler.send_json = lambda status, body: None  # the job is made; its answer is lost
        create(handler, data)
        handler.send_json = answer
        run.stop("stopped by the caller")
        raise handler._fail(502, "Bad gateway.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_create", lost)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "lost.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger)
    results = list(run)
    (job,) = server.jobs
    assert {r.failure.kind for r in results if r.failure} == {"in_provider_job"}
    monkeypatch.undo()
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert server.jobs == [job]  # collected, not submitted again


def _create_answer_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenAI makes the job, and its answer is lost: a gateway's 502 in its place."""
    import _provider_batch_server

    create = _provider_batch_server._Handler.openai_create

    def lost(handler: Any, data: Any) -> Any:
        answer = handler.send_json
        handler.send_json = lambda status, body: None
        create(handler, data)
        handler.send_json = answer
        raise handler._fail(502, "Bad gateway.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_create", lost)


def test_a_last_try_whose_answer_was_lost_is_looked_for_and_its_job_collected(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _create_answer_lost(monkeypatch)
    provider, model = _provider(server, "openai-chat")
    results = _run(provider, model, _docs(3), tmp_path / "lost.sqlite", max_attempts=1)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1  # found and collected, not orphaned nor made again


@pytest.mark.parametrize("family", ["openai-chat", "anthropic", "gemini"])
def test_a_job_made_after_its_lost_answer_is_found_by_a_later_look_not_made_again(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    import _provider_batch_server

    name = {"openai-chat": "openai", "anthropic": "anthropic", "gemini": "gemini"}[family]
    create = getattr(_provider_batch_server._Handler, f"{name}_create")
    lagged: list[threading.Timer] = []

    def made_later(handler: Any, data: Any, *groups: Any) -> Any:
        if lagged:
            return create(handler, data, *groups)

        def make() -> None:  # the provider behind the gateway goes on, and makes it
            unanswered = copy.copy(handler)  # the connection's handler serves on meanwhile
            unanswered.send_json = lambda status, body: None
            create(unanswered, data, *groups)

        lagged.append(threading.Timer(0.3, make))
        lagged[0].start()
        raise handler._fail(502, "Bad gateway.")  # the gateway's answer, at once

    monkeypatch.setattr(_provider_batch_server._Handler, f"{name}_create", made_later)
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.2, 0.4, 0.8))
    provider, model = _provider(server, family)
    results = _run(provider, model, _docs(3), tmp_path / "lagged.sqlite")
    lagged[0].join()
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1  # found at the second or third look, and collected


def test_a_run_stopped_while_it_looks_for_a_lost_answers_job_leaves_the_look_to_the_next(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    create = _provider_batch_server._Handler.openai_create
    lagged: list[threading.Timer] = []
    first: BatchRun[Doc] | None = None

    def made_later(handler: Any, data: Any) -> Any:
        if lagged:
            return create(handler, data)

        def make() -> None:  # the provider behind the gateway makes it later
            unanswered = copy.copy(handler)
            unanswered.send_json = lambda status, body: None
            create(unanswered, data)

        lagged.append(threading.Timer(0.6, make))
        lagged[0].start()
        assert first is not None
        threading.Timer(0.05, first.stop).start()  # during the looks
        raise handler._fail(502, "Bad gateway.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_create", made_later)
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.2, 0.4, 0.8))
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "lagged.sqlite"
    first = _batch_run(provider, model, _docs(3), ledger)
    stopped = list(first)
    assert [r.failure.kind for r in stopped if r.failure] == ["in_provider_job"] * 3
    assert not server.jobs  # not made yet: the next run, at once, looks as long
    results = _run(provider, model, _docs(3), ledger)
    lagged[0].join()
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1


def test_a_lost_answer_the_provider_cannot_be_asked_about_is_left_to_the_next_run(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    _create_answer_lost(monkeypatch)
    listing = _provider_batch_server._Handler.openai_list

    def down(handler: Any, data: Any) -> Any:
        raise handler._fail(500, "The server had an error.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_list", down)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "lost.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger, max_attempts=1)
    results = list(run)
    assert {r.failure.kind for r in results if r.failure} == {"in_provider_job"}
    assert len(server.jobs) == 1
    assert run.summary.refused == "server"  # the command's exit 1, not the budget's 3
    assert run.summary.stopped is not None
    assert "may have been made, its answer lost (server)" in run.summary.stopped
    assert "could not be listed to tell (server): the same command looks for it" in (
        run.summary.stopped
    )
    assert {row.status for row in Ledger(ledger, read_only=True).rows()} == {"submitted"}
    monkeypatch.setattr(_provider_batch_server._Handler, "openai_list", listing)
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1


def test_a_look_for_a_cut_off_job_is_tried_again_as_a_poll_is(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(3), ledger)
    listing = _provider_batch_server._Handler.anthropic_list
    answers = iter(["limited", "busy"])

    def flaky(handler: Any, data: Any) -> Any:
        kind = next(answers, None)
        if kind == "limited":
            raise handler._fail(429, "Rate limited.")
        if kind == "busy":
            raise handler._fail(500, "Internal error.")
        return listing(handler, data)

    monkeypatch.setattr(_provider_batch_server._Handler, "anthropic_list", flaky)
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1


@pytest.mark.parametrize(("family", "status"), [("openai-chat", 503), ("anthropic", 529)])
def test_a_provider_that_makes_no_job_at_any_try_stops_the_run_its_inputs_pending(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    status: int,
) -> None:
    import _provider_batch_server

    name = {"openai-chat": "openai_create", "anthropic": "anthropic_create"}[family]
    create = getattr(_provider_batch_server._Handler, name)

    def overloaded(handler: Any, *args: Any) -> Any:
        raise handler._fail(status, "Overloaded.")

    monkeypatch.setattr(_provider_batch_server._Handler, name, overloaded)
    provider, model = _provider(server, family)
    ledger = tmp_path / "outage.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger)
    results = list(run)
    assert all(r.pending for r in results) and server.jobs == []
    assert run.summary.stopped is not None
    assert run.summary.stopped.startswith("the provider did not make a batch job in 5 tries: ")
    assert {row.status for row in Ledger(ledger, read_only=True).rows()} == {"pending"}
    monkeypatch.setattr(_provider_batch_server._Handler, name, create)
    results = _run(provider, model, _docs(3), ledger)  # the outage over
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]


def test_a_job_refused_for_a_full_queue_leaves_its_inputs_pending_and_stops_the_run(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    add_job = server.add_job

    def queue_full(job: Any) -> Any:
        job.validation_errors = [
            {
                "code": "token_limit_exceeded",
                "line": None,
                "message": "Enqueued token limit reached for gpt-4o-mini in organization "
                "org-x. Limit: 2,000,000 enqueued tokens. Please try again once some "
                "in_progress batches have been completed.",
            }
        ]
        return add_job(job)

    server.add_job = queue_full  # type: ignore[method-assign]
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "full.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger)
    results = list(run)
    assert all(r.pending for r in results) and len(server.jobs) == 1
    assert run.summary.stopped == (
        "the provider's queue of batch work for gpt-4o-mini is full (token_limit_exceeded): "
        f"job {server.jobs[0].id} ran none of its requests; run the same command again once "
        "the batches in progress have ended"
    )
    assert {row.status for row in Ledger(ledger, read_only=True).rows()} == {"pending"}
    server.add_job = add_job  # type: ignore[method-assign]
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]


def test_a_pass_paid_in_one_job_counts_when_the_follow_up_job_expires(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    add_job = server.add_job

    def second_expires(job: Any) -> Any:
        if len(server.jobs) == 1:  # the follow-up of doc 7, whose first answer is no JSON
            server.expire_next = 1
        return add_job(job)

    server.add_job = second_expires  # type: ignore[method-assign]
    ledger = tmp_path / "run.sqlite"
    # One send of each pass: the expired follow-up is not sent again.
    options: dict[str, Any] = {"extractor": allama.Extractor(retries=1), "max_attempts": 1}
    run = _batch_run(provider, model, ["doc 7"], ledger, **options)
    (result,) = list(run)
    assert result.failure is not None and result.failure.kind == "job_expired"
    assert result.metadata is not None and result.metadata.batch_passes == 1
    assert run.summary.passes == 1 and run.summary.cost == Decimal("0.00000225")
    (row,) = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost) == ("failed", "0.00000225")
    # The row's code is allama's message; the provider's words are kept apart.
    assert result.failure.message == f"job {server.jobs[1].id}: batch_expired"
    assert result.failure.provider_message == (
        "This request could not be executed before the completion window expired."
    )


def test_a_failure_tried_again_in_a_job_counts_what_it_paid_before(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    first = _batch_run(provider, model, ["doc 7"], ledger)  # no JSON: a paid pass, failed
    assert [r.failure.kind for r in first if r.failure] == ["extraction_parse"]
    answer = server.answer

    def now_good(family: str, body: Any, *, batch: bool, model: str = "") -> Outcome:
        body = json.loads(json.dumps(body).replace("doc 7", "doc 8"))  # answered as doc 8
        return answer(family, body, batch=batch, model=model)

    server.answer = now_good  # type: ignore[method-assign]
    again = _batch_run(provider, model, ["doc 7"], ledger, retry_failed=True)
    (result,) = list(again)
    assert result.value == Doc(n=8) and len(result.spent) == 1
    assert again.summary.passes == 2 and again.summary.cost == Decimal("0.00000450")
    (row,) = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost, len(row.record["earlier_attempts"])) == ("done", "0.00000450", 1)


def _guess_said(stopped: str | None, budget: str) -> Decimal:
    """The guess a budget's stop before a submission names."""
    said = re.fullmatch(
        rf"the budget of \${re.escape(budget)} leaves \$[0-9.]+, and the next request to "
        r"submit is guessed at \$([0-9.]+)",
        stopped or "",
    )
    assert said is not None, stopped
    return Decimal(said.group(1))


def test_a_budget_submits_no_job_whose_guessed_cost_it_cannot_hold(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    """Every job was submitted before any was priced: a budget of a request's cost let
    forty be paid for."""
    provider, model = _provider(server, "openai-chat")
    docs = [f"doc {n}" for n in _clean(40)]
    run = _batch_run(
        provider, model, docs, tmp_path / "run.sqlite", job_size=5, max_cost="0.000002"
    )
    results = list(run)
    assert server.jobs == [] and run.summary.cost == 0
    assert {r.failure.kind for r in results if r.failure} == {"not_started"}
    assert run.summary.not_started == 40
    assert _guess_said(run.summary.stopped, "0.000002") > Decimal("0.000002")


def test_a_budget_submits_jobs_while_their_guesses_fit_and_more_as_jobs_end_for_less(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    docs = [f"doc {n}" for n in _clean(40)]
    budget = Decimal("0.00004")
    run = _batch_run(provider, model, docs, tmp_path / "run.sqlite", job_size=5, max_cost=budget)
    results = list(run)
    done = [r for r in results if r.ok]
    # The first job holds as many requests as their guesses fit in; the guesses are more
    # than the fake's answers cost, so each job ended leaves room for another.
    assert len(server.jobs) > 2 and all(len(job.bodies) <= 5 for job in server.jobs)
    assert len(done) == sum(len(job.bodies) for job in server.jobs)
    assert {r.failure.kind for r in results if r.failure} == {"not_started"}
    assert run.summary.cost <= budget and run.summary.past_budget is None
    assert _guess_said(run.summary.stopped, "0.00004") > budget - run.summary.cost


def test_a_budget_submits_no_job_of_a_model_whose_price_is_unknown(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, _ = _provider(server, "openai-chat")
    unknown = "a-model-without-prices"
    run = _batch_run(
        provider, unknown, ["doc 100", "doc 101"], tmp_path / "run.sqlite", max_cost="1"
    )
    results = list(run)
    assert server.jobs == [] and [r.failure.kind for r in results if r.failure] == [
        "not_started",
        "not_started",
    ]
    assert run.summary.stopped == (
        f"what a job of {unknown} costs cannot be guessed before it is submitted "
        f"(genai-prices {genai_prices.__version__} has no price for {unknown!r} at openai): "
        "the budget of $1 cannot be kept"
    )


def test_what_a_pass_paid_counts_before_the_follow_up_it_asks_for_is_submitted(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass an input went on from counted only when the input ended: a second job of
    follow-ups went out after the first had paid most of the budget, and a run spent 1.8
    times it (2.4 times with the follow-ups sent live)."""
    import _provider_batch_server as fake

    # 60 tokens in and 10 out a pass: $0.0000075 at batch prices, under the guess.
    monkeypatch.setattr(fake, "_USAGE_OPENAI", {"prompt_tokens": 60, "completion_tokens": 10})
    provider, model = _provider(server, "openai-chat")
    docs = [f"doc {50 * k + 7}" for k in range(20)]  # each answers no JSON the first time
    budget = Decimal("0.000125")
    for retry in ("batch", "live"):
        run = _batch_run(
            provider,
            model,
            docs,
            tmp_path / f"{retry}.sqlite",
            extractor=allama.Extractor(retries=1),
            max_cost=budget,
            job_retry=retry,
            concurrency=2,
        )
        list(run)
        stopped = run.summary.stopped or ""
        assert stopped.startswith("the budget of $0.000125 is reached"), (retry, stopped)
        # Past it by what was out when it was reached: the first job's rows, two live calls.
        assert run.summary.cost <= budget * Decimal("1.1"), (retry, run.summary.cost)


def _paid_failure_first(server: ProviderBatchServer, *ns: int, times: int = 1) -> None:
    """The first `times` answers to each doc `ns` names are a 2xx with its usage and no
    choices: a failure, paid for, that is sent again."""
    answer = server.answer
    seen: Counter[int] = Counter()

    def paid_then_right(family: str, body: Any, *, batch: bool, model: str = "") -> Outcome:
        n = next((n for n in ns if f"doc {n}" in json.dumps(body)), None)
        if n is not None and seen[n] < times:
            seen[n] += 1
            return Outcome("ok", {"usage": {"prompt_tokens": 10, "completion_tokens": 5}})
        return answer(family, body, batch=batch, model=model)

    server.answer = paid_then_right  # type: ignore[method-assign]


def test_what_a_failed_row_paid_is_kept_however_its_input_ends(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    """It reached the record only with the input's next answer: a row sent again that
    expired (or was cancelled, or left by a stop) ended the input without it, in the
    record, the ledger and the summary."""
    from allama._prices import cost_of
    from allama.types import Usage

    provider, model = _provider(server, "openai-chat")
    _paid_failure_first(server, 31)
    add_job = server.add_job

    def second_expires(job: Any) -> Any:
        if server.jobs:
            server.expire_next = 1
        return add_job(job)

    server.add_job = second_expires  # type: ignore[method-assign]
    ledger = tmp_path / "run.sqlite"
    (result,) = _run(provider, model, ["doc 31"], ledger, max_attempts=2)
    pass_cost = cost_of("openai", model, Usage(input_tokens=10, output_tokens=5), batch=True)
    assert not isinstance(pass_cost, str)
    assert result.failure is not None and result.failure.kind == "job_expired"
    assert len(server.jobs) == 2
    assert result.metadata is not None and result.metadata.cost is not None
    assert result.metadata.cost.total == pass_cost.total
    (row,) = Ledger(ledger, read_only=True).rows()
    assert Decimal(row.cost or "0") == pass_cost.total


def _one_pass(model: str) -> Decimal:
    from allama._prices import cost_of
    from allama.types import Usage

    cost = cost_of("openai", model, Usage(input_tokens=10, output_tokens=5), batch=True)
    assert not isinstance(cost, str)
    return cost.total


@pytest.mark.parametrize(
    ("status", "kind", "stopped"),
    [
        # Refused for good: the job's inputs fail with it, and no further job is submitted.
        (400, "job_failed", "the provider refused to make job allama-"),
        # Not made at any try: the inputs are left pending, for the same command.
        (500, "server", "the provider did not make a batch job in 5 tries: server"),
    ],
)
def test_inputs_a_job_that_was_not_made_ends_keep_each_what_it_paid_alone(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    kind: str,
    stopped: str,
) -> None:
    """One error ends every input of a job the provider would not make: each input's
    earlier payment was written into it, so that each input after the first carried the
    others' (a 400); or, left pending (a 500 every try), none kept its own."""
    import _provider_batch_server as fake

    create = fake._Handler.openai_create
    made: list[bool] = []

    def second_refused(self: Any, data: Any) -> Any:
        made.append(True)
        if len(made) > 1:
            raise self._fail(status, "refused")
        return create(self, data)

    monkeypatch.setattr(fake._Handler, "openai_create", second_refused)
    provider, model = _provider(server, "openai-chat")
    _paid_failure_first(server, 31, 81, 131)
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(provider, model, ["doc 101", "doc 31", "doc 81", "doc 131"], ledger)
    results = sorted(run, key=lambda r: r.index)
    one = _one_pass(model)
    assert [r.failure.kind if r.failure else "ok" for r in results] == ["ok"] + [kind] * 3
    assert run.summary.stopped is not None and run.summary.stopped.startswith(stopped)
    assert len(server.jobs) == 1
    for result in results:
        records = [*result.spent, *([result.metadata] if result.metadata else [])]
        assert sum(m.cost.total for m in records if m.cost is not None) == one, result.label
    rows = list(Ledger(ledger, read_only=True).rows())
    assert sum(Decimal(row.cost or "0") for row in rows) == 4 * one


def test_a_payment_of_an_input_left_in_a_job_by_a_stop_is_counted_by_the_run_that_collects_it(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    """What its first row paid was held by the run alone: a stop while the job sending it
    again was out lost it for good."""
    provider, model = _provider(server, "openai-chat")
    _paid_failure_first(server, 31)
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(provider, model, ["doc 101", "doc 31"], ledger)

    def stop_with_the_second_job_out() -> None:
        deadline = time.monotonic() + 30
        while len(server.jobs) < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        server.hold = True
        time.sleep(0.2)
        run.stop()

    threading.Thread(target=stop_with_the_second_job_out, daemon=True).start()
    first = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind if r.failure else "ok" for r in first] == ["ok", "in_provider_job"]
    server.hold = False
    (_, collected) = _run(provider, model, ["doc 101", "doc 31"], ledger)
    assert collected.value == Doc(n=31) and len(server.jobs) == 2
    records = [*collected.spent, *([collected.metadata] if collected.metadata else [])]
    assert sum(m.cost.total for m in records if m.cost is not None) == 2 * _one_pass(model)


def test_a_row_that_failed_paying_twice_counts_each_payment_once_toward_the_budget(
    server: ProviderBatchServer, tmp_path: Path, guessed_free: None
) -> None:
    """Each new paid failure counted those before it again: a budget of two and a half
    passes was "reached" at the second failure (three counted, two paid), and the input
    left pending unanswered."""
    from allama._prices import cost_of
    from allama.types import Usage

    provider, model = _provider(server, "openai-chat")
    _paid_failure_first(server, 31, times=2)
    one = cost_of("openai", model, Usage(input_tokens=10, output_tokens=5), batch=True)
    assert not isinstance(one, str)
    budget = one.total * Decimal("2.5")
    run = _batch_run(provider, model, ["doc 31"], tmp_path / "run.sqlite", max_cost=budget)
    (result,) = list(run)
    assert result.value == Doc(n=31) and len(server.jobs) == 3
    assert run.summary.stopped is None and run.summary.cost == 3 * one.total


def test_an_input_taken_over_as_its_follow_up_is_sent_keeps_what_its_pass_paid(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its result, "in flight in another run", had no record: the pass its job answered
    (paid) was in neither the result nor the summary."""
    from allama.batch._ledger import Ledger as Book

    resend = Book._resend

    def taken_over_meanwhile(self: Any, key: str, log: Any) -> int:
        # Another run takes it over as this one asks for its follow-up.
        self._connection.execute(
            "UPDATE items SET run_id = 'another-run' WHERE key = ? AND label = 'doc 7'", (key,)
        )
        count: int = resend(self, key, log)
        return count

    monkeypatch.setattr(Book, "_resend", taken_over_meanwhile)
    provider, model = _provider(server, "openai-chat")
    results = _run(
        provider,
        model,
        ["doc 7", "doc 101"],
        tmp_path / "run.sqlite",
        extractor=allama.Extractor(retries=1),
        label=lambda document: document,
    )
    taken, done = results
    assert taken.failure is not None and taken.failure.kind == "in_flight_elsewhere"
    assert taken.metadata is not None and taken.metadata.passes == 1
    assert done.metadata is not None and done.metadata.cost is not None
    assert taken.metadata.cost == done.metadata.cost  # one pass each, alike
    assert len(server.jobs) == 1


def test_a_run_closed_while_live_follow_ups_wait_for_a_slot_gives_their_attempts_back(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follow-up counted as sent as it began to wait for its slot: a close left every
    waiting one with an attempt it never made."""
    import _provider_batch_server as fake

    live = fake._Handler._live
    sending = threading.Event()
    sent: list[str] = []

    def slow(self: Any, family: str, data: bytes, model: str = "") -> None:
        sent.append(family)  # sent, whether or not answered before the close
        sending.set()
        time.sleep(0.3)
        live(self, family, data, model)

    monkeypatch.setattr(fake._Handler, "_live", slow)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(
        provider,
        model,
        [f"doc {50 * k + 7}" for k in range(6)],  # each asks for a follow-up
        ledger,
        extractor=allama.Extractor(retries=1),
        job_retry="live",
        concurrency=1,
    )
    results = iter(run)
    next(results)  # (the run begins as its results are read)
    sending.wait(30)
    run.close()
    rows = list(Ledger(ledger, read_only=True).rows())
    assert [row.status for row in rows].count("pending") >= 4
    # One attempt each for the job, and one more for each follow-up sent live.
    assert sum(row.attempts for row in rows) == len(rows) + len(sent)


def test_live_follow_ups_are_sent_at_most_concurrency_at_once(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An async run sent every live follow-up at once, whatever its concurrency."""
    import _provider_batch_server as fake

    live = fake._Handler._live
    lock = threading.Lock()
    at_once = [0, 0]  # now, most

    def counted(self: Any, family: str, data: bytes, model: str = "") -> None:
        with lock:
            at_once[0] += 1
            at_once[1] = max(at_once)
        time.sleep(0.05)
        try:
            live(self, family, data, model)
        finally:
            with lock:
                at_once[0] -= 1

    monkeypatch.setattr(fake._Handler, "_live", counted)
    provider, model = _provider(server, "openai-chat")
    docs = [f"doc {50 * k + 7}" for k in range(12)]

    async def main() -> list[BatchResult[Doc]]:
        run = allama.abatch(
            provider,
            Doc,
            docs,
            request=allama.ChatRequest(model).system("Read the number."),
            ledger=tmp_path / "run.sqlite",
            provider_batch=True,
            poll_interval=0.001,
            extractor=allama.Extractor(retries=1),
            job_retry="live",
            concurrency=2,
        )
        return [result async for result in run]

    results = asyncio.run(main())
    assert all(result.ok for result in results)
    assert 1 <= at_once[1] <= 2  # (it was twelve)


def test_a_follow_up_asked_for_after_a_budgets_stop_keeps_what_its_pass_paid(
    server: ProviderBatchServer, tmp_path: Path, guessed_free: None
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    # One job: the budget is reached as its rows are taken in, doc 7's no JSON among them.
    run = _batch_run(
        provider,
        model,
        ["doc 100", "doc 101", "doc 7"],
        ledger,
        extractor=allama.Extractor(retries=1),
        max_cost="0.0000001",
    )
    results = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind if r.failure else "ok" for r in results] == [
        "ok",
        "ok",
        "follow_up_not_sent",
    ]
    assert results[2].pending and results[2].metadata is not None
    assert results[2].metadata.batch_passes == 1
    assert run.summary.passes == 3 and len(server.jobs) == 1
    rows = {row.position: row for row in Ledger(ledger, read_only=True).rows()}
    assert (rows[2].status, rows[2].cost, len(rows[2].log or [])) == ("pending", "0.00000225", 1)
    # The next run, with room, takes the answer in again and sends the follow-up alone.
    retrying = allama.Extractor(retries=1)
    done = _run(provider, model, ["doc 100", "doc 101", "doc 7"], ledger, extractor=retrying)
    assert done[2].value == Doc(n=7)  # answered the second time it is asked
    assert done[2].metadata is not None and done[2].metadata.batch_passes == 2
    assert len(server.jobs) == 2 and len(server.jobs[1].bodies) == 1


def test_jobs_left_out_by_a_budgets_stop_are_collected_by_the_next_run(
    server: ProviderBatchServer, tmp_path: Path, guessed_free: None
) -> None:
    provider, model = _provider(server, "openai-chat")
    _first_job_ends_first(server)
    ledger = tmp_path / "run.sqlite"
    docs = [f"doc {n}" for n in range(100, 109)]
    options: dict[str, Any] = {"job_size": 3, "max_cost": "0.000001"}
    first = list(_batch_run(provider, model, docs, ledger, **options))
    assert sorted(r.failure.kind for r in first if r.failure) == ["in_provider_job"] * 6
    with server.lock:
        for job in server.jobs:
            if job.end is None:
                server.finish(job, "completed")  # ended at the provider: paid, waiting
    # Under the same budget the next run sends nothing, and collects what ended.
    again = _batch_run(provider, model, docs, ledger, **options)
    results = sorted(again, key=lambda r: r.index)
    # Every input ended: doc 107's answer is no JSON, its failure.
    assert [r.index for r in results if not r.ok] == [7] and len(server.jobs) == 3
    assert again.summary.passes == 9


def test_a_run_under_a_spent_budget_gives_what_the_ledger_holds_and_sends_nothing(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    jobs = importlib.import_module("allama.batch._jobs")
    monkeypatch.setattr(jobs, "_CLAIMS_AT_ONCE", 2)  # the budget is spent by the first claims
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    assert all(r.ok for r in _run(provider, model, ["doc 100", "doc 101", "doc 102"], ledger))
    # The first value given spends the budget: the run reads on, gives the rest of what the
    # ledger holds, and submits no job for the new documents.
    docs = ["doc 100", "doc 150", "doc 101", "doc 151", "doc 102"]
    again = _batch_run(provider, model, docs, ledger, max_cost="0.000001")
    results = sorted(again, key=lambda r: r.index)
    assert [(r.index, r.value if r.ok else r.failure.kind) for r in results] == [  # type: ignore[union-attr]
        (0, Doc(n=100)),
        (1, "not_started"),
        (2, Doc(n=101)),
        (3, "not_started"),
        (4, Doc(n=102)),
    ]
    assert len(server.jobs) == 1 and again.summary.passes == 3
    assert {row.key for row in Ledger(ledger, read_only=True).rows()} == {
        r.key for r in results if r.ok
    }  # the new documents were given back unsent: no trace


def test_a_copy_read_after_its_first_ended_gets_its_result(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    jobs = importlib.import_module("allama.batch._jobs")  # `allama.batch` is the function
    monkeypatch.setattr(jobs, "_CLAIMS_AT_ONCE", 2)  # claims two at a time
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    assert all(r.ok for r in _run(provider, model, ["doc 1", "doc 2"], ledger))
    # doc 1 comes back from the ledger with the first claims; its copy comes after them.
    results = _run(provider, model, ["doc 1", "doc 2", "doc 3", "doc 1"], ledger)
    assert [(r.index, r.value, r.duplicate) for r in results] == [
        (0, Doc(n=1), False),
        (1, Doc(n=2), False),
        (2, Doc(n=3), False),
        (3, Doc(n=1), True),
    ]


# Refusals before anything is sent


def test_a_provider_without_a_batch_api_is_refused_naming_those_with_one() -> None:
    provider = allama.provider("groq", api_key="k")
    with pytest.raises(InvalidRequestError, match="openai, anthropic, gemini"):
        allama.batch(
            provider,
            Doc,
            ["doc 1"],
            request=allama.ChatRequest("m"),
            ledger="x.sqlite",
            provider_batch=True,
        )


def test_provider_batch_jobs_need_a_ledger_and_known_settings() -> None:
    provider = allama.provider("openai", api_key="k")
    request = allama.ChatRequest("gpt-4o-mini")
    with pytest.raises(ValueError, match="pass ledger="):
        allama.batch(provider, Doc, ["doc 1"], request=request, provider_batch=True)
    with pytest.raises(ValueError, match="'batch' or 'live'"):
        allama.batch(
            provider,
            Doc,
            ["doc 1"],
            request=request,
            ledger="x.sqlite",
            provider_batch=True,
            job_retry="later",
        )
    with pytest.raises(ValueError, match="job_size"):
        allama.batch(
            provider,
            Doc,
            ["doc 1"],
            request=request,
            ledger="x.sqlite",
            provider_batch=True,
            job_size=0,
        )


def test_jobs_are_split_by_job_size(server: ProviderBatchServer, tmp_path: Path) -> None:
    provider, model = _provider(server, "openai-chat")
    docs = [f"doc {n}" for n in _clean(25)]
    results = _run(provider, model, docs, tmp_path / "split.sqlite", job_size=10)
    assert all(r.ok for r in results)
    assert [len(keys) for keys in _keys_in(server, "openai-chat")] == [10, 10, 5]


# Killed with SIGKILL at random moments: nothing submitted twice, every result collected


RUNNER = textwrap.dedent(
    """
    import sys
    from pydantic import BaseModel
    import allama

    class Doc(BaseModel):
        n: int

    base, ledger, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    provider = allama.provider("openai", api_key="sk-test", base_url=base)
    run = allama.batch(
        provider, Doc, [f"doc {n}" for n in range(count)],
        request=allama.ChatRequest("gpt-4o-mini").system("Read the number."),
        ledger=ledger, provider_batch=True, poll_interval=0.05, job_size=7, backoff=0.01,
        extractor=allama.Extractor(retries=1),
    )
    for result in run:
        pass
    print(run.summary.done, run.summary.failed)
    """
)


def test_killed_runs_resume_without_submitting_twice(tmp_path: Path) -> None:
    server = ProviderBatchServer(polls_to_finish=3).start()
    try:
        script = tmp_path / "runner.py"
        script.write_text(RUNNER)
        ledger = tmp_path / "killed.sqlite"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        command = [sys.executable, str(script), server.openai_base, str(ledger), "40"]
        caught_in_jobs = 0

        def activity() -> int:  # jobs created and polls of them
            with server.lock:
                return len(server.jobs) + sum(job.polls for job in server.jobs)

        # Killed right after its first job is created (its inputs are out), then after a
        # few more creates or polls.
        for steps in (1, 3, 2):
            kill_after(
                lambda: subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env),
                activity,
                steps,
            )
            if ledger.exists():
                reader = Ledger(ledger, read_only=True)
                caught_in_jobs += sum(1 for row in reader.rows() if row.status == "submitted")
                reader.close()
        assert caught_in_jobs > 0  # the kills came while jobs were out
        final = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert final.returncode == 0, final.stderr
        assert final.stdout.split() == ["39", "1"]
        reader = Ledger(ledger, read_only=True)
        rows = {row.position: row for row in reader.rows()}
        reader.close()
        assert sorted(rows) == list(range(40))
        for n, row in rows.items():
            assert row.status == ("failed" if n == 13 else "done"), n
            # Never in more jobs than the attempts the ledger counted.
            assert server.submitted[("openai-chat", n)] <= row.attempts, n
        assert (
            sum(
                1
                for (family, n), count in server.submitted.items()
                if count > 1 and n not in (7, 23)
            )
            == 0
        )
    finally:
        server.stop()


def test_cost_at_batch_prices_in_the_summary(server: ProviderBatchServer, tmp_path: Path) -> None:
    provider, model = _provider(server, "openai-chat")
    run: BatchRun[Doc] = allama.batch(
        provider,
        Doc,
        [f"doc {n}" for n in _clean(10)],
        request=allama.ChatRequest(model).system("Read the number."),
        ledger=tmp_path / "cost.sqlite",
        provider_batch=True,
        poll_interval=0.001,
    )
    results = list(run)
    standard = cost_of("openai", model, allama.Usage(input_tokens=10, output_tokens=5))
    assert isinstance(standard, allama.Cost)
    assert run.summary.cost == sum((r.metadata.cost.total for r in results), Decimal(0))  # type: ignore[union-attr]
    assert run.summary.cost == standard.total * 10 / 2


def test_a_repeated_input_goes_into_the_job_once_and_is_paid_once(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    a, b = _clean(2)
    first, second = f"doc {a}", f"doc {b}"
    run: BatchRun[Doc] = allama.batch(
        provider,
        Doc,
        [first, second, first],
        request=allama.ChatRequest(model).system("Read the number."),
        ledger=tmp_path / "repeat.sqlite",
        provider_batch=True,
        poll_interval=0.001,
    )
    results = sorted(run, key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=a), Doc(n=b), Doc(n=a)]
    assert [r.duplicate for r in results] == [False, False, True]
    assert _keys_in(server, "openai-chat") == [sorted([first, second])]
    summary = run.summary
    assert (summary.done, summary.duplicates, summary.passes, summary.batch_passes) == (3, 1, 2, 2)
    assert results[0].metadata is not None and results[0].metadata.cost is not None
    assert summary.cost == 2 * results[0].metadata.cost.total


def test_a_label_that_cannot_be_made_fails_its_input_not_the_run(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    a, b = _clean(2)

    def label(document: str) -> str:
        if document == f"doc {b}":
            raise ValueError("no label for this one")
        return "labelled"

    results = _run(provider, model, [f"doc {a}", f"doc {b}"], tmp_path / "l.sqlite", label=label)
    assert [(r.label, r.value) for r in results] == [("labelled", Doc(n=a)), ("#1", None)]
    assert results[1].failure is not None and results[1].failure.kind == "ValueError"
    assert _keys_in(server, "openai-chat") == [[f"doc {a}"]]


# The command


def test_the_command_runs_polls_cancels_and_collects(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "doc.py").write_text(
        "from pydantic import BaseModel\n\n\nclass Doc(BaseModel):\n    n: int\n"
    )
    source = tmp_path / "docs.jsonl"
    source.write_text(
        "".join(json.dumps({"id": f"d{n}", "text": f"doc {n}"}) + "\n" for n in range(15))
    )
    out = tmp_path / "out.jsonl"
    ledger = tmp_path / "out.jsonl.ledger.sqlite"
    command = [
        "batch",
        "run",
        str(source),
        "--type",
        f"{tmp_path / 'doc.py'}:Doc",
        "--provider",
        "openai",
        "--base-url",
        server.openai_base,
        "--model",
        "gpt-4o-mini",
        "--out",
        str(out),
        "--provider-batch",
        "--poll-interval",
        "0.01",
        "--retries",
        "1",
    ]
    # Stopped while the job runs: it goes on at the provider, and says so. (A Ctrl-C the
    # process ignores, the command keeps ignoring: the held job would be waited for forever.)
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    server.hold = True

    def interrupt() -> None:
        deadline = time.monotonic() + 30
        while not any(job.polls for job in server.jobs) and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    assert main(command) == 130
    err = capsys.readouterr().err
    assert "15 documents from" in err and "as provider batch jobs" in err
    assert "in provider batch jobs: 15 (they go on at the provider; the same command " in err
    # `status` asks the provider how the job stands now (the fake's endpoint confirmed).
    assert main(["batch", "status", str(ledger), "--base-url", server.openai_base]) == 0
    shown = capsys.readouterr().out
    [job] = server.jobs
    assert "provider batch jobs: 1" in shown
    assert f"15 requests, {job.id}: " in shown and "; now: in_progress" in shown
    assert main(["batch", "status", str(ledger), "--json", "--no-poll"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(j["job_id"], j["requests"], j["outcome"]) for j in report["jobs"]] == [
        (job.id, 15, None)
    ]
    assert report["counts"] == {"submitted": 15}
    # A provider that takes the connection and never answers holds `status` a while only
    # (the transport's ten minutes a job, before), and is said to.
    import allama.cli._batch as command_module

    silent = socket.create_server(("127.0.0.1", 0))
    kept = []
    threading.Thread(target=lambda: kept.append(silent.accept()), daemon=True).start()
    monkeypatch.setattr(command_module, "_POLL_SECONDS", 1.0)
    there = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
    with contextlib.closing(sqlite3.connect(ledger)) as db:
        (before,) = db.execute("SELECT base_url FROM jobs").fetchone()
        db.execute("UPDATE jobs SET base_url = ?", (there,))
        db.commit()
    try:
        began = time.monotonic()
        assert main(["batch", "status", str(ledger), "--base-url", there]) == 0
        assert time.monotonic() - began < 20
        assert "now: not asked (no answer in 1 s; --no-poll shows the last state seen)" in (
            capsys.readouterr().out
        )
    finally:
        silent.close()
        with contextlib.closing(sqlite3.connect(ledger)) as db:
            db.execute("UPDATE jobs SET base_url = ?", (before,))
            db.commit()
    # A live run of the same settings leaves them to their job, and says what collects them.
    at = command.index("--provider-batch")
    live = command[:at] + command[at + 3 :]  # (without --provider-batch --poll-interval 0.01)
    assert main(live) == 0
    assert (
        "in provider batch jobs: 15 (they go on at the provider; the same command with "
        "--provider-batch collects them, not a live run, `allama batch status` shows them)"
    ) in capsys.readouterr().err
    # Run again once the job ended: collected, the follow-ups sent, nothing twice.
    server.hold = False
    assert main(command) == 0
    err = capsys.readouterr().err
    assert "14 done, 1 failed" in err
    assert "passes 15 (15 by provider batch jobs, at batch prices), attempts 16" in err
    assert len(rows_of(out)) == 14
    assert len(server.jobs) == 2
    assert all(server.submitted[("openai-chat", n)] == 1 for n in range(15) if n not in (7,))


def test_the_cancel_command_cancels_the_jobs_that_have_not_ended(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cancel.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(4), ledger, lambda: bool(server.jobs))
    cancel = ["batch", "cancel", str(ledger), "--base-url", server.anthropic_base]
    assert main(cancel) == 0
    assert capsys.readouterr().out == (
        f"cancel requested: {server.jobs[0].id} (the next `allama batch run` collects what "
        "it ran)\n"
    )
    assert main(cancel) == 0  # the job is cancelling: asked again
    capsys.readouterr()
    server.hold = False
    results = _run(provider, model, _docs(4), ledger)
    assert [r.failure.kind for r in results if r.failure] == ["job_canceled"] * 4
    assert main(cancel) == 0
    assert capsys.readouterr().out == "no provider batch job of this ledger is still running\n"


def test_a_job_id_not_of_the_providers_form_is_neither_polled_nor_cancelled_and_is_shown_escaped(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    made = server.new_id
    # A direction override and a C1 control pass in a URL's path; a terminal obeys both.
    monkeypatch.setattr(server, "new_id", lambda prefix: made(prefix) + "\u202e\x9b2J")
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cancel.sqlite"
    server.hold = True
    run, _ = _run_until(provider, model, _docs(2), ledger, lambda: bool(server.jobs))
    [job] = server.jobs
    (tag,) = [row.tag for row in Ledger(ledger, read_only=True).jobs()]
    # Not put in a path: the run says it by the job's tag, and asks no more of it.
    assert run.summary.jobs[tag] == f"{tag}: not read: error"
    assert job.polls == 0
    assert main(["batch", "cancel", str(ledger), "--base-url", server.anthropic_base]) == 1
    shown = ascii(job.id)  # 'msgbatch_...\u202e\x9b2J', escaped
    assert capsys.readouterr().out == (
        f"not cancelled: {tag}: the id {shown} is not an Anthropic batch id (letters, digits, "
        "_ and -: msgbatch_...): it is not put in a request's path, where it could reach "
        "another of the provider's resources with the key (the next `allama batch run` "
        "collects it)\n"
    )
    assert not job.cancel_requested
    assert [row.cancel_requested for row in Ledger(ledger, read_only=True).jobs()] == [False]


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _killed_at_a_live_send(
    server: ProviderBatchServer, family: str, ledger: Path, document: str, **options: Any
) -> None:
    """A provider batch run under `job_retry="live"`, in a process of its own, killed with
    SIGKILL as it begins to send a row again live."""
    provider_name, provider_options, model = FAMILIES[family]
    script = ledger.with_suffix(".dies.py")
    script.write_text(
        textwrap.dedent(
            f"""
            import os, signal
            import allama
            from allama.batch import _jobs
            from pydantic import BaseModel

            class Doc(BaseModel):
                n: int

            async def dies(self, item):
                os.kill(os.getpid(), signal.SIGKILL)

            _jobs.JobRunner._live = dies
            provider = allama.provider(
                {provider_name!r}, base_url={_base(server, provider_name)!r}, api_key="k",
                **{provider_options!r},
            )
            request = allama.ChatRequest({model!r}).system("Read the number.")
            run = allama.batch(
                provider, Doc, [{document!r}], request=request, ledger={str(ledger)!r},
                provider_batch=True, poll_interval=0.001, backoff=0.001, job_retry="live",
                **{options!r},
            )
            list(run)
            """
        )
    )
    died = subprocess.run([sys.executable, str(script)], timeout=120, capture_output=True)
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()[-2000:]


@pytest.mark.parametrize("family", ["anthropic", "gemini"])
def test_a_row_to_send_again_live_is_sent_live_by_the_run_that_resumes_it(
    server: ProviderBatchServer, tmp_path: Path, family: str
) -> None:
    # doc 23 comes back with a server error; the run is killed as it begins to send it
    # again live. The run that resumed it put it in a new job: its server error kept no
    # answer, and nothing said it had been sent.
    ledger = tmp_path / "live.sqlite"
    _killed_at_a_live_send(server, family, ledger, "doc 23")
    assert len(server.jobs) == 1 and server.live[(family, 23)] == 0
    provider, model = _provider(server, family)
    (result,) = _run(provider, model, ["doc 23"], ledger, job_retry="live")
    assert result.value == Doc(n=23)
    assert len(server.jobs) == 1 and server.live[(family, 23)] == 1
    assert result.metadata is not None and result.metadata.batch_passes == 0


def test_a_failure_given_back_after_a_killed_retry_starts_afresh_when_tried_again(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    # A failure tried again (`retry_failed`) by a run killed as it sent it again live, then
    # given back as it was by a run that does not retry failures: it kept what the killed
    # run had written, and the next run trying it again sent it live, as a follow-up.
    ledger = tmp_path / "failed.sqlite"
    provider, model = _provider(server, "gemini")
    server.fail_all_rows = True
    (failed,) = _run(provider, model, ["doc 5"], ledger, max_attempts=2)
    assert failed.failure is not None and failed.failure.kind == "server"
    _killed_at_a_live_send(server, "gemini", ledger, "doc 5", retry_failed=True)
    (given,) = _run(provider, model, ["doc 5"], ledger)
    assert given.failure is not None and given.resumed
    server.fail_all_rows = False
    jobs = len(server.jobs)
    (again,) = _run(provider, model, ["doc 5"], ledger, retry_failed=True, job_retry="live")
    assert again.value == Doc(n=5) and server.live[("gemini", 5)] == 0
    assert len(server.jobs) == jobs + 1
    assert again.metadata is not None and again.metadata.batch_passes == 1


@pytest.mark.parametrize("job_retry", ["batch", "live"])
def test_a_gemini_job_failed_on_the_providers_side_sends_its_rows_again(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job_retry: str
) -> None:
    # `BATCH_STATE_FAILED` with `INTERNAL`: the provider's fault, not the input's. Its rows
    # failed as `job_failed`, sent again only by a run told to retry failures.
    operation = ProviderBatchServer.gemini_operation

    def failed_first(self: ProviderBatchServer, job: Any) -> Any:
        answer = operation(self, job)
        if job.end == "completed" and job is self.jobs[0]:
            answer["metadata"]["state"] = "BATCH_STATE_FAILED"
            answer["metadata"].pop("output", None)
            answer.pop("response", None)
            answer["error"] = {"code": 13, "message": "Internal error.", "status": "INTERNAL"}
            # Its stats count none answered (one that counts answers is read again, then
            # its rows taken for lost: see the test of the job that names none).
            answer["metadata"]["batchStats"].pop("successfulRequestCount", None)
        return answer

    monkeypatch.setattr(ProviderBatchServer, "gemini_operation", failed_first)
    provider, model = _provider(server, "gemini")
    results = _run(provider, model, _docs(2), tmp_path / "internal.sqlite", job_retry=job_retry)
    assert [r.value for r in results] == [Doc(n=0), Doc(n=1)]
    assert [r.attempts for r in results] == [2, 2]
    assert len(server.jobs) == (2 if job_retry == "batch" else 1)
    # Refused for its input (`INVALID_ARGUMENT`): failed, not sent again.
    refused = {"code": 3, "message": "Bad request.", "status": "INVALID_ARGUMENT"}

    def refused_first(self: ProviderBatchServer, job: Any) -> Any:
        answer = failed_first(self, job)
        if "error" in answer:
            answer["error"] = refused
        return answer

    monkeypatch.setattr(ProviderBatchServer, "gemini_operation", refused_first)
    server.jobs.clear()
    results = _run(provider, model, ["doc 5", "doc 6"], tmp_path / "refused.sqlite")
    assert [r.failure.kind if r.failure else "ok" for r in results] == ["job_failed"] * 2
    assert len(server.jobs) == 1


def test_a_job_refused_as_a_whole_fails_its_rows_with_the_reason(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.adapters._jobs._openai import OpenAIJobs

    line = OpenAIJobs.line

    def duplicated(self: OpenAIJobs, target: Any, entry: Any) -> bytes:
        return line(self, target, entry) * 2  # every custom_id twice: the job fails validation

    monkeypatch.setattr(OpenAIJobs, "line", duplicated)
    provider, model = _provider(server, "openai-chat")
    run = _batch_run(provider, model, _docs(3), tmp_path / "refused.sqlite")
    results = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind if r.failure else "ok" for r in results] == ["job_failed"] * 3
    failure = results[0].failure
    assert failure is not None and not failure.retryable
    # The provider's codes are the message; its words (which may quote the requests) are
    # kept apart, for the caller who asks.
    assert failure.message == (
        f"job {server.jobs[0].id} failed: duplicate_custom_id (lines 2, 4, 6)"
    )
    assert failure.provider_message is not None
    assert failure.provider_message.startswith("The custom_id for this request is a duplicate")
    shown = repr(results[0]) + repr(run.summary) + "\n".join(run.summary.lines())
    assert "duplicate of another" not in shown
    assert len(server.jobs) == 1  # not sent again


def test_a_failure_a_stopped_retry_gives_back_keeps_no_log(tmp_path: Path) -> None:
    # Taken out of its job to be sent again (`[]`: nothing answered it takes in), then
    # given back by a run that stopped before sending it: a failure keeps no log (the
    # next run trying it again read it as a follow-up, sent live).
    from allama.batch._ledger import Status

    path = tmp_path / "ledger.sqlite"
    first = Ledger(path, settings={})
    assert first.claim("k", 0, "#0").granted
    first.finish("k", status=Status.FAILED, seconds=0.1, error={"kind": "server", "message": "x"})
    first.end(None)
    first.close()
    again = Ledger(path, settings={})
    with again._transaction():
        again._reopen("k")
        assert again._claim("k", 0, "#0", retry_failed=True).granted
        again._connection.execute("UPDATE items SET status = ?, job = 'j'", (Status.SUBMITTED,))
        assert again._resend("k", None) == 3
    again.release("k")
    (row,) = again.rows()
    assert (row.status, row.log) == (Status.FAILED, None)
    again.end("stopped")
    again.close()


def test_a_key_a_job_refused_as_a_whole_echoes_is_redacted(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The job's words went to `provider_message`, and into the ledger, as the provider
    # wrote them: a live call's error has the key cut out, the job's did not.
    import _provider_batch_server

    def echoes(line: Any, endpoint: str, seen: set[str]) -> Any:
        return {"code": "invalid_api_key", "message": "Incorrect API key provided: test-key."}

    monkeypatch.setattr(_provider_batch_server, "_openai_line_problem", echoes)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "echo.sqlite"
    results = _run(provider, model, _docs(2), ledger)
    assert [r.failure.kind if r.failure else "ok" for r in results] == ["job_failed"] * 2
    failure = results[0].failure
    assert failure is not None
    assert failure.provider_message == "Incorrect API key provided: <redacted>."
    assert b"test-key" not in ledger.read_bytes()


def test_a_jobs_state_is_printed_with_its_control_characters_escaped(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import sqlite3

    from allama.adapters._jobs._openai import OpenAIJobs
    from allama.cli import main

    line = OpenAIJobs.line
    monkeypatch.setattr(OpenAIJobs, "line", lambda self, t, e: line(self, t, e) * 2)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "refused.sqlite"
    _run(provider, model, _docs(1), ledger)
    # What a job's state says comes from the provider: a terminal's escapes in it, or a
    # line break, are shown escaped, never sent to the terminal.
    with sqlite3.connect(ledger) as db:
        db.execute("UPDATE jobs SET error = ?", ("\x1b[31mred\nFORGED line",))
    db.close()
    assert main(["batch", "status", str(ledger), "--no-poll"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\nFORGED" not in out
    (job,) = [row for row in out.splitlines() if "failed: " in row and " request" in row]
    assert job.endswith(
        ": collected (total 0, completed 0, failed 0), failed: \\x1b[31mred\\nFORGED line"
    )


def test_a_job_the_provider_does_not_know_fails_its_rows_which_only_retry_failed_sends(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "lost.sqlite"
    numbers = _clean(4)
    docs = [f"doc {n}" for n in numbers]
    server.hold = True
    _run_until(provider, model, docs, ledger, lambda: any(job.polls for job in server.jobs))
    with server.lock:
        lost = server.jobs.pop()  # deleted, or another key's: reading it answers 404
    server.hold = False
    results = _run(provider, model, docs, ledger)
    assert [r.failure.kind for r in results if r.failure] == ["job_missing"] * 4
    failure = results[0].failure
    assert failure is not None and failure.message == (
        f"job {lost.id}: the provider does not know job {lost.id} (3 reads answered 404): "
        "deleted, or made with another key or project, where it may run; retry_failed "
        "(--retry-failed) sends its inputs again"
    )
    assert not server.jobs  # not sent again: that job may still run, and be paid for
    assert all(r.failure for r in _run(provider, model, docs, ledger))  # a plain run: not
    again = _run(provider, model, docs, ledger, retry_failed=True)
    assert [r.value for r in again] == [Doc(n=n) for n in numbers]
    assert len(server.jobs) == 1


def test_a_job_the_provider_answers_404_once_is_read_again_and_collected(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _provider_batch_server

    read = _provider_batch_server._Handler.openai_get
    answered: list[str] = []

    def not_yet(handler: Any, data: Any, *groups: Any) -> Any:
        if not answered:
            answered.append("404")
            raise handler._fail(404, "No batch found with id.")
        return read(handler, data, *groups)

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_get", not_yet)
    provider, model = _provider(server, "openai-chat")
    results = _run(provider, model, _docs(3), tmp_path / "once.sqlite")
    assert answered == ["404"]
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 1 and [r.attempts for r in results] == [1, 1, 1]


@pytest.mark.parametrize(
    ("dialect", "reader", "gone"),
    [
        ("openai-chat", "openai_file_content", 1),
        ("anthropic", "anthropic_results", 1),
        ("openai-chat", "openai_file_content", 3),
        ("anthropic", "anthropic_results", 3),
    ],
)
def test_results_the_provider_answers_404_for_are_not_bought_again(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dialect: str,
    reader: str,
    gone: int,
) -> None:
    # The job ran its rows, and they were paid for: a 404 on its results is read again as
    # one on the job is, and results gone for good fail its rows rather than send them in
    # a new job (paid twice); only retry_failed does that.
    import _provider_batch_server

    read = getattr(_provider_batch_server._Handler, reader)
    answered: list[str] = []

    def not_found(handler: Any, data: Any, *groups: Any) -> Any:
        if len(answered) < gone:
            answered.append("404")
            raise handler._fail(404, "Not found.")
        return read(handler, data, *groups)

    monkeypatch.setattr(_provider_batch_server._Handler, reader, not_found)
    provider, model = _provider(server, dialect)
    ledger = tmp_path / "gone.sqlite"
    results = _run(provider, model, _docs(3), ledger)
    assert answered == ["404"] * gone and len(server.jobs) == 1
    assert sum(server.answered.values()) == 3  # each row run once
    if gone == 1:
        assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
        return
    assert [r.failure.kind for r in results if r.failure] == ["job_missing"] * 3
    failure = results[0].failure
    assert failure is not None and failure.message.endswith(
        "(3 reads) after it ended completed: its requests may have run and been paid for; "
        "retry_failed (--retry-failed) sends its inputs again"
    )
    assert all(r.failure for r in _run(provider, model, _docs(3), ledger))
    assert len(server.jobs) == 1
    again = _run(provider, model, _docs(3), ledger, retry_failed=True)
    assert [r.value for r in again] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 2


def test_rows_of_a_results_file_gone_fail_and_those_of_the_file_read_are_kept(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The output file reads, the error file answers 404 for good: the answers in hand are
    # taken in; the rows that file held were not billed (failed, or never run), so they are
    # sent again as missing rows are, never counted paid.
    import _provider_batch_server

    read = _provider_batch_server._Handler.openai_file_content

    def error_file_gone(handler: Any, data: Any, file_id: str) -> Any:
        if any(job.error_file_id == file_id for job in server.jobs):
            raise handler._fail(404, "No such File object.")
        return read(handler, data, file_id)

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_file_content", error_file_gone)
    provider, model = _provider(server, "openai-chat")
    run = _batch_run(provider, model, _docs(15), tmp_path / "half.sqlite")
    results = sorted(run, key=lambda r: r.index)
    failed = {r.index: r.failure.kind for r in results if r.failure}
    assert failed == {7: "extraction_parse", 13: "job_missing"}
    assert [r.value for r in results if r.index not in failed] == [
        Doc(n=n) for n in range(15) if n not in failed
    ]
    # Only the unbilled row is sent again (its error file gone each time), up to
    # max_attempts; nothing paid for is bought again.
    assert server.submitted[("openai-chat", 13)] == 5 and len(server.jobs) == 5
    assert all(server.submitted[("openai-chat", n)] == 1 for n in range(15) if n != 13)
    assert run.summary.cost_unknown == 0


def test_one_results_file_answering_404_once_is_read_again_with_the_other(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 404 may be the provider's own delay: read again, as a job's is, before any row is
    # taken for lost.
    import _provider_batch_server

    read = _provider_batch_server._Handler.openai_file_content
    refused: list[str] = []

    def output_not_yet(handler: Any, data: Any, file_id: str) -> Any:
        if not refused and any(job.output_file_id == file_id for job in server.jobs):
            refused.append(file_id)
            raise handler._fail(404, "No such File object.")
        return read(handler, data, file_id)

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_file_content", output_not_yet)
    provider, model = _provider(server, "openai-chat")
    run = _batch_run(provider, model, _docs(15), tmp_path / "again.sqlite")
    results = sorted(run, key=lambda r: r.index)
    assert len(refused) == 1
    assert {r.index: r.failure.kind for r in results if r.failure} == {
        7: "extraction_parse",
        13: "invalid_request",
    }
    assert run.summary.cost_unknown == 0


def test_results_gone_for_good_stop_a_run_under_a_budget(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its rows ran and were paid: a cost unknown, which a budget cannot be kept with.
    import _provider_batch_server

    def gone(handler: Any, data: Any, *groups: Any) -> Any:
        raise handler._fail(404, "Not found.")

    monkeypatch.setattr(_provider_batch_server._Handler, "openai_file_content", gone)
    provider, model = _provider(server, "openai-chat")
    # Room for one job of three at a time (each request guessed at its cost here, $0.00000225
    # at batch prices): the second waits for the first's cost.
    from decimal import Decimal

    from allama.batch._jobs import JobRunner

    monkeypatch.setattr(JobRunner, "_guessed_cost", lambda self, item: Decimal("0.00000225"))
    budget = "0.000008"
    run = _batch_run(
        provider, model, _docs(6), tmp_path / "budget.sqlite", job_size=3, max_cost=budget
    )
    results = list(run)
    assert len(server.jobs) == 1
    assert run.summary.cost_unknown == 3
    assert run.summary.stopped is not None and "is unknown" in run.summary.stopped
    kinds = sorted(r.failure.kind for r in results if r.failure)
    assert kinds == ["job_missing"] * 3 + ["not_started"] * 3


def test_a_large_gemini_job_goes_in_an_uploaded_file(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.adapters._jobs import _gemini

    monkeypatch.setattr(_gemini, "INLINE_BYTES", 0)  # every job is "large"
    provider, model = _provider(server, "gemini")
    results = _run(
        provider, model, _docs(10), tmp_path / "file.sqlite", extractor=allama.Extractor(retries=1)
    )
    assert [r.value for r in results] == [Doc(n=n) for n in range(10)]
    [first, _] = server.jobs
    assert first.input_file is not None and first.responses_file is not None
    assert sorted(first.keys) == sorted(r.key for r in results)
    assert server.result_downloads[first.id] == 1


@pytest.mark.parametrize("family", ["openai-chat", "gemini"])
def test_a_document_holding_unicode_line_ends_does_not_break_its_jobs_file(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    """Text from PDFs and web pages holds U+2028, U+2029 and U+0085, which end a line to a
    reader splitting on every Unicode line end: written as they are, one such document
    failed the whole job as a file of invalid JSON, every input in it with it."""
    from allama.adapters._jobs import _gemini

    monkeypatch.setattr(_gemini, "INLINE_BYTES", 0)  # Gemini's jobs in a file too
    provider, model = _provider(server, family)
    docs = ["doc 0", "doc 1 \u2028 signed", "doc 2 \u2029 paid \x85 thanks"]
    results = _run(provider, model, docs, tmp_path / "breaks.sqlite")
    assert [(r.value, r.failure) for r in results] == [(Doc(n=n), None) for n in range(3)]
    assert len(server.jobs) == 1


def _anthropic_batch_of_another(server: ProviderBatchServer, bodies: list[Any], ids: str) -> None:
    """A batch of the same requests, made at the fake's Anthropic face by another program:
    its request ids (`{ids}-0`, ...) are none of the run's."""
    import httpx2

    requests = [{"custom_id": f"{ids}-{n}", "params": body} for n, body in enumerate(bodies)]
    httpx2.post(
        f"{server.url}/v1/messages/batches",
        json={"requests": requests},
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
    ).raise_for_status()


@pytest.mark.parametrize(("count", "requests"), [(3, "3 requests"), (1, "1 request")])
def test_a_cut_off_anthropic_submission_that_cannot_be_told_apart_stops_the_run(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    requests: str,
) -> None:

    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "ambiguous.sqlite"
    _cut_off(provider, model, _docs(count), ledger)
    # Another batch of the same size, created meanwhile by someone else.
    _anthropic_batch_of_another(server, server.jobs[0].bodies, "other")
    run = _batch_run(provider, model, _docs(count), ledger)
    results = sorted(run, key=lambda r: r.index)
    said = run.summary.stopped
    assert said is not None and f"2 batches of {requests} were created since" in said
    assert "told apart by their results' request ids once they end" in said
    assert [r.failure.message.endswith(said) for r in results if r.failure] == [True] * count
    assert run.summary.refused == "ambiguous_job"
    assert list(run.summary.jobs.values()) == [
        "made or not, not told apart from another job: collected once it can be"
    ]
    assert len(server.jobs) == 2  # nothing sent again
    # Once both have ended, their results tell them apart: the run's is collected.
    mine, theirs = server.jobs
    server.finish(theirs, "completed")
    server.finish(mine, "completed")
    results = _run(provider, model, _docs(count), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(count)]
    assert len(server.jobs) == 2 and server.result_downloads[theirs.id] == 1


def test_status_counts_a_job_of_one_request_in_the_singular(
    server: ProviderBatchServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from allama.cli import main

    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "one.sqlite"
    run = _batch_run(provider, model, _docs(1), ledger)
    assert [r.value for r in run] == [Doc(n=0)]
    [job] = server.jobs
    assert main(["batch", "status", str(ledger), "--no-poll"]) == 0
    assert f"gpt-4o-mini, 1 request, {job.id}: " in capsys.readouterr().out


def test_the_command_says_a_job_not_told_apart_is_collected_only_once_it_can_be(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    (tmp_path / "doc.py").write_text(
        "from pydantic import BaseModel\n\n\nclass Doc(BaseModel):\n    n: int\n"
    )
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": f"doc {n}"}) + "\n" for n in range(3)))
    command = [
        "batch",
        "run",
        str(source),
        "--type",
        f"{tmp_path / 'doc.py'}:Doc",
        "--provider",
        "anthropic",
        "--base-url",
        server.anthropic_base,
        "--model",
        "claude-sonnet-4-5",
        "--out",
        str(tmp_path / "out.jsonl"),
        "--provider-batch",
        "--poll-interval",
        "0.01",
    ]
    with mock.patch.object(Ledger, "job_submitted", _dies_before_the_id_is_recorded):
        assert main(command) != 0  # the job reached the provider, its id not the ledger
    _anthropic_batch_of_another(server, server.jobs[0].bodies, "other")
    capsys.readouterr()
    assert main(command) != 0
    err = capsys.readouterr().err
    assert (
        "in provider batch jobs: 3 (they go on at the provider; the same command collects "
        "them once the job can be told apart from another, `allama batch status` shows them)"
    ) in err
    assert len(server.jobs) == 2  # nothing sent again


def test_a_lost_answer_whose_job_cannot_be_told_apart_stops_the_run_keeping_its_inputs(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Anthropic makes the batch and its answer is lost, while another program makes one of
    # the same size: which is the run's cannot be told before they end. The run stops as
    # it does when the provider cannot be asked, its inputs kept in the job's record.
    import _provider_batch_server

    create = _provider_batch_server._Handler.anthropic_create

    def lost(handler: Any, data: Any) -> Any:
        if len(server.jobs) == 0:
            answer = handler.send_json
            handler.send_json = lambda status, body: None
            create(handler, data)
            handler.send_json = answer
            _anthropic_batch_of_another(server, server.jobs[0].bodies, "other")
            raise handler._fail(502, "Bad gateway.")
        return create(handler, data)

    monkeypatch.setattr(_provider_batch_server._Handler, "anthropic_create", lost)
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.001, 0.002))
    provider, model = _provider(server, "anthropic")
    run = _batch_run(provider, model, _docs(4), tmp_path / "lost.sqlite", job_size=2)
    results = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind for r in results if r.failure] == ["in_provider_job"] * 2 + [
        "not_started"
    ] * 2
    assert run.summary.refused == "ambiguous_job"
    assert run.summary.stopped is not None and "2 batches of 2 requests" in run.summary.stopped
    assert len(server.jobs) == 2  # the run's and the other's: none sent again


def test_a_cancel_of_a_cut_off_job_that_cannot_be_told_apart_says_it_was_not_cancelled(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    # Neither found nor ruled out: not said to be cancelled, which would leave it running
    # (and paid for) while the user is told otherwise.
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "ambiguous.sqlite"
    _cut_off(provider, model, _docs(3), ledger)
    _anthropic_batch_of_another(server, server.jobs[0].bodies, "other")
    refused: list[str] = []
    unmade: list[str] = []
    asked = asyncio.run(cancel_jobs(str(ledger), provider, refused=refused, unmade=unmade))
    (job,) = Ledger(ledger, read_only=True).jobs()
    assert (asked, unmade) == ([], [])
    (line,) = refused
    assert line.startswith(f"{job.tag}: its job cannot be told apart (")
    assert not any(made.cancel_requested for made in server.jobs)
    # Not recorded either: once both end, the run tells them apart and collects its own.
    assert not job.cancel_requested
    mine, theirs = server.jobs
    server.finish(theirs, "completed")
    server.finish(mine, "completed")
    results = _run(provider, model, _docs(3), ledger)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]


def test_a_cut_off_anthropic_submission_is_told_from_an_ended_batch_of_another(
    server: ProviderBatchServer, tmp_path: Path
) -> None:

    provider, model = _provider(server, "anthropic")
    # (Each of its own documents: a batch that ended holding the same requests is another
    # candidate, as it would be.)
    for ended_mine in (False, True):
        ledger = tmp_path / f"{ended_mine}.sqlite"
        docs = [f"doc {n}" for n in (2 * ended_mine, 2 * ended_mine + 1)]
        _cut_off(provider, model, docs, ledger)
        mine = server.jobs[-1]
        _anthropic_batch_of_another(server, mine.bodies, "other")
        theirs = server.jobs[-1]
        server.finish(theirs, "completed")  # ended: its results name other requests
        if ended_mine:
            server.finish(mine, "completed")
        results = _run(provider, model, docs, ledger)
        assert [r.value for r in results] == [
            Doc(n=n) for n in (2 * ended_mine, 2 * ended_mine + 1)
        ]
        assert server.jobs[-1] is theirs  # the run's own collected, nothing sent again
    # A cut-off submission that never reached the provider, beside an ended batch of
    # its size: no batch holds its requests, which are sent.
    ledger = tmp_path / "never.sqlite"
    docs = ["doc 4", "doc 5"]
    _cut_off(provider, model, docs, ledger)
    never = server.jobs.pop()  # as if it had not been made
    _anthropic_batch_of_another(server, never.bodies, "else")
    server.finish(server.jobs[-1], "completed")
    results = _run(provider, model, docs, ledger)
    assert [r.value for r in results] == [Doc(n=4), Doc(n=5)]
    assert sorted(server.jobs[-1].keys) == sorted(r.key for r in results)  # sent anew


def test_a_cut_off_anthropic_submission_is_told_apart_from_the_runs_other_jobs(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "two.sqlite"
    recorded = Ledger.job_submitted
    calls: list[str] = []

    def second_cut_off(self: Ledger, tag: str, job_id: str) -> None:
        calls.append(job_id)
        if len(calls) == 2:
            raise RuntimeError("the process died here")
        recorded(self, tag, job_id)

    # Two jobs of the same size, made at the same time: the first's id is recorded, the
    # second's is not.
    monkeypatch.setattr(Ledger, "job_submitted", second_cut_off)
    with pytest.raises(RuntimeError, match="died here"):
        _run(provider, model, _docs(6), ledger, job_size=3)
    assert len(server.jobs) == 2
    monkeypatch.setattr(Ledger, "job_submitted", recorded)
    results = _run(
        provider, model, _docs(6), ledger, job_size=3, extractor=allama.Extractor(retries=1)
    )
    assert [r.value for r in results] == [Doc(n=n) for n in range(6)]
    assert len(server.jobs) == 2  # the second found among them, not sent again


def test_a_live_follow_up_that_meets_a_server_error_after_the_stop_stays_pending(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    # doc 7's job row is no JSON: it is asked again live, and that call meets a 503 just
    # as the run is stopped.
    run = _batch_run(
        provider, model, ["doc 7"], ledger, job_retry="live", extractor=allama.Extractor(retries=1)
    )
    answer = server.answer
    monkeypatch.setattr(server, "answer", _overloaded_live(server, run.stop))
    (result,) = list(run)
    assert result.failure is not None and result.failure.kind == "server"
    assert result.attempts == 2  # the job's row, and the live call
    # Not failed: pending for the next run, which the error does not stop. The job's pass
    # was paid for, and is kept.
    (row,) = Ledger(ledger, settings={}).rows()
    assert (row.status, row.attempts) == ("pending", 2)
    assert row.error is not None and row.error["kind"] == "server"
    assert result.metadata is not None
    assert (result.metadata.passes, result.metadata.batch_passes) == (1, 1)
    assert run.summary.passes == 1 and run.summary.priced == 1
    # The next run takes it up.
    monkeypatch.setattr(server, "answer", answer)
    retries = allama.Extractor(retries=1)
    (again,) = list(
        _batch_run(provider, model, ["doc 7"], ledger, job_retry="live", extractor=retries)
    )
    assert again.value == Doc(n=7) and not again.resumed
    assert again.metadata is not None and again.metadata.passes == 2


def test_a_live_follow_up_another_run_took_over_is_not_sent_again_from_here(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    # doc 7's job row is no JSON: it is asked again live, and that call meets a 503. Before
    # it is sent again, another run takes the input over (it saw this run as ended).
    run = _batch_run(
        provider, model, ["doc 7"], ledger, job_retry="live", extractor=allama.Extractor(retries=1)
    )
    live: list[int] = []

    def take_over() -> None:
        live.append(1)
        with contextlib.closing(sqlite3.connect(ledger)) as db, db:
            db.execute("UPDATE items SET run_id = 'another', attempts = attempts + 1")

    monkeypatch.setattr(server, "answer", _overloaded_live(server, take_over))
    (result,) = list(run)
    assert result.failure is not None and result.failure.kind == "in_flight_elsewhere"
    assert live == [1]  # not sent again from here
    (row,) = Ledger(ledger, settings={}).rows()
    assert (row.attempts, row.run_id) == (3, "another")
    # What this run paid (the job's pass) is its result's, and the summary's.
    assert result.metadata is not None and result.metadata.batch_passes == 1
    assert (run.summary.elsewhere, run.summary.passes) == (1, 1)


def test_a_row_worth_sending_again_that_comes_back_after_the_stop_stays_pending(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(provider, model, ["doc 1", "doc 23"], ledger)
    answer = server.answer

    def stopping(family: str, body: Any, *, batch: bool, model: str = "") -> Outcome:
        run.stop()  # while the job runs: its rows are answered when it ends
        return answer(family, body, batch=batch, model=model)

    monkeypatch.setattr(server, "answer", stopping)
    results = sorted(run, key=lambda r: r.index)
    assert results[0].value == Doc(n=1)
    # doc 23's row is a server error: not failed, not sent again, but pending.
    assert results[1].failure is not None and results[1].failure.kind == "overloaded"
    rows = {row.position: row for row in Ledger(ledger, settings={}).rows()}
    assert (rows[1].status, rows[1].attempts) == ("pending", 1)
    assert len(server.jobs) == 1 and sum(server.live.values()) == 0
    monkeypatch.setattr(server, "answer", answer)
    again = sorted(_batch_run(provider, model, ["doc 1", "doc 23"], ledger), key=lambda r: r.index)
    assert [r.value for r in again] == [Doc(n=1), Doc(n=23)]
    assert again[0].resumed and not again[1].resumed


def test_a_live_run_leaves_inputs_in_a_provider_job_to_a_provider_batch_run(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "mixed.sqlite"
    server.hold = True
    _run_until(provider, model, _docs(3), ledger, lambda: bool(server.jobs))
    live: BatchRun[Doc] = allama.batch(
        provider,
        Doc,
        _docs(3),
        request=allama.ChatRequest(model).system("Read the number."),
        ledger=ledger,
    )
    results = list(live)
    assert {r.failure.kind for r in results if r.failure} == {"in_provider_job"}
    assert "--provider-batch" in str(results[0].failure)
    assert sum(server.live.values()) == 0 and live.summary.in_jobs == 3


def test_a_stop_ends_a_provider_batch_run_still_reading_its_inputs(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")

    def endless() -> Iterator[str]:
        n = 0
        while True:  # a feed that never ends: a stop must end the run
            assert n < 200_000, "inputs read long after the run stopped"
            yield f"doc {n}"
            n += 1

    run = _batch_run(provider, model, endless(), tmp_path / "run.sqlite")  # type: ignore[arg-type]
    threading.Timer(0.3, run.stop).start()
    results = list(run)
    assert run.summary.stopped == "stopped by the caller"
    # Read and claimed before the stop, none was submitted: each is not started.
    assert results and {r.failure.kind for r in results if r.failure} == {"not_started"}
    assert not any(r.ok for r in results)


def test_a_provider_batch_run_stopped_or_broken_while_reading_gives_its_inputs_back(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    before = _batch_run(provider, model, _docs(5), ledger)
    before.stop()
    assert list(before) == []  # stopped before it started: nothing read, nothing claimed

    def breaking() -> Iterator[str]:
        yield from _docs(30)
        raise RuntimeError("the cursor went away")

    run = _batch_run(provider, model, breaking(), ledger)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="the cursor went away"):
        results = []
        for result in run:
            results.append(result)
    # Every input read is accounted for; none was submitted, and none keeps an attempt.
    assert sorted(r.index for r in results) == list(range(30))
    assert {r.failure.kind for r in results if r.failure} == {"not_started"}
    assert run.summary.stopped == "reading the inputs raised RuntimeError after 30"
    assert list(Ledger(ledger, settings={}).rows()) == []


class _Intercepting(Transport):
    """Answers the first `times` requests that `matches` with `answer`; the rest go on."""

    def __init__(self, matches: Callable[[HttpRequest], bool], answer: HttpResponse, times: int):
        super().__init__()
        self.matches, self.answer, self.times = matches, answer, times
        self.seen: list[tuple[str, str]] = []

    def send(self, request: HttpRequest) -> HttpResponse:
        self.seen.append((request.method, request.url))
        if self.times and self.matches(request):
            self.times -= 1
            return self.answer
        return super().send(request)


def _limited(wait: int) -> HttpResponse:
    body = {"error": {"message": "Too many batches", "type": "rate_limit_exceeded"}}
    headers = {"retry-after": str(wait), "content-type": "application/json"}
    return HttpResponse(429, headers, json.dumps(body).encode())


def _makes_a_job(request: HttpRequest) -> bool:
    return request.method == "POST" and request.url.endswith("/batches")


def test_a_rate_limit_on_making_a_job_slows_the_run_and_uploads_the_file_once(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    transport = _Intercepting(_makes_a_job, _limited(0), times=8)
    provider, model = _provider(server, "openai-chat", transport)
    docs = [f"doc {n}" for n in (100, 101, 102)]
    results = _run(provider, model, docs, tmp_path / "run.sqlite")
    # More rate limits than max_attempts (5): none is a try; the job is made at the ninth.
    assert [r.value for r in results] == [Doc(n=100), Doc(n=101), Doc(n=102)]
    assert len(server.jobs) == 1
    uploads = [url for method, url in transport.seen if method == "POST" and url.endswith("/files")]
    assert len(uploads) == 1
    assert [row.attempts for row in Ledger(tmp_path / "run.sqlite", read_only=True).rows()] == [
        1
    ] * 3


def test_a_job_the_provider_will_not_take_for_an_hour_leaves_its_inputs_pending(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    transport = _Intercepting(_makes_a_job, _limited(3600), times=1)
    provider, model = _provider(server, "openai-chat", transport)
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(provider, model, ["doc 100", "doc 101"], ledger)
    results = list(run)
    assert [(r.failure.kind, r.pending) for r in results if r.failure] == [
        ("rate_limited", True)
    ] * 2
    assert run.summary.stopped == "the provider asked to wait 3600 s before the next job"
    assert run.summary.refused == "rate_limited" and server.jobs == []
    assert Ledger(ledger, read_only=True).counts() == {"pending": 2}
    # The next run sends them.
    assert [r.value for r in _run(provider, model, ["doc 100", "doc 101"], ledger)] == [
        Doc(n=100),
        Doc(n=101),
    ]


class _Rewriting(Transport):
    """Passes each answer through `rewrite` (request, response) before the client reads it."""

    def __init__(self, rewrite: Callable[[HttpRequest, HttpResponse], HttpResponse]) -> None:
        super().__init__()
        self.rewrite = rewrite

    def send(self, request: HttpRequest) -> HttpResponse:
        return self.rewrite(request, super().send(request))


def test_a_failed_row_that_reported_usage_is_counted_at_batch_prices_when_sent_again(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    failed_once: list[bool] = []

    def fail_first_row(request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if not request.url.endswith("/content") or failed_once:
            return response
        failed_once.append(True)
        line = json.loads(response.content.splitlines()[0])
        line["response"]["body"].update(
            status="failed",
            output=[],
            error={"code": "server_error", "message": "The model failed to generate."},
            usage={"input_tokens": 1000, "output_tokens": 500, "total_tokens": 1500},
        )
        return HttpResponse(response.status, response.headers, json.dumps(line).encode() + b"\n")

    provider, model = _provider(server, "openai-responses", _Rewriting(fail_first_row))
    run = _batch_run(provider, model, ["doc 101"], tmp_path / "run.sqlite")
    (result,) = list(run)
    # Sent again in a second job, answered; the failed row was paid for too, at batch prices.
    assert result.value == Doc(n=101) and len(server.jobs) == 2
    assert result.metadata is not None and result.metadata.usage is not None
    usage = result.metadata.usage
    assert (usage.input_tokens, usage.output_tokens, result.metadata.passes) == (1010, 505, 1)
    # gpt-4o-mini at batch prices: $0.075 and $0.30 per million tokens in and out.
    assert run.summary.cost == Decimal("0.00022725")


def _busy() -> HttpResponse:
    body = {"error": {"message": "The server is overloaded", "type": "server_error"}}
    return HttpResponse(503, {"content-type": "application/json"}, json.dumps(body).encode())


def _refused() -> HttpResponse:
    body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    return HttpResponse(401, {"content-type": "application/json"}, json.dumps(body).encode())


def _reads_results(request: HttpRequest) -> bool:
    return request.method == "GET" and request.url.endswith("/content")


@pytest.mark.parametrize("family", ["openai-chat", "anthropic"])
def test_a_server_error_on_reading_a_jobs_results_is_read_again(
    server: ProviderBatchServer, tmp_path: Path, family: str
) -> None:
    def results(request: HttpRequest) -> bool:
        return request.method == "GET" and request.url.endswith(("/content", "/results"))

    provider, model = _provider(server, family, _Intercepting(results, _busy(), times=2))
    docs = ["doc 100", "doc 101"]
    assert [r.value for r in _run(provider, model, docs, tmp_path / "run.sqlite")] == [
        Doc(n=100),
        Doc(n=101),
    ]
    assert len(server.jobs) == 1


def test_a_key_refused_while_reading_a_job_stops_the_run_and_leaves_the_job(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    # Refused twice: as the run reads the job's results, and as it asks once more at its stop.
    transport = _Intercepting(_reads_results, _refused(), times=2)
    provider, model = _provider(server, "openai-chat", transport)
    run = _batch_run(provider, model, ["doc 100", "doc 101"], ledger)
    results = list(run)  # no exception: the run stops as for a refused key
    assert [r.failure.kind for r in results if r.failure] == ["in_provider_job"] * 2
    assert run.summary.refused == "authentication"
    assert run.summary.stopped is not None and run.summary.stopped.startswith(
        "the provider refused the run's key or account"
    )
    # The job is left to the next run, which collects it without submitting another.
    again = _run(provider, model, ["doc 100", "doc 101"], ledger)
    assert [r.value for r in again] == [Doc(n=100), Doc(n=101)] and len(server.jobs) == 1


def test_a_follow_up_left_unsent_by_a_stop_gives_its_attempt_back(
    server: ProviderBatchServer, tmp_path: Path, guessed_free: None
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    # One job: doc 7's answer is no JSON, and its follow-up is routed to the next job; doc
    # 100's value, taken in beside it, spends the budget before that job is sent.
    run = _batch_run(
        provider,
        model,
        ["doc 7", "doc 100"],
        ledger,
        extractor=allama.Extractor(retries=1),
        max_cost="0.0000001",
    )
    results = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind if r.failure else "ok" for r in results] == [
        "follow_up_not_sent",
        "ok",
    ]
    assert len(server.jobs) == 1 and results[0].attempts == 1
    rows = {row.position: row for row in Ledger(ledger, read_only=True).rows()}
    assert (rows[0].status, rows[0].attempts, len(rows[0].log or [])) == ("pending", 1, 1)


def test_a_provider_batch_run_keeps_its_heartbeat_while_its_jobs_run(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    import sqlite3

    ledgers = importlib.import_module("allama.batch._ledger")
    monkeypatch.setattr(ledgers, "HEARTBEAT_SECONDS", 0.05)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    server.hold = True
    run = _batch_run(provider, model, ["doc 100"], ledger)
    reading = threading.Thread(target=lambda: list(run), daemon=True)
    reading.start()
    deadline = time.monotonic() + 10
    while not any(job.polls for job in server.jobs) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.6)  # the job runs: a run elsewhere must still see this one alive
    with contextlib.closing(sqlite3.connect(ledger)) as db:
        (beat,) = db.execute("SELECT heartbeat FROM runs").fetchone()
    assert time.time() - beat < 0.4
    server.hold = False
    reading.join(10)
    assert run.summary.done == 1


class Huge(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def huge(cls, n: int) -> int:
        if n < 10**9:
            raise ValueError("not huge")
        return n


def test_a_failure_of_a_job_sent_again_with_retry_failed_counts_every_pass(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"

    def run(**options: Any) -> BatchRun[Huge]:
        return allama.batch(
            provider,
            Huge,
            ["doc 100", "doc 101"],
            request=allama.ChatRequest(model).system("Read the number."),
            ledger=ledger,
            provider_batch=True,
            poll_interval=0.001,
            backoff=0.001,
            extractor=allama.Extractor(retries=1),  # a job, then a follow-up job: two passes
            **options,
        )

    first = run()
    assert [r.failure.kind for r in first if r.failure] == ["extraction_parse"] * 2
    assert first.summary.passes == 4
    # Sent again afresh (the answers of the failed attempt are in its record, not replayed):
    # two more passes each, and the record and the summary count all eight.
    again = run(retry_failed=True)
    results = list(again)
    assert [r.failure.kind for r in results if r.failure] == ["extraction_parse"] * 2
    assert again.summary.passes == 8 and len(server.jobs) == 4
    rows = list(Ledger(ledger, read_only=True).rows())
    passes = [
        row.record["passes"] + sum(e["passes"] for e in row.record["earlier_attempts"])
        for row in rows
    ]
    assert passes == [4, 4] and all(row.log is None for row in rows)


def test_a_row_sent_again_counts_this_runs_sends_not_the_ledgers_attempts(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    import sqlite3

    from allama.batch import input_key

    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    # Five runs cut off after claiming doc 23, before any job was made: attempts counted,
    # nothing sent. (Its row answers a server error the first time it is asked.)
    request = allama.ChatRequest(model).system("Read the number.").user("doc 23")
    Ledger(ledger, settings={}).close()
    with contextlib.closing(sqlite3.connect(ledger)) as db:
        db.execute(
            "INSERT INTO items (key, position, label, status, attempts) VALUES (?, 0, '#0', "
            "'pending', 5)",
            (input_key(provider.name, Doc, request),),
        )
        db.commit()
    (result,) = _run(provider, model, ["doc 23"], ledger)  # max_attempts 5
    assert result.value == Doc(n=23) and server.submitted[("openai-chat", 23)] == 2


def test_no_live_follow_up_is_sent_after_a_budgets_stop(
    server: ProviderBatchServer, tmp_path: Path, guessed_free: None
) -> None:
    provider, model = _provider(server, "openai-chat")
    # Ten rows answered a server error in the job (sent again live) beside ten answered
    # right; the budget is reached as the job's rows are taken in, before any live send.
    numbers = [50 * k + 23 for k in range(1, 11)] + [50 * k + 1 for k in range(1, 11)]
    run = _batch_run(
        provider,
        model,
        [f"doc {n}" for n in numbers],
        tmp_path / "run.sqlite",
        job_retry="live",
        rpm=6,
        max_cost="0.00001125",
    )
    runner: Any = run._runner
    after_the_stop: list[str] = []
    send = runner.send

    async def watched(request: Any) -> Any:
        if runner.stopping is not None:
            after_the_stop.append(request.messages[-1].text())
        return await send(request)

    runner.send = watched
    results = list(run)
    assert after_the_stop == []
    assert sorted(r.failure.kind if r.failure else "ok" for r in results) == (
        ["follow_up_not_sent"] * 10 + ["ok"] * 10
    )
    assert run.summary.pending == 10
    attempts = {row.attempts for row in Ledger(tmp_path / "run.sqlite", read_only=True).rows()}
    assert attempts == {1}  # the live sends not made gave their attempts back


def test_a_budget_reached_by_a_jobs_last_row_is_no_stop_whatever_the_inputs_are(
    server: ProviderBatchServer, tmp_path: Path, guessed_free: None
) -> None:
    provider, model = _provider(server, "openai-chat")
    docs = [f"doc {n}" for n in _clean(3)]
    # One job of three rows: their cost, taken in when it ends, reaches the budget, with
    # nothing left to send; a generator's inputs as a list's.
    for name, inputs in (("list", list(docs)), ("generator", (doc for doc in docs))):
        run = _batch_run(provider, model, inputs, tmp_path / f"{name}.sqlite", max_cost="0.000005")
        assert all(result.ok for result in run)
        assert run.summary.stopped is None, name
        assert run.summary.budget_reached is not None
        assert run.summary.budget_reached.startswith("the budget of $0.000005 is reached")
        (entry,) = Ledger(tmp_path / f"{name}.sqlite", read_only=True).runs()
        assert entry["stopped"] is None


def test_the_command_exits_3_when_its_budget_leaves_jobs_open(
    server: ProviderBatchServer,
    tmp_path: Path,
    guessed_free: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from allama.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    _first_job_ends_first(server)
    (tmp_path / "doc.py").write_text(
        "from pydantic import BaseModel\n\n\nclass Doc(BaseModel):\n    n: int\n"
    )
    source = tmp_path / "docs.jsonl"
    source.write_text(
        "".join(json.dumps({"id": f"d{n}", "text": f"doc {n}"}) + "\n" for n in _clean(6))
    )
    out = tmp_path / "out.jsonl"
    command = ["batch", "run", str(source), "--type", f"{tmp_path / 'doc.py'}:Doc"]
    command += ["--provider", "openai", "--base-url", server.openai_base]
    command += ["--model", "gpt-4o-mini", "--out", str(out), "--provider-batch"]
    command += ["--poll-interval", "0.01", "--job-size", "3", "--max-cost", "0.000001"]
    # The first job's rows reach the budget: the second is left open at the provider, its
    # three values missing; the budget held them back, as it does inputs not started.
    assert main(command) == 3
    err = capsys.readouterr().err
    assert "3 in provider batch jobs" in err
    assert "stopped starting new inputs: the budget of $0.000001 is reached" in err
    assert len(rows_of(out)) == 3


def test_a_value_a_job_at_another_endpoint_gave_is_not_taken(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    provider, model = _provider(server, "openai-chat")
    assert [r.ok for r in _batch_run(provider, model, _docs(2), ledger)] == [True, True]
    other = ProviderBatchServer().start()
    try:
        elsewhere, _ = _provider(other, "openai-chat")
        results = list(_batch_run(elsewhere, model, _docs(2), ledger))
        assert [r.failure.kind if r.failure else "ok" for r in results] == ["another_endpoint"] * 2
        assert other.jobs == []  # nothing sent
    finally:
        other.stop()


def test_a_failure_tried_again_in_a_job_another_run_collects_counts_what_it_paid_before(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    request = allama.ChatRequest(model).system("Read the number.")
    # Document 57 is answered with no JSON: a paid pass, live, that fails.
    (live,) = allama.batch(provider, Doc, ["doc 57"], request=request, ledger=ledger)
    assert live.failure is not None and live.metadata is not None and live.metadata.passes == 1
    # Tried again in a job; the run stops while the job runs, and the next one collects it.
    server.hold = True
    _run_until(
        provider, model, ["doc 57"], ledger, lambda: any(j.polls for j in server.jobs),
        retry_failed=True,
    )  # fmt: skip
    server.hold = False
    (collected,) = _run(provider, model, ["doc 57"], ledger, retry_failed=True)
    paid = [record.passes for record in collected.spent] + [collected.metadata.passes]
    assert sum(paid) == 2  # the live pass before the job, counted with the job's


@pytest.mark.parametrize("job_retry", ["batch", "live"])
def test_a_job_another_run_took_over_is_sent_again_by_that_run_alone(
    server: ProviderBatchServer, tmp_path: Path, job_retry: str
) -> None:
    import contextlib
    import sqlite3
    import threading

    # Run A makes a job and polls it; paused on another host (its heartbeat stale), another
    # run takes the job over. A resumes and reads the job: the rows worth sending again
    # (doc 7 without JSON the first time, doc 23 a server error) are that run's to send.
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    server.hold = True
    run = _batch_run(provider, model, ["doc 7", "doc 23", "doc 1"], ledger, job_retry=job_retry)
    results: list[BatchResult[Doc]] = []
    reader = threading.Thread(target=lambda: results.extend(run), daemon=True)
    reader.start()
    deadline = time.monotonic() + 10
    while not any(job.polls for job in server.jobs) and time.monotonic() < deadline:
        time.sleep(0.005)
    with contextlib.closing(sqlite3.connect(ledger)) as db, db:
        db.execute("UPDATE runs SET host = 'elsewhere', heartbeat = ?", (time.time() - 120,))
        (tag,) = db.execute("SELECT tag FROM jobs").fetchone()
    other = Ledger(ledger, settings={})
    assert other.take_job(tag)
    server.hold = False
    reader.join(30)
    assert not reader.is_alive()
    assert {r.failure.kind for r in results if r.failure is not None} == {"in_flight_elsewhere"}
    assert len(server.jobs) == 1 and not server.live  # nothing sent again from A
    with contextlib.closing(sqlite3.connect(ledger)) as db:
        rows = db.execute("SELECT status, attempts, run_id FROM items").fetchall()
        (state, collector) = db.execute("SELECT state, collector FROM jobs").fetchone()
    assert rows == [("submitted", 1, other.run_id)] * 3
    assert state != "collected" and collector == other.run_id  # the other run collects it


class Repeated(BaseModel):
    """A value whose reading empties it: `seen` is an `Iterable` filled from `n`."""

    n: int
    seen: Iterable[int] = ()

    @model_validator(mode="before")
    @classmethod
    def fill(cls, data: Any) -> Any:
        if isinstance(data, dict) and "n" in data:
            return {**data, "seen": [data["n"], data["n"]]}
        return data


def test_each_copy_of_an_input_in_a_job_gets_its_iterable_whole(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    docs = ["doc 1", "doc 1", "doc 2"]

    def run() -> list[BatchResult[Repeated]]:
        results = allama.batch(
            provider,
            Repeated,
            docs,
            request=allama.ChatRequest(model).system("Read the number."),
            ledger=tmp_path / "run.sqlite",
            provider_batch=True,
            poll_interval=0.001,
            backoff=0.001,
        )
        return sorted(results, key=lambda r: r.index)

    for results in (run(), run()):  # sent in a job; then given from the ledger
        assert [r.duplicate for r in results] == [False, True, False]
        assert results[0].value is not results[1].value
        assert [list(r.value.seen) for r in results if r.value is not None] == [
            [1, 1],
            [1, 1],
            [2, 2],
        ]
    assert server.submitted[("openai-chat", 1)] == 1


def _keyless_gemini_responses(monkeypatch: pytest.MonkeyPatch, *, first_only: bool) -> None:
    """Gemini's inlined responses without their requests' keys, as they have come back, in
    the requests' order; from the first job alone (`first_only`), or from every job."""
    answered = ProviderBatchServer._gemini_output
    first: list[str] = []

    def keyless(self: ProviderBatchServer, job: Any) -> Any:
        output = answered(self, job)
        if not first:
            first.append(job.id)
        if first_only and job.id != first[0]:
            return output
        for entry in (output or {}).get("inlinedResponses", {}).get("inlinedResponses", []):
            entry.pop("metadata", None)
        return output

    monkeypatch.setattr(ProviderBatchServer, "_gemini_output", keyless)


def test_keyless_gemini_responses_in_order_go_to_no_input_even_of_the_submitting_run(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One for each request, in their order, collected by the run that knows that order:
    still never matched by place (the order has not held), so inputs whose every job
    answers so fail as missing, given no answer of another's."""
    _keyless_gemini_responses(monkeypatch, first_only=False)
    provider, model = _provider(server, "gemini")
    docs = [f"doc {n}" for n in (0, 1, 2, 4, 5)]
    results = _run(provider, model, docs, tmp_path / "run.sqlite", max_attempts=2)
    assert [r.value for r in results] == [None] * 5
    assert len(server.jobs) == 2  # sent again once, in a job of its own
    assert all(server.submitted[("gemini", n)] == 2 for n in (0, 1, 2, 4, 5))
    for result in results:
        assert result.failure is not None and result.failure.kind == "job_missing"
        assert result.failure.message == (
            f"job {server.jobs[1].id} ended completed without a response for this request "
            "(5 responses came without the key of a request, and a response is matched by "
            "its key alone)"
        )
        # The unmatched responses were paid for, at a cost unknown.
        assert result.metadata is not None and result.metadata.cost is None


def test_keyless_gemini_responses_of_a_job_another_run_submitted_go_to_no_input(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run that collects the job reads its inputs in another order than the requests'.
    _keyless_gemini_responses(monkeypatch, first_only=True)
    provider, model = _provider(server, "gemini")
    ledger = tmp_path / "run.sqlite"
    docs = [f"doc {n}" for n in (0, 1, 2, 4, 5)]
    server.hold = True
    _run_until(provider, model, docs, ledger, lambda: any(job.polls for job in server.jobs))
    server.hold = False
    results = _run(provider, model, docs[::-1], ledger)
    # Not one input given another's answer: sent again, in a job of this run's own, whose
    # responses carry their keys and answer them.
    assert [r.value for r in results] == [Doc(n=n) for n in (5, 4, 2, 1, 0)]
    assert len(server.jobs) == 2
    assert all(server.submitted[("gemini", n)] == 2 for n in (0, 1, 2, 4, 5))


# A run killed after its input file was uploaded, before its job was made


class _DiesMakingTheJob(Transport):
    """A process that dies as it asks for its job to be made, its input file uploaded: the
    request never leaves, and the ledger is as a SIGKILL there leaves it."""

    def send(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.url.endswith(("/batches", ":batchGenerateContent")):
            raise RuntimeError("the process died here")
        return super().send(request)


def _killed_after_the_upload(
    server: ProviderBatchServer, family: str, docs: list[str], ledger: Path
) -> Any:
    """The file a run killed as it asked for its job uploaded (no job made), as the
    provider keeps it."""
    provider, model = _provider(server, family, _DiesMakingTheJob())
    with pytest.raises(RuntimeError, match="died here"):
        list(_batch_run(provider, model, docs, ledger))
    assert server.jobs == []
    (uploaded,) = server.files.values()  # the documents' text, at the provider
    return uploaded


@pytest.mark.parametrize("family", ["openai-chat", "gemini"])
def test_the_input_file_of_a_job_a_killed_run_never_made_is_deleted_by_the_next_run(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    from allama.adapters._jobs import _gemini

    monkeypatch.setattr(_gemini, "INLINE_BYTES", 0)  # Gemini's requests in a file too
    ledger = tmp_path / "killed.sqlite"
    uploaded = _killed_after_the_upload(server, family, _docs(2), ledger)
    (row,) = Ledger(ledger, read_only=True).jobs()
    # Its id in the ledger before the job was asked for; named by the tag, once.
    assert (row.state, row.job_id, row.input_file) == ("submitting", None, uploaded.id)
    assert uploaded.filename == (f"{row.tag}.jsonl" if family == "openai-chat" else row.tag)
    assert row.tag.startswith("allama-") and not row.tag.startswith("allama-allama-")
    provider, model = _provider(server, family)
    run = _batch_run(provider, model, _docs(2), ledger)
    results = sorted(run, key=lambda r: r.index)
    assert [(r.value, r.attempts) for r in results] == [(Doc(n=0), 1), (Doc(n=1), 1)]
    # Looked for, not found: its file deleted before its inputs were sent in a new job.
    assert server.deleted[0] == uploaded.id and uploaded.id not in server.files
    assert len(server.jobs) == 1 and server.jobs[0].input_file != uploaded.id
    said = (
        f"the provider made no job of it (none was found there); its input file "
        f"{uploaded.id}, uploaded, was deleted"
    )
    unmade, made = Ledger(ledger, read_only=True).jobs()
    assert (unmade.tag, unmade.state, unmade.error) == (row.tag, "not_submitted", said)
    assert run.summary.jobs[row.tag] == f"not submitted: {said}"
    assert made.state == "collected"


def test_an_input_file_of_a_job_never_made_that_cannot_be_deleted_is_named_in_a_warning(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "killed.sqlite"
    uploaded = _killed_after_the_upload(server, "openai-chat", _docs(2), ledger)
    (tag,) = [row.tag for row in Ledger(ledger, read_only=True).jobs()]
    refused = HttpResponse(
        500,
        {"content-type": "application/json"},
        json.dumps(
            {"error": {"message": "The server had an error.", "type": "server_error"}}
        ).encode(),
    )

    def deletes_it(request: HttpRequest) -> bool:
        return request.method == "DELETE" and request.url.endswith(f"/files/{uploaded.id}")

    provider, model = _provider(server, "openai-chat", _Intercepting(deletes_it, refused, 1))
    with pytest.warns(RuntimeWarning) as warned:
        run = _batch_run(provider, model, _docs(2), ledger)
        assert [r.value for r in sorted(run, key=lambda r: r.index)] == [Doc(n=0), Doc(n=1)]
    words = (
        f"the input file {uploaded.id} of job {tag}, which was not made, could not be deleted "
        "(server (24 chars withheld) [provider=openai, status=500]): it holds the requests' "
        "text; delete it at the provider"
    )
    assert [str(w.message) for w in warned if w.category is RuntimeWarning] == [words]
    assert uploaded.id in server.files  # left, and said so
    said = f"the provider made no job of it (none was found there); {words}"
    (unmade, _) = Ledger(ledger, read_only=True).jobs()
    assert (unmade.state, unmade.error) == ("not_submitted", said)
    assert run.summary.jobs[tag] == f"not submitted: {said}"


def test_a_killed_submission_in_a_ledger_of_an_earlier_version_is_resumed(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    # A ledger whose `jobs` holds no `input_file` (its version recorded none): read, and
    # resumed, the column added; the file it never recorded is found by its name.
    ledger = tmp_path / "killed.sqlite"
    uploaded = _killed_after_the_upload(server, "openai-chat", _docs(2), ledger)
    with sqlite3.connect(ledger) as db:
        db.execute("ALTER TABLE jobs DROP COLUMN input_file")
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.state, row.input_file) == ("submitting", None)
    provider, model = _provider(server, "openai-chat")
    run = _batch_run(provider, model, _docs(2), ledger)
    assert [r.value for r in sorted(run, key=lambda r: r.index)] == [Doc(n=0), Doc(n=1)]
    unmade, made = Ledger(ledger, read_only=True).jobs()
    said = (
        "the provider made no job of it (none was found there); its input file "
        f"{uploaded.id}, uploaded but never recorded, was found by its name and deleted"
    )
    assert (unmade.state, unmade.error, unmade.input_file) == ("not_submitted", said, None)
    assert run.summary.jobs[row.tag] == f"not submitted: {said}"
    # The new job's input file, recorded, is deleted with its results: recorded no more.
    assert (made.state, made.input_file) == ("collected", None)
    assert uploaded.id in server.deleted and server.files == {}


# A Gemini job failed on the provider's side that counts requests answered


def _failed_counting_answers(
    monkeypatch: pytest.MonkeyPatch, reads: int, kept: int = 0
) -> list[str]:
    """The first `reads` reads of the first Gemini job once it ended say it failed on the
    provider's side (13, `INTERNAL`) with its stats counting 2 of 3 requests answered,
    naming the first `kept` of its responses; later reads are the job as it ended. Returns
    what each read said."""
    operation = ProviderBatchServer.gemini_operation
    said: list[str] = []

    def failed(self: ProviderBatchServer, job: Any) -> Any:
        answer = operation(self, job)
        if job.end != "completed" or job is not self.jobs[0]:
            return answer
        if len(said) >= reads:
            said.append("completed")
            return answer
        said.append("failed")
        metadata = answer["metadata"]
        metadata["state"] = "BATCH_STATE_FAILED"
        metadata["batchStats"] = {
            "requestCount": "3",
            "successfulRequestCount": "2",
            "failedRequestCount": "1",
        }
        answer["error"] = {"code": 13, "message": "Internal error"}
        responses = metadata["output"]["inlinedResponses"]["inlinedResponses"][:kept]
        if kept:
            metadata["output"]["inlinedResponses"]["inlinedResponses"] = responses
            answer["response"]["inlinedResponses"]["inlinedResponses"] = responses
        else:
            metadata.pop("output")
            answer.pop("response")
        return answer

    monkeypatch.setattr(ProviderBatchServer, "gemini_operation", failed)
    return said


def test_a_gemini_job_failed_on_the_providers_side_naming_no_answers_it_counts_fails_them(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its stats count 2 of its 3 requests answered, none named: read again, then its rows
    # taken for lost (not sent again unasked), 2 counted paid at a cost unknown.
    said = _failed_counting_answers(monkeypatch, reads=1_000)
    provider, model = _provider(server, "gemini")
    ledger = tmp_path / "failed.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger)
    results = sorted(run, key=lambda r: r.index)
    (job,) = server.jobs
    assert said == ["failed"] * 3
    assert sum(server.answered.values()) == 3  # each sent once
    error = (
        f"the provider named no responses of job {job.id} to read (no inlinedResponses, no "
        "responsesFile), though it ended BATCH_STATE_FAILED (13) with its stats counting 2 "
        "of its requests answered (3 reads): its requests may have run and been paid for; "
        "retry_failed (--retry-failed) sends its inputs again"
    )
    assert [(r.failure.kind, r.failure.message) for r in results if r.failure] == [
        ("job_missing", f"job {job.id}: {error}")
    ] * 3
    assert run.summary.cost_unknown == 2
    # Two records count a call paid, its usage and cost unknown; the third none.
    assert [(r.metadata.usage is not None, r.metadata.cost) for r in results if r.metadata] == [
        (True, None),
        (True, None),
        (False, None),
    ]
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.outcome, row.error) == ("lost", error)


def test_a_gemini_job_failed_on_the_providers_side_is_read_again_for_the_answers_it_counts(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Named on a later read: taken in, nothing sent again (paid twice).
    said = _failed_counting_answers(monkeypatch, reads=1)
    provider, model = _provider(server, "gemini")
    run = _batch_run(provider, model, _docs(3), tmp_path / "later.sqlite")
    results = sorted(run, key=lambda r: r.index)
    assert said == ["failed", "completed"]
    assert [(r.value, r.attempts) for r in results] == [(Doc(n=n), 1) for n in range(3)]
    assert len(server.jobs) == 1 and run.summary.cost_unknown == 0


def test_the_server_errors_of_a_gemini_job_failed_counting_more_answers_are_paid_unknown(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It names 1 of the 2 answers it counts: its 2 other rows are server errors, sent again,
    # and one of them (2 counted, 1 read) counted paid at a cost unknown.
    _failed_counting_answers(monkeypatch, reads=1_000, kept=1)
    provider, model = _provider(server, "gemini")
    run = _batch_run(provider, model, _docs(3), tmp_path / "some.sqlite")
    results = sorted(run, key=lambda r: r.index)
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    _, again = server.jobs
    answered = [r.index for r in results if r.attempts == 1]
    assert len(again.keys) == 2 and len(answered) == 1 and run.summary.cost_unknown == 1
    unknown = [r.index for r in results if r.metadata is not None and r.metadata.cost is None]
    assert len(unknown) == 1 and unknown[0] not in answered


@pytest.mark.parametrize("side", ["sync", "async"])
def test_a_jobs_own_calls_are_not_cut_by_the_providers_deadline(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, side: str
) -> None:
    """`deadline=` bounds model calls: a job's results file slower to download than it (a
    large one) is downloaded once, its rows answered, not cut and downloaded again until
    every row fails."""
    import _provider_batch_server as fake

    dispatch = fake._Handler._dispatch

    def slow_results(handler: Any, method: str) -> None:
        if method == "GET" and "/content" in handler.path:
            time.sleep(0.6)  # a large results file
        dispatch(handler, method)

    monkeypatch.setattr(fake._Handler, "_dispatch", slow_results)
    provider = allama.provider(
        "openai", base_url=server.openai_base, api_key="test-key", deadline=0.3
    )
    ledger = tmp_path / "deadline.sqlite"
    if side == "sync":
        results = _run(provider, "gpt-4o-mini", _docs(2), ledger)
    else:

        async def main() -> list[BatchResult[Doc]]:
            run = allama.abatch(
                provider,
                Doc,
                _docs(2),
                request=allama.ChatRequest("gpt-4o-mini").system("Read the number."),
                ledger=ledger,
                provider_batch=True,
                poll_interval=0.001,
                backoff=0.001,
            )
            return [result async for result in run]

        results = sorted(asyncio.run(main()), key=lambda r: r.index)
    assert [(r.value, r.failure) for r in results] == [(Doc(n=0), None), (Doc(n=1), None)]
    assert list(server.result_downloads.values()) == [1]
