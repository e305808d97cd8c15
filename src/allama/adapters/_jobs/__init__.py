"""Provider batch jobs, sans I/O: how each provider's batch API is spoken.

A job dialect builds the HTTP requests that submit a job, read its state, list recent jobs
(to find one whose submission was cut off), cancel it and fetch its results, and reads what
comes back. Each operation is a generator that yields the `HttpRequest`s it needs and
receives their `HttpResponse`s (the driver raises the provider's error for an error
status), so the same code serves any driver. The requests inside a job are encoded by the
dialect's own adapter, exactly as a live call would be; a row's answer is decoded by it too.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from allama.adapters._http import (
    HttpRequest,
    HttpResponse,
    is_secret_header,
    origin,
    provider_now,
    wire_json,
)
from allama.errors import Error, MessageOrigin

__all__ = [
    "MayBeGone",
    "get_may_be_gone",
    "CREATE_ASKED",
    "Entry",
    "JobAmbiguity",
    "JobDialect",
    "JobUnconfirmed",
    "JobState",
    "JobTarget",
    "MOST_PAGES",
    "NamesUploads",
    "Row",
    "RowKind",
    "Steps",
    "UNICODE_LINE_ENDS",
    "UnsafeIdError",
    "checked_id",
    "clock_ahead",
    "headers_for",
    "job_line",
    "load_job_dialect",
    "too_many_files",
    "too_many_jobs",
    "unrun_kind",
    "upload_leeway",
]

Steps = Generator[HttpRequest, HttpResponse, Any]


@dataclass(frozen=True, slots=True)
class Entry:
    """One request of a job: the key its row comes back under and the encoded call."""

    key: str
    request: HttpRequest


@dataclass(frozen=True, slots=True)
class JobTarget:
    """Where the jobs of one provider live: its base URL, the headers of a call (auth,
    version), the model, and the path of the live endpoint the job's requests stand for."""

    base_url: str
    headers: Mapping[str, str]
    model: str
    endpoint: str
    """The live path under the base URL (`/chat/completions`, `/responses`, `/messages`)."""
    params: Mapping[str, str] = field(default_factory=dict)
    own_host_headers: frozenset[str] = frozenset()
    own_host_params: frozenset[str] = frozenset()
    """Headers and parameters sent to the base URL's host alone: what the caller wrote into
    the base URL (a gateway's user and password, its `?key=`), not for another host an
    answer names (a results file's URL)."""

    def __repr__(self) -> str:
        # A job's runner holds one in its frames: a traceback shown with its locals (an
        # error tracker's) must not show the key.
        headers = {
            name: "<redacted>" if is_secret_header(name) or name in self.own_host_headers else value
            for name, value in self.headers.items()
        }
        params = {
            name: "<redacted>" if name in self.own_host_params else value
            for name, value in self.params.items()
        }
        return (
            f"JobTarget(base_url={self.base_url!r}, model={self.model!r}, "
            f"endpoint={self.endpoint!r}, headers={headers!r}, params={params!r})"
        )


class RowKind:
    RESPONSE = "response"
    """The provider answered: `body` is what the live endpoint would have returned."""
    ERROR = "error"
    """The provider refused or failed the row: `status` and `body` are its error."""
    EXPIRED = "expired"
    """The job's window ended before the row was run."""
    CANCELED = "canceled"
    """The job was cancelled before the row was run."""
    MISSING = "missing"
    """The job ended without a word about the row."""
    LOST = "lost"
    """The row's result may be in a file of billed answers the provider answers 404 for
    (OpenAI's output file; another file of the job was read): it may have run, and been
    paid for; sent again only when asked."""
    JOB_FAILED = "failed"
    """The whole job was refused (its input, a limit): `note` says why."""


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    kind: str
    status: int | None = None
    body: bytes | None = None
    note: str | None = None
    """allama's own words on a row with no body (why it is missing, the job's error codes)."""
    words: str | None = None
    """The provider's own words on such a row (its error's message), which may quote the
    request: kept for the caller who asks, in no log view."""
    absent: bool = field(default=False, compare=False)
    """No line of the job's results named it (its line cut short, say, or an answer without
    its key): it may be one of the answers the job counts billed (`JobState.billed`) that
    could not be read. (How the row was read, not what it says: left out of equality.)"""


@dataclass(frozen=True, slots=True)
class JobState:
    """A job as the provider reports it, in common terms.

    `status` is the provider's own word; `ended` whether it will change no more; `outcome`
    once ended: `completed`, `expired`, `cancelled` or `failed` (the whole job refused,
    `error` says why, by the provider's error codes; `error_words` are its messages, which
    may quote the requests, shown only when asked). `counts` are the provider's request
    counts, by its names."""

    id: str
    status: str
    ended: bool
    outcome: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None
    error_words: str | None = None
    results: Any = None
    """Where the results are (file ids, a URL, or the rows inline): for `results` only."""
    tag: str | None = None
    """The tag allama gave the job when it submitted it, where the provider keeps one."""
    created_at: float | None = None
    total: int | None = None
    queue_full: bool = False
    """Failed for the provider's queue of batch work being full (OpenAI's enqueued tokens
    per model): none of its rows ran, and the same job sent once others end may run."""
    take_what_is_left: bool = False
    """For `results` only: a results file of several that answered 404 as often as one is
    read again is gone, its rows `LOST`, the others' read (else the 404 is raised)."""
    billed: int | None = None
    """Once it ended, how many of its requests the provider counts answered (OpenAI's
    `completed`, Anthropic's `succeeded`, Gemini's `successfulRequestCount`): no more of
    its rows than this were paid for, which bounds those counted paid at a cost unknown
    when its results are gone. `None` where it does not say."""
    unbilled: frozenset[str] = frozenset()
    """Of `results`, the files that hold only rows the provider did not bill (OpenAI's
    error file: failed requests, and those the job never ran)."""

    @property
    def reason(self) -> str:
        """Why it failed, for a message: `error`, or that the provider named nothing (a
        failed job may carry no error at all)."""
        return self.error or "the provider named no reason"


UNICODE_LINE_ENDS = str.maketrans({"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""The characters past ASCII that end a line to a reader splitting on every Unicode line
end (`str.splitlines`), as JSON escapes: text from PDFs and web pages holds them."""


def job_line(data: Any) -> bytes:
    """One line of a job's JSONL file: UTF-8 as it is, but for the Unicode line ends, which
    are escaped, so that no reader of the file splits a request in two (and fails the whole
    job as a file of invalid JSON)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.translate(UNICODE_LINE_ENDS).encode() + b"\n"


def line_size(content: bytes) -> int:
    """The bytes a request's JSON `content` takes in a job's file: its Unicode line ends are
    written as six-byte escapes there (`job_line`), two or three bytes each in `content`."""
    grown = content.count(b"\xc2\x85") * 4
    if b"\xe2\x80" in content:
        grown += (content.count(b"\xe2\x80\xa8") + content.count(b"\xe2\x80\xa9")) * 3
    return len(content) + grown


def json_lines(content: bytes) -> list[dict[str, Any] | None]:
    """The lines of a results file as JSON objects, in their order; `None` for a line that
    is no JSON object (cut short, say), which does not stop the reading of the others."""
    lines: list[dict[str, Any] | None] = []
    for line in content.splitlines():
        if not line.strip():
            continue
        try:
            parsed = wire_json(line)
        except ValueError:
            parsed = None
        lines.append(parsed if isinstance(parsed, dict) else None)
    return lines


def keep(rows: dict[str, Row], row: Row) -> None:
    """`row` into `rows`, unless an answer for its key is there: a file that names a key
    twice (an answer, then an error) never loses the answer that was paid for."""
    kept = rows.get(row.key)
    if kept is None or (kept.kind != RowKind.RESPONSE and row.kind == RowKind.RESPONSE):
        rows[row.key] = row


def unread(lines: Sequence[dict[str, Any] | None]) -> str:
    """What a note on a missing row adds when lines of the results could not be read."""
    count = sum(line is None for line in lines)
    if not count:
        return ""
    return f" ({count} line{'s' if count > 1 else ''} of its results could not be read)"


class JobAmbiguity(Error):
    """More than one job at the provider could be the one looked for, or the provider
    lists more jobs than a look goes through: none can be ruled out. An allama error, so
    that a caller of `cancel_jobs` catching `allama.Error` catches it; its words are
    allama's (the provider's job ids, no request's text)."""

    kind = "ambiguous_job"

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("origin", MessageOrigin.AUTHORED)
        super().__init__(message, **kwargs)


class JobUnconfirmed(JobAmbiguity):
    """One job at the provider may be the one looked for, and nothing can confirm it yet: a
    batch still running, of a provider whose jobs keep no tag (Anthropic's), is told only
    by its results' request ids once it ends. `candidate` is its id: a run may read its
    state and, once it ended, its results, to confirm it; nothing may act on it before (a
    cancel would cancel another's batch)."""

    def __init__(self, message: str, *, candidate: str) -> None:
        super().__init__(message)
        self.candidate = candidate


class UnsafeIdError(Error):
    """An id of a job or a file, read from a ledger or a provider's answer, that is not of
    the provider's form, refused before it goes into a request's path: a `/`, a `..`, a
    `?` or a `#` would send the request, with the key, to another of the provider's
    resources (delete a fine-tuned model, cancel another job). An allama error, so that
    the caller of a job's operation catching `allama.Error` catches it; `shown` is the id as
    its words show it (escaped and shortened: it may be anyone's text)."""

    def __init__(self, message: str, *, shown: str) -> None:
        super().__init__(message, origin=MessageOrigin.AUTHORED)
        self.shown = shown


_ID_SHOWN = 40
"""The most of a refused id its error shows."""


def checked_id(value: object, form: re.Pattern[str], what: str) -> str:
    """`value`, an id to put in a request's path, if it is whole of `form` (the
    provider's: one path segment, or Gemini's `batches/<id>`); else `UnsafeIdError`.
    `what` says the form (`an OpenAI batch id (batch_...)`)."""
    if isinstance(value, str) and form.fullmatch(value):
        return value
    text = value if isinstance(value, str) else str(value)
    cut = text if len(text) <= _ID_SHOWN else f"{text[: _ID_SHOWN - 3]}..."
    shown = ascii(cut)  # quoted, every character past printable ASCII as an escape
    raise UnsafeIdError(
        f"the id {shown} is not {what}: it is not put in a request's path, where it could "
        "reach another of the provider's resources with the key",
        shown=shown,
    )


def unrun_kind(outcome: str | None) -> str:
    """The kind of a row an ended job did not answer, by how the job ended: expired,
    cancelled, the job refused whole, else missing."""
    return {
        "failed": RowKind.JOB_FAILED,
        "cancelled": RowKind.CANCELED,
        "expired": RowKind.EXPIRED,
    }.get(outcome or "", RowKind.MISSING)


CREATE_ASKED = "create"
"""Set in a submission's `uploaded` once the job's making was asked: a failure after it may
have made the job (its answer lost), one before it (an upload's) did not."""

MOST_PAGES = 200
"""The pages of a provider's jobs a look for one goes through (of 100 jobs each) before it
says it can rule none out, rather than take the job for one never made."""


def too_many_jobs(pages: int) -> JobAmbiguity:
    return JobAmbiguity(
        f"the provider lists more than {pages * 100} jobs made since, and allama cannot rule "
        "out that one of those further back is this one"
    )


def too_many_files(pages: int) -> Error:
    return Error(
        f"the provider lists more than {pages * 100} files, and allama looked no further",
        origin=MessageOrigin.AUTHORED,
    )


def upload_leeway(measured: bool) -> float:
    """How long before a submission's recorded start a file named after its job is looked
    for (seconds): an hour, as for its job (the two clocks, and the moment each was read);
    a day where the start was read on another machine's clock, or before a restart."""
    return 3600.0 if measured else 86400.0


def clock_ahead(response: HttpResponse) -> float | None:
    """How far the provider's clock is ahead of this machine's (seconds; negative when
    behind), by the `Date` its answer carries (to the second); `None` without one that
    reads."""
    import time

    said = provider_now(response.headers)
    return None if said is None else said - time.time()


class JobDialect(Protocol):
    """One provider's batch API."""

    name: str
    """The API as messages name it ("the OpenAI Batch API")."""
    max_requests: int
    max_bytes: int

    def size(self, entry: Entry) -> int:
        """The bytes `entry` adds to a job (for splitting into jobs under `max_bytes`)."""
        ...

    def submit(
        self,
        target: JobTarget,
        entries: Sequence[Entry],
        tag: str,
        uploaded: dict[str, str] | None = None,
    ) -> Steps:
        """Submit a job of `entries` tagged `tag`; returns the provider's job id.
        `uploaded`: where the file of a job sent as one is kept by name, so that trying the
        submission again (a rate limit on making the job) does not upload it again, and
        `CREATE_ASKED` once the job's making is asked (a failure before it made no job)."""
        ...

    def state(self, target: JobTarget, job_id: str) -> Steps:
        """Read a job; returns a `JobState`."""
        ...

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
        """Find the job submitted with `tag` (at or after `since`, of `count` requests)
        among the provider's recent jobs, not one of `known` (the ids the ledger holds of
        its other jobs); returns its id, `None` when there is none, or raises
        `JobAmbiguity` when it cannot tell. `keys`: its requests' ids, for a provider whose
        jobs keep no tag (a job that ended holds them in its results). `measured`: whether
        `since` is this machine's clock's, measured since on its monotonic clock; else
        another machine's, or one read before a restart, that may be off by any amount."""
        ...

    def results(
        self, target: JobTarget, state: JobState, keys: Sequence[str], in_order: bool = False
    ) -> Steps:
        """The rows of an ended job, one per key in `keys` (missing ones as such);
        returns a `dict[str, Row]`. `in_order`: `keys` are in the order of the job's
        requests (a run that submitted it knows it; a later one does not). No dialect
        matches a response by its place (Gemini's have come back without keys and out of
        order): one without its key is matched to no input."""
        ...

    def cancel(self, target: JobTarget, job_id: str) -> Steps:
        """Ask the provider to cancel a job; returns nothing."""
        ...

    def discard(self, target: JobTarget, uploaded: Mapping[str, str]) -> Steps:
        """Delete the file a submission uploaded (`uploaded`, as `submit` filled it) whose
        job was not made: it holds the requests' text, and no job will read it. Returns
        the file's id, or `None` where nothing was uploaded."""
        ...


@runtime_checkable
class NamesUploads(Protocol):
    """A batch API whose jobs read a file uploaded first, named after the job's tag
    (OpenAI's; Gemini's past its inline limit). Anthropic's take no file."""

    def uploads(self, target: JobTarget, tag: str, since: float, *, measured: bool = True) -> Steps:
        """The files at the provider named after job `tag` (as `submit` names its input
        file), uploaded since `since` (`measured` as for `find`); returns their ids
        (Gemini: `files/...`). For a submission cut off while its file was uploaded: the
        request sent, its answer (the file's id) never back, the file is known by its
        name alone."""
        ...


def load_job_dialect(name: str) -> JobDialect:
    """The job dialect `allama.adapters._jobs._<name>`, imported on first use."""
    module = importlib.import_module(f"allama.adapters._jobs._{name}")
    dialect: JobDialect = module.DIALECT
    return dialect


def get(target: JobTarget, url: str, params: Mapping[str, str] | None = None) -> HttpRequest:
    """A GET with the target's headers but no body."""
    headers, own = headers_for(target, url)
    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    return HttpRequest("GET", url, headers, {}, {**own, **(params or {})}, raw=b"")


@dataclass(frozen=True, slots=True)
class MayBeGone(HttpRequest):
    """A GET whose 404 is given to the dialect rather than raised: one results file of
    several, the others' rows still read."""


def get_may_be_gone(target: JobTarget, url: str) -> MayBeGone:
    made = get(target, url)
    return MayBeGone(made.method, made.url, made.headers, made.body, made.params, raw=made.raw)


def delete(target: JobTarget, url: str) -> HttpRequest:
    """A DELETE with the target's headers but no body."""
    made = get(target, url)
    return HttpRequest("DELETE", made.url, made.headers, {}, made.params, raw=b"")


def post(target: JobTarget, url: str, body: dict[str, Any]) -> HttpRequest:
    headers, own = headers_for(target, url)
    return HttpRequest("POST", url, {**headers, "content-type": "application/json"}, body, own)


def headers_for(target: JobTarget, url: str) -> tuple[dict[str, str], dict[str, str]]:
    """The target's headers and parameters for `url`: on another host than the base
    URL's (one an answer named), without those the base URL gave."""
    headers, params = dict(target.headers), dict(target.params)
    if not (target.own_host_headers or target.own_host_params):
        return headers, params
    base, there = origin(target.base_url), origin(url)
    # The same origin; or the same host, from plain HTTP to HTTPS (where nothing is less safe).
    if base is not None and (
        there == base or (there == ("https", base[1], None) and base[0] == "http" and not base[2])
    ):
        return headers, params
    return (
        {k: v for k, v in headers.items() if k not in target.own_host_headers},
        {k: v for k, v in params.items() if k not in target.own_host_params},
    )


def json_of(response: HttpResponse) -> Any:
    return wire_json(response.content) if response.content.strip() else {}


def jsonl(data: bytes) -> list[Any]:
    """The JSON values of a JSONL file (blank lines skipped)."""
    return [wire_json(line) for line in data.splitlines() if line.strip()]
