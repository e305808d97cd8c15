"""Function tools given in a body option are tools of the request's own: every provider is
refused, before sending, two tools of one name over the request's and the option's (the
option's go after them in one list), and an extraction refuses them as it refuses
`request.tools`, in every mode; a provider's server tools (web search) still go beside an
extraction's schema."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import ExtractionMode, Extractor
from allama.errors import InvalidRequestError, UnsupportedError
from allama.extract import EXTRACTION_TOOL, ToolConflictError
from allama.mock import MockProvider
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ResponseFormat,
    ToolDefinition,
)

WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _function(namespace: str, name: str) -> dict[str, Any]:
    """A function tool named `name` as the body option `namespace` gives one."""
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}}
    if namespace == "anthropic":
        return {"name": name, "description": "mine", "input_schema": parameters}
    if namespace == "gemini":
        return {"functionDeclarations": [{"name": name, "parameters": parameters}]}
    if namespace == "openai_responses":
        return {"type": "function", "name": name, "parameters": parameters}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


# preset, model, the provider's options, its body option, its name in messages
CASES: dict[str, tuple[str, str, dict[str, Any], str, str]] = {
    "anthropic": ("anthropic", "claude-sonnet-4-5", {}, "anthropic", "Anthropic"),
    "deepseek": ("deepseek", "deepseek-chat", {}, "openai_compat", "DeepSeek"),
    "openai": ("openai", "gpt-4o", {}, "openai_compat", "OpenAI"),
    "responses": ("openai", "gpt-4o", {"api": "responses"}, "openai_responses", "OpenAI"),
    "gemini": ("gemini", "gemini-3-flash-preview", {}, "gemini", "Gemini"),
    "ollama": ("ollama", "llama3.1", {}, "ollama", "Ollama"),
}


def _case(case: str) -> tuple[Any, Any, str, str, str]:
    preset, model, options, namespace, display = CASES[case]
    target, recorder = provider(preset, (200, {}), **options)
    return target, recorder, model, namespace, display


def _noun(namespace: str) -> str:
    return "function declaration" if namespace == "gemini" else "tool"


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_option_tool_named_like_a_request_tool_is_refused_before_sending(case: str) -> None:
    target, recorder, model, namespace, display = _case(case)
    request = (
        ChatRequest(model)
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .with_option_json(namespace, {"tools": [_function(namespace, "weather")]})
    )
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(request)
    assert caught.value.message == (
        f"{display} takes each tool name once, and the tools sent repeat names (positions "
        "count from 0): `weather` names the request's tool at position 0 and the "
        f"{_noun(namespace)} at position 0 of `tools` in the body option `{namespace}`"
    )
    assert recorder.bodies == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_option_tools_of_one_name_are_refused_before_sending(case: str) -> None:
    target, recorder, model, namespace, display = _case(case)
    given = [_function(namespace, "lookup"), _function(namespace, "lookup")]
    request = ChatRequest(model).user("Look it up.").with_option_json(namespace, {"tools": given})
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(request)
    assert caught.value.message == (
        f"{display} takes each tool name once, and the tools sent repeat names (positions "
        f"count from 0): `lookup` names the {_noun(namespace)}s at positions 0 and 1 of "
        f"`tools` in the body option `{namespace}`"
    )
    assert recorder.bodies == []


@pytest.mark.parametrize("case", ["deepseek", "openai", "responses", "ollama"])
def test_request_tools_of_one_name_are_refused_on_every_wire(case: str) -> None:
    target, recorder, model, _, display = _case(case)
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(ChatRequest(model).user("Weather?").with_tools([WEATHER, WEATHER]))
    assert caught.value.message == (
        f"{display} takes each tool name once, and the request's tools repeat names "
        "(positions count from 0): `weather` names the tools at positions 0 and 1"
    )
    assert recorder.bodies == []


def test_a_server_tool_named_like_a_request_tool_is_refused_before_sending() -> None:
    target, recorder, model, _, _ = _case("anthropic")
    search = ToolDefinition(name="web_search", parameters={"type": "object", "properties": {}})
    server = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
    request = (
        ChatRequest(model)
        .user("Search.")
        .with_tools([WEATHER, search])
        .with_option_json("anthropic", {"tools": [server]})
    )
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(request)
    assert caught.value.message == (
        "Anthropic takes each tool name once, and the tools sent repeat names (positions "
        "count from 0): `web_search` names the request's tool at position 1 and the tool at "
        "position 0 of `tools` in the body option `anthropic`"
    )
    assert recorder.bodies == []


class Person(BaseModel):
    name: str
    age: int


_MODES = [ExtractionMode.AUTO, ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("mode", _MODES, ids=lambda mode: mode.value)
def test_an_extraction_refuses_an_options_function_tool_in_every_mode(
    case: str, mode: ExtractionMode
) -> None:
    target, recorder, model, namespace, _ = _case(case)
    request = (
        ChatRequest(model)
        .user("Ada, 36.")
        .with_option(mode)
        .with_option_json(namespace, {"tools": [_function(namespace, "lookup")]})
    )
    with pytest.raises(ToolConflictError) as caught:
        allama.extract(target, Person, request)
    assert caught.value.metadata.passes == 0
    with pytest.raises(ToolConflictError):
        Extractor().plan(target, Person, request)
    with pytest.raises(ToolConflictError), Extractor().extract_stream(target, Person, request):
        pass
    assert recorder.bodies == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_forced_tool_extraction_refuses_an_option_tool_of_its_tools_name(case: str) -> None:
    target, recorder, model, namespace, _ = _case(case)
    request = (
        ChatRequest(model)
        .user("Ada, 36.")
        .with_option(ExtractionMode.FORCED_TOOL)
        .with_option_json(namespace, {"tools": [_function(namespace, EXTRACTION_TOOL)]})
    )
    with pytest.raises(ToolConflictError):
        allama.extract(target, Person, request)
    assert recorder.bodies == []


def test_an_options_function_tool_refuses_an_extraction_on_any_provider() -> None:
    """A request with tools of its own fails the same way wherever it goes: Anthropic's
    option's function tool on OpenAI too, which would not send it."""
    target, recorder, _, _, _ = _case("openai")
    request = (
        ChatRequest("gpt-4o")
        .user("Ada, 36.")
        .with_option_json("anthropic", {"tools": [_function("anthropic", "lookup")]})
    )
    with pytest.raises(ToolConflictError):
        allama.extract(target, Person, request)
    assert recorder.bodies == []


ANTHROPIC_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": '{"name": "Ada", "age": 36}'}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}


def test_a_native_extraction_beside_a_server_tool_is_sent() -> None:
    anthropic, recorder = provider("anthropic", (200, ANTHROPIC_ANSWER))
    server = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Ada, 36.")
        .with_option(ExtractionMode.NATIVE)
        .with_option_json("anthropic", {"tools": [server]})
    )
    extracted = allama.extract(anthropic, Person, request)
    assert extracted.value == Person(name="Ada", age=36)
    assert recorder.bodies[0]["tools"] == [server]
    assert recorder.bodies[0]["output_config"]["format"]["type"] == "json_schema"


def test_gemini_2_5_json_output_beside_an_options_declarations_names_them() -> None:
    """Gemini's 400 is to function declarations, whichever field gave them."""
    gemini, recorder = provider("gemini", (200, {}))
    request = (
        ChatRequest("gemini-2.5-flash")
        .user("Ada, 36.")
        .with_response_format(ResponseFormat.json_object())
        .with_option_json("gemini", {"tools": [_function("gemini", "lookup")]})
    )
    with pytest.raises(UnsupportedError) as caught:
        gemini.chat(request)
    assert caught.value.message == (
        "cannot send `response_format`: `gemini-2.5-flash` on Gemini answers 400 to JSON output "
        "beside function declarations"
    )
    assert recorder.bodies == []


# The conflict says where the tools came from, and is raised before any capability look-up.
# Its words name every kind of tool the caller runs: an option may give client tools alone
# (`bash_...`, computer use), which "function tools" would misname.


def _conflict(provider: str, namespace: str) -> str:
    return (
        f"{provider}: extraction cannot be combined with request tools, which the body option "
        f"`{namespace}` gives as tools the caller runs (function, custom or client tools) in "
        "its `tools`; take them out of that option, or start a fresh request from the messages"
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_conflict_names_the_body_option_that_gives_the_tools(case: str) -> None:
    target, recorder, model, namespace, _ = _case(case)
    request = (
        ChatRequest(model)
        .user("Ada, 36.")
        .with_option_json(namespace, {"tools": [_function(namespace, "lookup")]})
    )
    with pytest.raises(ToolConflictError) as caught:
        allama.extract(target, Person, request)
    assert str(caught.value) == _conflict(target.name, namespace)
    assert (caught.value.request_tools, caught.value.option_tools) == (False, [namespace])
    restored = allama.Error.from_dict(caught.value.to_dict())
    assert isinstance(restored, ToolConflictError)
    assert str(restored) == str(caught.value)
    with pytest.raises(ToolConflictError) as planned:
        Extractor().plan(target, Person, request)
    assert str(planned.value) == _conflict(target.name, namespace)
    assert recorder.bodies == []


def test_the_conflict_names_the_request_tools_and_every_option_that_gives_some() -> None:
    target, recorder, _, _, _ = _case("openai")
    server = {"type": "web_search_preview"}
    request = (
        ChatRequest("gpt-4o")
        .user("Ada, 36.")
        .with_tools([WEATHER])
        .with_option_json("openai_compat", {"tools": [_function("openai_compat", "lookup")]})
        .with_option_json("anthropic", {"tools": [_function("anthropic", "lookup")]})
        .with_option_json("openai_responses", {"tools": [server]})  # a server tool: none
    )
    with pytest.raises(ToolConflictError) as caught:
        allama.extract(target, Person, request)
    assert str(caught.value) == (
        "openai: extraction cannot be combined with request tools, which the request gives "
        "in `tools` and the body options `anthropic` and `openai_compat` as tools the caller "
        "runs (function, custom or client tools) in their `tools`; clear `tools` and "
        "`tool_choice` and take the tools the caller runs out of those options, or start a "
        "fresh request from the messages"
    )
    assert recorder.bodies == []


def test_request_tools_alone_are_named_as_before() -> None:
    target, _, _, _, _ = _case("openai")
    request = ChatRequest("gpt-4o").user("Ada, 36.").with_tools([WEATHER])
    with pytest.raises(ToolConflictError) as caught:
        allama.extract(target, Person, request)
    assert str(caught.value) == (
        "openai: extraction cannot be combined with request tools; clear `tools` and "
        "`tool_choice`, or start a fresh request from the messages"
    )


class _Asked(MockProvider):
    """A scripted provider that keeps the capability questions it is asked."""

    def __init__(self) -> None:
        super().__init__(['{"value": [1]}'])
        self.asked: list[ChatCapability] = []

    def chat_capability(self, model: str, capability: ChatCapability) -> CapabilitySupport:
        self.asked.append(capability)
        return super().chat_capability(model, capability)


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_an_options_function_tool_is_refused_before_any_capability_is_asked(
    mode: ExtractionMode,
) -> None:
    """As `request.tools` are: a mode given asks nothing before the conflict (the root's
    capability, whether the type must be wrapped, is not looked up)."""
    mock = _Asked()
    request = (
        ChatRequest("m")
        .user("1")
        .with_option(mode)
        .with_option_json("openai_compat", {"tools": [_function("openai_compat", "lookup")]})
    )
    for run in (
        lambda: allama.extract(mock, list[int], request),
        lambda: Extractor().plan(mock, list[int], request),
    ):
        with pytest.raises(ToolConflictError) as caught:
            run()
        assert mock.asked == []
        assert str(caught.value) == _conflict("mock", "openai_compat")
    assert mock.call_count == 0


# Client tools are the caller's to run, as function tools are: Anthropic's typed ones
# (`bash_...`: "your application handles execution"), OpenAI's computer use and local shell.
# Sent beside an extraction, the model could call one in place of answering (a paid answer
# with no structured text); refused before sending, on every wire that takes them.

RESPONSES_ANSWER = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-5",
    "output": [
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": '{"name": "Ada", "age": 36}', "annotations": []}
            ],
        }
    ],
    "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
}

CLIENT_TOOLS: list[tuple[str, str, dict[str, Any]]] = [
    ("anthropic", "anthropic", {"type": "bash_20250124", "name": "bash"}),
    (
        "anthropic",
        "anthropic",
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    ),
    (
        "anthropic",
        "anthropic",
        {
            "type": "computer_20250124",
            "name": "computer",
            "display_width_px": 1024,
            "display_height_px": 768,
        },
    ),
    ("anthropic", "anthropic", {"type": "memory_20250818", "name": "memory"}),
    (
        "responses",
        "openai_responses",
        {
            "type": "computer_use_preview",
            "display_width": 1024,
            "display_height": 768,
            "environment": "browser",
        },
    ),
    ("responses", "openai_responses", {"type": "computer"}),
    ("responses", "openai_responses", {"type": "local_shell"}),
    ("responses", "openai_responses", {"type": "shell"}),
    ("responses", "openai_responses", {"type": "shell", "environment": {"type": "local"}}),
    ("responses", "openai_responses", {"type": "apply_patch"}),
    (
        "responses",
        "openai_responses",
        {
            "type": "namespace",
            "name": "crm",
            "description": "The CRM.",
            "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
        },
    ),
    ("responses", "openai_responses", {"type": "tool_search", "execution": "client"}),
    # OpenAI calls an MCP server's tools only once the caller approves each call (an
    # `mcp_approval_request`, in an answer with no text): the default, "always", a filter.
    (
        "responses",
        "openai_responses",
        {"type": "mcp", "server_label": "x", "server_url": "https://x"},
    ),
    (
        "responses",
        "openai_responses",
        {"type": "mcp", "server_label": "x", "require_approval": "always"},
    ),
    (
        "responses",
        "openai_responses",
        {"type": "mcp", "server_label": "x", "require_approval": {"never": {"tool_names": ["a"]}}},
    ),
    # A gateway serving Claude on Chat Completions (LiteLLM) takes Anthropic's client tools.
    ("openai", "openai_compat", {"type": "bash_20250124", "name": "bash"}),
]


@pytest.mark.parametrize(
    ("case", "namespace", "tool"),
    CLIENT_TOOLS,
    ids=[f"{namespace}-{tool['type']}" for _, namespace, tool in CLIENT_TOOLS],
)
@pytest.mark.parametrize("mode", _MODES, ids=lambda mode: mode.value)
def test_an_options_client_tool_refuses_an_extraction_before_sending(
    case: str, namespace: str, tool: dict[str, Any], mode: ExtractionMode
) -> None:
    target, recorder, model, _, _ = _case(case)
    request = (
        ChatRequest(model)
        .user("Ada, 36.")
        .with_option(mode)
        .with_option_json(namespace, {"tools": [tool]})
    )
    with pytest.raises(ToolConflictError) as caught:
        allama.extract(target, Person, request)
    assert str(caught.value) == _conflict(target.name, namespace)
    assert (caught.value.request_tools, caught.value.option_tools) == (False, [namespace])
    assert caught.value.metadata.passes == 0
    with pytest.raises(ToolConflictError) as decided:
        allama.decide(target, bool, request)
    assert str(decided.value) == _conflict(target.name, namespace)
    assert recorder.bodies == []


def test_a_client_tool_named_like_a_request_tool_is_refused_before_sending() -> None:
    """A client tool's calls give its name, as a function tool's do."""
    target, recorder, model, _, _ = _case("anthropic")
    bash = ToolDefinition(name="bash", parameters={"type": "object", "properties": {}})
    request = (
        ChatRequest(model)
        .user("Run it.")
        .with_tools([bash])
        .with_option_json("anthropic", {"tools": [{"type": "bash_20250124", "name": "bash"}]})
    )
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(request)
    assert caught.value.message == (
        "Anthropic takes each tool name once, and the tools sent repeat names (positions "
        "count from 0): `bash` names the request's tool at position 0 and the tool at "
        "position 0 of `tools` in the body option `anthropic`"
    )
    assert recorder.bodies == []


@pytest.mark.parametrize(
    "server",
    [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 1},
        {"type": "web_fetch_20250910", "name": "web_fetch"},
        {"type": "code_execution_20250825", "name": "code_execution"},
    ],
    ids=lambda tool: tool["type"],
)
def test_an_anthropic_server_tool_still_goes_beside_an_extraction(server: dict[str, Any]) -> None:
    anthropic, recorder = provider("anthropic", (200, ANTHROPIC_ANSWER))
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Ada, 36.")
        .with_option(ExtractionMode.NATIVE)
        .with_option_json("anthropic", {"tools": [server]})
    )
    assert allama.extract(anthropic, Person, request).value == Person(name="Ada", age=36)
    assert recorder.bodies[0]["tools"] == [server]


@pytest.mark.parametrize(
    "server",
    [
        {"type": "web_search"},
        {"type": "shell", "environment": {"type": "container_auto"}},
        {"type": "shell", "environment": {"type": "container_reference", "container_id": "c"}},
        {"type": "tool_search", "execution": "server"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {
            "type": "mcp",
            "server_label": "x",
            "server_url": "https://x",
            "require_approval": "never",
        },
    ],
    ids=lambda tool: "-".join(
        str(v) for v in (tool["type"], *tool.get("environment", {}).values())
    ),
)
def test_a_responses_server_tool_still_goes_beside_an_extraction(server: dict[str, Any]) -> None:
    openai, recorder = provider("openai", (200, RESPONSES_ANSWER), api="responses")
    request = (
        ChatRequest("gpt-5")
        .user("Ada, 36.")
        .with_option(ExtractionMode.NATIVE)
        .with_option_json("openai_responses", {"tools": [server]})
    )
    assert allama.extract(openai, Person, request).value == Person(name="Ada", age=36)
    assert recorder.bodies[0]["tools"] == [server]


def test_which_option_tools_are_the_callers_own_on_each_wire() -> None:
    """One rule for Anthropic's tools, here and in its encoder (`anthropic_server_tool`):
    a tool whose type is not a server tool's is the caller's to run."""
    from allama.adapters._tool_ids import anthropic_server_tool, option_tools

    anthropic = [
        {"name": "lookup", "input_schema": {"type": "object"}},
        {"type": "custom", "name": "mine", "input_schema": {"type": "object"}},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "web_search_20250305", "name": "web_search"},
        {"type": "mcp_toolset", "mcp_server_name": "docs"},
    ]
    assert [(t.name, t.own) for t in option_tools("anthropic", anthropic)] == [
        ("lookup", True),
        ("mine", True),
        ("bash", True),
        ("web_search", False),
        (None, False),
    ]
    assert [anthropic_server_tool(tool) for tool in anthropic] == [False, False, False, True, True]
    chat = [
        {"type": "function", "function": {"name": "f"}},
        {"type": "custom", "custom": {"name": "c"}},
        {"type": "browser_search"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    ]
    assert [(t.name, t.own) for t in option_tools("openai_compat", chat)] == [
        ("f", True),
        ("c", True),
        (None, False),
        ("str_replace_based_edit_tool", True),
    ]
    responses = [
        {"type": "namespace", "name": "crm", "tools": []},
        {"type": "tool_search"},
        {"type": "mcp", "server_label": "docs"},
        {"type": "mcp", "server_label": "docs", "require_approval": "never"},
        {"type": "image_generation"},
    ]
    assert [(t.name, t.own) for t in option_tools("openai_responses", responses)] == [
        (None, True),
        (None, False),
        (None, True),
        (None, False),
        (None, False),
    ]
