"""A Gemini stream whose connection breaks after its finishing chunk (the finish reason and
the final usage) ends with its answer, as OpenAI's and Anthropic's do after their finish:
the answer came whole and was paid for. One cut before that chunk still fails, its output
unknown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMetadata
from allama.adapters.gemini._stream import GenerateStreamDecoder, decode_stream
from allama.errors import Error, NetworkError, RequestTimeoutError, paid_for
from allama.providers import HttpProvider
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import ChatResponse, Finish, FinishReason, StreamEvent, Usage

KEY = "AIza-test-key-1234"
MODEL = "gemini-2.0-flash"
SSE = {"content-type": "text/event-stream"}
RUNNING = {"promptTokenCount": 15, "totalTokenCount": 15}
FINAL = {"promptTokenCount": 15, "candidatesTokenCount": 9, "totalTokenCount": 24}
WHOLE = Usage(input_tokens=15, output_tokens=9)
CITED = {"citationSources": [{"startIndex": 0, "endIndex": 4, "uri": "https://example.com"}]}


class City(BaseModel):
    city: str


def chunk(
    text: str, usage: dict[str, Any] | None = None, finish: str | None = None, **candidate: Any
) -> str:
    candidate["content"] = {"role": "model", "parts": [{"text": text}]}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL}
    if usage is not None:
        body["usageMetadata"] = usage
    return f"data: {json.dumps(body)}\r\n\r\n"


ANSWER = chunk('{"city": ', RUNNING) + chunk('"Paris"}', FINAL, finish="STOP")
BEFORE_FINISH = chunk('{"city": ', RUNNING) + chunk('"Par', RUNNING)


class _Cut(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """The bytes, then the connection breaking."""

    def __init__(self, data: bytes, failure: Exception) -> None:
        self._data = data
        self._failure = failure

    def __iter__(self) -> Iterator[bytes]:
        yield self._data
        raise self._failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._data
        raise self._failure


FAILURES = {
    "reset": lambda: httpx2.RemoteProtocolError("peer closed connection"),
    "timeout": lambda: httpx2.ReadTimeout("timed out"),
}


def cut(body: str, failure: str = "reset") -> HttpProvider:
    def answer(request: httpx2.Request) -> httpx2.Response:
        stream = _Cut(body.encode(), FAILURES[failure]())
        return httpx2.Response(200, headers=SSE, stream=stream)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    target: HttpProvider = allama.provider("gemini", api_key=KEY, transport=transport)
    return target


def request() -> ChatRequest:
    return ChatRequest(MODEL).user("The capital of France?")


def _used(response: ChatResponse) -> None:
    assert response.text() == '{"city": "Paris"}'
    assert response.finish_reason == FinishReason.STOP
    assert response.usage == WHOLE


def _paid(error: BaseException) -> dict[str, Any]:
    assert isinstance(error, Error)
    [paid] = paid_for(error)
    usage = paid["usage"]
    assert isinstance(usage, dict)
    return usage


# After the finishing chunk: the answer is used


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_chat_stream_cut_after_its_finishing_chunk_ends_with_its_answer(failure: str) -> None:
    target = cut(ANSWER, failure)
    with target.chat_stream(request()) as stream:
        events = list(stream)
        _used(stream.response())
    assert isinstance(events[-1], Finish)

    async def run() -> tuple[list[StreamEvent], ChatResponse]:
        stream = await target.achat_stream(request())
        async with stream:
            seen = [event async for event in stream]
            return seen, await stream.response()

    events, response = asyncio.run(run())
    _used(response)
    assert isinstance(events[-1], Finish)


def test_the_recorded_stream_cut_after_its_last_chunk_is_used_whole() -> None:
    # The answer of the recorded `stream_sse_text` exchange (its text and usage, in three
    # chunks, the finish and the final usage on the last), then the connection reset.
    recorded = (
        chunk("The", {"promptTokenCount": 13, "totalTokenCount": 13})
        + chunk(" capital of France is", {"promptTokenCount": 13, "totalTokenCount": 13})
        + chunk(
            " Paris.\n",
            {"promptTokenCount": 13, "candidatesTokenCount": 8, "totalTokenCount": 21},
            finish="STOP",
        )
    )
    response = cut(recorded).chat_stream(request()).response()
    assert response.text() == "The capital of France is Paris.\n"
    assert response.usage == Usage(input_tokens=13, output_tokens=8)


def test_an_extraction_stream_cut_after_its_finishing_chunk_is_a_pass() -> None:
    target = cut(ANSWER)
    with allama.extract_stream(target, City, request()) as stream:
        for _ in stream:
            pass
        result = stream.finish()
    assert result.value == City(city="Paris")
    assert (result.metadata.passes, result.metadata.usage) == (1, WHOLE)
    assert result.metadata.cost is not None

    async def run() -> Any:
        async with allama.aextract_stream(target, City, request()) as astream:
            async for _ in astream:
                pass
            return await astream.finish()

    result = asyncio.run(run())
    assert result.value == City(city="Paris")
    assert (result.metadata.passes, result.metadata.usage) == (1, WHOLE)


# Before the finishing chunk: unchanged, the stream fails with an unknown output


def test_a_chat_stream_cut_before_its_finishing_chunk_still_fails() -> None:
    target = cut(BEFORE_FINISH)
    with pytest.raises(NetworkError) as caught, target.chat_stream(request()) as stream:
        stream.response()
    assert _paid(caught.value) == {"input_tokens": 15}

    async def run() -> None:
        async with await target.achat_stream(request()) as stream:
            await stream.response()

    with pytest.raises(NetworkError) as caught_async:
        asyncio.run(run())
    assert _paid(caught_async.value) == {"input_tokens": 15}


def test_an_extraction_stream_cut_before_its_finishing_chunk_still_fails() -> None:
    target = cut(BEFORE_FINISH)
    with (
        pytest.raises(NetworkError) as caught,
        allama.extract_stream(target, City, request()) as stream,
    ):
        stream.finish()
    metadata = ExtractionMetadata.from_error(caught.value)
    assert metadata is not None
    assert (metadata.passes, metadata.usage, metadata.cost) == (0, Usage(input_tokens=15), None)

    async def run() -> None:
        async with allama.aextract_stream(target, City, request()) as astream:
            await astream.finish()

    with pytest.raises(NetworkError) as caught_async:
        asyncio.run(run())
    metadata = ExtractionMetadata.from_error(caught_async.value)
    assert metadata is not None and metadata.usage == Usage(input_tokens=15)


def test_a_cut_after_the_finish_reason_but_before_its_usage_still_fails() -> None:
    # The usage is on a chunk of its own after the finishing one: the answer's cost had
    # not come when the connection broke.
    target = cut(chunk('{"city": "Paris"}', finish="STOP"), "timeout")
    with pytest.raises(RequestTimeoutError):
        target.chat_stream(request()).response()


# The decoder: Finish goes out with the finishing chunk; what follows is read as before


def _fed(data: str) -> tuple[list[StreamEvent], list[StreamEvent]]:
    decoder = GenerateStreamDecoder(provider="gemini")
    return list(decoder.feed(data.encode())), list(decoder.close())


def _collected(events: list[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def test_finish_goes_out_with_the_finishing_chunk_that_carries_the_usage() -> None:
    fed, closed = _fed(ANSWER)
    assert fed[-1] == Finish(finish_reason=FinishReason.STOP) and closed == []
    # Without its usage, the finishing chunk leaves the end to `close()`, as before.
    fed, closed = _fed(chunk("a", finish="STOP"))
    assert not any(isinstance(event, Finish) for event in fed)
    assert closed[-1] == Finish(finish_reason=FinishReason.STOP)


def test_usage_and_metadata_after_the_finishing_chunk_are_still_read() -> None:
    later_usage = {"promptTokenCount": 15, "candidatesTokenCount": 10, "totalTokenCount": 25}
    after = "data: " + json.dumps({"usageMetadata": later_usage}) + "\r\n\r\n"
    cited = chunk("", citationMetadata=CITED, finish="STOP")
    data = ANSWER + cited + after
    response = _collected(decode_stream(data.encode()))
    assert response.usage == Usage(input_tokens=15, output_tokens=10)
    assert response.provider_data["gemini"]["citation_metadata"] == CITED
    assert response.text() == '{"city": "Paris"}'


def test_parts_and_a_finish_after_the_end_are_kept_out_of_the_answer() -> None:
    # Gemini reports its finish once, last: a chunk that resends the answer (or says more
    # after its finish) does not add to it, and the first finish stays the answer's.
    for later in (ANSWER, chunk("more", finish="MAX_TOKENS")):
        response = _collected(decode_stream((ANSWER + later).encode()))
        assert response.text() == '{"city": "Paris"}'
        assert (response.finish_reason, response.usage) == (FinishReason.STOP, WHOLE)
