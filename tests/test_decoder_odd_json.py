"""The native decoders read odd JSON as they read what they do not know, never crashing.

A field that should be a string and holds a list or an object (a block's or an item's
`type`, a response's `status`, an error's `reason`, a stream event's `type`) is one allama
does not know: read as an unknown string is, never a `TypeError`. A token count written as
a whole-number float (`20.0`) is that count, as the Chat Completions wire reads it (Gemini's
too); a flag, a fraction, a negative or an infinite number is not reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from _responses_support import stream_of
from allama.adapters.anthropic._decode import decode_response as anthropic_response
from allama.adapters.anthropic._sse import decode_stream as anthropic_stream
from allama.adapters.gemini._decode import decode_response as gemini_response
from allama.adapters.gemini._errors import error_from_response as gemini_error
from allama.adapters.gemini._stream import decode_stream as gemini_stream
from allama.adapters.ollama._decode import decode_response as ollama_response
from allama.adapters.ollama._stream import decode_stream as ollama_stream
from allama.adapters.openai_compat._decode import LONE_SURROGATES
from allama.adapters.openai_responses._decode import decode_response as responses_response
from allama.adapters.openai_responses._sse import decode_stream as responses_stream
from allama.errors import AuthenticationError, IncompleteStreamError, InvalidRequestError
from allama.stream import StreamCollector
from allama.types import (
    ChatResponse,
    Finish,
    FinishReason,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallDelta,
    Usage,
)


def _collect(events: Iterable[StreamEvent]) -> ChatResponse:
    collector = StreamCollector()
    for event in events:
        collector.push(event)
    return collector.finish()


# Anthropic


def _anthropic(content: list[Any], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage if usage is not None else {"input_tokens": 10, "output_tokens": 5},
    }


def _anthropic_stream(message: dict[str, Any]) -> bytes:
    start = {**message, "content": [], "stop_reason": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": message["usage"]["output_tokens"]}
    events.append({"type": "message_delta", "delta": delta, "usage": usage})
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _read_anthropic(message: dict[str, Any]) -> ChatResponse:
    return anthropic_response(200, {}, json.dumps(message).encode())


def test_an_anthropic_block_whose_type_is_a_list_is_kept_as_an_unknown_block() -> None:
    odd = {"type": ["text"], "text": "Hi."}
    response = _read_anthropic(_anthropic([odd, {"type": "text", "text": "Paris."}]))
    assert response.content == (TextPart(text="Paris."),)
    assert response.provider_value("anthropic", "server_blocks") == [odd]
    assert response.finish_reason == FinishReason.STOP


# Responses


def _responses(output: list[Any], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_766_000_000,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-2025-08-07",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 7},
    }
    return {**base, **fields}


MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Paris.", "annotations": []}],
}


def _read_responses(body: dict[str, Any]) -> ChatResponse:
    return responses_response(200, {}, json.dumps(body).encode())


def test_a_responses_item_whose_type_is_a_list_is_kept_as_an_unknown_item() -> None:
    odd = {"id": "x_1", "type": ["message"], "call_id": "call_1", "name": "f"}
    response = _read_responses(_responses([odd, MESSAGE]))
    assert response.content == (TextPart(text="Paris."),)
    assert response.provider_value("openai_responses", "items") == [odd]
    assert response.finish_reason == FinishReason.STOP


@pytest.mark.parametrize("status", [{"state": "completed"}, ["queued"]])
def test_a_responses_status_that_is_not_a_string_is_no_finish_reason(status: Any) -> None:
    response = _read_responses(_responses([MESSAGE], status=status))
    assert response.text() == "Paris."
    assert response.finish_reason is None


def test_a_responses_event_whose_type_is_an_object_is_passed_over() -> None:
    body = _responses([MESSAGE])
    data = stream_of(body)
    plain = _collect(responses_stream(data))
    # `response.in_progress`, with its type garbled: an event allama does not know.
    odd = data.replace(
        b'"type": "response.in_progress"', b'"type": {"v": "response.in_progress"}', 1
    )
    assert odd != data
    assert _collect(responses_stream(odd)) == plain == _read_responses(body)


def test_a_terminal_responses_event_whose_type_is_a_list_leaves_the_stream_unfinished() -> None:
    data = stream_of(_responses([MESSAGE])).replace(
        b'"type": "response.completed"', b'"type": ["response.completed"]'
    )
    events = responses_stream(data)
    # The answer streamed so far was yielded; the stream has no end allama can read.
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Paris."
    assert not any(isinstance(e, Finish) for e in events)
    with pytest.raises(IncompleteStreamError) as caught:
        _collect(events)
    assert str(caught.value) == "the stream ended before the response finished"


# Gemini


def _gemini_bad_key(message: str) -> dict[str, Any]:
    return {
        "error": {
            "code": 400,
            "message": message,
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": ["API_KEY_INVALID"],
                    "domain": "googleapis.com",
                }
            ],
        }
    }


@pytest.mark.parametrize(
    ("message", "cls"),
    [
        # Its words still say the key was refused.
        ("API key not valid. Please pass a valid API key.", AuthenticationError),
        # A reason that is not a string says nothing: a plain 400.
        ("Bad request.", InvalidRequestError),
    ],
)
def test_a_gemini_error_reason_that_is_a_list_is_an_unknown_reason(
    message: str, cls: type[Exception]
) -> None:
    body = json.dumps(_gemini_bad_key(message)).encode()
    error = gemini_error(400, {}, body, provider="gemini", model="gemini-2.5-flash")
    assert type(error) is cls
    assert str(error) == message
    assert error.status == 400


# Whole-number float counts


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ((20.0, 3.0), (20, 3)),
        ((20, 3), (20, 3)),
        ((0.0, 1e3), (0, 1000)),
        ((20.5, -3.0), (None, None)),  # a fraction, a negative count
        ((True, "3"), (None, None)),
    ],
)
def test_whole_number_float_counts_are_read_on_every_native_wire(
    counts: tuple[Any, Any], expected: tuple[int | None, int | None]
) -> None:
    given_in, given_out = counts
    want_in, want_out = expected
    # Anthropic: the body, and a stream's `message_start` usage.
    message = _anthropic(
        [{"type": "text", "text": "Hi."}],
        {"input_tokens": given_in, "output_tokens": given_out, "cache_read_input_tokens": 0.0},
    )
    read = _read_anthropic(message)
    assert read.usage == Usage(input_tokens=want_in, output_tokens=want_out, cache_read_tokens=0)
    assert _collect(anthropic_stream(_anthropic_stream(message))).usage == read.usage
    # Responses: the body, and the terminal event's response.
    usage = {
        "input_tokens": given_in,
        "input_tokens_details": {"cached_tokens": 0.0},
        "output_tokens": given_out,
        "output_tokens_details": {"reasoning_tokens": 2.0},
    }
    body = _responses([MESSAGE], usage=usage)
    read = _read_responses(body)
    assert read.usage == Usage(
        input_tokens=want_in, output_tokens=want_out, reasoning_tokens=2, cache_read_tokens=0
    )
    assert _collect(responses_stream(stream_of(body))).usage == read.usage
    # Ollama: the body, and a stream's last line.
    line = {
        "model": "llama3.2",
        "created_at": "2026-08-07T06:08:09.335586Z",
        "message": {"role": "assistant", "content": "Hi."},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": given_in,
        "eval_count": given_out,
    }
    ollama_usage = (
        None
        if want_in is None and want_out is None
        else Usage(input_tokens=want_in, output_tokens=want_out)
    )
    assert ollama_response(200, {}, json.dumps(line).encode()).usage == ollama_usage
    streamed = _collect(ollama_stream(json.dumps(line).encode() + b"\n"))
    assert streamed.usage == ollama_usage


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ((20.0, 3.0, 7.0), Usage(input_tokens=20, output_tokens=10, reasoning_tokens=7)),
        ((20, 3, 7), Usage(input_tokens=20, output_tokens=10, reasoning_tokens=7)),
        ((20.5, -3.0, True), Usage()),  # a fraction, a negative count, a flag
    ],
)
def test_whole_number_float_counts_are_read_from_gemini(
    counts: tuple[Any, Any, Any], expected: Usage
) -> None:
    prompt, candidates, thoughts = counts
    body = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "Hi."}]},
                "finishReason": "STOP",
                "index": 0.0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "thoughtsTokenCount": thoughts,
        },
        "modelVersion": "gemini-2.5-flash",
    }
    read = gemini_response(200, {}, json.dumps(body).encode())
    assert read.text() == "Hi."
    assert read.usage == expected
    streamed = _collect(gemini_stream(f"data: {json.dumps(body)}\r\n\r\n".encode()))
    assert streamed.usage == read.usage


def test_an_infinite_count_is_not_reported() -> None:
    # `1e400` is read as an infinite float: no count at all.
    raw = json.dumps(_anthropic([{"type": "text", "text": "Hi."}]))
    raw = raw.replace('"input_tokens": 10', '"input_tokens": 1e400')
    assert anthropic_response(200, {}, raw.encode()).usage == Usage(output_tokens=5)


# Half of a character (a lone surrogate, escaped `\ud83d`), which no UTF-8 text holds: kept
# as it came, the answer could not be written as JSON (`to_json` raised a pydantic error, a
# batch's row failed as `value_unstorable`). Every native wire reads it as Chat Completions
# does: each half as U+FFFD, with its warning, in its words.

LONE = (
    "the provider sent text that holds half of a character (a lone surrogate, escaped as "
    "`\\ud83d`), which UTF-8 cannot carry: each such half was read as U+FFFD"
)


def _answer(api: str, text: str) -> ChatResponse:
    """`text` as `api`'s answer body (`json.dumps` escapes a lone surrogate, `\\ud83d`)."""
    body: dict[str, Any]
    if api == "anthropic":
        body = _anthropic([{"type": "text", "text": text}])
        read = anthropic_response
    elif api == "gemini":
        content = {"role": "model", "parts": [{"text": text}]}
        body = {"candidates": [{"content": content, "finishReason": "STOP"}]}
        read = gemini_response
    elif api == "ollama":
        body = {"model": "m", "message": {"role": "assistant", "content": text}, "done": True}
        read = ollama_response
    else:
        message = {**MESSAGE, "content": [{"type": "output_text", "text": text}]}
        body = _responses([message])
        read = responses_response
    sent = json.dumps(body).encode()
    assert b"\\ud83d" in sent  # (a pair too: `\\ud83d\\ude00`)
    return read(200, {}, sent, provider=api, model="m")


APIS = ["anthropic", "gemini", "ollama", "openai_responses"]


def test_the_words_are_chat_completions_own() -> None:
    assert LONE == LONE_SURROGATES


@pytest.mark.parametrize("api", APIS)
def test_a_lone_surrogate_escape_is_read_as_u_fffd_with_a_warning(api: str) -> None:
    response = _answer(api, "hi \ud83d there \ude00")
    assert response.text() == "hi \ufffd there \ufffd"
    assert [(w.kind, w.message, w.provider) for w in response.warnings] == [
        ("approximated", LONE, api)
    ]
    assert ChatResponse.from_json(response.to_json()) == response  # storable


@pytest.mark.parametrize("api", APIS)
def test_a_surrogate_pair_escaped_whole_is_one_character_and_no_warning(api: str) -> None:
    response = _answer(api, "hi \U0001f600")
    assert (response.text(), response.warnings) == ("hi \U0001f600", ())


def test_a_lone_surrogate_in_a_key_or_a_call_is_read_as_u_fffd_too() -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "f\ud83d", "input": {"a\udc00": "b"}}
    message = _anthropic([{"type": "text", "text": "ok"}, call])
    response = anthropic_response(200, {}, json.dumps(message).encode(), provider="anthropic")
    (tool_call,) = response.tool_calls()
    assert (tool_call.name, tool_call.arguments) == ("f\ufffd", '{"a\ufffd":"b"}')
    assert [w.message for w in response.warnings] == [LONE]
    assert ChatResponse.from_json(response.to_json()) == response


def test_an_error_body_with_a_lone_surrogate_is_still_that_error() -> None:
    body = {"type": "error", "error": {"type": "authentication_error", "message": "bad \ud83d"}}
    with pytest.raises(AuthenticationError):
        anthropic_response(200, {}, json.dumps(body).encode(), provider="anthropic")


# In a stream, the halves of a character may come escaped in separate chunks: they are one
# character again once joined, and a half still alone at the end is U+FFFD, with the warning.

DELTAS = ["hi \ud83d", "\ude00 and \ud83d", " there"]
"""An emoji's halves in two chunks, then half of one alone."""


def _streamed(api: str, deltas: list[str]) -> Iterable[StreamEvent]:
    """`api`'s stream of a text sent as `deltas`, each in an event of its own."""
    if api == "anthropic":
        message = _anthropic([])
        start = {**message, "stop_reason": None}
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": start},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            *(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": d},
                }
                for d in deltas
            ),
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 5},
            },
            {"type": "message_stop"},
        ]
        data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return anthropic_stream(data.encode())
    if api == "gemini":
        chunks: list[dict[str, Any]] = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": d}]}}]} for d in deltas
        ]
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
        return gemini_stream("".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode())
    lines = [
        {"model": "m", "message": {"role": "assistant", "content": d}, "done": False}
        for d in deltas
    ]
    lines[-1].update(done=True, done_reason="stop")
    return ollama_stream("".join(f"{json.dumps(line)}\n" for line in lines).encode())


@pytest.mark.parametrize("api", ["anthropic", "gemini", "ollama"])
def test_a_streamed_half_left_alone_is_u_fffd_with_a_warning(api: str) -> None:
    events = list(_streamed(api, DELTAS))
    # The deltas are as they came; the collected text pairs the halves first.
    assert [e.text for e in events if isinstance(e, TextDelta)] == DELTAS
    collector = StreamCollector()
    collector.provider = api
    for event in events:
        collector.push(event)
    response = collector.finish()
    assert response.text() == "hi \U0001f600 and \ufffd there"
    assert [(w.kind, w.message, w.provider) for w in response.warnings] == [
        ("approximated", LONE, api)
    ]
    assert ChatResponse.from_json(response.to_json()) == response


@pytest.mark.parametrize("api", ["anthropic", "gemini", "ollama"])
def test_an_emoji_streamed_in_halves_is_one_character_and_no_warning(api: str) -> None:
    response = _collect(_streamed(api, ["hi \ud83d", "\ude00!"]))
    assert (response.text(), response.warnings) == ("hi \U0001f600!", ())


# A tool call's arguments in an Anthropic stream are JSON text (`input_json_delta`), where
# the body has an `input` object: half of a character escaped alone in that text stayed
# `\ud83d` with no warning, and `parsed_arguments()` gave a lone surrogate no UTF-8 write
# takes. It reads as the body's `input` does: U+FFFD, with the warning, however the deltas
# cut the escape.

CALL_INPUT = {"city": "caf\ud83d", "to": "\udc00x", "path": "\\\ud83d"}
CALL_TEXT = json.dumps(CALL_INPUT, separators=(",", ":"))
"""The arguments as the stream writes them: `CALL_INPUT`, compact, each half escaped
(`\\ud83d`, the last one after an escaped backslash)."""


def _anthropic_call_stream(pieces: list[str]) -> bytes:
    """An Anthropic stream of one tool call whose arguments come as `pieces`."""
    start = {**_anthropic([]), "stop_reason": None}
    block = {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": block},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
            for piece in pieces
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _anthropic_call_streamed(pieces: list[str]) -> ChatResponse:
    collector = StreamCollector()
    collector.provider = "anthropic"
    for event in anthropic_stream(_anthropic_call_stream(pieces), provider="anthropic"):
        collector.push(event)
    return collector.finish()


def _cuts(text: str) -> list[list[str]]:
    """`text` whole, a character a piece, and cut in two at every place."""
    return [[text], list(text)] + [[text[:at], text[at:]] for at in range(1, len(text))]


def test_an_anthropic_streamed_call_reads_an_escaped_half_as_its_body_does() -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "get", "input": CALL_INPUT}
    message = {**_anthropic([call]), "stop_reason": "tool_use"}
    whole = anthropic_response(200, {}, json.dumps(message).encode(), provider="anthropic")
    read = '{"city":"caf\ufffd","to":"\ufffdx","path":"\\\\\ufffd"}'
    assert CALL_TEXT == '{"city":"caf\\ud83d","to":"\\udc00x","path":"\\\\\\ud83d"}'
    assert whole.tool_calls()[0].arguments == read
    said = [("approximated", LONE, "anthropic")]
    assert [(w.kind, w.message, w.provider) for w in whole.warnings] == said
    for pieces in _cuts(CALL_TEXT):
        streamed = _anthropic_call_streamed(pieces)
        assert streamed.tool_calls() == whole.tool_calls(), pieces
        assert [(w.kind, w.message, w.provider) for w in streamed.warnings] == said
        assert streamed.tool_calls()[0].parsed_arguments() == json.loads(read)
        assert ChatResponse.from_json(streamed.to_json()) == streamed


def test_an_anthropic_streamed_call_gives_no_half_in_a_delta() -> None:
    # `\ud83d` cut after `\ud8`: the cut escape waits for the next delta, read whole there.
    events = anthropic_stream(_anthropic_call_stream(['{"a":"x\\ud8', '3d y"}']))
    assert [e.arguments for e in events if isinstance(e, ToolCallDelta)] == [
        '{"a":"x',
        '\ufffd y"}',
    ]
    # A first half at a delta's end waits for its second: none came before the stop.
    events = anthropic_stream(_anthropic_call_stream(['{"a":"x', "\\ud83d"]))
    assert [e.arguments for e in events if isinstance(e, ToolCallDelta)] == ['{"a":"x', "\ufffd"]


@pytest.mark.parametrize(
    "text",
    [
        '{"a":"\\ud83d\\ude00 \\uD83D\\uDE00"}',  # a pair escaped whole, either case
        '{"a":"\\\\ud83d \\\\\\\\ud83d"}',  # a backslash escaped, then `ud83d`: no escape
        '{"a":"caf\\u00e9 \\n"}',
    ],
)
def test_an_anthropic_streamed_call_keeps_what_escapes_no_half_alone(text: str) -> None:
    for pieces in _cuts(text):
        streamed = _anthropic_call_streamed(pieces)
        assert (streamed.tool_calls()[0].arguments, streamed.warnings) == (text, ()), pieces


# Keys that differ only in the halves of characters they hold (`"\ud83d"`, `"\ud83e"`) are
# one key once each half is U+FFFD: read as a key written twice is in a body, its first place
# and its last value, as `"\ufffd"` written twice is.


def test_keys_that_differ_only_in_their_halves_are_read_as_one_key_written_twice() -> None:
    halves = '{"type":"tool_use","id":"t","name":"get","input":{"\\ud83d":1,"b":2,"\\ud83e":3}}'
    literal = '{"type":"tool_use","id":"t","name":"get","input":{"\ufffd":1,"b":2,"\ufffd":3}}'
    read = []
    for call in (halves, literal):
        body = json.dumps(_anthropic([])).replace('"content": []', f'"content": [{call}]')
        read.append(anthropic_response(200, {}, body.encode(), provider="anthropic"))
    assert read[0].tool_calls() == read[1].tool_calls()
    assert read[0].tool_calls()[0].arguments == '{"\ufffd":3,"b":2}'
    assert [w.message for w in read[0].warnings] == [LONE]


def test_an_anthropic_streamed_server_block_reads_an_escaped_half_as_its_body_does() -> None:
    # A block kept verbatim held the half as it came: `to_json` raised on the answer.
    block = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    query = {"query": "caf\ud83d"}
    whole = {**_anthropic([{**block, "input": query}]), "stop_reason": "end_turn"}
    read = anthropic_response(200, {}, json.dumps(whole).encode(), provider="anthropic")
    start = {**_anthropic([]), "stop_reason": None}
    delta = {"type": "input_json_delta", "partial_json": json.dumps(query)}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    collector = StreamCollector()
    collector.provider = "anthropic"
    for event in anthropic_stream(data.encode(), provider="anthropic"):
        collector.push(event)
    streamed = collector.finish()
    kept = [{**block, "input": {"query": "caf\ufffd"}}]
    assert read.provider_value("anthropic", "server_blocks") == kept
    assert streamed.provider_value("anthropic", "server_blocks") == kept
    assert streamed.warnings == read.warnings
    assert [w.message for w in streamed.warnings] == [LONE]
    assert ChatResponse.from_json(streamed.to_json()) == streamed


@pytest.mark.parametrize("arguments", [{"city": "caf\ud83d"}, {"city": "café"}])
def test_chat_completions_arguments_sent_as_an_object_read_alike_whole_and_streamed(
    arguments: dict[str, str],
) -> None:
    # A few servers (Mistral) send a call's arguments as an object: written back as text, a
    # half escaped alone is U+FFFD with its warning in a stream as in a body, and other
    # characters are kept as themselves.
    from allama.adapters.openai_compat._decode import decode_response as chat_response
    from allama.adapters.openai_compat._sse import decode_stream as chat_stream

    function = {"name": "get", "arguments": arguments}
    call = {"id": "call_1", "type": "function", "function": function}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    whole = {"id": "c1", "object": "chat.completion", "model": "m", "choices": [choice]}
    first = {"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, **call}]}}
    chunks = [
        {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [first]},
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
        },
    ]
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    read = chat_response(200, {}, json.dumps(whole).encode(), provider="mistral")
    collector = StreamCollector()
    collector.provider = "mistral"  # (as the provider's stream sets it)
    for event in chat_stream(sse.encode(), provider="mistral"):
        collector.push(event)
    streamed = collector.finish()
    text = '{"city":"caf\ufffd"}' if "\ud83d" in arguments["city"] else '{"city":"café"}'
    said = [("approximated", LONE, "mistral")] if "\ud83d" in arguments["city"] else []
    for answer in (read, streamed):
        assert answer.tool_calls()[0].arguments == text
        assert [(w.kind, w.message, w.provider) for w in answer.warnings] == said
