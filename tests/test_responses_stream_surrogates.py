"""Responses API streams that send an emoji's escape in halves, one per delta event
(`"\\ud83d"` in one, `"\\ude00"` in the next: each decodes to a lone surrogate), with the
finished text (`.done`, the finished part, item and response) holding the emoji whole.

The halves are one character, as Chat Completions, Anthropic, Gemini and Ollama streams
read them: the deltas agree with the finished text, and the text, call arguments,
reasoning summary and extracted value are the response's, as `chat` gives it, in sync and
async streams. Deltas that are not the finished text still raise, and a half that truly
stands alone is U+FFFD, with the warning a body holding one gives.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

import allama
from allama import ExtractionMode
from allama.adapters.openai_compat._decode import LONE_SURROGATES
from allama.errors import StreamDecodeError
from allama.providers import HttpProvider
from allama.transport import Transport
from allama.types import ChatRequest, ChatResponse, TextDelta

KEY = "sk-test-stream-surrogates-1234"
TOOL = "submit_structured_output"
TEXT = '{"name": "A\U0001f600"}'
HALVES = ['{"name": "A', "\ud83d", "\ude00", '"}']
"""`TEXT` as a server streams it, the emoji's escape split between two events."""
USAGE = {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30}
AT = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
CALL_AT = {"item_id": "fc_1", "output_index": 0}
REQUEST = ChatRequest("gpt-4o").user("hi")
MISMATCH = "the streamed deltas of output item 0, content part 0 disagree with its finished text"


class P(BaseModel):
    name: str


# Helpers


def split(text: str, cuts: list[int]) -> list[str]:
    """`text` cut at these UTF-16 code units: a cut inside an emoji leaves its halves, each a
    lone surrogate, in pieces of their own (as a server that splits the escape sends them)."""
    units = text.encode("utf-16-le")
    bounds = [0, *sorted({2 * cut for cut in cuts if 0 < 2 * cut < len(units)}), len(units)]
    pieces = [
        units[a:b].decode("utf-16-le", "surrogatepass") for a, b in itertools.pairwise(bounds)
    ]
    return [piece for piece in pieces if piece]


def response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-4o-2024-08-06",
        "output": output,
        "usage": USAGE,
    }
    return {**base, **fields}


def message(text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": []}
    status = "completed" if text else "in_progress"
    content = [part] if text else []
    return {
        "id": "msg_1",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def call(arguments: str) -> dict[str, Any]:
    return {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": TOOL,
        "arguments": arguments,
    }


def reasoning(summary: str) -> dict[str, Any]:
    parts = [{"type": "summary_text", "text": summary}] if summary else []
    return {"id": "rs_1", "type": "reasoning", "summary": parts}


def sse(events: list[dict[str, Any]]) -> bytes:
    """The events as OpenAI frames them (`json.dumps` escapes a lone surrogate, `\\ud83d`)."""
    return "".join(
        f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': number})}\n\n"
        for number, event in enumerate(events)
    ).encode()


def text_stream(deltas: list[str], text: str = TEXT) -> bytes:
    """A message streamed as `deltas`, finished as `text` everywhere a finished text comes."""
    start = response([], status="in_progress", usage=None)
    return sse(
        [
            {"type": "response.created", "response": start},
            {"type": "response.output_item.added", "output_index": 0, "item": message("")},
            {
                "type": "response.content_part.added",
                **AT,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
            *({"type": "response.output_text.delta", **AT, "delta": d} for d in deltas),
            {"type": "response.output_text.done", **AT, "text": text},
            {
                "type": "response.content_part.done",
                **AT,
                "part": {"type": "output_text", "text": text, "annotations": []},
            },
            {"type": "response.output_item.done", "output_index": 0, "item": message(text)},
            {"type": "response.completed", "response": response([message(text)])},
        ]
    )


def call_stream(deltas: list[str], arguments: str = TEXT) -> bytes:
    start = response([], status="in_progress", usage=None)
    added = {**call(""), "status": "in_progress"}
    return sse(
        [
            {"type": "response.created", "response": start},
            {"type": "response.output_item.added", "output_index": 0, "item": added},
            *(
                {"type": "response.function_call_arguments.delta", **CALL_AT, "delta": d}
                for d in deltas
            ),
            {"type": "response.function_call_arguments.done", **CALL_AT, "arguments": arguments},
            {"type": "response.output_item.done", "output_index": 0, "item": call(arguments)},
            {"type": "response.completed", "response": response([call(arguments)])},
        ]
    )


def summary_stream(deltas: list[str], summary: str) -> bytes:
    start = response([], status="in_progress", usage=None, reasoning={"summary": "auto"})
    at = {"item_id": "rs_1", "output_index": 0, "summary_index": 0}
    empty = {"type": "summary_text", "text": ""}
    return sse(
        [
            {"type": "response.created", "response": start},
            {"type": "response.output_item.added", "output_index": 0, "item": reasoning("")},
            {"type": "response.reasoning_summary_part.added", **at, "part": empty},
            *({"type": "response.reasoning_summary_text.delta", **at, "delta": d} for d in deltas),
            {"type": "response.reasoning_summary_text.done", **at, "text": summary},
            {"type": "response.output_item.done", "output_index": 0, "item": reasoning(summary)},
            {
                "type": "response.completed",
                "response": response([reasoning(summary)], reasoning={"summary": "auto"}),
            },
        ]
    )


def provider(stream: bytes, answer: dict[str, Any] | None = None) -> HttpProvider:
    """A Responses provider (sync and async) answering a streamed request with `stream`, and
    any other with the body `answer`."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        if json.loads(request.content).get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=stream, headers=headers)
        # (`json.dumps` escapes a lone surrogate, `\\ud83d`, as a server does)
        body = json.dumps(answer).encode()
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    made: HttpProvider = allama.provider(
        "openai", api="responses", api_key=KEY, transport=transport
    )
    return made


def collected(made: HttpProvider, request: ChatRequest = REQUEST) -> list[ChatResponse]:
    """The response a sync stream collects, and an async stream's."""

    async def read() -> ChatResponse:
        stream = await made.achat_stream(request)
        return await stream.response()

    return [made.chat_stream(request).response(), asyncio.run(read())]


def extracted(made: HttpProvider, request: ChatRequest) -> list[tuple[P, list[P]]]:
    """The value a sync and an async extraction stream finish with, each with every partial
    value it showed on the way."""
    sync: list[P] = []
    with allama.extract_stream(made, P, request) as stream:
        for _ in stream:
            if (shown := stream.partial) is not None:
                sync.append(shown)
        value = stream.finish().value

    async def read() -> tuple[P, list[P]]:
        shown: list[P] = []
        async with allama.aextract_stream(made, P, request) as stream:
            async for _ in stream:
                if (partial := stream.partial) is not None:
                    shown.append(partial)
            return (await stream.finish()).value, shown

    return [(value, sync), asyncio.run(read())]


def paired(text: str) -> str:
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


# Text


def test_the_escapes_of_an_emoji_split_across_text_deltas_are_the_finished_text() -> None:
    """The reported stream: the text and the extracted value are the response's, as `chat`
    reads the same response, not a `StreamDecodeError`; no partial value shows a half."""
    made = provider(text_stream(HALVES), response([message(TEXT)]))
    assert made.chat(REQUEST).text() == TEXT
    for got in collected(made):
        assert got.text() == TEXT
        assert got.usage is not None and got.usage.output_tokens == 20
    for value, shown in extracted(made, REQUEST):
        assert value == P(name="A\U0001f600")
        assert shown[-1] == value
        assert all(paired(p.name) == p.name and "\ud83d" not in p.name for p in shown)


def test_the_deltas_are_yielded_as_they_came_and_join_to_the_text() -> None:
    made = provider(text_stream(HALVES))
    deltas = [e.text for e in made.chat_stream(REQUEST) if isinstance(e, TextDelta)]
    assert deltas == HALVES
    assert paired("".join(deltas)) == TEXT


TEXTS = st.sampled_from(
    ['{"name": "A\U0001f600"}', '{"name": "\U0001f389x\U0001f600\U0001f600 \u00e9"}']
)


@given(text=TEXTS, cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=12))
def test_text_cut_anywhere_between_emoji_halves_reads_as_the_finished_text(
    text: str, cuts: list[int]
) -> None:
    deltas = split(text, cuts)
    made = provider(text_stream(deltas, text))
    for got in collected(made):
        assert got.text() == text


def test_a_finished_text_brings_the_end_after_streamed_halves() -> None:
    """Deltas that stop after the emoji's halves: `.done` brings the rest, as for any text."""
    made = provider(text_stream(HALVES[:3]))
    events = list(made.chat_stream(REQUEST))
    assert [e.text for e in events if isinstance(e, TextDelta)] == [*HALVES[:3], '"}']
    for got in collected(made):
        assert got.text() == TEXT


def test_halves_out_of_order_still_disagree() -> None:
    """The second half before the first is no emoji: the deltas are not the finished text."""
    made = provider(text_stream([HALVES[0], HALVES[2], HALVES[1], HALVES[3]]))
    with pytest.raises(StreamDecodeError) as raised:
        made.chat_stream(REQUEST).response()
    assert str(raised.value) == MISMATCH


def test_a_half_that_stands_alone_is_u_fffd_with_a_warning() -> None:
    """A lone surrogate the finished text holds too (its escape alone) agrees; it was kept
    as it came, and the response could not be written as JSON. It is read as `chat` reads
    the same response: U+FFFD, with the warning."""
    text = "A\ud83d!"
    made = provider(text_stream(["A", "\ud83d", "!"], text), response([message(text)]))
    for got in [made.chat(REQUEST), *collected(made)]:
        assert got.text() == "A\ufffd!"
        assert [(w.kind, w.message, w.provider) for w in got.warnings] == [
            ("approximated", LONE_SURROGATES, "openai")
        ]
        assert ChatResponse.from_json(got.to_json()) == got


# Function call arguments


def test_the_escapes_of_an_emoji_split_across_argument_deltas_are_the_arguments() -> None:
    made = provider(call_stream(HALVES), response([call(TEXT)]))
    request = REQUEST.with_option(ExtractionMode.FORCED_TOOL)
    for got in [made.chat(request), *collected(made, request)]:
        (tool_call,) = got.tool_calls()
        assert tool_call.arguments == TEXT
    for value, shown in extracted(made, request):
        assert value == P(name="A\U0001f600")
        assert all("\ud83d" not in p.name for p in shown)


@given(cuts=st.lists(st.integers(min_value=1, max_value=14), max_size=8))
def test_arguments_cut_anywhere_read_as_the_finished_arguments(cuts: list[int]) -> None:
    made = provider(call_stream(split(TEXT, cuts)))
    for got in collected(made):
        (tool_call,) = got.tool_calls()
        assert tool_call.arguments == TEXT


# Reasoning summary


@pytest.mark.parametrize("cuts", [[9], [8, 9, 10], [1, 9, 12]])
def test_the_escapes_of_an_emoji_split_across_summary_deltas_are_the_summary(
    cuts: list[int],
) -> None:
    summary = "Thought \U0001f600 done"
    deltas = split(summary, cuts)
    assert any(d.endswith("\ud83d") for d in deltas)  # the emoji's halves in two deltas
    made = provider(summary_stream(deltas, summary), response([reasoning(summary)]))
    assert made.chat(REQUEST).reasoning() == summary
    for got in collected(made):
        assert got.reasoning() == summary
