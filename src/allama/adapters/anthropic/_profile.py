"""How one endpoint speaks the Messages dialect, apart from where it lives (the preset)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AnthropicProfile"]


@dataclass(frozen=True, slots=True)
class AnthropicProfile:
    """`verified`: the endpoint runs Anthropic's own grammar engine (Anthropic, a gateway in
    front of it), so `output_config.format` and `strict` tools are enforced as Anthropic
    documents; an unverified host may accept them and enforce less, so its schemas are at
    best approximate."""

    name: str
    display_name: str
    verified: bool = True
