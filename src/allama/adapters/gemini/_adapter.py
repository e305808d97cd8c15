"""The Gemini dialect as an `Adapter`: a profile and a Gemini capability table joined to
the encoder, the decoders and the error mapping of this package.

Building one loads no pydantic model: the encoder and decoders are imported by the first
call that needs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from allama.adapters._http import HttpRequest, HttpResponse
from allama.adapters.gemini._capabilities import CAPABILITY_TABLES, GeminiTable
from allama.adapters.gemini._profile import GeminiProfile
from allama.types import CapabilitySupport, ChatCapability

if TYPE_CHECKING:
    from allama._degradations import Degradations
    from allama.adapters.gemini._stream import GenerateStreamDecoder
    from allama.errors import Error
    from allama.types import ChatRequest, ChatResponse, Warning

__all__ = ["GenerateContentAdapter", "make_adapter"]

_SSE = {"alt": "sse"}


class GenerateContentAdapter:
    """`POST {base}/models/{model}:generateContent` (`:streamGenerateContent?alt=sse` for a
    stream), spoken as `profile` says, answered from `table`."""

    __slots__ = ("profile", "table")

    stream_accept = "text/event-stream"

    def __init__(self, profile: GeminiProfile, table: GeminiTable) -> None:
        self.profile = profile
        self.table = table

    @property
    def display_name(self) -> str:
        return self.profile.display_name

    def capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return self.table.support(model, capability)

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        # `gemini-2.5-flash`, `models/gemini-2.5-flash` and `tunedModels/...` all name one.
        name = model if "/" in model else f"models/{model}"
        if stream:
            return f"/{name}:streamGenerateContent", _SSE
        return f"/{name}:generateContent", {}

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
        from allama.adapters.gemini._encode import encode_request

        return encode_request(
            request,
            self.profile,
            self.table.family(request.model),
            url=url,
            headers=headers,
            params=params,
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
        from allama.adapters.gemini._decode import decode_response

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
        from allama.adapters.gemini._errors import error_from_response

        return error_from_response(status, headers, body, provider=provider, model=model)

    def stream_decoder(self, *, provider: str, model: str) -> GenerateStreamDecoder:
        from allama.adapters.gemini._stream import GenerateStreamDecoder

        return GenerateStreamDecoder(provider=provider, model=model)


def make_adapter(preset_name: str, profile: object, capabilities: object) -> GenerateContentAdapter:
    if not isinstance(profile, GeminiProfile):
        raise TypeError(f"a Gemini preset needs an GeminiProfile, got {profile!r}")
    if capabilities is None:
        table = CAPABILITY_TABLES.get(preset_name) or CAPABILITY_TABLES["gemini"]
    elif isinstance(capabilities, GeminiTable):
        table = capabilities
    else:
        raise TypeError(
            "capabilities must be a GeminiTable of the Gemini dialect, "
            f"got {type(capabilities).__name__}"
        )
    return GenerateContentAdapter(profile, table)
