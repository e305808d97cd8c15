"""Decisions: an end-of-text token listed without bytes, an answer asked for in JSON that
comes as the option alone under repair, and log-probabilities in a shape allama does not
read, named as such."""

from __future__ import annotations

import asyncio
import enum
import json
import math
import sys
from typing import Annotated, Any, Literal, Union

import pytest
import typing_extensions

import allama
from _recording import prompt_only_over, provider
from allama import ChatRequest, ExtractionMode, Extractor, MissingToolCallError, ParseError
from allama.extract._choices import options_of
from allama.extract._probabilities import Measured, Spelling, measure
from allama.mock import MockProvider
from allama.types import (
    CapabilitySupport,
    ChatCapability,
    RequestField,
    TokenAlternative,
    TokenLogprob,
)

CITY = Literal["New", "New York", "Boston"]
YES_NO = Literal["Yes", "No"]
REPAIRED = "the answer matched its option only after repair"
NONE_SENT = "the provider returned no log-probabilities"


def alternative(token: str, p: float, *, with_bytes: bool = True) -> dict[str, Any]:
    data = list(token.encode()) if with_bytes else None
    return {"token": token, "logprob": math.log(p), "bytes": data}


def tok(token: str, p: float, *top: tuple[str, float] | tuple[str, float, bool]) -> dict[str, Any]:
    listed = [alternative(t[0], t[1], with_bytes=len(t) < 3 or bool(t[2])) for t in top]
    return {**alternative(token, p), "top_logprobs": listed}


def completion(content: str, logprobs: Any = None, *, completion_tokens: int = 3) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
                "logprobs": logprobs,
            }
        ],
        "usage": {
            "prompt_tokens": 50,
            "completion_tokens": completion_tokens,
            "total_tokens": 50 + completion_tokens,
        },
    }


def decided(
    is_async: bool, extractor: Extractor, target: Any, tp: Any, request: ChatRequest, **options: Any
) -> Any:
    if is_async:
        return asyncio.run(extractor.adecide(target, tp, request, **options))
    return extractor.decide(target, tp, request, **options)


def failed(
    is_async: bool,
    extractor: Extractor,
    target: Any,
    tp: Any,
    request: ChatRequest,
    error: type[Exception],
) -> Any:
    with pytest.raises(error) as caught:
        decided(is_async, extractor, target, tp, request)
    return caught.value


SIDES = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


# 1. OpenAI lists the end of the output as `<|end|>` with `bytes: null`: it writes no
# text. It was read as the text `<|end|>`, a branch of no option, dropped: `New`, the
# model's stop after `New`, got 0.0 and the bounds left out its 0.27. (An answer the prompt
# alone holds is an option's only once it ends: `New York`, the output's last token, with
# no end after it, may have gone on, and is unresolved.)

END_AFTER_NEW = [
    tok("New", 0.9, ("New", 0.9), ("Boston", 0.1)),
    tok(" York", 0.6, (" York", 0.6), ("<|end|>", 0.3, False), (" Jersey", 0.05)),
]


@SIDES
def test_an_end_token_listed_without_bytes_ends_the_answer_there(is_async: bool) -> None:
    body = completion("New York", {"content": END_AFTER_NEW, "refusal": None})
    target, recorder = provider("openai", (200, body))
    request = ChatRequest("gpt-4").user("Which city?")
    decision = decided(
        is_async, Extractor(), prompt_only_over(target), CITY, request, probabilities=True
    )
    assert recorder.bodies[0]["logprobs"] is True
    assert decision.value == "New York"
    # By hand: `Boston` (0.1) may go on (`Boston?`): unresolved. At ` York` (reach 0.9),
    # the end ends `New`: 0.27; `New Jersey` is no option; 0.05 unlisted: 0.045. `New York`
    # (0.54) is not ended: unresolved. Unresolved: 0.1 + 0.045 + 0.54 = 0.685.
    assert decision.probabilities == pytest.approx({"New": 0.27, "New York": 0.0, "Boston": 0.0})
    assert decision.unresolved == pytest.approx(0.1 + 0.9 * 0.05 + 0.54)
    assert decision.unlisted == frozenset({"New York", "Boston"})
    assert decision.confidence is None
    low, high = decision.confidence_bounds()
    assert (low, high) == pytest.approx((0.0, 0.685 / 0.955))


def test_a_special_token_without_bytes_writes_nothing_and_with_bytes_its_text() -> None:
    assert TokenAlternative(token="<|end|>", logprob=-1.0).utf8() == b""
    assert TokenAlternative(token="<|eot_id|>", logprob=-1.0).utf8() == b""
    assert (
        TokenAlternative(token="<\uff5cend\u2581of\u2581sentence\uff5c>", logprob=-1.0).utf8()
        == b""
    )
    # Bytes given are the token's, whatever its text; text of no special token is itself.
    given = TokenAlternative(token="<|end|>", logprob=-1.0, token_bytes=tuple(b"<|end|>"))
    assert given.utf8() == b"<|end|>"
    assert TokenAlternative(token="a|b", logprob=-1.0).utf8() == b"a|b"
    assert TokenAlternative(token="<| |>", logprob=-1.0).utf8() == b"<| |>"


def city_tokens(end: TokenAlternative) -> list[TokenLogprob]:
    def alt(text: str, p: float) -> TokenAlternative:
        return TokenAlternative(token=text, logprob=math.log(p), token_bytes=tuple(text.encode()))

    new = TokenLogprob(
        token="New",
        logprob=math.log(0.9),
        token_bytes=tuple(b"New"),
        top=(alt("New", 0.9), alt("Boston", 0.1)),
    )
    york = TokenLogprob(
        token=" York",
        logprob=math.log(0.6),
        token_bytes=tuple(b" York"),
        top=(alt(" York", 0.6), end, alt(" Jersey", 0.05)),
    )
    return [new, york]


LABELS = ["New", "New York", "Boston"]


@pytest.mark.parametrize(
    "end",
    [
        # llama.cpp's end of generation: a token of no text, bytes given (kept as it was).
        TokenAlternative(token="", logprob=math.log(0.3), token_bytes=()),
        TokenAlternative(token="<|end|>", logprob=math.log(0.3)),
        TokenAlternative(token="<|endoftext|>", logprob=math.log(0.3)),
    ],
    ids=["llama.cpp", "openai", "endoftext"],
)
@pytest.mark.parametrize("trimmed", [False, True], ids=["as-written", "trimmed"])
def test_every_token_that_writes_nothing_is_the_end_of_the_answer(
    end: TokenAlternative, trimmed: bool
) -> None:
    spelling = Spelling(0, json=False, trimmed=trimmed)
    measured = measure(city_tokens(end), "New York", LABELS, "New York", spelling)
    assert isinstance(measured, Measured)
    if not trimmed:
        assert measured.probabilities == pytest.approx(
            {"New": 0.27, "New York": 0.54, "Boston": 0.1}
        )
        assert measured.unresolved == pytest.approx(0.045)
        assert measured.unlisted == frozenset()
        return
    # Trimmed, nothing holds the answer to the options: `Boston` (0.1) and `New York`
    # (0.54, with no end after it) may go on, and are unresolved with 0.045 unlisted; the
    # end after `New` still ends it there: 0.27.
    assert measured.probabilities == pytest.approx({"New": 0.27, "New York": 0.0, "Boston": 0.0})
    assert measured.unresolved == pytest.approx(0.1 + 0.045 + 0.54)
    assert measured.unlisted == frozenset({"New York", "Boston"})


@pytest.mark.parametrize(
    "token",
    [
        "</s>",  # a special token of another form, or the text `</s>`: which, cannot be told
        "<eos>",
        "<end_of_turn>",
        "\ufffd",  # part of a character: its bytes are not its text
        "\ufffd York",
    ],
)
def test_a_token_without_bytes_whose_text_cannot_be_told_is_unresolved(token: str) -> None:
    # It was read as its text, a branch of no option, and dropped: `New`'s 0.27 (if it was
    # the end) was then neither measured nor unresolved.
    end = TokenAlternative(token=token, logprob=math.log(0.3))
    measured = measure(city_tokens(end), "New York", LABELS, "New York", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"New": 0.0, "New York": 0.54, "Boston": 0.1})
    assert measured.unresolved == pytest.approx(0.9 * 0.3 + 0.045)
    assert measured.unlisted == frozenset({"New"})
    # The truth, were it the end (`New`'s 0.27), is within the bounds.
    assert measured.probabilities["New"] + measured.unresolved >= 0.27 - 1e-9


def test_a_token_without_bytes_whose_text_shows_them_is_read_as_its_text() -> None:
    # Gemini gives no bytes: text that is no special token is read as written.
    end = TokenAlternative(token=" Jersey City", logprob=math.log(0.3))
    measured = measure(city_tokens(end), "New York", LABELS, "New York", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"New": 0.0, "New York": 0.54, "Boston": 0.1})
    assert measured.unresolved == pytest.approx(0.045)
    # The chosen token listed without bytes among its alternatives is the chosen one.
    chosen = TokenLogprob(
        token="\ufffd",
        logprob=math.log(0.5),
        top=(
            TokenAlternative(token="\ufffd", logprob=math.log(0.5)),
            TokenAlternative(token="No", logprob=math.log(0.4)),
        ),
    )
    measured = measure([chosen], "\ufffd", ["\ufffd", "No"], "\ufffd", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"\ufffd": 0.5, "No": 0.4})
    assert measured.unresolved == pytest.approx(0.1)


# 2. Under repair, an answer asked for in JSON that comes as the option alone (a provider
# that does not enforce the schema) is read as a plain answer is. It was a ParseError: the
# answer, paid for, was lost.

BARE = ["Yes", "Yes\n", '"Yes"', "yes", " **Yes.** "]


@SIDES
@pytest.mark.parametrize("text", BARE)
@pytest.mark.parametrize("preset", ["deepinfra", "openai-compatible"])
def test_under_repair_the_option_alone_is_read_where_json_was_asked_for(
    is_async: bool, text: str, preset: str
) -> None:
    options: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1"} if preset != "deepinfra" else {}
    target, recorder = provider(preset, (200, completion(text)), **options)
    request = ChatRequest("meta-llama/Llama-3.3-70B-Instruct").user("Is water wet?")
    decision = decided(is_async, Extractor(repair=True), target, YES_NO, request)
    assert decision.value == "Yes"
    assert decision.metadata.repaired is True
    assert decision.metadata.passes == 1
    assert decision.metadata.mode is ExtractionMode.NATIVE
    assert decision.metadata.root_wrapped is True
    assert decision.metadata.usage.output_tokens == 3
    assert decision.probabilities is None
    assert decision.probabilities_missing == NONE_SENT
    assert len(recorder.bodies) == 1
    assert recorder.bodies[0]["response_format"]["type"] == "json_schema"
    # Without repair, it is the ParseError it was.
    target, _ = provider(preset, (200, completion(text)), **options)
    error = failed(is_async, Extractor(), target, YES_NO, request, ParseError)
    assert error.metadata.passes == 1


@SIDES
def test_an_answer_repaired_as_plain_text_has_no_probabilities_measured(is_async: bool) -> None:
    tokens = [tok("Yes", 0.6, ("Yes", 0.6), ("No", 0.3))]
    body = completion("Yes", {"content": tokens, "refusal": None})
    target, _ = provider("openai-compatible", (200, body), base_url="http://127.0.0.1:9/v1")
    decision = decided(is_async, Extractor(repair=True), target, YES_NO, ChatRequest("m").user("q"))
    assert decision.value == "Yes"
    assert decision.metadata.repaired is True
    assert decision.probabilities is None
    assert decision.probabilities_missing == REPAIRED


@SIDES
def test_under_repair_a_bare_option_is_taken_on_its_pass_not_asked_again(is_async: bool) -> None:
    # With retries left, the engine would have asked again, paying a second time.
    answers = [(200, completion("No", completion_tokens=1)), (200, completion('{"value":"Yes"}'))]
    target, recorder = provider("deepinfra", *answers)
    extractor = Extractor(repair=True, retries=2)
    decision = decided(is_async, extractor, target, YES_NO, ChatRequest("m").user("q"))
    assert decision.value == "No"
    assert decision.metadata.repaired is True
    assert decision.metadata.passes == 1
    assert decision.metadata.usage.output_tokens == 1
    assert len(recorder.bodies) == 1


@SIDES
def test_under_repair_an_answer_that_names_no_option_is_asked_again(is_async: bool) -> None:
    answers = [
        (200, completion("Maybe", completion_tokens=1)),
        (200, completion("No", completion_tokens=2)),
    ]
    target, recorder = provider("deepinfra", *answers)
    extractor = Extractor(repair=True, retries=1)
    decision = decided(is_async, extractor, target, YES_NO, ChatRequest("m").user("q"))
    assert decision.value == "No"
    assert decision.metadata.repaired is True
    assert decision.metadata.passes == 2
    assert decision.metadata.usage.output_tokens == 3
    assert len(recorder.bodies) == 2
    # Neither names an option: the ParseError, both passes on its record.
    target, recorder = provider("deepinfra", (200, completion("Maybe")))
    error = failed(is_async, extractor, target, YES_NO, ChatRequest("m").user("q"), ParseError)
    assert error.metadata.passes == 2
    assert len(recorder.bodies) == 2


@SIDES
def test_under_repair_a_json_answer_is_read_as_before(is_async: bool) -> None:
    target, _ = provider("deepinfra", (200, completion('{"value": "Yes"}')))
    decision = decided(is_async, Extractor(repair=True), target, YES_NO, ChatRequest("m").user("q"))
    assert decision.value == "Yes"
    assert decision.metadata.repaired is False
    target, _ = provider("deepinfra", (200, completion('{"value": "yes"}')))
    decision = decided(is_async, Extractor(repair=True), target, YES_NO, ChatRequest("m").user("q"))
    assert decision.value == "Yes"
    assert decision.metadata.repaired is True


@SIDES
def test_under_repair_text_beside_a_forced_tool_is_no_answer(is_async: bool) -> None:
    # `gpt-4` answers through a forced tool: text instead of its call is not the answer.
    target, _ = provider("openai", (200, completion("Yes")))
    request = ChatRequest("gpt-4").user("q")
    error = failed(is_async, Extractor(repair=True), target, YES_NO, request, MissingToolCallError)
    assert error.metadata.mode is ExtractionMode.FORCED_TOOL


# 3. `confidence` is the chosen option's share of the options' measured probability: the
# figure stands (a grammar, renormalising at each token, would sample New York at 0.25).


def test_confidence_is_the_share_of_the_options_probability() -> None:
    tokens = [
        tok("New", 0.5, ("New", 0.5), ("Boston", 0.5)),
        tok(" York", 0.1, (" is", 0.8), (" York", 0.1), (" Jersey", 0.1)),
        tok("", 0.9, ("", 0.9)),
    ]
    body = completion("New York", {"content": tokens, "refusal": None})
    target, _ = provider("llama-cpp", (200, body), base_url="http://127.0.0.1:9/v1")
    tp = Literal["New York", "New Jersey", "Boston"]
    decision = allama.decide(target, tp, ChatRequest("m").user("q"))
    assert decision.probabilities == pytest.approx(
        {"New York": 0.05, "New Jersey": 0.05, "Boston": 0.5}
    )
    assert decision.confidence == pytest.approx(0.05 / 0.6)
    doc = type(decision).__doc__ or ""
    assert "grammar renormalises at every token" in doc


# 4. Log-probabilities in the legacy list shape (Fireworks', Together's) were reported as
# none returned: the decision now says they came in a shape allama does not read.

LEGACY = {
    "tokens": ['{"', "value", '":"', "Yes", '"}'],
    "token_logprobs": [-0.01, -0.01, -0.01, -0.3, -0.01],
    "top_logprobs": [{'{"': -0.01}, {"value": -0.01}, {'":"': -0.01}, {"Yes": -0.3}, {'"}': -0.01}],
    "text_offset": [0, 2, 7, 10, 13],
}
LEGACY_MESSAGE = (
    "the provider sent log-probabilities in a shape allama does not read (lists of `tokens` "
    "and `token_logprobs`, the legacy completions shape, with no token's bytes): they were "
    "left out"
)
CONTENT_MESSAGE = (
    "the provider sent log-probabilities in a shape allama does not read (a `content` that "
    "is no list of tokens with their log-probabilities): they were left out"
)


@SIDES
@pytest.mark.parametrize(
    ("logprobs", "message"),
    [
        (LEGACY, LEGACY_MESSAGE),
        ({"content": [{"token": "x"}]}, CONTENT_MESSAGE),
        ({"content": {"tokens": []}}, CONTENT_MESSAGE),
        ({"content": None, "refusal": None}, None),
        ({"content": []}, None),
        (None, None),
    ],
    ids=["legacy", "no-logprob", "not-a-list", "null", "empty", "none"],
)
@pytest.mark.parametrize("probabilities", [None, True])
def test_log_probabilities_of_a_shape_not_read_are_named_so(
    is_async: bool, logprobs: Any, message: str | None, probabilities: bool | None
) -> None:
    body = completion('{"value":"Yes"}', logprobs)
    target, recorder = provider("fireworks", (200, body))
    request = ChatRequest("accounts/fireworks/models/llama-v3p1-8b-instruct").user("q")
    extractor = Extractor()
    decision = decided(is_async, extractor, target, YES_NO, request, probabilities=probabilities)
    assert recorder.bodies[0]["logprobs"] is True
    assert decision.value == "Yes"
    assert decision.response.logprobs is None
    assert decision.probabilities is None
    assert decision.probabilities_missing == (message or NONE_SENT)
    noted = [w for w in decision.response.warnings if w.is_about(RequestField.LOGPROBS)]
    assert [w.message for w in noted] == ([message] if message else [])
    # Not the extraction's: the record's enforcement and warnings are as they were.
    assert all(not w.is_about(RequestField.LOGPROBS) for w in decision.metadata.degradations)


# 5. A JSON answer nothing holds exactly to the options (a schema sent without `strict`, a
# `json_object`, or an engine that does not say what it enforces): a branch that merely
# began an option was counted as that option's, and the chosen path was stopped there, so
# the figures came out exact. The model wrote `{"value":"Yes"}`; at the option's first
# token `Y` 0.5 and `N` 0.5; after `Yes`, the closing `"}` 0.4 and `terday` 0.6.

NOT_HELD = [
    tok('{"', 1.0),
    tok("value", 1.0),
    tok('":"', 1.0),
    tok("Y", 0.5, ("Y", 0.5), ("N", 0.5)),
    tok("es", 1.0),
    tok('"}', 0.4, ("terday", 0.6), ('"}', 0.4)),
]


def not_held(preset: str) -> tuple[Any, ChatRequest, str]:
    """A provider whose JSON answer nothing holds exactly, the request, and its enforcement."""
    if preset == "deepinfra":  # auto: a schema sent with `strict: false`
        target, _ = provider("deepinfra", (200, with_tokens('{"value":"Yes"}', NOT_HELD)))
        return target, ChatRequest("meta-llama/Llama-3.3-70B-Instruct").user("q"), "not_enforced"
    if preset == "openai":  # `gpt-4-turbo` native: `json_object` alone
        target, _ = provider("openai", (200, with_tokens('{"value":"Yes"}', NOT_HELD)))
        request = ChatRequest("gpt-4-turbo").user("q").with_option(ExtractionMode.NATIVE)
        return target, request, "not_enforced"
    target, _ = provider(  # strict, but the endpoint does not say what it enforces
        "openai-compatible",
        (200, with_tokens('{"value":"Yes"}', NOT_HELD)),
        base_url="http://127.0.0.1:9/v1",
    )
    return target, ChatRequest("m").user("q"), "approximate"


def with_tokens(content: str, tokens: list[dict[str, Any]]) -> dict[str, Any]:
    return completion(content, {"content": tokens, "refusal": None})


@SIDES
@pytest.mark.parametrize("preset", ["deepinfra", "openai", "openai-compatible"])
def test_a_json_answer_not_held_exactly_counts_a_branch_once_its_string_closes(
    is_async: bool, preset: str
) -> None:
    target, request, enforcement = not_held(preset)
    decision = decided(is_async, Extractor(), target, YES_NO, request)
    assert decision.value == "Yes"
    assert decision.metadata.enforcement.value == enforcement
    # `Yes` closed its string on 0.5 * 0.4; `Yesterday` (0.3) is no option; the branch `N`
    # (0.5) may go on as `Nope`: unresolved, `No` unlisted.
    assert decision.probabilities == pytest.approx({"Yes": 0.2, "No": 0.0})
    assert decision.unresolved == pytest.approx(0.5)
    assert decision.unlisted == frozenset({"No"})
    assert decision.confidence is None
    assert decision.confidence_bounds() == pytest.approx((0.2 / 0.7, 1.0))


@SIDES
def test_a_json_answer_held_exactly_is_measured_as_before(is_async: bool) -> None:
    # The same tokens under OpenAI's strict schema (exact): the rest after `Y` is forced.
    target, _ = provider("openai", (200, with_tokens('{"value":"Yes"}', NOT_HELD)))
    request = ChatRequest("gpt-4.1-mini").user("q")
    decision = decided(is_async, Extractor(), target, YES_NO, request)
    assert decision.metadata.enforcement.value == "exact"
    assert decision.probabilities == pytest.approx({"Yes": 0.5, "No": 0.5})
    assert decision.unresolved == pytest.approx(0.0)
    # Not held, the same answer measures what its closed strings show.
    target, _ = provider("deepinfra", (200, with_tokens('{"value":"Yes"}', NOT_HELD)))
    decision = decided(is_async, Extractor(), target, YES_NO, ChatRequest("m").user("q"))
    assert decision.probabilities == pytest.approx({"Yes": 0.2, "No": 0.0})


def json_tokens() -> list[TokenLogprob]:
    def alt(text: str, p: float) -> TokenAlternative:
        return TokenAlternative(token=text, logprob=math.log(p), token_bytes=tuple(text.encode()))

    def token(text: str, p: float, *top: tuple[str, float]) -> TokenLogprob:
        listed = tuple(alt(t, q) for t, q in top)
        return TokenLogprob(
            token=text, logprob=math.log(p), token_bytes=tuple(text.encode()), top=listed
        )

    return [
        token('{"value":"', 1.0),
        # `No"}` closes `No` at once; `N` may go on; 0.1 is not listed.
        token("Yes", 0.6, ("Yes", 0.6), ('No"}', 0.2), ("N", 0.1)),
        token('"}', 0.9, ('"}', 0.9), ("terday", 0.1)),
    ]


def test_a_branch_not_held_counts_once_it_writes_the_whole_option_and_its_quote() -> None:
    text = '{"value":"Yes"}'
    loose = Spelling(len('{"value":"'), json=True, held=False)
    measured = measure(json_tokens(), text, ["Yes", "No"], "Yes", loose)
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"Yes": 0.54, "No": 0.2})
    assert measured.unresolved == pytest.approx(0.1 + 0.1)
    assert measured.unlisted == frozenset()
    # Held, `N` is `No`'s and the walk stops at `Yes`.
    held = Spelling(len('{"value":"'), json=True)
    measured = measure(json_tokens(), text, ["Yes", "No"], "Yes", held)
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"Yes": 0.6, "No": 0.3})
    assert measured.unresolved == pytest.approx(0.1)


# 6. A choice held by a grammar or an enum that stops at the output token limit on a whole
# option no other option goes on from is complete: llama.cpp reports the limit before the
# end of generation can be sampled. It was thrown away as truncated.

AT_LIMIT_NOTE = (
    "the output token limit was reached on the answer's last token: the answer, held to "
    "the options, is a whole option that no other option goes on from, so it was taken"
)


def cut(content: str, logprobs: Any = None) -> dict[str, Any]:
    body = completion(content, logprobs, completion_tokens=1)
    body["choices"][0]["finish_reason"] = "length"
    return body


def gemini_cut(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "MAX_TOKENS"}
        ],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 1, "totalTokenCount": 41},
        "modelVersion": "gemini-2.0-flash",
    }


def limited(model: str) -> ChatRequest:
    return ChatRequest(model).user("q").model_copy(update={"max_output_tokens": 1})


@SIDES
def test_a_grammar_choice_cut_on_a_whole_option_is_taken_and_noted(is_async: bool) -> None:
    tokens = [tok("Yes", 0.8, ("Yes", 0.8), ("No", 0.2))]
    body = cut("Yes", {"content": tokens, "refusal": None})
    target, recorder = provider("llama-cpp", (200, body), base_url="http://127.0.0.1:9/v1")
    decision = decided(is_async, Extractor(), target, bool, limited("m"))
    assert recorder.bodies[0]["grammar"] == 'root ::= "Yes" | "No"'
    assert decision.value is True
    assert decision.metadata.enforcement.value == "exact"
    assert decision.metadata.passes == 1
    (note,) = decision.metadata.notes
    assert note.is_about(RequestField.MAX_OUTPUT_TOKENS)
    assert note.message == AT_LIMIT_NOTE
    assert decision.probabilities == pytest.approx({True: 0.8, False: 0.2})


@SIDES
def test_a_gemini_enum_cut_on_a_whole_option_is_taken(is_async: bool) -> None:
    target, recorder = provider("gemini", (200, gemini_cut("Positive")))
    tp = Literal["Positive", "Negative", "Neutral"]
    decision = decided(is_async, Extractor(), target, tp, limited("gemini-2.0-flash"))
    assert recorder.bodies[0]["generationConfig"]["responseMimeType"] == "text/x.enum"
    assert decision.value == "Positive"
    assert [w.message for w in decision.metadata.notes] == [AT_LIMIT_NOTE]


@SIDES
def test_a_cut_answer_another_option_goes_on_from_is_still_truncated(is_async: bool) -> None:
    # `New` may have been `New York` cut short; a prompt-held answer may have gone on; a
    # JSON answer keeps the engine's cut policy.
    target, _ = provider("llama-cpp", (200, cut("New")), base_url="http://127.0.0.1:9/v1")
    error = failed(is_async, Extractor(), target, CITY, limited("m"), allama.TruncatedError)
    assert error.metadata.passes == 1
    target, _ = provider("openai", (200, cut("Yes")))
    over = prompt_only_over(target)
    failed(is_async, Extractor(), over, YES_NO, limited("gpt-4"), allama.TruncatedError)
    target, _ = provider("openai", (200, cut('{"value":"Yes"}')))
    failed(is_async, Extractor(), target, YES_NO, limited("gpt-4.1-mini"), allama.TruncatedError)
    # The whole option held by the grammar is taken (it was refused too).
    target, _ = provider("llama-cpp", (200, cut("New York")), base_url="http://127.0.0.1:9/v1")
    assert decided(is_async, Extractor(), target, CITY, limited("m")).value == "New York"


# 7. Under repair, an answer that is a case variant of one option was read as another that
# differs from it by a trailing full stop: `a.` beside `A` and `A.` was `A`.


LOOSE = [("a.", "A."), ('"a."', "A."), ("**a.**", "A."), ("a", "A"), ("`a`", "A")]


@SIDES
def test_loose_matching_sets_aside_the_least_that_names_an_option(is_async: bool) -> None:
    tp = Literal["A", "A."]
    for text, expected in LOOSE:
        target, _ = provider("llama-cpp", (200, completion(text)), base_url="http://127.0.0.1:9/v1")
        request = ChatRequest("m").user("q")
        decision = decided(is_async, Extractor(repair=True), target, tp, request)
        assert (text, decision.value) == (text, expected)
        assert decision.metadata.repaired is True


@SIDES
def test_loose_matching_refuses_where_the_least_set_aside_names_several(is_async: bool) -> None:
    # `"x."` unquoted is `x.` or `X.` by case: which, cannot be told. Only with its full
    # stop set aside too was it `x`.
    body = completion('"x."')
    target, recorder = provider("llama-cpp", (200, body), base_url="http://127.0.0.1:9/v1")
    tp = Literal["x.", "X.", "x"]
    request = ChatRequest("m").user("q")
    error = failed(is_async, Extractor(repair=True), target, tp, request, ParseError)
    assert error.metadata.passes == 1
    assert len(recorder.bodies) == 1


@SIDES
def test_loose_matching_in_json_sets_aside_the_least_that_names_an_option(is_async: bool) -> None:
    target, _ = provider("deepinfra", (200, completion('{"value":"a."}')))
    tp = Literal["A", "A."]
    decision = decided(is_async, Extractor(repair=True), target, tp, ChatRequest("m").user("q"))
    assert decision.value == "A."
    assert decision.metadata.repaired is True


# 8. vLLM (and some Ollama versions) list a token that holds part of a character as the
# text U+FFFD with U+FFFD's bytes (EF BF BD), not its own: it was read as writing U+FFFD, a
# branch of no option, and dropped, so `unresolved` and the bounds left it out.

FFFD = "\ufffd"
CAT_DOG = Literal["猫", "犬"]


def vllm_answer(content: str, tokens: list[dict[str, Any]]) -> tuple[Any, Any]:
    return provider("vllm", (200, with_tokens(content, tokens)), base_url="http://127.0.0.1:9/v1")


@SIDES
def test_a_token_given_the_replacement_characters_bytes_is_unresolved(is_async: bool) -> None:
    # `猫` (0.5) is one token; the first byte of `犬` (E7), 0.45, is listed as U+FFFD.
    tokens = [tok('"', 1.0), tok("猫", 0.5, ("猫", 0.5), (FFFD, 0.45)), tok('"', 1.0)]
    assert tokens[1]["top_logprobs"][1]["bytes"] == [0xEF, 0xBF, 0xBD]
    target, _ = vllm_answer('"猫"', tokens)
    decision = decided(is_async, Extractor(), target, CAT_DOG, ChatRequest("m").user("q"))
    assert decision.value == "猫"
    assert decision.probabilities == pytest.approx({"猫": 0.5, "犬": 0.0})
    # 0.45 may be `犬`'s, with the 0.05 not listed.
    assert decision.unresolved == pytest.approx(0.5)
    assert decision.unlisted == frozenset({"犬"})
    assert decision.confidence is None
    assert decision.confidence_bounds() == pytest.approx((0.5, 1.0))


def test_u_fffd_is_read_as_written_where_an_option_writes_it_there() -> None:
    def alt(text: str, p: float) -> TokenAlternative:
        return TokenAlternative(token=text, logprob=math.log(p), token_bytes=tuple(text.encode()))

    chosen = TokenLogprob(
        token="No",
        logprob=math.log(0.5),
        token_bytes=tuple(b"No"),
        top=(alt("No", 0.5), alt(FFFD, 0.3), alt(f"{FFFD}x", 0.2)),
    )
    labels = [FFFD, "No"]
    measured = measure([chosen], "No", labels, "No", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    # U+FFFD is an option: written there, it is that option's; `\ufffdx` is no option.
    assert measured.probabilities == pytest.approx({FFFD: 0.3, "No": 0.5})
    assert measured.unresolved == pytest.approx(0.0)
    # An option that does not write it there leaves the branch unresolved.
    measured = measure([chosen], "No", ["Yes", "No"], "No", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"Yes": 0.0, "No": 0.5})
    assert measured.unresolved == pytest.approx(0.5)


def test_a_token_of_no_text_in_a_json_string_is_unresolved() -> None:
    # Newer vLLM lists a token that holds part of a character as "", bytes []: inside a
    # JSON string it cannot be told from the end of the output. Read as an end, it was no
    # option, dropped.
    text = '"猫"'
    end = TokenAlternative(token="", logprob=math.log(0.45), token_bytes=())
    tokens = [
        TokenLogprob(token='"', logprob=0.0, token_bytes=tuple(b'"')),
        TokenLogprob(
            token="猫",
            logprob=math.log(0.5),
            token_bytes=tuple("猫".encode()),
            top=(TokenAlternative(token="猫", logprob=math.log(0.5)), end),
        ),
        TokenLogprob(token='"', logprob=0.0, token_bytes=tuple(b'"')),
    ]
    loose = Spelling(1, json=True, held=False)
    measured = measure(tokens, text, ["猫", "犬"], "猫", loose)
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({"猫": 0.5, "犬": 0.0})
    assert measured.unresolved == pytest.approx(0.5)
    # In a plain answer it is the end (llama.cpp's end of generation), as before.
    plain = [
        TokenLogprob(
            token="New",
            logprob=math.log(0.6),
            token_bytes=tuple(b"New"),
            top=(TokenAlternative(token="New", logprob=math.log(0.6)),),
        ),
        TokenLogprob(
            token=" York",
            logprob=math.log(0.5),
            token_bytes=tuple(b" York"),
            top=(TokenAlternative(token=" York", logprob=math.log(0.5)), end),
        ),
    ]
    measured = measure(plain, "New York", LABELS, "New York", Spelling(0, json=False))
    assert isinstance(measured, Measured)
    assert measured.probabilities["New"] == pytest.approx(0.6 * 0.45)


# 9. A JSON string may spell an option with escapes (`"caf\u00e9"` is `café`): under a
# constraint that is not exact, an alternative that begins an escape inside the option's
# string was counted as no option.


@SIDES
def test_a_branch_that_begins_an_escape_in_the_string_is_unresolved(is_async: bool) -> None:
    tokens = [
        tok('"', 1.0),
        tok("caf", 0.9, ("caf", 0.9), ("th", 0.05)),
        tok("é", 0.5, ("é", 0.5), ("\\", 0.45)),
        tok('"', 1.0),
    ]
    target, _ = vllm_answer('"café"', tokens)
    tp = Literal["café", "thé"]
    decision = decided(is_async, Extractor(), target, tp, ChatRequest("m").user("q"))
    assert decision.metadata.enforcement.value == "approximate"
    assert decision.probabilities == pytest.approx({"café": 0.45, "thé": 0.0})
    # `th` (0.05) and 0.05 unlisted; after `caf` (0.9), `\` (0.45) and 0.05 unlisted.
    assert decision.unresolved == pytest.approx(0.05 + 0.05 + 0.9 * 0.45 + 0.9 * 0.05)
    assert decision.confidence_bounds() == pytest.approx((0.45, 1.0))


def quoted_tokens(top: list[tuple[str, float]]) -> list[TokenLogprob]:
    def alt(text: str, p: float) -> TokenAlternative:
        return TokenAlternative(token=text, logprob=math.log(p), token_bytes=tuple(text.encode()))

    def token(text: str, p: float, *listed: tuple[str, float]) -> TokenLogprob:
        return TokenLogprob(
            token=text,
            logprob=math.log(p),
            token_bytes=tuple(text.encode()),
            top=tuple(alt(t, q) for t, q in listed),
        )

    return [token('"a', 1.0), token('\\"b', 0.5, ('\\"b', 0.5), *top), token('"', 1.0)]


def test_an_option_that_writes_an_escape_is_measured_through_it() -> None:
    text = '"a\\"b"'  # the option `a"b`, its quote escaped
    labels = ['a"b', 'a"c']
    loose = Spelling(1, json=True, held=False)
    # `\"c` writes the other option; `\u0022b` writes this one otherwise, `\n` no option
    # yet maybe another, `"` closes `a`, no option.
    top = [('\\"c"', 0.2), ("\\u0022b", 0.1), ("\\n", 0.1), ('"', 0.05)]
    measured = measure(quoted_tokens(top), text, labels, 'a"b', loose)
    assert isinstance(measured, Measured)
    assert measured.probabilities == pytest.approx({'a"b': 0.5, 'a"c': 0.2})
    assert measured.unresolved == pytest.approx(0.1 + 0.1 + 0.05)
    # Held exactly, the enum's spelling is the only one: as before.
    held = measure(quoted_tokens(top), text, labels, 'a"b', Spelling(1, json=True))
    assert isinstance(held, Measured)
    assert held.probabilities == pytest.approx({'a"b': 0.5, 'a"c': 0.2})
    assert held.unresolved == pytest.approx(0.05)


# 10. GPT-5.1 and 5.2 take log-probabilities at reasoning effort `none` alone (their
# default): at another, OpenAI answers 400. `probabilities=True` was sent and refused;
# the default paid a refused round trip.

GPT_5_1_EFFORT = "`gpt-5.1` on OpenAI reports no log-probabilities at reasoning effort `low`"


def yes_json() -> dict[str, Any]:
    tokens = [tok('{"value":"', 1.0), tok("Yes", 0.7, ("Yes", 0.7), ("No", 0.2)), tok('"}', 1.0)]
    return with_tokens('{"value":"Yes"}', tokens)


@SIDES
def test_probabilities_true_at_an_effort_that_refuses_them_fails_before_sending(
    is_async: bool,
) -> None:
    target, recorder = provider("openai", (200, yes_json()))
    request = ChatRequest("gpt-5.1").user("q").with_reasoning_effort("low")
    with pytest.raises(allama.UnsupportedError) as caught:
        decided(is_async, Extractor(), target, YES_NO, request, probabilities=True)
    assert str(caught.value) == f"probabilities=True, but {GPT_5_1_EFFORT}"
    assert caught.value.field is RequestField.LOGPROBS
    assert caught.value.stage is allama.UnsupportedStage.BEFORE_SENDING
    assert recorder.bodies == []


@SIDES
@pytest.mark.parametrize(
    ("model", "effort", "asked"),
    [
        ("gpt-5.1", "low", False),
        ("gpt-5.2", "high", False),
        ("gpt-5.1", "none", True),
        ("gpt-5.1", None, True),
        ("gpt-4.1-mini", "low", True),  # no reasoning to refuse them for
    ],
)
def test_by_default_an_effort_that_refuses_them_does_not_ask_for_them(
    is_async: bool, model: str, effort: str | None, asked: bool
) -> None:
    target, recorder = provider("openai", (200, yes_json()))
    request = ChatRequest(model).user("q")
    if effort is not None:
        request = request.with_reasoning_effort(effort)
    decision = decided(is_async, Extractor(), target, YES_NO, request)
    assert decision.value == "Yes"
    (body,) = recorder.bodies
    if asked:
        assert body["logprobs"] is True
        assert decision.probabilities == pytest.approx({"Yes": 0.7, "No": 0.2})
        return
    assert "logprobs" not in body
    assert decision.probabilities is None
    assert decision.probabilities_missing == (
        f"`{model}` on OpenAI reports no log-probabilities at reasoning effort `{effort}`"
    )


@pytest.mark.parametrize(
    ("effort", "sent"), [("low", False), ("high", False), ("none", True), (None, True)]
)
def test_a_chat_request_at_an_effort_that_refuses_them_goes_without_them(
    effort: str | None, sent: bool
) -> None:
    target, recorder = provider("openai", (200, yes_json()))
    request = ChatRequest("gpt-5.2").user("q").with_logprobs(3)
    if effort is not None:
        request = request.with_reasoning_effort(effort)
    response = target.chat(request)
    (body,) = recorder.bodies
    assert (body.get("logprobs"), body.get("top_logprobs")) == ((True, 3) if sent else (None, None))
    said = [w.message for w in response.warnings if w.is_about(RequestField.LOGPROBS)]
    assert said == (
        []
        if sent
        else [f"`gpt-5.2` on OpenAI reports no log-probabilities at reasoning effort `{effort}`"]
    )


@pytest.mark.parametrize(("effort", "sent"), [("low", False), ("none", True), (None, True)])
def test_a_responses_request_at_an_effort_that_refuses_them_goes_without_them(
    effort: str | None, sent: bool
) -> None:
    answer = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5.2",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Yes", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
    }
    target, recorder = provider("openai", (200, answer), api="responses")
    request = ChatRequest("gpt-5.2").user("q").with_logprobs(3)
    if effort is not None:
        request = request.with_reasoning_effort(effort)
    response = target.chat(request)
    (body,) = recorder.bodies
    included = "message.output_text.logprobs" in body.get("include", [])
    assert (body.get("top_logprobs"), included) == ((3, True) if sent else (None, False))
    said = [w.message for w in response.warnings if w.is_about(RequestField.LOGPROBS)]
    assert said == (
        []
        if sent
        else [f"`gpt-5.2` on OpenAI reports no log-probabilities at reasoning effort `{effort}`"]
    )


# 11. A model that reaches a forced tool and reports no log-probabilities at all was
# refused with the forced tool's reason; and that reason, said before sending, said the
# answer "came" as a tool call.


@pytest.mark.parametrize(
    ("preset", "model"),
    [
        ("anthropic", "claude-3-5-haiku-latest"),
        ("anthropic", "claude-3-haiku-20240307"),
        ("groq", "llama-3.3-70b-versatile"),
    ],
)
def test_a_model_that_reports_none_is_refused_for_that(preset: str, model: str) -> None:
    target, recorder = provider(preset, (200, {}))
    with pytest.raises(allama.UnsupportedError) as caught:
        allama.decide(target, YES_NO, ChatRequest(model).user("q"), probabilities=True)
    assert str(caught.value) == (
        f"probabilities=True, but `{model}` on {preset} reports no log-probabilities"
    )
    assert recorder.bodies == []


def test_the_forced_tool_refusal_says_what_would_happen() -> None:
    target, recorder = provider("openai", (200, {}))
    with pytest.raises(allama.UnsupportedError) as caught:
        allama.decide(target, YES_NO, ChatRequest("gpt-4").user("q"), probabilities=True)
    assert str(caught.value) == (
        "probabilities=True, but the answer would come as a tool call, whose arguments have "
        "no log-probabilities, and in plain text its tokens, which stop before the end of "
        "the answer, would measure no option"
    )
    assert recorder.bodies == []


# 12. Ollama log-probabilities whose tokens do not spell the text were dropped without a
# word, and the decision said the provider returned none.

UNSPELT = "the tokens the provider reported do not spell the output: they were left out"


def ollama_answer(content: str, tokens: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "qwen3:8b",
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": "stop",
        "logprobs": tokens,
        "prompt_eval_count": 5,
        "eval_count": 3,
    }


@SIDES
def test_ollama_tokens_that_do_not_spell_the_answer_are_named_so(is_async: bool) -> None:
    # `😀` (F0 9F 98 80) as two byte tokens, each sent as U+FFFD.
    tokens = [tok('"', 1.0), tok(FFFD, 0.6, (FFFD, 0.6), ("A", 0.3)), tok(FFFD, 1.0), tok('"', 1.0)]
    target, recorder = provider(
        "ollama", (200, ollama_answer('"😀"', tokens)), base_url="http://127.0.0.1:9"
    )
    tp = Literal["😀", "A"]
    decision = decided(is_async, Extractor(), target, tp, ChatRequest("qwen3:8b").user("q"))
    assert recorder.bodies[0]["logprobs"] is True
    assert decision.value == "😀"
    assert decision.response.logprobs is None
    assert decision.probabilities is None
    assert decision.probabilities_missing == UNSPELT
    (noted,) = [w for w in decision.response.warnings if w.is_about(RequestField.LOGPROBS)]
    assert (noted.message, noted.provider) == (UNSPELT, "ollama")
    # Tokens that spell it, or none sent, say nothing.
    spelled = [tok('"', 1.0), tok("A", 0.6, ("A", 0.6)), tok('"', 1.0)]
    for answer in (ollama_answer('"A"', spelled), ollama_answer('"A"', [])):
        target, _ = provider("ollama", (200, answer), base_url="http://127.0.0.1:9")
        decision = decided(is_async, Extractor(), target, tp, ChatRequest("qwen3:8b").user("q"))
        assert all(not w.is_about(RequestField.LOGPROBS) for w in decision.response.warnings)


# 13. A stop sequence that could end the answer within an option gave another option,
# recorded exact (llama.cpp and Gemini leave the stop sequence out of the text: `New` of
# `New York` at `" York"`), or failed after paying (a JSON answer). Refused before sending.

NEW_YORK = Literal["New", "New York"]


def gemini_answer(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 1, "totalTokenCount": 41},
        "modelVersion": "gemini-2.0-flash",
    }


def stop_refusal(stop: str, option: str, name: str = "Literal['New', 'New York']") -> str:
    return (
        f"the stop sequence {stop} could end the answer within the option {option} of {name}, "
        "which would then be read as another option, or as none: leave it out of `stop` for "
        "a decision"
    )


STRATEGIES = pytest.mark.parametrize(
    ("preset", "model", "plain"),
    [
        ("llama-cpp", "m", False),  # a grammar
        ("gemini", "gemini-2.0-flash", False),  # text/x.enum
        ("openai", "gpt-4o-mini", False),  # a JSON Schema enum
        ("openai", "gpt-4o-mini", True),  # the prompt alone
    ],
)


@SIDES
@STRATEGIES
@pytest.mark.parametrize(
    ("stop", "option"),
    [(" York", "New York"), ("York, NY", "New York"), ("ew", "New"), ("N", "New")],
)
def test_a_stop_sequence_that_could_cut_an_option_is_refused_before_sending(
    is_async: bool, preset: str, model: str, plain: bool, stop: str, option: str
) -> None:
    target, recorder = provider(preset, (200, completion("New")), base_url="http://127.0.0.1:9/v1")
    if preset != "llama-cpp":
        target, recorder = provider(preset, (200, completion("New")))
    if plain:
        target = prompt_only_over(target)
    request = ChatRequest(model, stop=("\n\n", stop)).user("Where is Manhattan?")
    if (stop, preset, plain) == ("York, NY", "openai", False):
        # In JSON the option is followed by its closing quote, which `York, NY` cannot
        # follow: it is sent (and the made-up answer, no JSON, fails after).
        failed(is_async, Extractor(), target, NEW_YORK, request, ParseError)
        assert recorder.bodies[0]["stop"] == ["\n\n", stop]
        return
    error = failed(is_async, Extractor(), target, NEW_YORK, request, allama.InvalidRequestError)
    assert str(error) == stop_refusal(f'"{stop}"', f"`{option}`")
    assert (error.provider, error.context.model) == (preset, model)
    assert recorder.bodies == []


@SIDES
def test_a_stop_sequence_that_cannot_cut_an_option_is_sent(is_async: bool) -> None:
    # `York City` ends no option's tail where `New` may stop; `Boston` holds none.
    target, recorder = provider(
        "llama-cpp", (200, completion("New")), base_url="http://127.0.0.1:9/v1"
    )
    request = ChatRequest("m", stop=("\n", "Boston", "END")).user("Where is Manhattan?")
    decision = decided(is_async, Extractor(), target, NEW_YORK, request)
    assert decision.value == "New"
    assert recorder.bodies[0]["stop"] == ["\n", "Boston", "END"]
    target, recorder = provider("gemini", (200, gemini_answer("No")))
    request = ChatRequest("gemini-2.0-flash", stop=("Yess", "!")).user("q")
    assert decided(is_async, Extractor(), target, bool, request).value is False
    assert recorder.bodies[0]["generationConfig"]["stopSequences"] == ["Yess", "!"]


def test_a_stop_sequence_and_a_long_option_are_quoted_by_their_start() -> None:
    long = "x" * 5000
    target, recorder = provider("llama-cpp", (200, {}), base_url="http://127.0.0.1:9/v1")
    tp = Literal[long, "xy"]
    name = "Literal[... 2 options]"
    with pytest.raises(allama.InvalidRequestError) as caught:
        allama.decide(target, tp, ChatRequest("m", stop=("xx",)).user("q"))
    assert str(caught.value) == stop_refusal('"xx"', f"`{'x' * 60}`… (5000 characters)", name)
    stop = "y" + "z" * 99
    with pytest.raises(allama.InvalidRequestError) as caught:
        allama.decide(target, tp, ChatRequest("m", stop=(stop,)).user("q"))
    shown = f'"y{"z" * 59}"… (100 characters)'
    assert str(caught.value) == stop_refusal(shown, "`xy`", name)
    assert recorder.bodies == []


def test_a_json_answer_is_cut_where_the_options_json_string_is() -> None:
    # In JSON, `say "hi"` is written `say \"hi\"`: `\` cuts it there, and `y "` does not.
    tp = Literal['say "hi"', "no"]
    target, recorder = provider("openai", (200, completion('{"value":"no"}')))
    with pytest.raises(allama.InvalidRequestError) as caught:
        allama.decide(target, tp, ChatRequest("gpt-4o-mini", stop=("\\",)).user("q"))
    assert str(caught.value) == stop_refusal('"\\\\"', '`say "hi"`', "Literal['say \"hi\"', 'no']")
    decision = allama.decide(target, tp, ChatRequest("gpt-4o-mini", stop=('y "',)).user("q"))
    assert decision.value == "no"
    assert recorder.bodies[0]["stop"] == ['y "']


# 14. Through a failover, the choice route was taken on its first provider's capability: one
# failed over to without a plain-text choice (OpenAI's Chat Completions) was sent no
# constraint at all, with a warning that said the options went as a JSON Schema enum.

BUSY = (503, {"error": {"message": "overloaded", "type": "server_error"}})


def sent_enum(body: dict[str, Any]) -> Any:
    schema = body["response_format"]["json_schema"]["schema"]
    return schema["enum"] if "enum" in schema else schema["properties"]["value"]["enum"]


@SIDES
def test_a_failover_to_a_provider_without_a_choice_sends_the_options_as_an_enum(
    is_async: bool,
) -> None:
    first, busy = provider("llama-cpp", BUSY, base_url="http://127.0.0.1:9/v1")
    # The plan is the first provider's (`allama.extract.plan`): llama.cpp takes the enum
    # at the root, so it goes unwrapped.
    second, recorder = provider("openai", (200, completion('"No"')))
    failover = allama.FailoverProvider([first, second])
    decision = decided(is_async, Extractor(), failover, bool, ChatRequest("gpt-4o-mini").user("q"))
    assert decision.value is False
    assert "grammar" not in busy.bodies[0]
    assert sent_enum(recorder.bodies[0]) == ["Yes", "No"]
    said = [w.message for w in (*decision.metadata.degradations, *decision.response.warnings)]
    assert not any("choice output" in message for message in said)
    # Where each provider holds a choice, it is sent as one: a grammar, then text/x.enum.
    first, busy = provider("llama-cpp", BUSY, base_url="http://127.0.0.1:9/v1")
    second, recorder = provider("gemini", (200, gemini_answer("No")))
    failover = allama.FailoverProvider([first, second])
    request = ChatRequest("gemini-2.0-flash").user("q")
    decision = decided(is_async, Extractor(), failover, bool, request)
    assert decision.value is False
    assert busy.bodies[0]["grammar"] == 'root ::= "Yes" | "No"'
    assert recorder.bodies[0]["generationConfig"]["responseMimeType"] == "text/x.enum"
    assert decision.metadata.enforcement.value == "exact"


# 15. Under repair, a JSON number or boolean that is an option's value (`2` of
# `Literal[1, 2, 3]`, `true` of `bool`) failed where it came in the object asked for: only
# a string was read loosely there, though the bare `2` was read.


@SIDES
@pytest.mark.parametrize(
    ("tp", "text", "expected"),
    [
        (Literal[1, 2, 3], '{"value": 2}', 2),
        (Literal[1, 2, 3], '{"value": 2.0}', 2),
        (bool, '{"value": true}', True),
        (bool, "false", False),
        (Literal[True, False], '{"value": true}', True),
    ],
)
def test_a_json_number_or_boolean_that_is_an_options_value_is_read_under_repair(
    is_async: bool, tp: Any, text: str, expected: Any
) -> None:
    target, _ = provider("openai-compatible", (200, completion(text)), base_url="http://h/v1")
    request = ChatRequest("m").user("q")
    decision = decided(is_async, Extractor(repair=True), target, tp, request)
    assert decision.value == expected and type(decision.value) is type(expected)
    assert decision.metadata.repaired is True
    target, _ = provider("openai-compatible", (200, completion(text)), base_url="http://h/v1")
    failed(is_async, Extractor(), target, tp, request, ParseError)


@SIDES
def test_an_options_value_as_json_is_read_where_the_type_goes_unwrapped(is_async: bool) -> None:
    target, _ = provider("ollama", (200, ollama_answer("true", [])), base_url="http://127.0.0.1:9")
    request = ChatRequest("qwen3:8b").user("q")
    decision = decided(is_async, Extractor(repair=True), target, bool, request)
    assert (decision.value, decision.metadata.repaired) == (True, True)


@SIDES
@pytest.mark.parametrize(
    ("tp", "text"),
    [
        (bool, '{"value": 1}'),  # `1` is no boolean
        (Literal[1, 2, 3], '{"value": true}'),  # nor `true` a number
        (Literal[1, 2, 3], '{"value": 4}'),
        (Literal[1, 2, 3], '{"value": 2.5}'),
    ],
)
def test_a_json_number_or_boolean_of_no_option_is_still_refused(
    is_async: bool, tp: Any, text: str
) -> None:
    target, _ = provider("openai-compatible", (200, completion(text)), base_url="http://h/v1")
    request = ChatRequest("m").user("q")
    error = failed(is_async, Extractor(repair=True), target, tp, request, ParseError)
    assert error.metadata.passes == 1


# 16. Repair did not read a full stop outside the emphasis or quotes (`**Yes**.`, `'Yes'.`),
# nor curly quotes (`“Yes”`).

OUTSIDE = [
    ("**Yes**.", True),
    ("'Yes'.", True),
    ("“Yes”", True),
    ("\u2018No\u2019", False),
    ('"No".', False),
    ("**“no.”**.", False),
]


@SIDES
@pytest.mark.parametrize(("text", "expected"), OUTSIDE)
def test_repair_reads_a_full_stop_outside_the_quotes_and_curly_quotes(
    is_async: bool, text: str, expected: bool
) -> None:
    target, _ = provider("llama-cpp", (200, completion(text)), base_url="http://127.0.0.1:9/v1")
    decision = decided(is_async, Extractor(repair=True), target, bool, ChatRequest("m").user("q"))
    assert (decision.value, decision.metadata.repaired) == (expected, True)
    body = completion(json.dumps({"value": text}))
    target, _ = provider("deepinfra", (200, body))
    decision = decided(is_async, Extractor(repair=True), target, bool, ChatRequest("m").user("q"))
    assert (decision.value, decision.metadata.repaired) == (expected, True)


@SIDES
@pytest.mark.parametrize("text", ["“Yes” or “No”", "**Yes**, **No**.", "'Yes'. 'No'."])
def test_repair_reads_no_answer_that_names_two_options(is_async: bool, text: str) -> None:
    target, _ = provider("llama-cpp", (200, completion(text)), base_url="http://127.0.0.1:9/v1")
    request = ChatRequest("m").user("q")
    failed(is_async, Extractor(repair=True), target, bool, request, ParseError)


# 17. Options alike once Unicode-normalized (`café` composed, and with a combining accent)
# were taken as two: the model writes either for one word.


def test_options_alike_once_normalized_are_refused_as_alike() -> None:
    tp = Literal["café", "cafe\u0301"]
    with pytest.raises(ValueError) as caught:
        allama.decide(provider("openai", (200, {}))[0], tp, ChatRequest("m").user("q"))
    assert str(caught.value) == (
        "Literal['café', 'cafe\u0301'] has two options written `café` and `cafe\u0301` "
        "('café' and 'cafe\u0301'); the model could not tell them apart ('caf\\xe9' and "
        "'cafe\\u0301' are the same text once Unicode-normalized (NFC))"
    )

    class Drink(enum.Enum):
        CAFE = " cafe\u0301"
        TEA = "café"

    with pytest.raises(ValueError) as caught:
        options_of(Drink)
    assert str(caught.value) == (
        "Drink has two options written ` cafe\u0301` and `café` (<Drink.CAFE: ' cafe\u0301'> "
        "and <Drink.TEA: 'café'>); the model could not tell them apart (' cafe\\u0301' and "
        "'caf\\xe9' are the same text once Unicode-normalized (NFC), and read without the "
        "space at its ends)"
    )
    # Labels alike by their space alone are refused as before.
    with pytest.raises(ValueError) as caught:
        options_of(Literal["yes", " yes"])
    assert str(caught.value).endswith(
        "the model could not tell them apart (an answer is read without the space at its ends)"
    )
    assert options_of(Literal["café", "cafe"]).labels == ("café", "cafe")


# 18. On the JSON path, what was said of a decision named the `Literal` of its labels sent
# as the enum, whole, in place of the caller's type, and listed every option: a 1,200-option
# `Enum` gave a 50 KB "not strict-representable" warning on OpenAI (the `Literal` three
# times), an `EnforcementBelowError` as long, and a 17 KB `ParseError` whose detail went back
# to the model on a retry; an `IntEnum`'s warning said `Literal['LOW', 'HIGH']`. The caller's
# type is named, and a long list of options is cut to its first few and how many more (the
# schema sent still lists them all). So is the plain path's retry turn.

Big = enum.Enum("Big", {f"M{n}": f"option-{n}" for n in range(1200)})  # type: ignore[misc]
BIG_LABELS = [f"option-{n}" for n in range(1200)]
BIG_EXPECTED = (
    "one of the 1200 options of Big, which the schema lists ('option-0', 'option-1', "
    "'option-2', 'option-3', 'option-4', 'option-5', 'option-6', ... and 1193 more)"
)
NOT_STRICT = (
    "the schema of `Big` is not strict-representable: the schema at `Big` has 1200 enum "
    "values, more than the 1000 OpenAI strict mode allows: the largest enum, of 1200, is at "
    "`Big`; it goes without `strict`"
)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def vllm(*answers: tuple[int, Any]) -> Any:
    return provider("vllm", *answers, base_url="http://127.0.0.1:9/v1")


def test_a_big_enum_is_named_by_its_name_and_its_schema_sent_whole() -> None:
    target, recorder = provider("openai", (200, completion('{"value": "option-5"}')))
    decision = allama.decide(target, Big, ChatRequest("gpt-4o-mini").user("q"))
    assert decision.value is Big.M5
    assert [w.message for w in decision.metadata.degradations] == [NOT_STRICT]
    assert len(NOT_STRICT) == 201
    # What is sent is as it was: the `Literal` of the labels, every one of them.
    sent = recorder.bodies[0]["response_format"]["json_schema"]
    assert sent["name"].startswith("literal_option_0_option_1_")
    assert sent["schema"]["properties"]["value"]["enum"] == BIG_LABELS

    target, recorder = provider("openai", (200, completion('{"value": "option-5"}')))
    floor = Extractor(min_enforcement=allama.SchemaEnforcement.EXACT)
    with pytest.raises(allama.EnforcementBelowError) as caught:
        floor.decide(target, Big, ChatRequest("gpt-4o-mini").user("q"))
    assert str(caught.value) == (
        f"schema enforcement `not_enforced` is below the required `exact`: {NOT_STRICT}"
    )
    assert recorder.bodies == []


def test_a_json_answer_of_no_option_of_a_big_enum_is_told_the_options_briefly() -> None:
    target, recorder = vllm((200, completion('"nope"')), (200, completion('"option-3"')))
    decision = Extractor(retries=1).decide(target, Big, ChatRequest("m").user("q"))
    assert decision.value is Big.M3
    assert [w.message for w in decision.metadata.degradations] == [
        "the schema of `Big` was approximated: the schema at `Big` is compiled by vLLM's "
        "grammar backend, which does not report which keywords it enforces"
    ]
    retry = recorder.bodies[1]["messages"][-1]["content"]
    assert retry == (
        f"The previous reply could not be used: it did not match the schema: unknown variant "
        f"`nope`, expected {BIG_EXPECTED}. Reply again with only the JSON value, matching the "
        "schema exactly."
    )
    assert len(retry) == 326
    assert recorder.bodies[1]["response_format"] == recorder.bodies[0]["response_format"]

    for extractor in (Extractor(), Extractor(repair=True)):
        target, _ = vllm((200, completion('"nope"')))
        with pytest.raises(ParseError) as caught:
            extractor.decide(target, Big, ChatRequest("m").user("q"))
        assert caught.value.detail == f"unknown variant `nope`, expected {BIG_EXPECTED}"
        assert str(caught.value) == (
            f"vllm: failed to parse the output in `native` mode: {caught.value.detail}"
        )
        assert len(str(caught.value)) == 242


def test_an_int_enum_is_named_by_its_name_and_its_few_options_listed_whole() -> None:
    target, _ = vllm((200, completion('"HIGH"')))
    decision = allama.decide(target, Level, ChatRequest("m").user("q"))
    assert decision.value is Level.HIGH
    assert [w.message for w in decision.metadata.degradations] == [
        "the schema of `Level` was approximated: the schema at `Level` is compiled by vLLM's "
        "grammar backend, which does not report which keywords it enforces"
    ]
    target, _ = vllm((200, completion('"MEDIUM"')))
    with pytest.raises(ParseError) as caught:
        allama.decide(target, Level, ChatRequest("m").user("q"))
    assert str(caught.value) == (
        "vllm: failed to parse the output in `native` mode: unknown variant `MEDIUM`, "
        "expected 'LOW' or 'HIGH'"
    )


def test_a_big_literal_is_named_short_on_the_json_path() -> None:
    many = Literal[tuple(BIG_LABELS)]  # type: ignore[valid-type]
    target, _ = provider("openai", (200, completion('{"value": "nope"}')))
    with pytest.raises(ParseError) as caught:
        allama.decide(target, many, ChatRequest("gpt-4o-mini").user("q"))
    name = (
        "Literal['option-0', 'option-1', 'option-2', 'option-3', 'option-4', 'option-5', "
        "'option-6', ... 1200 options]"
    )
    assert caught.value.metadata.degradations[0].message == NOT_STRICT.replace("Big", name)
    assert str(caught.value) == (
        "openai: failed to parse the output in `native` mode: unknown variant `nope`, expected "
        f"one of the 1200 options of {name}, which the schema lists ('option-0', 'option-1', "
        "'option-2', 'option-3', 'option-4', 'option-5', 'option-6', ... and 1193 more)"
    )


def test_a_plain_answer_of_no_option_of_a_big_enum_is_told_the_options_briefly() -> None:
    target, recorder = provider(
        "llama-cpp",
        (200, completion("nope")),
        (200, completion("option-3")),
        base_url="http://127.0.0.1:9/v1",
    )
    decision = Extractor(retries=1).decide(target, Big, ChatRequest("m").user("q"))
    assert decision.value is Big.M3
    assert recorder.bodies[1]["messages"][-1]["content"] == (
        "That is not one of the options. Answer with exactly one of the 1200 options listed "
        "(option-0, option-1, option-2, option-3, option-4, option-5, option-6, option-7, "
        "option-8, ... and 1191 more). Write the option alone."
    )
    # Few options are listed whole, as before.
    target, recorder = provider(
        "llama-cpp",
        (200, completion("nope")),
        (200, completion("HIGH")),
        base_url="http://127.0.0.1:9/v1",
    )
    assert Extractor(retries=1).decide(target, Level, ChatRequest("m").user("q")).value is (
        Level.HIGH
    )
    assert recorder.bodies[1]["messages"][-1]["content"] == (
        "That is not one of the options. Answer with exactly one of: LOW, HIGH. Write the "
        "option alone."
    )


# 19. The edges of the stop and failover checks: a stop that cuts an option written in
# another case (read loosely under repair), one that cuts the JSON string's quotes, and a
# capability override on a failover's member, which answers for it.


@pytest.mark.parametrize(
    ("preset", "model", "stop", "option", "name"),
    [
        ("llama-cpp", "m", " YORK", "`New York`", "Literal['New', 'New York']"),
        ("openai", "gpt-4o-mini", '"Yes', "`Yes`", "bool"),
        ("openai", "gpt-4o-mini", 'No"', "`No`", "bool"),
    ],
)
def test_a_stop_cutting_an_option_in_another_case_or_its_quotes_is_refused(
    preset: str, model: str, stop: str, option: str, name: str
) -> None:
    target, recorder = provider(preset, (200, {}), base_url="http://127.0.0.1:9/v1")
    tp: Any = NEW_YORK if name.startswith("Literal") else bool
    with pytest.raises(allama.InvalidRequestError) as caught:
        allama.decide(target, tp, ChatRequest(model, stop=(stop,)).user("q"))
    assert str(caught.value) == stop_refusal(json.dumps(stop), option, name)
    assert recorder.bodies == []


def test_a_capability_override_on_a_failovers_member_answers_for_it() -> None:
    from allama.wrappers import CapabilityOverrideProvider

    first, _ = provider("gemini", BUSY)
    second, recorder = provider("gemini", (200, gemini_answer('"No"')))
    unsupported = {ChatCapability.CHOICE_OUTPUT: CapabilitySupport.UNSUPPORTED}
    failover = allama.FailoverProvider([first, CapabilityOverrideProvider(second, unsupported)])
    decision = allama.decide(failover, bool, ChatRequest("gemini-2.0-flash").user("q"))
    assert decision.value is False
    sent = recorder.bodies[0]["generationConfig"]
    assert sent["responseMimeType"] == "application/json"


# 20. llama.cpp's server holds back a token that ends inside a character and lists the whole
# character as one entry, with the log-probability and the alternatives of its last token
# alone (lone continuation bytes, listed where that token began): read as if they began at
# the character, they were no option, the first tokens' probability went missing, and the
# figures came out exact (`{'👍': 0.727, '👎': 0.0}`, bounds (1.0, 1.0), though `👎`'s last
# byte was listed at 0.141). Recorded from the real server (SmolLM2-135M, a grammar of the
# options), its usage counting more tokens than it lists.

MERGED = (
    "the provider sent log-probabilities that give a character the model wrote in several "
    "tokens as one, with the last token's log-probability and alternatives alone (as "
    "llama.cpp's server does): they were left out"
)


def raw(token: str, logprob: float, data: list[int], *top: tuple[str, float, list[int]]) -> Any:
    listed = [{"token": t, "logprob": lp, "bytes": d} for t, lp, d in top]
    return {"token": token, "logprob": logprob, "bytes": data, "top_logprobs": listed}


THUMBS = [  # `👍` of 3 tokens, and the end: 4 counted, 2 listed
    raw(
        "👍",
        -0.319,
        [240, 159, 145, 141],
        (FFFD, -0.32, [141]),
        (FFFD, -1.96, [142]),
        (FFFD, -3.16, [143]),
    ),
    raw("", -0.874, [], ("", -0.87, []), ("\n", -1.66, [10])),
]
JAPAN = [  # `日` of 2 tokens, `本` of 1, and the end: 4 counted, 3 listed
    raw(
        "日",
        -0.649,
        [230, 151, 165],
        (FFFD, -0.65, [165]),
        (FFFD, -1.58, [160]),
        (FFFD, -2.36, [169]),
        (FFFD, -2.42, [143]),
        (FFFD, -3.11, [133]),
    ),
    raw(
        "本",
        -0.278,
        [230, 156, 172],
        ("本", -0.28, [230, 156, 172]),
        ("", -3.26, [230, 157]),
        ("", -3.77, [227, 130]),
        ("", -3.91, [231]),
        ("", -4.39, [230]),
    ),
    raw(
        "",
        -11.82,
        [],
        ("", -1.25, [227, 129]),
        ("の", -1.85, [227, 129, 174]),
        (" (", -2.44, [32, 40]),
        ("", -2.6, [227, 131]),
        (",", -2.88, [44]),
    ),
]
MERGED_CASES = pytest.mark.parametrize(
    ("content", "tokens", "tp", "value"),
    [
        ("👍", THUMBS, Literal["👍", "👎"], "👍"),
        ("日本", JAPAN, Literal["日本", "中国", "한국"], "日本"),
    ],
    ids=["emoji", "cjk"],
)


def llama_cpp(content: str, tokens: list[dict[str, Any]], counted: int) -> Any:
    body = completion(content, {"content": tokens}, completion_tokens=counted)
    return provider("llama-cpp", (200, body), base_url="http://127.0.0.1:9/v1")


@SIDES
@MERGED_CASES
def test_a_character_whose_tokens_were_merged_gives_no_probabilities(
    is_async: bool, content: str, tokens: list[dict[str, Any]], tp: Any, value: str
) -> None:
    target, recorder = llama_cpp(content, tokens, counted=4)
    request = ChatRequest("smollm2").user("q")
    decision = decided(is_async, Extractor(), target, tp, request, probabilities=True)
    assert "grammar" in recorder.bodies[0]
    assert decision.value == value
    assert decision.probabilities is None
    assert decision.unresolved is None
    assert decision.confidence_bounds() is None
    assert decision.probabilities_missing == MERGED
    # Not kept for a caller to sum either: the merged tokens' log-probabilities are missing.
    assert decision.response.logprobs is None
    noted = [w for w in decision.response.warnings if w.is_about(RequestField.LOGPROBS)]
    assert [w.message for w in noted] == [MERGED]


@MERGED_CASES
def test_tokens_no_fewer_than_counted_were_not_merged(
    content: str, tokens: list[dict[str, Any]], tp: Any, value: str
) -> None:
    # As many tokens counted as listed: none was held back, and a stray continuation byte
    # listed at a character's start is the model's own alternative, of no option.
    target, _ = llama_cpp(content, tokens, counted=len(tokens))
    decision = allama.decide(target, tp, ChatRequest("smollm2").user("q"))
    assert decision.response.logprobs is not None
    assert decision.probabilities is not None
    assert decision.probabilities[value] == pytest.approx(math.exp(tokens[0]["logprob"]))
    assert decision.response.warnings == ()


def test_options_of_plain_text_and_characters_split_token_by_token_keep_their_figures() -> None:
    # Plain text on llama.cpp, its usage counting more than it lists (a stop string's
    # tokens are left out), an alternative a piece of a character: measured as before.
    ascii_tokens = [
        raw("No", math.log(0.6), list(b"No"), ("No", math.log(0.6), list(b"No"))),
        raw("", math.log(0.5), [], ("", math.log(0.5), []), ("", -1.0, [227, 129])),
    ]
    target, _ = llama_cpp("No", ascii_tokens, counted=5)
    decision = allama.decide(target, YES_NO, ChatRequest("smollm2").user("q"))
    assert decision.probabilities == pytest.approx({"Yes": 0.0, "No": 0.6})
    assert decision.unresolved == pytest.approx(0.4)
    # A provider that lists each byte token (OpenAI): the last one's alternatives begin
    # inside the character, where the token does.
    tokens = [
        raw(
            "\\xf0\\x9f\\x91",
            math.log(0.9),
            [240, 159, 145],
            ("\\xf0\\x9f\\x91", math.log(0.9), [240, 159, 145]),
        ),
        raw(
            "\\x8d",
            math.log(0.8),
            [141],
            ("\\x8d", math.log(0.8), [141]),
            ("\\x8e", math.log(0.15), [142]),
        ),
        raw("", 0.0, []),
    ]
    target, _ = llama_cpp("👍", tokens, counted=5)
    decision = allama.decide(target, Literal["👍", "👎"], ChatRequest("smollm2").user("q"))
    assert decision.probabilities == pytest.approx({"👍": 0.72, "👎": 0.135})
    assert decision.unresolved == pytest.approx(0.1 + 0.9 * 0.05)


# 21. A log-probability a hair above 0 (`1.2e-7`, a probability of 1 computed in floating
# point) dropped the whole list, with a warning blaming its shape. It is read as 0; one
# plainly above 0 is still no log-probability.


@pytest.mark.parametrize("noise", [1.2e-7, 1e-6])
def test_a_log_probability_a_hair_above_zero_is_read_as_zero(noise: float) -> None:
    tokens = [tok('{"', 1.0), tok("value", 1.0), tok('":"', 1.0), tok("Yes", 0.7, ("No", 0.3))]
    tokens += [tok('"}', 1.0)]
    tokens[0]["logprob"] = noise
    tokens[4]["top_logprobs"] = [{"token": '"}', "logprob": noise, "bytes": list(b'"}')}]
    target, _ = provider("openai", (200, with_tokens('{"value":"Yes"}', tokens)))
    decision = allama.decide(target, YES_NO, ChatRequest("gpt-4o-mini").user("q"))
    assert decision.response.warnings == ()
    assert decision.response.logprobs is not None
    assert decision.response.logprobs[0].logprob == 0.0
    assert decision.response.logprobs[4].top[0].logprob == 0.0
    assert decision.probabilities == pytest.approx({"Yes": 0.7, "No": 0.3})


def test_a_log_probability_plainly_above_zero_is_still_refused() -> None:
    tokens = [tok("Yes", 1.0)]
    tokens[0]["logprob"] = 1e-3
    target, _ = provider("openai", (200, with_tokens('{"value":"Yes"}', tokens)))
    decision = allama.decide(target, YES_NO, ChatRequest("gpt-4o-mini").user("q"))
    assert decision.response.logprobs is None
    assert decision.probabilities_missing == CONTENT_MESSAGE


# 22. A type alias of a choice (`type Color = Literal[...]`, `TypeAliasType`, an Enum's
# alias), `Annotated` around one, and a union of `Literal`s were refused as no choice,
# though extraction takes them and `decide`'s overloads take any type form. Each is decided
# as the choice it stands for, named as the caller wrote it, its value of the caller's type.

Color = typing_extensions.TypeAliasType("Color", Literal["red", "green"])
Shade = typing_extensions.TypeAliasType("Shade", Color)


class Tone(enum.Enum):
    WARM = "warm"
    COLD = "cold"


ToneAlias = typing_extensions.TypeAliasType("ToneAlias", Tone)


Mixed = typing_extensions.TypeAliasType("Mixed", Union[Color, Literal["blue"]])  # noqa: UP007
RED_GREEN = ["red", "green"]


@pytest.mark.parametrize(
    ("tp", "name", "labels", "answer", "value"),
    [
        (Color, "Color", RED_GREEN, "green", "green"),
        (Shade, "Shade", RED_GREEN, "green", "green"),
        (ToneAlias, "ToneAlias", ["warm", "cold"], "cold", Tone.COLD),
        (
            Annotated[Literal["red", "green"], "doc"],
            "Literal['red', 'green']",
            RED_GREEN,
            "green",
            "green",
        ),
        (Annotated[Color, "doc"], "Color", RED_GREEN, "green", "green"),
        (Annotated[bool, "doc"], "bool", ["Yes", "No"], "No", False),
        (
            Literal["red"] | Literal["green"],
            "Union[Literal['red'], Literal['green']]",
            RED_GREEN,
            "green",
            "green",
        ),
        (
            Union[Mixed, Literal["grey"]],  # noqa: UP007
            "Union[Mixed, Literal['grey']]",
            ["red", "green", "blue", "grey"],
            "blue",
            "blue",
        ),
    ],
    ids=[
        "alias",
        "alias-of-alias",
        "enum-alias",
        "annotated",
        "annotated-alias",
        "bool",
        "union",
        "union-of-alias",
    ],
)
def test_an_alias_annotated_or_union_of_literals_is_decided_as_its_choice(
    tp: Any, name: str, labels: list[str], answer: str, value: Any
) -> None:
    target, recorder = provider("openai", (200, completion(json.dumps({"value": answer}))))
    decision = allama.decide(
        target, tp, ChatRequest("gpt-4o-mini").user("q"), descriptions={value: "this one"}
    )
    assert decision.value == value and type(decision.value) is type(value)
    assert options_of(tp).name == name
    sent = recorder.bodies[0]["response_format"]["json_schema"]["schema"]
    assert sent["properties"]["value"]["enum"] == labels
    assert f"- {answer}: this one" in recorder.bodies[0]["messages"][0]["content"]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="the `type` statement is 3.12's")
def test_a_type_statement_alias_is_decided_as_its_choice() -> None:
    scope: dict[str, Any] = {"Literal": Literal, "Tone": Tone}
    exec("type Color = Literal['red', 'green']\ntype Both = Color | Literal['blue']", scope)
    exec("type Warmth = Tone\ntype Loop = Literal['a'] | Loop", scope)
    assert options_of(scope["Color"]).name == "Color"
    assert options_of(scope["Both"]).labels == ("red", "green", "blue")
    assert options_of(scope["Both"] | Literal["grey"]).labels == ("red", "green", "blue", "grey")
    assert options_of(scope["Warmth"]).options[0].value is Tone.WARM
    with pytest.raises(TypeError, match=r"^decide\(\) takes .*, not Loop; for other types"):
        options_of(scope["Loop"])


def test_an_alias_or_union_of_no_choice_is_refused_by_its_name() -> None:
    with pytest.raises(TypeError) as caught:
        options_of(typing_extensions.TypeAliasType("Count", int))
    assert str(caught.value) == (
        "decide() takes an Enum, a Literal[...] or bool as the type of its answer, not Count; "
        "for other types use extract()"
    )
    with pytest.raises(TypeError) as caught:
        options_of(Literal["a"] | int)
    assert str(caught.value) == (
        "decide() takes an Enum, a Literal[...] or bool as the type of its answer, not "
        "typing.Union[typing.Literal['a'], int]; for other types use extract()"
    )
    # Unflattened, the union's alike options are refused as one Literal's are.
    with pytest.raises(ValueError) as alike:
        options_of(Literal["a", "b"] | Literal["b"])
    assert str(alike.value) == (
        "Union[Literal['a', 'b'], Literal['b']] has two options written `b` ('b' and 'b'); "
        "the model could not tell them apart"
    )


# 23. A lone surrogate in an option (text cut between the halves of a character) crashed
# with pydantic's `SchemaError` building the answer's type, or was refused by the encoder
# on llama.cpp: it is refused before sending, the option named, on every route.


@pytest.mark.parametrize("preset", ["openai", "anthropic", "gemini", "ollama"])
def test_an_option_holding_a_lone_surrogate_is_refused_before_sending(preset: str) -> None:
    target, recorder = provider(preset, (200, completion("b")))
    with pytest.raises(ValueError) as caught:
        allama.decide(target, Literal["a\ud800", "b"], ChatRequest("m").user("q"))
    assert str(caught.value) == (
        "Literal['a\\ud800', 'b'] has an option written 'a\\ud800', which holds a lone "
        "surrogate that UTF-8 cannot carry (text cut between the halves of a character?)"
    )
    assert recorder.bodies == []
    with pytest.raises(ValueError, match="lone surrogate"):
        allama.decide(MockProvider.with_structured("b"), Literal["a\ud800", "b"], ChatRequest("m"))


# 24. The prompt listed each option as `- {label}: {description}` as written: a label or a
# description holding a line break showed the model options that are none (`- a` and `b`
# for `a\nb`; `- d` in c's description). A label with a control character, a line break or
# space at its ends (or a leading quote) is listed as a JSON string, and a description's
# further lines are indented under its option; an answer copied as listed is read as its
# option. Other labels are listed as before.


def test_a_label_or_description_with_a_line_break_lists_no_other_option() -> None:
    options = options_of(
        Literal["a\nb", "c", " d", "tab\there", '"q"', "plain: text"],
        {"c": "the letter c\n- d\n\nmore", "a\nb": "two lines"},
    )
    assert options.listing() == (
        '- "a\\nb": two lines\n'
        "- c: the letter c\n"
        "  - d\n"
        "\n"
        "  more\n"
        '- " d"\n'
        '- "tab\\there"\n'
        '- "\\"q\\""\n'
        "- plain: text"
    )
    assert options_of(Literal["café", "\u2028x"]).listing() == '- café\n- "\u2028x"'


@SIDES
@pytest.mark.parametrize("written", ['"a\\nb"', ' "a\\nb"\n', "a\nb"])
def test_an_answer_copied_as_its_option_is_listed_is_that_option(
    is_async: bool, written: str
) -> None:
    tokens = [tok(written, 0.9, ("c", 0.1))]
    target, recorder = provider("openai", (200, with_tokens(written, tokens)))
    decision = decided(
        is_async,
        Extractor(),
        prompt_only_over(target),
        Literal["a\nb", "c"],
        ChatRequest("gpt-4o-mini").user("q"),
        descriptions={"c": "the letter c\n- d"},
    )
    assert decision.value == "a\nb"
    assert not decision.metadata.repaired
    assert recorder.bodies[0]["messages"][0]["content"] == (
        "Answer with exactly one of the options below, written exactly as it is listed, and "
        'nothing else.\n\nOptions:\n- "a\\nb"\n- c: the letter c\n  - d'
    )
    if written == "a\nb":  # the label itself, read as before
        assert decision.probabilities == pytest.approx({"a\nb": 0.0, "c": 0.0})
    else:
        assert decision.probabilities is None
        assert decision.probabilities_missing == (
            "the answer was written as the prompt lists its option, a JSON string: measured "
            "within it, the probabilities would be conditional on its opening quote, so none "
            "are given"
        )


@SIDES
def test_a_quoted_answer_names_only_an_option_listed_quoted(is_async: bool) -> None:
    target, _ = provider("openai", (200, completion('"c"')))
    error = failed(
        is_async,
        Extractor(),
        prompt_only_over(target),
        Literal["a\nb", "c"],
        ChatRequest("gpt-4o-mini").user("q"),
        ParseError,
    )
    assert error.raw == '"c"'


def test_the_turn_that_asks_again_names_the_options_as_listed() -> None:
    target, recorder = provider("openai", (200, completion("zz")), (200, completion('" c"')))
    decision = Extractor(retries=1).decide(
        prompt_only_over(target), Literal["a\nb", " c"], ChatRequest("gpt-4o-mini").user("q")
    )
    assert decision.value == " c"
    assert recorder.bodies[1]["messages"][-1]["content"] == (
        'That is not one of the options. Answer with exactly one of: "a\\nb", " c". Write the '
        "option alone."
    )
