"""The provider over real sockets: a local HTTP server serves recorded bodies and streams.

Sync and async calls, streams in small chunks, connection reuse, timeouts before and
during a stream, a connection cut mid-stream, and a closed stream closing its connection,
all through httpx2 for real.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2
import pytest

from allama.adapters._http import HttpRequest
from allama.errors import (
    AuthenticationError,
    InvalidRequestError,
    NetworkError,
    RateLimitedError,
    RequestTimeoutError,
)
from allama.providers import OpenAICompatibleProvider, provider
from allama.transport import Transport
from allama.types import ChatRequest, FinishReason, TextDelta

CORPUS = Path(
    os.environ.get(
        "ALLAMA_CORPUS_DIR", Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
    )
)
PLAIN_CASE = CORPUS / "openai/plain_text_system_prompt.json"
STREAM_CASE = CORPUS / "openai/parallel_tool_calls_strict_stream.json"
TEXT_STREAM_CASE = CORPUS / "openai/length_max_tokens_stream.json"

pytestmark = pytest.mark.skipif(
    not (PLAIN_CASE.exists() and STREAM_CASE.exists() and TEXT_STREAM_CASE.exists()),
    reason=f"recorded cases missing under {CORPUS}",
)

SECRET = "sk-SECRET-KEY"


def _case(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Callable[[_Handler], None]]
    seen: list[tuple[str, dict[str, str], dict[str, Any], int]]
    authorizations: list[list[str]]
    abandoned: threading.Event

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or hang up mid-answer are what several tests are about.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, no delayed-ACK stalls
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.server.seen.append((self.path, headers, body, self.client_address[1]))
        # A request through a proxy names the whole URL.
        scenario = urlsplit(self.path).path.strip("/").split("/")[0]
        self.server.routes[scenario](self)

    def log_message(self, format: str, *args: Any) -> None:
        return

    # Helpers for routes

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def start_chunked(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _pieces(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _routes(server: _Server) -> dict[str, Callable[[_Handler], None]]:
    plain = _case(PLAIN_CASE)["response_body"]
    stream = _case(STREAM_CASE)["stream"].encode()
    text_stream = _case(TEXT_STREAM_CASE)["stream"].encode()

    def serve_plain(h: _Handler) -> None:
        h.send_json(200, plain)

    def serve_stream(h: _Handler) -> None:
        h.start_chunked()
        for piece in _pieces(stream, 7):
            h.chunk(piece)
        h.end_chunked()

    def serve_slow(h: _Handler) -> None:
        time.sleep(1.0)
        h.send_json(200, plain)

    def serve_cut(h: _Handler) -> None:
        h.start_chunked()
        h.chunk(text_stream[: len(text_stream) // 2])
        h.wfile.write(b"400\r\npartial")  # a chunk announced and never finished
        h.wfile.flush()
        h.connection.shutdown(socket.SHUT_RDWR)
        h.close_connection = True

    def serve_stall(h: _Handler) -> None:
        h.start_chunked()
        h.chunk(b"\n\n".join(text_stream.split(b"\n\n")[:4]) + b"\n\n")
        time.sleep(1.0)

    def serve_endless(h: _Handler) -> None:
        h.start_chunked()
        first, _, _ = text_stream.partition(b"\n\n")
        delta = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"."}}]}\n\n'
        try:
            h.chunk(first + b"\n\n")
            for _ in range(500):
                h.chunk(delta)
                time.sleep(0.01)
        except OSError:
            server.abandoned.set()
            h.close_connection = True

    def serve_rate_limited(h: _Handler) -> None:
        error = {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        }
        h.send_json(429, error, {"retry-after": "2"})

    def serve_cookie(h: _Handler) -> None:
        h.send_json(200, plain, {"set-cookie": "affinity=node-7; Path=/"})

    def serve_mislabelled(status: int) -> Callable[[_Handler], None]:
        def serve(h: _Handler) -> None:
            data = b"not gzip"  # a body its Content-Encoding does not decode
            h.send_response(status)
            for key, value in (
                ("content-encoding", "gzip"),
                ("content-length", str(len(data))),
                ("set-cookie", "affinity=node-7; Path=/"),
            ):
                h.send_header(key, value)
            h.end_headers()
            h.wfile.write(data)

        return serve

    def serve_auth(h: _Handler) -> None:
        key = h.headers.get("authorization", "").removeprefix("Bearer ")
        error = {
            "error": {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}
        }
        h.send_json(401, error)

    def serve_whoami(h: _Handler) -> None:
        said = h.headers.get_all("authorization") or []
        server.authorizations.append(said)
        error = {"error": {"message": f"Not you: {' | '.join(said)}", "code": "invalid_api_key"}}
        h.send_json(401, error)

    return {
        "plain": serve_plain,
        "whoami": serve_whoami,
        "stream": serve_stream,
        "slow": serve_slow,
        "cut": serve_cut,
        "stall": serve_stall,
        "endless": serve_endless,
        "ratelimit": serve_rate_limited,
        "auth": serve_auth,
        "cookie": serve_cookie,
        "refused": serve_mislabelled(401),
        "mislabelled": serve_mislabelled(200),
    }


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    httpd.abandoned = threading.Event()
    httpd.authorizations = []
    httpd.routes = _routes(httpd)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _provider(server: _Server, scenario: str, **options: Any) -> OpenAICompatibleProvider:
    host, port = server.server_address[:2]
    base = f"http://{host!s}:{port}/{scenario}"
    return provider("openai", api_key=SECRET, base_url=base, **options)


REQUEST = ChatRequest("gpt-4o").system("Be brief.").user("Hello")


def _expected_plain() -> tuple[str, int]:
    body = _case(PLAIN_CASE)["response_body"]
    return body["choices"][0]["message"]["content"], body["usage"]["prompt_tokens"]


def test_sync_call_sends_the_body_and_reuses_the_connection(server: _Server) -> None:
    server.seen.clear()
    with _provider(server, "plain") as target:
        responses = [target.chat(REQUEST) for _ in range(3)]
    text, prompt_tokens = _expected_plain()
    assert [r.text() for r in responses] == [text] * 3
    assert responses[0].usage is not None and responses[0].usage.input_tokens == prompt_tokens
    paths = {path for path, _, _, _ in server.seen}
    assert paths == {"/plain/chat/completions"}
    _, headers, body, _ = server.seen[0]
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ]
    assert len({port for _, _, _, port in server.seen}) == 1


def test_a_user_and_password_in_the_base_url_are_basic_auth_with_the_http_log_on_or_off(
    server: _Server, caplog: pytest.LogCaptureFixture
) -> None:
    import base64

    host, port = server.server_address[:2]
    base = f"http://user:pw%2F9@{host!s}:{port}/whoami?key=gw-1234"
    basic = "Basic " + base64.b64encode(b"user:pw/9").decode()
    server.authorizations.clear()
    with provider("openai", api_key=SECRET, base_url=base) as target:
        for level in (logging.WARNING, logging.INFO):  # httpx2's log of each request on
            with (
                caplog.at_level(level, logger="httpx2"),
                pytest.raises(AuthenticationError) as caught,
            ):
                target.chat(REQUEST)
            # Echoed by the provider, the password and its token are redacted.
            assert str(caught.value) == "Not you: <redacted>"
    # As httpx2's client makes them from the URL, whichever way the call goes: one header,
    # in place of the API key's.
    assert server.authorizations == [[basic], [basic]]
    logged = [record.getMessage() for record in caplog.records if record.name == "httpx2"]
    assert logged == [
        f"HTTP Request: POST http://{host!s}:{port}/whoami/chat/completions?*** "
        '"HTTP/1.1 401 Unauthorized"'
    ]
    # The caller's own header does the same: it is sent alone, not beside the key's.
    server.authorizations.clear()
    with (
        provider(
            "openai",
            api_key=SECRET,
            base_url=base.replace("user:pw%2F9@", ""),
            headers={"Authorization": "Bearer gateway-token"},
        ) as target,
        pytest.raises(AuthenticationError),
    ):
        target.chat(REQUEST)
    assert server.authorizations == [["Bearer gateway-token"]]


def test_a_child_process_makes_connections_of_its_own(server: _Server) -> None:
    import warnings

    server.seen.clear()
    text, _ = _expected_plain()
    with _provider(server, "plain") as target:
        assert target.chat(REQUEST).text() == text
        parent_port = server.seen[0][3]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # a process with threads
            pid = os.fork()
        if pid == 0:  # the child: its answer on the parent's connection would cross
            try:
                os._exit(0 if target.chat(REQUEST).text() == text else 3)
            except BaseException:
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert target.chat(REQUEST).text() == text
    ports = [port for _, _, _, port in server.seen]
    # The child's call on a connection of its own; the parent's still on its own.
    assert len(ports) == 3 and ports[1] != parent_port and ports[2] == parent_port


def test_a_loop_that_ended_lets_go_of_its_client_and_connections(server: _Server) -> None:
    import gc
    import weakref

    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def call(target: OpenAICompatibleProvider) -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        await target.achat(REQUEST)

    with _provider(server, "plain") as target:
        for _ in range(5):  # a program that runs each job with `asyncio.run`
            asyncio.run(call(target))
        gc.collect()
        # The last loop's client is kept until another loop calls; the others are gone.
        assert sum(loop() is not None for loop in loops) <= 1
        assert target._transport._async_clients is not None
        assert len(target._transport._async_clients) == 1


def test_aclose_closes_the_client_of_its_own_loop_alone(server: _Server) -> None:
    text, _ = _expected_plain()
    with _provider(server, "plain") as target:
        first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
        try:
            assert second.run_until_complete(target.achat(REQUEST)).text() == text
            # The first loop called last (another thread's, say): closing on the second
            # closes the second's client, not the one called last.
            assert first.run_until_complete(target.achat(REQUEST)).text() == text
            second.run_until_complete(target.aclose())
            # The first loop's calls go on, on the client that loop made.
            assert first.run_until_complete(target.achat(REQUEST)).text() == text
            clients = target._transport._async_clients
            assert clients is not None and list(clients) == [first]
            assert not clients[first][0].is_closed
            first.run_until_complete(target.aclose())
        finally:
            first.close()
            second.close()


def test_async_calls_share_one_client(server: _Server) -> None:
    server.seen.clear()

    async def run() -> list[str | None]:
        async with _provider(server, "plain") as target:
            first = await target.achat(REQUEST)
            rest = await asyncio.gather(*(target.achat(REQUEST) for _ in range(4)))
            return [r.text() for r in (first, *rest)]

    text, _ = _expected_plain()
    assert asyncio.run(run()) == [text] * 5
    assert len(server.seen) == 5


def test_each_request_carries_its_own_body_and_the_client_defaults(server: _Server) -> None:
    server.seen.clear()
    requests = [ChatRequest("gpt-4o").user("Hi"), ChatRequest("gpt-4o").user("Hello there " * 40)]
    with _provider(server, "plain") as target:
        for request in requests:
            target.chat(request)

    async def run() -> None:
        async with _provider(server, "plain") as target:
            for request in requests:
                await target.achat(request)

    asyncio.run(run())
    assert [body["messages"][0]["content"] for _, _, body, _ in server.seen] == [
        "Hi",
        "Hello there " * 40,
    ] * 2
    host, port = server.server_address[:2]
    for _, headers, body, _ in server.seen:
        sent = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        assert headers["content-length"] == str(len(sent))
        assert headers["host"] == f"{host!s}:{port}"
        assert headers["content-type"] == "application/json"
        assert headers["user-agent"].startswith("python-httpx2/")
        assert headers["authorization"] == f"Bearer {SECRET}"


def test_query_parameters_reach_the_server_on_every_call(server: _Server) -> None:
    server.seen.clear()
    host, port = server.server_address[:2]
    endpoint = f"http://{host!s}:{port}/plain"
    with provider(
        "azure-openai", api_key=SECRET, endpoint=endpoint, api_version="2024-10-21"
    ) as az:
        az.chat(REQUEST)
        az.chat(REQUEST.model_copy(update={"model": "gpt-4o-mini"}))
    assert [path for path, _, _, _ in server.seen] == [
        "/plain/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
        "/plain/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21",
    ]
    assert all(headers["api-key"] == SECRET for _, headers, _, _ in server.seen)


def test_a_query_parameter_and_a_header_of_the_same_name_are_told_apart(
    server: _Server,
) -> None:
    server.seen.clear()
    host, port = server.server_address[:2]
    url = f"http://{host!s}:{port}/plain/chat/completions"
    with Transport() as transport:
        transport.send(HttpRequest("POST", url, {}, {"model": "m"}, {"x-team": "a"}))
        transport.send(HttpRequest("POST", url, {"x-team": "a"}, {"model": "m"}, {}))
    (first_path, first, _, _), (second_path, second, _, _) = server.seen
    assert (first_path, "x-team" in first) == ("/plain/chat/completions?x-team=a", False)
    assert (second_path, second["x-team"]) == ("/plain/chat/completions", "a")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_cookies_the_endpoint_sets_are_sent_back(server: _Server, mode: str) -> None:
    server.seen.clear()
    if mode == "sync":
        with _provider(server, "cookie") as target:
            target.chat(REQUEST)
            target.chat(REQUEST)
    else:

        async def run() -> None:
            async with _provider(server, "cookie") as target:
                await target.achat(REQUEST)
                await target.achat(REQUEST)

        asyncio.run(run())
    assert "cookie" not in server.seen[0][1]
    assert server.seen[1][1]["cookie"] == "affinity=node-7"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_httpx2s_log_of_each_request_is_written_when_it_is_on(
    server: _Server, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = server.server_address[:2]
    with _provider(server, "plain") as target:
        if mode == "sync":
            target.chat(REQUEST)  # before the log is on: nothing to see
            caplog.set_level(logging.INFO, logger="httpx2")
            target.chat(REQUEST)
        else:

            async def run() -> None:
                await target.achat(REQUEST)
                caplog.set_level(logging.INFO, logger="httpx2")
                await target.achat(REQUEST)
                await target.aclose()

            asyncio.run(run())
    logged = [r.getMessage() for r in caplog.records if r.name == "httpx2"]
    url = f"http://{host!s}:{port}/plain/chat/completions"
    assert logged == [f'HTTP Request: POST {url} "HTTP/1.1 200 OK"']


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_proxy_set_in_the_environment_carries_the_calls(
    server: _Server, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    host, port = server.server_address[:2]
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://{host!s}:{port}")
    server.seen.clear()
    # A host that resolves nowhere: only the proxy can carry the call.
    target = provider("openai", api_key=SECRET, base_url="http://provider.invalid/plain")
    if mode == "sync":
        with target:
            response = target.chat(REQUEST)
    else:

        async def run() -> Any:
            async with target:
                return await target.achat(REQUEST)

        response = asyncio.run(run())
    assert response.text() == _expected_plain()[0]
    assert [path for path, _, _, _ in server.seen] == [
        "http://provider.invalid/plain/chat/completions"
    ]


@pytest.mark.parametrize("callers", ["sync", "async", "both"])
def test_a_client_of_the_callers_keeps_its_headers_and_params(
    server: _Server, callers: str
) -> None:
    server.seen.clear()
    settings: dict[str, Any] = {"headers": {"x-team": "billing"}, "params": {"trace": "1"}}
    client = httpx2.Client(**settings)

    async def run() -> None:
        async with httpx2.AsyncClient(**settings) as async_client:
            transport = Transport(
                client=client if callers != "async" else None,
                async_client=async_client if callers != "sync" else None,
            )
            async with _provider(server, "plain", transport=transport) as target:
                for team in ("billing", "ops"):
                    # Settings the caller changes apply to the next call.
                    async_client.headers["x-team"] = client.headers["x-team"] = team
                    await target.achat(REQUEST)
                    target.chat(REQUEST)

    try:
        asyncio.run(run())
    finally:
        client.close()
    async_seen, sync_seen = server.seen[0::2], server.seen[1::2]
    for seen, side in ((sync_seen, "sync"), (async_seen, "async")):
        if callers in (side, "both"):
            assert [headers["x-team"] for _, headers, _, _ in seen] == ["billing", "ops"]
            assert {path for path, _, _, _ in seen} == {"/plain/chat/completions?trace=1"}
        else:
            assert all("x-team" not in headers for _, headers, _, _ in seen)
            assert {path for path, _, _, _ in seen} == {"/plain/chat/completions"}
    for _, headers, _, _ in server.seen:
        assert headers["authorization"] == f"Bearer {SECRET}"


def _expected_calls() -> list[tuple[str, str]]:
    calls: dict[int, list[str]] = {}
    for line in _case(STREAM_CASE)["stream"].splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                for call in choice["delta"].get("tool_calls") or []:
                    entry = calls.setdefault(call["index"], ["", ""])
                    entry[0] = entry[0] or call["function"].get("name") or ""
                    entry[1] += call["function"].get("arguments") or ""
    return [(name, args) for name, args in (calls[i] for i in sorted(calls))]


def test_sync_stream_in_small_chunks(server: _Server) -> None:
    with _provider(server, "stream") as target, target.chat_stream(REQUEST) as stream:
        response = stream.response()
    assert [(c.name, c.arguments) for c in response.tool_calls()] == _expected_calls()
    assert response.finish_reason == FinishReason.TOOL_CALLS
    assert response.usage is not None and response.usage.output_tokens == 53
    _, _, body, _ = server.seen[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_async_stream_in_small_chunks(server: _Server) -> None:
    async def run() -> Any:
        async with _provider(server, "stream") as target:
            stream = await target.achat_stream(REQUEST)
            async with stream:
                return await stream.response()

    response = asyncio.run(run())
    assert [(c.name, c.arguments) for c in response.tool_calls()] == _expected_calls()


ADVICE = "change it with the `timeout=` argument of allama.provider(...)"


def _where(server: _Server) -> str:
    host, port = server.server_address[:2]
    return f"{host!s}:{port}"


def test_timeout_before_the_answer(server: _Server) -> None:
    slow = _provider(server, "slow", timeout=httpx2.Timeout(0.2))
    with slow as target, pytest.raises(RequestTimeoutError) as caught:
        target.chat(REQUEST)
    error = caught.value
    assert error.retryable and error.provider == "openai"
    assert str(error).startswith(
        f"{_where(server)} sent nothing for longer than the read timeout (0.2 s); {ADVICE}"
    )
    assert isinstance(error.__cause__, httpx2.ReadTimeout)
    # allama wrote the message: it may be logged, and holds no secret.
    assert str(error) in str(error.as_log()) and SECRET not in str(error.as_log())

    async def run() -> None:
        async with _provider(server, "slow", timeout=0.25) as target:
            await target.achat(REQUEST)

    with pytest.raises(RequestTimeoutError) as async_caught:
        asyncio.run(run())
    assert "the read timeout (0.25 s)" in str(async_caught.value)
    assert isinstance(async_caught.value.__cause__, httpx2.ReadTimeout)


def test_timeout_in_the_middle_of_a_stream(server: _Server) -> None:
    with _provider(server, "stall", timeout=httpx2.Timeout(60.0, read=0.3)) as target:
        stream = target.chat_stream(REQUEST)
        seen = []
        with pytest.raises(RequestTimeoutError) as caught:
            for event in stream:
                seen.append(event)
    assert any(isinstance(event, TextDelta) for event in seen)
    assert stream.collector.error is caught.value
    assert str(caught.value).startswith(
        f"{_where(server)} sent nothing for longer than the read timeout (0.3 s)"
    )
    assert isinstance(caught.value.__cause__, httpx2.ReadTimeout)


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (
            httpx2.ConnectTimeout,
            "connecting to api.example.com:443 took longer than the connect timeout (1.5 s)",
        ),
        (
            httpx2.ReadTimeout,
            "api.example.com:443 sent nothing for longer than the read timeout (7 s)",
        ),
        (
            httpx2.WriteTimeout,
            "sending the request to api.example.com:443 took longer than the write timeout (2 s)",
        ),
        (
            httpx2.PoolTimeout,
            "waiting for a free connection to api.example.com:443 took longer "
            "than the pool timeout (3 s)",
        ),
    ],
)
def test_each_timeout_names_its_limit_and_value(
    raised: type[httpx2.TimeoutException], said: str
) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise raised("timed out", request=request)

    limits = httpx2.Timeout(7.0, connect=1.5, write=2.0, pool=3.0)
    client = httpx2.Client(transport=httpx2.MockTransport(handler), timeout=limits)
    target = provider(
        "openai",
        api_key=SECRET,
        base_url="https://user:pw-1234@api.example.com/acct-1234/v1?key=k-1234",
        transport=Transport(client=client),
    )
    with target, pytest.raises(RequestTimeoutError) as caught:
        target.chat(REQUEST)
    client.close()
    message = str(caught.value)
    # The client is the caller's: its own `timeout=` is the one to change.
    assert (
        message == f"{said}; change it with `timeout=` on the httpx2 client you gave the transport"
    )
    assert type(caught.value.__cause__) is raised
    # Host and port only: not the credentials, path or query of the URL.
    assert "1234" not in message and SECRET not in message


def test_connection_cut_mid_stream(server: _Server) -> None:
    with _provider(server, "cut") as target:
        stream = target.chat_stream(REQUEST)
        with pytest.raises(NetworkError) as caught:
            stream.response()
    assert caught.value.retryable
    assert str(caught.value).startswith(f"the connection to {_where(server)} failed (")
    assert isinstance(caught.value.__cause__, httpx2.TransportError)
    partial = stream.collector.partial_response()
    assert partial.text() and partial.finish_reason is None

    async def run() -> None:
        async with _provider(server, "cut") as target:
            astream = await target.achat_stream(REQUEST)
            await astream.response()

    with pytest.raises(NetworkError):
        asyncio.run(run())


def test_closing_a_stream_closes_its_connection(server: _Server) -> None:
    server.abandoned.clear()
    with _provider(server, "endless") as target:
        stream = target.chat_stream(REQUEST)
        next(stream)
        stream.close()
        assert server.abandoned.wait(5.0)


def test_cancelling_an_async_stream_closes_its_connection(server: _Server) -> None:
    server.abandoned.clear()

    async def consume() -> None:
        async with _provider(server, "endless") as target:
            stream = await target.achat_stream(REQUEST)
            async with stream:
                async for _ in stream:
                    await asyncio.sleep(0)

    async def run() -> None:
        task = asyncio.create_task(consume())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert server.abandoned.wait(5.0)


def test_error_statuses_over_the_wire(server: _Server) -> None:
    with _provider(server, "ratelimit") as target:
        with pytest.raises(RateLimitedError) as caught:
            target.chat(REQUEST)
        assert caught.value.retry_after == 2.0
        with pytest.raises(RateLimitedError):
            target.chat_stream(REQUEST)


def test_the_key_an_endpoint_echoes_is_scrubbed(server: _Server) -> None:
    with _provider(server, "auth") as target:
        assert SECRET not in repr(target)
        with pytest.raises(AuthenticationError) as caught:
            target.chat(REQUEST)
    error = caught.value
    for view in (str(error), repr(error), str(error.as_log()), error.to_json()):
        assert SECRET not in view


def test_a_bad_endpoint_url_fails_when_the_provider_is_built() -> None:
    # Built with a URL that cannot be used, a provider would only fail at its first call.
    with pytest.raises(ValueError, match=r"^base_url must start with http:// or https://"):
        provider("openai", api_key=SECRET, base_url="ftp://127.0.0.1/v1")
    with pytest.raises(ValueError, match=r"^base_url is not a valid URL$"):
        provider("openai", api_key=SECRET, base_url="http://[::1")


def test_a_request_to_a_url_httpx2_cannot_use_is_an_invalid_request() -> None:
    with Transport() as transport:
        for url in ("ftp://127.0.0.1/v1", "http://[::1"):
            with pytest.raises(InvalidRequestError) as caught:
                transport.send(HttpRequest("POST", url, {}, {"model": "m"}, {}))
            assert caught.value.authored
            assert isinstance(
                caught.value.__cause__, httpx2.InvalidURL | httpx2.UnsupportedProtocol
            )


def test_nothing_listening_is_a_network_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    target = provider("openai", api_key=SECRET, base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(NetworkError) as caught:
        target.chat(REQUEST)
    error = caught.value
    assert error.retryable and SECRET not in repr(error)
    assert str(error) == f"could not connect to 127.0.0.1:{port} (ConnectError)"
    assert isinstance(error.__cause__, httpx2.ConnectError)
    assert str(error) in str(error.as_log())

    async def run() -> None:
        async with provider("openai", api_key=SECRET, base_url=f"http://127.0.0.1:{port}") as t:
            await t.achat_stream(REQUEST)

    with pytest.raises(NetworkError) as async_caught:
        asyncio.run(run())
    assert str(async_caught.value) == f"could not connect to 127.0.0.1:{port} (ConnectError)"
    assert isinstance(async_caught.value.__cause__, httpx2.ConnectError)


# The async pool's check of idle connections, answered from the socket found once


def test_a_connection_the_server_closed_while_idle_is_seen_closed_and_not_reused() -> None:
    from allama._sockets import _Stream

    served = {"connections": 0}
    body = b'{"ok": true}'

    async def main() -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            served["connections"] += 1
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            await hang_up.wait()  # keep-alive, as HTTP/1.1 promises, then hung up while idle
            writer.close()

        hang_up = asyncio.Event()
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = Transport()
        request = HttpRequest("GET", f"http://127.0.0.1:{port}/", {}, {}, raw=b"")
        try:
            first = await transport.asend(request)
            assert first.status == 200
            pool = transport._async()._transport._pool  # type: ignore[attr-defined]
            [connection] = pool.connections
            stream = connection._connection._network_stream
            assert isinstance(stream, _Stream)
            assert not stream.get_extra_info("is_readable")
            hang_up.set()
            for _ in range(100):  # the server's close reaches the client socket
                if stream.get_extra_info("is_readable"):
                    break
                await asyncio.sleep(0.01)
            # Readable while idle: the pool takes it for closed (httpcore2 asks in
            # `has_expired` up to 2.16, as the request is handed to it from 2.17).
            assert stream.get_extra_info("is_readable")
            second = await transport.asend(request)  # on a new connection, not the dead one
            assert (second.status, second.content) == (200, body)
            assert served["connections"] == 2
        finally:
            await transport.aclose()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_a_transport_given_a_client_leaves_its_pool_alone() -> None:
    from allama._sockets import _Backend

    client = httpx2.AsyncClient()
    Transport(async_client=client)._async()
    assert not isinstance(client._transport._pool._network_backend, _Backend)  # type: ignore[attr-defined]
    asyncio.run(client.aclose())


def test_an_idle_check_after_the_socket_closed_says_readable_even_if_its_number_is_reused() -> None:
    from allama._sockets import _Stream

    class Inner(httpcore2.AsyncNetworkStream):
        def __init__(self, sock: socket.socket) -> None:
            self.sock = sock

        def get_extra_info(self, info: str) -> Any:
            return self.sock if info == "socket" else None

    ours, theirs = socket.socketpair()
    stream = _Stream(Inner(ours))
    assert stream.get_extra_info("is_readable") is False
    theirs.send(b"x")
    assert stream.get_extra_info("is_readable") is True
    number = ours.fileno()
    ours.close()
    theirs.close()
    again, other = socket.socketpair()
    reused = again.fileno() == number or other.fileno() == number
    if not reused:
        os.dup2(again.fileno(), number)  # the closed socket's number names a quiet socket
    try:
        assert stream.get_extra_info("is_readable") is True  # closed, not the new socket's
    finally:
        if not reused:
            os.close(number)
        again.close()
        other.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        ("refused", "AuthenticationError"),  # read by its status: a refused key
        ("mislabelled", "ServerError"),  # an answer: a server error, to try again
    ],
)
def test_a_body_that_does_not_decode_is_read_by_its_status_its_cookies_kept(
    server: _Server, mode: str, scenario: str, kind: str
) -> None:
    import allama.errors

    expected: type[Exception] = getattr(allama.errors, kind)
    server.seen.clear()
    if mode == "sync":
        with _provider(server, scenario) as target:
            for _ in range(2):
                with pytest.raises(expected):
                    target.chat(REQUEST)
    else:

        async def run() -> None:
            async with _provider(server, scenario) as target:
                for _ in range(2):
                    with pytest.raises(expected):
                        await target.achat(REQUEST)

        asyncio.run(run())
    assert server.seen[1][1]["cookie"] == "affinity=node-7"
