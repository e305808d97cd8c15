"""Chat Completions answers of unusual shape, read alike in a body and in a stream: Ollama's
parallel calls all on index 0, a call's id that comes late, xAI's finish reason `""`, and a
call of a `custom` tool (OpenAI's free-text tools, given through the body option)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

import pytest

import allama
from _recording import provider
from allama import ChatRequest
from allama.adapters.openai_compat._decode import decode_body
from allama.adapters.openai_compat._sse import decode_stream
from allama.errors import REPORTED_USAGE_KEY, IncompleteStreamError, ServerError
from allama.extract import RefusedError
from allama.stream import StreamCollector
from allama.types import (
    BlockStart,
    ChatResponse,
    FinishReason,
    Reasoning,
    Refusal,
    StreamBlockType,
    StreamEvent,
    TextPart,
    ToolCall,
    Usage,
)

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def sse(*payloads: dict[str, Any], done: bool = True) -> bytes:
    text = "".join(f"data: {json.dumps(p)}\n\n" for p in payloads)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-1", "model": "m", "choices": choices, **extra}


def body(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": USAGE,
    }


def collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def streamed(preset: str, data: bytes, **options: Any) -> ChatResponse:
    target, _ = provider(preset, (200, data), **options)
    response: ChatResponse = target.chat_stream(ChatRequest("m").user("x")).response()
    return response


# 1. Ollama's /v1 sends each of several calls whole, every one with index 0 (ollama#15457)

OLLAMA_CALLS = [
    ("call_a", '{"filePath":"hello.py","content":"print(1)"}'),
    ("call_b", '{"filePath":"world.py","content":"print(2)"}'),
]
OLLAMA_STREAM = sse(
    chunk({"role": "assistant", "content": ""}),
    *[
        chunk(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "index": 0,
                        "type": "function",
                        "function": {"name": "file_write", "arguments": arguments},
                    }
                ],
            }
        )
        for call_id, arguments in OLLAMA_CALLS
    ],
    chunk({"role": "assistant", "content": ""}, "tool_calls"),
    chunk(None, usage=USAGE),
)


def test_ollama_calls_on_one_index_stream_as_calls_of_their_own() -> None:
    expected = (
        ToolCall(id="call_a", name="file_write", arguments=OLLAMA_CALLS[0][1]),
        ToolCall(id="call_b", name="file_write", arguments=OLLAMA_CALLS[1][1]),
    )
    response = streamed("ollama-openai", OLLAMA_STREAM)
    assert response.content == expected
    assert response.finish_reason == FinishReason.TOOL_CALLS
    whole = body(
        {
            "content": "",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "file_write", "arguments": a}}
                for i, a in OLLAMA_CALLS
            ],
        },
        "tool_calls",
    )
    assert decode_body(json.dumps(whole)).content == expected


def test_a_call_whose_id_repeats_on_each_delta_stays_one_call() -> None:
    pieces = [{"name": "f", "arguments": '{"a"'}, {"arguments": ":1}"}]
    data = sse(
        *[chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": p}]}) for p in pieces],
        chunk({}, "tool_calls"),
    )
    assert collect(decode_stream(data)).content == (
        ToolCall(id="call_1", name="f", arguments='{"a":1}'),
    )


def test_a_call_whose_deltas_each_carry_another_id_stays_one_call() -> None:
    # Poolside, vLLM's Harmony parser before PR #33520: the first delta's id, then a new
    # id on each delta of the arguments. OpenAI's SDK merges them by index.
    data = sse(
        chunk({"tool_calls": [{"index": 0, "id": "call_A", "function": {"name": "f"}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_B", "function": {"arguments": '{"a"'}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_C", "function": {"arguments": ":1}"}}]}),
        chunk({}, "tool_calls"),
    )
    assert collect(decode_stream(data)).content == (
        ToolCall(id="call_A", name="f", arguments='{"a":1}'),
    )


# 1b. A call's id that comes after its arguments began: the server's id, not a stand-in


def test_a_calls_id_after_its_arguments_began_is_the_one_kept() -> None:
    data = sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"x"'}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_abc", "function": {"arguments": ":1}"}}]}),
        chunk({}, "tool_calls"),
        chunk(None, usage=USAGE),
    )
    events = decode_stream(data)
    starts = [event for event in events if isinstance(event, BlockStart)]
    assert starts == [
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="call_0", name="f"),
        BlockStart(index=0, block_type=StreamBlockType.TOOL_CALL, id="call_abc"),
    ]
    expected = (ToolCall(id="call_abc", name="f", arguments='{"x":1}'),)
    assert collect(events).content == expected
    assert streamed("openai-compatible", data, base_url="http://h/v1").content == expected


def test_a_call_without_an_index_takes_its_late_id_after_its_arguments_began() -> None:
    data = sse(
        chunk({"tool_calls": [{"function": {"name": "f", "arguments": '{"x"'}}]}),
        chunk({"tool_calls": [{"id": "call_X", "function": {"arguments": ":1}"}}]}),
        chunk({}, "tool_calls"),
    )
    assert collect(decode_stream(data)).content == (
        ToolCall(id="call_X", name="f", arguments='{"x":1}'),
    )


# 2. xAI's finish reason "" with tool calls: read from the content, in a stream as in a body

XAI_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}
XAI_EXPECTED = (ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}'),)


def xai_stream(*, done: bool) -> bytes:
    return sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, **XAI_CALL}]}),
        chunk({}, ""),
        chunk(None, usage=USAGE),
        done=done,
    )


@pytest.mark.parametrize("done", [True, False])
def test_xai_blank_finish_with_tool_calls_is_tool_calls_in_a_stream(done: bool) -> None:
    response = streamed("xai", xai_stream(done=done))
    assert response.content == XAI_EXPECTED
    assert response.finish_reason == FinishReason.TOOL_CALLS
    assert response.usage == Usage(input_tokens=10, output_tokens=5)
    whole = decode_body(json.dumps(body({"content": None, "tool_calls": [XAI_CALL]}, "")))
    assert whole.finish_reason == FinishReason.TOOL_CALLS
    assert whole.content == XAI_EXPECTED


def test_a_stream_with_blank_finishes_on_its_content_cut_short_is_incomplete() -> None:
    # Servers that send "" on every chunk (sglang, Sensenova) send it with the content: a
    # stream of theirs cut inside a call's arguments did not end.
    data = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f"}}]}, ""),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]}, ""),
        done=False,
    )
    target, _ = provider("xai", (200, data))
    with pytest.raises(IncompleteStreamError):
        target.chat_stream(ChatRequest("m").user("x")).response()


# 3. A call of a custom tool (free-text input), given through the body option

CUSTOM_TOOLS = {"tools": [{"type": "custom", "custom": {"name": "code_exec"}}]}
CUSTOM_CALL = {
    "id": "call_1",
    "type": "custom",
    "custom": {"name": "code_exec", "input": "print('hello world')"},
}
CUSTOM_EXPECTED = (
    TextPart(text="Running it."),
    ToolCall(id="call_1", name="code_exec", arguments="print('hello world')"),
)


def test_a_custom_tool_call_in_a_body_is_a_tool_call_with_its_input() -> None:
    answer = body({"content": "Running it.", "tool_calls": [CUSTOM_CALL]}, "tool_calls")
    done = body({"content": "Done"}, "stop")
    target, recorder = provider("openai", (200, answer), (200, answer), (200, done))
    request = (
        ChatRequest("gpt-5").user("run hello world").with_option_json("openai_compat", CUSTOM_TOOLS)
    )
    response = target.chat(request)
    assert response.content == CUSTOM_EXPECTED
    assert response.finish_reason == FinishReason.TOOL_CALLS
    assert asyncio.run(target.achat(request)).content == CUSTOM_EXPECTED
    assert len(recorder.bodies) == 2  # (no retry of a paid answer)
    # Sent back in the next turn in the shape the API takes for a custom tool's call.
    follow = request.assistant(response.content).tool_result(response.tool_calls()[0], "hi")
    target.chat(follow)
    sent = recorder.bodies[2]["messages"]
    assert sent[1] == {"role": "assistant", "content": "Running it.", "tool_calls": [CUSTOM_CALL]}
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "hi"}


def test_a_function_call_goes_back_as_a_function_beside_custom_tools() -> None:
    call = ToolCall(id="c", name="weather", arguments="{}")
    target, recorder = provider("openai", (200, body({"content": "ok"}, "stop")))
    target.chat(
        ChatRequest("gpt-5")
        .user("x")
        .assistant([call])
        .tool_result(call, "sunny")
        .with_option_json("openai_compat", CUSTOM_TOOLS)
    )
    assert recorder.bodies[0]["messages"][1]["tool_calls"] == [
        {"id": "c", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    ]


def test_a_custom_tool_call_in_a_stream_is_read_as_in_a_body() -> None:
    data = sse(
        chunk({"role": "assistant", "content": "Running it."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "custom",
                        "custom": {"name": "code_exec", "input": "print('hello"},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "custom": {"input": " world')"}}]}),
        chunk({}, "tool_calls"),
    )
    response = streamed("openai", data)
    assert response.content == CUSTOM_EXPECTED
    assert response.finish_reason == FinishReason.TOOL_CALLS


def test_a_tool_call_naming_no_tool_still_does_not_fit() -> None:
    answer = body({"tool_calls": [{"id": "c", "type": "custom", "custom": {}}]}, "tool_calls")
    with pytest.raises(ServerError, match="do not fit the chat completion shape"):
        decode_body(json.dumps(answer))


# 4. Reasoning counted apart from the completion (Grok on Azure AI Foundry, BerriAI/litellm
# #39426): told by the numbers, whatever the preset; allama's output includes the reasoning


def usage_with(prompt: int, completion: int, total: int, reasoning: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # The completion smaller than its own reasoning: 1 token of answer, 97 of reasoning.
        (usage_with(12, 1, 110, 97), Usage(input_tokens=12, output_tokens=98, reasoning_tokens=97)),
        # The total adds the reasoning to the prompt and the completion.
        (
            usage_with(12, 150, 259, 97),
            Usage(input_tokens=12, output_tokens=247, reasoning_tokens=97),
        ),
        # The completion that includes the reasoning (OpenAI's count): as it is.
        (
            usage_with(12, 150, 162, 97),
            Usage(input_tokens=12, output_tokens=150, reasoning_tokens=97),
        ),
        # No total to tell by, the completion no smaller than the reasoning: as it is.
        (
            {k: v for k, v in usage_with(12, 150, 0, 97).items() if k != "total_tokens"},
            Usage(input_tokens=12, output_tokens=150, reasoning_tokens=97),
        ),
    ],
)
def test_reasoning_outside_the_completion_is_read_from_the_numbers(
    counts: dict[str, Any], expected: Usage
) -> None:
    answer = {**body({"content": '{"name":"Ada"}'}, "stop"), "usage": counts}
    target, _ = provider(
        "azure-foundry", (200, answer), base_url="https://x.services.ai.azure.com/models"
    )
    whole: ChatResponse = target.chat(ChatRequest("grok-4-1-fast-reasoning").user("x"))
    assert whole.usage == expected
    data = sse(
        chunk({"role": "assistant", "content": '{"name":"Ada"}'}, "stop"), chunk(None, usage=counts)
    )
    assert (
        streamed("openai-compatible", data, base_url="http://127.0.0.1:8000/v1").usage == expected
    )


def test_xai_adds_its_reasoning_whatever_its_total_says() -> None:
    # xAI's preset knows its count: its reasoning is outside however the numbers read.
    answer = {**body({"content": "ok"}, "stop"), "usage": usage_with(12, 150, 162, 97)}
    target, _ = provider("xai", (200, answer))
    whole: ChatResponse = target.chat(ChatRequest("grok-4").user("x"))
    assert whole.usage == Usage(input_tokens=12, output_tokens=247, reasoning_tokens=97)


# 5. A lone surrogate escape (`"\ud83d"`, half of a character) in a 200 body: pydantic-core
# refuses it as JSON, which made a paid answer "not a chat completion" (retryable, paid for
# again). It is read, each half as U+FFFD, and the response says so.

LONE = (
    "the provider sent text that holds half of a character (a lone surrogate, escaped as "
    "`\\ud83d`), which UTF-8 cannot carry: each such half was read as U+FFFD"
)


def test_a_lone_surrogate_escape_in_a_body_is_read_as_u_fffd_with_a_warning() -> None:
    message = {
        "content": "hi \ud83d there \ude00",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "f", "arguments": '{"a": "x\ud83d"}'},
            }
        ],
    }
    sent = json.dumps(body(message, "tool_calls")).encode()  # escapes each half: `\ud83d`
    assert b'"hi \\ud83d there \\ude00"' in sent
    target, _ = provider("openai", (200, sent))
    whole: ChatResponse = target.chat(ChatRequest("gpt-4o").user("x"))
    assert whole.content == (
        TextPart(text="hi \ufffd there \ufffd"),
        ToolCall(id="call_1", name="f", arguments='{"a": "x\ufffd"}'),
    )
    assert whole.finish_reason == FinishReason.TOOL_CALLS
    assert whole.usage == Usage(input_tokens=10, output_tokens=5)
    assert [(w.kind, w.message, w.provider) for w in whole.warnings] == [
        ("approximated", LONE, "openai")
    ]
    assert ChatResponse.from_json(whole.to_json()) == whole  # storable, as a ledger keeps it


def test_a_surrogate_pair_escaped_whole_is_one_character_and_no_warning() -> None:
    answer = decode_body(json.dumps(body({"content": "hi \U0001f600"}, "stop")))
    assert (answer.text(), answer.warnings) == ("hi \U0001f600", ())


def test_a_body_with_a_lone_surrogate_that_is_no_completion_is_still_that_error() -> None:
    # The error keeps the body as the provider sent it, not as it was read again.
    sent = json.dumps({"detail": "bad \ud83d"})
    with pytest.raises(ServerError) as caught:
        decode_body(sent, provider="openai", model="m")
    error = caught.value
    assert error.message == (
        "the provider answered with a body that is not a chat completion: it has no `choices`"
    )
    assert error.retryable and error.context.body == sent


# Groq's compound systems: the server-side tools they ran and each model's usage, kept

EXECUTED = [
    {
        "index": 0,
        "type": "search",
        "arguments": '{"query": "Ada Lovelace"}',
        "output": "Title: Ada Lovelace ...",
        "search_results": {
            "results": [{"title": "Ada", "url": "https://a.example", "content": "c", "score": 0.9}]
        },
    },
    {"index": 1, "type": "python", "arguments": '{"code": "1+1"}', "output": "2"},
]
BREAKDOWN = {
    "models": [
        {
            "model": "openai/gpt-oss-120b",
            "usage": {"prompt_tokens": 3000, "completion_tokens": 300, "total_tokens": 3300},
        },
        {"model": "meta-llama/llama-4-scout", "usage": {"prompt_tokens": 500}},
    ]
}


def compound(message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    answer = body({"content": "Ada was born in 1815.", **message}, "stop")
    return {**answer, "model": "groq/compound", "x_groq": {"id": "req_1"}, **extra}


def test_groq_compounds_executed_tools_and_usage_breakdown_are_kept_verbatim() -> None:
    sent = compound(
        {"reasoning": "searching", "executed_tools": EXECUTED}, usage_breakdown=BREAKDOWN
    )
    target, _ = provider("groq", (200, sent))
    answer: ChatResponse = target.chat(ChatRequest("groq/compound").user("Ada?"))
    assert answer.text() == "Ada was born in 1815."
    assert answer.provider_data == {
        "groq": {"executed_tools": EXECUTED, "usage_breakdown": BREAKDOWN}
    }
    assert answer.usage == Usage(input_tokens=10, output_tokens=5)
    assert answer.warnings == ()
    assert ChatResponse.from_json(answer.to_json()) == answer


@pytest.mark.parametrize(
    "extra",
    [{}, {"executed_tools": [], "usage_breakdown": None}, {"usage_breakdown": {}}],
    ids=["absent", "empty-list-null", "empty-breakdown"],
)
def test_groq_compound_fields_that_say_nothing_leave_no_key(extra: dict[str, Any]) -> None:
    tools = {"executed_tools": extra["executed_tools"]} if "executed_tools" in extra else {}
    breakdown = {k: v for k, v in extra.items() if k == "usage_breakdown"}
    answer = decode_body(json.dumps(compound(tools, **breakdown)), provider="groq")
    assert answer.provider_data == {}


def test_groq_compounds_streamed_executed_tools_and_usage_breakdown_are_the_bodys() -> None:
    # Groq sends each tool as it starts (no output yet), then again once it ran, under the
    # same index; the breakdown comes in `x_groq` on the final chunk (Groq SDK's types).
    started = [
        {k: v for k, v in tool.items() if k in ("index", "type", "arguments")} for tool in EXECUTED
    ]
    data = sse(
        chunk({"role": "assistant", "reasoning": "searching"}),
        chunk({"executed_tools": [started[0]]}),
        chunk({"executed_tools": [EXECUTED[0]]}),
        chunk({"executed_tools": [started[1]]}),
        chunk({"executed_tools": [EXECUTED[1]]}),
        chunk({"content": "Ada was born in 1815."}),
        chunk(
            {},
            "stop",
            x_groq={"id": "req_1", "usage": USAGE, "usage_breakdown": BREAKDOWN},
        ),
    )
    target, _ = provider("groq", (200, data))
    answer: ChatResponse = target.chat_stream(ChatRequest("groq/compound").user("Ada?")).response()
    assert answer.provider_data == {
        "groq": {"executed_tools": EXECUTED, "usage_breakdown": BREAKDOWN}
    }
    sent = compound(
        {"reasoning": "searching", "executed_tools": EXECUTED}, usage_breakdown=BREAKDOWN
    )
    whole = decode_body(json.dumps(sent), provider="groq")
    assert answer.content == whole.content
    assert answer.provider_data == whole.provider_data
    assert answer.usage == whole.usage == Usage(input_tokens=10, output_tokens=5)


# Metadata allama does not read, of another type than OpenAI's: the answer is read, once
# (SambaNova through Hugging Face's router sends a fractional `created`: modelbench#1287)

PARIS = body({"content": "Paris."}, "stop")


def _changed(change: dict[str, Any], choice: dict[str, Any] | None = None) -> dict[str, Any]:
    sent = {**PARIS, **change}
    if choice is not None:
        sent["choices"] = [{**PARIS["choices"][0], **choice}]
    return sent


@pytest.mark.parametrize(
    ("sent", "answer_id", "model"),
    [
        (_changed({"created": 1757876416.5661082}), "chatcmpl-1", "m"),
        (_changed({"created": "2025-09-14T18:20:16Z", "object": None}), "chatcmpl-1", "m"),
        (_changed({"id": 12345}), "12345", "m"),
        (_changed({"id": {"value": "x"}}), None, "m"),
        (_changed({"object": 7, "system_fingerprint": 3, "service_tier": None}), "chatcmpl-1", "m"),
        (_changed({"model": ["m-1"]}), "chatcmpl-1", "asked"),
        (_changed({}, {"message": {"role": None, "content": "Paris."}}), "chatcmpl-1", "m"),
        (_changed({}, {"message": {"role": "model", "content": "Paris."}}), "chatcmpl-1", "m"),
        (_changed({}, {"index": None}), "chatcmpl-1", "m"),
        (_changed({}, {"logprobs": []}), "chatcmpl-1", "m"),
    ],
    ids=[
        "float-created",
        "text-created",
        "number-id",
        "object-id",
        "number-object",
        "list-model",
        "null-role",
        "unknown-role",
        "null-index",
        "empty-list-logprobs",
    ],
)
def test_metadata_of_another_type_leaves_the_answer_read_and_paid_once(
    sent: dict[str, Any], answer_id: str | None, model: str
) -> None:
    target, recorder = provider("openai", (200, sent))
    retrying = allama.RetryingProvider(target, sleep=lambda _: None)
    answer: ChatResponse = retrying.chat(ChatRequest("asked").user("capital of France?"))
    assert answer.content == (TextPart(text="Paris."),)
    assert answer.finish_reason == FinishReason.STOP
    assert (answer.id, answer.model) == (answer_id, model)
    assert answer.usage == Usage(input_tokens=10, output_tokens=5)
    assert (answer.warnings, answer.provider_data) == ((), {})
    assert len(recorder.bodies) == 1


@pytest.mark.parametrize("logprobs", ["none", [{"token": "Paris", "logprob": -0.1}], 0.5])
def test_logprobs_that_are_no_object_are_left_out_with_a_warning(logprobs: Any) -> None:
    answer = decode_body(json.dumps(_changed({}, {"logprobs": logprobs})), provider="p")
    assert (answer.text(), answer.logprobs) == ("Paris.", None)
    assert [(w.kind, w.message) for w in answer.warnings] == [
        (
            "unsupported",
            "the provider sent log-probabilities in a shape allama does not read (a "
            "`logprobs` that is no object): they were left out",
        )
    ]


def test_null_indexes_are_the_choices_places() -> None:
    sent = {
        **PARIS,
        "choices": [
            {"index": None, "message": {"content": "A"}, "finish_reason": "stop"},
            {"index": None, "message": {"content": "B"}, "finish_reason": "length"},
        ],
    }
    answer = decode_body(json.dumps(sent))
    assert answer.text() == "A"
    assert answer.provider_data["openai"]["other_choices"] == [
        {"index": 1, "text": "B", "finish_reason": "length"}
    ]


@pytest.mark.parametrize(
    "message",
    [
        {"content": {"type": "text", "text": "Paris."}},
        {"content": "Paris.", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
        {"content": "Paris.", "refusal": 5},
    ],
    ids=["content-object", "call-without-name", "refusal-number"],
)
def test_content_that_cannot_be_read_is_still_refused(message: dict[str, Any]) -> None:
    with pytest.raises(ServerError) as caught:
        decode_body(json.dumps(_changed({}, {"message": message})), provider="p", model="m")
    assert caught.value.message == (
        "the provider answered with a body that is not a chat completion: its fields do "
        "not fit the chat completion shape"
    )
    assert caught.value.context.metadata[REPORTED_USAGE_KEY] == {
        "input_tokens": 10,
        "output_tokens": 5,
    }


def test_a_stream_with_metadata_of_another_type_is_read_as_its_body() -> None:
    # LiteLLM v1.41.15 sent a fractional `created` on its chunks; the final one fails no more.
    metadata = {"id": 12345, "created": 1757876416.5661082, "object": None, "model": "m"}
    data = sse(
        {**chunk({"role": None, "content": "Par"}), **metadata},
        {**chunk({"role": "model", "content": "is."}), **metadata},
        {**metadata, "choices": [{"index": None, "delta": {}, "finish_reason": "stop"}]},
        {**chunk(None, usage=USAGE), **metadata},
    )
    answer = streamed("openai", data)
    assert answer.content == (TextPart(text="Paris."),)
    assert (answer.id, answer.finish_reason, answer.warnings) == ("12345", "stop", ())
    assert answer.usage == Usage(input_tokens=10, output_tokens=5)
    whole = decode_body(json.dumps({**PARIS, **metadata}), provider="openai", model="m")
    assert (answer.content, answer.id, answer.usage) == (whole.content, whole.id, whole.usage)


# A content list's parts: their text whatever their type is called, the others kept

UNREAD_PARTS_WARNING = (
    "the provider answered with content parts allama reads no text from: they are kept "
    "verbatim in `provider_data`, under `content_parts`"
)


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "output_text", "text": "Paris."}],
        [{"text": "Par"}, {"type": "text", "text": "is."}],
        ["Par", "is."],
    ],
    ids=["output-text", "untyped", "bare-strings"],
)
def test_parts_that_carry_text_are_read_as_text(content: list[Any]) -> None:
    target, _ = provider("openai", (200, _changed({}, {"message": {"content": content}})))
    answer: ChatResponse = target.chat(ChatRequest("m").user("capital of France?"))
    assert answer.content == (TextPart(text="Paris."),)
    assert (answer.warnings, answer.provider_data) == ((), {})


IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/paris.png"}}
REFUSAL_PART = {"type": "refusal", "refusal": "no"}


def test_parts_with_no_text_are_kept_verbatim_with_a_warning() -> None:
    content = [
        {"type": "reasoning_text", "text": "the capital"},
        IMAGE,
        {"type": "output_text", "text": "Paris."},
        REFUSAL_PART,  # (read as the refusal, body and stream: not an unread part)
        7,
    ]
    target, _ = provider("openai", (200, _changed({}, {"message": {"content": content}})))
    answer: ChatResponse = target.chat(ChatRequest("m").user("capital of France?"))
    assert answer.content == (
        Reasoning(text="the capital"),
        TextPart(text="Paris."),
        Refusal(text="no"),
    )
    assert answer.provider_data == {"openai": {"content_parts": [IMAGE, 7]}}
    assert [(w.kind, w.message, w.provider) for w in answer.warnings] == [
        ("unsupported", UNREAD_PARTS_WARNING, "openai")
    ]
    # A stream's parts, in pieces, come to the same answer.
    data = sse(
        chunk({"content": [content[0], IMAGE]}),
        chunk({"content": [content[2]]}),
        chunk({"content": [REFUSAL_PART, 7]}, "stop"),
        chunk(None, usage=USAGE),
    )
    assert streamed("openai", data) == answer


# A refusal part (`{"type": "refusal", "refusal": ...}`, as OpenAI's assistant content holds
# one) is the model's refusal, read as `message.refusal` is: an extraction reports it.


@pytest.mark.parametrize(
    ("message", "content", "unread"),
    [
        ({"content": [REFUSAL_PART]}, (Refusal(text="no"),), []),
        (
            {"content": [{"type": "text", "text": "Sorry: "}, REFUSAL_PART]},
            (TextPart(text="Sorry: "), Refusal(text="no")),
            [],
        ),
        ({"content": [7, REFUSAL_PART]}, (Refusal(text="no"),), [7]),
        # Given both ways, the one refusal is read once.
        ({"content": [REFUSAL_PART], "refusal": "no"}, (Refusal(text="no"),), []),
    ],
    ids=["alone", "after-text", "beside-an-unread-part", "also-as-the-field"],
)
def test_a_refusal_part_is_read_as_a_refusal(
    message: dict[str, Any], content: tuple[Any, ...], unread: list[Any]
) -> None:
    target, _ = provider("openai", (200, _changed({}, {"message": message})))
    answer: ChatResponse = target.chat(ChatRequest("m").user("x"))
    assert answer.content == content
    if unread:
        assert answer.provider_data == {"openai": {"content_parts": unread}}
        assert [w.message for w in answer.warnings] == [UNREAD_PARTS_WARNING]
    else:
        assert (answer.provider_data, answer.warnings) == ({}, ())


@pytest.mark.parametrize(
    ("deltas", "content", "unread"),
    [
        ([{"content": [REFUSAL_PART]}], (Refusal(text="no"),), []),
        (
            [{"content": [{"type": "text", "text": "Sorry: "}]}, {"content": [REFUSAL_PART]}],
            (TextPart(text="Sorry: "), Refusal(text="no")),
            [],
        ),
        ([{"content": [7, REFUSAL_PART]}], (Refusal(text="no"),), [7]),
        # Given both ways in one delta, the one refusal is read once.
        ([{"content": [REFUSAL_PART], "refusal": "no"}], (Refusal(text="no"),), []),
        # In pieces, parts and the field: one refusal block, in the order they came.
        (
            [
                {"refusal": "I can"},
                {"content": [{"type": "refusal", "refusal": "not help"}]},
                {"refusal": " with that."},
            ],
            (Refusal(text="I cannot help with that."),),
            [],
        ),
    ],
    ids=["alone", "after-text", "beside-an-unread-part", "also-as-the-field", "in-pieces"],
)
def test_a_streamed_refusal_part_is_read_as_a_refusal(
    deltas: list[dict[str, Any]], content: tuple[Any, ...], unread: list[Any]
) -> None:
    data = sse(*(chunk(delta) for delta in deltas), chunk({}, "stop"), chunk(None, usage=USAGE))
    answer = streamed("openai", data)
    assert answer.content == content
    if unread:
        assert answer.provider_data == {"openai": {"content_parts": unread}}
        assert [w.message for w in answer.warnings] == [UNREAD_PARTS_WARNING]
    else:
        assert (answer.provider_data, answer.warnings) == ({}, ())


def test_an_extraction_answered_with_a_refusal_part_reports_the_refusal() -> None:
    target, _ = provider("openai", (200, _changed({}, {"message": {"content": [REFUSAL_PART]}})))
    with pytest.raises(RefusedError) as caught:
        allama.extract(target, int, ChatRequest("gpt-4o").user("x"))
    assert caught.value.text == "no"
