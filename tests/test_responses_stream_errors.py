"""Errors in a Responses API stream, read as the same answer unstreamed is: the usage a
failed response reports after an `error` event (OpenAI's order), the reason an `error`
frame gives after a failed response that said nothing (Azure's), content-filter codes and
`invalid_request_error` as the request's fault, and deltas that disagree with their
finished text raised with the terminal event's usage. Each through a mock transport,
sync and async, streamed and not."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from _responses_support import sse
from allama import ExtractionMetadata, Extractor
from allama.adapters.openai_responses import ResponsesStreamDecoder, decode_body, decode_stream
from allama.errors import (
    Error,
    InvalidRequestError,
    RateLimitedError,
    ServerError,
    StreamDecodeError,
)
from allama.extract import EXTRACTION_TOOL
from allama.transport import Transport
from allama.types import Usage, UsageEvent
from allama.wrappers import RetryingProvider


class Person(BaseModel):
    name: str
    year: int


MODEL = "gpt-5-mini-2025-08-07"
USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 40},
    "output_tokens": 50,
    "output_tokens_details": {"reasoning_tokens": 30},
    "total_tokens": 150,
}
COUNTED = Usage(input_tokens=100, output_tokens=50, reasoning_tokens=30, cache_read_tokens=40)
GOOD = '{"name":"Ada","year":1843}'


def response(output: list[Any], status: str = "completed", **extra: Any) -> dict[str, Any]:
    body = {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "model": MODEL,
        "output": output,
        "usage": USAGE,
        "incomplete_details": None,
        "error": None,
    }
    return {**body, **extra}


START = response([], status="in_progress", usage=None)
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": GOOD, "annotations": []}],
}
AT = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
OPEN_TEXT = (
    {"type": "response.created", "response": START},
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {**MESSAGE, "status": "in_progress", "content": []},
    },
    {
        "type": "response.content_part.added",
        **AT,
        "part": {"type": "output_text", "text": "", "annotations": []},
    },
    {"type": "response.output_text.delta", **AT, "delta": '{"name":"Ada",'},
)
SERVER_ERROR = {"code": "server_error", "message": "The server had an error."}
FAILED = response([], status="failed", error=SERVER_ERROR)
REQUEST = allama.ChatRequest("gpt-5-mini").user("Ada 1843")


class Endpoint:
    """A mock endpoint: each request answered with `answer` (status, body); a body of bytes
    is a stream, and a `(chunks, failure)` pair a stream that breaks after its chunks."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body = status, body
        self.requests = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        if isinstance(self.body, tuple):
            events = {"content-type": "text/event-stream"}
            return httpx2.Response(self.status, headers=events, stream=_Cut(*self.body))
        stream = isinstance(self.body, bytes)
        content = self.body if stream else json.dumps(self.body).encode()
        kind = "text/event-stream" if stream else "application/json"
        return httpx2.Response(self.status, content=content, headers={"content-type": kind})

    def provider(self, preset: str = "openai", **options: Any) -> Any:
        transport = Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )
        return allama.provider(preset, api="responses", api_key="k", transport=transport, **options)


class _Cut(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A streamed body that breaks (the connection reset) after its chunks."""

    def __init__(self, chunks: list[bytes], failure: Exception) -> None:
        self.chunks, self.failure = chunks, failure

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        raise self.failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        raise self.failure


def _extract_sync(provider: Any, request: allama.ChatRequest) -> object:
    return Extractor().extract(provider, Person, request)


def _extract_async(provider: Any, request: allama.ChatRequest) -> object:
    return asyncio.run(Extractor().aextract(provider, Person, request))


def _stream_sync(provider: Any, request: allama.ChatRequest) -> object:
    with Extractor().extract_stream(provider, Person, request) as stream:
        for _ in stream:
            pass
        return stream.finish()


def _stream_async(provider: Any, request: allama.ChatRequest) -> object:
    async def run() -> object:
        async with Extractor().aextract_stream(provider, Person, request) as stream:
            async for _ in stream:
                pass
            return await stream.finish()

    return asyncio.run(run())


Run = Callable[[Any, allama.ChatRequest], object]
STREAMED: list[Run] = [_stream_sync, _stream_async]
ALL: list[Run] = [_extract_sync, _extract_async, _stream_sync, _stream_async]


def _failure(run: Run, provider: Any, request: allama.ChatRequest = REQUEST) -> Error:
    with pytest.raises(Error) as caught:
        run(provider, request)
    return caught.value


# 1. OpenAI's order: an `error` event, then `response.failed` with the usage.

ERROR_THEN_FAILED = sse(
    *OPEN_TEXT,
    {"type": "error", **SERVER_ERROR, "param": None},
    {"type": "response.failed", "response": FAILED},
)


@pytest.mark.parametrize("run", ALL)
def test_the_usage_of_the_failed_response_after_an_error_event_is_kept(run: Run) -> None:
    streamed = run in STREAMED
    endpoint = Endpoint(200, ERROR_THEN_FAILED if streamed else FAILED)
    error = _failure(run, endpoint.provider())
    assert type(error) is ServerError
    assert str(error) == "The server had an error."
    metadata = ExtractionMetadata.from_error(error)
    assert metadata.usage == COUNTED
    assert metadata.cost_missing is None
    assert metadata.cost is not None


def test_the_error_events_error_is_raised_with_the_usage_of_the_failed_response() -> None:
    # OpenAI's recorded order (a TPM rate limit): the event's error, its usage after it.
    limited = {"code": "rate_limit_exceeded", "message": "Limit 1, Requested 30."}
    data = sse(
        {"type": "response.created", "response": START},
        {"type": "error", "error": {"type": "tokens", **limited, "param": None}},
        {"type": "response.failed", "response": response([], "failed", error=limited)},
    )
    seen: list[object] = []
    decoder = ResponsesStreamDecoder(provider="openai", model="gpt-5-mini")
    with pytest.raises(RateLimitedError) as caught:
        for event in decoder.feed(data):
            seen.append(event)
    assert str(caught.value) == "Limit 1, Requested 30."
    assert [event for event in seen if isinstance(event, UsageEvent)] == [UsageEvent(usage=COUNTED)]


def test_a_failed_response_naming_more_than_the_error_event_gives_its_error() -> None:
    # The event said only that the server failed; the failed response names the limit.
    limited = {"code": "rate_limit_exceeded", "message": "Rate limit reached."}
    data = sse(
        {"type": "response.created", "response": START},
        {"type": "error", "message": "The server had an error."},
        {"type": "response.failed", "response": response([], "failed", error=limited)},
    )
    with pytest.raises(RateLimitedError):
        decode_stream(data, provider="openai", model="gpt-5-mini")


@pytest.mark.parametrize("run", STREAMED)
def test_an_error_event_alone_is_raised_at_the_streams_end(run: Run) -> None:
    created = {"type": "response.created", "response": START}
    endpoint = Endpoint(200, sse(created, {"type": "error", **SERVER_ERROR}))
    error = _failure(run, RetryingProvider(endpoint.provider(), sleep=lambda _: None))
    assert type(error) is ServerError
    assert str(error) == "The server had an error."
    assert endpoint.requests == 3  # a server error before any output: asked again


@pytest.mark.parametrize("run", STREAMED)
def test_a_stream_cut_after_the_error_event_raises_the_error(run: Run) -> None:
    # The connection breaks while the decoder reads on past the error event: no hang, and
    # the provider's error (the request's fault, not asked again) stands.
    refused = {"type": "error", "code": "invalid_prompt", "message": "Refused."}
    created = {"type": "response.created", "response": START}
    endpoint = Endpoint(200, ([sse(created, refused)], httpx2.ReadError("connection reset")))
    error = _failure(run, RetryingProvider(endpoint.provider(), sleep=lambda _: None))
    assert (type(error), str(error), endpoint.requests) == (InvalidRequestError, "Refused.", 1)


# 2. Azure's order: `response.failed` whose error is null, then an `error` frame.

FILTERED = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content "
    "management policy."
)
AZURE_FAILED = {**START, "status": "failed", "error": None}
AZURE_FRAME = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "code": "content_policy_violation",
        "message": FILTERED,
        "param": None,
    },
}
AZURE_STREAM = sse(
    {"type": "response.created", "response": START},
    {"type": "response.failed", "response": AZURE_FAILED},
    AZURE_FRAME,
)
AZURE_400 = {
    "error": {
        "code": "content_filter",
        "param": "prompt",
        "type": None,
        "status": 400,
        "message": FILTERED,
        "innererror": {"code": "ResponsibleAIPolicyViolation"},
    }
}
AZURE = {"endpoint": "https://res.openai.azure.com"}


@pytest.mark.parametrize("run", ALL)
def test_azures_content_filter_is_the_requests_fault_and_not_asked_again(run: Run) -> None:
    streamed = run in STREAMED
    endpoint = Endpoint(200, AZURE_STREAM) if streamed else Endpoint(400, AZURE_400)
    provider = RetryingProvider(endpoint.provider("azure-openai", **AZURE), sleep=lambda _: None)
    error = _failure(run, provider)
    assert type(error) is InvalidRequestError
    assert str(error) == FILTERED
    assert not error.retryable
    assert endpoint.requests == 1


def test_a_failed_response_that_said_nothing_waits_for_the_error_frame() -> None:
    with pytest.raises(InvalidRequestError, match="content management policy"):
        decode_stream(AZURE_STREAM, provider="azure-openai", model="gpt-5.1")
    # With no frame after it, the stream's end says the provider did not say why.
    alone = sse(
        {"type": "response.created", "response": START},
        {"type": "response.failed", "response": {**AZURE_FAILED, "usage": USAGE}},
    )
    decoder = ResponsesStreamDecoder(provider="azure-openai", model="gpt-5.1")
    assert UsageEvent(usage=COUNTED) in list(decoder.feed(alone))
    with pytest.raises(ServerError, match="the provider did not say why"):
        list(decoder.close())


@pytest.mark.parametrize("run", STREAMED)
def test_a_failed_response_that_said_nothing_keeps_its_usage_for_the_frames_error(
    run: Run,
) -> None:
    stream = sse(
        *OPEN_TEXT,
        {"type": "response.failed", "response": {**AZURE_FAILED, "usage": USAGE, "model": MODEL}},
        AZURE_FRAME,
    )
    endpoint = Endpoint(200, stream)
    error = _failure(run, endpoint.provider("azure-openai", **AZURE))
    assert type(error) is InvalidRequestError
    assert ExtractionMetadata.from_error(error).usage == COUNTED


# 3. The codes of a content filter, and `invalid_request_error`, without an HTTP status.


@pytest.mark.parametrize("code", ["content_filter", "content_policy_violation"])
def test_content_filter_codes_are_invalid_requests_in_events_and_failed_bodies(code: str) -> None:
    event = sse({"type": "error", "code": code, "message": "filtered", "param": None})
    with pytest.raises(InvalidRequestError) as streamed:
        decode_stream(event, provider="openai", model="m")
    failed = response([], "failed", error={"code": code, "message": "filtered"})
    with pytest.raises(InvalidRequestError) as body:
        decode_body(json.dumps(failed), provider="openai", model="m")
    for error in (streamed.value, body.value):
        assert type(error) is InvalidRequestError and not error.retryable


def test_an_invalid_request_error_with_a_code_allama_does_not_know_is_the_requests() -> None:
    frame = {"type": "error", "error": {"type": "invalid_request_error", "code": "new_code"}}
    with pytest.raises(InvalidRequestError):
        decode_stream(sse({**frame, "error": {**frame["error"], "message": "no"}}))
    # A code that says more still says it.
    full = {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "x"}
    with pytest.raises(allama.errors.ContextWindowExceededError):
        decode_stream(sse({"type": "error", "error": full}))
    # And an unknown code without that type is still the server's.
    with pytest.raises(ServerError):
        decode_stream(sse({"type": "error", "code": "new_code", "message": "no"}))


# 4. Deltas that disagree with their finished text: raised with the terminal event's usage.

CALL = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "call_1",
    "name": EXTRACTION_TOOL,
    "arguments": GOOD,
    "status": "completed",
}
CALL_AT = {"output_index": 0, "item_id": "fc_1"}
CALL_STREAM = sse(
    {"type": "response.created", "response": START},
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {**CALL, "arguments": "", "status": "in_progress"},
    },
    {"type": "response.function_call_arguments.delta", **CALL_AT, "delta": '{"name":"Ada",'},
    {"type": "response.function_call_arguments.delta", **CALL_AT, "delta": '"year":1842}'},
    {"type": "response.function_call_arguments.done", **CALL_AT, "arguments": GOOD},
    {"type": "response.output_item.done", "output_index": 0, "item": CALL},
    {"type": "response.completed", "response": response([CALL])},
)
TEXT_STREAM = sse(
    *OPEN_TEXT,
    {"type": "response.output_text.delta", **AT, "delta": '"year":1842}'},
    {"type": "response.output_text.done", **AT, "text": GOOD},
    {"type": "response.content_part.done", **AT, "part": MESSAGE["content"][0]},
    {"type": "response.output_item.done", "output_index": 0, "item": MESSAGE},
    {"type": "response.completed", "response": response([MESSAGE])},
)
FORCED = REQUEST.with_option(allama.ExtractionMode.FORCED_TOOL)


@pytest.mark.parametrize("run", STREAMED)
@pytest.mark.parametrize(
    ("stream", "request_", "where"),
    [
        (CALL_STREAM, FORCED, "output item 0"),
        (TEXT_STREAM, REQUEST, "output item 0, content part 0"),
    ],
    ids=["arguments", "text"],
)
def test_disagreeing_deltas_raise_with_the_usage_of_the_completed_response(
    run: Run, stream: bytes, request_: allama.ChatRequest, where: str
) -> None:
    endpoint = Endpoint(200, stream)
    error = _failure(run, RetryingProvider(endpoint.provider(), sleep=lambda _: None), request_)
    assert type(error) is StreamDecodeError
    assert str(error) == f"the streamed deltas of {where} disagree with its finished text"
    metadata = ExtractionMetadata.from_error(error)
    assert metadata.usage == COUNTED
    assert metadata.cost_missing is None
    assert endpoint.requests == 1


def test_deltas_disagreeing_with_the_terminal_response_raise_after_its_usage() -> None:
    # No `.done` events: the completed response's own output is the finished text.
    stream = sse(
        *OPEN_TEXT,
        {"type": "response.output_text.delta", **AT, "delta": '"year":1842}'},
        {"type": "response.completed", "response": response([MESSAGE])},
    )
    decoder = ResponsesStreamDecoder(provider="openai", model="gpt-5-mini")
    seen: list[object] = []
    with pytest.raises(StreamDecodeError, match="disagree"):
        for event in decoder.feed(stream):
            seen.append(event)
    assert seen[-1] == UsageEvent(usage=COUNTED)


def test_a_disagreement_then_a_cut_stream_raises_the_disagreement() -> None:
    cut = TEXT_STREAM[: TEXT_STREAM.index(b"event: response.content_part.done")]
    with pytest.raises(StreamDecodeError, match="disagree"):
        decode_stream(cut, provider="openai", model="gpt-5-mini")
