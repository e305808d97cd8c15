"""How a wrapper records what it did (attempts, failovers) on a response or a stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from pydantic import JsonValue

from allama.errors import INNER_RECORD, PAID_BEFORE, PAID_BEFORE_KEY, Error, paid_in_record
from allama.stream import AsyncChatStream, ChatStream, StreamCollector
from allama.types import ALLAMA_NAMESPACE, ChatResponse, ProviderDataEvent, StreamEvent

__all__ = [
    "PAID_BEFORE",
    "carry_records",
    "record_async_stream",
    "record_response",
    "record_stream",
]


def record_response(response: ChatResponse, key: str, value: JsonValue | None) -> ChatResponse:
    """`response` with `value` under `provider_data["allama"][key]` (unchanged for `None`),
    holding the record already there, an inner wrapper's of the same kind."""
    if value is None:
        return response
    earlier = response.provider_data.get(ALLAMA_NAMESPACE, {}).get(key)
    return response.with_provider_data(ALLAMA_NAMESPACE, key, _around(value, earlier))


def record_stream(stream: ChatStream, key: str, value: JsonValue | None) -> ChatStream:
    """`stream` followed by a provider-data event for `value`, so its response carries it too.

    The event comes last, after `Finish` (where provider data may still arrive), so that a
    reader of the first event (the extraction engine looks there for a refusal) sees the
    provider's own first event. A stream that fails before it says on its error what the
    wrapper's failed attempts paid; one closed before its end holds the record all the
    same (and those of the wrappers inside it), for what reads it after.
    """
    if value is None:
        return stream
    outer: list[ChatStream] = []

    def close() -> None:
        try:
            stream.close()
        finally:
            carry_records(stream.collector, outer[0].collector, key, value)

    outer.append(
        ChatStream(_then(stream, key, value), close=close, provider=stream.collector.provider)
    )
    return outer[0]


def record_async_stream(
    stream: AsyncChatStream, key: str, value: JsonValue | None
) -> AsyncChatStream:
    if value is None:
        return stream
    outer: list[AsyncChatStream] = []

    async def close() -> None:
        try:
            await stream.aclose()
        finally:
            carry_records(stream.collector, outer[0].collector, key, value)

    outer.append(
        AsyncChatStream(_athen(stream, key, value), close=close, provider=stream.collector.provider)
    )
    return outer[0]


def carry_records(
    inner: StreamCollector, outer: StreamCollector, key: str | None = None, value: JsonValue = None
) -> None:
    """Give `outer` the wrappers' records `inner` holds, and this wrapper's (`value` under
    `key`, around the record of the same kind inside it), as a stream closed before its end
    never gives them as events. Nothing for a stream that failed: its error says what was
    paid."""
    if outer.error is not None:
        return
    records = dict(inner.provider_data.get(ALLAMA_NAMESPACE, {}))
    for kind, record in records.items():
        if kind != key:
            outer.push(ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=kind, value=record))
    if key is not None:
        merged = _around(value, records.get(key))
        outer.push(ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=key, value=merged))


def _then(stream: ChatStream, key: str, value: JsonValue) -> Iterator[StreamEvent]:
    earlier: JsonValue = None
    try:
        for event in stream:
            if isinstance(event, ProviderDataEvent) and _is_record(event, key):
                earlier = event.value
                continue
            yield event
    except Error as error:
        _paid_on(error, value)
        raise
    yield ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=key, value=_around(value, earlier))


async def _athen(stream: AsyncChatStream, key: str, value: JsonValue) -> AsyncIterator[StreamEvent]:
    earlier: JsonValue = None
    try:
        async for event in stream:
            if isinstance(event, ProviderDataEvent) and _is_record(event, key):
                earlier = event.value
                continue
            yield event
    except Error as error:
        _paid_on(error, value)
        raise
    yield ProviderDataEvent(namespace=ALLAMA_NAMESPACE, key=key, value=_around(value, earlier))


def _is_record(event: ProviderDataEvent, key: str) -> bool:
    """Whether `event` is an inner wrapper's record of the same kind, held to go inside."""
    return event.namespace == ALLAMA_NAMESPACE and event.key == key


def _around(value: JsonValue, earlier: JsonValue) -> JsonValue:
    if earlier is None or not isinstance(value, dict):
        return value
    return {**value, INNER_RECORD: earlier}


def _paid_on(error: Error, value: JsonValue) -> Error:
    """`error`, raised after the answer began, with what the wrapper's failed attempts
    before it paid, ahead of what a wrapper inside it already put there."""
    paid = paid_in_record(value)
    if paid:
        inner = error.context.metadata.get(PAID_BEFORE_KEY)
        error.with_metadata(PAID_BEFORE_KEY, [*paid, *(inner if isinstance(inner, list) else [])])
    return error
