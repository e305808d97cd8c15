"""A tool call the conversation gives no result for is refused before sending where the
endpoint answers 400 to one: OpenAI's and Azure OpenAI's Chat Completions ("The following
tool_call_ids did not have response messages"), DeepSeek's ("insufficient tool messages
following tool_calls message") and Mistral's ("Not the same number of function calls and
responses") wanting the results right after the turn, the Responses API ("No tool output
found for function call") wanting one anywhere in the input. Other endpoints (local
servers, hosts of open models, routers) are sent the conversation as it is."""

from __future__ import annotations

from typing import Any

import pytest

import allama
from _recording import provider
from allama import ChatRequest, ToolDefinition
from allama.adapters._answered import Unanswered, unanswered_calls, unanswered_words
from allama.errors import InvalidRequestError
from allama.types import ToolCall

TOOL = ToolDefinition(
    name="get",
    description="Looks it up.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}},
)
AZURE = {"endpoint": "https://res.openai.azure.com"}


def _call(call_id: str, q: str = "a") -> ToolCall:
    return ToolCall(id=call_id, name="get", arguments=f'{{"q":"{q}"}}')


def _one_left() -> ChatRequest:
    """Two calls, the second given no result before the user's next words."""
    return (
        ChatRequest("gpt-4o")
        .user("x")
        .with_tools([TOOL])
        .assistant([_call("call_0"), _call("call_1", "b")])
        .tool_result("call_0", "1")
        .user("go on")
    )


def _completion() -> dict[str, Any]:
    return {
        "id": "c-1",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }


def _refused(preset: str, request: ChatRequest, **options: Any) -> str:
    target, recorder = provider(preset, (200, _completion()), **options)
    with pytest.raises(InvalidRequestError) as raised:
        target.chat(request)
    assert recorder.bodies == []
    return str(raised.value)


# Chat Completions


@pytest.mark.parametrize(
    ("preset", "display", "options"),
    [
        ("openai", "OpenAI", {}),
        ("azure-openai", "Azure OpenAI", AZURE),
        ("deepseek", "DeepSeek", {}),
        ("mistral", "Mistral", {}),
    ],
)
def test_a_call_left_unanswered_before_the_next_user_turn_is_refused_unsent(
    preset: str, display: str, options: dict[str, Any]
) -> None:
    assert _refused(preset, _one_left(), **options) == (
        "the tool call `call_1` of the assistant turn at `messages[1]` got no tool result "
        f"before the next user turn (`messages[3]`), and {display} needs each call's result "
        "right after it"
    )


@pytest.mark.parametrize("preset", ["groq", "xai", "openrouter", "together", "fireworks", "vllm"])
def test_endpoints_not_known_to_refuse_it_are_sent_it_as_it_is(preset: str) -> None:
    target, recorder = provider(preset, (200, _completion()))
    target.chat(_one_left())
    messages = recorder.bodies[0]["messages"]
    assert [message["role"] for message in messages] == ["user", "assistant", "tool", "user"]
    assert [call["id"] for call in messages[1]["tool_calls"]] == ["call_0", "call_1"]


def test_a_call_in_the_last_turn_is_refused_too() -> None:
    request = ChatRequest("gpt-4o").user("x").with_tools([TOOL]).assistant([_call("call_0")])
    assert _refused("openai", request) == (
        "the tool call `call_0` of the assistant turn at `messages[1]` got no tool result "
        "before the end of the conversation, and OpenAI needs each call's result right after it"
    )


def test_calls_an_assistant_turn_follows_are_refused_naming_that_turn() -> None:
    request = (
        ChatRequest("deepseek-chat")
        .system("Be brief.")
        .user("x")
        .with_tools([TOOL])
        .assistant([_call("call_0"), _call("call_1", "b")])
        .assistant("Never mind.")
        .user("ok")
    )
    assert _refused("deepseek", request) == (
        "the tool calls `call_0`, `call_1` of the assistant turn at `messages[2]` got no tool "
        "result before the next assistant turn (`messages[3]`), and DeepSeek needs each "
        "call's result right after it"
    )


def test_a_result_given_only_after_the_next_user_turn_is_too_late() -> None:
    request = (
        ChatRequest("gpt-4o")
        .user("x")
        .with_tools([TOOL])
        .assistant([_call("call_0")])
        .user("and?")
        .tool_result("call_0", "1")
    )
    assert _refused("openai", request) == (
        "the tool call `call_0` of the assistant turn at `messages[1]` got no tool result "
        "before the next user turn (`messages[2]`), and OpenAI needs each call's result "
        "right after it"
    )


def test_every_call_answered_is_sent_its_results_in_call_order() -> None:
    request = (
        ChatRequest("gpt-4o")
        .user("x")
        .with_tools([TOOL])
        .assistant([_call("call_0"), _call("call_1", "b")])
        .tool_result("call_1", "2")
        .tool_result("call_0", "1")
        .user("go on")
    )
    target, recorder = provider("openai", (200, _completion()))
    target.chat(request)
    messages = recorder.bodies[0]["messages"]
    assert [message.get("tool_call_id") for message in messages[2:4]] == ["call_0", "call_1"]


def test_a_system_turn_mistral_moves_out_of_the_way_does_not_count() -> None:
    request = (
        ChatRequest("mistral-large-latest")
        .user("x")
        .with_tools([TOOL])
        .assistant([_call("call_0")])
        .system("Answer in French.")
        .tool_result("call_0", "1")
    )
    target, recorder = provider("mistral", (200, _completion()))
    target.chat(request)
    roles = [message["role"] for message in recorder.bodies[0]["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]


def test_ids_sent_otherwise_are_named_as_the_caller_gave_them() -> None:
    """Mistral takes 9-letter ids and OpenAI ids of 40 characters at most: the error names
    the caller's."""
    long_id = "call-" + "9" * 45
    request = (
        ChatRequest("gpt-4o")
        .user("x")
        .with_tools([TOOL])
        .assistant([_call(long_id), _call("functions.get:1", "b")])
        .tool_result("functions.get:1", "2")
        .user("go on")
    )
    said = (
        f"the tool call `{long_id}` of the assistant turn at `messages[1]` got no tool result "
        "before the next user turn (`messages[3]`), and {} needs each call's result right "
        "after it"
    )
    assert _refused("openai", request) == said.format("OpenAI")
    assert _refused("mistral", request) == said.format("Mistral")


def test_a_repeated_id_is_answered_once_per_result() -> None:
    """Gemini's and Ollama's stand-in ids repeat in every response, and a server may give
    two parallel calls one id: each result answers one call."""
    answered_before = (
        ChatRequest("gpt-4o")
        .user("x")
        .with_tools([TOOL])
        .assistant([_call("call_0")])
        .tool_result("call_0", "1")
        .user("again")
        .assistant([_call("call_0", "b"), _call("call_0", "c")])
        .tool_result("call_0", "2")
        .user("go on")
    )
    assert _refused("openai", answered_before) == (
        "the tool call `call_0` of the assistant turn at `messages[4]` got no tool result "
        "before the next user turn (`messages[6]`), and OpenAI needs each call's result "
        "right after it"
    )


# The Responses API


@pytest.mark.parametrize(
    ("preset", "display", "options"),
    [("openai", "OpenAI", {}), ("azure-openai", "Azure OpenAI", AZURE)],
)
def test_the_responses_api_refuses_a_function_call_without_its_output(
    preset: str, display: str, options: dict[str, Any]
) -> None:
    assert _refused(preset, _one_left(), api="responses", **options) == (
        "the tool call `call_1` of the assistant turn at `messages[1]` got no tool result, and "
        f"{display} needs a result for each call"
    )


def test_the_responses_api_refuses_a_custom_tool_call_without_its_output() -> None:
    custom = {"tools": [{"type": "custom", "name": "run_sql", "description": "Runs SQL."}]}
    request = (
        ChatRequest("gpt-5")
        .user("count")
        .assistant([ToolCall(id="call_9", name="run_sql", arguments="SELECT 1")])
        .with_option_json("openai_responses", custom)
    )
    assert _refused("openai", request, api="responses") == (
        "the tool call `call_9` of the assistant turn at `messages[1]` got no tool result, and "
        "OpenAI needs a result for each call"
    )


def _responses_input(preset: str, request: ChatRequest) -> list[dict[str, Any]]:
    made = allama.provider(preset, api="responses", api_key="k")
    http, _ = made._prepare(request, stream=False)
    items: list[dict[str, Any]] = http.body["input"]
    return items


def test_the_responses_api_takes_a_result_given_after_the_next_user_turn() -> None:
    """It pairs a call with its output by `call_id`, wherever the output is."""
    request = (
        ChatRequest("gpt-4o")
        .user("x")
        .with_tools([TOOL])
        .assistant([_call("call_0")])
        .user("and?")
        .tool_result("call_0", "1")
    )
    kinds = [item.get("type", item.get("role")) for item in _responses_input("openai", request)]
    assert kinds == ["user", "function_call", "user", "function_call_output"]


def test_xais_responses_api_is_sent_it_as_it_is() -> None:
    items = _responses_input("xai", _one_left())
    assert [item["call_id"] for item in items if item.get("type") == "function_call"] == [
        "call_0",
        "call_1",
    ]


# The shared finder


def test_the_finder_names_the_turn_and_what_follows_by_the_callers_indexes() -> None:
    messages = _one_left().messages
    assert unanswered_calls(messages) == Unanswered(("call_1",), 1, 3, "user")
    assert unanswered_calls(messages, adjacent=False) == Unanswered(("call_1",), 1, 3, "user")
    answered = _one_left().tool_result("call_1", "2").messages
    assert unanswered_calls(answered) == Unanswered(("call_1",), 1, 3, "user")
    assert unanswered_calls(answered, adjacent=False) is None
    found = Unanswered(("a", "b"), 2, None, None)
    assert unanswered_words(found, "X") == (
        "the tool calls `a`, `b` of the assistant turn at `messages[2]` got no tool result "
        "before the end of the conversation, and X needs each call's result right after it"
    )
