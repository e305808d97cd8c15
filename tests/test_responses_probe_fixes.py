"""Responses API fixes from a probe of the OpenAI family:

1. xAI's Grok 4 reasoning models reason (their reasoning comes back encrypted through the
   Responses API's `include`) though they take no reasoning effort: the encrypted reasoning
   is asked for and goes back on the next turn of a tool loop, and an effort is still
   refused. A `-non-reasoning` id does not reason.
2. xAI refuses `instructions` beside `previous_response_id`: the opening system messages go
   as a `system` input item there, and as `instructions` everywhere else.
3. Forcing a `custom` tool (given through the body option) by name uses the custom tool
   choice, in the Responses API and in Chat Completions.
4. A streamed call announced without its `call_id` or `name` (M365-Copilot2API's), whose
   finished item or the terminal response names it, starts with those: its block's start
   and arguments (and what comes after them) wait till then, so the collected stream is
   what the body gives, split anywhere, and a streamed forced-tool extraction finds it.
5. `json_object` to OpenAI needs an input message that says "json" (`instructions` do not
   count): allama's note for the mode goes as a `developer` message first in the input
   where no input message says it, and its warning says so (naming `instructions` only
   where the request has some).
6. Reasoning items are left out, with a warning, for a model whose family does not reason
   (OpenAI answers 400 to them); a model nobody knows (an Azure deployment) still gets them.
7. An Azure deployment taken for a reasoning model (named for none, asked for an effort)
   is asked for no log-probabilities at an effort other than `none`, as for no sampling.
8. A `call_id` past the spec's 64 characters goes as one made from it, its results with it.
9. A paused Anthropic turn's server tool blocks, left out, are said to be.
10. A schema sent in words to a family with JSON mode alone: its refusal says where the
    words went (first in the input, or into the instructions).
11. A reasoning effort asks for no reasoning summary (OpenAI answers 400 to one from an
    organization it has not verified); the body option asks for one beside the effort.
12. xAI's grok-code-fast reasons, as Grok 4 does, and takes no effort: its encrypted
    reasoning is asked for and goes back on the next turn.
13. A stray stream event (an empty delta after its item finished, a part added before its
    item) is passed over, so the completed response and its usage are read; a stray one
    with text is raised after the terminal event's usage, as disagreeing deltas are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import allama
from _recording import provider
from _responses_support import sse, stream_of
from allama import ChatRequest, ExtractionMode, Extractor
from allama._degradations import Degradations
from allama.adapters.openai_responses._decode import decode_object
from allama.adapters.openai_responses._encode import encode_request
from allama.adapters.openai_responses._sse import ResponsesStreamDecoder, decode_stream
from allama.errors import InvalidRequestError, StreamDecodeError, UnsupportedError
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    BlockStart,
    BlockStop,
    CapabilitySupport,
    ChatCapability,
    ChatResponse,
    FieldSubject,
    Finish,
    FinishReason,
    Reasoning,
    ReasoningEffort,
    RequestField,
    ResponseFormat,
    ResponseStart,
    StreamBlockType,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    UsageEvent,
)

S = CapabilitySupport.SUPPORTED
N = CapabilitySupport.UNSUPPORTED
WEATHER = ToolDefinition(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
USAGE = {
    "input_tokens": 10,
    "output_tokens": 50,
    "output_tokens_details": {"reasoning_tokens": 40},
    "total_tokens": 60,
}
REASONING_ITEM = {
    "id": "rs_x1",
    "type": "reasoning",
    "summary": [],
    "encrypted_content": "ENCRYPTED-BY-XAI",
    "status": "completed",
}
CALL_ITEM = {
    "id": "fc_x1",
    "type": "function_call",
    "call_id": "call-1",
    "name": "get_weather",
    "arguments": '{"city":"Paris"}',
    "status": "completed",
}
ANSWER_ITEM = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
}
GROK_4_REASONING = (
    "grok-4",
    "grok-4-0709",
    "grok-4-fast-reasoning",
    "grok-4-1-fast-reasoning",
    "grok-4.20-reasoning",
)
GROK_4_NON_REASONING = ("grok-4-fast-non-reasoning", "grok-4-1-fast-non-reasoning")


def answer(model: str, *output: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": model,
        "store": False,
        "output": list(output),
        "usage": USAGE,
    }
    return 200, body


def prepared(preset: str, request: ChatRequest, **options: Any) -> tuple[dict[str, Any], list[Any]]:
    target = allama.provider(preset, api_key="sk-test-probe-fixes-1234", **options)
    http, warnings = target._prepare(request, stream=False)
    return http.body, list(warnings)


# 1. Grok 4 reasons, and takes no effort


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_grok_4_reasoning_models_reason_and_non_reasoning_ones_do_not(api: str) -> None:
    xai = allama.provider("xai", api=api, api_key="xai-test-123456")
    # grok-code-fast reasons too (section 12): it was taken for a model that does not.
    for model in (*GROK_4_REASONING, "grok-4.3", "grok-3-mini", "grok-code-fast-1"):
        assert xai.chat_capability(model, ChatCapability.REASONING) is S, model
    for model in (*GROK_4_NON_REASONING, "grok-3"):
        assert xai.chat_capability(model, ChatCapability.REASONING) is N, model


@pytest.mark.parametrize("model", GROK_4_REASONING)
def test_grok_4_reasoning_goes_back_on_the_next_turn_of_a_tool_loop(model: str) -> None:
    xai, sent = provider(
        "xai",
        answer(model, REASONING_ITEM, CALL_ITEM),
        answer(model, ANSWER_ITEM),
        api="responses",
    )
    request = ChatRequest(model).user("Weather in Paris?").with_tools([WEATHER])
    first = xai.chat(request)
    [call] = [block for block in first.content if isinstance(block, ToolCall)]
    second = xai.chat(request.push(first.to_assistant_message()).tool_result(call, "sunny"))
    assert sent.bodies[0]["include"] == ["reasoning.encrypted_content"]
    assert "reasoning" not in sent.bodies[0]  # no effort is sent
    assert sent.bodies[1]["input"][1:3] == [
        {
            "type": "reasoning",
            "id": "rs_x1",
            "summary": [],
            "encrypted_content": "ENCRYPTED-BY-XAI",
        },
        {
            "type": "function_call",
            "call_id": "call-1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
    ]
    assert (first.warnings, second.warnings) == ((), ())
    assert second.text() == "Sunny."


@pytest.mark.parametrize("model", GROK_4_NON_REASONING)
def test_a_non_reasoning_grok_4_is_not_asked_for_encrypted_reasoning(model: str) -> None:
    body, warnings = prepared("xai", ChatRequest(model).user("Hi"), api="responses")
    assert ("include" in body, warnings) == (False, [])


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    "effort", [ReasoningEffort.NONE, ReasoningEffort.LOW, ReasoningEffort.HIGH]
)
def test_an_effort_to_a_grok_4_is_still_refused(api: str, effort: ReasoningEffort) -> None:
    # `none` too: the model reasons whatever is asked.
    request = ChatRequest("grok-4-1-fast-reasoning").user("Hi").with_reasoning_effort(effort)
    body, warnings = prepared("xai", request, api=api)
    assert ("reasoning" in body, "reasoning_effort" in body) == (False, False)
    [warning] = warnings
    assert warning.is_about(RequestField.REASONING_EFFORT)
    assert warning.message == (
        f"`grok-4-1-fast-reasoning` on xAI takes no reasoning effort `{effort.value}`"
    )
    strict = request.with_unsupported_policy(UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError) as caught:
        prepared("xai", strict, api=api)
    assert caught.value.field is RequestField.REASONING_EFFORT


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_efforts_elsewhere_on_xai_go_as_before(api: str) -> None:
    high = ChatRequest("grok-3-mini").user("Hi").with_reasoning_effort(ReasoningEffort.HIGH)
    body, warnings = prepared("xai", high, api=api)
    sent = body["reasoning"]["effort"] if api == "responses" else body["reasoning_effort"]
    assert (sent, warnings) == ("high", [])
    body, warnings = prepared("xai", high.model_copy(update={"model": "grok-4.3"}), api=api)
    sent = body["reasoning"]["effort"] if api == "responses" else body["reasoning_effort"]
    assert (sent, warnings) == ("high", [])
    # A model that never reasons, asked not to: nothing goes, nothing is said.
    none = ChatRequest("grok-4-fast-non-reasoning").user("Hi")
    body, warnings = prepared("xai", none.with_reasoning_effort(ReasoningEffort.NONE), api=api)
    assert ("reasoning" in body, "reasoning_effort" in body, warnings) == (False, False, [])


# 2. xAI: no `instructions` beside `previous_response_id`


def test_xai_sends_the_instructions_as_a_system_item_beside_a_previous_response() -> None:
    request = (
        ChatRequest("grok-4.3")
        .system("Answer briefly.")
        .system("In English.")
        .user("And in Berlin?")
        .with_option_json("openai_responses", {"previous_response_id": "resp_prev", "store": True})
    )
    body, warnings = prepared("xai", request, api="responses")
    assert "instructions" not in body
    assert body["previous_response_id"] == "resp_prev"
    assert body["input"] == [
        {"role": "system", "content": "Answer briefly.\n\nIn English."},
        {"role": "user", "content": "And in Berlin?"},
    ]
    assert warnings == []


def test_instructions_stay_instructions_without_a_previous_response_or_off_xai() -> None:
    request = ChatRequest("grok-4.3").system("Answer briefly.").user("Hi")
    body, _ = prepared("xai", request, api="responses")
    assert (body["instructions"], body["input"]) == (
        "Answer briefly.",
        [{"role": "user", "content": "Hi"}],
    )
    # OpenAI takes both together.
    previous = request.model_copy(update={"model": "gpt-5"}).with_option_json(
        "openai_responses", {"previous_response_id": "resp_prev"}
    )
    body, _ = prepared("openai", previous, api="responses")
    assert (body["instructions"], body["previous_response_id"]) == ("Answer briefly.", "resp_prev")
    assert body["input"] == [{"role": "user", "content": "Hi"}]


# 3. Forcing a custom tool


def test_responses_forces_a_custom_tool_with_the_custom_choice() -> None:
    tools = {"tools": [{"type": "custom", "name": "sql", "description": "Runs SQL"}]}
    request = (
        ChatRequest("gpt-5")
        .user("Write a SQL query for all users")
        .with_option_json("openai_responses", tools)
        .with_tool_choice(ToolChoice.tool("sql"))
    )
    body, warnings = prepared("openai", request, api="responses")
    assert body["tool_choice"] == {"type": "custom", "name": "sql"}
    assert warnings == []
    # A function tool is still forced as a function.
    functions = request.with_tools([WEATHER]).with_tool_choice(ToolChoice.tool("get_weather"))
    body, warnings = prepared("openai", functions, api="responses")
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert warnings == []


def test_chat_completions_forces_a_custom_tool_with_the_custom_choice() -> None:
    tools = {"tools": [{"type": "custom", "custom": {"name": "sql", "description": "Runs SQL"}}]}
    request = (
        ChatRequest("gpt-5")
        .user("Write a SQL query for all users")
        .with_option_json("openai_compat", tools)
        .with_tool_choice(ToolChoice.tool("sql"))
    )
    body, warnings = prepared("openai", request)
    assert body["tool_choice"] == {"type": "custom", "custom": {"name": "sql"}}
    assert warnings == []
    functions = request.with_tools([WEATHER]).with_tool_choice(ToolChoice.tool("get_weather"))
    body, warnings = prepared("openai", functions)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert warnings == []


# 4. A streamed call named only when it finishes

START = {"id": "resp_1", "object": "response", "status": "in_progress", "model": "m"}
NAMED = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_XYZ",
    "name": "get_weather",
    "arguments": '{"city":"Paris"}',
    "status": "completed",
}
ENDED_USAGE = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}


def terminal(*output: dict[str, Any]) -> dict[str, Any]:
    return {**START, "status": "completed", "output": list(output), "usage": ENDED_USAGE}


def call_stream(
    added: dict[str, Any], done: dict[str, Any] = NAMED, final: dict[str, Any] = NAMED
) -> bytes:
    """A function call announced as `added`, its arguments in two deltas, finished as
    `done`, and the terminal response holding `final`."""
    at = {"item_id": "fc_1", "output_index": 0}
    return sse(
        {"type": "response.created", "response": {**START, "output": [], "usage": None}},
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {"type": "response.function_call_arguments.delta", **at, "delta": '{"city":'},
        {"type": "response.function_call_arguments.delta", **at, "delta": '"Paris"}'},
        {"type": "response.function_call_arguments.done", **at, "arguments": NAMED["arguments"]},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": terminal(final)},
    )


def announced(**fields: Any) -> dict[str, Any]:
    """The call as announced: no arguments yet, and `fields` (a `None` leaves one out)."""
    item = {**NAMED, "status": "in_progress", "arguments": "", **fields}
    return {key: value for key, value in item.items() if value is not None}


def collect(events: list[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def feed_split(data: bytes, cuts: list[int]) -> list[StreamEvent]:
    decoder = ResponsesStreamDecoder(provider="p", model="m")
    events: list[StreamEvent] = []
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        events.extend(decoder.feed(data[last:cut]))
        last = cut
    events.extend(decoder.close())
    return events


NAMED_EVENTS = [
    ResponseStart(id="resp_1", model="m"),
    BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="call_XYZ", name="get_weather"),
    ToolCallDelta(index=0, arguments='{"city":'),
    ToolCallDelta(index=0, arguments='"Paris"}'),
    BlockStop(index=0),
    UsageEvent(usage=allama.Usage(input_tokens=3, output_tokens=2)),
    Finish(finish_reason=FinishReason.TOOL_CALLS),
]


@pytest.mark.parametrize(
    "fields",
    [
        {"call_id": "", "name": ""},
        {"call_id": None, "name": None},
        {"call_id": ""},
        {"name": None},
    ],
    ids=["both-empty", "both-missing", "no-call-id", "no-name"],
)
def test_a_call_named_when_it_finishes_streams_with_its_name(fields: dict[str, Any]) -> None:
    """The M365-Copilot2API shape: the block starts, once, with the finished item's
    `call_id` and `name`, before its arguments; the events are those of a call announced
    whole, and the collected stream is the body's."""
    data = call_stream(announced(**fields))
    events = decode_stream(data, provider="p", model="m")
    assert events == NAMED_EVENTS
    assert collect(events) == decode_object(terminal(NAMED), model="m")
    assert collect(feed_split(data, list(range(len(data))))) == collect(events)


def test_a_call_named_only_by_the_terminal_response_waits_for_it() -> None:
    nameless = announced(call_id="", name="")
    data = call_stream(nameless, done={**NAMED, "call_id": "", "name": ""})
    assert decode_stream(data, provider="p", model="m") == NAMED_EVENTS


def test_a_call_announced_whole_starts_at_once() -> None:
    """The fast path: the start and the arguments come as they stream; a call that waits
    for its name gives nothing before its `done`."""
    for added, before_done in ((announced(), NAMED_EVENTS[:4]), (announced(name=""), [])):
        data = call_stream(added)
        head = data[: data.index(b"event: response.function_call_arguments.done")]
        decoder = ResponsesStreamDecoder(provider="p", model="m")
        assert list(decoder.feed(head)) == [NAMED_EVENTS[0], *before_done[1:]]


def test_what_comes_after_a_call_waiting_for_its_name_keeps_its_order() -> None:
    """A message streamed while the call before it waits: its block starts after the
    call's, with the index the body gives it."""
    message_item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
    }
    at = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    data = sse(
        {"type": "response.created", "response": {**START, "output": [], "usage": None}},
        {"type": "response.output_item.added", "output_index": 0, "item": announced(name="")},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**message_item, "status": "in_progress", "content": []},
        },
        {"type": "response.output_text.delta", **at, "delta": "Done."},
        {"type": "response.output_item.done", "output_index": 1, "item": message_item},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": NAMED["arguments"],
        },
        {"type": "response.output_item.done", "output_index": 0, "item": NAMED},
        {"type": "response.completed", "response": terminal(NAMED, message_item)},
    )
    events = decode_stream(data, provider="p", model="m")
    starts = [event for event in events if isinstance(event, BlockStart)]
    assert starts == [
        NAMED_EVENTS[1],
        BlockStart(index=1, block_type=StreamBlockType.TEXT),
    ]
    assert collect(events) == decode_object(terminal(NAMED, message_item), model="m")


def test_a_call_never_named_starts_with_its_item_id_at_the_end() -> None:
    nameless = {**NAMED, "call_id": "", "name": ""}
    data = call_stream(announced(call_id="", name=""), done=nameless, final=nameless)
    events = decode_stream(data, provider="p", model="m")
    assert events[1] == BlockStart(
        index=0, block_type=StreamBlockType.TOOL_CALL, id="fc_1", name=""
    )
    assert collect(events).content == (ToolCall(id="fc_1", name="", arguments=NAMED["arguments"]),)


def test_a_call_waiting_for_its_name_is_given_before_the_streams_error() -> None:
    """The events held back come before the error, with the usage the failure reports."""
    at = {"item_id": "fc_1", "output_index": 0}
    failed = {
        **START,
        "status": "failed",
        "output": [],
        "usage": ENDED_USAGE,
        "error": {"code": "server_error", "message": "The server had an error."},
    }
    data = sse(
        {"type": "response.created", "response": {**START, "output": [], "usage": None}},
        {"type": "response.output_item.added", "output_index": 0, "item": announced(name="")},
        {"type": "response.function_call_arguments.delta", **at, "delta": '{"city":'},
        {"type": "response.failed", "response": failed},
    )
    decoder = ResponsesStreamDecoder(provider="p", model="m")
    events: list[StreamEvent] = []
    with pytest.raises(allama.errors.ServerError):
        for event in decoder.feed(data):
            events.append(event)
    assert events == [
        NAMED_EVENTS[0],
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="call_XYZ", name=""),
        ToolCallDelta(index=0, arguments='{"city":'),
        UsageEvent(usage=allama.Usage(input_tokens=3, output_tokens=2)),
    ]


class Person(BaseModel):
    name: str


def test_a_streamed_forced_tool_extraction_finds_a_call_named_when_it_finishes() -> None:
    arguments = '{"name":"Ada"}'
    done = {**NAMED, "name": "submit_structured_output", "arguments": arguments}
    at = {"item_id": "fc_1", "output_index": 0}
    data = sse(
        {"type": "response.created", "response": {**START, "output": [], "usage": None}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": announced(call_id="", name=""),
        },
        {"type": "response.function_call_arguments.delta", **at, "delta": arguments},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": terminal(done)},
    )
    made, _ = provider("openai", (200, data), api="responses")
    request = ChatRequest("gpt-4.1").user("Ada").with_option(ExtractionMode.FORCED_TOOL)
    with Extractor().extract_stream(made, Person, request) as stream:
        for _ in stream:
            pass
        assert stream.finish().value == Person(name="Ada")


_ids = st.text("abcXYZ019_", min_size=1, max_size=8)
_items = st.one_of(
    st.builds(
        lambda i, c, n, a: {
            "id": f"fc_{i}",
            "type": "function_call",
            "status": "completed",
            "call_id": c,
            "name": n,
            "arguments": json.dumps(a),
        },
        _ids,
        _ids,
        _ids,
        st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=6), max_size=3),
    ),
    st.builds(
        lambda i, t: {
            "id": f"msg_{i}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": t, "annotations": []}],
        },
        _ids,
        st.text(max_size=12),
    ),
    st.builds(
        lambda i, t: {
            "id": f"rs_{i}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t}],
        },
        _ids,
        st.text(max_size=12),
    ),
)
_LEFT = ("kept", "empty", "missing")


def _unnamed(data: bytes, draw: st.DataObject) -> bytes:
    """`data` (a stream) with each call's `call_id` and `name` kept, emptied or left out
    as announced, and with a draw left out of its `done` too (the terminal response
    names it)."""
    events: list[dict[str, Any]] = []
    for frame in data.decode().split("\n\n"):
        if not frame:
            continue
        event = json.loads(frame.split("data: ", 1)[1])
        item = event.get("item")
        kind = event["type"]
        if isinstance(item, dict) and item.get("type") == "function_call":
            if kind == "response.output_item.added":
                item = dict(item)
                for key in ("call_id", "name"):
                    how = draw.draw(st.sampled_from(_LEFT), label=key)
                    if how == "empty":
                        item[key] = ""
                    elif how == "missing":
                        del item[key]
            elif draw.draw(st.booleans(), label="unnamed when done"):
                item = {**item, "call_id": "", "name": ""}
            event = {**event, "item": item}
        events.append(event)
    return sse(*events)


@settings(max_examples=120, deadline=None)
@given(output=st.lists(_items, max_size=4), data=st.data())
def test_calls_named_late_streamed_and_split_anywhere_collect_to_the_body(
    output: list[dict[str, Any]], data: st.DataObject
) -> None:
    body = {**terminal(*output), "model": "m"}
    raw = _unnamed(stream_of(body), data)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12), label="cuts")
    events = feed_split(raw, cuts)
    expected = decode_object(body, model="m")
    assert collect(events) == expected
    starts = [event for event in events if isinstance(event, BlockStart)]
    assert [start.index for start in starts] == list(range(len(expected.content)))
    for start in starts:
        block = expected.content[start.index]
        if isinstance(block, ToolCall):  # started once, with what the body says
            assert (start.id, start.name) == (block.id, block.name)


# 5. `json_object` needs "json" in an input message


def strict_openai() -> tuple[Any, list[dict[str, Any]]]:
    """An OpenAI Responses endpoint that applies the rule for `json_object`."""
    sent: list[dict[str, Any]] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.read())
        sent.append(body)
        fmt = (body.get("text") or {}).get("format") or {}
        if fmt.get("type") == "json_object" and "json" not in json.dumps(body["input"]).lower():
            message = (
                "Response input messages must contain the word 'json' in some form to use "
                "'text.format' of type 'json_object'."
            )
            error = {"message": message, "type": "invalid_request_error", "param": "input"}
            return httpx2.Response(400, json={"error": error})
        text = {"type": "output_text", "text": '{"name":"Ada"}', "annotations": []}
        item = {"type": "message", "id": "msg_1", "role": "assistant", "content": [text]}
        return httpx2.Response(200, json=answer("gpt-4.1", {**item, "status": "completed"})[1])

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    made = allama.provider("openai", api="responses", api_key="sk-x-123456", transport=transport)
    return made, sent


JSON_MODE = ResponseFormat(type="json")


def test_json_mode_with_no_word_for_json_gets_the_note_as_a_developer_message() -> None:
    made, sent = strict_openai()
    out = made.chat(ChatRequest("gpt-4.1").user("Hi").with_response_format(JSON_MODE))
    assert out.text() == '{"name":"Ada"}'
    assert "instructions" not in sent[0]
    assert sent[0]["input"] == [
        {"role": "developer", "content": "Answer with one JSON object."},
        {"role": "user", "content": "Hi"},
    ]
    assert [w.message for w in out.warnings] == [
        'OpenAI takes JSON mode only when the input messages ask for JSON; "Answer with one '
        'JSON object." was added first in the input as a developer message'
    ]


def test_json_asked_for_in_the_instructions_only_is_said_again_in_the_input() -> None:
    made, sent = strict_openai()
    request = ChatRequest("gpt-4.1").system("Reply with a JSON object.").user("Two colours.")
    out = asyncio.run(made.achat(request.with_response_format(JSON_MODE)))
    assert sent[0]["instructions"] == "Reply with a JSON object."
    assert sent[0]["input"] == [
        {"role": "developer", "content": "Answer with one JSON object."},
        {"role": "user", "content": "Two colours."},
    ]
    assert [w.message for w in out.warnings] == [
        "OpenAI takes JSON mode only when the input messages ask for JSON, and `instructions` "
        'do not count; "Answer with one JSON object." was added first in the input as a '
        "developer message"
    ]


def test_an_input_message_that_says_json_needs_no_note() -> None:
    made, sent = strict_openai()
    request = ChatRequest("gpt-4.1").system("Be brief.").user("Colours, as json please.")
    out = made.chat(request.with_response_format(JSON_MODE))
    assert (sent[0]["instructions"], sent[0]["input"]) == (
        "Be brief.",
        [{"role": "user", "content": "Colours, as json please."}],
    )
    assert out.warnings == ()


def test_a_native_extraction_on_a_json_mode_family_passes_the_rule() -> None:
    """gpt-4-turbo has only `json_object`: the schema in words goes first in the input."""
    made, sent = strict_openai()
    request = (
        ChatRequest("gpt-4-turbo")
        .system("You extract people.")
        .user("Ada Lovelace wrote the first program.")
        .with_option(ExtractionMode.NATIVE)
    )
    assert allama.extract(made, Person, request).value == Person(name="Ada")
    assert sent[0]["text"] == {"format": {"type": "json_object"}}
    assert sent[0]["instructions"] == "You extract people."
    first = sent[0]["input"][0]
    assert first["role"] == "developer"
    assert first["content"].startswith("Answer with one JSON object that follows this JSON")


def test_json_schema_formats_and_endpoints_without_the_rule_are_unchanged() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    request = ChatRequest("gpt-4.1").system("Be brief.").user("Hi")
    body, warnings = prepared(
        "openai", request.with_response_format(ResponseFormat.for_schema(schema)), api="responses"
    )
    assert body["input"] == [{"role": "user", "content": "Hi"}]
    assert warnings == []
    # xAI takes `json_object` without the word: the note stays in the instructions.
    body, _ = prepared("xai", request.with_response_format(JSON_MODE), api="responses")
    assert body["input"] == [{"role": "user", "content": "Hi"}]


def test_the_note_is_a_system_message_where_the_endpoint_has_no_developer_role() -> None:
    target = allama.provider("openai", api="responses", api_key="sk-x-123456")
    adapter: Any = target._adapter
    request = ChatRequest("gpt-4.1").user("Hi").with_response_format(JSON_MODE)
    http = encode_request(
        request,
        dataclasses.replace(adapter.profile, developer_role=False),
        adapter.table.family("gpt-4.1"),
        url="https://api.openai.com/v1/responses",
        headers={},
        stream=False,
        degradations=Degradations.for_request("openai", request),
    )
    assert http.body["input"][0] == {"role": "system", "content": "Answer with one JSON object."}


def test_a_json_word_in_a_tool_result_alone_gets_the_note_and_names_no_instructions() -> None:
    """A tool result is no input message: the note goes first, and the warning speaks of
    no `instructions`, which the request has none of."""
    made, sent = strict_openai()
    request = (
        ChatRequest("gpt-4.1")
        .user("Hi")
        .assistant([ToolCall(id="call_1", name="f", arguments="{}")])
        .tool_result("call_1", "json stuff")
        .with_response_format(JSON_MODE)
    )
    out = made.chat(request)
    assert "instructions" not in sent[0]
    assert sent[0]["input"][:2] == [
        {"role": "developer", "content": "Answer with one JSON object."},
        {"role": "user", "content": "Hi"},
    ]
    assert [w.message for w in out.warnings] == [
        'OpenAI takes JSON mode only when the input messages ask for JSON; "Answer with one '
        'JSON object." was added first in the input as a developer message'
    ]


def test_an_azure_deployment_is_told_where_its_json_note_went() -> None:
    made, recorder = provider(
        "azure-openai",
        answer("prod", ANSWER_ITEM),
        api="responses",
        base_url="https://res.openai.azure.com/openai/v1",
    )
    out = made.chat(ChatRequest("prod").user("Hi").with_response_format(JSON_MODE))
    assert recorder.bodies[0]["input"] == [
        {"role": "developer", "content": "Answer with one JSON object."},
        {"role": "user", "content": "Hi"},
    ]
    assert [w.message for w in out.warnings] == [
        'Azure OpenAI takes JSON mode only when the input messages ask for JSON; "Answer with '
        'one JSON object." was added first in the input as a developer message'
    ]


def test_where_the_instructions_go_as_an_input_item_the_note_goes_with_them() -> None:
    """(xAI's beside a `previous_response_id`, were its endpoint to take the JSON rule.)"""
    target = allama.provider("xai", api="responses", api_key="sk-x-123456")
    adapter: Any = target._adapter
    request = (
        ChatRequest("grok-3")
        .system("Be brief.")
        .user("Hi")
        .with_response_format(JSON_MODE)
        .with_option_json("openai_responses", {"previous_response_id": "resp_0"})
    )
    degradations = Degradations.for_request("xai", request)
    http = encode_request(
        request,
        dataclasses.replace(adapter.profile, json_mode_word=True),
        adapter.table.family("grok-3"),
        url="https://api.x.ai/v1/responses",
        headers={},
        stream=False,
        degradations=degradations,
    )
    assert http.body["input"] == [
        {"role": "system", "content": "Be brief.\n\nAnswer with one JSON object."},
        {"role": "user", "content": "Hi"},
    ]
    assert [w.message for w in degradations.warnings] == [
        'xAI takes JSON mode only when the input messages ask for JSON; "Answer with one '
        'JSON object." was added to the system message that opens the input'
    ]


# 6. No reasoning items for a model that does not reason


RS_ITEM = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "think"}],
    "encrypted_content": "ENC",
}
PARIS = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Paris", "annotations": []}],
}
DROPPED = (
    "`gpt-4.1` on OpenAI does not reason and takes back no reasoning items; reasoning was "
    "left out of the conversation"
)


def test_reasoning_items_are_left_out_for_a_model_that_does_not_reason() -> None:
    """A conversation begun on gpt-5-mini goes on on gpt-4.1, which OpenAI would refuse
    ("Reasoning input items can only be provided to a reasoning or computer use model")."""

    def handler(http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.read())
        if body["model"] == "gpt-4.1" and any(i.get("type") == "reasoning" for i in body["input"]):
            error = {
                "message": "Reasoning input items can only be provided to a reasoning "
                "or computer use model.",
                "type": "invalid_request_error",
            }
            return httpx2.Response(400, json={"error": error})
        output = [RS_ITEM, PARIS] if body["model"] == "gpt-5-mini" else [PARIS]
        return httpx2.Response(200, json=answer(body["model"], *output)[1])

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    made = allama.provider("openai", api="responses", api_key="sk-x-123456", transport=transport)
    request = ChatRequest("gpt-5-mini").user("Capital of France?")
    first = made.chat(request)
    follow = request.push(first.to_assistant_message()).user("And Italy?")
    # On the reasoning model it goes back.
    body, warnings = prepared("openai", follow, api="responses")
    assert [item.get("type") for item in body["input"]] == [None, "reasoning", None, None]
    assert warnings == []
    moved = follow.model_copy(update={"model": "gpt-4.1"})
    out = made.chat(moved)
    assert [w.message for w in out.warnings] == [DROPPED]
    body, _ = prepared("openai", moved, api="responses")
    assert body["input"] == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "And Italy?"},
    ]


def test_reasoning_items_still_go_to_a_model_nobody_knows() -> None:
    """An Azure deployment's name says nothing of the model: its reasoning goes back."""
    made, sent = provider(
        "azure-openai",
        answer("my-deployment", RS_ITEM, PARIS),
        api="responses",
        endpoint="https://res.openai.azure.com",
    )
    assert made.chat_capability("my-deployment", ChatCapability.REASONING) is (
        CapabilitySupport.UNKNOWN
    )
    request = ChatRequest("my-deployment").user("Capital of France?")
    first = made.chat(request)
    second = made.chat(request.push(first.to_assistant_message()).user("And Italy?"))
    assert [item.get("type") for item in sent.bodies[1]["input"]] == [
        None,
        "reasoning",
        None,
        None,
    ]
    assert second.warnings == ()


# 7. An Azure deployment taken for a reasoning model is asked for no log-probabilities

TAKEN = (
    " at reasoning effort `high` (a deployment that names no model, asked for a reasoning "
    "effort, is taken for a reasoning model)"
)


def test_a_deployment_taken_for_a_reasoning_model_is_asked_for_no_logprobs() -> None:
    made, recorder = provider(
        "azure-openai",
        answer("prod", ANSWER_ITEM),
        api="responses",
        base_url="https://res.openai.azure.com/openai/v1",
    )
    request = ChatRequest("prod", logprobs=3, reasoning_effort="high", temperature=0.5).user("Hi")
    out = made.chat(request)
    body = recorder.bodies[0]
    assert "top_logprobs" not in body and "temperature" not in body
    assert body["include"] == ["reasoning.encrypted_content"]
    assert [(w.subject, w.message) for w in out.warnings] == [
        (
            FieldSubject(field=RequestField.LOGPROBS),
            f"`prod` on Azure OpenAI reports no log-probabilities{TAKEN}",
        ),
        (
            FieldSubject(field=RequestField.TEMPERATURE),
            f"`prod` on Azure OpenAI takes no `temperature` other than 1{TAKEN}",
        ),
    ]
    # At effort `none` it takes both.
    made.chat(request.model_copy(update={"reasoning_effort": "none"}))
    assert recorder.bodies[1]["top_logprobs"] == 3
    assert recorder.bodies[1]["include"] == ["message.output_text.logprobs"]
    assert recorder.bodies[1]["temperature"] == 0.5


# 8. A `call_id` is 1 to 64 characters

LONG_ID = "c" * 70  # past the spec's `maxLength`
EDGE_ID = "e" * 64
NEAR_ID = "n" * 63  # its repeat's suffix (`_1`) would make 65


def _call_item(call_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }


def _output_item(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def test_a_call_id_the_api_refuses_goes_as_one_made_from_it() -> None:
    def call(call_id: str) -> ToolCall:
        return ToolCall(id=call_id, name="get_weather", arguments='{"city":"Paris"}')

    request = ChatRequest("gpt-4.1").user("Weather?").with_tools([WEATHER])
    request = request.assistant([call(LONG_ID), call(EDGE_ID), call(NEAR_ID)])
    for call_id in (LONG_ID, EDGE_ID, NEAR_ID):
        request = request.tool_result(call_id, "Sunny")
    request = request.user("Again?").assistant([call(NEAR_ID)]).tool_result(NEAR_ID, "Rainy")
    body, warnings = prepared("openai", request, api="responses")
    made, again = "call_QLbJqeoQxFpUDCyS6pDlm18m", "call_TJI0PTmbxNpk5Fd7bT4iOPAf"
    assert body["input"] == [
        {"role": "user", "content": "Weather?"},
        _call_item(made),
        _call_item(EDGE_ID),
        _call_item(NEAR_ID),
        _output_item(made, "Sunny"),
        _output_item(EDGE_ID, "Sunny"),
        _output_item(NEAR_ID, "Sunny"),
        {"role": "user", "content": "Again?"},
        _call_item(again),
        _output_item(again, "Rainy"),
    ]
    assert warnings == []
    # The same conversation is sent the same way every time (prompt caching).
    assert prepared("openai", request, api="responses")[0] == body


# 9. A paused Anthropic turn's server tool blocks are not left out unannounced

PAUSED = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "Searching."},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "weather Paris"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://example.com/paris",
                    "title": "Paris",
                    "encrypted_content": "E1",
                }
            ],
        },
    ],
    "stop_reason": "pause_turn",
    "usage": {"input_tokens": 5, "output_tokens": 3},
}


def test_a_paused_anthropic_turns_server_blocks_left_out_are_said() -> None:
    anthropic, _ = provider("anthropic", (200, PAUSED))
    turn = anthropic.chat(ChatRequest("claude-sonnet-4-5").user("Weather?")).to_assistant_message()
    made, recorder = provider("openai", answer("gpt-5", ANSWER_ITEM), api="responses")
    out = made.chat(ChatRequest("gpt-5").user("Weather?").push(turn).user("Go on."))
    assert recorder.bodies[0]["input"] == [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Searching."},
        {"role": "user", "content": "Go on."},
    ]
    assert [(w.subject, w.message) for w in out.warnings] == [
        (
            FieldSubject(field=RequestField.MESSAGES),
            "the server tool blocks of an Anthropic turn (a server tool's calls and results, in a "
            "finished turn, a paused one, or one whose code execution waits on tool calls) were "
            "left out: only Anthropic takes them back",
        )
    ]


# 10. A schema to a family with JSON mode alone: the refusal says where its words went

SCHEMA_FORMAT = ResponseFormat.for_schema(
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, name="X"
)
AS_JSON_OBJECT = (
    "`gpt-4-turbo` on OpenAI has no JSON Schema output; the response format `X` was sent as "
    "`json_object`, which only constrains the output to a JSON object, with the schema "
    "written "
)
SCHEMA_NOTE = (
    "Answer with one JSON object that follows this JSON Schema:\n"
    '{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}'
)


@pytest.mark.parametrize("system", [None, "Answer in JSON."])
def test_a_schema_in_words_first_in_the_input_is_said_to_be_there(system: str | None) -> None:
    request = ChatRequest("gpt-4-turbo")
    if system is not None:
        request = request.system(system)  # (`instructions` do not count for the word)
    made, sent = strict_openai()
    out = made.chat(request.user("Hi").with_response_format(SCHEMA_FORMAT))
    assert sent[0]["input"] == [
        {"role": "developer", "content": SCHEMA_NOTE},
        {"role": "user", "content": "Hi"},
    ]
    assert sent[0].get("instructions") == system
    assert [w.message for w in out.warnings] == [
        AS_JSON_OBJECT + "first in the input as a developer message"
    ]


def test_a_schema_in_words_with_the_instructions_is_said_to_be_there() -> None:
    request = ChatRequest("gpt-4-turbo").system("Be brief.").user("Hi, in JSON")
    made, sent = strict_openai()
    out = made.chat(request.with_response_format(SCHEMA_FORMAT))
    assert sent[0]["instructions"] == f"Be brief.\n\n{SCHEMA_NOTE}"
    assert sent[0]["input"] == [{"role": "user", "content": "Hi, in JSON"}]
    assert [w.message for w in out.warnings] == [AS_JSON_OBJECT + "into the instructions"]


# 11. No reasoning summary unless the caller asks for one

UNVERIFIED = (
    "Your organization must be verified to generate reasoning summaries. Please go to: "
    "https://platform.openai.com/settings/organization/general and click on Verify "
    "Organization. If you just verified, it can take up to 15 minutes for access to propagate."
)
SUMMARY_ITEM = {**REASONING_ITEM, "id": "rs_o1", "encrypted_content": "ENCRYPTED-BY-OPENAI"}


def unverified_openai(*output: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """OpenAI's Responses API for an organization it has not verified: 400 to any
    `reasoning.summary`, else the answer `output`."""
    sent: list[dict[str, Any]] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.read())
        sent.append(body)
        if "summary" in (body.get("reasoning") or {}):
            error = {
                "message": UNVERIFIED,
                "type": "invalid_request_error",
                "param": "reasoning.summary",
                "code": "unsupported_value",
            }
            return httpx2.Response(400, json={"error": error})
        if body.get("stream"):
            return httpx2.Response(
                200,
                content=stream_of(answer(body["model"], *output)[1]),
                headers={"content-type": "text/event-stream"},
            )
        return httpx2.Response(200, json=answer(body["model"], *output)[1])

    transport = Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    made = allama.provider(
        "openai", api="responses", api_key="sk-test-unverified-1234", transport=transport
    )
    return made, sent


@pytest.mark.parametrize("streamed", [False, True])
def test_an_effort_asks_for_no_summary_and_reasoning_goes_back_without_one(
    streamed: bool,
) -> None:
    made, sent = unverified_openai(SUMMARY_ITEM, CALL_ITEM)
    request = (
        ChatRequest("gpt-5-mini")
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .with_reasoning_effort(ReasoningEffort.LOW)
    )
    if streamed:
        with made.chat_stream(request) as stream:
            for _ in stream:
                pass
            first = stream.response()
    else:
        first = made.chat(request)
    assert sent[0]["reasoning"] == {"effort": "low"}
    assert sent[0]["include"] == ["reasoning.encrypted_content"]
    assert first.usage == allama.Usage(input_tokens=10, output_tokens=50, reasoning_tokens=40)
    # A reasoning item without a summary is a block with no text, its encrypted content kept.
    [reasoning] = [block for block in first.content if isinstance(block, Reasoning)]
    assert (reasoning.text, reasoning.signature, reasoning.encrypted_content) == (
        "",
        "rs_o1",
        "ENCRYPTED-BY-OPENAI",
    )
    [call] = [block for block in first.content if isinstance(block, ToolCall)]
    second = made.chat(request.push(first.to_assistant_message()).tool_result(call, "sunny"))
    assert sent[1]["input"][1] == {
        "type": "reasoning",
        "id": "rs_o1",
        "summary": [],
        "encrypted_content": "ENCRYPTED-BY-OPENAI",
    }
    assert (first.warnings, second.warnings) == ((), ())


@pytest.mark.parametrize("effort", [ReasoningEffort.HIGH, None])
def test_a_summary_the_body_option_asks_for_goes_beside_the_effort(
    effort: ReasoningEffort | None,
) -> None:
    request = (
        ChatRequest("gpt-5-mini")
        .user("Hi")
        .with_reasoning_effort(effort)
        .with_option_json("openai_responses", {"reasoning": {"summary": "auto"}})
    )
    body, warnings = prepared("openai", request, api="responses")
    expected = {"summary": "auto"} if effort is None else {"effort": "high", "summary": "auto"}
    assert (body["reasoning"], body["include"], warnings) == (
        expected,
        ["reasoning.encrypted_content"],
        [],
    )
    # Asked for by the caller, it is refused as OpenAI refuses it, and not tried again.
    made, sent = unverified_openai(ANSWER_ITEM)
    with pytest.raises(InvalidRequestError) as raised:
        made.chat(request)
    assert str(raised.value) == UNVERIFIED
    assert (len(sent), raised.value.retryable) == (1, False)


# 12. grok-code-fast reasons, and takes no effort


def test_grok_code_fast_reasoning_goes_back_on_the_next_turn() -> None:
    model = "grok-code-fast-1"
    xai, sent = provider(
        "xai",
        answer(model, REASONING_ITEM, CALL_ITEM),
        answer(model, ANSWER_ITEM),
        api="responses",
    )
    request = ChatRequest(model).user("Weather in Paris?").with_tools([WEATHER])
    first = xai.chat(request)
    [call] = [block for block in first.content if isinstance(block, ToolCall)]
    second = xai.chat(request.push(first.to_assistant_message()).tool_result(call, "sunny"))
    assert sent.bodies[0]["include"] == ["reasoning.encrypted_content"]
    assert "reasoning" not in sent.bodies[0]
    assert sent.bodies[1]["input"][1] == {
        "type": "reasoning",
        "id": "rs_x1",
        "summary": [],
        "encrypted_content": "ENCRYPTED-BY-XAI",
    }
    # It was left out, with a warning that the model "does not reason".
    assert (first.warnings, second.warnings) == ((), ())


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    "effort", [ReasoningEffort.NONE, ReasoningEffort.LOW, ReasoningEffort.HIGH]
)
def test_an_effort_to_grok_code_fast_is_refused_on_both_apis(
    api: str, effort: ReasoningEffort
) -> None:
    # xAI answers 400 to one ("does not support parameter reasoningEffort").
    request = ChatRequest("grok-code-fast-1").user("Hi").with_reasoning_effort(effort)
    body, warnings = prepared("xai", request, api=api)
    assert ("reasoning" in body, "reasoning_effort" in body) == (False, False)
    assert [(w.subject, w.message) for w in warnings] == [
        (
            FieldSubject(field=RequestField.REASONING_EFFORT),
            f"`grok-code-fast-1` on xAI takes no reasoning effort `{effort.value}`",
        )
    ]
    # Chat Completions reads its reasoning from the answer: nothing else changes.
    if api == "chat":
        assert body == {
            "model": "grok-code-fast-1",
            "messages": [{"role": "user", "content": "Hi"}],
        }


# 13. Stray stream events


STRAY_AT = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
STRAY_START = {**START, "output": [], "usage": None}
STRAY_MESSAGE = {
    **ANSWER_ITEM,
    "content": [{"type": "output_text", "text": "abc", "annotations": []}],
}
STRAY_EVENTS = [
    ResponseStart(id="resp_1", model="m"),
    BlockStart(index=0, block_type=StreamBlockType.TEXT),
    TextDelta(index=0, text="abc"),
    BlockStop(index=0),
    UsageEvent(usage=allama.Usage(input_tokens=3, output_tokens=2)),
    Finish(finish_reason=FinishReason.STOP),
]


def stray_stream(late: str) -> bytes:
    """A message streamed whole, then a `late` text delta for it after it finished."""
    return sse(
        {"type": "response.created", "response": STRAY_START},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**STRAY_MESSAGE, "status": "in_progress", "content": []},
        },
        {"type": "response.output_text.delta", **STRAY_AT, "delta": "abc"},
        {"type": "response.output_item.done", "output_index": 0, "item": STRAY_MESSAGE},
        {"type": "response.output_text.delta", **STRAY_AT, "delta": late},
        {"type": "response.completed", "response": terminal(STRAY_MESSAGE)},
    )


def test_an_empty_delta_after_its_item_finished_is_passed_over() -> None:
    events = decode_stream(stray_stream(""), provider="p", model="m")
    assert events == STRAY_EVENTS
    assert collect(events) == decode_object(terminal(STRAY_MESSAGE), model="m")


def test_a_part_added_before_its_item_is_passed_over() -> None:
    data = sse(
        {"type": "response.created", "response": STRAY_START},
        {
            "type": "response.content_part.added",
            **STRAY_AT,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**STRAY_MESSAGE, "status": "in_progress", "content": []},
        },
        {"type": "response.output_text.delta", **STRAY_AT, "delta": "abc"},
        {"type": "response.completed", "response": terminal(STRAY_MESSAGE)},
    )
    assert decode_stream(data, provider="p", model="m") == STRAY_EVENTS


@pytest.mark.parametrize("run_async", [False, True])
def test_a_stray_empty_delta_keeps_the_answer_and_its_usage(run_async: bool) -> None:
    made, _ = provider("openai", (200, stray_stream("")), api="responses")
    request = ChatRequest("gpt-5-mini").user("Hi")

    async def streamed() -> ChatResponse:
        async with await made.achat_stream(request) as stream:
            async for _ in stream:
                pass
            return await stream.response()

    if run_async:
        out = asyncio.run(streamed())
    else:
        with made.chat_stream(request) as stream:
            for _ in stream:
                pass
            out = stream.response()
    assert (out.text(), out.usage, out.finish_reason) == (
        "abc",
        allama.Usage(input_tokens=3, output_tokens=2),
        FinishReason.STOP,
    )


def test_a_stray_delta_with_text_is_raised_after_the_terminal_usage() -> None:
    decoder = ResponsesStreamDecoder(provider="p", model="m")
    seen: list[StreamEvent] = []
    with pytest.raises(StreamDecodeError) as raised:
        for event in decoder.feed(stray_stream("d")):
            seen.append(event)
    assert str(raised.value) == (
        "a `response.output_text.delta` event for output item 0, which is not open"
    )
    assert seen == STRAY_EVENTS[:-1]  # the usage, and no finish


def _stray(kind: str, item: dict[str, Any], index: int) -> dict[str, Any]:
    """An empty event of `kind` for `item` (at `index`), as a relay sends one stray."""
    at = {"item_id": item["id"], "output_index": index}
    if kind == "part":
        part = {"type": "output_text", "text": "", "annotations": []}
        return {"type": "response.content_part.added", **at, "content_index": 0, "part": part}
    if kind == "text":
        return {"type": "response.output_text.delta", **at, "content_index": 0, "delta": ""}
    if kind == "arguments":
        return {"type": "response.function_call_arguments.delta", **at, "delta": ""}
    return {"type": "response.reasoning_summary_text.delta", **at, "summary_index": 0, "delta": ""}


@settings(max_examples=120, deadline=None)
@given(output=st.lists(_items, min_size=1, max_size=4), data=st.data())
def test_stray_empty_events_anywhere_outside_their_item_change_nothing(
    output: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Empty events of each kind, for an item before it was added or after it finished,
    split anywhere: the events are the clean stream's, and collect to the body."""
    output = [{**item, "id": f"{item['id']}_{n}"} for n, item in enumerate(output)]
    body = {**terminal(*output), "model": "m"}
    clean = stream_of(body)
    events = [
        json.loads(frame.split("data: ", 1)[1]) for frame in clean.decode().split("\n\n")[:-1]
    ]
    for _ in range(data.draw(st.integers(1, 4), label="strays")):
        index = data.draw(st.integers(0, len(output) - 1), label="item")
        kinds = ("part", "text", "arguments", "summary")
        stray = _stray(data.draw(st.sampled_from(kinds), label="kind"), output[index], index)
        places = [n for n, event in enumerate(events) if event.get("output_index") == index]
        added = next(n for n in places if events[n]["type"] == "response.output_item.added")
        done = next(n for n in places if events[n]["type"] == "response.output_item.done")
        where = data.draw(
            st.integers(1, added) | st.integers(done + 1, len(events) - 1), label="where"
        )
        events.insert(where, stray)
    raw = sse(*events)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12), label="cuts")
    got = feed_split(raw, cuts)
    assert got == decode_stream(clean, provider="p", model="m")
    assert collect(got) == decode_object(body, model="m")


def test_a_custom_tool_calls_input_done_after_its_item_is_left_to_the_item() -> None:
    # As the other `.done` events are: the finished item already gave the whole input.
    sql = "SELECT 1"
    call = {
        "id": "ctc_1",
        "type": "custom_tool_call",
        "call_id": "call_1",
        "name": "run_sql",
        "input": sql,
        "status": "completed",
    }
    at = {"item_id": "ctc_1", "output_index": 0}
    head = (
        {"type": "response.created", "response": STRAY_START},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**call, "input": "", "status": "in_progress"},
        },
        {"type": "response.custom_tool_call_input.delta", **at, "delta": sql},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
    )
    end = {"type": "response.completed", "response": terminal(call)}
    late = {"type": "response.custom_tool_call_input.done", **at, "input": sql}
    events = decode_stream(sse(*head, late, end), provider="p", model="m")
    assert events == decode_stream(sse(*head, end), provider="p", model="m")
    assert collect(events).tool_calls() == (ToolCall(id="call_1", name="run_sql", arguments=sql),)


# A request with nothing to send is refused before sending, as on Chat Completions


@pytest.mark.parametrize("how", ["chat", "achat", "stream"])
def test_a_responses_request_with_no_messages_is_refused_before_sending(how: str) -> None:
    target, recorder = provider("openai", answer("gpt-5", ANSWER_ITEM), api="responses")
    request = ChatRequest("gpt-5")
    with pytest.raises(InvalidRequestError) as caught:
        if how == "chat":
            target.chat(request)
        elif how == "achat":
            asyncio.run(target.achat(request))
        else:
            with target.chat_stream(request) as stream:
                for _ in stream:
                    pass
    assert str(caught.value) == (
        "OpenAI needs at least one message, and the request has none left to send"
    )
    assert caught.value.provider == "openai"
    assert recorder.bodies == []


@pytest.mark.parametrize(
    "option",
    [
        {"previous_response_id": "resp_prev", "store": True},
        {"conversation": "conv_1"},
        {"input": "Hi."},
    ],
)
def test_a_responses_request_whose_input_the_body_option_gives_is_sent(
    option: dict[str, Any],
) -> None:
    target, recorder = provider("openai", answer("gpt-5", ANSWER_ITEM), api="responses")
    target.chat(ChatRequest("gpt-5").with_option_json("openai_responses", option))
    body = recorder.bodies[0]
    assert {key: body[key] for key in option} == option
    assert body["input"] == option.get("input", [])


def test_responses_instructions_alone_are_sent() -> None:
    target, recorder = provider("openai", answer("gpt-5", ANSWER_ITEM), api="responses")
    target.chat(ChatRequest("gpt-5").system("Say hi."))
    assert recorder.bodies[0]["instructions"] == "Say hi."
    assert recorder.bodies[0]["input"] == []
