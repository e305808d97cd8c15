"""Responses API fixes from a probe of the OpenAI family:

1. xAI's Grok 4 reasoning models reason (their reasoning comes back encrypted through the
   Responses API's `include`) though they take no reasoning effort: the encrypted reasoning
   is asked for and goes back on the next turn of a tool loop, and an effort is still
   refused. A `-non-reasoning` id does not reason.
2. xAI refuses `instructions` beside `previous_response_id`: the opening system messages go
   as a `system` input item there, and as `instructions` everywhere else.
3. Forcing a `custom` tool (given through the body option) by name uses the custom tool
   choice, in the Responses API and in Chat Completions.
"""

from __future__ import annotations

from typing import Any

import pytest

import allama
from _recording import provider
from allama import ChatRequest
from allama.errors import UnsupportedError
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ReasoningEffort,
    RequestField,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
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
    for model in (*GROK_4_REASONING, "grok-4.3", "grok-3-mini"):
        assert xai.chat_capability(model, ChatCapability.REASONING) is S, model
    for model in (*GROK_4_NON_REASONING, "grok-code-fast-1", "grok-3"):
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
