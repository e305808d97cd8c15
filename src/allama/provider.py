"""The interface every provider implements, and the helper adapters use to report shortfalls.

One provider object serves both sync and async callers: it has `chat` and `achat`,
`chat_stream` and `achat_stream`. HTTP providers hold one sync and one async client, each
created on first use, and run the same sans-I/O adapter under both, so the two cannot drift.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol, runtime_checkable

from allama.errors import UnsupportedError
from allama.stream import AsyncChatStream, ChatStream
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    RequestField,
    UnsupportedPolicy,
    UnsupportedStage,
    ValidationCoverage,
    Warning,
    WarningKind,
)

__all__ = ["ChatProvider", "Degradations"]


@runtime_checkable
class ChatProvider(Protocol):
    """What allama needs of a provider: chat, streams, capability answers, a dry run.

    `chat_stream` raises a setup error (rejected request, no connection) itself; errors
    after the stream opened come out of the iteration. `validate_chat_request` checks a
    request without sending it and says how much it checked (`ValidationCoverage`).
    """

    @property
    def name(self) -> str: ...

    def chat(self, request: ChatRequest) -> ChatResponse: ...

    async def achat(self, request: ChatRequest) -> ChatResponse: ...

    def chat_stream(self, request: ChatRequest) -> ChatStream: ...

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream: ...

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport: ...

    def validate_chat_request(self, request: ChatRequest) -> ChatValidation: ...


def capabilities_only() -> ChatValidation:
    """The validation of a provider that can only consult its capability table."""
    return ChatValidation(coverage=ValidationCoverage.CAPABILITIES)


class Degradations:
    """Collects an adapter's warnings for one request and applies its `UnsupportedPolicy`.

    `refuse` is the one call for a field the provider cannot honour: under `WARN` it records
    an unsupported warning and the adapter sends without it; under `ERROR` it raises, before
    anything is sent. `approximate` records a widening, which never fails.

    >>> d = Degradations("demo", UnsupportedPolicy.ERROR)
    >>> d.unsupported(RequestField.SEED, "the endpoint has no seed").message
    'cannot send `seed`: the endpoint has no seed'
    """

    def __init__(self, provider: str, policy: UnsupportedPolicy) -> None:
        self.provider = provider
        self.policy = policy
        self.warnings: list[Warning] = []

    @classmethod
    def for_request(cls, provider: str, request: ChatRequest) -> Degradations:
        return cls(provider, request.unsupported_policy)

    def warn(self, warning: Warning) -> None:
        warning = warning if warning.provider else warning.with_provider(self.provider)
        if warning not in self.warnings:
            self.warnings.append(warning)

    def approximate(self, field: RequestField, message: str, *, code: str | None = None) -> None:
        self.warn(_field_warning(WarningKind.APPROXIMATED, field, message, code, self.provider))

    def unsupported(self, field: RequestField, why: str) -> UnsupportedError:
        """The error for refusing `field` before sending (not raised here)."""
        return (
            UnsupportedError(
                f"cannot send `{field}`: {why}",
                field=field,
                stage=UnsupportedStage.BEFORE_SENDING,
            )
            .mark_authored()
            .with_provider(self.provider)
        )

    def refuse(self, field: RequestField, why: str, *, code: str | None = None) -> None:
        """Drop `field` with a warning, or raise under `UnsupportedPolicy.ERROR`."""
        if self.policy is UnsupportedPolicy.ERROR:
            raise self.unsupported(field, why)
        self.warn(_field_warning(WarningKind.UNSUPPORTED, field, why, code, self.provider))


@lru_cache(maxsize=1024)
def _field_warning(
    kind: WarningKind, field: RequestField, message: str, code: str | None, provider: str
) -> Warning:
    """Warnings are immutable values and adapters repeat the same few call after call."""
    make = Warning.approximated if kind is WarningKind.APPROXIMATED else Warning.unsupported
    return make(field, message, code=code).with_provider(provider)
