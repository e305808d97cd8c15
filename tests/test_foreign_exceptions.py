"""An exception that is none of allama's, raised by a provider of the caller's own after
earlier calls were paid for, goes out as itself, holding the record of those calls: the
extraction, a decision, a stream's opening, a traced extraction and a batch run."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import allama
from _seed_support import refusal_record, refused
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    ExtractionMetadata,
    ExtractionMode,
    Extractor,
    RequestField,
    Usage,
)
from allama.errors import REPORTED_USAGE_KEY
from allama.mock import ChatResponseBuilder, MockProvider, MockStreamingProvider
from allama.stream import AsyncChatStream, ChatStream
from allama.wrappers import FailoverProvider, RetryingProvider


class Person(BaseModel):
    name: str
    age: int


PAID = Usage(input_tokens=1000, output_tokens=500)


class Broken(RuntimeError):
    pass


def prose() -> ChatResponse:
    return ChatResponseBuilder().text("Alice, I think, is thirty-one.").usage(1000, 500).build()


class BreaksAfterFirst(MockProvider):
    """Answers its first call from the script, then raises an exception of its own."""

    def chat(self, request: ChatRequest) -> ChatResponse:
        if self.call_count:
            self._record(request)
            raise Broken("the caller's provider broke")
        return super().chat(request)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self.chat(request)


def native() -> ChatRequest:
    return ChatRequest("m").user("Alice is 31").with_option(ExtractionMode.NATIVE)


def _paid_record(error: BaseException) -> ExtractionMetadata:
    record = ExtractionMetadata.from_error(error)
    assert record is not None, "the exception carries no record of what was paid"
    return record


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_provider_exception_after_a_paid_pass_keeps_that_pass(run: str) -> None:
    provider = BreaksAfterFirst([prose()])
    extractor = Extractor(retries=1)
    with pytest.raises(Broken) as raised:
        if run == "sync":
            extractor.extract(provider, Person, native())
        else:
            asyncio.run(extractor.aextract(provider, Person, native()))
    record = _paid_record(raised.value)
    assert (record.passes, record.usage, record.mode) == (1, PAID, ExtractionMode.NATIVE)
    assert provider.call_count == 2


def test_a_provider_exception_on_the_first_call_has_no_record() -> None:
    provider = BreaksAfterFirst([prose()])
    provider.chat(native())  # its one answer spent
    with pytest.raises(Broken) as raised:
        Extractor().extract(provider, Person, native())
    assert ExtractionMetadata.from_error(raised.value) is None


def test_a_traced_extraction_keeps_the_record_and_ends_its_span_failed() -> None:
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    provider = BreaksAfterFirst([prose()])
    with pytest.raises(Broken) as raised:
        Extractor(retries=1, tracer_provider=tracer).extract(provider, Person, native())
    assert _paid_record(raised.value).passes == 1
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code.name == "ERROR"
    assert dict(span.attributes or {})["allama.extract.retries"] == 1


def test_a_decision_asked_again_keeps_the_pass_before_the_exception() -> None:
    provider = BreaksAfterFirst([prose()])
    with pytest.raises(Broken) as raised:
        Extractor(retries=1).decide(provider, Literal["yes", "no"], native())
    record = _paid_record(raised.value)
    assert (record.passes, record.usage) == (1, PAID)


class StreamBreaksAfterFirst(MockStreamingProvider):
    def chat_stream(self, request: ChatRequest) -> ChatStream:
        if self.call_count:
            self._record(request)
            raise Broken("the caller's provider broke")
        return super().chat_stream(request)

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        if self.call_count:
            self._record(request)
            raise Broken("the caller's provider broke")
        return await super().achat_stream(request)


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_stream_opened_again_after_a_refusal_keeps_the_fallback(run: str) -> None:
    provider = StreamBreaksAfterFirst([[refused(RequestField.RESPONSE_FORMAT)]])
    provider = provider.with_chat_capability(
        ChatCapability.STRUCTURED_OUTPUT, CapabilitySupport.SUPPORTED
    )
    request = ChatRequest("m").user("Alice is 31")
    with pytest.raises(Broken) as raised:
        if run == "sync":
            Extractor().extract_stream(provider, Person, request)
        else:

            async def opened() -> None:
                await Extractor().aextract_stream(provider, Person, request)

            asyncio.run(opened())
    record = _paid_record(raised.value)
    assert record.auto_fallback == refusal_record()
    assert record.mode is ExtractionMode.FORCED_TOOL
    assert provider.call_count == 2


def test_a_batch_input_failed_so_keeps_what_it_paid() -> None:
    provider = BreaksAfterFirst([prose()])
    (result,) = allama.batch(
        provider, Person, ["Alice is 31"], request=native(), extractor=Extractor(retries=1)
    )
    assert result.failure is not None and result.failure.kind == "Broken"
    assert result.metadata is not None
    assert (result.metadata.passes, result.metadata.usage) == (1, PAID)


class Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("no text")


class RaisesUnprintable(MockProvider):
    def chat(self, request: ChatRequest) -> ChatResponse:
        self._record(request)
        raise Unprintable()

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self.chat(request)


def test_an_exception_whose_text_raises_fails_its_input_alone() -> None:
    results = list(allama.batch(RaisesUnprintable(), Person, ["a", "b"], request=native()))
    assert [(r.failure.kind, r.failure.message) for r in results if r.failure] == [
        ("Unprintable", "<Unprintable>"),
        ("Unprintable", "<Unprintable>"),
    ]


def test_the_ray_columns_say_an_exception_whose_text_raises() -> None:
    from allama.ray import error_text

    assert error_text(Unprintable()) == "Unprintable: <Unprintable>"  # as a batch run says


def paid_failure(tokens: int) -> allama.Error:
    """A server error the provider billed for (OpenRouter's, say): tried again."""
    error = allama.ServerError("upstream failed").with_provider("a").with_model("gpt-4o")
    return error.with_metadata(REPORTED_USAGE_KEY, {"input_tokens": tokens, "output_tokens": 5})


class Script(MockProvider):
    """Its items in turn: a response is answered, an exception raised."""

    def __init__(self, items: list[object], name: str = "a") -> None:
        super().__init__([], name=name)
        self.items = list(items)

    def chat(self, request: ChatRequest) -> ChatResponse:
        self._record(request)
        item = self.items.pop(0)
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, ChatResponse)
        return item

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return self.chat(request)


NO_WAIT: dict[str, Any] = {"sleep": lambda seconds: None, "random": lambda: 0.0}


@pytest.mark.parametrize("wrapper", ["retrying", "failover"])
def test_what_a_wrappers_attempts_paid_before_the_exception_is_in_the_record(
    wrapper: str,
) -> None:
    provider: allama.ChatProvider
    if wrapper == "retrying":
        provider = RetryingProvider(Script([paid_failure(100), Broken("down")]), **NO_WAIT)
    else:
        provider = FailoverProvider([Script([paid_failure(100)]), Script([Broken("down")], "b")])
    with pytest.raises(Broken) as raised:
        Extractor().extract(provider, Person, native())
    record = _paid_record(raised.value)
    assert (record.passes, record.usage) == (0, Usage(input_tokens=100, output_tokens=5))


def test_a_pass_and_a_wrappers_paid_attempt_before_the_exception_are_both_counted() -> None:
    inner = Script([prose(), paid_failure(100), Broken("down")])
    with pytest.raises(Broken) as raised:
        Extractor(retries=1).extract(RetryingProvider(inner, **NO_WAIT), Person, native())
    record = _paid_record(raised.value)
    assert (record.passes, record.usage) == (1, Usage(input_tokens=1100, output_tokens=505))


def test_a_batch_counts_what_each_input_paid_before_its_exception_once() -> None:
    items: list[object] = [paid_failure(100), Broken("down")] * 2
    provider = RetryingProvider(Script(items), **NO_WAIT)
    run = allama.batch(provider, Person, ["a", "b"], request=native(), concurrency=1)
    results = list(run)
    assert [r.metadata.usage for r in results if r.metadata] == [
        Usage(input_tokens=100, output_tokens=5)
    ] * 2
    assert (run.summary.input_tokens, run.summary.output_tokens) == (200, 10)


def test_one_exception_object_raised_again_carries_no_earlier_record() -> None:
    down = Broken("down")  # one object, raised by every call that fails
    provider = Script([prose(), down, down])
    with pytest.raises(Broken):
        Extractor(retries=1).extract(provider, Person, native())
    assert _paid_record(down).passes == 1
    with pytest.raises(Broken):
        Extractor().extract(provider, Person, native())  # paid nothing this time
    assert ExtractionMetadata.from_error(down) is None


class Locked(RuntimeError):
    """An exception that takes no attribute, refusing with an error of its own kind."""

    def __setattr__(self, name: str, value: object) -> None:
        raise RuntimeError("Locked is immutable")


def test_an_exception_that_refuses_attributes_goes_out_as_itself() -> None:
    locked = Locked("down")
    for inner in (Script([prose(), locked]), Script([paid_failure(100), locked])):
        with pytest.raises(Locked) as raised:
            Extractor(retries=1).extract(RetryingProvider(inner, **NO_WAIT), Person, native())
        assert raised.value is locked


def test_a_decision_keeps_what_the_call_refused_for_log_probabilities_paid() -> None:
    refusal = allama.InvalidRequestError("logprobs are not supported for this model")
    inner = Script([paid_failure(100), refusal, Broken("down")])
    inner = inner.with_supported_chat_capabilities([ChatCapability.CHOICE_OUTPUT])
    provider = RetryingProvider(inner, **NO_WAIT)
    with pytest.raises(Broken) as raised:
        allama.decide(provider, Literal["yes", "no"], ChatRequest("gpt-4o").user("Is it?"))
    record = _paid_record(raised.value)
    assert record.usage == Usage(input_tokens=100, output_tokens=5)


def _paid_then_waits() -> tuple[MockProvider, RetryingProvider]:
    """A first pass answered in prose (paid), then a server error that reported usage, and
    a retry's wait of a minute after it."""
    from allama.errors import ServerError, with_reported_usage
    from allama.wrappers import RetryPolicy

    cut = with_reported_usage(ServerError("cut"), {"input_tokens": 100, "output_tokens": 50}, "m")
    inner = MockProvider([prose(), cut, '{"name": "Alice", "age": 31}'])
    return inner, RetryingProvider(inner, RetryPolicy(initial_backoff=60, jitter=0))


PAID_BEFORE_THE_WAIT = Usage(input_tokens=1100, output_tokens=550)


def test_an_extraction_cancelled_while_a_retry_waits_keeps_what_it_paid() -> None:
    # `asyncio.timeout` cancels the task during the wait: the pass and the failed call
    # were paid for, and the `TimeoutError` (from the cancellation) holds their record.
    inner, provider = _paid_then_waits()

    async def run() -> None:
        async with asyncio.timeout(0.2):
            await Extractor(retries=1).aextract(provider, Person, native())

    with pytest.raises(TimeoutError) as caught:
        asyncio.run(run())
    assert inner.call_count == 2
    for error in (caught.value, caught.value.__cause__):
        assert isinstance(error, BaseException)
        record = ExtractionMetadata.from_error(error)
        assert record is not None
        assert (record.passes, record.usage) == (1, PAID_BEFORE_THE_WAIT)


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_retry_wait_that_raises_keeps_what_the_attempts_paid(run: str) -> None:
    # A sleep of the caller's own that raises (a deadline, an interrupt): the failed
    # attempt's usage and the pass before it go with its exception, as with a provider's.
    inner, provider = _paid_then_waits()

    def sleep(seconds: float) -> None:
        raise Broken("deadline")

    async def async_sleep(seconds: float) -> None:
        raise Broken("deadline")

    provider = RetryingProvider(inner, provider.policy, sleep=sleep, async_sleep=async_sleep)
    with pytest.raises(Broken) as caught:
        if run == "sync":
            Extractor(retries=1).extract(provider, Person, native())
        else:
            asyncio.run(Extractor(retries=1).aextract(provider, Person, native()))
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage) == (1, PAID_BEFORE_THE_WAIT)


def test_a_keyboard_interrupt_during_a_retry_wait_keeps_what_was_paid() -> None:
    inner, provider = _paid_then_waits()

    def sleep(seconds: float) -> None:
        raise KeyboardInterrupt

    provider = RetryingProvider(inner, provider.policy, sleep=sleep)
    with pytest.raises(KeyboardInterrupt) as caught:
        Extractor(retries=1).extract(provider, Person, native())
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None
    assert (record.passes, record.usage) == (1, PAID_BEFORE_THE_WAIT)


class BreaksMidStream(MockProvider):
    """A stream whose usage came, then whose reading raises `raised` (a provider's own
    exception, an interrupt) before its end."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__()
        self.raised = raised
        self.half = ChatResponseBuilder().text('{"name": "Al').usage(900, 90).build()

    def _events(self, request: ChatRequest) -> list[Any]:
        self._record(request)
        source = MockStreamingProvider.from_responses([self.half])
        return list(source.chat_stream(request))[:-1]  # all but its end

    def chat_stream(self, request: ChatRequest) -> ChatStream:
        events = self._events(request)

        def broken() -> Any:
            yield from events
            raise self.raised

        return ChatStream(broken(), provider="mock")

    async def achat_stream(self, request: ChatRequest) -> AsyncChatStream:
        events = self._events(request)

        async def broken() -> Any:
            for event in events:
                yield event
            raise self.raised

        return AsyncChatStream(broken(), provider="mock")


MID_STREAM = Usage(input_tokens=900, output_tokens=90)


@pytest.mark.parametrize("raised", [Broken("mid-stream"), KeyboardInterrupt()])
@pytest.mark.parametrize("run", ["sync", "async"])
def test_an_exception_while_a_stream_is_read_keeps_what_it_paid(
    run: str, raised: BaseException
) -> None:
    provider = BreaksMidStream(raised)
    request = ChatRequest("m").user("Alice is 31")
    with pytest.raises(type(raised)) as caught:
        if run == "sync":
            with Extractor().extract_stream(provider, Person, request) as stream:
                for _ in stream:
                    pass
        else:

            async def read() -> None:
                async with await Extractor().aextract_stream(provider, Person, request) as stream:
                    async for _ in stream:
                        pass

            asyncio.run(read())
    record = _paid_record(caught.value)
    assert (record.passes, record.usage) == (0, MID_STREAM)


def test_a_traced_extraction_interrupted_during_a_retry_wait_keeps_what_was_paid() -> None:
    # A tracer in the way (any app that set OpenTelemetry's global one) passes the
    # interrupt to the steps too.
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    inner, provider = _paid_then_waits()

    def sleep(seconds: float) -> None:
        raise KeyboardInterrupt

    provider = RetryingProvider(inner, provider.policy, sleep=sleep)
    with pytest.raises(KeyboardInterrupt) as caught:
        Extractor(retries=1, tracer_provider=tracing).extract(provider, Person, native())
    record = _paid_record(caught.value)
    assert (record.passes, record.usage) == (1, PAID_BEFORE_THE_WAIT)
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["allama.extract.usage.input_tokens"] == 1100


def test_an_anyio_deadline_during_a_retry_wait_keeps_what_was_paid() -> None:
    # anyio's `fail_after` raises its `TimeoutError` while handling the cancellation,
    # which holds the record (`__context__`, not `__cause__`).
    import anyio

    _, provider = _paid_then_waits()

    async def run() -> None:
        with anyio.fail_after(0.2):
            await Extractor(retries=1).aextract(provider, Person, native())

    with pytest.raises(TimeoutError) as caught:
        asyncio.run(run())
    record = _paid_record(caught.value)
    assert (record.passes, record.usage) == (1, PAID_BEFORE_THE_WAIT)
