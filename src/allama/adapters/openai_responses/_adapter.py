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

from collections.abc import Mapping

from allama.adapters._adapter import PackageAdapter, table_for
from allama.adapters.openai_compat._capabilities import CAPABILITY_TABLES, CapabilityTable
from allama.adapters.openai_compat._profile import WireProfile
from allama.types import CapabilitySupport, ChatCapability

__all__ = ["ResponsesAdapter", "make_adapter"]


class ResponsesAdapter(PackageAdapter):
    """`POST {base}/responses`, spoken as `profile` says, answered from `table`."""

    __slots__ = ()

    package = "allama.adapters.openai_responses"
    stream_decoder_class = "_sse:ResponsesStreamDecoder"

    def capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        if capability is ChatCapability.RESPONSE_SCHEMA_ANY_ROOT:
            support: CapabilitySupport = self.profile.response_schema_any_root
            return support
        if capability is ChatCapability.TOOL_SCHEMA_ANY_ROOT:
            # Function parameters are a JSON object here as in Chat Completions.
            return CapabilitySupport.UNSUPPORTED
        if capability is ChatCapability.CHOICE_OUTPUT:
            # `text.format` is text, a JSON object or a JSON Schema: no grammar, no enum.
            return CapabilitySupport.UNSUPPORTED
        # Log-probabilities are the model family's, as in Chat Completions.
        return self.table.support(model, capability)

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        return "/responses", {}


def make_adapter(preset_name: str, profile: object, capabilities: object) -> ResponsesAdapter:
    if not isinstance(profile, WireProfile):
        raise TypeError(f"a Responses API preset needs a WireProfile, got {profile!r}")
    table = table_for(
        CAPABILITY_TABLES,
        CapabilityTable,
        preset_name,
        "openai-compatible",
        capabilities,
        "Chat Completions",
    )
    return ResponsesAdapter(profile, table)
