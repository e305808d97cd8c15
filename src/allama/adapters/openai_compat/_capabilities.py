"""What each model family can do, per provider, as data: a new model is a one-line change.

A table is a list of model families, matched in order by a glob on the model id (case
insensitive), with a default for ids no row matches. `StructuredLevel` says how far the
family's native JSON Schema output goes; the other answers are `CapabilitySupport`.
`UNKNOWN` never blocks a request: the provider decides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Any, Literal

from allama.adapters._families import FamilyTable
from allama.types import CapabilitySupport, ChatCapability

__all__ = ["CAPABILITY_TABLES", "CapabilityTable", "ModelFamily", "StructuredLevel"]

S = CapabilitySupport.SUPPORTED
N = CapabilitySupport.UNSUPPORTED
U = CapabilitySupport.UNKNOWN


class StructuredLevel(StrEnum):
    """How a model family answers a `json_schema` response format.

    `STRICT`: constrained decoding that honours `strict`. `BEST_EFFORT`: the schema is
    accepted but `strict` is not enforced. `JSON_OBJECT`: only `json_object` exists.
    `UNKNOWN`: nobody says; the schema is sent and the provider decides.
    """

    STRICT = "strict"
    BEST_EFFORT = "best_effort"
    JSON_OBJECT = "json_object"
    UNKNOWN = "unknown"


_STRUCTURED_SUPPORT = {
    StructuredLevel.STRICT: S,
    StructuredLevel.BEST_EFFORT: S,
    StructuredLevel.JSON_OBJECT: N,
    StructuredLevel.UNKNOWN: U,
}


@dataclass(frozen=True, slots=True)
class ModelFamily:
    pattern: str
    structured: StructuredLevel
    tools: CapabilitySupport = S
    forced_tool: CapabilitySupport = S
    streaming: CapabilitySupport = S
    reasoning: CapabilitySupport = U
    images: CapabilitySupport = U
    parallel_tools: CapabilitySupport = S
    logprobs: CapabilitySupport = U
    """Whether the family reports token log-probabilities (`logprobs`, `top_logprobs`)."""
    stop: bool = True
    """Whether the family takes `stop` sequences (some reasoning models answer 400)."""
    efforts: tuple[tuple[str, str], ...] | None = None
    """Reasoning efforts the family takes, as (allama's, the wire's); `None`: sent as is."""
    none_as: str | None = None
    """The effort sent for `none` to a family that reasons whatever it is told (gpt-oss on
    Ollama, which ignores `think: false`, to which Ollama turns `none`): its lowest, with a
    refusal, since it still reasons (as the Ollama preset sends it)."""
    applies_format: bool = True
    """Whether the family's server applies a response format at all: Ollama's cloud models
    apply none, JSON mode included, which is sent and not relied on, with a warning."""
    json_with_tools: bool = True
    """Whether JSON Schema output may go beside tools (Groq: "Streaming and tool use are not
    supported together with Structured Outputs"; xAI: only on Grok 4 models)."""
    strict_profile: Literal["fine_tuned"] | None = None
    """The strict subset of the family where it is not its endpoint's (fine-tuned models
    take fewer keywords)."""
    strict_tools: bool = True
    """Whether the endpoint enforces a strict tool's schema for the family where its dialect
    is strict; `False` (Groq, which documents constrained decoding for GPT-OSS's
    `response_format` alone and not which models enforce `function.strict`): `strict` is
    sent, and the tool reported approximate."""
    sampling: Literal["yes", "no", "without_reasoning", "without_thinking"] = "yes"
    """Whether the family takes `temperature` and `top_p` other than their default (1):
    OpenAI's reasoning models answer 400 ("Only the default (1) value is supported", `no`);
    GPT-5.1 and 5.2 take them only at reasoning effort `none`, their default
    (`without_reasoning`; not their codex, chat or pro variants, which take no `none`);
    DeepSeek V4 thinks by default, where they have no effect, and heeds them only with
    thinking turned off (`without_thinking`), as DeepSeek's other models do outside thinking
    mode."""
    system_role: bool = True
    """Whether the family takes `system` and `developer` messages: o1-mini and o1-preview
    answer 400 ("'messages[0].role' does not support 'system' with this model", and the same
    for `developer`), so their text opens the first user turn instead."""
    thinking: Literal["by_default", "always", "when_asked"] | None = None
    """DeepSeek's thinking mode, where the family has one: on `by_default` (V4, which
    `"thinking": {"type": "disabled"}` turns off, and which reasoning effort `none` is sent
    as), `always` (deepseek-reasoner), or `when_asked` (`deepseek-chat`, V4 in its
    non-thinking mode: on only where the body option's `"thinking": {"type": "enabled"}`
    turns it on; effort `none`, which DeepSeek's `reasoning_effort` does not take, goes as
    `disabled` too, what it does unasked). While it thinks, DeepSeek answers 400 to a forced
    `tool_choice` ("Thinking mode does not support this tool_choice"): `forced_tool` is the
    answer for the default, and a request that turns thinking off may force a tool."""
    effort_thinks_only: bool = False
    """Whether a reasoning effort sets only how hard thinking mode thinks, and is left out,
    with a warning, where the request leaves thinking off (`deepseek-chat`, which thinks
    only when asked: an effort alone turns it on nowhere DeepSeek says)."""
    max_output: int | None = None
    """The family's output limit, where its maker documents one (OpenAI's model pages, "max
    output tokens"): a `max_output_tokens` above it is sent as the limit, with a warning,
    since OpenAI answers 400 ("max_tokens is too large: N. This model supports at most M
    completion tokens"); `None`: sent as asked, and the endpoint decides."""

    def support(self, capability: ChatCapability) -> CapabilitySupport:
        if capability is ChatCapability.STRUCTURED_OUTPUT:
            return _STRUCTURED_SUPPORT[self.structured]
        if capability not in _FAMILY_FIELDS:
            # Answered by the endpoint's profile, not its models (roots, choice output).
            return U
        answer: CapabilitySupport = getattr(self, _FAMILY_FIELDS[capability])
        return answer


_FAMILY_FIELDS = {
    ChatCapability.TOOL_CALLS: "tools",
    ChatCapability.FORCED_TOOL_CHOICE: "forced_tool",
    ChatCapability.STREAMING: "streaming",
    ChatCapability.REASONING: "reasoning",
    ChatCapability.IMAGE_INPUT: "images",
    ChatCapability.PARALLEL_TOOL_CALLS: "parallel_tools",
    ChatCapability.LOGPROBS: "logprobs",
}


class CapabilityTable(FamilyTable[ModelFamily]):
    """Chat Completions model families, per preset."""

    __slots__ = ()

    def limited(self, **changes: Any) -> CapabilityTable:
        """This table with `changes` made to every family: what the endpoint cannot do,
        whatever the model (Azure OpenAI's JSON Schema output on an older `api-version`).
        An answer may be given by its value (`structured="json_object"`), as a preset's
        data gives it without loading the tables."""
        fields: dict[str, Any] = {
            name: type(now)(value)
            if isinstance(now := getattr(self.default, name), Enum)
            else value
            for name, value in changes.items()
        }
        return type(self)(
            tuple(replace(row, **fields) for row in self.families),
            replace(self.default, **fields),
            self.strip_prefix,
        )


class _NamespacedTable(CapabilityTable):
    """A table matched on the model's name without its namespace (`library/gpt-oss:20b`,
    `hf.co/unsloth/gpt-oss-20b-GGUF`), as Ollama names models and its own preset's table
    (`OllamaTable`) matches them."""

    __slots__ = ()

    def _key(self, model: str) -> str:
        return model.lower().rsplit("/", 1)[-1]


_UNKNOWN = ModelFamily(
    "*", StructuredLevel.UNKNOWN, tools=U, forced_tool=U, streaming=U, parallel_tools=U
)

_LOW_HIGH = (("minimal", "low"), ("low", "low"), ("medium", "high"), ("high", "high"))
"""Families that take only `low` and `high` (DeepSeek maps the others the same way)."""
_LOW_TO_HIGH = (("minimal", "low"), ("low", "low"), ("medium", "medium"), ("high", "high"))
"""Families that always reason and take `low`, `medium` and `high` (o-series, gpt-oss, GPT-5
codex, Grok 4.20 multi-agent and Grok 4.5 on), and endpoints that take only those
(Together)."""
_NONE_OR_LOW_TO_HIGH: tuple[tuple[str, str], ...] = (
    ("none", "none"),
    ("minimal", "low"),
    ("low", "low"),
    ("medium", "medium"),
    ("high", "high"),
)
"""Grok 4.3: `none` (no reasoning) and `low` (its default) to `high`, no `minimal`."""
_NONE_OR_HIGH: tuple[tuple[str, str], ...] = (
    ("none", "none"),
    ("minimal", "high"),
    ("low", "high"),
    ("medium", "high"),
    ("high", "high"),
)
"""Mistral's adjustable reasoning: `none` (off) or `high` (on), no level between (400 "Must be
one of (none, high)"), so any other goes as `high`, reasoning on as asked."""
_NO_EFFORT: tuple[tuple[str, str], ...] = ()
"""Families that reason but take no reasoning effort at all: every effort is refused."""

_GPT_5: tuple[tuple[str, str], ...] = (
    ("none", "minimal"),
    ("minimal", "minimal"),
    ("low", "low"),
    ("medium", "medium"),
    ("high", "high"),
)
"""GPT-5, -mini and -nano: `minimal` to `high`, no `none` (the least is `minimal`)."""
_GPT_5_LATER: tuple[tuple[str, str], ...] = (
    ("none", "none"),
    ("minimal", "low"),
    ("low", "low"),
    ("medium", "medium"),
    ("high", "high"),
)
"""GPT-5.1 and later: `none` (their default) to `high`, no `minimal` ("Supported values are:
'none', 'low', 'medium', and 'high'", openai-agents-python#2089)."""
_MEDIUM_ONLY: tuple[tuple[str, str], ...] = (
    ("minimal", "medium"),
    ("low", "medium"),
    ("medium", "medium"),
    ("high", "medium"),
)
"""GPT-5.x chat (`gpt-5.1-chat-latest`) and the deep-research models: `medium` alone, which
they reason at by default."""
_MEDIUM_TO_HIGH: tuple[tuple[str, str], ...] = (
    ("minimal", "medium"),
    ("low", "medium"),
    ("medium", "medium"),
    ("high", "high"),
)
"""GPT-5.x pro: `medium` (the default) to `high` (and `xhigh`), no `none` or `low`."""
_HIGH_ONLY: tuple[tuple[str, str], ...] = (
    ("minimal", "high"),
    ("low", "high"),
    ("medium", "high"),
    ("high", "high"),
)
"""GPT-5 pro: `high` alone, its default."""
_NONE_OR_DEFAULT: tuple[tuple[str, str], ...] = (
    ("none", "none"),
    ("minimal", "default"),
    ("low", "default"),
    ("medium", "default"),
    ("high", "default"),
)
"""Qwen3 on Groq: reasoning off (`none`) or on (`default`), no levels."""
_GROQ_EFFORTS: tuple[tuple[str, str], ...] = (
    ("none", "none"),
    ("minimal", "low"),
    ("low", "low"),
    ("medium", "medium"),
    ("high", "high"),
)
"""Groq's models no row names: its `reasoning_effort` takes `none`, `default`, `low`,
`medium` and `high` (no `minimal`)."""

_O_SERIES = ModelFamily(
    "o[1-9]*",
    StructuredLevel.STRICT,
    reasoning=S,
    images=S,
    logprobs=N,
    efforts=_LOW_TO_HIGH,
    parallel_tools=N,
    sampling="no",
)
_GPT_4O = ModelFamily("gpt-4o*", StructuredLevel.STRICT, reasoning=N, images=S, logprobs=S)
_GPT_4 = ModelFamily("gpt-4*", StructuredLevel.JSON_OBJECT, reasoning=N, images=N, logprobs=S)
_GPT_35 = ModelFamily(
    "gpt-3.5-turbo*", StructuredLevel.JSON_OBJECT, reasoning=N, images=N, logprobs=S
)

_OPENAI_BASE_ROWS = (
    # Structured outputs from gpt-4o-2024-08-06 and gpt-4o-mini on; reasoning models.
    # `gpt-5-chat-latest` is the chat model of ChatGPT: no reasoning effort, and the
    # Responses API answers 400 to asking for its (non-existent) encrypted reasoning.
    # Log-probabilities: OpenAI's reasoning models answer 400 ("'logprobs' is not
    # supported with this model"): o-series, gpt-5, -mini, -nano, -chat (deepeval's model
    # table, go-openai#1061). 5.1 and 5.2 take them at reasoning effort `none`, their
    # default, and refuse them otherwise (vercel/ai#10932 citing OpenAI's parameter
    # compatibility notes): unknown, so a decision asks and, if refused, asks without.
    # Sampling (`temperature`, `top_p`) and `stop`: reasoning models answer 400 ("Unsupported
    # parameter: 'temperature' is not supported with this model", openai-python#2072; the
    # same for `stop` on GPT-5, smolagents#1671, litellm#15244); 5.1 and later take
    # sampling at reasoning effort `none` only (vercel/ai#10932).
    # Their codex, chat and pro variants take no `none` and reason by default, so take no
    # sampling and no log-probabilities at all (rows before `gpt-5.*`, which they match).
    # Codex (`gpt-5-codex`, `gpt-5.1-codex`, -mini, -max, `gpt-5.2-codex`): `low` to `high`
    # (400 to `none` quoting that set, openai/codex#6647; models.dev: default `medium`, no
    # temperature); -max and 5.2 add `xhigh`, which allama does not ask for. The Codex CLI
    # offers -mini only `medium` and `high`; models.dev and its audit of OpenAI's sets
    # (models.dev#2472) list `low` as well, taken here.
    # Output limits ("max output tokens" on OpenAI's model pages, the same per model on
    # Azure OpenAI's models page): gpt-5, -mini, -nano 128,000, -chat 16,384, -pro 272,000;
    # o1, o1-pro, o3, o3-mini, o3-pro, o4-mini 100,000, o1-mini 65,536, o1-preview 32,768;
    # gpt-4.1, -mini, -nano 32,768; gpt-4.5-preview, gpt-4o (but its 2024-05-13 snapshot,
    # 4,096), -mini, chatgpt-4o-latest 16,384; gpt-4-turbo 4,096; gpt-4 8,192; gpt-3.5-turbo
    # 4,096. Not the codex or 5.x models (their limits differ, 5.5's 272,000 among them, and
    # no OpenAI page for them was at hand), nor the deep research ones: sent as asked.
    ModelFamily(
        "gpt-5*-codex*",
        StructuredLevel.STRICT,
        reasoning=S,
        images=S,
        logprobs=N,
        stop=False,
        efforts=_LOW_TO_HIGH,
        sampling="no",
    ),
    # 5.x chat (`gpt-5.1-chat-latest`, `gpt-5.2-chat-latest`) reasons, unlike `gpt-5-chat`:
    # `medium` alone (400 "Supported values are: 'medium'", chatwise-releases#1257; models.dev:
    # default `medium`, no temperature). Log-probabilities and `stop` are not documented
    # for it: refused, as on the other reasoning models, rather than risk a 400.
    ModelFamily(
        "gpt-5.*-chat*",
        StructuredLevel.STRICT,
        reasoning=S,
        images=S,
        logprobs=N,
        stop=False,
        efforts=_MEDIUM_ONLY,
        sampling="no",
    ),
    # 5.x pro (`gpt-5.2-pro`): `medium` (its default) to `xhigh`, no `none` or `low`
    # (langchain#35424 strips temperature from 5.2-pro, whose default is not `none`;
    # models.dev#2351 gives 5.4-pro that set). For 5.2-pro's set no OpenAI source was
    # found, only third-party notes: `low` is taken as refused, asked as `medium`, rather
    # than risk a 400. No temperature (models.dev).
    ModelFamily(
        "gpt-5.*-pro*",
        StructuredLevel.STRICT,
        reasoning=S,
        images=S,
        logprobs=N,
        stop=False,
        efforts=_MEDIUM_TO_HIGH,
        sampling="no",
    ),
    # GPT-5 pro defaults to, and takes only, `high` (OpenAI's SDKs' `reasoning_effort`
    # notes; 400 "Supported values are: 'high'", models.dev#331).
    ModelFamily(
        "gpt-5-pro*",
        StructuredLevel.STRICT,
        reasoning=S,
        images=S,
        logprobs=N,
        stop=False,
        efforts=_HIGH_ONLY,
        sampling="no",
        max_output=272_000,
    ),
    ModelFamily(
        "gpt-5-chat*",
        StructuredLevel.STRICT,
        reasoning=N,
        images=S,
        logprobs=N,
        max_output=16_384,
    ),
    ModelFamily(
        "gpt-5.*",
        StructuredLevel.STRICT,
        reasoning=S,
        images=S,
        stop=False,
        efforts=_GPT_5_LATER,
        sampling="without_reasoning",
    ),
    ModelFamily(
        "gpt-5*",
        StructuredLevel.STRICT,
        reasoning=S,
        images=S,
        logprobs=N,
        stop=False,
        efforts=_GPT_5,
        sampling="no",
        max_output=128_000,
    ),
    # The o-series answer 400 "Unsupported parameter: 'parallel_tool_calls' is not
    # supported with this model" to the field on Chat Completions, even `false`
    # (langchain#29704 on o3-mini, langchain#29416 on o1, fast-agent#279 on o4-mini).
    # o1-mini and o1-preview take no system or developer message either (400 "Unsupported
    # value: 'messages[0].role' does not support 'system' with this model", and 'developer':
    # microsoft/agent-framework#1077, where every other OpenAI chat model took it;
    # QuantumNous/new-api#847, janhq/jan#4392); o1 and later take both.
    ModelFamily(
        "o1-mini*",
        StructuredLevel.JSON_OBJECT,
        tools=N,
        forced_tool=N,
        reasoning=S,
        logprobs=N,
        parallel_tools=N,
        sampling="no",
        efforts=_NO_EFFORT,
        system_role=False,
        max_output=65_536,
    ),
    ModelFamily(
        "o1-preview*",
        StructuredLevel.JSON_OBJECT,
        tools=N,
        forced_tool=N,
        reasoning=S,
        logprobs=N,
        parallel_tools=N,
        sampling="no",
        efforts=_NO_EFFORT,
        system_role=False,
        max_output=32_768,
    ),
    # Deep research (`o3-deep-research`, `o4-mini-deep-research`, and their dated ids), before
    # the `o3*` and `o4-mini*` rows they match: `medium` alone (400 to `low` and `high`;
    # anomalyco/opencode#26273, CherryHQ/cherry-studio#10676), no sampling, as the o-series.
    # Of tools they take only `web_search_preview`, `code_interpreter`, `mcp` and
    # `file_search` (400 "Deep research models only support the ...", charmbracelet/crush#2243),
    # given through the body option: no functions, so none is forced or called in parallel;
    # and at least one data source among them (web search, MCP or file search), which the
    # caller gives. Background mode (`background: true`) is what OpenAI's guide advises.
    *(
        ModelFamily(
            pattern,
            StructuredLevel.STRICT,
            tools=N,
            forced_tool=N,
            reasoning=S,
            images=S,
            stop=False,
            logprobs=N,
            efforts=_MEDIUM_ONLY,
            parallel_tools=N,
            sampling="no",
        )
        for pattern in ("o3-deep-research*", "o4-mini-deep-research*")
    ),
    ModelFamily(
        "o3*",
        StructuredLevel.STRICT,
        reasoning=S,
        images=S,
        stop=False,
        logprobs=N,
        efforts=_LOW_TO_HIGH,
        parallel_tools=N,
        sampling="no",
        max_output=100_000,
    ),
    ModelFamily(
        "o4-mini*",
        StructuredLevel.STRICT,
        reasoning=S,
        images=S,
        stop=False,
        logprobs=N,
        efforts=_LOW_TO_HIGH,
        parallel_tools=N,
        sampling="no",
        max_output=100_000,
    ),
    # o1 and o1-pro (o1-mini and o1-preview have rows above); no limit for another o-series
    # id no row names.
    replace(_O_SERIES, pattern="o1*", max_output=100_000),
    _O_SERIES,
    ModelFamily(
        "gpt-4.1*", StructuredLevel.STRICT, reasoning=N, images=S, logprobs=S, max_output=32_768
    ),
    ModelFamily(
        "gpt-4.5*", StructuredLevel.STRICT, reasoning=N, images=S, logprobs=S, max_output=16_384
    ),
    ModelFamily(
        "gpt-4o-2024-05-13",
        StructuredLevel.JSON_OBJECT,
        reasoning=N,
        images=S,
        logprobs=S,
        max_output=4_096,
    ),
    # `gpt-4o-64k-output-alpha`, an alpha of GPT-4o that writes up to 64K tokens: no limit.
    replace(_GPT_4O, pattern="gpt-4o-64k-output*"),
    replace(_GPT_4O, max_output=16_384),
    ModelFamily(
        "chatgpt-4o*",
        StructuredLevel.JSON_OBJECT,
        reasoning=N,
        images=S,
        logprobs=S,
        max_output=16_384,
    ),
    ModelFamily(
        "gpt-4-turbo*",
        StructuredLevel.JSON_OBJECT,
        reasoning=N,
        images=S,
        logprobs=S,
        max_output=4_096,
    ),
    # `gpt-4` alone: its preview snapshots write 4,096, and the 32k documents no limit.
    replace(_GPT_4, pattern="gpt-4", max_output=8_192),
    _GPT_4,
    # The current GPT-3.5 Turbo and its two 16k-context snapshots; the older ones (-0613,
    # -16k) document no output limit of their own: sent as asked.
    *(
        replace(_GPT_35, pattern=pattern, max_output=4_096)
        for pattern in ("gpt-3.5-turbo", "gpt-3.5-turbo-0125", "gpt-3.5-turbo-1106")
    ),
    _GPT_35,
)

_OPENAI_ROWS = (
    *_OPENAI_BASE_ROWS,
    # A fine-tune (`ft:gpt-4o-mini-2024-07-18:org::id`) takes its base model's parameters
    # (an `o4-mini` one no `temperature`), and a schema under the fine-tuned models' subset.
    # Its output limit is not documented: sent as asked.
    *(
        replace(row, pattern=f"ft:{row.pattern}", strict_profile="fine_tuned", max_output=None)
        for row in _OPENAI_BASE_ROWS
    ),
    # Other fine-tunes: what they take is not known, but where they take a schema it is
    # under the fine-tuned models' subset.
    ModelFamily(
        "ft:*",
        StructuredLevel.UNKNOWN,
        tools=U,
        forced_tool=U,
        streaming=U,
        parallel_tools=U,
        strict_profile="fine_tuned",
    ),
)

_GROQ_ROWS = (
    # Groq documents `logprobs` and `top_logprobs` as supported by no model yet, and no
    # Structured Outputs beside tools.
    # Reasoning efforts (Groq's reasoning page): `low`, `medium`, `high` on GPT-OSS;
    # `none` or `default` on Qwen3; none on Llama (3.x and 4).
    # Strict tools: Groq's constrained decoding is documented for `response_format` on
    # GPT-OSS 20B and 120B alone; which models enforce a tool's `function.strict` it does
    # not say, GPT-OSS included: `strict` is sent, the tool reported approximate.
    ModelFamily(
        "openai/gpt-oss-20b",
        StructuredLevel.STRICT,
        reasoning=S,
        logprobs=N,
        efforts=_LOW_TO_HIGH,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        "openai/gpt-oss-120b",
        StructuredLevel.STRICT,
        reasoning=S,
        logprobs=N,
        efforts=_LOW_TO_HIGH,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        "openai/gpt-oss-safeguard-*",
        StructuredLevel.BEST_EFFORT,
        reasoning=S,
        logprobs=N,
        efforts=_LOW_TO_HIGH,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        "moonshotai/kimi-k2-instruct-0905",
        StructuredLevel.BEST_EFFORT,
        reasoning=N,
        logprobs=N,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        "meta-llama/llama-4-scout-*",
        StructuredLevel.BEST_EFFORT,
        reasoning=N,
        images=S,
        logprobs=N,
        strict_tools=False,
        json_with_tools=False,
    ),
    # Groq's reasoning models are GPT-OSS (safeguard included) and Qwen3 (its reasoning
    # page); it answers 400 to a `reasoning_effort` for others (inspect_ai#2395, by Groq):
    # Meta's other models (Llama 4 Maverick, Llama Guard 4, Prompt Guard) and Llama 3, by
    # its current ids (`llama-3.3-70b-versatile`, `llama-3.1-8b-instant`) and its older
    # ones (`llama3-70b-8192`), are sent none.
    ModelFamily(
        "meta-llama/*",
        StructuredLevel.JSON_OBJECT,
        reasoning=N,
        logprobs=N,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        "llama-3*",
        StructuredLevel.JSON_OBJECT,
        reasoning=N,
        logprobs=N,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        "llama3-*",
        StructuredLevel.JSON_OBJECT,
        reasoning=N,
        logprobs=N,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        # Kimi K2 Instruct does not reason; its 0905 takes `json_schema` best-effort.
        "moonshotai/kimi-k2-instruct*",
        StructuredLevel.BEST_EFFORT,
        reasoning=N,
        logprobs=N,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        "qwen/qwen3-*",
        StructuredLevel.JSON_OBJECT,
        reasoning=S,
        logprobs=N,
        efforts=_NONE_OR_DEFAULT,
        strict_tools=False,
        json_with_tools=False,
    ),
    ModelFamily(
        "*",
        StructuredLevel.JSON_OBJECT,
        reasoning=U,
        logprobs=N,
        efforts=_GROQ_EFFORTS,
        strict_tools=False,
        json_with_tools=False,
    ),
)

_XAI_ROWS = (
    # Grok's reasoning models reject `stop`; few of them take a reasoning effort. Structured
    # outputs beside tools: "only for supported Grok 4 family models".
    # Grok 4 models reason (their reasoning comes back encrypted, through the Responses
    # API's `include`), and all but 4.20 multi-agent, 4.3 and 4.5 on answer 400 to a
    # reasoning effort (so none is sent); a `-non-reasoning` id does not reason.
    # Efforts (xAI's reasoning page): 4.3 takes `none` (no reasoning) to `high`, `low` its
    # default; 4.20 multi-agent `low` to `xhigh`, which set how many agents run (4 or 16),
    # and no `none`. 4.5 takes `low` to `high`, `high` its default, and reasoning cannot be
    # turned off (no `none`; xAI's Grok 4.5 page, as quoted in opencode#39448); 4.6 adds
    # `xhigh` (grok2api#901), 4.7 takes `low` to `xhigh` (xAI's reasoning page, as quoted in
    # the synaps crate's notes): third-party copies of xAI's pages, whose sets agree. `xhigh`
    # allama does not ask for.
    ModelFamily(
        "grok-3-mini*",
        StructuredLevel.STRICT,
        reasoning=S,
        stop=False,
        efforts=_LOW_HIGH,
        json_with_tools=False,
    ),
    ModelFamily(
        "grok-4.20-multi-agent*",
        StructuredLevel.STRICT,
        reasoning=S,
        stop=False,
        efforts=_LOW_TO_HIGH,
    ),
    ModelFamily(
        "grok-4.3*", StructuredLevel.STRICT, reasoning=S, stop=False, efforts=_NONE_OR_LOW_TO_HIGH
    ),
    ModelFamily("grok-4*-non-reasoning*", StructuredLevel.STRICT, reasoning=N, stop=False),
    *(
        ModelFamily(pattern, StructuredLevel.STRICT, reasoning=S, stop=False, efforts=_LOW_TO_HIGH)
        for pattern in ("grok-4.5*", "grok-4.6*", "grok-4.7*")
    ),
    ModelFamily("grok-4*", StructuredLevel.STRICT, reasoning=S, stop=False, efforts=_NO_EFFORT),
    # grok-code-fast reasons as Grok 4 does (encrypted, through `include`), and answers 400
    # to an effort ("does not support parameter reasoningEffort").
    ModelFamily(
        "grok-code-fast*",
        StructuredLevel.STRICT,
        reasoning=S,
        stop=False,
        efforts=_NO_EFFORT,
        json_with_tools=False,
    ),
    ModelFamily("grok-[23]*", StructuredLevel.STRICT, reasoning=N, json_with_tools=False),
    ModelFamily("grok-*", StructuredLevel.STRICT, reasoning=N),
)

_MISTRAL_DEFAULT = ModelFamily("*", StructuredLevel.STRICT, reasoning=N, logprobs=N)
"""A Mistral id of no row: sent no reasoning effort, with a warning (refused under
`UnsupportedPolicy.ERROR`), and nothing for `none`. Mistral names the models of adjustable
reasoning one by one (its reasoning pages), and the others answer 400 or 422 to an effort
("not enabled for this model"; dust#27613 for Large, hermes-agent#11243: "All other Mistral
models: None / No (422)"): Large 3 and before, Medium 3 and 3.1, Small 3.2 and before
(`mistral-small-2506`, `-2402`), Codestral, Ministral, Nemo, Pixtral, Devstral."""
_MISTRAL_ROWS = (
    # Adjustable reasoning (Mistral's reasoning pages): Small 4 (`mistral-small-2603`, which
    # `mistral-small-latest` names) and Medium 3.5 (`mistral-medium-3-5`, dated 2604) take
    # `reasoning_effort` `none` or `high` alone, and answer 400 to another ("reasoning_effort=
    # 'medium' is not supported for this model. Must be one of (none, high)"; the set as
    # probed by celeste-python#311, vercel/ai#13688 and inspect_ai#4711). Small 4 is named by
    # its date alone: the older Smalls (`mistral-small-2506`, `-2402`) do not reason.
    # `mistral-medium-latest` names Medium 3.5 since Medium 3.1 was deprecated (models.dev's
    # record of it; celeste-python#311 probed it taking both), and `magistral-small-latest`
    # took both when probed (models.dev#1986, celeste-python#311): third-party probes only.
    # The sources disagree on Magistral Small: Mistral's pages call it native reasoning (it
    # always reasons) and document no effort for it, and hermes-agent#11243's table, drawn
    # from those pages rather than sent, says 422. The row stands on the probes, requests
    # actually answered, which told it apart from Magistral Medium's refusal below.
    *(
        replace(_MISTRAL_DEFAULT, pattern=pattern, reasoning=S, efforts=_NONE_OR_HIGH)
        for pattern in (
            "mistral-small-latest",
            "mistral-small-2603",
            "mistral-medium-latest",
            "mistral-medium-3-5*",
            "mistral-medium-3.5*",
            "mistral-medium-2604",
            "magistral-small*",
        )
    ),
    # Magistral Medium always reasons and answers 400 to an effort ("reasoning_effort not
    # enabled", celeste-python#311): every effort is refused, `none` too.
    replace(_MISTRAL_DEFAULT, pattern="magistral-medium*", reasoning=S, efforts=_NO_EFFORT),
    # Large 4 (`mistral-large-4`, `mistral-large-4-0`) reasons, and takes levels of effort
    # (Mistral's reasoning page: low to high): sent as asked.
    replace(_MISTRAL_DEFAULT, pattern="mistral-large-4*", reasoning=S),
)

# V4 thinks by default (`thinking: {"type": "disabled"}` turns it off, DeepSeek's
# thinking-mode guide), and then ignores sampling as the reasoner does and takes no forced
# tool; with thinking off both are taken (DeepSeek-V3#1376).
_DEEPSEEK_V4 = ModelFamily(
    "deepseek-v4*",
    StructuredLevel.JSON_OBJECT,
    reasoning=S,
    forced_tool=N,
    efforts=_LOW_HIGH,
    images=N,
    sampling="without_thinking",
    thinking="by_default",
)
_DEEPSEEK_OTHERS = ModelFamily(
    "deepseek-*",
    StructuredLevel.JSON_OBJECT,
    reasoning=S,
    efforts=_LOW_HIGH,
    images=N,
    sampling="without_thinking",
    thinking="when_asked",
)

_DEEPSEEK_ROWS = (
    # The thinking mode takes no `logprobs` and ignores sampling (DeepSeek's reasoning-model
    # guide: "will not trigger an error but will also have no effect"). The API reads no
    # images ("unknown variant `image_url`, expected `text`").
    # A forced `tool_choice` (`required`, or a named function) is answered 400 in thinking
    # mode ("Thinking mode does not support this tool_choice", DeepSeek-V3#1376; "deepseek-
    # reasoner does not support this tool_choice", litellm#27628): the reasoner always
    # thinks (no source says it can stop), so it is never forced.
    ModelFamily(
        "deepseek-reasoner*",
        StructuredLevel.JSON_OBJECT,
        reasoning=S,
        forced_tool=N,
        efforts=_LOW_HIGH,
        logprobs=N,
        images=N,
        sampling="no",
        thinking="always",
    ),
    _DEEPSEEK_V4,
    # DeepSeek's 2026 ids without the version, aliases that move to the newest release, are
    # V4's and think by default: `deepseek-flash` is the model of DeepSeek's thinking-mode
    # guide (api-docs.deepseek.com/guides/thinking_mode: "Thinking mode is enabled by
    # default"; its id in the list of the reference's DeepSeek section), and `deepseek-pro`
    # its Pro counterpart, taken as thinking by default as every V4 model does (no DeepSeek
    # page at hand names it).
    replace(_DEEPSEEK_V4, pattern="deepseek-flash*"),
    replace(_DEEPSEEK_V4, pattern="deepseek-pro*"),
    # The others (`deepseek-chat`, V4-flash's non-thinking mode since the V4 migration)
    # think only where the body option turns thinking on, and then take neither sampling
    # nor a forced tool, as V4 does. `deepseek-chat` is sent no effort without it: DeepSeek
    # documents the effort as thinking mode's strength, and no `enabled` on that alias, so
    # allama does not turn thinking on for an effort (ids of no row still take theirs).
    replace(_DEEPSEEK_OTHERS, pattern="deepseek-chat*", effort_thinks_only=True),
    _DEEPSEEK_OTHERS,
)

_OLLAMA_EFFORTS: tuple[tuple[str, str], ...] = (
    ("none", "none"),
    ("minimal", "low"),
    ("low", "low"),
    ("medium", "medium"),
    ("high", "high"),
)
"""Ollama's `reasoning_effort` on `/v1`: `minimal` is `low` on a current server and answered
400 ("invalid reasoning value") by an older one, so `low` goes."""

_OLLAMA_DEFAULT = ModelFamily(
    "*",
    StructuredLevel.STRICT,
    tools=U,
    forced_tool=N,
    parallel_tools=N,
    efforts=_OLLAMA_EFFORTS,
)
# Cloud models (`gpt-oss:120b-cloud`) run on Ollama's cloud, which applies no `format` (its
# documentation: no structured outputs there): the schema is sent, not enforced, and JSON
# mode is not relied on.
_OLLAMA_CLOUD = replace(
    _OLLAMA_DEFAULT,
    pattern="*[-:]cloud",
    structured=StructuredLevel.BEST_EFFORT,
    applies_format=False,
)
# gpt-oss reasons at `low`, `medium` or `high` and ignores `think: false` (Ollama's
# documentation: its reasoning "cannot be fully disabled"), which `none` becomes: its
# lowest goes instead, with a refusal, as on the Ollama preset.
_GPT_OSS_ON_OLLAMA: dict[str, Any] = {"reasoning": S, "efforts": _LOW_TO_HIGH, "none_as": "low"}

_LLAMA_CPP_DEFAULT = ModelFamily(
    "*",
    StructuredLevel.STRICT,
    tools=U,
    forced_tool=U,
    reasoning=U,
    images=U,
    parallel_tools=U,
    logprobs=S,
)

_WORKERS_AI = ModelFamily(
    "*", StructuredLevel.BEST_EFFORT, tools=U, forced_tool=U, parallel_tools=U
)
_WORKERS_AI_JSON_MODE = (
    "@cf/meta/llama-3.1-8b-instruct-fast",
    "@cf/meta/llama-3.1-70b-instruct",
    "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
    "@cf/meta/llama-3-8b-instruct",
    "@cf/meta/llama-3.1-8b-instruct",
    "@cf/meta/llama-3.2-11b-vision-instruct",
    "@hf/nousresearch/hermes-2-pro-mistral-7b",
    "@hf/thebloke/deepseek-coder-6.7b-instruct-awq",
    "@cf/deepseek-ai/deepseek-r1-distill-qwen-32b",
)
"""The models Workers AI's JSON Mode page lists as taking a response format."""

CAPABILITY_TABLES: dict[str, CapabilityTable] = {
    "openai": CapabilityTable(_OPENAI_ROWS, _UNKNOWN),
    # Azure's model ids are deployment names; they match only when named after the model.
    "azure-openai": CapabilityTable(_OPENAI_ROWS, _UNKNOWN),
    # Foundry's model ids are deployment names too, of models from many families. Its
    # model-inference request schema (ChatCompletionsOptions, api-version 2024-05-01-preview)
    # has no `parallel_tool_calls`, `logprobs` or `top_logprobs`, and the service answers 400
    # to a parameter outside it (the `extra-parameters: error` default): none is sent.
    "azure-foundry": CapabilityTable((), replace(_UNKNOWN, parallel_tools=N, logprobs=N)),
    "groq": CapabilityTable(_GROQ_ROWS, _UNKNOWN),
    "xai": CapabilityTable(_XAI_ROWS, ModelFamily("*", StructuredLevel.STRICT)),
    # Mistral's request has no `logprobs` (its API answers 422 to unknown fields).
    "mistral": CapabilityTable(_MISTRAL_ROWS, _MISTRAL_DEFAULT),
    "openrouter": CapabilityTable((), _UNKNOWN),
    # An id of no row's still reads the body option's `thinking` (`when_asked`), and takes
    # the efforts DeepSeek documents (`low`, `high`), as its named models do.
    "deepseek": CapabilityTable(
        _DEEPSEEK_ROWS,
        ModelFamily(
            "*",
            StructuredLevel.JSON_OBJECT,
            images=N,
            efforts=_LOW_HIGH,
            sampling="without_thinking",
            thinking="when_asked",
        ),
    ),
    # Together answers `logprobs` in a shape of its own (token and logprob lists), which
    # allama does not read: asking for them is refused rather than silently lost.
    # Its `reasoning_effort` takes `low`, `medium` and `high`. JSON Schema output is per
    # model (its structured-outputs page sends to the model catalogs for which): unknown,
    # so auto mode's native pass is a guess a refusal falls back from.
    "together": CapabilityTable(
        (),
        ModelFamily(
            "*",
            StructuredLevel.UNKNOWN,
            forced_tool=U,
            parallel_tools=U,
            logprobs=N,
            efforts=_LOW_TO_HIGH,
        ),
    ),
    # Fireworks constrains `json_schema` output with a grammar, whatever `strict` says.
    "fireworks": CapabilityTable(
        (), ModelFamily("*", StructuredLevel.STRICT, forced_tool=U, parallel_tools=U)
    ),
    # DeepInfra takes `json_schema` for the models it tags "json" alone, and answers 405
    # ("json_schema response format is not supported for model: ...") for the others: unknown
    # per model, so auto mode's native pass is a guess a refusal falls back from.
    "deepinfra": CapabilityTable(
        (),
        ModelFamily("*", StructuredLevel.UNKNOWN, tools=U, forced_tool=U, parallel_tools=U),
    ),
    "vllm": CapabilityTable(
        (), ModelFamily("*", StructuredLevel.STRICT, parallel_tools=U, logprobs=S)
    ),
    # Workers AI's tools on its OpenAI-compatible endpoint, a named `tool_choice` among
    # them, are unconfirmed (one client found they "do not appear to work"): unknown, so
    # they are sent and the endpoint decides, as its profile sends them.
    # JSON mode (a schema under `json_schema`) is for the models its JSON Mode page lists,
    # best-effort ("JSON Mode couldn't be met" when it fails); others' is unknown.
    "workers-ai": CapabilityTable(
        tuple(replace(_WORKERS_AI, pattern=model) for model in _WORKERS_AI_JSON_MODE),
        replace(_WORKERS_AI, structured=StructuredLevel.UNKNOWN),
    ),
    "ollama-openai": _NamespacedTable(
        (
            replace(_OLLAMA_CLOUD, pattern="gpt-oss*[-:]cloud", **_GPT_OSS_ON_OLLAMA),
            _OLLAMA_CLOUD,
            replace(_OLLAMA_DEFAULT, pattern="gpt-oss*", **_GPT_OSS_ON_OLLAMA),
        ),
        _OLLAMA_DEFAULT,
    ),
    "openai-compatible": CapabilityTable((), _UNKNOWN),
    # llama.cpp: constrained decoding for any model; tools depend on the model's chat
    # template (`allama.local` answers them from the running server's template).
    "local": CapabilityTable((), _LLAMA_CPP_DEFAULT),
    "llama-cpp": CapabilityTable((), _LLAMA_CPP_DEFAULT),
}
