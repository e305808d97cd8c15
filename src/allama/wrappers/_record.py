"""How a wrapper records what it did (attempts, failovers) on a response or a stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

from pydantic import JsonValue

from allama.errors import INNER_RECORD, PAID_BEFORE, Error, paid_ahead, paid_in_record
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
    provider's own first event. The stream's collector holds the record from the start, so
    that a stream closed or dropped before its end still says what the wrapper's failed
    attempts paid; so does the error of one that fails.
    """
    if value is None:
        return stream
    given = ChatStream(
        _then(stream, key, value),
        close=stream.close,
        provider=stream.collector.provider,
        on_close=_on_close(stream.collector, key, value),
    )
    carry_records(stream.collector, given.collector, key, value)
    given.collector.reads_from(stream.collector)
    return given


def record_async_stream(
    stream: AsyncChatStream, key: str, value: JsonValue | None
) -> AsyncChatStream:
    if value is None:
        return stream
    given = AsyncChatStream(
        _athen(stream, key, value),
        close=stream.aclose,
        provider=stream.collector.provider,
        on_close=_on_close(stream.collector, key, value),
    )
    carry_records(stream.collector, given.collector, key, value)
    given.collector.reads_from(stream.collector)
    return given


def _on_close(
    inner: StreamCollector, key: str, value: JsonValue
) -> Callable[[StreamCollector, BaseException | None], None]:
    """What a handed-over stream does once it ends (its inner one closed): take what the
    inner stream reported that a stream closed before its end did not give, with this
    wrapper's record kept over the inner one's of the same kind. Nothing for a stream that
    failed: its error says what was paid."""

    def closed(outer: StreamCollector, _: BaseException | None) -> None:
        if outer.error is None:
            outer.take_reported(inner)
            carry_records(inner, outer, key, value)

    return closed


def carry_records(
    inner: StreamCollector, outer: StreamCollector, key: str | None = None, value: JsonValue = None
) -> None:
    """Give `outer`, a stream's collector as it is handed over, the wrappers' records
    `inner` holds, and this wrapper's (`value` under `key`, around the record of the same
    kind inside it): the events that carry them come at the stream's end, which a stream
    closed or dropped before it never reaches."""
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
    return paid_ahead(error, paid_in_record(value))
