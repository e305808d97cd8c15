"""A stream closed while another thread (sync) or task (async) reads it: the close returns
at once and raises nothing, and the read wakes at once (not when the server ends the
connection or the read timeout runs out) with an `Error` that says the stream was closed,
not retried, with what was paid as for a stream stopped early.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from allama.errors import REPORTED_USAGE_KEY, Error, NetworkError, paid_for
from allama.extract import ExtractionMetadata
from allama.types import ChatRequest, TextDelta

STALL = 30.0
"""Seconds the server holds the stream open after its one event: far past every bound."""
BOUND = 5.0
"""Seconds within which the close and the woken read must be done."""


class _Server:
    """Answers each streamed call with one event (the text its request names), then stalls
    until the test ends."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.release = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            match = re.search(rb"content-length: *(\d+)", head, re.I)
            while match and len(body) < int(match.group(1)):
                body += conn.recv(65536)
            text = json.loads(body)["messages"][-1]["content"]
            sent = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            sent += b"transfer-encoding: chunked\r\n\r\n"
            for chunk in self.chunks(text):
                event = b"data: %s\n\n" % json.dumps(chunk).encode()
                sent += b"%x\r\n%s\r\n" % (len(event), event)
            conn.sendall(sent)
            self.release.wait(STALL)

    def chunks(self, text: str) -> list[dict[str, Any]]:
        return [
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}],
            }
        ]

    def close(self) -> None:
        self.release.set()
        self.sock.close()


@pytest.fixture
def server() -> Iterator[_Server]:
    served = _Server()
    try:
        yield served
    finally:
        served.close()


def _provider(server: _Server) -> Any:
    return allama.provider(
        "openai-compatible", base_url=f"http://127.0.0.1:{server.port}/v1", api_key="k", timeout=60
    )


def _check_closed(error: BaseException | None, server: _Server) -> None:
    assert type(error) is Error  # not a NetworkError a retry would send again
    assert not isinstance(error, NetworkError)
    assert re.fullmatch(
        rf"the stream was closed \(close\(\) or aclose\(\)\) while the call to "
        rf"127\.0\.0\.1:{server.port} was in flight \((ReadError|RemoteProtocolError)\)",
        str(error),
    ), str(error)
    assert error.retryable is False
    assert error.provider == "openai-compatible"
    # The answer had begun and no usage came: made, and maybe billed, for what nothing
    # says (its cost unknown), as for a stream the caller stopped early.
    assert error.context.metadata[REPORTED_USAGE_KEY] == {}
    assert paid_for(error) == [{"provider": "openai-compatible", "model": None, "usage": {}}]


def _read_in_thread(
    stream: Any, until: str | None = None
) -> tuple[threading.Thread, dict[str, Any]]:
    """Read `stream` in a thread of its own; back once the reader has its first event (or,
    with `until`, an event of that type) and is blocked waiting for the next one: the
    thread, and what it saw (its events, the exception it ended with, when it ended)."""
    seen: dict[str, Any] = {"events": []}
    reached = threading.Event()

    def read() -> None:
        try:
            for event in stream:
                seen["events"].append(event)
                if until is None or event.type == until:
                    reached.set()
        except BaseException as raised:
            seen["error"] = raised
        finally:
            seen["at"] = time.monotonic()
            reached.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert reached.wait(BOUND)
    time.sleep(0.3)  # the reader is blocked on the stalled connection now
    return reader, seen


def test_closing_a_stream_another_thread_reads_wakes_it_as_closed(server: _Server) -> None:
    provider = _provider(server)
    try:
        stream = provider.chat_stream(ChatRequest("m").user("hel"))
        reader, seen = _read_in_thread(stream)
        started = time.monotonic()
        stream.close()  # raised `ValueError: generator already executing`
        assert time.monotonic() - started < BOUND
        reader.join(BOUND)
        assert not reader.is_alive()  # it waited for the server before
        assert seen["at"] - started < BOUND
        assert [e.text for e in seen["events"] if isinstance(e, TextDelta)] == ["hel"]
        _check_closed(seen.get("error"), server)
        assert stream.collector.error is seen["error"]
        stream.close()  # twice: nothing
        assert list(stream) == []
    finally:
        provider.close()


def test_closing_an_extraction_stream_another_thread_reads_wakes_it_as_closed(
    server: _Server,
) -> None:
    class Person(BaseModel):
        name: str

    provider = _provider(server)
    try:
        stream = allama.extract_stream(provider, Person, ChatRequest("m").user('{"name": "Ad'))
        reader, seen = _read_in_thread(stream)
        started = time.monotonic()
        stream.close()
        assert time.monotonic() - started < BOUND
        reader.join(BOUND)
        assert not reader.is_alive()
        assert stream.partial_output == '{"name": "Ad'
        error = seen["error"]
        _check_closed(error, server)
        record = ExtractionMetadata.from_error(error)
        assert record is not None
        assert record.usage is not None
        assert record.usage.input_tokens is None and record.usage.output_tokens is None
    finally:
        provider.close()


def test_closing_a_stream_from_its_own_thread_still_ends_it_quietly(server: _Server) -> None:
    provider = _provider(server)
    try:
        stream = provider.chat_stream(ChatRequest("m").user("hel"))
        first = next(stream)
        while not isinstance(first, TextDelta):
            first = next(stream)
        stream.close()
        stream.close()
        assert list(stream) == []
        assert stream.collector.error is None
    finally:
        provider.close()


def test_closing_an_async_stream_another_task_reads_wakes_it_as_closed(server: _Server) -> None:
    async def main() -> None:
        provider = _provider(server)
        try:
            stream = await provider.achat_stream(ChatRequest("m").user("hel"))
            seen: dict[str, Any] = {"events": []}
            first = asyncio.Event()

            async def read() -> None:
                try:
                    async for event in stream:
                        seen["events"].append(event)
                        first.set()
                except BaseException as raised:
                    seen["error"] = raised
                finally:
                    first.set()

            task = asyncio.create_task(read())
            await asyncio.wait_for(first.wait(), BOUND)
            await asyncio.sleep(0.3)
            started = time.monotonic()
            # raised `RuntimeError: aclose(): asynchronous generator is already running`
            await stream.aclose()
            assert time.monotonic() - started < BOUND
            await asyncio.wait_for(task, BOUND)
            assert [e.text for e in seen["events"] if isinstance(e, TextDelta)] == ["hel"]
            _check_closed(seen.get("error"), server)
            await stream.aclose()
            assert [event async for event in stream] == []
        finally:
            await provider.aclose()

    asyncio.run(main())


class _FinishedServer(_Server):
    """Answers with the text, then a chunk that finishes the answer and says its usage, then
    stalls before `[DONE]` (as a server that sends the usage chunk late does)."""

    def chunks(self, text: str) -> list[dict[str, Any]]:
        finished = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
        return [*super().chunks(text), finished]


@pytest.fixture
def finished_server() -> Iterator[_Server]:
    served = _FinishedServer()
    try:
        yield served
    finally:
        served.close()


def test_closing_a_finished_stream_another_thread_reads_keeps_its_answer(
    finished_server: _Server,
) -> None:
    provider = _provider(finished_server)
    try:
        stream = provider.chat_stream(ChatRequest("m").user("hello"))
        reader, seen = _read_in_thread(stream, until="finish")
        started = time.monotonic()
        stream.close()
        reader.join(BOUND)
        assert not reader.is_alive()
        assert seen["at"] - started < BOUND
        # It raised "the stream was closed ... (ReadError)": a whole, paid answer lost.
        assert "error" not in seen
        assert "finish" in [event.type for event in seen["events"]]
        assert stream.collector.error is None
        response = stream.response()
        assert response.text() == "hello"
        assert response.finish_reason == "stop"
        assert response.usage is not None
        assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 2)
    finally:
        provider.close()


def test_closing_a_finished_extraction_stream_another_thread_reads_keeps_its_value(
    finished_server: _Server,
) -> None:
    class Person(BaseModel):
        name: str

    provider = _provider(finished_server)
    try:
        stream = allama.extract_stream(provider, Person, ChatRequest("m").user('{"name": "Ada"}'))
        reader, seen = _read_in_thread(stream, until="finish")
        stream.close()
        reader.join(BOUND)
        assert not reader.is_alive()
        assert "error" not in seen
        extracted = stream.finish()
        assert extracted.value == Person(name="Ada")
        assert extracted.metadata.passes == 1
        assert extracted.metadata.usage is not None
        usage = extracted.metadata.usage
        assert (usage.input_tokens, usage.output_tokens) == (3, 2)
    finally:
        provider.close()


async def _read_to_finish_and_close(stream: Any) -> dict[str, Any]:
    """Read `stream` in a task of its own until its finish event, then close it from here
    while that task waits for what follows: what the read saw (its events, and the
    exception it ended with, if any)."""
    seen: dict[str, Any] = {"events": []}
    finished = asyncio.Event()

    async def read() -> None:
        try:
            async for event in stream:
                seen["events"].append(event)
                if event.type == "finish":
                    finished.set()
        except BaseException as raised:
            seen["error"] = raised
        finally:
            finished.set()

    task = asyncio.create_task(read())
    await asyncio.wait_for(finished.wait(), BOUND)
    await asyncio.sleep(0.3)
    await stream.aclose()
    await asyncio.wait_for(task, BOUND)
    return seen


def test_closing_a_finished_async_stream_another_task_reads_keeps_its_answer(
    finished_server: _Server,
) -> None:
    async def main() -> None:
        provider = _provider(finished_server)
        try:
            stream = await provider.achat_stream(ChatRequest("m").user("hello"))
            seen = await _read_to_finish_and_close(stream)
            assert "error" not in seen
            assert "finish" in [event.type for event in seen["events"]]
            assert stream.collector.error is None
            response = await stream.response()
            assert response.text() == "hello"
            assert response.finish_reason == "stop"
            assert response.usage is not None
            assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 2)
        finally:
            await provider.aclose()

    asyncio.run(main())


def test_closing_a_finished_async_extraction_stream_another_task_reads_keeps_its_value(
    finished_server: _Server,
) -> None:
    class Person(BaseModel):
        name: str

    async def main() -> None:
        provider = _provider(finished_server)
        try:
            request = ChatRequest("m").user('{"name": "Ada"}')
            stream = await allama.aextract_stream(provider, Person, request)
            seen = await _read_to_finish_and_close(stream)
            assert "error" not in seen
            extracted = await stream.finish()
            assert extracted.value == Person(name="Ada")
            assert extracted.metadata.passes == 1
            assert extracted.metadata.usage is not None
            usage = extracted.metadata.usage
            assert (usage.input_tokens, usage.output_tokens) == (3, 2)
        finally:
            await provider.aclose()

    asyncio.run(main())
