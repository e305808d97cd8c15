"""A run closed before its end leaves calls under way: an async run's cut, a sync run's
going on in their threads to an answer nobody reads. The summary says how many, since
they may be paid for and no cost holds them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _batch_server import _completion
from _replay_server import ReplyHandler
from allama import ChatRequest
from allama.batch import BatchSummary

TEMPLATE = ChatRequest("gpt-4o-mini").system("Read the number.")
SLOW = 1.0


class Row(BaseModel):
    n: int


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answered: list[str] = []
        self.lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client gone (an async run closed) is no error of the server's


class _Handler(ReplyHandler):
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        text = body["messages"][-1]["content"]
        if text != "doc 0":
            time.sleep(SLOW)  # the first answers at once, the others while the run closes
        with self.server.lock:
            self.server.answered.append(text)
        self.send_json(200, _completion("gpt-4o-mini", json.dumps({"n": int(text[4:])})))


@pytest.fixture
def server() -> Iterator[_Server]:
    served = _Server()
    threading.Thread(target=served.serve_forever, args=(0.05,), daemon=True).start()
    yield served
    served.shutdown()
    served.server_close()


def _provider(server: _Server) -> allama.HttpProvider:
    host, port = server.server_address[:2]
    return allama.provider("openai", api_key="sk-test", base_url=f"http://{host!s}:{port}/v1")


DOCS = ["doc 0", "doc 1", "doc 2", "doc 3"]


def _left_sync(server: _Server, ledger: Path) -> BatchSummary:
    run = allama.batch(_provider(server), Row, DOCS, request=TEMPLATE, concurrency=4, ledger=ledger)
    for _ in run:
        break  # the run closes; the three slow calls go on in their threads
    return run.summary


def _left_async(server: _Server, ledger: Path) -> BatchSummary:
    async def read() -> BatchSummary:
        run = allama.abatch(
            _provider(server), Row, DOCS, request=TEMPLATE, concurrency=4, ledger=ledger
        )
        async with run:
            async for _ in run:
                break
        return run.summary

    return asyncio.run(read())


@pytest.mark.parametrize("left", [_left_sync, _left_async], ids=["sync", "async"])
def test_a_run_closed_with_calls_under_way_says_they_may_be_paid_for(
    server: _Server, tmp_path: Path, left: Any
) -> None:
    summary = left(server, tmp_path / "ledger.sqlite")
    assert (summary.done, summary.abandoned, summary.abandoned_calls) == (1, 3, 3)
    assert summary.lines()[0].startswith(
        "1 done, 0 failed, 3 left unfinished (3 with a call under way, which may be paid "
        "for, at a cost not counted here), in "
    )


def test_a_run_stopped_lets_its_calls_end_and_leaves_none_under_way(
    server: _Server, tmp_path: Path
) -> None:
    run = allama.batch(
        _provider(server),
        Row,
        DOCS,
        request=TEMPLATE,
        concurrency=4,
        ledger=tmp_path / "ledger.sqlite",
    )
    results = []
    for result in run:
        results.append(result)
        run.stop()  # those in flight finish and are recorded
    assert sorted(r.value.n for r in results if r.value is not None) == [0, 1, 2, 3]
    assert (run.summary.abandoned, run.summary.abandoned_calls) == (0, 0)
    assert "under way" not in run.summary.lines()[0]
