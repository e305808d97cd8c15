"""Encoding for Anthropic Messages: the body `POST /v1/messages` gets, and the warnings and
refusals of what a Claude family cannot honour."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field, create_model

import allama
from allama import ChatRequest, ExtractionMode, Extractor
from allama.errors import InvalidRequestError, UnsupportedError
from allama.providers import HttpProvider
from allama.types import (
    AssistantMessage,
    DocumentPart,
    ImagePart,
    Reasoning,
    RequestField,
    ResponseFormat,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    UnsupportedStage,
    UserMessage,
    Warning,
    WarningKind,
)

KEY = "sk-ant-test-1234"
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
MAP = {
    "type": "object",
    "properties": {"counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
    "required": ["counts"],
}


def anthropic(**options: Any) -> HttpProvider:
    return allama.provider("anthropic", api_key=KEY, **options)


def encode(
    request: ChatRequest, *, stream: bool = False, name: str = "anthropic"
) -> tuple[str, dict[str, str], dict[str, Any], list[Warning]]:
    target = allama.provider(name, api_key=KEY, base_url="https://gw.example.com")
    http, warnings = target._prepare(request, stream=stream)
    # The body is what goes on the wire: compact JSON.
    assert json.loads(http.content) == http.body
    return http.url, dict(http.headers), http.body, warnings


def fields(warnings: list[Warning]) -> list[tuple[str, str]]:
    return [(str(getattr(w.subject, "field", "")), str(w.kind)) for w in warnings]


def test_url_headers_and_the_required_max_tokens() -> None:
    url, headers, body, warnings = encode(ChatRequest("claude-sonnet-4-5").user("Hi"))
    assert url == "https://gw.example.com/v1/messages"
    assert headers == {
        "content-type": "application/json",
        "accept": "application/json",
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
    }
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 16384,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    assert warnings == []


def test_the_default_max_tokens_stays_within_the_family_limit() -> None:
    _, _, body, _ = encode(ChatRequest("claude-3-haiku-20240307").user("Hi"))
    assert body["max_tokens"] == 4096
    _, _, body, _ = encode(
        ChatRequest("claude-3-haiku-20240307").user("Hi").with_max_output_tokens(50)
    )
    assert body["max_tokens"] == 50


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        (None, "https://api.anthropic.com/v1/messages"),
        (
            "https://gateway.ai.cloudflare.com/v1/acct/gw/anthropic",
            "https://gateway.ai.cloudflare.com/v1/acct/gw/anthropic/v1/messages",
        ),
        ("https://proxy.example.com/v1/", "https://proxy.example.com/v1/messages"),
    ],
)
def test_base_urls_are_taken_as_the_vendor_sdk_takes_them(base_url: str | None, url: str) -> None:
    target = anthropic(base_url=base_url)
    http, _ = target._prepare(ChatRequest("claude-sonnet-4-5").user("Hi"), stream=False)
    assert http.url == url


def test_foundry_resource_urls_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_FOUNDRY_API_KEY", KEY)
    target = allama.provider("azure-anthropic", endpoint="https://res.services.ai.azure.com")
    http, _ = target._prepare(ChatRequest("claude-sonnet-4-5").user("Hi"), stream=False)
    assert http.url == "https://res.services.ai.azure.com/anthropic/v1/messages"
    assert http.headers["x-api-key"] == KEY
    by_name = allama.provider("azure-anthropic", account_id="res")
    assert by_name.base_url == "https://res.services.ai.azure.com/anthropic/v1"


def test_system_messages_go_to_the_top_and_later_ones_are_moved_with_a_warning() -> None:
    request = ChatRequest("claude-sonnet-4-5").system("Be brief.").user("Hi").system("In French.")
    _, _, body, warnings = encode(request)
    assert body["system"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "In French."},
    ]
    assert body["messages"] == [{"role": "user", "content": "Hi"}]
    assert fields(warnings) == [("system", "approximated")]


def test_images_by_url_bytes_and_data_url() -> None:
    request = ChatRequest("claude-sonnet-4-5").user(
        "What is this?",
        ImagePart(url="https://example.com/cat.png"),
        ImagePart(data=b"\x89PNG", media_type="image/png"),
        ImagePart(url="data:image/jpeg;base64,/9j/"),
    )
    _, _, body, _ = encode(request)
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="},
        },
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}},
    ]


def test_an_image_type_claude_does_not_read_is_refused_before_sending() -> None:
    request = ChatRequest("claude-sonnet-4-5").user(
        "x", ImagePart(data=b"BM", media_type="image/bmp")
    )
    with pytest.raises(InvalidRequestError, match="JPEG, PNG, GIF and WebP images, not image/bmp"):
        encode(request)


def test_tool_turns_thinking_and_results_merge_into_alternating_turns() -> None:
    call = ToolCall.of("toolu_1", "lookup", {"city": "Paris", "n": 2})
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Weather?")
        .assistant(
            [Reasoning(text="Let me look.", signature="sig=="), TextPart(text="Looking."), call]
        )
        .tool_result(call, "18C")
        .tool_result("toolu_2", "failed", is_error=True)
        .user("Thanks")
    )
    _, _, body, warnings = encode(request)
    assert body["messages"] == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Let me look.", "signature": "sig=="},
                {"type": "text", "text": "Looking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "lookup",
                    "input": {"city": "Paris", "n": 2},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "failed",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks"},
            ],
        },
    ]
    assert warnings == []


def test_redacted_thinking_goes_back_verbatim_and_unsigned_reasoning_is_left_out() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .push(
            AssistantMessage(
                content=(
                    Reasoning(encrypted_content="EncRyPt"),
                    Reasoning(text="mine"),
                    TextPart(text="Hello"),
                )
            )
        )
        .user("Again")
    )
    _, _, body, warnings = encode(request)
    assert body["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "EncRyPt"},
        {"type": "text", "text": "Hello"},
    ]
    assert fields(warnings) == [("reasoning", "approximated")]


def test_tool_call_arguments_that_are_not_an_object_are_refused() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .assistant([ToolCall(id="t1", name="f", arguments="[1]")])
    )
    with pytest.raises(
        InvalidRequestError, match="arguments of tool call `t1` are not a JSON object"
    ):
        encode(request.user("next"))


def test_tools_strict_and_tool_choice() -> None:
    tools = [
        ToolDefinition(name="person", parameters=PERSON, description="A person", strict=True),
        ToolDefinition(name="free", parameters=MAP),
    ]
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .with_tools(tools)
        .with_tool_choice(ToolChoice.tool("person"))
        .with_parallel_tool_calls(False)
    )
    _, _, body, warnings = encode(request)
    strict_schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    assert body["tools"] == [
        {
            "name": "person",
            "description": "A person",
            "input_schema": strict_schema,
            "strict": True,
        },
        {"name": "free", "input_schema": MAP},
    ]
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "person",
        "disable_parallel_tool_use": True,
    }
    assert fields(warnings) == [("tools", "approximated")]
    assert "`minimum` was removed at `/properties/age`" in warnings[0].message


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice.auto(), {"type": "auto"}),
        (ToolChoice.none(), {"type": "none"}),
        (ToolChoice.required(), {"type": "any"}),
    ],
)
def test_tool_choice_modes(choice: ToolChoice, wire: dict[str, Any]) -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .with_tools([ToolDefinition(name="f")])
        .with_tool_choice(choice)
    )
    _, _, body, _ = encode(request)
    assert body["tool_choice"] == wire


def test_strict_tools_on_a_family_without_structured_outputs_go_without_strict() -> None:
    request = (
        ChatRequest("claude-sonnet-4-0")
        .user("Hi")
        .with_tools([ToolDefinition(name="person", parameters=PERSON, strict=True)])
    )
    _, _, body, warnings = encode(request)
    assert "strict" not in body["tools"][0] and body["tools"][0]["input_schema"] == PERSON
    assert fields(warnings) == [("tools", "unsupported")]
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.TOOLS
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING


def test_a_forced_tool_on_a_family_that_cannot_force_one_is_sent_as_auto() -> None:
    request = (
        ChatRequest("claude-opus-5-5")
        .user("Hi")
        .with_tools([ToolDefinition(name="f")])
        .with_tool_choice(ToolChoice.tool("f"))
    )
    _, _, body, warnings = encode(request)
    assert body["tool_choice"] == {"type": "auto"}
    assert fields(warnings) == [("tool_choice", "unsupported")]


def test_output_config_format_carries_the_rewritten_schema() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .with_response_format(ResponseFormat.for_schema(PERSON, name="person"))
    )
    _, _, body, warnings = encode(request)
    assert body["output_config"] == {
        "format": {
            "type": "json_schema",
            "schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"],
                "additionalProperties": False,
            },
        }
    }
    assert fields(warnings) == [("response_format", "approximated")]


@pytest.mark.parametrize("policy", [UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR])
def test_a_schema_the_grammar_cannot_hold_is_refused_before_sending_under_any_policy(
    policy: UnsupportedPolicy,
) -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .with_response_format(ResponseFormat.for_schema(MAP, name="counts"))
        .with_unsupported_policy(policy)
    )
    with pytest.raises(UnsupportedError) as caught:
        encode(request)
    assert caught.value.field is RequestField.RESPONSE_FORMAT
    assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    assert "cannot enforce the response format `counts` in `output_config.format`" in str(
        caught.value
    )
    assert "/properties/counts" in str(caught.value)


def test_json_mode_and_old_families_have_no_native_output() -> None:
    plain = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .with_response_format(ResponseFormat.json_object())
    )
    _, _, body, warnings = encode(plain)
    assert "output_config" not in body and fields(warnings) == [("response_format", "unsupported")]
    old = (
        ChatRequest("claude-3-5-haiku-latest")
        .user("Hi")
        .with_response_format(ResponseFormat.for_schema(PERSON))
    )
    _, _, body, warnings = encode(old)
    assert "output_config" not in body and fields(warnings) == [("response_format", "unsupported")]


def test_thinking_with_a_budget_below_max_tokens() -> None:
    request = ChatRequest("claude-sonnet-4-5").user("Hi").with_reasoning_effort("medium")
    _, _, body, _ = encode(request)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 16384 + 8192
    _, _, body, warnings = encode(request.with_max_output_tokens(4000))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 3999}
    assert body["max_tokens"] == 4000 and fields(warnings) == [("reasoning_effort", "approximated")]
    _, _, body, warnings = encode(request.with_max_output_tokens(500))
    assert "thinking" not in body and fields(warnings) == [("reasoning_effort", "unsupported")]


def test_adaptive_thinking_takes_an_effort() -> None:
    _, _, body, warnings = encode(
        ChatRequest("claude-opus-4-7").user("Hi").with_reasoning_effort("high")
    )
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "high"} and warnings == []
    _, _, body, warnings = encode(
        ChatRequest("claude-opus-4-7").user("Hi").with_reasoning_effort("minimal")
    )
    assert body["output_config"] == {"effort": "low"}
    assert fields(warnings) == [("reasoning_effort", "approximated")]


def test_families_without_thinking_refuse_an_effort() -> None:
    _, _, body, warnings = encode(
        ChatRequest("claude-3-5-haiku-20241022").user("Hi").with_reasoning_effort("low")
    )
    assert "thinking" not in body and fields(warnings) == [("reasoning_effort", "unsupported")]


def test_a_forced_tool_leaves_thinking_off() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .with_tools([ToolDefinition(name="f")])
        .with_tool_choice(ToolChoice.tool("f"))
        .with_reasoning_effort("high")
    )
    _, _, body, warnings = encode(request)
    assert "thinking" not in body
    assert body["tool_choice"] == {"type": "tool", "name": "f", "disable_parallel_tool_use": True}
    assert fields(warnings) == [("reasoning_effort", "unsupported")]
    # Where thinking runs unless told not to, forcing a tool turns it off explicitly.
    _, _, body, _ = encode(
        request.model_copy(update={"model": "claude-sonnet-5", "reasoning_effort": None})
    )
    assert body["thinking"] == {"type": "disabled"}


def test_sampling_parameters_by_family_and_with_thinking() -> None:
    request = ChatRequest("claude-opus-4-7").user("Hi").with_temperature(0.2).with_top_p(0.9)
    _, _, body, warnings = encode(request)
    assert "temperature" not in body and "top_p" not in body
    assert fields(warnings) == [("temperature", "unsupported"), ("top_p", "unsupported")]
    thinking = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .with_temperature(0.2)
        .with_reasoning_effort("low")
    )
    _, _, body, warnings = encode(thinking)
    assert "temperature" not in body and fields(warnings) == [("temperature", "unsupported")]
    plain = (
        ChatRequest("claude-3-7-sonnet-latest")
        .user("Hi")
        .with_temperature(0.2)
        .with_top_p(0.9)
        .with_stop("END")
    )
    _, _, body, warnings = encode(plain)
    assert (body["temperature"], body["top_p"], body["stop_sequences"]) == (0.2, 0.9, ["END"])
    assert warnings == []


@pytest.mark.parametrize(
    "model",
    ["claude-sonnet-4-5", "claude-haiku-4-5-20251001", "claude-opus-4-1", "claude-sonnet-4-6"],
)
def test_families_that_take_one_sampling_parameter_get_the_temperature(model: str) -> None:
    """Opus 4.1, the 4.5 and 4.6 families answer 400 to both ("`temperature` and `top_p`
    cannot both be specified for this model"): the temperature goes, `top_p` is left out."""
    both = ChatRequest(model).user("Hi").with_temperature(0.2).with_top_p(0.9)
    _, _, body, warnings = encode(both)
    assert (body["temperature"], "top_p" in body) == (0.2, False)
    assert [(w.kind, w.message) for w in warnings] == [
        (
            WarningKind.UNSUPPORTED,
            f"`{model}` on Anthropic takes `temperature` or `top_p`, not both; `top_p` was "
            "left out",
        )
    ]
    _, _, body, warnings = encode(ChatRequest(model).user("Hi").with_top_p(0.9))
    assert (body["top_p"], warnings) == (0.9, [])


def test_seed_is_refused_and_prefill_is_kept_where_the_family_continues_it() -> None:
    request = ChatRequest("claude-sonnet-4-5").user("Hi").assistant("Hello,").with_seed(7)
    _, _, body, warnings = encode(request)
    assert body["messages"][-1] == {"role": "assistant", "content": "Hello,"}
    assert "seed" not in body and fields(warnings) == [("seed", "unsupported")]
    _, _, body, warnings = encode(
        request.model_copy(update={"model": "claude-sonnet-4-6", "seed": None})
    )
    assert body["messages"] == [{"role": "user", "content": "Hi"}]
    assert fields(warnings) == [("messages", "unsupported")]


def test_streaming_and_extra_body_fields() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Hi")
        .with_option_json("anthropic", {"top_k": 5, "metadata": {"user_id": "u1"}})
    )
    _, headers, body, _ = encode(request, stream=True)
    assert headers["accept"] == "text/event-stream"
    assert body["stream"] is True and body["top_k"] == 5 and body["metadata"] == {"user_id": "u1"}


def test_output_config_from_the_option_is_added_to_the_response_format() -> None:
    request = (
        ChatRequest("claude-opus-4-6")
        .user("Hi")
        .with_response_format(ResponseFormat.for_schema(PERSON))
        .with_option_json("anthropic", {"output_config": {"effort": "max"}, "top_k": 5})
    )
    _, _, body, _ = encode(request)
    # An effort allama has no name for does not drop the schema that constrains the output.
    assert body["output_config"]["effort"] == "max"
    assert body["output_config"]["format"]["schema"]["required"] == ["name", "age"]
    assert body["top_k"] == 5
    # Other fields of the option replace allama's.
    replaced = request.with_option_json("anthropic", {"tool_choice": {"type": "none"}})
    _, _, body, _ = encode(replaced.with_tool_choice(ToolChoice.required()))
    assert body["tool_choice"] == {"type": "none"}


def test_an_unverified_host_reports_its_response_format_not_enforced() -> None:
    """Sent as asked, and not known to be applied (DeepSeek drops `output_config.format`)."""
    exact = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    request = (
        ChatRequest("kimi-k2").user("Hi").with_response_format(ResponseFormat.for_schema(exact))
    )
    _, _, body, warnings = encode(request, name="anthropic-compatible")
    assert body["output_config"]["format"]["schema"] == exact
    assert fields(warnings) == [
        ("response_format", "approximated"),
        ("response_format", "unsupported"),
    ]
    assert "does not say whether it enforces it as Anthropic does" in warnings[0].message
    assert warnings[1].message == (
        "the Anthropic-compatible endpoint does not say that it applies "
        "`output_config.format`; the response format `response` was sent, and the output is "
        "not known to follow it"
    )


def test_the_key_never_shows() -> None:
    target = anthropic()
    assert KEY not in repr(target)
    http, _ = target._prepare(ChatRequest("claude-sonnet-4-5").user("Hi"), stream=False)
    assert KEY not in repr(http)


def test_capabilities_per_family() -> None:
    from allama.types import CapabilitySupport as C
    from allama.types import ChatCapability as Cap

    target = anthropic()
    answers = {
        model: (
            target.chat_capability(model, Cap.STRUCTURED_OUTPUT),
            target.chat_capability(model, Cap.FORCED_TOOL_CHOICE),
            target.chat_capability(model, Cap.REASONING),
            target.chat_capability(model, Cap.RESPONSE_SCHEMA_ANY_ROOT),
        )
        for model in (
            "claude-sonnet-4-5-20250929",
            "claude-opus-4-1",
            "claude-3-5-haiku-latest",
            "claude-opus-5-5",
            "my-claude",
        )
    }
    assert answers == {
        "claude-sonnet-4-5-20250929": (C.SUPPORTED, C.SUPPORTED, C.SUPPORTED, C.UNSUPPORTED),
        "claude-opus-4-1": (C.UNSUPPORTED, C.SUPPORTED, C.SUPPORTED, C.UNSUPPORTED),
        "claude-3-5-haiku-latest": (C.UNSUPPORTED, C.SUPPORTED, C.UNSUPPORTED, C.UNSUPPORTED),
        "claude-opus-5-5": (C.SUPPORTED, C.UNSUPPORTED, C.SUPPORTED, C.UNSUPPORTED),
        "my-claude": (C.UNKNOWN, C.UNKNOWN, C.SUPPORTED, C.UNSUPPORTED),
    }


class _Strings(BaseModel):
    name: str


class _Unsigned(BaseModel):
    count: int = Field(ge=0)


class _Map(BaseModel):
    counts: dict[str, int]


def _planned(mode: ExtractionMode, policy: UnsupportedPolicy) -> tuple[str, ...]:
    out = []
    for tp in (_Strings, _Unsigned, _Map):
        request = ChatRequest("claude-sonnet-4-5").user("x").with_option(mode)
        try:
            plan = Extractor().plan(anthropic(), tp, request.with_unsupported_policy(policy))
        except UnsupportedError as error:
            assert error.stage is UnsupportedStage.BEFORE_SENDING
            out.append("refused")
            continue
        assert plan.mode is mode
        out.append(plan.enforcement.value)
    return tuple(out)


def test_enforcement_per_mode_for_the_seed_types() -> None:
    """Seed 000's table: native exact / approximate / refused (`Auto` falls back); forced
    tool exact / approximate / not enforced."""
    warn, error = UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR
    assert _planned(ExtractionMode.NATIVE, warn) == ("exact", "approximate", "refused")
    assert _planned(ExtractionMode.NATIVE, error) == ("exact", "approximate", "refused")
    assert _planned(ExtractionMode.FORCED_TOOL, warn) == ("exact", "approximate", "not_enforced")
    assert _planned(ExtractionMode.FORCED_TOOL, error) == ("exact", "approximate", "refused")
    auto = Extractor().plan(anthropic(), _Map, ChatRequest("claude-sonnet-4-5").user("x"))
    assert auto.mode is ExtractionMode.FORCED_TOOL and auto.auto_fallback is not None
    # The refusal names the place in the caller's type, not by JSON pointer.
    assert auto.auto_fallback.message == (
        "cannot send `response_format`: Anthropic cannot enforce the schema of `_Map` in "
        "`output_config.format`: the subschema at `_Map.counts` is a map, which Anthropic "
        "strict mode cannot enforce"
    )
    with pytest.raises(UnsupportedError, match=r"the subschema at `_Map.counts` is a map"):
        Extractor().plan(
            anthropic(),
            _Map,
            ChatRequest("claude-sonnet-4-5").user("x").with_option(ExtractionMode.NATIVE),
        )


def test_an_empty_text_block_is_left_out() -> None:
    """Anthropic answers 400 to an empty text block; it says nothing, so it is not sent,
    and a user message of nothing else is not sent either."""
    image = ImagePart(url="https://example.com/a.png")
    request = ChatRequest("claude-sonnet-4-5").user("", image).assistant("ok").user("").user("Next")
    _, _, body, warnings = encode(request)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
            ],
        },
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Next"},
    ]
    assert warnings == []


def test_reasoning_from_the_responses_api_is_not_sent_as_anthropics() -> None:
    """A Responses reasoning item keeps its id (`rs_...`) as the block's signature and its
    encrypted content: neither is Anthropic's, which checks its own signatures (a foreign
    one is answered 400), so it is left out like any unsigned reasoning, with a warning."""
    foreign = Reasoning(text="Looked it up.", signature="rs_68ab12", encrypted_content="gAAAA")
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Q")
        .assistant([foreign, TextPart(text="A")])
        .user("More")
    )
    _, _, body, warnings = encode(request)
    assert body["messages"][1] == {"role": "assistant", "content": "A"}
    assert fields(warnings) == [("reasoning", "approximated")]


def test_a_text_document_by_url_is_refused_before_sending() -> None:
    """Anthropic reads a URL document source as a PDF: a text file named by URL would be
    refused by the API, so it is refused here, saying what to do."""
    document = DocumentPart(url="https://example.com/notes.txt", media_type="text/plain")
    with pytest.raises(InvalidRequestError) as caught:
        encode(ChatRequest("claude-sonnet-4-5").user("Summarise", document))
    assert caught.value.message == (
        "Anthropic takes a document by URL only as a PDF, not text/plain; send the text itself"
    )
    pdf = DocumentPart(url="https://example.com/paper.pdf")
    _, _, body, _ = encode(ChatRequest("claude-sonnet-4-5").user("Summarise", pdf))
    assert body["messages"][0]["content"][1]["source"] == {
        "type": "url",
        "url": "https://example.com/paper.pdf",
    }


def test_a_tool_sent_without_strict_names_no_keyword_as_removed() -> None:
    """A schema strict mode cannot hold (a map) goes as the tool's own schema, without
    `strict`: the keywords a strict rewrite would drop are still in it, and the warnings do
    not say they were removed."""
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 2},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["items", "meta"],
    }
    tool = ToolDefinition(name="submit", parameters=schema, strict=True)
    _, _, body, warnings = encode(ChatRequest("claude-sonnet-4-5").user("Hi").with_tools([tool]))
    assert body["tools"][0]["input_schema"] == schema and "strict" not in body["tools"][0]
    assert [(w.kind, w.message.split(":")[0]) for w in warnings] == [
        (WarningKind.UNSUPPORTED, "tool `submit` is not strict-representable")
    ]


def _unions_tool(name: str, unions: int) -> ToolDefinition:
    """A strict tool of `unions` nullable strings and a count whose `minimum` strict mode
    drops."""
    properties: dict[str, Any] = {
        f"u{i}": {"anyOf": [{"type": "string"}, {"type": "null"}]} for i in range(unions)
    }
    properties["n"] = {"type": "integer", "minimum": 0}
    schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return ToolDefinition(name=name, parameters=schema, strict=True)


_OVER_16_UNIONS = (
    "the strict schemas of the request have 20 unions, more than the 16 Anthropic allows "
    "per request; the tools were sent without `strict`"
)


def test_tools_over_the_per_request_limits_name_no_keyword_as_removed() -> None:
    """Two strict tools of 10 unions each (20, past the 16 Anthropic takes per request) go
    without `strict`, as their own schemas: the warnings say so, and do not say their
    `minimum` was removed, since it was sent."""
    tools = [_unions_tool("a", 10), _unions_tool("b", 10)]
    request = ChatRequest("claude-sonnet-4-5").user("Hi").with_tools(tools)
    _, _, body, warnings = encode(request)
    assert body["tools"] == [{"name": tool.name, "input_schema": tool.parameters} for tool in tools]
    assert [(w.kind, w.message) for w in warnings] == [(WarningKind.UNSUPPORTED, _OVER_16_UNIONS)]
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.TOOLS
    # Within the limits, the same tool goes strict and says what its rewrite removed.
    _, _, body, warnings = encode(request.with_tools(tools[:1]))
    assert body["tools"][0]["strict"] is True
    assert body["tools"][0]["input_schema"]["properties"]["n"] == {"type": "integer"}
    assert [(w.kind, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            "tool `a` was approximated: `minimum` was removed at `/properties/n`",
        )
    ]


def test_over_the_limits_a_tool_that_could_not_go_strict_keeps_its_warning() -> None:
    """Past the limits, what was already true of a tool sent without `strict` (a map strict
    mode cannot hold) is still said, in its place before the limits' warning."""
    tally = ToolDefinition(name="tally", parameters=MAP, strict=True)
    tools = [_unions_tool("a", 10), tally, _unions_tool("b", 10)]
    _, _, body, warnings = encode(ChatRequest("claude-sonnet-4-5").user("Hi").with_tools(tools))
    assert [tool.get("strict") for tool in body["tools"]] == [None, None, None]
    assert body["tools"][1]["input_schema"] == MAP
    assert [(w.kind, w.message.split(":")[0]) for w in warnings] == [
        (WarningKind.UNSUPPORTED, "tool `tally` is not strict-representable"),
        (WarningKind.UNSUPPORTED, _OVER_16_UNIONS),
    ]


def test_the_strict_tool_past_the_twentieth_says_nothing_of_a_rewrite() -> None:
    """Of 21 strict tools, the first 20 go strict and say what their rewrite removed; the
    21st goes as its own schema, with its `minimum`, and only says it went without
    `strict`."""
    tools = [_unions_tool(f"t{i}", 0) for i in range(21)]
    _, _, body, warnings = encode(ChatRequest("claude-sonnet-4-5").user("Hi").with_tools(tools))
    assert [tool.get("strict") for tool in body["tools"]] == [True] * 20 + [None]
    assert body["tools"][20]["input_schema"] == tools[20].parameters
    assert [(w.kind, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            f"tool `t{i}` was approximated: `minimum` was removed at `/properties/n`",
        )
        for i in range(20)
    ] + [
        (
            WarningKind.UNSUPPORTED,
            "Anthropic takes at most 20 strict tools per request; tool `t20` was sent "
            "without `strict`",
        )
    ]


def test_a_forced_tool_over_the_limits_names_no_keyword_as_removed() -> None:
    """Extraction's forced tool past the 16 unions goes without `strict`, its schema whole:
    the record says so, and names no keyword (the `ge=0`'s `minimum`) as removed."""
    nullable: dict[str, Any] = {f"u{i}": (str | None, ...) for i in range(17)}
    wide = create_model("Wide", n=(int, Field(ge=0)), **nullable)
    request = ChatRequest("claude-sonnet-4-5").user("x").with_option(ExtractionMode.FORCED_TOOL)
    plan = Extractor().plan(anthropic(), wide, request)
    assert plan.enforcement.value == "not_enforced"
    assert [(w.kind, w.message) for w in plan.degradations] == [
        (
            WarningKind.UNSUPPORTED,
            "the schema of `Wide` is not strict-representable: the schema at `Wide` has 17 "
            "unions (`anyOf` or type arrays), more than the 16 Anthropic strict mode allows "
            "per request; it goes without `strict`",
        )
    ]


# A user message given among the results of one turn of tool calls: Anthropic takes the
# results first in the user turn after the calls, so what the message says goes after them,
# with a warning naming its place (never its words).

_CALL_A = ToolCall.of("toolu_A", "weather", {"city": "Paris"})
_CALL_B = ToolCall.of("toolu_B", "time", {"city": "Rome"})


def _parallel_turn() -> ChatRequest:
    return ChatRequest("claude-sonnet-4-5").user("Weather and time?").assistant([_CALL_A, _CALL_B])


def _result(call_id: str, content: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_user_message_between_two_results_goes_after_them_with_a_warning(
    stream: bool,
) -> None:
    request = (
        _parallel_turn()
        .tool_result(_CALL_A, "ok")
        .user("note: be brief")
        .tool_result(_CALL_B, "ok2")
    )
    _, _, body, warnings = encode(request, stream=stream)
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            _result("toolu_A", "ok"),
            _result("toolu_B", "ok2"),
            {"type": "text", "text": "note: be brief"},
        ],
    }
    assert [(w.kind, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            "Anthropic takes a user turn after tool calls only with their results first; the "
            "user message at `messages[3]`, given before a tool result of its turn, was moved "
            "after the turn's results",
        )
    ]
    assert warnings[0].is_about(RequestField.MESSAGES)
    # Sent all the same under the strict policy: nothing is left out.
    strict = request.with_unsupported_policy(UnsupportedPolicy.ERROR)
    assert encode(strict, stream=stream)[2:] == (body, warnings)


def test_results_given_together_before_the_users_words_give_no_warning() -> None:
    # The usual order, results in any order among themselves (matched by id, each keeps its
    # place), and words of whitespace alone among them (left out, nothing moved).
    request = (
        _parallel_turn()
        .tool_result(_CALL_B, "ok2")
        .user("  ")
        .tool_result(_CALL_A, "ok")
        .user("note: be brief")
    )
    _, _, body, warnings = encode(request)
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            _result("toolu_B", "ok2"),
            _result("toolu_A", "ok"),
            {"type": "text", "text": "note: be brief"},
        ],
    }
    assert warnings == []


def test_user_messages_moved_in_two_turns_are_named_in_one_warning() -> None:
    later = ToolCall.of("toolu_C", "weather", {"city": "Rome"})
    request = (
        _parallel_turn()
        .user("first note", ImagePart(url="https://example.com/a.png"))
        .tool_result(_CALL_A, "ok")
        .tool_result(_CALL_B, "ok2")
        .assistant([later])
        .user("second note")
        .tool_result(later, "ok3")
    )
    _, _, body, warnings = encode(request)
    assert body["messages"][2:] == [
        {
            "role": "user",
            "content": [
                _result("toolu_A", "ok"),
                _result("toolu_B", "ok2"),
                {"type": "text", "text": "first note"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_C", "name": "weather", "input": {"city": "Rome"}}
            ],
        },
        {
            "role": "user",
            "content": [_result("toolu_C", "ok3"), {"type": "text", "text": "second note"}],
        },
    ]
    assert [(w.kind, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            "Anthropic takes a user turn after tool calls only with their results first; the "
            "user messages at `messages[2]`, `messages[6]`, each given before a tool result "
            "of its turn, were moved after the turn's results",
        )
    ]


def test_a_user_message_of_whitespace_alone_between_results_is_left_out_unnamed() -> None:
    # Text parts of whitespace alone say nothing: the message is not sent (Anthropic refuses
    # such a text block), so nothing is moved, and no warning names it.
    blank = UserMessage(content=(TextPart(text="  "), TextPart(text="\n\t")))
    request = _parallel_turn().tool_result(_CALL_A, "ok").push(blank).tool_result(_CALL_B, "ok2")
    _, _, body, warnings = encode(request)
    assert body["messages"][2] == {
        "role": "user",
        "content": [_result("toolu_A", "ok"), _result("toolu_B", "ok2")],
    }
    assert warnings == []
    # The request otherwise as without it.
    without = _parallel_turn().tool_result(_CALL_A, "ok").tool_result(_CALL_B, "ok2")
    assert encode(request)[2:] == encode(without)[2:]


@pytest.mark.parametrize(
    ("part", "block"),
    [
        (
            ImagePart(url="https://example.com/a.png"),
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        ),
        (
            DocumentPart(url="https://example.com/a.pdf", media_type="application/pdf"),
            {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        ),
    ],
    ids=["image", "document"],
)
def test_a_user_message_of_an_attachment_alone_between_results_is_named(
    part: ImagePart | DocumentPart, block: dict[str, Any]
) -> None:
    # No text, but not blank: what it gives is moved after the results, and said.
    request = (
        _parallel_turn()
        .tool_result(_CALL_A, "ok")
        .push(UserMessage(content=(part,)))
        .tool_result(_CALL_B, "ok2")
    )
    _, _, body, warnings = encode(request)
    assert body["messages"][2] == {
        "role": "user",
        "content": [_result("toolu_A", "ok"), _result("toolu_B", "ok2"), block],
    }
    assert [(w.kind, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            "Anthropic takes a user turn after tool calls only with their results first; the "
            "user message at `messages[3]`, given before a tool result of its turn, was moved "
            "after the turn's results",
        )
    ]


# Property keys Anthropic refuses in a tool's `input_schema`

_KEY_RULE = (
    "Anthropic takes only property keys matching `^[a-zA-Z0-9_.-]{1,64}$` at the top level of "
    "a tool's `input_schema`"
)


def _keyed(*keys: str, nested: dict[str, Any] | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {key: {"type": "string"} for key in keys}
    if nested is not None:
        properties["inner"] = {"type": "object", "properties": nested}
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        (("@type", "name"), "has `@type`, which does not match; rename it"),
        (("$top", "prénom"), "has `$top`, `prénom`, which do not match; rename them"),
        (("a" * 65,), f"has `{'a' * 65}`, which does not match; rename it"),
    ],
    ids=["json-ld", "odata-and-accent", "over-64"],
)
@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
def test_a_tool_with_a_property_key_anthropic_refuses_is_refused_before_sending(
    keys: tuple[str, ...], named: str, strict: bool
) -> None:
    # Anthropic answers 400 ("tools.N.custom.input_schema.properties: Property keys should
    # match pattern '^[a-zA-Z0-9_.-]{1,64}$'"): refused here, naming the tool and the keys.
    tool = ToolDefinition(name="lookup", parameters=_keyed(*keys), strict=strict)
    request = ChatRequest("claude-sonnet-4-5").user("Hi").with_tools([tool])
    with pytest.raises(InvalidRequestError) as caught:
        encode(request)
    assert caught.value.message == f"{_KEY_RULE}, and tool `lookup` {named}"
    # Forced by name, a tool of the caller's own is named the same way.
    forced = request.with_tool_choice(ToolChoice.tool("lookup"))
    with pytest.raises(InvalidRequestError) as caught:
        encode(forced)
    assert caught.value.message == f"{_KEY_RULE}, and tool `lookup` {named}"


def test_claude_in_foundry_refuses_such_a_key_as_anthropic_does() -> None:
    # Foundry's Claude is served by Anthropic's own API, which answers the same 400.
    tool = ToolDefinition(name="lookup", parameters=_keyed("@type"))
    request = ChatRequest("claude-sonnet-4-5").user("Hi").with_tools([tool])
    with pytest.raises(InvalidRequestError) as caught:
        encode(request, name="azure-anthropic")
    assert caught.value.message == (
        "Claude in Microsoft Foundry takes only property keys matching "
        "`^[a-zA-Z0-9_.-]{1,64}$` at the top level of a tool's `input_schema`, and tool "
        "`lookup` has `@type`, which does not match; rename it"
    )


@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
def test_an_anthropic_compatible_host_is_sent_such_keys_as_given(strict: bool) -> None:
    # DeepSeek's, Moonshot's or a local server's Messages endpoint serves its own models
    # and documents no such rule: nothing is refused for Anthropic's.
    schema = _keyed("@type", "$top", "prénom", "a" * 65)
    tool = ToolDefinition(name="lookup", parameters=schema, strict=strict)
    request = ChatRequest("deepseek-chat").user("Hi").with_tools([tool])
    _, _, body, _ = encode(request, name="anthropic-compatible")
    assert [wire["name"] for wire in body["tools"]] == ["lookup"]
    assert list(body["tools"][0]["input_schema"]["properties"]) == [
        "@type",
        "$top",
        "prénom",
        "a" * 65,
    ]


def test_keys_anthropic_takes_and_nested_ones_are_sent_as_given() -> None:
    # Dots, dashes, 64 characters; a nested object's keys are not checked by Anthropic
    # (only `input_schema.properties`), so they go as given.
    schema = _keyed("a.b", "x-y", "_", "z" * 64, nested={"@id": {"type": "string"}})
    tool = ToolDefinition(name="lookup", parameters=schema)
    _, _, body, warnings = encode(ChatRequest("claude-sonnet-4-5").user("Hi").with_tools([tool]))
    assert body["tools"] == [{"name": "lookup", "input_schema": schema}]
    assert warnings == []


def test_a_key_folded_into_the_root_from_an_all_of_is_checked() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "allOf": [{"type": "object", "properties": {"@type": {"type": "string"}}}],
    }
    tool = ToolDefinition(name="lookup", parameters=schema)
    with pytest.raises(InvalidRequestError) as caught:
        encode(ChatRequest("claude-sonnet-4-5").user("Hi").with_tools([tool]))
    assert caught.value.message == (
        f"{_KEY_RULE}, and tool `lookup` has `@type`, which does not match; rename it"
    )


class _LinkedData(BaseModel):
    type_: str = Field(alias="@type")
    id_: str = Field(alias="@id")
    name: str


class _OneKey(BaseModel):
    type_: str = Field(alias="@type")


def test_an_extraction_in_forced_tool_mode_names_the_types_keys_and_what_to_do() -> None:
    # Claude Opus 4.1 has no `output_config.format`: auto mode forces the tool, whose
    # `input_schema` Anthropic would refuse. Refused before sending, in the type's terms.
    request = ChatRequest("claude-opus-4-1").user("x")
    with pytest.raises(InvalidRequestError) as caught:
        Extractor().plan(anthropic(), _LinkedData, request)
    assert caught.value.message == (
        f"{_KEY_RULE}, so forced-tool mode cannot send `_LinkedData`, whose keys `@type`, "
        "`@id` do not match; give each field a name or alias that does (for an alias, "
        "`validate_by_name=True` with `validate_by_alias=False` on the model sends the "
        "field's name instead, and keeps the alias for output)"
    )
    forced = ChatRequest("claude-sonnet-4-5").user("x").with_option(ExtractionMode.FORCED_TOOL)
    with pytest.raises(InvalidRequestError) as caught:
        Extractor().plan(anthropic(), _OneKey, forced)
    assert caught.value.message == (
        f"{_KEY_RULE}, so forced-tool mode cannot send `_OneKey`, whose key `@type` does not "
        "match; give its field a name or alias that does (for an alias, "
        "`validate_by_name=True` with `validate_by_alias=False` on the model sends the "
        "field's name instead, and keeps the alias for output)"
    )


def test_an_extraction_in_native_mode_sends_the_keys_as_given() -> None:
    # `output_config.format` is not checked: nothing says Anthropic refuses such keys there.
    planned = Extractor().plan(anthropic(), _LinkedData, ChatRequest("claude-sonnet-4-5").user("x"))
    assert (planned.mode, planned.enforcement.value) == (ExtractionMode.NATIVE, "exact")


def test_a_forced_tool_extraction_on_an_anthropic_compatible_host_sends_the_keys() -> None:
    import httpx2

    from allama.transport import Transport

    sent: list[dict[str, Any]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        call = {"type": "tool_use", "id": "toolu_1", "name": body["tools"][0]["name"]}
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{**call, "input": {"@type": "Person"}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return httpx2.Response(200, json=message)

    client = httpx2.Client(transport=httpx2.MockTransport(answer))
    target = allama.provider(
        "anthropic-compatible",
        base_url="https://gw.example.com",
        transport=Transport(client=client),
    )
    forced = ChatRequest("deepseek-chat").user("x").with_option(ExtractionMode.FORCED_TOOL)
    extracted = Extractor().extract(target, _OneKey, forced)
    assert extracted.value == _OneKey.model_validate({"@type": "Person"})
    assert list(sent[0]["tools"][0]["input_schema"]["properties"]) == ["@type"]


def test_the_extraction_tool_name_is_the_extractions() -> None:
    from allama.adapters.anthropic import _encode
    from allama.extract import EXTRACTION_TOOL

    assert _encode._EXTRACTION_TOOL == EXTRACTION_TOOL
