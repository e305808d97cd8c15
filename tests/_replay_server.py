"""What the provider tests over real sockets share: where the recordings are, and a local
HTTP server that answers with bodies, chunked streams or a connection cut mid-chunk.

Each dialect's test subclasses the server and the handler with its own routing (`do_POST`)
and its own content types.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))
CORPUS_IS_DEFAULT = CORPUS.resolve() == DEFAULT_CORPUS.resolve()


class ReplayServer(ThreadingHTTPServer):
    """Records what it was sent (`seen`, under `lock`) and answers by route."""

    daemon_threads = True
    seen: list[tuple[str, dict[str, str], dict[str, Any]]]
    lock: threading.Lock

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-answer are what several tests are about.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def pieces(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


class ReplyHandler(BaseHTTPRequestHandler):
    """Ways to answer: a body, JSON, a stream in 13-byte chunks, or a cut connection."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    json_type: ClassVar[str] = "application/json"
    stream_type: ClassVar[str] = "text/event-stream"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def send_body(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.send_body(
            status,
            {"content-type": self.json_type, **(headers or {})},
            json.dumps(payload).encode(),
        )

    def start_chunked(self, headers: dict[str, str] | None = None) -> None:
        self.send_response(200)
        for key, value in (headers or {"content-type": self.stream_type}).items():
            self.send_header(key, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def send_stream(self, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.start_chunked(headers)
        for piece in pieces(data, 13):
            self.chunk(piece)
        self.end_chunked()

    def drop(self) -> None:
        """Announce a chunk, never finish it, and hang up."""
        self.wfile.write(b"400\r\npartial")
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True
