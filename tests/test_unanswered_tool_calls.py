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
from allama.adapters._answered import (
    Extra,
    Unanswered,
    extra_result,
    unanswered_calls,
    unanswered_words,
)
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


# A result beyond its turn's calls, and the turn a result was due before, alike everywhere

MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash"}
EVERY_CHECK = [
    ("openai", "OpenAI", {}),
    ("azure-openai", "Azure OpenAI", AZURE),
    ("deepseek", "DeepSeek", {}),
    ("mistral", "Mistral", {}),
    ("anthropic", "Anthropic", {}),
    ("gemini", "Gemini", {}),
]


def _on(preset: str) -> ChatRequest:
    return ChatRequest(MODELS.get(preset, "gpt-4o")).user("x").with_tools([TOOL])


def _body(preset: str, request: ChatRequest) -> dict[str, Any]:
    made = allama.provider(preset, api_key="k")
    http, _ = made._prepare(request, stream=False)
    body: dict[str, Any] = http.body
    return body


@pytest.mark.parametrize(("preset", "display", "options"), EVERY_CHECK)
def test_a_second_result_for_one_call_is_refused_unsent(
    preset: str, display: str, options: dict[str, Any]
) -> None:
    request = _on(preset).assistant([_call("c0")]).tool_result("c0", "1").tool_result("c0", "2")
    assert _refused(preset, request.user("z"), **options) == (
        "the tool result at `messages[3]` (for `c0`) answers a call of the assistant turn at "
        f"`messages[1]` that another result already answered, and {display} takes one result "
        "for each call"
    )


@pytest.mark.parametrize(("preset", "display", "options"), EVERY_CHECK)
def test_a_result_for_an_earlier_turns_call_is_refused_unsent(
    preset: str, display: str, options: dict[str, Any]
) -> None:
    request = (
        _on(preset)
        .assistant([_call("c0")])
        .tool_result("c0", "1")
        .user("y")
        .assistant([_call("c1")])
        .tool_result("c1", "2")
        .tool_result("c0", "3")
        .user("z")
    )
    assert _refused(preset, request, **options) == (
        "the tool result at `messages[6]` (for `c0`) answers no call of the assistant turn at "
        f"`messages[4]` before it, and {display} needs each result right after the call it "
        "answers"
    )


@pytest.mark.parametrize("preset", ["openai", "anthropic"])
def test_a_result_after_a_turn_without_calls_is_refused_unsent(preset: str) -> None:
    request = _on(preset).assistant([_call("c0")]).tool_result("c0", "1").assistant("Hello.")
    display = "OpenAI" if preset == "openai" else "Anthropic"
    assert _refused(preset, request.tool_result("c0", "2").user("z")) == (
        "the tool result at `messages[4]` (for `c0`) comes after no assistant turn with tool "
        f"calls, and {display} needs each result right after the call it answers"
    )


@pytest.mark.parametrize("preset", ["openai", "anthropic", "gemini"])
def test_calls_sharing_an_id_each_answered_once_are_still_sent(preset: str) -> None:
    request = (
        _on(preset)
        .assistant([_call("c0"), _call("c0", "b")])
        .tool_result("c0", "1")
        .tool_result("c0", "2")
        .user("go")
    )
    body = _body(preset, request)
    if preset == "openai":
        sent = [turn["content"] for turn in body["messages"] if turn["role"] == "tool"]
    elif preset == "anthropic":
        sent = [block["content"] for block in body["messages"][2]["content"][:2]]
    else:
        sent = [
            part["functionResponse"]["response"]["output"] for part in body["contents"][2]["parts"]
        ]
    assert sent == ["1", "2"]


def test_the_responses_api_is_sent_a_second_result_as_it_is() -> None:
    # Its results may answer the calls of a `previous_response_id`: none is counted extra.
    request = _on("openai").assistant([_call("c0")]).tool_result("c0", "1").tool_result("c0", "2")
    made = allama.provider("openai", api_key="k", api="responses")
    http, _ = made._prepare(request.user("z"), stream=False)
    outputs = [item for item in http.body["input"] if item.get("type") == "function_call_output"]
    assert [item["output"] for item in outputs] == ["1", "2"]


@pytest.mark.parametrize(("preset", "display"), [("anthropic", "Anthropic"), ("gemini", "Gemini")])
def test_partial_results_name_the_next_assistant_turn_as_chat_completions_does(
    preset: str, display: str
) -> None:
    request = (
        _on(preset)
        .assistant([_call("c0"), _call("c1", "b")])
        .tool_result("c0", "1")
        .assistant("ok")
        .user("y")
    )
    assert _refused(preset, request) == (
        "the tool call `c1` of the assistant turn at `messages[1]` got no tool result before "
        f"the next assistant turn (`messages[3]`), and {display} needs each call's result "
        "right after it"
    )


@pytest.mark.parametrize(("preset", "display"), [("anthropic", "Anthropic"), ("gemini", "Gemini")])
def test_partial_results_ending_the_conversation_name_its_end(preset: str, display: str) -> None:
    request = _on(preset).assistant([_call("c0"), _call("c1", "b")]).tool_result("c0", "1")
    assert _refused(preset, request) == (
        "the tool call `c1` of the assistant turn at `messages[1]` got no tool result before "
        f"the end of the conversation, and {display} needs each call's result right after it"
    )


def test_the_finder_of_extra_results_pairs_calls_sharing_an_id_in_order() -> None:
    shared = (
        _on("openai")
        .assistant([_call("c0"), _call("c0", "b")])
        .tool_result("c0", "1")
        .user("y")
        .tool_result("c0", "2")
    )
    assert extra_result(shared.messages, merged=True) is None
    unknown = _on("openai").assistant([_call("c0")]).tool_result("c0", "1").tool_result("zz", "2")
    assert extra_result(unknown.messages) is None  # left to the endpoint, as before
    assert extra_result(shared.messages) == Extra(4, "c0", None, False)
    merged = _on("openai").assistant([_call("c0")]).assistant([_call("c1")])
    answered = merged.tool_result("c1", "1").tool_result("c0", "2").tool_result("c1", "3")
    assert extra_result(answered.messages, merged=True) == Extra(5, "c1", 1, True)


@pytest.mark.parametrize(("preset", "display"), [("anthropic", "Anthropic"), ("gemini", "Gemini")])
def test_merged_turns_are_named_in_the_order_of_their_indexes(preset: str, display: str) -> None:
    # Consecutive assistant messages are one turn there, named by each message's index:
    # `messages[9]` before `messages[10]`, by number, not as text.
    request = _on(preset)
    for number in range(4):
        request = request.assistant([_call(f"c{number}")]).tool_result(f"c{number}", "1")
    request = request.assistant([_call("c4")]).assistant([_call("c5", "b")]).user("y")
    assert _refused(preset, request) == (
        "the tool calls `c4`, `c5` of the assistant turn at `messages[9]`, `messages[10]` got no "
        f"tool result before the next user turn (`messages[11]`), and {display} needs each "
        "call's result right after it"
    )
