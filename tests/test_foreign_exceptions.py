"""An exception that is none of allama's, raised by a provider of the caller's own after
earlier calls were paid for, goes out as itself, holding the record of those calls: the
extraction, a decision, a stream's opening, a traced extraction and a batch run."""

from __future__ import annotations

import asyncio
from typing import Literal

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
from allama.mock import ChatResponseBuilder, MockProvider, MockStreamingProvider
from allama.stream import AsyncChatStream, ChatStream


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

    assert error_text(Unprintable()) == "Unprintable: message withheld (13 chars)"
