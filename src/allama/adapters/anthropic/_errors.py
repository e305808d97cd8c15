"""An Anthropic error response (or an `event: error` inside a stream) to the right `allama.Error`.

Anthropic's body is `{"type": "error", "error": {"type", "message", "details"?},
"request_id"}`. The error type decides the class; the HTTP status decides only when the type
is missing or new (or the body is not JSON at all, such as Cloudflare's HTML page for a 413).
A 400 that rejects a schema (of `output_config.format` or of a tool's `input_schema`) is an
`UnsupportedError` on that field, so that an extraction can fall back to another way of
asking (a schema "too complex" names none: the provider reads it from the request); a 400
saying the input does not fit is a `ContextWindowExceededError`. The provider's words are
kept as an upstream message and never logged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from allama.adapters._http import body_message, rfc3339_seconds, wait_until, wire_json
from allama.adapters.openai_compat._errors import _CONTEXT_WORDS as _OPENAI_CONTEXT_WORDS
from allama.adapters.openai_compat._errors import retry_after_seconds, waits_as_asked
from allama.errors import (
    SCHEMAS_TOGETHER_KEY,
    AuthenticationError,
    ContextWindowExceededError,
    Error,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    UnsupportedError,
)
from allama.types import RequestField, UnsupportedStage

__all__ = [
    "error_from_payload",
    "error_from_response",
    "exhausted_wait",
    "retry_after",
]

# Patterns for error messages, compiled by `re` (and kept in its cache) when an error first
# needs them: a call that succeeds never does.
# `output_config` named alone ("output_config: Extra inputs are not permitted", "Unknown
# parameter: output_config", a host of the dialect without it) is the response format's: the
# rest of it (`output_config.effort`) is named with its own path.
_RESPONSE_SCHEMA = r"(?i)output_config(?:\.format\b|\b(?!\.\w))|output_format"
_TOOL_SCHEMA = r"(?i)input_schema|tools\.\d+\.(?:custom\.)?strict|strict tools?\b|tool schemas?\b"
# Limits on the grammar compiled from every strict schema of a request together: they name
# no field (the grammar's advice speaks of tools even when only `output_config` was sent),
# so the field is read from the request (`SCHEMAS_TOGETHER_KEY`) unless a path names it.
_TOO_COMPLEX = r"(?i)schema is too complex|compiled grammar is too large"
_TOOL_PATH = r"(?i)input_schema|tools\.\d+\."
_CONTEXT_WORDS = r"(?i)prompt is too long|exceeds? (?:the )?context limit|context window"
"""Anthropic's words for an input that does not fit; other hosts of the dialect (DeepSeek's)
answer in OpenAI's ("This model's maximum context length is 131072 tokens"), which
`_OPENAI_CONTEXT_WORDS` knows."""
_SPEND_LIMIT = "enforced_spend_limit_reached"
_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
_EXPLICIT = ("retry-after", "retry-after-ms")
_HEADERS = tuple(
    (limit, f"anthropic-ratelimit-{limit}-remaining", f"anthropic-ratelimit-{limit}-reset")
    for limit in _LIMITS
)
"""Each limit, with the names of its remaining count and of its reset moment."""
_REMAINING = tuple(remaining for _, remaining, _ in _HEADERS)


class _Info:
    """The fields of an error body; `None` where the body does not say. `status` is an HTTP
    status the error object gives as its `code`, in OpenAI's shape, which other hosts of the
    dialect send inside a stream (`{"error": {"message": ..., "code": 429}}`)."""

    __slots__ = ("code", "message", "request_id", "status", "type")

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        request_id: str | None = None,
        status: int | None = None,
    ) -> None:
        self.message = message
        self.type = type
        self.code = code
        self.request_id = request_id
        self.status = status

    @classmethod
    def parse(cls, payload: Any) -> _Info | None:
        if not isinstance(payload, dict):
            return None
        inner = payload.get("error")
        request_id = _text(payload.get("request_id"))
        if isinstance(inner, str) and inner:
            return cls(inner, type=_text(payload.get("type")), request_id=request_id)
        if not isinstance(inner, dict):
            return None
        message = inner.get("message")
        details = inner.get("details")
        return cls(
            message if isinstance(message, str) and message else json.dumps(inner),
            type=_text(inner.get("type")),
            code=_text(details.get("error_code")) if isinstance(details, dict) else None,
            request_id=request_id,
            status=_http_status(inner.get("code")),
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _http_status(value: Any) -> int | None:
    """`value` where it is an HTTP error status (a numeric `code`), else `None`."""
    if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
        return value
    return None


def _rejected_schema(message: str) -> RequestField | None:
    """The request field whose schema the provider rejected, if the message names it."""
    if re.search(_TOO_COMPLEX, message):
        # Only a path names a field here: the advice on tools is given whatever was sent.
        if re.search(_RESPONSE_SCHEMA, message):
            return RequestField.RESPONSE_FORMAT
        return RequestField.TOOLS if re.search(_TOOL_PATH, message) else None
    if re.search(_RESPONSE_SCHEMA, message):
        return RequestField.RESPONSE_FORMAT
    if re.search(_TOOL_SCHEMA, message):
        return RequestField.TOOLS
    return None


_NO_CREDIT = r"(?i)credit balance is too low"
"""Anthropic's 400 for an account whose credit is spent (an `invalid_request_error`)."""
_USAGE_LIMITS = r"(?i)reached your specified (?:workspace )?API usage limits?\b"
"""Anthropic's 400 for a workspace or organization at the usage limit set on it ("You will
regain access on 2026-04-01 at 00:00 UTC.", an `invalid_request_error`)."""


def _invalid_request(message: str) -> Error:
    """A 400: a schema the provider cannot compile, a full context window, or a plain error."""
    field = _rejected_schema(message)
    if field is not None:
        return UnsupportedError(message, field=field, stage=UnsupportedStage.PROVIDER)
    if re.search(_TOO_COMPLEX, message):
        # A limit on the grammar of every strict schema together, naming none: the provider
        # puts it on the field the request carries them in (only strict tools are compiled).
        refused = UnsupportedError(message, stage=UnsupportedStage.PROVIDER)
        return refused.with_metadata(SCHEMAS_TOGETHER_KEY, "strict")
    if re.search(_CONTEXT_WORDS, message) or re.search(_OPENAI_CONTEXT_WORDS, message):
        return ContextWindowExceededError(message)
    if re.search(_NO_CREDIT, message) or re.search(_USAGE_LIMITS, message):
        # The account's prepaid credit, or the usage limit set on it, is spent: every request
        # gets it (a batch run stops). The date it names stays in its words, as the end of
        # a spend limit or of a quota per day does elsewhere: no run waits that long.
        return QuotaExceededError(message).with_retryable(False)
    return InvalidRequestError(message)


def _too_large(info: _Info | None) -> Error:
    """A 413. Cloudflare answers it before the API does, often with an HTML page: the message
    is then allama's own, and the page stays in the body."""
    if info is None:
        return InvalidRequestError(
            "the request is too large for the provider (HTTP 413); send less input"
        ).mark_authored()
    return InvalidRequestError(f"the request is too large: {info.message}").mark_upstream()


def _rate_limited(message: str, code: str | None, wait: float | None) -> Error:
    if code == _SPEND_LIMIT:
        # The workspace's spend limit: waiting until a rate window resets does not help.
        return QuotaExceededError(message).with_retryable(False)
    return RateLimitedError(message, retry_after=wait)


def _by_type(kind: str, info: _Info, wait: float | None) -> Error | None:
    message = info.message
    if kind == "invalid_request_error":
        return _invalid_request(message)
    if kind == "authentication_error":
        return AuthenticationError(message)
    if kind == "permission_error":
        return PermissionDeniedError(message)
    if kind == "not_found_error":
        return NotFoundError(message)
    if kind == "billing_error":
        return QuotaExceededError(message).with_retryable(False)
    if kind == "request_too_large":
        return _too_large(info)
    if kind == "rate_limit_error":
        return _rate_limited(message, info.code, wait)
    if kind in ("api_error", "timeout_error"):
        # `timeout_error` (504) is the server running out of time, not the client's timeout
        # (`RequestTimeoutError`): a longer client timeout would not help, a retry may.
        return ServerError(message)
    if kind == "overloaded_error":
        return OverloadedError(message)
    return None


def _by_status(status: int | None, info: _Info | None, message: str, wait: float | None) -> Error:
    """The error for a type allama does not know (or no body at all), by the HTTP status."""
    if status is None:
        # An error event in a stream of a type nobody knows: the server gave up.
        return ServerError(message)
    if status == 401:
        return AuthenticationError(message)
    if status == 402:
        return QuotaExceededError(message).with_retryable(False)
    if status == 403:
        return PermissionDeniedError(message)
    if status == 404:
        return NotFoundError(message)
    if status == 408:
        return RequestTimeoutError(message)
    if status == 413:
        return _too_large(info)
    if status == 429:
        return _rate_limited(message, info.code if info else None, wait)
    if status in (503, 529):
        return OverloadedError(message)
    if status >= 500:
        return ServerError(message)
    if status == 409:
        # A conflict: asking again may succeed.
        return InvalidRequestError(message).with_retryable(True)
    return _invalid_request(message)


def _classify(status: int | None, info: _Info | None, message: str, wait: float | None) -> Error:
    if info is not None and info.type is not None:
        error = _by_type(info.type, info, wait)
        if error is not None:
            return error
    return _by_status(status, info, message, wait)


def retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """How long Anthropic asked to wait, in seconds, from its headers.

    `retry-after-ms` and `retry-after` are explicit and win. Without them, the
    `anthropic-ratelimit-*-reset` moments (RFC 3339) of the exhausted limits (remaining `0`)
    say when asking again can succeed: the latest of those, or the latest of all resets when
    none says which limit ran out. `now` (seconds since the epoch) is for tests.
    """
    lower = {key.lower(): value for key, value in headers.items()}
    explicit = {key: lower[key] for key in _EXPLICIT if key in lower}
    if explicit:
        wait = retry_after_seconds(explicit, now=now, dated=lower)
        if wait is not None:
            return wait
    resets: dict[str, float] = {}
    for limit, _, reset in _HEADERS:
        if (moment := rfc3339_seconds(lower.get(reset))) is not None:
            resets[limit] = moment
    if not resets:
        return None
    exhausted = [
        moment
        for limit, moment in resets.items()
        if lower.get(f"anthropic-ratelimit-{limit}-remaining", "").strip() == "0"
    ]
    latest = max(exhausted or resets.values())
    return wait_until(latest, lower, now)  # on its clock, as its `Date` gives it


def exhausted_wait(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The seconds until the limits a successful answer says are used up (a remaining count
    of `0`) reset, read as a 429's `anthropic-ratelimit-*-reset` moments are; `None` when
    none is used up, or none of those says when it resets. `headers` lower-cased, as an
    `HttpResponse` has them: an answer with limits left costs a few dictionary lookups."""
    # A plain loop that returns at once, for every successful answer goes through it.
    for remaining in _REMAINING:
        left = headers.get(remaining)
        if left is not None and left.strip() == "0":
            return _used_up_wait(headers, now)
    return None


def _used_up_wait(headers: Mapping[str, str], now: float | None) -> float | None:
    """`exhausted_wait` where a remaining count reads `0`: until the latest of the resets
    of those used up."""
    moments = [
        moment
        for _, remaining, reset in _HEADERS
        if (left := headers.get(remaining)) is not None
        and left.strip() == "0"
        and (moment := rfc3339_seconds(headers.get(reset))) is not None
    ]
    return wait_until(max(moments), headers, now) if moments else None


def _finish(
    error: Error,
    *,
    request_id: str | None,
    provider: str | None,
    model: str | None,
) -> Error:
    if request_id:
        error.with_request_id(request_id)
    if provider is not None:
        error.with_provider(provider)
    if model is not None:
        error.with_model(model)
    return error


def error_from_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
    now: float | None = None,
) -> Error:
    """The error for an HTTP response with status >= 400. `now` is for tests (`retry_after`)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        payload: Any = wire_json(text) if text.strip() else None
    except ValueError:
        payload = None
    info = _Info.parse(payload)
    message = info.message if info is not None else body_message(text, status)
    lower = {key.lower(): value for key, value in headers.items()}
    wait = retry_after(lower, now=now)
    error = waits_as_asked(_classify(status, info, message, wait), lower, now=now)
    if not text.strip():
        error.mark_authored()  # an empty body's `HTTP <status>` is allama's
    elif not error.authored:
        error.mark_upstream()
    error.with_status(status).with_body(text)
    flag = lower.get("x-should-retry", "").strip().lower()
    if flag == "true" and not isinstance(error, QuotaExceededError):
        error.with_retryable(True)
    elif flag == "false":
        error.with_retryable(False)
    return _finish(
        error,
        request_id=lower.get("request-id") or (info.request_id if info else None),
        provider=provider,
        model=model,
    )


def error_from_payload(
    payload: dict[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
) -> Error:
    """The error for an `event: error` inside a stream (HTTP 200: there is no status, but an
    error object in OpenAI's shape may give one as its `code`), or for an unnamed event that
    holds an error object (another host of the dialect's)."""
    info = _Info.parse(payload) or _Info(json.dumps(payload))
    error = _classify(info.status, info, info.message, None)
    if not error.authored:
        error.mark_upstream()
    error.with_body(json.dumps(payload))
    return _finish(error, request_id=info.request_id, provider=provider, model=model)
