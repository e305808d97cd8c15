"""A forced tool on a Claude model that cannot be forced to call one is noted in the record.

Opus and Sonnet 5.5, Fable and Mythos take no forced `tool_choice`: the adapter offers the
extraction tool with `{"type": "auto"}` and a warning on `tool_choice`. The record keeps that
warning in `notes` (the model may answer without calling the tool), and the enforcement
stays the tool's: a strict tool the model calls still holds its arguments to the schema.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMode, Extractor, SchemaEnforcement
from allama.extract import ExtractionMetadata, MissingToolCallError
from allama.extract._errors import EXTRACTION_TOOL
from allama.transport import Transport
from allama.types import RequestField, UnsupportedPolicy, WarningKind

KEY = "sk-ant-test-1234"
UNFORCEABLE = (
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-fable-1",
    "claude-mythos-1",
)
MAP = (
    "the schema of `Tally` is not strict-representable: the subschema at `Tally.counts` is a "
    "map, which Anthropic strict mode cannot enforce; it goes without `strict`"
)


def _not_forced(model: str) -> str:
    return f"`{model}` on Anthropic cannot be forced to call a tool; `auto` was sent instead"


class City(BaseModel):
    city: str
    population: int


class Tally(BaseModel):
    counts: dict[str, int]


def _message(model: str, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _called(model: str, value: dict[str, Any]) -> dict[str, Any]:
    call = {"type": "tool_use", "id": "toolu_1", "name": EXTRACTION_TOOL, "input": value}
    return _message(model, [call], "tool_use")


def _streamed_call(model: str, value: dict[str, Any]) -> bytes:
    start = _message(model, [], "tool_use") | {"stop_reason": None}
    call = {"type": "tool_use", "id": "toolu_1", "name": EXTRACTION_TOOL, "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": call},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps(value)},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


class _Server:
    def __init__(self, answer: dict[str, Any] | bytes) -> None:
        self.answer = answer
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(json.loads(request.content))
        if isinstance(self.answer, bytes):
            headers = {"content-type": "text/event-stream"}
            return httpx2.Response(200, content=self.answer, headers=headers)
        return httpx2.Response(200, json=self.answer)

    def provider(self) -> allama.ChatProvider:
        transport = Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )
        return allama.provider("anthropic", api_key=KEY, transport=transport)


def _figures(record: Any) -> tuple[Any, ...]:
    return _counted(record), [w.message for w in record.notes]


def _counted(record: Any) -> tuple[Any, ...]:
    return record.mode, record.enforcement, [w.message for w in record.degradations]


@pytest.mark.parametrize("model", UNFORCEABLE)
def test_a_forced_tool_offered_not_forced_is_noted_and_stays_exact(model: str) -> None:
    server = _Server(_called(model, {"city": "Paris", "population": 2}))
    request = ChatRequest(model).user("Paris, 2.").with_option(ExtractionMode.FORCED_TOOL)
    extracted = allama.extract(server.provider(), City, request)
    assert extracted.value == City(city="Paris", population=2)
    record = extracted.metadata
    # The strict tool was called: its arguments were held to the schema.
    assert _counted(record) == (ExtractionMode.FORCED_TOOL, SchemaEnforcement.EXACT, [])
    assert [w.message for w in record.notes] == [_not_forced(model)]
    assert record.notes[0].kind is WarningKind.UNSUPPORTED
    assert record.notes[0].is_about(RequestField.TOOL_CHOICE)
    assert server.sent[0]["tool_choice"] == {"type": "auto"}
    assert [tool["strict"] for tool in server.sent[0]["tools"]] == [True]
    assert "notes=1" in repr(record)
    # The plan's figures are the call's.
    assert _figures(Extractor().plan(server.provider(), City, request)) == _figures(record)


def test_the_tool_left_uncalled_fails_with_the_note_in_its_record() -> None:
    model = "claude-opus-5-5"
    server = _Server(_message(model, [{"type": "text", "text": "Paris has 2."}], "end_turn"))
    request = ChatRequest(model).user("Paris, 2.").with_option(ExtractionMode.FORCED_TOOL)
    with pytest.raises(MissingToolCallError) as caught:
        allama.extract(server.provider(), City, request)
    record = ExtractionMetadata.from_error(caught.value)
    assert record is not None and record.passes == 1
    assert [w.message for w in record.notes] == [_not_forced(model)]
    # The JSON form keeps it, and reads back (a newer version's keys left out).
    written = record.to_json_dict()
    assert [note["message"] for note in written["notes"]] == [_not_forced(model)]
    written["notes"][0]["added_later"] = 1
    assert ExtractionMetadata.from_json_dict(written) == record


def test_auto_falls_back_to_the_offered_tool_for_a_map_and_notes_it() -> None:
    model = "claude-sonnet-5-5"
    server = _Server(_called(model, {"counts": {"a": 1}}))
    request = ChatRequest(model).user("a once.")
    extracted = allama.extract(server.provider(), Tally, request)
    assert extracted.value == Tally(counts={"a": 1})
    record = extracted.metadata
    assert record.auto_fallback is not None
    assert record.auto_fallback.field is RequestField.RESPONSE_FORMAT
    assert _counted(record) == (ExtractionMode.FORCED_TOOL, SchemaEnforcement.NOT_ENFORCED, [MAP])
    assert [w.message for w in record.notes] == [_not_forced(model)]
    assert server.sent[0]["tool_choice"] == {"type": "auto"}
    assert _figures(Extractor().plan(server.provider(), Tally, request)) == _figures(record)


def test_a_streamed_forced_tool_offered_not_forced_is_noted() -> None:
    model = "claude-mythos-1"
    server = _Server(_streamed_call(model, {"city": "Paris", "population": 2}))
    request = ChatRequest(model).user("Paris, 2.").with_option(ExtractionMode.FORCED_TOOL)
    with allama.extract_stream(server.provider(), City, request) as stream:
        for _ in stream:
            pass
        extracted = stream.finish()
    assert extracted.value == City(city="Paris", population=2)
    assert server.sent[0]["stream"] is True and server.sent[0]["tool_choice"] == {"type": "auto"}
    record = extracted.metadata
    assert _counted(record) == (ExtractionMode.FORCED_TOOL, SchemaEnforcement.EXACT, [])
    assert [w.message for w in record.notes] == [_not_forced(model)]


def test_a_model_that_can_be_forced_has_no_notes() -> None:
    model = "claude-sonnet-4-5"
    server = _Server(_called(model, {"city": "Paris", "population": 2}))
    request = ChatRequest(model).user("Paris, 2.").with_option(ExtractionMode.FORCED_TOOL)
    record = allama.extract(server.provider(), City, request).metadata
    assert server.sent[0]["tool_choice"] == {
        "type": "tool",
        "name": EXTRACTION_TOOL,
        "disable_parallel_tool_use": True,
    }
    assert (record.enforcement, record.degradations, record.notes) == (
        SchemaEnforcement.EXACT,
        [],
        [],
    )
    assert "notes" not in record.to_json_dict()


def test_the_error_policy_still_refuses_the_unforced_tool_before_sending() -> None:
    model = "claude-opus-5-5"
    server = _Server(_called(model, {"city": "Paris", "population": 2}))
    request = (
        ChatRequest(model)
        .user("Paris, 2.")
        .with_option(ExtractionMode.FORCED_TOOL)
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(allama.UnsupportedError) as caught:
        allama.extract(server.provider(), City, request)
    assert caught.value.field is RequestField.TOOL_CHOICE
    assert server.sent == []
