"""How a wrapper records what it did (attempts, failovers) on a response or a stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from pydantic import JsonValue

from allama.stream import AsyncChatStream, ChatStream
from allama.types import ALLAMA_NAMESPACE, ChatResponse, ProviderDataEvent, StreamEvent


def record_response(response: ChatResponse, key: str, value: JsonValue | None) -> ChatResponse:
    """`response` with `value` under `provider_data["allama"][key]` (unchanged for `None`)."""
    if value is None:
        return response
    return response.with_provider_data(ALLAMA_NAMESPACE, key, value)


def record_stream(stream: ChatStream, key: str, value: JsonValue | None) -> ChatStream:
    """`stream` led by a provider-data event for `value`, so its response carries it too."""
    if value is None:
        return stream
    event = ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=key, value=value)
    return ChatStream(_lead(event, stream), close=stream.close, provider=stream.collector.provider)


def record_async_stream(
    stream: AsyncChatStream, key: str, value: JsonValue | None
) -> AsyncChatStream:
    if value is None:
        return stream
    event = ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=key, value=value)
    return AsyncChatStream(
        _alead(event, stream), close=stream.aclose, provider=stream.collector.provider
    )


def _lead(first: StreamEvent, rest: ChatStream) -> Iterator[StreamEvent]:
    yield first
    yield from rest


async def _alead(first: StreamEvent, rest: AsyncChatStream) -> AsyncIterator[StreamEvent]:
    yield first
    async for event in rest:
        yield event
