"""What the presets leave out, or send otherwise, where the endpoint would refuse or ignore it.

Azure AI Foundry's model-inference request schema has no `parallel_tool_calls`, `logprobs`,
`top_logprobs` or `reasoning_effort`, and the service answers 400 to a parameter outside
it. Azure OpenAI before api-version 2024-09-01-preview takes no `parallel_tool_calls` (so a
strict tool, enforced only with them off, is approximate), and before 2024-08-01-preview at
most 5 `top_logprobs`. Ollama's `/v1` turns effort `none` into `think: false`, which gpt-oss
(under a namespace too) ignores, and an older server answers 400 to `minimal`; it takes
an earlier turn's reasoning back in `reasoning`; its cloud applies no JSON mode. DeepSeek's
`reasoning_effort` takes no `none`: a model that thinks only when asked is sent thinking
`disabled`, what it does unasked.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import CapabilitySupport, ChatCapability, ChatRequest, ToolDefinition
from allama.errors import UnsupportedError
from allama.extract import EnforcementBelowError, ExtractionMode, Extractor, SchemaEnforcement
from allama.types import (
    Reasoning,
    RequestField,
    ResponseFormat,
    TextPart,
    ToolCall,
    UnsupportedPolicy,
    WarningKind,
)

ANSWER = {
    "id": "c-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}
VALUE = {"role": "assistant", "content": '{"value": "yes"}'}


class City(BaseModel):
    name: str


WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
FOUNDRY = "https://res.services.ai.azure.com/models"
AZURE = "https://res.openai.azure.com"


def _said(response: Any) -> list[tuple[RequestField | None, WarningKind, str]]:
    return [(w.subject.field, w.kind, w.message) for w in response.warnings]


# Azure AI Foundry


def test_foundry_sends_no_field_outside_its_request_schema() -> None:
    target, recorder = provider("azure-foundry", (200, ANSWER), endpoint=FOUNDRY)
    request = (
        ChatRequest("Llama-3.3-70B-Instruct", reasoning_effort="low")
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .with_parallel_tool_calls(False)
        .with_logprobs(3)
    )
    response = target.chat(request)
    sent = recorder.bodies[0]
    assert not {"parallel_tool_calls", "logprobs", "top_logprobs", "reasoning_effort"} & set(sent)
    model = "`Llama-3.3-70B-Instruct` on Azure AI Foundry"
    assert _said(response) == [
        (
            RequestField.REASONING_EFFORT,
            WarningKind.UNSUPPORTED,
            f"{model} takes no reasoning effort",
        ),
        (RequestField.LOGPROBS, WarningKind.UNSUPPORTED, f"{model} reports no log-probabilities"),
        (
            RequestField.PARALLEL_TOOL_CALLS,
            WarningKind.UNSUPPORTED,
            f"{model} takes no `parallel_tool_calls`",
        ),
    ]
    for capability in (ChatCapability.LOGPROBS, ChatCapability.PARALLEL_TOOL_CALLS):
        assert target.chat_capability("any", capability) is CapabilitySupport.UNSUPPORTED


def test_foundry_refuses_them_before_sending_under_error() -> None:
    target, recorder = provider("azure-foundry", (200, ANSWER), endpoint=FOUNDRY)
    request = ChatRequest("Phi-4", unsupported_policy=UnsupportedPolicy.ERROR).user("x")
    for asked in (
        request.with_reasoning_effort("high"),
        request.with_logprobs(0),
        request.with_tools([WEATHER]).with_parallel_tool_calls(True),
    ):
        with pytest.raises(UnsupportedError):
            target.chat(asked)
    assert recorder.bodies == []


def test_decide_asks_foundry_for_no_log_probabilities() -> None:
    answer = {**ANSWER, "choices": [{**ANSWER["choices"][0], "message": VALUE}]}
    target, recorder = provider("azure-foundry", (200, answer), endpoint=FOUNDRY)
    question = ChatRequest("gpt-4o").user("Is Paris in France?")
    with pytest.raises(UnsupportedError) as refused:
        allama.decide(target, Literal["yes", "no"], question, probabilities=True)
    assert str(refused.value) == (
        "probabilities=True, but `gpt-4o` on azure-foundry reports no log-probabilities"
    )
    assert recorder.bodies == []
    decision = allama.decide(target, Literal["yes", "no"], question)
    assert (decision.value, decision.probabilities_missing) == (
        "yes",
        "`gpt-4o` on azure-foundry reports no log-probabilities",
    )
    assert not {"logprobs", "top_logprobs"} & set(recorder.bodies[0])


# Azure OpenAI's older api-versions


@pytest.mark.parametrize(
    ("version", "name"),
    [
        ("2024-06-01", "Azure OpenAI before api-version 2024-08-01-preview"),
        ("2024-05-01-preview", "Azure OpenAI before api-version 2024-08-01-preview"),
        ("2024-08-01-preview", "Azure OpenAI before api-version 2024-09-01-preview"),
    ],
)
def test_an_api_version_before_2024_09_01_preview_is_sent_no_parallel_tool_calls(
    version: str, name: str
) -> None:
    target, recorder = provider("azure-openai", (200, ANSWER), endpoint=AZURE, api_version=version)
    request = ChatRequest("gpt-4o").user("Weather?").with_tools([WEATHER])
    response = target.chat(request.with_parallel_tool_calls(False))
    assert "parallel_tool_calls" not in recorder.bodies[0]
    assert _said(response) == [
        (
            RequestField.PARALLEL_TOOL_CALLS,
            WarningKind.UNSUPPORTED,
            f"`gpt-4o` on {name} takes no `parallel_tool_calls`",
        )
    ]
    unsupported = CapabilitySupport.UNSUPPORTED
    assert target.chat_capability("gpt-4o", ChatCapability.PARALLEL_TOOL_CALLS) is unsupported
    # Strict tools, which go with `parallel_tool_calls: false` where it is taken.
    strict = WEATHER.model_copy(update={"strict": True})
    target.chat(ChatRequest("gpt-4o").user("Weather?").with_tools([strict]))
    assert "parallel_tool_calls" not in recorder.bodies[1]


STRICT_WEATHER = WEATHER.model_copy(
    update={
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    }
)


def unserialised(subject: str) -> str:
    return (
        "Azure OpenAI before api-version 2024-09-01-preview does not enforce `strict` on tools "
        "while parallel tool calls are on, and takes no `parallel_tool_calls` to turn them off: "
        f"{subject} was sent with it, and its arguments follow the schema as far as the model "
        "does (from api-version 2024-09-01-preview on, `parallel_tool_calls: false` goes beside "
        "it to have it enforced)"
    )


UNSERIALISED = unserialised("tool `weather`")


def test_a_strict_tool_on_a_version_that_cannot_turn_parallel_calls_off_is_approximate() -> None:
    """Azure enforces `strict` on tools only beside `parallel_tool_calls: false`, which
    2024-08-01-preview, the first version of strict tools, cannot take."""
    target, recorder = provider(
        "azure-openai", (200, ANSWER), endpoint=AZURE, api_version="2024-08-01-preview"
    )
    request = ChatRequest("gpt-4o").user("Weather?").with_tools([STRICT_WEATHER])
    response = target.chat(request)
    sent = recorder.bodies[0]
    assert [tool["function"]["strict"] for tool in sent["tools"]] == [True]
    assert "parallel_tool_calls" not in sent
    assert _said(response) == [(RequestField.TOOLS, WarningKind.APPROXIMATED, UNSERIALISED)]
    # Asked to turn them off: refused, and the tool still not enforced.
    response = target.chat(request.with_parallel_tool_calls(False))
    assert "parallel_tool_calls" not in recorder.bodies[1]
    assert _said(response) == [
        (
            RequestField.PARALLEL_TOOL_CALLS,
            WarningKind.UNSUPPORTED,
            "`gpt-4o` on Azure OpenAI before api-version 2024-09-01-preview takes no "
            "`parallel_tool_calls`",
        ),
        (RequestField.TOOLS, WarningKind.APPROXIMATED, UNSERIALISED),
    ]
    # A tool that is not strict has nothing to lose.
    response = target.chat(ChatRequest("gpt-4o").user("Weather?").with_tools([WEATHER]))
    assert response.warnings == ()


@pytest.mark.parametrize(
    ("version", "enforcement", "said"),
    [
        (
            "2024-08-01-preview",
            SchemaEnforcement.APPROXIMATE,
            [unserialised("the schema of `City`")],
        ),
        ("2024-09-01-preview", SchemaEnforcement.EXACT, []),
        ("2024-10-21", SchemaEnforcement.EXACT, []),
    ],
)
def test_a_forced_tool_extraction_is_exact_only_where_parallel_calls_turn_off(
    version: str, enforcement: SchemaEnforcement, said: list[str]
) -> None:
    target, recorder = provider("azure-openai", (200, ANSWER), endpoint=AZURE, api_version=version)
    request = ChatRequest("gpt-4o").user("Paris?").with_option(ExtractionMode.FORCED_TOOL)
    plan = Extractor().plan(target, City, request)
    assert (plan.mode, plan.enforcement) == (ExtractionMode.FORCED_TOOL, enforcement)
    assert [w.message for w in plan.degradations] == said
    if enforcement is not SchemaEnforcement.EXACT:
        with pytest.raises(EnforcementBelowError):
            Extractor(min_enforcement=SchemaEnforcement.EXACT).extract(target, City, request)
        assert recorder.bodies == []


@pytest.mark.parametrize("version", ["2024-09-01-preview", "2024-10-21", "2025-04-01-preview"])
def test_a_later_api_version_takes_parallel_tool_calls(version: str) -> None:
    target, recorder = provider("azure-openai", (200, ANSWER), endpoint=AZURE, api_version=version)
    request = ChatRequest("gpt-4o").user("Weather?").with_tools([WEATHER])
    response = target.chat(request.with_parallel_tool_calls(False))
    assert recorder.bodies[0]["parallel_tool_calls"] is False
    assert response.warnings == ()


@pytest.mark.parametrize(
    ("version", "top", "said"),
    [
        (
            "2024-06-01",
            5,
            "Azure OpenAI before api-version 2024-08-01-preview takes at most 5 alternatives "
            "per token (`top_logprobs`); 5 were asked for, not 20",
        ),
        ("2024-08-01-preview", 20, None),
        ("2024-10-21", 20, None),
    ],
)
def test_top_logprobs_are_cut_to_what_the_api_version_takes(
    version: str, top: int, said: str | None
) -> None:
    target, recorder = provider("azure-openai", (200, ANSWER), endpoint=AZURE, api_version=version)
    response = target.chat(ChatRequest("gpt-4o").user("x").with_logprobs(20))
    assert (recorder.bodies[0]["logprobs"], recorder.bodies[0]["top_logprobs"]) == (True, top)
    expected = [] if said is None else [(RequestField.LOGPROBS, WarningKind.APPROXIMATED, said)]
    assert _said(response) == expected
    # Within the cap, as asked.
    target.chat(ChatRequest("gpt-4o").user("x").with_logprobs(3))
    assert recorder.bodies[1]["top_logprobs"] == 3


# Ollama's OpenAI-compatible endpoint


@pytest.mark.parametrize("model", ["gpt-oss:20b", "gpt-oss:120b-cloud"])
def test_gpt_oss_asked_for_no_reasoning_is_sent_its_lowest_effort_with_a_refusal(
    model: str,
) -> None:
    target, recorder = provider("ollama-openai", (200, ANSWER))
    response = target.chat(ChatRequest(model, reasoning_effort="none").user("x"))
    assert recorder.bodies[0]["reasoning_effort"] == "low"
    assert _said(response) == [
        (
            RequestField.REASONING_EFFORT,
            WarningKind.UNSUPPORTED,
            f"`{model}` on Ollama's OpenAI-compatible endpoint cannot turn reasoning off (it "
            "reasons whatever it is told); its lowest effort, `low`, was sent",
        )
    ]
    strict = ChatRequest(model, reasoning_effort="none", unsupported_policy=UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError) as refused:
        target.chat(strict.user("x"))
    assert refused.value.field is RequestField.REASONING_EFFORT
    assert len(recorder.bodies) == 1


@pytest.mark.parametrize(
    "model", ["library/gpt-oss:20b", "hf.co/unsloth/gpt-oss-20b-GGUF", "me/gpt-oss:120b-cloud"]
)
def test_gpt_oss_is_known_under_a_namespace(model: str) -> None:
    """Matched on the name after the last `/`, as the Ollama preset matches it."""
    target, recorder = provider("ollama-openai", (200, ANSWER))
    response = target.chat(ChatRequest(model, reasoning_effort="none").user("x"))
    assert recorder.bodies[0]["reasoning_effort"] == "low"
    assert _said(response) == [
        (
            RequestField.REASONING_EFFORT,
            WarningKind.UNSUPPORTED,
            f"`{model}` on Ollama's OpenAI-compatible endpoint cannot turn reasoning off (it "
            "reasons whatever it is told); its lowest effort, `low`, was sent",
        )
    ]


@pytest.mark.parametrize(
    ("model", "said"),
    [
        (
            "me/minimax-m2:cloud",
            [
                (
                    RequestField.RESPONSE_FORMAT,
                    WarningKind.UNSUPPORTED,
                    "Ollama's OpenAI-compatible endpoint does not apply JSON mode for "
                    "`me/minimax-m2:cloud`; `json_object` was sent, and the output is not "
                    "constrained to JSON",
                )
            ],
        ),
        ("library/qwen3:8b", []),
    ],
)
def test_cloud_models_are_still_known_under_a_namespace(
    model: str, said: list[tuple[RequestField | None, WarningKind, str]]
) -> None:
    target, _ = provider("ollama-openai", (200, ANSWER))
    request = ChatRequest(model).user("x").with_response_format(ResponseFormat.json_object())
    assert _said(target.chat(request)) == said


@pytest.mark.parametrize(("model", "none"), [("gpt-oss:20b", "low"), ("qwen3:8b", "none")])
def test_minimal_goes_to_ollama_as_low(model: str, none: str) -> None:
    target, recorder = provider("ollama-openai", (200, ANSWER))
    response = target.chat(ChatRequest(model, reasoning_effort="minimal").user("x"))
    assert recorder.bodies[0]["reasoning_effort"] == "low"
    assert _said(response) == [
        (
            RequestField.REASONING_EFFORT,
            WarningKind.APPROXIMATED,
            f"`{model}` on Ollama's OpenAI-compatible endpoint takes no reasoning effort "
            "`minimal`; `low` was sent",
        )
    ]
    for effort in ("low", "medium", "high"):
        response = target.chat(ChatRequest(model, reasoning_effort=effort).user("x"))
        assert (recorder.bodies[-1]["reasoning_effort"], response.warnings) == (effort, ())
    target.chat(ChatRequest(model, reasoning_effort="none").user("x"))
    assert recorder.bodies[-1]["reasoning_effort"] == none


def test_ollama_takes_earlier_reasoning_back() -> None:
    target, recorder = provider("ollama-openai", (200, ANSWER))
    call = ToolCall(id="call_1", name="weather", arguments='{"city": "Paris"}')
    request = (
        ChatRequest("qwen3:8b")
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .assistant([Reasoning(text="Look it up."), call])
        .tool_result(call, "Sunny")
        .assistant([Reasoning(text="Done."), TextPart(text="Sunny.")])
        .user("Thanks")
        .assistant("Anything else?")
        .user("No")
    )
    response = target.chat(request)
    turns = [m for m in recorder.bodies[0]["messages"] if m["role"] == "assistant"]
    assert [turn.get("reasoning") for turn in turns] == ["Look it up.", "Done.", None]
    assert response.warnings == ()


@pytest.mark.parametrize(
    ("base_url", "model"),
    [
        ("http://localhost:11434/v1", "gpt-oss:120b-cloud"),
        ("http://localhost:11434/v1", "minimax-m2:cloud"),
        ("https://ollama.com/v1", "gpt-oss:120b"),
    ],
)
def test_json_mode_on_ollamas_cloud_is_said_not_applied(base_url: str, model: str) -> None:
    target, recorder = provider("ollama-openai", (200, ANSWER), base_url=base_url)
    request = ChatRequest(model).user("x").with_response_format(ResponseFormat.json_object())
    response = target.chat(request)
    assert recorder.bodies[0]["response_format"] == {"type": "json_object"}
    assert _said(response) == [
        (
            RequestField.RESPONSE_FORMAT,
            WarningKind.UNSUPPORTED,
            f"Ollama's OpenAI-compatible endpoint does not apply JSON mode for `{model}`; "
            "`json_object` was sent, and the output is not constrained to JSON",
        )
    ]
    with pytest.raises(UnsupportedError):
        target.chat(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert len(recorder.bodies) == 1


def test_json_mode_on_a_local_model_goes_without_a_word() -> None:
    target, recorder = provider("ollama-openai", (200, ANSWER))
    request = (
        ChatRequest("gpt-oss:120b").user("x").with_response_format(ResponseFormat.json_object())
    )
    response = target.chat(request)
    assert recorder.bodies[0]["response_format"] == {"type": "json_object"}
    assert response.warnings == ()


# DeepSeek


@pytest.mark.parametrize("model", ["deepseek-chat", "my-ft"])
def test_effort_none_on_a_model_that_thinks_when_asked_is_sent_thinking_off(model: str) -> None:
    target, recorder = provider("deepseek", (200, ANSWER))
    request = ChatRequest(
        model, reasoning_effort="none", unsupported_policy=UnsupportedPolicy.ERROR
    ).user("hi")
    response = target.chat(request)
    sent = recorder.bodies[0]
    assert sent["thinking"] == {"type": "disabled"}
    assert "reasoning_effort" not in sent
    assert response.warnings == ()


def test_a_model_of_no_row_takes_deepseeks_efforts() -> None:
    target, recorder = provider("deepseek", (200, ANSWER))
    response = target.chat(ChatRequest("my-ft", reasoning_effort="medium").user("hi"))
    assert recorder.bodies[0]["reasoning_effort"] == "high"
    assert _said(response) == [
        (
            RequestField.REASONING_EFFORT,
            WarningKind.APPROXIMATED,
            "`my-ft` on DeepSeek takes no reasoning effort `medium`; `high` was sent",
        )
    ]
