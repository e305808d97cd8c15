"""Tool call arguments that come as a JSON object keep their numbers as the model wrote them.

Anthropic's `tool_use.input`, Gemini's `functionCall.args`, Ollama's `function.arguments` and
a Responses server's `arguments` object are read by the body reader, which makes every
number with a fraction or an exponent a float (17 digits): the arguments text a `ToolCall`
carries is written from the body's text again wherever they hold one, so a `Decimal` field
gets the number written (`1.2345678901234567890123`, `1E-400`, `1e999`), as the same call
streamed as text does, and not the float (`1.2345678901234567`, `0`, `Infinity`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

import allama
from allama import ChatRequest, ExtractionMode
from allama.adapters._surrogates import lone_surrogates
from allama.adapters.anthropic._decode import decode_response as anthropic_response
from allama.adapters.gemini._decode import decode_response as gemini_response
from allama.adapters.gemini._stream import decode_stream as gemini_stream
from allama.adapters.ollama._decode import decode_response as ollama_response
from allama.adapters.ollama._stream import decode_stream as ollama_stream
from allama.adapters.openai_responses._decode import decode_response as responses_response
from allama.stream import StreamCollector
from allama.transport import Transport
from allama.types import ChatResponse, ToolCall

TOOL = "submit_structured_output"
LONG = "1.2345678901234567890123"
"""23 digits: a float keeps 17 (`1.2345678901234567`)."""
BIG = "123456789012345678901234567890"
"""An integer beyond 2**64."""


class Amount(BaseModel):
    amount: Decimal


class Priced(BaseModel):
    amount: Decimal
    big: int


def _anthropic(args: str) -> str:
    return (
        '{"id":"msg_1","type":"message","role":"assistant","model":"claude-3-5-haiku-20241022",'
        f'"content":[{{"type":"tool_use","id":"toolu_1","name":"{TOOL}","input":{args}}}],'
        '"stop_reason":"tool_use","stop_sequence":null,'
        '"usage":{"input_tokens":1,"output_tokens":2}}'
    )


def _gemini(args: str) -> str:
    return (
        '{"candidates":[{"content":{"parts":[{"functionCall":'
        f'{{"name":"{TOOL}","args":{args}}}}}],"role":"model"}},'
        '"finishReason":"STOP","index":0}],'
        '"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3},'
        '"modelVersion":"gemini-2.5-flash"}'
    )


def _ollama(args: str, *, done: bool = True) -> str:
    end = ',"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":2}'
    return (
        '{"model":"llama3.1","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant",'
        f'"content":"","tool_calls":[{{"function":{{"name":"{TOOL}","arguments":{args}}}}}]}}'
        + (end if done else ',"done":false}')
    )


def _responses(args: str) -> str:
    return (
        '{"id":"resp_1","object":"response","status":"completed","model":"gpt-5-mini",'
        '"output":[{"id":"fc_1","type":"function_call","call_id":"call_1",'
        f'"name":"{TOOL}","arguments":{args},"status":"completed"}}],'
        '"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}'
    )


_BODIES: dict[str, tuple[Callable[[str], str], Callable[..., ChatResponse]]] = {
    "anthropic": (_anthropic, anthropic_response),
    "gemini": (_gemini, gemini_response),
    "ollama": (_ollama, ollama_response),
    "responses": (_responses, responses_response),
}

_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic": ("claude-3-5-haiku-latest", {}),
    "gemini": ("gemini-2.5-flash", {}),
    "ollama": ("llama3.1", {}),
    "responses": ("gpt-5-mini", {"api": "responses"}),
}


def _provider(name: str, answer: bytes, content_type: str) -> allama.ChatProvider:
    def endpoint(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=answer, headers={"content-type": content_type})

    transport = Transport(client=httpx2.Client(transport=httpx2.MockTransport(endpoint)))
    preset = "openai" if name == "responses" else name
    return allama.provider(preset, api_key="k", transport=transport, **_CALLS[name][1])


def _request(name: str) -> ChatRequest:
    return ChatRequest(_CALLS[name][0]).user("x").with_option(ExtractionMode.FORCED_TOOL)


def _arguments(response: ChatResponse) -> str:
    (call,) = [block for block in response.content if isinstance(block, ToolCall)]
    return call.arguments


@pytest.mark.parametrize("name", sorted(_BODIES))
@pytest.mark.parametrize(
    ("written", "expected"),
    [(LONG, LONG), ("1E-400", "1E-400"), ("1e999", "1E+999")],
)
def test_a_decimal_from_a_whole_body_is_the_number_written(
    name: str, written: str, expected: str
) -> None:
    body = _BODIES[name][0](f'{{"amount": {written}}}').encode()
    provider = _provider(name, body, "application/json")
    extracted = allama.extract(provider, Amount, _request(name))
    assert str(extracted.value.amount) == expected
    assert extracted.source == f'{{"amount":{written}}}'


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_a_body_s_arguments_keep_each_number_as_written(name: str) -> None:
    make, decode = _BODIES[name]
    args = f'{{"é": "ü", "amount": {LONG}, "big": {BIG}, "n": [1.10, -0, 1e2, 1E-7, 1E16]}}'
    response = decode(200, {}, make(args).encode(), provider=name)
    assert _arguments(response) == (
        f'{{"é":"ü","amount":{LONG},"big":{BIG},"n":[1.10,0,1e2,1E-7,1E16]}}'
    )
    for number in ("1E-7", "1E16"):  # a float with an exponent and no point, alone
        response = decode(200, {}, make(f'{{"x": {number}, "z": null}}').encode(), provider=name)
        assert _arguments(response) == f'{{"x":{number},"z":null}}'


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_arguments_without_a_float_or_with_one_that_holds_its_digits_read_as_before(
    name: str,
) -> None:
    make, decode = _BODIES[name]
    response = decode(200, {}, make(f'{{"amount": 0.5, "big": {BIG}}}').encode(), provider=name)
    assert _arguments(response) == f'{{"amount":0.5,"big":{BIG}}}'
    response = decode(200, {}, make('{"n": 1, "s": "1.5"}').encode(), provider=name)
    assert _arguments(response) == '{"n":1,"s":"1.5"}'
    response = decode(200, {}, make('{"n": NaN}').encode(), provider=name)
    assert _arguments(response) == '{"n":NaN}'


def test_an_integer_beyond_64_bits_beside_a_long_decimal_is_kept() -> None:
    body = _anthropic(f'{{"amount": {LONG}, "big": {BIG}}}').encode()
    provider = _provider("anthropic", body, "application/json")
    extracted = allama.extract(provider, Priced, _request("anthropic"))
    assert extracted.value == Priced(amount=Decimal(LONG), big=int(BIG))


def test_a_body_with_half_a_character_keeps_its_numbers_and_its_u_fffd() -> None:
    body = _anthropic(f'{{"s": "a\\ud800b", "amount": {LONG}}}').encode()
    response = anthropic_response(200, {}, body, provider="anthropic")
    assert _arguments(response) == f'{{"s":"a\ufffdb","amount":{LONG}}}'
    assert response.warnings == (lone_surrogates("anthropic"),)


def _collect(events: Any) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


def test_a_gemini_stream_s_arguments_keep_each_number_as_written() -> None:
    args = f'{{"amount": {LONG}, "big": {BIG}, "tiny": 1E-400, "huge": 1e999}}'
    stream = f"data: {_gemini(args)}\r\n\r\n".encode()
    response = _collect(gemini_stream(stream, provider="gemini"))
    assert _arguments(response) == f'{{"amount":{LONG},"big":{BIG},"tiny":1E-400,"huge":1e999}}'


def test_a_gemini_call_s_streamed_partial_arguments_keep_each_number_as_written() -> None:
    def chunk(call: dict[str, Any], literal: str = "") -> str:
        candidate: dict[str, Any] = {"content": {"parts": [{"functionCall": call}]}}
        if not call.get("willContinue"):
            candidate["finishReason"] = "STOP"
        text = json.dumps({"candidates": [candidate]})
        return "data: " + text.replace('"NUMBER"', literal) + "\n\n"

    stream = (
        chunk({"name": TOOL, "willContinue": True})
        + chunk(
            {
                "partialArgs": [{"jsonPath": "$.amount", "numberValue": "NUMBER"}],
                "willContinue": True,
            },
            LONG,
        )
        + chunk({"partialArgs": [{"jsonPath": "$.big", "numberValue": "NUMBER"}]}, BIG)
    ).encode()
    response = _collect(gemini_stream(stream, provider="gemini"))
    assert _arguments(response) == f'{{"amount":{LONG},"big":{BIG}}}'


def test_an_ollama_stream_s_arguments_keep_each_number_as_written() -> None:
    args = f'{{"amount": {LONG}, "big": {BIG}, "tiny": 1E-400, "huge": 1e999}}'
    stream = (_ollama(args, done=False) + "\n" + _ollama('{"n": 0.5}') + "\n").encode()
    response = _collect(ollama_stream(stream, provider="ollama"))
    assert [block.arguments for block in response.content if isinstance(block, ToolCall)] == [
        f'{{"amount":{LONG},"big":{BIG},"tiny":1E-400,"huge":1e999}}',
        '{"n":0.5}',
    ]


@pytest.mark.parametrize(
    ("name", "answer", "content_type"),
    [
        ("gemini", lambda args: f"data: {_gemini(args)}\n\n", "text/event-stream"),
        ("ollama", lambda args: _ollama(args) + "\n", "application/x-ndjson"),
    ],
)
@pytest.mark.parametrize(
    ("written", "expected"),
    [(LONG, LONG), ("1E-400", "1E-400"), ("1e999", "1E+999")],
)
def test_a_decimal_from_a_stream_is_the_number_written(
    name: str,
    answer: Callable[[str], str],
    content_type: str,
    written: str,
    expected: str,
) -> None:
    body = answer(f'{{"amount": {written}, "big": {BIG}}}').encode()
    provider = _provider(name, body, content_type)
    with allama.extract_stream(provider, Priced, _request(name)) as stream:
        extracted = stream.finish()
    assert str(extracted.value.amount) == expected
    assert extracted.value.big == int(BIG)


def test_each_of_many_calls_keeps_its_own_numbers() -> None:
    """Each call's arguments are found in the body read again by going up from them: the
    numbers of one call never land in another's, however many there are."""
    blocks = [
        {
            "type": "tool_use",
            "id": f"toolu_{index}",
            "name": "f",
            "input": {"v": [f"{index}.10000000000000000001"], "s": "x"},
        }
        for index in range(300)
    ]
    text = (
        json.dumps(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": blocks,
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
        .replace('["', "[")
        .replace('"]', "]")
    )
    response = anthropic_response(200, {}, text.encode(), provider="anthropic", model="m")
    calls = [block for block in response.content if isinstance(block, ToolCall)]
    assert [call.arguments for call in calls] == [
        f'{{"v":[{index}.10000000000000000001],"s":"x"}}' for index in range(300)
    ]
