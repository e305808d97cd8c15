"""An Ollama error response (or an error line inside a stream) to the right `allama.Error`.

Ollama answers `{"error": "<message>"}` (a cloud sign-in error adds `signin_url`); a relayed
OpenAI-style object (`{"error": {"message": ...}}`) is read too, as is llama-server's error
object relayed as the JSON text of `error` (Ollama v0.30 on), whose `message` is the one
kept; a body that is not JSON keeps its text. The HTTP status decides the class, refined by
the message:

- a model the server does not have (404, "model 'x' not found") is a `NotFoundError` whose
  message adds the remedy, `ollama pull <model>`, unless it already says to pull ("try
  pulling it first") or the server is Ollama's cloud (`cloud`), where nothing is pulled;
- a `format` Ollama could not compile ("invalid format", "invalid JSON schema", llama.cpp's
  "failed to parse grammar" and conversion errors) is an `UnsupportedError` on the response
  format, at whatever status it comes (an invalid `format` surfaces as a 500 from the runner
  layer), so that an extraction can tell it from a broken server;
- a model without tools or without thinking ("... does not support tools", "... does not
  support thinking") is an `UnsupportedError` on `tools` / `reasoning_effort`;
- an input longer than the context ("exceeds the context length", llama-server's
  "exceeds the available context size") is a `ContextWindowExceededError`: what Ollama
  answers to the `truncate: false` allama sends, where it would otherwise cut the prompt.
  Its message adds the remedies, a larger `num_ctx` or `truncate: true` in the body
  option, unless the server is Ollama's cloud, which does not say that it reads `num_ctx`;
- a model larger than the memory the server has ("model requires more system memory (12.0
  GiB) than is available (8.0 GiB)") is a `ServerError` that is not retryable: each try
  would load the model again, into the same memory;
- a 429 for a spent usage limit (Ollama Cloud's "reached your weekly usage limit", its
  session or hourly one, with no `retry-after`) is a `QuotaExceededError`, not retryable,
  as the OpenAI family's is for such words;
- 401 is an `AuthenticationError`, 403 a `PermissionDeniedError`, any other 429 a
  `RateLimitedError` waiting what `retry-after` says, 503 ("server busy ... maximum pending
  requests exceeded") an `OverloadedError`, any other 5xx a `ServerError`, any other 4xx an
  `InvalidRequestError`.

An error line in a stream carries no status: the message alone decides. Only Ollama's own
wording of a missing model (`model "x" not found`, the name quoted) makes a `NotFoundError`
there; a line that says nothing known is a `ServerError` (the server gave up mid-answer).

The provider's words are kept as an upstream message and never logged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from allama.adapters._http import body_message, wire_json
from allama.adapters.openai_compat._errors import (
    retry_after_seconds,
    spent_quota,
    waits_as_asked,
)
from allama.errors import (
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

__all__ = ["error_from_payload", "error_from_response", "message_of"]

# Patterns for error messages, compiled by `re` (and kept in its cache) when an error first
# needs them: a call that succeeds never does.
_MODEL_NOT_FOUND = r"(?i)\bmodel\b.*\bnot found"
_QUOTED_MODEL = r"""\bmodel\s+['"`]([^'"`\s]+)['"`]"""
# Without a status, only Ollama's own words for a missing model: a runner failure that merely
# mentions a model and a missing file ("failed to load model vocab: file not found") is not one.
_OLLAMA_MISSING_MODEL = r"""(?i)\bmodel\s+(['"])[^'"\s]+\1\s+not found"""
# The message already tells how to fetch it (Ollama's "try pulling it first").
_SAYS_PULL = r"(?i)\bpull(?:ing)?\s+it\b|\bollama\s+pull\b"
_FORMAT = (
    r"(?i)invalid format|invalid json schema|json schema conversion|failed to parse grammar|"
    r"unrecognized schema|unsupported ref|unsupported pattern|format.*json schema"
)
_NO_TOOLS = r"(?i)does not support tools"
_NO_THINKING = r"(?i)does not support thinking"
_CONTEXT_WORDS = (
    r"(?i)context (?:length|window|size)|exceeds? the (?:available )?context|"
    r"prompt (?:is )?too long|too many tokens"
)
_BUSY = r"(?i)server busy|maximum pending requests"
_NO_MEMORY = r"(?i)requires more (?:system )?memory\b.*\bthan is available"


def message_of(payload: Any) -> str | None:
    """The message of an error object: `error` as text, or an object's `message`."""
    if not isinstance(payload, dict):
        return None
    inner = payload.get("error")
    if isinstance(inner, str) and inner.startswith("{"):
        # llama-server's own error object, which Ollama relays as the text of `error`.
        try:
            relayed = message_of(wire_json(inner))
        except ValueError:
            relayed = None
        return relayed or inner
    if isinstance(inner, str) and inner:
        return inner
    if isinstance(inner, dict):
        message = inner.get("message")
        return message if isinstance(message, str) and message else json.dumps(inner)
    return None


def _pull_remedy(message: str, model: str | None) -> str:
    """The not-found message with the command that fetches the model, unless it says so."""
    if re.search(_SAYS_PULL, message):
        return message
    quoted = re.search(_QUOTED_MODEL, message)
    name = model or (quoted.group(1) if quoted else "<model>")
    return f"{message} (pull it with `ollama pull {name}`)"


def _context_remedy(message: str) -> str:
    """The full-context message with what lets the prompt through: the context Ollama gives
    a model (`num_ctx`) is often far below the model's own, and `truncate: false` (sent by
    allama) is why the prompt was not cut to fit."""
    return (
        f"{message} (give the model a larger context, `num_ctx` in the body option "
        '`ollama`\'s `"options"`, or send `"truncate": true` there to let Ollama cut the '
        "prompt)"
    )


def _by_message(message: str, *, cloud: bool) -> Error | None:
    """The error the message alone says, whatever the status."""
    if re.search(_FORMAT, message):
        return UnsupportedError(
            message, field=RequestField.RESPONSE_FORMAT, stage=UnsupportedStage.PROVIDER
        )
    if re.search(_NO_TOOLS, message):
        return UnsupportedError(message, field=RequestField.TOOLS, stage=UnsupportedStage.PROVIDER)
    if re.search(_NO_THINKING, message):
        return UnsupportedError(
            message, field=RequestField.REASONING_EFFORT, stage=UnsupportedStage.PROVIDER
        )
    if re.search(_CONTEXT_WORDS, message):
        return ContextWindowExceededError(message if cloud else _context_remedy(message))
    return None


def _classify(
    status: int | None, message: str, model: str | None, wait: float | None, *, cloud: bool
) -> Error:
    if status == 404:
        if re.search(_MODEL_NOT_FOUND, message) and not cloud:  # the cloud pulls nothing
            return NotFoundError(_pull_remedy(message, model))
        return NotFoundError(message)
    if status is None and re.search(_OLLAMA_MISSING_MODEL, message):
        return NotFoundError(message if cloud else _pull_remedy(message, model))
    if status == 429:
        if spent_quota(message, wait):
            # Every request meets it until the period ends: a batch run stops, not retries.
            return QuotaExceededError(message).with_retryable(False)
        return RateLimitedError(message, retry_after=wait)
    if status == 401:
        return AuthenticationError(message)
    if status == 403:
        return PermissionDeniedError(message)
    known = _by_message(message, cloud=cloud)
    if known is not None:
        return known
    if status == 408:
        return RequestTimeoutError(message)
    if re.search(_NO_MEMORY, message):
        # Each try loads the model again, into the memory it did not fit.
        return ServerError(message).with_retryable(False)
    if status == 503 or re.search(_BUSY, message):
        return OverloadedError(message)
    if status is None or status >= 500:
        # An error line in a stream says no status: the server gave up mid-answer.
        return ServerError(message)
    return InvalidRequestError(message)


def _finish(error: Error, *, provider: str | None, model: str | None) -> Error:
    error.mark_upstream()
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
    cloud: bool = False,
) -> Error:
    """The error for an HTTP response with status >= 400; `cloud`: the server is Ollama's
    cloud (`OllamaProfile.cloud`). `now` (seconds since the epoch) is for tests: it reads a
    `retry-after` given as an HTTP date."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        payload: Any = wire_json(text) if text.strip() else None
    except ValueError:
        payload = None
    message = message_of(payload) or body_message(text, status)
    wait = retry_after_seconds(headers, now=now) if headers else None
    known = _classify(status, message, model, wait, cloud=cloud)
    error = known.with_status(status).with_body(text)
    waits_as_asked(error, headers, now=now)
    error = _finish(error, provider=provider, model=model)
    return error if text.strip() else error.mark_authored()  # `HTTP <status>`: allama's


def error_from_payload(
    payload: Any,
    *,
    provider: str | None = None,
    model: str | None = None,
    cloud: bool = False,
) -> Error:
    """The error for an error object inside a stream (or a 200 body): no status, so the
    message alone decides; `cloud` as for `error_from_response`."""
    message = message_of(payload) or json.dumps(payload)
    error = _classify(None, message, model, None, cloud=cloud).with_body(json.dumps(payload))
    return _finish(error, provider=provider, model=model)
