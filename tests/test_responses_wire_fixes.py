"""Responses API wire fixes: failed-response codes that blame the request, messages in the
`commentary` phase, a reasoning item with both a summary and reasoning text, where
`instructions` stop, and a user message whose every part was left out."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from _responses_support import sse, stream_of
from allama.adapters.openai_responses._decode import ITEMS_KEY, NAMESPACE, decode_response
from allama.adapters.openai_responses._errors import error_from_failed, error_from_payload
from allama.adapters.openai_responses._sse import decode_stream
from allama.errors import InvalidRequestError, MessageOrigin
from allama.providers import HttpProvider
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    TextPart,
)
from allama.wrappers import RetryingProvider

KEY = "sk-test-wire-fixes-1234"


# Helpers


def response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5.3-codex",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 7, "total_tokens": 17},
    }
    return {**base, **fields}


def decode(body: dict[str, Any]) -> ChatResponse:
    return decode_response(200, {}, json.dumps(body).encode())


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def provider(reply: Callable[[httpx2.Request], httpx2.Response]) -> tuple[HttpProvider, list[Any]]:
    """A Responses provider whose every request gets `reply`; the bodies sent, recorded."""
    sent: list[Any] = []

    def script(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return reply(request)

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(script)))
    made = allama.provider("openai", api="responses", api_key=KEY, transport=transport)
    return made, sent


def encode(request: ChatRequest, *, name: str = "openai") -> dict[str, Any]:
    options: dict[str, Any] = {"api_key": KEY}
    if name == "openai-compatible":
        options["base_url"] = "https://llm.example.com/v1"
    http, _ = allama.provider(name, api="responses", **options)._prepare(request, stream=False)
    body: dict[str, Any] = http.body
    return body


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


# 1. Failed-response codes that blame the request

REQUEST_BLAMING = ("bio_policy", "misalignment_policy_violation", "data_residency_mismatch")


@pytest.mark.parametrize("code", REQUEST_BLAMING)
def test_policy_and_residency_codes_are_request_errors_everywhere(code: str) -> None:
    """The same code is the same error, not retried, in a failed body, in
    `response.failed` and in a stream's `error` event (top-level or nested fields)."""
    failed = response([], status="failed", error={"code": code, "message": "Blocked."})
    errors = [error_from_failed(failed, provider="openai", model="m")]
    with pytest.raises(InvalidRequestError) as in_body:
        decode(failed)
    errors.append(in_body.value)
    with pytest.raises(InvalidRequestError) as in_failed_event:
        decode_stream(sse({"type": "response.failed", "response": failed}))
    errors.append(in_failed_event.value)
    event = {"type": "error", "code": code, "message": "Blocked.", "param": None}
    with pytest.raises(InvalidRequestError) as in_error_event:
        decode_stream(sse(event))
    errors.append(in_error_event.value)
    errors.append(error_from_payload({"type": "error", "error": {"code": code, "message": "x"}}))
    for error in errors:
        assert type(error) is InvalidRequestError
        assert not error.retryable
        assert error.origin is MessageOrigin.UPSTREAM


def test_a_policy_refusal_is_asked_once_by_a_retrying_provider() -> None:
    failed = response([], status="failed", error={"code": "bio_policy", "message": "Blocked."})
    inner, sent = provider(lambda _: httpx2.Response(200, json=failed))
    retrying = RetryingProvider(inner, sleep=lambda _: None)
    with pytest.raises(InvalidRequestError):
        retrying.chat(ChatRequest("gpt-5-mini").user("x"))
    assert len(sent) == 1


# 2. Messages in the `commentary` phase

COMMENTARY = message("Let me read the passage first.", "msg_a", "commentary")
FINAL = message('{"author":"Ada","year":1843}', "msg_b", "final_answer")
PHASED = response([COMMENTARY, FINAL])


class Paper(BaseModel):
    author: str
    year: int


def test_commentary_is_kept_with_its_phase_and_is_not_the_answer() -> None:
    decoded = decode(PHASED)
    assert decoded.content == (TextPart(text='{"author":"Ada","year":1843}'),)
    assert decoded.text() == '{"author":"Ada","year":1843}'
    assert decoded.provider_data == {NAMESPACE: {ITEMS_KEY: [COMMENTARY]}}


def test_a_message_without_a_phase_or_in_the_final_phase_is_the_answer() -> None:
    body = response([message("a", "msg_1"), message("b", "msg_2", "final_answer")])
    assert decode(body).text() == "ab"
    assert decode(body).provider_data == {}


@pytest.mark.parametrize("how", ["streamed", "items whole", "final response only"])
def test_a_streamed_commentary_collects_as_the_body_decodes(how: str) -> None:
    if how == "streamed":
        data = stream_of(PHASED)
    elif how == "items whole":
        data = sse(
            *(
                {"type": "response.output_item.done", "output_index": index, "item": item}
                for index, item in enumerate(PHASED["output"])
            ),
            {"type": "response.completed", "response": PHASED},
        )
    else:
        data = sse({"type": "response.completed", "response": PHASED})
    events = decode_stream(data)
    assert collect(events) == decode(PHASED)
    streamed = "".join(event.text for event in events if isinstance(event, TextDelta))
    assert streamed == '{"author":"Ada","year":1843}'


def test_extraction_reads_the_final_answer_not_the_commentary() -> None:
    made, _ = provider(lambda _: httpx2.Response(200, json=PHASED))
    extracted = allama.extract(made, Paper, ChatRequest("gpt-5.3-codex").user("Who wrote it?"))
    assert extracted.value == Paper(author="Ada", year=1843)


def test_the_next_turn_does_not_merge_the_commentary_into_the_answer() -> None:
    made, _ = provider(lambda _: httpx2.Response(200, json=PHASED))
    first = made.chat(ChatRequest("gpt-5.3-codex").user("Who wrote it?"))
    body = encode(ChatRequest("gpt-5.3-codex").user("Who?").assistant(first.content).user("And?"))
    assert body["input"][1] == {"role": "assistant", "content": '{"author":"Ada","year":1843}'}


# 3. A reasoning item with a summary and reasoning text

BOTH = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "SUMMARY"}],
    "content": [{"type": "reasoning_text", "text": "RAW THOUGHTS"}],
    "encrypted_content": "ENC",
}


def _raw_then_summary(created: dict[str, Any]) -> bytes:
    final = response([BOTH, message("4", "msg_1")])
    at = {"item_id": "rs_1", "output_index": 0}
    return sse(
        {"type": "response.created", "response": created},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**at, "id": "rs_1", "type": "reasoning", "summary": []},
        },
        {"type": "response.reasoning_text.delta", **at, "content_index": 0, "delta": "RAW "},
        {"type": "response.reasoning_text.delta", **at, "content_index": 0, "delta": "THOUGHTS"},
        {
            "type": "response.reasoning_summary_text.delta",
            **at,
            "summary_index": 0,
            "delta": "SUMM",
        },
        {"type": "response.reasoning_summary_text.delta", **at, "summary_index": 0, "delta": "ARY"},
        {"type": "response.output_item.done", "output_index": 0, "item": BOTH},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**message("", "msg_1"), "content": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": "4",
        },
        {"type": "response.output_item.done", "output_index": 1, "item": message("4", "msg_1")},
        {"type": "response.completed", "response": final},
    )


@pytest.mark.parametrize(
    "reasoning",
    [{"effort": "medium", "summary": "auto"}, "unsaid"],
    ids=["summary asked", "nothing said"],
)
def test_reasoning_text_streamed_before_a_summary_gives_way_to_it(reasoning: Any) -> None:
    created: dict[str, Any] = {"id": "resp_1", "status": "in_progress", "output": []}
    if reasoning != "unsaid":
        created["reasoning"] = reasoning
    events = decode_stream(_raw_then_summary(created))
    final = response([BOTH, message("4", "msg_1")])
    assert collect(events) == decode(final)
    assert collect(events).reasoning() == "SUMMARY"
    said = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert said == "SUMMARY"


def _raw_only(created: dict[str, Any], *, done: bool = True) -> tuple[bytes, dict[str, Any]]:
    item = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [],
        "content": [
            {"type": "reasoning_text", "text": "Think"},
            {"type": "reasoning_text", "text": "More"},
        ],
    }
    final = response([item] if done else [])
    at = {"item_id": "rs_1", "output_index": 0}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": created},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
        {"type": "response.reasoning_text.delta", **at, "content_index": 0, "delta": "Thi"},
        {"type": "response.reasoning_text.delta", **at, "content_index": 0, "delta": "nk"},
        {"type": "response.reasoning_text.delta", **at, "content_index": 1, "delta": "More"},
    ]
    if done:
        events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed", "response": final})
    return sse(*events), final


def test_reasoning_text_streams_as_it_comes_when_no_summary_was_asked_for() -> None:
    """OpenRouter's gpt-oss: `reasoning: null` at `response.created`, raw reasoning only."""
    data, final = _raw_only({"id": "resp_1", "status": "in_progress", "reasoning": None})
    events = decode_stream(data)
    pieces = [e.text for e in events if isinstance(e, ReasoningDelta) and e.text]
    assert pieces == ["Thi", "nk", "\n\nMore"]
    assert collect(events) == decode(final)


@pytest.mark.parametrize("done", [True, False], ids=["item finished", "item never finished"])
def test_held_reasoning_text_is_given_when_no_summary_came(done: bool) -> None:
    created = {"id": "resp_1", "status": "in_progress", "reasoning": {"summary": "auto"}}
    data, final = _raw_only(created, done=done)
    events = decode_stream(data)
    collected = collect(events)
    assert collected.reasoning() == "Think\n\nMore"
    # Held back while a summary might come, then given whole.
    pieces = [e.text for e in events if isinstance(e, ReasoningDelta) and e.text]
    assert pieces == ["Think\n\nMore"]
    if done:
        assert collected == decode(final)


# 4. Where `instructions` stop


def test_a_system_message_after_a_leading_developer_message_keeps_its_place() -> None:
    body = encode(ChatRequest("gpt-5-mini").developer("dev first").system("sys second").user("hi"))
    assert "instructions" not in body
    assert body["input"] == [
        {"role": "developer", "content": "dev first"},
        {"role": "system", "content": "sys second"},
        {"role": "user", "content": "hi"},
    ]
    body = encode(ChatRequest("gpt-4o").system("S1").developer("D").system("S2").user("u"))
    assert body["instructions"] == "S1"
    assert body["input"] == [
        {"role": "developer", "content": "D"},
        {"role": "system", "content": "S2"},
        {"role": "user", "content": "u"},
    ]


def test_a_developer_message_read_as_a_system_one_joins_the_instructions() -> None:
    """Where the endpoint has no developer role it is a system message, so nothing moves."""
    request = ChatRequest("m").system("S1").developer("D").system("S2").user("u")
    body = encode(request, name="openai-compatible")
    assert body["instructions"] == "S1\n\nD\n\nS2"
    assert body["input"] == [{"role": "user", "content": "u"}]


# 5. A user message whose every part was left out


def test_a_user_message_with_every_part_left_out_is_empty_text() -> None:
    request = ChatRequest("gpt-4-0613").user(None, ImagePart(url="https://x.example/y.png"))
    body = encode(request)
    assert body["input"] == [{"role": "user", "content": ""}]
