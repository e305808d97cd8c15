"""Signed reasoning goes back to the provider that issued it, and to no other.

A `Reasoning` block carries the provider's signature or encrypted content, which only that
provider can check: OpenAI answers 400 `invalid_encrypted_content` to xAI's (both give
`rs_` item ids), Gemini 400 "Corrupted thought signature" to Claude's, Anthropic refuses a
Gemini thought signature as a thinking block. Each response names its provider on its
signed reasoning (`Reasoning.issuer`), streamed or not, and each encoder sends a signature
or encrypted content back only to that provider; another's is left out with the warning
the encoder gives for reasoning it cannot take back. Everything goes through
`allama.provider(...)` over a mock transport, in both flavours.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from _recording import provider
from _responses_support import stream_of
from allama import ChatRequest, ChatResponse
from allama.errors import OverloadedError
from allama.types import (
    AssistantMessage,
    Reasoning,
    RequestField,
    ToolCall,
    ToolDefinition,
    Warning,
    WarningKind,
)
from allama.wrappers import FailoverProvider


def ask(chosen: Any, request: ChatRequest, *, stream: bool, run_async: bool) -> ChatResponse:
    """The response to `request`, by `chat`, `chat_stream`, `achat` or `achat_stream`."""
    if not run_async:
        return chosen.chat_stream(request).response() if stream else chosen.chat(request)

    async def run() -> ChatResponse:
        if stream:
            return await (await chosen.achat_stream(request)).response()
        answer: ChatResponse = await chosen.achat(request)
        return answer

    return asyncio.run(run())


WEATHER = ToolDefinition(
    name="get_weather",
    description="The weather in a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
QUESTION = ChatRequest("m").user("Weather in Paris?").add_tool(WEATHER)
ARGUMENTS = '{"city":"Paris"}'
FLAVOURS = [
    pytest.param(False, False, id="chat"),
    pytest.param(True, False, id="chat_stream"),
    pytest.param(False, True, id="achat"),
    pytest.param(True, True, id="achat_stream"),
]


def continued(request: ChatRequest, response: ChatResponse, model: str) -> ChatRequest:
    """The tool loop's next request to `model`: the turn as the response gave it, and the
    result of its call."""
    [call] = response.tool_calls()
    turn = request.push(response.to_assistant_message()).tool_result(call, "sunny")
    return ChatRequest(model).extend_messages(turn.messages).with_tools(turn.tools)


def about(warnings: tuple[Warning, ...], field: RequestField) -> list[Warning]:
    return [w for w in warnings if getattr(w.subject, "field", None) is field]


# The Responses API: OpenAI, xAI, OpenRouter and Azure all give `rs_` item ids.

ENCRYPTED = "gAAAAAB-xai-encrypted-reasoning"
RESPONSES_REASONING = {
    "id": "rs_68c42d29",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Check the weather."}],
    "encrypted_content": ENCRYPTED,
}
RESPONSES_USAGE = {
    "input_tokens": 10,
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 3},
}


def responses_call(model: str) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "model": model,
        "status": "completed",
        "output": [
            RESPONSES_REASONING,
            {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": ARGUMENTS,
                "status": "completed",
            },
        ],
        "usage": RESPONSES_USAGE,
    }


RESPONSES_TEXT = {
    "id": "resp_2",
    "object": "response",
    "model": "m",
    "status": "completed",
    "output": [
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
        }
    ],
    "usage": RESPONSES_USAGE,
}
RESPONSES_HISTORY_WITHOUT_REASONING = [
    {"role": "user", "content": "Weather in Paris?"},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": ARGUMENTS},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
]
SENT_REASONING_ITEM = {
    "type": "reasoning",
    "id": "rs_68c42d29",
    "summary": [{"type": "summary_text", "text": "Check the weather."}],
    "encrypted_content": ENCRYPTED,
}


def responses_turn(preset: str, model: str, *, stream: bool, run_async: bool) -> ChatRequest:
    body = responses_call(model)
    answer = (200, stream_of(body)) if stream else (200, body)
    first, _ = provider(preset, answer, api="responses")
    request = QUESTION.model_copy(update={"model": model})
    response = ask(first, request, stream=stream, run_async=run_async)
    assert response.provider == preset
    assert response.content[0] == Reasoning(
        text="Check the weather.",
        signature="rs_68c42d29",
        encrypted_content=ENCRYPTED,
        issuer=preset,
    )
    return continued(request, response, "next-model")


@pytest.mark.parametrize(("stream", "run_async"), FLAVOURS)
def test_xai_reasoning_is_not_sent_to_openai_but_goes_back_to_xai(
    stream: bool, run_async: bool
) -> None:
    request = responses_turn("xai", "grok-4", stream=stream, run_async=run_async)
    openai, sent = provider("openai", (200, RESPONSES_TEXT), api="responses")
    response = ask(openai, request, stream=False, run_async=run_async)
    # Sent, xAI's content answers 400 `invalid_encrypted_content`.
    assert sent.bodies[0]["input"] == RESPONSES_HISTORY_WITHOUT_REASONING
    [warning] = about(response.warnings, RequestField.REASONING)
    assert warning.kind is WarningKind.APPROXIMATED
    assert warning.provider == "openai"
    assert warning.message == (
        "OpenAI takes back only the reasoning items it gave, with their encrypted content "
        "(or by id, with `store: true`); other reasoning was left out of the conversation"
    )
    # The same provider gets it back whole, as before.
    xai, sent = provider("xai", (200, RESPONSES_TEXT), api="responses")
    response = ask(xai, request, stream=False, run_async=run_async)
    assert sent.bodies[0]["input"] == [
        RESPONSES_HISTORY_WITHOUT_REASONING[0],
        SENT_REASONING_ITEM,
        *RESPONSES_HISTORY_WITHOUT_REASONING[1:],
    ]
    assert response.warnings == ()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("other", ["xai", "openrouter", "azure-openai"])
def test_openai_reasoning_goes_to_no_other_responses_endpoint(stream: bool, other: str) -> None:
    request = responses_turn("openai", "gpt-5", stream=stream, run_async=False)
    options = {"endpoint": "https://r.openai.azure.com"} if other == "azure-openai" else {}
    chosen, sent = provider(other, (200, RESPONSES_TEXT), api="responses", **options)
    response = chosen.chat(request)
    assert sent.bodies[0]["input"] == RESPONSES_HISTORY_WITHOUT_REASONING
    [warning] = about(response.warnings, RequestField.REASONING)
    assert warning.provider == other
    # OpenAI itself takes it back.
    openai, sent = provider("openai", (200, RESPONSES_TEXT), api="responses")
    assert openai.chat(request).warnings == ()
    assert sent.bodies[0]["input"][1] == SENT_REASONING_ITEM


# Claude's thinking, continued on Gemini.

CLAUDE_SIGNATURE = "EqEECkYICxgCKkAo3UA4WwDbB8ihhpykVCsPx6iMzwNTNP8d"


def claude_call(thinking: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": thinking, "signature": CLAUDE_SIGNATURE},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def claude_stream(thinking: str) -> bytes:
    """`claude_call` as Anthropic streams it: thinking deltas, then the signature."""
    start = {**claude_call(thinking), "content": [], "stop_reason": None}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
    ]
    if thinking:
        events.append(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": thinking},
            }
        )
    events += [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": CLAUDE_SIGNATURE},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "get_weather",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": ARGUMENTS},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


GEMINI_TEXT = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "Sunny."}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
}
GEMINI_CALL_PART = {
    "functionCall": {"id": "toolu_01", "name": "get_weather", "args": {"city": "Paris"}}
}
SKIP_MESSAGE = (
    "a function call without Gemini's thought signature (made by another model, or kept "
    "without it) was sent with the signature that skips its check; the model does not see "
    "the reasoning behind it"
)


def claude_turn(thinking: str, *, stream: bool, run_async: bool) -> ChatRequest:
    answer = (200, claude_stream(thinking)) if stream else (200, claude_call(thinking))
    claude, _ = provider("anthropic", answer)
    request = QUESTION.model_copy(update={"model": "claude-sonnet-4-5"})
    response = ask(claude, request, stream=stream, run_async=run_async)
    assert response.content[0] == Reasoning(
        text=thinking, signature=CLAUDE_SIGNATURE, issuer="anthropic"
    )
    return continued(request, response, "gemini-3-pro-preview")


def model_turn(body: dict[str, Any]) -> list[dict[str, Any]]:
    [turn] = [content for content in body["contents"] if content["role"] == "model"]
    parts: list[dict[str, Any]] = turn["parts"]
    return parts


@pytest.mark.parametrize(("stream", "run_async"), FLAVOURS)
def test_claude_thinking_shown_as_omitted_leaves_gemini_3_the_skip_signature(
    stream: bool, run_async: bool
) -> None:
    # Thinking shown as "omitted": the signature alone, which went onto the function call
    # in place of the skip value ("Corrupted thought signature").
    request = claude_turn("", stream=stream, run_async=run_async)
    gemini, sent = provider("gemini", (200, GEMINI_TEXT))
    response = ask(gemini, request, stream=False, run_async=run_async)
    assert model_turn(sent.bodies[0]) == [
        {**GEMINI_CALL_PART, "thoughtSignature": "skip_thought_signature_validator"}
    ]
    [warning] = about(response.warnings, RequestField.MESSAGES)
    assert (warning.kind, warning.provider, warning.message) == (
        WarningKind.APPROXIMATED,
        "gemini",
        SKIP_MESSAGE,
    )


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("model", "call"),
    [
        ("gemini-2.5-flash", GEMINI_CALL_PART),
        (
            "gemini-3-pro-preview",
            {**GEMINI_CALL_PART, "thoughtSignature": "skip_thought_signature_validator"},
        ),
    ],
)
def test_claude_thinking_goes_to_gemini_as_a_thought_without_its_signature(
    stream: bool, model: str, call: dict[str, Any]
) -> None:
    request = claude_turn("The user wants Paris.", stream=stream, run_async=False)
    request = request.model_copy(update={"model": model})
    gemini, sent = provider("gemini", (200, GEMINI_TEXT))
    gemini.chat(request)
    assert model_turn(sent.bodies[0]) == [
        {"text": "The user wants Paris.", "thought": True},
        call,
    ]


def test_claude_thinking_goes_back_to_claude_with_its_signature() -> None:
    request = claude_turn("The user wants Paris.", stream=False, run_async=False)
    request = request.model_copy(update={"model": "claude-sonnet-4-5"}).with_reasoning_effort("low")
    claude, sent = provider("anthropic", (200, claude_call("Done.")))
    response = claude.chat(request)
    assert sent.bodies[0]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants Paris.",
        "signature": CLAUDE_SIGNATURE,
    }
    assert sent.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert response.warnings == ()


# Gemini's thought signatures, continued on Claude.

GEMINI_SIGNATURE = "R0VNSU5JLXRob3VnaHQtc2lnbmF0dXJl"
GEMINI_PARTS = [
    {"text": "The user wants Paris.", "thought": True},
    {**GEMINI_CALL_PART, "thoughtSignature": GEMINI_SIGNATURE},
]
GEMINI_CALL = {
    "candidates": [{"content": {"role": "model", "parts": GEMINI_PARTS}, "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    "modelVersion": "gemini-3-pro-preview",
}


def gemini_stream() -> bytes:
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [GEMINI_PARTS[0]]}}]},
        {
            **GEMINI_CALL,
            "candidates": [
                {
                    "content": {"role": "model", "parts": [GEMINI_PARTS[1]]},
                    "finishReason": "STOP",
                }
            ],
        },
    ]
    return "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks).encode()


def gemini_turn(*, stream: bool, run_async: bool) -> ChatRequest:
    answer = (200, gemini_stream()) if stream else (200, GEMINI_CALL)
    gemini, _ = provider("gemini", answer)
    request = QUESTION.model_copy(update={"model": "gemini-3-pro-preview"})
    response = ask(gemini, request, stream=stream, run_async=run_async)
    assert [block for block in response.content if isinstance(block, Reasoning)] == [
        Reasoning(text="The user wants Paris."),  # unsigned: nothing issued
        Reasoning(signature=GEMINI_SIGNATURE, issuer="gemini"),
    ]
    return continued(request, response, "claude-sonnet-4-5")


CLAUDE_TOOL_USE = {
    "type": "tool_use",
    "id": "toolu_01",
    "name": "get_weather",
    "input": {"city": "Paris"},
}


@pytest.mark.parametrize(("stream", "run_async"), FLAVOURS)
def test_a_gemini_thought_signature_is_no_thinking_block_for_claude(
    stream: bool, run_async: bool
) -> None:
    request = gemini_turn(stream=stream, run_async=run_async).with_reasoning_effort("low")
    claude, sent = provider("anthropic", (200, claude_call("Done.")))
    response = ask(claude, request, stream=False, run_async=run_async)
    body = sent.bodies[0]
    assert body["messages"][1] == {"role": "assistant", "content": [CLAUDE_TOOL_USE]}
    # No signed thinking opens the tool loop: budget thinking is left off, as for calls
    # another provider made, rather than refused by Anthropic.
    assert "thinking" not in body
    [reasoning] = about(response.warnings, RequestField.REASONING)
    assert reasoning.message == (
        "Anthropic takes back only the reasoning it signed; reasoning without its signature "
        "(unsigned, or another provider's) was left out of the conversation"
    )
    [effort] = about(response.warnings, RequestField.REASONING_EFFORT)
    assert effort.kind is WarningKind.UNSUPPORTED


@pytest.mark.parametrize("stream", [False, True])
def test_a_gemini_thought_signature_goes_back_to_gemini(stream: bool) -> None:
    request = gemini_turn(stream=stream, run_async=False)
    request = request.model_copy(update={"model": "gemini-3-pro-preview"})
    gemini, sent = provider("gemini", (200, GEMINI_TEXT))
    response = gemini.chat(request)
    assert model_turn(sent.bodies[0]) == GEMINI_PARTS
    assert response.warnings == ()


# Which provider is "its own": the inner one a failover sent to, whatever the wrapper's name.


@pytest.mark.parametrize("stream", [False, True])
def test_a_failover_sends_reasoning_back_only_to_the_inner_provider_that_gave_it(
    stream: bool,
) -> None:
    overloaded = (529, {"type": "error", "error": {"type": "overloaded_error", "message": "!"}})
    claude, to_claude = provider("anthropic", overloaded)
    answers = [(200, gemini_stream() if stream else GEMINI_CALL), (200, GEMINI_TEXT)]
    gemini, to_gemini = provider("gemini", *answers)
    both = FailoverProvider([claude, gemini], name="assistant")
    request = QUESTION.model_copy(update={"model": "gemini-3-pro-preview"})
    response = both.chat_stream(request).response() if stream else both.chat(request)
    assert response.provider == "gemini"
    assert response.content[1] == Reasoning(signature=GEMINI_SIGNATURE, issuer="gemini")
    with pytest.raises(OverloadedError):
        claude.chat(request)  # still down
    request = continued(request, response, "gemini-3-pro-preview")
    both.chat(request)
    assert to_claude.bodies[-1]["messages"][1] == {
        "role": "assistant",
        "content": [CLAUDE_TOOL_USE],
    }
    assert model_turn(to_gemini.bodies[-1]) == GEMINI_PARTS


# The vocabulary: the field travels with the block.


def test_the_issuer_travels_with_the_block_and_shows_no_model_text() -> None:
    request = responses_turn("xai", "grok-4", stream=False, run_async=False)
    [turn] = [m for m in request.messages if isinstance(m, AssistantMessage)]
    block = turn.content[0]
    assert isinstance(block, Reasoning) and block.issuer == "xai"
    # By hand from the blocks, and through JSON.
    again = ChatRequest("m").assistant(turn.content)
    assert again.messages[0] == AssistantMessage(content=turn.content)
    assert Reasoning.from_json(block.to_json()) == block
    assert ChatRequest.from_json(request.to_json()) == request
    assert json.loads(block.to_json())["issuer"] == "xai"
    # Written by an older version (no `issuer`), or by hand: no issuer, sent as before.
    old = {"type": "reasoning", "text": "t", "signature": "rs_1", "encrypted_content": "e"}
    assert Reasoning.model_validate(old).issuer is None
    assert repr(block) == "Reasoning(text=<withheld 18 chars>, signed, encrypted, issuer='xai')"
    assert repr(Reasoning(text="secret")) == "Reasoning(text=<withheld 6 chars>)"
    assert block.goes_back_to("xai") and not block.goes_back_to("openai")
    assert Reasoning(signature="s").goes_back_to("openai")


def test_a_block_made_by_hand_is_sent_as_before() -> None:
    request = (
        ChatRequest("gpt-5")
        .user("Weather in Paris?")
        .add_tool(WEATHER)
        .assistant(
            [
                Reasoning(
                    text="Check the weather.", signature="rs_68c42d29", encrypted_content=ENCRYPTED
                ),
                ToolCall(id="call_1", name="get_weather", arguments=ARGUMENTS),
            ]
        )
        .tool_result("call_1", "sunny")
    )
    openai, sent = provider("openai", (200, RESPONSES_TEXT), api="responses")
    assert openai.chat(request).warnings == ()
    assert sent.bodies[0]["input"][1] == SENT_REASONING_ITEM


def test_a_mock_stream_keeps_the_issuer_of_a_scripted_block() -> None:
    from allama.mock import MockStreamingProvider
    from allama.types import ChatResponse, TextPart

    block = Reasoning(text="t", signature="sig", issuer="anthropic")
    scripted = ChatResponse(content=(block, TextPart(text="x")), provider="anthropic", model="m")
    stream = MockStreamingProvider.from_responses([scripted]).chat_stream(
        ChatRequest("m").user("hi")
    )
    assert stream.response().content[0] == block
