"""Streamed calls and the connection pool, against a local server that counts connections:
a stream dropped unread gives its connection back when it is collected, and a stream read to
its end marker leaves its connection to the next call (the body's end read after it)."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest

from _replay_server import ReplayServer, ReplyHandler
from allama.providers import provider
from allama.providers._http import HttpProvider
from allama.transport import Transport
from allama.types import ChatRequest, FinishReason

REQUEST = ChatRequest("m").user("Hello")


class _Server(ReplayServer):
    conns = 0
    """Connections accepted."""
    open = 0
    """Connections the server still holds (its handler not ended)."""


class _Handler(ReplyHandler):
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.conns += 1
            self.server.open += 1

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.lock:
                self.server.open -= 1

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length))
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        if not body.get("stream"):
            self.send_json(
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "Hi there"},
                            "finish_reason": "stop",
                        }
                    ],
                },
            )
            return
        chunks: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
            {"choices": [{"index": 0, "delta": {"content": " there"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
        ]
        self.start_chunked()
        for chunk in chunks:
            self.chunk(b"data: " + json.dumps({**base, **chunk}).encode() + b"\n\n")
        self.chunk(b"data: [DONE]\n\n")
        if "held" in self.path:
            time.sleep(1.0)  # the stream kept open after its end marker, then cut
            self.close_connection = True
            return
        self.end_chunked()  # (written apart, as servers do)


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.lock = threading.Lock()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _transport(connections: int = 100) -> Transport:
    return Transport(
        timeout=httpx2.Timeout(5.0, pool=0.5), limits=httpx2.Limits(max_connections=connections)
    )


def _provider(server: _Server, transport: Transport, path: str = "v1") -> HttpProvider:
    host, port = server.server_address[:2]
    base_url = f"http://{host!s}:{port}/{path}"
    made = provider("openai-compatible", base_url=base_url, transport=transport)
    assert isinstance(made, HttpProvider)
    return made


def _counted(server: _Server) -> tuple[int, int]:
    with server.lock:
        return server.conns, server.open


def _until(check: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 2.0
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _fresh(server: _Server) -> None:
    """Counts from zero, every connection of an earlier test ended."""
    assert _until(lambda: _counted(server)[1] == 0)
    with server.lock:
        server.conns = 0


def test_streams_dropped_unread_give_their_connections_back(server: _Server) -> None:
    _fresh(server)
    transport = _transport(connections=2)
    target = _provider(server, transport)
    gc.collect()  # (what earlier tests left, collected before the warnings are caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            target.chat_stream(REQUEST)  # dropped at once, never read
        gc.collect()
        assert target.chat(REQUEST).text() == "Hi there"
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert _until(lambda: _counted(server) == (6, 1))  # the last call's, kept in the pool
    transport.close()
    assert _until(lambda: _counted(server)[1] == 0)


def test_async_streams_dropped_unread_give_their_connections_back(server: _Server) -> None:
    _fresh(server)
    transport = _transport(connections=2)
    target = _provider(server, transport)

    async def run() -> str:
        async with transport:
            for _ in range(5):
                await target.achat_stream(REQUEST)  # dropped at once, never read
            gc.collect()
            return (await target.achat(REQUEST)).text()

    assert asyncio.run(run()) == "Hi there"
    assert _until(lambda: _counted(server) == (6, 0))


def test_sequential_streams_reuse_one_connection(server: _Server) -> None:
    _fresh(server)
    with _transport() as transport:
        target = _provider(server, transport)
        for _ in range(5):
            with target.chat_stream(REQUEST) as stream:
                response = stream.response()
            assert (response.text(), response.finish_reason) == ("Hi there", FinishReason.STOP)
        for _ in range(5):
            with target.chat_stream(REQUEST) as stream:
                assert "finish" in [event.type for event in stream]
        assert _counted(server) == (1, 1)
    assert _until(lambda: _counted(server) == (1, 0))


def test_sequential_async_streams_reuse_one_connection(server: _Server) -> None:
    _fresh(server)

    async def run() -> list[str]:
        texts = []
        async with _transport() as transport:
            target = _provider(server, transport)
            for _ in range(10):
                async with await target.achat_stream(REQUEST) as stream:
                    texts.append((await stream.response()).text())
        return texts

    assert asyncio.run(run()) == ["Hi there"] * 10
    assert _until(lambda: _counted(server) == (1, 0))


def test_a_stream_kept_open_after_its_end_marker_ends_at_once(server: _Server) -> None:
    _fresh(server)
    with _transport() as transport:
        target = _provider(server, transport, path="held/v1")
        started = time.monotonic()
        with target.chat_stream(REQUEST) as stream:
            response = stream.response()
        took = time.monotonic() - started
        assert response.text() == "Hi there"
        assert took < 0.5  # the server holds it a second

        async def run() -> tuple[str, float]:
            began = time.monotonic()
            async with await target.achat_stream(REQUEST) as stream:
                text = (await stream.response()).text()
            return text, time.monotonic() - began

        text, took = asyncio.run(run())
        assert text == "Hi there"
        assert took < 0.5
    # Neither connection went back to the pool: the second call made its own.
    assert _counted(server)[0] == 2
    assert _until(lambda: _counted(server)[1] == 0)  # (the server's hold over)


_TRICKLING_SERVER = r"""
import http.server, json, sys, time

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        events = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        def chunk(data):
            self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            self.wfile.flush()
        for event in events:
            chunk(b"data: " + json.dumps({**base, **event}).encode() + b"\n\n")
        chunk(b"data: [DONE]\n\n")
        ends = time.monotonic() + 5.0
        try:
            while time.monotonic() < ends:  # a byte of tail every tenth of a millisecond or so
                chunk(b" ")
                time.sleep(0.0001)
        except OSError:
            pass
        self.close_connection = True

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.fixture
def trickling() -> Iterator[str]:
    """A server in a process of its own (its bytes come on time, whatever this process's
    threads do) whose stream's tail is a byte at a time, for five seconds."""
    process = subprocess.Popen(
        [sys.executable, "-c", _TRICKLING_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        yield f"http://127.0.0.1:{int(process.stdout.readline())}/v1"
    finally:
        process.kill()
        process.wait()


def test_a_tail_that_trickles_in_is_read_for_a_tenth_of_a_second_at_most(trickling: str) -> None:
    # Each byte came within a millisecond of the last: the sync drain read on past its
    # deadline, up to its 8 KiB (seconds), where the async one stopped at its tenth.
    with _transport() as transport:
        target = provider("openai-compatible", base_url=trickling, transport=transport)
        started = time.monotonic()
        with target.chat_stream(REQUEST) as stream:
            response = stream.response()
        took = time.monotonic() - started
        assert response.text() == "Hi"
        assert took < 0.4

        async def run() -> tuple[str, float]:
            began = time.monotonic()
            async with await target.achat_stream(REQUEST) as stream:
                text = (await stream.response()).text()
            return text, time.monotonic() - began

        text, took = asyncio.run(run())
        assert text == "Hi"
        assert took < 0.4
