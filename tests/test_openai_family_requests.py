"""Requests the OpenAI-family endpoints answer 400 to, made before sending into ones they
take (or refused there), each through `allama.provider(...)` over a mock endpoint: JSON
Schema output beside tools (Groq, xAI before Grok 4), JSON mode without the word "JSON",
a seed outside int64, Mistral's checks of the conversation, and reasoning efforts outside
an endpoint's set (Groq, Together)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest

import allama
from allama import ChatRequest, ToolDefinition
from allama.errors import UnsupportedError
from allama.transport import Transport
from allama.types import (
    Reasoning,
    ReasoningEffort,
    RequestField,
    ResponseFormat,
    ToolCall,
    UnsupportedPolicy,
    UnsupportedStage,
    Warning,
    WarningKind,
)


class Recorder:
    """A mock endpoint that records each body and answers with `answer`."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, http: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(http.read()))
        return httpx2.Response(200, json=self.answer)

    def transport(self) -> Transport:
        return Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )


COMPLETION = {
    "id": "c-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
}

RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "m",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "{}", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
}


def provider(preset: str, **options: Any) -> tuple[Any, Recorder]:
    answer = RESPONSE if options.get("api") == "responses" else COMPLETION
    recorder = Recorder(answer)
    if preset == "azure-openai":
        options["endpoint"] = "https://res.openai.azure.com"
    target = allama.provider(preset, api_key="k", transport=recorder.transport(), **options)
    return target, recorder


def sent(
    preset: str, request: ChatRequest, *, run_async: bool = False, **options: Any
) -> tuple[dict[str, Any], tuple[Warning, ...]]:
    """The body sent for `request` and the response's warnings."""
    target, recorder = provider(preset, **options)
    response = asyncio.run(target.achat(request)) if run_async else target.chat(request)
    (body,) = recorder.bodies
    return body, tuple(response.warnings)


def about(warnings: tuple[Warning, ...], field: RequestField) -> list[tuple[WarningKind, str]]:
    return [(w.kind, w.message) for w in warnings if w.is_about(field)]


LOOKUP = ToolDefinition(
    name="lookup",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
ANSWER = ResponseFormat.for_schema(
    {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    },
    name="answer",
)


# 3. JSON Schema output beside tools: Groq (every model) and xAI before Grok 4 answer 400


@pytest.mark.parametrize(
    ("preset", "model", "display", "options"),
    [
        ("groq", "openai/gpt-oss-120b", "Groq", {}),
        ("groq", "meta-llama/llama-4-scout-17b-16e-instruct", "Groq", {}),
        ("xai", "grok-3", "xAI", {}),
        ("xai", "grok-3-mini", "xAI", {}),
        ("xai", "grok-code-fast-1", "xAI", {}),
        ("xai", "grok-3", "xAI", {"api": "responses"}),
    ],
)
@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
@pytest.mark.parametrize("run_async", [False, True])
def test_json_schema_beside_tools_is_refused_before_sending(
    preset: str,
    model: str,
    display: str,
    options: dict[str, Any],
    policy: UnsupportedPolicy,
    run_async: bool,
) -> None:
    # Neither the format nor the tools can be dropped without changing the answer: refused
    # under either policy, as Gemini 2.5 refuses JSON output beside function declarations.
    target, recorder = provider(preset, **options)
    request = (
        ChatRequest(model)
        .user("Look up x, then answer.")
        .with_tools([LOOKUP])
        .with_response_format(ANSWER)
        .with_unsupported_policy(policy)
    )
    with pytest.raises(UnsupportedError) as raised:
        asyncio.run(target.achat(request)) if run_async else target.chat(request)
    assert str(raised.value) == (
        f"cannot send `response_format`: `{model}` on {display} answers 400 to JSON Schema "
        "output beside tools"
    )
    assert raised.value.field is RequestField.RESPONSE_FORMAT
    assert raised.value.stage is UnsupportedStage.BEFORE_SENDING
    assert recorder.bodies == []


@pytest.mark.parametrize("model", ["grok-4", "grok-4-1-fast-reasoning", "grok-4.3"])
def test_grok_4_takes_json_schema_beside_tools(model: str) -> None:
    request = (
        ChatRequest(model).user("Look up x.").with_tools([LOOKUP]).with_response_format(ANSWER)
    )
    body, warnings = sent("xai", request)
    assert body["tools"][0]["function"]["name"] == "lookup"
    assert body["response_format"]["type"] == "json_schema"
    assert about(warnings, RequestField.RESPONSE_FORMAT) == []


def test_groq_json_schema_without_tools_is_sent() -> None:
    body, _ = sent(
        "groq", ChatRequest("openai/gpt-oss-120b").user("x").with_response_format(ANSWER)
    )
    assert body["response_format"]["type"] == "json_schema"


# 4. JSON mode without the word "JSON" in any message: a note that asks for it is added

NOTE = "Answer with one JSON object."


@pytest.mark.parametrize(
    ("preset", "model", "display"),
    [
        ("openai", "gpt-4o", "OpenAI"),
        ("azure-openai", "gpt-4o", "Azure OpenAI"),
        ("groq", "llama-3.3-70b-versatile", "Groq"),
        ("deepseek", "deepseek-chat", "DeepSeek"),
        ("mistral", "mistral-large-latest", "Mistral"),
        ("openrouter", "openai/gpt-4o", "OpenRouter"),
    ],
)
@pytest.mark.parametrize("run_async", [False, True])
def test_json_mode_without_the_word_gets_a_note_that_says_it(
    preset: str, model: str, display: str, run_async: bool
) -> None:
    request = (
        ChatRequest(model)
        .user("List three primary colours.")
        .with_response_format(ResponseFormat.json_object())
    )
    body, warnings = sent(preset, request, run_async=run_async)
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"] == [
        {"role": "system", "content": NOTE},
        {"role": "user", "content": "List three primary colours."},
    ]
    assert about(warnings, RequestField.RESPONSE_FORMAT) == [
        (
            WarningKind.APPROXIMATED,
            f"{display} takes JSON mode only when the messages ask for JSON; "
            f'"{NOTE}" was added to the system instructions',
        )
    ]


def test_json_mode_note_ends_the_opening_system_message() -> None:
    request = (
        ChatRequest("gpt-4o")
        .system("Be brief.")
        .user("List three primary colours.")
        .with_response_format(ResponseFormat.json_object())
    )
    body, _ = sent("openai", request)
    assert body["messages"] == [
        {"role": "system", "content": f"Be brief.\n\n{NOTE}"},
        {"role": "user", "content": "List three primary colours."},
    ]


@pytest.mark.parametrize("text", ["Answer as json.", "Give me JSON", "a Json list"])
def test_json_mode_that_the_messages_ask_for_is_sent_as_asked(text: str) -> None:
    request = ChatRequest("gpt-4o").user(text).with_response_format(ResponseFormat.json_object())
    body, warnings = sent("openai", request)
    assert body["messages"] == [{"role": "user", "content": text}]
    assert warnings == ()


def test_json_mode_asked_for_in_the_system_message_is_sent_as_asked() -> None:
    request = (
        ChatRequest("deepseek-chat")
        .system("Reply in JSON.")
        .user("Colours?")
        .with_response_format(ResponseFormat.json_object())
    )
    body, warnings = sent("deepseek", request)
    assert body["messages"][0] == {"role": "system", "content": "Reply in JSON."}
    assert warnings == ()


def test_json_mode_note_goes_first_in_the_responses_input() -> None:
    # Not in `instructions`: OpenAI looks for "json" in the input messages only.
    request = (
        ChatRequest("gpt-4o")
        .user("List three primary colours.")
        .with_response_format(ResponseFormat.json_object())
    )
    body, warnings = sent("openai", request, api="responses")
    assert "instructions" not in body
    assert body["input"] == [
        {"role": "developer", "content": NOTE},
        {"role": "user", "content": "List three primary colours."},
    ]
    assert body["text"] == {"format": {"type": "json_object"}}
    assert [kind for kind, _ in about(warnings, RequestField.RESPONSE_FORMAT)] == [
        WarningKind.APPROXIMATED
    ]


@pytest.mark.parametrize(("preset", "model"), [("vllm", "m"), ("together", "m")])
def test_json_mode_goes_as_asked_where_the_endpoint_needs_no_word(preset: str, model: str) -> None:
    request = ChatRequest(model).user("Colours?").with_response_format(ResponseFormat.json_object())
    body, warnings = sent(preset, request)
    assert body["messages"] == [{"role": "user", "content": "Colours?"}]
    assert about(warnings, RequestField.RESPONSE_FORMAT) == []


# 5. A seed outside int64 (the wire's `seed`): left out with a warning, refused under ERROR


@pytest.mark.parametrize(
    ("preset", "model", "field", "display"),
    [
        ("openai", "gpt-4o", "seed", "OpenAI"),
        ("groq", "llama-3.3-70b-versatile", "seed", "Groq"),
        ("mistral", "mistral-large-latest", "random_seed", "Mistral"),
    ],
)
@pytest.mark.parametrize("seed", [2**63, 14600885607569513846, -(2**63) - 1])
def test_a_seed_outside_int64_is_left_out(
    preset: str, model: str, field: str, display: str, seed: int
) -> None:
    body, warnings = sent(preset, ChatRequest(model).user("x").with_seed(seed))
    assert field not in body
    assert about(warnings, RequestField.SEED) == [
        (WarningKind.UNSUPPORTED, f"{display} takes a seed of 64 bits; {seed} was left out")
    ]


@pytest.mark.parametrize("seed", [-1, 2**32 - 1, 2**32 + 1234, 2**63, -(2**31)])
def test_llama_cpp_takes_a_seed_of_32_bits_and_reads_its_largest_as_random(seed: int) -> None:
    """llama.cpp's server reads `seed` as 32 bits without a sign: 1234 + 2**32 gave 1234's
    sample, and -1 or 4294967295 a random one each time."""
    body, warnings = sent("llama-cpp", ChatRequest("m").user("x").with_seed(seed))
    assert "seed" not in body
    assert about(warnings, RequestField.SEED) == [
        (
            WarningKind.UNSUPPORTED,
            "llama.cpp's server reads a seed as 32 bits without a sign, and 4294967295 (which "
            f"-1 becomes) as a random seed: it takes 0 to 4294967294; {seed} was left out",
        )
    ]


@pytest.mark.parametrize("seed", [0, 1234, 2**32 - 2])
def test_llama_cpp_sends_a_seed_it_reads_as_given(seed: int) -> None:
    body, warnings = sent("llama-cpp", ChatRequest("m").user("x").with_seed(seed))
    assert body["seed"] == seed
    assert about(warnings, RequestField.SEED) == []


@pytest.mark.parametrize("seed", [2**63 - 1, -(2**63), 0, 42])
def test_a_seed_inside_int64_is_sent(seed: int) -> None:
    body, warnings = sent("openai", ChatRequest("gpt-4o").user("x").with_seed(seed))
    assert body["seed"] == seed
    assert warnings == ()


def test_a_seed_outside_int64_is_refused_under_the_error_policy() -> None:
    target, recorder = provider("openai")
    request = (
        ChatRequest("gpt-4o")
        .user("x")
        .with_seed(2**64 - 1)
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert str(raised.value) == ("cannot send `seed`: OpenAI takes a seed of 64 bits")
    assert raised.value.field is RequestField.SEED
    assert recorder.bodies == []


# 6. Mistral's checks of the conversation: no empty assistant turn, no user turn straight
#    after a tool result, a last assistant turn only with `prefix: true`

EMPTY = "Mistral refuses an assistant turn with neither text nor tool calls; one (that only "
EMPTY += "reasoned, or said nothing) was left out"
BRIDGE = "I have the tool results."


def _bridged(role: str) -> str:
    return (
        f"Mistral refuses a {role} turn straight after a tool result; an assistant turn "
        f'saying "{BRIDGE}" was put between them'
    )


@pytest.mark.parametrize("run_async", [False, True])
def test_mistral_leaves_out_a_turn_that_only_reasoned(run_async: bool) -> None:
    request = (
        ChatRequest("magistral-medium-latest")
        .user("What is 12*12?")
        .assistant([Reasoning(text="Let me think about")])
        .user("Go on, briefly.")
    )
    body, warnings = sent("mistral", request, run_async=run_async)
    assert body["messages"] == [
        {"role": "user", "content": "What is 12*12?"},
        {"role": "user", "content": "Go on, briefly."},
    ]
    assert about(warnings, RequestField.MESSAGES) == [(WarningKind.APPROXIMATED, EMPTY)]


def test_mistral_continues_a_last_assistant_turn_with_prefix() -> None:
    request = ChatRequest("mistral-large-latest").user("Name a colour.").assistant("The colour is")
    body, warnings = sent("mistral", request)
    assert body["messages"] == [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "The colour is", "prefix": True},
    ]
    assert warnings == ()


def test_mistral_marks_only_the_last_assistant_turn() -> None:
    request = ChatRequest("mistral-large-latest").user("a").assistant("b").user("c")
    body, _ = sent("mistral", request)
    assert body["messages"][1] == {"role": "assistant", "content": "b"}


def test_other_endpoints_send_a_last_assistant_turn_as_it_is() -> None:
    request = ChatRequest("gpt-4o").user("Name a colour.").assistant("The colour is")
    body, _ = sent("openai", request)
    assert body["messages"][-1] == {"role": "assistant", "content": "The colour is"}


CALL = ToolCall(id="abcDEF123", name="lookup", arguments='{"q":"x"}')
CALL_WIRE = {
    "role": "assistant",
    "tool_calls": [
        {
            "id": "abcDEF123",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"q":"x"}'},
        }
    ],
}
RESULT_WIRE = {"role": "tool", "tool_call_id": "abcDEF123", "content": "x is 42"}


def _tool_loop() -> ChatRequest:
    return (
        ChatRequest("mistral-large-latest")
        .user("Find x")
        .assistant([CALL])
        .tool_result(CALL, "x is 42")
        .with_tools([LOOKUP])
    )


@pytest.mark.parametrize("run_async", [False, True])
def test_mistral_gets_an_assistant_turn_between_a_tool_result_and_a_user_turn(
    run_async: bool,
) -> None:
    body, warnings = sent("mistral", _tool_loop().user("Never mind."), run_async=run_async)
    assert body["messages"] == [
        {"role": "user", "content": "Find x"},
        CALL_WIRE,
        RESULT_WIRE,
        {"role": "assistant", "content": BRIDGE},
        {"role": "user", "content": "Never mind."},
    ]
    assert about(warnings, RequestField.MESSAGES) == [(WarningKind.APPROXIMATED, _bridged("user"))]


def test_mistral_moves_a_system_turn_after_a_tool_result_and_bridges_the_next_user_turn() -> None:
    """Mistral refuses a system turn after an assistant turn too: it opens the conversation."""
    body, warnings = sent("mistral", _tool_loop().system("Be brief.").user("Go on."))
    roles = [message["role"] for message in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert about(warnings, RequestField.MESSAGES) == [(WarningKind.APPROXIMATED, _bridged("user"))]


def test_mistral_tool_loop_that_ends_in_a_result_or_answer_is_sent_as_it_is() -> None:
    body, warnings = sent("mistral", _tool_loop())
    assert body["messages"] == [{"role": "user", "content": "Find x"}, CALL_WIRE, RESULT_WIRE]
    assert warnings == ()
    body, warnings = sent("mistral", _tool_loop().assistant("x is 42.").user("Thanks."))
    assert [message["role"] for message in body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert warnings == ()


def test_mistral_empty_turn_after_a_tool_result_is_left_out_and_bridged() -> None:
    request = _tool_loop().assistant([Reasoning(text="Hmm")]).user("Well?")
    body, warnings = sent("mistral", request)
    assert body["messages"][2:] == [
        RESULT_WIRE,
        {"role": "assistant", "content": BRIDGE},
        {"role": "user", "content": "Well?"},
    ]
    assert about(warnings, RequestField.MESSAGES) == [
        (WarningKind.APPROXIMATED, EMPTY),
        (WarningKind.APPROXIMATED, _bridged("user")),
    ]


def test_other_endpoints_take_a_user_turn_after_a_tool_result() -> None:
    request = (
        ChatRequest("gpt-4o")
        .user("Find x")
        .assistant([CALL])
        .tool_result(CALL, "x is 42")
        .user("Never mind.")
    )
    body, warnings = sent("openai", request)
    assert [message["role"] for message in body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "user",
    ]
    assert warnings == ()


# 8. Reasoning efforts outside an endpoint's set: mapped onto it, or refused


@pytest.mark.parametrize(
    ("preset", "model", "effort", "wire", "warning"),
    [
        # (Groq's models no row names; Llama, Kimi K2 Instruct take no effort at all.)
        ("groq", "some-lab/new-model", "minimal", "low", "approximated"),
        ("groq", "some-lab/new-model", "none", "none", None),
        ("groq", "some-lab/new-model", "medium", "medium", None),
        ("together", "Qwen/Qwen3-235B-A22B-Thinking-2507", "minimal", "low", "approximated"),
        ("together", "Qwen/Qwen3-235B-A22B-Thinking-2507", "none", None, "unsupported"),
        ("together", "Qwen/Qwen3-235B-A22B-Thinking-2507", "high", "high", None),
    ],
)
def test_reasoning_effort_is_sent_in_the_endpoints_set(
    preset: str, model: str, effort: str, wire: str | None, warning: str | None
) -> None:
    request = ChatRequest(model).user("hi").with_reasoning_effort(ReasoningEffort(effort))
    body, warnings = sent(preset, request)
    assert body.get("reasoning_effort") == wire
    display = {"groq": "Groq", "together": "Together"}[preset]
    said = f"`{model}` on {display} takes no reasoning effort `{effort}`"
    expected = {
        None: [],
        "approximated": [(WarningKind.APPROXIMATED, f"{said}; `{wire}` was sent")],
        "unsupported": [(WarningKind.UNSUPPORTED, said)],
    }[warning]
    assert about(warnings, RequestField.REASONING_EFFORT) == expected
