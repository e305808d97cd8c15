"""A streamed Responses reasoning item's encrypted content is its last copy's.

OpenAI's added reasoning item already carries encrypted content, and the finished item
carries another, longer one (gpt-5.1-codex-max under `store: false`: vercel/ai's fixture
`openai-reasoning-encrypted-content.1.chunks.txt`, 844 characters at `output_item.added`,
1060 at `output_item.done` and in `response.completed`). The finished copy's wins: the
item's `done`, the terminal response's (`response.completed`, `response.incomplete`) after
it, so that the collected stream holds what the body of the same response gives, and the
next turn sends back the finished blob, in sync and async streams alike. A copy without
encrypted content changes nothing; the item's id, as its signature, is the first copy's
that has one.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

import allama
from _responses_support import sse
from allama.adapters.openai_responses._decode import decode_object
from allama.adapters.openai_responses._sse import ResponsesStreamDecoder, decode_stream
from allama.providers import HttpProvider
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    BlockStop,
    ChatRequest,
    ChatResponse,
    Reasoning,
    ReasoningDelta,
    StreamEvent,
    ToolDefinition,
    ToolMessage,
)

KEY = "sk-test-stream-encrypted-1234"
MODEL = "gpt-5.1-codex-max"
RID = "rs_01"
SUMMARY = "**Calculating step-by-step**\n\nI'll compute 12 plus 7."
ADDED = "gAAAAABpPDIU" + "a" * 832
"""The encrypted content of the item as added: 844 characters, as in OpenAI's stream."""
DONE = "gAAAAABpPDIV" + "b" * 1048
"""The finished item's: 1060 characters."""
FINAL = "gAAAAABpPDIW" + "c" * 1048
"""Another one in the terminal response (OpenAI's repeats `DONE`)."""
USAGE = {
    "input_tokens": 134,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 28,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 162,
}
CALL = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "arguments": '{"a":12,"b":7}',
    "call_id": "call_1",
    "name": "calculator",
}
STARTED = {"status": "in_progress", "incomplete_details": None, "output": [], "usage": None}
"""What `response.created` says of the response beside the terminal one's fields."""
CALCULATOR = ToolDefinition(
    name="calculator",
    description="Adds two numbers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)


# Helpers


def reasoning_item(
    encrypted: str | None, *, item_id: str | None = RID, summary: bool = True
) -> dict[str, Any]:
    """A reasoning item (with its summary, or as added, without), with `encrypted` (none
    when `None`) and `item_id` (none when `None`)."""
    item: dict[str, Any] = {"type": "reasoning", "summary": []}
    if item_id is not None:
        item["id"] = item_id
    if summary:
        item["summary"] = [{"type": "summary_text", "text": SUMMARY}]
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def response(
    encrypted: str | None,
    *,
    status: str = "completed",
    item_id: str | None = RID,
    store: bool = False,
) -> dict[str, Any]:
    """The terminal response: the reasoning item finished with `encrypted`, then a call."""
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "model": MODEL,
        "store": store,
        "reasoning": {"effort": "high", "summary": "detailed"},
        "incomplete_details": incomplete,
        "output": [reasoning_item(encrypted, item_id=item_id), CALL],
        "usage": USAGE,
    }


def events(
    added: str | None,
    done: str | None,
    terminal: dict[str, Any],
    *,
    with_done: bool = True,
    item_id: str | None = RID,
) -> list[dict[str, Any]]:
    """A stream of `terminal`: the reasoning item added with `added` and (`with_done`)
    finished with `done`, its summary streamed between, then the call."""
    where = {"item_id": RID, "output_index": 0, "summary_index": 0}
    ending = "response.incomplete" if terminal["status"] == "incomplete" else "response.completed"
    stream = [
        {"type": "response.created", "response": {**terminal, **STARTED}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": reasoning_item(added, item_id=item_id, summary=False),
        },
        {
            "type": "response.reasoning_summary_part.added",
            **where,
            "part": {"type": "summary_text", "text": ""},
        },
        {"type": "response.reasoning_summary_text.delta", **where, "delta": SUMMARY[:20]},
        {"type": "response.reasoning_summary_text.delta", **where, "delta": SUMMARY[20:]},
        {"type": "response.reasoning_summary_text.done", **where, "text": SUMMARY},
    ]
    if with_done:
        stream.append(
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": reasoning_item(done, item_id=item_id),
            }
        )
    at = {"item_id": "fc_1", "output_index": 1}
    stream += [
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**CALL, "status": "in_progress", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", **at, "delta": CALL["arguments"]},
        {"type": "response.function_call_arguments.done", **at, "arguments": CALL["arguments"]},
        {"type": "response.output_item.done", "output_index": 1, "item": CALL},
        {"type": ending, "response": terminal},
    ]
    return stream


def collect(stream: list[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in stream:
        collector.push(event)
    return collector.finish()


def seals(stream: list[StreamEvent]) -> list[str]:
    """The reasoning block's encrypted contents as given, in order, with `stop` where the
    block stopped."""
    said: list[str] = []
    for event in stream:
        if isinstance(event, ReasoningDelta) and event.index == 0 and event.encrypted_content:
            said.append(event.encrypted_content)
        elif isinstance(event, BlockStop) and event.index == 0:
            said.append("stop")
    return said


def reasoning_of(made: ChatResponse) -> Reasoning:
    block = made.content[0]
    assert isinstance(block, Reasoning)
    return block


def provider(stream: bytes, answer: dict[str, Any], sent: list[dict[str, Any]]) -> HttpProvider:
    """A Responses provider (sync and async) that answers a streamed request with `stream`
    and any other with `answer`, keeping the bodies it was sent in `sent`."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        if body.get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=stream, headers=headers)
        return httpx2.Response(200, json=answer)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    made: HttpProvider = allama.provider(
        "openai", api="responses", api_key=KEY, transport=transport
    )
    return made


def sent_back(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasoning items a next turn's body sends."""
    return [item for item in body["input"] if item.get("type") == "reasoning"]


# The finished copy's encrypted content, over the orders a stream may give it in

ORDERS = {
    # (added, done, terminal response, with done): the encrypted contents the reasoning
    # block is given, in order, and its last.
    "added and done, the terminal response repeating done (OpenAI's)": (
        (ADDED, DONE, response(DONE), True),
        [ADDED, DONE, "stop"],
    ),
    "added, done and a terminal response each with its own": (
        (ADDED, DONE, response(FINAL), True),
        [ADDED, DONE, "stop", FINAL],
    ),
    "added, no done, the terminal response": (
        (ADDED, None, response(FINAL), False),
        [ADDED, FINAL, "stop"],
    ),
    "added, no done, an incomplete terminal response": (
        (ADDED, None, response(FINAL, status="incomplete"), False),
        [ADDED, FINAL, "stop"],
    ),
    "none added, done and the terminal response": (
        (None, DONE, response(DONE), True),
        [DONE, "stop"],
    ),
}


@pytest.mark.parametrize("order", list(ORDERS), ids=list(ORDERS))
def test_the_finished_copy_s_encrypted_content_is_what_a_body_gives(order: str) -> None:
    """Each copy that brings another is given (one after the block stopped, from the
    terminal response), the last one kept: the collected stream is the body's."""
    (added, done, terminal, with_done), given = ORDERS[order]
    stream = decode_stream(
        sse(*events(added, done, terminal, with_done=with_done)), provider="openai"
    )
    assert seals(stream) == given
    streamed, body = collect(stream), decode_object(terminal, provider="openai")
    assert reasoning_of(streamed).encrypted_content == [s for s in given if s != "stop"][-1]
    assert reasoning_of(streamed).signature == RID
    assert streamed.content == body.content
    assert streamed.provider_data == body.provider_data
    assert streamed.finish_reason == body.finish_reason


def test_finished_copies_without_encrypted_content_keep_the_one_added() -> None:
    """A copy that carries none says nothing of it: the one the item was added with stays
    (the only one the stream gave)."""
    stream = decode_stream(sse(*events(ADDED, None, response(None))), provider="openai")
    assert seals(stream) == [ADDED, "stop"]
    assert reasoning_of(collect(stream)).encrypted_content == ADDED


def test_an_id_only_the_terminal_response_gives_is_the_signature_and_the_item_s_id() -> None:
    """A reasoning item streamed without its id, which only the terminal response names:
    its signature and, under `store: true`, the item ids a next turn names are that id,
    as the body of the same response gives them."""
    terminal = response(DONE, store=True)
    stream = decode_stream(sse(*events(ADDED, DONE, terminal, item_id=None)), provider="openai")
    signatures = [e.signature for e in stream if isinstance(e, ReasoningDelta) and e.signature]
    assert signatures == [RID]
    streamed, body = collect(stream), decode_object(terminal, provider="openai")
    assert reasoning_of(streamed).signature == RID
    assert reasoning_of(streamed).encrypted_content == DONE
    assert streamed.provider_data == body.provider_data
    assert streamed.provider_data["openai_responses"]["resume"] == {"item_ids": [RID, "fc_1"]}


@given(
    added=st.sampled_from([None, ADDED]),
    done=st.sampled_from([None, DONE]),
    final=st.sampled_from([None, DONE, FINAL]),
    with_done=st.booleans(),
    status=st.sampled_from(["completed", "incomplete"]),
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=6),
)
def test_the_last_copy_with_encrypted_content_wins_wherever_the_bytes_split(
    added: str | None,
    done: str | None,
    final: str | None,
    with_done: bool,
    status: str,
    cuts: list[int],
) -> None:
    """Whichever copies carry encrypted content, and however the bytes arrive, the block
    holds the last copy's that has one; where the terminal response has one, the collected
    stream is the body of that response."""
    terminal = response(final, status=status)
    raw = sse(*events(added, done, terminal, with_done=with_done))
    decoder = ResponsesStreamDecoder(provider="openai")
    stream: list[StreamEvent] = []
    start = 0
    for cut in sorted(cut % (len(raw) + 1) for cut in cuts):
        stream.extend(decoder.feed(raw[start:cut]))
        start = max(start, cut)
    stream.extend(decoder.feed(raw[start:]))
    stream.extend(decoder.close())
    streamed = collect(stream)
    copies = [added, done if with_done else None, final]
    last = [copy for copy in copies if copy is not None]
    assert reasoning_of(streamed).encrypted_content == (last[-1] if last else None)
    if final is not None:
        assert streamed.content == decode_object(terminal, provider="openai").content


# The next turn sends back the finished blob, sync and async


@pytest.mark.parametrize("final", [DONE, FINAL], ids=["as done (OpenAI's)", "another"])
def test_the_next_turn_sends_back_the_finished_encrypted_content(final: str) -> None:
    """Through the provider, in a sync and an async stream as in a body: the terminal
    response's encrypted content (OpenAI's repeats the finished item's; another comes after
    the reasoning block stopped) is the one the next turn sends."""
    terminal = response(final)
    sent: list[dict[str, Any]] = []
    made = provider(sse(*events(ADDED, DONE, terminal)), terminal, sent)
    request = ChatRequest(MODEL).user("What is 12 plus 7?").with_tools([CALCULATOR])

    async def read() -> ChatResponse:
        stream = await made.achat_stream(request)
        return await stream.response()

    with made.chat_stream(request) as stream:
        answers = [stream.response(), asyncio.run(read()), made.chat(request)]
    for answer in answers:
        assert reasoning_of(answer).encrypted_content == final
        turn = request.model_copy(
            update={
                "messages": (
                    *request.messages,
                    answer.to_assistant_message(),
                    ToolMessage(tool_call_id="call_1", content="19"),
                )
            }
        )
        made.chat(turn)
        assert sent_back(sent[-1]) == [
            {
                "type": "reasoning",
                "id": RID,
                "summary": [{"type": "summary_text", "text": SUMMARY}],
                "encrypted_content": final,
            }
        ]
