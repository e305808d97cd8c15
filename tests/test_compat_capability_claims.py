"""What the OpenAI-compatible presets claim, held to what their providers document: Groq's
strict tools on GPT-OSS (enforcement unconfirmed: approximate), and DeepSeek's answer
interrupted for capacity (`insufficient_system_resource`: the provider's failure, not the
model's bad JSON)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import Recorder
from allama import ChatRequest, ExtractionMetadata, ExtractionMode, Extractor
from allama.errors import OverloadedError
from allama.types import FieldSubject, RequestField, WarningKind


class Person(BaseModel):
    name: str
    year: int


KEY = "sk-test-0123456789"


def made(preset: str, *answers: tuple[int, Any]) -> tuple[Any, Recorder]:
    recorder = Recorder(*answers)
    return allama.provider(preset, api_key=KEY, transport=recorder.transport()), recorder


def sse(*payloads: dict[str, Any]) -> bytes:
    return "".join(f"data: {json.dumps(p)}\n\n" for p in payloads).encode() + b"data: [DONE]\n\n"


# 1. Groq: a strict tool on GPT-OSS is approximate (Groq documents constrained decoding for
# GPT-OSS's `response_format`; which models enforce `function.strict` is unconfirmed)

GPT_OSS = ("openai/gpt-oss-120b", "openai/gpt-oss-20b")


def _unconfirmed_strict(model: str, subject: str) -> str:
    return (
        f"Groq does not say that it enforces `strict` on tools for `{model}`; {subject} was "
        "sent with it, and its arguments follow the schema as far as the model does"
    )


@pytest.mark.parametrize("model", GPT_OSS)
def test_groq_forced_tool_on_gpt_oss_is_approximate(model: str) -> None:
    target, recorder = made("groq", (200, {}))
    request = ChatRequest(model).user("Ada, 1843").with_option(ExtractionMode.FORCED_TOOL)
    plan = Extractor().plan(target, Person, request)
    assert plan.enforcement.value == "approximate"
    (warning,) = plan.degradations
    assert warning.kind is WarningKind.APPROXIMATED
    assert warning.subject == FieldSubject(field=RequestField.TOOLS)
    assert warning.message == _unconfirmed_strict(model, "the schema of `Person`")
    assert recorder.bodies == []


@pytest.mark.parametrize("model", GPT_OSS)
def test_groq_gpt_oss_extraction_by_forced_tool_records_approximate(model: str) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {
            "name": "submit_structured_output",
            "arguments": '{"name": "Ada", "year": 1843}',
        },
    }
    answer = {
        "id": "c-1",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    target, recorder = made("groq", (200, answer))
    request = ChatRequest(model).user("Ada, 1843").with_option(ExtractionMode.FORCED_TOOL)
    result = allama.extract(target, Person, request)
    assert result.value == Person(name="Ada", year=1843)
    assert result.metadata.enforcement.value == "approximate"
    told = _unconfirmed_strict(model, "tool `submit_structured_output`")
    assert [w.message for w in result.response.warnings] == [told]
    # `strict` still goes out: where Groq does enforce it, nothing is lost.
    assert recorder.bodies[0]["tools"][0]["function"]["strict"] is True


def test_groq_streamed_auto_extraction_on_gpt_oss_falls_to_an_approximate_tool() -> None:
    # Groq streams no JSON Schema output: auto mode streams the forced tool instead.
    target, _ = made("groq", (200, {}))
    plan = Extractor().plan(
        target, Person, ChatRequest("openai/gpt-oss-120b").user("x"), stream=True
    )
    assert plan.mode is ExtractionMode.FORCED_TOOL
    assert plan.enforcement.value == "approximate"


# 2. DeepSeek's `insufficient_system_resource`: its servers stopped the answer for lack of
# capacity. A retryable overloaded error naming that reason, its usage kept; never a parse
# failure repaired by a turn that blames the model.

INTERRUPTED_MESSAGE = (
    "the provider interrupted the answer for lack of capacity (finish reason "
    "`insufficient_system_resource`), not at the output token limit"
)
CUT_CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "submit_structured_output", "arguments": '{"name": "Ad'},
}
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _interrupted(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "c-1",
        "model": "deepseek-chat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **message},
                "finish_reason": "insufficient_system_resource",
            }
        ],
        "usage": USAGE,
    }


def _is_the_interruption(error: OverloadedError) -> None:
    assert str(error) == INTERRUPTED_MESSAGE
    assert error.retryable is True
    assert error.context.provider == "deepseek"
    assert error.context.body is not None
    assert '"insufficient_system_resource"' in error.context.body


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        (ExtractionMode.FORCED_TOOL, {"content": None, "tool_calls": [CUT_CALL]}),
        (ExtractionMode.NATIVE, {"content": '{"name": "Ad'}),
    ],
)
def test_deepseek_interrupted_extraction_is_an_overloaded_error_not_repaired(
    mode: ExtractionMode, message: dict[str, Any]
) -> None:
    target, recorder = made("deepseek", (200, _interrupted(message)))
    request = ChatRequest("deepseek-chat").user("Ada, 1843, as JSON").with_option(mode)
    with pytest.raises(OverloadedError) as raised:
        Extractor(retries=1, repair=True).extract(target, Person, request)
    _is_the_interruption(raised.value)
    assert len(recorder.bodies) == 1  # no "fix your JSON" turn
    record = ExtractionMetadata.from_error(raised.value)
    assert record.usage is not None
    assert (record.usage.input_tokens, record.usage.output_tokens) == (10, 5)


def test_deepseek_interrupted_chat_raises_the_overloaded_error() -> None:
    target, _ = made("deepseek", (200, _interrupted({"content": "Ada was b"})))
    with pytest.raises(OverloadedError) as raised:
        target.chat(ChatRequest("deepseek-chat").user("x"))
    _is_the_interruption(raised.value)


def test_deepseek_interrupted_stream_is_the_same_error_with_its_usage() -> None:
    chunks = sse(
        {
            "id": "c-1",
            "model": "deepseek-chat",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "tool_calls": [{"index": 0, **CUT_CALL}]},
                    "finish_reason": None,
                }
            ],
        },
        {
            "id": "c-1",
            "model": "deepseek-chat",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "insufficient_system_resource"}],
            "usage": USAGE,
        },
    )
    target, recorder = made("deepseek", (200, chunks))
    request = ChatRequest("deepseek-chat").user("x").with_option(ExtractionMode.FORCED_TOOL)
    with (
        pytest.raises(OverloadedError) as raised,
        Extractor(retries=1).extract_stream(target, Person, request) as stream,
    ):
        stream.finish()
    assert str(raised.value) == INTERRUPTED_MESSAGE
    assert raised.value.retryable is True
    assert len(recorder.bodies) == 1
    record = ExtractionMetadata.from_error(raised.value)
    assert record.usage is not None
    assert (record.usage.input_tokens, record.usage.output_tokens) == (10, 5)


# 3. DeepSeek V4 thinks by default, where `temperature` and `top_p` have no effect: left out
# with a warning, as on `deepseek-reasoner`, unless the body option turns thinking off.


def _no_effect(model: str, field: str) -> str:
    return (
        f"`{model}` on DeepSeek takes no `{field}` other than 1 in thinking mode, its default "
        '(to use it, turn thinking off: `"thinking": {"type": "disabled"}` in the body option)'
    )


@pytest.mark.parametrize("model", ["deepseek-v4-pro", "deepseek-v4-flash"])
def test_deepseek_v4_sampling_is_left_out_unless_thinking_is_off(model: str) -> None:
    answer = {
        "id": "c-1",
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": USAGE,
    }
    target, recorder = made("deepseek", (200, answer))
    request = ChatRequest(model, temperature=0.2, top_p=0.5).user("hello")
    thinking = target.chat(request)
    assert "temperature" not in recorder.bodies[0]
    assert "top_p" not in recorder.bodies[0]
    assert [(w.kind, w.message) for w in thinking.warnings] == [
        (WarningKind.UNSUPPORTED, _no_effect(model, "temperature")),
        (WarningKind.UNSUPPORTED, _no_effect(model, "top_p")),
    ]
    off = request.with_option_json("openai_compat", {"thinking": {"type": "disabled"}})
    plain = target.chat(off)
    assert (recorder.bodies[1]["temperature"], recorder.bodies[1]["top_p"]) == (0.2, 0.5)
    assert recorder.bodies[1]["thinking"] == {"type": "disabled"}
    assert plain.warnings == ()
