"""Responses API streams whose pieces and finished texts must agree, and errors beside a
response read alike in a body and a stream.

1. A delta sent twice (the same `sequence_number`, the same data) is read once; deltas that
   make a text the finished text is not (out of order, repeated under another number) raise
   `StreamDecodeError`, naming where, never the model's text, wherever the finished text
   comes: `output_text.done`, `content_part.done`, `output_item.done`, the terminal
   response. A call's arguments alike.
2. An `error` object beside a response: none when it has neither a code nor a message, the
   answer kept beside `completed`, an error beside any other status; the same in `chat`,
   `achat` and a stream.
3. Ollama's stream that adds a function call at the output index of its message still open.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import Extractor
from allama.errors import ServerError, StreamDecodeError
from allama.providers import HttpProvider
from allama.transport import Transport
from allama.types import (
    BlockStart,
    BlockStop,
    ChatRequest,
    ChatResponse,
    FinishReason,
    ReasoningDelta,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)

KEY = "sk-test-stream-consistency-1234"
GOOD = '{"name":"Ada","year":1843}'
AT = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 15,
}
REQUEST = ChatRequest("gpt-4o").user("Ada published in 1843.")


# Helpers


def body(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-4o-2024-08-06",
        "output": output,
        "error": None,
        "incomplete_details": None,
        "store": False,
        "usage": USAGE,
    }
    return {**base, **fields}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


def message(text: str | None, item_id: str = "msg_1") -> dict[str, Any]:
    content = [] if text is None else [text_part(text)]
    status = "in_progress" if text is None else "completed"
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def frames(events: list[dict[str, Any]]) -> list[str]:
    """Each event framed as OpenAI frames it, numbered by its position."""
    return [
        f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': n})}\n\n"
        for n, event in enumerate(events)
    ]


def text_stream(
    deltas: list[str], *, done: str = GOOD, part: str = GOOD, item: str = GOOD, final: str = GOOD
) -> list[dict[str, Any]]:
    """A message streamed as `deltas`, finished as `done` (`output_text.done`), `part`
    (`content_part.done`), `item` (`output_item.done`) and `final` (the terminal response)."""
    return [
        {"type": "response.created", "response": body([], status="in_progress", usage=None)},
        {"type": "response.output_item.added", "output_index": 0, "item": message(None)},
        {"type": "response.content_part.added", **AT, "part": text_part("")},
        *({"type": "response.output_text.delta", **AT, "delta": d} for d in deltas),
        {"type": "response.output_text.done", **AT, "text": done},
        {"type": "response.content_part.done", **AT, "part": text_part(part)},
        {"type": "response.output_item.done", "output_index": 0, "item": message(item)},
        {"type": "response.completed", "response": body([message(final)])},
    ]


def provider(
    stream: bytes | None = None,
    answer: dict[str, Any] | None = None,
    name: str = "openai",
    **options: Any,
) -> HttpProvider:
    """A Responses provider (sync and async) that answers a streamed request with `stream`,
    and any other with the body `answer`."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        if json.loads(request.content).get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=stream, headers=headers)
        return httpx2.Response(200, json=answer)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    made: HttpProvider = allama.provider(
        name, api="responses", api_key=KEY, transport=transport, **options
    )
    return made


def streamed(made: HttpProvider, request: ChatRequest = REQUEST) -> list[StreamEvent]:
    return list(made.chat_stream(request))


def streamed_async(made: HttpProvider, request: ChatRequest = REQUEST) -> list[StreamEvent]:
    async def read() -> list[StreamEvent]:
        stream = await made.achat_stream(request)
        return [event async for event in stream]

    return asyncio.run(read())


def collected(made: HttpProvider, request: ChatRequest = REQUEST) -> tuple[ChatResponse, ...]:
    """The response a sync stream collects, and an async stream's."""

    async def read() -> ChatResponse:
        stream = await made.achat_stream(request)
        return await stream.response()

    return made.chat_stream(request).response(), asyncio.run(read())


def texts(events: list[StreamEvent]) -> list[str]:
    return [event.text for event in events if isinstance(event, TextDelta)]


class Person(BaseModel):
    name: str
    year: int


# 1. Deltas against the finished text


def test_a_delta_sent_twice_with_its_number_is_read_once() -> None:
    """The repeat of a delta (same number, same data) is text once: the value extracted is
    the response's, not `Adada`."""
    raw = frames(text_stream(['{"name":"A', "da", '","year":1843}']))
    made = provider("".join([*raw[:5], raw[4], *raw[5:]]).encode())
    for events in (streamed(made), streamed_async(made)):
        assert texts(events) == ['{"name":"A', "da", '","year":1843}']
    for response in collected(made):
        assert response.text() == GOOD
    with Extractor().extract_stream(made, Person, REQUEST) as stream:
        for _ in stream:
            pass
        assert stream.finish().value == Person(name="Ada", year=1843)


MISMATCH = "the streamed deltas of output item 0, content part 0 disagree with its finished text"


def test_deltas_out_of_order_raise_where_they_disagree() -> None:
    """Two deltas swapped (each its own number) make `loHel`; the finished text says
    `Hello`: raised at the finished text, after the deltas as they came, in sync and async
    streams and in an extraction."""
    raw = frames(
        text_stream(["Hel", "lo"], done="Hello", part="Hello", item="Hello", final="Hello")
    )
    made = provider("".join([*raw[:3], raw[4], raw[3], *raw[5:]]).encode())
    for read in (streamed, streamed_async):
        with pytest.raises(StreamDecodeError) as raised:
            read(made)
        assert str(raised.value) == MISMATCH
    events: list[StreamEvent] = []
    with pytest.raises(StreamDecodeError):
        for event in made.chat_stream(REQUEST):
            events.append(event)
    assert texts(events) == ["lo", "Hel"]
    extracting = Extractor().extract_stream(made, Person, REQUEST)
    with pytest.raises(StreamDecodeError) as in_extraction, extracting as stream:
        for _ in stream:
            pass
        stream.finish()
    assert str(in_extraction.value) == MISMATCH


@pytest.mark.parametrize("where", ["done", "part", "item", "final"])
def test_a_finished_text_that_contradicts_the_deltas_raises_wherever_it_comes(
    where: str,
) -> None:
    """Deltas `Hel`+`lo`; one finished text (the others agree, or say nothing) is `Help!`:
    raised, the same in sync and async, where only that one says so."""
    finished = {"done": "Hello", "part": "Hello", "item": "Hello", "final": "Hello"}
    finished[where] = "Help!"
    made = provider("".join(frames(text_stream(["Hel", "lo"], **finished))).encode())
    for read in (streamed, streamed_async):
        with pytest.raises(StreamDecodeError) as raised:
            read(made)
        assert str(raised.value) == MISMATCH


def test_a_finished_text_that_only_extends_the_deltas_completes_them() -> None:
    """`output_text.done` is read: it brings the end the deltas did not, where the finished
    part, item and response leave their text empty (an empty finished text says nothing)."""
    events = text_stream(["Hel"], done="Hello", part="", item="", final="")
    made = provider("".join(frames(events)).encode())
    for read in (streamed, streamed_async):
        assert texts(read(made)) == ["Hel", "lo"]
    for response in collected(made):
        assert response.text() == "Hello"


def call_stream(
    deltas: list[str], done: str, item_arguments: Any, final_arguments: Any
) -> list[dict[str, Any]]:
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "lookup"}
    at = {"item_id": "fc_1", "output_index": 0}
    return [
        {"type": "response.created", "response": body([], status="in_progress", usage=None)},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**call, "arguments": ""},
        },
        *({"type": "response.function_call_arguments.delta", **at, "delta": d} for d in deltas),
        {"type": "response.function_call_arguments.done", **at, "arguments": done},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {**call, "arguments": item_arguments},
        },
        {
            "type": "response.completed",
            "response": body([{**call, "arguments": final_arguments}]),
        },
    ]


def test_call_arguments_that_contradict_their_done_raise() -> None:
    """Deltas `{"a":2}` against `{"a":1}` in `function_call_arguments.done`: raised (the
    call's arguments are never quoted). Arguments a server finishes as an object agree with
    deltas that are the same JSON, spaced or not."""
    made = provider(
        "".join(frames(call_stream(['{"a":', "2}"], '{"a":1}', '{"a":1}', '{"a":1}'))).encode()
    )
    for read in (streamed, streamed_async):
        with pytest.raises(StreamDecodeError) as raised:
            read(made)
        assert str(raised.value) == (
            "the streamed deltas of output item 0 disagree with its finished text"
        )
    spaced = provider(
        "".join(frames(call_stream(['{"a": ', "1}"], '{"a": 1}', {"a": 1}, {"a": 1}))).encode()
    )
    for response in collected(spaced):
        assert response.tool_calls() == (
            ToolCall(id="call_1", name="lookup", arguments='{"a": 1}'),
        )


def test_call_arguments_done_brings_the_end_the_deltas_did_not() -> None:
    """`function_call_arguments.done` is read: the end of the arguments its deltas did not
    bring, where the finished item's arguments say nothing."""
    made = provider("".join(frames(call_stream(['{"a":'], '{"a":1}', "", ""))).encode())
    for read in (streamed, streamed_async):
        deltas = [e.arguments for e in read(made) if isinstance(e, ToolCallDelta)]
        assert deltas == ['{"a":', "1}"]
    for response in collected(made):
        assert response.tool_calls() == (ToolCall(id="call_1", name="lookup", arguments='{"a":1}'),)


def test_call_arguments_in_the_added_item_and_again_as_a_delta_are_read_once() -> None:
    """vLLM adds a call with the arguments of its first delta in it, and streams them as
    that delta too: read once. Arguments in the added item alone are the call's where
    nothing after it brings any."""
    again = call_stream(['{"a":1}'], '{"a":1}', '{"a":1}', '{"a":1}')
    again[1]["item"]["arguments"] = '{"a":1}'
    alone = call_stream([], "", None, None)
    alone[1]["item"]["arguments"] = '{"a":1}'
    for events in (again, alone):
        made = provider("".join(frames(events)).encode())
        for read in (streamed, streamed_async):
            deltas = [e.arguments for e in read(made) if isinstance(e, ToolCallDelta)]
            assert deltas == ['{"a":1}']
        for response in collected(made):
            assert response.tool_calls() == (
                ToolCall(id="call_1", name="lookup", arguments='{"a":1}'),
            )


def reasoning_stream(deltas: list[str], finished: dict[str, Any], *, summary: bool) -> bytes:
    """A reasoning item streamed as summary deltas (`summary`), or as reasoning text under no
    reasoning configuration (OpenRouter's raw reasoning), then finished as `finished`."""
    item = {"id": "rs_1", "type": "reasoning", "summary": []}
    if summary:
        reasoning: Any = {"summary": "auto"}
        at = {"item_id": "rs_1", "output_index": 0, "summary_index": 0}
        delta = "response.reasoning_summary_text.delta"
    else:
        reasoning = None
        at = {"item_id": "rs_1", "output_index": 0, "content_index": 0}
        delta = "response.reasoning_text.delta"
    start = body([], status="in_progress", usage=None, reasoning=reasoning)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *({"type": delta, **at, "delta": d} for d in deltas),
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, **finished}},
        {"type": "response.completed", "response": body([{**item, **finished}])},
    ]
    return "".join(frames(events)).encode()


def test_a_reasoning_summary_that_contradicts_its_deltas_raises() -> None:
    """Summary deltas `Think A`, a finished summary `Think B`: raised. Reasoning text that
    streamed (no reasoning configuration) and a summary it finished with are two kinds of
    text: the streamed one stays, as before."""
    summary = {"summary": [{"type": "summary_text", "text": "Think B"}]}
    made = provider(reasoning_stream(["Think", " A"], summary, summary=True))
    for read in (streamed, streamed_async):
        with pytest.raises(StreamDecodeError) as raised:
            read(made)
        assert str(raised.value) == (
            "the streamed deltas of output item 0 disagree with its finished text"
        )
    other = provider(reasoning_stream(["Raw", " thoughts"], summary, summary=False))
    for read in (streamed, streamed_async):
        reasoning = [e.text for e in read(other) if isinstance(e, ReasoningDelta) and e.text]
        assert reasoning == ["Raw", " thoughts"]


# 2. An error object beside a response

ANSWER = '{"name":"Ada"}'


def outcomes(made: HttpProvider) -> list[tuple[str, str]]:
    """What `chat`, `achat` and a stream give: the text, or the error's class and message."""
    seen: list[tuple[str, str]] = []
    calls: tuple[Callable[[], ChatResponse], ...] = (
        lambda: made.chat(REQUEST),
        lambda: asyncio.run(made.achat(REQUEST)),
        lambda: made.chat_stream(REQUEST).response(),
    )
    for call in calls:
        try:
            response = call()
        except allama.Error as error:
            seen.append((type(error).__name__, str(error)))
        else:
            seen.append(("answer", f"{response.text()} {response.finish_reason}"))
    return seen


def both(response: dict[str, Any]) -> HttpProvider:
    """A provider that answers `response` as a body, and as the stream OpenAI sends for it."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": message(None)},
        {"type": "response.content_part.added", **AT, "part": text_part("")},
        {"type": "response.output_text.delta", **AT, "delta": ANSWER},
        {"type": "response.content_part.done", **AT, "part": text_part(ANSWER)},
        {"type": "response.output_item.done", "output_index": 0, "item": message(ANSWER)},
    ]
    terminal = {
        "completed": "response.completed",
        "incomplete": "response.incomplete",
        "failed": "response.failed",
    }[response["status"]]
    events.append({"type": terminal, "response": response})
    return provider("".join(frames(events)).encode(), response)


@pytest.mark.parametrize(
    "error",
    [{"code": "server_error", "message": "upstream hiccup"}, {}, {"code": None, "message": None}],
)
def test_an_error_beside_a_completed_response_keeps_the_answer_everywhere(
    error: dict[str, Any],
) -> None:
    response = body([message(ANSWER)], error=error)
    assert outcomes(both(response)) == [("answer", f"{ANSWER} stop")] * 3


def test_an_empty_error_beside_a_failed_response_says_the_provider_did_not_say_why() -> None:
    response = body([], status="failed", error={"code": None, "message": None})
    expected = ("ServerError", "the response failed, and the provider did not say why")
    assert outcomes(both(response)) == [expected] * 3


def test_an_error_beside_an_incomplete_response_is_the_error_everywhere() -> None:
    """Not completed, and the error says why: the error, in the body and the stream alike
    (the stream returned the partial answer)."""
    response = body(
        [message(ANSWER)],
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
        error={"code": "server_error", "message": "upstream hiccup"},
    )
    made = both(response)
    assert outcomes(made) == [("ServerError", "upstream hiccup")] * 3
    events: list[StreamEvent] = []
    with pytest.raises(ServerError):
        for event in made.chat_stream(REQUEST):
            events.append(event)
    assert texts(events) == [ANSWER]


# 3. An output index a second item is added at


CALL = {
    "id": "fc_1_0",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_x",
    "name": "weather",
    "arguments": '{"city":"Paris"}',
}
OLLAMA_USAGE = {
    "input_tokens": 20,
    "output_tokens": 9,
    "total_tokens": 29,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}
WEATHER = (
    ChatRequest("qwen3")
    .user("weather in Paris?")
    .with_tools(
        [
            ToolDefinition(
                name="weather",
                parameters={
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            )
        ]
    )
)


def ollama_stream(*, close_message: bool = False, call_id: str = "fc_1_0") -> bytes:
    """What Ollama's `/v1/responses` streams when a model writes text, then calls a tool:
    the call added at the index of the message still open, the final response holding the
    call alone (with `close_message`, the message's own done events come after the call's,
    by its id, at the same index)."""
    call = {**CALL, "id": call_id}
    start = body([], status="in_progress", usage=None, model="qwen3")
    at = {"item_id": call_id, "output_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
        {"type": "response.output_item.added", "output_index": 0, "item": message(None)},
        {"type": "response.content_part.added", **AT, "part": text_part("")},
        {"type": "response.output_text.delta", **AT, "delta": "Let me check."},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**call, "status": "in_progress", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", **at, "delta": call["arguments"]},
        {"type": "response.function_call_arguments.done", **at, "arguments": call["arguments"]},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
    ]
    if close_message:
        events += [
            {"type": "response.output_text.done", **AT, "text": "Let me check."},
            {"type": "response.content_part.done", **AT, "part": text_part("Let me check.")},
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": message("Let me check."),
            },
        ]
    final = body([call], model="qwen3", usage=OLLAMA_USAGE)
    events.append({"type": "response.completed", "response": final})
    return "".join(frames(events)).encode()


def test_ollama_call_added_at_the_index_of_its_open_message() -> None:
    """The message is finished when the call takes its index: the text and the call, as
    the stream delivered them, in sync and async; the same with the message's own done
    events after the call's. The same item added twice at an index stays an error."""
    expected_events = [
        (BlockStart, 0, StreamBlockType.TEXT),
        (TextDelta, 0, None),
        (BlockStop, 0, None),
        (BlockStart, 1, StreamBlockType.TOOL_CALL),
        (ToolCallDelta, 1, None),
        (BlockStop, 1, None),
    ]
    for close_message in (False, True):
        made = provider(
            ollama_stream(close_message=close_message),
            name="openai-compatible",
            base_url="http://127.0.0.1:11434/v1",
        )
        for read in (streamed, streamed_async):
            events = read(made, WEATHER)
            blocks = [
                (type(e), e.index, getattr(e, "block_type", None))
                for e in events
                if isinstance(e, BlockStart | BlockStop | TextDelta | ToolCallDelta)
            ]
            assert blocks == expected_events
        for response in collected(made, WEATHER):
            assert response.text() == "Let me check."
            assert response.tool_calls() == (
                ToolCall(id="call_x", name="weather", arguments='{"city":"Paris"}'),
            )
            assert response.finish_reason == FinishReason.TOOL_CALLS
            assert response.usage == Usage(
                input_tokens=20,
                output_tokens=9,
                reasoning_tokens=0,
                cache_read_tokens=0,
            )
    again = provider(ollama_stream(call_id="msg_1"))
    for read in (streamed, streamed_async):
        with pytest.raises(StreamDecodeError) as raised:
            read(again, WEATHER)
        assert str(raised.value) == "output item 0 was added twice"
