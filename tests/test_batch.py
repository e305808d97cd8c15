"""Batch runs against a local server that rate-limits, fails some requests and answers
slowly: every input accounted for, a 429 slowing the run and never ending it, and a ledger
that survives `kill -9` without sending anything more often than it recorded."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import itertools
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import genai_prices
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    Json,
    SecretStr,
    computed_field,
    field_validator,
)
from pydantic.alias_generators import to_camel

import allama
import allama.mock
from _batch_server import BatchServer, _completion, expected
from _kill import kill_after
from allama import ChatRequest, ChatResponse, Extractor
from allama.batch import BatchFailure, BatchSummary, Ledger, input_key
from allama.batch._run import _spec
from allama.mock import ChatResponseBuilder, TestProvider
from allama.wrappers import FailoverProvider, RetryingProvider

HERE = Path(__file__).resolve().parent
PRICES = genai_prices.__version__


class Row(BaseModel):
    n: int


@pytest.fixture
def server() -> Iterator[BatchServer]:
    served = BatchServer(delay=0.004).start()
    yield served
    served.stop()


@pytest.fixture
def unpriced() -> Iterator[BatchServer]:
    """The server, answering as a model genai-prices has no price for."""
    served = BatchServer(model="a-model-of-our-own").start()
    yield served
    served.stop()


UNPRICED = ChatRequest("a-model-of-our-own")


def provider_for(server: BatchServer) -> allama.HttpProvider:
    return allama.provider("openai", api_key="sk-test", base_url=server.url)


TEMPLATE = ChatRequest("gpt-4o-mini").system("Read the number.")


def docs(count: int) -> list[str]:
    return [f"doc {n}" for n in range(count)]


def outcome(result: allama.BatchResult[Any]) -> str:
    return "ok" if result.failure is None else result.failure.kind


def test_every_input_is_accounted_for_and_a_429_slows_the_run(server: BatchServer) -> None:
    server.rate = 80  # requests per second, well under what 32 at a time would send
    run = allama.batch(
        provider_for(server), Row, docs(300), request=TEMPLATE, concurrency=32, backoff=0.01
    )
    results = list(run)
    assert sorted(r.index for r in results) == list(range(300))
    for result in results:
        assert outcome(result) == expected(result.index), result
        if result.ok:
            assert result.value == Row(n=result.index)
            assert result.metadata is not None and result.metadata.passes == 1
    summary = run.summary
    assert (summary.done, summary.failed) == (288, 12)
    assert summary.failures_by_kind == {"extraction_parse": 6, "invalid_request": 6}
    assert server.limited > 0 and summary.slowdowns > 0  # 429s happened, none failed an input
    # Every 429 is counted; the rate was cut fewer times (a burst of them is one cut).
    assert summary.rate_limited == server.limited >= summary.slowdowns
    (line,) = [line for line in summary.lines() if line.startswith("rate limits: ")]
    assert re.fullmatch(
        rf"rate limits: {server.limited} answered 429, the rate cut "
        rf"{'once' if summary.slowdowns == 1 else f'{summary.slowdowns} times'}, "
        r"\d+\.\d s waited by inputs in all",
        line,
    )
    # Every 503 was tried again: documents 3, 13, 23... were sent twice (13 and 63... fail
    # with 400 on the first send and are never retried).
    assert server.sent[3] == 2 and server.sent[4] == 1 and server.sent[13] == 1
    assert summary.passes == 288 + 6
    assert summary.by_enforcement == {"exact": 288}
    assert summary.input_tokens == 100 * (288 + 6)


def test_the_async_twin_runs_the_same(server: BatchServer) -> None:
    async def main() -> list[allama.BatchResult[Row]]:
        run = allama.abatch(provider_for(server), Row, docs(60), request=TEMPLATE, backoff=0.01)
        return [result async for result in run]

    results = asyncio.run(main())
    assert sorted(r.index for r in results) == list(range(60))
    assert all(outcome(r) == expected(r.index) for r in results)


def test_a_ledger_run_again_sends_nothing_that_finished(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    provider = provider_for(server)
    first = allama.batch(provider, Row, docs(40), request=TEMPLATE, ledger=ledger, backoff=0.01)
    before = {r.index: outcome(r) for r in first}
    sent = sum(server.sent.values())
    again = allama.batch(provider, Row, docs(40), request=TEMPLATE, ledger=ledger)
    results = list(again)
    assert sum(server.sent.values()) == sent  # nothing sent again
    assert all(r.resumed for r in results)
    assert {r.index: outcome(r) for r in results} == before
    assert [r.value for r in sorted(results, key=lambda r: r.index) if r.ok][:3] == [
        Row(n=0),
        Row(n=1),
        Row(n=2),
    ]
    assert again.summary.resumed == 40 and again.summary.passes == first.summary.passes
    # Failed inputs are finished too, unless asked to try them again.
    retried = list(
        allama.batch(provider, Row, docs(40), request=TEMPLATE, ledger=ledger, retry_failed=True)
    )
    assert sorted(r.index for r in retried if not r.resumed) == [7, 13]


# `Row` with a validator added after a run filled the ledger: the same schema (no docstring,
# which would be its description), so the same keys.
class CheckedRow(BaseModel):
    model_config = ConfigDict(title="Row")
    n: int

    @field_validator("n")
    @classmethod
    def even(cls, n: int) -> int:
        if n % 2:
            raise ValueError(f"{n} is odd")
        return n


def test_a_stored_value_that_no_longer_validates_is_that_inputs_failure(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    provider = provider_for(server)
    first = list(allama.batch(provider, Row, docs(6), request=TEMPLATE, ledger=ledger))
    assert [outcome(r) for r in first] == ["ok"] * 6
    sent = sum(server.sent.values())
    run = allama.batch(provider, CheckedRow, docs(6), request=TEMPLATE, ledger=ledger)
    results = sorted(run, key=lambda r: r.index)
    assert sum(server.sent.values()) == sent  # finished: nothing sent again
    assert [(outcome(r), r.resumed) for r in results] == [
        ("ok", True),
        ("stored_value_invalid", True),
    ] * 3
    assert [r.value for r in results[::2]] == [CheckedRow(n=0), CheckedRow(n=2), CheckedRow(n=4)]
    failure = results[1].failure
    assert failure is not None and failure.message == (
        "finished by an earlier run, but its value in the ledger does not validate as "
        "CheckedRow: `value_error` at n; the value stays in the ledger (`allama batch "
        "export` writes it)"
    )  # the validator's own words (which may quote the value) are not in it
    assert results[1].metadata is not None and results[1].metadata.passes == 1
    summary = run.summary
    assert (summary.done, summary.failed, summary.resumed) == (3, 3, 6)
    assert summary.failures_by_kind == {"stored_value_invalid": 3}
    rows = {row.position: row for row in Ledger(ledger, settings={}).rows()}
    assert rows[1].status == "done" and json.loads(rows[1].value or "") == {"n": 1}


class Tagged(BaseModel):
    """A type whose plain JSON does not read back: a `Json` field dumps as the object it
    holds, and a computed field is an unknown field to `extra="forbid"`."""

    model_config = ConfigDict(extra="forbid")
    n: int
    tags: Json[dict[str, int]]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return 2 * self.n


class Person(BaseModel):
    """Keys as an API spells them: the model answers by alias, the value dumps by name."""

    model_config = ConfigDict(alias_generator=to_camel)
    first_name: str
    born_in: int = Field(validation_alias=AliasChoices("bornIn", "year"))


def test_a_type_with_aliases_resumes(tmp_path: Path) -> None:
    answer = {"firstName": "Ada", "bornIn": 1815}
    first, resumed = _resumed(Person, answer, tmp_path / "run.sqlite")
    assert resumed == first == Person(firstName="Ada", bornIn=1815)
    (row,) = Ledger(tmp_path / "run.sqlite", settings={}).rows()
    assert json.loads(row.value or "") == {"first_name": "Ada", "born_in": 1815}


class Renamed(BaseModel):
    """Read by one alias, written by another: only its field names read back."""

    model_config = ConfigDict(serialize_by_alias=True)
    x: str = Field(validation_alias="a", serialization_alias="b")


def test_a_type_written_by_another_alias_resumes(tmp_path: Path) -> None:
    first, resumed = _resumed(Renamed, {"a": "v"}, tmp_path / "run.sqlite")
    assert resumed == first == Renamed(a="v")
    (row,) = Ledger(tmp_path / "run.sqlite", settings={}).rows()
    assert json.loads(row.value or "") == {"x": "v"}


class Blob(BaseModel):
    """Reads bytes as base64 but writes them as UTF-8: a value no JSON can be made of."""

    model_config = ConfigDict(val_json_bytes="base64")
    data: bytes


def test_a_value_the_ledger_cannot_hold_is_that_inputs_failure(tmp_path: Path) -> None:
    ledger = tmp_path / "run.sqlite"
    provider = allama.mock.MockProvider(['{"data": "/w=="}', '{"data": "aGk="}'])
    # One at a time: the scripted answers go to the inputs in order.
    run = allama.batch(
        provider, Blob, ["doc 1", "doc 2"], request=TEMPLATE, ledger=ledger, concurrency=1
    )
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["value_unstorable", "ok"]
    failure = results[0].failure
    assert failure is not None and failure.message == (
        "the value validated, but its type cannot write it as the JSON the ledger keeps "
        "(PydanticSerializationError); a run without a ledger gives it"
    )
    assert results[0].metadata is not None and results[0].metadata.passes == 1  # paid for
    rows = {row.position: row for row in Ledger(ledger, settings={}).rows()}
    assert (rows[0].status, rows[1].status) == ("failed", "done")
    assert rows[0].record is not None and rows[0].record["passes"] == 1


def test_a_ledger_that_cannot_be_written_loses_no_answer_and_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    finish = _ledger.Ledger._finish
    finished = itertools.count()

    def full_disk(self: Ledger, key: str, **outcome: Any) -> bool:
        if next(finished) >= 1:
            raise sqlite3.OperationalError("database or disk is full")
        return finish(self, key, **outcome)

    monkeypatch.setattr(_ledger.Ledger, "_finish", full_disk)
    ledger = tmp_path / "run.sqlite"
    provider = allama.mock.MockProvider(['{"n": 1}'] * 5)
    run = allama.batch(provider, Row, docs(5), request=TEMPLATE, ledger=ledger, concurrency=1)
    results = []
    with pytest.raises(allama.LedgerError) as raised:
        results.extend(run)
    # The answers the ledger could not keep are given (the second input's, and one sent
    # before the stop was known); no input starts after it.
    ordered = sorted(results, key=lambda r: r.index)
    given = [r for r in ordered if outcome(r) == "ok"]
    assert [(r.index, r.unkept) for r in given][:2] == [(0, False), (1, True)]
    assert {outcome(r) for r in ordered[len(given) :]} <= {"not_started"}
    unkept = run.summary.unkept
    assert unkept == sum(r.unkept for r in given) == len(given) - 1
    assert provider.call_count == len(given) == run.summary.done
    assert str(raised.value) == (
        f"the ledger `{ledger}` could not be written: database or disk is full; "
        + (
            "1 input this run ended is not in it (given all the same; a run again sends it again)"
            if unkept == 1
            else f"{unkept} inputs this run ended are not in it (given all the same; a run "
            "again sends them again)"
        )
    )
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    assert run.summary.stopped == (
        "the ledger could not be written: OperationalError: database or disk is full"
    )
    assert (
        f"not in the ledger: {unkept} ended by this run, which the ledger could not be "
        "written with (a run again sends them again)"
    ) in run.summary.lines()


def test_a_ledger_that_fails_in_one_run_is_taken_up_by_the_next_in_the_same_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    def full_disk(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("database or disk is full")

    ledger = tmp_path / "run.sqlite"
    inputs = ["doc 1", "doc 1", "doc 2"]
    with monkeypatch.context() as patched:
        patched.setattr(_ledger.Ledger, "_finish", full_disk)
        patched.setattr(_ledger.Ledger, "_end", full_disk)  # its end not written either
        provider = allama.mock.MockProvider(['{"n": 1}'] * 3)
        run = allama.batch(provider, Row, inputs, request=TEMPLATE, ledger=ledger)
        results: list[allama.BatchResult[Row]] = []
        with pytest.raises(allama.LedgerError):
            results.extend(run)
    # Each value given, the copy's too, says the ledger does not hold it.
    assert sorted((r.index, r.ok, r.unkept, r.duplicate) for r in results) == [
        (0, True, True, False),
        (1, True, True, True),
        (2, True, True, False),
    ]
    # A run again in this process (a notebook, a service) sends them again: the run
    # that held them ended, though the ledger could not be told.
    again = allama.mock.MockProvider(['{"n": 1}'] * 3)
    resent = allama.batch(again, Row, inputs, request=TEMPLATE, ledger=ledger)
    assert [outcome(r) for r in resent] == ["ok"] * 3
    assert again.call_count == 2 and resent.summary.elsewhere == 0


def test_inputs_read_after_a_budgets_stop_are_counted_when_the_ledger_fails(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    async def full_disk(self: Any, key: str) -> Any:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(_ledger.LedgerWriter, "kept", full_disk)
    run = allama.batch(
        provider_for(server),
        Row,
        docs(12),
        request=TEMPLATE,
        ledger=tmp_path / "run.sqlite",
        max_cost="0.00004",
        concurrency=1,
    )
    with pytest.raises(allama.LedgerError):
        list(run)
    summary = run.summary
    assert summary.done + summary.failed + summary.not_started == 12


@pytest.mark.parametrize("driven", ["sync", "async"])
def test_an_input_whose_claim_the_ledger_cannot_write_is_counted_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driven: str
) -> None:
    from allama.batch import _ledger

    claim = _ledger.Ledger._claim
    claims = itertools.count()

    def full_disk(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        if next(claims) >= 2:
            raise sqlite3.OperationalError("database or disk is full")
        return claim(self, *args, **kwargs)

    monkeypatch.setattr(_ledger.Ledger, "_claim", full_disk)
    provider = allama.mock.MockProvider(['{"n": 1}'] * 10)
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": tmp_path / "run.sqlite"}
    results: list[allama.BatchResult[Row]] = []
    summaries: list[BatchSummary] = []
    with pytest.raises(allama.LedgerError, match="database or disk is full"):
        if driven == "sync":
            run = allama.batch(provider, Row, docs(10), concurrency=2, **options)
            summaries.append(run.summary)
            results.extend(run)
        else:

            async def read() -> None:
                run = allama.abatch(provider, Row, docs(10), concurrency=2, **options)
                summaries.append(run.summary)
                async for result in run:
                    results.append(result)

            asyncio.run(read())
    # Every input is counted: the two claimed were sent, the rest not started (those read
    # with a result each, those never read in the summary alone).
    assert Counter(outcome(r) for r in results) == {"ok": 2, "not_started": len(results) - 2}
    (summary,) = summaries
    assert (summary.done, summary.failed, summary.not_started) == (2, 0, 8)
    assert provider.call_count == 2


@pytest.mark.parametrize("driven", ["sync", "async"])
def test_a_ledger_that_cannot_keep_a_repairs_passes_lets_the_repair_end_and_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driven: str
) -> None:
    def full_disk(self: Ledger, *args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Ledger, "_keep_paid", full_disk)
    provider = allama.mock.MockProvider(['{"n": "x"}', '{"n": 1}', '{"n": 2}'])
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {
        "request": TEMPLATE,
        "ledger": ledger,
        "extractor": Extractor(retries=1),
        "concurrency": 1,
    }
    results: list[allama.BatchResult[Row]] = []
    summaries: list[BatchSummary] = []
    with pytest.raises(allama.LedgerError, match="database or disk is full"):
        if driven == "sync":
            run = allama.batch(provider, Row, docs(2), **options)
            summaries.append(run.summary)
            results.extend(run)
        else:

            async def read() -> None:
                run = allama.abatch(provider, Row, docs(2), **options)
                summaries.append(run.summary)
                async for result in run:
                    results.append(result)

            asyncio.run(read())
    # The repair's keep failed, not the input: its second pass answered, and its end was
    # written; the run started nothing more.
    first = results[0]
    assert (first.value, first.unkept, first.metadata and first.metadata.passes) == (
        Row(n=1),
        False,
        2,
    )
    assert provider.call_count == 2
    assert [outcome(r) for r in results[1:]] == ["not_started"] * (len(results) - 1)
    (summary,) = summaries
    assert (summary.done, summary.failed, summary.not_started, summary.unkept) == (1, 0, 1, 0)
    assert summary.stopped == (
        "the ledger could not be written: OperationalError: database or disk is full"
    )
    rows = {row.position: row for row in Ledger(ledger, settings={}).rows()}
    assert rows[0].status == "done"


def test_an_input_the_ledger_cannot_set_aside_keeps_its_failure_and_what_it_paid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: Ledger, *args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Ledger, "_keep_paid", full_disk)
    monkeypatch.setattr(Ledger, "_set_aside", full_disk)
    invalid = ChatResponseBuilder().text('{"n": "x"}').usage(10, 5).build()
    busy = allama.OverloadedError("overloaded").with_status(503)
    provider = allama.mock.MockProvider([invalid, busy, '{"n": 1}'])
    run = allama.batch(
        provider,
        Row,
        docs(1),
        request=TEMPLATE,
        ledger=tmp_path / "run.sqlite",
        extractor=Extractor(retries=1),
        backoff=0,
    )
    results: list[allama.BatchResult[Row]] = []
    with pytest.raises(allama.LedgerError, match="database or disk is full"):
        results.extend(run)
    (result,) = results
    # Not tried again (the run stopped); its own failure, the pass it paid for counted,
    # said not to be in the ledger.
    assert provider.call_count == 2
    assert result.failure is not None and result.failure.kind == "overloaded"
    assert (result.unkept, result.pending, len(result.spent)) == (True, False, 1)
    summary = run.summary
    assert (summary.failed, summary.unkept, summary.passes) == (1, 1, 1)
    assert (summary.input_tokens, summary.output_tokens) == (10, 5)


def test_an_input_whose_try_again_the_ledger_cannot_count_is_not_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: Ledger, key: str) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Ledger, "_again", full_disk)
    busy = allama.OverloadedError("overloaded").with_status(503)
    provider = allama.mock.MockProvider([busy, '{"n": 1}'])
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(provider, Row, docs(1), request=TEMPLATE, ledger=ledger, backoff=0)
    results: list[allama.BatchResult[Row]] = []
    with pytest.raises(allama.LedgerError, match="database or disk is full"):
        results.extend(run)
    # An attempt the ledger did not count is not made; the input ends with what it met,
    # pending in the ledger for the next run.
    (result,) = results
    assert provider.call_count == 1
    assert result.failure is not None
    assert (result.failure.kind, result.pending, result.unkept) == ("overloaded", True, False)
    (row,) = Ledger(ledger, settings={}).rows()
    assert (row.status, row.attempts) == ("pending", 1)


def test_a_failure_the_ledger_cannot_keep_is_said_unkept_on_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: Ledger, key: str, **outcome: Any) -> bool:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Ledger, "_finish", full_disk)
    provider = allama.mock.MockProvider(['{"n": "x"}'])
    run = allama.batch(provider, Row, docs(1), request=TEMPLATE, ledger=tmp_path / "l.sqlite")
    results: list[allama.BatchResult[Row]] = []
    with pytest.raises(allama.LedgerError, match="1 input this run ended is not in it"):
        results.extend(run)
    (result,) = results
    assert result.failure is not None and result.failure.kind == "extraction_parse"
    assert (result.unkept, run.summary.unkept) == (True, 1)


def test_a_ledger_the_run_cannot_open_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    opened = _ledger.Ledger.__init__

    def read_only_place(self: Any, path: Any, *args: Any, **kwargs: Any) -> None:
        if not kwargs.get("read_only"):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        opened(self, path, *args, **kwargs)

    monkeypatch.setattr(_ledger.Ledger, "__init__", read_only_place)
    ledger = tmp_path / "run.sqlite"
    provider = allama.mock.MockProvider(['{"n": 1}'])
    run = allama.batch(provider, Row, ["doc 1"], request=TEMPLATE, ledger=ledger)
    with pytest.raises(allama.LedgerError) as raised:
        list(run)
    assert str(raised.value) == (
        f"the ledger `{ledger}` cannot be opened for the run: attempt to write a readonly database"
    )
    assert provider.call_count == 0


class Login(BaseModel):
    user: str
    password: SecretStr
    note: str = Field(default="", exclude=True)


def _resumed(tp: type[BaseModel], answer: dict[str, Any], ledger: Path) -> list[Any]:
    """The value of one input's first run, then of a run that resumes it."""
    values = []
    for _ in range(2):
        provider = allama.mock.MockProvider.with_text(json.dumps(answer))
        (result,) = allama.batch(provider, tp, ["doc"], request=TEMPLATE, ledger=ledger)
        assert result.failure is None, result.failure
        values.append(result.value)
    return values


def test_a_resumed_value_is_read_back_from_the_json_its_type_reads(tmp_path: Path) -> None:
    answer = {"n": 2, "tags": json.dumps({"a": 1})}
    first, resumed = _resumed(Tagged, answer, tmp_path / "run.sqlite")
    assert resumed == first == Tagged(n=2, tags=json.dumps({"a": 1}))
    (row,) = Ledger(tmp_path / "run.sqlite", settings={}).rows()
    assert json.loads(row.value or "") == {"n": 2, "tags": '{"a":1}'}


def test_what_a_types_json_leaves_out_a_resumed_run_does_not_have(tmp_path: Path) -> None:
    # The ledger keeps a value as its type writes it: a secret masked, an excluded field
    # left out. A resumed run hands back what that JSON holds (as the README says).
    answer = {"user": "ann", "password": "hunter2", "note": "kept"}
    first, resumed = _resumed(Login, answer, tmp_path / "run.sqlite")
    assert (first.password.get_secret_value(), first.note) == ("hunter2", "kept")
    assert (resumed.password.get_secret_value(), resumed.note) == ("**********", "")


def test_inputs_that_raise_let_those_in_flight_finish_then_raise(
    server: BatchServer, tmp_path: Path
) -> None:
    def documents() -> Iterator[str]:
        yield from docs(12)
        raise RuntimeError("the database went away")

    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        provider_for(server), Row, documents(), request=TEMPLATE, ledger=ledger, concurrency=4
    )
    results = []
    with pytest.raises(RuntimeError, match="the database went away"):
        results.extend(run)
    # Every input read has its result: those sent were finished and recorded, not dropped.
    assert sorted(r.index for r in results) == list(range(12))
    sent = {r.index for r in results if r.failure is None or r.failure.kind != "not_started"}
    assert sent == {n for n, count in server.sent.items() if count} and sent
    # A 503 (`doc 3`) met after the stop is not tried again: that input stays pending.
    set_aside = {r.index for r in results if outcome(r) == "overloaded"}
    assert set_aside <= {3}
    assert all(outcome(r) == expected(r.index) for r in results if r.index in sent - set_aside)
    rows = {row.position: row.status for row in Ledger(ledger, settings={}).rows()}
    assert sorted(rows) == sorted(sent)
    assert {n for n, status in rows.items() if status == "pending"} == set_aside
    assert set(rows.values()) <= {"done", "failed", "pending"}
    assert run.summary.stopped == "reading the inputs raised RuntimeError after 12"


def test_a_request_larger_than_the_limit_per_minute_fails_alone_and_slows_nothing(
    server: BatchServer,
) -> None:
    inputs = ["doc 1", "doc 2, too large", "doc 4", "doc 5"]
    run = allama.batch(provider_for(server), Row, inputs, request=TEMPLATE, concurrency=1)
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["ok", "rate_limited", "ok", "ok"]
    # Sent once: no wait would let it through, so it is not tried again, and the run's
    # rate is not cut for it.
    assert server.sent[2] == 1 and results[1].attempts == 1
    assert results[1].failure is not None and not results[1].failure.retryable
    assert (run.summary.rate_limited, run.summary.slowdowns, run.summary.stopped) == (1, 0, None)


def test_a_rate_limit_the_provider_says_not_to_retry_fails_its_input_and_slows_the_run(
    server: BatchServer, tmp_path: Path
) -> None:
    inputs = ["doc 1, not again", "doc 2", "doc 4"]
    run = allama.batch(provider_for(server), Row, inputs, request=TEMPLATE, concurrency=1)
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["rate_limited", "ok", "ok"]
    # Sent once (`x-should-retry: false`), but the wait it asked for is the run's.
    assert server.sent[1] == 1 and results[0].attempts == 1
    first, second = sorted(at for at, n in server.arrivals)[:2]
    assert second - first >= 0.9
    assert (run.summary.rate_limited, run.summary.slowdowns, run.summary.stopped) == (1, 1, None)
    # A wait longer than a run makes stops it, as a 429 tried again does: no silent pause.
    # Its input is left pending for the next run, as one tried again is, not failed.
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        provider_for(server),
        Row,
        ["doc 8, not again, a day", "doc 9"],
        request=TEMPLATE,
        concurrency=1,
        ledger=ledger,
    )
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["rate_limited", "not_started"]
    assert [r.pending for r in results] == [True, False]  # the second never claimed
    assert run.summary.stopped == "the provider asked to wait 86400 s before the next request"
    assert run.summary.elapsed < 30 and server.sent[9] == 0
    rows = [(row.position, row.status, row.attempts) for row in Ledger(ledger, settings={}).rows()]
    assert rows == [(0, "pending", 1)]


class Described(BaseModel):
    n: int = Field(description="the number of the document, " + "as it is written, " * 40)


def test_the_tokens_per_minute_count_the_schema_and_the_output_of_each_call(
    server: BatchServer,
) -> None:
    # Every answer is billed 110 tokens (100 in, 10 out); the schema alone is about 190.
    # Counting the messages alone (10 tokens), all six would go at once: 660 of 500.
    run = allama.batch(
        provider_for(server), Described, docs(6), request=TEMPLATE, concurrency=6, tpm=500
    )
    threading.Timer(3.0, run.stop).start()  # the sixth waits a minute for its room
    results = list(run)
    sent = sum(server.sent.values())
    assert 2 <= sent <= 4 and sent * 110 <= 500
    assert sum(outcome(r) == "ok" for r in results) == sent


@pytest.mark.parametrize(
    ("docs", "refused"),
    [
        # Docs 13 and 63 are refused (400, as a context too long is).
        (["doc 13", "doc 63", "doc 1", "doc 2"], "invalid_request"),
        # OpenAI refuses a request over its limit per minute with a 429 no wait lets through.
        (["doc 1 too large", "doc 2 too large", "doc 4", "doc 5"], "rate_limited"),
    ],
)
def test_a_request_the_provider_refused_gives_its_tokens_back_to_the_limit(
    server: BatchServer, docs: list[str], refused: str
) -> None:
    # Read into no model, their guessed tokens would hold the others up for the rest of the
    # minute.
    run = allama.batch(
        provider_for(server), Described, docs, request=TEMPLATE, concurrency=1, tpm=450
    )
    threading.Timer(20.0, run.stop).start()
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == [refused, refused, "ok", "ok"]
    assert run.summary.waited < 5 and run.summary.elapsed < 15


def test_a_future_is_given_a_stop_iteration_as_an_error_it_can_hold() -> None:
    from allama.batch._threads import settle

    async def handed() -> None:
        done = asyncio.get_running_loop().create_future()
        settle(done, None, StopIteration("end"))
        with pytest.raises(RuntimeError, match="the call raised StopIteration: end"):
            await done

    asyncio.run(handed())


def test_the_summary_says_the_waits_for_a_turn_with_no_rate_limit_met(
    server: BatchServer,
) -> None:
    run = allama.batch(provider_for(server), Row, docs(3), request=TEMPLATE, rpm=60)
    assert all(outcome(r) == "ok" for r in run)  # a second apart: about 2 s waited in all
    (said,) = [line for line in run.summary.lines() if line.startswith("limits: ")]
    assert re.fullmatch(r"limits: \d+\.\d s waited by inputs in all for their turn", said)
    assert run.summary.waited >= 1.0


def test_a_stop_ends_the_waits_for_a_turn(server: BatchServer) -> None:
    # A minute between requests: the second and third wait for their turns when the stop
    # comes, and come back not started at once rather than after their turns.
    run = allama.batch(provider_for(server), Row, docs(3), request=TEMPLATE, rpm=1)
    threading.Timer(0.3, run.stop).start()
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["ok", "not_started", "not_started"]
    assert sum(server.sent.values()) == 1 and run.summary.elapsed < 30


@pytest.mark.parametrize("with_ledger", [False, True])
def test_a_rate_limit_is_an_attempt_with_a_ledger_or_without(
    with_ledger: bool, tmp_path: Path
) -> None:
    limited = BatchServer(rate=1).start()  # one request a second: the second is answered 429
    try:
        ledger = tmp_path / "run.sqlite" if with_ledger else None
        run = allama.batch(
            provider_for(limited), Row, ["doc 1", "doc 2"], request=TEMPLATE, ledger=ledger
        )
        results = sorted(run, key=lambda r: r.index)
    finally:
        limited.stop()
    assert [outcome(r) for r in results] == ["ok", "ok"]
    assert limited.limited >= 1 and run.summary.rate_limited == limited.limited
    assert sorted(r.attempts for r in results) == [1, 1 + limited.limited]
    # The second waited the second the 429 asked for, before it went again: a wait on
    # the limits, which the summary counts.
    assert run.summary.waited >= 0.5


REFUSED = "the provider refused the run's key or account: "


@pytest.mark.parametrize(
    ("refusing", "kind", "stopped"),
    [
        ("key", "authentication", f"{REFUSED}authentication (39 chars withheld) "),
        ("quota", "quota_exceeded", f"{REFUSED}quota_exceeded (32 chars withheld) "),
        ("day", "rate_limited", "the provider asked to wait 86400 s before the next request"),
        (
            "model",
            "not_found",
            "the provider has no such endpoint or model (check the base URL and the model): "
            "not_found (",
        ),
    ],
)
def test_a_refused_key_or_account_stops_the_run_and_its_inputs_stay_pending(
    server: BatchServer, tmp_path: Path, refusing: str, kind: str, stopped: str
) -> None:
    server.refusing = refusing
    ledger = tmp_path / "run.sqlite"
    provider = provider_for(server)
    run = allama.batch(provider, Row, docs(200), request=TEMPLATE, ledger=ledger, concurrency=4)
    results = list(run)
    # Refused inputs were in flight together; none was sent after the first refusal came.
    refused = {r.index for r in results if outcome(r) == kind}
    assert 1 <= len(refused) == server.refused <= 4
    # Inputs read ahead of the stop come back not started; the rest are not read.
    assert sorted(r.index for r in results) == list(range(len(results)))
    assert len(results) <= 4 + 2 * 4 + 1
    assert {outcome(r) for r in results} == {kind, "not_started"}
    summary = run.summary
    assert summary.refused == kind
    # The provider's words are withheld, as in every log view.
    assert summary.stopped is not None and summary.stopped.startswith(stopped)
    assert (summary.failed, summary.not_started) == (len(refused), 200 - len(refused))
    # A 429 that stops the run is counted among the 429s met, though no wait followed.
    assert summary.rate_limited == (len(refused) if refusing == "day" else 0)
    rows = list(Ledger(ledger, settings={}).rows())
    assert {row.position for row in rows} == refused
    assert {(row.status, row.attempts) for row in rows} == {("pending", 1)}
    assert rows[0].error is not None and rows[0].error["kind"] == kind
    # With the key fixed, the same run sends every input, those refused once more.
    server.refusing = None
    again = list(allama.batch(provider, Row, docs(200), request=TEMPLATE, ledger=ledger))
    assert all(outcome(r) == expected(r.index) and not r.resumed for r in again)
    unavailable_once = {n for n in range(200) if n % 10 == 3 and n % 50 != 13}  # a 503 first
    assert sum(server.sent.values()) == 200 + len(unavailable_once)
    attempts = {row.position: row.attempts for row in Ledger(ledger, settings={}).rows()}
    assert attempts == {n: 1 + (n in refused) + (n in unavailable_once) for n in range(200)}


def test_an_input_past_togethers_context_fails_alone_though_its_answer_is_a_403() -> None:
    import httpx2

    from allama.transport import Transport

    # Together answers a context too full with a 403 (its error codes): the input's own
    # failure, not a refusal of the key or the account that stops the run.
    model = "meta-llama/Llama-3.3-70B-Instruct-Turbo"
    full = (
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193. "
        "Given: 8000 `inputs` tokens and 1000 `max_new_tokens`"
    )

    def answer(request: httpx2.Request) -> httpx2.Response:
        if b"doc 1" in request.content:
            error = {"message": full, "type": "invalid_request_error", "param": "max_tokens"}
            return httpx2.Response(403, json={"id": "x", "error": error})
        return httpx2.Response(200, json=_completion(model, json.dumps({"n": 0})))

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    provider = allama.provider("together", api_key="k", transport=transport)
    template = ChatRequest(model).system("Read the number.")
    run = allama.batch(provider, Row, docs(5), request=template, concurrency=1)
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["ok", "context_window", "ok", "ok", "ok"]
    assert results[1].attempts == 1
    summary = run.summary
    assert (summary.done, summary.failed, summary.not_started) == (4, 1, 0)
    assert summary.stopped is None and summary.refused is None


def test_an_input_the_run_stopped_before_trying_again_stays_pending(tmp_path: Path) -> None:
    slow = BatchServer(delay=0.05).start()  # `doc 1` answers at 40 ms, `doc 3` at 80
    try:
        ledger = tmp_path / "run.sqlite"
        run = allama.batch(
            provider_for(slow),
            Row,
            ["doc 1", "doc 3"],
            request=TEMPLATE,
            ledger=ledger,
            max_cost="0.000001",  # reached by the first answer
        )
        results = {r.index: r for r in run}
    finally:
        slow.stop()
    assert outcome(results[0]) == "ok"
    assert outcome(results[1]) == "overloaded"  # a 503, not tried again: the run stopped
    assert results[1].pending and not results[0].pending
    assert (run.summary.failed, run.summary.pending) == (1, 1)
    assert run.summary.lines()[0].startswith("1 done, 1 failed (1 kept pending for the next run)")
    assert run.summary.stopped is not None and run.summary.refused is None
    rows = {row.position: row for row in Ledger(ledger, settings={}).rows()}
    assert (rows[0].status, rows[1].status, rows[1].attempts) == ("done", "pending", 1)
    assert rows[1].error is not None and rows[1].error["kind"] == "overloaded"


def test_a_ledger_that_fails_ends_the_run_with_its_error(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    def malformed(self: Ledger, key: str, **outcome: Any) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(Ledger, "_finish", malformed)
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(provider_for(server), Row, docs(40), request=TEMPLATE, ledger=ledger)
    results = []
    with pytest.raises(allama.LedgerError, match="database disk image is malformed"):
        results.extend(run)
    # No finish was recorded, but each answer is handed over, counted as not kept; the
    # rest are not started, or left pending (a 503 met after the stop).
    ended = [r for r in results if outcome(r) not in ("not_started", "overloaded")]
    assert ended and run.summary.unkept == len(ended)
    assert run.summary.stopped == (
        "the ledger could not be written: DatabaseError: database disk image is malformed"
    )
    assert sum(server.sent.values()) < 40  # it stopped starting inputs
    assert "never retrieved" not in caplog.text


def test_a_provider_that_cannot_be_reached_stops_the_run(tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: every connection is refused
    provider = allama.provider("openai", api_key="sk-test", base_url=f"http://127.0.0.1:{port}/v1")
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        provider,
        Row,
        docs(5),
        request=TEMPLATE,
        ledger=ledger,
        concurrency=1,
        max_attempts=2,
        backoff=0.001,
    )
    results = sorted(run, key=lambda r: r.index)
    # The input that met it as often as it may be tried stops the run; those sent while the
    # first waited to try again (one or two, as the machine's timing has it) meet it too;
    # the rest are not started.
    sent = [r.index for r in results if outcome(r) == "network"]
    assert sent[0] == 0 and len(sent) <= 3
    assert {outcome(r) for r in results[len(sent) :]} == {"not_started"}
    summary = run.summary
    assert summary.refused == "network"
    assert summary.stopped == (
        f"the provider could not be reached in 2 tries: could not connect to 127.0.0.1:{port} "
        "(ConnectError) [provider=openai]"
    )
    rows = list(Ledger(ledger, settings={}).rows())
    assert [row.position for row in rows] == sent
    assert {row.status for row in rows} == {"pending"} and rows[0].attempts == 2


def test_a_bad_input_is_its_own_failure_and_the_run_goes_on(server: BatchServer) -> None:
    results = list(
        allama.batch(provider_for(server), Row, ["doc 1", 42, "doc 2"], request=TEMPLATE)
    )
    by_index = {r.index: r for r in results}
    assert by_index[1].failure is not None and by_index[1].failure.kind == "TypeError"
    assert by_index[0].value == Row(n=1) and by_index[2].value == Row(n=2)


def test_a_request_function_that_returns_no_request_fails_that_input(
    server: BatchServer,
) -> None:
    def build(document: Any) -> Any:
        return TEMPLATE.user(document) if document.startswith("doc") else {"text": document}

    results = sorted(
        allama.batch(provider_for(server), Row, ["doc 1", "oops"], request=build),
        key=lambda r: r.index,
    )
    assert results[0].value == Row(n=1)
    failure = results[1].failure
    assert failure is not None and (failure.kind, failure.message) == (
        "TypeError",
        "the request function returned a dict, not a ChatRequest",
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"concurrency": 0}, "concurrency must be a whole number of at least 1, not 0"),
        ({"concurrency": 1.5}, "concurrency must be a whole number of at least 1, not 1.5"),
        ({"max_attempts": 0}, "max_attempts must be a whole number of at least 1, not 0"),
        ({"max_cost": "abc"}, "max_cost must be a finite amount of dollars more than 0, not 'abc'"),
        (
            {"max_cost": float("nan")},
            "max_cost must be a finite amount of dollars more than 0, not nan",
        ),
        (
            {"max_cost": "Infinity"},
            "max_cost must be a finite amount of dollars more than 0, not 'Infinity'",
        ),
        ({"max_cost": 0}, "max_cost must be a finite amount of dollars more than 0, not 0"),
        ({"rpm": "5"}, "rpm must be a number more than 0 (a rate per minute), not '5'"),
        ({"tpm": 0}, "tpm must be a number more than 0 (a rate per minute), not 0"),
        ({"rpm": float("inf")}, "rpm must be a number more than 0 (a rate per minute), not inf"),
        ({"backoff": -1}, "backoff must be a number of seconds, 0 or more, not -1"),
        ({"total": -3}, "total must be a whole number of inputs, 0 or more, not -3"),
        ({"ledger": ""}, "ledger must be a file's path (or None for no ledger), not ''"),
    ],
)
def test_a_setting_out_of_range_is_refused_before_anything_is_sent(
    setting: dict[str, Any], message: str
) -> None:
    provider = TestProvider()
    with pytest.raises(ValueError) as raised:
        allama.batch(provider, Row, ["doc 1"], request=TEMPLATE, **setting)
    assert str(raised.value) == message
    assert provider.requests == []


def test_a_count_of_attempts_read_from_numpy_is_a_whole_number(tmp_path: Path) -> None:
    # Refused as "not a whole number", though it is one (a count from a config's array).
    np = pytest.importorskip("numpy")
    ledger = tmp_path / "l.sqlite"
    run = allama.batch(
        TestProvider(), Row, ["doc 1"], request=TEMPLATE, max_attempts=np.int64(2), ledger=ledger
    )
    assert [r.failure for r in run] == [None]
    assert run._runner.spec.max_attempts == 2 and type(run._runner.spec.max_attempts) is int


@pytest.mark.parametrize(
    ("inputs", "setting", "error", "message"),
    [
        (
            "Invoice 12: total $40",
            {},
            TypeError,
            "inputs must be an iterable of documents, not one str: pass a list of them "
            "(`[document]` for one)",
        ),
        (
            b"doc 1",
            {},
            TypeError,
            "inputs must be an iterable of documents, not one bytes: pass a list of them "
            "(`[document]` for one)",
        ),
        (
            ["doc 1"],
            {"label": 5},
            TypeError,
            "label must be a function naming an input (or None), not int",
        ),
        (
            ["doc 1"],
            {"ledger": "/nowhere/at/all/run.sqlite"},
            FileNotFoundError,
            "the ledger's folder does not exist: `/nowhere/at/all`",
        ),
    ],
)
def test_inputs_a_label_or_a_ledger_that_cannot_work_are_refused_before_anything_is_sent(
    inputs: Any, setting: dict[str, Any], error: type[Exception], message: str
) -> None:
    provider = TestProvider()
    with pytest.raises(error) as raised:
        allama.batch(provider, Row, inputs, request=TEMPLATE, **setting)
    assert str(raised.value) == message
    assert provider.requests == []


def _wrapped(bare: allama.ChatProvider, how: str) -> allama.ChatProvider:
    """`bare` alone, inside a `RetryingProvider`, or a failover's second provider."""
    return {
        "alone": bare,
        "retrying": allama.wrappers.RetryingProvider(bare),
        "failover": allama.wrappers.FailoverProvider([TestProvider(), bare]),
    }[how]


@pytest.mark.parametrize("wrapped", ["alone", "retrying", "failover"])
def test_a_provider_without_its_base_url_is_refused_before_anything_is_recorded(
    wrapped: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every input would fail with it, and with a ledger that failure would be final."""
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    provider = _wrapped(allama.provider("azure-openai", api_key="k"), wrapped)
    ledger = tmp_path / "run.sqlite"
    with pytest.raises(ValueError) as raised:
        allama.batch(provider, Row, ["doc 1"], request=TEMPLATE, ledger=ledger)
    assert str(raised.value) == (
        "azure-openai has no base URL: pass endpoint= or set AZURE_OPENAI_ENDPOINT"
    )
    assert not ledger.exists()


@pytest.mark.parametrize("wrapped", ["alone", "retrying", "failover"])
def test_a_provider_without_its_key_is_refused_before_anything_is_recorded(
    wrapped: str, server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = _wrapped(allama.provider("openai", base_url=server.url), wrapped)
    ledger = tmp_path / "run.sqlite"
    with pytest.raises(ValueError) as raised:
        allama.batch(provider, Row, ["doc 1"], request=TEMPLATE, ledger=ledger)
    assert str(raised.value) == "openai needs an API key: pass api_key= or set OPENAI_API_KEY"
    assert not ledger.exists() and not server.sent
    # A key of the caller's own header is one.
    own = allama.provider("openai", base_url=server.url, headers={"Authorization": "Bearer k"})
    (result,) = allama.batch(own, Row, ["doc 1"], request=TEMPLATE)
    assert result.value == Row(n=1)


def test_a_label_that_cannot_be_made_is_that_inputs_failure(server: BatchServer) -> None:
    def label(document: str) -> str:
        return {"doc 1": "first", "doc 3": "third"}[document]  # none for doc 2

    results = sorted(
        allama.batch(
            provider_for(server), Row, ["doc 1", "doc 2", "doc 3"], request=TEMPLATE, label=label
        ),
        key=lambda r: r.index,
    )
    assert [(r.label, r.value) for r in results] == [
        ("first", Row(n=1)),
        ("#1", None),
        ("third", Row(n=3)),
    ]
    failure = results[1].failure
    # The caller's own words may quote the document: withheld, kept as a provider's are.
    assert failure is not None and (failure.kind, failure.message) == (
        "KeyError",
        "the label function raised KeyError: message withheld (7 chars)",
    )
    assert failure.provider_message == "'doc 2'"
    assert server.sent[2] == 0


def test_a_duplicate_input_is_sent_once(server: BatchServer, tmp_path: Path) -> None:
    ledger = tmp_path / "run.sqlite"
    inputs = ["doc 5", "doc 6", "doc 5", "doc 5"]
    run = allama.batch(provider_for(server), Row, inputs, request=TEMPLATE, ledger=ledger)
    results = sorted(run, key=lambda r: r.index)
    assert [r.value for r in results] == [Row(n=5), Row(n=6), Row(n=5), Row(n=5)]
    assert server.sent[5] == 1 and server.sent[6] == 1
    assert [(r.duplicate, r.resumed, r.attempts) for r in results] == [
        (False, False, 1),
        (False, False, 1),
        (True, False, 0),
        (True, False, 0),
    ]
    assert results[2].metadata is results[0].metadata  # the first copy's record
    # The summary counts what was paid once: two calls, not four.
    summary = run.summary
    assert (summary.done, summary.duplicates, summary.resumed) == (4, 2, 0)
    assert (summary.passes, summary.attempts, summary.input_tokens) == (2, 2, 200)
    assert summary.by_enforcement == {"exact": 4}
    cost = results[0].metadata.cost
    assert cost is not None and summary.cost == 2 * cost.total
    assert summary.lines()[0].startswith("4 done, 0 failed (2 repeating an earlier input), in ")

    again = allama.batch(provider_for(server), Row, inputs, request=TEMPLATE, ledger=ledger)
    resumed = sorted(again, key=lambda r: r.index)
    assert [(r.duplicate, r.resumed) for r in resumed] == [
        (False, True),
        (False, True),
        (True, True),
        (True, True),
    ]
    assert (again.summary.resumed, again.summary.duplicates, again.summary.passes) == (4, 2, 2)
    assert server.sent[5] == 1 and server.sent[6] == 1


def test_a_document_holding_half_a_character_is_its_inputs_failure_said_plainly() -> None:
    provider = allama.mock.MockProvider(['{"n": 1}'])
    run = allama.batch(provider, Row, ["bad \ud800 text", "doc 1"], request=TEMPLATE)
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["ValueError", "ok"]
    assert results[0].failure == BatchFailure(
        "ValueError",
        "the request holds half of a character (a lone surrogate, as `\\ud800`), which is no "
        "text and no provider reads: not sent",
    )
    assert provider.call_count == 1
    # In the request every input is added to: the run is refused, saying why.
    with pytest.raises(ValueError, match="holds half of a character"):
        allama.batch(provider, Row, ["doc 1"], request=ChatRequest("m").system("bad \udc80"))


class Tags(BaseModel):
    tags: list[str]


@pytest.mark.parametrize("driven", ["sync", "async"])
@pytest.mark.parametrize("ledger", [False, True])
def test_each_copy_of_a_duplicate_input_has_a_value_of_its_own(
    tmp_path: Path, ledger: bool, driven: str
) -> None:
    class Slow(allama.mock.MockProvider):
        def chat(self, request: ChatRequest) -> ChatResponse:
            time.sleep(0.2)
            return super().chat(request)

        async def achat(self, request: ChatRequest) -> ChatResponse:
            await asyncio.sleep(0.2)
            return super().chat(request)

    slow = Slow(['{"tags": []}'])
    options: dict[str, Any] = {
        "request": TEMPLATE,
        "ledger": tmp_path / "run.sqlite" if ledger else None,
    }
    results: list[allama.BatchResult[Tags]] = []

    def seen(result: allama.BatchResult[Tags]) -> None:
        assert result.value is not None  # the caller changes each value as it comes
        result.value.tags.append(f"seen as #{result.index}")
        results.append(result)

    if driven == "sync":
        for result in allama.batch(slow, Tags, ["doc", "doc", "doc"], **options):
            seen(result)
    else:

        async def read() -> None:
            async for result in allama.abatch(slow, Tags, ["doc", "doc", "doc"], **options):
                seen(result)

        asyncio.run(read())
    assert sorted((r.index, r.duplicate, r.value.tags) for r in results if r.value) == [
        (0, False, ["seen as #0"]),
        (1, True, ["seen as #1"]),
        (2, True, ["seen as #2"]),
    ]
    assert slow.call_count == 1


def test_a_copy_carries_the_first_copys_earlier_attempts(server: BatchServer) -> None:
    # A pass that failed validation, then a 503: an attempt paid for, before the one that
    # gave the value.
    run = allama.batch(
        provider_for(server),
        Row,
        ["doc 1, flaky", "doc 1, flaky"],
        request=TEMPLATE,
        extractor=Extractor(retries=1),
        backoff=0.01,
        concurrency=1,
    )
    first, copy = sorted(run, key=lambda r: r.index)
    assert copy.duplicate and len(first.spent) == 1
    assert copy.spent == first.spent and copy.metadata is first.metadata
    assert run.summary.passes == 2  # counted once


def test_a_copy_that_comes_after_the_first_finished_is_read_from_the_ledger(
    server: BatchServer, tmp_path: Path
) -> None:
    inputs = ["doc 5", "doc 6", "doc 8", "doc 5"]  # one at a time: the first `doc 5` is done
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        provider_for(server), Row, inputs, request=TEMPLATE, ledger=ledger, concurrency=1
    )
    results = sorted(run, key=lambda r: r.index)
    assert server.sent[5] == 1
    assert [(r.value, r.duplicate, r.resumed, r.attempts) for r in results] == [
        (Row(n=5), False, False, 1),
        (Row(n=6), False, False, 1),
        (Row(n=8), False, False, 1),
        (Row(n=5), True, False, 0),
    ]
    summary = run.summary
    assert (summary.done, summary.duplicates, summary.resumed, summary.passes) == (4, 1, 0, 3)
    # Without a ledger the run keeps no finished values: a later copy is sent again.
    again = list(allama.batch(provider_for(server), Row, inputs, request=TEMPLATE, concurrency=1))
    assert server.sent[5] == 3 and not any(r.duplicate for r in again)


def test_a_resumed_run_counts_a_copy_of_an_earlier_runs_input_once(
    server: BatchServer, tmp_path: Path
) -> None:
    inputs = ["doc 5", "doc 6", "doc 8", "doc 5", "doc 5"]
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger, "concurrency": 1}
    first = allama.batch(provider_for(server), Row, inputs, **options)
    assert len(list(first)) == 5 and first.summary.passes == 3
    # One at a time, each copy comes after the first was read from the ledger.
    again = allama.batch(provider_for(server), Row, inputs, **options)
    results = sorted(again, key=lambda r: r.index)
    assert [(r.value, r.duplicate, r.resumed) for r in results] == [
        (Row(n=5), False, True),
        (Row(n=6), False, True),
        (Row(n=8), False, True),
        (Row(n=5), True, True),
        (Row(n=5), True, True),
    ]
    summary = again.summary
    assert (summary.resumed, summary.duplicates, summary.passes, summary.attempts) == (5, 2, 3, 3)
    assert summary.cost == 3 * Decimal("0.000021")
    # The job has paid $0.000063: a budget above it lets a new input through.
    third = allama.batch(
        provider_for(server), Row, [*inputs, "doc 9"], max_cost="0.00007", **options
    )
    assert [outcome(r) for r in sorted(third, key=lambda r: r.index)] == ["ok"] * 6
    # Reached by the new input's cost ($0.000084), the last: nothing was held back.
    assert third.summary.stopped is None
    assert server.sent[5] == 1 and server.sent[9] == 1


def _paid_then(error: Exception, answer: str = '{"n": 1}') -> allama.mock.MockProvider:
    """A provider whose first answer is paid for and not JSON, then `error`, then `answer`."""
    paid = (
        allama.mock.ChatResponseBuilder().text("no JSON here").usage(100, 10).model("gpt-4o-mini")
    )
    good = allama.mock.ChatResponseBuilder().text(answer).usage(100, 10).model("gpt-4o-mini")
    return allama.mock.MockProvider([paid.build(), error, good.build()], name="openai")


def test_what_an_input_paid_before_it_was_set_aside_counts_when_it_is_sent_again(
    tmp_path: Path,
) -> None:
    from allama.errors import AuthenticationError

    ledger = tmp_path / "run.sqlite"
    provider = _paid_then(AuthenticationError("Incorrect API key provided."))
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger}
    first = allama.batch(provider, Row, ["doc 1"], extractor=Extractor(retries=1), **options)
    (refused,) = list(first)
    assert refused.pending and outcome(refused) == "authentication"
    (row,) = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost) == ("pending", "0.000021")  # the paid pass is kept
    # The key fixed, the next run sends it again: its record and cost say both passes.
    second = allama.batch(provider, Row, ["doc 1"], extractor=Extractor(retries=1), **options)
    (done,) = list(second)
    assert done.value == Row(n=1) and len(done.spent) == 1 and done.spent[0].passes == 1
    assert (second.summary.passes, second.summary.cost) == (2, Decimal("0.000042"))
    (row,) = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost, len(row.record["earlier_attempts"])) == ("done", "0.000042", 1)
    # And a run again reads it back with both.
    third = allama.batch(provider, Row, ["doc 1"], **options)
    assert next(iter(third)).resumed and third.summary.cost == Decimal("0.000042")


def test_failed_inputs_tried_again_count_what_they_paid_toward_the_budget(
    server: BatchServer, tmp_path: Path
) -> None:
    # `doc 7`, `doc 57`, ... answer no JSON: each attempt pays for a pass and fails.
    inputs = [f"doc {7 + 50 * n}" for n in range(5)]
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {
        "request": TEMPLATE,
        "ledger": ledger,
        "max_cost": "0.0001",
        "concurrency": 1,
    }
    first = allama.batch(provider_for(server), Row, inputs, **options)
    assert [outcome(r) for r in first] == ["extraction_parse"] * 5
    assert first.summary.cost == Decimal("0.000105")
    sent = sum(server.sent.values())
    # Under the same budget, trying the failures again sends nothing: they paid it already.
    again = allama.batch(provider_for(server), Row, inputs, retry_failed=True, **options)
    # Stopped before it sent anything, it gives back what the ledger holds: the failures.
    given = list(again)
    assert [(r.index, outcome(r), r.resumed) for r in given] == [
        (n, "extraction_parse", True) for n in range(5)
    ]
    assert (again.summary.failed, again.summary.not_started) == (5, 0)
    assert (again.summary.cost, sum(server.sent.values())) == (Decimal("0.000105"), sent)
    assert again.summary.stopped == (
        "the budget of $0.0001 is reached ($0.000105, $0.000105 of it paid before this run)"
    )
    # A larger budget sends them again, each counted with what it paid before.
    larger = allama.batch(
        provider_for(server), Row, inputs, retry_failed=True, **{**options, "max_cost": "0.00016"}
    )
    results = list(larger)
    # $0.000105 known at the start, $0.000021 more with each input sent: the third reaches
    # the budget.
    sent_again = [r for r in results if not r.resumed]
    assert [r.index for r in sent_again if outcome(r) == "extraction_parse"] == [0, 1, 2]
    assert all(len(r.spent) == 1 for r in sent_again if outcome(r) == "extraction_parse")
    # Those after the stop: not started, or read on and given as the ledger holds them.
    assert {(outcome(r), r.resumed) for r in results if r.index > 2} <= {
        ("not_started", False),
        ("extraction_parse", True),
    }
    assert len(results) == 5
    assert sum(server.sent.values()) == sent + 3
    # Three inputs sent again, two passes each, and those given from the ledger, one each.
    given = sum(r.resumed for r in results)
    assert larger.summary.cost == Decimal("0.000021") * (6 + given)
    assert larger.summary.stopped == (
        "the budget of $0.00016 is reached ($0.000168, $0.000105 of it paid before this run)"
    )


def _prompt_a(document: str) -> ChatRequest:
    return ChatRequest("gpt-4o-mini").system("Read the number.").user(document)


def _prompt_b(document: str) -> ChatRequest:
    return ChatRequest("gpt-4o-mini").system("Read the number, please.").user(document)


def test_a_budget_over_a_request_function_counts_every_functions_runs_of_its_type(
    server: BatchServer, tmp_path: Path
) -> None:
    # No name or code of a function tells its prompts apart: the budget counts too much
    # rather than too little.
    ledger = tmp_path / "run.sqlite"
    first = allama.batch(provider_for(server), Row, docs(5), request=_prompt_a, ledger=ledger)
    assert [outcome(r) for r in first] == ["ok"] * 5
    assert first.summary.cost == Decimal("0.000105")
    other = allama.batch(
        provider_for(server),
        Row,
        [f"doc {n}" for n in range(5, 10)],
        request=_prompt_b,
        ledger=ledger,
        max_cost="0.0001",
    )
    assert [outcome(r) for r in other] == ["not_started"] * 5
    assert other.summary.stopped == (
        "the budget of $0.0001 is reached ($0.000105, $0.000105 of it paid before this run)"
    )


@pytest.mark.parametrize("kept_types", [True, False])
@pytest.mark.parametrize("first_form", ["function", "template"])
def test_a_budget_counts_what_runs_of_the_requests_other_form_paid_from_its_start(
    server: BatchServer, tmp_path: Path, first_form: str, kept_types: bool
) -> None:
    # The same requests made by a function in one run and a template in the other: the same
    # inputs (keys), of runs whose settings differ. The second run gave the first's values
    # back, counted their cost in its summary, and not in its budget: it sent every new
    # input, to 168 % of the job's budget (counted as they were read, it still sent the new
    # inputs that came before them).
    ledger = tmp_path / "forms.sqlite"

    def made(document: str) -> ChatRequest:
        return TEMPLATE.user(document)

    forms: dict[str, Any] = {"function": made, "template": TEMPLATE}
    second_form = "template" if first_form == "function" else "function"
    first = allama.batch(
        provider_for(server), Row, docs(4), request=forms[first_form], ledger=ledger
    )
    assert [outcome(r) for r in first] == ["ok"] * 4
    if not kept_types:  # the first run's settings as a version before `types` kept them
        with contextlib.closing(sqlite3.connect(ledger)) as db, db:
            for run_id, settings in db.execute("SELECT run_id, settings FROM runs").fetchall():
                kept = {k: v for k, v in json.loads(settings).items() if k != "types"}
                db.execute(
                    "UPDATE runs SET settings = ? WHERE run_id = ?", (json.dumps(kept), run_id)
                )
    each = first.summary.cost / 4
    later = [f"doc {n}" for n in (4, 5, 6, 8)]
    run = allama.batch(
        provider_for(server),
        Row,
        later + docs(4),  # the new inputs first
        request=forms[second_form],
        ledger=ledger,
        max_cost=str(each * 4 + each / 2),
        concurrency=1,  # one at a time: the budget is reached by the first input sent
    )
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results[:4]] == ["ok", "not_started", "not_started", "not_started"]
    assert [r.resumed for r in results[4:]] == [True] * 4
    assert run.summary.cost == each * 5 and run.summary.past_budget is None
    assert run.summary.stopped == (
        f"the budget of ${each * 4 + each / 2} is reached (${each * 5}, ${each * 4} of it paid "
        "before this run)"
    )


def test_type_forms_that_compare_equal_but_write_other_schemas_key_apart() -> None:
    from typing import Literal

    request = TEMPLATE.user("doc 1")
    # Equal as type forms (and hashed alike), their schemas list the members in order.
    first = input_key("openai", Literal["yes", "no"], request)
    second = input_key("openai", Literal["no", "yes"], request)
    assert first != second
    assert input_key("openai", Literal["yes", "no"], request) == first
    assert input_key("openai", list[Literal["no", "yes"]], request) != input_key(
        "openai", list[Literal["yes", "no"]], request
    )


KEY_OF_SET_DEFAULTS = textwrap.dedent(
    """
    from enum import Enum
    from pydantic import BaseModel
    import allama
    from allama.batch import input_key

    class Tag(Enum):
        URGENT = "urgent"
        BILLING = "billing"
        REFUND = "refund"
        LOGIN = "login"

    class Ticket(BaseModel):
        tags: set[Tag] = {Tag.URGENT, Tag.BILLING, Tag.REFUND, Tag.LOGIN}
        words: frozenset[str] = frozenset({"alpha", "beta", "gamma", "delta", "omega"})
        nested: list[set[str]] = [{"x", "y", "z", "w"}]
        by_name: dict[str, set[str]] = {"a": {"p", "q", "r", "s"}}

    request = allama.ChatRequest("gpt-4o-mini").system("Read.").user("doc 1")
    print(input_key("openai", Ticket, request))
    """
)


def test_a_types_key_is_the_same_in_every_process_whatever_its_sets_order(
    tmp_path: Path,
) -> None:
    # A default that is a set lists its members in hash order, which changes with each
    # process's hash seed: the schema, and so the key, would too (every run paid again).
    script = tmp_path / "key.py"
    script.write_text(KEY_OF_SET_DEFAULTS)
    keys = {
        subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3", "4", "5", "6")
    }
    assert len(keys) == 1 and len(next(iter(keys))) == 64


# A run keys each text input without making the request's JSON: the keys are those of
# `input_key` on the request built, so that a ledger resumes whichever way it was made.


@settings(max_examples=300, deadline=None)
@given(system=st.text(), document=st.text(), temperature=st.none() | st.floats(0, 2))
def test_text_inputs_are_keyed_as_input_key_keys_the_request_built(
    system: str, document: str, temperature: float | None
) -> None:
    template = ChatRequest("gpt-4o-mini").system(system)
    if temperature is not None:
        template = template.with_temperature(temperature)
    spec = _spec(
        allama.provider("openai", api_key="sk-test"), Row, [], request=template,
        extractor=None, concurrency=1, rpm=None, tpm=None, ledger=None, max_cost=None,
        max_attempts=1, backoff=0.0, retry_failed=False, label=None, total=None,
    )  # fmt: skip
    try:
        request = template.user(document)
        expected_key = input_key("openai", Row, request)
    except ValueError as error:  # text JSON cannot hold: the same error either way
        with pytest.raises(type(error)):
            spec.key(document, template.user(document))
        return
    assert spec.key(document, request) == expected_key


def test_a_ledger_made_with_a_build_function_resumes_a_run_with_the_template(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    built = allama.batch(
        provider_for(server), Row, docs(30), request=lambda d: TEMPLATE.user(d), ledger=ledger
    )
    assert sum(1 for r in built if r.ok) == 28  # 7 and 13 fail
    sent = sum(server.sent.values())
    again = allama.batch(provider_for(server), Row, docs(30), request=TEMPLATE, ledger=ledger)
    results = list(again)
    assert [r.resumed for r in results] == [True] * 30
    assert sum(server.sent.values()) == sent


def test_leaving_the_loop_stops_the_run_and_leaves_the_rest_pending(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        provider_for(server), Row, docs(200), request=TEMPLATE, ledger=ledger, concurrency=4
    )
    for count, _ in enumerate(run, 1):
        if count == 10:
            break
    reader = Ledger(ledger)
    counts = reader.counts()
    reader.close()
    assert counts.get("in_flight", 0) == 0
    assert 10 <= counts.get("done", 0) + counts.get("failed", 0) < 200


# Killed with SIGKILL in the middle of runs, then resumed: the results are the same, and no
# input reached the server more often than the ledger counted its attempts.

RUNNER = textwrap.dedent(
    """
    import sys
    from pydantic import BaseModel
    import allama

    class Row(BaseModel):
        n: int

    url, ledger, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    provider = allama.provider("openai", api_key="sk-test", base_url=url)
    request = allama.ChatRequest("gpt-4o-mini").system("Read the number.")
    run = allama.batch(
        provider, Row, [f"doc {n}" for n in range(count)], request=request, ledger=ledger,
        concurrency=16, backoff=0.01,
    )
    for result in run:
        pass
    print(run.summary.done, run.summary.failed, run.summary.resumed, run.summary.elsewhere)
    """
)


def _start(script: Path, server: BatchServer, ledger: Path, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, str(script), server.url, str(ledger), str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _ledger_rows(path: Path) -> dict[int, tuple[str, int, str | None]]:
    reader = Ledger(path)
    rows = {row.position: (row.status, row.attempts, row.value) for row in reader.rows()}
    reader.close()
    return rows


def test_killed_runs_resume_without_paying_twice(tmp_path: Path) -> None:
    server = BatchServer(delay=0.03).start()
    try:
        script = tmp_path / "runner.py"
        script.write_text(RUNNER)
        ledger = tmp_path / "killed.sqlite"
        count = 300
        caught_in_flight = 0

        # Each run is killed once the server has seen so many more requests: the kills land
        # mid-run on a fast machine and a slow one alike (a fixed sleep did not).
        def sent() -> int:
            with server.lock:
                return sum(server.sent.values())

        for sends in (30, 1, 55, 20):
            kill_after(lambda: _start(script, server, ledger, count), sent, sends)
            if ledger.exists():
                statuses = [status for status, _, _ in _ledger_rows(ledger).values()]
                caught_in_flight += statuses.count("in_flight")
        assert caught_in_flight > 0  # the kills came in the middle of runs
        final = _start(script, server, ledger, count)
        out, err = final.communicate(timeout=120)
        assert final.returncode == 0, err
        done, failed, resumed, elsewhere = map(int, out.split())
        assert (done, failed, elsewhere) == (288, 12, 0)
        assert resumed > 0
        rows = _ledger_rows(ledger)
        assert sorted(rows) == list(range(count))
        for n, (status, attempts, value) in rows.items():
            assert status == ("done" if expected(n) == "ok" else "failed"), n
            if expected(n) == "ok":
                assert value is not None and json.loads(value) == {"n": n}
            assert server.sent[n] <= attempts, (n, server.sent[n], attempts)
    finally:
        server.stop()


RETRYING_RUNNER = RUNNER.replace("concurrency=16,", "concurrency=2, retry_failed=True,").replace(
    '[f"doc {n}" for n in range(count)]', '[f"doc {50 * n + 7}" for n in range(count)]'
)


def test_failures_a_killed_run_was_trying_again_are_not_sent_by_a_run_that_does_not(
    tmp_path: Path,
) -> None:
    # A run trying failures again (`retry_failed`) is killed while it holds some, sent or
    # claimed ahead of a slot. A run without `retry_failed` gives them as the failures they
    # were (their errors kept) and sends nothing; one with it sends them.
    server = BatchServer(delay=0.03).start()
    try:
        ledger = tmp_path / "retried.sqlite"
        inputs = [f"doc {50 * n + 7}" for n in range(12)]  # each answered with no JSON
        options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger}
        provider = provider_for(server)
        assert all(outcome(r) == "extraction_parse" for r in allama.batch(
            provider, Row, inputs, **options
        ))  # fmt: skip
        script = tmp_path / "retrying.py"
        script.write_text(RETRYING_RUNNER)

        def sent() -> int:
            with server.lock:
                return sum(server.sent.values())

        kill_after(lambda: _start(script, server, ledger, len(inputs)), sent, 3)
        held = [row for row in Ledger(ledger, read_only=True).rows() if row.status == "in_flight"]
        assert held  # the kill came while the run held failures
        before = -1
        while before != sent():  # a request the killed run sent may still be arriving
            before = sent()
            time.sleep(0.2)
        plain = list(allama.batch(provider, Row, inputs, **options))
        assert sent() == before
        assert all(r.resumed and outcome(r) == "extraction_parse" for r in plain)
        rows = {row.key: row for row in Ledger(ledger, read_only=True).rows()}
        assert {row.status for row in rows.values()} == {"failed"}
        for row in held:
            assert rows[row.key].attempts == row.attempts  # an upper bound of its sends
            assert rows[row.key].error is not None
        again = list(allama.batch(provider, Row, inputs, retry_failed=True, **options))
        assert all(not r.resumed and outcome(r) == "extraction_parse" for r in again)
        assert sent() == before + len(inputs)
        attempts = {row.position: row.attempts for row in Ledger(ledger, read_only=True).rows()}
        for n in range(len(inputs)):
            assert server.sent[50 * n + 7] <= attempts[n]
    finally:
        server.stop()


def test_two_runs_on_one_ledger_at_once_stay_consistent(tmp_path: Path) -> None:
    server = BatchServer(delay=0.01).start()
    try:
        script = tmp_path / "runner.py"
        script.write_text(RUNNER)
        ledger = tmp_path / "shared.sqlite"
        count = 120
        first = _start(script, server, ledger, count)
        second = _start(script, server, ledger, count)
        outs = [process.communicate(timeout=120) for process in (first, second)]
        assert [p.returncode for p in (first, second)] == [0, 0], outs
        rows = _ledger_rows(ledger)
        assert sorted(rows) == list(range(count))
        for n, (status, attempts, _) in rows.items():
            assert status == ("done" if expected(n) == "ok" else "failed")
            assert server.sent[n] <= attempts
        # Each input was sent by one run only (503s once more, by the same run).
        overloaded = [n for n in range(count) if n % 10 == 3 and expected(n) == "ok"]
        assert sum(server.sent.values()) == count + len(overloaded)
    finally:
        server.stop()


def test_runs_opening_one_new_ledger_at_once_all_open_it(tmp_path: Path) -> None:
    # Each opener makes the tables and adds the newer columns; at once, they take turns
    # (they used to add the same column twice, and the second run failed to start).
    import threading

    for trial in range(10):
        path = tmp_path / f"new-{trial}.sqlite"
        start = threading.Barrier(4)
        errors: list[BaseException] = []

        def open_it(
            path: Path = path,
            start: threading.Barrier = start,
            errors: list[BaseException] = errors,
        ) -> None:
            start.wait()
            try:
                Ledger(path, settings={"run": "x"}).close()
            except BaseException as error:
                errors.append(error)

        openers = [threading.Thread(target=open_it) for _ in range(4)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
        assert errors == []
        assert len(Ledger(path, read_only=True).runs()) == 4


def test_extractor_settings_apply_to_every_input(server: BatchServer) -> None:
    results = list(
        allama.batch(
            provider_for(server),
            Row,
            ["doc 7"],
            request=TEMPLATE,
            extractor=Extractor(retries=1),
        )
    )
    (result,) = results
    assert result.failure is not None and result.failure.kind == "extraction_parse"
    assert result.metadata is not None and result.metadata.passes == 2


def test_the_budget_stops_new_inputs_and_says_so(server: BatchServer) -> None:
    # gpt-4o-mini: 100 input and 10 output tokens a call cost $0.000021.
    run = allama.batch(
        provider_for(server), Row, docs(100), request=TEMPLATE, concurrency=4, max_cost="0.0002"
    )
    results = list(run)
    summary = run.summary
    # Read no further than the stop, and at most as many ahead as twice the concurrency.
    indices = sorted(r.index for r in results)
    assert indices == list(range(len(indices))) and len(indices) < 50
    assert summary.stopped is not None and summary.stopped.startswith(
        "the budget of $0.0002 is reached"
    )
    assert summary.done + summary.failed + summary.not_started == 100
    assert summary.not_started > 50
    per_call = Decimal("0.000021")
    assert Decimal("0.0002") <= summary.cost <= Decimal("0.0002") + 4 * per_call
    assert summary.cost == per_call * summary.passes
    assert all(
        r.failure.message.startswith("not started: the budget")
        for r in results
        if r.failure is not None and r.failure.kind == "not_started"
    )


def test_a_budget_counts_what_unfinished_inputs_of_its_own_settings_paid(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "shared.sqlite"
    failing = [f"doc {50 * k + 7}" for k in range(10)]  # each pays for a pass and fails
    first = allama.batch(provider_for(server), Row, failing, request=TEMPLATE, ledger=ledger)
    assert len(list(first)) == 10
    assert first.summary.cost == Decimal("0.00021") and first.summary.failed == 10
    # A run of another prompt on the same ledger never reads those inputs: what they paid
    # is not its budget's.
    other = ChatRequest("gpt-4o-mini").system("Read the number, please.")
    run = allama.batch(
        provider_for(server), Row, docs(4), request=other, ledger=ledger, max_cost="0.0001"
    )
    assert sorted(outcome(r) for r in run) == ["ok"] * 4 and run.summary.stopped is None
    # The same prompt's run counts them, and sends nothing.
    same = allama.batch(
        provider_for(server), Row, docs(4), request=TEMPLATE, ledger=ledger, max_cost="0.0001"
    )
    assert [outcome(r) for r in same] == ["not_started"] * 4
    assert same.summary.stopped == (
        "the budget of $0.0001 is reached ($0.000210, $0.000210 of it paid before this run)"
    )


def test_a_budget_reached_while_failures_are_claimed_again_gives_them_as_they_were(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger, "concurrency": 8}
    first = allama.batch(provider_for(server), Row, docs(60), **options)
    assert sorted(outcome(r) for r in first if r.failure) == [
        "extraction_parse",
        "extraction_parse",
        "invalid_request",
    ]
    sent = sum(server.sent.values())
    # $0.000042 of failures known at the start; the first value given reaches the budget,
    # while the failures read ahead of it are claimed again (retry_failed) and given back.
    again = allama.batch(
        provider_for(server), Row, docs(60), retry_failed=True, max_cost="0.000063", **options
    )
    results = list(again)
    assert sum(server.sent.values()) == sent and len(results) == 60
    assert all(r.resumed for r in results)
    assert (again.summary.done, again.summary.failed, again.summary.not_started) == (57, 3, 0)
    # The failures it would have sent again were held back: the stop is said.
    assert again.summary.stopped is not None
    assert Ledger(ledger, read_only=True).counts() == {"done": 57, "failed": 3}


def test_a_budget_reached_with_nothing_left_to_send_stops_nothing(
    server: BatchServer, tmp_path: Path
) -> None:
    # $0.000021 a call: the third call of three reaches $0.00006, and no input is left.
    run = allama.batch(
        provider_for(server), Row, docs(3), request=TEMPLATE, concurrency=1, max_cost="0.00006"
    )
    assert [outcome(r) for r in run] == ["ok"] * 3
    assert (run.summary.stopped, run.summary.cost) == (None, Decimal("0.000063"))
    # Passed, it is still said: the budget is spent.
    assert run.summary.budget_reached == "the budget of $0.00006 is reached ($0.000063)"
    assert run.summary.lines()[-1] == (
        "the budget of $0.00006 is reached ($0.000063), with nothing left to send"
    )
    # With a fourth input, the budget holds it back and says so.
    held = allama.batch(
        provider_for(server), Row, docs(4), request=TEMPLATE, concurrency=1, max_cost="0.00006"
    )
    assert [outcome(r) for r in held] == ["ok"] * 3 + ["not_started"]
    assert held.summary.stopped == "the budget of $0.00006 is reached ($0.000063)"
    # A run again of a finished job under its spent budget gives every value, sends
    # nothing, and holds nothing back: no stop, in its summary or in the ledger.
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger, "max_cost": "0.00006"}
    assert [outcome(r) for r in allama.batch(provider_for(server), Row, docs(3), **options)] == [
        "ok"
    ] * 3
    sent = sum(server.sent.values())
    again = allama.batch(provider_for(server), Row, docs(3)[::-1], **options)
    assert [(outcome(r), r.resumed) for r in again] == [("ok", True)] * 3
    assert sum(server.sent.values()) == sent
    assert (again.summary.stopped, again.summary.not_started) == (None, 0)
    runs = Ledger(ledger, read_only=True).runs()
    assert [entry["stopped"] for entry in runs] == [None, None]


def test_a_run_of_a_ledger_version_that_kept_fewer_settings_counts_toward_the_budget(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    old = Ledger(path, settings={"provider": "openai", "model": "gpt-4o-mini"})  # no `inputs`
    old.claim("k1", 0, "#0")
    old.finish("k1", status="failed", seconds=0.1, error={"kind": "x"}, cost="0.5")
    other = Ledger(path, settings={"provider": "openai", "model": "gpt-4o", "inputs": "b"})
    other.claim("k2", 1, "#1")
    other.finish("k2", status="failed", seconds=0.1, error={"kind": "x"}, cost="0.25")
    like = {"provider": "openai", "model": "gpt-4o-mini", "inputs": "a"}
    assert Ledger(path, read_only=True).paid(like) == (Decimal("0.5"), {"k1": "0.5"})


def test_failures_claimed_again_and_not_sent_stay_failed(
    server: BatchServer, tmp_path: Path
) -> None:
    inputs = [f"doc {50 * k + 7}" for k in range(20)]  # each answered with no JSON
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger}
    assert all(outcome(r) == "extraction_parse" for r in allama.batch(
        provider_for(server), Row, inputs, **options
    ))  # fmt: skip
    sent = sum(server.sent.values())
    # Failures tried again, stopped at the first result: those claimed ahead of a slot are
    # given back failed, as they were (pending, a run without retry_failed sends them).
    again = allama.batch(
        provider_for(server), Row, inputs, retry_failed=True, concurrency=2, **options
    )
    for _ in again:
        again.stop()
    tried = sum(server.sent.values()) - sent
    assert 0 < tried < 20
    assert Ledger(ledger, read_only=True).counts() == {"failed": 20}
    assert sum(row.attempts for row in Ledger(ledger, read_only=True).rows()) == 20 + tried
    plain = allama.batch(provider_for(server), Row, inputs, **options)
    assert all(r.resumed and outcome(r) == "extraction_parse" for r in plain)
    assert sum(server.sent.values()) == sent + tried


def test_an_input_never_sent_is_neither_priced_nor_timed_in_the_summary() -> None:
    run = allama.batch(allama.mock.TestProvider(), Row, ["doc a", 42, "doc b"], request=TEMPLATE)
    assert sorted(outcome(r) for r in run) == ["TypeError", "ok", "ok"]
    lines = run.summary.lines()
    assert lines[4] == f"cost unknown (genai-prices {PRICES} has no prices for the provider 'test')"
    assert lines[5].startswith("slowest: ") and "#1" not in lines[5]
    assert len(lines) == 6  # no "most expensive" line: nothing was priced


def test_a_ledger_that_names_another_file_is_refused_before_it_is_changed(
    tmp_path: Path,
) -> None:
    import sqlite3

    from allama.batch import LedgerError

    assert allama.LedgerError is LedgerError  # `allama.batch` is the function: said here too
    app = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(app)) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, sku TEXT)")
        db.commit()
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    provider = allama.mock.TestProvider()
    for path, why in (
        (app, "an SQLite file without its tables"),
        (notes, "file is not a database"),
    ):
        with pytest.raises(LedgerError) as refused:
            allama.batch(provider, Row, ["doc"], request=TEMPLATE, ledger=path)
        assert str(refused.value) == f"`{path}` is not a ledger: {why}"
        with pytest.raises(LedgerError):
            Ledger(path)
    with pytest.raises(LedgerError, match="is a folder: name the ledger's file"):
        allama.batch(provider, Row, ["doc"], request=TEMPLATE, ledger=tmp_path)
    # Left as they were: the journal mode too (a ledger's is WAL).
    with contextlib.closing(sqlite3.connect(app)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert [name for (name,) in db.execute("SELECT name FROM sqlite_master")] == ["items"]
    assert notes.read_text() == "my notes"
    # Names SQLite reads otherwise than as files (a URI, memory) are files of those names:
    # `file:app.db` is not `app.db`, and a ledger in memory would resume nothing.
    with contextlib.chdir(tmp_path):
        for name in ("file:app.db", ":memory:", "file:x?mode=memory"):
            results = allama.batch(provider, Row, ["doc"], request=TEMPLATE, ledger=name)
            assert [outcome(r) for r in results] == ["ok"]
            assert (tmp_path / name).is_file()
            (again,) = allama.batch(provider, Row, ["doc"], request=TEMPLATE, ledger=name)
            assert again.resumed
    with contextlib.closing(sqlite3.connect(app)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert [name for (name,) in db.execute("SELECT name FROM sqlite_master")] == ["items"]
    # An empty file (a temporary file made for it) becomes the ledger.
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert [
        outcome(r) for r in allama.batch(provider, Row, ["doc"], request=TEMPLATE, ledger=empty)
    ] == ["ok"]


def test_a_label_that_is_no_text_is_kept_escaped(tmp_path: Path) -> None:
    run = allama.batch(
        allama.mock.TestProvider(),
        Row,
        ["doc 1", "doc 2"],
        request=TEMPLATE,
        ledger=tmp_path / "run.sqlite",
        label=lambda document: document.replace("doc", "half \ud800"),
    )
    assert sorted(r.label for r in run if r.failure is None) == ["half \\ud800 1", "half \\ud800 2"]
    labels = {row.label for row in Ledger(tmp_path / "run.sqlite", read_only=True).rows()}
    assert labels == {"half \\ud800 1", "half \\ud800 2"}


def _no_eights(n: int) -> int:
    if n == 8:
        raise KeyError("a lookup of the type's own")  # not a ValueError: pydantic passes it
    return n


class Lookup(BaseModel):
    n: Annotated[int, AfterValidator(_no_eights)]


def test_a_value_the_types_own_code_fails_keeps_the_record_of_what_it_paid(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(provider_for(server), Lookup, ["doc 8"], request=TEMPLATE, ledger=ledger)
    (result,) = list(run)
    assert outcome(result) == "KeyError" and result.metadata is not None
    assert result.metadata.passes == 1 and run.summary.cost == Decimal("0.000021")
    (row,) = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost, row.record["passes"]) == ("failed", "0.000021", 1)


class SlowSync(allama.mock.TestProvider):
    def chat(self, request: ChatRequest) -> allama.ChatResponse:
        time.sleep(0.01)
        return super().chat(request)


def test_inputs_read_ahead_of_a_stop_come_back_not_started() -> None:
    taken: list[int] = []

    def documents() -> Iterator[str]:  # as a queue's consumer reads: each taken is owed
        for n in range(1000):
            taken.append(n)
            yield f"doc {n}"

    run = allama.batch(SlowSync(), Row, documents(), request=TEMPLATE, concurrency=4)
    results = []
    for result in run:
        results.append(result)
        run.stop()
    given = sorted(r.index for r in results)
    # Every input taken from the iterable is accounted for (but one the reading thread may
    # have been taking as the run ended), the last of them not started.
    assert given == list(range(len(given))) and len(taken) - 1 <= len(given) <= len(taken)
    assert len(given) < 1000 and outcome(max(results, key=lambda r: r.index)) == "not_started"
    assert run.summary.not_started == sum(outcome(r) == "not_started" for r in results)


def test_inputs_read_ahead_of_a_close_are_counted_not_started_in_a_sync_run_as_in_async() -> None:
    counts: dict[str, bool] = {}
    for driver in ("sync", "async"):
        taken: list[int] = []

        def documents(taken: list[int] = taken) -> Iterator[str]:
            for n in range(1000):
                taken.append(n)
                yield f"doc {n}"

        if driver == "sync":
            run = allama.batch(SlowSync(), Row, documents(), request=TEMPLATE, concurrency=4)
            for _ in run:
                time.sleep(0.05)  # the reading thread fills its read-ahead meanwhile
                run.close()
            summary = run.summary
        else:

            async def main(documents: Any = documents) -> BatchSummary:
                async def given() -> AsyncIterator[str]:
                    for document in documents():
                        await asyncio.sleep(0)
                        yield document

                arun = allama.abatch(SlowSync(), Row, given(), request=TEMPLATE, concurrency=4)
                async for _ in arun:
                    await asyncio.sleep(0.05)
                    await arun.aclose()
                return arun.summary

            summary = asyncio.run(main())
        counted = summary.done + summary.failed + summary.not_started + summary.abandoned
        # Every input taken from the caller's iterable is counted (but one the reading
        # thread may have been taking as the run ended).
        assert len(taken) - 1 <= counted <= len(taken) < 1000, driver
        counts[driver] = summary.not_started > 0
    # The thread reads ahead of the run; the async iterable is read as the run needs it.
    assert counts == {"sync": True, "async": False}


class Jittery(allama.mock.TestProvider):
    def chat(self, request: ChatRequest) -> allama.ChatResponse:
        time.sleep(random.random() * 0.01)
        return super().chat(request)


@pytest.mark.parametrize("seed", range(3))
def test_every_input_a_sync_run_took_is_counted_whenever_it_is_closed(seed: int) -> None:
    chosen = random.Random(seed)
    for _ in range(20):
        taken: list[int] = []

        def documents(taken: list[int] = taken) -> Iterator[str]:
            for n in range(1000):
                time.sleep(chosen.choice([0, 0, 0, 0.001]))
                taken.append(n)
                yield f"doc {n}"

        run = allama.batch(Jittery(), Row, documents(), request=TEMPLATE, concurrency=16)
        close_at = chosen.randint(1, 30)
        for count, _ in enumerate(run, 1):
            if count >= close_at:
                time.sleep(chosen.random() * 0.02)
                run.close()
        s = run.summary
        counted = s.done + s.failed + s.not_started + s.abandoned
        # Each input taken is counted once (but one the reading thread was taking as the
        # run ended): one handed over as the run gave up its wait for it is not lost.
        assert len(taken) - 1 <= counted <= len(taken)


TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="<unset>")


class Tenanted(allama.mock.TestProvider):
    """Notes the context variable each call sees, sync or async."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def chat(self, request: ChatRequest) -> allama.ChatResponse:
        self.seen.append(TENANT.get())
        return super().chat(request)

    async def achat(self, request: ChatRequest) -> allama.ChatResponse:
        self.seen.append(TENANT.get())
        return await super().achat(request)


@pytest.mark.parametrize("given", ["list", "generator"])
def test_the_callers_context_variables_reach_every_function_of_a_sync_run_as_of_an_async(
    given: str,
) -> None:
    seen: dict[str, set[str]] = {}

    def note(where: str) -> None:
        seen.setdefault(where, set()).add(TENANT.get())

    def documents() -> Iterator[str]:
        for n in range(4):
            note("inputs")
            yield f"doc {n}"

    def request(document: str) -> ChatRequest:
        note("request")
        return TEMPLATE.user(document)

    def label(document: str) -> str:
        note("label")
        return document

    def inputs() -> Any:
        return documents() if given == "generator" else list(documents())

    for driver in ("sync", "async"):
        seen.clear()
        provider = Tenanted()
        TENANT.set(driver)
        if driver == "sync":
            results = list(
                allama.batch(provider, Row, inputs(), request=request, label=label, concurrency=2)
            )
        else:

            async def main(provider: Tenanted = provider) -> list[allama.BatchResult[Row]]:
                run = allama.abatch(provider, Row, inputs(), request=request, label=label)
                return [result async for result in run]

            results = asyncio.run(main())
        assert [r.ok for r in results] == [True] * 4
        seen["provider"] = set(provider.seen)
        assert seen == {where: {driver} for where in ("inputs", "request", "label", "provider")}


class Slow(allama.mock.TestProvider):
    async def achat(self, request: ChatRequest) -> allama.ChatResponse:
        await asyncio.sleep(0.01)
        return self.chat(request)


def test_closing_an_async_run_from_another_task_ends_its_reader_loop() -> None:
    async def main() -> tuple[int, int]:
        run = allama.abatch(Slow(), Row, docs(1000), request=TEMPLATE, concurrency=2)
        read: list[allama.BatchResult[Row]] = []

        async def reader() -> int:
            async for result in run:
                read.append(result)
            return len(read)

        task = asyncio.create_task(reader())
        while len(read) < 3:
            await asyncio.sleep(0.005)
        await run.aclose()  # a supervisor ends the run: no CancelledError for the reader
        return await task, task.cancelling()

    count, cancelling = asyncio.run(main())
    assert 3 <= count < 1000 and cancelling == 0


class CancelsDocTwo(allama.mock.TestProvider):
    """Raises a `CancelledError` of its own (a cancel scope in a transport) for `doc 2`."""

    def chat(self, request: ChatRequest) -> allama.ChatResponse:
        if request.messages[-1].text() == "doc 2":
            raise asyncio.CancelledError("a cancel scope of the transport's")
        return super().chat(request)

    async def achat(self, request: ChatRequest) -> allama.ChatResponse:
        return self.chat(request)


def test_a_call_that_raises_a_cancelled_error_of_its_own_is_that_inputs_failure(
    tmp_path: Path,
) -> None:
    inputs = [f"doc {n}" for n in range(5)]
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(CancelsDocTwo(), Row, inputs, request=TEMPLATE, ledger=ledger)
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["ok", "ok", "CallCancelled", "ok", "ok"]
    assert results[2].failure is not None and results[2].failure.message == (
        "the call raised CancelledError, though the run was not cancelled"
    )
    assert (run.summary.done, run.summary.failed) == (4, 1)
    assert Ledger(ledger, read_only=True).counts() == {"done": 4, "failed": 1}

    async def gathered() -> list[allama.BatchResult[Row]]:
        return [r async for r in allama.abatch(CancelsDocTwo(), Row, inputs, request=TEMPLATE)]

    assert sorted(outcome(r) for r in asyncio.run(gathered())) == ["CallCancelled"] + ["ok"] * 4


def test_a_provider_serves_one_event_loop_after_another(server: BatchServer) -> None:
    provider = provider_for(server)  # one provider, as a program keeps it

    async def run(documents: list[str]) -> list[str]:
        results = [r async for r in allama.abatch(provider, Row, documents, request=TEMPLATE)]
        return sorted(outcome(r) for r in results)

    # Each `asyncio.run` is a new loop, which closes when it ends; the connections the
    # first opened are that loop's.
    assert asyncio.run(run(docs(4))) == ["ok"] * 4
    assert asyncio.run(run([f"doc {n}" for n in range(4, 8)])) == ["extraction_parse"] + ["ok"] * 3


def test_a_run_under_a_spent_budget_gives_every_value_the_ledger_holds(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger, "concurrency": 2}
    finished = [f"doc {n}" for n in (1, 2, 4, 5, 6, 8, 9, 10)]
    first = allama.batch(provider_for(server), Row, finished, **options)
    assert all(r.failure is None for r in first)
    sent = sum(server.sent.values())
    # Run again with new documents among them, under a budget the earlier run spent (the
    # budget is the job's): it reads on and sends nothing, and gives each value it holds.
    inputs = [f"doc {n}" for n in (1, 2, 11, 4, 5, 12, 6, 8, 9, 14, 10, 5)]
    again = allama.batch(provider_for(server), Row, inputs, max_cost="0.00001", **options)
    results = sorted(again, key=lambda r: r.index)
    assert sum(server.sent.values()) == sent
    assert [(r.index, outcome(r), r.value) for r in results] == [
        (0, "ok", Row(n=1)),
        (1, "ok", Row(n=2)),
        (2, "not_started", None),
        (3, "ok", Row(n=4)),
        (4, "ok", Row(n=5)),
        (5, "not_started", None),
        (6, "ok", Row(n=6)),
        (7, "ok", Row(n=8)),
        (8, "ok", Row(n=9)),
        (9, "not_started", None),
        (10, "ok", Row(n=10)),
        (11, "ok", Row(n=5)),
    ]
    assert all(r.resumed for r in results if r.failure is None)
    summary = again.summary
    assert (summary.done, summary.resumed, summary.duplicates, summary.not_started) == (
        9,
        9,
        1,
        3,
    )
    # The values given were paid for by the earlier run: counted once each.
    assert (summary.passes, summary.cost) == (8, Decimal("0.000021") * 8)
    assert summary.stopped == (
        "the budget of $0.00001 is reached ($0.000168, $0.000168 of it paid before this run)"
    )

    # The async run reads on too, and an iterator (which may never end) is not read on.
    async def gathered() -> list[allama.BatchResult[Row]]:
        run = allama.abatch(provider_for(server), Row, inputs, max_cost="0.00001", **options)
        return [r async for r in run]

    assert sorted(r.index for r in asyncio.run(gathered())) == list(range(12))
    unsized = allama.batch(provider_for(server), Row, iter(inputs), max_cost="0.00001", **options)
    assert len(list(unsized)) < 12
    assert sum(server.sent.values()) == sent


def test_a_spent_budget_sends_nothing_again_in_whatever_order_the_inputs_come(
    server: BatchServer, tmp_path: Path
) -> None:
    options: dict[str, Any] = {
        "request": TEMPLATE,
        "ledger": tmp_path / "run.sqlite",
        "max_cost": "0.00005",
        "concurrency": 1,
    }
    inputs = [f"doc {n}" for n in (1, 2, 4, 5, 6, 8, 9, 10, 11, 12)]
    first = allama.batch(provider_for(server), Row, inputs, **options)
    list(first)
    assert first.summary.cost == Decimal("0.000063")  # three calls reached it
    sent = sum(server.sent.values())
    # What the job paid counts from the start, not as each value is read back: inputs not
    # yet finished that come first are not sent.
    for order in (inputs[::-1], inputs[5:] + inputs[:5]):
        again = allama.batch(provider_for(server), Row, order, **options)
        results = list(again)
        assert sum(server.sent.values()) == sent
        assert sorted(outcome(r) for r in results) == ["not_started"] * 7 + ["ok"] * 3
        assert again.summary.stopped == (
            "the budget of $0.00005 is reached ($0.000063, $0.000063 of it paid before this run)"
        )


def test_a_run_closed_while_an_input_waits_to_retry_keeps_what_it_paid(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {
        "request": TEMPLATE,
        "ledger": ledger,
        "extractor": Extractor(retries=1),
    }
    # A paid pass (no JSON), then a 503 on the retry: the input waits 3 s to be sent again.
    run = allama.batch(provider_for(server), Row, ["doc 1, flaky"], backoff=3.0, **options)
    threading.Timer(1.0, run.close).start()
    assert list(run) == []
    [row] = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost) == ("pending", "0.000021")
    # The closed run's summary counts what it paid, as the ledger does (it said $0: the
    # input has no result).
    summary = run.summary
    assert (summary.abandoned, summary.passes, summary.cost) == (1, 1, Decimal("0.000021"))
    assert "cost $0.000021" in summary.lines()
    again = allama.batch(provider_for(server), Row, ["doc 1, flaky"], backoff=0.01, **options)
    [result] = list(again)
    assert result.value == Row(n=1) and server.sent[1] == 3
    # Both passes the provider answered, in whichever run.
    assert (again.summary.passes, again.summary.cost) == (2, Decimal("0.000042"))


def test_no_call_is_made_after_a_budgets_stop(server: BatchServer, tmp_path: Path) -> None:
    # Half the documents answer 503 the first time: their tries again are counted in the
    # same commits as other inputs' outcomes, one of which reaches the budget.
    for trial in range(3):
        first = 100_000 + trial * 1_000
        inputs = [f"doc {n}" for n in range(first, first + 400) if n % 10 in (1, 3)]
        run = allama.batch(
            provider_for(server),
            Row,
            inputs,
            request=TEMPLATE,
            ledger=tmp_path / f"run-{trial}.sqlite",
            concurrency=32,
            backoff=0,
            max_cost="0.0005",
        )
        runner: Any = run._runner
        late: list[str] = []
        call = runner.call

        async def watched(
            request: ChatRequest, call: Any = call, runner: Any = runner, late: Any = late
        ) -> Any:
            if runner.stopping is not None:
                late.append(request.messages[-1].text() or "")
            return await call(request)

        runner.call = watched
        results = list(run)
        assert late == [] and len(results) == len(inputs)
        assert run.summary.stopped is not None


def test_a_callers_stop_before_the_run_starts_holds_whatever_the_budget(
    unpriced: BatchServer, tmp_path: Path
) -> None:
    provider = provider_for(unpriced)
    options: dict[str, Any] = {"request": UNPRICED, "ledger": tmp_path / "run.sqlite"}
    assert len(list(allama.batch(provider, Row, docs(3), **options))) == 3  # no price
    # The budget cannot be kept (what was paid has no price): it would read on and give
    # what the ledger holds, but the caller stopped the run first.
    run = allama.batch(provider, Row, docs(50), max_cost=1, **options)
    run.stop("not today")
    assert list(run) == [] and run.summary.stopped == "not today"


def test_a_budget_with_an_unknown_price_stops_at_the_first_cost_it_cannot_count(
    unpriced: BatchServer,
) -> None:
    run = allama.batch(
        provider_for(unpriced), Row, docs(20), request=UNPRICED, concurrency=1, max_cost=1
    )
    results = list(run)
    # After the stop no input is read: those read ahead of it come back not started, and
    # the summary counts the rest, unread, as not started too.
    assert 1 < len(results) <= 1 + 2 * 1 + 1
    assert [outcome(r) for r in results] == ["ok"] + ["not_started"] * (len(results) - 1)
    assert run.summary.done == 1 and run.summary.not_started == 19
    assert run.summary.stopped == (
        f"the cost of #0 is unknown (genai-prices {PRICES} has no price for "
        "'a-model-of-our-own' at openai): the budget of $1 cannot be kept"
    )


def test_a_budget_whose_earlier_costs_are_unknown_sends_nothing_when_run_again(
    unpriced: BatchServer, tmp_path: Path
) -> None:
    provider = provider_for(unpriced)
    options: dict[str, Any] = {
        "request": UNPRICED,
        "concurrency": 1,
        "max_cost": 1,
        "ledger": tmp_path / "run.sqlite",
    }
    first = allama.batch(provider, Row, docs(20), **options)
    done = [r.index for r in first if r.failure is None]
    sent = sum(unpriced.sent.values())
    assert done and sent < 20
    # Run again: what the earlier run paid cannot be counted, so nothing is sent; what it
    # finished is given back.
    again = allama.batch(provider, Row, docs(20), **options)
    assert sorted(r.index for r in again if r.failure is None) == sorted(done)
    assert sum(unpriced.sent.values()) == sent
    assert again.summary.stopped == (
        f"the cost of inputs earlier runs sent is unknown (genai-prices {PRICES} has no price "
        "for 'a-model-of-our-own' at openai): the budget of $1 cannot be kept"
    )


def test_costs_are_summed_in_the_summary_and_kept_in_the_ledger(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "cost.sqlite"
    run = allama.batch(provider_for(server), Row, docs(10), request=TEMPLATE, ledger=ledger)
    results = list(run)
    paid = [r for r in results if r.metadata is not None and r.metadata.passes]
    assert run.summary.cost == Decimal("0.000021") * len(paid)
    assert "cost $0.000210" in run.summary.lines()  # 10 paid passes, the failed parse too
    reader = Ledger(ledger)
    costs = {row.position: row.cost for row in reader.rows()}
    reader.close()
    assert costs[0] == "0.000021" and costs[7] == "0.000021" and costs[3] == "0.000021"


# A result reaches the caller only once its row is committed.


@pytest.mark.parametrize("twin", ["async", "sync"])
def test_every_result_is_committed_when_the_caller_gets_it(
    twin: str, server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    readers: list[Ledger] = []
    seen: list[tuple[str, str]] = []

    def check(result: allama.BatchResult[Row]) -> None:
        # Another connection sees only what is committed.
        if not readers:
            readers.append(Ledger(ledger, read_only=True))
        row = {r.key: r for r in readers[0].rows()}[result.key]
        seen.append((outcome(result), row.status))
        assert row.value == (None if result.value is None else result.value.model_dump_json())

    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger, "backoff": 0.01}
    if twin == "async":

        async def main() -> None:
            async for result in allama.abatch(provider_for(server), Row, docs(80), **options):
                check(result)

        asyncio.run(main())
    else:
        for result in allama.batch(provider_for(server), Row, docs(80), **options):
            check(result)
    readers[0].close()
    assert len(seen) == 80
    assert {status for kind, status in seen if kind == "ok"} == {"done"}
    assert {status for kind, status in seen if kind != "ok"} == {"failed"}


# The run's own machinery: reading its results, ending it, a program that ends with it.


def test_a_runs_results_are_read_once(server: BatchServer) -> None:
    run = allama.batch(provider_for(server), Row, docs(3), request=TEMPLATE)
    assert len(list(run)) == 3
    with pytest.raises(RuntimeError, match="results are read once"):
        list(run)
    assert run.summary.done == 3

    async def twice() -> None:
        arun = allama.abatch(provider_for(server), Row, docs(2), request=TEMPLATE)
        assert len([r async for r in arun]) == 2
        with pytest.raises(RuntimeError, match="results are read once"):
            [r async for r in arun]

    asyncio.run(twice())


def test_close_ends_a_sync_run_at_once_without_waiting_for_calls_in_flight(
    tmp_path: Path,
) -> None:
    slow = BatchServer(delay=3.0).start()  # doc 0 answers after 1.2 s, doc 1 after 2.4 s
    try:
        ledger = tmp_path / "run.sqlite"
        run = allama.batch(
            provider_for(slow),
            Row,
            ["doc 4", "doc 1", "doc 2"],
            request=TEMPLATE,
            ledger=ledger,
            concurrency=1,
        )
        began = time.monotonic()
        results = iter(run)
        first = next(results)  # doc 4 answers after 1.2 s
        assert outcome(first) == "ok"
        run.close()  # doc 1 is in flight, answering after 2.4 s; doc 2 waits its turn
        assert time.monotonic() - began < 2.0
        # Doc 1 was sent: pending, its attempt counted. Doc 2, claimed and never sent,
        # leaves no trace.
        assert _ledger_rows(ledger) == {0: ("done", 1, '{"n":4}'), 1: ("pending", 1, None)}
    finally:
        slow.stop()


def test_a_stop_over_an_endless_iterable_ends_the_run(server: BatchServer) -> None:
    def endless() -> Iterator[str]:
        n = 0
        while True:  # as a queue's feed: it never ends (and would say so if read on)
            assert n < 1_000, "inputs read long after the run stopped"
            yield f"doc {n % 5}{n}"
            n += 1

    run = allama.batch(provider_for(server), Row, endless(), request=TEMPLATE, concurrency=2)
    seen = 0
    for _ in run:
        seen += 1
        if seen == 5:
            run.stop("enough")
            assert run.summary.stopped == "enough"  # the run so far says so at once
    # Those in flight, those claimed ahead of a slot, and those the reading thread took.
    assert 5 <= seen <= 5 + 2 + 2 * 2 + 2
    assert run.summary.total is None and run.summary.stopped == "enough"


def test_a_program_that_ends_with_a_sync_run_going_fails_none_of_its_inputs(
    tmp_path: Path,
) -> None:
    slow = BatchServer(delay=0.2).start()
    script = tmp_path / "leave.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            from pydantic import BaseModel
            import allama

            class Row(BaseModel):
                n: int

            url, ledger = sys.argv[1], sys.argv[2]
            provider = allama.provider("openai", api_key="sk-test", base_url=url)
            request = allama.ChatRequest("gpt-4o-mini").system("Read the number.")
            run = allama.batch(
                provider, Row, [f"doc {n}" for n in range(400)], request=request,
                ledger=ledger, concurrency=8,
            )
            results = iter(run)
            next(results)
            # The program ends here, the run still going.
            """
        )
    )
    ledger = tmp_path / "run.sqlite"
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(
            [sys.executable, str(script), slow.url, str(ledger)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        statuses = [status for status, _, _ in _ledger_rows(ledger).values()]
        # Nothing failed for the program's end; what it had going is taken up next time.
        assert "failed" not in statuses
        assert "done" in statuses and len(statuses) < 400
        again = list(
            allama.batch(provider_for(slow), Row, docs(20), request=TEMPLATE, ledger=ledger)
        )
        assert {outcome(r) for r in again} <= {"ok", "extraction_parse", "invalid_request"}
        assert sorted(r.index for r in again) == list(range(20))
    finally:
        slow.stop()


def test_a_run_says_it_is_alive_while_its_calls_take_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    monkeypatch.setattr(_ledger, "HEARTBEAT_SECONDS", 0.1)
    slow = BatchServer(delay=2.5).start()  # doc 4 answers after 1 s
    try:
        ledger = tmp_path / "run.sqlite"
        list(allama.batch(provider_for(slow), Row, ["doc 4"], request=TEMPLATE, ledger=ledger))
        with sqlite3.connect(ledger) as db:
            started, beat, finished = db.execute(
                "SELECT started_at, heartbeat, finished_at FROM runs"
            ).fetchone()
        # Claimed at once, then nothing written for a second: the run beat meanwhile.
        assert beat - started > 0.7 and finished - beat < 0.3
    finally:
        slow.stop()


def test_a_run_whose_clock_is_set_back_beats_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    from allama.batch import _ledger

    path = tmp_path / "run.sqlite"
    ledger = Ledger(path, settings={})
    real = time.time
    # Set back a minute (a time server's step): its next beat, read on another host's
    # clock, would otherwise seem a minute old until its own clock caught up.
    monkeypatch.setattr(_ledger, "time", types.SimpleNamespace(time=lambda: real() - 58))
    ledger._heartbeat()
    with sqlite3.connect(path) as db:
        (beat,) = db.execute("SELECT heartbeat FROM runs").fetchone()
    assert abs(beat - (real() - 58)) < 1.0
    ledger.close()


def test_a_run_on_another_host_that_beats_again_is_alive_again(tmp_path: Path) -> None:
    from allama.batch import _ledger

    path = tmp_path / "run.sqlite"
    paused, other = Ledger(path, settings={}), Ledger(path, settings={})
    with sqlite3.connect(path) as db:  # its host another, its heartbeat stale: a pause
        db.execute(
            "UPDATE runs SET host = 'elsewhere', heartbeat = ? WHERE run_id = ?",
            (time.time() - _ledger.STALE_AFTER - 5, paused.run_id),
        )
    assert paused.claim("a", 0, "#0").granted
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET heartbeat = ? WHERE run_id = ?", (0, paused.run_id))
    taken = other.claim("a", 0, "#0")
    assert (taken.granted, taken.attempts) == (True, 2)  # taken over: the run seemed gone
    # It resumes and beats: what it claims now is its own, to the run that saw it gone.
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET heartbeat = ? WHERE run_id = ?", (time.time(), paused.run_id))
    assert paused.claim("b", 1, "#1").granted
    mine = other.claim("b", 1, "#1")
    assert (mine.granted, mine.elsewhere) == (False, True)
    # A run ended stays ended.
    paused.end(None)
    assert other.claim("b", 1, "#1").granted


def test_a_run_that_ends_while_a_reader_has_the_ledger_open_leaves_all_in_its_file(
    tmp_path: Path,
) -> None:
    """SQLite moves the `-wal` into the file only as the last connection closes, and a
    reader's (`status`, `export` in a loop) cannot: the file alone lacked the run's end."""
    import shutil

    path = tmp_path / "run.sqlite"
    run = Ledger(path, settings={})
    reader = Ledger(path, read_only=True)
    assert run.claim("a", 0, "#0").granted
    assert run.finish("a", status="done", seconds=0.1, value='{"n": 1}')
    run.end(None)
    run.close()
    assert not path.with_name("run.sqlite-wal").stat().st_size  # emptied into the file
    (tmp_path / "copy").mkdir()
    shutil.copy(path, tmp_path / "copy" / "run.sqlite")  # the file alone, as users copy it
    copied = Ledger(tmp_path / "copy" / "run.sqlite", read_only=True)
    assert [(row.key, row.status, row.value) for row in copied.rows()] == [
        ("a", "done", '{"n": 1}')
    ]
    assert [entry["finished_at"] is not None for entry in copied.runs()] == [True]
    copied.close()
    reader.close()


def test_a_wal_or_shm_another_user_made_is_said_before_the_run_begins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's `status` makes them where there were none: the owner's run failed,
    once begun, with "attempt to write a readonly database"."""
    from allama.batch import LedgerError, _ledger

    path = tmp_path / "run.sqlite"
    Ledger(path, settings={}).close()
    shm = path.with_name("run.sqlite-shm")
    shm.touch()
    writable = os.access
    monkeypatch.setattr(_ledger.os, "access", lambda p, mode: p != shm and writable(p, mode))
    provider = allama.mock.MockProvider.with_text('{"n": 1}')
    with pytest.raises(LedgerError) as refused:
        allama.batch(provider, Row, ["doc 1"], request=TEMPLATE, ledger=path)
    assert str(refused.value) == (
        f"`{shm}`, beside the ledger, cannot be written by this user (it belongs to user "
        f"{os.getuid()}, whose `allama batch status` or `export` may have made it): remove it "
        "while no run uses the ledger, or run as that user"
    )
    assert provider.requests == []


def test_a_run_whose_process_was_killed_and_not_yet_reaped_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zombie answers `kill(pid, 0)` and keeps its start time: a supervisor that killed a
    run without waiting for it left its inputs "in flight in another run" to the next."""
    from allama.batch import _ledger

    def of_another_user(pid: int, signal: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    path = tmp_path / "run.sqlite"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = _ledger._process_started(child.pid)
        assert started is not None and _ledger._alive(child.pid, started)
        with monkeypatch.context() as patched:  # a process of another user: alive
            patched.setattr(_ledger.os, "kill", of_another_user)
            assert _ledger._alive(child.pid, started)
        killed, other = Ledger(path, settings={}), Ledger(path, settings={})
        assert killed.claim("a", 0, "#0").granted
        with sqlite3.connect(path) as db:
            db.execute(
                "UPDATE runs SET pid = ?, pid_started = ? WHERE run_id = ?",
                (child.pid, started, killed.run_id),
            )
        assert not other.claim("a", 0, "#0").granted  # its process runs: the input is its
        child.kill()
        deadline = time.monotonic() + 10
        while (_ledger._process_state(child.pid) or ("Z",))[0] != "Z":
            assert time.monotonic() < deadline, "the child did not end"
            time.sleep(0.01)
        assert not _ledger._alive(child.pid, started)
        with monkeypatch.context() as patched:  # another user's, killed: ended too
            patched.setattr(_ledger.os, "kill", of_another_user)
            assert not _ledger._alive(child.pid, started)
        taken = other.claim("a", 0, "#0")
        assert (taken.granted, taken.attempts) == (True, 2)
    finally:
        child.kill()
        child.wait()


def test_an_input_claimed_ahead_and_taken_over_while_it_waited_is_not_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    monkeypatch.setattr(_ledger, "HEARTBEAT_SECONDS", 0.2)
    slow = BatchServer(delay=2.5).start()  # doc 4 and doc 8 answer after 1 s
    ledger = tmp_path / "run.sqlite"

    def take_over() -> None:
        # doc 8 is claimed ahead while doc 4 is in flight; another run, seeing this one
        # as ended (a stale heartbeat), takes it over as a claim of its own leaves it.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(sqlite3.OperationalError),  # (no ledger made yet)
                contextlib.closing(sqlite3.connect(ledger, timeout=5)) as db,
                db,
            ):
                taken = db.execute(
                    "UPDATE items SET run_id = 'another', attempts = attempts + 1 "
                    "WHERE position = 1 AND status = 'in_flight'"
                )
                if taken.rowcount == 1:
                    return
            time.sleep(0.02)

    other = threading.Thread(target=take_over)
    try:
        run = allama.batch(
            provider_for(slow),
            Row,
            ["doc 4", "doc 8"],
            request=TEMPLATE,
            ledger=ledger,
            concurrency=1,
        )
        other.start()
        results = sorted(run, key=lambda r: r.index)
        other.join()
        assert [outcome(r) for r in results] == ["ok", "in_flight_elsewhere"]
        assert results[1].failure is not None and results[1].failure.message == (
            "taken over by another run of this ledger, which saw this run as ended (a stale "
            "heartbeat: clocks that differ, a paused process), before this run sent it: "
            "not sent here"
        )
        assert (results[1].attempts, results[1].metadata, results[1].spent) == (0, None, ())
        # Sent by the run that holds it, not by this one too.
        assert (slow.sent[4], slow.sent[8]) == (1, 0)
        assert _ledger_rows(ledger)[1] == ("in_flight", 2, None)
    finally:
        slow.stop()


def test_a_429_after_a_paid_pass_pauses_the_input_that_takes_its_slot_too(
    server: BatchServer, tmp_path: Path
) -> None:
    # doc 1's first pass is paid for (no JSON), its second call answered 429 (wait 1 s):
    # what it paid is kept in the ledger before its wait, and the input that takes its
    # slot meanwhile is not sent into the pause.
    run = allama.batch(
        provider_for(server),
        Row,
        ["limited doc 1", "doc 2", "doc 4"],
        request=TEMPLATE,
        ledger=tmp_path / "run.sqlite",
        extractor=Extractor(retries=1),
        concurrency=1,
    )
    assert sorted(outcome(r) for r in run) == ["ok", "ok", "ok"]
    arrivals = sorted(server.arrivals)
    limited = [at for at, n in arrivals if n == 1]
    assert len(limited) == 3  # the pass, the 429, and the try after the pause
    after = [at for at, n in arrivals if n != 1 and at > limited[1]]
    assert min(after) - limited[1] >= 0.9
    assert run.summary.rate_limited == 1


def test_a_stop_while_a_claim_is_looked_up_before_its_send_sends_nothing(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    monkeypatch.setattr(_ledger, "HEARTBEAT_SECONDS", 0.0)  # every first send looks it up
    looked_up = _ledger.LedgerWriter.still_held
    runs: list[Any] = []
    calls = itertools.count(1)

    async def stopped_meanwhile(self: Any, key: str) -> bool:
        held = await looked_up(self, key)
        if next(calls) == 2:
            runs[0].stop("enough")  # the second input's look-up: the run stops meanwhile
        return held

    monkeypatch.setattr(_ledger.LedgerWriter, "still_held", stopped_meanwhile)
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        provider_for(server),
        Row,
        ["doc 1", "doc 2"],
        request=TEMPLATE,
        ledger=ledger,
        concurrency=1,
    )
    runs.append(run)
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["ok", "not_started"]
    assert (server.sent[1], server.sent[2]) == (1, 0)
    assert 1 not in _ledger_rows(ledger)  # given back: no attempt counted


def test_a_summary_whose_only_costs_are_unknown_says_so(unpriced: BatchServer) -> None:
    # doc 1 is answered (by a model without a price); doc 13 is refused, unpaid.
    run = allama.batch(provider_for(unpriced), Row, ["doc 1", "doc 13"], request=UNPRICED)
    list(run)
    summary = run.summary
    assert (summary.done, summary.failed, summary.priced, summary.cost_unknown) == (1, 1, 0, 1)
    assert summary.lines()[4] == (
        f"cost unknown (genai-prices {PRICES} has no price for 'a-model-of-our-own' at openai)"
    )


def test_a_slow_reader_slows_the_run_instead_of_filling_the_memory(server: BatchServer) -> None:
    run = allama.batch(
        provider_for(server), Row, docs(400), request=TEMPLATE, concurrency=8, backoff=0.01
    )
    most = run._runner.most_unread
    assert most == 64
    for read, _ in enumerate(run, 1):
        if read == 1:
            time.sleep(1.0)  # the run goes on meanwhile, up to the limit
            # Results waiting: the limit, and at most those in flight and read ahead then.
            assert most <= run._results.qsize() <= most + 8 + 2 * 8
        elif read == 200:
            break
    # Leaving the loop early leaves few results paid for and not read.
    assert run.summary.done + run.summary.failed <= 200 + most + 8 + 2 * 8

    async def slow_async_reader() -> int:
        arun = allama.abatch(provider_for(server), Row, docs(400), request=TEMPLATE, backoff=0.01)
        waiting = 0
        async for _ in arun:
            if not waiting:
                await asyncio.sleep(1.0)
                waiting = arun._queue.qsize()
        return waiting

    assert 64 <= asyncio.run(slow_async_reader()) <= 64 + 8 + 2 * 8


def test_inputs_that_come_slowly_do_not_hold_back_those_already_read(server: BatchServer) -> None:
    def slowly() -> Iterator[str]:
        for n in (1, 2, 4, 5, 6):
            yield f"doc {n}"
            time.sleep(0.3)  # a queue's feed, a cursor over the network

    began = time.monotonic()
    arrived = [
        time.monotonic() - began
        for _ in allama.batch(provider_for(server), Row, slowly(), request=TEMPLATE)
    ]
    # The first answer comes while the next inputs are still being waited for.
    assert len(arrived) == 5 and arrived[0] < 0.6 and arrived[-1] >= 1.2


def test_the_async_twin_reads_an_async_iterable(server: BatchServer) -> None:
    async def feed(queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
        while (document := await queue.get()) is not None:
            yield document

    async def run() -> list[tuple[int, float]]:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        began = time.monotonic()

        async def produce() -> None:
            for n in (1, 2, 4):
                await queue.put(f"doc {n}")
                await asyncio.sleep(0.3)
            await queue.put(None)

        producer = asyncio.create_task(produce())
        results = [
            (r.value.n, time.monotonic() - began)
            async for r in allama.abatch(provider_for(server), Row, feed(queue), request=TEMPLATE)
            if r.value is not None
        ]
        await producer
        return results

    results = asyncio.run(run())
    assert [n for n, _ in results] == [1, 2, 4]
    assert results[0][1] < 0.3  # answered while the producer waits: the loop is not held

    async def agen() -> AsyncIterator[str]:
        yield "doc 1"

    with pytest.raises(TypeError, match="use `abatch` on your event loop"):
        allama.batch(provider_for(server), Row, agen(), request=TEMPLATE)


def test_an_inputs_time_is_its_own_not_its_wait_for_a_slot() -> None:
    slow = BatchServer(delay=0.5).start()  # docs 4, 8 and 12 answer after 0.2 s
    try:
        run = allama.batch(
            provider_for(slow), Row, ["doc 4", "doc 8", "doc 12"], request=TEMPLATE, concurrency=1
        )
        seconds = [r.seconds for r in run]
        # Each its own 0.2 s (counted from the run's start, they would be 0.2, 0.4, 0.6).
        assert all(0.2 <= s < 0.55 for s in seconds), seconds
        assert sum(seconds) < 1.1
        # The summary's slowest inputs are so by their own time.
        assert all(0.2 <= s < 0.55 for s, _ in run.summary.slowest)
    finally:
        slow.stop()


def test_labels_reach_the_summary_without_driving_the_terminal(server: BatchServer) -> None:
    labels = {"doc 1": "a\x1b[2J\x1b]0;title\x07", "doc 2": "b\nfailed: forged\r", "doc 4": "ü 😀"}
    run = allama.batch(
        provider_for(server), Row, list(labels), request=TEMPLATE, label=labels.__getitem__
    )
    list(run)
    (slowest,) = [line for line in run.summary.lines() if line.startswith("slowest: ")]
    assert "\x1b" not in slowest and "\n" not in slowest and "\r" not in slowest
    assert "a\\x1b[2J\\x1b]0;title\\x07" in slowest and "b\\nfailed: forged\\r" in slowest
    assert "ü 😀" in slowest


def test_a_ledger_in_a_read_only_place_is_read(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allama.batch import _ledger

    ledger = tmp_path / "run.sqlite"
    list(allama.batch(provider_for(server), Row, docs(3), request=TEMPLATE, ledger=ledger))
    opened = _ledger._open_read_only
    hows: list[str] = []

    def on_a_read_only_mount(path: Path, how: str) -> sqlite3.Connection:
        hows.append(how)
        if how == "mode=ro":  # what SQLite answers where it cannot make the `-shm` file
            raise sqlite3.OperationalError("unable to open database file")
        return opened(path, how)

    monkeypatch.setattr(_ledger, "_open_read_only", on_a_read_only_mount)
    monkeypatch.setattr(_ledger.os, "access", lambda path, mode: False)
    reader = Ledger(ledger, read_only=True)
    assert reader.counts() == {"done": 3}
    reader.close()
    assert hows == ["mode=ro", "immutable=1"]
    # Where the place can be written, the error is not hidden.
    monkeypatch.setattr(_ledger.os, "access", lambda path, mode: True)
    with pytest.raises(_ledger.LedgerError, match="unable to open database file"):
        Ledger(ledger, read_only=True)


def test_a_stop_ends_a_run_whose_read_of_the_inputs_waits(server: BatchServer) -> None:
    import queue as queues

    fed: queues.Queue[str] = queues.Queue()
    for n in (1, 2, 4):
        fed.put(f"doc {n}")

    def from_the_queue() -> Iterator[str]:
        while True:
            yield fed.get()  # nothing more comes: the read waits for ever

    run = allama.batch(provider_for(server), Row, from_the_queue(), request=TEMPLATE)
    began = time.monotonic()
    results = []
    for result in run:  # the documents already read are sent while the next read waits
        results.append(result)
        if len(results) == 3:
            run.stop("the feed is done")
    assert sorted(r.value.n for r in results if r.value is not None) == [1, 2, 4]
    assert time.monotonic() - began < 3
    assert run.summary.stopped == "the feed is done"

    async def from_an_async_queue() -> list[int]:
        feed: asyncio.Queue[str] = asyncio.Queue()
        for n in (1, 2):
            feed.put_nowait(f"doc {n}")

        async def documents() -> AsyncIterator[str]:
            while True:
                yield await feed.get()

        arun = allama.abatch(provider_for(server), Row, documents(), request=TEMPLATE)
        values = []
        async for result in arun:
            values.append(result.value.n if result.value is not None else -1)
            if len(values) == 2:
                arun.stop()
        return values

    began = time.monotonic()
    assert sorted(asyncio.run(asyncio.wait_for(from_an_async_queue(), 10))) == [1, 2]
    assert time.monotonic() - began < 3


def test_close_ends_a_run_whose_first_read_waits(server: BatchServer) -> None:
    import queue as queues

    never: queues.Queue[str] = queues.Queue()
    run = allama.batch(
        provider_for(server), Row, iter(never.get, None), request=TEMPLATE, concurrency=2
    )
    threading.Timer(0.3, run.close).start()
    began = time.monotonic()
    assert list(run) == []
    assert time.monotonic() - began < 3


def test_an_iterator_of_a_run_never_advanced_sends_nothing(server: BatchServer) -> None:
    before = set(threading.enumerate())
    run = allama.batch(provider_for(server), Row, docs(50), request=TEMPLATE, concurrency=4)
    assert list(zip([], run, strict=False)) == []  # `iter(run)`, and no `next`
    time.sleep(0.3)
    assert not server.sent
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("allama")]
    with pytest.raises(RuntimeError, match="are read once"):
        list(run)


def test_an_input_waiting_to_be_sent_again_after_a_server_error_is_counted_as_such(
    server: BatchServer,
) -> None:
    run = allama.batch(provider_for(server), Row, ["doc 3"], request=TEMPLATE, backoff=0.6)
    seen: list[tuple[int, int]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            seen.append((run.summary.in_flight, run.summary.retrying))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        (result,) = list(run)  # a 503 first, then its value
    finally:
        done.set()
        watcher.join()
    assert result.value == Row(n=3) and result.attempts == 2
    # While it waits, it is said to: neither in flight nor finished.
    assert (0, 1) in seen and (run.summary.in_flight, run.summary.retrying) == (0, 0)


def test_a_ledgers_rows_are_read_in_order_past_a_chunk_and_without_values_when_asked(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    list(allama.batch(provider_for(server), Row, docs(250), request=TEMPLATE, ledger=ledger))
    book = Ledger(ledger, read_only=True)
    with book.snapshot():
        full = list(book.rows())
        light = list(book.rows(values=False))
        done = list(book.rows("done"))
    book.close()
    assert [row.position for row in full] == list(range(250))
    assert [row.value for row in done] == [
        f'{{"n":{row.position}}}' for row in full if row.status == "done"
    ]
    # The same rows, without what is large: for counting them.
    assert all(row.value is None and row.source is None and row.log is None for row in light)
    assert [(r.key, r.status, r.attempts, r.record, r.error) for r in light] == [
        (r.key, r.status, r.attempts, r.record, r.error) for r in full
    ]


def test_a_ledger_rows_repr_withholds_what_may_quote_the_input_or_the_output(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.sqlite"
    provider = allama.mock.MockProvider.with_text('{"n": 4}')
    list(allama.batch(provider, Row, ["doc MARK-1"], request=TEMPLATE, ledger=ledger))
    (row,) = Ledger(ledger, settings={}).rows()
    assert row.value == '{"n":4}'
    shown = repr(row)
    assert "value=" not in shown and '"n"' not in shown and "source=" not in shown
    assert shown.startswith(f"LedgerRow(key='{row.key}', position=0, label='#0', status='done'")


def test_a_runs_time_counts_from_the_first_result_asked_for(server: BatchServer) -> None:
    run = allama.batch(provider_for(server), Row, docs(2), request=TEMPLATE)
    time.sleep(0.5)  # the caller does something else before reading the results
    began = time.monotonic()
    assert len(list(run)) == 2
    assert run.summary.elapsed <= time.monotonic() - began


def test_close_in_the_loop_ends_it_and_the_summary_counts_every_input(
    server: BatchServer, tmp_path: Path
) -> None:
    slow = BatchServer(delay=0.05).start()
    try:
        for closing in ("sync", "async"):
            ledger = tmp_path / f"{closing}.sqlite"
            kwargs: dict[str, Any] = {
                "request": TEMPLATE,
                "ledger": ledger,
                "concurrency": 4,
            }
            after = 0
            if closing == "sync":
                run = allama.batch(provider_for(slow), Row, docs(40), **kwargs)
                for result in run:
                    assert result.failure is None
                    run.close()
                    after += 1
                summary = run.summary
            else:

                async def read(kwargs: dict[str, Any] = kwargs) -> tuple[BatchSummary, int]:
                    arun = allama.abatch(provider_for(slow), Row, docs(40), **kwargs)
                    count = 0
                    async for _ in arun:
                        await arun.aclose()
                        count += 1
                    return arun.summary, count

                summary, after = asyncio.run(read())
            assert after == 1  # nothing read after the close
            assert summary.stopped == (
                "closed before its end (the results were left, or `close()` called)"
            )
            # Every input accounted for: what was read and left has no result.
            assert summary.abandoned > 0
            assert summary.done + summary.failed + summary.not_started + summary.abandoned == 40
            assert summary.eta() == 0.0
            under_way = (
                f" ({summary.abandoned_calls} with a call under way, which may be paid for, "
                "at a cost not counted here)"
                if summary.abandoned_calls
                else ""
            )
            assert f", {summary.abandoned} left unfinished{under_way}, in " in summary.lines()[0]
            book = Ledger(ledger, read_only=True)
            counts = Counter(row.status for row in book.rows())
            [recorded] = [r["stopped"] for r in book.runs()]
            book.close()
            assert recorded == summary.stopped
            # An input whose finish was committed as the run closed is done in the ledger,
            # though this run gave no result for it.
            assert summary.done <= counts["done"] <= summary.done + summary.abandoned
            assert counts["in_flight"] == 0
    finally:
        slow.stop()


def test_a_value_from_the_ledger_below_the_runs_floor_is_not_accepted(
    server: BatchServer, tmp_path: Path
) -> None:
    # An endpoint of one's own: its enforcement is `approximate`.
    provider = allama.provider("openai-compatible", api_key="sk-test", base_url=server.url)
    ledger = tmp_path / "run.sqlite"
    first = list(allama.batch(provider, Row, docs(2), request=TEMPLATE, ledger=ledger))
    assert [r.metadata.enforcement.value for r in first if r.metadata] == ["approximate"] * 2
    sent = sum(server.sent.values())
    floor = Extractor(min_enforcement="exact")
    # With the template, every call would be below the floor: the run is refused at once.
    with pytest.raises(allama.EnforcementBelowError):
        allama.batch(provider, Row, docs(2), request=TEMPLATE, ledger=ledger, extractor=floor)
    # Built by a function (the same requests, the same keys), the run reads the ledger.
    again = sorted(
        allama.batch(provider, Row, docs(2), request=TEMPLATE.user, ledger=ledger, extractor=floor),
        key=lambda r: r.index,
    )
    assert sum(server.sent.values()) == sent  # nothing sent: the floor would refuse it too
    assert [(r.value, r.resumed) for r in again] == [(None, True)] * 2
    assert all(r.failure is not None for r in again)
    assert again[0].failure is not None and again[0].failure.kind == (
        "extraction_enforcement_below"
    )
    assert again[0].failure.message == (
        "finished by an earlier run, whose provider enforced the schema `approximate`, below "
        "this run's floor `exact`: the value stays in the ledger (`allama batch export` "
        "writes it)"
    )
    # The values stay; a floor they meet gives them.
    met = Extractor(min_enforcement="approximate")
    kept = allama.batch(provider, Row, docs(2), request=TEMPLATE, ledger=ledger, extractor=met)
    assert sorted(r.value.n for r in kept if r.value is not None) == [0, 1]


def test_failures_a_closed_retry_failed_run_left_unfinished_are_not_sent_by_a_plain_run(
    tmp_path: Path,
) -> None:
    # Documents 13, 63, ... are refused with a 400. A run trying them again is closed with
    # some in flight (left pending, as a second Ctrl-C leaves them): a run without
    # `retry_failed` gives them as the failures they were and sends nothing.
    slow = BatchServer(delay=0.3).start()
    try:
        ledger = tmp_path / "retried.sqlite"
        inputs = [f"doc {50 * n + 13}" for n in range(4)]
        options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger, "concurrency": 2}
        provider = provider_for(slow)
        assert {outcome(r) for r in allama.batch(provider, Row, inputs, **options)} == {
            "invalid_request"
        }
        again = allama.batch(provider, Row, inputs, retry_failed=True, **options)
        next(iter(again))
        again.close()
        assert Ledger(ledger, read_only=True).counts().get("pending", 0) > 0
        sent = sum(slow.sent.values())
        plain = list(allama.batch(provider, Row, inputs, **options))
        assert sum(slow.sent.values()) == sent
        assert all(r.resumed and outcome(r) == "invalid_request" for r in plain)
        assert Ledger(ledger, read_only=True).counts() == {"failed": 4}
    finally:
        slow.stop()


def test_failures_set_aside_while_tried_again_stay_the_failures_they_were(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from allama.cli import main
    from allama.mock import FunctionProvider

    # Refused at first (400); tried again (`retry_failed`) in an outage of "overloaded"
    # answers, which stops the run and sets them aside. A run that does not try failures
    # again gives them as they were, their own error kept, and sends nothing.
    answer_with: list[Exception] = [allama.InvalidRequestError("bad document")]
    calls: list[ChatRequest] = []

    def answer(request: ChatRequest) -> ChatResponse:
        calls.append(request)
        raise answer_with[0]

    provider = FunctionProvider(answer, name="custom")
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger, "backoff": 0.0}
    assert {outcome(r) for r in allama.batch(provider, Row, docs(2), **options)} == {
        "invalid_request"
    }
    answer_with[0] = allama.OverloadedError("overloaded").with_status(529)
    again = allama.batch(provider, Row, docs(2), retry_failed=True, concurrency=1, **options)
    list(again)
    assert again.summary.refused == "overloaded"
    assert Ledger(ledger, read_only=True).counts().get("pending", 0) > 0
    assert main(["batch", "status", str(ledger)]) == 0
    assert "failures a run trying failures again left unfinished: failed to a run without " \
        "--retry-failed" in capsys.readouterr().out  # fmt: skip
    assert main(["batch", "export", str(ledger), "--failed"]) == 0
    exported = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["error"]["kind"] for row in exported] == ["invalid_request"] * 2
    sent = len(calls)
    plain = list(allama.batch(provider, Row, docs(2), **options))
    assert len(calls) == sent
    assert [(r.resumed, outcome(r)) for r in plain] == [(True, "invalid_request")] * 2


@pytest.mark.parametrize("overloaded_first", [True, False])
def test_an_outage_of_a_failover_overloaded_and_out_of_reach_stops_the_run(
    tmp_path: Path, overloaded_first: bool
) -> None:
    # One provider overloaded at every try, the other out of reach: every input meets it,
    # in either order; pending for the next run, not failed each in turn.
    overloaded = _always(allama.OverloadedError("overloaded").with_status(529), "openai")
    down = _always(allama.NetworkError("connection refused"), "deepseek")
    providers = [overloaded, down] if overloaded_first else [down, overloaded]
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        FailoverProvider(providers),
        Row,
        docs(6),
        request=TEMPLATE,
        ledger=ledger,
        concurrency=2,
        backoff=0.0,
    )
    results = list(run)
    assert run.summary.stopped is not None
    assert run.summary.stopped.startswith("the provider answered that it is overloaded to")
    assert Ledger(ledger, read_only=True).counts().get("failed", 0) == 0
    assert {outcome(r) for r in results} <= {"network", "overloaded", "not_started"}


def test_an_outage_of_overloaded_answers_stops_the_run_with_its_inputs_pending(
    tmp_path: Path,
) -> None:
    from allama.mock import FunctionProvider

    # Every call answered "overloaded" (503, 529) while nothing else is served: an outage,
    # not each input's failure. The run stops starting inputs; those it sent are pending,
    # and a run once the provider serves again sends them.
    overloaded = True

    def answer(request: ChatRequest) -> ChatResponse:
        if overloaded:
            raise allama.OverloadedError("overloaded").with_status(529)
        return ChatResponseBuilder().text('{"n": 1}').usage(5, 5).build()

    provider = FunctionProvider(answer, name="custom")
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger, "backoff": 0.0}
    run = allama.batch(provider, Row, docs(6), concurrency=2, **options)
    first = list(run)
    assert run.summary.stopped is not None and run.summary.stopped.startswith(
        "the provider answered that it is overloaded to 5 tries, and served no other call "
        "meanwhile: "
    )
    assert run.summary.refused == "overloaded"
    assert {outcome(r) for r in first} <= {"overloaded", "not_started"}
    assert Ledger(ledger, read_only=True).counts().get("failed", 0) == 0
    overloaded = False
    again = list(allama.batch(provider, Row, docs(6), concurrency=2, **options))
    assert [outcome(r) for r in again] == ["ok"] * 6


def test_an_input_answered_overloaded_while_others_are_served_is_its_failure() -> None:
    from allama.mock import FunctionProvider

    def answer(request: ChatRequest) -> ChatResponse:
        if "doc 1" in request.model_dump_json():
            raise allama.OverloadedError("overloaded").with_status(503)
        return ChatResponseBuilder().text('{"n": 1}').usage(5, 5).build()

    provider = FunctionProvider(answer, name="custom")
    run = allama.batch(provider, Row, docs(8), request=TEMPLATE, concurrency=4, backoff=0.01)
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["ok", "overloaded"] + ["ok"] * 6
    assert results[1].attempts == 5 and run.summary.stopped is None


def test_a_value_another_endpoint_gave_is_not_taken_for_this_ones(
    server: BatchServer, tmp_path: Path
) -> None:
    import sqlite3

    # Two servers with a model of the same name: what one answered is not the other's.
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger}
    (first,) = allama.batch(provider_for(server), Row, ["doc 1"], **options)
    assert first.value == Row(n=1)
    other = BatchServer().start()
    try:
        (again,) = allama.batch(provider_for(other), Row, ["doc 1"], **options)
        assert sum(other.sent.values()) == 0
        assert (again.value, again.resumed) == (None, True)
        assert again.failure == BatchFailure(
            "another_endpoint",
            f"finished by an earlier run against another endpoint ({server.url}), whose "
            "model of that name may be another: the value stays in the ledger (`allama "
            "batch export` writes it); a ledger of its own for this endpoint sends it",
        )
    finally:
        other.stop()
    # The same endpoint gives it, however it is written (a key in it, a trailing slash, a
    # query), and through a wrapper; so does a run an earlier version made, which kept none.
    (same,) = allama.batch(provider_for(server), Row, ["doc 1"], **options)
    assert (same.value, same.resumed) == (Row(n=1), True)
    host = server.url.removeprefix("http://")
    spelled = f"HTTP://user:secret@{host}/?api-version=1"
    wrapped = RetryingProvider(allama.provider("openai", api_key="sk-test", base_url=spelled))
    (same,) = allama.batch(wrapped, Row, ["doc 1"], **options)
    assert (same.value, same.resumed) == (Row(n=1), True)
    other = BatchServer().start()
    try:
        (again,) = allama.batch(RetryingProvider(provider_for(other)), Row, ["doc 1"], **options)
        assert again.failure is not None and again.failure.kind == "another_endpoint"
    finally:
        other.stop()
    # A failover's servers in another order gave it too (its name is its providers', and
    # in the key); one of them alone is another failover's.
    elsewhere = BatchServer().start()
    try:
        (fail,) = allama.batch(
            FailoverProvider([provider_for(elsewhere), provider_for(server)]),
            Row,
            ["doc 2"],
            **options,
        )
        assert fail.value == Row(n=2)
        (same,) = allama.batch(
            FailoverProvider([provider_for(server), provider_for(elsewhere)]),
            Row,
            ["doc 2"],
            **options,
        )
        assert (same.value, same.resumed) == (Row(n=2), True)
        assert sum(elsewhere.sent.values()) + server.sent[2] == 1  # sent once, in all
        (alone,) = allama.batch(
            FailoverProvider([provider_for(server), provider_for(other)]),
            Row,
            ["doc 2"],
            **options,
        )
        assert alone.failure is not None and alone.failure.kind == "another_endpoint"
    finally:
        elsewhere.stop()
    with contextlib.closing(sqlite3.connect(ledger)) as db, db:
        db.execute("UPDATE runs SET settings = json_remove(settings, '$.endpoint')")
    other = BatchServer().start()
    try:
        (old,) = allama.batch(provider_for(other), Row, ["doc 1"], **options)
        assert (old.value, old.resumed, sum(other.sent.values())) == (Row(n=1), True, 0)
    finally:
        other.stop()


def test_a_failover_whose_first_provider_is_at_its_limit_per_day_runs_on_the_other() -> None:
    day = [allama.RateLimitedError("limit per day", retry_after=86400.0) for _ in range(5)]
    limited = allama.mock.MockProvider(day, name="openai")
    serving = allama.mock.MockProvider(
        [allama.OverloadedError("busy"), *['{"n": 1}'] * 4], name="deepseek"
    )
    run = allama.batch(
        FailoverProvider([limited, serving]),
        Row,
        docs(4),
        request=TEMPLATE,
        concurrency=1,
        backoff=0.001,
    )
    assert [outcome(r) for r in sorted(run, key=lambda r: r.index)] == ["ok"] * 4
    # Asked once: the failover passes over it while its day's wait lasts.
    assert run.summary.stopped is None and limited.call_count == 1


def _always(error: Exception, name: str) -> allama.mock.FunctionProvider:
    """A provider that answers every call with `error`."""

    def answer(request: ChatRequest) -> ChatResponse:
        raise error

    return allama.mock.FunctionProvider(answer, name=name)


def test_a_failover_whose_first_provider_refuses_the_key_hides_no_outage_of_the_other() -> None:
    refusing = _always(allama.AuthenticationError("key revoked"), "openai")
    down = _always(allama.NetworkError("connection refused"), "deepseek")
    run = allama.batch(
        FailoverProvider([refusing, down]),
        Row,
        docs(6),
        request=TEMPLATE,
        concurrency=1,
        max_attempts=2,
        backoff=0.001,
    )
    results = list(run)
    assert run.summary.stopped is not None
    assert run.summary.stopped.startswith("the provider could not be reached in 2 tries")
    assert {outcome(r) for r in results} <= {"network", "not_started"}
    assert down.call_count < 6 * 2  # it stopped, rather than fail each input in turn


def test_a_failover_whose_backups_key_is_refused_runs_on_when_the_first_is_busy_a_moment() -> None:
    busy_once = allama.mock.MockProvider(
        [allama.OverloadedError("busy"), *['{"n": 1}'] * 4], name="openai"
    )
    refusing = _always(allama.AuthenticationError("key revoked"), "deepseek")
    run = allama.batch(
        FailoverProvider([busy_once, refusing]),
        Row,
        docs(4),
        request=TEMPLATE,
        concurrency=1,
        backoff=0.001,
    )
    assert [outcome(r) for r in run] == ["ok"] * 4
    assert run.summary.stopped is None and busy_once.call_count == 5


@pytest.mark.parametrize(
    "limit",
    [
        # A 429 the provider said not to send again (`x-should-retry: false`).
        allama.RateLimitedError("Rate limit reached for requests").with_retryable(False),
        # A request larger than the backup's limit per minute: no wait lets it through.
        allama.RateLimitedError("Request too large: Limit 30000, Requested 45000.").with_retryable(
            False
        ),
    ],
)
def test_a_failover_whose_backup_meets_its_rate_limit_sends_again_when_the_first_was_busy(
    limit: allama.Error,
) -> None:
    # The failover moves on past every rate limit, as past a quota: the backup's limit is its
    # account's, and the first, busy a moment, serves the input sent again.
    busy_once = allama.mock.MockProvider(
        [allama.OverloadedError("busy"), *['{"n": 1}'] * 4], name="openai"
    )
    limited = _always(limit, "deepseek")
    run = allama.batch(
        FailoverProvider([busy_once, limited]),
        Row,
        ["doc 1"],
        request=TEMPLATE,
        backoff=0.001,
        rpm=60_000,  # (were it cut, a guessed rate of 60 a minute would be 2 s a request)
    )
    (result,) = run
    assert (outcome(result), result.value, result.attempts) == ("ok", Row(n=1), 2)
    assert (busy_once.call_count, limited.call_count, run.summary.stopped) == (2, 1, None)
    # The 429 is met, but the input waited as the busy provider asked: the rate is not cut.
    assert (run.summary.rate_limited, run.summary.slowdowns) == (1, 0)


def _failing(times: int, error: Callable[[], Exception], name: str) -> allama.mock.FunctionProvider:
    """A provider whose first `times` calls each raise an error of their own, as a provider's
    calls do (one raised again would carry the failover's chain of an earlier call)."""
    calls = itertools.count()

    def answer(request: ChatRequest) -> ChatResponse:
        if next(calls) < times:
            raise error()
        return ChatResponseBuilder().text('{"n": 1}').usage(5, 5).build()

    return allama.mock.FunctionProvider(answer, name=name)


@pytest.mark.parametrize(
    "limit", ["Rate limit reached for requests", "Request too large: Limit 30000, Requested 45000."]
)
@pytest.mark.parametrize("asked", [None, 0.01])
def test_a_failover_sent_again_past_its_backups_rate_limit_counts_its_tries_as_the_busy_one(
    limit: str, asked: float | None
) -> None:
    # Sent again for the first provider, busy, not for the backup, which no wait gets through:
    # each send is a try, as for an overloaded provider alone, and the run's rate is not cut,
    # not at the last try either, for the wait the busy one asked.
    busy = _failing(5, lambda: allama.OverloadedError("busy").with_retry_after(asked), "openai")
    limited = _failing(
        1_000, lambda: allama.RateLimitedError(limit).with_retryable(False), "deepseek"
    )
    run = allama.batch(
        FailoverProvider([busy, limited]),
        Row,
        ["doc 1"],
        request=TEMPLATE,
        backoff=0.001,
        max_attempts=3,
        rpm=60_000,  # (were it cut, a guessed rate of 60 a minute would be 2 s a request)
    )
    (result,) = run
    assert (outcome(result), result.attempts) == ("rate_limited", 3)
    assert result.failure is not None and not result.failure.retryable
    assert (busy.call_count, limited.call_count, run.summary.stopped) == (3, 3, None)
    assert (run.summary.rate_limited, run.summary.slowdowns) == (3, 0)


def test_a_failover_sent_again_past_its_backups_refused_key_waits_out_the_first_ones_429() -> None:
    # Sent again for the first provider's rate limit, the backup's key refused: the run slows
    # down for the 429, as for the first provider alone, and the send is no try of the input;
    # the backup that refused its key is passed over when it is sent again (a failover's
    # `refused_account_wait`).
    limited_twice = _failing(2, lambda: allama.RateLimitedError("Rate limit reached"), "openai")
    refused = _failing(1_000, lambda: allama.AuthenticationError("key revoked"), "deepseek")
    run = allama.batch(
        FailoverProvider([limited_twice, refused]),
        Row,
        ["doc 1"],
        request=TEMPLATE,
        backoff=0.001,
        max_attempts=1,
        rpm=60_000,  # (cut, a guessed rate of 60 a minute would be 2 s a request)
    )
    (result,) = run
    assert (outcome(result), result.value, result.attempts) == ("ok", Row(n=1), 3)
    assert (limited_twice.call_count, refused.call_count, run.summary.stopped) == (3, 1, None)
    assert (run.summary.rate_limited, run.summary.slowdowns) == (2, 1)


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("asked", [3600.0, 0.05])
def test_a_failover_whose_backup_refuses_the_request_after_the_first_ones_429_fails_it_alone(
    asked: float, sync: bool
) -> None:
    # The backup refused this input (too long for it): the input's own failure. The first
    # provider's 429 before it neither stops the run (a wait past what a run makes), nor
    # slows it: every other input is sent, and served by the backup.
    def busy_answer(request: ChatRequest) -> ChatResponse:
        raise allama.RateLimitedError("Rate limit reached").with_retry_after(asked)

    def backup_answer(request: ChatRequest) -> ChatResponse:
        if "too long" in request.to_json():
            raise allama.InvalidRequestError("context too long for this model").with_status(400)
        return ChatResponseBuilder().text('{"n": 1}').usage(5, 5).build()

    busy = allama.mock.FunctionProvider(busy_answer, name="openai")
    backup = allama.mock.FunctionProvider(backup_answer, name="deepseek")
    inputs = ["too long doc", *docs(20)]
    run: Any = (allama.batch if sync else allama.abatch)(
        FailoverProvider([busy, backup]),
        Row,
        inputs,
        request=TEMPLATE,
        backoff=0.001,
        max_attempts=2,
        rpm=60_000,  # (were it cut, a guessed rate of 60 a minute would be 2 s a request)
        concurrency=1,
    )
    if sync:
        results = list(run)
    else:

        async def read(run: Any = run) -> list[Any]:
            return [result async for result in run]

        results = asyncio.run(read())
    by_index = {result.index: result for result in results}
    assert sorted(by_index) == list(range(21))
    refused = by_index[0]
    assert (outcome(refused), refused.attempts, refused.pending) == ("invalid_request", 1, False)
    assert refused.failure is not None and not refused.failure.retryable
    assert [(outcome(by_index[n]), by_index[n].value) for n in range(1, 21)] == [
        ("ok", Row(n=1))
    ] * 20
    summary = run.summary
    assert (summary.stopped, summary.not_started) == (None, 0)
    assert (summary.done, summary.failed) == (20, 1)
    assert summary.failures_by_kind == {"invalid_request": 1}
    assert (summary.rate_limited, summary.slowdowns) == (0, 0)
    assert backup.call_count == 21  # every input sent, each once


@pytest.mark.parametrize(
    "backup",
    [allama.NotFoundError("no such model").with_status(404), allama.NetworkError("refused")],
)
def test_a_failover_whose_backup_is_missing_or_unreachable_runs_on_when_the_first_may_serve(
    backup: allama.Error,
) -> None:
    # The first was busy a moment: its error is the input's, not every input's.
    busy_once = allama.mock.MockProvider(
        [allama.OverloadedError("busy"), *['{"n": 1}'] * 4], name="openai"
    )
    run = allama.batch(
        FailoverProvider([busy_once, _always(backup, "deepseek")]),
        Row,
        docs(3),
        request=TEMPLATE,
        concurrency=1,
        max_attempts=1,
    )
    assert [outcome(r) for r in run][1:] == ["ok"] * 2
    assert run.summary.stopped is None


def test_a_failover_whose_first_provider_answered_an_error_is_no_outage() -> None:
    answered = allama.mock.MockProvider([allama.ServerError("bad gateway")] * 3, name="a")
    busy = allama.mock.MockProvider([allama.OverloadedError("busy")] * 3, name="b")
    run = allama.batch(
        FailoverProvider([answered, busy]),
        Row,
        ["doc 1"],
        request=TEMPLATE,
        max_attempts=3,
        backoff=0.001,
    )
    (result,) = run
    # The provider is there (the first answered each try): the input's failure, no stop.
    assert (outcome(result), result.pending, run.summary.stopped) == ("overloaded", False, None)
    assert busy.call_count == 3


@pytest.mark.parametrize("ending", ["close", "stop"])
@pytest.mark.parametrize("wrapper", ["failover", "retry"])
def test_a_sync_run_closed_or_stopped_makes_no_further_call_inside_its_wrappers(
    wrapper: str, ending: str
) -> None:
    calls: list[str] = []

    def slow_busy(request: ChatRequest) -> ChatResponse:
        calls.append("first")
        time.sleep(0.4)
        raise allama.OverloadedError("busy", retry_after=0.1)

    def answer(request: ChatRequest) -> ChatResponse:
        calls.append("next")
        return ChatResponseBuilder().text('{"n": 1}').build()

    first, then = allama.mock.FunctionProvider(slow_busy), allama.mock.FunctionProvider(answer)
    if wrapper == "failover":
        provider: Any = FailoverProvider([first, then])
    else:
        answers = iter([slow_busy, answer])
        provider = RetryingProvider(
            allama.mock.FunctionProvider(lambda request: next(answers)(request))
        )
    run = allama.batch(provider, Row, ["doc 1"], request=TEMPLATE)
    threading.Timer(0.15, getattr(run, ending)).start()
    results = list(run)
    time.sleep(0.6)  # a call still going in its thread would have made the next by now
    if ending == "stop" and wrapper == "failover":
        # In flight, it finishes: the failover's providers are one call of the run.
        assert calls == ["first", "next"]
        assert [outcome(r) for r in results] == ["ok"]
    elif ending == "stop":  # in flight, finished: not tried again after the stop
        assert calls == ["first"]
        assert [outcome(r) for r in results] == ["overloaded"]
    else:  # closed: nothing more is read, so nothing more is paid for
        assert calls == ["first"] and results == []


def test_a_failovers_providers_in_another_order_or_one_more_server_keep_its_keys(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.sqlite"

    def failover(*names: str) -> FailoverProvider:
        return FailoverProvider([allama.mock.MockProvider(['{"n": 1}'], name=n) for n in names])

    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger}
    (first,) = allama.batch(failover("openai", "deepseek"), Row, ["doc 1"], **options)
    assert first.value == Row(n=1)
    for names in [("deepseek", "openai"), ("openai", "deepseek", "openai")]:
        again = failover(*names)
        (same,) = allama.batch(again, Row, ["doc 1"], **options)
        assert (same.value, same.resumed, same.key) == (Row(n=1), True, first.key)
        assert [p.call_count for p in again.providers] == [0] * len(names)  # type: ignore[attr-defined]
    assert input_key(failover("deepseek", "openai"), Row, TEMPLATE.user("doc 1")) == first.key
    (other,) = allama.batch(failover("openai", "groq"), Row, ["doc 1"], **options)
    assert (other.value, other.resumed) == (Row(n=1), False)  # other providers: sent
    kept = Ledger(ledger, read_only=True)
    assert [run["settings"]["provider"] for run in kept.runs()] == [
        "failover(deepseek, openai)",
        "failover(deepseek, openai)",
        "failover(deepseek, openai)",
        "failover(groq, openai)",
    ]
    kept.close()


def test_a_failovers_ledger_an_earlier_version_keyed_in_its_order_still_resumes(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.sqlite"
    earlier = "failover(openai, deepseek)"  # its providers' names as given, unsorted
    book = Ledger(ledger, settings={"provider": earlier, "model": "gpt-4o-mini"})
    key = input_key(earlier, Row, TEMPLATE.user("doc 1"))
    book.claim(key, 0, "#0")
    book.finish(key, status="done", seconds=0.1, value='{"n": 1}', cost="0.000021")
    book.close()
    for names in [("openai", "deepseek"), ("deepseek", "openai")]:
        providers = [allama.mock.MockProvider(['{"n": 1}'], name=n) for n in names]
        run = allama.batch(
            FailoverProvider(providers), Row, ["doc 1"], request=TEMPLATE, ledger=ledger
        )
        (result,) = run
        assert (result.value, result.resumed) == (Row(n=1), True)
        assert [p.call_count for p in providers] == [0, 0]
    kept = Ledger(ledger, read_only=True)
    assert {run["settings"]["provider"] for run in kept.runs()} == {earlier}
    kept.close()


def test_a_provider_of_ones_own_with_an_inner_attribute_is_left_alone(tmp_path: Path) -> None:
    from allama.mock import FunctionProvider

    # Where a provider of the caller's own sends is its own business: its attributes are
    # not walked (one that raises until first use, or leads back to itself).
    class Lazy(FunctionProvider):
        @property
        def inner(self) -> Any:
            raise RuntimeError("credentials not fetched yet")

    provider = Lazy(lambda request: ChatResponseBuilder().text('{"n": 1}').build(), name="own")
    (result,) = allama.batch(provider, Row, ["doc 1"], request=TEMPLATE, ledger=tmp_path / "l")
    assert result.value == Row(n=1)


def test_a_value_from_the_ledger_read_after_repair_is_not_accepted_without_it(
    tmp_path: Path,
) -> None:
    from allama.mock import FunctionProvider

    # The model wraps its JSON in a markdown fence: read with `repair=True` only. A run
    # without it over the same ledger fails the input, as a call would, and sends nothing.
    calls: list[ChatRequest] = []

    def fenced(request: ChatRequest) -> ChatResponse:
        calls.append(request)
        return ChatResponseBuilder().text('```json\n{"n": 1}\n```').usage(5, 5).build()

    provider = FunctionProvider(fenced, name="custom")
    ledger = tmp_path / "run.sqlite"
    options: dict[str, Any] = {"request": TEMPLATE, "ledger": ledger}
    (first,) = allama.batch(provider, Row, ["doc 1"], extractor=Extractor(repair=True), **options)
    assert first.value == Row(n=1) and first.metadata is not None and first.metadata.repaired
    (again,) = allama.batch(provider, Row, ["doc 1"], **options)
    assert len(calls) == 1
    assert (again.value, again.resumed) == (None, True)
    assert again.failure == BatchFailure(
        "extraction_parse",
        "finished by an earlier run, whose value was read after repair (the JSON taken out "
        "of markdown or prose around it), which this run's extractor does not do "
        "(`repair=False`): the value stays in the ledger (`allama batch export` writes it)",
    )
    (kept,) = allama.batch(provider, Row, ["doc 1"], extractor=Extractor(repair=True), **options)
    assert (kept.value, kept.resumed, len(calls)) == (Row(n=1), True, 1)


def test_every_call_of_an_extraction_takes_a_turn_of_the_rate_limit(
    server: BatchServer,
) -> None:
    # Documents 7, 57, ... are answered with no JSON: three calls each, with two retries.
    inputs = [f"doc {n}" for n in (7, 57, 107, 157)]
    for sync in (True, False):
        server.times.clear()
        began = time.monotonic()
        run: Any = (allama.batch if sync else allama.abatch)(
            provider_for(server),
            Row,
            inputs,
            request=TEMPLATE,
            extractor=Extractor(retries=2),
            concurrency=4,
            rpm=600,  # a tenth of a second apart
        )
        if sync:
            results = list(run)
        else:

            async def read(run: Any = run) -> list[Any]:
                return [result async for result in run]

            results = asyncio.run(read())
        assert [r.failure.kind for r in results if r.failure] == ["extraction_parse"] * 4
        assert run.summary.passes == 12 and len(server.times) == 12
        # Twelve turns a tenth of a second apart, not four turns of three calls at once (the
        # inputs' first calls may arrive late: the first use of the type, new connections).
        arrived = sorted(server.times)
        assert arrived[-1] - began >= 1.1
        gaps = [later - earlier for earlier, later in itertools.pairwise(arrived[4:])]
        # Spaced, not sent together: a call its turn let go late (a busy machine) leaves
        # the next one's gap short, the schedule being the limiter's, not the last call's.
        assert sum(gaps) >= 0.6 and min(gaps) > 0.01, gaps


def test_a_sync_run_closed_while_a_retry_waits_for_its_turn_makes_no_more_calls(
    server: BatchServer,
) -> None:
    run = allama.batch(
        provider_for(server),
        Row,
        ["doc 7", "doc 8"],  # doc 7 answers no JSON: its retry waits for its turn
        request=TEMPLATE,
        extractor=Extractor(retries=2),
        rpm=6,  # ten seconds apart
    )
    threading.Timer(1.0, run.close).start()
    list(run)
    time.sleep(2.0)  # past a worker's look at the closed loop
    assert server.sent[7] == 1


def test_a_sync_run_interrupted_while_it_starts_is_closed_and_sends_nothing(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C while the run's thread makes its loop: the caller gets its KeyboardInterrupt,
    # and the run ends with it, rather than going on with every input in the background.
    gate = threading.Event()
    made = asyncio.new_event_loop

    def slow_to_start() -> asyncio.AbstractEventLoop:
        if threading.current_thread().name == "allama-batch-run":
            gate.wait(10)
        return made()

    def interrupt(*_: object) -> None:
        gate.set()  # the run's thread goes on as the interrupt reaches the caller
        raise KeyboardInterrupt

    monkeypatch.setattr(asyncio, "new_event_loop", slow_to_start)
    earlier = set(threading.enumerate())  # (other tests' threads that end on their own)
    before = signal.signal(signal.SIGALRM, interrupt)
    try:
        run = allama.batch(
            provider_for(server), Row, docs(20), request=TEMPLATE, ledger=tmp_path / "l.sqlite"
        )
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            list(run)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    time.sleep(0.5)  # what a run left going would send by now
    assert sum(server.sent.values()) == 0
    left = [t.name for t in threading.enumerate() if t not in earlier]
    assert not [name for name in left if name.startswith("allama-batch")]
    assert run.summary.done == 0


def test_a_sync_run_interrupted_inside_its_threads_start_does_nothing_when_it_begins(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The interrupt lands in `Thread.start`, before the run's thread counts as alive: the
    # run is closed with no loop to cancel, and the thread, when it begins, finds it
    # closed. It sends nothing and writes no failure to the ledger.
    start = threading.Thread.start
    late: list[threading.Timer] = []

    def interrupted_start(thread: threading.Thread) -> None:
        if thread.name != "allama-batch-run":
            return start(thread)
        late.append(threading.Timer(0.2, start, (thread,)))
        late[0].start()
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    earlier = set(threading.enumerate())
    ledger = tmp_path / "l.sqlite"
    run = allama.batch(provider_for(server), Row, docs(20), request=TEMPLATE, ledger=ledger)
    with pytest.raises(KeyboardInterrupt):
        list(run)
    late[0].join()
    time.sleep(0.5)  # the thread begins, and ends
    assert sum(server.sent.values()) == 0
    left = [t.name for t in threading.enumerate() if t not in earlier and t.is_alive()]
    assert not [name for name in left if name.startswith("allama-batch")]
    assert _ledger_rows(ledger) == {}


def test_a_sync_run_closed_by_a_function_of_its_own_ends_without_an_error(
    tmp_path: Path,
) -> None:
    # A request builder runs on the run's own thread: its `close` cannot wait for that
    # thread to end, and is no failure of the input it was building.
    holder: list[Any] = []

    def answer(request: ChatRequest) -> ChatResponse:
        return ChatResponseBuilder().text('{"n": 1}').build()

    def build(doc: str) -> ChatRequest:
        if doc == "doc 3":
            holder[0].close()
        return ChatRequest("m").user(doc)

    run = allama.batch(
        allama.mock.FunctionProvider(answer),
        Row,
        [f"doc {n}" for n in range(20)],
        request=build,
        concurrency=2,
        ledger=tmp_path / "l.sqlite",
    )
    holder.append(run)
    results = list(run)
    assert [r.failure.error for r in results if r.failure is not None] == []
    time.sleep(0.3)
    assert not [r for r in _ledger_rows(tmp_path / "l.sqlite").values() if r[0] == "failed"]


def test_a_sync_run_closed_before_a_repair_takes_its_turn_leaves_no_coroutine_unawaited(
    server: BatchServer,
) -> None:
    # Doc 7 answers no JSON after a moment; the run is closed before: the repair's turn is
    # never taken, and nothing is left to warn of a coroutine never awaited.
    slow = BatchServer(delay=0.6).start()
    try:
        run = allama.batch(
            provider_for(slow), Row, ["doc 7"], request=TEMPLATE, extractor=Extractor(retries=1)
        )
        threading.Timer(0.3, run.close).start()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            list(run)
            time.sleep(1.0)  # the call's answer, and the worker's look at the closed loop
            gc.collect()
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
        assert slow.sent[7] == 1
    finally:
        slow.stop()


def test_calls_of_extractions_in_flight_when_the_run_stops_keep_the_rate(
    server: BatchServer,
) -> None:
    # Documents 7, 57, ... answer no JSON: three calls each, a quarter of a second apart.
    run = allama.batch(
        provider_for(server),
        Row,
        [f"doc {n}" for n in (7, 57, 107, 157)],
        request=TEMPLATE,
        extractor=Extractor(retries=2),
        concurrency=4,
        rpm=240,
    )

    def stop_after_the_first_send() -> None:
        # Timed from the run's first request, not from the test's start: a busy machine
        # may take longer to start the run than the turns the test counts on.
        deadline = time.monotonic() + 30
        while not server.times and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.6)
        run.stop()

    threading.Thread(target=stop_after_the_first_send, daemon=True).start()
    results = list(run)
    started = [r for r in results if outcome(r) != "not_started"]
    assert len(results) == 4 and len(started) >= 2
    assert len(server.times) == 3 * len(started)  # what was in flight finished
    arrived = sorted(server.times)
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrived[2:])]
    assert min(gaps) > 0.15, gaps  # spaced at the rate still, not sent together


def test_a_connection_broken_on_one_input_while_others_are_answered_is_its_own(
    server: BatchServer,
) -> None:
    inputs = [f"doc {n}" for n in range(60) if n % 10 != 3]
    inputs.insert(5, "doc 3, cut off")
    run = allama.batch(
        provider_for(server), Row, inputs, request=TEMPLATE, concurrency=4, backoff=0.01
    )
    results = list(run)
    assert run.summary.stopped is None and len(results) == len(inputs)
    [broken] = [r for r in results if r.failure is not None and r.failure.kind == "network"]
    assert broken.label == "#5" and broken.attempts == 5
    # A provider that answers nothing stops the run, as before.
    down = allama.provider("openai", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    stopped = allama.batch(down, Row, docs(40), request=TEMPLATE, concurrency=2, backoff=0.01)
    list(stopped)
    assert stopped.summary.stopped is not None
    assert stopped.summary.stopped.startswith("the provider could not be reached in 5 tries")


def test_one_input_whose_connection_breaks_at_one_in_flight_does_not_stop_the_run(
    server: BatchServer, tmp_path: Path
) -> None:
    # At one in flight nothing else is answered while an input is tried: one input alone
    # is no outage. Its outcome waits while the inputs after it are sent; one answered
    # makes the broken connection its own, a failure as any other, which a run again
    # gives back from the ledger without sending it.
    inputs = ["doc 0", "doc 1", "doc 3, cut off", "doc 4", "doc 5"]
    ledger = tmp_path / "run.sqlite"
    for again in (False, True):
        run = allama.batch(
            provider_for(server),
            Row,
            inputs,
            request=TEMPLATE,
            ledger=ledger,
            concurrency=1,
            max_attempts=1,
        )
        results = sorted(run, key=lambda r: r.index)
        assert (run.summary.stopped, run.summary.refused) == (None, None)
        assert [(outcome(r), r.pending, r.resumed) for r in results] == [
            *[("ok", False, again)] * 2,
            ("network", False, again),
            *[("ok", False, again)] * 2,
        ]
        assert server.sent[3] == 1 and server.sent[4] == 1 and server.sent[5] == 1
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT status FROM items WHERE label = '#2'").fetchone() == ("failed",)
    # Two inputs that meet it with nothing answered meanwhile: an outage, which stops it.
    down = allama.provider("openai", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    stopped = allama.batch(down, Row, docs(10), request=TEMPLATE, concurrency=1, max_attempts=1)
    results = sorted(stopped, key=lambda r: r.index)
    assert stopped.summary.stopped is not None
    assert stopped.summary.stopped.startswith("the provider could not be reached in 1 try:")
    assert [outcome(r) for r in results[:2]] == ["network"] * 2
    assert {outcome(r) for r in results[2:]} <= {"not_started"}
    assert (stopped.summary.failed, stopped.summary.not_started) == (2, 8)


def test_an_input_whose_connection_breaks_last_stays_pending_and_says_a_stop(
    server: BatchServer, tmp_path: Path
) -> None:
    # Nothing is answered after it was first sent: nothing tells its trouble from an
    # outage. Its copy waits for it, and is given its outcome.
    inputs = ["doc 0", "doc 1", "doc 3, cut off", "doc 3, cut off"]
    ledger = tmp_path / "run.sqlite"
    for _ in range(2):
        run = allama.batch(
            provider_for(server),
            Row,
            inputs,
            request=TEMPLATE,
            ledger=ledger,
            concurrency=1,
            max_attempts=2,
            backoff=0.01,
        )
        results = sorted(run, key=lambda r: r.index)
        assert run.summary.refused == "network" and run.summary.stopped is not None
        assert run.summary.stopped.startswith("the provider could not be reached in 2 tries")
        assert [(outcome(r), r.pending, r.duplicate) for r in results[2:]] == [
            ("network", True, False),
            ("network", True, True),
        ]
    assert server.sent[3] == 4  # two tries in each run: pending, sent again
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT status, attempts FROM items WHERE label = '#2'").fetchone() == (
            "pending",
            4,
        )


def test_a_suspect_under_a_budget_waits_out_of_its_slot(
    server: BatchServer, tmp_path: Path
) -> None:
    # Under a budget an outcome is recorded before the slot is given back; the suspect's
    # waits for the inputs after it, which need the one slot. Its connection cannot be
    # made, which costs nothing: one cut off after the request went out whole may be
    # billed, at a cost unknown, where a budget stops the run.
    from allama.adapters._http import HttpRequest, HttpResponse
    from allama.errors import NetworkError
    from allama.transport import Transport

    class NoConnection(Transport):
        def send(self, request: HttpRequest) -> HttpResponse:
            if b"cut off" in request.content:
                raise NetworkError("could not connect to the server (ConnectError)")
            return super().send(request)

    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        allama.provider("openai", api_key="sk-test", base_url=server.url, transport=NoConnection()),
        Row,
        ["doc 3, cut off", "doc 4", "doc 5"],
        request=TEMPLATE,
        ledger=ledger,
        concurrency=1,
        max_attempts=1,
        max_cost=Decimal(100),
    )
    results = sorted(run, key=lambda r: r.index)
    assert [(outcome(r), r.pending) for r in results] == [
        ("network", False),
        ("ok", False),
        ("ok", False),
    ]
    assert run.summary.stopped is None
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT status FROM items WHERE label = '#0'").fetchone() == ("failed",)


def test_a_run_stopped_while_its_suspect_waits_leaves_it_pending(tmp_path: Path) -> None:
    from allama.mock import FunctionProvider

    runs: list[allama.BatchRun[Row]] = []

    def answer(request: ChatRequest) -> ChatResponse:
        if "broken" in request.messages[-1].text():  # type: ignore[union-attr]
            raise allama.NetworkError("connection reset")
        runs[0].stop("enough for today")  # while the suspect waits for its verdict
        return ChatResponseBuilder().text('{"n": 1}').usage(1, 1).build()

    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        FunctionProvider(answer, name="custom"),
        Row,
        ["broken", "doc 1", "doc 2"],
        request=TEMPLATE,
        ledger=ledger,
        concurrency=1,
        max_attempts=1,
    )
    runs.append(run)
    results = sorted(run, key=lambda r: r.index)
    assert [(outcome(r), r.pending) for r in results] == [
        ("network", True),
        ("ok", False),
        ("not_started", False),
    ]
    assert run.summary.stopped == "enough for today" and run.summary.refused is None
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT status FROM items WHERE label = '#0'").fetchone() == ("pending",)


def _ended_within(run: Any, seconds: float = 20.0) -> list[allama.BatchResult[Any]]:
    """The results of a sync run, read in a thread: a run that hangs fails the test."""
    got: list[allama.BatchResult[Any]] = []
    reader = threading.Thread(target=lambda: got.extend(run), daemon=True)
    reader.start()
    reader.join(seconds)
    assert not reader.is_alive(), "the run did not end"
    return sorted(got, key=lambda r: r.index)


def _broken_on(*texts: str) -> Any:
    from allama.mock import FunctionProvider

    def answer(request: ChatRequest) -> ChatResponse:
        if request.messages[-1].text() in texts:  # type: ignore[union-attr]
            raise allama.NetworkError("connection broken")
        return ChatResponseBuilder().text('{"n": 1}').usage(5, 5).build()

    return FunctionProvider(answer, name="custom")


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_suspect_and_its_copies_give_their_places_ahead_to_the_inputs_after_them(
    concurrency: int,
) -> None:
    # The places ahead (twice the concurrency) all held by the suspect and its copies:
    # the input after them, which answers it, was never read.
    inputs = ["bad"] * (2 * concurrency) + ["good"]
    run = allama.batch(
        _broken_on("bad"),
        Row,
        inputs,
        request=TEMPLATE,
        concurrency=concurrency,
        max_attempts=2,
        backoff=0.01,
    )
    results = _ended_within(run)
    assert [(outcome(r), r.duplicate) for r in results] == [
        ("network", False),
        *[("network", True)] * (2 * concurrency - 1),
        ("ok", False),
    ]
    assert run.summary.stopped is None


def test_a_copy_of_a_suspect_read_last_ends_the_run() -> None:
    def documents() -> Iterator[str]:
        yield "bad"
        time.sleep(0.3)  # the suspect waits for its verdict meanwhile
        yield "bad"

    run = allama.batch(
        _broken_on("bad"),
        Row,
        documents(),
        request=TEMPLATE,
        concurrency=8,
        max_attempts=2,
        backoff=0.01,
    )
    results = _ended_within(run)
    assert [(outcome(r), r.duplicate) for r in results] == [
        ("network", False),
        ("network", True),
    ]
    assert run.summary.refused == "network"

    async def at_once() -> list[allama.BatchResult[Row]]:
        # A call that fails without yielding to the loop: the suspect waits before its
        # copy's task has begun.
        arun = allama.abatch(
            _broken_on("bad"), Row, ["bad", "bad"], request=TEMPLATE, max_attempts=2, backoff=0.01
        )
        return [r async for r in arun]

    both = asyncio.run(asyncio.wait_for(at_once(), 20))
    assert sorted(outcome(r) for r in both) == ["network", "network"]

    async def one_after_another() -> list[allama.BatchResult[Row]]:
        # The first suspect judged (answered after it), a second one waiting before the
        # first resumes: the first leaves the second's verdict be.
        arun = allama.abatch(
            _broken_on("bad1", "bad2"),
            Row,
            ["bad1", "good", "bad2"],
            request=TEMPLATE,
            concurrency=2,
            max_attempts=1,
        )
        return sorted([r async for r in arun], key=lambda r: r.index)

    ended = asyncio.run(asyncio.wait_for(one_after_another(), 20))
    assert [outcome(r) for r in ended] == ["network", "ok", "network"]


def test_a_pass_answered_after_a_suspects_last_call_makes_its_trouble_its_own(
    tmp_path: Path,
) -> None:
    from allama.mock import FunctionProvider

    calls: dict[str, int] = {}

    def answer(request: ChatRequest) -> ChatResponse:
        first = request.messages[1].text() or ""  # type: ignore[union-attr]  # the document
        calls[first] = calls.get(first, 0) + 1
        if first == "bad" or calls[first] > 1:
            raise allama.NetworkError("connection broken")
        return ChatResponseBuilder().text("no JSON here").usage(5, 5).build()

    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        FunctionProvider(answer, name="custom"),
        Row,
        ["bad", "asked again"],
        request=TEMPLATE,
        ledger=ledger,
        extractor=Extractor(retries=1),
        concurrency=1,
        max_attempts=1,
    )
    results = _ended_within(run)
    # "bad" alone met it; the next input's first pass was answered after: its own. That
    # input's own next call broke, nothing answered after it: pending, no stop (its first
    # pass was answered since it was first sent).
    assert [(outcome(r), r.pending) for r in results] == [("network", False), ("network", True)]
    assert (run.summary.stopped, run.summary.refused) == (None, None)
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT status FROM items ORDER BY position").fetchall() == [
            ("failed",),
            ("pending",),
        ]


def test_a_provider_out_of_reach_for_one_input_alone_is_said_as_a_stop(tmp_path: Path) -> None:
    down = allama.provider("openai", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    run = allama.batch(
        down, Row, ["doc 1"], request=TEMPLATE, ledger=tmp_path / "run.sqlite", backoff=0.01
    )
    (result,) = list(run)
    assert result.pending and outcome(result) == "network"
    assert run.summary.refused == "network"  # the command's exit 1, not a run that ended
    assert run.summary.stopped is not None
    assert run.summary.stopped.startswith("the provider could not be reached in 5 tries")


@pytest.mark.parametrize("concurrency", [2, 8])
def test_an_outage_that_begins_mid_run_fails_no_input_for_good(
    tmp_path: Path, concurrency: int
) -> None:
    from allama.mock import FunctionProvider

    answered = itertools.count()

    def answer(request: ChatRequest) -> ChatResponse:
        if next(answered) >= 6:  # then every call meets a provider gone
            raise allama.NetworkError("could not connect")
        return ChatResponseBuilder().text('{"n": 1}').usage(1, 1).build()

    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        FunctionProvider(answer, name="custom"),
        Row,
        docs(30),
        request=TEMPLATE,
        ledger=ledger,
        concurrency=concurrency,
        backoff=0,
        max_attempts=3,
    )
    results = list(run)
    assert run.summary.stopped is not None and run.summary.refused == "network"
    # Those first sent before it began, and tried again in it, met the outage too.
    assert {(outcome(r), r.pending) for r in results} <= {
        ("ok", False),
        ("network", True),
        ("not_started", False),
    }
    with sqlite3.connect(ledger) as db:
        assert {status for (status,) in db.execute("SELECT status FROM items")} <= {
            "done",
            "pending",
        }


def test_an_input_that_meets_100_rate_limits_fails_with_the_last() -> None:
    from allama.batch._run import _retry_step, _Tries
    from allama.errors import RateLimitedError

    tries = _Tries(attempts=1, estimate=0)
    steps = []
    for _ in range(100):
        tries.tried += 1  # each a send
        steps.append(_retry_step(RateLimitedError("slow down"), tries, max_attempts=5))
    assert steps == [True] * 99 + [False]  # sent again 99 times: 100 met
    assert tries.limited == 100 and tries.tried == 0  # none counted as a try


def test_inputs_that_are_no_iterable_are_refused_at_once(server: BatchServer) -> None:
    for inputs in (42, None):
        with pytest.raises(TypeError, match="inputs must be an iterable of documents"):
            allama.batch(provider_for(server), Row, inputs, request=TEMPLATE)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="inputs must be an iterable of documents"):
            allama.abatch(provider_for(server), Row, inputs, request=TEMPLATE)  # type: ignore[arg-type]


def test_a_run_stopped_or_closed_before_it_is_read(server: BatchServer) -> None:
    taken: list[int] = []

    def documents() -> Iterator[str]:
        for n in range(50):
            taken.append(n)
            yield f"doc {n}"

    run = allama.batch(provider_for(server), Row, documents(), request=TEMPLATE)
    run.stop("not today")
    assert list(run) == [] and taken == []  # nothing read, nothing sent
    assert run.summary.stopped == "not today" and not server.sent
    closed = allama.batch(provider_for(server), Row, docs(5), request=TEMPLATE)
    closed.close()
    with pytest.raises(RuntimeError, match="or the run was closed"):
        list(closed)
    assert not server.sent

    async def aclosed() -> None:
        arun = allama.abatch(provider_for(server), Row, docs(5), request=TEMPLATE)
        await arun.aclose()
        with pytest.raises(RuntimeError, match="or the run was closed"):
            [r async for r in arun]

    asyncio.run(aclosed())
    assert not server.sent


def test_a_cancelled_error_of_the_callers_own_code_fails_its_input(server: BatchServer) -> None:
    def build(document: str) -> ChatRequest:
        if document == "doc 2":
            raise asyncio.CancelledError("the caller's own")
        return TEMPLATE.user(document)

    results = sorted(
        allama.batch(provider_for(server), Row, docs(4), request=build), key=lambda r: r.index
    )
    assert [r.index for r in results] == [0, 1, 2, 3]
    assert results[2].failure is not None and results[2].failure.kind == "CancelledError"

    def documents() -> Iterator[str]:
        yield "doc 1"
        raise asyncio.CancelledError("a cursor's own")

    run = allama.batch(provider_for(server), Row, documents(), request=TEMPLATE)
    with pytest.raises(RuntimeError, match="reading the inputs raised CancelledError"):
        list(run)
    assert run.summary.done + run.summary.not_started == 1  # read: accounted for


def test_an_async_iterator_of_plain_futures_is_read() -> None:
    class Futures:
        """`async for` reads it: `__anext__` returns futures, and ends by raising."""

        def __init__(self) -> None:
            self.left = ["doc 1", "doc 2"]

        def __aiter__(self) -> Futures:
            return self

        def __anext__(self) -> asyncio.Future[str]:
            if not self.left:
                raise StopAsyncIteration
            future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            future.set_result(self.left.pop(0))
            return future

    async def run() -> list[int]:
        mock = allama.mock.MockProvider(['{"n": 1}', '{"n": 2}'])
        arun = allama.abatch(mock, Row, Futures(), request=TEMPLATE, concurrency=1)
        return [r.value.n async for r in arun if r.value is not None]

    assert asyncio.run(run()) == [1, 2]


def test_a_model_not_found_is_each_inputs_own_when_a_function_builds_the_requests(
    server: BatchServer,
) -> None:
    server.refusing = "model"
    # A function may name another model for each input: one it does not find stops nothing.
    run = allama.batch(provider_for(server), Row, docs(6), request=lambda d: TEMPLATE.user(d))
    results = list(run)
    assert [outcome(r) for r in results] == ["not_found"] * 6
    assert run.summary.stopped is None and run.summary.refused is None


def test_a_try_again_that_waits_for_its_turn_when_the_run_stops_is_not_sent(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    # doc 3 answers 503 the first time; at 60 a minute its next try waits a second.
    run = allama.batch(
        provider_for(server), Row, ["doc 3"], request=TEMPLATE, ledger=ledger, rpm=60, backoff=0
    )
    threading.Timer(0.3, run.stop).start()
    (result,) = list(run)
    assert outcome(result) == "overloaded" and server.sent[3] == 1
    assert run.summary.stopped == "stopped by the caller"
    # Pending for the next run, with the error it met.
    (row,) = Ledger(ledger, settings={}).rows()
    assert row.status == "pending" and row.error is not None
    assert row.error["kind"] == "overloaded"
    # One send, one attempt: the try that was never sent is not counted.
    assert (result.attempts, row.attempts, run.summary.attempts) == (1, 1, 1)


def test_a_stop_that_names_an_input_is_printed_with_its_label_escaped() -> None:
    # A label is the caller's data: the stop's reason that names it says it as it is, and
    # the summary's line writes its control characters escaped, as the label's own lines.
    summary = allama.BatchSummary(
        stopped="the cost of X\x1b[2JY is unknown (no price): the budget of $1 cannot be kept"
    )
    assert summary.lines()[-1] == (
        "stopped starting new inputs: the cost of X\\x1b[2JY is unknown (no price): "
        "the budget of $1 cannot be kept"
    )
    summary = allama.BatchSummary(budget_reached="the budget of $1 is reached (\u202e$2)")
    assert summary.lines()[-1] == (
        "the budget of $1 is reached (\\u202e$2), with nothing left to send"
    )


def _paid_choice_error() -> Exception:
    """A call that failed on its choice, with the tokens it paid for: no pass made."""
    from allama.errors import REPORTED_USAGE_KEY, InvalidRequestError

    error = InvalidRequestError("the choice failed")
    return error.with_metadata(REPORTED_USAGE_KEY, {"input_tokens": 100, "output_tokens": 10})


def _taken_over_later(ledger: Path, label: str = "#0", seconds: float = 0.5) -> None:
    """After `seconds`, another run of the ledger takes the input over, having seen this
    one as ended (a heartbeat it read as stale): it counts an attempt, and sends it."""

    def take_over() -> None:
        with contextlib.closing(sqlite3.connect(ledger)) as db, db:
            db.execute(
                "UPDATE items SET run_id = 'another', attempts = attempts + 1 WHERE label = ?",
                (label,),
            )

    threading.Timer(seconds, take_over).start()


def test_a_paid_failure_of_unknown_cost_is_said_and_stops_a_budget() -> None:
    request = ChatRequest("a-model-of-our-own").system("Read the number.")
    errors = [_paid_choice_error() for _ in range(3)]
    provider = allama.mock.MockProvider(errors, name="openai")
    run = allama.batch(provider, Row, ["a", "b"], request=request, concurrency=1)
    assert [outcome(r) for r in run] == ["invalid_request"] * 2
    assert (run.summary.passes, run.summary.input_tokens) == (0, 200)
    assert run.summary.cost_unknown == 2
    assert any(line.startswith("cost unknown (") for line in run.summary.lines())
    # Under a budget: its cost cannot be counted, so the budget cannot be kept.
    limited = allama.batch(provider, Row, ["c", "d"], request=request, concurrency=1, max_cost="5")
    assert [outcome(r) for r in limited] == ["invalid_request", "not_started"]
    assert limited.summary.stopped is not None
    assert limited.summary.stopped.startswith("the cost of #0 is unknown (")


def test_an_input_another_run_took_over_is_not_sent_again_from_here(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    # doc 3 is answered 503 first: it waits to be sent again. Meanwhile another run of the
    # ledger takes it over, having seen this one as ended (a heartbeat it read as stale,
    # on a host whose clock runs ahead): it counts an attempt, and sends it itself.
    run = allama.batch(
        provider_for(server), Row, ["doc 3"], request=TEMPLATE, ledger=ledger, backoff=2.0
    )

    _taken_over_later(ledger)
    (result,) = list(run)
    # Not sent again from here: the provider has it no more often than its attempts say.
    assert result.failure is not None and result.failure.kind == "in_flight_elsewhere"
    assert server.sent[3] == 1 and result.attempts == 1
    ((attempts, owner),) = sqlite3.connect(ledger).execute("SELECT attempts, run_id FROM items")
    assert (attempts, owner) == (2, "another")
    assert (run.summary.elsewhere, run.summary.attempts, run.summary.failed) == (1, 1, 0)


@pytest.mark.parametrize(("doc", "cost"), [("doc 1", "0.000021"), ("doc 13", "0")])
def test_an_input_taken_over_while_its_call_was_in_flight_gives_no_outcome_from_here(
    server: BatchServer, tmp_path: Path, doc: str, cost: str
) -> None:
    # doc 1 is answered, doc 13 refused (400): either after another run took it over.
    ledger = tmp_path / "run.sqlite"
    server.delay = 1.0
    run = allama.batch(provider_for(server), Row, [doc], request=TEMPLATE, ledger=ledger)
    _taken_over_later(ledger)
    (result,) = list(run)
    # The ledger holds the outcome of the run that took it over, not this one's: this one
    # says so, with what its call paid, rather than give what the ledger does not hold.
    assert result.failure is not None and result.failure.kind == "in_flight_elsewhere"
    assert result.failure.message.endswith("the ledger holds that run's outcome, not this one's")
    assert result.value is None and run.summary.cost == Decimal(cost)
    ((status, owner),) = sqlite3.connect(ledger).execute("SELECT status, run_id FROM items")
    assert (status, owner) == ("in_flight", "another")
    assert (run.summary.done, run.summary.failed, run.summary.elsewhere) == (0, 0, 1)


def test_a_budget_reached_by_the_last_input_of_an_iterable_is_no_stop_whatever_total_says(
    server: BatchServer,
) -> None:
    # $0.000021 a call: the third, the last, reaches $0.00006. A `total` larger than the
    # inputs that came does not make up inputs left unsent.
    options: dict[str, Any] = {"request": TEMPLATE, "concurrency": 1, "max_cost": "0.00006"}
    for inputs in (iter(docs(3)), docs(3)):
        run = allama.batch(provider_for(server), Row, inputs, total=5, **options)
        assert [outcome(r) for r in run] == ["ok"] * 3
        assert (run.summary.stopped, run.summary.not_started) == (None, 0)
        assert run.summary.budget_reached == "the budget of $0.00006 is reached ($0.000063)"


def test_a_retry_the_budget_held_back_is_a_stop_without_a_ledger_too(
    server: BatchServer,
) -> None:
    # doc 3 is answered 503 and waits to be sent again; doc 1's value reaches the budget
    # meanwhile, and doc 3 is not tried again: held back, though no ledger keeps it pending.
    run = allama.batch(
        provider_for(server),
        Row,
        ["doc 3", "doc 1"],
        request=TEMPLATE,
        concurrency=1,
        max_cost="0.00002",
        backoff=1.0,
    )
    results = sorted(run, key=lambda r: r.index)
    assert [outcome(r) for r in results] == ["overloaded", "ok"]
    assert run.summary.stopped == "the budget of $0.00002 is reached ($0.000021)"
    assert run.summary.budget_reached is None and server.sent[3] == 1


def test_a_stop_asked_after_the_run_ended_changes_nothing(server: BatchServer) -> None:
    run = allama.batch(provider_for(server), Row, docs(2), request=TEMPLATE)
    assert [outcome(r) for r in run] == ["ok", "ok"]
    run.stop()
    assert run.summary.stopped is None
    assert all("stopped" not in line for line in run.summary.lines())


def test_a_paid_failure_of_unknown_cost_an_earlier_run_kept_stops_a_budget(
    tmp_path: Path,
) -> None:
    request = ChatRequest("a-model-of-our-own").system("Read the number.")
    ledger = tmp_path / "run.sqlite"
    provider = allama.mock.MockProvider([_paid_choice_error()], name="openai")
    first = allama.batch(provider, Row, ["a"], request=request, ledger=ledger)
    assert [outcome(r) for r in first] == ["invalid_request"]
    # What it paid has no known price: a budget over the same job cannot be kept.
    again = allama.batch(provider, Row, ["a", "b"], request=request, ledger=ledger, max_cost="5")
    assert sorted(outcome(r) for r in again) == ["invalid_request", "not_started"]
    assert again.summary.stopped is not None
    assert again.summary.stopped.startswith("the cost of inputs earlier runs sent is unknown (")


def test_what_an_input_taken_over_paid_here_counts_toward_the_budget(
    server: BatchServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "run.sqlite"
    # doc 1 is answered with no JSON (a paid pass, then a repair), then 503: it waits to be
    # sent again, and another run takes it over meanwhile. doc 2 is sent in the wait.
    run = allama.batch(
        provider_for(server),
        Row,
        ["doc 1, flaky", "doc 2"],
        request=TEMPLATE,
        ledger=ledger,
        concurrency=1,
        backoff=2.0,
        max_cost="0.00004",
        extractor=Extractor(retries=1),
    )

    _taken_over_later(ledger, seconds=1.0)
    results = sorted(run, key=lambda r: r.index)
    # The pass doc 1 paid in this run counted toward the budget when its attempt failed:
    # with doc 2's, the budget is reached before doc 1 is sent again, and it is left
    # pending (to whichever run takes it over) rather than tried again past the budget.
    assert [(outcome(r), r.pending) for r in results] == [("overloaded", True), ("ok", False)]
    assert run.summary.cost == Decimal("0.000042")
    assert run.summary.stopped == "the budget of $0.00004 is reached ($0.000042)"
    assert server.sent[1] == 2  # the pass, and the ask again answered 503: no more


def test_a_failure_keeps_the_providers_words_out_of_its_repr_and_in_the_ledger(
    server: BatchServer, tmp_path: Path
) -> None:
    # "doc 13" is refused with a 400 whose message the provider wrote: kept for the caller
    # who asks (`provider_message`), in the ledger too, never in the log view or a repr.
    ledger = tmp_path / "ledger.sqlite"
    inputs = ["doc 13"]
    (first,) = allama.batch(provider_for(server), Row, inputs, request=TEMPLATE, ledger=ledger)
    assert first.failure is not None
    assert first.failure.provider_message == "bad document"
    assert "bad document" not in repr(first.failure) + first.failure.message
    (again,) = allama.batch(provider_for(server), Row, inputs, request=TEMPLATE, ledger=ledger)
    assert again.resumed and again.failure is not None
    assert (again.failure.kind, again.failure.provider_message) == (
        "invalid_request",
        "bad document",
    )
    # allama's own words are no provider's.
    (parse,) = allama.batch(provider_for(server), Row, ["doc 7"], request=TEMPLATE)
    assert parse.failure is not None and parse.failure.provider_message is None


def test_an_error_whose_message_is_no_text_fails_its_input_not_the_run(tmp_path: Path) -> None:
    from allama.mock import FunctionProvider

    # A provider of the caller's own raising one of allama's errors with bytes for its
    # message: that input fails, with the bytes read as UTF-8 as the words, and the run
    # goes on.
    def answer(request: ChatRequest) -> ChatResponse:
        if "doc 1" in request.model_dump_json():
            raise allama.InvalidRequestError(b"bad document \xff")  # type: ignore[arg-type]
        return ChatResponseBuilder().text('{"n": 0}').usage(1, 1).build()

    provider = FunctionProvider(answer, name="custom")
    ledger = tmp_path / "ledger.sqlite"
    inputs = ["doc 0", "doc 1", "doc 2"]
    results = sorted(
        allama.batch(provider, Row, inputs, request=TEMPLATE, ledger=ledger),
        key=lambda result: result.index,
    )
    assert [outcome(result) for result in results] == ["ok", "invalid_request", "ok"]
    failure = results[1].failure
    assert failure is not None and failure.provider_message == "bad document \ufffd"
    assert failure.message == "invalid_request (14 chars withheld)"


def test_a_providers_message_that_utf8_cannot_hold_fails_its_input_not_the_run(
    tmp_path: Path,
) -> None:
    import httpx2

    from allama.transport import Transport

    # JSON may spell a lone surrogate (`\ud800`), which no UTF-8 text holds: the ledger keeps
    # the provider's words with U+FFFD in its place, and the run goes on.
    def answer(request: httpx2.Request) -> httpx2.Response:
        if b"doc 1" in request.content:
            body = b'{"error": {"message": "bad \\ud800 doc", "type": "invalid_request"}}'
            return httpx2.Response(400, content=body)
        return httpx2.Response(200, json=_completion("gpt-4o-mini", json.dumps({"n": 0})))

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    provider = allama.provider("openai", api_key="sk-test", transport=transport)
    ledger = tmp_path / "ledger.sqlite"
    results = sorted(
        allama.batch(provider, Row, ["doc 0", "doc 1"], request=TEMPLATE, ledger=ledger),
        key=lambda result: result.index,
    )
    assert [outcome(result) for result in results] == ["ok", "invalid_request"]
    failure = results[1].failure
    assert failure is not None and failure.provider_message == "bad \ufffd doc"
    (again,) = allama.batch(provider, Row, ["doc 1"], request=TEMPLATE, ledger=ledger)
    assert again.resumed and again.failure is not None
    assert again.failure.provider_message == "bad \ufffd doc"


def test_the_ledger_names_the_type_as_written(tmp_path: Path) -> None:
    # `status` and `export --set` name a run's type by it: `list`, or a module's path, hid
    # which of two sets was which.
    ledger = tmp_path / "run.sqlite"
    for tp in (list[Row], Row | None, Annotated[Row, Field(title="R")], Row):
        answer = '{"n": 1}' if tp is not list[Row] else '[{"n": 1}]'
        provider = allama.mock.MockProvider.with_text(answer)
        list(allama.batch(provider, tp, ["doc 1"], request=TEMPLATE, ledger=ledger))
    runs = Ledger(ledger, read_only=True).runs()
    assert [entry["settings"]["type"] for entry in runs] == [
        "list[Row]",
        "Row | None",
        "Row",
        "Row",
    ]


def test_an_async_generators_steps_run_in_one_task_and_context(server: BatchServer) -> None:
    # As under `async for`: a context variable it sets (a span), and the task it runs in
    # (a cancel scope's), stay the same from one `yield` to the next.
    chosen: contextvars.ContextVar[str] = contextvars.ContextVar("chosen", default="unset")
    seen = []

    async def documents() -> AsyncIterator[str]:
        chosen.set("set")
        task = asyncio.current_task()
        for text in docs(8):
            seen.append((chosen.get(), asyncio.current_task() is task))
            yield text

    async def main() -> list[allama.BatchResult[Row]]:
        run = allama.abatch(provider_for(server), Row, documents(), request=TEMPLATE, concurrency=2)
        return [r async for r in run]

    results = asyncio.run(main())
    assert seen == [("set", True)] * 8
    assert sorted(r.index for r in results) == list(range(8))


def test_a_timeout_around_an_async_generators_yields_ends_its_inputs(server: BatchServer) -> None:
    async def documents() -> AsyncIterator[str]:
        async with asyncio.timeout(0.5):
            for text in docs(20):
                yield text
                await asyncio.sleep(0.2)

    results: list[allama.BatchResult[Row]] = []

    async def main() -> None:
        run = allama.abatch(provider_for(server), Row, documents(), request=TEMPLATE)
        async for result in run:
            results.append(result)

    with pytest.raises(TimeoutError):  # what the generator raised, once the run has ended
        asyncio.run(main())
    read = sorted(r.index for r in results)
    assert read in ([0, 1, 2], [0, 1])  # yielded at 0, 0.2 and 0.4 s, on a busy machine later
    assert sum(server.sent.values()) == len(read)


class _SlowToCancel(TestProvider):
    """A call that takes 1 s to clean up when cancelled (a transport closing politely)."""

    async def achat(self, request: ChatRequest) -> ChatResponse:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(1.0)
            raise
        return self.chat(request)


def test_a_cancellation_of_the_task_closing_a_run_is_raised() -> None:
    async def main() -> tuple[bool, float]:
        run = allama.abatch(_SlowToCancel(), Row, docs(4), request=TEMPLATE, concurrency=2)
        reader = asyncio.create_task(aiter(run).__anext__())
        await asyncio.sleep(0.1)  # the calls are in flight
        began = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.2):  # a timeout around the close is a timeout
                await run.aclose()
                return False, 0.0
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await reader
        return True, time.monotonic() - began

    timed_out, waited = asyncio.run(main())
    assert timed_out and waited < 0.9


@pytest.mark.parametrize("where", ["thread", "signal handler"])
def test_an_async_runs_stop_from_another_thread_or_a_signal_handler_wakes_it(
    server: BatchServer, where: str
) -> None:
    async def waiting(queue: asyncio.Queue[str]) -> AsyncIterator[str]:
        while True:  # a queue that is empty for now: the run waits for its next input
            yield await queue.get()

    async def main() -> tuple[list[allama.BatchResult[Row]], float]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        queue.put_nowait("doc 1")
        run = allama.abatch(provider_for(server), Row, waiting(queue), request=TEMPLATE)
        if where == "thread":
            threading.Timer(0.3, run.stop).start()
        else:
            signal.signal(signal.SIGALRM, lambda *_: run.stop())
            signal.setitimer(signal.ITIMER_REAL, 0.3)
        began = time.monotonic()
        async with asyncio.timeout(10):
            results = [r async for r in run]
        return results, time.monotonic() - began

    previous = signal.getsignal(signal.SIGALRM)
    try:
        results, took = asyncio.run(main())
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert [outcome(r) for r in results] == ["ok"] and took < 5


class _Wide(BaseModel):
    n: int
    extra: dict[str, int]  # a map: OpenAI's strict mode cannot hold it


def test_a_floor_no_inputs_call_can_meet_is_refused_before_anything_is_claimed(
    server: BatchServer, tmp_path: Path
) -> None:
    from allama import EnforcementBelowError

    ledger = tmp_path / "run.sqlite"
    with pytest.raises(EnforcementBelowError) as refused:
        allama.batch(
            provider_for(server),
            _Wide,
            docs(3),
            request=TEMPLATE,
            extractor=Extractor(min_enforcement="exact"),
            ledger=ledger,
        )
    assert str(refused.value).startswith(
        "schema enforcement `not_enforced` is below the required `exact`: "
    )
    assert refused.value.metadata is not None and refused.value.metadata.passes == 0
    assert sum(server.sent.values()) == 0 and not ledger.exists()
    # A floor the calls meet is no refusal.
    run = allama.batch(
        provider_for(server),
        Row,
        docs(2),
        request=TEMPLATE,
        extractor=Extractor(min_enforcement="exact"),
    )
    assert [outcome(r) for r in run] == ["ok", "ok"]


class Vendor(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def known(cls, name: str) -> str:
        raise LookupError(f"no vendor named {name}")  # not a ValueError: pydantic passes it


def test_an_exception_of_the_callers_code_keeps_its_words_out_of_the_failures_message(
    tmp_path: Path,
) -> None:
    provider = allama.mock.MockProvider.with_text('{"name": "Secret Corp"}')
    ledger = tmp_path / "run.sqlite"
    (result,) = allama.batch(provider, Vendor, ["doc"], request=TEMPLATE, ledger=ledger)
    failure = result.failure
    assert failure is not None
    assert (failure.kind, failure.message) == ("LookupError", "message withheld (27 chars)")
    assert failure.provider_message == "no vendor named Secret Corp"  # kept, shown when asked
    assert "Secret" not in repr(result) and isinstance(failure.error, LookupError)
    (row,) = Ledger(ledger, read_only=True).rows()
    assert row.error == {
        "kind": "LookupError",
        "message": "message withheld (27 chars)",
        "provider_message": "no vendor named Secret Corp",
    }


def test_an_input_whose_label_or_request_function_raises_says_which_did() -> None:
    def label(document: dict[str, Any]) -> str:
        return str(document["id"])

    def build(document: dict[str, Any]) -> ChatRequest:
        return TEMPLATE.user(document["text"])

    async def later(document: dict[str, Any]) -> ChatRequest:
        return TEMPLATE.user(document["text"])

    inputs = [{"id": 1, "text": "doc 1"}, {"text": "doc 2"}, {"id": 3}]
    provider = allama.mock.MockProvider.with_text('{"n": 1}')
    results = sorted(
        allama.batch(provider, Row, inputs, request=build, label=label), key=lambda r: r.index
    )
    assert [(r.label, r.failure and r.failure.message) for r in results] == [
        ("1", None),
        ("#1", "the label function raised KeyError: message withheld (4 chars)"),
        ("3", "the request function raised KeyError: message withheld (6 chars)"),
    ]
    assert [r.failure and r.failure.provider_message for r in results] == [None, "'id'", "'text'"]
    with pytest.raises(TypeError) as refused:  # an async function is said before any input
        allama.batch(provider, Row, inputs[:1], request=later)  # type: ignore[arg-type]
    assert str(refused.value) == (
        "the request function is an async function, which the run does not await: pass a plain one"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "coroutine was never awaited"
        (result,) = allama.batch(
            provider,
            Row,
            inputs[:1],
            request=lambda document: later(document),  # type: ignore[arg-type,return-value]
        )
    assert result.failure is not None and (result.failure.kind, result.failure.message) == (
        "TypeError",
        "the request function returned a coroutine, not a ChatRequest: it is an async "
        "function, which the run does not await; build the request in a plain one",
    )


def test_a_stop_or_a_close_waits_for_the_generators_own_cleanup() -> None:
    log: list[str] = []

    async def documents() -> AsyncIterator[str]:
        try:
            yield "doc 0"
            yield "doc 1"
            await asyncio.sleep(30)  # waiting for the next input
            yield "doc 2"
        finally:
            log.append("cleanup began")
            await asyncio.sleep(0.2)
            log.append("cleanup ended")

    async def main(close: bool) -> None:
        run = allama.abatch(TestProvider(), Row, documents(), request=TEMPLATE, concurrency=2)
        read = 0
        async for _ in run:
            read += 1
            if read == 2:
                await asyncio.sleep(0.05)  # the generator waits for its next input
                if close:
                    await run.aclose()
                    log.append("closed")
                    break
                run.stop()
        log.append("over")

    for close in (True, False):
        log.clear()
        asyncio.run(main(close))
        assert log == ["cleanup began", "cleanup ended"] + (["closed"] if close else []) + ["over"]


def test_an_input_that_arrives_while_a_run_closes_is_left_in_the_callers_queue() -> None:
    async def main() -> tuple[list[str], int, BatchSummary]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        queue.put_nowait("doc 0")
        taken = []

        async def documents() -> AsyncIterator[str]:
            while True:
                document = await queue.get()
                taken.append(document)
                yield document

        run = allama.abatch(_SlowToCancel(), Row, documents(), request=TEMPLATE, concurrency=1)
        reader = asyncio.create_task(aiter(run).__anext__())
        await asyncio.sleep(0.05)  # doc 0 in flight, the generator waits on the queue
        asyncio.get_running_loop().call_later(0.1, queue.put_nowait, "doc 1")
        await run.aclose()  # doc 1 comes while the call in flight takes 1 s to cancel
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await reader
        return taken, queue.qsize(), run.summary

    taken, left, summary = asyncio.run(main())
    assert (taken, left, summary.abandoned, summary.not_started) == (["doc 0"], 1, 1, 0)


class _AsyncList:
    """An async iterable of known length (the number of its inputs)."""

    def __init__(self, items: list[str]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    async def __aiter__(self) -> AsyncIterator[str]:
        for item in self.items:
            await asyncio.sleep(0.002)
            yield item


def test_an_async_iterable_of_known_length_is_read_on_under_a_spent_budget(
    server: BatchServer, tmp_path: Path
) -> None:
    async def main() -> tuple[list[allama.BatchResult[Row]], BatchSummary]:
        run = allama.abatch(
            provider_for(server),
            Row,
            _AsyncList(docs(11)),
            request=TEMPLATE,
            ledger=tmp_path / "run.sqlite",
            max_cost="0.00001",
            concurrency=1,
        )
        return [r async for r in run], run.summary

    results, summary = asyncio.run(main())
    assert len(results) == 11 and sum(server.sent.values()) == 1
    assert (summary.done, summary.not_started) == (1, 10)


def test_an_anext_that_raises_stop_iteration_ends_the_run_with_an_error() -> None:
    class Odd:
        def __init__(self) -> None:
            self.left = 2

        def __aiter__(self) -> Odd:
            return self

        def __anext__(self) -> asyncio.Future[str]:
            if not self.left:
                raise StopIteration  # no coroutine raises it; a plain function may
            self.left -= 1
            done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            done.set_result(f"doc {self.left}")
            return done

    async def main() -> list[allama.BatchResult[Row]]:
        run = allama.abatch(TestProvider(), Row, Odd(), request=TEMPLATE)  # type: ignore[arg-type]
        results: list[allama.BatchResult[Row]] = []
        async with asyncio.timeout(10):  # not a hang
            async for result in run:
                results.append(result)
        return results

    with pytest.raises(RuntimeError, match=r"^the inputs' __anext__ raised StopIteration$"):
        asyncio.run(main())


@pytest.mark.parametrize("seed", range(12))
def test_every_input_a_generator_gives_is_accounted_for_when_a_timeout_closes_the_run(
    server: BatchServer, tmp_path: Path, seed: int
) -> None:
    chosen = random.Random(seed)
    given: list[str] = []

    async def documents() -> AsyncIterator[str]:
        for n in range(1000):
            await asyncio.sleep(chosen.random() * 0.004)
            given.append(f"doc {n}")
            yield given[-1]

    async def main() -> BatchSummary:
        run = allama.abatch(
            provider_for(server), Row, documents(), request=TEMPLATE, ledger=tmp_path / "l.sqlite"
        )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(chosen.random() * 0.3):
                async for _ in run:
                    pass
        return run.summary

    summary = asyncio.run(main())
    assert summary.finished + summary.not_started + summary.abandoned == len(given)
    rows = {row.position: row.attempts for row in Ledger(tmp_path / "l.sqlite").rows()}
    assert all(count <= rows.get(n, 0) for n, count in server.sent.items() if n >= 0)


def test_a_calls_output_is_guessed_from_the_answers_come_when_its_turn_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under `tpm`, inputs claimed ahead of a free slot wait for it: their calls count the
    output of the answers that came meanwhile, not none."""
    from allama.batch._limits import RateLimiter

    asked: list[int] = []
    acquire = RateLimiter.acquire

    async def counted(self: RateLimiter, tokens: int = 0) -> float:
        asked.append(tokens)
        return await acquire(self, tokens)

    monkeypatch.setattr(RateLimiter, "acquire", counted)
    answer = ChatResponseBuilder().text('{"n": 1}').usage(20, 500).build()
    provider = allama.mock.MockProvider([answer] * 4)
    run = allama.batch(provider, Row, docs(4), request=TEMPLATE, tpm=1_000_000, concurrency=1)
    assert all(result.ok for result in run)
    first, *later = asked
    assert [tokens - first for tokens in later] == [500, 500, 500]


@pytest.mark.parametrize("left", ["killed", "given back"])
def test_inputs_another_run_held_and_left_unfinished_as_it_ended_are_said(
    tmp_path: Path, left: str
) -> None:
    ledger = tmp_path / "run.sqlite"
    provider = allama.mock.MockProvider(['{"n": 1}'] * 2)
    held = input_key(provider, Row, TEMPLATE.user("doc 0"))
    other = Ledger(ledger, settings={})  # another run of this process, holding doc 0
    assert other.claim(held, 0, "#0").granted

    class EndsTheOther(allama.mock.MockProvider):
        async def achat(self, request: ChatRequest) -> ChatResponse:
            # It ends with doc 0 unfinished: pending, or given back unsent (a run stopped).
            if left == "given back":
                with other._transaction():
                    other._release(held)
            other.end("killed" if left == "killed" else "stopped")
            return await super().achat(request)

    async def main() -> list[allama.BatchResult[Row]]:
        run = allama.abatch(
            EndsTheOther(['{"n": 1}']), Row, docs(2), request=TEMPLATE, ledger=ledger
        )
        results = [result async for result in run]
        lines.extend(run.summary.lines())
        return results

    lines: list[str] = []
    results = sorted(asyncio.run(main()), key=lambda r: r.index)
    other.close()
    assert [outcome(r) for r in results] == ["in_flight_elsewhere", "ok"]
    assert lines[0].startswith(
        "1 done, 0 failed, 1 in flight in another run (1 of them left unfinished by it, which "
        "has ended: a run again sends them), in "
    )
    # And so it does.
    again = allama.batch(provider, Row, docs(2), request=TEMPLATE, ledger=ledger)
    assert sorted(outcome(r) for r in again) == ["ok", "ok"]
    assert (again.summary.resumed, provider.call_count) == (1, 1)
