"""Streams of response events: the rules every stream keeps, and the collector that folds them.

The rules: a stream ends after its first error; a stream that stops before its `Finish`
event is an incomplete stream (`IncompleteStreamError`); what it reported before failing
(usage, warnings) stays readable. A connection that breaks after the `Finish` event (before
Anthropic's `message_stop`, OpenAI's usage chunk or `[DONE]`), or a provider's failure there
(a server error or a rate limit it sends), ends the stream: the answer
came whole and was paid for, so it is used; where no usage had come, its usage is unknown
(empty counts: made, and maybe billed, for what nothing says), not none. `ChatStream` and
`AsyncChatStream` keep these rules for every provider, so an adapter's decoder only has to
turn bytes into events.
"""

from __future__ import annotations

import contextlib
import numbers
import re
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from pydantic import JsonValue

from allama._printable import storable
from allama.errors import (
    REPORTED_EXTRAS_KEY,
    REPORTED_USAGE_KEY,
    Error,
    IncompleteStreamError,
    NetworkError,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    StreamDecodeError,
    StreamError,
    reported_billing,
)
from allama.types import (
    BlockStart,
    BlockStop,
    ChatResponse,
    ContentBlock,
    Finish,
    ProviderDataEvent,
    Reasoning,
    ReasoningDelta,
    Refusal,
    RefusalDelta,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    Usage,
    UsageEvent,
    Warning,
    WarningEvent,
)
from allama.types._lone_surrogates import lone_surrogates
from allama.types._response import billed_extras, reported_money, served_tier

if TYPE_CHECKING:
    import asyncio

__all__ = ["AsyncChatStream", "ChatStream", "StreamCollector"]


class _Block:
    __slots__ = (
        "block_type",
        "encrypted",
        "halves",
        "id",
        "issuer",
        "name",
        "parts",
        "signature",
    )

    def __init__(self, block_type: StreamBlockType, id: str | None, name: str | None) -> None:
        self.block_type = block_type
        self.id = id
        self.name = name
        self.parts: list[str] = []
        self.signature: str | None = None
        self.encrypted: str | None = None
        self.issuer: str | None = None
        self.halves = False
        """Whether the last `build` read a lone surrogate as U+FFFD."""

    def build(self, index: int) -> ContentBlock:
        """The block as it arrived. A tool call with no name yet is built with the name `""`
        for a partial view (a failed stream's record, a trace); a finished answer that
        holds one fails (`StreamCollector.finish`, `StreamCollector.unnamed_call`). Half
        of a character still alone once the pieces are joined is U+FFFD (`halves`), as
        every API reads it in a body."""
        joined = _joined(self.parts)
        text = storable(joined)
        self.halves = text != joined
        if self.block_type is StreamBlockType.TOOL_CALL:
            return ToolCall(id=self.id or f"call_{index}", name=self.name or "", arguments=text)
        if self.block_type is StreamBlockType.REASONING:
            return Reasoning(
                text=text,
                signature=self.signature,
                encrypted_content=self.encrypted,
                issuer=self.issuer,
            )
        if self.block_type is StreamBlockType.REFUSAL:
            return Refusal(text=text)
        return TextPart(text=text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _joined(parts: list[str]) -> str:
    """The pieces joined, with surrogate pairs split across pieces made whole again.

    A provider that escapes an emoji as `\\ud83d\\ude00` may send the halves in separate
    chunks; each decodes to a lone surrogate, which no UTF-8 encoder accepts. Pairing them
    is lossless; a truly lone surrogate is kept as it came (`_Block.build` reads it as
    U+FFFD).
    """
    text = "".join(parts)
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _merge_usage(old: Usage | None, new: Usage) -> Usage:
    if old is None:
        return new
    reported = new.model_dump(exclude_none=True)
    return old.model_copy(update=reported)


_DELTA_TYPES: dict[type[object], StreamBlockType] = {
    TextDelta: StreamBlockType.TEXT,
    ToolCallDelta: StreamBlockType.TOOL_CALL,
    ReasoningDelta: StreamBlockType.REASONING,
    RefusalDelta: StreamBlockType.REFUSAL,
}


class StreamCollector:
    """Folds stream events into a `ChatResponse`, checking that they make sense together.

    Work is linear in the stream: deltas are kept as pieces and joined once.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._finish: Finish | None = None
        self._usage: Usage | None = None
        self._warnings: list[Warning] = []
        self._provider_data: dict[str, dict[str, JsonValue]] = {}
        self._id: str | None = None
        self._model: str | None = None
        self._error: Error | None = None
        self._source: StreamCollector | None = None
        self._closed_early = False
        self.provider: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the `Finish` event arrived."""
        return self._finish is not None

    def take_reported(self, source: StreamCollector) -> None:
        """Take what `source`, the collector of the stream this one's events come from,
        holds besides the answer (usage, warnings, provider data): a stream closed before
        it gave every event it read says what was paid for all the same. Nothing once
        this stream failed: its error says."""
        self._source = None
        if self._error is not None:
            return
        if source._usage is not None:
            self._usage = _merge_usage(self._usage, source._usage)
        for warning in source._warnings:
            if warning not in self._warnings:
                self._warnings.append(warning)
        for namespace, entries in source._provider_data.items():
            self._provider_data.setdefault(namespace, {}).update(entries)
        self._id = self._id or source._id
        self._model = self._model or source._model

    @property
    def provider_data(self) -> Mapping[str, Mapping[str, JsonValue]]:
        """The provider data reported so far, by namespace (not to be changed)."""
        return self._provider_data

    @property
    def error(self) -> Error | None:
        """The error that ended the stream, if one did."""
        return self._error

    def push(self, event: StreamEvent) -> None:
        """Take one event; raises `StreamDecodeError` for an event that breaks the rules."""
        if self._error is not None:
            raise StreamDecodeError(
                f"stream event `{event.type}` after the stream failed"
            ).mark_authored()
        if isinstance(event, UsageEvent):
            self._usage = _merge_usage(self._usage, event.usage)
            return
        if isinstance(event, WarningEvent):
            if event.warning not in self._warnings:
                self._warnings.append(event.warning)
            return
        if isinstance(event, ProviderDataEvent):
            self._provider_data.setdefault(event.namespace, {})[event.key] = event.value
            return
        if self._finish is not None:
            if isinstance(event, Finish) and event.finish_reason == "content_filter":
                # A content filter's verdict that came after the answer's end (Azure's
                # Asynchronous Filter): the answer was filtered all the same.
                self._finish = event
                return
            raise StreamDecodeError(
                f"stream event `{event.type}` after the response finished"
            ).mark_authored()
        if isinstance(event, ResponseStart):
            self._id = event.id or self._id
            self._model = event.model or self._model
        elif isinstance(event, BlockStart):
            block = self._blocks.get(event.index)
            if block is None:
                self._blocks[event.index] = _Block(event.block_type, event.id, event.name)
            elif block.block_type is not event.block_type:
                raise self._mismatch(event.type, event.index, block.block_type)
            else:
                # An id told again is the server's own, come after a stand-in the block
                # started with (a Chat Completions call whose id came on a later delta).
                block.id = event.id or block.id
                if not block.name and event.name is not None:
                    block.name = event.name  # (a name `""` given stays: the body's is read so)
        elif isinstance(event, BlockStop):
            if event.index not in self._blocks:
                raise StreamDecodeError(
                    f"stream event `block_stop` for block {event.index}, which never started"
                ).mark_authored()
        elif isinstance(event, Finish):
            self._finish = event
        else:
            block_type = _DELTA_TYPES[type(event)]
            block = self._blocks.get(event.index)
            if block is None:
                block = self._blocks[event.index] = _Block(block_type, None, None)
            elif block.block_type is not block_type:
                raise self._mismatch(event.type, event.index, block.block_type)
            if isinstance(event, ToolCallDelta):
                block.parts.append(event.arguments)
            elif isinstance(event, ReasoningDelta):
                block.parts.append(event.text)
                block.signature = event.signature or block.signature
                block.encrypted = event.encrypted_content or block.encrypted
                block.issuer = event.issuer or block.issuer
            else:
                block.parts.append(event.text)

    @staticmethod
    def _mismatch(event: str, index: int, block_type: StreamBlockType) -> StreamDecodeError:
        return StreamDecodeError(
            f"stream event `{event}` for block {index}, which is a `{block_type}` block"
        ).mark_authored()

    def cut_after_finish(self) -> None:
        """The connection broke, or the provider failed, after the `Finish` event: the
        stream ends there, its answer whole. Usage that had not come is unknown (empty
        counts, priced as a call made with nothing to say what for), not none: it would
        have come after the finish."""
        if self._usage is None:
            self._usage = Usage()

    def set_terminal_error(self, error: Error) -> None:
        """Record the error that ended the stream; `finish` raises it."""
        if self._error is None:
            self._error = error

    def reads_from(self, source: StreamCollector) -> None:
        """This stream's events come from the stream `source` collects, handed over by a
        wrapper that may have read it ahead: until this one takes what `source` reported
        (`take_reported`, at its close), `reported_metadata` counts it."""
        self._source = source

    def reported_metadata(self) -> ChatResponse:
        """`response_metadata`, with what the streams this one's events come from reported
        and did not give yet (the usage a wrapper read ahead): what a stream dropped before
        its end, never closed, paid for. This stream's own provider data is kept over
        theirs (a wrapper's record holds the one of its kind inside it)."""
        so_far = self.response_metadata()
        source = self._source
        if source is None or self._error is not None:
            return so_far
        ahead = source.reported_metadata()
        usage = so_far.usage
        if ahead.usage is not None:
            usage = _merge_usage(usage, ahead.usage)
        provider_data = {
            namespace: {**ahead.provider_data.get(namespace, {}), **entries}
            for namespace, entries in so_far.provider_data.items()
        }
        for namespace, entries in ahead.provider_data.items():
            provider_data.setdefault(namespace, dict(entries))
        warnings = [*so_far.warnings, *(w for w in ahead.warnings if w not in so_far.warnings)]
        return so_far.model_copy(
            update={
                "usage": usage,
                "warnings": tuple(warnings),
                "provider_data": provider_data,
                "id": so_far.id or ahead.id,
                "model": so_far.model or ahead.model,
            }
        )

    def response_metadata(self) -> ChatResponse:
        """What the stream reported so far besides content: usage, warnings, provider data."""
        return ChatResponse(
            usage=self._usage,
            warnings=tuple(self._warnings),
            provider_data=self._provider_data,
            id=self._id,
            model=self._model,
            provider=self.provider,
        )

    def partial_response(self) -> ChatResponse:
        """The response as far as it arrived, finished or not."""
        # Blocks take the place their index gives them, whatever order they opened in.
        content = tuple(self._blocks[index].build(index) for index in sorted(self._blocks))
        warnings = tuple(self._warnings)
        if any(block.halves for block in self._blocks.values()):
            halves = lone_surrogates(self.provider)
            warnings = warnings if halves in warnings else (*warnings, halves)
        return ChatResponse(
            content,
            finish_reason=self._finish.finish_reason if self._finish else None,
            usage=self._usage,
            warnings=warnings,
            provider_data=self._provider_data,
            id=self._id,
            model=self._model,
            provider=self.provider,
        )

    def unnamed_call(self) -> StreamDecodeError | None:
        """The error of an answer that holds a tool call the stream never named (Anthropic's
        `tool_use` block started with a `null` name, a Chat Completions call whose deltas
        gave none): no caller can run it, and the body decoders refuse a call with no name
        alike; `None` for any other. A name `""`, given, is read as a body's is. The answer
        finished, so the call was made: where no usage came, its cost is unknown, not
        nothing (`REPORTED_USAGE_KEY`), whatever its blocks hold."""
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.block_type is StreamBlockType.TOOL_CALL and block.name is None:
                error = StreamDecodeError(
                    f"the tool call of stream block {index} has no `name`"
                ).mark_authored()
                if self._usage is None:
                    error.with_metadata(REPORTED_USAGE_KEY, {})
                return error
        return None

    def finish(self) -> ChatResponse:
        """The collected response; raises the stream's error, `IncompleteStreamError`, or
        the error of a tool call with no name (`unnamed_call`)."""
        if self._error is not None:
            raise self._error
        if self._finish is None:
            if self._closed_early:
                # The caller's own choice, not the provider's failure: not worth sending again.
                ended = Error(
                    "the stream was closed (close() or aclose()) before the response finished"
                ).mark_authored()
            else:
                ended = (
                    IncompleteStreamError("the stream ended before the response finished")
                    .mark_authored()
                    .with_retryable(True)
                )
            self.mark_made(ended)
            raise ended
        unnamed = self.unnamed_call()
        if unnamed is not None:
            raise unnamed
        return self.partial_response()

    def mark_closed_early(self) -> None:
        """The caller closed the stream before its answer finished: `finish` says so."""
        if self._finish is None and self._error is None:
            self._closed_early = True

    def mark_made(self, error: Error) -> None:
        """Where the model had begun its answer and the stream reported no usage: `error`
        marked a call made, and maybe billed, for what nothing says (its cost unknown, not
        nothing), as a stream the network cut is."""
        if (
            self._usage is None
            and REPORTED_USAGE_KEY not in error.context.metadata
            and any(block.parts for block in self._blocks.values())
        ):
            error.with_metadata(REPORTED_USAGE_KEY, {})

    def __repr__(self) -> str:
        return (
            f"StreamCollector(blocks={len(self._blocks)}, finished={self.finished}, "
            f"failed={self._error is not None})"
        )


_FAILED_AFTER = (NetworkError, RequestTimeoutError, ServerError, RateLimitedError)
"""The errors that, after the `Finish` event, end the stream with its answer whole: the
connection's, and the provider's own failures (busy, overloaded, broken), which say nothing
of the answer given before them. Any other (a stream that does not decode, a request the
provider refuses) still fails the stream."""


_CUT = (NetworkError, RequestTimeoutError)


def _answered(response: ChatResponse) -> bool:
    """Whether the answer holds more than reasoning: text, a tool call or a refusal."""
    return any(block.type != "reasoning" for block in response.content)


class _Rules:
    """The stream rules, shared by the sync and async streams."""

    def __init__(self, provider: str | None) -> None:
        self.collector = StreamCollector()
        self.collector.provider = provider
        self.done = False

    def on_event(self, event: StreamEvent) -> None:
        try:
            self.collector.push(event)
        except Error as error:
            self.on_error(error)
            raise

    def ends(self, error: Error, *, closed: bool = False) -> bool:
        """Whether `error` ends a stream whose answer came whole (used, not thrown away as a
        failure): the connection breaking after the `Finish` event, the provider failing
        there (an error it sends, such as Anthropic's `overloaded_error` event before its
        `message_stop`), or the caller closing the stream (`closed`) after it, which woke a
        read waiting for what follows it. A close keeps the usage the stream reported, as a
        close between reads does; so does a failure, which had come after it."""
        collector = self.collector
        if not collector.finished or collector.error is not None:
            return False
        if collector.unnamed_call() is not None:
            return False  # (not whole: the error after the finish is the stream's failure)
        if closed:
            self.done = True
            return True
        if not isinstance(error, _FAILED_AFTER):
            return False
        if not isinstance(error, _CUT) and not _answered(collector.partial_response()):
            # The provider failing after a finish with nothing answered: a Chat Completions
            # `finish_reason` some servers send early (on a reasoning chunk), not an end.
            return False
        self.done = True
        collector.cut_after_finish()
        return True

    def on_error(self, error: Error) -> None:
        self.done = True
        if error.provider is None and self.collector.provider is not None:
            error.with_provider(self.collector.provider)
        _with_reported(error, self.collector)
        self.collector.mark_made(error)
        self.collector.set_terminal_error(error)

    def on_end(self) -> Error | None:
        """The error to raise when the source ran dry, if it ended early, or its answer holds
        a tool call with no name (after the usage that came with the finish, paid for)."""
        self.done = True
        collector = self.collector
        if collector.error is not None:
            return None
        if collector.finished:
            unnamed = collector.unnamed_call()
            if unnamed is not None:
                self.on_error(unnamed)
            return unnamed
        try:
            collector.finish()
        except Error as error:
            self.on_error(error)
            return error
        return None


class ChatStream:
    """A streamed response: iterate for events; `response()` collects it at the end.

    Close it (or use it as a context manager) to stop early: that closes the connection.
    It may be closed from another thread while one reads it (a watchdog, a cancel button):
    that read wakes at once and raises an `Error` that says the stream was closed (not
    retryable), or, after the `Finish` event, ends the stream with its answer whole, as a
    close between reads leaves it. `on_close` is told once when the stream ends (finished,
    failed or closed early), with the collector and any exception that was not an allama
    error.

    >>> from allama.types import ResponseStart, Finish
    >>> stream = ChatStream(iter([ResponseStart(), Finish(finish_reason="stop")]))
    >>> [event.type for event in stream]
    ['response_start', 'finish']
    >>> stream.response().finish_reason
    FinishReason('stop')
    """

    def __init__(
        self,
        events: Iterator[StreamEvent],
        *,
        close: Callable[[], None] | None = None,
        provider: str | None = None,
        on_close: Callable[[StreamCollector, BaseException | None], None] | None = None,
    ) -> None:
        self._events = events
        self._close = close
        self._closed = False
        self._dropped = None if close is None else _when_dropped(self, close)
        self._rules = _Rules(provider)
        self._on_close = on_close
        self._failure: BaseException | None = None
        self._reading = False
        self._lock = threading.RLock()
        """Held to decide who ends the source: a `close()` made while a read is in flight
        (in another thread) leaves it to that read."""

    @property
    def collector(self) -> StreamCollector:
        return self._rules.collector

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> StreamEvent:
        with self._lock:
            if self._rules.done:
                raise StopIteration
            self._reading = True
        try:
            event = self._read()
        except StopIteration:
            error = self._rules.on_end()
            self.close()
            if error is not None:
                raise error from None
            raise
        except Error as error:
            if self._rules.ends(error, closed=self._closed):
                self.close()
                raise StopIteration from None
            self._rules.on_error(error)
            self.close()
            raise
        except BaseException as failure:
            # Not an allama error (a bug in a decoder, an interrupt): still end the stream.
            self._failure = failure
            self.close()
            raise
        try:
            self._rules.on_event(event)
        except Error:
            self.close()
            raise
        return event

    def _read(self) -> StreamEvent:
        """The source's next event. Where the stream was closed meanwhile (by another
        thread), this read ends the source: a generator running elsewhere cannot be."""
        try:
            return next(self._events)
        finally:
            with self._lock:
                self._reading = False
                closed = self._closed
            if closed:
                self._close_source()

    def _close_source(self) -> None:
        source_close = getattr(self._events, "close", None)
        if callable(source_close):
            source_close()

    def response(self) -> ChatResponse:
        """Read what is left, then return the collected response (or raise its error)."""
        for _ in self:
            pass
        return self._rules.collector.finish()

    def close(self) -> None:
        """Stop the stream: close the connection (the `close` callback) and the event source
        (that a read in flight elsewhere ends itself)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self._rules.done and self._failure is None:  # (not the stream's own end)
                self._rules.collector.mark_closed_early()
            self._rules.done = True
            read_elsewhere = self._reading
        if self._dropped is not None:
            self._dropped.detach()
        try:
            if self._close is not None:
                self._close()
        finally:
            try:
                if not read_elsewhere:
                    self._close_source()
            finally:
                if self._on_close is not None:
                    self._on_close(self._rules.collector, self._failure)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ChatStream({self._rules.collector!r})"


class AsyncChatStream:
    """The async twin of `ChatStream`: `async for` for events, `await response()` at the end.

    Closed by another task while one reads it, that read wakes and raises an `Error` that
    says the stream was closed (not retryable), or ends the stream, its answer whole, after
    the `Finish` event. It belongs to the event loop it was opened on, where its connection
    is: read on another (a second `asyncio.run`, whose first ended and closed what the
    stream read from), it ends with a `StreamError` that says so (not retryable: the answer
    may have come whole, and was paid for), its connection closed on its own loop."""

    def __init__(
        self,
        events: AsyncIterator[StreamEvent],
        *,
        close: Callable[[], Awaitable[None]] | None = None,
        provider: str | None = None,
        on_close: Callable[[StreamCollector, BaseException | None], None] | None = None,
    ) -> None:
        self._events = events
        self._close = close
        self._closed = False
        self._loop = _running_loop()
        """The loop it was opened on (`None` made outside one): it is read there only."""
        self._dropped = None if close is None else _when_adropped(self, self._loop, close)
        self._rules = _Rules(provider)
        self._on_close = on_close
        self._failure: BaseException | None = None
        self._reading = False

    @property
    def collector(self) -> StreamCollector:
        return self._rules.collector

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._rules.done:
            raise StopAsyncIteration
        refused = self._read_elsewhere()
        if refused is not None:  # before its source is touched: it is another loop's
            self._rules.on_error(refused)
            await self.aclose()
            raise refused
        try:
            event = await self._read()
        except StopAsyncIteration:
            error = self._rules.on_end()
            await self.aclose()
            if error is not None:
                raise error from None
            raise
        except Error as error:
            if self._rules.ends(error, closed=self._closed):
                await self.aclose()
                raise StopAsyncIteration from None
            self._rules.on_error(error)
            await self.aclose()
            raise
        except BaseException as failure:
            self._failure = failure
            await self.aclose()
            raise
        try:
            self._rules.on_event(event)
        except Error:
            await self.aclose()
            raise
        return event

    async def _read(self) -> StreamEvent:
        """`ChatStream._read`: where another task closed the stream meanwhile, this read
        ends the source (an async generator running cannot be closed)."""
        self._reading = True
        try:
            return await anext(self._events)
        finally:
            self._reading = False
            if self._closed:
                await self._close_source()

    async def _close_source(self) -> None:
        source_close = getattr(self._events, "aclose", None)
        if callable(source_close):
            await source_close()

    def _read_elsewhere(self) -> Error | None:
        """The error for a read on a loop other than the stream's: its connection and its
        source are the other loop's (closed with it, once it ended). `asyncio.run` closes
        the source as its loop ends, which read here would look like a stream cut short
        (`IncompleteStreamError`, retryable: a retry pays again for an answer sent whole)."""
        own = self._loop
        if own is None or own is _running_loop():
            return None
        where = "an event loop that has ended" if own.is_closed() else "another event loop"
        return StreamError(
            f"the stream was opened on {where}: a stream is read on the event loop that "
            "opened it (inside the same asyncio.run)"
        ).mark_authored()

    async def response(self) -> ChatResponse:
        async for _ in self:
            pass
        return self._rules.collector.finish()

    async def aclose(self) -> None:
        """Stop the stream: close the connection (the `close` callback) and the event source
        (that a read in flight in another task ends itself)."""
        if self._closed:
            return
        self._closed = True
        if not self._rules.done and self._failure is None:  # (not the stream's own end)
            self._rules.collector.mark_closed_early()
        self._rules.done = True
        read_elsewhere = self._reading
        if self._dropped is not None:
            self._dropped.detach()
        own = self._loop
        try:
            if own is not None and own is not _running_loop():
                # Its connection and source are another loop's: closed there (nothing once
                # that loop has ended, which ended them), as a dropped stream's are.
                _close_on(own, lambda: self._release(read_elsewhere))
            else:
                await self._release(read_elsewhere)
        finally:
            if self._on_close is not None:
                self._on_close(self._rules.collector, self._failure)

    async def _release(self, read_elsewhere: bool) -> None:
        """Close the connection (the `close` callback), and the event source unless a read
        in flight in another task ends it itself."""
        try:
            if self._close is not None:
                await self._close()
        finally:
            if not read_elsewhere:
                await self._close_source()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncChatStream({self._rules.collector!r})"


def _when_dropped(stream: ChatStream, close: Callable[[], None]) -> weakref.finalize[Any, Any]:
    """`close` called when `stream` is collected unclosed: a stream dropped before it was
    read (its source not begun, with nothing to end it) would hold its connection for good,
    and a provider's pool runs dry. Not at exit: the process's end closes what is left."""
    dropped = weakref.finalize(stream, close)
    dropped.atexit = False
    return dropped


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if one is (asyncio not loaded: none)."""
    loaded = sys.modules.get("asyncio")
    if loaded is None:
        return None
    try:
        loop: asyncio.AbstractEventLoop = loaded.get_running_loop()
    except RuntimeError:
        return None
    return loop


def _when_adropped(
    stream: AsyncChatStream,
    loop: asyncio.AbstractEventLoop | None,
    close: Callable[[], Awaitable[None]],
) -> weakref.finalize[Any, Any] | None:
    """`close` run on the stream's loop when `stream` is collected unclosed, as asyncio
    closes a dropped async generator (a task; a finaliser cannot await). None where no loop
    runs: a loop's client closes its connections once the loop has ended
    (`Transport.close`, or the next call on another loop)."""
    if loop is None:
        return None
    dropped = weakref.finalize(stream, _close_on, loop, close)
    dropped.atexit = False
    return dropped


_CLOSING: set[asyncio.Task[None]] = set()
"""The closes of dropped async streams in flight: a task only the loop holds may be
collected before it ends."""


def _close_on(loop: asyncio.AbstractEventLoop, close: Callable[[], Awaitable[None]]) -> None:
    """Start `close` on `loop`, from whatever thread collected the stream; nothing once the
    loop is closed."""
    if loop.is_closed():
        return
    with contextlib.suppress(RuntimeError):  # (closed since)
        loop.call_soon_threadsafe(_start_close, loop, close)


def _start_close(loop: asyncio.AbstractEventLoop, close: Callable[[], Awaitable[None]]) -> None:
    task = loop.create_task(_quietly(close))
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


async def _quietly(close: Callable[[], Awaitable[None]]) -> None:
    """`close()`, its failure dropped: no one is left to be told of it."""
    with contextlib.suppress(Exception):
        await close()


def response_events(response: ChatResponse, *, chunk: int | None = None) -> Iterator[StreamEvent]:
    """The events a stream of `response` would give, which collect to the same response
    (its warnings, provider data and usage with it): each block's text in deltas of `chunk`
    characters, or in one. For an answer a host sent whole to a streamed call, and for the
    mock providers' streams.

    `chunk`, a whole number of at least 1, is checked at the call, not at the first event."""
    if chunk is not None:
        if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral):
            raise TypeError(f"chunk must be a whole number of characters, not {chunk!r}")
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1 character, not {chunk!r}")
    return _response_events(response, None if chunk is None else int(chunk))


def _response_events(response: ChatResponse, chunk: int | None) -> Iterator[StreamEvent]:
    def pieces(text: str) -> list[str]:
        if chunk is None or not text:
            return [text]
        return [text[i : i + chunk] for i in range(0, len(text), chunk)]

    yield ResponseStart(id=response.id, model=response.model)
    for warning in response.warnings:
        yield WarningEvent(warning=warning)
    for index, block in enumerate(response.content):
        if isinstance(block, TextPart):
            yield BlockStart(index=index, block_type=StreamBlockType.TEXT)
            yield from (TextDelta(index=index, text=piece) for piece in pieces(block.text))
        elif isinstance(block, ToolCall):
            yield BlockStart(
                index=index, block_type=StreamBlockType.TOOL_CALL, id=block.id, name=block.name
            )
            for piece in pieces(block.arguments):
                yield ToolCallDelta(index=index, arguments=piece)
        elif isinstance(block, Refusal):
            yield BlockStart(index=index, block_type=StreamBlockType.REFUSAL)
            yield from (RefusalDelta(index=index, text=piece) for piece in pieces(block.text))
        else:
            yield BlockStart(index=index, block_type=StreamBlockType.REASONING)
            yield from (ReasoningDelta(index=index, text=piece) for piece in pieces(block.text))
            if block.signature or block.encrypted_content:
                yield ReasoningDelta(
                    index=index,
                    signature=block.signature,
                    encrypted_content=block.encrypted_content,
                    issuer=block.issuer,
                )
        yield BlockStop(index=index)
    for namespace, entries in response.provider_data.items():
        for key, value in entries.items():
            yield ProviderDataEvent(namespace=namespace, key=key, value=value)
    if response.usage is not None:
        yield UsageEvent(usage=response.usage)
    yield Finish(finish_reason=response.finish_reason)


async def aiter_events(events: Iterable[StreamEvent]) -> AsyncIterator[StreamEvent]:
    """Events already in hand (a whole response's, a script's) as the source an
    `AsyncChatStream` reads."""
    for event in events:
        yield event


def with_paid(error: Error, stream: ChatStream | AsyncChatStream) -> Error:
    """`error` with the usage the stream reported before it, the model and the service tier
    it named, and what it was billed beyond the tokens: what was paid for, which a wrapper
    that retries or fails over counts (`allama.errors.paid_for`), as it counts a failed
    body's. The stream's collector, which holds them, is dropped with the stream."""
    return _with_reported(error, stream.collector)


def _with_reported(error: Error, collector: StreamCollector) -> Error:
    """`with_paid`, from the stream's collector: as the stream fails, so that the error a
    caller reading the stream gets says what was paid too."""
    if error.context.metadata.get(REPORTED_USAGE_KEY):
        return error  # (an empty one, an answer cut off, says less than the stream may)
    so_far = collector.response_metadata()
    if so_far.usage is None:
        return error
    error.with_metadata(REPORTED_USAGE_KEY, so_far.usage.model_dump(mode="json", exclude_none=True))
    reported_billing(
        error,
        so_far.model,
        served_tier(so_far.provider_data),
        money=reported_money(so_far.provider_data),
    )
    extras = billed_extras(so_far.provider_data)
    if extras:
        error.with_metadata(REPORTED_EXTRAS_KEY, dict(extras))
    return error
