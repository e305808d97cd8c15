"""Decisions: the stop sequences checked before sending are those the call sends, a body
option's among them, and in a JSON answer wrapped in `{"value": ...}`, the wrapper's text
with the option's."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest

import allama
from _recording import provider
from allama import ChatRequest, Extractor

NEW_YORK = Literal["New", "New York"]
NEW_YORK_NAME = "Literal['New', 'New York']"

LLAMA_CPP = {"base_url": "http://127.0.0.1:9/v1"}
OLLAMA = {"base_url": "http://127.0.0.1:9"}

SIDES = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


def completion(content: str) -> dict[str, Any]:
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
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53},
    }


def ollama_answer(content: str) -> dict[str, Any]:
    return {
        "model": "llama3.2",
        "created_at": "2026-12-01T10:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 20,
        "eval_count": 3,
    }


def decided(is_async: bool, target: Any, tp: Any, request: ChatRequest) -> Any:
    extractor = Extractor(retries=2)
    if is_async:
        return asyncio.run(extractor.adecide(target, tp, request))
    return extractor.decide(target, tp, request)


def refused(is_async: bool, target: Any, tp: Any, request: ChatRequest) -> str:
    with pytest.raises(allama.InvalidRequestError) as caught:
        decided(is_async, target, tp, request)
    error = caught.value
    assert (error.provider, error.context.model) == (target.name, request.model)
    return str(error)


def within_option(stop: str, option: str, name: str, given: str | None = None) -> str:
    where, leave = "", "`stop`"
    if given is not None:
        field, namespace = given.split("@")
        where = f" in `{field}` of the body option `{namespace}`"
        leave = f"the body option's `{field}`"
    return (
        f"the stop sequence {stop}{where} could end the answer within the option {option} of "
        f"{name}, which would then be read as another option, or as none: leave it out of "
        f"{leave} for a decision"
    )


def within_wrapper(stop: str, option: str, name: str) -> str:
    return (
        f'the stop sequence {stop} could end the answer within the JSON object `{{"value": '
        f"...}}` the option {option} of {name} is written in, which would then be read as "
        "none: leave it out of `stop` for a decision"
    )


# 1. A stop sequence given in a body option was never checked: `New` of `New York` at
# `" York"` was taken as the option `New`, recorded exact (llama.cpp, Gemini), or failed
# as a ParseError paid for three times (a JSON answer), where the same stop given as
# `stop` is refused before sending.


@SIDES
@pytest.mark.parametrize(
    ("preset", "model", "options", "option", "given"),
    [
        # A grammar (llama.cpp): one stop given as a string, as Chat Completions takes it.
        ("llama-cpp", "m", {"stop": [" York"]}, LLAMA_CPP, "stop@openai_compat"),
        ("llama-cpp", "m", {"stop": " York"}, LLAMA_CPP, "stop@openai_compat"),
        # A JSON Schema enum (OpenAI).
        ("openai", "gpt-4o-mini", {"stop": ["\n", " York"]}, {}, "stop@openai_compat"),
        # text/x.enum (Gemini), in either of Google's spellings.
        (
            "gemini",
            "gemini-2.0-flash",
            {"generationConfig": {"stopSequences": [" York"]}},
            {},
            "generationConfig.stopSequences@gemini",
        ),
        (
            "gemini",
            "gemini-2.0-flash",
            {"generation_config": {"stop_sequences": [" York"]}},
            {},
            "generation_config.stop_sequences@gemini",
        ),
        (
            "anthropic",
            "claude-sonnet-4-5",
            {"stop_sequences": [" York"]},
            {},
            "stop_sequences@anthropic",
        ),
        (
            "ollama",
            "llama3.2",
            {"options": {"stop": [" York"]}},
            OLLAMA,
            "options.stop@ollama",
        ),
    ],
)
def test_a_body_options_stop_that_could_cut_an_option_is_refused_before_sending(
    is_async: bool,
    preset: str,
    model: str,
    options: dict[str, Any],
    option: dict[str, Any],
    given: str,
) -> None:
    target, recorder = provider(preset, (200, completion('{"value":"New"}')), **option)
    namespace = given.split("@")[1]
    request = ChatRequest(model).user("Where is Manhattan?").with_option_json(namespace, options)
    message = refused(is_async, target, NEW_YORK, request)
    assert message == within_option('" York"', "`New York`", NEW_YORK_NAME, given)
    assert recorder.bodies == []


@SIDES
def test_a_body_options_stop_is_checked_on_the_provider_a_failover_may_go_to(
    is_async: bool,
) -> None:
    # OpenAI first (which sends no `gemini` option), Gemini second (which does).
    first, first_calls = provider("openai", (200, completion('{"value":"New"}')))
    second, second_calls = provider("gemini", (200, {}))
    failover = allama.FailoverProvider([first, second])
    request = (
        ChatRequest("gemini-2.0-flash")
        .user("Where is Manhattan?")
        .with_option_json("gemini", {"generationConfig": {"stopSequences": ["York"]}})
    )
    message = refused(is_async, failover, NEW_YORK, request)
    given = "generationConfig.stopSequences@gemini"
    assert message == within_option('"York"', "`New York`", NEW_YORK_NAME, given)
    assert (first_calls.bodies, second_calls.bodies) == ([], [])


@SIDES
def test_a_body_options_stop_that_cannot_cut_or_is_not_sent_goes_as_given(
    is_async: bool,
) -> None:
    target, recorder = provider("llama-cpp", (200, completion("New")), **LLAMA_CPP)
    request = (
        ChatRequest("m")
        .user("Where is Manhattan?")
        .with_option_json("openai_compat", {"stop": ["\n", "Boston"]})
        # Gemini's body option is not sent to llama.cpp: its stop is no stop of this call.
        .with_option_json("gemini", {"generationConfig": {"stopSequences": [" York"]}})
    )
    decision = decided(is_async, target, NEW_YORK, request)
    assert decision.value == "New"
    assert recorder.bodies[0]["stop"] == ["\n", "Boston"]


# 2. In a JSON answer wrapped in `{"value": ...}` (OpenAI's strict mode takes only an object
# at the root), a stop in the wrapper (`}`, `:`, `value`) was sent: the answer was cut
# after the option and lost after paying (a TruncatedError). Only the option's JSON string
# was checked.


@SIDES
@pytest.mark.parametrize("stop", ["}", ":", "{", '{"value', ': "', "}\n", " "])
def test_a_stop_that_could_cut_the_wrapper_of_a_json_answer_is_refused(
    is_async: bool, stop: str
) -> None:
    # `: "` and a space are in the wrapper only as it is written spaced (`{"value": "Yes"}`),
    # as Mistral's and vLLM's strict output writes it: which form a provider writes is not
    # known, so both are checked.
    target, recorder = provider("openai", (200, completion('{"value":"Yes"}')))
    request = ChatRequest("gpt-4o-mini", stop=(stop,)).user("Is the sky blue?")
    message = refused(is_async, target, bool, request)
    shown = {"}": '"}"', ":": '":"', "{": '"{"', '{"value': '"{\\"value"'}
    shown |= {': "': '": \\""', "}\n": '"}\\n"', " ": '" "'}
    assert message == within_wrapper(shown[stop], "`Yes`", "bool")
    assert recorder.bodies == []


@SIDES
@pytest.mark.parametrize("stop", ["Value", "VALUE", '{"Value"'])
def test_a_stop_the_wrapper_holds_in_another_case_only_is_sent(is_async: bool, stop: str) -> None:
    # The key is the schema's (`"value"`), not the model's choice, and servers match a stop
    # in its case: `Value` cannot cut `{"value":"Yes"}` (it was refused, compared without
    # case as the options are).
    target, recorder = provider("openai", (200, completion('{"value":"Yes"}')))
    request = ChatRequest("gpt-4o-mini", stop=(stop,)).user("Is the sky blue?")
    decision = decided(is_async, target, Literal["Yes", "No"], request)
    assert decision.value == "Yes"
    assert recorder.bodies[0]["stop"] == [stop]
    assert recorder.bodies[0]["response_format"]["json_schema"]["schema"]["required"] == ["value"]


@SIDES
def test_a_stop_an_option_holds_in_another_case_is_still_refused(is_async: bool) -> None:
    # The option's text is the model's to write, in any case: `ES` could end `"YES"`.
    target, recorder = provider("openai", (200, completion('{"value":"Yes"}')))
    request = ChatRequest("gpt-4o-mini", stop=("ES",)).user("Is the sky blue?")
    message = refused(is_async, target, Literal["Yes", "No"], request)
    assert message == within_option('"ES"', "`Yes`", "Literal['Yes', 'No']")
    assert recorder.bodies == []


@SIDES
def test_a_body_options_stop_that_could_cut_the_wrapper_names_the_option(
    is_async: bool,
) -> None:
    target, recorder = provider("openai", (200, completion('{"value":"Yes"}')))
    request = (
        ChatRequest("gpt-4o-mini")
        .user("Is the sky blue?")
        .with_option_json("openai_compat", {"stop": "}"})
    )
    message = refused(is_async, target, bool, request)
    assert message == (
        'the stop sequence "}" in `stop` of the body option `openai_compat` could end the '
        'answer within the JSON object `{"value": ...}` the option `Yes` of bool is written '
        "in, which would then be read as none: leave it out of the body option's `stop` for "
        "a decision"
    )
    assert recorder.bodies == []


@SIDES
def test_a_stop_in_the_wrapper_is_sent_where_the_answer_is_not_wrapped(is_async: bool) -> None:
    # Ollama takes a string at the root: the answer is the bare JSON string `"No"`.
    target, recorder = provider("ollama", (200, ollama_answer('"No"')), **OLLAMA)
    request = ChatRequest("llama3.2", stop=("}", ":")).user("Is fire cold?")
    decision = decided(is_async, target, bool, request)
    assert decision.value is False
    assert decision.metadata.root_wrapped is False
    assert recorder.bodies[0]["options"]["stop"] == ["}", ":"]
