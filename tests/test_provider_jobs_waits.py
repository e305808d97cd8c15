"""A provider batch run makes no wait longer than a live run makes (`_LONGEST_WAIT`, 15
minutes): a provider that asks for longer (a day's limit, a Retry-After of hours) on a
job's submission, the look for a job whose answer was lost, a job's reading or a live
follow-up stops the run at once, saying why, and leaves what waited for the next run."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _provider_batch_server import ProviderBatchServer
from allama.adapters._http import HttpRequest, HttpResponse
from allama.batch import BatchResult, BatchRun, _jobs
from allama.batch._ledger import Ledger
from allama.transport import Transport

DAY_AND_MORE = 100000
MODEL = "gpt-4o-mini"


class Doc(BaseModel):
    n: int


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The looks for a job whose making's answer was lost, over milliseconds."""
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.001, 0.002, 0.004, 0.008, 0.016))


Rule = tuple[Callable[[HttpRequest], bool], HttpResponse]


class _Scripted(Transport):
    """Answers the first request each rule matches with the rule's answer; the rest go on
    to the server."""

    def __init__(self, *rules: Rule) -> None:
        super().__init__()
        self.rules = list(rules)
        self.seen: list[tuple[str, str]] = []

    def _scripted(self, request: HttpRequest) -> HttpResponse | None:
        self.seen.append((request.method, request.url))
        for rule in self.rules:
            if rule[0](request):
                self.rules.remove(rule)
                return rule[1]
        return None

    def send(self, request: HttpRequest) -> HttpResponse:
        return self._scripted(request) or super().send(request)

    async def asend(self, request: HttpRequest) -> HttpResponse:
        return self._scripted(request) or await super().asend(request)


def _asks_to_wait(status: int) -> HttpResponse:
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    body = {"error": {"message": "come back tomorrow", "type": kind}}
    headers = {"retry-after": str(DAY_AND_MORE), "content-type": "application/json"}
    return HttpResponse(status, headers, json.dumps(body).encode())


def _failing(status: int) -> HttpResponse:
    body = {"error": {"message": "upstream failed", "type": "server_error"}}
    return HttpResponse(status, {"content-type": "application/json"}, json.dumps(body).encode())


def _makes_a_job(request: HttpRequest) -> bool:
    return request.method == "POST" and request.url.endswith("/batches")


def _lists_jobs(request: HttpRequest) -> bool:
    return request.method == "GET" and request.url.endswith("/batches")


def _reads_a_job(request: HttpRequest) -> bool:
    return request.method == "GET" and re.search(r"/batches/[^/]+$", request.url) is not None


def _asks_live(request: HttpRequest) -> bool:
    return request.method == "POST" and request.url.endswith("/chat/completions")


def _provider(server: ProviderBatchServer, transport: Transport | None = None) -> Any:
    extra: dict[str, Any] = {} if transport is None else {"transport": transport}
    return allama.provider("openai", base_url=server.openai_base, api_key="test-key", **extra)


def _batch_run(provider: Any, docs: list[str], ledger: Path, **options: Any) -> BatchRun[Doc]:
    settings: dict[str, Any] = {"poll_interval": 0.001, "backoff": 0.001, **options}
    return allama.batch(
        provider,
        Doc,
        docs,
        request=allama.ChatRequest(MODEL).system("Read the number."),
        ledger=ledger,
        provider_batch=True,
        **settings,
    )


def _ended(run: BatchRun[Doc], seconds: float = 15.0) -> list[BatchResult[Doc]]:
    """The run's results, asserting that it ended by itself within `seconds` (rather than
    waiting as the provider asked: it is stopped then, for the test to end)."""
    results: list[BatchResult[Doc]] = []
    worker = threading.Thread(target=lambda: results.extend(run), daemon=True)
    worker.start()
    worker.join(seconds)
    waited = worker.is_alive()
    if waited:
        run.stop()
        worker.join(30)
    assert not waited, "the run waited as the provider asked, for more than a run waits"
    return sorted(results, key=lambda result: result.index)


def _kinds(results: list[BatchResult[Doc]]) -> list[tuple[int, str | None, bool]]:
    return [(r.index, r.failure.kind if r.failure else None, r.pending) for r in results]


def _values(results: list[BatchResult[Doc]]) -> list[Doc | None]:
    return [r.value for r in results]


def test_a_job_the_provider_asks_to_wait_a_day_to_make_on_a_503_leaves_its_inputs_pending(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    transport = _Scripted((_makes_a_job, _asks_to_wait(503)))
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(_provider(server, transport), ["doc 100", "doc 101"], ledger)
    results = _ended(run)
    assert _kinds(results) == [(0, "overloaded", True), (1, "overloaded", True)]
    assert run.summary.stopped == f"the provider asked to wait {DAY_AND_MORE} s before the next job"
    assert run.summary.refused == "overloaded"
    assert server.jobs == []
    assert transport.seen.count(("POST", f"{server.openai_base}/batches")) == 1
    assert Ledger(ledger, read_only=True).counts() == {"pending": 2}
    # The next run sends them.
    again = _ended(_batch_run(_provider(server), ["doc 100", "doc 101"], ledger))
    assert _values(again) == [Doc(n=100), Doc(n=101)]


def test_a_look_for_a_lost_job_the_provider_asks_to_wait_a_day_for_stops_the_run(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    """The job's making answered 500 (it may have been made), and the provider's list of
    jobs asked for a day's wait: not made, the run stops, the inputs left in the job's
    record for the next run to look for it."""
    transport = _Scripted((_makes_a_job, _failing(500)), (_lists_jobs, _asks_to_wait(503)))
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(_provider(server, transport), ["doc 100", "doc 101"], ledger)
    results = _ended(run)
    assert [(r.index, r.failure.kind if r.failure else None) for r in results] == [
        (0, "in_provider_job"),
        (1, "in_provider_job"),
    ]
    (tag,) = run.summary.jobs
    assert run.summary.stopped == (
        f"provider batch job {tag} may have been made, its answer lost (server), and the "
        "provider's jobs could not be listed to tell (the provider asked to wait "
        f"{DAY_AND_MORE} s before the next request): the same command looks for it, and "
        "collects it or sends its inputs"
    )
    assert run.summary.refused == "server"
    # Listed once: the wait asked for was not made, nor the list asked again.
    assert [url for method, url in transport.seen if method == "GET"] == [
        f"{server.openai_base}/batches"
    ]
    # The next run looks for the job, finds it was not made, and sends the inputs.
    again = _ended(_batch_run(_provider(server), ["doc 100", "doc 101"], ledger))
    assert _values(again) == [Doc(n=100), Doc(n=101)]
    assert len(server.jobs) == 1


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limited"), (503, "overloaded")])
def test_a_job_the_provider_asks_to_wait_a_day_to_read_is_left_for_the_next_run(
    server: ProviderBatchServer, tmp_path: Path, status: int, kind: str
) -> None:
    transport = _Scripted((_reads_a_job, _asks_to_wait(status)))
    ledger = tmp_path / "run.sqlite"
    run = _batch_run(_provider(server, transport), ["doc 100", "doc 101"], ledger)
    results = _ended(run)
    assert [(r.index, r.failure.kind if r.failure else None) for r in results] == [
        (0, "in_provider_job"),
        (1, "in_provider_job"),
    ]
    assert (
        run.summary.stopped
        == f"the provider asked to wait {DAY_AND_MORE} s before the next request"
    )
    assert run.summary.refused == kind
    (job,) = server.jobs
    assert list(run.summary.jobs.values()) == [f"{job.id}: not read: {kind}"]
    # Read once: not again at the stop, which the provider asked a day's wait of.
    reads = [url for method, url in transport.seen if method == "GET" and "/batches/" in url]
    assert reads == [f"{server.openai_base}/batches/{job.id}"]
    # The next run collects it, submitting nothing again.
    again = _ended(_batch_run(_provider(server), ["doc 100", "doc 101"], ledger))
    assert _values(again) == [Doc(n=100), Doc(n=101)]
    assert len(server.jobs) == 1


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limited"), (503, "overloaded")])
def test_a_live_follow_up_the_provider_asks_to_wait_a_day_for_is_left_pending(
    server: ProviderBatchServer, tmp_path: Path, status: int, kind: str
) -> None:
    """doc 7's answer in the job is no JSON: asked again live (`job_retry="live"`), where
    the provider asks for a day's wait. Not made: pending, the run stopped, as a live run's
    input is; the next run takes the job's answer in again and asks live."""
    transport = _Scripted((_asks_live, _asks_to_wait(status)))
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"extractor": allama.Extractor(retries=1), "job_retry": "live"}
    run = _batch_run(_provider(server, transport), ["doc 1", "doc 7"], ledger, **options)
    results = _ended(run)
    assert _kinds(results) == [(0, None, False), (1, kind, True)]
    assert results[0].value == Doc(n=1)
    assert (
        run.summary.stopped
        == f"the provider asked to wait {DAY_AND_MORE} s before the next request"
    )
    assert run.summary.refused == kind
    assert transport.seen.count(("POST", f"{server.openai_base}/chat/completions")) == 1
    again = _ended(_batch_run(_provider(server), ["doc 1", "doc 7"], ledger, **options))
    assert _values(again) == [Doc(n=1), Doc(n=7)]
