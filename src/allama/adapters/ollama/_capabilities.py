"""What each model served by Ollama can do, as data: a new model family is a one-line change.

Ollama serves models the caller pulled, so most answers depend on the model and are
`UNKNOWN` unless a row knows the family: tool calls and images need the model's template
and projector (Ollama answers 400 "... does not support tools" otherwise), thinking needs a
thinking model (400 "... does not support thinking"). What holds for every model is the
server's: `format` is compiled to a grammar for any model it runs itself, and there is no
`tool_choice`, so a tool call can never be forced, nor a plain-text choice output (`format`
constrains JSON only). Log-probabilities (`logprobs`, `top_logprobs`) came with Ollama
v0.12.11 (2025-11); an older server ignores the fields and reports none, and nothing says
which version answers, so they are `UNKNOWN`.

Rows are matched in order by a glob on the model name without its namespace (the part after
the last `/`, lower-cased, tag included: `gpt-oss:20b`); the first match wins. The facts are
in the provider reference (§3).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from allama.adapters._families import FamilyTable
from allama.types import CapabilitySupport, ChatCapability

__all__ = ["CAPABILITY_TABLES", "OllamaFamily", "OllamaTable", "Thinking"]

S = CapabilitySupport.SUPPORTED
N = CapabilitySupport.UNSUPPORTED
U = CapabilitySupport.UNKNOWN


class Thinking(StrEnum):
    """How a family takes `think`.

    `SWITCH`: `true` or `false`, the form every Ollama version takes (a model that does not
    think answers 400 to `true`). `LEVELS`: a level by name (`"low"`, ...) alone: gpt-oss
    ignores `false` and reasons whatever it is told, so `none` goes as its lowest level.
    """

    SWITCH = "switch"
    LEVELS = "levels"


@dataclass(frozen=True, slots=True)
class OllamaFamily:
    pattern: str
    structured: CapabilitySupport = S
    """`format` is applied: the server compiles it to a grammar over the output. Ollama's
    cloud models do not apply it (Ollama's documentation: "Ollama's Cloud currently does not
    support structured outputs")."""
    thinking: Thinking = Thinking.SWITCH
    levels: tuple[str, ...] = ()
    """The `think` levels the family takes (`LEVELS`), lowest first."""
    reasoning: CapabilitySupport = U
    tools: CapabilitySupport = U
    images: CapabilitySupport = U
    logprobs: CapabilitySupport = U
    """`logprobs: true` is answered with the tokens' log-probabilities (Ollama v0.12.11 on,
    ollama/ollama-python#601, ollama-rs#295); an older server ignores it."""

    def support(self, capability: ChatCapability) -> CapabilitySupport:
        if capability is ChatCapability.STRUCTURED_OUTPUT:
            return self.structured
        if capability is ChatCapability.FORCED_TOOL_CHOICE:
            # No `tool_choice` at all: automatic extraction never picks a forced tool.
            return N
        if capability in (ChatCapability.TOOL_CALLS, ChatCapability.PARALLEL_TOOL_CALLS):
            # A model that calls tools may call several in one turn; nothing turns it off.
            return self.tools
        if capability is ChatCapability.REASONING:
            return self.reasoning
        if capability is ChatCapability.IMAGE_INPUT:
            return self.images
        if capability is ChatCapability.RESPONSE_SCHEMA_ANY_ROOT:
            # The grammar takes any schema at the root.
            return S
        if capability is ChatCapability.TOOL_SCHEMA_ANY_ROOT:
            return N
        if capability is ChatCapability.LOGPROBS:
            return self.logprobs
        if capability is ChatCapability.CHOICE_OUTPUT:
            # `format` takes `"json"` or a JSON Schema: an enum comes back as a JSON string.
            return N
        return S


class OllamaTable(FamilyTable[OllamaFamily]):
    """Ollama model families, matched on the model's name without its namespace
    (`library/qwen3` and `qwen3` alike)."""

    __slots__ = ()

    def _key(self, model: str) -> str:
        return model.lower().rsplit("/", 1)[-1]

    def in_cloud(self) -> OllamaTable:
        """This table as Ollama's cloud API answers it: no model applies `format` there,
        whatever its name (the cloud names its models without the `-cloud` a local server
        needs), so every family is a cloud model's."""
        return OllamaTable(
            tuple(replace(row, structured=N) for row in self.families),
            replace(self.default, structured=N),
            self.strip_prefix,
        )


_GPT_OSS_LEVELS = ("low", "medium", "high")

_OLLAMA_ROWS = (
    # Cloud models (`gpt-oss:120b-cloud`, `kimi-k2:1t-cloud`, `minimax-m2:cloud`), run by
    # ollama.com behind the local server: no structured outputs. On ollama.com itself the
    # names have no `-cloud`: the preset marks that endpoint (`OllamaProfile.cloud`), and
    # every model is a cloud model there (`OllamaTable.in_cloud`).
    OllamaFamily(
        "gpt-oss*[-:]cloud",
        structured=N,
        thinking=Thinking.LEVELS,
        levels=_GPT_OSS_LEVELS,
        reasoning=S,
        tools=S,
    ),
    OllamaFamily("*[-:]cloud", structured=N),
    # gpt-oss thinks at a level ("medium" unless told), and calls tools.
    OllamaFamily(
        "gpt-oss*", thinking=Thinking.LEVELS, levels=_GPT_OSS_LEVELS, reasoning=S, tools=S
    ),
)

_OLLAMA_DEFAULT = OllamaFamily("*")
"""Any other model: `format` applies, the rest depends on the model."""

CAPABILITY_TABLES: dict[str, OllamaTable] = {
    "ollama": OllamaTable(_OLLAMA_ROWS, _OLLAMA_DEFAULT),
}
