"""One provider used across event loops and threads, against a server on 127.0.0.1.

A close ends the retries of the calls whose connections it closes, as a provider's close
does: `aclose()` the closing loop's, `close()` the sync calls' and those of loops not
running; a call on another loop, running in another thread, goes on retrying. An async
stream belongs to the event loop that opened it: read on another (a second
`asyncio.run`), it ends with an allama error that says so, not retryable, never a stream
cut short.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _replay_server import ReplayServer, ReplyHandler
from allama import ChatRequest
from allama.errors import IncompleteStreamError, ServerError, StreamError
from allama.stream import AsyncChatStream
from allama.wrappers import FailoverProvider, RetryingProvider, RetryPolicy

REQUEST = ChatRequest("m").user("hi")
WAIT = 10.0
"""The test's own bound on a wait that should end at once."""

POLICY = RetryPolicy(max_attempts=3, initial_backoff=30.0, jitter=0.0, budget=None)
ANSWER = '{"author": "Ada", "year": 1843}'

ENDED = (
    "the stream was opened on an event loop that has ended: a stream is read on the event "
    "loop that opened it (inside the same asyncio.run)"
)
ANOTHER = (
    "the stream was opened on another event loop: a stream is read on the event loop that "
    "opened it (inside the same asyncio.run)"
)


class Program(BaseModel):
    author: str
    year: int


class _Server(ReplayServer):
    statuses: list[int]
    """The status of each plain call's answer in turn, the last one again after."""
    posts: int


def _chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return b"data: " + json.dumps({**body, **more}).encode() + b"\n\n"


class _Handler(ReplyHandler):
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        with self.server.lock:
            self.server.posts += 1
            statuses = self.server.statuses
            status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
        if body.get("stream"):
            self.start_chunked()
            self.chunk(_chunk({"role": "assistant", "content": ANSWER[:10]}))
            self.chunk(_chunk({"content": ANSWER[10:]}))
            usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
            self.chunk(_chunk({}, "stop", usage=usage))
            self.chunk(b"data: [DONE]\n\n")
            self.end_chunked()
        elif status != 200:
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
    httpd.statuses, httpd.posts = [200], 0
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


class _Pause:
    """The retry's random source and async sleep: the wait of a call on another loop ends
    only once the test says so (`go_on`), after its close; the close's own loop sees the
    waits as the standard sleep would."""

    def __init__(self) -> None:
        self.decided = threading.Event()
        self.go_on = threading.Event()

    def random(self) -> float:
        self.decided.set()
        return 0.5

    async def sleep(self, seconds: float) -> None:
        await asyncio.to_thread(self.go_on.wait, WAIT)


# Retries on several loops


def _in_thread(call: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["result"] = call()
        except BaseException as error:
            out["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


@pytest.mark.parametrize("closed", ["retrying", "failover around it"])
@pytest.mark.parametrize("way", ["aclose", "close"])
def test_a_close_on_one_loop_leaves_the_retries_of_another_running_loop(
    server: _Server, closed: str, way: str
) -> None:
    server.statuses = [500, 200, 200]
    pause = _Pause()
    target = RetryingProvider(_http(server), POLICY, async_sleep=pause.sleep, random=pause.random)
    closing = target if closed == "retrying" else FailoverProvider([target])
    # Another thread's loop, its call waiting out its backoff after a 500.
    thread, out = _in_thread(lambda: asyncio.run(target.achat(REQUEST)))
    assert pause.decided.wait(WAIT)

    async def on_this_loop() -> str:
        if way == "aclose":
            await closing.aclose()
        else:
            closing.close()
        return (await target.achat(REQUEST)).text()

    assert asyncio.run(on_this_loop()) == "ok"
    pause.go_on.set()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert "error" not in out, out.get("error")
    response = out["result"]
    assert isinstance(response, allama.ChatResponse)
    assert response.text() == "ok"
    assert response.provider_data["allama"]["retry"] == {"attempts": 2}
    assert server.posts == 3


def test_a_sync_close_ends_the_retries_of_a_loop_not_running(server: _Server) -> None:
    server.statuses = [500, 200]
    pause = _Pause()
    target = RetryingProvider(_http(server), POLICY, random=pause.random)
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(target.achat(REQUEST))
        loop.run_until_complete(asyncio.to_thread(pause.decided.wait, WAIT))
        target.close()  # its loop stands stopped, the call in its pause
        with pytest.raises(ServerError) as caught:
            loop.run_until_complete(asyncio.wait_for(task, WAIT))
        error = caught.value
    finally:
        loop.close()
    assert error.status == 500
    assert error.context.metadata["allama.retry"] == {"attempts": 1, "gave_up": "closed"}
    assert server.posts == 1


def test_an_async_close_ends_the_retries_of_a_sync_call(server: _Server) -> None:
    # The sync client is closed by `aclose()` too: its calls make no further attempt.
    server.statuses = [500, 200]
    pause = _Pause()
    target = RetryingProvider(_http(server), POLICY, random=pause.random)
    thread, out = _in_thread(lambda: target.chat(REQUEST))
    assert pause.decided.wait(WAIT)
    asyncio.run(target.aclose())
    thread.join(WAIT)
    assert not thread.is_alive()
    error = out.get("error")
    assert isinstance(error, ServerError)
    assert error.context.metadata["allama.retry"] == {"attempts": 1, "gave_up": "closed"}
    assert server.posts == 1


# Streams read on another loop


async def _read(stream: Any) -> list[str]:
    return [event.type async for event in stream]


async def _opened(target: Any, events: int) -> AsyncChatStream:
    stream: AsyncChatStream = await target.achat_stream(REQUEST)
    for _ in range(events):
        await anext(stream)
    return stream


def _refused(caught: BaseException, said: str) -> None:
    assert type(caught) is StreamError
    assert str(caught) == said
    assert caught.retryable is False


@pytest.mark.parametrize("events", [0, 1], ids=["unread", "one event read"])
@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "retrying"])
def test_a_stream_read_in_another_asyncio_run_says_its_loop_ended(
    server: _Server, events: int, wrapped: bool
) -> None:
    provider = _http(server)
    target = RetryingProvider(provider, POLICY) if wrapped else provider
    stream = asyncio.run(_opened(target, events))
    with pytest.raises(StreamError) as caught:
        asyncio.run(_read(stream))
    _refused(caught.value, ENDED)
    # The stream ended with it: its response says the same, never a stream cut short.
    with pytest.raises(StreamError) as again:
        asyncio.run(stream.response())
    assert again.value is caught.value
    assert server.posts == 1


def test_an_extraction_stream_read_in_another_asyncio_run_says_its_loop_ended(
    server: _Server,
) -> None:
    provider = _http(server)

    async def opened() -> Any:
        return await allama.aextract_stream(provider, Program, REQUEST)

    stream = asyncio.run(opened())
    with pytest.raises(StreamError) as caught:
        asyncio.run(stream.finish())
    assert not isinstance(caught.value, IncompleteStreamError)
    _refused(caught.value, ENDED)
    assert server.posts == 1


def test_a_stream_read_on_another_loop_while_its_own_stands_stopped(server: _Server) -> None:
    provider = _http(server)
    own = asyncio.new_event_loop()
    try:
        stream = own.run_until_complete(_opened(provider, 1))
        with pytest.raises(StreamError) as caught:
            asyncio.run(_read(stream))
        _refused(caught.value, ANOTHER)
        # Back on its own loop, it says the same: it ended there, not cut short.
        with pytest.raises(StreamError) as again:
            own.run_until_complete(stream.response())
        assert again.value is caught.value
        # Its own loop calls on, over the provider's connections there.
        response = own.run_until_complete(provider.achat(REQUEST))
        assert response.text() == "ok"
    finally:
        own.close()


def test_a_stream_read_on_its_own_loop_is_whole(server: _Server) -> None:
    provider = _http(server)

    async def whole() -> str:
        stream = await _opened(provider, 1)
        return (await stream.response()).text()

    assert asyncio.run(whole()) == ANSWER


def test_a_sync_stream_read_in_another_thread_is_whole(server: _Server) -> None:
    stream = _http(server).chat_stream(REQUEST)
    thread, out = _in_thread(lambda: stream.response().text())
    thread.join(WAIT)
    assert out == {"result": ANSWER}
