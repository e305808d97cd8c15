"""A call ended by a cancellation (`task.cancel()`, `asyncio.timeout`) or a Ctrl-C once its
request went out whole reached the provider, which may be making (and billing) the answer:
the exception, raised as itself, holds the extraction's record of that call made, its usage
empty and its cost unknown, as a read timeout at that moment says. A stream that answered
with its status, and then was cut before its answer began, is such a call too. One ended
before its request went out whole records no call."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMetadata, ExtractionMode, Usage
from allama.transport import Transport

UNKNOWN = "no token counts came with a call that was made (its answer cut off, say)"
ROLE = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",'
ROLE += b'"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'


class Person(BaseModel):
    name: str


def _request(mode: ExtractionMode = ExtractionMode.AUTO) -> ChatRequest:
    return ChatRequest("gpt-4o-mini").user("Ada").with_option(mode)


def _made_with_cost_unknown(error: BaseException) -> None:
    """The record `error` holds: one call made, no pass, its usage empty, its cost unknown."""
    record = ExtractionMetadata.from_error(error)
    assert record is not None
    assert (record.passes, record.usage, record.cost) == (0, Usage(), None)
    assert record.cost_missing == UNKNOWN
    assert record.to_json_dict()["usage"] == {}


# A server on 127.0.0.1 that reads each request whole, says so, and answers as told.


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)


class Server:
    """Reads a request whole, then holds it unanswered (`answer=None`), or sends a stream's
    status and `answer` (its first bytes), and holds it; `received` is set once it has."""

    def __init__(self, answer: bytes | None) -> None:
        self.answer = answer
        self.received = threading.Event()
        self.release = threading.Event()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            _read_request(conn)
            if self.answer is not None:
                head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                conn.sendall(head + b"transfer-encoding: chunked\r\n\r\n")
                if self.answer:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(self.answer), self.answer))
            self.received.set()
            self.release.wait(30)

    def close(self) -> None:
        self.release.set()
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[bytes | None], Server]]:
    servers: list[Server] = []

    def start(answer: bytes | None) -> Server:
        servers.append(Server(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _provider(url: str, transport: Transport | None = None, **options: Any) -> Any:
    return allama.provider(
        "openai", api_key="sk-test", base_url=url, transport=transport, **options
    )


async def _read(provider: Any, request: ChatRequest) -> Any:
    async with allama.aextract_stream(provider, Person, request) as stream:
        async for _ in stream:
            pass
        return await stream.finish()


# 1. Cancelled after the request went out whole: a call made, its cost unknown.


def test_a_call_cancelled_after_its_request_went_out_whole_is_recorded_made(
    serve: Callable[[bytes | None], Server],
) -> None:
    server = serve(None)

    async def main() -> BaseException:
        provider = _provider(server.url)
        task = asyncio.create_task(allama.aextract(provider, Person, _request()))
        await asyncio.to_thread(server.received.wait, 10)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as cancelled:
            return cancelled
        finally:
            await provider.aclose()
        raise AssertionError("not cancelled")

    _made_with_cost_unknown(asyncio.run(main()))


def test_a_call_ended_by_asyncio_timeout_records_what_a_read_timeout_records(
    serve: Callable[[bytes | None], Server],
) -> None:
    server = serve(None)

    async def main() -> tuple[BaseException, BaseException]:
        provider = _provider(server.url)
        with pytest.raises(TimeoutError) as caught:
            async with asyncio.timeout(None) as limit:
                call = asyncio.ensure_future(allama.aextract(provider, Person, _request()))
                await asyncio.to_thread(server.received.wait, 10)
                limit.reschedule(asyncio.get_running_loop().time())
                await call
        await provider.aclose()
        timing_out = _provider(server.url, timeout=0.2)
        with pytest.raises(allama.RequestTimeoutError) as timed_out:
            await allama.aextract(timing_out, Person, _request())
        await timing_out.aclose()
        return caught.value, timed_out.value

    ended, timed_out = asyncio.run(main())
    _made_with_cost_unknown(ended)
    kept, said = ExtractionMetadata.from_error(ended), ExtractionMetadata.from_error(timed_out)
    assert kept is not None and said is not None
    assert kept.to_json_dict() == said.to_json_dict()


def _handler(read: bool, then: Callable[[], Any]) -> Callable[[httpx2.Request], Any]:
    def handle(request: httpx2.Request) -> Any:
        if read:  # the body taken whole, as a connection takes it
            assert isinstance(request.stream, httpx2.SyncByteStream)
            b"".join(request.stream)
        return then()

    return handle


def _ctrl_c() -> Any:
    raise KeyboardInterrupt


def test_a_ctrl_c_after_the_request_went_out_whole_is_recorded_made() -> None:
    client = httpx2.Client(transport=httpx2.MockTransport(_handler(True, _ctrl_c)))
    provider = _provider("http://127.0.0.1:9/v1", Transport(client=client))
    with pytest.raises(KeyboardInterrupt) as caught:
        allama.extract(provider, Person, _request())
    _made_with_cost_unknown(caught.value)


class _Cut(httpx2.SyncByteStream):
    """A body that gives `head`, then meets a Ctrl-C."""

    def __init__(self, head: bytes) -> None:
        self.head = head

    def __iter__(self) -> Iterator[bytes]:
        if self.head:
            yield self.head
        raise KeyboardInterrupt


def test_a_ctrl_c_while_an_answer_is_read_is_recorded_made_unless_its_status_refused() -> None:
    def answered(status: int) -> Callable[[], httpx2.Response]:
        return lambda: httpx2.Response(status, stream=_Cut(b'{"choices": ['))

    for status, made in ((200, True), (429, False)):
        client = httpx2.Client(transport=httpx2.MockTransport(_handler(True, answered(status))))
        provider = _provider("http://127.0.0.1:9/v1", Transport(client=client))
        with pytest.raises(KeyboardInterrupt) as caught:
            allama.extract(provider, Person, _request())
        if made:
            _made_with_cost_unknown(caught.value)
        else:  # a refusal is not billed
            assert ExtractionMetadata.from_error(caught.value) is None


# 2. A stream cut after its status, before its answer began: a call made too.


def test_a_stream_cancelled_after_its_status_before_its_answer_is_recorded_made(
    serve: Callable[[bytes | None], Server],
) -> None:
    """The stream's status and a role chunk that carries none of the answer: the opening
    reads on past them for the answer's first piece (where a refusal may come instead), and
    is cancelled there. (Cancelled before the client read them, the call is made the same:
    its request went out whole.)"""
    server = serve(ROLE)

    async def main() -> BaseException:
        provider = _provider(server.url)
        task = asyncio.create_task(_read(provider, _request(ExtractionMode.NATIVE)))
        await asyncio.to_thread(server.received.wait, 10)
        await asyncio.sleep(0.05)  # the loop's turns to read the status and the chunk
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as cancelled:
            return cancelled
        finally:
            await provider.aclose()
        raise AssertionError("not cancelled")

    _made_with_cost_unknown(asyncio.run(main()))


def test_a_stream_ended_by_asyncio_timeout_as_its_first_event_is_awaited_is_recorded_made(
    serve: Callable[[bytes | None], Server],
) -> None:
    """`AUTO` reads the stream's first event as it opens it (for a refusal of the format)."""
    server = serve(b"")

    async def main() -> BaseException:
        provider = _provider(server.url)
        with pytest.raises(TimeoutError) as caught:
            async with asyncio.timeout(None) as limit:
                call = asyncio.ensure_future(_read(provider, _request()))
                await asyncio.to_thread(server.received.wait, 10)
                limit.reschedule(asyncio.get_running_loop().time())
                await call
        await provider.aclose()
        return caught.value

    _made_with_cost_unknown(asyncio.run(main()))


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.AUTO])
def test_a_ctrl_c_in_a_stream_after_its_status_before_its_answer_is_recorded_made(
    mode: ExtractionMode,
) -> None:
    def opened() -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, stream=_Cut(ROLE))

    client = httpx2.Client(transport=httpx2.MockTransport(_handler(True, opened)))
    provider = _provider("http://127.0.0.1:9/v1", Transport(client=client))
    with (
        pytest.raises(KeyboardInterrupt) as caught,
        allama.extract_stream(provider, Person, _request(mode)) as stream,
    ):
        for _ in stream:
            pass
    _made_with_cost_unknown(caught.value)


# 3. Ended before the request went out whole: no call made.


def test_a_cancellation_before_the_request_went_out_whole_records_no_call() -> None:
    async def main() -> list[BaseException]:
        waiting = asyncio.Event()

        async def handle(request: httpx2.Request) -> httpx2.Response:
            waiting.set()  # the body not taken
            await asyncio.sleep(30)
            raise AssertionError("not cancelled")

        client = httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
        provider = _provider("http://127.0.0.1:9/v1", Transport(async_client=client))
        ended: list[BaseException] = []
        calls: list[Callable[[], Any]] = [
            lambda: allama.aextract(provider, Person, _request()),
            lambda: _read(provider, _request()),
        ]
        for call in calls:
            waiting.clear()
            task = asyncio.create_task(call())
            await waiting.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError) as caught:
                await task
            ended.append(caught.value)
        await client.aclose()
        return ended

    for cancelled in asyncio.run(main()):
        assert ExtractionMetadata.from_error(cancelled) is None


def test_a_ctrl_c_before_the_request_went_out_whole_records_no_call() -> None:
    client = httpx2.Client(transport=httpx2.MockTransport(_handler(False, _ctrl_c)))
    provider = _provider("http://127.0.0.1:9/v1", Transport(client=client))
    with pytest.raises(KeyboardInterrupt) as caught:
        allama.extract(provider, Person, _request())
    assert ExtractionMetadata.from_error(caught.value) is None
    with (
        pytest.raises(KeyboardInterrupt) as caught,
        allama.extract_stream(provider, Person, _request()) as stream,
    ):
        for _ in stream:
            pass
    assert ExtractionMetadata.from_error(caught.value) is None
