"""Chat Completions answers that say they failed: a choice ended with finish reason `error`
(Mistral, vLLM) is no answer to read, however well its text parses; an error object with
no status (a stream's event, a 200 body) is classified by its OpenAI type or its code, so a
request's own fault is not paid for again by a retry or a failover."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import ChatRequest, ExtractionMetadata, Usage
from allama.errors import InvalidRequestError, RateLimitedError, ServerError


class Person(BaseModel):
    name: str
    age: int


REQUEST = ChatRequest("mistral-large-latest").user("Ada is 36.")
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
ANSWER = '{"name": "Ada", "age": 36}'


def _body(text: str, finish: str) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "mistral-large-latest",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
        ],
        "usage": USAGE,
    }


def _sse(*payloads: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(p)}\n\n".encode() for p in payloads) + b"data: [DONE]\n\n"


def _chunk(text: str | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    delta = {} if text is None else {"content": text}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "mistral-large-latest",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def _extract(target: Any, *, streamed: bool, run_async: bool) -> Any:
    extractor = allama.Extractor()
    if not streamed:
        if run_async:
            return asyncio.run(extractor.aextract(target, Person, REQUEST))
        return extractor.extract(target, Person, REQUEST)
    if run_async:

        async def go() -> Any:
            async with extractor.aextract_stream(target, Person, REQUEST) as stream:
                async for _ in stream:
                    pass
                return await stream.finish()

        return asyncio.run(go())
    with extractor.extract_stream(target, Person, REQUEST) as stream:
        for _ in stream:
            pass
        return stream.finish()


WAYS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize(("streamed", "run_async"), WAYS)
def test_an_answer_that_ended_in_an_error_is_not_read_however_well_it_parses(
    streamed: bool, run_async: bool
) -> None:
    answer = _sse(_chunk(ANSWER), _chunk(None, "error", usage=USAGE)) if streamed else None
    target, recorder = provider("mistral", (200, answer or _body(ANSWER, "error")))
    with pytest.raises(ServerError) as raised:
        _extract(target, streamed=streamed, run_async=run_async)
    error = raised.value
    assert error.retryable
    assert str(error).startswith(
        "the provider ended the answer in an error it did not describe (finish reason `error`)"
    )
    record = ExtractionMetadata.from_error(error)
    assert record is not None
    assert record.usage == Usage(input_tokens=10, output_tokens=5)  # paid for, kept
    assert len(recorder.bodies) == 1


def test_an_answer_that_ended_in_an_error_is_asked_again_by_a_retrying_provider() -> None:
    target, recorder = provider(
        "mistral", (200, _body(ANSWER, "error")), (200, _body('{"name": "Bo", "age": 7}', "stop"))
    )
    wrapped = allama.RetryingProvider(target, sleep=lambda _: None)
    result = allama.extract(wrapped, Person, REQUEST)
    assert result.value == Person(name="Bo", age=7)
    assert len(recorder.bodies) == 2
    assert result.metadata.usage == Usage(input_tokens=20, output_tokens=10)


def test_a_normal_finish_beside_it_still_reads() -> None:
    target, _ = provider("mistral", (200, _body(ANSWER, "stop")))
    assert allama.extract(target, Person, REQUEST).value == Person(name="Ada", age=36)


INVALID = {
    "error": {
        "message": "Invalid 'messages[0].content': string too long",
        "type": "invalid_request_error",
        "param": "messages",
        "code": None,
    }
}
FILTERED = {"error": {"message": "The response was filtered", "code": "content_filter"}}
LIMITED = {"error": {"message": "Slow down", "type": "rate_limit_error", "code": None}}


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    ("payload", "kind"),
    [(INVALID, InvalidRequestError), (FILTERED, InvalidRequestError), (LIMITED, RateLimitedError)],
)
def test_an_error_object_without_a_status_is_classified_by_its_type_or_code(
    payload: dict[str, Any], kind: type[Exception], streamed: bool
) -> None:
    answer: Any = _sse(payload) if streamed else payload
    target, recorder = provider("mistral", (200, answer))
    wrapped = allama.RetryingProvider(target, sleep=lambda _: None)
    with pytest.raises(kind) as raised:
        _extract(wrapped, streamed=streamed, run_async=False)
    assert str(raised.value).startswith(payload["error"]["message"])
    if kind is InvalidRequestError:
        assert not raised.value.retryable  # type: ignore[attr-defined]
        assert len(recorder.bodies) == 1  # the request's fault: not sent again


def test_a_status_less_server_error_stays_one_to_try_again() -> None:
    payload = {"error": {"message": "boom", "type": "server_error", "code": None}}
    target, _ = provider("mistral", (200, _sse(payload)))
    with pytest.raises(ServerError) as raised:
        _extract(target, streamed=True, run_async=False)
    assert raised.value.retryable


@pytest.mark.parametrize(("streamed", "run_async"), [(True, False), (True, True)])
def test_the_usage_chunk_after_an_error_finish_is_kept(streamed: bool, run_async: bool) -> None:
    # vLLM's order with `include_usage`: the finish, then a chunk of usage alone.
    usage_alone = {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": USAGE}
    answer = _sse(_chunk(ANSWER), _chunk(None, "error"), usage_alone)
    target, recorder = provider("vllm", (200, answer), base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ServerError) as raised:
        _extract(target, streamed=streamed, run_async=run_async)
    record = ExtractionMetadata.from_error(raised.value)
    assert record is not None
    assert record.usage == Usage(input_tokens=10, output_tokens=5)
    assert len(recorder.bodies) == 1


def test_a_stream_that_ends_after_an_error_finish_without_done_raises_its_error() -> None:
    usage_alone = {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": USAGE}
    answer = _sse(_chunk(ANSWER), _chunk(None, "error"), usage_alone)
    answer = answer.removesuffix(b"data: [DONE]\n\n")
    target, _ = provider("vllm", (200, answer), base_url="http://127.0.0.1:9/v1")
    with target.chat_stream(REQUEST) as events, pytest.raises(ServerError) as raised:
        for _ in events:
            pass
    assert str(raised.value).startswith("the provider ended the answer in an error")
