"""Tool-call ids sent as the target takes them, whichever provider made the calls: unique
in the request for Anthropic and Mistral (allama's stand-ins `call_0`, ... repeat across
turns), in Anthropic's characters (Claude behind a Chat Completions gateway too), 9 letters
and digits for Mistral's models; and DeepSeek's `reasoning_content` on every tool-calling
turn, through `allama.provider(...)`."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2

import allama
from allama import ChatRequest, ToolDefinition
from allama.transport import Transport
from allama.types import AssistantMessage, Reasoning, TextPart, ToolCall


class Recorder:
    """A mock endpoint answering each request with the next answer (the last one again)."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, http: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(http.read()))
        body = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return httpx2.Response(
            200, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )


def provider(preset: str, *answers: dict[str, Any], **options: Any) -> tuple[Any, Recorder]:
    recorder = Recorder(*answers)
    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(recorder)))
    return allama.provider(preset, api_key="k", transport=transport, **options), recorder


WEATHER = ToolDefinition(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)

CLAUDE_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Done."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 2},
}


def completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "c-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


def call(id: str, city: str) -> dict[str, Any]:
    arguments = json.dumps({"city": city})
    return {"id": id, "type": "function", "function": {"name": "weather", "arguments": arguments}}


def gemini_call(city: str) -> dict[str, Any]:
    """A Gemini 2.5 answer calling `weather`, its `functionCall` without an id."""
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "weather", "args": {"city": city}}}],
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-2.5-flash",
    }


def gemini_loop() -> tuple[ChatRequest, list[str]]:
    """Two turns of a tool loop on Gemini, each answered; and the calls' ids as decoded."""
    gemini, _ = provider("gemini", gemini_call("Paris"), gemini_call("Rome"))
    request = ChatRequest("gemini-2.5-flash").user("Paris, then Rome?").with_tools([WEATHER])
    ids = []
    for result in ("sunny", "rainy"):
        response = gemini.chat(request)
        request = request.push(response.to_assistant_message())
        for tool_call in response.tool_calls():
            ids.append(tool_call.id)
            request = request.tool_result(tool_call, result)
    return request, ids


def continued(request: ChatRequest, model: str) -> ChatRequest:
    return ChatRequest(model).extend_messages(request.messages).with_tools(request.tools)


def anthropic_ids(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Each `tool_use` and `tool_result` block sent, as (type, id), in order."""
    return [
        (block["type"], block.get("id") or block["tool_use_id"])
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] in ("tool_use", "tool_result")
    ]


def chat_ids(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Each tool call's id and each tool result's `tool_call_id` sent, in order."""
    ids = []
    for message in body["messages"]:
        ids += [("call", tool_call["id"]) for tool_call in message.get("tool_calls", [])]
        if message["role"] == "tool":
            ids.append(("result", message["tool_call_id"]))
    return ids


def repeated_stand_ins() -> ChatRequest:
    """Two turns whose calls both have the stand-in id `call_0`, and a third call whose
    own id is what the second one would be renamed to."""
    return (
        ChatRequest("m")
        .user("Paris, then Rome, then Oslo?")
        .assistant([ToolCall.of("call_0", "weather", {"city": "Paris"})])
        .tool_result("call_0", "sunny")
        .assistant([ToolCall.of("call_0", "weather", {"city": "Rome"})])
        .tool_result("call_0", "rainy")
        .assistant([ToolCall.of("call_0_1", "weather", {"city": "Oslo"})])
        .tool_result("call_0_1", "snowy")
        .with_tools([WEATHER])
    )


MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")


# Finding 1 and 2: Anthropic


def test_a_gemini_tool_loop_continued_on_anthropic_sends_unique_tool_use_ids() -> None:
    request, ids = gemini_loop()
    claude, recorder = provider("anthropic", CLAUDE_OK)
    claude.chat(continued(request, "claude-sonnet-4-5"))
    first = ids[0]
    second = ids[1] if ids[1] != ids[0] else f"{ids[0]}_1"  # the stand-ins repeat
    assert anthropic_ids(recorder.bodies[0]) == [
        ("tool_use", first),
        ("tool_result", first),
        ("tool_use", second),
        ("tool_result", second),
    ]
    assert first != second


def test_repeated_ids_go_to_anthropic_unique_each_result_answering_the_latest_call() -> None:
    claude, recorder = provider("anthropic", CLAUDE_OK)
    claude.chat(continued(repeated_stand_ins(), "claude-sonnet-4-5"))
    assert anthropic_ids(recorder.bodies[0]) == [
        ("tool_use", "call_0"),
        ("tool_result", "call_0"),
        ("tool_use", "call_0_1"),
        ("tool_result", "call_0_1"),
        ("tool_use", "call_0_1_1"),
        ("tool_result", "call_0_1_1"),
    ]
    results = [
        block["content"]
        for message in recorder.bodies[0]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert results == ["sunny", "rainy", "snowy"]


def test_a_kimi_tool_call_continued_on_anthropic_gets_an_id_in_its_characters() -> None:
    kimi = completion({"content": None, "tool_calls": [call("functions.weather:0", "Paris")]})
    groq, _ = provider("groq", kimi, completion({"content": "Sunny."}))
    request = ChatRequest("moonshotai/kimi-k2-instruct-0905").user("Paris?").with_tools([WEATHER])
    response = groq.chat(request)
    request = request.push(response.to_assistant_message())
    request = request.tool_result(response.tool_calls()[0], "sunny")
    claude, recorder = provider("anthropic", CLAUDE_OK)
    claude.chat(continued(request, "claude-sonnet-4-5"))
    assert recorder.bodies[0]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "functions_weather_0",
                    "name": "weather",
                    "input": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "functions_weather_0", "content": "sunny"}
            ],
        },
    ]


def test_anthropic_keeps_its_own_ids_and_a_result_that_answers_no_call() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Paris?")
        .assistant([ToolCall.of("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "weather", {"city": "Paris"})])
        .tool_result("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "sunny")
        .tool_result("functions.weather:9", "lost")
        .with_tools([WEATHER])
    )
    claude, recorder = provider("anthropic", CLAUDE_OK)
    claude.chat(request)
    assert anthropic_ids(recorder.bodies[0]) == [
        ("tool_use", "toolu_01EEe2V5HD1Ac4rKiUR4HD2T"),
        ("tool_result", "toolu_01EEe2V5HD1Ac4rKiUR4HD2T"),
        ("tool_result", "functions.weather:9"),
    ]


# Claude behind a Chat Completions gateway: Anthropic's rule, as the anthropic preset maps


def kimi_turn() -> ChatRequest:
    """A call Kimi K2 made on Groq (its id `functions.weather:0`), answered."""
    kimi = completion({"content": None, "tool_calls": [call("functions.weather:0", "Paris")]})
    groq, _ = provider("groq", kimi)
    request = ChatRequest("moonshotai/kimi-k2-instruct-0905").user("Paris?").with_tools([WEATHER])
    response = groq.chat(request)
    request = request.push(response.to_assistant_message())
    return request.tool_result(response.tool_calls()[0], "sunny")


def test_a_kimi_tool_call_continued_on_claude_through_openrouter_gets_an_id_it_takes() -> None:
    openrouter, recorder = provider("openrouter", completion({"content": "Sunny."}))
    openrouter.chat(continued(kimi_turn(), "anthropic/claude-sonnet-4.5"))
    assert recorder.bodies[0]["messages"][1:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "functions_weather_0",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions_weather_0", "content": "sunny"},
    ]


def test_a_gemini_tool_loop_continued_on_claude_through_openrouter_sends_unique_ids() -> None:
    request, _ = gemini_loop()
    openrouter, recorder = provider("openrouter", completion({"content": "Done."}))
    openrouter.chat(continued(request, "anthropic/claude-sonnet-4.5"))
    claude, direct = provider("anthropic", CLAUDE_OK)
    claude.chat(continued(request, "claude-sonnet-4-5"))
    assert chat_ids(recorder.bodies[0]) == [
        ("call", "call_0"),
        ("result", "call_0"),
        ("call", "call_0_1"),
        ("result", "call_0_1"),
    ]
    # The ids Anthropic's own API is sent.
    assert [id for _, id in chat_ids(recorder.bodies[0])] == [
        id for _, id in anthropic_ids(direct.bodies[0])
    ]


def test_a_claude_model_on_any_chat_endpoint_gets_ids_as_anthropic_takes_them() -> None:
    litellm, recorder = provider(
        "openai-compatible", completion({"content": "Done."}), base_url="http://proxy/v1"
    )
    litellm.chat(continued(repeated_stand_ins(), "claude-sonnet-4-5"))
    litellm.chat(continued(parallel_calls_with_one_id("x"), "bedrock/claude-sonnet-4-5"))
    assert chat_ids(recorder.bodies[0]) == [
        ("call", "call_0"),
        ("result", "call_0"),
        ("call", "call_0_1"),
        ("result", "call_0_1"),
        ("call", "call_0_1_1"),
        ("result", "call_0_1_1"),
    ]
    assert chat_ids(recorder.bodies[1]) == [
        ("call", "call_0"),
        ("call", "call_0_1"),
        ("result", "call_0"),
        ("result", "call_0_1"),
        ("call", "call_0_2"),
        ("result", "call_0_2"),
    ]
    results = [m["content"] for m in recorder.bodies[1]["messages"] if m["role"] == "tool"]
    assert results == ["sunny", "rainy", "snowy"]


def test_a_claude_model_behind_openais_preset_gets_ids_both_take() -> None:
    """A proxy at `OPENAI_BASE_URL` serving Claude: Anthropic's characters, and OpenAI's
    40 characters, which vLLM's `chatcmpl-tool-<hex>` passes."""
    vllm_id = "chatcmpl-tool-" + "a1" * 16
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Paris and Rome?")
        .assistant(
            [
                ToolCall.of("functions.weather:0", "weather", {"city": "Paris"}),
                ToolCall.of(vllm_id, "weather", {"city": "Rome"}),
            ]
        )
        .tool_result(vllm_id, "rainy")
        .tool_result("functions.weather:0", "sunny")
        .with_tools([WEATHER])
    )
    proxy, recorder = provider(
        "openai", completion({"content": "Done."}), base_url="http://proxy/v1"
    )
    proxy.chat(request)
    assert chat_ids(recorder.bodies[0]) == [
        ("call", "functions_weather_0"),
        ("call", "call_inPsenr3WuenYT1bISFZsnbM"),
        ("result", "functions_weather_0"),
        ("result", "call_inPsenr3WuenYT1bISFZsnbM"),
    ]
    results = [m["content"] for m in recorder.bodies[0]["messages"] if m["role"] == "tool"]
    assert results == ["sunny", "rainy"]


# Claude and Mistral behind a gateway's Responses API: their rules, as on Chat Completions

RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "m",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8},
}


def responses_ids(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Each `function_call` and `function_call_output` input item's `call_id`, in order."""
    kinds = {"function_call": "call", "function_call_output": "result"}
    return [(kinds[item["type"]], item["call_id"]) for item in body["input"] if "call_id" in item]


def test_a_kimi_tool_call_continued_on_claude_through_openrouters_responses_api() -> None:
    openrouter, recorder = provider("openrouter", RESPONSE, api="responses")
    openrouter.chat(continued(kimi_turn(), "anthropic/claude-sonnet-4.5"))
    assert recorder.bodies[0]["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "functions_weather_0",
            "name": "weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "functions_weather_0", "output": "sunny"},
    ]
    # Another model takes the id as it is.
    openrouter.chat(continued(kimi_turn(), "openai/gpt-5"))
    assert responses_ids(recorder.bodies[1]) == [
        ("call", "functions.weather:0"),
        ("result", "functions.weather:0"),
    ]


def test_a_mistral_model_on_openrouters_responses_api_gets_nine_character_ids() -> None:
    openrouter, recorder = provider("openrouter", RESPONSE, api="responses")
    openrouter.chat(continued(repeated_stand_ins(), "mistralai/mistral-large-2411"))
    assert responses_ids(recorder.bodies[0]) == [
        ("call", "4bVnhQ0u9"),
        ("result", "4bVnhQ0u9"),
        ("call", "ItVKKg85p"),
        ("result", "ItVKKg85p"),
        ("call", "l09gmuiS4"),
        ("result", "l09gmuiS4"),
    ]


# Finding 1 and 2: Mistral


def test_an_openai_tool_turn_continued_on_mistral_gets_nine_character_ids() -> None:
    first = completion(
        {"content": None, "tool_calls": [call("call_injwxidE5XUzmiKVfOH3rxf2", "Paris")]},
        "tool_calls",
    )
    openai, _ = provider("openai", first)
    request = ChatRequest("gpt-4o").user("Paris?").with_tools([WEATHER])
    response = openai.chat(request)
    request = request.push(response.to_assistant_message())
    request = request.tool_result(response.tool_calls()[0], "sunny")
    mistral, recorder = provider("mistral", completion({"content": "Sunny."}))
    mistral.chat(continued(request, "mistral-large-latest"))
    assert recorder.bodies[0]["messages"][1:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "940NyfUJh",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "940NyfUJh", "content": "sunny"},
    ]


def test_a_gemini_tool_loop_continued_on_mistral_gets_unique_nine_character_ids() -> None:
    request, _ = gemini_loop()
    mistral, recorder = provider("mistral", completion({"content": "Done."}))
    mistral.chat(continued(request, "mistral-large-latest"))
    ids = chat_ids(recorder.bodies[0])
    assert [kind for kind, _ in ids] == ["call", "result", "call", "result"]
    assert ids[0][1] == ids[1][1] and ids[2][1] == ids[3][1]
    assert ids[0][1] != ids[2][1]
    assert all(MISTRAL_ID.fullmatch(id) for _, id in ids)


def test_repeated_ids_go_to_mistral_unique_and_the_same_on_every_request() -> None:
    mistral, recorder = provider("mistral", completion({"content": "Done."}))
    whole = continued(repeated_stand_ins(), "mistral-large-latest")
    start = ChatRequest("mistral-large-latest").extend_messages(whole.messages[:3])
    mistral.chat(start.with_tools([WEATHER]))
    mistral.chat(whole)
    mistral.chat(whole)
    expected = [
        ("call", "4bVnhQ0u9"),
        ("result", "4bVnhQ0u9"),
        ("call", "ItVKKg85p"),
        ("result", "ItVKKg85p"),
        ("call", "l09gmuiS4"),
        ("result", "l09gmuiS4"),
    ]
    # The conversation's start goes as before when it grows (prompt caching).
    assert chat_ids(recorder.bodies[0]) == expected[:2]
    assert chat_ids(recorder.bodies[1]) == chat_ids(recorder.bodies[2]) == expected


def test_mistral_keeps_its_own_ids() -> None:
    request = (
        ChatRequest("mistral-large-latest")
        .user("Paris?")
        .assistant([ToolCall.of("D681PevKs", "weather", {"city": "Paris"})])
        .tool_result("D681PevKs", "sunny")
        .with_tools([WEATHER])
    )
    mistral, recorder = provider("mistral", completion({"content": "Sunny."}))
    mistral.chat(request)
    assert chat_ids(recorder.bodies[0]) == [("call", "D681PevKs"), ("result", "D681PevKs")]


def test_a_mistral_model_on_another_endpoint_gets_nine_character_ids() -> None:
    vllm, recorder = provider("vllm", completion({"content": "Done."}))
    vllm.chat(continued(repeated_stand_ins(), "mistralai/Mistral-Small-3.1-24B-Instruct-2503"))
    assert chat_ids(recorder.bodies[0])[:2] == [("call", "4bVnhQ0u9"), ("result", "4bVnhQ0u9")]


def test_other_models_get_the_ids_as_given() -> None:
    openai, recorder = provider("openai", completion({"content": "Done."}))
    openai.chat(continued(repeated_stand_ins(), "gpt-4o"))
    assert chat_ids(recorder.bodies[0]) == [
        ("call", "call_0"),
        ("result", "call_0"),
        ("call", "call_0"),
        ("result", "call_0"),
        ("call", "call_0_1"),
        ("result", "call_0_1"),
    ]


# Finding 3: DeepSeek's `reasoning_content` on every tool-calling turn


def deepseek_turn(*content: TextPart | ToolCall | Reasoning) -> dict[str, Any]:
    request = ChatRequest("deepseek-v4-flash").user("Paris?")
    request = request.push(AssistantMessage(content=content))
    for block in content:  # DeepSeek refuses a call left unanswered
        if isinstance(block, ToolCall):
            request = request.tool_result(block, "sunny")
    request = request.user("Thanks.").with_tools([WEATHER])
    deepseek, recorder = provider("deepseek", completion({"content": "ok"}))
    deepseek.chat(request)
    turn: dict[str, Any] = recorder.bodies[0]["messages"][1]
    return turn


def test_deepseek_takes_a_tool_turn_made_elsewhere_with_empty_reasoning_content() -> None:
    turn = deepseek_turn(ToolCall.of("call_injwxidE5XUzmiKVfOH3rxf2", "weather", {"city": "P"}))
    assert turn == {
        "role": "assistant",
        "reasoning_content": "",
        "tool_calls": [
            {
                "id": "call_injwxidE5XUzmiKVfOH3rxf2",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"P"}'},
            }
        ],
    }


def test_deepseek_takes_back_its_own_tool_turn_whose_reasoning_was_empty() -> None:
    first = completion(
        {"content": "", "reasoning_content": "", "tool_calls": [call("call_00_abc", "Paris")]},
        "tool_calls",
    )
    deepseek, recorder = provider("deepseek", first, completion({"content": "Sunny."}))
    request = ChatRequest("deepseek-v4-flash").user("Paris?").with_tools([WEATHER])
    response = deepseek.chat(request)
    request = request.push(response.to_assistant_message())
    deepseek.chat(request.tool_result(response.tool_calls()[0], "sunny"))
    assert recorder.bodies[1]["messages"][1] == {
        "role": "assistant",
        "reasoning_content": "",
        "tool_calls": [call("call_00_abc", "Paris")],
    }


def test_deepseek_text_turn_without_reasoning_goes_without_the_field() -> None:
    assert deepseek_turn(TextPart(text="It is sunny.")) == {
        "role": "assistant",
        "content": "It is sunny.",
    }


def parallel_calls_with_one_id(model: str) -> ChatRequest:
    """One turn of two parallel calls that share an id (a server that gives every call the
    same one), each answered, then the same id again in a later turn."""
    return (
        ChatRequest(model)
        .user("Paris and Rome?")
        .assistant(
            [
                ToolCall.of("call_0", "weather", {"city": "Paris"}),
                ToolCall.of("call_0", "weather", {"city": "Rome"}),
            ]
        )
        .tool_result("call_0", "sunny")
        .tool_result("call_0", "rainy")
        .assistant([ToolCall.of("call_0", "weather", {"city": "Oslo"})])
        .tool_result("call_0", "snowy")
        .with_tools([WEATHER])
    )


def test_parallel_calls_sharing_an_id_each_get_their_own_result_on_anthropic() -> None:
    claude, recorder = provider("anthropic", CLAUDE_OK)
    claude.chat(parallel_calls_with_one_id("claude-sonnet-4-5"))
    assert anthropic_ids(recorder.bodies[0]) == [
        ("tool_use", "call_0"),
        ("tool_use", "call_0_1"),
        ("tool_result", "call_0"),
        ("tool_result", "call_0_1"),
        ("tool_use", "call_0_2"),
        ("tool_result", "call_0_2"),
    ]


def test_parallel_calls_sharing_an_id_each_get_their_own_result_on_mistral() -> None:
    mistral, recorder = provider("mistral", completion({"content": "Done."}))
    mistral.chat(parallel_calls_with_one_id("mistral-large-latest"))
    calls = [i for kind, i in chat_ids(recorder.bodies[0]) if kind == "call"]
    assert len(set(calls)) == 3
    assert chat_ids(recorder.bodies[0]) == [
        ("call", calls[0]),
        ("call", calls[1]),
        ("result", calls[0]),
        ("result", calls[1]),
        ("call", calls[2]),
        ("result", calls[2]),
    ]
