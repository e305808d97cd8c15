"""A Gemini `GenerateContentResponse` to a `ChatResponse`, or to the `allama.Error` it stands for.

The body is read once by pydantic-core's JSON parser into plain data, so that what allama
has no type for can be kept verbatim. What is neither read nor kept below (`safetyRatings`,
`avgLogprobs`, `tokenCount`, `promptFeedback.safetyRatings`, fields added later) is
ignored. Of the per-modality usage details (`promptTokensDetails` and
`toolUsePromptTokensDetails` summed, `cacheTokensDetails`, `candidatesTokensDetails`), the
audio, image and video tokens are kept (billed at their own prices), by genai-prices'
names, as its own Gemini usage extractor reads them (a document's tokens as an image's):
audio under `provider_data["gemini"]["audio_tokens"]` (`input_audio_tokens`,
`cache_audio_read_tokens`, `output_audio_tokens`), images and video under
`provider_data["gemini"]["media_tokens"]` (`input_image_tokens`, `cache_image_read_tokens`,
`output_image_tokens`, and the same of video), each a part of the count `Usage` has for its
direction. A `serviceTier` other than the standard one (`flex`, `priority`: billed at other
prices) is kept under `SERVICE_TIER_KEY`.

Candidates. The candidate with `index` 0 (an absent index is 0) is the response; a body
without one takes the first listed. Further candidates are kept verbatim, in order, under
`provider_data["gemini"]["candidates"]` (their metadata stays inside them), with a warning
(`unread_candidates`, code `FIRST_CHOICE_ONLY`, as the OpenAI family's on `n` above 1) that
says how many came: their tokens are in the usage, paid for, and are not to vanish without
a word.

Candidate metadata. Three fields of the response candidate are kept verbatim, each under its
own key of `provider_data["gemini"]`:

- `citationMetadata` (`{"citationSources": [{startIndex, endIndex, uri, license, ...}]}`;
  Vertex spells the list `citations`) under `citation_metadata`: the sources the output
  recites, their indexes into the candidate's text;
- `groundingMetadata` (what the Google Search, retrieval and Maps tools found:
  `webSearchQueries`, `groundingChunks`, `groundingSupports`, `searchEntryPoint`,
  `retrievalMetadata`, ...) under `grounding_metadata`;
- `urlContextMetadata` (`urlMetadata`: each URL the URL context tool fetched, and how) under
  `url_context_metadata`.

A value that says nothing (null, an empty object, list or string, or an object whose every
field is one of those, such as `{"citations": []}`) is not kept.

Parts of the response candidate, in order:

- `text` parts become text; consecutive ones join into one `TextPart`.
- `thought: true` text parts become reasoning (never text); consecutive ones join into one
  `Reasoning` until one carries a `thoughtSignature`, which seals that block.
- `functionCall {id?, name, args}` becomes a `ToolCall`: its `id`, or `call_<n>` when Gemini
  gave none (`n` counting the candidate's calls from 0); `args` as compact JSON text, key
  order, non-ASCII characters and numbers as written kept.
- A `functionCall` whose arguments stream (Vertex AI's `streamFunctionCallArguments`) comes
  as `{name, willContinue: true}` (its part carrying the signature), then parts of
  `{partialArgs: [{jsonPath, stringValue | numberValue | boolValue | nullValue}], willContinue}`
  without a name, each value put at its path (`$.recipe.steps[0]`; a string's pieces
  joined), until one whose `willContinue` is not true (often a bare `functionCall: {}`), a
  part of another kind, or the end: it becomes one `ToolCall` as a whole call does.
- Any other part (`inlineData`, `fileData`, `executableCode`, `codeExecutionResult`, kinds
  added later) is kept verbatim, in order, under `provider_data["gemini"]["parts"]`, and
  ends the text or reasoning block before it. The code the model ran and its result
  (`executableCode`, `codeExecutionResult`: `SENT_BACK_PARTS`) are also a block in their
  place, `Reasoning(text="", encrypted_content=<the part as compact JSON>)`, which
  `to_assistant_message()` carries and the encoder sends back as the part it was, its
  signature on it: the next turn holds the code the model's words are about.

Thought signatures. Gemini checks `thoughtSignature` (opaque base64 text) on the next turn,
so it is kept byte for byte. On a thought part it is the signature of that `Reasoning`. On
any other part it becomes a block of its own, `Reasoning(text="", signature=<sig>)`, placed
immediately BEFORE the block made from that part (and the text after it starts a new text
block): the encoder attaches such a text-less signed reasoning block to the part made from
the block that follows it. A signature on a part kept verbatim stays inside that part (and
goes back with it, for the parts sent back). A part with nothing but a signature reads as an
empty text (or thought) part that carries it. An empty text part without a signature makes
no block.

Finish. `STOP` is `tool_calls` when the candidate holds function calls, else `stop`;
`MAX_TOKENS` is `length`; the safety, blocklist, recitation, language and image-safety
reasons are `content_filter`, with the raw reason under `finish_reason` and `finishMessage`
(when given) as the decline explanation; every other reason (`MALFORMED_FUNCTION_CALL`,
`OTHER`, reasons added later) is kept as the lower-cased raw value, with `finishMessage`
under `finish_message`. `FINISH_REASON_UNSPECIFIED` (or none) is `None`; the boilerplate
`finishMessage` of a normal stop is not kept. A prompt Gemini blocked (no candidate,
`promptFeedback.blockReason`) is an empty response finished by `content_filter`, the reason
under `block_reason` and `blockReasonMessage` (Vertex), or a sentence naming the reason, as
the decline explanation. A response of no candidate whose prompt was not blocked is an empty
response of no finish reason (`None`, as Gemini gave none), its usage kept: a stream of no
candidate that ends with a usage reads the same (`_stream`).

Log-probabilities. The response candidate's `logprobsResult` (present when the request set
`responseLogprobs`) becomes `ChatResponse.logprobs`: `chosenCandidates[i]` (`token`,
`logProbability`) is the i-th output token, and `topCandidates[i].candidates` its most likely
alternatives, as sent (the chosen token may or may not be among them). Gemini gives no token
bytes (`token_bytes` is `None`), and omits a `logProbability` that is zero (proto3), read as
0.0. A result that does not have this shape (a list of another length, a token that is not a
string, a log-probability that is not a number at most 0) is dropped whole: the response has
no `logprobs`, and no token of it is half read. The stream decoder does not assemble them.

Usage. Gemini omits a count that is zero, so within a reported `usageMetadata`:
`input_tokens = promptTokenCount + toolUsePromptTokenCount` and `output_tokens =
candidatesTokenCount + thoughtsTokenCount`, an absent addend counting 0 when the other one
is reported. When neither addend of a sum is reported, that sum is worked out from
`totalTokenCount` (which is the four counts added) when the other sum is known, and is
`None` otherwise: allama never invents a count. `reasoning_tokens` is `thoughtsTokenCount`
and `cache_read_tokens` is `cachedContentTokenCount`, each `None` when absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any, Protocol

from pydantic import JsonValue

from allama._degradations import FIRST_CHOICE_ONLY
from allama.adapters._json_text import Numbers, arguments_text, json_text, written
from allama.adapters._logprobs import read_logprob
from allama.adapters._not_a_response import not_a_response
from allama.adapters._surrogates import lone_surrogates, read_storable_json
from allama.adapters.gemini._errors import error_from_payload, error_from_response
from allama.errors import Error, with_reported_usage
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    SERVICE_TIER_KEY,
    ChatResponse,
    ContentBlock,
    FinishReason,
    Reasoning,
    RequestField,
    StreamBlockType,
    TextPart,
    TokenAlternative,
    TokenLogprob,
    ToolCall,
    Usage,
    Warning,
)
from allama.types._response import (
    MEDIA_TOKENS_KEY,
    PROVISIONED_THROUGHPUT,
    billed_extras,
    service_tier_of,
)

__all__ = [
    "BLOCK_REASON_KEY",
    "CANDIDATES_KEY",
    "CITATION_METADATA_KEY",
    "FINISH_MESSAGE_KEY",
    "FINISH_REASON_KEY",
    "GROUNDING_METADATA_KEY",
    "NAMESPACE",
    "PARTS_KEY",
    "SENT_BACK_PARTS",
    "URL_CONTEXT_METADATA_KEY",
    "BlockSink",
    "Chunk",
    "Layout",
    "Unreadable",
    "billed_chunk",
    "block_data",
    "candidate_index",
    "decode_body",
    "decode_payload",
    "decode_response",
    "finish_data",
    "finish_reason_of",
    "is_error_object",
    "json_text",
    "logprobs_of",
    "metadata_data",
    "read_chunk",
    "says_finish",
    "says_something",
    "unread_candidates",
    "usage_of",
    "with_billed_usage",
    "modality_tokens_of",
]

NAMESPACE = "gemini"
"""The `provider_data` namespace of what only Gemini has."""
CANDIDATES_KEY = "candidates"
"""Candidates beyond the response one (`candidateCount` > 1), verbatim, in order."""
PARTS_KEY = "parts"
"""Parts allama has no type for (`inlineData`, `executableCode`, ...), verbatim, in order."""
SENT_BACK_PARTS = frozenset({"executableCode", "codeExecutionResult"})
"""The parts kept verbatim that the next turn needs back in their place (the code the model
ran, and its result): each is a text-less `Reasoning` block too, the part its
`encrypted_content`."""
FINISH_REASON_KEY = "finish_reason"
"""The raw `finishReason` of a content filter (`SAFETY`, `RECITATION`, ...)."""
FINISH_MESSAGE_KEY = "finish_message"
"""The `finishMessage` of a finish reason allama has no name for."""
BLOCK_REASON_KEY = "block_reason"
"""The `promptFeedback.blockReason` of a blocked prompt (`SAFETY`, `MODEL_ARMOR`, ...)."""
CITATION_METADATA_KEY = "citation_metadata"
"""The response candidate's `citationMetadata`, verbatim (Vertex names its list `citations`)."""
GROUNDING_METADATA_KEY = "grounding_metadata"
"""The response candidate's `groundingMetadata` (the grounding tools' output), verbatim."""
URL_CONTEXT_METADATA_KEY = "url_context_metadata"
"""The response candidate's `urlContextMetadata` (`urlMetadata`), verbatim."""
AUDIO_TOKENS_KEY = "audio_tokens"
"""The usage's audio tokens, by genai-prices' usage names (audio input is billed above
text)."""


def unread_candidates(count: int, provider: str | None, *, streamed: bool = False) -> Warning:
    """The warning on an answer of `count` candidates, of which only the first is read: the
    OpenAI family's words on `n` above 1 (`unread_choices`), in Gemini's terms. A body keeps
    the others verbatim; a stream (`streamed`) keeps nothing of them."""
    kept = (
        "the others are not kept: a stream carries only the first"
        if streamed
        else f"the others are kept verbatim in `provider_data`, under `{CANDIDATES_KEY}`"
    )
    warning = Warning.unsupported(
        RequestField.OPTIONS,
        f"the provider answered {count} candidates: only the first is read ({kept})",
        code=FIRST_CHOICE_ONLY,
    )
    return warning if provider is None else warning.with_provider(provider)


_INPUT = {
    "AUDIO": (AUDIO_TOKENS_KEY, "input_audio_tokens"),
    "IMAGE": (MEDIA_TOKENS_KEY, "input_image_tokens"),
    "DOCUMENT": (MEDIA_TOKENS_KEY, "input_image_tokens"),
    "VIDEO": (MEDIA_TOKENS_KEY, "input_video_tokens"),
}
_MODALITY_DETAILS: tuple[tuple[str, Mapping[str, tuple[str, str]]], ...] = (
    ("promptTokensDetails", _INPUT),
    ("toolUsePromptTokensDetails", _INPUT),  # a tool's own prompt, beside the request's
    (
        "cacheTokensDetails",
        {
            "AUDIO": (AUDIO_TOKENS_KEY, "cache_audio_read_tokens"),
            "IMAGE": (MEDIA_TOKENS_KEY, "cache_image_read_tokens"),
            "DOCUMENT": (MEDIA_TOKENS_KEY, "cache_image_read_tokens"),
            "VIDEO": (MEDIA_TOKENS_KEY, "cache_video_read_tokens"),
        },
    ),
    (
        "candidatesTokensDetails",
        {
            "AUDIO": (AUDIO_TOKENS_KEY, "output_audio_tokens"),
            "IMAGE": (MEDIA_TOKENS_KEY, "output_image_tokens"),
            "DOCUMENT": (MEDIA_TOKENS_KEY, "output_image_tokens"),
            "VIDEO": (MEDIA_TOKENS_KEY, "output_video_tokens"),
        },
    ),
)
"""Where each modality's tokens of each per-modality field go: the provider-data key and
genai-prices' usage name, as genai-prices' own Gemini usage extractor maps them."""

_CONTENT_FILTER = frozenset(
    {
        "SAFETY",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "RECITATION",
        "LANGUAGE",  # the answer was withheld: a language the model may not answer in
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",  # Vertex: the response was blocked by Model Armor
    }
)
_UNSPECIFIED = "FINISH_REASON_UNSPECIFIED"
# Top-level fields of which a successful body has at least one.
_RESPONSE_FIELDS = ("candidates", "promptFeedback", "usageMetadata", "modelVersion", "responseId")
_SIGNATURE_ONLY = frozenset({"thought", "thoughtSignature"})


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def finish_reason_of(raw: Any, *, tool_calls: bool = False) -> FinishReason | None:
    """The finish reason by its allama name; others kept as sent, lower-cased.
    `tool_calls` says whether the candidate holds function calls (Gemini says `STOP`)."""
    if not isinstance(raw, str) or not raw or raw == _UNSPECIFIED:
        return None
    if raw == "STOP":
        return FinishReason.TOOL_CALLS if tool_calls else FinishReason.STOP
    if raw == "MAX_TOKENS":
        return FinishReason.LENGTH
    if raw in _CONTENT_FILTER:
        return FinishReason.CONTENT_FILTER
    return FinishReason(raw.lower())


def finish_data(raw: Any, message: Any) -> dict[str, JsonValue]:
    """What a candidate says about its finish beyond the reason: for a content filter the
    raw reason and the explanation, for a reason allama has no name for its message."""
    if not isinstance(raw, str) or raw in ("", _UNSPECIFIED, "STOP", "MAX_TOKENS"):
        return {}
    explanation = message if isinstance(message, str) and message.strip() else None
    if raw in _CONTENT_FILTER:
        out: dict[str, JsonValue] = {FINISH_REASON_KEY: raw}
        if explanation is not None:
            out[DECLINE_EXPLANATION_KEY] = explanation
        return out
    return {} if explanation is None else {FINISH_MESSAGE_KEY: explanation}


def block_data(feedback: Any) -> dict[str, JsonValue] | None:
    """What `promptFeedback` says about a blocked prompt; `None` when it was not blocked."""
    if not isinstance(feedback, dict):
        return None
    reason = _text(feedback.get("blockReason"))
    if reason is None:
        return None
    message = feedback.get("blockReasonMessage")
    explanation = (
        message
        if isinstance(message, str) and message.strip()
        else f"Gemini blocked the prompt (block reason {reason})."
    )
    return {BLOCK_REASON_KEY: reason, DECLINE_EXPLANATION_KEY: explanation}


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


def says_something(value: Any) -> bool:
    """Whether a metadata value says anything: it is not null, not an empty object, list or
    string, and not an object whose every field is one of those (`{"citations": []}`)."""
    if isinstance(value, dict):
        return not all(_empty(field) for field in value.values())
    return not _empty(value)


def metadata_data(citations: Any, grounding: Any, url_context: Any) -> dict[str, JsonValue]:
    """The response candidate's metadata by its `provider_data` keys, each one that says
    something (see `says_something`), verbatim."""
    out: dict[str, JsonValue] = {}
    for key, value in (
        (CITATION_METADATA_KEY, citations),
        (GROUNDING_METADATA_KEY, grounding),
        (URL_CONTEXT_METADATA_KEY, url_context),
    ):
        if says_something(value):
            out[key] = value
    return out


def _count(value: Any) -> int | None:
    """A token count: an integer, or a whole-number float (`20.0`, as a proxy may write one,
    and as Chat Completions reads it) as its integer; a flag, a fraction, a negative float
    or anything else is none (not reported)."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _sum(a: int | None, b: int | None) -> int | None:
    """Two counts added, an absent one (omitted because zero) as 0; `None` if both are."""
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


def usage_of(usage: Mapping[str, Any]) -> Usage:
    """Token counts by allama's names (see the module docstring for the omitted zeros)."""
    thoughts = _count(usage.get("thoughtsTokenCount"))
    prompt = _count(usage.get("promptTokenCount"))
    inputs = _sum(prompt, _count(usage.get("toolUsePromptTokenCount")))
    outputs = _sum(_count(usage.get("candidatesTokenCount")), thoughts)
    total = _count(usage.get("totalTokenCount"))
    if total is not None:
        if inputs is None and outputs is not None and total >= outputs:
            inputs = total - outputs
        elif outputs is None and inputs is not None and total >= inputs:
            outputs = total - inputs
    return Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        reasoning_tokens=thoughts,
        cache_read_tokens=_count(usage.get("cachedContentTokenCount")),
    )


def modality_tokens_of(usage: Mapping[str, Any]) -> dict[str, dict[str, JsonValue]]:
    """The usage's audio (`AUDIO_TOKENS_KEY`), image and video (`MEDIA_TOKENS_KEY`) tokens by
    genai-prices' names, from its per-modality details, by the key each is kept under; a
    key only where it reports some."""
    counts: dict[tuple[str, str], int] = {}
    for field, names in _MODALITY_DETAILS:
        details = usage.get(field)
        for entry in details if isinstance(details, list) else ():
            if not isinstance(entry, dict):
                continue
            modality = entry.get("modality")
            where = names.get(modality) if isinstance(modality, str) else None
            count = _count(entry.get("tokenCount"))
            if where is not None and count is not None and count > 0:
                counts[where] = counts.get(where, 0) + count
    found: dict[str, dict[str, JsonValue]] = {}
    for (key, name), count in counts.items():
        found.setdefault(key, {})[name] = count
    return found


def _logprob(value: Any) -> float | None:
    """A `logProbability`: absent is 0.0 (proto3 omits a zero); noise above 0 is 0, as every
    dialect reads it (`read_logprob`); `None` when not one."""
    return 0.0 if value is None else read_logprob(value)


def _token(raw: Any) -> tuple[str, float] | None:
    """A `LogprobsResult.Candidate` as its token and log-probability; `None` when malformed."""
    if not isinstance(raw, dict):
        return None
    token = raw.get("token")
    logprob = _logprob(raw.get("logProbability"))
    if not isinstance(token, str) or logprob is None:
        return None
    return token, logprob


def logprobs_of(result: Any) -> tuple[TokenLogprob, ...] | None:
    """The tokens of a `logprobsResult`, or `None` when it does not have that shape (see the
    module docstring)."""
    if not isinstance(result, dict):
        return None
    chosen = result.get("chosenCandidates")
    if not isinstance(chosen, list) or not chosen:
        return None
    tops = result.get("topCandidates")
    if tops is not None and (not isinstance(tops, list) or len(tops) != len(chosen)):
        return None
    tokens: list[TokenLogprob] = []
    for index, raw in enumerate(chosen):
        pair = _token(raw)
        if pair is None:
            return None
        top: list[TokenAlternative] = []
        if tops is not None:
            step = tops[index]
            if not isinstance(step, dict):
                return None
            candidates = step.get("candidates")
            if candidates is None:
                candidates = []
            elif not isinstance(candidates, list):
                return None
            for item in candidates:
                alternative = _token(item)
                if alternative is None:
                    return None
                top.append(
                    TokenAlternative.model_construct(
                        token=alternative[0], logprob=alternative[1], token_bytes=None
                    )
                )
        tokens.append(
            TokenLogprob.model_construct(
                token=pair[0], logprob=pair[1], token_bytes=None, top=tuple(top)
            )
        )
    return tuple(tokens)


class Unreadable(ValueError):
    """A part of a response does not fit the `GenerateContentResponse` shape; says which."""


class Chunk:
    """One `GenerateContentResponse` (a whole body or one chunk of a stream), read into
    plain data: the response candidate's parts, finish and metadata, the other candidates,
    the usage, a blocked prompt."""

    __slots__ = (
        "blocked",
        "citations",
        "finish",
        "finish_message",
        "grounding",
        "has_candidate",
        "id",
        "logprobs",
        "model",
        "others",
        "parts",
        "tier",
        "tier_said",
        "tokens",
        "url_context",
        "usage",
    )

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.has_candidate = False
        self.parts: list[Any] = []
        self.finish: str | None = None
        self.finish_message: Any = None
        self.others: list[JsonValue] = []
        self.usage: Usage | None = None
        self.tokens: dict[str, dict[str, JsonValue]] = {}
        """The usage's audio, image and video tokens, by their provider-data keys
        (`modality_tokens_of`)."""
        self.tier: str | None = None
        """The service tier the usage says served the call, when not the standard one
        (`flex`, `priority`: billed at other prices)."""
        self.tier_said = False
        """Whether the usage says what it was billed at (`None` above is then the standard
        tier, not silence)."""
        self.blocked: dict[str, JsonValue] | None = None
        self.logprobs: Any = None
        """The response candidate's `logprobsResult`, unread (`None` when absent)."""
        self.citations: Any = None
        """The response candidate's `citationMetadata`, unread (`None` when absent)."""
        self.grounding: Any = None
        """The response candidate's `groundingMetadata`, unread (`None` when absent)."""
        self.url_context: Any = None
        """The response candidate's `urlContextMetadata`, unread (`None` when absent)."""


def candidate_index(candidate: Mapping[str, Any]) -> int:
    """A candidate's `index` (an absent one is 0)."""
    index = _count(candidate.get("index"))
    return 0 if index is None else index


def read_chunk(payload: Mapping[str, Any], *, first_listed: bool = True) -> Chunk:
    """A response object, already parsed, as a `Chunk`. The response candidate is the one
    with index 0, or (with `first_listed`, for a whole body) the first listed when none has.
    Raises `Unreadable` when it does not fit the response shape."""
    chunk = Chunk()
    chunk.id = _text(payload.get("responseId"))
    chunk.model = _text(payload.get("modelVersion"))
    candidates = payload.get("candidates")
    if candidates is None:
        candidates = []
    elif not isinstance(candidates, list):
        raise Unreadable("its `candidates` is not a list")
    chosen: dict[str, Any] | None = None
    rest: list[dict[str, Any]] = []
    for candidate in candidates:
        if not isinstance(candidate, dict):
            raise Unreadable("a candidate is not an object")
        if chosen is None and candidate_index(candidate) == 0:
            chosen = candidate
        else:
            rest.append(candidate)
    if chosen is None and first_listed and rest:
        chosen = rest.pop(0)
    chunk.others.extend(rest)
    if chosen is not None:
        chunk.has_candidate = True
        content = chosen.get("content")
        if content is not None and not isinstance(content, dict):
            raise Unreadable("a candidate's `content` is not an object")
        parts = (content or {}).get("parts")
        if parts is not None and not isinstance(parts, list):
            raise Unreadable("a candidate's `parts` is not a list")
        chunk.parts = parts or []
        chunk.finish = _text(chosen.get("finishReason"))
        chunk.finish_message = chosen.get("finishMessage")
        chunk.logprobs = chosen.get("logprobsResult")
        chunk.citations = chosen.get("citationMetadata")
        chunk.grounding = chosen.get("groundingMetadata")
        chunk.url_context = chosen.get("urlContextMetadata")
    else:
        chunk.blocked = block_data(payload.get("promptFeedback"))
    return _read_usage(chunk, payload)


def _read_usage(chunk: Chunk, payload: Mapping[str, Any]) -> Chunk:
    """`chunk` with the `usageMetadata` of `payload` read in (counts, modality tokens, tier)."""
    usage = payload.get("usageMetadata")
    if isinstance(usage, dict):
        chunk.usage = usage_of(usage)
        chunk.tokens = modality_tokens_of(usage)
        chunk.tier = served_tier(usage)
        chunk.tier_said = says_tier(usage)
    return chunk


def billed_chunk(payload: Mapping[str, Any]) -> Chunk:
    """Only what a response object says was billed (its model and usage): read from one that
    does not fit the response shape, whose tokens were paid for all the same."""
    chunk = Chunk()
    chunk.model = _text(payload.get("modelVersion"))
    return _read_usage(chunk, payload)


def says_finish(payload: Mapping[str, Any]) -> bool:
    """Whether a response object ends the answer (its response candidate has a finish
    reason, or its prompt was blocked), read as far as its shape allows: the usage of a
    stream chunk that does is the whole call's."""
    candidates = payload.get("candidates")
    for candidate in candidates if isinstance(candidates, list) else ():
        if isinstance(candidate, dict) and candidate_index(candidate) == 0:
            return _text(candidate.get("finishReason")) is not None
    return block_data(payload.get("promptFeedback")) is not None


def served_tier(usage: Mapping[str, Any]) -> str | None:
    """The tier a call was billed at when it is not the standard one: Vertex AI's
    `usageMetadata.trafficType` (priority, flex, provisioned throughput; a kind not known
    here as `traffic type <its name>`, which has no price, whatever that name: `STANDARD`
    is no name Vertex AI gives its standard traffic), or the Developer API's
    `serviceTier`, in lower case (the request's own spelling: `flex`, `priority`)."""
    traffic = usage.get("trafficType")
    if isinstance(traffic, str) and traffic.strip():
        named = traffic.strip().upper()
        if named not in _STANDARD_TRAFFIC:
            return _TRAFFIC_TIERS.get(named) or f"traffic type {named[:40]}"
    elif traffic is not None and traffic != "":
        # The enum's number, or another shape: a kind of traffic not known here.
        return f"traffic type {str(traffic)[:40]}"
    tier = usage.get("serviceTier")
    return service_tier_of(tier.lower()) if isinstance(tier, str) else None


def says_tier(usage: Mapping[str, Any]) -> bool:
    """Whether the usage says what it was billed at (a stream's later usage that says the
    standard tier takes back an earlier other one)."""
    return "trafficType" in usage or "serviceTier" in usage


_STANDARD_TRAFFIC = frozenset({"ON_DEMAND", "TRAFFIC_TYPE_UNSPECIFIED"})
_TRAFFIC_TIERS = {
    "ON_DEMAND_PRIORITY": "priority",
    "ON_DEMAND_FLEX": "flex",
    "PROVISIONED_THROUGHPUT": PROVISIONED_THROUGHPUT,
}


class BlockSink(Protocol):
    """What a `Layout` builds: blocks opened, filled and closed one at a time."""

    def start(
        self, block_type: StreamBlockType, *, id: str | None = None, name: str | None = None
    ) -> None: ...

    def text(self, text: str) -> None: ...

    def signature(self, signature: str) -> None: ...

    def arguments(self, arguments: str) -> None: ...

    def encrypted(self, content: str) -> None: ...

    def stop(self) -> None: ...


class _Streamed:
    """A function call whose arguments come in pieces (`partialArgs`), put together."""

    __slots__ = ("args", "id", "name", "signature")

    def __init__(self, call_id: str, name: str, signature: str | None, args: Any) -> None:
        self.id = call_id
        self.name = name
        self.signature = signature
        self.args: dict[str, Any] = dict(args) if isinstance(args, dict) else {}


class Layout:
    """Where each part of the response candidate goes, one part at a time: the rule the body
    decoder and the stream decoder share, so that both give the same blocks.

    `calls` counts the function calls placed; `others` holds the parts kept verbatim. A
    function call whose arguments stream (`partialArgs`) is held until its last piece, or the
    next part, or `stop()`, and then placed whole. `numbers` is the text the parts placed
    next were read from (a body's, a stream chunk's), whose numbers a call's arguments keep
    as written (a float keeps 17 digits); without it they are written as read.
    """

    __slots__ = ("_open", "_pending", "_sink", "_streamed", "calls", "numbers", "others")

    def __init__(self, sink: BlockSink) -> None:
        self._sink = sink
        self._open: StreamBlockType | None = None
        self._pending: _Streamed | None = None
        self._streamed = False
        """Whether a call's arguments streamed: a bare `functionCall: {}` then ends one."""
        self.calls = 0
        self.others: list[JsonValue] = []
        self.numbers: Numbers | None = None

    def place(self, part: Any) -> None:
        """Place one part; raises `Unreadable` when it does not fit the part shape."""
        if not isinstance(part, dict):
            raise Unreadable("a part is not an object")
        raw_signature = part.get("thoughtSignature")
        signature = raw_signature if isinstance(raw_signature, str) and raw_signature else None
        call = part.get("functionCall")
        if call is not None:
            self._call(call, signature)
            return
        self._end_call()
        text = part.get("text")
        if text is None and signature is not None and part.keys() <= _SIGNATURE_ONLY:
            text = ""
        if text is None:
            self._close()
            self.others.append(part)
            if part.keys() & SENT_BACK_PARTS:
                self._sent_back(part)
            return
        if not isinstance(text, str):
            raise Unreadable("a part's `text` is not a string")
        if part.get("thought") is True:
            self._thought(text, signature)
        else:
            self._text(text, signature)

    def stop(self) -> None:
        """Place a call still streaming its arguments, as far as they came, and close the
        open block, if one is open."""
        self._end_call()
        self._close()

    def _close(self) -> None:
        if self._open is not None:
            self._sink.stop()
            self._open = None

    def _start(
        self, block_type: StreamBlockType, *, id: str | None = None, name: str | None = None
    ) -> None:
        self._close()
        self._sink.start(block_type, id=id, name=name)
        self._open = block_type

    def _sent_back(self, part: dict[str, Any]) -> None:
        """A part the next turn needs back as it came (code the model ran, and its result,
        with the signature on them): a text-less reasoning block of its own whose encrypted
        content is the part, whole, as compact JSON."""
        self._start(StreamBlockType.REASONING)
        self._sink.encrypted(json_text(part))
        self._close()

    def _signed_before(self, signature: str) -> None:
        """The signature of a non-thought part, as a text-less reasoning block of its own."""
        self._start(StreamBlockType.REASONING)
        self._sink.signature(signature)
        self._close()

    def _call(self, call: Any, signature: str | None) -> None:
        if not isinstance(call, dict):
            raise Unreadable("a `functionCall` is not an object")
        name = call.get("name")
        if name is None and self._pending is not None and "args" not in call:
            # The next pieces of a call whose arguments stream (Vertex AI's
            # `streamFunctionCallArguments`).
            self._more(call, signature)
            return
        if name is None and self._streamed and call.keys() <= {"willContinue"}:
            # The bare `functionCall: {}` that ends a streamed call already placed (its last
            # piece said no more was to come); a signature on it is kept as on an empty text.
            if signature is not None:
                self._text("", signature)
            return
        if not isinstance(name, str):
            raise Unreadable("a `functionCall` has no string `name`")
        self._end_call()
        call_id = _text(call.get("id")) or f"call_{self.calls}"
        self.calls += 1
        if call.get("willContinue") is True or call.get("partialArgs") is not None:
            # Its name first (with the signature), then `partialArgs` in later parts.
            self._pending = _Streamed(call_id, name, signature, self._exact(call.get("args")))
            self._streamed = True
            self._more(call, None)
            return
        arguments = arguments_text(call.get("args"), self.numbers)
        self._place_call(call_id, name, signature, arguments)

    def _place_call(self, call_id: str, name: str, signature: str | None, arguments: str) -> None:
        if signature is not None:
            self._signed_before(signature)
        self._start(StreamBlockType.TOOL_CALL, id=call_id, name=name)
        self._sink.arguments(arguments)
        self._close()

    def _more(self, call: dict[str, Any], signature: str | None) -> None:
        """One more piece of the streaming call: its `partialArgs` put in, and the call
        placed when `willContinue` no longer says more is to come."""
        pending = self._pending
        assert pending is not None
        pending.signature = pending.signature or signature
        pieces = self._exact(call.get("partialArgs"))
        if pieces is not None:
            if not isinstance(pieces, list):
                raise Unreadable("a `functionCall`'s `partialArgs` is not a list")
            for piece in pieces:
                _put_partial(pending.args, piece)
        if call.get("willContinue") is not True:
            self._end_call()

    def _exact(self, value: Any) -> Any:
        """A part of the payload with its numbers as written (`Numbers.exact`), where known."""
        return value if self.numbers is None else self.numbers.exact(value)

    def _end_call(self) -> None:
        """Place the call whose arguments were streaming, if one was."""
        pending, self._pending = self._pending, None
        if pending is not None:
            arguments = written(pending.args)
            self._place_call(pending.id, pending.name, pending.signature, arguments)

    def _text(self, text: str, signature: str | None) -> None:
        if signature is not None:
            self._signed_before(signature)
            self._start(StreamBlockType.TEXT)
        elif not text:
            return
        elif self._open is not StreamBlockType.TEXT:
            self._start(StreamBlockType.TEXT)
        if text:
            self._sink.text(text)

    def _thought(self, text: str, signature: str | None) -> None:
        if not text and signature is None:
            return
        if self._open is not StreamBlockType.REASONING:
            self._start(StreamBlockType.REASONING)
        if text:
            self._sink.text(text)
        if signature is not None:
            self._sink.signature(signature)
            self._close()


_PATH_STEP = re.compile(
    r"\.([^.\[\]]+)"  # .name
    r"|\[(\d+)\]"  # [0]
    r"|\['((?:[^'\\]|\\.)*)'\]"  # ['name']
    r'|\["((?:[^"\\]|\\.)*)"\]'  # ["name"]
)
"""One step of a JSON path (RFC 9535) as `partialArgs` name them: `.name`, `[0]`,
`['name']` or `["name"]`."""


def _path_steps(path: str) -> list[str | int]:
    """The member names and array indexes of a `jsonPath` (`$.recipe.steps[0]`)."""
    steps: list[str | int] = []
    at = 1
    while path.startswith("$") and at < len(path):
        found = _PATH_STEP.match(path, at)
        if found is None:
            break
        name, index, single, double = found.groups()
        if index is not None:
            steps.append(int(index))
        elif name is not None:
            steps.append(name)
        else:
            quoted = _unquoted(single if single is not None else double, single is not None)
            if quoted is None:
                break
            steps.append(quoted)
        at = found.end()
    if not steps or at != len(path):
        # Not quoted: its member names are keys the model wrote, and this message is
        # allama's own, which logs and spans show.
        raise Unreadable(
            "a partial argument's `jsonPath` is not a path allama reads (`$` followed by "
            "`.name`, `[0]` or `['name']` steps)"
        )
    return steps


_QUOTED_ESCAPE = re.compile(r'\\.|"')


def _unquoted(text: str, single: bool) -> str | None:
    """A quoted member name of a JSON path with its escapes read (JSON's, and `\\'` in
    single quotes); `None` when they do not read."""
    if single:
        # As JSON text: `\'` is a quote, and a bare `"` needs its escape.
        text = _QUOTED_ESCAPE.sub(
            lambda m: "'" if m[0] == "\\'" else '\\"' if m[0] == '"' else m[0], text
        )
    try:
        value = json.loads(f'"{text}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _put_partial(args: dict[str, Any], piece: Any) -> None:
    """One `PartialArg` (`jsonPath` and a string, number, boolean or null value) put into
    the arguments: a string whose path already holds one goes on after it (a long string
    comes in several pieces, the last often empty); objects and arrays on the way are made."""
    if not isinstance(piece, dict):
        raise Unreadable("a partial argument is not an object")
    path = piece.get("jsonPath")
    if not isinstance(path, str):
        raise Unreadable("a partial argument has no string `jsonPath`")
    steps = _path_steps(path)
    value: Any
    if piece.get("stringValue") is not None:
        value = piece["stringValue"]
        if not isinstance(value, str):
            raise Unreadable("a partial argument's `stringValue` is not a string")
    elif piece.get("numberValue") is not None:
        value = piece["numberValue"]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Unreadable("a partial argument's `numberValue` is not a number")
    elif piece.get("boolValue") is not None:
        value = piece["boolValue"]
        if not isinstance(value, bool):
            raise Unreadable("a partial argument's `boolValue` is not a boolean")
    elif "nullValue" in piece:
        value = None
    else:
        return  # no value: nothing to put
    node: Any = args
    for step, after in pairwise(steps):
        child = _member(node, step)
        if child is None:
            child = [] if isinstance(after, int) else {}
            _set_member(node, step, child)
        node = child
    last = steps[-1]
    held = _member(node, last)
    if isinstance(value, str) and isinstance(held, str):
        value = held + value
    _set_member(node, last, value)


def _member(node: Any, step: str | int) -> Any:
    if isinstance(step, int) and isinstance(node, list):
        return node[step] if step < len(node) else None
    if isinstance(step, str) and isinstance(node, dict):
        return node.get(step)
    raise Unreadable("partial arguments name a member of a value that has no such member")


def _set_member(node: Any, step: str | int, value: Any) -> None:
    if isinstance(step, str):
        assert isinstance(node, dict)
        node[step] = value
        return
    assert isinstance(node, list)
    if step < len(node):
        node[step] = value
    elif step == len(node):
        node.append(value)
    else:
        raise Unreadable("partial arguments skip an index of an array")


class _Blocks:
    """A `BlockSink` that builds content blocks."""

    __slots__ = ("_encrypted", "_id", "_name", "_pieces", "_signature", "_type", "blocks")

    def __init__(self) -> None:
        self.blocks: list[ContentBlock] = []
        self._type: StreamBlockType | None = None
        self._id: str | None = None
        self._name: str | None = None
        self._pieces: list[str] = []
        self._signature: str | None = None
        self._encrypted: str | None = None

    def start(
        self, block_type: StreamBlockType, *, id: str | None = None, name: str | None = None
    ) -> None:
        self._type, self._id, self._name = block_type, id, name
        self._pieces = []
        self._signature = None
        self._encrypted = None

    def text(self, text: str) -> None:
        self._pieces.append(text)

    def signature(self, signature: str) -> None:
        self._signature = signature

    def arguments(self, arguments: str) -> None:
        self._pieces.append(arguments)

    def encrypted(self, content: str) -> None:
        self._encrypted = content

    def stop(self) -> None:
        text = "".join(self._pieces)
        if self._type is StreamBlockType.TOOL_CALL:
            self.blocks.append(ToolCall(id=self._id or "", name=self._name or "", arguments=text))
        elif self._type is StreamBlockType.REASONING:
            self.blocks.append(
                Reasoning(text=text, signature=self._signature, encrypted_content=self._encrypted)
            )
        else:
            self.blocks.append(TextPart(text=text))
        self._type = None


def decode_payload(
    payload: Mapping[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
    numbers: Numbers | None = None,
) -> ChatResponse:
    """A response object, already parsed, as a `ChatResponse`. Raises `Unreadable` (a
    `ValueError`, with the reason) when it does not fit the response shape. `numbers`: the
    text it was read from, whose numbers a call's arguments keep as written."""
    chunk = read_chunk(payload, first_listed=True)
    sink = _Blocks()
    layout = Layout(sink)
    layout.numbers = numbers
    for part in chunk.parts:
        layout.place(part)
    layout.stop()
    provider_data: dict[str, JsonValue] = {}
    if chunk.others:
        provider_data[CANDIDATES_KEY] = chunk.others
        # `candidateCount` above 1: the others are paid for (their tokens are in the
        # usage), not read.
        count = len(chunk.others) + (1 if chunk.has_candidate else 0)
        warnings = (*warnings, unread_candidates(count, provider))
    if layout.others:
        provider_data[PARTS_KEY] = layout.others
    provider_data.update(metadata_data(chunk.citations, chunk.grounding, chunk.url_context))
    provider_data.update(chunk.tokens)
    if chunk.tier is not None:
        provider_data[SERVICE_TIER_KEY] = chunk.tier
    logprobs = None if chunk.logprobs is None else logprobs_of(chunk.logprobs)
    unread = chunk.logprobs is not None and logprobs is None
    # No tokens (`chosenCandidates` empty, or left out as proto3 JSON leaves an empty list
    # out, beside a `logProbabilitySum` alone): nothing written, none to read.
    tokens = not (isinstance(chunk.logprobs, dict) and not chunk.logprobs.get("chosenCandidates"))
    if unread and tokens:
        warnings = (
            *warnings,
            Warning.unsupported(
                RequestField.LOGPROBS,
                "the provider sent log-probabilities in a shape allama does not read (a "
                "`logprobsResult` whose candidates are no tokens with their log-probabilities, "
                "or whose top candidates do not match them step for step): they were left out",
            ),
        )
    if chunk.blocked is not None:
        finish: FinishReason | None = FinishReason.CONTENT_FILTER
        provider_data.update(chunk.blocked)
    else:
        finish = finish_reason_of(chunk.finish, tool_calls=layout.calls > 0)
        provider_data.update(finish_data(chunk.finish, chunk.finish_message))
    return ChatResponse(
        tuple(sink.blocks),
        finish_reason=finish,
        usage=chunk.usage,
        warnings=tuple(warnings),
        provider_data={NAMESPACE: provider_data} if provider_data else {},
        model=chunk.model or model,
        provider=provider,
        id=chunk.id,
        logprobs=logprobs,
    )


def is_error_object(payload: Mapping[str, Any]) -> bool:
    """Whether a parsed object is an error (`{"error": {...}}`) rather than a response."""
    return isinstance(payload.get("error"), dict | str) and "candidates" not in payload


def decode_body(
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
) -> ChatResponse:
    """A successful (2xx) body as a `ChatResponse`; an error object in it raises that error."""
    try:
        payload, halves = read_storable_json(body)
    except ValueError:
        raise not_a_response(body, "it is not JSON", provider=provider, model=model) from None
    if halves:  # half of a character, escaped: read as U+FFFD, as every API reads it
        warnings = (*warnings, lone_surrogates(provider))
    if (
        isinstance(payload, list)
        and len(payload) == 1
        and isinstance(payload[0], dict)
        and is_error_object(payload[0])
    ):
        raise error_from_payload(payload, provider=provider, model=model)
    if not isinstance(payload, dict):
        raise not_a_response(body, "it is not a JSON object", provider=provider, model=model)
    if is_error_object(payload):
        raise error_from_payload(payload, provider=provider, model=model)
    if not any(field in payload for field in _RESPONSE_FIELDS):
        raise not_a_response(
            body, "it has none of the fields of a response", provider=provider, model=model
        )
    numbers = Numbers(payload, body, halves=halves)
    try:
        return decode_payload(
            payload, provider=provider, model=model, warnings=warnings, numbers=numbers
        )
    except Unreadable as why:
        error = not_a_response(body, str(why), provider=provider, model=model)
        raise _with_usage(error, payload) from None


def _with_usage(error: Error, payload: Mapping[str, Any]) -> Error:
    """`error` with the usage the response it could not read reported (its tokens were
    billed), at the tier it names, with its audio, image and video tokens."""
    return with_billed_usage(error, billed_chunk(payload))


def with_billed_usage(error: Error, chunk: Chunk) -> Error:
    """`error` with the usage `chunk` reports (`billed_chunk`), its model, tier and audio,
    image and video tokens: what a wrapper that retries or fails over counts as paid."""
    if chunk.usage is None:
        return error
    tokens: dict[str, JsonValue] = dict(chunk.tokens)
    return with_reported_usage(
        error,
        chunk.usage.model_dump(mode="json", exclude_none=True),
        chunk.model,
        chunk.tier,
        extras=billed_extras({NAMESPACE: tokens}) if tokens else None,
    )


def decode_response(
    status: int,
    headers: Mapping[str, str],
    content: bytes,
    *,
    provider: str | None = None,
    model: str | None = None,
    warnings: Sequence[Warning] = (),
) -> ChatResponse:
    """An HTTP response as a `ChatResponse`; raises the `allama.Error` of an error response."""
    if status >= 400:
        raise error_from_response(status, headers, content, provider=provider, model=model)
    return decode_body(content, provider=provider, model=model, warnings=warnings)
