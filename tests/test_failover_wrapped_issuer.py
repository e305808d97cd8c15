"""A failover's record names each provider it tried by its endpoint (`openai@east.example`),
so that two of one preset on different servers are told apart: through a wrapper of one
provider (a retry, a capability override) as well, which sends where its provider sends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from tests._recording import Recorder, provider

from allama import (
    CapabilitySupport,
    ChatCapability,
    ChatProvider,
    ChatRequest,
    ChatResponse,
    FailoverProvider,
    RetryingProvider,
    RetryPolicy,
)
from allama.wrappers import CapabilityOverrideProvider

REQUEST = ChatRequest("gpt-4o-mini").user("hi")
OVERLOADED = (503, {"error": {"message": "overloaded", "type": "server_error"}})
ANSWER = (
    200,
    {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "from west"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    },
)
TRIED = {"attempts": 2, "providers": ["openai@east.example", "openai@west.example"]}


def _streamed() -> tuple[int, bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n"

    text = chunk({"role": "assistant", "content": "from west"}) + chunk({}, "stop")
    return 200, (text + "data: [DONE]\n\n").encode()


def _retrying(inner: ChatProvider) -> ChatProvider:
    return RetryingProvider(inner, RetryPolicy(max_attempts=1))


def _overridden(inner: ChatProvider) -> ChatProvider:
    return CapabilityOverrideProvider(
        inner, {ChatCapability.STRUCTURED_OUTPUT: CapabilitySupport.SUPPORTED}
    )


WRAPS: dict[str, Callable[[ChatProvider], ChatProvider]] = {
    "bare": lambda inner: inner,
    "retrying": _retrying,
    "overridden": _overridden,
    "retrying an override": lambda inner: _retrying(_overridden(inner)),
}


def _regions(
    wrap: Callable[[ChatProvider], ChatProvider], answer: tuple[int, Any]
) -> tuple[FailoverProvider, Recorder, Recorder]:
    """A failover from an overloaded server of the `openai` preset to another one's."""
    east, east_calls = provider("openai", OVERLOADED, base_url="http://east.example/v1")
    west, west_calls = provider("openai", answer, base_url="http://west.example/v1")
    return FailoverProvider([wrap(east), wrap(west)]), east_calls, west_calls


def _chat(failover: FailoverProvider) -> ChatResponse:
    return failover.chat(REQUEST)


def _achat(failover: FailoverProvider) -> ChatResponse:
    return asyncio.run(failover.achat(REQUEST))


def _stream(failover: FailoverProvider) -> ChatResponse:
    return failover.chat_stream(REQUEST).response()


def _astream(failover: FailoverProvider) -> ChatResponse:
    async def run() -> ChatResponse:
        return await (await failover.achat_stream(REQUEST)).response()

    return asyncio.run(run())


CALLS: dict[str, tuple[Callable[[FailoverProvider], ChatResponse], bool]] = {
    "chat": (_chat, False),
    "achat": (_achat, False),
    "chat_stream": (_stream, True),
    "achat_stream": (_astream, True),
}


@pytest.mark.parametrize("wrapped", list(WRAPS))
@pytest.mark.parametrize("call", list(CALLS))
def test_a_failover_names_the_servers_it_tried_through_their_wrappers(
    wrapped: str, call: str
) -> None:
    run, streamed = CALLS[call]
    failover, east_calls, west_calls = _regions(WRAPS[wrapped], _streamed() if streamed else ANSWER)

    response = run(failover)

    assert (len(east_calls.bodies), len(west_calls.bodies)) == (1, 1)
    assert response.text() == "from west"
    assert response.provider == "openai"
    assert response.provider_data["allama"]["failover"] == TRIED


def test_a_wrapped_provider_on_the_presets_own_host_is_named_by_the_preset() -> None:
    """The preset's own server is named as the bare provider names it: by the preset."""
    home, _ = provider("openai", OVERLOADED)
    west, _ = provider("openai", ANSWER, base_url="http://west.example/v1")

    response = FailoverProvider([_retrying(home), _overridden(west)]).chat(REQUEST)

    assert response.provider_data["allama"]["failover"] == {
        "attempts": 2,
        "providers": ["openai", "openai@west.example"],
    }


def test_a_retried_failover_within_a_failover_is_named_as_the_failover() -> None:
    """A wrapper of several providers sends to more than one server: it is named by its
    name, as before, not by one of theirs."""
    east, _ = provider("openai", OVERLOADED, base_url="http://east.example/v1")
    north, _ = provider("openai", OVERLOADED, base_url="http://north.example/v1")
    west, _ = provider("openai", ANSWER, base_url="http://west.example/v1")
    inner = _retrying(FailoverProvider([east, north], name="east-north"))

    response = FailoverProvider([inner, _retrying(west)]).chat(REQUEST)

    assert response.provider_data["allama"]["failover"] == {
        "attempts": 2,
        "providers": ["east-north", "openai@west.example"],
    }
