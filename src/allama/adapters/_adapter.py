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
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from allama.adapters._http import HttpRequest, HttpResponse

if TYPE_CHECKING:
    from allama._degradations import Degradations
    from allama.adapters._families import FamilyTable
    from allama.errors import Error
    from allama.types import (
        CapabilitySupport,
        ChatCapability,
        ChatRequest,
        ChatResponse,
        StreamEvent,
        Warning,
    )

__all__ = [
    "Adapter",
    "AdapterFactory",
    "PackageAdapter",
    "StreamDecoder",
    "load_adapter",
    "table_for",
]


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


_PARTS: dict[tuple[str, str, str], Any] = {}

_NOTHING_MORE: Mapping[str, Any] = MappingProxyType({})
"""`PackageAdapter._reading`'s default: no keyword beside the provider and the model."""
"""The functions and classes of dialect packages, once imported: looked up on every call."""


class PackageAdapter:
    """An adapter whose parts are the modules of its dialect package, imported on first use:
    `_encode.encode_request`, `_decode.decode_response`, `_errors.error_from_response`, and
    the stream decoder class `stream_decoder_class` names (`module:Class`).

    A dialect subclasses it with its package, path and stream framing; building one loads
    no pydantic model.
    """

    __slots__ = ("profile", "table")

    package: ClassVar[str]
    stream_decoder_class: ClassVar[str]
    stream_accept: ClassVar[str] = "text/event-stream"

    def __init__(self, profile: Any, table: FamilyTable[Any]) -> None:
        self.profile = profile
        self.table = table

    @property
    def display_name(self) -> str:
        name: str = self.profile.display_name
        return name

    def capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return self.table.support(model, capability)

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        raise NotImplementedError

    def _reading(self) -> Mapping[str, Any]:
        """Keyword arguments the package's readers of answers (its body, error and stream
        decoders) take beside the provider and the model: what its profile says of the
        server that answers (Ollama's: whether it is the cloud). None by default."""
        return _NOTHING_MORE

    def _part(self, module: str, name: str) -> Any:
        key = (self.package, module, name)
        found = _PARTS.get(key)
        if found is None:
            found = _PARTS[key] = getattr(importlib.import_module(f"{self.package}.{module}"), name)
        return found

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
        encoded: HttpRequest = self._part("_encode", "encode_request")(
            request,
            self.profile,
            self.table.family(request.model),
            url=url,
            headers=headers,
            params=params,
            stream=stream,
            degradations=degradations,
        )
        return encoded

    def decode(
        self,
        response: HttpResponse,
        *,
        provider: str,
        model: str,
        warnings: Sequence[Warning],
    ) -> ChatResponse:
        decoded: ChatResponse = self._part("_decode", "decode_response")(
            response.status,
            response.headers,
            response.content,
            provider=provider,
            model=model,
            warnings=warnings,
            **self._reading(),
        )
        return decoded

    def error(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        provider: str,
        model: str,
    ) -> Error:
        error: Error = self._part("_errors", "error_from_response")(
            status, headers, body, provider=provider, model=model, **self._reading()
        )
        return error

    def stream_decoder(self, *, provider: str, model: str) -> StreamDecoder:
        module, _, name = self.stream_decoder_class.partition(":")
        decoder: StreamDecoder = self._part(module, name)(
            provider=provider, model=model, **self._reading()
        )
        return decoder


def table_for(
    tables: Mapping[str, FamilyTable[Any]],
    table_type: type[FamilyTable[Any]],
    preset_name: str,
    fallback: str,
    capabilities: object,
    dialect: str,
) -> FamilyTable[Any]:
    """The capability table a preset gets: the caller's (of this dialect's kind), else the
    preset's own, else the dialect's fallback."""
    if capabilities is None:
        return tables.get(preset_name) or tables[fallback]
    if not isinstance(capabilities, table_type):
        raise TypeError(
            f"capabilities must be a {table_type.__name__} of the {dialect} dialect, "
            f"got {type(capabilities).__name__}"
        )
    return capabilities
