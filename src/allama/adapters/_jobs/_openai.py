"""The OpenAI Batch API: a JSONL file of requests uploaded with `purpose=batch`, a job on
`/v1/batches`, and output and error files keyed by `custom_id`.

A row refused by the model's endpoint comes back in the error file as a `response` with an
error status and body (not in `error`): it is read as the error the live call would have
raised. Expired and cancelled rows come back with `error.code` `batch_expired` /
`batch_cancelled`."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from allama.adapters._http import HttpRequest
from allama.adapters._jobs import (
    CREATE_ASKED,
    MOST_PAGES,
    Entry,
    JobState,
    JobTarget,
    Row,
    RowKind,
    Steps,
    checked_id,
    clock_ahead,
    delete,
    get,
    get_may_be_gone,
    job_line,
    json_lines,
    json_of,
    keep,
    line_size,
    post,
    too_many_files,
    too_many_jobs,
    unread,
    unrun_kind,
    upload_leeway,
)
from allama.errors import MessageOrigin, NotFoundError

_ENDED = {
    "completed": "completed",
    "expired": "expired",
    "cancelled": "cancelled",
    "failed": "failed",
}
_ROW_CODES = {"batch_expired": RowKind.EXPIRED, "batch_cancelled": RowKind.CANCELED}


_ID = re.compile(r"[A-Za-z0-9_-]+")
"""A job's or a file's id (`batch_...`, `file-...`): one segment of a request's path."""


def _job_id(value: object) -> str:
    return checked_id(value, _ID, "an OpenAI batch id (letters, digits, _ and -: batch_...)")


def _file_id(value: object) -> str:
    return checked_id(value, _ID, "an OpenAI file id (letters, digits, _ and -: file-...)")


def _api_path(endpoint: str) -> str:
    """The `url` of a line: the endpoint as the Batch API names it (`/v1/chat/completions`)."""
    return f"/v1{endpoint}"


class OpenAIJobs:
    name = "the OpenAI Batch API"
    max_requests = 50_000
    max_bytes = 190_000_000  # the limit is 200 MB: room for the multipart envelope

    def line(self, target: JobTarget, entry: Entry) -> bytes:
        line = {
            "custom_id": entry.key,
            "method": "POST",
            "url": _api_path(target.endpoint),
            "body": entry.request.body,
        }
        return job_line(line)

    def size(self, entry: Entry) -> int:
        return line_size(entry.request.content) + len(entry.key) + 80

    def submit(
        self,
        target: JobTarget,
        entries: Sequence[Entry],
        tag: str,
        uploaded: dict[str, str] | None = None,
    ) -> Steps:
        kept = uploaded if uploaded is not None else {}
        file_id = kept.get("file")
        if file_id is None:
            file_id = yield from self._upload(target, entries, tag)
            kept["file"] = file_id
        kept[CREATE_ASKED] = tag
        created = json_of(
            (
                yield post(
                    target,
                    f"{target.base_url}/batches",
                    {
                        "input_file_id": file_id,
                        "endpoint": _api_path(target.endpoint),
                        "completion_window": "24h",
                        "metadata": {"allama_job": tag},
                    },
                )
            )
        )
        return str(created["id"])

    def _upload(self, target: JobTarget, entries: Sequence[Entry], tag: str) -> Steps:
        data = b"".join(self.line(target, entry) for entry in entries)
        boundary = f"allama-{uuid.uuid4().hex}"
        upload = _multipart(
            boundary,
            [
                ("purpose", None, None, b"batch"),
                ("file", f"{tag}.jsonl", "application/jsonl", data),  # the tag: `allama-…`
            ],
        )
        headers = {
            **{k: v for k, v in target.headers.items() if k.lower() != "content-type"},
            "content-type": f"multipart/form-data; boundary={boundary}",
        }
        uploaded = json_of(
            (
                yield HttpRequest(
                    "POST", f"{target.base_url}/files", headers, {}, dict(target.params), raw=upload
                )
            )
        )
        return str(uploaded["id"])

    def state(self, target: JobTarget, job_id: str) -> Steps:
        job = json_of((yield get(target, f"{target.base_url}/batches/{_job_id(job_id)}")))
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
        after: str | None = None
        for _ in range(MOST_PAGES):  # newest first: back to an hour before the submission
            params = {"limit": "100", **({"after": after} if after else {})}
            response = yield get(target, f"{target.base_url}/batches", params)
            page = json_of(response)
            jobs = [job for job in page.get("data") or [] if isinstance(job, dict)]
            for job in jobs:
                if (job.get("metadata") or {}).get("allama_job") == tag:
                    return str(job["id"])
            if not page.get("has_more") or not jobs:
                return None
            earliest = since + (clock_ahead(response) or 0.0) - 3600
            if any(_number(job.get("created_at")) < earliest for job in jobs):
                return None
            after = str(jobs[-1].get("id"))
        raise too_many_jobs(MOST_PAGES)

    def uploads(self, target: JobTarget, tag: str, since: float, *, measured: bool = True) -> Steps:
        name = f"{tag}.jsonl"  # as `_upload` names it
        found: list[str] = []
        after: str | None = None
        for _ in range(MOST_PAGES):  # newest first: back to before the submission began
            params = {"purpose": "batch", "limit": "100", **({"after": after} if after else {})}
            response = yield get(target, f"{target.base_url}/files", params)
            page = json_of(response)
            files = [file for file in page.get("data") or [] if isinstance(file, dict)]
            found += [
                file["id"]
                for file in files
                if file.get("filename") == name and isinstance(file.get("id"), str)
            ]
            earliest = since + (clock_ahead(response) or 0.0) - upload_leeway(measured)
            if (
                not page.get("has_more")
                or not files
                or any(_number(file.get("created_at")) < earliest for file in files)
            ):
                return found
            last = files[-1].get("id")
            if not isinstance(last, str):  # no page after it can be asked for
                return found
            after = last
        raise too_many_files(MOST_PAGES)

    def results(
        self, target: JobTarget, state: JobState, keys: Sequence[str], in_order: bool = False
    ) -> Steps:
        rows: dict[str, Row] = {}
        lines: list[dict[str, Any] | None] = []
        files = list(state.results or ())
        # Ended, counting answers, with no output file named (the error file holds none
        # billed): read again later, as an output file answering 404 is, rather than its
        # rows taken for unanswered (sent again, and paid twice). At the last read, an
        # error file named is read, and the rows it lacks are taken for lost. (A job failed
        # whole names its errors instead, and its rows are taken as such.)
        unnamed = (
            bool(state.billed)
            and state.outcome != "failed"
            and all(file_id in state.unbilled for file_id in files)
        )
        if unnamed and (not state.take_what_is_left or not files):
            raise NotFoundError(
                f"the provider named no output file of job {state.id} to read, though it "
                f"ended {state.outcome} counting {state.billed} of its requests completed",
                origin=MessageOrigin.AUTHORED,
            )
        gone: list[str] = []
        for file_id in files:
            url = f"{target.base_url}/files/{_file_id(file_id)}/content"
            response = yield get_may_be_gone(target, url)
            if response.status == 404:
                gone.append(file_id)
                continue
            read = json_lines(response.content)
            lines += read
            for line in read:
                row = None if line is None else _row(line)
                if row is not None:
                    keep(rows, row)
        note = (
            f"the job failed: {state.reason}"
            if state.outcome == "failed"
            else f"the job ended {state.outcome} without this row in its output or error file"
            + unread(lines)
        )
        billed_gone = [file_id for file_id in gone if file_id not in state.unbilled]
        if gone and (not state.take_what_is_left or (billed_gone and len(gone) == len(files))):
            # A 404 on the job's results, read again as the runner reads one (it may be the
            # provider's own delay); at the last read, what is left is taken.
            raise NotFoundError(f"the results of job {state.id} answer 404")
        # A row neither file holds, of a job cancelled or expired, was not run for that
        # reason (the files may leave out those in flight when it ended).
        kind = unrun_kind(state.outcome)
        if billed_gone:
            kind = RowKind.LOST
            note = (
                f"the job ended {state.outcome}, and its file {', '.join(billed_gone)} answers "
                "404: the row may have run and been paid for; retry_failed (--retry-failed) "
                "sends it again"
            )
        elif unnamed:
            kind = RowKind.LOST
            note = (
                f"the job ended {state.outcome}, counting {state.billed} of its requests "
                "completed, but named no output file, and this row is not in its error file: "
                "it may have run and been paid for; retry_failed (--retry-failed) sends it "
                "again" + unread(lines)
            )
        elif gone:
            # Only the error file is gone: every row billed is in the output file, read (or
            # never made, none having succeeded), so a row it lacks was not billed: failed,
            # or never run, and taken as the job's unanswered rows are.
            note = (
                f"the job ended {state.outcome} without this row in its output file, and its "
                f"error file {', '.join(gone)} answers 404: the row failed or was not run, "
                "unbilled" + unread(lines)
            )
        words = state.error_words if kind == RowKind.JOB_FAILED else None
        return {
            key: rows.get(key) or Row(key, kind, note=note, words=words, absent=True)
            for key in keys
        }

    def cancel(self, target: JobTarget, job_id: str) -> Steps:
        yield post(target, f"{target.base_url}/batches/{_job_id(job_id)}/cancel", {})

    def discard(self, target: JobTarget, uploaded: Mapping[str, str]) -> Steps:
        file_id = uploaded.get("file")
        if file_id is not None:
            yield delete(target, f"{target.base_url}/files/{_file_id(file_id)}")
        return file_id


def _state(job: dict[str, Any]) -> JobState:
    status = str(job.get("status"))
    outcome = _ENDED.get(status)
    counts = {k: int(v) for k, v in (job.get("request_counts") or {}).items() if isinstance(v, int)}
    errors = _job_errors(job.get("errors"))
    # Every row that was not run holds the words: the same words said of many lines once,
    # and a few kinds of them, counting the others, so that a file of many bad lines does
    # not give each row every line's words.
    said = list(dict.fromkeys(str(e["message"]) for e in errors if e.get("message")))
    more = len(said) - _SHOWN
    words = "; ".join(said[:_SHOWN]) + (f"; and {more:,} more" if more > 0 else "")
    files = [f for f in (job.get("output_file_id"), job.get("error_file_id")) if f]
    error_file = job.get("error_file_id")
    return JobState(
        id=str(job["id"]),
        status=status,
        ended=outcome is not None,
        outcome=outcome,
        counts=counts,
        error=_codes(errors),
        error_words=words or None,
        results=tuple(files),
        tag=(job.get("metadata") or {}).get("allama_job"),
        created_at=job.get("created_at"),
        total=counts.get("total"),
        # The output file holds the requests that succeeded, the error file those that
        # failed or never ran, which are not billed (`request_counts.completed` counts the
        # former).
        billed=counts.get("completed") if outcome is not None else None,
        unbilled=frozenset({str(error_file)} if error_file else ()),
        queue_full=outcome == "failed"
        and bool(errors)
        and all(entry.get("code") == _QUEUE_FULL for entry in errors),
    )


_QUEUE_FULL = "token_limit_exceeded"
"""A job refused for the tokens enqueued for its model ("Enqueued token limit reached ...
Please try again once some in_progress batches have been completed")."""


def _job_errors(given: object) -> list[dict[str, Any]]:
    """A job's `errors.data`, each entry an object: one given as text alone (or the whole
    field given as text) is the provider's words, with no code."""
    listed = given.get("data") if isinstance(given, dict) else given
    if not isinstance(listed, list):
        listed = [listed] if listed else []
    return [e if isinstance(e, dict) else {"message": e} for e in listed if e]


_SHOWN = 3
"""The lines, and the codes, a job's error names before it counts the rest."""


def _codes(errors: list[dict[str, Any]]) -> str | None:
    """A job's errors by code and line, as long whatever their number: a file of many bad
    lines names a few and counts the others (every row that was not run says it)."""
    lines: dict[str, list[str]] = {}
    for entry in errors:
        line = entry.get("line")
        if type(line) is float and line.is_integer():
            line = int(line)  # JSON's `3.0`: line 3
        lines.setdefault(str(entry.get("code") or "error"), []).append(
            str(line) if line not in (None, "") else ""
        )
    said = []
    for code, found in list(lines.items())[:_SHOWN]:
        numbered = [line for line in found if line]
        if not numbered:
            said.append(code)
            continue
        named = ", ".join(numbered[:_SHOWN])
        more = len(numbered) - _SHOWN
        plural = "s" if len(numbered) > 1 else ""
        said.append(f"{code} (line{plural} {named}" + (f" and {more:,} more)" if more > 0 else ")"))
    if len(lines) > _SHOWN:
        said.append(f"{len(lines) - _SHOWN:,} more codes")
    return "; ".join(said) or None


def _status(value: object) -> int | None:
    """An HTTP status given as a number (or its digits as text, or as a number with no
    fraction: `200.0`); `None` for anything else."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer() and 100 <= value < 1000:
        return int(value)
    if isinstance(value, str) and value.isascii() and value.strip().isdigit() and len(value) < 6:
        return int(value)
    return None


def _row(line: dict[str, Any]) -> Row | None:
    key = line.get("custom_id")
    if not isinstance(key, str):
        return None
    response = line.get("response")
    if isinstance(response, dict) and response.get("status_code") is not None:
        status = _status(response["status_code"])
        if status is None:
            return None  # a line read as none: its row is missing, and sent again
        body = json.dumps(response.get("body") or {}).encode()
        return Row(key, RowKind.RESPONSE if status < 400 else RowKind.ERROR, status, body)
    error = line.get("error") or {}
    if not isinstance(error, dict):
        error = {"message": error}  # words alone
    code = str(error.get("code") or "")
    kind = _ROW_CODES.get(code)
    message = error.get("message")
    words = str(message) if message else None
    if kind is not None:
        return Row(key, kind, note=code, words=words)
    body = json.dumps({"error": {"message": message, "code": code or None}}).encode()
    return Row(key, RowKind.ERROR, 500, body, note=code or None, words=words)


def _multipart(boundary: str, parts: list[tuple[str, str | None, str | None, bytes]]) -> bytes:
    out = bytearray()
    for name, filename, content_type, data in parts:
        out += f"--{boundary}\r\n".encode()
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        out += f"Content-Disposition: {disposition}\r\n".encode()
        if content_type is not None:
            out += f"Content-Type: {content_type}\r\n".encode()
        out += b"\r\n" + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out)


DIALECT = OpenAIJobs()


def _number(value: object) -> float:
    """A job's (or a file's) time, or never (`inf`) when it gives none: no reason to stop
    looking."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return float("inf")
