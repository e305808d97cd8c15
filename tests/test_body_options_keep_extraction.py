"""A body option (`with_option_json`) that names a field carrying an extraction's schema or
forcing its tool: merged where that is what the caller means (Gemini's `toolConfig`
beside the forced call), else the caller's value is sent and the record says what was lost
(a response format not sent is not enforced; a tool choice not sent is a note)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMode, Extractor, SchemaEnforcement
from allama.transport import Transport
from allama.types import RequestField, Warning

VALUE = {"name": "Ada", "age": 36}
TOOL = "submit_structured_output"


class Person(BaseModel):
    name: str
    age: int


def _sse(events: list[Any]) -> bytes:
    return b"".join(
        b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n" for e in events
    )


class Endpoint:
    """Answers `VALUE` in each dialect: as a call of the first tool offered, else as text
    (Chat Completions streamed too)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, http: httpx2.Request) -> httpx2.Response:
        body = json.loads(http.read())
        self.bodies.append(body)
        url = str(http.url)
        text = json.dumps(VALUE)
        tools = body.get("tools")
        if ":generateContent" in url:
            part: dict[str, Any] = {"text": text}
            if tools:
                name = tools[0]["functionDeclarations"][0]["name"]
                part = {"functionCall": {"name": name, "args": VALUE}}
            candidate = {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}
            usage = {"promptTokenCount": 10, "candidatesTokenCount": 5}
            return httpx2.Response(200, json={"candidates": [candidate], "usageMetadata": usage})
        if url.endswith("/api/chat"):
            message = {"role": "assistant", "content": text}
            return httpx2.Response(
                200,
                json={
                    "model": body["model"],
                    "message": message,
                    "done": True,
                    "done_reason": "stop",
                },
            )
        if url.endswith("/messages"):
            block: dict[str, Any] = {"type": "text", "text": text}
            if tools:
                block = {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": tools[0]["name"],
                    "input": VALUE,
                }
            answer = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [block],
                "stop_reason": "tool_use" if tools else "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
            return httpx2.Response(200, json=answer)
        if url.endswith("/responses"):
            item: dict[str, Any] = {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            if tools:
                item = {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": tools[0]["name"],
                    "arguments": text,
                    "status": "completed",
                }
            answer = {
                "id": "resp_1",
                "object": "response",
                "model": body["model"],
                "status": "completed",
                "output": [item],
                "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            }
            return httpx2.Response(200, json=answer)
        message = {"role": "assistant", "content": text}
        finish = "stop"
        if tools:
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": TOOL, "arguments": text},
            }
            message, finish = (
                {"role": "assistant", "content": None, "tool_calls": [call]},
                "tool_calls",
            )
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            choice = {"index": 0, "finish_reason": finish, "message": message}
            return httpx2.Response(
                200, json={"id": "c", "model": "m", "choices": [choice], "usage": usage}
            )
        chunks = [
            {"id": "c", "model": "m", "choices": [{"index": 0, "delta": message}]},
            {
                "id": "c",
                "model": "m",
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            },
            {"id": "c", "model": "m", "choices": [], "usage": usage},
            "[DONE]",
        ]
        return httpx2.Response(
            200, content=_sse(chunks), headers={"content-type": "text/event-stream"}
        )

    def transport(self) -> Transport:
        return Transport(
            client=httpx2.Client(transport=httpx2.MockTransport(self)),
            async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self)),
        )


def _run(
    preset: str,
    model: str,
    mode: ExtractionMode,
    option: dict[str, Any] | None = None,
    *,
    how: str = "sync",
    **options: Any,
) -> tuple[allama.ExtractionPlan, allama.ExtractionMetadata, dict[str, Any]]:
    """The plan, the record and the body sent of an extraction of `Person` in `mode`, with
    `option` as the preset's body option."""
    endpoint = Endpoint()
    made = allama.provider(preset, api_key="k", transport=endpoint.transport(), **options)
    request = ChatRequest(model).user("Ada, 36.").with_option(mode)
    if option is not None:
        namespace = {"openai": "openai_compat"}.get(preset, preset)
        if options.get("api") == "responses":
            namespace = "openai_responses"
        request = request.with_option_json(namespace, option)
    plan = Extractor().plan(made, Person, request)
    if how == "sync":
        got = allama.extract(made, Person, request)
    elif how == "async":
        got = asyncio.run(allama.aextract(made, Person, request))
    else:
        with allama.extract_stream(made, Person, request) as stream:
            for _ in stream:
                pass
            got = stream.finish()
    assert got.value == Person(**VALUE)
    assert len(endpoint.bodies) == 1
    assert endpoint.bodies[0].get("stream", False) is (how == "stream")
    return plan, got.metadata, endpoint.bodies[0]


def _unsupported(field: RequestField, message: str, provider: str) -> Warning:
    return Warning.unsupported(field, message).with_provider(provider)


def _not_forced(where: str, theirs: str, provider: str) -> Warning:
    return _unsupported(
        RequestField.TOOL_CHOICE,
        f"`{where}` of the body option `{provider}` ({theirs}) was sent in place of the "
        "request's tool choice, which forced the model to answer with the schema of `Person`; "
        "the model is no longer forced to unless the option's choice forces it",
        {"openai_compat": "openai", "openai_responses": "openai"}.get(provider, provider),
    )


def _format_replaced(where: str, namespace: str, provider: str) -> Warning:
    return _unsupported(
        RequestField.RESPONSE_FORMAT,
        f"`{where}` of the body option `{namespace}` was sent in place of the request's "
        "response format, which was not sent",
        provider,
    )


# Gemini: toolConfig merged, the caller's functionCallingConfig with a note

GEMINI = ("gemini", "gemini-2.5-flash")
FORCED_GEMINI = {"mode": "ANY", "allowedFunctionNames": [TOOL]}
LOCATION = {"latLng": {"latitude": 48.1, "longitude": 11.5}}
NOT_STRICT = _unsupported(
    RequestField.TOOLS,
    "Gemini has no strict function calling; the schema of `Person` was sent without it",
    "gemini",
)


@pytest.mark.parametrize("how", ["sync", "async"])
def test_gemini_retrieval_config_keeps_the_forced_call(how: str) -> None:
    option = {"toolConfig": {"retrievalConfig": LOCATION}}
    plan, record, body = _run(*GEMINI, ExtractionMode.FORCED_TOOL, option, how=how)
    assert body["toolConfig"] == {
        "functionCallingConfig": FORCED_GEMINI,
        "retrievalConfig": LOCATION,
    }
    # As without the option: the tool forced, not strict.
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.NOT_ENFORCED
        assert list(said.degradations) == [NOT_STRICT]
        assert list(said.notes) == []


def test_gemini_function_calling_config_of_the_caller_wins_with_a_note() -> None:
    theirs = {"mode": "AUTO"}
    option = {"toolConfig": {"functionCallingConfig": theirs, "retrievalConfig": LOCATION}}
    plan, record, body = _run(*GEMINI, ExtractionMode.FORCED_TOOL, option)
    assert body["toolConfig"] == {"functionCallingConfig": theirs, "retrievalConfig": LOCATION}
    note = _not_forced("toolConfig.functionCallingConfig", '{"mode":"AUTO"}', "gemini")
    for said in (plan, record):
        assert list(said.degradations) == [NOT_STRICT]
        assert list(said.notes) == [note]


def test_gemini_function_calling_config_as_allama_sends_it_changes_nothing() -> None:
    option = {"toolConfig": {"functionCallingConfig": FORCED_GEMINI}}
    plan, record, body = _run(*GEMINI, ExtractionMode.FORCED_TOOL, option)
    assert body["toolConfig"] == {"functionCallingConfig": FORCED_GEMINI}
    for said in (plan, record):
        assert list(said.degradations) == [NOT_STRICT]
        assert list(said.notes) == []


def test_gemini_response_mime_type_of_the_caller_is_not_enforced() -> None:
    option = {"generationConfig": {"responseMimeType": "text/plain", "topK": 40}}
    plan, record, body = _run(*GEMINI, ExtractionMode.NATIVE, option)
    assert body["generationConfig"]["responseMimeType"] == "text/plain"
    assert body["generationConfig"]["topK"] == 40
    lost = _format_replaced("generationConfig.responseMimeType", "gemini", "gemini")
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.NOT_ENFORCED
        assert list(said.degradations) == [lost]


def test_gemini_generation_config_beside_the_schema_keeps_it_exact() -> None:
    plan, record, body = _run(*GEMINI, ExtractionMode.NATIVE, {"generationConfig": {"topK": 40}})
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["generationConfig"]["responseJsonSchema"]["required"] == ["name", "age"]
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.EXACT
        assert list(said.degradations) == []


# Chat Completions


@pytest.mark.parametrize("how", ["sync", "async", "stream"])
def test_openai_response_format_of_the_caller_is_not_enforced(how: str) -> None:
    option = {"response_format": {"type": "json_object"}}
    plan, record, body = _run("openai", "gpt-5-mini", ExtractionMode.NATIVE, option, how=how)
    assert body["response_format"] == {"type": "json_object"}
    lost = _format_replaced("response_format", "openai_compat", "openai")
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.NOT_ENFORCED
        assert list(said.degradations) == [lost]


@pytest.mark.parametrize("how", ["sync", "async"])
def test_openai_tool_choice_of_the_caller_is_a_note(how: str) -> None:
    option = {"tool_choice": "auto"}
    plan, record, body = _run("openai", "gpt-5-mini", ExtractionMode.FORCED_TOOL, option, how=how)
    assert body["tool_choice"] == "auto"
    note = _not_forced("tool_choice", '"auto"', "openai_compat")
    for said in (plan, record):
        # A strict tool's arguments are constrained when it is called; it is not forced.
        assert said.enforcement is SchemaEnforcement.EXACT
        assert list(said.degradations) == []
        assert list(said.notes) == [note]


def test_openai_options_as_allama_sends_them_change_nothing() -> None:
    forced = {"type": "function", "function": {"name": TOOL}}
    plan, record, body = _run(
        "openai", "gpt-5-mini", ExtractionMode.FORCED_TOOL, {"tool_choice": forced}
    )
    assert body["tool_choice"] == forced
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.EXACT
        assert list(said.notes) == []


# Responses


def test_responses_text_format_of_the_caller_is_not_enforced() -> None:
    option = {"text": {"format": {"type": "json_object"}}}
    plan, record, body = _run(
        "openai", "gpt-5-mini", ExtractionMode.NATIVE, option, api="responses"
    )
    assert body["text"] == {"format": {"type": "json_object"}}
    lost = _format_replaced("text.format", "openai_responses", "openai")
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.NOT_ENFORCED
        assert list(said.degradations) == [lost]


def test_responses_text_beside_the_format_keeps_it_exact() -> None:
    option = {"text": {"verbosity": "low"}}
    plan, record, body = _run(
        "openai", "gpt-5-mini", ExtractionMode.NATIVE, option, api="responses"
    )
    assert body["text"]["verbosity"] == "low"
    assert body["text"]["format"]["type"] == "json_schema"
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.EXACT
        assert list(said.degradations) == []


def test_responses_tool_choice_of_the_caller_is_a_note() -> None:
    option = {"tool_choice": "auto"}
    plan, record, body = _run(
        "openai", "gpt-5-mini", ExtractionMode.FORCED_TOOL, option, api="responses"
    )
    assert body["tool_choice"] == "auto"
    note = _not_forced("tool_choice", '"auto"', "openai_responses")
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.EXACT
        assert list(said.notes) == [note]


# Anthropic

CLAUDE = ("anthropic", "claude-sonnet-4-5")


@pytest.mark.parametrize("how", ["sync", "async"])
def test_anthropic_tool_choice_of_the_caller_is_a_note(how: str) -> None:
    option = {"tool_choice": {"type": "auto"}}
    plan, record, body = _run(*CLAUDE, ExtractionMode.FORCED_TOOL, option, how=how)
    assert body["tool_choice"] == {"type": "auto"}
    note = _not_forced("tool_choice", '{"type":"auto"}', "anthropic")
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.EXACT
        assert list(said.degradations) == []
        assert list(said.notes) == [note]


def test_anthropic_output_config_format_of_the_caller_is_not_enforced() -> None:
    option = {"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}
    plan, record, body = _run(*CLAUDE, ExtractionMode.NATIVE, option)
    assert body["output_config"] == option["output_config"]
    lost = _format_replaced("output_config.format", "anthropic", "anthropic")
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.NOT_ENFORCED
        assert list(said.degradations) == [lost]


def test_anthropic_output_config_beside_the_format_keeps_it_exact() -> None:
    plan, record, body = _run(*CLAUDE, ExtractionMode.NATIVE, {"output_config": {"effort": "low"}})
    assert body["output_config"]["effort"] == "low"
    assert body["output_config"]["format"]["schema"]["required"] == ["name", "age"]
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.EXACT
        assert list(said.degradations) == []


# Ollama


def test_ollama_format_of_the_caller_is_not_enforced() -> None:
    plan, record, body = _run("ollama", "llama3.1", ExtractionMode.NATIVE, {"format": "json"})
    assert body["format"] == "json"
    lost = _format_replaced("format", "ollama", "ollama")
    narrowed = Warning.approximated(
        RequestField.RESPONSE_FORMAT,
        "the schema of `Person` was approximated: `integer` was narrowed at `Person.age`: "
        "llama.cpp's grammar writes integers only from -9223372036854775806 to "
        "9223372036854775806 (64 bits; bounds within them keep it exact)",
    ).with_provider("ollama")
    unreported = Warning.approximated(
        RequestField.RESPONSE_FORMAT,
        "the schema of `Person` was approximated: the schema at `Person` is compiled by "
        "Ollama's llama.cpp grammar converter, which does not report which keywords it enforces",
    ).with_provider("ollama")
    for said in (plan, record):
        assert said.enforcement is SchemaEnforcement.NOT_ENFORCED
        assert list(said.degradations) == [narrowed, unreported, lost]


def test_a_floor_refuses_before_sending_what_the_option_replaced() -> None:
    # Under either policy: the caller's own value is sent, not refused as unsupported; a
    # floor on the enforcement is what stops it, before anything is paid for.
    endpoint = Endpoint()
    made = allama.provider("openai", api_key="k", transport=endpoint.transport())
    request = (
        ChatRequest("gpt-5-mini")
        .user("Ada, 36.")
        .with_option(ExtractionMode.NATIVE)
        .with_unsupported_policy(allama.UnsupportedPolicy.ERROR)
        .with_option_json("openai_compat", {"response_format": {"type": "json_object"}})
    )
    with pytest.raises(allama.EnforcementBelowError) as caught:
        Extractor(min_enforcement="exact").extract(made, Person, request)
    assert endpoint.bodies == []
    assert str(caught.value) == (
        "schema enforcement `not_enforced` is below the required `exact`: `response_format` of "
        "the body option `openai_compat` was sent in place of the request's response format, "
        "which was not sent"
    )
    got = allama.extract(made, Person, request)
    assert got.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert endpoint.bodies[-1]["response_format"] == {"type": "json_object"}
