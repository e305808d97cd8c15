"""The partial value of a streamed `TypedDict` with `ReadOnly` items, and what the test
provider writes for the date types whose checks go beyond their schema."""

from __future__ import annotations

import asyncio
import datetime
from typing import Annotated, Any, NotRequired, Required

import pytest
from pydantic import (
    AwareDatetime,
    BaseModel,
    Field,
    FutureDate,
    FutureDatetime,
    NaiveDatetime,
    PastDate,
    PastDatetime,
)
from typing_extensions import ReadOnly, TypedDict

from allama import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ExtractionMode,
    Extractor,
    Finish,
    ParseError,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from allama.extract import EXTRACTION_TOOL
from allama.mock import MockProvider, MockStreamingProvider, TestProvider

pytestmark = pytest.mark.filterwarnings("ignore:.*`ReadOnly` qualifier:UserWarning")

MODES = [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL]


class Invoice(TypedDict, total=False):
    number: Required[ReadOnly[str]]
    total: ReadOnly[Required[int]]
    note: ReadOnly[NotRequired[str]]
    count: Annotated[ReadOnly[int], Field(gt=0)]


TEXT = '{"number": "INV-1", "total": 12, "note": "ok", "count": 3}'
CHUNKS = [TEXT[i : i + 7] for i in range(0, len(TEXT), 7)]
"""`{"numbe`, `r": "IN`, `V-1", "`, `total":`, ` 12, "n`, `ote": "`, `ok", "c`,
`ount": `, `3}`."""
PARTIALS: list[Any] = [
    {},
    {"number": "IN"},
    {"number": "INV-1"},
    {"number": "INV-1"},
    {"number": "INV-1", "total": 12},
    {"number": "INV-1", "total": 12, "note": ""},
    {"number": "INV-1", "total": 12, "note": "ok"},
    {"number": "INV-1", "total": 12, "note": "ok"},
    {"number": "INV-1", "total": 12, "note": "ok", "count": 3},
]


def _events(chunks: list[str], mode: ExtractionMode) -> list[StreamEvent]:
    if mode is ExtractionMode.NATIVE:
        opened: StreamEvent = BlockStart(index=0, block_type=StreamBlockType.TEXT)
        deltas: list[StreamEvent] = [TextDelta(index=0, text=chunk) for chunk in chunks]
        finish = "stop"
    else:
        opened = BlockStart(
            index=0, block_type=StreamBlockType.TOOL_CALL, id="c", name=EXTRACTION_TOOL
        )
        deltas = [ToolCallDelta(index=0, arguments=chunk) for chunk in chunks]
        finish = "tool_calls"
    return [ResponseStart(), opened, *deltas, BlockStop(index=0), Finish(finish_reason=finish)]


def _request(mode: ExtractionMode) -> ChatRequest:
    return ChatRequest("m").user("extract").with_option(mode)


def _stream(tp: Any, chunks: list[str], mode: ExtractionMode) -> tuple[list[Any], Any]:
    """The partial value after each delta, and `finish()`'s value."""
    provider = MockStreamingProvider.with_stream(_events(chunks, mode))
    partials: list[Any] = []
    with Extractor().extract_stream(provider, tp, _request(mode)) as opened:
        for event in opened:
            if isinstance(event, TextDelta | ToolCallDelta):
                partials.append(opened.partial)
        return partials, opened.finish().value


async def _astream(tp: Any, chunks: list[str], mode: ExtractionMode) -> tuple[list[Any], Any]:
    provider = MockStreamingProvider.with_stream(_events(chunks, mode))
    partials: list[Any] = []
    async with await Extractor().aextract_stream(provider, tp, _request(mode)) as opened:
        async for event in opened:
            if isinstance(event, TextDelta | ToolCallDelta):
                partials.append(opened.partial)
        return partials, (await opened.finish()).value


@pytest.mark.parametrize("mode", MODES)
def test_readonly_items_preview_as_they_arrive(mode: ExtractionMode) -> None:
    partials, value = _stream(Invoice, CHUNKS, mode)
    assert partials == PARTIALS
    assert value == {"number": "INV-1", "total": 12, "note": "ok", "count": 3}


@pytest.mark.parametrize("mode", MODES)
def test_readonly_items_preview_as_they_arrive_async(mode: ExtractionMode) -> None:
    partials, value = asyncio.run(_astream(Invoice, CHUNKS, mode))
    assert partials == PARTIALS
    assert value == {"number": "INV-1", "total": 12, "note": "ok", "count": 3}


class Counted(TypedDict):
    count: Annotated[Required[int], Field(gt=0)]
    name: str


class Kept(TypedDict):
    count: Annotated[ReadOnly[Required[int]], Field(gt=0)]
    name: ReadOnly[str]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tp", [Counted, Kept])
def test_constraints_around_a_qualifier_hold_in_the_preview(tp: Any, mode: ExtractionMode) -> None:
    """`Field(gt=0)` outside `Required`/`ReadOnly` applies: a `0` is left out of the
    preview, as `finish()` refuses it, rather than shown as if valid."""
    chunks = ['{"count": 0,', ' "name": "a"}']
    provider = MockStreamingProvider.with_stream(_events(chunks, mode))
    partials: list[Any] = []
    with Extractor().extract_stream(provider, tp, _request(mode)) as opened:
        for event in opened:
            if isinstance(event, TextDelta | ToolCallDelta):
                partials.append(opened.partial)
        with pytest.raises(ParseError, match="greater than 0"):
            opened.finish()
    assert partials == [{}, {"name": "a"}]


# The test provider and the date types


class Booking(BaseModel):
    day: PastDate
    at: PastDatetime
    aware: AwareDatetime
    naive: NaiveDatetime


def test_test_provider_answers_past_aware_and_naive_dates() -> None:
    extracted = Extractor().extract(TestProvider(), Booking, ChatRequest("m").user("x"))
    assert extracted.value == Booking(
        day=datetime.date(2000, 1, 1),
        at=datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC),
        aware=datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC),
        naive=datetime.datetime(2000, 1, 1),
    )


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (FutureDate, "Date should be in the future"),
        (FutureDatetime, "Input should be in the future"),
    ],
)
def test_test_provider_future_dates_are_refused_as_documented(tp: Any, message: str) -> None:
    """Its value is the schema's, and a future date's schema is any date's: the type refuses
    2000-01-01 (see `TestProvider`'s docstring); a scripted value is the way to test it."""
    with pytest.raises(ParseError, match=message):
        Extractor().extract(TestProvider(), tp, ChatRequest("m").user("x"))
    later = datetime.date(9999, 12, 31)
    scripted = MockProvider.with_structured(later)
    assert Extractor().extract(scripted, FutureDate, ChatRequest("m").user("x")).value == later
