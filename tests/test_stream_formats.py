"""A response format an endpoint does not stream (Groq streams no JSON Schema output,
Cloudflare's JSON mode does not stream): a streamed extraction in auto mode asks for a
forced tool instead, and one that insists on native output is told the schema in words,
since nothing else in the stream carries it."""

from __future__ import annotations

import json
from typing import Any

import httpx2
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMode, RequestField, SchemaEnforcement
from allama.transport import Transport


class Invoice(BaseModel):
    total_cents: int
    vendor: str


ANSWER = {"total_cents": 1200, "vendor": "ACME"}


def _chunks(delta: dict[str, Any], finish: str) -> bytes:
    chunks = [
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"role": "assistant", **delta}, "finish_reason": None}]},
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}},
    ]  # fmt: skip
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def _groq(sent: list[dict[str, Any]], **options: Any) -> Any:
    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        if not body.get("stream"):
            message = {"role": "assistant", "content": json.dumps(ANSWER)}
            completion = {"id": "c", "object": "chat.completion", "model": "m",
                          "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 5, "completion_tokens": 5}}  # fmt: skip
            return httpx2.Response(200, json=completion)
        if body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            call = {"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": json.dumps(ANSWER)}}  # fmt: skip
            content = _chunks({"tool_calls": [call]}, "tool_calls")
        else:
            content = _chunks({"content": json.dumps(ANSWER)}, "stop")
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=content)

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(answer)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    return allama.provider("groq", api_key="gsk-test", base_url="http://groq", transport=transport)


def _streamed(provider: Any, request: ChatRequest) -> allama.Extracted[Invoice]:
    with allama.extract_stream(provider, Invoice, request) as stream:
        for _ in stream:
            pass
        return stream.finish()


def test_a_streamed_auto_extraction_where_the_schema_does_not_stream_forces_a_tool() -> None:
    sent: list[dict[str, Any]] = []
    provider = _groq(sent)
    request = ChatRequest("openai/gpt-oss-20b").user("ACME, $12.00")
    planned = allama.Extractor().plan(provider, Invoice, request, stream=True)
    assert (planned.mode, planned.enforcement) == ("forced_tool", SchemaEnforcement.APPROXIMATE)
    extracted = _streamed(provider, request)
    assert extracted.value == Invoice(**ANSWER)
    record = extracted.metadata
    assert record.mode == ExtractionMode.FORCED_TOOL and record.passes == 1
    assert record.auto_fallback is not None
    assert record.auto_fallback.field is RequestField.RESPONSE_FORMAT
    assert record.auto_fallback.message == "Groq has no JSON Schema output on streamed responses"
    (body,) = sent
    assert "response_format" not in body and body["tool_choice"]["type"] == "function"
    # Not streamed, the same model gets its native output, as before.
    sent.clear()
    assert allama.extract(provider, Invoice, request).metadata.mode == ExtractionMode.NATIVE
    assert sent[0]["response_format"]["type"] == "json_schema"


def test_a_streamed_native_extraction_where_the_schema_does_not_stream_is_told_it() -> None:
    sent: list[dict[str, Any]] = []
    provider = _groq(sent)
    request = ChatRequest("openai/gpt-oss-20b").system("Read it.").user("ACME, $12.00")
    extracted = _streamed(provider, request.with_option(ExtractionMode.NATIVE))
    assert extracted.value == Invoice(**ANSWER)
    assert extracted.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [w.message for w in extracted.metadata.degradations] == [
        "Groq has no JSON Schema output on streamed responses",
        "the schema was written into the instructions, where nothing enforces it",
    ]
    (body,) = sent
    assert "response_format" not in body and "tools" not in body
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith(
        "Read it.\n\nAnswer with one JSON object that follows this JSON Schema:\n"
    )
    assert '"total_cents"' in system["content"]


def test_a_refusal_under_the_error_policy_says_nothing_was_written() -> None:
    sent: list[dict[str, Any]] = []
    provider = _groq(sent)
    request = (
        ChatRequest("openai/gpt-oss-20b")
        .user("ACME, $12.00")
        .with_option(ExtractionMode.NATIVE)
        .with_unsupported_policy(allama.UnsupportedPolicy.ERROR)
    )
    try:
        _streamed(provider, request)
    except allama.UnsupportedError as error:
        assert error.message == (
            "cannot send `response_format`: Groq has no JSON Schema output on streamed responses"
        )
    else:
        raise AssertionError("sent")
    assert sent == []
