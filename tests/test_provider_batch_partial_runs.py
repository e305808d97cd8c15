"""Provider batch jobs taken up by a run that holds part of them: a run over some of a job's
inputs (or one whose reading failed) keeps their rows and leaves the job, its files and the
others' rows at the provider for the run that reads the rest; and a cut-off Anthropic
submission is not taken for a batch still running that nothing confirms is its own (another
program's, of the same size), which no run and no cancel acts on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _provider_batch_server import ProviderBatchServer
from allama.batch import _jobs, cancel_jobs
from allama.batch._ledger import Ledger
from allama.providers._jobs import ProviderJobs
from test_provider_batch import Doc, _batch_run, _docs, _provider, _run, _run_until


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.001, 0.002))


_LEFT = (
    ", completed, 3 of its 6 rows left in it for a run that reads their inputs, the others "
    "collected"
)


def _held_job(
    server: ProviderBatchServer, provider: Any, model: str, ledger: Path
) -> tuple[str, Any]:
    """Six inputs in one job, left running at the provider by a run that stopped; then the
    job ends. Its tag, and the fake's job."""
    server.hold = True
    _, first = _run_until(
        provider, model, _docs(6), ledger, lambda: any(job.polls for job in server.jobs)
    )
    assert [r.failure.kind for r in first if r.failure] == ["in_provider_job"] * 6
    server.hold = False
    (tag,) = [row.tag for row in Ledger(ledger, read_only=True).jobs()]
    (job,) = server.jobs
    return tag, job


def _files_of(family: str, job: Any) -> list[str]:
    """The files the fake keeps for a job that answered every row: its input and its
    results (Anthropic's batches keep none)."""
    if family == "openai-chat":
        return sorted([job.input_file_id, job.output_file_id])
    if family == "gemini":
        return sorted([job.input_file, job.responses_file])
    return []


@pytest.mark.parametrize("family", ["openai-chat", "gemini", "anthropic"])
def test_a_run_over_part_of_a_jobs_inputs_leaves_the_others_rows_in_it(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    """The answers to the inputs the run did not read were paid for, and are in the job's
    results alone: its files are not deleted, nor the job marked collected, before a run
    that reads those inputs keeps them."""
    from allama.adapters._jobs import _gemini

    monkeypatch.setattr(_gemini, "INLINE_BYTES", 0)  # Gemini's job in a file, as OpenAI's
    provider, model = _provider(server, family)
    ledger = tmp_path / "part.sqlite"
    tag, job = _held_job(server, provider, model, ledger)
    run = _batch_run(provider, model, _docs(3), ledger)
    part = sorted(run, key=lambda r: r.index)
    assert [(r.value, r.failure) for r in part] == [(Doc(n=n), None) for n in range(3)]
    assert run.summary.jobs[tag].endswith(_LEFT)
    assert server.deleted == []
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.state == "collected", row.outcome) == (False, "completed")
    run = _batch_run(provider, model, _docs(6), ledger)
    whole = sorted(run, key=lambda r: r.index)
    assert [(r.value, r.failure, r.resumed) for r in whole] == [
        (Doc(n=n), None, n < 3) for n in range(6)
    ]
    assert run.summary.jobs[tag].endswith(", completed, collected")
    assert [row.state for row in Ledger(ledger, read_only=True).jobs()] == ["collected"]
    assert sorted(server.deleted) == _files_of(family, job)
    assert [server.submitted[(family, n)] for n in range(6)] == [1] * 6  # nothing sent again


def test_a_run_whose_inputs_fail_to_be_read_leaves_the_unread_rows_in_their_job(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "unread.sqlite"
    tag, job = _held_job(server, provider, model, ledger)

    def inputs() -> Iterator[str]:
        yield from _docs(3)
        raise OSError("disk read error")

    run = _batch_run(provider, model, inputs(), ledger)
    with pytest.raises(OSError, match="disk read error"):
        list(run)
    assert run.summary.jobs[tag].endswith(_LEFT)
    assert server.deleted == []
    results = _run(provider, model, _docs(6), ledger)
    assert [(r.value, r.failure) for r in results] == [(Doc(n=n), None) for n in range(6)]
    assert sorted(server.deleted) == _files_of("openai-chat", job)


def _another_batch(server: ProviderBatchServer, model: str, count: int) -> Any:
    """A batch of `count` requests made at the fake's Anthropic face by another program:
    its request ids are none of the run's."""
    import httpx2

    requests = [
        {
            "custom_id": f"other-{n}",
            "params": {
                "model": model,
                "max_tokens": 100,
                "messages": [{"role": "user", "content": f"doc {40 + n}"}],
            },
        }
        for n in range(count)
    ]
    httpx2.post(
        f"{server.url}/v1/messages/batches",
        json={"requests": requests},
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
    ).raise_for_status()
    return server.jobs[-1]


def test_a_cut_off_anthropic_submission_is_not_taken_for_a_running_batch_of_another(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cut.sqlite"

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the process died here")  # recorded as submitting, never sent

    with monkeypatch.context() as patched:
        patched.setattr(ProviderJobs, "submit", killed)
        with pytest.raises(RuntimeError, match="the process died here"):
            list(_batch_run(provider, model, _docs(3), ledger))
    (tag,) = [row.tag for row in Ledger(ledger, read_only=True).jobs()]
    server.hold = True
    other = _another_batch(server, model, 3)
    run, results = _run_until(provider, model, _docs(3), ledger, lambda: other.polls > 0)
    said = (
        f"in provider batch job {tag}, made or not ({other.id} may be it, told by its results "
        "once it ends): the same command looks for it, and collects it"
    )
    assert [(r.failure.kind, r.failure.message) for r in results if r.failure] == [
        ("in_provider_job", said)
    ] * 3
    assert run.summary.jobs[tag].endswith(
        ", may be this job, not yet confirmed: read, not cancelled, until its results' "
        "request ids tell, once it ends"
    )
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.job_id, row.state) == (None, "submitting")  # its id not taken for the job's
    refused: list[str] = []
    asked = asyncio.run(cancel_jobs(str(ledger), provider, refused=refused))
    assert (asked, other.cancel_requested) == ([], False)  # another's batch: not cancelled
    assert refused == [
        f"{tag}: its job cannot be told apart (a batch of 3 requests was created since the "
        f"submission was cut off ({other.id}), still running: allama cannot tell whether it "
        "is this run's before its results' request ids show it, once it ends)"
    ]
    server.hold = False
    # Read until it ends: its results hold none of the job's request ids, so it is let go.
    run = _batch_run(provider, model, _docs(3), ledger)
    results = sorted(run, key=lambda r: r.index)
    let_go = (
        f"in provider batch job {tag}: {other.id}, which could have been it, ended with none "
        "of the job's request ids in its results: the same command looks for the job again, "
        "and sends its inputs as new where no job holds them"
    )
    assert [(r.failure.kind, r.failure.message) for r in results if r.failure] == [
        ("in_provider_job", let_go)
    ] * 3
    assert run.summary.jobs == {
        tag: f"made or not: {other.id} ended with none of the job's request ids in its "
        "results; the next run looks for it"
    }
    # The next look rules it out (ended, none of the ids): the job was never made.
    results = _run(provider, model, _docs(3), ledger)
    assert [(r.value, r.failure) for r in results] == [(Doc(n=n), None) for n in range(3)]
    assert len(server.jobs) == 2 and not other.cancel_requested


def test_a_cut_off_anthropic_submission_found_running_is_recorded_once_its_rows_confirm_it(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own batch, alone of its size: read while it runs, its id recorded for the job
    only once its results hold the job's request ids, and collected."""
    from test_provider_batch import _cut_off

    provider, model = _provider(server, "anthropic")
    ledger = tmp_path / "cut.sqlite"
    _cut_off(provider, model, _docs(3), ledger)
    (made,) = server.jobs
    recorded: list[tuple[str, int]] = []
    submitted = Ledger.job_submitted

    def noted(self: Ledger, tag: str, job_id: str) -> None:
        recorded.append((job_id, made.polls))
        submitted(self, tag, job_id)

    monkeypatch.setattr(Ledger, "job_submitted", noted)
    results = _run(provider, model, _docs(3), ledger)
    assert [(r.value, r.failure) for r in results] == [(Doc(n=n), None) for n in range(3)]
    assert recorded == [(made.id, made.polls_to_finish)]  # once it showed its end
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.job_id, row.state) == (made.id, "collected")
    assert len(server.jobs) == 1
