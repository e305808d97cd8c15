"""Responses API reasoning items sent back: each directly before the item that followed it
(with that item's id under `store: true`), and a reasoning item's summary as its text in a
stream whose response says `reasoning.summary: null` (xAI's), as in its body."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel, JsonValue

import allama
from _responses_support import sse, stream_of
from allama.adapters.openai_responses._decode import NAMESPACE, decode_response
from allama.adapters.openai_responses._sse import decode_stream
from allama.extract import ExtractionMode, Extractor, SchemaEnforcement
from allama.providers import HttpProvider
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    AssistantMessage,
    ChatRequest,
    ChatResponse,
    Reasoning,
    ReasoningDelta,
    RequestField,
    StreamEvent,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Warning,
)

KEY = "sk-test-reasoning-items-1234"
STORED: JsonValue = {"store": True}
TOOL = ToolDefinition(name="f", parameters={"type": "object", "properties": {}})

LEFT_OUT = Warning.approximated(
    RequestField.REASONING,
    "OpenAI takes back a reasoning item only directly before the item that followed it in "
    "its turn: a message or a function call (named by its id, for one that goes by id with "
    "`store: true`), or a server tool call such as a web search (by reference, with `store: "
    "true` only); reasoning without one was left out of the conversation",
).with_provider("openai")


# Helpers


def response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 7, "total_tokens": 17},
    }
    return {**base, **fields}


def reasoning(item_id: str, **fields: Any) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "summary": [], **fields}


def message(text: str, item_id: str, phase: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    if phase is not None:
        item["phase"] = phase
    return item


def call(item_id: str, call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }


def provider(
    reply: Callable[[dict[str, Any]], dict[str, Any]], *, name: str = "openai"
) -> tuple[HttpProvider, list[dict[str, Any]]]:
    """A Responses provider answering each request with `reply(body)`, as a body or as the
    stream OpenAI sends for it; the bodies sent, recorded."""
    sent: list[dict[str, Any]] = []

    def script(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        answer = reply(body)
        if body.get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=stream_of(answer), headers=headers)
        return httpx2.Response(200, json=answer)

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(script)))
    made = allama.provider(name, api="responses", api_key=KEY, transport=transport)
    return made, sent


def answer(made: HttpProvider, request: ChatRequest, *, stream: bool) -> ChatResponse:
    if not stream:
        return made.chat(request)
    with made.chat_stream(request) as streamed:
        for _ in streamed:
            pass
        return streamed.response()


def decode(body: dict[str, Any]) -> ChatResponse:
    return decode_response(200, {}, json.dumps(body).encode())


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def encode(request: ChatRequest) -> tuple[dict[str, Any], list[Warning]]:
    http, degradations = allama.provider("openai", api="responses", api_key=KEY)._prepare(
        request, stream=False
    )
    body: dict[str, Any] = http.body
    return body, list(degradations)


# 1. The items after a stored turn's reasoning go back with their ids


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_stored_turn_goes_back_with_the_ids_of_the_items_after_its_reasoning(
    stream: bool,
) -> None:
    """openai-node#1567: by id under `store: true`, a reasoning item before a message sent
    without its `msg_` id is refused ("provided without its required following item")."""
    summary = [{"type": "summary_text", "text": "Greet, then look."}]
    output = [reasoning("rs_A", summary=summary), message("Hi", "msg_A"), call("fc_A", "call_A")]
    made, sent = provider(lambda _: response(output, store=True))
    request = ChatRequest("gpt-5-mini", tools=(TOOL,)).user("hello")
    request = request.with_option_json("openai_responses", STORED)
    first = answer(made, request, stream=stream)
    assert first.provider_data == {NAMESPACE: {"resume": {"item_ids": ["rs_A", "msg_A", "fc_A"]}}}
    turn = first.to_assistant_message()
    second = answer(
        made, request.push(turn, ToolMessage(tool_call_id="call_A", content="1")), stream=stream
    )
    assert sent[1]["input"] == [
        {"role": "user", "content": "hello"},
        {
            "type": "reasoning",
            "id": "rs_A",
            "summary": [{"type": "summary_text", "text": "Greet, then look."}],
        },
        {
            "type": "message",
            "id": "msg_A",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi", "annotations": [], "logprobs": []}],
        },
        {
            "type": "function_call",
            "id": "fc_A",
            "call_id": "call_A",
            "name": "f",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "call_A", "output": "1"},
    ]
    assert second.warnings == ()


def test_two_messages_of_a_stored_turn_go_back_as_two_items_with_their_ids() -> None:
    output = [reasoning("rs_A"), message("One.", "msg_1"), message("Two.", "msg_2")]
    turn = decode(response(output, store=True)).to_assistant_message()
    request = ChatRequest("gpt-5-mini").user("hi").push(turn).user("more")
    body, warnings = encode(request.with_option_json("openai_responses", STORED))
    assert body["input"][1:4] == [
        {"type": "reasoning", "id": "rs_A", "summary": []},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "One.", "annotations": [], "logprobs": []}],
        },
        {
            "type": "message",
            "id": "msg_2",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Two.", "annotations": [], "logprobs": []}],
        },
    ]
    assert warnings == []


def test_item_ids_are_kept_only_from_a_stored_response_and_sent_only_under_store() -> None:
    output = [reasoning("rs_A", encrypted_content="ENC"), message("Hi", "msg_A")]
    assert decode(response(output, store=False)).provider_data == {}
    assert decode(response(output)).provider_data == {}  # it does not say it was stored
    # Kept, but sent with `store: false`: the ids of items not stored cannot be named.
    turn = decode(response(output, store=True)).to_assistant_message()
    body, warnings = encode(ChatRequest("gpt-5-mini").user("hi").push(turn).user("more"))
    assert body["input"][1:3] == [
        {"type": "reasoning", "id": "rs_A", "summary": [], "encrypted_content": "ENC"},
        {"role": "assistant", "content": "Hi"},
    ]
    assert warnings == []


def search(item_id: str) -> dict[str, Any]:
    return {
        "type": "web_search_call",
        "id": item_id,
        "status": "completed",
        "action": {"type": "search", "query": "weather"},
    }


SEARCHED = [
    reasoning("rs_1"),
    search("ws_1"),
    reasoning("rs_2"),
    search("ws_2"),
    message("Sunny.", "msg_1"),
]
"""A stored turn whose reasoning items each preceded a web search (vercel/ai#7099)."""
WEB_SEARCH: JsonValue = {"tools": [{"type": "web_search"}], "store": True}


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_reasoning_before_a_web_search_goes_back_before_its_reference_under_store(
    stream: bool,
) -> None:
    """By id alone, `rs_2` before `msg_1` is refused: its following item was `ws_2`, which
    goes back as a reference to its id, as each web search call after a reasoning item."""
    made, sent = provider(lambda _: response(SEARCHED, store=True))
    request = ChatRequest("gpt-5-mini").user("weather?")
    request = request.with_option_json("openai_responses", WEB_SEARCH)
    first = answer(made, request, stream=stream)
    assert first.provider_data[NAMESPACE]["resume"] == {
        "item_ids": ["rs_1", "rs_2", "msg_1"],
        "following": [
            {"type": "web_search_call", "id": "ws_1"},
            {"type": "web_search_call", "id": "ws_2"},
            None,
        ],
    }
    second = answer(made, request.push(first.to_assistant_message()).user("more"), stream=stream)
    assert sent[1]["input"] == [
        {"role": "user", "content": "weather?"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "item_reference", "id": "ws_1"},
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"type": "item_reference", "id": "ws_2"},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Sunny.", "annotations": [], "logprobs": []}
            ],
        },
        {"role": "user", "content": "more"},
    ]
    assert second.warnings == ()


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_reasoning_before_a_web_search_is_left_out_without_store(stream: bool) -> None:
    """Under `store: false` a web search call does not go back (its id names nothing
    stored): the reasoning before it is left out, not sent before the message, and the
    reasoning that preceded the message goes back before it."""
    output = [
        reasoning("rs_1", encrypted_content="E1"),
        search("ws_1"),
        reasoning("rs_2", encrypted_content="E2"),
        message("Sunny.", "msg_1"),
    ]
    made, sent = provider(lambda _: response(output))
    request = ChatRequest("gpt-5-mini").user("weather?")
    request = request.with_option_json("openai_responses", {"tools": [{"type": "web_search"}]})
    first = answer(made, request, stream=stream)
    assert first.provider_data[NAMESPACE]["resume"] == {
        "following": [{"type": "web_search_call", "id": None}, None, None]
    }
    second = answer(made, request.push(first.to_assistant_message()).user("more"), stream=stream)
    assert sent[1]["input"] == [
        {"role": "user", "content": "weather?"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "E2"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "more"},
    ]
    assert second.warnings == (LEFT_OUT,)


def test_a_search_goes_back_by_reference_only_beside_the_reasoning_before_it() -> None:
    """Another provider's reasoning is not sent, and neither is the stored search after it:
    OpenAI refuses a stored item named without the reasoning item that preceded it."""
    kept = decode(response(SEARCHED, store=True))
    content = (kept.content[0].model_copy(update={"issuer": "xai"}), *kept.content[1:])
    turn = AssistantMessage(
        content=content, provider_data=kept.to_assistant_message().provider_data
    )
    request = ChatRequest("gpt-5-mini").user("weather?").push(turn).user("more")
    body, _ = encode(request.with_option_json("openai_responses", WEB_SEARCH))
    assert [item.get("type") for item in body["input"][1:5]] == [
        "reasoning",
        "item_reference",
        "message",
        None,
    ]
    assert body["input"][1:3] == [
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"type": "item_reference", "id": "ws_2"},
    ]


def test_a_stored_turn_sent_back_without_store_leaves_out_reasoning_before_a_search() -> None:
    """The ids a stored response kept are not sent under `store: false`, a reference among
    them: the reasoning before the search is left out instead."""
    output = [reasoning("rs_1", encrypted_content="E1"), search("ws_1"), message("Hi", "msg_1")]
    turn = decode(response(output, store=True)).to_assistant_message()
    body, warnings = encode(ChatRequest("gpt-5-mini").user("hi").push(turn).user("more"))
    assert body["input"][1:] == [
        {"role": "assistant", "content": "Hi"},
        {"role": "user", "content": "more"},
    ]
    assert warnings == [LEFT_OUT]


# 2. A reasoning item without the item that followed it is left out


def test_a_turn_cut_while_reasoning_goes_back_without_its_reasoning() -> None:
    cut = response(
        [reasoning("rs_B", encrypted_content="ENC", status="incomplete")],
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
    )
    made, sent = provider(lambda _: cut)
    request = ChatRequest("gpt-5-mini", max_output_tokens=64).user("hello")
    first = made.chat(request)
    assert first.finish_reason == "length"
    second = made.chat(request.push(first.to_assistant_message()).user("go on"))
    assert sent[1]["input"] == [
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "go on"},
    ]
    assert second.warnings == (LEFT_OUT,)


def test_reasoning_whose_commentary_was_not_kept_is_left_out_before_more_reasoning() -> None:
    """gpt-5.3-codex: [reasoning, commentary, reasoning, call]; the commentary message is not
    a block, so the first reasoning item would sit right before the second."""
    output = [
        reasoning("rs_C1", encrypted_content="E1"),
        message("Let me look.", "msg_c", "commentary"),
        reasoning("rs_C2", encrypted_content="E2"),
        call("fc_c", "call_c"),
    ]
    made, sent = provider(lambda _: response(output, model="gpt-5.3-codex"))
    request = ChatRequest("gpt-5.3-codex", tools=(TOOL,)).user("hello")
    first = made.chat(request)
    second = made.chat(
        request.push(first.to_assistant_message(), ToolMessage(tool_call_id="call_c", content="1"))
    )
    assert sent[1]["input"] == [
        {"role": "user", "content": "hello"},
        {"type": "reasoning", "id": "rs_C2", "summary": [], "encrypted_content": "E2"},
        {"type": "function_call", "call_id": "call_c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_c", "output": "1"},
    ]
    assert second.warnings == (LEFT_OUT,)


class Book(BaseModel):
    author: str
    year: int


def test_an_extraction_retry_after_an_answer_that_only_reasoned_sends_no_lone_reasoning() -> None:
    answers = [
        response([reasoning("rs_1", encrypted_content="ENC1", status="completed")]),
        response([message('{"author":"Ada","year":1843}', "msg_2")]),
    ]
    made, sent = provider(lambda _: answers[min(len(sent), 2) - 1])
    request = ChatRequest("gpt-5-mini").user("Ada 1843").with_option(ExtractionMode.NATIVE)
    out = Extractor(retries=1).extract(made, Book, request)
    assert out.value == Book(author="Ada", year=1843)
    assert out.metadata.passes == 2
    assert out.metadata.enforcement is SchemaEnforcement.EXACT
    assert [item.get("type") for item in sent[1]["input"]] == [None, None]
    assert [item["role"] for item in sent[1]["input"]] == ["user", "user"]


def test_a_stored_reasoning_item_whose_following_items_id_is_unknown_is_left_out() -> None:
    """By id alone, it would be refused before an item without its id (a turn built by
    hand, or whose content changed since): left out, and the call goes without an id."""
    by_hand = AssistantMessage(
        content=(
            Reasoning(text="Plan.", signature="rs_1"),
            ToolCall(id="call_1", name="f", arguments="{}"),
        )
    )
    request = ChatRequest("gpt-5").user("Hi").push(by_hand).tool_result("call_1", "ok")
    body, warnings = encode(request.with_option_json("openai_responses", STORED))
    assert body["input"][1:] == [
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
    ]
    assert warnings == [LEFT_OUT]
    # Ids that no longer fit the turn's content are not sent either.
    kept = decode(response([reasoning("rs_1"), message("Hi", "msg_1")], store=True))
    edited = AssistantMessage(
        content=(*kept.content, TextPart(text=" and more")),
        provider_data=kept.to_assistant_message().provider_data,
    )
    body, warnings = encode(
        ChatRequest("gpt-5")
        .user("Hi")
        .push(edited)
        .user("?")
        .with_option_json("openai_responses", STORED)
    )
    assert body["input"][1:] == [
        {"role": "assistant", "content": "Hi and more"},
        {"role": "user", "content": "?"},
    ]
    assert warnings == [LEFT_OUT]


def test_item_ids_go_back_only_beside_the_reasoning_they_came_with() -> None:
    """Another provider's turn: its reasoning is not sent, and neither are its item ids."""
    kept = decode(response([reasoning("rs_X"), message("Hi", "msg_X")], store=True))
    content = (kept.content[0].model_copy(update={"issuer": "xai"}), kept.content[1])
    turn = AssistantMessage(
        content=content, provider_data=kept.to_assistant_message().provider_data
    )
    request = ChatRequest("gpt-5").user("Hi").push(turn).user("?")
    body, _ = encode(request.with_option_json("openai_responses", STORED))
    assert body["input"][1] == {"role": "assistant", "content": "Hi"}


# 3. A summary is the text, streamed or not, whatever `reasoning.summary` says


ITEM = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "SUMMARY"}],
    "content": [{"type": "reasoning_text", "text": "RAW THOUGHTS"}],
}
ANSWER = message("4", "m")
FINAL = response([ITEM, ANSWER], reasoning={"effort": None, "summary": None}, model="grok-4.3")


def _grok_stream(*, summary_deltas: bool) -> bytes:
    """xAI's shape: `reasoning.summary: null` at `response.created`, then raw reasoning text
    and a summary for the same item."""
    start = {**FINAL, "status": "in_progress", "output": [], "usage": None}
    at = {"item_id": "rs_1", "output_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning("rs_1")},
        {"type": "response.reasoning_text.delta", **at, "content_index": 0, "delta": "RAW "},
        {"type": "response.reasoning_text.delta", **at, "content_index": 0, "delta": "THOUGHTS"},
    ]
    if summary_deltas:
        events.append(
            {
                "type": "response.reasoning_summary_text.delta",
                **at,
                "summary_index": 0,
                "delta": "SUMMARY",
            }
        )
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": ITEM},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**ANSWER, "content": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "m",
            "output_index": 1,
            "content_index": 0,
            "delta": "4",
        },
        {"type": "response.output_item.done", "output_index": 1, "item": ANSWER},
        {"type": "response.completed", "response": FINAL},
    ]
    return sse(*events)


@pytest.mark.parametrize(
    "summary_deltas", [True, False], ids=["summary streamed", "summary at done"]
)
def test_a_summary_wins_in_a_stream_whose_response_says_summary_null(summary_deltas: bool) -> None:
    events = decode_stream(_grok_stream(summary_deltas=summary_deltas))
    assert collect(events) == decode(FINAL)
    assert collect(events).reasoning() == "SUMMARY"
    # Raw text was held back, not streamed and then contradicted.
    said = [e.text for e in events if isinstance(e, ReasoningDelta) and e.text]
    assert said == ["SUMMARY"]


def test_xai_chat_and_chat_stream_give_the_same_reasoning() -> None:
    sent: list[bool] = []

    def script(request: httpx2.Request) -> httpx2.Response:
        streamed = bool(json.loads(request.content).get("stream"))
        sent.append(streamed)
        if streamed:
            data = _grok_stream(summary_deltas=True)
            return httpx2.Response(200, content=data, headers={"content-type": "text/event-stream"})
        return httpx2.Response(200, json=FINAL)

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(script)))
    made = allama.provider("xai", api="responses", api_key=KEY, transport=transport)
    request = ChatRequest("grok-4.3").user("2+2")
    whole = made.chat(request)
    streamed = answer(made, request, stream=True)
    assert whole.reasoning() == streamed.reasoning() == "SUMMARY"
    assert streamed.content == whole.content
    assert sent == [False, True]
