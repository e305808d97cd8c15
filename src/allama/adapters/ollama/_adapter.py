"""Ollama's native dialect as an `Adapter`: a profile and an Ollama capability table joined to
the encoder, the decoders and the error mapping of this package.

Building one loads no pydantic model: the encoder and decoders are imported by the first
call that needs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from allama.adapters._http import HttpRequest, HttpResponse
from allama.adapters.ollama._capabilities import CAPABILITY_TABLES, OllamaTable
from allama.adapters.ollama._profile import OllamaProfile
from allama.types import CapabilitySupport, ChatCapability

if TYPE_CHECKING:
    from allama._degradations import Degradations
    from allama.adapters.ollama._stream import OllamaStreamDecoder
    from allama.errors import Error
    from allama.types import ChatRequest, ChatResponse, Warning

__all__ = ["OllamaChatAdapter", "make_adapter"]


class OllamaChatAdapter:
    """`POST {base}/api/chat` (NDJSON when streamed), spoken as `profile` says, answered from
    `table`."""

    __slots__ = ("profile", "table")

    stream_accept = "application/x-ndjson"

    def __init__(self, profile: OllamaProfile, table: OllamaTable) -> None:
        self.profile = profile
        self.table = table

    @property
    def display_name(self) -> str:
        return self.profile.display_name

    def capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return self.table.support(model, capability)

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        return "/api/chat", {}

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
        from allama.adapters.ollama._encode import encode_request

        return encode_request(
            request,
            self.profile,
            self.table.family(request.model),
            url=url,
            headers=headers,
            params=params,
            stream=stream,
            degradations=degradations,
        )

    def decode(
        self,
        response: HttpResponse,
        *,
        provider: str,
        model: str,
        warnings: Sequence[Warning],
    ) -> ChatResponse:
        from allama.adapters.ollama._decode import decode_response

        return decode_response(
            response.status,
            response.headers,
            response.content,
            provider=provider,
            model=model,
            warnings=warnings,
        )

    def error(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        provider: str,
        model: str,
    ) -> Error:
        from allama.adapters.ollama._errors import error_from_response

        return error_from_response(status, headers, body, provider=provider, model=model)

    def stream_decoder(self, *, provider: str, model: str) -> OllamaStreamDecoder:
        from allama.adapters.ollama._stream import OllamaStreamDecoder

        return OllamaStreamDecoder(provider=provider, model=model)


def make_adapter(preset_name: str, profile: object, capabilities: object) -> OllamaChatAdapter:
    if not isinstance(profile, OllamaProfile):
        raise TypeError(f"an Ollama preset needs an OllamaProfile, got {profile!r}")
    if capabilities is None:
        table = CAPABILITY_TABLES.get(preset_name) or CAPABILITY_TABLES["ollama"]
    elif isinstance(capabilities, OllamaTable):
        table = capabilities
    else:
        raise TypeError(
            "capabilities must be an OllamaTable of the Ollama dialect, "
            f"got {type(capabilities).__name__}"
        )
    return OllamaChatAdapter(profile, table)
