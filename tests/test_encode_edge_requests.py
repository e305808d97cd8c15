"""Requests the caller may build that a provider refuses as sent: each encoder sends what
the provider takes, and says what it left out."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

import allama
from allama.errors import InvalidRequestError, UnsupportedError
from allama.types import (
    ChatRequest,
    ImagePart,
    Reasoning,
    RequestField,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    WarningKind,
)

PROVIDERS = {
    "openai": (lambda: allama.provider("openai", api_key="k"), "gpt-4o"),
    "responses": (lambda: allama.provider("openai", api_key="k", api="responses"), "gpt-4o"),
    "anthropic": (lambda: allama.provider("anthropic", api_key="k"), "claude-sonnet-4-5"),
    "gemini": (lambda: allama.provider("gemini", api_key="k"), "gemini-2.5-flash"),
}


def _sent(name: str, request: ChatRequest) -> tuple[dict[str, Any], list[Any]]:
    make, _ = PROVIDERS[name]
    http, warnings = make()._prepare(request, stream=False)
    return http.body, list(warnings)


@pytest.mark.parametrize("name", sorted(PROVIDERS))
@pytest.mark.parametrize("choice", [ToolChoice.required(), ToolChoice.tool("lookup")])
def test_a_tool_choice_without_tools_is_not_sent(name: str, choice: ToolChoice) -> None:
    # A last turn asked without tools (`with_tools([])`) keeps its choice: OpenAI, Anthropic
    # and Gemini answer 400 to a choice with no tools ("tool_choice may only be specified
    # while providing tools").
    model = PROVIDERS[name][1]
    request = ChatRequest(model).user("Sum it up.").with_tool_choice(choice).with_tools([])
    body, warnings = _sent(name, request)
    assert "tool_choice" not in body and "toolConfig" not in body
    assert [(w.kind, w.message) for w in warnings if w.is_about(RequestField.TOOL_CHOICE)] == [
        (
            WarningKind.UNSUPPORTED,
            "the request gives no tools to call; `tool_choice` was not sent",
        )
    ]
    strict = request.with_unsupported_policy(UnsupportedPolicy.ERROR)
    with pytest.raises(UnsupportedError) as caught:
        _sent(name, strict)
    assert caught.value.field is RequestField.TOOL_CHOICE
    # A choice that asks for no call is no loss: left out without a word.
    quiet = request.with_tool_choice(ToolChoice.none())
    body, warnings = _sent(name, quiet)
    assert "tool_choice" not in body and "toolConfig" not in body
    assert not [w for w in warnings if w.is_about(RequestField.TOOL_CHOICE)]


@pytest.mark.parametrize("name", [*sorted(PROVIDERS), "ollama"])
def test_a_named_tool_choice_for_a_tool_not_offered_is_refused_unsent(name: str) -> None:
    # Providers answer 400 to a choice of a tool the request does not hold (a misspelt name,
    # or tools of an earlier turn). Body-option tools may hold it: those go as they are.
    sent: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    preset, options, model = {
        "openai": ("openai", {"api_key": "k"}, "gpt-4o"),
        "responses": ("openai", {"api_key": "k", "api": "responses"}, "gpt-4o"),
        "anthropic": ("anthropic", {"api_key": "k"}, "claude-sonnet-4-5"),
        "gemini": ("gemini", {"api_key": "k"}, "gemini-2.5-flash"),
        "ollama": ("ollama", {}, "llama3.1"),
    }[name]
    target = allama.provider(preset, transport=transport, **options)
    request = (
        ChatRequest(model)
        .user("Look it up.")
        .with_tools([ToolDefinition(name="lookup"), ToolDefinition(name="save")])
        .with_tool_choice(ToolChoice.tool("look_up"))
    )
    with pytest.raises(InvalidRequestError) as caught:
        target.chat(request)
    assert str(caught.value) == (
        "`tool_choice` names the tool `look_up`, which is not among the request's tools"
    )
    assert sent == []
    namespace = {
        "openai": "openai_compat",
        "responses": "openai_responses",
        "anthropic": "anthropic",
        "gemini": "gemini",
        "ollama": "ollama",
    }[name]
    theirs = request.with_option_json(namespace, {"tools": [{"type": "function", "x": 1}]})
    with pytest.raises(allama.Error) as failed:
        target.chat(theirs)
    assert not isinstance(failed.value, InvalidRequestError)
    assert len(sent) >= 1


def test_a_tool_choice_beside_the_providers_own_tools_in_the_body_is_sent() -> None:
    # Server tools given as body fields (Anthropic's web search) are tools all the same.
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Look it up.")
        .with_tool_choice(ToolChoice.tool("web_search"))
        .with_option_json("anthropic", {"tools": [search]})
    )
    body, warnings = _sent("anthropic", request)
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "web_search",
        "disable_parallel_tool_use": True,
    }
    assert body["tools"] == [search]
    assert not [w for w in warnings if w.is_about(RequestField.TOOL_CHOICE)]


@pytest.mark.parametrize(
    ("update", "field", "message"),
    [
        (
            {"temperature": 1.5},
            RequestField.TEMPERATURE,
            "Anthropic takes `temperature` from 0 to 1; 1.5 was left out",
        ),
        (
            {"top_p": 0.5, "reasoning_effort": "low"},
            RequestField.TOP_P,
            "Anthropic takes `top_p` from 0.95 to 1 with thinking on; 0.5 was left out",
        ),
    ],
)
def test_anthropic_sampling_outside_its_ranges_is_left_out(
    update: dict[str, Any], field: RequestField, message: str
) -> None:
    request = ChatRequest("claude-sonnet-4-5").user("Hi").model_copy(update=update)
    body, warnings = _sent("anthropic", request)
    assert field.value not in body
    assert [w.message for w in warnings if w.is_about(field)] == [message]
    # Inside the ranges, sent as asked.
    body, _ = _sent(
        "anthropic",
        ChatRequest("claude-sonnet-4-5").user("Hi").model_copy(update={"temperature": 0.7}),
    )
    assert body["temperature"] == 0.7
    thinking = {"top_p": 0.97, "reasoning_effort": "low"}
    body, _ = _sent(
        "anthropic", ChatRequest("claude-sonnet-4-5").user("Hi").model_copy(update=thinking)
    )
    assert body["top_p"] == 0.97


def test_anthropic_leaves_out_text_of_nothing_but_whitespace() -> None:
    # "text content blocks must contain non-whitespace text"
    request = ChatRequest("claude-sonnet-4-5").user("Hi").user(" \n")
    body, _ = _sent("anthropic", request)
    assert body["messages"] == [{"role": "user", "content": "Hi"}]
    request = ChatRequest("claude-sonnet-4-5").user("Hi").user("\t")
    assert _sent("anthropic", request)[0]["messages"] == [{"role": "user", "content": "Hi"}]
    # A system or developer message of whitespace alone too ("system: text content blocks
    # must contain non-whitespace text").
    request = ChatRequest("claude-sonnet-4-5").system("   \n").developer(" ").user("Hi")
    assert "system" not in _sent("anthropic", request)[0]
    request = ChatRequest("claude-sonnet-4-5").system(" ").system("Be brief.").user("Hi")
    assert _sent("anthropic", request)[0]["system"] == [{"type": "text", "text": "Be brief."}]


def test_an_anthropic_prefill_is_sent_without_the_whitespace_it_ends_with() -> None:
    # "final assistant content cannot end with trailing whitespace"
    request = ChatRequest("claude-sonnet-4-5").user("Name a colour.").assistant("Answer: ")
    body, warnings = _sent("anthropic", request)
    assert body["messages"][-1] == {"role": "assistant", "content": "Answer:"}
    assert [w.message for w in warnings if w.is_about(RequestField.MESSAGES)] == [
        "the last assistant message (prefill) was sent without the whitespace it ends with, "
        "which Anthropic refuses"
    ]


def test_a_gemini_seed_beyond_32_bits_is_left_out() -> None:
    # `generationConfig.seed` is an int32 ("Invalid value at 'generation_config.seed'").
    request = ChatRequest("gemini-2.5-flash").user("Hi").with_seed(3_000_000_000)
    body, warnings = _sent("gemini", request)
    assert "seed" not in body.get("generationConfig", {})
    assert [w.message for w in warnings if w.is_about(RequestField.SEED)] == [
        "Gemini takes a seed of 32 bits; 3000000000 was left out"
    ]
    body, _ = _sent("gemini", ChatRequest("gemini-2.5-flash").user("Hi").with_seed(-(2**31)))
    assert body["generationConfig"]["seed"] == -(2**31)


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_text_cut_between_the_halves_of_a_character_is_an_allama_error_before_sending(
    name: str,
) -> None:
    # Half of a surrogate pair is no character: UTF-8 cannot carry it. A caller catching
    # `allama.Error` sees it, and nothing is sent.
    sent: list[Any] = []

    def handler(http: httpx2.Request) -> httpx2.Response:
        sent.append(http)
        return httpx2.Response(500)

    transport = allama.Transport(client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    options: dict[str, Any] = {"api": "responses"} if name == "responses" else {}
    preset = "openai" if name == "responses" else name
    provider = allama.provider(preset, api_key="k", transport=transport, **options)
    with pytest.raises(InvalidRequestError) as caught:
        provider.chat(ChatRequest(PROVIDERS[name][1]).user("half an emoji: \ud83d"))
    assert str(caught.value) == (
        "the request cannot be written as JSON: it holds a lone surrogate that UTF-8 cannot "
        "carry (text cut between the halves of a character?)"
    )
    assert not caught.value.retryable and sent == []
    # In the model's name too, which Gemini's URL holds.
    with pytest.raises(InvalidRequestError, match="the model's name holds a lone surrogate"):
        provider.chat(ChatRequest(PROVIDERS[name][1] + "\ud83d").user("Hi"))
    with pytest.raises(InvalidRequestError, match="the model's name holds a lone surrogate"):
        provider.chat_stream(ChatRequest(PROVIDERS[name][1] + "\ud83d").user("Hi"))
    assert sent == []


def _tool_loop(opening: list[Any]) -> ChatRequest:
    call = ToolCall(id="toolu_1", name="lookup", arguments='{"q": "x"}')
    tool = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
    return (
        ChatRequest("claude-sonnet-4-5")
        .with_tools([tool])
        .user("Find x.")
        .assistant([*opening, call])
        .tool_result("toolu_1", "found")
        .with_reasoning_effort("low")
    )


def test_anthropic_thinks_in_a_tool_loop_only_over_its_own_signed_thinking() -> None:
    # "a final assistant message must start with a thinking block": tool calls made by
    # another provider, or with thinking off, cannot be continued with thinking on.
    body, warnings = _sent("anthropic", _tool_loop([]))
    assert "thinking" not in body
    assert [w.message for w in warnings if w.is_about(RequestField.REASONING_EFFORT)] == [
        "Anthropic does not think in a tool loop whose last assistant turn has no signed "
        "thinking to open it (tool calls made elsewhere, or with thinking off); thinking was "
        "left off"
    ]
    signed = Reasoning(text="Look it up.", signature="sig")
    body, warnings = _sent("anthropic", _tool_loop([signed]))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["messages"][1]["content"][0]["type"] == "thinking"
    # Once the model has answered after the loop, it is over: thinking is on.
    body, _ = _sent("anthropic", _tool_loop([]).assistant("x is found.").user("And y?"))
    assert body["thinking"]["type"] == "enabled"


def _gemini_loop(model: str, opening: list[Any]) -> ChatRequest:
    call = ToolCall(id="call_abc", name="lookup", arguments='{"q": "x"}')
    tool = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
    return (
        ChatRequest(model)
        .with_tools([tool])
        .user("Find x.")
        .assistant([*opening, call])
        .tool_result("call_abc", "found")
    )


def test_a_gemini_3_function_call_without_its_signature_goes_with_the_one_that_skips_it() -> None:
    # "Function call is missing a thought_signature": a call another model made has none;
    # Google documents `skip_thought_signature_validator` for it.
    gemini = allama.provider("gemini", api_key="k")
    http, warnings = gemini._prepare(_gemini_loop("gemini-3-flash-preview", []), stream=False)
    (part,) = http.body["contents"][1]["parts"]
    assert part["thoughtSignature"] == "skip_thought_signature_validator"
    assert [w.message for w in warnings if w.is_about(RequestField.MESSAGES)] == [
        "a function call without Gemini's thought signature (made by another model, or kept "
        "without it) was sent with the signature that skips its check; the model does not see "
        "the reasoning behind it"
    ]
    # Its own signature goes back as it came; Gemini 2.5 checks none.
    own = Reasoning(signature="c2lnbmVk")
    http, warnings = gemini._prepare(_gemini_loop("gemini-3-flash-preview", [own]), stream=False)
    assert http.body["contents"][1]["parts"][0]["thoughtSignature"] == "c2lnbmVk"
    assert not [w for w in warnings if w.is_about(RequestField.MESSAGES)]
    http, _ = gemini._prepare(_gemini_loop("gemini-2.5-flash", []), stream=False)
    assert "thoughtSignature" not in http.body["contents"][1]["parts"][0]


def test_gemma_on_the_gemini_api_gets_no_tools_and_its_system_words_in_the_first_turn() -> None:
    # "Function calling is not enabled for models/gemma-3-27b-it", "Developer instruction
    # is not enabled": the tools are left out, the system words open the first user turn.
    tool = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
    request = (
        ChatRequest("gemma-3-27b-it")
        .system("Be brief.")
        .user("Hi")
        .with_tools([tool])
        .with_tool_choice(ToolChoice.required())
    )
    body, warnings = _sent("gemini", request)
    assert "tools" not in body and "toolConfig" not in body
    assert "systemInstruction" not in body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Be brief."}, {"text": "Hi"}]}]
    assert sorted(w.message for w in warnings) == [
        "`gemma-3-27b-it` on Gemini has no function calling; the tools were left out",
        "`gemma-3-27b-it` on Gemini takes no system instruction; it was put at the start of "
        "the first user turn",
    ]
    with pytest.raises(UnsupportedError):
        _sent("gemini", request.with_unsupported_policy(UnsupportedPolicy.ERROR))


def test_anthropic_thinks_on_through_the_steps_of_its_own_tool_loop() -> None:
    # A tool loop is one assistant turn: its first step opens with the signed thinking,
    # later steps need none.
    call = ToolCall(id="toolu_2", name="lookup", arguments='{"q": "y"}')
    loop = _tool_loop([Reasoning(text="Look it up.", signature="sig")])
    steps = loop.assistant([call]).tool_result("toolu_2", "found too")
    body, warnings = _sent("anthropic", steps)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert not [w for w in warnings if w.is_about(RequestField.REASONING_EFFORT)]
    # A prefill after a loop of another provider's is set aside to judge it: thinking is
    # left off, so the prefill is kept rather than dropped into a loop thinking refuses.
    body, warnings = _sent("anthropic", _tool_loop([]).assistant("So"))
    assert "thinking" not in body
    assert body["messages"][-1] == {"role": "assistant", "content": "So"}


def test_a_tool_choice_that_is_not_sent_forces_nothing() -> None:
    # Thinking is left off only while a tool call is really forced.
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Sum it up.")
        .with_tool_choice(ToolChoice.required())
        .with_tools([])
        .with_reasoning_effort("low")
    )
    body, _ = _sent("anthropic", request)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_anthropic_leaves_out_assistant_text_of_nothing_but_whitespace() -> None:
    call = ToolCall(id="toolu_1", name="lookup", arguments="{}")
    tool = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
    request = (
        ChatRequest("claude-sonnet-4-5")
        .with_tools([tool])
        .user("Find x.")
        .assistant([TextPart(text="\n\n"), call])
        .tool_result("toolu_1", "found")
    )
    body, _ = _sent("anthropic", request)
    assert [block["type"] for block in body["messages"][1]["content"]] == ["tool_use"]


def test_a_prefill_is_trimmed_until_it_ends_in_no_whitespace() -> None:
    request = ChatRequest("claude-sonnet-4-5").user("Name a colour.")
    request = request.assistant([TextPart(text="Answer: "), TextPart(text="  ")])
    body, _ = _sent("anthropic", request)
    assert body["messages"][-1] == {"role": "assistant", "content": "Answer:"}


def test_a_last_user_message_of_nothing_but_whitespace_is_refused_before_sending() -> None:
    # Left out, the assistant's reply would be last, to be continued rather than answered.
    request = ChatRequest("claude-sonnet-4-5").user("Hi").assistant("Hello!").user("\n")
    with pytest.raises(InvalidRequestError) as caught:
        _sent("anthropic", request)
    assert "the last user message holds nothing but whitespace" in str(caught.value)


@pytest.mark.parametrize("name", ["openai", "responses"])
def test_parallel_tool_calls_go_only_with_tools(name: str) -> None:
    # "'parallel_tool_calls' is only allowed when 'tools' are specified"
    request = ChatRequest("gpt-4o").user("Hi").with_parallel_tool_calls(False)
    body, _ = _sent(name, request)
    assert "parallel_tool_calls" not in body
    tool = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
    body, _ = _sent(name, request.with_tools([tool]))
    assert body["parallel_tool_calls"] is False


def test_a_temperature_above_1_goes_where_nobody_says_what_the_model_takes() -> None:
    # An unknown model on Anthropic, or any on a host of the dialect: the provider decides.
    request = ChatRequest("claude-next-9").user("Hi").with_temperature(1.5)
    assert _sent("anthropic", request)[0]["temperature"] == 1.5
    host = allama.provider("anthropic-compatible", api_key="k", base_url="http://127.0.0.1:9")
    http, _ = host._prepare(
        ChatRequest("deepseek-chat").user("Hi").with_temperature(1.5), stream=False
    )
    assert http.body["temperature"] == 1.5


def test_gemini_refuses_an_image_it_does_not_read_before_sending() -> None:
    # "Unsupported MIME type: image/gif": PNG, JPEG, WebP, HEIC and HEIF only.
    gif = ImagePart(data=b"GIF89a", media_type="image/gif")
    with pytest.raises(InvalidRequestError) as caught:
        _sent("gemini", ChatRequest("gemini-2.5-flash").user("What is it?", gif))
    assert "takes PNG, JPEG, WebP, HEIC and HEIF images, not image/gif" in str(caught.value)
    png = ImagePart(data=b"\x89PNG", media_type="image/png")
    body, _ = _sent("gemini", ChatRequest("gemini-2.5-flash").user("What is it?", png))
    assert body["contents"][0]["parts"][1]["inlineData"]["mimeType"] == "image/png"


def test_an_anthropic_tool_result_of_nothing_is_sent_without_content() -> None:
    # A shell tool that printed nothing: text blocks "must contain non-whitespace text".
    call = ToolCall(id="toolu_1", name="lookup", arguments="{}")
    tool = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
    for output in ("", "\n", "   "):
        request = (
            ChatRequest("claude-sonnet-4-5")
            .with_tools([tool])
            .user("Run it.")
            .assistant([call])
            .tool_result("toolu_1", output)
        )
        body, _ = _sent("anthropic", request)
        assert body["messages"][-1]["content"] == [
            {"type": "tool_result", "tool_use_id": "toolu_1"}
        ]


def test_an_adaptive_thinking_model_continues_a_loop_opened_without_its_thinking() -> None:
    # Adaptive thinking may skip thinking on a turn: a tool loop whose turns have none goes
    # with the thinking the request asks for, neither refused nor turned off mid-loop.
    request = _tool_loop([]).model_copy(
        update={"model": "claude-opus-5-5", "reasoning_effort": None}
    )
    for model in ("claude-opus-5-5", "claude-opus-5"):
        body, _ = _sent("anthropic", request.model_copy(update={"model": model}))
        assert "thinking" not in body  # (no effort asked: the model's own default)


def test_a_system_message_after_the_users_whitespace_does_not_hide_it() -> None:
    request = (
        ChatRequest("claude-sonnet-4-5").user("Q").assistant("A").user("\n").system("Be brief.")
    )
    with pytest.raises(InvalidRequestError):
        _sent("anthropic", request)


def test_parallel_calls_off_holds_for_server_tools_given_in_the_body() -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
    request = (
        ChatRequest("claude-sonnet-4-5")
        .user("Look it up.")
        .with_parallel_tool_calls(False)
        .with_option_json("anthropic", {"tools": [search]})
    )
    body, _ = _sent("anthropic", request)
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
