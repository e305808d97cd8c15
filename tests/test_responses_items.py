"""Responses API: deep-research models are sent the one reasoning effort they take; output
items that wait for the caller's answer (computer, shell, apply-patch calls, MCP approval
requests) are said, finish as tool calls and are said to be left out of the next turn; a
background response not finished yet is an error naming its id; a tool result whose call is
not in the messages is said to go as a function's where custom tools are given."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from _responses_support import stream_of
from allama.adapters.openai_responses._decode import NAMESPACE, decode_response
from allama.adapters.openai_responses._sse import decode_stream
from allama.errors import REPORTED_USAGE_KEY, InvalidRequestError
from allama.extract import extract
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    ChatRequest,
    ChatResponse,
    FieldSubject,
    FinishReason,
    RequestField,
    Warning,
    WarningKind,
)

KEY = "sk-test-responses-items-5678"

REASONING: dict[str, Any] = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [],
    "encrypted_content": "ENC1",
}
MESSAGE: dict[str, Any] = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
}
COMPUTER: dict[str, Any] = {
    "type": "computer_call",
    "id": "cu_1",
    "call_id": "call_c1",
    "status": "completed",
    "action": {"type": "click", "button": "left", "x": 1, "y": 2},
    "pending_safety_checks": [],
}
SHELL: dict[str, Any] = {
    "type": "shell_call",
    "id": "sh_1",
    "call_id": "call_s1",
    "status": "completed",
    "action": {"commands": ["ls"]},
    "environment": None,
}
LOCAL_SHELL: dict[str, Any] = {
    "type": "local_shell_call",
    "id": "lsh_1",
    "call_id": "call_l1",
    "status": "completed",
    "action": {"type": "exec", "command": ["ls"], "env": {}},
}
APPLY_PATCH: dict[str, Any] = {
    "type": "apply_patch_call",
    "id": "ap_1",
    "call_id": "call_a1",
    "status": "completed",
    "operation": {"type": "create_file", "path": "a.txt", "diff": "+x"},
}
APPROVAL: dict[str, Any] = {
    "type": "mcp_approval_request",
    "id": "mcpr_1",
    "server_label": "docs",
    "name": "search",
    "arguments": "{}",
}
CLIENT_SEARCH: dict[str, Any] = {
    "type": "tool_search_call",
    "id": "tsc_1",
    "call_id": "call_t1",
    "execution": "client",
    "arguments": {"query": "weather"},
    "status": "completed",
}
IMAGE: dict[str, Any] = {
    "type": "image_generation_call",
    "id": "ig_1",
    "status": "completed",
    "result": "iVBO",
}


def body(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-2025-08-07",
        "store": False,
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 7, "total_tokens": 17},
        **fields,
    }


def provider(*replies: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    answers = iter(replies)

    def reply(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.read()))
        return httpx2.Response(200, json=next(answers))

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(reply)))
    made = allama.provider("openai", api="responses", api_key=KEY, transport=transport)
    return made, sent


def prepared(request: ChatRequest, api: str = "responses") -> tuple[dict[str, Any], list[str]]:
    made = allama.provider("openai", api=api, api_key=KEY)
    http, warnings = made._prepare(request, stream=False)
    sent: dict[str, Any] = http.body
    return sent, [warning.message for warning in warnings]


def collect(data: bytes) -> ChatResponse:
    collector = StreamCollector()
    for event in decode_stream(data, provider="openai"):
        collector.push(event)
    return collector.finish()


def waiting_warning(names: str) -> Warning:
    return Warning(
        kind=WarningKind.UNSUPPORTED,
        subject=FieldSubject(field=RequestField.OPTIONS),
        message=(
            "the response holds output items that wait for the caller's answer, which allama "
            f"does not read ({names}): they are kept verbatim in `provider_data`, under "
            "`items`, and a next turn built from the response leaves them out"
        ),
        provider="openai",
    )


REASONING_LEFT_OUT = (
    "OpenAI takes back a reasoning item only directly before the item that followed it in "
    "its turn: a message or a function call (named by its id, for one that goes by id with "
    "`store: true`), or a server tool call such as a web search (by reference, with `store: "
    "true` only); reasoning without one was left out of the conversation"
)


def left_out_message(names: str) -> str:
    return (
        f"the turn's {names} output items were left out of the conversation: allama sends "
        "back only its messages, function and custom tool calls, and reasoning"
    )


# Deep research: `medium` alone


@pytest.mark.parametrize(
    "model", ["o3-deep-research", "o3-deep-research-2025-06-26", "o4-mini-deep-research"]
)
@pytest.mark.parametrize("effort", ["minimal", "low", "high"])
def test_a_deep_research_model_is_sent_medium_for_any_other_effort(model: str, effort: str) -> None:
    request = ChatRequest(model, reasoning_effort=effort).user("q")  # type: ignore[arg-type]
    said = [f"`{model}` on OpenAI takes no reasoning effort `{effort}`; `medium` was sent"]
    responses, warned = prepared(request)
    assert responses["reasoning"] == {"effort": "medium"}
    assert warned == said
    chat, warned = prepared(request, api="chat")
    assert chat["reasoning_effort"] == "medium"
    assert warned == said


def test_a_deep_research_model_asked_medium_is_sent_it_without_a_word() -> None:
    sent, warned = prepared(
        ChatRequest("o4-mini-deep-research", reasoning_effort="medium").user("q")
    )
    assert sent["reasoning"] == {"effort": "medium"}
    assert warned == []


def test_deep_research_takes_no_function_tools_where_o3_does() -> None:
    made = allama.provider("openai", api="responses", api_key=KEY)
    for capability in (ChatCapability.TOOL_CALLS, ChatCapability.FORCED_TOOL_CHOICE):
        assert made.chat_capability("o3-deep-research", capability) is CapabilitySupport.UNSUPPORTED
        assert made.chat_capability("o3", capability) is CapabilitySupport.SUPPORTED
    # The o-series rows still take `low` to `high`.
    sent, warned = prepared(ChatRequest("o3", reasoning_effort="high").user("q"))
    assert sent["reasoning"] == {"effort": "high"}
    assert warned == []


# Items that wait for the caller's answer


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ([REASONING, COMPUTER], "computer_call"),
        ([REASONING, SHELL], "shell_call"),
        ([LOCAL_SHELL], "local_shell_call"),
        ([REASONING, APPLY_PATCH], "apply_patch_call"),
        ([REASONING, APPROVAL], "mcp_approval_request"),
        ([REASONING, CLIENT_SEARCH], "tool_search_call"),
    ],
)
def test_an_item_waiting_for_the_caller_is_said_and_finishes_as_tool_calls(
    output: list[dict[str, Any]], kind: str
) -> None:
    made, sent = provider(body(output), body([MESSAGE]))
    request = ChatRequest("gpt-5", reasoning_effort="low").user("q")
    answer = made.chat(request)
    assert answer.finish_reason == FinishReason.TOOL_CALLS
    assert answer.tool_calls() == ()
    assert answer.warnings == (waiting_warning(f"`{kind}`"),)
    waiting = output[-1]
    assert answer.provider_data[NAMESPACE]["items"] == [waiting]  # verbatim, to answer
    assert answer.provider_data[NAMESPACE]["resume"] == {"left_out": [kind]}

    turn = answer.to_assistant_message()
    following = made.chat(request.push(turn).user("next"))
    assert [item.get("type") for item in sent[1]["input"]] == [None, None]  # the two users
    assert left_out_message(f"`{kind}`") in [warning.message for warning in following.warnings]


def test_several_waiting_kinds_are_named_once_each_in_order() -> None:
    output: list[dict[str, Any]] = [
        COMPUTER,
        {**COMPUTER, "id": "cu_2", "call_id": "call_c2"},
        APPROVAL,
        IMAGE,
    ]
    answer = decode_response(200, {}, json.dumps(body(output)).encode(), provider="openai")
    assert answer.warnings == (waiting_warning("`computer_call`, `mcp_approval_request`"),)
    resume = answer.provider_data[NAMESPACE]["resume"]
    assert resume == {
        "left_out": ["computer_call", "mcp_approval_request", "image_generation_call"]
    }


def test_a_call_the_server_answered_itself_waits_for_nothing() -> None:
    hosted = {**SHELL, "environment": {"type": "container_reference", "container_id": "c1"}}
    ran = {
        "type": "shell_call_output",
        "id": "sho_1",
        "call_id": "call_s1",
        "status": "completed",
        "output": [],
    }
    searched = {**CLIENT_SEARCH, "execution": "server", "call_id": None}
    output: list[dict[str, Any]] = [hosted, ran, searched, MESSAGE]
    answer = decode_response(200, {}, json.dumps(body(output)).encode(), provider="openai")
    assert answer.finish_reason == FinishReason.STOP
    assert answer.warnings == ()
    assert "resume" not in answer.provider_data[NAMESPACE]
    assert answer.to_assistant_message().provider_data == {}


def test_a_generated_image_finishes_as_a_stop_and_the_next_turn_says_it_is_left_out() -> None:
    made, sent = provider(body([REASONING, IMAGE, MESSAGE]), body([MESSAGE]))
    request = ChatRequest("gpt-5", reasoning_effort="low").user("draw")
    answer = made.chat(request)
    assert answer.finish_reason == FinishReason.STOP
    assert answer.warnings == ()
    following = made.chat(request.push(answer.to_assistant_message()).user("again"))
    # The reasoning preceded the image, which does not go back: not the message after it.
    assert [item.get("type") for item in sent[1]["input"]] == [None, None, None]
    assert [warning.message for warning in following.warnings] == [
        left_out_message("`image_generation_call`"),
        REASONING_LEFT_OUT,
    ]


def test_a_compaction_is_said_left_out_of_the_next_turn() -> None:
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC"}
    answer = decode_response(
        200, {}, json.dumps(body([compaction, MESSAGE])).encode(), provider="openai"
    )
    request = ChatRequest("gpt-5").user("q").push(answer.to_assistant_message()).user("next")
    _, warned = prepared(request)
    assert warned == [left_out_message("`compaction`")]


@pytest.mark.parametrize(
    ("output", "finish", "names"),
    [
        ([REASONING, COMPUTER], FinishReason.TOOL_CALLS, "`computer_call`"),
        (
            [LOCAL_SHELL, APPROVAL],
            FinishReason.TOOL_CALLS,
            "`local_shell_call`, `mcp_approval_request`",
        ),
        ([REASONING, IMAGE, MESSAGE], FinishReason.STOP, None),
        ([MESSAGE], FinishReason.STOP, None),
    ],
)
def test_a_stream_reads_waiting_items_as_a_body_does(
    output: list[dict[str, Any]], finish: FinishReason, names: str | None
) -> None:
    whole = body(output)
    expected = decode_response(200, {}, json.dumps(whole).encode(), provider="openai")
    streamed = collect(stream_of(whole))
    assert streamed.finish_reason == expected.finish_reason == finish
    said = () if names is None else (waiting_warning(names),)
    assert streamed.warnings == expected.warnings == said
    assert streamed.provider_data == expected.provider_data


# A background response not finished yet


class Answer(BaseModel):
    a: int


@pytest.mark.parametrize(
    ("status", "output", "usage"),
    [
        ("queued", [], None),
        ("in_progress", [], None),
        (
            "in_progress",
            [{**MESSAGE, "content": [{"type": "output_text", "text": '{"a": 1}'}]}],
            {},
        ),
    ],
)
def test_an_unfinished_background_response_is_an_error_naming_its_id(
    status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> None:
    counted = {"input_tokens": 10, "output_tokens": 7, "total_tokens": 17}
    reply = body(
        output, status=status, background=True, usage=counted if usage is not None else None
    )
    message = (
        f"the response `resp_1` is not finished yet (status `{status}`): a background "
        "response (`background: true`) is answered before its output, which allama does not "
        "wait for; fetch it by its id once it is done"
    )
    request = ChatRequest("gpt-4o").user("json").with_option_json(NAMESPACE, {"background": True})
    made, _ = provider(reply, reply)
    with pytest.raises(InvalidRequestError) as raised:
        made.chat(request)
    assert str(raised.value) == message
    assert raised.value.authored
    assert raised.value.provider == "openai"
    reported = raised.value.context.metadata.get(REPORTED_USAGE_KEY)
    assert reported == ({"input_tokens": 10, "output_tokens": 7} if usage is not None else None)
    with pytest.raises(InvalidRequestError) as extracted:
        extract(made, Answer, request)
    assert str(extracted.value) == message


def test_an_unfinished_response_without_an_id_says_so_without_one() -> None:
    reply = {**body([], status="queued", usage=None), "id": None}
    with pytest.raises(InvalidRequestError) as raised:
        decode_response(200, {}, json.dumps(reply).encode())
    assert str(raised.value).startswith("the response is not finished yet (status `queued`)")


# A tool result whose call is not in the messages


CUSTOM: dict[str, Any] = {
    "tools": [{"type": "custom", "name": "apply_patch", "description": "Patches."}]
}


def test_a_result_of_an_unseen_call_beside_custom_tools_is_said_to_go_as_a_functions() -> None:
    options: dict[str, Any] = {"previous_response_id": "resp_0", **CUSTOM}
    request = (
        ChatRequest("gpt-5")
        .user("x")
        .with_option_json(NAMESPACE, options)
        .tool_result("call_abc", "patched")
    )
    sent, warned = prepared(request)
    assert sent["input"][1] == {
        "type": "function_call_output",
        "call_id": "call_abc",
        "output": "patched",
    }
    assert warned == [
        "the result of tool call `call_abc`, whose call is not in the messages (as one made "
        "before a `previous_response_id`), was sent as a function's (`function_call_output`): "
        "the body option's tools include `custom` ones, whose results go as "
        "`custom_tool_call_output`, and a result does not name its tool; to send it as a "
        "custom tool's, send the turn with its call in the messages"
    ]


def test_a_result_of_an_unseen_call_without_custom_tools_goes_without_a_word() -> None:
    request = (
        ChatRequest("gpt-5")
        .user("x")
        .with_option_json(NAMESPACE, {"previous_response_id": "resp_0"})
        .tool_result("call_abc", "42")
    )
    sent, warned = prepared(request)
    assert sent["input"][1]["type"] == "function_call_output"
    assert warned == []
