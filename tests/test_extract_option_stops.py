"""Extraction: an answer cut at a stop sequence a body option gives is a `TruncatedError`
naming it, never asked again, as one cut at the request's own `stop` is."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from _recording import provider
from allama import ChatRequest, Extractor, FinishReason, TruncatedError
from allama.errors import Error


class Tagged(BaseModel):
    name: str
    tags: list[str]


CUT = '{"name":"Ada","tags":["x"'


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
    }


def _request() -> ChatRequest:
    return (
        ChatRequest("gpt-4o-mini")
        .user("Ada")
        .with_option_json("openai_compat", {"stop": ["]", "STOP-HERE"]})
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_an_output_cut_at_a_body_options_stop_is_truncated_not_asked_again(
    streamed: bool,
) -> None:
    whole = '{"name":"Ada","tags":["x"]}'
    target, recorder = provider("openai", (200, completion(CUT)), (200, completion(whole)))
    extractor = Extractor(retries=2)
    with pytest.raises(TruncatedError) as caught:
        if streamed:
            with extractor.extract_stream(target, Tagged, _request()) as stream:
                stream.finish()
        else:
            extractor.extract(target, Tagged, _request())
    assert len(recorder.bodies) == 1
    assert recorder.bodies[0]["stop"] == ["]", "STOP-HERE"]
    error = caught.value
    assert (error.finish_reason, error.stop) == (FinishReason.STOP, ["]", "STOP-HERE"])
    assert error.metadata.passes == 1


# The advice named the request's `stop`, which was empty: it names where the request gives
# the sequences, a body option's field as a decision's refusal names it.

OPTION_CUT = '{"name":"a","age":1'


class Person(BaseModel):
    name: str
    age: int


def _cut_by(request: ChatRequest, streamed: bool) -> TruncatedError:
    target, recorder = provider("openai", (200, completion(OPTION_CUT)))
    extractor = Extractor(retries=2)
    with pytest.raises(TruncatedError) as caught:
        if streamed:
            with extractor.extract_stream(target, Person, request) as stream:
                stream.finish()
        else:
            extractor.extract(target, Person, request)
    assert len(recorder.bodies) == 1
    return caught.value


def _at_stop(sequences: str, leave: str) -> str:
    return (
        f"openai: the output ended at a stop sequence the request sets{sequences}, before the "
        f"structured output was complete (`native` mode): leave {leave} out of an extraction"
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_the_advice_at_a_body_options_stop_names_its_field_not_stop(streamed: bool) -> None:
    request = (
        ChatRequest("gpt-4o-mini").user("a, 1").with_option_json("openai_compat", {"stop": ["}"]})
    )
    error = _cut_by(request, streamed)
    leave = "`stop` of the body option `openai_compat`"
    assert str(error) == _at_stop(' ("}")', leave)
    assert (error.stop, error.request_stop, error.option_stops) == (
        ["}"],
        False,
        {"openai_compat": "stop"},
    )
    # The log view leaves out the sequences (the caller's text), not where they are given.
    assert error.as_log()["message"] == _at_stop("", leave)
    again = Error.from_json(error.to_json())
    assert isinstance(again, TruncatedError)
    assert (str(again), again.option_stops) == (str(error), {"openai_compat": "stop"})


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_the_advice_at_stops_given_in_both_places_names_both(streamed: bool) -> None:
    request = (
        ChatRequest("gpt-4o-mini", stop=("STOP-HERE",))
        .user("a, 1")
        .with_option_json("openai_compat", {"stop": ["}"]})
    )
    error = _cut_by(request, streamed)
    leave = "`stop` and `stop` of the body option `openai_compat`"
    assert str(error) == _at_stop(' ("STOP-HERE", "}")', leave)
    assert (error.request_stop, error.option_stops) == (True, {"openai_compat": "stop"})


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_the_advice_at_the_requests_own_stop_is_as_it_was(streamed: bool) -> None:
    request = ChatRequest("gpt-4o-mini", stop=("}",)).user("a, 1")
    error = _cut_by(request, streamed)
    assert str(error) == _at_stop(' ("}")', "`stop`")
    assert (error.request_stop, error.option_stops) == (None, None)
