"""What an input's attempts paid, in a batch run: an attempt that paid beside a last one
that paid nothing (a 503 at the end) is counted, not made unknown, in the summary, the
ledger and the budget; and under a budget an attempt paid for counts when it fails, not
when its input ends, so that inputs trying again do not pass the budget unseen."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ChatResponse
from allama.errors import REPORTED_MODEL_KEY, REPORTED_USAGE_KEY, OverloadedError, ServerError
from allama.mock import ChatResponseBuilder, MockProvider

TEMPLATE = ChatRequest("gpt-4o-mini").system("Read the number.")
CALL = Decimal("0.000018")
"""gpt-4o-mini at $0.15 / $0.60 per million tokens: 100 in and 5 out."""


class Row(BaseModel):
    n: int


def paid_failure() -> ServerError:
    """A server error the provider billed for (a gateway's error body with its usage)."""
    error = ServerError("upstream failed").with_provider("openai").with_model("gpt-4o-mini")
    error.with_metadata(REPORTED_MODEL_KEY, "gpt-4o-mini")
    return error.with_metadata(REPORTED_USAGE_KEY, {"input_tokens": 100, "output_tokens": 5})


def answer(n: int) -> ChatResponse:
    builder = ChatResponseBuilder().text(f'{{"n": {n}}}').usage(100, 5)
    return builder.model("gpt-4o-mini").provider("openai").build()


class Scripted(MockProvider):
    """Each document (`doc <n>`) meets its own script, one item a call."""

    def __init__(self, scripts: dict[str, list[object]]) -> None:
        super().__init__([], name="openai")
        self.scripts = {doc: list(items) for doc, items in scripts.items()}

    def chat(self, request: ChatRequest) -> ChatResponse:
        self._record(request)
        item = self.scripts[request.messages[-1].text()].pop(0)
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, ChatResponse)
        return item

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self.chat(request)


def budgeted(
    provider: MockProvider, docs: Iterable[str], ledger: Path, budget: str
) -> allama.BatchRun[Row]:
    """A run of `docs` under `budget`, one input at a time, tried again at once."""
    return allama.batch(
        provider,
        Row,
        docs,
        request=TEMPLATE,
        ledger=ledger,
        max_cost=budget,
        concurrency=1,
        backoff=0,
    )


def test_an_attempt_that_paid_counts_beside_a_last_one_that_paid_nothing(
    tmp_path: Path,
) -> None:
    provider = Scripted({"doc 1": [paid_failure(), OverloadedError("busy")]})
    ledger = tmp_path / "run.sqlite"
    run = allama.batch(
        provider, Row, ["doc 1"], request=TEMPLATE, ledger=ledger, max_attempts=2, backoff=0
    )
    (result,) = list(run)
    assert result.failure is not None and result.failure.kind == "overloaded"
    assert run.summary.cost == CALL and run.summary.cost_unknown == 0
    with sqlite3.connect(ledger) as db:
        assert db.execute("SELECT cost FROM items").fetchall() == [(str(CALL),)]


def test_a_paid_attempt_counts_toward_the_budget_before_its_input_is_tried_again(
    tmp_path: Path,
) -> None:
    # Each input pays for a failed attempt, then would pay for its answer: the first
    # attempt's cost is past the budget, and nothing more is sent.
    scripts: dict[str, list[object]] = {f"doc {n}": [paid_failure(), answer(n)] for n in range(4)}
    provider = Scripted(scripts)
    run = budgeted(provider, list(scripts), tmp_path / "run.sqlite", "0.00001")
    results = list(run)
    assert provider.call_count == 1
    assert run.summary.stopped == "the budget of $0.00001 is reached ($0.000018)"
    assert run.summary.cost == CALL
    assert [r.pending for r in results if r.index == 0] == [True]


def test_an_attempt_paid_at_an_unknown_price_stops_the_run_before_its_input_is_tried_again(
    tmp_path: Path,
) -> None:
    """It waited for its input to end: the inputs after it were sent meanwhile, and the
    stop then named another input."""
    unknown = "a-model-without-prices"
    error = paid_failure().with_model(unknown)
    error.with_metadata(REPORTED_MODEL_KEY, unknown)
    scripts: dict[str, list[object]] = {"doc 0": [error, answer(0)]}
    scripts |= {f"doc {n}": [answer(n)] for n in range(1, 4)}
    provider = Scripted(scripts)
    run = budgeted(provider, list(scripts), tmp_path / "run.sqlite", "1")
    results = list(run)
    assert provider.call_count == 1
    assert run.summary.stopped == (
        f"the cost of an attempt of #0 is unknown (genai-prices {genai_prices.__version__} "
        f"has no price for {unknown!r} at openai): the budget of $1 cannot be kept"
    )
    assert sorted((r.index, r.pending, r.failure and r.failure.kind) for r in results) == [
        (0, True, "server"),  # pending with what it paid, for the next run
        (1, False, "not_started"),
        (2, False, "not_started"),
        (3, False, "not_started"),
    ]


def test_what_inputs_in_flight_paid_past_the_budget_is_said(tmp_path: Path) -> None:
    """The stop's line said what was spent when the budget was reached; what the inputs
    then in flight paid past it showed only in the cost line."""

    class Slow(Scripted):
        async def achat(self, request: ChatRequest) -> ChatResponse:
            await asyncio.sleep(0.05)  # every input in flight when the first is answered
            return self.chat(request)

    scripts: dict[str, list[object]] = {f"doc {n}": [answer(n)] for n in range(6)}
    provider = Slow(scripts)
    run = allama.batch(
        provider,
        Row,
        list(scripts),
        request=TEMPLATE,
        ledger=tmp_path / "run.sqlite",
        max_cost="0.00001",  # less than one call: the first answer reaches it
        concurrency=3,
    )
    results = list(run)
    assert provider.call_count == 3
    assert sum(r.failure is None for r in results) == 3
    assert run.summary.cost == 3 * CALL
    assert run.summary.past_budget == (3 * CALL, Decimal("0.00001"), CALL)
    assert run.summary.lines()[-2:] == [
        "stopped starting new inputs: the budget of $0.00001 is reached ($0.000018)",
        "spent $0.000054 in all by the end, $0.000044 past the budget of $0.00001: "
        "$0.000036 of it after the budget was reached, by inputs then in flight",
    ]


def test_an_input_a_budget_left_pending_counts_what_it_paid_when_run_again(
    tmp_path: Path,
) -> None:
    # The first input pays for a failed attempt and is left pending by the budget's stop;
    # the same run again, under the same budget, starts none, and says what the job paid.
    scripts: dict[str, list[object]] = {f"doc {n}": [paid_failure(), answer(n)] for n in range(4)}
    ledger = tmp_path / "run.sqlite"

    def run(provider: Scripted) -> allama.BatchRun[Row]:
        return budgeted(provider, list(scripts), ledger, "0.00001")

    first = run(Scripted(scripts))
    assert [r.pending for r in first if r.index == 0] == [True]
    assert first.summary.cost == CALL
    provider = Scripted({})
    again = run(provider)
    results = sorted(again, key=lambda r: r.index)
    assert provider.call_count == 0
    assert [r.failure.kind if r.failure else "ok" for r in results] == ["not_started"] * 4
    assert [[m.cost.total if m.cost else None for m in r.spent] for r in results] == [
        [CALL],
        [],
        [],
        [],
    ]
    # Its attempt is counted with what it paid, as the ledger's status counts it.
    assert [r.attempts for r in results] == [1, 0, 0, 0]
    summary = again.summary
    assert (summary.not_started, summary.cost, summary.input_tokens) == (4, CALL, 100)
    assert (summary.attempts, summary.passes) == (1, 0)
    assert summary.slowest == []  # nothing ran here
    assert summary.stopped == (
        "the budget of $0.00001 is reached ($0.000018, $0.000018 of it paid before this run)"
    )


def test_a_copy_of_an_input_this_run_left_pending_adds_nothing_it_paid(tmp_path: Path) -> None:
    # The first copy pays for a failed attempt, and the budget's stop leaves it pending; the
    # second, not started, is the same input: what it paid is counted once.
    scripts: dict[str, list[object]] = {"doc 0": [paid_failure(), answer(0)], "doc 1": [answer(1)]}
    run = budgeted(
        Scripted(scripts), ["doc 0", "doc 1", "doc 0"], tmp_path / "run.sqlite", "0.00001"
    )
    results = sorted(run, key=lambda r: r.index)
    assert [(r.failure.kind if r.failure else "ok", r.pending) for r in results] == [
        ("server", True),
        ("not_started", False),
        ("not_started", False),
    ]
    assert [len(r.spent) for r in results] == [1, 0, 0]
    assert (run.summary.cost, run.summary.input_tokens) == (CALL, 100)


class Watching(MockProvider):
    """Answers not JSON, then JSON; reads the ledger's row as the repair's call goes out."""

    def __init__(self, ledger: Path) -> None:
        super().__init__([], name="openai")
        self.ledger = ledger
        self.seen: list[tuple[object, object]] = []

    def chat(self, request: ChatRequest) -> ChatResponse:
        self._record(request)
        if len(self.requests) == 1:
            builder = ChatResponseBuilder().text("not JSON").usage(100, 5)
            return builder.model("gpt-4o-mini").provider("openai").build()
        with sqlite3.connect(self.ledger) as db:
            self.seen.append(db.execute("SELECT record, cost FROM items").fetchone())
        return answer(1)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self.chat(request)


@pytest.mark.parametrize("run_async", [False, True], ids=["batch", "abatch"])
def test_a_pass_paid_for_is_in_the_ledger_before_the_repair_is_sent(
    tmp_path: Path, run_async: bool
) -> None:
    # A run killed during the repair's call loses no record of the pass before it.
    ledger = tmp_path / "run.sqlite"
    provider = Watching(ledger)
    options: dict[str, Any] = {
        "request": TEMPLATE,
        "ledger": ledger,
        "extractor": allama.Extractor(retries=1),
    }
    if run_async:

        async def read() -> list[Any]:
            return [r async for r in allama.abatch(provider, Row, ["doc 1"], **options)]

        (result,) = asyncio.run(read())
    else:
        (result,) = allama.batch(provider, Row, ["doc 1"], **options)
    assert result.value == Row(n=1) and result.metadata.passes == 2
    ((record, cost),) = provider.seen
    kept = json.loads(record)
    assert (kept["passes"], kept["usage"]) == (1, {"input_tokens": 100, "output_tokens": 5})
    assert Decimal(cost) == CALL
    with sqlite3.connect(ledger) as db:  # then the whole record, in its place
        (final,) = db.execute("SELECT record FROM items").fetchone()
    assert json.loads(final)["passes"] == 2 and "earlier_attempts" not in json.loads(final)


def _left_pending(ledger: Path) -> None:
    """doc 0 pays for a failed attempt, and a budget's stop leaves it pending."""
    scripts: dict[str, list[object]] = {"doc 0": [paid_failure(), answer(0)]}
    first = budgeted(Scripted(scripts), ["doc 0"], ledger, "0.00001")
    assert [r.pending for r in first] == [True]


def test_an_input_claimed_and_given_back_unsent_carries_what_an_earlier_run_paid(
    tmp_path: Path,
) -> None:
    # doc 0, claimed ahead, waits while doc 9's answer reaches the budget: never sent.
    ledger = tmp_path / "run.sqlite"
    _left_pending(ledger)
    scripts: dict[str, list[object]] = {"doc 9": [answer(9)], "doc 0": [answer(0)]}
    run = budgeted(Scripted(scripts), ["doc 9", "doc 0"], ledger, "0.00003")
    results = sorted(run, key=lambda r: r.index)
    assert [r.failure.kind if r.failure else "ok" for r in results] == ["ok", "not_started"]
    assert [m.cost.total if m.cost else None for m in results[1].spent] == [CALL]
    assert run.summary.cost == 2 * CALL
    assert run.summary.stopped == (
        "the budget of $0.00003 is reached ($0.000036, $0.000018 of it paid before this run)"
    )


def test_what_another_run_paid_for_an_input_since_this_one_started_counts_before_it_is_sent(
    tmp_path: Path,
) -> None:
    # When this run starts, doc 0 has paid for one attempt; before it is claimed, another
    # run that was sending it keeps a second, and dies. That second attempt spends the budget.
    ledger = tmp_path / "run.sqlite"
    _left_pending(ledger)

    def inputs() -> Iterator[str]:
        with sqlite3.connect(ledger) as db:
            (record,) = db.execute("SELECT record FROM items").fetchone()
            kept = json.loads(record)
            twice = {**kept, "earlier_attempts": [kept]}
            db.execute("UPDATE items SET record = ?, cost = ?", (json.dumps(twice), str(2 * CALL)))
        yield "doc 0"

    provider = Scripted({"doc 0": [answer(0)]})
    run = budgeted(provider, inputs(), ledger, "0.00003")
    (result,) = list(run)
    assert provider.call_count == 0
    assert result.failure is not None and result.failure.kind == "not_started"
    assert run.summary.stopped == (
        "the budget of $0.00003 is reached ($0.000036, $0.000036 of it paid before this run)"
    )
