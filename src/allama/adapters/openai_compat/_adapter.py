"""The Chat Completions dialect as an `Adapter`: a profile and a capability table joined to
the encoder, the decoders and the error mapping of this package.

Building one loads no pydantic model: the encoder and decoders are read from the package's
lazy names when the first call needs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from allama.adapters import openai_compat as wire
from allama.adapters._adapter import table_for
from allama.adapters._families import FamilyTable
from allama.adapters._http import HttpRequest, HttpResponse
from allama.adapters.openai_compat._capabilities import (
    CAPABILITY_TABLES,
    CapabilityTable,
    ModelFamily,
)
from allama.adapters.openai_compat._profile import WireProfile
from allama.types import CapabilitySupport, ChatCapability

if TYPE_CHECKING:
    from allama._degradations import Degradations
    from allama.adapters.openai_compat._sse import ChatStreamDecoder
    from allama.errors import Error
    from allama.types import ChatRequest, ChatResponse, Warning

__all__ = ["ChatCompletionsAdapter", "make_adapter"]


class ChatCompletionsAdapter:
    """`POST {base}/chat/completions`, spoken as `profile` says, answered from `table`."""

    __slots__ = ("profile", "table")

    stream_accept = "text/event-stream"

    def __init__(self, profile: WireProfile, table: FamilyTable[ModelFamily]) -> None:
        self.profile = profile
        self.table = table

    @property
    def display_name(self) -> str:
        return self.profile.display_name

    def capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        if capability is ChatCapability.RESPONSE_SCHEMA_ANY_ROOT:
            return self.profile.response_schema_any_root
        if capability is ChatCapability.TOOL_SCHEMA_ANY_ROOT:
            # Function parameters are a JSON object on every Chat Completions endpoint.
            return CapabilitySupport.UNSUPPORTED
        if capability is ChatCapability.CHOICE_OUTPUT:
            return (
                CapabilitySupport.SUPPORTED
                if self.profile.choice_grammar
                else CapabilitySupport.UNSUPPORTED
            )
        return self.table.support(model, capability)

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        return "/chat/completions", {}

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
        return wire.encode_request(
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
        return wire.decode_response(
            response.status,
            response.headers,
            response.content,
            provider=provider,
            model=model,
            reasoning_outside_completion=self.profile.reasoning_outside_completion,
            warnings=warnings,
            think_tags=self.profile.think_tags,
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
        return wire.error_from_response(status, headers, body, provider=provider, model=model)

    def stream_decoder(self, *, provider: str, model: str) -> ChatStreamDecoder:
        return wire.ChatStreamDecoder(
            provider=provider,
            model=model,
            reasoning_outside_completion=self.profile.reasoning_outside_completion,
            think_tags=self.profile.think_tags,
        )


def make_adapter(preset_name: str, profile: object, capabilities: object) -> ChatCompletionsAdapter:
    if not isinstance(profile, WireProfile):
        raise TypeError(f"a Chat Completions preset needs a WireProfile, got {profile!r}")
    table = table_for(
        CAPABILITY_TABLES,
        CapabilityTable,
        preset_name,
        "openai-compatible",
        capabilities,
        "Chat Completions",
    )
    return ChatCompletionsAdapter(profile, table)
