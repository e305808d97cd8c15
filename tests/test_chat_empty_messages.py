"""A Chat Completions request with no messages is refused before sending, as Anthropic's and
Gemini's are: the endpoints answer `messages: []` 400 ("[] is too short - 'messages'"), a
round-trip paid for nothing. System instructions alone are sent (the schema allows them)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _recording import provider
from allama import ChatRequest
from allama.errors import InvalidRequestError
from allama.types import Reasoning

OK = {
    "id": "x",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
PRESETS = {
    "openai": ("gpt-4o", "OpenAI", {}),
    "groq": ("llama-3.3-70b-versatile", "Groq", {}),
    "mistral": ("mistral-large-latest", "Mistral", {}),
    "workers-ai": (
        "@cf/meta/llama-3.1-8b-instruct",
        "Cloudflare Workers AI",
        {"account_id": "acc"},
    ),
}


def _run(target: Any, request: ChatRequest, how: str) -> None:
    if how == "chat":
        target.chat(request)
    elif how == "achat":
        asyncio.run(target.achat(request))
    else:
        with target.chat_stream(request) as stream:
            for _ in stream:
                pass


@pytest.mark.parametrize("how", ["chat", "achat", "stream"])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_no_messages_is_refused_before_sending(preset: str, how: str) -> None:
    model, display, options = PRESETS[preset]
    target, recorder = provider(preset, (200, OK), **options)
    with pytest.raises(InvalidRequestError) as caught:
        _run(target, ChatRequest(model), how)
    assert str(caught.value) == (
        f"{display} needs at least one message, and the request has none left to send"
    )
    assert caught.value.provider == preset
    assert recorder.bodies == []


def test_mistral_refuses_a_request_whose_only_turn_is_left_out() -> None:
    """An assistant turn that only reasoned is left out for Mistral; nothing is left."""
    target, recorder = provider("mistral", (200, OK))
    request = ChatRequest("magistral-medium-latest").assistant([Reasoning(text="Hmm")])
    with pytest.raises(InvalidRequestError, match="Mistral needs at least one message"):
        target.chat(request)
    assert recorder.bodies == []


@pytest.mark.parametrize("preset", list(PRESETS))
def test_system_instructions_alone_are_sent(preset: str) -> None:
    model, _, options = PRESETS[preset]
    target, recorder = provider(preset, (200, OK), **options)
    assert target.chat(ChatRequest(model).system("Say hi.")).text() == "ok"
    assert recorder.bodies[0]["messages"] == [{"role": "system", "content": "Say hi."}]
