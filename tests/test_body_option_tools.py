"""A body option's `tools` that is not a list (`null`, one tool written as an object)
cannot go after the request's tools: sent, it would replace them (an extraction's tool
among them) while `tool_choice` still forces one, and the provider answers 400 or the
extraction goes unforced with its record saying exact. It is not sent, with a warning on
`options` (refused before sending under `UnsupportedPolicy.ERROR`), and the request's tools
are. Without tools of the request's, the option's value goes as given."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import ExtractionMode, Extractor
from allama.errors import UnsupportedError
from allama.types import (
    ChatRequest,
    RequestField,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    Warning,
    WarningKind,
)

WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)

# case: preset, model, the option's namespace, one more field of the option and that field
# as the body carries it (sent as given beside the refused `tools`).
CASES: dict[str, tuple[str, str, str, dict[str, Any], dict[str, Any]]] = {
    "openai": ("openai", "gpt-4o", "openai_compat", {"user": "u1"}, {"user": "u1"}),
    "responses": (
        "openai",
        "gpt-4o",
        "openai_responses",
        {"metadata": {"k": "v"}},
        {"metadata": {"k": "v"}},
    ),
    "anthropic": (
        "anthropic",
        "claude-sonnet-4-5",
        "anthropic",
        {"metadata": {"user_id": "u1"}},
        {"metadata": {"user_id": "u1"}},
    ),
    "gemini": (
        "gemini",
        "gemini-2.5-flash",
        "gemini",
        # (Not `cachedContent`, which Gemini refuses beside the request's tools.)
        {"safety_settings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "OFF"}]},
        {"safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "OFF"}]},
    ),
    "ollama": ("ollama", "llama3.2", "ollama", {"keep_alive": "5m"}, {"keep_alive": "5m"}),
}

NOT_LISTS: dict[str, Any] = {
    "null": None,
    "object": {"type": "web_search"},
    "gemini_object": {"googleSearch": {}},
}


def _provider(case: str) -> Any:
    preset = CASES[case][0]
    options = {"api": "responses"} if case == "responses" else {}
    return allama.provider(preset, api_key="k", **options)


def _names(tools: list[dict[str, Any]]) -> list[str]:
    """The function tools' names in a body's `tools` of any of the five dialects."""
    names: list[str] = []
    for tool in tools:
        if "functionDeclarations" in tool:  # Gemini: one object holding the declarations
            names.extend(declaration["name"] for declaration in tool["functionDeclarations"])
        elif "function" in tool:  # Chat Completions, Ollama
            names.append(tool["function"]["name"])
        else:  # Responses, Anthropic
            names.append(tool["name"])
    return names


def _refused(namespace: str, tools: Any) -> Warning:
    given = json.dumps(tools, separators=(",", ":"))
    return Warning.unsupported(
        RequestField.OPTIONS,
        f"`tools` of the body option `{namespace}` ({given}) was not sent: it is not a list, "
        "so it would replace the request's tools (an extraction's tool, where there is one) "
        "rather than go after them; the request's tools were sent",
    )


def _request(case: str, tools: Any) -> ChatRequest:
    _, model, namespace, more, _ = CASES[case]
    request = ChatRequest(model).user("Weather in Paris.").with_tools([WEATHER])
    if case != "ollama":  # which has no `tool_choice`
        request = request.with_tool_choice(ToolChoice.tool("weather"))
    return request.with_option_json(namespace, {"tools": tools, **more})


@pytest.mark.parametrize("shape", sorted(NOT_LISTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_options_tools_that_is_not_a_list_leaves_the_requests_tools(
    case: str, shape: str
) -> None:
    _, _, namespace, _, carried = CASES[case]
    tools = NOT_LISTS[shape]
    http, warnings = _provider(case)._prepare(_request(case, tools), stream=False)
    assert _names(http.body["tools"]) == ["weather"]
    assert len(http.body["tools"]) == 1
    # The option's other fields are sent as given.
    for key, value in carried.items():
        assert http.body[key] == value
    assert [(w.kind, w.is_about(RequestField.OPTIONS), w.message) for w in warnings] == [
        (WarningKind.UNSUPPORTED, True, _refused(namespace, tools).message)
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_under_error_an_options_tools_that_is_not_a_list_is_refused_before_sending(
    case: str,
) -> None:
    namespace = CASES[case][2]
    request = _request(case, None).with_unsupported_policy(UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError) as caught:
        _provider(case)._prepare(request, stream=False)
    assert caught.value.field is RequestField.OPTIONS
    # Nothing was sent: the refusal leaves out what the warning says went instead.
    refused = _refused(namespace, None).message.removesuffix("; the request's tools were sent")
    assert caught.value.message == f"cannot send `options`: {refused}"


@pytest.mark.parametrize("shape", sorted(NOT_LISTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_without_tools_of_the_request_the_options_tools_go_as_given(case: str, shape: str) -> None:
    _, model, namespace, _, _ = CASES[case]
    tools = NOT_LISTS[shape]
    request = ChatRequest(model).user("Hi").with_option_json(namespace, {"tools": tools})
    http, warnings = _provider(case)._prepare(request, stream=False)
    assert http.body["tools"] == tools
    assert warnings == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_options_tools_list_still_goes_after_the_requests(case: str) -> None:
    namespace = CASES[case][2]
    server_tool = {"googleSearch": {}} if case == "gemini" else {"type": "web_search"}
    request = _request(case, [server_tool])
    if case == "gemini":  # 2.x refuses built-in tools beside function declarations; 3 takes them
        request = request.model_copy(update={"model": "gemini-3-flash-preview"})
    http, warnings = _provider(case)._prepare(request, stream=False)
    assert _names(http.body["tools"][:-1]) == ["weather"]
    assert http.body["tools"][-1] == server_tool
    assert not any(w.is_about(RequestField.OPTIONS) for w in warnings), namespace


class Person(BaseModel):
    name: str


TOOL = "submit_structured_output"

# preset, model, namespace, the answer calling the extraction's tool, the forced choice as
# the body sends it.
EXTRACTIONS: dict[str, tuple[str, str, str, dict[str, Any], Any]] = {
    "openai": (
        "openai",
        "gpt-4o",
        "openai_compat",
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": TOOL, "arguments": '{"name":"Ada"}'},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
        ("tool_choice", {"type": "function", "function": {"name": TOOL}}),
    ),
    "anthropic": (
        "anthropic",
        "claude-sonnet-4-5",
        "anthropic",
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": TOOL, "input": {"name": "Ada"}}
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
        ("tool_choice", {"type": "tool", "name": TOOL, "disable_parallel_tool_use": True}),
    ),
    "gemini": (
        "gemini",
        "gemini-3-flash-preview",
        "gemini",
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"functionCall": {"name": TOOL, "args": {"name": "Ada"}}}],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "totalTokenCount": 15,
            },
        },
        ("toolConfig", {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [TOOL]}}),
    ),
}


@pytest.mark.parametrize("tools", [None, {"type": "web_search"}], ids=["null", "object"])
@pytest.mark.parametrize("case", sorted(EXTRACTIONS))
def test_a_forced_tool_extraction_keeps_its_tool_beside_an_options_tools_not_a_list(
    case: str, tools: Any
) -> None:
    preset, model, namespace, answer, (key, forced) = EXTRACTIONS[case]
    made, recorder = provider(preset, (200, answer))
    plain = ChatRequest(model).user("Ada.").with_option(ExtractionMode.FORCED_TOOL)
    request = plain.with_option_json(namespace, {"tools": tools})
    # The record is the one of the extraction without the option: its tool is sent, forced.
    expected = Extractor().plan(made, Person, plain)
    planned = Extractor().plan(made, Person, request)
    assert (planned.enforcement, planned.degradations, planned.notes) == (
        expected.enforcement,
        expected.degradations,
        expected.notes,
    )
    extracted = Extractor().extract(made, Person, request)
    assert extracted.value == Person(name="Ada")
    assert extracted.metadata.enforcement == expected.enforcement
    sent = recorder.bodies[0]
    assert _names(sent["tools"]) == [TOOL]
    assert len(sent["tools"]) == 1
    assert sent[key] == forced
    said = [w.message for w in extracted.response.warnings if w.is_about(RequestField.OPTIONS)]
    assert said == [_refused(namespace, tools).message]
