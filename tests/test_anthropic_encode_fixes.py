"""What the Anthropic (and Gemini) encoders send, and say, for reported cases.

A named tool forced on Anthropic is asked for exactly one call (`disable_parallel_tool_use`)
unless the caller allows parallel calls: left unset, a forced extraction could be answered
with two calls and paid for nothing. A refusal under `UnsupportedPolicy.ERROR` says why the
field cannot be sent, never what was done instead (nothing was sent); the warning under
`WARN` keeps both. A data URL's scheme and `base64` token are case-insensitive, and so is
a part's own media type, read without its parameters (a text/plain charset decoded).
Anthropic's thinking rules hold for thinking, a forced `tool_choice` and sampling fields
given through the `anthropic` body option too, and its `max_tokens`, thinking budget and
forced `tool_choice` go under the rules of the request's own. A turn that goes back whole
(paused, or its code execution waiting on tool calls) goes back with its server tool
blocks and container only to the provider that issued it, as its signed thinking does;
elsewhere they are left out with a warning. A schema "too complex" (a limit on every strict
schema together, naming no field) is refused on the field the request carried its schemas
in, and strict tools beside a response format past the per-request limits give up `strict`.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import ChatRequest, ExtractionMode
from allama.errors import InvalidRequestError, UnsupportedError
from allama.types import (
    AssistantMessage,
    DocumentPart,
    ImagePart,
    ReasoningEffort,
    RequestField,
    ResponseFormat,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    Warning,
    WarningKind,
)

KEY = "sk-ant-test-1234"
MODEL = "claude-sonnet-4-5"
TOOL = ToolDefinition(
    name="get",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
PNG = b"\x89PNG\r\n\x1a\n"
PNG_B64 = base64.b64encode(PNG).decode("ascii")


NAMED: dict[str, Any] = {"type": "tool", "name": "get"}


class Answer(BaseModel):
    a: int


def _anthropic(request: ChatRequest) -> tuple[dict[str, Any], list[Any]]:
    http, warnings = allama.provider("anthropic", api_key=KEY)._prepare(request, stream=False)
    return http.body, list(warnings)


def _gemini(request: ChatRequest) -> tuple[dict[str, Any], list[Any]]:
    target = allama.provider("gemini", api_key="k")
    http, warnings = target._prepare(request, stream=False)
    return http.body, list(warnings)


# One call of a forced named tool


def test_a_forced_tool_extraction_asks_anthropic_for_exactly_one_call() -> None:
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "submit_structured_output",
                "input": {"a": 1},
            }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    target, server = provider("anthropic", (200, answer))
    request = ChatRequest(MODEL).user("x").with_option(ExtractionMode.FORCED_TOOL)
    assert allama.extract(target, Answer, request).value == Answer(a=1)
    assert server.bodies[0]["tool_choice"] == {
        "type": "tool",
        "name": "submit_structured_output",
        "disable_parallel_tool_use": True,
    }


@pytest.mark.parametrize(
    ("choice", "parallel", "wire"),
    [
        # A named tool: one call unless the caller allows several.
        (ToolChoice.tool("get"), None, {**NAMED, "disable_parallel_tool_use": True}),
        (ToolChoice.tool("get"), False, {**NAMED, "disable_parallel_tool_use": True}),
        (ToolChoice.tool("get"), True, NAMED),
        # Some tool (`any`): a request that forces tools may want several calls.
        (ToolChoice.required(), None, {"type": "any"}),
        (ToolChoice.required(), False, {"type": "any", "disable_parallel_tool_use": True}),
        (ToolChoice.auto(), None, {"type": "auto"}),
        # `none` takes no `disable_parallel_tool_use`.
        (ToolChoice.none(), None, {"type": "none"}),
        (ToolChoice.none(), False, {"type": "none"}),
    ],
)
def test_parallel_tool_use_per_tool_choice(
    choice: ToolChoice, parallel: bool | None, wire: dict[str, Any]
) -> None:
    request = (
        ChatRequest(MODEL)
        .user("x")
        .with_tools([TOOL])
        .with_tool_choice(choice)
        .with_parallel_tool_calls(parallel)
    )
    body, warnings = _anthropic(request)
    assert body["tool_choice"] == wire
    assert warnings == []


# Refusals say why, not what was done


_LOOP = (
    "a tool loop whose last assistant turn has no signed thinking to open it (tool calls "
    "made elsewhere, or with thinking off)"
)
REFUSALS: list[tuple[str, ChatRequest, RequestField, str, str]] = [
    (
        "forced tool and thinking",
        ChatRequest(MODEL)
        .user("hi")
        .with_tools([TOOL])
        .with_tool_choice(ToolChoice.required())
        .with_reasoning_effort(ReasoningEffort.HIGH),
        RequestField.REASONING_EFFORT,
        "Anthropic does not think while a tool call is forced",
        "thinking was left off so that the forced tool holds",
    ),
    (
        "budget below 1024",
        ChatRequest(MODEL)
        .user("hi")
        .with_reasoning_effort(ReasoningEffort.HIGH)
        .with_max_output_tokens(1000),
        RequestField.REASONING_EFFORT,
        "Anthropic needs a thinking budget of at least 1024 tokens below `max_tokens` (1000)",
        "thinking was left off",
    ),
    (
        "unsigned tool loop",
        ChatRequest(MODEL)
        .user("hi")
        .with_tools([TOOL])
        .assistant([ToolCall(id="toolu_1", name="get", arguments='{"q":"a"}')])
        .tool_result("toolu_1", "r")
        .with_reasoning_effort(ReasoningEffort.LOW),
        RequestField.REASONING_EFFORT,
        f"Anthropic does not think in {_LOOP}",
        "thinking was left off",
    ),
    (
        "tool choice without tools",
        ChatRequest(MODEL).user("hi").with_tool_choice(ToolChoice.required()),
        RequestField.TOOL_CHOICE,
        "the request gives no tools to call",
        "`tool_choice` was not sent",
    ),
    (
        "json mode",
        ChatRequest(MODEL).user("hi").with_response_format(ResponseFormat.json_object()),
        RequestField.RESPONSE_FORMAT,
        "Anthropic has no JSON mode without a schema",
        "the output is unconstrained",
    ),
    (
        "choice output",
        ChatRequest(MODEL).user("hi").with_response_format(ResponseFormat.choice(["a", "b"])),
        RequestField.RESPONSE_FORMAT,
        "Anthropic has no plain-text choice output",
        "the answer was not constrained to the options",
    ),
    (
        "logprobs",
        ChatRequest(MODEL).user("hi").with_logprobs(3),
        RequestField.LOGPROBS,
        "Anthropic reports no log-probabilities",
        "none were asked for",
    ),
]


@pytest.mark.parametrize(
    ("request_", "field", "why", "instead"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_an_anthropic_refusal_says_why_and_its_warning_what_was_done(
    request_: ChatRequest, field: RequestField, why: str, instead: str
) -> None:
    with pytest.raises(UnsupportedError) as caught:
        _anthropic(request_.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is field
    assert str(caught.value) == f"cannot send `{field}`: {why}"
    _, warnings = _anthropic(request_)
    assert [(w.kind, w.message) for w in warnings if w.is_about(field)] == [
        (WarningKind.UNSUPPORTED, f"{why}; {instead}")
    ]


def test_a_gemini_tool_choice_without_tools_is_refused_without_saying_it_was_dropped() -> None:
    request = ChatRequest("gemini-2.5-flash").user("hi").with_tool_choice(ToolChoice.tool("get"))
    with pytest.raises(UnsupportedError) as caught:
        _gemini(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert str(caught.value) == "cannot send `tool_choice`: the request gives no tools to call"
    body, warnings = _gemini(request)
    assert "toolConfig" not in body
    assert [w.message for w in warnings] == [
        "the request gives no tools to call; `tool_choice` was not sent"
    ]


# Data URLs in any case


@pytest.mark.parametrize(
    "url",
    [
        f"DATA:image/png;BASE64,{PNG_B64}",
        f"Data:IMAGE/PNG;Base64,{PNG_B64}",
        f"data:image/png;charset=binary;base64,{PNG_B64}",
    ],
)
def test_a_data_url_in_any_case_is_inline_data(url: str) -> None:
    request = ChatRequest(MODEL).user("What is this?", ImagePart(url=url))
    body, _ = _anthropic(request)
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
    }
    body, _ = _gemini(request.model_copy(update={"model": "gemini-2.5-flash"}))
    assert body["contents"][0]["parts"][1] == {
        "inlineData": {"mimeType": "image/png", "data": PNG_B64}
    }


def test_a_data_url_in_upper_case_not_base64_is_refused_not_sent_as_a_url() -> None:
    request = ChatRequest(MODEL).user("x", ImagePart(url="DATA:image/png,%89PNG"))
    with pytest.raises(InvalidRequestError, match="must be base64-encoded"):
        _anthropic(request)
    with pytest.raises(InvalidRequestError, match="must be base64-encoded"):
        _gemini(request.model_copy(update={"model": "gemini-2.5-flash"}))


def test_a_url_that_only_mentions_data_is_still_a_url() -> None:
    url = "https://example.com/data:image/png;base64,x.png"
    request = ChatRequest(MODEL).user("x", ImagePart(url=url))
    body, _ = _anthropic(request)
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": url},
    }


PDF = b"%PDF-1.4 x"


@pytest.mark.parametrize(
    ("url", "source"),
    [
        (
            "data:application/pdf;base64," + base64.b64encode(PDF).decode(),
            {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(PDF).decode(),
            },
        ),
        (
            "DATA:TEXT/PLAIN;BASE64," + base64.b64encode("café".encode()).decode(),
            {"type": "text", "media_type": "text/plain", "data": "café"},
        ),
    ],
)
def test_a_document_given_as_a_data_url_goes_as_its_bytes_not_as_a_url(
    url: str, source: dict[str, Any]
) -> None:
    body, _ = _anthropic(ChatRequest(MODEL).user("Summarise.", DocumentPart(url=url)))
    assert body["messages"][0]["content"][1] == {"type": "document", "source": source}


def test_a_document_data_url_not_marked_base64_goes_as_its_text() -> None:
    """RFC 2397's default form: the text percent-encoded (it was refused)."""
    request = ChatRequest(MODEL).user("x", DocumentPart(url="data:text/plain,hello%20there"))
    body, warnings = _anthropic(request)
    assert body["messages"][0]["content"][1] == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "hello there"},
    }
    assert warnings == []


# A data URL that names no media type: the part's, else (a document) RFC 2397's text/plain


def test_an_image_data_url_of_no_type_takes_the_parts() -> None:
    part = ImagePart(url=f"data:;base64,{PNG_B64}", media_type="image/png")
    body, _ = _anthropic(ChatRequest(MODEL).user("What is this?", part))
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
    }
    bare = ImagePart(url=f"data:;base64,{PNG_B64}")
    with pytest.raises(InvalidRequestError) as caught:
        _anthropic(ChatRequest(MODEL).user("x", bare))
    assert str(caught.value).endswith(
        "takes JPEG, PNG, GIF and WebP images, not one of no media type"
    )


@pytest.mark.parametrize(
    ("media_type", "source"),
    [
        (
            "application/pdf",
            {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(PDF).decode(),
            },
        ),
        (None, {"type": "text", "media_type": "text/plain", "data": PDF.decode()}),
    ],
)
def test_a_document_data_url_of_no_type_takes_the_parts_else_text(
    media_type: str | None, source: dict[str, Any]
) -> None:
    url = "data:;base64," + base64.b64encode(PDF).decode()
    part = DocumentPart(url=url, media_type=media_type)
    body, _ = _anthropic(ChatRequest(MODEL).user("Summarise.", part))
    assert body["messages"][0]["content"][1] == {"type": "document", "source": source}


# Thinking through the body option: Anthropic's thinking rules hold for it too

THINK: dict[str, Any] = {"type": "enabled", "budget_tokens": 2048}
THINK_TEXT = '{"type":"enabled","budget_tokens":2048}'
FORCED_THINKING = (
    f"`thinking` of the body option `anthropic` ({THINK_TEXT}) turns thinking on, and "
    "Anthropic does not think while a tool call is forced"
)
EXTRACTED = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": MODEL,
    "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "submit_structured_output", "input": {"a": 1}}
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
SUBMIT = {"type": "tool", "name": "submit_structured_output", "disable_parallel_tool_use": True}


def _said(warnings: Any) -> list[tuple[WarningKind, Any, str]]:
    return [(w.kind, getattr(w.subject, "field", None), w.message) for w in warnings]


NOT_STRICT = (
    WarningKind.UNSUPPORTED,
    RequestField.TOOLS,
    "`claude-opus-4-1` on Anthropic has no strict tools; tool `submit_structured_output` was "
    "sent without `strict`",
)


@pytest.mark.parametrize(
    ("model", "mode", "enforcement", "before"),
    [
        ("claude-sonnet-4-5", ExtractionMode.FORCED_TOOL, "exact", []),
        # No structured outputs: automatic extraction forces its tool itself.
        ("claude-opus-4-1", ExtractionMode.AUTO, "not_enforced", [NOT_STRICT]),
    ],
)
def test_an_extractions_forced_tool_holds_against_the_options_thinking(
    model: str, mode: ExtractionMode, enforcement: str, before: list[Any]
) -> None:
    target, server = provider("anthropic", (200, {**EXTRACTED, "model": model}))
    request = (
        ChatRequest(model)
        .user("x")
        .with_option(mode)
        .with_option_json("anthropic", {"thinking": THINK})
    )
    result = allama.extract(target, Answer, request)
    assert result.value == Answer(a=1)
    assert server.bodies[0]["tool_choice"] == SUBMIT
    assert "thinking" not in server.bodies[0]
    assert server.bodies[0]["max_tokens"] == 16_384
    assert _said(result.response.warnings) == [
        *before,
        (
            WarningKind.UNSUPPORTED,
            RequestField.OPTIONS,
            f"{FORCED_THINKING}; it was not sent, so that the forced tool holds",
        ),
    ]
    # The tool was forced: the record stands on it, its tool choice noted as sent.
    assert result.metadata.mode is ExtractionMode.FORCED_TOOL
    assert result.metadata.enforcement.value == enforcement
    assert result.metadata.notes == []


def test_under_error_the_options_thinking_beside_a_forced_tool_is_refused_unsent() -> None:
    target, server = provider("anthropic", (200, EXTRACTED))
    request = (
        ChatRequest(MODEL)
        .user("x")
        .with_option(ExtractionMode.FORCED_TOOL)
        .with_option_json("anthropic", {"thinking": THINK})
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as caught:
        allama.extract(target, Answer, request)
    assert str(caught.value) == f"cannot send `options`: {FORCED_THINKING}"
    assert server.bodies == []


OPTION_THINKING: list[tuple[str, ChatRequest, dict[str, Any], list[tuple[Any, str]]]] = [
    (
        "the request's temperature, top_p",
        ChatRequest(MODEL)
        .user("hi")
        .with_temperature(0.2)
        .with_top_p(0.5)
        .with_option_json("anthropic", {"thinking": THINK}),
        {"thinking": THINK, "max_tokens": 16_384 + 2048},
        [
            (RequestField.TEMPERATURE, "Anthropic takes `temperature` only at 1 with thinking on"),
            (
                RequestField.TOP_P,
                "Anthropic takes `top_p` from 0.95 to 1 with thinking on; 0.5 was left out",
            ),
        ],
    ),
    (
        "the option's forced tool_choice beside reasoning_effort",
        ChatRequest(MODEL)
        .user("hi")
        .with_tools([TOOL])
        .with_reasoning_effort(ReasoningEffort.LOW)
        .with_option_json("anthropic", {"tool_choice": {"type": "any"}}),
        {"tool_choice": {"type": "any"}, "max_tokens": 16_384},
        [
            (
                RequestField.REASONING_EFFORT,
                "Anthropic does not think while a tool call is forced; thinking was left off "
                "so that the forced tool holds",
            )
        ],
    ),
    (
        "the option's top_k beside reasoning_effort",
        ChatRequest(MODEL)
        .user("hi")
        .with_reasoning_effort(ReasoningEffort.LOW)
        .with_option_json("anthropic", {"top_k": 5}),
        {"thinking": THINK, "max_tokens": 16_384 + 2048},
        [
            (
                RequestField.OPTIONS,
                "`top_k` of the body option `anthropic` (5) goes beside the thinking "
                "`reasoning_effort` turns on, and Anthropic takes no `top_k` with thinking on; "
                "it was not sent",
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("request_", "sent", "warned"),
    [case[1:] for case in OPTION_THINKING],
    ids=[case[0] for case in OPTION_THINKING],
)
def test_thinking_and_what_anthropic_refuses_with_it_are_not_sent_together(
    request_: ChatRequest, sent: dict[str, Any], warned: list[tuple[Any, str]]
) -> None:
    body, warnings = _anthropic(request_)
    left_out = {"thinking", "tool_choice", "temperature", "top_p", "top_k"} - set(sent)
    assert {key: body[key] for key in sent} == sent
    assert [key for key in left_out if key in body] == []
    assert _said(warnings) == [(WarningKind.UNSUPPORTED, field, said) for field, said in warned]
    with pytest.raises(UnsupportedError) as caught:
        _anthropic(request_.with_unsupported_policy(UnsupportedPolicy.ERROR))
    field, said = warned[0]
    assert caught.value.field is field
    assert str(caught.value) == f"cannot send `{field}`: {said.split('; ')[0]}"


def test_the_default_max_tokens_exceeds_the_options_thinking_budget() -> None:
    thinking = {"type": "enabled", "budget_tokens": 20_000}
    request = ChatRequest(MODEL).user("hi").with_option_json("anthropic", {"thinking": thinking})
    http, warnings = allama.provider("anthropic", api_key=KEY)._prepare(request, stream=False)
    assert http.body["max_tokens"] == 16_384 + 20_000
    assert http.body["thinking"] == thinking
    assert http.as_sent == {"max_output_tokens": 16_384 + 20_000}
    assert list(warnings) == []
    # The request's own limit is the caller's: sent as given.
    body, _ = _anthropic(request.with_max_output_tokens(30_000))
    assert body["max_tokens"] == 30_000


def test_the_options_own_thinking_beside_its_own_forced_choice_or_sampling_goes_as_given() -> None:
    option = {
        "thinking": THINK,
        "tool_choice": {"type": "any"},
        "temperature": 0.5,
        "top_k": 5,
        "top_p": 0.9,
    }
    request = ChatRequest(MODEL).user("hi").with_tools([TOOL]).with_option_json("anthropic", option)
    for policy in (UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR):
        body, warnings = _anthropic(request.with_unsupported_policy(policy))
        assert {key: body[key] for key in option} == option
        beside = "goes beside the option's own thinking, and Anthropic"
        assert _said(warnings) == [
            (
                WarningKind.UNSUPPORTED,
                RequestField.OPTIONS,
                f"`thinking` of the body option `anthropic` ({THINK_TEXT}) turns thinking on "
                "beside the option's own forced `tool_choice`, which Anthropic refuses; both "
                "were sent as given",
            ),
            (
                WarningKind.UNSUPPORTED,
                RequestField.OPTIONS,
                f"`temperature` of the body option `anthropic` (0.5) {beside} takes "
                "`temperature` only at 1 with thinking on; both were sent as given",
            ),
            (
                WarningKind.UNSUPPORTED,
                RequestField.OPTIONS,
                f"`top_k` of the body option `anthropic` (5) {beside} takes no `top_k` with "
                "thinking on; both were sent as given",
            ),
            (
                WarningKind.UNSUPPORTED,
                RequestField.OPTIONS,
                f"`top_p` of the body option `anthropic` (0.9) {beside} takes `top_p` only "
                "from 0.95 to 1 with thinking on; both were sent as given",
            ),
        ]


# A part's own media type, in any case and with parameters

HELLO = {"type": "text", "media_type": "text/plain", "data": "hello"}


@pytest.mark.parametrize(
    ("part", "block"),
    [
        (
            DocumentPart(data=b"hello", media_type="text/plain; charset=utf-8"),
            {"type": "document", "source": HELLO},
        ),
        (
            DocumentPart(data=b"hello", media_type="TEXT/PLAIN"),
            {"type": "document", "source": HELLO},
        ),
        # Text in another charset goes as the text it is.
        (
            DocumentPart(
                data="café".encode("latin-1"), media_type='Text/Plain; Charset="ISO-8859-1"'
            ),
            {"type": "document", "source": {**HELLO, "data": "café"}},
        ),
        (
            DocumentPart(data=PDF, media_type="Application/PDF; name=a.pdf"),
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": base64.b64encode(PDF).decode(),
                },
            },
        ),
        (
            DocumentPart(url="https://example.com/a", media_type="APPLICATION/PDF"),
            {"type": "document", "source": {"type": "url", "url": "https://example.com/a"}},
        ),
        (
            ImagePart(data=PNG, media_type="IMAGE/PNG"),
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
            },
        ),
        (
            ImagePart(url=f"data:;base64,{PNG_B64}", media_type="Image/Png"),
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
            },
        ),
    ],
)
def test_a_parts_media_type_is_read_without_case_or_parameters(
    part: DocumentPart | ImagePart, block: dict[str, Any]
) -> None:
    body, warnings = _anthropic(ChatRequest(MODEL).user("Read.", part))
    assert body["messages"][0]["content"][1] == block
    assert warnings == []


@pytest.mark.parametrize(
    ("part", "why"),
    [
        (
            DocumentPart(data=b"x", media_type="text/plain; charset=no-such-charset"),
            "a text/plain document names charset no-such-charset, which allama cannot read",
        ),
        (
            DocumentPart(data=b"\xff\xfe\xfd", media_type="text/plain; charset=us-ascii"),
            "a text/plain document must be text in its charset (us-ascii)",
        ),
        (
            DocumentPart(data=b"<p>", media_type="Text/HTML; charset=utf-8"),
            "Anthropic takes PDF and plain-text documents, not text/html",
        ),
        (
            ImagePart(data=PNG, media_type="Image/BMP; q=1"),
            "Anthropic takes JPEG, PNG, GIF and WebP images, not image/bmp",
        ),
    ],
)
def test_a_part_anthropic_cannot_read_is_refused_by_its_plain_media_type(
    part: DocumentPart | ImagePart, why: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _anthropic(ChatRequest(MODEL).user("Read.", part))
    assert str(caught.value) == why


# A turn that goes back whole goes back so only to the provider that issued it

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/cases"
CORPUS = Path(os.environ.get("ALLAMA_CORPUS_DIR", DEFAULT_CORPUS))
PAUSED_SEARCH = CORPUS / "anthropic" / "pause_turn_server_tool.json"
OTHER_HOSTS: dict[str, tuple[str, str, str]] = {  # preset: base URL, model, display name
    "anthropic-compatible": (
        "https://api.deepseek.com/anthropic",
        "deepseek-chat",
        "the Anthropic-compatible endpoint",
    ),
    "azure-anthropic": (
        "https://res.services.ai.azure.com/anthropic",
        MODEL,
        "Claude in Microsoft Foundry",
    ),
}
CONTAINER: dict[str, Any] = {"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"}
RUN: dict[str, Any] = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "code_execution",
    "input": {"code": "r = await calc(a=1)"},
}
CALLER: dict[str, Any] = {"type": "code_execution_20250825", "tool_id": "srvtoolu_1"}
WAITING: list[dict[str, Any]] = [
    {"type": "text", "text": "Running it."},
    RUN,
    {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {"a": 1}, "caller": CALLER},
]


def _left_out(display: str) -> str:
    return (
        f"{display} takes back server tool blocks only in the turns it issued; another "
        "provider's turn holding some (a server tool's calls and results, in a finished "
        "turn, a paused one, or one whose code execution waits on tool calls) was sent "
        "without its server tool blocks and container"
    )


def _paused_search() -> dict[str, Any]:
    """The recorded turn Anthropic paused: signed thinking, text, and 21 blocks of web
    searches and their results (with Anthropic's `encrypted_content`)."""
    if not PAUSED_SEARCH.is_file():
        pytest.skip(f"no recorded traffic at {PAUSED_SEARCH}")
    body: dict[str, Any] = json.loads(PAUSED_SEARCH.read_text())["response_body"]
    assert body["stop_reason"] == "pause_turn"
    assert sum(block["type"] not in ("text", "thinking") for block in body["content"]) == 21
    return body


def _stream_of(message: dict[str, Any]) -> bytes:
    """`message` as a stream, each block whole at its start, the container in the delta."""
    start = {**message, "content": [], "stop_reason": None}
    container = start.pop("container", None)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    delta: dict[str, Any] = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    if container is not None:
        delta["container"] = container
    events.append({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 5}})
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _turn_from_anthropic(message: dict[str, Any], *, streamed: bool) -> AssistantMessage:
    """`message` as Anthropic answered it, made the assistant turn of the next request."""
    target, _ = provider("anthropic", (200, _stream_of(message) if streamed else message))
    request = ChatRequest(MODEL).user("Search the web").with_tools([TOOL])
    if streamed:
        with target.chat_stream(request) as stream:
            return stream.response().to_assistant_message()
    return target.chat(request).to_assistant_message()


def _continued(
    preset: str, turn: AssistantMessage, *then: str
) -> tuple[dict[str, Any], list[Warning]]:
    """The body sent to `preset` to continue `turn` (followed by a tool result, `then`)."""
    base_url, model, _ = OTHER_HOSTS.get(preset, (None, MODEL, ""))
    target = allama.provider(preset, api_key=KEY, base_url=base_url)
    request = ChatRequest(model).user("Search the web").with_tools([TOOL]).push(turn)
    if then:
        request = request.tool_result("toolu_1", then[0])
    http, warnings = target._prepare(request, stream=False)
    return http.body, list(warnings)


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_paused_turn_goes_back_whole_to_anthropic_which_issued_it(streamed: bool) -> None:
    recorded = _paused_search()
    body, warnings = _continued("anthropic", _turn_from_anthropic(recorded, streamed=streamed))
    assert body["messages"][-1] == {"role": "assistant", "content": recorded["content"]}
    assert "container" not in body
    assert [w for w in warnings if w.is_about(RequestField.MESSAGES)] == []
    assert [w for w in warnings if w.is_about(RequestField.REASONING)] == []


@pytest.mark.parametrize("preset", sorted(OTHER_HOSTS))
@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_a_paused_anthropic_turn_goes_to_another_host_without_its_server_blocks(
    preset: str, streamed: bool
) -> None:
    recorded = _paused_search()
    body, warnings = _continued(preset, _turn_from_anthropic(recorded, streamed=streamed))
    # Its text alone: neither the thinking Anthropic signed nor its searches' results.
    texts = [block for block in recorded["content"] if block["type"] == "text"]
    assert len(texts) == 5
    assert body["messages"] == [
        {"role": "user", "content": "Search the web"},
        {"role": "assistant", "content": texts},
    ]
    assert "encrypted_content" not in json.dumps(body)
    assert "container" not in body
    display = OTHER_HOSTS[preset][2]
    assert [(w.kind, w.message) for w in warnings if w.is_about(RequestField.MESSAGES)] == [
        (WarningKind.APPROXIMATED, _left_out(display))
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
def test_code_waiting_in_a_container_is_continued_only_on_the_provider_that_ran_it(
    streamed: bool,
) -> None:
    # No thinking to tell whose turn it is: the provider the decoder recorded says.
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": WAITING,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
        "container": CONTAINER,
    }
    turn = _turn_from_anthropic(message, streamed=streamed)
    body, warnings = _continued("anthropic", turn, "2")
    assert body["container"] == "container_1"
    assert body["messages"][1] == {"role": "assistant", "content": WAITING}
    assert [w for w in warnings if w.is_about(RequestField.MESSAGES)] == []
    body, warnings = _continued("azure-anthropic", turn, "2")
    assert "container" not in body
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running it."},
                {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "2"}],
        },
    ]
    assert [(w.kind, w.message) for w in warnings if w.is_about(RequestField.MESSAGES)] == [
        (WarningKind.APPROXIMATED, _left_out("Claude in Microsoft Foundry"))
    ]


def test_a_paused_turn_kept_without_its_issuer_still_goes_back_whole_to_anthropic() -> None:
    # As an older version kept it: the blocks' order alone, the thinking's issuer unnamed.
    recorded = _paused_search()
    turn = _turn_from_anthropic(recorded, streamed=False)
    resume = turn.provider_data["anthropic"]["resume"]
    assert isinstance(resume, dict) and resume["issuer"] == "anthropic"
    content = tuple(
        block.model_copy(update={"issuer": None}) if block.type == "reasoning" else block
        for block in turn.content
    )
    older = AssistantMessage(
        content=content, provider_data={"anthropic": {"resume": resume["blocks"]}}
    )
    body, warnings = _continued("anthropic", older)
    assert body["messages"][-1] == {"role": "assistant", "content": recorded["content"]}
    assert [w for w in warnings if w.is_about(RequestField.MESSAGES)] == []


def test_a_finished_turn_that_ran_code_goes_to_another_host_without_its_server_blocks() -> None:
    thought = {"type": "thinking", "thinking": "Run it.", "signature": "sig_1"}
    ran = [thought, RUN, {"type": "text", "text": "Done."}]
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": ran,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
        "container": CONTAINER,
    }
    turn = _turn_from_anthropic(message, streamed=False)
    # It goes back whole to Anthropic (the model goes on from what it ran), its container
    # kept beside its blocks.
    assert turn.provider_data == {
        "anthropic": {
            "resume": {
                "issuer": "anthropic",
                "paused": False,
                "container": CONTAINER,
                "blocks": [0, RUN, 1],
            }
        }
    }
    base_url, _, _ = OTHER_HOSTS["azure-anthropic"]
    target = allama.provider("azure-anthropic", api_key=KEY, base_url=base_url)
    request = ChatRequest(MODEL).user("Write a file.").push(turn).user("Read it.")
    http, warnings = target._prepare(request, stream=False)
    assert "container" not in http.body
    assert http.body["messages"][1] == {"role": "assistant", "content": "Done."}
    # Another host gets it without them, and is told so in words that fit a finished turn.
    assert [(w.kind, w.message) for w in warnings if w.is_about(RequestField.MESSAGES)] == [
        (WarningKind.APPROXIMATED, _left_out("Claude in Microsoft Foundry"))
    ]


# An output limit above the family's


def _limit_warning(model: str, limit: int, asked: int) -> tuple[WarningKind, Any, str]:
    return (
        WarningKind.UNSUPPORTED,
        RequestField.MAX_OUTPUT_TOKENS,
        f"`{model}` on Anthropic writes at most {limit} output tokens; {limit} was sent in "
        f"place of {asked}",
    )


@pytest.mark.parametrize(
    ("model", "limit", "asked"),
    [
        ("claude-sonnet-4-5", 64_000, 100_000),
        ("claude-3-5-haiku-20241022", 8_192, 8_193),
        ("claude-opus-4-1", 32_000, 32_001),
    ],
)
def test_an_output_limit_above_the_familys_is_lowered_to_it(
    model: str, limit: int, asked: int
) -> None:
    """Anthropic answers 400 ("max_tokens: N > M, which is the maximum allowed number of
    output tokens"): the family's own limit is sent, and the span shows it."""
    request = ChatRequest(model).user("hi").with_max_output_tokens(asked)
    http, warnings = allama.provider("anthropic", api_key=KEY)._prepare(request, stream=False)
    assert http.body["max_tokens"] == limit
    assert _said(warnings) == [_limit_warning(model, limit, asked)]
    assert http.as_sent == {"max_output_tokens": limit}


def test_an_output_limit_within_the_familys_or_of_an_unknown_model_goes_as_asked() -> None:
    for model, asked in (("claude-sonnet-4-5", 64_000), ("claude-next-9", 500_000)):
        request = ChatRequest(model).user("hi").with_max_output_tokens(asked)
        http, warnings = allama.provider("anthropic", api_key=KEY)._prepare(request, stream=False)
        assert http.body["max_tokens"] == asked
        assert warnings == []
        assert http.as_sent == {}


def test_an_output_limit_over_the_familys_is_refused_unsent_under_error() -> None:
    target, server = provider("anthropic", (200, {}))
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("hi")
        .with_max_output_tokens(100_000)
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert str(raised.value) == (
        "cannot send `max_output_tokens`: `claude-sonnet-4-5` on Anthropic writes at most "
        "64000 output tokens"
    )
    assert server.bodies == []


def test_a_beta_that_raises_the_output_limit_leaves_it_as_asked() -> None:
    """`output-128k-2025-02-19` lets Claude 3.7 Sonnet write 128k tokens: the caller's beta
    header says the table's limit does not hold."""
    model = "claude-3-7-sonnet-20250219"
    request = ChatRequest(model).user("hi").with_max_output_tokens(128_000)
    beta = {"anthropic-beta": "interleaved-thinking-2025-05-14, output-128k-2025-02-19"}
    target = allama.provider("anthropic", api_key=KEY, headers=beta)
    http, warnings = target._prepare(request, stream=False)
    assert (http.body["max_tokens"], warnings) == (128_000, [])
    other = {"anthropic-beta": "interleaved-thinking-2025-05-14"}
    target = allama.provider("anthropic", api_key=KEY, headers=other)
    http, warnings = target._prepare(request, stream=False)
    assert http.body["max_tokens"] == 64_000
    assert _said(warnings) == [_limit_warning(model, 64_000, 128_000)]


def test_the_body_options_own_output_limit_is_sent_as_given() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("hi")
        .with_max_output_tokens(100_000)
        .with_option_json("anthropic", {"max_tokens": 90_000})
    )
    body, warnings = _anthropic(request)
    assert body["max_tokens"] == 90_000
    assert all(w.subject.field is not RequestField.MAX_OUTPUT_TOKENS for w in warnings)


def test_a_provider_batch_sends_the_familys_output_limit(tmp_path: Path) -> None:
    from _provider_batch_server import ProviderBatchServer

    class Doc(BaseModel):
        n: int

    server = ProviderBatchServer().start()
    try:
        target = allama.provider("anthropic", base_url=server.anthropic_base, api_key=KEY)
        request = ChatRequest("claude-sonnet-4-5").system("Read.").with_max_output_tokens(100_000)
        run = allama.batch(
            target,
            Doc,
            ["doc 0", "doc 1"],
            request=request,
            ledger=tmp_path / "ledger.sqlite",
            provider_batch=True,
            poll_interval=0.001,
            backoff=0.001,
        )
        results = list(run)
        [job] = server.jobs_of("anthropic")
        assert [body["max_tokens"] for body in job.bodies] == [64_000, 64_000]
        assert [type(result.value) for result in results] == [Doc, Doc]
    finally:
        server.stop()


# Tools of one name


def test_tools_of_one_name_are_refused_unsent() -> None:
    """Anthropic answers 400 ("tools: Tool names must be unique.")."""
    target, server = provider("anthropic", (200, {}))
    tools = [
        TOOL,
        ToolDefinition(name="put", parameters={"type": "object"}),
        TOOL,
        ToolDefinition(name="put", parameters={"type": "object"}),
        TOOL,
    ]
    request = ChatRequest(MODEL).user("hi").with_tools(tools)
    with pytest.raises(InvalidRequestError) as raised:
        target.chat(request)
    assert str(raised.value) == (
        "Anthropic takes each tool name once, and the request's tools repeat names (positions "
        "count from 0): `get` names the tools at positions 0, 2 and 4; `put` names the tools "
        "at positions 1 and 3"
    )
    assert server.bodies == []


def test_the_span_shows_the_output_limit_sent() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    target, server = provider("anthropic", (200, EXTRACTED), tracer_provider=tracing)
    target.chat(ChatRequest(MODEL).user("hi").with_max_output_tokens(100_000))
    assert server.bodies[0]["max_tokens"] == 64_000
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["gen_ai.request.max_tokens"] == 64_000


# The body option's max_tokens, thinking and tool_choice under the rules of the request's own


def _budget_warning(asked: int, limit: int, fitted: int) -> tuple[WarningKind, Any, str]:
    return (
        WarningKind.UNSUPPORTED,
        RequestField.OPTIONS,
        f"`thinking.budget_tokens` of the body option `anthropic` ({asked}) is not below "
        f"`max_tokens` ({limit}), and Anthropic takes a thinking budget only below it; "
        f"{fitted} was sent in place of {asked}",
    )


def test_the_options_max_tokens_fits_the_budget_reasoning_effort_gives() -> None:
    """Anthropic answers 400 to a budget not below `max_tokens`: the option's own limit is
    the one sent, so the budget fits below it, as below the request's."""
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_reasoning_effort(ReasoningEffort.HIGH)
        .with_option_json("anthropic", {"max_tokens": 2000})
    )
    body, warnings = _anthropic(request)
    assert body["max_tokens"] == 2000
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1999}
    assert _said(warnings) == [
        (
            WarningKind.APPROXIMATED,
            RequestField.REASONING_EFFORT,
            "the thinking budget for `high` was lowered to 1999 tokens, below `max_tokens` (2000)",
        )
    ]
    body, warnings = _anthropic(request.with_option_json("anthropic", {"max_tokens": 1000}))
    assert (body["max_tokens"], "thinking" in body) == (1000, False)
    assert _said(warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.REASONING_EFFORT,
            "Anthropic needs a thinking budget of at least 1024 tokens below `max_tokens` "
            "(1000); thinking was left off",
        )
    ]


@pytest.mark.parametrize(
    ("model", "asked", "budget", "sent", "before"),
    [
        # The request's limit lowered to the family's: the budget goes below that.
        (
            "claude-opus-4-1-20250805",
            60_000,
            40_000,
            32_000,
            [_limit_warning("claude-opus-4-1-20250805", 32_000, 60_000)],
        ),
        ("claude-sonnet-4-5", 4000, 8000, 4000, []),
        # The limit allama fills in stops at the family's.
        ("claude-sonnet-4-5", None, 70_000, 64_000, []),
    ],
)
def test_the_options_thinking_budget_goes_below_the_max_tokens_sent(
    model: str, asked: int | None, budget: int, sent: int, before: list[Any]
) -> None:
    request = ChatRequest(model).user("hi")
    if asked is not None:
        request = request.with_max_output_tokens(asked)
    thinking = {"type": "enabled", "budget_tokens": budget, "display": "omitted"}
    request = request.with_option_json("anthropic", {"thinking": thinking})
    body, warnings = _anthropic(request)
    assert body["max_tokens"] == sent
    assert body["thinking"] == {**thinking, "budget_tokens": sent - 1}
    assert _said(warnings) == [*before, _budget_warning(budget, sent, sent - 1)]


def test_under_error_the_options_thinking_budget_over_max_tokens_is_refused_unsent() -> None:
    target, server = provider("anthropic", (200, EXTRACTED))
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_max_output_tokens(4000)
        .with_option_json("anthropic", {"thinking": {"type": "enabled", "budget_tokens": 8000}})
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert str(raised.value) == (
        "cannot send `options`: `thinking.budget_tokens` of the body option `anthropic` (8000) "
        "is not below `max_tokens` (4000), and Anthropic takes a thinking budget only below it"
    )
    assert server.bodies == []


def test_the_options_thinking_is_not_sent_where_no_budget_fits_below_max_tokens() -> None:
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_max_output_tokens(1000)
        .with_option_json("anthropic", {"thinking": {"type": "enabled", "budget_tokens": 2000}})
    )
    body, warnings = _anthropic(request)
    assert (body["max_tokens"], "thinking" in body) == (1000, False)
    assert _said(warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.OPTIONS,
            "`thinking.budget_tokens` of the body option `anthropic` (2000) is not below "
            "`max_tokens` (1000), and Anthropic needs a thinking budget of at least 1024 "
            "tokens below it; `thinking` was not sent",
        )
    ]


def test_a_budget_over_max_tokens_goes_as_given_under_interleaved_thinking_or_its_own_limit() -> (
    None
):
    """Interleaved thinking counts the budget over the whole turn, so it may exceed
    `max_tokens`; the option's own limit beside its own budget is the caller's pair."""
    thinking = {"type": "enabled", "budget_tokens": 8000}
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_max_output_tokens(4000)
        .with_option_json("anthropic", {"thinking": thinking})
    )
    beta = {"anthropic-beta": "output-128k-2025-02-19, interleaved-thinking-2025-05-14"}
    target = allama.provider("anthropic", api_key=KEY, headers=beta)
    http, warnings = target._prepare(request, stream=False)
    assert (http.body["max_tokens"], http.body["thinking"], warnings) == (4000, thinking, [])
    own = (
        ChatRequest(MODEL)
        .user("hi")
        .with_option_json("anthropic", {"thinking": thinking, "max_tokens": 4000})
    )
    for policy in (UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR):
        body, warnings = _anthropic(own.with_unsupported_policy(policy))
        assert (body["max_tokens"], body["thinking"]) == (4000, thinking)
        assert _said(warnings) == [
            (
                WarningKind.UNSUPPORTED,
                RequestField.OPTIONS,
                "`thinking.budget_tokens` of the body option `anthropic` (8000) is not below "
                "the option's own `max_tokens` (4000), and Anthropic takes a thinking budget "
                "only below it; both were sent as given",
            )
        ]


def _span_of(request: ChatRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    answer = {
        **EXTRACTED,
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
    }
    target, server = provider("anthropic", (200, answer), tracer_provider=tracing)
    target.chat(request)
    (span,) = exporter.get_finished_spans()
    return server.bodies[0], dict(span.attributes or {})


def test_the_options_thinking_in_place_of_the_reasoning_effort_is_said_and_not_on_the_span() -> (
    None
):
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_reasoning_effort(ReasoningEffort.HIGH)
        .with_option_json("anthropic", {"thinking": {"type": "disabled"}, "temperature": 0.2})
    )
    body, warnings = _anthropic(request)
    assert (body["thinking"], body["temperature"]) == ({"type": "disabled"}, 0.2)
    assert _said(warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.REASONING_EFFORT,
            '`thinking` of the body option `anthropic` ({"type":"disabled"}) was sent in place '
            "of the request's reasoning effort (`high`)",
        )
    ]
    sent, attributes = _span_of(request)
    assert sent["thinking"] == {"type": "disabled"}
    assert "gen_ai.request.reasoning.level" not in attributes
    assert attributes["gen_ai.request.temperature"] == 0.2
    # The thinking the effort asks, through the option: nothing replaced, nothing said.
    same = ChatRequest(MODEL).user("hi").with_reasoning_effort(ReasoningEffort.LOW)
    same = same.with_option_json("anthropic", {"thinking": THINK})
    assert _anthropic(same)[1] == []
    assert _span_of(same)[1]["gen_ai.request.reasoning.level"] == "low"
    # Thinking off either way is the same.
    off = ChatRequest(MODEL).user("hi").with_reasoning_effort(ReasoningEffort.NONE)
    assert (
        _anthropic(off.with_option_json("anthropic", {"thinking": {"type": "disabled"}}))[1] == []
    )


def test_the_options_effort_in_place_of_the_reasoning_effort_is_said() -> None:
    request = (
        ChatRequest("claude-sonnet-4-6")
        .user("hi")
        .with_reasoning_effort(ReasoningEffort.HIGH)
        .with_option_json("anthropic", {"output_config": {"effort": "low"}})
    )
    body, warnings = _anthropic(request)
    assert (body["thinking"], body["output_config"]) == ({"type": "adaptive"}, {"effort": "low"})
    assert _said(warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.REASONING_EFFORT,
            '`output_config.effort` of the body option `anthropic` ("low") was sent in place '
            "of the request's reasoning effort (`high`)",
        )
    ]


FORCE_ANY = {"tool_choice": {"type": "any"}}
ANY_UNFORCED = (
    '`tool_choice` of the body option `anthropic` ({"type":"any"}) forces a tool call, and '
    "`claude-opus-5-5` on Anthropic cannot be forced to call a tool"
)


def test_the_options_forced_choice_is_not_sent_to_a_family_that_cannot_be_forced() -> None:
    request = ChatRequest("claude-opus-5-5").user("hi").with_tools([TOOL])
    body, warnings = _anthropic(request.with_option_json("anthropic", FORCE_ANY))
    assert "tool_choice" not in body
    assert _said(warnings) == [
        (WarningKind.UNSUPPORTED, RequestField.OPTIONS, f"{ANY_UNFORCED}; it was not sent")
    ]
    # Beside the request's own forced choice, each is said; the request's goes as `auto`.
    both = request.with_tool_choice(ToolChoice.required()).with_option_json("anthropic", FORCE_ANY)
    body, warnings = _anthropic(both)
    assert body["tool_choice"] == {"type": "auto"}
    assert _said(warnings) == [
        (WarningKind.UNSUPPORTED, RequestField.OPTIONS, f"{ANY_UNFORCED}; it was not sent"),
        (
            WarningKind.UNSUPPORTED,
            RequestField.TOOL_CHOICE,
            "`claude-opus-5-5` on Anthropic cannot be forced to call a tool; `auto` was sent "
            "instead",
        ),
    ]
    target, server = provider("anthropic", (200, EXTRACTED))
    with pytest.raises(UnsupportedError) as raised:
        target.chat(
            request.with_option_json("anthropic", FORCE_ANY).with_unsupported_policy(
                UnsupportedPolicy.ERROR
            )
        )
    assert str(raised.value) == f"cannot send `options`: {ANY_UNFORCED}"
    assert server.bodies == []


def test_the_options_forced_choice_without_tools_forces_nothing() -> None:
    """No tool is forced without tools: the effort's thinking is sent, not left off for a
    forced tool there is none of."""
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_reasoning_effort(ReasoningEffort.LOW)
        .with_option_json("anthropic", FORCE_ANY)
    )
    body, warnings = _anthropic(request)
    assert "tool_choice" not in body
    assert body["thinking"] == THINK
    assert _said(warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.OPTIONS,
            '`tool_choice` of the body option `anthropic` ({"type":"any"}) forces a tool '
            "call, and the request gives no tools to call; it was not sent",
        )
    ]
    # The option's own tools are tools: the choice goes, and thinking is left off.
    server_tool = {"type": "web_search_20250305", "name": "web_search"}
    body, _ = _anthropic(
        request.with_option_json("anthropic", {**FORCE_ANY, "tools": [server_tool]})
    )
    assert (body["tool_choice"], "thinking" in body) == ({"type": "any"}, False)


# A limit on every strict schema together, put on the field the request carried them in

TOO_COMPLEX = "Schema is too complex for compilation."
GRAMMAR_TOO_LARGE = (
    "The compiled grammar is too large, which would cause performance issues. Simplify your "
    "tool schemas or reduce the number of strict tools."
)
SMALL = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "required": ["a"],
    "additionalProperties": False,
}
STRICT_TOOL = ToolDefinition(name="lookup", parameters=SMALL, strict=True)
LOOSE_TOOL = ToolDefinition(name="lookup", parameters=SMALL)
FORMAT = ResponseFormat.for_schema(SMALL, name="answer")


def _refused(words: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": words}}


@pytest.mark.parametrize("words", [TOO_COMPLEX, GRAMMAR_TOO_LARGE])
@pytest.mark.parametrize(
    ("fmt", "tools", "field"),
    [
        # Whatever the words say of tools, only the response format was sent.
        (FORMAT, (), RequestField.RESPONSE_FORMAT),
        # A tool without `strict` is no part of the grammar.
        (FORMAT, (LOOSE_TOOL,), RequestField.RESPONSE_FORMAT),
        (None, (STRICT_TOOL,), RequestField.TOOLS),
        # Both compiled together: neither alone is the one refused.
        (FORMAT, (STRICT_TOOL,), None),
    ],
    ids=["format", "format-loose-tool", "strict-tool", "both"],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["chat", "stream"])
def test_a_schema_too_complex_is_put_on_the_field_that_was_sent(
    words: str,
    fmt: ResponseFormat | None,
    tools: tuple[ToolDefinition, ...],
    field: RequestField | None,
    streamed: bool,
) -> None:
    target, server = provider("anthropic", (400, _refused(words)))
    request = ChatRequest(MODEL).user("x").model_copy(update={"response_format": fmt})
    request = request.with_tools(list(tools)) if tools else request
    with pytest.raises(UnsupportedError) as raised:
        if streamed:
            with target.chat_stream(request) as stream:
                stream.response()
        else:
            target.chat(request)
    assert raised.value.field is field
    assert str(raised.value) == words
    assert ("output_config" in server.bodies[0], len(server.bodies)) == (fmt is not None, 1)


def test_a_schema_too_complex_naming_its_path_keeps_that_field() -> None:
    words = "tools.0.custom.input_schema: Schema is too complex for compilation"
    target, _ = provider("anthropic", (400, _refused(words)))
    request = ChatRequest(MODEL).user("x").with_response_format(FORMAT).with_tools([STRICT_TOOL])
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert raised.value.field is RequestField.TOOLS


@pytest.mark.parametrize("words", [TOO_COMPLEX, GRAMMAR_TOO_LARGE])
def test_a_guessed_native_extraction_falls_back_after_a_grammar_too_large(words: str) -> None:
    """For a model no row knows (a gateway's own name for it) native output is a guess: a
    400 on the grammar of the response format alone (whatever its advice on tools) is asked
    again with a forced tool."""
    target, server = provider(
        "anthropic",
        (400, _refused(words)),
        (200, {**EXTRACTED, "model": "some-model"}),
        base_url="http://127.0.0.1:9/",
    )
    extracted = allama.extract(target, Answer, ChatRequest("some-model").user("x"))
    assert extracted.value == Answer(a=1)
    metadata = extracted.metadata
    assert metadata.mode is ExtractionMode.FORCED_TOOL and metadata.auto_fallback is not None
    assert metadata.auto_fallback.field is RequestField.RESPONSE_FORMAT
    native, forced = server.bodies
    assert "output_config" in native and "tools" not in native
    assert "output_config" not in forced and forced["tool_choice"] == SUBMIT


# Strict tools beside a response format, over the per-request limits together


def _optional(count: int, prefix: str) -> dict[str, Any]:
    properties = {f"{prefix}{i}": {"type": "integer"} for i in range(count)}
    return {"type": "object", "properties": properties, "additionalProperties": False}


OVER_24_OPTIONAL = (
    "the strict schemas of the request have 25 optional properties, more than the 24 "
    "Anthropic allows per request"
)


def test_strict_tools_give_up_strict_for_the_response_format_past_the_limits() -> None:
    """12 optional properties in the response format and 13 in a strict tool (25, past the
    24 Anthropic takes per request): the tool goes without `strict`, as tools alone past
    the limits do, and the response format stays enforced."""
    tool = ToolDefinition(name="t", parameters=_optional(13, "p"), strict=True)
    fmt = ResponseFormat.for_schema(_optional(12, "o"), name="r")
    request = ChatRequest(MODEL).user("x").with_response_format(fmt).with_tools([tool])
    body, warnings = _anthropic(request)
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert body["tools"] == [{"name": "t", "input_schema": tool.parameters}]
    assert _said(warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.TOOLS,
            f"{OVER_24_OPTIONAL}; the tools were sent without `strict`",
        )
    ]
    with pytest.raises(UnsupportedError) as raised:
        _anthropic(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert (raised.value.field, str(raised.value)) == (
        RequestField.TOOLS,
        f"cannot send `tools`: {OVER_24_OPTIONAL}",
    )
    # A response format over the limits by itself is refused: no tool makes room for it.
    alone = ResponseFormat.for_schema(_optional(25, "o"), name="r")
    with pytest.raises(UnsupportedError) as raised:
        _anthropic(request.with_response_format(alone))
    assert (raised.value.field, str(raised.value)) == (
        RequestField.RESPONSE_FORMAT,
        "cannot send `response_format`: Anthropic cannot enforce the response format `r` in "
        "`output_config.format`: the schema at `/` has 25 optional properties, more than the "
        "24 Anthropic strict mode allows per request",
    )


# Claude Haiku 5.5: thinking on by default, turned off up to effort `high`

FORCED_GET = ToolChoice.tool("get")


@pytest.mark.parametrize("model", ["claude-haiku-5-5", "claude-opus-5"])
def test_thinking_is_turned_off_and_a_tool_forced_with_it_off(model: str) -> None:
    """Haiku 5.5 thinks by default, and takes `{"type": "disabled"}` as Opus 5 does: its
    "What's new" and migration guide list no refused `disabled` and no refused forced
    `tool_choice` (Opus 5.5's do)."""
    for policy in (UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR):
        request = ChatRequest(model, reasoning_effort="none", unsupported_policy=policy)
        body, warnings = _anthropic(request.user("spam?"))
        assert (body["thinking"], "output_config" in body, warnings) == (
            {"type": "disabled"},
            False,
            [],
        )
        forced = request.user("x").with_tools([TOOL]).with_tool_choice(FORCED_GET)
        body, warnings = _anthropic(forced.with_reasoning_effort(None))
        assert (body["tool_choice"], body["thinking"], warnings) == (
            {**NAMED, "disable_parallel_tool_use": True},
            {"type": "disabled"},
            [],
        )
    target = allama.provider("anthropic", api_key=KEY)
    assert target.chat_capability(model, allama.ChatCapability.FORCED_TOOL_CHOICE) is (
        allama.CapabilitySupport.SUPPORTED
    )


def _off_at(model: str, level: str) -> str:
    return (
        f'`output_config.effort` of the body option `anthropic` ("{level}") goes beside '
        f"thinking turned off (`disabled`), and `{model}` on Anthropic turns thinking off "
        "only at effort `low`, `medium` or `high`"
    )


@pytest.mark.parametrize("model", ["claude-haiku-5-5", "claude-opus-5"])
@pytest.mark.parametrize("level", ["xhigh", "max"])
def test_the_options_effort_past_high_is_not_sent_beside_thinking_turned_off(
    model: str, level: str
) -> None:
    """`disabled` at `xhigh` or `max` is answered 400 on Haiku 5.5 and Opus 5: beside
    allama's `disabled` (`none`, or a forced tool) the option's effort is left out, with a
    warning on `options`, refused under `ERROR`; the option's other `output_config` keys go."""
    option = {"output_config": {"effort": level, "task_budget": 5}}
    none = (
        ChatRequest(model, reasoning_effort="none").user("x").with_option_json("anthropic", option)
    )
    forced = (
        ChatRequest(model)
        .user("x")
        .with_tools([TOOL])
        .with_tool_choice(FORCED_GET)
        .with_option_json("anthropic", option)
    )
    for request in (none, forced):
        body, warnings = _anthropic(request)
        assert (body["thinking"], body["output_config"]) == (
            {"type": "disabled"},
            {"task_budget": 5},
        )
        assert _said(warnings) == [
            (
                WarningKind.UNSUPPORTED,
                RequestField.OPTIONS,
                f"{_off_at(model, level)}; it was not sent",
            )
        ]
        with pytest.raises(UnsupportedError) as raised:
            _anthropic(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
        assert (raised.value.field, str(raised.value)) == (
            RequestField.OPTIONS,
            f"cannot send `options`: {_off_at(model, level)}",
        )


def test_an_effort_up_to_high_goes_beside_thinking_turned_off() -> None:
    request = (
        ChatRequest("claude-haiku-5-5", reasoning_effort="none")
        .user("x")
        .with_option_json("anthropic", {"output_config": {"effort": "high"}})
    )
    body, warnings = _anthropic(request)
    assert (body["thinking"], body["output_config"], warnings) == (
        {"type": "disabled"},
        {"effort": "high"},
        [],
    )


def test_the_options_own_disabled_thinking_and_effort_past_high_go_as_given() -> None:
    both = {"thinking": {"type": "disabled"}, "output_config": {"effort": "max"}}
    body, warnings = _anthropic(
        ChatRequest("claude-haiku-5-5").user("x").with_option_json("anthropic", both)
    )
    assert (body["thinking"], body["output_config"]) == ({"type": "disabled"}, {"effort": "max"})
    assert _said(warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.OPTIONS,
            '`output_config.effort` of the body option `anthropic` ("max") goes beside the '
            "option's own `thinking` (`disabled`), and `claude-haiku-5-5` on Anthropic turns "
            "thinking off only at effort `low`, `medium` or `high`; both were sent as given",
        )
    ]


# Claude Sonnet 5.5: thinking turned off by `between_tools`, up to effort `high`

SONNET_5_5 = "claude-sonnet-5-5"
NOTES = (
    WarningKind.APPROXIMATED,
    RequestField.REASONING_EFFORT,
    "`claude-sonnet-5-5` on Anthropic turns off only the thinking before it answers "
    "(`between_tools`): between tool calls it still writes short notes as thinking",
)


def test_sonnet_5_5_turns_thinking_off_with_between_tools_not_disabled() -> None:
    """`disabled` answers 400 on Sonnet 5.5; `between_tools`, its lowest setting, answers in
    text alone where no tools are used ("What's new in Claude Sonnet 5.5")."""
    for policy in (UnsupportedPolicy.WARN, UnsupportedPolicy.ERROR):
        request = ChatRequest(SONNET_5_5, reasoning_effort="none", unsupported_policy=policy)
        body, warnings = _anthropic(request.user("spam?"))
        assert (body["thinking"], "output_config" in body, warnings) == (
            {"type": "between_tools"},
            False,
            [],
        )
        # With tools, its notes between calls come back as thinking: said, never refused.
        body, warnings = _anthropic(request.user("x").with_tools([TOOL]))
        assert (body["thinking"], _said(warnings)) == ({"type": "between_tools"}, [NOTES])
    # Left unasked, it thinks (adaptive by default), and nothing is sent.
    body, warnings = _anthropic(ChatRequest(SONNET_5_5).user("x").with_tools([TOOL]))
    assert ("thinking" in body, warnings) == (False, [])


def test_sonnet_5_5_still_takes_no_forced_tool() -> None:
    """ "Forced tool use returns an error" whatever the thinking: offered as `auto`."""
    request = ChatRequest(SONNET_5_5).user("x").with_tools([TOOL]).with_tool_choice(FORCED_GET)
    body, warnings = _anthropic(request)
    assert (body["tool_choice"], "thinking" in body) == ({"type": "auto"}, False)
    assert _said(warnings) == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.TOOL_CHOICE,
            "`claude-sonnet-5-5` on Anthropic cannot be forced to call a tool; `auto` was sent "
            "instead",
        )
    ]
    target = allama.provider("anthropic", api_key=KEY)
    assert target.chat_capability(SONNET_5_5, allama.ChatCapability.FORCED_TOOL_CHOICE) is (
        allama.CapabilitySupport.UNSUPPORTED
    )


@pytest.mark.parametrize("level", ["xhigh", "max"])
def test_sonnet_5_5s_option_effort_past_high_is_not_sent_beside_between_tools(level: str) -> None:
    """`between_tools` at `xhigh` or `max` returns 400."""
    option = {"output_config": {"effort": level, "task_budget": 5}}
    request = (
        ChatRequest(SONNET_5_5, reasoning_effort="none")
        .user("x")
        .with_option_json("anthropic", option)
    )
    rule = (
        f'`output_config.effort` of the body option `anthropic` ("{level}") goes beside '
        "thinking turned off (`between_tools`), and `claude-sonnet-5-5` on Anthropic turns "
        "thinking off only at effort `low`, `medium` or `high`"
    )
    body, warnings = _anthropic(request)
    assert (body["thinking"], body["output_config"]) == (
        {"type": "between_tools"},
        {"task_budget": 5},
    )
    assert _said(warnings) == [
        (WarningKind.UNSUPPORTED, RequestField.OPTIONS, f"{rule}; it was not sent")
    ]
    with pytest.raises(UnsupportedError) as raised:
        _anthropic(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert str(raised.value) == f"cannot send `options`: {rule}"
    high = request.with_option_json("anthropic", {"output_config": {"effort": "high"}})
    body, warnings = _anthropic(high)
    assert (body["thinking"], body["output_config"], warnings) == (
        {"type": "between_tools"},
        {"effort": "high"},
        [],
    )


# Images checked as documents are


def test_an_image_data_url_goes_without_whitespace_and_as_valid_base64() -> None:
    wrapped = f"data:image/png;base64,{PNG_B64[:5]}\n {PNG_B64[5:]}"
    body, warnings = _anthropic(ChatRequest(MODEL).user("x", ImagePart(url=wrapped)))
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
    }
    assert warnings == []
    # Its padding left out, as browsers read a data URL: sent with it.
    unpadded = f"data:image/png;base64,{PNG_B64.rstrip('=')}"
    body, _ = _anthropic(ChatRequest(MODEL).user("x", ImagePart(url=unpadded)))
    assert body["messages"][0]["content"][1]["source"]["data"] == PNG_B64
    with pytest.raises(InvalidRequestError) as raised:
        _anthropic(ChatRequest(MODEL).user("x", ImagePart(url="data:image/png;base64,no!!")))
    assert str(raised.value) == "the image's data URL holds no valid base64"


@pytest.mark.parametrize(
    "image",
    [ImagePart(url="data:image/png;base64,")],
)
def test_an_image_of_no_data_is_refused_before_sending(image: ImagePart) -> None:
    target, recorder = provider("anthropic", (200, {}))
    with pytest.raises(InvalidRequestError) as raised:
        target.chat(ChatRequest(MODEL).user("x", image))
    assert str(raised.value) == "the image holds no data, which Anthropic refuses"
    assert recorder.bodies == []


# A tool call the next user turn does not answer


def test_a_tool_call_left_unanswered_before_the_next_user_turn_is_refused() -> None:
    request = (
        ChatRequest(MODEL)
        .with_tools([TOOL])
        .user("x")
        .assistant([ToolCall(id="toolu_1", name="get", arguments='{"q":"a"}')])
        .user("never mind")
    )
    target, recorder = provider("anthropic", (200, {}))
    with pytest.raises(InvalidRequestError) as raised:
        target.chat(request)
    assert str(raised.value) == (
        "the tool call `toolu_1` of the assistant turn at `messages[1]` got no tool result "
        "before the next user turn (`messages[2]`), and Anthropic needs each call's result "
        "right after it"
    )
    assert recorder.bodies == []


def test_unanswered_calls_are_named_by_the_callers_ids() -> None:
    """Ids Anthropic refuses go renamed (`functions.get:0` as `functions_get_0`); the error
    names them as the caller gave them, and counts system messages in the index."""
    calls = [
        ToolCall(id="functions.get:0", name="get", arguments='{"q":"a"}'),
        ToolCall(id="functions.get:1", name="get", arguments='{"q":"b"}'),
        ToolCall(id="toolu_3", name="get", arguments='{"q":"c"}'),
    ]
    request = (
        ChatRequest(MODEL)
        .with_tools([TOOL])
        .system("s")
        .user("x")
        .assistant(calls)
        .tool_result("functions.get:1", "b")
        .user("and?")
    )
    with pytest.raises(InvalidRequestError) as raised:
        _anthropic(request)
    assert str(raised.value) == (
        "the tool calls `functions.get:0`, `toolu_3` of the assistant turn at `messages[2]` "
        "got no tool result before the next user turn (`messages[4]`), and Anthropic needs "
        "each call's result right after it"
    )
    answered = request.tool_result("functions.get:0", "a").tool_result("toolu_3", "c")
    body, _ = _anthropic(answered)
    assert [block["tool_use_id"] for block in body["messages"][2]["content"][:3]] == [
        "functions_get_1",
        "functions_get_0",
        "toolu_3",
    ]
