"""Half of a character (a lone surrogate) escaped inside the model's JSON (`"x\\ud83d"`), in
a tool call's arguments, a native answer's text or a stream's pieces of either: pydantic's
reader refuses it (`unexpected end of hex escape`), so the paid answer was a `ParseError`
(and a retry paid again), though the same half in an Anthropic body's `input` object read
as U+FFFD with the warning. Every mode now reads it so, streamed or whole, sync or async;
a pair escaped whole is one character and no warning; broken JSON still fails."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from _recording import provider
from allama import ChatRequest, ExtractionMode, Extractor, ParseError
from allama.types import ChatResponse, TextDelta, ToolCallDelta

LONE = (
    "the provider sent text that holds half of a character (a lone surrogate, escaped as "
    "`\\ud83d`), which UTF-8 cannot carry: each such half was read as U+FFFD"
)

NATIVE, FORCED = ExtractionMode.NATIVE, ExtractionMode.FORCED_TOOL


class Note(BaseModel):
    a: str


def _chat(output: str, mode: ExtractionMode) -> dict[str, Any]:
    """A Chat Completions body whose answer is `output`: the tool call's arguments in
    forced-tool mode, the message's text in native mode."""
    message: dict[str, Any] = {"role": "assistant", "content": output}
    if mode is FORCED:
        function = {"name": "submit_structured_output", "arguments": output}
        call = {"id": "c", "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    finish = "tool_calls" if mode is FORCED else "stop"
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _said(response: ChatResponse) -> list[tuple[str, str, str | None]]:
    return [(w.kind.value, w.message, w.provider) for w in response.warnings]


@pytest.mark.parametrize("mode", [NATIVE, FORCED])
@pytest.mark.parametrize("repair", [False, True])
def test_an_escaped_half_in_the_output_is_u_fffd_with_the_warning(
    mode: ExtractionMode, repair: bool
) -> None:
    chat, recorder = provider("openai", (200, _chat('{"a": "x\\ud83d y"}', mode)))
    request = ChatRequest("gpt-4o").user("x").with_option(mode)
    extractor = Extractor(repair=repair)
    extracted = extractor.extract(chat, Note, request)
    assert extracted.value == Note(a="x\ufffd y")
    assert _said(extracted.response) == [("approximated", LONE, "openai")]
    assert extracted.metadata.passes == 1 and len(recorder.bodies) == 1  # not asked again
    assert ChatResponse.from_json(extracted.response.to_json()) == extracted.response
    again = asyncio.run(extractor.aextract(chat, Note, request))
    assert (again.value, again.response.warnings) == (extracted.value, extracted.response.warnings)


def test_an_escaped_half_in_a_key_or_a_list_is_u_fffd_too() -> None:
    output = '{"k\\udc00": ["\\ud83d", "ok \\ud83d\\ude00"]}'
    chat, _ = provider("openai", (200, _chat(output, FORCED)))
    request = ChatRequest("gpt-4o").user("x").with_option(FORCED)
    extracted = Extractor().extract(chat, dict[str, list[str]], request)
    assert extracted.value == {"k\ufffd": ["\ufffd", "ok \U0001f600"]}
    # (Before it, the warning that a map goes without `strict`.)
    assert [w.message for w in extracted.response.warnings][1:] == [LONE]


def test_an_escaped_half_beside_prose_is_read_by_repair_with_the_warning() -> None:
    chat, _ = provider("openai", (200, _chat('Here: {"a": "x\\ud83d"} done', NATIVE)))
    request = ChatRequest("gpt-4o").user("x").with_option(NATIVE)
    extracted = Extractor(repair=True).extract(chat, Note, request)
    assert (extracted.value, extracted.metadata.repaired) == (Note(a="x\ufffd"), True)
    assert [w.message for w in extracted.response.warnings] == [LONE]


@pytest.mark.parametrize("mode", [NATIVE, FORCED])
def test_a_pair_escaped_whole_is_one_character_and_no_warning(mode: ExtractionMode) -> None:
    chat, _ = provider("openai", (200, _chat('{"a": "x\\ud83d\\ude00"}', mode)))
    request = ChatRequest("gpt-4o").user("x").with_option(mode)
    extracted = Extractor().extract(chat, Note, request)
    assert (extracted.value, extracted.response.warnings) == (Note(a="x\U0001f600"), ())


@pytest.mark.parametrize(
    "output",
    ['{"a": "x\\ud83"}', '{"a": "x\\ud83d",}', '{"a": "x\\ud83d"', '{"a": "x\\ud83d", "a": "y"}'],
)
def test_broken_json_with_an_escaped_half_still_fails(output: str) -> None:
    chat, _ = provider("openai", (200, _chat(output, FORCED)))
    request = ChatRequest("gpt-4o").user("x").with_option(FORCED)
    with pytest.raises(ParseError):
        Extractor(repair=True).extract(chat, Note, request)


# Keys that differ only in their halves (`"\ud83d"`, `"\ud83e"`) are one key once each
# half is U+FFFD: the value kept the last entry alone (`{"\ufffd": 2}`) with only the
# warning, where `"\ufffd"` written twice is refused as a key written twice. Refused so too,
# in the same words, as a `ParseError` a retry follows.

TWICE = '{"\ufffd": 1, "\ufffd": 2}'
"""The same object, its keys written with U+FFFD itself."""


@pytest.mark.parametrize(
    "output",
    [
        '{"\\ud83d": 1, "\\ud83e": 2}',
        '{"\\udc00": 1, "\\ufffd": 2}',  # (a half beside U+FFFD escaped)
        '{"\\ud83d": 1, "\ufffd": 2}',
        '{"\ud83d": 1, "\ud83e": 2}',  # (escaped by the body itself, not in the output's text)
    ],
)
@pytest.mark.parametrize("mode", [NATIVE, FORCED])
def test_keys_that_differ_only_in_their_halves_are_a_key_written_twice(
    output: str, mode: ExtractionMode
) -> None:
    refused = []
    for text in (output, TWICE):
        chat, _ = provider("openai", (200, _chat(text, mode)))
        request = ChatRequest("gpt-4o").user("x").with_option(mode)
        with pytest.raises(ParseError) as raised:
            Extractor(repair=True).extract(chat, dict[str, int], request)
        refused.append(str(raised.value))
    assert refused[0] == refused[1]
    assert refused[0].endswith(": the key `\ufffd` appears twice in the object")


def test_keys_read_as_one_in_a_nested_object_are_refused_there_and_asked_again() -> None:
    output = '{"a": {"\\ud83d": 1, "\\ud83e": 2}}'
    chat, recorder = provider(
        "openai", (200, _chat(output, NATIVE)), (200, _chat('{"a": {"b": 3}}', NATIVE))
    )
    request = ChatRequest("gpt-4o").user("x").with_option(NATIVE)
    extracted = Extractor(retries=1).extract(chat, dict[str, dict[str, int]], request)
    assert (extracted.value, extracted.metadata.passes) == ({"a": {"b": 3}}, 2)
    told = recorder.bodies[1]["messages"][-1]["content"]
    assert "the key `\ufffd` appears twice in the object at `a`" in told
    assert "\\ud83d" not in told and "\ud83d" not in told


def _anthropic_stream(pieces: list[str]) -> bytes:
    """An Anthropic stream whose forced tool call's arguments come as `pieces`."""
    start = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 5, "output_tokens": 0},
    }
    block = {"type": "tool_use", "id": "t1", "name": "submit_structured_output", "input": {}}
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
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


STREAMS = [
    (['{"a": "x\\ud83d"}'], "x\ufffd", [LONE]),
    (['{"a": "x\\ud8', '3d y"}'], "x\ufffd y", [LONE]),
    (['{"a": "x\\ud83d', '\\ude00"}'], "x\U0001f600", []),
]


@pytest.mark.parametrize(("pieces", "read", "said"), STREAMS)
def test_a_streamed_escaped_half_is_u_fffd_and_every_preview_stores(
    pieces: list[str], read: str, said: list[str]
) -> None:
    claude, _ = provider("anthropic", (200, _anthropic_stream(pieces)))
    request = ChatRequest("claude-sonnet-4-5").user("x").with_option(FORCED)
    previews: list[Any] = []
    with Extractor().extract_stream(claude, Note, request) as opened:
        for event in opened:
            if isinstance(event, TextDelta | ToolCallDelta):
                previews.append(opened.partial)
        extracted = opened.finish()
        last = opened.partial
    assert extracted.value == Note(a=read)
    assert [w.message for w in extracted.response.warnings] == said
    assert last == extracted.value
    for preview in previews:
        if preview is not None:
            preview.model_dump_json()  # no preview holds a half no JSON dump takes


@pytest.mark.parametrize(("pieces", "read", "said"), STREAMS)
def test_an_async_streamed_escaped_half_is_u_fffd(
    pieces: list[str], read: str, said: list[str]
) -> None:
    claude, _ = provider("anthropic", (200, _anthropic_stream(pieces)))
    request = ChatRequest("claude-sonnet-4-5").user("x").with_option(FORCED)

    async def run() -> Any:
        async with Extractor().aextract_stream(claude, Note, request) as opened:
            async for _ in opened:
                pass
            return await opened.finish()

    extracted = asyncio.run(run())
    assert extracted.value == Note(a=read)
    assert [w.message for w in extracted.response.warnings] == said
