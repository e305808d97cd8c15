"""A wrapper reads a stream ahead past what carries no piece of the answer (a block's start,
an empty delta), so that an error sent before the answer began is retried or failed over;
the first piece of the answer stops it, and what was read ahead is given in order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import (
    AuthenticationError,
    BlockStart,
    BlockStop,
    ChatProvider,
    ChatRequest,
    Finish,
    OverloadedError,
    ProviderDataEvent,
    ReasoningDelta,
    RefusalDelta,
    ResponseStart,
    ServerError,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageEvent,
)
from allama.mock import MockStreamingProvider
from allama.wrappers import FailoverProvider, RetryingProvider

REQUEST = ChatRequest("m").user("hi")
TEXT = StreamBlockType.TEXT


class Named(BaseModel):
    name: str


async def _no_wait(seconds: float) -> None:
    return None


def retrying(inner: ChatProvider) -> RetryingProvider:
    return RetryingProvider(inner, sleep=lambda seconds: None, async_sleep=_no_wait)


_ANSWER: list[StreamEvent] = [
    ResponseStart(id="second"),
    BlockStart(index=0, block_type=TEXT),
    TextDelta(index=0, text=""),
    TextDelta(index=0, text="ok"),
    BlockStop(index=0),
    Finish(finish_reason="stop"),
]

_OPENINGS: dict[str, list[StreamEvent]] = {
    "empty text block": [ResponseStart(id="first"), BlockStart(index=0, block_type=TEXT)],
    "empty text delta": [
        ResponseStart(id="first"),
        BlockStart(index=0, block_type=TEXT),
        TextDelta(index=0, text=""),
    ],
    "tool call named, no arguments": [
        ResponseStart(id="first"),
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="call_1", name="f"),
        ToolCallDelta(index=0, arguments=""),
    ],
    "empty reasoning delta": [
        BlockStart(index=0, block_type=StreamBlockType.REASONING),
        ReasoningDelta(index=0, text="", issuer="anthropic"),
    ],
}


def _sync_events(provider: ChatProvider) -> list[StreamEvent]:
    with provider.chat_stream(REQUEST) as stream:
        return list(stream)


def _async_events(provider: ChatProvider) -> list[StreamEvent]:
    async def main() -> list[StreamEvent]:
        stream = await provider.achat_stream(REQUEST)
        async with stream:
            return [event async for event in stream]

    return asyncio.run(main())


READERS: dict[str, Callable[[ChatProvider], list[StreamEvent]]] = {
    "sync": _sync_events,
    "async": _async_events,
}


def _record(events: list[StreamEvent]) -> tuple[list[StreamEvent], dict[str, Any]]:
    """The events before the wrapper's record, and the record's attempts and providers (what
    the failed attempt paid, `paid_before`, is counted elsewhere)."""
    *given, record = events
    assert isinstance(record, ProviderDataEvent) and record.namespace == "allama"
    assert isinstance(record.value, dict)
    return given, {record.key: {k: v for k, v in record.value.items() if k != "paid_before"}}


@pytest.mark.parametrize("reader", ["sync", "async"])
@pytest.mark.parametrize("opening", list(_OPENINGS))
def test_an_error_after_an_opening_that_carries_nothing_is_retried(
    opening: str, reader: str
) -> None:
    inner = MockStreamingProvider([[*_OPENINGS[opening], ServerError("busy")], _ANSWER])
    # The first attempt's events are never given: the answer is the second's, whole.
    assert _record(READERS[reader](retrying(inner))) == (_ANSWER, {"retry": {"attempts": 2}})
    assert inner.call_count == 2


@pytest.mark.parametrize("reader", ["sync", "async"])
@pytest.mark.parametrize("opening", list(_OPENINGS))
def test_an_error_after_an_opening_that_carries_nothing_fails_over(
    opening: str, reader: str
) -> None:
    first = MockStreamingProvider([[*_OPENINGS[opening], OverloadedError("busy")]], name="a")
    second = MockStreamingProvider([_ANSWER], name="b")
    events = READERS[reader](FailoverProvider([first, second]))
    assert _record(events) == (_ANSWER, {"failover": {"attempts": 2, "providers": ["a", "b"]}})
    assert (first.call_count, second.call_count) == (1, 1)


_TOOL_CALL = BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="call_1", name="f")
_REASONING = BlockStart(index=0, block_type=StreamBlockType.REASONING)
_REFUSAL = BlockStart(index=0, block_type=StreamBlockType.REFUSAL)
_TEXT_BLOCK = BlockStart(index=0, block_type=TEXT)

_PIECES: dict[str, list[StreamEvent]] = {
    "text": [_TEXT_BLOCK, TextDelta(index=0, text=""), TextDelta(index=0, text="x")],
    "arguments": [
        _TOOL_CALL,
        ToolCallDelta(index=0, arguments=""),
        ToolCallDelta(index=0, arguments="{"),
    ],
    "reasoning": [_REASONING, ReasoningDelta(index=0), ReasoningDelta(index=0, text="hm")],
    "reasoning's signature": [_REASONING, ReasoningDelta(index=0, signature="sig")],
    "reasoning's encrypted content": [_REASONING, ReasoningDelta(index=0, encrypted_content="e")],
    "refusal": [_REFUSAL, RefusalDelta(index=0, text="no")],
    "empty refusal": [_REFUSAL, RefusalDelta(index=0, text="")],
    "block's stop": [_TOOL_CALL, BlockStop(index=0)],
}


@pytest.mark.parametrize("reader", ["sync", "async"])
@pytest.mark.parametrize("piece", list(_PIECES))
def test_the_first_piece_of_the_answer_ends_the_read_ahead(piece: str, reader: str) -> None:
    opening: list[StreamEvent] = [ResponseStart(id="first"), *_PIECES[piece]]
    error = ServerError("busy")
    inner = MockStreamingProvider([[*opening, error], _ANSWER])
    seen: list[StreamEvent] = []

    def read() -> None:
        seen.extend(retrying(inner).chat_stream(REQUEST))

    async def aread() -> None:
        stream = await retrying(inner).achat_stream(REQUEST)
        async for event in stream:
            seen.append(event)

    with pytest.raises(ServerError) as caught:
        read() if reader == "sync" else asyncio.run(aread())
    # The answer had begun: the scripted error comes out of the iteration, after all read
    # before it, neither retried nor wrapped.
    raised = caught.value
    assert (type(raised), raised.message, raised.provider) == (ServerError, "busy", "mock")
    assert seen == opening
    assert inner.call_count == 1


@pytest.mark.parametrize("reader", ["sync", "async"])
def test_the_finish_ends_the_read_ahead(reader: str) -> None:
    # An account's refusal after the finish fails the stream (a server's error there would
    # end it whole): it comes out of the iteration, the answer given, nothing failed over.
    opening: list[StreamEvent] = [ResponseStart(id="first"), _TEXT_BLOCK, Finish()]
    error = AuthenticationError("key revoked")
    first = MockStreamingProvider([[*opening, error]], name="a")
    second = MockStreamingProvider([_ANSWER], name="b")
    seen: list[StreamEvent] = []

    def read() -> None:
        seen.extend(FailoverProvider([first, second]).chat_stream(REQUEST))

    async def aread() -> None:
        stream = await FailoverProvider([first, second]).achat_stream(REQUEST)
        async for event in stream:
            seen.append(event)

    with pytest.raises(AuthenticationError) as caught:
        read() if reader == "sync" else asyncio.run(aread())
    raised = caught.value
    assert (type(raised), raised.message, raised.provider) == (
        AuthenticationError,
        "key revoked",
        "a",
    )
    assert raised.fallback_from is None
    assert seen == opening
    assert (first.call_count, second.call_count) == (1, 0)


@pytest.mark.parametrize("reader", ["sync", "async"])
def test_a_stream_that_finishes_after_an_empty_block_start_is_given_whole(reader: str) -> None:
    finished: list[StreamEvent] = [
        ResponseStart(id="only"),
        _TEXT_BLOCK,
        TextDelta(index=0, text=""),
        UsageEvent(usage=Usage(input_tokens=3, output_tokens=0)),
        Finish(finish_reason="stop"),
    ]
    inner = MockStreamingProvider([finished])
    assert READERS[reader](retrying(inner)) == finished
    first = MockStreamingProvider([finished], name="a")
    assert READERS[reader](FailoverProvider([first, MockStreamingProvider(name="b")])) == finished
    assert (inner.call_count, first.call_count) == (1, 1)


@pytest.mark.parametrize("reader", ["sync", "async"])
def test_a_stream_that_ends_unfinished_after_an_empty_block_start_is_retried(reader: str) -> None:
    # Cut off before a piece of its answer: the incomplete stream is the opening's to retry.
    inner = MockStreamingProvider([[ResponseStart(id="cut"), _TEXT_BLOCK], _ANSWER])
    assert _record(READERS[reader](retrying(inner))) == (_ANSWER, {"retry": {"attempts": 2}})
    assert inner.call_count == 2


# The wire: Anthropic's `overloaded_error` event after an empty text block's start.

_MODEL = "claude-sonnet-4-5-20250929"


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


_MESSAGE_START = _event(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": _MODEL,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 100, "output_tokens": 1},
        },
    },
)
_TEXT_START = _event(
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
_OVERLOADED = _MESSAGE_START + _TEXT_START + _event("ping", {"type": "ping"})
_OVERLOADED += _event(
    "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
)
_ANTHROPIC_ANSWER = (
    _MESSAGE_START
    + _TEXT_START
    + _event(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": '{"name": "Ada"}'},
        },
    )
    + _event("content_block_stop", {"type": "content_block_stop", "index": 0})
    + _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 20},
        },
    )
    + _event("message_stop", {"type": "message_stop"})
)


@pytest.mark.parametrize("reader", ["sync", "async"])
@pytest.mark.parametrize("wrapper", ["retry", "failover"])
def test_anthropics_overloaded_error_after_an_empty_text_block_is_asked_again(
    wrapper: str, reader: str
) -> None:
    made, recorder = provider("anthropic", (200, _OVERLOADED), (200, _ANTHROPIC_ANSWER))
    wrapped = retrying(made) if wrapper == "retry" else FailoverProvider([made, made])
    request = ChatRequest(_MODEL).user("Who?")

    async def aextract() -> allama.Extracted[Named]:
        async with allama.aextract_stream(wrapped, Named, request) as stream:
            async for _ in stream:
                pass
            return await stream.finish()

    if reader == "sync":
        with allama.extract_stream(wrapped, Named, request) as stream:
            for _ in stream:
                pass
            got = stream.finish()
    else:
        got = asyncio.run(aextract())
    assert got.value == Named(name="Ada")
    assert len(recorder.bodies) == 2
    # Both attempts' usage is counted: the one that failed after reporting it, paid for.
    assert got.metadata.usage is not None
    assert got.metadata.usage.input_tokens == 200


_TOOL_CALL_START = "data: " + json.dumps(
    {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        }
                    ],
                },
                "finish_reason": None,
            }
        ],
    }
)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini"}
    return "data: " + json.dumps({**body, "choices": [choice]})


@pytest.mark.parametrize("reader", ["sync", "async"])
def test_an_openai_error_object_after_a_tool_calls_first_chunk_is_retried(reader: str) -> None:
    error = 'data: {"error": {"message": "The server had an error", "type": "server_error"}}'
    answer = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "ok"}),
        _chunk({}, finish="stop"),
        "data: [DONE]",
    ]
    made, recorder = provider(
        "openai",
        (200, f"{_TOOL_CALL_START}\n\n{error}\n\n".encode()),
        (200, "".join(f"{line}\n\n" for line in answer).encode()),
    )
    events = READERS[reader](retrying(made))
    assert events == [
        ResponseStart(id="c", model="gpt-4o-mini"),
        _TEXT_BLOCK,
        TextDelta(index=0, text="ok"),
        BlockStop(index=0),
        Finish(finish_reason="stop"),
        ProviderDataEvent(namespace="allama", key="retry", value={"attempts": 2}),
    ]
    assert len(recorder.bodies) == 2
