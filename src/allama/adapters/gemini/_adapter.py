"""The Gemini dialect as an `Adapter`: a profile and a Gemini capability table joined to
the encoder, the decoders and the error mapping of this package (loaded on first use)."""

from __future__ import annotations

from collections.abc import Mapping

from allama.adapters._adapter import PackageAdapter, table_for
from allama.adapters.gemini._capabilities import CAPABILITY_TABLES, GeminiTable
from allama.adapters.gemini._profile import GeminiProfile

__all__ = ["GenerateContentAdapter", "make_adapter"]

_SSE = {"alt": "sse"}


class GenerateContentAdapter(PackageAdapter):
    """`POST {base}/models/{model}:generateContent` (`:streamGenerateContent?alt=sse` for a
    stream), spoken as `profile` says, answered from `table`."""

    __slots__ = ()

    package = "allama.adapters.gemini"
    stream_decoder_class = "_stream:GenerateStreamDecoder"

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        # `gemini-2.5-flash`, `models/gemini-2.5-flash` and `tunedModels/...` all name one.
        name = model if "/" in model else f"models/{model}"
        if stream:
            return f"/{name}:streamGenerateContent", _SSE
        return f"/{name}:generateContent", {}


def make_adapter(preset_name: str, profile: object, capabilities: object) -> GenerateContentAdapter:
    if not isinstance(profile, GeminiProfile):
        raise TypeError(f"a Gemini preset needs a GeminiProfile, got {profile!r}")
    table = table_for(CAPABILITY_TABLES, GeminiTable, preset_name, "gemini", capabilities, "Gemini")
    return GenerateContentAdapter(profile, table)
