"""Workers AI's tools and its error envelope, and DeepSeek's strict-tool subset under its own
name.

- Workers AI's tools on its OpenAI-compatible endpoint are unconfirmed
  (providers-openai-family.md, section 14): its table answers them unknown, as its profile
  sends them, so a streamed auto extraction's forced tool is what plan, request and record
  all say. Where a caller's answers rule a forced tool out, the stream's fallback does not
  take one (as `select_mode` would not): the native pass goes on, the schema in words.
- Cloudflare's envelope `{"success": false, "errors": [{code, message}]}` is read for its
  message, and under HTTP 200 classified as the status its code documents (3036, the daily
  free allocation used up: 429, a spent quota).
- DeepSeek's strict tools (its beta base URL) are named DeepSeek's in their warnings.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import pydantic
import pytest

import allama
from _recording import Recorder
from allama import (
    CapabilityOverrideProvider,
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ExtractionMode,
    Extractor,
    RequestField,
    SchemaEnforcement,
)
from allama.schema._dialects._openai_strict import openai_strict

MODEL = "@cf/meta/llama-3.1-8b-instruct"
ANSWER = {"name": "Ada", "year": 1843}
NOT_ON_STREAMS = "Cloudflare Workers AI has no JSON mode on streamed responses"
IN_WORDS = "the schema was written into the instructions, where nothing enforces it"


class Person(pydantic.BaseModel):
    name: str
    year: int


def _stream(delta: dict[str, Any], finish: str) -> bytes:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"role": "assistant", **delta}, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()


TEXT_STREAM = _stream({"content": json.dumps(ANSWER)}, "stop")
TOOL_STREAM = _stream(
    {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "submit_structured_output", "arguments": json.dumps(ANSWER)},
            }
        ]
    },
    "tool_calls",
)


def provider(preset: str, *answers: tuple[int, Any], **options: Any) -> tuple[Any, Recorder]:
    """A preset on a recording endpoint, with a key no message's words contain (a key's
    letters are withheld from what the provider says)."""
    recorder = Recorder(*answers)
    key = "sk-test-0123456789"
    return allama.provider(preset, api_key=key, transport=recorder.transport(), **options), recorder


def _workers_ai(*answers: tuple[int, Any]) -> tuple[Any, Recorder]:
    return provider("workers-ai", *answers, account_id="acc")


def _streamed(target: Any) -> allama.Extracted[Person]:
    with allama.extract_stream(target, Person, ChatRequest(MODEL).user("Ada, 1843")) as stream:
        for _ in stream:
            pass
        return stream.finish()


# Workers AI: tools unconfirmed, and the stream's fallback as `select_mode` decides


def test_workers_ai_tools_and_a_forced_tool_are_unknown_not_unsupported() -> None:
    target, _ = _workers_ai((200, TEXT_STREAM))
    answers = [
        target.chat_capability(MODEL, capability)
        for capability in (
            ChatCapability.TOOL_CALLS,
            ChatCapability.FORCED_TOOL_CHOICE,
            ChatCapability.PARALLEL_TOOL_CALLS,
        )
    ]
    assert answers == [CapabilitySupport.UNKNOWN] * 3


def test_a_streamed_auto_extraction_on_workers_ai_plans_sends_and_records_one_forced_tool() -> None:
    target, recorder = _workers_ai((200, TOOL_STREAM))
    request = ChatRequest(MODEL).user("Ada, 1843")
    assert (
        target.chat_capability(MODEL, ChatCapability.FORCED_TOOL_CHOICE)
        is CapabilitySupport.UNKNOWN
    )
    planned = Extractor().plan(target, Person, request, stream=True)
    assert planned.mode is ExtractionMode.FORCED_TOOL
    assert planned.auto_fallback is not None
    assert planned.auto_fallback.field is RequestField.RESPONSE_FORMAT
    assert planned.auto_fallback.message == NOT_ON_STREAMS
    assert planned.notes == ()
    extracted = _streamed(target)
    assert extracted.value == Person(**ANSWER)
    record = extracted.metadata
    assert (record.mode, record.passes, record.notes) == (ExtractionMode.FORCED_TOOL, 1, [])
    assert record.auto_fallback == planned.auto_fallback
    assert record.enforcement is planned.enforcement is SchemaEnforcement.NOT_ENFORCED
    (body,) = recorder.bodies
    assert "response_format" not in body
    assert body["tool_choice"] == {
        "type": "function",
        "function": {"name": "submit_structured_output"},
    }


@pytest.mark.parametrize(
    "ruled_out", [ChatCapability.FORCED_TOOL_CHOICE, ChatCapability.TOOL_CALLS]
)
def test_a_streamed_auto_extraction_takes_no_tool_the_answers_rule_out(
    ruled_out: ChatCapability,
) -> None:
    """A caller who knows the model cannot be forced to call a tool (or calls none) gets
    what `select_mode` would give: no forced tool, but the native pass with the schema in
    its instructions, as planned."""
    inner, recorder = _workers_ai((200, TEXT_STREAM))
    target = CapabilityOverrideProvider(inner, {ruled_out: CapabilitySupport.UNSUPPORTED})
    planned = Extractor().plan(target, Person, ChatRequest(MODEL).user("Ada, 1843"), stream=True)
    assert (planned.mode, planned.auto_fallback) == (ExtractionMode.NATIVE, None)
    assert planned.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [w.message for w in planned.degradations] == [NOT_ON_STREAMS, IN_WORDS]
    extracted = _streamed(target)
    assert extracted.value == Person(**ANSWER)
    record = extracted.metadata
    assert (record.mode, record.passes, record.auto_fallback) == (ExtractionMode.NATIVE, 1, None)
    assert [w.message for w in record.degradations] == [NOT_ON_STREAMS, IN_WORDS]
    (body,) = recorder.bodies
    assert not {"tools", "tool_choice", "response_format"} & body.keys()
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith(
        "Answer with one JSON object that follows this JSON Schema:\n"
    )

    async def run() -> allama.Extracted[Person]:
        request = ChatRequest(MODEL).user("Ada, 1843")
        async with allama.aextract_stream(target, Person, request) as stream:
            async for _ in stream:
                pass
            return await stream.finish()

    done = asyncio.run(run())
    assert (done.value, done.metadata.mode) == (Person(**ANSWER), ExtractionMode.NATIVE)
    assert "tools" not in recorder.bodies[1]


# Cloudflare's error envelope

DAILY = (
    "you have used up your daily free allocation of 10,000 neurons, please upgrade to "
    "Cloudflare's Workers Paid plan"
)


def _envelope(code: int, message: str) -> dict[str, Any]:
    return {"result": None, "success": False, "errors": [{"code": code, "message": message}]}


def _failure(status: int, body: dict[str, Any], *, stream: bool = False) -> allama.Error:
    target, _ = _workers_ai((status, body))
    request = ChatRequest(MODEL).user("x")
    with pytest.raises(allama.Error) as caught:
        if stream:
            with target.chat_stream(request) as events:
                list(events)
        else:
            target.chat(request)
    return caught.value


@pytest.mark.parametrize("code", [3036, 4006])
@pytest.mark.parametrize("status", [429, 200])
def test_the_daily_allocation_is_a_spent_quota_under_any_status(status: int, code: int) -> None:
    error = _failure(status, _envelope(code, DAILY))
    assert isinstance(error, allama.QuotaExceededError)
    assert (error.message, error.retryable) == (DAILY, False)
    assert error.context.status == (429 if status == 429 else None)
    assert error.context.body == json.dumps(_envelope(code, DAILY))


def test_the_daily_allocation_ends_a_stream_as_a_spent_quota() -> None:
    error = _failure(200, _envelope(3036, "Account limited"), stream=True)
    assert isinstance(error, allama.QuotaExceededError)
    assert (error.message, error.retryable) == ("Account limited", False)


def test_an_envelope_under_http_200_is_classified_by_its_documented_code() -> None:
    cases = [
        (_envelope(3042, "The model name is invalid"), allama.NotFoundError, False),
        (_envelope(3007, "Request timeout"), allama.RequestTimeoutError, True),
        (_envelope(5007, "No such model @cf/x or task"), allama.InvalidRequestError, False),
        # 3040 is seen for JSON mode not met as well as for capacity: tried again.
        (_envelope(3040, "No more data centers"), allama.ServerError, True),
    ]
    for body, kind, retryable in cases:
        error = _failure(200, body)
        assert type(error) is kind
        assert (error.message, error.retryable) == (body["errors"][0]["message"], retryable)


def test_an_envelope_with_an_error_status_gives_its_message() -> None:
    words = "AiError: Bad input: Type mismatch of '/messages/0/content'"
    error = _failure(400, _envelope(5006, words))
    assert isinstance(error, allama.InvalidRequestError)
    assert (error.message, error.retryable, error.context.status) == (words, False, 400)


# DeepSeek's strict tools


class Dated(pydantic.BaseModel):
    when: Annotated[str, pydantic.Field(json_schema_extra={"format": "date"})]


def test_deepseek_strict_tools_are_named_deepseeks() -> None:
    target, _ = provider("deepseek", (200, {}), base_url="https://api.deepseek.com/beta")
    request = ChatRequest("deepseek-chat").user("x").with_option(ExtractionMode.FORCED_TOOL)
    planned = Extractor().plan(target, Dated, request)
    assert [w.message for w in planned.degradations] == [
        "the schema of `Dated` was approximated: `format` was removed at `Dated.when`: "
        "DeepSeek strict mode does not enforce `date`"
    ]


def test_deepseek_strict_mode_keeps_azures_older_subset_and_says_its_limits_are_assumed() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x$"}}}
    deepseek = openai_strict(schema, profile="deepseek")
    assert deepseek.schema == openai_strict(schema, profile="azure_legacy").schema
    wide = {
        "type": "object",
        "properties": {f"p{n}": {"type": "integer"} for n in range(101)},
    }
    (note,) = openai_strict(wide, profile="deepseek").notes
    assert note.message == (
        "the schema at `/` has 101 object properties, more than the 100 Azure OpenAI "
        "strict mode allows, a limit assumed for DeepSeek strict mode, which documents none"
    )
