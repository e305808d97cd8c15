"""HTTP for providers: one `httpx2.Client` and one `httpx2.AsyncClient`, each made on first use.

Connections are pooled and reused across calls. For a client the transport made itself,
what httpx2 merges into every request (URL parsing, default headers, timeout) is worked out
once per endpoint, and a call that is not streamed goes to the client's own HTTP transport,
past the client's layer (auth, redirects, event hooks: none set on such a client), keeping
what that layer would do: cookies the server sets are kept and sent back, a proxy from the
environment is used (the call then goes through the client), and httpx2's log of each
request is written when its logger is on. A client of the caller's, or one holding
cookies, goes through `build_request` and `send` on every call. Timeouts become
`RequestTimeoutError`, connection failures `NetworkError` (both retryable), whether they
happen while sending or in the middle of a stream; their messages name the host and port,
and for a timeout the limit that ran out, its value and how to change it, and the httpx2
exception stays chained as the cause. `timeout=` bounds each wait alone; `deadline=` bounds
a whole call, from its start to the answer's last byte (a stream's end), and running out is a
timeout that names it (`_Deadline`). One met waiting for the answer to a request sent
whole reached the provider, and may be billed: it says so (an empty usage beside it),
but for a connection that broke at once (`_AT_ONCE`), as a kept-alive one a server closed as
the request arrived does. A cancellation or a Ctrl-C met then (or as a stream that answered
is read) is raised as itself, with that call kept on it, for an extraction's record (`_cut`).
Closing a stream closes its HTTP response, so an abandoned stream gives its connection
back; a read of it in flight in another thread or task wakes at once and fails as closed
(`StreamResponse.close`). A call in flight when the transport is closed under it fails at
once, not tried again (see `Transport.close`).

`httpx2` itself is imported by the first request (or by a setting made of its types), not
by building a transport: a program that builds providers at start-up pays for the HTTP
stack when it first talks to one.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Self, TypeVar

from allama._lazy import deferred_module
from allama.adapters._http import HttpRequest, HttpResponse, origin
from allama.errors import (
    REPORTED_USAGE_KEY,
    Error,
    InvalidRequestError,
    NetworkError,
    RequestTimeoutError,
    ServerError,
    paid_before_foreign,
    take_paid_before,
)

if TYPE_CHECKING:
    import asyncio

    import httpx2

    from allama._socket_guard import SocketGuard
else:
    httpx2 = deferred_module("httpx2", globals(), "httpx2")

__all__ = [
    "AsyncStreamResponse",
    "StreamResponse",
    "Transport",
    "check_deadline",
    "check_timeout",
    "mask_query_in_log",
    "no_deadline",
]

_DEFAULT_SECONDS = 600.0
_DEFAULT_CONNECT_SECONDS = 5.0
"""Ten minutes to answer (reasoning models are slow), five seconds to connect."""


def _default_timeout() -> httpx2.Timeout:
    return httpx2.Timeout(_DEFAULT_SECONDS, connect=_DEFAULT_CONNECT_SECONDS)


def _failures() -> tuple[type[Exception], ...]:
    """What httpx2 raises for a request that could not be made or finished. Called in
    `except` clauses, which evaluate it only when something was raised."""
    return (httpx2.TransportError, httpx2.InvalidURL, httpx2.StreamError, httpx2.DecodingError)


_LIMITS: tuple[tuple[str, str, str], ...] = (
    ("ConnectTimeout", "connect", "connecting to {where} took longer than"),
    ("ReadTimeout", "read", "{where} sent nothing for longer than"),
    ("WriteTimeout", "write", "sending the request to {where} took longer than"),
    ("PoolTimeout", "pool", "waiting for a free connection to {where} took longer than"),
)
"""httpx2's timeout exceptions by name, the limit each is about, and what happened."""
_OWN_CLIENT_ADVICE = (
    "change it with the `timeout=` argument of allama.provider(...) (or of the Transport you "
    "pass): a number of seconds for every limit, or an httpx2.Timeout per limit, such as "
    "httpx2.Timeout(600.0, connect=5.0)"
)
_CALLERS_CLIENT_ADVICE = "change it with `timeout=` on the httpx2 client you gave the transport"
_DEADLINE_ADVICE = (
    "change it with the `deadline=` argument of allama.provider(...) (or of the Transport you "
    "pass): a number of seconds, or None for no limit on the whole call"
)


def _where(request: httpx2.Request | None) -> str:
    """`host:port` of the request, the port filled in from the scheme; nothing else of the
    URL (its path and query may carry account ids or keys)."""
    if request is None:
        return "the endpoint"
    url = request.url
    host = url.host or "the endpoint"
    if ":" in host:
        host = f"[{host}]"
    port = url.port or {"https": 443, "http": 80}.get(url.scheme)
    return f"{host}:{port}" if port else host


def _request_of(exc: Exception, fallback: httpx2.Request | None) -> httpx2.Request | None:
    if isinstance(exc, httpx2.HTTPError):
        try:
            return exc.request
        except RuntimeError:
            pass
    return fallback


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _timeout_message(
    exc: httpx2.TimeoutException, request: httpx2.Request | None, own_client: bool
) -> str:
    where = _where(request)
    deadline = _deadline_of(request)
    if deadline is not None and deadline.ran_out_by(exc):
        # What the call had come to says whether the provider may have it: before its
        # request went out whole, it cost nothing (`_unanswered`), and is said so.
        seconds = _seconds(deadline.seconds)
        if isinstance(exc, httpx2.PoolTimeout):
            return (
                f"the call to {where} was never sent: it waited for a free connection past "
                f"its deadline ({seconds}); {_DEADLINE_ADVICE}"
            )
        if isinstance(exc, httpx2.ConnectTimeout):
            return (
                f"the call to {where} was never sent: connecting to it took longer than its "
                f"deadline ({seconds}); {_DEADLINE_ADVICE}"
            )
        if isinstance(exc, httpx2.WriteTimeout):
            return (
                f"the call to {where} was not answered: sending the request took longer than "
                f"its deadline ({seconds}), and it may not have gone out whole; "
                f"{_DEADLINE_ADVICE}"
            )
        return (
            f"the call to {where} took longer than its deadline "
            f"({seconds}, from the call's start to the answer's last byte); {_DEADLINE_ADVICE}"
        )
    advice = _OWN_CLIENT_ADVICE if own_client else _CALLERS_CLIENT_ADVICE
    for kind, limit, happened in _LIMITS:
        if isinstance(exc, getattr(httpx2, kind)):
            settings = request.extensions.get("timeout") if request is not None else None
            value = settings.get(limit) if isinstance(settings, dict) else None
            if isinstance(value, int | float):
                what = f"the {limit} timeout ({_seconds(value)})"
            else:
                what = f"the {limit} timeout"
            return f"{happened.format(where=where)} {what}; {advice}"
    return f"the request to {where} timed out ({type(exc).__name__}); {advice}"


def _body_lost(
    answer: HttpResponse,
    exc: Exception,
    request: httpx2.Request | None,
    own_client: bool,
    closed: bool = False,
) -> HttpResponse:
    """A response whose body did not arrive whole, or that its `Content-Encoding` does not
    decode (`answer`, emptied): an error status says what went wrong (a refused key is not
    tried again), the body none of it. An answer is a server error to try again, and no
    network failure (which a batch run takes for a provider out of reach): the call was
    made and may be billed, with no usage to say what for, so its cost is unknown (an
    empty usage reported beside it), not nothing."""
    if answer.status >= 400:
        return answer
    error = _failure(exc, request, own_client=own_client, closed=closed)
    deadline = _deadline_of(_request_of(exc, request))
    by_deadline = deadline is not None and deadline.ran_out_by(exc)
    if not closed and not isinstance(exc, httpx2.DecodingError) and not by_deadline:
        where = _where(_request_of(exc, request))
        error = ServerError(
            f"the answer from {where} was cut off after its status ({answer.status}) "
            f"({type(exc).__name__})"
        ).mark_authored()
    raise error.with_metadata(REPORTED_USAGE_KEY, {}) from exc


def _unanswered(
    exc: Exception, request: httpx2.Request | None, *, own_client: bool, closed: bool = False
) -> Error:
    """The error for a request that got no status. One whose body went out whole, and that
    then waited for its answer in vain (the read timed out, the connection broke), reached
    the provider, which may be making the answer: made and maybe billed, its cost unknown
    (an empty usage reported beside it), as an answer cut off after its status is. One that
    failed connecting, waiting for a connection or sending is not: httpx2 reads on after a
    failed write (for an early answer), so what it raises then is told by the body's
    sending, not by its type."""
    error = _failure(exc, request, own_client=own_client, closed=closed)
    request = _request_of(exc, request)
    sent_at = getattr(request.stream, "sent_at", None) if request is not None else None
    if sent_at is None:
        return error
    if isinstance(exc, httpx2.ReadTimeout) or (
        isinstance(exc, httpx2.ReadError | httpx2.RemoteProtocolError)
        and (closed or time.monotonic() - sent_at >= _AT_ONCE)  # (closed: cut by a close of ours)
    ):
        error.with_metadata(REPORTED_USAGE_KEY, {})
    return error


def _cut(exc: BaseException, request: httpx2.Request | None, status: int | None = None) -> None:
    """`exc`, none of allama's (a cancellation, a Ctrl-C, a client's own exception), ended
    a call. One whose request had gone out whole, and that got no error `status`, reached
    the provider, which may be making the answer: made and maybe billed, its cost unknown,
    as a read timed out then says (`_unanswered`). Kept on `exc` as paid before it
    (`paid_before_foreign`), by an entry that names no provider: the extraction that made
    the call names it. What an earlier call kept on the same exception object is taken off.
    A generator closed (`GeneratorExit`) is no call ended."""
    if isinstance(exc, Error | GeneratorExit):
        return
    take_paid_before(exc)
    sent_at = getattr(request.stream, "sent_at", None) if request is not None else None
    if sent_at is not None and (status is None or status < 400):
        paid_before_foreign(exc, [{"usage": {}}])


_AT_ONCE = 1.0
"""Seconds: a connection that broke sooner after the request went out whole broke as it
arrived, the request not read (a server closing a kept-alive connection as the request
reached it, which happens under load and costs nothing), not while the provider made the
answer."""


_DEADLINE_KEY = "allama.deadline"
"""The request extension that holds a call's `_Deadline` (httpx2 and httpcore2 pass other
extensions by), read where its failure is worded."""

_LIMITS_CUT = ("connect", "read", "write", "pool")


class _Deadline:
    """The `deadline=` of one call: `seconds` from its start to the answer's last byte,
    ending at `end` (`time.monotonic()`). httpx2 bounds each wait alone (`timeout=`): a
    server that sends a byte a second, or a keep-alive comment every few seconds, holds a
    call forever. So every limit is cut to the time left as the call starts (`cut`), the
    read limit again as the answer's status comes (`answered`), each read of the body to
    the time left as it begins (`_capped`, `_achunks_within`: a server that sends until
    just before the deadline and then goes silent is cut at the deadline, not when the
    limit set at the status runs out), and the body, read in chunks, is checked against
    the clock after each (`overdue`). A timeout of a limit it cut, or its check, is the
    deadline running out (`ran_out_by`)."""

    __slots__ = ("configured", "cut", "end", "ran_out", "seconds")

    def __init__(self, seconds: float, start: float) -> None:
        self.seconds = seconds
        self.end = start + seconds
        self.configured: dict[str, Any] = {}
        self.cut: set[str] = set()
        """The limits set to the time left, shorter than their own."""
        self.ran_out = False
        """Whether a check between chunks found the deadline past."""

    def start(self, request: httpx2.Request) -> None:
        """Give `request` limits no longer than the deadline, and the deadline itself (in
        an extensions dict of its own: a template's is shared)."""
        given = request.extensions.get("timeout")
        self.configured = dict(given) if isinstance(given, dict) else {}
        limits = dict(self.configured)
        for limit in _LIMITS_CUT:
            own = limits.get(limit)
            if own is None or own > self.seconds:
                limits[limit] = self.seconds
                self.cut.add(limit)
        request.extensions = {**request.extensions, "timeout": limits, _DEADLINE_KEY: self}

    def answered(self, request: httpx2.Request) -> None:
        """The status came: the body's reads (whose limit httpcore2 takes as the body
        begins) wait no longer than the time left now, a millisecond at least (a limit of
        0 is no wait at all, which httpcore2 reads as a broken connection)."""
        limits = request.extensions.get("timeout")
        if not isinstance(limits, dict):
            return
        left = max(self.end - time.monotonic(), 0.001)
        own = self.configured.get("read")
        if own is None or own > left:
            request.extensions["timeout"] = {**limits, "read": left}
            self.cut.add("read")

    def overdue(self, request: httpx2.Request) -> httpx2.ReadTimeout:
        """The read timeout a chunk that came past the deadline is failed with, worded and
        recorded as the deadline's (`_timeout_message`, `_body_lost`)."""
        self.ran_out = True
        return httpx2.ReadTimeout("the call's deadline passed", request=request)

    def ran_out_by(self, exc: Exception) -> bool:
        """Whether `exc` is the deadline running out: its check, or a limit it cut."""
        if not isinstance(exc, httpx2.TimeoutException):
            return False
        if isinstance(exc, httpx2.ReadTimeout) and self.ran_out:
            return True
        return any(
            limit in self.cut and isinstance(exc, getattr(httpx2, kind))
            for kind, limit, _ in _LIMITS
        )


def _deadline_of(request: httpx2.Request | None) -> _Deadline | None:
    if request is None:
        return None
    deadline = request.extensions.get(_DEADLINE_KEY)
    return deadline if isinstance(deadline, _Deadline) else None


_NO_DEADLINE: ContextVar[bool] = ContextVar("allama_no_deadline", default=False)


@contextmanager
def no_deadline() -> Iterator[None]:
    """Calls sent within (in this context, and in the threads given a copy of it) have no
    deadline: a provider batch job's own calls (its files, its status), whose uploads and
    downloads a deadline sized for model calls would cut, every time. A context, not an
    argument of `send`: a Transport subclass's `send(request)` passes it on unchanged."""
    token = _NO_DEADLINE.set(True)
    try:
        yield
    finally:
        _NO_DEADLINE.reset(token)


def _deadline_for(seconds: float | None) -> _Deadline | None:
    """The deadline of `seconds` for a call starting now: none for `None`, nor within
    `no_deadline()`."""
    if seconds is None or _NO_DEADLINE.get():
        return None
    return _Deadline(seconds, time.monotonic())


def _reads_through(
    response: httpx2.Response, wrap: Callable[[Callable[..., bytes]], Callable[..., bytes]]
) -> Callable[[], None] | None:
    """Have each read of `response`'s connection (HTTP/1, a sync stream of httpcore2's) go
    through `wrap(read)`: httpcore2 reads a body with the read limit it took as the body
    began, which nothing else can change. What undoes it; `None` where the connection's
    stream is not one known (or is wrapped already)."""
    stream = _own_stream(response)
    read = getattr(stream, "read", None)
    own = getattr(stream, "__dict__", None)
    if read is None or not isinstance(own, dict) or "read" in own:
        return None
    wrapped = wrap(read)
    stream.read = wrapped

    def undo() -> None:
        if own.get("read") is wrapped:
            del own["read"]

    return undo


def _capped(response: httpx2.Response, deadline: _Deadline) -> Callable[[], None] | None:
    """Make each read of `response`'s connection wait no longer than the time left before
    `deadline` (`_reads_through`): a server that sends until just before the deadline and
    then goes silent would run out the limit taken as the body began only well past it.
    What undoes it, or `None` (the chunks are still checked). Reads made once `response` is
    closed pass untouched: its connection is the pool's again, and may be another call's."""

    def wrap(read: Callable[..., bytes]) -> Callable[..., bytes]:
        def within(max_bytes: int, timeout: float | None = None) -> bytes:
            if response.is_closed:
                return read(max_bytes, timeout)
            left = deadline.end - time.monotonic()
            if timeout is not None and timeout <= left:
                return read(max_bytes, timeout)  # (its own limit runs out first: its timeout)
            try:
                return read(max_bytes, max(left, 0.001))
            except Exception:
                if time.monotonic() >= deadline.end:
                    deadline.ran_out = True  # (a read timeout now is the deadline's)
                raise

        return within

    return _reads_through(response, wrap)


def _read_within(response: httpx2.Response, deadline: _Deadline) -> bytes:
    """The whole body of `response`, read in chunks, each read bounded by `deadline`
    (`_capped`) and each chunk checked against it."""
    undo = _capped(response, deadline)
    parts = []
    try:
        for chunk in response.iter_bytes():
            if time.monotonic() >= deadline.end:
                raise deadline.overdue(response.request)
            parts.append(chunk)
    finally:
        if undo is not None:
            undo()
    return b"".join(parts)


async def _achunks_within(response: httpx2.Response, deadline: _Deadline) -> AsyncIterator[bytes]:
    """The body of an async `response`, each wait for a chunk bounded by `deadline` (on an
    asyncio loop: `asyncio.timeout_at`, this task's alone, so a connection given back to
    the pool is never touched) and each chunk checked against it. On another loop's library
    the chunks are checked alone."""
    import asyncio

    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:  # another event loop's library
        loop = None
    chunks = response.aiter_bytes()
    while True:
        if loop is None:
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                return
        else:
            # The loop's clock need not be `time.monotonic()` (uvloop's is its own).
            when = loop.time() + (deadline.end - time.monotonic())
            try:
                async with asyncio.timeout_at(when):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise deadline.overdue(response.request) from exc
        if time.monotonic() >= deadline.end:
            raise deadline.overdue(response.request)
        yield chunk


async def _aread_within(response: httpx2.Response, deadline: _Deadline) -> bytes:
    """`_read_within` for an async response."""
    return b"".join([chunk async for chunk in _achunks_within(response, deadline)])


def _whole_body(
    response: httpx2.Response, built: httpx2.Request, deadline: _Deadline | None
) -> bytes:
    """The body of an answer to `built` whose status just came, read within `deadline` if
    any (its limits are `built`'s, whatever request a client's auth made of it)."""
    if deadline is None:
        return response.read()
    deadline.answered(built)
    return _read_within(response, deadline)


async def _awhole_body(
    response: httpx2.Response, built: httpx2.Request, deadline: _Deadline | None
) -> bytes:
    """`_whole_body` for an async response."""
    if deadline is None:
        return await response.aread()
    deadline.answered(built)
    return await _aread_within(response, deadline)


_SENT_BODY: type[httpx2.ByteStream] | None = None


def _body(content: bytes) -> httpx2.ByteStream:
    """A request's body that says when (`sent_at`) httpx2 had taken all of it: written to the
    connection, for a transport of httpx2's (`_unanswered`)."""
    global _SENT_BODY
    kind = _SENT_BODY
    if kind is None:

        class SentBody(httpx2.ByteStream):
            sent_at: float | None = None

            def __iter__(self) -> Iterator[bytes]:
                yield from super().__iter__()
                self.sent_at = time.monotonic()

            async def __aiter__(self) -> AsyncIterator[bytes]:
                async for chunk in super().__aiter__():
                    yield chunk
                self.sent_at = time.monotonic()

        kind = _SENT_BODY = SentBody
    return kind(content)


def _emptied(response: httpx2.Response) -> HttpResponse:
    return HttpResponse(response.status_code, _headers(response), b"")


def _failure(
    exc: Exception, request: httpx2.Request | None, *, own_client: bool, closed: bool = False
) -> Error:
    """The allama error for an httpx2 failure. Its message names what failed and where
    (host and port only), never the key or the rest of the URL. One of a call whose client
    was `closed` under it is that, not tried again: a retry would reopen what was closed
    (a program shutting down pays for every call twice), and no network failed."""
    request = _request_of(exc, request)
    if closed:
        whose = (
            "the provider's connections were closed (close() or aclose())"
            if own_client
            else "the httpx2 client given to the Transport was closed"
        )
        return _closed_error(whose, exc, request)
    if isinstance(exc, httpx2.TimeoutException):
        return RequestTimeoutError(_timeout_message(exc, request, own_client)).mark_authored()
    if isinstance(exc, httpx2.InvalidURL | httpx2.UnsupportedProtocol):
        return InvalidRequestError(
            f"the endpoint URL cannot be used ({type(exc).__name__})"
        ).mark_authored()
    name = type(exc).__name__
    where = _where(request)
    if isinstance(exc, httpx2.DecodingError):
        # It answered, with a body its own `Content-Encoding` does not decode: no network
        # failure (which a batch run takes for a provider out of reach), one to try again.
        return ServerError(
            f"the response from {where} could not be decoded: its Content-Encoding does "
            f"not match its body ({name})"
        ).mark_authored()
    if isinstance(exc, httpx2.ConnectError):
        message = f"could not connect to {where} ({name})"
        reason = _no_tls_answer(exc)
        if reason is not None:
            # Asking again would meet the same server: not retried.
            return (
                NetworkError(
                    f"{message}: the server answered the TLS handshake with something else "
                    f"({reason}): it may speak plain HTTP (try http:// in the base URL)"
                )
                .mark_authored()
                .with_retryable(False)
            )
    elif isinstance(exc, httpx2.ProxyError):
        message = f"the proxy between here and {where} failed ({name})"
    else:
        message = f"the connection to {where} failed ({name})"
    return NetworkError(message).mark_authored()


_NO_TLS_REASONS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE"})
"""What OpenSSL names a TLS handshake answered by something other than TLS (a plain HTTP
server's response, read as a TLS record): `WRONG_VERSION_NUMBER`, and from OpenSSL 3.2 on,
`RECORD_LAYER_FAILURE`."""


def _no_tls_answer(exc: BaseException) -> str | None:
    """OpenSSL's reason where the connection failed because the TLS handshake was answered
    in something other than TLS (`https://` to a server speaking plain HTTP), else `None`:
    the SSL error that says so is found among the causes httpx2 and httpcore2 chain behind
    theirs."""
    import ssl  # (loaded with httpx2 already)

    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ssl.SSLError):
            reason = getattr(cause, "reason", None)
            return reason if reason in _NO_TLS_REASONS else None
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _closed_error(whose: str, exc: Exception, request: httpx2.Request | None) -> Error:
    """The error of a call whose connection was closed under it (`whose` says by what):
    no network failed, and it is not tried again."""
    return Error(
        f"{whose} while the call to {_where(request)} was in flight ({type(exc).__name__})"
    ).mark_authored()


def _sending_failures() -> tuple[type[Exception], ...]:
    """`_failures()`, and the `RuntimeError` httpx2 raises for a request given to a client
    closed (by another thread) since the call took it."""
    return (*_failures(), RuntimeError)


_Client = TypeVar("_Client")

_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")
"""The proxy URLs httpx2 takes (SOCKS with the `socksio` package)."""


def _proxy_problem(exc: Exception) -> str | None:
    """What is wrong with the proxy the environment sets (`HTTPS_PROXY`, `ALL_PROXY`...),
    which httpx2 reads when it makes a client and fails on (an `ImportError` for SOCKS
    without `socksio`, a `ValueError` for another scheme): the variable and the scheme
    only, never the proxy's URL (it may hold a password). `None` when no proxy setting
    explains `exc`."""
    from urllib.request import getproxies

    proxies = getproxies()
    for scheme in ("all", "https", "http"):
        value = proxies.get(scheme)
        if not value:
            continue
        name = next(
            (name for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY") if os.getenv(name)),
            f"{scheme.upper()}_PROXY",
        )
        try:
            kind = httpx2.URL(value if "://" in value else f"http://{value}").scheme
        except httpx2.InvalidURL:
            return f"the proxy {name} names is not a valid URL"
        if kind in ("socks5", "socks5h") and isinstance(exc, ImportError):
            return (
                f"{name} names a SOCKS proxy, which needs the socksio package "
                "(pip install 'httpx2[socks]')"
            )
        if kind not in _PROXY_SCHEMES:
            return (
                f"{name} names a proxy of the scheme {kind!r}; httpx2 takes http://, "
                "https:// and socks5:// proxies"
            )
    return None


def _made(make: Callable[[], _Client]) -> _Client:
    """A client `make()` returns: one a proxy setting of the environment keeps httpx2 from
    making is an `InvalidRequestError` that says which setting and why, not an
    `ImportError` or a `ValueError` from inside httpx2 on every call."""
    try:
        return make()
    except (ImportError, ValueError, httpx2.InvalidURL) as exc:
        problem = _proxy_problem(exc)
        if problem is None:
            raise
        raise InvalidRequestError(
            f"no HTTP client can be made: {problem}. Fix or unset it, or give the "
            "Transport a client of your own (Transport(client=httpx2.Client(...)))"
        ).mark_authored() from None


def _headers(response: httpx2.Response) -> dict[str, str]:
    return {key.lower(): value for key, value in response.headers.items()}


def _direct(client: Any, kind: type[Any]) -> Any:
    """The transport inside `client` (a client the transport made) when sending through it
    is what `client.send` would do: no proxy or other mount (from the environment), no
    auth, no event hooks, redirects not followed. `client.send` wraps it in an auth flow,
    a redirect loop, the cookie jar and a log record: 7 per cent of a call's instructions
    against a local server. `None` when the client is not built as expected (another
    httpx2), to send through it."""
    transport = getattr(client, "_transport", None)
    mounts = getattr(client, "_mounts", None)
    if type(transport) is not kind or not isinstance(mounts, dict) or mounts:
        return None
    if client.auth is not None or client.follow_redirects or any(client.event_hooks.values()):
        return None
    return transport


def _sockets(client: Any, *, idle_only: bool = False) -> list[Any]:
    """The sockets of the connections in the pools of `client` (a client the transport
    made), of its idle ones alone with `idle_only`: none where httpcore2 does not keep them
    as expected (another version)."""
    mounts = getattr(client, "_mounts", None)
    transports = [getattr(client, "_transport", None)]
    if isinstance(mounts, dict):
        transports.extend(mounts.values())
    found = []
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        for connection in getattr(pool, "connections", ()):  # a copy, taken under its lock
            if idle_only and not connection.is_idle():
                continue
            stream = getattr(getattr(connection, "_connection", None), "_network_stream", None)
            info = getattr(stream, "get_extra_info", None)
            sock = None if info is None else info("socket")
            if sock is not None:
                found.append(sock)
    return found


def _end(sockets: list[Any], *, close: bool) -> None:
    """Shut `sockets` down (a thread blocked reading one wakes, its peer sees it closed),
    or with `close`, close them: only those of a loop that has ended, which no longer
    watches them (closing one a loop still watches would leave its number there, for the
    next socket given that number to meet)."""
    import socket

    for sock in sockets:
        # asyncio's transports give a view of their socket, holding the socket itself.
        real = sock if isinstance(sock, socket.socket) else getattr(sock, "_sock", None)
        if not isinstance(real, socket.socket):
            continue
        try:
            if close:
                real.close()
            else:  # past `ssl.SSLSocket.shutdown`, which drops its TLS state a reader uses
                socket.socket.shutdown(real, socket.SHUT_RDWR)
        except OSError:
            pass  # closed already


def _retire(sockets: list[Any]) -> None:
    """Shut a sync client's `sockets` down, so that a thread blocked reading one wakes at
    once, and let go of each one's descriptor only when nothing holds its socket: closed at
    once, the number could be given to a new socket before a reader that had taken it began
    to wait, and that reader would wait on the new one. A socket closed already is passed
    over."""
    import contextlib
    import socket

    for sock in sockets:
        if not isinstance(sock, socket.socket):
            continue
        # Past `ssl.SSLSocket.shutdown` and `detach`, which drop the TLS state a reader uses;
        # one not connected is let go of all the same.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        descriptor = socket.socket.detach(sock)  # its `close()` now closes nothing
        if descriptor >= 0:
            weakref.finalize(sock, os.close, descriptor)


def _let_go(stopped: list[tuple[bool, httpx2.AsyncClient]]) -> None:
    """End the connections of async clients whose loops are not running, without their
    loops (`AsyncClient.aclose` needs its own): every one of a loop that has ended, closed;
    the idle ones of a loop that stands stopped, shut down (a call it left in flight may go
    on if it runs again, and the loop closes them as it runs or is collected)."""
    for ended, client in stopped:
        _end(_sockets(client, idle_only=not ended), close=ended)


def _own_socket(response: httpx2.Response) -> list[Any]:
    """The socket `response` is read from, where the connection is its alone (HTTP/1: an
    HTTP/2 one carries other calls too); none where httpcore2 does not say it."""
    extensions = response.extensions
    if extensions.get("http_version") not in (b"HTTP/1.1", b"HTTP/1.0"):
        return []
    info = getattr(extensions.get("network_stream"), "get_extra_info", None)
    sock = None if info is None else info("socket")
    return [] if sock is None else [sock]


_DRAIN_BYTES = 8192
_DRAIN_SECONDS = 0.1
"""What is read of a body after the answer's end marker, for its connection to go back to
the pool (`StreamResponse.drain`): at most so many bytes, in so many seconds."""


def _own_stream(response: httpx2.Response) -> Any:
    """The network stream `response` is read from, where the connection is its alone
    (HTTP/1); `None` where httpcore2 does not say it."""
    if response.extensions.get("http_version") not in (b"HTTP/1.1", b"HTTP/1.0"):
        return None
    return response.extensions.get("network_stream")


def _received(client: Any, response: httpx2.Response, content: bytes) -> HttpResponse:
    """A response read past the client's layer: its cookies kept as the client keeps them."""
    headers = _headers(response)
    if "set-cookie" in headers:
        client.cookies.extract_cookies(response)
    return HttpResponse(response.status_code, headers, content)


def _open() -> bool:
    return False


class _OpenStream:
    """What an open streamed response holds, sync or async, and what a failure of its body
    becomes: the status and headers are known before the body arrives."""

    def __init__(
        self,
        response: httpx2.Response,
        *,
        own_client: bool = True,
        closed: Callable[[], bool] | None = None,
        deadline: _Deadline | None = None,
    ) -> None:
        self._response = response
        self._own_client = own_client
        self._deadline = deadline
        """The call's deadline, checked after each chunk of the body (its reader's time
        between chunks counts), and bounding each wait for one."""
        self._uncap: Callable[[], None] | None = None
        """What undoes the deadline's bound on the reads of a sync stream's connection."""
        self._closed = closed or _open
        """Whether the client the stream came from was closed under it."""
        self._shut = False
        """Whether the stream was closed: a read in flight then (another thread's or
        task's) fails as closed."""
        self.status = response.status_code
        self.headers = _headers(response)

    def _broken(self, exc: Exception) -> Error:
        """A stream broken after its status: the failure it is (a stream cut mid-way is told
        apart from one that ended early), made and maybe billed where it answered (an empty
        usage reported, unless the stream's own says more). One closed while it was read
        is that, not tried again; what it paid is what the stream reported, as for one
        closed between reads (`StreamCollector.mark_made`)."""
        response = self._response
        if self._shut:
            whose = "the stream was closed (close() or aclose())"
            return _closed_error(whose, exc, response.request)
        error = _failure(exc, response.request, own_client=self._own_client, closed=self._closed())
        if response.status_code < 400:
            error.with_metadata(REPORTED_USAGE_KEY, {})
        return error

    def _cut(self, exc: BaseException) -> None:
        """A stream ended by `exc`, none of allama's, as it was read: made and maybe billed
        where it answered, as a broken one is (`_broken`); one closed is what it reported."""
        if not self._shut:
            _cut(exc, self._response.request, self.status)

    def _lost(self, exc: Exception) -> bytes:
        """A whole read broken off: an error status's answer is read empty, any other one
        raised as `_body_lost` says."""
        emptied, request = _emptied(self._response), self._response.request
        return _body_lost(emptied, exc, request, self._own_client, self._closed()).content


class StreamResponse(_OpenStream):
    """An open streamed response: status and headers now, the body as it arrives."""

    def iter_bytes(self) -> Iterator[bytes]:
        return self._chunks()

    def _chunks(self) -> Iterator[bytes]:
        deadline = self._deadline
        try:
            if deadline is None:
                yield from self._response.iter_bytes()
                return
            if self._uncap is None:
                self._uncap = _capped(self._response, deadline)
            for chunk in self._response.iter_bytes():
                if time.monotonic() >= deadline.end:
                    raise deadline.overdue(self._response.request)
                yield chunk
        except _failures() as exc:
            raise self._broken(exc) from exc
        except BaseException as exc:  # a Ctrl-C: raised as itself
            self._cut(exc)
            raise
        finally:
            self._uncapped()

    def _uncapped(self) -> None:
        """Undo the deadline's bound on the reads of this stream's connection (`_capped`)."""
        undo, self._uncap = self._uncap, None
        if undo is not None:
            undo()

    def read(self) -> bytes:
        try:
            if self._deadline is None:
                return self._response.read()
            return _read_within(self._response, self._deadline)
        except _failures() as exc:
            return self._lost(exc)

    def drain(self, rest: Iterator[bytes]) -> None:
        """Read `rest`, what is left of the body (this response's chunks, as the caller
        reads them) after the answer's end marker, undecoded, so that its connection goes
        back to the pool: left unread, `close()` ends it, and the next call connects (and
        shakes hands) again. What is there already, or comes within `_DRAIN_SECONDS`, up to
        `_DRAIN_BYTES`: a server that keeps the stream open after its end is left to
        `close()`, not waited for."""
        self._uncapped()  # (the chunks are still checked against the call's deadline)
        deadline = time.monotonic() + _DRAIN_SECONDS
        reader = threading.get_ident()

        def wrap(read: Callable[..., bytes]) -> Callable[..., bytes]:
            # These reads with what is left of ours. Those of this thread alone: the body
            # read whole, the connection is the pool's, and another thread's call may take it.
            def within(max_bytes: int, timeout: float | None = None) -> bytes:
                if threading.get_ident() == reader:
                    left = max(deadline - time.monotonic(), 0.001)
                    timeout = left if timeout is None else min(timeout, left)
                return read(max_bytes, timeout)

            return within

        undo = _reads_through(self._response, wrap)
        if undo is None:
            return  # (not httpcore2's stream as it is known)
        try:
            taken = 0
            for chunk in rest:
                taken += len(chunk)
                # Past the deadline a read still waits a millisecond: a tail that trickles
                # in faster would be read on to its `_DRAIN_BYTES`, for seconds.
                if taken > _DRAIN_BYTES or time.monotonic() >= deadline:
                    return
        except Error:
            pass  # timed out, or broke: the connection is closed
        finally:
            undo()

    def close(self) -> None:
        """Close the response. A read of its body in flight (another thread's) wakes at
        once and fails as closed: its connection is shut down first, as `Transport.close`
        does (a socket closed under a read alone leaves it waiting for its timeout). Unless
        its body was read whole (then the connection is the pool's again), whether or not a
        read runs now: one may begin as this closes."""
        self._shut = True
        if not self._response.is_closed:
            _retire(_own_socket(self._response))
        self._response.close()
        self._uncapped()


class AsyncStreamResponse(_OpenStream):
    """The async twin of `StreamResponse`."""

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        deadline = self._deadline
        try:
            if deadline is None:
                async for chunk in self._response.aiter_bytes():
                    yield chunk
                return
            async for chunk in _achunks_within(self._response, deadline):
                yield chunk
        except _failures() as exc:
            raise self._broken(exc) from exc
        except BaseException as exc:  # a cancellation: raised as itself
            self._cut(exc)
            raise

    async def aread(self) -> bytes:
        try:
            if self._deadline is None:
                return await self._response.aread()
            return await _aread_within(self._response, self._deadline)
        except _failures() as exc:
            return self._lost(exc)

    async def adrain(self, rest: AsyncIterator[bytes]) -> None:
        """`StreamResponse.drain`: the rest of the body, if it comes soon, read for the
        connection to go back to the pool."""
        import asyncio

        if _own_stream(self._response) is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # another event loop's library: `aclose()` ends it
            return
        taken = 0
        try:
            async with asyncio.timeout(_DRAIN_SECONDS):
                async for chunk in rest:
                    taken += len(chunk)
                    if taken > _DRAIN_BYTES:
                        return
        except (TimeoutError, Error):
            pass  # the connection is closed

    async def aclose(self) -> None:
        """Close the response: a read of its body in flight (another task's) fails as
        closed."""
        self._shut = True
        await self._response.aclose()


def mask_query_in_log(base_url: str) -> None:
    """httpx2 writes each request's URL to its INFO log, query included: where the caller
    wrote a query into a provider's base URL (a gateway's `?key=`), the log record of a
    call to that host (a job's file too, under the host's root) shows the query masked
    (`?***`), as the provider's repr does. Records of other hosts are left as httpx2
    writes them."""
    with _MASKING_LOCK:
        global _MASKING
        if _MASKING is None:
            import logging

            _MASKING = _QueryMask()
            logging.getLogger("httpx2").addFilter(_MASKING)
        _MASKING.bases.add(base_url)


class _QueryMask:
    """The filter `mask_query_in_log` adds to httpx2's logger."""

    def __init__(self) -> None:
        self.bases: set[str] = set()
        self._origins: dict[str, tuple[str, bytes, int | None] | None] = {}
        """Each base URL's origin, made when a record is first filtered (httpx2 is loaded
        by then)."""

    def filter(self, record: Any) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) < 2 or "?" not in str(args[1]):
            return True
        for base in tuple(self.bases):
            if base not in self._origins:
                self._origins[base] = origin(base)
        if origin(args[1]) in self._origins.values():
            record.args = (args[0], str(args[1]).partition("?")[0] + "?***", *args[2:])
        return True


_TRANSPORTS: weakref.WeakSet[Transport] = weakref.WeakSet()
"""Every transport, for a child process to forget the parent's connections."""


def _after_fork_in_child() -> None:
    for transport in list(_TRANSPORTS):
        transport._forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_MASKING: _QueryMask | None = None
_MASKING_LOCK = threading.Lock()

_TEMPLATES = 64
"""Request templates kept per transport: one per endpoint and header set in practice."""


@dataclass(frozen=True, slots=True)
class _Template:
    """What `build_request` merges for one endpoint, headers and client, computed once."""

    url: httpx2.URL
    headers: tuple[tuple[bytes, bytes], ...]
    extensions: dict[str, Any]


def _template_key(request: HttpRequest) -> tuple[object, ...]:
    return (request.method, request.url, tuple(request.params.items()), *request.headers.items())


def check_timeout(value: Any) -> None:
    """Check the `timeout=` argument: `None` for the default, a positive number of seconds
    for every limit, or an `httpx2.Timeout`."""
    if value is None or isinstance(value, httpx2.Timeout):
        return
    _check_seconds(
        value,
        "timeout",
        "a number of seconds or an httpx2.Timeout, such as httpx2.Timeout(600.0, connect=5.0);",
        "httpx2.Timeout(None) waits without a limit",
    )


def check_deadline(value: Any) -> None:
    """Check the `deadline=` argument: `None` for none, or a positive, finite number of
    seconds (the limit on a whole call, which no `timeout=` is)."""
    if value is not None:
        _check_seconds(value, "deadline", "a number of seconds or None,", "None sets no deadline")


def _check_seconds(value: Any, name: str, kinds: str, unbounded: str) -> None:
    """Refuse an argument `name` that is no positive, finite number of seconds, saying what
    else it may be (`kinds`) and how to set no limit (`unbounded`)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{name} must be {kinds} got {type(value).__name__}")
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive, finite number of seconds ({unbounded})")


def _as_timeout(value: float | httpx2.Timeout | None) -> httpx2.Timeout:
    """A checked `timeout=` argument as the `httpx2.Timeout` it stands for."""
    if value is None:
        return _default_timeout()
    return value if isinstance(value, httpx2.Timeout) else httpx2.Timeout(value)


class Transport:
    """Sends `HttpRequest`s, sync or async, over pooled connections.

    Pass `client` / `async_client` to bring your own (proxies, custom TLS); the transport
    then leaves closing them to you, and merges their settings into every request but
    `follow_redirects`: a redirect is never followed (a provider's key in a header of its
    own would go on to the other host), and comes back as a refusal that names it. A
    subclass may read the requests it is given but must not change them: their bodies hold
    cached schemas.
    """

    def __init__(
        self,
        *,
        timeout: float | httpx2.Timeout | None = None,
        limits: httpx2.Limits | None = None,
        client: httpx2.Client | None = None,
        async_client: httpx2.AsyncClient | None = None,
        deadline: float | None = None,
    ) -> None:
        check_timeout(timeout)
        check_deadline(deadline)
        for name, value, kind in (
            ("limits", limits, "Limits"),
            ("client", client, "Client"),
            ("async_client", async_client, "AsyncClient"),
        ):
            if value is not None and not isinstance(value, getattr(httpx2, kind)):
                raise TypeError(f"{name} must be an httpx2.{kind}, got {type(value).__name__}")
        self._timeout_setting = timeout
        self._timeout: httpx2.Timeout | None = None
        self._deadline = None if deadline is None else float(deadline)
        self._limits = limits
        self._client = client
        self._async_client = async_client
        self._owns_client = client is None
        self._owns_async_client = async_client is None
        self._lock = threading.RLock()
        """Re-entered where a finalizer, run by a collection while it is held, closes the
        transport (a Ray step's `__del__`)."""
        self._templates: dict[tuple[object, ...], _Template] = {}
        # The transports inside clients of our own that calls skip the client's layer for
        # (see `_direct`), each with the client it belongs to: a closed client's is unused.
        self._direct: tuple[httpx2.Client, httpx2.HTTPTransport] | None = None
        self._guard: tuple[httpx2.Client, SocketGuard] | None = None
        """The sockets of the sync client of our own, each known as it connects."""
        self._adirect: tuple[httpx2.AsyncClient, httpx2.AsyncHTTPTransport] | None = None
        self._async_loop: asyncio.AbstractEventLoop | None = None
        """The loop the async client of our own was made on: its connections are that
        loop's, and another loop (a second `asyncio.run`) is given a client of its own."""
        self._async_clients: (
            weakref.WeakKeyDictionary[
                asyncio.AbstractEventLoop,
                tuple[
                    httpx2.AsyncClient,
                    tuple[httpx2.AsyncClient, httpx2.AsyncHTTPTransport] | None,
                ],
            ]
            | None
        ) = None
        """The async clients of our own by loop, made as each loop first calls (a sync
        program loads neither asyncio nor this)."""
        self._http_log: Any = None
        self._closing = False
        """Set by the provider that owns this transport while it closes what the calls on
        it wait for before it closes the transport (`local` stops its engine first): a call
        that fails meanwhile was closed under."""
        _TRANSPORTS.add(self)

    @property
    def deadline(self) -> float | None:
        """Seconds a whole call may take, from its start to the answer's last byte (a
        stream's end, its reader's time included); `None`: no limit but `timeout`'s."""
        return self._deadline

    @property
    def timeout(self) -> httpx2.Timeout:
        timeout = self._timeout
        if timeout is None:
            timeout = self._timeout = _as_timeout(self._timeout_setting)
        return timeout

    def _pool_limits(self) -> httpx2.Limits:
        return self._limits or httpx2.Limits(max_connections=1000, max_keepalive_connections=100)

    def _sync(self) -> httpx2.Client:
        client = self._client
        if client is None:
            with self._lock:
                client = self._client
                if client is None:
                    client = _made(
                        lambda: httpx2.Client(timeout=self.timeout, limits=self._pool_limits())
                    )
                    try:
                        from allama._socket_guard import guard_sockets
                    except ImportError:  # httpcore2 laid out otherwise: `close()` takes
                        guard = None  # the sockets its pools show
                    else:
                        guard = guard_sockets(client)
                    self._guard = None if guard is None else (client, guard)
                    direct = _direct(client, httpx2.HTTPTransport)
                    self._direct = None if direct is None else (client, direct)
                    self._client = client
        return client

    def _async(self) -> httpx2.AsyncClient:
        client = self._async_client
        if client is not None and not self._owns_async_client:
            return client  # the caller's: its loop is the caller's business
        import asyncio  # loaded: this runs on a loop

        loop = asyncio.get_running_loop()
        if client is not None and self._async_loop is loop:
            return client
        stopped: list[tuple[bool, httpx2.AsyncClient]] = []
        with self._lock:
            client = self._async_client
            if client is None or self._async_loop is not loop:
                if self._async_clients is None:
                    self._async_clients = weakref.WeakKeyDictionary()
                known = self._async_clients.get(loop)
                if known is None:
                    from allama._sockets import cheap_idle_checks

                    # A program that runs each job on a loop of its own (`asyncio.run`, or
                    # a loop it never closes) leaves the clients of the others behind.
                    stopped = self._stopped(loop)
                    made = _made(
                        lambda: httpx2.AsyncClient(timeout=self.timeout, limits=self._pool_limits())
                    )
                    cheap_idle_checks(made)
                    direct = _direct(made, httpx2.AsyncHTTPTransport)
                    known = (made, None if direct is None else (made, direct))
                    self._async_clients[loop] = known
                client, self._adirect = known
                self._async_client, self._async_loop = client, loop
        if stopped:
            _let_go(stopped)
        return client

    def _logged(self) -> bool:
        """Whether httpx2's log of every request is on (then the client's layer writes it)."""
        log = self._http_log
        if log is None:
            import logging  # loaded with httpx2 already

            log = self._http_log = logging.getLogger("httpx2")
        return bool(log.isEnabledFor(20))  # logging.INFO

    def _build(
        self,
        client: httpx2.Client | httpx2.AsyncClient,
        owned: bool,
        request: HttpRequest,
        deadline: _Deadline | None,
    ) -> httpx2.Request:
        """The httpx2 request of `request`, bounded by `deadline` (`_Deadline.start`)."""
        built = self._built(client, owned, request)
        if deadline is not None:
            deadline.start(built)
        return built

    def _built(
        self, client: httpx2.Client | httpx2.AsyncClient, owned: bool, request: HttpRequest
    ) -> httpx2.Request:
        content = request.content
        if not owned or client.cookies:
            # A client of the caller's (or one holding cookies) merges its own settings.
            built = client.build_request(
                request.method,
                request.url,
                content=content,
                headers=dict(request.headers),
                params=dict(request.params) if request.params else None,
            )
            built.stream = _body(content)
            return built
        # A client of our own never changes its settings, so what `build_request` merges
        # (URL, default headers, timeout) is merged once per endpoint and reused.
        template = self._templates.get(_template_key(request)) or self._template(client, request)
        headers = httpx2.Headers([*template.headers, (b"Content-Length", b"%d" % len(content))])
        return httpx2.Request(
            request.method,
            template.url,
            headers=headers,
            stream=_body(content),
            extensions=template.extensions,
        )

    def _template(
        self, client: httpx2.Client | httpx2.AsyncClient, request: HttpRequest
    ) -> _Template:
        built = client.build_request(
            request.method,
            request.url,
            headers=dict(request.headers),
            params=dict(request.params) if request.params else None,
        )
        template = _Template(
            url=built.url,
            headers=tuple(
                (name, value)
                for name, value in built.headers.raw
                if name.lower() not in (b"content-length", b"transfer-encoding")
            ),
            extensions=built.extensions,
        )
        with self._lock:
            if len(self._templates) >= _TEMPLATES:
                self._templates.pop(next(iter(self._templates)), None)
            self._templates[_template_key(request)] = template
        return template

    def send(self, request: HttpRequest) -> HttpResponse:
        client, own = self._sync(), self._owns_client
        direct = self._direct
        deadline = _deadline_for(self._deadline)
        built = None
        status = None
        try:
            built = self._build(client, own, request, deadline)
            if direct is None or direct[0] is not client or self._logged():
                response = client.send(built, stream=True, follow_redirects=False)
                status = response.status_code
                try:
                    content = _whole_body(response, built, deadline)
                except _failures() as exc:
                    return _body_lost(
                        _emptied(response), exc, built, own, self._closed_under(client)
                    )
                finally:
                    response.close()
                return HttpResponse(response.status_code, _headers(response), content)
            response = direct[1].handle_request(built)
            response.request = built
            status = response.status_code
            try:
                content = _whole_body(response, built, deadline)
            except _failures() as exc:
                kept = _received(client, response, b"")  # its cookies, as any answer's
                return _body_lost(kept, exc, built, own, self._closed_under(client))
            finally:
                response.close()
            return _received(client, response, content)
        except _sending_failures() as exc:
            closed = self._closed_under(client)
            if isinstance(exc, RuntimeError) and not closed:
                raise
            raise _unanswered(exc, built, own_client=own, closed=closed) from exc
        except BaseException as exc:  # a Ctrl-C, a client's own: raised as itself
            _cut(exc, built, status)
            raise

    async def asend(self, request: HttpRequest) -> HttpResponse:
        client, own = self._async(), self._owns_async_client
        direct = self._adirect
        deadline = _deadline_for(self._deadline)
        built = None
        status = None
        try:
            built = self._build(client, own, request, deadline)
            if direct is None or direct[0] is not client or self._logged():
                response = await client.send(built, stream=True, follow_redirects=False)
                status = response.status_code
                try:
                    content = await _awhole_body(response, built, deadline)
                except _failures() as exc:
                    return _body_lost(_emptied(response), exc, built, own, client.is_closed)
                finally:
                    await response.aclose()
                return HttpResponse(response.status_code, _headers(response), content)
            response = await direct[1].handle_async_request(built)
            response.request = built
            status = response.status_code
            try:
                content = await _awhole_body(response, built, deadline)
            except _failures() as exc:
                kept = _received(client, response, b"")  # its cookies, as any answer's
                return _body_lost(kept, exc, built, own, client.is_closed)
            finally:
                await response.aclose()
            return _received(client, response, content)
        except _sending_failures() as exc:
            if isinstance(exc, RuntimeError) and not client.is_closed:
                raise
            raise _unanswered(exc, built, own_client=own, closed=client.is_closed) from exc
        except BaseException as exc:  # a cancellation, a client's own: raised as itself
            _cut(exc, built, status)
            raise

    def open_stream(self, request: HttpRequest) -> StreamResponse:
        client, own = self._sync(), self._owns_client
        deadline = _deadline_for(self._deadline)
        built = None
        try:
            built = self._build(client, own, request, deadline)
            response = client.send(built, stream=True, follow_redirects=False)
            if deadline is not None:
                deadline.answered(built)
            return StreamResponse(
                response,
                own_client=own,
                closed=lambda: self._closed_under(client),
                deadline=deadline,
            )
        except _sending_failures() as exc:
            closed = self._closed_under(client)
            if isinstance(exc, RuntimeError) and not closed:
                raise
            raise _unanswered(exc, built, own_client=own, closed=closed) from exc
        except BaseException as exc:  # a Ctrl-C, a client's own: raised as itself
            _cut(exc, built)
            raise

    async def aopen_stream(self, request: HttpRequest) -> AsyncStreamResponse:
        client, own = self._async(), self._owns_async_client
        deadline = _deadline_for(self._deadline)
        built = None
        try:
            built = self._build(client, own, request, deadline)
            response = await client.send(built, stream=True, follow_redirects=False)
            if deadline is not None:
                deadline.answered(built)
            return AsyncStreamResponse(
                response, own_client=own, closed=lambda: client.is_closed, deadline=deadline
            )
        except _sending_failures() as exc:
            if isinstance(exc, RuntimeError) and not client.is_closed:
                raise
            raise _unanswered(exc, built, own_client=own, closed=client.is_closed) from exc
        except BaseException as exc:  # a cancellation, a client's own: raised as itself
            _cut(exc, built)
            raise

    def _closed_under(self, client: httpx2.Client) -> bool:
        """Whether the sync `client` a call took was closed since: `close()` lets go of a
        client of its own before it wakes the calls on it, and closes it after; its owner
        may wake them before (`_closing`)."""
        return client is not self._client or client.is_closed or self._closing

    def close(self) -> None:
        """Close the sync client, and the connections of the async clients of loops that
        are not running (`aclose()` closes the running loop's too): those this transport
        made. It does not wait for the calls in flight on them: each fails at once with an
        `Error` that says the provider was closed under it (not tried again: a retry would
        pay twice), and a call made after opens new connections. Clients of the caller's
        are left open, and used still."""
        if self._owns_client:
            client, self._client = self._client, None
            if client is not None:
                # Calls blocked reading wake now: a socket closed under one alone leaves
                # some waiting for their read timeout. The guard knows the sockets being
                # connected too, and refuses those connected from now on (a closed pool
                # still opens connections for the calls in it).
                guard = self._guard
                if guard is not None and guard[0] is client:
                    _retire(guard[1].close())
                else:
                    _retire(_sockets(client))
                client.close()
        if self._async_clients is not None:
            with self._lock:
                stopped = self._stopped(None)
            _let_go(stopped)

    def _stopped(
        self, calling: asyncio.AbstractEventLoop | None
    ) -> list[tuple[bool, httpx2.AsyncClient]]:
        """Take (the lock held) the async clients of loops that are not running, but for
        `calling`'s, each with whether its loop has ended: a loop's client holds the loop,
        which a weak key alone would never let go, and the connections it made. A loop
        running in another thread keeps its client; one that runs again makes another."""
        clients = self._async_clients
        if clients is None:
            return []
        stopped = [loop for loop in clients if loop is not calling and not loop.is_running()]
        if self._async_loop in stopped:
            self._async_client, self._async_loop, self._adirect = None, None, None
        taken = [(loop.is_closed(), clients.pop(loop, None)) for loop in stopped]
        return [(ended, known[0]) for ended, known in taken if known is not None]

    async def aclose(self) -> None:
        """Close what `close()` closes, and this loop's async client (if this transport
        made it): another loop's, running in another thread, goes on with its calls."""
        if self._owns_async_client:
            import asyncio

            loop = asyncio.get_running_loop()
            with self._lock:
                clients = self._async_clients
                known = None if clients is None else clients.pop(loop, None)
                if self._async_loop is loop:
                    self._async_client, self._async_loop, self._adirect = None, None, None
            if known is not None:
                await known[0].aclose()
        self.close()

    def _forget_after_fork(self) -> None:
        """In a child process: the clients of our own hold the parent's connections, on
        which the two processes' answers would cross. They are let go, unclosed (closing
        would end the parent's); the child makes its own as it calls."""
        self._lock = threading.RLock()  # held by another thread of the parent, maybe
        if self._owns_client:
            self._client, self._direct, self._guard = None, None, None
        if self._owns_async_client:
            self._async_client, self._async_loop, self._adirect = None, None, None
            self._async_clients = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __reduce__(self) -> NoReturn:
        # Pickling, `copy.copy` and `copy.deepcopy` all come here: a copy sharing the
        # clients would close the original's connections with its own `close`.
        raise TypeError(
            f"{type(self).__name__} cannot be pickled or copied: it holds open connections, "
            "and must be built in the process or copy that uses it (build it in the worker "
            "with allama.Transport(...), or let allama.provider(...) build its own)"
        )

    def __repr__(self) -> str:
        if self._deadline is not None:
            return f"Transport(timeout={self.timeout!r}, deadline={self._deadline!r})"
        return f"Transport(timeout={self.timeout!r})"
