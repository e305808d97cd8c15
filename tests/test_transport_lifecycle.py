"""What a provider's connections become as loops end and the provider is closed, over real
sockets: a server in a process of its own (so that this process's descriptors are the
client's alone) answers after the delay each request asks for.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from allama.errors import REPORTED_USAGE_KEY, Error
from allama.providers import OpenAICompatibleProvider, provider
from allama.transport import Transport
from allama.types import ChatRequest, TextDelta
from allama.wrappers import RetryingProvider

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd"
)

SERVER = r"""
import json, re, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATS = {"requests": 0, "open": 0}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        with LOCK:
            STATS["open"] += 1

    def finish(self):
        try:
            super().finish()
        finally:
            with LOCK:
                STATS["open"] -= 1

    def answer(self, body):
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def events(self, text):
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        delta = {"role": "assistant", "content": text}
        yield json.dumps({**base, "choices": [{"index": 0, "delta": delta}]})
        yield json.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        yield "[DONE]"

    def do_GET(self):
        with LOCK:
            self.answer(json.dumps(STATS).encode())

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with LOCK:
            STATS["requests"] += 1
        text = request["messages"][-1]["content"]
        delay = float(re.search(r"delay=([0-9.]+)", text).group(1))
        if request.get("stream"):  # its first event at once, the rest after the delay
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                for event in self.events(text):
                    data = b"data: %s\n\n" % event.encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                    time.sleep(delay)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            return
        time.sleep(delay)
        said = {"text": text, "gateway": self.headers.get("x-gateway-key")}
        body = json.dumps({
            "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(said)}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        }).encode()
        try:
            self.answer(body)
        except OSError:
            pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        pass


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


class _Server:
    def __init__(self, port: int) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}/v1"

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/") as answer:
            stats: dict[str, int] = json.loads(answer.read())
        return stats

    def wait_for(self, key: str, value: int) -> None:
        deadline = time.monotonic() + 10
        while self.stats()[key] != value:
            assert time.monotonic() < deadline, (key, value, self.stats())
            time.sleep(0.01)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    script = tmp_path_factory.mktemp("server") / "server.py"
    script.write_text(SERVER)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield _Server(int(process.stdout.readline()))
    finally:
        process.kill()
        process.wait()


@pytest.fixture(autouse=True)
def _no_proxies() -> Iterator[None]:
    """Calls go straight to the test's server, whatever proxies the machine's environment
    names (httpx2 and urllib take them from there); a test that wants some sets them. A
    monkeypatch of its own: a test's `monkeypatch.undo()` leaves them unset."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.lower().endswith("_proxy"):
                patch.delenv(name)
        yield


def _provider(server: _Server, **options: Any) -> OpenAICompatibleProvider:
    return provider("openai-compatible", base_url=server.base, api_key="sk-test", **options)


def _request(text: str, delay: float = 0.0) -> ChatRequest:
    return ChatRequest("m").user(f"{text} delay={delay}")


def _said(answer: Any) -> dict[str, Any]:
    said: dict[str, Any] = json.loads(answer.text())
    return said


def _descriptors() -> tuple[int, int]:
    """This process's open descriptors, and the sockets among them, once what nothing
    holds is collected."""
    gc.collect()
    sockets = 0
    names = os.listdir("/proc/self/fd")
    for name in names:
        with contextlib.suppress(OSError):  # gone meanwhile
            sockets += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
    return len(names), sockets


def _closed_message(server: _Server) -> str:
    return (
        r"the provider's connections were closed \(close\(\) or aclose\(\)\) while the call "
        rf"to 127\.0\.0\.1:{server.port} was in flight \((RemoteProtocolError|ReadError)\)"
    )


# Loops that end, or are never closed


def test_loops_never_closed_give_back_their_descriptors(server: _Server) -> None:
    """Older code runs each job on a loop it never closes: the provider let none of them
    go (its client holds the loop), four descriptors a job until the process ran out."""
    target = _provider(server)

    def job(number: int) -> None:
        loop = asyncio.new_event_loop()
        answer = loop.run_until_complete(target.achat(_request(f"job {number}")))
        assert _said(answer)["text"] == f"job {number} delay=0.0"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # the loops left unclosed
        for number in range(3):
            job(number)
        before = _descriptors()
        for number in range(3, 23):
            job(number)
        after = _descriptors()
    # The last loop's client and its one connection are kept, as after the third job.
    assert after == before
    assert target._transport._async_clients is not None
    assert len(target._transport._async_clients) == 1
    target.close()


def test_a_stopped_loop_that_runs_again_calls_on_a_client_of_its_own(server: _Server) -> None:
    target = _provider(server)
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        said = [
            _said(loop.run_until_complete(target.achat(_request(name))))["text"]
            for loop, name in ((first, "a"), (second, "b"), (first, "c"), (second, "d"))
        ]
        assert said == ["a delay=0.0", "b delay=0.0", "c delay=0.0", "d delay=0.0"]
        clients = target._transport._async_clients
        assert clients is not None and list(clients) == [second]
    finally:
        second.run_until_complete(target.aclose())
        first.close()
        second.close()


def test_a_loop_running_in_another_thread_keeps_its_client(server: _Server) -> None:
    """Neither a new loop calling nor `close()` touches the client of a loop that runs:
    its call in flight is answered."""
    target = _provider(server)
    answers: list[str] = []

    def other_thread() -> None:
        answer = asyncio.run(target.achat(_request("slow", 0.5)))
        answers.append(_said(answer)["text"])

    before = server.stats()["requests"]
    thread = threading.Thread(target=other_thread)
    thread.start()
    server.wait_for("requests", before + 1)
    assert _said(asyncio.run(target.achat(_request("quick"))))["text"] == "quick delay=0.0"
    target.close()
    thread.join(10)
    assert answers == ["slow delay=0.5"]
    target.close()


def test_close_after_asyncio_run_closes_that_loops_connections(server: _Server) -> None:
    """`with provider:` around `asyncio.run`: the loop's connections stayed open as long
    as the provider lived (`close()` closed the sync client alone)."""
    _, sockets = _descriptors()
    open_before = server.stats()["open"]  # this question's own connection among them

    async def calls(target: OpenAICompatibleProvider) -> list[str]:
        answers = await asyncio.gather(*(target.achat(_request(f"{n}", 0.1)) for n in range(4)))
        return [_said(answer)["text"] for answer in answers]

    with _provider(server) as target:
        assert asyncio.run(calls(target)) == [f"{n} delay=0.1" for n in range(4)]
        assert _descriptors()[1] == sockets + 4
    assert _descriptors()[1] == sockets
    server.wait_for("open", open_before)
    assert target._transport._async_clients is not None
    assert len(target._transport._async_clients) == 0


# Clients of the caller's


def test_close_leaves_the_callers_clients_in_use(server: _Server) -> None:
    """A transport closed went on with clients of its own making in place of the caller's:
    without their headers, proxy or hooks, and never closed."""
    seen: list[str] = []

    def hook(request: httpx2.Request) -> None:
        seen.append("sync")

    async def ahook(request: httpx2.Request) -> None:
        seen.append("async")

    headers = {"x-gateway-key": "K"}
    client = httpx2.Client(headers=headers, event_hooks={"request": [hook]})
    aclient = httpx2.AsyncClient(headers=headers, event_hooks={"request": [ahook]})
    transport = Transport(client=client, async_client=aclient)
    target = _provider(server, transport=transport)
    with transport:
        assert _said(target.chat(_request("1")))["gateway"] == "K"
    assert _said(target.chat(_request("2")))["gateway"] == "K"

    async def calls() -> list[str]:
        async with transport:
            first = await target.achat(_request("3"))
        second = await target.achat(_request("4"))
        assert not aclient.is_closed
        await aclient.aclose()
        return [_said(first)["gateway"], _said(second)["gateway"]]

    assert asyncio.run(calls()) == ["K", "K"]
    assert seen == ["sync", "sync", "async", "async"]
    assert not client.is_closed
    client.close()


# Calls in flight when the provider is closed


def test_sync_calls_in_flight_when_the_provider_is_closed_fail_as_closed_not_retried(
    server: _Server,
) -> None:
    """Eight threads' calls: each failed as a network error, which a `RetryingProvider`
    sent again (sixteen paid requests for eight calls), and some waited out their read
    timeout. Each fails at once, saying why, made and maybe billed."""
    inner = _provider(server)
    target = RetryingProvider(inner)
    failures: list[BaseException] = []

    def call(number: int) -> None:
        try:
            target.chat(_request(f"call {number}", 5.0))
        except BaseException as error:
            failures.append(error)

    before = server.stats()["requests"]
    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    server.wait_for("requests", before + 8)
    closed_at = time.monotonic()
    inner.close()
    for thread in threads:
        thread.join(10)
    assert time.monotonic() - closed_at < 2.0
    assert len(failures) == 8
    for error in failures:
        assert type(error) is Error and not error.retryable
        assert re.fullmatch(_closed_message(server), str(error))
        assert error.context.metadata[REPORTED_USAGE_KEY] == {}
    assert server.stats()["requests"] == before + 8
    # A call made after the close opens connections of its own.
    assert _said(target.chat(_request("after")))["text"] == "after delay=0.0"
    inner.close()


def test_an_async_call_in_flight_when_its_loop_closes_the_provider_fails_as_closed(
    server: _Server,
) -> None:
    inner = _provider(server)
    target = RetryingProvider(inner)
    before = server.stats()["requests"]

    async def run() -> BaseException:
        call = asyncio.create_task(target.achat(_request("call", 5.0)))
        while server.stats()["requests"] != before + 1:
            await asyncio.sleep(0.01)
        await inner.aclose()
        with pytest.raises(Error) as caught:
            await asyncio.wait_for(call, 2.0)
        return caught.value

    error = asyncio.run(run())
    assert type(error) is Error and not error.retryable
    assert re.fullmatch(_closed_message(server), str(error))
    assert server.stats()["requests"] == before + 1


def test_a_sync_stream_cut_by_close_fails_as_closed(server: _Server) -> None:
    """Closed while the stream's headers are awaited: the same error as a call's."""
    target = _provider(server)
    failures: list[BaseException] = []

    def stream() -> None:
        try:
            for _ in target.chat_stream(_request("stream", 5.0)):
                pass
        except BaseException as error:
            failures.append(error)

    before = server.stats()["requests"]
    thread = threading.Thread(target=stream)
    thread.start()
    server.wait_for("requests", before + 1)
    target.close()
    thread.join(10)
    assert len(failures) == 1 and type(failures[0]) is Error
    assert re.fullmatch(_closed_message(server), str(failures[0]))


def test_streams_cut_by_close_fail_as_closed_made_and_maybe_billed(server: _Server) -> None:
    """A stream whose first event came, its client closed before the rest: not a network
    failure to try again."""
    target = _provider(server)
    began = threading.Event()
    failures: list[BaseException] = []
    texts: list[str] = []

    def sync_stream() -> None:
        try:
            for event in target.chat_stream(_request("sync", 5.0)):
                if isinstance(event, TextDelta):
                    texts.append(event.text)
                    began.set()
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=sync_stream)
    thread.start()
    assert began.wait(10)
    target.close()
    thread.join(10)

    async def async_stream() -> None:
        stream = await target.achat_stream(_request("async", 5.0))
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    texts.append(event.text)
                    await target.aclose()
        except BaseException as error:
            failures.append(error)

    asyncio.run(async_stream())
    assert texts == ["sync delay=5.0", "async delay=5.0"]
    assert [type(error) for error in failures] == [Error, Error]
    for error in failures:
        assert isinstance(error, Error) and not error.retryable
        assert re.fullmatch(_closed_message(server), str(error))
        assert error.context.metadata[REPORTED_USAGE_KEY] == {}


# Calls that reach the pool, or a socket, as the provider is closed


def _refused_message(server: _Server) -> str:
    return _closed_message(server).replace(r"(RemoteProtocolError|ReadError)", "ConnectError")


def _one_call(target: OpenAICompatibleProvider, failures: list[BaseException]) -> threading.Thread:
    def call() -> None:
        try:
            target.chat(_request("late"))
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def test_a_connection_being_opened_as_the_provider_closes_is_refused(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call whose connection was being opened when `close()` ran went on over it (its
    socket was in none of the pool's connections yet, and closing the connection did
    nothing): answered after the close, or left waiting for its read timeout. It fails at
    once as closed, and its request never goes out."""
    target = _provider(server)
    connected, go_on = threading.Event(), threading.Event()
    callers: list[threading.Thread] = []
    create = socket.create_connection

    def connect(*args: Any, **kwargs: Any) -> socket.socket:
        sock = create(*args, **kwargs)
        if threading.current_thread() in callers:
            connected.set()  # connected, not yet handed to the pool's connection
            assert go_on.wait(10)
        return sock

    monkeypatch.setattr(socket, "create_connection", connect)
    before = server.stats()["requests"]
    failures: list[BaseException] = []
    callers.append(_one_call(target, failures))
    assert connected.wait(10)
    target.close()
    go_on.set()
    callers[0].join(10)
    assert [type(error) for error in failures] == [Error]
    error = failures[0]
    assert isinstance(error, Error) and not error.retryable
    assert re.fullmatch(_refused_message(server), str(error))
    assert REPORTED_USAGE_KEY not in error.context.metadata  # nothing went out: not paid
    assert server.stats()["requests"] == before
    monkeypatch.undo()
    assert _said(target.chat(_request("after")))["text"] == "after delay=0.0"
    target.close()


class _HeldTransport(Transport):
    """Holds each call between taking its client and sending, until told to go on."""

    def __init__(self) -> None:
        super().__init__()
        self.taken, self.go_on = threading.Event(), threading.Event()

    def _build(self, client: Any, owned: bool, request: Any, deadline: Any) -> httpx2.Request:
        self.taken.set()
        assert self.go_on.wait(10)
        return super()._build(client, owned, request, deadline)


def test_a_call_reaching_the_pool_after_the_provider_closed_it_is_refused(
    server: _Server,
) -> None:
    """A call that took the client before `close()` and reached its pool after: the closed
    pool opened a new connection for it, which nothing would close, and the call went on."""
    transport = _HeldTransport()
    target = _provider(server, transport=transport)
    before = server.stats()["requests"]
    failures: list[BaseException] = []
    thread = _one_call(target, failures)
    assert transport.taken.wait(10)
    transport.close()
    transport.go_on.set()
    thread.join(10)
    assert [type(error) for error in failures] == [Error]
    assert re.fullmatch(_refused_message(server), str(failures[0]))
    assert server.stats()["requests"] == before
    transport.close()


def test_a_connection_being_opened_as_the_provider_closes_is_refused_with_proxies_set(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a proxy and NO_PROXY in the environment, httpx2 gives the client a mount that
    is no transport (`None`, for the NO_PROXY hosts): the guard was left off all its
    pools, and a call whose connection was being opened when `close()` ran went on, its
    request sent (and paid for) after the close. It fails at once as closed."""
    unused = socket.socket()  # bound, never listening: nothing answers as the proxy
    unused.bind(("127.0.0.1", 0))
    proxy = f"http://127.0.0.1:{unused.getsockname()[1]}"
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    target = _provider(server)
    connected, go_on = threading.Event(), threading.Event()
    callers: list[threading.Thread] = []
    create = socket.create_connection

    def connect(*args: Any, **kwargs: Any) -> socket.socket:
        sock = create(*args, **kwargs)
        if threading.current_thread() in callers:
            connected.set()  # connected, not yet handed to the pool's connection
            assert go_on.wait(10)
        return sock

    monkeypatch.setattr(socket, "create_connection", connect)
    try:
        before = server.stats()["requests"]
        failures: list[BaseException] = []
        callers.append(_one_call(target, failures))
        assert connected.wait(10)
        target.close()
        go_on.set()
        callers[0].join(10)
        assert [type(error) for error in failures] == [Error]
        assert re.fullmatch(_refused_message(server), str(failures[0]))
        assert server.stats()["requests"] == before  # nothing went out after the close
        callers.clear()
        # the next call goes straight to the server (a NO_PROXY host), not to the proxy
        assert _said(target.chat(_request("after")))["text"] == "after delay=0.0"
        assert server.stats()["requests"] == before + 1
        target.close()
    finally:
        unused.close()


def _socket_inode(descriptor: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{descriptor}")
    except FileNotFoundError:
        return None


def test_a_socket_a_call_still_holds_keeps_its_descriptor_until_the_call_lets_go(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`close()` shut a call's socket down and closed it: a reader that had taken the
    socket's descriptor but not yet begun to wait on it (a thread switched out there) then
    waited on whatever socket was next given that number, until its read timeout. The
    descriptor stays the call's own, shut down, until nothing holds its socket."""
    from httpcore2._backends.sync import SyncStream

    target = _provider(server)
    reading, go_on = threading.Event(), threading.Event()
    callers: list[threading.Thread] = []
    seen: list[tuple[int, str | None]] = []
    read = SyncStream.read

    def held_read(stream: SyncStream, max_bytes: int, timeout: float | None = None) -> bytes:
        if threading.current_thread() in callers and not seen:
            descriptor = stream.get_extra_info("socket").fileno()
            seen.append((descriptor, _socket_inode(descriptor)))
            reading.set()
            assert go_on.wait(10)
        return read(stream, max_bytes, timeout)

    monkeypatch.setattr(SyncStream, "read", held_read)
    failures: list[BaseException] = []
    callers.append(_one_call(target, failures))
    assert reading.wait(10)
    [(descriptor, inode)] = seen
    assert inode is not None and inode.startswith("socket:")
    target.close()
    opened = [socket.socket() for _ in range(4)]  # take the lowest free numbers
    try:
        assert descriptor not in [sock.fileno() for sock in opened]
        assert _socket_inode(descriptor) == inode
        go_on.set()
        callers[0].join(10)
    finally:
        for sock in opened:
            sock.close()
    assert [type(error) for error in failures] == [Error]
    assert re.fullmatch(_closed_message(server), str(failures[0]))
    failures.clear()  # its traceback held the socket
    gc.collect()
    assert _socket_inode(descriptor) != inode


def test_without_the_socket_guard_calls_and_close_work_as_before(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where httpcore2's sync backend is laid out otherwise (the guard cannot load), calls
    go on as ever, and `close()` takes the sockets the pools show."""
    monkeypatch.setitem(sys.modules, "allama._socket_guard", None)  # an import that fails
    target = _provider(server)
    assert _said(target.chat(_request("first")))["text"] == "first delay=0.0"
    target.close()
    assert _said(target.chat(_request("again")))["text"] == "again delay=0.0"
    target.close()
