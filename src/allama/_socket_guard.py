"""A sync client's sockets, each known from the moment it connects.

A sync client closed from another thread (`Transport.close`) must wake every call on it. Its
pool's connections do not show a socket still being connected (nor one connected but not yet
handed to the connection), and a closed pool opens new connections for the calls still in it:
those calls went on, or waited for their read timeout. The guard knows every socket the pool's
backend made, and once closed lets none through. (Built on httpcore2's sync backend: where
its layout differs, `Transport` falls back to the sockets its pools show.)
"""

from __future__ import annotations

import socket
import ssl
import threading
import weakref
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2
from httpcore2._backends.sync import SyncStream

__all__ = ["SocketGuard", "guard_sockets"]


class SocketGuard:
    """Every socket the backends of a sync client's pools connect, kept (weakly) until
    `close()` takes them; each connected after is closed at once (a `ConnectError`)."""

    __slots__ = ("_closed", "_lock", "_sockets")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._closed = False

    def admit(self, stream: httpcore2.NetworkStream) -> httpcore2.NetworkStream:
        """`stream`, its socket kept; closed and refused once the guard is closed. Under
        the lock `close()` takes: a socket is either among those it took or refused."""
        sock = stream.get_extra_info("socket")
        with self._lock:
            if not self._closed:
                if isinstance(sock, socket.socket):
                    self._sockets.add(sock)
                return stream
        stream.close()  # no call has read it yet
        raise httpcore2.ConnectError("the connection pool was closed")

    def close(self) -> list[socket.socket]:
        """Refuse every socket from now on; the live ones connected so far."""
        with self._lock:
            self._closed = True
            return list(self._sockets)


class _GuardedBackend(httpcore2.NetworkBackend):
    __slots__ = ("_guard", "_inner")

    def __init__(self, inner: httpcore2.NetworkBackend, guard: SocketGuard) -> None:
        self._inner = inner
        self._guard = guard

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return self._guard.admit(self._tls_kept(stream))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        stream = self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return self._guard.admit(self._tls_kept(stream))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)

    def _tls_kept(self, stream: httpcore2.NetworkStream) -> httpcore2.NetworkStream:
        """httpcore2's own stream as one whose TLS socket (a new object: the plain one is
        let go) is kept too; its reads and writes are its own, not wrapped."""
        if type(stream) is not SyncStream:
            return stream
        sock = stream.get_extra_info("socket")
        return _GuardedStream(sock, self._guard) if isinstance(sock, socket.socket) else stream


class _GuardedStream(SyncStream):
    def __init__(self, sock: socket.socket, guard: SocketGuard) -> None:
        super().__init__(sock)
        self._guard = guard

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.NetworkStream:
        return self._guard.admit(super().start_tls(ssl_context, server_hostname, timeout))


def guard_sockets(client: httpx2.Client) -> SocketGuard | None:
    """One guard in front of the backend of each of `client`'s pools (its own and its
    mounts', a proxy's among them); `None` (nothing changed) where they are not built as
    expected."""
    transports = [getattr(client, "_transport", None)]
    mounts = getattr(client, "_mounts", None)
    if isinstance(mounts, dict):
        # A `None` mount (a NO_PROXY host, with proxies from the environment) sends
        # through the client's own transport: it has no pool of its own.
        transports.extend(mount for mount in mounts.values() if mount is not None)
    pools = [getattr(transport, "_pool", None) for transport in transports]
    if not all(
        isinstance(getattr(pool, "_network_backend", None), httpcore2.NetworkBackend)
        for pool in pools
    ):
        return None
    guard = SocketGuard()
    for pool in pools:
        pool._network_backend = _GuardedBackend(pool._network_backend, guard)  # type: ignore[union-attr]
    return guard
