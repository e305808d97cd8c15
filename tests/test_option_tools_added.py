"""A provider's own tools (web search, code execution) given in the body option go beside
the request's functions and an extraction's tool, not in place of them; and Gemini 2.5's
refusal of JSON output beside tools holds for its built-in tools too."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import ExtractionMetadata, ExtractionMode
from allama.errors import UnsupportedError
from allama.types import ChatRequest, RequestField, ToolChoice, ToolDefinition

WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)

# preset, model, the option's namespace, one of its server tools, the name of the function
# tool as sent (where it sits in the encoded tool).
CASES: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "openai": ("openai", "gpt-4o", "openai_compat", {"type": "web_search"}),
    "responses": ("openai", "gpt-4o", "openai_responses", {"type": "web_search"}),
    "anthropic": (
        "anthropic",
        "claude-sonnet-4-5",
        "anthropic",
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 1},
    ),
    "gemini": ("gemini", "gemini-3-flash-preview", "gemini", {"googleSearch": {}}),
    "ollama": ("ollama", "llama3.2", "ollama", {"type": "web_search"}),
}


def _provider(case: str) -> Any:
    preset, *_ = CASES[case]
    options = {"api": "responses"} if case == "responses" else {}
    return allama.provider(preset, api_key="k", **options)


def _names(case: str, tools: list[dict[str, Any]]) -> list[str]:
    """The function tools' names in a body's `tools`, in order."""
    if case == "gemini":
        return [
            declaration["name"]
            for tool in tools
            for declaration in tool.get("functionDeclarations", [])
        ]
    if case in ("openai", "ollama"):
        return [tool["function"]["name"] for tool in tools if tool.get("type") == "function"]
    return [tool["name"] for tool in tools if "input_schema" in tool or "parameters" in tool]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_options_tools_go_after_the_requests_functions(case: str) -> None:
    _, model, namespace, server_tool = CASES[case]
    request = (
        ChatRequest(model)
        .user("Weather in Paris, and look it up.")
        .with_tools([WEATHER])
        .with_tool_choice(ToolChoice.tool("weather"))
        .with_option_json(namespace, {"tools": [server_tool], "temperature": 0.5})
    )
    http, _ = _provider(case)._prepare(request, stream=False)
    tools = http.body["tools"]
    assert _names(case, tools) == ["weather"]
    assert tools[-1] == server_tool
    assert len(tools) == 2


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_options_tools_alone_are_sent_as_given(case: str) -> None:
    _, model, namespace, server_tool = CASES[case]
    request = (
        ChatRequest(model).user("Look it up.").with_option_json(namespace, {"tools": [server_tool]})
    )
    http, _ = _provider(case)._prepare(request, stream=False)
    assert http.body["tools"] == [server_tool]


class City(BaseModel):
    city: str
    population: int


GEMINI_CALL = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {
                            "name": "submit_structured_output",
                            "args": {"city": "Paris", "population": 2},
                        }
                    }
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
}


def test_a_forced_tool_extraction_beside_google_search_keeps_its_tool() -> None:
    gemini, recorder = provider("gemini", (200, GEMINI_CALL))
    request = (
        ChatRequest("gemini-3-flash-preview")
        .user("Paris, 2.")
        .with_option(ExtractionMode.FORCED_TOOL)
        .with_option_json("gemini", {"tools": [{"googleSearch": {}}]})
    )
    extracted = allama.extract(gemini, City, request)
    assert extracted.value == City(city="Paris", population=2)
    sent = recorder.bodies[0]
    assert _names("gemini", sent["tools"]) == ["submit_structured_output"]
    assert sent["tools"][-1] == {"googleSearch": {}}
    assert sent["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"] == [
        "submit_structured_output"
    ]


def test_gemini_2_5_json_output_beside_google_search_is_refused_before_sending() -> None:
    gemini, recorder = provider("gemini", (200, GEMINI_CALL))
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Paris, 2.")
        .with_option(ExtractionMode.NATIVE)
        .with_option_json("gemini", {"tools": [{"googleSearch": {}}]})
    )
    words = (
        "Gemini 2.x cannot mix built-in tools with function calling or JSON output (Gemini 3 can)"
    )
    with pytest.raises(UnsupportedError) as caught:
        allama.extract(gemini, City, request)
    assert caught.value.field is RequestField.OPTIONS
    assert caught.value.message.endswith(words)
    assert recorder.bodies == []
    # Auto mode does not fall back: the forced tool beside Google Search is refused too.
    auto = request.with_option(ExtractionMode.AUTO)
    with pytest.raises(UnsupportedError) as refused:
        allama.extract(gemini, City, auto)
    assert refused.value.message.endswith(words)
    assert ExtractionMetadata.from_error(refused.value).auto_fallback is None
    assert recorder.bodies == []
