"""Ollama's native dialect as an `Adapter`: a profile and an Ollama capability table joined to
the encoder, the decoders and the error mapping of this package (loaded on first use)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from allama.adapters._adapter import PackageAdapter, table_for
from allama.adapters.ollama._capabilities import CAPABILITY_TABLES, OllamaTable
from allama.adapters.ollama._profile import OllamaProfile

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

    def _reading(self) -> Mapping[str, Any]:
        return {"cloud": self.profile.cloud}


def make_adapter(preset_name: str, profile: object, capabilities: object) -> OllamaChatAdapter:
    if not isinstance(profile, OllamaProfile):
        raise TypeError(f"an Ollama preset needs an OllamaProfile, got {profile!r}")
    table = table_for(CAPABILITY_TABLES, OllamaTable, preset_name, "ollama", capabilities, "Ollama")
    if profile.cloud:
        # Ollama's cloud API: whatever the model's name, `format` is not applied.
        table = cast(OllamaTable, table).in_cloud()
    return OllamaChatAdapter(profile, table)
