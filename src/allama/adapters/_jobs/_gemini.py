"""The Gemini API's batch mode: `models/{model}:batchGenerateContent` with the requests
inline (up to about 20 MB) or in an uploaded JSONL file, a long-running operation to read,
and responses inline or in a file, each under the key it was sent with.

A job that reports `SUCCEEDED` may hold an error for every row: rows are read one by one,
never from the job's state."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from allama.adapters._http import HttpRequest, rfc3339_seconds
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
    delete,
    get,
    headers_for,
    job_line,
    json_lines,
    json_of,
    keep,
    line_size,
    post,
    too_many_files,
    too_many_jobs,
    unread,
)
from allama.adapters.gemini._adapter import check_model_name, model_path
from allama.errors import MessageOrigin, NotFoundError

INLINE_BYTES = 19_000_000
"""Above this a job's requests go in an uploaded file (inline requests are limited to 20 MB)."""

_ENDED = {
    "BATCH_STATE_SUCCEEDED": "completed",
    "BATCH_STATE_EXPIRED": "expired",
    "BATCH_STATE_CANCELLED": "cancelled",
    "BATCH_STATE_FAILED": "failed",
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_EXPIRED": "expired",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_FAILED": "failed",
}


_JOB = re.compile(r"batches/[A-Za-z0-9_-]+")
_FILE = re.compile(r"files/[A-Za-z0-9_-]+")
"""A job's and a file's name: the collection, one slash, the id (as a request's path
takes it, after the base URL)."""


def _job_name(value: object) -> str:
    return checked_id(value, _JOB, "a Gemini batch name (batches/ and letters, digits, _ and -)")


def _file_name(value: object) -> str:
    return checked_id(value, _FILE, "a Gemini file name (files/ and letters, digits, _ and -)")


def _root(base_url: str) -> tuple[str, str]:
    """`https://host` and the API version path (`/v1beta`) of a base URL."""
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/") or "/v1beta"


class GeminiJobs:
    name = "the Gemini Batch API"
    max_requests = 100_000
    max_bytes = 1_900_000_000  # files up to 2 GB

    def size(self, entry: Entry) -> int:
        return line_size(entry.request.content) + len(entry.key) + 40

    def submit(
        self,
        target: JobTarget,
        entries: Sequence[Entry],
        tag: str,
        uploaded: dict[str, str] | None = None,
    ) -> Steps:
        # Refused as a live call to it is, before anything is uploaded (a run's entries to
        # it were refused already, when encoded).
        check_model_name(target.model, None)
        total = sum(self.size(entry) for entry in entries)
        if total <= INLINE_BYTES:
            source: dict[str, Any] = {
                "requests": {
                    "requests": [
                        {"request": entry.request.body, "metadata": {"key": entry.key}}
                        for entry in entries
                    ]
                }
            }
        elif uploaded is not None and "file" in uploaded:
            source = {"fileName": uploaded["file"]}
        else:
            data = b"".join(
                job_line({"key": entry.key, "request": entry.request.body}) for entry in entries
            )
            name = yield from self._upload(target, data, tag)  # `allama-…`, as the job
            if uploaded is not None:
                uploaded["file"] = name
            source = {"fileName": name}
        body = {"batch": {"displayName": tag, "inputConfig": source}}
        if uploaded is not None:
            uploaded[CREATE_ASKED] = tag
        # `gemini-2.5-flash` and `models/gemini-2.5-flash` name one model, as in a live call.
        model = model_path(target.model)
        created = json_of(
            (yield post(target, f"{target.base_url}/{model}:batchGenerateContent", body))
        )
        return str(created["name"])

    def _upload(self, target: JobTarget, data: bytes, display: str) -> Steps:
        root, version = _root(target.base_url)
        headers = {k: v for k, v in target.headers.items() if k.lower() != "content-type"}
        start = HttpRequest(
            "POST",
            f"{root}/upload{version}/files",
            {
                **headers,
                "content-type": "application/json",
                "x-goog-upload-protocol": "resumable",
                "x-goog-upload-command": "start",
                "x-goog-upload-header-content-length": str(len(data)),
                "x-goog-upload-header-content-type": "application/jsonl",
            },
            {"file": {"displayName": display}},
            dict(target.params),
        )
        started = yield start
        url = started.headers.get("x-goog-upload-url")
        if not url:
            raise ValueError("the Gemini file upload answered without an upload URL")
        there, _ = headers_for(target, url)  # the upload's URL is the provider's to name
        finished = yield HttpRequest(
            "POST",
            url,
            {
                **{k: v for k, v in there.items() if k.lower() != "content-type"},
                "content-type": "application/jsonl",
                "x-goog-upload-command": "upload, finalize",
                "x-goog-upload-offset": "0",
            },
            {},
            raw=data,
        )
        return str(json_of(finished)["file"]["name"])

    def state(self, target: JobTarget, job_id: str) -> Steps:
        job = json_of((yield get(target, f"{target.base_url}/{_job_name(job_id)}")))
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
        token: str | None = None
        for _ in range(MOST_PAGES):  # in no order the API promises: every page
            params = {"pageSize": "100", **({"pageToken": token} if token else {})}
            page = json_of((yield get(target, f"{target.base_url}/batches", params)))
            for job in page.get("operations") or []:
                if isinstance(job, dict) and (job.get("metadata") or {}).get("displayName") == tag:
                    return str(job["name"])
            token = page.get("nextPageToken")
            if not token:
                return None
        raise too_many_jobs(MOST_PAGES)

    def uploads(self, target: JobTarget, tag: str, since: float, *, measured: bool = True) -> Steps:
        # The API promises no order of its files (nor lets one be asked for): every page is
        # read, none left for being older than the submission. It keeps an uploaded file
        # for 48 hours, so the list holds two days' uploads at most.
        found: list[str] = []
        token: str | None = None
        for _ in range(MOST_PAGES):
            params = {"pageSize": "100", **({"pageToken": token} if token else {})}
            page = json_of((yield get(target, f"{target.base_url}/files", params)))
            for file in page.get("files") or []:
                named = file.get("name") if isinstance(file, dict) else None
                if isinstance(named, str) and file.get("displayName") == tag:  # as `_upload`
                    found.append(named)
            token = page.get("nextPageToken")
            if not token:
                return found
        raise too_many_files(MOST_PAGES)

    def results(
        self, target: JobTarget, state: JobState, keys: Sequence[str], in_order: bool = False
    ) -> Steps:
        output = state.results or {}
        entries: list[dict[str, Any] | None] = []
        inline = output.get("inlinedResponses")
        named = isinstance(inline, dict) or isinstance(output.get("responsesFile"), str)
        unrun = _server_side(state) if state.outcome == "failed" else None
        if not named and state.billed and (state.outcome != "failed" or unrun is not None):
            # The API has reported a job SUCCEEDED, its stats counting answers, before naming
            # where they are: read again later, as results answering 404 are, rather than
            # its rows taken for unanswered (sent again, and paid twice). So is one that
            # failed on the provider's side counting answers (its rows would be sent again
            # as server errors). A job refused whole for its input names its error instead,
            # and its rows are taken as such (counted paid as many as it counts answered).
            raise NotFoundError(_unnamed(state), origin=MessageOrigin.AUTHORED)
        if isinstance(inline, dict):
            listed = inline.get("inlinedResponses") or []
            entries = [entry if isinstance(entry, dict) else None for entry in listed]
        elif isinstance(output.get("responsesFile"), str):
            root, version = _root(target.base_url)
            url = f"{root}/download{version}/{_file_name(output['responsesFile'])}:download"
            response = yield get(target, url, {"alt": "media"})
            entries = json_lines(response.content)
        rows: dict[str, Row] = {}
        # A response is matched by its key alone. The API documents the responses' order as
        # the requests', but they have come back without keys (python-genai #1886, #2008)
        # and out of order (#1909), each complete in itself: matched by place, an input
        # would take another's answer, as valid as its own. One without a key is matched
        # to no input; those left without a response are sent again, and what the
        # unmatched ones cost is counted unknown (`JobState.billed`), as for a line that
        # cannot be read. (`in_order` no longer matters.)
        unmatched = 0
        for entry in entries:
            if entry is None:
                continue
            key = _key(entry)
            if key is None:
                unmatched += 1
                continue
            keep(rows, _row(key, entry))
        note = (
            f"the job failed: {state.reason}"
            if state.outcome == "failed"
            else f"the job ended {state.outcome} without a response for this request"
            + unread(entries)
            + _unmatched(unmatched)
        )
        kind = RowKind.EXPIRED if state.outcome == "expired" else RowKind.MISSING
        if state.outcome == "cancelled":
            kind = RowKind.CANCELED
        elif state.outcome == "failed":
            kind = RowKind.JOB_FAILED
            if unrun is not None:  # not the input's fault: each row is a server error's
                return {key: rows.get(key) or Row(key, *unrun, absent=True) for key in keys}
        words = state.error_words if kind == RowKind.JOB_FAILED else None
        return {
            key: rows.get(key) or Row(key, kind, note=note, words=words, absent=True)
            for key in keys
        }

    def cancel(self, target: JobTarget, job_id: str) -> Steps:
        yield post(target, f"{target.base_url}/{_job_name(job_id)}:cancel", {})

    def discard(self, target: JobTarget, uploaded: Mapping[str, str]) -> Steps:
        # Only a job too large to send inline uploads a file (`files/...`).
        name = uploaded.get("file")
        if name is not None:
            yield delete(target, f"{target.base_url}/{_file_name(name)}")
        return name


def _state(job: dict[str, Any]) -> JobState:
    metadata = job.get("metadata") or {}
    status = str(metadata.get("state") or "BATCH_STATE_UNSPECIFIED")
    outcome = _ENDED.get(status)
    if outcome is None and job.get("done"):
        outcome = "failed" if job.get("error") else "completed"
    output = metadata.get("output") or job.get("response") or {}
    stats = metadata.get("batchStats") or {}
    counts = {k: int(v) for k, v in stats.items() if _count(v)}
    error = job.get("error")
    return JobState(
        id=str(job["name"]),
        status=status,
        ended=outcome is not None,
        outcome=outcome,
        counts=counts,
        error=_code(error),
        error_words=_message(error),
        results=output,
        tag=metadata.get("displayName"),
        created_at=rfc3339_seconds(metadata.get("createTime")),
        total=counts.get("requestCount"),
        billed=_succeeded(counts) if outcome is not None else None,
    )


def _unnamed(state: JobState) -> str:
    """Why an ended job's results are not read: it named none, though it counts answers
    (one that failed says with which error)."""
    ended = state.status + (f" ({state.error})" if state.outcome == "failed" else "")
    return (
        f"the provider named no responses of job {state.id} to read (no inlinedResponses, "
        f"no responsesFile), though it ended {ended} with its stats counting "
        f"{state.billed} of its requests answered"
    )


def _succeeded(counts: dict[str, int]) -> int | None:
    """The requests an ended job answered, by its stats: proto3 JSON leaves a count of
    zero out, so stats that count the requests and not these say none; `None` for a job
    that gives no stats."""
    if "requestCount" not in counts:
        return None
    return counts.get("successfulRequestCount", 0)


def _count(value: object) -> bool:
    """Whether a job's stat is a count (a number, or its ASCII digits as text)."""
    text = str(value)
    return type(value) is not bool and text.isascii() and text.isdigit() and len(text) < 19


def _code(error: object) -> str | None:
    """What a job's error is, by its status or code (`error` when it has neither)."""
    if not error:
        return None
    code = (error.get("status") or error.get("code")) if isinstance(error, dict) else None
    return str(code) if code else "error"


def _message(error: object) -> str | None:
    """A job error's message: the provider's words, which may quote its requests (an
    error given as text alone is such words)."""
    message = error.get("message") if isinstance(error, dict) else error
    return str(message) if message else None


def _key(entry: dict[str, Any]) -> str | None:
    """The key a response carries: a file's line has its own, an inlined one its request's
    metadata."""
    key = entry.get("key")
    metadata = entry.get("metadata")
    if not isinstance(key, str) and isinstance(metadata, dict):
        key = metadata.get("key")
    return key if isinstance(key, str) and key else None


def _unmatched(count: int) -> str:
    """What a note on a missing row adds when responses came without a request's key (none
    is matched by its place)."""
    if not count:
        return ""
    some = f"{count} response{'s' if count > 1 else ''}"
    return (
        f" ({some} came without the key of a request, and a response is matched by its key alone)"
    )


def _row(key: str, entry: dict[str, Any]) -> Row:
    if isinstance(entry.get("response"), dict):
        return Row(key, RowKind.RESPONSE, 200, json.dumps(entry["response"]).encode())
    if "candidates" in entry or "usageMetadata" in entry or "promptFeedback" in entry:
        # A line of a responses file may be the response itself, beside its key.
        return Row(key, RowKind.RESPONSE, 200, json.dumps(entry).encode())
    error = entry.get("error") or (entry if "code" in entry or "message" in entry else {})
    if not isinstance(error, dict):
        error = {"message": error}  # words alone
    return Row(key, RowKind.ERROR, _http_status(error), json.dumps({"error": error}).encode())


_GRPC_HTTP = {
    "CANCELLED": 499,
    "UNKNOWN": 500,
    "INVALID_ARGUMENT": 400,
    "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "PERMISSION_DENIED": 403,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
}
"""The HTTP status Google's APIs answer each canonical code with."""

_GRPC_NAMES = list(_GRPC_HTTP)
"""The canonical codes' names by number, from 1 (`CANCELLED`)."""


def _server_side(state: JobState) -> tuple[str, int, bytes] | None:
    """The row a job that failed on the provider's side (`INTERNAL`, `UNAVAILABLE`, a
    deadline, a limit) gives each request it did not answer: an error of that status,
    which the run sends again as it does a row's server error. `None` for a job refused
    for its input (`INVALID_ARGUMENT`), whose rows fail as `job_failed`."""
    name = state.error
    error: dict[str, Any]
    if name in _GRPC_HTTP:
        error = {"status": name}
    elif name is not None and name.isascii() and name.isdigit() and _known_code(int(name)):
        error = {"code": int(name)}
    else:  # no code, or one Google's APIs do not have: nothing tells, taken as refused
        return None
    status = _http_status(error)
    if status < 500 and status != 429:
        return None
    message = state.error_words or f"the batch job failed: {state.error}"
    body = {"error": {**error, "message": message}}
    return RowKind.ERROR, status, json.dumps(body).encode()


def _known_code(code: int) -> bool:
    """Whether a job error's number is a canonical code (1 to 16) or an HTTP status."""
    return 1 <= code <= len(_GRPC_NAMES) or 400 <= code <= 599


def _http_status(error: dict[str, Any]) -> int:
    """A row error's HTTP status. A job's row holds a `google.rpc.Status`, whose `code` is
    a canonical code (13 `INTERNAL`, 14 `UNAVAILABLE`, 8 `RESOURCE_EXHAUSTED`), not an HTTP
    status: read as one, a server error was taken for an input's own (4xx, never sent
    again). The status name, where given, says it; an HTTP status (100 and up) stands."""
    name = error.get("status")
    if isinstance(name, str) and name in _GRPC_HTTP:
        return _GRPC_HTTP[name]
    code = error.get("code")
    if isinstance(code, bool) or not isinstance(code, int):
        try:
            code = int(str(code))
        except ValueError:
            return 500
    if 1 <= code <= len(_GRPC_NAMES):
        return _GRPC_HTTP[_GRPC_NAMES[code - 1]]
    return code if 100 <= code <= 599 else 500


DIALECT = GeminiJobs()
