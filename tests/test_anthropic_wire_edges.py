"""Edges of Anthropic's wire that cost or lose what a user paid for.

A response that ran the code execution tool (billed by container time past a free quota)
has no cost, with the reason, rather than its tokens' alone; a stream whose provider fails
after the stream's finish (an `event: error` before `message_stop`) keeps its whole answer,
as a connection cut there does; a streamed tool call whose start gives its input and whose
deltas give it again has its arguments once.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

import allama
from _recording import provider
from allama import ChatRequest, Extracted
from allama.adapters.anthropic._decode import decode_response
from allama.adapters.anthropic._sse import decode_stream
from allama.errors import InvalidRequestError, OverloadedError, ServerError
from allama.stream import StreamCollector
from allama.types import Usage

pytest.importorskip("genai_prices")

MODEL = "claude-sonnet-4-5-20250929"


def sse(*events: dict[str, Any]) -> bytes:
    return "".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events
    ).encode()


def message_start(usage: dict[str, int]) -> dict[str, Any]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return {"type": "message_start", "message": message}


def message(content: list[dict[str, Any]], usage: dict[str, int]) -> dict[str, Any]:
    return {
        **message_start(usage)["message"],
        "content": content,
        "stop_reason": "end_turn",
        "container": {"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"},
    }


def streamed(content: list[dict[str, Any]], usage: dict[str, int]) -> bytes:
    """`content` as Anthropic streams it: text in a delta, a tool's input in a JSON delta,
    every other block whole on its start."""
    events: list[dict[str, Any]] = [message_start({"input_tokens": usage["input_tokens"]})]
    for index, block in enumerate(content):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        elif block["type"] == "server_tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start, delta = block, {}
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        if delta:
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return sse(*events)


class Stats(BaseModel):
    mean: float


def extracted(body: Any, request: ChatRequest, *, stream: bool, run: str) -> Extracted[Stats]:
    made, _ = provider("anthropic", (200, body))
    if run == "sync":
        if not stream:
            return allama.extract(made, Stats, request)
        with allama.extract_stream(made, Stats, request) as live:
            for _ in live:
                pass
            return live.finish()

    async def main() -> Extracted[Stats]:
        if not stream:
            return await allama.aextract(made, Stats, request)
        async with allama.aextract_stream(made, Stats, request) as live:
            async for _ in live:
                pass
            return await live.finish()

    return asyncio.run(main())


# F1: code execution is billed by container time, which no price data allama has prices.

CODE_RUNS = [
    pytest.param(
        "bash_code_execution",
        "bash_code_execution_tool_result",
        {"type": "bash_code_execution_result", "stdout": "5.5\n", "stderr": "", "return_code": 0},
        id="bash",
    ),
    pytest.param(
        "code_execution",
        "code_execution_tool_result",
        {"type": "code_execution_result", "stdout": "5.5\n", "stderr": "", "return_code": 0},
        id="python",
    ),
    pytest.param(
        "text_editor_code_execution",
        "text_editor_code_execution_tool_result",
        {"type": "text_editor_code_execution_create_result", "is_file_update": False},
        id="text-editor",
    ),
]

ONE_RUN = (
    "the container time of 1 code execution runs, billed past a free quota whose use the "
    "response does not say, at prices genai-prices does not hold"
)
USAGE = {"input_tokens": 1000, "output_tokens": 1000}
CODE_REQUEST = ChatRequest(MODEL).user("The mean of 1 to 10?")


@pytest.mark.parametrize("run", ["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize(("tool", "result_type", "result"), CODE_RUNS)
def test_a_response_that_ran_code_execution_has_no_cost_with_the_reason(
    tool: str, result_type: str, result: dict[str, Any], stream: bool, run: str
) -> None:
    """It had the price of its tokens alone (0.018 USD here), as if the container were free."""
    content = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": tool, "input": {"command": "x"}},
        {"type": result_type, "tool_use_id": "srvtoolu_1", "content": result},
        {"type": "text", "text": '{"mean": 5.5}'},
    ]
    body = streamed(content, USAGE) if stream else message(content, USAGE)
    got = extracted(body, CODE_REQUEST, stream=stream, run=run)
    assert got.value == Stats(mean=5.5)
    assert got.metadata.usage == Usage(input_tokens=1000, output_tokens=1000)
    assert got.metadata.cost is None
    assert got.metadata.cost_missing == ONE_RUN
    # A server tool of another kind (a web search, priced per request) keeps a cost.
    searched = [
        {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_search", "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_2", "content": []},
        {"type": "text", "text": '{"mean": 5.5}'},
    ]
    body = streamed(searched, USAGE) if stream else message(searched, USAGE)
    got = extracted(body, CODE_REQUEST, stream=stream, run=run)
    assert got.metadata.cost is not None and got.metadata.cost_missing is None


def test_each_code_execution_result_counts_and_the_reason_says_how_many() -> None:
    content = [
        {"type": "server_tool_use", "id": "a", "name": "bash_code_execution", "input": {}},
        {"type": "bash_code_execution_tool_result", "tool_use_id": "a", "content": {}},
        {"type": "server_tool_use", "id": "b", "name": "text_editor_code_execution", "input": {}},
        {"type": "text_editor_code_execution_tool_result", "tool_use_id": "b", "content": {}},
        {"type": "text", "text": '{"mean": 5.5}'},
    ]
    got = extracted(message(content, USAGE), CODE_REQUEST, stream=False, run="sync")
    assert got.metadata.cost is None
    assert got.metadata.cost_missing == ONE_RUN.replace("of 1 code", "of 2 code")


# F2: the provider failing after the stream's finish.

ANSWER = '{"name": "London", "pop": 9}'


def finished_then(*after: dict[str, Any]) -> bytes:
    """A stream whose answer came whole with its finish and usage, then `after`, and never
    its `message_stop`."""
    return sse(
        message_start({"input_tokens": 10, "output_tokens": 1}),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": ANSWER},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
        *after,
    )


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
FAILED_AFTER = finished_then(OVERLOADED)


class City(BaseModel):
    name: str
    pop: int


CITY_REQUEST = ChatRequest(MODEL).user("London?")
USED = Usage(input_tokens=10, output_tokens=9)


def test_an_error_event_after_the_finish_keeps_the_whole_answer_in_chat_stream() -> None:
    made, recorder = provider("anthropic", (200, FAILED_AFTER))
    response = made.chat_stream(CITY_REQUEST).response()
    assert (response.text(), response.finish_reason, response.usage) == (ANSWER, "stop", USED)

    async def main() -> allama.ChatResponse:
        return await (await made.achat_stream(CITY_REQUEST)).response()

    response = asyncio.run(main())
    assert (response.text(), response.finish_reason, response.usage) == (ANSWER, "stop", USED)
    # Through a retrying wrapper: used, not sent again.
    wrapped = allama.RetryingProvider(made)
    assert wrapped.chat_stream(CITY_REQUEST).response().text() == ANSWER
    assert len(recorder.bodies) == 3


@pytest.mark.parametrize("run", ["sync", "async"])
def test_an_error_event_after_the_finish_keeps_the_extraction_with_its_usage_once(
    run: str,
) -> None:
    """It raised `OverloadedError` with `passes=0`, while a cut at the same point kept it."""
    cut = extracted_city(finished_then(), run)
    got = extracted_city(FAILED_AFTER, run)
    assert got.value == City(name="London", pop=9)
    assert (got.metadata.passes, got.metadata.usage) == (1, USED)
    assert got.metadata.cost is not None and got.metadata.cost == cut.metadata.cost


def extracted_city(body: bytes, run: str) -> Extracted[City]:
    made, _ = provider("anthropic", (200, body))
    if run == "sync":
        with allama.extract_stream(made, City, CITY_REQUEST) as live:
            for _ in live:
                pass
            return live.finish()

    async def main() -> Extracted[City]:
        async with allama.aextract_stream(made, City, CITY_REQUEST) as live:
            async for _ in live:
                pass
            return await live.finish()

    return asyncio.run(main())


def test_a_provider_error_after_the_finish_ends_an_openai_stream_too() -> None:
    """The rule is the streams' own, for every provider."""

    def chunk(delta: dict[str, Any] | None, reason: str | None = None, **more: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": reason}]
        body = {"id": "c", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
        return f"data: {json.dumps({**body, 'choices': choices, **more})}\n\n"

    body = (
        chunk({"role": "assistant", "content": "hi"})
        + chunk({}, "stop")
        + chunk(None, usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})
        + 'data: {"error": {"message": "The server had an error", "type": "server_error"}}\n\n'
    )
    made, _ = provider("openai", (200, body.encode()))
    response = made.chat_stream(ChatRequest("gpt-4o-mini").user("hi")).response()
    assert (response.text(), response.finish_reason) == ("hi", "stop")
    assert response.usage == Usage(input_tokens=11, output_tokens=7)


def test_a_provider_error_after_an_early_finish_with_nothing_answered_fails_the_stream() -> None:
    """Some Chat Completions servers send `finish_reason` early, on a reasoning chunk: an
    error after it, with no text or tool call come, is no end of an answer."""

    def chunk(delta: dict[str, Any], reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        body = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
        return f"data: {json.dumps(body)}\n\n"

    error = 'data: {"error": {"message": "upstream overloaded", "type": "server_error"}}\n\n'
    body = chunk({"role": "assistant", "reasoning_content": "think"}, "stop") + error
    made, _ = provider("openai-compatible", (200, body.encode()), base_url="http://h/v1")
    with pytest.raises(ServerError, match="upstream overloaded") as raised:
        made.chat_stream(ChatRequest("m").user("hi")).response()
    assert raised.value.retryable


def test_an_error_before_the_finish_or_of_another_kind_still_fails_the_stream() -> None:
    # (Checked beside the change: the same error event, a moment after the finish, is kept.)
    made, _ = provider("anthropic", (200, FAILED_AFTER))
    assert made.chat_stream(CITY_REQUEST).response().text() == ANSWER
    before = sse(
        message_start({"input_tokens": 10, "output_tokens": 1}),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "{"}},
        OVERLOADED,
    )
    made, _ = provider("anthropic", (200, before))
    with pytest.raises(OverloadedError), allama.extract_stream(made, City, CITY_REQUEST) as live:
        live.finish()
    refused = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    made, _ = provider("anthropic", (200, finished_then(refused)))
    with pytest.raises(InvalidRequestError):
        made.chat_stream(CITY_REQUEST).response()


# F3: a tool call's input on its start and again in its deltas.


def tool_stream(start_input: Any, *pieces: str) -> bytes:
    block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": start_input}
    return sse(
        message_start({"input_tokens": 10, "output_tokens": 1}),
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
            "usage": {"output_tokens": 7},
        },
        {"type": "message_stop"},
    )


def arguments(body: bytes) -> str:
    collector = StreamCollector()
    for event in decode_stream(body):
        collector.push(event)
    return collector.finish().tool_calls()[0].arguments


def test_deltas_after_a_start_that_gave_the_input_replace_it() -> None:
    """Both were joined: `'{"a":1}{"a":1}'`, arguments that are not JSON."""
    assert arguments(tool_stream({"a": 1}, '{"a":', "1}")) == '{"a":1}'
    assert arguments(tool_stream({"a": 1}, '{"b": 2}')) == '{"b": 2}'
    # Without deltas (or with empty ones) the start's input is the arguments; without
    # either, the empty object, as the message not streamed has them.
    assert json.loads(arguments(tool_stream({"a": 1}))) == {"a": 1}
    assert json.loads(arguments(tool_stream({"a": 1}, ""))) == {"a": 1}
    assert arguments(tool_stream({})) == "{}"
    whole = {
        **message_start({"input_tokens": 10, "output_tokens": 7})["message"],
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}],
        "stop_reason": "tool_use",
    }
    decoded = decode_response(200, {}, json.dumps(whole).encode())
    streamed_call = json.loads(arguments(tool_stream({"a": 1}, '{"a":', "1}")))
    assert json.loads(decoded.tool_calls()[0].arguments) == streamed_call


# A user turn after tool calls begins with their results


_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360606060000000050001a5f645400000000049454e44ae426082"
)
_OK = message([{"type": "text", "text": "ok"}], {"input_tokens": 1, "output_tokens": 1})
_SHOT = allama.ToolDefinition(
    name="screenshot", parameters={"type": "object", "properties": {"screen": {"type": "integer"}}}
)
_CALLS = [
    allama.ToolCall(id="toolu_01", name="screenshot", arguments='{"screen":1}'),
    allama.ToolCall(id="toolu_02", name="screenshot", arguments='{"screen":2}'),
]


def _sent_turns(preset: str, request: ChatRequest, **options: Any) -> tuple[Any, list[Any]]:
    made, recorder = provider(preset, (200, _OK), **options)
    response = made.chat(request)
    return response, recorder.bodies[-1]["messages"]


def _moved(display: str, index: int) -> tuple[str, str]:
    """The warning on a user message the encoder moved after its turn's tool results."""
    return (
        "approximated",
        f"{display} takes a user turn after tool calls only with their results first; the "
        f"user message at `messages[{index}]`, given before a tool result of its turn, was "
        "moved after the turn's results",
    )


@pytest.mark.parametrize(
    ("preset", "options", "display"),
    [
        ("anthropic", {}, "Anthropic"),
        (
            "azure-anthropic",
            {"endpoint": "https://r.services.ai.azure.com"},
            "Claude in Microsoft Foundry",
        ),
        (
            "anthropic-compatible",
            {"base_url": "https://host.example/anthropic"},
            "the Anthropic-compatible endpoint",
        ),
    ],
)
def test_results_each_followed_by_an_image_come_first_then_the_images(
    preset: str, options: dict[str, Any], display: str
) -> None:
    image = allama.ImagePart(data=_PNG, media_type="image/png")
    request = (
        ChatRequest(MODEL)
        .with_tools([_SHOT])
        .user("Compare both screens")
        .assistant(_CALLS)
        .tool_result("toolu_01", "screen 1 captured")
        .user(None, image)
        .tool_result("toolu_02", "screen 2 captured")
        .user(None, image)
    )
    response, turns = _sent_turns(preset, request, **options)
    assert [turn["role"] for turn in turns] == ["user", "assistant", "user"]
    content = turns[2]["content"]
    assert [block["type"] for block in content] == ["tool_result", "tool_result", "image", "image"]
    assert [block.get("tool_use_id") for block in content[:2]] == ["toolu_01", "toolu_02"]
    assert [block.get("content") for block in content[:2]] == [
        "screen 1 captured",
        "screen 2 captured",
    ]
    # Matched by id, but the first image, given before the second result, is now read
    # after it: said, by its place alone.
    assert [(str(w.kind), w.message) for w in response.warnings] == [_moved(display, 3)]


def test_a_remark_recorded_before_the_result_goes_after_it() -> None:
    request = (
        ChatRequest(MODEL)
        .with_tools([_SHOT])
        .user("Take a screenshot")
        .assistant(_CALLS[:1])
        .user("(it may take a second)")
        .tool_result("toolu_01", "screen 1 captured")
        .user("and describe it")
    )
    response, turns = _sent_turns("anthropic", request)
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "screen 1 captured"},
        {"type": "text", "text": "(it may take a second)"},
        {"type": "text", "text": "and describe it"},
    ]
    assert [(str(w.kind), w.message) for w in response.warnings] == [_moved("Anthropic", 2)]


def test_a_user_turn_after_no_tool_calls_keeps_its_order() -> None:
    image = allama.ImagePart(data=_PNG, media_type="image/png")
    request = ChatRequest(MODEL).user("First").user(None, image).user("Last")
    _, turns = _sent_turns("anthropic", request)
    assert [block["type"] for block in turns[0]["content"]] == ["text", "image", "text"]
