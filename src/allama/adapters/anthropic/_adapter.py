"""The Messages dialect as an `Adapter`: a profile and a Claude capability table joined to
the encoder, the decoders and the error mapping of this package (loaded on first use)."""

from __future__ import annotations

from collections.abc import Mapping

from allama.adapters._adapter import PackageAdapter, table_for
from allama.adapters.anthropic._capabilities import CAPABILITY_TABLES, ClaudeTable
from allama.adapters.anthropic._profile import AnthropicProfile

__all__ = ["MessagesAdapter", "make_adapter"]


class MessagesAdapter(PackageAdapter):
    """`POST {base}/v1/messages`, spoken as `profile` says, answered from `table`."""

    __slots__ = ()

    package = "allama.adapters.anthropic"
    stream_decoder_class = "_sse:MessagesStreamDecoder"

    def path(self, model: str, *, stream: bool) -> tuple[str, Mapping[str, str]]:
        return "/messages", {}


def make_adapter(preset_name: str, profile: object, capabilities: object) -> MessagesAdapter:
    if not isinstance(profile, AnthropicProfile):
        raise TypeError(f"a Messages preset needs an AnthropicProfile, got {profile!r}")
    table = table_for(
        CAPABILITY_TABLES,
        ClaudeTable,
        preset_name,
        "anthropic-compatible",
        capabilities,
        "Messages",
    )
    return MessagesAdapter(profile, table)
