"""HTTP for providers: one `httpx2.Client` and one `httpx2.AsyncClient`, each made on first use.

Connections are pooled and reused across calls. For a client the transport made itself,
what httpx2 merges into every request (URL parsing, default headers, timeout) is worked out
once per endpoint; a client of the caller's, or one holding cookies, goes through
`build_request` on every call. Timeouts become `RequestTimeoutError`,
connection failures `NetworkError` (both retryable), whether they happen while sending or
in the middle of a stream. Closing a stream closes its HTTP response, so an abandoned
stream gives its connection back.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Self

import httpx2

from allama.adapters._http import HttpRequest, HttpResponse
from allama.errors import InvalidRequestError, NetworkError, RequestTimeoutError

__all__ = ["AsyncStreamResponse", "DEFAULT_TIMEOUT", "StreamResponse", "Transport"]

DEFAULT_TIMEOUT = httpx2.Timeout(600.0, connect=5.0)
"""Ten minutes to answer (reasoning models are slow), five seconds to connect."""


class _Mapped:
    """httpx2 exceptions as allama errors. Messages name the failure kind only (no URL)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return
        if isinstance(exc, httpx2.TimeoutException):
            raise RequestTimeoutError(
                f"the request timed out ({type(exc).__name__})"
            ).mark_authored() from exc
        if isinstance(exc, httpx2.InvalidURL | httpx2.UnsupportedProtocol):
            raise InvalidRequestError(
                f"the endpoint URL cannot be used ({type(exc).__name__})"
            ).mark_authored() from exc
        if isinstance(exc, httpx2.TransportError | httpx2.StreamError):
            raise NetworkError(
                f"the connection failed ({type(exc).__name__})"
            ).mark_authored() from exc


_mapped = _Mapped()


def _headers(response: httpx2.Response) -> dict[str, str]:
    return {key.lower(): value for key, value in response.headers.items()}


class StreamResponse:
    """An open streamed response: status and headers now, the body as it arrives."""

    def __init__(self, response: httpx2.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = _headers(response)

    def iter_bytes(self) -> Iterator[bytes]:
        with _mapped:
            yield from self._response.iter_bytes()

    def read(self) -> bytes:
        with _mapped:
            return self._response.read()

    def close(self) -> None:
        self._response.close()


class AsyncStreamResponse:
    """The async twin of `StreamResponse`."""

    def __init__(self, response: httpx2.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = _headers(response)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        with _mapped:
            async for chunk in self._response.aiter_bytes():
                yield chunk

    async def aread(self) -> bytes:
        with _mapped:
            return await self._response.aread()

    async def aclose(self) -> None:
        await self._response.aclose()


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


class Transport:
    """Sends `HttpRequest`s, sync or async, over pooled connections.

    Pass `client` / `async_client` to bring your own (proxies, custom TLS); the transport
    then leaves closing them to you, and merges their settings into every request. A
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
    ) -> None:
        self._timeout = (
            DEFAULT_TIMEOUT
            if timeout is None
            else timeout
            if isinstance(timeout, httpx2.Timeout)
            else httpx2.Timeout(timeout)
        )
        self._limits = limits or httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
        self._client = client
        self._async_client = async_client
        self._owns_client = client is None
        self._owns_async_client = async_client is None
        self._lock = threading.Lock()
        self._templates: dict[tuple[object, ...], _Template] = {}

    @property
    def timeout(self) -> httpx2.Timeout:
        return self._timeout

    def _sync(self) -> httpx2.Client:
        client = self._client
        if client is None:
            with self._lock:
                client = self._client
                if client is None:
                    client = self._client = httpx2.Client(
                        timeout=self._timeout, limits=self._limits
                    )
        return client

    def _async(self) -> httpx2.AsyncClient:
        client = self._async_client
        if client is None:
            with self._lock:
                client = self._async_client
                if client is None:
                    client = self._async_client = httpx2.AsyncClient(
                        timeout=self._timeout, limits=self._limits
                    )
        return client

    def _build(
        self, client: httpx2.Client | httpx2.AsyncClient, owned: bool, request: HttpRequest
    ) -> httpx2.Request:
        content = request.content
        if not owned or client.cookies:
            # A client of the caller's (or one holding cookies) merges its own settings.
            return client.build_request(
                request.method,
                request.url,
                content=content,
                headers=dict(request.headers),
                params=dict(request.params) if request.params else None,
            )
        # A client of our own never changes its settings, so what `build_request` merges
        # (URL, default headers, timeout) is merged once per endpoint and reused.
        template = self._templates.get(_template_key(request)) or self._template(client, request)
        headers = httpx2.Headers([*template.headers, (b"Content-Length", b"%d" % len(content))])
        return httpx2.Request(
            request.method,
            template.url,
            headers=headers,
            stream=httpx2.ByteStream(content),
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
        client = self._sync()
        with _mapped:
            response = client.send(self._build(client, self._owns_client, request))
            return HttpResponse(response.status_code, _headers(response), response.content)

    async def asend(self, request: HttpRequest) -> HttpResponse:
        client = self._async()
        with _mapped:
            response = await client.send(self._build(client, self._owns_async_client, request))
            return HttpResponse(response.status_code, _headers(response), response.content)

    def open_stream(self, request: HttpRequest) -> StreamResponse:
        client = self._sync()
        with _mapped:
            return StreamResponse(
                client.send(self._build(client, self._owns_client, request), stream=True)
            )

    async def aopen_stream(self, request: HttpRequest) -> AsyncStreamResponse:
        client = self._async()
        with _mapped:
            return AsyncStreamResponse(
                await client.send(
                    self._build(client, self._owns_async_client, request), stream=True
                )
            )

    def close(self) -> None:
        """Close the sync client (if this transport made it)."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()

    async def aclose(self) -> None:
        """Close both clients (if this transport made them)."""
        client, self._async_client = self._async_client, None
        if client is not None and self._owns_async_client:
            await client.aclose()
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Transport(timeout={self._timeout!r})"
