"""Anthropic requests a probe found answered 400, now fitted before sending.

An `output-*` beta raises the output limit only where it applies: `output-128k-2025-02-19`
on Claude 3.7 Sonnet, up to 128,000 tokens ("no effect" on Claude 4); the batch-only
`output-300k-2026-03-24` not on a call. A family that takes `temperature` or `top_p`, not
both, gets one even where the request gives one and the body option the other. A body
option's thinking budget below 1024 ("Input should be greater than or equal to 1024") is
raised to 1024 where it fits below `max_tokens`, else left out as one above it is. Server
tools the body option gives (web search) cannot run beside a tool call the request forces
(Anthropic prefills the answer with it): said on `tool_choice`, refused under
`UnsupportedPolicy.ERROR`.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import provider

import allama
from allama import ChatRequest, ExtractionMode, Extractor
from allama.errors import UnsupportedError
from allama.types import (
    RequestField,
    ToolChoice,
    ToolDefinition,
    UnsupportedPolicy,
    Warning,
    WarningKind,
)

KEY = "sk-ant-test-1234"
MODEL = "claude-sonnet-4-5"
SONNET_37 = "claude-3-7-sonnet-20250219"


def _sent(
    request: ChatRequest, beta: str | None = None
) -> tuple[dict[str, Any], list[tuple[WarningKind, Any, str]], dict[str, Any]]:
    """The body, the warnings (kind, field, message) and `as_sent` of `request`."""
    headers = {"anthropic-beta": beta} if beta is not None else None
    target = allama.provider("anthropic", api_key=KEY, headers=headers)
    http, warnings = target._prepare(request, stream=False)
    said = [(w.kind, getattr(w.subject, "field", None), w.message) for w in warnings]
    return http.body, said, dict(http.as_sent)


def _refused(request: ChatRequest, beta: str | None = None) -> str:
    with pytest.raises(UnsupportedError) as raised:
        _sent(request.with_unsupported_policy(UnsupportedPolicy.ERROR), beta)
    return str(raised.value)


def _limit(model: str, limit: int, asked: int) -> tuple[WarningKind, Any, str]:
    return (
        WarningKind.UNSUPPORTED,
        RequestField.MAX_OUTPUT_TOKENS,
        f"`{model}` on Anthropic writes at most {limit} output tokens; {limit} was sent in "
        f"place of {asked}",
    )


def _options(message: str) -> tuple[WarningKind, Any, str]:
    return (WarningKind.UNSUPPORTED, RequestField.OPTIONS, message)


# An output beta raises the limit only where it applies


def test_the_128k_beta_leaves_a_claude_4_output_limit_in_place() -> None:
    """Anthropic: `output-128k-2025-02-19` "can still be included in Claude 4 requests, but
    it will have no effect": 100,000 tokens on Sonnet 4.5 is answered 400."""
    request = ChatRequest(MODEL).user("hi").with_max_output_tokens(100_000)
    body, said, as_sent = _sent(request, "output-128k-2025-02-19")
    assert body["max_tokens"] == 64_000
    assert said == [_limit(MODEL, 64_000, 100_000)]
    assert as_sent == {"max_output_tokens": 64_000}
    assert _refused(request, "output-128k-2025-02-19") == (
        "cannot send `max_output_tokens`: `claude-sonnet-4-5` on Anthropic writes at most "
        "64000 output tokens"
    )


def test_the_128k_beta_raises_claude_3_7_sonnets_limit_to_128k_and_no_further() -> None:
    request = ChatRequest(SONNET_37).user("hi").with_max_output_tokens(200_000)
    body, said, _ = _sent(request, "interleaved-thinking-2025-05-14, output-128k-2025-02-19")
    assert body["max_tokens"] == 128_000
    assert said == [_limit(SONNET_37, 128_000, 200_000)]
    body, said, _ = _sent(request.with_max_output_tokens(100_000), "output-128k-2025-02-19")
    assert (body["max_tokens"], said) == (100_000, [])
    body, said, _ = _sent(request.with_max_output_tokens(100_000))
    assert body["max_tokens"] == 64_000
    assert said == [_limit(SONNET_37, 64_000, 100_000)]


def test_the_128k_beta_raises_the_limit_a_filled_in_max_tokens_keeps_to() -> None:
    """A body option's budget of 100,000 tokens fits under Claude 3.7 Sonnet's raised
    limit: `max_tokens` is filled in above it, and nothing is lowered."""
    thinking = {"type": "enabled", "budget_tokens": 100_000}
    request = (
        ChatRequest(SONNET_37).user("hi").with_option_json("anthropic", {"thinking": thinking})
    )
    body, said, _ = _sent(request, "output-128k-2025-02-19")
    assert (body["max_tokens"], body["thinking"], said) == (116_384, thinking, [])
    body, said, _ = _sent(request)
    assert (body["max_tokens"], body["thinking"]["budget_tokens"]) == (64_000, 63_999)
    assert said == [
        _options(
            "`thinking.budget_tokens` of the body option `anthropic` (100000) is not below "
            "`max_tokens` (64000), and Anthropic takes a thinking budget only below it; 63999 "
            "was sent in place of 100000"
        )
    ]


@pytest.mark.parametrize(
    ("model", "limit"),
    [("claude-sonnet-4-6", 64_000), ("claude-opus-4-6", 128_000), ("claude-opus-4-7", 128_000)],
)
def test_the_batch_only_300k_beta_raises_no_limit_of_a_call(model: str, limit: int) -> None:
    """`output-300k-2026-03-24` applies to the Message Batches API alone; a synchronous
    call above the family's own limit (Sonnet 4.6's 64,000 tokens, Opus 4.6's 128,000) is
    answered 400."""
    request = ChatRequest(model).user("hi").with_max_output_tokens(200_000)
    body, said, _ = _sent(request, "output-300k-2026-03-24")
    assert body["max_tokens"] == limit
    assert said == [_limit(model, limit, 200_000)]


# One of `temperature` and `top_p`, given one by the request and one by the body option

_NOT_BOTH = "`claude-sonnet-4-5` on Anthropic takes `temperature` or `top_p`, not both"
_REQUEST_PAIR = (WarningKind.UNSUPPORTED, RequestField.TOP_P, f"{_NOT_BOTH}; `top_p` was left out")


def _in_place(key: str, value: float, field: RequestField, given: float) -> Any:
    """The request's `field` left out for the option's `key`."""
    return (
        WarningKind.UNSUPPORTED,
        field,
        f"`{key}` of the body option `anthropic` ({value}) goes in place of the request's "
        f"`{field}` ({given}), and {_NOT_BOTH}; `{field}` was left out",
    )


_TEMPERATURE_FOR_TOP_P = _in_place("top_p", 0.8, RequestField.TEMPERATURE, 0.3)
_TOP_P_FOR_TEMPERATURE = _in_place("temperature", 0.5, RequestField.TOP_P, 0.9)

_REQUESTS: dict[str, dict[str, float]] = {
    "none": {},
    "temperature": {"temperature": 0.3},
    "top_p": {"top_p": 0.9},
    "both": {"temperature": 0.3, "top_p": 0.9},
}
_OPTIONS: dict[str, dict[str, float]] = {
    "none": {},
    "temperature": {"temperature": 0.5},
    "top_p": {"top_p": 0.8},
    "both": {"temperature": 0.5, "top_p": 0.8},
}


@pytest.mark.parametrize(
    ("asked", "given", "sent", "warned"),
    [
        ("none", "none", {}, []),
        ("none", "temperature", {"temperature": 0.5}, []),
        ("none", "top_p", {"top_p": 0.8}, []),
        ("none", "both", {"temperature": 0.5, "top_p": 0.8}, []),
        ("temperature", "none", {"temperature": 0.3}, []),
        ("temperature", "temperature", {"temperature": 0.5}, []),
        ("temperature", "top_p", {"top_p": 0.8}, [_TEMPERATURE_FOR_TOP_P]),
        ("temperature", "both", {"temperature": 0.5, "top_p": 0.8}, []),
        ("top_p", "none", {"top_p": 0.9}, []),
        ("top_p", "temperature", {"temperature": 0.5}, [_TOP_P_FOR_TEMPERATURE]),
        ("top_p", "top_p", {"top_p": 0.8}, []),
        ("top_p", "both", {"temperature": 0.5, "top_p": 0.8}, []),
        ("both", "none", {"temperature": 0.3}, [_REQUEST_PAIR]),
        # The request's own pair leaves its `top_p` out: one warning, not two.
        ("both", "temperature", {"temperature": 0.5}, [_REQUEST_PAIR]),
        ("both", "top_p", {"top_p": 0.8}, [_TEMPERATURE_FOR_TOP_P]),
        ("both", "both", {"temperature": 0.5, "top_p": 0.8}, []),
    ],
)
def test_one_sampling_family_gets_the_options_field_over_the_requests_other(
    asked: str, given: str, sent: dict[str, float], warned: list[Any]
) -> None:
    """The option's fields replace the request's of their name; of what is then left, the
    option's one goes in place of the request's other, the request's own pair keeps its
    temperature, and the option's own pair is the caller's, sent as given (Anthropic answers
    400 to both:
    "`temperature` and `top_p` cannot both be specified for this model")."""
    request = ChatRequest(MODEL).user("x")
    if "temperature" in _REQUESTS[asked]:
        request = request.with_temperature(_REQUESTS[asked]["temperature"])
    if "top_p" in _REQUESTS[asked]:
        request = request.with_top_p(_REQUESTS[asked]["top_p"])
    if _OPTIONS[given]:
        request = request.with_option_json("anthropic", _OPTIONS[given])
    body, said, _ = _sent(request)
    assert {key: body[key] for key in ("temperature", "top_p") if key in body} == sent
    assert said == warned


def test_the_options_top_p_in_place_of_the_requests_temperature_is_what_as_sent_shows() -> None:
    request = (
        ChatRequest(MODEL)
        .user("x")
        .with_temperature(0.3)
        .with_option_json("anthropic", {"top_p": 0.8})
    )
    _, _, as_sent = _sent(request)
    assert as_sent == {"top_p": 0.8, "max_output_tokens": 16_384}
    assert _refused(request) == (
        "cannot send `temperature`: `top_p` of the body option `anthropic` (0.8) goes in place "
        f"of the request's `temperature` (0.3), and {_NOT_BOTH}"
    )


def test_the_options_temperature_replaces_a_request_temperature_above_1_silently() -> None:
    """The request's 1.5 is not sent whatever its range: the option's 0.5 goes instead."""
    request = (
        ChatRequest(MODEL)
        .user("x")
        .with_temperature(1.5)
        .with_option_json("anthropic", {"temperature": 0.5})
    )
    body, said, _ = _sent(request)
    assert (body["temperature"], said) == (0.5, [])


def test_the_options_null_replaces_the_requests_field_beside_its_other() -> None:
    """The option's `null` temperature takes the request's out: its `top_p` goes alone."""
    request = (
        ChatRequest(MODEL)
        .user("x")
        .with_temperature(0.3)
        .with_top_p(0.9)
        .with_option_json("anthropic", {"temperature": None})
    )
    body, said, _ = _sent(request)
    assert ((body["temperature"], body["top_p"]), said) == ((None, 0.9), [])


def test_a_family_that_takes_both_gets_the_options_top_p_beside_the_requests_temperature() -> None:
    request = (
        ChatRequest("claude-sonnet-4-20250514")
        .user("x")
        .with_temperature(0.5)
        .with_option_json("anthropic", {"top_p": 0.9})
    )
    body, said, _ = _sent(request)
    assert (body.get("temperature"), body.get("top_p"), said) == (0.5, 0.9, [])


def test_the_options_top_p_beside_a_temperature_thinking_left_out_is_sent() -> None:
    """With thinking on the request's `temperature` of 0.5 is left out, so the option's
    `top_p` (0.95 is taken with thinking) goes alone."""
    request = (
        ChatRequest(MODEL)
        .user("x")
        .with_temperature(0.5)
        .with_reasoning_effort("low")
        .with_option_json("anthropic", {"top_p": 0.95})
    )
    body, said, _ = _sent(request)
    assert (body.get("top_p"), "temperature" in body) == (0.95, False)
    assert said == [
        (
            WarningKind.UNSUPPORTED,
            RequestField.TEMPERATURE,
            "Anthropic takes `temperature` only at 1 with thinking on",
        )
    ]


# A body option's thinking budget below 1024


def test_an_options_budget_below_1024_is_raised_to_1024() -> None:
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_option_json("anthropic", {"thinking": {"type": "enabled", "budget_tokens": 500}})
    )
    body, said, _ = _sent(request)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == 16_384 + 1024
    assert said == [
        _options(
            "`thinking.budget_tokens` of the body option `anthropic` (500) is below 1024, and "
            "Anthropic needs a thinking budget of at least 1024 tokens; 1024 was sent in place "
            "of 500"
        )
    ]
    assert _refused(request) == (
        "cannot send `options`: `thinking.budget_tokens` of the body option `anthropic` (500) "
        "is below 1024, and Anthropic needs a thinking budget of at least 1024 tokens"
    )
    exact = request.with_option_json(
        "anthropic", {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    )
    body, said, _ = _sent(exact)
    assert (body["thinking"]["budget_tokens"], said) == (1024, [])


def test_an_options_budget_below_1024_goes_unsent_where_1024_does_not_fit() -> None:
    thinking = {"type": "enabled", "budget_tokens": 500}
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_max_output_tokens(1000)
        .with_option_json("anthropic", {"thinking": thinking})
    )
    body, said, _ = _sent(request)
    assert (body["max_tokens"], "thinking" in body) == (1000, False)
    assert said == [
        _options(
            "`thinking.budget_tokens` of the body option `anthropic` (500) is below 1024, and "
            "Anthropic needs a thinking budget of at least 1024 tokens below `max_tokens` "
            "(1000); `thinking` was not sent"
        )
    ]
    # Interleaved thinking lets the budget exceed `max_tokens`.
    body, said, _ = _sent(request, "interleaved-thinking-2025-05-14")
    assert (body["max_tokens"], body["thinking"]["budget_tokens"]) == (1000, 1024)
    assert [message for _, _, message in said] == [
        "`thinking.budget_tokens` of the body option `anthropic` (500) is below 1024, and "
        "Anthropic needs a thinking budget of at least 1024 tokens; 1024 was sent in place "
        "of 500"
    ]


def test_an_options_budget_below_1024_beside_its_own_max_tokens() -> None:
    """Raised where 1024 fits below the option's own `max_tokens`; beside one it does not
    fit below, both are the caller's and go as given."""
    thinking = {"type": "enabled", "budget_tokens": 500}
    request = ChatRequest(MODEL).user("hi")
    fits = request.with_option_json("anthropic", {"thinking": thinking, "max_tokens": 4000})
    body, said, _ = _sent(fits)
    assert (body["max_tokens"], body["thinking"]["budget_tokens"]) == (4000, 1024)
    assert len(said) == 1
    tight = request.with_option_json("anthropic", {"thinking": thinking, "max_tokens": 1000})
    body, said, _ = _sent(tight)
    assert (body["max_tokens"], body["thinking"]) == (1000, thinking)
    assert said == [
        _options(
            "`thinking.budget_tokens` of the body option `anthropic` (500) is below 1024, and "
            "Anthropic needs a thinking budget of at least 1024 tokens below the option's own "
            "`max_tokens` (1000); both were sent as given"
        )
    ]


# Server tools beside a forced tool call


class Answer(BaseModel):
    answer: str


SEARCH: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
SUBMITTED = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": MODEL,
    "content": [
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "submit_structured_output",
            "input": {"answer": "x"},
        }
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}


def _unrun(choice: str, names: str) -> str:
    return (
        f"Anthropic forces a tool call (`tool_choice` `{choice}`) by prefilling the answer "
        f"with it, so the server tools the body option `anthropic` gives ({names}) cannot run"
    )


UNRUN = Warning.unsupported(
    RequestField.TOOL_CHOICE,
    f"{_unrun('tool', '`web_search`')}; they were sent all the same, and the answer does not "
    "draw on them",
).with_provider("anthropic")


@pytest.mark.parametrize(
    ("model", "mode"),
    [
        (MODEL, ExtractionMode.FORCED_TOOL),
        # No structured outputs: automatic extraction forces its tool.
        ("claude-opus-4-1", ExtractionMode.AUTO),
    ],
)
def test_an_extraction_forcing_its_tool_says_the_options_server_tools_cannot_run(
    model: str, mode: ExtractionMode
) -> None:
    """The search never runs: the answer is the model's own knowledge. The record notes it
    (its tool choice), where it said nothing, and the plan does too."""
    target, server = provider("anthropic", (200, {**SUBMITTED, "model": model}))
    request = (
        ChatRequest(model)
        .user("search the web for x")
        .with_option(mode)
        .with_option_json("anthropic", {"tools": [SEARCH]})
    )
    result = allama.extract(target, Answer, request)
    assert result.value == Answer(answer="x")
    assert server.bodies[0]["tools"][1] == SEARCH
    assert server.bodies[0]["tool_choice"]["type"] == "tool"
    assert UNRUN in result.response.warnings
    assert result.metadata.mode is ExtractionMode.FORCED_TOOL
    assert result.metadata.notes == [UNRUN]
    assert Extractor().plan(target, Answer, request).notes == (UNRUN,)


def test_under_error_an_extraction_beside_server_tools_is_refused_before_sending() -> None:
    target, server = provider("anthropic", (200, SUBMITTED))
    request = (
        ChatRequest(MODEL)
        .user("search the web for x")
        .with_option(ExtractionMode.FORCED_TOOL)
        .with_option_json("anthropic", {"tools": [SEARCH]})
        .with_unsupported_policy(UnsupportedPolicy.ERROR)
    )
    with pytest.raises(UnsupportedError) as caught:
        allama.extract(target, Answer, request)
    assert str(caught.value) == f"cannot send `tool_choice`: {_unrun('tool', '`web_search`')}"
    assert server.bodies == []


GET = ToolDefinition(name="get", parameters={"type": "object", "properties": {}})
FETCH: dict[str, Any] = {"type": "web_fetch_20250910", "name": "web_fetch"}
BASH: dict[str, Any] = {"type": "bash_20250124", "name": "bash"}


@pytest.mark.parametrize(
    ("choice", "tools", "said"),
    [
        (ToolChoice.required(), [SEARCH, FETCH], _unrun("any", "`web_search`, `web_fetch`")),
        (ToolChoice.tool("get"), [SEARCH, BASH], _unrun("tool", "`web_search`")),
        (ToolChoice.auto(), [SEARCH], None),  # the model may search first
        (ToolChoice.tool("get"), [BASH], None),  # the caller's to run, as `get` is
    ],
    ids=["any", "named", "auto", "client tool"],
)
def test_a_forced_tool_choice_beside_server_tools_is_said_on_tool_choice(
    choice: ToolChoice, tools: list[dict[str, Any]], said: str | None
) -> None:
    request = (
        ChatRequest(MODEL)
        .user("hi")
        .with_tools([GET])
        .with_tool_choice(choice)
        .with_option_json("anthropic", {"tools": tools})
    )
    body, warnings, _ = _sent(request)
    assert body["tools"][1:] == tools
    expected = [] if said is None else [(WarningKind.UNSUPPORTED, RequestField.TOOL_CHOICE, said)]
    assert [(kind, field, message.split("; ")[0]) for kind, field, message in warnings] == expected
