"""A batch run: one extraction per input, concurrent, rate-limited, resumable and costed.

The run is written once, as coroutines on one event loop: `abatch` runs it on the caller's
loop with the provider's async calls; `batch` runs the same loop in a thread of its own,
with the provider's sync calls in a pool of threads, and hands the results over as they
come. One input's failure is its result, never the run's end: provider errors that may
pass (rate limits, overload, server errors, timeouts) are tried again after the wait the
provider asked for, up to `max_attempts`; anything else is recorded as the input's failure.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import functools
import hashlib
import inspect
import itertools
import json
import numbers
import os
import queue
import random
import sqlite3
import sys
import threading
import time
import typing
import warnings
from collections import Counter
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass, field, fields, is_dataclass, replace
from decimal import Decimal
from os import PathLike
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, overload

from pydantic import (
    BaseModel,
    JsonValue,
    Secret,
    SecretBytes,
    SecretStr,
    TypeAdapter,
    ValidationError,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_json

# `TypeForm[T]` (PEP 747) types a special form (`A | B`, `Literal[...]`): `type[T]` takes none.
from typing_extensions import TypeForm

from allama import _tracing
from allama._prices import (
    LOCAL_PRESETS,
    MONEY,
    OWN_ENDPOINTS,
    Cost,
    _genai_prices,
    cost_of,
    dollars,
)
from allama._printable import printable, printable_label, storable
from allama._tokens import CHARS_PER_TOKEN, guessed_input_tokens
from allama.batch import _ledger
from allama.batch._ledger import (
    EARLIER_VALUE,
    Ledger,
    LedgerError,
    LedgerRow,
    LedgerWriter,
    Status,
    aside,
    check_ledger_file,
    kept_warnings,
    runs_settings,
    with_warnings,
)
from allama.batch._limits import LONGEST_WAIT, RateLimiter, per_minute, positive
from allama.batch._threads import DaemonPool
from allama.errors import (
    ACCOUNT_REFUSALS,
    Error,
    ExtractionError,
    NetworkError,
    NotFoundError,
    OverloadedError,
    RateLimitedError,
    RequestTimeoutError,
    asked_wait,
    errors_in_chain,
    may_pass_again,
    text_of,
)
from allama.extract._engine import Extracted
from allama.extract._errors import EnforcementBelowError, ParseError
from allama.extract._extractor import Extractor
from allama.extract._metadata import ExtractionMetadata, counted_field, noted_field
from allama.extract._mode import ExtractionMode, SchemaEnforcement
from allama.extract._output import dump_consumes, dump_reads_back, stored_names
from allama.extract._parse import ReadAgainError, read_again
from allama.provider import ChatProvider
from allama.schema._errors import SchemaError
from allama.schema._pointer import child, display
from allama.schema._types import type_label, type_schema
from allama.schema._walk import SCHEMA_MAPS, check_json
from allama.types import (
    ChatRequest,
    ChatResponse,
    FieldSubject,
    Usage,
    Warning,
)
from allama.types._response import rate_limit_reset
from allama.wrappers._gate import Call, Gate, run_to_its_end, sending
from allama.wrappers._gate import entered as gate_entered

__all__ = [
    "AsyncBatchRun",
    "BatchFailure",
    "BatchResult",
    "BatchRun",
    "BatchSummary",
    "abatch",
    "batch",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
"""A result's type: covariant, as a result is read-only (a `BatchResult[Invoice]` is a
`BatchResult[BaseModel]`)."""

_MAX_RATE_LIMITED = 100
"""Rate-limit answers one input may get before it fails: a run slows down for them, but
a provider that never lets it through ends the input, not the run's wait."""


@dataclass(frozen=True, slots=True)
class BatchFailure:
    """Why an input has no value. `message` is the error's log view (allama's own words,
    the provider's status and ids): never the model's text. `error` is the exception
    itself, in the run that met it (`None` for a failure read from the ledger).
    `provider_message` is the provider's own words for an error it wrote (why it refused
    the request), or the message of an exception allama did not raise (a validator's, a
    request function's: `message` then says it is withheld), kept in the ledger beside the
    values; it may quote the input, so it is in no log view and no `repr`, and the command
    shows it only when asked. `value_kept`:
    the ledger holds a value for the input, finished by an earlier run, that this run does
    not give (another endpoint's, one its type no longer reads, one below its floor):
    `allama batch export` writes it, and `export --failed` does not list it."""

    kind: str
    message: str
    retryable: bool = False
    error: BaseException | None = field(default=None, compare=False, repr=False)
    provider_message: str | None = field(default=None, compare=False, repr=False)
    value_kept: bool = field(default=False, compare=False)

    def stored(self) -> dict[str, JsonValue]:
        """The failure as the ledger keeps it."""
        # A job's codes, in the message, are the provider's too: no lone surrogate.
        kept: dict[str, JsonValue] = {"kind": self.kind, "message": storable(self.message)}
        if self.provider_message is not None:
            kept["provider_message"] = self.provider_message
        return kept

    @classmethod
    def of_stored(cls, kept: Mapping[str, Any] | None) -> BatchFailure:
        """A failure as the ledger kept it."""
        kept = kept or {}
        words = kept.get("provider_message")
        return cls(
            str(kept.get("kind", "error")),
            str(kept.get("message", "")),
            provider_message=words if isinstance(words, str) else None,
        )


@dataclass(frozen=True, slots=True)
class BatchResult(Generic[T_co]):
    """One input's outcome: its value or its failure, and the record of how it was got.

    `key` is the hash the ledger knows the input by; `index` its place in the inputs;
    `label` what the run calls it (a file name, a row id). `resumed`: finished by an
    earlier run and read from the ledger, not sent again. `spent` holds the records of
    attempts that failed with a provider error after paying for passes (a retry then
    started over; on an input not started after a budget's stop, those an earlier run's
    attempts paid for): their usage and cost count in the summary too. `duplicate`: the same
    input as an earlier one of this run, given that one's outcome and record, not sent
    (the summary counts its passes, tokens and cost once, with the first). `pending`: a
    failure of this run that the ledger keeps pending for the next run, which sends it
    again (an error worth trying again met when the run stopped, or one that stopped it).
    `warnings`: what the provider did not do as the input's request asked (a setting left
    out, a list cut short), said by the answer (or the extraction's error) of its last pass,
    less those its record holds already (`metadata.degradations` and `notes`, on the fields
    the extraction relies on); kept in the ledger with its record, and counted by field in
    the summary.
    """

    index: int
    key: str
    label: str
    value: T_co | None
    failure: BatchFailure | None
    metadata: ExtractionMetadata | None
    attempts: int
    seconds: float
    resumed: bool = False
    spent: tuple[ExtractionMetadata, ...] = ()
    duplicate: bool = False
    pending: bool = False
    unkept: bool = False
    """A value the ledger could not be written with (a full disk): given here, and not in
    the ledger, so a run again sends its input again."""
    warnings: tuple[Warning, ...] = ()
    """The request's warnings of its last pass that `metadata` does not hold (see above):
    the request sent was not the one asked for."""

    @property
    def ok(self) -> bool:
        return self.failure is None

    def __repr__(self) -> str:
        outcome = "ok" if self.failure is None else f"failed={self.failure.kind!r}"
        return (
            f"BatchResult(index={self.index}, label={self.label!r}, {outcome}, "
            f"attempts={self.attempts}, resumed={self.resumed}"
            + (", duplicate=True" if self.duplicate else "")
            + (", pending=True" if self.pending else "")
            + (f", warnings={len(self.warnings)})" if self.warnings else ")")
        )


NOT_STARTED = "not_started"
ANOTHER_ENDPOINT = "another_endpoint"
"""Finished by an earlier run against another endpoint (base URL) of the same provider
and model name: another server, whose model of that name may be another one."""
IN_FLIGHT_ELSEWHERE = "in_flight_elsewhere"
IN_PROVIDER_JOB = "in_provider_job"
"""In a provider batch job when the run stopped: a later run collects it."""
TAKEN_OVER = (
    "taken over by another run of this ledger, which saw this run as ended (a stale "
    "heartbeat: clocks that differ, a paused process): not sent again here"
)
"""Why an input this run sent is not sent again: another run holds it now, and sends it."""
TAKEN_OVER_UNSENT = (
    "taken over by another run of this ledger, which saw this run as ended (a stale "
    "heartbeat: clocks that differ, a paused process), before this run sent it: not sent here"
)
"""Why an input this run claimed is not sent: it waited long for a slot, and another run
holds it now."""
ANSWERED_ELSEWHERE = (
    "taken over by another run of this ledger, which saw this run as ended (a stale "
    "heartbeat: clocks that differ, a paused process), before this run's answer was "
    "recorded: the ledger holds that run's outcome, not this one's"
)
"""Why an input answered here has no value: the run that took it over records it."""
_NOT_ENDED_HERE = frozenset({NOT_STARTED, IN_FLIGHT_ELSEWHERE, IN_PROVIDER_JOB})
"""Results of inputs this run did not end: nothing of theirs was paid here."""
LEDGER_UNWRITABLE = "ledger_unwritable"
"""An input sent, whose ledger write failed before it ended: not in the ledger."""
VALUE_UNSTORABLE = "value_unstorable"
"""Validated and paid for, but no JSON can be made of the value (its type writes bytes it
cannot encode, say): the ledger records the failure, with the record and its cost."""
CLOSED_EARLY = "closed before its end (the results were left, or `close()` called)"
"""The stop of a run whose results were not read to the end."""
STORED_VALUE_INVALID = "stored_value_invalid"
"""Finished by an earlier run, whose value in the ledger does not validate as the type now
(its validators changed since, say): the value stays in the ledger, nothing is sent."""


def passes_said(passes: int, batch_passes: int) -> str:
    """The passes, and those provider batch jobs answered (priced at batch prices): said
    alike by a run's summary and by `allama batch status`."""
    jobs = f" ({batch_passes} by provider batch jobs, at batch prices)" if batch_passes else ""
    return f"passes {passes}{jobs}"


@dataclass(slots=True)
class BatchSummary:
    """The run so far: counts by outcome and by enforcement, passes, tokens, cost, time.

    `cost` sums the costs that are known (`cost_unknown` counts the inputs whose cost is
    not); `stopped` says why the run stopped starting new inputs, if it did."""

    total: int | None = None
    done: int = 0
    failed: int = 0
    resumed: int = 0
    duplicates: int = 0
    """Inputs that repeated an earlier one of the run: given its result, not sent."""
    not_started: int = 0
    elsewhere: int = 0
    elsewhere_left: int = 0
    """Of `elsewhere`, those the other run left unfinished, having ended before this one
    did (killed, say): a run again sends them."""
    in_flight: int = 0
    retrying: int = 0
    """Inputs waiting to be sent again after a failure that may pass (a server error and
    the wait its `Retry-After` asks, a timeout, the network): neither in flight nor
    finished. A rate limit's pause is said apart (the progress line's "paused")."""
    by_enforcement: Counter[str] = field(default_factory=Counter)
    failures_by_kind: Counter[str] = field(default_factory=Counter)
    passes: int = 0
    batch_passes: int = 0
    """Passes answered by provider batch jobs (priced at batch prices)."""
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    priced: int = 0
    """Inputs whose cost is known (and summed in `cost`)."""
    cost_earlier: Decimal = Decimal(0)
    """Of `cost`, what earlier runs of the ledger paid: for the inputs they finished
    (`resumed`), and the attempts they made of inputs this run sent again or left."""
    cost_unknown: int = 0
    cost_missing: str | None = None
    slowest: list[tuple[float, str]] = field(default_factory=list)
    costliest: list[tuple[Decimal, str]] = field(default_factory=list)
    stopped: str | None = None
    budget_reached: str | None = None
    """The budget's message when the run reached it with nothing left to send (all read and
    finished, or given from the ledger): no stop, but the budget is spent."""
    past_budget: tuple[Decimal, Decimal, Decimal | None] | None = None
    """What the job had spent when the run ended (earlier runs' share included), the
    budget, and what was spent when the run found it reached, where the run ended having
    spent more than both: inputs in flight then (or jobs out) paid past it."""
    refused: str | None = None
    """The kind of error that stopped the run from starting new inputs, since every one
    would meet it: the provider refused the run's key or account (`authentication`,
    `permission`, `quota_exceeded`), asked to wait longer than a run waits, 15 minutes
    (`rate_limited`, `overloaded`...), could not be reached in as many tries as an input
    gets (`network`), or has no such endpoint or model for a run of one request
    (`not_found`); or refused, for good, to make a provider batch job (the refusal's kind:
    `invalid_request`, `not_found`, `unsupported`...), which fails that job's inputs, since
    nothing in it tells a fault of the job's requests from one every job would meet."""
    in_jobs: int = 0
    """Inputs left in provider batch jobs when the run stopped (a later run collects them)."""
    jobs: dict[str, str] = field(default_factory=dict)
    """Provider batch jobs of the run, by allama's tag: their last known state, in words."""
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    waited: float = 0.0
    slowdowns: int = 0
    """Times a 429 cut the request rate (a burst answering requests sent together is one)."""
    rate_limited: int = 0
    """Rate-limit answers (429s) met."""
    resets_waited: int = 0
    """Pauses of new requests until a rate limit a successful answer's headers said was used
    up (a remaining count of 0) reset: no 429 met, and the rate not cut."""
    pending: int = 0
    """Failures of this run the ledger keeps pending for the next run (`BatchResult.pending`)."""
    unkept: int = 0
    """Inputs this run ended whose outcome the ledger could not be written with (a full
    disk, a lock held past SQLite's wait): given all the same, and sent again by a run
    again, since the ledger does not hold them finished."""
    abandoned: int = 0
    """Inputs read and left unfinished when the run was closed before its end (`close()`,
    leaving the loop early): in flight, or waiting for a slot. They have no result; the
    ledger keeps them pending, and a run again sends them (those answered meanwhile are
    paid twice)."""
    abandoned_calls: int = 0
    """Of `abandoned`, those with a call under way at the close: sent (an async run's cut,
    a sync run's going on in its thread, its answer unread), and perhaps paid for, at a
    cost `cost` does not hold. Not one waiting out a retry's pause (`RetryingProvider`),
    its attempts so far answered."""
    schema_changed: str | None = None
    """Where the type's schema differs from that of an earlier run of the ledger of a type
    of the same name, provider and model (`schema_change`), once the run claims an input the
    ledger does not hold: an input of that run is not given from the ledger, its key
    holding that run's schema. Also a `RuntimeWarning`."""
    request_warnings: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Inputs whose request the provider did not take as asked (`BatchResult.warnings`),
    by what the warning is about (a request field's name: `"temperature"`) and its kind
    (`"unsupported"`, `"approximated"`): each input counted once per such pair, a copy of
    an earlier input too."""

    @property
    def finished(self) -> int:
        return self.done + self.failed

    @property
    def elapsed(self) -> float:
        return (self.ended if self.ended is not None else time.monotonic()) - self.started

    def rate(self) -> float:
        """Inputs finished in this run per second."""
        finished = self.done + self.failed - self.resumed
        return finished / self.elapsed if self.elapsed > 0 else 0.0

    def eta(self) -> float | None:
        if self.total is None:
            return None
        left = (
            self.total
            - self.done
            - self.failed
            - self.not_started
            - self.elsewhere
            - self.in_jobs
            - self.abandoned
        )
        rate = self.rate()
        return left / rate if rate > 0 and left > 0 else (0.0 if left <= 0 else None)

    def add(self, result: BatchResult[Any], earlier: Decimal | None = None) -> None:
        """Count an input's outcome; `earlier`: what earlier runs paid for it, where this
        run sent it again."""
        if result.failure is None:
            self.done += 1
        elif result.failure.kind == NOT_STARTED:
            self.not_started += 1
            if not result.spent:
                return  # (one an earlier run paid for counts what it paid, below)
        elif result.failure.kind == IN_FLIGHT_ELSEWHERE:
            self.elsewhere += 1
            if result.metadata is None and not result.spent:
                return  # nothing sent here (a run taken over after a send counts its own)
        elif result.failure.kind == IN_PROVIDER_JOB:
            self.in_jobs += 1
            # Its attempts as the ledger counts them, the job's send among them (what they
            # paid is counted when a run collects the job).
            self.attempts += result.attempts
            return
        else:
            self.failed += 1
            self.failures_by_kind[result.failure.kind] += 1
            self.pending += result.pending
        if result.resumed:
            self.resumed += 1
        if result.metadata is not None and result.failure is None:
            self.by_enforcement[result.metadata.enforcement.value] += 1
        if result.warnings:  # a copy's too: its value came of that request as well
            self.request_warnings.update(dict.fromkeys(map(_warned, result.warnings), 1))
        if result.duplicate:
            self.duplicates += 1
            return  # its record is the first copy's, counted there
        self.attempts += result.attempts
        records = [*result.spent, *([result.metadata] if result.metadata is not None else [])]
        if not records:  # never sent (its request could not be made): nothing to price or time
            return
        # One resumed, or not started, carries earlier runs' attempts alone.
        all_earlier = result.resumed or (
            result.failure is not None and result.failure.kind == NOT_STARTED
        )
        cost = self.add_paid(records, earlier, all_earlier=all_earlier)
        if cost is not None:
            _keep_top(self.costliest, (cost, result.label))
        if result.failure is None or result.failure.kind != NOT_STARTED:
            _keep_top(self.slowest, (result.seconds, result.label))

    def add_paid(
        self,
        records: list[ExtractionMetadata],
        earlier: Decimal | None = None,
        *,
        all_earlier: bool = False,
    ) -> Decimal | None:
        """Count what an input's attempts paid (passes, tokens, money; `earlier` of it, or
        all of it, paid by earlier runs); its cost, `None` when unknown. An input left
        unfinished by a run closed early counts so too, with no result."""
        for metadata in records:
            self.passes += metadata.passes
            self.batch_passes += metadata.batch_passes
            if metadata.usage is not None:
                self.input_tokens += metadata.usage.input_tokens or 0
                self.output_tokens += metadata.usage.output_tokens or 0
        cost, missing = _cost_of(records)
        if cost is not None:
            self.cost = MONEY.add(self.cost, cost)
            if all_earlier:
                earlier = cost
            if earlier:
                self.cost_earlier = MONEY.add(self.cost_earlier, min(earlier, cost))
            self.priced += 1
        elif missing is not None and _paid_any(records):
            self.cost_unknown += 1
            self.cost_missing = self.cost_missing or missing
        return cost

    def lines(self) -> list[str]:
        """The summary as a person reads it."""
        notes = [f"{self.resumed} finished by an earlier run"] if self.resumed else []
        if self.duplicates:
            notes.append(f"{self.duplicates} repeating an earlier input")
        if self.pending:
            notes.append(f"{self.pending} kept pending for the next run")
        out = [
            f"{self.done} done, {self.failed} failed"
            + (f" ({'; '.join(notes)})" if notes else "")
            + (f", {self.not_started} not started" if self.not_started else "")
            + (f", {self.elsewhere} in flight in another run" if self.elsewhere else "")
            + (
                f" ({self.elsewhere_left} of them left unfinished by it, which has ended: a "
                "run again sends them)"
                if self.elsewhere_left
                else ""
            )
            + (f", {self.in_jobs} in provider batch jobs" if self.in_jobs else "")
            + (f", {self.abandoned} left unfinished" if self.abandoned else "")
            + (
                f" ({self.abandoned_calls} with a call under way, which may be paid for, at "
                "a cost not counted here)"
                if self.abandoned_calls
                else ""
            )
            + f", in {self.elapsed:.1f} s"
        ]
        for tag, state in self.jobs.items():
            out.append(f"job {tag}: {state}")
        if self.by_enforcement:
            shown = ", ".join(f"{k} {v}" for k, v in sorted(self.by_enforcement.items()))
            out.append(f"enforcement: {shown}")
        if self.failures_by_kind:
            shown = ", ".join(f"{k} {v}" for k, v in sorted(self.failures_by_kind.items()))
            out.append(f"failures: {shown}")
        if self.request_warnings:
            # The field and the kind alone: a warning's own words may quote the request.
            shown = ", ".join(
                f"{about} {kind} ({count} input{'' if count == 1 else 's'})"
                for (about, kind), count in sorted(self.request_warnings.items())
            )
            out.append(
                f"request warnings (each result's `warnings` says what was sent otherwise): {shown}"
            )
        out.append(
            f"{passes_said(self.passes, self.batch_passes)}, attempts {self.attempts}, tokens "
            f"{self.input_tokens} in / {self.output_tokens} out"
        )
        if self.cost_unknown and not self.priced:
            cost = f"cost unknown ({self.cost_missing})"
        else:
            cost = f"cost ${dollars(self.cost)}"
            if self.cost_earlier:
                cost += f" (${dollars(self.cost_earlier)} of it paid by earlier runs)"
            if self.cost_unknown:
                cost += f" (unknown for {self.cost_unknown}: {self.cost_missing})"
        out.append(cost)
        resets = self.resets_waited
        until_reset = (
            f" ({resets} pause{'' if resets == 1 else 's'} until a limit an answer said was "
            "used up reset)"
            if resets
            else ""
        )
        if self.rate_limited:
            out.append(
                f"rate limits: {self.rate_limited} answered 429, the rate cut "
                f"{'once' if self.slowdowns == 1 else f'{self.slowdowns} times'}, "
                f"{self.waited:.1f} s waited by inputs in all{until_reset}"
            )
        elif self.waited >= 1.0 or resets:  # for their turn under the limits, no 429 met
            out.append(
                f"limits: {self.waited:.1f} s waited by inputs in all for their turn{until_reset}"
            )
        if self.slowest:
            shown = ", ".join(
                f"{printable_label(label)} {seconds:.2f} s" for seconds, label in self.slowest
            )
            out.append(f"slowest: {shown}")
        if self.costliest:
            shown = ", ".join(
                f"{printable_label(label)} ${dollars(cost)}" for cost, label in self.costliest
            )
            out.append(f"most expensive: {shown}")
        if self.schema_changed:
            out.append(printable(self.schema_changed))
        if self.unkept:
            out.append(
                f"not in the ledger: {self.unkept} ended by this run, which the ledger could "
                "not be written with (a run again sends them again)"
            )
        if self.stopped:
            out.append(f"stopped starting new inputs: {printable(self.stopped)}")
        elif self.budget_reached:
            out.append(f"{printable(self.budget_reached)}, with nothing left to send")
        if self.past_budget is not None:
            spent, budget, reached = self.past_budget
            out.append(
                f"spent ${dollars(spent)} in all by the end, ${dollars(spent - budget)} past the "
                f"budget of ${budget:f}"
                + (
                    f": ${dollars(spent - reached)} of it after the budget was reached, by "
                    "inputs then in flight"
                    if reached is not None
                    else ""
                )
            )
        return out


def _warned(warning: Warning) -> tuple[str, str]:
    """A warning as the summary counts it: what it is about and its kind, never its words
    (which may quote the request): a request field by name, else a message or a tool."""
    subject = warning.subject
    about = subject.field.value if isinstance(subject, FieldSubject) else f"a {subject.type}"
    return about, warning.kind.value


def request_warnings(
    response: ChatResponse | None, record: ExtractionMetadata | None
) -> tuple[Warning, ...]:
    """The warnings of the request a response answered (`response.warnings`) that its
    extraction's `record` does not hold: those on the fields the extraction relies on are
    its `degradations` and `notes` already (`file_warnings`). Most answers have none, and
    cost nothing here."""
    if response is None or not response.warnings:
        return ()
    if record is None:
        return tuple(response.warnings)
    held = [f for f in (counted_field(record.mode), noted_field(record.mode)) if f is not None]
    return tuple(w for w in response.warnings if not any(map(w.is_about, held)))


def error_warnings(error: BaseException) -> tuple[Warning, ...]:
    """`request_warnings` of an extraction that failed with `error`: those of the last
    answer it carries (an `ExtractionError`'s `response`); none for any other error."""
    if not isinstance(error, ExtractionError):
        return ()
    return request_warnings(getattr(error, "response", None), getattr(error, "metadata", None))


def _keep_top(top: list[Any], entry: tuple[Any, str], size: int = 3) -> None:
    if len(top) >= size and entry[0] <= top[-1][0]:
        return  # what sorting it in and cutting the list to `size` would do
    top.append(entry)
    top.sort(key=lambda item: item[0], reverse=True)
    del top[size:]


def key_bits(key: str) -> int:
    """An input's key by its first 64 bits: a tenth of the memory of the key, for the sets
    of inputs a run has given (two inputs share them about once in 10^8 among a million)."""
    return int(key[:16], 16)


def _paid_any(records: list[ExtractionMetadata]) -> bool:
    """Whether any of `records` was paid for: a pass, or usage a failed call reported (a
    choice's error, a failed response) with no pass."""
    return any(record.passes or record.usage is not None for record in records)


def _cost_of(records: list[ExtractionMetadata]) -> tuple[Decimal | None, str | None]:
    """The summed cost of `records`, or why it is not known. A record of a call that
    reported paying nothing (a 503, a refused request) adds nothing to those that did; all
    of them such, the cost is not known, as none was reported."""
    total = Decimal(0)
    for metadata in [record for record in records if _paid_any([record])] or records:
        cost = metadata.cost
        if cost is None:
            return None, metadata.cost_missing or "no price known"
        total = MONEY.add(total, cost.total)
    return total, None


# The run's settings


Build = Callable[[Any], ChatRequest]


@dataclass(slots=True)
class _Spec:
    provider: ChatProvider
    tp: Any
    inputs: Iterable[Any] | AsyncIterable[Any]
    build: Build
    extractor: Extractor
    concurrency: int
    rpm: float | None
    tpm: float | None
    ledger: str | PathLike[str] | None
    max_cost: Decimal | None
    max_attempts: int
    backoff: float
    retry_failed: bool
    label: Callable[[Any, int], str]
    total: int | None
    settings: dict[str, Any]
    provider_batch: bool = False
    job_retry: str = "batch"
    poll_interval: float = 30.0
    max_poll_interval: float = 600.0
    job_size: int | None = None
    template: ChatRequest | None = None
    """The request each text input is added to, when `request` was one."""
    schema: str = ""
    """The type's schema as keys hash it (`_schema_text`): the ledger keeps it once per
    digest (`Ledger.schema`), for a later run to say where its own differs."""
    adapter: TypeAdapter[Any] = field(init=False)
    key: Callable[[Any, ChatRequest], str] = field(init=False)
    """The key of an input and the request built from it (`input_key`)."""
    dump_reads_back: bool = field(init=False)
    """Every value reads back from its JSON as itself (`dump_reads_back`): the ledger
    keeps the JSON alone, with nothing to check."""
    dump_consumes: bool = field(init=False)
    """Writing a value's JSON empties part of it (`Iterable` fields)."""
    secrets: bool = field(init=False)
    """A type with a secret (`SecretStr`) whose JSON may not read back: the ledger keeps no
    output of its values, only their JSON, which writes secrets masked."""

    def __post_init__(self) -> None:
        self.adapter = TypeAdapter(self.tp)
        self.key = _keys(self.settings["provider"], self.tp, self.template)
        self.dump_reads_back = dump_reads_back(self.adapter)
        self.dump_consumes = not self.dump_reads_back and dump_consumes(self.adapter)
        self.secrets = not self.dump_reads_back and _has_secrets(self.adapter)
        # Kept with the run: a later run whose type names the fields otherwise does not
        # read this run's values, kept by field name, into other fields.
        self.settings["field_names"] = stored_names(self.adapter)


def _reads_back(spec: _Spec, text: str, value: Any, secrets: bool = False) -> bool:
    """Whether `text`, a value's JSON, reads back as that value: equal, and of the same
    types throughout (`1` equals an `IntEnum`'s 1, and `repr` tells them apart), which
    writes the same JSON again. With `secrets`, what the JSON leaves out (a secret, masked;
    a field with `exclude=True`; a private attribute) is lost, as the README says, but
    nothing it holds may change: it
    must read back as a value whose JSON is `text` again (a validator run on its own
    output), holding the same values, of the same types, where the JSON holds them (a
    serializer of the type's own may write two values alike)."""
    try:
        back = read_stored_value(spec.adapter, text)
        # Written again, the same JSON: a resumed run checks its stored JSON so, and one that
        # changes each time it is written (a serializer that stamps the time) is not kept.
        same = _same_json(stored_value(spec.adapter, back), text)
        if secrets:
            return same and _shape(back) == _shape(value)
        return same and _identical(back, value)
    except Exception:  # it does not validate, or its values do not compare
        return False


_PLAIN = (str, int, bool, type(None))
"""Values that are equal exactly when they are the same (a float's -0.0 is not)."""

_ABSENT = object()


def _identical(a: Any, b: Any) -> bool:
    """Whether two values are the same throughout: of the same type at every level, and
    equal field by field, whatever the type's `==` and `repr` leave out (`1` equals an
    `IntEnum`'s 1; a dataclass field with `compare=False`). Any doubt is `False`: the ledger
    then keeps the output the value was read from, which costs room, not truth."""
    if type(a) is not type(b):
        return False
    if type(a) in _PLAIN:
        return bool(a == b)
    if isinstance(a, BaseModel):
        return (
            _same_attributes(a.__dict__, b.__dict__)
            and _identical(a.__pydantic_extra__, b.__pydantic_extra__)
            and _identical(a.__pydantic_private__, b.__pydantic_private__)
        )
    if is_dataclass(a):
        # Its fields, and what else a validator set on it (`__dict__`, where it has one).
        return _same_attributes(
            {f.name: getattr(a, f.name) for f in fields(a)} | getattr(a, "__dict__", {}),
            {f.name: getattr(b, f.name) for f in fields(b)} | getattr(b, "__dict__", {}),
        )
    if isinstance(a, dict):
        # In order: a dict's keys come back in the order its JSON writes them.
        return len(a) == len(b) and all(
            _identical(ka, kb) and _identical(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, collections.deque) and a.maxlen != b.maxlen:
        return False
    if isinstance(a, list | tuple | collections.deque):
        return len(a) == len(b) and all(map(_identical, a, b))
    if isinstance(a, set | frozenset):
        # Each element with the one the other holds equal to it: of the same type throughout
        # (`(One.ONE,)` and `(1,)` are equal, and of one type).
        theirs = {x: x for x in b}
        return len(a) == len(b) and all(_identical(x, theirs.get(x, _ABSENT)) for x in a)
    return _same_leaf(a, b)


def _same_leaf(a: Any, b: Any) -> bool:
    """Two values of one type that neither `_identical` nor `_shape` looks into: equal, and
    alike where `repr` tells more than `==` (`Decimal("1.0")` and `Decimal("1.00")`), unless
    their class has no `repr` of its own (the default shows where each one lives)."""
    if not bool(a == b):
        return False
    own: object = type(a).__repr__
    return own is object.__repr__ or repr(a) == repr(b)


class _Leaf:
    """A value in a `_shape`, compared by `_same_leaf`."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Leaf)
            and type(self.value) is type(other.value)
            and _same_leaf(self.value, other.value)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self.value).__qualname__}:{self.value!r}"


def _same_attributes(mine: dict[str, Any], theirs: dict[str, Any]) -> bool:
    return mine.keys() == theirs.keys() and all(
        _identical(value, theirs[name]) for name, value in mine.items()
    )


def _shape(value: Any) -> Any:
    """What a value holds where its JSON holds it, of what types, its secrets as their
    types alone: two values are the same there (a serializer of the type's own may write
    one as the other) when their shapes are."""
    if isinstance(value, Secret | SecretStr | SecretBytes):
        return type(value)
    if type(value) in _PLAIN:
        return type(value), value
    if isinstance(value, BaseModel):
        left_out = _left_out(type(value))
        shown = [(name, _shape(v)) for name, v in value.__dict__.items() if name not in left_out]
        return type(value), tuple(shown), _shape(value.__pydantic_extra__)
    if is_dataclass(value) and not isinstance(value, type):
        left_out = _left_out(type(value))
        names = [f.name for f in fields(value) if f.name not in left_out]
        return type(value), tuple((name, _shape(getattr(value, name))) for name in names)
    if isinstance(value, dict):
        return type(value), tuple((_shape(k), _shape(v)) for k, v in value.items())
    if isinstance(value, collections.deque):
        return type(value), value.maxlen, tuple(map(_shape, value))
    if isinstance(value, list | tuple):
        return type(value), tuple(map(_shape, value))
    if isinstance(value, set | frozenset):
        return type(value), tuple(sorted(repr(_shape(x)) for x in value))
    return _Leaf(value)


@functools.cache
def _left_out(cls: type) -> frozenset[str]:
    """The fields of a model or dataclass its JSON leaves out (`exclude=True`)."""
    known = getattr(cls, "__pydantic_fields__", None)
    if isinstance(known, dict):
        return frozenset(name for name, info in known.items() if info.exclude)
    # A standard dataclass: `Field(exclude=True)` as a field's default, or in `Annotated`.
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # a name its annotations cannot resolve: every field is compared
        hints = {}
    left_out = set()
    for f in fields(cls):
        said = [f.default, *getattr(hints.get(f.name), "__metadata__", ())]
        if any(isinstance(info, FieldInfo) and info.exclude for info in said):
            left_out.add(f.name)
    return frozenset(left_out)


WITHHELD = ""
"""The ledger's `source` of a value whose JSON does not read back as the value, and whose
output it does not keep (the type holds a secret)."""


class ValueNotKept(ValueError):
    """A finished input whose value the ledger cannot give back as it was (`WITHHELD`);
    `invalid`: its stored JSON, secrets masked, does not even validate as the type."""

    def __init__(self, invalid: bool) -> None:
        super().__init__("its JSON does not read back as the value")
        self.invalid = invalid


class FieldsRenamed(ValueError):
    """A finished input whose stored value, keyed by field name, a type of the same schema
    whose fields are named otherwise would read into other fields."""


class ValueChanged(ValueError):
    """A finished input whose stored value this run's type reads as another value: a
    validator that changes what it reads changed since the value was stored."""


def _holds_secret(value: Any) -> bool:
    """Whether a value holds a secret its type's JSON Schema does not show (`Secret[int]`
    has no `writeOnly`): the output it was read from holds it in the clear."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, Secret | SecretStr | SecretBytes):
            return True
        if isinstance(node, BaseModel):
            stack.extend(node.__dict__.values())
            stack.extend((node.__pydantic_extra__ or {}).values())
        elif is_dataclass(node) and not isinstance(node, type):
            stack.extend(getattr(node, f.name) for f in fields(node))
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple | set | frozenset | collections.deque):
            stack.extend(node)
    return False


def _has_secrets(adapter: TypeAdapter[Any]) -> bool:
    """Whether the type holds a secret: a `writeOnly` property in its JSON Schema, which
    pydantic's `SecretStr` and `SecretBytes` are."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # what the schema leaves out is not asked here
            schema: Any = adapter.json_schema()
    except Exception:  # no JSON Schema, so no extraction either
        return False
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("writeOnly") is True:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def check_template(
    provider: ChatProvider, tp: Any, template: ChatRequest, extractor: Extractor | None
) -> None:
    """A call no input's request can make, said once before anything is claimed or sent,
    not as every input's failure: each input's request is `template` with its text added.
    An extraction with no mode left to pick, a request the provider refuses, and a floor
    (`extractor`'s) no call can meet."""
    from allama.extract._engine import check_floor_before_sending, plan

    plan(provider, tp, template.user("a document"))
    if extractor is not None:
        check_floor_before_sending(extractor._settings, provider, tp, template, stream=False)


def _spec(
    provider: ChatProvider,
    tp: Any,
    inputs: Iterable[Any] | AsyncIterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None,
    concurrency: int,
    rpm: float | None,
    tpm: float | None,
    ledger: str | PathLike[str] | None,
    max_cost: Decimal | float | str | None,
    max_attempts: int,
    backoff: float,
    retry_failed: bool,
    label: Callable[[Any], str] | None,
    total: int | None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> _Spec:
    from allama.extract._extractor import check_call

    if extractor is not None and not isinstance(extractor, Extractor):
        raise TypeError(
            "extractor must be an Extractor (`Extractor(retries=1)`, say), or None, not "
            + (
                f"the class {extractor.__name__}"
                if isinstance(extractor, type)
                else f"a {type(extractor).__name__}"
            )
        )
    build: Build
    if isinstance(request, ChatRequest):
        check_call(provider, tp, request)
        check_template(provider, tp, request, extractor)
        template = request

        def from_text(document: Any) -> ChatRequest:
            if not isinstance(document, str):
                raise TypeError(
                    f"an input is a {type(document).__name__}: with a ChatRequest as "
                    "`request`, inputs must be text; pass a function building the request "
                    "from an input instead"
                )
            return template.user(document)

        build, model = from_text, template.model
    elif callable(request):
        build, model = request, None
    else:
        raise TypeError(
            "`request` must be a ChatRequest (each input is added as the user's text) or a "
            f"function building the ChatRequest from an input, not {type(request).__name__}"
        )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number of at least 1, not {concurrency!r}")
    max_attempts = _check_retries(max_attempts, backoff)
    # A `Decimal` or a numpy number as a float, before the ledger's settings keep it.
    rpm, tpm = per_minute("rpm", rpm), per_minute("tpm", tpm)
    unsendable = missing_url(provider) or missing_key(provider)
    if unsendable is not None:
        raise ValueError(unsendable)
    if not isinstance(inputs, Iterable | AsyncIterable):
        raise TypeError(
            f"inputs must be an iterable of documents (or, for `abatch`, an async iterable), "
            f"not {type(inputs).__name__}"
        )
    if isinstance(inputs, str | bytes | bytearray):
        # Iterable, but by character: a document passed alone would be one input a letter.
        raise TypeError(
            f"inputs must be an iterable of documents, not one {type(inputs).__name__}: "
            "pass a list of them (`[document]` for one)"
        )
    if label is not None and not callable(label):
        raise TypeError(
            f"label must be a function naming an input (or None), not {type(label).__name__}"
        )
    if inspect.iscoroutinefunction(label) or inspect.iscoroutinefunction(request):
        raise TypeError(
            f"the {'label' if inspect.iscoroutinefunction(label) else 'request'} function is "
            "an async function, which the run does not await: pass a plain one"
        )
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total < 0):
        raise ValueError(f"total must be a whole number of inputs, 0 or more, not {total!r}")
    if ledger is not None and not str(ledger):
        raise ValueError("ledger must be a file's path (or None for no ledger), not ''")
    if ledger is not None:
        check_ledger_file(Path(ledger))  # another database is refused before it is changed
    if provider_batch:
        _check_provider_batch(provider, ledger, job_retry, poll_interval, job_size)
    budget = None if max_cost is None else _budget(max_cost)
    unpriced = None if budget is None else unpriced_provider(provider)
    if unpriced is not None:
        raise ValueError(f"max_cost cannot be kept with provider {provider.name}: {unpriced}")
    if total is None and hasattr(inputs, "__len__"):
        total = len(inputs)  # type: ignore[arg-type]
    named = label or (lambda document: "")

    def labelled(document: Any, index: int) -> str:
        named_it = named(document)
        if inspect.iscoroutine(named_it):
            named_it.close()  # never awaited: said here, rather than in a warning at exit
            raise TypeError(
                "the label function returned a coroutine, not a name: it is an async "
                "function, which the run does not await; name inputs with a plain one"
            )
        # Only no name falls back to the index: a row id of 0 (or `False`) is a name.
        unnamed = named_it is None or (isinstance(named_it, str) and not named_it)
        return _text_of_label(f"#{index}" if unnamed else str(named_it))

    provider_key = key_name(provider)
    if ledger is not None and (provider_key != provider.name or "failover(" in provider_key):
        provider_key = _kept_key_name(Path(ledger), provider, provider_key)
    schema = _schema_text(tp)
    settings: dict[str, Any] = {
        "provider": provider_key,
        "endpoint": _endpoint(provider),
        "type": type_label(tp),
        "model": model,
        "concurrency": concurrency,
        "rpm": rpm,
        "tpm": tpm,
        "max_cost": None if budget is None else str(budget),
        "max_attempts": max_attempts,
        "extractor": repr(extractor or Extractor()),
        "inputs": _inputs_of(
            provider_key, tp, request if isinstance(request, ChatRequest) else None
        ),
        # The same, with no request: runs of requests a function builds and of a template
        # share it, and their inputs' keys may match (`_Agreement`). Also the digest the
        # ledger keeps the schema by, once (`_Spec.schema`), so that a later run of a type
        # of the same name whose schema differs (a default computed at import) can say
        # where (`schema_change`).
        "types": _inputs_of(provider_key, tp, None),
    }
    if provider_batch:
        settings["provider_batch"] = {"retry": job_retry}
    return _Spec(
        provider=provider,
        tp=tp,
        inputs=inputs,
        build=build,
        extractor=extractor or Extractor(),
        concurrency=concurrency,
        rpm=rpm,
        tpm=tpm,
        ledger=ledger,
        max_cost=budget,
        max_attempts=max_attempts,
        backoff=backoff,
        retry_failed=retry_failed,
        label=labelled,
        total=total,
        settings=settings,
        provider_batch=provider_batch,
        job_retry=job_retry,
        poll_interval=poll_interval,
        max_poll_interval=max(600.0, poll_interval),
        job_size=job_size,
        template=request if isinstance(request, ChatRequest) else None,
        schema=schema,
    )


_ENDPOINTS = ", "
"""Between a failover's endpoints in the run's settings."""


def _refused_unread(error: Error) -> bool:
    """Whether the provider refused the request without reading it into a model (a 4xx: a
    context too long, a bad request, a model it has not; a 429 that no wait lets through,
    OpenAI's "Request too large"): its guessed tokens are given back to the limit per
    minute, where they would hold every other input up for the rest of the minute. A rate
    limit's 429 keeps them, as the run slows down; a server error or a timeout may have
    been read, and keeps them."""
    from allama.errors import REPORTED_USAGE_KEY

    if REPORTED_USAGE_KEY in error.context.metadata:
        # A model answered, and the provider refused the answer (Groq's
        # `json_validate_failed`, `tool_use_failed`): read into the model, its tokens spent.
        return False
    status = error.status
    return status is not None and 400 <= status < 500 and (status != 429 or not error.retryable)


def _leaves(provider: object) -> list[object]:
    """The providers `provider` sends through, in order: itself, or, through the wrappers
    around them, each provider a wrapper holds (`Wrapper._wrapped`), a provider met twice
    told twice (a failover over the same endpoint twice names it twice)."""
    from allama.wrappers._lifetime import Wrapper

    if isinstance(provider, Wrapper):
        return [leaf for each in provider._wrapped() for leaf in _leaves(each)]
    return [provider]


def _endpoint(provider: object) -> str | None:
    """Where `provider` sends, for a provider of HTTP (through the wrappers around it; a
    failover's providers in turn), as `scheme://host[:port]/path`: no credentials and no
    query, so that the same server spelled with a key or a version reads the same; `None`
    for others (the local engine, whose port changes from run to run)."""
    found = [_leaf_endpoint(leaf) for leaf in _leaves(provider)]
    return None if None in found else _ENDPOINTS.join(str(each) for each in found)


def _leaf_endpoint(provider: object) -> str | None:
    from allama.providers._http import HttpProvider

    local = sys.modules.get("allama.local._provider")  # loaded if the provider is one of it
    if local is not None and isinstance(provider, local.LlamaCppProvider) and provider.engine:
        return None  # llama.cpp in this process: on another port each run
    if isinstance(provider, HttpProvider):
        return None if provider.base_url is None else _server_of(provider.base_url)
    return None  # a provider of the caller's own: where it sends is its own business


def another_endpoint(mine: str | None, theirs: str | None) -> bool:
    """Whether a value a run of endpoint `theirs` finished is another endpoint's to a run
    of endpoint `mine` (a server not among this run's; a failover's in any order): the
    model of that name there may be another. Unknown on either side: not another."""
    if mine is None or theirs is None:
        return False
    return not set(theirs.split(_ENDPOINTS)) <= set(mine.split(_ENDPOINTS))


def missing_url(provider: object) -> str | None:
    """Why a provider of HTTP (through the wrappers around it; each of a failover's) can
    send nothing: no base URL. A run refuses it at once, rather than fail every input."""
    return _unsendable(provider, "missing_url")


def missing_key(provider: object) -> str | None:
    """Why a provider of HTTP can send nothing: no API key where it needs one. A run
    refuses it at once, before it records an attempt of any input."""
    return _unsendable(provider, "missing_key")


def _unsendable(provider: object, check: Literal["missing_url", "missing_key"]) -> str | None:
    from allama.providers._http import HttpProvider

    # Each of a failover's: a later one without a key would turn a passing error of the
    # first (a 503 it fails over on) into a refusal that stops the run.
    for leaf in _leaves(provider):
        said: str | None = getattr(leaf, check)() if isinstance(leaf, HttpProvider) else None
        if said:
            return said
    return None


def _server_of(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return "<unreadable url>"
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    if port is not None and port != {"http": 80, "https": 443}.get(scheme):
        host = f"{host}:{port}"
    path = "/".join(piece for piece in parts.path.split("/") if piece)
    return f"{scheme}://{host}/{path}" if path else f"{scheme}://{host}"


def _check_retries(max_attempts: object, backoff: object) -> int:
    """`max_attempts` as an `int` (numpy's whole numbers too, which a run's settings, kept
    as JSON, could not hold), or the error that refuses it or `backoff`."""
    if (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, numbers.Integral)
        or max_attempts < 1
    ):
        raise ValueError(f"max_attempts must be a whole number of at least 1, not {max_attempts!r}")
    if not positive(backoff, zero=True):
        raise ValueError(f"backoff must be a number of seconds, 0 or more, not {backoff!r}")
    return int(max_attempts)


def _text_of_label(label: str) -> str:
    """A label the ledger and the output can hold: a file name of bytes that are no UTF-8
    (`café` in Latin-1) or half of a character (`\\ud800` in JSON) is no text SQLite takes,
    and an input's claim would fail; such characters are shown escaped (`caf\\xe9.txt`)."""
    if label.isascii():
        return label
    try:
        label.encode("utf-8")
    except UnicodeEncodeError:
        try:  # a name read from the file system: its bytes, shown
            return label.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            return label.encode("utf-8", "backslashreplace").decode("utf-8")
    return label


def _budget(max_cost: Decimal | float | str) -> Decimal:
    """`max_cost` as dollars: a finite amount more than 0, from a number or its text."""
    try:
        budget = Decimal(str(max_cost)) if not isinstance(max_cost, bool) else None
    except ArithmeticError:  # `decimal.InvalidOperation`: not a number at all
        budget = None
    if budget is None or not budget.is_finite() or budget <= 0:
        raise ValueError(
            f"max_cost must be a finite amount of dollars more than 0, not {max_cost!r}"
        )
    return budget


_NO_HOLD = contextlib.nullcontext()
"""What a send waits for besides its slot without a budget: nothing (`priced_first` is the
budget's)."""


def unpriced_provider(provider: ChatProvider) -> str | None:
    """Why no answer of `provider` can have a cost, whatever its model (a model run
    locally, `LOCAL_PRESETS`; an endpoint of the caller's own, `OWN_ENDPOINTS`, whose model
    names say nothing of its prices; without genai-prices, one whose answers do not say
    their own cost, `_COSTED_BY_ITSELF`); `None` where one may. A budget is refused for such
    a provider before anything is sent: each answer would cost an unknown amount. Elsewhere
    a model genai-prices does not know is no such proof (the answer may name a priced model,
    an Azure deployment's, or say its own cost): there the run finds out at its first
    answer, one input of that model in flight until then (`_Runner.priced_first`).

    Each provider a failover may answer from is asked in turn: one of them unpriced is an
    answer whose cost is unknown, which the run would stop at after paying for it. A local
    or own endpoint is named for what it is before any want of genai-prices, which would
    not price it either."""
    names = [str(getattr(leaf, "name", "")) for leaf in _leaves(provider)]
    for name in names:
        if name in LOCAL_PRESETS or name in OWN_ENDPOINTS:
            reason = cost_of(name, None, None)
            if isinstance(reason, str):
                return reason
    if _genai_prices() is not None:
        return None
    unpriced = next((name for name in names if name not in _COSTED_BY_ITSELF), None)
    if unpriced is None:
        return None
    return f"no price for {unpriced}'s answers without the genai-prices package: {_PRICES_INSTALL}"


_COSTED_BY_ITSELF = frozenset({"openrouter"})
"""The presets whose answers say what they cost in full (OpenRouter's `usage.cost` with its
`cost_details`), which is read without genai-prices (`allama._prices._reported`); xAI's
total is checked against genai-prices' prices before it is taken, so it needs them."""

_PRICES_INSTALL = "pip install 'allama[prices]'"
"""How genai-prices is installed, as a refused budget says it."""


def _check_provider_batch(
    provider: ChatProvider,
    ledger: str | PathLike[str] | None,
    job_retry: str,
    poll_interval: float,
    job_size: int | None,
) -> None:
    from allama.providers._jobs import provider_jobs

    provider_jobs(provider)  # raises for a provider without a batch API allama speaks
    if ledger is None:
        raise ValueError(
            "provider batch jobs outlive the process that submits them: pass ledger= (a "
            "file), so that a later run collects them instead of paying for them again"
        )
    if job_retry not in ("batch", "live"):
        raise ValueError(f"job_retry must be 'batch' or 'live', not {job_retry!r}")
    if (
        isinstance(poll_interval, bool)
        or not isinstance(poll_interval, int | float)
        or not (0 < poll_interval < float("inf"))
    ):
        raise ValueError(
            f"poll_interval must be a positive number of seconds, not {poll_interval!r}"
        )
    if job_size is not None and (
        isinstance(job_size, bool) or not isinstance(job_size, int) or job_size < 1
    ):
        raise ValueError(f"job_size must be a whole number of at least 1, not {job_size!r}")


def key_name(provider: object) -> str:
    """A provider's name as the ledger's keys and a run's settings hold it: a failover's is
    the names of the providers it holds, sorted and each once, so that its order, or one
    more server of a provider it has, keeps its keys (where each sends is the endpoint's
    check, `another_endpoint`). A wrapper that retries or overrides is its provider's."""
    names = sorted(_leaf_names(provider))
    return names[0] if len(names) == 1 else "failover(" + ", ".join(names) + ")"


def _kept_key_name(ledger: Path, provider: ChatProvider, mine: str) -> str:
    """`mine`, or the name a ledger's earlier runs keyed the same failover by, where a
    version before `key_name` made them (its providers' names in the order given): its
    values keep resuming, and what it paid keeps counting. A failover's own `name=` is
    not taken for one: another provider's runs may have it."""
    names = [str(settings.get("provider")) for settings in runs_settings(ledger)]
    if mine in names:
        return mine
    leaves = _leaf_names(provider)
    for name in names:
        if name.startswith("failover(") and (
            name == provider.name
            or (name.endswith(")") and set(name[len("failover(") : -1].split(", ")) == leaves)
        ):
            return name
    return mine


def _leaf_names(provider: object) -> set[str]:
    names: set[str] = set()
    for leaf in _leaves(provider):
        name = getattr(leaf, "name", None)
        if not isinstance(name, str):
            raise TypeError(f"a provider (with its name) is needed, not {type(leaf).__name__}")
        names.add(name)
    return names


def input_key(provider: str | ChatProvider, tp: Any, request: ChatRequest) -> str:
    """The hash an input is known by: what determines its answer (the provider, the type's
    schema, the whole request: model, prompt, document, settings). `provider`: the provider,
    or its name as `key_name` gives it."""
    if not isinstance(provider, str):
        provider = key_name(provider)
    digest = _type_digest(provider, tp).copy()
    digest.update(_request_json(request).encode())
    key: str = digest.hexdigest()
    return key


def _request_json(request: ChatRequest) -> str:
    """A request's JSON, as keys hash it; a text no provider reads said plainly."""
    try:
        return request.model_dump_json()
    except PydanticSerializationError as error:
        if "UnicodeEncodeError" not in str(error):
            raise
        raise ValueError(
            "the request holds half of a character (a lone surrogate, as `\\ud800`), which "
            "is no text and no provider reads: not sent"
        ) from None


def _keys(
    provider: str, tp: Any, template: ChatRequest | None
) -> Callable[[Any, ChatRequest], str]:
    """How a run keys its inputs: `input_key` of each request built, or, for texts added to
    one template, the same key made without the request's JSON: the JSON before the text
    and the type are hashed once, and each input hashes its text (as JSON) and what follows
    it. Making the request's JSON was most of the key's cost."""

    def of_request(document: Any, request: ChatRequest) -> str:
        return input_key(provider, tp, request)

    around = None if template is None else _around_text(template)
    if around is None:
        return of_request
    head, tail = around
    start = _type_digest(provider, tp).copy()
    start.update(head)

    def of_text(document: Any, request: ChatRequest) -> str:
        try:
            text = to_json(document)
        except ValueError:  # text JSON cannot hold (a lone surrogate): as `input_key` says
            return of_request(document, request)
        digest = start.copy()
        digest.update(text)
        digest.update(tail)
        key: str = digest.hexdigest()
        return key

    return of_text


def _inputs_of(provider: str, tp: Any, template: ChatRequest | None) -> str:
    """What a run's inputs are extracted as, in short: the provider, the type's schema and
    the request each text is added to (for requests built by a function, which may each
    differ, the first two: no name or code of a function tells its prompts apart, and a
    budget had better count too much than too little). Runs whose inputs' keys can match
    share it, so that the status of a ledger shared by runs of other settings tells their
    inputs apart, and a budget counts what such runs paid."""
    digest = _type_digest(provider, tp).copy()
    if template is not None:
        digest.update(_request_json(template).encode())
    return str(digest.hexdigest()[:12])


_PROBES = ('\x00allama "probe" é\u2028😀\n\t\\', "a second probe, ☃ </script>")


def _around_text(template: ChatRequest) -> tuple[bytes, bytes] | None:
    """The JSON of `template.user(text)` before and after the text's own JSON, if it is
    made that way (checked with a second text); else `None`."""
    marker = to_json(_PROBES[0])
    whole = _request_json(template.user(_PROBES[0])).encode()
    if whole.count(marker) != 1:
        return None
    head, tail = whole.split(marker)
    check = _PROBES[1]
    if template.user(check).model_dump_json().encode() != head + to_json(check) + tail:
        return None
    return head, tail


_TYPE_DIGESTS: dict[tuple[str, Any, str | None], Any] = {}


def _type_digest(provider: str, tp: Any) -> Any:
    """The hash of the provider and the type's schema, made once per pair. A type form is
    kept by its spelling too: `Literal["b", "a"] == Literal["a", "b"]`, but their schemas
    (and so their keys) differ."""
    key = (provider, tp, None if isinstance(tp, type) else repr(tp))
    try:
        found = _TYPE_DIGESTS.get(key)
    except TypeError:  # an unhashable type form: not kept
        found, key = None, None  # type: ignore[assignment]
    if found is None:
        found = hashlib.sha256()
        found.update(b"allama-batch-1\0")
        found.update(provider.encode())
        found.update(b"\0")
        found.update(_schema_text(tp).encode())
        found.update(b"\0")
        if key is not None and len(_TYPE_DIGESTS) < 256:
            _TYPE_DIGESTS[key] = found
    return found


def _schema_text(tp: Any) -> str:
    """The type's schema as keys hash it and a run's settings keep it: JSON, keys sorted. A
    value no JSON holds (a `datetime` in a model's `json_schema_extra`, which pydantic
    writes as it is) is the `SchemaError` a provider's encoding raises, naming its place."""
    schema = type_schema(tp).schema
    try:
        return json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        try:
            check_json(schema)
        except SchemaError as error:
            raise SchemaError(
                error.pointer,
                f"the type `{type_label(tp)}` has a schema allama cannot read: {error}",
            ) from None
        raise


_SAME_JOB = ("type", "provider", "model")
"""The settings of an earlier run that, the same, make its type's schema worth comparing."""

_COMPARED = (*_SAME_JOB, "types", "schema")
"""The settings `schema_change` reads of a ledger's runs. `schema` is the text a run kept in
its settings before the ledger kept each schema apart, once (`Ledger.schema`)."""


def schema_change(
    earlier: Iterable[Mapping[str, Any]],
    mine: Mapping[str, Any],
    schema: str,
    kept: Callable[[str], str | None] = lambda digest: None,
) -> str | None:
    """Why an input of an earlier run of a type of the same name, provider and model is not
    given from the ledger to a run of settings `mine` and type's schema `schema`: the first
    place where the schema of the last such run in `earlier` (the settings of a ledger's
    other runs, in the order they began) differs from this one, a key holding the schema.
    `None` when one of them has this schema (its digest, `types`, is this run's: whose
    inputs are given), or none of them kept its own (a run of an earlier version). Only the
    last one's schema is read, by its digest (`kept`: `Ledger.schema`), or from its
    settings, where a run of an earlier version kept it."""
    candidates: list[Mapping[str, Any]] = []
    for theirs in earlier:
        if not isinstance(theirs, Mapping) or any(theirs.get(n) != mine.get(n) for n in _SAME_JOB):
            continue
        if theirs.get("types") is not None and theirs.get("types") == mine.get("types"):
            return None
        candidates.append(theirs)
    last: str | None = None
    for theirs in reversed(candidates):  # the last one whose schema is kept
        text, digest = theirs.get("schema"), theirs.get("types")
        if isinstance(text, str):
            last = text
        elif isinstance(digest, str):
            last = kept(digest)
        if last is not None:
            break
    if last is None or last == schema:
        return None
    try:
        tokens = _first_difference(json.loads(last), json.loads(schema))
    except (ValueError, RecursionError):  # a ledger's text that is no JSON
        return None
    if tokens is None:
        return None
    said = (
        f"the type `{mine.get('type')}` has another schema than in an earlier run of the "
        f"ledger with this provider and model (at `{display(child('', *tokens))}`), so an "
        "input of that run given to this one is not taken from the ledger: it is sent, and "
        "paid for, again"
    )
    if any(
        token == "default" and (at == 0 or tokens[at - 1] not in SCHEMA_MAPS)
        for at, token in enumerate(tokens)
    ):
        said += (
            "; a default computed when the module is imported (`uuid4()`, `datetime.now()`) "
            "differs in each process: `Field(default_factory=...)` keeps it out of the schema"
        )
    return said


def ledger_schema_change(
    book: Ledger, spec: _Spec, kept: Mapping[str, Mapping[str, str | None]] | None = None
) -> str | None:
    """`schema_change` of the runs of the ledger other than this one (`book.run_id`), of a
    run of `spec`, reading only what it compares: their settings (`kept`, where read
    already), and the text of one schema."""
    if kept is None:
        kept = book.settings_of_runs(*_COMPARED)
    earlier = [
        {name: kept[name].get(run_id) for name in _COMPARED}
        for run_id in kept["types"]
        if run_id != book.run_id
    ]
    return schema_change(earlier, spec.settings, spec.schema, book.schema)


_ABSENT = object()
"""A key one of two schemas compared has and the other has not."""


def _first_difference(theirs: Any, mine: Any) -> list[str | int] | None:
    """The tokens of the first place (depth first, keys in order) where two JSON values
    differ, a value of another type (`1` and `1.0`) included; `None` when they are equal.
    Iterative: a schema may nest deeper than the interpreter recurses."""
    stack: list[tuple[Any, Any, tuple[str | int, ...]]] = [(theirs, mine, ())]
    while stack:
        one, other, at = stack.pop()
        if type(one) is dict and type(other) is dict:
            keys = sorted(one.keys() | other.keys())
            stack.extend(
                (one.get(key, _ABSENT), other.get(key, _ABSENT), (*at, key))
                for key in reversed(keys)
            )
        elif type(one) is list and type(other) is list:
            both = min(len(one), len(other))
            if len(one) != len(other):  # the first item one of them has not, after the rest
                stack.append(
                    (
                        one[both] if both < len(one) else _ABSENT,
                        other[both] if both < len(other) else _ABSENT,
                        (*at, both),
                    )
                )
            stack.extend((one[i], other[i], (*at, i)) for i in reversed(range(both)))
        elif type(one) is not type(other) or one != other:
            return list(at)
    return None


# The run


_Call = Callable[[ChatRequest], Any]
"""Awaitable extraction of one request (`aextract`, or `extract` in a worker thread)."""


class _Runner:
    def __init__(self, spec: _Spec, call: _Call, emit: Callable[[BatchResult[Any]], None]):
        self.spec = spec
        self.call = call
        self.emit = emit
        self.summary = BatchSummary(total=spec.total)
        self.limiter = RateLimiter(spec.rpm, spec.tpm, backoff=max(spec.backoff, 0.001))
        self.ledger: LedgerWriter | None = None
        self.book: Ledger | None = None
        self.unwritable: sqlite3.Error | None = None
        """The ledger's error when an input's outcome could not be written to it."""
        self.end_unwritten = False
        """Only the run's end could not be written to the ledger."""
        self.gate = Gate()
        """Stopped with the run (a wrapper's retry inside a call is not made, its pause
        ended), closed as it closes or ends (nor is a failover's next provider tried)."""
        self.stopping: str | None = None
        self.random = random.Random()
        self.running: dict[str, asyncio.Future[BatchResult[Any]]] = {}
        """Inputs being worked on in this run, by key: a duplicate input waits for the first."""
        self.paid_earlier: dict[str, Decimal] = {}
        """What earlier runs paid for inputs this run sends again (the records their
        attempts carry), until they end: the summary says it is theirs."""
        self.paid_unfinished: dict[str, list[ExtractionMetadata]] = {}
        """What inputs in flight paid so far, as the ledger keeps it (their attempts before
        the one going on, or its answers before a further call), by key, until they end:
        a run closed early counts it for those it abandons."""
        self.paid_at_cut: dict[str, list[ExtractionMetadata]] = {}
        """Of `paid_unfinished`, what calls the run's close cut had paid (`_keep_cut`),
        written to the ledger as the run ends."""
        self.cut_under_way = 0
        """Calls the run's close cut with an attempt under way (`_keep_cut`): sent, and
        perhaps paid for."""
        self.carried: dict[str, Decimal] = {}
        """What earlier runs paid for inputs this run may send again, until they end: part
        of `job_paid`, which the cost of their end here includes again."""
        self.job_paid = Decimal(0)
        """Under a budget: what the ledger's inputs of this run's settings had paid when it
        started, done or not (the budget is the whole job's)."""
        self.paid_here = Decimal(0)
        """Under a budget: what this run's sends paid since."""
        self.reached: Decimal | None = None
        """What was spent when the run found its budget reached."""
        self.priced_models: dict[str, bool] = {}
        """Under a budget, by request model: whether its cost is known, from genai-prices
        before it is sent, or from an answer of this run (`priced_first`)."""
        self.pricing: dict[str, asyncio.Lock] = {}
        """Under a budget, by request model: held by its one input in flight until a cost
        of that model is known (`priced_first`)."""
        self.writers: dict[str, dict[str, str | None]] = {}
        """Settings of each run of the ledger (the endpoint it sent to, its type's field
        names), by name and run id: read when the run opens its ledger, and again for a run
        started since."""
        self.given_from_ledger: set[int] = set()
        """Inputs an earlier run finished that this run has given, by their key's first 64
        bits (a tenth of the memory of the keys): a later copy is a duplicate, its record
        counted once. Two inputs sharing those bits (about one in 10^8 among a million)
        would only have the second counted as a copy; its value is still its own."""
        self.spans: _tracing.BatchSpans | None = None
        """The run's span and its inputs', when traced."""
        self.slots = asyncio.Semaphore(spec.concurrency)
        """Inputs in flight: claimed inputs wait here to be sent."""
        self.read = 0
        """Inputs read from the iterable so far."""
        self.broken: BaseException | None = None
        """What the caller's iterable raised: raised when the run has ended."""
        self.reader: _Reader | None = None
        """The run's inputs, while they are read: a read that waits is given up at a stop."""
        self.unsent: set[str] = set()
        """Inputs claimed in the ledger (an attempt counted) and not sent yet."""
        self.sync = False
        """Whether the run's loop is a thread of its own (`batch`), not the caller's."""
        self.unread: Callable[[], int] = lambda: 0
        """How many results the caller has not read yet (the driver's queue)."""
        self.most_unread = max(64, 4 * spec.concurrency)
        self.caught_up: asyncio.Event | None = None
        """Set by the driver when the caller has read enough, while the run waits for it."""
        self.budget_drain = False
        """Stopped by the budget, the run goes on reading its inputs and sends none (see
        `draining`)."""
        self.caller_stopped = False
        """The caller stopped the run (`stop()`): it reads no further, budget or not. Each
        flag is only ever set, by its own thread, so neither undoes the other."""
        self.closed = False
        """The run was cancelled before its end (`close()`, the results left early)."""
        self.provider = Turns(
            spec.provider, self.limiter, schema_tokens(spec.tp) if spec.tpm else 0
        )
        """The provider the extractions call: each call takes a turn of the rate limits."""
        self.provider.answered = self._answered
        self.answered_at = float("-inf")
        """When a call last reached the provider (an answer, an error it sent)."""
        self.suspected: tuple[str, str | None, float] | None = None
        """The kind of error the suspect met, the stop it would have made, and when it was
        first sent."""
        self.suspect: str | None = None
        """The input that last met an outage (the provider out of reach, or overloaded at
        every try, nothing else answered meanwhile), while no other has: one input alone
        does not stop the run, since at one in flight nothing else could be answered."""
        self.verdict: asyncio.Future[bool] | None = None
        """The suspect's, while it waits: whether its trouble is its own (`_judged`)."""
        self.tasks: set[asyncio.Task[None]] = set()
        """The inputs' tasks not yet ended."""
        self.reading = True
        """Inputs may still come: the run has not read its last."""
        self.copy_tasks: dict[str, set[asyncio.Task[Any]]] = {}
        """The tasks of copies of an input in flight, waiting for its outcome, by key."""
        self.elsewhere_keys: list[str] = []
        """Inputs left to another run that held them in flight: looked at as the run ends."""
        self.again: dict[str, Callable[[], Any]] = {}
        """How to make another value for each copy of an input whose value reading empties
        (an `Iterable` field), by key: read again from the output it was read from."""
        self.ahead: asyncio.Semaphore | None = None
        """The inputs taken ahead of a free slot (`_run`)."""
        self.holding: set[asyncio.Task[Any]] = set()
        """The tasks holding a place ahead: a suspect waiting for its verdict, and its
        copies, give theirs back, so that the inputs that may answer it are read."""
        self.budget_stopped = False
        """The run's stop was its budget's."""
        self.stopped_by: BatchFailure | None = None
        """The error that stopped the run, every input meeting it (a refused key, a model
        that does not exist): its input is pending, no failure, but the provider's words
        for it are the run's (`--provider-messages` shows them)."""
        self.held_back = 0
        """Inputs a stop held back beyond those not started: set aside, to be tried again
        (pending in the ledger; without one, only this count says so), and failures an
        earlier run ended with that this run would have sent again (`retry_failed`), given
        back as they were after the budget's stop."""
        self.all_read = False
        """Whether the run read its inputs to their end."""

    @property
    def draining(self) -> bool:
        """Whether the run, stopped by its budget, reads on and sends nothing: what an
        earlier run finished is given from the ledger, the rest is not started. Only with a
        ledger and inputs of known number (a collection), which end, and unless the caller
        stopped the run."""
        return self.budget_drain and not self.caller_stopped

    async def run(self) -> None:
        # Its time, rate and ETA count from here: a run starts at the first result asked
        # for, not when it was made.
        self.summary.started = time.monotonic()
        spec = self.spec
        spans = _tracing.start_batch(
            spec.extractor._tracing, spec.provider.name, spec.tp, spec.settings.get("model")
        )
        if spans is None:
            return await self._run()
        self.spans = spans
        tokens = _tracing.in_span(spans.span)
        try:
            await self._run()
        except BaseException as error:
            spans.end(self.summary, error)
            raise
        finally:
            _tracing.out_of_span(tokens)
        spans.end(self.summary, None)

    async def _run(self) -> None:
        spec = self.spec
        self.provider.loop = asyncio.get_running_loop()
        if spec.ledger is not None:
            await self.open_ledger_aside(spec.ledger)
        # Inputs wait for a slot as tasks already made (and claimed in the ledger), as many
        # again as are in flight: a slot that frees is taken in the same turn of the loop,
        # where making the next task, or claiming its input, then would leave a connection
        # idle for a turn or two (and the HTTP pool checks every idle connection on each
        # request: measured, 10 to 20 % of a run's time at 128 in flight).
        ahead = asyncio.Semaphore(2 * spec.concurrency)
        tasks = self.tasks

        async def in_slot(index: int, prepared: tuple[str, ChatRequest, str]) -> None:
            try:
                await self.one(index, prepared)
            finally:
                self._give_back()

        self.ahead = ahead

        failed: list[BaseException] = []

        def settled(task: asyncio.Task[None]) -> None:
            tasks.discard(task)
            self._judge_idle()
            error = None if task.cancelled() else task.exception()
            if isinstance(error, sqlite3.Error):
                self._ledger_broke(error)
            elif error is not None:
                # Not an input's failure (those are results): a fault of allama's own. No
                # new input starts; the run ends with the first of them.
                failed.append(error)
                self.stop(f"the run's work raised {type(error).__name__}")

        inputs = self.reader = _Reader(spec.inputs, self.sync, self, spec.concurrency)
        try:
            for index in itertools.count():
                if self.unread() >= self.most_unread:
                    await self._wait_for_the_caller()
                if failed or (self.stopping is not None and not self.draining):
                    break  # no input is read after a stop: the iterable may never end
                document = await self._next_input(inputs, index)
                if document is _NO_MORE:
                    self.all_read = self.broken is None and not inputs.stopped
                    break
                # Made as it is read, before the next is: an iterable may give one object
                # again, changed (a row updated in place).
                prepared = self._prepared(index, document, time.monotonic())
                if prepared is None:
                    continue
                await ahead.acquire()
                task = asyncio.create_task(in_slot(index, prepared))
                self.holding.add(task)
                tasks.add(task)
                task.add_done_callback(settled)
            self.reading = False
            self._judge_idle()
            await inputs.closed()  # what the iterable gives on its way out is counted
            self._read_ahead_not_started(inputs)
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        except BaseException as error:
            if isinstance(error, asyncio.CancelledError):  # the run closed before its end
                self.closing()
            inputs.close()  # no input is taken while those in flight are cancelled
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            await inputs.closed()
            # Taken from the caller's source (by the reading thread, or on the async
            # iterable's way out) and not by the run: read, and not started.
            taken = len(inputs.taken_ahead())
            self.read += taken
            self.summary.not_started += taken
            raise
        finally:
            inputs.close()
            stopped = self._wrap_up(end_ledger=False)
            await self._end_ledger_aside(stopped)
        if self.unwritable is not None:
            raise self._unwritten() from self.unwritable
        if failed:
            raise failed[0]
        if self.broken is not None:
            raise self.broken

    def _read_ahead_not_started(self, inputs: _Reader) -> None:
        """After a stop: the inputs the reading thread took from the caller's iterable ahead
        of the run come back not started, as those the run read do (the caller of a queue
        puts them back). One the thread was still reading when the run ended is not."""
        if self.stopping is None:
            return
        for document in inputs.taken_ahead():
            index = self.read
            self.read += 1
            prepared = self._prepared(index, document, time.monotonic())
            if prepared is not None:
                label, _, key = prepared
                self._finish(self._not_started(index, key, label))

    async def _next_input(self, inputs: _Reader, index: int) -> Any:
        """The next input, counted as read, or `_NO_MORE`: the inputs ended, the run
        stopped, or reading them raised. What the caller's iterable raises is not an
        input's failure: the run stops (those in flight were paid for: they finish and are
        recorded, the rest are not started) and raises it once it has ended (`broken`). A
        `CancelledError` it raises is raised as a `RuntimeError`, which no driver takes for
        the run's own cancellation."""
        try:
            document = await inputs.next()
        except (Exception, asyncio.CancelledError) as error:
            if isinstance(error, asyncio.CancelledError) and _cancelling():
                raise
            self.stop(f"reading the inputs raised {type(error).__name__} after {index}")
            self.broken = (
                RuntimeError(f"reading the inputs raised {error!r}")
                if isinstance(error, asyncio.CancelledError)
                else error
            )
            return _NO_MORE
        if document is not _NO_MORE:
            self.read += 1
        return document

    def _prepared(
        self, index: int, document: Any, began: float
    ) -> tuple[str, ChatRequest, str] | None:
        """An input's label, request and key (`document` as read, or as the reading thread
        made it), made by the caller's functions; `None` when they raised, which is that
        input's failure (finished here)."""
        made = document if isinstance(document, _Made) else self.made(document, index)
        if made.error is None:
            assert made.request is not None
            return made.label, made.request, made.key
        error = made.error
        if isinstance(error, asyncio.CancelledError) and _cancelling():
            raise error
        failure = _failure(error)
        if made.whose is not None:
            failure = replace(
                failure, message=f"{made.whose} raised {failure.kind}: {failure.message}"
            )
        self._finish(
            BatchResult(index, "", made.label, None, failure, None, 0, time.monotonic() - began)
        )
        return None

    def made(self, document: Any, index: int) -> _Made:
        """What the caller's functions make of an input: its label, request and key, or
        what they raised. Called in the reading thread too, as the input is read."""
        spec = self.spec
        label = f"#{index}"
        whose: str | None = "the label function"  # which of the caller's functions raised
        try:
            label = spec.label(document, index)
            whose = None if spec.template is not None else "the request function"
            request = spec.build(document)
            whose = None
            if not isinstance(request, ChatRequest):
                _not_a_request(request)
            return _Made(label, request, spec.key(document, request))
        except (Exception, asyncio.CancelledError) as error:
            return _Made(label, None, "", error, whose)

    async def _wait_for_the_caller(self) -> None:
        """Each result not yet read holds its value: past `most_unread` of them, no input
        starts until the caller has read half, so that a slow reader slows the run rather
        than filling the memory (and leaving the loop early leaves few paid results)."""
        caught_up = self.caught_up = asyncio.Event()
        try:
            while self.unread() >= self.most_unread // 2 and (
                self.stopping is None or self.draining
            ):
                await caught_up.wait()
                caught_up.clear()
        finally:
            self.caught_up = None

    def _wrap_up(self, *, end_ledger: bool = True) -> str | None:
        """The run's end in its summary and its ledger (what it holds in flight: pending),
        and its stop as the ledger records it; `end_ledger=False` leaves the ledger to
        `_end_ledger_aside`."""
        summary = self.summary
        suspected = self.suspected
        if suspected is not None and self.stopping is None and self.answered_at < suspected[2]:
            # Ended with the suspect standing, nothing answered since it was first sent: no
            # sign the provider was there at all, said as the stop it may be. (Answered
            # since, but not since its last try, it is pending: an outage may have begun
            # during its tries.)
            kind, said, _ = suspected
            summary.refused = summary.refused or kind
            self.mark_stopped(said or f"the provider could not be reached: {kind}")
        summary.ended = time.monotonic()
        self.gate.close()  # a call still going (a sync run's, in its thread) makes no more
        if self.closed:  # what was read and has no result: in flight, or waiting for a slot
            given = summary.finished + summary.not_started + summary.elsewhere + summary.in_jobs
            summary.abandoned = max(0, self.read - given)
            # Their calls under way: cut (async), or going on in their threads (sync), whose
            # answers no one reads. Either may be paid for, at a cost nothing here says.
            summary.abandoned_calls = min(summary.abandoned, self.cut_under_way)
            # What those paid is in the ledger (pending), and this run's spend.
            for key, records in self.paid_unfinished.items():
                summary.add_paid(records, self.paid_earlier.pop(key, None))
            self.paid_unfinished.clear()
        inputs = self.spec.inputs
        sized = hasattr(inputs, "__len__")
        if sized and self.read >= len(inputs):  # type: ignore[arg-type]
            self.all_read = True  # (a stop comes before the read that would say so)
        if self.stopping is not None and not self.all_read:
            # Inputs left unread by the stop were not started either: as many as there are,
            # or, for an iterable, as the caller said there would be.
            count = len(inputs) if sized else self.summary.total  # type: ignore[arg-type]
            if count is not None:
                self.summary.not_started += max(0, count - self.read)
        budget, spent, reached = self.spec.max_cost, self._known_cost(), self.reached
        if budget is not None and spent > max(budget, reached or budget):
            summary.past_budget = (spent, budget, reached)
        stopped = self.stopping
        if self.held_nothing_back():  # reached, with nothing left to send: no stop
            summary.budget_reached, summary.stopped = summary.stopped, None
            stopped = None
        self.summary.waited = self.limiter.waited
        self.summary.slowdowns = self.limiter.slowdowns
        self.summary.rate_limited = self.limiter.rate_limited
        self.summary.resets_waited = self.limiter.resets_waited
        if end_ledger and self.ledger is not None and self.book is not None:
            self.ledger.close()
            self._end_book(stopped)
        return stopped

    async def _end_ledger_aside(self, stopped: str | None) -> None:
        """The ledger's end (`_wrap_up`'s) off the event loop, which may be the caller's:
        the writes still waiting committed as any on the loop are, then the rest, whose
        waits for SQLite's locks (another run's write, the checkpoint's for readers:
        `Ledger.close`) may be long, in a thread."""
        if self.ledger is None or self.book is None:
            return
        await self.ledger.aclose()
        await aside(lambda: self._end_book(stopped))

    def _end_book(self, stopped: str | None) -> None:
        """What the run leaves in the ledger as it ends (`stopped`: its stop), and its
        close."""
        book, summary = self.book, self.summary
        if book is None:
            return
        if self.paid_at_cut:  # pending with it, as a pass kept before a further call is
            with contextlib.suppress(sqlite3.Error), book._transaction():
                for key, records in self.paid_at_cut.items():
                    paid, before = records[-1], records[:-1]
                    book._keep_paid(key, _stored_record(paid, before), _paid_text(paid, before))
        if self.elsewhere_keys:  # the run that held them may have ended, unfinished
            with contextlib.suppress(sqlite3.Error):
                summary.elsewhere_left = book.left_by_ended_runs(self.elsewhere_keys)
        if self.unsent:  # claimed, then abandoned before their send: no attempt made
            with contextlib.suppress(sqlite3.Error), book._transaction():
                for key in self.unsent:
                    book._release(key)
        try:
            book.end(stopped)
        except sqlite3.Error as error:  # raised by the run as it ends, naming the ledger
            self.end_unwritten = self.unwritable is None
            self.unwritable = self.unwritable or error
        finally:
            with contextlib.suppress(sqlite3.Error):
                book.close()

    def _ledger_broke(self, error: sqlite3.Error) -> None:
        """The ledger could not be written (a full disk, a lock held past SQLite's wait):
        no new input starts, and the run raises it, named, at its end (`_unwritten`)."""
        self.unwritable = self.unwritable or error
        self.stop(_unwritable(error))

    def _unwritten(self) -> LedgerError:
        """The run's error when its ledger could not be written: what of the run it lacks."""
        assert self.unwritable is not None
        unkept = self.summary.unkept
        if self.end_unwritten:
            said = (
                "as the run ended (what every input ended with is in it; the run shows as "
                "never finished)"
            )
        elif unkept:
            one = unkept == 1
            said = (
                f"{'1 input' if one else f'{unkept} inputs'} this run ended "
                f"{'is' if one else 'are'} not in it (given all the same; a run again sends "
                f"{'it' if one else 'them'} again)"
            )
        elif self.summary.done or self.summary.failed:
            # (A write while an input was in flight, a lock held a while: what ended is in
            # it, and the run stopped starting inputs.)
            said = "every input this run ended is in it; the run started no more"
        else:
            said = ""
        if self.spec.provider_batch and self.summary.jobs:
            said += f"; {JOBS_KEPT}"
        return ledger_unwritten(self.spec.ledger, self.unwritable, said)

    def held_nothing_back(self) -> bool:
        """Whether the budget's stop held nothing back: every input was read, and each
        was finished (or given from the ledger) rather than left unsent."""
        summary = self.summary
        left = summary.not_started + summary.pending + summary.abandoned + self.held_back
        if self.spec.provider_batch:  # its own jobs, left open at the stop
            left += summary.in_jobs
        return (
            self.budget_stopped
            and not (self.caller_stopped or self.closed)
            and self.all_read
            and left == 0
        )

    def stop(self, reason: str) -> None:
        """Stop starting inputs; on the run's loop (`mark_stopped` and `wake` apart from
        it)."""
        self.mark_stopped(reason)
        self.wake()

    def caller_stop(self, reason: str, loop: asyncio.AbstractEventLoop | None) -> None:
        """The caller's `stop`, from any thread or a signal handler: said at once (the
        summary), then the run's loop (`None` before it started) woken, which may wait in
        its selector for a read of the inputs or for the caller to read."""
        self.caller_stopped = True
        self.mark_stopped(reason)
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the run is over
                loop.call_soon_threadsafe(self.wake)

    def closing(self) -> None:
        """The run was cancelled before its end: said, and `_wrap_up` counts what it left."""
        self.closed = True
        self.mark_stopped(CLOSED_EARLY)
        self.gate.close()  # a sync run's calls go on in their threads: no further call

    def mark_stopped(self, reason: str) -> None:
        if self.stopping is None and self.summary.ended is None:  # an ended run stops no more
            self.stopping = self.summary.stopped = reason  # the run so far says so at once

    def wake(self) -> None:
        """Wake what waits for something other than the stop: a read of the inputs, the
        caller's reading of the results, the rate limits' waits."""
        if self.reader is not None:
            self.reader.give_up()
        if self.caught_up is not None:
            self.caught_up.set()
        self.limiter.halt()  # a turn, a pause or a wait before a try again
        self.gate.stop()  # and a wrapper's, inside a call: no retry after a stop
        self._judge(own=False)  # a suspect waiting for its verdict: pending

    def _finish(self, result: BatchResult[Any]) -> None:
        _tracing.input_result(result, self.spans)
        if result.failure is not None and result.failure.kind == IN_FLIGHT_ELSEWHERE:
            self.elsewhere_keys.append(result.key)
        if result.pending and self.draining:
            # What it paid is in its result: a copy read on after the stop carries none.
            self.first_read(result.key)
        if self.spec.max_cost is not None:
            self._count_paid(result)
        if not result.duplicate:
            self.paid_unfinished.pop(result.key, None)
        self.summary.add(result, self.paid_earlier.pop(result.key, None))
        self._check_budget(result)
        self.emit(result)

    def _count_paid(self, result: BatchResult[Any]) -> None:
        """Add what an input's sends in this run paid to `paid_here`: its cost, less what
        earlier runs had paid for it (counted in `job_paid`). An input given from the
        ledger, a copy, one not sent paid nothing here."""
        failure = result.failure
        if failure is not None and failure.kind == NOT_STARTED:
            return  # what an earlier run paid for it is in `job_paid`
        sent_here = result.metadata is not None or result.spent  # (one taken over was)
        if failure is not None and failure.kind in _NOT_ENDED_HERE and not sent_here:
            return
        earlier = self.carried.pop(result.key, None)
        if result.resumed or result.duplicate:
            return
        records = [*result.spent, *([result.metadata] if result.metadata is not None else [])]
        cost, _ = _cost_of(records) if records else (None, None)
        if cost is not None:  # (unknown: `_check_budget` stops the run)
            paid = cost if earlier is None else MONEY.subtract(cost, earlier)
            self.paid_here = MONEY.add(self.paid_here, paid)

    def carry_from(self, book: Ledger) -> None:
        """Under a budget, count what the ledger's unfinished inputs paid for before the
        run reads them (a failed input, one left pending): a run again under the same
        budget sends nothing more."""
        if self.spec.max_cost is None:
            return
        earlier = paid_before(self.spec, book)
        if isinstance(earlier, str):  # what earlier runs paid cannot be counted: nor the budget
            self._stop_for_budget(
                f"the cost of inputs earlier runs sent is unknown ({earlier}): the budget of "
                f"${self.spec.max_cost:f} cannot be kept"
            )
            return
        self.job_paid, unfinished = earlier
        for key, cost in unfinished.items():
            with contextlib.suppress(ArithmeticError):
                self.carried[key] = Decimal(cost)
        self._check_known()

    def _check_known(self) -> None:
        budget = self.spec.max_cost
        if budget is None or self.stopping is not None:
            return
        known = self._known_cost()
        if known >= budget:
            self.reached = known
            before = self.job_paid
            self._stop_for_budget(
                f"the budget of ${budget:f} is reached (${dollars(known)}"
                + (f", ${dollars(before)} of it paid before this run)" if before else ")")
            )

    def _count_attempt(self, key: str, label: str, record: ExtractionMetadata) -> None:
        """Under a budget, an attempt paid for that is tried again counts at once, not when
        its input ends: inputs trying again would pass the budget unseen. Kept with what
        `_count_paid` leaves out then, as what earlier runs paid is. One paid at a price
        unknown stops the run at once, as an input's would when it ends."""
        budget = self.spec.max_cost
        if budget is None:
            return
        cost, missing = _cost_of([record])
        if cost is None:  # paid, at a price unknown: no input more is sent
            self._stop_for_budget(
                f"the cost of an attempt of {label} is unknown ({missing}): the budget of "
                f"${budget:f} cannot be kept"
            )
            return
        self.carried[key] = MONEY.add(self.carried.get(key, Decimal(0)), cost)
        self.paid_here = MONEY.add(self.paid_here, cost)
        self._check_known()

    def _carry(self, key: str) -> None:
        """Count what earlier runs paid for an input sent again toward the budget before
        it is sent (`earlier_of`): the budget is the whole job's. (Unknown, it is told when
        the input ends, as its own cost would be.)"""
        cost = self.paid_earlier.get(key)
        if cost is None:
            return
        # What another run paid for it since this one started (all of it, for an input left
        # after; what its passes since added, for one it was sending then) counts now.
        before = self.carried.get(key)
        grown = cost if before is None else MONEY.subtract(cost, before)
        if grown > 0:
            self.job_paid = MONEY.add(self.job_paid, grown)
        self.carried[key] = cost
        self._check_known()

    @contextlib.asynccontextmanager
    async def priced_first(self, model: str) -> AsyncIterator[None]:
        """Under a budget, where genai-prices has no price for `model` at the provider, one
        input of it in flight until an answer of it has a known cost: an answer at a price
        unknown stops the run, and each input sent beside it would have been paid for past
        the budget (a slot each). Not refused before: the answer may name a priced model
        (an Azure deployment's) or say what it cost (OpenRouter's)."""
        if self.spec.max_cost is None or self.stopping is not None or self._priced(model):
            yield
            return
        lock = self.pricing.setdefault(model, asyncio.Lock())
        await lock.acquire()
        if self.priced_models[model]:  # known while this one waited: no longer one at a time
            lock.release()
            yield
            return
        try:
            yield
        finally:
            lock.release()

    def _priced(self, model: str) -> bool:
        """Whether what a request of `model` costs is known: looked up once."""
        known = self.priced_models.get(model)
        if known is None:
            usage = Usage(input_tokens=1, output_tokens=1)
            known = isinstance(cost_of(self.spec.provider.name, model, usage), Cost)
            self.priced_models[model] = known
        return known

    def _note_priced(self, model: str, outcome: Extracted[Any] | Exception) -> None:
        """Under a budget, whether a send's answer had a known cost: its model's inputs go
        on at the run's concurrency (`priced_first`)."""
        if self.spec.max_cost is None or self.priced_models.get(model, True):
            return
        record = (
            outcome.metadata
            if isinstance(outcome, Extracted)
            else ExtractionMetadata.from_error(outcome)
        )
        if record is not None and _paid_any([record]) and _cost_of([record])[0] is not None:
            self.priced_models[model] = True

    def _stop_for_budget(self, reason: str) -> None:
        """Stop sending; with a ledger, inputs of known number are still read, so that what
        earlier runs finished is given back (a run again under a spent budget gives every
        value it paid for)."""
        if self.stopping is not None:
            return  # stopped already (the caller): no drain
        self.budget_stopped = True
        if self.book is not None and hasattr(self.spec.inputs, "__len__"):
            self.budget_drain = True
        self.stop(reason)

    def _known_cost(self) -> Decimal:
        return MONEY.add(self.job_paid, self.paid_here)

    def _check_budget(self, result: BatchResult[Any]) -> None:
        budget = self.spec.max_cost
        if budget is None or self.stopping is not None:
            return
        if result.metadata is not None and not result.resumed:
            cost, missing = _cost_of([*result.spent, result.metadata])
            if cost is None and _paid_any([*result.spent, result.metadata]):
                self._stop_for_budget(
                    f"the cost of {result.label} is unknown ({missing}): "
                    f"the budget of ${budget:f} cannot be kept"
                )
                return
        self._check_known()

    async def one(self, index: int, prepared: tuple[str, ChatRequest, str]) -> None:
        await self.in_input_span(index, self._one(index, prepared))

    async def in_input_span(self, index: int, work: Coroutine[Any, Any, None]) -> None:
        """`work` for one input, under its span where the run is traced (its calls'
        spans, and its result, go on it)."""
        span = None if self.spans is None else self.spans.start_input(index)
        if span is None:
            return await work
        tokens = _tracing.in_span(span, index)
        try:
            await work
        except asyncio.CancelledError:  # the run was closed before its end: left, no result
            _tracing.abandoned(span)
            raise
        finally:
            _tracing.out_of_span(tokens)
            _tracing.end_span(span)

    async def _one(self, index: int, prepared: tuple[str, ChatRequest, str]) -> None:
        began = time.monotonic()
        label, request, key = prepared
        first = self.running.get(key)
        if first is not None:
            me = asyncio.current_task()
            assert me is not None  # (a run's inputs are tasks)
            self.copy_tasks.setdefault(key, set()).add(me)
            if self.verdict is not None and self.suspect == key:
                self._give_back(me)
            self._judge_idle()
            try:
                same = await asyncio.shield(first)
            finally:
                copies = self.copy_tasks[key]
                copies.discard(me)
                if not copies:
                    del self.copy_tasks[key]
            made = self.again.get(key) if key in self.copy_tasks else self.again.pop(key, None)
            self._finish(_duplicate(index, label, same, made))
            return
        if self.stopping is not None:
            self._finish(await self._unsent(index, key, label))
            return
        outcome: asyncio.Future[BatchResult[Any]] = asyncio.get_running_loop().create_future()
        self.running[key] = outcome
        try:
            try:
                result = await self._claimed(index, key, label, request, began)
            except sqlite3.Error as error:  # the ledger failed: said, and the input counted
                result = self._ledger_failed(index, key, label, error)
                self._finish(result)
            outcome.set_result(result)
        except BaseException as error:
            outcome.set_exception(error)
            outcome.exception()  # retrieved: a duplicate that waits gets it, none is logged
            raise
        finally:
            del self.running[key]

    async def _claimed(
        self, index: int, key: str, label: str, request: ChatRequest, began: float
    ) -> BatchResult[Any]:
        spec = self.spec
        attempts = 1
        paid: list[ExtractionMetadata] = []
        if self.ledger is not None:
            # Counted unsent from before its claim commits: a run ended while it waits for
            # the commit gives it back too (a claim of another run's input gives nothing).
            self.unsent.add(key)
            claim = await self.ledger.claim(key, index, label, retry_failed=spec.retry_failed)
            if not claim.granted and (
                claim.row is not None
                and claim.row.status == Status.FAILED
                and spec.retry_failed
                and claim.row.run_id != self.ledger.run_id
            ):
                claim = await self.ledger.reclaim(key, index, label)
            if not claim.granted:
                self.unsent.discard(key)
                assert claim.row is not None
                if claim.row.status == Status.SUBMITTED:
                    failure = BatchFailure(
                        IN_PROVIDER_JOB,
                        f"in provider batch job {claim.row.job}: a run with provider_batch=True "
                        "(--provider-batch) collects it",
                    )
                    result: BatchResult[Any] = BatchResult(
                        index, key, label, None, failure, None, 0, 0.0
                    )
                elif claim.elsewhere:
                    failure = BatchFailure(
                        IN_FLIGHT_ELSEWHERE, "in flight in another run of this ledger"
                    )
                    result = BatchResult(index, key, label, None, failure, None, 0, 0.0)
                else:
                    result = self._given(index, label, claim.row)
                    self._copies_read_from(claim.row)
                self._finish(result)
                return result
            attempts = claim.attempts
            paid = self.earlier_of(key, claim.row)
        return await self._attempt(index, key, label, request, attempts, began, paid)

    def _given(self, index: int, label: str, row: LedgerRow) -> BatchResult[Any]:
        """An input the ledger holds finished, as this run gives it."""
        assert self.ledger is not None
        if row.run_id == self.ledger.run_id:
            # Finished earlier in this run: a copy of an input that came before.
            first = self._from_ledger(index, label, row)
            return _duplicate(index, label, replace(first, resumed=False))
        result = self._from_ledger(index, label, row)
        return result if self.first_read(row.key) else _duplicate(index, label, result)

    async def _unsent(self, index: int, key: str, label: str) -> BatchResult[Any]:
        """An input read after the run stopped: not started, unless the ledger holds it
        finished (while the budget's stop reads on). One an earlier run left pending after
        paying for passes carries their records, as its next attempt would."""
        if self.draining and self.ledger is not None:
            try:
                row = await self.ledger.kept(key)
            except sqlite3.Error as error:  # what the ledger holds of it cannot be read
                self._ledger_broke(error)
                return self._not_started(index, key, label)
            if row is not None and row.status in (Status.DONE, Status.FAILED):
                if row.status == Status.FAILED and self.spec.retry_failed:
                    self.held_back += row.run_id != self.ledger.run_id
                return self._given(index, label, row)
            # (A copy of one this run left pending has it counted with that copy's result.)
            paid = _paid_before(row)
            if paid and row is not None and self.first_read(key):
                # Its attempts with what they paid, as the ledger's status counts them.
                return replace(
                    self._not_started(index, key, label), spent=tuple(paid), attempts=row.attempts
                )
        return self._not_started(index, key, label)

    def earlier_of(self, key: str, row: LedgerRow | None) -> list[ExtractionMetadata]:
        """The records of what earlier runs paid for an input this run sends again
        (`_paid_before`), their cost kept for the summary as theirs."""
        paid = _paid_before(row)
        cost, _ = _cost_of(paid) if paid else (None, None)
        if cost is not None:
            self.paid_earlier[key] = cost
        return paid

    def first_read(self, key: str) -> bool:
        """Whether an input an earlier run finished is given for the first time in this run
        (it is counted as given from now on): a later copy is a duplicate."""
        given = key_bits(key)
        if given in self.given_from_ledger:
            return False
        self.given_from_ledger.add(given)
        return True

    def _not_started(self, index: int, key: str, label: str) -> BatchResult[Any]:
        failure = BatchFailure(NOT_STARTED, f"not started: {self.stopping}")
        return BatchResult(index, key, label, None, failure, None, 0, 0.0)

    async def _attempt(
        self,
        index: int,
        key: str,
        label: str,
        request: ChatRequest,
        attempts: int,
        began: float,
        paid: list[ExtractionMetadata] | None = None,
    ) -> BatchResult[Any]:
        """Send a claimed input when a slot frees, and again after errors that may pass.

        The slot is held for the call alone: recording the outcome (a ledger commit) and
        waiting before a retry leave it to the next input. Under a budget the outcome is
        recorded before the slot is given back, so that no input starts past the budget.
        `paid`: what earlier runs' attempts of the input paid for, counted with its own
        (and, under a budget, before it is sent)."""
        tries = _Tries(attempts)
        hold = self.spec.max_cost is not None
        if paid:
            tries.spent.extend(paid)
            if hold:
                self._carry(key)
        while True:
            async with self.slots, self.priced_first(request.model) if hold else _NO_HOLD:
                if self.stopping is None:
                    sent_at, tries.estimate = await turn_for(self.limiter, request, self.provider)
                if (
                    tries.last is None
                    and self.ledger is not None
                    and time.monotonic() - began >= _ledger.HEARTBEAT_SECONDS
                    and not await self.ledger.still_held(key)
                ):
                    # Claimed long ago (a paused process): another run may have seen this
                    # one as ended and taken it over, and sends it itself.
                    self.unsent.discard(key)
                    return self._taken_over(
                        index, key, label, None, 0, time.monotonic(), [], said=TAKEN_OVER_UNSENT
                    )
                if self.stopping is not None and tries.last is None:
                    # Never sent: stopped before its turn came, or while it waited for it
                    # (or for the look-up above).
                    if self.ledger is not None:
                        await self.ledger.release(key)
                    self.unsent.discard(key)
                    # Not started; or, read on after a budget's stop, a failure claimed
                    # again (`retry_failed`) and given back: as the ledger holds it.
                    result = await self._unsent(index, key, label)
                    self._finish(result)
                    return result
                if self.stopping is not None:
                    # Stopped while its next try waited for its turn: not sent again. (A
                    # rate limit is no try, but was sent: its attempt stands.)
                    return await self._not_tried_again(index, key, label, tries, began)
                if tries.last is None:
                    # An input's time runs from its first send: not its wait for a slot.
                    began = time.monotonic()
                    self.unsent.discard(key)
                if tries.owed:
                    # A try again is counted on disk before it is sent, and only then: a
                    # run that stops or ends while it waits for its turn made no attempt.
                    tries.owed = False
                    # Every send is an attempt, a rate limit's too, with a ledger or not.
                    try:
                        counted = (
                            await self.ledger.again(key)
                            if self.ledger is not None
                            else tries.attempts + 1
                        )
                    except sqlite3.Error as error:  # not counted, so not sent: the run stops
                        self._ledger_broke(error)
                        return await self._not_tried_again(index, key, label, tries, began)
                    if counted == 0:  # taken over by another run: not sent from here
                        record = tries.last[1] if tries.last is not None else None
                        return self._taken_over(
                            index, key, label, record, tries.attempts, began, tries.spent
                        )
                    tries.attempts = counted
                    if self.stopping is not None:
                        # Stopped as its attempt was counted (another input's outcome, in
                        # the same commit, reached the budget): not sent, given back.
                        try:
                            tries.attempts = (
                                await self.ledger.unsent_attempt(key)
                                if self.ledger is not None
                                else tries.attempts - 1
                            )
                        except sqlite3.Error as error:  # counted on disk, though never sent
                            self._ledger_broke(error)
                        return await self._not_tried_again(index, key, label, tries, began)
                tries.tried += 1
                tries.sent = time.monotonic()
                self.summary.in_flight += 1
                outcome: Extracted[Any] | Exception
                # The extraction's first call goes on this turn; each further call it makes
                # (a retry, a repair) takes a turn of its own (`Turns`).
                turn = Turn(sent_at, tries.estimate)
                if self.ledger is not None:
                    turn.keep = functools.partial(self._keep_passes, key, tries.spent)
                entered = TURN.set(turn)
                call: Call | None = None
                try:
                    with gate_entered(self.gate, in_thread=self.sync) as call:
                        outcome = await self.call(request)
                except Exception as failed:  # provider errors, and the caller's own code's
                    outcome = failed
                except asyncio.CancelledError:
                    if _cancelling():
                        if call is not None:
                            self._keep_cut(key, tries.spent, turn, call)
                        raise
                    outcome = CallCancelled()  # the call's own, not the run's: its failure
                finally:
                    TURN.reset(entered)
                    turn.answered.clear()  # kept for a call that would follow: none does
                    self.summary.in_flight -= 1
                sent_at = turn.sent_at
                # Its own passes answered before its last call are no news of the provider.
                tries.sent = max(tries.sent, turn.called)
                if _answered_by_any(outcome):
                    self._answered()
                if hold:
                    self._note_priced(request.model, outcome)
                    concluded = await self._conclude(
                        index, key, label, outcome, tries, began, sent_at
                    )
            if not hold:
                concluded = await self._conclude(index, key, label, outcome, tries, began, sent_at)
            if isinstance(concluded, _Suspected):  # judged out of its slot: others go on
                return await self._judged(index, key, label, concluded, tries, began)
            if concluded is not None:
                return concluded

    async def _keep_passes(
        self, key: str, spent: list[ExtractionMetadata], paid: ExtractionMetadata
    ) -> None:
        """What a send's calls were answered so far, kept with what its input's earlier
        attempts paid: the final record (or the failure's) takes its place."""
        assert self.ledger is not None
        try:
            await self.ledger.keep_paid(key, _stored_record(paid, spent), _paid_text(paid, spent))
        except sqlite3.Error as error:  # the send goes on: its end is written, or given unkept
            self._ledger_broke(error)
        self.paid_unfinished[key] = [*spent, paid]

    def _keep_cut(self, key: str, spent: list[ExtractionMetadata], turn: Turn, call: Call) -> None:
        """A call the run's close cut: whether an attempt of it was under way (counted as
        an abandoned call, perhaps paid for; not a retry's pause), and what its send paid
        before the cut (its answers, and what a failover's providers tried before it or a
        retry's attempts reported paying, which only the call's return would have told the
        run: the wrappers tell the call as they go, `allama.wrappers._gate`), kept as a
        pass answered before a further call is (`_keep_passes`): counted by `_wrap_up`,
        and the input's record in the ledger, for the run that sends it again. Alike for a
        sync run, whose call goes on in its thread: what it pays from now is unread."""
        under_way, turn.paid_inside = call.at_cut()
        if under_way:
            self.cut_under_way += 1
        paid = turn.paid_so_far()
        if paid is not None and _paid_any([paid]):
            self.paid_unfinished[key] = self.paid_at_cut[key] = [*spent, paid]

    def _taken_over(
        self,
        index: int,
        key: str,
        label: str,
        record: ExtractionMetadata | None,
        attempts: int,
        began: float,
        spent: list[ExtractionMetadata],
        said: str = "",
        warned: tuple[Warning, ...] = (),
    ) -> BatchResult[Any]:
        """An input another run of the ledger took over while this one waited to try it
        again, or before its answer here was recorded: that run sends it and records its
        outcome; this one's result keeps what its own attempts paid (`record`, the last's,
        and `spent`, those before)."""
        failure = BatchFailure(IN_FLIGHT_ELSEWHERE, said or TAKEN_OVER)
        seconds = time.monotonic() - began
        return self._without_value(
            index, key, label, failure, record, attempts, seconds, spent, warnings=warned
        )

    async def _not_tried_again(
        self, index: int, key: str, label: str, tries: _Tries, began: float
    ) -> BatchResult[Any]:
        """An input the run stopped before trying again: pending, with what it last met."""
        assert tries.last is not None
        error, record = tries.last
        return await self._set_aside(
            index, key, label, error, record, tries.attempts, began, tries.spent
        )

    async def _judged(
        self,
        index: int,
        key: str,
        label: str,
        suspected: _Suspected,
        tries: _Tries,
        began: float,
    ) -> BatchResult[Any]:
        """The suspect's outcome, once the run tells an outage from its own trouble: a
        call answered after its last try makes it its own (a failure, as any input's);
        another input meeting the outage too stops the run, and it is pending, as it is
        when the run stops otherwise or has nothing else left to be answered (an outage
        for all the run can tell: `_wrap_up` says so)."""
        error, record = suspected.error, suspected.record
        if record is not None and _paid_any([record]):
            self._count_attempt(key, label, record)  # counted toward the budget as it waits
        verdict: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.verdict = verdict
        if self.stopping is not None:
            verdict.set_result(False)
        # Its place ahead, and its copies', go to the inputs after it, which may answer it.
        self._give_back(asyncio.current_task())
        for copy_task in list(self.copy_tasks.get(key, ())):
            self._give_back(copy_task)
        self._judge_idle()
        try:
            own = await verdict
        finally:
            if self.verdict is verdict:  # (judged, another may since wait for its own)
                self.verdict = None
        if own:
            return await self._record_failure(
                index, key, label, error, record, tries.attempts, began, tries.spent
            )
        return await self._set_aside(
            index, key, label, error, record, tries.attempts, began, tries.spent
        )

    def _answered(self) -> None:
        """A call reached the provider (an answer, an error it sent): it is there, and
        serves; a suspect's trouble is its own."""
        self.answered_at = time.monotonic()
        self.suspect = self.suspected = None
        self._judge(own=True)

    def _give_back(self, task: asyncio.Task[Any] | None = None) -> None:
        """Give back `task`'s place ahead (the current task's by default), once."""
        task = task or asyncio.current_task()
        if task in self.holding and self.ahead is not None:
            self.holding.discard(task)
            self.ahead.release()

    def _judge(self, *, own: bool) -> None:
        verdict = self.verdict
        if verdict is not None and not verdict.done():
            verdict.set_result(own)

    def _judge_idle(self) -> None:
        """The suspect's verdict when nothing else can be answered: every input read, and
        no task left but the suspect's and its copies waiting for it."""
        if self.verdict is None or self.reading or self.suspect is None:
            return
        if len(self.tasks) <= 1 + len(self.copy_tasks.get(self.suspect, ())):
            self._judge(own=False)

    async def _conclude(
        self,
        index: int,
        key: str,
        label: str,
        outcome: Extracted[Any] | Exception,
        tries: _Tries,
        began: float,
        sent_at: float,
    ) -> BatchResult[Any] | _Suspected | None:
        """Record how a call ended, or wait and count another attempt (`None`: send again;
        `_Suspected`: the input alone met an outage, judged out of its slot)."""
        spent = tries.spent
        if isinstance(outcome, Error):
            record = ExtractionMetadata.from_error(outcome)
            step = _retry_step(outcome, tries, self.spec.max_attempts)
            asked = asked_wait(outcome)
            if step is False and isinstance(_passing(outcome), RateLimitedError) and asked:
                # Too long a wait stops the run: the input is left for the run that follows,
                # as one tried again would be, not failed for the provider's limit. (A
                # failover's backup at its limit after a busy provider asked for the busy
                # one's wait: no cause to slow the run.)
                step = _slow_down_unretried(self.limiter, asked, sent_at) or False
            elif isinstance(outcome, RateLimitedError) and (
                step is not True or not isinstance(_passing(outcome), RateLimitedError)
            ):
                # Met, though not waited for (a failover's backup, sent again when its
                # first provider was busy a moment): counted too.
                self.limiter.rate_limited += 1
            if isinstance(step, str):
                return await self._set_aside(
                    index, key, label, outcome, record, tries.attempts, began, spent, step
                )
            if step:
                # A rate limit slows the run now, before anything is awaited: the slot this
                # input gave back is not taken by a request sent into the 429's pause.
                paused_at = time.monotonic()
                pause = (
                    0.0
                    if self.stopping is not None
                    else _retry_pause(
                        self.limiter, outcome, tries.tried, sent_at, self.spec.backoff, self.random
                    )
                )
                tries.last = (outcome, record)
                if record is not None and _paid_any([record]):
                    spent.append(record)  # paid for: a pass, or a failure that reported usage
                    self._count_attempt(key, label, record)
                    tries.last = (outcome, None)
                    if self.ledger is not None:
                        # Kept before the wait: a run closed during it leaves the input
                        # pending with what it paid, for the run that sends it again.
                        try:
                            await self.ledger.keep_paid(
                                key, _stored_or_spent(None, spent), _paid_text(None, spent)
                            )
                        except sqlite3.Error as error:  # the run stops: not tried again
                            self._ledger_broke(error)
                    self.paid_unfinished[key] = list(spent)
                if self.stopping is None:
                    limited = isinstance(_passing(outcome), RateLimitedError)
                    self.summary.retrying += not limited
                    try:
                        await self.limiter.sleep(
                            pause - (time.monotonic() - paused_at), counted=limited
                        )
                    finally:
                        self.summary.retrying -= not limited
                if self.stopping is not None:  # the run stopped before its next try
                    return await self._set_aside(
                        index, key, label, outcome, tries.last[1], tries.attempts, began, spent
                    )
                tries.owed = True  # counted when it is sent, not when its wait began
                return None
            # Nothing answered since its last send: an input first sent before an outage
            # began, and tried again in it, meets the outage, not a failure of its own.
            unanswered = self.answered_at < tries.sent
            stops = _stops(outcome, tries.tried, self.spec.template is not None, unanswered)
            outage = stops is not None and isinstance(outcome, NetworkError)
            chain = errors_in_chain(outcome)
            overloaded = next((e for e in chain if isinstance(e, OverloadedError)), None)
            if (
                stops is None
                and unanswered
                and tries.tried >= _OUTAGE_TRIES
                and overloaded is not None
                and all(
                    isinstance(link, OverloadedError)
                    or _every_input(link, self.spec.template is not None, unanswered)
                    for link in chain
                )
            ):
                # An outage, not the input's failure: every call met it meanwhile (a
                # failover's every provider, overloaded or out of reach). The run stops, its
                # inputs pending for the next run, rather than fail each in turn.
                outage = True
                stops = (
                    f"the provider answered that it is overloaded to {_tries(tries.tried)}, and "
                    f"served no other call meanwhile: {_failure(overloaded).message}"
                )
            if outage and self.suspect in (None, key):
                # One input alone: an outage, or its own trouble (a connection that breaks
                # on it alone). The run goes on and tells them apart (`_judged`).
                self.suspect = key
                self.suspected = (_failure(outcome).kind, stops, began)
                return _Suspected(outcome, record)
            if stops is not None:
                return await self._set_aside(
                    index, key, label, outcome, record, tries.attempts, began, spent, stops
                )
            return await self._record_failure(
                index, key, label, outcome, record, tries.attempts, began, spent
            )
        if isinstance(outcome, Exception):  # the caller's code: its record, when it has one
            record = ExtractionMetadata.from_error(outcome)
            return await self._record_failure(
                index, key, label, outcome, record, tries.attempts, began, spent
            )
        return await self._record_success(index, key, label, outcome, tries.attempts, began, spent)

    async def _record_success(
        self,
        index: int,
        key: str,
        label: str,
        extracted: Extracted[Any],
        attempts: int,
        began: float,
        spent: list[ExtractionMetadata],
    ) -> BatchResult[Any]:
        seconds = time.monotonic() - began
        metadata = extracted.metadata
        warned = request_warnings(extracted.response, metadata)
        if self.ledger is not None:
            try:
                value, source = self._stored(extracted)
            except Exception as error:  # validated and paid for, but the ledger cannot hold it
                unstorable = BatchFailure(
                    VALUE_UNSTORABLE,
                    "the value validated, but its type cannot write it as the JSON the "
                    f"ledger keeps ({type(error).__name__}); a run without a ledger gives it",
                )
                return await self._record_failure(
                    index, key, label, error, metadata, attempts, began, spent, unstorable, warned
                )
            usage = metadata.usage
            recorded = await self._finish_in_ledger(
                key,
                status=Status.DONE,
                seconds=seconds,
                value=value,
                source=source,
                record=_stored_record(metadata, spent, warned),
                cost=_paid_text(metadata, spent),
                tokens=None if usage is None else usage.total_tokens,
            )
            if recorded is False:  # taken over meanwhile: the ledger holds that run's outcome
                return self._taken_over(
                    index, key, label, metadata, attempts, began, spent, ANSWERED_ELSEWHERE, warned
                )
        else:
            recorded = True
        result = BatchResult(
            index,
            key,
            label,
            extracted.value,
            None,
            metadata,
            attempts,
            seconds,
            False,
            tuple(spent),
            unkept=recorded is None,
            warnings=warned,
        )
        if self._copies_to_come(key) and extracted.source is not None:
            root_wrapped = metadata.root_wrapped
            self.again[key] = functools.partial(
                read_again, self.spec.tp, extracted.source, root_wrapped
            )
        self._finish(result)
        return result

    def _copies_read_from(self, row: LedgerRow) -> None:
        """Copies waiting for an input the ledger gave each read its value from the row."""
        if self._copies_to_come(row.key) and row.value is not None:
            spec = self.spec
            self.again[row.key] = functools.partial(
                read_done, spec, row.value, row.source, row.record, self._renamed(row)
            )

    def _copies_to_come(self, key: str) -> bool:
        """Whether copies of an input wait for its outcome: each is given a value of its
        own (`again`), read as the first's was, not the first's object, which the caller
        may change (or reading may empty, an `Iterable` field's) before a copy's turn."""
        return key in self.copy_tasks

    async def _record_failure(
        self,
        index: int,
        key: str,
        label: str,
        error: BaseException,
        record: ExtractionMetadata | None,
        attempts: int,
        began: float,
        spent: list[ExtractionMetadata],
        failure: BatchFailure | None = None,
        warned: tuple[Warning, ...] | None = None,
    ) -> BatchResult[Any]:
        """`warned`: the request's warnings (`BatchResult.warnings`), where `error` is not
        the extraction's (its value's JSON could not be made); else `error`'s."""
        seconds = time.monotonic() - began
        failure = failure or _failure(error)
        if warned is None:
            warned = error_warnings(error)
        if self.ledger is not None:
            recorded = await self._finish_in_ledger(
                key,
                status=Status.FAILED,
                seconds=seconds,
                record=_stored_or_spent(record, spent, warned),
                error=failure.stored(),
                cost=_paid_text(record, spent),
            )
            if recorded is False:  # taken over meanwhile: the ledger holds that run's outcome
                return self._taken_over(
                    index, key, label, record, attempts, began, spent, ANSWERED_ELSEWHERE, warned
                )
        else:
            recorded = True
        return self._without_value(
            index,
            key,
            label,
            failure,
            record,
            attempts,
            seconds,
            spent,
            unkept=recorded is None,
            warnings=warned,
        )

    def _ledger_failed(
        self, index: int, key: str, label: str, error: sqlite3.Error
    ) -> BatchResult[Any]:
        """An input whose ledger write failed before it ended (its claim, its release, its
        keeping for a try again): not started when it was not sent, else this run's
        failure, which the ledger does not hold (a run again sends it again). The run stops
        starting inputs, and raises the ledger's error at its end."""
        self._ledger_broke(error)
        if key in self.unsent:  # claimed (or claiming), never sent: nothing paid
            self.unsent.discard(key)
            return self._not_started(index, key, label)
        self.summary.unkept += 1
        failure = BatchFailure(
            LEDGER_UNWRITABLE,
            f"{_unwritable(error)}: what this input's attempts were answered is not in it, "
            "and a run again sends it again",
        )
        return BatchResult(index, key, label, None, failure, None, 0, 0.0)

    async def _finish_in_ledger(self, key: str, **outcome: Any) -> bool | None:
        """`ledger.finish` (`False`: taken over), where a ledger that cannot be written (a
        full disk, a lock held past SQLite's wait) does not take the answer with it
        (`None`): the input is given as this run ended it, its outcome not kept
        (`summary.unkept`, `result.unkept`), and the run stops starting inputs; it raises
        the ledger's error at its end."""
        assert self.ledger is not None
        try:
            recorded: bool = await self.ledger.finish(key, **outcome)
        except sqlite3.Error as error:
            self.summary.unkept += 1
            self._ledger_broke(error)
            return None
        return recorded

    async def _set_aside(
        self,
        index: int,
        key: str,
        label: str,
        error: BaseException,
        record: ExtractionMetadata | None,
        attempts: int,
        began: float,
        spent: list[ExtractionMetadata],
        stops: str | None = None,
        *,
        failure: BatchFailure | None = None,
        log: list[dict[str, Any]] | None = None,
    ) -> BatchResult[Any]:
        """An input whose error is not its own: the run stopped before trying it again, or
        the error stops the run (`stops` says why: every input would meet it). The input
        is this run's failure, and left pending in the ledger (its attempts counted), for
        the run that follows. `log`: what provider batch jobs answered it so far."""
        failure = failure or _failure(error)
        warned = error_warnings(error)
        self.held_back += 1  # not tried again: pending with a ledger, held back without one
        if stops is not None:
            if self.summary.refused is None:
                self.summary.refused = failure.kind
            if self.stopping is None:
                self.stopped_by = failure
            self.stop(stops)
        kept = self.ledger is not None
        if self.ledger is not None:
            try:
                await self.ledger.set_aside(
                    key,
                    failure.stored(),
                    _stored_or_spent(record, spent, warned),
                    _paid_text(record, spent),
                    log or None,
                )
            except sqlite3.Error as error:  # its failure and what it paid, given unkept
                self.summary.unkept += 1
                self._ledger_broke(error)
                kept = False
        seconds = time.monotonic() - began
        return self._without_value(
            index,
            key,
            label,
            failure,
            record,
            attempts,
            seconds,
            spent,
            pending=kept,
            unkept=self.ledger is not None and not kept,
            warnings=warned,
        )

    def _without_value(
        self,
        index: int,
        key: str,
        label: str,
        failure: BatchFailure,
        record: ExtractionMetadata | None,
        attempts: int,
        seconds: float,
        spent: list[ExtractionMetadata],
        *,
        pending: bool = False,
        unkept: bool = False,
        warnings: tuple[Warning, ...] = (),
    ) -> BatchResult[Any]:
        """The result of an input this run ends without a value, counted in its summary:
        what its last attempt recorded (`record`) and what those before it paid (`spent`)."""
        result: BatchResult[Any] = BatchResult(
            index,
            key,
            label,
            None,
            failure,
            record,
            attempts,
            seconds,
            False,
            tuple(spent),
            pending=pending,
            unkept=unkept,
            warnings=warnings,
        )
        self._finish(result)
        return result

    def _stored(self, extracted: Extracted[Any]) -> tuple[str, str | None]:
        """A value's JSON for the ledger, and the output it was read from where the JSON
        would not read back as the value (a validator that changes what it reads, a
        serializer of the type's own, a union that reads another choice): a resumed run
        reads that output again instead, as the run did."""
        spec, source = self.spec, extracted.source
        if spec.dump_reads_back or source is None:
            return stored_value(spec.adapter, extracted.value), None
        # Writing an `Iterable` empties it: the ledger writes a copy, the caller gets it whole.
        root_wrapped = extracted.metadata.root_wrapped
        copy = read_again(spec.tp, source, root_wrapped) if spec.dump_consumes else None
        value = stored_value(spec.adapter, extracted.value if copy is None else copy)
        secrets = spec.secrets or _holds_secret(extracted.value)
        if copy is None and _reads_back(spec, value, extracted.value, secrets):
            return value, None
        # A type with a secret keeps no output: that its JSON does not read back is kept,
        # so that a resumed run says so rather than hand back another value.
        return value, WITHHELD if secrets else source

    def open_ledger(self, path: str | os.PathLike[str], book: Ledger | None = None) -> None:
        """Open the run's ledger (or take `book`, opened by `_new_book`), registering the
        run, and read what it needs from it: what earlier runs paid (`carry_from`), and
        each run's endpoint."""
        self.book = self._new_book(path) if book is None else book
        self.ledger = LedgerWriter(self.book)
        self.carry_from(self.book)
        # The runs' settings read once, for both.
        kept = self.book.settings_of_runs(*_WRITERS_SETTINGS, *_COMPARED)
        self.writers.update({name: kept[name] for name in _WRITERS_SETTINGS})
        self.say_schema_change(self.ledger, ledger_schema_change(self.book, self.spec, kept))

    async def open_ledger_aside(self, path: str | os.PathLike[str]) -> None:
        """`open_ledger`, the ledger opened in a thread (`aside`): its opening waits for
        another run's write to end (up to a minute), which would stop the event loop,
        perhaps the caller's, meanwhile."""
        self.open_ledger(path, await aside(lambda: self._new_book(path)))

    def _new_book(self, path: str | os.PathLike[str]) -> Ledger:
        try:
            return Ledger(
                path,
                settings=self.spec.settings,
                schema=(self.spec.settings["types"], self.spec.schema),
            )
        except sqlite3.Error as error:  # a lock held, a place it cannot write: named
            raise LedgerError(
                f"the ledger `{path}` cannot be opened for the run: {error}"
            ) from error

    def say_schema_change(self, ledger: LedgerWriter, said: str | None) -> None:
        """Warn where the type's schema differs from that of an earlier run of a type of the
        same name, provider and model (`schema_change`), once the run claims an input the
        ledger does not hold (`LedgerWriter.first_unknown`): an input of that run, whose key
        holds its schema, is sent again, which nothing else says; a run whose inputs the
        ledger all holds sends none of them again."""
        if said is None:
            return

        def say() -> None:
            self.summary.schema_changed = said
            warnings.warn(said, RuntimeWarning, stacklevel=2)

        ledger.first_unknown = say

    def _writers(self, row: LedgerRow, name: str) -> str | None:
        """The setting `name` of the run that finished `row`; `None` where it kept none."""
        if self.book is None or row.run_id is None:
            return None
        known = self.writers.get(name)
        if known is None or row.run_id not in known:
            with contextlib.suppress(sqlite3.Error, LedgerError):  # a run started since
                self.writers.update(self.book.settings_of_runs(*_WRITERS_SETTINGS))
                known = self.writers.get(name)
        return None if known is None else known.get(row.run_id)

    def _other_endpoint(self, row: LedgerRow) -> str | None:
        """The endpoint of the run that finished `row`, where both runs kept theirs and
        it is not among this run's (a failover's servers, in any order); else `None`."""
        mine = self.spec.settings.get("endpoint")
        if mine is None:
            return None
        theirs = self._writers(row, "endpoint")
        return theirs if another_endpoint(mine, theirs) else None

    def _renamed(self, row: LedgerRow) -> bool:
        """Whether the run that finished `row` had a type of the same schema whose fields
        are named otherwise (`stored_names`), both runs having kept theirs."""
        mine = self.spec.settings.get("field_names")
        theirs = self._writers(row, "field_names")
        return mine is not None and theirs is not None and mine != theirs

    def _from_ledger(self, index: int, label: str, row: LedgerRow) -> BatchResult[Any]:
        metadata, earlier = _records_of(row)
        value: Any = None
        failure: BatchFailure | None = None
        elsewhere = self._other_endpoint(row) if row.status == Status.DONE else None
        if elsewhere is not None:
            failure = BatchFailure(
                ANOTHER_ENDPOINT,
                f"finished by an earlier run against another endpoint ({elsewhere}), whose "
                "model of that name may be another: the value stays in the ledger (`allama "
                "batch export` writes it); a ledger of its own for this endpoint sends it",
            )
        elif row.status == Status.DONE and row.value is not None:
            try:
                value = read_done(self.spec, row.value, row.source, row.record, self._renamed(row))
            except (
                ValidationError,
                ReadAgainError,
                ValueNotKept,
                ValueChanged,
                FieldsRenamed,
            ) as invalid:
                failure = _stored_value_invalid(invalid, self.spec.tp)
            except Exception as raised:  # a validator's own error: the input's, as when sent
                failure = _stored_value_invalid(raised, self.spec.tp)
            extractor = self.spec.extractor
            floor = extractor.min_enforcement
            if failure is None and metadata is not None:
                # The key leaves the extractor out: a value an earlier run took below this
                # run's floor, or read from prose around the JSON where this run reads no
                # such answer, is no value this run accepts, as a call's would not be.
                if floor is not None and not metadata.enforcement.satisfies(floor):
                    value, failure = None, _below_floor_stored(metadata.enforcement, floor)
                elif metadata.repaired and not extractor.repair:
                    value, failure = None, _REPAIRED_STORED
        else:
            failure = BatchFailure.of_stored(row.error)
        if failure is not None and row.status == Status.DONE:
            failure = replace(failure, value_kept=True)
        return BatchResult(
            index,
            row.key,
            label,
            value,
            failure,
            metadata,
            row.attempts,
            row.seconds or 0.0,
            True,
            tuple(earlier),
            warnings=kept_warnings(row.record),
        )


_WRITERS_SETTINGS = ("endpoint", "field_names")
"""The settings of the run that finished an input that a run giving it checks."""


def _stops(
    error: Error, tried: int, one_request: bool = False, unanswered: bool = True
) -> str | None:
    """Why an error that is no longer tried again stops the run, since every input (or
    job) would meet it: a refused key or account, a provider not reached in `tried`
    tries while it answered no other call (`unanswered`: a connection that breaks on one
    input while others are answered is that input's), or, when every input goes to the
    same endpoint and model (`one_request`: a template), an endpoint or model that does not
    exist (a wrong base URL); `None` for an error that is the input's own. A failover's
    error stops it only where every provider of it met one of those: one that may serve
    (it was overloaded a moment) does not."""

    if not all(_every_input(link, one_request, unanswered) for link in errors_in_chain(error)):
        return None
    if isinstance(error, ACCOUNT_REFUSALS):
        return f"the provider refused the run's key or account: {_failure(error).message}"
    if isinstance(error, NetworkError):
        return f"the provider could not be reached in {_tries(tried)}: {_failure(error).message}"
    if isinstance(error, NotFoundError):
        return (
            "the provider has no such endpoint or model (check the base URL and the model): "
            f"{_failure(error).message}"
        )
    return None


def _every_input(link: Error, one_request: bool, unanswered: bool) -> bool:
    """Whether every input would meet `link` (`_stops`): a refused key or account, a
    provider out of reach, a missing endpoint or model of a template."""
    return (
        isinstance(link, ACCOUNT_REFUSALS)
        or (unanswered and isinstance(link, NetworkError))
        or (one_request and isinstance(link, NotFoundError))
    )


_OUTAGE_TRIES = 3
"""The tries an input answered "overloaded" at every one of them, while nothing else was
served, takes for an outage that stops the run: fewer may be a moment's (`max_attempts`
of 1 or 2 leaves each such input its own failure)."""


@dataclass(frozen=True, slots=True)
class _Suspected:
    """An input alone that met an outage, its outcome not yet told: the error, and its
    record when it has one."""

    error: Error
    record: ExtractionMetadata | None


@dataclass(slots=True)
class _Tries:
    """One input's sends so far: its recorded attempts, the sends of this run (a rate limit
    not counted), the rate limits met, and the records of attempts that failed after
    paying for passes."""

    attempts: int
    estimate: int = 0
    """The tokens its last turn was taken for (`turn_for`)."""
    tried: int = 0
    limited: int = 0
    spent: list[ExtractionMetadata] = field(default_factory=list)
    last: tuple[Error, ExtractionMetadata | None] | None = None
    """The error the last send met, and its record when not among `spent`: what the input
    ends with if the run stops before it is sent again."""
    owed: bool = False
    """To be sent again: the attempt is counted when it is."""
    sent: float = float("-inf")
    """When its last call began (`time.monotonic`; an extraction's last pass): an outage
    is nothing answered since."""


@dataclass(slots=True)
class Turn:
    """One send of an input: when its last call went, and the tokens that call was
    estimated at (settled by its usage once it answers)."""

    sent_at: float
    estimate: int
    first: bool = True
    """Its first call goes on the turn the run took for it."""
    called: float = float("-inf")
    """When its last call began (`time.monotonic`): an answer after it is news."""
    keep: Callable[[ExtractionMetadata], Awaitable[None]] | None = None
    """Keeps in the ledger what the send's calls were answered so far, before its next
    call (a repair, a retry), so that a run killed during that call loses no record of
    what was paid: the run that sends the input again carries it."""
    answered: list[ChatResponse] = field(default_factory=list)
    """The send's answers so far: for `keep`, and for the record of a call the run's close
    cut (`paid_so_far`)."""
    native: bool = True
    """Its calls ask for the provider's response format (else a forced tool)."""
    paid_inside: list[dict[str, JsonValue]] = field(default_factory=list)
    """What the wrappers inside a call the run's close cut (a failover's providers tried
    before, a retry's attempts) told its gate they paid before it (`Call.at_cut`,
    `paid_for`'s entries): they answered the run nothing, so no answer of `answered`
    holds it."""

    def answer(self, request: ChatRequest, response: ChatResponse) -> None:
        """Keep a call's answer."""
        self.native = request.response_format is not None
        self.answered.append(response)

    def paid_so_far(self) -> ExtractionMetadata | None:
        """The record of what the send paid so far: its answers' passes, usage and cost,
        and what the wrappers inside a cut call paid; `None` when nothing was."""
        if not self.answered and not self.paid_inside:
            return None
        record = ExtractionMetadata.new(
            ExtractionMode.NATIVE if self.native else ExtractionMode.FORCED_TOOL
        )
        for response in self.answered:
            record.record_pass(response)
        record.record_paid(self.paid_inside)
        return record

    async def keep_answers(self) -> None:
        """Before a further call: keep (`keep`) the record of the answers so far, their
        passes, usage and cost."""
        if self.keep is None:
            return
        record = self.paid_so_far()
        if record is not None:
            await self.keep(record)


TURN: contextvars.ContextVar[Turn | None] = contextvars.ContextVar(
    "allama_batch_turn", default=None
)


class Turns:
    """The provider as a run's extractions call it: each call after an extraction's first
    (a retry with the error, a repair) waits for a turn of the run's rate limits, as every
    request does; the first goes on the turn the run took for the input. A call made in a
    worker thread (`batch`) waits for its turn on the run's loop."""

    def __init__(
        self, provider: ChatProvider, limiter: RateLimiter, schema_tokens: int = 0
    ) -> None:
        self._provider = provider
        self.limiter = limiter
        self.schema_tokens = schema_tokens
        """The type's schema, in tokens, which every call carries (`_estimate`)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The run's event loop, where a worker thread's call waits for its turn."""
        self.answered: Callable[[], None] | None = None
        """Told on the run's loop of each call the provider answered: an extraction's pass
        too, not only its end (the provider is there, and serves)."""

    @property
    def name(self) -> str:
        return self._provider.name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    async def _take(self, turn: Turn, request: ChatRequest) -> None:
        await turn.keep_answers()
        limiter = self.limiter
        tokens = _estimate(request, self.schema_tokens, limiter) if limiter.counts_tokens else 0
        turn.estimate = tokens
        turn.sent_at = await limiter.acquire(tokens)
        if limiter.halted:  # the run stopped: this call is in flight, and goes, spaced
            turn.sent_at = await limiter.late_turn()

    async def achat(self, request: ChatRequest) -> ChatResponse:
        turn = TURN.get()
        if turn is None:
            return await self._provider.achat(request)
        if turn.first:
            turn.first = False
        else:
            await self._take(turn, request)
        turn.called = time.monotonic()
        try:
            with sending():  # told the run's gate: a close cutting it counts it
                response = await self._provider.achat(request)
        except Error as error:
            if self.limiter.counts_tokens and _refused_unread(error):
                self.limiter.spent(turn.estimate, 0, turn.sent_at)
            raise
        turn.answer(request, response)
        self.limiter.served(turn.sent_at)
        if (wait := rate_limit_reset(response.provider_data)) is not None:
            self.limiter.until_reset(wait)
        usage = response.usage
        if self.limiter.counts_tokens and usage is not None:
            self.limiter.spent(turn.estimate, usage.total_tokens, turn.sent_at, usage.output_tokens)
        if self.answered is not None:
            self.answered()
        return response

    def chat(self, request: ChatRequest) -> ChatResponse:
        turn = TURN.get()
        if turn is None:
            return self._provider.chat(request)
        if turn.first:
            turn.first = False
        else:
            self._wait_for(turn, request)
        turn.called = time.monotonic()
        try:
            with sending():
                response = self._provider.chat(request)
        except Error as error:
            if self.limiter.counts_tokens and _refused_unread(error) and self.loop is not None:
                with contextlib.suppress(RuntimeError):  # the run's loop closed: it is over
                    self.loop.call_soon_threadsafe(
                        self.limiter.spent, turn.estimate, 0, turn.sent_at
                    )
            raise
        turn.answer(request, response)
        self.limiter.served(turn.sent_at)
        if (wait := rate_limit_reset(response.provider_data)) is not None and self.loop is not None:
            with contextlib.suppress(RuntimeError):  # the run's loop closed: it is over
                self.loop.call_soon_threadsafe(self.limiter.until_reset, wait)
        if self.limiter.counts_tokens and response.usage is not None and self.loop is not None:
            with contextlib.suppress(RuntimeError):  # the run's loop closed: it is over
                usage = response.usage
                self.loop.call_soon_threadsafe(
                    self.limiter.spent,
                    turn.estimate,
                    usage.total_tokens,
                    turn.sent_at,
                    usage.output_tokens,
                )
        if self.answered is not None and self.loop is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.answered)
        return response

    def _wait_for(self, turn: Turn, request: ChatRequest) -> None:
        """Wait on the run's loop for the call's turn; a run closed meanwhile makes no more
        calls (the extraction ends here, its thread with it)."""
        loop = self.loop
        if loop is None:
            return
        take = self._take(turn, request)
        try:
            waited = asyncio.run_coroutine_threadsafe(take, loop)
        except RuntimeError:  # the run's loop closed: the run is over
            take.close()  # never to run
            raise RunClosed() from None
        while True:
            try:
                waited.result(timeout=1.0)
                return
            except concurrent.futures.TimeoutError:
                if loop.is_closed():
                    raise RunClosed() from None
            except concurrent.futures.CancelledError:
                raise RunClosed() from None


class RunClosed(Exception):
    """A call of an extraction in a worker thread, not made: its run was closed."""

    def __init__(self) -> None:
        super().__init__("the batch run was closed before this call's turn came")


def _retry_step(error: Error, tries: _Tries, max_attempts: int) -> bool | str:
    """Whether an input whose call ended in `error` is sent again (`True`), ends with it
    (`False`), or is set aside, the run stopping, since the provider asked for a wait longer
    than a run makes (why, as a line). A rate limit is not counted as a try, up to
    `_MAX_RATE_LIMITED` of them; a failover's sent again after its backup's rate limit is
    counted as the error that may pass is (`_passing`)."""
    if isinstance(_passing(error), RateLimitedError):
        # A rate limit slows the run; it is not the input's failure.
        tries.limited += 1
        tries.tried -= 1
    # A failover's chain: tried again, it may be served by a provider whose error may pass
    # (one overloaded a moment), where the last provider's refused the account (a backup's
    # key), not the request (`may_pass_again`).
    retryable = may_pass_again(error) and not isinstance(error, ExtractionError)
    too_long = _too_long(asked_wait(error))
    if retryable and too_long is not None:
        return too_long
    return retryable and tries.tried < max_attempts and tries.limited < _MAX_RATE_LIMITED


def _passing(error: Error) -> Error:
    """The error an input sent again after `error` waits out, which sets its pause and
    whether it is counted as a try: `error` itself, or, a failover's last provider refusing
    for good (a rate limit no wait passes, its account) after a provider whose error may pass
    (`may_pass_again`), the newest of those. A last provider refusing the request (too long,
    invalid) is the input's own failure: an earlier provider's 429 neither pauses, slows nor
    stops the run for it."""
    if error.retryable or not may_pass_again(error):
        return error
    return next((link for link in errors_in_chain(error) if link.retryable), error)


def _too_long(asked: float | None) -> str | None:
    """Why a wait the provider asked for stops the run: longer than a run waits."""
    if asked is not None and asked > LONGEST_WAIT:
        return f"the provider asked to wait {asked:.0f} s before the next request"
    return None


def _slow_down_unretried(limiter: RateLimiter, asked: float, sent_at: float) -> str | None:
    """A rate limit not tried again (the provider said not to, `x-should-retry: false`, or
    the input's tries are spent) that asked for a wait: the run slows down by it, as for
    any 429; a wait longer than a run makes is not made, and why the run stops instead is
    returned."""
    too_long = _too_long(asked)
    if too_long is None:
        limiter.slow_down(asked, sent_at)
    else:
        limiter.rate_limited += 1  # met, though not waited for
    return too_long


def _retry_pause(
    limiter: RateLimiter,
    error: Error,
    tried: int,
    sent_at: float,
    backoff: float,
    rng: random.Random,
) -> float:
    """How long to wait before sending again after `error`: a rate limit pauses every
    request of the run, from now (`RateLimiter.slow_down`); an overloaded or failing server
    makes this input alone wait, at least as the provider asked and for a backoff doubling
    with each try, jittered (a few milliseconds asked at every try would spend its tries at
    once). A failover's sent again after its backup's rate limit waits as the error that may
    pass asks (`_passing`): no wait lets the backup through, and a primary busy a moment is no
    cause to slow the run."""
    asked = asked_wait(error)
    if isinstance(_passing(error), RateLimitedError):
        return limiter.slow_down(asked, sent_at)
    base = backoff * 2.0 ** min(tried - 1, 32)
    return max(asked or 0.0, min(60.0, base * (0.5 + rng.random() / 2)))


async def turn_for(
    limiter: RateLimiter, request: ChatRequest, provider: Turns
) -> tuple[float, int]:
    """A send's turn of the limits, and the tokens it was taken for (settled by the
    answer's usage), estimated when the turn is asked for: the output as the answers so far
    go, those that came while it waited for a slot counted."""
    estimate = _estimate(request, provider.schema_tokens, limiter) if limiter.counts_tokens else 0
    return await limiter.acquire(estimate), estimate


def _estimate(request: ChatRequest, schema_tokens: int, limiter: RateLimiter) -> int:
    """The tokens a call is counted for before its answer says: its messages, the schema
    the extraction sends beside them, and its output (at most `max_output_tokens`; without
    it, as much as the last answers on average)."""
    output = request.max_output_tokens or limiter.output_guess()
    return guessed_input_tokens(request) + schema_tokens + output


def job_settings(spec: _Spec) -> dict[str, Any]:
    """The settings that make runs one job, as the budget counts it (`_Agreement`)."""
    names = ("provider", "model", "inputs", "types", "type")
    return {name: spec.settings.get(name) for name in names}


def paid_before(spec: _Spec, book: Ledger) -> tuple[Decimal, dict[str, str]] | str:
    """What earlier runs of the same job (provider, model and inputs' settings) paid, in
    all and by each unfinished input; or why it cannot be counted (a cost unknown)."""
    like = job_settings(spec)
    unknown = book.unpriced(like)
    return unknown if unknown is not None else book.paid(like)


def schema_tokens(tp: Any) -> int:
    """A type's JSON Schema (the one its extractions send, as `type_schema` made and kept
    it) in tokens, guessed as a request's text is: what an extraction adds to each call (a
    response format, a tool), which its messages do not hold."""
    try:
        schema = type_schema(tp).schema
    except Exception:  # no JSON Schema: no extraction either, which says why
        return 0
    return len(json.dumps(schema, separators=(",", ":"))) // CHARS_PER_TOKEN


def _duplicate(
    index: int, label: str, first: BatchResult[Any], again: Callable[[], Any] | None = None
) -> BatchResult[Any]:
    """The result of an input that came again in the run: the first copy's outcome and
    record (finished by an earlier run only if the first was). `again` makes the copy a
    value of its own, where reading the first's empties it (an `Iterable` field)."""
    value = first.value
    if again is not None and value is not None:
        with contextlib.suppress(Exception):  # (read once already: it reads again)
            value = again()
    return BatchResult(
        index,
        first.key,
        label,
        value,
        first.failure,
        first.metadata,
        0,
        0.0,
        first.resumed,
        first.spent,
        duplicate=True,
        pending=first.pending,
        unkept=first.unkept,
        warnings=first.warnings,
    )


def stored_value(adapter: TypeAdapter[Any], value: Any) -> str:
    """A value as the ledger keeps it: its JSON in pydantic's round-trip form, the form its
    type reads back (a `Json[...]` field as JSON text, computed fields left out), keyed by
    field name (a serialization alias need not be one the type reads)."""
    # pydantic warns of a value of another type than the schema's (a default no validation
    # checked): the JSON is made all the same, and whether it reads back is checked.
    return adapter.dump_json(value, round_trip=True, by_alias=False, warnings=False).decode()


def stored_python(adapter: TypeAdapter[Any], value: Any) -> Any:
    """`stored_value` read as Python ready for `json.dumps`: the value of an output line of
    the command, as `allama batch export` writes it from the ledger. Made from the JSON, not
    by `dump_python`, which writes a float that is no number (NaN, infinity) as itself
    rather than as the type's JSON does (`null` by default)."""
    return json.loads(stored_value(adapter, value))


def read_stored_value(adapter: TypeAdapter[Any], text: str | bytes) -> Any:
    """A stored value, validated again. Keys are taken by field name only, as they are
    written: a type whose alias is another field's name reads each key as its field."""
    return adapter.validate_json(text, by_alias=False, by_name=True)


def read_done(
    spec: _Spec,
    value: str,
    source: str | None,
    record: Mapping[str, Any] | None,
    renamed: bool = False,
) -> Any:
    """The value of an input an earlier run finished, as that run gave it: the output it was
    read from, read again the same way (`read_again`), where the ledger kept it; else its
    stored value, validated again, which this run's type must read as itself (a version
    before schema 3 kept no output: its values are validated again as they are).
    `renamed`: that run's type named its fields otherwise (`_renamed`), so that its stored
    JSON, keyed by field name, is not read (the output, keyed as the schema is, is)."""
    if source == WITHHELD:
        try:
            read_stored_value(spec.adapter, value)
        except Exception as error:
            raise ValueNotKept(invalid=True) from error
        raise ValueNotKept(invalid=False)
    if source == EARLIER_VALUE:
        return read_stored_value(spec.adapter, value)
    if source is not None:
        return read_again(spec.tp, source, bool((record or {}).get("root_wrapped")))
    if renamed:
        raise FieldsRenamed("the type's fields are named otherwise than the run's that made it")
    back = read_stored_value(spec.adapter, value)
    if not spec.dump_reads_back and not _same_json(stored_value(spec.adapter, back), value):
        # A validator that changes what it reads, other than the one that made the value
        # (changed since): run on the value, it makes one neither of them would have made.
        raise ValueChanged("this run's type reads the value as another")
    return back


def _same_json(mine: str, kept: str) -> bool:
    """Whether two JSON texts hold the same value, their arrays' order aside (a set's order
    changes from one process to the next), in the JSON a string holds too (a `Json[set]`
    field's)."""
    if mine == kept:
        return True
    try:
        return bool(_unordered(json.loads(mine)) == _unordered(json.loads(kept)))
    except (ValueError, RecursionError):
        return False


def _unordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _unordered(item) for key, item in value.items()}
    if isinstance(value, list):
        return sorted((_unordered(item) for item in value), key=lambda item: json.dumps(item))
    if isinstance(value, str) and value[:1] in ("[", "{"):
        with contextlib.suppress(ValueError):
            return {"JSON text": _unordered(json.loads(value))}
    return value


def _tries(count: int) -> str:
    return "1 try" if count == 1 else f"{count} tries"


_UNANSWERED = (NetworkError, RequestTimeoutError, OverloadedError)


def _answered_by_any(outcome: object) -> bool:
    """Whether a call's outcome shows the provider there: an answer, or an error some
    provider wrote (a failover's chain holds one of each it tried: one that answered an
    error it charged for, before another was overloaded, is there). One that refused the
    key or the account serves nothing: an outage of the others is not hidden by it."""
    if not isinstance(outcome, Error):
        return True
    cannot_serve = _UNANSWERED + ACCOUNT_REFUSALS
    return any(not isinstance(link, cannot_serve) for link in errors_in_chain(outcome))


def _unwritable(error: BaseException) -> str:
    """The stop of a run whose ledger could not be written."""
    return f"the ledger could not be written: {type(error).__name__}: {error}"


JOBS_KEPT = (
    "what the provider's jobs answered stays with the provider, and a run again, with room "
    "to write, collects it"
)
"""Said of a provider-batch run whose ledger could not be written."""


def ledger_unwritten(path: object, error: BaseException, said: str = "") -> LedgerError:
    """The error a run raises when its ledger at `path` could not be written, with what
    that leaves out (`said`)."""
    return LedgerError(
        f"the ledger `{path}` could not be written: {error}" + (f"; {said}" if said else "")
    )


class CallCancelled(Exception):
    """A call that raised `CancelledError` of its own (a cancel scope in the caller's
    transport), while the run was not cancelled."""

    def __init__(self) -> None:
        super().__init__("the call raised CancelledError, though the run was not cancelled")


def _stored_value_invalid(error: Exception, tp: Any) -> BatchFailure:
    """What a stored value that no longer validates is told as: where and what kind of
    error, never the value (the model's text)."""
    if isinstance(error, ValueChanged):
        return BatchFailure(
            STORED_VALUE_INVALID,
            f"finished by an earlier run, but {_tracing.type_name(tp)} reads and writes its "
            "value as other JSON (a validator that changes what it reads, or a serializer, "
            "changed since the value was stored): it may not be the value that run made; "
            "`allama batch export` writes the value",
        )
    if isinstance(error, FieldsRenamed):
        return BatchFailure(
            STORED_VALUE_INVALID,
            f"finished by an earlier run whose type had the same schema but named its fields "
            f"otherwise than {_tracing.type_name(tp)} does (a field renamed, its alias kept): "
            "the ledger keeps the value by field name, which would put values in other "
            "fields; `allama batch export` writes the value as that run made it",
        )
    if isinstance(error, ValueNotKept):
        how = (
            "its JSON, which writes a secret masked (`**********`), does not validate as "
            "the type (a secret that is not text, or one the mask does not fit)"
            if error.invalid
            else "its JSON reads back as another value (a validator that changes what it "
            "reads, a serializer of its own)"
        )
        return BatchFailure(
            STORED_VALUE_INVALID,
            f"finished by an earlier run, but its value cannot be read back as it was: "
            f"{_tracing.type_name(tp)} holds a secret, so the ledger keeps no output to read "
            f"again, and {how}; `allama batch export` writes the value",
        )
    if isinstance(error, ReadAgainError):
        problem = f"`{error.kind or 'json_invalid'}` at {error.path or 'the value itself'}"
    elif not isinstance(error, ValidationError):
        # Its message may quote the value (the model's text): the kind alone.
        problem = f"its validation raised {type(error).__name__}"
    else:
        problems = error.errors(include_url=False, include_input=False, include_context=False)
        first = problems[0]
        where = ".".join(str(part) for part in first["loc"]) or "the value itself"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        problem = f"`{first['type']}` at {where}{more}"
    return BatchFailure(
        STORED_VALUE_INVALID,
        f"finished by an earlier run, but its value in the ledger does not validate as "
        f"{_tracing.type_name(tp)}: {problem}; the value stays in the ledger "
        "(`allama batch export` writes it)",
    )


_REPAIRED_STORED = BatchFailure(
    ParseError.kind,
    "finished by an earlier run, whose value was read after repair (the JSON taken out of "
    "markdown or prose around it), which this run's extractor does not do (`repair=False`): "
    "the value stays in the ledger (`allama batch export` writes it)",
)


def _below_floor_stored(achieved: SchemaEnforcement, floor: SchemaEnforcement) -> BatchFailure:
    return BatchFailure(
        EnforcementBelowError.kind,
        f"finished by an earlier run, whose provider enforced the schema "
        f"`{achieved.value}`, below this run's floor `{floor.value}`: the value stays in "
        "the ledger (`allama batch export` writes it)",
    )


def _paid_before(row: LedgerRow | None) -> list[ExtractionMetadata]:
    """The records of what earlier runs' attempts of an input paid for (passes, or a
    failure that reported usage), as its failure or its stop left them in the ledger: the
    attempt that sends it again carries them, so that its record and cost say all."""
    if row is None or not row.record:
        return []
    last, earlier = _records_of(row)
    found = [*earlier, *([last] if last is not None else [])]
    return [record for record in found if record.passes or record.usage is not None]


def _records_of(row: LedgerRow) -> tuple[ExtractionMetadata | None, list[ExtractionMetadata]]:
    """The record a ledger row keeps, and those of the attempts before it."""
    records = dict(row.record or {})
    earlier = records.pop("earlier_attempts", [])
    records.pop(_ledger.WARNINGS_KEY, None)  # the request's (`kept_warnings`), not the record's
    last = ExtractionMetadata.from_json_dict(records) if records else None
    return last, [ExtractionMetadata.from_json_dict(record) for record in earlier]


def _stored_record(
    metadata: ExtractionMetadata,
    spent: list[ExtractionMetadata],
    warned: tuple[Warning, ...] = (),
) -> dict[str, Any]:
    """An input's record as the ledger keeps it: its last attempt's, with the records of
    those before it that paid, and its request's warnings (`BatchResult.warnings`)."""
    stored = metadata.to_json_dict()
    if spent:
        stored["earlier_attempts"] = [record.to_json_dict() for record in spent]
    return with_warnings(stored, warned) if warned else stored


def _paid_text(metadata: ExtractionMetadata | None, spent: list[ExtractionMetadata]) -> str | None:
    """What an input's attempts cost, as the ledger keeps it; `None` when unknown."""
    cost, _ = _cost_of([*spent, *([metadata] if metadata is not None else [])])
    return None if cost is None else str(cost)


def _stored_or_spent(
    metadata: ExtractionMetadata | None,
    spent: list[ExtractionMetadata],
    warned: tuple[Warning, ...] = (),
) -> dict[str, Any] | None:
    """The record kept for an input that failed: its own, or, when the failure has none (an
    exception of the caller's code), the last attempt that was paid for, with those before
    it; `None` when nothing was paid for."""
    if metadata is not None:
        return _stored_record(metadata, spent, warned)
    return _stored_record(spent[-1], spent[:-1]) if spent else None


def _not_a_request(made: object) -> None:
    """Raise why what the caller's request function returned is not a request."""
    said = f"the request function returned a {type(made).__name__}, not a ChatRequest"
    if inspect.iscoroutine(made):
        made.close()  # never awaited: said here, rather than in a warning at exit
        said += (
            ": it is an async function, which the run does not await; build the request "
            "in a plain one"
        )
    raise TypeError(said)


def _failure(error: BaseException) -> BatchFailure:
    from allama.providers._jobs import RowUnanswered

    if isinstance(error, RowUnanswered):
        kind = error.row.kind
        words = _words(error.row.words)
        return BatchFailure(f"job_{kind}", text_of(error), kind != "failed", error, words)
    if isinstance(error, Error):
        view = error.as_log().to_dict()
        message = str(
            view.get("message") or f"{error.kind} ({view.get('message_len', 0)} chars withheld)"
        )
        shown = ", ".join(
            f"{k}={view[k]}" for k in ("provider", "status") if view.get(k) is not None
        )
        return BatchFailure(
            error.kind,
            f"{message} [{shown}]" if shown else message,
            error.retryable,
            error,
            None if error.authored else _words(error.message),
        )
    text = text_of(error)
    if allamas_words(error, text):
        return BatchFailure(type(error).__name__, text, False, error)
    # The caller's code (a validator, a request function) or a library's: its words may
    # quote the value or the document, so they are kept as a provider's are.
    withheld = f"message withheld ({len(text)} chars)"
    return BatchFailure(type(error).__name__, withheld, False, error, _words(text))


def allamas_words(error: BaseException, text: str) -> bool:
    """Whether `text`, `error`'s as `text_of` gives it, is allama's words, which a log may
    show: `error` is allama's own (made or raised by its code), or its `str` raised and
    `text` is what `text_of` says instead. Else it may quote the document or the value."""
    if text == f"<{type(error).__name__}>" or type(error).__module__.startswith("allama."):
        return True
    frame = error.__traceback__
    if frame is None:
        return False
    while frame.tb_next is not None:
        frame = frame.tb_next
    return str(frame.tb_frame.f_globals.get("__name__", "")).startswith("allama.")


def _words(text: str | None) -> str | None:
    """The provider's words as the ledger can keep them: `None` for none (or only
    spaces), and a lone surrogate (JSON may spell one) as U+FFFD, which UTF-8 cannot hold."""
    if text is None or not text.strip():
        return None
    return storable(text)


# The drivers


_END = object()
_NO_MORE = object()


class _Reader:
    """A run's inputs, read one at a time, a read that waits given up when the run stops.

    An async iterable is awaited. A sync one is called on the run's loop when it is a
    collection (it has a length: a list, the command's files), whose reads are quick; an
    iterator or a generator, which may wait on a queue or a cursor over the network, is
    read ahead by a thread of its own for a sync run (`_ReadAhead`), so that the loop goes
    on with the inputs already read while the next one comes. (`abatch` reads it on the
    caller's loop: one that waits belongs in an async iterable.)"""

    def __init__(
        self,
        inputs: Iterable[Any] | AsyncIterable[Any],
        sync: bool,
        runner: _Runner,
        ahead: int,
    ) -> None:
        self._async: _AsyncReads | None = None
        self._sync: Iterator[Any] | None = None
        self._thread: _ReadAhead | None = None
        self._runner = runner
        self._reading: asyncio.Future[Any] | None = None
        if isinstance(inputs, AsyncIterable):
            self._async = _AsyncReads(aiter(inputs))
        else:
            self._sync = iter(inputs)
            if sync and not hasattr(inputs, "__len__") and not self.stopped:
                self._thread = _ReadAhead(self._sync, ahead, runner.made)

    async def next(self) -> Any:
        """The next input, or `_NO_MORE` (the inputs are over, or the run stopped)."""
        if self.stopped:
            return _NO_MORE
        if self._thread is not None:
            read = self._thread.take()
            if read is not _NOT_YET:
                return _unwrapped(read)
            reading: asyncio.Future[Any] = self._thread.wait()
        elif self._async is not None:
            reading = self._async.next()
        else:
            assert self._sync is not None
            return next(self._sync, _NO_MORE)
        self._reading = reading
        try:
            read = await reading
        except asyncio.CancelledError:
            if self.stopped and not _cancelling():
                # Given up by the stop, not the run cancelled: the iterable has its cancel
                # handled (its `finally` run) before the run goes on.
                await self.closed()
                return _NO_MORE
            if (
                reading.done()
                and not reading.cancelled()
                and reading.exception() is None
                and reading.result() is not _NO_MORE
            ):
                # Read as the run was cancelled: taken from the caller's source all the same.
                if self._async is not None:
                    self._async.taken.append(reading.result())
                elif self._thread is not None:
                    self._thread.give_back(reading.result())
            raise
        finally:
            self._reading = None
        return _unwrapped(read) if self._thread is not None else read

    def give_up(self) -> None:
        """The run stopped (and reads no more: not a budget's stop that reads on): a read
        that waits is given up. An async one is cancelled (a queue's get gives nothing
        up); what the thread reads from then on is not the run's."""
        if not self.stopped:
            return
        if self._reading is not None:
            self._reading.cancel()
        if self._async is not None:
            self._async.close()

    @property
    def stopped(self) -> bool:
        return self._runner.stopping is not None and not self._runner.draining

    @property
    def is_async(self) -> bool:
        return self._async is not None

    def taken_ahead(self) -> list[Any]:
        """What the reading thread, or the async iterable's task, took from the inputs and
        the run did not (it stopped); neither reads any more."""
        if self._async is not None:
            self._async.close()
            taken, self._async.taken = self._async.taken, []
            return taken
        return [] if self._thread is None else self._thread.take_all()

    def close(self) -> None:
        if self._thread is not None:
            self._thread.close()
        if self._async is not None:
            self._async.close()

    async def closed(self) -> None:
        """`close`, and wait until an async iterable has handled its cancel, or an input
        the reading thread handed over as the run gave up its wait is kept (`give_back`)."""
        self.close()
        if self._async is not None:
            await self._async.closed()
        elif self._thread is not None:
            await asyncio.sleep(0)  # the hand-over's callback, already on the loop, runs


class _AsyncReads:
    """An async iterable read by one task of its own, one input when asked: every step of
    an async generator then runs in the same task and context, as under `async for` (a
    context variable it sets, a timeout or a cancel scope around its `yield`s), while a
    read that waits can still be given up without cancelling the run. An input the
    iterable gives after its read was given up (one that carries on through the cancel)
    was taken from the caller's source all the same: it is kept, `taken`."""

    def __init__(self, inputs: AsyncIterator[Any]) -> None:
        self._inputs = inputs
        self._asked: asyncio.Future[Any] | None = None
        self._ask: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._broken: BaseException | None = None
        self.taken: list[Any] = []

    def next(self) -> asyncio.Future[Any]:
        """A future of the next input (`_NO_MORE` once they are over)."""
        loop = asyncio.get_running_loop()
        asked: asyncio.Future[Any] = loop.create_future()
        if self._task is None:
            self._ask = asyncio.Event()
            self._task = loop.create_task(self._read())
        elif self._task.done():  # over, raised, or closed
            if self._broken is not None:
                asked.set_exception(self._broken)
            else:
                asked.set_result(_NO_MORE)
            return asked
        assert self._ask is not None
        self._asked = asked
        self._ask.set()
        return asked

    async def _read(self) -> None:
        assert self._ask is not None
        while not self._closed:
            try:
                await self._ask.wait()
            except asyncio.CancelledError:
                if self._closed:
                    raise
                # Cancelled between its reads, not by `close`: a timeout or a scope of the
                # iterable's own around a `yield`, which ends it as `async for` would.
                self._broken = asyncio.CancelledError()
                self._answer(self._broken)
                return
            self._ask.clear()
            try:
                # Not `anext(inputs, default)`: on an iterator whose `__anext__` is no
                # coroutine, it crashes CPython 3.11 to 3.13.
                read = await self._inputs.__anext__()
            except StopAsyncIteration:
                self._answer(_NO_MORE)
                return
            except StopIteration:  # no future holds it, as no coroutine raises it
                self._answer(RuntimeError("the inputs' __anext__ raised StopIteration"))
                return
            except BaseException as error:  # what the iterable raised, or the give-up
                self._answer(error)
                if isinstance(error, KeyboardInterrupt | SystemExit):
                    raise
                return
            if not self._answer(read):
                self.taken.append(read)

    def _answer(self, read: Any) -> bool:
        """Hand `read` to the read that asked for it; `False` when it was given up."""
        asked, self._asked = self._asked, None
        if asked is None or asked.done():  # given up
            return False
        if isinstance(read, BaseException):
            asked.set_exception(read)
        else:
            asked.set_result(read)
        return True

    def close(self) -> None:
        """No more reads: one that waits is given up (the iterable is cancelled in it)."""
        self._closed = True
        if self._task is not None and not self._task.done():
            self._asked = None
            self._task.cancel()

    async def closed(self) -> None:
        """`close`, and wait until the iterable has handled its cancel (its `finally`)."""
        self.close()
        if self._task is not None and not self._task.done():
            await asyncio.wait([self._task])


def exit_retrieved(task: asyncio.Task[Any]) -> None:
    """Mark what a run's task raised as seen: an exit or interrupt (a caller's function
    raised `SystemExit`) asyncio raises out of the loop itself, and would log again, as an
    exception never retrieved, when the task goes; an error is raised to whoever awaits
    the run's results."""
    if not task.cancelled():
        task.exception()


def _cancelling() -> bool:
    """Whether this task is being cancelled (rather than code it awaits raising a
    `CancelledError` of its own)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


_NOT_YET = object()


@dataclass(frozen=True, slots=True)
class _Made:
    """An input's label, request and key, made as it was read, or what the caller's
    functions raised (`whose` names the function)."""

    label: str
    request: ChatRequest | None
    key: str
    error: BaseException | None = None
    whose: str | None = None


@dataclass(frozen=True, slots=True)
class _Raised:
    """What the inputs' `next` raised, in the thread that read them."""

    error: BaseException


def _unwrapped(read: Any) -> Any:
    if isinstance(read, _Raised):
        raise read.error
    return read


class _ReadAhead:
    """A thread that reads an iterator up to `ahead` inputs ahead of the run's loop, which
    takes them without waiting while there are some (handing each read over between the
    threads cost more than the rest of a run's work an input), and waits, on its loop,
    only for a read that waits."""

    def __init__(
        self, inputs: Iterator[Any], ahead: int, make: Callable[[Any, int], _Made]
    ) -> None:
        self._inputs = inputs
        self._make = make
        self._read: collections.deque[Any] = collections.deque()
        self._room = threading.Semaphore(ahead)
        self._lock = threading.Lock()
        self._waiting: tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]] | None = None
        self._closed = False
        # In the run's context (the caller's): the generator sees its context variables.
        threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._work,),
            name="allama-batch-inputs",
            daemon=True,
        ).start()

    def _work(self) -> None:
        for index in itertools.count():
            self._room.acquire()
            if self._closed:
                return
            try:
                read = next(self._inputs, _NO_MORE)
            except BaseException as error:  # handed to the run, which raises it
                read = _Raised(error)
            if read is not _NO_MORE and not isinstance(read, _Raised):
                # Made before the next is read: an iterable may give one object again,
                # changed (a row updated in place).
                try:
                    read = self._make(read, index)
                except BaseException as error:  # an exit or interrupt the function raised:
                    read = _Raised(error)  # the run raises it, as a list's run would
            with self._lock:
                waiting, self._waiting = self._waiting, None
                if waiting is None:
                    self._read.append(read)
            if waiting is not None:  # handed over at once: it takes no room
                loop, future = waiting
                try:
                    loop.call_soon_threadsafe(self._settle, future, read)
                except RuntimeError:  # the loop closed: the run is over, and did not take it
                    self.give_back(read)
                self._room.release()
            if read is _NO_MORE or isinstance(read, _Raised):
                return

    def take(self) -> Any:
        """The next input read, or `_NOT_YET`."""
        with self._lock:
            if not self._read:
                return _NOT_YET
            read = self._read.popleft()
        self._room.release()
        return read

    def wait(self) -> asyncio.Future[Any]:
        """A future of the next input read (none is read yet)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._read:  # read in between
                future.set_result(self._read.popleft())
            else:
                self._waiting = (loop, future)
                return future
        self._room.release()
        return future

    def _settle(self, future: asyncio.Future[Any], read: Any) -> None:
        """Hand `read` to the run's wait for it, or, that wait given up (the run closed or
        stopped as the input came), keep it with those read and not taken."""
        if future.cancelled():
            self.give_back(read)
        else:
            future.set_result(read)

    def give_back(self, read: Any) -> None:
        """Keep `read` with those read and not taken (first, as it was read first)."""
        with self._lock:
            self._read.appendleft(read)

    def take_all(self) -> list[Any]:
        """Every input read and not taken; the thread reads no more."""
        self._closed = True
        with self._lock:
            read, self._read = list(self._read), collections.deque()
        self._room.release()  # a thread waiting for room ends
        return [one for one in read if one is not _NO_MORE and not isinstance(one, _Raised)]

    def close(self) -> None:
        self._closed = True
        self._room.release()  # a thread waiting for room ends


_READ_ONCE = (
    "a batch run's results are read once, and these were (or are being) read, or the run "
    "was closed: `run.summary` holds the run's counts, and a ledger its results"
)


def _runner(
    spec: _Spec,
    call: _Call,
    emit: Callable[[BatchResult[Any]], None],
    send: Callable[[ChatRequest], Any],
    sync: bool,
) -> _Runner:
    if not spec.provider_batch:
        return _Runner(spec, call, emit)
    from allama.batch._jobs import JobRunner

    return JobRunner(spec, send, emit, sync=sync)


class AsyncBatchRun(Generic[T]):
    """The results of `abatch`, as they come: `async for result in run`. `summary` is the
    run so far; leaving the loop early (or `aclose`) stops the run."""

    def __init__(self, spec: _Spec) -> None:
        self._spec = spec
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._runner = _runner(spec, self._call, self._queue.put_nowait, spec.provider.achat, False)
        self._task: asyncio.Task[None] | None = None
        self._read = False
        self._closed = False
        self._runner.unread = self._queue.qsize

    @property
    def summary(self) -> BatchSummary:
        return self._runner.summary

    async def _call(self, request: ChatRequest) -> Extracted[Any]:
        spec = self._spec
        provider: Any = self._runner.provider
        return await spec.extractor.aextract(provider, spec.tp, request)

    def __aiter__(self) -> AsyncIterator[BatchResult[T]]:
        if self._read:
            raise RuntimeError(_READ_ONCE)
        self._read = True
        return self._results()

    async def _results(self) -> AsyncIterator[BatchResult[T]]:
        if self._task is None:
            self._task = asyncio.create_task(self._run())
            self._task.add_done_callback(exit_retrieved)
        try:
            runner = self._runner
            while not self._closed:  # `aclose()` in the loop ends it
                item = await self._queue.get()
                if item is _END:
                    if self._closed and self._task.cancelled():
                        return  # closed by another task: the results end, as after `close()`
                    await self._task  # raises what ended the run, if anything did
                    return
                if runner.caught_up is not None and self._queue.qsize() < runner.most_unread // 2:
                    runner.caught_up.set()
                yield item
        finally:
            await self.aclose()

    async def _run(self) -> None:
        try:
            await self._runner.run()
        finally:
            self._queue.put_nowait(_END)

    def stop(self, reason: str = "stopped by the caller") -> None:
        """Start no new input and read no further; those in flight finish and are
        recorded, and the results go on until the run ends. Safe from any thread and from
        a signal handler."""
        task = self._task
        self._runner.caller_stop(reason, None if task is None else task.get_loop())

    async def aclose(self) -> None:
        """End the run now: inputs in flight are abandoned (the ledger keeps them pending).
        A cancellation of the task that awaits it (a timeout, a task group) is raised, not
        taken for the run's own."""
        self._read = True  # a run closed before it was read is not read after
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if _cancelling():
                    raise

    async def __aenter__(self) -> AsyncBatchRun[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class BatchRun(Generic[T]):
    """The results of `batch`, as they come: `for result in run`. The run's loop works in
    a thread of its own, the provider's sync calls in a pool of `concurrency` threads.
    `summary` is the run so far; leaving the loop early (or `close`) stops the run."""

    def __init__(self, spec: _Spec) -> None:
        self._spec = spec
        self._results: queue.Queue[Any] = queue.Queue()
        self._unread: collections.deque[BatchResult[Any]] = collections.deque()
        """The results put for the caller (the summary counts them) that it has not read
        past: those queued, and the one it was given last until it asks for the next."""
        self._pool = DaemonPool(spec.concurrency, "allama-batch")
        self._runner = _runner(spec, self._call, self._give, self._send, True)
        self._runner.unread = self._results.qsize
        self._runner.sync = True
        self._closed = False
        self._read = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        """Set once the run's thread has its loop and main task, or has ended."""
        self._working = False
        """The run's thread has begun: it sets `_started` whatever happens next."""
        self._failure: BaseException | None = None

    @property
    def summary(self) -> BatchSummary:
        return self._runner.summary

    def _give(self, result: BatchResult[Any]) -> None:
        self._unread.append(result)  # before the caller can take it
        self._results.put(result)

    def _left_unread(self) -> list[BatchResult[T]] | None:
        """The results the run counted that its caller did not read past (queued when an
        interrupt ended its loop, and the one it was given last): the caller's to take
        still, not to count again. `None` while the run's thread works on (its close was
        interrupted): more may come."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            return None
        return list(self._unread)

    async def _send(self, request: ChatRequest) -> Any:
        run = contextvars.copy_context().run  # the input's context, as `_call`'s
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, run, self._spec.provider.chat, request
        )

    async def _call(self, request: ChatRequest) -> Extracted[Any]:
        spec = self._spec
        loop = asyncio.get_running_loop()
        # In this task's context, so that the extraction's span is its input's child.
        run = contextvars.copy_context().run
        provider: Any = self._runner.provider
        return await loop.run_in_executor(
            self._pool, run, run_to_its_end, spec.extractor.extract, provider, spec.tp, request
        )

    def _start(self) -> None:
        started = self._started

        def work() -> None:
            self._working = True  # before `_closed` is read: `close` reads them the other way
            if self._closed:  # closed as it started (an interrupt in `Thread.start`)
                started.set()
                self._results.put(_END)
                return
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._main = loop.create_task(self._runner.run())
                started.set()
                loop.run_until_complete(self._main)
            except BaseException as error:
                if not isinstance(error, asyncio.CancelledError):
                    self._failure = error
                if self._main is not None and self._main.done():
                    exit_retrieved(self._main)  # raised to the caller, and logged no more
            finally:
                started.set()
                # What is still waiting on the loop (a worker's call waiting for its turn)
                # ends before the loop closes, as `asyncio.run` ends it.
                with contextlib.suppress(BaseException):
                    left = asyncio.all_tasks(loop)
                    for task in left:
                        task.cancel()
                    if left:
                        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
                loop.close()
                self._results.put(_END)

        # The loop works in the caller's context (a copy), as `abatch` does on the
        # caller's loop: its context variables and its trace's span reach the inputs'
        # functions, the provider's calls and the run's spans.
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(work,),
            name="allama-batch-run",
            daemon=True,
        )
        self._thread.start()
        started.wait()

    def __iter__(self) -> Iterator[BatchResult[T]]:
        if self._read or self._closed:
            raise RuntimeError(_READ_ONCE)
        self._read = True
        return self._iterate()

    def _iterate(self) -> Iterator[BatchResult[T]]:
        # Started at the first `next`: an iterator never advanced (`zip([], run)`) sends
        # nothing, where a run started by `iter` would go on with nothing to end it.
        if self._closed:
            return
        runner = self._runner
        try:
            self._start()  # (interrupted while it starts, the run is closed all the same)
            while not self._closed:  # `close()` in the loop ends it
                item = self._results.get()
                if item is _END:
                    if self._failure is not None:
                        raise self._failure
                    return
                caught_up, loop = runner.caught_up, self._loop
                if (
                    caught_up is not None
                    and loop is not None
                    and self._results.qsize() < runner.most_unread // 2
                ):
                    with contextlib.suppress(RuntimeError):  # the loop closed: it is over
                        loop.call_soon_threadsafe(caught_up.set)
                yield item
                self._unread.popleft()  # read past: the caller asks for the next
        finally:
            self.close()

    def stop(self, reason: str = "stopped by the caller") -> None:
        """Start no new input and read no further; those in flight finish and are
        recorded, and the results go on until the run ends. Safe from any thread and from
        a signal handler."""
        self._runner.caller_stop(reason, self._loop)

    def close(self) -> None:
        """End the run now: inputs in flight are abandoned (the ledger keeps them pending,
        and a later run sends them again: if they were answered meanwhile, that is paid
        twice). `stop` first, and read the results to the end, to keep them."""
        self._closed = True
        thread = self._thread
        try:
            if thread is not None and self._working:
                # A thread just started has its loop and main task in a moment: wait for
                # them, or a run closed while it starts would go on with nothing to end it.
                # One that begins after this sees the run closed and does nothing.
                self._started.wait()
            loop, main = self._loop, self._main
            if loop is not None and main is not None and thread is not None and thread.is_alive():
                with contextlib.suppress(RuntimeError):  # the loop closed in between: over
                    loop.call_soon_threadsafe(main.cancel)
                if thread is not threading.current_thread():  # (a caller's function on the
                    thread.join()  # run's own thread closes it: the run ends as it returns)
        finally:
            # Calls in flight are not waited for: their threads are left to end on their own.
            self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> BatchRun[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@overload
def batch(
    provider: ChatProvider,
    tp: type[T],
    inputs: Iterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None = None,
    concurrency: int = 8,
    rpm: float | None = None,
    tpm: float | None = None,
    ledger: str | PathLike[str] | None = None,
    max_cost: Decimal | float | str | None = None,
    max_attempts: int = 5,
    backoff: float = 0.5,
    retry_failed: bool = False,
    label: Callable[[Any], str] | None = None,
    total: int | None = None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> BatchRun[T]: ...
@overload
def batch(
    provider: ChatProvider,
    tp: TypeForm[T],
    inputs: Iterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None = None,
    concurrency: int = 8,
    rpm: float | None = None,
    tpm: float | None = None,
    ledger: str | PathLike[str] | None = None,
    max_cost: Decimal | float | str | None = None,
    max_attempts: int = 5,
    backoff: float = 0.5,
    retry_failed: bool = False,
    label: Callable[[Any], str] | None = None,
    total: int | None = None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> BatchRun[T]: ...
@overload
def batch(
    provider: ChatProvider,
    tp: Any,
    inputs: Iterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None = None,
    concurrency: int = 8,
    rpm: float | None = None,
    tpm: float | None = None,
    ledger: str | PathLike[str] | None = None,
    max_cost: Decimal | float | str | None = None,
    max_attempts: int = 5,
    backoff: float = 0.5,
    retry_failed: bool = False,
    label: Callable[[Any], str] | None = None,
    total: int | None = None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> BatchRun[Any]: ...
def batch(
    provider: ChatProvider,
    tp: Any,
    inputs: Iterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None = None,
    concurrency: int = 8,
    rpm: float | None = None,
    tpm: float | None = None,
    ledger: str | PathLike[str] | None = None,
    max_cost: Decimal | float | str | None = None,
    max_attempts: int = 5,
    backoff: float = 0.5,
    retry_failed: bool = False,
    label: Callable[[Any], str] | None = None,
    total: int | None = None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> BatchRun[Any]:
    """Extract a `tp` from every input, `concurrency` at a time, yielding results as they
    finish (not in input order; `result.index` says which input).

    `request`: a `ChatRequest` to which each input (text) is added as the user's message,
    or a function building the request from an input. `rpm` / `tpm`: requests and tokens
    per minute, tightened when the provider answers with a rate limit. `ledger`: an SQLite
    file that makes the run resumable (run again with the same arguments, only what was not
    finished is sent) and shareable with another run. `max_cost`: stop starting new inputs
    once the known cost reaches this many dollars (a model genai-prices has no price for
    goes one input at a time until an answer of it has a known cost; a `ValueError` for a
    model run locally, which has no price). `extractor`: repair, retries and a floor,
    as for one extraction. `label`: what the summary calls an input.

    `provider_batch=True` sends the inputs as jobs of the provider's batch API (OpenAI,
    Anthropic, Gemini: about half the price, within 24 hours) instead of live calls, with
    the same encoding, validation and record; it needs a `ledger`, which keeps the jobs so
    that running again collects them rather than submitting again. `job_retry`: how what
    the extraction asks again, and rows that come back failed or expired, are sent:
    `"batch"` (a follow-up job) or `"live"`. `poll_interval`: seconds before a job is
    first read again (growing to ten minutes). `job_size`: the most requests per job.

    The inputs are read as the run goes: a collection (anything with a length) on the
    run's loop, an iterator or generator in a thread of its own, a few ahead, so that a
    read that waits (a queue, a cursor over the network) holds back none of the inputs
    already read; an object bound to the thread that made it (an `sqlite3` cursor) is
    best made in the generator. With `provider_batch=True`, every input is read before
    the first job is made.
    """
    if isinstance(inputs, AsyncIterable) and not isinstance(inputs, Iterable):
        raise TypeError(
            "inputs is an async iterable, which `batch` cannot read: its run works on a "
            "thread of its own; use `abatch` on your event loop"
        )
    spec = _spec(
        provider,
        tp,
        inputs,
        request=request,
        extractor=extractor,
        concurrency=concurrency,
        rpm=rpm,
        tpm=tpm,
        ledger=ledger,
        max_cost=max_cost,
        max_attempts=max_attempts,
        backoff=backoff,
        retry_failed=retry_failed,
        label=label,
        total=total,
        provider_batch=provider_batch,
        job_retry=job_retry,
        poll_interval=poll_interval,
        job_size=job_size,
    )
    return BatchRun(spec)


@overload
def abatch(
    provider: ChatProvider,
    tp: type[T],
    inputs: Iterable[Any] | AsyncIterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None = None,
    concurrency: int = 8,
    rpm: float | None = None,
    tpm: float | None = None,
    ledger: str | PathLike[str] | None = None,
    max_cost: Decimal | float | str | None = None,
    max_attempts: int = 5,
    backoff: float = 0.5,
    retry_failed: bool = False,
    label: Callable[[Any], str] | None = None,
    total: int | None = None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> AsyncBatchRun[T]: ...
@overload
def abatch(
    provider: ChatProvider,
    tp: TypeForm[T],
    inputs: Iterable[Any] | AsyncIterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None = None,
    concurrency: int = 8,
    rpm: float | None = None,
    tpm: float | None = None,
    ledger: str | PathLike[str] | None = None,
    max_cost: Decimal | float | str | None = None,
    max_attempts: int = 5,
    backoff: float = 0.5,
    retry_failed: bool = False,
    label: Callable[[Any], str] | None = None,
    total: int | None = None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> AsyncBatchRun[T]: ...
@overload
def abatch(
    provider: ChatProvider,
    tp: Any,
    inputs: Iterable[Any] | AsyncIterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None = None,
    concurrency: int = 8,
    rpm: float | None = None,
    tpm: float | None = None,
    ledger: str | PathLike[str] | None = None,
    max_cost: Decimal | float | str | None = None,
    max_attempts: int = 5,
    backoff: float = 0.5,
    retry_failed: bool = False,
    label: Callable[[Any], str] | None = None,
    total: int | None = None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> AsyncBatchRun[Any]: ...
def abatch(
    provider: ChatProvider,
    tp: Any,
    inputs: Iterable[Any] | AsyncIterable[Any],
    *,
    request: ChatRequest | Build,
    extractor: Extractor | None = None,
    concurrency: int = 8,
    rpm: float | None = None,
    tpm: float | None = None,
    ledger: str | PathLike[str] | None = None,
    max_cost: Decimal | float | str | None = None,
    max_attempts: int = 5,
    backoff: float = 0.5,
    retry_failed: bool = False,
    label: Callable[[Any], str] | None = None,
    total: int | None = None,
    provider_batch: bool = False,
    job_retry: Literal["batch", "live"] = "batch",
    poll_interval: float = 30.0,
    job_size: int | None = None,
) -> AsyncBatchRun[Any]:
    """The async twin of `batch`: `async for result in allama.abatch(...)`. `inputs` may
    also be an async iterable (an async generator over a queue or a cursor), which the run
    awaits; a sync iterable is read on the event loop, so one whose reads block (a queue's
    `get`) holds the loop while it waits: give it as an async iterable."""
    spec = _spec(
        provider,
        tp,
        inputs,
        request=request,
        extractor=extractor,
        concurrency=concurrency,
        rpm=rpm,
        tpm=tpm,
        ledger=ledger,
        max_cost=max_cost,
        max_attempts=max_attempts,
        backoff=backoff,
        retry_failed=retry_failed,
        label=label,
        total=total,
        provider_batch=provider_batch,
        job_retry=job_retry,
        poll_interval=poll_interval,
        job_size=job_size,
    )
    return AsyncBatchRun(spec)
