"""The interface every provider implements.

One provider object serves both sync and async callers: it has `chat` and `achat`,
`chat_stream` and `achat_stream`. HTTP providers hold one sync and one async client, each
created on first use, and run the same sans-I/O adapter under both, so the two cannot drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import allama.types as vocabulary
from allama._lazy import lazy_names

if TYPE_CHECKING:
    from allama._degradations import Degradations
    from allama.stream import AsyncChatStream, ChatStream
    from allama.types import (
        CapabilitySupport,
        ChatCapability,
        ChatRequest,
        ChatResponse,
        ChatValidation,
    )

__all__ = ["ChatProvider", "Degradations"]

# `import allama` loads this module (see `allama/__init__.py`), so it stays light: the
# protocol needs its types only for annotations.
_getattr, __dir__ = lazy_names(__name__, {"allama._degradations": ("Degradations",)})
if not TYPE_CHECKING:
    __getattr__ = _getattr


@runtime_checkable
class ChatProvider(Protocol):
    """What allama needs of a provider: chat, streams, capability answers, a dry run.

    `chat_stream` raises a setup error (rejected request, no connection) itself; errors
    after the stream opened come out of the iteration. `validate_chat_request` checks a
    request without sending it (as `chat_stream` would send it, with `stream=True`) and says
    how much it checked (`ValidationCoverage`).
    """

    @property
    def name(self) -> str: ...

    def chat(self, request: ChatRequest) -> ChatResponse: ...

    async def achat(self, request: ChatRequest) -> ChatResponse: ...

    def chat_stream(self, request: ChatRequest) -> ChatStream: ...

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream: ...

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport: ...

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation: ...


PASSED_BEFORE_SENDING = "passed_before_sending"
"""The code of a dry run's warning that a provider on the way refuses the call before
sending and a wrapper goes on past it (a failover with `failover_on_unsupported`): the
plan is then of another provider, and says so in its notes."""

NOT_INSTALLED = "not_installed"
"""The code of a dry run's warning that what the provider runs the call with is not
installed (`local`'s llama.cpp engine, xllamacpp): the call fails before sending, and the
plan says so in its notes."""


def capabilities_only() -> ChatValidation:
    """The validation of a provider that can only consult its capability table."""
    return vocabulary.ChatValidation(coverage=vocabulary.ValidationCoverage.CAPABILITIES)
