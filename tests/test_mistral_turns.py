"""Mistral refuses a system turn straight after an assistant turn or a tool result
("Unexpected role 'system' after role 'assistant'", mistral_common's order check): such a
system turn is moved to the system instructions before the conversation, with a warning,
and no assistant turn is put before it (that would only move the refusal up one turn)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests._recording import provider

from allama import ChatRequest, ToolDefinition
from allama.types import RequestField, ToolCall, WarningKind

OK = {
    "id": "x",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
MOVED = (
    "Mistral takes system instructions only before the conversation or after a user turn; "
    "those given after an assistant turn or a tool result were moved before the conversation"
)
BRIDGE = "I have the tool results."
BRIDGED = (
    "Mistral refuses a user turn straight after a tool result; an assistant turn saying "
    f'"{BRIDGE}" was put between them'
)
CALL = ToolCall(id="abcDEF123", name="lookup", arguments='{"q":"x"}')
LOOKUP = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
CALL_WIRE = {
    "role": "assistant",
    "tool_calls": [
        {
            "id": "abcDEF123",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"q":"x"}'},
        }
    ],
}
RESULT_WIRE = {"role": "tool", "tool_call_id": "abcDEF123", "content": "x is 42"}


def _sent(request: ChatRequest, *, run_async: bool = False) -> tuple[Any, list[tuple[Any, str]]]:
    target, recorder = provider("mistral", (200, OK))
    response = asyncio.run(target.achat(request)) if run_async else target.chat(request)
    [body] = recorder.bodies
    return body["messages"], [(w.kind, w.message) for w in response.warnings]


@pytest.mark.parametrize("run_async", [False, True])
def test_system_after_an_assistant_turn_is_merged_into_the_opening_one(run_async: bool) -> None:
    request = (
        ChatRequest("mistral-large-latest")
        .system("Be brief.")
        .user("a")
        .assistant("b")
        .system("From now on answer in French.")
        .user("c")
    )
    messages, warnings = _sent(request, run_async=run_async)
    assert messages == [
        {"role": "system", "content": "Be brief.\n\nFrom now on answer in French."},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert warnings == [(WarningKind.APPROXIMATED, MOVED)]


def test_system_after_a_tool_result_opens_the_conversation_with_no_bridge_before_it() -> None:
    """The bridging assistant turn goes before the next user turn, not the system turn."""
    request = (
        ChatRequest("mistral-large-latest")
        .user("Find x")
        .assistant([CALL])
        .tool_result(CALL, "x is 42")
        .system("Answer in French.")
        .user("ok?")
        .with_tools([LOOKUP])
    )
    messages, warnings = _sent(request)
    assert messages == [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Find x"},
        CALL_WIRE,
        RESULT_WIRE,
        {"role": "assistant", "content": BRIDGE},
        {"role": "user", "content": "ok?"},
    ]
    assert warnings == [(WarningKind.APPROXIMATED, BRIDGED), (WarningKind.APPROXIMATED, MOVED)]


def test_the_move_is_warned_about_on_system() -> None:
    target, _ = provider("mistral", (200, OK))
    request = ChatRequest("mistral-large-latest").user("a").assistant("b").system("S").user("c")
    [warning] = target.chat(request).warnings
    assert warning.is_about(RequestField.SYSTEM)


def test_several_later_system_turns_keep_their_order_after_the_opening_ones() -> None:
    request = (
        ChatRequest("mistral-large-latest")
        .system("One.")
        .system("Two.")
        .user("a")
        .assistant("b")
        .system("Three.")
        .system("Four.")
        .user("c")
    )
    messages, warnings = _sent(request)
    assert messages == [
        {"role": "system", "content": "One."},
        {"role": "system", "content": "Two.\n\nThree.\n\nFour."},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert warnings == [(WarningKind.APPROXIMATED, MOVED)]


def test_system_after_a_user_turn_stays_where_it_is() -> None:
    """Mistral takes a system turn after a user turn: nothing moves, nothing is warned."""
    request = ChatRequest("mistral-large-latest").user("a").assistant("b").user("c").system("S")
    messages, warnings = _sent(request)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "system"]
    assert warnings == []


def test_other_endpoints_send_a_later_system_turn_where_it_is() -> None:
    """The rules are Mistral's preset's alone."""
    target, recorder = provider("openai", (200, OK))
    request = ChatRequest("gpt-4o").user("a").assistant("b").system("S").user("c")
    assert target.chat(request).warnings == ()
    assert [m["role"] for m in recorder.bodies[0]["messages"]] == [
        "user",
        "assistant",
        "system",
        "user",
    ]
