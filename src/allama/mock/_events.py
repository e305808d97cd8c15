"""A whole response as the stream of events a provider would send for it."""

from __future__ import annotations

from allama.stream import response_events as _events
from allama.types import ChatResponse, StreamEvent

CHUNK = 8
"""Characters per delta, so that streamed tests see values arrive in pieces."""


def response_events(response: ChatResponse, *, chunk: int = CHUNK) -> list[StreamEvent]:
    """The events of `response`: start, warnings, each block in pieces, provider data,
    usage, finish."""
    return list(_events(response, chunk=chunk))
