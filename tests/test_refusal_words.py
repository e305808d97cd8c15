"""A refusal under `UnsupportedPolicy.ERROR` sends nothing, so it says why the field cannot
go, not what a warning says was sent in its place ("the first 4 were sent") or left out of
what was sent ("1.5 was left out")."""

from __future__ import annotations

from typing import Any

import pytest

import allama
from allama import ChatRequest, ToolDefinition
from allama.errors import UnsupportedError
from allama.types import RequestField, ToolCall, ToolChoice, UnsupportedPolicy, WarningKind

WEATHER = ToolDefinition(
    name="weather",
    description="Weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    strict=True,
)

FIVE_STOPS = ("a", "b", "c", "d", "e")
SIX_STOPS = (*FIVE_STOPS, "f")


CALL = ToolCall(id="call_1", name="weather", arguments='{"city": "Paris"}')


def _tool_turns(model: str) -> ChatRequest:
    return (
        ChatRequest(model)
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .assistant([CALL])
        .tool_result(CALL, "no such city", is_error=True)
    )


# (preset, options, request, field, why, what a warning adds)
CASES: dict[str, tuple[str, dict[str, Any], ChatRequest, RequestField, str, str]] = {
    "groq stops": (
        "groq",
        {},
        ChatRequest("openai/gpt-oss-120b").user("x").with_stop(*FIVE_STOPS),
        RequestField.STOP,
        "Groq takes at most 4 stop sequences",
        "the first 4 were sent",
    ),
    "gemini stops": (
        "gemini",
        {},
        ChatRequest("gemini-2.5-flash").user("x").with_stop(*SIX_STOPS),
        RequestField.STOP,
        "Gemini takes at most 5 stop sequences",
        "the first 5 were sent",
    ),
    "gemini strict tool": (
        "gemini",
        {},
        ChatRequest("gemini-2.5-flash").user("x").with_tools([WEATHER]),
        RequestField.TOOLS,
        "Gemini has no strict function calling",
        "tool `weather` was sent without it",
    ),
    "ollama strict tool": (
        "ollama",
        {},
        ChatRequest("llama3.2").user("x").with_tools([WEATHER]),
        RequestField.TOOLS,
        "Ollama has no strict tools",
        "tool `weather` was sent without `strict`",
    ),
    "ollama forced tool": (
        "ollama",
        {},
        ChatRequest("llama3.2")
        .user("x")
        .with_tools([WEATHER.model_copy(update={"strict": None})])
        .with_tool_choice(ToolChoice.required()),
        RequestField.TOOL_CHOICE,
        "Ollama has no `tool_choice` and cannot force a tool call",
        "the tools were offered and the model chooses whether to call one",
    ),
    "openai error flag": (
        "openai",
        {},
        _tool_turns("gpt-4o"),
        RequestField.TOOL_RESULT_ERROR,
        "OpenAI has no error flag for tool results",
        "the result was sent as plain content",
    ),
    "openai streamed logprobs": (
        "openai",
        {},
        ChatRequest("gpt-4o").user("x").with_logprobs(2),
        RequestField.LOGPROBS,
        "log-probabilities are read from whole responses, not streams",
        "the stream was sent without asking for them",
    ),
    "anthropic temperature": (
        "anthropic",
        {},
        ChatRequest("claude-sonnet-4-5").user("x").with_temperature(1.5),
        RequestField.TEMPERATURE,
        "Anthropic takes `temperature` from 0 to 1",
        "1.5 was left out",
    ),
    "gemini seed": (
        "gemini",
        {},
        ChatRequest("gemini-2.5-flash").user("x").with_seed(2**40),
        RequestField.SEED,
        "Gemini takes a seed of 32 bits",
        f"{2**40} was left out",
    ),
}

STREAMED = {"openai streamed logprobs"}


def _validate(name: str, policy: UnsupportedPolicy) -> Any:
    preset, options, request, *_ = CASES[name]
    target = allama.provider(preset, api_key="k", **options)
    return target.validate_chat_request(
        request.with_unsupported_policy(policy), stream=name in STREAMED
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_warning_says_what_was_sent_in_the_fields_place(name: str) -> None:
    *_, field, why, instead = CASES[name]
    checked = _validate(name, UnsupportedPolicy.WARN)
    said = [(w.kind, w.message) for w in checked.warnings if w.is_about(field)]
    assert said == [(WarningKind.UNSUPPORTED, f"{why}; {instead}")]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_refusal_says_why_and_nothing_of_what_a_send_would_have_held(name: str) -> None:
    *_, field, why, _ = CASES[name]
    with pytest.raises(UnsupportedError) as raised:
        _validate(name, UnsupportedPolicy.ERROR)
    assert str(raised.value) == f"cannot send `{field}`: {why}"
    assert raised.value.field is field
