"""A type sent wrapped in `{"value": ...}` for the first provider of a failover, answered by
one that sent nothing of the schema (Claude before 4.5 has no structured output): the model
was never asked for the wrapping object, so its answer is read as the type itself."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMode, FailoverProvider, Transport
from allama.errors import Error
from allama.extract._parse import read_again


class Person(BaseModel):
    name: str
    year: int


def _transport(answer: Any) -> Transport:
    def handle(request: httpx2.Request) -> httpx2.Response:
        return answer(json.loads(request.read()))

    return Transport(client=httpx2.Client(transport=httpx2.MockTransport(handle)))


def _async_transport(answer: Any) -> Transport:
    async def handle(request: httpx2.Request) -> httpx2.Response:
        return answer(json.loads(await request.aread()))

    return Transport(async_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)))


def _busy(body: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(503, json={"error": {"message": "busy", "type": "server_error"}})


def _claude(text: str, seen: list[dict[str, Any]]) -> Any:
    def answer(body: dict[str, Any]) -> httpx2.Response:
        seen.append(body)
        return httpx2.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
        )

    return answer


REQUEST = (
    ChatRequest("claude-3-5-haiku-20241022").user("Ada, 1843").with_option(ExtractionMode.NATIVE)
)
ADA = [Person(name="Ada", year=1843)]


def _failover(text: str, seen: list[dict[str, Any]], *, asynchronous: bool) -> FailoverProvider:
    make = _async_transport if asynchronous else _transport
    return FailoverProvider(
        [
            allama.provider("openai", api_key="k", transport=make(_busy)),
            allama.provider("anthropic", api_key="k", transport=make(_claude(text, seen))),
        ]
    )


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_answer_to_a_request_that_sent_no_schema_is_read_as_the_type(
    asynchronous: bool,
) -> None:
    seen: list[dict[str, Any]] = []
    provider = _failover('[{"name": "Ada", "year": 1843}]', seen, asynchronous=asynchronous)
    if asynchronous:
        extracted = asyncio.run(allama.aextract(provider, list[Person], REQUEST))
    else:
        extracted = allama.extract(provider, list[Person], REQUEST)
    assert extracted.value == ADA
    # Nothing of the schema, nor of the wrapping, went to Claude.
    assert not {"output_config", "tools", "system"} & seen[0].keys()
    metadata = extracted.metadata
    assert (metadata.root_wrapped, metadata.enforcement.value, metadata.passes) == (
        False,
        "not_enforced",
        1,
    )
    # Its source is read again as it was read (a batch ledger's values are).
    assert read_again(list[Person], extracted.source, metadata.root_wrapped) == ADA


def test_the_same_answer_wrapped_is_still_read_and_so_recorded() -> None:
    provider = _failover('{"value": [{"name": "Ada", "year": 1843}]}', [], asynchronous=False)
    extracted = allama.extract(provider, list[Person], REQUEST)
    assert (extracted.value, extracted.metadata.root_wrapped) == (ADA, True)
    assert read_again(list[Person], extracted.source, True) == ADA


def test_an_answer_neither_shape_takes_fails_as_the_wrapped_type() -> None:
    provider = _failover('[{"name": "Ada"}]', [], asynchronous=False)
    with pytest.raises(Error) as raised:
        allama.extract(provider, list[Person], REQUEST)
    assert type(raised.value).__name__ == "ParseError"
    assert "expected an object" in str(raised.value)
