"""Signed reasoning goes back to the endpoint that issued it, not to the preset alone.

Encrypted reasoning is the resource's, account's or host's: an Azure OpenAI resource
refuses another one's ("Encrypted content ... could not be verified"), as DeepSeek refuses
Moonshot's thinking signature, though both are the same preset. So a provider marks its
reasoning with its host where that is not the preset's own (`HttpProvider.issuer`), and a
failover from one resource to another leaves the first one's reasoning out, with the
warning for reasoning another provider issued, rather than have the call refused. The
same endpoint gets it back as before, live, streamed, from a batch job or from JSON.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import allama
from _recording import Recorder, provider
from _responses_support import stream_of
from allama import ChatRequest, ChatResponse
from allama.adapters._jobs import Row, RowKind
from allama.providers._jobs import provider_jobs
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

EAST = "https://east.openai.azure.com"
WEST = "https://west.openai.azure.com"
EAST_ISSUER = "azure-openai@east.openai.azure.com"

WEATHER = ToolDefinition(
    name="get_weather",
    description="The weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
QUESTION = ChatRequest("gpt-5").user("Weather in Paris?").add_tool(WEATHER)
ARGUMENTS = '{"city":"Paris"}'
FLAVOURS = [
    pytest.param(False, False, id="chat"),
    pytest.param(True, False, id="chat_stream"),
    pytest.param(False, True, id="achat"),
    pytest.param(True, True, id="achat_stream"),
]


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


def continued(request: ChatRequest, response: ChatResponse) -> ChatRequest:
    """The tool loop's next request: the turn as the response gave it, and its result."""
    [call] = response.tool_calls()
    return request.push(response.to_assistant_message()).tool_result(call, "sunny")


def about(warnings: tuple[Warning, ...], field: RequestField) -> list[Warning]:
    return [w for w in warnings if getattr(w.subject, "field", None) is field]


# Two Azure OpenAI resources, Responses API.

ENCRYPTED = "gAAAAAB-east-encrypted-reasoning"
REASONING_ITEM = {
    "id": "rs_68c42d29",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Check the weather."}],
    "encrypted_content": ENCRYPTED,
}
USAGE = {"input_tokens": 10, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 3}}
RESPONSES_CALL = {
    "id": "resp_1",
    "object": "response",
    "model": "gpt-5",
    "status": "completed",
    "output": [
        REASONING_ITEM,
        {
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": ARGUMENTS,
            "status": "completed",
        },
    ],
    "usage": USAGE,
}
RESPONSES_TEXT = {
    "id": "resp_2",
    "object": "response",
    "model": "gpt-5",
    "status": "completed",
    "output": [
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
        }
    ],
    "usage": USAGE,
}
OVERLOADED = (503, {"error": {"message": "overloaded", "type": "server_error"}})
HISTORY_WITHOUT_REASONING = [
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
HISTORY_WITH_REASONING = [
    HISTORY_WITHOUT_REASONING[0],
    SENT_REASONING_ITEM,
    *HISTORY_WITHOUT_REASONING[1:],
]
AZURE_LEFT_OUT = (
    "Azure OpenAI takes back only the reasoning items it gave, with their encrypted content "
    "(or by id, with `store: true`); other reasoning was left out of the conversation"
)


def azure(endpoint: str, *answers: tuple[int, Any], key: str = "k") -> tuple[Any, Recorder]:
    recorder = Recorder(*answers)
    made = allama.provider(
        "azure-openai",
        api="responses",
        endpoint=endpoint,
        api_key=key,
        transport=recorder.transport(),
    )
    return made, recorder


def east_reasoning(block: Reasoning) -> None:
    assert block == Reasoning(
        text="Check the weather.",
        signature="rs_68c42d29",
        encrypted_content=ENCRYPTED,
        issuer=EAST_ISSUER,
    )


@pytest.mark.parametrize(("stream", "run_async"), FLAVOURS)
def test_a_failover_to_another_azure_resource_leaves_out_the_first_ones_reasoning(
    stream: bool, run_async: bool
) -> None:
    first = (200, stream_of(RESPONSES_CALL) if stream else RESPONSES_CALL)
    east, to_east = azure(EAST, first, OVERLOADED)
    west, to_west = azure(WEST, (200, RESPONSES_TEXT))
    both = FailoverProvider([east, west])
    response = ask(both, QUESTION, stream=stream, run_async=run_async)
    east_reasoning(response.content[0])
    request = continued(QUESTION, response)
    response = ask(both, request, stream=False, run_async=run_async)
    assert len(to_east.bodies) == 2  # east was asked, and was overloaded
    # Sent, east's encrypted content is refused by west: "could not be verified".
    assert to_west.bodies[0]["input"] == HISTORY_WITHOUT_REASONING
    [warning] = about(response.warnings, RequestField.REASONING)
    assert (warning.kind, warning.provider, warning.message) == (
        WarningKind.APPROXIMATED,
        "azure-openai",
        AZURE_LEFT_OUT,
    )
    # The dry run says so too.
    [said] = about(west.validate_chat_request(request).warnings, RequestField.REASONING)
    assert said.message == AZURE_LEFT_OUT


@pytest.mark.parametrize(("stream", "run_async"), FLAVOURS)
def test_reasoning_goes_back_to_the_azure_resource_that_gave_it(
    stream: bool, run_async: bool
) -> None:
    first = (200, stream_of(RESPONSES_CALL) if stream else RESPONSES_CALL)
    east, sent = azure(EAST, first, (200, RESPONSES_TEXT))
    response = ask(east, QUESTION, stream=stream, run_async=run_async)
    east_reasoning(response.content[0])
    request = continued(QUESTION, response)
    response = ask(east, request, stream=False, run_async=run_async)
    assert sent.bodies[1]["input"] == HISTORY_WITH_REASONING
    assert response.warnings == ()


@pytest.mark.parametrize(
    "endpoint",
    ["https://EAST.openai.azure.com/", "https://east.openai.azure.com:443/openai/v1"],
)
def test_the_same_resource_made_again_takes_its_reasoning_back_from_json(endpoint: str) -> None:
    east, _ = azure(EAST, (200, RESPONSES_CALL))
    request = continued(QUESTION, east.chat(QUESTION))
    request = ChatRequest.from_json(request.to_json())
    [turn] = [m for m in request.messages if isinstance(m, AssistantMessage)]
    east_reasoning(turn.content[0])
    # Another key of the same resource, its URL written another way.
    again, sent = azure(endpoint, (200, RESPONSES_TEXT), key="another-key")
    assert again.issuer == EAST_ISSUER
    assert again.chat(request).warnings == ()
    assert sent.bodies[0]["input"] == HISTORY_WITH_REASONING


def test_the_issuer_names_the_host_and_no_secret() -> None:
    east, _ = azure(EAST, (200, RESPONSES_CALL), key="sk-secret-key-1234")
    block = east.chat(QUESTION).content[0]
    assert repr(block) == (
        f"Reasoning(text=<withheld 18 chars>, signed, encrypted, issuer='{EAST_ISSUER}')"
    )
    assert json.loads(block.to_json())["issuer"] == EAST_ISSUER
    gateway, _ = provider(
        "openai-compatible",
        (200, RESPONSES_TEXT),
        api="responses",
        base_url="https://user:pass-word-1@GW.example.com:8443/team-secret/v1?key=abcdef",
    )
    assert gateway.issuer == "openai-compatible@gw.example.com:8443"
    # On the preset's own host, the preset's name alone, as before.
    assert provider("openai", (200, RESPONSES_TEXT))[0].issuer == "openai"
    assert provider("anthropic", (200, {}), base_url="https://api.anthropic.com")[0].issuer == (
        "anthropic"
    )


def test_two_openai_compatible_servers_on_one_machine_keep_their_reasoning_apart() -> None:
    one, _ = provider(
        "openai-compatible",
        (200, RESPONSES_CALL),
        api="responses",
        base_url="http://127.0.0.1:8001/v1",
    )
    other, sent = provider(
        "openai-compatible",
        (200, RESPONSES_TEXT),
        api="responses",
        base_url="http://127.0.0.1:8002/v1",
    )
    response = one.chat(QUESTION)
    assert response.content[0] == Reasoning(
        text="Check the weather.",
        signature="rs_68c42d29",
        encrypted_content=ENCRYPTED,
        issuer="openai-compatible@127.0.0.1:8001",
    )
    answer = other.chat(continued(QUESTION, response))
    assert sent.bodies[0]["input"] == HISTORY_WITHOUT_REASONING
    assert len(about(answer.warnings, RequestField.REASONING)) == 1


def test_reasoning_marked_with_the_preset_alone_goes_to_no_azure_resource() -> None:
    # Marked by an older version, which named no host: which resource gave it is unknown,
    # so it is left out, with the warning, rather than risk the refusal.
    old = Reasoning(
        text="Check the weather.",
        signature="rs_68c42d29",
        encrypted_content=ENCRYPTED,
        issuer="azure-openai",
    )
    call = ToolCall(id="call_1", name="get_weather", arguments=ARGUMENTS)
    request = QUESTION.assistant([old, call]).tool_result("call_1", "sunny")
    east, sent = azure(EAST, (200, RESPONSES_TEXT))
    [warning] = about(east.chat(request).warnings, RequestField.REASONING)
    assert warning.message == AZURE_LEFT_OUT
    assert sent.bodies[0]["input"] == HISTORY_WITHOUT_REASONING


# Two hosts of the Anthropic dialect: signed thinking.

DEEPSEEK = "https://api.deepseek.com/anthropic"
MOONSHOT = "https://api.moonshot.ai/anthropic"
SIGNATURE = "EqEECkYICxgCKkAo3UA4WwDbB8ihhpykVCsPx6iMzwNTNP8d"
THINKING = {"type": "thinking", "thinking": "The user wants Paris.", "signature": SIGNATURE}
TOOL_USE = {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
CLAUDE_CALL = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "deepseek-chat",
    "content": [THINKING, TOOL_USE],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
CLAUDE_TEXT = {
    **CLAUDE_CALL,
    "content": [{"type": "text", "text": "Sunny."}],
    "stop_reason": "end_turn",
}
THINKING_QUESTION = QUESTION.model_copy(update={"model": "deepseek-chat"}).with_reasoning_effort(
    "low"
)


def claude_stream() -> bytes:
    """`CLAUDE_CALL` as the Messages API streams it."""
    start = {**CLAUDE_CALL, "content": [], "stop_reason": None}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": THINKING["thinking"]},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": SIGNATURE},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {**TOOL_USE, "input": {}}},
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


def compatible(base_url: str, *answers: tuple[int, Any]) -> tuple[Any, Any]:
    return provider("anthropic-compatible", *answers, base_url=base_url)


def deepseek_turn(*, stream: bool, run_async: bool) -> ChatRequest:
    deepseek, _ = compatible(DEEPSEEK, (200, claude_stream() if stream else CLAUDE_CALL))
    response = ask(deepseek, THINKING_QUESTION, stream=stream, run_async=run_async)
    assert response.content[0] == Reasoning(
        text="The user wants Paris.",
        signature=SIGNATURE,
        issuer="anthropic-compatible@api.deepseek.com",
    )
    return continued(THINKING_QUESTION, response)


@pytest.mark.parametrize(("stream", "run_async"), FLAVOURS)
def test_deepseeks_signed_thinking_is_not_sent_to_moonshot(stream: bool, run_async: bool) -> None:
    request = deepseek_turn(stream=stream, run_async=run_async)
    moonshot, sent = compatible(MOONSHOT, (200, CLAUDE_TEXT))
    response = ask(moonshot, request, stream=False, run_async=run_async)
    assert sent.bodies[0]["messages"][1] == {"role": "assistant", "content": [TOOL_USE]}
    [warning] = about(response.warnings, RequestField.REASONING)
    assert (warning.kind, warning.provider, warning.message) == (
        WarningKind.APPROXIMATED,
        "anthropic-compatible",
        "the Anthropic-compatible endpoint takes back only the reasoning it signed; reasoning "
        "without its signature (unsigned, or another provider's) was left out of the "
        "conversation",
    )


@pytest.mark.parametrize(("stream", "run_async"), FLAVOURS)
def test_deepseeks_signed_thinking_goes_back_to_deepseek(stream: bool, run_async: bool) -> None:
    request = deepseek_turn(stream=stream, run_async=run_async)
    deepseek, sent = compatible(DEEPSEEK, (200, CLAUDE_TEXT))
    response = ask(deepseek, request, stream=False, run_async=run_async)
    assert sent.bodies[0]["messages"][1] == {"role": "assistant", "content": [THINKING, TOOL_USE]}
    assert sent.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert response.warnings == ()


# A batch job's answer is marked as the live call's, and goes back the same way.


def test_a_batch_answer_from_a_gateway_goes_back_to_that_gateway_alone() -> None:
    gateway, sent = provider("anthropic", (200, CLAUDE_TEXT), base_url="https://gw.example.com")
    row = Row("k1", RowKind.RESPONSE, 200, json.dumps(CLAUDE_CALL).encode())
    response = provider_jobs(gateway).answer(THINKING_QUESTION, row, [])
    assert response.content[0] == Reasoning(
        text="The user wants Paris.", signature=SIGNATURE, issuer="anthropic@gw.example.com"
    )
    request = continued(THINKING_QUESTION, response)
    assert gateway.chat(request).warnings == ()
    assert sent.bodies[0]["messages"][1]["content"][0] == THINKING
    # Anthropic's own host did not issue it.
    anthropic, sent = provider("anthropic", (200, CLAUDE_TEXT))
    [warning] = about(anthropic.chat(request).warnings, RequestField.REASONING)
    assert warning.provider == "anthropic"
    assert sent.bodies[0]["messages"][1] == {"role": "assistant", "content": [TOOL_USE]}
