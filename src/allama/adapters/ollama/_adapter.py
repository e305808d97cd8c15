"""Ollama's native dialect as an `Adapter`: a profile and an Ollama capability table joined to
the encoder, the decoders and the error mapping of this package (loaded on first use)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from allama.adapters._adapter import PackageAdapter, StreamDecoder, table_for
from allama.adapters.ollama._capabilities import CAPABILITY_TABLES, OllamaTable
from allama.adapters.ollama._profile import OllamaProfile

if TYPE_CHECKING:
    from allama.adapters._http import HttpResponse
    from allama.errors import Error
    from allama.types import ChatResponse, Warning

__all__ = ["OllamaChatAdapter", "make_adapter"]


class OllamaChatAdapter(PackageAdapter):
    """`POST {base}/api/chat` (NDJSON when streamed), spoken as `profile` says, answered from
    `table`. An error response is read knowing whether the server is Ollama's cloud, where a
    missing model is not one to pull."""

    __slots__ = ()

    package = "allama.adapters.ollama"
    stream_decoder_class = "_stream:OllamaStreamDecoder"
    stream_accept = "application/x-ndjson"

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        return "/api/chat", {}

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
            cloud=self.profile.cloud,
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
            status, headers, body, provider=provider, model=model, cloud=self.profile.cloud
        )
        return error

    def stream_decoder(self, *, provider: str, model: str) -> StreamDecoder:
        module, _, name = self.stream_decoder_class.partition(":")
        decoder: StreamDecoder = self._part(module, name)(
            provider=provider, model=model, cloud=self.profile.cloud
        )
        return decoder


def make_adapter(preset_name: str, profile: object, capabilities: object) -> OllamaChatAdapter:
    if not isinstance(profile, OllamaProfile):
        raise TypeError(f"an Ollama preset needs an OllamaProfile, got {profile!r}")
    table = table_for(CAPABILITY_TABLES, OllamaTable, preset_name, "ollama", capabilities, "Ollama")
    if profile.cloud:
        # Ollama's cloud API: whatever the model's name, `format` is not applied.
        table = cast(OllamaTable, table).in_cloud()
    return OllamaChatAdapter(profile, table)
