"""Provider batch runs: a live follow-up's answer is kept with the job rows' answers, so a
run that resumes the input takes it in again (at its live price) rather than send it and pay
for it again; a refused key or account, or a provider out of reach, met by a live follow-up
or by a job's rows, stops the run with its inputs pending, as it does a live run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import allama
from _provider_batch_server import ProviderBatchServer
from allama.adapters._http import HttpRequest, HttpResponse
from allama.batch import _jobs
from allama.batch._ledger import Ledger
from allama.errors import NetworkError
from allama.transport import Transport
from test_provider_batch import Doc, _base, _batch_run, _provider

# gpt-4o-mini: $0.15 and $0.60 a million tokens in and out; the fake's usage is 10 and 5.
LIVE_PASS = Decimal("0.0000045")
BATCH_PASS = Decimal("0.00000225")  # half, at batch prices


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jobs, "_LOOKS_AFTER_LOST", (0.001, 0.002))


Live = Callable[[HttpRequest, Callable[[], HttpResponse]], HttpResponse]


class _Calls(Transport):
    """The fake's answers, where a live chat call goes through `live` (its request, and
    how to get the fake's answer) and a job's results file through `results`."""

    def __init__(
        self,
        live: Live | None = None,
        results: Callable[[HttpResponse], HttpResponse] | None = None,
    ) -> None:
        super().__init__()
        self.live, self.results = live, results
        self.live_messages: list[int] = []
        """The messages of each live chat call, in order."""

    def send(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.url.endswith("/v1/chat/completions"):
            self.live_messages.append(len(request.body["messages"]))
            if self.live is not None:
                return self.live(request, lambda: super(_Calls, self).send(request))
        answer = super().send(request)
        if self.results is not None and (
            request.url.endswith("/content") or request.url.endswith("/results")
        ):
            return self.results(answer)
        return answer


def _not_json(answer: HttpResponse, prompt_tokens: int = 10) -> HttpResponse:
    """The fake's chat completion, its text no JSON (the extraction asks again)."""
    body = json.loads(answer.content)
    body["choices"][0]["message"]["content"] = "still not JSON"
    body["usage"] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 5,
        "total_tokens": prompt_tokens + 5,
    }
    return HttpResponse(answer.status, answer.headers, json.dumps(body).encode())


def _run_doc_7(provider: Any, ledger: Path, **options: Any) -> Any:
    # Doc 7's job row is no JSON: the extraction asks again, live.
    return _batch_run(
        provider,
        "gpt-4o-mini",
        ["doc 7"],
        ledger,
        job_retry="live",
        extractor=allama.Extractor(retries=2),
        **options,
    )


# 1. A live follow-up's answer is kept, and taken in again, not paid for again.


@pytest.mark.parametrize("stopped_by", ["caller", "budget"])
def test_a_live_answer_before_a_stop_is_taken_in_again_by_the_next_run_not_paid_again(
    server: ProviderBatchServer, tmp_path: Path, stopped_by: str
) -> None:
    # The job's answer to doc 7 is no JSON; its live follow-up answers no JSON either, as
    # the run is stopped (by the caller, or by a budget that pass reaches): the next pass
    # is not sent. The next run takes both answers in again and sends that pass, once.
    ledger = tmp_path / "live.sqlite"
    runs: list[Any] = []
    pricey = 100_000 if stopped_by == "budget" else 10  # the budget's pass: $0.015003

    def stops_during_the_first(request: HttpRequest, fake: Callable[[], HttpResponse]) -> Any:
        if len(calls.live_messages) > 1:
            return fake()
        if stopped_by == "caller":
            runs[-1].stop()
        return _not_json(fake(), pricey)

    calls = _Calls(stops_during_the_first)
    provider, _ = _provider(server, "openai-chat", calls)
    budget = {"max_cost": "0.01"} if stopped_by == "budget" else {}
    runs.append(_run_doc_7(provider, ledger, **budget))
    (first,) = list(runs[-1])
    assert first.failure is not None and first.failure.kind == "follow_up_not_sent"
    assert first.pending
    runs.append(_run_doc_7(provider, ledger, **({"max_cost": "1"} if budget else {})))
    (resumed,) = list(runs[-1])
    assert resumed.value == Doc(n=7)
    # The second live pass is sent once, with both answers before it (not the first again).
    assert calls.live_messages == [4, 6]
    assert len(server.jobs) == 1
    record = resumed.metadata
    assert record is not None
    assert (record.passes, record.batch_passes) == (3, 1)
    first_live = LIVE_PASS if stopped_by == "caller" else Decimal("0.015003")
    paid = BATCH_PASS + first_live + LIVE_PASS  # each at its own rate
    assert record.cost is not None and record.cost.total == paid
    assert runs[-1].summary.cost == paid and runs[-1].summary.passes == 3
    (row,) = Ledger(ledger, settings={}).rows()
    assert Decimal(row.cost or "") == paid  # what `allama batch status` says it cost


def test_a_live_answer_is_kept_before_the_next_pass_is_sent_by_a_run_that_is_killed(
    server: ProviderBatchServer, tmp_path: Path
) -> None:
    # A run is killed (SIGKILL) as it sends doc 7's second live pass, its first live answer
    # (no JSON) taken in: the run that resumes it sends that second pass, not the first
    # again, and its record holds the first.
    ledger = tmp_path / "killed.sqlite"
    script = tmp_path / "dies.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, os, signal
            import allama
            from pydantic import BaseModel
            from allama.adapters._http import HttpResponse
            from allama.transport import Transport

            class Doc(BaseModel):
                n: int

            class Dies(Transport):
                live = 0

                def send(self, request):
                    if request.url.endswith("/v1/chat/completions"):
                        Dies.live += 1
                        if Dies.live == 2:
                            os.kill(os.getpid(), signal.SIGKILL)
                        answer = super().send(request)
                        body = json.loads(answer.content)
                        body["choices"][0]["message"]["content"] = "still not JSON"
                        return HttpResponse(200, answer.headers, json.dumps(body).encode())
                    return super().send(request)

            provider = allama.provider(
                "openai", base_url={_base(server, "openai")!r}, api_key="k", transport=Dies()
            )
            run = allama.batch(
                provider, Doc, ["doc 7"], request=allama.ChatRequest("gpt-4o-mini").system(
                    "Read the number."
                ), ledger={str(ledger)!r}, provider_batch=True, poll_interval=0.001,
                backoff=0.001, job_retry="live", extractor=allama.Extractor(retries=2),
            )
            list(run)
            """
        )
    )
    died = subprocess.run([sys.executable, str(script)], timeout=120, capture_output=True)
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()[-2000:]
    assert server.live[("openai-chat", 7)] == 1
    calls = _Calls()
    provider, _ = _provider(server, "openai-chat", calls)
    (resumed,) = list(_run_doc_7(provider, ledger))
    assert resumed.value == Doc(n=7)
    assert calls.live_messages == [6]
    assert server.live[("openai-chat", 7)] == 2 and len(server.jobs) == 1
    record = resumed.metadata
    assert record is not None and (record.passes, record.batch_passes) == (3, 1)
    assert record.cost is not None and record.cost.total == BATCH_PASS + 2 * LIVE_PASS


# 2. A refused key or account, or a provider out of reach, stops the run: inputs pending.

_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}
_KEY = {
    "error": {
        "message": "Incorrect API key provided.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}


def _answering(status: int, body: dict[str, Any]) -> Live:
    def live(request: HttpRequest, fake: Callable[[], HttpResponse]) -> HttpResponse:
        headers = {"content-type": "application/json"}
        return HttpResponse(status, headers, json.dumps(body).encode())

    return live


def _unreachable(request: HttpRequest, fake: Callable[[], HttpResponse]) -> HttpResponse:
    raise NetworkError("connection refused")


_REFUSED = "the provider refused the run's key or account"


@pytest.mark.parametrize(
    ("live", "kind", "other", "stop", "sent"),
    [
        (_answering(429, _QUOTA), "quota_exceeded", "follow_up_not_sent", _REFUSED, {1}),
        (_answering(401, _KEY), "authentication", "follow_up_not_sent", _REFUSED, {1}),
        # Each tried again while the other waits: the second's second try may be sent
        # before the first's stops the run, or not.
        (_unreachable, "network", "network", "the provider could not be reached", {3, 4}),
    ],
    ids=["quota", "key", "network"],
)
def test_a_live_follow_up_refused_for_the_account_stops_the_run_its_inputs_pending(
    server: ProviderBatchServer,
    tmp_path: Path,
    live: Live,
    kind: str,
    other: str,
    stop: str,
    sent: set[int],
) -> None:
    # Docs 7 and 57 answer no JSON in the job; the first live follow-up is refused (or
    # cannot reach the provider): the run stops, neither input failed for good, and the
    # other's follow-up is not sent. Once the account is fixed, the same command sends
    # both live, taking the job's answers in again: no job is made again.
    ledger = tmp_path / "refused.sqlite"
    calls = _Calls(live)
    provider, model = _provider(server, "openai-chat", calls)
    docs = ["doc 7", "doc 57"]
    options: dict[str, Any] = {
        "job_retry": "live",
        "extractor": allama.Extractor(retries=1),
        "concurrency": 1,
        "max_attempts": 2,
    }
    run = _batch_run(provider, model, docs, ledger, **options)
    results = sorted(run, key=lambda r: r.index)
    assert [r.pending for r in results] == [True, True]
    failures = sorted(r.failure.kind for r in results if r.failure is not None)
    assert failures == sorted([kind, other])
    assert run.summary.refused == kind
    assert (run.summary.stopped or "").startswith(stop)
    assert len(calls.live_messages) in sent
    calls.live = None
    again = sorted(_batch_run(provider, model, docs, ledger, **options), key=lambda r: r.index)
    assert [r.value for r in again] == [Doc(n=7), Doc(n=57)]
    assert [r.resumed for r in again] == [False, False]
    assert len(server.jobs) == 1
    assert [r.metadata.batch_passes for r in again if r.metadata is not None] == [1, 1]


def _openai_rows_refused(answer: HttpResponse) -> HttpResponse:
    """Every row of the OpenAI job's files: 429 `insufficient_quota`."""
    lines = [json.loads(line) for line in answer.content.splitlines() if line.strip()]
    for line in lines:
        line["response"] = {"status_code": 429, "request_id": "r", "body": _QUOTA}
        line["error"] = None
    data = b"\n".join(json.dumps(line).encode() for line in lines)
    return HttpResponse(answer.status, answer.headers, data)


_BILLING = {
    "type": "error",
    "error": {
        "type": "billing_error",
        "message": "Your credit balance is too low to access the Anthropic API.",
    },
}


def _anthropic_rows_refused(answer: HttpResponse) -> HttpResponse:
    """Every row of the Anthropic job's results: errored, `billing_error`."""
    lines = [json.loads(line) for line in answer.content.splitlines() if line.strip()]
    for line in lines:
        line["result"] = {"type": "errored", "error": _BILLING}
    data = b"\n".join(json.dumps(line).encode() for line in lines)
    return HttpResponse(answer.status, answer.headers, data)


@pytest.mark.parametrize(
    ("family", "refused"),
    [("openai-chat", _openai_rows_refused), ("anthropic", _anthropic_rows_refused)],
)
def test_job_rows_refused_for_the_account_stop_the_run_their_inputs_pending(
    server: ProviderBatchServer,
    tmp_path: Path,
    family: str,
    refused: Callable[[HttpResponse], HttpResponse],
) -> None:
    # The job's rows come back refused for the account (its quota or credit spent): no
    # input's own failure. The run stops with them pending, and, the account fixed, the
    # same command sends them again.
    ledger = tmp_path / "rows.sqlite"
    calls = _Calls(results=refused)
    provider, model = _provider(server, family, calls)
    docs = ["doc 1", "doc 2"]
    run = _batch_run(provider, model, docs, ledger)
    results = sorted(run, key=lambda r: r.index)
    assert [(r.failure and r.failure.kind, r.pending) for r in results] == [
        ("quota_exceeded", True),
        ("quota_exceeded", True),
    ]
    assert run.summary.refused == "quota_exceeded"
    assert (run.summary.stopped or "").startswith("the provider refused the run's key or")
    calls.results = None
    again = sorted(_batch_run(provider, model, docs, ledger), key=lambda r: r.index)
    assert [(r.value, r.resumed) for r in again] == [(Doc(n=1), False), (Doc(n=2), False)]
    assert len(server.jobs) == 2
