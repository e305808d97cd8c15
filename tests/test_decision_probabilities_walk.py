"""Decisions: how far the walk over the answer's tokens goes. An answer the prompt alone
holds to the options may go on as no option after any branch (`No,` where `No way` was
the option, `Yes, but`), so a branch is an option's only once it has ended; and where the
option's first token also writes the end of a JSON wrapper, an alternative that writes the
wrapper otherwise may still lead to any option."""

from __future__ import annotations

import math
import random
import zlib
from functools import cache
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import allama
from _recording import prompt_only_over, provider
from allama import ChatRequest, ExtractionMode, SchemaEnforcement
from allama.extract._choices import options_of
from allama.extract._decide import _TRIMMED, _read_plain
from allama.extract._probabilities import Measured, Spelling, measure
from allama.mock import ChatResponseBuilder, MockProvider
from allama.types import CapabilitySupport, ChatCapability, TokenAlternative, TokenLogprob


def alternative(token: str, p: float) -> dict[str, Any]:
    return {"token": token, "logprob": math.log(p), "bytes": list(token.encode())}


def tok(token: str, p: float, *top: tuple[str, float]) -> dict[str, Any]:
    return {**alternative(token, p), "top_logprobs": [alternative(t, q) for t, q in top]}


def completion(content: str, tokens: list[dict[str, Any]], model: str) -> dict[str, Any]:
    choice = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": content},
        "logprobs": {"content": tokens, "refusal": None},
    }
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
    }


def logprob(text: str, p: float, *top: tuple[str, float]) -> TokenLogprob:
    """A token as the walk reads it; `""` is the end of the output (llama.cpp's, no bytes)."""
    return TokenLogprob(
        token=text,
        logprob=math.log(p),
        token_bytes=tuple(text.encode()),
        top=tuple(
            TokenAlternative(token=t, logprob=math.log(q), token_bytes=tuple(t.encode()))
            for t, q in top
        ),
    )


# 1. An answer the prompt alone holds: a branch is an option's only once it has ended.


def test_a_prompt_only_answer_is_not_given_the_probability_of_text_that_goes_on_as_no_option() -> (
    None
):
    # gpt-3.5-turbo, probabilities=True: the options go in the prompt, nothing enforces them.
    # `No` (0.5) then ` way` (0.6): 0.5 * 0.3 went to `No,` and 0.5 * 0.1 to `No.`, which are
    # no option. `No way` was given the whole 0.5 of `No`, and `Yes` its 0.4, with nothing
    # unresolved and a confidence of 0.556 given as exact (bounds one point).
    tokens = [
        tok("No", 0.5, ("No", 0.5), ("Yes", 0.4), ("Maybe", 0.1)),
        tok(" way", 0.6, (" way", 0.6), (",", 0.3), (".", 0.1)),
    ]
    target, recorder = provider("openai", (200, completion("No way", tokens, "gpt-3.5-turbo")))
    target = prompt_only_over(target)
    request = ChatRequest("gpt-3.5-turbo").user("Is the earth flat?")
    decision = allama.decide(target, Literal["Yes", "No way"], request, probabilities=True)
    assert decision.value == "No way"
    assert decision.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    assert recorder.bodies[0]["logprobs"] is True and "tools" not in recorder.bodies[0]
    # By hand. `Yes` (0.4) may go on as `Yes, but`: unresolved. `Maybe` (0.1), `No,`
    # (0.15) and `No.` (0.05) can be no option. `No way` (0.5 * 0.6 = 0.30) is where the
    # output ends, and OpenAI does not list the end: the model may have gone on (`No way!`),
    # so its 0.30 is unresolved too. Unresolved: 0.4 + 0.3 = 0.7; no option: 0.3.
    assert decision.probabilities == pytest.approx({"Yes": 0.0, "No way": 0.0})
    assert decision.unresolved == pytest.approx(0.7)
    assert decision.unlisted == frozenset({"Yes", "No way"})
    assert decision.confidence is None
    # The truth may be anything: `Yes` in [0, 0.4], `No way` in [0, 0.3].
    assert decision.confidence_bounds() == pytest.approx((0.0, 1.0))


def prompt_only(tokens: list[TokenLogprob], text: str) -> MockProvider:
    """A provider with neither a choice format, structured output nor tools: the options go
    in the prompt, and the response carries these tokens."""
    response = ChatResponseBuilder().text(text).build()
    provider = MockProvider([response.model_copy(update={"logprobs": tuple(tokens)})])
    for capability in (
        ChatCapability.STRUCTURED_OUTPUT,
        ChatCapability.TOOL_CALLS,
        ChatCapability.FORCED_TOOL_CHOICE,
        ChatCapability.CHOICE_OUTPUT,
    ):
        provider.with_chat_capability(capability, CapabilitySupport.UNSUPPORTED)
    return provider.with_chat_capability(ChatCapability.LOGPROBS, CapabilitySupport.SUPPORTED)


def test_where_the_end_of_the_output_is_listed_the_options_it_ends_are_measured() -> None:
    tokens = [
        logprob("No", 0.5, ("No", 0.5), ("Yes", 0.4), ("Maybe", 0.1)),
        logprob(" way", 0.6, (" way", 0.6), ("", 0.2), (",", 0.1), (" ", 0.05)),
        logprob("", 0.8, ("", 0.8), ("!", 0.15)),
    ]
    target = prompt_only(tokens, "No way")
    decision = allama.decide(target, Literal["No", "No way"], ChatRequest("m").user("?"))
    assert decision.value == "No way"
    assert decision.metadata.enforcement is SchemaEnforcement.NOT_ENFORCED
    # By hand. At `No` (reach 1): `Yes` 0.4 and `Maybe` 0.1 are no option.
    # At ` way` (reach 0.5): the end (0.2) ends `No`: 0.1, No's. `,` 0.1 is no option (0.05).
    # ` ` 0.05 may still be `No` or `No way`: 0.025 unresolved; 0.05 unlisted: 0.025.
    # At the end (reach 0.3): chosen, 0.8, ends `No way`: 0.24. `!` 0.15 is no option
    # (0.045); 0.05 unlisted: 0.015. Unresolved: 0.025 + 0.025 + 0.015 = 0.065.
    assert decision.probabilities == pytest.approx({"No": 0.1, "No way": 0.24})
    assert decision.unresolved == pytest.approx(0.065)
    assert decision.unlisted == frozenset()
    assert decision.confidence == pytest.approx(0.24 / 0.34)
    assert decision.confidence_bounds() == pytest.approx((0.24 / 0.405, 0.305 / 0.405))


def test_an_alternative_that_only_begins_an_option_is_unresolved_on_a_prompt_only_answer() -> None:
    tokens = [
        logprob("Yes", 0.6, ("Yes", 0.6), ("N", 0.3), ("Maybe", 0.1)),
        logprob("", 0.7, ("", 0.7), (",", 0.2), (" ", 0.1)),
    ]
    measured = measure(tokens, "Yes", ["Yes", "No way"], "Yes", _TRIMMED)
    assert isinstance(measured, Measured)
    # By hand. `N` (0.3) begins `No way` alone, but may go on as `Nope`: unresolved (it was
    # `No way`'s 0.3). `Maybe` 0.1: no option. After `Yes` (reach 0.6), the end (0.7) ends
    # it: 0.42. `Yes,` (0.12) is no option; `Yes ` (0.06) may yet be `Yes` or `Yes but`:
    # unresolved. Unresolved: 0.3 + 0.06 = 0.36. (`Yes` was given the whole 0.6.)
    assert measured.probabilities == pytest.approx({"Yes": 0.42, "No way": 0.0})
    assert measured.unresolved == pytest.approx(0.36)
    assert measured.unlisted == frozenset({"No way"})


def test_under_a_grammar_a_branch_one_option_alone_can_follow_is_still_that_options() -> None:
    # The same tokens as the prompt-only answer above, written under a grammar (llama.cpp):
    # the rest is forced, so `Yes` and `No` are measured at their first token, as before.
    tokens = [
        logprob("No", 0.5, ("No", 0.5), ("Yes", 0.4), ("Maybe", 0.1)),
        logprob(" way", 0.6, (" way", 0.6), (",", 0.3), (".", 0.1)),
    ]
    labels = ["Yes", "No way"]
    measured = measure(tokens, "No way", labels, "No way", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"Yes": 0.4, "No way": 0.5})
    assert measured.unresolved == pytest.approx(0.0)


# 2. The option's first token also writes the end of the JSON wrapper.


def test_an_alternative_that_writes_the_wrapper_otherwise_is_unresolved() -> None:
    # `":"b` writes the end of the wrapper and the option's first byte; `": "` (a space
    # after the colon) is a valid wrapper that may still lead to either option. It was
    # counted as no option: unresolved 0.01 and bounds (0.729, 0.740), which leave out
    # a truth of 0.70 (`": "` all technical's) or 0.75 (all billing's).
    tokens = [
        tok('{"', 1.0),
        tok("value", 1.0),
        tok('":"b', 0.7, ('":"b', 0.7), ('":"t', 0.25), ('": "', 0.04)),
        tok('illing"}', 1.0),
    ]
    target, _ = provider("openai", (200, completion('{"value":"billing"}', tokens, "m")))
    request = ChatRequest("gpt-4.1-mini").user("Which team?")
    decision = allama.decide(target, Literal["billing", "technical"], request)
    assert decision.metadata.enforcement is SchemaEnforcement.EXACT
    # By hand: billing 0.7, technical 0.25 (`":"t` leads to it alone), `": "` 0.04 and
    # 0.01 unlisted unresolved: 0.05. Bounds: 0.7 / 1.0 and (0.7 + 0.05) / 1.0.
    assert decision.probabilities == pytest.approx({"billing": 0.7, "technical": 0.25})
    assert decision.unresolved == pytest.approx(0.05)
    assert decision.confidence == pytest.approx(0.7 / 0.95)
    assert decision.confidence_bounds() == pytest.approx((0.70, 0.75))


def test_an_alternative_that_ends_the_output_before_the_option_is_no_option() -> None:
    # An end listed where the wrapper is still open leads to no option, certainly; a
    # shorter piece of the wrapper (`":`) may go on to either: unresolved, as before.
    text = '{"value":"billing"}'
    tokens = [
        logprob('{"value', 1.0),
        logprob('":"b', 0.7, ('":"b', 0.7), ('":"t', 0.2), ('":', 0.05), ("", 0.03)),
        logprob('illing"}', 1.0),
    ]
    labels = ["billing", "technical"]
    measured = measure(tokens, text, labels, "billing", Spelling(10, json=True))
    assert isinstance(measured, Measured)
    # Unresolved: `":` 0.05 and 0.02 unlisted; the end's 0.03 is no option.
    assert measured.probabilities == pytest.approx({"billing": 0.7, "technical": 0.2})
    assert measured.unresolved == pytest.approx(0.07)


# 3. A made-up model not held to the options: after an option it may write more (`Yes!`,
# `Yes, but`), which reads as no option. Its tokens are any run of up to three bytes of
# an output it may write, with a distribution drawn from a seed at each prefix; the count
# follows every output to its end and reads it as `_read_plain` does. Whatever
# alternatives are listed, the figures bound the truth.

POOL = ("Yes", "No", "No way", "ab", "b")
BEFORE = ("", " ")
AFTER = ("", " ", "\n", "!", ", but", " way", "c")
NO_OPTION = ("", " ", "Maybe", "N")
END = b""


def outputs_of(labels: tuple[str, ...]) -> frozenset[bytes]:
    written = {f"{b}{label}{a}" for label in labels for b in BEFORE for a in AFTER}
    return frozenset(text.encode() for text in written | set(NO_OPTION))


def distribution(seed: int, outputs: frozenset[bytes], prefix: bytes) -> dict[bytes, float]:
    found = {END} if prefix in outputs else set()
    for output in outputs:
        if output.startswith(prefix) and output != prefix:
            rest = output[len(prefix) :]
            found.update(rest[:size] for size in range(1, min(3, len(rest)) + 1))
    tokens = sorted(found)
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


@settings(max_examples=300, deadline=None)
@given(
    labels=st.lists(st.sampled_from(POOL), min_size=2, max_size=4, unique=True),
    data=st.data(),
    seed=st.integers(0, 2**31),
)
def test_the_figures_of_a_prompt_only_answer_bound_its_true_probabilities(
    labels: list[str], data: st.DataObject, seed: int
) -> None:
    options = tuple(labels)
    outputs = outputs_of(options)
    answers = sorted(o for o in outputs if read(options, o.decode()) is not None)
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
        top = tuple(
            TokenAlternative(token=t.decode(), logprob=math.log(dist[t]), token_bytes=tuple(t))
            for t in listed
        )
        tokens.append(
            TokenLogprob(
                token=piece.decode(),
                logprob=math.log(dist[piece]),
                token_bytes=tuple(piece),
                top=top,
            )
        )
        if piece == END:
            break
        prefix += piece
    label = read(options, chosen.decode())
    assert label is not None
    measured = measure(tokens, chosen.decode(), options, label, _TRIMMED)
    assert isinstance(measured, Measured)
    truth = true_probabilities(seed, options)
    eps = 1e-9
    # Each figure is a least; together they fall short of the truth by at most `unresolved`.
    for option in options:
        assert measured.probabilities[option] <= truth[option] + eps
    short = sum(truth[o] - measured.probabilities[o] for o in options)
    assert short <= measured.unresolved + eps
    chosen_figure = measured.probabilities[label]
    total = sum(measured.probabilities.values())
    whole = total + measured.unresolved
    confidence = truth[label] / sum(truth.values())
    assert (
        chosen_figure / whole - eps
        <= confidence
        <= (chosen_figure + measured.unresolved) / whole + eps
    )
