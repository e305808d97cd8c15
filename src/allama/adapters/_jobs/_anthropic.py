"""Anthropic's Message Batches: `POST /v1/messages/batches` with the requests inline
(`custom_id` and the Messages `params`), results as JSONL at the batch's `results_url`.

A batch keeps no tag of the caller's, so a submission cut off before its id was recorded
is found among the recent batches by when it was created and how many requests it holds,
and, once a batch has ended, by its results' request ids; batches still running that
could be it cannot be told apart yet, and are said so. One alone still running is not
taken for the job either (`JobUnconfirmed`): a run reads it until it ends, and takes it
once its results hold the job's request ids."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Generator, Mapping, Sequence
from typing import Any

from allama.adapters._http import rfc3339_seconds
from allama.adapters._jobs import (
    CREATE_ASKED,
    MOST_PAGES,
    Entry,
    JobAmbiguity,
    JobState,
    JobTarget,
    JobUnconfirmed,
    Row,
    RowKind,
    Steps,
    checked_id,
    clock_ahead,
    get,
    json_lines,
    json_of,
    keep,
    post,
    too_many_jobs,
    unread,
)

_LEEWAY = 5.0
"""Seconds a batch may seem made before its submission began: the provider's `Date` is
to the second, and the two clocks are read a moment apart."""
_UNTOLD = 900.0
"""The same where the provider's answer gives no `Date` (a proxy dropped it), or where the
submission's time was read on another machine's clock or before a restart: clocks of
machines kept in time agree within minutes; a batch of the same size made by another in
that window is said to be ambiguous, rather than missed and made again (and paid twice)."""

_KINDS = {
    "succeeded": RowKind.RESPONSE,
    "errored": RowKind.ERROR,
    "expired": RowKind.EXPIRED,
    "canceled": RowKind.CANCELED,
}

_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


_ID = re.compile(r"[A-Za-z0-9_-]+")
"""A batch's id (`msgbatch_...`): one segment of a request's path."""


def _job_id(value: object) -> str:
    return checked_id(value, _ID, "an Anthropic batch id (letters, digits, _ and -: msgbatch_...)")


def _batch_url(target: JobTarget, job_id: object) -> str:
    return f"{target.base_url}/messages/batches/{_job_id(job_id)}"


class AnthropicJobs:
    name = "Anthropic's Message Batches API"
    max_requests = 100_000
    max_bytes = 250_000_000  # the limit is 256 MB

    def size(self, entry: Entry) -> int:
        return len(entry.request.content) + len(entry.key) + 40

    def submit(
        self,
        target: JobTarget,
        entries: Sequence[Entry],
        tag: str,
        uploaded: dict[str, str] | None = None,
    ) -> Steps:
        body = {
            "requests": [
                {"custom_id": entry.key, "params": entry.request.body} for entry in entries
            ]
        }
        if uploaded is not None:
            uploaded[CREATE_ASKED] = tag
        created = json_of((yield post(target, f"{target.base_url}/messages/batches", body)))
        return str(created["id"])

    def state(self, target: JobTarget, job_id: str) -> Steps:
        job = json_of((yield get(target, _batch_url(target, job_id))))
        return _state(job)

    def find(
        self,
        target: JobTarget,
        tag: str,
        since: float,
        count: int,
        known: Collection[str] = (),
        keys: Collection[str] = (),
        *,
        measured: bool = True,
    ) -> Steps:
        found: list[JobState] = []
        after: str | None = None
        for _ in range(MOST_PAGES):  # newest first: back to the time of the submission
            params = {"limit": "100", **({"after_id": after} if after else {})}
            response = yield get(target, f"{target.base_url}/messages/batches", params)
            page = json_of(response)
            # Its times are the provider's: the submission's, on its clock (to the second);
            # a clock not told (no `Date`) may be minutes off.
            ahead = clock_ahead(response)
            leeway = _LEEWAY if measured else _UNTOLD
            earliest = since - _UNTOLD if ahead is None else since + ahead - leeway
            jobs = [job for job in page.get("data") or [] if isinstance(job, dict)]
            older = False
            for job in jobs:
                state = _state(job)
                # Anthropic keeps no tag: a job of the same size made at the time, that the
                # ledger does not know as another of its jobs (a run's jobs are of one size).
                if state.created_at is not None and state.created_at < earliest:
                    older = True
                elif state.total == count and state.id not in known:
                    found.append(state)
            after = page.get("last_id") or (str(jobs[-1].get("id")) if jobs else None)
            if older or not page.get("has_more") or not jobs or not after:
                break
        else:
            raise too_many_jobs(MOST_PAGES)
        if keys:
            found = yield from _holding(target, found, frozenset(keys))
        if len(found) == 1 and keys and not found[0].ended:
            # Of the right size and time, and nothing else: a batch another made meanwhile
            # may be so too. Read, not adopted, until its results' request ids confirm it.
            raise JobUnconfirmed(
                f"a batch of {count} request{'' if count == 1 else 's'} was created since the "
                f"submission was cut off ({found[0].id}), still running: allama cannot tell "
                "whether it is this run's before its results' request ids show it, once it ends",
                candidate=found[0].id,
            )
        if len(found) > 1:
            running = [state.id for state in found if not state.ended]
            raise JobAmbiguity(
                f"{len(found)} batches of {count} request{'' if count == 1 else 's'} were "
                "created since the submission "
                f"was cut off ({', '.join(state.id for state in found)}): allama cannot tell "
                "which is this run's"
                + (
                    f"; those running ({', '.join(running)}) are told apart by their "
                    "results' request ids once they end, by the same command then"
                    if running and keys
                    else ""
                )
            )
        return found[0].id if found else None

    def results(
        self, target: JobTarget, state: JobState, keys: Sequence[str], in_order: bool = False
    ) -> Steps:
        url = state.results or f"{_batch_url(target, state.id)}/results"
        response = yield get(target, url)
        rows: dict[str, Row] = {}
        lines = json_lines(response.content)
        for line in lines:
            row = None if line is None else _row(line)
            if row is not None:
                keep(rows, row)
        note = f"the batch ended ({state.outcome}) without a result for this request" + unread(
            lines
        )
        return {
            key: rows.get(key) or Row(key, RowKind.MISSING, note=note, absent=True) for key in keys
        }

    def cancel(self, target: JobTarget, job_id: str) -> Steps:
        yield post(target, f"{_batch_url(target, job_id)}/cancel", {})

    def discard(self, target: JobTarget, uploaded: Mapping[str, str]) -> Steps:
        # The requests go inline: no file was uploaded, none is left.
        return None
        yield  # a generator, as every step is


def _holding(
    target: JobTarget, candidates: list[JobState], keys: frozenset[str]
) -> Generator[Any, Any, list[JobState]]:
    """The candidates that may be the job of requests `keys`: those still running, which
    cannot be told yet, and those ended whose results hold one of its requests' ids (a
    batch of the same size made by another holds none)."""
    kept = []
    for state in candidates:
        if state.ended:
            url = state.results or f"{_batch_url(target, state.id)}/results"
            lines = json_lines((yield get(target, url)).content)
            if not any(line is not None and line.get("custom_id") in keys for line in lines):
                continue
        kept.append(state)
    return kept


def _state(job: dict[str, Any]) -> JobState:
    status = str(job.get("processing_status"))
    counts = {k: int(v) for k, v in (job.get("request_counts") or {}).items() if isinstance(v, int)}
    ended = status == "ended"
    outcome = None
    if ended:
        if job.get("cancel_initiated_at"):
            outcome = "cancelled"
        elif counts.get("expired"):
            outcome = "expired"
        else:
            outcome = "completed"
    return JobState(
        id=str(job["id"]),
        status=status,
        ended=ended,
        outcome=outcome,
        counts=counts,
        results=job.get("results_url"),
        created_at=rfc3339_seconds(job.get("created_at")),
        total=sum(counts.values()) if counts else None,
        # Errored, cancelled and expired requests are not billed.
        billed=counts.get("succeeded") if ended else None,
    )


def _row(line: dict[str, Any]) -> Row | None:
    key = line.get("custom_id")
    result = line.get("result") or {}
    if not isinstance(key, str):
        return None
    if not isinstance(result, dict):
        result = {"type": result}  # its kind alone (`"errored"`)
    kind = _KINDS.get(str(result.get("type")), RowKind.MISSING)
    if kind == RowKind.RESPONSE:
        return Row(key, kind, 200, json.dumps(result.get("message") or {}).encode())
    if kind == RowKind.ERROR:
        envelope = result.get("error") or {}
        if not isinstance(envelope, dict):
            envelope = {"message": envelope}  # the provider's words alone
        nested = envelope.get("error")
        inner: dict[str, Any] = nested if isinstance(nested, dict) else envelope
        status = _ERROR_STATUS.get(str(inner.get("type")), 500)
        body: dict[str, Any] = {"type": "error", "error": inner}
        if isinstance(envelope.get("request_id"), str):  # the failed request's, as it says
            body["request_id"] = envelope["request_id"]
        return Row(key, kind, status, json.dumps(body).encode())
    return Row(key, kind, note=f"the batch reported the request {result.get('type')}")


DIALECT = AnthropicJobs()
