"""A streamed extraction tells the truth about what it cost and what its value is.

A stream stopped (cancelled, Ctrl-C, closed early) after the model began its answer, or
once its response began, before any usage came (OpenAI's comes last), was made and maybe
billed: its cost is unknown, not nothing, as for one the network cut there. The partial
value shows a completed part as `finish()` will return it: read as JSON, strictly, with the
config of the model that holds it, and never what `finish()` refuses (`NaN`, a number too
large for a float, a key written twice). The value `finish()` returns is not the preview a
caller may have edited.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel, ConfigDict, Field

import allama
from allama import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    Finish,
    ParseError,
    ResponseStart,
    RetryingProvider,
    RetryPolicy,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    Usage,
    UsageEvent,
)
from allama.mock import MockProvider, MockStreamingProvider
from allama.stream import AsyncChatStream, ChatStream
from allama.transport import Transport

NATIVE = ExtractionMode.NATIVE
UNKNOWN = "no token counts came with a call that was made (its answer cut off, say)"


class Person(BaseModel):
    name: str
    age: int


def _request() -> ChatRequest:
    return ChatRequest("m").user("extract").with_option(NATIVE)


def _events(chunks: list[str], *, usage: bool = True) -> list[StreamEvent]:
    head: list[StreamEvent] = [
        ResponseStart(id="r", model="m"),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
    ]
    tail: list[StreamEvent] = [BlockStop(index=0)]
    if usage:
        tail.append(UsageEvent(usage=Usage(input_tokens=10, output_tokens=20)))
    tail.append(Finish(finish_reason="stop"))
    return [*head, *(TextDelta(index=0, text=chunk) for chunk in chunks), *tail]


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# 1. A stream stopped after the model began its answer, before any usage.


class StopsMidAnswer(MockProvider):
    """A stream like OpenAI's (its usage comes last) that gave its first `given` events (3:
    a piece of the answer; 2: the response's and the text block's start; 1: the response's
    start; 0: none), then raises `raised` or, with `None`, waits (to be cancelled)."""

    def __init__(self, raised: BaseException | None, given: int = 3) -> None:
        super().__init__()
        self.raised = raised
        self.given = given

    def _head(self, request: ChatRequest) -> list[StreamEvent]:
        self._record(request)
        return _events(['{"name": "Al'], usage=False)[: self.given]

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        head = self._head(request)

        def events() -> Iterator[StreamEvent]:
            yield from head
            assert self.raised is not None
            raise self.raised

        return ChatStream(events(), provider="mock")

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        head = self._head(request)

        async def events() -> AsyncIterator[StreamEvent]:
            for event in head:
                yield event
            if self.raised is None:
                await asyncio.sleep(30)
            else:
                raise self.raised

        return AsyncChatStream(events(), provider="mock")


def test_a_ctrl_c_after_the_answer_began_is_a_call_made_whose_cost_is_unknown() -> None:
    with (
        pytest.raises(KeyboardInterrupt) as caught,
        Extractor().extract_stream(
            StopsMidAnswer(KeyboardInterrupt()), Person, _request()
        ) as stream,
    ):
        for _ in stream:
            pass
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage, record.cost) == (0, Usage(), None)
    assert record.cost_missing == UNKNOWN


def test_a_cancelled_stream_after_the_answer_began_is_a_call_made_whose_cost_is_unknown() -> None:
    async def read() -> None:
        async with asyncio.timeout(0.2):
            async with await Extractor().aextract_stream(
                StopsMidAnswer(None), Person, _request()
            ) as stream:
                async for _ in stream:
                    pass

    with pytest.raises(TimeoutError) as caught:
        asyncio.run(read())
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage, record.cost_missing) == (0, Usage(), UNKNOWN)


def test_a_ctrl_c_before_anything_came_still_says_nothing_was_paid() -> None:
    with (
        pytest.raises(KeyboardInterrupt) as caught,
        Extractor().extract_stream(
            StopsMidAnswer(KeyboardInterrupt(), given=0), Person, _request()
        ) as stream,
    ):
        for _ in stream:
            pass
    assert ExtractionMetadata.from_error(caught.value) is None


# 1 (given): as the stream opens, read ahead for a refusal; 2: as the caller reads it.
@pytest.mark.parametrize("given", [1, 2])
def test_a_ctrl_c_once_the_response_began_is_a_call_made_whose_cost_is_unknown(
    given: int,
) -> None:
    with (
        pytest.raises(KeyboardInterrupt) as caught,
        Extractor().extract_stream(
            StopsMidAnswer(KeyboardInterrupt(), given=given), Person, _request()
        ) as stream,
    ):
        for _ in stream:
            pass
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage, record.cost, record.cost_missing) == (
        0,
        Usage(),
        None,
        UNKNOWN,
    )


@pytest.mark.parametrize("given", [1, 2])
def test_a_stream_cancelled_once_its_response_began_is_a_call_made(given: int) -> None:
    async def read() -> None:
        async with asyncio.timeout(0.2):
            async with await Extractor().aextract_stream(
                StopsMidAnswer(None, given=given), Person, _request()
            ) as stream:
                async for _ in stream:
                    pass

    with pytest.raises(TimeoutError) as caught:
        asyncio.run(read())
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage, record.cost_missing) == (0, Usage(), UNKNOWN)


def test_a_stream_closed_early_after_the_answer_began_has_its_cost_unknown_in_its_span() -> None:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    text = '{"name": "Ada Lovelace", "age": 36}'
    provider = MockStreamingProvider.with_stream(_events(_chunks(text, 3), usage=False))
    with Extractor(tracer_provider=tracing).extract_stream(provider, Person, _request()) as s:
        for index, _ in enumerate(s):
            if index == 5:
                break
    (span,) = [span for span in exporter.get_finished_spans() if span.name == "extract Person"]
    assert span.attributes is not None
    assert span.attributes["allama.stream.closed_early"] is True
    assert span.attributes["allama.cost.missing"] == UNKNOWN


# 2. A union's completed member is the one `finish()` picks (JSON, strictly).


class Event(BaseModel):
    when: datetime.date | str
    ref: uuid.UUID | str
    length: datetime.timedelta | str


class Log(BaseModel):
    event: Event
    rows: list[Event]
    note: str


UNION_LOG = {
    "event": {"when": "2024-01-02", "ref": "12345678-1234-5678-1234-567812345678", "length": "P1D"},
    "rows": [{"when": "2024-01-03", "ref": "12345678-1234-5678-1234-567812345679", "length": "x"}],
    "note": "n" * 10,
}


def _partials(tp: Any, text: str, size: int) -> tuple[list[Any], Any]:
    """Every partial value read after an event, and `finish()`'s value (or its error)."""
    provider = MockStreamingProvider.with_stream(_events(_chunks(text, size)))
    seen: list[Any] = []
    with Extractor().extract_stream(provider, tp, _request()) as stream:
        for _ in stream:
            seen.append(stream.partial)
        try:
            value: Any = stream.finish().value
        except ParseError as error:
            value = error
    return seen, value


@pytest.mark.parametrize("size", [1, 4, 40, 1000])
def test_a_completed_union_field_shows_the_member_finish_returns(size: int) -> None:
    seen, value = _partials(Log, json.dumps(UNION_LOG), size)
    assert value.event == Event(
        when=datetime.date(2024, 1, 2),
        ref=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        length=datetime.timedelta(days=1),
    )
    events = [p.event for p in seen if p is not None and "event" in p.model_fields_set]
    events += [row for p in seen if p is not None for row in getattr(p, "rows", [])]
    shown = {
        (name, type(getattr(event, name)))
        for event in events
        for name in ("when", "ref", "length")
        if name in event.model_fields_set
    }
    assert shown == {
        ("when", datetime.date),
        ("ref", uuid.UUID),
        ("length", datetime.timedelta),
        ("length", str),  # the row's `"x"`, which no duration reads
    }


# 3. The value `finish()` returns is not the preview.


class Item(BaseModel):
    name: str
    qty: int = Field(ge=1)


class Order(BaseModel):
    items: list[Item]


ORDER = '{"items": [{"name": "a", "qty": 2}, {"name": "b", "qty": 3}]}'


def test_editing_the_last_preview_leaves_the_value_finish_returns_alone() -> None:
    provider = MockStreamingProvider.with_stream(_events(_chunks(ORDER, 7)))
    with Extractor().extract_stream(provider, Order, _request()) as stream:
        for _ in stream:
            last = stream.partial
        assert last == Order.model_validate_json(ORDER)
        last.items.pop()  # a UI that edits what it shows
        last.items[0].qty = 0
        value = stream.finish().value
    assert value is not last
    assert value == Order(items=[Item(name="a", qty=2), Item(name="b", qty=3)])


def test_editing_the_last_preview_of_an_async_stream_leaves_finish_alone() -> None:
    async def read() -> Order:
        provider = MockStreamingProvider.with_stream(_events(_chunks(ORDER, 7)))
        async with await Extractor().aextract_stream(provider, Order, _request()) as stream:
            async for _ in stream:
                last = stream.partial
            assert last is not None
            last.items.clear()
            return (await stream.finish()).value

    assert asyncio.run(read()) == Order.model_validate_json(ORDER)


def test_a_preview_settled_on_a_decimal_is_the_value_finish_returns_not_the_same_object() -> None:
    # The scanner's preview (the float nearest) is not the value: the last preview is a
    # copy of `finish()`'s.
    from decimal import Decimal

    class Price(BaseModel):
        amount: Decimal

    text = '{"amount": 0.12345678901234567890123}'
    provider = MockStreamingProvider.with_stream(_events(_chunks(text, 5)))
    with Extractor().extract_stream(provider, Price, _request()) as stream:
        for _ in stream:
            last = stream.partial
        value = stream.finish().value
    assert value == last == Price(amount=Decimal("0.12345678901234567890123"))
    assert value is not last


# 4. A model's config applies to its fields' previews.


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Styled(BaseModel):
    model_config = ConfigDict(use_enum_values=True, str_to_upper=True)
    color: Color
    name: str
    tags: list[Color]


class Card(BaseModel):
    styled: Styled
    note: str


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_a_field_preview_follows_its_models_config(size: int) -> None:
    text = json.dumps(
        {"styled": {"color": "green", "name": "ada", "tags": ["red"]}, "note": "n" * 8}
    )
    seen, value = _partials(Card, text, size)
    assert value.styled.model_dump() == {"color": "green", "name": "ADA", "tags": ["red"]}
    styled = [p.styled for p in seen if p is not None and "styled" in p.model_fields_set]
    assert {repr(s.color) for s in styled if "color" in s.model_fields_set} == {"'green'"}
    assert {s.name for s in styled if "name" in s.model_fields_set} <= {"", "A", "AD", "ADA"}
    assert {repr(tag) for s in styled for tag in getattr(s, "tags", [])} == {"'red'"}


class Capped(BaseModel):
    model_config = ConfigDict(str_max_length=3)
    code: str
    tail: str


def test_a_completed_field_its_models_config_refuses_is_left_out() -> None:
    seen, value = _partials(Capped, '{"code": "abcdef", "tail": "xy"}', 1)
    assert isinstance(value, ParseError)
    assert all(len(p.code) <= 3 for p in seen if p is not None and "code" in p.model_fields_set)
    assert any(p is not None and getattr(p, "tail", None) == "xy" for p in seen)


# 5. Nothing `finish()` refuses is shown.


class Row(BaseModel):
    f: float


class Reading(BaseModel):
    row: Row
    age: int
    g: float
    rows: list[Row] = []


def _never(seen: list[Any], check: Any) -> None:
    for partial in seen:
        assert partial is None or not check(partial), partial


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_nan_and_infinity_are_never_shown(size: int) -> None:
    for text in (
        '{"row": {"f": NaN}, "age": 1, "g": 1}',
        '{"row": {"f": 1}, "age": 1, "g": -Infinity, "rows": []}',
        '{"row": {"f": 1}, "age": 1, "g": 1, "rows": [{"f": 2}, {"f": NaN}]}',
    ):
        seen, value = _partials(Reading, text, size)
        assert isinstance(value, ParseError)
        _never(
            seen, lambda p: any(x != x or x in (float("inf"), float("-inf")) for x in _floats(p))
        )


def _floats(value: Reading) -> list[float]:
    found = [getattr(value, "g", 0.0)]
    row = getattr(value, "row", None)
    if row is not None and "f" in row.model_fields_set:
        found.append(row.f)
    found += [row.f for row in getattr(value, "rows", []) if "f" in row.model_fields_set]
    return found


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_a_number_too_large_for_a_float_is_never_shown(size: int) -> None:
    for text in (
        '{"row": {"f": 1}, "age": 1, "g": 1e400}',
        '{"row": {"f": 1e400}, "age": 1, "g": 1}',
        '{"row": {"f": 1}, "age": 1, "g": 1, "rows": [{"f": 1e400}]}',
        '{"row": {"f": 1}, "age": 1, "g": 1' + "0" * 400 + "}",
    ):
        seen, value = _partials(Reading, text, size)  # reading it raises nothing
        assert isinstance(value, ParseError)
        _never(seen, lambda p: any(x in (float("inf"), float("-inf")) for x in _floats(p)))


@pytest.mark.parametrize("size", [1, 1000])
def test_a_string_for_an_int_is_never_shown(size: int) -> None:
    seen, value = _partials(Reading, '{"row": {"f": 1}, "age": "31", "g": 1}', size)
    assert isinstance(value, ParseError)
    _never(seen, lambda p: "age" in p.model_fields_set)
    assert any(p is not None and "g" in p.model_fields_set for p in seen)


@pytest.mark.parametrize("size", [1, 2, 1000])
def test_a_key_written_twice_never_changes_a_completed_value(size: int) -> None:
    for text, shown in (
        ('{"row": {"f": 1}, "age": 1, "age": 2, "g": 1}', lambda p: p.age == 2),
        ('{"row": {"f": 1}, "age": 1, "g": 1, "rows": [{"f": 1, "f": 2}]}', _a_row_of_two),
        # (a row being written, read by pydantic-core, which keeps the last value)
        ('{"row": {"f": 1}, "age": 1, "g": 1, "rows": [{"f": 1, "f": 2, "x": 0}]}', _a_row_of_two),
        ('{"row": {"f": 1, "f": 2}, "age": 1, "g": 1}', lambda p: p.row.f == 2),
    ):
        seen, value = _partials(Reading, text, size)
        assert isinstance(value, ParseError) and "appears twice" in str(value)
        _never(seen, lambda p, shown=shown: _has_all(p) and shown(p))


def _a_row_of_two(partial: Reading) -> bool:
    return any(getattr(row, "f", None) == 2 for row in getattr(partial, "rows", []))


def _has_all(partial: Reading) -> bool:
    return {"row", "age"} <= partial.model_fields_set and "f" in partial.row.model_fields_set


class Pair(BaseModel):
    a: Row
    b: int = 0


class Pairs(BaseModel):
    rows: list[Pair]


@pytest.mark.parametrize("size", [1, 3])
def test_a_key_written_twice_in_a_row_with_objects_inside_is_never_shown(size: int) -> None:
    text = '{"rows": [{"a": {"f": 1}, "b": 1, "b": 2, "x": 0}]}'
    seen, value = _partials(Pairs, text, size)
    assert isinstance(value, ParseError) and "appears twice" in str(value)
    shown = [row.b for p in seen if p is not None for row in getattr(p, "rows", [])]
    assert 1 in shown
    assert 2 not in shown


# 6. A stream the network cut after its status, nothing read, is one call made.


class _Reset(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A stream's body the connection reset before any of it came."""

    def __iter__(self) -> Iterator[bytes]:
        raise httpx2.ReadError("connection reset")
        yield b""  # a generator

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise httpx2.ReadError("connection reset")
        yield b""  # a generator


def _reset_after_status() -> Any:
    """An OpenAI provider whose stream is answered with its status, then reset."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=_Reset(), headers={"content-type": "text/event-stream"})

    async def answer_async(request: httpx2.Request) -> httpx2.Response:
        return answer(request)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer_async)),
    )
    return allama.provider("openai", api_key="k", transport=transport)


def _record_of_reset(flavour: str, target: Any) -> dict[str, Any]:
    request = ChatRequest("gpt-4o-mini").user("extract")

    async def aread() -> None:
        async with await Extractor().aextract_stream(target, Person, request) as stream:
            async for _ in stream:
                pass

    with pytest.raises(allama.NetworkError) as caught:
        if flavour == "sync":
            with Extractor().extract_stream(target, Person, request) as stream:
                for _ in stream:
                    pass
        else:
            asyncio.run(aread())
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    return record.to_json_dict()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_stream_reset_after_its_status_is_one_call_made_whose_cost_is_unknown(
    flavour: str,
) -> None:
    # One call, made and maybe billed: its cost unknown, as a retry's record of it says,
    # not "no usage was reported for one of its calls" (a second charge for it).
    bare = _record_of_reset(flavour, _reset_after_status())
    assert (bare["passes"], bare["usage"], bare["cost_missing"]) == (0, {}, UNKNOWN)
    retried = RetryingProvider(_reset_after_status(), RetryPolicy(max_attempts=1))
    assert _record_of_reset(flavour, retried) == bare


# 7. A stream closed once its response began, before any of the answer, was a call made:
# its record is the one of a stream the network cut there. One closed before anything came
# was none.

FORCED_TOOL = ExtractionMode.FORCED_TOOL
NO_USAGE = "no usage was reported"
STARTED = _events(['{"name": "Ada", "age": 36}'], usage=False)


def _closed_at_start(mode: ExtractionMode) -> ExtractionMetadata:
    """The record of a stream closed once the caller read its first event (its start)."""
    request = ChatRequest("m").user("extract").with_option(mode)
    stream = Extractor().extract_stream(MockStreamingProvider.with_stream(STARTED), Person, request)
    assert next(stream) == ResponseStart(id="r", model="m")
    stream.close()
    with pytest.raises(allama.Error) as caught:
        stream.finish()
    assert str(caught.value) == (
        "the stream was closed (close() or aclose()) before the response finished"
    )
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    return record


async def _aclosed_at_start(mode: ExtractionMode) -> ExtractionMetadata:
    request = ChatRequest("m").user("extract").with_option(mode)
    stream = await Extractor().aextract_stream(
        MockStreamingProvider.with_stream(STARTED), Person, request
    )
    assert await anext(stream) == ResponseStart(id="r", model="m")
    await stream.aclose()
    with pytest.raises(allama.Error) as caught:
        await stream.finish()
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    return record


# NATIVE: its start read ahead as the stream opened (for a refusal); FORCED_TOOL: read by
# the caller alone.
@pytest.mark.parametrize("mode", [NATIVE, FORCED_TOOL])
def test_a_stream_closed_once_its_response_began_is_a_call_made_whose_cost_is_unknown(
    mode: ExtractionMode,
) -> None:
    for record in (_closed_at_start(mode), asyncio.run(_aclosed_at_start(mode))):
        assert (record.passes, record.usage, record.cost, record.cost_missing) == (
            0,
            Usage(),
            None,
            UNKNOWN,
        )


def test_a_stream_closed_before_anything_came_is_no_call_made() -> None:
    request = ChatRequest("m").user("extract").with_option(FORCED_TOOL)
    stream = Extractor().extract_stream(MockStreamingProvider.with_stream(STARTED), Person, request)
    stream.close()
    with pytest.raises(allama.Error) as caught:
        stream.finish()
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage, record.cost_missing) == (0, None, NO_USAGE)


def test_a_stream_closed_once_its_response_began_has_its_cost_unknown_in_its_span() -> None:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    provider = MockStreamingProvider.with_stream(STARTED)
    with Extractor(tracer_provider=tracing).extract_stream(provider, Person, _request()) as s:
        assert next(s) == ResponseStart(id="r", model="m")
    (span,) = [span for span in exporter.get_finished_spans() if span.name == "extract Person"]
    assert span.attributes is not None
    assert span.attributes["allama.stream.closed_early"] is True
    assert span.attributes["allama.cost.missing"] == UNKNOWN


def _openai_pieces(text: str) -> list[bytes]:
    """A Chat Completions stream of `text`, one SSE event a piece: its start (the role, no
    content), the text, the finish, then the usage."""
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
    deltas: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "delta": {"content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 20}},
    ]
    pieces = [f"data: {json.dumps({**head, **delta})}\n\n".encode() for delta in deltas]
    return [*pieces, b"data: [DONE]\n\n"]


class _Pieces(httpx2.SyncByteStream):
    """A stream's body, one read per piece; reset after `cut` pieces, when given."""

    def __init__(self, pieces: list[bytes], cut: int | None) -> None:
        self._pieces = pieces
        self._cut = cut

    def __iter__(self) -> Iterator[bytes]:
        for index, piece in enumerate(self._pieces):
            if index == self._cut:
                raise httpx2.ReadError("connection reset")
            yield piece


def _openai_streaming(cut: int | None = None) -> Any:
    def answer(request: httpx2.Request) -> httpx2.Response:
        body = _Pieces(_openai_pieces('{"name": "Ada", "age": 36}'), cut)
        return httpx2.Response(200, stream=body, headers={"content-type": "text/event-stream"})

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    return allama.provider("openai", api_key="k", transport=transport)


def test_a_stream_closed_once_its_response_began_is_recorded_as_one_the_network_cut() -> None:
    request = ChatRequest("gpt-4o").user("extract")
    with (
        pytest.raises(allama.NetworkError) as cut,
        Extractor().extract_stream(_openai_streaming(cut=1), Person, request) as stream,
    ):
        stream.finish()
    stream = Extractor().extract_stream(_openai_streaming(), Person, request)
    assert next(stream) == ResponseStart(id="c1", model="gpt-4o")
    stream.close()
    with pytest.raises(allama.Error) as closed:
        stream.finish()
    by_cut = ExtractionMetadata.from_error(cut.value)
    by_close = ExtractionMetadata.from_error(closed.value)
    assert by_cut is not None and by_close is not None
    assert by_close.to_json_dict() == by_cut.to_json_dict()
    assert (by_close.passes, by_close.usage, by_close.cost_missing) == (0, Usage(), UNKNOWN)
