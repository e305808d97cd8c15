"""Capability answers the caller knows better than the provider's table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from allama.provider import ChatProvider
from allama.stream import AsyncChatStream, ChatStream
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
)
from allama.wrappers._lifetime import Wrapper

__all__ = ["CapabilityOverrideProvider"]


class CapabilityOverrideProvider(Wrapper):
    """A provider whose capability answers are overridden for some capabilities (and models).

    Useful when a table is behind (a new model, a self-hosted endpoint): the extraction
    engine plans from `chat_capability`, so overriding it changes the mode it picks.
    `models=None` overrides for every model; otherwise only for the models named. Every
    other call goes to the wrapped provider unchanged, `close()`, `aclose()`, `with` and
    `async with` too.

    It changes what the engine asks for, not what the provider's adapter can send: where
    the adapter knows the model lacks a feature (JSON Schema output on a Groq model that
    has none, say), it still sends what it can, and the record says so (its enforcement
    and degradations), not what was overridden.

    >>> from allama.mock import MockProvider
    >>> provider = CapabilityOverrideProvider(
    ...     MockProvider(), {ChatCapability.STRUCTURED_OUTPUT: CapabilitySupport.SUPPORTED}
    ... )
    >>> provider.chat_capability("any", ChatCapability.STRUCTURED_OUTPUT)
    <CapabilitySupport.SUPPORTED: 'supported'>
    """

    def __init__(
        self,
        inner: ChatProvider,
        overrides: Mapping[ChatCapability, CapabilitySupport],
        *,
        models: str | Iterable[str] | None = None,
    ) -> None:
        self.inner = inner
        self.overrides = {
            ChatCapability(capability): CapabilitySupport(support)
            for capability, support in overrides.items()
        }
        if isinstance(models, str):  # one model's name, not its letters
            models = (models,)
        self.models = None if models is None else frozenset(models)

    @property
    def name(self) -> str:
        return self.inner.name

    def _wrapped(self) -> tuple[ChatProvider, ...]:
        return (self.inner,)

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        if self.models is None or model in self.models:
            support = self.overrides.get(capability)
            if support is not None:
                return support
        return self.inner.chat_capability(model, capability)

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        return self.inner.validate_chat_request(request, stream=stream)

    def chat(self, request: ChatRequest) -> ChatResponse:
        return self.inner.chat(request)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return await self.inner.achat(request)

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        return self.inner.chat_stream(request)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        return await self.inner.achat_stream(request)

    def __repr__(self) -> str:
        overrides = {str(k): str(v) for k, v in self.overrides.items()}
        return f"CapabilityOverrideProvider({self.inner!r}, {overrides!r})"
