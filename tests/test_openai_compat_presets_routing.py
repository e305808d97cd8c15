"""Fixes to the Chat Completions presets, each through `allama.provider(...)`: OpenRouter's
`require_parameters` sent for any response format and for tools (not a strict schema
alone), on its Chat Completions and Responses APIs alike, Workers AI's "JSON Mode couldn't
be met" read as an output the provider refused, vLLM's grammar backend refusing a schema
read as an `UnsupportedError` on the field that carried it, and xAI's schemas sent without
the boolean subschemas and `items` arrays it answers 400 to."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import ChatRequest, ExtractionMode, Extractor, ResponseFormat, ToolDefinition
from allama.errors import RejectedOutputError, ServerError, UnsupportedError
from allama.types import FieldSubject, RequestField, ToolChoice, UnsupportedStage, WarningKind

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
LLAMA = "meta-llama/llama-3.3-70b-instruct"
TOOL = ToolDefinition(name="f", parameters=SCHEMA)


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "c-1",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


ANSWER = completion({"content": '{"a":"x"}'})
CALL = completion(
    {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
)


# OpenRouter: `require_parameters` wherever the answer hangs on what an upstream may drop


def _openrouter_body(request: ChatRequest) -> tuple[dict[str, Any], list[Any]]:
    target, recorder = provider("openrouter", (200, ANSWER))
    response = target.chat(request)
    options = FieldSubject(field=RequestField.OPTIONS)
    said = [(w.kind, w.message) for w in response.warnings if w.subject == options]
    return recorder.bodies[0], said


def test_openrouter_requires_parameters_for_any_response_format() -> None:
    asked = ChatRequest(LLAMA).user("Answer in JSON.")
    for fmt in (
        ResponseFormat.for_schema(SCHEMA, name="p", strict=False),
        ResponseFormat(type="json"),
    ):
        body, said = _openrouter_body(asked.with_response_format(fmt))
        assert (body["provider"], said) == ({"require_parameters": True}, [])
    # Plain text hangs on nothing an upstream may drop.
    body, _ = _openrouter_body(asked.with_response_format(ResponseFormat(type="text")))
    assert "provider" not in body


def test_openrouter_requires_parameters_for_tools() -> None:
    asked = ChatRequest(LLAMA).user("Call f.").with_tools([TOOL])
    for choice in (ToolChoice.required(), ToolChoice.tool("f"), ToolChoice.auto(), None):
        request = asked if choice is None else asked.with_tool_choice(choice)
        body, said = _openrouter_body(request)
        assert (body["provider"], said) == ({"require_parameters": True}, [])
    # Under `none` no tool is called: the answer does not hang on them.
    body, _ = _openrouter_body(asked.with_tool_choice(ToolChoice.none()))
    assert "provider" not in body


def test_openrouter_says_what_needs_require_parameters_over_the_callers_false() -> None:
    routing = {"order": ["groq"], "require_parameters": False}
    asked = (
        ChatRequest(LLAMA)
        .user("Answer in JSON.")
        .with_option_json("openai_compat", {"provider": routing})
    )
    sent = {"order": ["groq"], "require_parameters": True}
    head = "`require_parameters` of `provider` of the body option `openai_compat` (false) was "
    tail = "`require_parameters: true` was sent"
    body, said = _openrouter_body(asked.with_response_format(ResponseFormat(type="json")))
    assert body["provider"] == sent
    assert said == [
        (
            WarningKind.UNSUPPORTED,
            f"{head}not sent: the request's JSON mode needs `require_parameters: true`, or "
            f"OpenRouter may route it to an upstream that ignores it; {tail}",
        )
    ]
    forced = asked.with_tools([TOOL]).with_tool_choice(ToolChoice.required())
    body, said = _openrouter_body(forced)
    assert body["provider"] == sent
    assert said == [
        (
            WarningKind.UNSUPPORTED,
            f"{head}not sent: the request's tools need `require_parameters: true`, or "
            f"OpenRouter may route it to an upstream that ignores them; {tail}",
        )
    ]
    both = forced.with_tool_choice(ToolChoice.auto()).with_response_format(
        ResponseFormat.for_schema(SCHEMA, name="p", strict=False)
    )
    _, said = _openrouter_body(both)
    assert [message for _, message in said] == [
        f"{head}not sent: the request's schema and tools need `require_parameters: true`, or "
        f"OpenRouter may route it to an upstream that ignores them; {tail}"
    ]


class Counts(BaseModel):
    """A map: no strict subset holds it, so its schema goes without `strict`."""

    a: str
    counts: dict[str, int] = {}


@pytest.mark.parametrize("mode", [ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL])
def test_an_extraction_without_strict_requires_parameters_on_openrouter(
    mode: ExtractionMode,
) -> None:
    answer = ANSWER
    if mode is ExtractionMode.FORCED_TOOL:
        call = {"name": "submit_structured_output", "arguments": '{"a":"x"}'}
        answer = completion({"tool_calls": [{"id": "c", "type": "function", "function": call}]})
    target, recorder = provider("openrouter", (200, answer))
    extracted = allama.extract(target, Counts, ChatRequest(LLAMA).user("x").with_option(mode))
    assert extracted.value == Counts(a="x")
    (body,) = recorder.bodies
    carrier = body["response_format"]["json_schema"] if "tools" not in body else body["tools"][0]
    assert carrier.get("strict", carrier.get("function", {}).get("strict")) is False
    assert body["provider"] == {"require_parameters": True}


# OpenRouter's Responses API: the same routing, read from its own body (`text.format`)

RESPONSE = {
    "id": "r",
    "object": "response",
    "status": "completed",
    "model": "m",
    "output": [
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": '{"a":"x"}', "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
}
GPT = "openai/gpt-5"


def _responses_body(request: ChatRequest) -> tuple[dict[str, Any], list[Any]]:
    target, recorder = provider("openrouter", (200, RESPONSE), api="responses")
    response = target.chat(request)
    options = FieldSubject(field=RequestField.OPTIONS)
    said = [(w.kind, w.message) for w in response.warnings if w.subject == options]
    return recorder.bodies[0], said


def test_openrouters_responses_api_requires_parameters_for_any_response_format() -> None:
    asked = ChatRequest(GPT).user("Answer in JSON.")
    for fmt, kind in (
        (ResponseFormat.for_schema(SCHEMA, name="p", strict=False), "json_schema"),
        (ResponseFormat(type="json"), "json_object"),
    ):
        body, said = _responses_body(asked.with_response_format(fmt))
        assert body["text"]["format"]["type"] == kind
        assert (body["provider"], said) == ({"require_parameters": True}, [])
    body, _ = _responses_body(asked.with_response_format(ResponseFormat(type="text")))
    assert "provider" not in body
    # A format the body option gives is the body's as much as allama's own.
    given = asked.with_option_json(
        "openai_responses", {"text": {"format": {"type": "json_object"}}}
    )
    body, _ = _responses_body(given)
    assert (body["text"], body["provider"]) == (
        {"format": {"type": "json_object"}},
        {"require_parameters": True},
    )


def test_openrouters_responses_api_requires_parameters_for_tools() -> None:
    asked = ChatRequest(GPT).user("Call f.").with_tools([TOOL])
    for choice in (ToolChoice.required(), ToolChoice.tool("f"), ToolChoice.auto(), None):
        request = asked if choice is None else asked.with_tool_choice(choice)
        body, said = _responses_body(request)
        assert (body["provider"], said) == ({"require_parameters": True}, [])
    body, _ = _responses_body(asked.with_tool_choice(ToolChoice.none()))
    assert "provider" not in body
    # The body option's own tools count as the request's do.
    server = ChatRequest(GPT).user("Search.")
    server = server.with_option_json("openai_responses", {"tools": [{"type": "web_search"}]})
    body, _ = _responses_body(server)
    assert (body["tools"], body["provider"]) == (
        [{"type": "web_search"}],
        {"require_parameters": True},
    )


def test_openrouters_responses_api_says_what_needs_require_parameters() -> None:
    routing = {"order": ["openai"], "require_parameters": False}
    asked = (
        ChatRequest(GPT)
        .user("Answer in JSON.")
        .with_option_json("openai_responses", {"provider": routing})
    )
    sent = {"order": ["openai"], "require_parameters": True}
    head = "`require_parameters` of `provider` of the body option `openai_responses` (false) was "
    tail = "`require_parameters: true` was sent"
    body, said = _responses_body(asked.with_response_format(ResponseFormat(type="json")))
    assert body["provider"] == sent
    assert said == [
        (
            WarningKind.UNSUPPORTED,
            f"{head}not sent: the request's JSON mode needs `require_parameters: true`, or "
            f"OpenRouter may route it to an upstream that ignores it; {tail}",
        )
    ]
    forced = asked.with_tools([TOOL]).with_tool_choice(ToolChoice.required())
    body, said = _responses_body(forced)
    assert body["provider"] == sent
    assert said == [
        (
            WarningKind.UNSUPPORTED,
            f"{head}not sent: the request's tools need `require_parameters: true`, or "
            f"OpenRouter may route it to an upstream that ignores them; {tail}",
        )
    ]
    both = forced.with_tool_choice(ToolChoice.auto()).with_response_format(
        ResponseFormat.for_schema(SCHEMA, name="p", strict=False)
    )
    _, said = _responses_body(both)
    assert [message for _, message in said] == [
        f"{head}not sent: the request's schema and tools need `require_parameters: true`, or "
        f"OpenRouter may route it to an upstream that ignores them; {tail}"
    ]
    # Nothing to route: the caller's own routing goes as given, without a word.
    body, said = _responses_body(asked)
    assert (body["provider"], said) == (routing, [])


def test_an_extraction_without_strict_requires_parameters_on_openrouters_responses_api() -> None:
    target, recorder = provider("openrouter", (200, RESPONSE), api="responses")
    request = ChatRequest(GPT).user("x").with_option(ExtractionMode.NATIVE)
    extracted = allama.extract(target, Counts, request)
    assert extracted.value == Counts(a="x")
    (body,) = recorder.bodies
    assert body["text"]["format"]["strict"] is False
    assert body["provider"] == {"require_parameters": True}


# Workers AI: "JSON Mode couldn't be met" is the model's output refused, as Groq's
# `json_validate_failed` is

MODEL = "@cf/meta/llama-3.1-8b-instruct"
UNMET = "JSON Mode couldn't be met"


def _workers_ai_failure(status: int, body: dict[str, Any]) -> allama.Error:
    target, _ = provider("workers-ai", (status, body), account_id="acc")
    with pytest.raises(allama.Error) as caught:
        target.chat(ChatRequest(MODEL).user("x"))
    return caught.value


@pytest.mark.parametrize("status", [200, 400])
@pytest.mark.parametrize(
    "body",
    [
        {"result": None, "success": False, "errors": [{"code": 3040, "message": UNMET}]},
        {"error": {"message": UNMET}},
    ],
)
def test_workers_ai_json_mode_not_met_is_a_rejected_output(
    status: int, body: dict[str, Any]
) -> None:
    error = _workers_ai_failure(status, body)
    assert type(error) is RejectedOutputError
    assert (error.message, error.retryable, error.failed_output) == (UNMET, True, None)
    # Its words beside the code's other meaning: capacity, a server error tried again.
    capacity = {"result": None, "success": False, "errors": [{"code": 3040, "message": "Busy"}]}
    assert type(_workers_ai_failure(200, capacity)) is ServerError


def test_an_extraction_on_workers_ai_fails_with_the_refused_output() -> None:
    unmet = {"result": None, "success": False, "errors": [{"code": 3040, "message": UNMET}]}
    target, recorder = provider("workers-ai", (400, unmet), account_id="acc")
    with pytest.raises(RejectedOutputError) as caught:
        Extractor().extract(target, Counts, ChatRequest(MODEL).user("x"))
    assert caught.value.message == UNMET
    assert len(recorder.bodies) == 1


# vLLM: a schema its grammar backend cannot compile is refused on the field carrying it

GRAMMAR_REFUSALS = [
    "The provided JSON schema contains features not supported by xgrammar.",
    "Failed to transform json schema into a grammar: unsupported keyword",
]


def _vllm_refusal(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}


@pytest.mark.parametrize("message", GRAMMAR_REFUSALS)
def test_vllm_refusing_a_schema_is_unsupported_on_its_field(message: str) -> None:
    asked = ChatRequest("m").user("x")
    for request, field in (
        (
            asked.with_response_format(ResponseFormat.for_schema(SCHEMA)),
            RequestField.RESPONSE_FORMAT,
        ),
        (asked.with_tools([TOOL]).with_tool_choice(ToolChoice.tool("f")), RequestField.TOOLS),
    ):
        target, _ = provider("vllm", (400, _vllm_refusal(message)), base_url="http://vllm/v1")
        with pytest.raises(UnsupportedError) as caught:
            target.chat(request)
        assert (caught.value.field, caught.value.stage) == (field, UnsupportedStage.PROVIDER)
        assert (caught.value.message, caught.value.retryable) == (message, False)


# xAI: a schema that goes without `strict` is sent without the shapes xAI answers 400 to

SHAPED = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "any": True,
        "none": False,
        "pair": {"type": "array", "items": [{"type": "string"}, True], "additionalItems": False},
        "list": {"type": "array", "items": True},
        "map": {"type": "object", "additionalProperties": {"type": "string"}},
        "choice": {"anyOf": [{"type": "string"}, True]},
    },
    "required": ["any"],
    "additionalProperties": False,
}
AS_TAKEN = {
    "type": "object",
    "properties": {
        "any": {},
        "none": {"not": {}},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {}], "items": False},
        "list": {"type": "array", "items": {}},
        "map": {"type": "object", "additionalProperties": {"type": "string"}},
        "choice": {"anyOf": [{"type": "string"}, {}]},
    },
    "required": ["any"],
    "additionalProperties": False,
}


def test_xai_sends_a_schema_without_strict_in_the_shapes_it_takes() -> None:
    target, recorder = provider("xai", (200, ANSWER), (200, CALL))
    asked = ChatRequest("grok-4").user("x")
    response = target.chat(asked.with_response_format(ResponseFormat.for_schema(SHAPED, name="s")))
    spec = recorder.bodies[0]["response_format"]["json_schema"]
    assert (spec["schema"], spec["strict"]) == (AS_TAKEN, False)
    # The fallback says what it said before: the shapes change no value the schema takes.
    assert [w.message.rsplit("; ", 1)[-1] for w in response.warnings] == [
        "it goes without `strict`"
    ]
    strict_tool = ToolDefinition(name="g", parameters=SHAPED, strict=True)
    target.chat(asked.with_tools([strict_tool, TOOL.model_copy(update={"parameters": SHAPED})]))
    sent = [tool["function"] for tool in recorder.bodies[1]["tools"]]
    assert [(tool["parameters"], tool.get("strict")) for tool in sent] == [
        (AS_TAKEN, False),
        (AS_TAKEN, None),
    ]
    assert SHAPED["properties"]["any"] is True  # the caller's schema is left as it was


def test_other_endpoints_send_a_schema_without_strict_as_given() -> None:
    target, recorder = provider("groq", (200, ANSWER))
    fmt = ResponseFormat.for_schema(SHAPED, name="s", strict=False)
    target.chat(ChatRequest("openai/gpt-oss-120b").user("x").with_response_format(fmt))
    assert recorder.bodies[0]["response_format"]["json_schema"]["schema"] == SHAPED
