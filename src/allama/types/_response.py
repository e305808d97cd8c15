"""A provider's answer, as one shape whatever the provider."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import Field, JsonValue

from allama.types._base import Data, kinds_listed
from allama.types._content import ContentBlock, Reasoning, Refusal, ToolCall, text_of
from allama.types._fields import Warning
from allama.types._finish import FinishReason
from allama.types._logprobs import TokenLogprob
from allama.types._messages import AssistantMessage
from allama.types._usage import Usage

ALLAMA_NAMESPACE = "allama"
"""The provider-data namespace allama itself writes to."""

DECLINE_EXPLANATION_KEY = "decline_explanation"
"""Where an adapter stores the provider's own explanation of a refusal, in its namespace."""

RESUME_KEY = "resume"
"""Where an adapter stores, in its namespace, what it needs back to continue a turn the
provider paused (Anthropic's `pause_turn`): `to_assistant_message()` carries it over."""

REASONING_DETAILS_KEY = "reasoning_details"
"""OpenRouter's `message.reasoning_details`, verbatim, in the provider's namespace: a list of
`reasoning.summary`, `reasoning.text` (with its `signature`) and `reasoning.encrypted` (with
its `data`) entries, each with `id`, `format` and `index`, which OpenRouter asks to be sent
back unmodified to continue a tool-calling turn with reasoning: `to_assistant_message()`
carries it over, and the Chat Completions encoder sends it back on that assistant turn to
the provider of that namespace alone."""

RATE_LIMIT_RESET_KEY = "rate_limit_reset"
"""Where an HTTP provider notes, in allama's namespace, the seconds until a rate limit its
answer's headers say is used up (a remaining count of `0`) resets, counted from when the
answer came: a batch run sends no new request until then (rather than meet a 429)."""


def rate_limit_reset(provider_data: Mapping[str, Mapping[str, JsonValue]]) -> float | None:
    """The seconds a response's `RATE_LIMIT_RESET_KEY` note says (more than 0 and finite),
    through any wrapper; `None` without one."""
    ours = provider_data.get(ALLAMA_NAMESPACE)
    wait = None if ours is None else ours.get(RATE_LIMIT_RESET_KEY)
    if isinstance(wait, bool) or not isinstance(wait, int | float):
        return None
    return float(wait) if 0 < wait < math.inf else None


AUDIO_KEY = "audio"
"""The answer's audio, where the request asked for it (`modalities: ["text", "audio"]` and
`audio: {"voice", "format"}` through the body option: OpenAI's `gpt-4o-audio-preview`,
`gpt-audio`): `message.audio` verbatim, `{"id", "expires_at", "data", "transcript"}`, `data`
the audio in the format asked, base64. Its words are under `"transcript"`, not in the
response's text (the message's `content` is `null` beside it: `text()` gives only text the
model wrote as text). A stream's `delta.audio` pieces are joined into the same object (their
`transcript` strings appended, their `data` pieces, each base64 of its own, given as one
base64 string of all their bytes, the other fields as first given). The encoder
sends the `id` back on an assistant turn whose provider data holds it (`"audio": {"id":
...}`, by which OpenAI continues an audio conversation: its server keeps the audio until
`expires_at`), to the provider of that namespace alone: `to_assistant_message()` carries it
over."""

_SENT_BACK = (RESUME_KEY, REASONING_DETAILS_KEY, AUDIO_KEY)
"""The provider-data keys an assistant turn carries to the next request."""

SERVICE_TIER_KEY = "service_tier"
"""Where an adapter stores the service tier a response says served it, in its namespace,
when that is not the standard one (OpenAI's `priority` or `flex`): such a call is billed at
other prices, which its cost is priced at (or, unknown, has none)."""

PROVISIONED_THROUGHPUT = "provisioned_throughput"
"""The tier of a call served by reserved capacity (Vertex AI's provisioned throughput),
billed by its reservation rather than by token: it has no cost by token."""

AUDIO_TOKENS_KEY = "audio_tokens"
"""Where an adapter keeps a usage's audio tokens, in its namespace: a dict of genai-prices'
usage names (`input_audio_tokens`, `cache_audio_read_tokens`, `output_audio_tokens`) to
counts, each a part of the count `Usage` has for its direction. Audio is billed at prices of
its own (OpenAI's audio models: several times the text's), which its cost is priced at."""

MEDIA_TOKENS_KEY = "media_tokens"
"""Where an adapter keeps a usage's image and video tokens, in its namespace, as it keeps
audio ones (`AUDIO_TOKENS_KEY`): genai-prices' usage names (`input_image_tokens`,
`cache_image_read_tokens`, `output_image_tokens`, and the same of video) to counts. Gemini
bills the images it draws at many times the text's price (`gemini-2.5-flash-image`: $30 a
million against $2.50), which its cost is priced at."""

USAGE_COST_KEY = "usage_cost"
"""Where an adapter keeps what the provider says a call cost, verbatim, in its namespace: a
dict of whichever of the usage's `cost` (OpenRouter: credits, which are US dollars),
`cost_details` (OpenRouter: the upstream's `upstream_inference_cost` and its input and
output parts), `is_byok` (OpenRouter: billed to the caller's own upstream key) and
`cost_in_usd_ticks` (xAI: an integer, 10^10 ticks to the dollar) it reports, and xAI's
`num_server_side_tools_used` where it is more than none (the tool calls billed in that total
beyond the tokens). OpenRouter's, given in full, is the cost its record is priced at, and so
is xAI's total where server-side tools were used (`allama._prices`)."""

_COST_FIELDS = ("cost", "cost_details", "is_byok", "cost_in_usd_ticks")

SERVER_TOOLS_FIELD = "num_server_side_tools_used"
"""xAI's count of the server-side tool calls (web and X searches, code execution...) a call
was billed for beyond its tokens, kept with its money fields (`USAGE_COST_KEY`)."""

WEB_SEARCH_PREVIEW_KEY = "web_search_preview"
"""Where the Responses adapter notes, in its namespace, that the response's tools include
OpenAI's `web_search_preview` (`True`): its searches cost by the model's kind (more on a
model that does not reason), not the `web_search` tool's price genai-prices has."""

# What a response may be billed for that genai-prices has no usage key for (the keys of
# `billed_extras` beside genai-prices' own): `allama._prices` prices them another way, or
# answers why it cannot.
FAST_MODE = "fast_mode_requests"
"""A call Anthropic served in fast mode (`usage.speed == "fast"`), at its fast-mode prices."""
INFERENCE_GEO_PREFIX = "inference_geo_"
"""A call Anthropic ran in one geography (`usage.inference_geo`, such as `us`: the key is
`inference_geo_us`), billed above the standard price on its newer models."""
PREVIEW_WEB_SEARCHES = "preview_web_searches"
"""OpenAI's searches by the `web_search_preview` tool (`WEB_SEARCH_PREVIEW_KEY`)."""
CODE_INTERPRETER_CALLS = "code_interpreter_calls"
"""OpenAI's code interpreter calls, whose container sessions are billed apart."""
IMAGE_GENERATION_CALLS = "image_generation_calls"
"""OpenAI's image generation tool calls, whose images are billed apart."""
CODE_EXECUTIONS = "code_executions"
"""Anthropic's runs of its code execution tool (each result block a `server_tool_use` got:
`code_execution_tool_result`, `bash_code_execution_tool_result`,
`text_editor_code_execution_tool_result`), billed by container time past a free quota."""
GROUNDED_SEARCHES = "grounded_searches"
"""Gemini's grounding with Google Search or Maps (its queries, at least one), billed past
a free quota."""
SAMPLING_PASSES = "sampling_passes"
"""How many sampling passes Anthropic's `usage.iterations` lists (billed at the message's
model), given wherever it lists them: a pass is billed at a model's long-context rates by
its own input, not the sum's, over a threshold only the model's prices say (`PASS_PREFIX`)."""
PASS_PREFIX = "pass:"
"""Before `<index>:<usage name>`: a genai-prices usage count (`input_tokens`, all the
input, cached or not; `output_tokens`; `cache_read_tokens`; `cache_write_tokens`;
`cache_write_1h_tokens`) of the sampling pass at `<index>` among those `SAMPLING_PASSES`
counts, a part of the usage's (given where it is more than none)."""
DECLINED_PASS_PREFIX = "declined_pass:"
"""Before `<index>:<usage name>:<model>`: a genai-prices usage count (`input_tokens`, all
the input, cached or not; `output_tokens`; `cache_read_tokens`; `cache_write_tokens`; the
one-hour and five-minute cache writes) of the attempt at `usage.iterations[index]` that
Anthropic's server-side fallback declined after it had output, billed at the rates of the
model that ran it (`<model>`), which is not the message's: priced apart, never summed into
the `Usage` (given where the count is more than none)."""
UNCOUNTED_DECLINED_PASSES = "uncounted_declined_passes"
"""How many declined attempts `usage.iterations` lists without the counts that say whether
they were billed, and for how much: their cost is unknown."""

_STANDARD_GEOS = frozenset({"global", "not_available"})
"""The `inference_geo` values billed at the standard price."""

STANDARD_SERVICE_TIERS = frozenset(
    {"default", "standard", "on_demand", "auto", "batch", "unspecified"}
)
"""The tiers billed at the standard price whoever names them (`batch`: a batch job's rows,
priced as such; Gemini's `unspecified`: its default, the standard tier; Groq's `on_demand`
and `auto`). A tier billed at it by one provider alone stays named (Groq's `flex`, which
OpenAI and Gemini bill at other prices): the price decides (`_prices`)."""


def service_tier_of(value: object) -> str | None:
    """A tier a response reports (`service_tier`), when it is not the standard one."""
    if isinstance(value, str) and value and value not in STANDARD_SERVICE_TIERS:
        return value
    return None


def served_tier(provider_data: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The service tier other than the standard one a response says served it: kept by
    its adapter (`SERVICE_TIER_KEY`), or in Anthropic's usage details."""
    for kept in provider_data.values():
        tier = kept.get(SERVICE_TIER_KEY)
        if isinstance(tier, str):
            return tier
    anthropic = provider_data.get("anthropic")
    details = anthropic.get("usage_details") if anthropic else None
    if isinstance(details, dict):
        return service_tier_of(details.get("service_tier"))
    return None


def money_fields(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The money fields of a usage as the wire gives it (`USAGE_COST_KEY`), verbatim;
    `None` when it has none."""
    if not usage:
        return None
    cost = {name: usage[name] for name in _COST_FIELDS if name in usage}
    tools = usage.get(SERVER_TOOLS_FIELD)
    if type(tools) is int and tools > 0:
        cost[SERVER_TOOLS_FIELD] = tools
    return cost or None


def reported_money(provider_data: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """What a response says it cost, as its adapter kept it (`USAGE_COST_KEY`)."""
    for kept in provider_data.values():
        money = kept.get(USAGE_COST_KEY)
        if isinstance(money, dict):
            return money
    return None


# Anthropic's billed usage beyond the token counts, as its adapter keeps it
# (`provider_data["anthropic"]["usage_details"]`), by genai-prices' usage keys.
_ANTHROPIC_CACHE_WRITES = (
    ("ephemeral_1h_input_tokens", "cache_write_1h_tokens"),
    ("ephemeral_5m_input_tokens", "cache_write_5m_tokens"),
)

_OTHER_MODEL_PASSES = frozenset({"advisor_message"})
"""The `usage.iterations` entries billed at another model's rates (the advisor tool's
sub-inferences, at the advisor's), which the top-level counts leave out too: neither summed
into the message's counts (Anthropic's adapter) nor priced among its passes."""

_FALLBACK_PASS = "fallback_message"
"""The `usage.iterations` entry of the attempt a server-side fallback served the message
with, in place of its `message` entry; each attempt declined before it is a `message`
entry naming its own model."""


def billed_passes(iterations: Any) -> list[Mapping[str, Any]] | None:
    """The sampling passes Anthropic's `usage.iterations` lists that are billed at the
    message's model (a compaction pass, a message pass, the passes of a server tool loop,
    the attempt a server-side fallback served with; not an attempt it declined, which ran
    another model); `None` where it lists none, or one without its input and output counts
    (then the top-level counts are all there is to go by). Read alike by the adapter, which
    sums them, and by the price, which needs those over the long-context threshold. A pass's
    `type` that is not a string is one allama does not know (a pass of the message's model,
    not a `TypeError`); a count written as a whole-number float (`20.0`, as a proxy may
    write one) is that count, and goes in the pass returned as an integer."""
    if not isinstance(iterations, list) or not iterations:
        return None
    if not all(isinstance(entry, dict) for entry in iterations):
        return None
    served = _served_by(iterations)
    passes: list[Mapping[str, Any]] = []
    for entry in iterations:
        kind = entry.get("type")
        if (isinstance(kind, str) and kind in _OTHER_MODEL_PASSES) or _declined(entry, served):
            continue
        counts = {key: _whole_count(entry.get(key)) for key in _PASS_COUNTS}
        if counts["input_tokens"] is None or counts["output_tokens"] is None:
            return None
        passes.append({**entry, **{k: v for k, v in counts.items() if v is not None}})
    return passes or None


def _whole_count(value: Any) -> int | None:
    """A pass's count: an integer, or a whole-number float that is not negative as its
    integer; `None` for anything else (a flag, a fraction, text)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    return value if type(value) is int else None


def _served_by(iterations: list[Any]) -> str | None:
    """The model of the attempt a server-side fallback served with (its `fallback_message`
    entry's); `None` where no fallback served."""
    for entry in reversed(iterations):
        if isinstance(entry, dict) and entry.get("type") == _FALLBACK_PASS:
            model = entry.get("model")
            return model if isinstance(model, str) and model else None
    return None


def _declined(entry: Mapping[str, Any], served: str | None) -> bool:
    """Whether `entry` is an attempt a server-side fallback declined: one naming a model
    other than the one that served (a compaction pass names none)."""
    model = entry.get("model")
    kind = entry.get("type")  # (one not a string: unknown, not another model's pass)
    return (
        served is not None
        and not (isinstance(kind, str) and kind in _OTHER_MODEL_PASSES)
        and isinstance(model, str)
        and model != served
    )


def _declined_passes(iterations: Any) -> dict[str, int]:
    """What the attempts a server-side fallback declined were billed, each at its own
    model's rates (`DECLINED_PASS_PREFIX`): one declined before any output is not billed;
    one without the counts that say so has no known cost (`UNCOUNTED_DECLINED_PASSES`)."""
    if not isinstance(iterations, list):
        return {}
    served = _served_by(iterations)
    found: dict[str, int] = {}
    uncounted = 0
    for index, entry in enumerate(iterations):
        if not isinstance(entry, dict) or not _declined(entry, served):
            continue
        output, uncached = entry.get("output_tokens"), entry.get("input_tokens")
        if type(output) is int and output == 0:
            continue  # declined before any output: not billed
        if type(output) is not int or type(uncached) is not int:
            uncounted += 1
            continue
        counted = _pass_counts(entry)
        split = entry.get("cache_creation")
        if isinstance(split, dict):
            for theirs, ours in _ANTHROPIC_CACHE_WRITES:
                count = split.get(theirs)
                counted[ours] = count if type(count) is int else 0
            if counted["cache_write_1h_tokens"] <= 0:  # five-minute ones: the plain price
                counted.pop("cache_write_5m_tokens")
        model = entry["model"]
        found.update(
            (f"{DECLINED_PASS_PREFIX}{index}:{name}:{model}", count)
            for name, count in counted.items()
            if count > 0
        )
    if uncounted:
        found[UNCOUNTED_DECLINED_PASSES] = uncounted
    return found


_MODALITY_TOKENS: Mapping[str, frozenset[str]] = {
    AUDIO_TOKENS_KEY: frozenset(
        {"input_audio_tokens", "cache_audio_read_tokens", "output_audio_tokens"}
    ),
    MEDIA_TOKENS_KEY: frozenset(
        {
            "input_image_tokens",
            "cache_image_read_tokens",
            "output_image_tokens",
            "input_video_tokens",
            "cache_video_read_tokens",
            "output_video_tokens",
        }
    ),
}
"""The genai-prices usage names each key of a usage's modality tokens may hold."""


def billed_extras(provider_data: Mapping[str, Mapping[str, Any]]) -> dict[str, int] | None:
    """What a response was billed for beyond its `Usage` (an `allama._prices.BILLED_EXTRAS`
    key, or one of those above, and its count): audio tokens (`AUDIO_TOKENS_KEY`, as
    Gemini's and the OpenAI dialect's adapters keep them), Gemini's image and video tokens
    (`MEDIA_TOKENS_KEY`), Anthropic's web searches, its one-hour cache writes (five-minute
    ones are the plain cache-write price, so they matter only beside one-hour ones), its
    fast mode, its inference geography, its code execution (`CODE_EXECUTIONS`, counted
    from the server blocks kept), its sampling passes over the long-context threshold
    (`SAMPLING_PASSES`) and the attempts its server-side fallback declined after they had
    output (`DECLINED_PASS_PREFIX`), the Responses API's web searches, file searches, code
    interpreter and image generation calls, and Gemini's grounding: each a charge its cost
    prices, or has no cost for, never one it counts free."""
    extras: dict[str, int] = {}
    for kept in provider_data.values():
        for key, names in _MODALITY_TOKENS.items():
            tokens = kept.get(key)
            if isinstance(tokens, dict):  # audio, image or video tokens, billed above text
                extras.update(
                    (name, count)
                    for name, count in tokens.items()
                    if name in names and type(count) is int and count > 0
                )
    responses = provider_data.get("openai_responses")
    if responses:
        extras.update(_tool_calls(responses.get("items"), responses.get(WEB_SEARCH_PREVIEW_KEY)))
    gemini = provider_data.get("gemini")
    grounded = _grounded(gemini.get("grounding_metadata")) if gemini else 0
    if grounded:
        extras[GROUNDED_SEARCHES] = grounded
    anthropic = provider_data.get("anthropic")
    runs = _code_executions(anthropic.get("server_blocks")) if anthropic else 0
    if runs:
        extras[CODE_EXECUTIONS] = runs
    details = anthropic.get("usage_details") if anthropic else None
    if not isinstance(details, dict):
        return extras or None
    if details.get("speed") == "fast":
        extras[FAST_MODE] = 1
    geo = details.get("inference_geo")
    if isinstance(geo, str) and geo and geo not in _STANDARD_GEOS:
        extras[INFERENCE_GEO_PREFIX + geo] = 1
    server = details.get("server_tool_use")
    searches = server.get("web_search_requests") if isinstance(server, dict) else None
    if type(searches) is int and searches > 0:
        extras["web_searches"] = searches
    cache = details.get("cache_creation")
    if isinstance(cache, dict):
        for theirs, ours in _ANTHROPIC_CACHE_WRITES:
            count = cache.get(theirs)
            if type(count) is int and count > 0:
                extras[ours] = count
        if "cache_write_1h_tokens" not in extras:
            extras.pop("cache_write_5m_tokens", None)
    iterations = details.get("iterations")
    if iterations is not None:
        extras.update(_long_context_passes(iterations))
        extras.update(_declined_passes(iterations))
    return extras or None


def _long_context_passes(iterations: Any) -> dict[str, int]:
    """What the price needs of the sampling passes Anthropic's `usage.iterations` lists: how
    many there are and each one's counts (`PASS_PREFIX`), as a pass is billed at the
    long-context rates by its own input, over a threshold the model's prices hold (not one
    fixed here: 100,000 on Claude Haiku 5.5, 200,000 on Sonnet 4.5). Nothing where it lists
    no passes its adapter summed (one without its counts: the usage is the top level's)."""
    listed = billed_passes(iterations)
    if listed is None:
        return {}
    found = {SAMPLING_PASSES: len(listed)}
    for index, entry in enumerate(listed):
        counted = _pass_counts(entry)
        split = entry.get("cache_creation")
        hour = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
        counted["cache_write_1h_tokens"] = hour if type(hour) is int else 0
        found.update(
            (f"{PASS_PREFIX}{index}:{name}", count) for name, count in counted.items() if count > 0
        )
    return found


_PASS_COUNTS: Mapping[str, str] = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
}
"""A pass's counts (Anthropic's names) by genai-prices' usage names; its `input_tokens`
leaves out the cached input, which genai-prices' (and the threshold's) includes."""


def _pass_counts(entry: Mapping[str, Any]) -> dict[str, int]:
    """A `usage.iterations` entry's counts by genai-prices' names (0 where one is missing),
    its input all of it, as genai-prices counts it: Anthropic's leaves the cached out."""
    counts = {ours: entry.get(theirs) for theirs, ours in _PASS_COUNTS.items()}
    counted = {key: count if type(count) is int else 0 for key, count in counts.items()}
    counted["input_tokens"] += counted["cache_read_tokens"] + counted["cache_write_tokens"]
    return counted


def _tool_calls(items: Any, preview: Any) -> dict[str, int]:
    """The Responses API's billed tool calls among its output items (`provider_data[...]
    ["items"]`): web searches (a `web_search_call` whose action is a search, or that has
    none; opening a page or finding in it is not billed), as `web_searches`, or
    `PREVIEW_WEB_SEARCHES` beside the `web_search_preview` tool; file searches
    (`storage_searches`, genai-prices' name); code interpreter calls; image generation
    calls (each an image billed at the image model's prices, which the usage leaves out)."""
    searches = files = code = images = 0
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "web_search_call":
            action = item.get("action")
            if not isinstance(action, dict) or action.get("type") in (None, "search"):
                searches += 1
        elif kind == "file_search_call":
            files += 1
        elif kind == "code_interpreter_call":
            code += 1
        elif kind == "image_generation_call":
            images += 1
    counts = {
        PREVIEW_WEB_SEARCHES if preview is True else "web_searches": searches,
        "storage_searches": files,
        CODE_INTERPRETER_CALLS: code,
        IMAGE_GENERATION_CALLS: images,
    }
    return {name: count for name, count in counts.items() if count}


def _code_executions(blocks: Any) -> int:
    """How many code execution results Anthropic's server blocks (`provider_data[...]
    ["server_blocks"]`) hold: every tool of the kind (`code_execution`, and its `bash_` and
    `text_editor_` forms) names its result block `..._code_execution_tool_result`. Its usage
    counts none of them, so the blocks are what says the container ran."""
    return sum(
        1
        for block in (blocks if isinstance(blocks, list) else ())
        if isinstance(block, dict)
        and isinstance(kind := block.get("type"), str)
        and kind.endswith("code_execution_tool_result")
    )


def _grounded(grounding: Any) -> int:
    """How many Google Search queries Gemini's grounding metadata says it ran (web and
    image), at least one where it says it grounded on the web or on Maps without them;
    none for other grounding (retrieval from a store of the caller's)."""
    if not isinstance(grounding, dict):
        return 0
    queries = sum(
        len(found)
        for found in (grounding.get("webSearchQueries"), grounding.get("imageSearchQueries"))
        if isinstance(found, list)
    )
    if queries:
        return queries
    chunks = grounding.get("groundingChunks")
    grounded = any(
        isinstance(chunk, dict) and ("web" in chunk or "maps" in chunk or "image" in chunk)
        for chunk in (chunks if isinstance(chunks, list) else ())
    )
    return 1 if grounded else 0


class ChatResponse(Data):
    """The content blocks in order, why it finished, what it cost, and what fell short.

    `provider_data` keeps what only one provider has, by namespace (`{"openai": {...}}`).
    `logprobs` holds the output text's tokens with their log-probabilities when the request
    asked for them and the provider reported them (`None` otherwise), in order: their
    bytes spell the text of the response.
    """

    content: tuple[ContentBlock, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    warnings: tuple[Warning, ...] = ()
    provider_data: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    model: str | None = None
    provider: str | None = None
    id: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    batch_job: str | None = None
    """The provider batch job the response came from (priced at batch prices), if any."""

    def __init__(self, content: Any = None, /, **data: Any) -> None:
        if content is not None:
            data["content"] = content
        super().__init__(**data)

    def __repr__(self) -> str:
        kinds = kinds_listed([block.type for block in self.content])
        return (
            f"ChatResponse(provider={self.provider!r}, model={self.model!r}, content=[{kinds}], "
            f"finish_reason={self.finish_reason!r}, usage={self.usage!r}, "
            f"warnings={len(self.warnings)})"
        )

    def text(self) -> str | None:
        """The text blocks joined; `None` when there are none."""
        return text_of(self.content)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(block for block in self.content if isinstance(block, ToolCall))

    def first_refusal(self) -> str | None:
        """The text of the first refusal block, when the model wrote one."""
        for block in self.content:
            if isinstance(block, Refusal):
                return block.text
        return None

    def reasoning(self) -> str | None:
        texts = [block.text for block in self.content if isinstance(block, Reasoning)]
        return "".join(texts) if texts else None

    def to_assistant_message(self) -> AssistantMessage:
        """This response as the assistant turn of a follow-up request, with what its
        provider needs back, in its namespace: to continue a paused turn (`RESUME_KEY`),
        OpenRouter's reasoning details (`REASONING_DETAILS_KEY`) and an audio answer, which
        goes back by its id (`AUDIO_KEY`)."""
        kept: dict[str, dict[str, JsonValue]] = {}
        for namespace, entries in self.provider_data.items():
            back = {key: entries[key] for key in _SENT_BACK if key in entries}
            if back:
                kept[namespace] = back
        return AssistantMessage(content=self.content, provider_data=kept)

    def provider_value(self, namespace: str, key: str) -> JsonValue | None:
        return self.provider_data.get(namespace, {}).get(key)

    def with_provider_data(self, namespace: str, key: str, value: JsonValue) -> ChatResponse:
        entries = {**self.provider_data.get(namespace, {}), key: value}
        return self.model_copy(update={"provider_data": {**self.provider_data, namespace: entries}})

    def decline_explanation(self) -> str | None:
        """The provider's explanation of a refusal, from any namespace but allama's own."""
        for namespace, entries in self.provider_data.items():
            if namespace == ALLAMA_NAMESPACE:
                continue
            value = entries.get(DECLINE_EXPLANATION_KEY)
            if isinstance(value, str) and value.strip():
                return value
        return None
