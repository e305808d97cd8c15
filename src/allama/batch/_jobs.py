"""A batch run through the provider's batch API: the same extractions, at batch prices.

Each input's extraction is the engine's own (`extract_steps`): its first request is encoded
by the provider as a live call would be and goes into a job; the row that comes back is
decoded as the live answer would be and handed to the extraction, which validates it,
records the pass (at batch prices) and says whether to ask again. What it asks next, and
rows that come back failed (a server error, expired, cancelled, missing), are sent again
live or in a follow-up job (`retry`), each attempt counted in the ledger.

The ledger makes it safe to stop at any moment: a job is recorded (with its inputs) before
it is sent and its provider id as soon as it is known, so a later run polls and collects
it instead of submitting again; a job whose submission was cut off is looked for at the
provider (by the tag allama gave it) before anything is sent again. What the jobs and the
live follow-ups answered is kept per input, so an extraction carries on where it was.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import sqlite3
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import JsonValue

from allama import _tracing
from allama._prices import MONEY, Cost, cost_of, dollars
from allama._tokens import guessed_input_tokens
from allama.adapters._jobs import (
    CREATE_ASKED,
    Entry,
    JobAmbiguity,
    JobState,
    JobUnconfirmed,
    NamesUploads,
    Row,
    RowKind,
    Steps,
    UnsafeIdError,
    unrun_kind,
)
from allama.batch._ledger import JobPhase, JobRow, Ledger, Status, since_boot
from allama.batch._limits import LONGEST_WAIT
from allama.batch._run import (
    _MAX_RATE_LIMITED,
    _NO_MORE,
    IN_FLIGHT_ELSEWHERE,
    IN_PROVIDER_JOB,
    JOBS_KEPT,
    BatchFailure,
    BatchResult,
    CallCancelled,
    _answered_by_any,
    _cancelling,
    _cost_of,
    _duplicate,
    _failure,
    _paid_any,
    _paid_text,
    _Reader,
    _refused_unread,
    _Runner,
    _Spec,
    _stops,
    _stored_record,
    exit_retrieved,
    ledger_unwritten,
    schema_tokens,
    turn_for,
)
from allama.errors import (
    PAID_BEFORE_KEY,
    REPORTED_USAGE_KEY,
    Error,
    ExtractionError,
    InvalidRequestError,
    MessageOrigin,
    NotFoundError,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    asked_wait,
    errors_in_chain,
    paid_ahead,
    paid_for,
    text_of,
)
from allama.extract._engine import Extracted, extract_steps
from allama.extract._metadata import ExtractionMetadata
from allama.extract._mode import ExtractionMode
from allama.providers._jobs import JobFile, ProviderJobs, RowUnanswered, provider_jobs
from allama.providers._options import check_url
from allama.types import ALLAMA_NAMESPACE, ChatResponse, Usage
from allama.wrappers._record import PAID_BEFORE

if TYPE_CHECKING:
    from collections.abc import Generator

    from allama.types import ChatRequest, Warning

__all__ = [
    "EndpointNotConfirmedError",
    "JobRunner",
    "JobsNotCancelledError",
    "cancel_jobs",
    "open_jobs",
    "poll_job",
]

_CLAIMS_AT_ONCE = 1000
"""Inputs claimed together (their claims share the ledger's commits)."""

_MAX_POLL_ERRORS = 20
"""Retryable errors in a row while reading a job before the run gives up on it (the job
stays in the ledger, and a later run reads it again)."""
_NOT_FOUND_READS = 3
"""Reads of a job the provider says it does not know (404), spaced as polls are, before
its rows fail: one 404 may be the provider's own delay, and a job made with another key or
project answers 404 to this one while it runs and is paid for."""
_LOOK_TRIES = 5
"""Tries of a look for a job whose submission's answer was lost, before it is said."""
_LOOKS_AFTER_LOST = (1.0, 2.0, 4.0, 8.0, 16.0)
"""The waits between looks for a job whose making's answer was lost, while it does not
show: a provider behind a gateway that answered 502, or a client's timeout, may go on
making it, and list it only once made. Six looks over half a minute, then it was not."""


_CANCELLED_BEFORE_MADE = "cancelled (`allama batch cancel`) before the job was made"
_NOT_MADE = "the provider made no job of it (none was found there)"
"""Why a cut-off submission's job is recorded `not_submitted`: the look for it found none
(its request may have reached the provider, its file uploaded, but no job was made)."""


def _unmade(item: _Item) -> RowUnanswered:
    return RowUnanswered(Row(item.key, RowKind.CANCELED, note=_CANCELLED_BEFORE_MADE))


_UNCONFIRMED = (
    "may be this job, not yet confirmed: read, not cancelled, until its results' request ids "
    "tell, once it ends"
)
"""How the summary names a job found for a cut-off submission that nothing confirms yet."""


_STILL_IN_THE_MAKING = 3600.0
"""Seconds since a cut-off submission was recorded within which its job may still be in the
making (its file's upload, then the provider making it), so that a next run's look for it
is repeated as after a lost answer (`_LOOKS_AFTER_LOST`) rather than made once."""


class _NotSeenYet(Exception):
    """The run stopped while a job whose making's answer was lost had not shown."""


@dataclass(slots=True)
class _Item:
    index: int
    key: str
    label: str
    request: ChatRequest
    began: float
    attempts: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    steps: Generator[ChatRequest, Any, Extracted[Any]] | None = None
    pending: ChatRequest | None = None
    """The request the extraction waits an answer to."""
    warnings: list[Warning] = field(default_factory=list)
    entry: Entry | None = None
    duplicates: list[tuple[int, str]] = field(default_factory=list)
    cancelled: bool = False
    """In a job cancelled before it was made: claimed, it fails as cancelled, unsent."""
    result: BatchResult[Any] | None = None
    """How it ended, once it has: a copy that comes later is given it."""
    spent: list[ExtractionMetadata] = field(default_factory=list)
    """What earlier runs' attempts paid for, where no answers are kept to take in again (a
    failure tried again): counted with the input's own record."""
    resent: int = 0
    """How often this run sent a pass of it again (a row its job did not answer, a server
    error): up to `max_attempts` sends in all. Counted by this run's sends, as a live run
    counts its tries, not by the ledger's attempts, which count claims of runs cut off
    before they sent anything."""
    paid: list[JsonValue] = field(default_factory=list)
    """What rows that failed and were sent again reported paying (`paid_for`, at batch
    prices): handed to the extraction with the next answer, which counts it."""
    taken: ExtractionMetadata | None = None
    """What the answers its extraction took in paid, as its record counts them (`_take_in`):
    kept in the ledger while it is sent again (`_paid_so_far`)."""


@dataclass(slots=True)
class _Job:
    tag: str
    job_id: str | None
    items: list[_Item]
    model: str
    cancel_requested: bool = False
    wait: float = 0.0
    due: float = 0.0
    errors: int = 0
    not_found: int = 0
    """Reads in a row the provider answered 404."""
    results_not_found: int = 0
    """Reads of its results, once it ended, the provider answered 404."""
    state: JobState | None = None
    in_order: bool = False
    """`items` are in the order of the job's requests: this run submitted it."""
    estimate: Decimal = Decimal(0)
    """What its requests are guessed to cost (under a budget): counted against it until
    the job's rows are collected and their own costs are."""
    files: list[JobFile] = field(default_factory=list)
    """The files the provider keeps for it (its input, its results), as its last read
    named them: deleted once its rows are kept (`_delete_files`)."""
    uploaded: str | None = None
    """The input file uploaded for it (by this run, or as the ledger recorded it), should no
    read name it."""
    requests: int = 0
    """The requests its record counts; `held` of them are this run's inputs."""
    unconfirmed: bool = False
    """Found for a cut-off submission, and nothing confirms it yet (`JobUnconfirmed`): read
    until it ends, its id not recorded, never cancelled; taken for the job once its results
    hold the job's request ids (`_confirmed`), else let go (`_let_go`)."""
    held: frozenset[str] = frozenset()
    """The keys of its inputs this run read (those its extraction ended on taking up, too):
    where fewer than its requests, the others wait in it for a run that reads them."""


_UNANSWERED = frozenset(
    {RowKind.EXPIRED, RowKind.CANCELED, RowKind.MISSING, RowKind.JOB_FAILED, RowKind.LOST}
)
"""Rows of an ended job with no answer to take in."""

LOST_JOB = "not_found"
"""The state of a job the provider answers 404 for (its rows may run elsewhere): none of
them is counted as paid here."""

FOLLOW_UP_NOT_SENT = "follow_up_not_sent"
_FOLLOW_UP_NOT_SENT = (
    "the run stopped before the pass its extraction asked for next was sent: the next run "
    "takes in the answers so far again and sends it"
)


class FollowUpNotSent(Exception):
    """An extraction asked for another pass after the run stopped."""


class JobRunner(_Runner):
    """The provider-batch run: `_Runner`'s bookkeeping (results, summary, budget, ledger
    writes) with jobs instead of calls. `send` makes a live call (for `retry="live"`);
    `sync` drives the job API over the provider's sync transport (a `batch` run)."""

    def __init__(
        self,
        spec: _Spec,
        send: Callable[[ChatRequest], Awaitable[ChatResponse]],
        emit: Callable[[BatchResult[Any]], None],
        *,
        sync: bool,
    ) -> None:
        super().__init__(spec, _no_call, emit)
        self.send = send
        self.sync = sync
        self.jobs: ProviderJobs = provider_jobs(spec.provider)
        self.queue: list[_Item] = []
        self.open: dict[str, _Job] = {}
        self.live: set[asyncio.Task[None]] = set()
        self.items: dict[str, _Item] = {}
        self.read_all = False
        """The inputs are read (to their end, or as far as a stop let them be)."""
        self.schema_tokens = schema_tokens(spec.tp) if spec.max_cost is not None else 0
        self.answered = self.answered_tokens = 0
        """The answers collected, and their output tokens in all: a budget's guesses."""
        self.live_slots = asyncio.Semaphore(spec.concurrency)
        """Live follow-ups in flight at once, at most `concurrency`."""
        self.unconfirmed: set[str] = set()
        """The tags of cut-off submissions whose look found a job nothing confirms yet."""

    # The run

    async def _run(self) -> None:
        spec = self.spec
        assert spec.ledger is not None
        self.open_ledger(spec.ledger)
        try:
            waiting = await self._intake()
            await self._recover(waiting)
            assert self.book is not None
            self.book.collect_ended()  # one a run cut off before it said so
            while self.queue or self.open or self.live:
                if self.queue and self.stopping is None:
                    await self._submit_queue()
                elif self.queue:
                    for item in self.queue:
                        await self._leave(item)
                    self.queue.clear()
                if self.stopping is not None and self.open:
                    # Those that ended meanwhile are collected (asking costs nothing, and a
                    # budget's stop would otherwise leave them to every run after); the
                    # rest are left to the provider.
                    for job in list(self.open.values()):
                        await self._poll(job)
                    self._leave_open_jobs()
                if self.open:
                    await self._poll_due()
                elif self.live:
                    await asyncio.wait(self.live, return_when=asyncio.FIRST_COMPLETED)
        except BaseException as error:
            if isinstance(error, asyncio.CancelledError):  # the run closed before its end
                self.closing()
                self.emit = _given_to_no_one  # a closed run gives no more results
                self._leave_open_jobs()
            for task in self.live:
                task.cancel()
            if self.live:
                await asyncio.gather(*self.live, return_exceptions=True)
            if isinstance(error, sqlite3.Error):  # a full disk, a lock held: named
                jobs = JOBS_KEPT if self.summary.jobs else ""
                raise ledger_unwritten(spec.ledger, error, jobs) from error
            raise
        finally:
            self._wrap_up()
        if self.unwritable is not None:  # a write of an input's end, the run's end
            raise self._unwritten() from self.unwritable
        if self.broken is not None:
            raise self.broken

    def _leave_open_jobs(self) -> None:
        """The jobs still running go on at the provider, and a later run collects them:
        their inputs are in jobs, so said."""
        for job in list(self.open.values()):
            self._leave_job(job)

    def _leave_job(self, job: _Job) -> None:
        del self.open[job.tag]
        self.summary.in_flight -= len(job.items)
        said = None
        if job.unconfirmed:
            said = (
                f"in provider batch job {job.tag}, made or not ({job.job_id} may be it, told "
                "by its results once it ends): the same command looks for it, and collects it"
            )
        for item in job.items:
            self._in_job(item, job, said)

    async def _intake(self) -> dict[str, list[_Item]]:
        """Every input built, keyed and claimed; those in a job of an earlier run are
        returned by job, to be collected rather than sent. Inputs are claimed a chunk at a
        time, so that the claims of a chunk share the ledger's commits."""
        spec = self.spec
        waiting: dict[str, list[_Item]] = {}
        chunk: list[_Item] = []
        inputs = self.reader = _Reader(spec.inputs, self.sync, self, _CLAIMS_AT_ONCE)
        try:
            for index in itertools.count():
                document = await self._next_input(inputs, index)
                if document is _NO_MORE:
                    self.all_read = self.broken is None and not inputs.stopped
                    break
                if self.unread() >= self.most_unread:
                    await self._wait_for_the_caller()  # inputs the ledger holds come back
                began = time.monotonic()
                prepared = self._prepared(index, document, began)
                if prepared is None:
                    continue
                label, request, key = prepared
                first = self.items.get(key)
                if first is not None and first.result is not None:  # ended while read
                    self._finish(_duplicate(index, label, first.result, self.again.get(key)))
                    continue
                if first is not None:
                    first.duplicates.append((index, label))
                    continue
                item = _Item(index, key, label, request, began)
                self.items[key] = item
                chunk.append(item)
                if len(chunk) >= _CLAIMS_AT_ONCE:
                    await asyncio.gather(*(self._claim(item, waiting) for item in chunk))
                    chunk = []
            await asyncio.gather(*(self._claim(item, waiting) for item in chunk))
            self._read_ahead_not_started(inputs)
        finally:
            inputs.close()
            self.read_all = True
        return waiting

    async def _claim(self, item: _Item, waiting: dict[str, list[_Item]]) -> None:
        spec = self.spec
        assert self.ledger is not None
        key, index, label = item.key, item.index, item.label
        self.unsent.add(key)  # given back at the run's end unless sent (or finished) first
        claim = await self.ledger.claim(key, index, label, retry_failed=spec.retry_failed)
        row = claim.row
        if (
            not claim.granted
            and row is not None
            and row.status == Status.FAILED
            and spec.retry_failed
            and row.run_id != self.ledger.run_id
        ):
            claim = await self.ledger.reclaim(key, index, label)
            row = claim.row
        item.attempts = claim.attempts
        if not claim.granted:
            self.unsent.discard(key)
            assert row is not None
            if row.status == Status.SUBMITTED and row.job is not None:
                item.log = list(row.log or [])
                if not item.log:  # what earlier attempts paid, as for an input sent anew
                    item.spent = self.earlier_of(key, row)
                waiting.setdefault(row.job, []).append(item)
                return
            if claim.elsewhere:
                failure = BatchFailure(
                    IN_FLIGHT_ELSEWHERE, "in flight in another run of this ledger"
                )
                result: BatchResult[Any] = BatchResult(
                    index, key, label, None, failure, None, 0, 0.0
                )
            else:
                result = self._from_ledger(index, label, row)
                self._copies_read_from(row)
            self._finish(result)
            self._duplicates(item, result)
            return
        item.log = list(row.log or []) if row is not None else []
        if not item.log:  # answers kept are taken in again, and count themselves
            item.spent = self.earlier_of(key, row)
        if item.cancelled:
            await self._failed(item, _unmade(item))
            return
        if self.stopping is not None:
            await self._leave(item)
            return
        if await self._start(item):
            # Taken out of a job by a run that ended before sending it again (`_resend`),
            # even with no answer kept: a follow-up, as it was for that run.
            resent = row is not None and row.log is not None and row.status != Status.FAILED
            self._route(item, follow_up=bool(item.log) or resent)

    async def _start(self, item: _Item) -> bool:
        """Begin the item's extraction and replay what jobs answered it; `False` when that
        already ended it (a failure before sending, or an answer it had taken in)."""
        ended: StopIteration | Exception | None = None
        item.taken = None
        try:
            item.steps = extract_steps(
                self.spec.extractor._settings, self.spec.provider, self.spec.tp, item.request
            )
            item.pending = next(item.steps)
            for outcome in item.log:
                item.pending = self._take_in(item, self._replayed(item, outcome))
        except StopIteration as done:
            ended = done
        except Exception as error:
            ended = error
        if item.log and item.taken is not None:
            # The answers taken in again were paid for by earlier runs: the summary says so.
            cost, _ = _cost_of([*item.spent, item.taken])
            if cost is not None:
                self.paid_earlier[item.key] = cost
        if isinstance(ended, StopIteration):
            await self._done(item, ended.value)
            return False
        if ended is not None:
            await self._failed(item, ended)
            return False
        return True

    def _take_in(self, item: _Item, answer: ChatResponse | Error) -> ChatRequest:
        """Hand `answer` to the item's extraction, counting what it paid in `item.taken` as
        the extraction's record counts it; the request it asks next (or its end, raised)."""
        assert item.steps is not None
        taken = item.taken or ExtractionMetadata.new(ExtractionMode.NATIVE)
        if isinstance(answer, Error):
            taken.record_paid(paid_for(answer))
        else:
            taken.record_pass(answer)
        item.taken = taken
        return item.steps.send(answer)

    def _replayed(self, item: _Item, outcome: dict[str, Any]) -> ChatResponse | Error:
        assert item.pending is not None
        if outcome.get("live"):  # a live follow-up's answer, as the extraction took it in
            if "error" in outcome:
                return Error.from_dict(dict(outcome["error"]))
            return ChatResponse.from_json(str(outcome.get("body", "")))
        _, warnings = self.jobs.entry(item.key, item.pending)
        status = int(outcome.get("status") or 200)
        row = Row(
            item.key,
            RowKind.RESPONSE if status < 400 else RowKind.ERROR,
            status,
            str(outcome.get("body", "")).encode(),
        )
        return self._answer(item, row, warnings, str(outcome.get("job") or ""))

    def _answer(
        self, item: _Item, row: Row, warnings: list[Warning], job_id: str
    ) -> ChatResponse | Error:
        assert item.pending is not None
        try:
            response = self.jobs.answer(item.pending, row, warnings)
        except Error as error:
            # What a failed row reports paying was paid at batch prices.
            paid: list[JsonValue] = [{**entry, "batch": True} for entry in paid_for(error)]
            error.context.metadata.pop(REPORTED_USAGE_KEY, None)
            return _with_paid(item, error.with_metadata(PAID_BEFORE_KEY, paid) if paid else error)
        return _with_paid(item, response.model_copy(update={"batch_job": job_id or "batch"}))

    def _route(self, item: _Item, *, follow_up: bool) -> None:
        """Send the item's pending request: in the next job, or live for a follow-up
        under `retry="live"`."""
        if follow_up and self.spec.job_retry == "live" and self.stopping is None:
            task = asyncio.create_task(self._live_traced(item))
            self.live.add(task)
            task.add_done_callback(self.live.discard)
            task.add_done_callback(exit_retrieved)  # (its errors end it as the input's)
        else:
            self.queue.append(item)

    # Submitting

    async def _submit_queue(self) -> None:
        items, self.queue = self.queue, []
        by_model: dict[str, list[_Item]] = {}
        for item in items:
            if not await self._encode(item):
                continue
            assert item.pending is not None
            by_model.setdefault(item.pending.model, []).append(item)
        for model, group in by_model.items():
            for chunk in self._chunks(group):
                if self.stopping is not None:  # an earlier job's refusal, say: not sent
                    for item in chunk:
                        await self._leave(item)
                    continue
                estimate = Decimal(0)
                if self.spec.max_cost is not None:
                    chunk, estimate = self._within_budget(model, chunk)
                    if not chunk:
                        continue
                await self._submit(model, chunk, estimate)

    def _within_budget(self, model: str, chunk: list[_Item]) -> tuple[list[_Item], Decimal]:
        """The first of `chunk`'s requests whose guessed cost fits in what the budget leaves
        (less what the jobs still out are guessed to cost), and their guess: a job's cost is
        known only when it ends, so each is submitted only while its guess fits. Those that
        do not fit wait in the queue for jobs out to end (at less than their guess, room is
        freed); with none out, or a cost that cannot be guessed, the run stops."""
        budget = self.spec.max_cost
        assert budget is not None
        out = sum((job.estimate for job in self.open.values()), Decimal(0))
        room = MONEY.subtract(MONEY.subtract(budget, self._known_cost()), out)
        fits: list[_Item] = []
        total = Decimal(0)
        for item in chunk:
            guess = self._guessed_cost(item)
            if isinstance(guess, str):
                self._stop_for_budget(
                    f"what a job of {model} costs cannot be guessed before it is submitted "
                    f"({guess}): the budget of ${budget:f} cannot be kept"
                )
                self.queue.extend(chunk)
                return [], Decimal(0)
            if MONEY.add(total, guess) > room:
                if not fits and not self.open and not self.live:  # nothing out to wait for
                    self._stop_for_budget(
                        f"the budget of ${budget:f} leaves ${dollars(max(room, Decimal(0)))}, "
                        f"and the next request to submit is guessed at ${dollars(guess)}"
                    )
                break
            fits.append(item)
            total = MONEY.add(total, guess)
        self.queue.extend(chunk[len(fits) :])
        return fits, total

    def _guessed_cost(self, item: _Item) -> Decimal | str:
        """A request's cost at batch prices, guessed before it is submitted: its text and
        the schema sent beside it in tokens, and its output at `max_output_tokens`, else as
        long as the answers collected so far on average, else as long as the schema."""
        request = item.pending
        assert request is not None
        answered = self.answered
        output = request.max_output_tokens or (
            -(-self.answered_tokens // answered) if answered else self.schema_tokens
        )
        usage = Usage(
            input_tokens=guessed_input_tokens(request) + self.schema_tokens,
            output_tokens=output,
        )
        cost = cost_of(self.jobs.provider.name, request.model, usage, batch=True)
        return cost.total if isinstance(cost, Cost) else cost

    async def _encode(self, item: _Item) -> bool:
        """Encode the item's pending request as its job's entry, as its live call would be.
        One the adapter refuses (a blank last user message to Anthropic, a field refused
        under `unsupported_policy=ERROR`, an image it cannot read) is that call's outcome,
        as in a live run: handed to the extraction, which falls back (its next request
        encoded in turn) or fails the input alone, nothing sent; kept in its log, so that a
        run that resumes it takes it in again. `False` when the input ended."""
        while True:
            assert item.pending is not None and item.steps is not None
            try:
                item.entry, item.warnings = self.jobs.entry(item.key, item.pending)
                return True
            except Error as error:
                refused = _with_paid(item, error)
            item.entry, item.warnings = None, []
            item.log.append(_live_entry(refused))
            if not await self._go_on(item, refused):
                return False

    def _chunks(self, items: list[_Item]) -> list[list[_Item]]:
        dialect = self.jobs.dialect
        limit = min(dialect.max_requests, self.spec.job_size or dialect.max_requests)
        chunks: list[list[_Item]] = [[]]
        size = 0
        for item in items:
            assert item.entry is not None
            weight = dialect.size(item.entry)
            if chunks[-1] and (len(chunks[-1]) >= limit or size + weight > dialect.max_bytes):
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += weight
        return [chunk for chunk in chunks if chunk]

    async def _submit(self, model: str, items: list[_Item], estimate: Decimal) -> None:
        assert self.book is not None and self.ledger is not None
        self.ledger.commit()  # the claims before the job's record
        tag = f"allama-{uuid.uuid4().hex[:20]}"
        provider = self.jobs.provider
        self.book.record_job(
            tag,
            provider=provider.name,
            base_url=provider.base_url_as_given,  # the same provider, for status and cancel
            api=provider.preset.api,
            model=model,
            items=[(item.key, item.log) for item in items],
        )
        job = _Job(tag, None, items, model, in_order=True, estimate=estimate)
        job.requests, job.held = len(items), frozenset(item.key for item in items)
        self.summary.jobs[tag] = f"submitting {_requests(len(items))}"
        target = self.jobs.target(model)
        entries = [item.entry for item in items if item.entry is not None]
        tried = limited = 0
        began = since_boot()  # the submission's moment, read again as each look starts
        failed: Error | None = None
        too_long: str | None = None
        uploaded: dict[str, str] = {}  # a job's file, uploaded once however often it is tried
        maybe_made = False  # a try that failed may have reached the provider, not ruled out
        ever_maybe = False  # one did: its job may yet be made from the file uploaded
        unknown: str | None = None
        ambiguous = False  # jobs found that may be it, and not told apart
        last = False  # the tries are spent: only asked whether the last reached the provider
        while True:
            if maybe_made:  # its answer lost: a job made is collected, not made again
                try:
                    since = (time.time() - (since_boot() - began), True)
                    job.job_id = await self._look_for_made(
                        target, tag, since, len(items), [entry.key for entry in entries]
                    )
                except Error as error:
                    unknown = _not_ruled_out(tag, failed, error)
                    break
                except JobLookupError as error:
                    unknown, ambiguous = str(error), True
                    break
                except _NotSeenYet:
                    assert failed is not None
                    unknown = (
                        f"provider batch job {tag} may have been made, its answer lost "
                        f"({failed.kind}), and the run stopped before it showed: the same "
                        "command looks for it again"
                    )
                    break
                if job.job_id is not None:
                    break
                maybe_made = False
            if last or (failed is not None and self.stopping is not None):
                break  # stopped before the try again: not sent
            if self.book.cancel_requested(tag):  # `allama batch cancel` came first: not made
                await self._cancelled_before_made(tag, items)
                if not ever_maybe:
                    self.summary.jobs[tag] += await self._discard(target, tag, uploaded)
                return
            tried += 1
            try:
                steps = self.jobs.submit(target, entries, tag, uploaded)
                job.job_id = await self.jobs.run(
                    _noting_upload(steps, uploaded, lambda name: self._note_file(tag, name)),
                    model,
                    sync=self.sync,
                )
                break
            except Error as error:
                failed = error
                maybe_made = CREATE_ASKED in uploaded and _may_have_made(error)
                ever_maybe = ever_maybe or maybe_made
                if isinstance(error, RateLimitedError):
                    # No try, as for a live call: the job was not made (a queue's limit).
                    tried -= 1
                    limited += 1
                    if limited > _MAX_RATE_LIMITED:
                        break
                too_long = _waits_too_long(error, "the next job")
                if error.retryable and tried < self.spec.max_attempts and too_long is None:
                    if self.stopping is None:  # a stop ends the wait
                        await self.limiter.sleep(self._pause(error, tried + limited))
                    continue  # stopped: only asked whether that try reached the provider
                last = True
                if maybe_made:
                    continue
                break
        if job.job_id is None and unknown is not None:
            assert failed is not None
            self._made_or_not(tag, items, unknown, AMBIGUOUS_JOB if ambiguous else failed.kind)
            return
        if job.job_id is None:
            assert failed is not None
            self.book.job_not_submitted(tag, failed.kind)
            # No try may have made it: its file is read by no job.
            kept = "" if ever_maybe else await self._discard(target, tag, uploaded)
            self.summary.jobs[tag] = f"not submitted: {failed.kind}{kept}"
            stops = too_long or _stops(failed, tried, self.spec.template is not None)
            if stops is None and failed.retryable and self.stopping is None:
                # The provider would not make the job (an outage of its batch API, a
                # network that failed every try): no input's own failure, so none is
                # failed for good; they stay pending for the next run, which this stops.
                said = f"{tried} tries" + (f" and {limited} rate limits" if limited else "")
                if not tried:
                    said = f"{limited} tries, each rate limited"
                stops = (
                    f"the provider did not make a batch job in {said}: {_failure(failed).message}"
                )
            if stops is not None or (failed.retryable and self.stopping is not None):
                # Not the inputs' failure: they stay pending for the run that follows,
                # with what they paid before (a row that failed, earlier runs' attempts).
                for item in items:
                    await self._set_aside_item(item, failed, stops=stops)
                return
            self.summary.jobs[tag] = f"not submitted: refused ({failed.kind}){kept}"
            await self._refused(tag, items, failed, made=CREATE_ASKED in uploaded)
            return
        job.unconfirmed = tag in self.unconfirmed
        if not job.unconfirmed:
            self.book.job_submitted(tag, job.job_id)
        job.uploaded = uploaded.get("file")
        self.summary.jobs[tag] = f"{job.job_id}: submitted, {_requests(len(items))}"
        if job.unconfirmed:
            self.summary.jobs[tag] = f"{job.job_id}: {_UNCONFIRMED}"
        elif self.book.cancel_requested(tag):  # asked while it was being made
            job.cancel_requested = True
            await self._cancel_at_once(job)
        self.summary.in_flight += len(items)
        job.wait = self.spec.poll_interval
        job.due = time.monotonic() + job.wait
        self.open[tag] = job

    def _note_file(self, tag: str, name: str) -> None:
        """Record the file uploaded for job `tag` before its making is asked: a run killed
        before the job's id reached the ledger leaves it for the next run, which deletes it
        if the job was never made (`_recover`). Its id is known to no one else."""
        assert self.book is not None
        self.book.job_file(tag, name)

    async def _refused(self, tag: str, items: list[_Item], failed: Error, *, made: bool) -> None:
        """The provider refused, for good, the making of a job (`made`: the job itself, a
        model without batch support, an endpoint the batch API does not serve; else the
        upload of its file): the job's failure, its inputs failed with it, kept for
        `retry_failed`. The run submits no further job: nothing in the provider's answer
        says whether it is about this job's requests or about what every job of the run
        shares (its endpoint, its model, the account), and for the latter each would be
        refused in turn; the inputs not yet submitted stay pending."""
        failure = _failure(failed)
        step = f"to make job {tag}" if made else f"the upload of job {tag}'s input file"
        said = f"the provider refused {step}: {failure.message}"
        if self.stopping is None:
            self.summary.refused = failed.kind
            self.stop(f"{said}; no further job is submitted")
        for item in items:
            row = Row(item.key, RowKind.JOB_FAILED, note=said, words=failure.provider_message)
            await self._failed(item, RowUnanswered(row))

    async def _discard(self, target: Any, tag: str, uploaded: dict[str, str]) -> str:
        """Delete the input file uploaded for a job that was not made: it holds the
        requests' text, and no job reads it. Best effort: a failure is a warning naming the
        file, returned for the job's line of the summary too (else "")."""
        assert self.book is not None
        if "file" not in uploaded:
            return ""
        try:
            await self.jobs.run(
                self.jobs.dialect.discard(target, uploaded), target.model, sync=self.sync
            )
        except NotFoundError:
            pass  # gone already
        except Error as error:
            said = (
                f"the input file {_file_shown(uploaded['file'], error)} of job {tag}, which "
                f"was not made, could not be deleted ({_failure(error).message}): it holds "
                "the requests' text; delete it at the provider"
            )
            warnings.warn(said, RuntimeWarning, stacklevel=2)
            return f"; {said}"
        self.book.job_file_deleted(tag, uploaded["file"])
        return ""

    async def _cancelled_before_made(self, tag: str, items: list[_Item]) -> None:
        """A cancel (`allama batch cancel`) recorded while the job was being submitted,
        before it was made: it is not, and its inputs fail as a cancelled job's rows do."""
        assert self.book is not None
        self.book.job_not_submitted(tag, _CANCELLED_BEFORE_MADE)
        self._said_not_made(tag)
        for item in items:
            await self._failed(item, _unmade(item))

    def _said_not_made(self, tag: str) -> None:
        self.summary.jobs[tag] = f"not submitted: {_CANCELLED_BEFORE_MADE}"

    async def _cancel_at_once(self, job: _Job) -> None:
        """Cancel a job made while a cancel was asked for: polled as any, it ends
        cancelled, and its cancelled rows fail. One the provider will not cancel runs."""
        assert job.job_id is not None
        target = self.jobs.target(job.model)
        try:
            await self.jobs.run(
                self.jobs.dialect.cancel(target, job.job_id), job.model, sync=self.sync
            )
        except Error as error:
            self.summary.jobs[job.tag] = f"{job.job_id}: not cancelled: {_failure(error).message}"

    async def _find(
        self, target: Any, tag: str, since: tuple[float, bool], count: int, keys: Collection[str]
    ) -> str | None:
        """`since`: when the job was recorded, and whether that was measured (`JobRow.
        submitted_at`)."""
        assert self.book is not None
        known = _known_ids(self.book)
        at, measured = since
        found: str | None = await self.jobs.run(
            self.jobs.dialect.find(target, tag, at, count, known, keys, measured=measured),
            target.model,
            sync=self.sync,
        )
        return found

    def _pause(self, error: Error, tried: int) -> float:
        base = self.spec.backoff * 2 ** (tried - 1)
        return asked_wait(error) or min(60.0, base * (0.5 + self.random.random() / 2))

    # Jobs of earlier runs

    async def _recover(self, waiting: dict[str, list[_Item]]) -> None:
        """Take up the jobs this run's inputs are in: poll those submitted, look for those
        whose submission was cut off, and leave those a live run is working on."""
        assert self.book is not None
        book = self.book

        def recorded() -> dict[str, JobRow]:
            return {job.tag: job for job in book.jobs()}

        rows = recorded()
        found = list(waiting.items())
        while found:
            tag, items = found.pop(0)
            row = rows.get(tag)
            if row is None:
                rows = recorded()  # one recorded since
                row = rows.get(tag)
            if row is None:
                # Its record deleted from the ledger (the way to send a job's inputs again,
                # when it cannot be found or told apart): they are sent as new.
                self.book.job_not_submitted(tag, "its record was deleted from the ledger")
                found.extend(await self._claim_again(items, cancelled=False))
                rows = recorded()
                continue
            if self.book.job_alive(row):
                self._elsewhere(items, tag)
                continue
            job_id = row.job_id
            if job_id is None:
                try:
                    job_id = await self._look_for(row)
                except _NotSeenYet:
                    said = (
                        f"provider batch job {tag} may have been made (its id never reached "
                        "the ledger), and the run stopped before it showed: the same command "
                        "looks for it again"
                    )
                    self._made_or_not(tag, items, said, "stopped")
                    continue
                except Error as error:
                    said = (
                        f"provider batch job {tag} may have been made (its id never reached "
                        "the ledger), and the provider's jobs could not be listed to tell "
                        f"({_waits_too_long(error) or error.kind}): the same command looks "
                        "for it again"
                    )
                    self._made_or_not(tag, items, said, _failure(error).kind)
                    continue
                except JobLookupError as error:
                    self._made_or_not(tag, items, str(error), AMBIGUOUS_JOB)
                    continue
                if job_id is None:
                    # Never made: its inputs are sent as new, or, when a cancel was asked
                    # for it, fail as cancelled; the file its submission uploaded, if it got
                    # so far, is deleted first (its id is in the ledger alone).
                    said = await self._discard_unmade(row)
                    why = (_CANCELLED_BEFORE_MADE if row.cancel_requested else _NOT_MADE) + said
                    self.book.job_not_submitted(tag, why, never_sent=True)
                    if row.cancel_requested or said:
                        self.summary.jobs[tag] = f"not submitted: {why}"
                    found.extend(await self._claim_again(items, row.cancel_requested))
                    rows = recorded()
                    continue
                if tag not in self.unconfirmed:
                    self.book.job_submitted(tag, job_id)
            if not self.book.take_job(tag):
                self._elsewhere(items, tag)
                continue
            job = _Job(tag, job_id, [], row.model, cancel_requested=row.cancel_requested)
            job.unconfirmed = row.job_id is None and tag in self.unconfirmed
            job.uploaded = row.input_file  # deleted with its results, should no read name it
            job.requests, job.held = row.requests, frozenset(item.key for item in items)
            for item in items:
                if await self._start(item):
                    job.items.append(item)
            if not job.items:
                continue
            if self.spec.max_cost is not None:  # an earlier run's, not yet paid for
                guesses = [self._guessed_cost(item) for item in job.items]
                job.estimate = sum((g for g in guesses if isinstance(g, Decimal)), Decimal(0))
            if row.job_id is None and row.cancel_requested and not job.unconfirmed:
                # Found only now, made after the cancel looked for it: cancelled now.
                await self._cancel_at_once(job)
            self.summary.jobs[tag] = f"{job_id}: " + (
                _UNCONFIRMED if job.unconfirmed else row.state
            )
            self.summary.in_flight += len(job.items)
            job.wait = self.spec.poll_interval
            job.due = time.monotonic()
            self.open[tag] = job

    async def _discard_unmade(self, row: JobRow) -> str:
        """Delete the input file a cut-off submission uploaded (`JobRow.input_file`) for
        a job that was not made: what the job's record says of it, for its `error` (a
        failure is a warning naming the file, as `_discard`'s; "" when none was uploaded).
        One whose id was never recorded is looked for by its name (`_discard_named`)."""
        target = self.jobs.target(row.model)
        if row.input_file is None:
            return await self._discard_named(target, row)
        kept = await self._discard(target, row.tag, {"file": row.input_file})
        return kept or f"; its input file {row.input_file}, uploaded, was deleted"

    async def _discard_named(self, target: Any, row: JobRow) -> str:
        """Delete the files named after a cut-off submission's job that recorded none: a run
        killed while its input file was uploaded (the request sent, the file's id not yet
        back) left it at the provider, holding the requests' text, known by its name alone.
        Best effort, as `_discard`: a listing that fails is a warning, and the job's inputs
        are sent again all the same."""
        dialect = self.jobs.dialect
        if not isinstance(dialect, NamesUploads):
            return ""  # its jobs read no uploaded file (Anthropic's)
        at, measured = row.submitted_at()
        try:
            names: list[str] = await self.jobs.run(
                dialect.uploads(target, row.tag, at, measured=measured),
                row.model,
                sync=self.sync,
            )
        except Error as error:
            said = (
                f"the provider's files could not be listed to find the input file of job "
                f"{row.tag}, which was not made, should its upload have been cut off "
                f"({_failure(error).message}): it would hold the requests' text; look for a "
                "file named after the job at the provider and delete it"
            )
            warnings.warn(said, RuntimeWarning, stacklevel=2)
            return f"; {said}"
        deleted: list[str] = []
        kept = ""
        for name in names:
            failed = await self._discard(target, row.tag, {"file": name})
            kept += failed
            if not failed:
                deleted.append(name)
        if not deleted:
            return kept
        some = len(deleted) > 1
        return (
            f"; its input file{'s' if some else ''} {', '.join(deleted)}, uploaded but never "
            f"recorded, {'were' if some else 'was'} found by {'their' if some else 'its'} name "
            "and deleted" + kept
        )

    async def _claim_again(
        self, items: list[_Item], cancelled: bool
    ) -> list[tuple[str, list[_Item]]]:
        """Claim the inputs of a job that was never made (or whose record is gone) as new:
        sent, or failed as cancelled; returns those found in a job another run sent since."""
        meanwhile: dict[str, list[_Item]] = {}
        for item in items:
            item.cancelled = cancelled
            await self._claim(item, meanwhile)
        return list(meanwhile.items())

    def _made_or_not(self, tag: str, items: list[_Item], said: str, kind: str) -> None:
        """A job that may have been made, its id unknown, that the provider could not be
        asked about (or whose candidates could not be told apart): its inputs stay in its
        record, as a run cut off there leaves them, and the run stops; the next run looks
        for the job, and collects it or sends them."""
        self.summary.jobs[tag] = (
            "made or not, not told apart from another job: collected once it can be"
            if kind == AMBIGUOUS_JOB
            else "made or not: the next run looks for it"
        )
        for item in items:
            self._in_job(item, _Job(tag, None, [], ""), f"in provider batch job {tag}: {said}")
        if self.stopping is None:
            self.summary.refused = kind
            self.stop(said)

    async def _look_for(self, row: JobRow) -> str | None:
        """The job of a submission cut off before its id was recorded. One recorded within
        the hour may still be in the making (a run killed, or stopped, as it asked for it,
        or while it looked after a lost answer): looked for as a lost answer's job is."""
        target = self.jobs.target(row.model)
        assert self.book is not None
        keys = self.book.job_keys(row.tag)
        since = row.submitted_at()
        if time.time() - since[0] < _STILL_IN_THE_MAKING:
            return await self._look_for_made(target, row.tag, since, row.requests, keys)
        return await self._look_for_tag(target, row.tag, since, row.requests, keys)

    async def _look_for_made(
        self, target: Any, tag: str, since: tuple[float, bool], count: int, keys: Collection[str]
    ) -> str | None:
        """The job a try whose answer was lost made, or `None` when it has not shown after
        the looks `_LOOKS_AFTER_LOST` spaces; `_NotSeenYet` when the run stops first."""
        waits = iter(_LOOKS_AFTER_LOST)
        while True:
            found = await self._look_for_tag(target, tag, since, count, keys)
            wait = next(waits, None)
            if found is not None or wait is None:
                return found
            if self.stopping is not None:
                raise _NotSeenYet
            await self.limiter.sleep(wait)

    async def _look_for_tag(
        self, target: Any, tag: str, since: tuple[float, bool], count: int, keys: Collection[str]
    ) -> str | None:
        """The job made with `tag`, looked for among the provider's; a failed look is tried
        again as a poll is (a rate limit waits as asked), and raised when tries run out."""
        tried = limited = 0
        while True:
            tried += 1
            try:
                found = await self._find(target, tag, since, count, keys)
                self.unconfirmed.discard(tag)
                return found
            except JobUnconfirmed as error:
                # One job may be it, still running: read, and taken once its rows confirm it.
                self.unconfirmed.add(tag)
                return error.candidate
            except JobAmbiguity as error:
                raise JobLookupError(
                    f"provider batch job {tag} may have been submitted without its id "
                    f"reaching the ledger, and it cannot be found: {error}. To send its "
                    "inputs again instead (paid again if it was made), delete the job's row "
                    "from the ledger's table `jobs`"
                ) from None
            except Error as error:
                if isinstance(error, RateLimitedError):
                    tried -= 1  # not counted, as for a live call
                    limited += 1
                    if limited > _MAX_RATE_LIMITED:
                        raise
                if (
                    not error.retryable
                    or tried >= _LOOK_TRIES
                    or self.stopping is not None
                    or _waits_too_long(error) is not None
                ):
                    raise
                await self.limiter.sleep(self._pause(error, tried + limited))

    # Polling and collecting

    async def _poll_due(self) -> None:
        now = time.monotonic()
        due = [job for job in self.open.values() if job.due <= now]
        if not due:
            wake = min(job.due for job in self.open.values()) - now
            if self.live:
                await asyncio.wait(self.live, timeout=wake, return_when=asyncio.FIRST_COMPLETED)
            else:
                await self.limiter.sleep(wake)  # a stop ends it: the jobs are left at once
            return
        for job in due:
            await self._poll(job)

    async def _poll(self, job: _Job) -> None:
        assert self.book is not None and job.job_id is not None
        model = job.model
        target = self.jobs.target(model)
        try:
            state: JobState = await self.jobs.run(
                self.jobs.state(target, job.job_id, job.files), model, sync=self.sync
            )
        except NotFoundError:
            job.not_found += 1
            if job.not_found < _NOT_FOUND_READS:
                job.wait = next_wait(job.wait, self.spec.max_poll_interval)
                job.due = time.monotonic() + job.wait
                return
            # Deleted, or made with another key or project (which may run and pay for it):
            # its rows fail, and only `retry_failed` sends them again.
            state = JobState(
                job.job_id,
                LOST_JOB,
                ended=True,
                outcome="lost",
                error=(
                    f"the provider does not know job {job.job_id} ({job.not_found} reads "
                    "answered 404): deleted, or made with another key or project, where it "
                    "may run; retry_failed (--retry-failed) sends its inputs again"
                ),
            )
        except Error as error:
            self._unreadable(job, error)
            return
        job.not_found = 0
        job.state = state
        self._record_state(job, state)
        if not state.ended:
            job.errors = 0
            job.wait = next_wait(job.wait, self.spec.max_poll_interval)
            job.due = time.monotonic() + job.wait * (0.9 + self.random.random() / 5)
            return
        keys = [item.key for item in job.items]
        try:
            if state.outcome == "lost":
                raise NotFoundError(state.error or "")
            # At the last read a 404 is given, a results file of several gone is taken for
            # gone, and the others' rows read.
            last = job.results_not_found >= _NOT_FOUND_READS - 1
            reading = replace(state, take_what_is_left=True) if last else state
            rows: dict[str, Row] = await self.jobs.run(
                self.jobs.dialect.results(target, reading, keys, job.in_order),
                model,
                sync=self.sync,
            )
        except NotFoundError as error:
            after = self._after_not_found(job, state, keys, error)
            if after is None:
                return
            if job.unconfirmed:  # nothing of it read: not told to be the job
                self._let_go(job, "answers 404")
                return
            state, rows = after
        except Error as error:  # its results not read this time: the job stays open
            self._unreadable(job, error)
            return
        job.errors = 0
        if job.unconfirmed and not self._confirmed(job, state, rows):
            return
        del self.open[job.tag]
        self.summary.in_flight -= len(job.items)
        await self._collect(job, state, rows)

    def _confirmed(self, job: _Job, state: JobState, rows: Mapping[str, Row]) -> bool:
        """Whether the ended results of a job found unconfirmed (`JobUnconfirmed`) hold one
        of its request ids: it is the job then, its id recorded; else it is let go."""
        assert self.book is not None and job.job_id is not None
        if all(row.absent for row in rows.values()):
            self._let_go(job, "ended with none of the job's request ids in its results")
            return False
        job.unconfirmed = False
        self.unconfirmed.discard(job.tag)
        self.book.job_submitted(job.tag, job.job_id)
        self._record_state(job, state)
        return True

    def _let_go(self, job: _Job, how: str) -> None:
        """A job found unconfirmed that turned out not to be it (or could not be read to
        tell): its inputs stay in the job's record, as a cut-off submission's, and the next
        run looks for the job again (and sends them as new where none holds them)."""
        self.unconfirmed.discard(job.tag)
        del self.open[job.tag]
        self.summary.in_flight -= len(job.items)
        self.summary.jobs[job.tag] = f"made or not: {job.job_id} {how}; the next run looks for it"
        said = (
            f"in provider batch job {job.tag}: {job.job_id}, which could have been it, {how}: "
            "the same command looks for the job again, and sends its inputs as new where no "
            "job holds them"
        )
        for item in job.items:
            self._in_job(item, job, said)

    def _after_not_found(
        self, job: _Job, state: JobState, keys: list[str], error: NotFoundError
    ) -> tuple[JobState, dict[str, Row]] | None:
        """An ended job's results answered 404, or were not named though it counts answers
        (`error`, in the dialect's own words), or the job is one the provider does not
        know: `None` while they are read again later (its state read anew); else the state
        and the rows to collect. Its rows may have run, and been paid for: one 404, or
        results not yet named, may be the provider's own delay, as for the job, and results
        gone for good are not bought again unasked (no more of them counted paid than the
        job counts answered: `_paid_unknown`)."""
        if state.outcome != "lost":
            job.results_not_found += 1
            if job.results_not_found < _NOT_FOUND_READS:
                job.wait = next_wait(job.wait, self.spec.max_poll_interval)
                job.due = time.monotonic() + job.wait
                return None
            reads = job.results_not_found
            # A 404 answered, or, said by the dialect itself, no results named: no 404.
            unnamed = error.authored and error.status is None
            if state.billed == 0:
                # The provider counts none of its requests answered (a batch cancelled
                # before any ran): none was paid for, and its rows are taken as the job's
                # unanswered ones are (cancelled, expired, missing), not as lost.
                # (Results not named are read again only where it counts answers.)
                kind = unrun_kind(state.outcome)
                note = (
                    f"job {job.job_id}: the provider answered 404 for its results ({reads} "
                    f"reads) after it ended {state.outcome}, counting none of its requests "
                    "answered: this one was not run, nor paid"
                )
                words = state.error_words if kind == RowKind.JOB_FAILED else None
                return state, {key: Row(key, kind, note=note, words=words) for key in keys}
            why = (
                f"{error.message} ({reads} reads)"
                if unnamed
                else f"the provider answered 404 for the results of job {job.job_id} "
                f"({reads} reads) after it ended {state.outcome}"
            )
            state = replace(
                state,
                outcome="lost",
                error=(
                    f"{why}: its requests may have run and been paid for; retry_failed "
                    "(--retry-failed) sends its inputs again"
                ),
            )
            self._record_state(job, state)
        note = f"job {job.job_id}: {state.error}"
        return state, {key: Row(key, RowKind.MISSING, note=note) for key in keys}

    def _record_state(self, job: _Job, state: JobState) -> None:
        """What the provider says of the job, in the ledger and the summary."""
        assert self.book is not None and job.job_id is not None
        if job.unconfirmed:  # not the job's before its results confirm it: not recorded
            self.summary.jobs[job.tag] = f"{_job_line(job.job_id, state)}, {_UNCONFIRMED}"
            return
        self.book.job_state(
            job.tag,
            state=state.status,
            outcome=state.outcome,
            counts=dict(state.counts),
            error=state.error,
        )
        self.summary.jobs[job.tag] = _job_line(job.job_id, state)

    def _unreadable(self, job: _Job, error: Error) -> None:
        """A job's state or results not read: read again later while the error may pass,
        up to `_MAX_POLL_ERRORS` in a row; then (or at once, for a refused key) the run
        stops, the job left at the provider and in the ledger for the next run."""
        job.errors += 1
        too_long = _waits_too_long(error)
        if error.retryable and job.errors < _MAX_POLL_ERRORS and too_long is None:
            job.due = time.monotonic() + self._pause(error, job.errors)
            return
        failure = _failure(error)
        # An id not of the provider's form (a ledger's) is said by the job's tag: its error
        # shows it escaped.
        named = job.tag if isinstance(error, UnsafeIdError) else job.job_id
        self.summary.jobs[job.tag] = f"{named}: not read: {failure.kind}"
        if self.stopping is None:
            self.summary.refused = failure.kind
            self.stop(
                too_long
                or _stops(error, job.errors)
                or f"job {named} could not be read: {failure.message}"
            )
        if too_long is not None:  # not read again at the stop, as others are
            self._leave_job(job)

    async def _collect(self, job: _Job, state: JobState, rows: dict[str, Row]) -> None:
        assert self.book is not None
        # A cancel asked for while this run polled (`allama batch cancel` in another
        # terminal): its cancelled rows fail, rather than being sent again.
        job.cancel_requested = job.cancel_requested or self.book.cancel_requested(job.tag)
        rows, unknown = _paid_unknown(state, rows, [item.key for item in job.items])
        unkept = self.summary.unkept
        # Together, so that the ledger writes of the rows share their commits.
        await asyncio.gather(
            *(
                self._take(item, rows[item.key], job, state, item.key in unknown)
                for item in job.items
            )
        )
        line = _job_line(job.job_id or "", state)
        left = await self._left_in_job(job)
        if left:
            # Its results hold the answers to inputs this run did not read (a run over part
            # of them, or one whose reading failed), paid for: the job stays uncollected and
            # its files at the provider, for the run that reads those inputs to collect.
            self.summary.jobs[job.tag] = (
                f"{line}, {left} of its {job.requests} rows left in it for a run that reads "
                "their inputs, the others collected"
            )
            return
        self.book.job_collected(job.tag)
        line += ", collected"
        self.summary.jobs[job.tag] = line
        # Its files are deleted only once the ledger holds what its rows answered (each
        # row's write awaited its commit, and none failed), in this run's name: a run cut
        # off before leaves them for the next run to read. A job the provider does not
        # know (or whose results are gone) may run elsewhere: its files are left.
        if (
            state.outcome != "lost"
            and self.summary.unkept == unkept
            and self._collected_here(job.tag)
        ):
            self.summary.jobs[job.tag] = line + await self._delete_files(job)

    async def _left_in_job(self, job: _Job) -> int:
        """How many of the job's inputs this run did not read are still waiting on it in
        the ledger: their rows are in its results alone, so it is not collected (nor its
        files deleted) before a run that reads them keeps them. 0 at once where this run
        read them all (a job it submitted, or took up whole)."""
        assert self.book is not None and self.ledger is not None
        if len(job.held) >= job.requests:
            return 0
        others = sorted(self.book.job_keys(job.tag) - job.held)
        rows = await asyncio.gather(*(self.ledger.kept(key) for key in others))
        return sum(
            row is not None and row.status == Status.SUBMITTED and row.job == job.tag
            for row in rows
        )

    def _collected_here(self, tag: str) -> bool:
        """Whether the ledger holds job `tag` collected by this run (not taken over by
        another run, which reads its results itself)."""
        assert self.book is not None
        run_id = self.book.run_id
        return any(
            row.tag == tag
            and row.state == JobPhase.COLLECTED
            and (row.collector or row.run_id) == run_id
            for row in self.book.jobs()
        )

    async def _delete_files(self, job: _Job) -> str:
        """Delete at the provider the files of a job whose rows the ledger keeps: its
        input file holds the requests' text and its results the answers, which the
        provider keeps until deleted (OpenAI). Best effort, as for a job not made
        (`_discard`): a failure is a warning naming the file, returned for the job's line
        of the summary too (else "")."""
        files = list(job.files)
        if job.uploaded is not None and all(file.name != job.uploaded for file in files):
            files.insert(0, JobFile(job.uploaded, "input file"))
        assert self.book is not None
        target = self.jobs.target(job.model)
        said = ""
        for file in files:
            try:
                await self.jobs.run(
                    self.jobs.delete_file(target, file.name), job.model, sync=self.sync
                )
            except NotFoundError:
                pass  # gone already
            except Error as error:
                words = (
                    f"the {file.what} {_file_shown(file.name, error)} of job {job.job_id}, "
                    f"whose results are kept, could not be deleted ({_failure(error).message}): "
                    f"it holds {file.holds}; delete it at the provider"
                )
                warnings.warn(words, RuntimeWarning, stacklevel=2)
                said += f"; {words}"
                continue
            if file.what == "input file":  # recorded for the job: `status` names it no more
                self.book.job_file_deleted(job.tag, file.name)
        return said

    async def _take(
        self, item: _Item, row: Row, job: _Job, state: JobState, paid_unknown: bool
    ) -> None:
        """One row of an ended job: the extraction takes in its answer, or it is sent again.
        `paid_unknown`: a row with no answer that may have run, and been paid for, at a cost
        nothing says (`_paid_unknown`)."""
        if item.pending is None or item.steps is None:
            return
        if item.entry is None:
            item.entry, item.warnings = self.jobs.entry(item.key, item.pending)
        row = _of_job(row, job.job_id)
        if state.queue_full:
            # A limit on the work queued, not the inputs' failure: none ran, none is paid;
            # pending, for the same command once the jobs in progress have ended.
            unanswered = RowUnanswered(row)
            if self.stopping is None:
                self.summary.refused = self.summary.refused or _failure(unanswered).kind
                self.stop(
                    f"the provider's queue of batch work for {job.model} is full ({state.error}):"
                    f" job {job.job_id} ran none of its requests; run the same command again "
                    "once the batches in progress have ended"
                )
            await self._set_aside_item(item, unanswered)
            return
        # It may have run, its result gone: paid, at a cost nothing says (a budget stops on
        # it).
        unknown: list[JsonValue] = (
            [{"provider": self.jobs.provider.name, "model": job.model, "usage": {}}]
            if paid_unknown
            else []
        )
        if row.kind in _UNANSWERED:
            unanswered = RowUnanswered(row)
            item.paid.extend(unknown)
            if (
                # Cancelled by someone (`allama batch cancel`, or at the provider's console):
                # not sent again, as that would spend what the cancel meant to save.
                row.kind == RowKind.CANCELED
                or row.kind == RowKind.JOB_FAILED
                or row.kind == RowKind.LOST
                or state.outcome == "lost"  # a job the provider does not know: it may run
                or state.outcome == "failed"
            ):
                await self._failed(item, unanswered)
                return
            # Sent again, what it paid counts now (unknown, a budget stops the run).
            self._count_pass(item, None, unknown)
            if not await self._again(item, unanswered):
                await self._failed(item, unanswered)
            return
        earlier = list(item.paid)  # handed over with the answer, to be taken out again
        # A server error's row no result named, of a job that counts it answered: carried,
        # as what a failed row reports paying is, and counted new below.
        item.paid.extend(unknown)
        answer = self._answer(item, row, item.warnings, job.job_id or "")
        if isinstance(answer, Error):
            stops = _stops(answer, 1, self.spec.template is not None)
            if stops is not None:
                # A row refused for the key or the account (a quota spent, a key revoked):
                # every input meets it, so it is none's own failure; pending, and the run
                # stops, as a live run does.
                await self._set_aside_item(item, answer, stops=stops)
                return
        if (
            isinstance(answer, Error)
            and answer.retryable
            and not isinstance(answer, ExtractionError)
        ):
            # Carried by the item to the extraction (with its next answer, or its end).
            item.paid = _paid_taken_out(answer)
            self._count_pass(item, None, _new_entries(item.paid, earlier))
            if not await self._again(item, answer):
                await self._failed(item, answer)
            return
        item.log.append(
            {"status": row.status or 200, "body": (row.body or b"").decode(), "job": job.job_id}
        )
        if not isinstance(answer, Error) and answer.usage is not None:
            self.answered += 1
            self.answered_tokens += answer.usage.output_tokens or 0
        await self._feed(item, answer)

    async def _go_on(self, item: _Item, answer: ChatResponse | Error) -> bool:
        """Hand `answer` to the extraction, its next request the item's pending one; `False`
        when the extraction ended instead (done, or failed), its end recorded."""
        try:
            item.pending = self._take_in(item, answer)
        except StopIteration as done:
            await self._done(item, done.value)
            return False
        except Exception as error:
            await self._failed(item, error)
            return False
        return True

    async def _feed(self, item: _Item, answer: ChatResponse | Error, *, route: bool = True) -> bool:
        """Hand an answer to the extraction: it ends, or asks again (a follow-up), counted
        as an attempt with the answers so far kept. `True` when the follow-up is to be sent:
        routed, or, without `route`, by the caller (a live follow-up's next pass)."""
        if not await self._go_on(item, answer):
            return False
        self._count_pass(item, answer)
        if self.stopping is not None:
            await self._follow_up_not_sent(item)
            return False
        assert self.ledger is not None
        attempts = await self.ledger.resend(item.key, item.log, _paid_so_far(item))
        if attempts == 0:
            self._taken(item)
            return False
        item.attempts = attempts
        item.entry, item.warnings = None, []
        if route:
            self._route(item, follow_up=True)
        return True

    def _count_pass(
        self,
        item: _Item,
        answer: ChatResponse | Error | None,
        paid: Sequence[JsonValue] = (),
    ) -> None:
        """Under a budget, what a pass an input goes on from paid (an answer its extraction
        asks again after, a row or a live call that failed and is sent again) counts now,
        as a live run's attempts do, not when the input ends: follow-ups and jobs would be
        sent past the budget unseen. What earlier failed rows paid, which an answer carries
        to the extraction, was counted as they failed."""
        if self.spec.max_cost is None:
            return
        record = _paid_record(paid)
        if answer is not None and not isinstance(answer, Error):  # (an error ends it)
            record.record_pass(answer.model_copy(update={"provider_data": {}}))
        if _paid_any([record]):
            self._count_attempt(item.key, item.label, record)

    def _taken(self, item: _Item) -> None:
        """An input another run took over (the job's rows with it), not sent again here:
        that run sends it, and this one's result keeps what its rows paid."""
        _, record = self._ended(item, ServerError("taken over by another run"))
        result = self._taken_over(
            item.index, item.key, item.label, record, item.attempts, item.began, item.spent
        )
        self._duplicates(item, result)

    async def _again(self, item: _Item, why: BaseException) -> bool:
        """Send the same request again (a row the job did not answer, or a server error),
        if attempts are left; `False` when they are not. After a stop it is left pending
        instead, with what it met, for the next run (as a live run's input is)."""
        if item.resent + 1 >= self.spec.max_attempts:
            return False
        if self.stopping is not None:
            await self._set_aside_item(item, why)
            return True
        item.resent += 1
        assert self.ledger is not None
        attempts = await self.ledger.resend(item.key, item.log, _paid_so_far(item))
        if attempts == 0:
            self._taken(item)
            return True
        item.attempts = attempts
        item.entry, item.warnings = None, []
        self._route(item, follow_up=True)
        return True

    # Live follow-ups

    async def _live_traced(self, item: _Item) -> None:
        """`_live`, under its input's span (made as the task runs: one cancelled before it
        began leaves no call unmade behind)."""
        await self.in_input_span(item.index, self._live(item))

    async def _live(self, item: _Item) -> None:
        """Send the item's pending passes live, each tried again on errors that may pass,
        and hand what each met to the extraction as a job's row is (`_feed`): logged, so
        that a run that resumes the input takes it in again rather than pay for it again."""
        assert item.pending is not None
        limiter = self.limiter
        self.summary.in_flight += 1
        tried = 0
        counted = True  # an attempt is counted for the pass about to be sent (its route)
        last: Error | None = None
        try:
            while True:
                if counted:  # given back at the run's end (a close) unless sent first
                    self.unsent.add(item.key)
                # Each pass's own request (a repair's holds more), settled by its usage as
                # a live run's calls are: the limit per minute counts what was used.
                # A slot of `concurrency` for the send, taken before the stop is looked
                # at: follow-ups waiting for one are not sent past a stop meanwhile.
                await self.live_slots.acquire()
                try:
                    sent_at, estimate = await turn_for(limiter, item.pending, self.provider)
                except BaseException:
                    self.live_slots.release()
                    raise
                if self.stopping is not None:
                    # Stopped before this pass was sent (a budget reached meanwhile): the
                    # attempt counted for it is given back, and the input left pending.
                    self.live_slots.release()
                    assert self.ledger is not None
                    if counted:
                        self.unsent.discard(item.key)
                        item.attempts = await self.ledger.unsent_attempt(item.key)
                    if last is not None:
                        await self._set_aside_item(item, last)
                    else:
                        await self._follow_up_not_sent(item)
                    return
                tried += 1
                counted = False
                self.unsent.discard(item.key)  # sent now: its attempt stands
                sent = time.monotonic()
                try:
                    try:
                        # Its call is spanned as the run's extractor's calls are.
                        with _tracing.calls_scope(self.spec.extractor._tracing):
                            response = await self.send(item.pending)
                    finally:
                        self.live_slots.release()
                    self._answered()
                    limiter.served(sent_at)
                    usage = response.usage
                    if limiter.counts_tokens and usage is not None:
                        limiter.spent(estimate, usage.total_tokens, sent_at, usage.output_tokens)
                    answer: ChatResponse | Error = response
                except Error as error:
                    if _answered_by_any(error):
                        self._answered()
                    if limiter.counts_tokens and _refused_unread(error):
                        limiter.spent(estimate, 0, sent_at)
                    too_long = _waits_too_long(error)
                    if too_long is not None:
                        # Not waited for: pending for the next run, which this one stops, as
                        # a live run's input is.
                        if isinstance(error, RateLimitedError):
                            limiter.rate_limited += 1  # met, though not waited for
                        await self._set_aside_item(item, error, stops=too_long)
                        return
                    if error.retryable and tried < self.spec.max_attempts:
                        paid = list(paid_for(error))
                        self._count_pass(item, None, paid)  # under a budget, counted now
                        if self.stopping is None:
                            if isinstance(error, RateLimitedError):
                                pause = self.limiter.slow_down(asked_wait(error), sent_at)
                            else:
                                pause = self._pause(error, tried)
                            await self.limiter.sleep(
                                pause, counted=isinstance(error, RateLimitedError)
                            )
                        if self.stopping is not None:
                            # Stopped before its try again: pending for the next run, with
                            # the error it met, as a live run's input is (not failed), and
                            # what the tries before it paid.
                            await self._set_aside_item(item, error)
                            return
                        # Carried by the item to the extraction, with its next answer or
                        # its end.
                        item.paid.extend(_paid_taken_out(error))
                        assert self.ledger is not None
                        attempts = await self.ledger.again(item.key)
                        if attempts == 0:  # taken over by another run: not sent from here
                            _, record = self._ended(item, error)
                            taken = self._taken_over(
                                item.index,
                                item.key,
                                item.label,
                                record,
                                item.attempts,
                                item.began,
                                item.spent,
                            )
                            self._duplicates(item, taken)
                            return
                        item.attempts = attempts
                        counted, last = True, error
                        continue
                    # Nothing answered since it was sent: the provider out of reach, not
                    # this input's trouble alone.
                    unanswered = self.answered_at < sent
                    stops = _stops(error, tried, self.spec.template is not None, unanswered)
                    if stops is not None:
                        # Every input would meet it (a refused key or account, an outage):
                        # none's own failure; pending, and the run stops, as a live run does.
                        await self._set_aside_item(item, error, stops=stops)
                        return
                    answer = error
                answer = _with_paid(item, answer)
                item.log.append(_live_entry(answer))
                if not await self._feed(item, answer, route=False):
                    return
                tried, counted, last = 0, True, None  # its next pass, an attempt of its own
        except Exception as error:  # the caller's own code
            await self._failed(item, error)
        except asyncio.CancelledError:
            if _cancelling():
                raise
            await self._failed(item, CallCancelled())  # the call's own, not the run's
        finally:
            self.summary.in_flight -= 1

    # Endings

    async def _done(self, item: _Item, extracted: Extracted[Any]) -> None:
        result = await self._record_success(
            item.index, item.key, item.label, extracted, item.attempts, item.began, item.spent
        )
        self._duplicates(item, result)

    def _ended(
        self, item: _Item, error: BaseException
    ) -> tuple[BaseException, ExtractionMetadata | None]:
        """End the item's extraction with `error`: the error as the engine raises it back,
        with the record of the passes it took in (paid for) attached. An error that is no
        provider's (a row the job did not run, a stop) is sent as a server error, which no
        mode falls back on, for the record, and kept as it is."""
        steps, item.steps = item.steps, None
        if isinstance(error, Error) and item.paid:
            # What its failed attempts paid, in its record (and in no other input's: one
            # error may end every input of a job that was not made).
            paid, item.paid = list(item.paid), []
            error = paid_ahead(_own_copy(error), paid)
        if steps is None:
            return error, ExtractionMetadata.from_error(error)
        try:
            steps.send(
                error if isinstance(error, Error) else _with_paid(item, ServerError(text_of(error)))
            )
        except Error as raised:
            return (raised if isinstance(error, Error) else error), ExtractionMetadata.from_error(
                raised
            )
        except Exception:  # ended already (the engine raised), or the caller's own code
            pass
        finally:
            steps.close()
        return error, ExtractionMetadata.from_error(error)

    async def _set_aside_item(
        self,
        item: _Item,
        error: BaseException,
        failure: BatchFailure | None = None,
        *,
        stops: str | None = None,
    ) -> None:
        error, record = self._ended(item, error)
        result = await self._set_aside(
            item.index,
            item.key,
            item.label,
            error,
            record,
            item.attempts,
            item.began,
            item.spent,
            stops,
            failure=failure,
            log=item.log,
        )
        self._duplicates(item, result)

    async def _follow_up_not_sent(self, item: _Item) -> None:
        """Another pass asked for after the stop: not sent. Pending for the next run, which
        takes the answers in again, with what they cost here."""
        failure = BatchFailure(FOLLOW_UP_NOT_SENT, _FOLLOW_UP_NOT_SENT, True)
        await self._set_aside_item(item, FollowUpNotSent(_FOLLOW_UP_NOT_SENT), failure)

    async def _failed(self, item: _Item, error: BaseException) -> None:
        error, record = self._ended(item, error)
        result = await self._record_failure(
            item.index, item.key, item.label, error, record, item.attempts, item.began, item.spent
        )
        self._duplicates(item, result)

    async def _leave(self, item: _Item) -> None:
        """An input not sent because the run stopped: given back, pending. One whose
        answers the extraction took in (a follow-up) is left pending with what it paid."""
        if (item.log or item.paid) and item.steps is not None:
            # Its attempt was counted when it was claimed or routed to a job; not sent, it
            # is given back. (One a failed row paid for is left with what it paid too.)
            assert self.ledger is not None
            item.attempts = await self.ledger.unsent_attempt(item.key)
            await self._follow_up_not_sent(item)
            return
        assert self.ledger is not None
        await self.ledger.release(item.key)
        result = await self._unsent(item.index, item.key, item.label)
        self._finish(result)
        self._duplicates(item, result)

    def _in_job(self, item: _Item, job: _Job, said: str | None = None) -> None:
        failure = BatchFailure(
            IN_PROVIDER_JOB,
            said
            or f"in provider batch job {job.job_id}: the same command collects it when it ends",
        )
        result: BatchResult[Any] = BatchResult(  # its attempts: the job's send among them
            item.index, item.key, item.label, None, failure, None, item.attempts, 0.0
        )
        self._finish(result)
        self._duplicates(item, result)

    def _elsewhere(self, items: list[_Item], tag: str) -> None:
        for item in items:
            failure = BatchFailure(
                IN_FLIGHT_ELSEWHERE, f"in provider batch job {tag}, which another run holds"
            )
            result: BatchResult[Any] = BatchResult(
                item.index, item.key, item.label, None, failure, None, 0, 0.0
            )
            self._finish(result)
            self._duplicates(item, result)

    def _duplicates(self, item: _Item, result: BatchResult[Any]) -> None:
        item.result = result
        for index, label in item.duplicates:
            self._finish(_duplicate(index, label, result, self.again.get(item.key)))
        item.duplicates.clear()

    def _copies_to_come(self, key: str) -> bool:
        # A copy may come while the inputs are read (the run keeps every item's result);
        # after, those that came are the item's.
        if not self.spec.dump_consumes:
            return False
        item = self.items.get(key)
        return not self.read_all or (item is not None and bool(item.duplicates))


POLL_GROWTH = 1.5


def next_wait(wait: float, ceiling: float) -> float:
    """The wait before a job that has not ended is read again: half as long again as the
    last, up to `ceiling` (each wait is then spread by a tenth either way, so that the jobs
    of many runs are not read in step)."""
    return min(ceiling, max(wait, 0.001) * POLL_GROWTH)


def _given_to_no_one(result: BatchResult[Any]) -> None:
    """Where the results of a closed run go: counted in its summary, read by no one."""


async def _no_call(request: ChatRequest) -> Any:
    raise AssertionError("a provider-batch run makes no extraction calls of its own")


def _file_shown(name: str, error: Error) -> str:
    """A file's id as a warning of its deletion shows it: escaped and shortened where it
    was refused for not being of the provider's form (it may be anyone's text)."""
    return error.shown if isinstance(error, UnsafeIdError) else name


def _job_line(job_id: str, state: JobState) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in state.counts.items())
    shown = f"{job_id}: {state.status}" + (f" ({counts})" if counts else "")
    if state.ended and state.outcome:
        shown += f", {state.outcome}"
    if state.error:
        shown += f", {state.error}"
    return shown


class JobLookupError(Exception):
    """A job whose submission was cut off cannot be found, nor ruled out: sending its
    inputs again could pay for them twice, so the run stops and says so (its inputs left in
    the job's record, `AMBIGUOUS_JOB` the stop's kind)."""


AMBIGUOUS_JOB = "ambiguous_job"
"""The kind of stop (`BatchSummary.refused`) of a run that could not tell which of the
provider's jobs a cut-off submission made."""


def _known_ids(book: Ledger) -> frozenset[str]:
    """The provider's ids of the jobs the ledger knows: none of them is a job whose id a
    cut-off submission did not record."""
    return frozenset(row.job_id for row in book.jobs() if row.job_id is not None)


class EndpointNotConfirmedError(Error):
    """A ledger's job whose record names an endpoint the key from the environment would
    not go to otherwise: neither its preset's own nor one the preset's environment variable
    names, nor one the caller confirmed (`base_url=`, `--base-url`). A ledger is a file
    anyone may have written (a colleague's, a repository's): its job is not asked about, the
    key not sent to a host it names."""

    def __init__(self, message: str) -> None:
        super().__init__(message, origin=MessageOrigin.AUTHORED)


def _shown_origin(found: tuple[str, bytes, int | None]) -> str:
    """An origin as a URL, with no user, password, path or query (they may be secrets)."""
    scheme, host, port = found
    name = host.decode("ascii", "replace")
    if ":" in name:  # IPv6
        name = f"[{name}]"
    return f"{scheme}://{name}" + (f":{port}" if port is not None else "")


def _endpoint_refused(row: JobRow, confirmed: str | None) -> EndpointNotConfirmedError | None:
    """Why job `row`'s recorded base URL is not asked with the key from the environment
    (`None` when it may be): its origin is not its preset's own (`https://api.openai.com`),
    nor that of the URL its preset's environment variable names (`OPENAI_BASE_URL`), nor
    that of `confirmed`, the base URL the caller gives now."""
    from allama.adapters._http import origin
    from allama.providers._hosts import host_url
    from allama.providers._http import _env
    from allama.providers._registry import preset_named

    preset = preset_named(row.provider)
    there = origin(row.base_url)
    allowed: list[str] = []
    if preset.base_url is not None:
        allowed.append(preset.base_url)
    from_env = _env(preset.base_url_env)
    if from_env is not None and preset.host_env_port is not None:
        from_env = host_url(from_env, preset.host_env_port)
    for url in (from_env, confirmed):
        if url is not None:
            allowed.append(url)
    if there is not None and any(origin(url) == there for url in allowed):
        return None
    named: list[str] = []
    own = origin(preset.base_url) if preset.base_url is not None else None
    if own is not None:
        named.append(f"{preset.name}'s own ({_shown_origin(own)})")
    if preset.base_url_env:
        named.append(f"one {preset.base_url_env} names")
    said = " nor ".join(named)
    if there is None:
        return EndpointNotConfirmedError(
            "the ledger records a base URL for this job that does not read as a URL: it is "
            "not asked with the key from the environment"
        )
    shown = _shown_origin(there)
    return EndpointNotConfirmedError(
        f"the ledger sends this job's calls to {shown}, not to {said or 'a known endpoint'}: "
        "the key from the environment is not sent to a host a ledger names (anyone may "
        f"have written it); if its runs were yours, confirm it with --base-url {shown} "
        "(base_url= from Python)"
    )


def job_provider(row: JobRow, provider: Any = None, *, base_url: str | None = None) -> ProviderJobs:
    """The jobs API a ledger's job was submitted to: `provider` when given, else one built
    from the job's record (its preset, base URL and API; the key from the environment).
    Built so, the key goes only where the caller would send it: the record's base URL is
    taken where its origin is its preset's own, or that of its environment variable's
    URL, or of `base_url`, an endpoint the caller confirms now; else
    `EndpointNotConfirmedError`."""
    if provider is None:
        from allama.providers import provider as make

        options: dict[str, Any] = {}
        if row.base_url:
            refused = _endpoint_refused(row, base_url)
            if refused is not None:
                raise refused
            options["base_url"] = row.base_url
        if row.api:
            options["api"] = row.api
        provider = make(row.provider, **options)
    return provider_jobs(provider)


def open_jobs(book: Ledger) -> list[JobRow]:
    """The ledger's jobs that have been submitted and not yet seen ending."""
    return [row for row in book.jobs() if _is_open(row)]


def _is_open(row: JobRow) -> bool:
    return (
        row.job_id is not None
        and row.outcome is None
        and row.state not in (JobPhase.COLLECTED, JobPhase.NOT_SUBMITTED)
    )


async def poll_job(row: JobRow, provider: Any = None, *, base_url: str | None = None) -> JobState:
    """A ledger's job as the provider reports it now (nothing written). `base_url`: an
    endpoint the caller confirms, as for `cancel_jobs`."""
    assert row.job_id is not None
    check_url("base_url", base_url)
    jobs = job_provider(row, provider, base_url=base_url)
    steps = jobs.dialect.state(jobs.target(row.model), row.job_id)
    state: JobState = await jobs.run(steps, row.model, sync=True)
    return state


async def cancel_jobs(
    ledger: str,
    provider: Any = None,
    *,
    refused: list[str] | None = None,
    unmade: list[str] | None = None,
    timeout: float | None = None,
    base_url: str | None = None,
) -> list[str]:
    """Ask the provider to cancel every job of `ledger` that has not ended, and record it,
    so that a run fails their cancelled rows instead of sending them again (the record
    comes first: a run polling the job meanwhile sees it). A job whose submission was cut
    off before its id was recorded is looked for at the provider by its tag, as a run
    does. Returns the provider ids of the jobs asked; the results of rows that ran before
    the cancel are collected by the next run as usual. A job the provider will not cancel
    (it ended meanwhile), or cannot be told apart, does not stop the others: `refused`
    gets a line for it; without `refused`, once the others are asked, one
    `JobsNotCancelledError` names every such job (its `asked` the ids asked, as returned
    otherwise). A job being submitted (or cut off) and not found, its cancel recorded all
    the same, is made by no run, and a run that finds it made cancels it; its inputs fail
    as cancelled; `unmade` gets its tag. A cancel the provider surely did not make (it
    refused, or answered that the job ended) is taken back from the ledger. `timeout`: the
    longest each job's look and cancel take (`None`: the transport's own timeouts).
    Without `provider`, each job's is made from its record with the key from the
    environment, which goes only to its preset's own endpoint, one its environment variable
    names (`OPENAI_BASE_URL`), or `base_url`'s host, an endpoint the caller confirms: a job
    whose record names another (a ledger someone else wrote) is not asked, and said so."""
    check_url("base_url", base_url)
    book = Ledger(ledger)
    asked: list[str] = []
    lines: list[str] = []
    errors: list[Error] = []
    try:
        for row in book.jobs():
            submitting = row.state == JobPhase.SUBMITTING and row.job_id is None
            if not (submitting or _is_open(row)):
                continue
            job_id = row.job_id
            try:
                jobs = job_provider(row, provider, base_url=base_url)
                target = jobs.target(row.model)
            except EndpointNotConfirmedError as error:  # said by its tag, as the ledger's
                lines.append(f"{row.tag}: {error.message}")
                errors.append(error)
                continue
            except Error as error:  # no key for this job's provider, say: the others go on
                lines.append(f"{job_id or row.tag}: {_failure(error).message}")
                errors.append(error)
                continue
            except (ValueError, TypeError) as error:  # a setting its provider refuses
                made = InvalidRequestError(f"its provider cannot be made: {error}")
                lines.append(f"{job_id or row.tag}: {made}")
                errors.append(made.mark_authored())
                continue
            try:
                # Recorded first: a run polling it sees it; a run making it cancels it once
                # made, or makes none.
                book.request_cancel(row.tag)
                if job_id is None:
                    at, measured = row.submitted_at()
                    steps = jobs.dialect.find(
                        target,
                        row.tag,
                        at,
                        row.requests,
                        _known_ids(book),
                        book.job_keys(row.tag),
                        measured=measured,
                    )
                    job_id = await _within(jobs.run(steps, row.model, sync=True), timeout)
                    if job_id is None:  # not made (yet): no run makes it now
                        if unmade is not None:
                            unmade.append(row.tag)
                        continue
                cancel = jobs.run(jobs.dialect.cancel(target, job_id), row.model, sync=True)
                await _within(cancel, timeout)
            except JobAmbiguity as error:
                # Made or not, it cannot be found to be cancelled: said so, and the cancel
                # taken back (a run telling it apart later would fail inputs it may have
                # answered, and paid for, as cancelled).
                if not row.cancel_requested:
                    book.withdraw_cancel(row.tag)
                lines.append(f"{row.tag}: its job cannot be told apart ({error})")
                errors.append(error)
                continue
            except Error as error:
                # (A look that failed is no job found: it may run on at the provider, said
                # below, its cancel recorded all the same.)
                if job_id is not None and not _may_have_made(error) and not row.cancel_requested:
                    # Refused, or the job ended: no cancel was made, none is recorded.
                    book.withdraw_cancel(row.tag)
                # The provider's words may quote the requests: withheld, as a failure's are.
                said = _failure(error).message
                if job_id is None:
                    said = (
                        f"its job could not be looked for ({said}); its cancel is recorded: "
                        "no run makes it, and one that finds it made cancels it"
                    )
                # An id not of the provider's form is said by the job's tag (its own words
                # show it escaped), not as the ledger holds it.
                named = row.tag if isinstance(error, UnsafeIdError) else job_id or row.tag
                lines.append(f"{named}: {said}")
                errors.append(error)
                continue
            asked.append(job_id)
    finally:
        book.close()
    if refused is not None:
        refused.extend(lines)
    elif errors:
        raise _not_cancelled(ledger, asked, lines, errors) from errors[0]
    return asked


_T = TypeVar("_T")


async def _within(work: Awaitable[_T], timeout: float | None) -> _T:
    """`work`, given up after `timeout` seconds (a provider that takes the connection and
    never answers) as a timeout of allama's."""
    if timeout is None:
        return await work
    try:
        return await asyncio.wait_for(work, timeout)
    except TimeoutError:
        raise RequestTimeoutError(f"no answer in {timeout:g} s").mark_authored() from None


class JobsNotCancelledError(Error):
    """Jobs of a ledger `cancel_jobs` could not cancel (one that ended meanwhile, one not
    told apart from another's, a provider that failed), raised once the others were asked:
    `refused` names each with why, `asked` holds the ids of those asked (what it returns
    otherwise), `errors` what each met. Retryable when one of those is."""

    kind = "not_cancelled"

    def __init__(
        self,
        message: str,
        *,
        asked: Sequence[str] = (),
        refused: Sequence[str] = (),
        errors: Sequence[Error] = (),
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("origin", MessageOrigin.AUTHORED)
        super().__init__(message, **kwargs)
        self.asked = list(asked)
        self.refused = list(refused)
        self.errors = list(errors)


def _not_cancelled(
    ledger: str, asked: list[str], refused: list[str], errors: list[Error]
) -> JobsNotCancelledError:
    """The one error naming every job `cancel_jobs` could not cancel."""
    count = len(refused)
    said = f"{count} provider batch job{'s' if count != 1 else ''} of {ledger} not cancelled: "
    said += "; ".join(refused)
    if asked:
        said += f"; cancel requested for the others: {', '.join(asked)}"
    error = JobsNotCancelledError(
        said,
        asked=asked,
        refused=refused,
        errors=errors,
        retryable=any(error.retryable for error in errors),
    )
    providers = {error.provider for error in errors if error.provider}
    return error.with_provider(providers.pop()) if len(providers) == 1 else error


def _paid_unknown(
    state: JobState, rows: dict[str, Row], keys: Sequence[str]
) -> tuple[dict[str, Row], frozenset[str]]:
    """The rows of an ended job to take, and the keys of those counted paid at a cost
    unknown: rows whose results are gone (`LOST`, or every row of a job whose results
    answer 404), which may have run; then rows no line of its results named (one cut
    short, an answer without its key; those of a Gemini job that failed on the provider's
    side, each a server error's), which are sent again. No more of them than the job
    counts answered (`JobState.billed`) and unread (less the answers in hand) are: the
    others were not run, or failed unbilled, though none can be told from those paid, so
    they fail alike. Where it counts none answered, none was paid: rows gone are taken as
    its unanswered ones are (cancelled, expired, missing), not as lost."""
    gone = [
        key
        for key in keys
        if rows[key].kind == RowKind.LOST
        or (state.outcome == "lost" and state.status != LOST_JOB and rows[key].kind in _UNANSWERED)
    ]
    if state.billed is None:
        return rows, frozenset(gone)
    answered = sum(row.kind == RowKind.RESPONSE for row in rows.values())
    room = max(0, state.billed - answered)
    gone_keys = frozenset(gone)
    unread = [
        key
        for key in keys
        if rows[key].absent
        and (rows[key].kind in _UNANSWERED or rows[key].kind == RowKind.ERROR)
        and key not in gone_keys
    ]
    if not gone:
        return rows, frozenset(unread[:room])
    if room == 0 and state.outcome != "lost":
        kind = unrun_kind(state.outcome)
        rows = dict(rows)
        for key in gone:
            lost = rows[key]
            note = (
                f"the job ended {state.outcome}, and the file of its results that held this "
                "row answers 404; it counts no request answered but those read: this one "
                "failed, or was not run, unbilled"
            )
            words = state.error_words if kind == RowKind.JOB_FAILED else lost.words
            rows[key] = replace(lost, kind=kind, note=note, words=words)
        return rows, frozenset()
    counted = gone[:room]
    return rows, frozenset(counted + unread[: room - len(counted)])


def _of_job(row: Row, job_id: str | None) -> Row:
    """`row` with a note that names its job, for the failure of a row the job did not
    answer (cancelled, expired, missing): the provider's code alone (`batch_cancelled`)
    does not say which of a run's jobs it was."""
    if job_id is None or row.kind not in _UNANSWERED:
        return row
    note = row.note or row.kind
    if job_id in note:
        return row
    if note.startswith("the job "):  # "the job ended expired ..." -> "job X ended expired ..."
        return replace(row, note=f"job {job_id} {note.removeprefix('the job ')}")
    return replace(row, note=f"job {job_id}: {note}")


def _paid_record(paid: Sequence[JsonValue]) -> ExtractionMetadata:
    """A record of what failed attempts reported paying (`paid_for`'s entries), no pass."""
    record = ExtractionMetadata.new(ExtractionMode.NATIVE)
    record.record_paid([entry for entry in paid if isinstance(entry, dict)])
    return record


def _paid_so_far(item: _Item) -> tuple[dict[str, Any], str | None] | None:
    """What the item paid so far, as the ledger keeps it while it is sent again (a record,
    with earlier runs' attempts, and their cost): the answers its extraction took in, what
    its failed rows paid, what earlier runs paid. A run that ends with it in a job, or is
    killed, leaves it for the next run to count (`Ledger.paid`), as that run counts the
    answers it takes in again; its end writes its whole record. `None`: nothing was paid."""
    record = item.taken.model_copy() if item.taken is not None else None
    if item.paid:
        record = record or ExtractionMetadata.new(ExtractionMode.NATIVE)
        record.record_paid([entry for entry in item.paid if isinstance(entry, dict)])
    if record is None or not _paid_any([record]):
        if not item.spent:
            return None
        record = ExtractionMetadata.new(ExtractionMode.NATIVE)
    return _stored_record(record, item.spent), _paid_text(record, item.spent)


def _own_copy(error: Error) -> Error:
    """`error` for one input alone: what is written into its metadata is in no other's."""
    mine = copy.copy(error)
    context = copy.copy(error.context)
    context.metadata = dict(error.context.metadata)
    mine.context = context
    return mine


def _paid_taken_out(error: Error) -> list[JsonValue]:
    """What `error` (and what it fell back from) reported paying, taken out of it: the item
    carries it instead, so that it reaches the record once, whichever way the input ends."""
    paid: list[JsonValue] = list(paid_for(error))
    for link in errors_in_chain(error):
        link.context.metadata.pop(REPORTED_USAGE_KEY, None)
        link.context.metadata.pop(PAID_BEFORE_KEY, None)
    return paid


def _new_entries(paid: list[JsonValue], earlier: list[JsonValue]) -> list[JsonValue]:
    """`paid` less the entries of `earlier` (counted before), each once."""
    new = list(paid)
    for entry in earlier:
        if entry in new:
            new.remove(entry)
    return new


def _with_paid(item: _Item, answer: ChatResponse | Error) -> ChatResponse | Error:
    """`answer` carrying what the item's failed rows paid (`item.paid`), for the extraction
    to count as it counts a retry's failed attempts; handed over once."""
    if not item.paid:
        return answer
    paid: list[JsonValue] = list(item.paid)
    item.paid = []
    if isinstance(answer, Error):
        return paid_ahead(answer, paid)
    # Where the extraction reads what a wrapper's failed attempts paid.
    return answer.with_provider_data(ALLAMA_NAMESPACE, "batch_jobs", {PAID_BEFORE: paid})


def _live_entry(answer: ChatResponse | Error) -> dict[str, Any]:
    """A live pass's answer as an item's log keeps it, with what the tries before it paid:
    replayed as it was taken in, a live pass priced at the standard rate (`_replayed`)."""
    if isinstance(answer, Error):
        return {"live": True, "error": answer.to_dict()}
    return {"live": True, "body": answer.to_json()}


def _waits_too_long(error: Error, before: str = "the next request") -> str | None:
    """Why the wait `error` asks for is not made, the run stopping instead (what waits for
    it left for the next run), as in a live run (`_too_long`): longer than a run waits.
    `None` for a wait a run makes, or an error that is not waited on (refused for good)."""
    asked = asked_wait(error)
    if asked is None or asked <= LONGEST_WAIT:
        return None
    if not error.retryable and not isinstance(error, RateLimitedError):
        return None
    return f"the provider asked to wait {asked:.0f} s before {before}"


def _may_have_made(error: Error) -> bool:
    """Whether a failed try at making a job may have made it: an answer lost (a timeout, a
    broken connection) or a server's failure, not a refusal or a rate limit."""
    return error.retryable and not isinstance(error, RateLimitedError)


def _noting_upload(steps: Steps, uploaded: Mapping[str, str], note: Callable[[str], None]) -> Steps:
    """A submission's `steps`, with the file they upload (`uploaded["file"]`, as the dialect
    fills it) handed to `note` before the next request, the job's making, is sent: a run
    killed while that request is out leaves the file's id in the ledger, and the file is
    not left at the provider, holding the requests' text, where no one knows of it. (A file
    of an earlier try was noted then.)"""
    noted = uploaded.get("file")
    try:
        http = next(steps)
        while True:
            name = uploaded.get("file")
            if name is not None and name != noted:
                note(name)
                noted = name
            http = steps.send((yield http))
    except StopIteration as done:
        return done.value


def _not_ruled_out(tag: str, failed: Error | None, error: Error) -> str:
    lost = f" ({failed.kind})" if failed is not None else ""
    return (
        f"provider batch job {tag} may have been made, its answer lost{lost}, and the "
        f"provider's jobs could not be listed to tell ({_waits_too_long(error) or error.kind}): "
        "the same command looks for it, and collects it or sends its inputs"
    )


def _requests(count: int) -> str:
    return "1 request" if count == 1 else f"{count} requests"
