"""Provider batch jobs: Gemini responses that come back without their keys are matched to
no input (never by their place, which their order need not keep); a job whose making the
provider refuses is that job's failure, said so, its uploaded file deleted and no further
job submitted; the rows a job did not answer (cancelled, expired) name it; a job that ended
counting answers before naming where they are is read again, never sent again unasked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import allama.adapters._jobs._gemini as gemini_jobs
from _provider_batch_server import Job, ProviderBatchServer, _Handler
from allama.adapters._jobs import JobState, JobTarget, Row, RowKind
from allama.batch._ledger import Ledger
from test_provider_batch import Doc, _batch_run, _docs, _provider, _run

GEMINI = gemini_jobs.DIALECT
TARGET = JobTarget("https://example.test/v1beta", {}, "gemini-2.5-flash", "")


def _keyless_once(monkeypatch: pytest.MonkeyPatch, *, file: bool = False) -> None:
    """The first Gemini job's responses without their keys and not in the requests' order
    (rotated by one); the jobs after it answer as the API documents."""
    seen: list[str] = []
    inline = ProviderBatchServer._gemini_output
    written = ProviderBatchServer._gemini_file

    def first(job: Job) -> bool:
        if job.id not in seen:
            seen.append(job.id)
        return job.id == seen[0]

    def keyless_inline(self: ProviderBatchServer, job: Job) -> Any:
        output = inline(self, job)
        listed = ((output or {}).get("inlinedResponses") or {}).get("inlinedResponses")
        if listed and first(job):
            stripped = [{k: v for k, v in entry.items() if k != "metadata"} for entry in listed]
            output = {"inlinedResponses": {"inlinedResponses": stripped[1:] + stripped[:1]}}
        return output

    def keyless_file(self: ProviderBatchServer, job: Job) -> None:
        written(self, job)
        if first(job):
            stored = self.files[str(job.responses_file)]
            lines = [json.loads(line) for line in stored.data.splitlines()]
            lines = [{k: v for k, v in line.items() if k != "key"} for line in lines]
            stored.data = b"".join(
                json.dumps(line).encode() + b"\n" for line in lines[1:] + lines[:1]
            )

    monkeypatch.setattr(ProviderBatchServer, "_gemini_output", keyless_inline)
    monkeypatch.setattr(ProviderBatchServer, "_gemini_file", keyless_file)
    if file:
        monkeypatch.setattr(gemini_jobs, "INLINE_BYTES", 0)


# 1. Gemini responses without keys.


@pytest.mark.parametrize("file", [False, True], ids=["inline", "file"])
def test_keyless_gemini_responses_out_of_order_give_no_input_another_inputs_answer(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file: bool
) -> None:
    _keyless_once(monkeypatch, file=file)
    provider, model = _provider(server, "gemini")
    docs = [f"doc {n}" for n in (0, 1, 2, 4)]
    results = _run(provider, model, docs, tmp_path / "run.sqlite")
    # Each input its own answer: those of the first job went to no input, sent again.
    assert [r.value for r in results] == [Doc(n=n) for n in (0, 1, 2, 4)]
    assert len(server.jobs) == 2
    assert all(server.submitted[("gemini", n)] == 2 for n in (0, 1, 2, 4))
    # The first job's answers were paid for (it counts them answered), at a cost unknown.
    for result in results:
        assert result.metadata is not None and result.metadata.cost is None


def test_keyless_gemini_responses_one_for_each_request_are_matched_to_no_input() -> None:
    keys = ["a", "b", "c"]
    entries = [
        {"response": {"candidates": [{"content": {"parts": [{"text": key}]}}]}} for key in "bca"
    ]
    state = JobState(
        "batches/1",
        "BATCH_STATE_SUCCEEDED",
        True,
        "completed",
        results={"inlinedResponses": {"inlinedResponses": entries}},
        billed=3,
    )
    steps = GEMINI.results(TARGET, state, keys, in_order=True)
    with pytest.raises(StopIteration) as done:
        next(steps)
    rows: dict[str, Row] = done.value.value
    assert [(rows[key].kind, rows[key].absent) for key in keys] == [(RowKind.MISSING, True)] * 3
    assert rows["a"].note == (
        "the job ended completed without a response for this request (3 responses came "
        "without the key of a request, and a response is matched by its key alone)"
    )


# 2. A job whose making is refused.

_NO_BATCH = "The model `gpt-4o-mini` does not support the Batch API."
_BROKEN = "The server had an error while processing your request."


def _refuse_making(monkeypatch: pytest.MonkeyPatch, made: list[str]) -> list[bool]:
    """Every job's making refused (as a model without batch support is) while the list
    returned holds `True`; `made` gets the path of each refused."""
    refusing = [True]
    creates = {name: getattr(_Handler, name) for name in _CREATES}

    def making(name: str) -> Any:
        def create(self: _Handler, data: bytes, *args: str) -> None:
            if not refusing[0]:
                return creates[name](self, data, *args)
            made.append(self.path)
            raise self._fail(400, _NO_BATCH)

        return create

    for name in _CREATES:
        monkeypatch.setattr(_Handler, name, making(name))
    return refusing


_CREATES = ("openai_create", "anthropic_create", "gemini_create")


@pytest.mark.parametrize(
    ("family", "file"),
    [("openai-chat", True), ("anthropic", False), ("gemini", False), ("gemini", True)],
    ids=["openai", "anthropic", "gemini-inline", "gemini-file"],
)
def test_a_refused_job_fails_its_inputs_as_its_own_and_no_further_job_is_submitted(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    file: bool,
) -> None:
    made: list[str] = []
    refusing = _refuse_making(monkeypatch, made)
    if family == "gemini" and file:
        monkeypatch.setattr(gemini_jobs, "INLINE_BYTES", 0)
    uploaded: list[str] = []
    store = ProviderBatchServer.store

    def kept(self: ProviderBatchServer, stored: Any) -> Any:
        uploaded.append(stored.id)
        return store(self, stored)

    monkeypatch.setattr(ProviderBatchServer, "store", kept)
    provider, model = _provider(server, family)
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(provider, model, _docs(5), ledger, job_size=2)
    results = sorted(run, key=lambda r: r.index)
    assert len(made) == 1  # the first job's refusal: no other chunk uploaded, nor asked
    (job,) = Ledger(ledger, read_only=True).jobs()
    said = (
        f"the provider refused to make job {job.tag}: invalid_request "
        f"({len(_NO_BATCH)} chars withheld) [provider={provider.name}, status=400]"
    )
    refused = [r.failure for r in results[:2]]
    assert [(f.kind, f.message, f.retryable) for f in refused if f] == [
        ("job_failed", said, False)
    ] * 2
    assert [f.provider_message for f in refused if f] == [_NO_BATCH] * 2
    # The inputs not yet submitted are not failed: pending, for a run again.
    assert [r.failure.kind for r in results[2:] if r.failure] == ["not_started"] * 3
    assert run.summary.refused == "invalid_request"
    assert run.summary.stopped == f"{said}; no further job is submitted"
    assert run.summary.jobs == {job.tag: "not submitted: refused (invalid_request)"}
    # The file uploaded for it (the documents' text) is not left at the provider.
    assert len(uploaded) == (1 if file else 0)
    assert server.deleted == uploaded and server.files == {}
    # Once the provider makes jobs, a run again sends those not sent, not those failed.
    refusing[0] = False
    again = _run(provider, model, _docs(5), ledger, job_size=2)
    assert [r.value for r in again] == [None, None, Doc(n=2), Doc(n=3), Doc(n=4)]
    assert [r.failure.message for r in again[:2] if r.failure] == [said] * 2
    assert sorted(n for (_, n), sent in server.submitted.items() if sent) == [2, 3, 4]


def test_an_input_file_that_cannot_be_deleted_is_a_warning_naming_it(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refuse_making(monkeypatch, [])

    def broken(self: _Handler, data: bytes, file_id: str) -> None:
        raise self._fail(500, _BROKEN)

    monkeypatch.setattr(_Handler, "openai_file_delete", broken)
    provider, model = _provider(server, "openai-chat")
    ledger = tmp_path / "run.sqlite"
    with pytest.warns(RuntimeWarning) as warned:
        run = _batch_run(provider, model, _docs(2), ledger)
        results = list(run)
    (file_id,) = server.files
    (job,) = Ledger(ledger, read_only=True).jobs()
    said = (
        f"the input file {file_id} of job {job.tag}, which was not made, could not be "
        f"deleted (server ({len(_BROKEN)} chars withheld) [provider=openai, "
        "status=500]): it holds the requests' text; delete it at the provider"
    )
    # (Sockets of earlier tests' providers, collected meanwhile, warn too: not counted.)
    assert [str(w.message) for w in warned if w.category is RuntimeWarning] == [said]
    assert run.summary.jobs == {job.tag: f"not submitted: refused (invalid_request); {said}"}
    assert [r.failure.kind for r in results if r.failure] == ["job_failed"] * 2


# 3. Rows a job did not answer name it.


@pytest.mark.parametrize(
    ("family", "said"),
    [
        ("openai-chat", ": batch_cancelled"),
        ("anthropic", ": the batch reported the request canceled"),
        ("gemini", " ended cancelled without a response for this request"),
    ],
)
def test_a_cancelled_jobs_rows_name_the_job(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    said: str,
) -> None:
    add = ProviderBatchServer.add_job

    def cancelled_at_the_console(self: ProviderBatchServer, job: Job) -> Job:
        job.cancel_requested = True
        return add(self, job)

    monkeypatch.setattr(ProviderBatchServer, "add_job", cancelled_at_the_console)
    provider, model = _provider(server, family)
    results = _run(provider, model, _docs(2), tmp_path / "run.sqlite")
    (job,) = server.jobs
    assert [(r.failure.kind, r.failure.message) for r in results if r.failure] == [
        ("job_canceled", f"job {job.id}{said}")
    ] * 2


def test_an_expired_row_names_its_job(server: ProviderBatchServer, tmp_path: Path) -> None:
    server.expire_next = 1
    provider, model = _provider(server, "openai-chat")
    results = _run(provider, model, _docs(2), tmp_path / "run.sqlite", max_attempts=1)
    (job,) = server.jobs
    assert [r.value for r in results] == [Doc(n=0), None]
    failure = results[1].failure
    assert failure is not None
    assert (failure.kind, failure.message) == ("job_expired", f"job {job.id}: batch_expired")


# 4. A job that ended counting answers before naming where they are.


def _unnamed_at_first(
    monkeypatch: pytest.MonkeyPatch, family: str, reads: int, *, error_file: bool = False
) -> list[str]:
    """The first job, once ended, names none of its results for its first `reads` reads
    (Gemini: SUCCEEDED, its stats counting every request answered, no output; OpenAI:
    completed, counting them completed, `output_file_id` null, and the error file too unless
    `error_file`); the jobs after it name theirs. Returns a mark for each ended read of it,
    `hidden` or `named`."""
    reads_of_first: list[str] = []
    first: list[str] = []

    def hide(job: Job) -> bool:
        if not first:
            first.append(job.id)
        if job.id != first[0] or job.end is None:
            return False
        hidden = sum(mark == "hidden" for mark in reads_of_first) < reads
        reads_of_first.append("hidden" if hidden else "named")
        return hidden

    if family == "gemini":
        operation = ProviderBatchServer.gemini_operation

        def gemini_view(self: ProviderBatchServer, job: Job) -> Any:
            view = operation(self, job)
            if hide(job):
                view["metadata"].pop("output", None)
                view.pop("response", None)
            return view

        monkeypatch.setattr(ProviderBatchServer, "gemini_operation", gemini_view)
    else:
        batch = ProviderBatchServer.openai_batch

        def openai_view(self: ProviderBatchServer, job: Job) -> Any:
            view = batch(self, job)
            if hide(job):
                view["output_file_id"] = None
                if not error_file:
                    view["error_file_id"] = None
            return view

        monkeypatch.setattr(ProviderBatchServer, "openai_batch", openai_view)
    return reads_of_first


def _both_ways(provider: Any, model: str, docs: list[str], ledger: Path, use_async: bool) -> Any:
    """The run and its results, sorted, by `batch` or by `abatch`."""
    import asyncio

    import allama

    if not use_async:
        run = _batch_run(provider, model, docs, ledger)
        return run, sorted(run, key=lambda r: r.index)

    async def main() -> Any:
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
        return run, [result async for result in run]

    run, results = asyncio.run(main())
    return run, sorted(results, key=lambda r: r.index)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("family", "provider_name"), [("gemini", "gemini"), ("openai-chat", "openai")]
)
def test_a_job_that_names_its_results_only_on_a_later_read_is_collected_once(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    provider_name: str,
    use_async: bool,
) -> None:
    # The API has said SUCCEEDED (completed) before naming where the answers are: the job
    # is read again, its state anew, and its answers taken in when named; none is sent in
    # a new job (paid twice).
    from allama._prices import cost_of
    from allama.types import Usage

    reads = _unnamed_at_first(monkeypatch, family, 1)
    provider, model = _provider(server, family)
    ledger = tmp_path / "later.sqlite"
    run, results = _both_ways(provider, model, _docs(3), ledger, use_async)
    assert reads == ["hidden", "named"]  # the state read again, the output named then
    assert [r.value for r in results] == [Doc(n=n) for n in range(3)]
    assert [r.attempts for r in results] == [1, 1, 1]
    (job,) = server.jobs
    assert all(server.submitted[(family, n)] == 1 for n in range(3))
    assert sum(server.answered.values()) == 3
    one = cost_of(provider_name, model, Usage(input_tokens=10, output_tokens=5), batch=True)
    assert not isinstance(one, str)
    for result in results:
        assert result.metadata is not None and result.metadata.cost is not None
        assert result.metadata.cost.total == one.total
    assert run.summary.cost == 3 * one.total and run.summary.cost_unknown == 0
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.job_id, row.outcome, row.error) == (job.id, "completed", None)


@pytest.mark.parametrize(
    ("family", "said"),
    [
        (
            "gemini",
            "the provider named no responses of job {id} to read (no inlinedResponses, no "
            "responsesFile), though it ended BATCH_STATE_SUCCEEDED with its stats counting 3 "
            "of its requests answered (3 reads)",
        ),
        (
            "openai-chat",
            "the provider named no output file of job {id} to read, though it ended "
            "completed counting 3 of its requests completed (3 reads)",
        ),
    ],
)
def test_a_job_that_never_names_its_results_fails_its_rows_which_only_retry_failed_sends(
    server: ProviderBatchServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    family: str,
    said: str,
) -> None:
    # Its rows ran and were paid for, their answers never named: taken as results gone
    # (not sent again unasked, counted paid at a cost unknown), and said so, with no 404
    # claimed where none was answered.
    reads = _unnamed_at_first(monkeypatch, family, 1_000)
    provider, model = _provider(server, family)
    ledger = tmp_path / "never.sqlite"
    run = _batch_run(provider, model, _docs(3), ledger)
    results = sorted(run, key=lambda r: r.index)
    (job,) = server.jobs
    assert reads == ["hidden"] * 3
    assert sum(server.answered.values()) == 3  # each row run once, none sent again
    error = (
        said.format(id=job.id) + ": its requests may have run and been paid for; retry_failed "
        "(--retry-failed) sends its inputs again"
    )
    assert [(r.failure.kind, r.failure.message) for r in results if r.failure] == [
        ("job_missing", f"job {job.id}: {error}")
    ] * 3
    assert run.summary.cost_unknown == 3
    (row,) = Ledger(ledger, read_only=True).jobs()
    assert (row.outcome, row.error) == ("lost", error)
    assert run.summary.jobs[row.tag].endswith(f", lost, {error}, collected")
    # A plain run sends none of them again; retry_failed does, in a new job.
    assert all(r.failure for r in _run(provider, model, _docs(3), ledger))
    assert len(server.jobs) == 1
    again = _run(provider, model, _docs(3), ledger, retry_failed=True)
    assert [r.value for r in again] == [Doc(n=n) for n in range(3)]
    assert len(server.jobs) == 2


def test_an_openai_job_naming_only_its_error_file_keeps_its_errors_and_loses_the_rest(
    server: ProviderBatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Completed, counting two requests completed, its output file never named: at the last
    # read the error file is read (doc 13 refused there, its own failure), and the rows it
    # lacks are lost, paid at a cost unknown, not sent again unasked.
    reads = _unnamed_at_first(monkeypatch, "openai-chat", 1_000, error_file=True)
    provider, model = _provider(server, "openai-chat")
    docs = ["doc 12", "doc 13", "doc 14"]
    ledger = tmp_path / "errors.sqlite"
    run = _batch_run(provider, model, docs, ledger)
    results = sorted(run, key=lambda r: r.index)
    (job,) = server.jobs
    assert reads == ["hidden"] * 3
    lost = (
        f"job {job.id} ended completed, counting 2 of its requests completed, but "
        "named no output file, and this row is not in its error file: it may have run and "
        "been paid for; retry_failed (--retry-failed) sends it again"
    )
    failures = [(r.failure.kind, r.failure.message) for r in results if r.failure]
    assert failures[0] == ("job_lost", lost) and failures[2] == ("job_lost", lost)
    assert failures[1][0] == "invalid_request"
    assert run.summary.cost_unknown == 2
    assert len(server.jobs) == 1 and server.submitted[("openai-chat", 12)] == 1
    again = _run(provider, model, docs, ledger, retry_failed=True)
    assert [again[0].value, again[2].value] == [Doc(n=12), Doc(n=14)]


def test_a_gemini_job_without_stats_counting_answers_is_read_as_before() -> None:
    # No answers counted (or no stats at all): nothing named is nothing paid for; its rows
    # are missing, as they were, and sent again.
    for billed in (None, 0):
        state = JobState(
            "batches/1", "BATCH_STATE_SUCCEEDED", True, "completed", results={}, billed=billed
        )
        steps = GEMINI.results(TARGET, state, ["a"], in_order=True)
        with pytest.raises(StopIteration) as done:
            next(steps)
        (row,) = done.value.value.values()
        assert (row.kind, row.note) == (
            RowKind.MISSING,
            "the job ended completed without a response for this request",
        )
