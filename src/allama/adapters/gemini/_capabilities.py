"""What each Gemini model family can do, as data: a new model is a one-line change.

Rows are matched in order by a glob on the model id (case insensitive, without a `models/`
prefix); the first match wins. The columns are the facts of the provider reference: which
schema surface the family takes, how it thinks, and whether JSON output and function
declarations can go in one request.

Whether a model reports token log-probabilities differs between the Gemini API and Vertex
AI for one model, so each preset's table answers `ChatCapability.LOGPROBS` from rows of its
own (`GeminiTable.logprobs`), matched the same way; an id none matches answers `UNKNOWN`,
which never blocks a request: the provider decides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from fnmatch import fnmatchcase

from allama.adapters._families import FamilyTable
from allama.types import CapabilitySupport, ChatCapability

__all__ = [
    "CAPABILITY_TABLES",
    "GeminiFamily",
    "GeminiTable",
    "LogprobsRow",
    "SchemaSurface",
    "Thinking",
]

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
    system: bool = True
    """Takes a `systemInstruction` (Gemma on the Gemini API answers 400 "Developer
    instruction is not enabled")."""
    json_with_tools: bool = True
    """JSON output and function declarations in one request (2.5 and older answer 400)."""
    tools: CapabilitySupport = S
    images: CapabilitySupport = S
    choice: CapabilitySupport = S
    """A plain-text answer constrained to one of a list of strings (`responseMimeType:
    "text/x.enum"` with a `STRING` enum as `responseSchema`)."""
    logprobs: CapabilitySupport = U
    """Token log-probabilities (`responseLogprobs`); set from the preset's `logprobs` rows."""

    def support(self, capability: ChatCapability) -> CapabilitySupport:
        if capability is ChatCapability.STRUCTURED_OUTPUT:
            return N if self.schema is SchemaSurface.NONE else S
        if capability is ChatCapability.STREAMING:
            return S
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
        if capability is ChatCapability.LOGPROBS:
            return self.logprobs
        if capability is ChatCapability.CHOICE_OUTPUT:
            # `text/x.enum` is constrained output: none where the family has none.
            return N if self.schema is SchemaSurface.NONE else self.choice
        # A capability added after this table was written: nobody has said.
        return U


LogprobsRow = tuple[str, CapabilitySupport]
"""A glob on the model id and whether the models it matches report log-probabilities."""


@dataclass(frozen=True, slots=True)
class GeminiTable(FamilyTable[GeminiFamily]):
    """Gemini model families; ids may carry the `models/` prefix.

    `logprobs` answers `ChatCapability.LOGPROBS` per model, first match wins, apart from
    the family rows (the Gemini API and Vertex AI answer differently for one family); an id
    none matches keeps its family's answer.
    """

    logprobs: tuple[LogprobsRow, ...] = ()

    def _key(self, model: str) -> str:
        """The model id of a Vertex AI resource name too: `projects/{p}/locations/{l}/`,
        then `publishers/{publisher}/models/` (or the short `{publisher}/`), left out; a
        tuned model's `endpoints/{id}` keeps its name, which no row matches."""
        parts = FamilyTable._key(self, model).split("/")
        if len(parts) > 4 and parts[0] == "projects" and parts[2] == "locations":
            parts = parts[4:]
        if len(parts) == 4 and parts[0] == "publishers" and parts[2] == "models":
            return parts[3]
        if len(parts) == 2 and parts[0] not in _COLLECTIONS:
            return parts[1]
        return "/".join(parts).removeprefix(self.strip_prefix)

    def family(self, model: str) -> GeminiFamily:
        found = self._cache.get(model)
        if found is None:
            found = FamilyTable.family(self, model)
            key = self._key(model)
            answer = next(
                (support for glob, support in self.logprobs if fnmatchcase(key, glob)),
                found.logprobs,
            )
            if answer is not found.logprobs:
                found = replace(found, logprobs=answer)
                if model in self._cache:
                    # Cached by the lookup above without this preset's answer.
                    self._cache[model] = found
        return found


_COLLECTIONS = frozenset({"models", "tunedmodels", "endpoints"})
"""Collections a two-part name (lower-cased) may start with that are not a publisher (the
Gemini API's `tunedModels/{id}`)."""

_JSON = SchemaSurface.JSON_SCHEMA
_OPENAPI = SchemaSurface.RESPONSE_SCHEMA

_GEMINI_ROWS = (
    # Every Gemini row takes `text/x.enum` (CHOICE_OUTPUT): ai.google.dev "Structured output",
    # "Generating enum values" (gemini-2.5-flash; REST body with `responseSchema`).
    # Gemini 3: thinking levels, JSON output together with function calling.
    # 3.1 Pro added MEDIUM (still no MINIMAL); 3 Pro takes LOW and HIGH alone.
    GeminiFamily("gemini-3.1-pro*", _JSON, Thinking.LEVEL, levels=("low", "medium", "high")),
    GeminiFamily("gemini-3*-pro*", _JSON, Thinking.LEVEL, levels=("low", "high")),
    GeminiFamily("gemini-3*", _JSON, Thinking.LEVEL, levels=("minimal", "low", "medium", "high")),
    # Gemini 2.5 Flash Image and the 2.5 speech models do not think: ahead of the 2.5 Pro
    # and Flash rows, whose globs their ids match. Any `thinkingConfig`, a budget of 0 too,
    # is answered 400 "Thinking is not enabled for models/gemini-2.5-flash-image-preview"
    # (CherryHQ/cherry-studio#9614; anomalyco/models.dev#576 for gemini-2.5-flash-image).
    GeminiFamily("gemini-2.5-flash-image*", _JSON, json_with_tools=False),
    GeminiFamily("gemini-2.5-*-tts*", _JSON, json_with_tools=False),
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
    # Gemini 1.5 (retired): the OpenAPI schema surface only. `text/x.enum` came with 1.5
    # (Vertex AI "Controlled generation": Gemini 1.5 Pro and Flash, `text/x.enum`).
    GeminiFamily("gemini-1.5*", _OPENAPI, json_with_tools=False),
    # A later Gemini no row names yet: as the newest family.
    GeminiFamily("gemini-*", _JSON, Thinking.LEVEL, levels=("minimal", "low", "medium", "high")),
    # Gemma served by the Gemini API: no structured output (so no `text/x.enum`), no function
    # calling.
    GeminiFamily("gemma-*", SchemaSurface.NONE, tools=N, images=U, system=False),
)

_GEMINI_DEFAULT = GeminiFamily(
    # A model id no row knows (a tuned model, another publisher's): the current surface;
    # whether it takes `text/x.enum` nobody says.
    "*",
    _JSON,
    Thinking.NONE,
    json_with_tools=True,
    images=U,
    choice=U,
)

# Log-probabilities, as each endpoint answers `responseLogprobs`: a refusal is a 400
# ("Logprobs is not supported for the current model", "... is not enabled for models/<id>").
# Each row's source is the report that quotes the endpoint's answer for that model.
_GEMINI_API_LOGPROBS: tuple[LogprobsRow, ...] = (
    # "not enabled for models/gemini-2.5-pro-preview-03-25": deprecated-generative-ai-python#238
    ("*-preview*", N),
    # "not supported for the current model": GoogleCloudPlatform/generative-ai#1536
    ("gemini-1.5-flash-8b*", N),
    # answers where 2.5 refuses: googleapis/python-genai#1921, mscraftsman/generative-ai#135
    ("gemini-2.0-flash*", S),
    # "not enabled for models/gemini-2.5-pro": googleapis/python-genai#1921 (2026-01)
    ("gemini-2.5-pro*", N),
    # "not enabled for models/gemini-2.5-flash-lite": Vela-Research/think-reason-learn#34
    ("gemini-2.5-flash-lite*", N),
    # "not enabled for models/gemini-2.5-flash": langchain-ai/langchain-google#1266
    ("gemini-2.5-flash*", N),
)

_VERTEX_LOGPROBS: tuple[LogprobsRow, ...] = (
    # "not supported for the current model": GoogleCloudPlatform/generative-ai#1536
    ("gemini-1.5-flash-8b*", N),
    # "not supported for this model" on Vertex AI: GoogleCloudPlatform/generative-ai#2947
    ("gemini-3.5-flash*", N),
    # answered on Vertex AI for 2.0 Flash and Flash-Lite: BerriAI/litellm#9091, vercel/ai#5418
    ("gemini-2.0-flash*", S),
)

CAPABILITY_TABLES: dict[str, GeminiTable] = {
    "gemini": GeminiTable(
        _GEMINI_ROWS, _GEMINI_DEFAULT, strip_prefix="models/", logprobs=_GEMINI_API_LOGPROBS
    ),
    "vertex-gemini": GeminiTable(
        _GEMINI_ROWS, _GEMINI_DEFAULT, strip_prefix="models/", logprobs=_VERTEX_LOGPROBS
    ),
}
