"""A provider of the caller's own written before `validate_chat_request` took `stream=` is
planned for streams as for calls: its dry run of the call, said to cover its capabilities
alone, so a floor is not checked against it before a stream (it raised a bare TypeError)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from allama import ChatRequest, Extractor, ValidationCoverage
from allama.mock import MockStreamingProvider


class Person(BaseModel):
    name: str


class Old(MockStreamingProvider):
    def validate_chat_request(self, request: ChatRequest) -> Any:  # type: ignore[override]
        return super().validate_chat_request(request)


def test_a_provider_without_stream_in_its_dry_run_streams_under_a_floor() -> None:
    request = ChatRequest("m").user("Ada")
    streamed = Extractor().plan(Old.with_text("{}"), Person, request, stream=True)
    assert streamed.coverage is ValidationCoverage.CAPABILITIES
    assert (streamed.mode, streamed.stream) == (
        Extractor().plan(Old.with_text("{}"), Person, request).mode,
        True,
    )
    extractor = Extractor(min_enforcement="approximate")
    with extractor.extract_stream(Old.with_text('{"name": "Ada"}'), Person, request) as stream:
        for _ in stream:
            pass
        assert stream.finish().value == Person(name="Ada")
