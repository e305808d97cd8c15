"""Closing a `RetryingProvider` ends the retries of the calls made before whose connections
it closes (a sync call's, one on the closing loop or on a loop not running; a call on
another loop running in another thread goes on, as `test_loops_and_lifetimes.py` shows):
one waiting out its backoff sends no further attempt (each would open new connections to
what was closed, and be paid for) and raises the error it would have retried, its attempts
recorded. A call
made after the close goes on as a call to a closed provider does: over new connections,
retried as before."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import allama
from _replay_server import ReplayServer, ReplyHandler
from allama import ChatRequest
from allama.errors import ServerError
from allama.wrappers import FailoverProvider, RetryingProvider, RetryPolicy
from allama.wrappers._gate import Gate, entered

REQUEST = ChatRequest("m").user("hi")
WAIT = 10.0
"""The test's own bound on a call that a close should end at once (a backoff is 30s)."""

LONG_BACKOFF = RetryPolicy(
    max_attempts=4, initial_backoff=30.0, max_backoff=60.0, jitter=0.0, budget=None
)
SHORT_BACKOFF = RetryPolicy(max_attempts=4, initial_backoff=0.01, jitter=0.0, budget=None)


class _Server(ReplayServer):
    statuses: list[int]
    """The status of each answer in turn, the last one again after."""
    posts: int


class _Handler(ReplyHandler):
    server: _Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        with self.server.lock:
            self.server.posts += 1
            statuses = self.server.statuses
            status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
        if status != 200:  # (the streams here are all refused so, before their first event)
            self.send_json(status, {"error": {"message": "busy", "type": "server_error"}})
        else:
            message = {"role": "assistant", "content": "ok"}
            self.send_json(
                200,
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": "m",
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
                },
            )


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen, httpd.lock = [], threading.Lock()
    httpd.statuses, httpd.posts = [500], 0
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def _http(server: _Server) -> Any:
    host, port = server.server_address[:2]
    return allama.provider(
        "openai-compatible", base_url=f"http://{host!s}:{port}/v1", api_key="sk-test"
    )


class _Backoff:
    """The retry's random source: called as a failed attempt's backoff is decided, just
    before its wait, so a test closes during the wait and not during the attempt."""

    def __init__(self) -> None:
        self.decided = threading.Event()

    def __call__(self) -> float:
        self.decided.set()
        return 0.5


def _retrying(server: _Server, policy: RetryPolicy = LONG_BACKOFF) -> tuple[Any, _Backoff]:
    backoff = _Backoff()
    return RetryingProvider(_http(server), policy, random=backoff), backoff


def _ended_by_close(error: BaseException | None, server: _Server) -> None:
    """The first attempt's 500 is what was raised, recorded as one attempt, and it was the
    only request the server saw."""
    assert isinstance(error, ServerError)
    assert error.status == 500
    assert error.context.metadata["allama.retry"] == {"attempts": 1, "gave_up": "closed"}
    assert server.posts == 1


def _call_in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


def _open_stream(target: Any) -> Callable[[], object]:
    return lambda: list(target.chat_stream(REQUEST))


@pytest.mark.parametrize("way", ["close", "with"])
@pytest.mark.parametrize("stream", [False, True], ids=["chat", "chat_stream"])
def test_a_sync_close_ends_the_backoff_and_sends_no_further_attempt(
    server: _Server, way: str, stream: bool
) -> None:
    target, backoff = _retrying(server)
    call = _open_stream(target) if stream else lambda: target.chat(REQUEST)
    if way == "with":
        with target:
            thread, raised = _call_in_thread(call)
            assert backoff.decided.wait(WAIT)
    else:
        thread, raised = _call_in_thread(call)
        assert backoff.decided.wait(WAIT)
        target.close()
    thread.join(WAIT)
    assert not thread.is_alive(), "the call went on waiting out its backoff after the close"
    _ended_by_close(raised[0] if raised else None, server)


@pytest.mark.parametrize("way", ["aclose", "async with"])
@pytest.mark.parametrize("stream", [False, True], ids=["achat", "achat_stream"])
def test_an_async_close_ends_the_backoff_and_sends_no_further_attempt(
    server: _Server, way: str, stream: bool
) -> None:
    target, backoff = _retrying(server)

    async def call() -> object:
        if stream:
            return [event async for event in await target.achat_stream(REQUEST)]
        return await target.achat(REQUEST)

    async def main() -> BaseException | None:
        task = asyncio.create_task(call())
        while not backoff.decided.is_set():
            await asyncio.sleep(0.001)
        if way == "async with":
            async with target:
                pass
        else:
            await target.aclose()
        try:
            await asyncio.wait_for(task, WAIT)
        except Exception as error:
            return error
        return None

    _ended_by_close(asyncio.run(main()), server)


def test_closing_a_failover_around_the_retry_ends_its_backoff(server: _Server) -> None:
    target, backoff = _retrying(server)
    outer = FailoverProvider([target])
    thread, raised = _call_in_thread(lambda: target.chat(REQUEST))
    assert backoff.decided.wait(WAIT)
    outer.close()
    thread.join(WAIT)
    assert not thread.is_alive()
    _ended_by_close(raised[0] if raised else None, server)


def test_a_close_ends_the_backoff_of_a_call_inside_a_batch_gate(server: _Server) -> None:
    # Inside a batch run's call the wait is on the run's stop: the close is seen all the same.
    target, backoff = _retrying(server)

    def call() -> None:
        with entered(Gate()):
            target.chat(REQUEST)

    thread, raised = _call_in_thread(call)
    assert backoff.decided.wait(WAIT)
    target.close()
    thread.join(WAIT)
    assert not thread.is_alive()
    _ended_by_close(raised[0] if raised else None, server)


def test_a_close_ends_a_callers_own_async_sleep(server: _Server) -> None:
    forever = asyncio.Event()

    async def sleep(seconds: float) -> None:
        await forever.wait()

    backoff = _Backoff()
    target = RetryingProvider(_http(server), LONG_BACKOFF, async_sleep=sleep, random=backoff)

    async def main() -> BaseException | None:
        task = asyncio.create_task(target.achat(REQUEST))
        while not backoff.decided.is_set():
            await asyncio.sleep(0.001)
        await target.aclose()
        try:
            await asyncio.wait_for(task, WAIT)
        except Exception as error:
            return error
        return None

    _ended_by_close(asyncio.run(main()), server)


def test_a_retry_not_closed_still_retries(server: _Server) -> None:
    server.statuses = [500, 500, 200]
    target, _ = _retrying(server, SHORT_BACKOFF)
    response = target.chat(REQUEST)
    assert response.text() == "ok"
    assert response.provider_data["allama"]["retry"] == {"attempts": 3}
    assert server.posts == 3


def test_an_async_retry_not_closed_still_retries(server: _Server) -> None:
    server.statuses = [500, 500, 200]
    target, _ = _retrying(server, SHORT_BACKOFF)
    response = asyncio.run(target.achat(REQUEST))
    assert response.text() == "ok"
    assert response.provider_data["allama"]["retry"] == {"attempts": 3}
    assert server.posts == 3


def test_a_call_made_after_the_close_is_retried_over_new_connections(server: _Server) -> None:
    # As a call to a closed provider opens new connections, its retry goes on as before.
    target, _ = _retrying(server, SHORT_BACKOFF)
    target.close()
    server.statuses = [500, 200]
    response = target.chat(REQUEST)
    assert response.text() == "ok"
    assert response.provider_data["allama"]["retry"] == {"attempts": 2}
    assert server.posts == 2

    async def again() -> Any:
        await target.aclose()
        server.statuses = [500, 200]
        return await target.achat(REQUEST)

    response = asyncio.run(again())
    assert response.text() == "ok"
    assert response.provider_data["allama"]["retry"] == {"attempts": 2}
    assert server.posts == 4
