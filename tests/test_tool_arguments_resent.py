"""A tool call's arguments sent back as an object (Anthropic, Gemini, Ollama): a number
JSON does not hold (`NaN`, `Infinity`, `1e400`, as a Chat Completions server may write) is
refused before sending, where it made the body invalid JSON; digits a float loses are
said."""

from __future__ import annotations

import json
from typing import Any

import pytest

import allama
from allama.errors import InvalidRequestError
from allama.types import ChatRequest, RequestField, ToolCall, ToolDefinition

TOOL = ToolDefinition(name="f", parameters={"type": "object", "properties": {}})

TARGETS = {
    "anthropic": ("claude-sonnet-4-5", "Anthropic"),
    "gemini": ("gemini-2.5-flash", "Gemini"),
    "ollama": ("llama3.2", "Ollama"),
}


def _resent(name: str, arguments: str) -> tuple[dict[str, Any], list[Any]]:
    model, _ = TARGETS[name]
    request = (
        ChatRequest(model)
        .user("x")
        .assistant([ToolCall.of("call_1", "f", {})])
        .tool_result("call_1", "done")
        .with_tools([TOOL])
    )
    turn = request.messages[1].model_copy(
        update={"content": (ToolCall(id="call_1", name="f", arguments=arguments),)}
    )
    request = request.model_copy(
        update={"messages": (request.messages[0], turn, request.messages[2])}
    )
    http, warnings = allama.provider(name, api_key="k")._prepare(request, stream=False)
    return http.body, list(warnings)


@pytest.mark.parametrize("name", sorted(TARGETS))
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", '[1, {"b": 1e309}]'])
def test_arguments_holding_a_number_json_cannot_hold_are_refused(name: str, number: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _resent(name, '{"a": ' + number + "}")
    assert caught.value.message == (
        "the arguments of tool call `call_1` hold a number that is not finite (NaN, an "
        f"infinity, or too large for a float), which {TARGETS[name][1]} cannot take in JSON"
    )
    assert caught.value.provider == name


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_digits_a_float_loses_are_sent_as_the_nearest_float_with_a_warning(name: str) -> None:
    body, warnings = _resent(name, '{"a": 0.1000000000000000055511151231257827, "b": 7}')
    sent = json.dumps(body)
    assert '"a": 0.1' in sent and "NaN" not in sent
    assert [w.message for w in warnings if w.is_about(RequestField.MESSAGES)] == [
        "the arguments of tool call `call_1` hold a number with more digits than a float "
        "keeps; it was sent as the nearest float"
    ]
