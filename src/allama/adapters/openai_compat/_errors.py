"""An error response (or a mid-stream error object) to the right `allama.Error`.

Bodies come in several shapes across the family: `{"error": {message, type, param, code}}`
(OpenAI and most), a numeric `code` (OpenRouter, vLLM), `{"error": "text", "code": ...}`
(xAI), `{"detail": ...}` (Mistral), `{"object": "error", "message": ...}` (older vLLM),
Cloudflare's envelope `{"success": false, "errors": [{code, message}]}` (Workers AI, with
HTTP 200 too), or plain text. A router relays its upstream's error inside its own:
OpenRouter answers "Provider returned error" with the upstream body (JSON text or plain
text) in `error.metadata.raw` and its name in `metadata.provider_name`; a schema rejection or
a full context window found there is classified as the upstream's. The provider's words are
kept as an upstream message and never logged.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from allama.adapters._http import body_message, detail_text, http_date, wait_until, wire_json
from allama.errors import (
    REPORTED_USAGE_KEY,
    SCHEMAS_TOGETHER_KEY,
    UNNAMED_PARAMETERS_KEY,
    AuthenticationError,
    ContextWindowExceededError,
    Error,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitedError,
    RejectedOutputError,
    RequestTimeoutError,
    ServerError,
    UnsupportedError,
)
from allama.types import RequestField, UnsupportedStage

__all__ = [
    "CONTENT_FILTER_KEY",
    "UPSTREAM_PROVIDER_KEY",
    "ErrorInfo",
    "error_from_payload",
    "error_from_response",
    "exhausted_wait",
    "filter_explanation",
    "retry_after_seconds",
    "spent_quota",
    "waits_as_asked",
]

CONTENT_FILTER_KEY = "allama.content_filter"
"""Context metadata key on the error for a request Azure's content filter refused (code
`content_filter`, HTTP 400: the prompt is never run, nor billed): the categories it flagged
in the words a filtered answer's `decline_explanation` has ("the content filter flagged:
jailbreak (flagged)"), or `FLAGGED_UNNAMED` where the error names none. allama's words, so
in the log view too."""

FLAGGED_UNNAMED = "the content filter flagged the request, naming no category"


def filter_explanation(results: Any) -> str | None:
    """Azure's content-filter verdicts as a phrase: the categories it filtered, by severity."""
    if not isinstance(results, dict):
        return None
    flagged = [
        f"{category} ({verdict.get('severity', 'flagged')})"
        for category, verdict in results.items()
        if isinstance(verdict, dict) and verdict.get("filtered") is True
    ]
    return f"the content filter flagged: {', '.join(flagged)}" if flagged else None


_CONTEXT_CODES = frozenset(
    {
        "context_length_exceeded",
        "context_window_exceeded",
        "string_above_max_length",
        "exceed_context_size_error",  # llama.cpp's `type` (on `local`, `llama-cpp`)
    }
)
# Patterns for error messages, compiled by `re` (and kept in its cache) when an error first
# needs them: a call that succeeds never does.
_CONTEXT_WORDS = (
    r"(?i)maximum context length|context length|context window|prompt too long|"
    r"prompt is too long|too many tokens|reduce the length|maximum prompt length|"
    r"exceeds the available context|"
    # Text Generation Inference's (Together's): "`inputs` tokens + `max_new_tokens` must be
    # <= 131073", "`inputs` must have less than 4096 tokens".
    r"`?inputs`? tokens \+ `?max_new_tokens`? must be <=|"
    r"`?inputs`? must have less than \d+ tokens"
)
_CONTEXT_STATUSES = (400, 403, 413, 422, None)
"""The statuses whose words may say the context is full: a request's own fault, as its 400
is, and Together's 403 among them (its error codes: "Input token count + max_tokens
parameter must be less than the context length"), which is no refusal of the key or the
account, so a batch run goes on past the one input too long."""
_INVALID_MODEL = r"(?i)^invalid model:"
"""Mistral's words for a model it has not ("Invalid model: mistral-foo"), read where its
`param` is `model`."""
_RATE_LIMIT_CODES = frozenset({"rate_limit_exceeded", "ratelimitreached", "rate_limited"})
_OVERLOADED_CODES = frozenset(
    {"overloaded", "capacity_exceeded", "server_is_overloaded", "slow_down"}
)
"""Codes of a server too busy for now, with or without a status (OpenAI's
`server_is_overloaded` and `slow_down` come in a Responses API failed body and events too)."""
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "quota_exceeded"})
_TRY_AGAIN_IN = r"(?i)try again in ((?:\d+(?:\.\d+)?(?:ms|us|µs|μs|ns|h|m|s))+)"
"""The wait a 429's words give (`Please try again in 1m26.4s.`), where no header does."""
_AFTER_SECONDS = r"(?i)(?:retry after|try again in) (\d+(?:\.\d+)?) seconds?\b"
"""The wait in words (Azure OpenAI's `Please retry after 38 seconds.`, API Management's
`Try again in 20 seconds.`)."""
_PER_DAY = r"(?i)per[- ]day|\bdaily\b"
"""A 429's words for a limit per day (`free-models-per-day`, `daily free allocation`)."""
_SPENT_CREDIT = (
    r"(?i)\b(?:has|have)(?: either)? used (?:up )?all (?:\w+ )?credits|"
    r"\b(?:you(?:'ve| have)|has|have) run out of credits|\b(?:you are|you're) out of credits|"
    r"\b(?:reached|hit|exceeded) (?:its|your|the|their)(?: \w+)? spending limit"
)
"""A 429's words saying credit is spent or a spending limit met (xAI's "has either used all
available credits or reached its monthly spending limit"): said of the account, not words
in passing ("so you never run out of credits")."""
_USAGE_PERIOD = (
    r"(?i)\b(?:reached|hit|exceeded|used up) (?:its|your|the|their) "
    r"(?:hourly|daily|weekly|monthly|session) usage limit"
)
"""A 429's words saying the usage limit of a period is reached (Ollama Cloud's "reached
your weekly usage limit", its "session usage limit" of about 5 hours, "hourly usage
limit"), not one named in passing ("does not count toward your weekly usage limit")."""
_TOO_LARGE = r"(?i)request too large"
"""OpenAI's 429 for a request larger than a per-minute limit (`Requested 45000`, `Limit
30000`): a rate limit by its status and code, which no wait ends."""
_LIMIT_REQUESTED = r"(?i)\blimit:? (\d+(?:,\d{3})*)\b[^.]*?\brequested:? (\d+(?:,\d{3})*)\b"
"""A 429's words giving the limit and what the request asked (Groq's "Limit 7000, Used 0,
Requested 7895", OpenAI's "Limit 30000, Requested 45000"), in one sentence."""
_RESPONSE_FORMAT_SCHEMA = (
    r"(?i)invalid schema for response_format|response format `?json_schema`?|"
    r"does not support response format|json_(?:schema|object)\b.*not supported"
)
"""A refused schema or response format: DeepInfra's 405 "json_schema (or json_object)
response format is not supported for model: ..." refuses JSON mode as it does a schema."""
_TOOL_SCHEMA = r"(?i)invalid schema for function"
_GRAMMAR_SCHEMA = (
    r"(?i)json schema contains features not supported by|"
    r"failed to transform json schema into a grammar"
)
"""vLLM's 400 to a schema its grammar backend cannot compile ("The provided JSON schema
contains features not supported by xgrammar.", "Failed to transform json schema into a
grammar: ..."), a response format's or a tool's (a forced or strict one is compiled too):
its words name neither, so the field is read from the request (`SCHEMAS_TOGETHER_KEY`)."""
_JSON_MODE_UNMET = r"(?i)json mode couldn'?t be met"
"""Workers AI's error when the model's output did not meet the schema ("JSON Mode couldn't
be met", in its envelope or an error object, under HTTP 400 or 200): the model answered
and the check refused it, as Groq's `json_validate_failed`."""
_UNFORCEABLE = r"(?i)does not support this tool_choice"
"""DeepSeek's 400 to a forced `tool_choice` in thinking mode ("Thinking mode does not
support this tool_choice"; "deepseek-reasoner does not support this tool_choice")."""
_AT_CAPACITY = r"(?i)\bcapacity exceeded\b"
"""Mistral's 429 when the model's tier is full ("Service tier capacity exceeded for this
model."), which it answers 503 as well: the provider at capacity, not the caller's rate."""
# How upstreams behind a router name the schema they rejected: Anthropic's
# `output_format.schema` / `output_config.format` and `input_schema`, Gemini's
# `generation_config.response_schema` and `function_declarations[i].parameters`.
_UPSTREAM_RESPONSE_SCHEMA = (
    r"(?i)output_format\.schema|output_config\.format|response_(?:json_)?schema"
)
_UPSTREAM_TOOL_SCHEMA = r"(?i)input_schema|function_declarations\[\d+\]\.parameters"
_BAD_KEY = r"(?i)incorrect api key|invalid api key|invalid x-api-key"
_NO_ENDPOINT = r"(?i)no endpoints found that (?:can handle|support)"
"""OpenRouter's 404 when no endpoint of the model serves what the request asks for (under
`provider.require_parameters`): "... that can handle the requested parameters", "... that
support tool use". The model exists ("No endpoints found for <model>" is a missing one)."""
_NO_ENDPOINT_UNNAMED = r"(?i)can handle the requested parameters"
_NO_ENDPOINT_FIELD = (
    (r"(?i)tool.choice", RequestField.TOOL_CHOICE),
    (r"(?i)tool", RequestField.TOOLS),
    (r"(?i)image input", RequestField.IMAGES),
    (r"(?i)structured output|response.format|json", RequestField.RESPONSE_FORMAT),
)
_GO_DURATION = r"(\d+(?:\.\d+)?)(ms|us|µs|μs|ns|h|m|s)"
"""A unit of Go's durations (`6m0s`, `850µs`: Go writes what is under a millisecond in µs
or ns)."""
_GO_DURATIONS = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|us|µs|μs|ns|h|m|s))+")
"""A whole Go duration: its units one after another, nothing else."""
_UNIT_SECONDS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
}
_CLOUDFLARE_STATUS = {
    "3003": 400,
    "3039": 400,
    "5004": 400,
    "5007": 400,
    "3023": 403,
    "3041": 403,
    "5016": 403,
    "5018": 403,
    "3042": 404,
    "5005": 405,
    "5019": 405,
    "3007": 408,
    "3008": 408,
    "3006": 413,
    "3036": 429,
}
"""The HTTP status Workers AI's errors page gives each of its codes, for an envelope that
came with HTTP 200 (3036: the daily free allocation used up). Not 3040, documented "Out of
capacity" but seen for JSON mode not met as well: its status says nothing sure."""
_CLOUDFLARE_ALLOCATION = "3036"
"""Workers AI's "Account limited": the daily free allocation used up, a spent quota."""
_DAILY_ALLOCATION = r"(?i)daily free allocation"
"""Workers AI's words for its daily allocation used up, under a code of another number
(4006 in some clients): the 429 its code 3036 documents."""
_SECONDS = re.compile(r"\d+(?:\.\d+)?")
"""A number of seconds as a header gives it (RFC 9110's `delay-seconds` is digits; some
servers send a fraction): not `nan`, `inf`, `1e400` or a sign, which `float` would read."""


class ErrorInfo:
    """The fields an error body carries, whatever its shape.

    `relayed` is the upstream's error a router wrapped in its own, and `relayed_by` the
    upstream's name as the router gave it. `flagged`: a router's moderation refused the
    input (OpenRouter's 403 whose `metadata` has the `reasons` and the `flagged_input`).
    `implied_status`: the HTTP status the provider documents for its error's code, which
    classifies an error that came without one (Cloudflare's envelope under HTTP 200); not
    the response's status, so never reported as it. `failed_generation`: the model's output
    the provider refused itself (Groq's), as it gave it back. `filtered`: what Azure's
    content filter flagged in a request it refused (`innererror.content_filter_result`, or
    `inner_error` as Azure's own API spec spells it), in `filter_explanation`'s words.
    """

    __slots__ = (
        "code",
        "failed_generation",
        "filtered",
        "flagged",
        "implied_status",
        "limits",
        "message",
        "param",
        "relayed",
        "relayed_by",
        "status",
        "type",
    )

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        status: int | None = None,
        relayed: ErrorInfo | None = None,
        relayed_by: str | None = None,
        flagged: bool = False,
        limits: dict[str, str] | None = None,
        implied_status: int | None = None,
        failed_generation: str | None = None,
        filtered: str | None = None,
    ) -> None:
        self.failed_generation = failed_generation
        self.filtered = filtered
        self.flagged = flagged
        self.implied_status = implied_status
        self.limits = limits
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.status = status
        self.relayed = relayed
        self.relayed_by = relayed_by

    @classmethod
    def parse(cls, payload: Any) -> ErrorInfo | None:
        if not isinstance(payload, dict):
            return None
        inner = payload.get("error")
        if isinstance(inner, dict):
            return cls._from_object(inner)
        if isinstance(inner, str):
            return cls(inner, code=_text(payload.get("code")), type=_text(payload.get("type")))
        detail = payload.get("detail")
        if detail is not None:
            return cls(detail_text(detail))
        if "message" in payload:
            return cls._from_object(payload)
        errors = payload.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return cls._from_envelope(errors[0], enveloped=payload.get("success") is False)
        return None

    @classmethod
    def _from_envelope(cls, first: dict[str, Any], *, enveloped: bool) -> ErrorInfo:
        """The first of an `errors` list. Its numeric `code` is the provider's own, not an
        HTTP status; in Cloudflare's envelope (`success: false`) it implies the status."""
        message = first.get("message")
        text = message if isinstance(message, str) and message else json.dumps(first)
        raw = first.get("code")
        code = str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else _text(raw)
        implied = kind = None
        if enveloped:
            implied = _CLOUDFLARE_STATUS.get(code or "")
            if implied is None and re.search(_DAILY_ALLOCATION, text):
                implied = 429
            if code == _CLOUDFLARE_ALLOCATION:  # whatever its words: no wait ends it
                kind = "quota_exceeded"
        return cls(text, code=code, type=kind, implied_status=implied)

    @classmethod
    def _from_object(cls, obj: dict[str, Any]) -> ErrorInfo:
        code = obj.get("code")
        status = obj.get("status_code", obj.get("status"))
        if isinstance(code, int) and not isinstance(code, bool):
            status = status if isinstance(status, int) else code
        message = obj.get("message")
        if isinstance(message, str):
            text = message
        elif isinstance(message, dict) and message.get("detail") is not None:
            text = detail_text(message["detail"])  # Mistral's 422: `{"message": {"detail"}}`
        else:
            text = json.dumps(obj)
        metadata = obj.get("metadata")
        relayed = relayed_by = None
        flagged = False
        limits = None
        if isinstance(metadata, dict):
            relayed = _relayed(metadata.get("raw"))
            relayed_by = _text(metadata.get("provider_name"))
            flagged = "reasons" in metadata or "flagged_input" in metadata
            held = metadata.get("headers")
            if isinstance(held, dict):
                limits = {str(key): str(value) for key, value in held.items()}
        if relayed is not None:
            upstream = f" ({relayed_by})" if relayed_by else ""
            text = f"{text}{upstream}: {relayed.message}"
        return cls(
            text,
            type=_text(obj.get("type")),
            code=_text(code) if not isinstance(code, int) else None,
            param=_text(obj.get("param")),
            status=status if isinstance(status, int) and not isinstance(status, bool) else None,
            relayed=relayed,
            relayed_by=relayed_by,
            flagged=flagged,
            limits=limits,
            failed_generation=_failed_generation(obj.get("failed_generation")),
            filtered=_filtered(_inner_error(obj)),
        )


def _relayed(raw: Any) -> ErrorInfo | None:
    """The upstream error in a router's `metadata.raw`: a body as JSON text, an object, or
    plain text."""
    if isinstance(raw, str):
        try:
            parsed: Any = wire_json(raw)
        except ValueError:
            return ErrorInfo(raw) if raw.strip() else None
        return ErrorInfo.parse(parsed) or ErrorInfo(raw)
    if isinstance(raw, dict):
        return ErrorInfo.parse(raw) or ErrorInfo(json.dumps(raw))
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _inner_error(obj: dict[str, Any]) -> Any:
    """Azure's inner error: `innererror` (what its services send, as OpenAI's SDK reads
    it), or `inner_error` (its REST spec's `components.schemas.error`, on the v1 endpoint
    and Responses too)."""
    inner = obj.get("innererror")
    return inner if isinstance(inner, dict) else obj.get("inner_error")


def _filtered(inner: Any) -> str | None:
    """What Azure's `innererror` says its content filter flagged (`content_filter_result`;
    `content_filter_results` on its image APIs), as `filter_explanation` words it."""
    if not isinstance(inner, dict):
        return None
    results = inner.get("content_filter_result", inner.get("content_filter_results"))
    return filter_explanation(results)


def _failed_generation(value: Any) -> str | None:
    """The output a provider refused, as text: an empty one is the model's too (it wrote
    nothing); what is no string is none."""
    return value if isinstance(value, str) else None


_EPOCH_SECONDS = 1e9
"""An `x-ratelimit-reset` this large is a moment in seconds since the epoch (2001 on),
not a wait."""
_EPOCH_MILLISECONDS = 1e11
"""One this large is in milliseconds (a moment in seconds reaches it in the year 5138)."""


def _duration(value: str) -> float | None:
    """Seconds, from a number of seconds or a Go duration; `None` for anything else, or for
    a number too large to be a wait."""
    value = value.strip()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        if not _GO_DURATIONS.fullmatch(value):  # (checked whole first: a long run of digits
            return None  # with no unit would be scanned again from each of them)
        parts = re.findall(_GO_DURATION, value)
        if not parts or "".join(n + u for n, u in parts) != value:
            return None
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    return seconds if math.isfinite(seconds) else None


_LISTED = re.compile(r",(?!\s*\d{1,2}[ -][A-Za-z]{3}[ -]\d)")
"""A comma between the values of a field sent twice, which the response joins ("30, 30"),
and not the one after an HTTP date's day name ("Wed, 21 Oct 2015 ...")."""


def _longest(value: str, wait: Callable[[str], float | None]) -> float | None:
    """The longest wait `wait` reads from a field's values: one sent twice (a gateway adding
    its own beside the upstream's) comes joined by commas, which read as one value is no
    wait at all. `None` when no value reads."""
    waits = [w for part in _LISTED.split(value) if (w := wait(part.strip())) is not None]
    return max(waits, default=None)


_EXPLICIT_WAITS = ("retry-after", "retry-after-ms", "x-ms-retry-after-ms")


def waits_as_asked(error: Error, headers: Mapping[str, str], *, now: float | None = None) -> Error:
    """A server error with the wait its response asked for (`Retry-After` on a 503 or
    529), so that a retry waits that long; rate limits read theirs when they are made."""
    if isinstance(error, ServerError) and error.retry_after is None:
        lower = {key.lower(): value for key, value in headers.items()}
        explicit = {key: lower[key] for key in _EXPLICIT_WAITS if key in lower}
        if explicit:
            error.with_retry_after(retry_after_seconds(explicit, now=now, dated=lower))
    return error


def retry_after_seconds(
    headers: Mapping[str, str],
    *,
    now: float | None = None,
    dated: Mapping[str, str] | None = None,
) -> float | None:
    """How long the provider asked to wait, from its headers, in seconds.

    `retry-after-ms` (Azure's `x-ms-retry-after-ms` too) and `retry-after` (seconds or an
    HTTP date) are explicit; when both are present the longer wait wins, since either alone
    may be rounded, and so does the longer of a field sent twice ("30, 30"). Without them,
    the `x-ratelimit-reset-*` durations are used (Together's `x-ratelimit-reset`,
    Cerebras' `-tokens-minute` and `-requests-day` too): those of the
    exhausted limits (remaining `0`) when the headers say which; else the tokens' per
    minute (a request larger than the tokens left meets that limit with some left; one of
    requests met reads `0`, and may be per day, as Groq's is), else the longest. A reset of
    `0` counts only for a limit used up: of one not known to be (Azure's 429 says `-1`
    remain, of a limit of `-1`), it is no wait, and `None` is, where no other reset reads.
    """
    lower = {key.lower(): value for key, value in headers.items()}
    # A moment to wait until is the provider's, read on its clock (`wait_until`) as the
    # answer's `Date` gives it (in `dated`, where the headers read are a router's body's).
    dated = lower if dated is None else dated
    explicit: list[float] = []
    for name in ("retry-after-ms", "x-ms-retry-after-ms"):
        millis = None if (ms := lower.get(name)) is None else _longest(ms, _duration)
        if millis is not None:
            explicit.append(millis / 1000.0)

    def seconds_or_moment(value: str) -> float | None:
        seconds = _duration(value)
        if seconds is None and (moment := http_date(value)) is not None:
            seconds = wait_until(moment, dated, now)
        return seconds

    if (after := lower.get("retry-after")) is not None:
        seconds = _longest(after, seconds_or_moment)
        if seconds is not None:
            explicit.append(seconds)
    if explicit:
        return max(max(explicit), 0.0)
    resets: dict[str, float] = {}
    exhausted: list[float] = []
    for name, raw in lower.items():
        kind = name.removeprefix("x-ratelimit-reset")
        if kind == name or (kind and not kind.startswith("-")):
            continue  # not a reset (whose name ends there, or goes on `-tokens-minute`...)
        seconds = _reset_wait(kind, raw, dated, now)
        used_up = lower.get(f"x-ratelimit-remaining{kind}", "").strip() == "0"
        # A reset of 0 is no wait but where its limit is used up: Azure's 429 sends
        # `-1` (not known) for the limit and what remains, and `0` for the reset.
        if seconds is not None and (seconds > 0 or used_up):
            resets[kind] = seconds
            if used_up:
                exhausted.append(seconds)
    if not resets:
        return None
    per_minute = [
        seconds for kind, seconds in resets.items() if "tokens" in kind and "day" not in kind
    ]
    if not exhausted and per_minute:
        return min(per_minute)
    return max(exhausted or resets.values())


def _reset_wait(kind: str, raw: str, dated: Mapping[str, str], now: float | None) -> float | None:
    """The seconds until the limit `kind` resets (`-requests`, `-tokens-minute`, `""`), from
    its `x-ratelimit-reset{kind}` value: a duration, or for the bare header a moment."""
    seconds = _duration(raw)
    if seconds is not None and not kind and seconds >= _EPOCH_SECONDS:
        # A moment, not a wait (OpenRouter's, in milliseconds since the epoch).
        moment = seconds / 1000.0 if seconds >= _EPOCH_MILLISECONDS else seconds
        seconds = wait_until(moment, dated, now)
    return seconds


_REMAINING_KINDS = tuple(
    (f"x-ratelimit-remaining{kind}", kind)
    for kind in ("-requests", "-tokens", "", "-tokens-minute", "-requests-day")
)
"""The remaining counts an answer may carry (OpenAI's, Groq's and Azure's per limit,
Together's and OpenRouter's bare one, Cerebras' per minute and per day), each with the
kind of its `x-ratelimit-reset` header."""
_REMAINING = tuple(name for name, _ in _REMAINING_KINDS)


def exhausted_wait(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The seconds until the limits a successful answer says are used up (a remaining count
    of `0`) reset, read as a 429's `x-ratelimit-reset-*` headers are; `None` when none is
    used up, or none of those says when it resets. `headers` lower-cased, as an
    `HttpResponse` has them: an answer with limits left costs a few dictionary lookups."""
    # A plain loop that returns at once, for every successful answer goes through it.
    for name in _REMAINING:
        left = headers.get(name)
        if left is not None and left.strip() == "0":
            return _used_up_wait(headers, now)
    return None


def _used_up_wait(headers: Mapping[str, str], now: float | None) -> float | None:
    """`exhausted_wait` where a remaining count reads `0`: the latest of the resets of
    those used up."""
    waits = [
        seconds
        for name, kind in _REMAINING_KINDS
        if (left := headers.get(name)) is not None
        and left.strip() == "0"
        and (raw := headers.get(f"x-ratelimit-reset{kind}")) is not None
        and (seconds := _reset_wait(kind, raw, headers, now)) is not None
    ]
    return max(waits, default=None)


def spent_quota(message: str, wait: float | None) -> bool:
    """Whether a 429's words say a quota is spent rather than a rate met: every request
    meets it until the account changes or the period ends, so a batch run stops with its
    inputs pending rather than send each again up to 100 times. Credit used up or a
    spending limit met is, whatever wait comes with it; a limit per day (Workers AI's daily
    allocation) or a usage limit of a period (Ollama Cloud's hourly, session, weekly one)
    is when the response gives no wait (`wait`), as no short one ends it. Shared by the
    adapters that read such 429s (this family's and Ollama's)."""
    if re.search(_SPENT_CREDIT, message):
        return True
    return wait is None and bool(re.search(_PER_DAY, message) or re.search(_USAGE_PERIOD, message))


def _rejected_schema(info: ErrorInfo, *, upstream: bool = False) -> RequestField | None:
    """The field whose schema the error rejects, if it is a schema rejection (or a refusal
    of the response format, JSON mode's too: extraction falls back to a forced tool alike).

    `upstream` also reads the words of the dialects a router translates to.
    """
    message = info.message
    code = (info.code or "").lower()
    param = (info.param or "").lower()
    if (
        code == "invalid_json_schema"
        or re.search(_RESPONSE_FORMAT_SCHEMA, message)
        or (param.startswith(("response_format", "text.format")) and "schema" in message.lower())
        or (upstream and re.search(_UPSTREAM_RESPONSE_SCHEMA, message) is not None)
    ):
        return RequestField.RESPONSE_FORMAT
    if (
        code == "invalid_function_parameters"
        or re.search(_TOOL_SCHEMA, message)
        or (upstream and re.search(_UPSTREAM_TOOL_SCHEMA, message) is not None)
    ):
        return RequestField.TOOLS
    return None


def _relayed_error(status: int | None, info: ErrorInfo) -> Error | None:
    """The error a router relayed, when the upstream's words say more than the router's:
    a schema the upstream rejected (so that extraction can fall back) or a full context."""
    relayed = info.relayed
    if relayed is None:
        return None
    field = _rejected_schema(relayed, upstream=True)
    if field is not None:
        return UnsupportedError(info.message, field=field, stage=UnsupportedStage.PROVIDER)
    code = (relayed.code or "").lower()
    if code in _CONTEXT_CODES or (
        status in _CONTEXT_STATUSES and re.search(_CONTEXT_WORDS, relayed.message)
    ):
        return ContextWindowExceededError(info.message)
    return None


_TYPED_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "rate_limit_error": 429,
}
"""The status OpenAI's error types stand for, which classifies an error object that came
with neither a status nor a code that says one (in a stream, or a 200 body): the type says
whose fault it is, and a request's fault is not to be paid for again."""


def _classify(status: int | None, info: ErrorInfo, headers: Mapping[str, str]) -> Error:
    if status is None:  # (an error with HTTP 200: classified as its documented status)
        status = info.implied_status
    message = info.message
    code = (info.code or "").lower()
    kind = (info.type or "").lower()
    if status is None:
        # A content filter's refusal is the request's fault, as under its HTTP 400.
        status = 400 if code == "content_filter" else _TYPED_STATUS.get(kind)
    relayed = _relayed_error(status, info)
    if relayed is not None:
        return relayed
    if code == "content_filter" and status == 400:
        # A request Azure's content filter refused: the prompt, never run nor billed, which
        # sending again meets again. The request's fault, not the model's refusal of an
        # answer (`RefusedError` is an extraction's, over a response made): what it flagged
        # is said as a filtered answer's `decline_explanation` says it.
        words = message if info.filtered is None else f"{message} ({info.filtered})"
        blocked = InvalidRequestError(words)
        return blocked.with_metadata(CONTENT_FILTER_KEY, info.filtered or FLAGGED_UNNAMED)
    if code in ("json_validate_failed", "tool_use_failed") or re.search(_JSON_MODE_UNMET, message):
        # The model answered, and the provider's check of the answer refused it (Groq's,
        # the answer in `failed_generation`; Workers AI's, without it): against the schema,
        # or as a tool call (one whose arguments the tool's schema refused, text where a
        # call was required, a call it could not read): asking again may pass. Made, and
        # maybe billed, for what its error does not say (no usage comes).
        return RejectedOutputError(message, failed_output=info.failed_generation).with_metadata(
            REPORTED_USAGE_KEY, {}
        )
    if code in _QUOTA_CODES or kind in _QUOTA_CODES or status == 402:
        return QuotaExceededError(message).with_retryable(False)
    if code in _CONTEXT_CODES or kind in _CONTEXT_CODES:
        return ContextWindowExceededError(message)
    if status == 429 or code in _RATE_LIMIT_CODES:
        if re.search(_AT_CAPACITY, message):
            # The provider full, whoever asks (its `Retry-After`, if any, read as a 503's).
            return OverloadedError(message)
        if re.search(_TOO_LARGE, message) or _over_the_limit(message):
            # The request alone is over a limit: no wait lets it through, and the wait the
            # headers give is not one to make.
            return RateLimitedError(message).with_retryable(False)
        # The headers', the limit's as a router put them in its body, and the words'
        # (OpenAI's and Groq's "Please try again in 8.64s.", Azure's "Please retry after 38
        # seconds."): the longest, for a header's may be a reset of another limit than the
        # one met. A router's moments, as its upstream's headers, read on the clock its
        # `Date` gives.
        limits = info.limits or {}
        said = re.search(_TRY_AGAIN_IN, message) or re.search(_AFTER_SECONDS, message)
        waits = (
            retry_after_seconds(headers),
            retry_after_seconds(limits, dated=headers),
            None if said is None else _duration(said.group(1)),
        )
        wait = max((seconds for seconds in waits if seconds is not None), default=None)
        if spent_quota(message, wait):
            return QuotaExceededError(message).with_retryable(False)
        return RateLimitedError(message, retry_after=wait)
    if status in _CONTEXT_STATUSES and re.search(_CONTEXT_WORDS, message):
        return ContextWindowExceededError(message)
    field = _rejected_schema(info)
    if field is None and status in (400, 422, None):
        field = _refused_field(message)
    if field is not None:
        return UnsupportedError(message, field=field, stage=UnsupportedStage.PROVIDER)
    if status in (400, None) and re.search(_GRAMMAR_SCHEMA, message):
        # Whose schema it is the request says: put on its field (`SCHEMAS_TOGETHER_KEY`).
        refused = UnsupportedError(message, stage=UnsupportedStage.PROVIDER)
        return refused.with_metadata(SCHEMAS_TOGETHER_KEY, "strict")
    if status == 401 or (status in (400, 403) and re.search(_BAD_KEY, message)):
        return AuthenticationError(message)
    if status == 403 and info.flagged:
        # The input's content, refused by moderation: that request's failure, not the key's
        # or the account's (no other input meets it, and sending it again meets it again).
        return InvalidRequestError(message)
    if status == 403:
        return PermissionDeniedError(message)
    if status == 404 and re.search(_NO_ENDPOINT, message):
        # Nothing serves the request as asked: no wait or retry changes that.
        named = next((f for words, f in _NO_ENDPOINT_FIELD if re.search(words, message)), None)
        refused = UnsupportedError(message, field=named, stage=UnsupportedStage.PROVIDER)
        if named is None and re.search(_NO_ENDPOINT_UNNAMED, message):
            refused.with_metadata(UNNAMED_PARAMETERS_KEY, True)
        return refused
    if status == 404 or code in ("model_not_found", "deploymentnotfound", "unknown_model"):
        # (`unknown_model`: Mistral's code for a model it has not, in its error glossary.)
        return NotFoundError(message)
    if kind == "invalid_model" or (
        (info.param or "").lower() == "model" and re.search(_INVALID_MODEL, message)
    ):
        # Mistral's 400 for a model it has not ("Invalid model: ..."), by its type or by its
        # `param` and words where the code is another: a failover moves on.
        return NotFoundError(message)
    if status == 408:
        return RequestTimeoutError(message)
    if status in (498, 503, 529) or code in _OVERLOADED_CODES or kind == "overloaded_error":
        # Groq's 498 `capacity_exceeded`: its flex tier full for now ("try again later").
        return OverloadedError(message)
    if (status is not None and status >= 500) or code == "server_error" or kind == "server_error":
        return ServerError(message)
    if status is None:
        # An error object in a stream with no status and no known code: the server gave up.
        return ServerError(message)
    error = InvalidRequestError(message)
    if status == 409:
        error.with_retryable(True)  # a conflict: asking again may succeed
    return error


def _over_the_limit(message: str) -> bool:
    """Whether a 429's words say the request alone asks more than the limit holds (Groq's
    "Limit 7000, Used 0, Requested 7895. Please try again in 7.67s."): as a "request too
    large", no wait lets it through, whatever wait the words give."""
    said = re.search(_LIMIT_REQUESTED, message)
    if said is None:
        return False
    limit, requested = (int(group.replace(",", "")) for group in said.groups())
    return requested > limit


def _refused_field(message: str) -> RequestField | None:
    """The field a 400's words say the model does not take: a forced tool choice in
    DeepSeek's thinking mode; tools or thinking in Ollama's words ("... does not support
    tools"), which its `/v1` relays as its own API gives them: read as the Ollama adapter
    reads them. Read on every Chat Completions endpoint: words that say a model takes no
    tools (or no thinking) mean that wherever they come from (a proxy of Ollama's)."""
    if re.search(_UNFORCEABLE, message):
        return RequestField.TOOL_CHOICE
    # (Imported here: the Ollama adapter's errors import this module.)
    from allama.adapters.ollama._errors import _NO_THINKING, _NO_TOOLS

    if re.search(_NO_TOOLS, message):
        return RequestField.TOOLS
    if re.search(_NO_THINKING, message):
        return RequestField.REASONING_EFFORT
    return None


def _apply_should_retry(error: Error, headers: Mapping[str, str]) -> Error:
    lower = {key.lower(): value for key, value in headers.items()}
    flag = lower.get("x-should-retry", "").strip().lower()
    if flag == "true" and not isinstance(error, QuotaExceededError):
        error.with_retryable(True)
    elif flag == "false":
        error.with_retryable(False)
    request_id = lower.get("x-request-id") or lower.get("apim-request-id")
    if request_id:
        error.with_request_id(request_id)
    return error


UPSTREAM_PROVIDER_KEY = "upstream_provider"
"""Context metadata key: the upstream a router named as the one that failed. Its name comes
from the router's body, so it stays out of the log view like the rest of that body."""


def _name_upstream(error: Error, info: ErrorInfo) -> None:
    if info.relayed_by is not None:
        error.with_metadata(UPSTREAM_PROVIDER_KEY, info.relayed_by)


def error_from_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
) -> Error:
    """The error for an HTTP response with status >= 400."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        payload: Any = wire_json(text) if text.strip() else None
    except ValueError:
        payload = None
    info = ErrorInfo.parse(payload) or ErrorInfo(body_message(text, status))
    error = _classify(status, info, headers).mark_upstream().with_status(status).with_body(text)
    if not text.strip():
        error.mark_authored()  # `HTTP <status>`: allama's words for an empty body
    error = _apply_should_retry(waits_as_asked(error, headers), headers)
    _name_upstream(error, info)
    if provider is not None:
        error.with_provider(provider)
    if model is not None:
        error.with_model(model)
    return error


def error_from_payload(
    payload: dict[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
) -> Error:
    """The error for an error object inside a stream (HTTP status 200, the error in the data)."""
    info = ErrorInfo.parse(payload) or ErrorInfo(json.dumps(payload))
    error = _classify(info.status, info, {}).mark_upstream().with_body(json.dumps(payload))
    _name_upstream(error, info)
    if info.status is not None:
        error.with_status(info.status)
    if provider is not None:
        error.with_provider(provider)
    if model is not None:
        error.with_model(model)
    return error
