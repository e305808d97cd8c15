"""A Gemini stream whose finishing chunk (its `finishReason`) came and then an error object:
the answer came whole and was paid for, so it is used (by `extract_stream`, its async twin
and `chat_stream` alike) with its usage, as Anthropic's stream keeps one whose
`overloaded_error` comes after its `message_delta`. An error before the finish still fails
the stream. The fake Gemini answers through an `httpx2.MockTransport`, one read per piece,
so each chunk reaches the decoder on its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMetadata, Extractor
from allama.errors import OverloadedError
from allama.providers import HttpProvider
from allama.transport import Transport
from allama.types import FinishReason, Usage

KEY = "AIza-test-key-1234"
MODEL = "gemini-2.5-flash"
RUNNING = {"promptTokenCount": 5, "totalTokenCount": 5}
FINAL = {"promptTokenCount": 5, "candidatesTokenCount": 9, "totalTokenCount": 14}
WHOLE = Usage(input_tokens=5, output_tokens=9)
ERROR = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
RAW_ERROR = json.dumps(ERROR, indent=2) + "\n"
"""The error as Gemini sends it in the middle of an SSE stream: raw JSON over several lines,
on no `data:` line."""
GROUNDING = {"webSearchQueries": ["bolt sizes"]}


class Item(BaseModel):
    name: str
    qty: int


def body(
    text: str | None,
    usage: dict[str, Any] | None = None,
    finish: str | None = None,
    **more: Any,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": 0, **more}
    if text is not None:
        candidate["content"] = {"role": "model", "parts": [{"text": text}]}
    if finish is not None:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL}
    if usage is not None:
        out["usageMetadata"] = usage
    return out


def data(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\r\n\r\n".encode()


FIRST = body('{"name": "bolt", ', RUNNING)
LAST = body('"qty": 3}', FINAL, finish="STOP")
ANSWER = '{"name": "bolt", "qty": 3}'


class Pieces(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """The body, one read per piece; `broken`, the connection breaks after the last."""

    def __init__(self, pieces: list[bytes], *, broken: bool = False) -> None:
        self._pieces = pieces
        self._broken = broken

    def __iter__(self) -> Iterator[bytes]:
        yield from self._pieces
        if self._broken:
            raise httpx2.ReadError("connection reset")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece
        if self._broken:
            raise httpx2.ReadError("connection reset")


def served(pieces: list[bytes], *, broken: bool = False) -> HttpProvider:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            stream=Pieces(pieces, broken=broken),
            headers={"content-type": "text/event-stream"},
        )

    async def answer_async(request: httpx2.Request) -> httpx2.Response:
        return answer(request)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer_async)),
    )
    target: HttpProvider = allama.provider("gemini", api_key=KEY, transport=transport)
    return target


def request() -> ChatRequest:
    return ChatRequest(MODEL).user("A bolt, three of them.")


def extracted(target: HttpProvider) -> tuple[Item, Usage | None]:
    with Extractor().extract_stream(target, Item, request()) as stream:
        for _ in stream:
            pass
        result = stream.finish()
    return result.value, result.metadata.usage


def extracted_async(target: HttpProvider) -> tuple[Item, Usage | None]:
    async def run() -> tuple[Item, Usage | None]:
        async with Extractor().aextract_stream(target, Item, request()) as stream:
            async for _ in stream:
                pass
            result = await stream.finish()
        return result.value, result.metadata.usage

    return asyncio.run(run())


FRAMINGS = {
    "data line": [data(FIRST), data(LAST), data(ERROR)],
    "raw object": [data(FIRST), data(LAST), RAW_ERROR.encode()],
    "raw object split": [data(FIRST), data(LAST), RAW_ERROR[:20].encode(), RAW_ERROR[20:].encode()],
    "json array": [
        b"[" + json.dumps(FIRST).encode(),
        b",\r\n" + json.dumps(LAST).encode(),
        b",\r\n" + json.dumps(ERROR).encode() + b"]",
    ],
}


@pytest.mark.parametrize("pieces", list(FRAMINGS.values()), ids=list(FRAMINGS))
def test_an_error_after_the_finish_keeps_the_extracted_answer(pieces: list[bytes]) -> None:
    assert extracted(served(pieces)) == (Item(name="bolt", qty=3), WHOLE)
    assert extracted_async(served(pieces)) == (Item(name="bolt", qty=3), WHOLE)


@pytest.mark.parametrize("pieces", list(FRAMINGS.values()), ids=list(FRAMINGS))
def test_an_error_after_the_finish_ends_chat_stream_with_its_answer(pieces: list[bytes]) -> None:
    stream = served(pieces).chat_stream(request())
    response = stream.response()
    assert (response.text(), response.finish_reason, response.usage) == (
        ANSWER,
        FinishReason.STOP,
        WHOLE,
    )

    async def run() -> tuple[str | None, FinishReason | None, Usage | None]:
        streamed = await served(pieces).achat_stream(request())
        answer = await streamed.response()
        return answer.text(), answer.finish_reason, answer.usage

    assert asyncio.run(run()) == (ANSWER, FinishReason.STOP, WHOLE)


def test_usage_on_a_chunk_after_the_finishing_one_is_kept_before_the_error() -> None:
    # Gemini may send the whole call's usage on a chunk of its own after the finish reason.
    finishing = body('"qty": 3}', RUNNING, finish="STOP")
    late = {"usageMetadata": FINAL, "modelVersion": MODEL}
    pieces = [data(FIRST), data(finishing), data(late), data(ERROR)]
    assert extracted(served(pieces)) == (Item(name="bolt", qty=3), WHOLE)
    assert extracted_async(served(pieces)) == (Item(name="bolt", qty=3), WHOLE)


def test_what_the_finish_held_for_the_end_comes_before_the_error() -> None:
    # The grounding the finishing chunk carried, and text on a chunk after it (joined to the
    # text before, as at a stream's end), are part of the answer the error comes after.
    finishing = body('"qty": ', FINAL, finish="STOP", groundingMetadata=GROUNDING)
    pieces = [data(FIRST), data(finishing), data(body("3}")), data(ERROR)]
    response = served(pieces).chat_stream(request()).response()
    assert (response.text(), response.finish_reason, response.usage) == (
        ANSWER,
        FinishReason.STOP,
        WHOLE,
    )
    assert response.provider_data["gemini"]["grounding_metadata"] == GROUNDING


def test_text_after_the_finishing_chunk_still_joins_the_answer() -> None:
    # No error: the stream ends at its close, as before, however the chunks are read.
    finishing = body('"qty": ', FINAL, finish="STOP")
    pieces = [data(FIRST), data(finishing), data(body("3}"))]
    response = served(pieces).chat_stream(request()).response()
    assert (response.text(), response.finish_reason, response.usage) == (
        ANSWER,
        FinishReason.STOP,
        WHOLE,
    )
    assert [block.type for block in response.content] == ["text"]


def test_an_error_before_the_finish_still_fails_the_stream() -> None:
    unfinished = body('"qty": 3}', RUNNING)
    pieces = [data(FIRST), data(unfinished), data(ERROR)]
    for run in (extracted, extracted_async):
        with pytest.raises(OverloadedError, match=r"^The model is overloaded\.$") as raised:
            run(served(pieces))
        metadata = ExtractionMetadata.from_error(raised.value)
        assert metadata is not None
        assert (metadata.passes, metadata.usage) == (0, Usage(input_tokens=5))
    with pytest.raises(OverloadedError):
        served(pieces).chat_stream(request()).response()


def test_a_connection_broken_after_the_finish_keeps_the_answer() -> None:
    pieces = [data(FIRST), data(LAST)]
    assert extracted(served(pieces, broken=True)) == (Item(name="bolt", qty=3), WHOLE)
