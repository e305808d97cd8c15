"""What a probe of the OpenAI-compatible family found, fixed.

- Azure OpenAI before api-version 2024-12-01-preview (the GA 2024-10-21, allama's default,
  included) has no `developer` role and no `file` content parts, and answers 400 to either:
  a developer message goes as `system`, a PDF is left out with a warning.
- A strict tool sent with the caller's `parallel_tool_calls: true` where strict tools hold
  only without parallel calls (OpenAI, Azure) keeps the caller's `true`, but is reported
  approximate, and so is an extraction's plan and record.
- OpenRouter's `reasoning_details` go back, unmodified, on the assistant turn made from the
  response that carried them, to OpenRouter alone.
- `reasoning_effort="none"` asked of a model that never reasons sends nothing and says
  nothing, under either policy.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import ChatRequest, ExtractionMode, Extractor, UnsupportedError, UnsupportedPolicy
from allama.types import (
    AssistantMessage,
    DocumentPart,
    RequestField,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
    Warning,
    WarningKind,
)

ENDPOINT = "https://res.openai.azure.com"


def completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "gen-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


OK = completion({"role": "assistant", "content": "ok"})


def fields(warnings: tuple[Warning, ...] | list[Warning]) -> list[tuple[str, str]]:
    return [(str(getattr(w.subject, "field", "")), str(w.kind)) for w in warnings]


# 1. Azure OpenAI before the developer role


def _azure_roles(**options: Any) -> list[str]:
    target, recorder = provider("azure-openai", (200, OK), endpoint=ENDPOINT, **options)
    response = target.chat(ChatRequest("dep1").developer("Answer briefly.").user("hi"))
    assert response.warnings == ()  # the role is a spelling, nothing is lost
    return [message["role"] for message in recorder.bodies[0]["messages"]]


def test_a_developer_message_goes_as_system_before_the_version_with_the_role() -> None:
    # Preview versions sort by their date: 2024-10-01-preview is before 2024-10-21's GA,
    # both before 2024-12-01-preview; the v1 API (no api-version) has the role.
    roles = {
        version: _azure_roles(**({"api_version": version} if version else {}))[0]
        for version in (
            None,  # the default, 2024-10-21
            "2024-06-01",
            "2024-08-01-preview",
            "2024-10-01-preview",
            "2024-10-21",
            "2024-12-01-preview",
            "2025-04-01-preview",
        )
    }
    assert roles == {
        None: "system",
        "2024-06-01": "system",
        "2024-08-01-preview": "system",
        "2024-10-01-preview": "system",
        "2024-10-21": "system",
        "2024-12-01-preview": "developer",
        "2025-04-01-preview": "developer",
    }
    target, recorder = provider("azure-openai", (200, OK), endpoint=f"{ENDPOINT}/openai/v1")
    target.chat(ChatRequest("dep1").developer("Answer briefly.").user("hi"))
    assert recorder.bodies[0]["messages"][0] == {"role": "developer", "content": "Answer briefly."}


PDF = DocumentPart(data=b"%PDF-1.4 ...", media_type="application/pdf")


def _pdf_request(policy: UnsupportedPolicy = UnsupportedPolicy.WARN) -> ChatRequest:
    request = ChatRequest("dep1").push(UserMessage(content=(TextPart(text="summarise"), PDF)))
    return request.model_copy(update={"unsupported_policy": policy})


def test_a_pdf_is_left_out_with_a_warning_on_the_ga_version() -> None:
    target, recorder = provider("azure-openai", (200, OK), endpoint=ENDPOINT)
    planned = target.validate_chat_request(_pdf_request())
    response = target.chat(_pdf_request())
    assert recorder.bodies[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "summarise"}]}
    ]
    for warnings in (planned.warnings, response.warnings):
        assert fields(warnings) == [("documents", "unsupported")]
        assert warnings[0].message == (
            "Azure OpenAI takes no PDF documents (they go from api-version 2024-12-01-preview "
            "on); it was left out"
        )


def test_a_pdf_left_out_before_the_earliest_gates_names_the_version_that_takes_it() -> None:
    target, _ = provider("azure-openai", (200, OK), endpoint=ENDPOINT, api_version="2024-06-01")
    [warning] = target.chat(_pdf_request()).warnings
    assert warning.message == (
        "Azure OpenAI before api-version 2024-08-01-preview takes no PDF documents (they go "
        "from api-version 2024-12-01-preview on); it was left out"
    )


def test_a_pdf_is_refused_before_sending_on_the_ga_version_under_the_error_policy() -> None:
    target, recorder = provider("azure-openai", (200, OK), endpoint=ENDPOINT)
    with pytest.raises(UnsupportedError) as raised:
        target.chat(_pdf_request(UnsupportedPolicy.ERROR))
    assert raised.value.field is RequestField.DOCUMENTS
    assert recorder.bodies == []


def test_a_pdf_goes_as_a_file_part_from_the_version_with_the_developer_role() -> None:
    target, recorder = provider(
        "azure-openai", (200, OK), endpoint=ENDPOINT, api_version="2024-12-01-preview"
    )
    response = target.chat(_pdf_request())
    parts = recorder.bodies[0]["messages"][0]["content"]
    assert [part["type"] for part in parts] == ["text", "file"]
    assert response.warnings == ()


# 2. Strict tools under the caller's parallel calls


STRICT = ToolDefinition(
    name="f",
    parameters={"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    strict=True,
)
LOOSE = ToolDefinition(name="g", parameters={"type": "object", "properties": {}})


def _tools_request(parallel: bool | None, *tools: ToolDefinition) -> ChatRequest:
    return (
        ChatRequest("gpt-4o")
        .user("hi")
        .model_copy(update={"tools": tools, "parallel_tool_calls": parallel})
    )


def _parallel_warning(display: str, name: str) -> str:
    return (
        f"{display} does not enforce `strict` on tools while parallel tool calls are on: "
        f"tool `{name}` was sent with it beside `parallel_tool_calls: true`, as asked, and its "
        "arguments follow the schema as far as the model does (leave `parallel_tool_calls` "
        "unset, or false, to have it enforced)"
    )


@pytest.mark.parametrize(
    ("preset", "options", "display"),
    [
        ("openai", {}, "OpenAI"),
        ("azure-openai", {"endpoint": ENDPOINT}, "Azure OpenAI"),
    ],
)
def test_the_callers_parallel_calls_go_and_the_strict_tool_is_approximate(
    preset: str, options: dict[str, Any], display: str
) -> None:
    target, recorder = provider(preset, (200, OK), **options)
    sent: dict[bool | None, Any] = {}
    said: dict[bool | None, list[str]] = {}
    for parallel in (None, False, True):
        response = target.chat(_tools_request(parallel, STRICT, LOOSE))
        body = recorder.bodies[-1]
        sent[parallel] = (body.get("parallel_tool_calls"), body["tools"][0]["function"]["strict"])
        said[parallel] = [w.message for w in response.warnings]
        assert all(w.is_about(RequestField.TOOLS) for w in response.warnings)
        assert all(w.kind is WarningKind.APPROXIMATED for w in response.warnings)
    assert sent == {None: (False, True), False: (False, True), True: (True, True)}
    assert said == {None: [], False: [], True: [_parallel_warning(display, "f")]}
    # Nothing strict, nothing to say.
    assert target.chat(_tools_request(True, LOOSE)).warnings == ()
    assert recorder.bodies[-1]["parallel_tool_calls"] is True


def test_an_endpoint_whose_strict_tools_hold_under_parallel_calls_says_nothing() -> None:
    target, recorder = provider("openrouter", (200, OK))
    response = target.chat(_tools_request(True, STRICT))
    assert recorder.bodies[0]["parallel_tool_calls"] is True
    assert not any("parallel" in w.message for w in response.warnings)


def test_the_responses_api_says_the_same_of_the_callers_parallel_calls() -> None:
    target = allama.provider("openai", api_key="k", api="responses")
    http, warnings = target._prepare(_tools_request(True, STRICT, LOOSE), stream=False)
    assert http.body["parallel_tool_calls"] is True
    assert [tool["strict"] for tool in http.body["tools"]] == [True, False]
    assert [w.message for w in warnings] == [_parallel_warning("OpenAI", "f")]
    http, warnings = target._prepare(_tools_request(None, STRICT), stream=False)
    assert http.body["parallel_tool_calls"] is False
    assert warnings == []


class P(BaseModel):
    a: str


CALLED = completion(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "submit_structured_output", "arguments": '{"a": "x"}'},
            }
        ],
    },
    "tool_calls",
)


@pytest.mark.parametrize(
    ("preset", "options"), [("openai", {}), ("azure-openai", {"endpoint": ENDPOINT})]
)
def test_a_forced_tool_extraction_under_parallel_calls_is_planned_and_recorded_approximate(
    preset: str, options: dict[str, Any]
) -> None:
    target, recorder = provider(preset, (200, CALLED), **options)
    found: dict[bool | None, tuple[str, str, bool]] = {}
    for parallel in (None, True):
        request = (
            ChatRequest("gpt-4o")
            .user("x")
            .with_option(ExtractionMode.FORCED_TOOL)
            .model_copy(update={"parallel_tool_calls": parallel})
        )
        plan = Extractor().plan(target, P, request)
        result = Extractor().extract(target, P, request)
        assert result.value == P(a="x")
        found[parallel] = (
            plan.enforcement.value,
            result.metadata.enforcement.value,
            recorder.bodies[-1]["parallel_tool_calls"],
        )
    assert found == {None: ("exact", "exact", False), True: ("approximate", "approximate", True)}


# 3. OpenRouter's reasoning details go back


DETAILS = [
    {
        "type": "reasoning.text",
        "text": "I will call the tool.",
        "signature": "sig-abc",
        "format": "anthropic-claude-v1",
        "index": 0,
    },
    {"type": "reasoning.encrypted", "data": "gAAAA==", "id": "rs_1", "format": "x", "index": 1},
]
CALL = {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
REASONED = completion(
    {
        "role": "assistant",
        "content": "",
        "reasoning": "I will call the tool.",
        "reasoning_details": DETAILS,
        "tool_calls": [CALL],
        "annotations": [{"type": "url_citation", "url_citation": {"url": "https://a"}}],
    },
    "tool_calls",
)
WEATHER = ToolDefinition(name="weather", parameters={"type": "object", "properties": {}})


def _follow_up(turn: AssistantMessage) -> ChatRequest:
    request = ChatRequest("anthropic/claude-sonnet-4").user("Weather?")
    request = request.model_copy(update={"tools": (WEATHER,)})
    return request.push(turn, ToolMessage(tool_call_id="toolu_1", content="sunny"))


def test_the_reasoning_details_go_back_unmodified_on_the_assistant_turn() -> None:
    target, recorder = provider("openrouter", (200, REASONED), (200, OK))
    request = ChatRequest("anthropic/claude-sonnet-4").user("Weather?")
    first = target.chat(request.model_copy(update={"tools": (WEATHER,)}))
    turn = first.to_assistant_message()
    # What goes back, and nothing else of what the response kept (its citations).
    assert turn.provider_data == {"openrouter": {"reasoning_details": DETAILS}}
    target.chat(_follow_up(turn))
    assert recorder.bodies[1]["messages"][1] == {
        "role": "assistant",
        "tool_calls": [CALL],
        "reasoning_details": DETAILS,
    }


def _sse(*chunks: dict[str, Any]) -> bytes:
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return "".join([*events, "data: [DONE]\n\n"]).encode()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "gen-1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def test_a_streamed_turns_reasoning_details_go_back_too() -> None:
    stream = _sse(
        _chunk({"role": "assistant", "reasoning": "I will", "reasoning_details": [DETAILS[0]]}),
        _chunk({"tool_calls": [{"index": 0, **CALL}]}),
        _chunk({}, "tool_calls"),
    )
    target, recorder = provider("openrouter", (200, stream), (200, OK))
    request = ChatRequest("anthropic/claude-sonnet-4").user("Weather?")
    with target.chat_stream(request.model_copy(update={"tools": (WEATHER,)})) as events:
        first = events.response()
    target.chat(_follow_up(first.to_assistant_message()))
    assert recorder.bodies[1]["messages"][1]["reasoning_details"] == [DETAILS[0]]


def _turn(namespace: str) -> AssistantMessage:
    call = ToolCall(id="toolu_1", name="weather", arguments="{}")
    return AssistantMessage(
        content=(call,), provider_data={namespace: {"reasoning_details": DETAILS}}
    )


@pytest.mark.parametrize(
    ("preset", "namespace", "goes"),
    [
        ("openrouter", "openrouter", True),
        # Another provider's, or OpenRouter's sent elsewhere: never.
        ("openrouter", "openai", False),
        ("openai", "openrouter", False),
        ("groq", "openrouter", False),
    ],
)
def test_the_reasoning_details_go_back_to_the_provider_of_their_namespace_alone(
    preset: str, namespace: str, goes: bool
) -> None:
    target, recorder = provider(preset, (200, OK))
    target.chat(_follow_up(_turn(namespace)))
    assert ("reasoning_details" in recorder.bodies[0]["messages"][1]) is goes


# 4. No reasoning asked of a model that never reasons


@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_effort_none_of_a_model_that_never_reasons_sends_and_says_nothing(
    policy: UnsupportedPolicy, api: str
) -> None:
    target = allama.provider("openai", api_key="k", api=api)
    for model in ("gpt-4o", "gpt-4.1"):
        request = (
            ChatRequest(model)
            .user("hi")
            .model_copy(update={"reasoning_effort": "none", "unsupported_policy": policy})
        )
        http, warnings = target._prepare(request, stream=False)
        assert warnings == []
        assert "reasoning_effort" not in http.body and "reasoning" not in http.body
    # An effort other than `none` is still refused there.
    low = (
        ChatRequest("gpt-4o")
        .user("hi")
        .model_copy(update={"reasoning_effort": "low", "unsupported_policy": policy})
    )
    if policy is UnsupportedPolicy.ERROR:
        with pytest.raises(UnsupportedError):
            target._prepare(low, stream=False)
    else:
        _, warnings = target._prepare(low, stream=False)
        assert [w.message for w in warnings] == ["`gpt-4o` on OpenAI takes no reasoning effort"]
