"""The HTTP request an adapter builds and the HTTP response it reads: plain data, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

__all__ = ["HttpRequest", "HttpResponse", "SECRET_HEADERS"]

SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "x-goog-api-key"})
"""Header names whose values are credentials: never shown in a repr."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """Method, URL, headers and JSON body. `content` is the body as compact UTF-8 JSON
    (or `raw`, when the body is not JSON).

    The body is read-only: it holds cached schemas (the dialect rewrite's) by reference.
    """

    method: str
    url: str
    headers: Mapping[str, str]
    body: dict[str, Any]
    params: Mapping[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    """The body as bytes instead of JSON (a file upload, or `b""` for a GET)."""

    @property
    def content(self) -> bytes:
        if self.raw is not None:
            return self.raw
        # The compact UTF-8 JSON `json.dumps(body, separators=(",", ":"), ensure_ascii=False)`
        # writes (a float may be spelled differently: `1e-7` for `1e-07`), four times faster.
        return to_json(self.body)

    def __repr__(self) -> str:
        shown = {
            key: ("<redacted>" if key.lower() in SECRET_HEADERS else value)
            for key, value in self.headers.items()
        }
        return (
            f"HttpRequest(method={self.method!r}, url={self.url!r}, headers={shown!r}, "
            f"body_keys={sorted(self.body)!r})"
        )


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A complete response: status, lower-cased headers, body bytes."""

    status: int
    headers: Mapping[str, str]
    content: bytes

    def __repr__(self) -> str:
        return f"HttpResponse(status={self.status}, body=<{len(self.content)} bytes>)"
