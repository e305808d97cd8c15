"""The OpenAI-compatible adapter: encoding per preset, warnings and refusals, error mapping,
secrets, and the provider's sync and async paths (over httpx2's mock transport)."""

from __future__ import annotations

import asyncio
import enum
import json
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import allama
from allama import ExtractionMode, Extractor, SchemaEnforcement
from allama.adapters.openai_compat._decode import decode_response
from allama.adapters.openai_compat._errors import (
    error_from_response,
    retry_after_seconds,
    waits_as_asked,
)
from allama.adapters.openai_compat._sse import decode_stream
from allama.adapters.openai_compat._wire import WireRequest
from allama.errors import (
    REPORTED_USAGE_KEY,
    UNNAMED_PARAMETERS_KEY,
    AuthenticationError,
    ContextWindowExceededError,
    Error,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    QuotaExceededError,
    RateLimitedError,
    ServerError,
    UnsupportedError,
)
from allama.provider import ChatProvider
from allama.providers import PRESET_NAMES, PRESETS, OpenAICompatibleProvider, provider
from allama.transport import Transport
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    DeveloperMessage,
    FinishReason,
    ImagePart,
    ReasoningEffort,
    RequestField,
    ResponseFormat,
    SystemMessage,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    UnsupportedStage,
    ValidationCoverage,
    Warning,
    WarningKind,
)

STRINGS = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
UINT = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}
MAP = {
    "type": "object",
    "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}},
    "required": ["m"],
}
MODELS = {
    "openai": "gpt-4o-2024-08-06",
    "azure-openai": "gpt-4o",
    "groq": "openai/gpt-oss-120b",
    "xai": "grok-4",
    "mistral": "mistral-small-latest",
    "openrouter": "openai/gpt-4o",
    "deepseek": "deepseek-chat",
    "together": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "fireworks": "accounts/fireworks/models/llama-v3p1-8b-instruct",
    "deepinfra": "meta-llama/Meta-Llama-3.1-8B-Instruct",
    "vllm": "Qwen/Qwen3-0.6B",
    "workers-ai": "@cf/meta/llama-3.1-8b-instruct",
    "ollama-openai": "qwen3",
    "openai-compatible": "any-model",
    "azure-foundry": "Mistral-large-2411",
}

CHAT_COMPLETIONS_PRESETS = tuple(
    name for name, preset in PRESETS.items() if preset.dialect == "openai_compat"
)
"""The presets that speak Chat Completions (the others have tests of their own dialect)."""


def body_of(
    name: str, request: ChatRequest, *, stream: bool = False
) -> tuple[dict[str, Any], list[Warning]]:
    """The JSON body and the warnings the provider would send for `request`."""
    sent: list[httpx2.Request] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        sent.append(http)
        return httpx2.Response(200, json=_completion("ok"))

    target = provider(name, api_key="k", base_url="http://test", transport=_mock(handler))
    if stream:
        http, warnings = target._prepare(request, stream=True)
        return http.body, warnings
    response = target.chat(request)
    return json.loads(sent[0].content), list(response.warnings)


def _mock(handler: Any) -> Transport:
    return Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


def _completion(text: str | None, **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, **message},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def native(model: str, schema: dict[str, Any], **kwargs: Any) -> ChatRequest:
    return (
        ChatRequest(model)
        .user("Ada, 1843")
        .with_response_format(ResponseFormat.for_schema(schema, name="person"))
        .model_copy(update=kwargs)
    )


def forced(model: str, schema: dict[str, Any]) -> ChatRequest:
    tool = ToolDefinition(name="submit_structured_output", parameters=schema, strict=True)
    return (
        ChatRequest(model)
        .user("Ada, 1843")
        .with_tools([tool])
        .with_tool_choice(ToolChoice.tool("submit_structured_output"))
    )


def enforcement(warnings: list[Warning], field: RequestField) -> str:
    mine = [w for w in warnings if w.is_about(field)]
    if any(w.kind is WarningKind.UNSUPPORTED for w in mine):
        return "not_enforced"
    return "approximate" if mine else "exact"


# The enforcement each preset plans for seed 000's typical types ("What adapters report for
# typical types"): strings, an unsigned integer (`minimum: 0`) and a map (`dict[str, int]`),
# in native and forced-tool mode, under the default policy (WARN). Under ERROR, every
# `not_enforced` is a refusal before sending and nothing else changes.
#
# Where the seed's table differs, a provider fact decides (providers-openai-family.md):
# - azure-openai, unsigned integer: approximate (seed: exact). Azure's structured-outputs
#   page lists `minimum`/`maximum` among the unsupported keywords [AZ-SO, section 4], so the
#   2024 subset (`azure_legacy`) removes them and says so.
# - ollama-openai, forced tool: not enforced under WARN (seed: refused). Ollama's /v1 drops
#   `tool_choice` silently and ignores `strict` [OL, section 15]: the call can go out with
#   the tool offered, reported `not_enforced` by the seed's own WARN rule; under ERROR it is
#   refused as in the seed, and AUTO never picks it (FORCED_TOOL_CHOICE is unsupported).
# - groq, forced tool: approximate (seed: exact). Groq documents constrained decoding for
#   `response_format` on GPT-OSS; which models enforce a tool's `function.strict` is
#   unconfirmed [section 4]: `strict` is sent, the tool reported approximate.
# - azure-foundry (not in the seed): passthrough like Mistral and OpenRouter, as Foundry
#   serves many model families and publishes no per-model subset.
# - llama-cpp, native, unsigned integer and map: approximate (seed: exact). Its converter
#   writes at most 16 digits of an integer without both bounds, so each side gets int64's end
#   and integers past it cannot be written, which the record says.
E, A, N = "exact", "approximate", "not_enforced"
NATIVE_AND_FORCED = {
    "openai": ((E, E, N), (E, E, N)),
    "azure-openai": ((E, A, N), (E, A, N)),
    "groq": ((E, E, N), (A, A, N)),
    "xai": ((E, E, N), (E, E, N)),
    "mistral": ((A, A, N), (A, A, N)),
    "openrouter": ((A, A, N), (A, A, N)),
    "openai-compatible": ((A, A, N), (A, A, N)),
    "azure-foundry": ((A, A, N), (A, A, N)),
    "vllm": ((A, A, A), (A, A, A)),
    "ollama-openai": ((A, A, A), (N, N, N)),
    # A forced tool: the server at the fake base URL never says whether the model's
    # template has tool calls (`GET /props`), which one without them drops without a word.
    "llama-cpp": ((E, A, A), (A, A, A)),
    "deepseek": ((N, N, N), (N, N, N)),
    "together": ((N, N, N), (N, N, N)),
    "fireworks": ((A, A, A), (N, N, N)),  # a grammar, keywords it lacks removed
    "deepinfra": ((N, N, N), (N, N, N)),
    "workers-ai": ((N, N, N), (N, N, N)),
}


class _Strings(BaseModel):
    name: str


class _Unsigned(BaseModel):
    count: int = Field(ge=0)


class _Map(BaseModel):
    counts: dict[str, int]


def _planned(name: str, mode: ExtractionMode, policy: UnsupportedPolicy) -> tuple[str, ...]:
    target = provider(name, base_url="http://test")
    model = MODELS.get(name, "served-model")
    out = []
    for tp in (_Strings, _Unsigned, _Map):
        request = ChatRequest(model).user("x").with_option(mode).with_unsupported_policy(policy)
        try:
            plan = Extractor().plan(target, tp, request)
        except UnsupportedError as error:
            assert error.stage is UnsupportedStage.BEFORE_SENDING
            out.append("refused")
            continue
        assert plan.mode is mode
        assert plan.coverage is ValidationCoverage.ENCODING
        out.append(plan.enforcement.value)
    return tuple(out)


@pytest.mark.parametrize("name", sorted(NATIVE_AND_FORCED))
def test_enforcement_per_preset_and_mode_for_the_seed_types(name: str) -> None:
    native, forced = NATIVE_AND_FORCED[name]
    for mode, expected in ((ExtractionMode.NATIVE, native), (ExtractionMode.FORCED_TOOL, forced)):
        assert _planned(name, mode, UnsupportedPolicy.WARN) == expected, mode
        refused = tuple("refused" if cell == N else cell for cell in expected)
        assert _planned(name, mode, UnsupportedPolicy.ERROR) == refused, mode


class _Tree(BaseModel):
    label: str
    children: list[_Tree]


class _Host(BaseModel):
    host: str = Field(json_schema_extra={"format": "hostname"})
    day: str = Field(json_schema_extra={"format": "date"})


class _Coded(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{3}$")
    n: int = Field(ge=0, le=9)
    tags: list[str] = Field(min_length=1)


def _plan_of(name: str, model: str, tp: Any, mode: ExtractionMode) -> Any:
    request = ChatRequest(model).user("x").with_option(mode)
    return Extractor().plan(provider(name, base_url="http://test"), tp, request)


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_xai_enforces_no_recursion_and_only_its_own_formats(mode: ExtractionMode) -> None:
    # xAI: `$ref`s that do not recur, and the formats date, time, date-time, email, uuid,
    # ipv4, ipv6 and uri; others are accepted, not enforced (providers-openai-family.md §6).
    tree = _plan_of("xai", "grok-4", _Tree, mode)
    assert tree.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert "is recursive" in tree.degradations[0].message
    host = _plan_of("xai", "grok-4", _Host, mode)
    assert host.enforcement is SchemaEnforcement.APPROXIMATE
    assert [w.message.split(": ", 1)[1] for w in host.degradations] == [
        "`format` was removed at `_Host.host`: xAI strict mode does not enforce `hostname`"
    ]
    # OpenAI itself enforces both.
    assert _plan_of("openai", "gpt-4o", _Tree, mode).enforcement is SchemaEnforcement.EXACT
    assert _plan_of("openai", "gpt-4o", _Host, mode).enforcement is SchemaEnforcement.EXACT


class _Many(BaseModel):
    ids: list[int] = Field(min_length=300)
    code: str = Field(pattern=r"^a.b$")
    word: str = Field(pattern=r"^\p{Lu}[a-z]+$")
    plain: str = Field(pattern=r"^[A-Z]{3}\.[0-9]$")


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_xai_limits_its_array_bounds_and_patterns(mode: ExtractionMode) -> None:
    # xAI enforces `minItems`/`maxItems` up to 256, patterns without `\p{...}`,
    # lookaround, backreferences or `\b`, and lets `.` match a line break (§6).
    plan = _plan_of("xai", "grok-4", _Many, mode)
    assert plan.enforcement is SchemaEnforcement.APPROXIMATE
    assert sorted(w.message.split(": ", 1)[1] for w in plan.degradations) == [
        "`minItems` of 300 at `_Many.ids` is past the 256 items xAI strict mode enforces: "
        "sent, not enforced",
        "`pattern` was removed at `_Many.word`: xAI strict mode takes no Unicode property "
        "classes (`\\p{...}`) in a pattern",
        "the `pattern` at `_Many.code` has `.`, which xAI strict mode lets match a line "
        "break: a value holding one passes it and fails the type",
    ]
    assert _plan_of("openai", "gpt-4o", _Many, mode).enforcement is SchemaEnforcement.EXACT


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_a_fine_tuned_openai_model_gets_the_keywords_fine_tunes_take(mode: ExtractionMode) -> None:
    # `pattern`, formats, numeric and array bounds are "not for fine-tuned models".
    for model in ("ft:gpt-4o-mini-2024-07-18:acme::AbC123", "ft:gpt-4.1-2025-04-14:acme::x1"):
        plan = _plan_of("openai", model, _Coded, mode)
        assert plan.enforcement is SchemaEnforcement.APPROXIMATE
        removed = sorted(w.message.split(": ", 1)[1].split(" at ")[0] for w in plan.degradations)
        assert removed == [
            "`maximum` was removed",
            "`minItems` was removed",
            "`minimum` was removed",
            "`pattern` was removed",
        ]
    assert _plan_of("openai", "gpt-4o-mini", _Coded, mode).enforcement is SchemaEnforcement.EXACT
    body, _ = body_of("openai", forced("ft:gpt-4o-mini-2024-07-18:acme::AbC123", UINT))
    assert body["tools"][0]["function"]["parameters"]["properties"]["n"] == {"type": "integer"}


def test_every_http_preset_has_a_row_in_the_enforcement_table() -> None:
    assert set(NATIVE_AND_FORCED) == set(CHAT_COMPLETIONS_PRESETS) - {"local"}


def test_a_map_on_an_endpoint_without_its_own_subset_goes_without_strict() -> None:
    body, warnings = body_of("mistral", native("mistral-small-latest", MAP))
    assert body["response_format"]["json_schema"]["strict"] is False
    assert body["response_format"]["json_schema"]["schema"] == MAP
    (warning,) = warnings
    assert warning.kind is WarningKind.UNSUPPORTED and warning.is_about(
        RequestField.RESPONSE_FORMAT
    )
    assert warning.message == (
        "the response format `person` is not strict-representable: the subschema at "
        "`/properties/m` is a map, which OpenAI strict mode cannot enforce; Mistral publishes "
        "no strict subset of its own, so OpenAI's is assumed; it goes without `strict`"
    )
    # A schema inside the subset goes as OpenAI's strict rewrite: the upstreams that enforce
    # `strict` refuse an object not closed.
    body, _ = body_of("mistral", native("mistral-small-latest", UINT))
    assert body["response_format"]["json_schema"] == {
        "name": "person",
        "schema": {**UINT, "additionalProperties": False},
        "strict": True,
    }


OPTIONAL = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "nickname": {"type": "string", "default": "none"},
        "pet": {"$ref": "#/$defs/Pet"},
    },
    "required": ["name", "pet"],
    "$defs": {"Pet": {"type": "object", "properties": {"kind": {"type": "string"}}}},
}
OPTIONAL_STRICT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "nickname": {"type": ["string", "null"]},
        "pet": {"$ref": "#/$defs/Pet"},
    },
    "required": ["name", "nickname", "pet"],
    "additionalProperties": False,
    "$defs": {
        "Pet": {
            "type": "object",
            "properties": {"kind": {"type": ["string", "null"]}},
            "required": ["kind"],
            "additionalProperties": False,
        }
    },
}


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("openrouter", "openai/gpt-4o"),
        ("azure-foundry", "gpt-4o"),
        ("mistral", "mistral-small-latest"),
        ("openai-compatible", "some-model"),
    ],
)
def test_strict_on_an_endpoint_without_its_own_subset_sends_a_schema_openai_strict_accepts(
    name: str, model: str
) -> None:
    # OpenAI's strict mode, behind OpenRouter or Azure AI Foundry, refuses an object without
    # `additionalProperties: false` or with a property missing from `required`: an optional
    # property goes nullable, and every object closed, in both modes.
    body, warnings = body_of(name, native(model, OPTIONAL))
    sent = body["response_format"]["json_schema"]
    assert sent["strict"] is True
    assert sent["schema"] == OPTIONAL_STRICT
    assert enforcement(warnings, RequestField.RESPONSE_FORMAT) == "approximate"
    body, warnings = body_of(name, forced(model, OPTIONAL))
    (tool,) = body["tools"]
    assert tool["function"]["strict"] is True
    assert tool["function"]["parameters"] == OPTIONAL_STRICT
    assert enforcement(warnings, RequestField.TOOLS) == "approximate"


def test_ollama_native_is_approximate_and_forced_tools_are_unsupported() -> None:
    target = provider("ollama-openai")
    for schema in (STRINGS, UINT, MAP):
        warnings = list(target.validate_chat_request(native("qwen3", schema)).warnings)
        assert enforcement(warnings, RequestField.RESPONSE_FORMAT) == "approximate"
    support = target.chat_capability("qwen3", ChatCapability.FORCED_TOOL_CHOICE)
    assert support is CapabilitySupport.UNSUPPORTED
    assert (
        target.chat_capability("qwen3", ChatCapability.STRUCTURED_OUTPUT)
        is CapabilitySupport.SUPPORTED
    )


def test_workers_ai_forced_tool_is_unconfirmed() -> None:
    support = provider("workers-ai").chat_capability("@cf/x", ChatCapability.FORCED_TOOL_CHOICE)
    assert support is CapabilitySupport.UNKNOWN


# OpenAI native structured output and forced tools


def test_openai_native_schema_is_strict_and_named() -> None:
    body, warnings = body_of("openai", native("gpt-4o-2024-08-06", STRINGS))
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "person"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert warnings == []


def test_map_is_sent_without_strict_and_warned_on_the_response_format() -> None:
    body, warnings = body_of("openai", native("gpt-4o-2024-08-06", MAP))
    assert body["response_format"]["json_schema"]["strict"] is False
    assert len(warnings) == 1
    warning = warnings[0]
    assert warning.is_about(RequestField.RESPONSE_FORMAT)
    assert warning.kind is WarningKind.UNSUPPORTED
    assert warning.provider == "openai"
    assert "the response format `person`" in warning.message


def test_map_under_error_policy_is_refused_before_sending() -> None:
    calls: list[httpx2.Request] = []
    target = provider("openai", api_key="k", transport=_mock(lambda r: calls.append(r)))
    request = native("gpt-4o-2024-08-06", MAP).with_unsupported_policy(UnsupportedPolicy.ERROR)
    for attempt in (target.chat, target.validate_chat_request):
        with pytest.raises(UnsupportedError) as caught:
            attempt(request)
        assert caught.value.field is RequestField.RESPONSE_FORMAT
        assert caught.value.stage is UnsupportedStage.BEFORE_SENDING
    assert calls == []


def test_openai_forced_strict_tool_is_serial_and_named() -> None:
    body, warnings = body_of("openai", forced("gpt-4o-2024-08-06", STRINGS))
    assert body["tool_choice"] == {
        "type": "function",
        "function": {"name": "submit_structured_output"},
    }
    assert body["parallel_tool_calls"] is False
    function = body["tools"][0]["function"]
    assert function["strict"] is True
    assert function["parameters"]["additionalProperties"] is False
    assert warnings == []


def test_map_in_a_strict_tool_warns_on_tools() -> None:
    body, warnings = body_of("openai", forced("gpt-4o-2024-08-06", MAP))
    assert body["tools"][0]["function"]["strict"] is False
    assert [w.subject for w in warnings] == [
        w.subject for w in warnings if w.is_about(RequestField.TOOLS)
    ]
    assert "tool `submit_structured_output`" in warnings[0].message


def test_caller_parallel_choice_is_kept() -> None:
    request = forced("gpt-4o-2024-08-06", STRINGS).with_parallel_tool_calls(True)
    assert body_of("openai", request)[0]["parallel_tool_calls"] is True


def test_json_object_only_model_falls_back_with_a_warning() -> None:
    body, warnings = body_of("groq", native("llama-3.3-70b-versatile", STRINGS))
    assert body["response_format"] == {"type": "json_object"}
    assert enforcement(warnings, RequestField.RESPONSE_FORMAT) == "not_enforced"
    with pytest.raises(UnsupportedError):
        provider("groq").validate_chat_request(
            native("llama-3.3-70b-versatile", STRINGS).with_unsupported_policy(
                UnsupportedPolicy.ERROR
            )
        )


SCHEMA_IN_WORDS = (
    "Answer with one JSON object that follows this JSON Schema:\n"
    '{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}'
)


@pytest.mark.parametrize(
    ("name", "display", "model"),
    [
        ("groq", "Groq", "llama-3.3-70b-versatile"),
        ("openai", "OpenAI", "gpt-4-turbo"),
        ("openai", "OpenAI", "gpt-3.5-turbo-0125"),
        ("deepseek", "DeepSeek", "deepseek-chat"),
    ],
)
def test_json_object_mode_is_told_the_schema_in_words(name: str, display: str, model: str) -> None:
    # The endpoints refuse `json_object` unless the messages say "JSON", and nothing else
    # would carry the schema: it opens the messages, or ends the opening system message.
    body, warnings = body_of(name, native(model, STRINGS))
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"] == [
        {"role": "system", "content": SCHEMA_IN_WORDS},
        {"role": "user", "content": "Ada, 1843"},
    ]
    (warning,) = [w for w in warnings if w.is_about(RequestField.RESPONSE_FORMAT)]
    assert warning.message == (
        f"`{model}` on {display} has no JSON Schema output; "
        "the response format `person` was sent as `json_object`, which only constrains the "
        "output to a JSON object, with the schema written into the instructions"
    )
    request = native(model, STRINGS)
    request = request.model_copy(
        update={"messages": [SystemMessage(content="Be brief."), *request.messages]}
    )
    body, _ = body_of(name, request)
    assert body["messages"] == [
        {"role": "system", "content": f"Be brief.\n\n{SCHEMA_IN_WORDS}"},
        {"role": "user", "content": "Ada, 1843"},
    ]
    # A caller's own JSON mode that says JSON is sent as asked.
    own = ChatRequest(model).user("Ada, as JSON")
    body, _ = body_of(name, own.with_response_format(ResponseFormat.json_object()))
    assert body["messages"] == [{"role": "user", "content": "Ada, as JSON"}]


def test_best_effort_endpoint_sends_the_schema_without_strict() -> None:
    body, warnings = body_of("together", native(MODELS["together"], STRINGS))
    spec = body["response_format"]["json_schema"]
    assert (spec["schema"], spec["strict"]) == (STRINGS, False)
    assert "does not enforce `strict`" in warnings[0].message


def test_workers_ai_puts_the_schema_directly_under_json_schema() -> None:
    body, _ = body_of("workers-ai", native(MODELS["workers-ai"], STRINGS))
    assert body["response_format"] == {"type": "json_schema", "json_schema": STRINGS}


def test_workers_ai_json_mode_does_not_stream() -> None:
    body, warnings = body_of("workers-ai", native(MODELS["workers-ai"], STRINGS), stream=True)
    assert "response_format" not in body
    assert warnings[0].is_about(RequestField.RESPONSE_FORMAT)


def test_openrouter_requires_parameters_only_with_a_schema() -> None:
    with_schema, _ = body_of("openrouter", native("openai/gpt-4o", STRINGS))
    assert with_schema["provider"] == {"require_parameters": True}
    plain, _ = body_of("openrouter", ChatRequest("openai/gpt-4o").user("hi"))
    assert "provider" not in plain
    # The caller's own routing is kept beside it, not put in its place.
    routed = native("openai/gpt-4o", STRINGS).with_option_json(
        "openai_compat", {"provider": {"order": ["openai"], "allow_fallbacks": False}}
    )
    body, _ = body_of("openrouter", routed)
    assert body["provider"] == {
        "order": ["openai"],
        "allow_fallbacks": False,
        "require_parameters": True,
    }


def test_mistral_quirks() -> None:
    request = (
        forced("mistral-small-latest", STRINGS)
        .with_tool_choice(ToolChoice.required())
        .with_seed(7)
        .with_max_output_tokens(100)
        .push(DeveloperMessage(content="be brief"))
    )
    body, warnings = body_of("mistral", request)
    assert body["tool_choice"] == "any"
    assert body["random_seed"] == 7 and "seed" not in body
    assert body["max_tokens"] == 100 and "max_completion_tokens" not in body
    assert body["messages"][-1] == {"role": "system", "content": "be brief"}
    assert enforcement(warnings, RequestField.TOOLS) == "approximate"


def test_ollama_drops_what_it_would_ignore_with_warnings() -> None:
    request = forced("qwen3", STRINGS).with_parallel_tool_calls(False).with_max_output_tokens(50)
    body, warnings = body_of("ollama-openai", request)
    assert "tool_choice" not in body and "parallel_tool_calls" not in body
    assert body["max_tokens"] == 50
    fields = {w.subject.field for w in warnings}  # type: ignore[union-attr]
    assert {
        RequestField.TOOL_CHOICE,
        RequestField.PARALLEL_TOOL_CALLS,
        RequestField.TOOLS,
    } <= fields


def test_reasoning_effort_refused_where_the_model_takes_none() -> None:
    request = ChatRequest("grok-4").user("hi").with_reasoning_effort(ReasoningEffort.HIGH)
    body, warnings = body_of("xai", request)
    assert "reasoning_effort" not in body
    assert warnings[0].is_about(RequestField.REASONING_EFFORT)
    assert (
        body_of("xai", request.model_copy(update={"model": "grok-3-mini"}))[0]["reasoning_effort"]
        == "high"
    )


def test_messages_encode_every_role_and_images() -> None:
    request = (
        ChatRequest("gpt-4o")
        .system("sys")
        .developer("dev")
        .user(
            "look",
            ImagePart(url="https://x/i.png"),
            ImagePart(data=b"\x89PNG", media_type="image/png"),
        )
        .assistant([ToolCall(id="call_1", name="f", arguments='{"a": 1}')])
        .tool_result("call_1", "42")
    )
    body, _ = body_of("openai", request)
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "developer", "content": "dev"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/i.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
            ],
        },
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    ]


def test_errored_tool_result_warns() -> None:
    request = ChatRequest("gpt-4o").user("x").tool_result("call_1", "boom", is_error=True)
    _, warnings = body_of("openai", request)
    assert warnings[0].is_about(RequestField.TOOL_RESULT_ERROR)


def test_stream_asks_for_usage_where_the_endpoint_has_it() -> None:
    request = ChatRequest("gpt-4o").user("hi")
    assert body_of("openai", request, stream=True)[0]["stream_options"] == {"include_usage": True}
    assert "stream_options" not in body_of("mistral", request, stream=True)[0]


def test_body_option_merges_raw_fields() -> None:
    request = ChatRequest("m").user("hi").with_option_json("openai_compat", {"top_k": 40})
    assert body_of("vllm", request)[0]["top_k"] == 40


def test_validation_is_a_dry_run_with_the_same_warnings() -> None:
    request = native("gpt-4o-2024-08-06", MAP)
    validation = provider("openai").validate_chat_request(request)
    assert validation.coverage is ValidationCoverage.ENCODING
    _, warnings = body_of("openai", request)
    assert list(validation.warnings) == warnings


# Decoding


def test_tool_calls_come_from_the_message_even_when_finish_says_stop() -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}

    def handler(http: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=_completion(None, tool_calls=[call]))

    response = provider("openai", api_key="k", transport=_mock(handler)).chat(
        ChatRequest("gpt-4o").user("x")
    )
    assert response.finish_reason == FinishReason.TOOL_CALLS  # (as the other dialects read it)
    assert response.tool_calls() == (ToolCall(id="call_9", name="f", arguments="{}"),)


def test_sync_and_async_agree() -> None:
    def handler(http: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=_completion("same"))

    target = provider("openai", api_key="k", transport=_mock(handler))
    request = native("gpt-4o-2024-08-06", MAP)
    assert target.chat(request) == asyncio.run(target.achat(request))


# Errors


def _error(status: int, body: Any, headers: dict[str, str] | None = None) -> Exception:
    text = body if isinstance(body, str) else json.dumps(body)
    return error_from_response(status, headers or {}, text.encode(), provider="openai", model="m")


def test_insufficient_quota_is_not_retryable() -> None:
    error = _error(
        429,
        {
            "error": {
                "message": "You exceeded your current quota",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        },
    )
    assert type(error) is QuotaExceededError
    assert not error.retryable


def test_context_length_code() -> None:
    error = _error(
        400,
        {
            "error": {
                "message": "too long",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    )
    assert type(error) is ContextWindowExceededError


def test_xais_maximum_prompt_length_is_a_full_context_window() -> None:
    error = _error(
        400,
        {
            "code": "invalid-argument",
            "error": "This model's maximum prompt length is 131072 but the request contains "
            "140000 tokens.",
        },
    )
    assert type(error) is ContextWindowExceededError


def test_openrouters_no_endpoint_for_the_parameters_is_a_refusal_not_a_missing_model() -> None:
    routing = "To learn more about provider routing, visit: https://openrouter.ai/docs"
    error = _error(
        404,
        {
            "error": {
                "message": "No endpoints found that can handle the requested parameters. "
                + routing,
                "code": 404,
            }
        },
    )
    assert type(error) is UnsupportedError
    assert (error.field, error.stage) == (None, UnsupportedStage.PROVIDER)
    assert not error.retryable
    tools = f'No endpoints found that support tool use. Try disabling "question". {routing}'
    error = _error(404, {"error": {"message": tools, "code": 404}})
    assert type(error) is UnsupportedError
    assert error.field is RequestField.TOOLS
    missing = "No endpoints found for nousresearch/hermes-3-llama-3.1-405b:free."
    assert type(_error(404, {"error": {"message": missing, "code": 404}})) is NotFoundError
    # Refusals that name what no endpoint serves are refusals of that; only "the requested
    # parameters" is left for the provider to put on the request's schema.
    for words, field in (
        ("support the provided 'tool_choice' value.", RequestField.TOOL_CHOICE),
        ("support image input", RequestField.IMAGES),
        ("support the requested output modalities: image, text", None),
    ):
        error = _error(404, {"error": {"message": f"No endpoints found that {words}"}})
        assert type(error) is UnsupportedError and error.field is field
        assert UNNAMED_PARAMETERS_KEY not in error.context.metadata


class _Named(BaseModel):
    name: str


def _openrouter_without_endpoints(
    refused: Any, answer: Any
) -> tuple[list[dict[str, Any]], ChatProvider]:
    """OpenRouter answering its 404 for no endpoint serving "the requested parameters" to
    the bodies `refused` picks, and `answer(body)` to the others; the bodies it was sent."""
    sent: list[dict[str, Any]] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.content)
        sent.append(body)
        if refused(body):
            message = "No endpoints found that can handle the requested parameters."
            return httpx2.Response(404, json={"error": {"message": message, "code": 404}})
        return httpx2.Response(200, json=answer(body))

    return sent, provider("openrouter", api_key="k", transport=_mock(handler))


@pytest.mark.parametrize("run", ["sync", "async"])
def test_an_extraction_falls_back_when_openrouter_finds_no_endpoint_for_its_schema(
    run: str,
) -> None:
    # Native output on OpenRouter is a guess (support is per endpoint); under
    # `require_parameters` a model none of whose endpoints take a schema answers a 404 that
    # names no field. It is the schema's: the extraction falls back to a forced tool.
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        name = body["tools"][0]["function"]["name"]
        call = {
            "id": "c",
            "type": "function",
            "function": {"name": name, "arguments": '{"name":"Ada"}'},
        }
        return _completion(None, tool_calls=[call])

    sent, target = _openrouter_without_endpoints(lambda body: "tools" not in body, answer)
    request = ChatRequest("meta-llama/llama-3-8b-instruct").user("Ada")
    if run == "sync":
        extracted = allama.extract(target, _Named, request)
    else:
        extracted = asyncio.run(allama.aextract(target, _Named, request))
    assert extracted.value == _Named(name="Ada")
    assert extracted.metadata.mode is ExtractionMode.FORCED_TOOL
    fallback = extracted.metadata.auto_fallback
    assert fallback is not None
    assert (fallback.field, fallback.stage) == (
        RequestField.RESPONSE_FORMAT,
        UnsupportedStage.PROVIDER,
    )
    assert [("response_format" in body, body["provider"]) for body in sent] == [
        (True, {"require_parameters": True}),
        (False, {"require_parameters": True}),
    ]
    # A plain chat's refusal names no field: nothing in it carries a schema.
    with pytest.raises(UnsupportedError) as caught:
        target.chat(ChatRequest("meta-llama/llama-3-8b-instruct").user("Hi"))
    assert caught.value.field is None


class _Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_decision_asks_again_without_logprobs_when_openrouter_finds_no_endpoint(
    run: str,
) -> None:
    # A decision asks OpenRouter for log-probabilities it may drop; under
    # `require_parameters` a model whose endpoints have none answers the same 404 that
    # names no parameter: asked again without them, not taken for the schema's refusal.
    sent, target = _openrouter_without_endpoints(
        lambda body: bool(body.get("logprobs")), lambda body: _completion('{"value":"red"}')
    )
    request = ChatRequest("anthropic/claude-sonnet-4").user("Which color?")
    if run == "sync":
        decision = Extractor().decide(target, _Color, request)
    else:
        decision = asyncio.run(Extractor().adecide(target, _Color, request))
    assert decision.value is _Color.RED
    assert [("logprobs" in body, "response_format" in body) for body in sent] == [
        (True, True),
        (False, True),
    ]


def test_rejected_tool_schema_is_unsupported_on_tools() -> None:
    error = _error(
        400,
        {
            "error": {
                "message": "Invalid schema for function 'f': ...",
                "type": "invalid_request_error",
                "param": "tools[0].function.parameters",
                "code": "invalid_function_parameters",
            }
        },
    )
    assert isinstance(error, UnsupportedError)
    assert (error.field, error.stage) == (RequestField.TOOLS, UnsupportedStage.PROVIDER)


def test_groq_rejects_json_schema_for_the_model() -> None:
    error = _error(
        400,
        {
            "error": {
                "message": "This model does not support response format `json_schema`",
                "type": "invalid_request_error",
            }
        },
    )
    assert isinstance(error, UnsupportedError)
    assert error.field is RequestField.RESPONSE_FORMAT


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (500, ServerError),
        (502, ServerError),
        (503, OverloadedError),
        (422, InvalidRequestError),
        (401, AuthenticationError),
    ],
)
def test_status_classes(status: int, cls: type[Exception]) -> None:
    assert type(_error(status, "<html>oops</html>")) is cls


def test_should_retry_header_wins() -> None:
    error = _error(500, {"error": {"message": "x"}}, {"x-should-retry": "false"})
    assert not error.retryable  # type: ignore[attr-defined]


def test_retry_after_headers() -> None:
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"Retry-After": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "1", "retry-after-ms": "0"}) == 1.0
    now = datetime(2026, 1, 1, tzinfo=UTC)
    date = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=now.timestamp()) == 30.0
    resets = {
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-reset-tokens": "20ms",
        "x-ratelimit-remaining-requests": "12",
        "x-ratelimit-remaining-tokens": "0",
    }
    assert retry_after_seconds(resets) == pytest.approx(0.02)
    assert retry_after_seconds({"x-ratelimit-reset-requests": "1m30.5s"}) == 90.5
    assert retry_after_seconds({"x-ratelimit-reset-tokens": "soon"}) is None
    assert retry_after_seconds({}) is None
    # No limit reads 0: a request larger than the tokens left met the tokens' limit, not
    # Groq's requests per day (whose reset would stop a run as a wait past 15 minutes).
    groq = {
        "x-ratelimit-reset-requests": "2m59.56s",
        "x-ratelimit-reset-tokens": "1.57s",
        "x-ratelimit-remaining-requests": "14398",
        "x-ratelimit-remaining-tokens": "120",
    }
    assert retry_after_seconds(groq) == pytest.approx(1.57)
    # Azure's milliseconds, and Together's reset of its one limit, in seconds.
    assert retry_after_seconds({"x-ms-retry-after-ms": "2500", "retry-after": "2"}) == 2.5
    together = {"x-ratelimit-limit": "2", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "2"}
    assert retry_after_seconds(together) == 2.0
    # Cerebras' limits per minute and per day, each with its own reset, in seconds.
    cerebras = {
        "x-ratelimit-remaining-requests-day": "14000",
        "x-ratelimit-remaining-tokens-minute": "0",
        "x-ratelimit-reset-requests-day": "33011.4",
        "x-ratelimit-reset-tokens-minute": "11.4",
    }
    assert retry_after_seconds(cerebras) == pytest.approx(11.4)
    spent_for_the_day = {**cerebras, "x-ratelimit-remaining-requests-day": "0"}
    assert retry_after_seconds(spent_for_the_day) == pytest.approx(33011.4)


def test_a_limit_per_day_waits_for_its_reset_or_is_a_spent_quota() -> None:
    # OpenRouter's free models: the limit's headers are in the body, the reset a moment in
    # milliseconds. Waiting for it (hours) stops a batch run, its inputs left pending.
    reset = int((time.time() + 3600) * 1000)
    body = {
        "error": {
            "message": "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock "
            "1000 free model requests per day",
            "code": 429,
            "metadata": {
                "headers": {
                    "X-RateLimit-Limit": "50",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(reset),
                },
                "provider_name": None,
            },
        }
    }
    error = _error(429, body)
    assert isinstance(error, RateLimitedError) and error.retryable
    assert error.retry_after == pytest.approx(3600, abs=5)
    # The same reset sent as a header, in seconds since the epoch, is the same wait.
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset // 1000)}
    error = _error(429, {"error": {"message": "slow down"}}, headers)
    assert error.retry_after == pytest.approx(3600, abs=5)  # type: ignore[attr-defined]
    # Workers AI's daily allocation, with no word of when it ends: a spent quota, which no
    # wait a run makes gets through.
    body = {"errors": [], "error": {"message": "you have used up your daily free allocation"}}
    error = _error(429, body)
    assert isinstance(error, QuotaExceededError) and not error.retryable
    # Groq's requests per day, with the wait it asks for: a rate limit to wait out.
    words = "Rate limit reached on requests per day (RPD): Limit 14400, Used 14400"
    error = _error(429, {"error": {"message": words}}, {"retry-after": "87"})
    assert isinstance(error, RateLimitedError) and error.retry_after == 87.0
    # Without headers (a proxy strips them), the wait its words give is the wait.
    for said, wait in (("8.64s", 8.64), ("6m54.72s", 414.72), ("20ms", 0.02)):
        words = (
            "Rate limit reached for gpt-4o-mini in organization org-x on requests per day "
            f"(RPD): Limit 10000, Used 10000, Requested 1. Please try again in {said}. Visit"
        )
        error = _error(429, {"error": {"message": words, "code": "rate_limit_exceeded"}})
        assert isinstance(error, RateLimitedError) and error.retryable
        assert error.retry_after == pytest.approx(wait)
    # Azure OpenAI's words, and API Management's, with the unit spelled out.
    for words, wait in (
        (
            "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
            "2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing "
            "tier. Please retry after 38 seconds.",
            38.0,
        ),
        ("Rate limit is exceeded. Try again in 20 seconds.", 20.0),
        ("Rate limit is exceeded. Try again in 1 second.", 1.0),
    ):
        error = _error(429, {"error": {"code": "429", "message": words}})
        assert isinstance(error, RateLimitedError) and error.retry_after == wait
    # A request too large for a limit per day fails alone, as one too large for a minute.
    words = "Request too large for gpt-4o on tokens per day (TPD): Limit 90000, Requested 95000."
    error = _error(429, {"error": {"message": words}})
    assert isinstance(error, RateLimitedError) and not error.retryable


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "1" * 400, "-5", "+5", "1e3"])
def test_a_retry_after_that_is_no_wait_is_none(value: str) -> None:
    # RFC 9110's delay-seconds is digits: what `float` reads beyond them is not a wait.
    assert retry_after_seconds({"retry-after": value}) is None
    assert retry_after_seconds({"retry-after-ms": value}) is None
    error = _error(503, {"error": {"message": "busy"}}, {"retry-after": value})
    assert error.retry_after is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "date",
    [
        "Tue, 14 Nov 2023 22:13:50 GMT",
        "Tuesday, 14-Nov-23 22:13:50 GMT",
        "Tue Nov 14 22:13:50 2023",
    ],
)
@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York"])
def test_an_http_date_is_gmt_in_every_form_and_machine_zone(
    date: str, zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        assert retry_after_seconds({"retry-after": date}, now=1_700_000_000.0) == 30.0
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize("off", [-1200.0, -30.0, 30.0, 1200.0, -3.2e8, 3.2e8])
def test_a_moment_to_wait_until_is_read_on_the_providers_clock(off: float) -> None:
    from email.utils import formatdate

    # This machine's clock is `off` seconds from the provider's, which its `Date` gives.
    provider_now = round(time.time() - off)
    said = {"date": formatdate(provider_now, usegmt=True)}
    wait = retry_after_seconds({**said, "retry-after": formatdate(provider_now + 3, usegmt=True)})
    assert wait is not None and 2.0 <= wait <= 4.0
    # OpenRouter's moment in milliseconds since the epoch.
    reset = {**said, "x-ratelimit-reset": str((provider_now + 3) * 1000)}
    wait = retry_after_seconds(reset)
    assert wait is not None and 2.0 <= wait <= 4.0
    # A 503's wait, read the same way.
    error = waits_as_asked(
        ServerError("busy"), {**said, "Retry-After": formatdate(provider_now + 3, usegmt=True)}
    )
    assert error.retry_after is not None and 2.0 <= error.retry_after <= 4.0
    # A router's reset in its body (OpenRouter's), read on the clock its answer's `Date` gives.
    limits = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str((provider_now + 3) * 1000)}
    body = {
        "error": {"message": "Rate limit exceeded", "code": 429, "metadata": {"headers": limits}}
    }
    routed = _error(429, body, said)
    assert routed.retry_after is not None and 2.0 <= routed.retry_after <= 4.0


def test_a_date_a_day_or_more_off_is_taken_for_the_wrong_clock() -> None:
    from email.utils import formatdate

    # A proxy's `Date` of 1970 beside a wait given as a date 5 s away on this machine's clock.
    waits = {
        "date": formatdate(0, usegmt=True),
        "retry-after": formatdate(time.time() + 5, usegmt=True),
    }
    wait = retry_after_seconds(waits)
    assert wait is not None and 3.0 <= wait <= 6.0
    # A moment just past (dates are to the second): no wait, not one of 56 years.
    just_past = {**waits, "retry-after": formatdate(time.time() - 1, usegmt=True)}
    assert retry_after_seconds(just_past) == 0.0
    long_past = {**waits, "retry-after": formatdate(time.time() - 120, usegmt=True)}
    assert retry_after_seconds(long_past) == 0.0  # never a wait read on that `Date`


def test_go_durations_under_a_millisecond() -> None:
    exhausted = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-remaining-requests": "4999"}
    for text, seconds in (("850µs", 850e-6), ("850us", 850e-6), ("500ns", 500e-9)):
        waits = {
            **exhausted,
            "x-ratelimit-reset-tokens": text,
            "x-ratelimit-reset-requests": "6m0s",
        }
        assert retry_after_seconds(waits) == pytest.approx(seconds)


def test_rate_limit_carries_retry_after() -> None:
    error = _error(
        429,
        {"error": {"message": "slow down", "code": "rate_limit_exceeded"}},
        {"retry-after-ms": "250"},
    )
    assert isinstance(error, RateLimitedError)
    assert error.retry_after == 0.25


# Secrets, presets, endpoints


SECRET = "sk-SECRET-KEY"


def test_key_never_shows_in_repr_or_errors() -> None:
    def handler(http: httpx2.Request) -> httpx2.Response:
        assert http.headers["authorization"] == f"Bearer {SECRET}"
        message = f"Incorrect API key provided: {SECRET}."
        return httpx2.Response(
            401,
            json={
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        )

    target = provider("openai", api_key=SECRET, transport=_mock(handler))
    assert SECRET not in repr(target)
    http, _ = target._prepare(ChatRequest("gpt-4o").user("hi"), stream=False)
    assert SECRET not in repr(http)
    for call in (
        lambda: target.chat(ChatRequest("gpt-4o").user("hi")),
        lambda: asyncio.run(target.achat(ChatRequest("gpt-4o").user("hi"))),
        lambda: target.chat_stream(ChatRequest("gpt-4o").user("hi")),
    ):
        with pytest.raises(AuthenticationError) as caught:
            call()
        error = caught.value
        for view in (
            str(error),
            repr(error),
            str(error.as_log()),
            json.dumps(error.as_log().to_dict()),
            error.to_json(),
        ):
            assert SECRET not in view
        assert error.status == 401 and error.provider == "openai"


def test_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "gsk-from-env")
    seen: list[str] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        seen.append(http.headers["authorization"])
        return httpx2.Response(200, json=_completion("ok"))

    provider("groq", transport=_mock(handler)).chat(
        ChatRequest("llama-3.3-70b-versatile").user("x")
    )
    assert seen == ["Bearer gsk-from-env"]


def test_missing_key_fails_before_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    calls: list[httpx2.Request] = []
    target = provider("openai", transport=_mock(lambda r: calls.append(r)))
    with pytest.raises(AuthenticationError) as caught:
        target.chat(ChatRequest("gpt-4o").user("x"))
    assert caught.value.authored and "OPENAI_API_KEY" in str(caught.value)
    assert calls == []
    assert target.validate_chat_request(ChatRequest("gpt-4o").user("x")).warnings == ()


def test_azure_deployment_url_version_and_key_header() -> None:
    seen: list[httpx2.Request] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        seen.append(http)
        return httpx2.Response(200, json=_completion("ok"))

    target = provider(
        "azure-openai",
        api_key=SECRET,
        endpoint="https://res.openai.azure.com/",
        api_version="2024-10-21",
        transport=_mock(handler),
    )
    target.chat(ChatRequest("my-deployment").user("x"))
    http = seen[0]
    assert (
        str(http.url)
        == "https://res.openai.azure.com/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21"
    )
    assert http.headers["api-key"] == SECRET and "authorization" not in http.headers

    v1 = provider(
        "azure-openai",
        api_key="k",
        base_url="https://res.openai.azure.com/openai/v1",
        transport=_mock(handler),
    )
    v1.chat(ChatRequest("dep").user("x"))
    assert str(seen[1].url) == "https://res.openai.azure.com/openai/v1/chat/completions"


def test_azure_foundry_model_inference_url_version_key_and_model_in_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[httpx2.Request] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        seen.append(http)
        return httpx2.Response(200, json=_completion("ok"))

    target = provider(
        "azure-foundry",
        api_key=SECRET,
        endpoint="https://res.services.ai.azure.com/models",
        transport=_mock(handler),
    )
    request = ChatRequest("grok-4-1-fast-non-reasoning").user("x").with_max_output_tokens(50)
    target.chat(request)
    http = seen[0]
    assert str(http.url) == (
        "https://res.services.ai.azure.com/models/chat/completions?api-version=2024-05-01-preview"
    )
    assert http.headers["api-key"] == SECRET and "authorization" not in http.headers
    body = json.loads(http.content)
    assert (body["model"], body["max_tokens"]) == ("grok-4-1-fast-non-reasoning", 50)
    # The model-inference API rejects parameters outside its schema: no stream_options.
    streamed, _ = target._prepare(request, stream=True)
    assert streamed.body["stream"] is True and "stream_options" not in streamed.body

    # The resource's bare URL, the environment, another api-version, an Entra ID token.
    monkeypatch.setenv("AZURE_INFERENCE_ENDPOINT", "https://res.services.ai.azure.com/")
    monkeypatch.delenv("AZURE_INFERENCE_CREDENTIAL", raising=False)
    entra = provider(
        "foundry",
        api_version="2025-05-01",
        headers={"Authorization": "Bearer entra-token"},
        transport=_mock(handler),
    )
    assert entra.name == "azure-foundry"
    entra.chat(ChatRequest("Mistral-large").user("x"))
    assert str(seen[1].url) == (
        "https://res.services.ai.azure.com/models/chat/completions?api-version=2025-05-01"
    )
    assert seen[1].headers["authorization"] == "Bearer entra-token"
    assert "api-key" not in seen[1].headers

    monkeypatch.setenv("AZURE_INFERENCE_CREDENTIAL", "env-key")
    provider("azure-foundry", transport=_mock(handler)).chat(ChatRequest("m").user("x"))
    assert seen[2].headers["api-key"] == "env-key"


def test_azure_openai_points_a_models_endpoint_to_the_foundry_preset() -> None:
    with pytest.raises(ValueError, match=r"use allama.provider\('azure-foundry'"):
        provider("azure-openai", api_key="k", endpoint="https://res.services.ai.azure.com/models")


def test_endpoint_without_base_url_plans_but_does_not_send(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    target = provider("openai-compatible")
    assert (
        target.validate_chat_request(native("m", STRINGS)).coverage is ValidationCoverage.ENCODING
    )
    with pytest.raises(InvalidRequestError, match="base_url"):
        target.chat(ChatRequest("m").user("x"))
    with pytest.raises(InvalidRequestError, match="AZURE_OPENAI_ENDPOINT"):
        provider("azure-openai", api_key="k").chat(ChatRequest("m").user("x"))


def test_every_preset_builds_and_is_a_chat_provider() -> None:
    assert set(MODELS) <= set(PRESET_NAMES)
    for name in MODELS:
        target = provider(name)
        assert isinstance(target, ChatProvider) and isinstance(target, OpenAICompatibleProvider)
        assert target.name == name
    assert provider("azure_openai").name == "azure-openai"
    with pytest.raises(ValueError, match="unknown provider"):
        provider("nope")


def test_capability_answers_per_model_family() -> None:
    openai = provider("openai")
    structured = ChatCapability.STRUCTURED_OUTPUT
    assert openai.chat_capability("gpt-4o-2024-08-06", structured) is CapabilitySupport.SUPPORTED
    assert openai.chat_capability("gpt-3.5-turbo", structured) is CapabilitySupport.UNSUPPORTED
    assert openai.chat_capability("gpt-9-future", structured) is CapabilitySupport.UNKNOWN
    custom = provider("openai-compatible", base_url="http://x")
    answers = {c: custom.chat_capability("m", c) for c in ChatCapability}
    # Function parameters are an object on every Chat Completions endpoint.
    assert answers.pop(ChatCapability.TOOL_SCHEMA_ANY_ROOT) is CapabilitySupport.UNSUPPORTED
    # A plain-text choice output exists only where the endpoint takes a grammar.
    assert answers.pop(ChatCapability.CHOICE_OUTPUT) is CapabilitySupport.UNSUPPORTED
    assert set(answers.values()) == {CapabilitySupport.UNKNOWN}
    root = ChatCapability.RESPONSE_SCHEMA_ANY_ROOT
    assert openai.chat_capability("gpt-4o", root) is CapabilitySupport.UNSUPPORTED
    assert provider("vllm").chat_capability("m", root) is CapabilitySupport.SUPPORTED


def test_rewrites_are_reused_but_key_order_is_kept() -> None:
    first = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a", "b"],
    }
    second = {**first, "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}
    bodies = [
        body_of("openai", native("gpt-4o-2024-08-06", schema))[0]
        for schema in (first, second, first)
    ]
    orders = [list(b["response_format"]["json_schema"]["schema"]["properties"]) for b in bodies]
    assert orders == [["a", "b"], ["b", "a"], ["a", "b"]]
    assert bodies[0] == bodies[2]


def test_a_success_status_with_an_unusable_body() -> None:
    with pytest.raises(ServerError, match="not JSON") as caught:
        decode_response(200, {}, b"<html>gateway</html>")
    assert caught.value.authored and caught.value.context.body == "<html>gateway</html>"
    envelope = {"success": False, "errors": [{"code": 3040}], "error": "JSON Mode couldn't be met"}
    with pytest.raises(Error) as failed:
        decode_response(200, {}, json.dumps(envelope).encode(), provider="workers-ai")
    assert failed.value.provider == "workers-ai" and not failed.value.authored
    with pytest.raises(ServerError, match="do not fit"):
        decode_response(200, {}, b'{"choices": "nope"}')
    # JSON with no `choices` (a gateway's, a server's own error shape, `{}`) is no answer
    # without output: a server error, tried again, with the usage it reports kept.
    for body in (
        {"detail": "Service Unavailable"},
        {"object": "error", "message": "The model is overloaded", "code": 503},
        {},
    ):
        with pytest.raises(ServerError) as missing:
            decode_response(200, {}, json.dumps(body).encode())
        assert missing.value.message == (
            "the provider answered with a body that is not a chat completion: it has no `choices`"
        )
        assert missing.value.retryable and missing.value.authored
    with pytest.raises(ServerError) as missing:
        decode_response(200, {}, b'{"usage": {"prompt_tokens": 7, "completion_tokens": 0}}')
    assert missing.value.context.metadata[REPORTED_USAGE_KEY] == {
        "input_tokens": 7,
        "output_tokens": 0,
    }
    empty = decode_response(200, {}, b'{"id": "c", "choices": []}')  # said, and empty
    assert empty.content == ()


def test_codes_decide_before_words() -> None:
    tpm = {
        "error": {
            "message": "Rate limit reached: too many tokens per min, reduce the length of prompts",
            "code": "rate_limit_exceeded",
        }
    }
    assert type(_error(400, tpm)) is RateLimitedError
    words = {"error": {"message": "This model's maximum context length is 8192 tokens."}}
    assert type(_error(400, words)) is ContextWindowExceededError


def test_an_unreadable_schema_is_an_invalid_request_before_sending() -> None:
    broken = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    for name, request in (
        ("openai", native("gpt-4o-2024-08-06", broken)),
        ("openai", forced("gpt-4o-2024-08-06", broken)),
        ("deepseek", native("deepseek-chat", broken)),
    ):
        with pytest.raises(InvalidRequestError, match="cannot read") as caught:
            provider(name).validate_chat_request(request)
        assert caught.value.authored


CORPUS_SCHEMAS = Path(__file__).resolve().parents[1].parent / "shared/corpus/schemas"
SCHEMAS = sorted(CORPUS_SCHEMAS.glob("*/*.json"))[::25]


@pytest.mark.skipif(not SCHEMAS, reason=f"no schemas under {CORPUS_SCHEMAS}")
@pytest.mark.parametrize("name", ["openai", "azure-openai", "mistral", "vllm", "together"])
def test_real_world_schemas_encode_consistently(name: str) -> None:
    """Under WARN a schema goes out strict exactly when nothing was refused; under ERROR the
    same schemas are refused before sending; every warning is on the response format."""
    target = provider(name, api_key="k", base_url="http://test")
    for path in SCHEMAS:
        schema = json.loads(path.read_text())
        if not isinstance(schema, dict):
            continue
        request = native("gpt-4o-2024-08-06", schema)
        http, warnings = target._prepare(request, stream=False)
        assert all(w.is_about(RequestField.RESPONSE_FORMAT) for w in warnings), path.name
        refused = any(w.kind is WarningKind.UNSUPPORTED for w in warnings)
        assert http.body["response_format"]["json_schema"]["strict"] is not refused, path.name
        strict = request.with_unsupported_policy(UnsupportedPolicy.ERROR)
        if refused:
            with pytest.raises(UnsupportedError):
                target.validate_chat_request(strict)
        else:
            assert list(target.validate_chat_request(strict).warnings) == warnings


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    st.integers(0, 48), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999), st.booleans()
)
def test_reset_durations_parse_to_seconds(
    hours: int, minutes: int, seconds: int, millis: int, as_ms: bool
) -> None:
    head = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    tail = f"{seconds}s{millis}ms" if as_ms else f"{seconds}.{millis:03d}s"
    expected = hours * 3600 + minutes * 60 + seconds + millis / 1000
    # (Of a limit used up: a reset of 0 of one with some left, or not known, is no wait.)
    used_up = {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": head + tail}
    assert retry_after_seconds(used_up) == pytest.approx(expected)


@given(st.integers(400, 599), st.binary(max_size=300) | _JSON.map(json.dumps).map(str.encode))
def test_any_error_body_maps_to_an_error_with_its_status(status: int, body: bytes) -> None:
    error = error_from_response(status, {}, body, provider="p", model="m")
    assert isinstance(error, Error)
    assert (error.status, error.provider, error.model) == (status, "p", "m")
    if body.decode("utf-8", "replace").strip():
        assert not error.authored
        assert "message" not in error.as_log().to_dict()
    else:  # nothing the provider wrote: `HTTP <status>` is allama's
        assert error.authored
        assert error.as_log()["message"] == error.message
        assert error.message == f"HTTP {status}"


@given(_JSON.filter(bool))
def test_any_error_object_in_a_stream_raises_an_error(payload: Any) -> None:
    with pytest.raises(Error) as caught:
        decode_stream(b"data: " + json.dumps({"error": payload}).encode() + b"\n\n", provider="p")
    assert caught.value.provider == "p"


def test_groq_structured_output_does_not_stream() -> None:
    body, warnings = body_of("groq", native("openai/gpt-oss-120b", STRINGS), stream=True)
    assert "response_format" not in body
    assert warnings[0].is_about(RequestField.RESPONSE_FORMAT)
    assert "streamed" in warnings[0].message


def test_deepseek_strict_tools_on_the_beta_base_url() -> None:
    request = forced("deepseek-chat", UINT)
    default = provider("deepseek").validate_chat_request(request)
    assert enforcement(list(default.warnings), RequestField.TOOLS) == "not_enforced"
    beta = provider("deepseek", base_url="https://api.deepseek.com/beta")
    warnings = list(beta.validate_chat_request(request).warnings)
    assert enforcement(warnings, RequestField.TOOLS) == "approximate"
    assert "`minimum` was removed" in warnings[0].message


def test_azure_content_filter_verdicts_explain_the_decline() -> None:
    body = _completion("partial")
    body["choices"][0]["finish_reason"] = "content_filter"
    body["choices"][0]["content_filter_results"] = {
        "hate": {"filtered": False, "severity": "safe"},
        "violence": {"filtered": True, "severity": "high"},
    }
    response = decode_response(200, {}, json.dumps(body).encode(), provider="azure-openai")
    assert response.finish_reason == FinishReason.CONTENT_FILTER
    assert response.decline_explanation() == "the content filter flagged: violence (high)"
    plain = decode_response(200, {}, json.dumps(_completion("x")).encode(), provider="azure-openai")
    assert plain.provider_data == {}


def test_own_auth_headers_stand_in_for_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    seen: list[httpx2.Request] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        seen.append(http)
        return httpx2.Response(200, json=_completion("ok"))

    target = provider(
        "azure-openai",
        endpoint="https://res.openai.azure.com",
        headers={"Authorization": f"Bearer {SECRET}"},
        transport=_mock(handler),
    )
    target.chat(ChatRequest("dep").user("x"))
    assert seen[0].headers["authorization"] == f"Bearer {SECRET}"
    echo = provider(
        "openai",
        headers={"Authorization": f"Bearer {SECRET}"},
        transport=_mock(
            lambda http: httpx2.Response(
                401, json={"error": {"message": f"bad token {SECRET}", "code": "invalid_api_key"}}
            )
        ),
    )
    with pytest.raises(AuthenticationError) as caught:
        echo.chat(ChatRequest("gpt-4o").user("x"))
    assert SECRET not in str(caught.value) and SECRET not in (caught.value.context.body or "")
    assert "api-key" not in seen[0].headers
    assert SECRET not in repr(target)


def test_stop_sequences_refused_where_the_model_rejects_them() -> None:
    request = ChatRequest("o3-mini").user("x").with_stop("END")
    body, warnings = body_of("openai", request)
    assert "stop" not in body and warnings[0].is_about(RequestField.STOP)
    assert body_of("openai", request.model_copy(update={"model": "gpt-4o"}))[0]["stop"] == ["END"]
    with pytest.raises(UnsupportedError) as caught:
        provider("xai").validate_chat_request(
            request.model_copy(update={"model": "grok-4"}).with_unsupported_policy(
                UnsupportedPolicy.ERROR
            )
        )
    assert caught.value.field is RequestField.STOP


def test_reasoning_effort_mapped_to_what_the_family_takes() -> None:
    request = ChatRequest("deepseek-reasoner").user("x")
    body, warnings = body_of("deepseek", request.with_reasoning_effort(ReasoningEffort.MEDIUM))
    assert body["reasoning_effort"] == "high"
    assert warnings[0].kind is WarningKind.APPROXIMATED
    body, warnings = body_of("deepseek", request.with_reasoning_effort(ReasoningEffort.HIGH))
    assert (body["reasoning_effort"], warnings) == ("high", [])
    body, warnings = body_of("deepseek", request.with_reasoning_effort(ReasoningEffort.NONE))
    assert "reasoning_effort" not in body
    assert warnings[0].kind is WarningKind.UNSUPPORTED


def _requests() -> st.SearchStrategy[ChatRequest]:
    text = st.text(max_size=12)
    schema = st.sampled_from([STRINGS, UINT, MAP])
    tool = st.builds(
        ToolDefinition,
        name=st.sampled_from(["lookup", "submit"]),
        description=st.none() | text,
        parameters=schema,
        strict=st.none() | st.booleans(),
    )
    strings: dict[str, Any] = STRINGS
    tally: dict[str, Any] = MAP
    response_format = st.none() | st.sampled_from(
        [
            ResponseFormat.text(),
            ResponseFormat.json_object(),
            ResponseFormat.for_schema(strings, name="person"),
            ResponseFormat.for_schema(tally, name="tally", strict=None),
        ]
    )

    def build(draw: Any) -> ChatRequest:
        request = ChatRequest(draw(st.sampled_from(sorted(set(MODELS.values())))))
        for kind in draw(st.lists(st.sampled_from("sdua t"), min_size=1, max_size=6)):
            if kind == "s":
                request = request.system(draw(text))
            elif kind == "d":
                request = request.developer(draw(text))
            elif kind == "u":
                images = [ImagePart(url="https://x/i.png")] if draw(st.booleans()) else []
                request = request.user(draw(text), *images)
            elif kind == "a":
                request = request.assistant(draw(text))
            elif kind == "t":
                call = ToolCall(id="call_1", name="lookup", arguments="{}")
                request = request.assistant([call]).tool_result("call_1", draw(text))
            else:
                call = ToolCall(id="c", name="f", arguments="")
                request = request.assistant([call]).tool_result("c", draw(text))
        tools = draw(st.lists(tool, max_size=2, unique_by=lambda t: t.name))
        if tools:
            request = request.with_tools(tools).with_tool_choice(
                draw(st.sampled_from([ToolChoice.auto(), ToolChoice.tool(tools[0].name)]))
            )
        return (
            request.with_response_format(draw(response_format))
            .with_temperature(draw(st.none() | st.floats(0, 2)))
            .with_max_output_tokens(draw(st.none() | st.integers(1, 4096)))
            .with_seed(draw(st.none() | st.integers(0, 2**31)))
            .with_stop(*draw(st.lists(text, max_size=2)))
            .with_parallel_tool_calls(draw(st.none() | st.booleans()))
            .with_reasoning_effort(draw(st.none() | st.sampled_from(list(ReasoningEffort))))
        )

    return st.composite(lambda draw: build(draw))()


# `local` starts its own server and takes no base URL; `llama-cpp` speaks for its profile.
@given(
    st.sampled_from(sorted(set(CHAT_COMPLETIONS_PRESETS) - {"local"})), _requests(), st.booleans()
)
def test_every_encoded_body_keeps_the_wire_request_shape(
    name: str, request: ChatRequest, stream: bool
) -> None:
    """The encoder writes plain JSON data: it must still be what `WireRequest` describes,
    with absent fields left out rather than sent as `null`."""
    # An Azure deployment's name is one path segment: a name with `/` is refused unsent.
    assume(name != "azure-openai" or "/" not in request.model)
    target = provider(name, api_key="k", base_url="http://test")
    http, _ = target._prepare(request, stream=stream)
    body = json.loads(http.content)
    assert body == http.body
    assert WireRequest.model_validate(body).dump() == body
    assert None not in body.values()
    for message in body["messages"]:
        assert None not in message.values()


# An output limit above the model's


def _limit_said(warnings: list[Warning]) -> list[tuple[WarningKind, Any, str]]:
    return [(w.kind, getattr(w.subject, "field", None), w.message) for w in warnings]


def _limit_warning(
    model: str, limit: int, asked: int, where: str = "OpenAI"
) -> tuple[WarningKind, Any, str]:
    return (
        WarningKind.UNSUPPORTED,
        RequestField.MAX_OUTPUT_TOKENS,
        f"`{model}` on {where} writes at most {limit} output tokens; {limit} was sent in "
        f"place of {asked}",
    )


@pytest.mark.parametrize(
    ("model", "limit", "asked"),
    [
        ("gpt-4o", 16_384, 20_480),
        ("gpt-4o-mini", 16_384, 16_385),
        ("gpt-4o-2024-05-13", 4_096, 16_384),
        ("gpt-4.1-nano", 32_768, 50_000),
        ("o3-mini", 100_000, 200_000),
        ("o1-mini", 65_536, 100_000),
        ("gpt-5", 128_000, 200_000),
        ("gpt-5-chat-latest", 16_384, 32_000),
        ("gpt-4", 8_192, 10_000),
        ("gpt-3.5-turbo", 4_096, 8_000),
    ],
)
def test_an_output_limit_above_the_models_is_lowered_to_it(
    model: str, limit: int, asked: int
) -> None:
    """OpenAI answers 400 ("max_tokens is too large: 20480. This model supports at most
    16384 completion tokens"), on every input of a batch run: the model's own limit is
    sent, with a warning, and the span shows it."""
    request = ChatRequest(model).user("hi").with_max_output_tokens(asked)
    http, warnings = provider("openai", api_key="k")._prepare(request, stream=False)
    assert http.body["max_completion_tokens"] == limit and "max_tokens" not in http.body
    assert _limit_said(warnings) == [_limit_warning(model, limit, asked)]
    assert http.as_sent == {"max_output_tokens": limit}


def test_an_azure_deployment_named_after_the_model_gets_its_limit() -> None:
    """Azure OpenAI's models page gives each model the output limit OpenAI's does; it goes
    in the field the `api-version` takes (`max_tokens` on the default one)."""
    target = provider("azure-openai", api_key="k", endpoint="https://res.openai.azure.com")
    request = ChatRequest("gpt-4.1").user("hi").with_max_output_tokens(40_000)
    http, warnings = target._prepare(request, stream=False)
    assert http.body["max_tokens"] == 32_768 and "max_completion_tokens" not in http.body
    assert _limit_said(warnings) == [_limit_warning("gpt-4.1", 32_768, 40_000, "Azure OpenAI")]
    assert http.as_sent == {"max_output_tokens": 32_768}


@pytest.mark.parametrize(
    ("name", "model", "asked"),
    [
        ("openai", "gpt-4o", 16_384),  # at the limit
        ("openai", "gpt-4o-64k-output-alpha", 64_000),  # GPT-4o's long-output alpha
        ("openai", "gpt-9-next", 500_000),  # a model the table does not know
        ("openai", "ft:gpt-4o-mini-2024-07-18:org::abc", 20_000),  # no documented limit
        ("openrouter", "openai/gpt-4o", 20_480),  # another provider's limits
        ("groq", "openai/gpt-oss-120b", 100_000),
    ],
)
def test_an_output_limit_within_the_models_or_unknown_goes_as_asked(
    name: str, model: str, asked: int
) -> None:
    request = ChatRequest(model).user("hi").with_max_output_tokens(asked)
    body, warnings = body_of(name, request)
    assert body.get("max_completion_tokens", body.get("max_tokens")) == asked
    assert warnings == []


def test_an_output_limit_over_the_models_is_refused_unsent_under_error() -> None:
    sent: list[httpx2.Request] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        sent.append(http)
        return httpx2.Response(200, json=_completion("ok"))

    target = provider("openai", api_key="k", transport=_mock(handler))
    request = (
        ChatRequest("gpt-4o")
        .user("hi")
        .with_max_output_tokens(20_480)
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert str(raised.value) == (
        "cannot send `max_output_tokens`: `gpt-4o` on OpenAI writes at most 16384 output tokens"
    )
    assert raised.value.stage is UnsupportedStage.BEFORE_SENDING
    assert sent == []


def test_the_body_options_own_limit_goes_as_given() -> None:
    """The option's `max_completion_tokens` goes in place of allama's: nothing is lowered."""
    request = (
        ChatRequest("gpt-4o")
        .user("hi")
        .with_max_output_tokens(20_480)
        .with_option_json("openai_compat", {"max_completion_tokens": 30_000})
    )
    http, warnings = provider("openai", api_key="k")._prepare(request, stream=False)
    assert http.body["max_completion_tokens"] == 30_000
    assert warnings == []
    assert http.as_sent == {"max_output_tokens": 30_000}


def test_the_plan_and_the_dry_run_say_the_limit_was_lowered() -> None:
    sent: list[dict[str, Any]] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(http.content))
        return httpx2.Response(200, json=_completion('{"name": "Ada"}'))

    target = provider("openai", api_key="k", transport=_mock(handler))
    request = ChatRequest("gpt-4o-mini").user("Ada, 1843").with_max_output_tokens(20_000)
    said = [_limit_warning("gpt-4o-mini", 16_384, 20_000)]
    planned = Extractor().plan(target, _Strings, request)
    assert _limit_said(list(planned.request_warnings)) == said
    assert _limit_said(list(target.validate_chat_request(request).warnings)) == said
    got = allama.extract(target, _Strings, request)
    assert list(planned.request_warnings) == list(got.response.warnings)  # as the call says
    assert sent[0]["max_completion_tokens"] == 16_384
