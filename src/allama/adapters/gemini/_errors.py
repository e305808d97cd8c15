"""A Gemini error response (or an error object inside a stream) to the right `allama.Error`.

Gemini (and Vertex AI) answer with a google.rpc status:
`{"error": {"code": <HTTP status>, "message", "status": <google.rpc code name>, "details":
[{"@type": "type.googleapis.com/google.rpc.<T>", ...}]}}`, sometimes wrapped in a
one-element JSON array. The status name decides the class; the HTTP status decides only when
the name is missing or one allama does not map (or the body is not JSON at all, such as a
front end's HTML page). The details refine it:

- `ErrorInfo.reason == "API_KEY_INVALID"` (sent for a wrong and for an expired key, with
  status `INVALID_ARGUMENT`), or a message saying the key is not valid, has expired or was
  not sent ("unregistered callers", a 403), is an `AuthenticationError`, whatever the status.
- A 400 rejecting a schema (of `generationConfig.responseSchema` / `responseJsonSchema`, or
  of a function declaration's parameters), a schema too complex to serve, or JSON output
  asked for together with function calling, is an `UnsupportedError` on that field, so that
  an extraction can fall back to another way of asking (a schema too complex names none:
  the provider reads it from the request); a 400 saying the input does not fit is a
  `ContextWindowExceededError`.
- `RESOURCE_EXHAUSTED` is a `RateLimitedError` that waits `RetryInfo.retryDelay` (or the
  `retry-after` header), unless the quota is one that waiting a moment will not clear: a
  `QuotaFailure` violation of a per-day quota, or a quota whose limit is 0 (the tier does
  not include the model). That is a `QuotaExceededError`, not retryable, as the OpenAI
  family's `insufficient_quota` is.

The provider's words are kept as an upstream message and never logged.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from allama.adapters._http import body_message, wire_json
from allama.adapters.openai_compat._errors import retry_after_seconds, waits_as_asked
from allama.errors import (
    QUOTA_TOKENS_PER_MINUTE_KEY,
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
    "retry_delay_seconds",
]

# Patterns for error messages, compiled by `re` (and kept in its cache) when an error first
# needs them: a call that succeeds never does.
_BAD_KEY = r"(?i)api key not valid|api key expired|unregistered callers"
_BAD_KEY_REASONS = frozenset({"API_KEY_INVALID"})
# JSON output asked for together with function declarations (Gemini 2.5 and older): the
# response format is what to give up, the tools being the other way to get JSON.
_MIME_CONFLICT = r"(?i)(?:function calling|tool use) with a response mime type"
_TOO_COMPLEX = r"(?i)too many states for serving|schema produces a constraint"
_RESPONSE_SCHEMA = r"(?i)generation_?config\.response_?(?:json_?)?schema|response_?json_?schema"
_TOOL_SCHEMA = r"(?i)function_?declarations\[\d+\]\.parameters|parameters_?json_?schema"
_NAMES_TOOLS = r"(?i)function_?declarations|\btools?\b"
_CONTEXT_WORDS = r"(?i)exceeds the maximum number of tokens|input token count"
# A quota that does not clear within minutes: per day, or a limit of 0.
_LASTING_QUOTA = r"(?i)per[_ -]?day"
_ZERO_LIMIT = r"(?i)\blimit:\s*0(?![\d.])"
_QUOTA_VALUE = r"[0-9]{1,18}"
"""A quota's `quotaValue` as Google writes it: ASCII digits (`str.isdigit` takes `²` too)."""
_INPUT_TOKENS_PER_MINUTE = r"(?i)input_?tokens?\w*per_?minute|InputTokens\w*PerMinute"
_DURATION = r"\s*(\d+(?:\.\d*)?|\.\d+)s\s*"


class _Info:
    """The fields of an error body; `None` (or empty) where the body does not say."""

    __slots__ = ("code", "details", "message", "status")

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        status: str | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        self.message = message
        self.code = code
        self.status = status
        self.details = details or []

    @classmethod
    def parse(cls, payload: Any) -> _Info | None:
        if isinstance(payload, list) and len(payload) == 1:
            payload = payload[0]
        if not isinstance(payload, dict):
            return None
        inner = payload.get("error")
        if isinstance(inner, str) and inner:
            return cls(inner)
        if not isinstance(inner, dict):
            return None
        message = inner.get("message")
        code = inner.get("code")
        status = inner.get("status")
        details = inner.get("details")
        if not isinstance(details, list):
            details = []
        return cls(
            message if isinstance(message, str) and message else json.dumps(inner),
            code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            status=status if isinstance(status, str) and status else None,
            details=[d for d in details if isinstance(d, dict)]
            if isinstance(details, list)
            else [],
        )

    def detail(self, kind: str) -> list[dict[str, Any]]:
        """The details of one google.rpc type (`ErrorInfo`, `RetryInfo`, `QuotaFailure`)."""
        return [d for d in self.details if str(d.get("@type", "")).rsplit(".", 1)[-1] == kind]


def retry_delay_seconds(value: Any) -> float | None:
    """A protobuf `Duration` in seconds: its JSON form (`"37s"`, `"1.5s"`), or an object
    `{"seconds", "nanos"}`; `None` when it is neither, or not a finite number (`"NaN"`
    is no wait to honour, and an infinite one would hold a run for good)."""
    if isinstance(value, str):
        match = re.fullmatch(_DURATION, value)
        seconds = float(match.group(1)) if match else None
    elif isinstance(value, dict):
        try:
            seconds = float(value.get("seconds", 0)) + float(value.get("nanos", 0)) / 1e9
        except (TypeError, ValueError):
            return None
    else:
        return None
    return seconds if seconds is not None and math.isfinite(seconds) else None


def _retry_info(info: _Info | None) -> float | None:
    """The wait a `google.rpc.RetryInfo` asks for, whatever the error."""
    if info is not None:
        for retry in info.detail("RetryInfo"):
            delay = retry_delay_seconds(retry.get("retryDelay"))
            if delay is not None:
                return max(0.0, delay)
    return None


def _wait(info: _Info | None, headers: Mapping[str, str], now: float | None) -> float | None:
    """How long to wait: `RetryInfo.retryDelay` first, then the `retry-after` header."""
    delay = _retry_info(info)
    if delay is not None:
        return delay
    return retry_after_seconds(headers, now=now) if headers else None


def _bad_key(info: _Info | None, message: str) -> bool:
    """Whether the error is a key Google refused: an `ErrorInfo` reason that says so (one
    not a string says nothing), or the message's words."""
    if info is not None and any(
        isinstance(reason := d.get("reason"), str) and reason in _BAD_KEY_REASONS
        for d in info.detail("ErrorInfo")
    ):
        return True
    return re.search(_BAD_KEY, message) is not None


def _rejected_schema(message: str) -> RequestField | None:
    """The request field whose schema Gemini refused, if the message says it did."""
    if re.search(_MIME_CONFLICT, message):
        return RequestField.RESPONSE_FORMAT
    if re.search(_TOO_COMPLEX, message):
        # Its usual words name no field: `_invalid_argument` leaves it to the request.
        if re.search(_NAMES_TOOLS, message):
            return RequestField.TOOLS
        return RequestField.RESPONSE_FORMAT if re.search(_RESPONSE_SCHEMA, message) else None
    if re.search(_RESPONSE_SCHEMA, message):
        return RequestField.RESPONSE_FORMAT
    if re.search(_TOOL_SCHEMA, message):
        return RequestField.TOOLS
    return None


def _invalid_argument(message: str) -> Error:
    """A 400: a schema Gemini refuses, a full context window, or a plain invalid request."""
    field = _rejected_schema(message)
    if field is not None:
        return UnsupportedError(message, field=field, stage=UnsupportedStage.PROVIDER)
    if re.search(_TOO_COMPLEX, message):
        # A schema too complex to serve, naming none: the response schema and the function
        # declarations all constrain the output, so the provider puts it on the field the
        # request carries them in.
        refused = UnsupportedError(message, stage=UnsupportedStage.PROVIDER)
        return refused.with_metadata(SCHEMAS_TOGETHER_KEY, "all")
    if re.search(_CONTEXT_WORDS, message):
        return ContextWindowExceededError(message)
    return InvalidRequestError(message)


def _lasting_quota(info: _Info | None, message: str) -> bool:
    """Whether the exhausted quota is one that waiting a moment will not clear."""
    for names, violation in _violations(info):
        if re.search(_LASTING_QUOTA, names) or str(violation.get("quotaValue")) == "0":
            return True
    return bool(re.search(_LASTING_QUOTA, message) or re.search(_ZERO_LIMIT, message))


_ACCOUNT_PRECONDITION = (
    r"(?i)billing|free tier|location is not supported|not available in your (?:country|region)"
)
"""How Gemini words a `FAILED_PRECONDITION` of the account rather than of the request."""


def _exhausted(info: _Info | None, message: str, wait: float | None) -> Error:
    if _lasting_quota(info, message):
        return QuotaExceededError(message).with_retryable(False)
    limited = RateLimitedError(message, retry_after=wait)
    quota = _input_tokens_per_minute(info)
    if quota is not None:
        limited.with_metadata(QUOTA_TOKENS_PER_MINUTE_KEY, quota)
    return limited


def _input_tokens_per_minute(info: _Info | None) -> int | None:
    """The quota of input tokens per minute a `QuotaFailure` names as the one exceeded
    (`GenerateContentPaidTierInputTokensPerModelPerMinute`, its `quotaValue`)."""
    for names, violation in _violations(info):
        value = str(violation.get("quotaValue", ""))
        if re.search(_INPUT_TOKENS_PER_MINUTE, names) and re.fullmatch(_QUOTA_VALUE, value):
            return int(value)
    return None


def _violations(info: _Info | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each violation of the body's `QuotaFailure` details, with its quota's names (its
    `quotaId` and `quotaMetric`, to search)."""
    for failure in info.detail("QuotaFailure") if info is not None else ():
        violations = failure.get("violations")
        for violation in violations if isinstance(violations, list) else ():
            if isinstance(violation, dict):
                names = f"{violation.get('quotaId', '')} {violation.get('quotaMetric', '')}"
                yield names, violation


def _by_name(name: str, info: _Info | None, message: str, wait: float | None) -> Error | None:
    if name == "INVALID_ARGUMENT":
        return _invalid_argument(message)
    if name == "FAILED_PRECONDITION":
        # Billing to enable, a region the free tier does not serve: the account may not use
        # the API, whatever is asked (a batch run stops). Other preconditions (a batch job
        # already ended) are the request's own. Asking again won't help either.
        if re.search(_ACCOUNT_PRECONDITION, message):
            return PermissionDeniedError(message)
        return InvalidRequestError(message)
    if name == "UNAUTHENTICATED":
        return AuthenticationError(message)
    if name == "PERMISSION_DENIED":
        return PermissionDeniedError(message)
    if name == "NOT_FOUND":
        return NotFoundError(message)
    if name == "RESOURCE_EXHAUSTED":
        return _exhausted(info, message, wait)
    if name in ("INTERNAL", "DEADLINE_EXCEEDED", "CANCELLED"):
        # `DEADLINE_EXCEEDED` (504) is the server running out of time, not the client's
        # timeout (`RequestTimeoutError`): a retry may succeed. A `RetryInfo` says when.
        # `CANCELLED` (499) that reaches the client was the server's doing, under load.
        return ServerError(message, retry_after=_retry_info(info))
    if name == "UNAVAILABLE":
        return OverloadedError(message, retry_after=_retry_info(info))
    return None


def _by_status(status: int | None, info: _Info | None, message: str, wait: float | None) -> Error:
    """The error for a status name allama does not map (or no body at all), by HTTP status."""
    if status is None:
        # An error object in a stream that says neither: the server gave up.
        return ServerError(message)
    if status == 401:
        return AuthenticationError(message)
    if status == 403:
        return PermissionDeniedError(message)
    if status == 404:
        return NotFoundError(message)
    if status == 408:
        return RequestTimeoutError(message)
    if status == 429:
        return _exhausted(info, message, wait)
    if status == 503:
        # An explicit `retry-after` is read for it after (`waits_as_asked`); the rate-limit
        # resets a 429 goes by say nothing of when a failed server recovers.
        return OverloadedError(message, retry_after=_retry_info(info))
    if status >= 500 or status == 499:  # 499: `CANCELLED`, the server's (above)
        return ServerError(message, retry_after=_retry_info(info))
    if status == 409:
        # `ABORTED`, a conflict: asking again may succeed.
        return InvalidRequestError(message).with_retryable(True)
    return _invalid_argument(message)


def _classify(status: int | None, info: _Info | None, message: str, wait: float | None) -> Error:
    if _bad_key(info, message):
        return AuthenticationError(message)
    if info is not None and info.status is not None:
        error = _by_name(info.status, info, message, wait)
        if error is not None:
            return error
    return _by_status(status, info, message, wait)


def _finish(error: Error, *, provider: str | None, model: str | None) -> Error:
    if not error.authored:
        error.mark_upstream()
    if provider is not None:
        error.with_provider(provider)
    if model is not None:
        error.with_model(model)
    return error


def _http_status(code: int | None) -> int | None:
    return code if code is not None and 400 <= code <= 599 else None


def error_from_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    provider: str | None = None,
    model: str | None = None,
    now: float | None = None,
) -> Error:
    """The error for an HTTP response with status >= 400. `now` (seconds since the epoch)
    is for tests: it reads a `retry-after` given as an HTTP date."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        payload: Any = wire_json(text) if text.strip() else None
    except ValueError:
        payload = None
    info = _Info.parse(payload)
    message = info.message if info is not None else body_message(text, status)
    lower = {key.lower(): value for key, value in headers.items()}
    error = _classify(status, info, message, _wait(info, lower, now))
    waits_as_asked(error, lower, now=now).with_status(status).with_body(text)
    error = _finish(error, provider=provider, model=model)
    return error if text.strip() else error.mark_authored()  # `HTTP <status>`: allama's


def error_from_payload(
    payload: Any,
    *,
    provider: str | None = None,
    model: str | None = None,
) -> Error:
    """The error for an error object inside a stream or a 200 body. Its `code` is the HTTP
    status the server would have answered with; it becomes the error's status."""
    info = _Info.parse(payload) or _Info(json.dumps(payload))
    code = _http_status(info.code)
    error = _classify(code, info, info.message, _wait(info, {}, None))
    if code is not None:
        error.with_status(code)
    error.with_body(json.dumps(payload))
    return _finish(error, provider=provider, model=model)
