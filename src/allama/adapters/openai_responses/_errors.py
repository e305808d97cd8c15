"""An error response, a failed response or a stream's error event to the right `allama.Error`.

Error statuses carry the body Chat Completions errors carry (`{"error": {message, type,
param, code}}`), so they go through its mapping: rate limits and their `retry-after` and
`x-ratelimit-reset-*` waits, quotas, full context windows, schemas refused on `text.format`
or a tool, keys, `x-should-retry`. What is the Responses API's own:

- A response whose `status` is `failed` holds its error as `error: {code, message}` in a
  successful (2xx) body or in `response.failed`; a stream's `error` event has `code`,
  `message` and `param` at its top (older servers nest them under `error`). Neither has an
  HTTP status, so the code decides.
- The codes of a failed response that blame the request are invalid requests, not server
  errors: asking again would fail again. They are the prompt refused (`invalid_prompt`) or
  refused by a content policy (`bio_policy`, `misalignment_policy_violation`, as
  `image_content_policy_violation` is), the image codes, and `data_residency_mismatch`
  (the project's data residency does not allow the request), and a content filter's
  (`content_filter`, `content_policy_violation`: Azure's, which its HTTP 400 carries too).
  The same code is the same error in a failed response's body, in `response.failed` and in
  a stream's `error` event, as it is over HTTP.
- An error without a status whose `type` is `invalid_request_error` (Azure's `error`
  frame) blames the request too, unless its code says more (a full context, a schema).
- The codes that say the server is too busy for now (`server_is_overloaded`, `slow_down`)
  are an overloaded server without a status too, as their HTTP 503 is: the same error in a
  failed body, in `response.failed` and in an `error` event (Chat Completions' codes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from allama.adapters.openai_compat._errors import (
    ErrorInfo,
    error_from_response,
    retry_after_seconds,
)
from allama.adapters.openai_compat._errors import error_from_payload as _chat_error
from allama.errors import Error, InvalidRequestError, ServerError

__all__ = [
    "REQUEST_CODES",
    "error_from_failed",
    "error_from_payload",
    "error_from_response",
    "retry_after_seconds",
]

REQUEST_CODES = frozenset(
    {
        "invalid_prompt",
        "bio_policy",
        "misalignment_policy_violation",
        "data_residency_mismatch",
        "invalid_image",
        "invalid_image_format",
        "invalid_base64_image",
        "invalid_image_url",
        "invalid_image_mode",
        "image_too_large",
        "image_too_small",
        "image_parse_error",
        "image_content_policy_violation",
        "image_file_too_large",
        "unsupported_image_media_type",
        "empty_image_file",
        "failed_to_download_image",
        "image_file_not_found",
        "content_filter",
        "content_policy_violation",
    }
)
"""Codes of a failed response that blame what was sent."""


def error_from_payload(
    payload: dict[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
) -> Error:
    """The error for an error object without an HTTP status: a stream's `error` event, or
    `{"error": ...}` as a failed response holds it."""
    info = ErrorInfo.parse(payload)
    if info is None:
        return _chat_error(payload, provider=provider, model=model)
    code = (info.code or "").lower()
    if code not in REQUEST_CODES:
        # (Chat Completions' mapping: one typed `invalid_request_error` blames the request,
        # as its HTTP 400 would; a code of a server too busy is an overloaded server.)
        return _chat_error(payload, provider=provider, model=model)
    error = InvalidRequestError(info.message).mark_upstream().with_body(json.dumps(payload))
    return named_by(error, provider, model)


def error_from_failed(
    response: Mapping[str, Any],
    *,
    provider: str | None = None,
    model: str | None = None,
) -> Error:
    """The error of a response whose `status` is `failed`."""
    inner = response.get("error")
    if isinstance(inner, dict):
        return error_from_payload({"error": inner}, provider=provider, model=model)
    error = ServerError("the response failed, and the provider did not say why")
    return named_by(error.mark_authored().with_body(json.dumps(response)), provider, model)


def named_by(error: Error, provider: str | None, model: str | None) -> Error:
    """`error`, with the provider and the model that made it where they are known."""
    if provider is not None:
        error.with_provider(provider)
    if model is not None:
        error.with_model(model)
    return error
