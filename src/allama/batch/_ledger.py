"""The ledger: an SQLite file that makes a batch run resumable without paying twice.

One row per input, keyed by a hash of what determines its answer (the request, the type's
schema, the provider). Before an input is sent, its row is claimed in a committed
transaction that counts the attempt, so an input is never sent more often than its recorded
attempts, whenever the process dies; a finished input's value, record or error is committed
as it finishes, so nothing finished is lost. A later run skips what is finished and takes
over what a dead run left in flight.

Two runs may share a ledger: claims are atomic (`BEGIN IMMEDIATE`), and an input in flight
in a run that is alive (its process is running, or its heartbeat is recent) is left to it.
WAL mode lets `allama batch status` read beside a writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic_core

from allama._prices import MONEY
from allama._printable import storable
from allama.batch._threads import settle

if TYPE_CHECKING:
    from allama.types import Warning

__all__ = [
    "Claim",
    "JobPhase",
    "JobRow",
    "Ledger",
    "LedgerError",
    "LedgerRow",
    "LedgerWriter",
    "Status",
]

SCHEMA_VERSION = 4

HEARTBEAT_SECONDS = 5.0
"""How often a live run says so; a run on another host silent for `STALE_AFTER` is dead."""
STALE_AFTER = 60.0
LOCK_WAIT_MS = 60000
"""How long a write waits for another connection's lock (another run's write, a copy
holding the file) before it fails with SQLite's `database is locked`."""
LOOP_WAIT_MS = 20
"""How long a write on a run's event loop lets SQLite wait for a lock before it gives the
loop back, to be tried again in a moment (`LedgerWriter`): SQLite waits by sleeping, and
the loop may be the caller's, whose other tasks (a web server's) would stop meanwhile."""
LOOP_PAUSE_MOST = 0.1
"""The longest pause before such a write is tried again (from 5 ms, doubling)."""
CHECKPOINT_WAIT_MS = 3000
"""How long a run that ends waits for readers and other runs to let it empty the `-wal`."""
WAL_SIZE_LIMIT = 64 * 1024 * 1024
"""What a run cuts its `-wal` back to once a checkpoint has moved it into the file: grown
while a reader held an old moment of the ledger (`status`, `export` reading long: 8 KB an
input), it kept its largest size, reused, until the run ended."""


class Status:
    IN_FLIGHT = "in_flight"
    DONE = "done"
    FAILED = "failed"
    PENDING = "pending"
    """Tried, and to be tried again (a retryable failure when the run stopped)."""
    SUBMITTED = "submitted"
    """In a provider batch job (`job`): collected by whichever run finds the job ended."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_started TEXT,
    started_at REAL NOT NULL,
    heartbeat REAL NOT NULL,
    finished_at REAL,
    settings TEXT NOT NULL,
    stopped TEXT
);
CREATE TABLE IF NOT EXISTS items (
    key TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    label TEXT,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    run_id TEXT,
    claimed_at REAL,
    finished_at REAL,
    seconds REAL,
    value TEXT,
    record TEXT,
    error TEXT,
    cost TEXT,
    tokens INTEGER,
    job TEXT,
    log TEXT,
    source TEXT,
    reopened TEXT
);
CREATE INDEX IF NOT EXISTS items_status ON items (status);
CREATE TABLE IF NOT EXISTS jobs (
    tag TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    base_url TEXT,
    api TEXT,
    model TEXT NOT NULL,
    job_id TEXT,
    state TEXT NOT NULL,
    outcome TEXT,
    counts TEXT,
    error TEXT,
    requests INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    collector TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    clock TEXT,
    input_file TEXT
);
CREATE TABLE IF NOT EXISTS schemas (digest TEXT PRIMARY KEY, text TEXT NOT NULL);
"""
"""The tables, made where missing each time a run opens the ledger. The last, `schemas`, holds
the schema of each run's type once per digest (the run's `types` setting), which a later
run of a type of the same name compares its own with (`Ledger.schema`): added to an older
ledger so, with no new schema version, as a version without it reads and writes the ledger
as it did (its runs keep no schema, and none is compared with theirs)."""

_ADDED_COLUMNS = (("job", "TEXT"), ("log", "TEXT"), ("source", "TEXT"), ("reopened", "TEXT"))
"""Columns of `items` added since schema 1, added to older ledgers: `job` and `log` in
schema 2 (provider batch jobs), `source` in 3 (the output a value was read from),
`reopened` in 4 (a failure claimed again by a run that tries failures again: the id of the
run that failed it, `""` for none, until the input ends again)."""


_ADDED_JOB_COLUMNS = (("clock", "TEXT"), ("input_file", "TEXT"))
"""Columns of `jobs` added since, added to older ledgers (which a version without them
reads and writes as it did): `clock`, the machine's boot and the time since it when the
job was recorded (`_clock_reading`); `input_file`, the provider's id of the file uploaded
for the job, recorded before its making is asked (`Ledger.job_file`) and cleared once it is
deleted (`Ledger.job_file_deleted`)."""


EARLIER_VALUE = "\x00"
"""The `source` of a value a version before schema 3 kept (no output beside it, whatever
its type): validated again as it is, since its JSON was never checked to read back."""


class JobPhase:
    SUBMITTING = "submitting"
    """Recorded before the job is sent: a run that died here left a job that may exist."""
    SUBMITTED = "submitted"
    NOT_SUBMITTED = "not_submitted"
    COLLECTED = "collected"


@dataclass(frozen=True, slots=True)
class JobRow:
    """A provider batch job as the ledger holds it: `tag` is allama's name for it, `job_id`
    the provider's (once known); `state` the phase or the provider's last reported status."""

    tag: str
    provider: str
    base_url: str | None
    api: str | None
    model: str
    job_id: str | None
    state: str
    outcome: str | None
    counts: dict[str, int] | None
    error: str | None
    requests: int
    run_id: str
    created_at: float
    updated_at: float
    collector: str | None
    cancel_requested: bool
    clock: str | None = None
    """When the job was recorded, on this machine's clock since its boot (`_clock_reading`)."""
    input_file: str | None = None
    """The file uploaded for it (its requests' text), once uploaded, until it is deleted at
    the provider: a run that finds the job was never made deletes it, as no one else knows
    of it; one that keeps the job's rows deletes it with its results."""

    def submitted_at(self) -> tuple[float, bool]:
        """When the job was recorded, on this machine's clock as it reads now, and whether
        that was measured: on the same boot of the same machine, by the clock since its
        boot (a clock set back or forward since changes nothing; time asleep counts). Else
        its `created_at`, written by another machine's clock or before a restart, which may
        be off by any amount."""
        boot, _, then = (self.clock or "").partition(" ")
        if boot and boot == _boot():
            with contextlib.suppress(ValueError):
                return time.time() - (since_boot() - float(then)), True
        return self.created_at, False


def _boot() -> str | None:
    """This boot of this machine (Linux's boot id, the same in its containers), for whose
    length the monotonic clock counts; `None` where it cannot be told."""
    global _BOOT
    if _BOOT is None:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as said:
                _BOOT = said.read().strip() or ""
        except OSError:
            _BOOT = ""
    return _BOOT or None


_BOOT: str | None = None


def since_boot() -> float:
    """Seconds since this machine booted, time asleep included (Linux's `CLOCK_BOOTTIME`;
    elsewhere the monotonic clock): never set back or forward, and a laptop's sleep counts,
    as it does on the provider's clock."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return time.monotonic()


def _clock_reading() -> str | None:
    """A moment as `JobRow.submitted_at` reads it: the boot and the time since it."""
    boot = _boot()
    if boot is None or not hasattr(time, "CLOCK_BOOTTIME"):
        return None
    return f"{boot} {since_boot()!r}"


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One input as the ledger holds it. Its `repr` leaves out what may quote the input or
    the model's output: the value, the error's words, the jobs' answers, the output kept."""

    key: str
    position: int
    label: str | None
    status: str
    attempts: int
    run_id: str | None
    seconds: float | None
    value: str | None = field(repr=False)
    """The validated value as JSON text (done rows)."""
    record: dict[str, Any] | None
    error: dict[str, Any] | None = field(repr=False)
    """The error's log view (kind, provider, status, allama's own words), and the
    provider's own words for it (`provider_message`), which may quote the input."""
    cost: str | None
    tokens: int | None
    job: str | None = None
    """The provider batch job (its tag) the input is in, or was last in."""
    log: list[dict[str, Any]] | None = field(default=None, repr=False)
    """What the provider batch jobs and the live follow-ups answered so far (status and
    body of each outcome the extraction took in, a live one marked so: priced at the
    standard rate), replayed to carry an extraction on where it was."""
    source: str | None = field(default=None, repr=False)
    """The output text the value was read from (done rows), kept where the value's JSON
    would not read back as the value: read again, it gives the value the run gave. `None`
    where the JSON does; `""` where it does not and the output was not kept (the type
    holds a secret)."""
    reopened: str | None = None
    """Set on a failure a run that tries failures again claimed and has not finished
    (pending or in flight): to a run that does not, it is the failure it was."""


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of claiming an input: `row` is what the ledger held before, if anything.

    `granted`: the input is this run's to send (its attempts already counted). Otherwise it
    is finished (`row.status` done or failed), or in flight in a live run (`elsewhere`)."""

    granted: bool
    attempts: int
    row: LedgerRow | None = None
    elsewhere: bool = False


def _process_started(pid: int) -> str | None:
    """When process `pid` started (Linux: its start time in clock ticks), to tell a live
    process from a later one that reuses its id."""
    state = _process_state(pid)
    return None if state is None else state[1]


def _process_state(pid: int) -> tuple[str, str] | None:
    """Process `pid`'s state (`Z`: ended, not yet reaped by its parent) and start time, on
    Linux; `None` elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return fields[0], fields[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    """Whether the process of a run is running: one killed whose parent has not reaped it
    yet (a zombie) answers signals, but runs no more."""
    permitted = True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive, unless its state says otherwise
        permitted = False
    state = _process_state(pid)
    if state is None:  # no /proc to read (another system), or gone since
        return started is None or not permitted
    return state[0] not in ("Z", "X") and (started is None or state[1] == started)


class Ledger:
    """An SQLite ledger for one run (`run_id`), safe to share with other runs and readers.

    Used from one thread at a time per instance (the batch runner's event loop)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        settings: dict[str, Any] | None = None,
        read_only: bool = False,
        schema: tuple[str, str] | None = None,
    ):
        """Open (or create) the ledger at `path`; `settings` registers a run, and `schema`
        the digest and text of its type's schema, kept once per digest (`schema`) rather
        than in each run's settings (a type of 20,000 choices has a schema of 660 KB).
        `read_only` opens an existing ledger for reading (`LedgerError` when there is
        none)."""
        self.path = Path(path)
        self.run_id = uuid.uuid4().hex
        self._read_only = read_only
        self._select = _SELECT
        self._has_jobs = self._job_clock = self._job_file = True
        if read_only:
            self._connection = _read_only(self.path)
            self._select = f"SELECT key, {row_columns(self._connection)} FROM items"
            job_columns = {row[1] for row in self._connection.execute("PRAGMA table_info(jobs)")}
            self._has_jobs = bool(job_columns)
            self._job_clock = "clock" in job_columns  # a ledger an earlier version made
            self._job_file = "input_file" in job_columns
        else:
            check_ledger_file(self.path)
            # By its absolute path: SQLite reads a name such as `file:app.db` as a URI (another
            # file than the one checked) and `:memory:` as no file at all.
            self._connection = sqlite3.connect(
                self.path.absolute(),
                timeout=LOCK_WAIT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        self._lock = threading.Lock()
        self._waits_ms = 5000 if read_only else LOCK_WAIT_MS
        """How long SQLite waits for another connection's lock now (`_wait_for_locks`)."""
        self._host = socket.gethostname()
        self._pid = os.getpid()
        self._last_beat = 0.0
        self._began = (0.0, 0.0)
        """When the run was registered: the wall clock's time and the time since boot."""
        self._ended_runs: set[str] = set()
        if read_only:
            return
        with self._lock:
            db = self._connection
            db.execute(f"PRAGMA busy_timeout = {LOCK_WAIT_MS}")
            _while_locked(lambda: db.execute("PRAGMA journal_mode = WAL"))
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            # Made or upgraded in one transaction: runs that open a new (or an older) ledger
            # at once take turns, rather than each adding the same column.
            db.executescript("BEGIN IMMEDIATE;" + _SCHEMA)
            try:
                self._upgrade_and_register(settings, schema)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _upgrade_and_register(
        self, settings: dict[str, Any] | None, schema: tuple[str, str] | None = None
    ) -> None:
        """Within the opening transaction: columns added by later versions, the schema's
        version, and this run, with its type's schema unless a run kept it."""
        db = self._connection
        _check_version(db, self.path)
        columns = item_columns(db)
        for name, kind in _ADDED_COLUMNS:
            if name not in columns:
                db.execute(f"ALTER TABLE items ADD COLUMN {name} {kind}")
        job_columns = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
        for name, kind in _ADDED_JOB_COLUMNS:
            if job_columns and name not in job_columns:
                db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
        if "source" not in columns:
            # Values a version before schema 3 kept: validated again as they are.
            db.execute(
                "UPDATE items SET source = ? WHERE status = ? AND value IS NOT NULL",
                (EARLIER_VALUE, Status.DONE),
            )
        db.execute(
            "UPDATE meta SET value = ? WHERE name = 'schema_version' AND CAST(value AS "
            "INTEGER) < ?",
            (str(SCHEMA_VERSION), SCHEMA_VERSION),
        )
        db.execute(
            "INSERT OR IGNORE INTO meta (name, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        if settings is not None:
            now = time.time()
            db.execute(
                "INSERT INTO runs (run_id, host, pid, pid_started, started_at, heartbeat, "
                "settings) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    self.run_id,
                    self._host,
                    self._pid,
                    _process_started(self._pid),
                    now,
                    now,
                    json.dumps(settings, sort_keys=True, default=str),
                ),
            )
            self._last_beat = now
            self._began = (now, since_boot())
        if schema is not None:
            db.execute("INSERT OR IGNORE INTO schemas (digest, text) VALUES (?, ?)", schema)

    # Writing

    def _heartbeat(self) -> None:
        now = time.time()
        if 0.0 <= now - self._last_beat < HEARTBEAT_SECONDS:
            return  # a clock set back beats at once: another host would read it as stale
        self._last_beat = now
        self._connection.execute(
            "UPDATE runs SET heartbeat = ? WHERE run_id = ?", (now, self.run_id)
        )

    def claim(
        self, key: str, position: int, label: str | None, *, retry_failed: bool = False
    ) -> Claim:
        """Claim `key` for this run, counting an attempt, unless it is finished or in flight
        in a live run. Committed before returning: the attempt is on disk before it is sent.
        A failure a run that died had claimed again (`retry_failed`) is taken over only by a
        run that tries failures again too; to any other it is the failure it was."""
        with self._transaction():
            return self._claim(key, position, label, retry_failed=retry_failed)

    def _claim(
        self, key: str, position: int, label: str | None, *, retry_failed: bool = False
    ) -> Claim:
        self._heartbeat()
        db = self._connection
        # An input the ledger has never seen (every input of a first run) is claimed by one
        # statement; one it knows is looked at first.
        inserted = db.execute(
            "INSERT INTO items (key, position, label, status, attempts, run_id, claimed_at) "
            "VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT (key) DO NOTHING",
            (key, position, label, Status.IN_FLIGHT, self.run_id, time.time()),
        )
        if inserted.rowcount == 1:
            return Claim(True, 1, None)
        found = db.execute(self._select + " WHERE key = ?", (key,)).fetchone()
        row = _row(found) if found is not None else None
        if row is not None:
            if row.status in (Status.DONE, Status.FAILED):
                return Claim(False, row.attempts, row)
            if row.status == Status.SUBMITTED:
                return Claim(False, row.attempts, row, elsewhere=True)
            if (
                row.status == Status.IN_FLIGHT
                and row.run_id != self.run_id
                and self._run_alive(row.run_id)
            ):
                return Claim(False, row.attempts, row, elsewhere=True)
            if not retry_failed and row.status in (Status.IN_FLIGHT, Status.PENDING):
                # A failure a run that tries failures again claimed, and left unfinished
                # (killed, stopped, set aside): to this run, the failure it was.
                failed = self._failed_again(key)
                if failed is not None:
                    return Claim(False, failed.attempts, failed)
        attempts = (row.attempts if row is not None else 0) + 1
        db.execute(
            "INSERT INTO items (key, position, label, status, attempts, run_id, "
            "claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            "status = excluded.status, attempts = excluded.attempts, "
            "run_id = excluded.run_id, claimed_at = excluded.claimed_at, "
            "position = excluded.position, label = excluded.label",
            (key, position, label, Status.IN_FLIGHT, attempts, self.run_id, time.time()),
        )
        return Claim(True, attempts, row)

    def _wait_for_locks(self, ms: int) -> None:
        """Let SQLite wait up to `ms` for another connection's lock, set where it changes:
        short for the writes on a run's event loop (`LedgerWriter`), which try again
        later, the full wait for every other write."""
        if ms != self._waits_ms:
            self._connection.execute(f"PRAGMA busy_timeout = {ms}")
            self._waits_ms = ms

    @contextlib.contextmanager
    def _transaction(self, wait_ms: int = LOCK_WAIT_MS) -> Iterator[None]:
        with self._lock:
            db = self._connection
            self._wait_for_locks(wait_ms)
            db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def again(self, key: str) -> int:
        """Count one more attempt of an input this run holds (a retry after a provider
        error), committed before it is sent."""
        with self._transaction():
            return self._again(key)

    def _again(self, key: str) -> int:
        """The attempts, one more; 0 when the input is no longer this run's: another run
        took it over, having seen this one as ended (a heartbeat it read as stale, across
        hosts whose clocks differ, or a process it could not see), and sends it itself."""
        counted = self._connection.execute(
            "UPDATE items SET attempts = attempts + 1, claimed_at = ? WHERE key = ? AND run_id = ?",
            (time.time(), key, self.run_id),
        )
        return self._attempts(key) if counted.rowcount == 1 else 0

    def _still_held(self, key: str) -> bool:
        """Whether an input this run claimed and has not sent yet is still its own (the
        claim made again now); `False` when another run took it over meanwhile."""
        kept = self._connection.execute(
            "UPDATE items SET claimed_at = ? WHERE key = ? AND run_id = ? AND status = ?",
            (time.time(), key, self.run_id, Status.IN_FLIGHT),
        )
        return kept.rowcount == 1

    def finish(self, key: str, **outcome: Any) -> bool:
        """Record how an input ended (`status`, `seconds`, and its value, record, error,
        cost and tokens), committed before returning; `False` when the input is no longer
        this run's (another run took it over), and nothing was recorded."""
        with self._transaction():
            return self._finish(key, **outcome)

    def _finish(
        self,
        key: str,
        *,
        status: str,
        seconds: float,
        value: str | None = None,
        source: str | None = None,
        record: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        cost: str | None = None,
        tokens: int | None = None,
    ) -> bool:
        finished = self._connection.execute(
            # The answers a job gave it are in its record now: a failure sent again
            # (`retry_failed`) starts afresh, carrying that record, not replaying them.
            "UPDATE items SET status = ?, finished_at = ?, seconds = ?, value = ?, source = ?, "
            "record = ?, error = ?, cost = ?, tokens = ?, log = NULL, reopened = NULL "
            "WHERE key = ? AND run_id = ?",
            (
                status,
                time.time(),
                seconds,
                value,
                source,
                None if record is None else _json_text(record),
                None if error is None else _json_text(error),
                cost,
                tokens,
                key,
                self.run_id,
            ),
        )
        return finished.rowcount == 1

    def _set_aside(
        self,
        key: str,
        error: dict[str, Any],
        record: dict[str, Any] | None = None,
        cost: str | None = None,
        log: list[dict[str, Any]] | None = None,
    ) -> None:
        """Make an input this run sent pending again, its attempts counted and the error it
        met kept: an error that was not the input's (a refused key, a provider out of
        reach), or one the run stopped before trying again (a live call, or a row of a
        collected provider batch job: out of the job, what the jobs and live follow-ups
        answered kept). The record and cost of what its attempts paid are kept too, for the
        run that sends it again to count (`record`'s `earlier_attempts` hold those before
        the last)."""
        self._connection.execute(
            # A failure being tried again keeps its own error: the one met here was not
            # the input's, and a run that does not try failures again gives it as it was.
            "UPDATE items SET status = ?, error = CASE WHEN reopened IS NULL THEN ? ELSE error "
            "END, record = ?, cost = ?, job = NULL, log = COALESCE(?, log) "
            "WHERE key = ? AND run_id = ? AND status IN (?, ?)",
            (
                Status.PENDING,
                _json_text(error),
                None if record is None else _json_text(record),
                cost,
                json.dumps(log) if log else None,
                key,
                self.run_id,
                Status.IN_FLIGHT,
                Status.SUBMITTED,
            ),
        )

    def _keep_paid(self, key: str, record: dict[str, Any] | None, cost: str | None) -> None:
        self._connection.execute(
            "UPDATE items SET record = ?, cost = ? WHERE key = ? AND run_id = ? AND status = ?",
            (
                None if record is None else _json_text(record),
                cost,
                key,
                self.run_id,
                Status.IN_FLIGHT,
            ),
        )

    def reopen(self, key: str) -> None:
        """Make a failed input pending again (`retry_failed`), its attempts kept."""
        with self._transaction():
            self._reopen(key)

    def _reopen(self, key: str) -> None:
        # Who failed it is kept on disk: a run that dies holding it leaves a failure that a
        # run without `retry_failed` gives as it was, never sends (`_failed_again`).
        self._connection.execute(
            "UPDATE items SET status = ?, reopened = COALESCE(run_id, '') WHERE key = ? "
            "AND status = ?",
            (Status.PENDING, key, Status.FAILED),
        )

    def _failed_again(self, key: str) -> LedgerRow | None:
        """A failure claimed again by a run that tries failures again and left unfinished
        (in flight when it died, or pending when it stopped or set it aside): failed again,
        as the run that failed it left it, with its own error; `None` for any other
        input."""
        # With no log, as a failure is kept: what the run trying it again had sent of it
        # is not the failure's (a row it was sending again would read as a follow-up).
        restored = self._connection.execute(
            "UPDATE items SET status = ?, run_id = NULLIF(reopened, ''), reopened = NULL, "
            "log = NULL WHERE key = ? AND status IN (?, ?) AND reopened IS NOT NULL",
            (Status.FAILED, key, Status.IN_FLIGHT, Status.PENDING),
        )
        if restored.rowcount != 1:
            return None
        found = self._connection.execute(self._select + " WHERE key = ?", (key,)).fetchone()
        return _row(found) if found is not None else None

    def release(self, key: str) -> None:
        """Give back an input this run claimed but did not send (the run stopped)."""
        with self._transaction():
            self._release(key)

    def _resend(self, key: str, log: list[dict[str, Any]] | None) -> int:
        """Take an input this run holds out of its job to send it again (counting the
        attempt), keeping what the jobs (and live follow-ups) answered so far: a list, empty
        where they answered nothing it takes in (a server error), so that a run that resumes
        it knows it for a follow-up (sent live under `job_retry="live"`), not an input never
        sent."""
        resent = self._connection.execute(
            "UPDATE items SET status = ?, job = NULL, log = ?, attempts = attempts + 1, "
            "claimed_at = ? WHERE key = ? AND run_id = ?",
            (Status.IN_FLIGHT, json.dumps(log or []), time.time(), key, self.run_id),
        )
        # 0: no longer this run's (another took it over, the job's rows with it): not sent.
        return self._attempts(key) if resent.rowcount == 1 else 0

    def _release(self, key: str) -> None:
        # An input never tried before leaves no trace; one tried before is pending again,
        # and a failure claimed again failed again.
        failed_again = self._connection.execute(
            "UPDATE items SET status = ?, attempts = MAX(attempts - 1, 0), "
            "run_id = NULLIF(reopened, ''), reopened = NULL, log = NULL "
            "WHERE key = ? AND run_id = ? AND status = ? AND reopened IS NOT NULL",
            (Status.FAILED, key, self.run_id, Status.IN_FLIGHT),
        )
        if failed_again.rowcount == 1:
            return
        self._connection.execute(
            "DELETE FROM items WHERE key = ? AND run_id = ? AND status = ? AND attempts <= 1 "
            "AND record IS NULL AND error IS NULL AND log IS NULL",
            (key, self.run_id, Status.IN_FLIGHT),
        )
        self._connection.execute(
            "UPDATE items SET status = ?, attempts = MAX(attempts - 1, 0) "
            "WHERE key = ? AND run_id = ? AND status = ?",
            (Status.PENDING, key, self.run_id, Status.IN_FLIGHT),
        )

    # Provider batch jobs

    def record_job(
        self,
        tag: str,
        *,
        provider: str,
        base_url: str | None,
        api: str | None,
        model: str,
        items: list[tuple[str, list[dict[str, Any]]]],
    ) -> None:
        """Record a job about to be sent and put its inputs (key and replay log) in it,
        committed before anything is sent: a run that dies while sending leaves a job to
        look for, never inputs to send again blindly."""
        with self._transaction():
            now = time.time()
            self._connection.execute(
                "INSERT INTO jobs (tag, provider, base_url, api, model, state, requests, "
                "run_id, created_at, updated_at, clock) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    tag,
                    provider,
                    base_url,
                    api,
                    model,
                    JobPhase.SUBMITTING,
                    len(items),
                    self.run_id,
                    now,
                    now,
                    _clock_reading(),
                ),
            )
            self._connection.executemany(
                "UPDATE items SET status = ?, job = ?, log = ? WHERE key = ? AND run_id = ?",
                [
                    (Status.SUBMITTED, tag, json.dumps(log) if log else None, key, self.run_id)
                    for key, log in items
                ],
            )

    def job_keys(self, tag: str) -> frozenset[str]:
        """The keys of the inputs in job `tag`: its requests' ids at the provider."""
        with self._lock:
            found = self._connection.execute("SELECT key FROM items WHERE job = ?", (tag,))
            return frozenset(key for (key,) in found)

    def job_submitted(self, tag: str, job_id: str) -> None:
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET job_id = ?, state = ?, updated_at = ? WHERE tag = ?",
                (job_id, JobPhase.SUBMITTED, time.time(), tag),
            )

    def job_file(self, tag: str, name: str) -> None:
        """Record the file uploaded for job `tag`, committed before its making is asked: a
        run cut off before the job was made leaves its id for the next run to delete."""
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET input_file = ?, updated_at = ? WHERE tag = ?",
                (name, time.time(), tag),
            )

    def job_file_deleted(self, tag: str, name: str) -> None:
        """The file `name` recorded for job `tag` is deleted at the provider (or was gone):
        the job's record names no file left there (`allama batch status`)."""
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET input_file = NULL WHERE tag = ? AND input_file = ?",
                (tag, name),
            )

    def job_not_submitted(self, tag: str, error: str, *, never_sent: bool = False) -> None:
        """The job does not exist at the provider: its inputs go back to pending.
        `never_sent`: no job of it was made (the run that submitted it was cut off first;
        its file may have been uploaded), none of it run, so the attempt counted for it is
        given back."""
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET state = ?, error = ?, updated_at = ? WHERE tag = ?",
                (JobPhase.NOT_SUBMITTED, error, time.time(), tag),
            )
            self._connection.execute(
                "UPDATE items SET status = ?, job = NULL, attempts = MAX(attempts - ?, 0) "
                "WHERE job = ? AND status = ?",
                (Status.PENDING, int(never_sent), tag, Status.SUBMITTED),
            )

    def job_state(
        self,
        tag: str,
        *,
        state: str,
        outcome: str | None,
        counts: dict[str, int] | None,
        error: str | None,
    ) -> None:
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET state = ?, outcome = ?, counts = ?, error = ?, updated_at = ? "
                "WHERE tag = ? AND state != ?",
                (  # the provider's words for its job's state: no lone surrogate
                    storable(state),
                    None if outcome is None else storable(outcome),
                    json.dumps(counts) if counts else None,
                    None if error is None else storable(error),
                    time.time(),
                    tag,
                    JobPhase.COLLECTED,
                ),
            )

    def request_cancel(self, tag: str) -> None:
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET cancel_requested = 1, updated_at = ? WHERE tag = ?",
                (time.time(), tag),
            )

    def withdraw_cancel(self, tag: str) -> None:
        """Take back a cancel that could not be made (its job not told apart from
        another's): no run fails the job's inputs as cancelled for it."""
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET cancel_requested = 0, updated_at = ? WHERE tag = ?",
                (time.time(), tag),
            )

    def cancel_requested(self, tag: str) -> bool:
        """Whether a cancel of the job was asked for (by `allama batch cancel`, perhaps
        while this run polls it)."""
        with self._lock:
            found = self._connection.execute(
                "SELECT cancel_requested FROM jobs WHERE tag = ?", (tag,)
            ).fetchone()
        return bool(found and found[0])

    def take_job(self, tag: str) -> bool:
        """Make this run the collector of a job and of its inputs still in it, unless a
        live run collects it. Committed before returning."""
        with self._transaction():
            db = self._connection
            found = db.execute(
                "SELECT collector, run_id FROM jobs WHERE tag = ?", (tag,)
            ).fetchone()
            if found is None:
                return False
            collector, submitter = found
            if collector not in (None, self.run_id) and self._run_alive(collector):
                return False
            if collector is None and submitter != self.run_id and self._run_alive(submitter):
                return False
            db.execute("UPDATE jobs SET collector = ? WHERE tag = ?", (self.run_id, tag))
            db.execute(
                "UPDATE items SET run_id = ? WHERE job = ? AND status = ?",
                (self.run_id, tag, Status.SUBMITTED),
            )
            return True

    def job_collected(self, tag: str) -> None:
        """Mark job `tag` collected, unless another run took it over (its collector then,
        which collects it itself)."""
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET state = ?, updated_at = ? WHERE tag = ? AND "
                "COALESCE(collector, run_id) = ?",
                (JobPhase.COLLECTED, time.time(), tag, self.run_id),
            )

    def collect_ended(self) -> None:
        """Mark collected the jobs that ended and hold no input still waiting on them: a run
        killed between writing a job's rows and marking it left it so, and no run takes it
        up again (its inputs are finished)."""
        with self._transaction():
            self._connection.execute(
                "UPDATE jobs SET state = ?, updated_at = ? WHERE outcome IS NOT NULL AND "
                "state NOT IN (?, ?, ?) AND NOT EXISTS (SELECT 1 FROM items WHERE "
                "items.job = jobs.tag AND items.status = ?)",
                (
                    JobPhase.COLLECTED,
                    time.time(),
                    JobPhase.COLLECTED,
                    JobPhase.SUBMITTING,
                    JobPhase.NOT_SUBMITTED,
                    Status.SUBMITTED,
                ),
            )

    def jobs(self) -> list[JobRow]:
        with self._lock:
            if not self._has_jobs:
                return []
            found = self._connection.execute(
                "SELECT tag, provider, base_url, api, model, job_id, state, outcome, counts, "
                "error, requests, run_id, created_at, updated_at, collector, cancel_requested, "
                f"{'clock' if self._job_clock else 'NULL'}, "
                f"{'input_file' if self._job_file else 'NULL'} FROM jobs ORDER BY rowid"
            ).fetchall()
        return [
            JobRow(
                tag=raw[0],
                provider=raw[1],
                base_url=raw[2],
                api=raw[3],
                model=raw[4],
                job_id=raw[5],
                state=raw[6],
                outcome=raw[7],
                counts=None if raw[8] is None else json.loads(raw[8]),
                error=raw[9],
                requests=int(raw[10]),
                run_id=raw[11],
                created_at=float(raw[12]),
                updated_at=float(raw[13]),
                collector=raw[14],
                cancel_requested=bool(raw[15]),
                clock=raw[16],
                input_file=raw[17],
            )
            for raw in found
        ]

    def job_alive(self, job: JobRow) -> bool:
        """Whether a live run submits or collects `job` (so that this run leaves it)."""
        with self._lock:
            if job.collector is not None and job.collector != self.run_id:
                return self._run_alive(job.collector)
            return job.run_id != self.run_id and self._run_alive(job.run_id)

    def end(self, stopped: str | None) -> None:
        """Mark the run finished; what it still had in flight becomes pending. Known ended
        in this process even when that cannot be written (a full disk): a run again in it
        takes up what this one held, rather than take it for a live run's."""
        try:
            self._end(stopped)
        except sqlite3.Error:
            _ENDED_HERE.add(self.run_id)
            raise

    def _end(self, stopped: str | None) -> None:
        with self._lock:
            db = self._connection
            self._wait_for_locks(LOCK_WAIT_MS)  # its statements commit one by one
            db.execute(
                "UPDATE items SET status = ? WHERE run_id = ? AND status = ?",
                (Status.PENDING, self.run_id, Status.IN_FLIGHT),
            )
            # Its end on the clock of its start: a clock set back or forward while it ran
            # (a time server's step) changes no run's length; time asleep counts.
            began, booted = self._began
            ended = began + since_boot() - booted if began else time.time()
            db.execute(
                "UPDATE runs SET finished_at = ?, stopped = ? WHERE run_id = ?",
                (ended, stopped, self.run_id),
            )

    def close(self) -> None:
        """Close the ledger; a run's first moves what it wrote into the file and empties the
        `-wal`, waiting a moment for readers (`status`, `export`) and other runs: SQLite does
        so on its own only as the last connection closes, and a reader's cannot. A reader
        still reading after `CHECKPOINT_WAIT_MS` keeps the moment it reads: what the run
        wrote after that moment stays in the `-wal` (the ledger is the file and it together,
        as SQLite reads it), until the next run to write the ledger moves it (as it ends, at
        the latest)."""
        with self._lock:
            if not self._read_only:
                with contextlib.suppress(sqlite3.Error):
                    self._wait_for_locks(CHECKPOINT_WAIT_MS)
                    self._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            self._connection.close()

    # Reading

    def _run_alive(self, run_id: str | None) -> bool:
        if run_id is None:
            return False
        if run_id in self._ended_runs or run_id in _ENDED_HERE:
            return False  # an ended run, a process gone: neither comes back
        found = self._connection.execute(
            "SELECT host, pid, pid_started, heartbeat, finished_at FROM runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if found is None:
            return False
        host, pid, started, beat, finished = found
        if finished is None and host != self._host:
            # Across hosts its heartbeat says: a run paused (a machine asleep, a stopped
            # process) beats again when it resumes, and what it claims then is its own.
            return time.time() - float(beat) < STALE_AFTER
        alive = finished is None and _alive(int(pid), started)
        if not alive:
            self._ended_runs.add(run_id)
        return alive

    def rows(self, status: str | None = None, *, values: bool = True) -> Iterator[LedgerRow]:
        """The rows (of `status`), in their inputs' order, read a hundred at a time: a
        ledger of gigabytes of values is not held in memory. `values=False` reads none of
        what is large (a value, the output kept, the jobs' answers: `None` in each row), for
        counting what the ledger holds. Read inside `snapshot()`, every row is of one
        moment. The order is the one the ledger first saw the inputs in (runs claim them in
        their order): a corpus split over runs comes part after part, where the positions
        each run gives its inputs, from 0, would interleave the parts."""
        select = self._select if values else _as_null(self._select, ("value", "log", "source"))
        query = select + ("" if status is None else " WHERE status = ?") + " ORDER BY rowid"
        with self._lock:
            found = self._connection.execute(query, () if status is None else (status,))
        while True:
            with self._lock:
                chunk = found.fetchmany(100)
            if not chunk:
                return
            for raw in chunk:
                yield _row(raw)

    def _unsent_attempt(self, key: str) -> int:
        self._connection.execute(
            "UPDATE items SET attempts = MAX(attempts - 1, 0) WHERE key = ? AND run_id = ?",
            (key, self.run_id),
        )
        return self._attempts(key)

    def _attempts(self, key: str) -> int:
        """The attempts the ledger counts for `key` (0 for a key it does not hold)."""
        found = self._connection.execute(
            "SELECT attempts FROM items WHERE key = ?", (key,)
        ).fetchone()
        return int(found[0]) if found is not None else 0

    def _kept(self, key: str) -> LedgerRow | None:
        """The input's row, whatever its status (`None` for a key the ledger does not hold)."""
        found = self._connection.execute(self._select + " WHERE key = ?", (key,)).fetchone()
        return None if found is None else _row(found)

    def left_by_ended_runs(self, keys: Iterable[str]) -> int:
        """Of `keys`, left in flight in another run, those no run finished that ended since
        (killed, or on another host silent past its heartbeat's minute): a run again sends
        them."""
        with self._lock:
            left = 0
            alive: dict[str | None, bool] = {}
            for key in keys:
                row = self._kept(key)
                if row is None:  # given back unsent by a run that stopped: none holds it
                    left += 1
                    continue
                if row.status in (Status.DONE, Status.FAILED, Status.SUBMITTED):
                    continue
                if row.status == Status.IN_FLIGHT:
                    if row.run_id not in alive:
                        alive[row.run_id] = self._run_alive(row.run_id)
                    if alive[row.run_id]:
                        continue
                left += 1
            return left

    def endpoints(self) -> dict[str, str | None]:
        """The endpoint each run of the ledger sent to (its settings' `endpoint`, `None`
        where it kept none: an earlier version's run, a provider with no URL), by run id."""
        return self.setting_of_runs("endpoint")

    def setting_of_runs(self, name: str) -> dict[str, str | None]:
        """One text setting of each run of the ledger (`settings_of_runs`)."""
        return self.settings_of_runs(name)[name]

    def settings_of_runs(self, *names: str) -> dict[str, dict[str, str | None]]:
        """Text settings of each run of the ledger (`None` where it kept none: a run of an
        earlier version), by name and run id, read at once; read apart once the ledger
        is closed (a run that ended, writing what the ledger holds of inputs it did not
        reach)."""
        query = "SELECT run_id, settings FROM runs ORDER BY rowid"  # (as they began)
        try:
            with self._lock:
                found = self._connection.execute(query).fetchall()
        except sqlite3.ProgrammingError:  # closed
            db = _read_only(self.path)
            try:
                found = db.execute(query).fetchall()
            finally:
                db.close()
        settings: dict[str, dict[str, str | None]] = {name: {} for name in names}
        for run_id, text in found:
            try:
                kept = json.loads(text)
            except (ValueError, TypeError):
                kept = None
            for name in names:
                setting = kept.get(name) if isinstance(kept, dict) else None
                settings[name][str(run_id)] = setting if isinstance(setting, str) else None
        return settings

    def schema(self, digest: str) -> str | None:
        """The text of the type's schema a run of the ledger kept by its digest (its `types`
        setting); `None` where no run kept it (a run of an earlier version)."""
        query = "SELECT text FROM schemas WHERE digest = ?"
        try:
            with self._lock:
                found = self._connection.execute(query, (digest,)).fetchone()
        except sqlite3.OperationalError:  # read only, a ledger no run of this version opened
            return None
        return None if found is None else str(found[0])

    def paid(self, like: dict[str, Any] | None = None) -> tuple[Decimal, dict[str, str]]:
        """What the ledger's inputs paid for, in all (done or not), and the cost kept for
        each input not done (failed, pending, or left in flight) whose attempts paid for
        something, by key: money a budget counts from the start of a run, the job's whole.
        `like`: only inputs last claimed by a run whose settings have these values (a ledger
        shared by runs of other settings holds inputs this run never reads); an input of a
        run the ledger does not know counts."""
        agree = _Agreement(like)
        total = Decimal(0)
        unfinished: dict[str, str] = {}
        with self._lock, localcontext(MONEY):
            agreed = {
                run_id: agree(settings)
                for run_id, settings in self._connection.execute(
                    "SELECT run_id, settings FROM runs"
                )
            }
            # Row by row, and the key only of an input not done: the rows of a ledger of a
            # million inputs took 400 MB at once. Summed here, not by SQL: its SUM of the
            # costs (decimal text) would be in floats.
            found = self._connection.execute(
                "SELECT CASE WHEN status = ? THEN NULL ELSE key END, cost, run_id FROM items "
                "WHERE cost IS NOT NULL",
                (Status.DONE,),
            )
            # Closed however the loop ends: a cursor an error's traceback kept would hold
            # the read open, and no checkpoint could move the run's writes meanwhile.
            with contextlib.closing(found):
                for key, cost, run_id in found:
                    if not agreed.get(run_id, True):  # (a run the ledger does not know counts)
                        continue
                    try:
                        total += Decimal(cost)
                    except ArithmeticError:
                        continue
                    if key is not None:
                        unfinished[str(key)] = str(cost)
        return total, unfinished

    def unpriced(self, like: dict[str, Any] | None = None) -> str | None:
        """Why the cost of what an input paid is not known, for the first such input (of
        runs whose settings have `like`'s values); `None` when every cost is known."""
        agree = _Agreement(like)
        with self._lock:
            found = self._connection.execute(
                "SELECT items.record, runs.settings FROM items LEFT JOIN runs "
                "ON runs.run_id = items.run_id WHERE items.cost IS NULL "
                "AND items.record IS NOT NULL"
            )
            for record, settings in found:
                if not agree(settings):
                    continue
                try:
                    kept = json.loads(record)
                except ValueError:
                    continue
                why = why_unpriced(kept) if isinstance(kept, dict) else None
                if why is not None:
                    return why
        return None

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside sees the ledger at one moment (one read transaction), while
        runs go on writing it: a run that starts, claims or finishes between two reads is
        in both or in neither."""
        db = self._connection
        if db.in_transaction:  # already one moment: the writer's own transaction
            yield
            return
        with self._lock:
            db.execute("BEGIN")
        try:
            yield
        finally:
            with self._lock, contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")  # nothing written: the reads' transaction ends

    def counts(self) -> dict[str, int]:
        with self._lock:
            found = self._connection.execute(
                "SELECT status, COUNT(*) FROM items GROUP BY status"
            ).fetchall()
        return {str(status): int(count) for status, count in found}

    def counts_by_run(self) -> dict[str | None, dict[str, int]]:
        """The inputs' counts by status, by the run that last worked on them."""
        with self._lock:
            found = self._connection.execute(
                "SELECT run_id, status, COUNT(*) FROM items GROUP BY run_id, status"
            ).fetchall()
        out: dict[str | None, dict[str, int]] = {}
        for run_id, status, count in found:
            out.setdefault(run_id, {})[str(status)] = int(count)
        return out

    def run_state(self, run_id: str) -> str:
        """`finished`, `running` (its process is alive, or its heartbeat recent) or `dead`."""
        with self._lock:
            found = self._connection.execute(
                "SELECT finished_at FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if found is not None and found[0] is not None:
                return "finished"
            return "running" if self._run_alive(run_id) else "dead"

    def runs(self) -> list[dict[str, Any]]:
        with self._lock:
            found = self._connection.execute(
                "SELECT run_id, host, pid, started_at, heartbeat, finished_at, settings, stopped "
                "FROM runs ORDER BY rowid"  # as they began: a clock may have been set back
            ).fetchall()
        names = ("run_id", "host", "pid", "started_at", "heartbeat", "finished_at")
        out = []
        for raw in found:
            entry = dict(zip(names, raw[:6], strict=True))
            entry["settings"] = _cell(raw[6], dict, f"run {raw[0]}", "settings")
            entry["stopped"] = raw[7]
            entry["state"] = self.run_state(entry["run_id"])
            out.append(entry)
        return out


_COLUMNS = (
    "position, label, status, attempts, run_id, seconds, value, record, error, cost, tokens, "
    "job, log, source, reopened"
)
"""The columns of a row after its key, in the order `_row` reads them."""
_SELECT = f"SELECT key, {_COLUMNS} FROM items"


class _Agreement:
    """Whether a run's settings (their JSON text in the ledger) have `like`'s values; read
    once per run."""

    def __init__(self, like: dict[str, Any] | None) -> None:
        self._like = like
        self._seen: dict[str, bool] = {}

    def __call__(self, settings: str | None) -> bool:
        if self._like is None or settings is None:
            return True
        same = self._seen.get(settings)
        if same is None:
            try:
                theirs = json.loads(settings)
            except ValueError:
                theirs = {}
            same = self._seen[settings] = _one_job(self._like, theirs)
        return same


def _one_job(mine: dict[str, Any], theirs: Any) -> bool:
    """Whether a run of settings `theirs` is of the job of `mine`: the same provider, type,
    and request, where both runs know their request (a template). A run whose requests a
    function builds may have made any of the other's, with the same keys: of one job with
    every run of the same provider and type, in either direction (a budget had better
    count too much than too little). A setting a run did not record (a ledger of an
    earlier version) is no difference: its inputs count."""
    if not isinstance(theirs, dict):
        theirs = {}
    types = mine.get("types")
    if types is not None and theirs.get("types") is not None:
        if theirs.get("provider") != mine.get("provider") or theirs["types"] != types:
            return False
        built = theirs.get("inputs") == theirs["types"] or mine.get("inputs") == types
        return bool(built or theirs.get("inputs") == mine.get("inputs"))
    if types is not None and "provider" in theirs and theirs["provider"] == mine.get("provider"):
        # A run of a version that did not keep `types`: a function's, whose inputs are
        # them; or, for a function's run, a template's of a type of the same name.
        if theirs.get("inputs") == types:
            return True
        if mine.get("inputs") == types and theirs.get("type") == mine.get("type"):
            return True
    like = {name: value for name, value in mine.items() if name not in ("types", "type")}
    return all(k not in theirs or theirs[k] == v for k, v in like.items())


def why_unpriced(record: dict[str, Any]) -> str | None:
    """Why the cost a row keeps no amount for is unknown, when one of its attempts was paid
    for (a pass, or usage a failed call reported), as a run's summary counts it; `None`
    when none was."""
    earlier = record.get("earlier_attempts")
    attempts = [*(earlier if isinstance(earlier, list) else []), record]
    paid = [
        a
        for a in attempts
        if isinstance(a, dict) and (a.get("passes") or a.get("usage") is not None)
    ]
    if not paid:
        return None
    missing = next(
        (a.get("cost_missing") for a in attempts if isinstance(a, dict) and a.get("cost_missing")),
        None,
    )
    return str(missing or "no price known")


WARNINGS_KEY = "request_warnings"
"""The key of a row's `record` holding its request's warnings (a field the provider left
out, a list cut short) that the record's own `degradations` and `notes` do not: each as
`Warning`'s JSON. In the record's JSON rather than a column of its own, so that the schema
is unchanged: a ledger written before reads as holding none, and a version that does not
know the key reads the record as it did (an extraction's record ignores what it does not
know). Left out when there are none."""


def with_warnings(record: dict[str, Any], warnings: Iterable[Warning]) -> dict[str, Any]:
    """`record` (a row's, as the ledger writes it) holding `warnings`,
    when there are any: `record` itself, changed."""
    kept = [warning.model_dump(mode="json", exclude_none=True) for warning in warnings]
    if kept:
        record[WARNINGS_KEY] = kept
    return record


def kept_warnings(record: dict[str, Any] | None) -> tuple[Warning, ...]:
    """The request's warnings a row's `record` holds (`with_warnings`), as `allama.Warning`s:
    none for a record of a ledger written before they were kept. One this version cannot
    read (another version's kind of warning) is left out, not the row."""
    kept = None if record is None else record.get(WARNINGS_KEY)
    if not kept or not isinstance(kept, list):
        return ()
    from pydantic import ValidationError

    from allama.types import Warning

    known = Warning.model_fields
    found: list[Warning] = []
    for entry in kept:
        if not isinstance(entry, dict):
            continue
        try:
            found.append(Warning.model_validate({k: v for k, v in entry.items() if k in known}))
        except ValidationError:
            continue
    return tuple(found)


def row_columns(connection: sqlite3.Connection) -> str:
    """`_COLUMNS` as a ledger holds them: those an older version did not write read as
    NULL."""
    held = item_columns(connection)
    return _as_null(_COLUMNS, [name for name, _ in _ADDED_COLUMNS if name not in held])


def _as_null(columns: str, names: Iterable[str]) -> str:
    """`columns` (of `_COLUMNS`, or a select of them) with those `names` read as NULL."""
    for name in names:
        columns = re.sub(rf", {name}\b", ", NULL", columns)
    return columns


def item_columns(connection: sqlite3.Connection) -> set[str]:
    """The columns a ledger's `items` has: fewer in one an older version wrote."""
    return {row[1] for row in connection.execute("PRAGMA table_info(items)")}


def _locked(error: BaseException) -> bool:
    """Whether `error` is SQLite's for a lock another connection holds."""
    words = str(error)
    return isinstance(error, sqlite3.OperationalError) and ("locked" in words or "busy" in words)


def _while_locked(statement: Callable[[], Any], limit: float = 60.0) -> Any:
    """Run `statement`, again while another connection holds the lock it needs. SQLite
    answers some statements (switching to WAL while another run opens the same new ledger)
    with `database is locked` at once, without waiting, where waiting could deadlock."""
    deadline = time.monotonic() + limit
    pause = 0.005
    while True:
        try:
            return statement()
        except sqlite3.OperationalError as error:
            if not _locked(error) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def _json_text(data: dict[str, Any]) -> str:
    """`data` as compact JSON text (what is not JSON written as its `str`): the record of
    every finished input, written by pydantic-core at a sixth of `json.dumps`' cost."""
    return pydantic_core.to_json(data, fallback=str).decode()


def _row(raw: tuple[Any, ...]) -> LedgerRow:
    key, position, label, status, attempts, run_id, seconds, value, record, error = raw[:10]
    return LedgerRow(
        key=key,
        position=int(position),
        label=label,
        status=status,
        attempts=int(attempts),
        run_id=run_id,
        seconds=seconds,
        value=value,
        record=_cell(record, dict, key, "record"),
        error=_cell(error, dict, key, "error"),
        cost=raw[10],
        tokens=raw[11],
        job=raw[12],
        log=_cell(raw[13] or None, list, key, "log"),
        source=raw[14],
        reopened=raw[15] if len(raw) > 15 else None,
    )


def _cell(text: str | None, kind: type, key: str, column: str) -> Any:
    """A JSON column of a row read back, or a `LedgerError` naming the row where it is not
    what the ledger writes there (a file damaged, or written by another program)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        value = None
    if not isinstance(value, kind):
        raise LedgerError(
            f"the `{column}` of the input keyed `{key}` is not what a ledger writes there "
            "(a damaged file?)"
        )
    return value


_ENDED_HERE: set[str] = set()
"""Runs this process ended, whatever their ledger could be written with."""


class LedgerError(Exception):
    """A file that is not a ledger (or is missing), opened for reading, or named as the
    ledger of a run."""


class _NoFolder(LedgerError, FileNotFoundError):
    """The folder a run's ledger is named in is not there."""


def check_ledger_file(path: Path) -> None:
    """A file at `path` must be a ledger, or empty (a new one is made there): another
    database would be changed for good by a run (its journal mode, tables added). A run
    writes it, and its `-wal` and `-shm` files beside it."""
    place = path.absolute().parent
    if not place.is_dir():
        # Said now, with the path: SQLite says only "unable to open database file", later.
        raise _NoFolder(f"the ledger's folder does not exist: `{place}`")
    if not os.access(place, os.W_OK) or (path.is_file() and not os.access(path, os.W_OK)):
        # SQLite would say "attempt to write a readonly database", or call it no ledger.
        where = path if os.access(place, os.W_OK) else place
        raise LedgerError(
            f"cannot write the ledger: `{where}` is read-only (a run records every input "
            "there); `allama batch status` and `export` read it where it is"
        )
    # A device (`/dev/null`), a FIFO, a socket: SQLite would fail at its first write,
    # after the run began, and make a journal beside it (`/dev/null-journal`).
    other = _not_a_file(path)
    if other is not None:
        raise LedgerError(f"{other}: name the ledger's file")
    for beside in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        # Made by a reader of another user (their `status`): SQLite cannot write it, and
        # would say only "attempt to write a readonly database", once the run began.
        if beside.is_file() and not os.access(beside, os.W_OK):
            raise LedgerError(
                f"`{beside}`, beside the ledger, cannot be written by this user (it belongs to "
                f"user {beside.stat().st_uid}, whose `allama batch status` or `export` may have "
                "made it): remove it while no run uses the ledger, or run as that user"
            )
    if not path.is_file() or not path.stat().st_size:
        return
    try:
        db = _open_read_only(path, "mode=ro")
    except sqlite3.DatabaseError as error:
        raise LedgerError(_unreadable(path, error)) from None
    try:
        tables = _tables(db)
        # No tables: a new ledger another run is making (or an empty database), made one here.
        if tables and not tables >= _LEDGER_TABLES:
            raise LedgerError(f"`{path}` is not a ledger: {_NOT_ITS_TABLES}")
        _check_version(db, path)
    except sqlite3.DatabaseError as error:
        raise LedgerError(_unreadable(path, error)) from None
    finally:
        db.close()


def _not_a_file(path: Path) -> str | None:
    """What is at `path` where it is there and no file: a folder, a device, a FIFO."""
    if path.is_dir():
        return f"`{path}` is a folder"
    if path.exists() and not path.is_file():
        return f"`{path}` is not a file (a device, a FIFO)"
    return None


def no_ledger_file(path: Path) -> str | None:
    """Why there is no ledger's file to read at `path`, if there is none."""
    if path.is_file():
        return None
    other = _not_a_file(path)
    return f"no such ledger: `{path}`" if other is None else f"{other}, not a ledger"


def runs_settings(path: Path) -> list[dict[str, Any]]:
    """The settings of each run of the ledger at `path`, in the order they began; none
    where there is no ledger to read (whatever opens it next says why)."""
    try:
        db = _read_only(path)
    except (LedgerError, sqlite3.Error):
        return []
    try:
        found = db.execute("SELECT settings FROM runs ORDER BY rowid").fetchall()
    except sqlite3.Error:
        return []
    finally:
        db.close()
    settings = []
    for (text,) in found:
        with contextlib.suppress(ValueError, TypeError):
            loaded = json.loads(text)
            if isinstance(loaded, dict):
                settings.append(loaded)
    return settings


def _unreadable(path: Path, error: sqlite3.DatabaseError, said: str = "is not a ledger") -> str:
    """Why `path` could not be read: held by another process (SQLite waited for it, then
    gave up), which a moment may end, or not a ledger at all."""
    words = str(error)
    if isinstance(error, sqlite3.OperationalError) and ("locked" in words or "busy" in words):
        return (
            f"`{path}` is held by another process ({words}): a run or a copy holding it "
            "whole; try again in a moment"
        )
    return f"`{path}` {said}: {words}"


def _read_only(path: Path) -> sqlite3.Connection:
    missing = no_ledger_file(path)
    if missing is not None:
        raise LedgerError(missing)
    try:
        try:
            db = _open_read_only(path, "mode=ro")
        except sqlite3.OperationalError:
            if os.access(path.resolve().parent, os.W_OK):
                raise
            wal = path.with_name(path.name + "-wal")
            if wal.is_file() and wal.stat().st_size:
                raise LedgerError(
                    f"`{path}` is in a read-only place with writes not yet moved into it "
                    f"(its `{wal.name}`) and no `-shm` file to read them by: copy the ledger "
                    "with its -wal file somewhere writable, and read it there"
                ) from None
            # A read-only place (a mount, an archive): reading a WAL database needs its
            # `-shm` file, which SQLite cannot make there. Nothing can write the ledger
            # there either, so it is read as the unchanging file it is.
            db = _open_read_only(path, "immutable=1")
    except sqlite3.DatabaseError as error:
        raise LedgerError(_unreadable(path, error)) from None
    try:
        tables = _tables(db)
        if not tables:  # (as a run takes it: a ledger another run is making)
            raise LedgerError(
                f"`{path}` holds no ledger yet: an SQLite file with no tables, which a run "
                "starting may be making; look again in a moment"
            )
        if not tables >= _LEDGER_TABLES:
            raise LedgerError(f"`{path}` is not a ledger: {_NOT_ITS_TABLES}")
        _check_version(db, path)
    except sqlite3.DatabaseError as error:  # a damaged file
        db.close()
        raise LedgerError(_unreadable(path, error, "cannot be read as a ledger")) from None
    except BaseException:
        db.close()
        raise
    return db


def _check_version(db: sqlite3.Connection, path: Path) -> None:
    """A ledger a later version made or upgraded may keep in its columns what this one
    would misread (a marker taken for a value) or drop on its next write: refused."""
    if "meta" not in _tables(db):
        return
    row = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
    try:
        version = int(row[0]) if row is not None else 0
    except (TypeError, ValueError):
        raise LedgerError(
            f"`{path}` is not a ledger this version reads: its schema version is "
            f"{str(row[0])[:40]!r}"
        ) from None
    if version > SCHEMA_VERSION:
        raise LedgerError(
            f"`{path}` is a ledger of schema {version}, made by a later version of allama "
            f"(this one reads up to schema {SCHEMA_VERSION}): upgrade allama to use it"
        )


_LEDGER_TABLES = frozenset({"items", "runs"})
_NOT_ITS_TABLES = "an SQLite file without its tables"


def _tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _open_read_only(path: Path, how: str) -> sqlite3.Connection:
    db = sqlite3.connect(f"{path.resolve().as_uri()}?{how}", uri=True, check_same_thread=False)
    try:
        db.execute("SELECT name FROM sqlite_master").fetchall()
    except BaseException:
        db.close()
        raise
    return db


class LedgerWriter:
    """The ledger's writes for one event loop, committed together: the writes tasks make
    in one turn of the loop share one transaction, made when the turn's callbacks have run.
    Every write waits for its commit, so a claim is on disk before its input is sent and a
    result before it is handed over, as with one transaction each, at a fraction of the
    cost. (A thread of its own for the writes cost more than it saved: handing each write
    over and back, and the interpreter lock between the two threads.)

    Where another connection holds the ledger's lock (another run's write, a copy), SQLite
    waits `LOOP_WAIT_MS` at most, and the writes are tried again after a pause that grows,
    the loop going on meanwhile, until the lock has been held `LOCK_WAIT_MS` in all: then
    they fail, as a write that waited so long does."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._loop = asyncio.get_running_loop()
        self._pending: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self.commits = 0
        self.first_unknown: Callable[[], None] | None = None
        """Called once, when a claim first finds an input the ledger did not hold."""
        self._again: asyncio.TimerHandle | None = None
        """The flush to come, of writes that found the ledger locked."""
        self._locked_since: float | None = None
        self._pause = 0.0
        # The run says it is alive while nothing is written too (calls that take minutes,
        # a long pause after a 429): a run on another host would take its inputs over.
        self._beating = self._loop.create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            with contextlib.suppress(sqlite3.Error):  # the run's own writes will say so
                await self._submit(self._ledger._heartbeat)

    @property
    def run_id(self) -> str:
        return self._ledger.run_id

    async def claim(
        self, key: str, position: int, label: str | None, *, retry_failed: bool = False
    ) -> Claim:
        claimed: Claim = await self._submit(
            lambda: self._ledger._claim(key, position, label, retry_failed=retry_failed)
        )
        if claimed.row is None and self.first_unknown is not None:
            told, self.first_unknown = self.first_unknown, None
            told()
        return claimed

    async def kept(self, key: str) -> LedgerRow | None:
        """Read in the turn's transaction, after the writes before it."""
        row: LedgerRow | None = await self._submit(lambda: self._ledger._kept(key))
        return row

    async def unsent_attempt(self, key: str) -> int:
        """Give back the attempt counted for a send that was not made; the attempts left."""
        attempts: int = await self._submit(lambda: self._ledger._unsent_attempt(key))
        return attempts

    async def again(self, key: str) -> int:
        attempts: int = await self._submit(lambda: self._ledger._again(key))
        return attempts

    async def still_held(self, key: str) -> bool:
        held: bool = await self._submit(lambda: self._ledger._still_held(key))
        return held

    async def finish(self, key: str, **outcome: Any) -> bool:
        finished: bool = await self._submit(lambda: self._ledger._finish(key, **outcome))
        return finished

    async def reclaim(self, key: str, position: int, label: str | None) -> Claim:
        """Make a failed input pending and claim it, in one transaction: a run killed
        between the two leaves it failed."""

        def reclaim() -> Claim:
            self._ledger._reopen(key)
            return self._ledger._claim(key, position, label, retry_failed=True)

        claimed: Claim = await self._submit(reclaim)
        return claimed

    async def set_aside(
        self,
        key: str,
        error: dict[str, Any],
        record: dict[str, Any] | None = None,
        cost: str | None = None,
        log: list[dict[str, Any]] | None = None,
    ) -> None:
        await self._submit(lambda: self._ledger._set_aside(key, error, record, cost, log))

    async def keep_paid(self, key: str, record: dict[str, Any] | None, cost: str | None) -> None:
        """Keep what an input in flight has paid so far (its record, with the attempts
        before the last, and their cost) while it waits to be sent again."""
        await self._submit(lambda: self._ledger._keep_paid(key, record, cost))

    async def release(self, key: str) -> None:
        await self._submit(lambda: self._ledger._release(key))

    async def resend(
        self,
        key: str,
        log: list[dict[str, Any]] | None,
        paid: tuple[dict[str, Any], str | None] | None = None,
    ) -> int:
        """`Ledger._resend`; `paid`: the record and cost of what the input paid so far (the
        answers kept, failed rows, earlier runs' attempts), kept in the same transaction,
        where `Ledger.paid` counts them while it is sent again."""

        def resend() -> int:
            attempts = self._ledger._resend(key, log)
            if attempts and paid is not None:
                self._ledger._keep_paid(key, *paid)
            return attempts

        attempts: int = await self._submit(resend)
        return attempts

    def _submit(self, write: Callable[[], Any]) -> asyncio.Future[Any]:
        done: asyncio.Future[Any] = self._loop.create_future()
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append((write, done))
        return done

    def close(self) -> None:
        """Commit what is still waiting, and stop the heartbeat (a run that ends): at once,
        waiting for a lock as long as any write outside the loop does."""
        self._beating.cancel()
        self._flush(patient=True)

    async def aclose(self) -> None:
        """`close`, the writes still waiting committed as the loop's writes are: the loop
        goes on while another connection holds the lock. Their failure is theirs: each
        write's task was told (`close` raises none either)."""
        self._beating.cancel()
        if self._pending:
            with contextlib.suppress(sqlite3.Error):
                await finished(self._submit(lambda: None))  # committed after those before

    def commit(self) -> None:
        """Commit what is still waiting now; the run goes on (and its heartbeat)."""
        self._flush(patient=True)

    def _flush(self, *, patient: bool = False) -> None:
        if self._again is not None:
            self._again.cancel()
            self._again = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        begun = False
        try:
            with self._ledger._transaction(LOCK_WAIT_MS if patient else LOOP_WAIT_MS):
                begun = True
                for write, done in batch:
                    try:
                        outcomes.append((done, write(), None))
                    except sqlite3.Error as failed:
                        outcomes.append((done, None, failed))
            self.commits += 1
        except BaseException as failed:  # the commit failed: so did every write in it
            if not begun and _locked(failed) and self._try_later(batch):
                return  # nothing was written: the same writes, in a moment
            outcomes = [(done, None, failed) for _, done in batch]
        self._locked_since = None
        for done, result, problem in outcomes:
            settle(done, result, problem)

    def _try_later(self, batch: list[tuple[Callable[[], Any], asyncio.Future[Any]]]) -> bool:
        """Flush `batch` (with what comes meanwhile) again after a pause, from 5 ms, doubling
        up to `LOOP_PAUSE_MOST`; `False` once the lock has been held `LOCK_WAIT_MS`."""
        now = time.monotonic()
        if self._locked_since is None:
            self._locked_since, self._pause = now, 0.005
        elif now - self._locked_since >= LOCK_WAIT_MS / 1000:
            return False
        else:
            self._pause = min(self._pause * 2, LOOP_PAUSE_MOST)
        self._pending[:0] = batch
        self._again = self._loop.call_later(self._pause, self._flush)
        return True


_T = TypeVar("_T")


async def finished(future: asyncio.Future[_T]) -> _T:
    """What `future` gives, waited for to its end even where the task awaiting it is
    cancelled meanwhile: the run does not end (nor its loop close) while a step of its
    ledger (its opening, its last writes, its end) is still under way, as it did not while
    the step stopped the loop. The cancellation comes again at the task's next wait (or as
    it ends)."""
    interrupted = False
    try:
        while True:
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                if future.cancelled():
                    interrupted = False  # (raised here: the task's cancellation with it)
                    raise
                interrupted = True
    finally:
        task = asyncio.current_task()
        if interrupted and task is not None:
            task.uncancel()  # (counted once, as it was asked once)
            task.cancel()


async def aside(work: Callable[[], _T]) -> _T:
    """`work()`, a step of the ledger that may wait for SQLite's locks a while (a run's
    opening, up to a minute behind another run's write; its end's checkpoint, seconds
    behind a reader), in a daemon thread of its own: the event loop, perhaps the caller's,
    goes on meanwhile. Finished whatever happens to the task that awaits it (`finished`)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def work_and_tell() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = work()
        except BaseException as failed:  # handed to the task that waits
            error = failed
        with contextlib.suppress(RuntimeError):  # the loop closed: no one waits
            loop.call_soon_threadsafe(settle, future, result, error)

    thread = threading.Thread(target=work_and_tell, name="allama-ledger", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # the interpreter is exiting, and starts no thread: done here
        work_and_tell()
    return await finished(future)
