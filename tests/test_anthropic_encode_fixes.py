"""What the Anthropic (and Gemini) encoders send, and say, for reported cases.

A named tool forced on Anthropic is asked for exactly one call (`disable_parallel_tool_use`)
unless the caller allows parallel calls: left unset, a forced extraction could be answered
with two calls and paid for nothing. A refusal under `UnsupportedPolicy.ERROR` says why the
field cannot be sent, never what was done instead (nothing was sent); the warning under
`WARN` keeps both. A data URL's scheme and `base64` token are case-insensitive, and so is
a part's own media type, read without its parameters (a text/plain charset decoded).
Anthropic's thinking rules hold for thinking, a forced `tool_choice` and sampling fields
given through the `anthropic` body option too.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import ChatRequest, ExtractionMode
from allama.errors import InvalidRequestError, UnsupportedError
from allama.types import (
    DocumentPart,
    ImagePart,
    ReasoningEffort,
    RequestField,
    ResponseFormat,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
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


def test_a_document_data_url_that_is_not_base64_is_refused() -> None:
    request = ChatRequest(MODEL).user("x", DocumentPart(url="data:text/plain,hello"))
    with pytest.raises(InvalidRequestError, match="a document data URL must be base64-encoded"):
        _anthropic(request)


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
