"""How a wrapper records what it did (attempts, failovers) on a response or a stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from pydantic import JsonValue

from allama.stream import AsyncChatStream, ChatStream
from allama.types import ALLAMA_NAMESPACE, ChatResponse, ProviderDataEvent, StreamEvent

PAID_BEFORE = "paid_before"
"""The key, in a wrapper's record on a response, of what its failed attempts reported paying
(`allama.errors.paid_for`): an extraction's record counts their usage and cost."""


def record_response(response: ChatResponse, key: str, value: JsonValue | None) -> ChatResponse:
    """`response` with `value` under `provider_data["allama"][key]` (unchanged for `None`)."""
    if value is None:
        return response
    return response.with_provider_data(ALLAMA_NAMESPACE, key, value)


def record_stream(stream: ChatStream, key: str, value: JsonValue | None) -> ChatStream:
    """`stream` followed by a provider-data event for `value`, so its response carries it too.

    The event comes last, after `Finish` (where provider data may still arrive), so that a
    reader of the first event (the extraction engine looks there for a refusal) sees the
    provider's own first event.
    """
    if value is None:
        return stream
    event = ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=key, value=value)
    return ChatStream(_then(stream, event), close=stream.close, provider=stream.collector.provider)


def record_async_stream(
    stream: AsyncChatStream, key: str, value: JsonValue | None
) -> AsyncChatStream:
    if value is None:
        return stream
    event = ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=key, value=value)
    return AsyncChatStream(
        _athen(stream, event), close=stream.aclose, provider=stream.collector.provider
    )


def _then(stream: ChatStream, last: StreamEvent) -> Iterator[StreamEvent]:
    yield from stream
    yield last


async def _athen(stream: AsyncChatStream, last: StreamEvent) -> AsyncIterator[StreamEvent]:
    async for event in stream:
        yield event
    yield last
