"""A Responses API reasoning item goes back on the next turn in the shape it was received:
its summary parts each their own, its reasoning text (`content`) as reasoning text, whole
or streamed, stored or not. A backend that checks the item against its encrypted content
(xAI: 400 "Could not decrypt the provided encrypted_content") refuses one rewritten."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from pydantic import JsonValue

import allama
from _responses_support import sse, stream_of
from allama.providers import HttpProvider
from allama.transport import Transport
from allama.types import (
    AssistantMessage,
    ChatRequest,
    ChatResponse,
    Reasoning,
    RequestField,
    ToolDefinition,
    ToolMessage,
    Warning,
)

KEY = "sk-test-reasoning-parts-1234"
STORED: JsonValue = {"store": True}
TOOL = ToolDefinition(name="f", parameters={"type": "object", "properties": {}})
ENC = "gAAAAABenc" + "x" * 20

TWO_SUMMARIES = [
    {"type": "summary_text", "text": "**Plan**\n\nA"},
    {"type": "summary_text", "text": "**Check**\n\nB"},
]
RAW = [{"type": "reasoning_text", "text": "raw chain of thought"}]
ONE_SUMMARY = [{"type": "summary_text", "text": "Just one."}]

SHAPES: dict[str, dict[str, Any]] = {
    "two summary parts": {"summary": TWO_SUMMARIES},
    "content only": {"summary": [], "content": RAW},
    "summary and content": {"summary": TWO_SUMMARIES[:1], "content": RAW},
}


# Helpers


def reasoning(**fields: Any) -> dict[str, Any]:
    return {"id": "rs_1", "type": "reasoning", **fields}


def call() -> dict[str, Any]:
    return {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }


def response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-mini-2025-08-07",
        "store": False,
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 7, "total_tokens": 17},
    }
    return {**base, **fields}


def provider(
    reply: Callable[[dict[str, Any]], dict[str, Any] | bytes], *, name: str = "openai"
) -> tuple[HttpProvider, list[dict[str, Any]]]:
    """A Responses provider answering each request with `reply(body)`: a response object
    (as a body, or as the stream OpenAI sends for it) or raw stream bytes; the bodies sent,
    recorded."""
    sent: list[dict[str, Any]] = []

    def script(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        answer = reply(body)
        if body.get("stream"):
            data = answer if isinstance(answer, bytes) else stream_of(answer)
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=data, headers=headers)
        assert isinstance(answer, dict)
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


def round_trip(
    item: dict[str, Any], *, stream: bool, store: bool = False, name: str = "openai"
) -> tuple[ChatResponse, dict[str, Any], ChatResponse]:
    """The first answer (the item, then a call), the reasoning item the next turn sent, and
    the second answer."""
    made, sent = provider(lambda _: response([item, call()], store=store), name=name)
    request = ChatRequest("gpt-5-mini", tools=(TOOL,)).user("go")
    if store:
        request = request.with_option_json("openai_responses", STORED)
    first = answer(made, request, stream=stream)
    follow = request.push(
        first.to_assistant_message(), ToolMessage(tool_call_id="call_1", content="ok")
    )
    second = answer(made, follow, stream=stream)
    back = [entry for entry in sent[1]["input"] if entry.get("type") == "reasoning"]
    assert len(back) == 1
    return first, back[0], second


def round_trip_raw(data: bytes) -> tuple[ChatResponse, dict[str, Any], ChatResponse]:
    """`round_trip` of a stream given as bytes (the second turn answered as a body)."""
    follow_body = response(
        [
            {
                "id": "msg_2",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [],
            }
        ]
    )
    made, sent = provider(lambda body: data if body.get("stream") else follow_body)
    request = ChatRequest("gpt-5-mini", tools=(TOOL,)).user("go")
    first = answer(made, request, stream=True)
    follow = request.push(
        first.to_assistant_message(), ToolMessage(tool_call_id="call_1", content="ok")
    )
    second = made.chat(follow)
    back = [entry for entry in sent[1]["input"] if entry.get("type") == "reasoning"]
    assert len(back) == 1
    return first, back[0], second


# Whole and streamed, `store: false`


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_a_reasoning_item_goes_back_as_received(shape: str, stream: bool) -> None:
    parts = SHAPES[shape]
    first, back, second = round_trip(reasoning(encrypted_content=ENC, **parts), stream=stream)
    expected: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": parts["summary"]}
    if "content" in parts:
        expected["content"] = parts["content"]
    assert back == {**expected, "encrypted_content": ENC}
    kept = {"summary": parts["summary"], "content": parts.get("content", [])}
    assert first.provider_data == {
        "openai_responses": {"resume": {"reasoning_parts": [kept, None]}}
    }
    assert second.warnings == ()


def test_the_text_of_the_block_is_unchanged() -> None:
    first, _, _ = round_trip(reasoning(encrypted_content=ENC, summary=TWO_SUMMARIES), stream=False)
    assert first.reasoning() == "**Plan**\n\nA\n\n**Check**\n\nB"
    first, _, _ = round_trip(
        reasoning(encrypted_content=ENC, summary=[], content=RAW), stream=False
    )
    assert first.reasoning() == "raw chain of thought"


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_single_summary_keeps_nothing_and_goes_back_as_before(stream: bool) -> None:
    first, back, _ = round_trip(
        reasoning(encrypted_content=ENC, summary=ONE_SUMMARY), stream=stream
    )
    assert first.provider_data == {}
    assert back == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": ONE_SUMMARY,
        "encrypted_content": ENC,
    }


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_a_collected_stream_keeps_what_the_body_keeps(shape: str) -> None:
    item = reasoning(encrypted_content=ENC, **SHAPES[shape])
    made, _ = provider(lambda _: response([item, call()]))
    request = ChatRequest("gpt-5-mini", tools=(TOOL,)).user("go")
    whole = answer(made, request, stream=False)
    streamed = answer(made, request, stream=True)
    assert streamed.content == whole.content
    assert streamed.provider_data == whole.provider_data


def test_a_stream_whose_final_response_lists_no_output_keeps_the_finished_items_parts() -> None:
    """The finished item (`response.output_item.done`) says, when the terminal response
    carries no output."""
    item = reasoning(encrypted_content=ENC, summary=TWO_SUMMARIES)
    body = response([item, call()])
    events = [
        json.loads(line[len("data: ") :])
        for line in stream_of(body).decode().splitlines()
        if line.startswith("data: ")
    ]
    events[-1]["response"]["output"] = []
    data = sse(*({k: v for k, v in e.items() if k != "sequence_number"} for e in events))
    _, back, _ = round_trip_raw(data)
    assert back["summary"] == TWO_SUMMARIES


# `store: true`: by id, its parts as received


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_stored_turn_goes_back_by_id_with_its_own_parts(stream: bool) -> None:
    parts = SHAPES["summary and content"]
    first, back, _ = round_trip(reasoning(**parts), stream=stream, store=True)
    assert first.provider_data == {
        "openai_responses": {
            "resume": {
                "item_ids": ["rs_1", "fc_1"],
                "reasoning_parts": [{"summary": TWO_SUMMARIES[:1], "content": RAW}, None],
            }
        }
    }
    assert back == {"type": "reasoning", "id": "rs_1", "summary": TWO_SUMMARIES[:1], "content": RAW}


# An edited text, another issuer


def test_an_edited_text_goes_back_rebuilt_from_it() -> None:
    made, sent = provider(
        lambda _: response([reasoning(encrypted_content=ENC, summary=TWO_SUMMARIES), call()])
    )
    request = ChatRequest("gpt-5-mini", tools=(TOOL,)).user("go")
    first = made.chat(request)
    turn = first.to_assistant_message()
    block = turn.content[0]
    assert isinstance(block, Reasoning)
    edited = AssistantMessage(
        content=(block.model_copy(update={"text": "Shorter."}), *turn.content[1:]),
        provider_data=turn.provider_data,
    )
    made.chat(request.push(edited, ToolMessage(tool_call_id="call_1", content="ok")))
    assert sent[1]["input"][1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Shorter."}],
        "encrypted_content": ENC,
    }


def test_xai_gets_its_own_item_back_as_received() -> None:
    """The case of the report: xAI checks the item against its encrypted content."""
    item = reasoning(encrypted_content=ENC, summary=[], content=RAW)
    _, back, second = round_trip(item, stream=False, name="xai")
    assert back == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": RAW,
        "encrypted_content": ENC,
    }
    assert second.warnings == ()


def test_another_issuers_item_sends_nothing_of_what_was_kept() -> None:
    """An OpenAI turn sent to xAI: its reasoning is left out, parts and all."""
    openai, _ = provider(
        lambda _: response([reasoning(encrypted_content=ENC, summary=TWO_SUMMARIES), call()])
    )
    xai, sent = provider(lambda _: response([]), name="xai")
    request = ChatRequest("grok-4", tools=(TOOL,)).user("go")
    first = openai.chat(request)
    assert first.provider_value("openai_responses", "resume") is not None
    follow = request.push(
        first.to_assistant_message(), ToolMessage(tool_call_id="call_1", content="ok")
    )
    second = xai.chat(follow)
    assert [entry.get("type") for entry in sent[0]["input"]] == [
        None,
        "function_call",
        "function_call_output",
    ]
    assert "**Plan**" not in json.dumps(sent[0])
    assert second.warnings == (
        Warning.approximated(
            RequestField.REASONING,
            "xAI takes back only the reasoning items it gave, with their encrypted content "
            "(or by id, with `store: true`); other reasoning was left out of the conversation",
        ).with_provider("xai"),
    )
