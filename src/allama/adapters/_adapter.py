"""What a dialect's adapter answers, so that one HTTP provider class can speak any dialect.

An adapter is sans-I/O: it encodes a `ChatRequest` to an `HttpRequest` (warnings in
`Degradations`), decodes an `HttpResponse` to a `ChatResponse` or the `allama.Error` it
stands for, builds an incremental stream decoder from bytes to `StreamEvent`s, and answers
capability questions from its tables (data). Where the endpoint lives and how it
authenticates belong to the preset; how the dialect is spoken to one endpoint is the
adapter's profile.

Each dialect is a package under `allama.adapters` with a module `_adapter` whose
`make_adapter(preset_name, profile, capabilities)` builds one; `load_adapter` imports it
when a provider of that dialect is first built, so a provider loads only its own dialect.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from allama.adapters._http import HttpRequest, HttpResponse

if TYPE_CHECKING:
    from allama._degradations import Degradations
    from allama.errors import Error
    from allama.types import (
        CapabilitySupport,
        ChatCapability,
        ChatRequest,
        ChatResponse,
        StreamEvent,
        Warning,
    )

__all__ = ["Adapter", "AdapterFactory", "StreamDecoder", "load_adapter"]


class StreamDecoder(Protocol):
    """Stream bytes in any chunking to events; `done` once the dialect's end marker came."""

    @property
    def done(self) -> bool: ...

    def feed(self, chunk: bytes) -> Iterator[StreamEvent]: ...

    def close(self) -> Iterator[StreamEvent]:
        """The events left at the end of input; raises when the input was cut mid-event."""
        ...


class Adapter(Protocol):
    """One dialect, as spoken to one endpoint (its profile and capability table)."""

    @property
    def display_name(self) -> str:
        """The endpoint as warnings name it ("OpenAI", "Anthropic")."""
        ...

    @property
    def stream_accept(self) -> str:
        """The `accept` header of a streamed call (`text/event-stream`)."""
        ...

    def capability(self, model: str, capability: ChatCapability) -> CapabilitySupport: ...

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        """The path under the base URL for a call to `model`, and its query parameters."""
        ...

    def encode(
        self,
        request: ChatRequest,
        degradations: Degradations,
        *,
        stream: bool,
        url: str,
        headers: Mapping[str, str],
        params: Mapping[str, str],
    ) -> HttpRequest:
        """The HTTP request; raises `UnsupportedError` before sending what cannot be honoured
        under `UnsupportedPolicy.ERROR` (and what the dialect can never send)."""
        ...

    def decode(
        self,
        response: HttpResponse,
        *,
        provider: str,
        model: str,
        warnings: Sequence[Warning],
    ) -> ChatResponse:
        """The response, or raises the `allama.Error` an error status or body stands for."""
        ...

    def error(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        provider: str,
        model: str,
    ) -> Error:
        """The error of a streamed call refused with an error status."""
        ...

    def stream_decoder(self, *, provider: str, model: str) -> StreamDecoder: ...


class AdapterFactory(Protocol):
    def __call__(self, preset_name: str, profile: object, capabilities: object) -> Adapter: ...


def load_adapter(dialect: str) -> AdapterFactory:
    """The factory of the dialect package `allama.adapters.<dialect>`, imported on first use."""
    module = importlib.import_module(f"allama.adapters.{dialect}._adapter")
    factory: AdapterFactory = module.make_adapter
    return factory
