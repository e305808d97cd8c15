"""A run closed while a wrapper's call is under way, sync and async alike: the wrappers
tell the run's gate of each attempt that ended paying and of each pause as they go, so the
closed run counts what the attempts before the close paid (in the summary, and in the
ledger for the run that sends the input again), though a sync run's call goes on in its
thread; and a call waiting out a retry's pause, every attempt of it answered, is no call
under way, which may be paid for (`abandoned_calls`)."""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from collections.abc import Callable, Iterator
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
BUSY = "busy"
"""A 500 that reports no usage: retryable, and paid nothing."""
OK = "ok"
"""The value (100 in, 10 out: $0.000021)."""
HELD_DOC = "doc held"
"""An input whose every call is held until the test ends (the run is closed meanwhile)."""
HELD = "held"
"""Held like `HELD_DOC`'s calls, whatever the input."""


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
        """Set once a held call reached the server."""
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
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        route = self.path.split("/")[1]
        with self.server.lock:
            self.server.sent[route] += 1
            script = self.server.scripts[route]
            if body["messages"][-1]["content"] == HELD_DOC:
                answer = HELD
            else:
                answer = script.popleft() if script else OK
        if answer == PAID_FAILURE:
            paid = _completion("{}")
            paid["choices"][0]["message"]["content"] = 42  # no answer can be read from it
            del paid["choices"][0]["finish_reason"]
            paid["usage"] = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
            self.send_json(200, paid)
            return
        if answer == BUSY:
            self.send_json(500, {"error": {"message": "busy", "type": "server_error"}})
            return
        if answer == HELD:
            self.server.held.set()
            self.server.release.wait(10)
        self.send_json(200, _completion("no JSON here" if answer == NO_JSON else '{"n": 1}'))


class _Pauses:
    """A retry's pause that says when `count` pauses began (`began`): the sync one lasts
    until the test ends, the async one until the run's close cuts it."""

    def __init__(self, release: threading.Event, count: int = 1) -> None:
        self.began = threading.Event()
        self._release = release
        self._left = count
        self._lock = threading.Lock()

    def _one_began(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self.began.set()

    def sleep(self, seconds: float) -> None:
        self._one_began()
        self._release.wait(10)

    async def async_sleep(self, seconds: float) -> None:
        self._one_began()
        await asyncio.sleep(seconds)


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


def _retrying(inner: allama.ChatProvider, pauses: _Pauses, **policy: Any) -> RetryingProvider:
    return RetryingProvider(
        inner,
        RetryPolicy(initial_backoff=30.0, jitter=0.0, **policy),
        sleep=pauses.sleep,
        async_sleep=pauses.async_sleep,
    )


def _closed_when(
    mode: str,
    provider: allama.ChatProvider,
    docs: list[str],
    reached: Callable[[], bool],
    **options: Any,
) -> BatchSummary:
    """A run (`mode`) of `docs`, closed once `reached()` (its calls where the test wants
    them): no result comes out of it."""
    if mode == "sync":
        run = allama.batch(provider, Row, docs, request=TEMPLATE, concurrency=len(docs), **options)

        def close() -> None:
            assert reached()
            run.close()

        closing = threading.Thread(target=close)
        closing.start()
        assert list(run) == []
        closing.join()
        return run.summary

    async def read() -> BatchSummary:
        arun = allama.abatch(
            provider, Row, docs, request=TEMPLATE, concurrency=len(docs), **options
        )

        async def close() -> None:
            assert await asyncio.to_thread(reached)
            await arun.aclose()

        closing = asyncio.ensure_future(close())
        assert [result async for result in arun] == []
        await closing
        return arun.summary

    return asyncio.run(read())


def _paid(summary: BatchSummary) -> tuple[int, int, int, Decimal]:
    return (summary.passes, summary.input_tokens, summary.output_tokens, summary.cost)


def _kept(ledger: Path) -> tuple[str, str | None]:
    [row] = Ledger(ledger, read_only=True).rows()
    return row.status, row.cost


def _run_again(server: _Server, ledger: Path) -> BatchSummary:
    """The input sent again on the ledger, to a provider that answers it."""
    again = allama.batch(_provider(server, "a"), Row, ["doc 1"], request=TEMPLATE, ledger=ledger)
    assert [result.value for result in again] == [Row(n=1)]
    return again.summary


MODES = ["sync", "async"]


@pytest.mark.parametrize("mode", MODES)
def test_a_failovers_provider_that_paid_before_the_close_is_counted(
    server: _Server, tmp_path: Path, mode: str
) -> None:
    server.script("a", PAID_FAILURE)
    server.script("b", HELD)
    ledger = tmp_path / "run.sqlite"
    provider = FailoverProvider([_provider(server, "a"), _provider(server, "b")])
    summary = _closed_when(mode, provider, ["doc 1"], lambda: server.held.wait(10), ledger=ledger)
    # b's call goes on (a sync run's, in its thread) or was cut: the abandoned call.
    assert (summary.abandoned, summary.abandoned_calls) == (1, 1)
    assert _paid(summary) == (0, 1000, 500, Decimal("0.00045"))
    assert _kept(ledger) == ("pending", "0.00045")
    again = _run_again(server, ledger)
    assert again.cost_earlier == Decimal("0.00045")
    assert _paid(again) == (1, 1100, 510, Decimal("0.000471"))


@pytest.mark.parametrize("mode", MODES)
def test_a_retrys_attempt_that_paid_before_a_close_in_its_pause_is_counted(
    server: _Server, tmp_path: Path, mode: str
) -> None:
    server.script("a", PAID_FAILURE)
    pauses = _Pauses(server.release)
    ledger = tmp_path / "run.sqlite"
    provider = _retrying(_provider(server, "a"), pauses)
    summary = _closed_when(mode, provider, ["doc 1"], lambda: pauses.began.wait(10), ledger=ledger)
    assert server.sent == {"a": 1}
    # Waiting out its pause, the attempt before it answered: no call under way.
    assert (summary.abandoned, summary.abandoned_calls) == (1, 0)
    assert "under way" not in summary.lines()[0]
    assert _paid(summary) == (0, 1000, 500, Decimal("0.00045"))
    assert _kept(ledger) == ("pending", "0.00045")
    assert _run_again(server, ledger).cost_earlier == Decimal("0.00045")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("nesting", ["retry-in-failover", "failover-in-retry"])
def test_wrappers_within_wrappers_count_each_paid_attempt_once(
    server: _Server, tmp_path: Path, mode: str, nesting: str
) -> None:
    # Two paid failures before the close, each told by the wrapper that met it, then by
    # the one around it as the inner one gave up: counted once each.
    pauses = _Pauses(server.release)
    if nesting == "retry-in-failover":
        server.script("a", PAID_FAILURE, PAID_FAILURE)
        server.script("b", HELD)
        no_wait = RetryPolicy(max_attempts=2, initial_backoff=0.0, jitter=0.0)
        provider: allama.ChatProvider = FailoverProvider(
            [RetryingProvider(_provider(server, "a"), no_wait), _provider(server, "b")]
        )
        reached, under_way = server.held, 1
    else:
        server.script("a", PAID_FAILURE)
        server.script("b", PAID_FAILURE)
        both = FailoverProvider([_provider(server, "a"), _provider(server, "b")])
        provider = _retrying(both, pauses)
        reached, under_way = pauses.began, 0
    ledger = tmp_path / "run.sqlite"
    summary = _closed_when(mode, provider, ["doc 1"], lambda: reached.wait(10), ledger=ledger)
    assert (summary.abandoned, summary.abandoned_calls) == (1, under_way)
    assert _paid(summary) == (0, 2000, 1000, Decimal("0.0009"))
    assert _kept(ledger) == ("pending", "0.00090")


@pytest.mark.parametrize("mode", MODES)
def test_only_a_call_with_an_attempt_under_way_at_the_close_may_be_paid_for(
    server: _Server, mode: str
) -> None:
    # doc 1's attempt was answered 500 (nothing paid), and it waits out its pause; the
    # held input's call is on its way to the server.
    server.script("a", BUSY)
    pauses = _Pauses(server.release)
    provider = _retrying(_provider(server, "a"), pauses, max_attempts=5, budget=None)
    summary = _closed_when(
        mode,
        provider,
        ["doc 1", HELD_DOC],
        lambda: pauses.began.wait(10) and server.held.wait(10),
    )
    assert (summary.abandoned, summary.abandoned_calls) == (2, 1)
    assert summary.lines()[0].startswith(
        "0 done, 0 failed, 2 left unfinished (1 with a call under way, which may be paid "
        "for, at a cost not counted here), in "
    )
    assert _paid(summary) == (0, 0, 0, Decimal(0))


@pytest.mark.parametrize("mode", MODES)
def test_calls_all_waiting_out_a_retrys_pause_are_no_calls_under_way(
    server: _Server, mode: str
) -> None:
    server.script("a", BUSY, BUSY)
    pauses = _Pauses(server.release, count=2)
    provider = _retrying(_provider(server, "a"), pauses, budget=None)
    summary = _closed_when(mode, provider, ["doc 1", "doc 2"], lambda: pauses.began.wait(10))
    assert server.sent == {"a": 2}
    assert (summary.abandoned, summary.abandoned_calls) == (2, 0)
    assert "under way" not in summary.lines()[0]


@pytest.mark.parametrize("mode", MODES)
def test_a_repairs_failover_paid_before_the_close_is_counted_with_the_pass_before_it(
    server: _Server, tmp_path: Path, mode: str
) -> None:
    # a answers no JSON (a pass), then fails the repair, paid; b holds the repair's call.
    server.script("a", NO_JSON, PAID_FAILURE)
    server.script("b", HELD)
    ledger = tmp_path / "run.sqlite"
    provider = FailoverProvider([_provider(server, "a"), _provider(server, "b")])
    summary = _closed_when(
        mode,
        provider,
        ["doc 1"],
        lambda: server.held.wait(10),
        ledger=ledger,
        extractor=Extractor(retries=1),
    )
    assert _paid(summary) == (1, 1100, 510, Decimal("0.000471"))
    assert _kept(ledger) == ("pending", "0.000471")
    again = _run_again(server, ledger)
    assert again.cost_earlier == Decimal("0.000471")
    assert _paid(again) == (2, 1200, 520, Decimal("0.000492"))


@pytest.mark.parametrize("mode", MODES)
def test_a_call_cut_with_nothing_paid_inside_it_adds_no_cost(
    server: _Server, tmp_path: Path, mode: str
) -> None:
    server.script("b", HELD)
    ledger = tmp_path / "run.sqlite"
    summary = _closed_when(
        mode, _provider(server, "b"), ["doc 1"], lambda: server.held.wait(10), ledger=ledger
    )
    assert (summary.abandoned, summary.abandoned_calls, summary.cost_unknown) == (1, 1, 0)
    assert _paid(summary) == (0, 0, 0, Decimal(0))
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


@pytest.mark.parametrize("mode", MODES)
def test_a_run_without_a_ledger_counts_it_all_the_same(server: _Server, mode: str) -> None:
    server.script("a", PAID_FAILURE)
    server.script("b", HELD)
    provider = FailoverProvider([_provider(server, "a"), _provider(server, "b")])
    summary = _closed_when(mode, provider, ["doc 1"], lambda: server.held.wait(10))
    assert _paid(summary) == (0, 1000, 500, Decimal("0.00045"))
    assert "cost $0.000450" in summary.lines()
