"""What each Claude model family can do, as data: a new model is a one-line change.

Rows are matched in order by a glob on the model id (case insensitive); the first match
wins, so a specific family comes before the broader one it would also match. The facts
behind each column are in the provider reference (structured outputs, thinking modes,
prefill, sampling parameters, output limits per family).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from allama.adapters._families import FamilyTable
from allama.types import CapabilitySupport, ChatCapability

__all__ = ["CAPABILITY_TABLES", "ClaudeFamily", "ClaudeTable", "Thinking"]

S = CapabilitySupport.SUPPORTED
N = CapabilitySupport.UNSUPPORTED
U = CapabilitySupport.UNKNOWN


class Thinking(StrEnum):
    """How a family thinks.

    `NONE`: no extended thinking. `BUDGET`: `{type: "enabled", budget_tokens}`.
    `ADAPTIVE`: `{type: "adaptive"}` with `output_config.effort` (`enabled` is refused or
    deprecated there).
    """

    NONE = "none"
    BUDGET = "budget"
    ADAPTIVE = "adaptive"


@dataclass(frozen=True, slots=True)
class ClaudeFamily:
    pattern: str
    structured: CapabilitySupport
    """`output_config.format` and `strict` tools (one grammar engine serves both)."""
    max_output: int
    """The family's output limit, which caps the `max_tokens` allama sends by default."""
    longer_output: tuple[str, int] | None = None
    """An `anthropic-beta` that raises the family's output limit, and the limit under it:
    Claude 3.7 Sonnet's `output-128k-2025-02-19`, which "can still be included in Claude 4
    requests, but it will have no effect" (Anthropic, "Migrating to Claude 4"). Batch-only
    betas (`output-300k-2026-03-24`, Message Batches alone) raise no limit here: the same
    request may go to the synchronous API."""
    thinking: Thinking = Thinking.BUDGET
    efforts: tuple[str, ...] = ()
    """`output_config.effort` levels the family takes (adaptive thinking)."""
    thinks_by_default: bool = False
    """Adaptive thinking runs when `thinking` is left out."""
    can_disable: bool = False
    """Thinking can be turned off (`off`): needed to force a tool where thinking is on by
    default, and for `reasoning_effort="none"`."""
    off: str = "disabled"
    """The `thinking` type that turns thinking off: `disabled`, or Sonnet 5.5's
    `between_tools` (`disabled` answers 400 there), which turns off the thinking before
    answering; with tools the model still writes short notes, as thinking, between calls."""
    disable_efforts: tuple[str, ...] | None = None
    """The `output_config.effort` levels thinking goes off at (`off`), where not every
    level does (`None`: any); the family's default effort is among them."""
    forced_tool: CapabilitySupport = S
    sampling: bool = True
    """`temperature` and `top_p` are accepted (newer families answer 400)."""
    one_sampling: bool = False
    """Only one of `temperature` and `top_p` at a time (Opus 4.1, the 4.5 and 4.6 families
    answer 400: "`temperature` and `top_p` cannot both be specified for this model")."""
    prefill: bool = True
    """A last assistant message is continued (newer families answer 400)."""
    host_models: bool = False
    """A host's own models, served in the dialect (`anthropic-compatible`: DeepSeek, Moonshot,
    Z.ai, MiniMax): images, thinking, parallel tool calls and streaming are the host's to
    give, and nobody says it gives them (DeepSeek and MiniMax take no images), so they answer
    unknown. `output_config.format` is not known to be applied (DeepSeek's "output_config:
    Only effort is supported": the format is dropped and the answer is prose), so its
    structured output is unknown, while `tools` with a forced `tool_choice` are the
    dialect's part these hosts document ("input_schema: Fully Supported", "tool: Supported"):
    auto extraction forces the tool, which at least shows the model the schema."""

    def support(self, capability: ChatCapability) -> CapabilitySupport:
        if capability is ChatCapability.STRUCTURED_OUTPUT:
            return self.structured
        if capability is ChatCapability.FORCED_TOOL_CHOICE:
            return self.forced_tool
        if capability is ChatCapability.TOOL_CALLS:
            # Every Claude 3+ family, and the part of the dialect its other hosts document.
            return S
        if self.host_models and capability in _HOST_GIVEN:
            return U
        if capability is ChatCapability.REASONING:
            return N if self.thinking is Thinking.NONE else S
        if capability in (
            ChatCapability.RESPONSE_SCHEMA_ANY_ROOT,
            ChatCapability.TOOL_SCHEMA_ANY_ROOT,
        ):
            # Both `output_config.format` and `input_schema` take an object root only.
            return N
        if capability in (ChatCapability.LOGPROBS, ChatCapability.CHOICE_OUTPUT):
            # The Messages API has no log-probabilities, on any model or host, and no
            # plain-text output constrained to a list of strings (only JSON Schema).
            return N
        # Parallel tool calls, streaming and images: every Claude 3+ family.
        return S


_HOST_GIVEN = frozenset(
    {
        ChatCapability.IMAGE_INPUT,
        ChatCapability.REASONING,
        ChatCapability.PARALLEL_TOOL_CALLS,
        ChatCapability.STREAMING,
    }
)
"""What a host's own models may or may not do (`ClaudeFamily.host_models`)."""


class ClaudeTable(FamilyTable[ClaudeFamily]):
    """Claude model families, per preset."""

    __slots__ = ()


_ALL_EFFORTS = ("low", "medium", "high", "xhigh", "max")


def _thinking_always(
    pattern: str,
    *,
    forced_tool: CapabilitySupport = S,
    can_disable: bool = False,
    off: str = "disabled",
    disable_efforts: tuple[str, ...] | None = None,
) -> ClaudeFamily:
    """A family of the 5 generation: adaptive thinking on by default, no sampling, no prefill."""
    return ClaudeFamily(
        pattern,
        S,
        128_000,
        thinking=Thinking.ADAPTIVE,
        efforts=_ALL_EFFORTS,
        thinks_by_default=True,
        can_disable=can_disable,
        off=off,
        disable_efforts=disable_efforts,
        forced_tool=forced_tool,
        sampling=False,
        prefill=False,
    )


# `{type: "disabled"}` at these efforts only: on Haiku 5.5 it works at `low`, `medium` and
# `high`, and at `xhigh` and `max` the request returns 400 (Anthropic, "Prompting Claude
# Haiku 5.5", Use effort to control thinking); on Opus 5 it "is accepted at effort high or
# below" (Anthropic, "What's new in Claude Opus 5.5", Thinking can't be disabled). Sonnet
# 5.5's `between_tools` too: "available at low, medium, and high effort"; at `xhigh` or
# `max` it returns 400 ("What's new in Claude Sonnet 5.5", Turn off up-front thinking).
_DISABLES_UP_TO_HIGH = ("low", "medium", "high")

_CLAUDE_ROWS = (
    # Opus 5.5 and Fable/Mythos: adaptive thinking always on, and no forced tool choice at
    # all ("tool_choice: type "tool" and "any" are not supported for this model").
    _thinking_always("claude-opus-5-5*", forced_tool=N),
    # Sonnet 5.5: no forced tool choice either ("Forced tool use returns an error"), and
    # `disabled` answers 400; its thinking is turned off, up to effort `high`, by
    # `{type: "between_tools"}`, "the lowest thinking setting on this model": no thinking
    # before answering, short progress notes as thinking between tool calls, text alone
    # where no tools are used, "the same as disabled on Claude Sonnet 5" (Anthropic,
    # "What's new in Claude Sonnet 5.5", Turn off up-front thinking; "Troubleshooting
    # thinking": only Sonnet 5.5 accepts "between_tools", in place of "disabled").
    _thinking_always(
        "claude-sonnet-5-5*",
        forced_tool=N,
        can_disable=True,
        off="between_tools",
        disable_efforts=_DISABLES_UP_TO_HIGH,
    ),
    _thinking_always("claude-fable-*", forced_tool=N),
    _thinking_always("claude-mythos-*", forced_tool=N),
    # Haiku 5.5: adaptive thinking by default, which can be turned off up to effort `high`
    # (the references above; its thinking is "Adaptive", not "Adaptive (always on)", in the
    # Haiku 5.5 overview); neither its "What's new" nor its migration guide lists a refused
    # forced `tool_choice`, which is forced as Opus 5's is, with thinking off.
    _thinking_always("claude-haiku-5-5*", can_disable=True, disable_efforts=_DISABLES_UP_TO_HIGH),
    # Opus 5 and Sonnet 5: adaptive thinking by default, which can be turned off.
    _thinking_always("claude-opus-5*", can_disable=True, disable_efforts=_DISABLES_UP_TO_HIGH),
    _thinking_always("claude-sonnet-5*", can_disable=True),
    # Opus 4.7 and 4.8: adaptive only (`enabled` answers 400), off unless asked, no sampling.
    ClaudeFamily(
        "claude-opus-4-[78]*",
        S,
        128_000,
        thinking=Thinking.ADAPTIVE,
        efforts=_ALL_EFFORTS,
        can_disable=True,
        sampling=False,
        prefill=False,
    ),
    # Opus 4.6 and Sonnet 4.6: adaptive (`enabled` deprecated), no prefill.
    ClaudeFamily(
        "claude-opus-4-6*",
        S,
        128_000,
        thinking=Thinking.ADAPTIVE,
        efforts=("low", "medium", "high", "max"),
        prefill=False,
        one_sampling=True,
    ),
    ClaudeFamily(
        # 64K of output, where Opus 4.6 takes 128K (Anthropic's models overview).
        "claude-sonnet-4-6*",
        S,
        64_000,
        thinking=Thinking.ADAPTIVE,
        efforts=("low", "medium", "high", "max"),
        prefill=False,
        one_sampling=True,
    ),
    # The 4.5 generation: structured outputs, thinking with a budget.
    ClaudeFamily("claude-opus-4-5*", S, 64_000, one_sampling=True),
    ClaudeFamily("claude-sonnet-4-5*", S, 64_000, one_sampling=True),
    ClaudeFamily("claude-haiku-4-5*", S, 64_000, one_sampling=True),
    # Claude 4.0 and 4.1, and 3.7 Sonnet: thinking with a budget, no structured outputs.
    ClaudeFamily("claude-opus-4-1*", N, 32_000, one_sampling=True),
    ClaudeFamily("claude-opus-4-0*", N, 32_000),
    ClaudeFamily("claude-opus-4-2025*", N, 32_000),
    ClaudeFamily("claude-sonnet-4-0*", N, 64_000),
    ClaudeFamily("claude-sonnet-4-2025*", N, 64_000),
    ClaudeFamily(
        "claude-3-7-sonnet*", N, 64_000, longer_output=("output-128k-2025-02-19", 128_000)
    ),
    # Claude 3 and 3.5: no thinking.
    ClaudeFamily("claude-3-5-*", N, 8_192, thinking=Thinking.NONE),
    ClaudeFamily("claude-3-*", N, 4_096, thinking=Thinking.NONE),
)

_CLAUDE_DEFAULT = ClaudeFamily(
    # A Claude id no row knows, or a host's own model name: nobody says; the request is sent
    # and the provider decides.
    "*",
    U,
    64_000,
    forced_tool=U,
)

_HOST_DEFAULT = ClaudeFamily(
    # Any model of another host of the dialect (`ClaudeFamily.host_models`): structured
    # output unknown (the format is sent, not known to be applied), a forced tool taken.
    "*",
    U,
    64_000,
    forced_tool=S,
    host_models=True,
)

CAPABILITY_TABLES: dict[str, ClaudeTable] = {
    "anthropic": ClaudeTable(_CLAUDE_ROWS, _CLAUDE_DEFAULT),
    # Microsoft Foundry's model ids are deployment names; they match when named after the model.
    "azure-anthropic": ClaudeTable(_CLAUDE_ROWS, _CLAUDE_DEFAULT),
    # Any other host of the dialect: its models are its own, so nothing is assumed beyond
    # the dialect's tools.
    "anthropic-compatible": ClaudeTable((), _HOST_DEFAULT),
}
