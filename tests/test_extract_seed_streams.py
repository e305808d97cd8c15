"""Seed 000's streamed extraction tests, ported one for one (see `test_extract_seed.py`).

Each runs with `extract_stream` and with `aextract_stream`. The seed's `RawStream`, a provider
type whose stream skips the stream rules, is a small hand-written provider here whose event
source keeps yielding after an error: the extraction stream still ends at the first one.

Left out: none.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

from pydantic import BaseModel

from _seed_support import (
    FORCED,
    NATIVE,
    Person,
    Run,
    alice,
    alice_call,
    approximated,
    failure,
    forced_request,
    native_request,
    rate_limited,
    refusal_record,
    refused,
    request,
    strict_dropped,
    text_with_usage,
    unsupported_field,
)
from allama import (
    BlockStart,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ChatValidation,
    EnforcementBelowError,
    Error,
    ExtractionMetadata,
    Extractor,
    FinishReason,
    IncompleteStreamError,
    OverloadedError,
    ParseError,
    RateLimitedError,
    RefusedError,
    RequestField,
    ResponseStart,
    SchemaEnforcement,
    StreamBlockType,
    StreamDecodeError,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageEvent,
    WarningEvent,
)
from allama.extract import EXTRACTION_TOOL
from allama.mock import ChatResponseBuilder, MockStreamingProvider, SetupError, response_events
from allama.provider import capabilities_only
from allama.stream import AsyncChatStream, ChatStream


def alice_tool_response() -> ChatResponse:
    return ChatResponseBuilder().tool_call("c", EXTRACTION_TOOL, alice_call()).build()


def structured_output_supported(provider: MockStreamingProvider) -> MockStreamingProvider:
    return provider.with_chat_capability(
        ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.SUPPORTED
    )


class _RawItems:
    """Its items as given, errors raised in place, and it goes on after an error."""

    def __init__(self, items: list[StreamEvent | Error]) -> None:
        self._items = list(items)

    def _take(self) -> StreamEvent:
        item = self._items.pop(0)
        if isinstance(item, Error):
            raise item
        return item

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        if not self._items:
            raise StopIteration
        return self._take()

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    async def __anext__(self) -> StreamEvent:
        if not self._items:
            raise StopAsyncIteration
        return self._take()


class RawStream:
    """A provider whose event source is its items as given: nothing of its own keeps it to
    the stream rules."""

    def __init__(self, items: list[StreamEvent | Error]) -> None:
        self._items: list[StreamEvent | Error] | None = items

    @property
    def name(self) -> str:
        return "raw"

    def _source(self) -> _RawItems:
        items, self._items = self._items or [], None
        return _RawItems(items)

    def chat(self, request: ChatRequest) -> ChatResponse:
        raise AssertionError("streams only")

    async def achat(self, request: ChatRequest) -> ChatResponse:
        raise AssertionError("streams only")

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        return ChatStream(self._source(), provider=self.name)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        return AsyncChatStream(self._source(), provider=self.name)

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        return CapabilitySupport.SUPPORTED

    def validate_chat_request(
        self, request: ChatRequest, *, stream: bool = False
    ) -> ChatValidation:
        return capabilities_only()


def test_a_streamed_extraction_ends_after_the_first_error(run: Run) -> None:
    provider = RawStream(
        [
            ResponseStart(),
            StreamDecodeError("broken"),
            TextDelta(index=0, text="after"),
        ]
    )
    stream = run.stream(provider, Person, request())
    assert isinstance(stream.next(), ResponseStart)
    assert isinstance(stream.next(), Error)
    assert stream.next() is None
    run.finish_fails(stream)


def test_streamed_auto_falls_back_on_a_setup_refusal(run: Run) -> None:
    provider = structured_output_supported(
        MockStreamingProvider(
            [
                SetupError(refused(RequestField.RESPONSE_FORMAT)),
                response_events(alice_tool_response()),
            ]
        )
    )
    stream = run.stream(provider, Person, request())
    assert stream.mode is FORCED
    stream.drain()
    extracted = stream.finish()
    assert extracted.value == alice()
    assert extracted.metadata.mode is FORCED
    assert extracted.metadata.passes == 1
    assert extracted.metadata.auto_fallback == refusal_record()
    assert provider.call_count == 2
    assert provider.requests[1].tool_choice is not None


def test_streamed_auto_falls_back_on_a_refusal_as_the_first_item(run: Run) -> None:
    provider = structured_output_supported(
        MockStreamingProvider(
            [[refused(RequestField.RESPONSE_FORMAT)], response_events(alice_tool_response())]
        )
    )
    stream = run.stream(provider, Person, request())
    assert stream.mode is FORCED
    stream.drain()
    assert json.loads(stream.partial_output) == alice_call()
    extracted = stream.finish()
    assert extracted.value == alice()
    assert extracted.metadata.auto_fallback == refusal_record()
    assert provider.call_count == 2


def test_streamed_auto_yields_the_first_item_it_read(run: Run) -> None:
    text = '{"name":"Alice","age":31}'
    provider = structured_output_supported(MockStreamingProvider.with_text(text))
    stream = run.stream(provider, Person, request())
    events = stream.drain()
    assert events == len(response_events(ChatResponseBuilder().text(text).build()))
    extracted = stream.finish()
    assert extracted.value == alice()
    assert extracted.metadata.mode is NATIVE
    assert extracted.metadata.auto_fallback is None

    # A first item that is not a refusal of the response format is yielded as the stream's
    # error.
    provider = structured_output_supported(
        MockStreamingProvider.with_stream([refused(RequestField.TOOLS)])
    )
    stream = run.stream(provider, Person, request())
    first = stream.next()
    assert isinstance(first, Error)
    assert unsupported_field(first) is RequestField.TOOLS
    assert stream.next() is None
    err = run.finish_fails(stream)
    assert unsupported_field(err) is RequestField.TOOLS
    assert provider.call_count == 1

    # An empty stream was cut short: it fails where it would have.
    provider = structured_output_supported(MockStreamingProvider.with_stream([]))
    stream = run.stream(provider, Person, request())
    first = stream.next()
    assert isinstance(first, IncompleteStreamError), repr(first)
    assert stream.next() is None


def test_streamed_failed_fallback_returns_the_forced_tool_error(run: Run) -> None:
    provider = structured_output_supported(
        MockStreamingProvider(
            [SetupError(refused(RequestField.RESPONSE_FORMAT)), SetupError(rate_limited())]
        )
    )
    err = run.stream_fails(provider, Person, request())
    assert isinstance(err, RateLimitedError), repr(err)
    record = ExtractionMetadata.from_error(err)
    assert record is not None
    assert record.mode is FORCED
    assert record.auto_fallback == refusal_record()

    # An explicit native stream never switches.
    provider = MockStreamingProvider([SetupError(refused(RequestField.RESPONSE_FORMAT))])
    err = run.stream_fails(provider, Person, native_request())
    assert unsupported_field(err) is RequestField.RESPONSE_FORMAT
    assert provider.call_count == 1


def test_streamed_native_extraction(run: Run) -> None:
    provider = MockStreamingProvider.with_text('{"name":"Alice","age":31}')
    stream = run.stream(provider, Person, native_request())
    events = stream.drain()
    assert events > 0
    assert stream.partial_output == '{"name":"Alice","age":31}'
    extracted = stream.finish()
    assert extracted.value == alice()
    assert extracted.metadata.mode is NATIVE
    assert provider.requests[0].response_format is not None


class Profile(BaseModel):
    name: str
    tags: list[str] = []
    nickname: str | None = None


STRICT_NULLS = '{"name":"Alice","tags":null,"nickname":null}'


def test_strict_nulls_are_normalized_in_streamed_extraction(run: Run) -> None:
    native = MockStreamingProvider.with_text(STRICT_NULLS)
    stream = run.stream(native, Profile, native_request())
    stream.read_all()
    assert stream.finish().value == Profile(name="Alice")

    forced = MockStreamingProvider.with_stream(
        response_events(
            ChatResponseBuilder().tool_call("c", EXTRACTION_TOOL, json.loads(STRICT_NULLS)).build()
        )
    )
    stream = run.stream(forced, Profile, forced_request())
    stream.read_all()
    assert stream.finish().value == Profile(name="Alice")


def test_streamed_forced_tool_extraction_tracks_the_tool_arguments(run: Run) -> None:
    provider = MockStreamingProvider.with_stream(response_events(alice_tool_response()))
    stream = run.stream(provider, Person, forced_request())
    stream.read_all()
    assert json.loads(stream.partial_output) == {"name": "Alice", "age": 31}
    assert stream.finish().value == alice()


def test_streamed_extraction_reports_stream_failures(run: Run) -> None:
    provider = MockStreamingProvider.with_stream(
        [ResponseStart(), TextDelta(index=0, text='{"name":'), OverloadedError("busy")]
    )
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    assert stream.partial_output == '{"name":'
    assert isinstance(run.finish_fails(stream), OverloadedError)


def declined(reason: FinishReason) -> ChatResponse:
    return (
        ChatResponseBuilder()
        .text("I can't help with that.")
        .finish_reason(reason)
        .usage(10, 6)
        .build()
    )


def test_a_streamed_refusal_fails_at_finish(run: Run) -> None:
    provider = MockStreamingProvider.from_responses([declined(FinishReason.CONTENT_FILTER)])
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    found = failure(run.finish_fails(stream))
    assert isinstance(found, RefusedError), repr(found)
    assert found.finish_reason == FinishReason.CONTENT_FILTER


def test_stream_setup_errors_carry_an_empty_record(run: Run) -> None:
    provider = MockStreamingProvider([SetupError(rate_limited())])
    err = run.stream_fails(provider, Person, native_request())
    assert isinstance(err, RateLimitedError), repr(err)
    assert err.retry_after == 7.0
    assert ExtractionMetadata.from_error(err) == ExtractionMetadata.new(NATIVE)


def test_stream_errors_returned_by_finish_carry_the_record(run: Run) -> None:
    provider = MockStreamingProvider.with_stream([ResponseStart(), OverloadedError("busy")])
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    err = run.finish_fails(stream)
    assert isinstance(err, OverloadedError), repr(err)
    assert err.retryable
    assert ExtractionMetadata.from_error(err) == ExtractionMetadata.new(NATIVE)


def failing_mid_stream() -> list[StreamEvent | Error]:
    """A stream that reported a degradation and its usage, then failed before finishing."""
    return [
        ResponseStart(),
        WarningEvent(warning=strict_dropped(RequestField.RESPONSE_FORMAT)),
        TextDelta(index=0, text='{"name":'),
        UsageEvent(usage=Usage(input_tokens=900, output_tokens=4)),
        OverloadedError("busy"),
    ]


def test_a_stream_failing_mid_way_keeps_its_usage_and_degradations(run: Run) -> None:
    provider = MockStreamingProvider.with_stream(failing_mid_stream())
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    err = run.finish_fails(stream)
    assert isinstance(err, OverloadedError), repr(err)
    record = ExtractionMetadata.from_error(err)
    assert record is not None
    # Billed, but not a pass: the stream returned no response.
    assert record.passes == 0
    assert record.usage is not None
    assert record.usage.input_tokens == 900
    assert record.usage.output_tokens == 4
    assert record.degradations == [strict_dropped(RequestField.RESPONSE_FORMAT)]
    assert record.enforcement is SchemaEnforcement.NOT_ENFORCED


def test_a_stream_ending_early_keeps_its_usage(run: Run) -> None:
    # No error item: the stream just stops before `Finish`.
    events = failing_mid_stream()
    events.pop()
    provider = MockStreamingProvider.with_stream(events)
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    err = run.finish_fails(stream)
    assert isinstance(err, StreamError), repr(err)
    record = ExtractionMetadata.from_error(err)
    assert record is not None
    assert record.passes == 0
    assert record.usage is not None and record.usage.input_tokens == 900


def test_a_failed_stream_after_a_fallback_keeps_both_records(run: Run) -> None:
    events: list[StreamEvent | Error] = [
        ResponseStart(),
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="c", name=EXTRACTION_TOOL),
        ToolCallDelta(index=0, arguments='{"name":'),
    ]
    events.extend(failing_mid_stream()[3:])
    provider = structured_output_supported(
        MockStreamingProvider([SetupError(refused(RequestField.RESPONSE_FORMAT)), events])
    )
    stream = run.stream(provider, Person, request())
    stream.read_all()
    err = run.finish_fails(stream)
    record = ExtractionMetadata.from_error(err)
    assert record is not None
    assert record.mode is FORCED
    assert record.auto_fallback == refusal_record()
    assert record.passes == 0
    assert record.usage is not None and record.usage.input_tokens == 900


def test_streamed_failures_carry_the_collected_response(run: Run) -> None:
    provider = MockStreamingProvider.from_responses([text_with_usage("nope", 3, 1)])
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    found = failure(run.finish_fails(stream))
    assert isinstance(found, ParseError)
    assert found.metadata.passes == 1
    assert found.metadata.usage is not None and found.metadata.usage.input_tokens == 3
    assert found.response is not None and found.response.text() == "nope"


def test_streamed_extraction_reports_the_streamed_degradations(run: Run) -> None:
    def degraded(text: str) -> ChatResponse:
        return (
            ChatResponseBuilder().text(text).warning(strict_dropped(RequestField.RESPONSE_FORMAT))
        ).build()

    provider = MockStreamingProvider.from_responses([degraded('{"name":"Alice","age":31}')])
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    extracted = stream.finish()
    assert extracted.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert extracted.metadata.degradations == [strict_dropped(RequestField.RESPONSE_FORMAT)]

    provider = MockStreamingProvider.from_responses([degraded("nope")])
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    found = failure(run.finish_fails(stream))
    assert found.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert found.metadata.degradations == [strict_dropped(RequestField.RESPONSE_FORMAT)]

    provider = MockStreamingProvider.with_text('{"name":"Alice","age":31}')
    stream = run.stream(provider, Person, native_request())
    stream.read_all()
    extracted = stream.finish()
    assert extracted.metadata.enforcement is SchemaEnforcement.EXACT
    assert extracted.metadata.degradations == []


def approximate_text(text: str) -> ChatResponse:
    return (
        ChatResponseBuilder()
        .text(text)
        .warning(approximated(RequestField.RESPONSE_FORMAT))
        .usage(10, 5)
        .build()
    )


class Contact(BaseModel):
    email: str | None = None
    phone: str | None = None


class Customer(BaseModel):
    name: str
    contact: Contact | None = None


def test_streamed_extraction_rejects_undeclared_keys(run: Run) -> None:
    provider = MockStreamingProvider.from_responses(
        [approximate_text('{"name": "Ada", "e_mail": "x"}')]
    )
    stream = run.stream(provider, Customer, native_request())
    stream.read_all()
    found = failure(run.finish_fails(stream))
    assert found.metadata.undeclared_key_rejections == 1


def test_a_floor_applies_to_streams(run: Run) -> None:
    provider = MockStreamingProvider.from_responses(
        [approximate_text('{"name": "Ada", "contact": null}')]
    )
    stream = run.stream(
        provider, Customer, native_request(), Extractor(min_enforcement=SchemaEnforcement.EXACT)
    )
    stream.read_all()
    found = failure(run.finish_fails(stream))
    assert isinstance(found, EnforcementBelowError)
