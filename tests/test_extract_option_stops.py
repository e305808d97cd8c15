"""Extraction: an answer cut at a stop sequence a body option gives is a `TruncatedError`
naming it, never asked again, as one cut at the request's own `stop` is."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from _recording import provider
from allama import ChatRequest, Extractor, FinishReason, TruncatedError


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
