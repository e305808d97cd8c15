"""The async connection pool's check of its idle connections, made cheap.

On every request and every response it closes, `httpcore2`'s pool asks each idle
connection whether the server has hung up (`get_extra_info("is_readable")`), and its
asyncio stream answers by building the dictionary of every attribute of the socket before
polling it: with many connections kept alive this is most of a client's CPU (measured:
about a third at 128 connections). The streams here answer the same question from the
socket found once, when the connection opens, with a poll object registered once (a
third of the cost of making one per question); everything else is the stream's own.
"""

from __future__ import annotations

import select
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2
from httpcore2._utils import is_socket_readable

__all__ = ["cheap_idle_checks"]


class _Stream(httpcore2.AsyncNetworkStream):
    __slots__ = ("_fd", "_inner", "_poll", "_socket")

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self._inner = inner
        # asyncio's transport gives a `TransportSocket` (a view with `fileno()`), not a
        # `socket.socket`: what `is_socket_readable` needs either way.
        self._socket: Any = inner.get_extra_info("socket")
        self._fd = -1
        self._poll: Any = None
        fileno = getattr(self._socket, "fileno", None)
        if fileno is not None and hasattr(select, "poll"):  # no `poll` on Windows
            fd = fileno()
            if isinstance(fd, int) and fd >= 0:
                self._fd = fd
                self._poll = select.poll()
                self._poll.register(fd, select.POLLIN)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._socket is not None:
            # The registered descriptor answers only while the socket still holds it: a
            # closed socket says -1, and its number may since belong to another one.
            if self._poll is not None and self._socket.fileno() == self._fd:
                return bool(self._poll.poll(0))
            return is_socket_readable(self._socket)
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.AsyncNetworkBackend):
    __slots__ = ("_inner",)

    def __init__(self, inner: httpcore2.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return _Stream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return _Stream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def cheap_idle_checks(client: httpx2.AsyncClient) -> bool:
    """Give `client`'s own connection pool the streams above; `False` (nothing changed)
    where the client is not built as expected (another transport, another version)."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(pool, httpcore2.AsyncConnectionPool) or backend is None:
        return False
    if not isinstance(backend, _Backend):
        pool._network_backend = _Backend(backend)
    return True
