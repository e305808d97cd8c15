"""Tools sent to an OpenAI model that takes none are left out, with a warning.

o1-mini and o1-preview have no function calling, and the deep-research models take only
their built-in tools (web search, code interpreter, MCP, file search: "Deep research models
only support the ..."), which the capability table says (`tools=N, forced_tool=N`). Both the
Chat Completions and the Responses encoders leave the request's tools out, and the tool
choice with them, with a warning on `tools` worded as Gemma's on Gemini (refused before
sending under `UnsupportedPolicy.ERROR`); the body option's function and custom tools go the
same way, its built-in ones as given. An extraction forced to a tool on such a model is
recorded `not_enforced`, and its plan says so; auto mode picks what it did.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import ExtractionMode, Extractor, SchemaEnforcement
from allama.cli import main
from allama.errors import UnsupportedError
from allama.extract import MissingToolCallError, ModeUnsupportedError
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    RequestField,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    WarningKind,
)

KEY = "sk-test-tools-not-taken-1234"
WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
NO_TOOLS = (
    "o1-mini",
    "o1-mini-2024-09-12",
    "o1-preview",
    "o3-deep-research",
    "o3-deep-research-2025-06-26",
    "o4-mini-deep-research",
    "ft:o1-mini-2024-09-12:org::abc",
)
APIS = ("chat", "responses")
OPTION = {"chat": "openai_compat", "responses": "openai_responses"}


class Inv(BaseModel):
    total: float
    currency: str


def left_out(model: str, instead: str = "the tools were left out") -> str:
    return f"`{model}` on OpenAI has no function calling; {instead}"


def prepared(api: str, request: ChatRequest) -> tuple[dict[str, Any], list[str]]:
    made = allama.provider("openai", api=api, api_key=KEY)
    http, warnings = made._prepare(request, stream=False)
    body: dict[str, Any] = http.body
    return body, [warning.message for warning in warnings]


def asked(model: str) -> ChatRequest:
    return (
        ChatRequest(model)
        .user("Weather in Oslo?")
        .with_tools([WEATHER])
        .with_tool_choice(ToolChoice.tool("weather"))
    )


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("model", NO_TOOLS)
def test_the_tools_and_their_choice_are_left_out_with_a_warning(api: str, model: str) -> None:
    for choice in (ToolChoice.tool("weather"), ToolChoice.required(), ToolChoice.auto()):
        body, warned = prepared(api, asked(model).with_tool_choice(choice))
        assert "tools" not in body
        assert "tool_choice" not in body
        assert "parallel_tool_calls" not in body
        assert warned == [left_out(model)]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("model", NO_TOOLS)
def test_the_tools_are_refused_under_the_error_policy(api: str, model: str) -> None:
    made = allama.provider("openai", api=api, api_key=KEY)
    strict = asked(model).with_unsupported_policy(UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError) as raised:
        made.validate_chat_request(strict)
    assert raised.value.field is RequestField.TOOLS
    assert (
        raised.value.message == f"cannot send `tools`: `{model}` on OpenAI has no function calling"
    )
    validation = made.validate_chat_request(asked(model))
    assert [(w.kind, w.message) for w in validation.warnings] == [
        (WarningKind.UNSUPPORTED, left_out(model))
    ]


@pytest.mark.parametrize("api", APIS)
def test_a_model_that_takes_tools_is_sent_them_as_before(api: str) -> None:
    body, warned = prepared(api, asked("o3"))
    assert [tool.get("name", tool.get("function", {}).get("name")) for tool in body["tools"]] == [
        "weather"
    ]
    assert body["tool_choice"] in (
        {"type": "function", "function": {"name": "weather"}},
        {"type": "function", "name": "weather"},
    )
    assert warned == []


# Deep research: its built-in tools are its own


SEARCH = {"type": "web_search_preview"}
MCP = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/sse"}
FLAT_FUNCTION = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
FLAT_CUSTOM = {"type": "custom", "name": "patch"}


def test_deep_research_keeps_its_built_in_tools_and_loses_the_function_ones() -> None:
    request = (
        asked("o3-deep-research")
        .with_tool_choice(ToolChoice.required())
        .with_option_json("openai_responses", {"tools": [SEARCH, FLAT_FUNCTION, MCP, FLAT_CUSTOM]})
    )
    body, warned = prepared("responses", request)
    assert body["tools"] == [SEARCH, MCP]
    # `required` chooses among the tools it is sent: its built-in ones.
    assert body["tool_choice"] == "required"
    assert warned == [
        left_out("o3-deep-research"),
        left_out(
            "o3-deep-research",
            "the function and custom tools of the body option `openai_responses` were left out",
        ),
    ]
    # A choice that names a tool names a function or custom one, which went.
    body, warned = prepared("responses", request.with_tool_choice(ToolChoice.tool("weather")))
    assert body["tools"] == [SEARCH, MCP]
    assert "tool_choice" not in body
    assert len(warned) == 2
    # Built-in tools alone go as given, and so does a choice among them.
    alone = (
        ChatRequest("o3-deep-research")
        .user("q")
        .with_tool_choice(ToolChoice.auto())
        .with_option_json("openai_responses", {"tools": [SEARCH]})
    )
    body, warned = prepared("responses", alone)
    assert (body["tools"], body["tool_choice"], warned) == ([SEARCH], "auto", [])


def test_a_body_option_of_function_tools_alone_is_left_out_whole() -> None:
    function = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    request = (
        ChatRequest("o1-mini")
        .user("q")
        .with_tool_choice(ToolChoice.tool("lookup"))
        .with_option_json("openai_compat", {"tools": [function], "user": "u1"})
    )
    body, warned = prepared("chat", request)
    assert body == {
        "model": "o1-mini",
        "messages": [{"role": "user", "content": "q"}],
        "user": "u1",
    }
    assert warned == [
        left_out("o1-mini", "the function tools of the body option `openai_compat` were left out")
    ]
    with pytest.raises(UnsupportedError):
        prepared("chat", request.with_unsupported_policy(UnsupportedPolicy.ERROR))


def test_a_named_choice_of_no_tool_left_out_is_said_too() -> None:
    request = (
        ChatRequest("o3-deep-research")
        .user("q")
        .with_tool_choice(ToolChoice.tool("nothing"))
        .with_option_json("openai_responses", {"tools": [SEARCH]})
    )
    body, warned = prepared("responses", request)
    assert body["tools"] == [SEARCH]
    assert "tool_choice" not in body
    assert warned == [left_out("o3-deep-research", "`tool_choice` naming `nothing` was not sent")]


# Extraction


def completion(model: str, api: str) -> dict[str, Any]:
    text = '{"total": 3.5, "currency": "EUR"}'
    if api == "chat":
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 5, "output_tokens": 5, "total_tokens": 10},
    }


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("model", ["o1-mini", "o3-deep-research"])
def test_a_forced_tool_extraction_is_recorded_not_enforced(api: str, model: str) -> None:
    target, recorder = provider("openai", (200, completion(model, api)), api=api)
    request = ChatRequest(model).user("3.50 EUR").with_option(ExtractionMode.FORCED_TOOL)
    with pytest.raises(MissingToolCallError) as raised:
        Extractor().extract(target, Inv, request)
    (body,) = recorder.bodies
    assert "tools" not in body and "tool_choice" not in body
    metadata = raised.value.metadata
    assert metadata is not None
    assert metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [w.message for w in metadata.degradations] == [left_out(model)]


@pytest.mark.parametrize("api", APIS)
def test_the_plan_says_not_enforced_and_auto_picks_as_before(api: str) -> None:
    made = allama.provider("openai", api=api, api_key=KEY)
    for model in NO_TOOLS:
        assert made.chat_capability(model, ChatCapability.TOOL_CALLS) is (
            CapabilitySupport.UNSUPPORTED
        )
        forced = ChatRequest(model).user("x").with_option(ExtractionMode.FORCED_TOOL)
        plan = Extractor().plan(made, Inv, forced)
        assert (plan.mode, plan.enforcement) == (
            ExtractionMode.FORCED_TOOL,
            SchemaEnforcement.NOT_ENFORCED,
        )
        assert [w.message for w in plan.degradations] == [left_out(model)]
    # Auto: deep research has JSON Schema output, o1-mini neither that nor tools.
    for model in ("o3-deep-research", "o4-mini-deep-research"):
        plan = Extractor().plan(made, Inv, ChatRequest(model).user("x"))
        assert (plan.mode, plan.enforcement) == (ExtractionMode.NATIVE, SchemaEnforcement.EXACT)
    for model in ("o1-mini", "o1-preview"):
        with pytest.raises(ModeUnsupportedError):
            Extractor().plan(made, Inv, ChatRequest(model).user("x"))


@pytest.mark.parametrize("label", ["openai", "openai:responses"])
def test_allama_plan_says_the_tools_were_left_out(
    label: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    kind = f"{__name__}:Inv"
    assert main(["plan", kind, "--provider", label, "--model", "o1-mini"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (forced,) = [line for line in lines if " forced_tool " in line]
    assert forced.split(" forced_tool ")[1].split(None, 1) == [
        "not_enforced",
        left_out("o1-mini"),
    ]
