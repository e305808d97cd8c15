"""A streamed call answered with JSON, as to a plain call (a gateway or a compatible host that
ignores `stream: true`, or an error object under a 200), is read as the plain call's answer:
the whole response, paid for, comes as the stream's events with its usage, and the error an
error object stands for is raised, as `chat` would, rather than an incomplete stream to retry.
A stream the dialect frames in JSON (Gemini's array, Ollama's lines) still streams.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, Extractor, OverloadedError, Usage
from allama.stream import AsyncChatStream, ChatStream
from allama.transport import Transport
from allama.types import (
    BlockStart,
    BlockStop,
    ChatResponse,
    Finish,
    ProviderDataEvent,
    ResponseStart,
    StreamEvent,
    TextDelta,
    UsageEvent,
    WarningEvent,
)

JSON = "application/json"
SSE = "text/event-stream"
NDJSON = "application/x-ndjson"

OPENAI = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hello"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
ANTHROPIC = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "say hi", "signature": "sig"},
        {"type": "text", "text": "hello"},
        {"type": "tool_use", "id": "toolu_1", "name": "greet", "input": {"who": "you"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
GEMINI = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": "hello"}]},
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
    "modelVersion": "gemini-2.5-flash",
    "responseId": "resp-1",
}
OLLAMA = {
    "model": "llama3.2",
    "created_at": "2025-01-01T00:00:00Z",
    "message": {"role": "assistant", "content": "hello"},
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 3,
    "eval_count": 1,
}
MODELS = {
    "openai": "gpt-4o",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "ollama": "llama3.2",
}
WHOLE = {"openai": OPENAI, "anthropic": ANTHROPIC, "gemini": GEMINI, "ollama": OLLAMA}


class Host:
    """An endpoint answering every call with one body and content type, recording the calls."""

    def __init__(self, body: Any, content_type: str = JSON) -> None:
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.content_type = content_type
        self.calls: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        request.read()
        self.calls.append(request)
        return httpx2.Response(200, content=self.body, headers={"content-type": self.content_type})

    def provider(self, preset: str) -> Any:
        transport = Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )
        return allama.provider(preset, api_key="k", transport=transport)

    def sent(self, index: int = 0) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.calls[index].content)
        return found


def _request(preset: str) -> ChatRequest:
    return ChatRequest(MODELS[preset]).user("hi")


def _streamed(provider: Any, request: ChatRequest) -> tuple[list[StreamEvent], ChatResponse]:
    stream: ChatStream = provider.chat_stream(request)
    with stream:
        events = list(stream)
        return events, stream.response()


def _astreamed(provider: Any, request: ChatRequest) -> tuple[list[StreamEvent], ChatResponse]:
    async def read() -> tuple[list[StreamEvent], ChatResponse]:
        stream: AsyncChatStream = await provider.achat_stream(request)
        async with stream:
            events = [event async for event in stream]
            return events, await stream.response()

    return asyncio.run(read())


READERS = [pytest.param(_streamed, id="sync"), pytest.param(_astreamed, id="async")]


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("preset", ["openai", "anthropic", "gemini", "ollama"])
def test_a_whole_answer_to_a_streamed_call_collects_to_what_chat_gives(
    preset: str, read: Any
) -> None:
    host = Host(WHOLE[preset])
    provider = host.provider(preset)
    events, streamed = read(provider, _request(preset))
    plain = provider.chat(_request(preset))
    assert streamed == plain
    assert streamed.text() == "hello"
    assert streamed.usage is not None and streamed.usage.input_tokens in (3, 10)
    assert isinstance(events[0], ResponseStart)
    assert isinstance(events[-1], Finish)
    assert any(isinstance(event, UsageEvent) for event in events)
    if preset == "openai":
        assert host.sent()["stream"] is True
        assert streamed.usage == Usage(input_tokens=3, output_tokens=1)
    if preset == "gemini":
        assert host.calls[0].url.params["alt"] == "sse"
        assert host.calls[0].url.path.endswith(":streamGenerateContent")


def test_each_block_of_a_whole_answer_is_one_delta_between_its_start_and_stop() -> None:
    events, response = _streamed(Host(OPENAI).provider("openai"), _request("openai"))
    kinds = [type(event) for event in events if not isinstance(event, ProviderDataEvent)]
    assert kinds == [ResponseStart, BlockStart, TextDelta, BlockStop, UsageEvent, Finish]
    assert response.finish_reason == "stop"
    assert response.provider == "openai"


@pytest.mark.parametrize("read", READERS)
def test_reasoning_text_and_a_tool_call_answered_whole_keep_their_signature_and_issuer(
    read: Any,
) -> None:
    _, response = read(Host(ANTHROPIC).provider("anthropic"), _request("anthropic"))
    thinking, text, call = response.content
    assert (thinking.text, thinking.signature, thinking.issuer) == ("say hi", "sig", "anthropic")
    assert text.text == "hello"
    assert (call.id, call.name, json.loads(call.arguments)) == ("toolu_1", "greet", {"who": "you"})
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=10, output_tokens=5)


ERRORS = [
    pytest.param(
        "anthropic",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        id="anthropic",
    ),
    pytest.param(
        "openai",
        {"error": {"type": "overloaded_error", "message": "Overloaded", "code": "x"}},
        id="openai",
    ),
]


@pytest.mark.parametrize(("preset", "body"), ERRORS)
def test_an_error_object_under_a_200_is_the_error_it_holds_when_streamed(
    preset: str, body: dict[str, Any]
) -> None:
    provider = Host(body).provider(preset)
    with pytest.raises(OverloadedError) as plain:
        provider.chat(_request(preset))
    with pytest.raises(OverloadedError) as streamed:
        provider.chat_stream(_request(preset))

    async def aopen() -> None:
        await provider.achat_stream(_request(preset))

    with pytest.raises(OverloadedError) as astreamed:
        asyncio.run(aopen())
    for caught in (streamed, astreamed):
        error = caught.value
        assert str(error) == str(plain.value) == "Overloaded"
        assert error.retryable is True
        assert (error.provider, error.context.model) == (preset, MODELS[preset])
        assert error.context.metadata == plain.value.context.metadata


class Person(BaseModel):
    name: str
    age: int


def test_an_extraction_over_a_stream_answered_whole_gets_its_value_and_counts_the_call() -> None:
    answer = json.loads(json.dumps(OPENAI))
    answer["choices"][0]["message"]["content"] = '{"name": "Ada", "age": 36}'
    answer["usage"] = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
    provider = Host(answer).provider("openai")
    with Extractor().extract_stream(provider, Person, _request("openai")) as stream:
        for _ in stream:
            pass
        extracted = stream.finish()
    assert extracted.value == Person(name="Ada", age=36)
    assert extracted.metadata.passes == 1
    assert extracted.metadata.usage == Usage(input_tokens=40, output_tokens=12)


# Streams the dialect frames in JSON, or labelled JSON, still stream.


def _sse(*payloads: dict[str, Any]) -> bytes:
    return "".join(f"data: {json.dumps(p)}\n\n" for p in payloads).encode()


def test_a_gemini_stream_as_a_json_array_is_still_decoded_as_a_stream() -> None:
    first = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hel"}]}, "index": 0}],
        "modelVersion": "gemini-2.5-flash",
    }
    body = f"[{json.dumps(first)},\r\n{json.dumps(GEMINI)}]".encode()
    events, response = _streamed(Host(body).provider("gemini"), _request("gemini"))
    assert response.text() == "helhello"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hel", "hello"]


@pytest.mark.parametrize("content_type", [NDJSON, JSON])
def test_an_ollama_stream_of_lines_streams_whatever_its_label(content_type: str) -> None:
    first = {**OLLAMA, "message": {"role": "assistant", "content": "hel"}, "done": False}
    last = {**OLLAMA, "message": {"role": "assistant", "content": "lo"}}
    body = f"{json.dumps(first)}\n{json.dumps(last)}\n".encode()
    events, response = _streamed(Host(body, content_type).provider("ollama"), _request("ollama"))
    assert response.text() == "hello"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hel", "lo"]


@pytest.mark.parametrize("content_type", [SSE, JSON])
def test_server_sent_events_stream_whatever_their_label(content_type: str) -> None:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": None}],
    }
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body = _sse(chunk, end) + b"data: [DONE]\n\n"
    _, response = _streamed(Host(body, content_type).provider("openai"), _request("openai"))
    assert (response.text(), response.finish_reason) == ("hello", "stop")


def test_the_warnings_of_a_streamed_call_answered_whole_are_given_once() -> None:
    provider = Host(ANTHROPIC).provider("anthropic")
    request = _request("anthropic").model_copy(update={"seed": 3})
    events, response = _streamed(provider, request)
    warnings = [event.warning for event in events if isinstance(event, WarningEvent)]
    assert [warning.message for warning in warnings] == ["Anthropic has no seed"]
    assert response.warnings == tuple(warnings)


# A whole answer labelled as events (or not labelled): a body that begins as a JSON object
# cannot be server-sent events, so it is read as the whole answer once it has all come,
# where the stream ended with no event and was retried as incomplete, paid for twice.


class ChunkedHost(Host):
    """A `Host` whose body comes in the given chunks, under the given label (none: `None`)."""

    def __init__(self, chunks: list[bytes], content_type: str | None) -> None:
        super().__init__(b"".join(chunks))
        self.chunks = chunks
        self.label = content_type

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        request.read()
        self.calls.append(request)
        return httpx2.Response(200, content=iter(self.chunks), headers=self._headers())

    async def answer(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        self.calls.append(request)
        return httpx2.Response(200, content=_achunks(self.chunks), headers=self._headers())

    def _headers(self) -> dict[str, str]:
        return {} if self.label is None else {"content-type": self.label}

    def provider(self, preset: str) -> Any:
        transport = Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.answer)),
        )
        return allama.provider(preset, api_key="k", transport=transport)


async def _achunks(chunks: list[bytes]) -> Any:
    for chunk in chunks:
        yield chunk


def _pieces(body: dict[str, Any]) -> list[bytes]:
    """The body in pieces, after blank ones, as a slow proxy sends it."""
    data = json.dumps(body, indent=1).encode()
    return [b"", b"\n", b"  \r\n", data[:7], data[7:40], data[40:]]


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("label", [SSE, "text/plain; charset=utf-8", None])
@pytest.mark.parametrize("preset", ["openai", "anthropic", "gemini"])
def test_a_whole_answer_labelled_as_events_collects_to_what_chat_gives(
    preset: str, label: str | None, read: Any
) -> None:
    host = ChunkedHost(_pieces(WHOLE[preset]), label)
    provider = host.provider(preset)
    events, streamed = read(provider, _request(preset))
    assert len(host.calls) == 1
    assert streamed == provider.chat(_request(preset))
    assert streamed.text() == "hello"
    assert isinstance(events[0], ResponseStart)
    assert isinstance(events[-1], Finish)
    assert sum(isinstance(event, UsageEvent) for event in events) == 1


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize(("preset", "body"), ERRORS)
def test_an_error_object_labelled_as_events_is_the_error_it_holds(
    preset: str, body: dict[str, Any], read: Any
) -> None:
    provider = ChunkedHost(_pieces(body), SSE).provider(preset)
    with pytest.raises(OverloadedError) as plain:
        provider.chat(_request(preset))
    with pytest.raises(OverloadedError) as streamed:
        read(provider, _request(preset))
    error = streamed.value
    assert str(error) == str(plain.value) == "Overloaded"
    assert error.retryable is True
    assert (error.provider, error.context.model) == (preset, MODELS[preset])


def test_an_extraction_over_a_whole_answer_labelled_as_events_pays_once() -> None:
    answer = json.loads(json.dumps(OPENAI))
    answer["choices"][0]["message"]["content"] = '{"name": "Ada", "age": 36}'
    answer["usage"] = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
    host = ChunkedHost(_pieces(answer), SSE)
    with Extractor().extract_stream(host.provider("openai"), Person, _request("openai")) as stream:
        for _ in stream:
            pass
        extracted = stream.finish()
    assert extracted.value == Person(name="Ada", age=36)
    assert len(host.calls) == 1
    assert extracted.metadata.passes == 1
    assert extracted.metadata.usage == Usage(input_tokens=40, output_tokens=12)


@pytest.mark.parametrize("read", READERS)
def test_events_after_blank_chunks_and_a_comment_still_stream(read: Any) -> None:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": "hel"}, "finish_reason": None}],
    }
    end = {**chunk, "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]}
    body = _sse(chunk, end) + b"data: [DONE]\n\n"
    chunks = [b"", b"\n", b": keep-alive\n\n", body[:9], body[9:]]
    events, response = read(ChunkedHost(chunks, SSE).provider("openai"), _request("openai"))
    assert (response.text(), response.finish_reason) == ("hello", "stop")
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hel", "lo"]


@pytest.mark.parametrize("read", READERS)
def test_a_stream_of_only_blank_bytes_is_still_incomplete(read: Any) -> None:
    provider = ChunkedHost([b"\n", b"  "], SSE).provider("openai")
    with pytest.raises(allama.IncompleteStreamError):
        read(provider, _request("openai"))


# A byte-order mark before a JSON body (which JSON's readers may ignore) is read past.

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("label", [JSON, SSE])
@pytest.mark.parametrize("preset", ["openai", "anthropic", "gemini", "ollama"])
def test_a_whole_answer_after_a_byte_order_mark_is_read_plain_and_streamed(
    preset: str, label: str, read: Any
) -> None:
    body = json.dumps(WHOLE[preset]).encode()
    host = ChunkedHost([BOM, body[:5], body[5:]], label)
    provider = host.provider(preset)
    plain = provider.chat(_request(preset))
    assert plain.text() == "hello"
    _, streamed = read(provider, _request(preset))
    assert streamed == plain
    assert len(host.calls) == 2


def test_an_error_body_after_a_byte_order_mark_is_read_for_its_message() -> None:
    body = BOM + json.dumps(ERRORS[0].values[1]).encode()

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(529, content=body, headers={"content-type": JSON})

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    provider = allama.provider("anthropic", api_key="k", transport=transport)
    with pytest.raises(OverloadedError) as caught:
        provider.chat(_request("anthropic"))
    assert str(caught.value) == "Overloaded"


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("end", [b"\n\ndata: [DONE]\n\n", b"\ndata:[DONE]", b"data: [DONE]"])
def test_a_whole_answer_followed_by_the_end_marker_is_read_whole(read: Any, end: bytes) -> None:
    # A gateway answering whole may still write the events' end marker after the object,
    # where the answer read as an empty finished stream and was lost.
    body = json.dumps(OPENAI).encode() + end
    provider = ChunkedHost([body[:9], body[9:]], SSE).provider("openai")
    events, response = read(provider, _request("openai"))
    assert (response.text(), response.finish_reason) == ("hello", "stop")
    assert response.usage == Usage(input_tokens=3, output_tokens=1)
    assert isinstance(events[-1], Finish)


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("label", [SSE, JSON])
@pytest.mark.parametrize("split", [1, 2], ids=["one-byte", "two-bytes"])
def test_a_whole_answer_after_a_byte_order_mark_that_arrives_in_pieces_is_read_whole(
    split: int, label: str, read: Any
) -> None:
    # The mark's first bytes alone were taken for the body's start, so the body went to the
    # events' decoder and ended incomplete: retried, and paid for twice.
    body = json.dumps(OPENAI).encode()
    host = ChunkedHost([BOM[:split], BOM[split:] + b"\n", body[:5], body[5:]], label)
    events, response = read(host.provider("openai"), _request("openai"))
    assert (response.text(), response.finish_reason) == ("hello", "stop")
    assert response.usage == Usage(input_tokens=3, output_tokens=1)
    assert isinstance(events[-1], Finish)
    assert len(host.calls) == 1


TAILS = [
    pytest.param(b"\n\nevent: done\ndata: [DONE]\n\n", id="event-line"),
    pytest.param(b"\n\nid: 9\ndata: [DONE]\n\n", id="id-line"),
    pytest.param(b"\n\nretry: 3000\n\n", id="retry-line"),
    pytest.param(b"\n\ndata: [DONE]\n\n: bye\n\n", id="comment-after"),
    pytest.param(b"\r\n: keep-alive\r\n\r\ndata:[DONE]\r\n", id="comment-before-crlf"),
    pytest.param(b"\n\ndata: [DONE]\n\ndata: [DONE]\n\n", id="done-twice"),
    pytest.param(b"\n\nevent: end\n\n", id="no-end-marker"),
]


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("label", [SSE, JSON])
@pytest.mark.parametrize("tail", TAILS)
def test_a_whole_answer_followed_by_events_framing_is_read_whole(
    tail: bytes, label: str, read: Any
) -> None:
    # Any framing of server-sent events after the object, not the end marker alone: the
    # answer read as an empty finished stream (no text, no finish reason) and was lost.
    body = json.dumps(OPENAI).encode() + tail
    host = ChunkedHost([body[:9], body[9:]], label)
    events, response = read(host.provider("openai"), _request("openai"))
    assert (response.text(), response.finish_reason) == ("hello", "stop")
    assert response.usage == Usage(input_tokens=3, output_tokens=1)
    assert isinstance(events[-1], Finish)
    assert len(host.calls) == 1


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("label", [SSE, JSON])
@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"\n\nnote: cached\ndata: [DONE]\n\n", id="unknown-field"),
        pytest.param(b"\n\n{}\n\ndata: [DONE]\n\n", id="second-object"),
    ],
)
def test_a_json_object_with_more_than_framing_after_it_is_no_empty_finished_answer(
    tail: bytes, label: str, read: Any
) -> None:
    # Neither the whole answer nor events that say anything: incomplete, to be tried again,
    # where it read as a finished answer with no text and no finish reason.
    body = json.dumps(OPENAI).encode() + tail
    provider = ChunkedHost([body[:9], body[9:]], label).provider("openai")
    with pytest.raises(allama.IncompleteStreamError) as caught:
        read(provider, _request("openai"))
    assert caught.value.retryable is True
    assert caught.value.provider == "openai"
