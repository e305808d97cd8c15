"""One hierarchy of errors under `allama.Error`, each with a context and a redacted log view.

A provider's own words (an error body, a message it wrote) may quote the caller's input, so
they are kept for the caller but left out of `repr` and of the log view (`Error.as_log`).
Messages allama wrote itself are marked *authored* and may be logged.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from allama.types import RequestField, UnsupportedStage

if TYPE_CHECKING:
    from pydantic import JsonValue

    from allama.extract._metadata import ExtractionMetadata
    from allama.types import ChatResponse

__all__ = [
    "AuthenticationError",
    "ContextWindowExceededError",
    "Error",
    "ErrorContext",
    "ErrorLog",
    "ExtractionError",
    "IncompleteStreamError",
    "InvalidRequestError",
    "MessageOrigin",
    "NetworkError",
    "NotFoundError",
    "OverloadedError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "RateLimitedError",
    "RejectedOutputError",
    "RequestTimeoutError",
    "ServerError",
    "StreamDecodeError",
    "StreamError",
    "UnsupportedError",
]

EXTRACTION_METADATA_KEY = "allama.extraction"
"""The context metadata key under which an extraction attaches its record to a provider error."""

REPORTED_USAGE_KEY = "allama.usage"
"""The context metadata key of the usage a provider reported with an error in a 200 body (an
error on the choice, a failed response): tokens paid for, which an extraction records."""

REPORTED_MODEL_KEY = "allama.usage_model"
"""Beside `REPORTED_USAGE_KEY`: the model the body that reported the usage names, whose
prices were paid (a router asked for `openrouter/auto` answers as the model it chose)."""

REPORTED_TIER_KEY = "allama.usage_tier"
"""Beside `REPORTED_USAGE_KEY`: the service tier other than the standard one the body says
served the call (`priority`, `flex`), whose prices were paid."""

REPORTED_EXTRAS_KEY = "allama.usage_extras"
"""Beside `REPORTED_USAGE_KEY`: what the call was billed for beyond its token counts, by
`allama._prices.BILLED_EXTRAS` names (Anthropic's one-hour cache writes and web searches,
Gemini's audio tokens), which its price counts."""

REPORTED_COST_KEY = "allama.usage_cost"
"""Beside `REPORTED_USAGE_KEY`: what the body says the call cost, verbatim (the money fields
of `allama.types._response.USAGE_COST_KEY`), which its price is read from where it says it
in full (OpenRouter's)."""

QUOTA_TOKENS_PER_MINUTE_KEY = "allama.quota_tokens_per_minute"
"""On a rate limit: the quota of input tokens per minute the provider says the request met
(Gemini's `QuotaFailure`). A request larger than it never gets through, however long it
waits: its provider makes such an error one not worth retrying."""

UNNAMED_PARAMETERS_KEY = "allama.unnamed_parameters"
"""On an `UnsupportedError` with no field: the provider refused "the requested parameters"
without naming one (OpenRouter's 404 when no endpoint serves them all). The provider puts
it on the field of the request's schema; a decision first asks again without the
log-probabilities it added itself."""

SCHEMAS_TOGETHER_KEY = "allama.schemas_together"
"""On an `UnsupportedError` with no field: the provider refused the request's schemas by a
limit on all of them together (Anthropic's grammar "too large", Gemini's "too many states"),
in words that name no field. Its value says which tools' schemas count beside the response
format's: `"strict"` (those sent `strict`, the only ones Anthropic compiles) or `"all"`. The
provider puts the error on the field that carries them, from the request it answers (none
when both do)."""

PAID_BEFORE_KEY = "allama.paid_before"
"""The context metadata key of what earlier failed attempts of the same call reported paying
(a retry that gave up): a list of `{"provider", "model", "usage"}`, beside the error's own
`REPORTED_USAGE_KEY`."""

_LOGGED_METADATA_PREFIX = "allama."


class MessageOrigin(StrEnum):
    """Who wrote an error's message: allama (`AUTHORED`), the provider (`UPSTREAM`), or unknown."""

    AUTHORED = "authored"
    UPSTREAM = "upstream"
    UNKNOWN = "unknown"


class ErrorContext:
    """Where an error happened: provider, model, request id, HTTP status, and extra metadata.

    `body` is the provider's error body, kept for the caller and never logged.
    Metadata under `allama.*` keys is allama's own and appears in the log view; any other
    key may quote upstream text and does not.
    """

    __slots__ = ("body", "metadata", "model", "provider", "request_id", "status")

    def __init__(
        self,
        *,
        provider: str | None = None,
        model: str | None = None,
        request_id: str | None = None,
        status: int | None = None,
        body: str | None = None,
        metadata: dict[str, JsonValue] | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.request_id = request_id
        self.status = status
        self.body = body
        self.metadata: dict[str, JsonValue] = dict(metadata or {})

    def to_dict(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {}
        for key in ("provider", "model", "request_id", "status", "body"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ErrorContext:
        return cls(
            provider=data.get("provider"),
            model=data.get("model"),
            request_id=data.get("request_id"),
            status=data.get("status"),
            body=data.get("body"),
            metadata=data.get("metadata"),
        )

    def __repr__(self) -> str:
        shown = [
            f"{key}={getattr(self, key)!r}"
            for key in ("provider", "model", "request_id", "status")
            if getattr(self, key) is not None
        ]
        if self.body is not None:
            shown.append(f"body=<withheld {len(self.body)} chars>")
        if self.metadata:
            shown.append(f"metadata_keys={sorted(self.metadata)!r}")
        return f"ErrorContext({', '.join(shown)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ErrorContext) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]


_E = TypeVar("_E", bound="Error")
_REGISTRY: dict[str, type[Error]] = {}


def text_of(value: object) -> str:
    """What `str` gives, or the kind of object it is where that raises: an exception's text
    must never fail what reports it."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    try:
        return str(value)
    except Exception:  # a `__str__` that raises: the kind of object it is
        return f"<{type(value).__name__}>"


class Error(Exception):
    """The base of every error allama raises.

    Catch a subclass to handle one kind (`RateLimitedError`), or this to handle them all.
    `retryable` says whether the same request may succeed later; `fallback_from` holds the
    error a failover fell back from (a chain).

    Setters such as `with_provider` update the error in place and return it, so that an
    adapter can build one in a single expression.
    """

    kind: ClassVar[str] = "error"
    retryable_by_default: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        context: ErrorContext | None = None,
        origin: MessageOrigin = MessageOrigin.UNKNOWN,
        retryable: bool | None = None,
        fallback_from: Error | None = None,
    ) -> None:
        if not isinstance(message, str):
            # A provider of the caller's own may pass what its body held (`None`, a number,
            # bytes): the error's text is its `str`, so that every view of it can be made.
            message = "" if message is None else text_of(message)
        super().__init__(message)
        self.message = message
        self.context = context if context is not None else ErrorContext()
        self.origin = origin
        self._retryable = retryable
        self.fallback_from = fallback_from

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            _REGISTRY[cls.kind] = cls

    # Accessors

    @property
    def retryable(self) -> bool:
        return self.retryable_by_default if self._retryable is None else self._retryable

    @property
    def retry_after(self) -> float | None:
        """Seconds the provider asked to wait before retrying, when it said."""
        return None

    @property
    def provider(self) -> str | None:
        return self.context.provider

    @property
    def model(self) -> str | None:
        return self.context.model

    @property
    def status(self) -> int | None:
        return self.context.status

    @property
    def request_id(self) -> str | None:
        return self.context.request_id

    @property
    def authored(self) -> bool:
        """Whether allama wrote the message (so it may be logged)."""
        return self.origin is MessageOrigin.AUTHORED

    # Fluent setters (in place)

    def mark_authored(self) -> Self:
        self.origin = MessageOrigin.AUTHORED
        return self

    def mark_upstream(self) -> Self:
        self.origin = MessageOrigin.UPSTREAM
        return self

    def with_provider(self, provider: str) -> Self:
        self.context.provider = provider
        return self

    def with_model(self, model: str) -> Self:
        self.context.model = model
        return self

    def with_status(self, status: int) -> Self:
        self.context.status = status
        return self

    def with_request_id(self, request_id: str) -> Self:
        self.context.request_id = request_id
        return self

    def with_body(self, body: str) -> Self:
        self.context.body = body
        return self

    def with_metadata(self, key: str, value: JsonValue) -> Self:
        self.context.metadata[key] = value
        return self

    def with_fallback_from(self, error: Error) -> Self:
        self.fallback_from = error
        return self

    def with_retryable(self, retryable: bool) -> Self:
        self._retryable = retryable
        return self

    # Serialisation

    def _fields(self) -> dict[str, JsonValue]:
        """Fields of a subclass beyond the common ones."""
        return {}

    @classmethod
    def _restore(cls, message: str, fields: dict[str, Any]) -> Self:
        return cls(message)

    def to_dict(self) -> dict[str, JsonValue]:
        """The full form, upstream text included. `Error.from_dict` reads it back."""
        out: dict[str, JsonValue] = {"kind": self.kind, "message": self.message}
        fields = self._fields()
        if fields:
            out["fields"] = fields
        context = self.context.to_dict()
        if context:
            out["context"] = context
        if self.origin is not MessageOrigin.UNKNOWN:
            out["origin"] = self.origin.value
        if self._retryable is not None:
            out["retryable"] = self._retryable
        if self.fallback_from is not None:
            out["fallback_from"] = self.fallback_from.to_dict()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Error:
        cls = _REGISTRY.get(str(data.get("kind")), Error)
        error = cls._restore(str(data.get("message", "")), dict(data.get("fields") or {}))
        error.context = ErrorContext.from_dict(dict(data.get("context") or {}))
        error.origin = MessageOrigin(data.get("origin", MessageOrigin.UNKNOWN.value))
        error._retryable = data.get("retryable")
        fallback = data.get("fallback_from")
        error.fallback_from = Error.from_dict(fallback) if isinstance(fallback, dict) else None
        return error

    @staticmethod
    def from_json(text: str | bytes) -> Error:
        return Error.from_dict(json.loads(text))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Error.from_dict, (self.to_dict(),))

    # Redacted views

    def _log_message(self) -> str | None:
        """The message for the log view: only what allama wrote."""
        return self.message if self.authored else None

    def _log_fields(self) -> dict[str, JsonValue]:
        """Subclass fields safe for the log view."""
        return {}

    def as_log(self) -> ErrorLog:
        """A view for logs: kinds, ids, counts and allama's own words, never upstream text."""
        entries: dict[str, JsonValue] = {"kind": self.kind}
        for key in ("provider", "model", "status", "request_id"):
            value = getattr(self.context, key)
            if value is not None:
                entries[key] = value
        entries.update(self._log_fields())
        if self.context.body is not None:
            entries["body_len"] = len(self.context.body)
        for key, value in self.context.metadata.items():
            if key.startswith(_LOGGED_METADATA_PREFIX):
                entries[key] = value
        message = self._log_message()
        if message is not None:
            entries["message"] = message
        else:
            entries["message_len"] = len(self.message)
        if self.fallback_from is not None:
            entries["fallback_from"] = self.fallback_from.as_log().to_dict()
        return ErrorLog(entries)

    def __repr__(self) -> str:
        shown = (
            f"message={self.message!r}"
            if self.authored
            else (f"message=<withheld {len(self.message)} chars>")
        )
        return f"{type(self).__name__}({shown}, context={self.context!r})"

    def __str__(self) -> str:
        return self.message


class ErrorLog(Mapping[str, "JsonValue"]):
    """The redacted log view of an error: a read-only mapping (`to_dict` for a dict, to
    serialise) or one `key=value` line (`str`)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: dict[str, JsonValue]) -> None:
        self._entries = entries

    def to_dict(self) -> dict[str, JsonValue]:
        return dict(self._entries)

    def __getitem__(self, key: str) -> JsonValue:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __str__(self) -> str:
        parts: list[str] = []
        for key, value in self._entries.items():
            if key in ("message", "fallback_from"):
                continue
            if key == EXTRACTION_METADATA_KEY and isinstance(value, dict):
                parts.extend(_extraction_line(value))
            elif isinstance(value, dict):
                parts.extend(_flatten(key, value))
            else:
                parts.append(f"{key}={_scalar(value)}")
        message = self._entries.get("message")
        if message is not None:
            parts.append(f"message={json.dumps(message)}")
        fallback = self._entries.get("fallback_from")
        if isinstance(fallback, dict):
            # The chain a failover fell back from, oldest last, each as `fallback_from.…`.
            parts.extend(_flatten("fallback_from", fallback))
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"ErrorLog({self._entries!r})"


def _extraction_line(record: dict[str, JsonValue]) -> list[str]:
    """An extraction record in one line: its mode, passes and token counts (the dict has all)."""
    prefix = EXTRACTION_METADATA_KEY
    parts = [
        f"{prefix}.{key}={_scalar(record[key])}" for key in ("mode", "passes") if key in record
    ]
    usage = record.get("usage")
    if isinstance(usage, dict):
        for key in ("input_tokens", "output_tokens"):
            if usage.get(key) is not None:
                parts.append(f"{prefix}.{key}={_scalar(usage[key])}")
    return parts


def _flatten(prefix: str, value: dict[str, JsonValue]) -> list[str]:
    parts: list[str] = []
    for key, inner in value.items():
        if isinstance(inner, dict):
            parts.extend(_flatten(f"{prefix}.{key}", inner))
        elif isinstance(inner, list):
            parts.append(f"{prefix}.{key}_count={len(inner)}")
        else:
            parts.append(f"{prefix}.{key}={_scalar(inner)}")
    return parts


def _scalar(value: JsonValue) -> str:
    if isinstance(value, str):
        return (
            value
            if value and all(c.isalnum() or c in "._-:/" for c in value)
            else json.dumps(value)
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def _wait(seconds: float | None) -> float | None:
    """A wait as a number of seconds, 0 or more (a moment already past is 0); `None` for
    what is not one (`nan`, an infinity): what waits on it must be able to."""
    if seconds is None or isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    return max(float(seconds), 0.0) if math.isfinite(seconds) else None


class _Waits(Error):
    """An error after which the provider may say how long to wait (`retry_after`)."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self._retry_after = _wait(retry_after)

    @property
    def retry_after(self) -> float | None:
        return self._retry_after

    def with_retry_after(self, seconds: float | None) -> Self:
        self._retry_after = _wait(seconds)
        return self

    def _fields(self) -> dict[str, JsonValue]:
        return {} if self._retry_after is None else {"retry_after": self._retry_after}

    def _log_fields(self) -> dict[str, JsonValue]:
        return self._fields()

    @classmethod
    def _restore(cls, message: str, fields: dict[str, Any]) -> Self:
        return cls(message, retry_after=fields.get("retry_after"))


class RateLimitedError(_Waits):
    """Too many requests; `retry_after` says how long the provider asked to wait."""

    kind = "rate_limited"
    retryable_by_default = True


class QuotaExceededError(Error):
    """The account is out of credit or quota: waiting will not help."""

    kind = "quota_exceeded"


class RequestTimeoutError(Error):
    kind = "timeout"
    retryable_by_default = True


class AuthenticationError(Error):
    """The key is missing, wrong or revoked."""

    kind = "authentication"


class PermissionDeniedError(Error):
    kind = "permission"


class NotFoundError(Error):
    """The model, deployment or endpoint does not exist."""

    kind = "not_found"


class InvalidRequestError(Error):
    kind = "invalid_request"


class ContextWindowExceededError(InvalidRequestError):
    """The input does not fit the model's context window: shorten it."""

    kind = "context_window"


class RejectedOutputError(InvalidRequestError):
    """The model answered, and the provider refused the answer itself: its own check of the
    output against the schema failed (Groq's `json_validate_failed`; its `tool_use_failed`
    for a tool call). Asking again may give one it takes.

    `failed_output` is the model's output as the provider gave it back (`None` when it gave
    none): the model's words, kept for the caller and left out of `repr` and the log view.
    An extraction reads it as that pass's output, a refused call as the pass's call with a
    forced tool (asked again under `retries`; else a `ParseError` whose `raw` it is).
    """

    kind = "rejected_output"
    retryable_by_default = True

    def __init__(self, message: str, *, failed_output: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.failed_output = failed_output

    def _fields(self) -> dict[str, JsonValue]:
        return {} if self.failed_output is None else {"failed_output": self.failed_output}

    def _log_fields(self) -> dict[str, JsonValue]:
        output = self.failed_output
        return {} if output is None else {"failed_output_len": len(output)}

    @classmethod
    def _restore(cls, message: str, fields: dict[str, Any]) -> Self:
        output = fields.get("failed_output")
        return cls(message, failed_output=output if isinstance(output, str) else None)


class UnsupportedError(Error):
    """A request field the provider cannot honour, refused before sending or by the provider."""

    kind = "unsupported"

    def __init__(
        self,
        message: str,
        *,
        field: RequestField | str | None = None,
        stage: UnsupportedStage | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.field: RequestField | None = None if field is None else RequestField(field)
        self.stage: UnsupportedStage = (
            UnsupportedStage.BEFORE_SENDING if stage is None else UnsupportedStage(stage)
        )

    def _fields(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"stage": self.stage.value}
        if self.field is not None:
            out["field"] = self.field.value
        return out

    def _log_fields(self) -> dict[str, JsonValue]:
        return self._fields()

    @classmethod
    def _restore(cls, message: str, fields: dict[str, Any]) -> Self:
        return cls(message, field=fields.get("field"), stage=fields.get("stage"))


class ServerError(_Waits):
    """The provider failed (a 5xx, or an error in a 200 body); `retry_after` is how long it
    asked to wait, when it said (a `Retry-After` on a 503)."""

    kind = "server"
    retryable_by_default = True


class OverloadedError(ServerError):
    kind = "overloaded"


class NetworkError(Error):
    """The connection failed or broke before a complete answer arrived."""

    kind = "network"
    retryable_by_default = True


class StreamError(Error):
    """A stream could not be read to its end."""

    kind = "stream"


class StreamDecodeError(StreamError):
    """The stream held something that is not a valid event."""

    kind = "stream_decode"


class IncompleteStreamError(StreamError):
    """The stream ended before the response finished."""

    kind = "stream_incomplete"
    retryable_by_default = True


class ExtractionError(Error):
    """The base of every extraction failure: no usable value came of the extraction.

    It carries the last provider response (`response`, `None` when nothing was sent, or
    when the provider answered with an error) and the record of every pass (`metadata`), so
    failed output and its cost stay inspectable. Provider errors during an extraction are
    raised as themselves, not as this, but for an output the provider refused itself
    (`RejectedOutputError`): that output (or, with a forced tool, the call it refused)
    failed as one answered would (a `ParseError` whose `raw` it is, the provider's error its
    `__cause__`). Extraction failures are never retryable: the same request would fail the
    same way.
    """

    kind = "extraction"
    response: ChatResponse | None
    metadata: ExtractionMetadata


ACCOUNT_REFUSALS = (AuthenticationError, PermissionDeniedError, QuotaExceededError)
"""Refusals of the caller's key or account, not of a request: every request to that
provider meets them, and another provider, with an account of its own, need not."""


def may_pass_again(error: Error) -> bool:
    """Whether sending again what ended in `error` may get through: it may pass itself (a
    provider overloaded a moment), or it is a failover's last provider refusing the account
    (its key, its quota, a model it lacks) or meeting its rate limit (any `RateLimitedError`,
    one no wait gets through too, which a failover moves on past as it does a quota), which
    says nothing of the request, after a provider whose error may pass. A refusal of the
    request (too long, invalid) is met again, and paid again where it was billed."""
    if error.retryable:
        return True
    of_the_account = (*ACCOUNT_REFUSALS, RateLimitedError, NotFoundError)
    return isinstance(error, of_the_account) and any(
        link.retryable for link in errors_in_chain(error)
    )


def asked_wait(error: Error) -> float | None:
    """The wait `error` asks before its request is tried again: its `retry_after`, or, for
    a failover's (its chain holds an error of each provider tried), the shortest of theirs,
    since a failover tried again is served by the first provider that serves: one that
    asked for no wait (`None`) may serve at once, and one that refused for good is left out.
    The longest would hold a run for a day over one provider's limit per day while another
    serves."""
    chain = errors_in_chain(error)
    # A provider that refused for good (a key refused, a bad request) serves at no wait.
    links = [link for link in chain if link.retryable] or chain
    waits = [link.retry_after for link in links]
    return None if None in waits else min(wait for wait in waits if wait is not None)


def paid_for(error: Error) -> list[dict[str, JsonValue]]:
    """What the failed attempts behind `error` reported paying, each as `{"provider",
    "model", "usage"}` (and `"service_tier"`, a tier other than the standard one;
    `"billed_extras"`, what was billed beyond the tokens; `"usage_cost"`, what the provider
    said it cost): every
    error in its chain (a failover's providers), and the attempts a retry made before it;
    none when no provider reported usage with its error."""
    paid: list[dict[str, JsonValue]] = []
    for link in errors_in_chain(error):
        paid.extend(_paid_before_link(link))
        metadata = link.context.metadata
        usage = metadata.get(REPORTED_USAGE_KEY)
        if isinstance(usage, dict):
            model = metadata.get(REPORTED_MODEL_KEY)
            entry: dict[str, JsonValue] = {
                "provider": link.provider,
                "model": model if isinstance(model, str) else link.model,
                "usage": usage,
            }
            tier = metadata.get(REPORTED_TIER_KEY)
            if isinstance(tier, str):
                entry["service_tier"] = tier
            extras = metadata.get(REPORTED_EXTRAS_KEY)
            if isinstance(extras, dict) and extras:
                entry["billed_extras"] = extras
            money = metadata.get(REPORTED_COST_KEY)
            if isinstance(money, dict) and money:
                entry["usage_cost"] = money
            paid.append(entry)
    return paid


def paid_ahead(error: Error, paid: Sequence[JsonValue]) -> Error:
    """`error` saying that `paid` was paid before it (`PAID_BEFORE_KEY`), ahead of what it
    already says was: attempts made before those of a wrapper inside the one that adds
    these."""
    if paid:
        inner = error.context.metadata.get(PAID_BEFORE_KEY)
        error.with_metadata(PAID_BEFORE_KEY, [*paid, *(inner if isinstance(inner, list) else [])])
    return error


_PAID_ON = "_allama_paid_before"
"""The attribute of an exception that is none of allama's (a provider of the caller's own
raised it) that holds what a wrapper's attempts before it paid, for the extraction."""


def paid_before_foreign(error: BaseException, paid: Sequence[JsonValue]) -> None:
    """Keep on `error`, none of allama's, that `paid` was paid before it, ahead of what
    a wrapper inside said (as `paid_ahead` does on an allama error). Not kept where the
    exception takes no attribute: it goes out as itself all the same."""
    if paid and not isinstance(error, Error):
        inner = getattr(error, _PAID_ON, None)
        with contextlib.suppress(Exception):
            setattr(error, _PAID_ON, [*paid, *(inner if isinstance(inner, list) else [])])


def take_paid_before(error: BaseException) -> list[dict[str, JsonValue]]:
    """What wrappers kept on `error` (`paid_before_foreign`), taken off it: an exception
    raised again by another call (one object raised each time) starts with nothing paid."""
    paid = getattr(error, _PAID_ON, None)
    if paid is None:
        return []
    with contextlib.suppress(Exception):
        delattr(error, _PAID_ON)
    return [entry for entry in paid if isinstance(entry, dict)] if isinstance(paid, list) else []


def _paid_before_link(link: Error) -> list[dict[str, JsonValue]]:
    earlier = link.context.metadata.get(PAID_BEFORE_KEY)
    if not isinstance(earlier, list):
        return []
    return [entry for entry in earlier if isinstance(entry, dict)]


PAID_BEFORE = "paid_before"
"""The key, in a wrapper's record on a response (`provider_data["allama"][kind]`), of what
its failed attempts reported paying (`paid_for`): an extraction's record counts their usage
and cost."""

INNER_RECORD = "inner"
"""The key, in a wrapper's record, of the record a wrapper of the same kind inside it made
(a retry within a retry): each keeps what its own failed attempts paid."""


def paid_in_record(record: object) -> list[dict[str, JsonValue]]:
    """What a wrapper's record, and the records of the same kind inside it, say failed
    attempts paid."""
    paid: list[dict[str, JsonValue]] = []
    while isinstance(record, dict):
        entries = record.get(PAID_BEFORE)
        if isinstance(entries, list):
            paid.extend(entry for entry in entries if isinstance(entry, dict))
        record = record.get(INNER_RECORD)
    return paid


def with_reported_usage(
    error: Error,
    usage: Mapping[str, JsonValue],
    model: object,
    tier: object = None,
    *,
    money: Mapping[str, JsonValue] | None = None,
    extras: Mapping[str, int] | None = None,
) -> Error:
    """`error` with the usage a body reported beside it (`REPORTED_USAGE_KEY`, a `Usage`'s
    JSON), its model and tier and what it said it cost, and what it was billed beyond the
    tokens: tokens paid for, which an extraction records. A usage with no count is none."""
    if usage.get("input_tokens") is None and usage.get("output_tokens") is None:
        return error
    error.with_metadata(REPORTED_USAGE_KEY, dict(usage))
    reported_billing(error, model, tier, money=money)
    if extras:
        error.with_metadata(REPORTED_EXTRAS_KEY, dict(extras))
    return error


def reported_billing(
    error: Error, model: object, tier: object, *, money: Mapping[str, JsonValue] | None = None
) -> None:
    """Keep beside an error's reported usage the model and the service tier its body names,
    where its prices come from, and what it says the call cost (`money`)."""
    if isinstance(model, str) and model:
        error.with_metadata(REPORTED_MODEL_KEY, model)
    if money:
        error.with_metadata(REPORTED_COST_KEY, dict(money))
    from allama.types._response import service_tier_of  # the response's models: on demand

    served = service_tier_of(tier)
    if served is not None:
        error.with_metadata(REPORTED_TIER_KEY, served)


def errors_in_chain(error: Error) -> list[Error]:
    """The error and every error it fell back from, newest first."""
    chain: list[Error] = []
    current: Error | None = error
    while current is not None and len(chain) < 64:
        chain.append(current)
        current = current.fallback_from
    return chain
