"""`deadline=`: a bound on a whole call, from its start to the answer's last byte (a stream's
end), which `timeout=` is not (it bounds each wait for the next bytes alone). Over real
sockets: a server that sends its body a byte at a time, pads a whole answer with whitespace
(OpenRouter, while an upstream is slow) or streams keep-alive comments held a call (and a
batch run's slot) forever. Past the deadline the call is a timeout, tried again as a read
timeout is, made and maybe billed (its cost unknown) once its request went out whole."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, Usage
from allama.errors import REPORTED_USAGE_KEY, Error, RequestTimeoutError, paid_for
from allama.extract._metadata import ExtractionMetadata
from allama.transport import Transport, no_deadline

GUARD = 5.0
"""Seconds a call past a deadline of half a second must end within: generous, not a timing."""

ANSWER = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"n": 1}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
).encode()

EVENTS = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}'
    b"\n\ndata: [DONE]\n\n"
)

_Behaviour = Callable[[socket.socket, threading.Event], None]


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


def _head(content_type: str, length: int | None = None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{framing}\r\nConnection: close\r\n\r\n"
    ).encode()


def _drips(conn: socket.socket, stop: threading.Event) -> None:
    """A whole answer, a byte every 0.2 s: no wait is long, the call never ends."""
    _read_request(conn)
    conn.sendall(_head("application/json", len(ANSWER)))
    for byte in ANSWER:
        if stop.wait(0.2):
            return
        conn.sendall(bytes([byte]))


def _pads(conn: socket.socket, stop: threading.Event) -> None:
    """A whole answer put off by a space every 0.2 s (OpenRouter's, waiting on a slow
    upstream), chunked."""
    _read_request(conn)
    conn.sendall(_head("application/json"))
    while not stop.wait(0.2):
        conn.sendall(b"1\r\n \r\n")


def _pings(conn: socket.socket, stop: threading.Event) -> None:
    """A stream of keep-alive comments, one every 0.2 s, and never an event."""
    _read_request(conn)
    conn.sendall(_head("text/event-stream"))
    while not stop.wait(0.2):
        conn.sendall(b"8\r\n: ping\n\n\r\n")


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    """The request read whole, and no status ever."""
    _read_request(conn)
    stop.wait(GUARD * 2)


def _stalls(conn: socket.socket, stop: threading.Event) -> None:
    """A keep-alive comment every 0.1 s until just before a deadline of 1 s, then
    nothing: the status came at once, and the last wait begins with the deadline near."""
    _read_request(conn)
    began = time.monotonic()
    conn.sendall(_head("text/event-stream"))
    while time.monotonic() - began < 0.9 and not stop.wait(0.1):
        conn.sendall(b"8\r\n: ping\n\n\r\n")
    stop.wait(GUARD * 2)


def _answers(conn: socket.socket, stop: threading.Event) -> None:
    _read_request(conn)
    conn.sendall(_head("application/json", len(ANSWER)) + ANSWER)


def _streams(conn: socket.socket, stop: threading.Event) -> None:
    _read_request(conn)
    conn.sendall(_head("text/event-stream", len(EVENTS)) + EVENTS)


def _slow_answers(conn: socket.socket, stop: threading.Event) -> None:
    """A whole answer, its second half 0.5 s after its first."""
    _read_request(conn)
    conn.sendall(_head("application/json", len(ANSWER)) + ANSWER[:10])
    if not stop.wait(0.5):
        conn.sendall(ANSWER[10:])


def _slow_streams(conn: socket.socket, stop: threading.Event) -> None:
    """`_slow_answers` for a stream."""
    _read_request(conn)
    conn.sendall(_head("text/event-stream", len(EVENTS)) + EVENTS[:10])
    if not stop.wait(0.5):
        conn.sendall(EVENTS[10:])


@pytest.fixture
def serve() -> Iterator[Callable[[_Behaviour], int]]:
    """Start a raw-socket server on 127.0.0.1 that meets each connection with a behaviour;
    its port."""
    stop = threading.Event()
    listening: list[socket.socket] = []

    def start(behaviour: _Behaviour) -> int:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        listening.append(server)

        def each(conn: socket.socket) -> None:
            with contextlib.suppress(OSError), conn:  # (a client that gave up)
                behaviour(conn, stop)

        def accept() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                threading.Thread(target=each, args=(conn,), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return int(server.getsockname()[1])

    yield start
    stop.set()
    for server in listening:
        server.close()


def _provider(port: int, **options: Any) -> Any:
    return allama.provider(
        "openai", api_key="sk-test-key", base_url=f"http://127.0.0.1:{port}/v1", **options
    )


def _past(port: int, seconds: str = "0.5 s") -> str:
    return (
        f"the call to 127.0.0.1:{port} took longer than its deadline ({seconds}, from the "
        "call's start to the answer's last byte); change it with the `deadline=` argument of "
        "allama.provider(...) (or of the Transport you pass): a number of seconds, or None "
        "for no limit on the whole call"
    )


REQUEST = ChatRequest("gpt-4o-mini").user("Hi")


def _consume(provider: Any) -> Any:
    with provider.chat_stream(REQUEST) as stream:
        for _ in stream:
            pass
        return stream.response()


async def _aconsume(provider: Any) -> Any:
    stream = await provider.achat_stream(REQUEST)
    async with stream:
        async for _ in stream:
            pass
        return await stream.response()


CALLS: dict[str, Callable[[Any], object]] = {
    "chat": lambda provider: provider.chat(REQUEST),
    "achat": lambda provider: asyncio.run(provider.achat(REQUEST)),
    "chat_stream": _consume,
    "achat_stream": lambda provider: asyncio.run(_aconsume(provider)),
}


def _timed_failure(call: Callable[[], object]) -> tuple[Error, float]:
    began = time.monotonic()
    with pytest.raises(Error) as raised:
        call()
    return raised.value, time.monotonic() - began


@pytest.mark.parametrize("way", list(CALLS))
@pytest.mark.parametrize("behaviour", [_drips, _pads, _pings, _silent], ids=lambda b: b.__name__)
def test_a_call_past_its_deadline_is_a_timeout_made_at_a_cost_unknown(
    serve: Callable[[_Behaviour], int], way: str, behaviour: _Behaviour
) -> None:
    port = serve(behaviour)
    provider = _provider(port, timeout=GUARD * 2, deadline=0.5)
    error, took = _timed_failure(lambda: CALLS[way](provider))
    assert type(error) is RequestTimeoutError
    assert (error.message, error.retryable) == (_past(port), True)
    # The request went out whole: made, and maybe billed with no usage to say what for.
    assert error.context.metadata == {REPORTED_USAGE_KEY: {}}
    assert [(paid["provider"], paid["usage"]) for paid in paid_for(error)] == [("openai", {})]
    assert took < GUARD


@pytest.mark.parametrize("way", list(CALLS))
def test_a_server_gone_silent_just_before_the_deadline_is_cut_at_the_deadline(
    serve: Callable[[_Behaviour], int], way: str
) -> None:
    """Each wait for the body is bounded by the time left as it begins, not by what was
    left when the status came (the whole deadline again, here)."""
    port = serve(_stalls)
    provider = _provider(port, timeout=GUARD * 2, deadline=1.0)
    error, took = _timed_failure(lambda: CALLS[way](provider))
    assert type(error) is RequestTimeoutError
    assert (error.message, error.retryable) == (_past(port, "1 s"), True)
    assert error.context.metadata == {REPORTED_USAGE_KEY: {}}
    assert [(paid["provider"], paid["usage"]) for paid in paid_for(error)] == [("openai", {})]
    assert took < 1.6  # (a second past the silence's start, were the status's limit kept)


def _never_sent(port: int) -> str:
    return (
        f"the call to 127.0.0.1:{port} was never sent: it waited for a free connection past "
        "its deadline (0.5 s); change it with the `deadline=` argument of allama.provider(...) "
        "(or of the Transport you pass): a number of seconds, or None for no limit on the "
        "whole call"
    )


def test_a_call_that_waited_for_a_free_connection_past_its_deadline_was_never_sent(
    serve: Callable[[_Behaviour], int],
) -> None:
    import httpx2

    port = serve(_pings)
    transport = Transport(limits=httpx2.Limits(max_connections=1), deadline=0.5)
    provider = allama.provider(
        "openai", api_key="sk-test-key", base_url=f"http://127.0.0.1:{port}/v1", transport=transport
    )
    with provider.chat_stream(REQUEST):  # answered, unread: the one connection held
        error, _ = _timed_failure(lambda: provider.chat(REQUEST))
    assert (type(error), error.message, error.retryable) == (
        RequestTimeoutError,
        _never_sent(port),
        True,
    )
    assert (error.context.metadata, paid_for(error)) == ({}, [])


def test_an_async_call_that_waited_for_a_free_connection_past_its_deadline_was_never_sent(
    serve: Callable[[_Behaviour], int],
) -> None:
    import httpx2

    port = serve(_pings)
    transport = Transport(limits=httpx2.Limits(max_connections=1), deadline=0.5)
    provider = allama.provider(
        "openai", api_key="sk-test-key", base_url=f"http://127.0.0.1:{port}/v1", transport=transport
    )

    async def main() -> Error:
        stream = await provider.achat_stream(REQUEST)
        async with stream:  # answered, unread: the one connection held
            with pytest.raises(Error) as raised:
                await provider.achat(REQUEST)
        return raised.value

    error = asyncio.run(main())
    assert (type(error), error.message) == (RequestTimeoutError, _never_sent(port))
    assert (error.context.metadata, paid_for(error)) == ({}, [])


def _failing_with(raised: type[Exception]) -> Transport:
    """A transport (of clients of the caller's) whose every request fails with `raised`,
    the request's body unread: what httpx2 raises when connecting, or sending, runs out
    of the time the deadline left it."""
    import httpx2

    def handler(request: httpx2.Request) -> httpx2.Response:
        raise raised("timed out", request=request)

    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        deadline=0.5,
    )


_ADVICE = (
    "change it with the `deadline=` argument of allama.provider(...) (or of the Transport you "
    "pass): a number of seconds, or None for no limit on the whole call"
)


@pytest.mark.parametrize("way", list(CALLS))
@pytest.mark.parametrize(
    ("limit", "said"),
    [
        (
            "ConnectTimeout",
            "was never sent: connecting to it took longer than its deadline (0.5 s)",
        ),
        (
            "WriteTimeout",
            "was not answered: sending the request took longer than its deadline (0.5 s), and "
            "it may not have gone out whole",
        ),
    ],
)
def test_a_call_cut_by_its_deadline_before_its_request_went_out_whole_costs_nothing(
    way: str, limit: str, said: str
) -> None:
    """As one that waited for a free connection past it: the provider never had it whole,
    so it is not said to have taken the time "from sending", and no cost is recorded."""
    import httpx2

    provider = allama.provider(
        "openai",
        api_key="sk-test-key",
        base_url="http://127.0.0.1:9/v1",
        transport=_failing_with(getattr(httpx2, limit)),
    )
    error, _ = _timed_failure(lambda: CALLS[way](provider))
    assert (type(error), type(error.__cause__)) == (RequestTimeoutError, getattr(httpx2, limit))
    assert (error.message, error.retryable) == (f"the call to 127.0.0.1:9 {said}; {_ADVICE}", True)
    assert (error.context.metadata, paid_for(error)) == ({}, [])


@pytest.mark.parametrize("way", list(CALLS))
def test_calls_sent_within_no_deadline_have_none(
    serve: Callable[[_Behaviour], int], way: str
) -> None:
    """What a provider batch job's own calls (its files, its status) are sent within."""
    streamed = "stream" in way
    port = serve(_slow_streams if streamed else _slow_answers)
    provider = _provider(port, deadline=0.2)
    with no_deadline():
        response: Any = CALLS[way](provider)
    assert response.text() == ("hi" if streamed else '{"n": 1}')
    with pytest.raises(RequestTimeoutError):  # (and outside it, the deadline again)
        CALLS[way](provider)


class Row(BaseModel):
    n: int


def test_an_extractions_record_of_a_call_past_its_deadline_has_its_cost_unknown(
    serve: Callable[[_Behaviour], int],
) -> None:
    provider = _provider(serve(_pads), deadline=0.5)
    with pytest.raises(RequestTimeoutError) as raised:
        allama.extract(provider, Row, REQUEST)
    record = ExtractionMetadata.from_error(raised.value)
    assert record is not None
    assert (record.usage, record.cost) == (Usage(), None)


@pytest.mark.parametrize("way", list(CALLS))
def test_a_call_within_its_deadline_is_answered(
    serve: Callable[[_Behaviour], int], way: str
) -> None:
    streamed = "stream" in way
    response: Any = CALLS[way](_provider(serve(_streams if streamed else _answers), deadline=GUARD))
    assert response.text() == ("hi" if streamed else '{"n": 1}')


@pytest.mark.parametrize("way", ["chat", "achat"])
def test_a_read_timeout_shorter_than_the_deadline_is_still_the_read_timeout(
    serve: Callable[[_Behaviour], int], way: str
) -> None:
    port = serve(_silent)
    error, _ = _timed_failure(lambda: CALLS[way](_provider(port, timeout=0.3, deadline=GUARD)))
    assert type(error) is RequestTimeoutError
    assert error.message.startswith(
        f"127.0.0.1:{port} sent nothing for longer than the read timeout (0.3 s); "
        "change it with the `timeout=` argument"
    )


def test_a_transport_given_the_deadline_bounds_the_calls_sent_through_it(
    serve: Callable[[_Behaviour], int],
) -> None:
    port = serve(_drips)
    transport = Transport(deadline=0.5)
    assert (transport.deadline, Transport().deadline) == (0.5, None)
    assert repr(transport).endswith(", deadline=0.5)")
    provider = allama.provider(
        "openai",
        api_key="sk-test-key",
        base_url=f"http://127.0.0.1:{port}/v1",
        transport=transport,
    )
    error, took = _timed_failure(lambda: provider.chat(REQUEST))
    assert (type(error), error.message) == (RequestTimeoutError, _past(port))
    assert took < GUARD


@pytest.mark.parametrize(
    ("deadline", "kind", "message"),
    [
        (0, ValueError, "deadline must be a positive, finite number of seconds (None sets no "),
        (-1.0, ValueError, "deadline must be a positive, finite number of seconds (None sets no "),
        (float("inf"), ValueError, "deadline must be a positive, finite number of seconds"),
        (float("nan"), ValueError, "deadline must be a positive, finite number of seconds"),
        (True, TypeError, "deadline must be a number of seconds or None, got bool"),
        ("30", TypeError, "deadline must be a number of seconds or None, got str"),
    ],
)
def test_a_deadline_that_is_no_number_of_seconds_is_refused_at_the_provider(
    deadline: object, kind: type[Exception], message: str
) -> None:
    with pytest.raises(kind) as raised:
        allama.provider("openai", api_key="sk-test-key", deadline=deadline)
    assert str(raised.value).startswith(message)
    with pytest.raises(kind):
        Transport(deadline=deadline)  # type: ignore[arg-type]


def test_a_deadline_beside_a_transport_is_refused() -> None:
    with pytest.raises(ValueError) as raised:
        allama.provider("openai", api_key="sk-test-key", transport=Transport(), deadline=5)
    assert str(raised.value) == (
        "deadline= has no effect with transport=: pass it to the Transport instead"
    )
