"""Hosts that serve their own models in Anthropic's dialect (DeepSeek, Moonshot, Z.ai,
MiniMax) are not Anthropic.

On the `anthropic` preset (whose profile is verified, whose table is Claude's and whose
prices are Anthropic's) their documented hosts are refused, from `base_url=` or from the
`ANTHROPIC_BASE_URL` their documentation tells users to export for Claude Code; a gateway in
front of Anthropic stays. On `anthropic-compatible` auto extraction forces the tool (DeepSeek
ignores `output_config.format`: the answer would be prose), an explicit native pass is sent
and recorded not enforced, and what the host's models can do beyond the dialect's tools is
unknown. Their errors in OpenAI's words are read as such: a full context window, a refused
`output_config`, an error object sent unnamed in the middle of a stream.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import ChatRequest, ExtractionMode, SchemaEnforcement
from allama.errors import (
    ContextWindowExceededError,
    InvalidRequestError,
    RateLimitedError,
    UnsupportedError,
)
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ImagePart,
    RequestField,
    ResponseFormat,
    TextDelta,
    UnsupportedStage,
    WarningKind,
)

DEEPSEEK = "https://api.deepseek.com/anthropic"
MODEL = "deepseek-v4-flash"
TOOL_NAME = "submit_structured_output"


class Paper(BaseModel):
    author: str
    year: int


def _message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 9},
    }


CALLED = _message(
    [
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": TOOL_NAME,
            "input": {"author": "Ada Lovelace", "year": 1843},
        }
    ],
    stop="tool_use",
)
JSON_TEXT = _message([{"type": "text", "text": '{"author": "Ada Lovelace", "year": 1843}'}])
ASKED = ChatRequest(MODEL).user("Ada Lovelace published the first program in 1843.")


# The `anthropic` preset refuses the hosts of vendors serving their own models

ADVICE = "use allama.provider('anthropic-compatible', base_url=...)"


@pytest.mark.parametrize(
    ("url", "host", "vendor"),
    [
        ("https://api.deepseek.com/anthropic", "api.deepseek.com", "DeepSeek"),
        ("https://api.moonshot.ai/anthropic", "api.moonshot.ai", "Moonshot"),
        ("https://api.moonshot.cn/anthropic/", "api.moonshot.cn", "Moonshot"),
        ("https://api.z.ai/api/anthropic", "api.z.ai", "Z.ai"),
        ("https://open.bigmodel.cn/api/anthropic", "open.bigmodel.cn", "Zhipu"),
        ("https://api.minimax.io/anthropic", "api.minimax.io", "MiniMax"),
        ("https://API.MiniMaxi.com:443/anthropic/v1", "api.minimaxi.com", "MiniMax"),
    ],
)
def test_the_anthropic_preset_refuses_a_host_serving_its_own_models(
    monkeypatch: pytest.MonkeyPatch, url: str, host: str, vendor: str
) -> None:
    why = (
        f"is on {host}, {vendor}'s host, which serves {vendor}'s own models in Anthropic's "
        f"dialect, not Claude: {ADVICE}"
    )
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(ValueError) as given:
        allama.provider("anthropic", api_key="k", base_url=url)
    assert str(given.value) == f"the base URL {why}"
    # Claude Code's setting, exported as these vendors document it: said where it came from.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    with pytest.raises(ValueError) as exported:
        allama.provider("anthropic", api_key="k")
    assert str(exported.value) == f"the base URL (from ANTHROPIC_BASE_URL) {why}"


@pytest.mark.parametrize(
    "url",
    [
        "https://api.deepseek.com./anthropic",  # (the fully qualified name)
        "https://api.deepseek.com\u3002/anthropic",  # (an ideographic full stop is a dot)
        "https://api.deepseek.com\uff0e/anthropic",
        "https://api%2Edeepseek.com/anthropic",
        "https://api.deepseek.com%2e/anthropic",
        "https://API.DEEPSEEK.COM%E3%80%82/anthropic",
    ],
    ids=[
        "trailing-dot",
        "ideographic-stop",
        "fullwidth-stop",
        "escaped-dot",
        "escaped-root",
        "escaped-stop",
    ],
)
def test_another_spelling_of_a_refused_host_is_that_host(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """A name resolves the same with the root's dot, IDNA's full stops or escaped dots."""
    why = (
        "is on api.deepseek.com, DeepSeek's host, which serves DeepSeek's own models in "
        f"Anthropic's dialect, not Claude: {ADVICE}"
    )
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(ValueError) as given:
        allama.provider("anthropic", api_key="k", base_url=url)
    assert str(given.value) == f"the base URL {why}"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    with pytest.raises(ValueError) as exported:
        allama.provider("anthropic", api_key="k")
    assert str(exported.value) == f"the base URL (from ANTHROPIC_BASE_URL) {why}"


def test_a_gateway_stays_anthropic_and_the_vendors_go_through_anthropic_compatible(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gateway = "https://gateway.ai.cloudflare.com/v1/acct/gw/anthropic"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", gateway)
    assert allama.provider("anthropic", api_key="k").base_url == f"{gateway}/v1"
    # A host whose name only ends like one of theirs is not theirs.
    near = "https://notapi.deepseek.com.example/anthropic"
    assert allama.provider("anthropic", api_key="k", base_url=near).base_url == f"{near}/v1"
    # Nor is a name under theirs that they do not document (a gateway may live there).
    under = "https://proxy.api.deepseek.com./anthropic"
    assert allama.provider("anthropic", api_key="k", base_url=under).base_url == f"{under}/v1"
    made = allama.provider("anthropic-compatible", api_key="k", base_url=DEEPSEEK)
    assert made.base_url == f"{DEEPSEEK}/v1"


# `anthropic-compatible`: auto extraction forces the tool


def test_auto_extraction_forces_the_tool_on_a_host_of_its_own_models() -> None:
    """DeepSeek drops `output_config.format` ("Only effort is supported"): a native guess
    would be paid for and answered in prose, with nothing to fall back on. The tool's
    `input_schema` and a forced `tool_choice` it documents as supported."""
    target, recorder = provider("anthropic-compatible", (200, CALLED), base_url=DEEPSEEK)
    extracted = allama.extract(target, Paper, ASKED)
    assert extracted.value == Paper(author="Ada Lovelace", year=1843)
    metadata = extracted.metadata
    assert (metadata.mode, metadata.passes, metadata.auto_fallback) == (
        ExtractionMode.FORCED_TOOL,
        1,
        None,
    )
    assert metadata.enforcement is SchemaEnforcement.APPROXIMATE
    assert [(each.kind, each.message) for each in metadata.degradations] == [
        (
            WarningKind.APPROXIMATED,
            "the schema of `Paper` was approximated: the schema at `Paper` is sent to the "
            "Anthropic-compatible endpoint, which does not say whether it enforces it as "
            "Anthropic does",
        )
    ]
    (body,) = recorder.bodies
    assert "output_config" not in body
    assert body["tool_choice"] == {
        "type": "tool",
        "name": TOOL_NAME,
        "disable_parallel_tool_use": True,
    }


def test_an_explicit_native_extraction_is_sent_and_not_enforced() -> None:
    """Asked for, the format goes; nothing says the host applies it, so the record says
    not enforced (a floor of `approximate` refuses it before paying)."""
    target, recorder = provider("anthropic-compatible", (200, JSON_TEXT), base_url=DEEPSEEK)
    extracted = allama.extract(target, Paper, ASKED.with_option(ExtractionMode.NATIVE))
    assert extracted.value == Paper(author="Ada Lovelace", year=1843)
    metadata = extracted.metadata
    assert (metadata.mode, metadata.enforcement) == (
        ExtractionMode.NATIVE,
        SchemaEnforcement.NOT_ENFORCED,
    )
    assert [(each.kind, each.message) for each in metadata.degradations] == [
        (
            WarningKind.APPROXIMATED,
            "the schema of `Paper` was approximated: the schema at `Paper` is sent to the "
            "Anthropic-compatible endpoint, which does not say whether it enforces it as "
            "Anthropic does",
        ),
        (
            WarningKind.UNSUPPORTED,
            "the Anthropic-compatible endpoint does not say that it applies "
            "`output_config.format`; the schema of `Paper` was sent, and the output is not "
            "known to follow it",
        ),
    ]
    (body,) = recorder.bodies
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert "tools" not in body
    floored = allama.Extractor(min_enforcement=SchemaEnforcement.APPROXIMATE)
    with pytest.raises(allama.EnforcementBelowError):
        floored.extract(target, Paper, ASKED.with_option(ExtractionMode.NATIVE))
    assert len(recorder.bodies) == 1


# `anthropic-compatible`: what the host's models can do is not known


def test_a_host_model_answers_unknown_beyond_the_dialects_tools() -> None:
    target = allama.provider("anthropic-compatible", api_key="k", base_url=DEEPSEEK)
    answers = {
        capability: target.chat_capability(MODEL, capability) for capability in ChatCapability
    }
    S, N, U = (
        CapabilitySupport.SUPPORTED,
        CapabilitySupport.UNSUPPORTED,
        CapabilitySupport.UNKNOWN,
    )
    assert answers == {
        ChatCapability.STRUCTURED_OUTPUT: U,
        ChatCapability.TOOL_CALLS: S,
        ChatCapability.FORCED_TOOL_CHOICE: S,
        ChatCapability.STREAMING: U,
        ChatCapability.REASONING: U,
        ChatCapability.IMAGE_INPUT: U,
        ChatCapability.PARALLEL_TOOL_CALLS: U,
        ChatCapability.RESPONSE_SCHEMA_ANY_ROOT: N,
        ChatCapability.TOOL_SCHEMA_ANY_ROOT: N,
        ChatCapability.LOGPROBS: N,
        ChatCapability.CHOICE_OUTPUT: N,
    }
    # Claude's own answers are Claude's, on Anthropic's host.
    claude = allama.provider("anthropic", api_key="k")
    assert claude.chat_capability("claude-sonnet-4-5", ChatCapability.IMAGE_INPUT) is S


def test_an_image_goes_to_a_host_model_without_a_claim() -> None:
    """Unknown is not unsupported: the image is sent as given, with no warning, as on
    `openai-compatible`; the host answers for itself."""
    png = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")
    target, recorder = provider("anthropic-compatible", (200, JSON_TEXT), base_url=DEEPSEEK)
    image_part = ImagePart(data=png, media_type="image/png")
    response = target.chat(ChatRequest(MODEL).user("What is it?", image_part))
    assert response.warnings == ()
    (body,) = recorder.bodies
    image = body["messages"][0]["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"


# Errors in OpenAI's words

CONTEXT = (
    "This model's maximum context length is 131072 tokens. However, you requested 141980 "
    "tokens (133980 in the messages, 8000 in the completion). Please reduce the length of "
    "the messages or completion."
)


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": CONTEXT, "type": "invalid_request_error", "code": None}},
        {"type": "error", "error": {"type": "invalid_request_error", "message": CONTEXT}},
    ],
)
def test_a_full_context_window_in_openais_words(body: dict[str, Any]) -> None:
    target, _ = provider("anthropic-compatible", (400, body), base_url=DEEPSEEK)
    with pytest.raises(ContextWindowExceededError) as raised:
        target.chat(ChatRequest(MODEL).user("a long read"))
    assert str(raised.value) == CONTEXT


@pytest.mark.parametrize(
    "words",
    [
        "output_config: Extra inputs are not permitted",
        "Unknown parameter: output_config",
        "Unrecognized request argument supplied: output_config",
    ],
)
def test_a_refused_output_config_is_a_refused_response_format(words: str) -> None:
    """A host (or a gateway) without `output_config` names it alone: the response format's,
    so that a guessed native extraction falls back to a forced tool."""
    refused = {"type": "error", "error": {"type": "invalid_request_error", "message": words}}
    gateway = "http://127.0.0.1:4000"
    target, recorder = provider("anthropic", (400, refused), (200, CALLED), base_url=gateway)
    extracted = allama.extract(target, Paper, ChatRequest("glm-4.6").user("Ada 1843"))
    assert extracted.value == Paper(author="Ada Lovelace", year=1843)
    fallback = extracted.metadata.auto_fallback
    assert fallback is not None
    assert (fallback.field, fallback.stage) == (
        RequestField.RESPONSE_FORMAT,
        UnsupportedStage.PROVIDER,
    )
    native, forced = recorder.bodies
    assert "output_config" in native and "tools" not in native
    assert "output_config" not in forced and forced["tool_choice"]["name"] == TOOL_NAME
    # On a chat, the same refusal names the field.
    target, _ = provider("anthropic", (400, refused), base_url=gateway)
    fmt = ResponseFormat.for_schema(Paper.model_json_schema(), name="paper")
    with pytest.raises(UnsupportedError) as raised:
        target.chat(ChatRequest("glm-4.6").user("x").with_response_format(fmt))
    assert (raised.value.field, str(raised.value)) == (RequestField.RESPONSE_FORMAT, words)


def test_a_refused_effort_is_not_a_refused_response_format() -> None:
    words = "output_config.effort: Input should be 'low' or 'medium'"
    refused = {"type": "error", "error": {"type": "invalid_request_error", "message": words}}
    target, _ = provider("anthropic", (400, refused))
    with pytest.raises(InvalidRequestError) as raised:
        target.chat(ChatRequest("claude-opus-4-6").user("x").with_reasoning_effort("high"))
    assert str(raised.value) == words


# A stream's error object, sent unnamed


def _sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


STARTED = _sse(
    {
        "type": "message_start",
        "message": {**_message([], stop=""), "stop_reason": None, "usage": {"input_tokens": 10}},
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
)


def test_an_unnamed_error_object_in_a_stream_is_that_error() -> None:
    """After a normal start, `data: {"error": {...}}` with no event name: the host's error
    with its words (a 429 is a rate limit), not a stream that merely ended early."""
    unnamed = b'data: {"error":{"message":"Rate limit exceeded","code":429}}\n\n'
    target, _ = provider("anthropic-compatible", (200, STARTED + unnamed), base_url=DEEPSEEK)
    seen: list[str] = []
    with (
        pytest.raises(RateLimitedError) as raised,
        target.chat_stream(ChatRequest(MODEL).user("hi")) as stream,
    ):
        for event in stream:
            if isinstance(event, TextDelta):
                seen.append(event.text)
    assert str(raised.value) == "Rate limit exceeded"
    assert seen == ["Hel"]
