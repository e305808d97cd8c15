"""An async run closed while a wrapper's call is under way: what the attempts inside that
call paid before the close (a failover's provider that failed with usage, a retry's
attempt before its pause) reaches the run only when the call returns, which it never does.
The closed run counts it all the same, as it counts an extraction's pass answered before a
further call, and the ledger keeps it with the input for the run that sends it again. The
cut call itself is an abandoned call, whose cost nothing says."""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _replay_server import ReplyHandler
from allama import ChatRequest, Extractor, FailoverProvider, RetryingProvider, RetryPolicy
from allama.batch import BatchSummary
from allama.batch._ledger import Ledger

TEMPLATE = ChatRequest("gpt-4o-mini").system("Read the number.")

PAID_FAILURE = "paid failure"
"""A 200 whose body is no completion, reporting 1000 tokens in and 500 out: a retryable
error that was paid for ($0.00045 at gpt-4o-mini's prices)."""
NO_JSON = "no json"
"""An answer with no JSON in it (100 in, 10 out: $0.000021): a pass the extraction repairs."""
OK = "ok"
"""The value (100 in, 10 out)."""
HELD = "held"
"""Held until the test ends (the run is closed meanwhile), then the value."""


class Row(BaseModel):
    n: int


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-close",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scripts: dict[str, collections.deque[str]] = collections.defaultdict(collections.deque)
        self.sent: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()
        self.held = threading.Event()
        """Set once a held call reached the server: the run is closed then."""
        self.release = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client gone (an async run closed) is no error of the server's

    def script(self, route: str, *answers: str) -> None:
        self.scripts[route].extend(answers)

    def url(self, route: str) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/{route}/v1"


class _Handler(ReplyHandler):
    server: _Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        route = self.path.split("/")[1]
        with self.server.lock:
            self.server.sent[route] += 1
            script = self.server.scripts[route]
            answer = script.popleft() if script else OK
        if answer == PAID_FAILURE:
            body = _completion("{}")
            body["created"] = 1.5  # not the wire's shape: the answer cannot be read
            del body["choices"][0]["finish_reason"]
            body["usage"] = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
            self.send_json(200, body)
            return
        if answer == HELD:
            self.server.held.set()
            self.server.release.wait(10)
        self.send_json(200, _completion("no JSON here" if answer == NO_JSON else '{"n": 1}'))


@pytest.fixture
def server() -> Iterator[_Server]:
    served = _Server()
    threading.Thread(target=served.serve_forever, args=(0.05,), daemon=True).start()
    yield served
    served.release.set()
    served.shutdown()
    served.server_close()


def _provider(server: _Server, route: str) -> allama.HttpProvider:
    return allama.provider("openai", api_key="sk-test", base_url=server.url(route))


def _closed_when(
    provider: allama.ChatProvider, reached: threading.Event, **options: Any
) -> BatchSummary:
    """An async run of one input, closed once `reached` is set (its call under way)."""

    async def read() -> BatchSummary:
        run = allama.abatch(provider, Row, ["doc 1"], request=TEMPLATE, **options)

        async def close() -> None:
            assert await asyncio.to_thread(reached.wait, 10)
            await run.aclose()

        closing = asyncio.ensure_future(close())
        assert [result async for result in run] == []
        await closing
        return run.summary

    return asyncio.run(read())


def _paid(summary: BatchSummary) -> tuple[int, int, int, Decimal, int]:
    return (
        summary.passes,
        summary.input_tokens,
        summary.output_tokens,
        summary.cost,
        summary.cost_unknown,
    )


def _run_again(server: _Server, ledger: Path) -> BatchSummary:
    """The input sent again on the ledger, to a provider that answers it."""
    again = allama.batch(_provider(server, "a"), Row, ["doc 1"], request=TEMPLATE, ledger=ledger)
    assert [result.value for result in again] == [Row(n=1)]
    return again.summary


@pytest.mark.parametrize("kept", [True, False], ids=["ledger", "no-ledger"])
def test_a_failovers_first_provider_paid_before_the_close_is_counted(
    server: _Server, tmp_path: Path, kept: bool
) -> None:
    server.script("a", PAID_FAILURE)
    server.script("b", HELD)
    ledger = tmp_path / "run.sqlite"
    provider = FailoverProvider([_provider(server, "a"), _provider(server, "b")])
    summary = _closed_when(provider, server.held, **({"ledger": ledger} if kept else {}))
    assert (summary.abandoned, summary.abandoned_calls) == (1, 1)
    # a's failure, paid: b's call, cut, is the abandoned call, its cost not counted.
    assert _paid(summary) == (0, 1000, 500, Decimal("0.00045"), 0)
    assert "cost $0.000450" in summary.lines()
    if not kept:
        return
    [row] = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost) == ("pending", "0.00045")
    again = _run_again(server, ledger)
    assert _paid(again) == (1, 1100, 510, Decimal("0.000471"), 0)
    assert again.cost_earlier == Decimal("0.00045")


def test_a_retrys_attempt_paid_before_a_close_in_its_pause_is_counted(
    server: _Server, tmp_path: Path
) -> None:
    server.script("a", PAID_FAILURE)
    pausing = threading.Event()

    async def pause(seconds: float) -> None:
        pausing.set()
        await asyncio.sleep(seconds)

    policy = RetryPolicy(initial_backoff=30.0, jitter=0.0)
    provider = FailoverProvider(
        [
            RetryingProvider(_provider(server, "a"), policy, async_sleep=pause),
            RetryingProvider(_provider(server, "b"), policy, async_sleep=pause),
        ]
    )
    ledger = tmp_path / "run.sqlite"
    summary = _closed_when(provider, pausing, ledger=ledger)
    assert server.sent == {"a": 1}
    assert (summary.abandoned, summary.abandoned_calls) == (1, 0)  # in its pause: none under way
    assert _paid(summary) == (0, 1000, 500, Decimal("0.00045"), 0)
    [row] = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost) == ("pending", "0.00045")
    assert _run_again(server, ledger).cost_earlier == Decimal("0.00045")


def test_a_repairs_failover_paid_before_the_close_is_counted_with_the_pass_before_it(
    server: _Server, tmp_path: Path
) -> None:
    # a answers no JSON (a pass), then fails the repair, paid; b holds the repair's call.
    server.script("a", NO_JSON, PAID_FAILURE)
    server.script("b", HELD)
    ledger = tmp_path / "run.sqlite"
    provider = FailoverProvider([_provider(server, "a"), _provider(server, "b")])
    summary = _closed_when(provider, server.held, ledger=ledger, extractor=Extractor(retries=1))
    assert _paid(summary) == (1, 1100, 510, Decimal("0.000471"), 0)
    [row] = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost) == ("pending", "0.000471")
    again = _run_again(server, ledger)
    assert again.cost_earlier == Decimal("0.000471")
    assert _paid(again) == (2, 1200, 520, Decimal("0.000492"), 0)


def test_a_call_cut_with_nothing_paid_inside_it_adds_no_cost(
    server: _Server, tmp_path: Path
) -> None:
    server.script("b", HELD)
    ledger = tmp_path / "run.sqlite"
    summary = _closed_when(_provider(server, "b"), server.held, ledger=ledger)
    assert (summary.abandoned, summary.abandoned_calls) == (1, 1)
    assert _paid(summary) == (0, 0, 0, Decimal(0), 0)
    [row] = Ledger(ledger, read_only=True).rows()
    assert (row.status, row.cost, row.record) == ("pending", None, None)


def test_the_body_that_fails_is_a_paid_retryable_error(server: _Server) -> None:
    # (What the tests above rest on: the failure carries its usage, and fails over.)
    server.script("a", PAID_FAILURE)
    with pytest.raises(allama.errors.Error) as raised:
        _provider(server, "a").chat(TEMPLATE.user("doc 1"))
    assert raised.value.retryable
    assert [entry["usage"] for entry in allama.errors.paid_for(raised.value)] == [
        {"input_tokens": 1000, "output_tokens": 500}
    ]
    assert server.sent == {"a": 1}
