"""A stream opened up to the first piece of its answer.

Providers answer some refusals inside a stream that opened well: an overloaded server's
first event (Anthropic's `overloaded_error` after HTTP 200), an error object in place of the
first chunk (the OpenAI family's gateways). Until a piece of the answer has come, the caller
has been given nothing, so such an error is the opening's: a wrapper retries it or fails
over, as it does an error raised by the open itself. Once the answer has begun, an error
comes out of the iteration as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

from allama.errors import Error
from allama.stream import AsyncChatStream, ChatStream, StreamCollector, with_paid
from allama.types import (
    BlockStart,
    ProviderDataEvent,
    ReasoningDelta,
    ResponseStart,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
    WarningEvent,
)
from allama.wrappers._record import carry_records

__all__ = ["aopened", "opened"]

_BEFORE_THE_ANSWER = (ResponseStart, BlockStart, UsageEvent, WarningEvent, ProviderDataEvent)
"""Events that carry no piece of the answer: read ahead while the stream opens. A block's
start is one (an empty text block, a tool call's id and name): providers open a block,
then may still refuse (Anthropic's `overloaded_error` after `content_block_start`)."""


def _carries_nothing(event: StreamEvent) -> bool:
    """Whether `event` carries no piece of the answer, so the read-ahead goes on past it: an
    opening event, or a delta with nothing in it (the empty text or arguments some providers
    send with a block's start). Anything else (text, reasoning or its seal, arguments, a
    refusal, a block's stop, the finish) is the answer begun."""
    if isinstance(event, _BEFORE_THE_ANSWER):
        return True
    if isinstance(event, TextDelta):
        return not event.text
    if isinstance(event, ToolCallDelta):
        return not event.arguments
    if isinstance(event, ReasoningDelta):
        return not (event.text or event.signature or event.encrypted_content)
    return False


def opened(stream: ChatStream) -> ChatStream:
    """`stream` read up to its first piece of the answer (or its end), then given whole:
    an error before it is raised here, the stream already closed."""
    held: list[StreamEvent] = []
    try:
        for event in stream:
            held.append(event)
            if not _carries_nothing(event):
                break
    except Error as error:
        raise with_paid(error, stream) from None
    given = ChatStream(
        _replayed(held, stream),
        close=stream.close,
        provider=stream.collector.provider,
        on_close=_taking_reported(stream.collector),
    )
    carry_records(stream.collector, given.collector)
    given.collector.reads_from(stream.collector)
    return given


async def aopened(stream: AsyncChatStream) -> AsyncChatStream:
    """The async twin of `opened`."""
    held: list[StreamEvent] = []
    try:
        async for event in stream:
            held.append(event)
            if not _carries_nothing(event):
                break
    except Error as error:
        raise with_paid(error, stream) from None
    given = AsyncChatStream(
        _areplayed(held, stream),
        close=stream.aclose,
        provider=stream.collector.provider,
        on_close=_taking_reported(stream.collector),
    )
    carry_records(stream.collector, given.collector)
    given.collector.reads_from(stream.collector)
    return given


def _taking_reported(
    inner: StreamCollector,
) -> Callable[[StreamCollector, BaseException | None], None]:
    """Once the stream given ends (its inner one closed), it takes what the inner one
    reported besides its answer and did not give: the usage read ahead of a stream closed
    at once. `take_reported` does nothing for a stream that failed."""
    return lambda outer, _: outer.take_reported(inner)


def _replayed(held: list[StreamEvent], stream: ChatStream) -> Iterator[StreamEvent]:
    while held:
        yield held.pop(0)  # given: no longer held
    yield from stream


async def _areplayed(
    held: list[StreamEvent], stream: AsyncChatStream
) -> AsyncIterator[StreamEvent]:
    while held:
        yield held.pop(0)
    async for event in stream:
        yield event
