"""Decisions answered in plain text: the probabilities of an answer the prompt alone holds,
read trimmed as the answer is, and the caller's own tools and response format, which the
plain paths refused or replaced no more than extraction does."""

from __future__ import annotations

import asyncio
import json
import math
import random
import sys
import zlib
from collections.abc import Callable
from functools import cache
from typing import Any, Literal

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import allama
from _recording import prompt_only_over
from allama import (
    ChatRequest,
    ExtractionMode,
    ResponseFormat,
    SchemaEnforcement,
    ToolConflictError,
)
from allama.extract._choices import options_of
from allama.extract._decide import _read_plain
from allama.mock import ChatResponseBuilder, MockProvider
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    TokenAlternative,
    TokenLogprob,
    ToolDefinition,
)

# Servers answering in the providers' shapes, keeping what they were sent.


def serving(
    name: str, reply: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[allama.HttpProvider, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        return httpx2.Response(200, json=reply(body))

    transport = allama.Transport(
        client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    if name == "llama-cpp":
        provider = allama.provider(name, base_url="http://test/v1", transport=transport)
    else:
        provider = allama.provider(name, api_key="k", base_url="http://test", transport=transport)
    return provider, sent


def alternative(token: str, p: float) -> dict[str, Any]:
    return {"token": token, "logprob": math.log(p), "bytes": list(token.encode())}


def tok(token: str, p: float, *top: tuple[str, float]) -> dict[str, Any]:
    return {**alternative(token, p), "top_logprobs": [alternative(t, q) for t, q in top]}


def completion(content: str, tokens: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
        "logprobs": None if tokens is None else {"content": tokens, "refusal": None},
    }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "created": 1,
        "choices": [choice],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }


def gemini_answer(text: str) -> dict[str, Any]:
    parts = [{"text": text}]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11}
    return {"candidates": [candidate], "usageMetadata": usage}


# 1. An answer the prompt alone holds is read trimmed: so are the alternatives listed. Nothing
# holds it to the options, so a branch is an option's only once a token that writes nothing
# ends it; OpenAI's tokens stop before the end, so there every figure is 0.

# The end of the output, as an engine that lists it sends it: a token that writes nothing.
# `!` after it would make the answer no option.
END = tok("", 0.8, ("", 0.8), ("!", 0.15))


@pytest.mark.parametrize(
    ("text", "tokens", "chosen", "unresolved"),
    [
        # ` No` may become No, as `No` may: both are unresolved (` No` was no option). At
        # the end (reach 0.55), `Yes!` (0.0825) is no option, 0.05 unlisted is unresolved
        # (0.0275), and the end ends `Yes`: 0.44.
        (
            "Yes",
            [tok("Yes", 0.55, ("Yes", 0.55), (" No", 0.35), ("No", 0.05)), END],
            0.55 * 0.8,
            0.35 + 0.05 + 0.05 + 0.55 * 0.05,
        ),
        # An answer written after a space is Yes's once ended: 0.5 * 0.8. `No`, ` No` and
        # 0.05 unlisted are unresolved, and 0.5 * 0.05 unlisted at the end.
        (
            " Yes",
            [tok(" Yes", 0.5, (" Yes", 0.5), ("No", 0.4), (" No", 0.05)), END],
            0.5 * 0.8,
            0.4 + 0.05 + 0.05 + 0.5 * 0.05,
        ),
        # A space of its own first: the walk starts there, where `No` (0.3), `Yes` (0.05,
        # not ended) and 0.05 unlisted are unresolved; then ` No` (0.6 * 0.1) may become No;
        # at the end (reach 0.54), 0.54 * 0.05 unlisted, and ` Yes` ended: 0.54 * 0.8.
        (
            " Yes",
            [
                tok(" ", 0.6, (" ", 0.6), ("No", 0.3), ("Yes", 0.05)),
                tok("Yes", 0.9, ("Yes", 0.9), ("No", 0.1)),
                END,
            ],
            0.54 * 0.8,
            0.3 + 0.05 + 0.05 + 0.6 * 0.1 + 0.54 * 0.05,
        ),
    ],
)
def test_an_option_written_after_space_is_that_option_on_a_plain_answer(
    text: str, tokens: list[dict[str, Any]], chosen: float, unresolved: float
) -> None:
    # As OpenAI sends it, without the end: the answer may have gone on (`Yes, but`), so all
    # of it is unresolved and nothing is measured.
    provider, sent = serving("openai", lambda _: completion(text, tokens[:-1]))
    provider = prompt_only_over(provider)
    decision = allama.decide(provider, bool, ChatRequest("gpt-4").user("?"), probabilities=True)
    assert decision.value is True
    assert decision.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert decision.probabilities == pytest.approx({True: 0.0, False: 0.0})
    assert decision.unresolved == pytest.approx(1.0)
    assert decision.unlisted == frozenset({True, False})
    assert decision.confidence is None
    assert decision.confidence_bounds() == pytest.approx((0.0, 1.0))
    assert "response_format" not in sent[0] and "tools" not in sent[0]
    # With the end listed: the answer as written, space and all, is Yes's.
    provider, sent = serving("openai", lambda _: completion(text, tokens))
    provider = prompt_only_over(provider)
    decision = allama.decide(provider, bool, ChatRequest("gpt-4").user("?"), probabilities=True)
    assert decision.value is True
    assert decision.probabilities == pytest.approx({True: chosen, False: 0.0})
    assert decision.unresolved == pytest.approx(unresolved)
    assert decision.unlisted == frozenset({False})
    assert decision.confidence is None
    whole = chosen + unresolved
    assert decision.confidence_bounds() == pytest.approx((chosen / whole, 1.0))
    assert "response_format" not in sent[0] and "tools" not in sent[0]


def test_space_alone_listed_may_become_any_option_and_is_unresolved() -> None:
    # ` ` then anything: `Yes` or `No` may follow. It was counted as no option, which left
    # nothing unresolved and a confidence of 6/7 given as exact.
    first = tok("Yes", 0.6, ("Yes", 0.6), (" ", 0.3), ("No", 0.1))
    # As OpenAI sends it, without the end: `Yes` may go on too, so all is unresolved.
    provider, _ = serving("openai", lambda _: completion("Yes", [first]))
    provider = prompt_only_over(provider)
    decision = allama.decide(provider, bool, ChatRequest("gpt-4").user("?"), probabilities=True)
    assert decision.probabilities == pytest.approx({True: 0.0, False: 0.0})
    assert decision.unresolved == pytest.approx(1.0)
    assert decision.confidence_bounds() == pytest.approx((0.0, 1.0))
    # With the end listed. By hand: ` ` 0.3 and `No` 0.1 (not ended) are unresolved; after
    # `Yes` (reach 0.6) the end ends it: 0.54, and `Yes!` (0.06) is no option.
    end = tok("", 0.9, ("", 0.9), ("!", 0.1))
    provider, _ = serving("openai", lambda _: completion("Yes", [first, end]))
    provider = prompt_only_over(provider)
    decision = allama.decide(provider, bool, ChatRequest("gpt-4").user("?"), probabilities=True)
    assert decision.probabilities == pytest.approx({True: 0.54, False: 0.0})
    assert decision.unresolved == pytest.approx(0.4)
    assert decision.confidence_bounds() == pytest.approx((0.54 / 0.94, 1.0))


def test_under_a_grammar_the_option_is_as_written_and_space_before_it_no_option() -> None:
    # llama.cpp's grammar writes `Yes` or `No` alone: ` No` is not one it allows.
    tokens = [tok("Yes", 0.55, ("Yes", 0.55), (" No", 0.35), ("No", 0.05))]
    provider, sent = serving("llama-cpp", lambda _: completion("Yes", tokens))
    decision = allama.decide(provider, bool, ChatRequest("m").user("?"))
    assert decision.metadata.enforcement is SchemaEnforcement.EXACT
    assert decision.probabilities == pytest.approx({True: 0.55, False: 0.05})
    assert decision.unresolved == pytest.approx(0.05)
    assert sent[0]["grammar"] == 'root ::= "Yes" | "No"'


def test_an_option_holding_code_point_0_is_not_sent_as_a_grammar() -> None:
    # llama.cpp's grammars cannot match U+0000: the server failed the call, retried as a
    # server error. The options go in the prompt alone, and the record says so.
    provider, sent = serving("llama-cpp", lambda _: completion("a\x00b"))
    decision = allama.decide(provider, Literal["a\x00b", "c"], ChatRequest("m").user("?"))
    assert decision.value == "a\x00b"
    assert "grammar" not in sent[0]
    assert decision.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert [w.message for w in decision.metadata.degradations] == [
        "llama.cpp's server cannot match the character U+0000 in a grammar, and an option "
        "holds it; the answer was not constrained to the options"
    ]
    strict = ChatRequest("m").user("?").with_response_format(ResponseFormat.choice(["\x00"]))
    with pytest.raises(allama.UnsupportedError, match="U\\+0000"):
        provider.chat(strict.with_unsupported_policy(allama.UnsupportedPolicy.ERROR))
    assert len(sent) == 1


def test_the_space_an_answer_is_trimmed_of_is_what_python_trims() -> None:
    from allama.extract._probabilities import _SPACE

    assert set(_SPACE) == {c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()}


# A made-up model held to a set of outputs, as a grammar would hold it: every option with
# space before and after it (some of several bytes, which tokens may cut), and outputs that
# are no option. Its tokens are any run of up to three bytes, with a distribution drawn
# from a seed at each prefix. The count follows every output to its end and reads it as
# `_read_plain` does; the decision sees the chosen tokens with some alternatives listed.

POOL = ("Yes", "No", "New", "New York", "é", "ab")
BEFORE = ("", " ", "\n", "\u00a0")
AFTER = ("", " ", "\u3000")
NO_OPTION = ("", " ", "\n", "Maybe", " Maybe")
END = b""


def outputs_of(labels: tuple[str, ...]) -> frozenset[bytes]:
    options = {f"{b}{label.strip()}{a}" for label in labels for b in BEFORE for a in AFTER}
    return frozenset(text.encode() for text in options | set(NO_OPTION))


def next_tokens(outputs: frozenset[bytes], prefix: bytes) -> list[bytes]:
    found = {END} if prefix in outputs else set()
    for output in outputs:
        if output.startswith(prefix):
            rest = output[len(prefix) :]
            found.update(rest[:size] for size in range(1, min(3, len(rest)) + 1))
    return sorted(found)


def distribution(seed: int, outputs: frozenset[bytes], prefix: bytes) -> dict[bytes, float]:
    tokens = next_tokens(outputs, prefix)
    rng = random.Random(seed ^ zlib.crc32(prefix))
    weights = [rng.random() ** 2 + 1e-3 for _ in tokens]
    total = sum(weights)
    return {token: w / total for token, w in zip(tokens, weights, strict=True)}


@cache
def read(labels: tuple[str, ...], text: str) -> str | None:
    response = ChatResponseBuilder().text(text).build()
    found = _read_plain(response, options_of(Literal[labels]), ExtractionMode.NATIVE, "m", False)
    return found[0].label if isinstance(found, tuple) else None


def true_probabilities(seed: int, labels: tuple[str, ...]) -> dict[str, float]:
    outputs = outputs_of(labels)

    @cache
    def below(prefix: bytes) -> tuple[tuple[str, float], ...]:
        found = dict.fromkeys(labels, 0.0)
        for token, p in distribution(seed, outputs, prefix).items():
            if token == END:
                label = read(labels, prefix.decode())
                if label is not None:
                    found[label] += p
                continue
            for label, q in below(prefix + token):
                found[label] += p * q
        return tuple(found.items())

    return dict(below(b""))


def prompt_only(response: Any) -> MockProvider:
    provider = MockProvider([response])
    for capability in (
        ChatCapability.STRUCTURED_OUTPUT,
        ChatCapability.TOOL_CALLS,
        ChatCapability.FORCED_TOOL_CHOICE,
        ChatCapability.CHOICE_OUTPUT,
    ):
        provider.with_chat_capability(capability, CapabilitySupport.UNSUPPORTED)
    return provider.with_chat_capability(ChatCapability.LOGPROBS, CapabilitySupport.SUPPORTED)


def logprob(token: bytes, p: float) -> TokenAlternative:
    return TokenAlternative(
        token=token.decode(errors="replace"), logprob=math.log(p), token_bytes=tuple(token)
    )


@settings(max_examples=250, deadline=None)
@given(
    names=st.lists(st.sampled_from(POOL), min_size=2, max_size=4, unique=True),
    data=st.data(),
    seed=st.integers(0, 2**31),
)
def test_the_bounds_of_a_plain_answer_hold_its_true_probability(
    names: list[str], data: st.DataObject, seed: int
) -> None:
    # Labels may have space at an end of their own, which reading sets aside too.
    labels = tuple(data.draw(st.sampled_from(["", " "])) + name for name in names)
    outputs = outputs_of(labels)
    answers = sorted(o for o in outputs if read(labels, o.decode()) is not None)
    chosen = data.draw(st.sampled_from(answers))
    tokens: list[TokenLogprob] = []
    prefix = b""
    while True:
        dist = distribution(seed, outputs, prefix)
        if prefix == chosen:  # the end of the output, listed or not
            if not data.draw(st.booleans()):
                break
            piece = END
        else:
            ahead = [t for t in dist if t and chosen.startswith(prefix + t)]
            piece = data.draw(st.sampled_from(ahead))
        listed = data.draw(st.lists(st.sampled_from(sorted(dist)), unique=True))
        top = tuple(logprob(t, dist[t]) for t in listed)
        tokens.append(TokenLogprob(**dict(logprob(piece, dist[piece])), top=top))
        if piece == END:
            break
        prefix += piece
    response = ChatResponseBuilder().text(chosen.decode()).build()
    response = response.model_copy(update={"logprobs": tuple(tokens)})
    decision = allama.decide(
        prompt_only(response), Literal[labels], ChatRequest("m").user("?"), probabilities=True
    )
    assert decision.value == read(labels, chosen.decode())
    assert decision.probabilities is not None and decision.unresolved is not None
    truth = true_probabilities(seed, labels)
    eps = 1e-9
    for label in labels:
        measured = decision.probabilities[label]
        assert measured <= truth[label] + eps
        assert truth[label] <= measured + decision.unresolved + eps
    bounds = decision.confidence_bounds()
    assert bounds is not None
    confidence = truth[decision.value] / sum(truth.values())
    assert bounds[0] - eps <= confidence <= bounds[1] + eps


# 2. The caller's tools are refused before sending on every path; a response format of
# the caller's is replaced on the plain ones, as extraction replaces it.

TOOL = ToolDefinition(name="lookup", parameters={"type": "object", "properties": {}})
CONFLICT = (
    "{}: extraction cannot be combined with request tools; clear `tools` and `tool_choice`, "
    "or start a fresh request from the messages"
)


@pytest.mark.parametrize(
    ("name", "model", "probabilities"),
    [
        ("gemini", "gemini-2.0-flash", None),  # text/x.enum
        ("llama-cpp", "m", None),  # a grammar
        ("openai", "gpt-4", True),  # the options in the prompt, for the probabilities
        ("openai", "gpt-4o-2024-08-06", None),  # a JSON Schema enum, as it was
    ],
)
def test_the_callers_tools_are_refused_before_sending_on_every_path(
    name: str, model: str, probabilities: bool | None
) -> None:
    provider, sent = serving(name, lambda _: pytest.fail("sent"))
    request = ChatRequest(model).user("?").with_tools([TOOL])
    with pytest.raises(ToolConflictError) as caught:
        allama.decide(provider, Literal["a", "b"], request, probabilities=probabilities)
    assert str(caught.value) == CONFLICT.format(name)
    assert caught.value.metadata.passes == 0
    with pytest.raises(ToolConflictError):
        asyncio.run(allama.adecide(provider, Literal["a", "b"], request))
    assert sent == []


def test_the_callers_tools_are_refused_where_the_prompt_alone_holds_the_answer() -> None:
    provider = prompt_only("a")
    request = ChatRequest("m").user("?").with_tools([TOOL])
    with pytest.raises(ToolConflictError) as caught:
        allama.decide(provider, Literal["a", "b"], request)
    assert str(caught.value) == CONFLICT.format("mock")
    assert provider.call_count == 0


OPTION_CONFLICT = (
    "{}: extraction cannot be combined with request tools, which the body option `{}` gives "
    "as tools the caller runs (function, custom or client tools) in its `tools`; take them "
    "out of that option, or start a fresh request from the messages"
)
LOOKUP = {"type": "object", "properties": {"q": {"type": "string"}}}
OPTION_FUNCTIONS = {
    "gemini": {"functionDeclarations": [{"name": "lookup", "parameters": LOOKUP}]},
    "openai_compat": {"type": "function", "function": {"name": "lookup", "parameters": LOOKUP}},
}


@pytest.mark.parametrize(
    ("name", "model", "probabilities", "namespace"),
    [
        ("gemini", "gemini-2.0-flash", None, "gemini"),  # text/x.enum
        ("llama-cpp", "m", None, "openai_compat"),  # a grammar
        ("openai", "gpt-4", True, "openai_compat"),  # the options in the prompt
        ("openai", "gpt-4o-2024-08-06", None, "openai_compat"),  # a JSON Schema enum
    ],
)
def test_a_body_options_function_tools_are_refused_before_sending_on_every_path(
    name: str, model: str, probabilities: bool | None, namespace: str
) -> None:
    """They are the caller's own as much as `tools` are: the plain paths would send them."""
    provider, sent = serving(name, lambda _: pytest.fail("sent"))
    request = (
        ChatRequest(model)
        .user("?")
        .with_option_json(namespace, {"tools": [OPTION_FUNCTIONS[namespace]]})
    )
    with pytest.raises(ToolConflictError) as caught:
        allama.decide(provider, Literal["a", "b"], request, probabilities=probabilities)
    assert str(caught.value) == OPTION_CONFLICT.format(name, namespace)
    assert caught.value.metadata.passes == 0
    with pytest.raises(ToolConflictError):
        asyncio.run(allama.adecide(provider, Literal["a", "b"], request))
    assert sent == []


def test_a_body_options_function_tools_are_refused_where_the_prompt_alone_holds_it() -> None:
    provider = prompt_only("a")
    tools = [OPTION_FUNCTIONS["openai_compat"]]
    request = ChatRequest("m").user("?").with_option_json("openai_compat", {"tools": tools})
    with pytest.raises(ToolConflictError) as caught:
        allama.decide(provider, Literal["a", "b"], request)
    assert str(caught.value) == OPTION_CONFLICT.format("mock", "openai_compat")
    assert provider.call_count == 0


def test_a_body_options_server_tool_goes_beside_a_decision() -> None:
    """A provider's own tool (web search) is no tool of the caller's: the decision is sent."""
    provider = prompt_only("a")
    server = {"type": "web_search_preview"}
    request = ChatRequest("m").user("?").with_option_json("openai_compat", {"tools": [server]})
    assert allama.decide(provider, Literal["a", "b"], request).value == "a"
    assert provider.call_count == 1


def test_the_callers_response_format_is_replaced_on_the_plain_paths() -> None:
    asked = ChatRequest("gpt-4").user("?").with_response_format(ResponseFormat.json_object())
    # In the prompt: the answer is read as plain text, so none is sent (it was kept, and
    # the JSON it asked for was "not one of the options").
    tokens = [tok("a", 0.9, ("a", 0.9), ("b", 0.1))]
    provider, sent = serving(
        "openai",
        lambda body: completion('{"answer": "a"}' if "response_format" in body else "a", tokens),
    )
    decision = allama.decide(
        prompt_only_over(provider), Literal["a", "b"], asked, probabilities=True
    )
    # OpenAI does not list the end of the output: `a` may have gone on, so all is unresolved.
    assert decision.value == "a" and decision.probabilities == pytest.approx({"a": 0.0, "b": 0.0})
    assert decision.unresolved == pytest.approx(1.0)
    assert "response_format" not in sent[0]
    mock = prompt_only("b")
    assert (
        allama.decide(mock, Literal["a", "b"], asked.model_copy(update={"model": "m"})).value == "b"
    )
    assert mock.requests[0].response_format is None
    # A choice format: the options' enum, in its place.
    provider, sent = serving("gemini", lambda _: gemini_answer("b"))
    gemini = asked.model_copy(update={"model": "gemini-2.0-flash"})
    assert allama.decide(provider, Literal["a", "b"], gemini).value == "b"
    config = sent[0]["generationConfig"]
    assert config["responseMimeType"] == "text/x.enum"
    assert config["responseSchema"] == {"type": "STRING", "enum": ["a", "b"]}
