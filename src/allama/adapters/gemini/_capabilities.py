"""What each Gemini model family can do, as data: a new model is a one-line change.

Rows are matched in order by a glob on the model id (case insensitive, without a `models/`
prefix); the first match wins. The columns are the facts of the provider reference: which
schema surface the family takes, how it thinks, and whether JSON output and function
declarations can go in one request.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from allama.adapters._families import FamilyTable
from allama.types import CapabilitySupport, ChatCapability

__all__ = ["CAPABILITY_TABLES", "GeminiFamily", "GeminiTable", "SchemaSurface", "Thinking"]

S = CapabilitySupport.SUPPORTED
N = CapabilitySupport.UNSUPPORTED
U = CapabilitySupport.UNKNOWN


class SchemaSurface(StrEnum):
    """Where a response schema goes: `responseJsonSchema` (a JSON Schema subset, every
    active model since November 2025), `responseSchema` (the older OpenAPI subset), or none
    (the family has no structured output)."""

    JSON_SCHEMA = "json_schema"
    RESPONSE_SCHEMA = "response_schema"
    NONE = "none"


class Thinking(StrEnum):
    """`NONE`: no thinking. `BUDGET`: `thinkingBudget` in tokens (Gemini 2.5).
    `LEVEL`: `thinkingLevel` (Gemini 3 and later)."""

    NONE = "none"
    BUDGET = "budget"
    LEVEL = "level"


@dataclass(frozen=True, slots=True)
class GeminiFamily:
    pattern: str
    schema: SchemaSurface
    thinking: Thinking = Thinking.NONE
    budget: tuple[int, int] = (0, 0)
    """The thinking budget's range in tokens (`BUDGET`)."""
    can_disable: bool = False
    """Thinking can be turned off (`thinkingBudget: 0`)."""
    levels: tuple[str, ...] = ()
    """The `thinkingLevel`s the family takes (`LEVEL`), lowest first."""
    json_with_tools: bool = True
    """JSON output and function declarations in one request (2.5 and older answer 400)."""
    tools: CapabilitySupport = S
    images: CapabilitySupport = S

    def support(self, capability: ChatCapability) -> CapabilitySupport:
        if capability is ChatCapability.STRUCTURED_OUTPUT:
            return N if self.schema is SchemaSurface.NONE else S
        if capability in (ChatCapability.TOOL_CALLS, ChatCapability.FORCED_TOOL_CHOICE):
            return self.tools
        if capability is ChatCapability.PARALLEL_TOOL_CALLS:
            return self.tools
        if capability is ChatCapability.REASONING:
            return N if self.thinking is Thinking.NONE else S
        if capability is ChatCapability.IMAGE_INPUT:
            return self.images
        if capability is ChatCapability.RESPONSE_SCHEMA_ANY_ROOT:
            # Both schema surfaces take any type at the root.
            return S
        if capability is ChatCapability.TOOL_SCHEMA_ANY_ROOT:
            return N
        return S


class GeminiTable(FamilyTable[GeminiFamily]):
    """Gemini model families; ids may carry the `models/` prefix."""

    __slots__ = ()


_JSON = SchemaSurface.JSON_SCHEMA
_OPENAPI = SchemaSurface.RESPONSE_SCHEMA

_GEMINI_ROWS = (
    # Gemini 3: thinking levels, JSON output together with function calling.
    GeminiFamily("gemini-3*-pro*", _JSON, Thinking.LEVEL, levels=("low", "high")),
    GeminiFamily("gemini-3*", _JSON, Thinking.LEVEL, levels=("minimal", "low", "medium", "high")),
    # Gemini 2.5: thinking budgets; Pro cannot turn thinking off.
    GeminiFamily(
        "gemini-2.5-pro*", _JSON, Thinking.BUDGET, budget=(128, 32_768), json_with_tools=False
    ),
    GeminiFamily(
        "gemini-2.5-flash-lite*",
        _JSON,
        Thinking.BUDGET,
        budget=(512, 24_576),
        can_disable=True,
        json_with_tools=False,
    ),
    GeminiFamily(
        "gemini-2.5-flash*",
        _JSON,
        Thinking.BUDGET,
        budget=(1, 24_576),
        can_disable=True,
        json_with_tools=False,
    ),
    # Gemini 2.0: no thinking; `responseJsonSchema` since November 2025 (recorded).
    GeminiFamily("gemini-2.0*", _JSON, json_with_tools=False),
    # Gemini 1.5 (retired): the OpenAPI schema surface only.
    GeminiFamily("gemini-1.5*", _OPENAPI, json_with_tools=False),
    # A later Gemini no row names yet: as the newest family.
    GeminiFamily("gemini-*", _JSON, Thinking.LEVEL, levels=("minimal", "low", "medium", "high")),
    # Gemma served by the Gemini API: no structured output, no function calling.
    GeminiFamily("gemma-*", SchemaSurface.NONE, tools=N, images=U),
)

_GEMINI_DEFAULT = GeminiFamily(
    # A model id no row knows (a tuned model, another publisher's): the current surface.
    "*",
    _JSON,
    Thinking.NONE,
    json_with_tools=True,
    images=U,
)

CAPABILITY_TABLES: dict[str, GeminiTable] = {
    "gemini": GeminiTable(_GEMINI_ROWS, _GEMINI_DEFAULT, strip_prefix="models/"),
    "vertex-gemini": GeminiTable(_GEMINI_ROWS, _GEMINI_DEFAULT, strip_prefix="models/"),
}
