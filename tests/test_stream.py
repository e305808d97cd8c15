"""The stream rules and the collector that folds events back into a response."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _recording import provider
from allama import (
    AsyncChatStream,
    BlockStart,
    BlockStop,
    ChatRequest,
    ChatResponse,
    ChatStream,
    Error,
    Finish,
    FinishReason,
    IncompleteStreamError,
    NetworkError,
    ProviderDataEvent,
    Reasoning,
    ReasoningDelta,
    Refusal,
    RefusalDelta,
    RequestField,
    ResponseStart,
    RetryingProvider,
    StreamBlockType,
    StreamCollector,
    StreamDecodeError,
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
from allama.adapters.openai_compat._decode import LONE_SURROGATES
from allama.errors import REPORTED_USAGE_KEY
from allama.mock import response_events

SECRET = "SECRET-MODEL-TEXT"
T = TypeVar("T")

# Responses and the events that carry them


texts = st.text(max_size=40)
ids = st.text(alphabet="abcdefghij_0123456789", min_size=1, max_size=8)
blocks = st.one_of(
    st.builds(TextPart, text=texts),
    st.builds(ToolCall, id=ids, name=ids, arguments=texts),
    st.builds(Refusal, text=texts),
    st.builds(
        Reasoning,
        text=texts,
        signature=st.none() | st.text(min_size=1, max_size=10),
        encrypted_content=st.none() | st.text(min_size=1, max_size=10),
    ),
)
counts = st.none() | st.integers(min_value=0, max_value=10**6)
usages = st.none() | st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    reasoning_tokens=counts,
    cache_read_tokens=counts,
    cache_write_tokens=counts,
)
warning_lists = st.lists(
    st.builds(Warning.unsupported, st.sampled_from(list(RequestField)), texts),
    max_size=3,
    unique=True,
)
json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
provider_datas = st.dictionaries(
    ids,
    st.dictionaries(ids, json_scalars | st.lists(json_scalars, max_size=3), min_size=1, max_size=3),
)
finish_reasons = st.none() | st.sampled_from(["stop", "length", "tool_calls", "pause_turn"]).map(
    FinishReason
)


@st.composite
def responses(draw: st.DrawFn) -> ChatResponse:
    return ChatResponse(
        tuple(draw(st.lists(blocks, max_size=5))),
        finish_reason=draw(finish_reasons),
        usage=draw(usages),
        warnings=tuple(draw(warning_lists)),
        provider_data=draw(provider_datas),
        model=draw(st.none() | ids),
        provider=draw(st.none() | ids),
        id=draw(st.none() | ids),
    )


def split(draw: st.DrawFn, text: str) -> list[str]:
    """`text` cut at random points (possibly into empty pieces)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def event_sequences(draw: st.DrawFn) -> tuple[ChatResponse, list[StreamEvent]]:
    """A response and one of the many event sequences a provider could send for it."""
    response = draw(responses())
    content: list[list[StreamEvent]] = []
    for index, block in enumerate(response.content):
        events: list[StreamEvent] = []
        if isinstance(block, ToolCall):
            events.append(
                BlockStart(
                    index=index, block_type=StreamBlockType.TOOL_CALL, id=block.id, name=block.name
                )
            )
            events += [
                ToolCallDelta(index=index, arguments=p) for p in split(draw, block.arguments)
            ]
        elif isinstance(block, TextPart):
            if draw(st.booleans()):
                events.append(BlockStart(index=index, block_type=StreamBlockType.TEXT))
            events += [TextDelta(index=index, text=p) for p in split(draw, block.text)]
        elif isinstance(block, Refusal):
            events.append(BlockStart(index=index, block_type=StreamBlockType.REFUSAL))
            events += [RefusalDelta(index=index, text=p) for p in split(draw, block.text)]
        else:
            events.append(BlockStart(index=index, block_type=StreamBlockType.REASONING))
            events += [ReasoningDelta(index=index, text=p) for p in split(draw, block.text)]
            seal = ReasoningDelta(
                index=index, signature=block.signature, encrypted_content=block.encrypted_content
            )
            events.insert(draw(st.integers(1, len(events))), seal)
        if draw(st.booleans()):
            events.append(BlockStop(index=index))
        content.append(events)
    # Blocks may interleave (parallel tool calls), each keeping its own order.
    ordered: list[StreamEvent] = []
    queues = [list(events) for events in content]
    while any(queues):
        queue = draw(st.sampled_from([q for q in queues if q]))
        ordered.append(queue.pop(0))
    side: list[StreamEvent] = [WarningEvent(warning=w) for w in response.warnings]
    side += [
        ProviderDataEvent(namespace=ns, key=key, value=value)
        for ns, entries in response.provider_data.items()
        for key, value in entries.items()
    ]
    if response.usage is not None:
        # Providers report running totals: an early partial report, then the final one.
        early = response.usage.model_copy(update={"output_tokens": None})
        side += [UsageEvent(usage=early), UsageEvent(usage=response.usage)]
    events = [
        ResponseStart(id=response.id, model=response.model),
        *ordered,
        Finish(finish_reason=response.finish_reason),
    ]
    # Side events go anywhere after the start, even after `Finish`, keeping their own order.
    positions = sorted(
        draw(st.lists(st.integers(1, len(events)), min_size=len(side), max_size=len(side)))
    )
    for shift, (position, item) in enumerate(zip(positions, side, strict=True)):
        events.insert(position + shift, item)
    return response, events


def collect(events: Sequence[StreamEvent], provider: str | None = None) -> ChatResponse:
    collector = StreamCollector()
    collector.provider = provider
    for event in events:
        collector.push(event)
    return collector.finish()


@settings(max_examples=300, deadline=None)
@given(event_sequences())
def test_any_split_of_a_response_collects_back_to_it(
    case: tuple[ChatResponse, list[StreamEvent]],
) -> None:
    response, events = case
    assert collect(events, response.provider) == response


@settings(max_examples=100, deadline=None)
@given(responses(), st.integers(1, 20))
def test_the_mock_event_stream_of_a_response_collects_back_to_it(
    response: ChatResponse, chunk: int
) -> None:
    events = response_events(response, chunk=chunk)
    assert collect(events, response.provider) == response
    stream = ChatStream(iter(events), provider=response.provider)
    assert list(stream) == events
    assert stream.response() == response


# The collector's rules


def test_blocks_take_their_index_order() -> None:
    events: list[StreamEvent] = [
        BlockStart(index=1, block_type=StreamBlockType.TOOL_CALL, id="b", name="g"),
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="a", name="f"),
        ToolCallDelta(index=1, arguments="{}"),
        ToolCallDelta(index=0, arguments="[]"),
        Finish(finish_reason=FinishReason.TOOL_CALLS),
    ]
    assert collect(events).content == (
        ToolCall(id="a", name="f", arguments="[]"),
        ToolCall(id="b", name="g", arguments="{}"),
    )


def test_a_tool_call_without_an_id_gets_one_from_its_index() -> None:
    events: list[StreamEvent] = [
        BlockStart(index=2, block_type=StreamBlockType.TOOL_CALL, name="f"),
        ToolCallDelta(index=2, arguments="{}"),
        Finish(),
    ]
    assert collect(events).content == (ToolCall(id="call_2", name="f", arguments="{}"),)


def test_a_delta_for_a_block_of_another_type_is_a_decode_error() -> None:
    collector = StreamCollector()
    collector.push(BlockStart(index=0, block_type=StreamBlockType.TEXT))
    with pytest.raises(StreamDecodeError) as caught:
        collector.push(ToolCallDelta(index=0, arguments="{}"))
    assert caught.value.message == (
        "stream event `tool_call_delta` for block 0, which is a `text` block"
    )
    assert caught.value.authored
    collector.push(TextDelta(index=1, text="x"))
    with pytest.raises(StreamDecodeError, match="`block_start` for block 1, which is a `text`"):
        collector.push(BlockStart(index=1, block_type=StreamBlockType.REFUSAL))


def test_stopping_a_block_that_never_started_is_a_decode_error() -> None:
    with pytest.raises(StreamDecodeError, match="`block_stop` for block 3, which never started"):
        StreamCollector().push(BlockStop(index=3))


def test_content_after_finish_is_an_error_but_usage_and_warnings_may_follow() -> None:
    collector = StreamCollector()
    collector.push(TextDelta(index=0, text="a"))
    collector.push(Finish(finish_reason=FinishReason.STOP))
    collector.push(UsageEvent(usage=Usage(input_tokens=3, output_tokens=1)))
    warning = Warning.unsupported(RequestField.SEED, "x")
    collector.push(WarningEvent(warning=warning))
    collector.push(ProviderDataEvent(namespace="ns", key="k", value=1))
    for event in (
        TextDelta(index=0, text="b"),
        BlockStart(index=1, block_type=StreamBlockType.TEXT),
        ResponseStart(),
        Finish(),
    ):
        with pytest.raises(StreamDecodeError, match=f"`{event.type}` after the response finished"):
            collector.push(event)
    assert collector.finish() == ChatResponse(
        (TextPart(text="a"),),
        finish_reason="stop",
        usage=Usage(input_tokens=3, output_tokens=1),
        warnings=(warning,),
        provider_data={"ns": {"k": 1}},
    )


def test_a_stream_that_ends_before_finish_is_incomplete() -> None:
    collector = StreamCollector()
    collector.push(TextDelta(index=0, text="half"))
    collector.push(UsageEvent(usage=Usage(input_tokens=9)))
    assert not collector.finished
    with pytest.raises(IncompleteStreamError) as caught:
        collector.finish()
    assert caught.value.retryable
    assert caught.value.authored
    assert caught.value.message == "the stream ended before the response finished"
    assert collector.partial_response().text() == "half"
    assert collector.response_metadata().usage == Usage(input_tokens=9)


def test_usage_reports_replace_what_they_report_and_keep_the_rest() -> None:
    collector = StreamCollector()
    collector.push(UsageEvent(usage=Usage(input_tokens=10, cache_read_tokens=4)))
    collector.push(UsageEvent(usage=Usage(output_tokens=3)))
    collector.push(UsageEvent(usage=Usage(output_tokens=5)))
    assert collector.response_metadata().usage == Usage(
        input_tokens=10, output_tokens=5, cache_read_tokens=4
    )


def test_a_failed_collector_keeps_its_error_and_its_metadata() -> None:
    collector = StreamCollector()
    warning = Warning.unsupported(RequestField.TOP_P, "dropped")
    collector.push(ResponseStart(id="r1", model="m"))
    collector.push(WarningEvent(warning=warning))
    collector.push(WarningEvent(warning=warning))
    collector.push(UsageEvent(usage=Usage(input_tokens=7)))
    error = NetworkError("reset")
    collector.set_terminal_error(error)
    collector.set_terminal_error(NetworkError("second"))
    assert collector.error is error
    with pytest.raises(StreamDecodeError, match="`text_delta` after the stream failed"):
        collector.push(TextDelta(index=0, text="x"))
    with pytest.raises(NetworkError) as caught:
        collector.finish()
    assert caught.value is error
    assert collector.response_metadata() == ChatResponse(
        usage=Usage(input_tokens=7), warnings=(warning,), id="r1", model="m"
    )


def test_collector_repr_withholds_text() -> None:
    collector = StreamCollector()
    collector.push(TextDelta(index=0, text=SECRET))
    assert repr(collector) == "StreamCollector(blocks=1, finished=False, failed=False)"


# ChatStream and AsyncChatStream


class Source:
    """An event source that records whether it was closed and how far it was read."""

    def __init__(self, items: Sequence[StreamEvent | BaseException]) -> None:
        self.items = items
        self.closed = 0
        self.read = 0
        self.finalized = False

    def close(self) -> None:
        self.closed += 1

    async def aclose(self) -> None:
        self.closed += 1

    def events(self) -> Iterator[StreamEvent]:
        try:
            for item in self.items:
                self.read += 1
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.finalized = True

    async def aevents(self) -> AsyncIterator[StreamEvent]:
        try:
            for item in self.items:
                self.read += 1
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.finalized = True


GOOD: list[StreamEvent] = [
    ResponseStart(id="r", model="m"),
    TextDelta(index=0, text="Hel"),
    TextDelta(index=0, text="lo"),
    UsageEvent(usage=Usage(input_tokens=2, output_tokens=1)),
    Finish(finish_reason=FinishReason.STOP),
]
GOOD_RESPONSE = ChatResponse(
    (TextPart(text="Hello"),),
    finish_reason="stop",
    usage=Usage(input_tokens=2, output_tokens=1),
    id="r",
    model="m",
    provider="p",
)


def test_a_stream_yields_its_events_and_collects_them() -> None:
    source = Source(GOOD)
    stream = ChatStream(source.events(), close=source.close, provider="p")
    assert list(stream) == GOOD
    assert stream.response() == GOOD_RESPONSE
    assert source.closed == 1
    assert source.finalized
    assert stream.collector.finished


def test_response_reads_what_is_left() -> None:
    source = Source(GOOD)
    stream = ChatStream(source.events(), close=source.close, provider="p")
    assert next(stream) == GOOD[0]
    assert stream.response() == GOOD_RESPONSE


def test_an_error_ends_the_stream_and_keeps_what_came_before() -> None:
    warning = Warning.unsupported(RequestField.SEED, "dropped")
    error = NetworkError("connection reset")
    source = Source(
        [
            WarningEvent(warning=warning),
            TextDelta(index=0, text="par"),
            UsageEvent(usage=Usage(input_tokens=5)),
            error,
            TextDelta(index=0, text="never"),
        ]
    )
    stream = ChatStream(source.events(), close=source.close, provider="p")
    seen: list[StreamEvent] = []
    with pytest.raises(NetworkError) as caught:
        for event in stream:
            seen.append(event)
    assert caught.value is error
    assert error.provider == "p"
    assert len(seen) == 3
    assert list(stream) == []
    assert source.read == 4
    assert source.closed == 1
    with pytest.raises(NetworkError):
        stream.response()
    assert stream.collector.error is error
    assert stream.collector.response_metadata() == ChatResponse(
        usage=Usage(input_tokens=5), warnings=(warning,), provider="p"
    )


def test_a_stream_that_runs_dry_before_finish_raises_incomplete() -> None:
    source = Source(GOOD[:3])
    stream = ChatStream(source.events(), close=source.close, provider="p")
    with pytest.raises(IncompleteStreamError) as caught:
        list(stream)
    assert caught.value.provider == "p"
    assert source.closed == 1
    assert list(stream) == []
    with pytest.raises(IncompleteStreamError):
        stream.response()
    assert stream.collector.partial_response().text() == "Hello"


def test_a_decode_error_ends_the_stream() -> None:
    source = Source([TextDelta(index=0, text="a"), RefusalDelta(index=0, text="b"), *GOOD])
    stream = ChatStream(source.events(), close=source.close)
    with pytest.raises(StreamDecodeError):
        list(stream)
    assert source.closed == 1
    assert source.finalized
    assert list(stream) == []
    assert isinstance(stream.collector.error, StreamDecodeError)


def test_closing_early_closes_the_source_once() -> None:
    source = Source(GOOD)
    with ChatStream(source.events(), close=source.close) as stream:
        assert next(stream) == GOOD[0]
    assert source.closed == 1
    assert source.finalized
    stream.close()
    assert source.closed == 1
    assert list(stream) == []
    with pytest.raises(Error, match=r"^the stream was closed \(close\(\) or aclose\(\)\) before"):
        stream.response()


def test_a_foreign_exception_from_the_source_still_closes_it() -> None:
    source = Source([GOOD[0], ValueError("decoder bug")])
    stream = ChatStream(source.events(), close=source.close)
    with pytest.raises(ValueError, match="decoder bug"):
        list(stream)
    assert source.closed == 1
    assert list(stream) == []


def test_stream_repr_withholds_text() -> None:
    stream = ChatStream(iter([TextDelta(index=0, text=SECRET)]))
    next(stream)
    assert repr(stream) == "ChatStream(StreamCollector(blocks=1, finished=False, failed=False))"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


async def drain(stream: AsyncChatStream) -> list[StreamEvent]:
    return [event async for event in stream]


def test_async_stream_yields_and_collects() -> None:
    source = Source(GOOD)

    async def main() -> tuple[list[StreamEvent], ChatResponse]:
        stream = AsyncChatStream(source.aevents(), close=source.aclose, provider="p")
        events = await drain(stream)
        return events, await stream.response()

    events, response = run(main())
    assert events == GOOD
    assert response == GOOD_RESPONSE
    assert source.closed == 1
    assert source.finalized


def test_async_stream_ends_after_an_error() -> None:
    error = NetworkError("reset")
    source = Source([GOOD[0], UsageEvent(usage=Usage(output_tokens=1)), error, GOOD[1]])

    async def main() -> AsyncChatStream:
        stream = AsyncChatStream(source.aevents(), close=source.aclose, provider="p")
        with pytest.raises(NetworkError) as caught:
            await drain(stream)
        assert caught.value is error
        assert await drain(stream) == []
        with pytest.raises(NetworkError):
            await stream.response()
        return stream

    stream = run(main())
    assert source.read == 3
    assert source.closed == 1
    assert error.provider == "p"
    assert stream.collector.response_metadata().usage == Usage(output_tokens=1)


def test_async_stream_incomplete_and_early_close() -> None:
    incomplete = Source(GOOD[:2])
    early = Source(GOOD)

    async def main() -> None:
        stream = AsyncChatStream(incomplete.aevents(), close=incomplete.aclose)
        with pytest.raises(IncompleteStreamError):
            await drain(stream)
        assert await drain(stream) == []
        async with AsyncChatStream(early.aevents(), close=early.aclose) as other:
            assert await anext(other) == GOOD[0]
        await other.aclose()
        assert await drain(other) == []
        with pytest.raises(Error, match=r"^the stream was closed \(close\(\) or aclose\(\)\)"):
            await other.response()

    run(main())
    assert incomplete.closed == 1
    assert early.closed == 1
    assert early.finalized


def test_async_stream_decode_error_and_foreign_exception() -> None:
    bad = Source([TextDelta(index=0, text="a"), Finish(), TextDelta(index=0, text="b")])
    foreign = Source([RuntimeError("bug")])

    async def main() -> None:
        stream = AsyncChatStream(bad.aevents(), close=bad.aclose)
        with pytest.raises(StreamDecodeError, match="after the response finished"):
            await drain(stream)
        with pytest.raises(RuntimeError):
            await drain(AsyncChatStream(foreign.aevents(), close=foreign.aclose))

    run(main())
    assert bad.closed == 1
    assert foreign.closed == 1


def test_errors_in_the_stream_are_allama_errors() -> None:
    assert issubclass(StreamDecodeError, Error)


def test_a_surrogate_pair_split_across_deltas_is_made_whole() -> None:
    collector = StreamCollector()
    collector.push(TextDelta(index=0, text="smile \ud83d"))
    collector.push(TextDelta(index=0, text="\ude00!"))
    collector.push(BlockStart(index=1, block_type=StreamBlockType.TOOL_CALL, name="f"))
    collector.push(ToolCallDelta(index=1, arguments='{"e": "\ud83d'))
    collector.push(ToolCallDelta(index=1, arguments='\ude00"}'))
    collector.push(Finish())
    response = collector.finish()
    assert response.text() == "smile \U0001f600!"
    assert response.tool_calls()[0].parsed_arguments() == {"e": "\U0001f600"}
    assert ChatResponse.from_json(response.to_json()) == response


def test_a_lone_surrogate_is_u_fffd_with_a_warning() -> None:
    # It was kept as it came: the response then could not be written as JSON (`to_json`,
    # a batch's ledger). It is read as a body holding one is.
    collector = StreamCollector()
    collector.provider = "openai"
    collector.push(TextDelta(index=0, text="a\udc00b"))
    collector.push(BlockStart(index=1, block_type=StreamBlockType.TOOL_CALL, name="f"))
    collector.push(ToolCallDelta(index=1, arguments='{"e": "\ud83d"}'))
    collector.push(Finish())
    response = collector.finish()
    assert response.text() == "a\ufffdb"
    assert response.tool_calls()[0].arguments == '{"e": "\ufffd"}'
    assert [(w.kind, w.message, w.provider) for w in response.warnings] == [
        ("approximated", LONE_SURROGATES, "openai")
    ]
    assert ChatResponse.from_json(response.to_json()) == response


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_stream_closed_by_its_caller_before_the_finish_says_so_and_is_not_retryable(
    flavour: str,
) -> None:
    # It read as "the stream ended before the response finished", retryable: a retry loop
    # would send again a call its caller chose to stop.
    source = Source(GOOD)

    async def closed_async() -> Error:
        stream = AsyncChatStream(source.aevents(), close=source.aclose, provider="p")
        await anext(stream)
        await anext(stream)
        await stream.aclose()
        with pytest.raises(Error) as caught:
            await stream.response()
        return caught.value

    if flavour == "sync":
        stream = ChatStream(source.events(), close=source.close, provider="p")
        next(stream)
        next(stream)
        stream.close()
        with pytest.raises(Error) as caught:
            stream.response()
        error = caught.value
    else:
        error = run(closed_async())
    assert type(error) is Error
    assert error.message == (
        "the stream was closed (close() or aclose()) before the response finished"
    )
    assert error.retryable is False
    assert source.closed == 1


def test_a_stream_closed_after_its_finish_still_gives_its_response() -> None:
    source = Source(GOOD)
    stream = ChatStream(source.events(), close=source.close, provider="p")
    for _ in GOOD:
        next(stream)
    stream.close()
    assert stream.response() == GOOD_RESPONSE


# A tool call the stream never named fails the stream, as a body's call with no name does


def test_a_tool_call_never_named_fails_the_collected_answer() -> None:
    collector = StreamCollector()
    collector.push(TextDelta(index=0, text="calling"))
    collector.push(ToolCallDelta(index=2, arguments="{}"))
    collector.push(Finish(finish_reason=FinishReason.TOOL_CALLS))
    # What arrived stays readable for a record or a trace...
    assert collector.partial_response().tool_calls() == (
        ToolCall(id="call_2", name="", arguments="{}"),
    )
    # ...but it is no answer to run.
    with pytest.raises(StreamDecodeError) as caught:
        collector.finish()
    assert caught.value.message == "the tool call of stream block 2 has no `name`"
    assert caught.value.authored and not caught.value.retryable


def test_a_tool_call_never_named_and_given_no_arguments_was_a_call_made() -> None:
    # The answer finished: a call made, its cost unknown where no usage came, whether or not
    # its blocks held anything.
    collector = StreamCollector()
    collector.push(BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="c"))
    collector.push(Finish(finish_reason=FinishReason.TOOL_CALLS))
    with pytest.raises(StreamDecodeError) as caught:
        collector.finish()
    assert caught.value.context.metadata[REPORTED_USAGE_KEY] == {}


def test_a_tool_call_named_empty_is_read_as_a_bodys_is() -> None:
    events: list[StreamEvent] = [
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="c", name=""),
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="c2"),
        ToolCallDelta(index=0, arguments="{}"),
        Finish(),
    ]
    assert collect(events).content == (ToolCall(id="c2", name="", arguments="{}"),)


ANTHROPIC_CALL = {"type": "tool_use", "id": "toolu_1", "input": {}}


def _anthropic_stream(block: dict[str, Any]) -> bytes:
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 20, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 9},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _chat_stream_of_a_nameless_call() -> bytes:
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1"}]}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]},
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 9}},
    ]
    text = "".join(f"data: {json.dumps({'id': 'c', 'model': 'm', **c})}\n\n" for c in chunks)
    return (text + "data: [DONE]\n\n").encode()


@pytest.mark.parametrize(
    ("preset", "data"),
    [
        ("anthropic", _anthropic_stream({**ANTHROPIC_CALL, "name": None})),
        ("anthropic", _anthropic_stream(ANTHROPIC_CALL)),
        ("openai", _chat_stream_of_a_nameless_call()),
    ],
    ids=["anthropic-null-name", "anthropic-no-name", "chat-never-named"],
)
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_streamed_tool_call_never_named_ends_the_stream_in_an_error(
    preset: str, data: bytes, flavour: str
) -> None:
    target, recorder = provider(preset, (200, data))
    request = ChatRequest("claude-sonnet-4-5").user("call it")
    retrying = RetryingProvider(target, sleep=lambda _: None)
    seen: list[str] = []
    with pytest.raises(StreamDecodeError) as caught:
        if flavour == "sync":
            with retrying.chat_stream(request) as stream:
                seen.extend(event.type for event in stream)
        else:

            async def read() -> None:
                async with await retrying.achat_stream(request) as stream:
                    async for event in stream:
                        seen.append(event.type)

            run(read())
    error = caught.value
    assert error.message == "the tool call of stream block 0 has no `name`"
    assert (error.provider, error.retryable) == (preset, False)
    # The whole stream was read first: the usage that came after the finish is the call's.
    assert "finish" in seen
    assert error.context.metadata[REPORTED_USAGE_KEY] == {"input_tokens": 20, "output_tokens": 9}
    assert len(recorder.bodies) == 1
