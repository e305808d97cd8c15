"""DeepSeek's thinking mode and a forced tool: V4 thinks by default and `deepseek-reasoner`
always does, and thinking mode answers 400 "Thinking mode does not support this
tool_choice" to `required` or a named function. No forced tool is offered or sent there;
reasoning effort `none` turns V4's thinking off (`"thinking": {"type": "disabled"}`), as
the body option's own `thinking` does, and a tool may then be forced. The 2026 aliases
(`deepseek-flash`, `deepseek-pro`) think by default as V4 does; `deepseek-chat` thinks where
the body option turns thinking on. A `thinking` of no type (`null`, `{}`) leaves the model's
default, and one that goes in place of effort `none`'s is said on `reasoning_effort`. The
400 itself is an `UnsupportedError` on `tool_choice`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ExtractionMode,
    ModeUnsupportedError,
    ToolDefinition,
)
from allama.adapters.openai_compat import error_from_response
from allama.errors import UnsupportedError
from allama.types import FieldSubject, RequestField, ToolChoice, UnsupportedStage, WarningKind


class Person(BaseModel):
    name: str
    age: int


WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
V4 = ["deepseek-v4-flash", "deepseek-v4-pro"]
ALIASES = ["deepseek-flash", "deepseek-pro"]
REFUSED = {
    "error": {
        "message": "Thinking mode does not support this tool_choice",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
}


def completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "c-1",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


def called(arguments: str, name: str = "submit_structured_output") -> dict[str, Any]:
    call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}
    return completion({"content": None, "tool_calls": [call]}, "tool_calls")


def unforced(model: str) -> str:
    return (
        f"`{model}` on DeepSeek cannot be forced to call a tool in thinking mode, its default "
        '(to force one, turn thinking off: reasoning effort `none`, or `"thinking": {"type": '
        '"disabled"}` in the body option); `auto` was sent instead'
    )


def unforced_by_option(model: str) -> str:
    return (
        f"`{model}` on DeepSeek cannot be forced to call a tool in thinking mode, which "
        '`"thinking": {"type": "enabled"}` in the body option turns on; `auto` was sent instead'
    )


def no_effect(model: str, field: str, why: str) -> str:
    return f"`{model}` on DeepSeek takes no `{field}` other than 1 in thinking mode, {why}"


BY_DEFAULT = (
    'its default (to use it, turn thinking off: `"thinking": {"type": "disabled"}` in the body '
    "option)"
)
BY_OPTION = 'which `"thinking": {"type": "enabled"}` in the body option turns on'


def effort_replaced(given: str) -> str:
    return (
        f"`thinking` of the body option `openai_compat` ({given}) was sent in place of the "
        "request's reasoning effort (`none`)"
    )


REASONER_UNFORCED = (
    "`deepseek-reasoner` on DeepSeek cannot be forced to call a tool: it always thinks, and "
    "thinking mode takes no forced `tool_choice`; `auto` was sent instead"
)


def _asked(model: str, choice: ToolChoice) -> ChatRequest:
    return (
        ChatRequest(model).user("Weather in Paris?").with_tools([WEATHER]).with_tool_choice(choice)
    )


# The capability answer: no forced tool by default


@pytest.mark.parametrize(
    ("model", "answer"),
    [
        ("deepseek-v4-flash", CapabilitySupport.UNSUPPORTED),
        ("deepseek-v4-pro", CapabilitySupport.UNSUPPORTED),
        ("deepseek-reasoner", CapabilitySupport.UNSUPPORTED),
        ("deepseek-flash", CapabilitySupport.UNSUPPORTED),
        ("deepseek-pro", CapabilitySupport.UNSUPPORTED),
        ("deepseek-chat", CapabilitySupport.SUPPORTED),
    ],
)
def test_a_model_that_thinks_by_default_is_not_offered_a_forced_tool(
    model: str, answer: CapabilitySupport
) -> None:
    target, _ = provider("deepseek", (200, completion({"content": "hi"})))
    assert target.chat_capability(model, ChatCapability.FORCED_TOOL_CHOICE) is answer


@pytest.mark.parametrize("model", ["deepseek-v4-flash", *ALIASES])
def test_auto_extraction_pays_no_call_deepseek_refuses(model: str) -> None:
    target, recorder = provider("deepseek", (400, REFUSED))
    with pytest.raises(ModeUnsupportedError):
        allama.extract(target, Person, ChatRequest(model).user("Bob is 3"))
    assert recorder.bodies == []


# Plain chat: a forced choice in thinking mode goes as `auto`, with a warning


@pytest.mark.parametrize("model", V4)
@pytest.mark.parametrize("choice", [ToolChoice.required(), ToolChoice.tool("weather")])
def test_v4_in_thinking_mode_is_sent_auto_with_a_warning(model: str, choice: ToolChoice) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    response = target.chat(_asked(model, choice))
    assert recorder.bodies[0]["tool_choice"] == "auto"
    assert "thinking" not in recorder.bodies[0]
    assert [(w.kind, w.subject, w.message) for w in response.warnings] == [
        (WarningKind.UNSUPPORTED, FieldSubject(field=RequestField.TOOL_CHOICE), unforced(model))
    ]


def test_the_reasoner_is_never_forced() -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    response = target.chat(_asked("deepseek-reasoner", ToolChoice.required()))
    assert recorder.bodies[0]["tool_choice"] == "auto"
    assert [w.message for w in response.warnings] == [REASONER_UNFORCED]
    # Effort `none` does not turn its thinking off: refused as before, and no tool forced.
    response = target.chat(
        _asked("deepseek-reasoner", ToolChoice.required()).with_reasoning_effort("none")
    )
    assert "thinking" not in recorder.bodies[1]
    assert recorder.bodies[1]["tool_choice"] == "auto"
    assert [w.message for w in response.warnings] == [
        "`deepseek-reasoner` on DeepSeek takes no reasoning effort `none`",
        REASONER_UNFORCED,
    ]


def test_a_forced_choice_in_thinking_mode_is_refused_before_sending_under_error() -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    strict = _asked("deepseek-v4-flash", ToolChoice.required()).with_unsupported_policy(
        allama.UnsupportedPolicy.ERROR
    )
    with pytest.raises(UnsupportedError) as raised:
        target.chat(strict)
    assert raised.value.field is RequestField.TOOL_CHOICE
    assert raised.value.stage is UnsupportedStage.BEFORE_SENDING
    assert recorder.bodies == []


def test_a_streamed_call_is_refused_alike() -> None:
    target, _ = provider("deepseek", (200, completion({"content": "Sunny"})))
    validation = target.validate_chat_request(
        _asked("deepseek-v4-pro", ToolChoice.required()), stream=True
    )
    assert [w.message for w in validation.warnings] == [unforced("deepseek-v4-pro")]


@pytest.mark.parametrize("choice", [ToolChoice.auto(), ToolChoice.none()])
def test_an_unforced_choice_goes_as_given(choice: ToolChoice) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    response = target.chat(_asked("deepseek-v4-flash", choice))
    assert recorder.bodies[0]["tool_choice"] == choice.mode
    assert response.warnings == ()


# Thinking turned off: by reasoning effort `none`, or by the body option


@pytest.mark.parametrize("model", V4)
def test_effort_none_turns_v4s_thinking_off(model: str) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "hi"})))
    request = ChatRequest(model, temperature=0.2, top_p=0.5, reasoning_effort="none").user("hi")
    response = target.chat(request)
    sent = recorder.bodies[0]
    assert sent["thinking"] == {"type": "disabled"}
    assert "reasoning_effort" not in sent
    assert (sent["temperature"], sent["top_p"]) == (0.2, 0.5)
    assert response.warnings == ()


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice.required(), "required"),
        (ToolChoice.tool("weather"), {"type": "function", "function": {"name": "weather"}}),
    ],
)
def test_with_thinking_off_a_tool_is_forced(choice: ToolChoice, wire: Any) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    by_effort = target.chat(_asked("deepseek-v4-flash", choice).with_reasoning_effort("none"))
    by_option = target.chat(
        _asked("deepseek-v4-flash", choice).with_option_json(
            "openai_compat", {"thinking": {"type": "disabled"}}
        )
    )
    for sent in recorder.bodies:
        assert sent["tool_choice"] == wire
        assert sent["thinking"] == {"type": "disabled"}
    assert by_effort.warnings == by_option.warnings == ()


def test_the_body_options_thinking_wins_over_effort_none_with_a_warning() -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    request = (
        _asked("deepseek-v4-flash", ToolChoice.required())
        .with_reasoning_effort("none")
        .with_option_json("openai_compat", {"thinking": {"type": "enabled"}})
    )
    response = target.chat(request)
    assert recorder.bodies[0]["thinking"] == {"type": "enabled"}
    assert recorder.bodies[0]["tool_choice"] == "auto"
    assert [(w.subject, w.message) for w in response.warnings] == [
        (FieldSubject(field=RequestField.TOOL_CHOICE), unforced_by_option("deepseek-v4-flash")),
        (
            FieldSubject(field=RequestField.REASONING_EFFORT),
            effort_replaced('{"type":"enabled"}'),
        ),
    ]


def test_the_body_options_disabled_beside_effort_none_says_nothing() -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    request = (
        _asked("deepseek-v4-flash", ToolChoice.required())
        .with_reasoning_effort("none")
        .with_option_json("openai_compat", {"thinking": {"type": "disabled"}})
    )
    response = target.chat(request)
    assert recorder.bodies[0]["thinking"] == {"type": "disabled"}
    assert recorder.bodies[0]["tool_choice"] == "required"
    assert response.warnings == ()


@pytest.mark.parametrize(("given", "said"), [(None, "null"), ({}, "{}")])
def test_a_thinking_of_no_type_beside_effort_none_leaves_v4_thinking(given: Any, said: str) -> None:
    # Sent in place of allama's `disabled`: V4 thinks, its default, so no tool is forced and
    # no sampling sent, and the effort it replaced is said.
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    request = (
        _asked("deepseek-v4-flash", ToolChoice.required())
        .with_temperature(0.3)
        .with_reasoning_effort("none")
        .with_option_json("openai_compat", {"thinking": given})
    )
    response = target.chat(request)
    sent = recorder.bodies[0]
    assert sent["thinking"] == given
    assert sent["tool_choice"] == "auto"
    assert "temperature" not in sent
    assert [(w.subject, w.message) for w in response.warnings] == [
        (
            FieldSubject(field=RequestField.TEMPERATURE),
            no_effect("deepseek-v4-flash", "temperature", BY_DEFAULT),
        ),
        (
            FieldSubject(field=RequestField.TOOL_CHOICE),
            "`deepseek-v4-flash` on DeepSeek cannot be forced to call a tool in thinking mode, "
            'its default (to force one, turn thinking off: `"thinking": {"type": "disabled"}` '
            "in the body option); `auto` was sent instead",
        ),
        (FieldSubject(field=RequestField.REASONING_EFFORT), effort_replaced(said)),
    ]


# The 2026 aliases think by default, as V4 does


@pytest.mark.parametrize("model", ALIASES)
def test_an_alias_in_thinking_mode_takes_no_forced_tool_nor_sampling(model: str) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    request = ChatRequest(model, temperature=0.3).user("Weather in Paris?").with_tools([WEATHER])
    response = target.chat(request.with_tool_choice(ToolChoice.required()))
    sent = recorder.bodies[0]
    assert sent["tool_choice"] == "auto"
    assert "temperature" not in sent
    assert "thinking" not in sent
    assert [(w.subject, w.message) for w in response.warnings] == [
        (FieldSubject(field=RequestField.TEMPERATURE), no_effect(model, "temperature", BY_DEFAULT)),
        (FieldSubject(field=RequestField.TOOL_CHOICE), unforced(model)),
    ]


@pytest.mark.parametrize("model", ALIASES)
def test_effort_none_turns_an_aliases_thinking_off(model: str) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    request = (
        ChatRequest(model, temperature=0.3, reasoning_effort="none")
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .with_tool_choice(ToolChoice.required())
    )
    response = target.chat(request)
    sent = recorder.bodies[0]
    assert (sent["tool_choice"], sent["temperature"]) == ("required", 0.3)
    assert sent["thinking"] == {"type": "disabled"}
    assert response.warnings == ()


# `deepseek-chat` (V4-flash's non-thinking mode) thinks where the body option turns it on


@pytest.mark.parametrize("model", ["deepseek-chat", "some-new-model"])
def test_thinking_the_body_option_turns_on_takes_no_forced_tool_nor_sampling(model: str) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    request = (
        ChatRequest(model, temperature=0.3)
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .with_tool_choice(ToolChoice.tool("weather"))
        .with_option_json("openai_compat", {"thinking": {"type": "enabled"}})
    )
    response = target.chat(request)
    sent = recorder.bodies[0]
    assert sent["tool_choice"] == "auto"
    assert "temperature" not in sent
    assert sent["thinking"] == {"type": "enabled"}
    assert [(w.subject, w.message) for w in response.warnings] == [
        (FieldSubject(field=RequestField.TEMPERATURE), no_effect(model, "temperature", BY_OPTION)),
        (FieldSubject(field=RequestField.TOOL_CHOICE), unforced_by_option(model)),
    ]


@pytest.mark.parametrize(
    "option", [None, {"thinking": {"type": "disabled"}}, {"thinking": None}, {"thinking": {}}]
)
def test_deepseek_chat_otherwise_takes_a_forced_tool_and_sampling(option: Any) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "Sunny"})))
    request = (
        ChatRequest("deepseek-chat", temperature=0.3)
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .with_tool_choice(ToolChoice.required())
    )
    if option is not None:
        request = request.with_option_json("openai_compat", option)
    response = target.chat(request)
    sent = recorder.bodies[0]
    assert (sent["tool_choice"], sent["temperature"]) == ("required", 0.3)
    assert response.warnings == ()


def test_a_forced_tool_extraction_on_deepseek_chat_thinking_offers_the_tool() -> None:
    target, recorder = provider("deepseek", (200, called('{"name": "Bob", "age": 3}')))
    request = (
        ChatRequest("deepseek-chat")
        .user("Bob is 3")
        .with_option(ExtractionMode.FORCED_TOOL)
        .with_option_json("openai_compat", {"thinking": {"type": "enabled"}})
    )
    result = allama.extract(target, Person, request)
    assert result.value == Person(name="Bob", age=3)
    assert recorder.bodies[0]["tool_choice"] == "auto"
    assert [w.message for w in result.metadata.notes] == [unforced_by_option("deepseek-chat")]


def test_a_forced_tool_extraction_with_thinking_off_forces_its_tool() -> None:
    target, recorder = provider("deepseek", (200, called('{"name": "Bob", "age": 3}')))
    request = (
        ChatRequest("deepseek-v4-flash", reasoning_effort="none")
        .user("Bob is 3")
        .with_option(ExtractionMode.FORCED_TOOL)
    )
    result = allama.extract(target, Person, request)
    assert result.value == Person(name="Bob", age=3)
    sent = recorder.bodies[0]
    assert sent["tool_choice"] == {
        "type": "function",
        "function": {"name": "submit_structured_output"},
    }
    assert sent["thinking"] == {"type": "disabled"}
    assert result.metadata.notes == []


def test_a_forced_tool_extraction_in_thinking_mode_offers_the_tool_and_says_so() -> None:
    target, recorder = provider("deepseek", (200, called('{"name": "Bob", "age": 3}')))
    request = (
        ChatRequest("deepseek-v4-pro").user("Bob is 3").with_option(ExtractionMode.FORCED_TOOL)
    )
    result = allama.extract(target, Person, request)
    assert result.value == Person(name="Bob", age=3)
    assert recorder.bodies[0]["tool_choice"] == "auto"
    assert [w.message for w in result.metadata.notes] == [unforced("deepseek-v4-pro")]


# The 400 itself: the refused `tool_choice`, whatever the table says


@pytest.mark.parametrize(
    "message",
    [
        "Thinking mode does not support this tool_choice",
        "deepseek-reasoner does not support this tool_choice",
    ],
)
def test_deepseeks_refusal_of_a_forced_tool_is_unsupported_on_tool_choice(message: str) -> None:
    body = {"error": {**REFUSED["error"], "message": message}}
    error = error_from_response(400, {}, json.dumps(body), provider="deepseek")
    assert isinstance(error, UnsupportedError)
    assert error.field is RequestField.TOOL_CHOICE
    assert error.stage is UnsupportedStage.PROVIDER
    assert error.retryable is False


def test_a_forced_choice_the_body_option_sends_is_refused_as_unsupported() -> None:
    target, recorder = provider("deepseek", (400, REFUSED))
    request = (
        ChatRequest("deepseek-v4-flash")
        .user("Weather?")
        .with_tools([WEATHER])
        .with_option_json("openai_compat", {"tool_choice": "required"})
    )
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert recorder.bodies[0]["tool_choice"] == "required"
    assert raised.value.field is RequestField.TOOL_CHOICE
    assert str(raised.value) == "Thinking mode does not support this tool_choice"
