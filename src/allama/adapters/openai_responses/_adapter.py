"""The Responses API as an `Adapter`: a Chat Completions profile and capability table joined
to the encoder, the decoders and the error mapping of this package.

The profile and the table are the preset's own, those of its Chat Completions dialect, and
they hold here as they are: an endpoint serves the same models under both APIs (so a
model family's structured outputs, tools, reasoning and images are the same), enforces the
same strict schema subset for `text.format` as for `response_format` and for flat
function tools as for nested ones, and is the same endpoint to name in warnings. What the
profile says of Chat Completions' own fields (the token field, the seed field, stream
usage options, the JSON Schema shape) is not read: the Responses API has one form of each.

Building one loads no pydantic model: the encoder and decoders are imported by the first
call that needs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from allama.adapters._http import HttpRequest, HttpResponse
from allama.adapters.openai_compat._capabilities import CAPABILITY_TABLES, CapabilityTable
from allama.adapters.openai_compat._profile import WireProfile
from allama.types import CapabilitySupport, ChatCapability

if TYPE_CHECKING:
    from allama._degradations import Degradations
    from allama.adapters.openai_responses._sse import ResponsesStreamDecoder
    from allama.errors import Error
    from allama.types import ChatRequest, ChatResponse, Warning

__all__ = ["ResponsesAdapter", "make_adapter"]


class ResponsesAdapter:
    """`POST {base}/responses`, spoken as `profile` says, answered from `table`."""

    __slots__ = ("profile", "table")

    stream_accept = "text/event-stream"

    def __init__(self, profile: WireProfile, table: CapabilityTable) -> None:
        self.profile = profile
        self.table = table

    @property
    def display_name(self) -> str:
        return self.profile.display_name

    def capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        if capability is ChatCapability.RESPONSE_SCHEMA_ANY_ROOT:
            return self.profile.response_schema_any_root
        if capability is ChatCapability.TOOL_SCHEMA_ANY_ROOT:
            # Function parameters are a JSON object here as in Chat Completions.
            return CapabilitySupport.UNSUPPORTED
        return self.table.support(model, capability)

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        return "/responses", {}

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
        from allama.adapters.openai_responses._encode import encode_request

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
        from allama.adapters.openai_responses._decode import decode_response

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
        from allama.adapters.openai_responses._errors import error_from_response

        return error_from_response(status, headers, body, provider=provider, model=model)

    def stream_decoder(self, *, provider: str, model: str) -> ResponsesStreamDecoder:
        from allama.adapters.openai_responses._sse import ResponsesStreamDecoder

        return ResponsesStreamDecoder(provider=provider, model=model)


def make_adapter(preset_name: str, profile: object, capabilities: object) -> ResponsesAdapter:
    if not isinstance(profile, WireProfile):
        raise TypeError(f"a Responses API preset needs a WireProfile, got {profile!r}")
    if capabilities is None:
        table = CAPABILITY_TABLES.get(preset_name) or CAPABILITY_TABLES["openai-compatible"]
    elif isinstance(capabilities, CapabilityTable):
        table = capabilities
    else:
        raise TypeError(
            "capabilities must be a CapabilityTable of the Chat Completions dialect, "
            f"got {type(capabilities).__name__}"
        )
    return ResponsesAdapter(profile, table)
