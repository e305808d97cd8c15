"""The response side of the Gemini adapter: bodies, streams (SSE and JSON array) and errors.

Unit tests spell out each mapping; a property test holds the stream decoder to the body
decoder (the same response, streamed in either framing and split anywhere, collects to what
the body decodes to); and a replay reads every recorded Gemini case under
`ALLAMA_CORPUS_DIR` (default `../shared/corpus/cases` next to the repository), with
expectations computed from the recording alone. The replay assumes only what the wire
format promises: usage counts, `modelVersion`, `responseId`, `index` and parts may be
missing, unknown or new.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allama.adapters.gemini._decode import (
    decode_response,
    finish_reason_of,
    usage_of,
)
from allama.adapters.gemini._errors import (
    error_from_payload,
    error_from_response,
    retry_delay_seconds,
)
from allama.adapters.gemini._stream import GenerateStreamDecoder, decode_stream
from allama.adapters.openai_compat._decode import LONE_SURROGATES
from allama.errors import (
    REPORTED_USAGE_KEY,
    AuthenticationError,
    ContextWindowExceededError,
    Error,
    IncompleteStreamError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    StreamDecodeError,
    UnsupportedError,
)
from allama.stream import StreamCollector
from allama.types import (
    DECLINE_EXPLANATION_KEY,
    BlockStart,
    BlockStop,
    ChatResponse,
    Finish,
    FinishReason,
    ProviderDataEvent,
    Reasoning,
    ReasoningDelta,
    RequestField,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    UnsupportedStage,
    Usage,
    UsageEvent,
    Warning,
    WarningEvent,
)

# Helpers

SIG = "CtICAdHtim9BiyFrJTR8wDY7/ya4zvN0E7f/NCDBmJdBIPp4X8Gl=="
SIG2 = "EsgFCsUFAXLI2nx+second/signature=="


def candidate(parts: list[dict[str, Any]] | None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"content": {"role": "model"}, "index": 0}
    if parts is not None:
        base["content"]["parts"] = parts
    return {**base, **fields}


def response(parts: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    """A body with one candidate holding `parts`, finished by `STOP`; `fields` replace the
    body's own (`finishReason=...` and `finishMessage=...` go to the candidate)."""
    cand = {k: fields.pop(k) for k in ("finishReason", "finishMessage", "index") if k in fields}
    cand.setdefault("finishReason", "STOP")
    if cand["finishReason"] is None:
        del cand["finishReason"]
    base: dict[str, Any] = {
        "candidates": [candidate(parts or [], **cand)],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp_1",
    }
    return {**base, **fields}


def decode(body: dict[str, Any] | str, **kwargs: Any) -> ChatResponse:
    raw = body if isinstance(body, str) else json.dumps(body)
    return decode_response(200, {}, raw.encode(), **kwargs)


def sse(*chunks: dict[str, Any] | str, ascii: bool = True) -> bytes:
    """Chunks as `alt=sse` frames them; a string is sent as it is (a raw line, say)."""
    out = []
    for chunk in chunks:
        if isinstance(chunk, str):
            out.append(chunk)
        else:
            out.append(f"data: {json.dumps(chunk, ensure_ascii=ascii)}\r\n\r\n")
    return "".join(out).encode()


def array(*chunks: dict[str, Any], ascii: bool = True) -> bytes:
    """Chunks as a streamed JSON array (no `alt=sse`), as Google's front end writes it."""
    body = ",\r\n".join(json.dumps(chunk, indent=2, ensure_ascii=ascii) for chunk in chunks)
    return f"[{body}]".encode()


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def iter_split(data: bytes, cuts: Iterable[int], **kwargs: Any) -> Iterator[StreamEvent]:
    """The events of `data` fed in pieces cut at `cuts`, as they come."""
    decoder = GenerateStreamDecoder(**kwargs)
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        yield from decoder.feed(data[last:cut])
        last = cut
    yield from decoder.close()


def feed_split(data: bytes, cuts: Iterable[int], **kwargs: Any) -> list[StreamEvent]:
    return list(iter_split(data, cuts, **kwargs))


def chunk(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """One stream chunk: candidate 0 with `parts`; `finishReason` and `finishMessage` go to
    the candidate, other fields to the chunk."""
    cand = {k: fields.pop(k) for k in ("finishReason", "finishMessage") if k in fields}
    return {"candidates": [candidate(parts, **cand)], **fields}


def google_error(
    status: int, name: str | None, message: str, *details: dict[str, Any]
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": status, "message": message}
    if name is not None:
        error["status"] = name
    if details:
        error["details"] = list(details)
    return {"error": error}


def rpc(kind: str, **fields: Any) -> dict[str, Any]:
    return {"@type": f"type.googleapis.com/google.rpc.{kind}", **fields}


MIXED_PARTS: list[dict[str, Any]] = [
    {"text": "Let me think", "thought": True},
    {"text": " about it", "thought": True, "thoughtSignature": SIG},
    {"text": "Here"},
    {"text": " it is"},
    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    {"text": "Calling", "thoughtSignature": SIG2},
    {
        "functionCall": {
            "name": "get_weather",
            "args": {"zeta": 1, "alpha": "Zürich 東京", "nested": {"b": [1, 2], "a": None}},
        },
        "thoughtSignature": "sig-of-call",
    },
    {"functionCall": {"id": "fc_given", "name": "noop"}},
    {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
]
MIXED = response(
    MIXED_PARTS,
    usageMetadata={
        "promptTokenCount": 100,
        "toolUsePromptTokenCount": 7,
        "cachedContentTokenCount": 60,
        "candidatesTokenCount": 20,
        "thoughtsTokenCount": 30,
        "totalTokenCount": 157,
    },
)


# Responses


def test_every_part_kind_maps_to_its_block() -> None:
    result = decode(MIXED, provider="gemini", model="gemini-asked-for")
    assert result.content == (
        Reasoning(text="Let me think about it", signature=SIG),
        TextPart(text="Here it is"),
        Reasoning(text="", signature=SIG2),
        TextPart(text="Calling"),
        Reasoning(text="", signature="sig-of-call"),
        ToolCall(
            id="call_0",
            name="get_weather",
            arguments='{"zeta":1,"alpha":"Zürich 東京","nested":{"b":[1,2],"a":null}}',
        ),
        ToolCall(id="fc_given", name="noop", arguments="{}"),
        # The code the model ran goes back on the next turn: kept in its place too.
        Reasoning(
            text="",
            encrypted_content='{"executableCode":{"language":"PYTHON","code":"print(1)"}}',
        ),
    )
    assert result.finish_reason == FinishReason.TOOL_CALLS
    assert result.provider_data == {"gemini": {"parts": [MIXED_PARTS[4], MIXED_PARTS[8]]}}
    assert result.usage == Usage(
        input_tokens=107, output_tokens=50, reasoning_tokens=30, cache_read_tokens=60
    )
    assert (result.model, result.id, result.provider) == ("gemini-2.5-flash", "resp_1", "gemini")


def test_thoughts_and_unknown_parts_never_become_text() -> None:
    result = decode(MIXED)
    assert result.text() == "Here it isCalling"
    assert result.reasoning() == "Let me think about it"
    assert "print" not in (result.text() or "")


def test_consecutive_text_parts_join_and_other_parts_split_them() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}
    result = decode(response([{"text": "a"}, {"text": "b"}, image, {"text": "c"}]))
    assert result.content == (TextPart(text="ab"), TextPart(text="c"))
    assert result.provider_value("gemini", "parts") == [image]


def test_a_signed_thought_ends_its_reasoning_block() -> None:
    parts = [
        {"text": "one", "thought": True, "thoughtSignature": SIG},
        {"text": "two", "thought": True},
        {"text": "", "thought": True, "thoughtSignature": SIG2},
        {"text": "three", "thought": True},
    ]
    assert decode(response(parts)).content == (
        Reasoning(text="one", signature=SIG),
        Reasoning(text="two", signature=SIG2),
        Reasoning(text="three"),
    )


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        # The signature of a text part comes right before the text, which starts anew.
        (
            [{"text": "a"}, {"text": "b", "thoughtSignature": SIG}, {"text": "c"}],
            (TextPart(text="a"), Reasoning(signature=SIG), TextPart(text="bc")),
        ),
        # Gemini 3 may sign an empty last part: an empty text after the signature.
        (
            [{"text": "answer"}, {"text": "", "thoughtSignature": SIG}],
            (TextPart(text="answer"), Reasoning(signature=SIG), TextPart(text="")),
        ),
        # A part with nothing but a signature reads as an empty text part.
        (
            [{"thoughtSignature": SIG}, {"text": "x"}],
            (Reasoning(signature=SIG), TextPart(text="x")),
        ),
        (
            [{"thought": True, "thoughtSignature": SIG}],
            (Reasoning(signature=SIG),),
        ),
        # After an unsigned thought, a signed text keeps its own signature block.
        (
            [{"text": "t", "thought": True}, {"text": "x", "thoughtSignature": SIG}],
            (Reasoning(text="t"), Reasoning(signature=SIG), TextPart(text="x")),
        ),
        # An empty text without a signature makes nothing.
        ([{"text": ""}, {"text": "", "thought": True}], ()),
    ],
)
def test_the_signature_convention(parts: list[dict[str, Any]], expected: tuple[Any, ...]) -> None:
    assert decode(response(parts, finishReason="MAX_TOKENS")).content == expected


def test_a_signature_on_a_kept_part_stays_in_it() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "AAAA"}, "thoughtSignature": SIG}
    result = decode(response([image]))
    assert result.content == ()
    assert result.provider_data == {"gemini": {"parts": [image]}}


def test_tool_calls_number_the_missing_ids_in_order() -> None:
    parts = [
        {"functionCall": {"name": "a", "args": {}}},
        {"functionCall": {"id": "own", "name": "b", "args": {"x": "é"}}},
        {"functionCall": {"name": "c", "args": {"k": [True, 1.5]}}},
    ]
    assert decode(response(parts)).tool_calls() == (
        ToolCall(id="call_0", name="a", arguments="{}"),
        ToolCall(id="own", name="b", arguments='{"x":"é"}'),
        ToolCall(id="call_2", name="c", arguments='{"k":[true,1.5]}'),
    )


def test_tool_arguments_keep_the_key_order_of_the_body() -> None:
    raw = (
        '{"candidates":[{"content":{"parts":[{"functionCall":'
        '{"name":"f","args":{"b":"é","a":[1],"c":{"z":0,"y":1}}}}]},"finishReason":"STOP"}]}'
    )
    assert decode(raw).tool_calls() == (
        ToolCall(id="call_0", name="f", arguments='{"b":"é","a":[1],"c":{"z":0,"y":1}}'),
    )


@pytest.mark.parametrize(
    ("raw", "calls", "expected"),
    [
        ("STOP", False, FinishReason.STOP),
        ("STOP", True, FinishReason.TOOL_CALLS),
        ("MAX_TOKENS", False, FinishReason.LENGTH),
        ("MAX_TOKENS", True, FinishReason.LENGTH),
        ("SAFETY", False, FinishReason.CONTENT_FILTER),
        ("PROHIBITED_CONTENT", False, FinishReason.CONTENT_FILTER),
        ("BLOCKLIST", False, FinishReason.CONTENT_FILTER),
        ("SPII", False, FinishReason.CONTENT_FILTER),
        ("RECITATION", False, FinishReason.CONTENT_FILTER),
        ("LANGUAGE", False, FinishReason.CONTENT_FILTER),
        ("IMAGE_SAFETY", False, FinishReason.CONTENT_FILTER),
        ("IMAGE_PROHIBITED_CONTENT", False, FinishReason.CONTENT_FILTER),
        ("IMAGE_RECITATION", False, FinishReason.CONTENT_FILTER),
        ("MODEL_ARMOR", False, FinishReason.CONTENT_FILTER),
        ("MALFORMED_FUNCTION_CALL", False, FinishReason("malformed_function_call")),
        ("UNEXPECTED_TOOL_CALL", True, FinishReason("unexpected_tool_call")),
        ("TOO_MANY_TOOL_CALLS", True, FinishReason("too_many_tool_calls")),
        ("MALFORMED_RESPONSE", False, FinishReason("malformed_response")),
        ("OTHER", False, FinishReason("other")),
        ("IMAGE_OTHER", False, FinishReason("image_other")),
        ("BRAND_NEW_REASON", False, FinishReason("brand_new_reason")),
        ("FINISH_REASON_UNSPECIFIED", False, None),
        (None, False, None),
    ],
)
def test_finish_reasons(raw: str | None, calls: bool, expected: FinishReason | None) -> None:
    parts = [{"functionCall": {"name": "f", "args": {}}}] if calls else [{"text": "x"}]
    result = decode(response(parts, finishReason=raw))
    assert result.finish_reason == expected
    assert finish_reason_of(raw, tool_calls=calls) == expected
    if expected is not None and expected not in FinishReason.KNOWN:
        assert expected.is_other


def test_a_content_filter_keeps_its_reason_and_explanation() -> None:
    result = decode(response([], finishReason="RECITATION", finishMessage="Cites a source."))
    assert result.finish_reason == FinishReason.CONTENT_FILTER
    assert result.provider_data == {
        "gemini": {"finish_reason": "RECITATION", DECLINE_EXPLANATION_KEY: "Cites a source."}
    }
    assert result.decline_explanation() == "Cites a source."


def test_a_response_model_armor_blocked_is_a_content_filter_with_its_message() -> None:
    """Vertex's Model Armor blocking the response: declined by the provider, not an odd
    stop that an extraction would ask again about."""
    result = decode(response([], finishReason="MODEL_ARMOR", finishMessage="Blocked."))
    assert result.finish_reason == FinishReason.CONTENT_FILTER
    assert result.provider_data == {
        "gemini": {"finish_reason": "MODEL_ARMOR", DECLINE_EXPLANATION_KEY: "Blocked."}
    }
    assert result.decline_explanation() == "Blocked."


@pytest.mark.parametrize("message", [None, "", "  ", 3])
def test_a_content_filter_without_an_explanation(message: Any) -> None:
    fields = {} if message is None else {"finishMessage": message}
    result = decode(response([], finishReason="SAFETY", **fields))
    assert result.provider_data == {"gemini": {"finish_reason": "SAFETY"}}
    assert result.decline_explanation() is None


def test_another_reason_keeps_its_message() -> None:
    message = "Malformed function call: call:default_api:exec{command: ls}"
    result = decode(response([], finishReason="MALFORMED_FUNCTION_CALL", finishMessage=message))
    assert result.provider_data == {"gemini": {"finish_message": message}}
    assert result.decline_explanation() is None


def test_the_message_of_a_normal_stop_is_not_kept() -> None:
    parts = [{"functionCall": {"name": "f", "args": {}}}]
    result = decode(response(parts, finishMessage="Model generated function call(s)."))
    assert result.finish_reason == FinishReason.TOOL_CALLS
    assert result.provider_data == {}


def test_a_blocked_prompt_is_an_empty_content_filter() -> None:
    body = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "safetyRatings": []},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r",
    }
    result = decode(body)
    assert result.content == ()
    assert result.finish_reason == FinishReason.CONTENT_FILTER
    assert result.provider_data == {
        "gemini": {
            "block_reason": "PROHIBITED_CONTENT",
            DECLINE_EXPLANATION_KEY: "Gemini blocked the prompt (block reason PROHIBITED_CONTENT).",
        }
    }
    assert result.usage == Usage(input_tokens=9, output_tokens=0)


def test_a_blocked_prompt_on_vertex_keeps_its_message() -> None:
    body = {
        "promptFeedback": {"blockReason": "MODEL_ARMOR", "blockReasonMessage": "Jailbreak."},
        "usageMetadata": {"trafficType": "ON_DEMAND"},
    }
    result = decode(body)
    assert result.provider_data == {
        "gemini": {"block_reason": "MODEL_ARMOR", DECLINE_EXPLANATION_KEY: "Jailbreak."}
    }
    assert result.decline_explanation() == "Jailbreak."
    assert result.usage == Usage()


def test_several_candidates_keep_the_others_verbatim() -> None:
    first = candidate([{"text": "one"}], finishReason="STOP")
    second = candidate([{"text": "two"}], finishReason="MAX_TOKENS", index=1)
    third = candidate([{"functionCall": {"name": "f"}}], index=2)
    # Listed out of order: the one with index 0 (here without `index`) is the response.
    del first["index"]
    result = decode({"candidates": [second, first, third]})
    assert result.content == (TextPart(text="one"),)
    assert result.finish_reason == FinishReason.STOP
    assert result.provider_data == {"gemini": {"candidates": [second, third]}}


def test_several_candidates_say_only_the_first_is_read() -> None:
    # `candidateCount` above 1: the others are paid for, so their dropping is not silent
    # (the OpenAI family's `n` above 1 warns the same way).
    first = candidate([{"text": "one"}], finishReason="STOP")
    others = [candidate([{"text": "two"}], index=1), candidate([{"text": "3"}], index=2)]
    earlier = Warning.unsupported(RequestField.TEMPERATURE, "dropped")
    result = decode({"candidates": [first, *others]}, provider="vertex", warnings=[earlier])
    assert result.warnings == (
        earlier,
        Warning.unsupported(
            RequestField.OPTIONS,
            "the provider answered 3 candidates: only the first is read (the others are "
            "kept verbatim in `provider_data`, under `candidates`)",
            code="first_choice_only",
        ).with_provider("vertex"),
    )
    assert result.provider_data == {"gemini": {"candidates": others}}
    # One candidate: no warning.
    assert decode({"candidates": [first]}, provider="gemini").warnings == ()


def test_without_index_zero_the_first_listed_is_the_response() -> None:
    first = candidate([{"text": "one"}], finishReason="STOP", index=3)
    second = candidate([{"text": "two"}], index=4)
    result = decode({"candidates": [first, second]})
    assert result.text() == "one"
    assert result.provider_data == {"gemini": {"candidates": [second]}}
    assert [(w.code, w.message) for w in result.warnings] == [
        (
            "first_choice_only",
            "the provider answered 2 candidates: only the first is read (the others are "
            "kept verbatim in `provider_data`, under `candidates`)",
        )
    ]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "promptTokenCount": 100,
                "toolUsePromptTokenCount": 5,
                "cachedContentTokenCount": 40,
                "candidatesTokenCount": 20,
                "thoughtsTokenCount": 30,
                "totalTokenCount": 155,
            },
            Usage(input_tokens=105, output_tokens=50, reasoning_tokens=30, cache_read_tokens=40),
        ),
        # Omitted because zero: an absent addend of a reported sum counts 0.
        (
            {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            Usage(input_tokens=10, output_tokens=5),
        ),
        (
            {"promptTokenCount": 15, "thoughtsTokenCount": 2, "totalTokenCount": 17},
            Usage(input_tokens=15, output_tokens=2, reasoning_tokens=2),
        ),
        (
            {"toolUsePromptTokenCount": 4, "candidatesTokenCount": 1},
            Usage(input_tokens=4, output_tokens=1),
        ),
        # A whole sum absent comes from the total when the other sum is known...
        (
            {"promptTokenCount": 14, "totalTokenCount": 14},
            Usage(input_tokens=14, output_tokens=0),
        ),
        (
            {"promptTokenCount": 30, "totalTokenCount": 99},
            Usage(input_tokens=30, output_tokens=69),
        ),
        (
            {"candidatesTokenCount": 5, "totalTokenCount": 20},
            Usage(input_tokens=15, output_tokens=5),
        ),
        # ... and stays unknown otherwise.
        ({"promptTokenCount": 14}, Usage(input_tokens=14)),
        ({"candidatesTokenCount": 3}, Usage(output_tokens=3)),
        ({"totalTokenCount": 20}, Usage()),
        ({"promptTokenCount": 30, "totalTokenCount": 20}, Usage(input_tokens=30)),
        ({"cachedContentTokenCount": 8}, Usage(cache_read_tokens=8)),
        ({"trafficType": "ON_DEMAND", "promptTokenCount": None}, Usage()),
        ({}, Usage()),
    ],
)
def test_usage(usage: dict[str, Any], expected: Usage) -> None:
    assert usage_of(usage) == expected
    assert decode(response([], usageMetadata=usage)).usage == expected


def test_no_usage_metadata_is_none() -> None:
    body = response([{"text": "x"}])
    del body["usageMetadata"]
    assert decode(body).usage is None


def test_unknown_fields_are_tolerated() -> None:
    body = response(
        [{"text": "hi", "partMetadata": {"a": 1}, "future": [1]}],
        createTime="2025-06-27T08:48:21Z",
        future_field={"x": 1},
    )
    body["candidates"][0].update(
        safetyRatings=[{"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "LOW"}],
        citationMetadata={"citations": []},
        avgLogprobs=-0.5,
    )
    body["usageMetadata"]["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": 10}]
    warning = Warning.unsupported(RequestField.SEED, "seed is not supported")
    result = decode(body, provider="gemini", warnings=[warning])
    assert result.content == (TextPart(text="hi"),)
    assert result.warnings == (warning,)
    assert result.provider_data == {}


def test_model_falls_back_to_the_one_asked_for_and_id_to_none() -> None:
    body = response([{"text": "x"}])
    del body["modelVersion"], body["responseId"]
    result = decode(body, model="gemini-x")
    assert (result.model, result.id) == ("gemini-x", None)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("<html>oops</html>", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('"text"', "not a JSON object"),
        ("{}", "none of the fields of a response"),
        ('{"candidates": {}}', "`candidates` is not a list"),
        ('{"candidates": [1]}', "a candidate is not an object"),
        ('{"candidates": [{"content": []}]}', "`content` is not an object"),
        ('{"candidates": [{"content": {"parts": {}}}]}', "`parts` is not a list"),
        ('{"candidates": [{"content": {"parts": [1]}}]}', "a part is not an object"),
        ('{"candidates": [{"content": {"parts": [{"text": 1}]}}]}', "`text` is not a string"),
        (
            '{"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]}',
            "no string `name`",
        ),
        (
            '{"candidates": [{"content": {"parts": [{"functionCall": []}]}}]}',
            "`functionCall` is not an object",
        ),
    ],
)
def test_an_unreadable_body_is_a_server_error(body: str, why: str) -> None:
    with pytest.raises(ServerError) as caught:
        decode(body, provider="gemini", model="m")
    error = caught.value
    assert type(error) is ServerError and error.authored and error.retryable
    assert why in error.message
    assert error.context.body == body
    assert (error.provider, error.model) == ("gemini", "m")


def test_an_escaped_lone_surrogate_is_read_as_u_fffd_with_a_warning() -> None:
    # It was kept as it came: the response then could not be written as JSON (`to_json`,
    # a batch's ledger). It is read as Chat Completions reads it.
    body = '{"candidates": [{"content": {"parts": [{"text": "a\\ud83d"}]}}]}'
    result = decode(body, provider="gemini")
    assert result.text() == "a\ufffd"
    assert [(w.kind, w.message, w.provider) for w in result.warnings] == [
        ("approximated", LONE_SURROGATES, "gemini")
    ]
    assert ChatResponse.from_json(result.to_json()) == result


@pytest.mark.parametrize("wrap", [False, True])
def test_an_error_object_in_a_200_body_is_that_error(wrap: bool) -> None:
    body: Any = {
        "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    }
    with pytest.raises(OverloadedError) as caught:
        decode(json.dumps([body] if wrap else body), provider="gemini")
    assert (caught.value.status, caught.value.provider) == (503, "gemini")


def test_error_status_raises_the_mapped_error() -> None:
    body = b'{"error": {"code": 404, "message": "models/x is not found", "status": "NOT_FOUND"}}'
    with pytest.raises(NotFoundError) as caught:
        decode_response(404, {}, body, provider="gemini", model="x")
    assert (caught.value.status, caught.value.provider, caught.value.model) == (404, "gemini", "x")


# Errors


def error_of(status: int, body: Any, headers: dict[str, str] | None = None) -> Error:
    raw = body if isinstance(body, str) else json.dumps(body)
    return error_from_response(status, headers or {}, raw.encode(), provider="gemini", model="m")


@pytest.mark.parametrize(
    ("status", "name", "cls", "retryable"),
    [
        (400, "INVALID_ARGUMENT", InvalidRequestError, False),
        (400, "FAILED_PRECONDITION", InvalidRequestError, False),
        (401, "UNAUTHENTICATED", AuthenticationError, False),
        (403, "PERMISSION_DENIED", PermissionDeniedError, False),
        (404, "NOT_FOUND", NotFoundError, False),
        (429, "RESOURCE_EXHAUSTED", RateLimitedError, True),
        (500, "INTERNAL", ServerError, True),
        (503, "UNAVAILABLE", OverloadedError, True),
        (504, "DEADLINE_EXCEEDED", ServerError, True),
        # The server cancelling under load (gemini-cli reports it): not the caller's mistake.
        (499, "CANCELLED", ServerError, True),
    ],
)
def test_every_status_name(status: int, name: str, cls: type[Error], retryable: bool) -> None:
    words = "Provider words that quote the caller"
    body = google_error(status, name, words)
    error = error_of(status, body)
    assert type(error) is cls
    assert error.retryable is retryable
    assert error.message == words and not error.authored
    assert (error.status, error.provider, error.model) == (status, "gemini", "m")
    assert error.context.body == json.dumps(body)
    assert words not in repr(error) and words not in str(error.as_log())
    assert error.as_log()["kind"] == cls.kind


def test_a_499_without_a_status_name_is_a_server_error_too() -> None:
    error = error_of(499, {"error": {"code": 499, "message": "The operation was cancelled."}})
    assert (type(error), error.retryable) == (ServerError, True)


def test_the_status_name_decides_over_the_http_status() -> None:
    assert type(error_of(400, google_error(400, "NOT_FOUND", "x"))) is NotFoundError
    assert type(error_of(500, google_error(500, "UNAVAILABLE", "x"))) is OverloadedError


@pytest.mark.parametrize(
    "body",
    [
        google_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            rpc("ErrorInfo", reason="API_KEY_INVALID", domain="googleapis.com"),
        ),
        # An expired key says so in words; the reason is the same.
        google_error(
            400,
            "INVALID_ARGUMENT",
            "API key expired. Please renew the API key.",
            rpc("ErrorInfo", reason="API_KEY_INVALID"),
        ),
        google_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
        google_error(400, None, "Bad", rpc("ErrorInfo", reason="API_KEY_INVALID")),
        google_error(
            403,
            "PERMISSION_DENIED",
            "Method doesn't allow unregistered callers (callers without established identity).",
        ),
    ],
)
def test_a_bad_api_key_is_an_authentication_error(body: dict[str, Any]) -> None:
    error = error_of(body["error"]["code"], body)
    assert type(error) is AuthenticationError and not error.retryable


@pytest.mark.parametrize(
    ("message", "field"),
    [
        # Too complex, naming no field: the provider reads it from the request
        # (test_gemini_fixes).
        (
            "The specified schema produces a constraint that has too many states for serving.",
            None,
        ),
        ("schema produces a constraint that is too complex", None),
        (
            "Too many states for serving: the tools' function_declarations are too large.",
            RequestField.TOOLS,
        ),
        (
            'Invalid JSON payload received. Unknown name "additionalProperties" at '
            "'generation_config.response_schema.properties[0].value.items': Cannot find field.",
            RequestField.RESPONSE_FORMAT,
        ),
        (
            "Invalid value at 'generation_config.response_json_schema' (type.googleapis.com/"
            "google.protobuf.Struct), the schema is not supported",
            RequestField.RESPONSE_FORMAT,
        ),
        ("response_json_schema is not supported by this model", RequestField.RESPONSE_FORMAT),
        (
            "Function calling with a response mime type: 'application/json' is unsupported",
            RequestField.RESPONSE_FORMAT,
        ),
        (
            "Tool use with a response mime type: 'application/json' is unsupported",
            RequestField.RESPONSE_FORMAT,
        ),
        (
            'Invalid JSON payload received. Unknown name "const" at '
            "'tools[0].function_declarations[0].parameters.properties[0].value': "
            "Cannot find field.",
            RequestField.TOOLS,
        ),
    ],
)
def test_a_refused_schema_is_unsupported_by_the_provider(
    message: str, field: RequestField | None
) -> None:
    error = error_of(400, google_error(400, "INVALID_ARGUMENT", message))
    assert type(error) is UnsupportedError
    assert (error.field, error.stage) == (field, UnsupportedStage.PROVIDER)
    assert error.status == 400 and not error.authored and not error.retryable


@pytest.mark.parametrize(
    "message",
    [
        "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).",
        "The input token count exceeds the limit.",
    ],
)
def test_a_full_context_window(message: str) -> None:
    error = error_of(400, google_error(400, "INVALID_ARGUMENT", message))
    assert type(error) is ContextWindowExceededError


def test_other_invalid_arguments_stay_invalid_requests() -> None:
    message = "Function call is missing a thought_signature in functionCall parts."
    error = error_of(400, google_error(400, "INVALID_ARGUMENT", message))
    assert type(error) is InvalidRequestError


@pytest.mark.parametrize(
    "message",
    [
        "User location is not supported for the API use.",
        "Gemini API free tier is not available in your country. Please enable billing on "
        "your project in Google AI Studio.",
    ],
)
def test_a_failed_precondition_of_the_account_is_a_refusal(message: str) -> None:
    # Every request would meet it: a refusal of the account, which stops a batch run.
    error = error_of(400, google_error(400, "FAILED_PRECONDITION", message))
    assert type(error) is PermissionDeniedError and not error.retryable


def test_another_failed_precondition_is_the_requests_own() -> None:
    message = "The batch has already finished."
    error = error_of(400, google_error(400, "FAILED_PRECONDITION", message))
    assert type(error) is InvalidRequestError and not error.retryable


def per_minute_quota(*extra: dict[str, Any]) -> dict[str, Any]:
    return google_error(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
        rpc(
            "QuotaFailure",
            violations=[
                {
                    "quotaMetric": "generativelanguage.googleapis.com/"
                    "generate_content_paid_tier_input_token_count",
                    "quotaId": "GenerateContentPaidTierInputTokensPerModelPerMinute",
                    "quotaValue": "1000000",
                }
            ],
        ),
        *extra,
    )


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [("37s", 37.0), ("1.5s", 1.5), ("0.000001s", 0.000001), ("48s", 48.0), ("0s", 0.0)],
)
def test_a_rate_limit_waits_its_retry_delay(delay: str, seconds: float) -> None:
    error = error_of(429, per_minute_quota(rpc("RetryInfo", retryDelay=delay)))
    assert type(error) is RateLimitedError and error.retryable
    assert error.retry_after == pytest.approx(seconds)
    assert error.as_log()["retry_after"] == pytest.approx(seconds)


def test_the_retry_delay_wins_over_the_header() -> None:
    body = per_minute_quota(rpc("RetryInfo", retryDelay="5s"))
    assert error_of(429, body, {"Retry-After": "30"}).retry_after == 5.0


@pytest.mark.parametrize(("status", "name"), [(503, "UNAVAILABLE"), (500, "INTERNAL")])
def test_a_server_error_waits_its_retry_delay_too(status: int, name: str) -> None:
    # google.rpc.RetryInfo is not only for quotas: whatever the error, it says when to retry.
    body = {
        "error": {
            "code": status,
            "message": "The model is overloaded.",
            "status": name,
            "details": [rpc("RetryInfo", retryDelay="9s")],
        }
    }
    error = error_of(status, body)
    assert error.retryable and error.retry_after == 9.0  # type: ignore[attr-defined]


def test_without_a_retry_delay_the_header_says() -> None:
    assert error_of(429, per_minute_quota(), {"Retry-After": "30"}).retry_after == 30.0
    date = error_from_response(
        429, {"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, b"", now=1445412480.0
    )
    assert date.retry_after == 30.0
    assert error_of(429, per_minute_quota()).retry_after is None


def test_vertex_resource_exhausted_without_details() -> None:
    body = [
        {
            "error": {
                "code": 429,
                "message": "Resource exhausted. Please try again later.",
                "status": "RESOURCE_EXHAUSTED",
            }
        }
    ]
    error = error_of(429, body)
    assert type(error) is RateLimitedError and error.retry_after is None


@pytest.mark.parametrize(
    "body",
    [
        # A per-day quota among the violations (Gemini lists every quota it checked).
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            rpc(
                "QuotaFailure",
                violations=[
                    {"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"},
                    {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"},
                ],
            ),
            rpc("RetryInfo", retryDelay="51s"),
        ),
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota.",
            rpc(
                "QuotaFailure",
                violations=[
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/"
                        "generate_requests_per_model_per_day"
                    }
                ],
            ),
        ),
        # A limit of 0: the tier does not include the model.
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.\n"
            "* Quota exceeded for metric: generativelanguage.googleapis.com/"
            "generate_content_free_tier_input_token_count, limit: 0, model: gemini-2.5-pro",
        ),
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "Quota exceeded.",
            rpc("QuotaFailure", violations=[{"quotaId": "PerMinute", "quotaValue": "0"}]),
        ),
        # Only the message tells, and no status name.
        google_error(429, None, "Quota exceeded for requests per day. Check your billing."),
    ],
)
def test_a_quota_that_will_not_clear_soon_is_exceeded(body: dict[str, Any]) -> None:
    error = error_of(429, body)
    assert type(error) is QuotaExceededError
    assert not error.retryable and error.retry_after is None


def test_a_per_minute_quota_is_a_rate_limit() -> None:
    error = error_of(429, per_minute_quota(rpc("RetryInfo", retryDelay="48s")))
    assert type(error) is RateLimitedError and error.retry_after == 48.0


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (400, google_error(400, "OUT_OF_RANGE", "x"), InvalidRequestError),
        (409, google_error(409, "ABORTED", "x"), InvalidRequestError),
        (499, google_error(499, "CANCELLED", "x"), ServerError),
        (500, google_error(500, "UNKNOWN", "x"), ServerError),
        (501, google_error(501, "UNIMPLEMENTED", "x"), ServerError),
        (502, "<html><body>Bad Gateway</body></html>", ServerError),
        (503, "Service Unavailable", OverloadedError),
        (504, "", ServerError),
        (401, "", AuthenticationError),
        (403, "Forbidden", PermissionDeniedError),
        (404, "Not Found", NotFoundError),
        (408, "", RequestTimeoutError),
        (429, "Too Many Requests", RateLimitedError),
        (400, "Bad Request", InvalidRequestError),
        (413, "<html>Request Entity Too Large</html>", InvalidRequestError),
        (400, google_error(400, "NEW_STATUS", "too many states for serving"), UnsupportedError),
    ],
)
def test_an_unknown_status_name_or_no_json_goes_by_http_status(
    status: int, body: Any, cls: type[Error]
) -> None:
    error = error_of(status, body)
    assert type(error) is cls
    assert error.status == status
    assert error.message
    # An empty body's message (`HTTP 504`) is allama's; any other is the provider's.
    assert error.authored is (body == "")


def test_a_conflict_may_be_retried() -> None:
    assert error_of(409, google_error(409, "ABORTED", "x")).retryable


def test_a_body_without_json_keeps_its_text() -> None:
    error = error_of(502, "<html>Bad Gateway</html>")
    assert error.message == (
        "the provider answered HTTP 502 with an HTML page (not its API's error): Bad Gateway"
    )
    assert error.context.body == "<html>Bad Gateway</html>"
    assert error_of(502, "upstream reset").message == "upstream reset"
    assert error_of(504, "").message == "HTTP 504"


def test_an_error_body_wrapped_in_an_array() -> None:
    body = [google_error(400, "INVALID_ARGUMENT", "API key not valid.")]
    assert type(error_of(400, body)) is AuthenticationError


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("37s", 37.0),
        ("1.5s", 1.5),
        (" 2s ", 2.0),
        (".5s", 0.5),
        ({"seconds": 3, "nanos": 500000000}, 3.5),
        ("37", None),
        ("1m", None),
        ("-1s", None),
        (None, None),
        ({"seconds": "x"}, None),
        # Not a finite number: no wait to honour (NaN), or one that would hold a run for good.
        ({"seconds": "NaN"}, None),
        ({"seconds": "Infinity"}, None),
        ({"seconds": 3, "nanos": "nan"}, None),
        ("9" * 400 + "s", None),
    ],
)
def test_retry_delay_seconds(value: Any, seconds: float | None) -> None:
    assert retry_delay_seconds(value) == seconds


def test_an_error_payload_in_a_stream_takes_its_code_as_status() -> None:
    payload = google_error(503, "UNAVAILABLE", "The model is overloaded.")
    error = error_from_payload(payload, provider="gemini", model="m")
    assert type(error) is OverloadedError
    assert (error.status, error.provider, error.model) == (503, "gemini", "m")
    assert error.context.body == json.dumps(payload)
    assert not error.authored and error.message not in str(error.as_log())


def test_an_error_payload_without_a_status_is_a_server_error() -> None:
    error = error_from_payload({"error": {"message": "something broke"}})
    assert type(error) is ServerError and error.status is None
    retry = error_from_payload(
        google_error(429, "RESOURCE_EXHAUSTED", "slow down", rpc("RetryInfo", retryDelay="2s"))
    )
    assert type(retry) is RateLimitedError and retry.retry_after == 2.0


# Streams


def test_sse_stream_events_in_order() -> None:
    data = sse(
        chunk(
            [{"text": "Hmm", "thought": True}],
            usageMetadata={"promptTokenCount": 5, "totalTokenCount": 9, "thoughtsTokenCount": 4},
            modelVersion="gemini-2.5-flash",
            responseId="r1",
        ),
        chunk([{"text": "", "thought": True, "thoughtSignature": SIG}, {"text": "Hel"}]),
        chunk([{"text": "lo"}, {"functionCall": {"name": "f", "args": {"a": 1}}}]),
        chunk(
            [{"text": "after"}],
            finishReason="STOP",
            usageMetadata={
                "promptTokenCount": 5,
                "candidatesTokenCount": 3,
                "thoughtsTokenCount": 4,
                "totalTokenCount": 12,
            },
        ),
    )
    events = decode_stream(data, provider="gemini", model="asked")
    assert events == [
        ResponseStart(id="r1", model="gemini-2.5-flash"),
        # A chunk's usage comes before its content. Before the finishing chunk the output
        # counts are running: not the call's.
        UsageEvent(usage=Usage(input_tokens=5)),
        BlockStart(index=0, block_type=StreamBlockType.REASONING),
        ReasoningDelta(index=0, text="Hmm"),
        ReasoningDelta(index=0, signature=SIG),
        BlockStop(index=0),
        BlockStart(index=1, block_type=StreamBlockType.TEXT),
        TextDelta(index=1, text="Hel"),
        TextDelta(index=1, text="lo"),
        BlockStop(index=1),
        BlockStart(index=2, block_type=StreamBlockType.TOOL_CALL, id="call_0", name="f"),
        ToolCallDelta(index=2, arguments='{"a":1}'),
        BlockStop(index=2),
        UsageEvent(usage=Usage(input_tokens=5, output_tokens=7, reasoning_tokens=4)),
        BlockStart(index=3, block_type=StreamBlockType.TEXT),
        TextDelta(index=3, text="after"),
        BlockStop(index=3),
        Finish(finish_reason=FinishReason.TOOL_CALLS),
    ]
    result = collect(events)
    assert result.content == (
        Reasoning(text="Hmm", signature=SIG),
        TextPart(text="Hello"),
        ToolCall(id="call_0", name="f", arguments='{"a":1}'),
        TextPart(text="after"),
    )


def test_a_chunks_usage_comes_before_its_content() -> None:
    # A stream closed between a chunk's text and its usage keeps the input count that came.
    running = {"promptTokenCount": 100, "totalTokenCount": 100}
    data = sse(chunk([{"text": '{"name": '}], usageMetadata=running))
    events = iter_split(data, [], model="asked")
    assert list(itertools.islice(events, 4)) == [
        ResponseStart(model="asked"),
        UsageEvent(usage=Usage(input_tokens=100)),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text='{"name": '),
    ]


def test_a_part_that_does_not_fit_comes_after_its_chunks_usage_once() -> None:
    data = sse(chunk([{"text": "Hello"}, {"text": 7}], usageMetadata={"promptTokenCount": 9}))
    events: list[StreamEvent] = []
    with pytest.raises(StreamDecodeError) as caught:
        for event in iter_split(data, [], model="asked"):
            events.append(event)
    assert str(caught.value) == (
        "a stream chunk does not fit the response shape: a part's `text` is not a string"
    )
    assert events == [
        ResponseStart(model="asked"),
        UsageEvent(usage=Usage(input_tokens=9)),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="Hello"),
    ]
    assert caught.value.context.metadata[REPORTED_USAGE_KEY] == {"input_tokens": 9}


def test_the_json_array_framing_gives_the_same_events() -> None:
    chunks = [
        chunk([{"text": 'a {b} "c" \\ d'}], modelVersion="m", responseId="r"),
        chunk([{"functionCall": {"name": "f", "args": {"s": "]},{["}}}]),
        chunk([{"text": "ü"}], finishReason="STOP", usageMetadata={"promptTokenCount": 3}),
    ]
    from_array = decode_stream(array(*chunks, ascii=False))
    assert from_array == decode_stream(sse(*chunks))
    assert collect(from_array).content == (
        TextPart(text='a {b} "c" \\ d'),
        ToolCall(id="call_0", name="f", arguments='{"s":"]},{["}'),
        TextPart(text="ü"),
    )


def test_a_signature_on_a_function_call_streams_as_its_own_block() -> None:
    part = {"functionCall": {"id": "c1", "name": "f", "args": {}}, "thoughtSignature": SIG}
    events = decode_stream(sse(chunk([part], finishReason="STOP")))
    assert events[1:] == [
        BlockStart(index=0, block_type=StreamBlockType.REASONING),
        ReasoningDelta(index=0, signature=SIG),
        BlockStop(index=0),
        BlockStart(index=1, block_type=StreamBlockType.TOOL_CALL, id="c1", name="f"),
        ToolCallDelta(index=1, arguments="{}"),
        BlockStop(index=1),
        Finish(finish_reason=FinishReason.TOOL_CALLS),
    ]


def test_stream_provider_data_comes_before_finish() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}
    data = sse(
        chunk([{"text": "x"}, image]),
        chunk([], finishReason="SAFETY", finishMessage="Unsafe."),
    )
    events = decode_stream(data)
    assert events[-4:] == [
        ProviderDataEvent(namespace="gemini", key="parts", value=[image]),
        ProviderDataEvent(namespace="gemini", key="finish_reason", value="SAFETY"),
        ProviderDataEvent(namespace="gemini", key=DECLINE_EXPLANATION_KEY, value="Unsafe."),
        Finish(finish_reason=FinishReason.CONTENT_FILTER),
    ]
    assert collect(events).decline_explanation() == "Unsafe."


def test_a_stream_without_a_finish_reason_is_left_unfinished() -> None:
    events = decode_stream(sse(chunk([{"text": "partial"}])))
    assert not any(isinstance(event, Finish) for event in events)
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    assert collector.partial_response().text() == "partial"
    with pytest.raises(IncompleteStreamError):
        collector.finish()


def test_done_stays_false_and_finished_follows_the_reason() -> None:
    decoder = GenerateStreamDecoder()
    list(decoder.feed(sse(chunk([{"text": "a"}]))))
    assert not decoder.finished and not decoder.done
    list(decoder.feed(sse(chunk([], finishReason="STOP"))))
    assert decoder.finished and not decoder.done
    assert list(decoder.close())[-1] == Finish(finish_reason=FinishReason.STOP)
    assert not decoder.done


def test_a_usage_only_chunk_after_the_finish_reason() -> None:
    data = sse(
        chunk([{"text": "a"}], finishReason="MAX_TOKENS"),
        {"usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 1}},
    )
    result = collect(decode_stream(data))
    assert result.finish_reason == FinishReason.LENGTH
    assert result.usage == Usage(input_tokens=4, output_tokens=1)


def test_stream_usage_is_the_running_total() -> None:
    data = sse(
        chunk([{"text": "a"}], usageMetadata={"promptTokenCount": 15, "totalTokenCount": 15}),
        chunk([{"text": "b"}], usageMetadata={"promptTokenCount": 15, "totalTokenCount": 15}),
        chunk(
            [{"text": "c"}],
            finishReason="STOP",
            usageMetadata={
                "promptTokenCount": 13,
                "candidatesTokenCount": 8,
                "cachedContentTokenCount": 4,
                "totalTokenCount": 21,
            },
        ),
    )
    events = decode_stream(data)
    usages = [event.usage for event in events if isinstance(event, UsageEvent)]
    assert usages == [
        Usage(input_tokens=15),  # the output so far, unknown: not 0
        Usage(input_tokens=15),
        Usage(input_tokens=13, output_tokens=8, cache_read_tokens=4),
    ]
    assert collect(events).usage == Usage(input_tokens=13, output_tokens=8, cache_read_tokens=4)


def test_a_blocked_prompt_in_the_first_chunk() -> None:
    first = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 6, "totalTokenCount": 6},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r",
    }
    events = decode_stream(sse(first))
    assert events == [
        ResponseStart(id="r", model="gemini-2.5-flash"),
        UsageEvent(usage=Usage(input_tokens=6, output_tokens=0)),
        ProviderDataEvent(namespace="gemini", key="block_reason", value="SAFETY"),
        ProviderDataEvent(
            namespace="gemini",
            key=DECLINE_EXPLANATION_KEY,
            value="Gemini blocked the prompt (block reason SAFETY).",
        ),
        Finish(finish_reason=FinishReason.CONTENT_FILTER),
    ]
    assert collect(events) == decode(first)


def _streamed_others(count: int) -> Warning:
    """The warning on a stream that sent `count` candidates (the response one among them)."""
    return Warning.unsupported(
        RequestField.OPTIONS,
        f"the provider answered {count} candidates: only the first is read (the others are "
        "not kept: a stream carries only the first)",
        code="first_choice_only",
    )


def test_other_candidates_are_kept_out_of_the_stream_and_said_so() -> None:
    # Changed on purpose: the others were left out without a word, where a body's are
    # warned of (`first_choice_only`); each index is counted once, over every chunk.
    other = candidate([{"text": "other"}], index=1, finishReason="STOP")
    third = candidate([{"text": "third"}], index=2)
    data = sse(
        {"candidates": [candidate([{"text": "main"}]), other]},
        {"candidates": [other, third]},
        {"candidates": [candidate([], finishReason="STOP")]},
    )
    events = decode_stream(data, provider="gemini")
    result = collect(events)
    assert result.content == (TextPart(text="main"),)
    assert result.provider_data == {}
    assert result.warnings == (_streamed_others(3).with_provider("gemini"),)
    # Said once, at the end, before the finish.
    assert events[-2:] == [
        WarningEvent(warning=_streamed_others(3).with_provider("gemini")),
        Finish(finish_reason=FinishReason.STOP),
    ]


def test_a_stream_of_one_candidate_warns_of_none() -> None:
    data = sse(
        {"candidates": [candidate([{"text": "main"}])]},
        {"candidates": [candidate([], finishReason="STOP")]},
    )
    assert collect(decode_stream(data, provider="gemini")).warnings == ()


def test_stream_error_after_text_yields_the_text_first() -> None:
    raw_error = (
        "{\n"
        '  "error": {\n'
        '    "code": 503,\n'
        '    "message": "The model is overloaded. {Please} try \\"later\\".",\n'
        '    "status": "UNAVAILABLE"\n'
        "  }\n"
        "}\n"
    )
    data = sse(chunk([{"text": "Hi"}], modelVersion="g"), raw_error, chunk([{"text": "never"}]))
    decoder = GenerateStreamDecoder(provider="gemini", model="g")
    seen: list[StreamEvent] = []
    with pytest.raises(OverloadedError) as caught:
        for event in decoder.feed(data):
            seen.append(event)
    assert seen == [
        ResponseStart(model="g"),
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="Hi"),
    ]
    error = caught.value
    assert (error.provider, error.model, error.status) == ("gemini", "g", 503)
    assert error.retryable and error.message not in str(error.as_log())


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_raw_error_split_anywhere_after_text(data: st.DataObject) -> None:
    raw_error = (
        '[{\n  "error": {\n    "code": 429,\n    "message": "Slow {down}",\n'
        '    "status": "RESOURCE_EXHAUSTED",\n    "details": [{"@type": '
        '"type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]\n  }\n}\n]\n'
    )
    raw = sse(chunk([{"text": "Hi"}]), raw_error)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12), label="cuts")
    seen: list[StreamEvent] = []
    with pytest.raises(RateLimitedError) as caught:
        for event in iter_split(raw, cuts):
            seen.append(event)
    assert caught.value.retry_after == 7.0
    assert seen[1:] == [
        BlockStart(index=0, block_type=StreamBlockType.TEXT),
        TextDelta(index=0, text="Hi"),
    ]


@pytest.mark.parametrize("framing", ["sse", "array"])
def test_an_error_chunk_in_either_framing(framing: str) -> None:
    error = google_error(500, "INTERNAL", "An internal error has occurred.")
    first = chunk([{"text": "Hi"}])
    data = sse(first, error) if framing == "sse" else array(first, error)
    decoder = GenerateStreamDecoder()
    seen: list[StreamEvent] = []
    with pytest.raises(ServerError) as caught:
        for event in decoder.feed(data):
            seen.append(event)
    assert type(caught.value) is ServerError and caught.value.status == 500
    assert [type(event) for event in seen] == [ResponseStart, BlockStart, TextDelta]


@pytest.mark.parametrize("framing", ["sse", "array"])
def test_a_stream_cut_inside_a_chunk_is_incomplete(framing: str) -> None:
    whole = chunk([{"text": "abc"}], finishReason="STOP")
    data = sse(whole) if framing == "sse" else array(whole)
    cut = data.index(b"abc") + 2
    with pytest.raises(IncompleteStreamError) as caught:
        decode_stream(data[:cut])
    assert caught.value.authored and caught.value.retryable


def test_a_raw_error_cut_off_is_incomplete() -> None:
    data = sse(chunk([{"text": "a"}]), '{\n  "error": {\n    "code": 500,\n')
    with pytest.raises(IncompleteStreamError):
        decode_stream(data)


def test_the_last_sse_chunk_without_its_blank_line_is_read() -> None:
    data = sse(chunk([{"text": "abc"}], finishReason="STOP")).rstrip(b"\r\n")
    assert collect(decode_stream(data)).text() == "abc"


def test_an_array_without_its_closing_bracket_is_read() -> None:
    data = array(chunk([{"text": "abc"}], finishReason="STOP"))[:-1]
    assert collect(decode_stream(data)).text() == "abc"


@pytest.mark.parametrize(
    "data",
    [
        b"data: {not json\r\n\r\n",
        b"data: 3\r\n\r\n",
        b"data: [[1]]\r\n\r\n",
        b'data: {"candidates": {}}\r\n\r\n',
        b'data: {"candidates": [{"content": {"parts": [{"text": 1}]}}]}\r\n\r\n',
        b"[1, 2]",
        b'[{"candidates": []}] x',
        b'[{"candidates": []} 3]',
    ],
)
def test_chunks_that_make_no_sense_are_decode_errors(data: bytes) -> None:
    with pytest.raises(StreamDecodeError) as caught:
        decode_stream(data)
    assert caught.value.authored


def test_whitespace_and_comments_say_nothing() -> None:
    assert decode_stream(b"") == []
    assert decode_stream(b"  \r\n ") == []
    data = b"\r\n: keep-alive\r\n\r\n" + sse(chunk([{"text": "a"}], finishReason="STOP"))
    assert collect(decode_stream(data)).text() == "a"
    assert collect(decode_stream(b"\n  " + array(chunk([], finishReason="STOP")))).content == ()


def test_an_escaped_lone_surrogate_in_a_stream_is_read() -> None:
    data = b'data: {"candidates": [{"content": {"parts": [{"text": "a\\ud83d"}]}}]}\r\n\r\n'
    events = decode_stream(data)
    assert TextDelta(index=0, text="a\ud83d") in events


# Any response, streamed in either framing and split anywhere, collects to what its body
# decodes to.

_json_leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_ids = st.text("abcdefXYZ0123456789_+/=", min_size=1, max_size=12)
_signature = st.none() | _ids


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    return part if signature is None else {**part, "thoughtSignature": signature}


_parts = st.one_of(
    st.builds(lambda t, s: _signed({"text": t}, s), st.text(max_size=12), _signature),
    st.builds(
        lambda t, s: _signed({"text": t, "thought": True}, s), st.text(max_size=12), _signature
    ),
    st.builds(
        lambda i, n, a, s: _signed(
            {"functionCall": {**({"id": i} if i else {}), "name": n, "args": a}}, s
        ),
        st.none() | _ids,
        _ids,
        st.dictionaries(st.text(max_size=5), _json, max_size=4),
        _signature,
    ),
    st.builds(
        lambda d, s: _signed({"inlineData": {"mimeType": "image/png", "data": d}}, s),
        _ids,
        _signature,
    ),
    st.builds(lambda c: {"executableCode": {"language": "PYTHON", "code": c}}, st.text(max_size=8)),
    st.builds(lambda s: {"thoughtSignature": s}, _ids),
)
_counts = st.fixed_dictionaries(
    {},
    optional={
        key: st.integers(0, 10**6)
        for key in (
            "promptTokenCount",
            "toolUsePromptTokenCount",
            "cachedContentTokenCount",
            "candidatesTokenCount",
            "thoughtsTokenCount",
            "totalTokenCount",
        )
    },
)


@dataclass
class Generated:
    body: dict[str, Any]
    chunks: list[dict[str, Any]] = field(default_factory=list)
    others: bool = False
    """Whether a chunk sent another candidate along (which the stream warns of)."""


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c for c in cuts if 0 < c < len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)] or [""]


@st.composite
def generated(draw: st.DrawFn) -> Generated:
    """A response body, and the chunks Gemini could stream it as: text split into pieces
    (a text's signature on its first piece, a thought's on its last), the pieces grouped
    into chunks, the finish and the final usage in the last chunk, some other candidate
    sent along, the prompt count reported early."""
    meta: dict[str, Any] = {}
    if draw(st.booleans()):
        meta["modelVersion"] = draw(st.sampled_from(["gemini-2.5-flash", "gemini-3-pro"]))
    if draw(st.booleans()):
        meta["responseId"] = draw(_ids)
    usage = draw(st.none() | _counts)
    if draw(st.integers(0, 9)) == 0:
        feedback = {"blockReason": draw(st.sampled_from(["SAFETY", "OTHER", "MODEL_ARMOR"]))}
        if draw(st.booleans()):
            feedback["blockReasonMessage"] = draw(st.text(min_size=1, max_size=10))
        body = {"promptFeedback": feedback, **meta}
        if usage is not None:
            body["usageMetadata"] = usage
        return Generated(body, [body])
    parts = draw(st.lists(_parts, max_size=7))
    finish = draw(
        st.sampled_from(
            ["STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", "OTHER", "NEW", None]
        )
    )
    tail: dict[str, Any] = {}
    if finish is not None:
        tail["finishReason"] = finish
        if draw(st.booleans()):
            tail["finishMessage"] = draw(st.text(max_size=10))
    body = {"candidates": [candidate(parts, **tail)], **meta}
    if usage is not None:
        body["usageMetadata"] = usage
    streamed: list[dict[str, Any]] = []
    for part in parts:
        text = part.get("text")
        if not isinstance(text, str):
            streamed.append(part)
            continue
        cuts = draw(st.lists(st.integers(0, len(text)), max_size=3))
        pieces = _pieces(text, cuts)
        signature = part.get("thoughtSignature")
        plain = {k: v for k, v in part.items() if k != "thoughtSignature"}
        for n, piece in enumerate(pieces):
            piece_part = {**plain, "text": piece}
            last = n == len(pieces) - 1
            if signature is not None and (last if part.get("thought") else n == 0):
                piece_part["thoughtSignature"] = signature
            streamed.append(piece_part)
    groups = draw(st.lists(st.integers(0, len(streamed)), max_size=4))
    bounds = [0, *sorted(set(groups)), len(streamed)]
    chunks: list[dict[str, Any]] = []
    other = candidate([{"text": "another candidate"}], index=1)
    others = False
    for a, b in itertools.pairwise(bounds):
        if a == b and chunks:
            continue
        cands = [candidate(streamed[a:b])]
        if draw(st.integers(0, 3)) == 0:
            cands.append(other)
            others = True
        piece_chunk: dict[str, Any] = {"candidates": cands, **meta}
        if usage and "promptTokenCount" in usage and draw(st.booleans()):
            piece_chunk["usageMetadata"] = {"promptTokenCount": usage["promptTokenCount"]}
        chunks.append(piece_chunk)
    chunks[-1]["candidates"][0].update(tail)
    if usage is not None:
        if draw(st.booleans()):
            chunks[-1]["usageMetadata"] = usage
        else:
            chunks.append({"usageMetadata": usage, **meta})
    return Generated(body, chunks, others)


def _collect_any(events: list[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish() if collector.finished else collector.partial_response()


@settings(max_examples=200, deadline=None)
@given(case=generated(), framing=st.sampled_from(["sse", "array"]), data=st.data())
def test_any_response_streamed_and_split_anywhere_collects_to_its_body(
    case: Generated, framing: str, data: st.DataObject
) -> None:
    ascii = data.draw(st.booleans(), label="ascii")
    raw = sse(*case.chunks, ascii=ascii) if framing == "sse" else array(*case.chunks, ascii=ascii)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=20), label="cuts")
    expected = decode(case.body)
    if expected.finish_reason is None and expected.usage is not None:
        # A stream without its finishing chunk was cut: its output count is unknown.
        unknown = {"output_tokens": None, "reasoning_tokens": None}
        expected = expected.model_copy(update={"usage": expected.usage.model_copy(update=unknown)})
    if case.others:
        # The other candidate the chunks sent along is not kept, and said so.
        expected = expected.model_copy(update={"warnings": (_streamed_others(2),)})
    events = feed_split(raw, cuts)
    assert _collect_any(events) == expected
    assert any(isinstance(event, Finish) for event in events) is (
        expected.finish_reason is not None
    )
    starts = [e.index for e in events if isinstance(e, BlockStart)]
    assert starts == list(range(len(expected.content)))


def test_one_byte_at_a_time() -> None:
    chunks = [
        chunk(MIXED_PARTS[:3], modelVersion="gemini-2.5-flash", responseId="resp_1"),
        chunk(MIXED_PARTS[3:], finishReason="STOP", usageMetadata=MIXED["usageMetadata"]),
    ]
    for raw in (sse(*chunks, ascii=False), array(*chunks, ascii=False)):
        assert collect(feed_split(raw, range(len(raw)))) == decode(MIXED)


def test_a_long_stream_is_read_in_linear_time() -> None:
    # 5,000 chunks of one text part each (half a megabyte), fed in 7-byte pieces: a
    # decoder that rescans what it buffered would take minutes here.
    parts = [chunk([{"text": 'x{y}\\"z'}]) for _ in range(5_000)]
    parts.append(chunk([], finishReason="STOP"))
    for raw in (sse(*parts), array(*parts)):
        result = collect(feed_split(raw, range(0, len(raw), 7)))
        assert result.text() == 'x{y}\\"z' * 5_000


# Replay of the recorded Gemini traffic

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))


@dataclass(frozen=True)
class Case:
    key: str
    data: dict[str, Any]

    @property
    def stream(self) -> bytes | None:
        raw = self.data.get("stream")
        return raw.encode() if isinstance(raw, str) else None

    @property
    def body(self) -> bytes:
        if self.data.get("response_body") is not None:
            return json.dumps(self.data["response_body"]).encode()
        return str(self.data.get("response_text") or "").encode()

    @property
    def is_error(self) -> bool:
        return int(self.data["status"]) >= 400 or "in_stream_error" in self.data.get("tags", [])


def _load() -> list[Case]:
    folder = CORPUS / "gemini"
    if not folder.is_dir():
        return []
    return [
        Case(f"gemini/{path.stem}", json.loads(path.read_text()))
        for path in sorted(folder.glob("*.json"))
    ]


CASES = _load()
RESPONSES = [c for c in CASES if not c.is_error and c.stream is None]
STREAMS = [c for c in CASES if not c.is_error and c.stream is not None]
ERRORS = [c for c in CASES if c.is_error]


def _keys(cases: list[Case]) -> list[str]:
    return [case.key for case in cases]


# Independent reading of the recordings

_NAMED = {"STOP": "stop", "MAX_TOKENS": "length"}
_FILTERS = {
    "SAFETY",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "RECITATION",
    "LANGUAGE",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "MODEL_ARMOR",
}


@dataclass
class Expected:
    text: str
    reasoning: str
    calls: list[tuple[str, str, Any]]
    """(id, name, arguments as a value)."""
    signatures: list[str]
    finish: str | None
    usage: Usage | None
    model: str | None
    id: str | None
    kept_parts: int
    blocked: bool


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: dict[str, Any] | None) -> Usage | None:
    """Gemini's counts, read again: zeros are omitted, and the total is all four added."""
    if raw is None:
        return None
    prompt, tool = _int(raw.get("promptTokenCount")), _int(raw.get("toolUsePromptTokenCount"))
    visible, thoughts = _int(raw.get("candidatesTokenCount")), _int(raw.get("thoughtsTokenCount"))
    total = _int(raw.get("totalTokenCount"))
    inputs = None if prompt is None and tool is None else (prompt or 0) + (tool or 0)
    outputs = None if visible is None and thoughts is None else (visible or 0) + (thoughts or 0)
    if inputs is None and outputs is not None and total is not None and total >= outputs:
        inputs = total - outputs
    if outputs is None and inputs is not None and total is not None and total >= inputs:
        outputs = total - inputs
    return Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        reasoning_tokens=thoughts,
        cache_read_tokens=_int(raw.get("cachedContentTokenCount")),
    )


def _main_candidate(body: dict[str, Any], *, first_listed: bool) -> dict[str, Any] | None:
    candidates = body.get("candidates") or []
    for cand in candidates:
        if (cand.get("index") or 0) == 0:
            return dict(cand)
    return dict(candidates[0]) if candidates and first_listed else None


def _expected(
    parts: list[dict[str, Any]],
    finish: str | None,
    usage: Usage | None,
    first: dict[str, Any],
    blocked: bool,
) -> Expected:
    calls = [p["functionCall"] for p in parts if "functionCall" in p]
    texts = [p for p in parts if "functionCall" not in p and isinstance(p.get("text"), str)]
    if blocked:
        reason: str | None = "content_filter"
    elif finish in _FILTERS:
        reason = "content_filter"
    elif finish == "STOP" and calls:
        reason = "tool_calls"
    elif finish and finish != "FINISH_REASON_UNSPECIFIED":
        reason = _NAMED.get(finish, finish.lower())
    else:
        reason = None
    known = ("functionCall", "text", "thoughtSignature", "thought")
    return Expected(
        "".join(p["text"] for p in texts if not p.get("thought")),
        "".join(p["text"] for p in texts if p.get("thought")),
        [
            (call.get("id") or f"call_{n}", call["name"], call.get("args", {}))
            for n, call in enumerate(calls)
        ],
        [p["thoughtSignature"] for p in parts if p.get("thoughtSignature")],
        reason,
        usage,
        first.get("modelVersion"),
        first.get("responseId"),
        sum(1 for p in parts if not any(key in p for key in known)),
        blocked,
    )


def expected_response(case: Case) -> Expected:
    body = case.data["response_body"]
    cand = _main_candidate(body, first_listed=True)
    parts = ((cand or {}).get("content") or {}).get("parts") or []
    blocked = cand is None and bool((body.get("promptFeedback") or {}).get("blockReason"))
    finish = (cand or {}).get("finishReason")
    return _expected(parts, finish, _usage(body.get("usageMetadata")), body, blocked)


def _sse_data(stream: str) -> list[str]:
    """The data of each server-sent event: `data:` lines joined, events split at blank lines."""
    events: list[str] = []
    data: list[str] = []
    for line in [*stream.splitlines(), ""]:
        if not line:
            if data:
                events.append("\n".join(data))
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    return events


def stream_chunks(stream: str) -> list[dict[str, Any]]:
    """The chunks of a recorded stream, whichever its framing."""
    if stream.lstrip().startswith("["):
        chunks: list[dict[str, Any]] = json.loads(stream)
        return chunks
    return [json.loads(data) for data in _sse_data(stream)]


def expected_stream(case: Case) -> Expected:
    """The response a recorded stream adds up to: the parts of candidate 0 in order, the
    last finish reason, each usage count as last reported, the first chunk's model and id."""
    assert case.stream is not None
    chunks = stream_chunks(case.stream.decode())
    parts: list[dict[str, Any]] = []
    finish: str | None = None
    usage: Usage | None = None
    blocked = False
    for piece in chunks:
        cand = _main_candidate(piece, first_listed=False)
        if cand is not None:
            parts.extend((cand.get("content") or {}).get("parts") or [])
            finish = cand.get("finishReason") or finish
        elif (piece.get("promptFeedback") or {}).get("blockReason"):
            blocked = True
        if piece.get("usageMetadata") is not None:
            reported = _usage(piece["usageMetadata"])
            assert reported is not None
            usage = (
                reported
                if usage is None
                else usage.model_copy(update=reported.model_dump(exclude_none=True))
            )
    return _expected(parts, finish, usage, chunks[0] if chunks else {}, blocked)


def check(result: ChatResponse, expected: Expected) -> None:
    assert (result.text() or "") == expected.text
    assert (result.reasoning() or "") == expected.reasoning
    calls = result.tool_calls()
    assert [(c.id, c.name, c.parsed_arguments()) for c in calls] == expected.calls
    signatures = [b.signature for b in result.content if isinstance(b, Reasoning) and b.signature]
    assert signatures == expected.signatures
    assert result.finish_reason == expected.finish
    assert result.usage == expected.usage
    assert result.model == expected.model
    assert result.id == expected.id
    kept = result.provider_value("gemini", "parts")
    assert (len(kept) if isinstance(kept, list) else 0) == expected.kept_parts
    if expected.blocked or expected.finish == "content_filter":
        assert result.provider_data["gemini"]
    if expected.blocked:
        assert result.decline_explanation()
        assert result.content == ()


def test_the_harness_reads_a_stream_as_its_response() -> None:
    """The independent reading of a stream agrees with its reading of the same response,
    so that the harness and the adapter cannot agree on a wrong reading."""
    chunks = [
        chunk(MIXED_PARTS[:3], modelVersion="gemini-2.5-flash", responseId="resp_1"),
        chunk(MIXED_PARTS[3:], finishReason="STOP", usageMetadata=MIXED["usageMetadata"]),
    ]
    for raw in (sse(*chunks), array(*chunks)):
        synthetic = Case("synthetic", {"status": 200, "stream": raw.decode()})
        from_body = expected_response(Case("body", {"status": 200, "response_body": MIXED}))
        assert expected_stream(synthetic) == from_body
        assert from_body.usage == Usage(
            input_tokens=107, output_tokens=50, reasoning_tokens=30, cache_read_tokens=60
        )
        check(collect(decode_stream(raw)), from_body)


def test_the_corpus_has_every_kind_of_case() -> None:
    if not CASES:
        pytest.skip(f"no Gemini cases under {CORPUS}")
    assert RESPONSES and STREAMS and ERRORS


@pytest.mark.parametrize("case", RESPONSES, ids=_keys(RESPONSES))
def test_recorded_response_decodes(case: Case) -> None:
    result = decode_response(
        case.data["status"],
        case.data.get("response_headers") or {},
        case.body,
        provider="gemini",
    )
    check(result, expected_response(case))
    assert result.provider == "gemini"


def _decode_whole(case: Case) -> ChatResponse:
    assert case.stream is not None
    return collect(decode_stream(case.stream, provider="gemini"))


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
def test_recorded_stream_decodes(case: Case) -> None:
    check(_decode_whole(case), expected_stream(case))


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
def test_recorded_stream_reframed_as_an_array(case: Case) -> None:
    assert case.stream is not None
    chunks = stream_chunks(case.stream.decode())
    reframed = collect(decode_stream(array(*chunks, ascii=False)))
    assert reframed == _decode_whole(case)


@pytest.mark.parametrize("case", STREAMS, ids=_keys(STREAMS))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_recorded_stream_any_chunking(case: Case, data: st.DataObject) -> None:
    assert case.stream is not None
    raw = case.stream
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=30), label="cuts")
    result = collect(feed_split(raw, cuts, provider="gemini"))
    assert result == _decode_whole(case)
    check(result, expected_stream(case))


def test_recorded_prompt_block_keeps_its_message() -> None:
    by_key = {case.key: case for case in CASES}
    case = by_key.get("gemini/vertex_prompt_blocked_model_armor")
    if case is None:
        pytest.skip(f"the Vertex prompt-block case is not in {CORPUS}")
    feedback = case.data["response_body"]["promptFeedback"]
    result = decode_response(200, {}, case.body)
    assert result.decline_explanation() == feedback["blockReasonMessage"]
    assert result.provider_value("gemini", "block_reason") == feedback["blockReason"]


def _error_payload(case: Case) -> dict[str, Any]:
    if case.stream is not None and int(case.data["status"]) < 400:
        text = case.stream.decode()
        start = text.index('{\n  "error"') if '{\n  "error"' in text else text.rindex('{"error"')
        payload: dict[str, Any] = json.JSONDecoder().raw_decode(text[start:])[0]
        return payload
    body = case.data.get("response_body")
    if isinstance(body, list) and body:
        body = body[0]
    return body if isinstance(body, dict) else {}


def _rpc_details(error: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [d for d in error.get("details") or [] if d.get("@type", "").endswith(f".{kind}")]


def expected_error(case: Case) -> tuple[type[Error], float | None]:
    """The class a recorded error stands for and the wait it asks for, from its tags, its
    google.rpc status and details alone."""
    tags = set(case.data.get("tags", []))
    error = _error_payload(case).get("error") or {}
    reasons = {d.get("reason") for d in _rpc_details(error, "ErrorInfo")}
    quota_ids = [
        str(v.get("quotaId", "")) + str(v.get("quotaMetric", ""))
        for failure in _rpc_details(error, "QuotaFailure")
        for v in failure.get("violations") or []
    ]
    delays = [d.get("retryDelay") for d in _rpc_details(error, "RetryInfo")]
    wait = float(delays[0].rstrip("s")) if delays else None
    name = error.get("status")
    if "API_KEY_INVALID" in reasons or "auth_error" in tags:
        return AuthenticationError, None
    if "invalid_schema" in tags:
        return UnsupportedError, None
    if "context_length" in tags and name != "RESOURCE_EXHAUSTED":
        return ContextWindowExceededError, None
    if name == "RESOURCE_EXHAUSTED" or case.data["status"] == 429:
        if any("PerDay" in q or "per_day" in q for q in quota_ids):
            return QuotaExceededError, None
        return RateLimitedError, wait
    by_name: dict[str, type[Error]] = {
        "INVALID_ARGUMENT": InvalidRequestError,
        "FAILED_PRECONDITION": InvalidRequestError,
        "UNAUTHENTICATED": AuthenticationError,
        "PERMISSION_DENIED": PermissionDeniedError,
        "NOT_FOUND": NotFoundError,
        "INTERNAL": ServerError,
        "UNAVAILABLE": OverloadedError,
        "DEADLINE_EXCEEDED": ServerError,
        "CANCELLED": ServerError,
    }
    if name in by_name:
        return by_name[name], None
    status = int(error.get("code") or case.data["status"])
    return (ServerError if status >= 500 else InvalidRequestError), None


@pytest.mark.parametrize("case", ERRORS, ids=_keys(ERRORS))
def test_recorded_error_maps_to_its_class(case: Case) -> None:
    with pytest.raises(Error) as caught:
        if case.stream is not None and case.data["status"] < 400:
            decode_stream(case.stream, provider="gemini")
        else:
            decode_response(
                case.data["status"],
                case.data.get("response_headers") or {},
                case.body,
                provider="gemini",
            )
    error = caught.value
    cls, wait = expected_error(case)
    assert type(error) is cls
    assert error.provider == "gemini"
    if case.data["status"] >= 400:
        assert error.status == case.data["status"]
    assert error.retry_after == wait
    assert not error.authored
    assert error.message not in str(error.as_log()) and error.message not in repr(error)


def test_a_request_larger_than_its_per_minute_token_quota_is_not_retried() -> None:
    import asyncio

    import httpx2

    import allama
    from allama.transport import Transport
    from allama.types import ChatRequest

    body = json.dumps(per_minute_quota(rpc("RetryInfo", retryDelay="48s"))).encode()
    calls: list[int] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(1)
        return httpx2.Response(429, content=body, headers={"content-type": "application/json"})

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    provider = allama.provider("gemini", api_key="k", transport=transport)
    # A prompt of about 1.1 million tokens against a quota of a million a minute: no wait
    # lets it through. A short one waits its turn, as any rate limit.
    large = ChatRequest("gemini-2.5-flash").user("word " * 900_000)
    small = ChatRequest("gemini-2.5-flash").user("a short prompt")
    for request, retryable in ((large, False), (small, True)):
        with pytest.raises(RateLimitedError) as caught:
            provider.chat(request)
        # No wait lets the large one through: none is kept for it.
        wait = 48.0 if retryable else None
        assert (caught.value.retryable, caught.value.retry_after) == (retryable, wait)

        async def call(request: ChatRequest = request) -> None:
            await provider.achat(request)

        with pytest.raises(RateLimitedError) as caught:
            asyncio.run(call())
        assert caught.value.retryable is retryable
    assert len(calls) == 4
    # A batch run fails the large input at once, and does not slow the others for it.
    run = allama.batch(provider, dict, [large], request=lambda request: request)
    (result,) = list(run)
    assert result.failure is not None and result.failure.kind == "rate_limited"
    assert (result.attempts, run.summary.slowdowns, len(calls)) == (1, 0, 5)


@pytest.mark.parametrize("value", ["\u00b2", "\u0661\u0660\u0660", "9" * 5000, "1e6", " 100"])
def test_a_quota_value_that_is_no_plain_number_is_a_plain_rate_limit(value: str) -> None:
    body = per_minute_quota(rpc("RetryInfo", retryDelay="48s"))
    body["error"]["details"][0]["violations"][0]["quotaValue"] = value
    error = error_of(429, body)
    assert type(error) is RateLimitedError and error.retryable
    assert "allama.quota_tokens_per_minute" not in error.context.metadata
