"""Fixes to the Chat Completions presets, each through `allama.provider(...)` or the
dialect's decoders: DeepSeek's reasoning sent back, a leading `<think>` block read as
reasoning, llama.cpp's full context, vLLM's roles, OpenRouter's error beside its choices,
Groq's strict tools per model family, OpenRouter's unnamed "requested parameters", the
choices after the first (`n`) warned of and kept, Groq's 498 `capacity_exceeded` tried
again, no reasoning effort sent to Groq's Llama 3.x, no log-probabilities asked of an
Azure deployment taken for a reasoning model, OpenRouter's `require_parameters` kept
for a schema with a warning where the caller gave another, OpenAI's tool-call ids within 40
characters, reasoning or a paused Anthropic turn's server tool blocks left out with a
warning, o1-mini's and o1-preview's system and developer words in the first user turn,
Groq's leading `<think>` block read as reasoning, Together's full context (its 403 too),
Mistral's unknown model not found, OpenAI's audio answer kept (whole and streamed alike,
each choice's, its streamed data decoded piece by piece) with its id sent back, reasoning
efforts in each model's set on Mistral and xAI, and none to `deepseek-chat` outside
thinking mode, a tool of no arguments sent with `"properties": {}` (and strict where
asked), and a refusal beside text sent back."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import allama
from _recording import provider
from allama import ChatRequest, ExtractionMode, Extractor, ToolDefinition
from allama.adapters.openai_compat._decode import decode_body
from allama.adapters.openai_compat._sse import ChatStreamDecoder, decode_stream
from allama.errors import (
    ContextWindowExceededError,
    Error,
    InvalidRequestError,
    ServerError,
    UnsupportedError,
)
from allama.stream import StreamCollector
from allama.types import (
    AssistantMessage,
    ChatResponse,
    FieldSubject,
    ProviderDataEvent,
    Reasoning,
    Refusal,
    RequestField,
    StreamEvent,
    TextPart,
    ToolCall,
    WarningKind,
)


class Person(BaseModel):
    name: str
    age: int


def completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "c-1",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        **extra,
    }


def sse(*payloads: dict[str, Any]) -> bytes:
    return "".join(f"data: {json.dumps(p)}\n\n" for p in payloads).encode() + b"data: [DONE]\n\n"


def delta(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    piece = {} if content is None else {"content": content}
    return {
        "id": "c-1",
        "model": "m",
        "choices": [{"index": 0, "delta": piece, "finish_reason": finish}],
    }


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


# 1. DeepSeek's thinking mode: a turn's reasoning goes back in `reasoning_content`


def _tool_turn(preset: str) -> dict[str, Any]:
    call = {"id": "call_0", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    first = completion(
        {"content": "", "reasoning_content": "Call the tool.", "tool_calls": [call]},
        "tool_calls",
    )
    target, recorder = provider(preset, (200, first), (200, completion({"content": "Sunny"})))
    request = ChatRequest("deepseek-reasoner").user("Weather?").with_tools([WEATHER])
    response = target.chat(request)
    target.chat(request.assistant(response.content).tool_result(response.tool_calls()[0], "{}"))
    sent: dict[str, Any] = recorder.bodies[1]["messages"][1]
    return sent


def test_deepseek_sends_a_tool_turns_reasoning_back() -> None:
    sent = _tool_turn("deepseek")
    assert sent["role"] == "assistant"
    assert sent["reasoning_content"] == "Call the tool."
    assert sent["tool_calls"][0]["id"] == "call_0"


def test_other_endpoints_send_no_reasoning_back() -> None:
    assert "reasoning_content" not in _tool_turn("openai")


def test_deepseek_extraction_repair_keeps_the_forced_calls_reasoning() -> None:
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "submit_structured_output", "arguments": '{"name": "Bob"}'},
    }
    wrong = completion(
        {"content": "", "reasoning_content": "Bob is three.", "tool_calls": [call]}, "tool_calls"
    )
    fixed = {**call, "function": {**call["function"], "arguments": '{"name":"Bob","age":3}'}}
    right = completion({"content": "", "tool_calls": [fixed]}, "tool_calls")
    target, recorder = provider("deepseek", (200, wrong), (200, right))
    # The reasoner takes no forced tool (thinking mode): forced-tool mode offers it.
    request = ChatRequest("deepseek-reasoner").user("Bob is 3")
    result = Extractor(retries=1).extract(
        target, Person, request.with_option(ExtractionMode.FORCED_TOOL)
    )
    assert result.value == Person(name="Bob", age=3)
    turn = next(m for m in recorder.bodies[1]["messages"] if m["role"] == "assistant")
    assert turn["reasoning_content"] == "Bob is three."


# 5. A leading `<think>` block in the content is reasoning (Fireworks, Together, vLLM, and
# Groq, whose `reasoning_format` is `raw` by default: Qwen3's thinking opens `content`)


THOUGHT = '\nThe user wants {"name": "X"} maybe.\n'
ANSWER = '{"name": "Bob", "age": 3}'
THINKING = f"<think>{THOUGHT}</think>\n\n{ANSWER}"


@pytest.mark.parametrize(
    ("preset", "model"),
    [
        ("vllm", "Qwen/Qwen3-0.6B"),
        ("together", "deepseek-ai/DeepSeek-R1"),
        ("fireworks", "accounts/fireworks/models/deepseek-r1"),
        ("groq", "qwen/qwen3-32b"),
    ],
)
def test_native_extraction_reads_past_a_leading_think_block(preset: str, model: str) -> None:
    target, _ = provider(preset, (200, completion({"content": THINKING})))
    request = ChatRequest(model).user("Bob is 3").with_option(ExtractionMode.NATIVE)
    result = allama.extract(target, Person, request)
    assert result.value == Person(name="Bob", age=3)


@pytest.mark.parametrize("preset", ["vllm", "together", "fireworks", "groq"])
def test_a_leading_think_block_is_a_reasoning_block(preset: str) -> None:
    target, _ = provider(preset, (200, completion({"content": THINKING})))
    response = target.chat(ChatRequest("m").user("x"))
    assert response.content == (Reasoning(text=THOUGHT), TextPart(text=ANSWER))


def test_think_tags_are_left_alone_where_the_profile_does_not_say() -> None:
    target, _ = provider("openai", (200, completion({"content": THINKING})))
    response = target.chat(ChatRequest("gpt-4o").user("x"))
    assert response.content == (TextPart(text=THINKING),)


def test_a_think_block_not_at_the_start_is_answer() -> None:
    text = "The tag <think>x</think> is literal."
    response = decode_body(json.dumps(completion({"content": text})), think_tags=True)
    assert response.content == (TextPart(text=text),)


def test_an_unclosed_think_block_is_all_reasoning() -> None:
    response = decode_body(json.dumps(completion({"content": "<think>cut"})), think_tags=True)
    assert response.content == (Reasoning(text="cut"),)


def _streamed(pieces: list[str], **flags: bool) -> ChatResponse:
    data = sse(*(delta(piece) for piece in pieces), delta(None, "stop"))
    return collect(decode_stream(data, **flags))


@pytest.mark.parametrize(
    "pieces",
    [
        [THINKING],
        ["<thi", "nk>", THOUGHT, "</th", "ink>", "\n", "\n", ANSWER[:5], ANSWER[5:]],
        ["\n<", "think>", THOUGHT[:4], THOUGHT[4:] + "<", "/think>\n\n" + ANSWER],
    ],
)
def test_a_streams_think_block_split_anywhere_is_reasoning(pieces: list[str]) -> None:
    response = _streamed(pieces, think_tags=True)
    assert response.content == (Reasoning(text=THOUGHT), TextPart(text=ANSWER))


@settings(max_examples=150, deadline=None)
@given(
    text=st.sampled_from(
        [THINKING, "plain answer", "<think>only", "<th", "  \n", " <think></think> x", "<thinker>"]
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=6),
)
def test_a_collected_stream_equals_the_decoded_body(text: str, cuts: list[int]) -> None:
    points = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    streamed = _streamed([piece for piece in pieces if piece], think_tags=True)
    body = decode_body(json.dumps(completion({"content": text})), think_tags=True)
    assert streamed.content == body.content


def test_a_stream_decoder_from_the_vllm_preset_splits_think_tags() -> None:
    data = sse(delta("<think>a</think>b"), delta(None, "stop"))
    target, _ = provider("vllm", (200, data))
    stream = target.chat_stream(ChatRequest("Qwen/Qwen3-0.6B").user("x"))
    for _ in stream:
        pass
    assert stream.collector.finish().content == (Reasoning(text="a"), TextPart(text="b"))


def test_groqs_qwen3_stream_reads_its_think_block_as_reasoning() -> None:
    data = sse(delta("<think>\nLet me add.\n</"), delta("think>\n\n4"), delta(None, "stop"))
    target, _ = provider("groq", (200, data))
    stream = target.chat_stream(ChatRequest("qwen/qwen3-32b").user("2+2?"))
    for _ in stream:
        pass
    response = stream.collector.finish()
    assert response.content == (Reasoning(text="\nLet me add.\n"), TextPart(text="4"))
    assert response.text() == "4"


def test_a_stream_decoder_without_think_tags_keeps_them() -> None:
    decoder = ChatStreamDecoder()
    events = [*decoder.feed(sse(delta("<think>a</think>b"), delta(None, "stop")))]
    assert collect(events).content == (TextPart(text="<think>a</think>b"),)


# 3. llama.cpp's full context


@pytest.mark.parametrize("preset", ["llama-cpp", "local"])
@pytest.mark.parametrize(
    "error",
    [
        {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        },
        {
            "code": 400,
            "message": "the request exceeds the available context size. try increasing it",
            "type": "invalid_request_error",
        },
    ],
)
def test_llama_cpp_context_overflow_is_a_context_window_error(
    preset: str, error: dict[str, Any]
) -> None:
    from allama.adapters.openai_compat import error_from_response

    found = error_from_response(400, {}, json.dumps({"error": error}), provider=preset)
    assert isinstance(found, ContextWindowExceededError)
    if preset == "llama-cpp":
        target, _ = provider(preset, (400, {"error": error}))
        with pytest.raises(ContextWindowExceededError):
            target.chat(ChatRequest("m").user("x"))


# 3b. Together's full context, in Text Generation Inference's words


@pytest.mark.parametrize(
    "message",
    [
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 131073. "
        "Given: 130000 `inputs` tokens and 2000 `max_new_tokens`",
        "Input validation error: `inputs` must have less than 4096 tokens. Given: 5000",
    ],
)
def test_togethers_context_overflow_is_a_context_window_error(message: str) -> None:
    error = {"message": message, "type": "invalid_request_error", "param": "max_tokens"}
    target, _ = provider("together", (400, {"id": "x", "error": error}))
    with pytest.raises(ContextWindowExceededError) as raised:
        target.chat(ChatRequest("meta-llama/Llama-3.3-70B-Instruct-Turbo").user("x"))
    assert str(raised.value) == message
    assert raised.value.retryable is False


TOGETHER_FULL = (
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193. "
    "Given: 8000 `inputs` tokens and 1000 `max_new_tokens`"
)


@pytest.mark.parametrize("preset", ["together", "openai-compatible"])
def test_a_403_that_says_the_context_is_full_is_a_context_window_error(preset: str) -> None:
    # Together documents its full context as a 403 (its error codes): the request's fault,
    # not a refusal of the key or the account, on any endpoint that words it so.
    error = {"message": TOGETHER_FULL, "type": "invalid_request_error"}
    options = {"base_url": "http://127.0.0.1:9/v1"} if preset == "openai-compatible" else {}
    target, recorder = provider(preset, (403, {"id": "x", "error": error}), **options)
    request = ChatRequest("meta-llama/Llama-3.3-70B-Instruct-Turbo").user("x")
    with pytest.raises(ContextWindowExceededError) as raised:
        target.chat(request)
    assert str(raised.value) == TOGETHER_FULL
    assert (raised.value.status, raised.value.retryable) == (403, False)
    with pytest.raises(ContextWindowExceededError):
        asyncio.run(target.achat(request))
    assert len(recorder.bodies) == 2  # not tried again


def test_a_403_of_other_words_is_still_a_refusal_of_the_key_or_account() -> None:
    from allama.errors import PermissionDeniedError

    error = {"message": "Your API key does not have access to this model", "type": "forbidden"}
    target, _ = provider("together", (403, {"error": error}))
    with pytest.raises(PermissionDeniedError):
        target.chat(ChatRequest("meta-llama/Llama-3.3-70B-Instruct-Turbo").user("x"))


MISTRAL_UNKNOWN_MODEL = {
    "object": "error",
    "message": "Invalid model: mistral-foo",
    "type": "invalid_request_error",
    "param": "model",
    "code": "unknown_model",
}


@pytest.mark.parametrize(
    "body",
    [
        MISTRAL_UNKNOWN_MODEL,
        {**MISTRAL_UNKNOWN_MODEL, "code": None},  # by its `param` and words alone
        {**MISTRAL_UNKNOWN_MODEL, "param": None, "message": "Unknown model"},  # by its code
    ],
)
def test_mistrals_unknown_model_is_not_found(body: dict[str, Any]) -> None:
    # Mistral's error glossary: a model it has not is `unknown_model`, a 400 whose type is
    # `invalid_request_error`. Not found, so a failover moves on and a batch stops.
    from allama.errors import NotFoundError

    target, _ = provider("mistral", (400, body))
    with pytest.raises(NotFoundError) as raised:
        target.chat(ChatRequest("mistral-foo").user("x"))
    assert str(raised.value) == body["message"]
    assert (raised.value.status, raised.value.retryable) == (400, False)


def test_a_failover_moves_on_past_mistrals_unknown_model() -> None:
    from allama.wrappers import FailoverProvider

    first, _ = provider("mistral", (400, MISTRAL_UNKNOWN_MODEL))
    second, recorder = provider("mistral", (200, completion({"content": "hi"})))
    response = FailoverProvider([first, second]).chat(ChatRequest("mistral-foo").user("x"))
    assert response.text() == "hi" and len(recorder.bodies) == 1


def test_another_400_on_the_model_field_stays_an_invalid_request() -> None:
    body = {**MISTRAL_UNKNOWN_MODEL, "code": None, "message": "model must be a string"}
    target, _ = provider("mistral", (400, body))
    with pytest.raises(InvalidRequestError) as raised:
        target.chat(ChatRequest("mistral-foo").user("x"))
    assert type(raised.value) is InvalidRequestError


# 4. vLLM: no `developer` role (common chat templates refuse it)


def test_vllm_sends_a_developer_message_as_system() -> None:
    target, recorder = provider("vllm", (200, completion({"content": "hi"})))
    target.chat(ChatRequest("Qwen/Qwen3-0.6B").developer("Be brief.").user("x"))
    assert [m["role"] for m in recorder.bodies[0]["messages"]] == ["system", "user"]


# 7. OpenRouter: an error beside non-empty choices raises, sync and streamed alike

FAILED = {
    "id": "gen-1",
    "model": "anthropic/claude",
    "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Partial ans"},
            "finish_reason": "error",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
}


def test_openrouter_error_beside_the_choices_raises_in_a_body() -> None:
    target, _ = provider("openrouter", (200, FAILED))
    with pytest.raises(ServerError) as raised:
        target.chat(ChatRequest("anthropic/claude").user("x"))
    assert raised.value.context.body is not None and "Partial" in raised.value.context.body


def test_openrouter_error_beside_the_choices_raises_alike_streamed() -> None:
    chunk = {**FAILED, "choices": [{"index": 0, "delta": {"content": "Partial ans"}}]}
    chunk["choices"][0]["finish_reason"] = "error"
    with pytest.raises(ServerError) as streamed:
        decode_stream(sse(chunk), provider="openrouter")
    with pytest.raises(ServerError) as body:
        decode_body(json.dumps(FAILED), provider="openrouter")
    assert type(streamed.value) is type(body.value)
    assert streamed.value.message == body.value.message


def test_a_body_with_choices_and_no_error_is_an_answer() -> None:
    response = decode_body(json.dumps(completion({"content": "ok"}, error=None)))
    assert response.text() == "ok"


# 6. Groq: strict tools approximate on every model, GPT-OSS included (Groq documents
# constrained decoding for GPT-OSS's `response_format`, not which models enforce
# `function.strict`)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai/gpt-oss-120b", "approximate"),
        ("openai/gpt-oss-20b", "approximate"),
        ("llama-3.3-70b-versatile", "approximate"),
        ("moonshotai/kimi-k2-instruct-0905", "approximate"),
        ("qwen/qwen3-32b", "approximate"),
        ("openai/gpt-oss-safeguard-20b", "approximate"),
    ],
)
def test_groq_forced_tool_enforcement_is_per_model_family(model: str, expected: str) -> None:
    target = allama.provider("groq", api_key="k")
    request = ChatRequest(model).user("x").with_option(ExtractionMode.FORCED_TOOL)
    plan = Extractor().plan(target, Person, request)
    assert plan.enforcement.value == expected
    if expected == "approximate":
        (warning,) = plan.degradations
        assert warning.kind is WarningKind.APPROXIMATED
        assert warning.subject == FieldSubject(field=RequestField.TOOLS)
        assert "does not say that it enforces `strict`" in warning.message


def test_groq_still_sends_strict_on_a_tool_it_reports_approximate() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    target, recorder = provider("groq", (200, completion({"tool_calls": [call]})))
    strict = WEATHER.model_copy(update={"strict": True})
    response = target.chat(ChatRequest("llama-3.3-70b-versatile").user("x").with_tools([strict]))
    assert recorder.bodies[0]["tools"][0]["function"]["strict"] is True
    assert [w.kind for w in response.warnings] == [WarningKind.APPROXIMATED]


# 2. OpenRouter's unnamed "requested parameters": the other optional parameters are named

NO_ENDPOINT = {
    "error": {
        "code": 404,
        "message": "No endpoints found that can handle the requested parameters.",
    }
}


def _refused(change: Callable[[ChatRequest], ChatRequest]) -> Error:
    target, _ = provider("openrouter", (404, NO_ENDPOINT))
    request = change(ChatRequest("anthropic/claude-sonnet-4.5").user("Bob is 3"))
    with pytest.raises(UnsupportedError) as raised:
        allama.extract(target, Person, request)
    return raised.value


def test_an_unnamed_refusal_names_the_optional_parameters_sent_besides_the_schema() -> None:
    error = _refused(lambda r: r.with_seed(42).with_temperature(0.2))
    assert isinstance(error, UnsupportedError) and error.field is not None
    assert "`seed`" in str(error) and "`temperature`" in str(error)
    assert "no endpoint takes all of the parameters sent" in str(error)


def test_an_unnamed_refusal_of_the_schema_alone_is_put_on_its_field_as_before() -> None:
    error = _refused(lambda r: r)
    assert isinstance(error, UnsupportedError) and error.field is RequestField.TOOLS
    assert "besides it" not in str(error)


_UNNAMED = "No endpoints found that can handle the requested parameters."
_OBJECT = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
_LOOSE_TOOL = ToolDefinition(name="f", parameters=_OBJECT)
_ASKED = ChatRequest("meta-llama/llama-3.3-70b-instruct").user("Bob is 3")


def _chat_refused(request: ChatRequest) -> UnsupportedError:
    target, recorder = provider("openrouter", (404, NO_ENDPOINT))
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert recorder.bodies[0]["provider"] == {"require_parameters": True}
    return raised.value


@pytest.mark.parametrize(
    ("request_", "field", "went", "named"),
    [
        pytest.param(
            _ASKED.with_response_format(allama.ResponseFormat.json_object()),
            RequestField.RESPONSE_FORMAT,
            "JSON mode",
            "JSON mode's `response_format`",
            id="json-mode",
        ),
        pytest.param(
            _ASKED.with_response_format(
                allama.ResponseFormat.for_schema(_OBJECT, name="p", strict=False)
            ),
            RequestField.RESPONSE_FORMAT,
            "the schema",
            "the schema's `response_format`",
            id="schema-not-strict",
        ),
        pytest.param(
            _ASKED.with_tools([_LOOSE_TOOL]).with_tool_choice(allama.ToolChoice.tool("f")),
            RequestField.TOOLS,
            "the tools",
            "`tools`",
            id="forced-tool-not-strict",
        ),
        pytest.param(
            _ASKED.with_tools([_LOOSE_TOOL]),
            RequestField.TOOLS,
            "the tools",
            "`tools`",
            id="tools-auto",
        ),
    ],
)
def test_an_unnamed_refusal_is_put_on_what_require_parameters_went_with(
    request_: ChatRequest, field: RequestField, went: str, named: str
) -> None:
    # `require_parameters` goes with any response format and with tools: the refusal is
    # of the field that carried what it went with, and says so, whatever the schema's mode.
    alone = _chat_refused(request_)
    assert (alone.field, str(alone)) == (field, _UNNAMED)
    seeded = _chat_refused(request_.with_seed(42))
    assert (seeded.field, str(seeded)) == (
        field,
        f"{_UNNAMED} (under the `require_parameters` sent with {went}, no endpoint takes all "
        f"of the parameters sent: {named}, and besides it `seed`; any of them may be the one "
        "none takes)",
    )


def test_an_unnamed_refusal_of_a_schema_and_tools_together_names_both() -> None:
    # Either may be the one no endpoint takes: put on neither, and said.
    both = _ASKED.with_tools([_LOOSE_TOOL]).with_response_format(
        allama.ResponseFormat.for_schema(_OBJECT, name="p", strict=False)
    )
    error = _chat_refused(both)
    went = (
        f"{_UNNAMED} (under the `require_parameters` sent with the schema and the tools, no "
        "endpoint takes all of the parameters sent: the schema's `response_format` and `tools`"
    )
    assert (error.field, str(error)) == (None, f"{went}; either may be the one none takes)")
    error = _chat_refused(both.with_temperature(0.2))
    assert (error.field, str(error)) == (
        None,
        f"{went}, and besides them `temperature`; any of them may be the one none takes)",
    )


def test_an_unnamed_refusal_names_tools_sent_under_tool_choice_none_as_other_parameters() -> None:
    # No answer hangs on them, so the routing did not go with them; they were sent all
    # the same, and the routing requires them too.
    error = _chat_refused(
        _ASKED.with_response_format(allama.ResponseFormat.json_object())
        .with_tools([_LOOSE_TOOL])
        .with_tool_choice(allama.ToolChoice.none())
    )
    assert (error.field, str(error)) == (
        RequestField.RESPONSE_FORMAT,
        f"{_UNNAMED} (under the `require_parameters` sent with JSON mode, no endpoint takes "
        "all of the parameters sent: JSON mode's `response_format`, and besides it `tools`, "
        "`tool_choice`; any of them may be the one none takes)",
    )


_OPTION_TOOL = {"type": "function", "function": {"name": "g", "parameters": _OBJECT}}
_OPTION_SCHEMA = {"type": "json_schema", "json_schema": {"name": "p", "schema": _OBJECT}}


@pytest.mark.parametrize(
    ("option", "field", "went", "named"),
    [
        pytest.param(
            {"response_format": {"type": "json_object"}},
            RequestField.RESPONSE_FORMAT,
            "JSON mode",
            "JSON mode's `response_format`",
            id="json-mode",
        ),
        pytest.param(
            {"response_format": _OPTION_SCHEMA},
            RequestField.RESPONSE_FORMAT,
            "the schema",
            "the schema's `response_format`",
            id="schema",
        ),
        pytest.param(
            {"tools": [_OPTION_TOOL], "tool_choice": "required"},
            RequestField.TOOLS,
            "the tools",
            "`tools`",
            id="tools",
        ),
    ],
)
def test_an_unnamed_refusal_is_put_on_what_require_parameters_went_with_in_the_body_option(
    option: dict[str, Any], field: RequestField, went: str, named: str
) -> None:
    # The routing goes with the body as sent, the body option's fields in it: the refusal
    # is of the field they went in, named as what it went with, not as another parameter.
    request = _ASKED.with_option_json("openai_compat", option)
    alone = _chat_refused(request)
    assert (alone.field, str(alone)) == (field, _UNNAMED)
    seeded = _chat_refused(request.with_seed(42))
    assert (seeded.field, str(seeded)) == (
        field,
        f"{_UNNAMED} (under the `require_parameters` sent with {went}, no endpoint takes all "
        f"of the parameters sent: {named}, and besides it `seed`; any of them may be the one "
        "none takes)",
    )


def test_an_unnamed_refusal_reads_what_the_body_option_sent_in_place_of_the_requests() -> None:
    both = _ASKED.with_response_format(allama.ResponseFormat.json_object()).with_tools(
        [_LOOSE_TOOL]
    )
    # Its `text` format in place of JSON mode: the routing went with the tools alone.
    error = _chat_refused(
        both.with_option_json("openai_compat", {"response_format": {"type": "text"}})
    )
    assert (error.field, str(error)) == (
        RequestField.TOOLS,
        f"{_UNNAMED} (under the `require_parameters` sent with the tools, no endpoint takes "
        "all of the parameters sent: `tools`, and besides it `response_format`; any of them "
        "may be the one none takes)",
    )
    # Its `tool_choice: none`: with JSON mode alone, the tools sent all the same.
    error = _chat_refused(both.with_option_json("openai_compat", {"tool_choice": "none"}))
    assert (error.field, str(error)) == (
        RequestField.RESPONSE_FORMAT,
        f"{_UNNAMED} (under the `require_parameters` sent with JSON mode, no endpoint takes "
        "all of the parameters sent: JSON mode's `response_format`, and besides it `tools`, "
        "`tool_choice`; any of them may be the one none takes)",
    )


def test_an_unnamed_refusal_of_the_responses_api_reads_its_own_body_option() -> None:
    # There the format goes in `text`, the option is `openai_responses`'s: another
    # dialect's option is not sent, and names nothing.
    target, recorder = provider("openrouter", (404, NO_ENDPOINT), api="responses")
    request = _ASKED.with_option_json(
        "openai_responses", {"text": {"format": {"type": "json_object"}}}
    ).with_option_json("openai_compat", {"tools": [_OPTION_TOOL]})
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert recorder.bodies[0]["provider"] == {"require_parameters": True}
    assert (raised.value.field, str(raised.value)) == (RequestField.RESPONSE_FORMAT, _UNNAMED)


def test_tool_calls_in_the_probe_shape_keep_their_ids() -> None:
    # (a guard: the reasoning sent back does not disturb the tool calls beside it)
    response = decode_body(
        json.dumps(
            completion(
                {
                    "reasoning_content": "r",
                    "tool_calls": [
                        {
                            "id": "x",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                "tool_calls",
            )
        )
    )
    assert response.content == (Reasoning(text="r"), ToolCall(id="x", name="f", arguments="{}"))


class Note(BaseModel):
    body: str = Field(max_length=5000)
    debt: int = Field(lt=0)
    code: str = Field(pattern=r"^[0-9]{3}$")


def test_ollamas_openai_endpoint_gets_the_schema_its_converter_compiles() -> None:
    # Ollama's /v1 compiles the schema with the llama.cpp converter its native API uses: a
    # length past 2,000 fails the grammar (400), a lone negative bound every generation
    # (500: it gets the lower bound the converter reads widest), `\d` matches anything. Sent
    # as the native `ollama` preset sends it.
    answer = completion({"content": '{"body": "x", "debt": -1, "code": "123"}'})
    compat, recorder = provider("ollama-openai", (200, answer))
    request = allama.ChatRequest("llama3.2").user("x")
    result = allama.extract(compat, Note, request)
    sent = recorder.bodies[0]["response_format"]["json_schema"]["schema"]["properties"]
    assert {name: {k: v for k, v in p.items() if k != "title"} for name, p in sent.items()} == {
        "body": {"type": "string"},
        "debt": {"type": "integer", "exclusiveMaximum": 0, "minimum": -(2**63 - 2)},
        "code": {"pattern": "^[0-9]{3}$", "type": "string"},
    }
    assert result.metadata.enforcement is allama.SchemaEnforcement.APPROXIMATE
    assert result.metadata.degradations[-1].message == (
        "the schema of `Note` was approximated: the schema at `Note` is compiled by Ollama's "
        "OpenAI-compatible endpoint's llama.cpp grammar converter, which does not report "
        "which keywords it enforces"
    )


# 8. More than one choice (`n` through the body option): the first is read, the others kept
# and warned of, whole and streamed alike

TWO_CHOICES = {
    "id": "c-2",
    "model": "m",
    "choices": [
        {
            "index": 1,
            "message": {"role": "assistant", "content": "second"},
            "finish_reason": "length",
        },
        {"index": 0, "message": {"role": "assistant", "content": "first"}, "finish_reason": "stop"},
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 20, "total_tokens": 25},
}

UNREAD_SECOND = (
    "the provider answered 2 choices: only the first is read (the others' text, refusals, "
    "tool calls, audio and finish reasons are kept in `provider_data`, under `other_choices`)"
)


def _choice_delta(index: int, content: str | None, finish: str | None = None) -> dict[str, Any]:
    piece = {} if content is None else {"content": content}
    return {
        "id": "c-2",
        "model": "m",
        "choices": [{"index": index, "delta": piece, "finish_reason": finish}],
    }


TWO_STREAMED = [
    _choice_delta(0, "AAA"),
    _choice_delta(1, "BBB"),
    _choice_delta(0, " a2"),
    _choice_delta(1, " b2"),
    _choice_delta(0, None, "stop"),
    _choice_delta(1, None, "length"),
    {
        "id": "c-2",
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13},
    },
]


def _n_request() -> ChatRequest:
    return ChatRequest("m").user("hi").with_option_json("openai_compat", {"n": 2})


def _unread(count: int, preset: str) -> list[tuple[WarningKind, Any, str, str | None, str | None]]:
    message = UNREAD_SECOND.replace("2 choices", f"{count} choices")
    return [
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.OPTIONS),
            message,
            "first_choice_only",
            preset,
        )
    ]


def _told(response: ChatResponse) -> list[tuple[WarningKind, Any, str, str | None, str | None]]:
    return [(w.kind, w.subject, w.message, w.code, w.provider) for w in response.warnings]


@pytest.mark.parametrize("run_async", [False, True])
def test_a_second_choice_is_warned_of_and_kept(run_async: bool) -> None:
    target, recorder = provider("together", (200, TWO_CHOICES))
    request = _n_request()
    response = asyncio.run(target.achat(request)) if run_async else target.chat(request)
    assert recorder.bodies[0]["n"] == 2
    assert response.text() == "first"
    assert response.finish_reason == "stop"
    assert _told(response) == _unread(2, "together")
    assert response.provider_data == {
        "together": {"other_choices": [{"index": 1, "text": "second", "finish_reason": "length"}]}
    }


@pytest.mark.parametrize("run_async", [False, True])
def test_a_streams_second_choice_is_warned_of_and_kept(run_async: bool) -> None:
    target, _ = provider("vllm", (200, sse(*TWO_STREAMED)))
    request = _n_request()
    if run_async:

        async def read() -> ChatResponse:
            async with await target.achat_stream(request) as stream:
                async for _ in stream:
                    pass
                answer: ChatResponse = await stream.response()
                return answer

        response = asyncio.run(read())
    else:
        with target.chat_stream(request) as stream:
            for _ in stream:
                pass
            response = stream.response()
    assert response.text() == "AAA a2"
    assert response.finish_reason == "stop"
    assert _told(response) == _unread(2, "vllm")
    assert response.provider_data == {
        "vllm": {"other_choices": [{"index": 1, "text": "BBB b2", "finish_reason": "length"}]}
    }


def test_a_stream_without_its_end_marker_tells_its_other_choices_too() -> None:
    data = "".join(f"data: {json.dumps(p)}\n\n" for p in TWO_STREAMED).encode()
    response = collect(decode_stream(data, provider="vllm"))
    assert _told(response) == _unread(2, "vllm")
    assert response.provider_data["vllm"]["other_choices"] == [
        {"index": 1, "text": "BBB b2", "finish_reason": "length"}
    ]


def test_a_collected_stream_of_three_choices_equals_the_decoded_body() -> None:
    texts = {0: "zero", 1: "one", 2: "two"}
    body = {
        "id": "c-3",
        "model": "m",
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
            for i, t in texts.items()
        ],
    }
    chunks = [
        {"id": "c-3", "model": "m", "choices": [{"index": i, "delta": {"content": t}}]}
        for i, t in texts.items()
    ]
    chunks.append(
        {
            "id": "c-3",
            "model": "m",
            "choices": [{"index": i, "delta": {}, "finish_reason": "stop"} for i in texts],
        }
    )
    decoded = decode_body(json.dumps(body), provider="p")
    streamed = collect(decode_stream(sse(*chunks), provider="p"))
    assert _told(decoded) == _told(streamed) == _unread(3, "p")
    assert (
        decoded.provider_data
        == streamed.provider_data
        == {
            "p": {
                "other_choices": [
                    {"index": 1, "text": "one", "finish_reason": "stop"},
                    {"index": 2, "text": "two", "finish_reason": "stop"},
                ]
            }
        }
    )
    assert decoded.text() == streamed.text() == "zero"


# Another choice's tool calls and refusal are kept too, read as the first choice's are.

CALLING_CHOICES = {
    "id": "c-4",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"},
        {
            "index": 1,
            "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
            "finish_reason": "stop",
        },
        {
            "index": 2,
            "message": {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Zürich"}'},
                    },
                    {"type": "function", "function": {"name": "time", "arguments": "{}"}},
                ],
            },
            "finish_reason": "tool_calls",
        },
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 30, "total_tokens": 35},
}


def _choice_piece(index: int, piece: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """A chunk of one choice's delta `piece`, and its finish reason where one is given."""
    choice: dict[str, Any] = {"index": index, "delta": piece}
    if finish is not None:
        choice["finish_reason"] = finish
    return {"id": "c-4", "model": "m", "choices": [choice]}


def _call_piece(
    at: int, arguments: str, call_id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    function = {"arguments": arguments} | ({} if name is None else {"name": name})
    call = {"index": at, "function": function} | ({} if call_id is None else {"id": call_id})
    return {"tool_calls": [call | ({} if name is None else {"type": "function"})]}


CALLING_STREAMED = [
    _choice_piece(0, {"role": "assistant", "content": "A"}),
    _choice_piece(2, {"role": "assistant", "content": "Check"}),
    _choice_piece(1, {"role": "assistant", "refusal": "I can't"}),
    _choice_piece(2, {"content": "ing."}),
    _choice_piece(2, _call_piece(0, "", "call_a", "weather")),
    _choice_piece(0, {}, "stop"),
    _choice_piece(2, _call_piece(0, '{"city": ')),
    _choice_piece(1, {"refusal": " help."}),
    _choice_piece(2, _call_piece(1, "{", None, "time")),  # (no id: numbered as in a body)
    _choice_piece(2, _call_piece(0, '"Zürich"}')),
    _choice_piece(2, _call_piece(1, "}")),
    _choice_piece(1, {}, "stop"),
    _choice_piece(2, {}, "tool_calls"),
    {"id": "c-4", "model": "m", "choices": [], "usage": CALLING_CHOICES["usage"]},
]

CALLING_OTHERS = [
    {"index": 1, "text": "", "finish_reason": "stop", "refusal": "I can't help."},
    {
        "index": 2,
        "text": "Checking.",
        "finish_reason": "tool_calls",
        "tool_calls": [
            {"id": "call_a", "name": "weather", "arguments": '{"city": "Zürich"}'},
            {"id": "call_1", "name": "time", "arguments": "{}"},
        ],
    },
]


@pytest.mark.parametrize("how", ["whole", "streamed", "streamed_async"])
def test_another_choices_tool_calls_and_refusal_are_kept(how: str) -> None:
    answer = CALLING_CHOICES if how == "whole" else sse(*CALLING_STREAMED)
    target, _ = provider("openai", (200, answer))
    request = ChatRequest("gpt-4o").user("hi").with_option_json("openai_compat", {"n": 3})

    async def read_async() -> ChatResponse:
        async with await target.achat_stream(request) as stream:
            async for _ in stream:
                pass
            answer: ChatResponse = await stream.response()
            return answer

    if how == "whole":
        response = target.chat(request)
    elif how == "streamed":
        with target.chat_stream(request) as stream:
            for _ in stream:
                pass
            response = stream.response()
    else:
        response = asyncio.run(read_async())
    assert response.text() == "A"
    assert response.tool_calls() == ()
    assert _told(response) == _unread(3, "openai")
    assert response.provider_data == {"openai": {"other_choices": CALLING_OTHERS}}


def test_another_choices_call_named_late_and_its_legacy_call_are_kept_alike() -> None:
    """A name that comes after the arguments began, an id that comes late, and the
    deprecated `function_call`: read as the first choice's would be, in a body as streamed."""
    body = completion({"content": "A"})
    body["choices"].append(
        {
            "index": 1,
            "message": {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
                "function_call": {"name": "g", "arguments": '{"k": 1}'},
            },
            "finish_reason": "tool_calls",
        }
    )
    streamed = sse(
        _choice_piece(0, {"content": "A"}, "stop"),
        _choice_piece(1, {"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}),
        _choice_piece(1, {"tool_calls": [{"index": 0, "function": {"name": "f"}}]}),
        _choice_piece(
            1, {"tool_calls": [{"index": 0, "id": "call_x", "function": {"arguments": "}"}}]}
        ),
        _choice_piece(1, {"function_call": {"name": "g", "arguments": '{"k": '}}),
        _choice_piece(1, {"function_call": {"arguments": "1}"}}, "tool_calls"),
    )
    expected = [
        {
            "index": 1,
            "text": "",
            "finish_reason": "tool_calls",
            "tool_calls": [
                {"id": "call_x", "name": "f", "arguments": "{}"},
                {"id": "call_1", "name": "g", "arguments": '{"k": 1}'},
            ],
        }
    ]
    decoded = decode_body(json.dumps(body), provider="p")
    assert decoded.provider_data == {"p": {"other_choices": expected}}
    assert collect(decode_stream(streamed, provider="p")).provider_data == decoded.provider_data


_ARGUMENTS = ['{"city": "Zürich"}', "{}", '{"a": [1, 2], "b": null}', '{"q": "\\n ✓"}']


@st.composite
def _other_choices(draw: st.DrawFn) -> tuple[dict[str, Any], bytes, list[dict[str, Any]]]:
    """Choices after a first, each with text, a refusal and tool calls or none of them, as a
    body, as a stream of their deltas interleaved (each choice's pieces in order, the
    arguments of each call in pieces, every call's id there or not), and as the entries
    they are expected to give."""
    count = draw(st.integers(2, 4))
    pieces: list[list[dict[str, Any]]] = [[{"content": "first"}]]
    finishes: list[str | None] = ["stop"]
    choices: list[dict[str, Any]] = [
        {"index": 0, "message": {"role": "assistant", "content": "first"}, "finish_reason": "stop"}
    ]
    expected: list[dict[str, Any]] = []

    def split(text: str) -> list[str]:
        cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=3))))
        bounds = [0, *(c for c in cuts if c < len(text)), len(text)]
        return [text[a:b] for a, b in itertools.pairwise(bounds) if text[a:b]]

    for index in range(1, count):
        text = draw(st.sampled_from(["", "Sure.", "Voilà: ✓ done"]))
        refusal = draw(st.sampled_from(["", "I can't help with that."]))
        calls = draw(
            st.lists(
                st.tuples(
                    st.none() | st.sampled_from(["call_p", "call_q9"]),
                    st.sampled_from(["weather", "time_now"]),
                    st.sampled_from(_ARGUMENTS),
                ),
                max_size=3,
            )
        )
        calls = [
            (f"{call_id}{n}" if call_id else None, name, a)
            for n, (call_id, name, a) in enumerate(calls)
        ]
        finish = draw(st.sampled_from(["stop", "length", "tool_calls", None]))
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if refusal:
            message["refusal"] = refusal
        if calls:
            message["tool_calls"] = [
                {"type": "function", "function": {"name": name, "arguments": arguments}}
                | ({"id": call_id} if call_id else {})
                for call_id, name, arguments in calls
            ]
        choices.append({"index": index, "message": message, "finish_reason": finish})
        own: list[dict[str, Any]] = [{"content": piece} for piece in split(text)]
        own += [{"refusal": piece} for piece in split(refusal)]
        for at, (call_id, name, arguments) in enumerate(calls):
            parts = split(arguments)
            own.append(_call_piece(at, parts[0], call_id, name))
            own += [_call_piece(at, part) for part in parts[1:]]
        # Its first delta says its role (a choice says nothing else, where it has nothing).
        own[:1] = [{"role": "assistant", **(own[0] if own else {})}]
        pieces.append(own)
        finishes.append(finish)
        entry: dict[str, Any] = {"index": index, "text": text, "finish_reason": finish}
        if refusal:
            entry["refusal"] = refusal
        if calls:
            entry["tool_calls"] = [
                {"id": call_id or f"call_{at}", "name": name, "arguments": arguments}
                for at, (call_id, name, arguments) in enumerate(calls)
            ]
        expected.append(entry)
    # Interleaved: each choice's deltas in order, its finish after them.
    order = [index for index, own in enumerate(pieces) for _ in range(len(own) + 1)]
    order = draw(st.permutations(order))
    taken = [0] * count
    chunks = []
    for index in order:
        at = taken[index]
        taken[index] += 1
        if at < len(pieces[index]):
            chunks.append(_choice_piece(index, pieces[index][at]))
        elif finishes[index] is not None:
            chunks.append(_choice_piece(index, {}, finishes[index]))
    body = {"id": "c-4", "model": "m", "choices": choices}
    return body, sse(*chunks), expected


@settings(max_examples=150, deadline=None)
@given(case=_other_choices(), data=st.data())
def test_other_choices_streamed_and_split_anywhere_equal_the_body(
    case: tuple[dict[str, Any], bytes, list[dict[str, Any]]], data: st.DataObject
) -> None:
    body, raw, expected = case
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8), label="cuts"))
    decoder = ChatStreamDecoder(provider="p")
    events: list[StreamEvent] = []
    for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        events += decoder.feed(raw[start:end])
    events += decoder.close()
    streamed = collect(events)
    decoded = decode_body(json.dumps(body), provider="p")
    assert decoded.provider_data == {"p": {"other_choices": expected}}
    assert streamed.provider_data == decoded.provider_data
    assert streamed.text() == decoded.text() == "first"


def test_one_choice_says_nothing_of_others() -> None:
    response = decode_body(json.dumps(completion({"content": "ok"})), provider="p")
    assert response.warnings == () and response.provider_data == {}
    streamed = collect(decode_stream(sse(delta("ok"), delta(None, "stop")), provider="p"))
    assert streamed.warnings == () and streamed.provider_data == {}


# 9. Groq's 498 `capacity_exceeded` (its flex tier full): overloaded, to try again

CAPACITY = {
    "error": {
        "message": "Flex tier capacity exceeded. This is a temporary error due to high demand. "
        "Please try again later.",
        "type": "invalid_request_error",
        "code": "capacity_exceeded",
    }
}


def test_groqs_capacity_exceeded_is_a_retryable_overloaded_error() -> None:
    from allama.adapters.openai_compat import error_from_payload, error_from_response
    from allama.errors import OverloadedError

    found = error_from_response(498, {"retry-after": "3"}, json.dumps(CAPACITY), provider="groq")
    assert type(found) is OverloadedError
    assert found.retryable is True and found.retry_after == 3.0
    streamed = error_from_payload(CAPACITY, provider="groq")  # (in a stream: no status)
    assert type(streamed) is OverloadedError and streamed.retryable is True


@pytest.mark.parametrize("run_async", [False, True])
def test_groqs_capacity_exceeded_is_tried_again(run_async: bool) -> None:
    from allama.wrappers import RetryingProvider

    target, recorder = provider("groq", (498, CAPACITY), (200, completion({"content": "4"})))
    request = ChatRequest("llama-3.3-70b-versatile").user("2+2?")

    async def no_wait(seconds: float) -> None:
        return None

    retrying = RetryingProvider(target, sleep=lambda seconds: None, async_sleep=no_wait)
    response = asyncio.run(retrying.achat(request)) if run_async else retrying.chat(request)
    assert response.text() == "4"
    assert len(recorder.bodies) == 2


# 10. Groq's Llama 3.x takes no reasoning effort (Groq answers 400 to one)


@pytest.mark.parametrize("model", ["llama-3.3-70b-versatile", "llama-3.1-8b-instant"])
def test_groqs_llama_3_is_sent_no_reasoning_effort(model: str) -> None:
    target, recorder = provider("groq", (200, completion({"content": "ok"})))
    response = target.chat(ChatRequest(model, reasoning_effort="high").user("hi"))
    assert "reasoning_effort" not in recorder.bodies[0]
    assert [(w.kind, w.subject, w.message) for w in response.warnings] == [
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.REASONING_EFFORT),
            f"`{model}` on Groq takes no reasoning effort",
        )
    ]
    strict = ChatRequest(model, reasoning_effort="high").user("hi")
    with pytest.raises(UnsupportedError) as raised:
        target.chat(strict.with_unsupported_policy(allama.UnsupportedPolicy.ERROR))
    assert raised.value.field is RequestField.REASONING_EFFORT
    assert len(recorder.bodies) == 1  # (refused before sending)
    target.chat(ChatRequest(model, reasoning_effort="none").user("hi"))
    assert "reasoning_effort" not in recorder.bodies[1]


@pytest.mark.parametrize(
    ("model", "wire"),
    [
        ("qwen/qwen3-32b", "default"),
        ("openai/gpt-oss-120b", "high"),
    ],
)
def test_groqs_other_models_still_take_theirs(model: str, wire: str) -> None:
    target, recorder = provider("groq", (200, completion({"content": "ok"})))
    target.chat(ChatRequest(model, reasoning_effort="high").user("hi"))
    assert recorder.bodies[0]["reasoning_effort"] == wire


# 11. An Azure deployment taken for a reasoning model is asked for no log-probabilities

AZURE_V1 = "https://res.openai.azure.com/openai/v1"
TAKEN = (
    " at reasoning effort `high` (a deployment that names no model, asked for a reasoning "
    "effort, is taken for a reasoning model)"
)


def test_a_deployment_taken_for_a_reasoning_model_is_asked_for_no_logprobs() -> None:
    # Every OpenAI reasoning model answers 400 to `logprobs` at an effort other than `none`.
    target, recorder = provider(
        "azure-openai", (200, completion({"content": "ok"})), base_url=AZURE_V1
    )
    request = ChatRequest("prod", logprobs=3, reasoning_effort="high", temperature=0.5).user("hi")
    response = target.chat(request)
    assert recorder.bodies[0] == {
        "model": "prod",
        "messages": [{"role": "user", "content": "hi"}],
        "reasoning_effort": "high",
    }
    assert [(w.kind, w.subject, w.message) for w in response.warnings] == [
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.LOGPROBS),
            f"`prod` on Azure OpenAI reports no log-probabilities{TAKEN}",
        ),
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.TEMPERATURE),
            f"`prod` on Azure OpenAI takes no `temperature` other than 1{TAKEN}",
        ),
    ]
    # At effort `none` it takes both; without an effort it is not taken for one.
    for effort in ("none", None):
        target.chat(request.model_copy(update={"reasoning_effort": effort}))
        body = recorder.bodies[-1]
        assert (body["logprobs"], body["top_logprobs"], body["temperature"]) == (True, 3, 0.5)


# 12. OpenRouter's `require_parameters`, which a schema needs, is not given up silently

LLAMA = "meta-llama/llama-3.3-70b-instruct"
PERSON_FORMAT = allama.ResponseFormat.for_schema(
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, name="p"
)
NEEDS = (
    "was not sent: the request's schema needs `require_parameters: true`, or OpenRouter may "
    "route it to an upstream that ignores it"
)


def _routed(provider_option: Any, *, schema: bool = True) -> tuple[dict[str, Any], list[Any]]:
    target, recorder = provider("openrouter", (200, completion({"content": '{"a":"x"}'})))
    request = ChatRequest(LLAMA, response_format=PERSON_FORMAT if schema else None).user("json")
    request = request.with_option_json("openai_compat", {"provider": provider_option})
    response = target.chat(request)
    options = [
        (w.kind, w.message)
        for w in response.warnings
        if w.subject == FieldSubject(field=RequestField.OPTIONS)
    ]
    return recorder.bodies[0], options


def test_openrouter_says_it_sent_require_parameters_over_the_callers_false() -> None:
    body, options = _routed({"order": ["groq"], "require_parameters": False})
    assert body["provider"] == {"order": ["groq"], "require_parameters": True}
    assert options == [
        (
            WarningKind.UNSUPPORTED,
            "`require_parameters` of `provider` of the body option `openai_compat` (false) "
            f"{NEEDS}; `require_parameters: true` was sent",
        )
    ]
    # Without a schema, the caller's routing goes as given.
    body, options = _routed({"require_parameters": False}, schema=False)
    assert (body["provider"], options) == ({"require_parameters": False}, [])
    # Their own `true`, or none, is no loss.
    for routing in ({"order": ["groq"], "require_parameters": True}, {"order": ["groq"]}):
        body, options = _routed(routing)
        assert (body["provider"], options) == ({"order": ["groq"], "require_parameters": True}, [])


def test_openrouter_says_it_dropped_a_provider_that_is_no_object() -> None:
    body, options = _routed("groq")
    assert body["provider"] == {"require_parameters": True}
    assert options == [
        (
            WarningKind.UNSUPPORTED,
            '`provider` of the body option `openai_compat` ("groq") was not sent: it is not an '
            "object, and the request's schema needs `require_parameters: true`, or OpenRouter "
            'may route it to an upstream that ignores it; `{"require_parameters":true}` was sent',
        )
    ]


def test_openrouter_refuses_the_callers_false_before_sending_under_the_error_policy() -> None:
    target, recorder = provider("openrouter", (200, completion({"content": '{"a":"x"}'})))
    request = (
        ChatRequest(LLAMA, response_format=PERSON_FORMAT)
        .user("json")
        .with_option_json("openai_compat", {"provider": {"require_parameters": False}})
        .with_unsupported_policy(allama.UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request)
    assert raised.value.field is RequestField.OPTIONS
    assert recorder.bodies == []


def test_openrouters_responses_api_says_so_too() -> None:
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    answer = {"id": "r", "object": "response", "status": "completed", "model": "m"}
    target, recorder = provider(
        "openrouter", (200, {**answer, "output": [], "usage": usage}), api="responses"
    )
    request = ChatRequest("openai/gpt-5", response_format=PERSON_FORMAT).user("json")
    request = request.with_option_json(
        "openai_responses", {"provider": {"order": ["openai"], "require_parameters": False}}
    )
    response = target.chat(request)
    assert recorder.bodies[0]["provider"] == {"order": ["openai"], "require_parameters": True}
    options = FieldSubject(field=RequestField.OPTIONS)
    assert [w.message for w in response.warnings if w.subject == options] == [
        "`require_parameters` of `provider` of the body option `openai_responses` (false) "
        f"{NEEDS}; `require_parameters: true` was sent"
    ]


# A `stop` with tool calls is `tool_calls` (OpenAI answers a named `tool_choice` with
# `stop`), as Gemini's, Ollama's and the Responses API's stops with calls are read


PARIS_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
}

NAMED_STREAMED = [
    _choice_piece(0, {"role": "assistant", **_call_piece(0, "", "call_1", "weather")}),
    _choice_piece(0, _call_piece(0, '{"city": "Paris"}')),
    _choice_piece(0, {}, "stop"),
]


def _named_request() -> ChatRequest:
    return (
        ChatRequest("gpt-4.1")
        .user("Weather in Paris?")
        .with_tools([WEATHER])
        .with_tool_choice(allama.ToolChoice.tool("weather"))
    )


@pytest.mark.parametrize("how", ["whole", "streamed", "streamed_async"])
def test_a_named_choices_stop_with_its_call_is_tool_calls(how: str) -> None:
    answer = completion({"content": None, "tool_calls": [PARIS_CALL]}, "stop")
    target, recorder = provider("openai", (200, answer if how == "whole" else sse(*NAMED_STREAMED)))

    async def read_async() -> ChatResponse:
        async with await target.achat_stream(_named_request()) as stream:
            async for _ in stream:
                pass
            answer: ChatResponse = await stream.response()
            return answer

    if how == "whole":
        response = target.chat(_named_request())
    elif how == "streamed":
        with target.chat_stream(_named_request()) as stream:
            for _ in stream:
                pass
            response = stream.response()
    else:
        response = asyncio.run(read_async())
    assert recorder.bodies[0]["tool_choice"] == {
        "type": "function",
        "function": {"name": "weather"},
    }
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls() == (
        ToolCall(id="call_1", name="weather", arguments='{"city": "Paris"}'),
    )


@pytest.mark.parametrize(
    ("raw", "calls", "read"),
    [
        ("stop", [PARIS_CALL], "tool_calls"),
        ("eos", [PARIS_CALL], "tool_calls"),  # (Together's normal stop)
        ("tool_calls", [PARIS_CALL], "tool_calls"),
        ("stop", [], "stop"),
        ("length", [PARIS_CALL], "length"),
        ("content_filter", [PARIS_CALL], "content_filter"),
    ],
)
def test_only_a_normal_stop_with_calls_becomes_tool_calls(
    raw: str, calls: list[dict[str, Any]], read: str
) -> None:
    message: dict[str, Any] = {"content": None if calls else "Sunny."}
    if calls:
        message["tool_calls"] = calls
    whole = decode_body(json.dumps(completion(message, raw)))
    pieces: list[dict[str, Any]] = [_choice_piece(0, {"role": "assistant"})]
    if calls:
        pieces += NAMED_STREAMED[:2]
    else:
        pieces.append(_choice_piece(0, {"content": "Sunny."}))
    streamed = collect(decode_stream(sse(*pieces, _choice_piece(0, {}, raw))))
    assert (whole.finish_reason, streamed.finish_reason) == (read, read)
    assert streamed.tool_calls() == whole.tool_calls()


# 13. OpenAI's Chat Completions take tool-call ids of at most 40 characters; reasoning and
# a paused Anthropic turn's server tool blocks are not left out unannounced

XAI_IDS = (
    "call-8d42c1c4-e725-4592-b367-adc3f7ac24cb-0",  # xAI's (43 characters)
    "call-8d42c1c4-e725-4592-b367-adc3f7ac24cb-1",
)
VLLM_ID = "chatcmpl-tool-b59dc311dd914d3dbd6d455b122bc39c"  # vLLM's (46)


def _paris_call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="weather", arguments='{"city": "Paris"}')


def _wire_call(call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
    }


def _continued(request: ChatRequest, *ids: str) -> ChatRequest:
    request = request.assistant([_paris_call(call_id) for call_id in ids])
    for call_id in ids:
        request = request.tool_result(call_id, "Sunny")
    return request


def _sent(preset: str, request: ChatRequest, **options: Any) -> tuple[dict[str, Any], Any]:
    target, recorder = provider(preset, (200, completion({"content": "ok"})), **options)
    response = target.chat(request)
    return recorder.bodies[0], response.warnings


def test_openai_is_sent_another_providers_long_tool_call_ids_within_40_characters() -> None:
    # OpenAI answers 400 to a longer one: "Invalid 'messages[2].tool_calls[0].id': string
    # too long. Expected a string with maximum length 40" (`string_above_max_length`).
    request = _continued(ChatRequest("gpt-4.1").user("Weather?").with_tools([WEATHER]), *XAI_IDS)
    body, warnings = _sent("openai", request)
    first, second = "call_zjawFEc7a4Mkcz17m1zHmMCL", "call_UYmUZSqztRYxcCjThktRyaIp"
    assert body["messages"] == [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [_wire_call(first), _wire_call(second)]},
        {"role": "tool", "tool_call_id": first, "content": "Sunny"},
        {"role": "tool", "tool_call_id": second, "content": "Sunny"},
    ]
    assert warnings == ()
    # The same conversation is sent the same way every time (prompt caching).
    assert _sent("openai", request)[0] == body


def test_azure_openai_too_and_other_hosts_get_the_ids_as_they_are() -> None:
    request = _continued(ChatRequest("gpt-4.1").user("Weather?"), VLLM_ID, "call_short")
    body, _ = _sent("azure-openai", request, base_url="https://res.openai.azure.com/openai/v1")
    made = "call_PG0x5r6NtgZwK2Ef3XrSBCpA"
    assert body["messages"][1:] == [
        {"role": "assistant", "tool_calls": [_wire_call(made), _wire_call("call_short")]},
        {"role": "tool", "tool_call_id": made, "content": "Sunny"},
        {"role": "tool", "tool_call_id": "call_short", "content": "Sunny"},
    ]
    for preset in ("groq", "xai", "deepseek"):
        body, _ = _sent(preset, request)
        assert [m["tool_call_id"] for m in body["messages"][2:]] == [VLLM_ID, "call_short"]


def test_a_repeated_id_goes_as_it_is_and_a_long_one_repeated_gets_one_per_call() -> None:
    # Gemini's and Ollama's stand-ins restart in every response: OpenAI takes them.
    request = _continued(ChatRequest("gpt-4.1").user("Weather?"), "call_0", VLLM_ID)
    request = _continued(request.user("Again?"), "call_0", VLLM_ID)
    body, warnings = _sent("openai", request)
    first, again = "call_PG0x5r6NtgZwK2Ef3XrSBCpA", "call_sBJmEb5VVw2lsZykFOHqjChv"
    assert body["messages"][1:4] == [
        {"role": "assistant", "tool_calls": [_wire_call("call_0"), _wire_call(first)]},
        {"role": "tool", "tool_call_id": "call_0", "content": "Sunny"},
        {"role": "tool", "tool_call_id": first, "content": "Sunny"},
    ]
    assert body["messages"][5:] == [
        {"role": "assistant", "tool_calls": [_wire_call("call_0"), _wire_call(again)]},
        {"role": "tool", "tool_call_id": "call_0", "content": "Sunny"},
        {"role": "tool", "tool_call_id": again, "content": "Sunny"},
    ]
    assert warnings == ()


THINKING_TURN = (
    Reasoning(text="Call the tool first.", signature="EsYDCkYIBxgC", issuer="anthropic"),
    _paris_call("toolu_01"),
)
REASONING_LEFT_OUT = "reasoning was left out of the conversation"


def _thinking_request(model: str) -> ChatRequest:
    request = ChatRequest(model).user("Weather?").with_tools([WEATHER])
    return request.assistant(THINKING_TURN).tool_result("toolu_01", "Sunny")


@pytest.mark.parametrize(
    ("preset", "model", "display"),
    [
        ("openai", "gpt-5", "OpenAI"),
        ("groq", "openai/gpt-oss-120b", "Groq"),
        ("mistral", "magistral-medium-latest", "Mistral"),
    ],
)
def test_an_anthropic_turns_thinking_left_out_is_said(
    preset: str, model: str, display: str
) -> None:
    body, warnings = _sent(preset, _thinking_request(model))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool"]
    assert "Call the tool first." not in json.dumps(body)
    assert [(w.kind, w.subject, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            FieldSubject(field=RequestField.REASONING),
            f"{display} takes back no reasoning through Chat Completions; {REASONING_LEFT_OUT}",
        )
    ]


def test_reasoning_that_goes_back_is_not_said_to_be_left_out() -> None:
    # DeepSeek's `reasoning_content`, and OpenRouter's own `reasoning_details`.
    body, warnings = _sent("deepseek", _thinking_request("deepseek-reasoner"))
    assert body["messages"][1]["reasoning_content"] == "Call the tool first."
    assert warnings == ()
    details = [{"type": "reasoning.text", "text": "Call the tool first.", "index": 0}]
    turn = AssistantMessage(
        content=(Reasoning(text="Call the tool first."), _paris_call("call_1")),
        provider_data={"openrouter": {"reasoning_details": details}},
    )
    request = ChatRequest("openai/gpt-5").user("Weather?").push(turn).tool_result("call_1", "ok")
    body, warnings = _sent("openrouter", request)
    assert body["messages"][1]["reasoning_details"] == details
    assert warnings == ()
    # A turn without reasoning says nothing.
    body, warnings = _sent("openai", _continued(ChatRequest("gpt-5").user("Weather?"), "call_1"))
    assert warnings == ()


def test_an_endpoints_own_plain_reasoning_left_out_is_not_said_on_each_turn() -> None:
    # Groq's parsed reasoning (plain text, no signature) is never taken back: a tool loop
    # would otherwise be warned on every turn.
    turn = AssistantMessage(content=(Reasoning(text="Call the tool."), _paris_call("call_1")))
    request = ChatRequest("openai/gpt-oss-120b").user("Weather?").with_tools([WEATHER])
    body, warnings = _sent("groq", request.push(turn).tool_result("call_1", "Sunny"))
    assert "Call the tool." not in json.dumps(body)
    assert warnings == ()


@pytest.mark.parametrize(
    ("preset", "model", "field", "display"),
    [
        ("deepseek", "deepseek-reasoner", "reasoning_content", "DeepSeek"),
        ("ollama-openai", "qwen3", "reasoning", "Ollama's OpenAI-compatible endpoint"),
    ],
)
def test_encrypted_reasoning_with_no_text_left_out_where_text_goes_back_is_said(
    preset: str, model: str, field: str, display: str
) -> None:
    # Anthropic's redacted thinking beside its signed thinking; OpenAI's encrypted
    # reasoning without a summary.
    for blocks, text in (
        (
            (
                Reasoning(text="Call the tool first.", signature="EsYD", issuer="anthropic"),
                Reasoning(encrypted_content="ENCRYPTED", issuer="anthropic"),
            ),
            "Call the tool first.",
        ),
        ((Reasoning(signature="rs_1", encrypted_content="gAAA", issuer="openai"),), ""),
    ):
        turn = AssistantMessage(content=(*blocks, _paris_call("call_1")))
        request = ChatRequest(model).user("Weather?").with_tools([WEATHER])
        body, warnings = _sent(preset, request.push(turn).tool_result("call_1", "Sunny"))
        assert body["messages"][1][field] == text
        assert "ENCRYPTED" not in json.dumps(body) and "gAAA" not in json.dumps(body)
        assert [(w.kind, w.subject, w.message) for w in warnings] == [
            (
                WarningKind.APPROXIMATED,
                FieldSubject(field=RequestField.REASONING),
                f"{display} takes back reasoning as text alone; encrypted reasoning with no "
                "text was left out of the conversation",
            )
        ]
    # Reasoning with its text goes back without a word, signed or not.
    turn = AssistantMessage(content=(*THINKING_TURN[:1], _paris_call("call_1")))
    request = ChatRequest(model).user("Weather?").with_tools([WEATHER])
    body, warnings = _sent(preset, request.push(turn).tool_result("call_1", "Sunny"))
    assert body["messages"][1][field] == "Call the tool first."
    assert warnings == ()


PAUSED = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "Searching."},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "weather Paris"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://example.com/paris",
                    "title": "Paris",
                    "encrypted_content": "E1",
                }
            ],
        },
    ],
    "stop_reason": "pause_turn",
    "usage": {"input_tokens": 5, "output_tokens": 3},
}
SERVER_BLOCKS_LEFT_OUT = (
    "the server tool blocks of an Anthropic turn (a server tool's calls and results, in a "
    "finished turn, a paused one, or one whose code execution waits on tool calls) were left "
    "out: only Anthropic takes them back"
)


def paused_turn() -> AssistantMessage:
    """A turn Anthropic paused in its web search, as `to_assistant_message()` gives it."""
    target, _ = provider("anthropic", (200, PAUSED))
    return target.chat(ChatRequest("claude-sonnet-4-5").user("Weather?")).to_assistant_message()


def test_a_paused_anthropic_turns_server_blocks_left_out_are_said_once() -> None:
    turn = paused_turn()
    request = ChatRequest("gpt-4.1").user("Weather?").push(turn).user("Go on.")
    request = request.push(turn).user("Go on.")
    body, warnings = _sent("openai", request)
    assert body["messages"] == [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Searching."},
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": "Searching."},
        {"role": "user", "content": "Go on."},
    ]
    assert [(w.kind, w.subject, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            FieldSubject(field=RequestField.MESSAGES),
            SERVER_BLOCKS_LEFT_OUT,
        )
    ]
    # A finished turn carries no blocks to leave out.
    finished = turn.model_copy(update={"provider_data": {}})
    request = ChatRequest("gpt-4.1").user("Weather?").push(finished).user("Go on.")
    assert _sent("openai", request)[1] == ()


def test_a_finished_anthropic_search_turns_server_blocks_left_out_are_said() -> None:
    """Since a finished turn holding server tool blocks goes back whole to Anthropic too,
    the words name it beside a paused one."""
    finished = {**PAUSED, "content": [*PAUSED["content"], {"type": "text", "text": "Sunny."}]}
    anthropic, _ = provider("anthropic", (200, {**finished, "stop_reason": "end_turn"}))
    request = ChatRequest("claude-sonnet-4-5").user("Weather?")
    turn = anthropic.chat(request).to_assistant_message()
    body, warnings = _sent("openai", ChatRequest("gpt-4.1").user("Weather?").push(turn).user("Ok."))
    assert body["messages"][1] == {"role": "assistant", "content": "Searching.Sunny."}
    assert [(w.kind, w.subject, w.message) for w in warnings] == [
        (
            WarningKind.APPROXIMATED,
            FieldSubject(field=RequestField.MESSAGES),
            SERVER_BLOCKS_LEFT_OUT,
        )
    ]


# OpenAI's o-series take no `parallel_tool_calls`; a strict schema that falls back goes as given.

STRICT_GET = ToolDefinition(
    name="get",
    parameters={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    strict=True,
)
STRICT_GET_WIRE = {
    "type": "function",
    "function": {
        "name": "get",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


@pytest.mark.parametrize("model", ["o1", "o3", "o3-mini", "o4-mini", "o4-mini-2025-04-16"])
def test_o_series_are_sent_no_parallel_tool_calls_beside_a_strict_tool(model: str) -> None:
    # They answer 400 "Unsupported parameter: 'parallel_tool_calls' is not supported with
    # this model." to it, even `false` (langchain#29704, fast-agent#279).
    target, _ = provider("openai", (200, completion({"content": "ok"})))
    no = allama.CapabilitySupport.UNSUPPORTED
    assert target.chat_capability(model, allama.ChatCapability.PARALLEL_TOOL_CALLS) is no
    body, warnings = _sent("openai", ChatRequest(model).user("go").add_tool(STRICT_GET))
    assert body == {
        "model": model,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [STRICT_GET_WIRE],
    }
    assert warnings == ()


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5", "gpt-5-mini", "gpt-5.1"])
def test_other_models_still_get_parallel_tool_calls_false_beside_a_strict_tool(
    model: str,
) -> None:
    target, _ = provider("openai", (200, completion({"content": "ok"})))
    yes = allama.CapabilitySupport.SUPPORTED
    assert target.chat_capability(model, allama.ChatCapability.PARALLEL_TOOL_CALLS) is yes
    body, warnings = _sent("openai", ChatRequest(model).user("go").add_tool(STRICT_GET))
    assert body["tools"] == [STRICT_GET_WIRE]
    assert body["parallel_tool_calls"] is False
    assert warnings == ()


@pytest.mark.parametrize("parallel", [True, False])
def test_an_o_series_callers_parallel_tool_calls_is_left_out_with_a_warning(
    parallel: bool,
) -> None:
    request = ChatRequest("o3-mini").user("go").add_tool(STRICT_GET)
    body, warnings = _sent("openai", request.with_parallel_tool_calls(parallel))
    assert "parallel_tool_calls" not in body
    assert body["tools"] == [STRICT_GET_WIRE]
    assert [(w.kind, w.subject, w.message) for w in warnings] == [
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.PARALLEL_TOOL_CALLS),
            "`o3-mini` on OpenAI takes no `parallel_tool_calls`",
        )
    ]


def test_a_forced_tool_extraction_on_o4_mini_sends_no_parallel_tool_calls() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {
            "name": "submit_structured_output",
            "arguments": '{"name": "Ada", "age": 36}',
        },
    }
    answer = completion({"content": None, "tool_calls": [call]}, finish="tool_calls")
    target, recorder = provider("openai", (200, answer))
    request = ChatRequest("o4-mini").user("Ada, 36").with_option(ExtractionMode.FORCED_TOOL)
    extracted = allama.extract(target, Person, request)
    assert extracted.value == Person(name="Ada", age=36)
    assert extracted.response.warnings == ()
    assert "parallel_tool_calls" not in recorder.bodies[0]
    assert recorder.bodies[0]["tools"][0]["function"]["strict"] is True


ONE_OF_TWO = {
    "type": "object",
    "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
    "anyOf": [{"required": ["email"]}, {"required": ["phone"]}],
}
WITH_MAP = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
NOT_STRICT_REASONS = {
    "one_of_two": "the root at `/` is not an object, which OpenAI strict mode requires",
    "with_map": "the subschema at `/properties/tags` is a map, which OpenAI strict mode "
    "cannot enforce",
}


@pytest.mark.parametrize(("name", "schema"), [("one_of_two", ONE_OF_TWO), ("with_map", WITH_MAP)])
def test_a_strict_tool_openai_cannot_hold_goes_as_given_without_strict(
    name: str, schema: dict[str, Any]
) -> None:
    # Not its strict rewrite: a root `anyOf` with no object root (refused by OpenAI for any
    # function), or optional properties made required and nullable.
    tool = ToolDefinition(name="lookup", parameters=schema, strict=True)
    body, warnings = _sent("openai", ChatRequest("gpt-4.1").user("go").add_tool(tool))
    assert body["tools"] == [
        {"type": "function", "function": {"name": "lookup", "parameters": schema, "strict": False}}
    ]
    assert "parallel_tool_calls" not in body
    assert [(w.kind, w.subject, w.message) for w in warnings] == [
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.TOOLS),
            f"tool `lookup` is not strict-representable: {NOT_STRICT_REASONS[name]}; "
            "it goes without `strict`",
        )
    ]


@pytest.mark.parametrize(("name", "schema"), [("one_of_two", ONE_OF_TWO), ("with_map", WITH_MAP)])
def test_a_strict_response_format_openai_cannot_hold_goes_as_given_without_strict(
    name: str, schema: dict[str, Any]
) -> None:
    fmt = allama.ResponseFormat(type="json_schema", json_schema=schema, name="rec", strict=True)
    request = ChatRequest("gpt-4.1").user("go").with_response_format(fmt)
    body, warnings = _sent("openai", request)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "rec", "schema": schema, "strict": False},
    }
    assert [(w.kind, w.subject, w.message) for w in warnings] == [
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.RESPONSE_FORMAT),
            f"the response format `rec` is not strict-representable: {NOT_STRICT_REASONS[name]}; "
            "it goes without `strict`",
        )
    ]


# Tool results go in the order of the calls they answer: servers running an open model's
# chat template (Qwen's writes `<tool_response>` blocks with no id) pair them by position.


@pytest.mark.parametrize(
    ("preset", "options"),
    [
        ("openai", {}),
        ("vllm", {"base_url": "http://127.0.0.1:8000/v1"}),
        ("ollama-openai", {}),
        ("together", {}),
        ("deepinfra", {}),
    ],
)
def test_tool_results_given_out_of_order_go_in_the_order_of_the_calls(
    preset: str, options: dict[str, Any]
) -> None:
    paris = ToolCall.of("call_paris", "weather", {"city": "Paris"})
    rome = ToolCall.of("call_rome", "weather", {"city": "Rome"})
    request = (
        ChatRequest("m")
        .with_tools([WEATHER])
        .user("Paris and Rome?")
        .assistant([paris, rome])
        .tool_result(rome, "Rome: 30C")
        .tool_result(paris, "Paris: 12C")
        .user("And tomorrow?")
    )
    body, warnings = _sent(preset, request, **options)
    assert [(m["role"], m.get("tool_call_id")) for m in body["messages"]] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_paris"),
        ("tool", "call_rome"),
        ("user", None),
    ]
    assert [m["content"] for m in body["messages"][2:4]] == ["Paris: 12C", "Rome: 30C"]
    assert warnings == ()


# o1-mini and o1-preview answer 400 to a system or developer message ("Unsupported value:
# 'messages[0].role' does not support 'system' with this model", microsoft/agent-framework
# #1077; the same for 'developer', QuantumNous/new-api#847): their text, allama's own
# instructions among it, opens the first user turn.

MOVED = (
    "`{model}` on {display} takes no system or developer messages; the system instructions "
    "were put at the start of the first user turn"
)


def _moved(model: str, display: str = "OpenAI") -> tuple[WarningKind, FieldSubject, str]:
    return (
        WarningKind.APPROXIMATED,
        FieldSubject(field=RequestField.SYSTEM),
        MOVED.format(model=model, display=display),
    )


def _told_all(warnings: Iterable[Any]) -> list[tuple[WarningKind, Any, str]]:
    return [(w.kind, w.subject, w.message) for w in warnings]


@pytest.mark.parametrize("model", ["o1-mini", "o1-mini-2024-09-12", "o1-preview"])
def test_o1_mini_gets_its_system_and_developer_words_at_the_start_of_the_first_user_turn(
    model: str,
) -> None:
    request = ChatRequest(model).system("Be terse.").developer("Answer in French.").user("2+2?")
    for policy in (allama.UnsupportedPolicy.WARN, allama.UnsupportedPolicy.ERROR):
        # Nothing is lost, only moved: sent under the error policy too, as for Gemma.
        body, warnings = _sent("openai", request.with_unsupported_policy(policy))
        assert body == {
            "model": model,
            "messages": [{"role": "user", "content": "Be terse.\n\nAnswer in French.\n\n2+2?"}],
        }
        assert _told_all(warnings) == [_moved(model)]


def test_an_azure_o1_mini_deployment_too() -> None:
    request = ChatRequest("o1-mini").system("Be terse.").user("2+2?")
    body, warnings = _sent(
        "azure-openai", request, base_url="https://res.openai.azure.com/openai/v1"
    )
    assert body["messages"] == [{"role": "user", "content": "Be terse.\n\n2+2?"}]
    assert _told_all(warnings) == [_moved("o1-mini", "Azure OpenAI")]


def test_o1_minis_later_system_words_join_them_in_order_before_a_turn_of_parts() -> None:
    opening = allama.UserMessage(content=[TextPart(text="Look:"), TextPart(text="a cat")])
    request = (
        ChatRequest("o1-mini")
        .system("Be terse.")
        .push(opening)
        .assistant("A cat.")
        .system("Now in French.")
        .user("Again?")
    )
    body, warnings = _sent("openai", request)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Be terse.\n\nNow in French."},
                {"type": "text", "text": "Look:"},
                {"type": "text", "text": "a cat"},
            ],
        },
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "Again?"},
    ]
    assert _told_all(warnings) == [_moved("o1-mini")]


def test_o1_minis_system_words_alone_are_a_user_turn_and_an_empty_one_goes_unsaid() -> None:
    body, warnings = _sent("openai", ChatRequest("o1-mini").system("Say hi."))
    assert body["messages"] == [{"role": "user", "content": "Say hi."}]
    assert _told_all(warnings) == [_moved("o1-mini")]
    body, warnings = _sent("openai", ChatRequest("o1-mini").system("").user("Hi"))
    assert body["messages"] == [{"role": "user", "content": "Hi"}]
    assert warnings == ()
    with pytest.raises(InvalidRequestError) as caught:
        _sent("openai", ChatRequest("o1-mini").system(""))
    assert str(caught.value) == (
        "OpenAI needs at least one message, and the request has none left to send"
    )


@pytest.mark.parametrize("model", ["o1", "o3-mini", "gpt-4o"])
def test_other_openai_models_still_get_their_system_and_developer_messages(model: str) -> None:
    request = ChatRequest(model).system("Be terse.").developer("Answer in French.").user("2+2?")
    body, warnings = _sent("openai", request)
    assert body["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "2+2?"},
    ]
    assert warnings == ()


@pytest.mark.parametrize("run_async", [False, True])
def test_an_o1_mini_stream_gets_its_system_words_in_the_first_user_turn(run_async: bool) -> None:
    target, recorder = provider("openai", (200, sse(delta("4"), delta(None, "stop"))))
    request = ChatRequest("o1-mini").system("Be terse.").user("2+2?")
    if run_async:

        async def read() -> ChatResponse:
            async with await target.achat_stream(request) as stream:
                async for _ in stream:
                    pass
                answer: ChatResponse = await stream.response()
                return answer

        response = asyncio.run(read())
    else:
        with target.chat_stream(request) as stream:
            for _ in stream:
                pass
            response = stream.response()
    assert recorder.bodies[0] == {
        "model": "o1-mini",
        "messages": [{"role": "user", "content": "Be terse.\n\n2+2?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert response.text() == "4"
    assert _told_all(response.warnings) == [_moved("o1-mini")]


def test_a_decision_on_o1_mini_sends_its_options_in_the_first_user_turn() -> None:
    # The README's own prompt-only decision: the options went in a system message, and
    # o1-mini refused every such request.
    target, recorder = provider("openai", (200, completion({"content": "b"})))
    decision = allama.decide(target, Literal["a", "b"], ChatRequest("o1-mini").user("x"))
    assert decision.value == "b"
    assert recorder.bodies == [
        {
            "model": "o1-mini",
            "messages": [
                {
                    "role": "user",
                    "content": (
                        "Answer with exactly one of the options below, written exactly as it "
                        "is listed, and nothing else.\n\nOptions:\n- a\n- b\n\nx"
                    ),
                }
            ],
        }
    ]
    assert _moved("o1-mini") in _told_all(decision.response.warnings)


def test_o1_minis_json_mode_note_and_schema_go_in_the_first_user_turn_too() -> None:
    json_mode = (
        ChatRequest("o1-mini")
        .user("Give a")
        .with_response_format(allama.ResponseFormat(type="json"))
    )
    body, warnings = _sent("openai", json_mode)
    assert body == {
        "model": "o1-mini",
        "messages": [{"role": "user", "content": "Answer with one JSON object.\n\nGive a"}],
        "response_format": {"type": "json_object"},
    }
    assert _told_all(warnings) == [
        (
            WarningKind.APPROXIMATED,
            FieldSubject(field=RequestField.RESPONSE_FORMAT),
            'OpenAI takes JSON mode only when the messages ask for JSON; "Answer with one '
            'JSON object." was added to the system instructions',
        ),
        _moved("o1-mini"),
    ]
    target, recorder = provider("openai", (200, completion({"content": '{"name":"Ada","age":36}'})))
    request = (
        ChatRequest("o1-mini")
        .system("Be exact.")
        .user("Ada, 36")
        .with_option(ExtractionMode.NATIVE)
    )
    extracted = allama.extract(target, Person, request)
    assert extracted.value == Person(name="Ada", age=36)
    schema = json.dumps(Person.model_json_schema(), separators=(",", ":"))
    assert recorder.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": "Be exact.\n\nAnswer with one JSON object that follows this JSON "
            f"Schema:\n{schema}\n\nAda, 36",
        }
    ]
    assert recorder.bodies[0]["response_format"] == {"type": "json_object"}
    assert _moved("o1-mini") in _told_all(extracted.response.warnings)


@pytest.mark.parametrize("model", ["o1-mini", "o1-mini-2024-09-12", "o1-preview"])
def test_o1_mini_and_o1_preview_are_sent_no_reasoning_effort(model: str) -> None:
    # "o1-preview and o1-mini do not support reasoning effort as an input" (OpenAI's
    # community forum; dzhng/deep-research#89 left o1-mini out to stop the 400).
    body, warnings = _sent("openai", ChatRequest(model).user("hi").with_reasoning_effort("high"))
    assert "reasoning_effort" not in body
    assert [w.message for w in warnings] == [
        f"`{model}` on OpenAI takes no reasoning effort `high`"
    ]
    body, warnings = _sent("openai", ChatRequest("o1").user("hi").with_reasoning_effort("high"))
    assert body["reasoning_effort"] == "high" and warnings == ()


# OpenAI's audio answer (`modalities: ["text", "audio"]`): kept in `provider_data`, whole
# and streamed alike, and its id sent back on the assistant turn.

AUDIO_MODEL = "gpt-4o-audio-preview"
AUDIO_ID = "audio_abc123"
TRANSCRIPT = "Yes, golden retrievers are known to be gentle with children."
AUDIO_DATA = "UklGRi4AAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQoAAAA="
AUDIO = {"id": AUDIO_ID, "expires_at": 1729018505, "data": AUDIO_DATA, "transcript": TRANSCRIPT}
AUDIO_USAGE = {
    "prompt_tokens": 17,
    "completion_tokens": 180,
    "total_tokens": 197,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 166, "text_tokens": 14},
}
AUDIO_KEPT = {"openai": {"audio": AUDIO, "audio_tokens": {"output_audio_tokens": 166}}}


def _audio_request() -> ChatRequest:
    return (
        ChatRequest(AUDIO_MODEL)
        .user("Is a golden retriever a good family dog?")
        .with_option_json(
            "openai_compat", {"modalities": ["text", "audio"], "audio": {"voice": "alloy"}}
        )
    )


def _audio_body() -> dict[str, Any]:
    message = {"content": None, "refusal": None, "audio": AUDIO, "annotations": []}
    return completion(message, usage=AUDIO_USAGE)


def _audio_chunk(piece: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
    choices = [] if piece is None else [{"index": 0, "delta": piece, "finish_reason": finish}]
    return {"id": "c-1", "object": "chat.completion.chunk", "model": "m", "choices": choices}


def _audio_stream(pieces: list[dict[str, Any]]) -> bytes:
    first = {"role": "assistant", "content": None, "refusal": None}
    return sse(
        _audio_chunk(first),
        *(_audio_chunk({"audio": piece}) for piece in pieces),
        _audio_chunk({}, "stop"),
        {**_audio_chunk(None), "usage": AUDIO_USAGE},
    )


# As OpenAI streams it: the id on the first piece and again with the data, the transcript
# first, the data after, the expiry with the last.
AUDIO_PIECES = [
    {"id": AUDIO_ID, "transcript": TRANSCRIPT[:4]},
    {"transcript": TRANSCRIPT[4:30]},
    {"transcript": TRANSCRIPT[30:]},
    {"id": AUDIO_ID, "data": AUDIO_DATA[:20]},
    {"data": AUDIO_DATA[20:]},
    {"id": AUDIO_ID, "expires_at": 1729018505},
]


def test_an_audio_answer_is_kept_verbatim_and_its_transcript_is_no_text() -> None:
    target, recorder = provider("openai", (200, _audio_body()))
    response = target.chat(_audio_request())
    assert recorder.bodies[0]["modalities"] == ["text", "audio"]
    assert response.content == ()
    assert response.text() is None
    assert response.warnings == ()
    assert response.provider_data == AUDIO_KEPT


def test_a_streamed_audio_answer_is_joined_into_the_bodys_audio() -> None:
    target, _ = provider("openai", (200, _audio_stream(AUDIO_PIECES)))
    stream = target.chat_stream(_audio_request())
    events = list(stream)
    response = stream.response()
    assert response.content == ()
    assert response.warnings == ()
    assert response.provider_data == AUDIO_KEPT
    # Emitted once, at the finish, not with each of its (long) pieces.
    emitted = [
        event.value
        for event in events
        if isinstance(event, ProviderDataEvent) and event.key == "audio"
    ]
    assert emitted == [AUDIO]


@settings(max_examples=100, deadline=None)
@given(
    transcript_cuts=st.lists(st.integers(0, len(TRANSCRIPT)), max_size=5),
    data_cuts=st.lists(st.integers(0, len(AUDIO_DATA)), max_size=5),
    order=st.randoms(use_true_random=False),
    byte_cuts=st.lists(st.integers(0, 4000), max_size=8),
)
def test_audio_pieces_split_anyhow_collect_to_the_bodys_audio(
    transcript_cuts: list[int], data_cuts: list[int], order: Any, byte_cuts: list[int]
) -> None:
    def pieces(key: str, text: str, cuts: list[int]) -> list[dict[str, Any]]:
        points = sorted(set(cuts))
        spans = zip([0, *points], [*points, len(text)], strict=True)
        return [{key: text[a:b]} for a, b in spans]

    transcript = pieces("transcript", TRANSCRIPT, transcript_cuts)
    data = pieces("data", AUDIO_DATA, data_cuts)
    # Transcript and data pieces interleaved anyhow, each kind in its order; the id on the
    # first piece, the expiry on one of them.
    merged: list[dict[str, Any]] = []
    while transcript or data:
        source = transcript if not data or (transcript and order.random() < 0.5) else data
        merged.append(dict(source.pop(0)))
    merged[0]["id"] = AUDIO_ID
    merged[order.randrange(len(merged))]["expires_at"] = 1729018505
    stream = _audio_stream(merged)
    decoder = ChatStreamDecoder(provider="openai", model=AUDIO_MODEL)
    events: list[StreamEvent] = []
    last = 0
    for cut in sorted({min(cut, len(stream)) for cut in byte_cuts}):
        events.extend(decoder.feed(stream[last:cut]))
        last = cut
    events.extend(decoder.feed(stream[last:]))
    events.extend(decoder.close())
    body = decode_body(json.dumps(_audio_body()), provider="openai")
    assert collect(events).provider_data == body.provider_data == AUDIO_KEPT


def test_audio_pieces_after_the_finish_reason_are_still_joined() -> None:
    data = sse(
        _audio_chunk({"role": "assistant", "audio": {"id": AUDIO_ID, "transcript": "Yes."}}),
        _audio_chunk({}, "stop"),
        _audio_chunk({"audio": {"data": AUDIO_DATA, "expires_at": 1729018505}}),
    )
    response = collect(decode_stream(data, provider="openai"))
    audio = {"id": AUDIO_ID, "transcript": "Yes.", "data": AUDIO_DATA, "expires_at": 1729018505}
    assert response.provider_data == {"openai": {"audio": audio}}


@pytest.mark.parametrize("audio", [None, {}])
def test_no_audio_leaves_no_key(audio: Any) -> None:
    body = completion({"content": "Woof.", "audio": audio})
    assert decode_body(json.dumps(body), provider="openai").provider_data == {}
    streamed = sse(_audio_chunk({"content": "Woof.", "audio": audio}), _audio_chunk({}, "stop"))
    assert collect(decode_stream(streamed, provider="openai")).provider_data == {}


def test_an_audio_answer_goes_back_by_its_id_to_the_provider_that_gave_it() -> None:
    target, _ = provider("openai", (200, _audio_body()))
    answer = target.chat(_audio_request())
    turn = answer.to_assistant_message()
    assert turn.provider_data == {"openai": {"audio": answer.provider_data["openai"]["audio"]}}
    follow_up = _audio_request().push(turn).user("And for a small flat?")
    body, warnings = _sent("openai", follow_up)
    assert body["messages"] == [
        {"role": "user", "content": "Is a golden retriever a good family dog?"},
        {"role": "assistant", "audio": {"id": AUDIO_ID}},
        {"role": "user", "content": "And for a small flat?"},
    ]
    assert warnings == ()
    # Text beside it goes too; another provider is sent no id of OpenAI's.
    spoken = AssistantMessage(content=(TextPart(text="Woof."),), provider_data=AUDIO_KEPT)
    body, _ = _sent("openai", ChatRequest(AUDIO_MODEL).user("Bark?").push(spoken))
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "Woof.",
        "audio": {"id": AUDIO_ID},
    }
    request = ChatRequest("openai/gpt-4o-audio-preview").user("Bark?").push(spoken)
    body, _ = _sent("openrouter", request)
    assert body["messages"][1] == {"role": "assistant", "content": "Woof."}


# Each other choice's audio (`n` above 1) is kept in its `other_choices` entry, and a stream's
# `data` pieces, each base64 of its own (padding and all, as OpenAI's clients decode each
# piece), are joined into one base64 string of their bytes: whole and streamed alike.

SECOND_AUDIO_BYTES = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00second choice"
SECOND_AUDIO = {
    "id": "audio_def456",
    "expires_at": 1729018506,
    "data": base64.b64encode(SECOND_AUDIO_BYTES).decode(),
    "transcript": "Usually, yes.",
}


def _spoken(audio: bytes, size: int) -> list[str]:
    """`audio` as OpenAI streams `delta.audio.data`: each piece base64 of its own, padded."""
    return [base64.b64encode(audio[at : at + size]).decode() for at in range(0, len(audio), size)]


def _choices_chunk(pieces: dict[int, dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    choices = [
        {"index": index, "delta": piece, "finish_reason": finish} for index, piece in pieces.items()
    ]
    return {"id": "c-1", "object": "chat.completion.chunk", "model": "m", "choices": choices}


def _streamed_audio(pieces: list[dict[str, Any]]) -> Any:
    """The audio a stream of these `delta.audio` pieces is collected to."""
    response = collect(decode_stream(_audio_stream(pieces), provider="openai"))
    assert response.warnings == ()
    return response.provider_data["openai"]["audio"]


@pytest.mark.parametrize("run_async", [False, True])
def test_each_choices_audio_is_kept_whole_and_streamed_alike(run_async: bool) -> None:
    body = _audio_body()
    second = {"role": "assistant", "content": None, "refusal": None, "audio": SECOND_AUDIO}
    body["choices"].append({"index": 1, "message": second, "finish_reason": "stop"})
    second_id = SECOND_AUDIO["id"]
    second_pieces = [
        {"id": second_id, "transcript": "Usually, "},
        {"transcript": "yes."},
        *({"id": second_id, "data": piece} for piece in _spoken(SECOND_AUDIO_BYTES, 7)),
        {"id": second_id, "expires_at": 1729018506},
    ]
    first = {"role": "assistant", "content": None, "refusal": None}
    chunks = [_choices_chunk({0: first, 1: first})]
    for one, two in itertools.zip_longest(AUDIO_PIECES, second_pieces):
        pieces = {} if one is None else {0: {"audio": one}}
        chunks.append(_choices_chunk(pieces | ({} if two is None else {1: {"audio": two}})))
    chunks += [_choices_chunk({0: {}, 1: {}}, "stop"), {**_audio_chunk(None), "usage": AUDIO_USAGE}]
    target, _ = provider("openai", (200, body), (200, sse(*chunks)))
    request = _audio_request().with_option_json(
        "openai_compat", {"modalities": ["text", "audio"], "audio": {"voice": "alloy"}, "n": 2}
    )

    async def read_async() -> tuple[ChatResponse, ChatResponse]:
        whole = await target.achat(request)
        async with await target.achat_stream(request) as stream:
            async for _ in stream:
                pass
            streamed: ChatResponse = await stream.response()
        return whole, streamed

    if run_async:
        whole, streamed = asyncio.run(read_async())
    else:
        whole = target.chat(request)
        with target.chat_stream(request) as stream:
            for _ in stream:
                pass
            streamed = stream.response()
    entry = {"index": 1, "text": "", "finish_reason": "stop", "audio": SECOND_AUDIO}
    assert whole.provider_data == {"openai": {**AUDIO_KEPT["openai"], "other_choices": [entry]}}
    assert streamed.provider_data == whole.provider_data
    told = [w.message for w in streamed.warnings]
    assert told == [w.message for w in whole.warnings] == [UNREAD_SECOND]


def test_audio_pieces_each_base64_of_their_own_decode_whole_to_the_bodys_bytes() -> None:
    audio_bytes = base64.b64decode(AUDIO_DATA)
    data = _spoken(audio_bytes, 5)
    assert all(piece.endswith("=") for piece in data)  # (padded, each of them)
    pieces = [{"id": AUDIO_ID, "transcript": TRANSCRIPT}, *({"data": piece} for piece in data)]
    streamed = _streamed_audio([*pieces, {"expires_at": 1729018505}])
    assert streamed == AUDIO
    assert base64.b64decode(streamed["data"]) == audio_bytes
    two = [{"id": AUDIO_ID, "data": "QQ=="}, {"data": "Qg=="}]
    assert _streamed_audio(two) == {"id": AUDIO_ID, "data": "QUI="}  # (b"AB", not b"A")
    # Pieces that are no base64 of their own (one string cut anywhere, or no base64 at all)
    # are joined as given, all of them, and nothing else is said.
    for more, joined in [
        (["QUJD", "RA", "=="], "QUJDRA=="),
        (["not base64!"], "not base64!"),
        (["Qé=="], "Qé=="),
    ]:
        sent = [*two, *({"data": piece} for piece in more)]
        assert _streamed_audio(sent) == {"id": AUDIO_ID, "data": "QQ==Qg==" + joined}
    # A body's `data` is left as given, and so is a stream's single piece.
    verbatim = {"id": AUDIO_ID, "data": "QQ==Qg=="}
    body = completion({"content": None, "audio": verbatim})
    decoded = decode_body(json.dumps(body), provider="openai")
    assert decoded.provider_data == {"openai": {"audio": verbatim}}
    assert _streamed_audio([verbatim]) == verbatim


def test_audio_in_many_pieces_keeps_the_first_id_and_its_fields_where_first_given() -> None:
    audio_bytes = base64.b64decode(AUDIO_DATA)
    data = _spoken(audio_bytes, 4)
    assert len(data) == 11
    pieces = [
        {"id": AUDIO_ID, "transcript": TRANSCRIPT[:3]},
        {"transcript": TRANSCRIPT[3:10], "expires_at": None},
        {"data": data[0]},
        {"transcript": TRANSCRIPT[10:40]},
        *({"data": piece} for piece in data[1:]),
        {"transcript": TRANSCRIPT[40:]},
        # A later id takes no earlier one's place; a `null` field is filled by a later piece.
        {"id": "audio_later", "expires_at": 1729018505},
    ]
    decoder = ChatStreamDecoder(provider="openai", model=AUDIO_MODEL)
    events = [*decoder.feed(_audio_stream(pieces)), *decoder.close()]
    emitted = [e.value for e in events if isinstance(e, ProviderDataEvent) and e.key == "audio"]
    assert emitted == [AUDIO]
    assert list(emitted[0]) == ["id", "transcript", "expires_at", "data"]
    assert base64.b64decode(emitted[0]["data"]) == audio_bytes


def test_two_choices_audio_pieces_interleaved_join_each_on_its_own() -> None:
    first = {"role": "assistant", "content": None, "refusal": None}
    # The first choice's data cut anywhere (joined as strings), the second's pieces each
    # base64 of their own (joined as their bytes): each choice's pieces are its own.
    ones = [
        {"id": AUDIO_ID, "transcript": TRANSCRIPT[:20]},
        {"transcript": TRANSCRIPT[20:]},
        {"data": AUDIO_DATA[:9]},
        {"data": AUDIO_DATA[9:31]},
        {"data": AUDIO_DATA[31:], "expires_at": 1729018505},
    ]
    twos = [
        {"id": SECOND_AUDIO["id"], "transcript": "Usually,"},
        {"transcript": " yes."},
        *({"data": piece} for piece in _spoken(SECOND_AUDIO_BYTES, 5)),
        {"expires_at": 1729018506},
    ]
    chunks = [_choices_chunk({0: first, 1: first})]
    for one, two in itertools.zip_longest(ones, twos):
        pieces = {} if one is None else {0: {"audio": one}}
        chunks.append(_choices_chunk(pieces | ({} if two is None else {1: {"audio": two}})))
    chunks.append(_choices_chunk({0: {}, 1: {}}, "stop"))
    response = collect(decode_stream(sse(*chunks), provider="openai"))
    second = {
        "id": SECOND_AUDIO["id"],
        "transcript": "Usually, yes.",
        "data": SECOND_AUDIO["data"],
        "expires_at": 1729018506,
    }
    assert response.provider_data == {
        "openai": {
            "audio": {
                "id": AUDIO_ID,
                "transcript": TRANSCRIPT,
                "data": AUDIO_DATA,
                "expires_at": 1729018505,
            },
            "other_choices": [{"index": 1, "text": "", "finish_reason": "stop", "audio": second}],
        }
    }
    assert [w.message for w in response.warnings] == [UNREAD_SECOND]


# Reasoning efforts per model where the endpoint's set differs by model: Mistral's adjustable
# reasoning takes `none` or `high` alone (400 "Must be one of (none, high)") and its other
# models none at all; Grok 4.3 takes `none` to `high`, 4.20 multi-agent and 4.5 on `low` to
# `high` (no `none`); `deepseek-chat` thinks only where the body option turns thinking on,
# and an effort alone does nothing there.


def _effort_sent(
    preset: str, model: str, effort: str, *, api: str = "chat", option: Any = None
) -> tuple[Any, list[tuple[WarningKind, str]]]:
    """What goes for `effort` (`None`: nothing) and what is said of it, on `api`."""
    request = ChatRequest(model, reasoning_effort=effort).user("hi")
    if option is not None:
        request = request.with_option_json("openai_compat", option)
    target = allama.provider(preset, api_key="sk-test-efforts-1234", api=api)
    http, warnings = target._prepare(request, stream=False)
    body: dict[str, Any] = http.body
    reasoning = body.get("reasoning", {}) if api == "responses" else {}
    sent = reasoning.get("effort") if api == "responses" else body.get("reasoning_effort")
    said = [(w.kind, w.message) for w in warnings if w.is_about(RequestField.REASONING_EFFORT)]
    return sent, said


def _effort_refused_under_error(preset: str, model: str, effort: str, **options: Any) -> None:
    target, recorder = provider(preset, (200, completion({"content": "ok"})), **options)
    request = ChatRequest(model, reasoning_effort=effort).user("hi")
    with pytest.raises(UnsupportedError) as raised:
        target.chat(request.with_unsupported_policy(allama.UnsupportedPolicy.ERROR))
    assert raised.value.field is RequestField.REASONING_EFFORT
    assert recorder.bodies == []


MISTRAL_ADJUSTABLE = [
    "mistral-small-latest",
    "mistral-small-2603",
    "mistral-medium-latest",
    "mistral-medium-3-5",
    "magistral-small-latest",
]


@pytest.mark.parametrize("model", MISTRAL_ADJUSTABLE)
@pytest.mark.parametrize(
    ("effort", "wire", "approximated"),
    [
        ("none", "none", False),
        ("minimal", "high", True),
        ("low", "high", True),
        ("medium", "high", True),
        ("high", "high", False),
    ],
)
def test_mistrals_adjustable_reasoning_is_sent_none_or_high(
    model: str, effort: str, wire: str, approximated: bool
) -> None:
    said = f"`{model}` on Mistral takes no reasoning effort `{effort}`; `high` was sent"
    assert _effort_sent("mistral", model, effort) == (
        wire,
        [(WarningKind.APPROXIMATED, said)] if approximated else [],
    )


@pytest.mark.parametrize(
    "model",
    [
        "mistral-large-latest",
        "mistral-large-2411",
        "mistral-medium-2508",
        "codestral-latest",
        # Of no row: Mistral names its adjustable models one by one, the others answer 422.
        "mistral-small-2506",  # Small 3.2, and Small 1 below: older than Small 4 (2603)
        "mistral-small-2402",
        "open-mistral-nemo",
        "ministral-8b-latest",
        "pixtral-large-latest",
        "devstral-medium-latest",
    ],
)
def test_mistrals_models_without_reasoning_are_sent_no_effort(model: str) -> None:
    assert _effort_sent("mistral", model, "high") == (
        None,
        [(WarningKind.UNSUPPORTED, f"`{model}` on Mistral takes no reasoning effort")],
    )
    _effort_refused_under_error("mistral", model, "high")
    # Asked not to reason, it does as asked: nothing goes, nothing is said.
    assert _effort_sent("mistral", model, "none") == (None, [])


@pytest.mark.parametrize("effort", ["none", "low", "high"])
def test_magistral_medium_which_always_reasons_is_sent_no_effort(effort: str) -> None:
    model = "magistral-medium-latest"
    said = f"`{model}` on Mistral takes no reasoning effort `{effort}`"
    assert _effort_sent("mistral", model, effort) == (None, [(WarningKind.UNSUPPORTED, said)])
    _effort_refused_under_error("mistral", model, effort)


@pytest.mark.parametrize("model", ["mistral-large-4", "mistral-large-4-0"])
def test_mistral_large_4_which_takes_levels_of_effort_is_sent_its_effort_as_asked(
    model: str,
) -> None:
    assert _effort_sent("mistral", model, "medium") == ("medium", [])


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("model", "effort", "wire", "kind"),
    [
        ("grok-4.3", "none", "none", None),
        ("grok-4.3", "minimal", "low", WarningKind.APPROXIMATED),
        ("grok-4.3", "medium", "medium", None),
        ("grok-4.20-multi-agent", "none", None, WarningKind.UNSUPPORTED),
        ("grok-4.20-multi-agent-0309", "minimal", "low", WarningKind.APPROXIMATED),
        ("grok-4.20-multi-agent", "high", "high", None),
        ("grok-4.5", "none", None, WarningKind.UNSUPPORTED),
        ("grok-4.5", "minimal", "low", WarningKind.APPROXIMATED),
        ("grok-4.5", "low", "low", None),
        ("grok-4.5-latest", "medium", "medium", None),
        ("grok-4.6", "high", "high", None),
        ("grok-4.6", "none", None, WarningKind.UNSUPPORTED),
        ("grok-4.7", "minimal", "low", WarningKind.APPROXIMATED),
    ],
)
def test_grok_efforts_are_sent_in_each_models_set(
    api: str, model: str, effort: str, wire: str | None, kind: WarningKind | None
) -> None:
    said = f"`{model}` on xAI takes no reasoning effort `{effort}`"
    expected = {
        None: [],
        WarningKind.APPROXIMATED: [(kind, f"{said}; `{wire}` was sent")],
        WarningKind.UNSUPPORTED: [(kind, said)],
    }[kind]
    assert _effort_sent("xai", model, effort, api=api) == (wire, expected)


@pytest.mark.parametrize("model", ["grok-4.20-multi-agent", "grok-4.5"])
def test_grok_effort_none_is_refused_before_sending_under_error(model: str) -> None:
    _effort_refused_under_error("xai", model, "none")


def _outside_thinking(effort: str) -> str:
    return (
        f"`deepseek-chat` on DeepSeek takes no reasoning effort `{effort}` outside thinking "
        'mode, which `"thinking": {"type": "enabled"}` in the body option turns on'
    )


@pytest.mark.parametrize("effort", ["minimal", "low", "medium", "high"])
def test_deepseek_chat_is_sent_no_effort_without_thinking(effort: str) -> None:
    target, recorder = provider("deepseek", (200, completion({"content": "ok"})))
    response = target.chat(ChatRequest("deepseek-chat", reasoning_effort=effort).user("hi"))
    sent = recorder.bodies[0]
    assert ("reasoning_effort" in sent, "thinking" in sent) == (False, False)
    assert [(w.kind, w.subject, w.message) for w in response.warnings] == [
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.REASONING_EFFORT),
            _outside_thinking(effort),
        )
    ]
    _effort_refused_under_error("deepseek", "deepseek-chat", effort)
    # Thinking the body option turns off is off all the same.
    disabled = {"thinking": {"type": "disabled"}}
    assert _effort_sent("deepseek", "deepseek-chat", effort, option=disabled) == (
        None,
        [(WarningKind.UNSUPPORTED, _outside_thinking(effort))],
    )


@pytest.mark.parametrize(("effort", "wire"), [("low", "low"), ("high", "high")])
def test_deepseek_chat_takes_an_effort_where_the_body_option_turns_thinking_on(
    effort: str, wire: str
) -> None:
    enabled = {"thinking": {"type": "enabled"}}
    assert _effort_sent("deepseek", "deepseek-chat", effort, option=enabled) == (wire, [])


# A tool of no arguments: OpenAI answers 400 to an object root without `properties`
# (`invalid_function_parameters`, "object schema missing properties", gpt-5, gpt-5.4).

_BASE_URLS = {
    "vllm": "http://127.0.0.1:8000/v1",
    "openai-compatible": "https://llm.example.com/v1",
    "azure-openai": "https://res.openai.azure.com/openai/v1",
}


def _prepared(preset: str, request: ChatRequest) -> tuple[dict[str, Any], list[Any]]:
    options = {"base_url": _BASE_URLS[preset]} if preset in _BASE_URLS else {}
    made = allama.provider(preset, api_key="k", **options)
    http, warnings = made._prepare(request, stream=False)
    return http.body, [(w.kind, w.subject, w.message) for w in warnings]


NO_ARGUMENTS = {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    "preset", ["openai", "azure-openai", "groq", "mistral", "together", "vllm", "openai-compatible"]
)
def test_a_tool_of_no_arguments_goes_with_empty_properties(preset: str) -> None:
    request = ChatRequest("gpt-5").user("go").add_tool(ToolDefinition(name="now", description="d"))
    body, warnings = _prepared(preset, request)
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "now", "description": "d", "parameters": NO_ARGUMENTS},
        }
    ]
    assert warnings == []


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        (
            {"type": ["object"], "title": "Now"},
            {"type": "object", "title": "Now", "properties": {}},
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            {"type": "object", "additionalProperties": {"type": "string"}, "properties": {}},
        ),
        # `properties` given: the schema goes as it is.
        (WEATHER.parameters, WEATHER.parameters),
        ({}, {}),  # no object root: nothing to add to
    ],
)
def test_only_an_object_root_without_properties_is_given_empty_ones(
    given: dict[str, Any], sent: dict[str, Any]
) -> None:
    tool = ToolDefinition(name="f", parameters=given)
    body, warnings = _prepared("openai", ChatRequest("gpt-5").user("go").add_tool(tool))
    assert body["tools"] == [{"type": "function", "function": {"name": "f", "parameters": sent}}]
    assert warnings == []


# llama.cpp's converter reads `properties` without `additionalProperties` as an object closed
# to every other key (measured on the local engine: a free-form tool's call then wrote `{}`
# alone); it reads a bare object, or one beside `additionalProperties: true`, as open.

FREE_FORM = {"type": "object", "description": "Any JSON object."}


@pytest.mark.parametrize(
    ("preset", "sent"),
    [
        ("llama-cpp", {**FREE_FORM, "properties": {}, "additionalProperties": True}),
        ("openai", {**FREE_FORM, "properties": {}}),
        ("vllm", {**FREE_FORM, "properties": {}}),
    ],
)
def test_a_free_form_object_tool_stays_open_to_any_key_on_llama_cpp(
    preset: str, sent: dict[str, Any]
) -> None:
    tool = ToolDefinition(name="log_event", parameters=FREE_FORM)
    body, _ = _prepared(preset, ChatRequest("gpt-5").user("go").add_tool(tool))
    assert body["tools"] == [
        {"type": "function", "function": {"name": "log_event", "parameters": sent}}
    ]


@pytest.mark.parametrize(
    "given",
    [
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "additionalProperties": False},
        {"type": "object", "additionalProperties": True},
    ],
)
def test_on_llama_cpp_an_objects_own_additional_properties_is_kept_beside_empty_ones(
    given: dict[str, Any],
) -> None:
    # What other keys may be is already said: the converter reads it alike either way.
    tool = ToolDefinition(name="f", parameters=given)
    body, _ = _prepared("llama-cpp", ChatRequest("m").user("go").add_tool(tool))
    assert body["tools"][0]["function"]["parameters"] == {**given, "properties": {}}


STRICT_NO_ARGUMENTS = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
    "required": [],
}


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object"},  # `ToolDefinition`'s default
        {"type": "object", "description": "No arguments.", "additionalProperties": False},
        {"type": "object", "required": []},
    ],
)
@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-5"])
def test_a_strict_tool_of_no_arguments_goes_strict(parameters: dict[str, Any], model: str) -> None:
    # Not downgraded as "an object open to any keys": it names none, and allows none.
    tool = ToolDefinition(name="now", parameters=parameters, strict=True)
    body, warnings = _prepared("openai", ChatRequest(model).user("go").add_tool(tool))
    annotations = {k: v for k, v in parameters.items() if k == "description"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "now",
                "parameters": {**annotations, **STRICT_NO_ARGUMENTS},
                "strict": True,
            },
        }
    ]
    assert body["parallel_tool_calls"] is False
    assert warnings == []


@pytest.mark.parametrize(
    ("parameters", "why"),
    [
        ({"type": "object", "additionalProperties": True}, "is a map"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "is a map"),
        ({"type": "object", "minProperties": 1}, "is an object open to any keys"),
    ],
)
def test_a_strict_tool_open_to_keys_of_its_own_still_goes_without_strict(
    parameters: dict[str, Any], why: str
) -> None:
    tool = ToolDefinition(name="bag", parameters=parameters, strict=True)
    body, warnings = _prepared("openai", ChatRequest("gpt-5").user("go").add_tool(tool))
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "bag",
                "parameters": {**parameters, "properties": {}},
                "strict": False,
            },
        }
    ]
    assert warnings == [
        (
            WarningKind.UNSUPPORTED,
            FieldSubject(field=RequestField.TOOLS),
            f"tool `bag` is not strict-representable: the subschema at `/` {why}, which "
            "OpenAI strict mode cannot enforce; it goes without `strict`",
        )
    ]


# A refusal beside text in an assistant turn goes back, not left out.

MIXED = (TextPart(text="Part one. "), Refusal(text="I won't do part two."))


@pytest.mark.parametrize("preset", ["openai", "azure-openai"])
def test_a_refusal_beside_text_goes_in_the_refusal_field_where_the_api_has_one(
    preset: str,
) -> None:
    request = ChatRequest("gpt-4.1").user("x").assistant(list(MIXED)).user("why?")
    body, warnings = _prepared(preset, request)
    assert body["messages"] == [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "Part one. ", "refusal": "I won't do part two."},
        {"role": "user", "content": "why?"},
    ]
    assert warnings == []


@pytest.mark.parametrize("preset", ["groq", "mistral", "together", "vllm", "openai-compatible"])
def test_a_refusal_beside_text_goes_in_the_content_as_a_refusal_alone_does(preset: str) -> None:
    turns = [
        [*MIXED, TextPart(text=" Ask me again.")],
        [Refusal(text="I won't.")],  # as it went before
    ]
    request = ChatRequest("gpt-4.1").user("x").assistant(turns[0]).user("why?")
    body, warnings = _prepared(preset, request.assistant(turns[1]).user("sure?"))
    assistant = [m for m in body["messages"] if m["role"] == "assistant"]
    assert assistant == [
        {"role": "assistant", "content": "Part one. I won't do part two. Ask me again."},
        {"role": "assistant", "content": "I won't."},
    ]
    assert warnings == []


def test_a_refusal_without_text_goes_in_the_content_on_openai_too() -> None:
    call = ToolCall(id="call_1", name="weather", arguments="{}")
    request = (
        ChatRequest("gpt-4.1")
        .user("x")
        .assistant([Refusal(text="No.")])
        .user("then the weather")
        .assistant([Refusal(text="Only this."), call])
        .tool_result("call_1", "18C")
    )
    body, warnings = _prepared("openai", request)
    assert [m for m in body["messages"] if m["role"] == "assistant"] == [
        {"role": "assistant", "content": "No."},
        {
            "role": "assistant",
            "content": "Only this.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": "{}"},
                }
            ],
        },
    ]
    assert warnings == []
