"""A request that got no status, over real sockets: one sent whole whose answer did not
begin (the read timed out, the connection broke) reached the provider, which may be making
the answer, so it is made and may be billed (its cost unknown, as an answer cut off after
its status is); one that could not connect or be sent whole costs nothing, whatever httpx2
raises after (it reads on after a failed write). And a redirect, which the transport does
not follow: a refusal that keeps its status and names where it points, never a server error
tried again."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama.adapters._http import HttpRequest
from allama.errors import REPORTED_USAGE_KEY, Error, NetworkError, RequestTimeoutError
from allama.transport import Transport

_Behaviour = Callable[[socket.socket], None]


def _read_request(conn: socket.socket) -> bytes:
    """The whole request: its head, then as much body as its Content-Length says."""
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
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        body += chunk
    return head


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    conn.close()


def _stalls(conn: socket.socket) -> None:
    _read_request(conn)
    time.sleep(2)
    conn.close()


def _closes(conn: socket.socket) -> None:
    _read_request(conn)
    time.sleep(1.2)  # working on it, then gone
    conn.close()


def _resets(conn: socket.socket) -> None:
    _read_request(conn)
    time.sleep(1.2)
    _reset(conn)


def _closes_at_once(conn: socket.socket) -> None:
    _read_request(conn)
    conn.close()


def _resets_at_once(conn: socket.socket) -> None:
    _read_request(conn)
    _reset(conn)


def _never_reads(conn: socket.socket) -> None:
    time.sleep(2)
    conn.close()


def _closes_after_the_head(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(1024)
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()


@pytest.fixture
def serve() -> Iterator[Callable[[_Behaviour], str]]:
    listening: list[socket.socket] = []

    def start(behaviour: _Behaviour) -> str:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        listening.append(server)

        def accept() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                threading.Thread(target=_quietly, args=(behaviour, conn), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return f"http://127.0.0.1:{server.getsockname()[1]}/v1"

    yield start
    for server in listening:
        server.close()


def _quietly(behaviour: _Behaviour, conn: socket.socket) -> None:
    with contextlib.suppress(OSError):  # a client that gave up
        behaviour(conn)


def _request(url: str, size: int = 100) -> HttpRequest:
    return HttpRequest(
        "POST", f"{url}/chat/completions", {"content-type": "application/json"}, {}, raw=b"x" * size
    )


def _failed(way: str, transport: Transport, request: HttpRequest) -> Error:
    """The error `way` (a call, or a stream opened, sync or async) ends with."""

    async def in_async() -> Any:
        if way == "asend":
            return await transport.asend(request)
        return await transport.aopen_stream(request)

    with pytest.raises(Error) as caught:
        if way == "send":
            transport.send(request)
        elif way == "open_stream":
            transport.open_stream(request)
        else:
            asyncio.run(in_async())
    return caught.value


WAYS = ["send", "open_stream", "asend", "aopen_stream"]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(
    ("behaviour", "kind", "cause"),
    [
        pytest.param(_stalls, RequestTimeoutError, httpx2.ReadTimeout, id="read-timeout"),
        pytest.param(_closes, NetworkError, httpx2.RemoteProtocolError, id="closed"),
        pytest.param(_resets, NetworkError, httpx2.ReadError, id="reset"),
    ],
)
def test_a_request_sent_whole_that_got_no_status_may_be_billed(
    serve: Callable[[_Behaviour], str],
    way: str,
    behaviour: _Behaviour,
    kind: type[Error],
    cause: type[Exception],
) -> None:
    url = serve(behaviour)
    timeout = 0.5 if behaviour is _stalls else 5.0
    error = _failed(way, Transport(timeout=timeout), _request(url))
    assert type(error) is kind and error.retryable
    assert type(error.__cause__) is cause
    # Made, and maybe billed with no usage to say what for: an empty usage beside it.
    assert error.context.metadata == {REPORTED_USAGE_KEY: {}}


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("behaviour", [_closes_at_once, _resets_at_once], ids=["closed", "reset"])
def test_a_connection_that_broke_as_the_request_arrived_costs_nothing(
    serve: Callable[[_Behaviour], str], way: str, behaviour: _Behaviour
) -> None:
    """As a server closing a kept-alive connection just as the next request reaches it
    does: a network failure tried again, not a call that may be billed (which would stop a
    budgeted run)."""
    error = _failed(way, Transport(timeout=5.0), _request(serve(behaviour)))
    assert type(error) is NetworkError and error.retryable
    assert error.context.metadata == {}


@pytest.mark.parametrize("way", WAYS)
def test_a_request_of_a_callers_client_sent_whole_that_timed_out_may_be_billed(
    serve: Callable[[_Behaviour], str], way: str
) -> None:
    url = serve(_stalls)
    transport = Transport(
        client=httpx2.Client(timeout=0.5), async_client=httpx2.AsyncClient(timeout=0.5)
    )
    error = _failed(way, transport, _request(url))
    assert type(error) is RequestTimeoutError
    assert error.context.metadata == {REPORTED_USAGE_KEY: {}}


@pytest.mark.parametrize("way", WAYS)
def test_a_request_that_could_not_connect_or_be_sent_whole_costs_nothing(
    serve: Callable[[_Behaviour], str], way: str
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    refused = _failed(way, Transport(timeout=0.5), _request(f"http://127.0.0.1:{port}/v1"))
    assert type(refused) is NetworkError and type(refused.__cause__) is httpx2.ConnectError
    assert refused.context.metadata == {}

    # A body too big for the buffers, to a server that reads none of it: the write times out.
    unread = serve(_never_reads)
    error = _failed(way, Transport(timeout=0.5), _request(unread, 64 << 20))
    assert type(error) is RequestTimeoutError and type(error.__cause__) is httpx2.WriteTimeout
    assert error.context.metadata == {}


@pytest.mark.parametrize("way", ["send", "open_stream"])
def test_a_read_side_failure_after_a_failed_write_costs_nothing(
    serve: Callable[[_Behaviour], str], way: str
) -> None:
    """The server hangs up after the request's head: httpx2 passes over the failed write
    and reads on, raising what a broken read raises. The body did not go out whole, so the
    provider never had the request."""
    url = serve(_closes_after_the_head)
    error = _failed(way, Transport(timeout=5.0), _request(url, 64 << 20))
    assert type(error) is NetworkError
    assert isinstance(error.__cause__, httpx2.RemoteProtocolError | httpx2.ReadError)
    assert error.context.metadata == {}


class Value(BaseModel):
    x: int


def test_a_budget_stops_at_a_timed_out_call_rather_than_count_it_free(
    serve: Callable[[_Behaviour], str],
) -> None:
    url = serve(_stalls)
    provider = allama.provider("openai", base_url=url, api_key="sk-test", timeout=0.5)
    run: allama.BatchRun[Value] = allama.batch(
        provider,
        Value,
        ["in0", "in1", "in2"],
        request=allama.ChatRequest("gpt-4o-mini"),
        concurrency=1,
        max_cost="1",
        max_attempts=2,
    )
    results = list(run)
    summary = run.summary
    assert summary.cost_unknown == 1
    assert summary.cost_missing == (
        "no token counts came with a call that was made (its answer cut off, say)"
    )
    assert summary.stopped == (
        "the cost of an attempt of #0 is unknown (no token counts came with a call that was "
        "made (its answer cut off, say)): the budget of $1 cannot be kept"
    )
    assert [
        (r.index, r.failure.kind if r.failure else None)
        for r in sorted(results, key=lambda r: r.index)
    ] == [
        (0, "timeout"),
        (1, "not_started"),
        (2, "not_started"),
    ]


# A redirect, which the transport does not follow


LEAKY = "https://user:sk-LEAK-123@api.example.com:8443/v1/chat/completions?key=sk-LEAK-123"


def _redirects(status: int, location: str | None = LEAKY) -> _Behaviour:
    def answer(conn: socket.socket) -> None:
        _read_request(conn)
        body = b"<html><title>Moved</title></html>"
        where = f"location: {location}\r\n".encode() if location is not None else b""
        conn.sendall(
            b"HTTP/1.1 %d Moved\r\n%sconnection: close\r\ncontent-type: text/html\r\n"
            b"content-length: %d\r\n\r\n%s" % (status, where, len(body), body)
        )
        conn.close()

    return answer


REDIRECT_ADVICE = (
    "which allama does not follow (the request and its key would go on to another "
    "address): check the base URL, and pass the address the API answers at as base_url= to "
    "allama.provider(...)"
)


def _call(provider: Any, request: allama.ChatRequest, way: str) -> None:
    """Call `provider` one `way`: `chat`, `achat`, `chat_stream` or `achat_stream` (read to
    its end)."""

    async def in_async() -> None:
        if way == "achat":
            await provider.achat(request)
        else:
            async with await provider.achat_stream(request) as stream:
                await stream.response()

    if way == "chat":
        provider.chat(request)
    elif way == "chat_stream":
        with provider.chat_stream(request) as stream:
            stream.response()
    else:
        asyncio.run(in_async())


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini", "ollama"])
@pytest.mark.parametrize("status", [301, 307, 308])
@pytest.mark.parametrize("way", ["chat", "achat", "chat_stream", "achat_stream"])
def test_a_redirect_is_a_refusal_that_names_where_it_points_and_no_key(
    serve: Callable[[_Behaviour], str], name: str, status: int, way: str
) -> None:
    url = serve(_redirects(status))
    base = url if name == "openai" else url.removesuffix("/v1")
    provider = allama.provider(name, base_url=base, api_key="k-123456789", timeout=5)
    request = allama.ChatRequest("m").user("x")

    with pytest.raises(allama.InvalidRequestError) as caught:
        _call(provider, request, way)
    error = caught.value
    assert error.message == (
        f"the provider answered {status}, a redirect to https://api.example.com:8443, "
        f"{REDIRECT_ADVICE}"
    )
    assert error.status == status and not error.retryable
    assert error.provider == name and error.model == "m"
    assert "LEAK" not in str(error.as_log()) and "/chat" not in error.message


@pytest.mark.parametrize(
    ("location", "where"),
    [
        ("/v2/chat/completions?key=sk-LEAK-123", " to another path of the same host"),
        ("http://[::1]/v1", " to http://[::1]"),
        (None, ""),
    ],
)
def test_a_redirect_says_what_of_its_target_it_can(
    serve: Callable[[_Behaviour], str], location: str | None, where: str
) -> None:
    url = serve(_redirects(302, location))
    provider = allama.provider("openai", base_url=url, api_key="k-123456789", timeout=5)
    with pytest.raises(allama.InvalidRequestError) as caught:
        provider.chat(allama.ChatRequest("m").user("x"))
    assert (
        caught.value.message == f"the provider answered 302, a redirect{where}, {REDIRECT_ADVICE}"
    )


def test_a_batch_run_sends_an_input_met_by_a_redirect_once(
    serve: Callable[[_Behaviour], str],
) -> None:
    sent: list[int] = []

    def counted(conn: socket.socket) -> None:
        sent.append(1)
        _redirects(301)(conn)

    url = serve(counted)
    provider = allama.provider("openai", base_url=url, api_key="k-123456789", timeout=5)
    run: allama.BatchRun[Value] = allama.batch(
        provider,
        Value,
        [f"in{n}" for n in range(4)],
        request=allama.ChatRequest("gpt-4o-mini"),
        concurrency=2,
        backoff=0.01,
    )
    results = sorted(run, key=lambda r: r.index)
    assert len(sent) == 4  # not tried again: it answers every try alike
    assert [(r.failure.kind, r.attempts) for r in results if r.failure] == [
        ("invalid_request", 1)
    ] * 4
    assert results[0].failure is not None
    assert results[0].failure.message.startswith(
        "the provider answered 301, a redirect to https://api.example.com:8443, "
    )


@pytest.mark.parametrize(
    ("name", "model", "host"),
    [
        ("anthropic", "claude-sonnet-4-5", "api.anthropic.com"),
        ("gemini", "gemini-2.5-flash", "generativelanguage.googleapis.com"),
        ("openai", "gpt-4o", "api.openai.com"),
        ("azure", "gpt-4o", "res.openai.azure.com"),
    ],
)
@pytest.mark.parametrize("way", ["chat", "achat", "chat_stream", "achat_stream"])
def test_a_callers_client_that_follows_redirects_does_not_take_the_key_elsewhere(
    name: str, model: str, host: str, way: str
) -> None:
    # httpx2 drops `Authorization` on a redirect to another origin, not a key in a header of
    # a provider's own (Anthropic's `x-api-key`, Gemini's `x-goog-api-key`, Azure's
    # `api-key`): a client of the caller's that follows redirects must not follow one here.
    hosts: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        hosts.append(request.url.host)
        return httpx2.Response(307, headers={"location": "https://other.example/x"})

    mock = httpx2.MockTransport(handler)
    options: dict[str, Any] = {"api_key": "k-123456789"}
    if name == "azure":
        options.update(base_url=f"https://{host}", api_version="2024-10-21")
    if way in ("chat", "chat_stream"):
        transport = Transport(client=httpx2.Client(transport=mock, follow_redirects=True))
    else:
        transport = Transport(
            async_client=httpx2.AsyncClient(transport=mock, follow_redirects=True)
        )
    provider = allama.provider(name, transport=transport, **options)
    request = allama.ChatRequest(model).user("x")

    with pytest.raises(allama.InvalidRequestError) as caught:
        _call(provider, request, way)
    assert hosts == [host]
    assert caught.value.status == 307
    assert caught.value.message == (
        f"the provider answered 307, a redirect to https://other.example, {REDIRECT_ADVICE}"
    )
