"""Tool turns sent back to Ollama (and, for blank arguments, to Gemini): a call of a tool
that takes no arguments from another provider, which ids are Ollama's and go back, tool
results in the order of the calls they answer, and a `tool_choice` without tools."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

import allama
from allama import ChatRequest
from allama.errors import UnsupportedError
from allama.providers import HttpProvider
from allama.types import (
    ChatResponse,
    RequestField,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    Warning,
    WarningKind,
)

MODEL = "llama3.1"
NOW = ToolDefinition(name="now", parameters={"type": "object", "properties": {}})
WEATHER = ToolDefinition(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)


def encode(request: ChatRequest, name: str = "ollama", **options: Any) -> tuple[Any, list[Warning]]:
    target: HttpProvider = allama.provider(name, **options)
    http, warnings = target._prepare(request, stream=False)
    return http.body, warnings


def replying(provider: str, answer: bytes, sent: list[dict[str, Any]], **options: Any) -> Any:
    """`provider` over a transport that answers `answer` and records the bodies sent."""

    def reply(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, content=answer)

    client = httpx2.Client(transport=httpx2.MockTransport(reply))
    return allama.provider(provider, transport=allama.Transport(client=client), **options)


def ollama_answer(*calls: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": "", "tool_calls": list(calls)}
    return {"model": MODEL, "message": message, "done": True, "done_reason": "stop"}


# A call of a tool that takes no arguments, from another provider


OPENAI_NO_ARGUMENTS = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "now", "arguments": ""},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def test_an_openai_call_without_arguments_continues_on_ollama() -> None:
    openai = replying("openai", json.dumps(OPENAI_NO_ARGUMENTS).encode(), [], api_key="k")
    request = ChatRequest("gpt-4o").with_tools([NOW]).user("Time?")
    answer: ChatResponse = openai.chat(request)
    call = answer.tool_calls()[0]
    assert call.arguments == ""
    sent: list[dict[str, Any]] = []
    ollama = replying("ollama", json.dumps(ollama_answer()).encode(), sent)
    follow_up = request.assistant(answer.content).tool_result(call, "12:00")
    ollama.chat(follow_up.model_copy(update={"model": MODEL}))
    assert sent[0]["messages"][1:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_abc", "function": {"name": "now", "arguments": {}}}],
        },
        {"role": "tool", "content": "12:00", "tool_name": "now", "tool_call_id": "call_abc"},
    ]


def blank_call(arguments: str, model: str) -> ChatRequest:
    call = ToolCall(id="call_abc", name="now", arguments=arguments)
    request = ChatRequest(model).with_tools([NOW]).user("Time?").assistant([call])
    return request.tool_result(call, "12:00")


@pytest.mark.parametrize("arguments", ["", " \n\t"])
def test_blank_arguments_go_to_ollama_as_an_empty_object(arguments: str) -> None:
    body, warnings = encode(blank_call(arguments, MODEL))
    assert body["messages"][1]["tool_calls"] == [
        {"id": "call_abc", "function": {"name": "now", "arguments": {}}}
    ]
    assert warnings == []


@pytest.mark.parametrize("arguments", ["", " \n\t"])
def test_blank_arguments_go_to_gemini_as_an_empty_object(arguments: str) -> None:
    body, warnings = encode(blank_call(arguments, "gemini-2.5-flash"), "gemini", api_key="k")
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [{"functionCall": {"id": "call_abc", "name": "now", "args": {}}}],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_abc",
                        "name": "now",
                        "response": {"output": "12:00"},
                    }
                }
            ],
        },
    ]
    assert warnings == []


# Which ids are Ollama's


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_an_ollama_id_of_digits_alone_goes_back(stream: bool) -> None:
    """Ollama's ids are `call_` and 8 random letters or digits: all digits, now and then."""
    given = {
        "id": "call_40719253",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
    }
    missing = {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
    sent: list[dict[str, Any]] = []
    ollama = replying("ollama", (json.dumps(ollama_answer(given, missing)) + "\n").encode(), sent)
    request = ChatRequest(MODEL).with_tools([WEATHER]).user("Weather?")
    if stream:
        chat = ollama.chat_stream(request)
        list(chat)
        answer = chat.response()
    else:
        answer = ollama.chat(request)
    real, stand_in = answer.tool_calls()
    assert (real.id, stand_in.id) == ("call_40719253", "call_1")
    ollama.chat(
        request.assistant(answer.content).tool_result(real, "sunny").tool_result(stand_in, "grey")
    )
    assert sent[-1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_40719253",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                },
                # The stand-in for a call Ollama sent without an id is not sent back.
                {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            ],
        },
        {
            "role": "tool",
            "content": "sunny",
            "tool_name": "get_weather",
            "tool_call_id": "call_40719253",
        },
        {"role": "tool", "content": "grey", "tool_name": "get_weather"},
    ]


def test_only_stand_ins_shorter_than_ollama_ids_are_held_back() -> None:
    calls = [
        ToolCall.of(id, "get_weather", {}) for id in ("call_0", "call_1234567", "call_00000000")
    ]
    request = ChatRequest(MODEL).user("Weather?").assistant(calls)
    body, _ = encode(request)
    assert [call.get("id") for call in body["messages"][1]["tool_calls"]] == [
        None,
        None,
        "call_00000000",
    ]


# `tool_choice` without tools


@pytest.mark.parametrize("choice", [ToolChoice.required(), ToolChoice.tool("now")])
def test_a_forcing_choice_without_tools_says_no_tools_were_given(choice: ToolChoice) -> None:
    request = ChatRequest(MODEL).user("x").with_tool_choice(choice)
    body, warnings = encode(request)
    assert "tools" not in body
    assert [(w.subject.field, w.message) for w in warnings] == [  # type: ignore[union-attr]
        (
            RequestField.TOOL_CHOICE,
            "the request gives no tools to call; `tool_choice` was not sent",
        )
    ]
    with pytest.raises(UnsupportedError) as caught:
        encode(request.with_unsupported_policy(UnsupportedPolicy.ERROR))
    assert caught.value.field is RequestField.TOOL_CHOICE
    assert "the request gives no tools to call" in str(caught.value)


def test_tools_in_the_body_option_are_still_not_forced() -> None:
    tool: dict[str, Any] = {
        "type": "function",
        "function": {"name": "now", "parameters": {"type": "object"}},
    }
    request = (
        ChatRequest(MODEL)
        .user("x")
        .with_tool_choice(ToolChoice.required())
        .with_option_json("ollama", {"tools": [tool]})
    )
    body, warnings = encode(request)
    assert body["tools"] == [tool]
    assert [w.message for w in warnings] == [
        "Ollama has no `tool_choice` and cannot force a tool call; the tools were offered and "
        "the model chooses whether to call one"
    ]


def test_choice_auto_and_none_without_tools_say_nothing() -> None:
    for choice in (ToolChoice.auto(), ToolChoice.none()):
        body, warnings = encode(ChatRequest(MODEL).user("x").with_tool_choice(choice))
        assert "tools" not in body and warnings == []


# Tool results go in the order of the calls they answer: without a `tool_call_id` (the
# `call_<n>` stand-ins are not sent) Ollama pairs a result with its call by position.


def _tool_message(content: str, call_id: str | None = None) -> dict[str, Any]:
    message = {"role": "tool", "content": content, "tool_name": "get_weather"}
    return message if call_id is None else {**message, "tool_call_id": call_id}


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_tool_results_given_out_of_order_go_in_the_order_of_the_calls(stream: bool) -> None:
    calls = [
        {"function": {"name": "get_weather", "arguments": {"city": city}}}
        for city in ("Paris", "Rome")
    ]
    sent: list[dict[str, Any]] = []
    ollama = replying("ollama", (json.dumps(ollama_answer(*calls)) + "\n").encode(), sent)
    request = ChatRequest(MODEL).with_tools([WEATHER]).user("Weather in Paris and Rome?")
    answer = ollama.chat(request)
    paris, rome = answer.tool_calls()
    assert (paris.id, rome.id) == ("call_0", "call_1")
    turn = request.assistant(answer.content)
    for results in ((rome, paris), (paris, rome)):  # out of order, then in order
        answered = turn
        for call in results:
            answered = answered.tool_result(call, f"{call.parsed_arguments()['city']}: sunny")
        if stream:
            chat = ollama.chat_stream(answered)
            list(chat)
            warnings = chat.response().warnings
        else:
            warnings = ollama.chat(answered).warnings
        assert sent[-1]["stream"] is stream
        assert sent[-1]["messages"][1:] == [
            {"role": "assistant", "content": "", "tool_calls": calls},
            _tool_message("Paris: sunny"),
            _tool_message("Rome: sunny"),
        ]
        assert warnings == ()


def test_results_keep_to_the_run_after_their_turn() -> None:
    """Ollama's own ids are sent, and results are put in the order of the calls all the
    same; a result after a user turn stays there, and one answering an earlier turn's call
    goes after this turn's."""
    early = ToolCall.of("call_ab12cd34", "get_weather", {"city": "Oslo"})
    paris = ToolCall.of("call_40719253", "get_weather", {"city": "Paris"})
    rome = ToolCall.of("call_1", "get_weather", {"city": "Rome"})
    request = (
        ChatRequest(MODEL)
        .user("Oslo?")
        .assistant([early])
        .user("And Paris, Rome and Berlin?")
        .assistant([paris, rome])
        .tool_result(rome, "Rome: 30C")
        .tool_result(early, "Oslo: 2C")
        .tool_result(paris, "Paris: 12C")
        .user("Berlin is slow.")
        .tool_result(rome, "Rome again: 31C")
    )
    body, warnings = encode(request)
    assert body["messages"][4:] == [
        _tool_message("Paris: 12C", "call_40719253"),
        _tool_message("Rome: 30C"),
        _tool_message("Oslo: 2C", "call_ab12cd34"),
        {"role": "user", "content": "Berlin is slow."},
        _tool_message("Rome again: 31C"),
    ]
    assert warnings == []


# What an Anthropic turn holds that Ollama takes no part of


ANTHROPIC_SEARCHED: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Search first.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "ENCRYPTED"},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01",
            "name": "web_search",
            "input": {"query": "paris weather"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://weather.example",
                    "title": "Paris",
                    "encrypted_content": "PAGE",
                    "page_age": None,
                }
            ],
        },
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 2},
}


def anthropic_turn(answer: dict[str, Any]) -> ChatRequest:
    """The request after Claude's `answer`, its call answered."""
    claude = replying("anthropic", json.dumps(answer).encode(), [], api_key="k")
    request = ChatRequest("claude-sonnet-4-5").with_tools([WEATHER]).user("Weather in Paris?")
    response: ChatResponse = claude.chat(request)
    request = request.push(response.to_assistant_message())
    return request.tool_result(response.tool_calls()[0], "sunny")


def test_an_anthropic_turns_server_blocks_and_redacted_thinking_left_out_are_said() -> None:
    request = anthropic_turn(ANTHROPIC_SEARCHED)
    body, warnings = encode(request.model_copy(update={"model": MODEL}))
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Checking.",
            "thinking": "Search first.",
            "tool_calls": [
                {
                    "id": "toolu_01",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {
            "role": "tool",
            "content": "sunny",
            "tool_name": "get_weather",
            "tool_call_id": "toolu_01",
        },
    ]
    assert [(w.kind, w.subject.field, w.message) for w in warnings] == [  # type: ignore[union-attr]
        (
            WarningKind.APPROXIMATED,
            RequestField.REASONING,
            "Ollama takes back reasoning as text alone; encrypted reasoning with no text was "
            "left out of the conversation",
        ),
        (
            WarningKind.APPROXIMATED,
            RequestField.MESSAGES,
            "the server tool blocks of an Anthropic turn (a server tool's calls and results, in a "
            "finished turn, a paused one, or one whose code execution waits on tool calls) were "
            "left out: only Anthropic takes them back",
        ),
    ]
    # The words every Chat Completions encoder says of the same turn.
    _, said = encode(request.model_copy(update={"model": "gpt-4o"}), "openai", api_key="k")
    assert (warnings[1].subject, warnings[1].message) in [(w.subject, w.message) for w in said]


def test_an_anthropic_turn_of_signed_thinking_alone_goes_without_a_word() -> None:
    content = [
        block
        for block in ANTHROPIC_SEARCHED["content"]
        if block["type"] in ("thinking", "text", "tool_use")
    ]
    request = anthropic_turn({**ANTHROPIC_SEARCHED, "content": content})
    body, warnings = encode(request.model_copy(update={"model": MODEL}))
    assert body["messages"][1]["thinking"] == "Search first."
    assert warnings == []
