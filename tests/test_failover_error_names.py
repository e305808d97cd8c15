"""An extraction's failure of an answer names the provider that answered and the model it
answered with: through a failover, the one of its providers that answered (as the response
does), not the failover. A failure before any answer names the provider given."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel
from tests._recording import Recorder, provider

from allama import (
    ChatRequest,
    Error,
    ExtractionMode,
    Extractor,
    FailoverProvider,
    ParseError,
    ToolDefinition,
)
from allama.extract import ToolConflictError

OVERLOADED = (503, {"error": {"message": "overloaded", "type": "server_error"}})
ANSWERED_BY = "deepseek-chat"
MISSING_YEAR = "deepseek: failed to parse the output in `native` mode: missing field `year`"


class Person(BaseModel):
    name: str
    year: int


def _request() -> ChatRequest:
    return ChatRequest("gpt-4o-mini").user("Ada, 1843").with_option(ExtractionMode.NATIVE)


def _answer(text: str) -> tuple[int, dict[str, Any]]:
    return (
        200,
        {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": ANSWERED_BY,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        },
    )


def _streamed(text: str) -> tuple[int, bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": ANSWERED_BY,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n"

    body = chunk({"role": "assistant", "content": text}) + chunk({}, "stop") + "data: [DONE]\n\n"
    return 200, body.encode()


def _failover(second: str, *answers: tuple[int, Any]) -> tuple[FailoverProvider, Recorder]:
    first, _ = provider("openai", OVERLOADED)
    answering, recorder = provider(second, *answers)
    return FailoverProvider([first, answering]), recorder


def _parse_error(run: Any) -> ParseError:
    with pytest.raises(ParseError) as caught:
        run()
    return caught.value


def _named(error: Error) -> tuple[str, str | None, str | None]:
    return str(error), error.context.provider, error.context.model


def test_a_parse_error_after_a_failover_names_the_provider_that_answered() -> None:
    failover, recorder = _failover("deepseek", _answer('{"name":"Ada"}'))

    error = _parse_error(lambda: Extractor().extract(failover, Person, _request()))

    assert len(recorder.bodies) == 1
    assert _named(error) == (MISSING_YEAR, "deepseek", ANSWERED_BY)
    assert error.response is not None
    assert (error.response.provider, error.response.model) == ("deepseek", ANSWERED_BY)
    log = error.as_log()
    assert (log["provider"], log["model"]) == ("deepseek", ANSWERED_BY)
    again = Error.from_json(error.to_json())
    assert _named(again) == (MISSING_YEAR, "deepseek", ANSWERED_BY)


def test_the_failover_names_it_as_the_provider_alone_would() -> None:
    alone, _ = provider("deepseek", _answer('{"name":"Ada"}'))
    failover, _ = _failover("deepseek", _answer('{"name":"Ada"}'))

    unwrapped = _parse_error(lambda: Extractor().extract(alone, Person, _request()))
    wrapped = _parse_error(lambda: Extractor().extract(failover, Person, _request()))

    assert _named(unwrapped) == _named(wrapped) == (MISSING_YEAR, "deepseek", ANSWERED_BY)


def test_a_parse_error_after_a_failover_async() -> None:
    failover, _ = _failover("deepseek", _answer('{"name":"Ada"}'))

    error = _parse_error(lambda: asyncio.run(Extractor().aextract(failover, Person, _request())))

    assert _named(error) == (MISSING_YEAR, "deepseek", ANSWERED_BY)


def test_a_streamed_answer_after_a_failover_names_the_provider_that_answered() -> None:
    failover, recorder = _failover("deepseek", _streamed('{"name":"Ada"}'))

    def run() -> None:
        with Extractor().extract_stream(failover, Person, _request()) as stream:
            stream.finish()

    error = _parse_error(run)

    assert recorder.bodies[0]["stream"] is True
    assert _named(error) == (MISSING_YEAR, "deepseek", ANSWERED_BY)


def test_a_streamed_answer_after_a_failover_async() -> None:
    failover, _ = _failover("deepseek", _streamed('{"name":"Ada"}'))

    async def run() -> None:
        async with Extractor().aextract_stream(failover, Person, _request()) as stream:
            await stream.finish()

    error = _parse_error(lambda: asyncio.run(run()))

    assert _named(error) == (MISSING_YEAR, "deepseek", ANSWERED_BY)


def test_an_answer_refused_by_the_provider_failed_over_to_names_it() -> None:
    refused = {
        "error": {
            "message": "Generated JSON does not match the expected schema.",
            "type": "invalid_request_error",
            "code": "json_validate_failed",
            "failed_generation": '{"name":"Ada"}',
        }
    }
    failover, recorder = _failover("groq", (400, refused))

    error = _parse_error(lambda: Extractor().extract(failover, Person, _request()))

    assert len(recorder.bodies) == 1
    assert (error.raw, error.response) == ('{"name":"Ada"}', None)
    assert _named(error) == (
        "groq: failed to parse the output in `native` mode: missing field `year`",
        "groq",
        "gpt-4o-mini",
    )


def test_a_failure_before_any_answer_names_the_provider_given() -> None:
    failover, recorder = _failover("deepseek", _answer('{"name":"Ada","year":1843}'))
    request = _request().with_tools([ToolDefinition(name="calc", parameters={"type": "object"})])

    with pytest.raises(ToolConflictError) as caught:
        Extractor().extract(failover, Person, request)

    assert recorder.bodies == []
    assert caught.value.context.provider == "failover(openai, deepseek)"
    assert caught.value.context.model is None
    assert str(caught.value).startswith("failover(openai, deepseek): extraction cannot be")
